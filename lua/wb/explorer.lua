-- wb.explorer - the step explorer's routes on a `workbench serve` server (wb.serve).
--
--   GET  /explorer/            the page (lua/wb/explorer/*.html, .js, .css: static, no build step)
--   GET  /workbench/info       the loaded model's model:info()
--   POST /workbench/steps      {prompt, params, constraint, top, attention} -> wb.steps.record(...)
--                              as JSON (attention = true: each step's attention by layer and head)
--
-- The record is computed in the server's loop, between batch steps of the API requests: it is
-- a teaching endpoint for one user, not a serving path. With --api-key the JSON endpoints need
-- the key like every other route (the page reads it from its URL: /explorer/#key=KEY).
local steps = require("wb.steps")

local M = {}

local STATIC = {
  ["index.html"] = "text/html; charset=utf-8",
  ["explorer.js"] = "text/javascript; charset=utf-8",
  ["explorer.css"] = "text/css; charset=utf-8",
}
local BODY_KEYS = {prompt = true, params = true, constraint = true, top = true, attention = true}
M.MAX_TOP = 50
-- Attention makes a record grow with layers x heads x steps x positions: about 30k numbers for
-- a 40-token TinyLM reply, but hundreds of millions on a 24-layer model with long prompts. Above
-- this many weights the request is refused with a message rather than building a huge reply.
M.MAX_ATTENTION_WEIGHTS = 2000000

-- An upper bound on the attention weights a record would carry: the prompt has at most one token
-- per byte (plus a few specials), and step t attends over prompt + t positions.
function M.attention_weights(info, prompt_bytes, max_tokens)
  local P = prompt_bytes + 8
  local n = max_tokens
  return info.n_layer * info.n_head * (n * P + n * (n + 1) // 2)
end

-- The folder holding the page, next to this module (source tree or install prefix alike).
local function static_dir()
  local path = package.searchpath("wb.explorer", package.path)
  if not path then error("wb.explorer: cannot find its own module path") end
  return (path:gsub("%.lua$", "")) .. "/"
end

local function read_static(name)
  local f, err = io.open(static_dir() .. name, "rb")
  if not f then return nil, err end
  local data = f:read("a")
  f:close()
  return data
end

local function json_error(wb, req, status, msg, param)
  req:respond(status, {["Content-Type"] = "application/json"},
              wb.json.encode({error = {message = msg, type = "invalid_request_error", param = param}}))
end

-- Decode and check the request body; returns prompt, params, opts or raises a message.
function M.parse_body(wb, text)
  local ok, body = pcall(wb.json.decode, text)
  if not ok or type(body) ~= "table" then error("body: expected a JSON object", 0) end
  for k in pairs(body) do
    if not BODY_KEYS[k] then error(("body: unknown field '%s'"):format(tostring(k)), 0) end
  end
  if type(body.prompt) ~= "string" then error("prompt: expected a string", 0) end
  local params = body.params or {}
  if type(params) ~= "table" then error("params: expected an object", 0) end
  -- JSON object keys are strings: logit_bias ids become integers again.
  if type(params.logit_bias) == "table" then
    local bias = {}
    for k, v in pairs(params.logit_bias) do
      local id = math.tointeger(tonumber(k))
      if not id then error(("params.logit_bias: key '%s' is not a token id"):format(tostring(k)), 0) end
      bias[id] = v
    end
    params.logit_bias = bias
  end
  if params.max_tokens == nil then params.max_tokens = 40 end
  local top = body.top or 10
  if math.type(top) ~= "integer" or top < 1 or top > M.MAX_TOP then
    error(("top: expected an integer in [1, %d]"):format(M.MAX_TOP), 0)
  end
  local c = body.constraint
  if c ~= nil and type(c) ~= "table" then error("constraint: expected an object", 0) end
  if c and c.kind == "json_schema" and type(c.schema) == "string" then
    local okj, schema = pcall(wb.json.decode, c.schema)
    if not okj then error("constraint.schema: not valid JSON", 0) end
    c = {kind = "json_schema", schema = schema}
  end
  if body.attention ~= nil and type(body.attention) ~= "boolean" then
    error("attention: expected true or false", 0)
  end
  return body.prompt, params, {top = top, constraint = c, attention = body.attention or nil}
end

--- Install the routes on a wb.serve server.
function M.install(server)
  local wb = package.loaded.wb or require("wb")
  local function page(name)
    return function(_, req)
      local data, err = read_static(name)
      if not data then return json_error(wb, req, 500, "explorer: " .. tostring(err)) end
      req:respond(200, {["Content-Type"] = STATIC[name], ["Cache-Control"] = "no-cache"}, data)
    end
  end
  server:route("GET", "/explorer", function(_, req)
    req:respond(301, {Location = "/explorer/"}, "")
  end)
  server:route("GET", "/explorer/", page("index.html"))
  for name in pairs(STATIC) do server:route("GET", "/explorer/" .. name, page(name)) end

  server:route("GET", "/workbench/info", function(srv, req)
    if not srv:authorized(req, "openai") then return json_error(wb, req, 401, "missing or wrong API key") end
    local info = srv.model:info()
    info.dir = srv.model.dir
    req:respond(200, {["Content-Type"] = "application/json"}, wb.json.encode(info))
  end)
  server:route("POST", "/workbench/steps", function(srv, req)
    if not srv:authorized(req, "openai") then return json_error(wb, req, 401, "missing or wrong API key") end
    local ok, prompt, params, opts = pcall(M.parse_body, wb, req.body or "")
    if not ok then return json_error(wb, req, 400, tostring(prompt)) end
    if opts.attention and math.type(params.max_tokens) == "integer" and params.max_tokens > 0 then
      local bound = M.attention_weights(srv.model:info(), #prompt, params.max_tokens)
      if bound > M.MAX_ATTENTION_WEIGHTS then
        return json_error(wb, req, 400, ("attention: this record could hold up to %d attention " ..
          "weights (limit %d); turn attention off, or lower max_tokens or the prompt length")
          :format(bound, M.MAX_ATTENTION_WEIGHTS), "attention")
      end
    end
    local okr, rec = pcall(steps.record, srv.model, prompt, params, opts)
    if not okr then
      -- Parameter and constraint errors are the caller's; they name the key at fault.
      local msg = tostring(rec):gsub("^[^:]*:%d+: ", "")
      msg = msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
      return json_error(wb, req, 400, msg)
    end
    req:respond(200, {["Content-Type"] = "application/json"}, wb.json.encode(rec))
  end)
  return server
end

return M
