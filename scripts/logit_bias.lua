-- logit_bias.lua - banning, nudging and forcing tokens, and what that does to the reply.
--
--   workbench scripts/logit_bias.lua
-- logit_bias adds a number to a token's logit before temperature and the filters: -math.huge
-- bans it, a few units nudge it, +100 forces it wherever it is allowed at all. On a memorised
-- continuation a ban does not make the model say something new; it makes it say the next thing
-- it memorised. Under a constraint the bias acts inside the allowed set.
require("wb.cli").parse(arg, "scripts/logit_bias.lua", {}, { about = "banning, nudging and forcing tokens, and what that does to the reply." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local wb = L.wb

local PROMPT = L.UNCERTAIN -- "Customer (Ana): Hi," : several questions are plausible
local TICKET = "Ticket: I was charged twice this month\nCategory:"

local function first_token(text) return L.tok:encode(text)[1] end

local function reply(prompt, bias, opts)
  local r = L.model:generate(prompt, {temperature = 0, max_tokens = 12, stop = {"\n"},
                                      logit_bias = bias}, opts)
  return r
end

local function measure()
  local base_probs = L.distribution(PROMPT)
  local top = base_probs:topk(3)
  local top_id, second_id = top[1].id, top[2].id
  local rows = {}
  local function row(name, bias)
    local r = reply(PROMPT, bias)
    local p = wb.sampling.apply(L.logits_for(PROMPT), {logit_bias = bias}, {})
    rows[#rows + 1] = {setting = name, first = L.tok:decode({r.token_ids[1]}),
                       p_top = p:get(top_id), p_second = p:get(second_id),
                       reply = r.text:gsub("\n", "\\n"), first_id = r.token_ids[1]}
  end
  row("no bias", nil)
  row("ban the top token", {[top_id] = -math.huge})
  row("nudge the second +1", {[second_id] = 1})
  row("nudge the second +3", {[second_id] = 3})
  row("force the second +100", {[second_id] = 100})
  local banned_both = {[top_id] = -math.huge, [second_id] = -math.huge}
  row("ban the top two", banned_both)

  -- Under a choice constraint: ban the first token of the model's favourite label.
  local c = wb.constraint.choice(L.tok, corpus.LABELS)
  local free = reply(TICKET, nil, {constraint = c})
  local fav = free.token_ids[1]
  local banned = reply(TICKET, {[fav] = -math.huge}, {constraint = c})
  local forced = reply(TICKET, {[first_token(" cancellation")] = 100}, {constraint = c})
  local constrained = {
    {setting = "choice, no bias", label = free.text},
    {setting = "choice, ban its first token", label = banned.text},
    {setting = "choice, force ' cancellation' +100", label = forced.text},
  }
  return {rows = rows, constrained = constrained, top_id = top_id, second_id = second_id,
          top = L.tok:decode({top_id}), second = L.tok:decode({second_id})}
end

local r = measure()
if L.is_main("logit_bias.lua") then
  print(("Greedy replies to %q; top token %q, second %q"):format(PROMPT, r.top, r.second))
  util.print_table(r.rows, {"setting", "first", "p_top", "p_second", "reply"})
  print("\nUnder a choice constraint (the label for a duplicate charge):")
  util.print_table(r.constrained, {"setting", "label"})
end
return r
