-- wb.repl: what the REPL does to a chunk before compiling it, and the words that leave it.
--
-- Each entry at the prompt is its own chunk, so in plain Lua a `local` typed on one line is gone
-- on the next, and a script cannot be typed in line by line. The REPL therefore keeps a
-- top-level `local` as a REPL variable: outside any block, `local x = e` runs as `x = e`,
-- `local function f` as `function f`, attributes (`<close>`, `<const>`) are dropped and a bare
-- `local a, b` sets them to nil. REPL variables are globals, so they also appear in Tab
-- completion. A `<close>` value is therefore not closed at the end of its line (that would close
-- `local s <close> = model:session()` before the next line could use it); the collector frees it.
-- Locals inside blocks and functions are untouched.
local M = {}

-- Words that open a block closed by `end` (`while` and `for` open theirs with `do`, `if` with
-- itself), and `repeat`, closed by `until`.
local OPEN = { ["do"] = true, ["if"] = true, ["function"] = true, ["repeat"] = true }
local CLOSE = { ["end"] = true, ["until"] = true }

-- Index just past a long bracket opened at i ("[[", "[==["), or nil if s:sub(i) is not one.
local function long_bracket_end(s, i)
  local eq = s:match("^%[(=*)%[", i)
  if not eq then return nil end
  local _, e = s:find("]" .. eq .. "]", i + #eq + 2, true)
  return e and e + 1 or #s + 1
end

-- Index just past the quoted string starting at i.
local function string_end(s, i)
  local q = s:sub(i, i)
  local j = i + 1
  while j <= #s do
    local c = s:sub(j, j)
    if c == "\\" then j = j + 2
    elseif c == q or c == "\n" then return j + 1
    else j = j + 1 end
  end
  return j
end

--- The chunk with its top-level locals turned into REPL variables (see the header).
function M.rewrite(src)
  local out, depth, i, n = {}, 0, 1, #src
  local last = 1 -- src[last, i) is copied unchanged
  -- Names and attributes of `local a <const>, b` starting at j: returns the list text, the index
  -- after it, and whether an `=` follows.
  local function namelist(j)
    local names = {}
    while true do
      local _, e, name = src:find("^%s*([%a_][%w_]*)", j)
      if not name then return nil end
      names[#names + 1] = name
      j = e + 1
      local _, ae = src:find("^%s*<%s*[%a_][%w_]*%s*>", j)
      if ae then j = ae + 1 end
      local _, ce = src:find("^%s*,", j)
      if not ce then break end
      j = ce + 1
    end
    local _, ee = src:find("^%s*=", j)
    return table.concat(names, ", "), j, ee ~= nil and src:sub(ee + 1, ee + 1) ~= "="
  end
  while i <= n do
    local c = src:sub(i, i)
    if c == "-" and src:sub(i, i + 1) == "--" then
      local lb = long_bracket_end(src, i + 2)
      if lb then i = lb else
        local nl = src:find("\n", i, true)
        i = nl or n + 1
      end
    elseif c == '"' or c == "'" then
      i = string_end(src, i)
    elseif c == "[" and long_bracket_end(src, i) then
      i = long_bracket_end(src, i)
    elseif c:match("[%a_]") then
      local word = src:match("^[%a_][%w_]*", i)
      local prev = i > 1 and src:sub(i - 1, i - 1) or ""
      local is_field = prev == "." or prev == ":"
      if not is_field then
        if OPEN[word] then depth = depth + 1
        elseif CLOSE[word] then depth = math.max(depth - 1, 0)
        elseif word == "local" and depth == 0 then
          local _, fe = src:find("^local%s+function%f[^%w_]", i)
          if fe then
            out[#out + 1] = src:sub(last, i - 1)
            last = i + #"local"
            while src:sub(last, last):match("%s") do last = last + 1 end
            depth = depth + 1
            i = fe + 1
            goto continue
          end
          local names, after, has_eq = namelist(i + #"local")
          if names then
            out[#out + 1] = src:sub(last, i - 1)
            out[#out + 1] = names
            if not has_eq then out[#out + 1] = " = nil" end
            last, i = after, after
            goto continue
          end
        end
      end
      i = i + #word
    elseif c:match("%d") then
      i = i + #src:match("^[%w_%.]+", i) -- 0x1p4, 1e10, 3.5: never a keyword
    else
      i = i + 1
    end
    ::continue::
  end
  out[#out + 1] = src:sub(last)
  return table.concat(out)
end

-- Lines that leave the REPL (as Ctrl-D does), unless the name is a variable of the session.
local EXIT = { exit = true, quit = true, ["exit()"] = true, ["quit()"] = true,
               [":q"] = true, [":quit"] = true, [":exit"] = true }

--- Whether a line typed at the first prompt asks to leave.
function M.is_exit(line)
  local w = line:match("^%s*(%S+)%s*$")
  if not w or not EXIT[w] then return false end
  local name = w:match("^(%a+)")
  return w:sub(1, 1) == ":" or rawget(_G, name) == nil
end

return M
