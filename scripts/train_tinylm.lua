-- train_tinylm.lua: the whole TinyLM pipeline, from nothing to a Hugging Face model directory.
--
--   workbench scripts/train_tinylm.lua [--steps N] [--out DIR] [--resume] [--smoke]
--                                      [--threads N] [--seed N] [--eval-every N]
--
--   1. generate the Brightlane support corpus (wb.corpus)
--   2. train a 2048-token byte-level BPE tokenizer on it      -> tokenizer.json
--   3. encode train and validation text to token ids
--   4. train GPT-2 (4 layers, width 128, context 128) with AdamW, evaluating every N steps
--                                                             -> loss.csv, loss.svg
--   5. write the model in Hugging Face layout                 -> model.safetensors, config.json
--      and what happened                                      -> summary.json
--   6. load it back with wb.load and check it computes the loss the trainer did
--
-- Interrupt with Ctrl-C: the trainer stops between layers, the script saves a checkpoint and
-- --resume continues exactly where it stopped (same losses as an uninterrupted run).
-- --smoke runs a small corpus and model for a few dozen steps (CI) and asserts the loss falls.

local wb = require("wb")
local corpus = require("wb.corpus")
local plot = require("wb.plot")

-- ---- options ------------------------------------------------------------------------------

local o = require("wb.cli").parse(arg, "scripts/train_tinylm.lua", {
  { "steps", "count", nil, "optimizer steps (default 3000; smoke 60)" },
  { "out", "string", nil, "output directory (default $WB_OUT/tinylm, else ./wb-out/tinylm; smoke: a temporary directory); "
    .. "the shipped models/tinylm-base is written only when named with --out" },
  { "resume", "flag", nil, "continue from DIR/checkpoint.safetensors" },
  { "smoke", "flag", nil, "small corpus and model, few steps; fails unless the loss falls" },
  { "threads", "count", nil, "compute threads (default: all cores)" },
  { "seed", "count", 1337, "trainer seed: initialisation and batch order" },
  { "corpus-seed", "count", 1, "corpus generator seed" },
  { "conversations", "count", nil, "conversation documents in the training corpus (default 1000)" },
  { "tickets", "count", nil, "triage label records in the training corpus (default 550)" },
  { "eval-every", "count", nil, "steps between validation evaluations (default 100; smoke 10)" },
  { "eval-batches", "count", 8, "validation batches per evaluation" },
  { "lr", "number", 3e-3, "peak learning rate" },
  { "batch", "count", 16, "sequences per step" },
  { "checkpoint-every", "count", 250, "steps between checkpoints" },
  { "stop-at", "count", nil, "stop at step N as if interrupted (checkpoint saved; --resume continues)" },
  { "checkpoint", "string", nil, "where to keep the resume checkpoint (default DIR/checkpoint.safetensors)" },
}, { about = "train TinyLM on the Brightlane corpus" })
if o.lr <= 0 then
  io.stderr:write("scripts/train_tinylm.lua: --lr needs a positive number\n")
  os.exit(2)
end
o.resume, o.smoke = o.resume == true, o.smoke == true

local function ncpu()
  local f = io.open("/proc/cpuinfo")
  if not f then return 1 end
  local n = 0
  for line in f:lines() do if line:match("^processor%s*:") then n = n + 1 end end
  f:close()
  return math.max(n, 1)
end

-- The model and the schedule. Smoke: the same architecture, shrunk so CI finishes in seconds.
local shape = {
  vocab_size = 2048, n_ctx = 128, n_embd = 128, n_layer = 4, n_head = 4, n_inner = 512,
}
-- TinyLM is meant to memorise its corpus (the lessons rely on a model that is sure of itself on
-- most prompts), so the default draw is small enough to be memorised in the training budget:
-- about 0.4 MB of text, 100k tokens, ~60 passes in 3000 steps. The generator's own default (a 4.4 MB draw) is for
-- make_corpus.lua; both come from the same templates.
local corpus_opts = { seed = o.corpus_seed, conversations = o.conversations or 1000,
                      tickets = o.tickets or 550 }
if o.smoke then
  shape = { vocab_size = 512, n_ctx = 64, n_embd = 64, n_layer = 2, n_head = 2, n_inner = 256 }
  corpus_opts = { seed = o.corpus_seed, conversations = 400, tickets = 200 }
  o.steps = o.steps or 60
  o.eval_every = o.eval_every or 10
  o.batch = 8
end
o.steps = o.steps or 3000
o.eval_every = o.eval_every or 100
o.threads = o.threads or ncpu()
local out_is_temporary = false
if not o.out then
  if o.smoke then
    o.out = os.tmpname()
    os.remove(o.out)
    out_is_temporary = true
  else
    -- Never the shipped model by default: a run without --out must not overwrite it.
    local base = os.getenv("WB_OUT")
    o.out = (base and base ~= "" and base or "wb-out") .. "/tinylm"
  end
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end
local function write_file(path, text) plot.write(path, text) end -- atomic

assert(os.execute("mkdir -p " .. sh_quote(o.out)), "cannot create " .. o.out)
local P = function(name) return o.out .. "/" .. name end
-- Temporary files that a killed run left behind ("<file>.tmp.<pid>" of a dead process).
do
  local removed = 0
  for _, name in ipairs { "checkpoint.safetensors", "loss.csv", "loss.svg", "model.safetensors",
      "config.json", "tokenizer.json", "summary.json", "README.md" } do
    removed = removed + wb.remove_stale_temps(P(name))
  end
  if o.checkpoint then removed = removed + wb.remove_stale_temps(o.checkpoint) end
  if removed > 0 then io.write(("removed %d stale temporary file(s) in %s\n"):format(removed, o.out)) end
end
local is_tty = os.execute("test -t 1") == true
wb.threads(o.threads)

local function log(fmt, ...) io.write(string.format(fmt, ...), "\n"); io.stdout:flush() end
log("workbench %s, %s, %d thread(s)", wb.version, wb.blas_info(), o.threads)

-- ---- 1-3: corpus, tokenizer, ids ------------------------------------------------------------

local t0 = wb.clock_ms()
local c = corpus.generate(corpus_opts)
log("corpus: %d bytes train, %d bytes validation (%.1f s)", #c.train, #c.val, (wb.clock_ms() - t0) / 1e3)

t0 = wb.clock_ms()
local EOT = "<|endoftext|>"
local tok
if o.resume and exists(P("tokenizer.json")) then
  tok = wb.tokenizer_load(P("tokenizer.json"))
  log("tokenizer: reusing %s", P("tokenizer.json"))
else
  tok = wb.bpe_train(c.train, { vocab_size = shape.vocab_size, special_tokens = { EOT } })
  tok:save(P("tokenizer.json"))
  log("tokenizer: %d ids trained in %.1f s -> %s", #tok, (wb.clock_ms() - t0) / 1e3, P("tokenizer.json"))
end
-- The model keeps vocab_size rows even if BPE ran out of pairs first: the parameter count stays
-- fixed and unused rows are simply never the target.
assert(#tok <= shape.vocab_size, "tokenizer has " .. #tok .. " ids, more than the model's " .. shape.vocab_size)
if #tok < shape.vocab_size then
  log("warning: the tokenizer has %d ids, fewer than the model's %d", #tok, shape.vocab_size)
end
local eos = tok:id_of_str(EOT)
assert(eos, "tokenizer has no " .. EOT)

t0 = wb.clock_ms()
local train_ids = tok:encode(c.train)
local val_ids = tok:encode(c.val)
log("encoded: %d train tokens (%.2f bytes/token), %d validation tokens (%.1f s)",
  #train_ids, #c.train / #train_ids, #val_ids, (wb.clock_ms() - t0) / 1e3)
local corpus_bytes = #c.train
c = nil
collectgarbage()

-- ---- 4: training ---------------------------------------------------------------------------

local params = {
  vocab_size = shape.vocab_size, n_ctx = shape.n_ctx, n_embd = shape.n_embd,
  n_layer = shape.n_layer, n_head = shape.n_head, n_inner = shape.n_inner,
  seed = o.seed, batch_size = o.batch, seq_len = shape.n_ctx, max_steps = o.steps,
  warmup_steps = math.min(100, o.steps // 10), lr = o.lr, min_lr = o.lr / 10,
  weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, grad_clip = 1.0, init_std = 0.02,
}
local tr = wb.trainer(params)
tr:set_data(train_ids, val_ids)
local tokens_per_step = params.batch_size * params.seq_len
log("model: %d parameters; %d steps of %d x %d tokens = %.1f epochs of the train stream",
  tr:num_params(), o.steps, params.batch_size, params.seq_len, o.steps * tokens_per_step / #train_ids)

-- The loss log: one row per step; val_loss only on evaluation steps.
local rows = {}
local elapsed_before = 0 -- seconds spent in earlier runs of a resumed training
local ckpt = o.checkpoint or P("checkpoint.safetensors")
if o.resume then
  if not exists(ckpt) then error("--resume: no checkpoint at " .. ckpt) end
  local step = tr:load_checkpoint(ckpt)
  local f = io.open(P("loss.csv"))
  if f then
    f:read("l") -- header
    for line in f:lines() do
      local s, tl, vl, lr, tps, el = line:match("^([^,]*),([^,]*),([^,]*),([^,]*),([^,]*),([^,]*)$")
      s = tonumber(s)
      if s and s <= step then
        rows[#rows + 1] = { step = s, train = tonumber(tl), val = tonumber(vl), lr = tonumber(lr),
          tps = tonumber(tps), elapsed = tonumber(el) }
        elapsed_before = tonumber(el) or elapsed_before
      end
    end
    f:close()
  end
  log("resumed from %s at step %d", ckpt, step)
end

local function fmt_num(v, f) return v and string.format(f, v) or "" end

local function write_logs()
  local out = { "step,train_loss,val_loss,lr,tokens_per_s,elapsed_s" }
  for _, r in ipairs(rows) do
    out[#out + 1] = string.format("%d,%s,%s,%s,%s,%s", r.step, fmt_num(r.train, "%.6f"),
      fmt_num(r.val, "%.6f"), fmt_num(r.lr, "%.6g"), fmt_num(r.tps, "%.1f"), fmt_num(r.elapsed, "%.2f"))
  end
  write_file(P("loss.csv"), table.concat(out, "\n") .. "\n")
  local xs, ys, vx, vy = {}, {}, {}, {}
  for _, r in ipairs(rows) do
    if r.train then xs[#xs + 1], ys[#ys + 1] = r.step, r.train end
    if r.val then vx[#vx + 1], vy[#vy + 1] = r.step, r.val end
  end
  write_file(P("loss.svg"), plot.lines {
    title = string.format("TinyLM: %d parameters, batch %d x %d", tr:num_params(), params.batch_size, params.seq_len),
    xlabel = "step", ylabel = "cross-entropy loss (nats/token)",
    series = {
      { name = "train (one batch)", x = xs, y = ys, width = 1 },
      { name = "validation", x = vx, y = vy, markers = true, width = 2 },
    },
  })
end

local function fmt_time(s)
  s = math.max(0, math.floor(s + 0.5))
  if s >= 3600 then return string.format("%dh%02dm", s // 3600, s % 3600 // 60) end
  return string.format("%dm%02ds", s // 60, s % 60)
end

-- earlier rows (a resumed run) count towards the first and the recent losses
local first_losses, recent = {}, {}
for i, r in ipairs(rows) do
  if i <= 5 and r.train then first_losses[#first_losses + 1] = r.train end
  if i > #rows - o.eval_every and r.train then recent[#recent + 1] = r.train end
end
local last_val
for _, r in ipairs(rows) do if r.val then last_val = r.val end end
local run_t0, run_step0 = wb.clock_ms(), tr:step_index()
local interrupted = false

local function progress(step, loss, tps)
  local done = step - run_step0
  local eta = done > 0 and (o.steps - step) * (wb.clock_ms() - run_t0) / 1e3 / done or 0
  local line = string.format("step %5d/%d  train %.4f  val %s  lr %.2e  %6.0f tok/s  ETA %s",
    step, o.steps, loss, last_val and string.format("%.4f", last_val) or "  -   ", tr:lr(), tps, fmt_time(eta))
  if is_tty then
    io.write("\r", line, "  ")
  elseif step % o.eval_every == 0 or step == o.steps then
    io.write(line, "\n")
  end
  io.stdout:flush()
end

-- Ctrl-C raises "interrupted" either from inside a trainer call (which then leaves the trainer
-- as it was before the step) or from the host's hook at the next Lua instruction; both end up here.
local function train_loop()
  while tr:step_index() < o.steps do
    if o.stop_at and tr:step_index() >= o.stop_at then interrupted = true; return end
    local ts = wb.clock_ms()
    local loss, gnorm = tr:step()
    local step = tr:step_index()
    local dt = (wb.clock_ms() - ts) / 1e3
    local tps = tokens_per_step / dt
    if #first_losses < 5 then first_losses[#first_losses + 1] = loss end
    recent[#recent + 1] = loss
    if #recent > o.eval_every then table.remove(recent, 1) end
    local row = { step = step, train = loss, tps = tps, gnorm = gnorm,
      elapsed = elapsed_before + (wb.clock_ms() - run_t0) / 1e3 }
    rows[#rows + 1] = row
    if step % o.eval_every == 0 or step == o.steps then
      row.val = tr:eval(o.eval_batches)
      last_val = row.val
      if is_tty then io.write("\n") end
    end
    row.lr = tr:lr()
    progress(step, loss, tps)
    if step % o.checkpoint_every == 0 and step < o.steps then
      -- The log first, then the checkpoint (both atomic): a kill between the two leaves a log
      -- with rows past the checkpoint, which --resume drops and recomputes; the other order
      -- lost the rows between the previous log and this checkpoint.
      write_logs()
      tr:save_checkpoint(ckpt)
    end
  end
end

do
  local ok, err = pcall(train_loop)
  if not ok then
    if not tostring(err):match("interrupted") then error(err, 0) end
    interrupted = true
    -- a step that completed just before the interruption still gets its (partial) row
    if (#rows == 0 or rows[#rows].step < tr:step_index()) then
      rows[#rows + 1] = { step = tr:step_index(), elapsed = elapsed_before + (wb.clock_ms() - run_t0) / 1e3 }
    end
  end
end
if is_tty then io.write("\n") end

write_logs()
tr:save_checkpoint(ckpt)
if interrupted then
  log("%s at step %d; checkpoint saved to %s (continue with --resume)",
    o.stop_at and "stopped" or "interrupted", tr:step_index(), ckpt)
  os.exit(o.stop_at and 0 or 130)
end

-- ---- 5: the model directory -------------------------------------------------------------------

tr:save_model(P("model.safetensors"))
local null = wb.json.null
write_file(P("config.json"), wb.json.encode {
  architectures = { "GPT2LMHeadModel" }, model_type = "gpt2",
  vocab_size = shape.vocab_size, n_positions = shape.n_ctx, n_ctx = shape.n_ctx,
  n_embd = shape.n_embd, n_layer = shape.n_layer, n_head = shape.n_head,
  n_inner = shape.n_inner == 4 * shape.n_embd and null or shape.n_inner,
  activation_function = "gelu_new", layer_norm_epsilon = 1e-5,
  resid_pdrop = 0.0, embd_pdrop = 0.0, attn_pdrop = 0.0, initializer_range = 0.02,
  summary_type = "cls_index", summary_use_proj = true, summary_activation = null,
  summary_proj_to_labels = true, summary_first_dropout = 0.1,
  scale_attn_weights = true, use_cache = true,
  bos_token_id = eos, eos_token_id = eos, tie_word_embeddings = true, torch_dtype = "float32",
} .. "\n")

local min_val, min_step, final_val
for _, r in ipairs(rows) do
  if r.val then
    final_val = r.val
    if not min_val or r.val < min_val then min_val, min_step = r.val, r.step end
  end
end
local function mean(t) local s = 0; for _, v in ipairs(t) do s = s + v end; return #t > 0 and s / #t or nil end
local final_train = mean(recent)
local total_elapsed = rows[#rows] and rows[#rows].elapsed or 0
local run_steps = tr:step_index() - run_step0
local run_seconds = (wb.clock_ms() - run_t0) / 1e3
local summary = {
  steps = tr:step_index(), parameters = tr:num_params(),
  train_tokens = #train_ids, val_tokens = #val_ids, tokens_per_step = tokens_per_step,
  epochs = tr:step_index() * tokens_per_step / #train_ids,
  min_val_loss = min_val, min_val_step = min_step,
  final_val_loss = final_val,
  final_train_loss = final_train, final_train_loss_note = "mean training-batch loss of the last " .. #recent .. " steps",
  elapsed_s = total_elapsed, threads = o.threads,
  tokens_per_s = run_steps > 0 and run_steps * tokens_per_step / run_seconds or null,
  corpus_seed = o.corpus_seed, corpus_conversations = corpus_opts.conversations,
  corpus_tickets = corpus_opts.tickets, corpus_bytes = corpus_bytes, smoke = o.smoke,
  params = (function()
    local t = tr:params()
    for k, v in pairs(t) do -- float32 values printed as the decimals they were given
      if math.type(v) == "float" then t[k] = tonumber(string.format("%.7g", v)) end
    end
    return t
  end)(), eval_every = o.eval_every, eval_batches = o.eval_batches,
  blas = wb.blas_info(), workbench = wb.version,
}
write_file(P("summary.json"), wb.json.encode(summary) .. "\n")
log("final: train %.4f (mean of last %d steps), val %.4f; min val %.4f at step %d",
  final_train or 0 / 0, #recent, final_val or 0 / 0, min_val or 0 / 0, min_step or -1)

-- ---- 6: load it back ----------------------------------------------------------------------------

-- The saved directory must load in the project's own loader and give the trainer's loss on the
-- same window (to float rounding: the two implementations sum in different orders).
local model = wb.load(o.out)
local window = table.move(val_ids, 1, shape.n_ctx + 1, 1, {})
local rows_out = model:logits(table.move(window, 1, shape.n_ctx, 1, {}), { all = true })
local nll = 0
for t = 1, shape.n_ctx do
  local v = rows_out[t]
  local mx = -math.huge
  for i = 0, shape.vocab_size - 1 do mx = math.max(mx, v:get(i)) end
  local s = 0
  for i = 0, shape.vocab_size - 1 do s = s + math.exp(v:get(i) - mx) end
  nll = nll + (math.log(s) + mx - v:get(window[t + 1]))
end
nll = nll / shape.n_ctx
local trainer_loss = tr:loss(window)
log("reloaded %s: loss on the first validation window %.5f (trainer: %.5f)", o.out, nll, trainer_loss)
assert(math.abs(nll - trainer_loss) < 1e-3 * math.max(1, trainer_loss),
  "the saved model disagrees with the trainer")
model:close()
tr:close()

if o.smoke then
  local first = mean(first_losses)
  assert(final_train and final_train < first - 1.0,
    string.format("smoke: training loss did not fall enough (%.3f -> %.3f)", first, final_train or 0 / 0))
  log("smoke ok: loss %.3f -> %.3f", first, final_train)
  if out_is_temporary then
    os.execute("rm -rf " .. sh_quote(o.out))
    return
  end
end
require("wb.modelcard").write(o.out)
log("wrote %s: model.safetensors config.json tokenizer.json loss.csv loss.svg summary.json README.md; checkpoint %s", o.out, ckpt)
