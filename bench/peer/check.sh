#!/usr/bin/env bash
# check.sh - the GGUF writer against llama.cpp, the independent reference (docs/gguf.md,
# "Checked against llama.cpp"). Not part of ctest: it needs a llama.cpp build, which the project
# never depends on; without one it says so and exits 0.
#
#   bench/peer/check.sh [WORKBENCH]        (run from the source root)
#   LLAMA_CPP=/path/to/llama.cpp           source tree with build/bin (default /work/peer/llama.cpp)
#
# For TinyLM and random Llama / Llama-3-scaled / Qwen2 / Phi-3 checkpoints, every GGUF type the
# writer makes: the file loads in llama.cpp, token ids agree on bench/peer/strings.txt, and the
# logits of a prompt and 8 greedy steps agree (bench/peer/compare.lua prints max |diff|).
set -euo pipefail
WB=${1:-build/workbench}
LLAMA_CPP=${LLAMA_CPP:-/work/peer/llama.cpp}
LIBDIR=$LLAMA_CPP/build/bin
if [[ ! -f $LLAMA_CPP/include/llama.h || ! -e $LIBDIR/libllama.so ]]; then
  echo "check.sh: no llama.cpp build at $LLAMA_CPP (set LLAMA_CPP): skipped"
  exit 0
fi
[[ -x $WB ]] || { echo "check.sh: no workbench at $WB" >&2; exit 2; }
WORK=${WORK:-$(mktemp -d /tmp/wb_peer_check_XXXXXX)}
mkdir -p "$WORK/out"
PROBE=$WORK/llama_probe
cc -O2 -o "$PROBE" bench/peer/llama_probe.c -I"$LLAMA_CPP/include" -I"$LLAMA_CPP/ggml/include" \
   -L"$LIBDIR" -lllama -lggml -lggml-base -Wl,-rpath,"$LIBDIR"
"$WB" bench/peer/make_fixtures.lua "$WORK/fx" >/dev/null
echo "llama.cpp $(cat "$LLAMA_CPP/COMMIT" 2>/dev/null || echo '(commit unknown)'), cache F32"
for model in models/tinylm-base "$WORK/fx/llama" "$WORK/fx/llama3" "$WORK/fx/qwen2" "$WORK/fx/phi3" \
             "$WORK/fx/qwen2-tok" "$WORK/fx/llama3-tok"; do
  base=$(basename "$model")
  for t in f32 f16 bf16 q8_0 q4_0; do
    g=$WORK/out/$base-$t.gguf
    # general.name: llama.cpp keys Phi-3 token fix-ups (which need "</s>") on a name with "phi3"
    "$WB" -e "wb.load('$model'):save_gguf('$g', {type = '$t', name = 'peer-check'})"
    w=as_stored
    [[ $t == q8_0 || $t == q4_0 ]] && w=$t
    strs=
    [[ $t == f32 ]] && strs=bench/peer/strings.txt
    "$WB" bench/peer/compare.lua "$PROBE" "$model" "$g" "$w" $strs
  done
done
[[ -n ${KEEP:-} ]] || rm -rf "$WORK"
