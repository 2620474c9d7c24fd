-- wb.cli: every script's options are declared once and checked; --help answers with status 0,
-- misuse exits 2 with the usage; output files go to --output, else $WB_OUT (default ./wb-out).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local cli = require("wb.cli")
local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"
if exe:sub(1, 1) ~= "/" then exe = os.getenv("PWD") .. "/" .. exe end
local src = os.getenv("WB_SOURCE_DIR") or "."

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Run a command line in a shell; returns stdout, stderr, exit code.
local function sh(cmd)
  local tmp = os.tmpname()
  local p = assert(io.popen(cmd .. " 2>" .. q(tmp)))
  local out = p:read("a")
  local _, how, code = p:close()
  local err = T.read_file(tmp)
  os.remove(tmp)
  if how == "signal" then code = 128 + code end
  return out, err, code
end

local spec = {
  { "repeats", "count", 7, "runs" },
  { "min-three", "count", 5, "at least three", 3 },
  { "output", "string", nil, "file" },
  { "no-busy", "flag" },
  { "temperature", "number", 0.8, "temperature" },
  { "prompts", "list", { 8, 32 }, "prompt lengths", 1, short = "p" },
  { "format", "choice", "md", "table format", choices = { "md", "csv", "json" } },
  { "provider", "string", nil, "provider", many = true },
}

T.test("declared options parse, with defaults for the rest and dashes as underscores", function()
  local o = cli.parse({ "--repeats", "3", "--output", "x.json", "--no-busy" }, "s.lua", spec)
  T.eq(o.repeats, 3); T.eq(o.output, "x.json"); T.eq(o.no_busy, true); T.eq(o.min_three, 5)
  T.eq(math.type(o.repeats), "integer")
  local d = cli.parse({}, "s.lua", spec)
  T.eq(d.repeats, 7); T.eq(d.output, nil); T.eq(d.no_busy, nil); T.eq(d.temperature, 0.8)
  T.same_list(d.prompts, { 8, 32 }); T.same_list(d.provider, {})
end)

T.test("numbers, lists, choices, short names, --name=value, repeatable options, positionals", function()
  local o = cli.parse({ "-p", "8,32,96", "--temperature=0.25", "--format", "csv", "--provider", "a",
    "--provider=b", "x", "--", "--y" }, "s.lua", spec, { args = "A...", max_args = 5 })
  T.same_list(o.prompts, { 8, 32, 96 }); T.eq(o.temperature, 0.25); T.eq(o.format, "csv")
  T.same_list(o.provider, { "a", "b" }); T.same_list(o.args, { "x", "--y" })
  T.eq(cli.parse({ "--temperature", "-1.5" }, "s.lua", spec).temperature, -1.5)
end)

local function status_of(script_args)
  local _, err, code = sh(("%s scripts/kv_cache.lua %s"):format(q(exe), script_args))
  return code, err
end

T.test("an unknown option, a missing value or a bad value exits 2 with the usage on stderr", function()
  for _, a in ipairs({ "--repeets 3", "--repeats", "--repeats 0", "--repeats 1.5", "stray",
      "--no-busy=1" }) do
    local code, err = status_of(a)
    T.eq(code, 2, a)
    T.check(err:find("usage: workbench scripts/kv_cache.lua", 1, true), err)
  end
end)

T.test("--help prints the usage on stdout and exits 0", function()
  local out, err, code = sh(("%s scripts/kv_cache.lua --help"):format(q(exe)))
  T.eq(code, 0); T.eq(err, "")
  T.check(out:find("^usage: workbench scripts/kv_cache.lua") and out:find("--repeats N", 1, true), out)
end)

-- Every script, with no model loaded and nothing run: --help is 0, a bogus option is 2.
T.test("every script in scripts/ answers --help and rejects an unknown option with status 2", function()
  local p = assert(io.popen("ls " .. q(src .. "/scripts")))
  local n = 0
  for f in p:lines() do
    if f:match("%.lua$") then
      n = n + 1
      local path = src .. "/scripts/" .. f
      local out, _, code = sh(("%s %s --help"):format(q(exe), q(path)))
      T.eq(code, 0, f .. " --help")
      T.check(out:find("usage:", 1, true), f .. ": " .. out)
      local _, err2, code2 = sh(("%s %s --no-such-option-xyz"):format(q(exe), q(path)))
      T.eq(code2, 2, f .. " --no-such-option-xyz")
      T.check(err2:find("no-such-option-xyz", 1, true), f .. ": " .. err2)
    end
  end
  p:close()
  T.check(n >= 20, "scripts found: " .. n)
end)

T.test("output files go to --output, else $WB_OUT, else ./wb-out of the current directory", function()
  T.eq(cli.output_path("given.svg", "x.svg"), "given.svg")
  local dir = T.tmpdir()
  local script = ("%s/scripts/reasoning_cost.lua"):format(src)
  local out, err, code = sh(("cd %s && env -u WB_OUT %s %s"):format(q(dir), q(exe), q(script)))
  T.eq(code, 0, err)
  T.check(out:find("plot: wb-out/reasoning_cost.svg", 1, true), out)
  T.check(T.read_file(dir .. "/wb-out/reasoning_cost.svg"):find("<svg", 1, true))
  local out2 = sh(("cd %s && WB_OUT=%s %s %s"):format(q(dir), q(dir .. "/elsewhere"), q(exe), q(script)))
  T.check(out2:find("plot: " .. dir .. "/elsewhere/reasoning_cost.svg", 1, true), out2)
  T.check(T.read_file(dir .. "/elsewhere/reasoning_cost.svg"):find("<svg", 1, true))
  T.rmdir(dir)
end)

T.done()
