/* bench_batch.c - the request-timeline benchmarks on TinyLM (the shipped model when present,
 * else a random TinyLM-sized GPT-2), every figure median [min - max] over repeats, and every
 * ratio taken from figures measured in the same run:
 *   - batched decode throughput for B = 1..32 (one forward pass per step over the batch) against
 *     B separate single-sequence generations,
 *   - decode without a cache against decode with it, for 8/32/64/96 new tokens,
 *   - prefix reuse: suffix prefill after a forked prefix against a cold prefill, by suffix share,
 *   - TTFT of a 96-token prompt through the generation loop against a bare prefill of 96.
 *
 *   bench_batch [repeats] [model_dir]      (model_dir defaults to models/tinylm-base)
 *   WB_BENCH_ONLY=batch|cache|prefix|ttft bench_batch ...   one part only
 */
#include <stdio.h>
#include "bench_args.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_family.h"
#include "wb_batch.h"
#include "wb_generate.h"
#include "wb_model.h"

#include "bench_fixture.h"

static double now(void) { return wb_clock_ms(); }

/* A fixed-length greedy generation (eos ignored); returns the result's field via the callback. */
static wb_gen *gen_ids(const wb_model *m, const int32_t *ids, int n, int max_tokens, int cache) {
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    sp.max_tokens = max_tokens;
    wb_gen_params gp = wb_gen_default_params();
    gp.ignore_eos = 1;
    gp.cache = cache;
    wb_gen *g = NULL;
    wb_err err = {0};
    if (wb_gen_new_ids(m, ids, (size_t)n, &sp, &gp, &g, &err) || wb_gen_run(g, &err)) {
        fprintf(stderr, "bench_batch: %s\n", err.msg);
        exit(1);
    }
    return g;
}

static void bench_batched_decode(const wb_model *m, int nt, int reps, const int32_t *corpus) {
    enum { NEW = 64 };
    static const int sizes[] = {1, 2, 4, 8, 16, 32};
    printf("\n  batched decode, %d new tokens per sequence, prompts of 8..24 tokens "
           "(decode tokens/s; B separate generations for the ratio)\n", NEW);
    wb_batch *b = NULL;
    wb_err err = {0};
    wb_batch_new(m, &b, &err);
    double *tb = malloc((size_t)reps * sizeof *tb), *ts = malloc((size_t)reps * sizeof *ts);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const int B = sizes[k];
        const int32_t *prompts[32];
        size_t lens[32];
        for (int i = 0; i < B; i++) prompts[i] = corpus + 3 * i, lens[i] = (size_t)(8 + i % 17);
        wb_sampling_params sp = wb_sampling_default_params();
        sp.temperature = 0;
        sp.max_tokens = NEW;
        wb_batch_params bp = wb_batch_default_params();
        bp.gen.ignore_eos = 1;
        wb_batch_generate(b, prompts, lens, B, &sp, &bp, &err); /* warm-up: sessions, buffers */
        for (int r = 0; r < reps; r++) {
            if (wb_batch_generate(b, prompts, lens, B, &sp, &bp, &err)) {
                fprintf(stderr, "bench_batch: %s\n", err.msg);
                exit(1);
            }
            tb[r] = wb_batch_result_get(b)->decode_tokens_per_s;
            /* the same work one sequence at a time (decode part only) */
            double decode_ms = 0;
            for (int i = 0; i < B; i++) {
                wb_gen *g = gen_ids(m, prompts[i], (int)lens[i], NEW, 1);
                const wb_gen_result *gr = wb_gen_result_get(g);
                decode_ms += gr->last_token_ms - gr->ttft_ms;
                wb_gen_free(g);
            }
            ts[r] = 1000.0 * B * (NEW - 1) / decode_ms;
        }
        stat3 sb = stats(tb, reps), ss = stats(ts, reps);
        printf("  B=%-3d %d thr  batched %9.0f tok/s [%.0f - %.0f]   separate %8.0f tok/s "
               "[%.0f - %.0f]   x%.2f\n", B, nt, sb.med, sb.min, sb.max, ss.med, ss.min, ss.max,
               sb.med / ss.med);
    }
    free(tb);
    free(ts);
    wb_batch_free(b);
}

static void bench_cache(const wb_model *m, int nt, int reps, const int32_t *corpus) {
    static const int lens[] = {8, 32, 64, 96};
    printf("\n  decode ms/token, 24-token prompt, cache on vs off (interleaved)\n");
    double *on = malloc((size_t)reps * sizeof *on), *off = malloc((size_t)reps * sizeof *off);
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        for (int r = 0; r < reps; r++) {
            for (int c = 1; c >= 0; c--) {
                wb_gen *g = gen_ids(m, corpus, 24, lens[k], c);
                const wb_gen_result *gr = wb_gen_result_get(g);
                (c ? on : off)[r] = (gr->last_token_ms - gr->ttft_ms) / (lens[k] - 1);
                wb_gen_free(g);
            }
        }
        stat3 a = stats(on, reps), b = stats(off, reps);
        printf("  %3d new  %d thr  cache %.4f [%.4f - %.4f]   no cache %.4f [%.4f - %.4f]   "
               "slower x%.1f\n", lens[k], nt, a.med, a.min, a.max, b.med, b.min, b.max,
               b.med / a.med);
    }
    free(on);
    free(off);
}

static void bench_prefix(const wb_model *m, int nt, int reps, const int32_t *corpus) {
    enum { N = 96 };
    static const int prefixes[] = {24, 48, 72};
    printf("\n  prefix reuse over %d tokens: cold prefill vs fork(prefix) + prefill(suffix)\n", N);
    wb_session *cold = NULL, *pre = NULL, *f = NULL;
    wb_err err = {0};
    wb_session_new(m, 0, &cold, &err);
    double *tc = malloc((size_t)reps * sizeof *tc), *tw = malloc((size_t)reps * sizeof *tw);
    float *logits = malloc((size_t)V * 4);
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
        const int P = prefixes[k];
        wb_session_new(m, 0, &pre, &err);
        wb_session_prefill(pre, corpus, P, NULL, 0, &err);
        /* Both sides run through warm sessions: the reused one is cut back to the prefix each
         * time, so neither pays a fresh session's first-touch page faults. */
        wb_session_fork(pre, &f, &err);
        for (int r = -2; r < reps; r++) {
            wb_session_reset(cold);
            double t0 = now();
            wb_session_prefill(cold, corpus, N, logits, 0, &err);
            double t1 = now();
            wb_session_truncate(f, P, &err);
            double t2 = now();
            wb_session_prefill(f, corpus + P, N - P, logits, 0, &err);
            double t3 = now();
            if (r >= 0) tc[r] = t1 - t0, tw[r] = t3 - t2;
        }
        wb_session_free(f);
        wb_session_free(pre);
        stat3 a = stats(tc, reps), b = stats(tw, reps);
        printf("  suffix %2d/%d (%.2f)  %d thr  cold %.3f ms [%.3f - %.3f]   suffix %.3f ms "
               "[%.3f - %.3f]   time share %.2f (of minima %.2f)\n", N - P, N, (double)(N - P) / N,
               nt, a.med, a.min, a.max, b.med, b.min, b.max, b.med / a.med, b.min / a.min);
    }
    wb_session_free(cold);
    free(tc);
    free(tw);
    free(logits);
}

static void bench_ttft(const wb_model *m, int nt, int reps, const int32_t *corpus) {
    enum { N = 96 };
    double *tp = malloc((size_t)reps * sizeof *tp), *tt = malloc((size_t)reps * sizeof *tt);
    wb_session *s = NULL;
    wb_err err = {0};
    wb_session_new(m, 0, &s, &err);
    float *logits = malloc((size_t)V * 4);
    for (int r = -2; r < reps; r++) {
        wb_session_reset(s);
        double t0 = now();
        wb_session_prefill(s, corpus, N, logits, 0, &err);
        double t1 = now();
        wb_gen *g = gen_ids(m, corpus, N, 1, 1);
        if (r >= 0) tp[r] = t1 - t0, tt[r] = wb_gen_result_get(g)->ttft_ms;
        wb_gen_free(g);
    }
    stat3 a = stats(tp, reps), b = stats(tt, reps);
    printf("\n  96-token prompt  %d thr  prefill %.3f ms [%.3f - %.3f]   TTFT %.3f ms [%.3f - %.3f]"
           "   TTFT/prefill x%.2f\n", nt, a.med, a.min, a.max, b.med, b.min, b.max, b.med / a.med);
    wb_session_free(s);
    free(tp);
    free(tt);
    free(logits);
}

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=9] [MODEL_DIR=models/tinylm-base]\n  batched decoding: tokens per second by batch size, median and spread", NULL);
    const char *core = wb_blas_preferred_coretype();
    if (core) {
        /* OpenBLAS reads OPENBLAS_CORETYPE only at start-up: restart with it set. */
        setenv("OPENBLAS_CORETYPE", core, 1);
        execv("/proc/self/exe", argv);
    }
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 3) reps = 3;
    const char *dir = argc > 2 ? argv[2] : "models/tinylm-base";
    char tmp[] = "/tmp/wb_bench_batch_XXXXXX";
    char probe[600];
    snprintf(probe, sizeof probe, "%s/model.safetensors", dir);
    int random = access(probe, R_OK) != 0;
    if (random) {
        if (!mkdtemp(tmp) || write_fixture(tmp)) {
            fprintf(stderr, "bench_batch: cannot write the model to %s\n", tmp);
            return 1;
        }
        dir = tmp;
    }
    wb_model *m = NULL;
    wb_err err = {0};
    if (wb_model_load(dir, &m, &err)) {
        fprintf(stderr, "bench_batch: %s\n", err.msg);
        return 1;
    }
    if (random) {
        const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
        for (int i = 0; i < 3; i++) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", tmp, files[i]);
            unlink(p);
        }
        rmdir(tmp);
    }
    const wb_config *cfg = wb_model_config(m);
    printf("bench_batch: %s (%s), %lld parameters, V=%d T=%d C=%d L=%d\n",
           random ? "random TinyLM-sized GPT-2" : dir,
           random ? "no trained model found" : "trained",
           (long long)wb_model_num_parameters(m), (int)cfg->vocab_size, (int)cfg->n_ctx,
           (int)cfg->n_embd, (int)cfg->n_layer);
    printf("BLAS: %s\nkernels: %s, repeats: %d; median [min - max]\n", wb_blas_info(),
           wb_kernels_name(), reps);
    int32_t corpus[T];
    for (int i = 0; i < T; i++) corpus[i] = (int32_t)((i * 131 + 7) % (cfg->vocab_size - 1));
    const char *only = getenv("WB_BENCH_ONLY"); /* "batch", "cache", "prefix" or "ttft" */
    for (int nt = 1; nt <= 2; nt++) {
        wb_threads_set(nt);
        printf("\n-- %d thread%s --\n", nt, nt > 1 ? "s" : "");
        if (!only || !strcmp(only, "ttft")) bench_ttft(m, nt, reps, corpus);
        if (!only || !strcmp(only, "prefix")) bench_prefix(m, nt, reps, corpus);
        if (!only || !strcmp(only, "cache")) bench_cache(m, nt, reps, corpus);
        if (!only || !strcmp(only, "batch")) bench_batched_decode(m, nt, reps, corpus);
    }
    wb_model_free(m);
    return 0;
}
