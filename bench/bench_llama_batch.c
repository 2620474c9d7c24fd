/* bench_llama_batch.c - aggregate decode throughput of the Llama-family forward over B
 * sequences stepped together, on the Qwen2.5-0.5B-shaped random BF16 model of bench_llama.c
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

enum { V = 151936, C = 896, L = 24, NH = 14, NKV = 2, HD = 64, F = 4864, PROMPT = 44 };

static uint64_t rng = 88172645463325252ull;
static inline uint32_t xr(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* uniform in [-s, s) rounded to BF16 */
static uint16_t rbf(float s) {
    float x = ((float)(xr() >> 8) * (1.0f / (1 << 24)) * 2.0f - 1.0f) * s;
    return wb_f32_to_bf16(x);
}

static int write_model(const char *dir, const char *tokenizer) {
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fprintf(f, "{\"model_type\":\"qwen2\",\"vocab_size\":%d,\"hidden_size\":%d,"
               "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"max_position_embeddings\":32768,"
               "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,"
               "\"hidden_act\":\"silu\",\"use_sliding_window\":false,\"sliding_window\":32768}",
            V, C, F, L, NH, NKV);
    fclose(f);
    /* tensors: name, rows, cols (0: vector), scale */
    int n = 0;
    wb_tensor_view *tv = calloc(3 + 12 * L, sizeof *tv);
    char (*names)[96] = calloc(3 + 12 * L, sizeof *names);
    void **bufs = calloc(3 + 12 * L, sizeof *bufs);
#define T(nm, r, c, s)                                                                           \
    do {                                                                                          \
        size_t ne_ = (size_t)(r) * (size_t)((c) ? (c) : 1);                                       \
        uint16_t *b_ = malloc(ne_ * 2);                                                           \
        for (size_t i_ = 0; i_ < ne_; i_++) b_[i_] = (s) < 0 ? wb_f32_to_bf16(1.0f) : rbf(s);     \
        snprintf(names[n], 96, "%s", nm);                                                         \
        tv[n] = (wb_tensor_view){.name = names[n], .dtype = WB_BF16, .ndim = (c) ? 2 : 1,         \
                                 .shape = {(r), (c)}, .data = b_, .nbytes = ne_ * 2};             \
        bufs[n++] = b_;                                                                           \
    } while (0)
    char nm[96];
    T("model.embed_tokens.weight", V, C, 0.05f);
    for (int l = 0; l < L; l++) {
#define LT(suffix, r, c, s)                                                                      \
    do {                                                                                          \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);                                 \
        T(nm, r, c, s);                                                                           \
    } while (0)
        LT("input_layernorm.weight", C, 0, -1);
        LT("self_attn.q_proj.weight", NH * HD, C, 0.05f);
        LT("self_attn.q_proj.bias", NH * HD, 0, 0.05f);
        LT("self_attn.k_proj.weight", NKV * HD, C, 0.05f);
        LT("self_attn.k_proj.bias", NKV * HD, 0, 0.05f);
        LT("self_attn.v_proj.weight", NKV * HD, C, 0.05f);
        LT("self_attn.v_proj.bias", NKV * HD, 0, 0.05f);
        LT("self_attn.o_proj.weight", C, NH * HD, 0.05f);
        LT("post_attention_layernorm.weight", C, 0, -1);
        LT("mlp.gate_proj.weight", F, C, 0.05f);
        LT("mlp.up_proj.weight", F, C, 0.05f);
        LT("mlp.down_proj.weight", C, F, 0.03f);
#undef LT
    }
    T("model.norm.weight", C, 0, -1);
#undef T
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    wb_err err = {0};
    wb_status s = wb_safetensors_write(path, tv, n, NULL, 0, &err);
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(tv);
    free(names);
    if (s) {
        fprintf(stderr, "bench_llama: %s\n", err.msg);
        return -1;
    }
    /* tokenizer: any Qwen2-style tokenizer.json with at most V ids will do */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *in = fopen(tokenizer, "rb"), *out = fopen(path, "wb");
    if (!in || !out) {
        if (in) fclose(in);
        if (out) fclose(out);
        return -1;
    }
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
    fclose(in);
    fclose(out);
    return 0;
}

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
