-- wb.modelcard: write a model directory's README.md (its model card) from summary.json and
-- config.json, so the figures in the card are always the ones the training run measured.
--
--   require("wb.modelcard").write("models/tinylm-base")
local wb = require("wb")

local M = {}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function fmt_int(n)
  local s = tostring(math.tointeger(n) or n)
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

function M.render(summary, config)
  local p = summary.params
  local lines = {
    "# TinyLM (tinylm-base)",
    "",
    "A " .. fmt_int(summary.parameters) .. "-parameter GPT-2 trained by workbench on its own " ..
    "Brightlane customer-support corpus. It is a lab instrument, not an assistant: it memorised " ..
    "a templated corpus, so it is very sure of itself on most support prompts and genuinely " ..
    "unsure on a few (which question follows `Customer (Ana): Hi,`), which is what the lessons " ..
    "need to show how decoding settings act on peaked and flat distributions.",
    "",
    "## Architecture",
    "",
    "| | |", "|---|---|",
    ("| layout | Hugging Face `GPT2LMHeadModel` (Conv1D `[in, out]` weights, tied `lm_head`) |"),
    ("| vocabulary | %d (byte-level BPE, `<|endoftext|>` = %d) |"):format(config.vocab_size,
      config.eos_token_id),
    ("| context | %d tokens, learned positions |"):format(config.n_positions),
    ("| width / layers / heads | %d / %d / %d (head size %d) |"):format(config.n_embd,
      config.n_layer, config.n_head, config.n_embd // config.n_head),
    ("| MLP | %d, tanh-approximated GELU (`gelu_new`) |"):format(p.n_inner),
    ("| normalisation | pre-LayerNorm, eps %g |"):format(config.layer_norm_epsilon),
    ("| parameters | %s (tied embedding counted once) |"):format(fmt_int(summary.parameters)),
    "| weights | `model.safetensors`, F32 |",
    "",
    "## Data",
    "",
    ("The training text is a draw of the Brightlane corpus (`lua/wb/corpus.lua`, seed %d): " ..
     "%s conversations and %s triage label records (plus a quarter as many JSON triage records), " ..
     "%s bytes, %s tokens; the validation split (%s tokens) shares the templates but not the " ..
     "documents. See `docs/corpus.md` for the templates and the properties the lessons rely on.")
      :format(summary.corpus_seed, fmt_int(summary.corpus_conversations or 0),
              fmt_int(summary.corpus_tickets or 0), fmt_int(summary.corpus_bytes or 0),
              fmt_int(summary.train_tokens), fmt_int(summary.val_tokens)),
    "",
    "## Training",
    "",
    "    workbench scripts/train_tinylm.lua",
    "",
    ("AdamW (lr %g peak, %d warm-up steps, cosine to %g; betas %g/%g; weight decay %g on " ..
     "matrices; gradient clipping at %g), batches of %d random windows of %d tokens, %d steps " ..
     "(%.1f passes over the training tokens), seed %d, %d thread(s), %.1f minutes here " ..
     "(%s).")
      :format(p.lr, p.warmup_steps, p.min_lr, p.beta1, p.beta2, p.weight_decay, p.grad_clip,
              p.batch_size, p.seq_len, summary.steps, summary.epochs, p.seed, summary.threads,
              (summary.elapsed_s or 0) / 60, summary.blas),
    "",
    "## Figures (from this run's `loss.csv`; plot: `loss.svg`)",
    "",
    ("- Validation loss reached its minimum, **%.4f**, at step **%d** of %d."):format(
      summary.min_val_loss, summary.min_val_step, summary.steps),
    ("- At the end: training loss %.4f (%s), validation loss %.4f."):format(
      summary.final_train_loss, summary.final_train_loss_note, summary.final_val_loss),
    summary.min_val_step < 0.6 * summary.steps and summary.final_train_loss < summary.min_val_loss
      and ("- Validation loss stops improving at %d%% of the run while training loss keeps " ..
           "falling: the model memorises its training documents, as the course's TinyLM did.")
          :format(math.floor(100 * summary.min_val_step / summary.steps + 0.5))
      or "- This run does not show memorisation: validation loss was still improving late in the run.",
    "",
    "![train and validation loss](loss.svg)",
    "",
    "## Files",
    "",
    "`config.json`, `tokenizer.json`, `model.safetensors` in the Hugging Face layout (tensor names,",
    "shapes and Conv1D orientation as `GPT2LMHeadModel.save_pretrained` writes them, the tied head",
    "left out as it does; `tokenizer.json` in the format the `tokenizers` library reads, checked",
    "with it on the project's test tokenizers), `loss.csv`, `loss.svg`, `summary.json`.",
    "",
  }
  return table.concat(lines, "\n")
end

function M.write(dir)
  local summary = wb.json.decode(read(dir .. "/summary.json"))
  local config = wb.json.decode(read(dir .. "/config.json"))
  local text = M.render(summary, config)
  -- atomic and checked: a full disk leaves the old README.md and raises an error naming it
  wb.write_file(dir .. "/README.md", text)
  return text
end

return M
