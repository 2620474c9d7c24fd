-- temperature.lua - entropy and top tokens at several temperatures, for a prompt TinyLM is unsure
-- about and one it is sure about.
--
--   workbench scripts/temperature.lua
require("wb.cli").parse(arg, "scripts/temperature.lua", {}, { about = "entropy and top tokens at several temperatures, for a prompt TinyLM is unsure about and one it is sure about." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local lesson = require("wb.lesson")

local TEMPS = {0, 0.3, 0.7, 1.0, 1.5, 2.0}

local function measure()
  local rows = {}
  for _, prompt in ipairs({L.UNCERTAIN, L.CERTAIN}) do
    for _, t in ipairs(TEMPS) do
      local p = L.distribution(prompt, {temperature = t})
      rows[#rows + 1] = {prompt = prompt, temperature = t, entropy = L.entropy_bits(p),
                         p_top = p:get(p:argmax()), top = L.top_tokens(p, 3)}
    end
  end
  return rows
end

local function entropy(rows, prompt, t)
  for _, row in ipairs(rows) do
    if row.prompt == prompt and row.temperature == t then return row.entropy end
  end
end

-- What the table supports: greedy is 0 bits, entropy rises with T on the open prompt, and how far
-- each prompt moved between T = 0.3 and T = 1.5.
local function conclude(rows)
  local rec = {lesson = "temperature", rows = rows}
  local greedy0 = entropy(rows, L.UNCERTAIN, 0) == 0 and entropy(rows, L.CERTAIN, 0) == 0
  lesson.conclude(rec, "greedy_zero", greedy0,
    "Temperature 0 is greedy: one token, 0 bits, for both prompts.",
    "Temperature 0 did not give 0 bits: greedy is broken.")
  local rising = true
  for i = 2, #TEMPS do
    if entropy(rows, L.UNCERTAIN, TEMPS[i]) <= entropy(rows, L.UNCERTAIN, TEMPS[i - 1]) then
      rising = false
    end
  end
  lesson.conclude(rec, "uncertain_rises", rising,
    "On the open prompt entropy rose at every step of T: dividing logits by T < 1 sharpens the "
    .. "distribution, T > 1 flattens it.",
    "On the open prompt entropy did not rise at every step of T.")
  local u0, u1 = entropy(rows, L.UNCERTAIN, 0.3), entropy(rows, L.UNCERTAIN, 1.5)
  local c0, c1 = entropy(rows, L.CERTAIN, 0.3), entropy(rows, L.CERTAIN, 1.5)
  rec.moved = {uncertain = u1 - u0, certain = c1 - c0}
  lesson.conclude(rec, "certain_moves_less", c1 - c0 < (u1 - u0) / 4,
    ("From T = 0.3 to 1.5 the open prompt went from %.2f to %.2f bits, the sure one only from "
     .. "%.2f to %.2f: a prompt the model is sure about barely moves."):format(u0, u1, c0, c1),
    ("From T = 0.3 to 1.5 the open prompt went from %.2f to %.2f bits and the sure one from %.2f "
     .. "to %.2f: on this model the sure prompt moved too."):format(u0, u1, c0, c1))
  return rec
end

local rows = measure()
local rec = conclude(rows)
rows.conclusions, rows.moved = rec.conclusions, rec.moved
lesson.emit(rec)
if L.is_main("temperature.lua") then
  util.print_table(rows, {"prompt", "temperature", "entropy", "p_top", "top"},
                   {fmt = {entropy = "%.2f", p_top = "%.3f", temperature = "%.1f"}})
  print()
  lesson.print_conclusions(rec)
end
return rows
