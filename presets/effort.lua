-- effort.lua - reasoning effort levels, the tasks the cost model prices, and latency assumptions.
-- Data only: edit and rerun scripts/reasoning_cost.lua.
--
-- The thinking-token figures are ASSUMPTIONS for planning, not measurements: providers do not
-- publish them, and they vary by model and by prompt. Replace them with what
-- scripts/reasoning_harness.lua measures on your own tickets.
return {
  -- Hidden thinking tokens per call at each level, for a task of difficulty 1: median and p90.
  -- A task's `difficulty` scales both (a triage label thinks less than a hard escalation).
  levels = {
    none = { median = 0, p90 = 0 },
    low = { median = 150, p90 = 400 },
    medium = { median = 600, p90 = 1500 },
    high = { median = 2000, p90 = 5000 },
  },
  order = { "none", "low", "medium", "high" },

  -- How each level is spelled per provider (what wb.providers sends).
  providers = {
    -- Groq: reasoning_effort on the gpt-oss models; it cannot turn reasoning fully off.
    groq = { none = "low", minimal = "low", low = "low", medium = "medium", high = "high" },
    -- Gemini 2.5: thinkingBudget in tokens (0 turns thinking off on Flash and Flash-Lite; Pro needs
    -- at least 128). Gemini 3: thinkingLevel.
    gemini_2_5_budget = { none = 0, minimal = 0, low = 1024, medium = 8192, high = 24576 },
    gemini_3_level = { none = "minimal", minimal = "minimal", low = "low", medium = "medium", high = "high" },
    -- Ollama: `think` is false/true, or a level string on gpt-oss models.
    ollama = { none = false, minimal = "low", low = "low", medium = "medium", high = "high" },
  },

  -- The calls priced by scripts/reasoning_cost.lua. Input text is counted with the tokenizer you
  -- pass (--tokenizer tokenizer.json) or estimated; `output` is the visible reply in tokens.
  tasks = {
    { name = "triage", preset = "triage", difficulty = 0.5, output = 25, cached_fraction = 0.6,
      input = "Ticket: Hello team, I was charged twice for the Team plan in March, it is blocking our whole team." },
    { name = "reply draft", preset = "drafts", difficulty = 1, output = 180, cached_fraction = 0.3,
      input = "Customer (Ana): How do I export my board data, and does the CSV include comments? "
        .. "We need the comments for an audit next week." },
    { name = "hard escalation", preset = "drafts", difficulty = 3, output = 350, cached_fraction = 0.1,
      input = "Customer (Ana): We lost all cards on a board after a sync error yesterday. Two of us "
        .. "edited the board from phones on a train with a bad connection. This morning the board "
        .. "shows only three lists and the activity log says the cards were archived by me, which I "
        .. "did not do. We have a client review at noon. Can you restore the board to how it was "
        .. "yesterday at 6pm, and explain what happened so it does not happen again? We are on the "
        .. "Business plan with 14 seats and were charged for the renewal last week." },
  },
  tickets_per_day = 1000,

  -- Latency assumptions per provider (ms): network plus queueing, prefill per 1,000 input tokens,
  -- and the inter-token latency (ITL) of decode. Illustrative; measure your own.
  latency = {
    groq = { network_ms = 150, prefill_ms_per_1k = 20, itl_ms = 2.5 },
    gemini = { network_ms = 300, prefill_ms_per_1k = 60, itl_ms = 5 },
    ollama = { network_ms = 5, prefill_ms_per_1k = 400, itl_ms = 30 },
  },

  -- TinyLM has no reasoning mode; the harness simulates a thinking budget by decoding this many
  -- extra tokens (discarded) before the visible answer.
  tinylm_simulated = { none = 0, low = 16, medium = 48, high = 96 },
}
