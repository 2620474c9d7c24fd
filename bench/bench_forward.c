/* bench_forward.c - forward-pass timings on a random TinyLM-sized GPT-2
 * (vocab 2048, ctx 128, C 128, 4 layers, 4 heads, MLP 512), with the baselines measured in the
 * same run so that ratios are not skewed by a noisy machine:
 *   - decode with cache (GEMV path) vs full recompute per token (no cache),
 *   - decode vs a naive scalar GEMV chain and an OpenBLAS sgemv chain over the same weights,
 *   - prefill of 8/32/64/96 tokens vs a plain OpenBLAS sgemm chain of the same shapes (96),
 * at 1 and 2 threads. Every figure: median [min - max] over repeats.
 *
 *   bench_forward [repeats]
 *   WB_BENCH_ONLY=decode|prefill bench_forward ...   one part only
 *   WB_BENCH_ONLY=prefill96|chain96|decode64 bench_forward N
 *                                        N bare 96-token prefills, GEMM chains or 64-token decodes
 *   (for a profiler; WB_BENCH_THREADS=1|2 picks one thread setting)
 *   WB_BENCH_ONLY=barrier bench_forward REPS       ns per pool barrier and per pool job, 2 threads
 *   WB_BENCH_ONLY=fresh [WB_BENCH_OTHER=old/bench_forward] bench_forward PROCS
 *                                                    decode from the first step of fresh processes
 */
#include <stdio.h>
#include "bench_args.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "model_internal.h"
#include "threadpool.h"
#include "wb_model.h"

#include "bench_fixture.h"

static void show(const char *what, int nt, stat3 s, const char *unit) {
    printf("  %-44s %d thr  %8.4f %s  [%.4f - %.4f]\n", what, nt, s.med, unit, s.min, s.max);
}

/* -------------------------------------------------------------------------- baselines */

/* The baselines run the model's matrix shapes ([out, in], as the model stores them) on their
 * own random copies: they measure kernels, not the model, and need none of its internals. */
typedef struct base_layer {
    float *qkv_w, *attproj_w, *fc_w, *mlpproj_w;
} base_layer;
static base_layer g_layers[L];
static float *g_head;

static float *rand_mat(size_t n) {
    float *w = malloc(n * sizeof *w);
    for (size_t i = 0; w && i < n; i++) w[i] = 0.02f * frand();
    return w;
}

static void base_init(void) {
    for (int l = 0; l < L; l++)
        g_layers[l] = (base_layer){rand_mat((size_t)3 * C * C), rand_mat((size_t)C * C),
                                   rand_mat((size_t)F * C), rand_mat((size_t)C * F)};
    g_head = rand_mat((size_t)V * C);
}

/* One token through the same matrices with plain scalar loops (no SIMD, no threads). */
static void naive_decode(float *x, float *buf, float *logits) {
    for (int l = 0; l < L; l++) {
        const base_layer *ly = &g_layers[l];
        const float *Ws[4] = {ly->qkv_w, ly->attproj_w, ly->fc_w, ly->mlpproj_w};
        const int outs[4] = {3 * C, C, F, C}, ins[4] = {C, C, C, F};
        for (int k = 0; k < 4; k++) {
            for (int o = 0; o < outs[k]; o++) {
                const float *w = Ws[k] + (size_t)o * ins[k];
                float s = 0;
                for (int i = 0; i < ins[k]; i++) s += w[i] * x[i];
                buf[o] = s;
            }
            for (int i = 0; i < C; i++) x[i] = 0.5f * x[i] + 0.001f * buf[i]; /* keep it live */
        }
    }
    for (int o = 0; o < V; o++) {
        const float *w = g_head + (size_t)o * C;
        float s = 0;
        for (int i = 0; i < C; i++) s += w[i] * x[i];
        logits[o] = s;
    }
}

/* The same chain through OpenBLAS sgemv. */
static void blas_decode(float *x, float *buf, float *logits) {
    for (int l = 0; l < L; l++) {
        const base_layer *ly = &g_layers[l];
        const float *Ws[4] = {ly->qkv_w, ly->attproj_w, ly->fc_w, ly->mlpproj_w};
        const int outs[4] = {3 * C, C, F, C}, ins[4] = {C, C, C, F};
        for (int k = 0; k < 4; k++) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, outs[k], ins[k], 1.0f, Ws[k], ins[k], x, 1,
                        0.0f, buf, 1);
            for (int i = 0; i < C; i++) x[i] = 0.5f * x[i] + 0.001f * buf[i];
        }
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, g_head, C, x, 1, 0.0f, logits, 1);
}

/* Prefill's GEMMs alone (same shapes, same B^T layout), head for the last row only. */
static void blas_prefill_chain(int n, float *xn, float *qkv, float *h,
                               float *logits) {
    for (int l = 0; l < L; l++) {
        const base_layer *ly = &g_layers[l];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, 3 * C, C, 1, xn, C, ly->qkv_w, C,
                    0, qkv, 3 * C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, C, C, 1, qkv, 3 * C,
                    ly->attproj_w, C, 1, xn, C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, F, C, 1, xn, C, ly->fc_w, C, 0, h,
                    F);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, C, F, 1, h, F, ly->mlpproj_w, F,
                    1, xn, C);
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, g_head, C, xn + (size_t)(n - 1) * C, 1,
                0.0f, logits, 1);
}

/* ------------------------------------------------------------------- pool sync costs */

/* What the decode step's synchronisation costs by itself: a 2-thread pool job of BAR_N barriers
 * and nothing else (ns per barrier), and empty jobs back to back (ns per wake and join). */
enum { BAR_N = 20000, JOB_N = 5000 };

static void bar_job(void *arg, int tid, int nt) {
    (void)tid, (void)nt;
    for (int i = 0; i < BAR_N; i++) wb_pool_barrier(arg);
}

static void empty_job(void *arg, int tid, int nt) { (void)arg, (void)tid, (void)nt; }

static int sync_bench(int reps) {
    wb_pool *p = NULL;
    wb_err err = {0};
    if (wb_pool_new(2, &p, &err)) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    double *tb = malloc((size_t)reps * sizeof *tb), *tj = malloc((size_t)reps * sizeof *tj);
    double la[3] = {0};
    getloadavg(la, 3);
    for (int r = 0; r < reps; r++) {
        double t0 = wb_clock_ms();
        wb_pool_run(p, bar_job, p);
        double t1 = wb_clock_ms();
        for (int i = 0; i < JOB_N; i++) wb_pool_run(p, empty_job, NULL);
        double t2 = wb_clock_ms();
        tb[r] = (t1 - t0) * 1e6 / BAR_N, tj[r] = (t2 - t1) * 1e6 / JOB_N;
    }
    stat3 b = stats(tb, reps), j = stats(tj, reps);
    printf("pool sync, 2 threads, load average %.2f, median [min - max] over %d repeats:\n", la[0],
           reps);
    printf("  barrier                 %8.1f ns  [%.1f - %.1f]\n", b.med, b.min, b.max);
    printf("  empty job (wake + join) %8.1f ns  [%.1f - %.1f]\n", j.med, j.min, j.max);
    free(tb);
    free(tj);
    wb_pool_free(p);
    return 0;
}

/* ------------------------------------------------------------------- fresh processes */

/* A lesson run decodes a few dozen tokens in a process that has just started, so its speed is
 * the first tokens', not the warmed-up loop's. WB_BENCH_ONLY=fresh runs PROCS fresh processes
 * (this executable re-run with WB_BENCH_FRESH=dir, and alternately WB_BENCH_OTHER, an older
 * build of this bench, so old and new see the same machine), each loading the model, then
 * timing every one of its first FRESH_N decode steps, then FRESH_N more after a warm-up, as the
 * steady state, then the CPU time the process uses in 300 ms of idleness from 5 ms after the
 * last step (an idle pool must sleep). Per process: ms/token of step 1, of steps 1-8, of steps
 * 1-64, steady, idle CPU ms, and the ms wb_session_new took (it runs the first session's warm-up:
 * what it moves out of the first steps shows there); the parent prints median [min - max] over
 * processes (an older build that does not print the last figure gets -1 there). */
enum { FRESH_N = 64, FRESH_WARM = 3, FRESH_STEADY = 9, FRESH_COLS = 6 };

static int fresh_child(const char *dir, int nt) {
    wb_model *m = NULL;
    wb_err err = {0};
    if (wb_model_load(dir, &m, &err)) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    wb_threads_set(nt);
    wb_session *s = NULL;
    const double s0 = wb_clock_ms();
    if (wb_session_new(m, 0, &s, &err)) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    const double session_ms = wb_clock_ms() - s0;
    float *logits = malloc((size_t)V * sizeof *logits);
    double step[FRESH_N + 1], rep[FRESH_STEADY];
    step[0] = wb_clock_ms();
    for (int i = 0; i < FRESH_N; i++) {
        wb_session_decode(s, (int32_t)((i * 131 + 7) % V), logits, NULL);
        step[i + 1] = wb_clock_ms();
    }
    for (int r = 0; r < FRESH_WARM + FRESH_STEADY; r++) {
        wb_session_reset(s);
        double t0 = wb_clock_ms();
        for (int i = 0; i < FRESH_N; i++)
            wb_session_decode(s, (int32_t)((i * 131 + 7) % V), logits, NULL);
        if (r >= FRESH_WARM) rep[r - FRESH_WARM] = (wb_clock_ms() - t0) / FRESH_N;
    }
    /* an idle pool must sleep: the process's CPU time over 300 ms, from 5 ms after the last step.
     * The 5 ms cover the pool's bounded spin (at most 0.25 ms) and let Linux account a worker's
     * CPU time up to now: a thread that ran without a switch on another CPU is charged at its
     * next tick or switch, which would put up to a tick of decode work (1-2 ms) into the window. */
    struct timespec c0, c1, nap = {0, 300000000}, settle = {0, 5000000};
    nanosleep(&settle, NULL);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const double idle = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) * 1e-6;
    printf("fresh %.5f %.5f %.5f %.5f %.5f %.5f\n", step[1] - step[0], (step[8] - step[0]) / 8,
           (step[FRESH_N] - step[0]) / FRESH_N, stats(rep, FRESH_STEADY).med, idle, session_ms);
    wb_session_free(s);
    wb_model_free(m);
    free(logits);
    return 0;
}

/* Run exe as a fresh child on dir at nt threads; its figures into out (-1: not printed). */
static int fresh_run(const char *exe, const char *dir, int nt, double out[FRESH_COLS]) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "WB_BENCH_FRESH='%s' WB_BENCH_THREADS=%d '%s'", dir, nt, exe);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[256];
    int ok = 0;
    while (fgets(line, sizeof line, p)) {
        double v[FRESH_COLS] = {0, 0, 0, 0, 0, -1};
        if (sscanf(line, "fresh %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5]) >= 5) {
            memcpy(out, v, sizeof v);
            ok = 1;
        }
    }
    return pclose(p) == 0 && ok ? 0 : -1;
}

static int fresh_parent(const char *dir, int procs) {
    const char *other = getenv("WB_BENCH_OTHER");
    const char *exes[2] = {"/proc/self/exe", other};
    const int n_exe = other ? 2 : 1;
    double *v = calloc((size_t)2 * 2 * FRESH_COLS * procs, sizeof *v); /* [exe][nt][col][proc] */
    char self[1024];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!v || k <= 0) return 1;
    self[k] = '\0';
    exes[0] = self;
    double la0[3] = {0}, la1[3] = {0};
    getloadavg(la0, 3);
    for (int r = 0; r < procs; r++)
        for (int e = 0; e < n_exe; e++)
            for (int nt = 1; nt <= 2; nt++) {
                double out[FRESH_COLS];
                if (fresh_run(exes[e], dir, nt, out)) {
                    fprintf(stderr, "bench_forward: fresh child %s failed\n", exes[e]);
                    return 1;
                }
                for (int c = 0; c < FRESH_COLS; c++)
                    v[(((size_t)e * 2 + nt - 1) * FRESH_COLS + c) * procs + r] = out[c];
            }
    getloadavg(la1, 3);
    printf("fresh processes: %d per row, interleaved; load average %.2f at start, %.2f at end\n",
           procs, la0[0], la1[0]);
    printf("  ms/token (idle: CPU ms), median [min - max] over processes:\n");
    static const char *const col[FRESH_COLS] = {"step 1", "steps 1-8", "steps 1-64",
                                                "steady (64 after warm-up)",
                                                "idle CPU ms, 300 ms from +5",
                                                "wb_session_new ms"};
    for (int e = 0; e < n_exe; e++)
        for (int nt = 1; nt <= 2; nt++) {
            printf("  %s, %d thread%s\n", e ? "other (WB_BENCH_OTHER)" : "this build", nt,
                   nt > 1 ? "s" : "");
            for (int c = 0; c < FRESH_COLS; c++) {
                stat3 s = stats(v + (((size_t)e * 2 + nt - 1) * FRESH_COLS + c) * procs, procs);
                if (s.max < 0) printf("    %-28s (not printed by that build)\n", col[c]);
                else printf("    %-28s %8.4f [%.4f - %.4f]\n", col[c], s.med, s.min, s.max);
            }
        }
    free(v);
    return 0;
}

/* ------------------------------------------------------------------------------- main */

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=15]\n  GPT-2 forward pass: prefill and decode step times, median and spread", NULL);
    const char *core = wb_blas_preferred_coretype();
    if (core) {
        /* OpenBLAS reads OPENBLAS_CORETYPE only at start-up: restart with it set. */
        setenv("OPENBLAS_CORETYPE", core, 1);
        execv("/proc/self/exe", argv);
    }
    const char *fresh = getenv("WB_BENCH_FRESH"); /* a child of WB_BENCH_ONLY=fresh */
    if (fresh) return fresh_child(fresh, getenv("WB_BENCH_THREADS") ? atoi(getenv("WB_BENCH_THREADS")) : 1);
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    if (reps < 3) reps = 3;
    if (getenv("WB_BENCH_ONLY") && strcmp(getenv("WB_BENCH_ONLY"), "barrier") == 0)
        return sync_bench(reps);
    char dir[] = "/tmp/wb_bench_forward_XXXXXX";
    if (!mkdtemp(dir) || write_fixture(dir)) {
        fprintf(stderr, "bench_forward: cannot write the model to %s\n", dir);
        return 1;
    }
    const char *only = getenv("WB_BENCH_ONLY");
    const int fresh_mode = only && strcmp(only, "fresh") == 0;
    int rc_fresh = fresh_mode ? fresh_parent(dir, reps) : 0;
    wb_model *m = NULL;
    wb_err err = {0};
    if (!fresh_mode && wb_model_load(dir, &m, &err)) {
        fprintf(stderr, "bench_forward: %s\n", err.msg);
        return 1;
    }
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    if (fresh_mode) return rc_fresh;

    printf("bench_forward: GPT-2 V=%d T=%d C=%d L=%d NH=%d F=%d, %lld parameters, %.2f MB F32\n",
           V, T, C, L, NH, F, (long long)wb_model_num_parameters(m),
           wb_model_num_parameters(m) * 4.0 / 1e6);
    printf("BLAS: %s\nkernels: %s, repeats: %d\n", wb_blas_info(), wb_kernels_name(), reps);

    enum { NDEC = 64 };
    int32_t ids[T];
    for (int i = 0; i < T; i++) ids[i] = (int32_t)((i * 131 + 7) % V);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *t = malloc((size_t)reps * sizeof *t);
    float *x = calloc(C * 4, sizeof *x), *buf = calloc(F * 4, sizeof *buf);
    float *xn = calloc((size_t)T * F, sizeof *xn), *qkv = calloc((size_t)T * 3 * C, sizeof *qkv),
          *hb = calloc((size_t)T * F, sizeof *hb);
    for (int i = 0; i < T * C; i++) xn[i] = 0.01f * frand();
    wb_session *s = NULL;
    wb_session_new(m, 0, &s, NULL);
    base_init();

    const int do_decode = !only || strcmp(only, "decode") == 0;
    const int do_prefill = !only || strcmp(only, "prefill") == 0;
    const char *thr = getenv("WB_BENCH_THREADS"); /* "1" or "2": that setting only */
    for (int nt = 1; nt <= 2; nt++) {
        if (thr && atoi(thr) != nt) continue;
        wb_threads_set(nt);
        printf("\n-- %d thread%s --\n", nt, nt > 1 ? "s" : "");
      if (only && (strcmp(only, "prefill96") == 0 || strcmp(only, "chain96") == 0 ||
                   strcmp(only, "decode64") == 0)) {
        const int pf = strcmp(only, "prefill96") == 0, dec = strcmp(only, "decode64") == 0;
        struct timespec c0, c1, p0, p1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        double t0 = wb_clock_ms();
        for (int r = 0; r < reps; r++) {
            if (pf) {
                wb_session_reset(s);
                wb_session_prefill(s, ids, 96, logits, 0, NULL);
            } else if (dec) {
                wb_session_reset(s);
                for (int i = 0; i < NDEC; i++) wb_session_decode(s, ids[i], logits, NULL);
            } else {
                blas_prefill_chain(96, xn, qkv, hb, logits);
            }
        }
        double wall = wb_clock_ms() - t0;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p1);
        double cpu = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) * 1e-6;
        double pcpu = (p1.tv_sec - p0.tv_sec) * 1e3 + (p1.tv_nsec - p0.tv_nsec) * 1e-6;
        /* the process's CPU time counts the pool worker too (at 2 threads, its spin as well) */
        printf("  %s: %.4f ms mean over %d (CPU time: calling thread %.4f ms, process %.4f ms)\n",
               only, wall / reps, reps, cpu / reps, pcpu / reps);
        continue;
      }
      if (do_decode) {
        /* warm up caches, pool and OpenBLAS threads */
        for (int k = 0; k < 3; k++) {
            wb_session_reset(s);
            for (int i = 0; i < NDEC; i++) wb_session_decode(s, ids[i], logits, NULL);
        }
        for (int r = 0; r < reps; r++) {
            wb_session_reset(s);
            double t0 = wb_clock_ms();
            for (int i = 0; i < NDEC; i++) wb_session_decode(s, ids[i], logits, NULL);
            t[r] = (wb_clock_ms() - t0) / NDEC;
        }
        stat3 dec = stats(t, reps);
        show("decode, KV cache (64 tokens, ms/token)", nt, dec, "ms");
        int rr = reps < 5 ? reps : 5;
        for (int r = 0; r < rr; r++) {
            double t0 = wb_clock_ms();
            for (int i = 1; i <= NDEC; i++) wb_model_forward(m, ids, i, logits, 0, NULL);
            t[r] = (wb_clock_ms() - t0) / NDEC;
        }
        stat3 nocache = stats(t, rr);
        show("decode, no cache (full recompute)", nt, nocache, "ms");
        for (int r = 0; r < reps; r++) {
            double t0 = wb_clock_ms();
            for (int i = 0; i < NDEC; i++) naive_decode(x, buf, logits);
            t[r] = (wb_clock_ms() - t0) / NDEC;
        }
        stat3 naive = stats(t, reps);
        show("baseline: naive scalar GEMV chain", nt, naive, "ms");
        for (int r = 0; r < reps; r++) {
            double t0 = wb_clock_ms();
            for (int i = 0; i < NDEC; i++) blas_decode(x, buf, logits);
            t[r] = (wb_clock_ms() - t0) / NDEC;
        }
        stat3 bgemv = stats(t, reps);
        show("baseline: OpenBLAS sgemv chain", nt, bgemv, "ms");
        printf("  ratios: no-cache/cache %.1fx, naive/cache %.2fx, sgemv/cache %.2fx\n",
               nocache.med / dec.med, naive.med / dec.med, bgemv.med / dec.med);
      }
      if (do_prefill) {

        const int lens[3] = {8, 32, 64};
        for (int k = 0; k < 3; k++) {
            for (int r = 0; r < reps + 2; r++) {
                wb_session_reset(s);
                double t0 = wb_clock_ms();
                wb_session_prefill(s, ids, lens[k], logits, 0, NULL);
                if (r >= 2) t[r - 2] = wb_clock_ms() - t0;
            }
            char what[64];
            snprintf(what, sizeof what, "prefill %d tokens (ms)", lens[k]);
            show(what, nt, stats(t, reps), "ms");
        }
        /* On 1 thread, 96 tokens and the GEMM chain alternate, so a background hiccup hits both
         * alike. On more, they run one block after the other: after each threaded GEMM, OpenBLAS's
         * worker spins (sched_yield) for ~0.1 s, and alternating would run every prefill against
         * that spinner on the core our pool's worker needs (measured: 1.7x instead of 1.2x). */
        double *tc = malloc((size_t)reps * sizeof *tc);
        for (int r = 0; r < reps + 2; r++) {
            wb_session_reset(s);
            double t0 = wb_clock_ms();
            wb_session_prefill(s, ids, 96, logits, 0, NULL);
            double t1 = wb_clock_ms();
            if (nt == 1) blas_prefill_chain(96, xn, qkv, hb, logits);
            double t2 = wb_clock_ms();
            if (r >= 2) t[r - 2] = t1 - t0, tc[r - 2] = t2 - t1;
        }
        for (int r = 0; nt > 1 && r < reps + 2; r++) {
            double t0 = wb_clock_ms();
            blas_prefill_chain(96, xn, qkv, hb, logits);
            if (r >= 2) tc[r - 2] = wb_clock_ms() - t0;
        }
        stat3 pf96 = stats(t, reps), chain = stats(tc, reps);
        free(tc);
        show("prefill 96 tokens (ms)", nt, pf96, "ms");
        show("baseline: OpenBLAS sgemm chain, 96 tokens", nt, chain, "ms");
        printf("  ratio: prefill(96) / sgemm chain = %.2fx\n", pf96.med / chain.med);
      }
    }
    wb_session_free(s);
    wb_model_free(m);
    free(logits);
    free(t);
    free(x);
    free(buf);
    free(xn);
    free(qkv);
    free(hb);
    return 0;
}
