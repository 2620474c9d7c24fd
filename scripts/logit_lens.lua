-- logit_lens.lua - what each layer would say if it were the last.
--
--   workbench scripts/logit_lens.lua [--prompt TEXT] [--target TOKEN] [--top K] [--sure P]
--
-- The residual stream is one vector per position that every layer adds to. The logit lens
-- reads it between layers: take the hidden state entering layer l (model:forward with
-- hidden_states = true), put it through the model's own final norm and output head
-- (model:head), and look at the distribution that comes out. After the last layer that is the
-- model's real prediction; before it, it shows how far the stack had got.
--
-- On TinyLM after "Customer (Ana): Hi, my", this prints the top tokens at every depth and the
-- probability and rank of " account", then says from which layer on the model is sure of it
-- (p >= --sure and the top token from there to the output), what the lens reads before any
-- layer, and whether the lens after the last layer is the model's own logits. Each sentence is
-- chosen from this run's numbers; WB_LESSON_RECORD=FILE writes them with the numbers
-- (tests/lua/test_lesson_inspect.lua recomputes them).
local wb = require("wb")
local lesson = require("wb.lesson")

local o = require("wb.cli").parse(arg, "scripts/logit_lens.lua", {
  { "prompt", "string", "Customer (Ana): Hi, my", "text whose last position is read" },
  { "target", "string", " account", "the token to follow through the layers" },
  { "top", "count", 3, "top tokens shown per layer", 1 },
  { "sure", "number", 0.5, "probability counted as sure" },
}, { about = "the logit lens: each layer's hidden state through the final norm and head" })

local model = wb.load()
local tok = model.tokenizer
local info = model:info()
local ids = tok:encode(o.prompt)
if #ids == 0 then io.stderr:write("logit_lens.lua: --prompt is empty\n") os.exit(2) end
local target = tok:id(o.target)
if not target then
  io.stderr:write(("logit_lens.lua: --target %q is not one token of this model's vocabulary\n"):format(o.target))
  os.exit(2)
end
if not (o.sure > 0 and o.sure <= 1) then
  io.stderr:write("logit_lens.lua: --sure must be in (0, 1]\n") os.exit(2)
end

local r = model:forward(ids, { hidden_states = true })
local last = #ids - 1
local function shown(id) return ("%q"):format(tok:token(id)) end

local rec = { lesson = "logit_lens", model = model.dir, prompt = o.prompt, prompt_ids = ids,
              target = o.target, target_id = target, sure = o.sure, n_layer = info.n_layer,
              layers = {} }

print(("model %s (%s, %d layers); prompt %q, %d tokens; reading the last position (%s)"):format(
  model.dir, info.model_type, info.n_layer, o.prompt, #ids, shown(ids[#ids])))
print(("layer l = the hidden state entering layer l (0: the embeddings, %d: after the last layer),"
  .. " through the final norm and head\n"):format(info.n_layer))
local p_head = ("p(%q)"):format(o.target)
local head_fmt = "%5s | %-" .. (18 * o.top) .. "s | %" .. math.max(10, #p_head) .. "s | %s"
print(head_fmt:format("layer", ("top %d (p)"):format(o.top), p_head, "rank"))
print(("-"):rep(5 + 3 + 18 * o.top + 3 + math.max(10, #p_head) + 8))
for l = 0, info.n_layer do
  local probs = model:head(r.hidden_states:vec(l, last)):softmax()
  local top = probs:topk(o.top)
  local rank = 1
  local pt = probs:get(target)
  for i = 0, #probs - 1 do
    if probs:get(i) > pt or (probs:get(i) == pt and i < target) then rank = rank + 1 end
  end
  local row = { layer = l, top = {}, p_target = pt, rank_target = rank }
  local cells = {}
  for i, t in ipairs(top) do
    row.top[i] = { id = t.id, text = tok:token(t.id), p = t.p }
    cells[i] = ("%s %.3f"):format(shown(t.id), t.p)
  end
  rec.layers[l + 1] = row
  print(head_fmt:format(l, table.concat(cells, "  "), ("%.4f"):format(pt), rank))
end

-- The model's own prediction, for the last conclusion.
local real = r.logits:softmax()
local real_top = real:argmax()
rec.model_top = { id = real_top, text = tok:token(real_top), p = real:get(real_top) }
local lensL = rec.layers[info.n_layer + 1]
local maxdiff = 0
do
  local lp = model:head(r.hidden_states:vec(info.n_layer, last)):softmax()
  for i = 0, #lp - 1 do maxdiff = math.max(maxdiff, math.abs(lp:get(i) - real:get(i))) end
end
rec.final_max_diff = maxdiff

-- The first layer from which the target is the top token with p >= sure all the way up.
local sure_from = nil
for l = info.n_layer, 0, -1 do
  local row = rec.layers[l + 1]
  if row.rank_target == 1 and row.p_target >= o.sure then sure_from = l else break end
end
rec.sure_from = sure_from or wb.json.null

print()
local c = lesson.conclude
if sure_from then
  local row = rec.layers[sure_from + 1]
  c(rec, "sure_from", true,
    sure_from == 0
      and ("The model is sure of %s already at the embeddings (p = %.3f): the lens reads it from "
           .. "layer 0 on."):format(shown(target), row.p_target)
      or ("The model becomes sure of %s after %d of its %d layers: the hidden state entering "
          .. "layer %d already gives it p = %.3f as the top token (entering layer %d: p = %.4f), "
          .. "and it stays on top up to the output (p = %.3f)."):format(shown(target), sure_from,
          info.n_layer, sure_from, row.p_target, sure_from - 1, rec.layers[sure_from].p_target,
          lensL.p_target),
    "")
else
  local best, at = -1, 0
  for l, row in ipairs(rec.layers) do if row.p_target > best then best, at = row.p_target, l - 1 end end
  c(rec, "sure_from", false, "",
    ("The model never becomes sure of %s here: it is not the top token with p >= %.2f from any "
     .. "layer to the output (its best is p = %.4f at layer %d)."):format(shown(target), o.sure, best, at))
end
local l0 = rec.layers[1]
c(rec, "layer0_reads_input", l0.top[1].id == ids[#ids],
  ("Before any layer the lens reads back the input token itself: %s (p = %.3f) at the embeddings%s."):format(
    shown(l0.top[1].id), l0.top[1].p, info.tie_word_embeddings
      and ", because with tied embeddings the head is the embedding matrix and a token's own vector matches itself best"
      or ""),
  ("Before any layer the lens already reads %s (p = %.3f), not the input token %s."):format(
    shown(l0.top[1].id), l0.top[1].p, shown(ids[#ids])))
c(rec, "final_is_model", maxdiff < 1e-5 and lensL.top[1].id == real_top,
  ("After the last layer the lens is the model's own output (%s, p = %.3f; largest "
   .. "probability difference from model:forward's logits: %.2g)."):format(shown(real_top), real:get(real_top), maxdiff),
  ("After the last layer the lens differs from the model's output by %.3g in probability."):format(maxdiff))
lesson.print_conclusions(rec)
lesson.emit(rec)
