-- penalties.lua - frequency vs presence penalty on a continuation that repeats itself.
--
--   workbench scripts/penalties.lua
-- A frequency penalty grows with every repeat (count x value), so it pushes hardest on the token
-- repeated most; a presence penalty is a flat charge on anything already said, once.
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")

-- Long enough to run through several turns, so tokens like "Customer" and " (" come back.
local PROMPT = L.UNCERTAIN
local N = 80
local SETTINGS = {
  {name = "no penalty", params = {}},
  {name = "frequency 0.5", params = {frequency_penalty = 0.5}},
  {name = "frequency 1.0", params = {frequency_penalty = 1.0}},
  {name = "presence 0.5", params = {presence_penalty = 0.5}},
  {name = "presence 1.0", params = {presence_penalty = 1.0}},
  {name = "repetition 1.3", params = {repetition_penalty = 1.3}},
}

local function measure()
  local rows = {}
  for _, s in ipairs(SETTINGS) do
    local params = {max_tokens = N, temperature = 0}
    for k, v in pairs(s.params) do params[k] = v end
    local out = L.model:generate(PROMPT, params)
    local counts, distinct, top_id, top_n = {}, 0, nil, 0
    for _, id in ipairs(out.token_ids) do
      counts[id] = (counts[id] or 0) + 1
      if counts[id] == 1 then distinct = distinct + 1 end
      if counts[id] > top_n then top_id, top_n = id, counts[id] end
    end
    rows[#rows + 1] = {setting = s.name, tokens = #out.token_ids, distinct = distinct,
                       most_repeated = ("%q x%d"):format(L.tok:decode({top_id}), top_n),
                       max_count = top_n, start = out.text:sub(1, 40):gsub("\n", "\\n")}
  end
  return rows
end

local rows = measure()
if L.is_main("penalties.lua") then
  print(("Greedy continuations of %q, %d tokens each"):format(PROMPT, N))
  util.print_table(rows, {"setting", "tokens", "distinct", "most_repeated", "start"})
end
return rows
