-- The Part A lessons and the request-timeline lab on the shipped TinyLM: each script runs, and the
-- trace record it writes passes the analyzer and says what the lab claims (the five runs, the
-- cancelled run's freed cache, batch outputs equal to a lone run, prefix reuse within 1e-4).
-- Skipped when models/tinylm-base has no weights (a fresh checkout before training).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

T.require_tinylm()

local trace = require("wb.trace")
local exe = T.EXE
local dir = T.tmpdir()

-- Run a lesson; returns its stdout (stderr goes to a file shown on failure).
local function lesson(script, args)
  local out, errf = dir .. "/out.txt", dir .. "/err.txt"
  local cmd = ("WB_MODEL= %s %s %s > %s 2> %s"):format(exe, script, args or "", out, errf)
  local ok = os.execute(cmd)
  local text = T.read_file(out)
  T.check(ok, ("%s failed:\n%s\n%s"):format(script, text, T.read_file(errf)), 2)
  return text
end

-- Run a lesson with WB_LESSON_RECORD set; returns its stdout and the record it wrote.
local function lesson_record(script, args) return T.lesson_record(dir, script, args) end

-- Every conclusion in the record is printed, and the load warning appears exactly when busy.
local function check_printed(out, rec)
  local flat = out:gsub("%s+", " ")
  for _, c in ipairs(rec.conclusions or {}) do
    T.check(flat:find(c.text:gsub("%s+", " "), 1, true), "conclusion not printed: " .. c.text)
  end
  if rec.load then
    T.eq(flat:find("WARNING: the machine was busy", 1, true) ~= nil, rec.load.busy, "load warning")
    local cpus = rec.load.cpus
    local busy = (rec.load.load_before > cpus - 1) or (rec.load.load_after > cpus)
    T.eq(rec.load.busy, busy, "busy recomputed from the load averages")
  end
end

local conclusion = T.conclusion

local function lo(xs) local m = math.huge for _, x in ipairs(xs) do m = math.min(m, x) end return m end
local function hi(xs) local m = -math.huge for _, x in ipairs(xs) do m = math.max(m, x) end return m end

T.test("kv_cache.lua: each printed sentence follows from this run's step costs", function()
  local out, rec = lesson_record("scripts/kv_cache.lua", "--repeats 3")
  T.eq(rec.same_tokens, true)
  check_printed(out, rec)
  local first, final = rec.rows[1], rec.rows[#rec.rows]
  T.eq(first.step, 8); T.eq(final.step, 96)
  local overlap = not (hi(final.cache_ms) < lo(first.cache_ms) or lo(final.cache_ms) > hi(first.cache_ms))
  T.eq(conclusion(rec, "cache_flat").holds, overlap, "cache_flat")
  T.eq(conclusion(rec, "no_cache_grows").holds, lo(final.no_cache_ms) > hi(first.no_cache_ms),
       "no_cache_grows")
  T.eq(conclusion(rec, "slowdown_grows").holds, lo(final.slowdown) > hi(first.slowdown),
       "slowdown_grows")
  for _, row in ipairs(rec.rows) do
    for i = 1, #row.slowdown do T.near(row.slowdown[i], row.no_cache_ms[i] / row.cache_ms[i], 1e-9) end
  end
  -- The sentence that claims growth is printed only when it holds.
  T.eq(out:find("grows with the length of the reply", 1, true) ~= nil,
       conclusion(rec, "slowdown_grows").holds)
end)

T.test("trace.lua writes a record that the analyzer accepts, with the lab's findings", function()
  local path = dir .. "/trace.json"
  lesson("scripts/trace.lua", "--samples 2 --output " .. path)
  local rec = trace.read(path)
  local runs = trace.check_record(rec)
  local names = {}
  for i, r in ipairs(runs) do names[i] = r.name end
  T.same_list(names, { "short_cached", "long_cached", "short_without_cache", "long_chunked",
                       "cancelled" })
  local by = {}
  for _, r in ipairs(rec.runs) do by[r.name] = r.samples end
  for _, s in ipairs(by.cancelled) do
    T.eq(s.stop_reason, "cancelled")
    T.eq(s.generated_tokens, 4)
    T.eq(s.cache_tokens_before_release, s.prompt_tokens + 3)
  end
  for _, s in ipairs(by.short_without_cache) do
    T.eq(s.use_cache, false)
    T.eq(s.cache_tokens_before_release, 0)
    T.same_list(s.generated_token_ids, by.short_cached[1].generated_token_ids, "no cache, same ids")
  end
  for _, s in ipairs(by.long_chunked) do
    T.eq(s.chunk_size, 16)
    T.same_list(s.generated_token_ids, by.long_cached[1].generated_token_ids, "chunked, same ids")
  end
  T.check(by.long_cached[1].prompt_tokens > by.short_cached[1].prompt_tokens + 30)
  T.eq(#rec.batch_sweep, 5)
  for _, b in ipairs(rec.batch_sweep) do
    T.eq(b.same_tokens_as_alone, true, "batch " .. b.batch_size)
    T.eq(b.output_tokens, 24 * b.batch_size)
  end
  -- The sentences follow the samples: a TTFT comparison is stated only when the ranges are apart,
  -- and the batch sweep names exactly the neighbouring sizes whose ranges overlap.
  local function ttft(name)
    local t = {}
    for _, s in ipairs(by[name]) do t[#t + 1] = s.ttft_ms end
    return t
  end
  local function apart(a, b) return hi(a) < lo(b) or lo(a) > hi(b) end
  T.eq(conclusion(rec, "chunked_vs_whole").holds, apart(ttft("long_chunked"), ttft("long_cached")))
  T.eq(conclusion(rec, "long_vs_short").holds, apart(ttft("long_cached"), ttft("short_cached")))
  local overlapping = {}
  for i, b in ipairs(rec.batch_sweep) do
    T.eq(#b.output_tokens_per_s_all, b.repeats)
    T.check(b.repeats >= 3, "batch sizes repeated")
    if i > 1 and not apart(b.output_tokens_per_s_all, rec.batch_sweep[i - 1].output_tokens_per_s_all) then
      overlapping[#overlapping + 1] = ("%d->%d"):format(rec.batch_sweep[i - 1].batch_size, b.batch_size)
    end
  end
  T.eq(conclusion(rec, "batch_steps").holds, #overlapping == 0)
  for _, o in ipairs(overlapping) do T.check(conclusion(rec, "batch_steps").text:find(o, 1, true), o) end
  T.check(rec.limits:find("tinylm-base", 1, true), "the limits name the model: " .. rec.limits)
  T.check(rec.prefix_reuse.max_abs_last_logit_diff <= 1e-4, "prefix reuse within 1e-4")
  T.eq(rec.prefix_reuse.same_greedy_next_token, true)
  T.check(type(rec.model.sha256) == "string" and #rec.model.sha256 == 64, "model checksum")
  T.check(rec.environment.threads == 1 and type(rec.environment.cpu) == "string")
  local report = lesson("scripts/analyze_trace.lua", path)
  T.check(report:find("long_chunked", 1, true) and report:find("prefix reuse", 1, true), report)
end)

T.test("analyze_trace.lua rejects a broken record with its reason and a non-zero status", function()
  local path = dir .. "/bad.json"
  T.write_file(path, '{"model":{},"generation":{},"environment":{},"batch_sweep":[],'
    .. '"prefix_reuse":{},"limits":"x","runs":[{"name":"r","samples":[{"generated_tokens":2,'
    .. '"generated_token_ids":[1,2],"ttft_ms":10,"e2e_ms":20,"itl_ms":[9]}]}]}')
  local ok = os.execute(("%s scripts/analyze_trace.lua %s > %s/o 2>&1"):format(exe, path, dir))
  T.check(not ok)
  T.check(T.read_file(dir .. "/o"):find("do not add up", 1, true), T.read_file(dir .. "/o"))
end)

T.test("analyze_trace.lua --demo rejects every corrupted copy, each with its own reason", function()
  local out = lesson("scripts/analyze_trace.lua", "--demo")
  for _, reason in ipairs({ "record has no 'runs'", "no samples", "is missing or not a number",
                            "finite and non-negative", "token count mismatch", "end before first token",
                            "missing token intervals", "extra token intervals", "do not add up" }) do
    T.check(out:find(reason, 1, true), "demo lacks: " .. reason .. "\n" .. out)
  end
  T.check(not out:find("ACCEPTED", 1, true), out)
end)

T.test("prefill_decode.lua prints the table and the per-token costs", function()
  local out, rec = lesson_record("scripts/prefill_decode.lua", "--repeats 3")
  T.check(out:find("per extra prompt token", 1, true), out)
  T.check(out:find("decode ms/token", 1, true), out)
  check_printed(out, rec)
  local cell = {}
  for _, c in ipairs(rec.cells) do cell[c.prompt .. ":" .. c.output] = c end
  local function apart_above(a, b) return lo(a) > hi(b) end
  local function overlap(a, b) return not (hi(a) < lo(b) or lo(a) > hi(b)) end
  T.eq(conclusion(rec, "prefill_grows").holds, apart_above(cell["96:32"].prefill, cell["8:32"].prefill))
  T.eq(conclusion(rec, "decode_flat").holds, overlap(cell["96:32"].per_token, cell["8:32"].per_token))
  local all = true
  for _, p in ipairs({ 8, 32, 64, 96 }) do
    if not apart_above(cell[p .. ":32"].total, cell[p .. ":8"].total) then all = false end
  end
  T.eq(conclusion(rec, "output_adds").holds, all)
  T.eq(conclusion(rec, "reply_dominates").holds,
       rec.prompt_cost_ms > 0 and rec.output_cost_ms > 5 * rec.prompt_cost_ms)
  T.check(out:find("course: ", 1, true), "the course's numbers are printed")
end)

T.test("stream.lua shows TTFT and ITL, and hold-back keeps the stop string out", function()
  local out, rec = lesson_record("scripts/stream.lua")
  check_printed(out, rec)
  T.check(out:find("time to first piece", 1, true), out)
  T.check(out:find("ITL median", 1, true), out)
  T.check(out:find("hold-back on", 1, true), out)
end)

T.test("threads.lua compares thread counts", function()
  local out, rec = lesson_record("scripts/threads.lua", "--repeats 3 --no-busy")
  T.check(out:find("2 threads", 1, true), out)
  check_printed(out, rec)
  local one, two = rec.as_is[1], rec.as_is[2]
  local want = hi(two) < lo(one) and "below" or lo(two) > hi(one) and "above" or "overlap"
  T.eq(conclusion(rec, "as_is").relation, want)
end)

T.rmdir(dir)
T.done()
