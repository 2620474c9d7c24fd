-- bench_serve.lua - the HTTP path against in-process batched decoding, in the same run.
--
--   workbench bench/bench_serve.lua [--clients 32] [--tokens 48] [--rounds 3]
--
-- Starts `workbench serve --max-batch N` on a free loopback port, checks that each of N seeded
-- requests streams exactly the text it gives alone, then runs N concurrent streaming clients
-- (different seeds, eos banned so every reply has --tokens tokens) `rounds` times and prints
-- aggregate tokens/s and TTFT p50/p99 beside model:generate_batch of the same N prompts and
-- length in this process. The server stops by itself (--duration) and at the end (Ctrl-C).
local stats = require("wb.stats")
local o = require("wb.cli").parse(arg, "bench/bench_serve.lua", {
  { "clients", "count", 32, "concurrent streaming clients (and the server's --max-batch)" },
  { "tokens", "count", 48, "tokens per reply" },
  { "rounds", "count", 3, "repetitions of the concurrent run" },
}, { about = "HTTP streaming throughput and TTFT against in-process batched decoding" })

local N, T = o.clients, o.tokens
local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"
local dir = os.tmpname(); os.remove(dir); assert(os.execute("mkdir -p " .. dir))
local pf = dir .. "/port"
assert(os.execute(("%s scripts/serve.lua --port 0 --port-file %s --max-batch %d --duration 600 >/dev/null 2>&1 & echo $! > %s.pid")
  :format(exe, pf, N, pf)))
local port
local t0 = wb.clock_ms()
while not port do
  local f = io.open(pf); if f then port = tonumber(f:read("l")); f:close() end
  assert(wb.clock_ms() - t0 < 15000, "server did not start")
  if not port then os.execute("sleep 0.05") end
end
local url = ("http://127.0.0.1:%d/v1/completions"):format(port)
local model = wb.load()
local eos = model.tokenizer.eos_id
local prompt = "Ticket: I was charged twice for my subscription"
local function body(seed, stream)
  return wb.json.encode{ model = "tinylm-base", prompt = prompt, max_tokens = T, seed = seed, temperature = 0.9,
    stream = stream, logit_bias = eos and { [tostring(eos)] = -100 } or nil }
end

-- each seed alone
local alone = {}
for i = 1, N do
  local r = assert(wb.http.request{ url = url, method = "POST", body = body(i, false) })
  assert(r.status == 200, r.body)
  alone[i] = wb.json.decode(r.body).choices[1].text
end

local function round()
  local streams, texts, ttft, t_start = {}, {}, {}, wb.clock_ms()
  for i = 1, N do
    streams[i] = { s = assert(wb.http.request{ url = url, method = "POST", body = body(i, true), stream = true }),
      buf = "", parts = {}, sent = wb.clock_ms() }
  end
  local live = N
  while live > 0 do
    for i, st in ipairs(streams) do
      if st.s then
        local p = st.s:read(0)
        if p == nil then st.s:close(); st.s = nil; live = live - 1
        elseif p ~= "" then
          st.buf = st.buf .. p
          for ev in st.buf:gmatch("data: (.-)\n\n") do
            if ev ~= "[DONE]" then
              local c = wb.json.decode(ev).choices[1]
              if c and c.text ~= "" then
                if not ttft[i] then ttft[i] = wb.clock_ms() - st.sent end
                st.parts[#st.parts + 1] = c.text
              end
            end
          end
          st.buf = st.buf:match(".*\n\n(.*)$") or st.buf
        end
      end
    end
  end
  local elapsed = wb.clock_ms() - t_start
  for i, st in ipairs(streams) do texts[i] = table.concat(st.parts) end
  return texts, ttft, elapsed
end

local same, tps, p50, p99 = true, {}, {}, {}
for _ = 1, o.rounds do
  local texts, ttft, elapsed = round()
  for i = 1, N do if texts[i] ~= alone[i] then same = false end end
  tps[#tps + 1] = N * T / (elapsed / 1000)
  p50[#p50 + 1] = stats.percentile(ttft, 50)
  p99[#p99 + 1] = stats.percentile(ttft, 99)
end

-- in-process batched decoding of the same batch
local prompts = {}
for i = 1, N do prompts[i] = prompt end
local batch = {}
for _ = 1, o.rounds do
  local r = model:generate_batch(prompts, { max_tokens = T, temperature = 0.9, seed = 1 }, { ignore_eos = true })
  batch[#batch + 1] = r.output_tokens_per_s
end
os.execute(("kill -INT $(cat %s.pid) 2>/dev/null; rm -rf %s"):format(pf, dir))

local f = io.open("/proc/loadavg"); local load = f and f:read("l") or "?"; if f then f:close() end
print(("clients %d, %d tokens each, %d rounds; load average %s"):format(N, T, o.rounds, load))
print(("every streamed reply equals its single-request text: %s"):format(same and "yes" or "NO"))
print(("HTTP streaming:   %s tok/s"):format(stats.format(tps, "%.0f")))
print(("  TTFT p50        %s ms"):format(stats.format(p50, "%.1f")))
print(("  TTFT p99        %s ms"):format(stats.format(p99, "%.1f")))
print(("in-process batch: %s tok/s (model:generate_batch, same N and length)"):format(stats.format(batch, "%.0f")))
print(("HTTP / in-process (medians): %.2f"):format(stats.median(tps) / stats.median(batch)))
if not same then os.exit(1) end
