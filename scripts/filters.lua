-- filters.lua - how many tokens survive top-k, top-p and min-p, and the entropy left; then where
-- min-p adapts to the shape of the distribution while top-p does not.
--
--   workbench scripts/filters.lua
require("wb.cli").parse(arg, "scripts/filters.lua", {}, { about = "how many tokens survive top-k, top-p and min-p, and the entropy left; then where min-p adapts to the shape of the distribution while top-p does not." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local lesson = require("wb.lesson")

local SETTINGS = {
  {name = "none (T=1)", params = {}},
  {name = "top_k = 1", params = {top_k = 1}},
  {name = "top_k = 5", params = {top_k = 5}},
  {name = "top_k = 50", params = {top_k = 50}},
  {name = "top_p = 0.5", params = {top_p = 0.5}},
  {name = "top_p = 0.9", params = {top_p = 0.9}},
  {name = "top_p = 0.95", params = {top_p = 0.95}},
  {name = "min_p = 0.05", params = {min_p = 0.05}},
  {name = "min_p = 0.1", params = {min_p = 0.1}},
  {name = "min_p = 0.2", params = {min_p = 0.2}},
}
-- A sure prompt, an open one, and a flat one: on its own, "Agent (" is followed by any of the
-- sixteen agent names about equally often. (After a whole customer line the memorised model often
-- recalls which agent answered it, so the bare opening is the flat case.)
local SHAPES = {L.CERTAIN, L.UNCERTAIN, "Agent ("}

local function measure()
  local r = {filters = {}, shapes = {}}
  for _, s in ipairs(SETTINGS) do
    local p = L.distribution(L.UNCERTAIN, s.params)
    r.filters[#r.filters + 1] = {setting = s.name, survivors = L.survivors(p),
                                 entropy = L.entropy_bits(p), top = L.top_tokens(p, 3)}
  end
  for _, prompt in ipairs(SHAPES) do
    local raw = L.distribution(prompt, {})
    local tp = L.distribution(prompt, {top_p = 0.9})
    local mp = L.distribution(prompt, {min_p = 0.1})
    r.shapes[#r.shapes + 1] = {prompt = prompt:gsub("\n", "\\n"):sub(-24), p_top = raw:get(raw:argmax()),
                               entropy = L.entropy_bits(raw), top_p_0_9 = L.survivors(tp),
                               min_p_0_1 = L.survivors(mp)}
  end
  -- What the shape table supports: min-p's survivors change with the peak, top-p's as well but
  -- by a different rule; the counts are printed so the reader can see which moved more.
  local sure, flat = r.shapes[1], r.shapes[#r.shapes]
  lesson.conclude(r, "min_p_adapts", sure.min_p_0_1 < flat.min_p_0_1,
    ("min_p = 0.1 kept %d token(s) on the sure prompt (top p %.3f) and %d on the flat one (top p "
     .. "%.3f): its cut moves with the peak."):format(sure.min_p_0_1, sure.p_top, flat.min_p_0_1,
      flat.p_top),
    ("min_p = 0.1 kept %d token(s) on the sure prompt and %d on the flat one: on this model its "
     .. "cut did not open up with a flatter peak."):format(sure.min_p_0_1, flat.min_p_0_1))
  lesson.conclude(r, "top_p_counts", true,
    ("top_p = 0.9 kept %d on the sure prompt and %d on the flat one: it keeps whatever it takes to "
     .. "reach 90%% of the mass."):format(sure.top_p_0_9, flat.top_p_0_9))
  return r
end

local r = measure()
r.lesson = "filters"
lesson.emit(r)
if L.is_main("filters.lua") then
  print(("Filters on %q (temperature 1)"):format(L.UNCERTAIN))
  util.print_table(r.filters, {"setting", "survivors", "entropy", "top"}, {fmt = {entropy = "%.2f"}})
  print("\nSurvivors by distribution shape (min_p = 0.1 keeps tokens within 10x of the best one):")
  util.print_table(r.shapes, {"prompt", "p_top", "entropy", "top_p_0_9", "min_p_0_1"},
                   {fmt = {p_top = "%.3f", entropy = "%.2f"}})
  print()
  lesson.print_conclusions(r)
end
return r
