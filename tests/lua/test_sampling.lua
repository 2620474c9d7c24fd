-- test_sampling.lua - wb.sampling and model:generate / model:stream on a tiny random GPT-2 built
-- here (no shipped model needed).
local wb = require("wb")

local failures, ran = 0, 0
local function test(name, fn)
  ran = ran + 1
  local ok, err = pcall(fn)
  if ok then print("ok   " .. name) else failures = failures + 1; print("FAIL " .. name .. ": " .. tostring(err)) end
end
local function expect_error(fn, needle)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error mentioning " .. needle)
  assert(tostring(err):find(needle, 1, true), "error '" .. tostring(err) .. "' does not mention " .. needle)
end

-- ---- fixture: tokenizer + random weights in a temp directory -------------------------------
local corpus = string.rep([[
Customer (Ana): Hi, how do I export my board data?
Agent (Lena): Open the board menu and choose Export, then CSV.
Customer (Bo): Hi, my account is locked. Can you help?
Agent (Sam): Sure, I reset the lock. Try again now.
]], 4)
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local tok = wb.bpe_train(corpus, {vocab_size = 300, special_tokens = {"<|endoftext|>"}})
tok:save(dir .. "/tokenizer.json")
local V, T, C, L = #tok, 40, 16, 2
local f = assert(io.open(dir .. "/config.json", "w"))
f:write(string.format('{"model_type":"gpt2","vocab_size":%d,"n_positions":%d,"n_embd":%d,' ..
  '"n_layer":%d,"n_head":2,"n_inner":null,"layer_norm_epsilon":1e-5,' ..
  '"activation_function":"gelu_new","tie_word_embeddings":true}', V, T, C, L))
f:close()
math.randomseed(7)
local tensors = {}
local function add(name, shape, scale, offset)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local data = {}
  for i = 1, n do data[i] = (offset or 0) + scale * (2 * math.random() - 1) end
  tensors[#tensors + 1] = {name = name, shape = shape, data = data}
end
add("wte.weight", {V, C}, 0.5)
add("wpe.weight", {T, C}, 0.1)
for l = 0, L - 1 do
  local p = "h." .. l .. "."
  add(p .. "ln_1.weight", {C}, 0.1, 1); add(p .. "ln_1.bias", {C}, 0.05)
  add(p .. "attn.c_attn.weight", {C, 3 * C}, 0.3); add(p .. "attn.c_attn.bias", {3 * C}, 0.05)
  add(p .. "attn.c_proj.weight", {C, C}, 0.2); add(p .. "attn.c_proj.bias", {C}, 0.05)
  add(p .. "ln_2.weight", {C}, 0.1, 1); add(p .. "ln_2.bias", {C}, 0.05)
  add(p .. "mlp.c_fc.weight", {C, 4 * C}, 0.2); add(p .. "mlp.c_fc.bias", {4 * C}, 0.05)
  add(p .. "mlp.c_proj.weight", {4 * C, C}, 0.1); add(p .. "mlp.c_proj.bias", {C}, 0.05)
end
add("ln_f.weight", {C}, 0.1, 1); add("ln_f.bias", {C}, 0.05)
wb.safetensors_write(dir .. "/model.safetensors", tensors)
local model = wb.load(dir)
local PROMPT = "Customer (Ana): Hi,"

-- ---- wb.sampling -------------------------------------------------------------------------------
test("apply returns a distribution and top_k=5 leaves exactly five", function()
  local logits = model:logits(tok:encode(PROMPT))
  local p = wb.sampling.apply(logits, {temperature = 1.0}, {})
  assert(math.abs(p:sum() - 1) < 1e-5)
  local q = wb.sampling.apply(logits, {top_k = 5})
  assert(q:count_nonzero() == 5, q:count_nonzero())
  assert(q:argmax() == logits:argmax())
  local g = wb.sampling.apply(logits, {temperature = 0})
  assert(g:count_nonzero() == 1 and g:get(logits:argmax()) == 1)
end)

test("entropy rises with temperature", function()
  local logits = model:logits(tok:encode(PROMPT))
  local last = -1
  for _, t in ipairs({0.25, 0.5, 1.0, 2.0}) do
    local h = wb.sampling.apply(logits, {temperature = t}):entropy_bits()
    assert(h > last, "entropy did not rise at T=" .. t)
    last = h
  end
end)

test("bad parameters are errors naming the key", function()
  local logits = wb.vec({0, 1, 2})
  expect_error(function() wb.sampling.check({temprature = 1}) end, "temprature")
  expect_error(function() wb.sampling.check({temperature = -1}) end, "temperature")
  expect_error(function() wb.sampling.check({temperature = 0 / 0}) end, "temperature")
  expect_error(function() wb.sampling.check({temperature = "hot"}) end, "temperature")
  expect_error(function() wb.sampling.check({top_p = 0}) end, "top_p")
  expect_error(function() wb.sampling.check({top_p = 1.2}) end, "top_p")
  expect_error(function() wb.sampling.check({min_p = 2}) end, "min_p")
  expect_error(function() wb.sampling.check({top_k = -1}) end, "top_k")
  expect_error(function() wb.sampling.check({top_k = 1.5}) end, "top_k")
  expect_error(function() wb.sampling.check({stop = 5}) end, "stop")
  expect_error(function() wb.sampling.check({stop = {"a", 3}}) end, "stop")
  expect_error(function() wb.sampling.check({max_tokens = 0}) end, "max_tokens")
  expect_error(function() wb.sampling.apply(logits, {logit_bias = {[7] = 1}}) end, "logit_bias")
  expect_error(function() wb.sampling.apply(logits, {stop_token_ids = {9}}) end, "stop_token_ids")
  assert(wb.sampling.check({temperature = 0, top_p = 1, min_p = 0, stop = "\n", seed = 3}))
end)

test("logit_bias bans with -math.huge", function()
  local logits = wb.vec({3, 2, 1})
  local p = wb.sampling.apply(logits, {logit_bias = {[0] = -math.huge}})
  assert(p:get(0) == 0 and p:argmax() == 1)
end)

test("draw is reproducible from its seed", function()
  local p = wb.sampling.apply(model:logits(tok:encode(PROMPT)), {})
  local a, b = wb.sampling.draw(p, 1, 8), wb.sampling.draw(p, 1, 8)
  assert(#a == 8 and table.concat(a, ",") == table.concat(b, ","))
end)

-- ---- generate / stream ---------------------------------------------------------------------------
test("generate returns every field, cached equals uncached", function()
  local params = {max_tokens = 12, temperature = 0.9, seed = 5, top_k = 40}
  local a = model:generate(PROMPT, params)
  local b = model:generate(PROMPT, params, {cache = false})
  for _, k in ipairs({"text", "token_ids", "stop_reason", "prompt_tokens", "prompt_tokens_dropped",
                      "prefill_ms", "decode_ms_per_token", "ttft_ms", "itl_ms", "e2e_ms", "seed"}) do
    assert(a[k] ~= nil, "missing " .. k)
  end
  assert(a.stop_reason == "length" and #a.token_ids == 12 and #a.itl_ms == 11)
  assert(a.seed == 5)
  assert(table.concat(a.token_ids, ",") == table.concat(b.token_ids, ","))
  assert(a.text == b.text)
  local raw = tok:decode(a.token_ids)
  if utf8.len(raw) then assert(a.text == raw) end -- invalid bytes come out as U+FFFD in text
  local c = model:generate(PROMPT, {max_tokens = 12, temperature = 0.9, seed = a.seed, top_k = 40})
  assert(table.concat(a.token_ids, ",") == table.concat(c.token_ids, ","))
  local unseeded = model:generate(PROMPT, {max_tokens = 12})
  local again = model:generate(PROMPT, {max_tokens = 12, seed = unseeded.seed})
  assert(table.concat(unseeded.token_ids, ",") == table.concat(again.token_ids, ","))
end)

test("prompts are trimmed on the left and the context ends generation", function()
  local long = string.rep("Customer (Ana): Hi, how do I export? ", 6)
  local n = #tok:encode(long)
  local r = model:generate(long, {max_tokens = 10, temperature = 0})
  assert(r.prompt_tokens == T - 10 and r.prompt_tokens_dropped == n - (T - 10))
  r = model:generate(long, {max_tokens = 100, temperature = 0})
  assert(r.stop_reason == "context" and r.prompt_tokens + #r.token_ids == T)
end)

test("streamed pieces add up to the text and never show a stop", function()
  local rng_seed = 1
  for trial = 1, 60 do
    local params = {max_tokens = 25, temperature = 1.0, seed = trial}
    local full = model:generate(PROMPT, params)
    if #full.text >= 4 then
      local a = 1 + (trial * 7) % (#full.text - 2)
      local stop = full.text:sub(a, a + 1 + trial % 4)
      params.stop = {stop .. "\1", stop}
      local s = model:stream(PROMPT, params)
      local got, last_ms = {}, 0
      for piece, ms in s do
        assert(type(piece) == "string" and #piece > 0 and ms >= last_ms)
        got[#got + 1] = piece
        last_ms = ms
      end
      local r = s:result()
      assert(table.concat(got) == r.text, "stream and text differ")
      assert(r.stop_reason == "stop" and not r.text:find(stop, 1, true))
      assert(full.text:sub(1, #r.text + #stop) == r.text .. stop)
    end
    rng_seed = rng_seed + 1
  end
end)

test("holdback=false leaks the stop like a naive loop", function()
  local full = model:generate(PROMPT, {max_tokens = 20, temperature = 0})
  local stop = full.text:sub(4, 6)
  local out = {}
  for piece in model:stream(PROMPT, {max_tokens = 20, temperature = 0, stop = stop}, {holdback = false}) do
    out[#out + 1] = piece
  end
  assert(table.concat(out):find(stop, 1, true))
end)

test("breaking out of a stream releases it", function()
  -- The stream is also the loop's to-be-closed value: break closes it at once.
  local it, st, ctl, s = model:stream(PROMPT, {max_tokens = 30, temperature = 0})
  for _ in it, st, ctl, s do break end
  assert(tostring(s) == "Stream (finished)")
  assert(s:result().stop_reason == "cancelled") -- leaving early cancels: the cache goes at once
  assert(s:result().cache_released == true)
  for i = 1, 200 do
    for _ in model:stream(PROMPT, {max_tokens = 30}) do break end
  end
  collectgarbage()
end)

test("unknown generate options are errors", function()
  expect_error(function() model:generate(PROMPT, {}, {cahce = false}) end, "cahce")
  expect_error(function() model:generate(PROMPT, {top_p = 2}) end, "top_p")
end)

model:close()
for _, name in ipairs({"config.json", "model.safetensors", "tokenizer.json"}) do os.remove(dir .. "/" .. name) end
os.remove(dir)
print(string.format("%d passed, %d failed", ran - failures, failures))
if failures > 0 then os.exit(1) end
