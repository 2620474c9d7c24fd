-- wb.presets: decoding presets as plain Lua data files, merged over documented defaults.
--
--   local presets = require("wb.presets")          -- also `wb.presets` in workbench
--   local p = presets.load("triage")               -- presets/triage.lua (or the user directory)
--   local p = presets.load("/path/to/mine.lua")    -- any file
--   presets.list()                                 -- names that load() finds
--   local res, info = presets.generate(model, p, "Ticket: ...")   -- a local TinyLM run
--
-- A preset file returns one table and nothing else. It runs with an empty environment
-- (loadfile(path, "t", {})): no globals, no require, no io, so a preset is data that a user can
-- edit with no risk and no rebuild. Every key is checked; an unknown key, a wrong type or a value
-- out of range is an error naming the key, the file and the line (docs/presets.md).

local M = {}

-- Files in presets/ that hold data for other modules rather than a decoding preset.
M.DATA_FILES = { pricing = true, effort = true }

local EFFORTS = { none = true, minimal = true, low = true, medium = true, high = true }
local PROVIDERS = { groq = true, gemini = true, ollama = true }

-- A decoding parameter left nil is omitted from every provider request, so the provider's own
-- default applies; that is why the sampling parameters have no default here.
M.DEFAULTS = {
  system = "",
  max_tokens = 256,
  models = { groq = "openai/gpt-oss-20b", gemini = "gemini-2.5-flash", ollama = "gpt-oss:20b" },
  tinylm = { prompt = "{input}\n", max_tokens = 48 },
}

-- Key specifications: type ("number", "integer", "string", "table"), range, and a one-line doc.
-- `lo`/`hi` are inclusive bounds, `gt` an exclusive lower bound.
M.KEYS = {
  name = { type = "string", doc = "preset name (default: the file name)" },
  description = { type = "string", doc = "one line shown by scripts/presets.lua --list" },
  system = { type = "string", doc = "system prompt sent to hosted models" },
  temperature = { type = "number", lo = 0, hi = 2, doc = "0 = greedy; nil = provider default" },
  top_p = { type = "number", gt = 0, hi = 1, doc = "nucleus mass; nil = off/provider default" },
  top_k = { type = "integer", lo = 0, doc = "keep the k most likely tokens (not on Groq)" },
  min_p = { type = "number", lo = 0, hi = 1, doc = "keep p >= min_p * p_max (TinyLM, Ollama)" },
  frequency_penalty = { type = "number", lo = -2, hi = 2, doc = "OpenAI rule, per occurrence" },
  presence_penalty = { type = "number", lo = -2, hi = 2, doc = "OpenAI rule, once per token" },
  repetition_penalty = { type = "number", gt = 0, doc = "CTRL rule (Ollama repeat_penalty)" },
  logit_bias = { type = "table", doc = "token id -> bias; TinyLM only (ids are tokenizer-specific)" },
  stop = { type = "table", doc = "list of stop strings (Groq keeps 4, Gemini 5)" },
  max_tokens = { type = "integer", lo = 1, doc = "visible output cap (default 256)" },
  seed = { type = "integer", doc = "RNG seed where the provider takes one" },
  reasoning_effort = { type = "string", doc = "none, minimal, low, medium or high" },
  thinking_budget = { type = "integer", lo = -1, doc = "thinking tokens (Gemini thinkingBudget; -1 dynamic)" },
  constraint = { type = "table", doc = "{kind='choice', labels={...}} or {kind='json_schema', schema={...}}" },
  models = { type = "table", doc = "provider -> model name (groq, gemini, ollama)" },
  tinylm = { type = "table", doc = "local run: prompt (with {input}), max_tokens, stop" },
  why = { type = "table", doc = "key -> short rationale, printed by scripts/presets.lua" },
}

M.ORDER = { "name", "description", "system", "temperature", "top_p", "top_k", "min_p",
  "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias", "stop",
  "max_tokens", "seed", "reasoning_effort", "thinking_budget", "constraint", "models", "tinylm", "why" }

---------------------------------------------------------------------------------------------
-- Where presets live
---------------------------------------------------------------------------------------------

local function this_dir()
  local src = debug.getinfo(1, "S").source
  return src:sub(1, 1) == "@" and (src:sub(2):match("^(.*)/") or ".") or "."
end

--- The shipped presets directory: <source or datadir>/presets, next to lua/wb/.
function M.shipped_dir()
  local d = this_dir()
  local root = d:match("^(.*)/lua/wb$")
  if root then return root .. "/presets" end
  if d == "lua/wb" then return "presets" end
  return d .. "/../../presets"
end

--- The user directory: $WB_PRESETS_DIR, else $XDG_CONFIG_HOME/workbench/presets, else
--- ~/.config/workbench/presets. It is searched before the shipped directory, so a user file with
--- a shipped name replaces the shipped preset.
function M.user_dir()
  local d = os.getenv("WB_PRESETS_DIR")
  if d and d ~= "" then return d end
  local xdg = os.getenv("XDG_CONFIG_HOME")
  if xdg and xdg ~= "" then return xdg .. "/workbench/presets" end
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.config/workbench/presets" end
  return nil
end

function M.search_dirs()
  local dirs = {}
  local u = M.user_dir()
  if u then dirs[#dirs + 1] = u end
  dirs[#dirs + 1] = M.shipped_dir()
  return dirs
end

-- Exists as anything at all (a FIFO too: load_data then says what it is). Not io.open, which
-- blocks forever on a FIFO.
local function exists(path)
  local wb = package.loaded.wb or require("wb")
  local ok, err = pcall(wb.read_file, path, M.MAX_FILE_BYTES)
  return ok or not tostring(err):find("cannot open", 1, true)
end

local function is_path(s) return s:find("/", 1, true) ~= nil or s:match("%.lua$") ~= nil end

--- The file a name or path stands for (an error lists where it looked).
function M.resolve(name_or_path)
  if type(name_or_path) ~= "string" or name_or_path == "" then
    error("presets: expected a preset name or a path, got " .. type(name_or_path), 3)
  end
  if is_path(name_or_path) then
    if not exists(name_or_path) then error("presets: cannot open " .. name_or_path, 3) end
    return name_or_path
  end
  if not name_or_path:match("^[%w_%-]+$") then
    error(("presets: %q is neither a preset name nor a path"):format(name_or_path), 3)
  end
  local looked = {}
  for _, d in ipairs(M.search_dirs()) do
    local p = d .. "/" .. name_or_path .. ".lua"
    if exists(p) then return p end
    looked[#looked + 1] = p
  end
  error(("presets: no preset named %q (looked for %s)"):format(name_or_path, table.concat(looked, ", ")), 3)
end

--- Names of the presets load() finds, sorted (data files such as pricing excluded).
function M.list()
  local seen, out = {}, {}
  for _, d in ipairs(M.search_dirs()) do
    local p = io.popen(("ls -1 '%s' 2>/dev/null"):format(d:gsub("'", "'\\''")))
    if p then
      for f in p:lines() do
        local n = f:match("^([%w_%-]+)%.lua$")
        if n and not M.DATA_FILES[n] and not seen[n] then seen[n] = true; out[#out + 1] = n end
      end
      p:close()
    end
  end
  table.sort(out)
  return out
end

---------------------------------------------------------------------------------------------
-- Loading a data file: empty environment, errors with file and line
---------------------------------------------------------------------------------------------

-- A data file's size cap: presets are a few KB; a 100k-character label still fits.
M.MAX_FILE_BYTES = 4 << 20

--- Run a Lua data file with no globals and return the value it returns, plus its source text.
--- It runs in its own bounded Lua state (wb.load_data): at most 64 MB of memory and 20M
--- instructions, no pattern-matching string functions, and the result copied as plain data (a
--- tree of tables, strings, numbers, booleans). Any breach is an error naming the file.
function M.load_data(path)
  local wb = package.loaded.wb or require("wb")
  -- the core's reader: a FIFO or device is an error, not a hang; the size is capped
  local ok, src = pcall(wb.read_file, path, M.MAX_FILE_BYTES)
  if not ok then error("presets: " .. tostring(src), 0) end
  return wb.load_data(src, path), src
end

-- The first line at or after `from` that assigns `key` (`key =` or `["key"] =`), ignoring
-- comments; used only to point error messages at the right line.
local function line_of(src, key, from)
  from = from or 1
  local n = 0
  local esc = key:gsub("%p", "%%%0")
  for line in (src .. "\n"):gmatch("(.-)\r?\n") do
    n = n + 1
    if n >= from then
      local code = line:gsub("%-%-.*$", "")
      if code:find("%f[%w_]" .. esc .. "%s*=[^=]") or code:find("%f[%w_]" .. esc .. "%s*=$")
          or code:find("%[%s*[\"']" .. esc .. "[\"']%s*%]%s*=") then
        return n
      end
    end
  end
  return nil
end

local function return_line(src)
  local n = 0
  for line in (src .. "\n"):gmatch("(.-)\r?\n") do
    n = n + 1
    if line:match("^%s*return%f[%W]") then return n end
  end
  return 1
end

local function fmtv(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

-- A validation context: raises "<file>:<line>: key 'a.b': message".
local function ctx(path, src)
  local c = { path = path, src = src }
  function c.fail(keypath, msg, whole)
    local line
    if src then
      local from = 1
      for part in keypath:gmatch("[^%.%[%]]+") do
        if not part:match("^%d+$") then
          local l = line_of(src, part, from)
          if l then from = l; line = l end
        end
      end
      line = line or return_line(src)
    end
    local where = path and (path .. ":" .. (line or "?") .. ": ") or ""
    error(where .. (whole and msg or ("key '" .. keypath .. "': " .. msg)), 0)
  end
  return c
end

local function check_scalar(c, key, v, spec)
  local t = spec.type
  if t == "integer" then
    if math.type(v) ~= "integer" then
      if math.type(v) == "float" and v == math.floor(v) and v == v and math.abs(v) < 2 ^ 53 then
        return math.tointeger(v)
      end
      c.fail(key, "must be an integer, got " .. (math.type(v) or type(v)) .. " " .. fmtv(v))
    end
  elseif t == "number" then
    if type(v) ~= "number" then c.fail(key, "must be a number, got " .. type(v) .. " " .. fmtv(v)) end
    if v ~= v or v == math.huge or v == -math.huge then c.fail(key, "must be finite, got " .. fmtv(v)) end
  elseif type(v) ~= t then
    c.fail(key, "must be a " .. t .. ", got " .. type(v) .. " " .. fmtv(v))
  end
  if spec.lo and v < spec.lo or spec.hi and v > spec.hi or spec.gt and v <= spec.gt then
    local lo = spec.gt and ("(" .. spec.gt) or spec.lo and ("[" .. spec.lo) or "(-inf"
    local hi = spec.hi and (spec.hi .. "]") or "inf)"
    c.fail(key, fmtv(v) .. " is outside " .. lo .. ", " .. hi)
  end
  return v
end

-- Edit distance, for "did you mean" on a misspelt key.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

local function check_keys(c, prefix, t, allowed)
  for k in pairs(t) do
    if type(k) ~= "string" or not allowed[k] then
      local names, best, bestd = {}, nil, 3
      for n in pairs(allowed) do
        names[#names + 1] = n
        local d = type(k) == "string" and distance(k, n) or 99
        if d < bestd or (d == bestd and best and n < best) then best, bestd = n, d end
      end
      table.sort(names)
      local hint = best and ("did you mean '" .. best .. "'? ") or ""
      c.fail(prefix .. tostring(k), ("unknown key '%s%s' (%sallowed: %s)")
        :format(prefix, tostring(k), hint, table.concat(names, ", ")), true)
    end
  end
end

local function check_string_list(c, key, v, max)
  if type(v) ~= "table" then c.fail(key, "must be a list of strings, got " .. type(v)) end
  local n = #v
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then c.fail(key, "must be a list (got key " .. fmtv(k) .. ")") end
  end
  for i = 1, n do
    if type(v[i]) ~= "string" or v[i] == "" then
      c.fail(key .. "[" .. i .. "]", "must be a non-empty string, got " .. fmtv(v[i]))
    end
  end
  if max and n > max then c.fail(key, ("has %d entries, at most %d"):format(n, max)) end
end

local function check_constraint(c, v)
  check_keys(c, "constraint.", v, { kind = true, labels = true, schema = true, name = true })
  if v.kind == "choice" then
    if v.schema ~= nil then c.fail("constraint.schema", "not used by kind 'choice'") end
    check_string_list(c, "constraint.labels", v.labels)
    if #v.labels == 0 then c.fail("constraint.labels", "must list at least one label") end
  elseif v.kind == "json_schema" then
    if v.labels ~= nil then c.fail("constraint.labels", "not used by kind 'json_schema'") end
    if type(v.schema) ~= "table" then c.fail("constraint.schema", "must be a table (a JSON schema)") end
    if v.name ~= nil and (type(v.name) ~= "string" or not v.name:match("^[%w_%-]+$")) then
      c.fail("constraint.name", "must be a name of letters, digits, _ or -")
    end
  else
    c.fail("constraint.kind", "must be \"choice\" or \"json_schema\", got " .. fmtv(v.kind))
  end
end

--- Check a preset table (already merged or not). `path` and `src` make errors point at the file
--- and line. Returns the table (integers normalised).
function M.validate(p, path, src)
  local c = ctx(path, src)
  if type(p) ~= "table" then
    error((path and (path .. ": ") or "") .. "a preset must return a table, got " .. type(p), 0)
  end
  check_keys(c, "", p, M.KEYS)
  for _, key in ipairs(M.ORDER) do
    local v, spec = p[key], M.KEYS[key]
    if v ~= nil and spec.type ~= "table" then p[key] = check_scalar(c, key, v, spec) end
  end
  if p.reasoning_effort ~= nil and not EFFORTS[p.reasoning_effort] then
    c.fail("reasoning_effort", fmtv(p.reasoning_effort) .. " is not one of none, minimal, low, medium, high")
  end
  for _, key in ipairs({ "logit_bias", "stop", "constraint", "models", "tinylm", "why" }) do
    if p[key] ~= nil and type(p[key]) ~= "table" then c.fail(key, "must be a table, got " .. type(p[key])) end
  end
  if p.stop then check_string_list(c, "stop", p.stop) end
  if p.logit_bias then
    for id, b in pairs(p.logit_bias) do
      if math.type(id) ~= "integer" or id < 0 then
        c.fail("logit_bias", "keys are token ids (integers >= 0), got " .. fmtv(id))
      end
      if type(b) ~= "number" or b ~= b or b == math.huge then
        c.fail("logit_bias[" .. id .. "]", "must be a finite number or -math.huge, got " .. fmtv(b))
      end
    end
  end
  if p.constraint then check_constraint(c, p.constraint) end
  if p.models then
    check_keys(c, "models.", p.models, PROVIDERS)
    for k, v in pairs(p.models) do
      if type(v) ~= "string" or v == "" then c.fail("models." .. k, "must be a model name string") end
    end
  end
  if p.tinylm then
    local t = p.tinylm
    check_keys(c, "tinylm.", t, { prompt = true, max_tokens = true, stop = true })
    if t.prompt ~= nil then
      if type(t.prompt) ~= "string" then c.fail("tinylm.prompt", "must be a string") end
      if not t.prompt:find("{input}", 1, true) then c.fail("tinylm.prompt", "must contain {input}") end
    end
    if t.max_tokens ~= nil then t.max_tokens = check_scalar(c, "tinylm.max_tokens", t.max_tokens, { type = "integer", lo = 1 }) end
    if t.stop ~= nil then check_string_list(c, "tinylm.stop", t.stop) end
  end
  if p.why then
    for k, v in pairs(p.why) do
      if type(k) ~= "string" or not M.KEYS[k] then c.fail("why." .. tostring(k), "names no preset key") end
      if type(v) ~= "string" then c.fail("why." .. k, "must be a string") end
    end
  end
  return p
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = copy(x) end
  return t
end

--- Merge a preset over the defaults: scalars replace, `models` and `tinylm` merge key by key.
function M.merge(p)
  local out = copy(M.DEFAULTS)
  for k, v in pairs(p) do
    if (k == "models" or k == "tinylm") and type(v) == "table" then
      for kk, vv in pairs(v) do out[k][kk] = copy(vv) end
    else
      out[k] = copy(v)
    end
  end
  return out
end

--- Load a preset by name (user directory, then presets/) or path; validate; merge over the
--- defaults. The result has `name` (the file name unless set) and `path`.
function M.load(name_or_path)
  local path = M.resolve(name_or_path)
  local base = path:match("([^/]+)%.lua$") or path:match("([^/]+)$")
  if M.DATA_FILES[base] and not is_path(name_or_path) then
    error(("presets: %q is a data file, not a preset"):format(name_or_path), 2)
  end
  local raw, src = M.load_data(path)
  M.validate(raw, path, src)
  local p = M.merge(raw)
  p.name = p.name or base
  p.path = path
  return p
end

--- The data table of presets/<name>.lua (pricing, effort): user directory first.
function M.data(name)
  local path = M.resolve(name)
  return (M.load_data(path)), path
end

---------------------------------------------------------------------------------------------
-- Local runs on TinyLM
---------------------------------------------------------------------------------------------

-- The preset keys passed to model:generate as they are: the ones the binding lists as sampling
-- parameters (wb.sampling.keys, the one list), except max_tokens and stop, which the tinylm table
-- may override.
local function sampling_keys()
  local wb = package.loaded.wb or require("wb")
  local ks = {}
  for _, k in ipairs(wb.sampling.keys) do
    if M.KEYS[k] and k ~= "max_tokens" and k ~= "stop" then ks[#ks + 1] = k end
  end
  return ks
end

--- model:generate parameters for the local run (nil values stay nil: the sampler's defaults).
function M.sampling_params(p)
  local sp = {}
  for _, k in ipairs(sampling_keys()) do sp[k] = copy(p[k]) end
  sp.max_tokens = (p.tinylm and p.tinylm.max_tokens) or p.max_tokens
  local stop = (p.tinylm and p.tinylm.stop) or p.stop
  if stop then sp.stop = copy(stop) end
  return sp
end

--- The TinyLM prompt for an input text.
function M.prompt(p, input)
  local tmpl = (p.tinylm and p.tinylm.prompt) or "{input}\n"
  local s = tmpl:gsub("{input}", function() return input end)
  return s
end

--- The local constraint object and a line saying what was applied ("none" without one).
function M.local_constraint(p, tok)
  if not p.constraint then return nil, "none" end
  local wb = package.loaded.wb or require("wb")
  local lib = wb.constraint
  local kind = p.constraint.kind
  if kind == "choice" then return lib.choice(tok, p.constraint.labels), "applied (choice)" end
  return lib.json_schema(tok, p.constraint.schema), "applied (json_schema)"
end

--- Run a preset on a local model. Returns generate's result and an info table:
--- {prompt=, params=, constraint = "applied (choice)" | "applied (json_schema)" | "none"}.
function M.generate(model, p, input, gen_opts)
  if type(p) == "string" then p = M.load(p) end
  local prompt = M.prompt(p, input)
  local params = M.sampling_params(p)
  local c, status = M.local_constraint(p, model.tokenizer)
  local info = { prompt = prompt, params = params, constraint = status }
  local opts = copy(gen_opts or {})
  opts.constraint = c -- a generation option (docs/lua-api.md)
  return model:generate(prompt, params, opts), info
end

return M
