-- triage_json.lua - triage objects under a JSON-schema constraint: every output parses.
--
--   workbench scripts/triage_json.lua
-- The schema fixes the keys and their order, the six categories, the four priorities and a
-- boolean; the constraint compiles it to a regex, the regex to a byte DFA, and the DFA to one
-- token mask per state. TinyLM saw such objects in training; how often it breaks the format
-- without the constraint, and at which temperature, is measured here and said at the end. The
-- tickets come from training and from the held-out set (wb.heldout), so the accuracy columns
-- show recall and generalisation side by side.
require("wb.cli").parse(arg, "scripts/triage_json.lua", {}, { about = "triage objects under a JSON-schema constraint: every output parses." })
local L = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/setup.lua")
local util = require("wb.util")
local corpus = require("wb.corpus")
local heldout = require("wb.heldout")
local lesson = require("wb.lesson")
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

local SETTINGS = {{"greedy", 0}, {"sampled T=1", 1}, {"sampled T=1.5", 1.5}}

local function find_row(rows, set, setting, constraint)
  for _, row in ipairs(rows) do
    if row.set == set and row.setting == setting and row.constraint == constraint then return row end
  end
end

-- The sentences the table supports: where the unconstrained format broke, that the constrained
-- one never did, and training against held-out accuracy.
local function conclude(r)
  local all_ok, parts, any_broke, total_free = true, {}, false, 0
  r.broke = {}
  for _, set in ipairs({"training", "held-out"}) do
    local broke = {}
    for _, s in ipairs(SETTINGS) do
      local free = find_row(r.rows, set, s[1], "none")
      local con = find_row(r.rows, set, s[1], "json_schema")
      if con.parse < con.outputs or con.valid < con.outputs then all_ok = false end
      total_free = total_free + free.outputs
      if free.valid < free.outputs then
        broke[#broke + 1] = ("%s (%d of %d invalid)"):format(s[1], free.outputs - free.valid,
                                                           free.outputs)
        r.broke[#r.broke + 1] = {set = set, setting = s[1]}
      end
    end
    any_broke = any_broke or #broke > 0
    parts[#parts + 1] = ("on %s tickets %s"):format(set, #broke == 0 and "never"
      or ("at " .. table.concat(broke, ", ")))
  end
  lesson.conclude(r, "constrained_always_valid", all_ok,
    "With the schema constraint every output parsed and validated, at every temperature.",
    "With the schema constraint some outputs did not validate: the constraint is broken.")
  lesson.conclude(r, "free_breaks", any_broke,
    ("Without the constraint the format broke %s; every setting not named stayed valid.")
      :format(table.concat(parts, "; ")),
    ("Without the constraint all %d outputs were valid on this run: the model had learned the "
     .. "format, and the constraint only guarantees it."):format(total_free))
  local tr = find_row(r.rows, "training", "greedy", "json_schema")
  local ho = find_row(r.rows, "held-out", "greedy", "json_schema")
  lesson.accuracy_contrast(r, "category", "Greedy JSON categories", tr.category, tr.outputs,
                           ho.category, ho.outputs, #corpus.LABELS)
end

local function measure(opts)
  opts = opts or {}
  local c = wb.constraint.json_schema(L.tok, SCHEMA)
  local rows, outputs = {}, {}
  for _, set in ipairs(heldout.ticket_sets(opts.per_label or 2)) do
    for _, s in ipairs(SETTINGS) do
      for _, constrained in ipairs({false, true}) do
        local row = {set = set.name, setting = s[1], constraint = constrained and "json_schema" or "none",
                     outputs = 0, parse = 0, valid = 0, category = 0, priority = 0, human = 0}
        for i, t in ipairs(set.tickets) do
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
            outputs[#outputs + 1] = {set = set.name, setting = s[1], constrained = constrained,
                                     text = r.text, valid = obj ~= nil, stop_reason = r.stop_reason}
          end
        end
        rows[#rows + 1] = row
      end
    end
  end
  local info = c:info()
  local r = {lesson = "triage_json", rows = rows, outputs = outputs, compile_ms = info.compile_ms,
             states = info.states, masks = info.masks, regex = wb.constraint.schema_regex(SCHEMA)}
  conclude(r)
  return r
end

local r = measure()
if L.is_main("triage_json.lua") then
  print(("Triage schema -> regex of %d bytes -> %d DFA states, %d distinct token masks, "
         .. "compiled in %.2f ms"):format(#r.regex, r.states, r.masks, r.compile_ms))
  util.print_table(r.rows, {"set", "setting", "constraint", "outputs", "parse", "valid", "category",
                            "priority", "human"})
  print("\nA few unconstrained outputs:")
  for _, set in ipairs({"training", "held-out"}) do
    local shown, valid_shown = 0, false
    for _, o in ipairs(r.outputs) do
      if o.set == set and not o.constrained and shown < 3 and (not o.valid or not valid_shown) then
        valid_shown = valid_shown or o.valid
        print(("  %-8s %-13s %-7s %s"):format(set, o.setting, o.valid and "valid" or "INVALID",
                                           (o.text:gsub("\n", "\\n"):sub(1, 70))))
        shown = shown + 1
      end
    end
  end
  print()
  lesson.print_conclusions(r)
end
r.measure = measure
r.check = check
r.SCHEMA = SCHEMA
lesson.emit(r)
return r
