-- threads.lua - why one thread is steadier for a model this small on a shared machine.
--
--   workbench scripts/threads.lua [--repeats N] [--max-threads N] [--no-busy]
--
-- The thread count is a visible setting: wb.threads(n), --threads N on the lessons. More threads
-- split every matrix of a decode step between cores, and each step then waits at barriers for
-- all of them. TinyLM's step is so short (a tenth of a millisecond) that a thread the operating
-- system has paused to run someone else's job holds up the whole step for a scheduler time
-- slice, far longer than the step itself.
--
-- This times a 20-token greedy generation at 1 and more threads, alternating, first as the
-- machine is, then with one busy-looping process per core started by this script (and ended by
-- its process id when done) to stand in for the other jobs on a shared machine. It prints the
-- median and the range: watch the maximum, and the ratio of maximum to minimum. The closing
-- sentences compare the ranges of 1 and max-threads threads in each condition.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")

local o = require("wb.cli").parse(arg, "scripts/threads.lua", {
  { "repeats", "count", 15, "runs per setting", 3 },
  { "max-threads", "count", 2, "largest thread count tried", 2 },
  { "no-busy", "flag", nil, "skip the run with a busy neighbour" },
})
local repeats, max_threads, busy = o.repeats, o.max_threads, not o.no_busy

local function read(cmd)
  local p = io.popen(cmd)
  local s = p:read("a")
  p:close()
  return (s:gsub("%s+$", ""))
end
local ncpu = tonumber(read("nproc 2>/dev/null")) or 1

local model = wb.load()
local PROMPT = "Customer (Ana): Hi, how do I export my board data?\nAgent (Lena):"
local params = { temperature = 0, max_tokens = 20 }

local function measure()
  local by = {}
  for n = 1, max_threads do by[n] = {} end
  for _ = 1, repeats do -- interleaved, so a burst of background load hits every setting
    for n = 1, max_threads do
      wb.threads(n)
      local t0 = wb.clock_ms()
      model:generate(PROMPT, params, { ignore_eos = true })
      by[n][#by[n] + 1] = wb.clock_ms() - t0
    end
  end
  wb.threads(1)
  return by
end

local function report(title, by)
  print(("%s (load average %s)"):format(title, read("cut -d' ' -f1-3 /proc/loadavg")))
  for n = 1, max_threads do
    local xs = by[n]
    print(("  %d thread%s  ms per generation: %-28s max/min %.1fx"):format(n, n > 1 and "s" or " ",
          stats.format(xs, "%.2f"), stats.max(xs) / stats.min(xs)))
  end
  print()
end

-- The busy loops: plain processes we start, remember by pid, and end by pid. Each also checks
-- that this process is alive (`kill -0` is a shell builtin: no fork, still 100% of a core), so
-- they end on every exit path: an error, Ctrl-C, os.exit, even kill -9.
local pids = {}
local self_pid = io.open("/proc/self/stat"):read("n")
local function start_busy(n)
  for _ = 1, n do
    local loop = ("while kill -0 %d 2>/dev/null; do :; done"):format(self_pid)
    local p = io.popen("sh -c 'echo $$; exec sh -c \"" .. loop .. "\" >/dev/null 2>&1' & ")
    local pid = tonumber(p:read("l"))
    p:close()
    if pid then pids[#pids + 1] = pid end
  end
end
local function stop_busy()
  for _, pid in ipairs(pids) do os.execute(("kill %d 2>/dev/null"):format(pid)) end
  pids = {}
end

print(("model %s; %d online CPU(s); %d repeats; 20-token greedy generations\n")
      :format(model.dir, ncpu, repeats))
model:generate(PROMPT, params, { ignore_eos = true }) -- warm-up
local noise = lesson.noise()
local rec = { lesson = "threads", max_threads = max_threads, repeats = repeats }
rec.as_is = measure()
report("as the machine is now", rec.as_is)
local load = noise:finish(true)
rec.load = load
if busy then
  start_busy(ncpu)
  local ok, by = pcall(measure)
  stop_busy()
  if not ok then error(by, 0) end
  rec.contended = by
  report(("with %d busy process(es), one per core"):format(ncpu), by)
end

-- What the ranges support, 1 thread against the most threads tried.
local N = max_threads
local function verdict(by)
  local cmp = lesson.compare_ranges(by[N], by[1])
  return cmp, stats.median(by[N]) / stats.median(by[1])
end
local cmp, ratio = verdict(rec.as_is)
local words = { below = "was faster with %d threads (every run; median ratio %.2f)",
                above = "was slower with %d threads (every run; median ratio %.2f)",
                overlap = "could not tell %d threads from 1 (ranges overlap; median ratio %.2f)" }
local c = lesson.conclude(rec, "as_is", true, ("As the machine was, a generation " .. words[cmp]
  .. ": the work per step is tiny."):format(N, ratio))
c.relation = cmp
if rec.contended then
  local bcmp, bratio = verdict(rec.contended)
  local worst = stats.max(rec.contended[N]) / stats.max(rec.contended[1])
  local b = lesson.conclude(rec, "contended_hurts", bcmp == "above",
    ("With every core contended, %d threads were slower in every run (median %.1fx, slowest run "
     .. "%.1fx the slowest single-thread run): a multi-thread step waits for whichever thread the "
     .. "OS paused. One thread only ever waits for itself, which is why the lessons default to "
     .. "wb.threads(1)."):format(N, bratio, worst),
    ("With every core contended, %d threads against 1: %s (median ratio %.2f): on this run "
     .. "contention did not make the multi-thread runs slower throughout."):format(N,
      bcmp == "overlap" and "ranges overlap" or "faster", bratio))
  b.relation = bcmp
end
lesson.print_conclusions(rec)
lesson.print_load(load)
lesson.emit(rec)
