-- constrained_category.lua - classify tickets into the six labels, with and without a choice
-- constraint, greedy and sampled.
--
--   workbench scripts/constrained_category.lua
-- Unconstrained, TinyLM writes whatever follows "Category:" in its corpus, which is usually a
-- label, but nothing stops it from writing something else. Under wb.constraint.choice it can
-- only spell one of the six labels (any tokenization, with or without the leading space), and
-- greedy decoding picks the most likely label.
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local wb = L.wb

local LABELS = corpus.LABELS
local is_label = {}
for _, l in ipairs(LABELS) do is_label[l] = true end

-- Two templates per label, placeholders filled with fixed values: a small, balanced test set.
local function ticket_set(per_label)
  local out, count = {}, {}
  for _, t in ipairs(corpus.TICKETS) do
    local label = t[2]
    count[label] = (count[label] or 0) + 1
    if count[label] <= per_label then
      local msg = t[1]:gsub("{plan}", "Team"):gsub("{month}", "March")
      out[#out + 1] = {msg = msg, label = label, priority = t[3], needs_human = t[4]}
    end
  end
  return out
end

local function classify(prompt, params, constraint)
  local p = {max_tokens = 12, stop = {"\n"}}
  for k, v in pairs(params) do p[k] = v end
  local r = L.model:generate(prompt, p, constraint and {constraint = constraint} or nil)
  return r.text:gsub("^%s+", ""):gsub("%s+$", ""), r
end

local function measure(opts)
  opts = opts or {}
  local tickets = ticket_set(opts.per_label or 2)
  local c = wb.constraint.choice(L.tok, LABELS)
  local settings = {
    {name = "greedy", params = {temperature = 0}},
    {name = "sampled T=1", params = {temperature = 1, seed = 7}},
    {name = "sampled T=2", params = {temperature = 2, seed = 7}},
  }
  local rows, examples = {}, {}
  for _, s in ipairs(settings) do
    for _, constrained in ipairs({false, true}) do
      local valid, correct = 0, 0
      for i, t in ipairs(tickets) do
        local params = {}
        for k, v in pairs(s.params) do params[k] = v end
        if params.seed then params.seed = params.seed + i end
        local out = classify("Ticket: " .. t.msg .. "\nCategory:", params, constrained and c)
        if is_label[out] then valid = valid + 1 end
        if out == t.label then correct = correct + 1 end
        if not constrained and not is_label[out] and #examples < 6 then
          examples[#examples + 1] = {setting = s.name, ticket = t.msg, output = out}
        end
      end
      rows[#rows + 1] = {setting = s.name, constraint = constrained and "choice" or "none",
                         tickets = #tickets, valid_label = valid, correct = correct}
    end
  end
  return {rows = rows, examples = examples, compile_ms = c:info().compile_ms,
          states = c:info().states, tickets = #tickets}
end

local r = measure()
if L.is_main("constrained_category.lua") then
  print(("Choice constraint over %d labels: %d DFA states, compiled in %.2f ms"):format(
    #LABELS, r.states, r.compile_ms))
  util.print_table(r.rows, {"setting", "constraint", "tickets", "valid_label", "correct"})
  if #r.examples > 0 then
    print("\nWhat unconstrained decoding wrote instead of a label:")
    util.print_table(r.examples, {"setting", "ticket", "output"})
  end
end
r.measure = measure
return r
