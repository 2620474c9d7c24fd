-- model:chat_prompt, wb.chat_template and the generation_config.json defaults of model:chat /
-- model:generate, on a tiny random Qwen2.5-shaped directory built here (weights, config,
-- tokenizer, Qwen2.5's tokenizer_config.json and generation_config.json) and on TinyLM.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local root = os.getenv("WB_SOURCE_DIR") or "."
local dir = T.tmpdir()
local slurp, spit = T.read_file, T.write_file

local V, C, F, L, NH, NKV = 640, 32, 64, 1, 4, 2
T.write_qwen2_bf16(dir, { n_embd = C, n_ff = F, n_layer = L, seed = 777 })
spit(dir .. "/tokenizer.json", slurp(root .. "/tests/vectors/family_qwen2_tokenizer.json"))
spit(dir .. "/tokenizer_config.json", slurp(root .. "/tests/vectors/chat/qwen2.5/tokenizer_config.json"))
local tok = wb.tokenizer_load(dir .. "/tokenizer.json")
local im_end = assert(tok:id_of_str("<|im_end|>"))
-- Qwen2.5-Instruct's generation_config.json, with the fixture's eos id
spit(dir .. "/generation_config.json", ([[{
  "bos_token_id": 1, "pad_token_id": 1, "do_sample": true, "eos_token_id": [%d, 1],
  "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
  "transformers_version": "4.37.0"
}]]):format(im_end))
spit(dir .. "/config.json", wb.json.encode({
  model_type = "qwen2", architectures = { "Qwen2ForCausalLM" }, vocab_size = V, hidden_size = C,
  intermediate_size = F, num_hidden_layers = L, num_attention_heads = NH,
  num_key_value_heads = NKV, max_position_embeddings = 256, rms_norm_eps = 1e-6,
  rope_theta = 1000000.0, tie_word_embeddings = true, hidden_act = "silu",
  torch_dtype = "bfloat16", use_sliding_window = false,
}))

local model = wb.load(dir)
local msgs = { { role = "system", content = "Be brief." }, { role = "user", content = "Hi" } }

T.test("chat_prompt returns the rendered text and its ids", function()
  local text, ids = model:chat_prompt(msgs)
  T.eq(text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
  T.eq(table.concat(ids, ","), table.concat(tok:encode(text), ","))
  T.eq(ids[1], tok:id_of_str("<|im_start|>"))
  local plain = model:chat_prompt(msgs, { add_generation_prompt = false })
  T.eq(plain, text:sub(1, #text - #"<|im_start|>assistant\n"))
  local tpl = wb.chat_template(dir)
  T.eq(tpl:render(msgs, { add_generation_prompt = true }), text)
  T.eq(table.concat(tpl.eos_ids, ","), im_end .. ",1")
  T.eq(tpl.eos_token, "<|im_end|>")
  T.check(tpl.source:find("tokenizer_config.json", 1, true))
end)

T.test("tools and tool calls render as the template writes them, JSON text keeps key order", function()
  local tools = '[{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]'
  local text = model:chat_prompt({ { role = "user", content = "Time?" } }, { tools = tools })
  T.check(text:find('<tools>\n{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}\n</tools>', 1, true), text)
  local call = [[[{"role": "user", "content": "t?"}, {"role": "assistant", "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": {"zone": "UTC", "fmt": "iso"}}}]},
    {"role": "tool", "content": "12:00"}]
  ]]
  text = model:chat_prompt(call, { add_generation_prompt = false })
  T.check(text:find('{"name": "get_time", "arguments": {"zone": "UTC", "fmt": "iso"}}', 1, true), text)
  T.check(text:find("<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n", 1, true), text)
  -- a Lua table works too (keys in byte order)
  text = model:chat_prompt({ { role = "user", content = "x" } }, { tools = { { type = "function", ["function"] = { name = "f" } } } })
  T.check(text:find('{"function": {"name": "f"}, "type": "function"}', 1, true), text)
  local ok, err = pcall(model.chat_prompt, model, msgs, { tool = {} })
  T.check(not ok and tostring(err):find("tool", 1, true), err)
end)

T.test("model:chat starts from generation_config.json and reports it", function()
  local r = model:chat(msgs, { max_tokens = 3, seed = 1 })
  T.eq(r.params_used.temperature, 0.7)
  T.eq(r.params_used.top_p, 0.8)
  T.eq(r.params_used.top_k, 20)
  T.eq(r.params_used.repetition_penalty, 1.1)
  T.eq(r.params_used.max_tokens, 3)
  T.eq(r.params_source.temperature, "generation_config.json")
  T.eq(r.params_source.top_k, "generation_config.json")
  T.eq(r.params_source.max_tokens, "caller")
  T.eq(r.params_source.min_p, "default")
  T.eq(table.concat(r.params_used.eos_token_ids, ","), im_end .. ",1")
  T.eq(r.params_source.eos_token_ids, "generation_config.json")
  -- the caller wins per parameter
  r = model:chat(msgs, { max_tokens = 2, temperature = 0, top_k = 5 })
  T.eq(r.params_used.temperature, 0)
  T.eq(r.params_source.temperature, "caller")
  T.eq(r.params_used.top_k, 5)
  T.eq(r.params_source.top_p, "generation_config.json")
  -- defaults = "none": the workbench's own defaults
  r = model:generate("Hello", { max_tokens = 2 }, { defaults = "none" })
  local d = wb.sampling.defaults()
  T.eq(r.params_used.temperature, d.temperature)
  T.eq(r.params_source.temperature, "default")
  T.eq(r.params_source.top_k, "default")
  r = model:generate("Hello", { max_tokens = 2, temperature = 0 })
  T.eq(r.params_source.top_p, "generation_config.json")
  -- the same generation with the defaults spelled out gives the same ids
  local a = model:generate("Hello", { max_tokens = 4, seed = 9 })
  local b = model:generate("Hello", { max_tokens = 4, seed = 9, temperature = 0.7, top_p = 0.8, top_k = 20,
                                      repetition_penalty = 1.1 }, { defaults = "none" })
  T.eq(table.concat(a.token_ids, ","), table.concat(b.token_ids, ","))
  local ok, err = pcall(model.generate, model, "x", {}, { defaults = "yes" })
  T.check(not ok and tostring(err):find("defaults", 1, true), err)
  -- streams start from the same defaults: the same ids as model:chat with the same seed
  local pieces = {}
  for piece in model:stream_chat(msgs, { max_tokens = 4, seed = 3 }) do pieces[#pieces + 1] = piece end
  local c = model:chat(msgs, { max_tokens = 4, seed = 3 })
  T.eq(table.concat(pieces), c.text)
end)

T.test("streams carry params_used and params_source, on the object and in every result", function()
  local s = model:stream_chat(msgs, { max_tokens = 3, seed = 4, top_k = 7 })
  T.eq(s.params_used.temperature, 0.7)
  T.eq(s.params_source.temperature, "generation_config.json")
  T.eq(s.params_used.top_k, 7)
  T.eq(s.params_source.top_k, "caller")
  T.eq(s.params_source.min_p, "default")
  T.eq(table.concat(s.params_used.eos_token_ids, ","), im_end .. ",1")
  T.eq(type(s.result), "function", "methods are still there")
  local before = s:result() -- a snapshot while running
  T.eq(before.params_used.top_k, 7)
  T.eq(before.params_source.repetition_penalty, "generation_config.json")
  for _ in s do end
  local r = s:result()
  T.eq(r.params_used.top_p, 0.8)
  T.eq(r.params_source.max_tokens, "caller")
  T.eq(r.params_used.max_tokens, 3)
  T.check(r.stop_reason ~= nil, "the final result")
  T.eq(s:result(), r, "the final result is one table")
  -- a stream of a plain prompt, the defaults turned off, and a stream cut short
  -- ignore_eos: sampled at temperature 1, the first token may be an eos id (2 of 640), and then
  -- the stream has ended by itself before the close
  local p = model:stream("Hello", { max_tokens = 5 }, { defaults = "none", ignore_eos = true })
  T.eq(p.params_source.temperature, "default")
  T.eq(p.params_used.temperature, wb.sampling.defaults().temperature)
  for _ in p do break end
  p:close() -- iterating the object itself has no to-be-closed value: close ends it
  T.eq(p:result().stop_reason, "cancelled")
  T.eq(p:result().params_source.top_p, "default")
  -- the same report as model:generate gives for the same call
  local g = model:generate("Hello", { max_tokens = 2, temperature = 0 })
  local q = model:stream("Hello", { max_tokens = 2, temperature = 0 })
  for k, v in pairs(g.params_source) do T.eq(q.params_source[k], v, k) end
  for k, v in pairs(g.params_used) do
    if type(v) ~= "table" then T.eq(q.params_used[k], v, k) end
  end
  T.eq(q.no_such_field, nil)
end)

T.test("TinyLM keeps its defaults and says in one line that it has no chat template", function()
  local tiny = wb.load()
  local r = tiny:generate("Hello", { max_tokens = 2 })
  T.eq(r.params_source.temperature, "default")
  T.eq(r.params_used.top_p, wb.sampling.defaults().top_p)
  local s = tiny:stream("Hello", { max_tokens = 2 })
  T.eq(s.params_source.temperature, "default")
  for _ in s do end
  T.eq(s:result().params_used.top_p, wb.sampling.defaults().top_p)
  local ok, err = pcall(tiny.chat, tiny, { { role = "user", content = "hi" } }, { max_tokens = 2 })
  T.check(not ok, "chat on TinyLM must fail")
  err = tostring(err)
  T.check(err:find("no chat template", 1, true), err)
  T.check(not err:find("\n", 1, true), err)
  ok, err = pcall(tiny.chat_prompt, tiny, { { role = "user", content = "hi" } })
  T.check(not ok and tostring(err):find("no chat template", 1, true), err)
end)

os.execute("rm -rf '" .. dir .. "'")
T.done()
