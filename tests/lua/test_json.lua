-- wb.json: cJSON-backed encode/decode with Lua semantics (null sentinel, integer preservation).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")
local json = wb.json

T.test("decode maps JSON types to Lua types", function()
  local v = json.decode('{"a": [1, 2.5, "x", true, false, null], "b": {"c": -3}}')
  T.eq(v.a[1], 1); T.eq(math.type(v.a[1]), "integer")
  T.eq(v.a[2], 2.5); T.eq(math.type(v.a[2]), "float")
  T.eq(v.a[3], "x"); T.eq(v.a[4], true); T.eq(v.a[5], false)
  T.eq(v.a[6], json.null)
  T.eq(#v.a, 6)
  T.eq(v.b.c, -3)
  T.eq(json.decode("42"), 42)
  T.eq(json.decode('"\\u00e9\\n"'), "\195\169\n")
  T.eq(tostring(json.null), "json.null")
end)

T.test("large integers that a double holds exactly stay integers", function()
  T.eq(json.decode("9007199254740992"), 9007199254740992)
  T.eq(math.type(json.decode("1e3")), "integer")
  T.eq(math.type(json.decode("1e300")), "float")
end)

T.test("syntax errors name the byte position", function()
  T.checkerror("at byte 7", json.decode, '{"a": ,}')
  T.checkerror("JSON syntax error", json.decode, "[1, 2")
  T.checkerror("trailing characters", json.decode, "[1] x")
  T.checkerror("at byte 5", json.decode, "[1] x")
  T.checkerror("JSON syntax error", json.decode, "")
  T.checkerror("bad argument #1 to 'decode' (string expected, got table)",
    function() return json.decode({}) end)
end)

T.test("encode detects arrays and objects", function()
  T.eq(json.encode({1, 2, 3}), "[1,2,3]")
  T.eq(json.encode({a = 1}), '{"a":1}')
  T.eq(json.encode({}), "{}")
  T.eq(json.encode(json.array()), "[]")
  T.eq(json.encode(json.array({})), "[]")
  T.eq(json.encode("a\"b"), '"a\\"b"')
  T.eq(json.encode(json.null), "null")
  T.eq(json.encode(nil), "null")
  T.eq(json.encode(true), "true")
  T.eq(json.encode(0.5), "0.5")
  T.eq(json.encode(math.maxinteger), tostring(math.maxinteger))
end)

T.test("encode rejects what JSON cannot hold", function()
  T.checkerror("NaN is not representable", json.encode, {x = 0 / 0})
  T.checkerror("inf is not representable", json.encode, math.huge)
  T.checkerror("-inf is not representable", json.encode, {-math.huge})
  local cyc = {}
  cyc.self = cyc
  T.checkerror("cycle", json.encode, cyc)
  T.checkerror("object key is a number", json.encode, {[1] = "a", [3] = "c"})
  T.checkerror("object key is a boolean", json.encode, {[true] = 1})
  T.checkerror("cannot encode a function", json.encode, {f = print})
  T.checkerror("unknown option 'indnet'", json.encode, {}, {indnet = true})
end)

T.test("the same table may appear twice without being a cycle", function()
  local shared = {1}
  T.eq(json.encode({shared, shared}), "[[1],[1]]")
end)

T.test("round trip keeps values and arrays (empty ones included)", function()
  local src = '{"name":"tiny","sizes":[1,2,3],"empty":[],"obj":{},"f":0.25,"n":null,"t":true}'
  local v = json.decode(src)
  local back = json.decode(json.encode(v))
  T.eq(back.name, "tiny"); T.same_list(back.sizes, {1, 2, 3})
  T.eq(json.encode(back.empty), "[]")
  T.eq(json.encode(back.obj), "{}")
  T.eq(back.f, 0.25); T.eq(back.n, json.null); T.eq(back.t, true)
  local pretty = json.encode(v, {indent = true})
  T.check(pretty:find("\n") ~= nil, "indent gives several lines")
  T.eq(json.encode(json.decode(pretty)), json.encode(v))
end)

T.test("floats survive a round trip exactly", function()
  for _, x in ipairs({0.1, 1 / 3, 1e-300, 123456.789, -2.5e-8}) do
    T.eq(json.decode(json.encode(x)), x)
  end
end)

T.test("every byte survives: NUL in strings and keys, control bytes, UTF-8", function()
  T.eq(json.encode("a\0b"), '"a\\u0000b"')
  T.eq(json.decode(json.encode("a\0b")), "a\0b")
  T.eq(json.decode('"a\\u0000b"'), "a\0b")
  local t = json.decode(json.encode({["k\0x"] = 1, k = 2, ["k\0"] = 3}))
  T.eq(t["k\0x"], 1); T.eq(t.k, 2); T.eq(t["k\0"], 3)
  local all = {}
  for b = 0, 255 do all[#all + 1] = string.char(b) end
  local s = table.concat(all)
  T.eq(json.decode(json.encode(s)), s)
  T.eq(json.decode('"\\ud83d\\ude00"'), "\240\159\152\128")
  T.checkerror("lone low surrogate", json.decode, '"\\ude00"')
  T.checkerror("control character", json.decode, '"a\nb"')
end)

T.test("deep nesting is an error, not a crash", function()
  T.checkerror("nested deeper than 1000", json.decode, string.rep("[", 100000))
  local t = {}
  local cur = t
  for _ = 1, 2000 do cur[1] = {}; cur = cur[1] end
  T.checkerror("nesting deeper than 1000", json.encode, t)
end)

T.done()
