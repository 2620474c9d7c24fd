-- temperature.lua - entropy and top tokens at several temperatures, for a prompt TinyLM is unsure
-- about and one it is sure about.
--
--   workbench scripts/temperature.lua
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")

local TEMPS = {0, 0.3, 0.7, 1.0, 1.5, 2.0}

local function measure()
  local rows = {}
  for _, prompt in ipairs({L.UNCERTAIN, L.CERTAIN}) do
    for _, t in ipairs(TEMPS) do
      local p = L.distribution(prompt, {temperature = t})
      rows[#rows + 1] = {prompt = prompt, temperature = t, entropy = L.entropy_bits(p),
                         p_top = p:get(p:argmax()), top = L.top_tokens(p, 3)}
    end
  end
  return rows
end

local rows = measure()
if L.is_main("temperature.lua") then
  util.print_table(rows, {"prompt", "temperature", "entropy", "p_top", "top"},
                   {fmt = {entropy = "%.2f", p_top = "%.3f", temperature = "%.1f"}})
  print("\nTemperature 0 is greedy (one token, 0 bits). Dividing logits by T < 1 sharpens the")
  print("distribution, T > 1 flattens it; a prompt the model is sure about barely moves.")
end
return rows
