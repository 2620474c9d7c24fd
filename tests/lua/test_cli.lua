-- wb.cli: lesson scripts' options are declared once, checked, and misuse exits 2 with a usage.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local cli = require("wb.cli")
local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"

local spec = {
  { "repeats", "count", 7, "runs" },
  { "min-three", "count", 5, "at least three", 3 },
  { "output", "string", nil, "file" },
  { "no-busy", "flag" },
}

T.test("declared options parse, with defaults for the rest and dashes as underscores", function()
  local o = cli.parse({ "--repeats", "3", "--output", "x.json", "--no-busy" }, "s.lua", spec)
  T.eq(o.repeats, 3); T.eq(o.output, "x.json"); T.eq(o.no_busy, true); T.eq(o.min_three, 5)
  T.eq(math.type(o.repeats), "integer")
  local d = cli.parse({}, "s.lua", spec)
  T.eq(d.repeats, 7); T.eq(d.output, nil); T.eq(d.no_busy, nil)
end)

local function exit_code(script_args)
  local ok, how, code = os.execute(("'%s' scripts/kv_cache.lua %s >/dev/null 2>&1"):format(exe, script_args))
  return ok and 0 or code
end

T.test("an unknown option, a missing value or a bad count exits 2", function()
  T.eq(exit_code("--repeets 3"), 2)
  T.eq(exit_code("--repeats"), 2)
  T.eq(exit_code("--repeats 0"), 2)
  T.eq(exit_code("--repeats 1.5"), 2)
end)

T.done()
