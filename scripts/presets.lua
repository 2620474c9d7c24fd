-- presets.lua - run a decoding preset on TinyLM and show the requests it becomes for Groq, Gemini
-- and Ollama.
--
--   workbench scripts/presets.lua triage "Ticket: I was charged twice this month"
--   workbench scripts/presets.lua drafts "How do I export my board data?" --provider gemini
--   workbench scripts/presets.lua ./my_preset.lua "..." --strict
--   workbench scripts/presets.lua --list
--
-- Options: --provider NAME (repeatable; default all three), --strict (unsupported parameters are
-- an error), --no-local (skip the TinyLM run), --json (requests only, as one JSON document).
-- Edit presets/*.lua (or a copy in the user directory, docs/presets.md) and rerun: no rebuild.
local wb = require("wb")
local presets = require("wb.presets")
local providers = require("wb.providers")

local cli = require("wb.cli")
local SPEC = {
  { "list", "flag", nil, "list the presets found and where they were searched" },
  { "provider", "choice", nil, "provider request to show (default all three)",
    choices = { "groq", "gemini", "ollama" }, many = true },
  { "strict", "flag", nil, "unsupported parameters are an error" },
  { "no-local", "flag", nil, "skip the TinyLM run" },
  { "json", "flag", nil, "requests only, as one JSON document" },
  { "send", "flag", nil, "send each request (streamed) and print the reply and its StreamStats" },
  { "model", "string", nil, "model name for --send (default: the preset's per provider)" },
  { "base-url", "string", nil, "send to this OpenAI- or Gemini-compatible server (e.g. workbench serve)" },
}
local INFO = { about = "run a decoding preset on TinyLM and show the requests it becomes for Groq, Gemini and Ollama",
               args = 'PRESET "input text"', max_args = 2 }
local o = cli.parse(arg, "scripts/presets.lua", SPEC, INFO)
local args = o.args
local opts = { providers = o.provider, list = o.list, strict = o.strict, no_local = o.no_local, json = o.json }
local function usage()
  io.stderr:write("presets.lua: needs a preset and an input text (or --list)\n",
    cli.usage_text("scripts/presets.lua", SPEC, INFO), "\n")
  os.exit(2)
end

if opts.list then
  for _, name in ipairs(presets.list()) do
    local ok, p = pcall(presets.load, name)
    print(("%-12s %s"):format(name, ok and (p.description or "") or ("INVALID: " .. tostring(p))))
  end
  print(("\nsearched: %s"):format(table.concat(presets.search_dirs(), ", ")))
  return
end
if #args ~= 2 then usage() end
if #opts.providers == 0 then opts.providers = providers.NAMES end

local preset = presets.load(args[1])
local input = args[2]
local messages = { { role = "user", content = input } }

local requests = {}
for _, name in ipairs(opts.providers) do
  requests[#requests + 1] = providers.request(name, preset, messages, { strict = opts.strict })
end

if opts.json then
  local doc = {}
  for _, r in ipairs(requests) do
    doc[r.provider] = { url = r.url, body = r.body, warnings = wb.json.array(r.warnings),
      notes = wb.json.array(r.notes) }
  end
  print(wb.json.encode(doc, { indent = true }))
  return
end

print(("preset %s (%s)"):format(preset.name, preset.path))
for _, k in ipairs(presets.ORDER) do
  local why = preset.why and preset.why[k]
  if why then print(("  %-18s %-12s %s"):format(k, tostring(preset[k] ~= nil and (type(preset[k]) == "table"
    and (preset[k].kind or "table") or preset[k]) or "nil"), why)) end
end

print("\n== local: TinyLM ==")
if opts.no_local then
  print("(skipped: --no-local)")
else
  local ok, model = pcall(wb.load)
  if not ok then
    print("(skipped: no local model: " .. tostring(model) .. ")")
  else
    local res, info = presets.generate(model, preset, input)
    print("model:      " .. model.dir)
    print("prompt:     " .. ("%q"):format(info.prompt):gsub("\\\n", "\\n"))
    print("constraint: " .. info.constraint)
    print("output:     " .. ("%q"):format(res.text):gsub("\\\n", "\\n"))
    print(("stop: %s, %d tokens, seed %s, ttft %.1f ms"):format(res.stop_reason, #res.token_ids,
      tostring(res.seed), res.ttft_ms or 0))
    local jok, obj = pcall(wb.json.decode, res.text)
    if preset.constraint and preset.constraint.kind == "json_schema" then
      print("parses as JSON: " .. (jok and type(obj) == "table" and "yes" or "no"))
    end
    model:close()
  end
end

for _, r in ipairs(requests) do
  print(("\n== %s: POST %s (model %s) =="):format(r.provider, r.url, r.model))
  print(r.json)
  for _, w in ipairs(r.warnings) do print("warning: " .. w) end
  for _, n in ipairs(r.notes) do print("note:    " .. n) end
end
if not o.send then
  print("\nNothing was sent: these are the request bodies (add --send to send them).")
  return
end
local failed = 0
for _, r in ipairs(requests) do
  print(("\n== %s: sending =="):format(r.provider))
  local missing = not o.base_url and providers.missing_credentials(r.provider)
  if missing then
    print(missing); failed = failed + 1
  else
    local ok, text, st = pcall(providers.chat, r.provider, preset, messages,
      { model = o.model, base_url = o.base_url, host = r.provider == "ollama" and o.base_url or nil, strict = opts.strict })
    if ok then
      print("reply:  " .. ("%q"):format(text):gsub("\\\n", "\\n"))
      print(("HTTP %d, finish %s, TTFT %.1f ms, total %.1f ms, %d chunks, %d tokens (%s)%s"):format(st.status,
        tostring(st.finish_reason), st.ttft_ms or -1, st.total_ms, st.chunks, st.output_tokens, st.output_tokens_source,
        st.reasoning_tokens and (", %d reasoning tokens"):format(st.reasoning_tokens) or ""))
    else
      print(tostring(text)); failed = failed + 1
    end
  end
end
if failed > 0 then os.exit(1) end
