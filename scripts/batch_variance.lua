-- batch_variance.lua - why a hosted model can answer differently at temperature 0: the sums
-- inside its matrix products depend on how many requests share the batch.
--
--   workbench scripts/batch_variance.lua [--tokens N] [--threads N]
--
-- Floating-point addition is not associative: the same dot product summed in another order
-- differs in its last bits. The workbench's batched kernels sum every output of every row in one
-- fixed order, whatever the number of rows, so a request decoded alone or in a batch of 16 gets
-- bit-identical logits. Most servers do not: a BLAS GEMM picks its kernel and blocking from the
-- matrix shape, so the order (and the last bits) change with the number of rows, i.e. with the
-- batch size. model:batch_variant(true), in builds that have it, switches the model to that
-- behaviour: every F32 matrix product of more than one row goes through OpenBLAS's GEMM instead
-- of the fixed-order kernel. Without it only the fixed-order half below is measured.
--
-- Part 1: one position's logits computed in passes of different row counts (a prefill of the
-- first k tokens against a prefill of the whole prompt), in each mode: the largest difference.
-- Part 2: greedy replies decoded in batches of 1 to 16 against the same prompt decoded alone, in
-- each mode: how many replies changed, and where. Part 3: why so few (or so many) changed: a
-- greedy token can only flip where its lead over the runner-up is smaller than the logit
-- differences, so the smallest lead along each reply is measured. The sentences at the end are
-- chosen from these numbers.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")
local heldout = require("wb.heldout")

local o = require("wb.cli").parse(arg, "scripts/batch_variance.lua", {
  { "tokens", "count", 48, "new tokens per reply" },
  { "threads", "count", 1, "compute threads" },
})
wb.threads(o.threads)

local model = wb.load()
local tok = model.tokenizer
local info = model:info()
local N = math.min(o.tokens, info.n_ctx // 2)
local BATCHES = { 1, 2, 4, 8, 16 }

-- Sixteen prompts: memorised transcripts, held-out tickets and open text, so some replies are
-- near-certain at every step and some are not.
local PROMPTS = {
  "Customer (Ana): Hi, I was charged twice for the Team plan this month.\nAgent (Lena):",
  "Customer (Bo): Hi, how do I export my board data?\nAgent (Sam):",
  "Customer (Ana): Hi,",
  "Agent (",
  "The weather in the mountains was cold, and the travellers",
  "In 1887 the railway reached the small town of",
  "Once upon a time",
  "1, 2, 3, 4,",
}
for i = 1, 8 do PROMPTS[#PROMPTS + 1] = "Ticket: " .. heldout.TICKETS[3 * i - 2].msg .. "\n" end

local function ids_of(text)
  local ids = tok:encode(text)
  while #ids + N > info.n_ctx do table.remove(ids, 1) end
  return ids
end

local function max_diff(a, b)
  local m = 0
  for v = 0, #a - 1 do m = math.max(m, math.abs(a:get(v) - b:get(v))) end
  return m
end

-- Part 1 uses at most 15 tokens: decode rows and prompts shorter than WB_PROMPT_ROWS (32)
-- go through the fixed-order GEMV kernels; a longer prompt goes through the packed GEMM, whose
-- order is fixed too (the same for any row count, so such a prompt's rows are batch-invariant
-- among themselves) but is not the GEMV's (docs/performance.md, "Session 3: prefill GEMM").
local part1_ids = ids_of(PROMPTS[1] .. " Sure, I can help with that.")
while #part1_ids > 15 do table.remove(part1_ids) end

-- Part 1: row k of a prefill of the whole prompt against the last row of a prefill of k tokens.
local function row_counts(ids)
  local s = model:session()
  local full = s:prefill(ids, { all = true })
  local out = {}
  for _, k in ipairs({ 1, 2, 3, 5, 8, 13 }) do
    if k < #ids then
      s:reset()
      out[#out + 1] = { rows = k, whole = #ids, diff = max_diff(s:prefill({ table.unpack(ids, 1, k) }), full[k]) }
    end
  end
  s:close()
  return out
end

-- Part 2: every prompt's greedy reply alone, then in batches of B (prompt i with the next B - 1).
-- Each token also carries the raw log-probabilities of its 5 best candidates (log-softmax of the
-- logits): the batched reply's against the reply alone, up to the first token that differs, are
-- the logit differences this batch size caused (a shift common to all logits cancels; any other
-- change in a logit shows).
-- Each prompt is prefilled in its own pass (separate_prefill), as alone: the batch size then
-- changes only the decode steps, one row per reply.
local params = { temperature = 0, max_tokens = N, top_logprobs = 5 }
local function lp_diff(a, b, upto)
  local d = 0
  for k = 1, upto do
    local ta, tb = a[k].top, b[k].top
    for c = 1, math.min(#ta, #tb) do
      if ta[c].id == tb[c].id then d = math.max(d, math.abs(ta[c].raw_logprob - tb[c].raw_logprob)) end
    end
  end
  return d
end
local function replies(B, solo)
  local changed, first, diff = 0, {}, 0
  for i0 = 1, #PROMPTS, B do
    local batch = {}
    for i = i0, math.min(#PROMPTS, i0 + B - 1) do batch[#batch + 1] = PROMPTS[i] end
    local r = model:generate_batch(batch, params, { ignore_eos = true, separate_prefill = true })
    for j, res in ipairs(r.results) do
      local want = solo[i0 + j - 1]
      local same = #want.token_ids
      for k = 1, #want.token_ids do
        if res.token_ids[k] ~= want.token_ids[k] then
          changed = changed + 1
          first[#first + 1] = k
          same = k - 1
          break
        end
      end
      diff = math.max(diff, lp_diff(res.logprobs, want.logprobs, same))
    end
  end
  return changed, first, diff
end

-- Part 3: the smallest lead of the greedy token over the runner-up along a reply (solo, fixed).
local function smallest_lead(text)
  local s = model:session()
  local logits = s:prefill(ids_of(text))
  local lead = math.huge
  for i = 1, N do
    local top = logits:topk(2) -- on a logits Vec, `p` holds the logit
    lead = math.min(lead, top[1].p - top[2].p)
    if i < N then logits = s:decode(top[1].id) end
  end
  s:close()
  return lead
end

-- The switch is a model method in builds that have it; without it only the fixed-order half runs.
local has_variant = type(model.batch_variant) == "function"
local rec = { lesson = "batch_variance", model = model.dir, model_type = info.model_type,
              tokens = N, prompts = #PROMPTS, modes = {}, has_variant = has_variant }
local noise = lesson.noise()
for _, mode in ipairs(has_variant and { "fixed", "variant" } or { "fixed" }) do
  if has_variant then model:batch_variant(mode == "variant") end
  local m = { mode = mode, part1 = row_counts(part1_ids),
              batches = {} }
  local solo = {}
  for i, p in ipairs(PROMPTS) do
    solo[i] = model:generate(p, params, { ignore_eos = true })
  end
  for _, B in ipairs(BATCHES) do
    local changed, first, diff = replies(B, solo)
    m.batches[#m.batches + 1] = { batch = B, changed = changed, first = first, lp_diff = diff }
  end
  m.max_logit_diff = 0
  for _, r in ipairs(m.part1) do m.max_logit_diff = math.max(m.max_logit_diff, r.diff) end
  m.max_batch_diff = 0
  for _, b in ipairs(m.batches) do m.max_batch_diff = math.max(m.max_batch_diff, b.lp_diff) end
  rec.modes[#rec.modes + 1] = m
end
if has_variant then model:batch_variant(false) end
local leads = {}
for i, p in ipairs(PROMPTS) do
  leads[i] = smallest_lead(p)
end
rec.smallest_leads = leads
rec.load = noise:finish(true)

print(("model %s (%s); %d prompts, %d greedy tokens each; %d thread(s)\n"):format(model.dir,
      info.model_type, #PROMPTS, N, wb.threads()))
print(("Part 1: the same position's logits from passes of k rows and of all %d prompt tokens")
      :format(#part1_ids))
print(("%-10s %s"):format("mode", "max |logit difference| for k = 1, 2, 3, 5, 8, 13 rows"))
for _, m in ipairs(rec.modes) do
  local cells = {}
  for _, r in ipairs(m.part1) do cells[#cells + 1] = ("%.2g"):format(r.diff) end
  print(("%-10s %s"):format(m.mode, table.concat(cells, "  ")))
end
print("\nPart 2: greedy replies in a batch of B that differ from the same prompt decoded alone")
print(("%-10s %s"):format("mode", "changed replies (first differing token) for B = 1, 2, 4, 8, 16"))
for _, m in ipairs(rec.modes) do
  local cells = {}
  for _, b in ipairs(m.batches) do
    cells[#cells + 1] = #b.first > 0 and ("%d (at %s)"):format(b.changed, table.concat(b.first, ","))
      or tostring(b.changed)
  end
  print(("%-10s %s"):format(m.mode, table.concat(cells, "   ")))
end
print(("%-10s %s"):format("mode", "max |log-prob difference| against alone, before any changed token, "
                           .. "for B = 1, 2, 4, 8, 16"))
for _, m in ipairs(rec.modes) do
  local cells = {}
  for _, b in ipairs(m.batches) do cells[#cells + 1] = ("%.2g"):format(b.lp_diff) end
  print(("%-10s %s"):format(m.mode, table.concat(cells, "  ")))
end
print(("\nPart 3: the smallest lead of the greedy token over the runner-up along each reply: "
       .. "median %.3g, smallest %.3g logits\n"):format(stats.median(leads), stats.min(leads)))

if not has_variant then
  print("(this build has no batch-variant mode, model:batch_variant: only the fixed-order half is "
        .. "measured)\n")
end
local fixed, variant = rec.modes[1], rec.modes[2]
local function total_changed(m)
  local n = 0
  for _, b in ipairs(m.batches) do n = n + b.changed end
  return n
end
rec.fixed_changed = total_changed(fixed)
local function batch_cells(m)
  local cells = {}
  for _, b in ipairs(m.batches) do
    if b.batch > 1 then cells[#cells + 1] = ("%.2g at B = %d"):format(b.lp_diff, b.batch) end
  end
  return table.concat(cells, ", ")
end
lesson.conclude(rec, "fixed_identical",
  fixed.max_logit_diff == 0 and fixed.max_batch_diff == 0 and rec.fixed_changed == 0,
  "With the fixed-order kernels every position's logits were bit-identical whatever the number "
  .. "of rows in the pass, every batched token's log-probabilities equalled alone's, and every "
  .. "batched reply equalled the reply alone: each output's dot product is summed in one order "
  .. "that does not depend on how many rows share the call, so there is no difference for even "
  .. "the smallest lead to flip on.",
  ("With the fixed-order kernels something still depended on the batch (largest logit difference "
   .. "%.2g, log-probability difference %.2g, %d changed replies): the kernels are not "
   .. "batch-invariant."):format(fixed.max_logit_diff, fixed.max_batch_diff, rec.fixed_changed))
if variant then
rec.variant_changed = total_changed(variant)
local moved = math.max(variant.max_logit_diff, variant.max_batch_diff)
rec.variant_max_diff = moved
lesson.conclude(rec, "variant_differs", moved > 0,
  ("In the batch-variant mode the same position's logits moved by up to %.2g with the number of "
   .. "rows, and batched tokens' log-probabilities by %s against alone: the GEMM summed in "
   .. "another order."):format(variant.max_logit_diff, batch_cells(variant)),
  "In the batch-variant mode the logits did not move with the number of rows: this CPU's GEMM "
  .. "summed these shapes in the fixed kernel's order, or the model's matrices are BF16 or "
  .. "quantized, which always go through the fixed-order kernels.")
local flips = 0
for _, l in ipairs(leads) do if l <= moved then flips = flips + 1 end end
rec.near_ties = flips
lesson.conclude(rec, "variant_diverged", rec.variant_changed > 0,
  ("And %d batched replies in that mode differed from the same prompt alone: where a lead is as "
   .. "small as the logit differences, one flipped token changes every token after it."):format(
    rec.variant_changed),
  ("Yet no greedy reply changed in that mode: the smallest lead along any reply was %.3g logits, "
   .. "%.0f times the largest difference (%.2g), so no token was close enough to flip; a token "
   .. "flips only where its lead is as small as the differences."):format(stats.min(leads),
    stats.min(leads) / math.max(moved, 1e-30), moved))
end
lesson.print_conclusions(rec)
lesson.print_load(rec.load)
lesson.emit(rec)
