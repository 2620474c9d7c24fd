-- constraint_pressure.lua - how hard does the format push? Pressure per step and per output for
-- the label format TinyLM learned, the JSON format it half knows, and a format it never saw.
--
--   workbench scripts/constraint_pressure.lua
-- Per step, pressure is read off the mass the raw model (temperature 1, no filters) put on the
-- tokens the constraint allowed: near 1, the model was going there anyway; near 0, the format
-- overruled it. Over an output, the sum of -ln(mass) is the log-probability the constraint had
-- to overrule (0 = none). When most of a reply's steps have mass near zero, the format is doing
-- all the work and the answer says little about what the model "thinks".
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local wb = L.wb

local UPPER = {}
for i, l in ipairs(corpus.LABELS) do UPPER[i] = l:upper() end

local FORMATS = {
  {name = "label (learned)", suffix = "\nCategory:",
   make = function() return wb.constraint.choice(L.tok, corpus.LABELS) end},
  {name = "JSON (half known)", suffix = "\nTriage:",
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
  return {rows = rows, steps = steps, threshold = FORMAT_DECIDES}
end

local r = measure()
if L.is_main("constraint_pressure.lua") then
  print("Greedy outputs under three formats; mass = raw model probability of the allowed set")
  util.print_table(r.rows, {"format", "outputs", "mean_step_mass", "min_step_mass",
                            "overruled_bits", "argmax_overruled", "format_decides"})
  print(("\nformat_decides: share of steps with mass below %g. Per step, first ticket:"):format(
    r.threshold))
  util.print_table(r.steps, {"format", "step", "token", "mass"})
end
r.measure = measure
return r
