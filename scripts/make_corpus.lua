-- Generate the Brightlane support corpus.
--
--   lua5.4 scripts/make_corpus.lua [--seed N] [--out DIR] [--conversations N] [--tickets N]
--                                  [--json-tickets N] [--val-fraction F] [--stats-only]
--   workbench scripts/make_corpus.lua ...     (same; the generator does not need the wb module)
--
-- Writes DIR/brightlane_train.txt and DIR/brightlane_val.txt (default DIR: models/data) and
-- prints the measured statistics of both files.

-- Find lua/wb relative to this script (scripts/../lua), whatever the working directory.
local script = (arg and arg[0]) or "scripts/make_corpus.lua"
local script_dir = script:match("^(.*)[/\\]") or "."
package.path = script_dir .. "/../lua/?.lua;" .. package.path

local corpus = require("wb.corpus")
local wb = require("wb")

local a = require("wb.cli").parse(arg, "scripts/make_corpus.lua", {
  { "seed", "count", nil, "generator seed", 0 },
  { "out", "string", "models/data", "output directory (the trainer reads models/data)" },
  { "conversations", "count", nil, "conversations", 0 },
  { "tickets", "count", nil, "label records", 0 },
  { "json-tickets", "count", nil, "JSON records", 0 },
  { "val-fraction", "number", nil, "held-out fraction in [0, 1)", 0 },
  { "stats-only", "flag", nil, "print the statistics, write nothing" },
}, { about = "generate the Brightlane support corpus (plain lua5.4 runs it too)" })
if a.val_fraction and a.val_fraction >= 1 then
  io.stderr:write("scripts/make_corpus.lua: --val-fraction needs a number in [0, 1)\n")
  os.exit(2)
end
local opts = { seed = a.seed, conversations = a.conversations, tickets = a.tickets,
  json_tickets = a.json_tickets, val_fraction = a.val_fraction }
local out, stats_only = a.out, a.stats_only == true

local c = corpus.generate(opts)
local o = c.opts
print(string.format("seed %d: %d conversations, %d label records, %d json records, val fraction %g",
  o.seed, o.conversations, o.tickets, o.json_tickets, o.val_fraction))

if not stats_only then
  os.execute('mkdir -p "' .. out:gsub('"', '\\"') .. '"')
  for name, text in pairs({ train = c.train, val = c.val }) do
    local path = out .. "/brightlane_" .. name .. ".txt"
    wb.write_file(path, text) -- atomic, every write checked
    print(string.format("wrote %s (%d bytes)", path, #text))
  end
end

print(corpus.format_stats(corpus.stats(c.train), "train"))
print(corpus.format_stats(corpus.stats(c.val), "validation"))
