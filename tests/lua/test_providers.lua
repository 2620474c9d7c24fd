-- wb.providers: request bodies for every shipped preset x provider against golden JSON files
-- (tests/golden/<preset>.<provider>.json), dropped parameters, strict mode, nil omission.
--
-- After an intended change to a preset or a translation, regenerate the goldens with
--   WB_UPDATE_GOLDEN=1 workbench tests/lua/test_providers.lua
-- and review the diff.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")
local presets = require("wb.presets")
local providers = require("wb.providers")

local GOLDEN = "tests/golden"
local UPDATE = os.getenv("WB_UPDATE_GOLDEN") == "1"
local MESSAGES = { { role = "user", content = "Ticket: I was charged twice for the Team plan in March" } }
local PRESETS = { "triage", "drafts", "brainstorm" }

-- Goldens must not depend on who runs the test.
local saved_dir = os.getenv("WB_PRESETS_DIR")
assert(saved_dir == nil or saved_dir == "", "unset WB_PRESETS_DIR to run the golden tests")
do -- effort.lua translates effort levels; a user copy would change the bodies
  local u = presets.user_dir()
  local fh = u and io.open(u .. "/effort.lua")
  if fh then fh:close(); error(u .. "/effort.lua shadows presets/effort.lua; move it to run the golden tests") end
end

local function golden_doc(r)
  return wb.json.encode({ url = r.url, model = r.model, body = r.body,
    warnings = wb.json.array(r.warnings), notes = wb.json.array(r.notes) }, { indent = true }) .. "\n"
end

local function shipped(name) return presets.load(presets.shipped_dir() .. "/" .. name .. ".lua") end

for _, pname in ipairs(PRESETS) do
  for _, prov in ipairs(providers.NAMES) do
    T.test(("the %s request for preset %s matches its golden file"):format(prov, pname), function()
      local r = providers.request(prov, shipped(pname), MESSAGES, { host = "http://localhost:11434" })
      local path = ("%s/%s.%s.json"):format(GOLDEN, pname, prov)
      local got = golden_doc(r)
      if UPDATE then T.write_file(path, got) end
      local want = T.read_file(path)
      T.eq(got, want, path .. " (WB_UPDATE_GOLDEN=1 regenerates)")
      -- The body is also valid JSON that decodes to the same table.
      T.eq(wb.json.encode(wb.json.decode(r.json)), wb.json.encode(r.body))
    end)
  end
end

T.test("parameters a provider lacks are dropped and listed in the warnings", function()
  local p = presets.merge({ temperature = 1, top_k = 40, min_p = 0.1, logit_bias = { [5] = -100 },
    repetition_penalty = 1.1, thinking_budget = 512 })
  p.name = "test"
  local g = providers.request("groq", p, MESSAGES)
  T.same_list(g.dropped, { "top_k", "min_p", "repetition_penalty", "logit_bias", "thinking_budget" })
  T.eq(g.body.top_k, nil)
  T.eq(g.body.min_p, nil)
  T.check(g.warnings[1]:find("groq: dropped top_k", 1, true), g.warnings[1])
  local ge = providers.request("gemini", p, MESSAGES)
  T.same_list(ge.dropped, { "min_p", "repetition_penalty", "logit_bias" })
  T.eq(ge.body.generationConfig.topK, 40)
  T.eq(ge.body.generationConfig.thinkingConfig.thinkingBudget, 512)
  local o = providers.request("ollama", p, MESSAGES)
  T.same_list(o.dropped, { "logit_bias", "thinking_budget" })
  T.eq(o.body.options.min_p, 0.1)
  T.eq(o.body.options.top_k, 40)
  T.eq(o.body.options.repeat_penalty, 1.1)
end)

T.test("strict mode turns a dropped parameter into an error that lists it", function()
  local p = presets.merge({ min_p = 0.05, top_k = 20 })
  p.name = "mine"
  local err = T.checkerror("strict mode", providers.request, "groq", p, MESSAGES, { strict = true })
  T.check(err:find("top_k, min_p", 1, true) and err:find("'mine'", 1, true), err)
  -- Ollama takes both, so strict mode passes there.
  T.eq(providers.request("ollama", p, MESSAGES, { strict = true }).body.options.min_p, 0.05)
  -- The shipped brainstorm preset uses min_p: strict Groq refuses it.
  T.checkerror("min_p", providers.request, "groq", shipped("brainstorm"), MESSAGES, { strict = true })
end)

T.test("a parameter left nil is omitted from every body", function()
  local p = presets.merge({})
  p.name = "bare"
  local g = providers.request("groq", p, MESSAGES)
  for _, k in ipairs({ "temperature", "top_p", "seed", "stop", "reasoning_effort", "response_format" }) do
    T.eq(g.body[k], nil, k)
  end
  T.eq(g.body.max_completion_tokens, 256) -- the documented default
  local ge = providers.request("gemini", p, MESSAGES, { model = "gemini-3-pro-preview" })
  T.eq(ge.body.generationConfig.temperature, nil)
  T.eq(ge.body.generationConfig.thinkingConfig, nil)
  T.eq(ge.body.systemInstruction, nil) -- empty system prompt: no instruction at all
  local o = providers.request("ollama", p, MESSAGES)
  T.eq(o.body.options.temperature, nil)
  T.eq(o.body.think, nil)
  T.check(not g.json:find("temperature", 1, true), g.json)
end)

T.test("stop lists are cut to the provider's maximum with a warning", function()
  local p = presets.merge({ stop = { "a", "b", "c", "d", "e", "f" } })
  local g = providers.request("groq", p, MESSAGES)
  T.eq(#g.body.stop, 4)
  T.same_list(g.dropped, { 'stop[5] "e"', 'stop[6] "f"' })
  local ge = providers.request("gemini", p, MESSAGES)
  T.eq(#ge.body.generationConfig.stopSequences, 5)
  T.eq(#ge.dropped, 1)
  T.eq(#providers.request("ollama", p, MESSAGES).body.options.stop, 6)
end)

T.test("Gemini gets a thinking budget or a level, never both", function()
  local p = presets.merge({ reasoning_effort = "high", thinking_budget = 2048 })
  for _, model in ipairs({ "gemini-2.5-flash", "gemini-3-pro-preview" }) do
    local tc = providers.request("gemini", p, MESSAGES, { model = model }).body.generationConfig.thinkingConfig
    T.eq(tc.thinkingBudget, 2048)
    T.eq(tc.thinkingLevel, nil)
  end
  local q = presets.merge({ reasoning_effort = "high" })
  local g3 = providers.request("gemini", q, MESSAGES, { model = "gemini-3-pro-preview" })
  T.eq(g3.body.generationConfig.thinkingConfig.thinkingLevel, "high")
  T.eq(g3.body.generationConfig.thinkingConfig.thinkingBudget, nil)
  local pro = providers.request("gemini", presets.merge({ reasoning_effort = "none" }), MESSAGES,
    { model = "gemini-2.5-pro" })
  T.eq(pro.body.generationConfig.thinkingConfig.thinkingBudget, 128)
end)

T.test("a choice constraint maps to Gemini's enum mode and Ollama's format, and is dropped on Groq", function()
  local p = presets.merge({ constraint = { kind = "choice", labels = { "billing", "bug" } } })
  local ge = providers.request("gemini", p, MESSAGES)
  T.eq(ge.body.generationConfig.responseMimeType, "text/x.enum")
  T.same_list(ge.body.generationConfig.responseSchema.enum, { "billing", "bug" })
  T.eq(providers.request("ollama", p, MESSAGES).body.format.type, "string")
  local g = providers.request("groq", p, MESSAGES)
  T.eq(g.body.response_format, nil)
  T.same_list(g.dropped, { "constraint (choice)" })
end)

T.test("messages: system prompt first, roles mapped, bad input named", function()
  local p = presets.merge({ system = "Be brief." })
  local msgs = { { role = "user", content = "hi" }, { role = "assistant", content = "hello" },
    { role = "user", content = "export?" } }
  local g = providers.request("groq", p, msgs)
  T.eq(g.body.messages[1].role, "system")
  T.eq(#g.body.messages, 4)
  local ge = providers.request("gemini", p, msgs)
  T.eq(ge.body.systemInstruction.parts[1].text, "Be brief.")
  T.eq(ge.body.contents[2].role, "model")
  -- A caller's own system message wins over the preset's.
  local own = providers.request("ollama", p, { { role = "system", content = "Mine." }, msgs[1] })
  T.eq(own.body.messages[1].content, "Mine.")
  T.eq(#own.body.messages, 2)
  T.checkerror("messages[1].role", providers.request, "groq", p, { { role = "bot", content = "x" } })
  T.checkerror("unknown key 'text'", providers.request, "groq", p, { { role = "user", text = "x" } })
  T.checkerror("unknown option 'stirct'", providers.request, "groq", p, msgs, { stirct = true })
  T.checkerror("unknown provider", providers.request, "openai", p, msgs)
end)

T.test("requests carry key placeholders, never a key", function()
  local g = providers.request("groq", "triage", MESSAGES)
  T.eq(g.headers.Authorization, "Bearer $GROQ_API_KEY")
  T.eq(providers.request("gemini", "triage", MESSAGES).headers["x-goog-api-key"], "$GEMINI_API_KEY")
  T.eq(providers.ollama_host("127.0.0.1:9999"), "http://127.0.0.1:9999")
  local s = providers.request("gemini", "drafts", MESSAGES, { stream = true })
  T.check(s.url:find(":streamGenerateContent?alt=sse", 1, true), s.url)
end)

T.done()
