-- wb.cli: the command-line options of a lesson script, declared once and checked.
--
--   local o = require("wb.cli").parse(arg, "scripts/kv_cache.lua", {
--     { "repeats", "count", 7, "runs per cell" },   -- --repeats N (an integer >= min, default 7)
--     { "output", "string", nil, "record file" },   -- --output FILE
--     { "no-busy", "flag" },                        -- --no-busy  (o.no_busy = true)
--   })
--
-- A count may give its minimum as a fifth field ({ "repeats", "count", 15, "...", 3 }). Anything
-- else on the command line (an unknown option, a missing or bad value) prints the usage built
-- from the declarations and exits with status 2, as command-line tools do.
local M = {}

local function usage(script, spec, msg)
  local lines = { ("usage: workbench %s [options]"):format(script) }
  for _, s in ipairs(spec) do
    local name, kind, default, help = s[1], s[2], s[3], s[4] or ""
    local arg = kind == "flag" and "" or (kind == "count" and " N" or " VALUE")
    local dflt = default ~= nil and (" (default %s)"):format(tostring(default)) or ""
    lines[#lines + 1] = ("  --%-16s %s%s"):format(name .. arg, help, dflt)
  end
  if msg then io.stderr:write(("%s: %s\n"):format(script, msg)) end
  io.stderr:write(table.concat(lines, "\n"), "\n")
  os.exit(2)
end

function M.parse(argv, script, spec)
  local by_name, o = {}, {}
  for _, s in ipairs(spec) do
    by_name[s[1]] = s
    o[s[1]:gsub("-", "_")] = s[3]
  end
  local i = 1
  while argv and i <= #argv do
    local a = argv[i]
    local s = a:match("^%-%-(.+)$") and by_name[a:sub(3)]
    if a == "--help" or a == "-h" then usage(script, spec) end
    if not s then usage(script, spec, ("unknown argument '%s'"):format(a)) end
    local key, kind = s[1]:gsub("-", "_"), s[2]
    if kind == "flag" then
      o[key] = true
      i = i + 1
    else
      local v = argv[i + 1]
      if v == nil then usage(script, spec, a .. " needs a value") end
      if kind == "count" then
        local n, min = math.tointeger(tonumber(v)), s[5] or 1
        if not n or n < min then
          usage(script, spec, ("%s needs an integer >= %d, got '%s'"):format(a, min, v))
        end
        v = n
      end
      o[key] = v
      i = i + 2
    end
  end
  return o
end

return M
