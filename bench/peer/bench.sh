#!/usr/bin/env bash
# bench.sh - the workbench and llama.cpp side by side on the same weights (docs/performance.md,
# "Side by side with llama.cpp"). Not part of ctest; without a llama.cpp build it says so and
# exits 0.
#
#   bench/peer/bench.sh [ROUNDS=5] [REPS=3]          (from the source root, after a Release build)
#   LLAMA_CPP=/path/to/llama.cpp   source tree with build/bin/llama-bench (default /work/peer/llama.cpp)
#   WB_BUILD=build                 the workbench build directory
#   MODELS="qwen tinylm"           which models (also qwen1k); TYPES="bf16 f32 q8_0 q4_0 q4_k_m"; THREADS="1 2"
#                                  (also q3_k_m, q2_k, iq4_xs, iq4_nl, q5_k_m: llama-quantize's)
#   TABLE_ONLY=1                   print the table of the results already in $WORK, run nothing
#
# Models: bench_llama's Qwen2.5-0.5B-shaped random BF16 checkpoint (qwen: bench_peer_fixture writes
# it), the fixture's wide shape (qwen1k: hidden 1024, 28 layers, MLP 3072, whose Q4_K_M is Q4_K /
# Q6_K as a download of a 256-multiple-wide model is: bench_peer_fixture_wide) and TinyLM. The workbench loads the directory (bf16: as stored; f32: compute_f32; q8_0/q4_0:
# quantized at load); llama.cpp gets the GGUF the workbench writes of it in the same type
# (model:save_gguf), so both run exactly the same weights; q4_k_m is llama.cpp's own llama-quantize
# of the F32 GGUF, and both programs load that file (a Q4_K_M download's mix of types: at these
# widths mostly the fallback Q5_0, which the workbench reads natively since Session 10). Tests, as llama-bench names them:
# pp44 and pp268 (TinyLM: pp44, pp96, its context being 128) prefill into an empty cache, tg32 =
# ms per token of 32 decodes. Each round runs every (model, type, threads) once in each program,
# alternating which goes first; a run is a fresh process reporting the median of REPS
# repetitions after a warm-up. The table gives per test the median over rounds and the min-max
# spread, and the ratio workbench / llama.cpp of the medians (< 1: the workbench is faster).
set -euo pipefail
ROUNDS=${1:-5}
REPS=${2:-3}
LLAMA_CPP=${LLAMA_CPP:-/work/peer/llama.cpp}
WB_BUILD=${WB_BUILD:-build}
MODELS=${MODELS:-qwen tinylm}
TYPES=${TYPES:-bf16 f32 q8_0 q4_0 q4_k_m}
THREADS=${THREADS:-1 2}
LB=$LLAMA_CPP/build/bin/llama-bench
if [[ ! -x $LB ]]; then
  echo "bench.sh: no llama-bench at $LB (set LLAMA_CPP): skipped"
  exit 0
fi
WB=$WB_BUILD/workbench
[[ -x $WB && -x $WB_BUILD/bench/bench_peer_fixture ]] || { echo "bench.sh: build the workbench first ($WB_BUILD)" >&2; exit 2; }
WORK=${WORK:-/tmp/wb_peer_bench}
mkdir -p "$WORK"
RES=$WORK/results.txt

# the types llama-quantize makes from the F32 GGUF (both programs then load that file)
llama_quantized() { [[ " q4_k_m q5_k_m q3_k_m q2_k iq4_xs iq4_nl " == *" $1 "* ]]; }
model_dir() { [[ $1 == qwen* ]] && echo "$WORK/$1" || echo models/tinylm-base; }
tests_of() { [[ $1 == qwen* ]] && echo "44,268" || echo "44,96"; }
fixture_of() { [[ $1 == qwen1k ]] && echo bench_peer_fixture_wide || echo bench_peer_fixture; }

if [[ -z ${TABLE_ONLY:-} ]]; then
: > "$RES"
# the weights, once: the checkpoint, then one GGUF per type written by the workbench
for model in $MODELS; do
  dir=$(model_dir "$model")
  if [[ $model == qwen* && ! -f $dir/model.safetensors ]]; then
    mkdir -p "$dir"
    "$WB_BUILD/bench/$(fixture_of "$model")" "$dir"
  fi
  for t in $TYPES; do
    g=$WORK/$model-$t.gguf
    [[ -f $g ]] && continue
    if llama_quantized "$t"; then
      f=$WORK/$model-f32.gguf
      [[ -f $f ]] || "$WB" -e "wb.load('$dir'):save_gguf('$f', {type = 'f32', name = 'peer-bench-$model'})"
      "$LLAMA_CPP/build/bin/llama-quantize" "$f" "$g" "${t^^}" > "$WORK/quantize-$model-$t.log" 2>&1 ||
        { echo "bench.sh: llama-quantize failed (see $WORK/quantize-$model-$t.log)" >&2; exit 2; }
    else
      "$WB" -e "wb.load('$dir'):save_gguf('$g', {type = '$t', name = 'peer-bench-$model'})"
    fi
  done
done

run_wb() { # model type threads -> lines "test ms" (llama-quantize's types: the GGUF itself)
  local src; src=$(model_dir "$1")
  if llama_quantized "$2"; then src=$WORK/$1-$2.gguf; fi
  "$WB" bench/peer/wb_time.lua "$src" "$2" "$3" "$REPS" |
    awk -v m="$1" -v t="$2" -v n="$3" '{ print m, t, n, $1, "workbench", $2 }' >> "$RES"
}
run_llama() { # the CSV header names the columns
  "$LB" -m "$WORK/$1-$2.gguf" -p "$(tests_of "$1")" -n 32 -t "$3" -r "$REPS" -o csv 2>/dev/null |
    awk -F, -v m="$1" -v t="$2" -v n="$3" '
      { for (i = 1; i <= NF; i++) gsub(/"/, "", $i) }
      NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      { np = $c["n_prompt"]; ng = $c["n_gen"]; ns = $c["avg_ns"]
        print m, t, n, (np > 0 ? "pp" np : "tg" ng), "llama.cpp", (ng > 0 ? ns / 1e6 / ng : ns / 1e6) }' >> "$RES"
}

echo "uptime before: $(uptime)"
for r in $(seq 1 "$ROUNDS"); do
  for model in $MODELS; do
    for t in $TYPES; do
      for n in $THREADS; do
        if (( r % 2 )); then run_wb "$model" "$t" "$n"; run_llama "$model" "$t" "$n"
        else run_llama "$model" "$t" "$n"; run_wb "$model" "$t" "$n"; fi
      done
    done
  done
  echo "round $r/$ROUNDS done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
echo "uptime after: $(uptime)"
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores; llama.cpp $(cat "$LLAMA_CPP/COMMIT" 2>/dev/null || echo '(commit unknown)')"
echo
echo "| model | weights | threads | test | workbench ms (spread) | llama.cpp ms (spread) | ratio wb/llama.cpp |"
echo "|---|---|---|---|---|---|---|"
sort -k1,1 -k2,2 -k3,3n -k4,4V "$RES" | awk '
  function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
                                  return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
  function f(x) { return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.3g", x) }
  function emit(   mw, ml, i) {
    if (key == "") return
    mw = med(w, nw); ml = med(l, nl)
    printf "| %s | %s | %s | %s | %s (%s-%s) | %s (%s-%s) | %.2f |\n", km, kt, kn, ks,
           f(mw), f(w[1]), f(w[nw]), f(ml), f(l[1]), f(l[nl]), mw / ml
  }
  { k = $1 " " $2 " " $3 " " $4
    if (k != key) { emit(); key = k; km = $1; kt = $2; kn = $3; ks = $4; nw = 0; nl = 0; delete w; delete l }
    if ($5 == "workbench") w[++nw] = $6; else l[++nl] = $6 }
  END { emit() }'
