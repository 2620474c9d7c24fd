-- Shared helpers for tests/lua/test_*.lua (run by `workbench` from the source root).
--
--   local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
--   T.test("vectors add", function() T.eq(1 + 1, 2) end)
--   T.checkerror("unknown option 'temprature'", f, ...)
--   T.done()                                   -- exits 1 if anything failed
--
-- Tests are named by sentences; a failing test prints its name and the message, and the others
-- still run.

local T = {}

local failures, ran = 0, 0

function T.test(name, fn)
  ran = ran + 1
  local ok, err = xpcall(fn, debug.traceback)
  if not ok then
    failures = failures + 1
    io.stderr:write(("FAIL %s\n  %s\n"):format(name, tostring(err):gsub("\n", "\n  ")))
  end
end

function T.done()
  io.stdout:write(("%d tests, %d failed\n"):format(ran, failures))
  os.exit(failures == 0 and 0 or 1, true) -- close the state: every __gc runs
end

local function fmt(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

function T.check(cond, msg, level)
  if not cond then error(msg or "check failed", (level or 1) + 1) end
end

function T.eq(a, b, msg)
  if a ~= b then
    error(("%s: got %s, want %s"):format(msg or "not equal", fmt(a), fmt(b)), 2)
  end
end

function T.near(a, b, tol, msg)
  tol = tol or 1e-6
  if type(a) ~= "number" or type(b) ~= "number" or not (math.abs(a - b) <= tol) then
    error(("%s: %s and %s differ by more than %g"):format(msg or "not near", fmt(a), fmt(b), tol), 2)
  end
end

-- f(...) must raise an error whose message contains `msg` (plain substring).
function T.checkerror(msg, f, ...)
  local ok, err = pcall(f, ...)
  if ok then error(("expected an error mentioning %q, got none"):format(msg), 2) end
  err = tostring(err)
  if not err:find(msg, 1, true) then
    error(("error %q does not mention %q"):format(err, msg), 2)
  end
  return err
end

function T.same_list(a, b, msg)
  T.check(#a == #b, ("%s: lengths %d and %d"):format(msg or "lists differ", #a, #b), 2)
  for i = 1, #a do
    if a[i] ~= b[i] then
      error(("%s: at %d got %s, want %s"):format(msg or "lists differ", i, fmt(a[i]), fmt(b[i])), 2)
    end
  end
end

-- A fresh empty directory, removed by T.rmdir (or left for inspection when a test fails).
function T.tmpdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute(("mkdir -p '%s'"):format(path)))
  return path
end

function T.rmdir(path)
  if path and path:match("^/tmp/") then os.execute(("rm -rf '%s'"):format(path)) end
end

function T.write_file(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

function T.read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- A tiny deterministic text for tokenizer training.
T.TEXT = [[
Hello world! How are you today? I am fine, thank you. How is the weather?
The weather is fine today. Hello again, world. How are things at the shop?
Things at the shop are fine: we sold three lamps and two chairs today.
<|endoftext|>
Is the lamp still on sale? Yes, the lamp is on sale until Friday.
How much is the chair? The chair is forty dollars, the lamp is twenty.
<|endoftext|>
]]

-- Build a random GPT-2 checkpoint in dir: tokenizer.json (BPE trained on T.TEXT), config.json
-- and model.safetensors. Returns the config table. opts: n_embd, n_layer, n_head, n_ctx, seed,
-- vocab_size (tokenizer target), tied (default true).
function T.make_tiny_model(dir, opts)
  local wb = require("wb")
  opts = opts or {}
  local tok = wb.bpe_train(T.TEXT:rep(4), {
    vocab_size = opts.vocab_size or 300, special_tokens = {"<|endoftext|>"},
  })
  tok:save(dir .. "/tokenizer.json")
  local V, C = tok.vocab_size, opts.n_embd or 16
  local L, NH, NP = opts.n_layer or 2, opts.n_head or 2, opts.n_ctx or 32
  local F = 4 * C
  local config = {
    model_type = "gpt2", architectures = {"GPT2LMHeadModel"}, vocab_size = V,
    n_positions = NP, n_ctx = NP, n_embd = C, n_layer = L, n_head = NH, n_inner = wb.json.null,
    layer_norm_epsilon = 1e-5, activation_function = "gelu_new",
    tie_word_embeddings = opts.tied ~= false, bos_token_id = tok.eos_id, eos_token_id = tok.eos_id,
  }
  T.write_file(dir .. "/config.json", wb.json.encode(config, {indent = true}))
  math.randomseed(opts.seed or 1234)
  local function rand(n, std, base)
    local v = wb.vec(n)
    for i = 0, n - 1 do v:set(i, (base or 0) + std * (2 * math.random() - 1)) end
    return v
  end
  local tensors = {}
  local function add(name, shape, data) tensors[#tensors + 1] = {name = name, shape = shape, data = data} end
  add("transformer.wte.weight", {V, C}, rand(V * C, 0.5))
  add("transformer.wpe.weight", {NP, C}, rand(NP * C, 0.1))
  for l = 0, L - 1 do
    local p = "transformer.h." .. l .. "."
    add(p .. "ln_1.weight", {C}, rand(C, 0.1, 1))
    add(p .. "ln_1.bias", {C}, rand(C, 0.1))
    add(p .. "attn.c_attn.weight", {C, 3 * C}, rand(3 * C * C, 0.3))
    add(p .. "attn.c_attn.bias", {3 * C}, rand(3 * C, 0.1))
    add(p .. "attn.c_proj.weight", {C, C}, rand(C * C, 0.3))
    add(p .. "attn.c_proj.bias", {C}, rand(C, 0.1))
    add(p .. "ln_2.weight", {C}, rand(C, 0.1, 1))
    add(p .. "ln_2.bias", {C}, rand(C, 0.1))
    add(p .. "mlp.c_fc.weight", {C, F}, rand(C * F, 0.3))
    add(p .. "mlp.c_fc.bias", {F}, rand(F, 0.1))
    add(p .. "mlp.c_proj.weight", {F, C}, rand(F * C, 0.3))
    add(p .. "mlp.c_proj.bias", {C}, rand(C, 0.1))
  end
  add("transformer.ln_f.weight", {C}, rand(C, 0.1, 1))
  add("transformer.ln_f.bias", {C}, rand(C, 0.1))
  if opts.tied == false then add("lm_head.weight", {V, C}, rand(V * C, 0.5)) end
  wb.safetensors_write(dir .. "/model.safetensors", tensors, {format = "pt"})
  local n_params = V * C + NP * C + L * (4 * C + 3 * C * C + 3 * C + C * C + C + 2 * F * C + F + C)
    + 2 * C + (opts.tied == false and V * C or 0)
  return config, n_params
end

-- Build a random Llama-family checkpoint in dir (F32, no biases; qwen2 adds q/k/v biases):
-- tokenizer.json from tests/vectors/family_qwen2_tokenizer.json, config.json, model.safetensors
-- and, when opts.eos_ids is given, generation_config.json with those eos ids. opts: model_type
-- ("llama" default, "qwen2", "mistral", "phi3": fused qkv_proj and gate_up_proj), n_embd, n_layer, n_head, n_kv_head, seed.
function T.make_tiny_llama(dir, opts)
  local wb = require("wb")
  opts = opts or {}
  local root = os.getenv("WB_SOURCE_DIR") or "."
  T.write_file(dir .. "/tokenizer.json", T.read_file(root .. "/tests/vectors/family_qwen2_tokenizer.json"))
  local tok = wb.tokenizer_load(dir .. "/tokenizer.json")
  local V, C = tok.vocab_size, opts.n_embd or 32
  local L, NH, NKV = opts.n_layer or 2, opts.n_head or 4, opts.n_kv_head or 2
  local HD, F = C // NH, 2 * C
  local mt = opts.model_type or "llama"
  math.randomseed(opts.seed or 4321)
  local function rand(n, std, base)
    local v = wb.vec(n)
    for i = 0, n - 1 do v:set(i, (base or 0) + std * (2 * math.random() - 1)) end
    return v
  end
  local tensors = {}
  local function add(name, shape, std, base)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    tensors[#tensors + 1] = {name = name, shape = shape, data = rand(n, std, base)}
  end
  add("model.embed_tokens.weight", {V, C}, 0.5)
  for l = 0, L - 1 do
    local p = "model.layers." .. l .. "."
    add(p .. "input_layernorm.weight", {C}, 0.1, 1)
    if mt == "phi3" then -- fused projections
      add(p .. "self_attn.qkv_proj.weight", {(NH + 2 * NKV) * HD, C}, 0.3)
    else
      add(p .. "self_attn.q_proj.weight", {NH * HD, C}, 0.3)
      add(p .. "self_attn.k_proj.weight", {NKV * HD, C}, 0.3)
      add(p .. "self_attn.v_proj.weight", {NKV * HD, C}, 0.3)
    end
    if mt == "qwen2" then
      add(p .. "self_attn.q_proj.bias", {NH * HD}, 0.2)
      add(p .. "self_attn.k_proj.bias", {NKV * HD}, 0.2)
      add(p .. "self_attn.v_proj.bias", {NKV * HD}, 0.2)
    end
    add(p .. "self_attn.o_proj.weight", {C, NH * HD}, 0.2)
    add(p .. "post_attention_layernorm.weight", {C}, 0.1, 1)
    if mt == "phi3" then
      add(p .. "mlp.gate_up_proj.weight", {2 * F, C}, 0.3)
    else
      add(p .. "mlp.gate_proj.weight", {F, C}, 0.3)
      add(p .. "mlp.up_proj.weight", {F, C}, 0.3)
    end
    add(p .. "mlp.down_proj.weight", {C, F}, 0.2)
  end
  add("model.norm.weight", {C}, 0.1, 1)
  wb.safetensors_write(dir .. "/model.safetensors", tensors, {format = "pt"})
  local arch = {llama = "LlamaForCausalLM", qwen2 = "Qwen2ForCausalLM", mistral = "MistralForCausalLM",
    phi3 = "Phi3ForCausalLM"}
  T.write_file(dir .. "/config.json", wb.json.encode({
    model_type = mt, architectures = {arch[mt]}, vocab_size = V, hidden_size = C,
    intermediate_size = F, num_hidden_layers = L, num_attention_heads = NH,
    num_key_value_heads = NKV, max_position_embeddings = 256, rms_norm_eps = 1e-6,
    rope_theta = 10000.0, tie_word_embeddings = true, hidden_act = "silu",
  }))
  if opts.eos_ids then
    T.write_file(dir .. "/generation_config.json", wb.json.encode({eos_token_id = opts.eos_ids}))
  end
  return tok
end


-- Write model.safetensors of a random Qwen2-shaped checkpoint to dir: BF16 tensors with q/k/v
-- biases, vocab 640, 4 query and 2 key/value heads, from a 32-bit xorshift so the weights are the
-- same on every machine. The caller writes config.json and the tokenizer files. opts: n_embd,
-- n_ff, n_layer, seed (all required). Returns the tensor list (name, shape, data, dtype).
function T.write_qwen2_bf16(dir, opts)
  local wb = require("wb")
  local V, C, F, L, NH, NKV = 640, opts.n_embd, opts.n_ff, opts.n_layer, 4, 2
  local HD = C // NH
  local seed = opts.seed
  local function rand()
    seed = seed ~ (seed << 13) & 0xffffffff; seed = seed ~ (seed >> 17); seed = seed ~ (seed << 5) & 0xffffffff
    return (seed % 2000) / 1000 - 1
  end
  local tensors = {}
  local function add(name, shape, scale)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    local v = wb.vec(n)
    for i = 0, n - 1 do v:set(i, scale and rand() * scale or 1 + 0.1 * rand()) end
    tensors[#tensors + 1] = { name = name, shape = shape, data = v, dtype = "BF16" }
  end
  add("model.embed_tokens.weight", { V, C }, 0.5)
  for l = 0, L - 1 do
    local p = "model.layers." .. l .. "."
    add(p .. "input_layernorm.weight", { C })
    add(p .. "self_attn.q_proj.weight", { NH * HD, C }, 0.3)
    add(p .. "self_attn.k_proj.weight", { NKV * HD, C }, 0.3)
    add(p .. "self_attn.v_proj.weight", { NKV * HD, C }, 0.3)
    add(p .. "self_attn.q_proj.bias", { NH * HD }, 0.2)
    add(p .. "self_attn.k_proj.bias", { NKV * HD }, 0.2)
    add(p .. "self_attn.v_proj.bias", { NKV * HD }, 0.2)
    add(p .. "self_attn.o_proj.weight", { C, NH * HD }, 0.2)
    add(p .. "post_attention_layernorm.weight", { C })
    add(p .. "mlp.gate_proj.weight", { F, C }, 0.3)
    add(p .. "mlp.up_proj.weight", { F, C }, 0.3)
    add(p .. "mlp.down_proj.weight", { C, F }, 0.2)
  end
  add("model.norm.weight", { C })
  wb.safetensors_write(dir .. "/model.safetensors", tensors, { format = "pt" })
  return tensors
end
-- ---- lesson tests: scripts/*.lua run on the shipped TinyLM ----------------------------------

-- The shipped TinyLM's weights. On a fresh checkout (before scripts/train_tinylm.lua) a test that
-- needs them prints SKIP and exits 0.
T.TINYLM = "models/tinylm-base/model.safetensors"
function T.require_tinylm()
  local f = io.open(T.TINYLM, "rb")
  if not f then
    print("SKIP: " .. T.TINYLM .. " is absent (train it with scripts/train_tinylm.lua)")
    os.exit(0)
  end
  f:close()
end

-- The workbench executable running this test (lessons are run with it as separate processes).
T.EXE = arg and arg[-1] or "workbench"

-- Run `T.EXE script args` with env in front (default "WB_MODEL=": the shipped model) and
-- WB_LESSON_RECORD pointing into dir; stdout and stderr go to files in dir. A failing script
-- fails the caller's check with both streams. Returns stdout and the decoded record.
function T.lesson_record(dir, script, args, env)
  local path = dir .. "/record.json"
  os.remove(path)
  local out, errf = dir .. "/out.txt", dir .. "/err.txt"
  local ok = os.execute(("%s WB_LESSON_RECORD=%s %s %s %s > %s 2> %s"):format(env or "WB_MODEL=",
    path, T.EXE, script, args or "", out, errf))
  local text = T.read_file(out)
  T.check(ok, ("%s failed:\n%s\n%s"):format(script, text, T.read_file(errf)), 2)
  return text, require("wb").json.decode(T.read_file(path))
end

-- The conclusion with this id in a lesson record; an error naming the id when there is none.
function T.conclusion(rec, id)
  for _, c in ipairs(rec.conclusions or {}) do if c.id == id then return c end end
  error("no conclusion " .. id, 2)
end

return T
