-- test_lesson_quantization.lua - scripts/quantization.lua on the shipped TinyLM with the
-- llama.cpp-made Q4_K_M of the same weights (tests/vectors/gguf/tinylm-q4_k_m.gguf): the table's
-- structure, figures recomputed here from raw logits by another code path, every printed
-- sentence recomputed from the record, GGUFs of other models refused naming the file, and issue
-- 15's output check: greedy Q8_0 tokens equal BF16's on the lesson prompts wherever BF16's margin
-- is clear.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local root = os.getenv("WB_SOURCE_DIR") or "."

local dir = T.tmpdir()
local VEC = root .. "/tests/vectors/gguf/tinylm-q4_k_m.gguf"
local conclusion = T.conclusion

local function file_size(path)
  local f = assert(io.open(path, "rb"))
  local n = f:seek("end")
  f:close()
  return n
end

-- Log-probabilities in double from a row of raw logits (a Vec): no Vec:log_softmax involved.
local function logprobs(v)
  local t = v:totable()
  local mx = -math.huge
  for i = 1, #t do if t[i] > mx then mx = t[i] end end
  local s = 0
  for i = 1, #t do s = s + math.exp(t[i] - mx) end
  local lse = mx + math.log(s)
  for i = 1, #t do t[i] = t[i] - lse end
  return t
end

local function argmax(t)
  local b = 1
  for i = 2, #t do if t[i] > t[b] then b = i end end
  return b - 1
end

-- The text llama-perplexity scored for the vector's record (make_tinylm_q4_k_m.sh): the corpus'
-- held-out split without its "<|endoftext|>" lines, 4 chunks of 128 tokens.
local META = require("wb").json.decode(T.read_file(VEC .. ".json"))
local LP = META.llama_perplexity
local TEXT = require("wb.corpus").generate({ seed = 1 }).val:gsub("<|endoftext|>\n", "")
T.write_file(dir .. "/text.txt", TEXT)
local out, rec = T.lesson_record(dir, "scripts/quantization.lua",
  ("--repeats 2 --chunks %d --ctx %d --text %s --gguf %s"):format(LP.chunks, LP.ctx,
    dir .. "/text.txt", VEC))

T.test("quantization.lua: one table, one row per way of holding the weights", function()
  local labels = { "F32 (as stored)", "BF16", "Q8_0", "Q4_0", "GGUF tinylm-q4_k_m.gguf" }
  local header, lines = nil, {}
  for line in out:gmatch("[^\n]+") do
    if line:match("^| weights |") then header = line
    elseif header and line:match("^| ") then lines[#lines + 1] = line end
  end
  T.check(header, "no table header printed")
  local function cells(line)
    local c = {}
    for cell in line:gmatch("|([^|]*)") do c[#c + 1] = cell:match("^%s*(.-)%s*$") end
    c[#c] = nil -- after the last bar
    return c
  end
  local head = cells(header)
  for _, want in ipairs({ "GGUF MB", "read MB", "decode (ms/token)", "perplexity", "KL mean",
                          "KL median", "KL p99", "KL max", "top-1 same" }) do
    local found = false
    for _, h in ipairs(head) do if h == want then found = true end end
    T.check(found, "column missing: " .. want)
  end
  T.eq(#lines, #labels)
  T.eq(#rec.rows, #labels)
  local col = {}
  for i, h in ipairs(head) do col[h] = i end
  for i, line in ipairs(lines) do
    local c, r = cells(line), rec.rows[i]
    T.eq(#c, #head)
    T.eq(c[1], labels[i])
    T.eq(r.label, labels[i])
    -- the printed figures are the record's
    T.eq(c[col["KL mean"]], ("%.6f +- %.6f"):format(r.kl_mean, r.kl_se))
    T.eq(c[col["perplexity"]], ("%.3f +- %.3f"):format(r.ppl, r.ppl_se))
    T.eq(c[col["GGUF MB"]], ("%.2f"):format(r.file_bytes / 1e6))
    T.check(c[col["decode (ms/token)"]]:match("^[%d.]+ %[[%d.]+ %- [%d.]+%]$"),
      "decode cell is median [min - max]: " .. c[col["decode (ms/token)"]])
    T.eq(#r.decode_runs, 2)
  end
  T.check(lines[5]:find("same weights", 1, true), "the GGUF row says it holds the same weights")
end)

T.test("quantization.lua: figures recomputed from raw logits (model:logits, not the session)", function()
  local wb = require("wb")
  local f32 = wb.load()
  local q8 = wb.load(nil, { weights = "q8_0" })
  local gg = wb.load(VEC)
  local ids = f32.tokenizer:encode(TEXT)
  local by = {}
  for _, r in ipairs(rec.rows) do by[r.key] = r end
  T.eq(rec.positions, rec.chunks * (rec.ctx - 1 - rec.first))
  local k, nll_ref, nll_gg, kl_sum, worst = 0, 0, 0, 0, 0
  for c = 0, rec.chunks - 1 do
    local ch = { table.unpack(ids, c * rec.ctx + 1, (c + 1) * rec.ctx) }
    local a, b, g = f32:logits(ch, { all = true }), q8:logits(ch, { all = true }), gg:logits(ch, { all = true })
    for j = rec.first, rec.ctx - 2 do
      k = k + 1
      local p, q, r = logprobs(a[j + 1]), logprobs(b[j + 1]), logprobs(g[j + 1])
      local kl = 0
      for i = 1, #p do kl = kl + math.exp(p[i]) * (p[i] - q[i]) end
      -- each position's KL, as the lesson recorded it
      worst = math.max(worst, math.abs(kl - by.q8_0.kl[k]))
      kl_sum = kl_sum + kl
      nll_ref = nll_ref - p[ch[j + 2] + 1]
      nll_gg = nll_gg - r[ch[j + 2] + 1]
    end
  end
  T.eq(k, rec.positions)
  T.check(worst < 2e-6, "Q8_0 KL per position differs from the lesson's by " .. worst)
  T.check(math.abs(kl_sum / k - by.q8_0.kl_mean) < 1e-6, "Q8_0 mean KL")
  local ppl_ref, ppl_gg = math.exp(nll_ref / k), math.exp(nll_gg / k)
  T.check(math.abs(ppl_ref - by.as_stored.ppl) < 1e-5 * ppl_ref, ("F32 perplexity %.6f against %.6f"):format(ppl_ref, by.as_stored.ppl))
  T.check(math.abs(ppl_gg - by.gguf.ppl) < 1e-5 * ppl_gg, ("Q4_K_M perplexity %.6f against %.6f"):format(ppl_gg, by.gguf.ppl))
  -- what the rows must show whatever the run
  local s, bf, q8r, q4, g = by.as_stored, by.bf16, by.q8_0, by.q4_0, by.gguf
  T.eq(s.kl_mean, 0); T.eq(s.top1, 1); T.eq(s.kl_max, 0)
  T.check(bf.kl_mean < q8r.kl_mean and q8r.kl_mean < q4.kl_mean, "KL: BF16 < Q8_0 < Q4_0")
  T.check(q8r.kl_mean < 0.01 and q8r.top1 > 0.9, "Q8_0 stays close")
  T.check(g.kl_mean > 0 and g.kl_mean < q4.kl_mean, "the Q4_K_M file (mostly 5- and 8-bit here) sits between")
  T.check(q8r.mem_bytes < 0.3 * s.mem_bytes and q4.mem_bytes < q8r.mem_bytes, "bytes read: F32 > Q8_0 > Q4_0")
  T.eq(g.file_bytes, file_size(VEC))
  T.check(g.embedding_rel_rms > 0 and g.embedding_rel_rms < 0.1, "same weights, rounded: " .. g.embedding_rel_rms)
end)

T.test("quantization.lua: the Q4_K_M vector is llama-quantize's file of the shipped weights", function()
  local wb = require("wb")
  local meta = META
  local h = wb.sha256()
  h:update(T.read_file(root .. "/models/tinylm-base/model.safetensors"))
  T.eq(meta.source_sha256, h:hex()) -- retrained TinyLM: rerun tests/vectors/gguf/make_tinylm_q4_k_m.sh
  local counts = {}
  for _, t in pairs(meta.tensor_types) do counts[t] = (counts[t] or 0) + 1 end
  local loaded = wb.load(VEC):info().tensor_types
  for t, n in pairs(counts) do T.eq(loaded[t], n) end
  for t, n in pairs(loaded) do T.eq(counts[t], n) end
  T.check(counts.Q4_K and counts.Q6_K, "K types present")
end)

-- llama.cpp's own report on the same text, files and chunks (llama-perplexity --kl-divergence,
-- recorded by make_tinylm_q4_k_m.sh). Its F32 GPT-2 logits differ from ours by its half-precision
-- GELU table (docs/gguf.md: 5e-3), and it quantizes the activations of the quantized products
-- its own way, so the figures agree closely but not to the last digit.
T.test("quantization.lua: the F32 and Q4_K_M rows agree with llama-perplexity's report", function()
  local wb = require("wb")
  local h = wb.sha256()
  h:update(TEXT)
  T.eq(h:hex(), LP.text_sha256) -- the same text
  local by = {}
  for _, r in ipairs(rec.rows) do by[r.key] = r end
  local s, g = by.as_stored, by.gguf
  local function near(what, ours, theirs, rel)
    T.check(math.abs(ours - theirs) <= rel * math.abs(theirs),
      ("%s: %.6g here, %.6g in llama-perplexity (tolerance %g%%)"):format(what, ours, theirs, 100 * rel), 2)
  end
  T.eq(rec.positions, LP.chunks * (LP.ctx - 1 - LP.ctx // 2))
  near("perplexity of the F32 reference", s.ppl, LP.ppl_base, 0.01)
  near("its standard error", s.ppl_se, LP.ppl_base_se, 0.05)
  near("perplexity of the Q4_K_M file", g.ppl, LP.ppl_q, 0.01)
  near("mean KL of the Q4_K_M file", g.kl_mean, LP.kld_mean, 0.1)
  -- the largest KL is one position's, the least stable figure: with Q5_0 multiplied natively
  -- (as llama.cpp does) the top-1 rate and mean KL came closer to its report and this one moved
  -- from 5% to 12% away
  near("largest KL", g.kl_max, LP.kld_max, 0.2)
  T.check(math.abs(100 * g.top1 - LP.same_top_percent) <= 2,
    ("same top token %.2f%% here, %.2f%% in llama-perplexity"):format(100 * g.top1, LP.same_top_percent))
end)

T.test("quantization.lua: conclusions printed and recomputed from the record", function()
  local flat = out:gsub("%s+", " ")
  for _, c in ipairs(rec.conclusions) do
    T.check(flat:find(c.text:gsub("%s+", " "), 1, true), "conclusion not printed: " .. c.text)
  end
  local by = {}
  for _, r in ipairs(rec.rows) do by[r.key] = r end
  local s, q8, q4, g = by.as_stored, by.q8_0, by.q4_0, by.gguf
  T.eq(conclusion(rec, "q8_smaller").holds, q8.mem_bytes < s.mem_bytes)
  T.eq(conclusion(rec, "q4_worse_than_q8").holds, q4.kl_mean > q8.kl_mean)
  T.eq(conclusion(rec, "q8_ppl_close").holds, math.abs(q8.ppl - s.ppl) < 0.01 * s.ppl)
  T.eq(conclusion(rec, "q8_greedy_clear").holds,
       q8.greedy.clear > 0 and q8.greedy.clear == q8.greedy.clear_same)
  T.eq(conclusion(rec, "gguf_vs_q4").holds, g.kl_mean < q4.kl_mean)
  local lo, hi = math.huge, -math.huge
  for _, x in ipairs(s.decode_runs) do lo = math.min(lo, x) end
  for _, x in ipairs(q8.decode_runs) do hi = math.max(hi, x) end
  T.eq(conclusion(rec, "q8_decode_faster").holds, hi < lo)
  if rec.l3_bytes ~= require("wb").json.null then
    T.eq(conclusion(rec, "fits_in_cache").holds, s.mem_bytes <= rec.l3_bytes)
  end
end)

-- The class of input, not only TinyLM: a llama-architecture model whose rows are 256 wide, so
-- that llama-quantize's Q4_K_M really is Q4_K and Q6_K (tests/vectors/gguf/kq-llama-q4_k_m.gguf,
-- made from the F32 GGUF of bench/peer/make_fixtures.lua's seeded kquant checkpoint, remade here).
T.test("quantization.lua: a llama model with a Q4_K / Q6_K file of the same weights", function()
  local kq = dir .. "/kq"
  os.execute(("mkdir -p '%s'"):format(kq))
  T.check(os.execute(("%s bench/peer/make_fixtures.lua '%s' kquant > /dev/null"):format(T.EXE, kq)),
    "make_fixtures kquant")
  local kvec = root .. "/tests/vectors/gguf/kq-llama-q4_k_m.gguf"
  local kout, krec = T.lesson_record(dir, "scripts/quantization.lua",
    ("--repeats 1 --chunks 1 --model %s/kq-llama --gguf %s"):format(kq, kvec))
  local by = {}
  for _, r in ipairs(krec.rows) do by[r.key] = r end
  T.eq(krec.stored_type, "F32")
  -- the BF16 row's note on the activations' rounding: printed exactly where the kernels round them
  local bits = require("wb").load(kq .. "/kq-llama"):info().bf16_input_bits
  T.eq(kout:find("on this CPU the BF16 matrices", 1, true) ~= nil, bits == 16)
  local g = by.gguf
  T.check(g, "a GGUF row")
  T.check(g.tensor_types:find("Q4_K", 1, true) and g.tensor_types:find("Q6_K", 1, true)
    and not g.tensor_types:find("Q5", 1, true), "true K types: " .. g.tensor_types)
  T.check(g.embedding_rel_rms < 0.1, "same weights: " .. g.embedding_rel_rms)
  T.check(by.bf16.kl_mean < by.q8_0.kl_mean and by.q8_0.kl_mean < g.kl_mean and g.kl_mean < by.q4_0.kl_mean,
    "KL: BF16 < Q8_0 < Q4_K_M < Q4_0")
  T.check(g.mem_bytes < by.q8_0.mem_bytes, "Q4_K_M reads less than Q8_0 when it is really 4-bit")
  T.check(kout:find("| GGUF kq-llama-q4_k_m.gguf |", 1, true), "row printed")
end)

-- Runs the lesson expecting it to stop; returns its stderr.
local function refused(args)
  local errf = dir .. "/refused.txt"
  local ok = os.execute(("WB_MODEL= %s scripts/quantization.lua --repeats 1 --chunks 1 %s > /dev/null 2> %s"):format(
    T.EXE, args, errf))
  T.check(not ok, "the lesson should have stopped: " .. args, 2)
  return T.read_file(errf)
end

T.test("quantization.lua: a --gguf that is missing, not a GGUF, or another model is refused naming it", function()
  local wb = require("wb")
  local e = refused("--gguf " .. dir .. "/missing.gguf")
  T.check(e:find(dir .. "/missing.gguf", 1, true) and e:find("cannot open"), e)
  e = refused("--gguf " .. root .. "/models/tinylm-base/config.json")
  T.check(e:find("config.json", 1, true) and e:find("not a GGUF file"), e)
  -- another architecture and vocabulary (the kq-llama vectors: llama, 611 ids)
  e = refused("--gguf " .. root .. "/tests/vectors/gguf/kq-llama-q4_k_m.gguf")
  T.check(e:find("kq-llama-q4_k_m.gguf", 1, true) and e:find("not the same model"), e)
  -- a quantized model as the reference, a missing text
  e = refused("--model " .. VEC)
  T.check(e:find("tinylm-q4_k_m.gguf", 1, true) and e:find("quantized tensors"), e)
  e = refused("--text " .. dir .. "/missing.txt")
  T.check(e:find(dir .. "/missing.txt", 1, true), e)
  -- a truncated file: the reader's own error, with the file's name
  local bytes = T.read_file(VEC)
  T.write_file(dir .. "/cut.gguf", bytes:sub(1, #bytes // 2))
  e = refused("--gguf " .. dir .. "/cut.gguf")
  T.check(e:find("cut.gguf", 1, true), e)
  -- same shapes and vocabulary, other weights: TinyLM with its embedding rows rotated by one
  local src = root .. "/models/tinylm-base"
  local other = dir .. "/other"
  os.execute(("mkdir -p '%s'"):format(other))
  T.write_file(other .. "/config.json", T.read_file(src .. "/config.json"))
  T.write_file(other .. "/tokenizer.json", T.read_file(src .. "/tokenizer.json"))
  local tensors = {}
  for name, t in pairs(wb.safetensors_read(src .. "/model.safetensors")) do
    local v = t.vec
    if name:match("wte") then
      local n, C = #v, t.shape[2]
      local w = wb.vec(n)
      for i = 0, n - 1 do w:set(i, v:get((i + C) % n)) end
      v = w
    end
    tensors[#tensors + 1] = { name = name, shape = t.shape, data = v, dtype = "F32" }
  end
  wb.safetensors_write(other .. "/model.safetensors", tensors, { format = "pt" })
  wb.load(other):save_gguf(dir .. "/other.gguf", { type = "q8_0" })
  e = refused("--gguf " .. dir .. "/other.gguf")
  T.check(e:find("other.gguf", 1, true) and e:find("token embeddings"), e)
end)

-- Issue 15, Outputs: "greedy tokens of Q8_0 match BF16 on the lesson prompts of TinyLM where the
-- BF16 margin is clear". BF16 = TinyLM's weights rounded to BF16 (written as a BF16 GGUF and
-- loaded); Q8_0 = that BF16 model quantized at load. Clear = BF16's top two logits more than
-- the lesson's margin apart. Checked two ways: at every step of BF16's greedy path, and as free
-- greedy generation, whose tokens must be identical up to the first step that is not clear.
T.test("issue 15: greedy Q8_0 tokens equal BF16's wherever BF16's margin is clear", function()
  local wb = require("wb")
  local path = dir .. "/tinylm-bf16.gguf"
  wb.load():save_gguf(path, { type = "bf16" })
  local bf = wb.load(path)
  local q8 = wb.load(path, { weights = "q8_0" })
  T.check(q8:info().weight_bytes < 0.5 * bf:info().weight_bytes, "Q8_0 really quantized")
  local clear, steps, free_same, free_checked = 0, 0, 0, 0
  T.check(#rec.prompts >= 3, "the lesson's prompts")
  for _, text in ipairs(rec.prompts) do
    local ids = bf.tokenizer:encode(text)
    -- along BF16's greedy path
    local a <close> = bf:session()
    local b <close> = q8:session()
    local la, lb = a:prefill(ids), b:prefill(ids)
    for i = 1, rec.greedy_steps do
      local top = la:topk(2)
      steps = steps + 1
      if top[1].p - top[2].p > rec.margin then
        clear = clear + 1
        T.eq(lb:argmax(), la:argmax())
      end
      if i < rec.greedy_steps then
        local id = la:argmax()
        la, lb = a:decode(id), b:decode(id)
      end
    end
    -- free greedy generation of each model
    local c <close> = bf:session()
    local d <close> = q8:session()
    local lc, ld = c:prefill(ids), d:prefill(ids)
    for _ = 1, rec.greedy_steps do
      local top = lc:topk(2)
      if not (top[1].p - top[2].p > rec.margin) then break end
      free_checked = free_checked + 1
      local ic, id = lc:argmax(), ld:argmax()
      T.eq(id, ic)
      free_same = free_same + 1
      lc, ld = c:decode(ic), d:decode(id)
    end
  end
  print(("BF16 vs Q8_0: %d/%d steps clear, all equal; free greedy equal for %d clear steps"):format(
    clear, steps, free_same))
  T.check(clear >= steps // 2, ("most steps are clear on TinyLM's prompts (%d of %d)"):format(clear, steps))
  T.check(free_checked > 0 and free_same == free_checked, "free greedy compared")
end)

os.execute("rm -rf '" .. dir .. "'")
T.done()
