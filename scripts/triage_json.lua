-- triage_json.lua - triage objects under a JSON-schema constraint: every output parses.
--
--   workbench scripts/triage_json.lua
-- The schema fixes the keys and their order, the six categories, the four priorities and a
-- boolean; the constraint compiles it to a regex, the regex to a byte DFA, and the DFA to one
-- token mask per state. TinyLM saw a few of these objects in training, so it half knows the
-- format; unconstrained it often breaks it, constrained it cannot.
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local wb = L.wb

local SCHEMA = {
  type = "object",
  properties = {
    category = {enum = corpus.LABELS},
    priority = {enum = corpus.PRIORITIES},
    needs_human = {type = "boolean"},
  },
  required = {"category", "priority", "needs_human"},
}

local is_label, is_prio = {}, {}
for _, l in ipairs(corpus.LABELS) do is_label[l] = true end
for _, p in ipairs(corpus.PRIORITIES) do is_prio[p] = true end

-- Parse and validate one output: the object, or nil and why not.
local function check(text)
  local ok, obj = pcall(wb.json.decode, text)
  if not ok or type(obj) ~= "table" then return nil, "does not parse" end
  if not is_label[obj.category] then return nil, "bad category" end
  if not is_prio[obj.priority] then return nil, "bad priority" end
  if type(obj.needs_human) ~= "boolean" then return nil, "bad needs_human" end
  return obj
end

local function ticket_set(per_label)
  local out, count = {}, {}
  for _, t in ipairs(corpus.TICKETS) do
    count[t[2]] = (count[t[2]] or 0) + 1
    if count[t[2]] <= per_label then
      out[#out + 1] = {msg = t[1]:gsub("{plan}", "Team"):gsub("{month}", "March"),
                       category = t[2], priority = t[3], needs_human = t[4]}
    end
  end
  return out
end

local function measure(opts)
  opts = opts or {}
  local c = wb.constraint.json_schema(L.tok, SCHEMA)
  local tickets = ticket_set(opts.per_label or 2)
  local rows, outputs = {}, {}
  for _, s in ipairs({{"greedy", 0}, {"sampled T=1", 1}, {"sampled T=1.5", 1.5}}) do
    for _, constrained in ipairs({false, true}) do
      local row = {setting = s[1], constraint = constrained and "json_schema" or "none",
                   outputs = 0, parse = 0, valid = 0, category = 0, priority = 0, human = 0}
      for i, t in ipairs(tickets) do
        for rep = 1, (s[2] == 0 and 1 or (opts.samples or 2)) do
          local r = L.model:generate("Ticket: " .. t.msg .. "\nTriage:",
                                     {temperature = s[2], seed = 1000 * i + rep, max_tokens = 96,
                                      stop = {"\n"}},
                                     constrained and {constraint = c} or nil)
          row.outputs = row.outputs + 1
          local obj, why = check(r.text)
          if obj or why ~= "does not parse" then row.parse = row.parse + 1 end
          if obj then
            row.valid = row.valid + 1
            if obj.category == t.category then row.category = row.category + 1 end
            if obj.priority == t.priority then row.priority = row.priority + 1 end
            if obj.needs_human == t.needs_human then row.human = row.human + 1 end
          end
          outputs[#outputs + 1] = {setting = s[1], constrained = constrained, text = r.text,
                                   valid = obj ~= nil, stop_reason = r.stop_reason}
        end
      end
      rows[#rows + 1] = row
    end
  end
  local info = c:info()
  return {rows = rows, outputs = outputs, compile_ms = info.compile_ms, states = info.states,
          masks = info.masks, regex = wb.constraint.schema_regex(SCHEMA)}
end

local r = measure()
if L.is_main("triage_json.lua") then
  print(("Triage schema -> regex of %d bytes -> %d DFA states, %d distinct token masks, "
         .. "compiled in %.2f ms"):format(#r.regex, r.states, r.masks, r.compile_ms))
  util.print_table(r.rows, {"setting", "constraint", "outputs", "parse", "valid", "category",
                            "priority", "human"})
  print("\nA few outputs:")
  local shown = 0
  for _, o in ipairs(r.outputs) do
    if shown < 6 and (o.setting ~= "greedy" or shown < 2) then
      print(("  %-13s %-5s %s"):format(o.setting, o.constrained and "json" or "free",
                                      (o.text:gsub("\n", "\\n"))))
      shown = shown + 1
    end
  end
end
r.measure = measure
r.check = check
r.SCHEMA = SCHEMA
return r
