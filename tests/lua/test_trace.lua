-- wb.trace: every rejection of the validator with its own message, the one-token case, trace
-- invariants on real runs of a tiny random model (intervals add up, counts match, the cache is
-- released on every stop), chunked prefill and batching through Lua, the record round trip, and
-- analyze_trace.lua's exit status.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")
local trace = require("wb.trace")

local function sample(over)
  local s = { generated_tokens = 3, generated_token_ids = { 4, 5, 6 }, ttft_ms = 10, e2e_ms = 30,
              itl_ms = { 8, 12 } }
  for k, v in pairs(over or {}) do s[k] = v end
  return s
end

T.test("the summary takes TTFT and the mean interval, not the prefill", function()
  local r = trace.summarize({ sample() })
  T.eq(r.samples, 1)
  T.eq(r.median_ttft_ms, 10)
  T.eq(r.median_tpot_ms, 10)
  r = trace.summarize({ sample(), sample({ ttft_ms = 20, e2e_ms = 44, itl_ms = { 12, 12 } }),
                        sample({ ttft_ms = 30, e2e_ms = 70, itl_ms = { 20, 20 } }) })
  T.eq(r.median_ttft_ms, 20)
  T.eq(r.median_tpot_ms, 12)
end)

T.test("a one-token reply has no TPOT", function()
  local one = sample({ generated_tokens = 1, generated_token_ids = { 4 }, e2e_ms = 10,
                       itl_ms = {} })
  local r = trace.summarize({ one })
  T.eq(r.median_tpot_ms, nil)
  T.eq(r.median_ttft_ms, 10)
end)

T.test("no samples is rejected", function()
  T.checkerror("no samples", trace.summarize, {})
  T.checkerror("no samples", trace.summarize, nil)
end)

T.test("negative and non-finite values are rejected", function()
  for _, v in ipairs({ -1, 0 / 0, math.huge }) do
    T.checkerror("finite and non-negative: itl_ms[1]", trace.summarize,
      { sample({ generated_tokens = 2, generated_token_ids = { 4, 5 }, ttft_ms = 10, e2e_ms = 20,
                 itl_ms = { v } }) })
  end
  T.checkerror("finite and non-negative: ttft_ms", trace.summarize,
    { sample({ ttft_ms = 0 / 0 }) })
  T.checkerror("finite and non-negative: e2e_ms", trace.summarize,
    { sample({ e2e_ms = -5 }) })
end)

T.test("a generated count that differs from the saved ids is rejected", function()
  T.checkerror("token count mismatch", trace.summarize, { sample({ generated_tokens = 2 }) })
end)

T.test("an end before the first token is rejected", function()
  T.checkerror("end before first token", trace.summarize, { sample({ e2e_ms = 2 }) })
end)

T.test("missing and extra intervals are rejected with different messages", function()
  T.checkerror("missing token intervals", trace.summarize, { sample({ itl_ms = { 8 } }) })
  T.checkerror("extra token intervals", trace.summarize, { sample({ itl_ms = { 8, 6, 6 } }) })
end)

T.test("intervals that do not add up to e2e minus TTFT are rejected", function()
  T.checkerror("do not add up", trace.summarize,
    { sample({ generated_tokens = 2, generated_token_ids = { 1, 2 }, e2e_ms = 20,
               itl_ms = { 9 } }) })
  -- within the tolerance (2 microseconds per interval) is fine
  trace.summarize({ sample({ itl_ms = { 8.001, 11.998 } }) })
end)

T.test("the message names the run and the sample", function()
  local rec = { model = {}, generation = {}, environment = {}, batch_sweep = {}, prefix_reuse = {},
                limits = "",
                runs = { { name = "short_cached",
                           samples = { sample(), sample({ e2e_ms = 1 }) } } } }
  T.checkerror("run 'short_cached': sample 2: end before first token", trace.check_record, rec)
  rec.prefix_reuse = nil
  T.checkerror("record has no 'prefix_reuse'", trace.check_record, rec)
end)

-- ---- real runs on a tiny random model --------------------------------------------------------

local dir = T.tmpdir()
T.make_tiny_model(dir, { n_ctx = 64 })
local model = wb.load(dir)
local PROMPT = "Hello world! How are you today? I am fine"

local function check_invariants(r, label)
  local s = trace.sample(r, { prompt = PROMPT })
  trace.check_sample(s, label)
  T.eq(s.generated_tokens, #r.token_ids, label)
  T.eq(#s.itl_ms, math.max(0, #r.token_ids - 1), label)
  local sum = 0
  for _, v in ipairs(r.itl_ms) do sum = sum + v end
  T.near(sum, r.last_token_ms - r.ttft_ms, 1e-6, label .. ": intervals sum to e2e - TTFT")
  T.check(r.tokenization_ms >= 0 and r.tokenization_ms <= r.ttft_ms,
          label .. ": tokenization first")
  T.check(r.e2e_ms >= r.last_token_ms, label .. ": finishing comes after the last token")
  return s
end

T.test("real runs satisfy the trace invariants and release the cache", function()
  local p = { temperature = 0, max_tokens = 12 }
  local cached = model:generate(PROMPT, p, { ignore_eos = true })
  local s = check_invariants(cached, "cached")
  T.eq(s.use_cache, true)
  T.eq(s.chunk_size, wb.json.null)
  T.eq(cached.cache_released, true)
  T.eq(s.cache_tokens_before_release, cached.prompt_tokens + 11)
  local plain = model:generate(PROMPT, p, { ignore_eos = true, cache = false })
  s = check_invariants(plain, "no cache")
  T.eq(s.cache_tokens_before_release, 0)
  T.same_list(plain.token_ids, cached.token_ids, "same tokens without the cache")
  local chunked = model:generate(PROMPT, p, { ignore_eos = true, chunk_size = 3 })
  s = check_invariants(chunked, "chunked")
  T.eq(s.chunk_size, 3)
  T.same_list(chunked.token_ids, cached.token_ids, "same tokens when chunked")
  local one = model:generate(PROMPT, { temperature = 0, max_tokens = 1 }, { ignore_eos = true })
  s = check_invariants(one, "one token")
  T.eq(s.tpot_ms, wb.json.null)
  T.eq(#s.itl_ms, 0)
end)

T.test("cancellation after N tokens says so and frees the cache", function()
  local r = model:generate(PROMPT, { temperature = 0, max_tokens = 20 },
                           { ignore_eos = true, cancel_after = 4 })
  T.eq(r.stop_reason, "cancelled")
  T.eq(#r.token_ids, 4)
  T.eq(r.cache_released, true)
  T.eq(r.cache_tokens_before_release, r.prompt_tokens + 3)
  check_invariants(r, "cancelled")
  -- leaving a stream early is a cancellation too
  local st = model:stream(PROMPT, { temperature = 0, max_tokens = 20 }, { ignore_eos = true })
  local n = 0
  for _ in st do
    n = n + 1
    if n == 2 then break end
  end
  st:close()
  local res = st:result()
  T.eq(res.stop_reason, "cancelled")
  T.eq(res.cache_released, true)
end)

T.test("chunking without a cache and bad chunk sizes are errors", function()
  T.checkerror("chunk_size", model.generate, model, PROMPT, { max_tokens = 2 },
               { cache = false, chunk_size = 4 })
  T.checkerror("chunk_size", model.generate, model, PROMPT, { max_tokens = 2 }, { chunk_size = -1 })
  T.checkerror("cancel_after", model.generate, model, PROMPT, { max_tokens = 2 },
               { cancel_after = -1 })
end)

T.test("batched generation gives each prompt its tokens alone, for mixed lengths", function()
  local prompts = { "Hello", "How is the weather?", "The chair is forty dollars, the lamp is",
                    "Is the lamp", "Things at the shop are fine: we sold three lamps and two" }
  local p = { temperature = 0, max_tokens = 7 }
  local b = model:generate_batch(prompts, p, { ignore_eos = true })
  T.eq(b.batch_size, #prompts)
  T.eq(b.output_tokens, 7 * #prompts)
  T.eq(b.steps, 6)
  T.check(b.output_tokens_per_s > 0)
  for i, text in ipairs(prompts) do
    local alone = model:generate(text, p, { ignore_eos = true })
    T.same_list(b.results[i].token_ids, alone.token_ids, "prompt " .. i)
    T.eq(b.results[i].text, alone.text)
  end
  T.checkerror("unknown option 'stpo'", model.generate_batch, model, prompts, { stpo = "\n" })
  T.checkerror("prompt 2 must be a string", model.generate_batch, model, { "a", 5 })
end)

T.test("a prefix kept in a session and forked equals a cold prefill", function()
  local ids = model.tokenizer:encode(PROMPT .. ", thank you. How is the weather?")
  local cold = model:session():prefill(ids)
  local half = #ids // 2
  local prefix = model:session()
  prefix:prefill({ table.unpack(ids, 1, half) })
  local warm = prefix:fork():prefill({ table.unpack(ids, half + 1) })
  local d = 0
  for i = 0, #cold - 1 do d = math.max(d, math.abs(cold:get(i) - warm:get(i))) end
  T.check(d <= 1e-4, "max difference " .. d)
  T.eq(cold:argmax(), warm:argmax())
end)

T.test("records round-trip through JSON and analyze_trace.lua checks them", function()
  local r = model:generate(PROMPT, { temperature = 0, max_tokens = 5 }, { ignore_eos = true })
  local rec = {
    model = { dir = dir }, generation = { strategy = "greedy" }, environment = { threads = 1 },
    runs = { { name = "short_cached", samples = { trace.sample(r) } } },
    batch_sweep = wb.json.array({}), prefix_reuse = { total_tokens = 3 }, limits = "test",
  }
  local path = dir .. "/trace.json"
  trace.write(path, rec)
  local back = trace.read(path)
  local summary = trace.check_record(back)
  T.eq(summary[1].name, "short_cached")
  T.eq(back.runs[1].samples[1].generated_tokens, 5)
  local exe = arg[-1] or "workbench"
  local cmd = ("%s scripts/analyze_trace.lua %s > %s/out.txt 2>&1"):format(exe, path, dir)
  local ok = os.execute(cmd)
  T.check(ok, "a valid record is accepted: " .. T.read_file(dir .. "/out.txt"))
  T.check(T.read_file(dir .. "/out.txt"):find("short_cached", 1, true), "the run is reported")
  back.runs[1].samples[1].generated_tokens = 4
  trace.write(path, back)
  ok = os.execute(cmd)
  T.check(not ok, "an invalid record exits non-zero")
  T.check(T.read_file(dir .. "/out.txt"):find("token count mismatch", 1, true),
          "with the reason: " .. T.read_file(dir .. "/out.txt"))
end)

collectgarbage()
model:close()
T.rmdir(dir)
T.done()
