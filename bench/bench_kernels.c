/* bench_kernels.c - the matrix kernels alone, per dispatch level, against this machine's floor.
 *
 * The floor is measured in the same run, interleaved with the kernels, one thread:
 *   - FMA peak: 24 independent chains of 512-bit (AVX-512) or 256-bit (AVX2) FMAs in registers;
 *   - int8 dot peak: 12 chains of vpdpbusd (AVX512-VNNI) when the CPU has it (bench_floors.h);
 * and for every level the CPU supports, on Qwen2.5-0.5B's gate/up shape (4864 x 896):
 *   - BF16 GEMM over 44 and 268 inputs (prefill), GFLOP/s and the fraction of FMA peak;
 *   - Q8_0 GEMM over 44 inputs, Gop/s and the fraction of the int8 peak (when built in);
 *   - the BF16 prompt GEMM's widening and vdpbf16ps routes on both MLP shapes (bf16_routes).
 * Each figure is the median [min - max] of the repeats. Times are this thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so on a shared machine the time it spent descheduled is left out;
 * what other work does to the caches and the memory bus still counts: report `uptime` with the
 * numbers, and read the ratios, which were measured side by side.
 *
 *   bench_kernels [repeats]
 */
#include <stdint.h>
#include "bench_args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <immintrin.h>

#include "cpu.h"
#include "llama_internal.h"
#include "quant.h"
#include "model_family.h"

enum { ROWS = 4864, IN = 896, MAXR = 31 };

static double med(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#include "bench_floors.h"

static double lo(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}
static double hi(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

#define AVX2 __attribute__((target("avx2,fma")))

/* GB/s of reading n floats as four sequential streams (the decode kernels' access pattern) */
AVX2 static double stream_gbs(const float *p, size_t n) {
    const size_t q = n / 4;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    double t0 = cpu_ms();
    for (size_t i = 0; i + 8 <= q; i += 8) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + q + i));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 2 * q + i));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 3 * q + i));
    }
    double ms = cpu_ms() - t0;
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    if (t[0] == 12345.0f) puts("");
    return (double)n * 4 / (ms * 1e6);
}

/* The prompt GEMM's tile against where its operands are (issue 15: is the 268-row prefill limited
 * by the tile's loop or by its feed?). Over F32 panels packed beforehand (gemm_f32_panels, so no
 * packing is timed) and inputs packed by gemm_xpack: 56 inputs x 32 rows x 128 columns (the 32 x
 * 128 panel and the inputs, 44 KB: L1), 268 x 32 x 896 (a 115 KB panel and 960 KB of inputs: L2),
 * 268 x 4864 x 896 (17 MB of panels: L3 after the first call), the same over FEED_COPIES copies
 * of the panels in turn (from memory); then the calls a prefill makes, packing included, BF16
 * and F32 weights from memory (copies in turn). 1 thread, thread CPU time, interleaved. */
enum { FEED_COPIES = 16, FEED_CASES = 6 };
static int prompt_feed(const float *Wf, const uint16_t *W, const float *X, int reps, double P512,
                       double P256) {
    static const char *what[FEED_CASES] = {
        "tile over prepacked panels, 56 x 32 x 128 (L1)", "268 x 32 x 896 (panel and inputs in L2)",
        "268 x 4864 x 896 (panels in L3)", "268 x 4864 x 896, panels from memory",
        "BF16 packed call, 268 x 4864 x 896, weights from memory (packing included)",
        "F32 packed call, weights from memory (packing included)"};
    const size_t wn = (size_t)ROWS * IN;
    const int levels = (int)wb_isa_best();
    size_t pn = 0, xr = IN; /* xr: the floats of a packed input row, the largest of the levels */
    for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
        wb_isa o = wb_isa_limit((wb_isa)lv);
        if (wb_kt()->gemm_f32_panels_size && wb_kt()->gemm_f32_panels_size(ROWS, IN) > pn)
            pn = wb_kt()->gemm_f32_panels_size(ROWS, IN);
        if (wb_kt()->gemm_xrow(IN) > xr) xr = wb_kt()->gemm_xrow(IN);
        wb_isa_limit(o);
    }
    /* the panels are read by aligned loads */
    float *Pk = aligned_alloc(64, (4ull * FEED_COPIES * pn + 63) & ~63ull), *Fc = malloc(4ull * FEED_COPIES * wn);
    uint16_t *Bc = malloc(2ull * FEED_COPIES * wn);
    float *xp = aligned_alloc(64, (4ull * 268 * xr + 63) & ~63ull), *y = malloc(4ull * 268 * ROWS);
    if (!Pk || !Fc || !Bc || !xp || !y || !pn) {
        free(Pk), free(Fc), free(Bc), free(xp), free(y);
        return !pn ? 0 : 1;
    }
    for (int c = 0; c < FEED_COPIES; c++) {
        memcpy(Fc + c * wn, Wf, 4 * wn);
        memcpy(Bc + c * wn, W, 2 * wn);
    }
    static double g[WB_ISA_COUNT][FEED_CASES][MAXR];
    int turn = 0;
    for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
        wb_isa o = wb_isa_limit((wb_isa)lv);
        const wb_kernel_table *kt = wb_kt();
        for (int c = 0; c < FEED_COPIES; c++) kt->gemm_f32_panels(Pk + c * pn, Fc + c * wn, ROWS, IN);
        for (int k = 0; k < reps; k++) {
            for (int q = 0; q < FEED_CASES; q++) {
                const int nb = q ? 268 : 56, in = q ? IN : 128, rows = q >= 2 ? ROWS : 32;
                const int calls = q == 0 ? 400 : q == 1 ? 20 : 1, cp = 1 + turn++ % (FEED_COPIES - 1);
                kt->gemm_xpack(xp, X, in, nb, in, 0, nb, q == 4);
                const float *pk = q == 3 ? Pk + cp * pn : Pk;
                double t0 = cpu_ms();
                for (int i = 0; i < calls; i++) {
                    if (q == 4)
                        kt->gemm_bf16_packed(y, rows, xp, nb, Bc + cp * wn, NULL, in, 0, rows, 0);
                    else if (q == 5)
                        kt->gemm_f32_packed(y, rows, xp, nb, Fc + cp * wn, NULL, in, 0, rows, 0);
                    else
                        kt->gemm_f32_prepacked_packed(y, rows, xp, nb, pk, Fc, NULL, in, 0, rows, 0);
                }
                g[lv][q][k] = 2.0 * calls * nb * rows * in / ((cpu_ms() - t0) * 1e6);
            }
        }
        wb_isa_limit(o);
    }
    printf("\nPrompt GEMM tile against where its operands are, 1 thread, thread CPU time, GFLOP/s median [min - max]\n\n");
    printf("| level | case | GFLOP/s | of FMA peak |\n|---|---|---|---|\n");
    for (int lv = WB_ISA_AVX2; lv <= levels; lv++)
        for (int q = 0; q < FEED_CASES; q++) {
            const double m = med(g[lv][q], reps), peak = lv >= WB_ISA_AVX512 ? P512 : P256;
            printf("| %s | %s | %.0f [%.0f - %.0f] | %.0f%% |\n", wb_isa_name(lv), what[q], m,
                   lo(g[lv][q], reps), hi(g[lv][q], reps), 100 * m / peak);
        }
    free(Pk), free(Fc), free(Bc), free(xp), free(y);
    return 0;
}

/* The BF16 prompt GEMM's routes at the AVX-512 level (kernels_gemm.c: widening + FMA, vdpbf16ps
 * where the CPU has AVX512_BF16, AMX tiles where it has AMX-BF16, whichever cpu.c chose), 1
 * thread, on both of
 * Qwen2.5-0.5B's MLP shapes (gate/up 4864 x 896, down 896 x 4864, the weights in cache between
 * repeats as a prefill's sit in L3) at 44 and 268 inputs, the routes alternated in each repeat.
 * "of 2x peak": vdpbf16ps does 32 multiply-adds per instruction, so where it issues at the FMA's
 * rate its floor is twice the FMA peak; the AMX route's floor is a third of the tdpbf16ps peak
 * (bench_floors.h), printed below the table. */
static int bf16_routes(const uint16_t *W, int reps, double P512) {
    if (wb_isa_best() < WB_ISA_AVX512) return 0;
    const wb_isa o = wb_isa_limit(WB_ISA_AVX512);
    const wb_kernel_table *kt = wb_kt();
    enum { NS = 2, NN = 2 };
    static const int shp[NS][2] = {{ROWS, IN}, {IN, ROWS}}, nbs[NN] = {44, 268};
    float *Xw = malloc(4ull * 268 * ROWS), *Yw = malloc(4ull * 268 * ROWS);
    static double t[3][NS][NN][MAXR];
    if (!Xw || !Yw) {
        free(Xw), free(Yw);
        wb_isa_limit(o);
        return 1;
    }
    for (size_t i = 0; i < 268ull * ROWS; i++) Xw[i] = (float)((int)(i * 2654435761u >> 20 & 1023) - 512) / 512.0f;
    for (int k = -1; k < reps; k++) /* k = -1: a warm-up */
        for (int s = 0; s < NS; s++)
            for (int n = 0; n < NN; n++)
                for (int v = 0; v < 3; v++) {
                    const wb_gemm_bf16_route *rt = kt->bf16_route[v];
                    if (!rt) continue;
                    const int rows = shp[s][0], in = shp[s][1];
                    const double t0 = cpu_ms();
                    rt->gemm(Yw, rows, Xw, in, nbs[n], W, NULL, in, 0, rows, 0);
                    if (k >= 0) t[v][s][n][k] = cpu_ms() - t0;
                }
    printf("\nBF16 prompt GEMM routes (avx512, 1 thread, thread CPU time; in use: %s): GFLOP/s median "
           "[min - max], of the 512-bit FMA peak (%.0f GFLOP/s) and of twice it\n\n",
           kt->name_gemm_bf16_prompt, P512);
    printf("| route | rows x in | nb | GFLOP/s | of FMA peak | of 2x peak |\n|---|---|---|---|---|---|\n");
    for (int v = 0; v < 3; v++)
        for (int s = 0; s < NS; s++)
            for (int n = 0; n < NN; n++) {
                const wb_gemm_bf16_route *rt = kt->bf16_route[v];
                if (!rt) continue;
                double g[MAXR];
                for (int k = 0; k < reps; k++) g[k] = 2.0 * nbs[n] * shp[s][0] * shp[s][1] / 1e6 / t[v][s][n][k];
                const double m = med(g, reps);
                printf("| %s | %d x %d | %d | %.0f [%.0f - %.0f] | %.0f%% | %.0f%% |\n", rt->name,
                       shp[s][0], shp[s][1], nbs[n], m, lo(g, reps), hi(g, reps), 100 * m / P512,
                       50 * m / P512);
            }
    if (!kt->bf16_route[1]) printf("(no vdpbf16ps route: the CPU has no AVX512_BF16)\n");
    if (kt->bf16_route[2])
        printf("(AMX route's floor: a third of the tdpbf16ps peak, %.0f GFLOP/s here)\n",
               bench_amx_bf16_peak(200000, cpu_ms) / 3);
    else printf("(no AMX route: the CPU has no usable AMX-BF16)\n");
    free(Xw), free(Yw);
    wb_isa_limit(o);
    return 0;
}

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=7]\n  every kernel path this CPU supports against the portable one", NULL);
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1) reps = 1;
    if (reps > MAXR) reps = MAXR;
    const wb_cpu_features *f = wb_cpu();
    const int have512 = wb_isa_best() >= WB_ISA_AVX512, have_vnni = have512 && f->avx512vnni;
    printf("%s\n", wb_kernels_describe());
    uint16_t *W = malloc(2ull * ROWS * IN);
    float *Wf = malloc(4ull * ROWS * IN);
    float *X = malloc(4ull * 268 * IN), *Y = malloc(4ull * 268 * ROWS);
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)ROWS * IN; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        Wf[i] = (float)((int)(r >> 40 & 0xffff) - 32768) / 32768.0f;
        uint32_t u;
        memcpy(&u, &Wf[i], 4);
        W[i] = (uint16_t)(u >> 16);
    }
    for (size_t i = 0; i < 268ull * IN; i++) X[i] = (float)((int)(i * 2654435761u >> 20 & 1023) - 512) / 512.0f;
    size_t qbytes = wb_quant_row_bytes(WB_QT_Q8_0, IN) * ROWS;
    void *Wq = malloc(qbytes);
    for (int rr = 0; rr < ROWS; rr++)
        wb_quantize_row(WB_QT_Q8_0, (char *)Wq + wb_quant_row_bytes(WB_QT_Q8_0, IN) * rr,
                        Wf + (size_t)rr * IN, IN);
    void *xq = aligned_alloc(64, wb_quant_act_bytes(IN) * 268);

    double p512[MAXR], p256[MAXR], pv[MAXR], p8[MAXR];
    double g44[WB_ISA_COUNT][MAXR], g268[WB_ISA_COUNT][MAXR], q44[WB_ISA_COUNT][MAXR];
    const int levels = (int)wb_isa_best();
    for (int k = 0; k < reps; k++) {
        p512[k] = have512 ? bench_fma_peak_512(2000000, cpu_ms) : 0;
        p256[k] = bench_fma_peak_256(2000000, cpu_ms);
        pv[k] = have_vnni ? bench_int8_peak_512(2000000, cpu_ms) : 0;
        p8[k] = f->avxvnni ? bench_int8_peak_vnni256(2000000, cpu_ms) : bench_int8_peak_256(2000000, cpu_ms);
        for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            double t0 = cpu_ms();
            wb_gemv_bf16_forward(Y, ROWS, X, IN, 44, W, NULL, IN, 0, ROWS, 0);
            double t1 = cpu_ms();
            wb_gemv_bf16_forward(Y, ROWS, X, IN, 268, W, NULL, IN, 0, ROWS, 0);
            double t2 = cpu_ms();
            wb_gemm_q(WB_QT_Q8_0, Y, ROWS, X, IN, 44, Wq, NULL, IN, 0, ROWS, 0, xq);
            double t3 = cpu_ms();
            wb_isa_limit(o);
            g44[lv][k] = 2.0 * 44 * ROWS * IN / ((t1 - t0) * 1e6);
            g268[lv][k] = 2.0 * 268 * ROWS * IN / ((t2 - t1) * 1e6);
            q44[lv][k] = 2.0 * 44 * ROWS * IN / ((t3 - t2) * 1e6);
        }
    }
    double P512 = have512 ? med(p512, reps) : 0, P256 = med(p256, reps), PV = have_vnni ? med(pv, reps) : 0, P8 = med(p8, reps);
    printf("\n1 thread, %d repeats, median [min - max]\n\n", reps);
    printf("| floor | rate |\n|---|---|\n");
    if (have512) printf("| FMA peak 512-bit | %.0f GFLOP/s [%.0f - %.0f] |\n", P512, lo(p512, reps), hi(p512, reps));
    printf("| FMA peak 256-bit | %.0f GFLOP/s [%.0f - %.0f] |\n", P256, lo(p256, reps), hi(p256, reps));
    if (have_vnni) printf("| int8 vpdpbusd peak | %.0f Gop/s [%.0f - %.0f] |\n", PV, lo(pv, reps), hi(pv, reps));
    printf("| int8 peak 256-bit (%s) | %.0f Gop/s [%.0f - %.0f] |\n",
           f->avxvnni ? "AVX-VNNI vpdpbusd" : "vpmaddubsw+vpmaddwd+vpaddd", P8, lo(p8, reps), hi(p8, reps));
    printf("\n| level | BF16 GEMM 44x%dx%d | of FMA peak | BF16 GEMM 268 rows | of peak | Q8_0 GEMM 44 | of int8 peak |\n",
           ROWS, IN);
    printf("|---|---|---|---|---|---|---|\n");
    for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
        double peak = have512 ? P512 : P256, ipeak = have_vnni ? PV : P8;
        double a = med(g44[lv], reps), b = med(g268[lv], reps), c = med(q44[lv], reps);
        printf("| %s | %.0f GFLOP/s [%.0f - %.0f] | %.0f%% | %.0f [%.0f - %.0f] | %.0f%% | %.0f Gop/s [%.0f - %.0f] | %.0f%% |\n",
               wb_isa_name(lv), a, lo(g44[lv], reps), hi(g44[lv], reps), 100 * a / peak, b,
               lo(g268[lv], reps), hi(g268[lv], reps), 100 * b / peak, c, lo(q44[lv], reps),
               hi(q44[lv], reps), 100 * c / ipeak);
    }

    /* Decode: one input through a matrix far larger than the caches, against a streaming read
     * of a buffer 4x its size (four streams, 256-bit loads), interleaved per repeat. */
    enum { DROWS = 65536 };
    uint16_t *Db = malloc(2ull * DROWS * IN);
    const size_t dq = wb_quant_row_bytes(WB_QT_Q8_0, IN) * DROWS;
    uint8_t *Dq = malloc(dq);
    const size_t SB = 256ull << 20;
    float *S = malloc(SB);
    float *Dy = malloc(4ull * DROWS);
    if (!Db || !Dq || !S || !Dy) return 1;
    memset(S, 1, SB);
    for (size_t i = 0; i < (size_t)DROWS * IN; i++) Db[i] = W[i % ((size_t)ROWS * IN)];
    for (int rr = 0; rr < DROWS; rr++)
        memcpy(Dq + wb_quant_row_bytes(WB_QT_Q8_0, IN) * rr,
               (char *)Wq + wb_quant_row_bytes(WB_QT_Q8_0, IN) * (rr % ROWS),
               wb_quant_row_bytes(WB_QT_Q8_0, IN));
    double bw[MAXR], db[WB_ISA_COUNT][MAXR], dqv[WB_ISA_COUNT][MAXR];
    for (int k = 0; k < reps; k++) {
        bw[k] = stream_gbs(S, SB / sizeof(float));
        for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            double t0 = cpu_ms();
            wb_gemv_bf16_forward(Dy, DROWS, X, IN, 1, Db, NULL, IN, 0, DROWS, 0);
            double t1 = cpu_ms();
            wb_gemm_q(WB_QT_Q8_0, Dy, DROWS, X, IN, 1, Dq, NULL, IN, 0, DROWS, 0, NULL);
            double t2 = cpu_ms();
            wb_isa_limit(o);
            db[lv][k] = 2.0 * DROWS * IN / ((t1 - t0) * 1e6);
            dqv[lv][k] = (double)dq / ((t2 - t1) * 1e6);
        }
    }
    const double BW = med(bw, reps);
    printf("\nDecode GEMV, %d x %d (BF16 %.0f MB, Q8_0 %.0f MB), 1 thread; streaming read %.1f GB/s [%.1f - %.1f]\n\n",
           DROWS, IN, 2.0 * DROWS * IN / 1e6, dq / 1e6, BW, lo(bw, reps), hi(bw, reps));
    printf("| level | BF16 GB/s | of stream | Q8_0 GB/s | of stream |\n|---|---|---|---|---|\n");
    for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
        double a = med(db[lv], reps), c = med(dqv[lv], reps);
        printf("| %s | %.1f [%.1f - %.1f] | %.0f%% | %.1f [%.1f - %.1f] | %.0f%% |\n", wb_isa_name(lv), a,
               lo(db[lv], reps), hi(db[lv], reps), 100 * a / BW, c, lo(dqv[lv], reps),
               hi(dqv[lv], reps), 100 * c / BW);
    }

    /* Batched decode: nb inputs through the same large matrix (weights from memory, as in a
     * batched decode step), BF16 and F32 weights. "x nb=1" is the throughput gain: nb times the
     * nb = 1 time over the nb time, per repeat, median. */
    enum { NBS = 6 };
    static const int nbs[NBS] = {1, 2, 4, 8, 16, 44};
    float *Df = malloc(4ull * DROWS * IN), *Dyb = malloc(4ull * DROWS * 44);
    if (!Df || !Dyb) return 1;
    for (size_t i = 0; i < (size_t)DROWS * IN; i++) Df[i] = Wf[i % ((size_t)ROWS * IN)];
    double bt[2][WB_ISA_COUNT][NBS][MAXR];
    /* thread CPU time, not wall time: on a shared machine the time this thread was descheduled
     * is left out (what other work does to the caches and the memory bus still counts) */
    for (int k = 0; k < reps; k++)
        for (int lv = WB_ISA_PORTABLE + 1; lv <= levels; lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            for (int bi = 0; bi < NBS; bi++) {
                double t0 = cpu_ms();
                wb_gemv_bf16_forward(Dyb, DROWS, X, IN, nbs[bi], Db, NULL, IN, 0, DROWS, 0);
                double t1 = cpu_ms();
                wb_mat Mf = {.w = Df, .dtype = WB_MAT_F32, .rows = DROWS, .cols = IN};
                wb_mat_mul(Dyb, X, nbs[bi], &Mf, NULL, 0, DROWS, 0, 0);
                double t2 = cpu_ms();
                bt[0][lv][bi][k] = t1 - t0;
                bt[1][lv][bi][k] = t2 - t1;
            }
            wb_isa_limit(o);
        }
    printf("\nBatched GEMV, %d x %d from memory (BF16 %.0f MB, F32 %.0f MB), 1 thread: thread CPU ms per call "
           "median [min - max], GFLOP/s, and x nb=1 = nb * t(1) / t(nb) (median of per-repeat ratios)\n\n",
           DROWS, IN, 2.0 * DROWS * IN / 1e6, 4.0 * DROWS * IN / 1e6);
    printf("| level | weights | nb | ms | GFLOP/s | of FMA peak | x nb=1 |\n|---|---|---|---|---|---|---|\n");
    for (int lv = WB_ISA_PORTABLE + 1; lv <= levels; lv++)
        for (int d = 0; d < 2; d++)
            for (int bi = 0; bi < NBS; bi++) {
                double ratio[MAXR], t[MAXR];
                for (int k = 0; k < reps; k++) {
                    ratio[k] = nbs[bi] * bt[d][lv][0][k] / bt[d][lv][bi][k];
                    t[k] = bt[d][lv][bi][k];
                }
                const double tm = med(t, reps), g = 2.0 * nbs[bi] * DROWS * IN / (tm * 1e6);
                const double peak = lv >= WB_ISA_AVX512 ? P512 : P256;
                printf("| %s | %s | %d | %.1f [%.1f - %.1f] | %.0f | %.0f%% | %.2f |\n", wb_isa_name(lv),
                       d ? "F32" : "BF16", nbs[bi], tm, lo(t, reps), hi(t, reps), g, 100 * g / peak,
                       med(ratio, reps));
            }

    /* Prompt GEMM (kernels_gemm.c) against the GEMV kernels on the same calls: the in-cache
     * gate/up shape (4864 x 896, as a prefill's weights sit in L3 between its own rows) at 44
     * and 268 inputs, and the 65536 x 896 matrix from memory at small nb, where the crossover
     * (WB_PROMPT_ROWS) is. GEMM / GEMV = the GEMV's time over the GEMM's, per repeat, median. */
    enum { PNB = 10 };
    /* 32-48: the AVX-512 short-prompt tile (weights read in place), 96 and 268 the packed one */
    static const int pnbs[PNB] = {4, 8, 12, 16, 24, 32, 44, 48, 96, 268};
    double pg[2][2][WB_ISA_COUNT][PNB][MAXR]; /* [gemm?][bf16?][level][nb][rep] ms */
    float *Yp = malloc(4ull * ROWS * 268);
    float *Yd = malloc(4ull * DROWS * 24);
    if (!Yp || !Yd) return 1;
    for (int k = 0; k < reps; k++)
        for (int lv = WB_ISA_AVX2; lv <= levels; lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            const wb_kernel_table *kt = wb_kt();
            for (int bi = 0; bi < PNB; bi++) {
                const int nb = pnbs[bi], big = nb <= 24; /* small nb: weights from memory */
                const int rows = big ? DROWS : ROWS;
                const uint16_t *wb = big ? Db : W;
                const float *wf = big ? Df : Wf;
                float *y = big ? Yd : Yp;
                double t0 = cpu_ms();
                wb_gemv_bf16_forward(y, rows, X, IN, nb, wb, NULL, IN, 0, rows, 0);
                double t1 = cpu_ms();
                kt->gemm_bf16(y, rows, X, IN, nb, wb, NULL, IN, 0, rows, 0);
                double t2 = cpu_ms();
                wb_gemv_batch_forward(y, rows, X, IN, nb, wf, NULL, IN, 0, rows, 0);
                double t3 = cpu_ms();
                kt->gemm_f32(y, rows, X, IN, nb, wf, NULL, IN, 0, rows, 0);
                double t4 = cpu_ms();
                pg[0][1][lv][bi][k] = t1 - t0, pg[1][1][lv][bi][k] = t2 - t1;
                pg[0][0][lv][bi][k] = t3 - t2, pg[1][0][lv][bi][k] = t4 - t3;
            }
            wb_isa_limit(o);
        }
    printf("\nPrompt GEMM (%s) against the GEMV kernels, 1 thread, thread CPU time: nb <= 24 on %d x %d "
           "from memory, above on %d x %d (in cache); GFLOP/s median [min - max], of FMA peak, GEMM / GEMV "
           "speed (median of per-repeat ratios)\n\n",
           wb_kt()->name_gemm, DROWS, IN, ROWS, IN);
    printf("| level | weights | nb | GEMV GFLOP/s | GEMM GFLOP/s | GEMM of FMA peak | GEMM / GEMV |\n|---|---|---|---|---|---|---|\n");
    for (int lv = WB_ISA_AVX2; lv <= levels; lv++)
        for (int d = 1; d >= 0; d--)
            for (int bi = 0; bi < PNB; bi++) {
                const int nb = pnbs[bi], rows = nb <= 24 ? DROWS : ROWS;
                const double fl = 2.0 * nb * rows * IN / 1e6;
                double gv[MAXR], gm[MAXR], ra[MAXR];
                for (int k = 0; k < reps; k++) {
                    gv[k] = fl / pg[0][d][lv][bi][k];
                    gm[k] = fl / pg[1][d][lv][bi][k];
                    ra[k] = pg[0][d][lv][bi][k] / pg[1][d][lv][bi][k];
                }
                const double peak = lv >= WB_ISA_AVX512 ? P512 : P256, m = med(gm, reps);
                printf("| %s | %s | %d | %.0f [%.0f - %.0f] | %.0f [%.0f - %.0f] | %.0f%% | %.2f |\n",
                       wb_isa_name(lv), d ? "BF16" : "F32", nb, med(gv, reps), lo(gv, reps),
                       hi(gv, reps), m, lo(gm, reps), hi(gm, reps), 100 * m / peak, med(ra, reps));
            }
    free(Yp), free(Yd);
    if (prompt_feed(Wf, W, X, reps, P512, P256)) return 1;
    if (bf16_routes(W, reps, P512)) return 1;
    free(Df), free(Dyb);
    free(Db), free(Dq), free(S), free(Dy);
    free(W), free(Wf), free(X), free(Y), free(Wq), free(xq);
    return 0;
}
