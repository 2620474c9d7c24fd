-- wb_time.lua - the workbench half of bench/peer/bench.sh: one fresh process, one model, one
-- thread count; prints one line per test as llama-bench measures it:
--   pp<N> <ms>     prefill of N tokens (44 and 268; 44 and 96 when the context is shorter) into an
--                  empty cache (median of REPS)
--   tg<N> <ms>     ms per token of N single-token decodes from an empty cache (median of REPS)
--   workbench bench/peer/wb_time.lua DIR WEIGHTS THREADS REPS   (WEIGHTS: bf16 f32 q8_0 q4_0;
--   anything else, such as q4_k_m: the weights as stored, DIR then usually a .gguf file)
local wb = require("wb")
local dir, weights, threads, reps = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4] or 3)
assert(dir and weights and threads, "usage: wb_time.lua DIR WEIGHTS THREADS [REPS]")
wb.threads(threads)
local opts = { weights = "as_stored" }
if weights == "f32" then opts.compute_f32 = true end
if weights == "q8_0" or weights == "q4_0" then opts.weights = weights end
local m = wb.load(dir, opts)
local V = m:info().vocab_size

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end
local function ids(n)
  local t = {}
  for i = 1, n do t[i] = (i * 7919) % V end
  return t
end

local ctx = math.min(512, m:info().max_position_embeddings)
local s = m:session({ n_ctx = ctx })
for _, n in ipairs(ctx >= 512 and { 44, 268 } or { 44, 96 }) do
  local prompt, t = ids(n), {}
  s:reset(); s:prefill(prompt) -- warm-up (pages, pool)
  for r = 1, reps do
    s:reset()
    local t0 = wb.clock_ms()
    s:prefill(prompt)
    t[r] = wb.clock_ms() - t0
  end
  print(string.format("pp%d %.3f", n, median(t)))
end
local NT, t = 32, {}
for r = 0, reps do
  s:reset()
  local t0 = wb.clock_ms()
  local id = 1
  for _ = 1, NT do id = s:decode(id):argmax() end
  if r > 0 then t[r] = (wb.clock_ms() - t0) / NT end -- r = 0: warm-up
end
print(string.format("tg%d %.4f", NT, median(t)))
