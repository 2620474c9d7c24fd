-- analyze_trace.lua - read a saved request-timeline record and summarise it, without running a
-- model.
--
--   workbench scripts/analyze_trace.lua FILE
--
-- Every sample is checked first (wb.trace.check_record): a record with no samples, a negative or
-- non-finite time, a token count that differs from the saved ids, an end before the first token,
-- missing or extra intervals, or intervals that do not add up to e2e - TTFT is rejected with its
-- own message and a non-zero exit status. Then, per run: median TTFT and median TPOT (the mean
-- interval after the first token; a run of one-token replies has none), followed by the batch
-- sweep and the prefix-reuse result as recorded.
local trace = require("wb.trace")

local path = arg and arg[1]
if not path or path == "-h" or path == "--help" then
  io.stderr:write("usage: workbench scripts/analyze_trace.lua FILE\n")
  os.exit(2)
end

local ok, err = pcall(function()
  local rec = trace.read(path)
  local runs = trace.check_record(rec)

  local m = rec.model
  print(("record: %s"):format(path))
  print(("model: %s (%s parameters, sha256 %s)"):format(tostring(m.dir or m.id),
        tostring(m.parameters), tostring(m.sha256 or "?"):sub(1, 16)))
  local env = rec.environment
  print(("environment: %s; %s thread(s); %s"):format(tostring(env.cpu), tostring(env.threads),
        tostring(env.workbench)))
  print()
  local fmt = "%-22s %7s %12s %12s %8s"
  print(fmt:format("run", "samples", "TTFT ms", "TPOT ms", "prompt"))
  for i, r in ipairs(runs) do
    local s = r.summary
    local first = rec.runs[i].samples[1]
    print(fmt:format(r.name, s.samples, ("%.3f"):format(s.median_ttft_ms),
          s.median_tpot_ms and ("%.3f"):format(s.median_tpot_ms) or "none",
          tostring(first.prompt_tokens)))
  end
  if type(rec.batch_sweep) == "table" and #rec.batch_sweep > 0 then
    print("\nbatch sweep (one forward pass per step over the batch):")
    print(("%-6s %12s %10s %14s"):format("B", "elapsed ms", "tokens", "tokens/s"))
    for _, b in ipairs(rec.batch_sweep) do
      print(("%-6s %12.3f %10s %14.0f"):format(tostring(b.batch_size), b.elapsed_ms,
            tostring(b.output_tokens), b.output_tokens_per_s))
    end
  end
  local p = rec.prefix_reuse
  if type(p) == "table" and p.cold_prefill_ms then
    print(("\nprefix reuse: %d of %d tokens cached; cold prefill %.3f ms, suffix prefill %.3f ms;"
          .. " max |logit diff| %.2g; same greedy next token: %s"):format(p.cached_prefix_tokens,
          p.total_tokens, p.cold_prefill_ms, p.suffix_prefill_ms, p.max_abs_last_logit_diff,
          tostring(p.same_greedy_next_token)))
  end
  if type(rec.limits) == "string" then print("\nlimits: " .. rec.limits) end
end)
if not ok then
  io.stderr:write(("analyze_trace: %s: %s\n"):format(path, tostring(err)))
  os.exit(1)
end
