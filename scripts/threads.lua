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
-- median and the range: watch the maximum, and the ratio of maximum to minimum.
local wb = require("wb")
local stats = require("wb.stats")

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
report("as the machine is now", measure())
if busy then
  start_busy(ncpu)
  local ok, by = pcall(measure)
  stop_busy()
  if not ok then error(by, 0) end
  report(("with %d busy process(es), one per core"):format(ncpu), by)
end
print("With the cores free, more threads can help a little or not at all: the work per step is")
print("tiny. With every core contended, a multi-thread step waits for whichever thread the OS")
print("paused, so the slow runs get much slower. One thread only ever waits for itself: use")
print("wb.threads(1) (the default) for timings of a model this small on a shared machine.")
