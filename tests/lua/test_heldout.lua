-- test_heldout.lua - the held-out tickets (wb.heldout) are new text: no run of 8 words in common
-- with the training corpus the shipped model was trained on, balanced over the six labels.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local corpus = require("wb.corpus")

T.test("held-out tickets share no run of 8 words with the shipped model's training text", function()
  local heldout = require("wb.heldout")
  local wb = require("wb")
  local f = io.open(wb.default_model_dir() .. "/summary.json")
  local s = f and wb.json.decode(f:read("a")) or { corpus_seed = 1, corpus_conversations = 1000,
                                                   corpus_tickets = 550 }
  if f then f:close() end
  local c = corpus.generate({ seed = s.corpus_seed, conversations = s.corpus_conversations,
                              tickets = s.corpus_tickets })
  local train = heldout.ngrams(c.train, 8)
  for _, t in ipairs(heldout.TICKETS) do
    for g in pairs(heldout.ngrams(t.msg, 8)) do
      T.check(not train[g], ("held-out ticket %q repeats training text %q"):format(t.msg, g))
    end
  end
  -- The check can fail: a training template shares 8-word runs with the training text.
  local own = heldout.ngrams("Can I get a refund for the unused months of my annual plan", 8)
  local hit = false
  for g in pairs(own) do if train[g] then hit = true end end
  T.check(hit, "the n-gram check found nothing even in a training template")
end)

T.test("held-out tickets cover every label equally, with valid priorities and several styles", function()
  local heldout = require("wb.heldout")
  local per, styles, prio = {}, {}, {}
  for _, p in ipairs(corpus.PRIORITIES) do prio[p] = true end
  for _, t in ipairs(heldout.TICKETS) do
    per[t.category] = (per[t.category] or 0) + 1
    styles[t.style] = true
    T.check(prio[t.priority], t.priority)
    T.eq(type(t.needs_human), "boolean")
  end
  for _, l in ipairs(corpus.LABELS) do T.eq(per[l], 4, l) end
  for _, st in ipairs({ "typos", "long", "reordered", "reworded" }) do T.check(styles[st], st) end
  local sets = heldout.ticket_sets(2)
  T.eq(#sets[1].tickets, 12); T.eq(#sets[2].tickets, 12)
end)

T.done()
