-- constrained_category.lua - classify tickets into the six labels, with and without a choice
-- constraint, greedy and sampled, on tickets from training and on held-out tickets.
--
--   workbench scripts/constrained_category.lua
-- Unconstrained, TinyLM writes whatever follows "Category:" in its corpus, which is usually a
-- label, but nothing stops it from writing something else. Under wb.constraint.choice it can
-- only spell one of the six labels (any tokenization, with or without the leading space), and
-- greedy decoding picks the most likely label. The training tickets are the corpus's own
-- templates; the held-out ones (wb.heldout) say the same kinds of things in words the model
-- never saw, so the two accuracies side by side separate recall from reading. The sentences at
-- the end are chosen from the table's numbers.
require("wb.cli").parse(arg, "scripts/constrained_category.lua", {}, { about = "classify tickets into the six labels, with and without a choice constraint, greedy and sampled, on tickets from training and on held-out tickets." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local heldout = require("wb.heldout")
local lesson = require("wb.lesson")
local wb = L.wb

local LABELS = corpus.LABELS
local is_label = {}
for _, l in ipairs(LABELS) do is_label[l] = true end

local function classify(prompt, params, constraint)
  local p = {max_tokens = 12, stop = {"\n"}}
  for k, v in pairs(params) do p[k] = v end
  local r = L.model:generate(prompt, p, constraint and {constraint = constraint} or nil)
  return r.text:gsub("^%s+", ""):gsub("%s+$", ""), r
end

local SETTINGS = {
  {name = "greedy", params = {temperature = 0}},
  {name = "sampled T=1", params = {temperature = 1, seed = 7}},
  {name = "sampled T=2", params = {temperature = 2, seed = 7}},
}

local function find_row(rows, set, setting, constraint)
  for _, row in ipairs(rows) do
    if row.set == set and row.setting == setting and row.constraint == constraint then return row end
  end
end

local function measure(opts)
  opts = opts or {}
  local c = wb.constraint.choice(L.tok, LABELS)
  local rows, examples = {}, {}
  for _, set in ipairs(heldout.ticket_sets(opts.per_label or 2)) do
    for _, s in ipairs(SETTINGS) do
      for _, constrained in ipairs({false, true}) do
        local valid, correct = 0, 0
        for i, t in ipairs(set.tickets) do
          local params = {}
          for k, v in pairs(s.params) do params[k] = v end
          if params.seed then params.seed = params.seed + i end
          local out = classify("Ticket: " .. t.msg .. "\nCategory:", params, constrained and c)
          if is_label[out] then valid = valid + 1 end
          if out == t.category then correct = correct + 1 end
          if not constrained and not is_label[out] and #examples < 6 then
            examples[#examples + 1] = {set = set.name, setting = s.name, ticket = t.msg, output = out}
          end
        end
        rows[#rows + 1] = {set = set.name, setting = s.name,
                           constraint = constrained and "choice" or "none",
                           tickets = #set.tickets, valid_label = valid, correct = correct}
      end
    end
  end
  local r = {lesson = "constrained_category", rows = rows, examples = examples,
             compile_ms = c:info().compile_ms, states = c:info().states, labels = #LABELS}

  -- What the numbers support.
  local all_valid, free_invalid, free_n = true, 0, 0
  for _, row in ipairs(rows) do
    if row.constraint == "choice" and row.valid_label < row.tickets then all_valid = false end
    if row.constraint == "none" then
      free_invalid = free_invalid + row.tickets - row.valid_label
      free_n = free_n + row.tickets
    end
  end
  lesson.conclude(r, "choice_always_label", all_valid,
    "Under the choice constraint every output, greedy and sampled, was one of the six labels.",
    "Under the choice constraint some outputs were not labels: the constraint is broken.")
  lesson.conclude(r, "free_sometimes_not_label", free_invalid > 0,
    ("Unconstrained, %d of %d outputs were not a label; the constraint removes exactly those."):format(
      free_invalid, free_n),
    ("Unconstrained, all %d outputs happened to be labels on this run: the constraint guarantees "
     .. "what the model did anyway."):format(free_n))
  local tr = find_row(rows, "training", "greedy", "choice")
  local ho = find_row(rows, "held-out", "greedy", "choice")
  lesson.accuracy_contrast(r, "greedy_choice", "Greedy under the constraint", tr.correct,
                           tr.tickets, ho.correct, ho.tickets, #LABELS)
  return r
end

local r = measure({per_label = 4})
if L.is_main("constrained_category.lua") then
  print(("Choice constraint over %d labels: %d DFA states, compiled in %.2f ms"):format(
    #LABELS, r.states, r.compile_ms))
  util.print_table(r.rows, {"set", "setting", "constraint", "tickets", "valid_label", "correct"})
  if #r.examples > 0 then
    print("\nWhat unconstrained decoding wrote instead of a label:")
    util.print_table(r.examples, {"set", "setting", "ticket", "output"})
  end
  print()
  lesson.print_conclusions(r)
end
r.measure = measure
lesson.emit(r)
return r
