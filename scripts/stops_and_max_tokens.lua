-- stops_and_max_tokens.lua - stop sequences, max_tokens, tokens paid for but trimmed, and the
-- streaming leak that hold-back fixes.
--
--   workbench scripts/stops_and_max_tokens.lua
require("wb.cli").parse(arg, "scripts/stops_and_max_tokens.lua", {}, { about = "stop sequences, max_tokens, tokens paid for but trimmed, and the streaming leak that hold-back fixes." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")

local PROMPT = "Customer (Ana): Hi, how do I export my board data?\nAgent (Lena):"

local function measure()
  local r = {runs = {}}
  local cases = {
    {name = "max_tokens 8", params = {max_tokens = 8}},
    {name = "max_tokens 40", params = {max_tokens = 40}},
    {name = "stop \\n", params = {max_tokens = 40, stop = {"\n"}}},
    {name = "stop \\nCustomer", params = {max_tokens = 40, stop = {"\nCustomer"}}},
    {name = "stop_token_ids {newline}", params = {max_tokens = 40,
                                                  stop_token_ids = {L.tok:encode("\n")[1]}}},
  }
  for _, c in ipairs(cases) do
    c.params.temperature = 0
    local out = L.model:generate(PROMPT, c.params)
    -- Tokens generated whose text is not in the reply: the stop itself (and anything the
    -- tokenizer merged into it). They were decoded, so they were paid for.
    local kept = #out.text > 0 and #L.tok:encode(out.text) or 0
    r.runs[#r.runs + 1] = {setting = c.name, stop_reason = out.stop_reason,
                           tokens_paid = #out.token_ids, trimmed = #out.token_ids - kept,
                           text = out.text:gsub("\n", "\\n"):sub(1, 44)}
  end
  -- Streaming with a stop string: without hold-back the stop reaches the reader.
  local params = {max_tokens = 40, temperature = 0, stop = {"\nCustomer"}}
  for _, hb in ipairs({false, true}) do
    local pieces = {}
    local it, s, c, st = L.model:stream(PROMPT, params, {holdback = hb})
    for piece in it, s, c, st do pieces[#pieces + 1] = piece end
    local streamed = table.concat(pieces)
    r[hb and "held" or "leaked"] = {streamed = streamed, text = st:result().text,
                                    last = pieces[#pieces] or ""}
  end
  return r
end

local r = measure()
if L.is_main("stops_and_max_tokens.lua") then
  util.print_table(r.runs, {"setting", "stop_reason", "tokens_paid", "trimmed", "text"})
  for _, k in ipairs({"leaked", "held"}) do
    local x = r[k]
    print(("\nholdback=%s: stream ends with %q; stream == text: %s"):format(k == "held",
          x.streamed:sub(-20), tostring(x.streamed == x.text)))
  end
end
return r
