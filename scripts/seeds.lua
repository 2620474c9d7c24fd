-- seeds.lua - the same seed reproduces, different seeds vary, and why hosted models still vary.
--
--   workbench scripts/seeds.lua
require("wb.cli").parse(arg, "scripts/seeds.lua", {}, { about = "the same seed reproduces, different seeds vary, and why hosted models still vary." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")

local PARAMS = {max_tokens = 20, temperature = 1.0, stop = {"\n"}}

local function run(seed, extra)
  local p = {}
  for k, v in pairs(PARAMS) do p[k] = v end
  p.seed = seed
  return L.model:generate(L.UNCERTAIN, p, extra)
end

local function measure()
  local r = {rows = {}}
  local same = {run(42), run(42), run(42, {cache = false})}
  r.same_seed_identical = same[1].text == same[2].text and same[2].text == same[3].text and
                          table.concat(same[1].token_ids, ",") == table.concat(same[3].token_ids, ",")
  for i, g in ipairs(same) do
    r.rows[#r.rows + 1] = {run = ("seed 42 #%d%s"):format(i, i == 3 and " (no cache)" or ""),
                           text = g.text:sub(1, 50)}
  end
  local distinct = {}
  r.n_distinct = 0
  for seed = 1, 8 do
    local g = run(seed)
    if not distinct[g.text] then distinct[g.text] = true; r.n_distinct = r.n_distinct + 1 end
    r.rows[#r.rows + 1] = {run = "seed " .. seed, text = g.text:sub(1, 50)}
  end
  local unseeded = run(nil)
  r.drawn_seed = unseeded.seed
  r.replay_identical = run(unseeded.seed).text == unseeded.text
  return r
end

local r = measure()
local lesson = require("wb.lesson")
lesson.conclude(r, "seed_enough", r.same_seed_identical and r.replay_identical,
  "Here one process, one thread setting and one model gave the same reply for the same seed "
  .. "every time, so the seed was enough.",
  "Here the same seed did NOT always give the same reply: something besides the seed changed "
  .. "the logits between runs.")
if L.is_main("seeds.lua") then
  util.print_table(r.rows, {"run", "text"})
  print(("\nsame seed, three runs (one without the KV cache) identical: %s"):format(r.same_seed_identical))
  print(("8 different seeds gave %d different replies"):format(r.n_distinct))
  print(("no seed: one was drawn (%d) and reported; replaying it reproduces the reply: %s"):format(
        r.drawn_seed, r.replay_identical))
  print([[
Why a hosted model varies even with a seed: the seed only fixes the random draws. The logits
themselves can change between calls when the provider batches your request with others (kernel
choice and summation order depend on batch shape), runs on different hardware or library
versions, or updates the model. A tiny change in a logit can flip a draw near a boundary, and
every later token then differs.]])
  lesson.print_conclusions(r)
end
return r
