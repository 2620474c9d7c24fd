/* bench_tokenizer.c - encoding throughput (MB/s) of the BPE tokenizer over ~1 MB of generated
 * mixed-script text, and BPE training time.
 *
 *   bench_tokenizer [tokenizer.json] [runs]
 * Without a file it uses tests/vectors/small_tokenizer.json (run from the source root) and also
 * trains a 2048-id tokenizer on 4 MB to time wb_bpe_train. */
#include "../tests/c/tokenizer_textgen.h"
#include "bench_args.h"
#include "wb_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int bench_encode(const wb_tokenizer *tok, const char *label, const char *text, size_t n,
                        int runs) {
    double *mbs = malloc((size_t)runs * sizeof *mbs);
    size_t n_ids = 0;
    for (int r = 0; r < runs; r++) {
        int32_t *ids = NULL;
        wb_err err = {0};
        double t0 = wb_clock_ms();
        if (wb_tokenizer_encode(tok, text, n, &ids, &n_ids, &err) != WB_OK) {
            fprintf(stderr, "encode: %s\n", err.msg);
            free(mbs);
            return 1;
        }
        double ms = wb_clock_ms() - t0;
        mbs[r] = (double)n / 1e6 / (ms / 1e3);
        wb_free(ids);
    }
    qsort(mbs, (size_t)runs, sizeof *mbs, cmp_double);
    printf("| %-28s | %8.2f | %10zu | %8.1f | %8.1f - %-8.1f |\n", label, n / 1e6, n_ids,
           mbs[runs / 2], mbs[0], mbs[runs - 1]);
    free(mbs);
    return 0;
}

int main(int argc, char **argv) {
    bench_args(argc, argv, "[TOKENIZER_JSON=tests/vectors/small_tokenizer.json] [RUNS=9]\n  encode and decode throughput", NULL);
    const char *path = argc > 1 ? argv[1] : "tests/vectors/small_tokenizer.json";
    int runs = argc > 2 ? atoi(argv[2]) : 9;
    if (runs < 1) runs = 1;
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    if (wb_tokenizer_load(path, &tok, &err) != WB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t n;
    char *text = textgen_mixed(1234, 1000000, &n);
    char *one = malloc(n);
    for (size_t i = 0; i < n; i++) one[i] = (char)('a' + (i / 5000) % 3); /* long words */
    printf("tokenizer: %s (%d ids), %d runs\n\n", path, (int)wb_tokenizer_vocab_size(tok), runs);
    printf("| %-28s | %8s | %10s | %8s | %-19s |\n", "input", "MB", "ids", "MB/s med", "MB/s min - max");
    printf("|------------------------------|----------|------------|----------|---------------------|\n");
    int rc = bench_encode(tok, "mixed text (generated)", text, n, runs);
    rc |= bench_encode(tok, "5000-letter words", one, n, runs);
    if (argc <= 1) {
        size_t tn;
        char *train = textgen_mixed(77, 4000000, &tn);
        const char *const sp[] = {"<|endoftext|>"};
        wb_bpe_train_params p = wb_bpe_train_default_params();
        p.vocab_size = 2048;
        p.special_tokens = sp;
        p.n_special_tokens = 1;
        wb_tokenizer *t2 = NULL;
        double t0 = wb_clock_ms();
        if (wb_bpe_train(train, tn, &p, &t2, &err) != WB_OK) {
            fprintf(stderr, "train: %s\n", err.msg);
            rc = 1;
        } else {
            printf("\ntrain: %.1f MB to %d ids in %.0f ms\n", tn / 1e6, (int)wb_tokenizer_vocab_size(t2),
                   wb_clock_ms() - t0);
            rc |= bench_encode(t2, "mixed text, trained 2048", text, n, runs);
        }
        wb_tokenizer_free(t2);
        free(train);
    }
    free(one);
    free(text);
    wb_tokenizer_free(tok);
    return rc;
}
