-- triage.lua - classify one Brightlane ticket into the triage object.
--
-- A preset is data: this file runs with no globals and returns one table. Keys and defaults are
-- in docs/presets.md; edit and rerun `workbench scripts/presets.lua triage "Ticket: ..."`.
return {
  description = "Ticket triage: category, priority, needs_human as one JSON object",

  system = "You triage support tickets for Brightlane, a project-management app. Reply with one "
    .. "JSON object: category (billing, account, bug, how_to, feature_request or cancellation), "
    .. "priority (low, medium, high or urgent) and needs_human (true or false). No other text.",

  -- Triage has one right answer per ticket. Any randomness can only move the label away from the
  -- most likely one, and the same ticket must get the same label on a retry.
  temperature = 0,

  -- Repeatability across calls where the provider honours a seed (best effort on hosted models).
  seed = 7,

  -- The object is about 25 tokens; a low cap bounds the bill and the latency if the model rambles.
  max_tokens = 64,

  -- Picking a label from a short list needs little deliberation; the cost model in
  -- scripts/reasoning_cost.lua shows what a higher effort would add per 1,000 tickets.
  reasoning_effort = "low",

  -- The format is enforced, not requested: the decoder (or the provider's structured output)
  -- cannot produce anything but this object.
  constraint = {
    kind = "json_schema",
    name = "triage",
    schema = {
      type = "object",
      properties = {
        category = { type = "string",
          enum = { "billing", "account", "bug", "how_to", "feature_request", "cancellation" } },
        priority = { type = "string", enum = { "low", "medium", "high", "urgent" } },
        needs_human = { type = "boolean" },
      },
      required = { "category", "priority", "needs_human" },
      additionalProperties = false,
    },
  },

  -- TinyLM learned "Ticket: ...\nTriage: {json}" records; the local run uses that format.
  tinylm = { prompt = "{input}\nTriage:", max_tokens = 40, stop = { "\n" } },

  why = {
    temperature = "one right label per ticket: greedy, so retries agree",
    max_tokens = "the object is short; the cap bounds cost and latency",
    reasoning_effort = "choosing from six labels needs little thinking",
    constraint = "the schema guarantees a parseable object",
  },
}
