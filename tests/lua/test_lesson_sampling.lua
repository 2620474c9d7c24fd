-- test_lesson_sampling.lua - the Part B lessons' claims, asserted on the shipped model
-- (models/tinylm-base, or WB_MODEL). Skips, saying so, when no trained model exists yet.
local wb = require("wb")
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local dir = wb.default_model_dir()
local f = io.open(dir .. "/config.json")
if not f then
  print("SKIP: no trained model at " .. dir .. " (run scripts/train_tinylm.lua)")
  os.exit(0)
end
f:close()

local function lesson(name) return dofile("scripts/" .. name .. ".lua") end
local conclusion = T.conclusion
local L = lesson("setup")

T.test("setup: the uncertain prompt is spread out and the certain one is not", function()
  local r = L.measure()
  T.check(r.prompts[1].entropy > 1.5, ("uncertain entropy %.2f"):format(r.prompts[1].entropy))
  T.check(r.prompts[2].entropy < 0.5, ("certain entropy %.2f"):format(r.prompts[2].entropy))
  T.check(math.abs(r.max_entropy - math.log(r.V, 2)) < 1e-9)
end)

T.test("one step: probabilities sum to 1 and greedy generate starts with the argmax", function()
  local r = lesson("one_step")
  T.check(math.abs(r.sum - 1) < 1e-4)
  T.eq(#r.sampled_ids, 8)
  T.eq(r.out.token_ids[1], r.greedy_id)
  T.check(r.out.stop_reason == "stop" or r.out.stop_reason == "length")
end)

T.test("temperature: entropy rises with T when uncertain and stays near zero when certain", function()
  local rows = lesson("temperature")
  local last = -1
  for _, row in ipairs(rows) do
    if row.prompt == L.UNCERTAIN then
      T.check(row.entropy > last or row.temperature == 0,
              ("entropy did not rise at T=%g"):format(row.temperature))
      last = row.entropy
    elseif row.temperature <= 1.0 then
      T.check(row.entropy < 0.5, ("certain prompt at T=%g: %.2f bits"):format(row.temperature, row.entropy))
    end
  end
  -- The sentences follow the rows.
  local function e(prompt, t)
    for _, row in ipairs(rows) do if row.prompt == prompt and row.temperature == t then return row.entropy end end
  end
  local rising = true
  for i = 2, #rows do
    if rows[i].prompt == L.UNCERTAIN and rows[i - 1].prompt == L.UNCERTAIN and rows[i].entropy <= rows[i - 1].entropy then
      rising = false
    end
  end
  T.eq(conclusion(rows, "uncertain_rises").holds, rising)
  T.eq(conclusion(rows, "greedy_zero").holds, e(L.UNCERTAIN, 0) == 0 and e(L.CERTAIN, 0) == 0)
  local du, dc = e(L.UNCERTAIN, 1.5) - e(L.UNCERTAIN, 0.3), e(L.CERTAIN, 1.5) - e(L.CERTAIN, 0.3)
  T.eq(conclusion(rows, "certain_moves_less").holds, dc < du / 4)
  T.check(conclusion(rows, "certain_moves_less").text:find(("%.2f to %.2f"):format(e(L.UNCERTAIN, 0.3), e(L.UNCERTAIN, 1.5)), 1, true))
end)

T.test("filters: top_k = 5 leaves exactly 5 and min-p adapts to the shape", function()
  local r = lesson("filters")
  local by = {}
  for _, row in ipairs(r.filters) do by[row.setting] = row end
  T.eq(by["top_k = 5"].survivors, 5)
  T.eq(by["top_k = 1"].survivors, 1)
  T.check(by["top_p = 0.5"].survivors <= by["top_p = 0.9"].survivors)
  T.check(by["top_p = 0.9"].survivors <= by["top_p = 0.95"].survivors)
  T.check(by["min_p = 0.2"].survivors <= by["min_p = 0.05"].survivors)
  -- Sure prompt: min_p keeps (almost) only the winner; flat prompt: it keeps many.
  T.check(r.shapes[1].min_p_0_1 <= 2, "certain prompt kept " .. r.shapes[1].min_p_0_1)
  T.check(r.shapes[3].min_p_0_1 > r.shapes[1].min_p_0_1)
  T.eq(conclusion(r, "min_p_adapts").holds, r.shapes[1].min_p_0_1 < r.shapes[3].min_p_0_1)
  T.check(conclusion(r, "min_p_adapts").text:find(("kept %d token(s) on the sure prompt"):format(r.shapes[1].min_p_0_1), 1, true))
  T.check(conclusion(r, "top_p_counts").text:find(("kept %d on the sure prompt and %d on the flat"):format(
    r.shapes[1].top_p_0_9, r.shapes[3].top_p_0_9), 1, true))
end)

T.test("penalties: frequency grows with the count, presence does not; strong settings change greedy text", function()
  local r = lesson("penalties")
  local a = r.arithmetic
  T.near(a[1].frequency, a[1].none, 1e-6, "no repeats, no effect")
  for i = 3, #a do
    T.check(a[i].frequency < a[i - 1].frequency, "frequency penalty pushes harder with each repeat")
    T.near(a[i].presence, a[2].presence, 1e-6, "presence penalty is charged once")
  end
  T.check(a[2].presence < a[1].none, "presence penalty lowers an already-said token")
  local by = {}
  for _, row in ipairs(r.behaviour) do by[row.setting] = row end
  T.check(by["repetition 2.0"].distinct > by["no penalty"].distinct,
          "a strong repetition penalty makes the greedy continuation more varied")
  T.check(by["frequency 2.0"].max_count < by["no penalty"].max_count,
          "a strong frequency penalty lowers the most repeated token's count")
  local changed = {}
  for i = 2, #r.behaviour do
    if r.behaviour[i].text ~= r.behaviour[1].text then changed[#changed + 1] = r.behaviour[i].setting end
  end
  T.same_list(r.changed, changed, "settings said to change the text")
  T.eq(conclusion(r, "only_some_change").holds, #changed > 0 and #changed < #r.behaviour - 1)
end)

T.test("stops: hold-back keeps the stream equal to the text, the leak does not", function()
  local r = lesson("stops_and_max_tokens")
  T.eq(r.held.streamed, r.held.text)
  T.check(not r.held.streamed:find("\nCustomer", 1, true))
  if r.leaked.streamed ~= r.leaked.text then
    T.check(r.leaked.streamed:find("Customer", #r.leaked.text + 1, true) ~= nil)
  end
  for _, row in ipairs(r.runs) do
    if row.setting == "max_tokens 8" then T.eq(row.tokens_paid, 8) end
    if row.stop_reason == "stop" then T.check(row.trimmed >= 1) end
  end
end)

T.test("stops: over many prompts and stop strings the stream equals the text", function()
  local prompts = {L.UNCERTAIN, "Agent (", "Customer (Bo): Hi, my", "Ticket: ", "Customer (Ana): I"}
  for trial = 1, 40 do
    local prompt = prompts[trial % #prompts + 1]
    local params = {max_tokens = 40, temperature = 1.0, seed = trial}
    local full = L.model:generate(prompt, params)
    if #full.text >= 3 then
      local a = 1 + (trial * 13) % (#full.text - 1)
      local stop = full.text:sub(a, a + trial % 6)
      params.stop = {stop, stop .. "\1"}
      local it, s, c, st = L.model:stream(prompt, params)
      local got = {}
      for piece in it, s, c, st do got[#got + 1] = piece end
      local r = st:result()
      T.eq(table.concat(got), r.text, "stream vs text")
      T.check(not r.text:find(stop, 1, true), "stop string left in text")
    end
  end
end)

T.test("seeds: the same seed reproduces and different seeds vary", function()
  local r = lesson("seeds")
  T.check(r.same_seed_identical)
  T.check(r.replay_identical)
  T.check(r.n_distinct >= 2)
  T.eq(conclusion(r, "seed_enough").holds, r.same_seed_identical and r.replay_identical)
end)

T.test("diversity: greedy gives one reply and temperature gives more", function()
  local rows = lesson("diversity")
  T.eq(rows[1].distinct_replies, 1)
  T.check(rows[5].distinct_replies >= rows[2].distinct_replies)
  T.check(rows[5].mean_logprob <= rows[2].mean_logprob)
  local a, b, c, f = rows[2], rows[3], rows[5], rows[6]
  T.eq(conclusion(rows, "temperature_tradeoff").holds,
       a.distinct_replies <= b.distinct_replies and b.distinct_replies <= c.distinct_replies
       and a.mean_logprob > b.mean_logprob and b.mean_logprob > c.mean_logprob)
  T.eq(conclusion(rows, "min_p_keeps_and_cuts").holds,
       2 * f.distinct_replies >= c.distinct_replies and f.worst_logprob > c.worst_logprob)
end)

T.test("on a model without TinyLM's sure and open prompts the Part B lessons stop with a clear message", function()
  local d = T.tmpdir()
  T.make_tiny_model(d, { n_ctx = 64 })
  local exe = T.EXE
  local ok = os.execute(("WB_MODEL='%s' %s scripts/temperature.lua > %s/out 2> %s/err"):format(d, exe, d, d))
  local err = T.read_file(d .. "/err")
  T.check(not ok, "the lesson should stop")
  T.check(err:find("written for TinyLM's memorised prompts", 1, true), err)
  T.check(err:find("so this one stops here", 1, true), err)
  T.check(not err:find("traceback", 1, true), "a message, not a crash: " .. err)
  T.rmdir(d)
end)

T.done()
