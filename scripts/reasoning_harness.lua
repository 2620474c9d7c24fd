-- reasoning_harness.lua - run the effort levels on real Brightlane tickets and record thinking
-- tokens, TTFT and totals to JSON.
--
--   workbench scripts/reasoning_harness.lua --provider tinylm [--tickets 12] [--out harness.json]
--   workbench scripts/reasoning_harness.lua --provider groq|gemini|ollama [--model NAME]
--
-- Hosted providers need a key (GROQ_API_KEY, GEMINI_API_KEY) or a host (OLLAMA_HOST). Without
-- one the harness says which variable to set and exits 2. With one (or --base-url, e.g. a local
-- `workbench serve`) it runs every level on every ticket live and records the measured TTFT,
-- visible and reasoning tokens (as the provider reports them) and cost to the JSON record.
--
-- --provider tinylm runs locally. TinyLM cannot reason, so the thinking is SIMULATED: at each level
-- it decodes a budget of extra tokens (presets/effort.lua, tinylm_simulated) and discards them
-- before decoding the answer. That reproduces the mechanics a hosted reasoning model hides (hidden
-- tokens paid for in time before the first visible one) but says nothing about whether thinking
-- improves answers. Every output of this mode carries the label.
local wb = require("wb")
local presets = require("wb.presets")
local providers = require("wb.providers")
local corpus = require("wb.corpus")
local stats = require("wb.stats")
local util = require("wb.util")
local heldout = require("wb.heldout")
local lesson = require("wb.lesson")

local cli = require("wb.cli")
local o = cli.parse(arg, "scripts/reasoning_harness.lua", {
  { "provider", "string", "tinylm", "tinylm (local, simulated thinking), groq, gemini or ollama" },
  { "model", "string", nil, "hosted model name" },
  { "tickets", "count", 12, "tickets to run" },
  { "output", "string", nil, "record file (default $WB_OUT/reasoning_harness.json)" },
  { "out", "string", nil, "the same as --output" },
  { "preset", "string", "triage", "decoding preset" },
  { "base-url", "string", nil, "live: an OpenAI- or Gemini-compatible server (e.g. workbench serve)" },
}, { about = "run the effort levels on Brightlane tickets and record thinking tokens, TTFT and totals to JSON" })
local opts = { provider = o.provider, model = o.model, tickets = o.tickets, preset = o.preset,
  out = cli.output_path(o.output or o.out, "reasoning_harness.json") }

local effort = presets.data("effort")
local preset = presets.load(opts.preset)

-- Real Brightlane tickets: the corpus's triage templates, spread over the six categories, with
-- their placeholders filled in.
local function tickets(n)
  local all, out = corpus.TICKETS, {}
  local step = math.max(1, #all // n)
  for k = 1, #all, step do
    if #out == n then break end
    local t = all[k]
    local text = t[1]:gsub("{plan}", "Team"):gsub("{month}", "March")
    out[#out + 1] = { text = text, category = t[2] }
  end
  return out
end

if opts.provider ~= "tinylm" then
  if not providers.INFO[opts.provider] then
    io.stderr:write("reasoning_harness.lua: --provider takes tinylm, groq, gemini or ollama\n")
    os.exit(2)
  end
  local missing = not o.base_url and providers.missing_credentials(opts.provider)
  if missing then
    io.stderr:write(missing, "\nOr run locally: workbench scripts/reasoning_harness.lua --provider tinylm\n")
    os.exit(2)
  end
  -- Live: every level on every ticket through the provider's streaming API (wb.providers), with
  -- the provider's own token counts; nothing here is simulated.
  local cost = require("wb.cost")
  local pricing_ok, pricing = pcall(cost.pricing)
  local rows, doc_runs = {}, {}
  for _, level in ipairs(effort.order) do
    local p = presets.merge(preset)
    p.reasoning_effort = level
    local ttft, vis, think, usd = {}, {}, {}, {}
    for _, t in ipairs(tickets(opts.tickets)) do
      local ok, text, st = pcall(providers.chat, opts.provider, p, { { role = "user", content = "Ticket: " .. t.text } },
        { model = opts.model, base_url = o.base_url })
      if not ok then
        io.stderr:write(tostring(text), "\n")
        os.exit(1)
      end
      local row = { level = level, category = t.category, reply = text, ttft_ms = st.ttft_ms, total_ms = st.total_ms,
        visible_tokens = st.output_tokens, tokens_source = st.output_tokens_source,
        reasoning_tokens = st.reasoning_tokens or wb.json.null, finish_reason = st.finish_reason }
      if pricing_ok then
        local pok, price = pcall(cost.price, pricing, opts.provider == "openai" and "groq" or opts.provider, st.model)
        if pok then
          local cok, c = pcall(cost.call_cost, price, { input = st.prompt_tokens or 0, thinking = st.reasoning_tokens or 0,
            output = math.max(0, (st.output_tokens or 0) - (st.reasoning_tokens or 0)) })
          if cok then row.cost_usd = type(c) == "table" and c.total or c; usd[#usd + 1] = row.cost_usd end
        end
      end
      doc_runs[#doc_runs + 1] = row
      ttft[#ttft + 1], vis[#vis + 1] = st.ttft_ms or st.total_ms, st.output_tokens or 0
      if st.reasoning_tokens then think[#think + 1] = st.reasoning_tokens end
    end
    rows[#rows + 1] = { level = level, n = #ttft, ttft_ms_median = stats.median(ttft), visible_tokens_median = stats.median(vis),
      reasoning_tokens_median = #think > 0 and stats.median(think) or "not reported",
      cost_usd_median = #usd > 0 and stats.median(usd) or "no price" }
  end
  util.print_table(rows, { "level", "n", "ttft_ms_median", "visible_tokens_median", "reasoning_tokens_median", "cost_usd_median" })
  local f = assert(io.open(opts.out .. ".tmp", "w"))
  assert(f:write(wb.json.encode({ provider = opts.provider, model = opts.model or wb.json.null, preset = preset.name,
    simulated_thinking = false, runs = wb.json.array(doc_runs) }, { indent = true })))
  assert(f:close())
  assert(os.rename(opts.out .. ".tmp", opts.out))
  print("wrote " .. opts.out .. " (measured live from " .. opts.provider .. ")")
  os.exit(0)
end

local LABEL = "SIMULATED thinking: TinyLM does not reason; each level decodes a budget of extra "
  .. "tokens that are thrown away before the answer"
print(LABEL)
local model = wb.load()
local n_ctx = model:info().n_ctx
-- The same number of held-out tickets (wb.heldout: wording TinyLM never saw), spread over the
-- categories, so the accuracy column separates recall from reading.
local function heldout_set(n)
  local all, out = heldout.TICKETS, {}
  local step = math.max(1, #all // n)
  for k = 1, #all, step do
    if #out == n then break end
    out[#out + 1] = { text = all[k].msg, category = all[k].category }
  end
  return out
end
local SETS = { { name = "training", tickets = tickets(opts.tickets) },
               { name = "held-out", tickets = heldout_set(opts.tickets) } }
local runs = {}
local noise = lesson.noise()
for si, set in ipairs(SETS) do
for ti, t in ipairs(set.tickets) do
  local input = "Ticket: " .. t.text
  for li, level in ipairs(effort.order) do
    local budget = math.min(effort.tinylm_simulated[level] or 0, n_ctx - 8)
    local start = wb.clock_ms()
    local thought = 0
    if budget > 0 then
      -- The hidden part: same model, same prompt, decoded and discarded.
      local th = model:generate(input .. "\n", { temperature = 1, seed = 100000 * si + 1000 * ti + li,
        max_tokens = budget }, { ignore_eos = true })
      thought = #th.token_ids
    end
    local t_answer = wb.clock_ms()
    local res = presets.generate(model, preset, input)
    local stop = wb.clock_ms()
    local category = res.text:match('"category"%s*:%s*"([%w_]+)"') or res.text:match("^%s*([%w_]+)")
    runs[#runs + 1] = {
      set = set.name, ticket = t.text, gold = t.category, level = level,
      category = category or wb.json.null,
      correct = category == t.category, output = res.text,
      thinking_tokens_simulated = thought, visible_tokens = #res.token_ids,
      ttft_ms = (t_answer - start) + (res.ttft_ms or 0), total_ms = stop - start,
    }
  end
end
end
local load = noise:finish(true)

local summary, rows, ttft_by_level = {}, {}, {}
for _, level in ipairs(effort.order) do
  local ttft, total, think, correct, n = {}, {}, {}, { training = 0, ["held-out"] = 0 }, { training = 0, ["held-out"] = 0 }
  for _, r in ipairs(runs) do
    if r.level == level then
      n[r.set] = n[r.set] + 1
      ttft[#ttft + 1], total[#total + 1], think[#think + 1] = r.ttft_ms, r.total_ms, r.thinking_tokens_simulated
      if r.correct then correct[r.set] = correct[r.set] + 1 end
    end
  end
  ttft_by_level[#ttft_by_level + 1] = ttft
  local s = { level = level, n = n.training + n["held-out"],
    accuracy = correct.training / n.training, accuracy_heldout = correct["held-out"] / n["held-out"],
    correct = correct.training, correct_heldout = correct["held-out"],
    thinking_tokens_simulated = stats.median(think),
    ttft_ms_median = stats.median(ttft), ttft_ms_min = stats.min(ttft), ttft_ms_max = stats.max(ttft),
    total_ms_median = stats.median(total) }
  summary[#summary + 1] = s
  rows[#rows + 1] = s
end
util.print_table(rows, { "level", "n", "thinking_tokens_simulated", "ttft_ms_median", "ttft_ms_min",
    "total_ms_median", "accuracy", "accuracy_heldout" },
  { fmt = { ttft_ms_median = "%.1f", ttft_ms_min = "%.1f", total_ms_median = "%.1f",
            accuracy = "%.2f", accuracy_heldout = "%.2f" } })
print("(accuracy: the training tickets; accuracy_heldout: tickets written differently)\n")

-- What the table supports: TTFT against the budget, answers against the level, and recall
-- against reading.
local doc = { provider = "tinylm", model = model.dir, preset = preset.name, simulated_thinking = true,
  label = LABEL, levels = wb.json.array(effort.order), summary = wb.json.array(summary),
  runs = wb.json.array(runs), load = load }
local lo, hi = summary[1], summary[#summary]
local ttft_cmp = lesson.compare_ranges(ttft_by_level[#ttft_by_level], ttft_by_level[1])
lesson.conclude(doc, "ttft_grows", hi.thinking_tokens_simulated > lo.thinking_tokens_simulated
    and ttft_cmp == "above",
  ("TTFT grows with the simulated budget: level %s (%d hidden tokens) had its fastest first token "
   .. "later than level %s's slowest (%.1f against %.1f ms medians); the hidden tokens cost time "
   .. "before anything is shown."):format(hi.level, hi.thinking_tokens_simulated, lo.level,
    hi.ttft_ms_median, lo.ttft_ms_median),
  ("TTFT at level %s (%.1f ms median) and level %s (%.1f ms) could not be told apart here "
   .. "(ranges %s)."):format(hi.level, hi.ttft_ms_median, lo.level, lo.ttft_ms_median, ttft_cmp))
local answers, same = {}, true
for _, r in ipairs(runs) do
  local key = r.set .. "\0" .. r.ticket
  if answers[key] == nil then answers[key] = r.output elseif answers[key] ~= r.output then same = false end
end
doc.same_answer_every_level = same
lesson.conclude(doc, "answer_unchanged", same,
  "Every ticket got the same answer at every level: the simulated thinking is discarded, so it "
  .. "cannot change the answer (on a real reasoning model it can).",
  "Some ticket's answer changed with the level, although the simulated thinking is discarded: the "
  .. "answer's decoding is not deterministic in this preset.")
local base = summary[1]
lesson.accuracy_contrast(doc, "accuracy", ("Level %s answers"):format(base.level), base.correct,
  base.n // 2, base.correct_heldout, base.n // 2, #corpus.LABELS)
lesson.print_conclusions(doc)
print("Accuracy here reflects TinyLM's memory of its corpus, not reasoning.")
lesson.print_load(load)

wb.write_file(opts.out, wb.json.encode(doc, { indent = true }) .. "\n") -- atomic, checked
print("wrote " .. opts.out .. " (simulated thinking)")
lesson.emit(doc)
model:close()
