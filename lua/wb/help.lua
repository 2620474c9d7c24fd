-- wb.help: help text for the `wb` API and tab completion for the REPL.
--
--   :help                      in the REPL: the topics
--   :help wb.load              one function ("help 'wb.load'" from Lua works too)
--   :help Vec                  a method table; ":help Vec:topk" one method
--   :help presets              the presets found on disk
--
-- The text is short on purpose: one signature and what it returns, with the doc that has the
-- details. host_repl.c calls M.command for lines that start with ':' and M.complete for <Tab>.

local M = {}

-- name -> {signature, one or two lines}. Method names use ':'.
M.TEXT = {
  ["wb.version"] = { "wb.version", "the version string, e.g. \"0.1.0\"" },
  ["wb.clock_ms"] = { "wb.clock_ms() -> ms", "monotonic milliseconds (float), for timing" },
  ["wb.threads"] = { "wb.threads([n]) -> previous", "compute thread count; sets it when n (1..4096) is given" },
  ["wb.blas_info"] = { "wb.blas_info() -> string", "the BLAS library and kernel in use" },
  ["wb.default_model_dir"] = { "wb.default_model_dir() -> path", "where wb.load() looks: $WB_MODEL, else models/tinylm-base" },
  ["wb.load"] = { "wb.load([dir]) -> Model", "load a GPT-2, Llama, Qwen2 or Mistral directory (config.json, safetensors, tokenizer.json); wb.load(dir, {compute_f32=, n_ctx=}) sets load options (docs/model.md)" },
  ["wb.tokenizer_load"] = { "wb.tokenizer_load(path) -> Tokenizer", "a Hugging Face byte-level BPE tokenizer.json" },
  ["wb.bpe_train"] = { "wb.bpe_train(text [, {vocab_size=, special_tokens=, min_pair_count=}]) -> Tokenizer",
    "learn byte-level BPE merges on text (docs/tokenizer.md)" },
  ["wb.vec"] = { "wb.vec(n [, fill]) | wb.vec{x1, x2, ...} -> Vec", "a float vector (docs/lua-api.md, wb.Vec)" },
  ["wb.safetensors_read"] = { "wb.safetensors_read(path) -> {name = {dtype, shape, vec|values}}", "read and validate a checkpoint" },
  ["wb.safetensors_write"] = { "wb.safetensors_write(path, tensors [, metadata])", "write a checkpoint atomically" },
  ["wb.trainer"] = { "wb.trainer(opts) -> Trainer", "the C trainer (docs/training.md)" },
  ["wb.json"] = { "wb.json", "encode, decode, null, array (cJSON)" },
  ["wb.json.encode"] = { "wb.json.encode(v [, {indent=true}]) -> string", "keys in byte order; {} is an object, wb.json.array{} an array" },
  ["wb.json.decode"] = { "wb.json.decode(s) -> value", "null becomes wb.json.null; errors give the byte offset" },
  ["wb.json.array"] = { "wb.json.array([t]) -> t", "mark t as a JSON array (so an empty one encodes as [])" },
  ["wb.json.null"] = { "wb.json.null", "the JSON null sentinel" },
  ["wb.sampling"] = { "wb.sampling", "apply, check, draw, defaults (docs/sampling.md)" },
  ["wb.sampling.apply"] = { "wb.sampling.apply(logits, params, generated_ids) -> Vec",
    "the distribution the sampler draws from after every parameter" },
  ["wb.sampling.check"] = { "wb.sampling.check(params) -> true", "validate a parameter table (errors name the key)" },
  ["wb.sampling.draw"] = { "wb.sampling.draw(probs, seed [, n=1]) -> {ids}", "n draws with a PCG32 seeded by seed, the draw generation makes" },
  ["wb.sampling.defaults"] = { "wb.sampling.defaults() -> table", "the default parameters" },

  ["Vec:get"] = { "v:get(id) -> x", "0-based" }, ["Vec:set"] = { "v:set(id, x) -> v", "0-based, in place" },
  ["Vec:argmax"] = { "v:argmax() -> id, value", "lowest id among ties; NaN never wins" },
  ["Vec:topk"] = { "v:topk([k=10]) -> {{id=, p=}, ...}", "sorted by value, ties lowest id first" },
  ["Vec:sum"] = { "v:sum() -> x", "double accumulation" }, ["Vec:max"] = { "v:max() -> x", "" },
  ["Vec:min"] = { "v:min() -> x", "" }, ["Vec:dot"] = { "v:dot(w) -> x", "" },
  ["Vec:softmax"] = { "v:softmax([T=1]) -> Vec", "max-subtracted" },
  ["Vec:log_softmax"] = { "v:log_softmax([T=1]) -> Vec", "" },
  ["Vec:entropy_bits"] = { "v:entropy_bits() -> bits", "v read as probabilities" },
  ["Vec:count_nonzero"] = { "v:count_nonzero() -> n", "survivors after filtering" },
  ["Vec:sum_over"] = { "v:sum_over(ids) -> x", "" },
  ["Vec:sample"] = { "v:sample(u) -> id", "walk the cumulative weights with u in [0, 1)" },
  ["Vec:scale"] = { "v:scale(x) -> Vec", "" }, ["Vec:add"] = { "v:add(w [, alpha]) | v:add(x) -> Vec", "" },
  ["Vec:copy"] = { "v:copy() -> Vec", "" }, ["Vec:totable"] = { "v:totable() -> {t[id+1]}", "" },

  ["Tokenizer:encode"] = { "tok:encode(text) -> {ids}", "0-based ids in a 1-based list" },
  ["Tokenizer:decode"] = { "tok:decode(ids) -> bytes", "" },
  ["Tokenizer:token"] = { "tok:token(id) -> bytes", "" }, ["Tokenizer:str"] = { "tok:str(id) -> vocab string", "" },
  ["Tokenizer:id"] = { "tok:id(bytes) -> id | nil", "" }, ["Tokenizer:id_of_str"] = { "tok:id_of_str(s) -> id | nil", "" },
  ["Tokenizer:is_special"] = { "tok:is_special(id) -> bool", "" },
  ["Tokenizer:save"] = { "tok:save(path) -> tok", "writes tokenizer.json atomically" },
  ["Tokenizer:detokenizer"] = { "tok:detokenizer() -> Detokenizer", "d:push(id), d:flush(), d:reset()" },
  ["Tokenizer:close"] = { "tok:close()", "" },

  ["Model:generate"] = { "model:generate(prompt, params [, opts]) -> result",
    "text, token_ids, stop_reason, timings (docs/sampling.md)" },
  ["Model:chat"] = { "model:chat(messages, params [, opts]) -> result",
    "messages {{role=, content=}, ...} through the directory's chat template, then generate; generation_config.json eos ids end it as \"eos\"" },
  ["Model:stream_chat"] = { "model:stream_chat(messages, params [, opts]) -> iterator", "model:chat, streamed like model:stream" },
  ["Model:info"] = { "model:info() -> table",
    "model_type, vocab_size, n_ctx, max_position_embeddings, n_embd, n_layer, n_head, n_kv_head, head_dim, n_inner, parameters, weight_bytes, kv_bytes_per_token" },
  ["Model:generate_batch"] = { "model:generate_batch(prompts, params [, opts]) -> result",
    "B prompts decoded together, one forward pass per step (docs/trace.md)" },
  ["Model:stream"] = { "model:stream(prompt, params [, opts]) -> iterator", "one released piece per call" },
  ["Model:logits"] = { "model:logits(ids [, {all=true}]) -> Vec", "without a cache" },
  ["Model:session"] = { "model:session([{n_ctx=}]) -> Session", "a KV cache" },
  ["Model:num_parameters"] = { "model:num_parameters() -> n", "" }, ["Model:close"] = { "model:close()", "" },

  ["Session:prefill"] = { "s:prefill(ids [, {all=true}]) -> Vec", "" }, ["Session:decode"] = { "s:decode(id) -> Vec", "" },
  ["Session:pos"] = { "s:pos() -> n", "" }, ["Session:n_ctx"] = { "s:n_ctx() -> n", "" },
  ["Session:tokens"] = { "s:tokens() -> {ids}", "" }, ["Session:truncate"] = { "s:truncate(n) -> s", "" },
  ["Session:reset"] = { "s:reset() -> s", "" }, ["Session:fork"] = { "s:fork() -> Session", "" },
  ["Session:cache_bytes"] = { "s:cache_bytes() -> n", "" }, ["Session:model"] = { "s:model() -> Model", "" },
  ["Session:close"] = { "s:close()", "" },

  ["wb.presets"] = { "wb.presets", "decoding presets as Lua data files (docs/presets.md)" },
  ["wb.presets.load"] = { "wb.presets.load(name_or_path) -> preset", "validated, merged over the defaults; errors name key, file and line" },
  ["wb.presets.list"] = { "wb.presets.list() -> {names}", "user directory first, then presets/" },
  ["wb.presets.generate"] = { "wb.presets.generate(model, preset, input) -> result, info", "a local run with the preset" },
  ["wb.providers"] = { "wb.providers", "request bodies for groq, gemini, ollama (docs/presets.md)" },
  ["wb.providers.request"] = { "wb.providers.request(provider, preset, messages [, {strict=, stream=, model=, host=}]) -> req",
    "req.body, req.json, req.warnings (dropped parameters); nothing is sent" },
  ["wb.cost"] = { "wb.cost", "pricing, cost and latency of calls with thinking tokens" },
  ["wb.cost.call_cost"] = { "wb.cost.call_cost(row, {input=, cached=, thinking=, output=}) -> usd, parts", "" },
  ["wb.cost.latency"] = { "wb.cost.latency({network_ms=, prefill_ms_per_1k=, itl_ms=}, tokens) -> {ttft=, total=, ...}", "" },
  ["wb.cost.break_even"] = { "wb.cost.break_even(cost_without, cost_with, accuracy_gain) -> usd", "value of a correct answer at which reasoning pays" },
  ["wb.cost.counter"] = { "wb.cost.counter([tokenizer.json]) -> {count=, label=, estimated=}", "without a path: a labelled estimate" },
}

M.TOPICS = {
  "wb.load, wb.tokenizer_load, wb.vec, wb.json, wb.sampling, wb.presets, wb.providers, wb.cost",
  "Vec, Tokenizer, Model, Session (methods: `:help Vec:topk`)",
  "presets (the presets found on disk)",
}

-- `wb.x` for a library module, found through the wb table (the host loads lua/wb/x.lua lazily).
local function resolve(name)
  local wb = package.loaded.wb
  local cur = _G
  if name:match("^wb%.") or name == "wb" then cur = { wb = wb } end
  for part in name:gmatch("[^%.:]+") do
    if type(cur) ~= "table" then return nil end
    local ok, v = pcall(function() return cur[part] end)
    if not ok then return nil end
    cur = v
  end
  return cur
end

--- The help string for a name ("wb.load", "Vec:topk", "Vec", "presets").
function M.text(name)
  name = (name or ""):gsub("^%s+", ""):gsub("%s+$", "")
  if name == "" then
    return "help topics:\n  " .. table.concat(M.TOPICS, "\n  ")
  end
  if name == "presets" then
    local ok, p = pcall(require, "wb.presets")
    if not ok then return "wb.presets is not available" end
    local out = { "presets (`wb.presets.load(name)`; edit the files and rerun):" }
    for _, n in ipairs(p.list()) do
      local okl, pr = pcall(p.load, n)
      out[#out + 1] = ("  %-12s %s"):format(n, okl and (pr.description or "") or ("INVALID: " .. tostring(pr)))
    end
    return table.concat(out, "\n")
  end
  name = name:gsub("^wb%.([A-Z]%w*)", "%1") -- wb.Vec:topk -> Vec:topk
  local e = M.TEXT[name]
  if e then return e[1] .. (e[2] ~= "" and ("\n  " .. e[2]) or "") end
  -- A method table: list its methods.
  local wb = package.loaded.wb
  if wb and type(rawget(wb, name)) == "table" and name:match("^%u") then
    local names = {}
    for k, v in pairs(wb[name]) do
      if type(v) == "function" and not k:match("^__") then names[#names + 1] = name .. ":" .. k end
    end
    table.sort(names)
    return name .. " methods: " .. table.concat(names, ", ")
  end
  local v = resolve(name)
  if type(v) == "table" then
    local names = {}
    for k in pairs(v) do if type(k) == "string" then names[#names + 1] = k end end
    table.sort(names)
    return name .. ": " .. table.concat(names, ", ")
  elseif v ~= nil then
    return ("%s (%s): no help text yet; see docs/lua-api.md"):format(name, type(v))
  end
  return ("no help for %q; `:help` lists the topics"):format(name)
end

--- The REPL's ':' commands: ":help [name]" (also ":h", ":?"). Returns the text to print.
function M.command(line)
  local cmd, rest = line:match("^:(%S*)%s*(.-)%s*$")
  if cmd == "help" or cmd == "h" or cmd == "?" or cmd == "" then return M.text(rest) end
  return ("unknown command ':%s' (try :help)"):format(cmd or "")
end

--- help(name_or_value): print help from Lua code.
function M.help(name)
  print(M.text(name))
end

---------------------------------------------------------------------------------------------
-- Completion
---------------------------------------------------------------------------------------------

local function sorted_keys(t, want_method)
  local out = {}
  if type(t) ~= "table" then return out end
  for k, v in pairs(t) do
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and not k:match("^__") then
      if not want_method or type(v) == "function" then out[#out + 1] = k end
    end
  end
  return out
end

-- Keys reachable through t without running anything: raw fields, plus a table __index chain
-- (method tables of userdata). A function __index is not called, so the lazy `model` global is
-- never loaded by a Tab press.
-- Names of the pure-Lua modules next to this file (lua/wb/*.lua): fields of `wb` before first use.
local function library_modules()
  local src = debug.getinfo(1, "S").source
  local dir = src:sub(1, 1) == "@" and src:sub(2):match("^(.*)/") or nil
  local out = {}
  if not dir then return out end
  local p = io.popen(("ls -1 '%s' 2>/dev/null"):format(dir:gsub("'", "'\\''")))
  if not p then return out end
  for f in p:lines() do
    local n = f:match("^([%l_][%w_]*)%.lua$")
    if n then out[#out + 1] = n end
  end
  p:close()
  return out
end

local function fields(v, methods)
  local out, seen = {}, {}
  local function add(list) for _, k in ipairs(list) do if not seen[k] then seen[k] = true; out[#out + 1] = k end end end
  if v ~= nil and v == package.loaded.wb and not methods then add(library_modules()) end
  local depth = 0
  while v ~= nil and depth < 5 do
    if type(v) == "table" then add(sorted_keys(v, methods)) end
    local mt = getmetatable(v)
    if type(mt) ~= "table" then break end
    v = rawget(mt, "__index")
    if type(v) ~= "table" then break end
    depth = depth + 1
  end
  return out
end

local function raw_path(expr)
  local cur = _G
  for part in expr:gmatch("[^%.]+") do
    if type(cur) ~= "table" and type(cur) ~= "userdata" then return nil end
    if type(cur) == "table" then
      local v = rawget(cur, part)
      -- wb.<library module>: loading a pure-Lua module is cheap and has no side effects.
      if v == nil and cur == package.loaded.wb and package.searchpath("wb." .. part, package.path) then
        local ok, m = pcall(require, "wb." .. part)
        v = ok and m or nil
      end
      cur = v
    else
      local mt = getmetatable(cur)
      local idx = type(mt) == "table" and rawget(mt, "__index")
      cur = type(idx) == "table" and rawget(idx, part) or nil
    end
  end
  return cur
end

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto",
  "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

--- Completions for `word` (the text readline is completing) given the whole line up to the
--- cursor. Returns a sorted list of full replacements for `word`.
function M.complete(word, line)
  line = line or word
  local out = {}
  -- Inside a string after presets.load( / request(..., : preset names.
  local before = line:sub(1, #line - #word)
  if before:match("[\"']$") and (before:match("presets%.load%s*%(%s*[\"']$")
      or before:match("request%s*%(%s*[\"'][%w]+[\"']%s*,%s*[\"']$") or before:match("generate%s*%(.-,%s*[\"']$")) then
    local ok, p = pcall(require, "wb.presets")
    if ok then
      for _, n in ipairs(p.list()) do if n:sub(1, #word) == word then out[#out + 1] = n end end
    end
    table.sort(out)
    return out
  end
  if line:match("^:%s*%a*$") then
    for _, c in ipairs({ ":help" }) do if c:sub(1, #word) == word then out[#out + 1] = c end end
    return out
  end
  if line:match("^:help%s+") then
    local seen = {}
    for k in pairs(M.TEXT) do
      if k:sub(1, #word) == word and not seen[k] then seen[k] = true; out[#out + 1] = k end
    end
    if ("presets"):sub(1, #word) == word then out[#out + 1] = "presets" end
    table.sort(out)
    return out
  end
  local base, sep, partial = word:match("^(.-)([%.:])([%w_]*)$")
  if base and base ~= "" then
    local v = raw_path(base)
    if v == nil then return out end
    for _, k in ipairs(fields(v, sep == ":")) do
      if k:sub(1, #partial) == partial then out[#out + 1] = base .. sep .. k end
    end
  else
    for _, k in ipairs(fields(_G)) do if k:sub(1, #word) == word then out[#out + 1] = k end end
    for _, k in ipairs(KEYWORDS) do if k:sub(1, #word) == word then out[#out + 1] = k end end
    -- The lazy globals exist before they are loaded.
    for _, k in ipairs({ "model", "tok" }) do
      if rawget(_G, k) == nil and k:sub(1, #word) == word then out[#out + 1] = k end
    end
  end
  table.sort(out)
  return out
end

return M
