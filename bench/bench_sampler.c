/* bench_sampler.c - sampling overhead per token (wb_sampler_sample) at vocab 2048 and 150,000,
 * random Gaussian logits, for greedy, plain temperature, top_p alone and the full parameter set;
 * a full sort of the vocabulary as the baseline that partial selection avoids; and, in the same
 * run, a decode step of a random TinyLM-sized GPT-2 (vocab 2048, ctx 128, C 128, 4 layers) so
 * the overhead is stated as a share of a step. Figures: median [p10 - p90] over repeats; the
 * ratio is also given by minimums, the cleanest estimate on a shared machine.
 *
 *   bench_sampler [repeats at 2048 (default 3000)]
 */
#include <math.h>
#include "bench_args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wb_model.h"
#include "wb_sampler.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double med, p10, p90, min;
} stats;

static stats summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stats s = {v[n / 2], v[n / 10], v[(n * 9) / 10], v[0]};
    return s;
}

static void gaussian(float *z, int V, uint64_t seed, double scale) {
    wb_rng r;
    wb_rng_seed(&r, seed);
    for (int i = 0; i < V; i++) {
        double u1 = wb_rng_uniform(&r) + 1e-12, u2 = wb_rng_uniform(&r);
        z[i] = (float)(scale * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* Microseconds per wb_sampler_sample call; logits change every few calls so caches stay honest. */
static stats time_sampler(const wb_sampling_params *sp, int V, int reps, const int32_t *gen,
                          size_t n_gen) {
    enum { NL = 4 };
    float *z[NL];
    for (int k = 0; k < NL; k++) {
        z[k] = malloc((size_t)V * sizeof(float));
        gaussian(z[k], V, 100 + (uint64_t)k, 3.0);
    }
    wb_sampler *s = NULL;
    wb_err err = {0};
    if (wb_sampler_new(sp, V, &s, &err) != WB_OK) {
        fprintf(stderr, "bench_sampler: %s\n", err.msg);
        exit(1);
    }
    double *t = malloc((size_t)reps * sizeof *t);
    int32_t id;
    for (int i = 0; i < reps / 10 + 1; i++) /* warm-up */
        wb_sampler_sample(s, z[i % NL], gen, n_gen, NULL, &id, NULL, &err);
    for (int i = 0; i < reps; i++) {
        double t0 = wb_clock_ms();
        wb_sampler_sample(s, z[i % NL], gen, n_gen, NULL, &id, NULL, &err);
        t[i] = (wb_clock_ms() - t0) * 1000.0;
    }
    stats st = summarize(t, reps);
    free(t);
    wb_sampler_free(s);
    for (int k = 0; k < NL; k++) free(z[k]);
    return st;
}

typedef struct pair {
    float p;
    int32_t id;
} pair;
static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

/* The baseline partial selection avoids: softmax, then qsort of the whole vocabulary. */
static stats time_full_sort(int V, int reps) {
    float *z = malloc((size_t)V * sizeof *z);
    pair *p = malloc((size_t)V * sizeof *p);
    gaussian(z, V, 100, 3.0);
    double *t = malloc((size_t)reps * sizeof *t);
    for (int i = 0; i < reps; i++) {
        double t0 = wb_clock_ms();
        float m = z[0];
        for (int k = 1; k < V; k++) m = z[k] > m ? z[k] : m;
        for (int k = 0; k < V; k++) p[k].p = expf(z[k] - m), p[k].id = k;
        qsort(p, (size_t)V, sizeof *p, cmp_pair);
        t[i] = (wb_clock_ms() - t0) * 1000.0;
    }
    stats st = summarize(t, reps);
    free(t);
    free(p);
    free(z);
    return st;
}

/* ---- a random TinyLM-shaped model for the decode-step reference ---------------------------- */

enum { MV = 2048, MT = 128, MC = 128, ML = 4 };

static uint64_t xs = 88172645463325252ULL;
static float frand(void) {
    xs ^= xs << 13, xs ^= xs >> 7, xs ^= xs << 17;
    return (float)((xs >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static int write_model(const char *dir) {
    char path[512];
    wb_err err = {0};
    wb_tokenizer *tok = NULL;
    wb_bpe_train_params bp = wb_bpe_train_default_params();
    static const char *const special[] = {"<|endoftext|>"};
    const char *text = "Customer (Ana): Hi, how do I export my board data? Agent: Export, CSV.";
    bp.vocab_size = 300;
    bp.special_tokens = special;
    bp.n_special_tokens = 1;
    if (wb_bpe_train(text, strlen(text), &bp, &tok, &err) != WB_OK) return 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    wb_status st = wb_tokenizer_save(tok, path, &err);
    wb_tokenizer_free(tok);
    if (st != WB_OK) return 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"model_type\":\"gpt2\",\"vocab_size\":%d,\"n_positions\":%d,\"n_embd\":%d,"
               "\"n_layer\":%d,\"n_head\":4,\"n_inner\":null,\"layer_norm_epsilon\":1e-05,"
               "\"activation_function\":\"gelu_new\",\"tie_word_embeddings\":true}\n",
            MV, MT, MC, ML);
    fclose(f);
    wb_tensor_view v[64];
    char names[64][48];
    float *bufs[64];
    int n = 0;
    struct {
        const char *name;
        int d0, d1;
        float off;
    } per_layer[] = {{"ln_1.weight", MC, 0, 1}, {"ln_1.bias", MC, 0, 0},
                     {"attn.c_attn.weight", MC, 3 * MC, 0}, {"attn.c_attn.bias", 3 * MC, 0, 0},
                     {"attn.c_proj.weight", MC, MC, 0}, {"attn.c_proj.bias", MC, 0, 0},
                     {"ln_2.weight", MC, 0, 1}, {"ln_2.bias", MC, 0, 0},
                     {"mlp.c_fc.weight", MC, 4 * MC, 0}, {"mlp.c_fc.bias", 4 * MC, 0, 0},
                     {"mlp.c_proj.weight", 4 * MC, MC, 0}, {"mlp.c_proj.bias", MC, 0, 0}};
    for (int k = -2; k < ML * 12 + 2; k++) {
        const char *nm;
        int d0, d1;
        float off = 0;
        if (k == -2) nm = "wte.weight", d0 = MV, d1 = MC;
        else if (k == -1) nm = "wpe.weight", d0 = MT, d1 = MC;
        else if (k == ML * 12) nm = "ln_f.weight", d0 = MC, d1 = 0, off = 1;
        else if (k == ML * 12 + 1) nm = "ln_f.bias", d0 = MC, d1 = 0;
        else {
            snprintf(names[n], sizeof names[n], "h.%d.%s", k / 12, per_layer[k % 12].name);
            nm = NULL;
            d0 = per_layer[k % 12].d0, d1 = per_layer[k % 12].d1, off = per_layer[k % 12].off;
        }
        if (nm) snprintf(names[n], sizeof names[n], "%s", nm);
        size_t cnt = (size_t)d0 * (size_t)(d1 ? d1 : 1);
        bufs[n] = malloc(cnt * sizeof(float));
        for (size_t q = 0; q < cnt; q++) bufs[n][q] = off + 0.1f * frand();
        v[n] = (wb_tensor_view){names[n], WB_F32, d1 ? 2 : 1, {d0, d1}, bufs[n], cnt * 4};
        n++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st = wb_safetensors_write(path, v, n, NULL, 0, &err);
    for (int i = 0; i < n; i++) free(bufs[i]);
    return st == WB_OK;
}

static stats time_decode(int reps) {
    char tmpl[] = "/tmp/wb_bench_sampler_XXXXXX";
    char *dir = mkdtemp(tmpl);
    stats none = {NAN, NAN, NAN, NAN};
    if (!dir || !write_model(dir)) return none;
    wb_model *m = NULL;
    wb_session *s = NULL;
    wb_err err = {0};
    if (wb_model_load(dir, &m, &err) != WB_OK || wb_session_new(m, 0, &s, &err) != WB_OK) {
        fprintf(stderr, "bench_sampler: %s\n", err.msg);
        wb_model_free(m);
        return none;
    }
    float *logits = malloc(MV * sizeof *logits);
    double *t = malloc((size_t)reps * sizeof *t);
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) prompt[i] = 40 + i;
    int k = 0;
    while (k < reps) {
        wb_session_reset(s);
        wb_session_prefill(s, prompt, 16, logits, 0, &err);
        /* Decode at positions 16..79: the middle of TinyLM's context, as a reply would. */
        for (int pos = 16; pos < 80 && k < reps; pos++, k++) {
            double t0 = wb_clock_ms();
            wb_session_decode(s, 40 + pos % 50, logits, &err);
            t[k] = (wb_clock_ms() - t0) * 1000.0;
        }
    }
    stats st = summarize(t, reps);
    free(t);
    free(logits);
    wb_session_free(s);
    wb_model_free(m);
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    char path[600];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return st;
}

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=3000]\n  sampler passes per vocabulary size, median and spread", NULL);
    const char *core = wb_blas_preferred_coretype();
    if (core && !getenv("OPENBLAS_CORETYPE")) {
        setenv("OPENBLAS_CORETYPE", core, 1);
        execv("/proc/self/exe", argv);
    }
    int reps = argc > 1 ? atoi(argv[1]) : 3000;
    if (reps < 20) reps = 20;
    wb_threads_set(1);

    static int32_t gen[64];
    for (int i = 0; i < 64; i++) gen[i] = (i * 37) % 1500; /* repeats, so penalties bite */
    wb_logit_bias bias[16];
    for (int i = 0; i < 16; i++) bias[i] = (wb_logit_bias){i * 97, i % 4 == 0 ? -INFINITY : 0.5f};

    printf("sampling overhead per token, microseconds: median [p10 - p90]; O(V) passes: %s\n",
           wb_sampler_simd() ? "AVX2" : "portable C");
    printf("%-40s %28s %28s\n", "setting", "V = 2048", "V = 150000");
    struct {
        const char *name;
        int mode;
    } rows[] = {{"greedy (temperature 0)", 0},
                {"temperature 0.8 only", 1},
                {"top_p 0.95 alone (no top_k)", 2},
                {"full set (T, top_k 40, top_p, min_p,", 3}};
    stats full2048 = {0, 0, 0, 0};
    for (int r = 0; r < 4; r++) {
        printf("%-40s", rows[r].name);
        for (int vi = 0; vi < 2; vi++) {
            int V = vi == 0 ? 2048 : 150000;
            int n = vi == 0 ? reps : reps / 15 + 20;
            wb_sampling_params sp = wb_sampling_default_params();
            sp.seed = 1;
            sp.has_seed = 1;
            size_t n_gen = 0;
            if (rows[r].mode == 0) sp.temperature = 0;
            if (rows[r].mode >= 1) sp.temperature = 0.8f;
            if (rows[r].mode == 2) sp.top_p = 0.95f;
            if (rows[r].mode == 3) {
                sp.top_k = 40;
                sp.top_p = 0.95f;
                sp.min_p = 0.05f;
                sp.repetition_penalty = 1.1f;
                sp.frequency_penalty = 0.3f;
                sp.presence_penalty = 0.2f;
                sp.logit_bias = bias;
                sp.n_logit_bias = 16;
                n_gen = 64;
            }
            stats s = time_sampler(&sp, V, n, gen, n_gen);
            if (r == 3 && vi == 0) full2048 = s;
            char cell[64];
            snprintf(cell, sizeof cell, "%.1f [%.1f - %.1f]", s.med, s.p10, s.p90);
            printf(" %28s", cell);
        }
        printf("\n");
    }
    printf("%-40s\n", "  penalties, 16 biases, 64 generated)");
    if (wb_sampler_simd()) {
        /* The same rows with the portable build forced, to show what the AVX2 passes buy. */
        wb_sampler_force_scalar(1);
        for (int mode = 0; mode < 3; mode++) {
            static const char *const names[] = {"  portable C: greedy",
                                                "  portable C: temperature only",
                                                "  portable C: top_p alone"};
            printf("%-40s", names[mode]);
            for (int vi = 0; vi < 2; vi++) {
                int V = vi == 0 ? 2048 : 150000;
                wb_sampling_params sp = wb_sampling_default_params();
                sp.seed = 1;
                sp.has_seed = 1;
                sp.temperature = mode == 0 ? 0.0f : 0.8f;
                if (mode == 2) sp.top_p = 0.95f;
                stats s = time_sampler(&sp, V, vi == 0 ? reps / 3 + 20 : reps / 45 + 20, gen, 0);
                char cell[64];
                snprintf(cell, sizeof cell, "%.1f [%.1f - %.1f]", s.med, s.p10, s.p90);
                printf(" %28s", cell);
            }
            printf("\n");
        }
        wb_sampler_force_scalar(0);
    }
    stats f1 = time_full_sort(2048, reps / 3 + 20), f2 = time_full_sort(150000, reps / 30 + 10);
    char c1[64], c2[64];
    snprintf(c1, sizeof c1, "%.1f [%.1f - %.1f]", f1.med, f1.p10, f1.p90);
    snprintf(c2, sizeof c2, "%.1f [%.1f - %.1f]", f2.med, f2.p10, f2.p90);
    printf("%-40s %28s %28s\n", "baseline: softmax + full qsort", c1, c2);

    stats d = time_decode(reps / 3 + 64);
    printf("\nTinyLM-sized decode step (random weights, 1 thread): %.1f [%.1f - %.1f] us\n", d.med,
           d.p10, d.p90);
    if (d.med > 0)
        printf("full-set sampling at V = 2048 is %.2f%% of a decode step by medians, %.2f%% by "
               "minimums (target < 5%%)\n",
               100.0 * full2048.med / d.med, 100.0 * full2048.min / d.min);
    return 0;
}
