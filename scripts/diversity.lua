-- diversity.lua - 20 samples per setting: distinct replies, distinct first tokens, and the mean
-- log-probability of each sample under the raw model (temperature 1, no filters) as a quality
-- check: settings that pull in the tail produce text the model itself finds unlikely.
--
--   workbench scripts/diversity.lua
require("wb.cli").parse(arg, "scripts/diversity.lua", {}, { about = "20 samples per setting: distinct replies, distinct first tokens, and the mean log-probability of each sample under the raw model (temperature 1, no filters) as a quality check: settings that pull in the tail produce text the model itself finds unlikely." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local stats = require("wb.stats")
local lesson = require("wb.lesson")

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

local function row_of(rows, name)
  for _, row in ipairs(rows) do if row.setting == name then return row end end
end

-- What the table supports: diversity and typicality across temperature, and what the filters
-- did at T = 1.5.
local function conclude(rows)
  local rec = {lesson = "diversity", rows = rows}
  local a, b, c = row_of(rows, "T 0.7"), row_of(rows, "T 1.0"), row_of(rows, "T 1.5")
  local more = a.distinct_replies <= b.distinct_replies and b.distinct_replies <= c.distinct_replies
  local less_typical = a.mean_logprob > b.mean_logprob and b.mean_logprob > c.mean_logprob
  lesson.conclude(rec, "temperature_tradeoff", more and less_typical,
    ("From T 0.7 to 1.0 to 1.5, distinct replies went %d, %d, %d while mean log-probability fell "
     .. "%.2f, %.2f, %.2f: diversity rises with temperature and typicality falls."):format(
      a.distinct_replies, b.distinct_replies, c.distinct_replies, a.mean_logprob, b.mean_logprob,
      c.mean_logprob),
    ("From T 0.7 to 1.0 to 1.5, distinct replies went %d, %d, %d and mean log-probability %.2f, "
     .. "%.2f, %.2f: not the clean trade-off (more diverse, less typical) on this run."):format(
      a.distinct_replies, b.distinct_replies, c.distinct_replies, a.mean_logprob, b.mean_logprob,
      c.mean_logprob))
  local f = row_of(rows, "T 1.5, min_p 0.1")
  local keeps = f.distinct_replies * 2 >= c.distinct_replies
  local cuts = f.worst_logprob > c.worst_logprob
  lesson.conclude(rec, "min_p_keeps_and_cuts", keeps and cuts,
    ("At T 1.5, min_p 0.1 kept %d of the %d distinct replies (at least half) and lifted the "
     .. "worst sample from %.2f to %.2f: it cuts the tail, not the diversity."):format(
      f.distinct_replies, c.distinct_replies, c.worst_logprob, f.worst_logprob),
    ("At T 1.5, min_p 0.1 gave %d distinct replies against %d and a worst sample of %.2f against "
     .. "%.2f: on this run it did not both keep the diversity and cut the tail."):format(
      f.distinct_replies, c.distinct_replies, f.worst_logprob, c.worst_logprob))
  return rec
end

local rows = measure()
local rec = conclude(rows)
rows.conclusions = rec.conclusions
lesson.emit(rec)
if L.is_main("diversity.lua") then
  print(("%d samples per setting after %q (seeds 1-%d, up to 16 tokens, stop at newline)"):format(
        SAMPLES, L.UNCERTAIN, SAMPLES))
  util.print_table(rows, {"setting", "distinct_replies", "distinct_first", "mean_logprob", "worst_logprob"},
                   {fmt = {mean_logprob = "%.2f", worst_logprob = "%.2f"}})
  print("\nmean_logprob: average natural-log probability per token under the raw model; closer to 0")
  print("is more typical text.\n")
  lesson.print_conclusions(rec)
end
return rows
