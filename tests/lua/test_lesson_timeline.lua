-- The Part A lessons and the request-timeline lab on the shipped TinyLM: each script runs, and the
-- trace record it writes passes the analyzer and says what the lab claims (the five runs, the
-- cancelled run's freed cache, batch outputs equal to a lone run, prefix reuse within 1e-4).
-- Skipped when models/tinylm-base has no weights (a fresh checkout before training).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local MODEL = "models/tinylm-base/model.safetensors"
local f = io.open(MODEL, "rb")
if not f then
  print("SKIP: " .. MODEL .. " is absent (train it with scripts/train_tinylm.lua)")
  os.exit(0)
end
f:close()

local trace = require("wb.trace")
local exe = arg[-1] or "workbench"
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

T.test("prefill_decode.lua prints the table and the per-token costs", function()
  local out = lesson("scripts/prefill_decode.lua", "--repeats 2")
  T.check(out:find("per extra prompt token", 1, true), out)
  T.check(out:find("decode ms/token", 1, true), out)
end)

T.test("stream.lua shows TTFT and ITL, and hold-back keeps the stop string out", function()
  local out = lesson("scripts/stream.lua")
  T.check(out:find("time to first piece", 1, true), out)
  T.check(out:find("ITL median", 1, true), out)
  T.check(out:find("hold-back on", 1, true), out)
end)

T.test("threads.lua compares thread counts", function()
  local out = lesson("scripts/threads.lua", "--repeats 3 --no-busy")
  T.check(out:find("2 threads", 1, true), out)
end)

T.rmdir(dir)
T.done()
