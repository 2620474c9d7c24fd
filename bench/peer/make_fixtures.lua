-- make_fixtures.lua - small random Llama-, Llama-3-scaled-, Qwen2- and Phi-3-shaped checkpoints
-- (F32 safetensors, TinyLM's tokenizer) for checking the GGUF writer against llama.cpp.
--   workbench bench/peer/make_fixtures.lua OUTDIR [kquant]
-- kquant: only the one checkpoint tests/vectors/gguf/ is made from (rows of 256 so that
-- llama-quantize can make Q4_K / Q6_K of it; Llama-3-style tokenizer of 611 ids).
-- Weights come from a seeded xorshift, so every run writes the same files.
local wb = require("wb")
local out = assert(arg[1], "usage: make_fixtures.lua OUTDIR [kquant]")

local function checkpoint(name, cfg, opts)
  local tok_path = opts.tokenizer or "models/tinylm-base/tokenizer.json"
  local tok_json = assert(wb.read_file(tok_path))
  local V = wb.tokenizer_load(tok_path).vocab_size
  local C, F, L, NH, NKV = opts.C or 64, opts.F or 128, opts.L or 2, 4, 2
  local HD = C // NH
  local dir = out .. "/" .. name
  os.execute("mkdir -p '" .. dir .. "'")
  local seed = opts.seed
  local function rand()
    seed = seed ~ (seed << 13) & 0xffffffff; seed = seed ~ (seed >> 17); seed = seed ~ (seed << 5) & 0xffffffff
    return (seed % 2000) / 1000 - 1
  end
  local tensors = {}
  local function add(tname, shape, scale)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    local v = wb.vec(n)
    for i = 0, n - 1 do v:set(i, scale and rand() * scale or 1 + 0.1 * rand()) end
    tensors[#tensors + 1] = { name = tname, shape = shape, data = v, dtype = "F32" }
  end
  add("model.embed_tokens.weight", { V, C }, 1.0)
  for l = 0, L - 1 do
    local p = "model.layers." .. l .. "."
    add(p .. "input_layernorm.weight", { C })
    if opts.fused then
      add(p .. "self_attn.qkv_proj.weight", { (NH + 2 * NKV) * HD, C }, 0.3)
    else
      add(p .. "self_attn.q_proj.weight", { NH * HD, C }, 0.3)
      add(p .. "self_attn.k_proj.weight", { NKV * HD, C }, 0.3)
      add(p .. "self_attn.v_proj.weight", { NKV * HD, C }, 0.3)
    end
    if opts.qkv_bias then
      add(p .. "self_attn.q_proj.bias", { NH * HD }, 0.2)
      add(p .. "self_attn.k_proj.bias", { NKV * HD }, 0.2)
      add(p .. "self_attn.v_proj.bias", { NKV * HD }, 0.2)
    end
    add(p .. "self_attn.o_proj.weight", { C, NH * HD }, 0.2)
    add(p .. "post_attention_layernorm.weight", { C })
    if opts.fused then
      add(p .. "mlp.gate_up_proj.weight", { 2 * F, C }, 0.3)
    else
      add(p .. "mlp.gate_proj.weight", { F, C }, 0.3)
      add(p .. "mlp.up_proj.weight", { F, C }, 0.3)
    end
    add(p .. "mlp.down_proj.weight", { C, F }, 0.2)
  end
  add("model.norm.weight", { C })
  if not cfg.tie_word_embeddings then add("lm_head.weight", { V, C }, 0.5) end
  wb.safetensors_write(dir .. "/model.safetensors", tensors, { format = "pt" })
  local base = {
    vocab_size = V, hidden_size = C, intermediate_size = F, num_hidden_layers = L,
    num_attention_heads = NH, num_key_value_heads = NKV, max_position_embeddings = 256,
    rms_norm_eps = 1e-5, hidden_act = "silu", rope_theta = 10000.0,
  }
  for k, v in pairs(cfg) do base[k] = v end
  wb.write_file(dir .. "/config.json", wb.json.encode(base, { indent = true }))
  wb.write_file(dir .. "/tokenizer.json", tok_json)
  print(dir)
end

if arg[2] == "kquant" then
  checkpoint("kq-llama", { model_type = "llama", architectures = { "LlamaForCausalLM" },
    tie_word_embeddings = true, attention_bias = false, rope_theta = 500000.0 },
    { seed = 21, C = 256, F = 256, L = 1, tokenizer = "tests/vectors/family_llama3_tokenizer.json" })
  return
end

checkpoint("llama", { model_type = "llama", architectures = { "LlamaForCausalLM" },
  tie_word_embeddings = true, attention_bias = false }, { seed = 11 })
checkpoint("llama3", { model_type = "llama", architectures = { "LlamaForCausalLM" },
  tie_word_embeddings = false, attention_bias = false, rope_theta = 500000.0,
  rope_scaling = { rope_type = "llama3", factor = 8.0, low_freq_factor = 1.0,
                   high_freq_factor = 4.0, original_max_position_embeddings = 64 } }, { seed = 12 })
checkpoint("qwen2", { model_type = "qwen2", architectures = { "Qwen2ForCausalLM" },
  tie_word_embeddings = true, rms_norm_eps = 1e-6, rope_theta = 1000000.0,
  use_sliding_window = false }, { seed = 13, qkv_bias = true })
checkpoint("phi3", { model_type = "phi3", architectures = { "Phi3ForCausalLM" },
  tie_word_embeddings = false, sliding_window = 48 }, { seed = 14, fused = true })
-- the real pre-tokenizers of Qwen2 and Llama-3 (reduced vocabularies from tests/vectors)
checkpoint("qwen2-tok", { model_type = "qwen2", architectures = { "Qwen2ForCausalLM" },
  tie_word_embeddings = true, rms_norm_eps = 1e-6 },
  { seed = 15, qkv_bias = true, tokenizer = "tests/vectors/family_qwen2_tokenizer.json" })
checkpoint("llama3-tok", { model_type = "llama", architectures = { "LlamaForCausalLM" },
  tie_word_embeddings = true, attention_bias = false, rope_theta = 500000.0 },
  { seed = 16, tokenizer = "tests/vectors/family_llama3_tokenizer.json" })
