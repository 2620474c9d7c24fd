-- Tests for wb.corpus (the Brightlane corpus generator).
-- Run from the repository root:  workbench tests/lua/test_corpus.lua
-- (or: lua5.4 tests/lua/test_corpus.lua; the generator needs no `wb` module).

local script = (arg and arg[0]) or "tests/lua/test_corpus.lua"
local here = script:match("^(.*)[/\\]") or "."
package.path = here .. "/../../lua/?.lua;lua/?.lua;" .. package.path

local corpus = require("wb.corpus")

local failures, checks = 0, 0
local function check(cond, fmt, ...)
  checks = checks + 1
  if not cond then
    failures = failures + 1
    io.stderr:write("FAIL: ", string.format(fmt, ...), "\n")
  end
end

-- A small corpus from the same generator keeps the test well under a second.
local SMALL = { seed = 7, conversations = 1600, tickets = 800 }
local c = corpus.generate(SMALL)
local s = corpus.stats(c.train)

-- PCG32 known answer (reference pcg32 demo, seed 42, sequence 54).
do
  local r = corpus.rng(42, 54)
  local want = { 0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e }
  for i, w in ipairs(want) do
    local got = r:u32()
    check(got == w, "pcg32 output %d: got 0x%08x want 0x%08x", i, got, w)
  end
end

-- Determinism: same seed, same bytes; different seed, different text.
do
  local again = corpus.generate(SMALL)
  check(again.train == c.train and again.val == c.val, "same seed gave different text")
  local other = corpus.generate{ seed = 8, conversations = SMALL.conversations, tickets = SMALL.tickets }
  check(other.train ~= c.train, "different seeds gave the same train text")
  check(other.val ~= c.val, "different seeds gave the same validation text")
end

-- Document structure and separators.
do
  check(c.train:sub(-#corpus.SEP) == corpus.SEP, "train text does not end with the separator")
  check(#corpus.split(c.train) == #c.train_docs, "split(join(docs)) lost documents")
  check(s.docs == SMALL.conversations + SMALL.tickets + SMALL.tickets // 4,
    "unexpected number of train docs: %d", s.docs)
  for _, doc in ipairs(c.train_docs) do
    if doc:find(corpus.EOT, 1, true) then check(false, "document contains the end-of-text marker"); break end
  end
  for n, count in pairs(s.turns_hist) do
    check(n >= 2 and n <= 6, "conversation with %d turns (%d times)", n, count)
  end
  -- most conversations open with a customer turn
  local customer_first = 0
  for _, doc in ipairs(c.train_docs) do
    if doc:sub(1, 9) == "Customer " then customer_first = customer_first + 1 end
  end
  check(customer_first > 0.8 * s.conversations, "only %d of %d conversations start with a customer",
    customer_first, s.conversations)
  -- every line of a conversation is a Customer or Agent turn; turns alternate after the opening
  local bad = 0
  for _, doc in ipairs(c.train_docs) do
    if doc:sub(1, 8) ~= "Ticket: " then
      local prev
      for line in doc:gmatch("[^\n]+") do
        local who = line:match("^(%a+) %([%a]+%): %S")
        if who ~= "Customer" and who ~= "Agent" then bad = bad + 1 end
        if prev and who == prev then bad = bad + 1 end
        prev = who
      end
    end
  end
  check(bad == 0, "%d malformed or non-alternating conversation lines", bad)
end

-- People: at least 30 customer names; exactly 16 agents used about equally.
do
  local ncust = 0
  for _ in pairs(s.customers) do ncust = ncust + 1 end
  check(ncust >= 30, "only %d customer names", ncust)
  check(#corpus.AGENTS == 16, "AGENTS has %d names", #corpus.AGENTS)
  local nagents, total = 0, 0
  for _, n in pairs(s.agents) do nagents = nagents + 1; total = total + n end
  check(nagents == 16, "%d distinct agent names used", nagents)
  local mean = total / 16
  for name, n in pairs(s.agents) do
    check(math.abs(n - mean) <= 0.2 * mean, "agent %s has %d turns, mean %.1f", name, n, mean)
  end
  for name in pairs(s.customers) do
    check(not s.agents[name], "%s is both a customer and an agent", name)
  end
end

-- The uncertain prompt: first word after "Hi," has 2.5-3.5 bits of entropy, at least 8 words.
do
  local nwords = 0
  for _ in pairs(s.first_words) do nwords = nwords + 1 end
  check(nwords >= 8, "only %d first words after 'Hi,'", nwords)
  check(s.first_word_entropy >= 2.5 and s.first_word_entropy <= 3.5,
    "first-word entropy %.3f bits outside [2.5, 3.5]", s.first_word_entropy)
  -- every "Hi," in the corpus is a customer opening
  local his, openings = 0, 0
  for _ in c.train:gmatch("Hi,") do his = his + 1 end
  for _ in c.train:gmatch("Customer %([%a]+%): Hi, ") do openings = openings + 1 end
  check(his == openings, "%d 'Hi,' occurrences but %d customer openings", his, openings)
end

-- The certain prompt: "Hi, my" is always followed by " account".
do
  local n = 0
  for k, v in pairs(s.hi_my_next) do
    check(k == " account", "'Hi, my' followed by %q (%d times)", k, v)
    n = n + v
  end
  check(n > 0, "'Hi, my' never occurs")
end

-- The export prompt exists verbatim and is answered on topic.
do
  local q = "): Hi, how do I export my board data?\nAgent ("
  check(c.train:find(q, 1, true) ~= nil, "export question missing")
  local on_topic, total = 0, 0
  for reply in c.train:gmatch("Hi, how do I export my board data%?\nAgent %([%a]+%): ([^\n]*)") do
    total = total + 1
    if reply:find("Export", 1, true) then on_topic = on_topic + 1 end
  end
  check(total > 0 and on_topic == total, "export replies on topic: %d of %d", on_topic, total)
end

-- Triage records: exactly six labels; JSON lines have the right shape and are rarer.
do
  local want = {}
  for _, l in ipairs(corpus.LABELS) do want[l] = true end
  check(#corpus.LABELS == 6, "LABELS has %d entries", #corpus.LABELS)
  local nlabels = 0
  for l in pairs(s.labels) do
    nlabels = nlabels + 1
    check(want[l], "unknown label %q", l)
  end
  check(nlabels == 6, "%d distinct labels used", nlabels)
  check(s.label_records > 0 and s.json_records > 0, "missing record formats")
  check(s.json_records < s.label_records, "json records (%d) not rarer than label records (%d)",
    s.json_records, s.label_records)
  check(c.train:find("Ticket: I was charged twice this month\nCategory: billing", 1, true) ~= nil,
    "charged-twice -> billing record missing")

  local bad, nj = 0, 0
  for line in c.train:gmatch("Triage: [^\n]*") do
    nj = nj + 1
    local cat, pr, nh = line:match(
      '^Triage: {"category": "([%w_]+)", "priority": "(%a+)", "needs_human": (%a+)}$')
    if not (cat and want[cat] and (pr == "low" or pr == "medium" or pr == "high" or pr == "urgent")
            and (nh == "true" or nh == "false")) then
      bad = bad + 1
    end
    if pr == "urgent" and nh ~= "true" then bad = bad + 1 end
  end
  check(nj == s.json_records and bad == 0, "%d malformed Triage lines of %d", bad, nj)
  for line in c.train:gmatch("Category: [^\n]*") do
    if not want[line:sub(11)] then check(false, "bad Category line %q", line); break end
  end
  -- consistency: the same ticket text always gets the same label and the same triage
  local seen, conflicts = {}, 0
  for _, doc in ipairs(c.train_docs) do
    local msg, rest = doc:match("^Ticket: ([^\n]*)\n(.*)$")
    if msg then
      local key = rest:sub(1, 9) .. msg
      if seen[key] and seen[key] ~= rest then conflicts = conflicts + 1 end
      seen[key] = rest
    end
  end
  check(conflicts == 0, "%d tickets with inconsistent labels", conflicts)
end

-- Lexical variety. Byte-level BPE on the default corpus must reach 2048 ids with the default
-- min_pair_count of 2, which needs enough distinct words. Measured on this small corpus (seed 7):
-- 1427 distinct letter runs and 301 distinct digit runs; the pre-slot corpus had 682 and 5 and
-- its BPE stopped at 1737 ids. The thresholds leave a margin below the measured values.
do
  check(s.distinct_words >= 1200, "only %d distinct words (letter runs)", s.distinct_words)
  check(s.distinct_words + s.distinct_numbers >= 1500, "only %d distinct words and digit runs",
    s.distinct_words + s.distinct_numbers)
  -- every slot was filled
  local left = c.train:match("{%w+}") or c.val:match("{%w+}")
  check(left == nil, "unfilled slot %s", tostring(left))
  -- slot values never reach the tested openings: every "Hi, my" is "Hi, my account" (checked
  -- above) and the export reply keeps its first variant as the most common one
  local first, total = 0, 0
  for reply in c.train:gmatch("Hi, how do I export my board data%?\nAgent %([%a]+%): ([^\n]*)") do
    total = total + 1
    if reply:find("^Open the board menu, choose Export, and pick CSV or JSON%.") then first = first + 1 end
  end
  check(total > 0 and first > 0.35 * total, "first export reply in %d of %d", first, total)
end

-- Validation: distinct documents, none in train, about the requested fraction.
do
  local in_train = {}
  for _, d in ipairs(c.train_docs) do in_train[d] = true end
  local leaked, dup, seen = 0, 0, {}
  for _, d in ipairs(c.val_docs) do
    if in_train[d] then leaked = leaked + 1 end
    if seen[d] then dup = dup + 1 end
    seen[d] = true
  end
  check(leaked == 0, "%d validation docs appear in train", leaked)
  check(dup == 0, "%d duplicate validation docs", dup)
  local frac = #c.val_docs / #c.train_docs
  check(frac >= 0.05 and frac <= 0.10, "validation fraction %.3f", frac)
  local vs = corpus.stats(c.val)
  check(vs.first_word_entropy >= 2.5 and vs.first_word_entropy <= 3.5,
    "validation first-word entropy %.3f", vs.first_word_entropy)
end

if failures > 0 then
  io.stderr:write(string.format("test_corpus: %d of %d checks failed\n", failures, checks))
  os.exit(1)
end
print(string.format("test_corpus: %d checks passed", checks))
