-- wb.cost: prices from presets/pricing.lua, the cost and latency of a call with thinking tokens,
-- break-even, token counting; the reasoning scripts' no-key path and their labels.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local cost = require("wb.cost")
local presets = require("wb.presets")

local build = os.getenv("WB_BUILD_DIR")
local exe = build and (build .. "/workbench") or arg[-1]
local tmp = T.tmpdir()
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs with a clean provider environment so the no-key path is the one taken.
local function run(args, env)
  local cmd = ("env -u GROQ_API_KEY -u GEMINI_API_KEY -u OLLAMA_HOST %s %s %s 2>%s"):format(
    env or "", q(exe), args, q(tmp .. "/err"))
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, T.read_file(tmp .. "/err"), code
end

local pricing = presets.load_data(presets.shipped_dir() .. "/pricing.lua")

T.test("pricing rows hold the stated list prices, each with a source and a date", function()
  local r = cost.price(pricing, "groq", "openai/gpt-oss-120b")
  T.eq(r.input, 0.15); T.eq(r.cached, 0.075); T.eq(r.output, 0.60)
  T.eq(cost.price(pricing, "gemini", "gemini-2.5-pro").output, 10.00)
  T.eq(cost.price(pricing, "ollama", "llama3.2").output, 0) -- the "*" row
  for prov, rows in pairs(pricing) do
    for model, row in pairs(rows) do
      T.check(type(row.source) == "string" and row.source ~= "", prov .. "/" .. model .. " has no source")
      T.check(type(row.as_of) == "string" and row.as_of ~= "", prov .. "/" .. model .. " has no date")
    end
  end
  T.checkerror("no price for groq/gpt-5", cost.price, pricing, "groq", "gpt-5")
  T.checkerror("no provider \"openai\"", cost.price, pricing, "openai", "x")
end)

T.test("call cost by hand: 1000 in, 2000 cached, 500 thinking, 100 out on gpt-oss-120b", function()
  local row = cost.price(pricing, "groq", "openai/gpt-oss-120b")
  -- 1000 * 0.15 + 2000 * 0.075 + (500 + 100) * 0.60 = 150 + 150 + 360 = 660 per million
  local usd, parts = cost.call_cost(row, { input = 1000, cached = 2000, thinking = 500, output = 100 })
  T.near(usd, 0.00066, 1e-12)
  T.near(parts.input, 0.00015, 1e-12)
  T.near(parts.cached, 0.00015, 1e-12)
  T.near(parts.output, 0.00036, 1e-12)
  T.eq(parts.cached_at_input_price, false)
  -- Per 1,000 tickets a day: 0.66 USD.
  T.near(usd * 1000, 0.66, 1e-9)
end)

T.test("thinking tokens are billed at the output price", function()
  local row = cost.price(pricing, "gemini", "gemini-2.5-flash")
  local a = cost.call_cost(row, { input = 100, output = 50 })
  local b = cost.call_cost(row, { input = 100, thinking = 1000, output = 50 })
  T.near(b - a, 1000 * 2.50 / 1e6, 1e-12)
end)

T.test("without a cached price, cached tokens cost the input price and the result says so", function()
  local row = cost.price(pricing, "groq", "llama-3.1-8b-instant")
  local usd, parts = cost.call_cost(row, { cached = 1000 })
  T.near(usd, 0.00005, 1e-12)
  T.eq(parts.cached_at_input_price, true)
  T.checkerror("unknown key 'outputs'", cost.call_cost, row, { outputs = 3 })
  T.checkerror("'input' must be a token count", cost.call_cost, row, { input = -1 })
end)

T.test("latency by hand: thinking lands in TTFT, visible tokens after it", function()
  local link = { network_ms = 100, prefill_ms_per_1k = 20, itl_ms = 2 }
  local l = cost.latency(link, { input = 1500, cached = 500, thinking = 300, output = 50 })
  T.near(l.prefill, 40, 1e-9)      -- 2000 prompt tokens * 20 ms / 1000
  T.near(l.thinking, 600, 1e-9)    -- 300 * 2 ms
  T.near(l.ttft, 740, 1e-9)        -- 100 + 40 + 600
  T.near(l.total, 840, 1e-9)       -- + 50 * 2 ms
  local none = cost.latency(link, { input = 1500, cached = 500, output = 50 })
  T.near(none.ttft, 140, 1e-9)
  T.near(l.total - l.ttft, none.total - none.ttft, 1e-9) -- the visible part does not change
  T.checkerror("unknown key 'itl'", cost.latency, { itl = 1 }, {})
end)

T.test("effort levels scale with difficulty; break-even is extra cost over accuracy gain", function()
  local levels = { low = { median = 150, p90 = 400 } }
  T.eq(cost.thinking_tokens(levels, "low", 0.5), 75)
  T.eq(cost.thinking_tokens(levels, "low", 2, "p90"), 800)
  T.checkerror("no effort level \"max\"", cost.thinking_tokens, levels, "max", 1)
  -- 0.003 - 0.001 = 0.002 USD more per call, 5 points more accuracy: pays when a correct answer
  -- is worth more than 0.002 / 0.05 = 0.04 USD.
  T.near(cost.break_even(0.001, 0.003, 0.05), 0.04, 1e-12)
  T.eq(cost.break_even(0.001, 0.003, 0), math.huge)
end)

T.test("the effort data file lists the four levels with increasing budgets", function()
  local e = presets.load_data(presets.shipped_dir() .. "/effort.lua")
  local prev = -1
  for _, name in ipairs({ "none", "low", "medium", "high" }) do
    T.check(e.levels[name].median > prev, name)
    prev = e.levels[name].median
  end
  T.eq(#e.tasks, 3)
end)

T.test("token counts are labelled: a tokenizer file, or an estimate", function()
  local est = cost.counter(nil)
  T.eq(est.estimated, true)
  T.check(est.label:find("ESTIMATE", 1, true), est.label)
  T.eq(est.count("abcdefgh"), 2)
  T.write_file(tmp .. "/text", T.TEXT)
  local wb = require("wb")
  local tok = wb.bpe_train(T.TEXT:rep(2), { vocab_size = 300, special_tokens = { "<|endoftext|>" } })
  tok:save(tmp .. "/tokenizer.json")
  local c = cost.counter(tmp .. "/tokenizer.json")
  T.eq(c.estimated, false)
  T.eq(c.count("Hello world"), #tok:encode("Hello world"))
  T.check(c.label:find(tmp .. "/tokenizer.json", 1, true), c.label)
end)

T.test("reasoning_cost.lua prints the table per task and level, labels estimates, writes the SVG", function()
  local svg = tmp .. "/cost.svg"
  local out, err, code = run(("scripts/reasoning_cost.lua --gain 0.05 --svg %s"):format(q(svg)))
  T.eq(code, 0, err)
  for _, s in ipairs({ "triage", "reply draft", "hard escalation", "none", "high", "ESTIMATE", "break-even" }) do
    T.check(out:find(s, 1, true), "missing " .. s .. " in:\n" .. out)
  end
  T.check(T.read_file(svg):find("<svg", 1, true), "no svg written")
end)

T.test("the harness without a key names the variable and exits 2", function()
  local out, err, code = run("scripts/reasoning_harness.lua --provider groq")
  T.eq(code, 2)
  T.check(err:find("GROQ_API_KEY", 1, true), err)
  local _, err2, code2 = run("scripts/reasoning_harness.lua --provider gemini")
  T.eq(code2, 2)
  T.check(err2:find("GEMINI_API_KEY", 1, true), err2)
  local _, err3, code3 = run("scripts/reasoning_harness.lua --provider ollama")
  T.eq(code3, 2)
  T.check(err3:find("OLLAMA_HOST", 1, true), err3)
  T.eq(out, "")
end)

T.test("stream_hosted.lua prints the request and names the missing key", function()
  local out, err, code = run("scripts/stream_hosted.lua --provider gemini")
  T.eq(code, 2)
  T.check(out:find("generationConfig", 1, true), out)
  T.check(err:find("GEMINI_API_KEY", 1, true), err)
end)

T.test("the harness on a local model labels its thinking as simulated", function()
  local dir = T.tmpdir()
  T.make_tiny_model(dir, { n_ctx = 64 })
  local json = tmp .. "/h.json"
  local out, err, code = run(("scripts/reasoning_harness.lua --provider tinylm --tickets 2 --out %s"):format(q(json)),
    "WB_MODEL=" .. q(dir))
  T.eq(code, 0, err)
  T.check(out:find("SIMULATED", 1, true), out)
  local wb = require("wb")
  local doc = wb.json.decode(T.read_file(json))
  T.eq(doc.simulated_thinking, true)
  T.eq(#doc.runs, 2 * 2 * 4) -- training and held-out tickets, four levels each
  for _, r in ipairs(doc.runs) do
    T.check(r.ttft_ms >= 0 and r.total_ms >= r.ttft_ms, "timings")
    T.eq(r.thinking_tokens_simulated ~= nil, true)
  end
  T.rmdir(dir)
end)

T.done()
