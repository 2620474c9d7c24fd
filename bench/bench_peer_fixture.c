/* bench_peer_fixture.c - writes bench_llama's Qwen2.5-0.5B-shaped random BF16 checkpoint
 * (bench_qwen2_fixture.h) to a directory, so that bench/peer/bench.sh can hand the same weights
 * to the workbench and, saved as GGUF, to llama.cpp. */
#include "bench_args.h"
#include "bench_qwen2_fixture.h"

#ifdef BENCH_QWEN2_WIDE
#define FIXTURE_SHAPE "wide (hidden 1024, 28 layers, MLP 3072) Qwen2-layout"
#else
#define FIXTURE_SHAPE "Qwen2.5-0.5B-shaped"
#endif

int main(int argc, char **argv) {
    bench_args(argc, argv, "DIR [TOKENIZER]\n  write the " FIXTURE_SHAPE " random BF16 checkpoint "
               "of bench_llama's fixture to DIR (which must exist)", NULL);
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [TOKENIZER]\n", argv[0]);
        return 2;
    }
    const char *tok = argc > 2 ? argv[2] : "tests/vectors/family_qwen2_tokenizer.json";
    if (write_model(argv[1], tok)) {
        fprintf(stderr, "%s: cannot write the model to %s (tokenizer %s)\n", argv[0], argv[1], tok);
        return 1;
    }
    return 0;
}
