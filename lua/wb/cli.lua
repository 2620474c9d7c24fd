-- wb.cli: the command-line options of a script, declared once and checked; where its output goes.
--
--   local o = require("wb.cli").parse(arg, "scripts/kv_cache.lua", {
--     { "repeats", "count", 7, "runs per cell" },   -- --repeats N (an integer >= min, default 7)
--     { "output", "string", nil, "record file" },   -- --output FILE
--     { "no-busy", "flag" },                        -- --no-busy  (o.no_busy = true)
--     { "temperature", "number", 0.8, "softmax temperature" },           -- --temperature X
--     { "prompts", "list", { 8, 32 }, "prompt lengths", 1, short = "p" }, -- -p 8,32,96 (integers)
--     { "format", "choice", "md", "table format", choices = { "md", "csv", "json" } },
--     { "provider", "string", nil, "provider", many = true },            -- repeatable: a list
--   }, { about = "one line on what the script does", args = "PRESET [INPUT]", min_args = 1 })
--
-- A count or list may give its minimum as a fifth field ({ "repeats", "count", 15, "...", 3 });
-- `short` adds a one-letter spelling (-p 8); `--name=value` works too. Words that are not
-- options are positional arguments, returned in o.args, allowed only when info.args names them.
-- `--help` (or -h) prints the usage built from the declarations on stdout and exits 0; anything
-- else that does not fit (an unknown option, a missing or bad value, a stray argument) prints the
-- usage on stderr and exits 2, as command-line tools do.
--
-- Output files: M.output_path(o.output, "name.svg") is --output when given, else
-- $WB_OUT/name.svg (WB_OUT defaults to ./wb-out), so nothing lands in the current directory or the
-- source tree by surprise; the folder is created. Scripts print the path they wrote.
local M = {}

local function value_hint(s)
  local kind = s[2]
  if kind == "flag" then return "" end
  if kind == "count" then return " N" end
  if kind == "number" then return " X" end
  if kind == "list" then return " N,N,..." end
  if kind == "choice" then return " " .. table.concat(s.choices, "|") end
  return " VALUE"
end

local function show(v)
  if type(v) == "table" then
    local t = {}
    for i, x in ipairs(v) do t[i] = tostring(x) end
    return table.concat(t, ",")
  end
  return tostring(v)
end

function M.usage_text(script, spec, info)
  info = info or {}
  local lines = { ("usage: workbench %s [options]%s"):format(script, info.args and (" " .. info.args) or "") }
  if info.about then lines[#lines + 1] = info.about end
  lines[#lines + 1] = "options:"
  for _, s in ipairs(spec) do
    local name, default, help = s[1], s[3], s[4] or ""
    local flag = (s.short and ("-" .. s.short .. ", ") or "") .. "--" .. name .. value_hint(s)
    local dflt = default ~= nil and (" (default %s)"):format(show(default)) or ""
    local rep = s.many and " (repeatable)" or ""
    lines[#lines + 1] = ("  %-24s %s%s%s"):format(flag, help, dflt, rep)
  end
  lines[#lines + 1] = ("  %-24s %s"):format("-h, --help", "show this help and exit")
  return table.concat(lines, "\n")
end

local function fail(script, spec, info, msg)
  io.stderr:write(("%s: %s\n"):format(script, msg))
  io.stderr:write(M.usage_text(script, spec, info), "\n")
  os.exit(2)
end

local function convert(script, spec, info, s, flag, v)
  local kind = s[2]
  local function bad(what) fail(script, spec, info, ("%s needs %s, got '%s'"):format(flag, what, v)) end
  if kind == "count" then
    local n, min = math.tointeger(tonumber(v)), s[5] or 1
    if not n or n < min then bad(("an integer >= %d"):format(min)) end
    return n
  elseif kind == "number" then
    local x = tonumber(v)
    if not x or x ~= x then bad("a number") end
    if s[5] and x < s[5] then bad(("a number >= %s"):format(s[5])) end
    return x
  elseif kind == "list" then
    local out, min = {}, s[5] or 1
    for item in (v .. ","):gmatch("([^,]*),") do
      local n = math.tointeger(tonumber(item))
      if not n or n < min then bad(("a comma-separated list of integers >= %d"):format(min)) end
      out[#out + 1] = n
    end
    if #out == 0 then bad("a comma-separated list of integers") end
    return out
  elseif kind == "choice" then
    for _, c in ipairs(s.choices) do if c == v then return v end end
    bad("one of " .. table.concat(s.choices, ", "))
  end
  return v
end

function M.parse(argv, script, spec, info)
  info = info or {}
  local by_name, by_short, o = {}, {}, { args = {} }
  for _, s in ipairs(spec) do
    by_name[s[1]] = s
    if s.short then by_short[s.short] = s end
    local key = s[1]:gsub("-", "_")
    if s.many then o[key] = {} else o[key] = s[3] end
  end
  local i, only_args = 1, false
  while argv and i <= #argv do
    local a = argv[i]
    if only_args or a == "-" or a:sub(1, 1) ~= "-" then
      o.args[#o.args + 1] = a
      i = i + 1
    elseif a == "--" then
      only_args = true
      i = i + 1
    elseif a == "--help" or a == "-h" then
      io.stdout:write(M.usage_text(script, spec, info), "\n")
      os.exit(0)
    else
      local name, attached = a:match("^%-%-([^=]+)=(.*)$")
      local s
      if name then s = by_name[name]
      elseif a:match("^%-%-") then s = by_name[a:sub(3)]
      elseif #a == 2 then s = by_short[a:sub(2)] end
      -- A negative number is a value, not an option, only where a value is expected (below).
      if not s then fail(script, spec, info, ("unknown option '%s'"):format(a)) end
      local key, flag = s[1]:gsub("-", "_"), a:match("^[^=]+")
      if s[2] == "flag" then
        if attached then fail(script, spec, info, flag .. " takes no value") end
        o[key] = true
        i = i + 1
      else
        local v = attached
        if v == nil then
          v = argv[i + 1]
          if v == nil then fail(script, spec, info, flag .. " needs a value") end
          i = i + 1
        end
        v = convert(script, spec, info, s, flag, v)
        if s.many then o[key][#o[key] + 1] = v else o[key] = v end
        i = i + 1
      end
    end
  end
  local min_args, max_args = info.min_args or 0, info.max_args
  if max_args == nil then max_args = info.args and math.huge or 0 end
  if #o.args > max_args then
    fail(script, spec, info, ("unexpected argument '%s'"):format(o.args[max_args + 1]))
  end
  if #o.args < min_args then fail(script, spec, info, "missing " .. (info.args or "arguments")) end
  return o
end

--- The folder for output files: $WB_OUT, else ./wb-out (created).
function M.output_dir()
  local dir = os.getenv("WB_OUT")
  if not dir or dir == "" then dir = "wb-out" end
  local ok = os.execute(("mkdir -p '%s'"):format(dir:gsub("'", "'\\''")))
  if not ok then error(("cannot create the output folder %s (set WB_OUT or --output)"):format(dir), 2) end
  return dir
end

--- Where a script writes `name`: the --output value when given, else output_dir()/name.
function M.output_path(given, name)
  if given and given ~= "" then return given end
  return M.output_dir() .. "/" .. name
end

return M
