-- stream_hosted.lua - stream a Brightlane answer from a hosted (or local) model and measure it.
--
--   workbench scripts/stream_hosted.lua [--provider groq|openai|gemini|ollama] [--preset drafts]
--                                       [--model NAME] [--base-url URL] ["question"]
--
-- The provider comes from --provider, else $LLM_PROVIDER, else groq. The script prints the
-- streaming request, sends it (wb.providers.stream_chat), writes the reply as it arrives, then
-- TTFT, total time, chunks, output tokens and the decode pace. Without the provider's key
-- (GROQ_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY) or OLLAMA_HOST it names what is missing and exits 2;
-- a failed request prints the provider's error and exits 1.
--
-- Offline, against the local model:
--   workbench serve --port 11434 &
--   LLM_PROVIDER=ollama OLLAMA_HOST=127.0.0.1:11434 workbench scripts/stream_hosted.lua --model tinylm-base
--   workbench scripts/stream_hosted.lua --provider openai --base-url http://127.0.0.1:11434/v1 --model tinylm-base
local providers = require("wb.providers")

local o = require("wb.cli").parse(arg, "scripts/stream_hosted.lua", {
  { "provider", "choice", nil, "default $LLM_PROVIDER, else groq", choices = { "groq", "openai", "gemini", "ollama" } },
  { "preset", "string", "drafts", "decoding preset" },
  { "model", "string", nil, "model name (default: the preset's for that provider)" },
  { "base-url", "string", nil, "an OpenAI-compatible or Gemini-compatible server (e.g. workbench serve)" },
}, { about = "stream a reply from a hosted model and measure TTFT, chunks and tokens",
     args = '["question"]', max_args = 1 })
local opts = { provider = o.provider or os.getenv("LLM_PROVIDER"), preset = o.preset, model = o.model,
  question = o.args[1] or "How do I export my board data, and does the CSV include comments?" }
if opts.provider == "" then opts.provider = nil end
opts.provider = opts.provider or "groq"
if not providers.INFO[opts.provider] then
  io.stderr:write("stream_hosted.lua: provider must be groq, openai, gemini or ollama, got ", tostring(opts.provider), "\n")
  os.exit(2)
end
local wire = opts.provider == "openai" and "groq" or opts.provider
local messages = { { role = "user", content = opts.question } }

local r = providers.request(wire, opts.preset, messages, { stream = true, model = opts.model })
print(("POST %s"):format(o.base_url and "(base URL " .. o.base_url .. ")" or r.url))
local names = {}
for k in pairs(r.headers) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do print(("%s: %s"):format(k, r.headers[k])) end
print()
print(r.json)
for _, w in ipairs(r.warnings) do print("warning: " .. w) end
for _, n in ipairs(r.notes) do print("note:    " .. n) end

local missing = not o.base_url and (opts.provider ~= "openai" and providers.missing_credentials(opts.provider)
  or (opts.provider == "openai" and (os.getenv("OPENAI_API_KEY") or "") == "" and "Set OPENAI_API_KEY to call openai (nothing was sent)."))
if missing then
  io.stderr:write(missing, "\n")
  os.exit(2)
end

print("\n--- reply (as it arrives) ---")
local ok, err = pcall(function()
  local s <close> = providers.stream_chat(opts.provider, opts.preset, messages, { model = opts.model, base_url = o.base_url })
  for piece in s do io.write(piece); io.flush() end
  print("\n---")
  local st = s:stats()
  local tokens = st.output_tokens or 0
  print(("model %s, HTTP %d, finish %s"):format(st.model, st.status, tostring(st.finish_reason)))
  print(("TTFT     %8.1f ms (request sent to first visible text: network, queue and prefill)"):format(st.ttft_ms or -1))
  print(("total    %8.1f ms"):format(st.total_ms))
  print(("chunks   %8d"):format(st.chunks))
  print(("tokens   %8d (%s)"):format(tokens, st.output_tokens_source))
  if st.reasoning_tokens then print(("reasoning tokens %d (reported)"):format(st.reasoning_tokens)) end
  if st.ttft_ms and tokens > 1 and st.total_ms > st.ttft_ms then
    print(("decode   %8.1f tokens/s after the first chunk ((tokens - 1) / (total - TTFT))")
      :format((tokens - 1) / ((st.total_ms - st.ttft_ms) / 1000)))
  end
  if st.chunks > 0 and tokens ~= st.chunks then
    print(("Chunks are not tokens: %d tokens arrived in %d chunks (%.2f tokens per chunk); a client that counts chunks miscounts.")
      :format(tokens, st.chunks, tokens / st.chunks))
  elseif st.chunks > 0 then
    print(("Here each of the %d chunks carried one token, but that is the server's choice: a chunk is a network event, and providers batch tokens into chunks as they like.")
      :format(st.chunks))
  end
end)
if not ok then
  io.stderr:write(tostring(err), "\n")
  os.exit(1)
end
