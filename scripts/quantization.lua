-- quantization.lua - 8- and 4-bit weights: what they save, what they cost in quality.
--
--   workbench scripts/quantization.lua [--model DIR] [--tokens N] [--repeats N] [--threads N]
--
-- The same model loaded three ways: as stored (F32 for TinyLM, BF16 for a BF16 checkpoint), and
-- with every matrix quantized at load to Q8_0 (blocks of 32 weights, one F16 scale, 8-bit
-- integers: ~1.06 bytes a weight) or Q4_0 (4-bit integers: ~0.56 bytes a weight). For each: the
-- bytes a forward pass reads, prefill and decode time (median and range over interleaved
-- repeats), and over a held-out text the quantized model's next-token distribution against the
-- stored one's: KL divergence (mean and 99th percentile over positions), how often the top-1
-- choice agrees, and each model's perplexity on the text. The sentences at the end compare those
-- numbers; they say only what this run measured. (GGUF Q4_K_M files cannot be loaded yet.)
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")
local corpus = require("wb.corpus")

local o = require("wb.cli").parse(arg, "scripts/quantization.lua", {
  { "model", "string", nil, "model directory (default: -m, $WB_MODEL or TinyLM)" },
  { "tokens", "count", 192, "tokens of held-out text scored" },
  { "repeats", "count", 5, "timed runs per variant" },
  { "threads", "count", 1, "compute threads" },
})
wb.threads(o.threads)
local dir = o.model

local variants = { "as_stored", "q8_0", "q4_0" }
local models = {}
for _, w in ipairs(variants) do models[w] = wb.load(dir, { weights = w }) end
local ref = models.as_stored
local tok = ref.tokenizer

-- held-out text: the corpus' validation split, first N tokens
local text = corpus.generate({ seed = 1 }).val
local ids = tok:encode(text)
local N = math.min(o.tokens, #ids, ref:info().n_ctx)
local scored = {}
for i = 1, N do scored[i] = ids[i] end
assert(N >= 16, "need at least 16 tokens of text")

print(("model %s (%s), %d parameters; %s"):format(ref.dir, ref:info().model_type,
      ref:num_parameters(), wb.blas_info()))
print(("%d held-out tokens scored; %d thread(s); %d interleaved timing runs per variant\n"):format(
      N, wb.threads(), o.repeats))

-- log-probabilities at every position of the text
local function all_logprobs(m)
  local s <close> = m:session({ n_ctx = N })
  local rows = s:prefill(scored, { all = true })
  local out = {}
  for i, v in ipairs(rows) do out[i] = v:log_softmax():totable() end
  return out
end

local noise = lesson.noise()
local lp = {}
for _, w in ipairs(variants) do lp[w] = all_logprobs(models[w]) end

local PROMPT = math.min(N, 64)
local prefill_ms, decode_ms = {}, {}
for _, w in ipairs(variants) do prefill_ms[w], decode_ms[w] = {}, {} end
for _ = 1, o.repeats do
  for _, w in ipairs(variants) do -- interleaved: a background hiccup hits every variant alike
    local m = models[w]
    local s <close> = m:session({ n_ctx = PROMPT + 33 })
    local t0 = wb.clock_ms()
    local v = s:prefill({ table.unpack(scored, 1, PROMPT) })
    local t1 = wb.clock_ms()
    for _ = 1, 32 do v = s:decode((v:argmax())) end
    local t2 = wb.clock_ms()
    prefill_ms[w][#prefill_ms[w] + 1] = t1 - t0
    decode_ms[w][#decode_ms[w] + 1] = (t2 - t1) / 32
  end
end
local load = noise:finish(true)

local rec = { model = ref.dir, tokens = N, threads = wb.threads(), variants = {} }
local rows = {}
for _, w in ipairs(variants) do
  local kls, agree, nll = {}, 0, 0
  for i = 1, N - 1 do
    local p, q = lp.as_stored[i], lp[w][i]
    local kl, bp, bq = 0, 1, 1
    for j = 1, #p do
      local a = math.exp(p[j])
      if a > 0 then kl = kl + a * (p[j] - q[j]) end
      if p[j] > p[bp] then bp = j end
      if q[j] > q[bq] then bq = j end
    end
    kls[#kls + 1] = math.max(kl, 0)
    if bp == bq then agree = agree + 1 end
    nll = nll - q[scored[i + 1] + 1]
  end
  local r = {
    weights = w, bytes = models[w]:info().weight_bytes,
    prefill_ms = stats.median(prefill_ms[w]), prefill_min = stats.min(prefill_ms[w]),
    prefill_max = stats.max(prefill_ms[w]),
    decode_ms = stats.median(decode_ms[w]), decode_min = stats.min(decode_ms[w]),
    decode_max = stats.max(decode_ms[w]),
    kl_mean = stats.mean(kls), kl_p99 = stats.percentile(kls, 99),
    top1 = agree / (N - 1), ppl = math.exp(nll / (N - 1)),
    prefill_runs = prefill_ms[w], decode_runs = decode_ms[w],
  }
  rows[#rows + 1] = r
  rec.variants[#rec.variants + 1] = r
end

print(("| weights | MB read | prefill %d (ms) | decode (ms/token) | KL mean | KL p99 | top-1 agree | perplexity |"):format(PROMPT))
print("|---|---|---|---|---|---|---|---|")
for _, r in ipairs(rows) do
  print(("| %s | %.2f | %.2f (%.2f to %.2f) | %.3f (%.3f to %.3f) | %.5f | %.5f | %.1f%% | %.3f |"):format(
    r.weights, r.bytes / 1e6, r.prefill_ms, r.prefill_min, r.prefill_max, r.decode_ms, r.decode_min,
    r.decode_max, r.kl_mean, r.kl_p99, 100 * r.top1, r.ppl))
end
print()
rec.load = load
lesson.print_load(load)

local s, q8, q4 = rows[1], rows[2], rows[3]
lesson.conclude(rec, "q8_smaller", q8.bytes < s.bytes,
  ("Q8_0 reads %.0f%% of the stored model's bytes."):format(100 * q8.bytes / s.bytes),
  "Q8_0 did not read fewer bytes than the stored model (rows not a multiple of 32 stay as stored).")
lesson.conclude(rec, "q4_worse_than_q8", q4.kl_mean > q8.kl_mean,
  ("Halving the bits again costs quality: Q4_0's mean KL divergence from the stored model is %.1fx Q8_0's, and its top-1 choice agrees %.1f%% of the time against %.1f%%."):format(
    q4.kl_mean / math.max(q8.kl_mean, 1e-12), 100 * q4.top1, 100 * q8.top1),
  "Q4_0 did not diverge more than Q8_0 on this text.")
lesson.conclude(rec, "q8_ppl_close", math.abs(q8.ppl - s.ppl) < 0.01 * s.ppl,
  ("Q8_0's perplexity (%.3f) is within 1%% of the stored model's (%.3f)."):format(q8.ppl, s.ppl),
  ("Q8_0's perplexity (%.3f) is more than 1%% away from the stored model's (%.3f)."):format(q8.ppl, s.ppl))
local faster = lesson.compare_ranges(q8.decode_runs, s.decode_runs)
lesson.conclude(rec, "q8_decode_faster", faster == "below",
  "Q8_0 decodes faster than the stored weights in every run: decode reads every weight once per token, and fewer bytes are read.",
  "Q8_0's decode times overlap the stored model's (or are slower): this run does not tell them apart.")
lesson.print_conclusions(rec, "What this run shows:")
lesson.emit(rec)
