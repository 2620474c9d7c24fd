-- wb.trace - per-request timing traces: build them from generation results, check them, summarise
-- them, and read and write the request-timeline record (JSON). docs/trace.md has the layout.
--
--   local trace = require("wb.trace")
--   local s = trace.sample(model:generate(prompt, params, opts), {prompt = prompt})
--   local summary = trace.summarize({s, ...})       -- raises on an inconsistent sample
--   trace.write("run.json", record); local rec = trace.read("run.json")
--
-- Measurement boundary: every time is milliseconds since the request started, which is before
-- tokenization (there is no transport or queue in a local trace). A token is "available" when the
-- sampler has picked it. TTFT ends at the first such token; each itl_ms entry is the gap between
-- two consecutive ones; e2e_ms ends at the last one, so sum(itl_ms) = e2e_ms - ttft_ms. Work after
-- the last token (flushing held-back text, freeing the cache) is outside e2e_ms.
local wb = require("wb")
local stats = require("wb.stats")

local M = {}

-- Round to microseconds: records stay readable, and the check's tolerance covers the rounding.
function M.round3(x)
  if type(x) == "number" then return math.floor(x * 1000 + 0.5) / 1000 end
  return x
end

local null = wb.json.null

local function is_null(v) return v == nil or v == null end

-- One sample (the lab's per-request layout) from a model:generate / stream:result() table.
-- extra: fields to add (prompt = the text, ...).
function M.sample(result, extra)
  local itl = {}
  for i, v in ipairs(result.itl_ms) do itl[i] = M.round3(v) end
  local n = #result.token_ids
  local s = {
    prompt_tokens = result.prompt_tokens,
    generated_token_ids = wb.json.array({ table.unpack(result.token_ids) }),
    generated_tokens = n,
    text = result.text,
    use_cache = result.use_cache,
    chunk_size = (result.chunk_size and result.chunk_size > 0) and result.chunk_size or null,
    stop_reason = result.stop_reason,
    tokenization_ms = M.round3(result.tokenization_ms),
    ttft_ms = M.round3(result.ttft_ms),
    itl_ms = wb.json.array(itl),
    tpot_ms = #itl > 0 and M.round3(stats.mean(itl)) or null,
    e2e_ms = M.round3(result.last_token_ms),
    cache_tokens_before_release = result.cache_tokens_before_release,
  }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local function fail(where, msg) error(where .. msg, 0) end

local function finite_nonneg(x)
  return type(x) == "number" and x == x and x >= 0 and x < math.huge
end

-- Check one sample; raises "<where>: <reason>" with one distinct reason per kind of fault.
function M.check_sample(s, where)
  where = where and (where .. ": ") or ""
  if type(s) ~= "table" then fail(where, "sample is not an object") end
  for _, k in ipairs({ "ttft_ms", "e2e_ms", "generated_tokens" }) do
    if type(s[k]) ~= "number" then
      fail(where, ("field '%s' is missing or not a number"):format(k))
    end
  end
  for _, k in ipairs({ "itl_ms", "generated_token_ids" }) do
    if type(s[k]) ~= "table" then fail(where, ("field '%s' is missing or not a list"):format(k)) end
  end
  local values = { { "ttft_ms", s.ttft_ms }, { "e2e_ms", s.e2e_ms } }
  for i, v in ipairs(s.itl_ms) do values[#values + 1] = { ("itl_ms[%d]"):format(i), v } end
  for _, kv in ipairs(values) do
    if not finite_nonneg(kv[2]) then
      fail(where, ("timing values must be finite and non-negative: %s = %s"):format(kv[1],
        tostring(kv[2])))
    end
  end
  if s.generated_tokens ~= #s.generated_token_ids then
    fail(where, ("token count mismatch: generated_tokens = %s but generated_token_ids holds %d")
      :format(tostring(s.generated_tokens), #s.generated_token_ids))
  end
  if s.e2e_ms < s.ttft_ms then
    fail(where, ("end before first token: e2e_ms = %g is less than ttft_ms = %g")
      :format(s.e2e_ms, s.ttft_ms))
  end
  local want = math.max(0, s.generated_tokens - 1)
  if #s.itl_ms < want then
    fail(where, ("missing token intervals: %d itl_ms for %d tokens (want %d)")
      :format(#s.itl_ms, s.generated_tokens, want))
  elseif #s.itl_ms > want then
    fail(where, ("extra token intervals: %d itl_ms for %d tokens (want %d)")
      :format(#s.itl_ms, s.generated_tokens, want))
  end
  local sum = 0
  for _, v in ipairs(s.itl_ms) do sum = sum + v end
  -- The lab's tolerance: 2 microseconds per interval (records round to 1 microsecond).
  local tol = 0.002 * math.max(1, #s.itl_ms)
  if math.abs(sum - (s.e2e_ms - s.ttft_ms)) > tol then
    fail(where, ("intervals do not add up to e2e_ms - ttft_ms: sum %.3f vs %.3f (tolerance %g ms)")
      :format(sum, s.e2e_ms - s.ttft_ms, tol))
  end
  return true
end

-- Validate samples, then the medians: TTFT over all samples, TPOT (mean interval) over the samples
-- that have intervals; nil when none has (a one-token reply has no TPOT).
function M.summarize(samples, where)
  where = where and (where .. ": ") or ""
  if type(samples) ~= "table" or #samples == 0 then
    fail(where, "no samples: at least one completed generation is required")
  end
  local ttft, tpot = {}, {}
  for i, s in ipairs(samples) do
    M.check_sample(s, ("%ssample %d"):format(where, i))
    ttft[#ttft + 1] = s.ttft_ms
    if #s.itl_ms > 0 then tpot[#tpot + 1] = stats.mean(s.itl_ms) end
  end
  return {
    samples = #samples,
    median_ttft_ms = stats.median(ttft),
    median_tpot_ms = #tpot > 0 and stats.median(tpot) or nil,
  }
end

M.RECORD_KEYS = { "model", "generation", "environment", "runs", "batch_sweep", "prefix_reuse",
                  "limits" }

-- Check a whole record's layout and every run's samples; returns {name = summary} in run order
-- as a list of {name=, summary=}.
function M.check_record(rec)
  if type(rec) ~= "table" then error("record is not a JSON object", 0) end
  for _, k in ipairs(M.RECORD_KEYS) do
    if is_null(rec[k]) then error(("record has no '%s'"):format(k), 0) end
  end
  if type(rec.runs) ~= "table" or #rec.runs == 0 then
    error("record has no runs: 'runs' must be a non-empty list", 0)
  end
  local out = {}
  for i, run in ipairs(rec.runs) do
    if type(run) ~= "table" or type(run.name) ~= "string" then
      error(("runs[%d] has no name"):format(i), 0)
    end
    local where = ("run '%s'"):format(run.name)
    out[#out + 1] = { name = run.name, summary = M.summarize(run.samples, where) }
  end
  return out
end

function M.write(path, rec)
  local text = wb.json.encode(rec, { indent = true }) .. "\n"
  -- atomic and checked: a failed write keeps the previous record and raises an error naming it
  wb.write_file(path, text)
end

function M.read(path)
  -- the core's reader: a FIFO or a device is an error, not a hang, and the size is capped
  local rok, text = pcall(wb.read_file, path, 256 << 20)
  if not rok then error(("cannot read %s"):format(tostring(text)), 0) end
  local ok, rec = pcall(wb.json.decode, text)
  if not ok then error(("%s: %s"):format(path, tostring(rec)), 0) end
  return rec
end

return M
