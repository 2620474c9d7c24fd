-- wb.presets: loading with an empty environment, defaults, validation errors that name the key,
-- the file and the line, user directories, and edits that show on the next run with no rebuild.
local T = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local wb = require("wb")
local presets = require("wb.presets")

local build = os.getenv("WB_BUILD_DIR")
local exe = build and (build .. "/workbench") or arg[-1]
local tmp = T.tmpdir()

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1", "r"))
  local out = p:read("a")
  local _, _, code = p:close()
  return out, code
end

T.test("the shipped presets load, validate and carry the documented defaults", function()
  local names = presets.list()
  for _, n in ipairs({ "brainstorm", "drafts", "triage" }) do
    T.check(#names > 0 and table.concat(names, " "):find(n, 1, true), n .. " missing from list()")
  end
  for _, n in ipairs(names) do T.check(n ~= "pricing" and n ~= "effort", "data file listed: " .. n) end
  local t = presets.load("triage")
  T.eq(t.name, "triage")
  T.eq(t.temperature, 0)
  T.eq(t.constraint.kind, "json_schema")
  T.eq(#t.constraint.schema.properties.category.enum, 6)
  T.eq(t.models.groq, presets.DEFAULTS.models.groq) -- merged default
  local d = presets.load("drafts")
  T.eq(d.temperature, 0.7)
  T.eq(d.top_p, 0.9)
  local b = presets.load("brainstorm")
  T.check(b.temperature > 1 and b.min_p > 0, "brainstorm: high temperature with min-p")
  T.eq(b.top_k, nil) -- nil stays nil: the provider's default
end)

T.test("a preset edited on disk shows the change on the next load and the next script run", function()
  local path = tmp .. "/mytriage.lua"
  local src = T.read_file(presets.shipped_dir() .. "/triage.lua")
  T.write_file(path, src)
  T.eq(presets.load(path).max_tokens, 64)
  T.write_file(path, (src:gsub("max_tokens = 64", "max_tokens = 99")))
  T.eq(presets.load(path).max_tokens, 99)
  local out, code = run(("%s scripts/presets.lua %s 'Ticket: hi' --no-local --json --provider groq")
    :format(q(exe), q(path)))
  T.eq(code, 0, out)
  T.eq(wb.json.decode(out).groq.body.max_completion_tokens, 99)
end)

T.test("the user directory is searched first and may shadow a shipped preset", function()
  local dir = tmp .. "/user"
  os.execute("mkdir -p " .. q(dir))
  T.write_file(dir .. "/triage.lua", "return { temperature = 0.25, description = 'mine' }\n")
  T.write_file(dir .. "/extra.lua", "return { top_k = 5 }\n")
  local out, code = run(("WB_PRESETS_DIR=%s %s -e %s"):format(q(dir), q(exe),
    q("local P = require'wb.presets'; print(P.load('triage').temperature, P.load('extra').top_k, "
      .. "table.concat(P.list(), ','))")))
  T.eq(code, 0, out)
  T.eq(out, "0.25\t5\tbrainstorm,drafts,extra,triage\n")
end)

-- Write a preset and return the error its load raises.
local function load_error(text, want)
  local path = tmp .. "/bad.lua"
  T.write_file(path, text)
  local err = T.checkerror(want, presets.load, path)
  return err, path
end

T.test("an unknown key is an error naming the key, the file and its line", function()
  local err, path = load_error("return {\n  temperature = 0.5,\n  temprature = 0.7,\n}\n", "temprature")
  T.check(err:find(path .. ":3:", 1, true), err)
  T.check(err:find("unknown key", 1, true), err)
end)

T.test("a wrong type names the key, the file and the line", function()
  local err, path = load_error("return {\n  max_tokens = 'many',\n}\n", "key 'max_tokens'")
  T.check(err:find(path .. ":2:", 1, true) and err:find("must be an integer", 1, true), err)
  local err2 = load_error("return { stop = { 'a', 3 } }\n", "key 'stop[2]'")
  T.check(err2:find("non-empty string", 1, true), err2)
end)

T.test("an out-of-range value names the key, the range, the file and the line", function()
  local err, path = load_error("-- comment\nreturn {\n  top_p = 0.9,\n  temperature = 3,\n}\n", "key 'temperature'")
  T.check(err:find(path .. ":4:", 1, true) and err:find("outside [0, 2]", 1, true), err)
  load_error("return { top_p = 0 }\n", "outside (0, 1]")
  load_error("return { reasoning_effort = 'extreme' }\n", "not one of none")
  load_error("return { thinking_budget = -2 }\n", "key 'thinking_budget'")
end)

T.test("nested keys are checked and point at the nested line", function()
  local err, path = load_error("return {\n  constraint = {\n    kind = 'choice',\n    lables = {'a'},\n  },\n}\n",
    "key 'constraint.lables'")
  T.check(err:find(path .. ":4:", 1, true), err)
  load_error("return { constraint = { kind = 'regex' } }\n", "key 'constraint.kind'")
  load_error("return { models = { openai = 'gpt' } }\n", "key 'models.openai'")
  load_error("return { tinylm = { prompt = 'no placeholder' } }\n", "must contain {input}")
  load_error("return { why = { tempo = 'fast' } }\n", "key 'why.tempo'")
end)

T.test("a preset runs with no globals, and syntax errors keep their line", function()
  local err, path = load_error("return {\n  seed = os.time(),\n}\n", "os")
  T.check(err:find(path .. ":2:", 1, true), err)
  local err2, path2 = load_error("return {\n  temperature = ,\n}\n", "unexpected symbol")
  T.check(err2:find(path2 .. ":2:", 1, true), err2)
  load_error("return 42\n", "must return a table")
end)

T.test("names that are neither presets nor paths are reported with where it looked", function()
  T.checkerror("no preset named \"nope\"", presets.load, "nope")
  T.checkerror("data file, not a preset", presets.load, "pricing")
  T.checkerror("cannot open", presets.load, tmp .. "/missing.lua")
end)

T.test("sampling parameters and the TinyLM prompt come from the preset", function()
  local t = presets.load("triage")
  local sp = presets.sampling_params(t)
  T.eq(sp.temperature, 0)
  T.eq(sp.max_tokens, 40)       -- tinylm.max_tokens overrides max_tokens locally
  T.eq(sp.stop[1], "\n")
  T.eq(presets.prompt(t, "Ticket: x"), "Ticket: x\nTriage:")
  -- The parameters are ones generate accepts.
  wb.sampling.check(sp)
  wb.sampling.check(presets.sampling_params(presets.load("drafts")))
  wb.sampling.check(presets.sampling_params(presets.load("brainstorm")))
end)

T.test("a local run on a tiny model reports whether the constraint was applied", function()
  local dir = T.tmpdir()
  T.make_tiny_model(dir, { n_ctx = 64 })
  local m = wb.load(dir)
  local res, info = presets.generate(m, presets.load("drafts"), "hello")
  T.eq(type(res.text), "string")
  T.eq(info.constraint, "none")
  local _, info2 = presets.generate(m, presets.load("triage"), "Ticket: hello")
  T.eq(info2.constraint, "applied (json_schema)")
  m:close()
  T.rmdir(dir)
end)

T.done()
T.rmdir(tmp)
