-- scripts/generate.lua and scripts/bench.lua: the text equals the API's, options map to the
-- parameters they name, errors are one line with the right status; bench's tables are complete.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function run(args)
  local errpath = os.tmpname()
  local p = assert(io.popen(("%s %s 2>%s"):format(q(exe), args, q(errpath))))
  local out = p:read("a")
  local _, how, code = p:close()
  local err = T.read_file(errpath)
  os.remove(errpath)
  if how == "signal" then code = 128 + code end
  return out, err, code
end

local model = wb.load()
local PROMPT = "Customer (Ana): Hi,"

T.test("generate.lua prints the text model:generate gives for the same parameters", function()
  local params = { max_tokens = 20, temperature = 0.7, top_p = 0.9, top_k = 40, min_p = 0.02,
    repetition_penalty = 1.1, seed = 1 }
  local want = model:generate(PROMPT, params).text
  local out, err, code = run(("scripts/generate.lua -p %s -n 20 --temperature 0.7 --top-p 0.9 " ..
    "--top-k 40 --min-p 0.02 --repeat-penalty 1.1 --seed 1"):format(q(PROMPT)))
  T.eq(code, 0, err)
  T.eq(out, want .. "\n")
  T.check(err:find("generated 20 tokens", 1, true) and err:find("seed 1", 1, true), err)
  -- --stream: the same text, piece by piece; --quiet: nothing on stderr
  local out2, err2 = run(("scripts/generate.lua -p %s -n 20 --temperature 0.7 --top-p 0.9 --top-k 40 " ..
    "--min-p 0.02 --repeat-penalty 1.1 --seed 1 --stream --quiet"):format(q(PROMPT)))
  T.eq(out2, want .. "\n")
  T.eq(err2, "")
  -- a different seed gives a different reply here (20 tokens at T=0.7)
  local out3 = run(("scripts/generate.lua -p %s -n 20 --temperature 0.7 --seed 2 --quiet"):format(q(PROMPT)))
  T.eq(out3, model:generate(PROMPT, { max_tokens = 20, temperature = 0.7, seed = 2 }).text .. "\n")
end)

T.test("generate.lua --json is the whole result as one object; -f reads the prompt; --stop", function()
  local want = model:generate(PROMPT, { max_tokens = 12, temperature = 0, stop = { "\n" } })
  local path = os.tmpname()
  T.write_file(path, PROMPT)
  local out, err, code = run(("scripts/generate.lua -f %s -n 12 --temperature 0 --stop %s --json"):format(q(path), q("\n")))
  os.remove(path)
  T.eq(code, 0, err)
  local r = wb.json.decode(out)
  T.eq(r.text, want.text)
  T.same_list(r.token_ids, want.token_ids)
  T.eq(r.stop_reason, want.stop_reason)
  T.eq(want.stop_reason, "stop") -- the reply has a line break within 12 tokens
  T.eq(r.prompt, PROMPT)
  T.eq(r.params.max_tokens, 12)
  T.check(r.e2e_ms > 0 and r.prompt_tokens == #model.tokenizer:encode(PROMPT), out)
end)

T.test("generate.lua: bad options exit 2 naming them; runtime errors are one line with status 1", function()
  local _, err, code = run("scripts/generate.lua -p Hi --top-p 2")
  T.eq(code, 2)
  T.check(err:find("top_p = 2 is outside", 1, true), err)
  local _, err2, code2 = run("scripts/generate.lua")
  T.eq(code2, 2)
  T.check(err2:find("needs a prompt", 1, true), err2)
  local _, err3, code3 = run("scripts/generate.lua -p Hi -n x")
  T.eq(code3, 2)
  T.check(err3:find("-n needs an integer", 1, true), err3)
  local _, err4, code4 = run("scripts/generate.lua -p Hi --chat")
  T.eq(code4, 1)
  T.check(err4:find("has no chat template", 1, true) and not err4:find("traceback", 1, true), err4)
  T.eq(select(2, err4:gsub("\n", "")), 1)
end)

T.test("generate.lua --logprobs asks for logprobs/top_logprobs, or says the build lacks them", function()
  local supported = pcall(wb.sampling.check, { logprobs = true, top_logprobs = 3 })
  local out, err, code = run(("scripts/generate.lua -p %s -n 4 --temperature 0 --logprobs 3 --json"):format(q(PROMPT)))
  if supported then
    T.eq(code, 0, err)
    local r = wb.json.decode(out)
    T.eq(type(r.logprobs), "table")
    T.eq(#r.logprobs, #r.token_ids)
    T.eq(#r.logprobs[1].top, 3)
    local text = run(("scripts/generate.lua -p %s -n 4 --temperature 0 --logprobs 3 --quiet"):format(q(PROMPT)))
    local _, lines = text:gsub("\n +%d+ \"", "")
    T.eq(lines, 4, text)
  else
    T.eq(code, 2)
    T.check(err:find("--logprobs needs model:generate with logprobs/top_logprobs", 1, true), err)
  end
end)

T.test("bench.lua: every thread count and test in md, csv and json, with the machine in the header", function()
  local out, err, code = run("scripts/bench.lua -p 4,8 -n 4 -r 3 -t 1,2 --output json")
  T.eq(code, 0, err)
  local b = wb.json.decode(out)
  T.check(b.machine.cpu ~= "" and b.machine.cores >= 1 and b.machine.blas:find("BLAS"), out)
  T.eq(b.machine.parameters, model:num_parameters())
  T.eq(#b.machine.load_average, 4) -- before, and after each of the 3 rounds
  local seen = {}
  for _, r in ipairs(b.results) do
    seen[r.threads .. " " .. r.test] = true
    T.eq(#r.runs, 3)
    T.check(r.min > 0 and r.min <= r.median and r.median <= r.max, r.test)
  end
  for _, k in ipairs({ "1 pp4", "1 pp8", "1 tg4", "2 pp4", "2 pp8", "2 tg4" }) do T.check(seen[k], k) end
  T.eq(#b.results, 6)
  T.eq(b.machine.load_warning ~= nil, err:find("warning: load average", 1, true) ~= nil)
  local csv = run("scripts/bench.lua -p 4 -n 2 -r 1 -o csv")
  local lines = {}
  for l in csv:gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(#lines, 3)
  T.check(lines[1]:find("^model_type,parameters,cpu,cores,blas,threads,test"), csv)
  local md = run("scripts/bench.lua -p 4 -n 2 -r 1")
  T.check(md:find("BLAS: ", 1, true) and md:find("| threads | test |", 1, true) and md:find("tg2", 1, true), md)
  local _, err2, code2 = run("scripts/bench.lua -p 100000")
  T.eq(code2, 2)
  T.check(err2:find("does not fit the context", 1, true), err2)
  local _, _, code3 = run("scripts/bench.lua --output xml")
  T.eq(code3, 2)
end)

T.test("generate.lua --chat (and --system) renders through the model's chat template, as model:chat", function()
  local d = T.tmpdir()
  T.make_tiny_llama(d)
  local root = os.getenv("WB_SOURCE_DIR") or "."
  T.write_file(d .. "/tokenizer_config.json", T.read_file(root .. "/tests/vectors/chat/qwen2.5/tokenizer_config.json"))
  local m = wb.load(d)
  local msgs = { { role = "system", content = "Be brief." }, { role = "user", content = "Hi" } }
  local want = m:chat(msgs, { max_tokens = 6, temperature = 0 })
  local out, err, code = run(("-m %s scripts/generate.lua -p Hi --system 'Be brief.' --chat -n 6 --temperature 0 --json")
    :format(q(d)))
  T.eq(code, 0, err)
  local r = wb.json.decode(out)
  T.eq(r.text, want.text)
  T.same_list(r.token_ids, want.token_ids)
  T.eq(r.prompt_tokens, want.prompt_tokens)
  m:close()
  T.rmdir(d)
end)

T.done()
