-- wb.providers.stream_chat / chat against `workbench serve` (all three wire formats) and against
-- a loopback test server (a malformed chunk, 503), plus the error messages a user sees.
local H = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local providers = require("wb.providers")

local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"
local dir = os.tmpname(); os.remove(dir); assert(os.execute("mkdir -p " .. dir))

local pids = {}
local function start(cmd, name)
  local pf = dir .. "/" .. name
  assert(os.execute(("%s %s >/dev/null 2>&1 & echo $! > %s.pid"):format(exe, (cmd:gsub("PORTFILE", pf)), pf)))
  pids[#pids + 1] = pf .. ".pid"
  local t0 = wb.clock_ms()
  while true do
    local f = io.open(pf)
    if f then local p = tonumber(f:read("l")); f:close(); if p then return p end end
    assert(wb.clock_ms() - t0 < 15000, name .. " did not start")
    os.execute("sleep 0.05")
  end
end
local port = start("scripts/serve.lua --port 0 --port-file PORTFILE --duration 60", "serve")
local keyed = start("scripts/serve.lua --port 0 --port-file PORTFILE --duration 60 --api-key sk-live-test-9", "keyed")
local busy = start("scripts/serve.lua --port 0 --port-file PORTFILE --duration 60 --max-queue 0", "busy")
local mock = start("tests/lua/http_test_server.lua PORTFILE 60", "mock")
local base = "http://127.0.0.1:" .. port

local preset = { name = "t", temperature = 0.8, top_p = 0.95, max_tokens = 16, seed = 5 }
local msgs = { { role = "user", content = "Ticket: I was charged twice" } }

for _, case in ipairs{
  { "groq", { base_url = base .. "/openai/v1" } },
  { "openai", { base_url = base .. "/v1" } },
  { "gemini", { base_url = base } },
  { "ollama", { host = "127.0.0.1:" .. port } },
} do
  local provider, o = case[1], case[2]
  H.test(provider .. ": streamed pieces, usage-based token count and stats; same text twice for a seed", function()
    o.model = "tinylm-base"
    local s <close> = providers.stream_chat(provider, preset, msgs, o)
    local parts = {}
    for piece in s do parts[#parts + 1] = piece end
    local st = s:stats()
    H.eq(st.status, 200)
    H.check(#parts >= 2, "pieces: " .. #parts)
    H.eq(st.chunks, #parts)
    H.eq(st.output_tokens_source, "usage")
    H.check(st.output_tokens >= 1 and st.output_tokens <= 16, "output_tokens " .. tostring(st.output_tokens))
    H.check(st.ttft_ms > 0 and st.total_ms >= st.ttft_ms, "timings")
    H.check(type(st.finish_reason) == "string", "finish_reason")
    local text, st2 = providers.chat(provider, preset, msgs, o)
    H.eq(text, table.concat(parts), "seeded text")
    H.eq(st2.output_tokens, st.output_tokens)
  end)
end

H.test("errors name the provider and what to do", function()
  local e = H.checkerror("model 'nope' or the endpoint was not found", providers.chat, "groq", preset, msgs,
    { base_url = base .. "/v1", model = "nope" })
  H.check(e:find("^groq: HTTP 404"), e)
  e = H.checkerror("connect", providers.chat, "ollama", preset, msgs, { host = "127.0.0.1:1", model = "m" })
  H.check(e:find("^ollama:") and e:find("is the server running"), e)
  -- the key is read from the variable, rejected, and never shown
  local old = os.getenv("OPENAI_API_KEY")
  e = H.checkerror("HTTP 401", providers.chat, "openai", preset, msgs,
    { base_url = ("http://127.0.0.1:%d/v1"):format(keyed), model = "tinylm-base", api_key_env = "WB_TEST_NO_SUCH_KEY" })
  H.check(e:find("needs an API key: set WB_TEST_NO_SUCH_KEY"), e)
  H.check(old == nil or not e:find(old, 1, true), "key leaked")
  e = H.checkerror("set WB_TEST_NO_SUCH_KEY2 to your API key to call groq (nothing was sent)", providers.stream_chat, "groq", preset, msgs, { model = "x", api_key_env = "WB_TEST_NO_SUCH_KEY2" })
  e = H.checkerror("malformed stream chunk at byte", providers.chat, "openai", preset, msgs,
    { base_url = ("http://127.0.0.1:%d/bad"):format(mock), model = "m" })
  H.check(e:find("at byte 48:", 1, true), e) -- the second event starts after 46 + 2 bytes
  e = H.checkerror("HTTP 503", providers.chat, "openai", preset, msgs,
    { base_url = ("http://127.0.0.1:%d/s503"):format(mock), model = "m", max_retries = 1, max_retry_wait_s = 0.05 })
  H.check(e:find("try again later") and e:find("overloaded"), e)
end)

H.test("429 is retried after Retry-After, a bounded number of times", function()
  local t = wb.clock_ms()
  local e = H.checkerror("HTTP 429", providers.chat, "openai", preset, msgs,
    { base_url = ("http://127.0.0.1:%d/v1"):format(busy), model = "tinylm-base", max_retries = 2, max_retry_wait_s = 0.1 })
  H.check(e:find("after 2 retries"), e)
  H.check(wb.clock_ms() - t >= 190, "waited between retries")
end)

H.test("stream_hosted.lua streams from workbench serve as Ollama and as OpenAI, and measures", function()
  for _, env in ipairs{ ("LLM_PROVIDER=ollama OLLAMA_HOST=127.0.0.1:%d"):format(port), "LLM_PROVIDER=openai" } do
    local extra = env:find("openai") and (" --base-url http://127.0.0.1:%d/v1"):format(port) or ""
    local p = io.popen(("%s %s scripts/stream_hosted.lua --model tinylm-base%s 2>&1; echo \"exit=$?\""):format(env, exe, extra))
    local out = p:read("a"); p:close()
    H.check(out:find("exit=0", 1, true), out)
    H.check(out:find("TTFT", 1, true) and out:find("chunks", 1, true) and out:find("(usage)", 1, true), out)
    H.check(out:find("tokens per chunk", 1, true) or out:find("carried one token", 1, true), out)
  end
end)

H.test("presets.lua --send sends the translated request to each provider", function()
  local p = io.popen(("%s scripts/presets.lua triage 'Ticket: I was charged twice' --no-local --send --model tinylm-base --base-url http://127.0.0.1:%d 2>&1; echo \"exit=$?\""):format(exe, port))
  local out = p:read("a"); p:close()
  H.check(out:find("exit=0", 1, true), out)
  local n = 0
  for _ in out:gmatch("HTTP 200, finish") do n = n + 1 end
  H.eq(n, 3, "three replies")
end)

H.test("reasoning_harness.lua runs its levels live against workbench serve", function()
  local out_json = dir .. "/rh.json"
  local p = io.popen(("%s scripts/reasoning_harness.lua --provider ollama --model tinylm-base --tickets 2 --base-url http://127.0.0.1:%d --output %s 2>&1; echo \"exit=$?\""):format(exe, port, out_json))
  local out = p:read("a"); p:close()
  H.check(out:find("exit=0", 1, true), out)
  local f = assert(io.open(out_json)); local doc = wb.json.decode(f:read("a")); f:close()
  H.eq(doc.simulated_thinking, false)
  H.eq(#doc.runs, 2 * 4)
  for _, r in ipairs(doc.runs) do H.check(r.ttft_ms > 0 and r.visible_tokens > 0 and r.tokens_source == "usage", "run") end
end)

H.test("options are checked", function()
  H.checkerror("unknown option 'modle'", providers.stream_chat, "groq", preset, msgs, { modle = "x" })
  H.checkerror("unknown provider", providers.stream_chat, "nobody", preset, msgs, {})
end)

-- TERM, not INT: a job started with `&` by a non-interactive shell ignores SIGINT (and the host
-- leaves it ignored), so INT would leave the servers running until their --duration
for _, pf in ipairs(pids) do os.execute(("kill -TERM $(cat %s) 2>/dev/null"):format(pf)) end
wb.http.request{ url = ("http://127.0.0.1:%d/quit"):format(mock) }
os.execute("rm -rf " .. dir)
H.done()
