-- wb.heldout - support tickets TinyLM never saw, for measuring generalisation instead of recall.
--
--   local heldout = require("wb.heldout")
--   for _, t in ipairs(heldout.TICKETS) do ... t.msg, t.category, t.priority, t.needs_human, t.style
--   heldout.training_tickets(per_label)   -- the comparison set: corpus templates, slots filled
--   heldout.ticket_sets(per_label)        -- { {name = "training", tickets = ...}, {name = "held-out", ...} }
--
-- The training corpus (wb.corpus) builds every ticket from a fixed list of templates, so a
-- lesson that scores the model on those templates measures memorisation. These were written
-- separately, in the same six categories and with the same priority rules, but with other
-- wording, another order of the facts, other lengths, casual spelling and typos. tests/lua/
-- test_corpus.lua checks that none shares a run of 8 or more words with the training text.
-- Labels follow the corpus's rules: a double charge is high and needs a human, a suspicious
-- login is urgent, how-to questions and feature requests are low and need no human,
-- cancellations always need one.
local corpus = require("wb.corpus")

local M = {}

-- { message, category, priority, needs_human, style }
local RAW = {
  { "hey so my credit card got billed 2 times for the same month?? pls fix", "billing", "high", true, "typos" },
  { "Looking at last quarter's statements, our finance lead noticed that what we paid at renewal "
    .. "does not match the price your website advertised. Could someone explain the difference",
    "billing", "medium", true, "long" },
  { "invoice for april, our accountant needs it", "billing", "low", false, "reordered" },
  { "Payment failed: the bank rejected my visa when the subscripton tried to renew", "billing",
    "medium", false, "typos" },

  { "cant sign in anymore, reset my pasword twice already", "account", "high", true, "typos" },
  { "An unfamiliar login from another country just showed up in my security log", "account",
    "urgent", true, "reworded" },
  { "Could you update the address I sign in with? I moved to a new company email", "account", "low",
    false, "reordered" },
  { "The 2FA code never reaches my new phone, so I am stuck on the sign-in screen and my old phone "
    .. "is gone", "account", "urgent", true, "long" },

  { "Since this morning the whole board is just white, nothing renders", "bug", "high", false,
    "reworded" },
  { "comments i post show up two times in our chat channel", "bug", "medium", false, "typos" },
  { "When I drag a card to a different list it jumps back after a refresh; three people on my "
    .. "team see the same thing", "bug", "high", true, "long" },
  { "File uploads keep failing with a red error message", "bug", "medium", false, "reworded" },

  { "whats the way to get all my cards out as a spreadsheet", "how_to", "low", false, "typos" },
  { "Is there a guide for bringing an outside guest into one of our boards", "how_to", "low", false,
    "reworded" },
  { "A card belongs on a different board, how can I move it there", "how_to", "low", false,
    "reordered" },
  { "where is the setting for linking google calendar", "how_to", "low", false, "reworded" },

  { "would be nice to have a night theme, my eyes hurt", "feature_request", "low", false, "reworded" },
  { "Our team would really appreciate being able to set cards that repeat every monday",
    "feature_request", "low", false, "long" },
  { "Any plans for an integration with MS Teams?", "feature_request", "low", false, "reworded" },
  { "Suggestion: let us print a board as a PDF document", "feature_request", "low", false,
    "reordered" },

  { "pls end our subscrption, we dont use it anymore", "cancellation", "medium", true, "typos" },
  { "We have decided to switch to a competitor, so please do not renew us at the end of the year",
    "cancellation", "high", true, "long" },
  { "Close my account for good and erase everything you store about me", "cancellation", "high",
    true, "reworded" },
  { "the business plan, how do I stop paying for it? we are done", "cancellation", "medium", true,
    "reordered" },
}

M.TICKETS = {}
for i, t in ipairs(RAW) do
  M.TICKETS[i] = { msg = t[1], category = t[2], priority = t[3], needs_human = t[4], style = t[5] }
end

-- The first per_label corpus templates of each category, slots filled with fixed values
-- ("Team", "March"): the tickets the model was trained on, as the lessons always used them.
function M.training_tickets(per_label)
  local out, count = {}, {}
  for _, t in ipairs(corpus.TICKETS) do
    count[t[2]] = (count[t[2]] or 0) + 1
    if count[t[2]] <= per_label then
      out[#out + 1] = { msg = (t[1]:gsub("{plan}", "Team"):gsub("{month}", "March")),
                        category = t[2], priority = t[3], needs_human = t[4], style = "training" }
    end
  end
  return out
end

-- The first per_label held-out tickets of each category.
function M.heldout_tickets(per_label)
  local out, count = {}, {}
  for _, t in ipairs(M.TICKETS) do
    count[t.category] = (count[t.category] or 0) + 1
    if count[t.category] <= per_label then out[#out + 1] = t end
  end
  return out
end

-- Both sets, the same number of tickets per category, in the order lessons print them.
function M.ticket_sets(per_label)
  return { { name = "training", tickets = M.training_tickets(per_label) },
           { name = "held-out", tickets = M.heldout_tickets(per_label) } }
end

-- Lower-case words (letters, digits, apostrophes) of a text, for n-gram comparisons.
function M.words(text)
  local out = {}
  for w in text:lower():gmatch("[%w']+") do out[#out + 1] = w end
  return out
end

-- Set of every n-word run in text, keyed by the words joined with a space.
function M.ngrams(text, n)
  local w, set = M.words(text), {}
  for i = 1, #w - n + 1 do set[table.concat(w, " ", i, i + n - 1)] = true end
  return set
end

return M
