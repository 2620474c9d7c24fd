/* bench_llama_batch.c - aggregate decode throughput of the Llama-family forward over B
 * sequences stepped together, on the Qwen2.5-0.5B-shaped random BF16 model of bench_qwen2_fixture.h
 * (vocab 151936, hidden 896, 24 layers, 14/2 heads of 64, MLP 4864; about 1 GB written to a
 * temporary directory and deleted at the end).
 *
 * Each repeat runs B = 1, 2, 4, 8, 16 in turn (interleaved, so a shared machine's load falls on
 * every B alike): B sessions each prefilled with its own 8-token prompt, then NSTEP decode steps
 * of all B rows through one wb_batch_forward (one stacked pass: weights read once per step).
 * Printed: tokens/s = B * NSTEP / time as median [min - max] over repeats, and the ratio to
 * B = 1 as the median of the per-repeat ratios (same run).
 *
 *   bench_llama_batch [repeats] [steps]        (run from the source root, for the tokenizer)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bench_args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wb_batch.h"
#include "wb_model.h"

#include "bench_qwen2_fixture.h"

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void med3(double *v, int n, double *med, double *lo, double *hi) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *lo = v[0], *hi = v[n - 1];
}

enum { NB = 5, BMAX = 16, PLEN = 8 };

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=5] [STEPS=8]\n  batched Llama decode: aggregate tokens/s at B = 1..16",
               NULL);
    int reps = argc > 1 ? atoi(argv[1]) : 5, steps = argc > 2 ? atoi(argv[2]) : 8;
    if (reps < 3) reps = 3;
    if (steps < 2) steps = 2;
    const char *tok = getenv("WB_BENCH_TOKENIZER");
    if (!tok) tok = "tests/vectors/family_qwen2_tokenizer.json";
    char dir[] = "/tmp/wb_bench_llama_batch_XXXXXX";
    if (!mkdtemp(dir) || write_model(dir, tok)) {
        fprintf(stderr, "bench_llama_batch: cannot write the model (tokenizer %s)\n", tok);
        return 1;
    }
    wb_model_params p = wb_model_default_params();
    p.n_ctx = 128;
    wb_model *m = NULL;
    wb_err err = {0};
    wb_status ls = wb_model_load_ex(dir, &p, &m, &err);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
    if (ls) {
        fprintf(stderr, "bench_llama_batch: %s\n", err.msg);
        return 1;
    }
    printf("Qwen2.5-0.5B-shaped random BF16 model, %d threads, %d steps, %d repeats\n",
           wb_threads_get(), steps, reps);
    const int Bs[NB] = {1, 2, 4, 8, 16};
    double *tps = calloc((size_t)NB * reps, sizeof *tps), *ratio = calloc((size_t)NB * reps, sizeof *ratio);
    wb_batch *bt = NULL;
    if (wb_batch_new(m, &bt, &err)) return 1;
    float *logits = malloc((size_t)BMAX * V * sizeof *logits);
    wb_session *s[BMAX] = {0};
    for (int i = 0; i < BMAX; i++)
        if (wb_session_new(m, 128, &s[i], &err)) return 1;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        for (int bi = 0; bi < NB; bi++) {
            const int B = Bs[bi];
            int32_t toks[BMAX], prompt[PLEN];
            const int32_t *ids[BMAX];
            int counts[BMAX];
            for (int i = 0; i < B; i++) {
                wb_session_reset(s[i]);
                for (int t = 0; t < PLEN; t++) prompt[t] = (int32_t)(17 + 13 * t + 31 * i) % 600;
                if (wb_session_prefill(s[i], prompt, PLEN, NULL, 0, &err)) return 1;
                toks[i] = (int32_t)(5 + 7 * i);
                ids[i] = &toks[i];
                counts[i] = 1;
            }
            const double a = wb_clock_ms();
            for (int k = 0; k < steps; k++) {
                if (wb_batch_forward(bt, s, ids, counts, B, logits, &err)) {
                    fprintf(stderr, "bench_llama_batch: %s\n", err.msg);
                    return 1;
                }
                for (int i = 0; i < B; i++) toks[i] = (int32_t)((toks[i] * 31 + k) % 600);
            }
            const double ms = wb_clock_ms() - a;
            if (r >= 0) tps[bi * reps + r] = B * steps / (ms / 1000.0);
        }
        if (r >= 0)
            for (int bi = 0; bi < NB; bi++) ratio[bi * reps + r] = tps[bi * reps + r] / tps[r];
    }
    printf("| B | tokens/s median [min - max] | x B=1 (median of per-repeat ratios) [min - max] |\n|---|---|---|\n");
    for (int bi = 0; bi < NB; bi++) {
        double md, lo, hi, rm, rl, rh;
        med3(tps + bi * reps, reps, &md, &lo, &hi);
        med3(ratio + bi * reps, reps, &rm, &rl, &rh);
        printf("| %d | %.1f [%.1f - %.1f] | %.2f [%.2f - %.2f] |\n", Bs[bi], md, lo, hi, rm, rl, rh);
    }
    for (int i = 0; i < BMAX; i++) wb_session_free(s[i]);
    wb_batch_free(bt);
    wb_model_free(m);
    free(logits), free(tps), free(ratio);
    return 0;
}
