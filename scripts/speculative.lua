-- speculative.lua - speculative decoding: a cheap draft guesses, the full model checks k guesses
-- in one pass, and the output is exactly what greedy decoding of the full model gives.
--
--   workbench scripts/speculative.lua [--k N] [--tokens N] [--repeats N] [--layers N] [--threads N]
--
-- Decoding makes one token per forward pass, and for a small batch each pass costs about the
-- same whether it computes one position or a few (the weights are read once either way). So a
-- draft model proposes k tokens, one cheap step each, and the full model runs ONE pass over
-- [last token, d1..dk] with the logits of every position. Wherever the full model's greedy
-- choice equals the draft's token, that token is accepted; at the first disagreement the full
-- model's own token is taken instead (and if all k agree, its next token comes free). Each
-- verification pass therefore yields between 1 and k+1 tokens, all of them the full model's
-- greedy tokens: the output cannot differ from plain greedy decoding, only the time can.
--
-- Two drafts: "truncated", the first --layers blocks of the same checkpoint followed by its final
-- norm and head (written to a temporary directory: an early exit, no training), and "self", the
-- full model drafting for itself (every guess accepted: the ceiling of k+1 tokens per pass, and
-- a draft as expensive as the model, so no speed-up). Prompts come in three kinds: transcripts
-- the model memorised, held-out tickets it never saw, and open text. The lesson reports the
-- acceptance rate and tokens per verification pass per kind, the wall-clock time against plain
-- greedy (median (min to max) over interleaved repeats), and checks every output against
-- plain greedy decoding of the same prompt.
local wb = require("wb")
local stats = require("wb.stats")
local lesson = require("wb.lesson")
local heldout = require("wb.heldout")

local o = require("wb.cli").parse(arg, "scripts/speculative.lua", {
  { "k", "count", 3, "draft tokens per verification pass" },
  { "tokens", "count", 48, "new tokens per reply" },
  { "repeats", "count", 5, "timed repeats per prompt" },
  { "layers", "count", 0, "layers kept in the truncated draft (default: half)", 0 },
  { "threads", "count", 1, "compute threads" },
})
wb.threads(o.threads)

local target = wb.load()
local tok = target.tokenizer
local info = target:info()
local N, K = o.tokens, o.k

-- ---- the truncated draft: the first layers of the same checkpoint ------------------------
local function read_all(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_all(path, s)
  local f = assert(io.open(path, "wb"))
  assert(f:write(s))
  assert(f:close())
end

local function truncated_draft(keep)
  local config = wb.json.decode(read_all(target.dir .. "/config.json"))
  local key = config.n_layer and "n_layer" or "num_hidden_layers"
  if not config[key] then error("speculative: config.json has neither n_layer nor num_hidden_layers", 0) end
  if keep >= config[key] then
    error(("speculative: --layers %d keeps every layer of a %d-layer model"):format(keep, config[key]), 0)
  end
  local st_path = target.dir .. "/model.safetensors"
  local fh = io.open(st_path, "rb")
  if not fh then error("speculative: the truncated draft needs a single " .. st_path, 0) end
  fh:close()
  local st = wb.safetensors_read(st_path)
  local tensors = {}
  for name, t in pairs(st) do
    local layer = tonumber(name:match("%.h%.(%d+)%.") or name:match("%.layers%.(%d+)%.") or "")
    if layer == nil or layer < keep then
      tensors[#tensors + 1] = { name = name, shape = t.shape, data = t.vec, dtype = t.dtype }
    end
  end
  table.sort(tensors, function(a, b) return a.name < b.name end)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute(("mkdir -p '%s'"):format(dir)))
  config[key] = keep
  write_all(dir .. "/config.json", wb.json.encode(config))
  write_all(dir .. "/tokenizer.json", read_all(target.dir .. "/tokenizer.json"))
  wb.safetensors_write(dir .. "/model.safetensors", tensors, { format = "pt" })
  return dir, config
end

local keep = o.layers > 0 and o.layers or math.max(1, info.n_layer // 2)
local draft_dir = truncated_draft(keep)
local small = wb.load(draft_dir)

-- ---- plain greedy and speculative greedy, both as Lua loops over sessions -----------------
local function plain(prompt_ids)
  local s = target:session()
  local logits = s:prefill(prompt_ids)
  local out = {}
  for i = 1, N do
    out[i] = logits:argmax()
    if i < N then logits = s:decode(out[i]) end
  end
  s:close()
  return out
end

-- Returns the ids, the number of verification passes, and the draft tokens accepted and offered.
local function speculative(prompt_ids, draft_model)
  local T, D = target:session(), draft_model:session()
  local out = { (T:prefill(prompt_ids):argmax()) } -- the first token: the prefill's own
  D:prefill(prompt_ids)
  local missing = { out[1] }                       -- tokens T will hold that D does not yet
  local passes, accepted, drafted = 0, 0, 0
  while #out < N do
    local k = math.min(K, N - #out)
    -- Draft k tokens, one cheap step each.
    local d0 = D:pos()
    local logits = #missing == 1 and D:decode(missing[1]) or D:prefill(missing)
    local draft = {}
    for i = 1, k do
      draft[i] = logits:argmax()
      if i < k then logits = D:decode(draft[i]) end
    end
    -- Verify: one pass over the pending token and the k guesses, logits at every position.
    local t0 = T:pos()
    local rows = T:prefill({ out[#out], table.unpack(draft) }, { all = true })
    passes, drafted = passes + 1, drafted + k
    local m = 0
    while m < k and rows[m + 1]:argmax() == draft[m + 1] do m = m + 1 end
    accepted = accepted + m
    for i = 1, m do out[#out + 1] = draft[i] end
    if #out < N then out[#out + 1] = rows[m + 1]:argmax() end -- correction, or the free token
    -- Keep in T the pending token and the accepted guesses; the new last token is pending.
    T:truncate(t0 + 1 + m)
    D:truncate(d0 + #missing + math.min(m, k - 1))
    missing = (m == k) and { draft[k], out[#out] } or { out[#out] }
  end
  T:close(); D:close()
  return out, passes, accepted, drafted
end

-- ---- the prompts ----------------------------------------------------------------------------
local KINDS = {
  { kind = "memorised transcripts", prompts = {
      "Customer (Ana): Hi, I was charged twice for the Team plan this month. Can you refund the duplicate?\nAgent (Lena):",
      "Customer (Bo): Hi, how do I export my board data?\nAgent (Sam):" } },
  { kind = "held-out tickets", prompts = {
      "Ticket: " .. heldout.TICKETS[1].msg .. "\nAgent (Lena):",
      "Ticket: " .. heldout.TICKETS[14].msg .. "\nAgent (Sam):" } },
  { kind = "open text", prompts = {
      "The weather in the mountains was cold, and the travellers",
      "In 1887 the railway reached the small town of" } },
}
local DRAFTS = { { name = ("truncated (%d of %d layers)"):format(keep, info.n_layer), model = small },
                 { name = "self (full model)", model = target } }

local function ids_of(prompt)
  local ids = tok:encode(prompt)
  while #ids + N + K + 2 > info.n_ctx do table.remove(ids, 1) end
  return ids
end

plain(ids_of(KINDS[1].prompts[1])); speculative(ids_of(KINDS[1].prompts[1]), small) -- warm-up

local noise = lesson.noise()
local rec = { lesson = "speculative", model = target.dir, k = K, tokens = N, layers_kept = keep,
              n_layer = info.n_layer, rows = {} }
local all_equal = true
for _, d in ipairs(DRAFTS) do
  for _, kind in ipairs(KINDS) do
    local row = { draft = d.name, kind = kind.kind, passes = 0, accepted = 0, drafted = 0,
                  tokens = 0, equal = true, plain_ms = {}, spec_ms = {} }
    for _, prompt in ipairs(kind.prompts) do
      local ids = ids_of(prompt)
      local want = plain(ids)
      for rep = 1, o.repeats do
        local t0 = wb.clock_ms()
        plain(ids)
        local t1 = wb.clock_ms()
        local got, passes, accepted, drafted = speculative(ids, d.model)
        local t2 = wb.clock_ms()
        row.plain_ms[#row.plain_ms + 1] = t1 - t0
        row.spec_ms[#row.spec_ms + 1] = t2 - t1
        if rep == 1 then
          row.passes, row.accepted = row.passes + passes, row.accepted + accepted
          row.drafted = row.drafted + drafted
          row.tokens = row.tokens + #got
          for i = 1, N do if got[i] ~= want[i] then row.equal = false end end
          if #got ~= N then row.equal = false end
        end
      end
    end
    row.acceptance = row.accepted / math.max(1, row.drafted)
    row.tokens_per_pass = (row.tokens - #kind.prompts) / row.passes -- the first token is the prefill's
    row.speedup = lesson.ratios(row.plain_ms, row.spec_ms)
    all_equal = all_equal and row.equal
    rec.rows[#rec.rows + 1] = row
  end
end
-- The cost model behind the speed-up: the fastest of 30 tries (noise only adds time) of one
-- target step, one draft step, and one verification pass over k+1 positions.
local function fastest(m, f)
  local s, best = m:session(), math.huge
  local ids = ids_of(KINDS[1].prompts[1])
  for _ = 1, 30 do
    s:reset()
    s:prefill(ids)
    local t0 = wb.clock_ms()
    f(s)
    best = math.min(best, wb.clock_ms() - t0)
  end
  s:close()
  return best
end
local verify_ids = {}
for i = 1, K + 1 do verify_ids[i] = 100 + i end
rec.cost = { target_step_ms = fastest(target, function(s) s:decode(7) end),
             draft_step_ms = fastest(small, function(s) s:decode(7) end),
             verify_ms = fastest(target, function(s) s:prefill(verify_ids, { all = true }) end) }
local load = noise:finish(true)
rec.load, rec.all_equal = load, all_equal
small:close()
os.remove(draft_dir .. "/config.json"); os.remove(draft_dir .. "/tokenizer.json")
os.remove(draft_dir .. "/model.safetensors"); os.remove(draft_dir)

print(("model %s (%d layers); k = %d draft tokens per pass; %d new tokens per reply; %d thread(s)")
      :format(target.dir, info.n_layer, K, N, wb.threads()))
print(("each timing: median (min to max) over %d interleaved repeats x 2 prompts, ms per reply\n")
      :format(o.repeats))
local fmt = "%-26s %-21s %9s %9s %-24s %-24s %-20s %s"
print(fmt:format("draft", "prompts", "accepted", "tok/pass", "plain greedy ms", "speculative ms",
                 "speed-up", "= greedy"))
print(("-"):rep(140))
for _, r in ipairs(rec.rows) do
  print(fmt:format(r.draft, r.kind, ("%.0f%%"):format(100 * r.acceptance),
                   ("%.2f"):format(r.tokens_per_pass), stats.format(r.plain_ms, "%.2f"),
                   stats.format(r.spec_ms, "%.2f"), stats.format(r.speedup, "%.2f", "x"),
                   tostring(r.equal)))
end
print()

local c = rec.cost
print(("cost (fastest of 30): target step %.3f ms, draft step %.3f ms, verification of %d "
       .. "positions %.3f ms (%.1f target steps)\n"):format(c.target_step_ms, c.draft_step_ms, K + 1,
       c.verify_ms, c.verify_ms / c.target_step_ms))

-- What the table supports.
local function row(draft_prefix, kind)
  for _, r in ipairs(rec.rows) do
    if r.draft:find(draft_prefix, 1, true) == 1 and r.kind == kind then return r end
  end
end
lesson.conclude(rec, "equal_greedy", all_equal,
  "Every speculative reply was token for token the plain greedy reply: verification keeps only "
  .. "the full model's own choices.",
  "Some speculative reply differed from plain greedy decoding: the verification is wrong.")
local self_full, self_faster = true, false
for _, r in ipairs(rec.rows) do
  if r.draft:find("self", 1, true) == 1 then
    if r.accepted ~= r.drafted then self_full = false end
    if lesson.compare_ranges(r.spec_ms, r.plain_ms) == "below" then self_faster = true end
  end
end
local self_mem = row("self", "memorised transcripts")
lesson.conclude(rec, "self_accepts_all", self_full,
  ("Drafting for itself, the model accepted every one of its own guesses (%.2f tokens per pass; "
   .. "the ceiling is %d, less where a reply's last pass drafts fewer)."):format(
    self_mem.tokens_per_pass, K + 1),
  "Drafting for itself, the model rejected some of its own guesses: the one-pass logits and the "
  .. "step-by-step logits disagreed on a near-tie.")
lesson.conclude(rec, "self_no_gain", not self_faster,
  "And drafting for itself was never faster than plain greedy in every repeat: its draft costs as "
  .. "much as the model, so all guesses accepted still buys nothing.",
  "Drafting for itself was faster than plain greedy on some prompt kind in every repeat: one "
  .. "multi-position pass plus k single steps beat k+1 single steps here.")
local mem, open = row("truncated", "memorised transcripts"), row("truncated", "open text")
lesson.conclude(rec, "acceptance_by_kind", mem.acceptance > open.acceptance,
  ("The truncated draft's guesses were accepted %.0f%% of the time on memorised transcripts and "
   .. "%.0f%% on open text: a draft helps where the next token is predictable."):format(
    100 * mem.acceptance, 100 * open.acceptance),
  ("The truncated draft's guesses were accepted %.0f%% of the time on memorised transcripts and "
   .. "%.0f%% on open text: on this model predictability did not raise acceptance."):format(
    100 * mem.acceptance, 100 * open.acceptance))
for _, kind in ipairs(KINDS) do
  local r = row("truncated", kind.kind)
  local cmp = lesson.compare_ranges(r.spec_ms, r.plain_ms)
  local c = lesson.conclude(rec, "speed_" .. kind.kind, cmp == "below",
    ("On %s the truncated draft was faster than plain greedy in every repeat (%s)."):format(
      kind.kind, stats.format(r.speedup, "%.2f", "x")),
    cmp == "above"
      and ("On %s the truncated draft was slower than plain greedy in every repeat (%s): too few "
           .. "guesses accepted to pay for drafting them."):format(kind.kind,
           stats.format(r.speedup, "%.2f", "x"))
      or ("On %s speculative and plain greedy times overlapped (%s): no speed-up shown."):format(
           kind.kind, stats.format(r.speedup, "%.2f", "x")))
  c.relation = cmp
end
-- Why: with t tokens per pass, speculation costs k draft steps plus one verification per t
-- tokens; plain greedy costs one target step per token.
local best = row("truncated", "memorised transcripts")
local predicted = best.tokens_per_pass * c.target_step_ms / (K * c.draft_step_ms + c.verify_ms)
rec.predicted_speedup = predicted
lesson.conclude(rec, "cost_model", predicted > 1,
  ("From the step costs alone, %.2f tokens per pass would be worth %.2fx on memorised "
   .. "transcripts (%.2f ms of target steps against %d draft steps plus one verification, %.2f "
   .. "ms); the measured speed-up also pays the Lua loop and session bookkeeping."):format(
    best.tokens_per_pass, predicted, best.tokens_per_pass * c.target_step_ms, K,
    K * c.draft_step_ms + c.verify_ms),
  ("From the step costs alone, %.2f tokens per pass is worth only %.2fx on memorised transcripts "
   .. "(%.2f ms of target steps against %d draft steps plus one verification, %.2f ms): a draft "
   .. "at %.0f%% of the model's step cost, with this acceptance, cannot pay for itself."):format(
    best.tokens_per_pass, predicted, best.tokens_per_pass * c.target_step_ms, K,
    K * c.draft_step_ms + c.verify_ms, 100 * c.draft_step_ms / c.target_step_ms))
lesson.print_conclusions(rec)
lesson.print_load(load)
lesson.emit(rec)
if not all_equal then
  io.stderr:write("speculative: output differs from plain greedy decoding\n")
  os.exit(1)
end
