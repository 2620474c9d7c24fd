-- constraint_pressure.lua - how hard does the format push? Pressure per step and per output for
-- the label format and the JSON format TinyLM saw in training, and a format it never saw. How
-- much each one overrules the model is measured, and the words for it come from the numbers.
--
--   workbench scripts/constraint_pressure.lua
-- Per step, pressure is read off the mass the raw model (temperature 1, no filters) put on the
-- tokens the constraint allowed: near 1, the model was going there anyway; near 0, the format
-- overruled it. Over an output, the sum of -ln(mass) is the log-probability the constraint had
-- to overrule (0 = none). When most of a reply's steps have mass near zero, the format is doing
-- all the work and the answer says little about what the model "thinks".
require("wb.cli").parse(arg, "scripts/constraint_pressure.lua", {}, { about = "how hard does the format push? Pressure per step and per output for the label format and the JSON format TinyLM saw in training, and a format it never saw." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local wb = L.wb
local lesson = require("wb.lesson")

local UPPER = {}
for i, l in ipairs(corpus.LABELS) do UPPER[i] = l:upper() end

local FORMATS = {
  {name = "label (seen in training)", suffix = "\nCategory:",
   make = function() return wb.constraint.choice(L.tok, corpus.LABELS) end},
  {name = "JSON (seen in training)", suffix = "\nTriage:",
   make = function()
     return wb.constraint.json_schema(L.tok, {
       type = "object",
       properties = {category = {enum = corpus.LABELS}, priority = {enum = corpus.PRIORITIES},
                     needs_human = {type = "boolean"}},
       required = {"category", "priority", "needs_human"}})
   end},
  {name = "UPPERCASE label (never seen)", suffix = "\nCategory:",
   make = function() return wb.constraint.choice(L.tok, UPPER) end},
}

-- Steps whose allowed mass is below this are ones where the format, not the model, chose.
local FORMAT_DECIDES = 0.01

local function tickets(per_label)
  local out, count = {}, {}
  for _, t in ipairs(corpus.TICKETS) do
    count[t[2]] = (count[t[2]] or 0) + 1
    if count[t[2]] <= per_label then
      out[#out + 1] = t[1]:gsub("{plan}", "Team"):gsub("{month}", "March")
    end
  end
  return out
end

-- Words for a mean allowed mass, by band: what the model would have done without the format.
local BANDS = {
  {0.9, "the model was going there anyway"},
  {0.5, "the model mostly agreed with the format"},
  {0.1, "the format pulled the model away from what it wanted"},
  {0, "the format, not the model, did the choosing"},
}
local function band(mass)
  for _, b in ipairs(BANDS) do
    if mass >= b[1] then return b end
  end
  return BANDS[#BANDS]
end

local function conclude(r)
  for i, row in ipairs(r.rows) do
    local b = band(row.mean_step_mass)
    row.band = b[2]
    lesson.conclude(r, "band_" .. i, true,
      ("%s: mean allowed mass %.3f per step, %.2f bits overruled per output: %s."):format(
        row.format, row.mean_step_mass, row.overruled_bits, b[2]))
  end
  local seen, never = r.rows[1], r.rows[#r.rows]
  lesson.conclude(r, "unseen_costs_more", never.overruled_bits > seen.overruled_bits,
    ("The format the model never saw overruled %.2f bits per output against %.2f for the learned "
     .. "one: a constraint fights a model exactly where the format is new to it."):format(
      never.overruled_bits, seen.overruled_bits),
    ("The unseen format overruled no more than the learned one (%.2f against %.2f bits) on this "
     .. "model: it did not find the new format harder."):format(never.overruled_bits,
      seen.overruled_bits))
end

local function measure(opts)
  opts = opts or {}
  local msgs = tickets(opts.per_label or 2)
  local rows, steps = {}, {}
  for fi, f in ipairs(FORMATS) do
    local c = f.make()
    local sum_nats, sum_mean, n_steps, n_decided, n_over, worst = 0, 0, 0, 0, 0, 1
    for i, msg in ipairs(msgs) do
      local r = L.model:generate("Ticket: " .. msg .. f.suffix,
                                 {temperature = 0, max_tokens = 48}, {constraint = c})
      local mean = 0
      for k, m in ipairs(r.constraint_mass) do
        mean = mean + m / #r.constraint_mass
        n_steps = n_steps + 1
        if m < FORMAT_DECIDES then n_decided = n_decided + 1 end
        worst = math.min(worst, m)
        if i == 1 then
          steps[#steps + 1] = {format = f.name, step = k,
                               token = ("%q"):format(L.tok:decode({r.token_ids[k]})), mass = m}
        end
      end
      sum_nats = sum_nats - r.constraint_logprob
      sum_mean = sum_mean + mean
      n_over = n_over + r.constraint_overruled
    end
    rows[fi] = {format = f.name, outputs = #msgs, mean_step_mass = sum_mean / #msgs,
                min_step_mass = worst, overruled_bits = sum_nats / #msgs / math.log(2),
                argmax_overruled = n_over, steps = n_steps,
                format_decides = n_decided / n_steps}
  end
  local r = {lesson = "constraint_pressure", rows = rows, steps = steps, threshold = FORMAT_DECIDES}
  conclude(r)
  return r
end

local r = measure()
if L.is_main("constraint_pressure.lua") then
  print("Greedy outputs under three formats; mass = raw model probability of the allowed set")
  util.print_table(r.rows, {"format", "outputs", "mean_step_mass", "min_step_mass",
                            "overruled_bits", "argmax_overruled", "format_decides"})
  print(("\nformat_decides: share of steps with mass below %g. Per step, first ticket:"):format(
    r.threshold))
  util.print_table(r.steps, {"format", "step", "token", "mass"})
  print()
  lesson.print_conclusions(r)
end
r.measure = measure
r.BANDS = BANDS
lesson.emit(r)
return r
