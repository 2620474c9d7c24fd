-- quantization.lua - 8- and 4-bit weights: what they save, what they cost in quality.
--
--   workbench scripts/quantization.lua [--model DIR] [--gguf FILE] [--text FILE] [--chunks N]
--                                      [--ctx N] [--repeats N] [--threads N]
--
-- One model, several ways of holding its weights:
--   * as stored (F32 for TinyLM, BF16 for a BF16 checkpoint): the reference every row is
--     compared with;
--   * BF16 (only for an F32 model): the stored weights rounded to bfloat16, written as a BF16
--     GGUF and loaded back;
--   * Q8_0 / Q4_0, quantized at load (blocks of 32 weights with one F16 scale, 8- or 4-bit
--     integers: about 1.06 or 0.56 bytes a weight);
--   * --gguf FILE: a GGUF of the same model made elsewhere, typically `llama-quantize ...
--     Q4_K_M` of its F32 or BF16 GGUF (what most people download). It must be the same model:
--     same architecture and shapes, same token ids for the text, and token embeddings that agree
--     with the stored ones to within quantization rounding; otherwise the lesson stops with an
--     error naming the file (comparing different weights would measure nothing).
--
-- For each row, in one table (as llama.cpp's `llama-perplexity --kl-divergence` reports it):
-- file size and the bytes a forward pass reads, prefill and decode time (median and range over
-- interleaved repeats), and over a text (the corpus' held-out split, or --text FILE) cut into
-- chunks of --ctx tokens, each chunk's second half scored as llama-perplexity does:
--   KL divergence  how far the row's next-token distribution is from the reference's, averaged
--                  over positions (0 = the same distribution; in nats);
--   top-1          how often the row's most likely next token is the reference's;
--   perplexity     exp of the mean negative log-probability of the text's real next tokens.
-- Then, on a few prompts, whether greedy decoding picks the reference's token wherever the
-- reference's top two logits are clearly apart. The sentences at the end say only what this run
-- measured.
--
-- llama.cpp's own report on the same files, text and chunks (`llama-perplexity -c 128 --chunks 4
-- --kl-divergence-base` / `--kl-divergence`) gives the same figures to about 1% (KL to a few %:
-- it quantizes activations its own way): tests/lua/test_lesson_quantization.lua checks it on
-- TinyLM. llama-perplexity does not parse special tokens, so compare on a text without them.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")
local corpus = require("wb.corpus")

local SCRIPT = "scripts/quantization.lua"
local o = require("wb.cli").parse(arg, SCRIPT, {
  { "model", "string", nil, "model directory (default: -m, $WB_MODEL or TinyLM)" },
  { "gguf", "string", nil, "a GGUF of the same model (e.g. llama-quantize Q4_K_M of its F32/BF16 GGUF) to add as a row" },
  { "text", "string", nil, "text file to score (default: the corpus' held-out split)" },
  { "chunks", "count", 4, "chunks of the text scored" },
  { "ctx", "count", 128, "tokens per chunk (at most the model's context)" },
  { "repeats", "count", 5, "timed runs per row" },
  { "threads", "count", 1, "compute threads" },
})
wb.threads(o.threads)

local cleanup = function() end -- removes the temporary GGUFs once there are any (below)
local function die(msg)
  cleanup()
  io.stderr:write(SCRIPT .. ": " .. msg .. "\n")
  os.exit(1)
end

local function file_size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local n = f:seek("end")
  f:close()
  return n
end

-- ---- the reference and the rows -------------------------------------------------------------
local ok_ref, ref = pcall(wb.load, o.model)
if not ok_ref then die(("--model %s: %s"):format(o.model or "(default)", tostring(ref))) end
local info = ref:info()
local tok = ref.tokenizer
-- The reference must be unquantized: the stored matrices' type is BF16 or F16 when any tensor
-- is, else F32 (TinyLM).
local function type_mix(types)
  local list = {}
  for t, n in pairs(types) do list[#list + 1] = { t, n } end
  table.sort(list, function(x, y) return x[1] < y[1] end)
  local mix = {}
  for _, t in ipairs(list) do mix[#mix + 1] = ("%s %d"):format(t[1], t[2]) end
  return table.concat(mix, ", ")
end
for t in pairs(info.tensor_types) do
  if t ~= "F32" and t ~= "F16" and t ~= "BF16" then
    die(("--model %s holds quantized tensors (%s): the reference must be the unquantized model "
      .. "(F32, F16 or BF16); pass a quantized GGUF as --gguf"):format(ref.dir,
      type_mix(info.tensor_types)))
  end
end
local stored_type = (info.tensor_types.BF16 or 0) > 0 and "BF16"
  or (info.tensor_types.F16 or 0) > 0 and "F16" or "F32"
-- A GGUF given on the command line must hold the same model. The cheap checks come first (the
-- file, its magic, the architecture and shapes); token ids and weights once the text is known.
local gguf_model
local function differ(what, a, b)
  die(("--gguf %s: not the same model as %s: %s %s in the file, %s in the model"):format(
    o.gguf, ref.dir, what, tostring(a), tostring(b)))
end
if o.gguf then
  local f = io.open(o.gguf, "rb")
  local magic = f and f:read(4)
  if f then f:close() end
  if not f then die(("--gguf %s: cannot open the file"):format(o.gguf)) end
  if magic ~= "GGUF" then
    die(("--gguf %s: not a GGUF file (it does not start with the bytes 'GGUF')"):format(o.gguf))
  end
  local ok, m = pcall(wb.load, o.gguf)
  if not ok then die(("--gguf %s: %s"):format(o.gguf, tostring(m))) end
  local gi = m:info()
  for _, k in ipairs({ "model_type", "vocab_size", "n_embd", "n_layer", "n_head", "n_kv_head",
                       "n_inner" }) do
    if gi[k] ~= info[k] then differ(k, gi[k], info[k]) end
  end
  gguf_model = m
end

local tmp = os.tmpname() -- a file name of our own; the GGUFs written below sit beside it
local written = {}
-- Writes model as a GGUF of type gtype beside tmp: its path and size, or nil and the reason
-- (the writer refuses some models, e.g. Phi-3 with LongRoPE).
local function tmp_gguf(model, gtype)
  local path = ("%s.%s.gguf"):format(tmp, gtype)
  written[#written + 1] = path
  local ok, err = pcall(model.save_gguf, model, path, { type = gtype })
  if not ok then return nil, tostring(err) end
  return path, file_size(path)
end
cleanup = function()
  for _, p in ipairs(written) do os.remove(p) end
  os.remove(tmp)
end

local rows = {}
local function add_row(r) rows[#rows + 1] = r; return r end

-- The text: token ids, cut into chunks of CTX tokens.
local text
if o.text then
  local ok
  ok, text = pcall(wb.read_file, o.text)
  if not ok or not text then die(("--text %s: %s"):format(o.text, tostring(text or "cannot read the file"))) end
else
  text = corpus.generate({ seed = 1 }).val
end
local ids = tok:encode(text)
local CTX = math.min(o.ctx, info.n_ctx)
local FIRST = CTX // 2 -- positions FIRST..CTX-2 (0-based) of a chunk predict the next token
if CTX < 8 then die(("--ctx %d: need at least 8 tokens per chunk"):format(CTX)) end
local CHUNKS = math.min(o.chunks, #ids // CTX)
if CHUNKS < 1 then
  die(("the text has %d tokens, fewer than one chunk of %d"):format(#ids, CTX))
end
local function chunk(c) return { table.unpack(ids, c * CTX + 1, c * CTX + CTX) } end

-- The GGUF's token ids for the text and its weights against the stored model's.
local function check_same_model(m)
  local gids = m.tokenizer:encode(text)
  for i = 1, math.max(#gids, #ids) do
    if gids[i] ~= ids[i] then
      cleanup()
      differ(("token %d of the text:"):format(i), gids[i], ids[i])
    end
  end
  -- Same weights: the embedding layer's output (hidden state 0) over the first chunk, as a
  -- relative RMS difference. Rounding to 2-8 bits moves it by a few percent; other weights of
  -- the same shape by about 100% or more.
  local a = ref:forward(chunk(0), { hidden_states = true }).hidden_states
  local b = m:forward(chunk(0), { hidden_states = true }).hidden_states
  local d2, n2 = 0, 0
  for i = 0, CTX - 1 do
    local x, y = a:vec(0, i), b:vec(0, i)
    local xx, yy, xy = x:dot(x), y:dot(y), x:dot(y)
    d2, n2 = d2 + math.max(xx - 2 * xy + yy, 0), n2 + xx
  end
  local rel = math.sqrt(d2 / math.max(n2, 1e-30))
  if not (rel < 0.25) then
    cleanup()
    die(("--gguf %s: not the same weights as %s: its token embeddings differ from the model's by "
      .. "%.0f%% (relative RMS over the first chunk; the same weights rounded to 2-8 bits stay "
      .. "within 25%%)"):format(o.gguf, ref.dir, 100 * rel))
  end
  return rel
end
local gguf_rel = gguf_model and check_same_model(gguf_model)

add_row({ key = "as_stored", label = stored_type .. " (as stored)", model = ref,
          source = "the checkpoint (reference)" })
local skipped = {} -- notes on what could not be measured
if stored_type == "F32" then
  local path, size = tmp_gguf(ref, "bf16")
  if path then
    add_row({ key = "bf16", label = "BF16", model = wb.load(path), source = "F32 rounded to BF16",
              file_bytes = size })
  else
    skipped[#skipped + 1] = "no BF16 row: the model cannot be written as a GGUF (" .. size .. ")"
  end
end
for _, q in ipairs({ "q8_0", "q4_0" }) do
  add_row({ key = q, label = q:upper(), model = wb.load(o.model, { weights = q }),
            source = ("%s quantized at load"):format(stored_type) })
end
local gguf_row
if gguf_model then
  local m, rel = gguf_model, gguf_rel
  gguf_row = add_row({ key = "gguf", label = "GGUF " .. (o.gguf:match("[^/]+$") or o.gguf),
    model = m, source = ("the given file; same weights (embeddings %.1f%% off)"):format(100 * rel),
    file_bytes = file_size(o.gguf),
    tensor_types = type_mix(m:info().tensor_types), embedding_rel_rms = rel })
end
-- File sizes: each in-memory row written as the GGUF it would be (model:save_gguf), so every
-- row counts the same header and tokenizer bytes.
for _, r in ipairs(rows) do
  if not r.file_bytes then
    local gtype = r.key == "as_stored" and stored_type:lower() or r.key
    local path, size = tmp_gguf(r.model, gtype)
    if path then r.file_bytes = size
    else skipped[#skipped + 1] = ("%s: no GGUF size (%s)"):format(r.label, size) end
  end
  r.mem_bytes = r.model:info().weight_bytes
end

print(("model %s (%s), %d parameters; %s"):format(ref.dir, info.model_type,
      ref:num_parameters(), wb.blas_info()))
print(("text: %d chunks of %d tokens (%d tokens in all), each chunk's last %d predictions scored"
       .. " (%d positions); %d thread(s); %d interleaved timing runs per row"):format(CHUNKS, CTX,
       #ids, CTX - 1 - FIRST, CHUNKS * (CTX - 1 - FIRST), wb.threads(), o.repeats))
if gguf_row then
  print(lesson.wrap(("%s holds %s; its token embeddings differ from the stored model's by %.1f%% "
    .. "(relative RMS): the same weights, rounded."):format(gguf_row.label, gguf_row.tensor_types,
    100 * gguf_row.embedding_rel_rms)))
end
print()

-- ---- quality: the reference's log-probabilities, then each row against them ---------------
-- ref_lp[k]: log-probabilities (a Vec) at the k-th scored position; target[k]: the token there.
local ref_lp, target = {}, {}
local function scored_rows(m, fn)
  local k = 0
  for c = 0, CHUNKS - 1 do
    local s <close> = m:session({ n_ctx = CTX })
    local ch = chunk(c)
    local out = s:prefill(ch, { all = true })
    for j = FIRST, CTX - 2 do -- 0-based position j predicts token j + 1
      k = k + 1
      fn(k, out[j + 1]:log_softmax(), ch[j + 2])
    end
  end
end
scored_rows(ref, function(k, lp, t) ref_lp[k], target[k] = lp, t end)
local NPOS = #ref_lp

local function se(xs) return #xs > 1 and stats.stddev(xs) / math.sqrt(#xs) or 0 end
for _, r in ipairs(rows) do
  local kl, nll, same, dp = {}, {}, 0, {}
  scored_rows(r.model, function(k, lq, t)
    local lp = ref_lp[k]
    local p = lp:softmax()
    -- KL(ref || row) = sum p (log p - log q), summed in double by Vec:dot
    kl[k] = math.max(p:dot(lp) - p:dot(lq), 0)
    nll[k] = -lq:get(t)
    if lq:argmax() == lp:argmax() then same = same + 1 end
    dp[k] = math.exp(-nll[k]) - math.exp(lp:get(t))
  end)
  local mean_nll = stats.mean(nll)
  local top1 = same / NPOS
  local ms = 0
  for _, x in ipairs(dp) do ms = ms + x * x end
  r.kl = kl
  r.kl_mean, r.kl_se = stats.mean(kl), se(kl)
  r.kl_median, r.kl_p99, r.kl_max = stats.median(kl), stats.percentile(kl, 99), stats.max(kl)
  r.top1, r.top1_se = top1, math.sqrt(top1 * (1 - top1) / NPOS)
  r.ppl = math.exp(mean_nll)
  r.ppl_se = r.ppl * se(nll) -- first-order error of exp(mean)
  r.rms_dp = math.sqrt(ms / NPOS)
end

-- ---- speed: prefill a prompt, then decode 32 tokens, rows interleaved ----------------------
local PROMPT = math.max(1, math.min(64, info.n_ctx - 33))
local prompt = { table.unpack(ids, 1, PROMPT) }
local function timed(m)
  local s <close> = m:session({ n_ctx = PROMPT + 33 })
  local t0 = wb.clock_ms()
  local v = s:prefill(prompt)
  local t1 = wb.clock_ms()
  for _ = 1, 32 do v = s:decode((v:argmax())) end
  local t2 = wb.clock_ms()
  return t1 - t0, (t2 - t1) / 32
end
for _, r in ipairs(rows) do
  timed(r.model) -- warm-up, not counted: first touches of the weights and the pool
  r.prefill_runs, r.decode_runs = {}, {}
end
local noise = lesson.noise()
for _ = 1, o.repeats do
  for _, r in ipairs(rows) do -- interleaved: a background hiccup hits every row alike
    local p, d = timed(r.model)
    r.prefill_runs[#r.prefill_runs + 1], r.decode_runs[#r.decode_runs + 1] = p, d
  end
end
local load = noise:finish(true)
for _, r in ipairs(rows) do
  r.prefill_ms, r.decode_ms = stats.median(r.prefill_runs), stats.median(r.decode_runs)
end

-- ---- greedy choices on prompts, where the reference is sure -----------------------------------
-- Both follow the reference's greedy path; a step counts as clear when the reference's top two
-- logits are more than MARGIN apart (Q8_0 moves TinyLM's logits by a few tenths at most).
local PROMPTS = { "Customer (Ana): Hi,", "Customer (Ana): Hi, my", "The capital of France is",
                  "Once upon a time" }
local STEPS, MARGIN = 24, 1.0
for _, r in ipairs(rows) do
  local clear, clear_same, same, n = 0, 0, 0, 0
  for _, p in ipairs(PROMPTS) do
    local pids = tok:encode(p)
    local steps = math.min(STEPS, info.n_ctx - #pids)
    local a <close> = ref:session({ n_ctx = #pids + steps })
    local b <close> = r.model:session({ n_ctx = #pids + steps })
    local la, lb = a:prefill(pids), b:prefill(pids)
    for i = 1, steps do
      local top = la:topk(2)
      local ia, ib = la:argmax(), lb:argmax()
      n = n + 1
      if ia == ib then same = same + 1 end
      if top[1].p - top[2].p > MARGIN then
        clear = clear + 1
        if ia == ib then clear_same = clear_same + 1 end
      end
      if i < steps then la, lb = a:decode(ia), b:decode(ia) end
    end
  end
  r.greedy = { steps = n, same = same, clear = clear, clear_same = clear_same }
end

-- ---- the table ---------------------------------------------------------------------------------
print(("| weights | made from | GGUF MB | read MB | prefill %d (ms) | decode (ms/token) | perplexity "
       .. "| KL mean | KL median | KL p99 | KL max | top-1 same | RMS dp |"):format(PROMPT))
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
local function range(xs, fmt)
  return (fmt .. " [" .. fmt .. " - " .. fmt .. "]"):format(stats.median(xs), stats.min(xs),
                                                           stats.max(xs))
end
-- Perplexities of random test models run to 1e12: past 1e4 they print in exponent form.
local function ppl_text(x) return x < 1e4 and ("%.3f"):format(x) or ("%.4g"):format(x) end
for _, r in ipairs(rows) do
  print(("| %s | %s | %s | %.2f | %s | %s | %s +- %s | %.6f +- %.6f | %.6f | %.6f | %.6f "
         .. "| %.1f%% +- %.1f | %.2f%% |"):format(r.label, r.source,
    r.file_bytes and ("%.2f"):format(r.file_bytes / 1e6) or "-",
    r.mem_bytes / 1e6, range(r.prefill_runs, "%.3f"), range(r.decode_runs, "%.4f"), ppl_text(r.ppl),
    ppl_text(r.ppl_se), r.kl_mean, r.kl_se, r.kl_median, r.kl_p99, r.kl_max, 100 * r.top1,
    100 * r.top1_se, 100 * r.rms_dp))
end
print()
-- Notes the numbers above need, each printed only when it applies to this run.
for _, r in ipairs(rows) do
  if r ~= rows[1] and r.model:info().tie_word_embeddings ~= info.tie_word_embeddings then
    print(lesson.wrap(("%s: its GGUF stores the output head as a tensor of its own (model:save_gguf "
      .. "and llama.cpp do so for gpt2), so it loads with an untied head and reads that matrix "
      .. "separately."):format(r.label), "note: "))
  end
  if r.file_bytes and r.mem_bytes > r.file_bytes then
    print(lesson.wrap(("%s reads more bytes (%.2f MB) than its file holds (%.2f MB): the loader "
      .. "widened or converted matrices (the GPT-2 family computes BF16 weights in F32; Q2_K "
      .. "matrices become Q8_0, Q3_K ones Q6_K, IQ4_XS ones IQ4_NL, docs/gguf.md)."):format(r.label,
      r.mem_bytes / 1e6, r.file_bytes / 1e6), "note: "))
  end
end
for _, r in ipairs(rows) do
  local ri = r.model:info()
  if ri.bf16_input_bits == 16 and (ri.tensor_types.BF16 or 0) > 0 and ri.model_type ~= "gpt2" then
    print(lesson.wrap(("%s: on this CPU the BF16 matrices multiply the activations rounded to "
      .. "BF16 as well (the vdpbf16ps kernels, model:info().bf16_input_bits = 16), so this row "
      .. "holds that rounding too, not only the weights'."):format(r.label), "note: "))
  end
end
for _, s in ipairs(skipped) do print(lesson.wrap(s, "note: ")) end
if not o.gguf then
  print(lesson.wrap(("To add the row most downloads are (llama.cpp's Q4_K_M of this model): write its "
    .. "GGUF with workbench -e \"wb.load('%s'):save_gguf('m-%s.gguf', {type = '%s'})\", run "
    .. "llama-quantize m-%s.gguf m-q4_k_m.gguf Q4_K_M, and pass --gguf m-q4_k_m.gguf."):format(
    ref.dir, stored_type:lower(), stored_type:lower(), stored_type:lower()), "note: "))
end
print()
print(lesson.wrap(("How to read it. KL and top-1 compare each row's next-token distribution with "
  .. "the %s reference at the same %d positions: KL mean 0.001 nats is a tiny shift, 0.1 a "
  .. "noticeable one; the median shows the typical position and p99/max the rare ones where "
  .. "the rounding changes the model's mind. Top-1 same is the share of positions whose most "
  .. "likely token is the reference's. Perplexity scores each row against the text itself, so "
  .. "a quantized row can come out slightly lower than the reference by chance: judge it by KL, "
  .. "not by a lower perplexity. +- is one standard error over positions; RMS dp is the RMS "
  .. "change of the probability given to the real next token. GGUF MB is the size of a GGUF file "
  .. "holding these weights, read MB what a forward pass reads."):format(rows[1].label, NPOS)))
print()
print(("Greedy on %d prompts (%d steps each, along the reference's path; clear = top two logits "
       .. "more than %.1f apart):"):format(#PROMPTS, STEPS, MARGIN))
for _, r in ipairs(rows) do
  if r ~= rows[1] then
    local g = r.greedy
    print(("  %-28s same token at %d/%d steps, at %d/%d clear steps"):format(r.label, g.same,
          g.steps, g.clear_same, g.clear))
  end
end
print()
lesson.print_load(load)

-- ---- what this run shows -------------------------------------------------------------------------
local rec = { model = ref.dir, stored_type = stored_type, chunks = CHUNKS, ctx = CTX, first = FIRST,
  positions = NPOS, tokens = #ids, threads = wb.threads(), prompt_tokens = PROMPT,
  prompts = PROMPTS, greedy_steps = STEPS, margin = MARGIN, load = load, rows = {} }
for _, r in ipairs(rows) do
  local out = {}
  for k, v in pairs(r) do if k ~= "model" then out[k] = v end end
  rec.rows[#rec.rows + 1] = out
end
local by = {}
for _, r in ipairs(rows) do by[r.key] = r end
local s, q8, q4 = by.as_stored, by.q8_0, by.q4_0
local function mb(bytes) return bytes and ("%.2f MB"):format(bytes / 1e6) or "size unknown" end
lesson.conclude(rec, "q8_smaller", q8.mem_bytes < s.mem_bytes,
  ("Q8_0 reads %.0f%% of the stored model's bytes%s."):format(100 * q8.mem_bytes / s.mem_bytes,
    (q8.file_bytes and s.file_bytes) and (" (file: %.0f%%)"):format(100 * q8.file_bytes / s.file_bytes) or ""),
  "Q8_0 did not read fewer bytes than the stored model (rows not a multiple of 32 stay as stored).")
lesson.conclude(rec, "q4_worse_than_q8", q4.kl_mean > q8.kl_mean,
  ("Halving the bits again costs quality: Q4_0's mean KL divergence from the stored model is "
   .. "%.1fx Q8_0's, and its top-1 choice agrees %.1f%% of the time against %.1f%%."):format(
    q4.kl_mean / math.max(q8.kl_mean, 1e-12), 100 * q4.top1, 100 * q8.top1),
  "Q4_0 did not diverge more than Q8_0 on this text.")
lesson.conclude(rec, "q8_ppl_close", math.abs(q8.ppl - s.ppl) < 0.01 * s.ppl,
  ("Q8_0's perplexity (%.3f) is within 1%% of the stored model's (%.3f)."):format(q8.ppl, s.ppl),
  ("Q8_0's perplexity (%.3f) is more than 1%% away from the stored model's (%.3f)."):format(q8.ppl,
    s.ppl))
lesson.conclude(rec, "q8_greedy_clear", q8.greedy.clear > 0 and q8.greedy.clear_same == q8.greedy.clear,
  ("Wherever the stored model was clearly sure (%d of %d greedy steps), Q8_0 picked the same "
   .. "token."):format(q8.greedy.clear, q8.greedy.steps),
  q8.greedy.clear == 0 and ("The stored model was clearly sure at none of the %d greedy steps: "
    .. "these prompts do not test greedy agreement on this model."):format(q8.greedy.steps)
  or ("Q8_0 picked another token at %d of the %d steps where the stored model was clearly sure."):format(
    q8.greedy.clear - q8.greedy.clear_same, q8.greedy.clear))
if gguf_row then
  local g = gguf_row
  lesson.conclude(rec, "gguf_vs_q4", g.kl_mean < q4.kl_mean,
    ("%s (%s on disk) stays closer to the stored model than Q4_0 (%s): mean KL %.5f "
     .. "against %.5f."):format(g.label, mb(g.file_bytes), mb(q4.file_bytes), g.kl_mean,
      q4.kl_mean),
    ("%s (%s on disk) is not closer to the stored model than Q4_0 (%s): mean KL %.5f "
     .. "against %.5f."):format(g.label, mb(g.file_bytes), mb(q4.file_bytes), g.kl_mean,
      q4.kl_mean))
end
-- Decode is bound by memory bandwidth only when the weights do not fit in the caches.
local function l3_bytes()
  local f = io.open("/sys/devices/system/cpu/cpu0/cache/index3/size")
  local t = f and f:read("l")
  if f then f:close() end
  local n, unit = (t or ""):match("^(%d+)([KMG]?)")
  if not n then return nil end
  return tonumber(n) * ({ [""] = 1, K = 1024, M = 1024 ^ 2, G = 1024 ^ 3 })[unit]
end
local l3 = l3_bytes()
rec.l3_bytes = l3 or wb.json.null
if l3 then lesson.conclude(rec, "fits_in_cache", s.mem_bytes <= l3,
  ("Speed, read with care: the stored weights (%.1f MB) fit in this CPU's %.0f MB last-level "
   .. "cache, so decode here is not limited by memory bandwidth and reading fewer bytes need not "
   .. "make it faster; with times this short, differences inside the printed ranges are noise. "
   .. "A model larger than the cache (--model) shows what the bytes save."):format(
    s.mem_bytes / 1e6, (l3 or 0) / 1e6),
  ("The stored weights (%.1f MB) do not fit in the last-level cache%s: decode reads them from "
   .. "memory every token, which is what fewer bytes save."):format(s.mem_bytes / 1e6,
    (" (%.0f MB)"):format(l3 / 1e6))) end
local faster = lesson.compare_ranges(q8.decode_runs, s.decode_runs)
local in_cache = l3 ~= nil and s.mem_bytes <= l3
lesson.conclude(rec, "q8_decode_faster", faster == "below",
  in_cache and "Q8_0 decoded faster than the stored weights in every run (the ranges do not "
    .. "overlap); the weights sit in the cache here (above), so this is the kernels' speed from "
    .. "cache, not the saving in memory traffic a model larger than the cache gets."
  or "Q8_0 decodes faster than the stored weights in every run: decode reads every weight once per "
    .. "token, and fewer bytes are read.",
  "Q8_0's decode times overlap the stored model's (or are slower): this run does not tell them "
  .. "apart.")
lesson.print_conclusions(rec, "What this run shows:")
cleanup()
lesson.emit(rec)
