-- drafts.lua - a reply draft an agent reviews before sending.
return {
  description = "Reply drafts: natural wording that stays on the facts",

  system = "You draft replies for Brightlane support agents. Answer the customer's question in a "
    .. "friendly, concise way, using only what the conversation says. Ask for details you lack.",

  -- A draft should read naturally and vary a little between regenerations, so an agent who
  -- dislikes one can ask for another; a moderate temperature does that without inventing facts.
  temperature = 0.7,

  -- The nucleus cut removes the long tail of unlikely tokens, which is where odd words and made-up
  -- details come from, while keeping the few good phrasings.
  top_p = 0.9,

  -- A light penalty discourages the model from repeating the same sentence opening.
  frequency_penalty = 0.2,

  -- A support reply fits in a few short paragraphs.
  max_tokens = 300,

  -- Drafting is mostly wording, not reasoning; none keeps the first word fast.
  reasoning_effort = "none",

  -- TinyLM learned conversations as "Customer (Name): ...\nAgent (Name): ..."; stop before it
  -- writes the customer's next turn.
  tinylm = { prompt = "Customer (Ana): {input}\nAgent (Lena):", max_tokens = 60,
             stop = { "\nCustomer" } },

  why = {
    temperature = "natural, slightly varied wording between regenerations",
    top_p = "cut the unlikely tail where invented details come from",
    frequency_penalty = "fewer repeated phrases",
    reasoning_effort = "wording, not deliberation: keep TTFT low",
  },
}
