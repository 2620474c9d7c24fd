-- wb.serve_api: the three wire formats of `workbench serve` (OpenAI, Ollama, Gemini).
--
-- Each API is a table of two halves:
--   parse(ctx, body, route) -> job     the request body (decoded JSON) into a common job, or
--                                      raises an ApiError {status, message, param, code}
--   writer methods                      turn pieces and results into that API's bytes:
--     head(job)                  -> status, headers      (streaming)
--     piece(job, i, text, lp)    -> bytes                (streaming; choice i, 0-based)
--     finish(job, i, res)        -> bytes                (streaming; a choice ended)
--     tail(job, results)         -> bytes                (streaming; everything ended)
--     full(job, results)         -> status, headers, body (non-streaming)
--     error(status, msg, param, code) -> headers, body
-- A job: {api, model, prompt (text), ids, params (wb sampling table), constraint_spec, n, stream,
-- include_usage, logprobs, top_logprobs, max_tokens_given, created, id}.
-- serve.lua owns the scheduling; nothing here touches the model beyond tokenizing.
local M = {}

local function json() return (package.loaded.wb or require("wb")).json end

-- A request error carrying the HTTP status and the field at fault.
local ApiError = {}
ApiError.__index = ApiError
ApiError.__tostring = function(e) return ("%d %s"):format(e.status, e.message) end
M.ApiError = ApiError

local function fail(status, message, param, code, type_)
  error(setmetatable({ status = status, message = message, param = param, code = code,
    type = type_ }, ApiError), 0)
end
M.fail = fail

local function is_int(v) return math.type(v) == "integer" end
local function is_num(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

local function typename(v)
  if v == json().null then return "null" end
  local t = type(v)
  if t == "table" then return getmetatable(v) == getmetatable(json().array()) and "array" or "object" end
  if t == "number" then return math.type(v) == "integer" and "integer" or "number" end
  return t
end

-- Field readers that fail with OpenAI's wording ("Invalid type for 'temperature': expected a
-- number, but got a string instead.") and treat JSON null as absent, as the APIs do.
local function get(body, key, kind, param)
  local v = body[key]
  if v == nil or v == json().null then return nil end
  param = param or key
  local ok
  if kind == "number" then ok = is_num(v)
  elseif kind == "integer" then ok = is_int(v) or (is_num(v) and v == math.floor(v))
    if ok then v = math.tointeger(v) end
  elseif kind == "string" then ok = type(v) == "string"
  elseif kind == "boolean" then ok = type(v) == "boolean"
  elseif kind == "table" then ok = type(v) == "table"
  elseif kind == "array" then ok = type(v) == "table" and (next(v) == nil or v[1] ~= nil)
  elseif kind == "object" then ok = type(v) == "table" and (next(v) == nil or v[1] == nil) end
  if not ok then
    fail(400, ("Invalid type for '%s': expected %s %s, but got %s instead."):format(param,
      kind == "integer" and "an" or "a", kind, typename(v)), param, "invalid_type")
  end
  return v
end
M.get = get

local function range(v, lo, hi, param)
  if v ~= nil and (v < lo or v > hi) then
    fail(400, ("Invalid value for '%s': %s is outside [%s, %s]."):format(param, tostring(v),
      tostring(lo), tostring(hi)), param, "invalid_value")
  end
  return v
end

local function check_keys(body, allowed, where)
  for k in pairs(body) do
    if type(k) ~= "string" or not allowed[k] then
      fail(400, ("Unrecognized request argument supplied: %s"):format(tostring(k)), where and
        (where .. "." .. tostring(k)) or tostring(k), "unknown_parameter")
    end
  end
end

local function set(list) local s = {} for _, k in ipairs(list) do s[k] = true end return s end

local function stop_list(v, param, max)
  if v == nil or v == json().null then return nil end
  if type(v) == "string" then v = { v } end
  if type(v) ~= "table" then fail(400, ("Invalid type for '%s': expected a string or an array of strings."):format(param), param, "invalid_type") end
  local out = {}
  for i, s in ipairs(v) do
    if type(s) ~= "string" then fail(400, ("Invalid type for '%s[%d]': expected a string."):format(param, i - 1), param, "invalid_type") end
    if s ~= "" then out[#out + 1] = s end
  end
  if max and #out > max then
    fail(400, ("Invalid value for '%s': at most %d stop sequences are allowed, got %d."):format(param, max, #out), param, "invalid_value")
  end
  return #out > 0 and out or nil
end

local function now_s() return os.time() end

local function rand_id(prefix)
  local t = {}
  for i = 1, 24 do t[i] = string.char(("abcdefghijklmnopqrstuvwxyz0123456789"):byte(math.random(36))) end
  return prefix .. table.concat(t)
end

local function encode(v) return json().encode(v) end
local arr = function(t) return json().array(t or {}) end

-- The `workbench` extension object of one finished choice: the request-timeline record.
function M.extension(job, res)
  local itl = {}
  for i, x in ipairs(res.itl_ms or {}) do itl[i] = math.floor(x * 1000 + 0.5) / 1000 end
  local function r3(x) return x and math.floor(x * 1000 + 0.5) / 1000 or json().null end
  return {
    queue_ms = r3(job.queue_ms),
    prefill_ms = r3(res.prefill_ms),
    ttft_ms = r3(res.ttft_ms),
    server_ttft_ms = r3(res.ttft_ms and job.queue_ms and (res.ttft_ms + job.queue_ms)),
    e2e_ms = r3(res.e2e_ms),
    itl_ms = arr(itl),
    tokens = #(res.token_ids or {}),
    prompt_tokens = res.prompt_tokens,
    cache_tokens = res.cache_tokens_before_release,
    seed = res.seed,
    stop_reason = res.stop_reason,
  }
end

local function finish_reason(res)
  local r = res.stop_reason
  if r == "length" or r == "context" then return "length" end
  return "stop"
end

---------------------------------------------------------------------------------------------
-- Common sampling fields (OpenAI names; Ollama options and Gemini generationConfig map here)
---------------------------------------------------------------------------------------------
local function sampling(b, names)
  names = names or {}
  local function n(k) return names[k] or k end
  local p = {}
  p.temperature = range(get(b, n"temperature", "number"), 0, 2, n"temperature")
  p.top_p = get(b, n"top_p", "number")
  if p.top_p ~= nil and (p.top_p <= 0 or p.top_p > 1) then
    fail(400, ("Invalid value for '%s': %s is outside (0, 1]."):format(n"top_p", p.top_p), n"top_p", "invalid_value")
  end
  p.top_k = get(b, n"top_k", "integer")
  if p.top_k and p.top_k < 0 then p.top_k = 0 end
  p.min_p = range(get(b, n"min_p", "number"), 0, 1, n"min_p")
  p.frequency_penalty = range(get(b, n"frequency_penalty", "number"), -2, 2, n"frequency_penalty")
  p.presence_penalty = range(get(b, n"presence_penalty", "number"), -2, 2, n"presence_penalty")
  p.repetition_penalty = get(b, n"repetition_penalty", "number")
  if p.repetition_penalty and p.repetition_penalty <= 0 then
    fail(400, ("Invalid value for '%s': must be > 0."):format(n"repetition_penalty"), n"repetition_penalty", "invalid_value")
  end
  p.seed = get(b, n"seed", "integer")
  return p
end

---------------------------------------------------------------------------------------------
-- OpenAI
---------------------------------------------------------------------------------------------
local OPENAI_CHAT_KEYS = set{ "model", "messages", "stream", "stream_options", "max_tokens",
  "max_completion_tokens", "temperature", "top_p", "frequency_penalty", "presence_penalty",
  "logit_bias", "stop", "seed", "n", "logprobs", "top_logprobs", "user", "response_format",
  "top_k", "min_p", "repetition_penalty", "tools", "tool_choice", "parallel_tool_calls",
  "functions", "function_call", "store", "metadata", "service_tier", "modalities", "audio",
  "prediction", "reasoning_effort", "web_search_options", "safety_identifier",
  "prompt_cache_key", "verbosity" }
local OPENAI_COMPLETION_KEYS = set{ "model", "prompt", "stream", "stream_options", "max_tokens",
  "temperature", "top_p", "frequency_penalty", "presence_penalty", "logit_bias", "stop", "seed",
  "n", "logprobs", "user", "top_k", "min_p", "repetition_penalty", "echo", "suffix", "best_of" }

local function openai_logit_bias(b, V)
  local lb = get(b, "logit_bias", "object")
  if not lb then return nil end
  local out, count = {}, 0
  for k, v in pairs(lb) do
    local id = math.tointeger(tonumber(k))
    if not id or tostring(id) ~= k then
      fail(400, ("Invalid key in 'logit_bias': %s is not a token id."):format(tostring(k)), "logit_bias", "invalid_value")
    end
    if id < 0 or id >= V then
      fail(400, ("Invalid key in 'logit_bias': token id %d is outside the vocabulary [0, %d)."):format(id, V), "logit_bias", "invalid_value")
    end
    if not is_num(v) or v < -100 or v > 100 then
      fail(400, ("Invalid value in 'logit_bias' for %s: must be a number in [-100, 100]."):format(k), "logit_bias", "invalid_value")
    end
    out[id] = v
    count = count + 1
  end
  if count > 1024 then fail(400, "Invalid 'logit_bias': at most 1024 entries.", "logit_bias", "invalid_value") end
  return out
end

-- response_format -> {kind = "json_object"} | {kind = "json_schema", schema = table, name}
local function openai_response_format(b)
  local rf = get(b, "response_format", "object")
  if not rf then return nil end
  local t = rf.type
  if t == "text" then return nil end
  if t == "json_object" then return { kind = "json_object" } end
  if t == "json_schema" then
    local js = rf.json_schema
    if type(js) ~= "table" or type(js.schema) ~= "table" then
      fail(400, "Missing required parameter: 'response_format.json_schema.schema'.", "response_format.json_schema.schema", "missing_required_parameter")
    end
    return { kind = "json_schema", schema = js.schema, name = js.name }
  end
  fail(400, ("Invalid value: '%s'. Supported values are: 'text', 'json_object' and 'json_schema'."):format(tostring(t)), "response_format.type", "invalid_value")
end

local function content_text(c, where)
  if type(c) == "string" then return c end
  if c == nil or c == json().null then return "" end
  if type(c) == "table" then
    local parts = {}
    for i, p in ipairs(c) do
      if type(p) ~= "table" or (p.type ~= "text" and p.type ~= "input_text") or type(p.text) ~= "string" then
        fail(400, ("Invalid content part %s[%d]: only text parts are supported by this server."):format(where, i - 1), where, "invalid_value")
      end
      parts[#parts + 1] = p.text
    end
    return table.concat(parts)
  end
  fail(400, ("Invalid type for '%s': expected a string or an array of content parts."):format(where), where, "invalid_type")
end

local function openai_messages(b)
  local msgs = b.messages
  if msgs == nil then fail(400, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter") end
  if type(msgs) ~= "table" or (next(msgs) ~= nil and msgs[1] == nil) then
    fail(400, "Invalid type for 'messages': expected an array.", "messages", "invalid_type")
  end
  if #msgs == 0 then fail(400, "Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages", "empty_array") end
  local out = {}
  for i, m in ipairs(msgs) do
    local where = ("messages[%d]"):format(i - 1)
    if type(m) ~= "table" then fail(400, ("Invalid type for '%s': expected an object."):format(where), where, "invalid_type") end
    local role = m.role
    if role == "developer" then role = "system" end
    if role ~= "system" and role ~= "user" and role ~= "assistant" and role ~= "tool" then
      fail(400, ("Invalid value for '%s.role': '%s'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'."):format(where, tostring(m.role)), where .. ".role", "invalid_value")
    end
    out[#out + 1] = { role = role, content = content_text(m.content, where .. ".content") }
  end
  return out
end

local function openai_common(ctx, b, keys, route)
  check_keys(b, keys)
  local job = { api = route, stream = get(b, "stream", "boolean") or false }
  job.model = get(b, "model", "string")
  if not job.model then fail(400, "Missing required parameter: 'model'.", "model", "missing_required_parameter") end
  local so = get(b, "stream_options", "object")
  if so then
    if not job.stream then fail(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "invalid_value") end
    job.include_usage = so.include_usage == true
  end
  local p = sampling(b)
  p.logit_bias = openai_logit_bias(b, ctx.vocab_size)
  p.stop = stop_list(b.stop, "stop", 4)
  job.params = p
  job.n = range(get(b, "n", "integer") or 1, 1, 16, "n")
  job.user = get(b, "user", "string")
  return job
end

function M.openai_chat(ctx, b)
  local job = openai_common(ctx, b, OPENAI_CHAT_KEYS, "chat")
  if b.tools ~= nil and b.tools ~= json().null and #b.tools > 0 then
    fail(400, "'tools' are not supported by this server.", "tools", "unsupported_parameter")
  end
  local mt = get(b, "max_completion_tokens", "integer") or get(b, "max_tokens", "integer")
  if mt ~= nil and mt < 1 then
    fail(400, ("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead."):format(mt), "max_tokens", "integer_below_min_value")
  end
  job.max_tokens = mt
  job.messages = openai_messages(b)
  local lp = get(b, "logprobs", "boolean")
  local tlp = get(b, "top_logprobs", "integer")
  if tlp ~= nil then
    range(tlp, 0, 20, "top_logprobs")
    if not lp then fail(400, "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.", "top_logprobs", "invalid_value") end
  end
  job.logprobs, job.top_logprobs = lp or false, tlp or 0
  job.format = openai_response_format(b)
  return job
end

function M.openai_completion(ctx, b)
  local job = openai_common(ctx, b, OPENAI_COMPLETION_KEYS, "completion")
  local mt = get(b, "max_tokens", "integer")
  if mt ~= nil and mt < 1 then
    fail(400, ("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead."):format(mt), "max_tokens", "integer_below_min_value")
  end
  job.max_tokens = mt or 16 -- the legacy completions default
  local pr = b.prompt
  if pr == nil then fail(400, "Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter") end
  if type(pr) == "table" then
    if #pr ~= 1 or type(pr[1]) ~= "string" then
      fail(400, "Invalid 'prompt': this server takes one prompt string per request.", "prompt", "invalid_value")
    end
    pr = pr[1]
  end
  if type(pr) ~= "string" then fail(400, "Invalid type for 'prompt': expected a string.", "prompt", "invalid_type") end
  job.prompt = pr
  if get(b, "echo", "boolean") then fail(400, "'echo' is not supported by this server.", "echo", "unsupported_parameter") end
  if get(b, "suffix", "string") then fail(400, "'suffix' is not supported by this server.", "suffix", "unsupported_parameter") end
  local bo = get(b, "best_of", "integer")
  if bo and bo ~= job.n then fail(400, "'best_of' other than n is not supported by this server.", "best_of", "unsupported_parameter") end
  local lp = get(b, "logprobs", "integer")
  if lp ~= nil then range(lp, 0, 5, "logprobs") end
  job.logprobs, job.top_logprobs = lp ~= nil, lp or 0
  return job
end

M.openai = {}
local O = M.openai

function O.error(status, msg, param, code, type_)
  local t = type_ or ({ [400] = "invalid_request_error", [401] = "invalid_request_error",
    [404] = "invalid_request_error", [413] = "invalid_request_error", [429] = "rate_limit_exceeded",
    [503] = "server_error", [500] = "server_error" })[status] or "server_error"
  return { ["Content-Type"] = "application/json" },
    encode({ error = { message = msg, type = t, param = param or json().null, code = code or json().null } })
end

function O.head(job)
  return 200, { ["Content-Type"] = "text/event-stream", ["Cache-Control"] = "no-cache" }
end

local function sse(obj) return "data: " .. encode(obj) .. "\n\n" end

local function lp_chat(job, lp)
  if not lp then return nil end
  local content = {}
  for i, t in ipairs(lp) do
    local top = {}
    for j, c in ipairs(t.top or {}) do top[j] = { token = c.token, logprob = c.logprob, bytes = arr(c.bytes) } end
    content[i] = { token = t.token, logprob = t.logprob, bytes = arr(t.bytes), top_logprobs = arr(top) }
  end
  return { content = arr(content), refusal = json().null }
end

local function lp_completion(job, lp)
  if not lp then return nil end
  local tokens, logprobs, tops = {}, {}, {}
  for i, t in ipairs(lp) do
    tokens[i], logprobs[i] = t.token, t.logprob
    local m = {}
    for _, c in ipairs(t.top or {}) do m[c.token] = c.logprob end
    tops[i] = m
  end
  return { tokens = arr(tokens), token_logprobs = arr(logprobs), top_logprobs = arr(tops), text_offset = arr() }
end

function O.piece(job, i, text, lp)
  local obj = { id = job.id, object = job.api == "chat" and "chat.completion.chunk" or "text_completion",
    created = job.created, model = job.model, system_fingerprint = job.fingerprint }
  if job.api == "chat" then
    local delta = { content = text }
    if not job.sent_role[i] then delta.role = "assistant"; job.sent_role[i] = true end
    obj.choices = arr{ { index = i, delta = delta, logprobs = job.logprobs and lp_chat(job, lp) or json().null,
      finish_reason = json().null } }
  else
    obj.choices = arr{ { index = i, text = text, logprobs = job.logprobs and lp_completion(job, lp) or json().null,
      finish_reason = json().null } }
  end
  if job.include_usage then obj.usage = json().null end
  return sse(obj)
end

function O.finish(job, i, res)
  local obj = { id = job.id, object = job.api == "chat" and "chat.completion.chunk" or "text_completion",
    created = job.created, model = job.model, system_fingerprint = job.fingerprint,
    workbench = M.extension(job, res) }
  if job.api == "chat" then
    local delta = {}
    if not job.sent_role[i] then delta.role = "assistant"; delta.content = ""; job.sent_role[i] = true end
    obj.choices = arr{ { index = i, delta = delta, logprobs = json().null, finish_reason = finish_reason(res) } }
  else
    obj.choices = arr{ { index = i, text = "", logprobs = json().null, finish_reason = finish_reason(res) } }
  end
  if job.include_usage then obj.usage = json().null end
  return sse(obj)
end

local function usage(job, results)
  local completion = 0
  for _, r in ipairs(results) do completion = completion + #(r.token_ids or {}) end
  return { prompt_tokens = job.prompt_tokens, completion_tokens = completion,
    total_tokens = job.prompt_tokens + completion,
    prompt_tokens_details = { cached_tokens = 0 },
    completion_tokens_details = { reasoning_tokens = 0 } }
end

function O.tail(job, results)
  local out = ""
  if job.include_usage then
    out = sse({ id = job.id, object = job.api == "chat" and "chat.completion.chunk" or "text_completion",
      created = job.created, model = job.model, system_fingerprint = job.fingerprint,
      choices = arr(), usage = usage(job, results) })
  end
  return out .. "data: [DONE]\n\n"
end

function O.full(job, results, texts, lps)
  local choices, ext = {}, {}
  for i, r in ipairs(results) do
    if job.api == "chat" then
      choices[i] = { index = i - 1, message = { role = "assistant", content = texts[i], refusal = json().null },
        logprobs = job.logprobs and lp_chat(job, lps[i]) or json().null, finish_reason = finish_reason(r) }
    else
      choices[i] = { index = i - 1, text = texts[i], logprobs = job.logprobs and lp_completion(job, lps[i]) or json().null,
        finish_reason = finish_reason(r) }
    end
    ext[i] = M.extension(job, r)
  end
  local body = { id = job.id, object = job.api == "chat" and "chat.completion" or "text_completion",
    created = job.created, model = job.model, system_fingerprint = job.fingerprint,
    choices = arr(choices), usage = usage(job, results),
    workbench = #ext == 1 and ext[1] or { choices = arr(ext) } }
  return 200, { ["Content-Type"] = "application/json" }, encode(body)
end

function O.stream_error(job, status, msg)
  return sse({ error = { message = msg, type = "server_error", code = status } })
end

---------------------------------------------------------------------------------------------
-- Ollama
---------------------------------------------------------------------------------------------
local OLLAMA_OPTIONS = set{ "temperature", "top_k", "top_p", "min_p", "num_predict", "stop", "seed",
  "repeat_penalty", "presence_penalty", "frequency_penalty", "num_ctx", "repeat_last_n", "typical_p",
  "mirostat", "mirostat_eta", "mirostat_tau", "num_keep", "tfs_z", "num_batch", "num_gpu", "main_gpu",
  "use_mmap", "num_thread", "numa", "low_vram", "penalize_newline" }

local function ollama_format(v)
  if v == nil or v == json().null or v == "" then return nil end
  if v == "json" then return { kind = "json_object" } end
  if type(v) == "table" then return { kind = "json_schema", schema = v } end
  fail(400, ("invalid format: %s (want \"json\" or a JSON schema object)"):format(tostring(v)), "format")
end

local function ollama_common(ctx, b, extra_keys, route)
  local job = { api = route, stream = true }
  local s = get(b, "stream", "boolean")
  if s ~= nil then job.stream = s end
  job.model = get(b, "model", "string")
  if not job.model or job.model == "" then fail(400, "model is required", "model") end
  local o = get(b, "options", "object") or {}
  for k in pairs(o) do
    if not OLLAMA_OPTIONS[k] then fail(400, ("invalid option provided: %s"):format(tostring(k)), "options." .. tostring(k)) end
  end
  local p = sampling(o, { repetition_penalty = "repeat_penalty" })
  p.stop = stop_list(o.stop, "options.stop")
  job.params = p
  local np = get(o, "num_predict", "integer", "options.num_predict")
  if np and np > 0 then job.max_tokens = np end
  job.format = ollama_format(b.format)
  job.n = 1
  -- keep_alive and think are accepted: the model stays loaded for the server's lifetime, and no
  -- served model has a separate thinking channel.
  local ka = b.keep_alive
  if ka ~= nil and ka ~= json().null and type(ka) ~= "string" and type(ka) ~= "number" then
    fail(400, "keep_alive must be a duration string or a number of seconds", "keep_alive")
  end
  return job
end

M.ollama = {}
local OL = M.ollama

function M.ollama_chat(ctx, b)
  check_keys(b, set{ "model", "messages", "stream", "format", "options", "keep_alive", "think", "tools" })
  local job = ollama_common(ctx, b, nil, "ollama_chat")
  local msgs = b.messages
  if type(msgs) ~= "table" then msgs = {} end
  local out = {}
  for i, m in ipairs(msgs) do
    if type(m) ~= "table" or type(m.role) ~= "string" then fail(400, ("messages[%d]: role is required"):format(i - 1), "messages") end
    if m.role ~= "system" and m.role ~= "user" and m.role ~= "assistant" and m.role ~= "tool" then
      fail(400, ("messages[%d]: invalid role %q"):format(i - 1, m.role), "messages")
    end
    out[#out + 1] = { role = m.role, content = type(m.content) == "string" and m.content or "" }
  end
  if #out == 0 then job.load_only = true end -- Ollama loads the model and returns done
  job.messages = out
  return job
end

function M.ollama_generate(ctx, b)
  check_keys(b, set{ "model", "prompt", "suffix", "system", "template", "context", "stream", "raw",
    "format", "options", "keep_alive", "images", "think" })
  local job = ollama_common(ctx, b, nil, "ollama_generate")
  local prompt = get(b, "prompt", "string") or ""
  local system = get(b, "system", "string")
  if prompt == "" and not system then job.load_only = true end
  if get(b, "raw", "boolean") then
    job.prompt = prompt
  else
    job.messages = {}
    if system then job.messages[1] = { role = "system", content = system } end
    job.messages[#job.messages + 1] = { role = "user", content = prompt }
  end
  return job
end

local function iso_now()
  return os.date("!%Y-%m-%dT%H:%M:%S.000000000Z")
end

function OL.error(status, msg)
  return { ["Content-Type"] = "application/json" }, encode({ error = msg })
end

function OL.head(job)
  return 200, { ["Content-Type"] = "application/x-ndjson" }
end

local function ollama_obj(job, text, done)
  local o = { model = job.model, created_at = iso_now(), done = done }
  if job.api == "ollama_chat" then o.message = { role = "assistant", content = text }
  else o.response = text end
  return o
end

local function ns(ms) return math.floor((ms or 0) * 1e6 + 0.5) end

local function ollama_final(job, res)
  local o = ollama_obj(job, "", true)
  o.done_reason = finish_reason(res)
  o.total_duration = ns((res.e2e_ms or 0) + (job.queue_ms or 0))
  o.load_duration = 0
  o.prompt_eval_count = job.prompt_tokens
  o.prompt_eval_duration = ns(res.prefill_ms)
  o.eval_count = #(res.token_ids or {})
  o.eval_duration = ns((res.e2e_ms or 0) - (res.ttft_ms or 0))
  o.workbench = M.extension(job, res)
  return o
end

function OL.piece(job, i, text) return encode(ollama_obj(job, text, false)) .. "\n" end
function OL.finish(job, i, res) return encode(ollama_final(job, res)) .. "\n" end
function OL.tail() return "" end
function OL.full(job, results, texts)
  local o = ollama_final(job, results[1])
  if job.api == "ollama_chat" then o.message.content = texts[1] else o.response = texts[1] end
  return 200, { ["Content-Type"] = "application/json" }, encode(o)
end
function OL.stream_error(job, status, msg) return encode({ error = msg }) .. "\n" end

---------------------------------------------------------------------------------------------
-- Gemini
---------------------------------------------------------------------------------------------
local GEMINI_GC = set{ "temperature", "topP", "topK", "candidateCount", "maxOutputTokens",
  "stopSequences", "seed", "presencePenalty", "frequencyPenalty", "responseMimeType",
  "responseSchema", "responseJsonSchema", "thinkingConfig", "responseLogprobs", "logprobs",
  "responseModalities", "mediaResolution", "speechConfig", "enableEnhancedCivicAnswers" }

-- Gemini's OpenAPI-style Schema (upper-case types, propertyOrdering) to the JSON Schema our
-- constraint engine reads.
local function from_gemini_schema(s, path)
  if type(s) ~= "table" then fail(400, ("Invalid JSON payload: %s must be an object"):format(path), path) end
  local out = {}
  for k, v in pairs(s) do
    if k == "type" then out.type = type(v) == "string" and v:lower() or v
    elseif k == "properties" then
      out.properties = {}
      for name, sub in pairs(v) do out.properties[name] = from_gemini_schema(sub, path .. ".properties." .. name) end
    elseif k == "items" then out.items = from_gemini_schema(v, path .. ".items")
    elseif k == "propertyOrdering" then -- the order is `required`'s for our engine
    elseif k == "nullable" or k == "format" or k == "title" or k == "description" or k == "example" then
      if k == "title" or k == "description" then out[k] = v end
    else out[k] = v end
  end
  if out.type == "object" and out.properties then
    local req, seen = {}, {}
    for _, name in ipairs(s.propertyOrdering or s.required or {}) do
      if out.properties[name] and not seen[name] then req[#req + 1] = name; seen[name] = true end
    end
    local rest = {}
    for name in pairs(out.properties) do if not seen[name] then rest[#rest + 1] = name end end
    table.sort(rest)
    for _, name in ipairs(rest) do req[#req + 1] = name end
    out.required = arr(req)
  end
  return out
end

local function gemini_text(parts, where)
  if type(parts) ~= "table" then return "" end
  local t = {}
  for i, p in ipairs(parts) do
    if type(p) == "table" and type(p.text) == "string" then t[#t + 1] = p.text
    elseif type(p) == "table" and p.thought then -- a thought summary part: not prompt text
    else fail(400, ("Invalid JSON payload: %s[%d]: only text parts are supported by this server"):format(where, i - 1), where) end
  end
  return table.concat(t)
end

function M.gemini_generate(ctx, b, route)
  check_keys(b, set{ "contents", "generationConfig", "systemInstruction", "safetySettings", "tools",
    "toolConfig", "cachedContent", "labels", "model" })
  local job = { api = "gemini", stream = route.stream, model = route.model, n = 1 }
  local contents = b.contents
  if type(contents) ~= "table" or #contents == 0 then
    fail(400, "* GenerateContentRequest.contents: contents is not specified", "contents")
  end
  local msgs = {}
  local si = b.systemInstruction
  if type(si) == "table" then
    local text = gemini_text(si.parts, "systemInstruction.parts")
    if text ~= "" then msgs[1] = { role = "system", content = text } end
  elseif type(si) == "string" then msgs[1] = { role = "system", content = si } end
  for i, c in ipairs(contents) do
    if type(c) ~= "table" then fail(400, ("Invalid JSON payload: contents[%d] must be an object"):format(i - 1), "contents") end
    local role = c.role or "user"
    if role ~= "user" and role ~= "model" then
      fail(400, ("Please use a valid role: user, model. Got %s"):format(tostring(role)), "contents.role")
    end
    msgs[#msgs + 1] = { role = role == "model" and "assistant" or "user",
      content = gemini_text(c.parts, ("contents[%d].parts"):format(i - 1)) }
  end
  job.messages = msgs
  local gc = get(b, "generationConfig", "object") or {}
  for k in pairs(gc) do
    if not GEMINI_GC[k] then
      fail(400, ("Invalid JSON payload received. Unknown name \"%s\" at 'generation_config': Cannot find field."):format(tostring(k)), "generationConfig." .. tostring(k))
    end
  end
  local p = sampling(gc, { top_p = "topP", top_k = "topK", frequency_penalty = "frequencyPenalty",
    presence_penalty = "presencePenalty" })
  p.stop = stop_list(gc.stopSequences, "generationConfig.stopSequences", 5)
  job.params = p
  job.max_tokens = get(gc, "maxOutputTokens", "integer", "generationConfig.maxOutputTokens")
  if job.max_tokens and job.max_tokens < 1 then job.max_tokens = nil end
  job.n = range(get(gc, "candidateCount", "integer", "generationConfig.candidateCount") or 1, 1, 8, "generationConfig.candidateCount")
  local mime = get(gc, "responseMimeType", "string", "generationConfig.responseMimeType")
  local schema = gc.responseJsonSchema or gc.responseSchema
  if schema ~= nil and mime ~= "application/json" then
    fail(400, "responseSchema requires responseMimeType \"application/json\"", "generationConfig.responseSchema")
  end
  if mime == "application/json" then
    if schema then
      job.format = { kind = "json_schema", schema = gc.responseJsonSchema and schema
        or from_gemini_schema(schema, "generationConfig.responseSchema") }
    else
      job.format = { kind = "json_object" }
    end
  elseif mime ~= nil and mime ~= "text/plain" then
    fail(400, ("Unsupported response mime type: %s (text/plain or application/json)"):format(mime), "generationConfig.responseMimeType")
  end
  -- thinkingConfig is accepted: a served model has no separate thought channel, so thoughts are
  -- never produced and thoughtsTokenCount stays absent.
  get(gc, "thinkingConfig", "object", "generationConfig.thinkingConfig")
  return job
end

function M.gemini_count(ctx, b)
  local job = M.gemini_generate(ctx, b.generateContentRequest or b, { model = "", stream = false })
  return job
end

M.gemini = {}
local G = M.gemini

local GEMINI_STATUS = { [400] = "INVALID_ARGUMENT", [401] = "UNAUTHENTICATED", [403] = "PERMISSION_DENIED",
  [404] = "NOT_FOUND", [413] = "INVALID_ARGUMENT", [429] = "RESOURCE_EXHAUSTED", [500] = "INTERNAL",
  [503] = "UNAVAILABLE" }

function G.error(status, msg)
  return { ["Content-Type"] = "application/json" },
    encode({ error = { code = status, message = msg, status = GEMINI_STATUS[status] or "UNKNOWN" } })
end

function G.head(job) return 200, { ["Content-Type"] = "text/event-stream" } end

local GEMINI_FINISH = { stop = "STOP", eos = "STOP", length = "MAX_TOKENS", context = "MAX_TOKENS",
  constraint = "STOP", cancelled = "OTHER" }

local function gemini_usage(job, results)
  local c = 0
  for _, r in pairs(results) do c = c + #(r.token_ids or {}) end
  return { promptTokenCount = job.prompt_tokens, candidatesTokenCount = c, totalTokenCount = job.prompt_tokens + c }
end

function G.piece(job, i, text)
  return "data: " .. encode({ candidates = arr{ { content = { parts = arr{ { text = text } }, role = "model" }, index = i } },
    modelVersion = job.model, responseId = job.id }) .. "\r\n\r\n"
end

function G.finish(job, i, res)
  job.finished = job.finished or {}
  job.finished[i + 1] = res
  return "data: " .. encode({ candidates = arr{ { content = { parts = arr{ { text = "" } }, role = "model" },
    finishReason = GEMINI_FINISH[res.stop_reason] or "STOP", index = i } },
    usageMetadata = gemini_usage(job, job.finished), modelVersion = job.model, responseId = job.id,
    workbench = M.extension(job, res) }) .. "\r\n\r\n"
end

function G.tail() return "" end

function G.full(job, results, texts)
  local cands, ext = {}, {}
  for i, r in ipairs(results) do
    cands[i] = { content = { parts = arr{ { text = texts[i] } }, role = "model" },
      finishReason = GEMINI_FINISH[r.stop_reason] or "STOP", index = i - 1 }
    ext[i] = M.extension(job, r)
  end
  return 200, { ["Content-Type"] = "application/json" }, encode({ candidates = arr(cands),
    usageMetadata = gemini_usage(job, results), modelVersion = job.model, responseId = job.id,
    workbench = #ext == 1 and ext[1] or { choices = arr(ext) } })
end

function G.stream_error(job, status, msg)
  return "data: " .. encode({ error = { code = status, message = msg, status = GEMINI_STATUS[status] or "UNKNOWN" } }) .. "\r\n\r\n"
end

M.rand_id = rand_id
M.now_s = now_s
return M
