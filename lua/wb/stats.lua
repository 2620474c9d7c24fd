-- wb.stats: small statistics over lists of numbers (timings, losses, probabilities).
--
--   local stats = require("wb.stats")
--   stats.median({3, 1, 2})              --> 2
--   stats.percentile(xs, 90)             -- linear interpolation between ranks (numpy's default)
--   stats.format(times_ms, "%.1f", " ms") --> "12.3 (11.9 to 13.0) ms"  -- median (min to max)
--
-- Inputs are never modified; an empty list or a non-number element is an error naming the
-- function, because a silent NaN in a benchmark table is worse than a stopped script.

local M = {}

local function check(fname, xs)
  if type(xs) ~= "table" then
    error(("stats.%s: expected a list of numbers, got %s"):format(fname, type(xs)), 3)
  end
  local n = #xs
  if n == 0 then error(("stats.%s: empty list"):format(fname), 3) end
  for i = 1, n do
    if type(xs[i]) ~= "number" then
      error(("stats.%s: element %d is a %s, not a number"):format(fname, i, type(xs[i])), 3)
    end
  end
  return n
end

local function sorted(xs)
  local s = table.move(xs, 1, #xs, 1, {})
  table.sort(s)
  return s
end

function M.min(xs)
  local n = check("min", xs)
  local m = xs[1]
  for i = 2, n do if xs[i] < m then m = xs[i] end end
  return m
end

function M.max(xs)
  local n = check("max", xs)
  local m = xs[1]
  for i = 2, n do if xs[i] > m then m = xs[i] end end
  return m
end

function M.sum(xs)
  local n = check("sum", xs)
  local s = 0
  for i = 1, n do s = s + xs[i] end
  return s
end

function M.mean(xs)
  local n = check("mean", xs)
  local s = 0.0
  for i = 1, n do s = s + xs[i] end
  return s / n
end

-- Sample standard deviation (n - 1 in the denominator); 0 for a single value.
function M.stddev(xs)
  local n = check("stddev", xs)
  if n == 1 then return 0.0 end
  local mu = M.mean(xs)
  local s = 0.0
  for i = 1, n do s = s + (xs[i] - mu) ^ 2 end
  return math.sqrt(s / (n - 1))
end

-- p in [0, 100]; rank (n - 1) * p / 100 interpolated linearly between neighbours.
function M.percentile(xs, p)
  local n = check("percentile", xs)
  if type(p) ~= "number" or p ~= p or p < 0 or p > 100 then
    error("stats.percentile: p must be a number in [0, 100]", 2)
  end
  local s = sorted(xs)
  local rank = (n - 1) * p / 100
  local lo = math.floor(rank)
  local frac = rank - lo
  local a = s[lo + 1]
  if frac == 0 then return a end
  return a + (s[lo + 2] - a) * frac
end

function M.median(xs)
  local n = check("median", xs)
  local s = sorted(xs)
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- { n=, mean=, median=, min=, max=, stddev= }
function M.summary(xs)
  check("summary", xs)
  return {
    n = #xs, mean = M.mean(xs), median = M.median(xs), min = M.min(xs), max = M.max(xs),
    stddev = M.stddev(xs),
  }
end

-- "median (min to max)" with each number formatted by fmt (default "%.2f") and an optional
-- unit appended once at the end: the way benchmark tables in this project report timings.
function M.format(xs, fmt, unit)
  check("format", xs)
  fmt = fmt or "%.2f"
  local f = function(x) return fmt:format(x) end
  return ("%s (%s to %s)%s"):format(f(M.median(xs)), f(M.min(xs)), f(M.max(xs)), unit or "")
end

return M
