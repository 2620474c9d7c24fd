-- stream_hosted.lua - the streaming request a hosted model would get for a Brightlane question.
--
--   workbench scripts/stream_hosted.lua [--provider groq|gemini|ollama] [--preset drafts]
--                                       [--model NAME] ["question"]
--
-- The provider comes from --provider, else $LLM_PROVIDER, else groq. The live client is a later
-- step: this prints the request (with stream on) and exits with a message naming what a real
-- call needs (GROQ_API_KEY, GEMINI_API_KEY, or OLLAMA_HOST); exit status 2 when that is missing,
-- 3 when it is set (nothing is sent either way).
local providers = require("wb.providers")

local o = require("wb.cli").parse(arg, "scripts/stream_hosted.lua", {
  { "provider", "choice", nil, "default $LLM_PROVIDER, else groq", choices = { "groq", "gemini", "ollama" } },
  { "preset", "string", "drafts", "decoding preset" },
  { "model", "string", nil, "hosted model name" },
}, { about = "the streaming request a hosted model would get for a Brightlane question",
     args = '["question"]', max_args = 1 })
local opts = { provider = o.provider or os.getenv("LLM_PROVIDER"), preset = o.preset, model = o.model,
  question = o.args[1] or "How do I export my board data, and does the CSV include comments?" }
if opts.provider == "" then opts.provider = nil end
opts.provider = opts.provider or "groq"
if not providers.INFO[opts.provider] then
  io.stderr:write("stream_hosted.lua: provider must be groq, gemini or ollama, got ", tostring(opts.provider), "\n")
  os.exit(2)
end

local r = providers.request(opts.provider, opts.preset, { { role = "user", content = opts.question } },
  { stream = true, model = opts.model })
print(("POST %s"):format(r.url))
local names = {}
for k in pairs(r.headers) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do print(("%s: %s"):format(k, r.headers[k])) end
print()
print(r.json)
for _, w in ipairs(r.warnings) do print("warning: " .. w) end
for _, n in ipairs(r.notes) do print("note:    " .. n) end

local missing = providers.missing_credentials(opts.provider)
if missing then
  io.stderr:write(missing, "\n")
  os.exit(2)
end
io.stderr:write(("The live %s client is a later step: the request above was not sent.\n"):format(opts.provider))
os.exit(3)
