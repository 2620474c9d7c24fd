/* bench_quant_decode.c - the quantized decode kernels (wb_gemm_q_with, one input) alone, every
 * variant this CPU runs, on the matrices one decode step of a Qwen2.5-0.5B-shaped model reads:
 * per layer q 896x896, k and v 128x896, o 896x896, gate and up 4864x896, down 896x4864, 24 layers,
 * then the 151936x896 head (Q8_0 525 MB, Q5_0 340 MB, Q4_0 295 MB: past the last-level cache, so
 * every sweep streams its weights from memory, as a model's decode step does). Q5_0 (the type a
 * Q4_K_M file of this model mostly holds): the Q8_0 tile-layout rows are what it cost when it was
 * requantized to Q8_0 at load.
 *
 * Threads split each matrix by rows as the model does (wb_split_rows) and meet at a spinning
 * barrier after each layer and after the head. Every input is quantized inside each product, as
 * in the model. Per repeat: the streaming read rate at the same thread count (bench_floors.h's
 * read, on the same threads), then one sweep per variant, the order rotated every repeat; the
 * bound is weight bytes / that read rate and each sweep's ratio to it is taken per repeat, once
 * in wall time and once in thread CPU time (the slowest thread's, for the read and for the step:
 * robust to the descheduling of a shared machine, though not to others' memory traffic). Printed:
 * median [min - max] of ms per sweep and of the ratios, and the load average before and after.
 * The tile-layout matrices are 64-byte aligned, as the model's stores are; the AVX-512 tile
 * GEMV runs a second time with its software prefetch switched (cpu.h qgemv_prefetch) in the
 * same repeats.
 *
 *   bench_quant_decode [repeats=7] [threads=2] [q8_0|q4_0|q5_0|iq4_nl|q4_1|q5_1|both|q4_k|q5_k|q6_k|k]
 *                      [variant-substring]
 * (both: the first six, the 32-value types; Q5_1 is most of a Q5_K_M file of this model; IQ4_NL, the type a Q3_K_M / IQ4_XS file of this model mostly holds, has
 * no tile layout: its row is Q4_0's size, read by the per-row dot). The K types need rows that are
 * multiples of 256, which 896 is not: they run on a Qwen3-0.6B-shaped step instead (28 layers, q
 * 2048x1024, k and v 1024x1024, o 1024x2048, gate and up 3072x1024, down 1024x3072, the 151936 x
 * 1024 head), the shape a Q4_K_M / Q5_K_M file of that model holds in its K types (k: all three).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "bench_floors.h"
#include "cpu.h"
#include "quant.h"
#include "threadpool.h"
#include "wb_model.h"

#define MAXR 31
#define MAXT 8
#define MAXV 8
enum { LAYERS_MAX = 28, C = 896, KV = 128, F = 4864, VOCAB = 151936, PER_LAYER = 7, XMAX = 4864 };
/* the step's shape: layers, per layer the 7 matrices' rows x cols, the head's cols */
typedef struct step_shape {
    const char *name;
    int layers, m[PER_LAYER][2], head_cols;
} step_shape;
static const step_shape k_qwen25 = {"Qwen2.5-0.5B", 24, {{C, C}, {KV, C}, {KV, C}, {C, C}, {F, C}, {F, C}, {C, F}}, C};
static const step_shape k_qwen3 = {"Qwen3-0.6B", 28,
                                   {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048}, {3072, 1024}, {3072, 1024}, {1024, 3072}},
                                   1024};
static int g_layers = 24;

static unsigned long long rs = 0x9e3779b97f4a7c15ull;
static unsigned xr(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (unsigned)(rs >> 32);
}

static int cmpd(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct qmat {
    const uint8_t *w;
    int rows, cols;
} qmat;

/* random blocks with a small f16 scale per block (speed does not depend on the values) */
static uint8_t *make_blocks(wb_qtype t, int rows, int cols) {
    const size_t rb = wb_quant_row_bytes(t, cols), n = rb * (size_t)rows, bs = wb_qtype_block_bytes(t);
    uint8_t *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(xr() >> 24);
    const uint16_t h = wb_f32_to_f16(0.001f);
    const size_t at = t == WB_QT_Q6_K ? 208 : 0; /* Q6_K's d is last; Q4_K / Q5_K's dmin follows d */
    for (size_t o = 0; o < n; o += bs) {
        p[o + at] = (uint8_t)h, p[o + at + 1] = (uint8_t)(h >> 8);
        if (t == WB_QT_Q4_K || t == WB_QT_Q5_K || t == WB_QT_Q4_1 || t == WB_QT_Q5_1) /* dmin / m */
            p[o + 2] = (uint8_t)h, p[o + 3] = (uint8_t)(h >> 8);
    }
    return p;
}

/* ------------------------------------------------------------ threads and their barrier */

typedef struct sweep {
    const wb_quant_kernels *k;
    int tiles; /* the tile layout (wb_quant_to_tiles) of the same matrices, mt */
    const qmat *mt;
    wb_qtype t;
    const qmat *m; /* g_layers * PER_LAYER + 1 matrices */
    const float *X;
    float *Y;
    const float *bw_buf; /* read job: BENCH_BW_BYTES split across the threads */
    int nt, read;
} sweep;

static atomic_int g_arrived, g_gen, g_stop;
static sweep g_job;
static double g_cpu[MAXT]; /* each thread's CPU ms for the last job */
static bench_bw_arg g_bw[MAXT];

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void barrier(int nt) {
    const int gen = atomic_load(&g_gen);
    if (atomic_fetch_add(&g_arrived, 1) == nt - 1) {
        atomic_store(&g_arrived, 0);
        atomic_fetch_add(&g_gen, 1);
        return;
    }
    for (long spins = 0; atomic_load(&g_gen) == gen; spins++) {
        if (spins < 4096) _mm_pause();
        else sched_yield(); /* a shared machine: give the core away while waiting */
    }
}

static void run_part(const sweep *s, int tid) {
    const double c0 = cpu_ms();
    if (s->read) {
        const size_t per = BENCH_BW_BYTES / 4 / (size_t)s->nt;
        g_bw[tid] = (bench_bw_arg){s->bw_buf + (size_t)tid * per, per, 0};
        bench_bw_read(&g_bw[tid]); /* a global: its sink stays live, so the reads do */
        g_cpu[tid] = cpu_ms() - c0;
        barrier(s->nt);
        return;
    }
    const int nm = g_layers * PER_LAYER + 1;
    for (int i = 0; i < nm; i++) {
        const qmat *m = s->tiles ? &s->mt[i] : &s->m[i];
        int r0, r1;
        wb_split_rows(m->rows, tid, s->nt, &r0, &r1);
        if (r0 < r1 && s->tiles)
            wb_gemm_qt_with(s->k, s->t, 0, s->Y, (size_t)m->rows, s->X, (size_t)m->cols, 1, m->w, NULL,
                            m->cols, r0, r1, 0, NULL);
        else if (r0 < r1)
            wb_gemm_q_with(s->k, s->t, s->Y, (size_t)m->rows, s->X, (size_t)m->cols, 1, m->w, NULL,
                           m->cols, r0, r1, 0, NULL);
        if (i == nm - 1) g_cpu[tid] = cpu_ms() - c0;
        if (i % PER_LAYER == PER_LAYER - 1 || i == nm - 1) barrier(s->nt);
    }
}

static void *worker(void *arg) {
    const int tid = (int)(intptr_t)arg;
    for (;;) {
        barrier(g_job.nt); /* start of a sweep */
        if (atomic_load(&g_stop)) return NULL;
        run_part(&g_job, tid);
    }
}

static double run_sweep(int nt) { /* wall ms of one job, g_job set */
    const double t0 = wb_clock_ms();
    barrier(nt);
    run_part(&g_job, 0);
    return wb_clock_ms() - t0;
}
static double max_cpu(int nt) { /* the slowest thread's CPU ms of the last job */
    double m = 0;
    for (int i = 0; i < nt; i++) m = g_cpu[i] > m ? g_cpu[i] : m;
    return m;
}

int main(int argc, char **argv) {
    bench_args(argc, argv,
               "[REPS=7] [THREADS=2] [q8_0|q4_0|q5_0|iq4_nl|q4_1|q5_1|both|q4_k|q5_k|q6_k|k] [VARIANT]\n  the quantized decode kernels "
               "alone, every variant, on one Qwen2.5-0.5B (K types: Qwen3-0.6B) decode step's matrices, against weight "
               "bytes / read rate",
               NULL);
    int reps = argc > 1 ? atoi(argv[1]) : 7, nt = argc > 2 ? atoi(argv[2]) : 2;
    const char *which = argc > 3 ? argv[3] : "both", *only = argc > 4 ? argv[4] : NULL;
    const int pf_default = wb_cpu()->qgemv_prefetch;
    if (reps < 3) reps = 3;
    if (reps > MAXR) reps = MAXR;
    if (nt < 1) nt = 1;
    if (nt > MAXT) nt = MAXT;
    const wb_quant_kernels *v[MAXV], *use[MAXV];
    int use_tiles[MAXV];
    const int nall = wb_quant_kernel_variants(v, MAXV);
    int nv = 0;
    for (int i = 1; i < nall && i < MAXV; i++) /* v[0] is portable */
        if (!only || strstr(wb_quant_kernels_name(v[i]), only)) {
            use_tiles[nv] = 0, use[nv++] = v[i];
            if (wb_quant_kernels_tiles(v[i]) && nv < MAXV) use_tiles[nv] = 1, use[nv++] = v[i];
            /* the AVX-512 tile GEMV once more with its software prefetch switched (cpu.h
             * qgemv_prefetch), in the same repeats */
            if (wb_quant_kernels_tiles(v[i]) && !strncmp(wb_quant_kernels_name(v[i]), "avx512", 6) && nv < MAXV)
                use_tiles[nv] = 2, use[nv++] = v[i];
        }
    if (!nv) {
        fprintf(stderr, "bench_quant_decode: no kernel variant matches\n");
        return 2;
    }
    printf("%s\n", wb_kernels_describe());
    print_load("before");
    float *bw_buf = aligned_alloc(64, BENCH_BW_BYTES);
    float *X = malloc(sizeof(float) * XMAX), *Y = malloc(sizeof(float) * VOCAB);
    if (!bw_buf || !X || !Y) return 1;
    memset(bw_buf, 1, BENCH_BW_BYTES);
    for (int i = 0; i < XMAX; i++) X[i] = (float)((int)(xr() >> 22) - 512) / 512.0f;

    pthread_t th[MAXT];
    g_job.nt = nt;
    for (int i = 1; i < nt; i++) pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);

    printf("\n%d threads, %d repeats, median [min - max]. Wall: ms per step and its ratio to weight bytes / the "
           "%d-thread read rate of the same repeat. CPU: the same with thread CPU times (the slowest thread's, for "
           "the step and for the read), which leaves out the time a busy machine takes the cores away\n\n"
           "| type | step | weight MB | variant | ms / step | read GB/s | step / bound | CPU ms / step | CPU read GB/s | CPU step / bound |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n", nt, reps, nt);
    for (int ti = 0; ti < 9; ti++) {
        const wb_qtype t = (const wb_qtype[]){WB_QT_Q8_0, WB_QT_Q4_0, WB_QT_Q5_0, WB_QT_IQ4_NL, WB_QT_Q4_1,
                                              WB_QT_Q5_1, WB_QT_Q4_K, WB_QT_Q5_K, WB_QT_Q6_K}[ti];
        const int kt = ti >= 6;
        if (!(kt ? !strcmp(which, "k") : !strcmp(which, "both")) && strcmp(which, wb_qtype_name(t))) continue;
        const step_shape *sh = kt ? &k_qwen3 : &k_qwen25;
        const int can_tile = wb_quant_tiles_ok(t, 16, sh->head_cols);
        g_layers = sh->layers;
        qmat m[LAYERS_MAX * PER_LAYER + 1], mt[LAYERS_MAX * PER_LAYER + 1];
        double bytes = 0;
        const int nm = sh->layers * PER_LAYER + 1;
        for (int i = 0; i < nm; i++) {
            const int rows = i < nm - 1 ? sh->m[i % PER_LAYER][0] : VOCAB;
            const int cols = i < nm - 1 ? sh->m[i % PER_LAYER][1] : sh->head_cols;
            m[i] = (qmat){make_blocks(t, rows, cols), rows, cols};
            if (!m[i].w) return 1;
            const size_t mb = wb_quant_row_bytes(t, cols) * (size_t)rows;
            uint8_t *tl = can_tile ? aligned_alloc(64, (mb + 63) & ~(size_t)63) : NULL;
            if (can_tile && !tl) return 1;
            if (tl) wb_quant_to_tiles(t, tl, m[i].w, rows, cols);
            mt[i] = (qmat){tl, rows, cols};
            bytes += (double)wb_quant_row_bytes(t, cols) * rows;
        }
        g_job.t = t, g_job.m = m, g_job.mt = mt, g_job.X = X, g_job.Y = Y;
        double ms[MAXV][MAXR], ratio[MAXV][MAXR], bw[MAXR], cms[MAXV][MAXR], cratio[MAXV][MAXR], cbw[MAXR];
        for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
            g_job.read = 1, g_job.bw_buf = bw_buf;
            const double g = (double)BENCH_BW_BYTES / (run_sweep(nt) * 1e6);
            const double gc = (double)BENCH_BW_BYTES / (max_cpu(nt) * 1e6);
            g_job.read = 0;
            for (int j = 0; j < nv; j++) {
                const int vi = (j + (k < 0 ? 0 : k)) % nv;
                if (use_tiles[vi] && !can_tile) continue;
                g_job.k = use[vi], g_job.tiles = use_tiles[vi] != 0;
                const int pf = use_tiles[vi] == 2 ? wb_cpu_set_qgemv_prefetch(!pf_default) : -1;
                const double t1 = run_sweep(nt), c1 = max_cpu(nt);
                if (pf >= 0) wb_cpu_set_qgemv_prefetch(pf);
                if (k < 0) continue;
                ms[vi][k] = t1, cms[vi][k] = c1;
                ratio[vi][k] = t1 / (bytes / (g * 1e6));
                cratio[vi][k] = c1 / (bytes / (gc * 1e6));
            }
            if (k >= 0) bw[k] = g, cbw[k] = gc;
        }
        qsort(bw, (size_t)reps, sizeof *bw, cmpd);
        qsort(cbw, (size_t)reps, sizeof *cbw, cmpd);
        for (int j = 0; j < nv; j++) {
            if (use_tiles[j] && !can_tile) continue;
            double *v4[4] = {ms[j], ratio[j], cms[j], cratio[j]};
            for (int q = 0; q < 4; q++) qsort(v4[q], (size_t)reps, sizeof(double), cmpd);
            const int h = reps / 2, e = reps - 1;
            printf("| %s | %s | %.0f | %s%s | %.2f [%.2f - %.2f] | %.1f [%.1f - %.1f] | %.2fx [%.2f - %.2f] | %.2f [%.2f - %.2f] | "
                   "%.1f [%.1f - %.1f] | %.2fx [%.2f - %.2f] |\n",
                   wb_qtype_name(t), sh->name, bytes / 1e6, wb_quant_kernels_name(use[j]), !use_tiles[j] ? "" : use_tiles[j] == 1 ? " (tile layout)" : pf_default ? " (tile layout, prefetch off)" : " (tile layout, WB_QPREFETCH=1)", ms[j][h], ms[j][0], ms[j][e], bw[h],
                   bw[0], bw[e], ratio[j][h], ratio[j][0], ratio[j][e], cms[j][h], cms[j][0], cms[j][e], cbw[h], cbw[0],
                   cbw[e], cratio[j][h], cratio[j][0], cratio[j][e]);
            fflush(stdout);
        }
        for (int i = 0; i < nm; i++) free((void *)m[i].w), free((void *)mt[i].w);
    }
    atomic_store(&g_stop, 1);
    barrier(nt);
    for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
    print_load("after");
    free(bw_buf), free(X), free(Y);
    return 0;
}
