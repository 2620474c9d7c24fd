-- The README's example script runs as printed and shows what it says it shows.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local root = os.getenv("WB_SOURCE_DIR") or "."
local f = assert(io.open(root .. "/README.md"))
local readme = f:read("a")
f:close()

T.test("the README has one Lua example of at most ten lines", function()
  local code = readme:match("```lua\n(.-)```")
  T.check(code, "no ```lua block in README.md")
  local n = select(2, code:gsub("\n", ""))
  T.check(n <= 10, ("the example has %d lines"):format(n))
end)

T.test("the README example runs and prints an entropy and five tokens", function()
  local code = readme:match("```lua\n(.-)```")
  local out = {}
  local env = setmetatable({ print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    out[#out + 1] = table.concat(parts, "\t")
  end }, { __index = _G })
  assert(load(code, "README example", "t", env))()
  T.check(out[1]:match("^entropy %d+%.%d+ bits$"), "first line: " .. tostring(out[1]))
  T.eq(#out, 6, "lines printed")
end)

T.done()
