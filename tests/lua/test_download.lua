-- scripts/download.lua against a loopback mock of the Hub (tests/lua/hub_mock_server.lua), and
-- wb.sha256 against known vectors and coreutils' sha256sum.
local H = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local http = wb.http

local tmp = os.tmpname(); os.remove(tmp); assert(os.execute("mkdir -p " .. tmp))
local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"
local port_file = tmp .. "/port"
assert(os.execute(("%s tests/lua/hub_mock_server.lua %s 60 >/dev/null 2>&1 &"):format(exe, port_file)))
local t0, port = wb.clock_ms(), nil
while not port do
  local f = io.open(port_file)
  if f then port = tonumber(f:read("l")); f:close() end
  assert(wb.clock_ms() - t0 < 10000, "mock hub did not start")
  if not port then os.execute("sleep 0.05") end
end
local endpoint = "http://127.0.0.1:" .. port

-- Run the script; returns exit code, stdout+stderr.
local function download(args, env)
  local cmd = ("HF_ENDPOINT=%s %s %s scripts/download.lua %s 2>&1; echo \"rc=$?\""):format(
    endpoint, env or "env -u HF_TOKEN", exe, args)
  local p = assert(io.popen(cmd))
  local out = p:read("a"); p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, out:gsub("rc=%d+%s*$", "")
end
local function exists(path) local f = io.open(path, "rb"); if f then f:close() end; return f ~= nil end
local function log() return wb.json.decode(assert(http.request{ url = endpoint .. "/_log" }).body) end
local SRC = "models/tinylm-base"
local FILES = { "config.json", "tokenizer.json", "model.safetensors", "README.md", "summary.json" }
local function same_files(dir)
  for _, n in ipairs(FILES) do H.eq(wb.read_file(dir .. "/" .. n) == wb.read_file(SRC .. "/" .. n), true, n) end
end

H.test("wb.sha256 matches the FIPS vectors and sha256sum, in pieces or at once", function()
  H.eq(wb.sha256("abc"):hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  H.eq(wb.sha256():hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  local s = wb.read_file(SRC .. "/model.safetensors")
  local h <close> = wb.sha256()
  for i = 1, #s, 100003 do h:update(s:sub(i, i + 100002)) end
  local p = assert(io.popen("sha256sum " .. SRC .. "/model.safetensors"))
  local want = p:read("a"):match("^(%x+)"); p:close()
  H.eq(h:hex(), want)
  H.checkerror("already finished", function() h:update("x") end)
  H.checkerror("string expected", function() wb.sha256():update({}) end)
end)

H.test("a full download loads with wb.load and generates the shipped model's tokens", function()
  local dir = tmp .. "/tiny"
  local rc, out = download("test/tiny --dir " .. dir)
  H.eq(rc, 0, out)
  same_files(dir)
  H.eq(exists(dir .. "/.partial"), false, "the .partial folder is removed")
  local a, b = wb.load(dir), wb.load(SRC)
  local ga = a:generate("Customer (Ana): Hi,", { max_tokens = 12, temperature = 0 })
  local gb = b:generate("Customer (Ana): Hi,", { max_tokens = 12, temperature = 0 })
  H.eq(table.concat(ga.token_ids, ","), table.concat(gb.token_ids, ","))
  -- the LFS file came through the redirect; no token was sent
  local saw = false
  for _, e in ipairs(log()) do
    if e.path == "/cdn/test/tiny/model.safetensors" then saw = true end
    H.eq(e.auth, false)
  end
  H.eq(saw, true, "the resolve redirect was followed")
end)

H.test("--include keeps only matching files", function()
  local dir = tmp .. "/inc"
  local rc, out = download("test/tiny --dir " .. dir .. " --include '*.json'")
  H.eq(rc, 0, out)
  H.eq(exists(dir .. "/config.json"), true); H.eq(exists(dir .. "/tokenizer.json"), true)
  H.eq(exists(dir .. "/model.safetensors"), false); H.eq(exists(dir .. "/README.md"), false)
  rc, out = download("test/tiny --dir " .. dir .. " --include '*.bin'")
  H.eq(rc, 1); assert(out:find("no file matches"), out)
end)

H.test("a connection dropped mid-file is resumed with a Range request and verified", function()
  local dir = tmp .. "/drop"
  local rc, out = download("test/drop --dir " .. dir)
  H.eq(rc, 0, out)
  assert(out:find("resuming at byte"), out)
  same_files(dir)
  local ranges = {}
  for _, e in ipairs(log()) do
    if e.path == "/cdn/test/drop/model.safetensors" then ranges[#ranges + 1] = e.range or "none" end
  end
  H.eq(#ranges, 2, table.concat(ranges, " "))
  H.eq(ranges[1], "none")
  local start = tonumber(ranges[2]:match("^bytes=(%d+)%-$"))
  assert(start and start > 0, "the second request resumes: " .. ranges[2])
end)

H.test("a corrupted file is detected, deleted and fetched again", function()
  local dir = tmp .. "/c1"
  local rc, out = download("test/corrupt1 --dir " .. dir)
  H.eq(rc, 0, out)
  assert(out:find("model.safetensors: corrupted download %(sha256"), out)
  same_files(dir)
end)

H.test("a persistently corrupted file is reported by name and nothing is put in place", function()
  local dir = tmp .. "/c2"
  local rc, out = download("test/corrupt --dir " .. dir)
  H.eq(rc, 1, out)
  assert(out:find("download: model.safetensors: corrupted download"), out)
  H.eq(exists(dir .. "/model.safetensors"), false)
  H.eq(exists(dir .. "/.partial/model.safetensors"), false)
  H.eq(exists(dir .. "/config.json"), true, "the good files are still placed")
end)

H.test("a gated repository without a token names HF_TOKEN; with it, it downloads", function()
  local dir = tmp .. "/gated"
  local rc, out = download("test/gated --dir " .. dir)
  H.eq(rc, 1); assert(out:find("HF_TOKEN") and out:find("401") and out:find("gated"), out)
  rc, out = download("test/gated --dir " .. dir, "HF_TOKEN=hf_test_secret")
  H.eq(rc, 0, out)
  same_files(dir)
  assert(not out:find("hf_test_secret"), "the token is never printed")
  rc, out = download("test/gated --dir " .. dir .. "-x", "HF_TOKEN=hf_wrong_secret")
  H.eq(rc, 1); assert(out:find("HF_TOKEN") and not out:find("hf_wrong_secret"), out)
end)

H.test("an unknown repository, revision or argument gives a clear message", function()
  local rc, out = download("test/missing --dir " .. tmp .. "/m")
  H.eq(rc, 1); assert(out:find("repository 'test/missing' not found") and out:find("404"), out)
  rc, out = download("test/tiny --dir " .. tmp .. "/m --revision v9")
  H.eq(rc, 1); assert(out:find("revision 'v9' not found"), out)
  rc, out = download("'../etc' --dir " .. tmp .. "/m")
  H.eq(rc, 1); assert(out:find("not a repository name"), out)
  rc, out = download("test/tiny --bogus")
  H.eq(rc, 2); assert(out:find("unknown option"), out)
  rc, out = download("--help")
  H.eq(rc, 0); assert(out:find("HF_TOKEN"), out)
end)

http.request{ url = endpoint .. "/quit" }
os.execute("rm -rf " .. tmp)
H.done()
