#!/usr/bin/env bash
# make_tinylm_q4_k_m.sh - tinylm-q4_k_m.gguf: the shipped TinyLM as llama.cpp's Q4_K_M, made from
# the very weights the workbench ships, for the Q4_K_M row of scripts/quantization.lua and its
# test. Needs a llama.cpp build only to regenerate: the tests that read the file never run it.
#
#   tests/vectors/gguf/make_tinylm_q4_k_m.sh [WORKBENCH]      (from the source root)
#   LLAMA_CPP=/path/to/llama.cpp  (source tree with build/bin; default /work/peer/llama.cpp)
#
# 1. The workbench writes models/tinylm-base (F32 safetensors) as an F32 GGUF (model:save_gguf).
# 2. llama-quantize makes Q4_K_M of that F32 file (so the two hold the same weights).
# 3. tinylm-q4_k_m.gguf.json records the SHA-256 of the model.safetensors it came from (the
#    lesson test checks it against the shipped file: retraining TinyLM means rerunning this),
#    the llama.cpp commit, and the type llama-quantize chose for each tensor. TinyLM's rows are
#    128 values wide, and the K types need multiples of 256, so most matrices fall back to
#    Q5_0 / Q5_1 / Q8_0 (only ffn_down, 512 wide, is Q4_K / Q6_K): the file is what
#    llama-quantize really makes of a model this narrow.
set -euo pipefail
WB=${1:-build/workbench}
LLAMA_CPP=${LLAMA_CPP:-/work/peer/llama.cpp}
BIN=$LLAMA_CPP/build/bin
[[ -x $BIN/llama-quantize ]] || { echo "make_tinylm_q4_k_m.sh: no llama.cpp build at $LLAMA_CPP" >&2; exit 2; }
OUT=tests/vectors/gguf
WORK=$(mktemp -d /tmp/wb_tinylm_q4km_XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SRC=models/tinylm-base
"$WB" -e "wb.load('$SRC'):save_gguf('$WORK/tinylm-f32.gguf', {name = 'tinylm-base'})"
f=$OUT/tinylm-q4_k_m.gguf
"$BIN/llama-quantize" "$WORK/tinylm-f32.gguf" "$f" Q4_K_M 1 > "$WORK/quantize.log" 2>&1
COMMIT=$(cat "$LLAMA_CPP/COMMIT" 2>/dev/null || git -C "$LLAMA_CPP" rev-parse HEAD 2>/dev/null || echo unknown)
"$WB" -e "
  local h = wb.sha256(); h:update(assert(wb.read_file('$SRC/model.safetensors'))); local sha = h:hex()
  local types, name = {}, nil
  for line in io.lines('$WORK/quantize.log') do -- the type llama-quantize chose for each tensor
    local n = line:match('%] +([%w_.]+) +%- ')
    if n then name = n end
    local to = line:match('converting to ([%w_]+)') or (n and line:match('type = +([%w_]+), +size'))
    if name and to then types[name] = to:upper(); name = nil end
  end
  wb.write_file('$f.json', wb.json.encode({
    file = 'tinylm-q4_k_m.gguf', made_by = 'llama-quantize Q4_K_M of the F32 GGUF model:save_gguf wrote from $SRC',
    llama_cpp = '$COMMIT', source = '$SRC/model.safetensors', source_sha256 = sha,
    tensor_types = types }, { indent = true }) .. '\n')"
echo "$f $(stat -c %s "$f") bytes"
