-- generate.lua - text from a prompt, for people who just want text (in the spirit of llama-cli).
--
--   workbench scripts/generate.lua -p "Customer (Ana): Hi," -n 64 --temperature 0.7 --top-p 0.9 --seed 1
--   workbench scripts/generate.lua -p "..." --stream          # pieces as they are decoded
--   workbench scripts/generate.lua -p "Hi" --chat -m DIR       # through the model's chat template
--   workbench scripts/generate.lua -p "..." --json --logprobs 5
--
-- Every sampling parameter has its usual name (docs/sampling.md): --temperature, --top-k, --top-p,
-- --min-p, --repeat-penalty (repetition_penalty), --frequency-penalty, --presence-penalty, --seed,
-- --stop (repeatable), -n (max_tokens). The text goes to stdout; the timings go to stderr (unless
-- --quiet), so `generate.lua ... > reply.txt` keeps only the reply. --json prints the whole result
-- (text, token ids, stop reason, timings, and the log-probabilities when asked) as one object.
local wb = require("wb")
local cli = require("wb.cli")

local SCRIPT = "scripts/generate.lua"
local o = cli.parse(arg, SCRIPT, {
  { "prompt", "string", nil, "the prompt text", short = "p" },
  { "file", "string", nil, "read the prompt from a file", short = "f" },
  { "max-tokens", "count", 64, "tokens to generate (llama-cli: -n)", 1, short = "n" },
  { "temperature", "number", nil, "softmax temperature; 0 is greedy (default 1)", 0 },
  { "top-k", "count", nil, "keep the k most likely tokens", 0 },
  { "top-p", "number", nil, "keep the smallest set with this much probability", 0 },
  { "min-p", "number", nil, "drop tokens below min-p times the top probability", 0 },
  { "repeat-penalty", "number", nil, "repetition_penalty (1 = off)", 0 },
  { "frequency-penalty", "number", nil, "subtracted per earlier occurrence" },
  { "presence-penalty", "number", nil, "subtracted once for any earlier occurrence" },
  { "seed", "count", nil, "sampling seed (default: random, printed with the timings)", 0 },
  { "stop", "string", nil, "stop sequence", many = true },
  { "ignore-eos", "flag", nil, "keep going past the end-of-text token" },
  { "stream", "flag", nil, "print pieces as they are decoded" },
  { "chat", "flag", nil, "send the prompt as a user message through the chat template" },
  { "system", "string", nil, "system message (with --chat)" },
  { "json", "flag", nil, "print the result as one JSON object" },
  { "logprobs", "count", nil, "log-probabilities of each token and the k best alternatives", 0 },
  { "model", "string", nil, "model directory (default: -m, $WB_MODEL or TinyLM)" },
  { "threads", "count", 1, "compute threads", 1, short = "t" },
  { "quiet", "flag", nil, "no timings on stderr" },
}, { about = "generate text from a prompt with the usual sampling parameters" })

local function usage_error(msg)
  io.stderr:write(("%s: %s (see --help)\n"):format(SCRIPT, msg))
  os.exit(2)
end

local prompt = o.prompt
if o.file then
  if prompt then usage_error("give -p or -f, not both") end
  local f, err = io.open(o.file, "rb")
  if not f then usage_error("cannot read the prompt file: " .. tostring(err)) end
  prompt = f:read("a")
  f:close()
end
if not prompt then usage_error("needs a prompt: -p TEXT or -f FILE") end
if o.system and not o.chat then usage_error("--system needs --chat") end

local params = {
  max_tokens = o.max_tokens, temperature = o.temperature, top_k = o.top_k, top_p = o.top_p,
  min_p = o.min_p, repetition_penalty = o.repeat_penalty, frequency_penalty = o.frequency_penalty,
  presence_penalty = o.presence_penalty, seed = o.seed,
}
if #o.stop > 0 then params.stop = o.stop end
-- Bad values are a usage error named by the parameter, before the model is loaded.
local ok, err = pcall(wb.sampling.check, params)
if not ok then
  local msg = tostring(err):gsub("^[^:]*:%d+: ", "")
  usage_error(msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg)
end
if o.logprobs then
  -- The OpenAI names; a build whose generate does not know them says so instead of guessing.
  local with = {}
  for k, v in pairs(params) do with[k] = v end
  with.logprobs, with.top_logprobs = true, o.logprobs
  if not pcall(wb.sampling.check, with) then
    usage_error("--logprobs needs model:generate with logprobs/top_logprobs, which this build does not have")
  end
  params = with
end
local opts = { ignore_eos = o.ignore_eos or nil }

wb.threads(o.threads)
local model = wb.load(o.model)
local input = prompt
if o.chat then
  input = {}
  if o.system then input[#input + 1] = { role = "system", content = o.system } end
  input[#input + 1] = { role = "user", content = prompt }
end

-- Errors from here on (no chat template, a prompt longer than the context, ...) are one line.
local function fail(e)
  if tostring(e):find("interrupted") then error(e, 0) end -- Ctrl-C: the host exits 130
  io.stderr:write(("%s: %s\n"):format(SCRIPT, tostring(e):gsub("^[^:]*:%d+: ", "")))
  os.exit(1)
end

local result
local ok_gen, gen_err = pcall(function()
  if o.stream and not o.json then
    local s = o.chat and model:stream_chat(input, params, opts) or model:stream(input, params, opts)
    for piece in s do
      io.write(piece)
      io.stdout:flush()
    end
    result = s:result()
    io.write("\n")
  else
    result = o.chat and model:chat(input, params, opts) or model:generate(input, params, opts)
  end
end)
if not ok_gen then fail(gen_err) end

if o.json then
  local out = {}
  for k, v in pairs(result) do out[k] = v end
  out.token_ids = wb.json.array(result.token_ids)
  if type(result.itl_ms) == "table" then out.itl_ms = wb.json.array(result.itl_ms) end
  out.prompt, out.model, out.params = prompt, model.dir, params
  print(wb.json.encode(out))
else
  if not o.stream then print(result.text) end
  if o.logprobs and type(result.logprobs) == "table" then
    -- One line per generated token: its log-probability under the distribution it was drawn
    -- from, under the raw model (before the sampling filters), and the best alternatives by the
    -- raw model, "cut" when the filters removed them (no logprob under the sampled distribution).
    io.write("\nlogprobs: token, sampled-distribution logprob, raw-model logprob; then the top alternatives (raw)\n")
    local function lp(x) return x and ("%.4f"):format(x) or "-inf" end
    for i, e in ipairs(result.logprobs) do
      local tok = e.token or (e.id and model.tokenizer:token(e.id)) or "?"
      local alts = {}
      for _, alt in ipairs(e.top_logprobs or e.top or {}) do
        local at = alt.token or (alt.id and model.tokenizer:token(alt.id)) or "?"
        alts[#alts + 1] = ("%q %s%s"):format(at, lp(alt.raw_logprob or alt.logprob), alt.logprob and "" or " cut")
      end
      io.write(("%4d %-16s %9s %9s   %s\n"):format(i, ("%q"):format(tok), lp(e.logprob), lp(e.raw_logprob),
        table.concat(alts, ", ")))
    end
  end
end

if not o.quiet and not o.json then
  local r = result
  local gen = #r.token_ids
  local decode_s = (r.e2e_ms - (r.ttft_ms or 0)) / 1e3
  io.stderr:write(("prompt %d tokens in %.1f ms (%.0f tok/s); generated %d tokens, %.2f ms per token after the first (%.0f tok/s); stop: %s; seed %s\n")
    :format(r.prompt_tokens, r.prefill_ms, r.prompt_tokens / math.max(r.prefill_ms, 1e-9) * 1e3, gen,
            r.decode_ms_per_token or 0, (gen > 1 and decode_s > 0) and (gen - 1) / decode_s or 0,
            r.stop_reason, tostring(r.seed)))
  if (r.prompt_tokens_dropped or 0) > 0 then
    io.stderr:write(("the prompt was longer than the context: its first %d tokens were dropped\n"):format(r.prompt_tokens_dropped))
  end
end
