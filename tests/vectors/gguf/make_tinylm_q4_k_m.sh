#!/usr/bin/env bash
# make_tinylm_q4_k_m.sh - tinylm-q4_k_m.gguf: the shipped TinyLM as llama.cpp's Q4_K_M, made from
# the very weights the workbench ships, for the Q4_K_M row of scripts/quantization.lua and its
# test, with llama.cpp's own perplexity / KL report on one text to check the lesson against.
# Needs a llama.cpp build only to regenerate: the tests that read these files never run it.
#
#   tests/vectors/gguf/make_tinylm_q4_k_m.sh [WORKBENCH]      (from the source root)
#   LLAMA_CPP=/path/to/llama.cpp  (source tree with build/bin; default /work/peer/llama.cpp)
#
# 1. The workbench writes models/tinylm-base (F32 safetensors) as an F32 GGUF (model:save_gguf).
# 2. llama-quantize makes Q4_K_M of that F32 file (so the two hold the same weights).
# 3. llama-perplexity scores a text with the F32 file (--kl-divergence-base) and then the Q4_K_M
#    one against it (--kl-divergence): 4 chunks of 128 tokens, 1 thread. The text: the corpus'
#    held-out split (wb.corpus seed 1) without its "<|endoftext|>" lines, because
#    llama-perplexity does not parse special tokens (it would split the marker into pieces the
#    model never saw together, where the workbench's tokenizer gives the one special id).
# 4. tinylm-q4_k_m.gguf.json records the SHA-256 of the model.safetensors it came from (the
#    lesson test checks it against the shipped file: retraining TinyLM means rerunning this),
#    the llama.cpp commit, the type llama-quantize chose for each tensor, and llama-perplexity's
#    figures with the text's SHA-256. TinyLM's rows are 128 values wide and the K types need
#    multiples of 256, so most matrices fall back to Q5_0 / Q5_1 / Q8_0 (only ffn_down, 512
#    wide, is Q4_K / Q6_K): the file is what llama-quantize really makes of a model this narrow.
set -euo pipefail
WB=${1:-build/workbench}
LLAMA_CPP=${LLAMA_CPP:-/work/peer/llama.cpp}
BIN=$LLAMA_CPP/build/bin
[[ -x $BIN/llama-quantize && -x $BIN/llama-perplexity ]] ||
  { echo "make_tinylm_q4_k_m.sh: no llama.cpp build at $LLAMA_CPP" >&2; exit 2; }
OUT=tests/vectors/gguf
WORK=$(mktemp -d /tmp/wb_tinylm_q4km_XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SRC=models/tinylm-base
"$WB" -e "wb.load('$SRC'):save_gguf('$WORK/tinylm-f32.gguf', {name = 'tinylm-base'})"
f=$OUT/tinylm-q4_k_m.gguf
"$BIN/llama-quantize" "$WORK/tinylm-f32.gguf" "$f" Q4_K_M 1 > "$WORK/quantize.log" 2>&1
"$WB" -e "wb.write_file('$WORK/text.txt', (require('wb.corpus').generate({ seed = 1 }).val:gsub('<|endoftext|>\n', '')))"
"$BIN/llama-perplexity" -m "$WORK/tinylm-f32.gguf" -f "$WORK/text.txt" -c 128 -b 128 --chunks 4 -t 1 \
  --kl-divergence-base "$WORK/base.kld" > "$WORK/base.log" 2>&1
"$BIN/llama-perplexity" -m "$f" -c 128 -b 128 --chunks 4 -t 1 \
  --kl-divergence-base "$WORK/base.kld" --kl-divergence > "$WORK/kld.log" 2>&1
COMMIT=$(cat "$LLAMA_CPP/COMMIT" 2>/dev/null || git -C "$LLAMA_CPP" rev-parse HEAD 2>/dev/null || echo unknown)
"$WB" -e "
  local function sha(path) local h = wb.sha256(); h:update(assert(wb.read_file(path))); return h:hex() end
  local types, name = {}, nil
  for line in io.lines('$WORK/quantize.log') do -- the type llama-quantize chose for each tensor
    local n = line:match('%] +([%w_.]+) +%- ')
    if n then name = n end
    local to = line:match('converting to ([%w_]+)') or (n and line:match('type = +([%w_]+), +size'))
    if name and to then types[name] = to:upper(); name = nil end
  end
  local report = wb.read_file('$WORK/kld.log')
  local function num(label) -- the first number after a label of llama-perplexity's report
    local i = assert(report:find(label, 1, true), label)
    return tonumber((assert(report:match(':%s*(%-?[%d.]+)', i), label)))
  end
  local function pm(label) -- the figure after '+-' (the UTF-8 plus-minus sign)
    local i = assert(report:find(label, 1, true), label)
    return tonumber((assert(report:match('\xc2\xb1%s*(%-?[%d.]+)', i), label)))
  end
  wb.write_file('$f.json', wb.json.encode({
    file = 'tinylm-q4_k_m.gguf', made_by = 'llama-quantize Q4_K_M of the F32 GGUF model:save_gguf wrote from $SRC',
    llama_cpp = '$COMMIT', source = '$SRC/model.safetensors', source_sha256 = sha('$SRC/model.safetensors'),
    tensor_types = types,
    llama_perplexity = {
      text = 'wb.corpus seed 1 val split with every <|endoftext|> line removed', text_sha256 = sha('$WORK/text.txt'),
      ctx = 128, chunks = 4, base = 'the F32 GGUF of the same model', threads = 1,
      ppl_q = num('Mean PPL(Q)'), ppl_q_se = pm('Mean PPL(Q)'),
      ppl_base = num('Mean PPL(base)'), ppl_base_se = pm('Mean PPL(base)'),
      kld_mean = num('Mean    KLD'), kld_mean_se = pm('Mean    KLD'), kld_max = num('Maximum KLD'),
      kld_p99 = num('99.0%   KLD'), kld_median = num('Median  KLD'),
      same_top_percent = num('Same top p:'), same_top_se = pm('Same top p:'),
      rms_dp_percent = num('RMS ' .. '\xce\x94p'),
    } }, { indent = true }) .. '\n')"
echo "$f $(stat -c %s "$f") bytes"
