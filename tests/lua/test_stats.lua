-- wb.stats and wb.util: the pure-Lua helpers.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local stats = require("wb.stats")
local util = require("wb.util")

T.test("median of odd and even lists, input left unsorted", function()
  local xs = {5, 1, 3}
  T.eq(stats.median(xs), 3)
  T.same_list(xs, {5, 1, 3})
  T.eq(stats.median({4, 1, 3, 2}), 2.5)
  T.eq(stats.median({7}), 7)
end)

T.test("min, max, sum, mean and stddev", function()
  local xs = {2, 4, 4, 4, 5, 5, 7, 9}
  T.eq(stats.min(xs), 2)
  T.eq(stats.max(xs), 9)
  T.eq(stats.sum(xs), 40)
  T.eq(stats.mean(xs), 5.0)
  T.near(stats.stddev(xs), math.sqrt(32 / 7), 1e-12)
  T.eq(stats.stddev({3}), 0.0)
end)

T.test("percentile interpolates linearly between ranks", function()
  local xs = {10, 20, 30, 40}
  T.eq(stats.percentile(xs, 0), 10)
  T.eq(stats.percentile(xs, 100), 40)
  T.eq(stats.percentile(xs, 50), 25.0)
  T.near(stats.percentile(xs, 90), 37.0, 1e-12)
  T.eq(stats.percentile({5}, 75), 5)
  T.checkerror("p must be a number in [0, 100]", stats.percentile, xs, 101)
end)

T.test("format gives median (min to max)", function()
  T.eq(stats.format({12.34, 11.9, 13.0}), "12.34 (11.90 to 13.00)")
  T.eq(stats.format({3, 1, 2}, "%.1f", " ms"), "2.0 (1.0 to 3.0) ms")
end)

T.test("empty lists and non-numbers are errors naming the function", function()
  T.checkerror("stats.median: empty list", stats.median, {})
  T.checkerror("stats.mean: element 2 is a string", stats.mean, {1, "x"})
  T.checkerror("stats.max: expected a list of numbers", stats.max, nil)
end)

T.test("summary collects everything", function()
  local s = stats.summary({1, 2, 3})
  T.eq(s.n, 3); T.eq(s.median, 2); T.eq(s.min, 1); T.eq(s.max, 3); T.eq(s.mean, 2.0)
end)

T.test("repr prints tables with sorted keys, quoted strings and cycles cut", function()
  T.eq(util.repr({1, 2, x = {y = "z"}, [10] = true}), '{1, 2, [10] = true, x = {y = "z"}}')
  T.eq(util.repr({}), "{}")
  T.eq(util.repr("a\nb"), '"a\\nb"')
  T.eq(util.repr(1.0), "1.0")
  T.eq(util.repr(0 / 0), "nan")
  local t = {}
  t.self = t
  T.eq(util.repr(t), "{self = <cycle>}")
  T.eq(util.repr({{{{{1}}}}}), "{{{{{...}}}}}")
  local big = {}
  for i = 1, 60 do big[i] = i end
  T.check(util.repr(big):find("%.%.%. %(10 more%)}$") ~= nil)
  T.eq(util.repr({a = 1}, {indent = "  "}), "{\n  a = 1\n}")
end)

T.test("format_table aligns columns", function()
  local s = util.format_table({{id = 1, p = 0.5}, {id = 20, p = 0.25}}, {"id", "p"})
  T.eq(s, "id  p\n--  ----\n 1   0.5\n20  0.25")
end)

T.done()
