/* bench_peer_fixture_wide.c - bench_peer_fixture with the fixture's wide shape (hidden 1024, 28
 * layers, MLP 3072: bench_qwen2_fixture.h BENCH_QWEN2_WIDE), bench/peer/bench.sh's qwen1k model,
 * whose Q4_K_M holds the K types. */
#define BENCH_QWEN2_WIDE 1
#include "bench_peer_fixture.c"
