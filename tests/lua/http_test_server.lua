-- A loopback HTTP server for tests/lua/test_http.lua, on wb.httpd; stops by itself after
-- --duration seconds (or at GET /quit). Endpoints:
--   /echo                 -> JSON {method, path, query, body, headers}
--   /stream?n=N&gap_ms=G  -> N pieces "piece i\n", G ms apart (chunked)
--   /status/NNN           -> that status, with Retry-After: 1 on 429/503
--   /never                -> no answer until the server stops
local port_file, duration = arg[1], tonumber(arg[2] or "30")
local srv <close> = wb.httpd.new{ host = "127.0.0.1", port = 0, max_body = 64 * 1024 }
local f = assert(io.open(port_file .. ".tmp", "w")); f:write(srv:port(), "\n"); f:close()
assert(os.rename(port_file .. ".tmp", port_file))
local streams, held = {}, {}
local t_end = wb.clock_ms() + duration * 1000
while wb.clock_ms() < t_end do
  for _, req in ipairs(srv:poll(#streams > 0 and 2 or 50)) do
    local p = req.path
    if p == "/echo" then
      req:respond(200, { ["Content-Type"] = "application/json" }, wb.json.encode{ method = req.method,
        path = p, query = req.query, body = req.body, body_len = #req.body, headers = req.headers })
    elseif p == "/stream" then
      req:start(200, { ["Content-Type"] = "text/plain" })
      streams[#streams + 1] = { req = req, n = tonumber(req.query.n or "3"), gap = tonumber(req.query.gap_ms or "0"),
        i = 0, next = 0 }
    elseif p:match("^/status/%d+$") then
      local code = tonumber(p:match("%d+"))
      req:respond(code, { ["Retry-After"] = "1", ["Content-Type"] = "application/json" }, '{"error":"status ' .. code .. '"}')
    elseif p == "/never" then
      held[#held + 1] = req
    elseif p == "/bad/chat/completions" then
      req:start(200, { ["Content-Type"] = "text/event-stream" })
      req:write('data: {"choices":[{"delta":{"content":"ok"}}]}\n\ndata: {not json\n\n'); req:finish()
    elseif p == "/s503/chat/completions" then
      req:respond(503, { ["Content-Type"] = "application/json" }, '{"error":{"message":"overloaded"}}')
    elseif p == "/quit" then
      req:respond(200, {}, "bye"); t_end = 0
    else
      req:respond(404, {}, "not found")
    end
  end
  local now = wb.clock_ms()
  for k = #streams, 1, -1 do
    local s = streams[k]
    if s.req:closed() then table.remove(streams, k)
    elseif now >= s.next then
      s.i = s.i + 1
      s.req:write(("piece %d\n"):format(s.i))
      s.next = now + s.gap
      if s.i >= s.n then s.req:finish(); table.remove(streams, k) end
    end
  end
end
