-- A Qwen2-family model directory runs through the same Lua API and lab scripts as TinyLM:
-- a tiny random checkpoint built here (weights, config, tokenizer, chat template), then
-- model:info, model:chat (ChatML, <|im_end|> ends it as "eos"), kv_cache.lua and the trace lab.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local root = os.getenv("WB_SOURCE_DIR") or "."
local exe = (os.getenv("WB_BUILD_DIR") or "build") .. "/workbench"
local dir = T.tmpdir()
local slurp, spit = T.read_file, T.write_file
-- ---- the checkpoint ----------------------------------------------------------------------
local V, C, F, L, NH, NKV = 640, 48, 96, 2, 4, 2
local HD = C // NH
local tensors = T.write_qwen2_bf16(dir, { n_embd = C, n_ff = F, n_layer = L, seed = 12345 })

local tok_json = slurp(root .. "/tests/vectors/family_qwen2_tokenizer.json")
spit(dir .. "/tokenizer.json", tok_json)
spit(dir .. "/tokenizer_config.json", slurp(root .. "/tests/vectors/chat/qwen2.5/tokenizer_config.json"))
local tok = wb.tokenizer_load(dir .. "/tokenizer.json")
local im_end = assert(tok:id_of_str("<|im_end|>"), "fixture has <|im_end|>")
spit(dir .. "/generation_config.json", wb.json.encode({ eos_token_id = { im_end } }))
spit(dir .. "/config.json", wb.json.encode({
  model_type = "qwen2", architectures = { "Qwen2ForCausalLM" }, vocab_size = V, hidden_size = C,
  intermediate_size = F, num_hidden_layers = L, num_attention_heads = NH,
  num_key_value_heads = NKV, max_position_embeddings = 512, rms_norm_eps = 1e-6,
  rope_theta = 1000000.0, tie_word_embeddings = true, hidden_act = "silu",
  torch_dtype = "bfloat16", use_sliding_window = false,
}))

-- ---- the API -----------------------------------------------------------------------------
local model = wb.load(dir)

T.test("model:info describes a Qwen2 model with the family-independent keys", function()
  local info = model:info()
  T.eq(info.model_type, "qwen2")
  T.eq(info.n_layer, L); T.eq(info.n_head, NH); T.eq(info.n_kv_head, NKV)
  T.eq(info.head_dim, HD); T.eq(info.vocab_size, V)
  T.eq(info.kv_bytes_per_token, 2 * L * NKV * HD * 4)
end)

T.test("model:chat renders ChatML and generates through the template", function()
  local r = model:chat({ { role = "user", content = "Hi, can I export my board?" } },
                       { temperature = 0, max_tokens = 6 })
  T.check(#r.token_ids >= 1 and #r.token_ids <= 6)
  T.check(r.stop_reason == "length" or r.stop_reason == "eos", r.stop_reason)
end)

T.test("cached and uncached greedy generation agree on the Qwen2 model", function()
  local a = model:generate("Hello there", { temperature = 0, max_tokens = 12 }, { ignore_eos = true })
  local b = model:generate("Hello there", { temperature = 0, max_tokens = 12 },
                           { ignore_eos = true, cache = false })
  T.eq(table.concat(a.token_ids, ","), table.concat(b.token_ids, ","))
end)
model:close()

-- ---- the lab scripts, pointed at this directory -------------------------------------------
local function run(cmd)
  local ok, _, code = os.execute(cmd .. " >" .. dir .. "/out.txt 2>&1")
  return ok, code, slurp(dir .. "/out.txt")
end

T.test("kv_cache.lua runs on the Qwen2 directory and finds identical tokens", function()
  local ok, code, out = run(("WB_MODEL='%s' '%s' scripts/kv_cache.lua --repeats 1"):format(dir, exe))
  T.check(ok, ("exit %s: %s"):format(code, out))
  T.check(out:find("true"), out)
end)

T.test("prompt_cache.lua reuses a system-message prefix on the Qwen2 directory with identical ids", function()
  local ok, code, out = run(("WB_MODEL='%s' '%s' scripts/prompt_cache.lua --requests 3 --rounds 2"):format(dir, exe))
  T.check(ok, ("exit %s: %s"):format(code, out))
  T.check(out:find("chat template with a system message", 1, true), out)
  T.check(out:find("Every reply had the same", 1, true), out)
end)

T.test("speculative.lua on the Qwen2 directory: a 1-layer draft, output equal to greedy", function()
  local ok, code, out = run(("WB_MODEL='%s' '%s' scripts/speculative.lua --tokens 12 --repeats 1"):format(dir, exe))
  T.check(ok, ("exit %s: %s"):format(code, out))
  T.check(out:find("truncated (1 of 2 layers)", 1, true), out)
  T.check(out:find("Every speculative reply was token for token the plain greedy reply", 1, true), out)
end)

T.test("the trace lab runs on the Qwen2 directory through the chat template and validates", function()
  local rec = dir .. "/trace.json"
  local ok, code, out = run(("'%s' -m '%s' scripts/trace.lua --samples 1 --output '%s'")
                            :format(exe, dir, rec))
  T.check(ok, ("trace.lua exit %s: %s"):format(code, out))
  local record = wb.json.decode(slurp(rec))
  T.eq(record.model.chat_template, "tokenizer_config.json")
  ok, code, out = run(("'%s' scripts/analyze_trace.lua '%s'"):format(exe, rec))
  T.check(ok, ("analyze_trace.lua exit %s: %s"):format(code, out))
end)

T.test("batch_variance.lua on an F32 copy of the Qwen2 fixture: fixed-order kernels are batch-invariant", function()
  local f32 = dir .. "/f32"
  assert(os.execute("mkdir -p '" .. f32 .. "'"))
  for _, name in ipairs({ "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json" }) do
    spit(f32 .. "/" .. name, slurp(dir .. "/" .. name))
  end
  local copy = {}
  for i, t in ipairs(tensors) do copy[i] = { name = t.name, shape = t.shape, data = t.data, dtype = "F32" } end
  wb.safetensors_write(f32 .. "/model.safetensors", copy, { format = "pt" })
  local rec = dir .. "/bv.json"
  local ok, code, out = run(("WB_LESSON_RECORD='%s' WB_MODEL='%s' '%s' scripts/batch_variance.lua --tokens 16")
                            :format(rec, f32, exe))
  T.check(ok, ("exit %s: %s"):format(code, out))
  local r = wb.json.decode(slurp(rec))
  T.eq(r.model_type, "qwen2")
  T.eq(r.fixed_changed, 0)
  for _, p in ipairs(r.modes[1].part1) do T.eq(p.diff, 0) end
  for _, b in ipairs(r.modes[1].batches) do T.eq(b.lp_diff, 0, ("fixed, batch %d"):format(b.batch)) end
  if r.has_variant then
    T.check(r.modes[2].max_logit_diff > 0, "the variant mode moved no logits on the Qwen2 fixture")
    local batch_moved = 0
    for _, b in ipairs(r.modes[2].batches) do batch_moved = math.max(batch_moved, b.lp_diff) end
    T.check(batch_moved > 0, "no batch size moved a log-probability on the Qwen2 fixture")
  end
end)

os.execute("rm -rf '" .. dir .. "'")
T.done()
