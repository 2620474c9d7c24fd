-- wb.util: printing helpers for the REPL and scripts.
--
--   local util = require("wb.util")
--   util.repr({1, 2, x = {y = "z"}})     --> '{1, 2, x = {y = "z"}}'
--   util.show(t)                         -- print(util.repr(t))
--   util.print_table(rows, {"id", "p"})  -- rows of records as aligned columns
--
-- repr sorts keys (numbers before strings), so its output is stable and diffable; it stops at
-- cycles and at a depth limit instead of looping or flooding the terminal.

local M = {}

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil
end

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then
    if ta == "number" then return true end
    if tb == "number" then return false end
    return ta < tb
  end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function scalar(v)
  if type(v) == "string" then return ("%q"):format(v):gsub("\\\n", "\\n") end
  if math.type(v) == "float" then
    if v ~= v then return "nan" end
    if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
    local s = ("%.14g"):format(v)
    if not s:find("[%.eEn]") then s = s .. ".0" end
    return s
  end
  return tostring(v)
end

-- opts: depth (default 4), max_items (per table, default 50), indent (string: multi-line output)
function M.repr(v, opts)
  opts = opts or {}
  local max_depth = opts.depth or 4
  local max_items = opts.max_items or 50
  local indent = opts.indent
  local seen = {}

  local function rec(x, depth)
    if type(x) ~= "table" then return scalar(x) end
    local mt = getmetatable(x)
    if mt and mt.__tostring then return tostring(x) end
    if seen[x] then return "<cycle>" end
    if depth >= max_depth then return "{...}" end
    seen[x] = true
    local parts, n = {}, #x
    for i = 1, math.min(n, max_items) do parts[#parts + 1] = rec(x[i], depth + 1) end
    local keys = {}
    for k in pairs(x) do
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
    end
    table.sort(keys, key_less)
    local room = max_items - math.min(n, max_items)
    for i = 1, math.min(#keys, room) do
      local k = keys[i]
      local ks = is_identifier(k) and k or ("[" .. scalar(k) .. "]")
      parts[#parts + 1] = ks .. " = " .. rec(x[k], depth + 1)
    end
    local total = n + #keys
    if #parts < total then parts[#parts + 1] = ("... (%d more)"):format(total - #parts) end
    seen[x] = nil
    if #parts == 0 then return "{}" end
    if indent then
      local pad = indent:rep(depth + 1)
      return "{\n" .. pad .. table.concat(parts, ",\n" .. pad) .. "\n" .. indent:rep(depth) .. "}"
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end

  return rec(v, 0)
end

function M.show(...)
  local out = {}
  for i = 1, select("#", ...) do out[i] = M.repr((select(i, ...))) end
  print(table.concat(out, "\t"))
end

-- What the REPL uses: strings and numbers as print shows them, tables through repr.
function M.repl_print(...)
  local out = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    local mt = type(v) == "table" and getmetatable(v)
    local own = type(mt) == "table" and rawget(mt, "__tostring") -- e.g. `help` prints its topics
    out[i] = type(v) == "table" and not own and M.repr(v) or tostring(v)
  end
  print(table.concat(out, "\t"))
end

-- Rows (a list of records or of lists) as aligned text columns. columns: list of keys (default:
-- the sorted keys of the first row, or 1..#row for lists); opts.fmt: {key = "%.3f"} per column.
function M.format_table(rows, columns, opts)
  opts = opts or {}
  local fmts = opts.fmt or {}
  if not columns then
    columns = {}
    local first = rows[1] or {}
    if #first > 0 then
      for i = 1, #first do columns[i] = i end
    else
      for k in pairs(first) do columns[#columns + 1] = k end
      table.sort(columns, key_less)
    end
  end
  local cells, widths = {}, {}
  local function cell(col, v)
    if v == nil then return "" end
    if fmts[col] then return fmts[col]:format(v) end
    if type(v) == "string" then return v end
    if math.type(v) == "float" then return ("%.4g"):format(v) end
    return M.repr(v)
  end
  local header = {}
  for j, c in ipairs(columns) do
    header[j] = tostring(c)
    widths[j] = #header[j]
  end
  for i, row in ipairs(rows) do
    cells[i] = {}
    for j, c in ipairs(columns) do
      local s = cell(c, row[c])
      cells[i][j] = s
      if #s > widths[j] then widths[j] = #s end
    end
  end
  local function line(items)
    local out = {}
    for j, s in ipairs(items) do
      local isnum = tonumber(s) ~= nil
      out[j] = isnum and (" "):rep(widths[j] - #s) .. s or s .. (" "):rep(widths[j] - #s)
    end
    return (table.concat(out, "  "):gsub("%s+$", ""))
  end
  local lines = {line(header)}
  local rule = {}
  for j = 1, #columns do rule[j] = ("-"):rep(widths[j]) end
  lines[2] = table.concat(rule, "  ")
  for i = 1, #cells do lines[#lines + 1] = line(cells[i]) end
  return table.concat(lines, "\n")
end

function M.print_table(rows, columns, opts)
  print(M.format_table(rows, columns, opts))
end

return M
