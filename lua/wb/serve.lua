-- wb.serve: `workbench serve`, the loaded model behind the OpenAI, Ollama and Gemini HTTP APIs.
--
--   local serve = require("wb.serve")
--   local srv <close> = serve.new{model = wb.load(dir), port = 8080, max_batch = 8}
--   srv:run()                         -- until Ctrl-C (or srv:run{duration_s = 10})
--
-- The HTTP side is wb.httpd (libmicrohttpd threads read requests and enforce the connection and
-- body limits); everything here runs on the Lua main thread: each turn of the loop takes the new
-- requests, adds what fits (--max-batch rows) to the server's one wb.Batch, drops the rows of
-- clients that went away (their KV cache is freed at once) or that passed their deadline, runs one
-- batched step (one forward pass for every running row, each with its own sampling parameters,
-- seed, stops and constraint) and writes each released piece to its client. The wire formats live in
-- wb.serve_api. See docs/serve.md.
local api = require("wb.serve_api")

local M = {}

local function wbmod() return package.loaded.wb or require("wb") end

local DEFAULTS = {
  host = "127.0.0.1", port = 8080, api_key = nil, max_batch = 8, max_queue = 64,
  max_body = 4 * 1024 * 1024, request_timeout_s = 300, queue_timeout_s = 60,
  max_connections = 1000, idle_timeout_s = 15, model_name = nil, quiet = true, log = nil,
}

local Server = {}
Server.__index = Server

local function basename(p) return (p:gsub("/+$", ""):match("([^/]+)$")) or p end

local function sha_like(s)
  -- a stable 64-hex-digit digest of a string (FNV-1a lanes), for Ollama's `digest` field
  local out = {}
  for lane = 1, 8 do
    local h = 2166136261 ~ lane
    for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
    out[lane] = ("%08x"):format(h)
  end
  return table.concat(out)
end

function M.new(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if DEFAULTS[k] == nil and k ~= "model" and k ~= "api_key" and k ~= "model_name" and k ~= "log" then
      error(("serve.new: unknown option '%s'"):format(tostring(k)), 2)
    end
  end
  local o = {}
  for k, v in pairs(DEFAULTS) do o[k] = v end
  for k, v in pairs(opts) do o[k] = v end
  local wb = wbmod()
  local model = o.model
  if model == nil or type(model) == "string" then model = wb.load(model) end
  local info = model:info()
  local self = setmetatable({
    opts = o, model = model, tok = model.tokenizer, info = info,
    n_ctx = info.n_ctx, vocab_size = info.vocab_size,
    name = o.model_name or basename(model.dir),
    running = {},   -- jobs whose choices are decoding
    batch = model:batch(), -- every running choice is one row of this batch: one forward per step
    rows = {},      -- batch row id -> {job =, ch =}
    queue = {},     -- jobs waiting for room in the batch
    n_running = 0,  -- sequences decoding now (a job with n choices counts n)
    constraints = {}, constraint_order = {},
    routes = {},
    stats = { requests = 0, completed = 0, cancelled = 0, rejected = 0, peak_batch = 0, steps = 0 },
    created = os.time(),
  }, Server)
  local ok, tpl = pcall(wb.chat_template, model.dir)
  self.template = ok and tpl or nil
  self.httpd = wb.httpd.new{ host = o.host, port = o.port, max_body = o.max_body,
    max_connections = o.max_connections, idle_timeout_s = o.idle_timeout_s }
  self.port = self.httpd:port()
  return self
end

function Server:close()
  for j = #(self.running or {}), 1, -1 do self:cancel(self.running[j], "server closing") end
  self.running = {}
  if self.batch then self.batch:close(); self.batch = nil end
  if self.httpd then self.httpd:close(); self.httpd = nil end
end
Server.__close = Server.close
Server.__gc = Server.close

function Server:log(fmt, ...)
  if self.opts.log then self.opts.log(fmt:format(...)) end
end

--- Add a handler for an exact path: fn(server, req) answers req itself (issue 18's step
--- explorer registers its page and JSON endpoint this way).
function Server:route(method, path, fn) self.routes[method .. " " .. path] = fn end

---------------------------------------------------------------------------------------------
-- Prompts, constraints, limits
---------------------------------------------------------------------------------------------

-- Messages to prompt text: the directory's chat template; a model without one (a base model
-- such as TinyLM) gets the contents joined by newlines, which it simply continues.
function Server:render(messages)
  if self.template then
    local ok, text = pcall(self.template.render, self.template, messages, { add_generation_prompt = true })
    if not ok then api.fail(400, "the chat template could not render these messages: " .. tostring(text), "messages") end
    return text
  end
  local parts = {}
  for _, m in ipairs(messages) do parts[#parts + 1] = m.content end
  return table.concat(parts, "\n")
end

-- A flat JSON object (string keys, scalar values): what `json_object` mode asks for, in the
-- regular subset the constraint engine compiles (nested objects would need a stack).
local JSON_OBJECT_RE = [[\{ ?("([^"\\\x00-\x1f]|\\["\\/bfnrt])*": ?("([^"\\\x00-\x1f]|\\["\\/bfnrt])*"|-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,8})?|true|false|null)(, ?"([^"\\\x00-\x1f]|\\["\\/bfnrt])*": ?("([^"\\\x00-\x1f]|\\["\\/bfnrt])*"|-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,8})?|true|false|null)){0,31})? ?\}]]

function Server:constraint(format)
  if not format then return nil end
  local wb = wbmod()
  local key = format.kind == "json_object" and "json_object" or wb.json.encode(format.schema)
  local c = self.constraints[key]
  if c then return c end
  local ok, res
  if format.kind == "json_object" then
    ok, res = pcall(wb.constraint.regex, self.tok, JSON_OBJECT_RE)
  else
    ok, res = pcall(wb.constraint.json_schema, self.tok, key, { whitespace = "space" })
  end
  if not ok then
    api.fail(400, "Invalid schema for response_format: " .. tostring(res):gsub("^[^:]*:%d+: ", ""),
      "response_format", "invalid_json_schema")
  end
  self.constraints[key] = res
  local order = self.constraint_order
  order[#order + 1] = key
  if #order > 32 then self.constraints[table.remove(order, 1)] = nil end -- a small LRU
  return res
end

function Server:prepare(job)
  local tok = self.tok
  local text = job.prompt or self:render(job.messages)
  local ids = tok:encode(text, { truncation = false, padding = false }) -- model input (docs/tokenizer.md)
  if #ids == 0 then ids = { tok.eos_id or 0 } end
  job.ids, job.prompt_tokens = ids, #ids
  if #ids >= self.n_ctx then
    api.fail(400, ("This model's maximum context length is %d tokens. However, your %s resulted in %d tokens. Please reduce the length of the %s.")
      :format(self.n_ctx, job.messages and "messages" or "prompt", #ids, job.messages and "messages" or "prompt"),
      job.messages and "messages" or "prompt", "context_length_exceeded")
  end
  local room = self.n_ctx - #ids
  -- A max_tokens past the context is clamped (the reply ends with finish_reason "length"), as
  -- llama.cpp's server does, rather than rejected: presets written for hosted models ask for
  -- more than a small local context holds.
  if job.max_tokens and job.max_tokens > room then job.max_tokens = room end
  job.params.max_tokens = job.max_tokens or room
  local ok, err = pcall(wbmod().sampling.check, job.params)
  if not ok then api.fail(400, tostring(err):gsub("^bad argument #%d+ to '%w+' %((.*)%)$", "%1"), nil, "invalid_value") end
  job.c = self:constraint(job.format)
end

---------------------------------------------------------------------------------------------
-- Scheduling
---------------------------------------------------------------------------------------------

local function copy(t) local o = {} for k, v in pairs(t) do o[k] = v end return o end

function Server:start(job)
  local wb = wbmod()
  job.queue_ms = wb.clock_ms() - job.arrived
  job.choices = {}
  for i = 1, job.n do
    local p = copy(job.params)
    if p.seed ~= nil and i > 1 then p.seed = p.seed + (i - 1) end -- choice i draws from seed + i - 1
    p.n = nil -- the batch takes one row per choice
    local ok, id = pcall(self.batch.add, self.batch, job.ids, p, { constraint = job.c })
    if not ok then
      for _, ch in ipairs(job.choices) do self:drop_row(ch) end
      job.choices = {}
      return self:reply_error(job.req, job.fmt, 500, "could not start generation: " .. tostring(id))
    end
    local ch = { id = id, index = i - 1, text = {}, ids = {}, lp = job.logprobs and {} or nil }
    if job.logprobs then
      ch.scorer = self.model:session()
      ch.logits = ch.scorer:prefill(job.ids)
      ch.scored = 0
    end
    job.choices[i] = ch
    self.rows[id] = { job = job, ch = ch }
  end
  job.live = job.n
  self.n_running = self.n_running + job.n
  self.running[#self.running + 1] = job
  if job.stream then
    local status, headers = job.fmt.head(job)
    if not job.req:start(status, headers) then self:cancel(job, "client gone") end
  end
end

-- Logprobs of the tokens generated since the last call: the model's raw distribution at each
-- step (before penalties, temperature and filters), from a second session that follows along.
-- ids are the tokens sampled so far; final with an eos stop leaves the end token out (not text).
function Server:score(job, ch, ids, final, stop_reason)
  local out = {}
  local tok = self.tok
  local upto = #ids
  if final and stop_reason == "eos" then upto = upto - 1 end -- the end token is not text
  while ch.scored < upto do
    local id = ids[ch.scored + 1]
    if ch.pending then ch.logits = ch.scorer:decode(ch.pending); ch.pending = nil end
    local lsm = ch.logits:log_softmax()
    local t = tok:token(id)
    local e = { token = t, logprob = lsm:get(id), bytes = { t:byte(1, -1) }, top = {} }
    for j, c in ipairs(job.top_logprobs > 0 and lsm:topk(job.top_logprobs) or {}) do
      local ct = tok:token(c.id)
      e.top[j] = { token = ct, logprob = c.p, bytes = { ct:byte(1, -1) } }
    end
    out[#out + 1] = e
    ch.scored = ch.scored + 1
    if ch.scorer:pos() < ch.scorer:n_ctx() then ch.pending = id end -- fed before the next score
  end
  for _, e in ipairs(out) do ch.lp[#ch.lp + 1] = e end
  return out
end

-- A choice's batch row leaves now (its KV cache is freed at once) and its scorer closes.
function Server:drop_row(ch)
  if ch.id then
    if self.rows[ch.id] then
      self.rows[ch.id] = nil
      pcall(self.batch.cancel, self.batch, ch.id) -- a row that already ended is unknown: fine
    end
    ch.id = nil
  end
  if ch.scorer then ch.scorer:close(); ch.scorer = nil end
end

function Server:remove(job)
  for i, j in ipairs(self.running) do
    if j == job then table.remove(self.running, i); break end
  end
  self.n_running = self.n_running - (job.live or 0)
  job.live = 0
end

function Server:cancel(job, why)
  for _, ch in ipairs(job.choices or {}) do self:drop_row(ch) end
  self:remove(job)
  self.stats.cancelled = self.stats.cancelled + 1
  self:log("request %d cancelled (%s)", job.req.id, why)
end

function Server:complete(job)
  self:remove(job)
  local results, texts, lps = {}, {}, {}
  for i, ch in ipairs(job.choices) do
    results[i] = ch.result
    texts[i] = table.concat(ch.text)
    lps[i] = ch.lp
    if ch.scorer then ch.scorer:close(); ch.scorer = nil end
  end
  if job.stream then
    job.req:write(job.fmt.tail(job, results))
    job.req:finish()
  else
    local status, headers, body = job.fmt.full(job, results, texts, lps)
    job.req:respond(status, headers, body)
  end
  self.stats.completed = self.stats.completed + 1
  self:log("request %d done: %d prompt tokens, %s", job.req.id, job.prompt_tokens,
    results[1] and results[1].stop_reason or "?")
end

-- A job whose generation failed: every choice leaves the batch, the client gets a 500.
function Server:fail_job(job, msg)
  for _, c in ipairs(job.choices) do self:drop_row(c) end
  self:remove(job)
  if job.stream then
    job.req:write(job.fmt.stream_error(job, 500, msg)); job.req:finish()
  else
    self:reply_error(job.req, job.fmt, 500, msg)
  end
end

-- One batch event for one choice: the piece it released, and its end.
function Server:on_event(job, ch, ev)
  if ev.token ~= nil and not ev.done then ch.ids[#ch.ids + 1] = ev.token end
  local ids = ev.done and ev.result.token_ids or ch.ids
  if ev.text ~= "" then
    ch.text[#ch.text + 1] = ev.text
    local lp = ch.scorer and self:score(job, ch, ids, ev.done, ev.done and ev.result.stop_reason) or nil
    if job.stream then job.req:write(job.fmt.piece(job, ch.index, ev.text, lp)) end
  elseif ev.done and ch.scorer then
    local lp = self:score(job, ch, ids, true, ev.result.stop_reason)
    if #lp > 0 and #ch.lp > 0 then -- tokens after the last piece (held back, then cut)
      -- they belong to no released text; OpenAI reports only text tokens
      for _ = 1, #lp do table.remove(ch.lp) end
    end
  end
  if not ev.done then return end
  self.rows[ch.id] = nil
  ch.id = nil
  if ch.scorer then ch.scorer:close(); ch.scorer = nil end
  ch.result = ev.result
  -- a generation cancelled while its client is still there was stopped by Ctrl-C (the binding
  -- consumed the interrupt to end it cleanly): the server stops too
  if ch.result.stop_reason == "cancelled" then self.interrupted = true end
  job.live = job.live - 1
  self.n_running = self.n_running - 1
  if job.stream then job.req:write(job.fmt.finish(job, ch.index, ch.result)) end
  if job.live == 0 then
    job.live = nil
    self:complete(job)
  end
end

-- One batched step: drop the rows of clients that went away or ran out of time, then one
-- forward pass for every running row, and each event to its job.
function Server:advance()
  local now = wbmod().clock_ms()
  for j = #self.running, 1, -1 do
    local job = self.running[j]
    if job.req:closed() then
      self:cancel(job, "client gone")
    elseif now > job.deadline then
      local msg = ("request timed out after %d s (the server's per-request limit)"):format(self.opts.request_timeout_s)
      for _, ch in ipairs(job.choices) do self:drop_row(ch) end
      self:remove(job)
      if job.stream then
        job.req:write(job.fmt.stream_error(job, 503, msg))
        job.req:write(job.fmt.tail(job, {}))
        job.req:finish()
      else
        self:reply_error(job.req, job.fmt, 503, msg, nil, "timeout", { ["Retry-After"] = "1" })
      end
    end
  end
  local rows = self.batch:active()
  if rows == 0 then return end
  local s = self.stats
  s.steps = s.steps + 1
  if rows > s.peak_batch then s.peak_batch = rows end -- the most rows one forward pass carried
  local ok, evs = pcall(self.batch.step, self.batch)
  if not ok then -- the step itself failed: every running job ends with the error
    local msg = "generation failed: " .. tostring(evs)
    for j = #self.running, 1, -1 do self:fail_job(self.running[j], msg) end
    return
  end
  for _, ev in ipairs(evs) do
    local row = self.rows[ev.id]
    if row and row.job.live and row.job.live > 0 then
      if ev.error then
        self.rows[ev.id] = nil
        row.ch.id = nil
        self:fail_job(row.job, "generation failed: " .. tostring(ev.error))
      else
        self:on_event(row.job, row.ch, ev)
      end
    end
  end
end

function Server:admit()
  local now = wbmod().clock_ms()
  while #self.queue > 0 do
    local job = self.queue[1]
    if job.req:closed() then
      table.remove(self.queue, 1)
      self.stats.cancelled = self.stats.cancelled + 1
    elseif now - job.arrived > self.opts.queue_timeout_s * 1000 then
      table.remove(self.queue, 1)
      self:reply_error(job.req, job.fmt, 503, ("the server is busy: the request waited %d s in the queue"):format(self.opts.queue_timeout_s),
        nil, "server_overloaded", { ["Retry-After"] = "2" })
    elseif self.n_running == 0 or self.n_running + job.n <= self.opts.max_batch then
      table.remove(self.queue, 1)
      self:start(job)
    else
      break
    end
  end
end

---------------------------------------------------------------------------------------------
-- Requests
---------------------------------------------------------------------------------------------

function Server:reply_error(req, fmt, status, msg, param, code, extra)
  local headers, body = fmt.error(status, msg, param, code)
  for k, v in pairs(extra or {}) do headers[k] = v end
  req:respond(status, headers, body)
  if status >= 400 then self.stats.rejected = self.stats.rejected + 1 end
end

local function json_reply(req, status, obj)
  req:respond(status, { ["Content-Type"] = "application/json" }, wbmod().json.encode(obj))
end

function Server:model_matches(name, api_kind)
  if name == nil then return false end
  name = name:gsub("^models/", "")
  if name == self.name then return true end
  if api_kind == "ollama" and name == self.name .. ":latest" then return true end
  return false
end

function Server:models_openai()
  return { object = "list", data = wbmod().json.array{ { id = self.name, object = "model",
    created = self.created, owned_by = "workbench" } } }
end

function Server:ollama_model_entry()
  local info = self.info
  return { name = self.name .. ":latest", model = self.name .. ":latest",
    modified_at = os.date("!%Y-%m-%dT%H:%M:%SZ", self.created), size = info.weight_bytes or 0,
    digest = sha_like(self.model.dir),
    details = { parent_model = "", format = "safetensors", family = info.model_type,
      families = wbmod().json.array{ info.model_type }, parameter_size = ("%.2fM"):format(info.parameters / 1e6),
      quantization_level = "F32" } }
end

function Server:gemini_model()
  return { name = "models/" .. self.name, version = "workbench", displayName = self.name,
    inputTokenLimit = self.n_ctx, outputTokenLimit = self.n_ctx,
    supportedGenerationMethods = wbmod().json.array{ "generateContent", "streamGenerateContent", "countTokens" } }
end

local function route_of(path)
  path = path:gsub("^/openai/v1/", "/v1/") -- Groq's base URL layout
  if path:match("^/v1beta/") then return "gemini", path end
  -- the Gemini API also answers under /v1 (@google/genai uses it with a custom base URL)
  if path:match("^/v1/models/[^/]+:%a+$") then return "gemini", (path:gsub("^/v1/", "/v1beta/")) end
  if path:match("^/api/") then return "ollama", path end
  return "openai", path
end

function Server:authorized(req, family)
  local key = self.opts.api_key
  if not key then return true end
  local h = req.headers
  local auth = h.authorization or ""
  local bearer = auth:match("^[Bb]earer%s+(.+)$")
  if bearer == key then return true end
  if family == "gemini" and (h["x-goog-api-key"] == key or req.query.key == key) then return true end
  return false
end

local FMT = { openai = api.openai, ollama = api.ollama, gemini = api.gemini }

function Server:handle(req)
  self.stats.requests = self.stats.requests + 1
  local family, path = route_of(req.path)
  local fmt = FMT[family]
  local custom = self.routes[req.method .. " " .. req.path]
  if custom then return custom(self, req) end
  if req.method == "GET" and (path == "/" or path == "/health") then
    local s = self.stats
    return json_reply(req, 200, { status = "ok", model = self.name, requests = s.requests, completed = s.completed,
      cancelled = s.cancelled, rejected = s.rejected, running = #self.running, peak_batch = s.peak_batch, steps = s.steps, queued = #self.queue,
      connections = self.httpd:connections() })
  end
  if not self:authorized(req, family) then
    return self:reply_error(req, fmt, 401, family == "gemini" and "API key not valid. Please pass a valid API key."
      or "Incorrect API key provided. Pass the server's key as 'Authorization: Bearer KEY'.", nil, "invalid_api_key",
      { ["WWW-Authenticate"] = "Bearer" })
  end
  -- listings
  if req.method == "GET" then
    if path == "/v1/models" then return json_reply(req, 200, self:models_openai()) end
    local m = path:match("^/v1/models/(.+)$")
    if m then
      if self:model_matches(m) then return json_reply(req, 200, self:models_openai().data[1]) end
      return self:reply_error(req, fmt, 404, ("The model `%s` does not exist or you do not have access to it."):format(m), "model", "model_not_found")
    end
    if path == "/api/tags" then return json_reply(req, 200, { models = wbmod().json.array{ self:ollama_model_entry() } }) end
    if path == "/api/version" then return json_reply(req, 200, { version = "0.6.0" }) end
    if path == "/api/ps" then
      local e = self:ollama_model_entry()
      e.expires_at = "2999-01-01T00:00:00Z"; e.size_vram = 0
      return json_reply(req, 200, { models = wbmod().json.array{ e } })
    end
    if path == "/v1beta/models" then return json_reply(req, 200, { models = wbmod().json.array{ self:gemini_model() } }) end
    local gm = path:match("^/v1beta/models/([^:]+)$")
    if gm then
      if self:model_matches(gm) then return json_reply(req, 200, self:gemini_model()) end
      return self:reply_error(req, fmt, 404, ("models/%s is not found for API version v1beta"):format(gm))
    end
  end
  local parse, route
  if req.method == "POST" then
    if path == "/v1/chat/completions" then parse = api.openai_chat
    elseif path == "/v1/completions" then parse = api.openai_completion
    elseif path == "/api/chat" then parse = api.ollama_chat
    elseif path == "/api/generate" then parse = api.ollama_generate
    elseif path == "/api/show" then parse = "show"
    else
      local gm, verb = path:match("^/v1beta/models/([^:]+):(%a+)$")
      if gm and (verb == "generateContent" or verb == "streamGenerateContent" or verb == "countTokens") then
        route = { model = gm, stream = verb == "streamGenerateContent", verb = verb }
        parse = api.gemini_generate
      end
    end
  end
  if not parse then
    local known = path == "/v1/chat/completions" or path == "/v1/completions" or path == "/v1/models"
      or path == "/api/chat" or path == "/api/generate" or path == "/api/tags"
    if known then
      return self:reply_error(req, fmt, 405, ("Method %s is not allowed for %s."):format(req.method, path))
    end
    return self:reply_error(req, fmt, 404, ("Unknown request URL: %s %s."):format(req.method, req.path), nil, "unknown_url")
  end
  -- the body: UTF-8 JSON object
  local body = req.body
  if not utf8.len(body) then
    local _, bad = utf8.len(body)
    return self:reply_error(req, fmt, 400, ("The request body is not valid UTF-8 (byte %d)."):format(bad or 0), nil, "invalid_utf8")
  end
  local ok, b = pcall(wbmod().json.decode, body)
  if not ok then
    return self:reply_error(req, fmt, 400, ("We could not parse the JSON body of your request (%s). The body must be a JSON object.")
      :format(tostring(b):gsub("^[^:]*:%d+: ", "")), nil, "invalid_json")
  end
  if type(b) ~= "table" or (b[1] ~= nil) then
    return self:reply_error(req, fmt, 400, "The request body must be a JSON object.", nil, "invalid_json")
  end
  if parse == "show" then
    if not self:model_matches(b.model or b.name, "ollama") then
      return self:reply_error(req, fmt, 404, ("model '%s' not found"):format(tostring(b.model or b.name)))
    end
    local e = self:ollama_model_entry()
    return json_reply(req, 200, { modelfile = "", parameters = "", template = "", details = e.details,
      model_info = { ["general.architecture"] = self.info.model_type, ["general.parameter_count"] = self.info.parameters,
        [self.info.model_type .. ".context_length"] = self.n_ctx }, capabilities = wbmod().json.array{ "completion" } })
  end
  local ctx = { vocab_size = self.vocab_size, n_ctx = self.n_ctx }
  local okp, job = pcall(parse, ctx, b, route)
  if okp and not self:model_matches(job.model, family) then
    okp, job = false, setmetatable({ status = 404, param = "model", code = "model_not_found",
      message = family == "ollama" and ("model '%s' not found"):format(tostring(job.model))
        or family == "gemini" and ("models/%s is not found for API version v1beta"):format(tostring(job.model))
        or ("The model `%s` does not exist or you do not have access to it."):format(tostring(job.model)) }, api.ApiError)
  end
  if okp then okp, job = pcall(function() self:prepare(job); return job end) end
  if not okp then
    if getmetatable(job) == api.ApiError then
      return self:reply_error(req, fmt, job.status, job.message, job.param, job.code)
    end
    return self:reply_error(req, fmt, 500, "internal error: " .. tostring(job))
  end
  if route and route.verb == "countTokens" then
    return json_reply(req, 200, { totalTokens = job.prompt_tokens })
  end
  if job.load_only then -- Ollama's "load the model" request
    local o = { model = job.model, created_at = os.date("!%Y-%m-%dT%H:%M:%SZ"), done = true, done_reason = "load" }
    if job.api == "ollama_chat" then o.message = { role = "assistant", content = "" } else o.response = "" end
    return json_reply(req, 200, o)
  end
  job.req, job.fmt = req, fmt
  job.id = job.api == "chat" and api.rand_id("chatcmpl-") or job.api == "completion" and api.rand_id("cmpl-") or api.rand_id("")
  job.created = os.time()
  job.fingerprint = "fp_workbench"
  job.sent_role = {}
  job.arrived = wbmod().clock_ms()
  job.deadline = job.arrived + self.opts.request_timeout_s * 1000
  if job.n > self.opts.max_batch then
    return self:reply_error(req, fmt, 400, ("n = %d is larger than this server's batch (--max-batch %d)."):format(job.n, self.opts.max_batch), "n")
  end
  if #self.queue >= self.opts.max_queue then
    return self:reply_error(req, fmt, 429, ("The server is at capacity (%d running, %d queued). Retry after a second.")
      :format(self.n_running, #self.queue), nil, "rate_limit_exceeded", { ["Retry-After"] = "1" })
  end
  self.queue[#self.queue + 1] = job
end

--- One turn of the loop: take new requests (waiting up to wait_ms when idle), admit queued jobs
--- and advance every running sequence by one piece. Returns the number of running jobs.
function Server:step(wait_ms)
  local wb = wbmod()
  local busy = #self.running > 0
  local reqs = self.httpd:poll(busy and 0 or (wait_ms or 50))
  local n_int = wb.interrupts()
  for _, req in ipairs(reqs) do
    local ok, err = pcall(self.handle, self, req)
    -- a Ctrl-C that landed inside the handler is caught by this pcall (or one inside it): the
    -- loop must still end, so it is not turned into this request's 500
    if wb.interrupts() ~= n_int then self.interrupted = true; break end
    if not ok then
      pcall(req.respond, req, 500, { ["Content-Type"] = "application/json" },
        wbmod().json.encode({ error = { message = "internal error: " .. tostring(err), type = "server_error" } }))
    end
  end
  if self.interrupted then return #self.running end
  self:admit()
  if #self.running > 0 then self:advance() end
  return #self.running
end

--- Serve until duration_s passes (nil: forever, until Ctrl-C) or stop() returns true.
function Server:run(o)
  o = o or {}
  local wb = wbmod()
  local t_end = o.duration_s and wb.clock_ms() + o.duration_s * 1000
  -- Ctrl-C ends the loop even when the interruption error was caught on the way (a handler's or
  -- a batch step's pcall) or consumed by a generation that ended as "cancelled"
  local n_int = wb.interrupts()
  while true do
    self:step(50)
    if wb.interrupts() ~= n_int then self.interrupted = true end
    if t_end and wb.clock_ms() > t_end then break end
    if o.stop and o.stop(self) then break end
    if self.interrupted then break end
  end
end

return M
