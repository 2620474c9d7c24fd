-- wb.Model, wb.Session and wb.safetensors_* on a tiny random GPT-2 built by the test itself.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local dir = T.tmpdir()
local config, n_params = T.make_tiny_model(dir)
local model = wb.load(dir)
local tok = model.tokenizer
local V = config.vocab_size
local prompt = tok:encode("Hello world! How are you today?")

local function max_abs_diff(a, b)
  T.eq(#a, #b, "lengths")
  local m = 0
  for i = 0, #a - 1 do m = math.max(m, math.abs(a:get(i) - b:get(i))) end
  return m
end

T.test("safetensors_write and safetensors_read round-trip names, shapes and values", function()
  local path = dir .. "/st.safetensors"
  local data = wb.vec({1, 2, 3, 4, 5, 6})
  wb.safetensors_write(path, {
    {name = "a", shape = {2, 3}, data = data},
    {name = "b", shape = {3}, data = {0.5, -1, 2}, dtype = "F16"},
    {name = "c", shape = {2}, data = {1.5, -2.25}, dtype = "BF16"},
  }, {note = "hello"})
  local st = wb.safetensors_read(path)
  T.eq(st.a.dtype, "F32"); T.same_list(st.a.shape, {2, 3}); T.same_list(st.a.vec:totable(), data:totable())
  T.eq(st.b.dtype, "F16"); T.same_list(st.b.vec:totable(), {0.5, -1, 2})
  T.eq(st.c.dtype, "BF16"); T.same_list(st.c.vec:totable(), {1.5, -2.25})
end)

T.test("safetensors_write rejects malformed tensor lists", function()
  local p = dir .. "/bad.safetensors"
  T.checkerror("data has 2 values, shape needs 3", wb.safetensors_write, p,
    {{name = "x", shape = {3}, data = {1, 2}}})
  T.checkerror("unknown field 'shpae'", wb.safetensors_write, p,
    {{name = "x", shpae = {3}, data = {1, 2, 3}}})
  T.checkerror("unknown dtype 'F8'", wb.safetensors_write, p,
    {{name = "x", shape = {1}, data = {1}, dtype = "F8"}})
  T.checkerror("'name' must be a string", wb.safetensors_write, p, {{shape = {1}, data = {1}}})
  T.checkerror("metadata keys and values must be strings", wb.safetensors_write, p,
    {{name = "x", shape = {1}, data = {1}}}, {n = 1})
  T.checkerror("/nonexistent", wb.safetensors_read, "/nonexistent/x.safetensors")
end)

T.test("a model exposes its config, parameter count, directory and tokenizer", function()
  T.eq(model.config.n_embd, 16)
  T.eq(model.config.model_type, "gpt2")
  T.eq(model.config.n_inner, wb.json.null)
  T.eq(model.config.architectures[1], "GPT2LMHeadModel")
  T.eq(model:num_parameters(), n_params)
  T.eq(model.dir, dir)
  T.eq(model.tokenizer, model.tokenizer) -- the same object every time
  T.eq(tok.vocab_size, V)
  T.check(tostring(model):find("11904 parameters", 1, true) ~= nil, tostring(model))
end)

T.test("model:logits gives the last position, or every position with all=true", function()
  local last = model:logits(prompt)
  T.eq(#last, V)
  local all = model:logits(prompt, {all = true})
  T.eq(#all, #prompt)
  T.check(max_abs_diff(all[#all], last) < 1e-5, "last row equals the last-position logits")
  -- causal: the logits at position i depend only on tokens 0..i
  local prefix = {table.unpack(prompt, 1, 3)}
  T.check(max_abs_diff(model:logits(prefix), all[3]) < 1e-4, "causal")
end)

T.test("model:batch_variant switches the F32 products of several rows to a GEMM, off by default", function()
  T.checkerror("boolean expected", function() return model:batch_variant(1) end)
  T.checkerror("boolean expected", function() return model:batch_variant() end)
  local function worst(k_rows)
    local full, m = model:logits(prompt, {all = true}), 0
    for k = 1, k_rows do
      m = math.max(m, max_abs_diff(model:logits({table.unpack(prompt, 1, k)}), full[k]))
    end
    return m
  end
  T.eq(model:batch_variant(false), false, "off by default")
  T.eq(worst(#prompt), 0, "fixed order: a position's logits do not depend on the rows in the pass")
  T.eq(model:batch_variant(true), false)
  T.eq(model:batch_variant(true), true, "returns the previous setting")
  local moved = worst(#prompt)
  T.eq(model:batch_variant(false), true)
  T.check(moved > 0, "the batch-variant mode moved no logit")
  T.check(moved < 1e-3, ("only the last bits move, got %g"):format(moved))
  T.eq(worst(#prompt), 0, "switched off, the fixed order is back")
end)

T.test("model:logits checks its arguments", function()
  T.checkerror("unknown option 'al'", function() return model:logits(prompt, {al = true}) end)
  T.checkerror("option 'all' must be a boolean", function() return model:logits(prompt, {all = 1}) end)
  T.checkerror("need at least one token id", function() return model:logits({}) end)
  T.checkerror(("token id %d at index 2 out of range [0, %d)"):format(V, V),
    function() return model:logits({1, V}) end)
  local long = {}
  for i = 1, config.n_positions + 1 do long[i] = 1 end
  T.checkerror("exceed the context", function() return model:logits(long) end)
end)

T.test("session prefill matches model:logits within 1e-4", function()
  local s = model:session()
  local a = s:prefill(prompt)
  T.check(max_abs_diff(a, model:logits(prompt)) < 1e-4)
  T.eq(s:pos(), #prompt)
  T.eq(s:n_ctx(), config.n_positions)
  T.same_list(s:tokens(), prompt)
  T.check(s:cache_bytes() > 0)
  s:close()
end)

T.test("prefill then decode equals one prefill of the whole sequence", function()
  local s = model:session()
  local rows = s:prefill({table.unpack(prompt, 1, 4)}, {all = true})
  T.eq(#rows, 4)
  local out
  for i = 5, #prompt do out = s:decode(prompt[i]) end
  T.check(max_abs_diff(out, model:logits(prompt)) < 1e-4)
  T.eq(s:pos(), #prompt)
end)

T.test("truncate, fork and reset move the cache as documented", function()
  local s = model:session({n_ctx = 16})
  T.eq(s:n_ctx(), 16)
  s:prefill({table.unpack(prompt, 1, 6)})
  local f = s:fork()
  T.eq(f:pos(), 6)
  T.eq(s:truncate(3), s)
  T.eq(s:pos(), 3)
  local a = s:decode(prompt[4])
  T.check(max_abs_diff(a, model:logits({table.unpack(prompt, 1, 4)})) < 1e-4)
  local b = f:decode(prompt[7])
  T.check(max_abs_diff(b, model:logits({table.unpack(prompt, 1, 7)})) < 1e-4, "fork is independent")
  s:reset()
  T.eq(s:pos(), 0)
  T.eq(#s:tokens(), 0)
  T.eq(f:model(), model)
end)

T.test("session misuse raises argument errors", function()
  local s = model:session({n_ctx = 4})
  T.checkerror("unknown option 'nctx'", function() return model:session({nctx = 4}) end)
  T.checkerror("n_ctx must be non-negative", function() return model:session({n_ctx = -1}) end)
  T.checkerror(tostring(config.n_positions), function() return model:session({n_ctx = 10000}) end)
  T.checkerror("token id -1 out of range", function() return s:decode(-1) end)
  T.checkerror("5 ids do not fit: position 0 of 4", function() return s:prefill({1, 2, 3, 4, 5}) end)
  s:prefill({1, 2, 3, 4})
  T.checkerror("Session is full", function() return s:decode(1) end)
  T.checkerror("length 5 out of range [0, 4]", function() return s:truncate(5) end)
  T.checkerror("unknown option 'temprature'", function() return s:prefill({1}, {temprature = 1}) end)
end)

T.test("a closed session raises on use, and close is idempotent", function()
  local s = model:session()
  s:close()
  s:close()
  T.checkerror("attempt to use a closed Session", function() return s:pos() end)
  T.checkerror("attempt to use a closed Session", function() return s:prefill({1}) end)
  T.eq(tostring(s), "Session (closed)")
  do
    local s2 <close> = model:session()
    s2:prefill({1, 2})
  end
end)

T.test("a session keeps its model alive", function()
  local s = wb.load(dir):session()
  collectgarbage(); collectgarbage()
  T.eq(#s:prefill({1, 2}), V)
  local m = s:model()
  T.eq(m:num_parameters(), n_params)
end)

T.test("a model cannot be closed under open sessions; its tokenizer dies with it", function()
  local m = wb.load(dir)
  local t = m.tokenizer
  local s = m:session()
  T.checkerror("cannot close a Model with 1 open Session", function() return m:close() end)
  s:close()
  m:close()
  m:close()
  T.checkerror("attempt to use a closed Model", function() return m:logits({1}) end)
  T.checkerror("attempt to use a closed Model", function() return m.config end)
  T.checkerror("closed Tokenizer", function() return t:encode("a") end)
  T.eq(tostring(m), "Model (closed)")
end)

T.test("loading a bad directory reports the core's message with the path", function()
  T.checkerror("/nonexistent/model", wb.load, "/nonexistent/model")
  local bad = T.tmpdir()
  T.write_file(bad .. "/config.json", '{"model_type": "gpt2"}')
  T.checkerror("config.json", wb.load, bad)
  T.rmdir(bad)
end)

T.test("an untied checkpoint with lm_head.weight loads", function()
  local d2 = T.tmpdir()
  local _, np2 = T.make_tiny_model(d2, {tied = false, n_layer = 1})
  local m = wb.load(d2)
  T.eq(m:num_parameters(), np2)
  T.eq(#m:logits({1, 2, 3}), m.tokenizer.vocab_size)
  T.rmdir(d2)
end)

T.test("greedy generation by hand runs through the whole pipeline", function()
  local s = model:session()
  local logits = s:prefill(prompt)
  local d = tok:detokenizer()
  local out = {}
  for _ = 1, 8 do
    local id = logits:argmax()
    out[#out + 1] = d:push(id)
    logits = s:decode(id)
  end
  out[#out + 1] = d:flush()
  T.eq(s:pos(), #prompt + 8)
  T.eq(type(table.concat(out)), "string")
end)

T.test("threads can be read and set", function()
  local old = wb.threads()
  T.eq(wb.threads(2), old)
  T.eq(wb.threads(), 2)
  local a = model:logits(prompt)
  wb.threads(1)
  T.check(max_abs_diff(a, model:logits(prompt)) < 1e-4)
  T.checkerror("thread count must be in", wb.threads, 0)
end)

-- ---- model users, re-entry and native memory (issue 12 items 1-2) ------------------------

T.test("model:close() is refused while a stream runs, then works once it ended", function()
  local m = wb.load(dir)
  local s = m:stream("Hello world", {temperature = 0, max_tokens = 6}, {ignore_eos = true})
  T.check(s() ~= nil or true)
  T.checkerror("cannot close a Model with 1 open Session(s) or stream(s)", m.close, m)
  for _ in s do end -- the stream still works: nothing was freed under it
  T.eq(s:result().stop_reason, "length")
  m:close()
  T.checkerror("attempt to use a closed Model", m.generate, m, "x", {})
  -- the same for a stream left half-way and then closed
  local m2 = wb.load(dir)
  local s2 = m2:stream("Hello", {temperature = 0, max_tokens = 6}, {ignore_eos = true})
  s2()
  T.checkerror("cannot close a Model", m2.close, m2)
  s2:close()
  m2:close()
end)

T.test("model:close() inside a constraint callback during model:generate is refused", function()
  local m = wb.load(dir)
  local tried
  local r = m:generate("Hello", {temperature = 0, max_tokens = 4}, {ignore_eos = true,
    constraint = function()
      local ok, err = pcall(m.close, m)
      tried = tried or (not ok and err)
      return nil
    end})
  T.check(tried and tried:find("cannot close a Model", 1, true), tostring(tried))
  T.eq(#r.token_ids, 4)
  -- an error raised by the refusal ends the generation with a clear message, not a crash
  T.checkerror("cannot close a Model", m.generate, m, "Hello", {temperature = 0, max_tokens = 4},
               {constraint = function() m:close() end})
  m:close()
end)

T.test("a constraint callback that calls or closes its own stream gets an error", function()
  local m = wb.load(dir)
  local s
  s = m:stream("Hello", {temperature = 0, max_tokens = 5}, {ignore_eos = true,
    constraint = function() return s() end})
  T.checkerror("re-entered", s)
  local s2
  s2 = m:stream("Hello", {temperature = 0, max_tokens = 5}, {ignore_eos = true,
    constraint = function() s2:close() end})
  T.checkerror("re-entered", s2)
  s2:close()
  local b = m:batch()
  b:add("Hello", {temperature = 0, max_tokens = 3}, {ignore_eos = true,
    constraint = function() b:step() end})
  local ev = b:step()
  T.check(ev[1].error and ev[1].error:find("re-entered", 1, true), tostring(ev[1].error))
  T.eq(ev[1].done, true)
  b:close()
  m:close()
end)

T.test("dropped models are collected at the pace of their native memory", function()
  local alive = setmetatable({}, {__mode = "v"})
  local weight = nil
  local max_alive, max_native = 0, 0
  collectgarbage()
  local base = wb.native_bytes()
  for i = 1, 60 do
    local m = wb.load() -- TinyLM, about 4 MB of weights
    weight = weight or m:info().weight_bytes
    alive[i] = m
    local n = 0
    for _ in pairs(alive) do n = n + 1 end
    max_alive = math.max(max_alive, n)
    max_native = math.max(max_native, wb.native_bytes() - base)
  end
  T.check(max_alive <= 3, ("at most 3 models alive at once, saw %d"):format(max_alive))
  T.check(max_native <= 3 * weight, ("native bytes peaked at %d"):format(max_native))
  collectgarbage()
  T.eq(wb.native_bytes(), base)
  -- sessions count too, and closing gives their bytes back at once
  local m = wb.load(dir)
  local before = wb.native_bytes()
  local s = m:session()
  T.eq(wb.native_bytes() - before, s:cache_bytes())
  s:close()
  T.eq(wb.native_bytes(), before)
  m:close()
end)

T.rmdir(dir)
T.done()
