-- diversity.lua - 20 samples per setting: distinct replies, distinct first tokens, and the mean
-- log-probability of each sample under the raw model (temperature 1, no filters) as a quality
-- check: settings that pull in the tail produce text the model itself finds unlikely.
--
--   workbench scripts/diversity.lua
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local stats = require("wb.stats")

local SAMPLES = 20
local SETTINGS = {
  {name = "greedy", params = {temperature = 0}},
  {name = "T 0.7", params = {temperature = 0.7}},
  {name = "T 1.0", params = {temperature = 1.0}},
  {name = "T 1.0, top_p 0.9", params = {temperature = 1.0, top_p = 0.9}},
  {name = "T 1.5", params = {temperature = 1.5}},
  {name = "T 1.5, min_p 0.1", params = {temperature = 1.5, min_p = 0.1}},
}

local function measure()
  local rows = {}
  for _, s in ipairs(SETTINGS) do
    local texts, firsts, lps = {}, {}, {}
    local n_text, n_first = 0, 0
    for i = 1, SAMPLES do
      local p = {max_tokens = 16, stop = {"\n"}, seed = i}
      for k, v in pairs(s.params) do p[k] = v end
      local g = L.model:generate(L.UNCERTAIN, p)
      if not texts[g.text] then texts[g.text] = true; n_text = n_text + 1 end
      local first = g.token_ids[1]
      if first and not firsts[first] then firsts[first] = true; n_first = n_first + 1 end
      if #g.token_ids > 0 then
        local sum = 0
        for _, q in ipairs(L.token_probs(L.UNCERTAIN, g.token_ids)) do sum = sum + math.log(q) end
        lps[#lps + 1] = sum / #g.token_ids
      end
    end
    rows[#rows + 1] = {setting = s.name, distinct_replies = n_text, distinct_first = n_first,
                       mean_logprob = stats.mean(lps), worst_logprob = stats.min(lps)}
  end
  return rows
end

local rows = measure()
if L.is_main("diversity.lua") then
  print(("%d samples per setting after %q (seeds 1-%d, up to 16 tokens, stop at newline)"):format(
        SAMPLES, L.UNCERTAIN, SAMPLES))
  util.print_table(rows, {"setting", "distinct_replies", "distinct_first", "mean_logprob", "worst_logprob"},
                   {fmt = {mean_logprob = "%.2f", worst_logprob = "%.2f"}})
  print("\nmean_logprob: average natural-log probability per token under the raw model; closer to 0")
  print("is more typical text. Diversity rises with temperature while typicality falls; filters")
  print("(top_p, min_p) keep much of the diversity and cut the worst samples.")
end
return rows
