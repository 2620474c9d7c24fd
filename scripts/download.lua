-- download.lua - fetch a Hugging Face model repository into a directory that wb.load / -m reads.
--
--   workbench scripts/download.lua Qwen/Qwen2.5-0.5B-Instruct --revision 7ae557604adf67be50417f59c2c2f167def9a775
--   workbench scripts/download.lua ORG/NAME --dir models/name --include '*.json' --include '*.safetensors'
--
-- The file list comes from the Hub's public API, GET {endpoint}/api/models/{repo}/revision/{rev}
-- ?blobs=true (`siblings[].rfilename`, `size`, and for LFS files `lfs.sha256`/`lfs.size`); each
-- file from {endpoint}/{repo}/resolve/{commit}/{file}, following redirects. HF_ENDPOINT selects a
-- mirror; HF_TOKEN is sent as a Bearer token (gated or private repositories) and never printed.
-- Files go to DIR/.partial/FILE first; a dropped connection is resumed with a Range request
-- (bounded retries); every file's size and every LFS file's sha256 are checked, then the file is
-- fsynced and renamed into place. A file that fails the check is deleted and fetched once more,
-- then reported. Nothing here runs unless this script is started by hand. docs/download.md.
local wb = require("wb")
local cli = require("wb.cli")
local http = wb.http

local SCRIPT = "scripts/download.lua"
local DEFAULT_ENDPOINT = "https://huggingface.co"
local o = cli.parse(arg, SCRIPT, {
  { "revision", "string", "main", "branch, tag or commit sha" },
  { "dir", "string", nil, "target directory (default $WB_OUT/models/ORG--NAME)" },
  { "include", "string", nil, "only files matching this glob (* matches across /)", many = true },
  { "retries", "count", 5, "resumed attempts per file after a dropped connection", 0 },
  { "quiet", "flag", nil, "no progress output" },
}, { about = "download a Hugging Face model repository (HF_ENDPOINT, HF_TOKEN)", args = "REPO",
     min_args = 1, max_args = 1 })

local function die(msg)
  io.stderr:write("download: ", msg, "\n")
  os.exit(1)
end

local repo = o.args[1]
if not (repo:match("^[%w][%w._-]*/[%w][%w._-]*$") or repo:match("^[%w][%w._-]*$")) or repo:find("%.%.") then
  die(("'%s' is not a repository name (ORG/NAME)"):format(repo))
end
local revision = o.revision
if revision == "" or revision:find("[%c%s]") or revision:find("%.%.") then
  die(("--revision '%s' is not a branch, tag or commit"):format(revision))
end
local endpoint = (os.getenv("HF_ENDPOINT") or ""):gsub("/+$", "")
if endpoint == "" then endpoint = DEFAULT_ENDPOINT end
local token = os.getenv("HF_TOKEN")
if token == "" then token = nil end
local dir = o.dir or ((os.getenv("WB_OUT") or "wb-out") .. "/models/" .. repo:gsub("/", "--"))

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function mkdir_p(d)
  if not os.execute("mkdir -p " .. shell_quote(d)) then die(d .. ": cannot create the directory") end
end

local function auth_headers(extra)
  local h = extra or {}
  if token then h["Authorization"] = "Bearer " .. token end
  return h
end

-- A message for an HTTP failure of the API or a file, naming what to do.
local function http_problem(what, r)
  local code = r.headers and r.headers["x-error-code"]
  local hint = ""
  if r.status == 404 or code == "RepoNotFound" or code == "RevisionNotFound" or code == "EntryNotFound" then
    if code == "RevisionNotFound" then
      return ("%s: revision '%s' not found in %s (%d)"):format(what, revision, repo, r.status)
    elseif code == "EntryNotFound" then
      return ("%s: not found at revision '%s' (%d)"):format(what, revision, r.status)
    end
    hint = token and " (check the name; HF_TOKEN was sent)" or
      " (check the name; a private repository needs HF_TOKEN)"
    return ("%s: repository '%s' not found at %s%s (%d)"):format(what, repo, endpoint, hint, r.status)
  elseif r.status == 401 or r.status == 403 then
    if token then
      return ("%s: %d, access refused with the HF_TOKEN given: request access to the gated repository " ..
        "'%s' or use a token that has it"):format(what, r.status, repo)
    end
    return ("%s: %d, '%s' is gated or private: set HF_TOKEN to an access token that has access"):format(
      what, r.status, repo)
  end
  return ("%s: HTTP %d from %s"):format(what, r.status, endpoint)
end

-- The file list ------------------------------------------------------------------------------
local api_url = ("%s/api/models/%s/revision/%s?blobs=true"):format(endpoint, repo, http.escape(revision))
local r, msg = http.request{ url = api_url, headers = auth_headers(), timeout_ms = 60000,
  connect_timeout_ms = 15000, max_bytes = 64 << 20 }
if not r then die(("file list of %s: %s"):format(repo, msg)) end
if r.status ~= 200 then die(http_problem("file list of " .. repo, r)) end
local ok, info = pcall(wb.json.decode, r.body)
if not ok or type(info) ~= "table" or type(info.siblings) ~= "table" then
  die(("file list of %s: the answer from %s has no 'siblings' list"):format(repo, endpoint))
end
-- Resolve files at the commit the list describes, so a branch that moves meanwhile cannot mix files.
local commit = type(info.sha) == "string" and info.sha:match("^%x+$") and info.sha or revision

local function glob_to_pattern(g)
  if g:sub(-1) == "/" then g = g .. "*" end
  local out = { "^" }
  local i = 1
  while i <= #g do
    local c = g:sub(i, i)
    if c == "*" then out[#out + 1] = ".*"
    elseif c == "?" then out[#out + 1] = "."
    elseif c == "[" and g:find("]", i + 1, true) then
      local j = g:find("]", i + 1, true)
      local body = g:sub(i + 1, j - 1):gsub("^!", "^"):gsub("%%", "%%%%")
      out[#out + 1] = "[" .. body .. "]"
      i = j
    elseif c:match("%p") then out[#out + 1] = "%" .. c
    else out[#out + 1] = c end
    i = i + 1
  end
  return table.concat(out) .. "$"
end
local patterns = {}
for _, g in ipairs(o.include or {}) do patterns[#patterns + 1] = glob_to_pattern(g) end
local function wanted(name)
  if #patterns == 0 then return true end
  for _, p in ipairs(patterns) do if name:match(p) then return true end end
  return false
end

-- A name from the server becomes a path under DIR: refuse anything that could leave it.
local function safe_name(n)
  if type(n) ~= "string" or n == "" or #n > 1024 or n:find("%c") or n:sub(1, 1) == "/" or n:find("\\", 1, true) then
    return false
  end
  for seg in (n .. "/"):gmatch("([^/]*)/") do
    if seg == "" or seg == "." or seg == ".." then return false end
  end
  return n:sub(1, 8) ~= ".partial"
end

local files = {}
for i, s in ipairs(info.siblings) do
  local name = type(s) == "table" and s.rfilename
  if not safe_name(name) then
    die(("file list of %s: siblings[%d].rfilename %q is not a safe relative path"):format(repo, i, tostring(name)))
  end
  if wanted(name) then
    local lfs = type(s.lfs) == "table" and s.lfs or nil
    local sha = lfs and lfs.sha256
    if lfs and (type(sha) ~= "string" or not sha:match("^%x+$") or #sha ~= 64) then
      die(("file list of %s: %s has an lfs entry without a sha256"):format(repo, name))
    end
    local size = lfs and lfs.size or s.size
    if size ~= nil and (math.type(size) ~= "integer" or size < 0) then
      die(("file list of %s: %s has a bad size %s"):format(repo, name, tostring(size)))
    end
    files[#files + 1] = { name = name, size = size, sha256 = sha and sha:lower() }
  end
end
if #files == 0 then
  die(("%s at '%s': no file matches %s"):format(repo, revision,
    #patterns > 0 and ("--include " .. table.concat(o.include, ", ")) or "(the repository is empty)"))
end

-- Transfers -----------------------------------------------------------------------------------
local tty = not o.quiet and os.execute("test -t 2") == true
local function fmt_bytes(n)
  if n >= 1 << 30 then return ("%.2f GB"):format(n / (1 << 30)) end
  if n >= 1 << 20 then return ("%.1f MB"):format(n / (1 << 20)) end
  return ("%.0f kB"):format(n / 1024)
end
local function note(s) if not o.quiet then io.stderr:write(s, "\n") end end
local last_draw = 0
local function progress(f, have, final)
  if not tty then return end
  local now = wb.clock_ms()
  if not final and now - last_draw < 100 then return end
  last_draw = now
  local bar, width = "", 30
  if f.size and f.size > 0 then
    local k = math.min(width, math.floor(width * have / f.size))
    bar = "[" .. ("#"):rep(k) .. ("."):rep(width - k) .. "] " .. ("%3d%%"):format(math.floor(100 * have / f.size))
  end
  io.stderr:write(("\r%-40s %s %s%s"):format(f.name:sub(-40), bar, fmt_bytes(have), final and "\n" or ""))
  io.stderr:flush()
end

local function file_size(path)
  local fh = io.open(path, "rb")
  if not fh then return 0 end
  local n = fh:seek("end"); fh:close()
  return n or 0
end

local function sleep_ms(ms) os.execute(("sleep %.3f"):format(ms / 1000)) end

-- Fetch f into part (resuming what is there). Returns true, or nil and a message; fatal is true
-- when retrying cannot help (401/403/404).
local function transfer(f, part)
  local url = ("%s/%s/resolve/%s/%s"):format(endpoint, repo, http.escape(commit),
    (f.name:gsub("[^/]+", http.escape)))
  local have = file_size(part)
  if f.size and have > f.size then os.remove(part); have = 0 end
  if f.size and have == f.size then return true end
  local last = "no attempt"
  for attempt = 0, o.retries do
    if attempt > 0 then
      note(("%s: %s; resuming at byte %d (attempt %d of %d)"):format(f.name, last, have, attempt, o.retries))
      sleep_ms(math.min(200 * attempt, 2000))
    end
    local headers = auth_headers(have > 0 and { Range = ("bytes=%d-"):format(have) } or {})
    local s, m = http.request{ url = url, headers = headers, stream = true, connect_timeout_ms = 15000,
      idle_timeout_ms = 60000 }
    if not s then
      last = m
    elseif s.status == 401 or s.status == 403 or s.status == 404 then
      local problem = http_problem(f.name, s)
      s:close()
      return nil, problem, true
    elseif s.status == 416 and f.size and have == f.size then
      s:close()
      return true
    elseif s.status ~= 200 and s.status ~= 206 then
      last = ("HTTP %d"):format(s.status)
      if s.status == 416 then os.remove(part); have = 0 end
      s:close()
    else
      local mode = "ab"
      if s.status == 200 then mode, have = "wb", 0 -- the server sent the whole file
      else
        local start = tonumber((s.headers["content-range"] or ""):match("^bytes (%d+)%-"))
        if start ~= have then mode, have = "wb", 0; last = "a 206 answer for the wrong range" end
      end
      if mode == "wb" and s.status == 206 then
        s:close() -- restart from byte 0 on the next attempt
      else
        local fh, err = io.open(part, mode)
        if not fh then s:close(); return nil, part .. ": " .. tostring(err), true end
        local done = false
        while true do
          local piece, rm = s:read()
          if piece == nil then
            if rm then last = rm else done = true end
            break
          end
          local okw, werr = fh:write(piece)
          if not okw then fh:close(); s:close(); return nil, part .. ": write failed: " .. tostring(werr), true end
          have = have + #piece
          if f.size and have > f.size then last = "more bytes than the file list says"; break end
          progress(f, have)
        end
        s:close()
        local okc, cerr = fh:close()
        if not okc then return nil, part .. ": close failed: " .. tostring(cerr), true end
        if done and (not f.size or have == f.size) then
          progress(f, have, true)
          return true
        end
        if done then last = ("the connection ended at byte %d of %d"):format(have, f.size) end
        if f.size and have > f.size then os.remove(part); have = 0 end
      end
    end
  end
  return nil, ("%s: download failed after %d attempts: %s"):format(f.name, o.retries + 1, last)
end

-- Size and sha256 of what arrived; the file is read in 1 MB pieces.
local function check(f, part)
  local size = file_size(part)
  if f.size and size ~= f.size then
    return nil, ("size %d, the file list says %d"):format(size, f.size)
  end
  if f.sha256 then
    local h <close> = wb.sha256()
    local fh = assert(io.open(part, "rb"))
    while true do
      local b = fh:read(1 << 20)
      if not b then break end
      h:update(b)
    end
    fh:close()
    local got = h:hex()
    if got ~= f.sha256 then return nil, ("sha256 %s, the file list says %s"):format(got, f.sha256) end
  end
  return true
end

mkdir_p(dir .. "/.partial")
note(("%s at %s (%s): %d file%s into %s"):format(repo, revision, commit:sub(1, 12), #files,
  #files == 1 and "" or "s", dir))
local failures = {}
for _, f in ipairs(files) do
  local final, part = dir .. "/" .. f.name, dir .. "/.partial/" .. f.name
  local sub = f.name:match("^(.*)/[^/]+$")
  if sub then mkdir_p(dir .. "/" .. sub); mkdir_p(dir .. "/.partial/" .. sub) end
  local placed, problem = false, nil
  for round = 1, 2 do -- a file that fails its check is deleted and fetched once more
    local okt, m, fatal = transfer(f, part)
    if not okt then
      problem = m
      if fatal then break end
      break
    end
    local okc, why = check(f, part)
    if okc then
      wb.fsync(part)
      local okr, rerr = os.rename(part, final)
      if not okr then problem = ("%s: cannot move into place: %s"):format(final, tostring(rerr)); break end
      wb.fsync(sub and (dir .. "/" .. sub) or dir)
      placed = true
      break
    end
    os.remove(part)
    problem = ("%s: corrupted download (%s); deleted"):format(f.name, why)
    note(problem .. (round == 1 and ", fetching it again" or ""))
  end
  if not placed then failures[#failures + 1] = problem end
  if not placed and problem and problem:find("HF_TOKEN") then break end
end
os.remove(dir .. "/.partial") -- only when empty (the partial files of failures stay for a resume)
if #failures > 0 then
  for _, m in ipairs(failures) do io.stderr:write("download: ", m, "\n") end
  os.exit(1)
end
print(dir)
