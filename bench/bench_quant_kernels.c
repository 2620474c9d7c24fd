/* bench_quant_kernels.c - every Q8_0 / Q4_0 / Q5_0 kernel variant this CPU runs (wb_quant_kernel_variants:
 * portable excluded, AVX2 maddubs, AVX2 + AVX-VNNI, AVX-512 VNNI) on Qwen2.5-0.5B's MLP shapes
 * (896 x 4864, the down projection, and 4864 x 896, gate/up) at 1, 44 and 268 inputs, 1 thread.
 * Times are thread CPU time (CLOCK_THREAD_CPUTIME_ID), so a shared machine's descheduling is left
 * out; each repeat measures the int8 vpdpbusd peak (24 independent chains) right before it, and
 * the fraction of peak is the median Gop/s over the median peak. Inputs are quantized inside each
 * product, as in a model. The matrices (4.6 MB) stay in the last-level cache between repeats,
 * so this is the kernels' compute rate, not a model's (which streams its weights from memory).
 * With --stream each repeat runs one product on each of enough copies of the matrix (about
 * 100 MB, like a model's layers) that every product reads its weights from memory, and the time
 * is the mean per product: the memory side of a prefill, still in thread CPU time.
 *
 *   bench_quant_kernels [repeats] [variant-substring] [--stream]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "bench_cputime.h"
#include "bench_floors.h"
#include "cpu.h"
#include "quant.h"
#include "wb_model.h"

#define MAXR 31

static int cmpd(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    static const char *const opts[] = {"--stream", NULL};
    bench_args(argc, argv, "[REPS=5] [VARIANT] [--stream]\n  Q8_0/Q4_0/Q5_0 kernel variants on Qwen2.5-0.5B's MLP shapes, "
               "1 thread, thread CPU time, against the int8 peak measured beside each repeat;\n"
               "  --stream: weights read from memory (a product per copy of ~100 MB of copies)", opts);
    int stream = 0, npos = 0;
    const char *pos[2] = {NULL, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--stream") == 0) stream = 1;
        else if (npos < 2) pos[npos++] = argv[i];
    }
    int reps = pos[0] ? atoi(pos[0]) : 5;
    if (reps < 3) reps = 3;
    if (reps > MAXR) reps = MAXR;
    const char *only = pos[1];
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    enum { MAXIN = 4864, MAXNB = 268 };
    static const int shapes[2][2] = {{896, 4864}, {4864, 896}}, nbs[3] = {1, 44, 268};
    float *X = malloc(sizeof(float) * MAXNB * MAXIN), *Y = malloc(sizeof(float) * MAXNB * MAXIN);
    float *row = malloc(sizeof(float) * MAXIN);
    if (!X || !Y || !row) return 1;
    for (int i = 0; i < MAXNB * MAXIN; i++) X[i] = (float)((int)(bench_rand32() >> 22) - 512) / 512.0f;
    printf("%s", stream ? "weights streamed from memory (--stream)\n" : "");
    printf("| type | rows x cols | variant | inputs | ms (CPU) | Gop/s | int8 peak Gop/s | of peak |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int t = 0; t < 3; t++) {
        const wb_qtype qt = t == 0 ? WB_QT_Q8_0 : t == 1 ? WB_QT_Q4_0 : WB_QT_Q5_0;
        for (int s = 0; s < 2; s++) {
            const int R = shapes[s][0], IN = shapes[s][1];
            const size_t rb = wb_quant_row_bytes(qt, IN), mb = (rb * (size_t)R + 63) & ~(size_t)63;
            const int copies = stream ? (int)((100u << 20) / mb) + 1 : 1;
            unsigned char *W = aligned_alloc(64, mb * (size_t)copies);
            if (!W) return 1;
            for (int r = 0; r < R; r++) {
                for (int i = 0; i < IN; i++) row[i] = (float)((int)(bench_rand32() >> 22) - 512) / 512.0f;
                wb_quantize_row(qt, W + rb * (size_t)r, row, IN);
            }
            for (int c = 1; c < copies; c++) memcpy(W + mb * (size_t)c, W, mb);
            unsigned char *Wt = aligned_alloc(64, mb * (size_t)copies); /* the tile layout */
            if (!Wt) return 1;
            for (int c = 0; c < copies; c++) wb_quant_to_tiles(qt, Wt + mb * (size_t)c, W, R, IN);
            for (int kk = 2; kk < 2 * nv; kk++) { /* v[0] is portable; odd kk: the tile layout */
                const int k = kk / 2, tl = kk % 2;
                if (only && !strstr(wb_quant_kernels_name(v[k]), only)) continue;
                if (tl && !wb_quant_kernels_tiles(v[k])) continue;
                const unsigned char *M = tl ? Wt : W;
                for (int q = 0; q < 3; q++) {
                    const int nb = nbs[q], it = stream ? copies : nb == 1 ? 20 : 1;
                    double ts[MAXR], pk[MAXR];
                    if (tl) wb_gemm_qt_with(v[k], qt, 0, Y, (size_t)R, X, IN, nb, M, NULL, IN, 0, R, 0, NULL);
                    else wb_gemm_q_with(v[k], qt, Y, (size_t)R, X, IN, nb, M, NULL, IN, 0, R, 0, NULL);
                    for (int rep = 0; rep < reps; rep++) {
                        pk[rep] = bench_int8_peak_variant(wb_quant_kernels_name(v[k]), 400000, bench_thread_ms);
                        const double t0 = bench_thread_ms();
                        for (int i = 0; i < it; i++)
                            if (tl) wb_gemm_qt_with(v[k], qt, 0, Y, (size_t)R, X, IN, nb, M + mb * (size_t)(i % copies), NULL, IN, 0, R, 0, NULL);
                            else wb_gemm_q_with(v[k], qt, Y, (size_t)R, X, IN, nb, M + mb * (size_t)(i % copies), NULL, IN, 0, R, 0, NULL);
                        ts[rep] = (bench_thread_ms() - t0) / it;
                    }
                    qsort(ts, (size_t)reps, sizeof *ts, cmpd);
                    qsort(pk, (size_t)reps, sizeof *pk, cmpd);
                    const double gop = 2.0 * nb * R * IN / (ts[reps / 2] * 1e6);
                    printf("| %s | %d x %d | %s%s | %d | %.3f [%.3f - %.3f] | %.0f | %.0f | %.0f%% |\n",
                           wb_qtype_name(qt), R, IN, wb_quant_kernels_name(v[k]), tl ? " (tile layout)" : "", nb, ts[reps / 2], ts[0],
                           ts[reps - 1], gop, pk[reps / 2], 100 * gop / pk[reps / 2]);
                    fflush(stdout);
                }
            }
            free(W), free(Wt);
        }
    }
    free(X), free(Y), free(row);
    return 0;
}
