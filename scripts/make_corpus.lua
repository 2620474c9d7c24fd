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

local function usage(msg)
  if msg then io.stderr:write("make_corpus: ", msg, "\n") end
  io.stderr:write("usage: make_corpus.lua [--seed N] [--out DIR] [--conversations N] [--tickets N]",
    " [--json-tickets N] [--val-fraction F] [--stats-only]\n")
  os.exit(2)
end

local opts, out, stats_only = {}, "models/data", false
local argv = arg or {}
local i = 1
local function value(name)
  i = i + 1
  local v = argv[i]
  if v == nil then usage("missing value for " .. name) end
  return v
end
local function int(name)
  local v = math.tointeger(tonumber(value(name)))
  if not v or v < 0 then usage(name .. " needs a non-negative integer") end
  return v
end
while i <= #argv do
  local a = argv[i]
  if a == "--seed" then opts.seed = int(a)
  elseif a == "--out" then out = value(a)
  elseif a == "--conversations" then opts.conversations = int(a)
  elseif a == "--tickets" then opts.tickets = int(a)
  elseif a == "--json-tickets" then opts.json_tickets = int(a)
  elseif a == "--val-fraction" then
    opts.val_fraction = tonumber(value(a))
    if not opts.val_fraction or opts.val_fraction < 0 or opts.val_fraction >= 1 then
      usage("--val-fraction needs a number in [0, 1)")
    end
  elseif a == "--stats-only" then stats_only = true
  elseif a == "-h" or a == "--help" then usage()
  else usage("unknown argument " .. a) end
  i = i + 1
end

local c = corpus.generate(opts)
local o = c.opts
print(string.format("seed %d: %d conversations, %d label records, %d json records, val fraction %g",
  o.seed, o.conversations, o.tickets, o.json_tickets, o.val_fraction))

if not stats_only then
  os.execute('mkdir -p "' .. out:gsub('"', '\\"') .. '"')
  for name, text in pairs({ train = c.train, val = c.val }) do
    local path = out .. "/brightlane_" .. name .. ".txt"
    local f = assert(io.open(path, "wb"))
    assert(f:write(text))
    assert(f:close())
    print(string.format("wrote %s (%d bytes)", path, #text))
  end
end

print(corpus.format_stats(corpus.stats(c.train), "train"))
print(corpus.format_stats(corpus.stats(c.val), "validation"))
