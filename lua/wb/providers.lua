-- wb.providers: translate a preset into the exact request body of a hosted chat API.
--
--   local providers = require("wb.providers")    -- also `wb.providers` in workbench
--   local req = providers.request("groq", "triage", {{role = "user", content = "Ticket: ..."}})
--   print(req.json)                              -- the body, via cJSON (wb.json)
--   for _, w in ipairs(req.warnings) do print(w) end
--
-- Providers: "groq" (OpenAI-compatible chat completions), "gemini" (generateContent) and
-- "ollama" (/api/chat). Nothing is sent: this module only builds requests (a live client is a
-- later step). A parameter the provider does not take is dropped and listed in req.warnings (an
-- error with {strict = true}); a parameter the preset leaves nil is omitted, so the provider's own
-- default applies (Gemini 3, for one, advises leaving temperature at its default).

local presets = require("wb.presets")

local M = {}

M.NAMES = { "groq", "gemini", "ollama" }

-- What each provider needs to be called: the environment variable holding the key, or the host.
M.INFO = {
  groq = { key_env = "GROQ_API_KEY", url = "https://api.groq.com/openai/v1/chat/completions" },
  gemini = { key_env = "GEMINI_API_KEY",
    url = "https://generativelanguage.googleapis.com/v1beta/models/%s:generateContent" },
  ollama = { host_env = "OLLAMA_HOST", default_host = "http://localhost:11434" },
}

M.MAX_STOP = { groq = 4, gemini = 5 }

local function copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = copy(x) end
  return t
end

local function json() return (package.loaded.wb or require("wb")).json end

local function arr(t) return json().array(t) end

--- Where Ollama listens: opts.host, else $OLLAMA_HOST (a bare host:port gets http://), else the
--- default port on localhost.
function M.ollama_host(host)
  host = host or os.getenv("OLLAMA_HOST")
  if not host or host == "" then return M.INFO.ollama.default_host end
  if not host:match("^https?://") then host = "http://" .. host end
  return (host:gsub("/+$", ""))
end

local function check_messages(messages)
  if type(messages) ~= "table" then error("providers.request: messages must be a list, got " .. type(messages), 3) end
  for i, m in ipairs(messages) do
    if type(m) ~= "table" then error(("providers.request: messages[%d] must be a table"):format(i), 3) end
    for k in pairs(m) do
      if k ~= "role" and k ~= "content" then
        error(("providers.request: messages[%d]: unknown key '%s'"):format(i, tostring(k)), 3)
      end
    end
    if m.role ~= "system" and m.role ~= "user" and m.role ~= "assistant" then
      error(("providers.request: messages[%d].role must be system, user or assistant, got %s")
        :format(i, tostring(m.role)), 3)
    end
    if type(m.content) ~= "string" then
      error(("providers.request: messages[%d].content must be a string"):format(i), 3)
    end
  end
end

-- The preset's system prompt goes first unless the caller already supplied a system message.
local function with_system(preset, messages)
  local out = {}
  local has_system = false
  for _, m in ipairs(messages) do if m.role == "system" then has_system = true end end
  if not has_system and preset.system and preset.system ~= "" then
    out[1] = { role = "system", content = preset.system }
  end
  for _, m in ipairs(messages) do out[#out + 1] = { role = m.role, content = m.content } end
  return out
end

local function effort_data()
  local ok, d = pcall(presets.data, "effort")
  if ok and type(d) == "table" and type(d.providers) == "table" then return d.providers end
  return {}
end

-- Gemini's Schema is an OpenAPI subset: upper-case type names, and `propertyOrdering` to fix the
-- order of keys (we take it from `required`, the order the local constraint uses too).
local GEMINI_SCHEMA_KEYS = { type = true, format = true, description = true, nullable = true,
  enum = true, maxItems = true, minItems = true, properties = true, required = true,
  minProperties = true, maxProperties = true, minLength = true, maxLength = true, pattern = true,
  minimum = true, maximum = true, items = true, anyOf = true, title = true }

local function gemini_schema(s, path, dropped)
  local out = {}
  for k, v in pairs(s) do
    if not GEMINI_SCHEMA_KEYS[k] then
      dropped[#dropped + 1] = path .. "." .. k
    elseif k == "type" then
      out.type = type(v) == "string" and v:upper() or v
    elseif k == "properties" then
      out.properties = {}
      for name, sub in pairs(v) do out.properties[name] = gemini_schema(sub, path .. "." .. name, dropped) end
    elseif k == "items" then
      out.items = gemini_schema(v, path .. ".items", dropped)
    elseif k == "anyOf" then
      out.anyOf = {}
      for i, sub in ipairs(v) do out.anyOf[i] = gemini_schema(sub, path .. ".anyOf", dropped) end
    else
      out[k] = copy(v)
    end
  end
  if s.required and s.type == "object" then out.propertyOrdering = copy(s.required) end
  return out
end

-- Collects what a translation dropped and the advice it has; `why` says why for the warning.
local function recorder(provider)
  local r = { dropped = {}, warnings = {}, notes = {} }
  function r.drop(key, why)
    r.dropped[#r.dropped + 1] = key
    r.warnings[#r.warnings + 1] = ("%s: dropped %s (%s)"):format(provider, key, why)
  end
  function r.note(msg) r.notes[#r.notes + 1] = provider .. ": " .. msg end
  return r
end

local function stops(p, provider, r)
  if not p.stop or #p.stop == 0 then return nil end
  local max = M.MAX_STOP[provider]
  local out = {}
  for i, s in ipairs(p.stop) do
    if max and i > max then
      r.drop(("stop[%d] %q"):format(i, s), ("%s accepts at most %d stop sequences"):format(provider, max))
    else
      out[#out + 1] = s
    end
  end
  return arr(out)
end

---------------------------------------------------------------------------------------------
-- Groq: OpenAI-compatible chat completions
---------------------------------------------------------------------------------------------
local function groq(p, messages, model, opts, r)
  local body = {
    model = model,
    messages = arr(with_system(p, messages)),
    temperature = p.temperature,
    top_p = p.top_p,
    frequency_penalty = p.frequency_penalty,
    presence_penalty = p.presence_penalty,
    stop = stops(p, "groq", r),
    max_completion_tokens = p.max_tokens,
    seed = p.seed,
  }
  if opts.stream then body.stream = true end
  if p.top_k ~= nil then r.drop("top_k", "not in Groq's chat completions API") end
  if p.min_p ~= nil then r.drop("min_p", "not in Groq's chat completions API") end
  if p.repetition_penalty ~= nil then r.drop("repetition_penalty", "use frequency_penalty on Groq") end
  if p.logit_bias ~= nil then r.drop("logit_bias", "Groq does not support logit_bias") end
  if p.thinking_budget ~= nil then r.drop("thinking_budget", "Groq takes reasoning_effort, not a token budget") end
  if p.reasoning_effort ~= nil then
    local map = effort_data().groq or {}
    if model:match("gpt%-oss") then
      local level = map[p.reasoning_effort] or p.reasoning_effort
      if level ~= p.reasoning_effort then
        r.note(("reasoning_effort %q sent as %q (gpt-oss cannot turn reasoning off)"):format(p.reasoning_effort, level))
      end
      body.reasoning_effort = level
    elseif model:match("qwen3") then
      body.reasoning_effort = p.reasoning_effort == "none" and "none" or "default"
    else
      r.drop("reasoning_effort", model .. " is not a reasoning model")
    end
  end
  if p.constraint then
    if p.constraint.kind == "json_schema" then
      body.response_format = { type = "json_schema",
        json_schema = { name = p.constraint.name or "response", schema = copy(p.constraint.schema) } }
    else
      r.drop("constraint (choice)", "Groq has no label-only output mode; list the labels in the prompt")
    end
  end
  return body, M.INFO.groq.url
end

---------------------------------------------------------------------------------------------
-- Gemini: generateContent
---------------------------------------------------------------------------------------------
local function gemini(p, messages, model, opts, r)
  local system, contents = {}, {}
  for _, m in ipairs(with_system(p, messages)) do
    if m.role == "system" then
      system[#system + 1] = { text = m.content }
    else
      contents[#contents + 1] = { role = m.role == "assistant" and "model" or "user",
        parts = arr({ { text = m.content } }) }
    end
  end
  local gc = {
    temperature = p.temperature,
    topP = p.top_p,
    topK = p.top_k,
    maxOutputTokens = p.max_tokens,
    stopSequences = stops(p, "gemini", r),
    seed = p.seed,
    presencePenalty = p.presence_penalty,
    frequencyPenalty = p.frequency_penalty,
  }
  -- Gemini 2.5 models answer 400 "Penalty is not enabled for models/gemini-2.5-..." to a non-zero
  -- penalty (docs/presets.md): drop them there.
  if model:match("^gemini%-2%.5") then
    for _, k in ipairs({ "presencePenalty", "frequencyPenalty" }) do
      if gc[k] ~= nil and gc[k] ~= 0 then
        r.drop(k == "presencePenalty" and "presence_penalty" or "frequency_penalty",
          "Gemini 2.5 models reject penalties (INVALID_ARGUMENT: Penalty is not enabled)")
      end
      gc[k] = nil
    end
  end
  if p.min_p ~= nil then r.drop("min_p", "not in Gemini's generationConfig") end
  if p.repetition_penalty ~= nil then r.drop("repetition_penalty", "not in Gemini's generationConfig") end
  if p.logit_bias ~= nil then r.drop("logit_bias", "Gemini does not support logit bias") end
  if p.temperature ~= nil and model:match("^gemini%-3") then
    r.note("Gemini 3 documentation advises leaving temperature at its default (1.0); set it to nil to omit it")
  end
  -- thinkingBudget and thinkingLevel are exclusive: a budget, when given, wins.
  local eff = effort_data()
  local tc
  if p.thinking_budget ~= nil then
    tc = { thinkingBudget = p.thinking_budget }
    if p.reasoning_effort ~= nil then
      r.drop("reasoning_effort", "thinking_budget is set; Gemini takes a budget or a level, never both")
    end
  elseif p.reasoning_effort ~= nil then
    if model:match("^gemini%-2%.5") then
      local budget = (eff.gemini_2_5_budget or {})[p.reasoning_effort]
      if budget == nil then
        r.drop("reasoning_effort", "no thinkingBudget for this level in presets/effort.lua")
      else
        if budget == 0 and model:match("pro") then
          budget = 128
          r.note("Gemini 2.5 Pro cannot turn thinking off; thinkingBudget raised to its minimum, 128")
        end
        tc = { thinkingBudget = budget }
        r.note(("reasoning_effort %q sent as thinkingBudget %d (presets/effort.lua)"):format(p.reasoning_effort, budget))
      end
    else
      local level = (eff.gemini_3_level or {})[p.reasoning_effort] or p.reasoning_effort
      if level ~= p.reasoning_effort then
        r.note(("reasoning_effort %q sent as thinkingLevel %q"):format(p.reasoning_effort, level))
      end
      tc = { thinkingLevel = level }
    end
  end
  gc.thinkingConfig = tc
  if p.constraint then
    if p.constraint.kind == "json_schema" then
      gc.responseMimeType = "application/json"
      local dropped = {}
      gc.responseSchema = gemini_schema(p.constraint.schema, "schema", dropped)
      table.sort(dropped)
      for _, d in ipairs(dropped) do r.drop("constraint." .. d, "not in Gemini's Schema subset") end
    else
      gc.responseMimeType = "text/x.enum"
      gc.responseSchema = { type = "STRING", enum = arr(copy(p.constraint.labels)) }
    end
  end
  local body = { contents = arr(contents), generationConfig = next(gc) and gc or nil }
  if #system > 0 then body.systemInstruction = { parts = arr(system) } end
  local url = M.INFO.gemini.url:format(model)
  if opts.stream then url = url:gsub(":generateContent$", ":streamGenerateContent?alt=sse") end
  return body, url
end

---------------------------------------------------------------------------------------------
-- Ollama: /api/chat
---------------------------------------------------------------------------------------------
local function ollama(p, messages, model, opts, r)
  local options = {
    temperature = p.temperature,
    top_k = p.top_k,
    top_p = p.top_p,
    min_p = p.min_p,
    repeat_penalty = p.repetition_penalty,
    presence_penalty = p.presence_penalty,
    frequency_penalty = p.frequency_penalty,
    seed = p.seed,
    num_predict = p.max_tokens,
    stop = stops(p, "ollama", r),
  }
  -- Ollama streams unless told otherwise, so a one-shot request says stream = false.
  local body = { model = model, messages = arr(with_system(p, messages)), stream = opts.stream and true or false,
    options = next(options) and options or nil }
  if p.logit_bias ~= nil then r.drop("logit_bias", "Ollama has no logit bias option") end
  if p.thinking_budget ~= nil then r.drop("thinking_budget", "Ollama's think takes a level, not a budget") end
  if p.reasoning_effort ~= nil then
    local map = effort_data().ollama or {}
    local v = map[p.reasoning_effort]
    if v == nil then v = p.reasoning_effort ~= "none" end
    -- Only gpt-oss takes a level string; other thinking models take true/false.
    if type(v) == "string" and not model:match("gpt%-oss") then v = true end
    -- gpt-oss takes only "low", "medium" or "high"; false does not turn its reasoning off.
    if type(v) == "boolean" and model:match("gpt%-oss") then
      r.note(("reasoning_effort %q sent as think \"low\" (gpt-oss cannot turn reasoning off; think takes low, medium or high)")
        :format(p.reasoning_effort))
      v = v and "medium" or "low"
    end
    body.think = v
  end
  if p.constraint then
    if p.constraint.kind == "json_schema" then
      body.format = copy(p.constraint.schema)
    else
      body.format = { type = "string", enum = arr(copy(p.constraint.labels)) }
      r.note("the choice comes back as a JSON string (quoted)")
    end
  end
  return body, M.ollama_host(opts.host) .. "/api/chat"
end

local BUILDERS = { groq = groq, gemini = gemini, ollama = ollama }
local OPTS = { strict = "boolean", stream = "boolean", model = "string", host = "string" }

--- Build the request a provider would get for this preset and these messages.
--- preset: a name, a path or a loaded preset table. opts: strict (unsupported parameters are an
--- error), stream, model (default: preset.models[provider]), host (Ollama).
--- Returns {provider, model, url, method, headers, body, json, warnings, notes, dropped}.
function M.request(provider, preset, messages, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("providers.request: opts must be a table", 2) end
  for k, v in pairs(opts) do
    if not OPTS[k] then error(("providers.request: unknown option '%s'"):format(tostring(k)), 2) end
    if type(v) ~= OPTS[k] then
      error(("providers.request: option '%s' must be a %s, got %s"):format(k, OPTS[k], type(v)), 2)
    end
  end
  local build = BUILDERS[provider]
  if not build then
    error(("providers.request: unknown provider %s (groq, gemini or ollama)"):format(tostring(provider)), 2)
  end
  if type(preset) == "string" then preset = presets.load(preset) end
  if type(preset) ~= "table" then error("providers.request: preset must be a name, a path or a table", 2) end
  messages = messages or {}
  check_messages(messages)
  local model = opts.model or (preset.models and preset.models[provider])
    or presets.DEFAULTS.models[provider]
  local r = recorder(provider)
  local body, url = build(preset, messages, model, opts, r)
  if opts.strict and #r.dropped > 0 then
    error(("%s: strict mode: preset '%s' uses parameters %s does not support: %s")
      :format(provider, tostring(preset.name), provider, table.concat(r.dropped, ", ")), 2)
  end
  local headers = { ["Content-Type"] = "application/json" }
  local info = M.INFO[provider]
  -- Placeholders only: the key itself is never read into a request table.
  if provider == "groq" then headers.Authorization = "Bearer $" .. info.key_env end
  if provider == "gemini" then headers["x-goog-api-key"] = "$" .. info.key_env end
  return {
    provider = provider, model = model, url = url, method = "POST", headers = headers,
    body = body, json = json().encode(body, { indent = true }),
    warnings = r.warnings, notes = r.notes, dropped = r.dropped,
  }
end

--- What is missing to call a provider for real: nil when ready, else a message naming the
--- environment variable (or the Ollama host) to set.
function M.missing_credentials(provider)
  local info = M.INFO[provider]
  if not info then return "unknown provider " .. tostring(provider) end
  if info.key_env then
    local v = os.getenv(info.key_env)
    if not v or v == "" then
      return ("Set %s to call %s (nothing was sent)."):format(info.key_env, provider)
    end
    return nil
  end
  local host = os.getenv(info.host_env)
  if not host or host == "" then
    return ("Set %s to your Ollama server (for example %s) to call ollama (nothing was sent).")
      :format(info.host_env, info.default_host)
  end
  return nil
end

---------------------------------------------------------------------------------------------
-- Live clients: stream_chat and chat (over wb.http)
---------------------------------------------------------------------------------------------
--   local s = providers.stream_chat("groq", "drafts", {{role = "user", content = "Hi"}})
--   for piece in s do io.write(piece) end
--   local st = s:stats()   -- StreamStats: ttft_ms, total_ms, chunks, output_tokens, ...
--   local text, st = providers.chat("ollama", "drafts", msgs, {host = "127.0.0.1:11434"})
--
-- Wire formats: "groq" and "openai" (OpenAI chat completions, SSE; `base_url` points them at
-- any compatible server: OpenAI, vLLM, llama.cpp, `workbench serve` at http://HOST:PORT/v1),
-- "gemini" (streamGenerateContent, SSE; `base_url` replaces https://generativelanguage.googleapis.com)
-- and "ollama" (/api/chat, NDJSON; `host` or $OLLAMA_HOST). Errors are raised as strings that
-- start with the provider's name and say what to do; the API key is read from its environment
-- variable at the moment of the request and never appears in a message, a stats table or a trace.

M.INFO.openai = { key_env = "OPENAI_API_KEY", url = "https://api.openai.com/v1/chat/completions" }
local GEMINI_BASE = "https://generativelanguage.googleapis.com"

local function http() return (package.loaded.wb or require("wb")).http end
local function clock() return (package.loaded.wb or require("wb")).clock_ms() end

local LIVE_OPTS = { model = "string", base_url = "string", host = "string", timeout_ms = "number",
  connect_timeout_ms = "number", idle_timeout_ms = "number", max_retries = "number",
  max_retry_wait_s = "number", strict = "boolean", api_key_env = "string" }

local function scrub(s, key)
  s = tostring(s)
  if key and #key >= 4 then
    local i = 1
    while true do
      local a, b = s:find(key, i, true)
      if not a then break end
      s = s:sub(1, a - 1) .. "***" .. s:sub(b + 1)
      i = a + 3
    end
  end
  return s
end

-- The URL, headers and body of a streaming request, and the key (kept out of everything else).
local function live_request(provider, preset, messages, opts)
  local wire = provider == "openai" and "groq" or provider
  local r = M.request(wire, preset, messages, { stream = true, model = opts.model, host = opts.host,
    strict = opts.strict })
  local info = M.INFO[provider]
  local key_env = opts.api_key_env or info.key_env
  local url = r.url
  if provider == "openai" then url = info.url end
  if opts.base_url then
    local base = opts.base_url:gsub("/+$", "")
    if wire == "groq" then
      -- a bare server address gets the OpenAI layout's /v1 (http://127.0.0.1:8080 -> .../v1)
      if base:match("^https?://[^/]+$") then base = base .. "/v1" end
      url = base .. "/chat/completions"
    elseif wire == "gemini" then url = url:gsub("^" .. GEMINI_BASE:gsub("%p", "%%%0"), base)
    else url = base .. "/api/chat" end
  end
  local key = key_env and os.getenv(key_env)
  if key == "" then key = nil end
  if key_env and not key and not opts.base_url then
    error(("%s: set %s to your API key to call %s (nothing was sent)"):format(provider, key_env, provider), 0)
  end
  local body = r.body
  if wire == "groq" then body.stream_options = { include_usage = true } end
  local headers = { ["Content-Type"] = "application/json",
    Accept = wire == "ollama" and "application/x-ndjson" or "text/event-stream" }
  if key and wire == "groq" then headers.Authorization = "Bearer " .. key end
  if key and wire == "gemini" then headers["x-goog-api-key"] = key end
  return { url = url, headers = headers, json = json().encode(body), wire = wire, model = r.model,
    key = key, key_env = key_env, warnings = r.warnings }
end

local function server_message(body)
  local ok, v = pcall(json().decode, body or "")
  if ok and type(v) == "table" then
    local e = v.error
    if type(e) == "string" then return e end
    if type(e) == "table" and type(e.message) == "string" then return e.message end
  end
  body = tostring(body or "")
  return #body > 200 and body:sub(1, 200) .. "..." or body
end

local function status_error(provider, req, status, body, retries)
  local msg = server_message(body)
  local what
  if status == 401 or status == 403 then
    what = req.key and ("the key in %s was rejected; check it, or that it may use model '%s'"):format(req.key_env, req.model)
      or ("it needs an API key: set %s"):format(req.key_env or "the provider's key variable")
  elseif status == 404 then
    what = ("model '%s' or the endpoint was not found; check the model name (opts.model or the preset's models.%s) and the URL")
      :format(req.model, provider)
  elseif status == 429 then
    what = ("rate limited%s; wait and try again, or lower the request rate"):format(
      retries > 0 and (" after %d retries"):format(retries) or "")
  elseif status >= 500 then
    what = "the provider failed on its side; try again later"
  elseif status == 400 or status == 422 then
    what = "the provider rejected the request; see its message"
  else
    what = "unexpected status"
  end
  return ("%s: HTTP %d from %s: %s (%s)"):format(provider, status, req.url:gsub("[?#].*$", ""), what,
    scrub(msg, req.key))
end

local TRANSPORT_ADVICE = {
  connect = "is the server running and the URL right?",
  timeout = "the provider did not answer in time; raise timeout_ms or try again",
  resolve = "check the host name and the network",
  tls = "the TLS handshake failed; check the URL and the system CA certificates",
  closed = "the connection dropped; try again",
}

-- One event of the stream: update the stats and return the visible text of this chunk.
local function parse_event(wire, obj, st)
  if type(obj) ~= "table" then return nil, "not a JSON object" end
  if obj.error ~= nil then
    local e = obj.error
    return nil, "the provider reported an error mid-stream: " .. (type(e) == "table" and tostring(e.message) or tostring(e))
  end
  local text = {}
  if wire == "groq" then
    for _, c in ipairs(obj.choices or {}) do
      local d = c.delta or {}
      if type(d.content) == "string" then text[#text + 1] = d.content end
      local r = d.reasoning or d.reasoning_content
      if type(r) == "string" then st.reasoning_chars = (st.reasoning_chars or 0) + #r end
      if type(c.finish_reason) == "string" then st.finish_reason = c.finish_reason end
    end
    local u = type(obj.usage) == "table" and obj.usage or (type(obj.x_groq) == "table" and obj.x_groq.usage)
    if type(u) == "table" and u.completion_tokens then
      st.output_tokens, st.output_tokens_source = u.completion_tokens, "usage"
      st.prompt_tokens = u.prompt_tokens
      local det = u.completion_tokens_details
      if type(det) == "table" and det.reasoning_tokens then st.reasoning_tokens = det.reasoning_tokens end
    end
  elseif wire == "gemini" then
    for _, c in ipairs(obj.candidates or {}) do
      local parts = c.content and c.content.parts or {}
      for _, p in ipairs(parts) do
        if type(p.text) == "string" then
          if p.thought then st.reasoning_chars = (st.reasoning_chars or 0) + #p.text
          else text[#text + 1] = p.text end
        end
      end
      if type(c.finishReason) == "string" then st.finish_reason = c.finishReason end
    end
    local u = obj.usageMetadata
    if type(u) == "table" then
      if u.candidatesTokenCount then st.output_tokens, st.output_tokens_source = u.candidatesTokenCount, "usage" end
      st.prompt_tokens = u.promptTokenCount or st.prompt_tokens
      if u.thoughtsTokenCount then st.reasoning_tokens = u.thoughtsTokenCount end
    end
  else -- ollama
    local m = obj.message or {}
    if type(m.content) == "string" then text[#text + 1] = m.content end
    if type(m.thinking) == "string" then st.reasoning_chars = (st.reasoning_chars or 0) + #m.thinking end
    if obj.done == true then
      st.finish_reason = obj.done_reason or "stop"
      if obj.eval_count then st.output_tokens, st.output_tokens_source = obj.eval_count, "usage" end
      st.prompt_tokens = obj.prompt_eval_count or st.prompt_tokens
    end
  end
  return table.concat(text)
end

local Stream = {}
Stream.__index = Stream

--- Start a streaming chat request. Returns a Stream: call it (or use it in a for loop) for the
--- text pieces; s:stats() gives the StreamStats (final once the loop ended); s:close() stops.
function M.stream_chat(provider, preset, messages, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("providers.stream_chat: opts must be a table", 2) end
  for k, v in pairs(opts) do
    if not LIVE_OPTS[k] then error(("providers.stream_chat: unknown option '%s'"):format(tostring(k)), 2) end
    if type(v) ~= LIVE_OPTS[k] then
      error(("providers.stream_chat: option '%s' must be a %s, got %s"):format(k, LIVE_OPTS[k], type(v)), 2)
    end
  end
  if provider ~= "openai" and not BUILDERS[provider] then
    error(("providers.stream_chat: unknown provider %s (groq, openai, gemini or ollama)"):format(tostring(provider)), 2)
  end
  local req = live_request(provider, preset, messages, opts)
  local st = { provider = provider, model = req.model, url = req.url:gsub("[?#].*$", ""), status = nil,
    ttft_ms = nil, total_ms = nil, chunks = 0, events = 0, output_tokens = nil, output_tokens_source = nil,
    reasoning_tokens = nil, finish_reason = nil, retries = 0, warnings = req.warnings }
  local max_retries = math.floor(opts.max_retries or 3)
  local max_wait = opts.max_retry_wait_s or 30
  local t0 = clock()
  local resp
  while true do
    local r, msg, kind = http().request{ url = req.url, method = "POST", headers = req.headers, body = req.json,
      stream = true, timeout_ms = math.floor(opts.timeout_ms or 0), connect_timeout_ms = math.floor(opts.connect_timeout_ms or 10000),
      idle_timeout_ms = math.floor(opts.idle_timeout_ms or 120000) }
    if not r then
      error(("%s: %s (%s): %s"):format(provider, kind, scrub(msg, req.key), TRANSPORT_ADVICE[kind] or "see the message"), 0)
    end
    local status = r.status
    st.status = status
    if status < 300 then resp = r; break end
    local body = {}
    for piece in r:chunks() do body[#body + 1] = piece end
    body = table.concat(body)
    local ra = tonumber(r.headers["retry-after"] or "")
    r:close()
    if (status == 429 or status == 503) and st.retries < max_retries then
      local wait = math.min(ra or 2 ^ st.retries, max_wait)
      st.retries = st.retries + 1
      st.retry_wait_s = (st.retry_wait_s or 0) + wait
      os.execute(("sleep %.3f"):format(wait))
    else
      error(status_error(provider, req, status, body, st.retries), 0)
    end
  end
  local s = setmetatable({ resp = resp, st = st, req = req, buf = "", offset = 0, t0 = t0, done = false,
    pending = {}, text_chars = 0 }, Stream)
  return s
end

-- Split the buffer into complete events: SSE "data:" payloads or NDJSON lines, with the byte
-- offset (in the whole response body) where each began.
local function take_events(s)
  local out = {}
  if s.req.wire == "ollama" then
    while true do
      local nl = s.buf:find("\n", 1, true)
      if not nl then break end
      local line = s.buf:sub(1, nl - 1)
      out[#out + 1] = { data = line, offset = s.offset }
      s.offset = s.offset + nl
      s.buf = s.buf:sub(nl + 1)
    end
  else
    while true do
      local a, b = s.buf:find("\r?\n\r?\n")
      if not a then break end
      local block = s.buf:sub(1, a - 1)
      local data = {}
      for line in (block .. "\n"):gmatch("(.-)\r?\n") do
        local d = line:match("^data: ?(.*)$")
        if d then data[#data + 1] = d end
      end
      if #data > 0 then out[#out + 1] = { data = table.concat(data, "\n"), offset = s.offset } end
      s.offset = s.offset + b
      s.buf = s.buf:sub(b + 1)
    end
  end
  return out
end

function Stream:finish()
  if self.done then return end
  self.done = true
  local st = self.st
  st.total_ms = clock() - self.t0
  if not st.output_tokens then
    st.output_tokens = math.max(self.text_chars > 0 and 1 or 0, math.floor(self.text_chars / 4 + 0.5))
    st.output_tokens_source = "estimated (characters / 4; the provider reported no usage)"
  end
  if self.resp then self.resp:close(); self.resp = nil end
end

function Stream:__call()
  while true do
    if #self.pending > 0 then return table.remove(self.pending, 1) end
    if self.done then return nil end
    local piece, msg, kind = self.resp:read()
    if piece == nil and msg then
      local bytes = self.resp.bytes
      self:finish()
      error(("%s: the stream broke after %d bytes (%s): %s"):format(self.st.provider, bytes,
        kind, scrub(msg, self.req.key)), 0)
    end
    if piece == nil then
      if self.buf:match("%S") then -- a last NDJSON line without its newline
        self.buf = self.buf .. "\n"
      else
        self:finish()
        return nil
      end
    else
      self.buf = self.buf .. piece
    end
    for _, ev in ipairs(take_events(self)) do
      self.st.events = self.st.events + 1
      if ev.data == "[DONE]" then
        self.buf = ""
      elseif ev.data:match("%S") then
        local ok, obj = pcall(json().decode, ev.data)
        local text, err
        if ok then text, err = parse_event(self.req.wire, obj, self.st) end
        if not ok or err then
          self:finish()
          error(("%s: malformed stream chunk at byte %d: %s (%s)"):format(self.st.provider, ev.offset,
            err or tostring(obj):gsub("^[^:]*:%d+: ", ""), scrub(ev.data:sub(1, 80), self.req.key)), 0)
        end
        if text ~= "" then
          if not self.st.ttft_ms then self.st.ttft_ms = clock() - self.t0 end
          self.st.chunks = self.st.chunks + 1
          self.text_chars = self.text_chars + #text
          self.pending[#self.pending + 1] = text
        end
      end
    end
  end
end

function Stream:stats() return self.st end
function Stream:close() self:finish() end
Stream.__close = Stream.close

--- The whole reply: text, StreamStats (the same request, streamed and collected).
function M.chat(provider, preset, messages, opts)
  local s <close> = M.stream_chat(provider, preset, messages, opts)
  local parts = {}
  for piece in s do parts[#parts + 1] = piece end
  return table.concat(parts), s:stats()
end

return M
