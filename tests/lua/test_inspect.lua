-- Looking inside the model through the binding, on TinyLM: hidden states, attention weights and
-- the KV cache views against a plain-loop double-precision GPT-2 written here from the weights
-- file, the options' errors, the views' lifetimes, and no change to the normal path.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local model = wb.load()
local tok = model.tokenizer
local info = model:info()
local C, L, NH, V = info.n_embd, info.n_layer, info.n_head, info.vocab_size
local hs = C // NH

-- ------------------------------------------------------------------ the reference (doubles)
local st = wb.safetensors_read(model.dir .. "/model.safetensors")
local function w(name)
  local e = st["transformer." .. name] or error("no tensor " .. name)
  return e.vec:totable() -- 1-based: w[i + 1] is element i
end

local function layernorm(x, g, b)
  local mean, var = 0, 0
  for i = 1, C do mean = mean + x[i] end
  mean = mean / C
  for i = 1, C do var = var + (x[i] - mean) ^ 2 end
  var = var / C
  local out, r = {}, 1 / math.sqrt(var + 1e-5)
  for i = 1, C do out[i] = (x[i] - mean) * r * g[i] + b[i] end
  return out
end

-- y[out] = x[in] . W (Conv1D [in, out]) + b
local function conv1d(x, W, b, n_in, n_out)
  local y = {}
  for j = 1, n_out do y[j] = b[j] end
  for i = 1, n_in do
    local xi, base = x[i], (i - 1) * n_out
    for j = 1, n_out do y[j] = y[j] + xi * W[base + j] end
  end
  return y
end

local function gelu(v) return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end

-- hid[l + 1][t] (l = 0..L), att[l + 1][t][h][j], keys[l + 1][t], vals[l + 1][t], logits[t]
local function reference(ids)
  local n = #ids
  local wte, wpe = w("wte.weight"), w("wpe.weight")
  local x, hid, att, keys, vals = {}, {}, {}, {}, {}
  for t = 1, n do
    x[t] = {}
    for i = 1, C do x[t][i] = wte[ids[t] * C + i] + wpe[(t - 1) * C + i] end
  end
  local function snap() local c = {} for t = 1, n do c[t] = table.move(x[t], 1, C, 1, {}) end return c end
  hid[1] = snap()
  for l = 0, L - 1 do
    local p = "h." .. l .. "."
    local l1w, l1b, aw, ab = w(p .. "ln_1.weight"), w(p .. "ln_1.bias"), w(p .. "attn.c_attn.weight"), w(p .. "attn.c_attn.bias")
    local pw, pb, l2w, l2b = w(p .. "attn.c_proj.weight"), w(p .. "attn.c_proj.bias"), w(p .. "ln_2.weight"), w(p .. "ln_2.bias")
    local fw, fb, mw, mb = w(p .. "mlp.c_fc.weight"), w(p .. "mlp.c_fc.bias"), w(p .. "mlp.c_proj.weight"), w(p .. "mlp.c_proj.bias")
    local qkv = {}
    for t = 1, n do qkv[t] = conv1d(layernorm(x[t], l1w, l1b), aw, ab, C, 3 * C) end
    keys[l + 1], vals[l + 1], att[l + 1] = {}, {}, {}
    for t = 1, n do
      keys[l + 1][t] = table.move(qkv[t], C + 1, 2 * C, 1, {})
      vals[l + 1][t] = table.move(qkv[t], 2 * C + 1, 3 * C, 1, {})
    end
    for t = 1, n do
      local a = {}
      att[l + 1][t] = {}
      for h = 0, NH - 1 do
        local sc, mx = {}, -math.huge
        for u = 1, t do
          local d = 0
          for i = 1, hs do d = d + qkv[t][h * hs + i] * qkv[u][C + h * hs + i] end
          sc[u] = d / math.sqrt(hs)
          mx = math.max(mx, sc[u])
        end
        local sum = 0
        for u = 1, t do sc[u] = math.exp(sc[u] - mx); sum = sum + sc[u] end
        local row = {}
        for u = 1, n do row[u] = u <= t and sc[u] / sum or 0 end
        att[l + 1][t][h + 1] = row
        for i = 1, hs do
          local o = 0
          for u = 1, t do o = o + row[u] * qkv[u][2 * C + h * hs + i] end
          a[h * hs + i] = o
        end
      end
      local pr = conv1d(a, pw, pb, C, C)
      for i = 1, C do x[t][i] = x[t][i] + pr[i] end
      local hmid = conv1d(layernorm(x[t], l2w, l2b), fw, fb, C, 4 * C)
      for i = 1, 4 * C do hmid[i] = gelu(hmid[i]) end
      local mo = conv1d(hmid, mw, mb, 4 * C, C)
      for i = 1, C do x[t][i] = x[t][i] + mo[i] end
    end
    hid[l + 2] = snap()
  end
  local lfw, lfb, logits = w("ln_f.weight"), w("ln_f.bias"), {}
  for t = 1, n do
    local xn = layernorm(x[t], lfw, lfb)
    local row = {}
    for v = 0, V - 1 do
      local s = 0
      for i = 1, C do s = s + xn[i] * wte[v * C + i] end
      row[v + 1] = s
    end
    logits[t] = row
  end
  return {hid = hid, att = att, keys = keys, vals = vals, logits = logits}
end

local ids = tok:encode("Customer (Ana): Hi, my")
local n = #ids
local ref = reference(ids)

local function maxdiff_vec(vec, tbl)
  local d = 0
  for i = 0, #vec - 1 do d = math.max(d, math.abs(vec:get(i) - tbl[i + 1])) end
  return d
end

-- ------------------------------------------------------------------------------- tests
T.test("hidden states of model:forward match the plain-loop reference", function()
  local r = model:forward(ids, {hidden_states = true})
  T.same_list(r.hidden_states:shape(), {L + 1, n, C}, "shape")
  local worst = 0
  for l = 0, L do
    for t = 0, n - 1 do worst = math.max(worst, maxdiff_vec(r.hidden_states:vec(l, t), ref.hid[l + 1][t + 1])) end
  end
  T.check(worst < 1e-3, ("hidden states differ by %.3g"):format(worst))
  T.check(maxdiff_vec(r.logits, ref.logits[n]) < 1e-3, "logits")
end)

T.test("attention weights match the reference, sum to 1 and are causal", function()
  local r = model:forward(ids, {attentions = true})
  T.same_list(r.attentions:shape(), {L, n, NH, n}, "shape (every position by default)")
  T.same_list(r.positions, (function() local p = {} for t = 0, n - 1 do p[t + 1] = t end return p end)())
  local worst, worst_sum = 0, 0
  for l = 0, L - 1 do
    for t = 0, n - 1 do
      for h = 0, NH - 1 do
        local row = r.attentions:vec(l, t, h)
        worst = math.max(worst, maxdiff_vec(row, ref.att[l + 1][t + 1][h + 1]))
        worst_sum = math.max(worst_sum, math.abs(row:sum() - 1))
        for j = t + 1, n - 1 do T.eq(row:get(j), 0, "weight on a later position") end
      end
    end
  end
  T.check(worst < 1e-5, ("attention differs by %.3g"):format(worst))
  T.check(worst_sum < 1e-5, ("a row sums to 1 +- %.3g"):format(worst_sum))
end)

T.test("a session's chosen positions and a probed decode give the reference rows", function()
  local s <close> = model:session()
  s:prefill(table.move(ids, 1, 3, 1, {}))
  local logits, ins = s:prefill(table.move(ids, 4, n - 1, 1, {}), {positions = {-1, 3}, hidden_states = true})
  T.eq(wb.Vec == getmetatable(logits).__index, true, "first result is the logits Vec")
  T.same_list(ins.positions, {n - 2, 3})
  T.same_list(ins.attentions:shape(), {L, 2, NH, n - 1})
  T.same_list(ins.hidden_states:shape(), {L + 1, n - 4, C})
  local lg, one = s:decode(ids[n], {attentions = true, hidden_states = true})
  T.same_list(one.positions, {n - 1})
  local worst = 0
  for l = 0, L - 1 do
    for h = 0, NH - 1 do
      worst = math.max(worst, maxdiff_vec(one.attentions:vec(l, 0, h), ref.att[l + 1][n][h + 1]))
      local r1 = ref.att[l + 1][n - 1][h + 1]
      worst = math.max(worst, maxdiff_vec(ins.attentions:vec(l, 0, h), table.move(r1, 1, n - 1, 1, {})))
      local r2 = ref.att[l + 1][4][h + 1]
      worst = math.max(worst, maxdiff_vec(ins.attentions:vec(l, 1, h), table.move(r2, 1, n - 1, 1, {})))
    end
  end
  T.check(worst < 1e-5, ("session attention differs by %.3g"):format(worst))
  T.check(maxdiff_vec(one.hidden_states:vec(L, 0), ref.hid[L + 1][n]) < 1e-3, "decode hidden state")
  T.check(maxdiff_vec(lg, ref.logits[n]) < 1e-3, "decode logits")
end)

T.test("s:kv(layer) views equal the reference keys and values", function()
  local s <close> = model:session()
  s:prefill(ids)
  for l = 0, L - 1 do
    local k, v = s:kv(l)
    T.same_list(k:shape(), {n, NH, hs})
    local dk, dv = 0, 0
    for t = 0, n - 1 do
      for h = 0, NH - 1 do
        for i = 0, hs - 1 do
          dk = math.max(dk, math.abs(k:get(t, h, i) - ref.keys[l + 1][t + 1][h * hs + i + 1]))
          dv = math.max(dv, math.abs(v:get(t, h, i) - ref.vals[l + 1][t + 1][h * hs + i + 1]))
        end
      end
    end
    T.check(dk < 1e-4 and dv < 1e-4, ("layer %d: K %.3g V %.3g"):format(l, dk, dv))
  end
  T.checkerror("layer 4 out of range", s.kv, s, L)
end)

T.test("a view keeps its session alive and refuses to read once it is truncated or closed", function()
  local k
  do
    local s = model:session()
    s:prefill(ids)
    k = s:kv(1)
  end
  collectgarbage()
  collectgarbage()
  T.check(k:valid(), "the view keeps the dropped session alive")
  local x = k:get(n - 1, 0, 0)
  T.check(x == x and x ~= 0, "reads a cached key")
  local s <close> = model:session()
  s:prefill(ids)
  local k2, v2 = s:kv(0)
  local row = k2:select(2) -- a view of a view
  T.same_list(row:shape(), {NH, hs})
  T.eq(row:get(1, 3), k2:get(2, 1, 3))
  s:decode(5) -- appending leaves the viewed rows as they were
  T.check(k2:valid(), "still valid after appending")
  s:truncate(2)
  T.check(not k2:valid() and not row:valid(), "invalid after truncate")
  T.checkerror("no longer valid", k2.get, k2, 0, 0, 0)
  T.checkerror("no longer valid", row.totable, row)
  local k3 = s:kv(0)
  T.eq(#k3, 2, "a fresh view has the rows that are left")
  s:close()
  T.checkerror("no longer valid", k3.vec, k3, 0, 0)
  T.checkerror("closed Session", s.kv, s, 0)
end)

T.test("the normal path is unchanged: logits bit for bit with and without inspection", function()
  local plain = model:logits(ids)
  local r = model:forward(ids, {hidden_states = true, attentions = true})
  local f = model:forward(ids)
  for i = 0, V - 1 do
    if plain:get(i) ~= r.logits:get(i) or plain:get(i) ~= f.logits:get(i) then
      error("logit " .. i .. " moved")
    end
  end
  T.eq(f.hidden_states, nil)
  T.eq(f.attentions, nil)
  local s <close> = model:session()
  local a = s:prefill(ids)
  local s2 <close> = model:session()
  local b, ins = s2:prefill(ids, {attentions = true, positions = {-1}})
  for i = 0, V - 1 do if a:get(i) ~= b:get(i) then error("session logit " .. i .. " moved") end end
  T.check(ins ~= nil and select("#", s:prefill({1})) == 1, "one result without options")
end)

T.test("the last hidden state through model:head is the model's logits", function()
  local r = model:forward(ids, {hidden_states = true})
  local lens = model:head(r.hidden_states:vec(L, n - 1))
  T.check(maxdiff_vec(lens, ref.logits[n]) < 1e-3, "head(hidden[L]) = logits")
  T.checkerror("n_embd = 128", model.head, model, wb.vec(3))
end)

T.test("inspection options are checked", function()
  T.checkerror("unknown option 'hidden'", model.forward, model, ids, {hidden = true})
  T.checkerror("is not a position of this call", model.forward, model, ids, {positions = {n}})
  T.checkerror("positions[2] is not an integer", model.forward, model, ids, {positions = {0, 1.5}})
  T.checkerror("empty list", model.forward, model, ids, {positions = {}})
  local s <close> = model:session()
  s:prefill(ids)
  T.checkerror("is not a position of this call", s.prefill, s, {1, 2}, {positions = {0}})
  T.checkerror("unknown option 'all'", s.decode, s, 3, {all = true})
  T.eq(s:pos(), n, "a refused call leaves the session as it was")
  local t = model:forward({1, 2, 3}, {attentions = true}).attentions
  local nested = t:totable()
  T.eq(#nested, L)
  T.eq(nested[2][3][4][1], t:get(1, 2, 3, 0))
  T.check(tostring(t) == "Tensor[4, 3, 4, 3]", tostring(t))
  T.checkerror("get needs 4 indices", t.get, t, 0, 0)
  T.checkerror("index 4 out of range", t.get, t, 4, 0, 0, 0)
end)

-- ------------------------------------------------------ a Llama-family model: GQA and RoPE
T.test("on a Qwen2-shaped model (GQA 4:2, RoPE) attention and keys match a Lua reference", function()
  local root = os.getenv("WB_SOURCE_DIR") or "."
  local dir = T.tmpdir()
  local QC, QF, QNH, QNKV = 32, 64, 4, 2
  local HD = QC // QNH
  T.write_qwen2_bf16(dir, { n_embd = QC, n_ff = QF, n_layer = 1, seed = 4242 })
  T.write_file(dir .. "/tokenizer.json", T.read_file(root .. "/tests/vectors/family_qwen2_tokenizer.json"))
  T.write_file(dir .. "/config.json", wb.json.encode({
    model_type = "qwen2", vocab_size = 640, hidden_size = QC, intermediate_size = QF,
    num_hidden_layers = 1, num_attention_heads = QNH, num_key_value_heads = QNKV,
    max_position_embeddings = 64, rms_norm_eps = 1e-6, rope_theta = 1000000.0,
    tie_word_embeddings = true, hidden_act = "silu" }))
  local qm = wb.load(dir)
  local w = {}
  for name, e in pairs(wb.safetensors_read(dir .. "/model.safetensors")) do w[name] = e.vec:totable() end
  -- where the kernels multiply BF16 matrices by BF16-rounded activations, so does the reference
  local bits = qm:info().bf16_input_bits
  T.check(bits == 16 or bits == 32, "bf16_input_bits " .. tostring(bits))
  local function input(x)
    if bits == 32 then return x end
    local u = string.unpack("<I4", string.pack("<f", x))
    if u & 0x7f800000 == 0 then u = u & 0x80000000 else u = u + 0x7fff + ((u >> 16) & 1) end
    return string.unpack("<f", string.pack("<I4", u & 0xffff0000))
  end
  local qids = { 5, 77, 300, 12, 639, 41, 8 }
  local n = #qids
  -- q, k per position: rmsnorm(x) * g, projections with bias, rotate-half RoPE at position t
  local function proj(W, b, x, rows)
    local y = {}
    for r = 1, rows do
      local s = b[r]
      for i = 1, QC do s = s + W[(r - 1) * QC + i] * input(x[i]) end
      y[r] = s
    end
    return y
  end
  local function rope(v, heads, t)
    local h = HD // 2
    for hh = 0, heads - 1 do
      for i = 1, h do
        local ang = t / (1000000.0 ^ (2 * (i - 1) / HD))
        local a, bb = v[hh * HD + i], v[hh * HD + h + i]
        v[hh * HD + i] = a * math.cos(ang) - bb * math.sin(ang)
        v[hh * HD + h + i] = bb * math.cos(ang) + a * math.sin(ang)
      end
    end
  end
  local q, k = {}, {}
  local p = "model.layers.0."
  for t = 1, n do
    local x, ss = {}, 0
    for i = 1, QC do x[i] = w["model.embed_tokens.weight"][qids[t] * QC + i]; ss = ss + x[i] ^ 2 end
    local r = 1 / math.sqrt(ss / QC + 1e-6)
    for i = 1, QC do x[i] = x[i] * r * w[p .. "input_layernorm.weight"][i] end
    q[t] = proj(w[p .. "self_attn.q_proj.weight"], w[p .. "self_attn.q_proj.bias"], x, QNH * HD)
    k[t] = proj(w[p .. "self_attn.k_proj.weight"], w[p .. "self_attn.k_proj.bias"], x, QNKV * HD)
    rope(q[t], QNH, t - 1)
    rope(k[t], QNKV, t - 1)
  end
  local r = qm:forward(qids, { attentions = true })
  T.same_list(r.attentions:shape(), { 1, n, QNH, n })
  local worst = 0
  for t = 1, n do
    for h = 0, QNH - 1 do
      local kh = h // (QNH // QNKV)
      local sc, mx, sum = {}, -math.huge, 0
      for j = 1, t do
        local d = 0
        for i = 1, HD do d = d + q[t][h * HD + i] * k[j][kh * HD + i] end
        sc[j] = d / math.sqrt(HD)
        mx = math.max(mx, sc[j])
      end
      for j = 1, t do sc[j] = math.exp(sc[j] - mx); sum = sum + sc[j] end
      for j = 1, n do
        worst = math.max(worst, math.abs(r.attentions:get(0, t - 1, h, j - 1) - (j <= t and sc[j] / sum or 0)))
      end
    end
  end
  T.check(worst < 1e-4, ("GQA attention differs from the reference by %.3g"):format(worst))
  local s <close> = qm:session()
  s:prefill(qids)
  local keys = s:kv(0)
  T.same_list(keys:shape(), { n, QNKV, HD }, "the cache keeps the kv heads only")
  local dk = 0
  for t = 1, n do
    for hh = 0, QNKV - 1 do
      for i = 0, HD - 1 do dk = math.max(dk, math.abs(keys:get(t - 1, hh, i) - k[t][hh * HD + i + 1])) end
    end
  end
  T.check(dk < 1e-4, ("post-RoPE keys differ by %.3g"):format(dk))
  local lens = qm:head(qm:forward(qids, { hidden_states = true }).hidden_states:vec(1, n - 1))
  local d = 0
  for i = 0, #lens - 1 do d = math.max(d, math.abs(lens:get(i) - r.logits:get(i))) end
  T.check(d < 1e-4, ("the lens after the last layer is not the logits: %.3g"):format(d))
  s:close()
  qm:close()
  T.rmdir(dir)
end)

T.done()
