-- test_lesson_new.lua - the lessons added in issue 17 (prompt_cache, speculative, batch_variance)
-- assert their claims on the shipped TinyLM: prefix reuse gives identical ids, speculative output
-- equals plain greedy output, divergence with batch size appears only in the batch-variant mode.
-- Each printed sentence is recomputed from the record the lesson writes (WB_LESSON_RECORD).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

T.require_tinylm()

local dir = T.tmpdir()

local function lesson_record(script, args, env) return T.lesson_record(dir, script, args, env) end

local conclusion = T.conclusion

local function printed(out, rec)
  local flat = out:gsub("%s+", " ")
  for _, c in ipairs(rec.conclusions or {}) do
    T.check(flat:find(c.text:gsub("%s+", " "), 1, true), "conclusion not printed: " .. c.text)
  end
end

local function lo(xs) local m = math.huge for _, x in ipairs(xs) do m = math.min(m, x) end return m end
local function hi(xs) local m = -math.huge for _, x in ipairs(xs) do m = math.max(m, x) end return m end

T.test("prompt_cache.lua: prefix reuse gives identical ids, fewer prefill tokens, and says only what holds", function()
  local out, rec = lesson_record("scripts/prompt_cache.lua", "--requests 4 --rounds 3")
  printed(out, rec)
  T.eq(rec.same_ids, true)
  T.eq(conclusion(rec, "same_ids").holds, true)
  local without, with = 0, rec.prefix_tokens
  for _, r in ipairs(rec.requests) do
    T.eq(r.prefilled_without, r.tokens)
    T.eq(r.prefilled_with, r.tokens - rec.prefix_tokens)
    without, with = without + r.prefilled_without, with + r.prefilled_with
  end
  T.eq(rec.tokens_without, without); T.eq(rec.tokens_with, with)
  T.check(with < without)
  T.eq(conclusion(rec, "fewer_tokens").holds, true)
  T.eq(conclusion(rec, "faster").holds, hi(rec.round_ms_with) < lo(rec.round_ms_without))
  -- Both ways equal the plain greedy reply of model:generate to the whole prompt.
  local model = wb.load()
  for _, r in ipairs(rec.requests) do
    local g = model:generate(r.prompt, { temperature = 0, max_tokens = #r.reply_ids }, { ignore_eos = true })
    T.same_list(g.token_ids, r.reply_ids, "reply of " .. r.question)
  end
  model:close()
end)

T.test("speculative.lua: output equals plain greedy, self-drafting accepts everything, sentences follow the rows", function()
  local out, rec = lesson_record("scripts/speculative.lua", "--tokens 24 --repeats 2")
  printed(out, rec)
  T.eq(rec.all_equal, true)
  T.eq(conclusion(rec, "equal_greedy").holds, true)
  for _, r in ipairs(rec.rows) do
    T.eq(r.equal, true, r.draft .. " / " .. r.kind)
    T.check(r.passes >= 1 and r.accepted <= r.drafted)
    T.near(r.acceptance, r.accepted / r.drafted, 1e-12)
    -- Every pass yields between 1 and k+1 tokens; two prompts per kind, the first token each
    -- comes from the prefill.
    T.near(r.tokens_per_pass, (r.tokens - 2) / r.passes, 1e-12)
    T.check(r.tokens_per_pass >= 1 and r.tokens_per_pass <= rec.k + 1, r.tokens_per_pass)
    if r.draft:find("self", 1, true) == 1 then T.eq(r.accepted, r.drafted, "self-draft accepts all") end
    local c = conclusion(rec, "speed_" .. r.kind)
    if r.draft:find("truncated", 1, true) == 1 then
      local want = hi(r.spec_ms) < lo(r.plain_ms) and "below" or lo(r.spec_ms) > hi(r.plain_ms) and "above" or "overlap"
      T.eq(c.relation, want, r.kind)
    end
  end
  local function row(prefix, kind)
    for _, r in ipairs(rec.rows) do if r.draft:find(prefix, 1, true) == 1 and r.kind == kind then return r end end
  end
  T.eq(conclusion(rec, "acceptance_by_kind").holds,
       row("truncated", "memorised transcripts").acceptance > row("truncated", "open text").acceptance)
  local b, cost = row("truncated", "memorised transcripts"), rec.cost
  T.near(rec.predicted_speedup, b.tokens_per_pass * cost.target_step_ms
         / (rec.k * cost.draft_step_ms + cost.verify_ms), 1e-9)
  T.eq(conclusion(rec, "cost_model").holds, rec.predicted_speedup > 1)
end)

T.test("batch_variance.lua: logits and replies move with the batch only in the batch-variant mode", function()
  local out, rec = lesson_record("scripts/batch_variance.lua", "--tokens 24")
  printed(out, rec)
  local fixed, variant = rec.modes[1], rec.modes[2]
  T.eq(fixed.mode, "fixed")
  for _, r in ipairs(fixed.part1) do T.eq(r.diff, 0, ("fixed, %d rows"):format(r.rows)) end
  -- in fixed-order mode a batched token's log-probabilities are bit-identical to alone's
  for _, b in ipairs(fixed.batches) do
    T.eq(b.changed, 0, ("fixed, batch %d"):format(b.batch))
    T.eq(b.lp_diff, 0, ("fixed, batch %d: log-probabilities moved"):format(b.batch))
  end
  T.eq(conclusion(rec, "fixed_identical").holds, true)
  if not rec.has_variant then
    T.check(out:find("this build has no batch-variant mode", 1, true), out)
    T.eq(variant, nil)
    return
  end
  T.eq(variant.mode, "variant")
  local moved = false
  for _, r in ipairs(variant.part1) do if r.diff > 0 then moved = true end end
  T.check(moved, "the batch-variant mode changed no logits")
  local batch_moved = 0
  for _, b in ipairs(variant.batches) do
    if b.batch == 1 then T.eq(b.lp_diff, 0, "a batch of one is the request alone") end
    batch_moved = math.max(batch_moved, b.lp_diff)
  end
  T.check(batch_moved > 0, "no batch size moved a log-probability in the batch-variant mode")
  T.eq(rec.variant_max_diff, math.max(variant.max_logit_diff, batch_moved))
  for _, b in ipairs(variant.batches) do
    if b.batch > 1 then
      T.check(conclusion(rec, "variant_differs").text:find(("%.2g at B = %d"):format(b.lp_diff, b.batch), 1, true),
              "the per-batch differences are not the measured ones")
    end
  end
  T.eq(conclusion(rec, "fixed_identical").holds, true)
  T.eq(conclusion(rec, "variant_differs").holds, true)
  local changed = 0
  for _, b in ipairs(variant.batches) do
    changed = changed + b.changed
    if b.batch == 1 then T.eq(b.changed, 0, "a batch of one is the request alone") end
  end
  T.eq(conclusion(rec, "variant_diverged").holds, changed > 0)
  if changed == 0 then
    local text = conclusion(rec, "variant_diverged").text
    T.check(text:find(("%.3g logits"):format(lo(rec.smallest_leads)), 1, true), text)
    T.check(text:find(("largest difference (%.2g)"):format(rec.variant_max_diff), 1, true), text)
  end
  -- A reply can only change where some lead is as small as the logit differences.
  local smallest = math.huge
  for _, l in ipairs(rec.smallest_leads) do smallest = math.min(smallest, l) end
  if smallest > 10 * rec.variant_max_diff then T.eq(changed, 0, "a flip without a near-tie") end
end)

T.rmdir(dir)
T.done()
