-- bench.lua - prefill and decode speed of a model, in the spirit of llama-bench.
--
--   workbench scripts/bench.lua -p 8,32,96 -n 32 -r 5 [-t 1,2] [--output md|csv|json] [--model DIR]
--
-- For every thread count: "pp N" prefills an N-token prompt (a cold cache each run) and "tg N"
-- decodes N tokens after a short prompt, greedy and past end-of-text, so every run does the same
-- work. Each test runs -r times after one warm-up; the table gives tokens per second as the median
-- and the range (min..max) of the runs, because on a shared machine the spread is part of the
-- answer. Settings are interleaved run by run, so a burst of background load hits all of them.
-- The header names the machine (CPU model, cores), the BLAS kernel and the model; the load
-- average is sampled before, between and after the tests, and a high one is reported as a warning
-- next to the numbers it disturbed.
local wb = require("wb")
local stats = require("wb.stats")
local cli = require("wb.cli")

local SCRIPT = "scripts/bench.lua"
local o = cli.parse(arg, SCRIPT, {
  { "prompts", "list", { 8, 32, 96 }, "prompt lengths for the prefill tests (pp)", 1, short = "p" },
  { "gen", "count", 32, "tokens per decode test (tg); 0 skips it", 0, short = "n" },
  { "repeats", "count", 5, "runs per test", 1, short = "r" },
  { "threads", "list", { 1 }, "thread counts", 1, short = "t" },
  { "output", "choice", "md", "table format", choices = { "md", "csv", "json" }, short = "o" },
  { "model", "string", nil, "model directory (default: -m, $WB_MODEL or TinyLM)" },
}, { about = "prefill and decode tokens per second, median and range, with the machine in the header" })

local function read_file(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function cpu_model()
  local s = read_file("/proc/cpuinfo") or ""
  return s:match("model name%s*:%s*([^\n]+)") or s:match("Hardware%s*:%s*([^\n]+)") or "unknown CPU"
end

local function cores()
  local p = io.popen("nproc 2>/dev/null")
  local n = p and tonumber(p:read("a"))
  if p then p:close() end
  return n or 1
end

local function load1()
  return tonumber((read_file("/proc/loadavg") or ""):match("^(%S+)")) or 0
end

local model = wb.load(o.model)
local info = model:info()
local ncpu = cores()
local max_threads = math.max(table.unpack(o.threads))
for _, p in ipairs(o.prompts) do
  if p + 1 > info.n_ctx then
    io.stderr:write(("%s: -p %d does not fit the context of %d tokens\n"):format(SCRIPT, p, info.n_ctx))
    os.exit(2)
  end
end
local TG_PROMPT = 4
if o.gen > 0 and TG_PROMPT + o.gen > info.n_ctx then
  io.stderr:write(("%s: -n %d does not fit the context of %d tokens\n"):format(SCRIPT, o.gen, info.n_ctx))
  os.exit(2)
end

-- Prompt ids: real text repeated to length, so the tokenizer's ids are ordinary ones.
local text_ids = model.tokenizer:encode(("Customer (Ana): Hi, how do I export my board data? "):rep(8))
local function prompt_ids(n)
  local ids = {}
  for i = 1, n do ids[i] = text_ids[(i - 1) % #text_ids + 1] end
  return ids
end

local tests = {}
for _, t in ipairs(o.threads) do
  for _, p in ipairs(o.prompts) do
    tests[#tests + 1] = { threads = t, test = "pp" .. p, kind = "pp", n = p, ids = prompt_ids(p), runs = {} }
  end
  if o.gen > 0 then
    tests[#tests + 1] = { threads = t, test = "tg" .. o.gen, kind = "tg", n = o.gen, ids = prompt_ids(TG_PROMPT), runs = {} }
  end
end

-- One run: tokens per second of the part the test measures, from the generator's own timings.
local function run(t)
  wb.threads(t.threads)
  if t.kind == "pp" then
    local r = model:generate(t.ids, { temperature = 0, max_tokens = 1 }, { ignore_eos = true })
    return t.n / r.prefill_ms * 1e3
  end
  local r = model:generate(t.ids, { temperature = 0, max_tokens = t.n }, { ignore_eos = true })
  return 1e3 / r.decode_ms_per_token
end

local loads = { load1() }
for _, t in ipairs(tests) do run(t) end -- warm-up: caches, thread pool, page faults
for _ = 1, o.repeats do
  for _, t in ipairs(tests) do t.runs[#t.runs + 1] = run(t) end
  loads[#loads + 1] = load1()
end
wb.threads(1)

-- Another job is running when the load, less the threads this run uses, reaches a whole core.
local max_load = math.max(table.unpack(loads))
local busy = max_load - max_threads >= 1
local header = {
  version = wb.version, cpu = cpu_model(), cores = ncpu, blas = wb.blas_info(), model = model.dir,
  model_type = info.model_type, parameters = info.parameters, repeats = o.repeats,
  load_average = loads, load_warning = busy and
    ("load average reached %.2f on %d cores during the run: other jobs were competing, so the speeds are low and spread"):format(max_load, ncpu)
    or nil,
}

local rows = {}
for _, t in ipairs(tests) do
  rows[#rows + 1] = { threads = t.threads, test = t.test, tokens = t.n, median = stats.median(t.runs),
    min = stats.min(t.runs), max = stats.max(t.runs), runs = t.runs }
end

if o.output == "json" then
  for _, r in ipairs(rows) do r.runs = wb.json.array(r.runs) end
  header.load_average = wb.json.array(loads)
  print(wb.json.encode({ machine = header, results = wb.json.array(rows) }, { indent = true }))
elseif o.output == "csv" then
  print("model_type,parameters,cpu,cores,blas,threads,test,tokens,median_tps,min_tps,max_tps,repeats")
  local function c(s) return '"' .. tostring(s):gsub('"', '""') .. '"' end
  for _, r in ipairs(rows) do
    print(table.concat({ c(header.model_type), header.parameters, c(header.cpu), ncpu, c(header.blas),
      r.threads, r.test, r.tokens, ("%.2f"):format(r.median), ("%.2f"):format(r.min), ("%.2f"):format(r.max),
      o.repeats }, ","))
  end
else
  print(("workbench %s; %s; %d cores; BLAS: %s"):format(wb.version, header.cpu, ncpu, header.blas))
  print(("model %s (%s, %d parameters); %d runs per test after a warm-up; load average %s")
    :format(model.dir, info.model_type, info.parameters, o.repeats,
            table.concat((function() local t = {} for i, l in ipairs(loads) do t[i] = ("%.2f"):format(l) end return t end)(), " ")))
  print()
  print("| threads | test | tokens/s median | range (min..max) |")
  print("|--------:|-----:|----------------:|-----------------:|")
  for _, r in ipairs(rows) do
    print(("| %7d | %4s | %15.1f | %16s |"):format(r.threads, r.test, r.median,
      ("%.1f..%.1f"):format(r.min, r.max)))
  end
end
if busy then
  -- In the table itself too, so a saved copy carries it.
  if o.output == "md" then print("\nwarning: " .. header.load_warning) end
  io.stderr:write("warning: ", header.load_warning, "\n")
end
