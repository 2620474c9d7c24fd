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

local lessonlib = require("wb.lesson")

local conclusion = T.conclusion

-- Training vs held-out contrast, recomputed here from the counts: a gap of 25 points or more,
-- and held-out within two binomial standard deviations of guessing among k.
local function check_contrast(rec, id, train_ok, train_n, held_ok, held_n, k)
  T.eq(conclusion(rec, id .. "_gap").holds, train_ok / train_n - held_ok / held_n >= 0.25, id .. "_gap")
  local p = 1 / k
  T.eq(conclusion(rec, id .. "_chance").holds,
       math.abs(held_ok - held_n * p) <= 2 * math.sqrt(held_n * p * (1 - p)), id .. "_chance")
  local text = conclusion(rec, id .. "_gap").text
  T.check(text:find(("%d/%d"):format(train_ok, train_n), 1, true)
          and text:find(("%d/%d"):format(held_ok, held_n), 1, true), text)
end

local function row_of(rows, set, setting, constraint)
  for _, row in ipairs(rows) do
    if row.set == set and row.setting == setting and row.constraint == constraint then return row end
  end
  error(("no row %s/%s/%s"):format(set, setting, constraint), 2)
end

T.test("constrained_category: every constrained output is a label, and the sentences follow the table", function()
  local r = lesson("constrained_category")
  local free_invalid = 0
  for _, row in ipairs(r.rows) do
    if row.constraint == "choice" then
      T.eq(row.valid_label, row.tickets, row.setting .. " valid labels")
    else
      T.check(row.valid_label <= row.tickets)
      free_invalid = free_invalid + row.tickets - row.valid_label
    end
  end
  T.eq(conclusion(r, "choice_always_label").holds, true)
  T.eq(conclusion(r, "free_sometimes_not_label").holds, free_invalid > 0)
  local tr, ho = row_of(r.rows, "training", "greedy", "choice"), row_of(r.rows, "held-out", "greedy", "choice")
  T.eq(tr.tickets, ho.tickets, "the same number of tickets in each set")
  check_contrast(r, "greedy_choice", tr.correct, tr.tickets, ho.correct, ho.tickets, 6)
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
  -- compile time is reported, not bounded: timings belong in bench/ (bench_constraint)
  T.check(r.compile_ms >= 0 and r.compile_ms < math.huge, ("compile %s ms"):format(r.compile_ms))
  -- "broke" names exactly the unconstrained rows with an invalid output.
  local broke = {}
  for _, row in ipairs(r.rows) do
    if row.constraint == "none" and row.valid < row.outputs then broke[#broke + 1] = row.set .. "/" .. row.setting end
  end
  local named = {}
  for _, b in ipairs(r.broke) do named[#named + 1] = b.set .. "/" .. b.setting end
  T.same_list(named, broke, "settings said to break")
  T.eq(conclusion(r, "free_breaks").holds, #broke > 0)
  for _, row in ipairs(r.rows) do
    if row.constraint == "none" and row.valid == row.outputs then
      local text = conclusion(r, "free_breaks").text
      local function esc(x) return (x:gsub("%p", "%%%0")) end
      local s = esc(row.set) .. " tickets at [^;]*" .. esc(row.setting) .. " %("
      T.check(not text:find(s), "a valid setting was said to break: " .. row.set .. "/" .. row.setting)
    end
  end
  local tr, ho = row_of(r.rows, "training", "greedy", "json_schema"), row_of(r.rows, "held-out", "greedy", "json_schema")
  check_contrast(r, "category", tr.category, tr.outputs, ho.category, ho.outputs, 6)
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
  -- Each format's words come from its own mass band.
  for i, row in ipairs(r.rows) do
    local want
    for _, b in ipairs(r.BANDS) do
      if row.mean_step_mass >= b[1] then want = b[2] break end
    end
    T.check(conclusion(r, "band_" .. i).text:find(want, 1, true), conclusion(r, "band_" .. i).text)
    T.check(not row.format:find("half", 1, true), "no unmeasured adjective in the format name")
  end
  T.eq(conclusion(r, "unseen_costs_more").holds, never.overruled_bits > label.overruled_bits)
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
  T.eq(conclusion(r, "bug_picks_lowest").holds, true)
  T.eq(conclusion(r, "fix_picks_best").holds, true)
  local function s(set)
    for _, row in ipairs(r.summary) do
      if row.set == set and row.mask_stage == "logits, leading space allowed" then return row end
    end
  end
  check_contrast(r, "with_space", s("training").correct, s("training").tickets,
                 s("held-out").correct, s("held-out").tickets, 6)
end)

T.test("reasoning harness (simulated): held-out beside training, and the sentences follow the runs", function()
  local path = os.tmpname()
  local exe = T.EXE
  local ok = os.execute(("WB_LESSON_RECORD=%s %s scripts/reasoning_harness.lua --provider tinylm "
    .. "--tickets 6 --out %s.json > /dev/null"):format(path, exe, path))
  T.check(ok, "harness failed")
  local doc = wb.json.decode(T.read_file(path))
  os.remove(path); os.remove(path .. ".json")
  local n = { training = 0, ["held-out"] = 0 }
  local correct = { training = 0, ["held-out"] = 0 }
  local answers, same = {}, true
  for _, run in ipairs(doc.runs) do
    if run.level == doc.levels[1] then
      n[run.set] = n[run.set] + 1
      if run.correct then correct[run.set] = correct[run.set] + 1 end
    end
    local key = run.set .. "|" .. run.ticket
    if answers[key] == nil then answers[key] = run.output elseif answers[key] ~= run.output then same = false end
  end
  T.eq(n.training, 6); T.eq(n["held-out"], 6)
  T.eq(conclusion(doc, "answer_unchanged").holds, same)
  check_contrast(doc, "accuracy", correct.training, 6, correct["held-out"], 6, 6)
  local lo, hi = {}, {}
  for _, run in ipairs(doc.runs) do
    if run.level == doc.levels[1] then lo[#lo + 1] = run.ttft_ms end
    if run.level == doc.levels[#doc.levels] then hi[#hi + 1] = run.ttft_ms end
  end
  local hmin, lmax = math.huge, -math.huge
  for _, v in ipairs(hi) do hmin = math.min(hmin, v) end
  for _, v in ipairs(lo) do lmax = math.max(lmax, v) end
  T.eq(conclusion(doc, "ttft_grows").holds, hmin > lmax)
end)

T.done()
