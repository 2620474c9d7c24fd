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
print("ok")
