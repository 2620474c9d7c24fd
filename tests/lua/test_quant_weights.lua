-- wb.load(dir, {weights = "q8_0" | "q4_0"}) on TinyLM: matrices quantized at load, smaller, and
-- the next-token choice of Q8_0 agrees with F32 wherever F32's top two are clearly apart.
local f32 = wb.load()
local q8 = wb.load(nil, { weights = "q8_0" })
local q4 = wb.load(nil, { weights = "q4_0" })
assert(q8:info().weight_bytes < f32:info().weight_bytes + 1, "q8_0 adds no F32-sized copy")
local ok, err = pcall(wb.load, nil, { weights = "q3" })
assert(not ok and tostring(err):find("weights"), tostring(err))

local prompts = { "The cat sat on the", "Once upon a time, there was a", "Ticket: my order" }
local function kl(p, q) -- KL(p || q) over log-probabilities
  local tp, tq, s = p:totable(), q:totable(), 0
  for i = 1, #tp do
    local a = math.exp(tp[i])
    if a > 0 then s = s + a * (tp[i] - tq[i]) end
  end
  return s
end

for _, m in ipairs({ { q8, "q8_0", 0.05 }, { q4, "q4_0", 0.5 } }) do
  local model, name, max_kl = m[1], m[2], m[3]
  local clear, agree, kls = 0, 0, {}
  for _, text in ipairs(prompts) do
    local ids = f32.tokenizer:encode(text)
    local a <close> = f32:session()
    local b <close> = model:session()
    local la, lb = a:prefill(ids), b:prefill(ids)
    for _ = 1, 24 do
      local top = la:topk(2)
      local ia = la:argmax()
      local ib = lb:argmax()
      if top[1].p - top[2].p > 1.0 then
        clear = clear + 1
        if ia == ib then agree = agree + 1 end
      end
      kls[#kls + 1] = kl(la:log_softmax(), lb:log_softmax())
      la, lb = a:decode(ia), b:decode(ia) -- both follow F32's greedy path
    end
  end
  table.sort(kls)
  local median = kls[(#kls + 1) // 2]
  print(string.format("%s: %d/%d clear-margin steps agree, median KL %.5f", name, agree, clear, median))
  assert(clear > 0)
  if name == "q8_0" then assert(agree == clear, name .. ": a clear greedy choice changed") end
  assert(median < max_kl, name .. ": median KL " .. median)
end
-- the quantized path agrees with itself across sessions (no state leaks between them)
local s1 <close> = q8:session()
local s2 <close> = q8:session()
local x, y = s1:prefill({ 1, 2, 3 }), s2:prefill({ 1, 2, 3 })
assert(x:argmax() == y:argmax())


-- The Llama family (a tiny random Qwen2 checkpoint in BF16, rows of 64 and 128 values): Q8_0
-- logits close to BF16's on a teacher-forced path.
local root = os.getenv("WB_SOURCE_DIR") or "."
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local dir = T.tmpdir()
local slurp, spit = T.read_file, T.write_file
local V, C, F, L, NH, NKV = 640, 64, 128, 2, 4, 2
T.write_qwen2_bf16(dir, { n_embd = C, n_ff = F, n_layer = L, seed = 4242 })
spit(dir .. "/tokenizer.json", slurp(root .. "/tests/vectors/family_qwen2_tokenizer.json"))
spit(dir .. "/config.json", wb.json.encode({
  model_type = "qwen2", architectures = { "Qwen2ForCausalLM" }, vocab_size = V, hidden_size = C,
  intermediate_size = F, num_hidden_layers = L, num_attention_heads = NH,
  num_key_value_heads = NKV, max_position_embeddings = 512, rms_norm_eps = 1e-6,
  rope_theta = 1000000.0, tie_word_embeddings = true, hidden_act = "silu",
  torch_dtype = "bfloat16", use_sliding_window = false,
}))
local bf = wb.load(dir)
local qq = wb.load(dir, { weights = "q8_0" })
assert(qq:info().weight_bytes < bf:info().weight_bytes * 0.6, "q8_0 reads about half of BF16's bytes")
do
  local a <close> = bf:session()
  local b <close> = qq:session()
  local ids = { 5, 17, 99, 300, 2 }
  local la, lb = a:prefill(ids), b:prefill(ids)
  local worst = 0
  for _ = 1, 12 do
    worst = math.max(worst, kl(la:log_softmax(), lb:log_softmax()))
    local id = la:argmax()
    la, lb = a:decode(id), b:decode(id)
  end
  print(string.format("qwen2 fixture q8_0: worst KL %.6f over 12 steps", worst))
  assert(worst < 0.01, "q8_0 KL " .. worst)
end
os.execute("rm -rf '" .. dir .. "'")
print("ok")
