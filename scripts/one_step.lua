-- one_step.lua - one decoding step by hand, then the same loop through model:generate.
--
--   workbench scripts/one_step.lua
require("wb.cli").parse(arg, "scripts/one_step.lua", {}, { about = "one decoding step by hand, then the same loop through model:generate." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local wb = L.wb

local function measure()
  local r = {}
  local logits = L.logits_for(L.UNCERTAIN)          -- one raw score per vocabulary entry
  r.V, r.max_logit = #logits, logits:max()
  local probs = wb.sampling.apply(logits, {temperature = 1.0}, {})
  r.sum, r.top = probs:sum(), L.top_tokens(probs, 5)
  r.greedy_id = probs:argmax()                      -- temperature 0 always picks this one
  r.greedy = L.tok:decode({r.greedy_id})
  -- Eight weighted dice rolls from one seeded generator (PCG32, the one generation uses).
  r.sampled_ids = wb.sampling.draw(probs, 1, 8)
  r.sampled = {}
  for i, id in ipairs(r.sampled_ids) do r.sampled[i] = ("%q"):format(L.tok:decode({id})) end
  -- generate repeats the step: sample, append, run the model on the new token, repeat.
  r.out = L.model:generate(L.UNCERTAIN, {max_tokens = 30, temperature = 0, stop = {"\n"}})
  return r
end

local r = measure()
if L.is_main("one_step.lua") then
  print(("logits: %d scores, highest %.2f"):format(r.V, r.max_logit))
  print(("probabilities sum to %.4f; top 5: %s"):format(r.sum, r.top))
  print(("greedy pick: %q   8 sampled picks (seed 1): %s"):format(r.greedy, table.concat(r.sampled, " ")))
  print(("greedy continuation: %q | stop_reason: %s | tokens: %d"):format(r.out.text,
        r.out.stop_reason, #r.out.token_ids))
end
return r
