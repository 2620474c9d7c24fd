-- test_constraint.lua - wb.constraint from Lua on a small random model: choice / regex / JSON
-- outputs over many hot generations, greedy = argmax of the masked logits, function constraints,
-- pressure fields, mask_stage, streaming, and the errors.
local wb = require("wb")
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local dir = T.tmpdir()
T.make_tiny_model(dir, {n_ctx = 128, seed = 7})
local model = wb.load(dir)
local tok = model.tokenizer
local V = model.config.vocab_size

local LABELS = {"billing", "account", "bug", "how_to", "feature_request", "cancellation"}
local is_label = {}
for _, l in ipairs(LABELS) do is_label[l] = true end

local SCHEMA = {
  type = "object",
  properties = {
    category = {enum = LABELS},
    priority = {enum = {"low", "medium", "high", "urgent"}},
    needs_human = {type = "boolean"},
  },
  required = {"category", "priority", "needs_human"},
}

local PROMPTS = {"Hello world!", "The chair is", "How much", "Is the lamp", "Things at"}

T.test("every choice output is exactly one label over 150 hot generations", function()
  local c = wb.constraint.choice(tok, LABELS)
  T.eq(c:info().kind, "choice")
  local seen = {}
  for i = 1, 150 do
    local r = model:generate(PROMPTS[i % #PROMPTS + 1],
                             {temperature = 2.5, seed = i, max_tokens = 24}, {constraint = c})
    T.eq(r.stop_reason, "constraint")
    local label = r.text:gsub("^ ", "")
    T.check(is_label[label], ("not a label: %q"):format(r.text))
    seen[label] = true
    T.eq(#r.constraint_mass, #r.token_ids)
    for _, m in ipairs(r.constraint_mass) do T.check(m >= 0 and m <= 1.0001, "mass " .. m) end
    T.check(r.constraint_logprob <= 1e-9)
  end
  for _, l in ipairs(LABELS) do T.check(seen[l], "never produced " .. l) end
end)

T.test("every JSON output decodes and validates over 100 hot generations", function()
  local prio = {low = true, medium = true, high = true, urgent = true}
  for _, ws in ipairs({"space", "compact", "flexible"}) do
    local c = wb.constraint.json_schema(tok, SCHEMA, {whitespace = ws})
    for i = 1, (ws == "space" and 50 or 25) do
      local r = model:generate(PROMPTS[i % #PROMPTS + 1],
                               {temperature = 2.0, seed = 100 + i, max_tokens = 120},
                               {constraint = c})
      T.eq(r.stop_reason, "constraint")
      local ok, obj = pcall(wb.json.decode, r.text)
      T.check(ok, ("does not parse: %q"):format(r.text))
      T.check(is_label[obj.category] and prio[obj.priority] and type(obj.needs_human) == "boolean",
              ("does not validate: %q"):format(r.text))
      if ws == "space" then
        T.check(r.text:gsub("^ ", ""):find('^{"category": "') ~= nil, r.text)
      end
    end
  end
end)

T.test("every regex output matches", function()
  local c = wb.constraint.regex(tok, "\\d{4}-\\d{2}-\\d{2}")
  for i = 1, 60 do
    local r = model:generate("The date", {temperature = 3, seed = i, max_tokens = 20},
                             {constraint = c})
    T.eq(r.stop_reason, "constraint")
    T.check(r.text:match("^%d%d%d%d%-%d%d%-%d%d$"), r.text)
    T.check(c:matches(r.text))
  end
  T.check(not c:matches("2024-5-17"))
end)

T.test("greedy under a mask is the argmax of the masked logits, step by step", function()
  local c = wb.constraint.regex(tok, "[a-z ]{1,12}[.!]")
  for _, prompt in ipairs(PROMPTS) do
    local r = model:generate(prompt, {temperature = 0, max_tokens = 16}, {constraint = c})
    local st = c:start()
    local ids = tok:encode(prompt)
    for _, id in ipairs(r.token_ids) do
      local logits = model:logits(ids)
      local best, bv = nil, -math.huge
      for _, a in ipairs(st:allowed()) do
        local v = logits:get(a)
        if v > bv then best, bv = a, v end
      end
      T.eq(id, best, "greedy pick")
      st:advance(id)
      ids[#ids + 1] = id
    end
    T.check(st:complete() or r.stop_reason == "length")
  end
end)

T.test("a Lua function constraint: the course's interface, lists or sets", function()
  local o, k = tok:encode("o")[1], tok:encode("k")[1]
  local calls = 0
  local r = model:generate("Hello", {temperature = 1.5, seed = 3, max_tokens = 10}, {
    constraint = function(generated)
      calls = calls + 1
      if #generated == 0 then return {o} end
      if #generated == 1 then return {[k] = true} end
      return {}
    end,
  })
  T.eq(r.text, "ok")
  T.eq(r.stop_reason, "constraint")
  T.eq(calls, 3)
  -- nil = no restriction this step
  local r2 = model:generate("Hello", {temperature = 0, max_tokens = 3},
                            {constraint = function() return nil end})
  T.eq(#r2.token_ids, 3)
  local c = wb.constraint.fn(tok, function(g) return #g < 2 and {o} or {} end)
  T.eq(model:generate("x", {max_tokens = 5}, {constraint = c}).text, "oo")
  T.checkerror("boom", model.generate, model, "x", {}, {constraint = function() error("boom") end})
  T.checkerror("outside", model.generate, model, "x", {},
               {constraint = function() return {V + 5} end})
  T.checkerror("must return a table", model.generate, model, "x", {},
               {constraint = function() return 3 end})
end)

T.test("streaming under a constraint gives the same pieces as the text", function()
  local c = wb.constraint.choice(tok, LABELS, {leading_space = "none"})
  local s = model:stream("Hello", {temperature = 1.5, seed = 9}, {constraint = c})
  local parts = {}
  for piece in s do parts[#parts + 1] = piece end
  local r = s:result()
  T.eq(table.concat(parts), r.text)
  T.check(is_label[r.text], r.text)
  T.eq(r.stop_reason, "constraint")
  -- a Lua-function constraint streams too
  local s2 = model:stream("Hello", {temperature = 0}, {constraint = function(g)
    return #g == 0 and {tok:encode("b")[1]} or {}
  end})
  for _ in s2 do end
  T.eq(s2:result().text, "b")
  -- closing a constraint under a running stream is safe: the generator holds its own reference
  local c3 = wb.constraint.regex(tok, "[a-z]{6}")
  local s3 = model:stream("Hello", {temperature = 1, seed = 2}, {constraint = c3})
  s3()
  c3:close()
  for _ in s3 do end
  T.eq(#s3:result().text, 6)
  local st = wb.constraint.choice(tok, {"ab"}):start()
  collectgarbage()
  T.check(st ~= nil)
end)

T.test("logit_bias bans, nudges and forces under a constraint", function()
  local c = wb.constraint.choice(tok, LABELS, {leading_space = "none"})
  local st = c:start()
  local bias = {}
  for _, id in ipairs(st:allowed()) do
    local b = tok:decode({id})
    if ("bug"):sub(1, #b) == b then bias[id] = -math.huge end
  end
  for i = 1, 40 do
    local r = model:generate("Hi", {temperature = 2, seed = i, logit_bias = bias}, {constraint = c})
    T.check(r.text ~= "bug")
  end
  local force = {[tok:encode("c")[1]] = 100}
  T.eq(model:generate("Hi", {temperature = 0, logit_bias = force}, {constraint = c}).text,
       "cancellation")
  local all = {}
  for _, id in ipairs(st:allowed()) do all[id] = -math.huge end
  T.checkerror("banned", model.generate, model, "Hi", {logit_bias = all}, {constraint = c})
end)

T.test("mask_stage reproduces the uniform fallback in wb.sampling.apply", function()
  local logits = wb.vec(8)
  for i = 0, 7 do logits:set(i, i == 2 and 10 or i * 0.1) end
  local allowed = {4, 6}
  local fixed = wb.sampling.apply(logits, {temperature = 0}, {}, allowed)
  T.eq(fixed:get(6), 1.0)
  local after = wb.sampling.apply(logits, {temperature = 0, mask_stage = "after_filters"}, {},
                                  allowed)
  T.eq(after:get(6), 1.0)
  local bug = wb.sampling.apply(logits, {temperature = 0, mask_stage = "after_filters_uniform"},
                                {}, allowed)
  T.near(bug:get(4), 0.5, 1e-6)
  T.near(bug:get(6), 0.5, 1e-6)
  T.checkerror("mask_stage", wb.sampling.apply, logits, {mask_stage = "later"})
  -- greedy generation under the bug picks the lowest allowed id, the fix the most likely one
  local c = wb.constraint.choice(tok, LABELS, {leading_space = "none"})
  local lowest = c:start():allowed()[1]
  local bugged = model:generate("Hi", {temperature = 0, mask_stage = "after_filters_uniform"},
                                {constraint = c})
  local fixed_r = model:generate("Hi", {temperature = 0}, {constraint = c})
  local after_r = model:generate("Hi", {temperature = 0, mask_stage = "after_filters"},
                                 {constraint = c})
  T.eq(after_r.text, fixed_r.text)
  local logits0 = model:logits(tok:encode("Hi"))
  local am = logits0:argmax()
  local allowed0 = {}
  for _, id in ipairs(c:start():allowed()) do allowed0[id] = true end
  if not allowed0[am] then T.eq(bugged.token_ids[1], lowest) end
end)

T.test("the cursor API walks a constraint by hand", function()
  local c = wb.constraint.choice(tok, {"ab", "ac"}, {leading_space = "none"})
  local st = c:start()
  T.check(not st:complete() and not st:accepting())
  local a = tok:encode("a")[1]
  st:advance(a)
  T.checkerror("not allowed", st.advance, st, a)
  st:advance(tok:encode("b")[1])
  T.check(st:complete() and st:accepting())
  st:reset()
  T.check(not st:complete())
  T.check(tostring(c):find("choice") ~= nil)
  st:close()
  st:close()
  T.checkerror("closed", st.allowed, st)
end)

T.test("errors are clear: options, syntax, schemas, vocabularies, closed objects", function()
  T.checkerror("unknown option 'leading'", wb.constraint.choice, tok, LABELS, {leading = "x"})
  T.checkerror("leading_space", wb.constraint.choice, tok, LABELS, {leading_space = "maybe"})
  T.checkerror("non-empty list", wb.constraint.choice, tok, {})
  T.checkerror("empty", wb.constraint.choice, tok, {"a", ""})
  T.checkerror("backreference", wb.constraint.regex, tok, "(a)\\1")
  T.checkerror("lazy", wb.constraint.regex, tok, "a+?")
  T.checkerror("whitespace", wb.constraint.json_schema, tok, SCHEMA, {whitespace = "lots"})
  T.checkerror("properties.x", wb.constraint.json_schema, tok,
               {type = "object", properties = {x = {type = "array"}}, required = {"x"}})
  T.checkerror("Tokenizer or Model", wb.constraint.regex, 42, "a")
  T.checkerror("unknown option 'constrain'", model.generate, model, "x", {}, {constrain = 1})
  T.checkerror("wb.Constraint or a function", model.generate, model, "x", {}, {constraint = 1})
  -- a constraint compiled for another vocabulary
  local other = wb.bpe_train(T.TEXT, {vocab_size = 280, special_tokens = {"<|endoftext|>"}})
  local c2 = wb.constraint.choice(other, LABELS)
  T.checkerror("vocabulary", model.generate, model, "x", {}, {constraint = c2})
  local c = wb.constraint.regex(model, "x+")
  c:close()
  c:close()
  T.checkerror("closed Constraint", model.generate, model, "x", {}, {constraint = c})
  T.checkerror("closed Constraint", c.info, c)
  -- the regex a schema compiles to
  local re = wb.constraint.schema_regex(SCHEMA, {whitespace = "compact"})
  T.check(re:find("(?:true|false)", 1, true) ~= nil, re)
end)

model:close()
T.rmdir(dir)
T.done()
