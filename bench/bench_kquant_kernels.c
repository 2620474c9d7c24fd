/* bench_kquant_kernels.c - the Q4_K / Q6_K / Q5_0 product of every kernel variant this CPU runs
 * (wb_quant_kernel_variants, portable excluded: the types without a tile layout), beside Q4_0 and
 * Q8_0 in the file layout for scale (Q8_0: what Q5_0 cost when it was requantized at load; Q5_0
 * prompts run Q8_0's kernels on rows widened per call), on one 896 x 4864 matrix
 * (Qwen2.5-0.5B's down projection; a 4864-wide row is a whole number of 256-value super-blocks)
 * at 1 input and at N inputs (default 268), 1 thread. Times are thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID), so a shared machine's descheduling is left out: median and range
 * over the repeats. The matrix (2.4-3.4 MB) stays in the caches between repeats: the kernels'
 * compute rate, not a model's. K-quant rows are random bytes with modest F16 scales (the kernels
 * do not depend on the values), Q5_0 too; Q4_0 and Q8_0 rows come from the quantizer.
 *
 *   bench_kquant_kernels [repeats] [inputs]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_args.h"
#include "bench_cputime.h"
#include "quant.h"
#include "wb_model.h"

static float frand(void) { return (float)(bench_rand32() % 20001) / 10000.0f - 1.0f; }
static void put16(unsigned char *p, float f) {
    const uint16_t h = wb_f32_to_f16(f);
    p[0] = (unsigned char)(h & 255), p[1] = (unsigned char)(h >> 8);
}
static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    bench_args(argc, argv,
               "[repeats] [inputs]\n  Q4_K / Q6_K / Q5_0 (and Q4_0, Q8_0) products of every kernel variant, 896 x 4864, "
               "1 thread, thread CPU time",
               NULL);
    const int reps = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 5;
    const int nbig = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 268;
    enum { ROWS = 896, IN = 4864 };
    const wb_qtype types[5] = {WB_QT_Q4_K, WB_QT_Q6_K, WB_QT_Q5_0, WB_QT_Q4_0, WB_QT_Q8_0};
    float *X = malloc(sizeof(float) * (size_t)nbig * IN), *Y = malloc(sizeof(float) * (size_t)nbig * ROWS);
    double *t = malloc(sizeof(double) * (size_t)reps);
    unsigned char *W = malloc(wb_quant_row_bytes(WB_QT_Q8_0, IN) * ROWS);
    float *tmp = malloc(sizeof(float) * IN);
    if (!X || !Y || !t || !W || !tmp) {
        fprintf(stderr, "bench_kquant_kernels: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)nbig * IN; i++) X[i] = frand();
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    printf("1 thread, %d x %d, thread CPU time per product, median [min - max] of %d repeats\n\n", ROWS, IN, reps);
    printf("| type | variant | inputs | ms | Gop/s |\n|---|---|---|---|---|\n");
    for (int ti = 0; ti < 5; ti++) {
        const wb_qtype qt = types[ti];
        const size_t rb = wb_quant_row_bytes(qt, IN), bs = wb_qtype_block_bytes(qt);
        for (int r = 0; r < ROWS; r++) {
            unsigned char *row = W + rb * (size_t)r;
            if (qt == WB_QT_Q4_0 || qt == WB_QT_Q8_0) {
                for (int i = 0; i < IN; i++) tmp[i] = frand();
                wb_quantize_row(qt, row, tmp, IN);
                continue;
            }
            for (size_t i = 0; i < rb; i++) row[i] = (unsigned char)bench_rand32();
            for (int b = 0; qt == WB_QT_Q5_0 && b < IN / 32; b++) put16(row + (size_t)b * bs, 0.01f);
            for (int b = 0; qt != WB_QT_Q5_0 && b < IN / 256; b++) {
                unsigned char *blk = row + (size_t)b * bs;
                if (qt == WB_QT_Q4_K) put16(blk, 0.01f), put16(blk + 2, 0.02f);
                else put16(blk + 208, 0.003f);
            }
        }
        for (int k = 1; k < nv; k++)
            for (int n = 0; n < 2; n++) {
                const int nb = n ? nbig : 1, inner = n ? 1 : 100;
                for (int r = 0; r < reps; r++) {
                    const double a = bench_thread_ms();
                    for (int q = 0; q < inner; q++)
                        wb_gemm_q_with(v[k], qt, Y, ROWS, X, IN, nb, W, NULL, IN, 0, ROWS, 0, NULL);
                    t[r] = (bench_thread_ms() - a) / inner;
                }
                qsort(t, (size_t)reps, sizeof *t, cmp);
                const double med = t[reps / 2];
                printf("| %s | %s | %d | %.3f [%.3f - %.3f] | %.1f |\n", wb_qtype_name(qt),
                       wb_quant_kernels_name(v[k]), nb, med, t[0], t[reps - 1], 2.0 * ROWS * IN * nb / med / 1e6);
                fflush(stdout);
            }
    }
    free(X), free(Y), free(t), free(W), free(tmp);
    return 0;
}
