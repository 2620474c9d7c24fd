-- brainstorm.lua - many different ideas (macro names, FAQ topics, reply openings).
return {
  description = "Brainstorming: diverse ideas, judged by a human afterwards",

  system = "You help the Brightlane support team brainstorm. Give a numbered list of short, "
    .. "distinct ideas. Variety matters more than polish.",

  -- Diversity is the goal: a high temperature flattens the distribution so that less obvious
  -- continuations get picked.
  temperature = 1.2,

  -- At high temperature the tail gets loud; min-p scales its cut to the top token's probability,
  -- so it keeps many options when the model is unsure and few when it is sure. Providers without
  -- min-p drop it (the request lists it as dropped).
  min_p = 0.05,

  -- Pushes each new idea away from words already used.
  presence_penalty = 0.5,

  max_tokens = 400,

  -- Quantity of ideas, not the correctness of one answer.
  reasoning_effort = "none",

  tinylm = { prompt = "Customer (Ana): {input}\nAgent (", max_tokens = 40, stop = { "\n" } },

  why = {
    temperature = "variety: flatten the distribution",
    min_p = "a cut relative to the top token keeps the tail sane at high temperature",
    presence_penalty = "push new ideas away from words already used",
  },
}
