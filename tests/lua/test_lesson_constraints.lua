-- test_lesson_constraints.lua - the Part C lessons' claims, asserted on the shipped model
-- (models/tinylm-base, or WB_MODEL). Skips, saying so, when no trained model exists yet.
local wb = require("wb")
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local dir = wb.default_model_dir()
local f = io.open(dir .. "/model.safetensors")
if not f then
  print("SKIP: no trained model at " .. dir .. " (run scripts/train_tinylm.lua)")
  os.exit(0)
end
f:close()

local corpus = require("wb.corpus")
local is_label = {}
for _, l in ipairs(corpus.LABELS) do is_label[l] = true end

local function lesson(name) return dofile("scripts/" .. name .. ".lua") end

T.test("constrained_category: every constrained output is a label, greedy and sampled", function()
  local r = lesson("constrained_category")
  for _, row in ipairs(r.rows) do
    if row.constraint == "choice" then
      T.eq(row.valid_label, row.tickets, row.setting .. " valid labels")
    else
      T.check(row.valid_label <= row.tickets)
    end
  end
end)

T.test("triage_json: every constrained output parses and validates", function()
  local r = lesson("triage_json")
  for _, row in ipairs(r.rows) do
    if row.constraint == "json_schema" then
      T.eq(row.parse, row.outputs, row.setting .. " parse")
      T.eq(row.valid, row.outputs, row.setting .. " valid")
    end
  end
  for _, o in ipairs(r.outputs) do
    if o.constrained then
      T.eq(o.stop_reason, "constraint")
      T.check(r.check(o.text), o.text)
    end
  end
  T.check(r.compile_ms < 50, ("compile %.1f ms"):format(r.compile_ms))
end)

T.test("logit_bias: a ban removes the token, a nudge raises it, +100 forces it", function()
  local r = lesson("logit_bias")
  local by = {}
  for _, row in ipairs(r.rows) do by[row.setting] = row end
  T.eq(by["ban the top token"].p_top, 0)
  T.check(by["ban the top token"].first_id ~= r.top_id)
  T.check(by["nudge the second +1"].p_second > by["no bias"].p_second)
  T.check(by["nudge the second +3"].p_second > by["nudge the second +1"].p_second)
  T.eq(by["force the second +100"].first_id, r.second_id)
  local c = r.constrained
  T.check(is_label[(c[1].label:gsub("^ ", ""))] and is_label[(c[2].label:gsub("^ ", ""))])
  T.check(c[2].label ~= c[1].label, "the ban changed nothing")
  T.eq(c[3].label:gsub("^ ", ""), "cancellation")
end)

T.test("constraint_pressure: the learned format costs less than the one never seen", function()
  local r = lesson("constraint_pressure")
  local label, json, never = r.rows[1], r.rows[2], r.rows[3]
  for _, row in ipairs(r.rows) do
    T.check(row.overruled_bits >= 0)
    T.check(row.mean_step_mass >= 0 and row.mean_step_mass <= 1.0001)
  end
  -- Per step, not per output: a JSON object takes many more steps than a label.
  T.check(label.mean_step_mass > never.mean_step_mass)
  T.check(json.mean_step_mass > never.mean_step_mass)
  T.check(label.overruled_bits < never.overruled_bits)
  T.check(never.format_decides > label.format_decides)
end)

T.test("greedy_mask_fallback: the bug picks the lowest allowed id, the fix the masked argmax", function()
  local r = lesson("greedy_mask_fallback")
  local bugged = 0
  for _, row in ipairs(r.rows) do
    T.eq(row.after_filters_first, row.masked_argmax, "after_filters fallback")
    T.eq(row.logits_first, row.masked_argmax, "mask-first greedy")
    if not row.argmax_allowed then
      bugged = bugged + 1
      T.eq(row.after_filters_uniform_first, row.lowest_allowed, "uniform fallback")
    end
  end
  T.check(bugged > 0, "no ticket had a disallowed argmax")
  T.eq(r.dist[1].survivors, r.n_allowed_first)
  T.eq(r.dist[2].survivors, 1)
  T.eq(r.dist[3].survivors, 1)
end)

T.done()
