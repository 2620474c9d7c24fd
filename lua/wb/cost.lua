-- wb.cost: what a hosted call costs and how long it takes, with reasoning (thinking) tokens.
--
--   local cost = require("wb.cost")                   -- also `wb.cost` in workbench
--   local row = cost.price(cost.pricing(), "groq", "openai/gpt-oss-120b")
--   cost.call_cost(row, {input = 900, cached = 600, thinking = 400, output = 25})  --> USD, parts
--   cost.latency({network_ms = 150, prefill_ms_per_1k = 20, itl_ms = 2.5},
--                {input = 1500, thinking = 400, output = 25})                     --> ms table
--   local n = cost.counter(os.getenv("TOKENIZER"))    -- counts, or a labelled estimate
--
-- Pure Lua. The model, in one place:
--   cost    = input * price_in + cached * price_cached + (thinking + output) * price_out
--             (prices per million tokens; thinking is billed as output although it is never shown)
--   ttft    = network + prefill(input + cached) + thinking * ITL
--             (thinking is decoded before the first visible token, so it all lands in TTFT)
--   total   = ttft + output * ITL
-- `input` counts the prompt tokens not served from the cache; `cached` those that were.

local M = {}

--- The pricing table (presets/pricing.lua, or the user directory's copy) and its path.
function M.pricing()
  return require("wb.presets").data("pricing")
end

--- The price row for provider/model; a provider's "*" row covers any model (Ollama). The error
--- names what is missing and the file to edit.
function M.price(pricing, provider, model)
  local rows = pricing[provider]
  if type(rows) ~= "table" then
    error(("cost.price: no provider %q in presets/pricing.lua"):format(tostring(provider)), 2)
  end
  local row = rows[model] or rows["*"]
  if not row then
    local names = {}
    for k in pairs(rows) do names[#names + 1] = k end
    table.sort(names)
    error(("cost.price: no price for %s/%s in presets/pricing.lua (known: %s)")
      :format(provider, tostring(model), table.concat(names, ", ")), 2)
  end
  for _, k in ipairs({ "input", "output" }) do
    if type(row[k]) ~= "number" or row[k] < 0 then
      error(("cost.price: %s/%s: '%s' must be a number >= 0"):format(provider, model, k), 2)
    end
  end
  return row
end

local function count(t, k)
  local v = t[k] or 0
  if type(v) ~= "number" or v < 0 or v ~= v then
    error(("cost: '%s' must be a token count >= 0, got %s"):format(k, tostring(v)), 3)
  end
  return v
end

local CALL_KEYS = { input = true, cached = true, thinking = true, output = true }

local function check_keys(t, allowed, fn)
  if type(t) ~= "table" then error(fn .. ": expected a table of token counts", 3) end
  for k in pairs(t) do
    if not allowed[k] then error(("%s: unknown key '%s'"):format(fn, tostring(k)), 3) end
  end
end

--- USD for one call. tokens: input (uncached prompt), cached (prompt tokens from the cache),
--- thinking, output (visible). Returns the total and {input=, cached=, output=, cached_at_input_price}
--- where cached_at_input_price is true when the row has no cached price.
function M.call_cost(row, tokens)
  check_keys(tokens, CALL_KEYS, "cost.call_cost")
  local input, cached = count(tokens, "input"), count(tokens, "cached")
  local thinking, output = count(tokens, "thinking"), count(tokens, "output")
  local price_cached = row.cached
  local fallback = price_cached == nil
  if fallback then price_cached = row.input end
  local parts = {
    input = input * row.input / 1e6,
    cached = cached * price_cached / 1e6,
    output = (thinking + output) * row.output / 1e6,
    cached_at_input_price = fallback and cached > 0,
  }
  return parts.input + parts.cached + parts.output, parts
end

local LAT_KEYS = { network_ms = true, prefill_ms_per_1k = true, itl_ms = true }
local LAT_TOKENS = { input = true, cached = true, thinking = true, output = true }

--- Latency of one call in ms: {network, prefill, thinking, visible, ttft, total}. `link`:
--- network_ms (network plus queueing), prefill_ms_per_1k (prompt processing per 1,000 tokens),
--- itl_ms (inter-token latency while decoding).
function M.latency(link, tokens)
  check_keys(link, LAT_KEYS, "cost.latency")
  check_keys(tokens, LAT_TOKENS, "cost.latency")
  local net, pre, itl = count(link, "network_ms"), count(link, "prefill_ms_per_1k"), count(link, "itl_ms")
  local prompt = count(tokens, "input") + count(tokens, "cached")
  local r = {
    network = net,
    prefill = prompt / 1000 * pre,
    thinking = count(tokens, "thinking") * itl,
    visible = count(tokens, "output") * itl,
  }
  r.ttft = r.network + r.prefill + r.thinking
  r.total = r.ttft + r.visible
  return r
end

--- Thinking tokens for an effort level of presets/effort.lua: levels[level][which] * difficulty
--- (which: "median" or "p90").
function M.thinking_tokens(levels, level, difficulty, which)
  local l = levels[level]
  if not l then error(("cost.thinking_tokens: no effort level %q"):format(tostring(level)), 2) end
  local v = l[which or "median"]
  if type(v) ~= "number" then error(("cost.thinking_tokens: level %q has no %q"):format(level, which or "median"), 2) end
  return math.floor(v * (difficulty or 1) + 0.5)
end

--- Where reasoning pays: the value of one more correct answer (or one avoided error) at which the
--- extra cost per call equals the expected gain. accuracy_gain is a fraction (0.05 = 5 points).
--- Returns USD per correct answer (math.huge when the gain is not positive).
function M.break_even(cost_without, cost_with, accuracy_gain)
  if type(accuracy_gain) ~= "number" or accuracy_gain ~= accuracy_gain then
    error("cost.break_even: accuracy_gain must be a number", 2)
  end
  if accuracy_gain <= 0 then return math.huge end
  return (cost_with - cost_without) / accuracy_gain
end

--- A token counter: with a path, the tokenizer.json there (any Hugging Face byte-level BPE file,
--- e.g. an o200k one); without, an estimate of one token per 4 characters. Returns
--- {count = fn(text), label = string, estimated = bool}. Every output that prints a count should
--- print the label too.
function M.counter(tokenizer_path)
  if tokenizer_path and tokenizer_path ~= "" then
    local wb = package.loaded.wb or require("wb")
    local tok = wb.tokenizer_load(tokenizer_path)
    return {
      count = function(text) return #tok:encode(text) end,
      label = "tokens counted with " .. tokenizer_path,
      estimated = false,
    }
  end
  return {
    count = function(text)
      local n = utf8.len(text) or #text
      return math.max(1, math.ceil(n / 4))
    end,
    label = "ESTIMATE (no tokenizer given: ~4 characters per token; pass a tokenizer.json for counts)",
    estimated = true,
  }
end

return M
