-- kv_cache.lua - the KV cache: the same tokens for much less work.
--
--   workbench scripts/kv_cache.lua [--repeats N] [--threads N]
--
-- Every decode step attends to all earlier tokens through their keys and values. Those never
-- change once computed, so a session keeps them (the KV cache) and each step only computes the
-- new token's. Without the cache, step k re-runs the whole prompt plus k-1 generated tokens.
--
-- This generates the same 96-token greedy reply with the cache on and off, alternating the two
-- (so a background hiccup hits both alike), and reads the cost of individual steps (8, 32, 64,
-- 96) off the generator's per-token clock, as "median (min to max)" over the runs. The sentences
-- at the end are chosen by comparing those ranges (step 8 against step 96, with and without the
-- cache, and the per-run slowdown), so they say only what this run measured.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")

local o = require("wb.cli").parse(arg, "scripts/kv_cache.lua", {
  { "repeats", "count", 7, "runs per cell" },
  { "threads", "count", 1, "compute threads" },
})
local repeats, threads = o.repeats, o.threads
wb.threads(threads) -- one thread by default: steadier timings for a model this small

local model = wb.load()
local tok = model.tokenizer
local PROMPT = "Customer (Ana): Hi, I was charged twice for the Team plan this month. " ..
               "Can you refund the duplicate?\n"
local N = 96
local POSITIONS = { 8, 32, 64, 96 } -- generated-token positions whose step cost is compared
local WINDOW = 4                    -- steps k-3..k averaged: one step is too short to time alone

-- Greedy and a fixed length: <|endoftext|> is treated as an ordinary token so every run
-- produces exactly n tokens and the per-token times compare like with like.
local function run(n, cache)
  return model:generate(PROMPT, { temperature = 0, max_tokens = n },
                        { cache = cache, ignore_eos = true })
end

-- Cost of step k (ms), from the generator's own per-token clock: itl_ms[j] is the gap between
-- token j and token j + 1, i.e. the decode step that produced token j + 1.
local function step_cost(r, k)
  local sum = 0
  for j = k - WINDOW, k - 1 do sum = sum + r.itl_ms[j] end
  return sum / WINDOW
end

print(("model %s: %d parameters, context %d; %s"):format(model.dir, model:num_parameters(),
      model:info().n_ctx, wb.blas_info()))
print(("prompt: %d tokens; %d thread(s); %d runs of %d new tokens with the cache and %d without, "
       .. "interleaved;\neach cell is the median (min to max) over runs of the mean cost of steps "
       .. "k-%d..k\n"):format(#tok:encode(PROMPT), wb.threads(), repeats, N, repeats, WINDOW - 1))

run(8, true); run(8, false) -- warm-up: page in the weights, size the buffers

local noise = lesson.noise()
local on, off, same, last = {}, {}, true, nil
for _, k in ipairs(POSITIONS) do on[k], off[k] = {}, {} end
local total_on, total_off = {}, {}
for i = 1, repeats do
  local a = run(N, true)
  local b = run(N, false)
  for _, k in ipairs(POSITIONS) do
    on[k][i] = step_cost(a, k)
    off[k][i] = step_cost(b, k)
  end
  total_on[i], total_off[i] = a.last_token_ms - a.ttft_ms, b.last_token_ms - b.ttft_ms
  if #a.token_ids ~= #b.token_ids then same = false end
  for j = 1, #a.token_ids do
    if a.token_ids[j] ~= b.token_ids[j] then same = false end
  end
  last = a
end
local load = noise:finish(true)

local rec = { lesson = "kv_cache", prompt_tokens = #tok:encode(PROMPT), new_tokens = N,
              repeats = repeats, window = WINDOW, same_tokens = same, rows = {}, load = load }
local fmt = "%8s | %-24s | %-24s | %-22s"
print(fmt:format("step k", "cache ms/step", "no cache ms/step", "slowdown (per run)"))
print(("-"):rep(88))
for _, k in ipairs(POSITIONS) do
  local slow = lesson.ratios(off[k], on[k])
  rec.rows[#rec.rows + 1] = { step = k, cache_ms = on[k], no_cache_ms = off[k], slowdown = slow }
  print(fmt:format(k, stats.format(on[k], "%.4f"), stats.format(off[k], "%.4f"),
                   stats.format(slow, "%.1f", "x")))
end
print(("\nsame tokens with and without the cache in every run: %s"):format(tostring(same)))
local text = last.text:gsub("\n", "\\n")
print(("continuation (first 90 bytes): %s\n"):format(text:sub(1, 90)))

-- What the numbers support, step 8 against step 96, each judged by whether the ranges overlap.
local first, final = POSITIONS[1], POSITIONS[#POSITIONS]
local on_cmp = lesson.compare_ranges(on[final], on[first])
local on_growth = lesson.ratios(on[final], on[first])
if on_cmp == "overlap" then
  lesson.conclude(rec, "cache_flat", true, ("With the cache, step %d and step %d cost the same "
    .. "within the noise (their ranges overlap): each step computes one new token."):format(first,
    final))
else
  lesson.conclude(rec, "cache_flat", false, nil, ("With the cache, step %d cost %s times step %d "
    .. "(ranges apart): attention still reads every cached key, which this model's size makes "
    .. "visible."):format(final, stats.format(on_growth, "%.2f"), first))
end
local off_cmp = lesson.compare_ranges(off[final], off[first])
local off_growth = lesson.ratios(off[final], off[first])
lesson.conclude(rec, "no_cache_grows", off_cmp == "above",
  ("Without the cache, step %d cost %s times step %d, every run's step %d slower than every "
   .. "run's step %d: each step recomputes the whole sequence, which is longer later."):format(
    final, stats.format(off_growth, "%.2f"), first, final, first),
  ("Without the cache, step %d and step %d could not be told apart here (ranges %s): the "
   .. "recomputation's growth was hidden by noise or by fixed per-step costs."):format(final,
    first, off_cmp))
local s_first, s_final = rec.rows[1].slowdown, rec.rows[#rec.rows].slowdown
local s_cmp = lesson.compare_ranges(s_final, s_first)
lesson.conclude(rec, "slowdown_grows", s_cmp == "above",
  ("So the cost of going without the cache grows with the length of the reply: %.1fx at step "
   .. "%d, %.1fx at step %d (medians; the per-run ranges do not overlap)."):format(
    stats.median(s_first), first, stats.median(s_final), final),
  ("The slowdown without the cache was %.1fx at step %d and %.1fx at step %d (medians), but "
   .. "the per-run ranges %s, so this run does not show it growing with the reply's length.")
  :format(stats.median(s_first), first, stats.median(s_final), final,
          s_cmp == "overlap" and "overlap" or "are reversed"))
lesson.print_conclusions(rec)
print()
lesson.print_load(load)
lesson.emit(rec)

-- The claim this lesson rests on, checked on every run.
if not same then
  io.stderr:write("kv_cache: cached and uncached tokens differ\n")
  os.exit(1)
end
