/* bench_quant.c - quantized weights against this machine's floors, measured in the same run.
 *
 * Floors, per repeat, interleaved with the kernels: a streaming read of 512 MB (four sequential
 * streams per thread, the decode kernels' pattern) at 1 and 2 threads, and the FMA and int8 dot
 * peaks of the kernel level in use (bench_floors.h: 512-bit FMA and vpdpbusd at AVX-512; 256-bit
 * FMA and vpmaddubsw+vpmaddwd, or AVX-VNNI vpdpbusd, at AVX2), per core.
 *
 * 1. Matrix products through wb_mat_mul (the model's dispatch) for every dtype: F32, BF16, Q8_0,
 *    Q4_0, Q4_K, Q6_K, split over 2 threads by rows as the model splits them:
 *    - decode: one input through a 4864-column matrix of about 320 MB (past the caches), GB/s
 *      and the fraction of the 2-thread read rate;
 *    - prefill: 44 and 268 inputs through Qwen2.5-0.5B's down projection (896 x 4864), Gop/s
 *      and the fraction of the 2-core int8 peak (quantized) or FMA peak (F32/BF16).
 * 2. The Qwen2.5-0.5B-shaped random model (bench_qwen2_fixture.h) loaded as BF16, Q8_0 and Q4_0,
 *    2 threads: prefill of 44 and 268 tokens (ms), decode (ms/token) against its bound, weight
 *    bytes / the read rate measured right before (decode / bound per repeat, then the median).
 * Each figure is the median [min - max] of the repeats. The machine may be shared: the load
 * average is printed before and after; read the ratios.
 *
 *   bench_quant [repeats] [--matrices-only]     (run from the source root, for the tokenizer)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <immintrin.h>

#include "bench_args.h"
#include "cpu.h"
#include "model_family.h"
#include "quant.h"
#include "wb_model.h"

#include "bench_qwen2_fixture.h"
#include "bench_floors.h"

#define MAXR 31

/* ---------------------------------------------------------------------------- statistics */

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
typedef struct stat3 {
    double med, lo, hi;
} stat3;
static stat3 stats(const double *v0, int n) {
    double v[MAXR];
    memcpy(v, v0, sizeof(double) * (size_t)n);
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return (stat3){n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
}

/* --------------------------------------------------------------------- matrix products */

enum { DT_F32, DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q4_K, DT_Q6_K, N_DT };
static const char *dt_name[N_DT] = {"F32", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"};
static const wb_mat_dtype dt_mat[N_DT] = {WB_MAT_F32, WB_MAT_BF16, WB_MAT_Q8_0,
                                          WB_MAT_Q4_0, WB_MAT_Q4_K, WB_MAT_Q6_K};

static size_t dt_row_bytes(int dt, int cols) {
    switch (dt) {
    case DT_F32: return (size_t)cols * 4;
    case DT_BF16: return (size_t)cols * 2;
    case DT_Q8_0: return wb_quant_row_bytes(WB_QT_Q8_0, cols);
    case DT_Q4_0: return wb_quant_row_bytes(WB_QT_Q4_0, cols);
    case DT_Q4_K: return wb_quant_row_bytes(WB_QT_Q4_K, cols);
    default: return wb_quant_row_bytes(WB_QT_Q6_K, cols);
    }
}

static void put16(uint8_t *p, float v) {
    const uint16_t h = wb_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* A matrix of random values (speed does not depend on them; scales are kept modest so the
 * outputs stay finite). */
static wb_mat make_mat(int dt, int rows, int cols) {
    const size_t rb = dt_row_bytes(dt, cols), n = rb * (size_t)rows;
    uint8_t *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) return (wb_mat){0};
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(xr() >> 24);
    for (int r = 0; r < rows; r++) {
        uint8_t *row = p + rb * (size_t)r;
        if (dt == DT_F32)
            for (int i = 0; i < cols; i++) ((float *)row)[i] = (float)((int)(xr() >> 22) - 512) / 16384.0f;
        else if (dt == DT_BF16)
            for (int i = 0; i < cols; i++) ((uint16_t *)row)[i] = rbf(0.03f);
        else if (dt == DT_Q8_0 || dt == DT_Q4_0)
            for (int b = 0; b < cols / 32; b++) put16(row + (size_t)b * (dt == DT_Q8_0 ? 34 : 18), 0.001f);
        else if (dt == DT_Q4_K)
            for (int b = 0; b < cols / 256; b++) put16(row + (size_t)b * 144, 0.001f), put16(row + (size_t)b * 144 + 2, 0.001f);
        else
            for (int b = 0; b < cols / 256; b++) put16(row + (size_t)b * 210 + 208, 0.0005f);
    }
    return (wb_mat){.w = p, .dtype = dt_mat[dt], .rows = rows, .cols = cols};
}

typedef struct mm_arg {
    float *Y;
    const float *X;
    int n;
    const wb_mat *W;
    int r0, r1;
} mm_arg;

static void *mm_run(void *arg) {
    const mm_arg *a = arg;
    wb_mat_mul(a->Y, a->X, a->n, a->W, NULL, a->r0, a->r1, 0, 0);
    return NULL;
}

/* ms of Y = X W^T over n inputs, rows split in two halves (one per thread) */
static double mm2(float *Y, const float *X, int n, const wb_mat *W) {
    pthread_t th;
    const int half = W->rows / 2 / 16 * 16;
    mm_arg a0 = {Y, X, n, W, 0, half}, a1 = {Y, X, n, W, half, W->rows};
    double t0 = wb_clock_ms();
    pthread_create(&th, NULL, mm_run, &a1);
    mm_run(&a0);
    pthread_join(th, NULL);
    return wb_clock_ms() - t0;
}

/* ------------------------------------------------------------------------------- model */

typedef struct model_row {
    const char *name;
    int weights;
    double gb;
    double p44[MAXR], p268[MAXR], dec[MAXR], bound[MAXR], ratio[MAXR], bw[MAXR];
    int ok;
} model_row;

int main(int argc, char **argv) {
    bench_args(argc, argv,
               "[REPS=5] [--matrices-only]\n  quantized (and F32/BF16) matrix products and the "
               "Qwen2.5-0.5B-shaped model against the bandwidth and int8/FMA peaks",
               (const char *const[]){"--matrices-only", NULL});
    const char *core = wb_blas_preferred_coretype();
    if (core) {
        setenv("OPENBLAS_CORETYPE", core, 1);
        execv("/proc/self/exe", argv);
    }
    int reps = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : 5;
    if (reps < 3) reps = 3;
    if (reps > MAXR) reps = MAXR;
    int matrices_only = 0;
    for (int i = 1; i < argc; i++) matrices_only |= strcmp(argv[i], "--matrices-only") == 0;
    const char *fma_what = "", *int8_what = "";
    printf("%s\n", wb_kernels_describe());
    print_load("before");

    float *bw_buf = aligned_alloc(64, BENCH_BW_BYTES);
    if (!bw_buf) return 1;
    memset(bw_buf, 1, BENCH_BW_BYTES);

    /* matrices: decode ~320 MB each, prefill 896 x 4864 */
    enum { IN = 4864, PR = 896, NMAX = 268 };
    wb_mat dec[N_DT], pre[N_DT];
    for (int d = 0; d < N_DT; d++) {
        const int rows = (int)(((size_t)320 << 20) / dt_row_bytes(d, IN)) / 32 * 32;
        dec[d] = make_mat(d, rows, IN);
        pre[d] = make_mat(d, PR, IN);
        if (!dec[d].w || !pre[d].w) return 1;
    }
    float *X = malloc(sizeof(float) * (size_t)NMAX * IN);
    size_t ymax = (size_t)NMAX * PR;
    for (int d = 0; d < N_DT; d++) ymax = (size_t)dec[d].rows > ymax ? (size_t)dec[d].rows : ymax;
    float *Y = malloc(sizeof(float) * ymax);
    if (!X || !Y) return 1;
    for (size_t i = 0; i < (size_t)NMAX * IN; i++) X[i] = (float)((int)(xr() >> 22) - 512) / 512.0f;

    double bw1[MAXR], bw2[MAXR], pf[MAXR], pi[MAXR];
    double gbs[N_DT][MAXR], frac[N_DT][MAXR], g44[N_DT][MAXR], g268[N_DT][MAXR];
    wb_threads_set(2);
    for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
        const double b1 = bench_read_gbs(bw_buf, 1), b2 = bench_read_gbs(bw_buf, 2);
        const double f = bench_fma_peak_level(2000000, wb_clock_ms, &fma_what),
                     i8 = bench_int8_peak_level(2000000, wb_clock_ms, &int8_what);
        for (int d = 0; d < N_DT; d++) {
            const double ms = mm2(Y, X, 1, &dec[d]);
            const double bytes = (double)dt_row_bytes(d, IN) * dec[d].rows;
            const double t44 = mm2(Y, X, 44, &pre[d]), t268 = mm2(Y, X, 268, &pre[d]);
            if (k < 0) continue;
            gbs[d][k] = bytes / (ms * 1e6);
            frac[d][k] = gbs[d][k] / b2;
            g44[d][k] = 2.0 * 44 * PR * IN / (t44 * 1e6);
            g268[d][k] = 2.0 * 268 * PR * IN / (t268 * 1e6);
        }
        if (k < 0) continue;
        bw1[k] = b1, bw2[k] = b2, pf[k] = f, pi[k] = i8;
    }
    stat3 s1 = stats(bw1, reps), s2 = stats(bw2, reps), sf = stats(pf, reps), si = stats(pi, reps);
    printf("\n%d repeats, median [min - max]\n\n| floor | rate |\n|---|---|\n", reps);
    printf("| streaming read, 1 thread | %.1f GB/s [%.1f - %.1f] |\n", s1.med, s1.lo, s1.hi);
    printf("| streaming read, 2 threads | %.1f GB/s [%.1f - %.1f] |\n", s2.med, s2.lo, s2.hi);
    printf("| FMA peak (%s), 1 core | %.0f GFLOP/s [%.0f - %.0f] |\n", fma_what, sf.med, sf.lo, sf.hi);
    printf("| int8 peak (%s), 1 core | %.0f Gop/s [%.0f - %.0f] (%.1fx FMA) |\n", int8_what, si.med,
           si.lo, si.hi, si.med / sf.med);
    printf("\nMatrix products through wb_mat_mul, 2 threads (rows split in halves). Decode: one input,"
           " 4864 columns, ~320 MB; prefill: 896 x 4864, Gop/s against 2 cores' int8 peak (quantized)"
           " or FMA peak (F32, BF16)\n\n");
    printf("| dtype | decode GB/s | of 2-thread read | prefill 44 Gop/s | of peak | prefill 268 Gop/s | of peak |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int d = 0; d < N_DT; d++) {
        stat3 a = stats(gbs[d], reps), b = stats(frac[d], reps), c = stats(g44[d], reps), e = stats(g268[d], reps);
        const double peak = 2 * (d <= DT_BF16 ? sf.med : si.med);
        printf("| %s | %.1f [%.1f - %.1f] | %.0f%% [%.0f - %.0f] | %.0f [%.0f - %.0f] | %.0f%% | %.0f [%.0f - %.0f] | %.0f%% |\n",
               dt_name[d], a.med, a.lo, a.hi, 100 * b.med, 100 * b.lo, 100 * b.hi, c.med, c.lo, c.hi,
               100 * c.med / peak, e.med, e.lo, e.hi, 100 * e.med / peak);
    }
    for (int d = 0; d < N_DT; d++) free((void *)dec[d].w), free((void *)pre[d].w);
    fflush(stdout);

    if (!matrices_only) {
        const char *tok = getenv("WB_BENCH_TOKENIZER");
        if (!tok) tok = "tests/vectors/family_qwen2_tokenizer.json";
        char dir[] = "/tmp/wb_bench_quant_XXXXXX";
        if (!mkdtemp(dir)) return 1;
        if (write_model(dir, tok)) {
            fprintf(stderr, "bench_quant: cannot write the model to %s (tokenizer %s)\n", dir, tok);
            return 1;
        }
        int32_t prompt[268];
        for (int i = 0; i < 268; i++) prompt[i] = (int32_t)(17 + 13 * i) % 600;
        float *logits = malloc((size_t)V * sizeof *logits);
        model_row rows[3] = {{.name = "BF16", .weights = WB_WEIGHTS_AS_STORED},
                             {.name = "Q8_0", .weights = WB_WEIGHTS_Q8_0},
                             {.name = "Q4_0", .weights = WB_WEIGHTS_Q4_0}};
        enum { NTOK = 16 };
        /* multiply-adds of a prefill of n tokens: every layer's matrices for all rows, the head for the
         * last one (x 2 ops) */
#define PREFILL_OPS(n) (2.0 * (n) * L * ((double)C * (NH * HD + 2 * NKV * HD) + (double)NH * HD * C + 3.0 * C * F) + 2.0 * V * C)
        printf("\nQwen2.5-0.5B-shaped model, 2 threads: prefill (ms, and its matrix products' Gop/s as a fraction "
               "of 2 cores' peak above: FMA for BF16, %s for the quantized), decode (ms/token over %d tokens after 44), bound = weight bytes / "
               "2-thread read rate measured before each decode%s\nQ8_0 / Q4_0 matrices with rows a multiple of 16 kept in %s\n\n", int8_what, NTOK,
               wb_kernels_bf16_input_bits() == 16 ? "; BF16 runs the vdpbf16ps route, twice the FMA's FLOPs an instruction, so its fraction of the FMA peak can pass 100% (bench_llama divides by that instruction's peak)" : "",
               wb_quant_tiles_native() ? "the 16-row tile layout (this level reads it natively)" : "the file layout");
        printf("| weights | weight GB | prefill 44 | of peak | prefill 268 | of peak | decode | read GB/s | bound | decode / bound |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|\n");
        for (int w = 0; w < 3; w++) {
            model_row *R = &rows[w];
            wb_model_params p = wb_model_default_params();
            p.n_ctx = 512;
            p.weights = R->weights;
            wb_model *m = NULL;
            wb_err err = {0};
            if (wb_model_load_ex(dir, &p, &m, &err)) {
                fprintf(stderr, "bench_quant: %s\n", err.msg);
                continue;
            }
            R->gb = (double)wb_model_weight_bytes(m) / 1e9;
            for (int r = -1; r < reps; r++) {
                wb_session *s = NULL;
                if (wb_session_new(m, 512, &s, &err)) break;
                double a = wb_clock_ms();
                wb_session_prefill(s, prompt, 268, logits, 0, &err);
                double b = wb_clock_ms();
                wb_session_free(s);
                s = NULL;
                if (wb_session_new(m, 512, &s, &err)) break;
                double c = wb_clock_ms();
                wb_session_prefill(s, prompt, 44, logits, 0, &err);
                double d = wb_clock_ms();
                const double g = bench_read_gbs(bw_buf, 2);
                double e = wb_clock_ms();
                int32_t id = 1;
                for (int t = 0; t < NTOK; t++) {
                    wb_session_decode(s, id, logits, &err);
                    id = (id * 31 + 7) % 600;
                }
                double f = wb_clock_ms();
                wb_session_free(s);
                if (r < 0) continue;
                R->p268[r] = b - a;
                R->p44[r] = d - c;
                R->dec[r] = (f - e) / NTOK;
                R->bw[r] = g;
                R->bound[r] = R->gb / g * 1e3;
                R->ratio[r] = R->dec[r] / R->bound[r];
            }
            wb_model_free(m);
            stat3 a = stats(R->p44, reps), b = stats(R->p268, reps), c = stats(R->dec, reps),
                  g = stats(R->bw, reps), bd = stats(R->bound, reps), ra = stats(R->ratio, reps);
            printf("| %s | %.3f | %.0f [%.0f - %.0f] | %.0f%% | %.0f [%.0f - %.0f] | %.0f%% | %.1f [%.1f - %.1f] | %.1f [%.1f - %.1f] | %.1f | %.2fx [%.2f - %.2f] |\n",
                   R->name, R->gb, a.med, a.lo, a.hi, 100 * PREFILL_OPS(44) / (a.med * 1e6) / (w == 0 ? 2 * sf.med : 2 * si.med),
                   b.med, b.lo, b.hi, 100 * PREFILL_OPS(268) / (b.med * 1e6) / (w == 0 ? 2 * sf.med : 2 * si.med), c.med, c.lo, c.hi, g.med, g.lo,
                   g.hi, bd.med, ra.med, ra.lo, ra.hi);
            fflush(stdout);
        }
        free(logits);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "bench_quant: could not remove %s\n", dir);
    }
    print_load("after");
    free(bw_buf), free(X), free(Y);
    return 0;
}
