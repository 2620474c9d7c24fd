#!/usr/bin/env bash
# make_vectors.sh - the GGUF vectors of this directory, made by llama.cpp's own tools (the
# independent reference; README.md says what each file is for). Needs a llama.cpp build, only
# to regenerate: the tests that read these files never run llama.cpp.
#
#   tests/vectors/gguf/make_vectors.sh [WORKBENCH]      (from the source root)
#   LLAMA_CPP=/path/to/llama.cpp  (source tree with build/bin; default /work/peer/llama.cpp)
#   TYPES="Q5_0 Q5_1"             (the llama-quantize types to make; default all of them)
#
# 1. bench/peer/make_fixtures.lua kquant: a random Llama-shaped checkpoint (1 layer, C = F = 256,
#    4 heads of 64, 2 KV heads, tied head, rope_theta 5e5) with the Llama-3-style tokenizer of
#    tests/vectors/family_llama3_tokenizer.json (611 ids).
# 2. The workbench writes it as an F32 GGUF (model:save_gguf).
# 3. llama-quantize makes Q4_K_M, Q6_K, Q8_0 files, the fallback types Q5_0, Q5_1, Q4_1,
#    Q5_K_M (Q5_K with Q6_K), and the low-bit mixes Q3_K_M, Q2_K, IQ4_NL, IQ4_XS from that file.
# 4. llama.cpp (bench/peer/llama_probe.c, F32 KV cache, 1 thread) tokenizes the prompt and writes
#    the logits of its last position and of 8 greedy steps for each file, and ggml
#    (bench/peer/ggml_dequant.c) the values of its quantized tensors (rows 0 and last, sums):
#    <file>.json.
set -euo pipefail
WB=${1:-build/workbench}
LLAMA_CPP=${LLAMA_CPP:-/work/peer/llama.cpp}
BIN=$LLAMA_CPP/build/bin
[[ -x $BIN/llama-quantize ]] || { echo "make_vectors.sh: no llama.cpp build at $LLAMA_CPP" >&2; exit 2; }
OUT=${OUT:-tests/vectors/gguf}
WORK=$(mktemp -d /tmp/wb_gguf_vectors_XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -o "$WORK/llama_probe" bench/peer/llama_probe.c -I"$LLAMA_CPP/include" \
   -I"$LLAMA_CPP/ggml/include" -L"$BIN" -lllama -lggml -lggml-base -Wl,-rpath,"$BIN"
cc -O2 -o "$WORK/ggml_dequant" bench/peer/ggml_dequant.c -I"$LLAMA_CPP/ggml/include" -L"$BIN" \
   -lggml-base -lggml -Wl,-rpath,"$BIN"
"$WB" bench/peer/make_fixtures.lua "$WORK" kquant >/dev/null
"$WB" -e "wb.load('$WORK/kq-llama'):save_gguf('$WORK/kq-llama-f32.gguf', {name = 'kq-llama'})"
PROMPT="The little robot looked at the sky and said: it's 12 o'clock, time to read!"
printf '%s\n' "$PROMPT" > "$WORK/prompt.txt"
COMMIT=$(cat "$LLAMA_CPP/COMMIT" 2>/dev/null || echo unknown)
for t in ${TYPES:-Q4_K_M Q6_K Q8_0 Q5_0 Q5_1 Q4_1 Q5_K_M Q3_K_M Q2_K IQ4_NL IQ4_XS}; do
  lc=$(echo "$t" | tr 'A-Z' 'a-z')
  f=$OUT/kq-llama-$lc.gguf
  "$BIN/llama-quantize" "$WORK/kq-llama-f32.gguf" "$f" "$t" 1 > "$WORK/quantize-$lc.log" 2>&1
  ids=$("$WORK/llama_probe" "$f" tok "$WORK/prompt.txt" | tr -d '[]')
  "$WORK/llama_probe" "$f" run "$ids" 8 1 > "$WORK/run-$lc.json"
  "$WORK/ggml_dequant" "$f" > "$WORK/dequant-$lc.json"
  "$WB" -e "
    local res = wb.json.decode(wb.read_file('$WORK/run-$lc.json'))
    local deq = wb.json.decode(wb.read_file('$WORK/dequant-$lc.json'))
    local ids = {}
    for i in ('$ids'):gmatch('%d+') do ids[#ids + 1] = tonumber(i) end
    local types = {}
    for line in io.lines('$WORK/quantize-$lc.log') do -- the types llama-quantize chose
      local name, from, to = line:match('%] +([%w_.]+) +%- .-type = +([%w_]+), +converting to ([%w_]+)')
      if not name then name, to = line:match('%] +([%w_.]+) +%- .-type = +([%w_]+), +size') end
      if name then types[name] = to end
    end
    local steps = {}
    for k, s in ipairs(res.steps) do steps[k] = { logits = wb.json.array(s.logits), next = s.next } end
    wb.write_file('$f.json', wb.json.encode({
      file = 'kq-llama-$lc.gguf', made_by = 'llama-quantize $t from the workbench F32 GGUF',
      llama_cpp = '$COMMIT', prompt = [[$PROMPT]], ids = wb.json.array(ids),
      note = 'logits of the prompt\'s last position, then after each greedy token (next); llama.cpp, F32 KV cache, 1 thread',
      tensor_types = types, steps = wb.json.array(steps), dequant = deq }, { indent = true }) .. '\n')"
  echo "$f $(stat -c %s "$f") bytes"
done
