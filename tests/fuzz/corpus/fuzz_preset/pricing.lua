-- pricing.lua - USD per million tokens, per provider and model. Data only: edit a price and rerun.
--
-- Each row names its source and date. `cached` is the price of a prompt token served from the
-- provider's prompt cache; nil means no cached price is listed here, and wb.cost then bills cached
-- tokens at the input price (and says so). Thinking tokens are billed as output tokens.
-- Rows are the list prices stated in issue 7 (2026); check the pricing page before relying on them.
local GROQ = "https://groq.com/pricing"
local GEMINI = "https://ai.google.dev/gemini-api/docs/pricing"
local AS_OF = "2026"

return {
  groq = {
    ["openai/gpt-oss-120b"] = { input = 0.15, cached = 0.075, output = 0.60, source = GROQ, as_of = AS_OF },
    ["openai/gpt-oss-20b"] = { input = 0.075, cached = 0.037, output = 0.30, source = GROQ, as_of = AS_OF },
    ["llama-3.1-8b-instant"] = { input = 0.05, output = 0.08, source = GROQ, as_of = AS_OF },
    ["llama-3.3-70b-versatile"] = { input = 0.59, output = 0.79, source = GROQ, as_of = AS_OF },
  },
  gemini = {
    ["gemini-2.5-flash"] = { input = 0.30, output = 2.50, source = GEMINI, as_of = AS_OF },
    ["gemini-2.5-flash-lite"] = { input = 0.10, output = 0.40, source = GEMINI, as_of = AS_OF },
    ["gemini-2.5-pro"] = { input = 1.25, output = 10.00, source = GEMINI, as_of = AS_OF,
      note = "prompts up to 200k tokens" },
  },
  ollama = {
    -- Local inference has no per-token bill; the cost is your hardware and electricity.
    ["*"] = { input = 0, cached = 0, output = 0, source = "local (no per-token price)", as_of = AS_OF },
  },
}
