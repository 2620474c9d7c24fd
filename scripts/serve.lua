-- serve.lua - `workbench serve`: the model behind the OpenAI, Ollama and Gemini HTTP APIs.
--
--   workbench serve [-m DIR] [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-batch N]
--                   [--max-queue N] [--max-body BYTES] [--timeout S] [--duration S]
--                   [--port-file PATH] [--verbose]
--   (also: workbench scripts/serve.lua ...)
--
-- Binds to loopback unless --host says otherwise. With --api-key (or $WORKBENCH_API_KEY) every
-- request needs `Authorization: Bearer KEY` (Gemini clients may send x-goog-api-key). --port 0
-- picks a free port; --port-file writes the port there once listening (tests use it).
-- --duration stops after S seconds (tests); otherwise Ctrl-C stops the server. See docs/serve.md.
local serve = require("wb.serve")

local USAGE = [=[
usage: workbench serve [-m DIR] [--host ADDR] [--port N] [--api-key KEY] [--max-batch N]
                       [--max-queue N] [--max-body BYTES] [--timeout S] [--duration S]
                       [--port-file PATH] [--verbose]]=]

local o = { host = "127.0.0.1", port = 8080, max_batch = 8, max_queue = 64, max_body = 4 * 1024 * 1024,
  timeout = 300 }
local function die(msg)
  io.stderr:write("serve: ", msg, "\n", USAGE, "\n")
  os.exit(2)
end
local NUM = { port = 0, ["max-batch"] = 1, ["max-queue"] = 0, ["max-body"] = 0, timeout = 1, duration = 0 }
local i = 1
while arg[i] do
  local a = arg[i]
  local name = a:match("^%-%-(.+)$")
  if a == "-h" or a == "--help" then print(USAGE); os.exit(0)
  elseif a == "-m" then o.model = arg[i + 1] or die("-m needs a directory"); i = i + 1
  elseif a == "--verbose" then o.verbose = true
  elseif name and (NUM[name] or name == "host" or name == "api-key" or name == "port-file") then
    local v = arg[i + 1]
    if v == nil then die(a .. " needs a value") end
    if NUM[name] then
      local n = math.tointeger(tonumber(v))
      if not n or n < NUM[name] then die(("%s needs an integer >= %d, got '%s'"):format(a, NUM[name], v)) end
      v = n
    end
    o[name:gsub("-", "_")] = v
    i = i + 1
  else
    die(("unknown argument '%s'"):format(a))
  end
  i = i + 1
end
if o.port > 65535 then die("--port must be at most 65535") end
local key = o.api_key or os.getenv("WORKBENCH_API_KEY")
if key == "" then key = nil end

local srv <close> = serve.new{
  model = o.model, host = o.host, port = o.port, api_key = key, max_batch = o.max_batch,
  max_queue = o.max_queue, max_body = o.max_body, request_timeout_s = o.timeout,
  log = o.verbose and function(s) io.stderr:write(os.date("!%H:%M:%S "), s, "\n") end or nil,
}
require("wb.explorer").install(srv) -- the step explorer page at /explorer/ (docs/explorer.md)
io.stderr:write(("workbench serve: %s on http://%s:%d (OpenAI /v1, Ollama /api, Gemini /v1beta, step explorer /explorer/)%s\n")
  :format(srv.name, o.host:find(":") and "[" .. o.host .. "]" or o.host, srv.port, key and ", API key required" or ""))
if o.port_file then
  local tmp = o.port_file .. ".tmp"
  local f = assert(io.open(tmp, "w"))
  assert(f:write(tostring(srv.port), "\n"))
  assert(f:close())
  assert(os.rename(tmp, o.port_file))
end
local ok, err = pcall(srv.run, srv, { duration_s = o.duration ~= 0 and o.duration or nil })
srv:close()
if not ok and not tostring(err):find("interrupted") then error(err, 0) end
