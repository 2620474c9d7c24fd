-- trace.lua - the request-timeline lab: trace requests from tokenization to the last token, under
-- the lab's five conditions, sweep the batch size, measure prefix reuse, and save it all as one
-- JSON record that scripts/analyze_trace.lua can summarise later without the model.
--
--   workbench scripts/trace.lua [--output FILE] [--model DIR] [--threads N] [--samples N]
--
-- Runs (greedy, 24 new tokens, <|endoftext|> treated as an ordinary token so every run has the
-- same output length; one warm-up request first, then N samples each, default 9; with 3 the
-- long_cached/long_chunked order flipped between runs):
--   short_cached          a support question, KV cache on
--   long_cached           a long prompt (about 96 tokens on TinyLM), cache on
--   short_without_cache   the short prompt with every step recomputing the whole sequence
--   long_chunked          the long prompt prefilled 16 tokens at a time through the cache
--   cancelled             the short prompt, stopped after 4 tokens (the cache is freed anyway)
-- Batch sweep: the short prompt B times, B = 1, 2, 4, 8, 16, decoded together (one forward pass
-- per step over the batch), repeated 5 times per size: the median and the range of tokens/s, and
-- whether neighbouring sizes' ranges overlap (then they are not told apart). Prefix reuse: the long prompt plus a suffix, tokenized once as a
-- whole; the first half of its tokens is kept in a session, forked, and only the rest prefilled.
--
-- Times are ms from the start of the request (before tokenization); docs/trace.md describes the
-- boundary and the record layout.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")
local trace = require("wb.trace")

local opts = require("wb.cli").parse(arg, "scripts/trace.lua", {
  { "output", "string", nil, "record file (default: $WB_OUT/trace-<date>.json)" },
  { "model", "string", nil, "model directory (default: -m, WB_MODEL or TinyLM)" },
  { "threads", "count", 1, "compute threads" },
  { "samples", "count", 9, "samples per run" },
})
opts.output = require("wb.cli").output_path(opts.output, os.date("trace-%Y%m%d-%H%M%S.json"))
wb.threads(opts.threads) -- one thread by default: steadier for a model this small (threads.lua)

local model = wb.load(opts.model)
local tok = model.tokenizer
local info = model:info() -- the same keys for GPT-2 and the Llama family
local MAX_NEW, WARMUP, CHUNK, CANCEL_AFTER = 24, 4, 16, 4
local BATCH_SIZES = { 1, 2, 4, 8, 16 }
local BATCH_REPEATS = 5

-- A chat model (a tokenizer_config.json with a chat template) gets its prompts through the
-- template, as a hosted chat call would; TinyLM is a plain completion model and gets the raw
-- support-transcript format it was trained on.
local chat_ok, chat = pcall(wb.chat_template, model.dir)
if not chat_ok then chat = nil end

local QUESTION = "Hi, I was charged twice for the Team plan this month. Can you refund the duplicate?"
local EARLIER_Q = "Hi, my board export stopped working after the update."
local EARLIER_A = "Sorry about that. Clear the cache and try the export again."

-- history: number of earlier question/answer pairs in front of the question
local function prompt_with_history(history)
  if chat then
    local messages = {}
    for _ = 1, history do
      messages[#messages + 1] = { role = "user", content = EARLIER_Q }
      messages[#messages + 1] = { role = "assistant", content = EARLIER_A }
    end
    messages[#messages + 1] = { role = "user", content = QUESTION }
    return chat:render(messages, { add_generation_prompt = true })
  end
  local turn = "Customer (Bo): " .. EARLIER_Q .. "\nAgent (Sam): " .. EARLIER_A .. "\n"
  return turn:rep(history) .. "Customer (Ana): " .. QUESTION .. "\nAgent (Lena):"
end

local SHORT = prompt_with_history(0)
-- The long prompt: earlier turns in front of the same question, as many as fit in the budget
-- (about 96 tokens on TinyLM) with room for the reply.
local LONG
do
  local budget = math.min(info.n_ctx - MAX_NEW - 8, 256)
  local n = 0
  while #tok:encode(prompt_with_history(n + 1)) <= budget do n = n + 1 end
  LONG = prompt_with_history(n)
  if not chat then
    -- A transcript can start mid-turn: fill the rest of the budget with the end of one more
    -- earlier turn, cut at a token boundary (a cut can re-encode differently, so shorten until
    -- the whole prompt fits).
    local extra = tok:encode(prompt_with_history(n + 1):sub(1, -#LONG - 1))
    for k = #extra, 1, -1 do
      local candidate = tok:decode({ table.unpack(extra, #extra - k + 1) }) .. LONG
      if #tok:encode(candidate) <= budget then LONG = candidate break end
    end
  end
end
local SUFFIX = " Sure, I can help with that."

local params = { temperature = 0, max_tokens = MAX_NEW }
local function run(prompt, o)
  local g = { ignore_eos = true }
  for k, v in pairs(o or {}) do g[k] = v end
  return model:generate(prompt, params, g)
end

-- ---- environment and model description --------------------------------------------------

local function read_cmd(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return nil end
  local s = p:read("a")
  p:close()
  s = s and s:gsub("%s+$", "")
  return s ~= "" and s or nil
end

local function cpu_name()
  local f = io.open("/proc/cpuinfo")
  if not f then return "unknown" end
  local text = f:read("a")
  f:close()
  return text:match("model name%s*:%s*([^\n]+)") or "unknown"
end

local sha = read_cmd(("sha256sum '%s/model.safetensors'"):format(model.dir))
local environment = {
  cpu = cpu_name(),
  online_cpus = tonumber(read_cmd("nproc") or "") or wb.json.null,
  threads = wb.threads(),
  workbench = "workbench " .. wb.version,
  lua = _VERSION,
  blas = wb.blas_info(),
  os = read_cmd("uname -sr") or "unknown",
  load_average = read_cmd("cut -d' ' -f1-3 /proc/loadavg") or wb.json.null,
  date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
}
local model_info = {
  dir = model.dir,
  sha256 = sha and sha:match("^(%x+)") or wb.json.null,
  parameters = model:num_parameters(),
  model_type = info.model_type,
  chat_template = chat and chat.source:match("[^/]+$") or wb.json.null, -- the file the template came from
  weight_bytes = info.weight_bytes,
  layers = info.n_layer, heads = info.n_head, kv_heads = info.n_kv_head, n_embd = info.n_embd,
  vocab_size = info.vocab_size, n_ctx = info.n_ctx, head_dim = info.head_dim,
  kv_bytes_per_token = info.kv_bytes_per_token,
}
local generation = {
  strategy = "greedy argmax", max_new_tokens = MAX_NEW, ignore_eos = true,
  warmup_tokens = WARMUP, samples_per_run = opts.samples, long_chunk_size = CHUNK,
  cancel_after = CANCEL_AFTER,
  short_prompt_tokens = #tok:encode(SHORT), long_prompt_tokens = #tok:encode(LONG),
}

print(("model %s: %d parameters, context %d; %d thread(s); %s"):format(model.dir,
      model:num_parameters(), info.n_ctx, wb.threads(), wb.blas_info()))
print(("short prompt %d tokens, long prompt %d tokens, %d new tokens, %d samples per run\n")
      :format(generation.short_prompt_tokens, generation.long_prompt_tokens, MAX_NEW, opts.samples))

-- ---- the five runs ----------------------------------------------------------------------

local noise = lesson.noise()
local warm = run(SHORT, { cancel_after = WARMUP })
local conditions = {
  { "short_cached", SHORT, {} },
  { "long_cached", LONG, {} },
  { "short_without_cache", SHORT, { cache = false } },
  { "long_chunked", LONG, { chunk_size = CHUNK } },
  { "cancelled", SHORT, { cancel_after = CANCEL_AFTER } },
}
local runs = {}
for _, c in ipairs(conditions) do
  local samples = {}
  for i = 1, opts.samples do
    samples[i] = trace.sample(run(c[2], c[3]), { prompt = c[2] })
  end
  local s = trace.summarize(samples, c[1])
  runs[#runs + 1] = {
    name = c[1], samples = samples,
    median_ttft_ms = trace.round3(s.median_ttft_ms),
    median_tpot_ms = s.median_tpot_ms and trace.round3(s.median_tpot_ms) or wb.json.null,
  }
  local ttft = {}
  for i, smp in ipairs(samples) do ttft[i] = smp.ttft_ms end
  runs[#runs].min_ttft_ms = trace.round3(stats.min(ttft))
  print(("%-20s TTFT %-28s ms  TPOT %s ms  stop %s, cache held %d tokens")
        :format(c[1], stats.format(ttft, "%.3f"),
                s.median_tpot_ms and ("%.3f"):format(s.median_tpot_ms) or "none",
                samples[1].stop_reason, samples[1].cache_tokens_before_release))
end
print("(TTFT: median (min to max) over the samples; the minimum is the cleanest estimate, as noise "
      .. "only adds time)")

-- Conclusions the samples support; each pair is stated only when the ranges do not overlap.
local conclusions_rec = {}
local function ttft_of(name)
  for _, r in ipairs(runs) do
    if r.name == name then
      local t = {}
      for i, smp in ipairs(r.samples) do t[i] = smp.ttft_ms end
      return t
    end
  end
end
local function compare_ttft(id, a, b, what)
  local cmp = lesson.compare_ranges(ttft_of(a), ttft_of(b))
  local ma, mb = stats.median(ttft_of(a)), stats.median(ttft_of(b))
  local c = lesson.conclude(conclusions_rec, id, cmp ~= "overlap",
    ("%s: %s's TTFT was %s %s's in every sample (medians %.3f and %.3f ms, minima %.3f and %.3f)."):format(
      what, a, cmp == "below" and "below" or "above", b, ma, mb, stats.min(ttft_of(a)),
      stats.min(ttft_of(b))),
    ("%s: %s and %s TTFT ranges overlap (medians %.3f and %.3f ms, minima %.3f and %.3f): not "
     .. "told apart on this run."):format(what, a, b, ma, mb, stats.min(ttft_of(a)),
      stats.min(ttft_of(b))))
  c.relation = cmp
end
compare_ttft("long_vs_short", "long_cached", "short_cached", "Prompt length")
compare_ttft("chunked_vs_whole", "long_chunked", "long_cached", "Chunked prefill")

-- ---- batch sweep ------------------------------------------------------------------------

local alone = runs[1].samples[1].generated_token_ids
local batch_sweep = {}
print()
for _, B in ipairs(BATCH_SIZES) do
  local prompts = {}
  for i = 1, B do prompts[i] = SHORT end
  model:generate_batch(prompts, params, { ignore_eos = true }) -- warm-up: sizes the buffers
  local same, texts, tps, elapsed, r = true, {}, {}, {}, nil
  for rep = 1, BATCH_REPEATS do
    r = model:generate_batch(prompts, params, { ignore_eos = true })
    tps[rep], elapsed[rep] = r.output_tokens_per_s, r.elapsed_ms
    for i, res in ipairs(r.results) do
      texts[i] = res.text
      for k = 1, #alone do
        if res.token_ids[k] ~= alone[k] then same = false end
      end
    end
  end
  local function r3(xs) local t = {} for i, v in ipairs(xs) do t[i] = trace.round3(v) end return wb.json.array(t) end
  batch_sweep[#batch_sweep + 1] = {
    batch_size = B, elapsed_ms = trace.round3(stats.median(elapsed)),
    elapsed_ms_all = r3(elapsed), output_tokens_per_s_all = r3(tps), repeats = BATCH_REPEATS,
    prefill_ms = trace.round3(r.prefill_ms),
    decode_ms = trace.round3(r.decode_ms), steps = r.steps, output_tokens = r.output_tokens,
    output_tokens_per_s = trace.round3(stats.median(tps)),
    decode_tokens_per_s = trace.round3(r.decode_tokens_per_s),
    same_tokens_as_alone = same, texts = texts,
  }
  print(("batch %2d: %4d tokens, %-26s tokens/s over %d runs; same tokens as alone: %s")
        :format(B, r.output_tokens, stats.format(tps, "%.0f"), BATCH_REPEATS, tostring(same)))
end
-- Neighbouring sizes: is the throughput difference larger than the spread?
local steps_apart, steps_overlap = {}, {}
for i = 2, #batch_sweep do
  local a, b = batch_sweep[i - 1], batch_sweep[i]
  local cmp = lesson.compare_ranges(b.output_tokens_per_s_all, a.output_tokens_per_s_all)
  b.vs_previous = cmp
  local label = ("%d->%d"):format(a.batch_size, b.batch_size)
  if cmp == "overlap" then steps_overlap[#steps_overlap + 1] = label
  else steps_apart[#steps_apart + 1] = label .. (cmp == "above" and " faster" or " slower") end
end
lesson.conclude(conclusions_rec, "batch_steps", #steps_overlap == 0,
  ("Every step up in batch size changed throughput by more than the spread: %s."):format(
    table.concat(steps_apart, ", ")),
  ("Throughput ranges overlap for %s, so those sizes are not told apart on this run%s."):format(
    table.concat(steps_overlap, ", "),
    #steps_apart > 0 and ("; apart: " .. table.concat(steps_apart, ", ")) or ""))

-- ---- prefix reuse -------------------------------------------------------------------------

-- Token boundaries come from the whole text: the prefix is the first half of the full sequence's
-- ids, never a separate tokenization of the prefix text (which can split differently).
local full = tok:encode(LONG .. SUFFIX)
local P = math.max(1, #full // 2)
local prefix_ids, suffix_ids = { table.unpack(full, 1, P) }, { table.unpack(full, P + 1) }
local prefix = model:session()
prefix:prefill(prefix_ids)
-- Both sides run through warm sessions (a fresh one pays first-touch page faults): the cold
-- one is reset, the reused one is a fork of the prefix cut back to it before each suffix.
local s, f = model:session(), prefix:fork()
local cold_ms, warm_ms, cold, reused = {}, {}, nil, nil
for i = 1, 7 do
  s:reset()
  local t0 = wb.clock_ms()
  cold = s:prefill(full)
  cold_ms[i] = wb.clock_ms() - t0
  f:truncate(P)
  t0 = wb.clock_ms()
  reused = f:prefill(suffix_ids)
  warm_ms[i] = wb.clock_ms() - t0
end
s:close()
f:close()
prefix:close()
local diff = 0
for i = 0, #cold - 1 do diff = math.max(diff, math.abs(cold:get(i) - reused:get(i))) end
local prefix_reuse = {
  total_tokens = #full, cached_prefix_tokens = P,
  cold_prefill_ms = trace.round3(stats.median(cold_ms)),
  suffix_prefill_ms = trace.round3(stats.median(warm_ms)),
  cold_prefill_ms_all = wb.json.array((function()
    local t = {} for i, v in ipairs(cold_ms) do t[i] = trace.round3(v) end return t end)()),
  suffix_prefill_ms_all = wb.json.array((function()
    local t = {} for i, v in ipairs(warm_ms) do t[i] = trace.round3(v) end return t end)()),
  max_abs_last_logit_diff = diff,
  same_greedy_next_token = cold:argmax() == reused:argmax(),
}
print(("\nprefix reuse: %d of %d tokens cached; cold prefill %s ms, suffix prefill %s ms; "
       .. "max |logit diff| %.2g; same next token: %s"):format(P, #full,
       stats.format(cold_ms, "%.3f"), stats.format(warm_ms, "%.3f"), diff,
       tostring(prefix_reuse.same_greedy_next_token)))

print()
lesson.print_conclusions(conclusions_rec)
local load = noise:finish(true)
lesson.print_load(load)
environment.load_average_after = read_cmd("cut -d' ' -f1-3 /proc/loadavg") or wb.json.null
environment.busy = load.busy

local record = {
  execution_mode = "fresh local inference; no simulated latency",
  model = model_info,
  generation = generation,
  environment = environment,
  warmup = trace.sample(warm, { prompt = SHORT }),
  runs = runs,
  batch_sweep = batch_sweep,
  prefix_reuse = prefix_reuse,
  conclusions = conclusions_rec.conclusions,
  limits = ("%d samples per condition after one warm-up, on a shared CPU%s; the output of %s "
            .. "(%s) is not a quality measure; no transport, queueing or production load.")
           :format(opts.samples, load.busy and " that was busy (see environment.load_average)" or "",
                   model.dir:match("([^/]+)/*$") or model.dir, info.model_type),
}
trace.check_record(record) -- the record must pass its own analyzer
trace.write(opts.output, record)
print(("\nwrote %s (read it back with: workbench scripts/analyze_trace.lua %s)"):format(opts.output,
      opts.output))
