-- wb.help: help text for the `wb` API and tab completion for the REPL.
--
--   help                       in the REPL: the topics (also `:help`)
--   help(wb.load)              one function, by value; help "wb.load" and `:help wb.load` by name
--   help(model)                an object: its methods; help "Model:generate" one of them
--   :help presets              the presets found on disk
--
-- Each entry is a signature, what it does, its options (if it takes an options table) and one
-- example that runs in the REPL on the shipped TinyLM. The details live in docs/lua-api.md and
-- the pages it links. host_repl.c calls M.command for lines that start with ':' and M.complete
-- for <Tab>; the `help` global is M.value.

local M = {}

local SAMPLING = "params: temperature, top_k, top_p, min_p, typical_p, repetition_penalty, " ..
  "frequency_penalty, presence_penalty, logit_bias, stop, stop_token_ids, max_tokens, min_tokens, seed, " ..
  "mask_stage, n, logprobs, top_logprobs (docs/lua-api.md)"
local GEN_OPTS = "opts: cache, holdback, n_ctx, ignore_eos, chunk_size, cancel_after, constraint " ..
  "(docs/lua-api.md)"

-- A trainer small enough for the examples to run in milliseconds.
local TRAINER = "local tr = wb.trainer{vocab_size = 16, n_ctx = 8, n_embd = 8, n_layer = 1, n_head = 1, " ..
  "batch_size = 2, max_steps = 4}; local ids = {}; for i = 1, 64 do ids[i] = i % 16 end; tr:set_data(ids, ids); "

-- name -> {signature, what it does, opts = options, ex = example}. Method names use ':'.
M.TEXT = {
  ["wb.version"] = { "wb.version", "the version string, e.g. \"0.1.0\"", ex = "print(wb.version)" },
  ["wb.clock_ms"] = { "wb.clock_ms() -> ms", "monotonic milliseconds (float), for timing",
    ex = "local t0 = wb.clock_ms(); model:generate('Hi', {max_tokens = 8}); print(wb.clock_ms() - t0)" },
  ["wb.interrupts"] = { "wb.interrupts() -> n", "how many Ctrl-Cs the host has passed on in this process (never reset): a loop that must end on one compares it with its starting value, since a pcall inside the loop can catch the interruption error",
    ex = "local n0 = wb.interrupts(); for _ = 1, 3 do pcall(model.generate, model, 'Hi', {max_tokens = 4}); if wb.interrupts() ~= n0 then break end end" },
  ["wb.threads"] = { "wb.threads([n]) -> previous", "compute thread count; sets it when n (1..4096) is given",
    ex = "wb.threads(2)" },
  ["wb.blas_info"] = { "wb.blas_info() -> string", "the BLAS library and kernel in use", ex = "print(wb.blas_info())" },
  ["wb.default_model_dir"] = { "wb.default_model_dir() -> path", "where wb.load() looks: $WB_MODEL, else models/tinylm-base",
    ex = "print(wb.default_model_dir())" },
  ["wb.load"] = { "wb.load([dir [, opts]]) -> Model",
    "load a GPT-2, Llama, Qwen2 or Mistral directory (config.json, safetensors, tokenizer.json) (docs/model.md)",
    opts = "opts: compute_f32 = bool (BF16 weights computed in f32), n_ctx = n (context length)",
    ex = "local m = wb.load('models/tinylm-base'); print(m:num_parameters())" },
  ["wb.tokenizer_load"] = { "wb.tokenizer_load(path) -> Tokenizer", "a Hugging Face byte-level BPE tokenizer.json",
    ex = "local t = wb.tokenizer_load('models/tinylm-base/tokenizer.json'); print(#t:encode('Hi there'))" },
  ["wb.bpe_train"] = { "wb.bpe_train(text [, opts]) -> Tokenizer", "learn byte-level BPE merges on text (docs/tokenizer.md)",
    opts = "opts: vocab_size = n, special_tokens = {strings}, min_pair_count = n",
    ex = "local t = wb.bpe_train(('abab cdcd '):rep(50), {vocab_size = 270}); print(#t)" },
  ["wb.vec"] = { "wb.vec(n [, fill]) | wb.vec{x1, x2, ...} -> Vec", "a float vector kept in C (docs/lua-api.md, wb.Vec)",
    ex = "local v = wb.vec{1, 2, 3}; print(v:sum())" },
  ["wb.safetensors_read"] = { "wb.safetensors_read(path) -> {name = {dtype, shape, vec|values}}", "read and validate a checkpoint",
    ex = "local t = wb.safetensors_read('models/tinylm-base/model.safetensors'); for k in pairs(t) do print(k) break end" },
  ["wb.safetensors_write"] = { "wb.safetensors_write(path, tensors [, metadata])", "write a checkpoint atomically",
    ex = "wb.safetensors_write('/tmp/x.safetensors', {w = {dtype = 'F32', shape = {2}, values = {1, 2}}})" },
  ["wb.trainer"] = { "wb.trainer(opts) -> Trainer", "the C trainer (docs/training.md)",
    opts = "opts: the model shape and optimiser settings listed in docs/training.md",
    ex = TRAINER .. "print(tr:step())" },
  ["wb.chat_template"] = { "wb.chat_template(dir) -> ChatTemplate", "a model directory's chat template (docs/chat.md)",
    ex = "local t = wb.chat_template('/path/to/Qwen2.5-0.5B-Instruct'); print(t:render({{role = 'user', content = 'Hi'}}))" },
  ["wb.json"] = { "wb.json", "encode, decode, null, array (cJSON)", ex = "print(wb.json.encode({a = 1}))" },
  ["wb.json.encode"] = { "wb.json.encode(v [, opts]) -> string", "keys in byte order; {} is an object, wb.json.array{} an array",
    opts = "opts: indent = true", ex = "print(wb.json.encode({b = {1, 2}, a = true}, {indent = true}))" },
  ["wb.json.decode"] = { "wb.json.decode(s) -> value", "null becomes wb.json.null; errors give the byte offset",
    ex = "print(wb.json.decode('{\"x\": [1, 2]}').x[2])" },
  ["wb.json.array"] = { "wb.json.array([t]) -> t", "mark t as a JSON array (so an empty one encodes as [])",
    ex = "print(wb.json.encode(wb.json.array{}))" },
  ["wb.json.null"] = { "wb.json.null", "the JSON null sentinel", ex = "print(wb.json.decode('null') == wb.json.null)" },
  ["wb.sampling"] = { "wb.sampling", "apply, check, draw, defaults (docs/sampling.md)", ex = "print(wb.sampling.defaults().temperature)" },
  ["wb.sampling.apply"] = { "wb.sampling.apply(logits, params, generated_ids) -> Vec",
    "the distribution the sampler draws from after every parameter", opts = SAMPLING,
    ex = "local p = wb.sampling.apply(model:logits(tok:encode('Hi')), {top_k = 5}, {}); print(p:count_nonzero())" },
  ["wb.sampling.check"] = { "wb.sampling.check(params) -> true", "validate a parameter table (errors name the key)",
    opts = SAMPLING, ex = "print(pcall(wb.sampling.check, {top_p = 2}))" },
  ["wb.sampling.draw"] = { "wb.sampling.draw(probs, seed [, n=1]) -> {ids}", "n draws with a PCG32 seeded by seed, the draw generation makes",
    ex = "print(wb.sampling.draw(wb.vec{0.5, 0.5}, 1, 4)[1])" },
  ["wb.sampling.defaults"] = { "wb.sampling.defaults() -> table", "the default parameters",
    ex = "for k, v in pairs(wb.sampling.defaults()) do print(k, v) end" },
  ["wb.constraint"] = { "wb.constraint", "choice, regex, json_schema, schema_regex, fn: masks for generate (docs/constraints.md)",
    ex = "local c = wb.constraint.choice(tok, {' yes', ' no'})" },
  ["wb.constraint.choice"] = { "wb.constraint.choice(tok, labels [, opts]) -> Constraint", "output is exactly one of the labels",
    opts = "opts: leading_space = \"optional\" | \"none\" | \"always\"",
    ex = "print(model:generate('Q: ok?\\nA:', {max_tokens = 4}, {constraint = wb.constraint.choice(tok, {' yes', ' no'})}).text)" },
  ["wb.constraint.regex"] = { "wb.constraint.regex(tok, pattern) -> Constraint", "output matches the regular expression",
    ex = "print(model:generate('Ticket', {max_tokens = 6}, {constraint = wb.constraint.regex(tok, ' #[0-9]{4}')}).text)" },
  ["wb.constraint.json_schema"] = { "wb.constraint.json_schema(tok, schema [, opts]) -> Constraint", "output is JSON valid for the schema",
    opts = "opts: whitespace", ex = "local c = wb.constraint.json_schema(tok, {type = 'object', properties = {ok = {type = 'boolean'}}})" },
  ["wb.constraint.schema_regex"] = { "wb.constraint.schema_regex(schema) -> pattern", "the regular expression a schema compiles to",
    ex = "print(wb.constraint.schema_regex({type = 'boolean'}))" },
  ["wb.constraint.fn"] = { "wb.constraint.fn(tok, allowed) -> Constraint", "allowed(generated_ids) returns the allowed id set",
    ex = "local c = wb.constraint.fn(tok, function(ids) return {[tok:encode(' yes')[1]] = true} end)" },

  ["wb.write_file"] = { "wb.write_file(path, data) -> true", "atomic write: a temporary file in the same folder, every write checked, fsync, rename; on failure the old file is unchanged",
    ex = "wb.write_file('/tmp/wb-help-example.txt', 'hello\\n')" },
  ["wb.remove_stale_temps"] = { "wb.remove_stale_temps(path) -> n", "remove <path>.tmp.<pid> files left by dead processes",
    ex = "print(wb.remove_stale_temps('/tmp/wb-help-example.txt'))" },
  ["wb.sha256"] = { "wb.sha256([data]) -> digest; digest:update(s) -> digest; digest:hex() -> string", "streaming SHA-256 (OpenSSL libcrypto); hex() finishes the digest (docs/download.md)",
    ex = "print(wb.sha256('abc'):hex())" },
  ["wb.fsync"] = { "wb.fsync(path) -> true", "flush a file or directory to the disk (after writing it piece by piece, or renaming in it)",
    ex = "print(wb.fsync('.'))" },
  ["wb.read_file"] = { "wb.read_file(path [, max_bytes]) -> string", "the core's reader: a FIFO, device or directory is an error (no hang); larger than max_bytes (default 64 MB) is an error",
    ex = "print(#wb.read_file('models/tinylm-base/config.json'))" },
  ["wb.load_data"] = { "wb.load_data(source, name [, {max_memory=, max_instructions=}]) -> value", "run a Lua data file (a preset) in a bounded state: 64 MB, 20M instructions, no pattern matching; the result copied as plain data (docs/limits.md)",
    ex = "print(wb.load_data('return { n = 6 * 7 }', 'example.lua').n)" },
  ["wb.native_bytes"] = { "wb.native_bytes() -> bytes", "native memory (weights, KV caches) held by live binding objects",
    ex = "print(wb.native_bytes())" },
  ["wb.http.request"] = { "wb.http.request(opts) -> response | stream", "an HTTP request through libcurl (docs/serve.md)",
    opts = "opts: url, method, headers, body, stream, timeout_ms, connect_timeout_ms, idle_timeout_ms, max_bytes, proxy, cainfo, follow_redirects, resume_from",
    ex = "local r = wb.http.request{url = 'http://127.0.0.1:8080/v1/models'}; print(r and r.status)" },
  ["wb.http.escape"] = { "wb.http.escape(s) -> string", "percent-encode s for a URL", ex = "print(wb.http.escape('a b&c'))" },
  ["wb.http.version"] = { "wb.http.version() -> string", "the libcurl version and its features", ex = "print(wb.http.version())" },
  ["wb.httpd.new"] = { "wb.httpd.new(opts) -> server", "an HTTP server on libmicrohttpd; srv:poll(ms) returns requests (docs/serve.md)",
    opts = "opts: host, port (0 picks one), max_body, max_connections, idle_timeout_s, memory_limit",
    ex = "local srv <close> = wb.httpd.new{host = '127.0.0.1', port = 0}; print(srv:port())" },
  ["Trainer:set_data"] = { "tr:set_data(train_ids, val_ids)", "tables of 0-based ids, or strings of packed \"<i4\" ids (docs/training.md)",
    ex = TRAINER .. "tr:set_data(ids, ids)" },
  ["Trainer:step"] = { "tr:step() -> loss, grad_norm", "one optimizer step on the next batch", ex = TRAINER .. "print(tr:step())" },
  ["Trainer:eval"] = { "tr:eval(n) -> loss", "mean loss over n fixed validation batches", ex = TRAINER .. "print(tr:eval(1))" },
  ["Trainer:loss"] = { "tr:loss(ids) -> loss", "mean loss of ids[2..] given the prefix (one window)", ex = TRAINER .. "print(tr:loss({1, 2, 3}))" },
  ["Trainer:lr"] = { "tr:lr() -> x", "the learning rate of the next step (warm-up, then cosine)", ex = TRAINER .. "print(tr:lr())" },
  ["Trainer:step_index"] = { "tr:step_index() -> n", "steps taken", ex = TRAINER .. "tr:step(); print(tr:step_index())" },
  ["Trainer:num_params"] = { "tr:num_params() -> n", "parameters being trained", ex = TRAINER .. "print(tr:num_params())" },
  ["Trainer:params"] = { "tr:params() -> table", "the settings it was made with, defaults filled in", ex = TRAINER .. "print(tr:params().max_steps)" },
  ["Trainer:save_model"] = { "tr:save_model(path)", "model.safetensors that wb.load reads", ex = TRAINER .. "tr:save_model('/tmp/wb-help-model.safetensors')" },
  ["Trainer:save_checkpoint"] = { "tr:save_checkpoint(path)", "weights, optimizer state and step, atomically", ex = TRAINER .. "tr:save_checkpoint('/tmp/wb-help-ckpt.safetensors')" },
  ["Trainer:load_checkpoint"] = { "tr:load_checkpoint(path)", "resume exactly where the checkpoint stopped", ex = TRAINER .. "tr:save_checkpoint('/tmp/wb-help-ckpt.safetensors'); tr:load_checkpoint('/tmp/wb-help-ckpt.safetensors')" },
  ["Trainer:close"] = { "tr:close()", "free it now (also at garbage collection)", ex = TRAINER .. "tr:close()" },

  ["Vec:get"] = { "v:get(id) -> x", "0-based", ex = "print(wb.vec{5, 6}:get(1))" },
  ["Vec:set"] = { "v:set(id, x) -> v", "0-based, in place", ex = "print(wb.vec(2):set(0, 3):get(0))" },
  ["Vec:argmax"] = { "v:argmax() -> id, value", "lowest id among ties; NaN never wins", ex = "print(wb.vec{1, 9, 9}:argmax())" },
  ["Vec:topk"] = { "v:topk([k=10]) -> {{id=, p=}, ...}", "sorted by value, ties lowest id first",
    ex = "for _, t in ipairs(model:logits(tok:encode('Hi')):softmax():topk(3)) do print(tok:token(t.id), t.p) end" },
  ["Vec:sum"] = { "v:sum() -> x", "double accumulation", ex = "print(wb.vec(10, 0.1):sum())" },
  ["Vec:max"] = { "v:max() -> x", "the largest value", ex = "print(wb.vec{1, 3, 2}:max())" },
  ["Vec:min"] = { "v:min() -> x", "the smallest value", ex = "print(wb.vec{1, 3, 2}:min())" },
  ["Vec:dot"] = { "v:dot(w) -> x", "sum of products (same length)", ex = "print(wb.vec{1, 2}:dot(wb.vec{3, 4}))" },
  ["Vec:softmax"] = { "v:softmax([T=1]) -> Vec", "max-subtracted; T is the temperature", ex = "print(wb.vec{0, 1}:softmax(0.5):get(1))" },
  ["Vec:log_softmax"] = { "v:log_softmax([T=1]) -> Vec", "log-probabilities", ex = "print(wb.vec{0, 0}:log_softmax():get(0))" },
  ["Vec:entropy_bits"] = { "v:entropy_bits() -> bits", "v read as probabilities", ex = "print(wb.vec{0.5, 0.5}:entropy_bits())" },
  ["Vec:count_nonzero"] = { "v:count_nonzero() -> n", "survivors after filtering", ex = "print(wb.vec{0, 1, 0.5}:count_nonzero())" },
  ["Vec:sum_over"] = { "v:sum_over(ids) -> x", "the sum of the entries at 0-based ids", ex = "print(wb.vec{1, 2, 4}:sum_over({0, 2}))" },
  ["Vec:sample"] = { "v:sample(u) -> id", "walk the cumulative weights with u in [0, 1)", ex = "print(wb.vec{0.5, 0.5}:sample(0.7))" },
  ["Vec:scale"] = { "v:scale(x) -> Vec", "a scaled copy", ex = "print(wb.vec{1, 2}:scale(3):get(1))" },
  ["Vec:add"] = { "v:add(w [, alpha]) | v:add(x) -> Vec", "v + alpha*w, or v + x everywhere", ex = "print(wb.vec{1, 2}:add(wb.vec{1, 1}, 2):get(0))" },
  ["Vec:copy"] = { "v:copy() -> Vec", "an independent copy", ex = "local w = wb.vec{1}:copy()" },
  ["Vec:totable"] = { "v:totable() -> {t[id+1]}", "a Lua list (1-based)", ex = "print(#wb.vec(4):totable())" },

  ["Tokenizer:encode"] = { "tok:encode(text [, opts]) -> {ids} [, mask]", "0-based ids in a 1-based list; opts: truncation = false, padding = false (tokenizer.json's, on by default), attention_mask = true (adds HF's mask as a second result)", ex = "print(table.concat(tok:encode('Hi there'), ' '))" },
  ["Tokenizer:decode"] = { "tok:decode(ids) -> bytes", "the text of a list of ids", ex = "print(tok:decode(tok:encode('Hi there')))" },
  ["Tokenizer:token"] = { "tok:token(id) -> bytes", "one token's bytes", ex = "print(('%q'):format(tok:token(tok:encode(' Hi')[1])))" },
  ["Tokenizer:str"] = { "tok:str(id) -> vocab string", "the vocabulary entry (byte-level form, e.g. 'ĠHi')", ex = "print(tok:str(tok:encode(' Hi')[1]))" },
  ["Tokenizer:id"] = { "tok:id(bytes) -> id | nil", "the id of a token's bytes", ex = "print(tok:id(' the'))" },
  ["Tokenizer:id_of_str"] = { "tok:id_of_str(s) -> id | nil", "the id of a vocabulary string", ex = "print(tok:id_of_str('<|endoftext|>'))" },
  ["Tokenizer:is_special"] = { "tok:is_special(id) -> bool", "an added special token?", ex = "print(tok:is_special(tok.eos_id))" },
  ["Tokenizer:save"] = { "tok:save(path) -> tok", "writes tokenizer.json atomically", ex = "tok:save('/tmp/tokenizer.json')" },
  ["Tokenizer:detokenizer"] = { "tok:detokenizer() -> Detokenizer", "incremental decoding: d:push(id) -> text, d:flush(), d:reset()",
    ex = "local d = tok:detokenizer(); for _, id in ipairs(tok:encode('héllo')) do io.write(d:push(id)) end; print(d:flush())" },
  ["Tokenizer:close"] = { "tok:close()", "free it now (also at garbage collection)", ex = "local t = wb.tokenizer_load('models/tinylm-base/tokenizer.json'); t:close()" },

  ["Model:generate"] = { "model:generate(prompt, params [, opts]) -> result",
    "text, token_ids, stop_reason, timings (docs/sampling.md); prompt is a string or a list of ids",
    opts = SAMPLING .. "\n  " .. GEN_OPTS,
    ex = "print(model:generate('Customer (Ana): Hi,', {max_tokens = 16, temperature = 0.7, seed = 1}).text)" },
  ["Model:chat"] = { "model:chat(messages, params [, opts]) -> result",
    "messages {{role=, content=}, ...} through the directory's chat template, then generate; generation_config.json gives the default sampling (opts.defaults = \"none\" turns it off; result.params_used, params_source) and eos ids (TinyLM has no chat template)",
    opts = SAMPLING .. "\n  " .. GEN_OPTS .. "\n  tools, documents, template, vars, now, add_generation_prompt (docs/chat.md); defaults = \"model\" | \"none\"",
    ex = "print(wb.load('/path/to/Qwen2.5-0.5B-Instruct'):chat({{role = 'user', content = 'Hi'}}, {max_tokens = 20}).text)" },
  ["Model:stream_chat"] = { "model:stream_chat(messages, params [, opts]) -> iterator", "model:chat, streamed like model:stream",
    opts = SAMPLING .. "\n  " .. GEN_OPTS,
    ex = "for piece in wb.load('/path/to/Qwen2.5-0.5B-Instruct'):stream_chat({{role = 'user', content = 'Hi'}}, {max_tokens = 20}) do io.write(piece) end" },
  ["Model:chat_prompt"] = { "model:chat_prompt(messages [, opts]) -> text, ids",
    "the prompt the chat template renders and its ids (docs/chat.md)",
    opts = "add_generation_prompt (default true), tools, documents, template, vars, now",
    ex = "local text, ids = wb.load('/path/to/Qwen2.5-0.5B-Instruct'):chat_prompt({{role = 'user', content = 'Hi'}})" },
  ["Model:info"] = { "model:info() -> table",
    "model_type, vocab_size, n_ctx, max_position_embeddings, n_embd, n_layer, n_head, n_kv_head, head_dim, n_inner, parameters, weight_bytes, kv_bytes_per_token",
    ex = "model:info()" },
  ["Model:generate_batch"] = { "model:generate_batch(prompts, params [, opts]) -> result",
    "B prompts decoded together, one forward pass per step; each result equals model:generate alone (docs/lua-api.md)",
    opts = SAMPLING .. " (one table, or one per prompt)\n  " .. GEN_OPTS .. ", separate_prefill",
    ex = "for _, r in ipairs(model:generate_batch({'Hi', 'Hello'}, {max_tokens = 8}).results) do print(r.text) end" },
  ["Model:batch"] = { "model:batch() -> Batch",
    "continuous batching: requests join and leave between steps, one forward pass per step (docs/lua-api.md)",
    opts = "b:add(prompt, params [, opts]) -> id; b:step() -> {{id, text, token, done, result, error}, ...}; b:cancel(id) -> result; b:active() -> n; b:close()",
    ex = "local b = model:batch(); b:add('Hi', {max_tokens = 8}); while b:active() > 0 do for _, e in ipairs(b:step()) do io.write(e.text) end end" },
  ["Model:stream"] = { "model:stream(prompt, params [, opts]) -> iterator", "one released piece per call, with ms since the start",
    opts = SAMPLING .. "\n  " .. GEN_OPTS,
    ex = "for piece, ms in model:stream('Customer (Ana): Hi,', {max_tokens = 16}) do io.write(piece) end print()" },
  ["Model:logits"] = { "model:logits(ids [, opts]) -> Vec", "the next-token logits, without a cache",
    opts = "opts: all = true (logits at every position, one Vec of n*vocab)", ex = "print(model:logits(tok:encode('Hi')):argmax())" },
  ["Model:forward"] = { "model:forward(ids [, opts]) -> {logits =, hidden_states =, attentions =, positions =}", "one uncached forward pass and what it shows of its insides (docs/lua-api.md, Looking inside)",
    opts = "opts: all = true (logits at every position); hidden_states = true (Tensor [n_layer + 1, n, n_embd]: the residual entering each layer, the last before the final norm); attentions = true (Tensor [n_layer, #positions, n_head, n]: softmax rows); positions = {p, ...} (which queries; -1 = the last; implies attentions)",
    ex = "local r = model:forward(tok:encode('Hi, my'), {attentions = true, positions = {-1}}); print(r.attentions:vec(0, 0, 0))" },
  ["Model:head"] = { "model:head(x) -> Vec", "the final norm and output head applied to a Vec of n_embd floats: the logit lens over hidden states",
    ex = "local r = model:forward(tok:encode('Hi, my'), {hidden_states = true}); print(tok:token(model:head(r.hidden_states:vec(2, 2)):argmax()))" },
  ["Model:session"] = { "model:session([opts]) -> Session", "a KV cache over one sequence", opts = "opts: n_ctx = n",
    ex = "local s = model:session(); print(s:prefill(tok:encode('Hi')):argmax())" },
  ["Model:num_parameters"] = { "model:num_parameters() -> n", "the parameter count", ex = "print(model:num_parameters())" },
  ["Model:batch_variant"] = { "model:batch_variant(on) -> previous",
    "batch-variant mode (off by default): F32 products of more than one row through OpenBLAS GEMM, so batched logits differ from alone in the last bits, as on most servers (scripts/batch_variance.lua)",
    ex = "local was = model:batch_variant(true); print(was); model:batch_variant(was)" },
  ["Model:save_gguf"] = { "model:save_gguf(path [, opts]) -> path",
    "write the model, its tokenizer and chat template as one GGUF file for llama.cpp or Ollama (atomic; docs/gguf.md)",
    opts = "opts: type = 'f32'|'f16'|'bf16'|'q8_0'|'q4_0' (matrices; norms and biases stay F32), name = general.name, chat_template = text or false",
    ex = "model:save_gguf('/tmp/wb-help-model.gguf', {type = 'q8_0'})" },
  ["Model:close"] = { "model:close()", "free the weights now (also at garbage collection)", ex = "local m = wb.load(); m:close()" },

  ["Session:prefill"] = { "s:prefill(ids [, opts]) -> Vec [, insides]", "append ids to the cache; the logits after the last",
    opts = "opts: all = true (logits at every new position); hidden_states = true, attentions = true, positions = {p, ...} (absolute, -1 = the call's last): a second result {hidden_states = Tensor, attentions = Tensor, positions =} as model:forward",
    ex = "local s = model:session(); local v, ins = s:prefill(tok:encode('Hi there'), {positions = {-1}}); print(ins.attentions)" },
  ["Session:decode"] = { "s:decode(id [, opts]) -> Vec [, insides]", "append one id; the logits after it",
    opts = "opts: hidden_states = true, attentions = true: a second result as s:prefill's",
    ex = "local s = model:session(); s:prefill(tok:encode('Hi')); print(s:decode(tok:id(' there')):argmax())" },
  ["Session:kv"] = { "s:kv(layer) -> keys, values", "read-only Tensor views [pos, n_kv_head, head_dim] of one layer (0-based) of the cache; they refuse to read once the session is truncated, reset or closed",
    ex = "local s = model:session(); s:prefill(tok:encode('Hi there')); local k, v = s:kv(0); print(k, k:get(0, 0, 0))" },
  ["Tensor:shape"] = { "t:shape() -> {d0, d1, ...}", "the size of each axis", ex = "print(#model:forward({1, 2}, {hidden_states = true}).hidden_states:shape())" },
  ["Tensor:get"] = { "t:get(i0, i1, ...) -> x", "one element; 0-based indices, one per axis", ex = "print(model:forward({1, 2}, {attentions = true}).attentions:get(0, 1, 0, 0))" },
  ["Tensor:vec"] = { "t:vec(i0, ...) -> Vec", "a copy of the last axis at the other indices", ex = "print(model:forward({1, 2}, {attentions = true}).attentions:vec(0, 1, 0):sum())" },
  ["Tensor:select"] = { "t:select(i) -> Tensor", "a view of t[i], one axis fewer (keeps t alive)", ex = "print(model:forward({1, 2}, {hidden_states = true}).hidden_states:select(0))" },
  ["Tensor:totable"] = { "t:totable() -> nested tables", "t:totable()[i0 + 1][i1 + 1]...", ex = "print(#model:forward({1, 2}, {attentions = true}).attentions:totable())" },
  ["Tensor:valid"] = { "t:valid() -> boolean", "false once a cache view's session was truncated, reset or closed", ex = "local s = model:session(); s:prefill({1}); local k = s:kv(0); s:reset(); print(k:valid())" },
  ["Session:pos"] = { "s:pos() -> n", "tokens in the cache", ex = "local s = model:session(); s:prefill({1, 2}); print(s:pos())" },
  ["Session:n_ctx"] = { "s:n_ctx() -> n", "the cache's capacity", ex = "print(model:session():n_ctx())" },
  ["Session:tokens"] = { "s:tokens() -> {ids}", "the ids in the cache", ex = "local s = model:session(); s:prefill({1, 2}); print(#s:tokens())" },
  ["Session:truncate"] = { "s:truncate(n) -> s", "keep the first n positions", ex = "local s = model:session(); s:prefill({1, 2, 3}); print(s:truncate(1):pos())" },
  ["Session:reset"] = { "s:reset() -> s", "empty the cache", ex = "local s = model:session(); s:prefill({1}); print(s:reset():pos())" },
  ["Session:fork"] = { "s:fork() -> Session", "a copy sharing nothing", ex = "local s = model:session(); s:prefill({1}); local t = s:fork(); print(t:pos())" },
  ["Session:cache_bytes"] = { "s:cache_bytes() -> n", "bytes the cache holds", ex = "print(model:session():cache_bytes())" },
  ["Session:model"] = { "s:model() -> Model", "the model it belongs to", ex = "print(model:session():model() == model)" },
  ["Session:close"] = { "s:close()", "free the cache now (also at garbage collection or a <close> variable's end)",
    ex = "do local s <close> = model:session() end" },

  ["wb.presets"] = { "wb.presets", "decoding presets as Lua data files (docs/presets.md)", ex = "print(table.concat(wb.presets.list(), ' '))" },
  ["wb.presets.load"] = { "wb.presets.load(name_or_path) -> preset", "validated, merged over the defaults; errors name key, file and line",
    ex = "print(wb.presets.load('triage').description)" },
  ["wb.presets.list"] = { "wb.presets.list() -> {names}", "user directory first, then presets/", ex = "print(table.concat(wb.presets.list(), ' '))" },
  ["wb.presets.generate"] = { "wb.presets.generate(model, preset, input) -> result, info", "a local run with the preset",
    ex = "print(wb.presets.generate(model, wb.presets.load('triage'), 'My card was charged twice').text)" },
  ["wb.providers"] = { "wb.providers", "request bodies for groq, gemini, ollama (docs/presets.md)",
    ex = "print(wb.providers.request('groq', wb.presets.load('triage'), {{role = 'user', content = 'Hi'}}).body)" },
  ["wb.providers.request"] = { "wb.providers.request(provider, preset, messages [, opts]) -> req",
    "req.body, req.json, req.warnings (dropped parameters); nothing is sent", opts = "opts: strict, stream, model, host",
    ex = "print(wb.providers.request('ollama', 'drafts', {{role = 'user', content = 'Hi'}}).body)" },
  ["wb.cost"] = { "wb.cost", "pricing, cost and latency of calls with thinking tokens", ex = "print(wb.cost.break_even(0.001, 0.004, 0.1))" },
  ["wb.cost.call_cost"] = { "wb.cost.call_cost(row, tokens) -> usd, parts", "tokens = {input=, cached=, thinking=, output=}",
    ex = "-- rows come from the price table: see scripts/reasoning_cost.lua" },
  ["wb.cost.latency"] = { "wb.cost.latency(speeds, tokens) -> {ttft=, total=, ...}", "speeds = {network_ms=, prefill_ms_per_1k=, itl_ms=}",
    ex = "print(wb.cost.latency({network_ms = 50, prefill_ms_per_1k = 20, itl_ms = 10}, {input = 500, output = 100}).total)" },
  ["wb.cost.break_even"] = { "wb.cost.break_even(cost_without, cost_with, accuracy_gain) -> usd", "value of a correct answer at which reasoning pays",
    ex = "print(wb.cost.break_even(0.001, 0.004, 0.1))" },
  ["wb.cost.counter"] = { "wb.cost.counter([tokenizer.json]) -> {count=, label=, estimated=}", "without a path: a labelled estimate",
    ex = "print(wb.cost.counter('models/tinylm-base/tokenizer.json').count('Hi there'))" },
}

M.TOPICS = {
  "wb.load, wb.tokenizer_load, wb.vec, wb.json, wb.sampling, wb.constraint, wb.presets, wb.providers, wb.cost",
  "Vec, Tokenizer, Model, Session (methods: help \"Model:generate\", help(model), help(wb.load))",
  "presets (the presets found on disk)",
  "at the prompt: Tab completes, =expr prints, a top-level local is kept, exit or Ctrl-D leaves",
}

-- The class of a userdata or method table: "Model" for a model, "Vec" for wb.Vec.
local function class_of(v)
  local wb = package.loaded.wb
  if type(v) == "userdata" then
    local mt = getmetatable(v)
    local n = type(mt) == "table" and rawget(mt, "__name")
    n = type(n) == "string" and n:match("^wb%.(%u%w*)$")
    if n and wb and type(rawget(wb, n)) == "table" then return n end
  elseif type(v) == "table" and wb then
    for k, t in pairs(wb) do
      if t == v and type(k) == "string" and k:match("^%u") then return k end
    end
  end
  return nil
end

-- The methods of a class, from its wb.<Class> table (for a userdata whose __index is a function,
-- the table the function looks in).
local function methods_of(class)
  local wb = package.loaded.wb
  local t = wb and rawget(wb, class)
  local names = {}
  if type(t) ~= "table" then return names end
  for k, v in pairs(t) do
    if type(k) == "string" and type(v) == "function" and not k:match("^__") then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end
M.methods_of = methods_of

-- Fields (not methods) a userdata class answers through its __index function; listed for Tab
-- completion after '.', as the function itself cannot be walked.
M.FIELDS = { Model = { "config", "dir", "tokenizer" }, Tokenizer = { "eos_id", "vocab_size" } }

-- The name of a function value: a `wb` function, a library module's function or a method.
local function name_of(f)
  local wb = package.loaded.wb
  if not wb then return nil end
  for k, v in pairs(wb) do
    if v == f and type(k) == "string" then return "wb." .. k end
  end
  for k, t in pairs(wb) do
    if type(k) == "string" and type(t) == "table" then
      for m, v in pairs(t) do
        if v == f and type(m) == "string" then
          return (k:match("^%u") and (k .. ":") or ("wb." .. k .. ".")) .. m
        end
      end
    end
  end
  for mod, t in pairs(package.loaded) do -- wb.presets & co, once loaded
    if type(mod) == "string" and mod:match("^wb%.") and type(t) == "table" then
      for m, v in pairs(t) do if v == f and type(m) == "string" then return mod .. "." .. m end end
    end
  end
  return nil
end

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

local function format_entry(name, e)
  local out = { e[1] }
  if e[2] ~= "" then out[#out + 1] = "  " .. e[2] end
  if e.opts then out[#out + 1] = "  " .. e.opts end
  if e.ex then out[#out + 1] = "  example: " .. e.ex end
  return table.concat(out, "\n")
end

local function class_text(class)
  local lines = { class .. " methods (help \"" .. class .. ":name\" for one):" }
  for _, m in ipairs(methods_of(class)) do
    local e = M.TEXT[class .. ":" .. m]
    lines[#lines + 1] = "  " .. (e and e[1] or (class .. ":" .. m))
  end
  if M.FIELDS[class] then lines[#lines + 1] = "  fields: " .. table.concat(M.FIELDS[class], ", ") end
  return table.concat(lines, "\n")
end

--- The help string for a name ("wb.load", "Vec:topk", "Vec", "presets") or a value (wb.load,
--- model, a Vec, wb.json).
function M.text(name)
  if type(name) == "function" then
    local n = name_of(name)
    if not n then return ("%s: no help for this function (not part of wb); see docs/lua-api.md"):format(tostring(name)) end
    name = n
  elseif type(name) == "userdata" or (type(name) == "table" and name ~= M.value) then
    local class = class_of(name)
    if class then return class_text(class) end
    local wb = package.loaded.wb
    if name == wb then return M.text("") end
    for k, v in pairs(wb or {}) do if v == name then return M.text("wb." .. k) end end
    for mod, v in pairs(package.loaded) do
      if v == name and type(mod) == "string" and mod:match("^wb%.") then return M.text(mod) end
    end
    return ("no help for this %s; `help` lists the topics"):format(type(name))
  elseif name ~= nil and type(name) ~= "string" and name ~= M.value then
    return ("help(x) takes a name or a wb value, got a %s"):format(type(name))
  end
  if name == M.value then name = "" end
  name = (name or ""):gsub("^%s+", ""):gsub("%s+$", "")
  if name == "" then
    return "help topics (help \"name\", help(value), :help name):\n  " .. table.concat(M.TOPICS, "\n  ")
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
  name = name:gsub("^model([:.])", "Model%1"):gsub("^tok([:.])", "Tokenizer%1")
  name = name:gsub("^(%u%w*)%.(%l)", "%1:%2") -- Model.generate -> Model:generate
  local e = M.TEXT[name]
  if e then return format_entry(name, e) end
  local wb = package.loaded.wb
  if wb and type(rawget(wb, name)) == "table" and name:match("^%u") then return class_text(name) end
  local v = resolve(name)
  if type(v) == "table" then
    local names = {}
    for k in pairs(v) do if type(k) == "string" then names[#names + 1] = k end end
    table.sort(names)
    return name .. ": " .. table.concat(names, ", ")
  elseif v ~= nil then
    return ("%s (%s): no help text yet; see docs/lua-api.md"):format(name, type(v))
  end
  return ("no help for %q; `help` lists the topics"):format(name)
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

--- The REPL's `help` global: help(x) prints M.text(x); `help` alone prints as the topic list.
M.value = setmetatable({}, {
  __name = "help",
  __call = function(_, x) print(M.text(x)) end,
  __tostring = function() return M.text("") end,
})

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

local function fields(v, methods, class)
  local out, seen = {}, {}
  local function add(list) for _, k in ipairs(list) do if not seen[k] then seen[k] = true; out[#out + 1] = k end end end
  if v ~= nil and v == package.loaded.wb and not methods then add(library_modules()) end
  -- A userdata whose __index is a function (Model, Tokenizer, ...): its class's method table and
  -- the fields the function answers; the function itself is never called by a Tab press.
  class = class or (type(v) == "userdata" and class_of(v))
  if class then
    if methods then add(methods_of(class)) else add(M.FIELDS[class] or {}) end
    return out
  end
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

-- The lazy REPL globals, completed as their class before the model is loaded.
local LAZY = { model = "Model", tok = "Tokenizer" }

-- The value an expression like "wb.sampling" or "model.tokenizer" names, without running user
-- code; also its class when it is a not-yet-loaded lazy global. Returns value, class.
local function raw_path(expr)
  local cur, class = _G, nil
  local first = true
  for part in expr:gmatch("[^%.]+") do
    if class then -- a lazy global's field: model.tokenizer is a Tokenizer
      if class == "Model" and part == "tokenizer" then class = "Tokenizer" else return nil end
    elseif type(cur) == "table" then
      local v = rawget(cur, part)
      -- wb.<library module>: loading a pure-Lua module is cheap and has no side effects.
      if v == nil and cur == package.loaded.wb and package.searchpath("wb." .. part, package.path) then
        local ok, m = pcall(require, "wb." .. part)
        v = ok and m or nil
      end
      if v == nil and first and cur == _G and LAZY[part] then class = LAZY[part] end
      cur = v
    elseif type(cur) == "userdata" then
      local c = class_of(cur)
      local known = false
      for _, f in ipairs(c and M.FIELDS[c] or {}) do known = known or f == part end
      if known then -- a field the binding answers from C: reading it has no side effects
        local ok, v = pcall(function() return cur[part] end)
        cur = ok and v or nil
      else
        local mt = getmetatable(cur)
        local idx = type(mt) == "table" and rawget(mt, "__index")
        cur = type(idx) == "table" and rawget(idx, part) or nil
      end
    else
      return nil
    end
    first = false
  end
  return cur, class
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
    local v, class = raw_path(base)
    if v == nil and not class then return out end
    for _, k in ipairs(fields(v, sep == ":", class)) do
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
