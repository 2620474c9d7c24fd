-- penalties.lua - frequency vs presence (and repetition) penalty: what each does to the numbers,
-- and why it barely changes what a memorising model says.
--
--   workbench scripts/penalties.lua
--
-- Part 1, the arithmetic, on the open prompt "Customer (Ana): Hi,": pretend the top word has
-- already been said k times and look at its probability. A frequency penalty subtracts
-- k x value from its logit, so each repeat pushes harder; a presence penalty subtracts the value
-- once, however often the word came back.
-- Part 2, the behaviour: greedy continuations of 80 tokens (the end of a conversation does not
-- stop them) under each setting, with the number of distinct tokens and the most repeated one.
-- TinyLM's next token usually wins by several nats, more than a penalty of 0.5-1.0 takes away, so
-- only strong settings change its greedy text; on a flatter distribution the same values bite.
require("wb.cli").parse(arg, "scripts/penalties.lua", {}, { about = "frequency vs presence (and repetition) penalty: what each does to the numbers, and why it barely changes what a memorising model says." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local wb = L.wb
local util = require("wb.util")
local lesson = require("wb.lesson")

local PROMPT = L.UNCERTAIN
local N = 80
local VALUE = 0.5

local function arithmetic()
  local logits = L.logits_for(PROMPT)
  local top = logits:argmax()
  local rows = {}
  for _, k in ipairs({ 0, 1, 2, 4, 8 }) do
    local said = {}
    for i = 1, k do said[i] = top end
    local function p(params) return wb.sampling.apply(logits, params, said):get(top) end
    rows[#rows + 1] = {
      times_said = k,
      none = p({}),
      frequency = p({ frequency_penalty = VALUE }),
      presence = p({ presence_penalty = VALUE }),
    }
  end
  return rows, L.tok:token(top)
end

local SETTINGS = {
  { name = "no penalty", params = {} },
  { name = "frequency 0.5", params = { frequency_penalty = 0.5 } },
  { name = "frequency 2.0", params = { frequency_penalty = 2.0 } },
  { name = "presence 0.5", params = { presence_penalty = 0.5 } },
  { name = "presence 2.0", params = { presence_penalty = 2.0 } },
  { name = "repetition 1.3", params = { repetition_penalty = 1.3 } },
  { name = "repetition 2.0", params = { repetition_penalty = 2.0 } },
}

local function behaviour()
  local rows = {}
  for _, s in ipairs(SETTINGS) do
    local params = { max_tokens = N, temperature = 0 }
    for k, v in pairs(s.params) do params[k] = v end
    local out = L.model:generate(PROMPT, params, { ignore_eos = true })
    local counts, distinct, top_id, top_n = {}, 0, nil, 0
    for _, id in ipairs(out.token_ids) do
      counts[id] = (counts[id] or 0) + 1
      if counts[id] == 1 then distinct = distinct + 1 end
      if counts[id] > top_n then top_id, top_n = id, counts[id] end
    end
    rows[#rows + 1] = { setting = s.name, tokens = #out.token_ids, distinct = distinct,
                        most_repeated = ("%s x%d"):format(
                          (("%q"):format(L.tok:decode({ top_id })):gsub("\\\n", "\\n")), top_n),
                        max_count = top_n, text = out.text }
  end
  return rows
end

local r = {}
r.arithmetic, r.word = arithmetic()
r.behaviour = behaviour()
r.lesson = "penalties"
-- Which settings changed the greedy text at all, against no penalty: the sentence names them.
do
  local base = r.behaviour[1].text
  local changed, same = {}, {}
  for i = 2, #r.behaviour do
    local row = r.behaviour[i]
    row.changed = row.text ~= base
    if row.changed then changed[#changed + 1] = row.setting else same[#same + 1] = row.setting end
  end
  r.changed, r.unchanged = changed, same
  lesson.conclude(r, "only_some_change", #same > 0 and #changed > 0,
    ("Only %s changed the greedy text; %s left it as it was: the memorised model's winners lead "
     .. "by more than those take away, while the probabilities in part 1 move all the same.")
      :format(table.concat(changed, ", "), table.concat(same, ", ")),
    #changed == 0 and "No setting changed the greedy text on this run."
      or ("Every setting changed the greedy text (%s): this model's winners do not lead by much.")
        :format(table.concat(changed, ", ")))
end
lesson.emit(r)

if L.is_main("penalties.lua") then
  print(("Part 1: p(%q) after %q when it was already said k times (penalty value %.1f)")
        :format(r.word, PROMPT, VALUE))
  local t = {}
  for _, row in ipairs(r.arithmetic) do
    t[#t + 1] = { k = row.times_said, none = ("%.3f"):format(row.none),
                  frequency = ("%.3f"):format(row.frequency), presence = ("%.3f"):format(row.presence) }
  end
  util.print_table(t, { "k", "none", "frequency", "presence" })
  print(("\nPart 2: greedy continuations of %q, %d tokens each"):format(PROMPT, N))
  for _, row in ipairs(r.behaviour) do row.start = row.text:sub(1, 40):gsub("\n", "\\n") end
  util.print_table(r.behaviour, { "setting", "tokens", "distinct", "most_repeated", "start" })
  print()
  lesson.print_conclusions(r)
end
return r
