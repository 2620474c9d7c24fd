-- wb.steps: the step record equals the generation it describes, stage by stage.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local steps = require("wb.steps")
local model = wb.load()
local tok = model.tokenizer

T.test("a seeded sampled record redraws every token and ends where generate ends", function()
  local params = {temperature = 0.9, top_k = 40, top_p = 0.95, seed = 7, max_tokens = 40}
  local rec = steps.record(model, "Customer (Ana): Hi, my", params, {verify = true})
  local gen = model:generate("Customer (Ana): Hi, my", params)
  T.eq(#rec.steps, #gen.token_ids, "step count")
  for k, id in ipairs(gen.token_ids) do T.eq(rec.steps[k].id, id, "token " .. k) end
  T.eq(rec.text, gen.text)
  for _, st in ipairs(rec.steps) do
    T.eq(#st.stages, #steps.STAGES)
    local last = st.stages[#st.stages]
    T.check(last.chosen_p > 0, "the chosen token had mass in the final stage")
    T.check(last.survivors <= 40, "top_k 40 leaves at most 40 survivors")
    T.check(math.abs(st.logprob - math.log(last.chosen_p)) < 1e-9)
  end
end)

T.test("the raw stage is the softmax of the session's logits", function()
  local rec = steps.record(model, "Agent (", {temperature = 0, max_tokens = 3})
  local s <close> = model:session()
  local p = s:prefill(tok:encode("Agent ("))
  p = p:softmax()
  local best = rec.steps[1].stages[1].top[1]
  T.eq(best.id, p:argmax())
  T.check(math.abs(best.p - p:get(best.id)) < 1e-5, "raw probability")
  T.eq(rec.steps[1].stages[5].survivors, 1, "temperature 0 is one-hot")
end)

T.test("a choice constraint reports the mass it removed and the token it overruled", function()
  local rec = steps.record(model, "Customer (Ana): Hi, my", {temperature = 0, max_tokens = 8},
                           {constraint = {kind = "choice", choices = {" billing", " refund"}}})
  T.check(rec.text == " billing" or rec.text == " refund", "constrained text: " .. rec.text)
  local c = rec.steps[1].constraint
  T.check(c and c.removed_mass > 0.5, "the memorised ' account' lost its mass")
  T.eq(c.overruled.text, " account")
end)

T.test("record rejects unknown options and bad constraints by name", function()
  T.checkerror("unknown option 'tpo'", steps.record, model, "x", {}, {tpo = 3})
  T.checkerror("constraint.kind", steps.record, model, "x", {}, {constraint = {kind = "nope"}})
  T.checkerror("temperature", steps.record, model, "x", {temperature = -1})
end)

T.test("attention = true records each step's attention as an uncached forward of its prefix gives it", function()
  local rec = steps.record(model, "Customer (Ana): Hi, my", {temperature = 0.8, seed = 2, max_tokens = 6},
                           {attention = true})
  local info = model:info()
  local ids = table.move(rec.prompt_ids, 1, #rec.prompt_ids, 1, {})
  T.eq(#rec.prompt_tokens, #ids)
  for k, st in ipairs(rec.steps) do
    T.eq(st.attention_position, st.position - 1, "the position that chose the token")
    local r = model:forward(ids, {attentions = true, positions = {-1}})
    T.eq(#st.attention, info.n_layer)
    for l = 1, info.n_layer do
      T.eq(#st.attention[l], info.n_head)
      for h = 1, info.n_head do
        local row = st.attention[l][h]
        T.eq(#row, st.position, "positions 0..attention_position")
        for j = 1, #row do T.near(row[j], r.attentions:get(l - 1, 0, h - 1, j - 1), 1e-5, "weight") end
      end
    end
    ids[#ids + 1] = st.id
  end
  T.eq(steps.record(model, "Hi", {temperature = 0, max_tokens = 2}).steps[1].attention, nil, "off by default")
end)

T.test("the record encodes as JSON", function()
  local rec = steps.record(model, "Hi,", {temperature = 0.7, seed = 3, max_tokens = 5})
  local back = wb.json.decode(wb.json.encode(rec))
  T.eq(#back.steps, #rec.steps)
end)

T.done()
