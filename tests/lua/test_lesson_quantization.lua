-- test_lesson_quantization.lua - scripts/quantization.lua on the shipped TinyLM: the table's
-- numbers are consistent, and every printed sentence is recomputed from the record it writes.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")

local dir = T.tmpdir()

local function lesson_record(script, args) return T.lesson_record(dir, script, args) end

local conclusion = T.conclusion

T.test("quantization.lua: Q8_0 and Q4_0 against the stored weights, sentences from the record", function()
  local out, rec = lesson_record("scripts/quantization.lua", "--repeats 2 --tokens 96")
  local flat = out:gsub("%s+", " ")
  for _, c in ipairs(rec.conclusions) do
    T.check(flat:find(c.text:gsub("%s+", " "), 1, true), "conclusion not printed: " .. c.text)
  end
  local v = {}
  for _, r in ipairs(rec.variants) do v[r.weights] = r end
  local s, q8, q4 = v.as_stored, v.q8_0, v.q4_0
  T.eq(s.kl_mean, 0); T.eq(s.top1, 1) -- the reference against itself
  T.check(q8.bytes < 0.3 * s.bytes and q4.bytes < q8.bytes, "bytes: F32 > Q8_0 > Q4_0")
  T.check(q8.kl_mean >= 0 and q8.kl_mean < 0.01, "Q8_0 stays close: KL " .. q8.kl_mean)
  T.check(q8.top1 > 0.9, "Q8_0 top-1 agreement " .. q8.top1)
  T.eq(conclusion(rec, "q8_smaller").holds, q8.bytes < s.bytes)
  T.eq(conclusion(rec, "q4_worse_than_q8").holds, q4.kl_mean > q8.kl_mean)
  T.eq(conclusion(rec, "q8_ppl_close").holds, math.abs(q8.ppl - s.ppl) < 0.01 * s.ppl)
  local lo = math.huge
  for _, x in ipairs(s.decode_runs) do lo = math.min(lo, x) end
  local hi = -math.huge
  for _, x in ipairs(q8.decode_runs) do hi = math.max(hi, x) end
  T.eq(conclusion(rec, "q8_decode_faster").holds, hi < lo)
end)

T.done()
