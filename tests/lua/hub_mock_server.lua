-- A loopback stand-in for the Hugging Face Hub endpoints scripts/download.lua uses, for
-- tests/lua/test_download.lua; on wb.httpd, stops by itself after DURATION seconds or at /quit.
--   GET /api/models/{repo}/revision/{rev}[?blobs=true] -> {id, sha, siblings:[{rfilename, size, lfs}]}
--   GET /{repo}/resolve/{rev}/{file}  -> the file (LFS files through a 302 to /cdn/..., as the Hub
--                                        does), honouring "Range: bytes=N-" with 206
--   GET /_log                         -> JSON list of {path, range, auth} of every file request
-- Repositories (all serve models/tinylm-base; model.safetensors is the LFS file):
--   test/tiny      plain                      test/drop     cuts model.safetensors after 1 MB once
--   test/corrupt1  wrong bytes once, then right     test/corrupt  always wrong bytes
--   test/gated     401 (X-Error-Code: GatedRepo) unless "Authorization: Bearer hf_test_secret"
--   anything else  404 (X-Error-Code: RepoNotFound)
local port_file, duration = arg[1], tonumber(arg[2] or "60")
local SRC = "models/tinylm-base"
local NAMES = { "config.json", "tokenizer.json", "model.safetensors", "README.md", "summary.json" }
local LFS = { ["model.safetensors"] = true }
local COMMIT = "0123456789abcdef0123456789abcdef01234567"
local REPOS = { ["test/tiny"] = true, ["test/drop"] = true, ["test/corrupt1"] = true,
  ["test/corrupt"] = true, ["test/gated"] = true }

local data, siblings = {}, {}
for _, n in ipairs(NAMES) do
  data[n] = wb.read_file(SRC .. "/" .. n)
  local s = { rfilename = n, size = #data[n], blobId = ("%040x"):format(#data[n]) }
  if LFS[n] then s.lfs = { sha256 = wb.sha256(data[n]):hex(), size = #data[n], pointerSize = 134 } end
  siblings[#siblings + 1] = s
end

local srv <close> = wb.httpd.new{ host = "127.0.0.1", port = 0, max_body = 4096 }
local f = assert(io.open(port_file .. ".tmp", "w")); f:write(srv:port(), "\n"); f:close()
assert(os.rename(port_file .. ".tmp", port_file))

local log, count = {}, {}
local cuts = {} -- streams to cut: {req=, t=}
local json = { ["Content-Type"] = "application/json" }

local function refuse(req, repo)
  if not REPOS[repo] then
    req:respond(404, { ["Content-Type"] = "application/json", ["X-Error-Code"] = "RepoNotFound" },
      '{"error":"Repository not found"}')
    return true
  end
  if repo == "test/gated" and req.headers["authorization"] ~= "Bearer hf_test_secret" then
    req:respond(401, { ["Content-Type"] = "application/json", ["X-Error-Code"] = "GatedRepo" },
      '{"error":"Access to model test/gated is restricted. You must be authenticated to access it."}')
    return true
  end
  return false
end

local function serve_file(req, repo, name)
  local body = data[name]
  if not body then
    req:respond(404, { ["X-Error-Code"] = "EntryNotFound" }, '{"error":"Entry not found"}'); return
  end
  local key = repo .. "/" .. name
  count[key] = (count[key] or 0) + 1
  log[#log + 1] = { path = req.path, range = req.headers["range"] or false, auth = req.headers["authorization"] ~= nil }
  if name == "model.safetensors" and (repo == "test/corrupt" or (repo == "test/corrupt1" and count[key] == 1)) then
    local i = #body // 2
    body = body:sub(1, i - 1) .. string.char((body:byte(i) + 1) % 256) .. body:sub(i + 1)
  end
  local start = tonumber((req.headers["range"] or ""):match("^bytes=(%d+)%-$"))
  if name == "model.safetensors" and repo == "test/drop" and count[key] == 1 then
    req:start(200, { ["Content-Type"] = "application/octet-stream" })
    req:write(body:sub(1, 1 << 20))
    cuts[#cuts + 1] = { req = req, t = wb.clock_ms() + 200 }
  elseif start and start < #body then
    req:respond(206, { ["Content-Type"] = "application/octet-stream",
      ["Content-Range"] = ("bytes %d-%d/%d"):format(start, #body - 1, #body) }, body:sub(start + 1))
  elseif start then
    req:respond(416, { ["Content-Range"] = "bytes */" .. #body }, "")
  else
    req:respond(200, { ["Content-Type"] = "application/octet-stream", ["X-Repo-Commit"] = COMMIT,
      ["ETag"] = '"' .. (LFS[name] and wb.sha256(body):hex() or tostring(#body)) .. '"' }, body)
  end
end

local t_end = wb.clock_ms() + duration * 1000
while wb.clock_ms() < t_end do
  for _, req in ipairs(srv:poll(#cuts > 0 and 10 or 50)) do
    local p = req.path
    local repo, rev = p:match("^/api/models/([^/]+/[^/]+)/revision/([^/]+)$")
    local frepo, frev, fname = p:match("^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
    local crepo, cname = p:match("^/cdn/([^/]+/[^/]+)/(.+)$")
    if repo then
      if not refuse(req, repo) and rev ~= COMMIT and rev ~= "main" then
        req:respond(404, { ["X-Error-Code"] = "RevisionNotFound" }, '{"error":"Invalid rev id: ' .. rev .. '"}')
      elseif REPOS[repo] and not (repo == "test/gated" and req.headers["authorization"] ~= "Bearer hf_test_secret") then
        req:respond(200, json, wb.json.encode{ id = repo, sha = COMMIT, siblings = siblings })
      end
    elseif frepo then
      if not refuse(req, frepo) then
        if frev ~= COMMIT and frev ~= "main" then
          req:respond(404, { ["X-Error-Code"] = "RevisionNotFound" }, '{"error":"Invalid rev id"}')
        elseif LFS[fname] then
          req:respond(302, { Location = "/cdn/" .. frepo .. "/" .. fname }, "")
        else
          serve_file(req, frepo, fname)
        end
      end
    elseif crepo then
      serve_file(req, crepo, cname)
    elseif p == "/_log" then
      req:respond(200, json, wb.json.encode(log))
    elseif p == "/quit" then
      req:respond(200, {}, "bye"); t_end = 0
    else
      req:respond(404, {}, "not found")
    end
  end
  local now = wb.clock_ms()
  for k = #cuts, 1, -1 do
    if now >= cuts[k].t then cuts[k].req:abort(); table.remove(cuts, k) end
  end
end
