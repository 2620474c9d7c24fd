-- analyze_trace.lua - read a saved request-timeline record and summarise it, without running a
-- model.
--
--   workbench scripts/analyze_trace.lua FILE
--   workbench scripts/analyze_trace.lua --demo [FILE]   -- each rejection, on corrupted copies
--
-- Every sample is checked first (wb.trace.check_record): a record with no samples, a negative or
-- non-finite time, a token count that differs from the saved ids, an end before the first token,
-- missing or extra intervals, or intervals that do not add up to e2e - TTFT is rejected with its
-- own message and a non-zero exit status. Then, per run: median TTFT and median TPOT (the mean
-- interval after the first token; a run of one-token replies has none), followed by the batch
-- sweep and the prefix-reuse result as recorded.
local trace = require("wb.trace")

-- --demo: copies of a valid record (FILE, or a small built-in one), each broken in one way, and
-- the validator's message for each. Exits 1 if any corrupted copy is accepted.
local function demo(file)
  local function sample(ids, ttft, itl)
    local e2e = ttft
    for _, v in ipairs(itl) do e2e = e2e + v end
    return { prompt_tokens = 12, generated_token_ids = ids, generated_tokens = #ids, ttft_ms = ttft,
             itl_ms = itl, e2e_ms = e2e, stop_reason = "length" }
  end
  local base = file and trace.read(file) or {
    model = { dir = "(built-in example)" }, generation = {}, environment = {}, batch_sweep = {},
    prefix_reuse = {}, limits = "a made-up record for the demonstration",
    runs = { { name = "short_cached", samples = { sample({ 5, 6, 7, 8 }, 1.5, { 0.25, 0.25, 0.5 }) } } },
  }
  trace.check_record(base) -- the starting point must be valid
  local function copy(v)
    if type(v) ~= "table" then return v end
    local t = {}
    for k, x in pairs(v) do t[k] = copy(x) end
    return t
  end
  local function first(rec) return rec.runs[1].samples[1] end
  local cases = {
    { "the record has no 'runs'", function(r) r.runs = nil end },
    { "a run has no samples", function(r) r.runs[1].samples = {} end },
    { "ttft_ms is missing", function(r) first(r).ttft_ms = nil end },
    { "ttft_ms is negative", function(r) first(r).ttft_ms = -1 end },
    { "an interval is infinite", function(r) first(r).itl_ms[1] = math.huge end },
    { "generated_tokens disagrees with the ids",
      function(r) first(r).generated_tokens = first(r).generated_tokens + 1 end },
    { "e2e_ms is before the first token", function(r) local s = first(r) s.e2e_ms = s.ttft_ms / 2 end },
    { "one interval is missing", function(r) table.remove(first(r).itl_ms) end },
    { "an extra interval", function(r) table.insert(first(r).itl_ms, 0) end },
    { "the intervals do not add up",
      function(r) local s = first(r) s.itl_ms[1] = s.itl_ms[1] + 1 s.e2e_ms = s.e2e_ms + 0.5 end },
  }
  print(("validator demo on %s:"):format(file or "a built-in example record"))
  local missed = 0
  for _, c in ipairs(cases) do
    local rec = copy(base)
    c[2](rec)
    local ok, err = pcall(trace.check_record, rec)
    if ok then missed = missed + 1 end
    print(("  %-40s -> %s"):format(c[1], ok and "ACCEPTED (validator bug)" or ("rejected: " .. tostring(err))))
  end
  os.exit(missed == 0 and 0 or 1)
end

local o = require("wb.cli").parse(arg, "scripts/analyze_trace.lua", {
  { "demo", "flag", nil, "check each rejection on corrupted copies of FILE (or a built-in record)" },
}, { about = "read a saved request-timeline record and summarise it, without running a model",
     args = "FILE", max_args = 1 })
if o.demo then demo(o.args[1]) end
local path = o.args[1]
if not path then
  io.stderr:write("scripts/analyze_trace.lua: needs a record FILE (see --help)\n")
  os.exit(2)
end

-- The fields printed below, checked first so that a bad one is named ("field 'batch_sweep[2].
-- elapsed_ms' must be a number, got string") instead of surfacing as an internal Lua error.
local function check_printed_fields(rec)
  local function bad(field, want, v)
    error(("field '%s' must be %s, got %s%s"):format(field, want, type(v),
      type(v) == "string" and (" " .. ("%q"):format(v:sub(1, 40))) or ""), 0)
  end
  local function num(v) return type(v) == "number" and v == v and v > -math.huge and v < math.huge end
  local function need_num(t, k, where)
    if not num(t[k]) then bad(where .. "." .. k, "a finite number", t[k]) end
  end
  local function need_obj(v, field) if type(v) ~= "table" then bad(field, "an object", v) end end
  need_obj(rec.model, "model")
  need_obj(rec.environment, "environment")
  if rec.batch_sweep ~= nil and type(rec.batch_sweep) ~= "table" then bad("batch_sweep", "a list", rec.batch_sweep) end
  for i, b in ipairs(type(rec.batch_sweep) == "table" and rec.batch_sweep or {}) do
    local where = ("batch_sweep[%d]"):format(i)
    need_obj(b, where)
    need_num(b, "elapsed_ms", where)
    need_num(b, "output_tokens_per_s", where)
    local all = b.output_tokens_per_s_all
    if type(all) == "table" then
      for j, v in ipairs(all) do
        if not num(v) then bad(("%s.output_tokens_per_s_all[%d]"):format(where, j), "a finite number", v) end
      end
    end
  end
  local p = rec.prefix_reuse
  if type(p) == "table" and p.cold_prefill_ms ~= nil then
    for _, k in ipairs({ "cold_prefill_ms", "suffix_prefill_ms", "max_abs_last_logit_diff" }) do
      need_num(p, k, "prefix_reuse")
    end
    for _, k in ipairs({ "cached_prefix_tokens", "total_tokens" }) do
      if math.type(p[k]) ~= "integer" then bad("prefix_reuse." .. k, "an integer", p[k]) end
    end
  end
  if rec.conclusions ~= nil and type(rec.conclusions) ~= "table" then bad("conclusions", "a list", rec.conclusions) end
  for i, c in ipairs(type(rec.conclusions) == "table" and rec.conclusions or {}) do
    if type(c) ~= "table" or type(c.text) ~= "string" then
      bad(("conclusions[%d].text"):format(i), "a string", type(c) == "table" and c.text or c)
    end
  end
end

local ok, err = pcall(function()
  local rec = trace.read(path)
  local runs = trace.check_record(rec)
  check_printed_fields(rec)

  local m = rec.model
  print(("record: %s"):format(path))
  print(("model analysed: %s (%s, %s parameters, sha256 %s)"):format(tostring(m.dir or m.id),
        tostring(m.model_type or "type not recorded"), tostring(m.parameters),
        tostring(m.sha256 or "?"):sub(1, 16)))
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
    print(("%-6s %12s %10s %14s  %s"):format("B", "elapsed ms", "tokens", "tokens/s", "range"))
    for _, b in ipairs(rec.batch_sweep) do
      local all = b.output_tokens_per_s_all
      local range = "(one run)"
      if type(all) == "table" and #all > 1 then
        local lo, hi = math.huge, -math.huge
        for _, v in ipairs(all) do lo, hi = math.min(lo, v), math.max(hi, v) end
        range = ("%.0f to %.0f over %d runs"):format(lo, hi, #all)
      end
      print(("%-6s %12.3f %10s %14.0f  %s"):format(tostring(b.batch_size), b.elapsed_ms,
            tostring(b.output_tokens), b.output_tokens_per_s, range))
    end
  end
  local p = rec.prefix_reuse
  if type(p) == "table" and p.cold_prefill_ms then
    print(("\nprefix reuse: %d of %d tokens cached; cold prefill %.3f ms, suffix prefill %.3f ms;"
          .. " max |logit diff| %.2g; same greedy next token: %s"):format(p.cached_prefix_tokens,
          p.total_tokens, p.cold_prefill_ms, p.suffix_prefill_ms, p.max_abs_last_logit_diff,
          tostring(p.same_greedy_next_token)))
  end
  if type(rec.conclusions) == "table" and #rec.conclusions > 0 then
    print("\nconclusions recorded with the run:")
    for _, c in ipairs(rec.conclusions) do print("- " .. tostring(c.text)) end
  end
  local env_load = rec.environment and rec.environment.load_average
  if type(env_load) == "string" then
    print(("\nload average when recorded: %s before, %s after%s"):format(env_load,
      tostring(rec.environment.load_average_after or "?"),
      rec.environment.busy == true and " (the machine was busy: read small differences as noise)" or ""))
  end
  if type(rec.limits) == "string" then print("\nlimits: " .. rec.limits) end
end)
if not ok then
  io.stderr:write(("analyze_trace: %s: %s\n"):format(path, tostring(err)))
  os.exit(1)
end
