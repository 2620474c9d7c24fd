-- wb.Vec: construction, 0-based access, reductions and transforms checked against plain Lua.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local xs = {0.5, -1.25, 3.0, 3.0, 0.0, 2.5, -7.0}
local v = wb.vec(xs)

T.test("a Vec built from a table has its length and values at 0-based ids", function()
  T.eq(#v, #xs)
  for i = 1, #xs do T.eq(v:get(i - 1), xs[i]) end
  T.eq(math.type(#v), "integer")
end)

T.test("wb.vec(n [, fill]) makes a zero or filled vector", function()
  local z = wb.vec(4)
  T.eq(#z, 4)
  for i = 0, 3 do T.eq(z:get(i), 0.0) end
  local f = wb.vec(3, 1.5)
  T.eq(f:sum(), 4.5)
  T.eq(#wb.vec(0), 0)
  T.eq(#wb.vec({}), 0)
end)

T.test("bad constructor arguments raise argument errors", function()
  T.checkerror("bad argument #1 to 'wb.vec' (length must be non-negative)", wb.vec, -1)
  T.checkerror("element 2 is not a number", wb.vec, {1, "x"})
  T.checkerror("bad argument #1", wb.vec, "nope")
end)

T.test("set writes a float and returns the Vec", function()
  local w = wb.vec(3)
  T.eq(w:set(1, 2.5), w)
  T.eq(w:get(1), 2.5)
  w:set(0, 0.1)
  T.check(w:get(0) ~= 0.1, "stored as a 32-bit float")
  T.near(w:get(0), 0.1, 1e-7)
end)

T.test("ids out of range are argument errors naming the range", function()
  T.checkerror("id 7 out of range [0, 7)", v.get, v, 7)
  T.checkerror("id -1 out of range", v.get, v, -1)
  -- called as a method, the id is argument #1 and the function is named
  T.checkerror("bad argument #1 to 'set' (id 99 out of range [0, 7))",
    function() return v:set(99, 1) end)
  T.checkerror("number has no integer representation", v.get, v, 1.5)
  T.checkerror("Vec expected", wb.Vec.get, {}, 0)
end)

T.test("argmax returns the lowest id among ties and its value", function()
  local id, val = v:argmax()
  T.eq(id, 2)
  T.eq(val, 3.0)
  T.eq(wb.vec({1, 1, 1}):argmax(), 0)
  T.eq(wb.vec({0 / 0, 2, 5, 0 / 0}):argmax(), 2) -- NaN never wins
  T.checkerror("empty", function() return wb.vec(0):argmax() end)
end)

T.test("sum, max, min and dot agree with plain Lua", function()
  local s, mx, mn = 0, -math.huge, math.huge
  for _, x in ipairs(xs) do s = s + x; mx = math.max(mx, x); mn = math.min(mn, x) end
  T.near(v:sum(), s, 1e-6)
  T.eq(v:max(), mx)
  T.eq(v:min(), mn)
  local d = 0
  for _, x in ipairs(xs) do d = d + x * x end
  T.near(v:dot(v), d, 1e-5)
  T.checkerror("length mismatch", v.dot, v, wb.vec(2))
end)

T.test("topk sorts by value descending, ties by lower id, with fields id and p", function()
  local top = v:topk(3)
  T.eq(#top, 3)
  T.eq(top[1].id, 2); T.eq(top[1].p, 3.0)
  T.eq(top[2].id, 3); T.eq(top[2].p, 3.0)
  T.eq(top[3].id, 5); T.eq(top[3].p, 2.5)
  T.eq(#v:topk(100), #xs)   -- clamped to the length
  T.eq(#v:topk(0), 0)
  -- the large-k path (full sort) gives the same order as the small-k path
  local big = wb.vec(500)
  for i = 0, 499 do big:set(i, (i * 37) % 101) end
  local a, b = big:topk(200), big:topk(60)
  for i = 1, 60 do T.eq(a[i].id, b[i].id); T.eq(a[i].p, b[i].p) end
  for i = 2, 200 do
    T.check(a[i - 1].p > a[i].p or (a[i - 1].p == a[i].p and a[i - 1].id < a[i].id), "order")
  end
  T.checkerror("non-negative", v.topk, v, -1)
end)

T.test("softmax matches the Lua formula and sums to 1, with a temperature", function()
  for _, t in ipairs({1.0, 0.5, 2.0}) do
    local p = v:softmax(t)
    local m = -math.huge
    for _, x in ipairs(xs) do m = math.max(m, x) end
    local z = 0
    for _, x in ipairs(xs) do z = z + math.exp((x - m) / t) end
    for i, x in ipairs(xs) do T.near(p:get(i - 1), math.exp((x - m) / t) / z, 1e-6) end
    T.near(p:sum(), 1.0, 1e-6)
  end
  T.checkerror("temperature must be a positive number", v.softmax, v, 0)
  T.checkerror("temperature", v.softmax, v, -1)
  -- a huge logit does not overflow
  local p = wb.vec({1000, 0}):softmax()
  T.near(p:get(0), 1.0, 1e-6)
end)

T.test("log_softmax is the log of softmax", function()
  local p, lp = v:softmax(), v:log_softmax()
  for i = 0, #v - 1 do T.near(lp:get(i), math.log(p:get(i)), 1e-5) end
end)

T.test("entropy_bits treats 0 log 0 as 0 and never returns -0.0", function()
  T.near(wb.vec({0.5, 0.5}):entropy_bits(), 1.0, 1e-12)
  T.near(wb.vec({0.25, 0.25, 0.25, 0.25}):entropy_bits(), 2.0, 1e-12)
  local h = wb.vec({1, 0, 0}):entropy_bits()
  T.eq(h, 0.0)
  T.eq(tostring(h), "0.0")
  T.eq(1 / h, math.huge) -- +0.0, not -0.0
  local p = v:softmax()
  local want = 0
  for i = 0, #p - 1 do local q = p:get(i); if q > 0 then want = want - q * math.log(q, 2) end end
  T.near(p:entropy_bits(), want, 1e-6)
end)

T.test("count_nonzero, totable, copy", function()
  T.eq(v:count_nonzero(), 6)
  local t = v:totable()
  T.same_list(t, xs)
  local c = v:copy()
  c:set(0, 42)
  T.eq(v:get(0), 0.5)
  T.eq(c:get(0), 42.0)
end)

T.test("sum_over sums a set of ids and range-checks them", function()
  T.near(v:sum_over({0, 2, 5}), 0.5 + 3.0 + 2.5, 1e-6)
  T.eq(v:sum_over({}), 0.0)
  T.checkerror("out of range [0, 7)", v.sum_over, v, {1, 7})
  T.checkerror("not an integer", v.sum_over, v, {1, "a"})
end)

T.test("scale and add return new vectors", function()
  local s = v:scale(2)
  for i = 0, #v - 1 do T.eq(s:get(i), 2 * v:get(i)) end
  local a = v:add(s, -0.5)
  for i = 0, #v - 1 do T.near(a:get(i), 0.0, 1e-6) end
  local b = v:add(1)
  T.eq(b:get(0), 1.5)
  T.eq(v:get(0), 0.5)
  T.checkerror("length mismatch", v.add, v, wb.vec(3))
end)

T.test("sample walks the cumulative weights in id order", function()
  local w = wb.vec({0, 0.25, 0, 0.75})
  T.eq(w:sample(0.0), 1)
  T.eq(w:sample(0.2499), 1)
  T.eq(w:sample(0.25), 3)
  T.eq(w:sample(0.9999), 3)
  T.checkerror("u must be in [0, 1)", w.sample, w, 1.0)
  T.checkerror("no positive weight", function() return wb.vec(3):sample(0.5) end)
end)

T.test("tostring shows the length and the first values", function()
  T.eq(tostring(wb.vec({1, 2.5})), "Vec(2)[1, 2.5]")
  local s = tostring(wb.vec(2048))
  T.check(s:find("^Vec%(2048%)%[0, 0, 0, 0, 0, %.%.%.%]$") ~= nil, s)
end)

T.test("wb.Vec is the method table, so scripts can add methods", function()
  T.eq(type(wb.Vec), "table")
  T.eq(wb.Vec.argmax, v.argmax)
end)

T.done()
