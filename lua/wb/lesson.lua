-- wb.lesson - what every lesson needs to say only what its numbers support: range comparisons
-- for timings, the machine's load before and after a timed run, conclusions kept as data (so a
-- test can recompute them), the course's numbers beside ours, and an optional machine-readable
-- record of the run.
--
--   local lesson = require("wb.lesson")
--   local noise = lesson.noise()                  -- reads the load average now
--   ... timed work ...
--   noise:finish()                                -- reads it again, warns when the machine was busy
--   local c = lesson.conclude(rec, "cache_flat", ok, "text when ok", "text when not")
--   lesson.emit(rec)                              -- JSON to $WB_LESSON_RECORD when it is set
--
-- A conclusion is {id =, holds =, text =}: the sentence printed is picked by `holds`, which the
-- lesson computes from its measurements; tests recompute `holds` from the same record.
local wb = require("wb")
local stats = require("wb.stats")

local M = {}

-- 1-, 5- and 15-minute load averages, or nil where /proc/loadavg does not exist.
function M.loadavg()
  local f = io.open("/proc/loadavg")
  if not f then return nil end
  local s = f:read("l") or ""
  f:close()
  local a, b, c = s:match("^(%S+)%s+(%S+)%s+(%S+)")
  if not a then return nil end
  return { tonumber(a), tonumber(b), tonumber(c) }
end

function M.online_cpus()
  local p = io.popen("nproc 2>/dev/null")
  local n = p and tonumber(p:read("a"):match("%d+") or "")
  if p then p:close() end
  return n or 1
end

-- The machine counts as busy when, before the run, less than one core was free on average
-- (1-minute load above cpus - 1), or, after it, the load exceeded the core count (the lesson's
-- own thread accounts for about 1 of that). The course's "noise, honestly" point: timings taken
-- then can be several times slower and their ranges wider than the differences measured.
function M.is_busy(before, after, cpus)
  return (before ~= nil and before > cpus - 1) or (after ~= nil and after > cpus)
end

local Noise = {}
Noise.__index = Noise

function M.noise()
  local l = M.loadavg()
  return setmetatable({ before = l and l[1], cpus = M.online_cpus() }, Noise)
end

-- Reads the load again, prints one line (and a warning when busy) unless quiet; returns the
-- record part: {load_before =, load_after =, cpus =, busy =, warning =}.
function Noise:finish(quiet)
  local l = M.loadavg()
  self.after = l and l[1]
  local busy = M.is_busy(self.before, self.after, self.cpus)
  local out = { load_before = self.before or wb.json.null, load_after = self.after or wb.json.null,
                cpus = self.cpus, busy = busy }
  local line = ("load average (1 min) %s before, %s after, on %d CPU(s)"):format(
    self.before and ("%.2f"):format(self.before) or "?",
    self.after and ("%.2f"):format(self.after) or "?", self.cpus)
  if busy then
    out.warning = "the machine was busy while this ran: other jobs slow runs down unevenly, so "
      .. "read only differences larger than the printed ranges, and rerun on an idle machine "
      .. "before trusting small ones."
  end
  out.line = line
  if not quiet then M.print_load(out) end
  return out
end

-- [min, max] of xs against [min, max] of ys: "below" (every x under every y), "above", or
-- "overlap". Noise only ever adds time, so two timings whose ranges overlap are not told apart.
function M.compare_ranges(xs, ys)
  local xmin, xmax, ymin, ymax = stats.min(xs), stats.max(xs), stats.min(ys), stats.max(ys)
  if xmax < ymin then return "below" end
  if xmin > ymax then return "above" end
  return "overlap"
end

-- Element-wise a[i] / b[i] (paired samples from interleaved runs).
function M.ratios(a, b)
  local out = {}
  for i = 1, math.min(#a, #b) do out[i] = a[i] / b[i] end
  return out
end

-- Appends a conclusion to rec.conclusions (created when absent) and returns it.
function M.conclude(rec, id, holds, text_if, text_else)
  rec.conclusions = rec.conclusions or {}
  local c = { id = id, holds = holds and true or false, text = holds and text_if or text_else }
  rec.conclusions[#rec.conclusions + 1] = c
  return c
end

function M.find(rec, id)
  for _, c in ipairs(rec.conclusions or {}) do
    if c.id == id then return c end
  end
  return nil
end

-- Wraps text at about 94 columns; the first line starts with `lead`, the rest with spaces.
function M.wrap(text, lead)
  lead = lead or ""
  local indent = (" "):rep(#lead)
  local line, out = "", {}
  for word in text:gmatch("%S+") do
    if #line + #word + 1 > 94 and #line > 0 then out[#out + 1] = line; line = indent .. word
    else line = (#line > 0 and line .. " " or lead) .. word end
  end
  out[#out + 1] = line
  return table.concat(out, "\n")
end

-- Prints every conclusion of rec as a wrapped bullet.
function M.print_conclusions(rec, heading)
  if heading then print(heading) end
  for _, c in ipairs(rec.conclusions or {}) do print(M.wrap(c.text, "- ")) end
end

-- Prints a load record from Noise:finish(true): the line, and the warning when busy.
function M.print_load(load)
  print(load.line)
  if load.warning then print(M.wrap(load.warning, "WARNING: ")) end
end

-- Training against held-out accuracy, as two conclusions: "<id>_gap" (training ahead by at
-- least 25 points) and "<id>_chance" (held-out within two standard deviations of guessing among
-- n_choices, the binomial spread). what: "greedy constrained labels", for the sentences.
M.GAP_POINTS = 0.25
function M.accuracy_contrast(rec, id, what, train_ok, train_n, held_ok, held_n, n_choices)
  local gap = train_ok / train_n - held_ok / held_n
  local p = 1 / n_choices
  local expect, sd = held_n * p, math.sqrt(held_n * p * (1 - p))
  local near_chance = math.abs(held_ok - expect) <= 2 * sd
  M.conclude(rec, id .. "_gap", gap >= M.GAP_POINTS,
    ("%s: %d/%d right on the training tickets but %d/%d on held-out tickets written differently: "
     .. "the model recalls the tickets it memorised rather than reading new ones."):format(what,
      train_ok, train_n, held_ok, held_n),
    ("%s: %d/%d right on the training tickets and %d/%d on held-out ones, within %d points of "
     .. "each other: on this run the held-out tickets were handled about as well."):format(what,
      train_ok, train_n, held_ok, held_n, math.floor(M.GAP_POINTS * 100)))
  M.conclude(rec, id .. "_chance", near_chance,
    ("On held-out tickets that is no better than guessing: picking one of %d at random gets "
     .. "%.1f of %d right, give or take %.1f."):format(n_choices, expect, held_n, 2 * sd),
    ("On held-out tickets that is %s guessing (%.1f of %d expected at random, give or take "
     .. "%.1f)."):format(held_ok > expect and "better than" or "worse than", expect, held_n, 2 * sd))
end

-- The course's numbers for the same measurement, printed once per process with the note that
-- the shipped TinyLM is a different training run.
local said_once = false
function M.course(text)
  if not said_once then
    print(M.wrap("(course numbers come from the course's own TinyLM, a different training run "
                 .. "than the one shipped here: the numbers differ, the phenomena should not)"))
    said_once = true
  end
  print(M.wrap(text, "course: "))
end

-- True when the loaded model is the shipped TinyLM (its memorised support-desk prompts are what
-- several lessons rely on): a GPT-2 checkpoint whose tokenizer knows the corpus's markers.
function M.is_tinylm(model)
  local info = model:info()
  if info.model_type ~= "gpt2" then return false end
  local dir = model.dir or ""
  local f = io.open(dir .. "/summary.json")
  if f then f:close() return true end
  return false
end

-- Writes rec as JSON to $WB_LESSON_RECORD when that variable names a file (wb.write_file: a temp
-- file in the same directory, every write checked, fsync, rename). Tests use it to recompute a lesson's conclusions.
function M.emit(rec)
  local path = os.getenv("WB_LESSON_RECORD")
  if not path or path == "" then return rec end
  local text = wb.json.encode(rec, { indent = true }) .. "\n"
  wb.write_file(path, text) -- atomic: temp file, checked writes, fsync, rename
  return rec
end

return M
