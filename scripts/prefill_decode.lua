-- prefill_decode.lua - prefill and decode are two phases with very different costs.
--
--   workbench scripts/prefill_decode.lua [--repeats N] [--threads N]
--
-- Prefill runs every prompt token through the model in one pass (matrix-matrix work, cheap per
-- token); decode then makes one token per pass (matrix-vector work, paid in full for each token).
-- For prompts of 8, 32, 64 and 96 tokens and replies of 8 and 32 tokens this times both phases,
-- 15 runs per cell, and prints "median (min to max)". Prompts are cut from real corpus text to an
-- exact token count, and each is checked to re-encode to that count, so the lengths in the table
-- are true. The summary takes the fastest prefill per prompt length (background load only ever
-- adds time) for the cost of one more prompt token, and the median decode time per token for the
-- cost of one more output token. The closing sentences are chosen by comparing ranges (prompt 8
-- against 96, reply 8 against 32), so they say only what this run measured; the course's numbers
-- are printed beside ours.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")

local o = require("wb.cli").parse(arg, "scripts/prefill_decode.lua", {
  { "repeats", "count", 15, "runs per cell" },
  { "threads", "count", 1, "compute threads" },
})
local repeats, threads = o.repeats, o.threads
wb.threads(threads)

local model = wb.load()
local tok = model.tokenizer

-- Real support-corpus text: the corpus file the training run wrote, else a freshly generated one.
local function corpus_text()
  for _, name in ipairs({ "brightlane_val.txt", "brightlane_train.txt" }) do
    local f = io.open(model.dir .. "/../data/" .. name, "rb")
    if f then
      local s = f:read(4000)
      f:close()
      if s and #s >= 2000 then return s end
    end
  end
  local c = require("wb.corpus").generate({ seed = 1, conversations = 60, tickets = 20 })
  return c.train:sub(1, 4000)
end
local corpus_ids = tok:encode(corpus_text())

-- Decoding a cut of ids and encoding the text again need not give the same ids (a cut can land
-- inside what BPE would merge differently); take the first start where it does.
local function prompt_of(n)
  for start = 1, #corpus_ids - n do
    local text = tok:decode({ table.unpack(corpus_ids, start, start + n - 1) })
    if #tok:encode(text) == n then return text end
  end
  error(("no slice of the corpus re-encodes to exactly %d tokens"):format(n))
end

local function measure(prompt, n_out)
  local params = { temperature = 0, max_tokens = n_out }
  local m = { prefill = {}, per_token = {}, total = {} }
  for i = 1, repeats do
    local r = model:generate(prompt, params, { ignore_eos = true }) -- always runs to length
    assert(#r.token_ids == n_out)
    m.prefill[i] = r.prefill_ms
    m.per_token[i] = r.decode_ms_per_token
    m.total[i] = r.prefill_ms + r.decode_ms_per_token * n_out
  end
  return m
end

model:generate(prompt_of(16), { temperature = 0, max_tokens = 8 }, { ignore_eos = true }) -- warm-up
local noise = lesson.noise()

print(("model %s, %d thread(s); each cell: median (min to max) over %d runs, in ms\n")
      :format(model.dir, wb.threads(), repeats))
local fmt = "%6s %6s | %-26s | %-26s | %-26s"
print(fmt:format("prompt", "output", "prefill ms", "decode ms/token", "total ms"))
print(("-"):rep(98))
local rows, lens = {}, { 8, 32, 64, 96 }
for _, p in ipairs(lens) do
  local prompt = prompt_of(p)
  for _, n in ipairs({ 8, 32 }) do
    local m = measure(prompt, n)
    rows[p .. ":" .. n] = m
    print(fmt:format(p, n, stats.format(m.prefill, "%.3f"), stats.format(m.per_token, "%.3f"),
                     stats.format(m.total, "%.2f")))
  end
end

local best = {}
for _, p in ipairs(lens) do
  best[p] = math.min(stats.min(rows[p .. ":8"].prefill), stats.min(rows[p .. ":32"].prefill))
end
local prompt_cost = (best[96] - best[8]) / 88
local per = {}
for _, m in pairs(rows) do per[#per + 1] = stats.median(m.per_token) end
local output_cost = stats.median(per)
print(("\nbest prefill by prompt length: 8: %.3f, 32: %.3f, 64: %.3f, 96: %.3f ms")
      :format(best[8], best[32], best[64], best[96]))
print(("prefill, 8 to 96 prompt tokens: %.3f to %.3f ms, so about %.4f ms per extra prompt token")
      :format(best[8], best[96], prompt_cost))
if prompt_cost > 0 then
  print(("decode (typical): about %.3f ms per output token, %.0f times the cost of a prompt token")
        :format(output_cost, output_cost / prompt_cost))
else
  print(("decode (typical): about %.3f ms per output token; prefill did not grow measurably "
         .. "with the prompt in this run (noise: run again on a quieter machine)")
        :format(output_cost))
end
lesson.course("prefill 1.11 to 3.23 ms for 8 to 96 prompt tokens, 0.024 ms per extra prompt "
              .. "token; decode 0.90 ms per output token, 37 times a prompt token")

-- What the table supports.
local load = noise:finish(true)
local rec = { lesson = "prefill_decode", repeats = repeats, cells = {}, prompt_cost_ms = prompt_cost,
              output_cost_ms = output_cost, best_prefill = {}, load = load }
for _, p in ipairs(lens) do
  rec.best_prefill[#rec.best_prefill + 1] = { prompt = p, ms = best[p] }
  for _, n in ipairs({ 8, 32 }) do
    local m = rows[p .. ":" .. n]
    rec.cells[#rec.cells + 1] = { prompt = p, output = n, prefill = m.prefill,
                                  per_token = m.per_token, total = m.total }
  end
end
local pre = lesson.compare_ranges(rows["96:32"].prefill, rows["8:32"].prefill)
lesson.conclude(rec, "prefill_grows", pre == "above",
  ("Down a column: 96 prompt tokens took %.3f ms to prefill against %.3f for 8 (medians, ranges "
   .. "apart): a longer prompt adds prefill."):format(stats.median(rows["96:32"].prefill),
    stats.median(rows["8:32"].prefill)),
  ("Down a column: prefill for 96 and for 8 prompt tokens overlapped (medians %.3f and %.3f ms): "
   .. "this run did not separate them."):format(stats.median(rows["96:32"].prefill),
    stats.median(rows["8:32"].prefill)))
local dec = lesson.compare_ranges(rows["96:32"].per_token, rows["8:32"].per_token)
lesson.conclude(rec, "decode_flat", dec == "overlap",
  ("Decode per token with a 96-token prompt and with an 8-token one overlapped (medians %.3f and "
   .. "%.3f ms): the prompt's length left decode alone within the noise."):format(
    stats.median(rows["96:32"].per_token), stats.median(rows["8:32"].per_token)),
  ("Decode per token was %.3f ms after a 96-token prompt and %.3f after an 8-token one, ranges "
   .. "apart: each step attends to the whole prompt, and here that showed."):format(
    stats.median(rows["96:32"].per_token), stats.median(rows["8:32"].per_token)))
local out_apart = true
for _, p in ipairs(lens) do
  if lesson.compare_ranges(rows[p .. ":32"].total, rows[p .. ":8"].total) ~= "above" then out_apart = false end
end
lesson.conclude(rec, "output_adds", out_apart,
  "Across every row: 32 output tokens took longer than 8 in every run, each extra token a full pass.",
  "Across the rows: for some prompt length the totals for 8 and 32 output tokens overlapped.")
lesson.conclude(rec, "reply_dominates", prompt_cost > 0 and output_cost > 5 * prompt_cost,
  ("One more output token cost about %.0f times one more prompt token: reply length drives latency.")
    :format(prompt_cost > 0 and output_cost / prompt_cost or 0),
  "The cost of an output token against a prompt token was not measured clearly enough on this run "
  .. "to rank them.")
print()
lesson.print_conclusions(rec)
lesson.print_load(load)
lesson.emit(rec)
