/* bench_attention.c - the attention kernels alone on Qwen2.5-0.5B's shape (14 query heads, 2 KV
 * heads of 64), one layer of a prefill of P tokens at every kernel level this CPU has, and decode
 * (one query per head) over P cached keys.
 *
 * Prefill work is split as core/llama.c splits it (items of 16 queries x the 7 heads of one KV
 * head); time is the thread's CPU time (a shared machine's descheduling left out), median [min -
 * max] of REPS repeats; GFLOP/s counts the causal multiply-adds (4 x head_dim per query and key
 * it sees, scores and weighted sum). x avx2 = the avx2 level's time / this level's, same run.
 */
#include "bench_args.h"
#include "cpu.h"
#include "model_internal.h"

#include <stdint.h>
#include <time.h>

enum { NH = 14, NKV = 2, HD = 64, QB = 16, Q = NH * HD, KV = NKV * HD };

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* one layer's attention for a prompt of n tokens from position 0, items as llama.c's */
static void prefill_layer(float *out, const float *q, const float *k, const float *v, int n,
                          float *sc) {
    const int g = NH / NKV;
    for (int q0 = 0; q0 < n; q0 += QB) {
        const int nq = n - q0 < QB ? n - q0 : QB;
        for (int h = 0; h < NKV; h++)
            wb_attention_block_forward(out + (size_t)q0 * Q + (size_t)h * g * HD, Q,
                                       q + (size_t)q0 * Q + (size_t)h * g * HD, Q, k + h * HD,
                                       v + h * HD, KV, q0, nq, g, HD, 0, sc);
    }
}

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=9]\n  attention kernels on Qwen2.5-0.5B's head shape, every level",
               NULL);
    const int reps = argc > 1 && atoi(argv[1]) >= 3 ? atoi(argv[1]) : 9;
    const int lens[] = {44, 268, 1024};
    const int NMAX = 1024;
    float *q = malloc(sizeof(float) * NMAX * Q), *out = malloc(sizeof(float) * NMAX * Q);
    float *k = malloc(sizeof(float) * NMAX * KV), *v = malloc(sizeof(float) * NMAX * KV);
    float *sc = malloc(sizeof(float) * wb_attention_block_scratch(0, NMAX, HD));
    uint64_t st = 88172645463325252ull;
    for (size_t i = 0; i < (size_t)NMAX * Q; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        q[i] = (float)((st >> 40) * (1.0 / 8388608.0)) - 1.0f;
    }
    for (size_t i = 0; i < (size_t)NMAX * KV; i++) k[i] = q[i] * 0.5f, v[i] = q[(i * 7) % (NMAX * Q)];
    double *t = malloc(sizeof(double) * reps);
    printf("%s\n\n", wb_kernels_describe());
    printf("| level | tokens | prefill layer ms (CPU) | GFLOP/s | x avx2 | decode 14 heads us (CPU) |\n");
    printf("|---|---|---|---|---|---|\n");
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int n = lens[li];
        double flops = 0;
        for (int i = 0; i < n; i++) flops += 4.0 * HD * (i + 1) * NH;
        double base = 0;
        for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
            wb_isa old = wb_isa_limit((wb_isa)lv);
            prefill_layer(out, q, k, v, n, sc); /* warm-up */
            for (int r = 0; r < reps; r++) {
                const double a = cpu_ms();
                prefill_layer(out, q, k, v, n, sc);
                t[r] = cpu_ms() - a;
            }
            qsort(t, reps, sizeof *t, cmp);
            const double med = t[reps / 2], lo = t[0], hi = t[reps - 1];
            if (lv == WB_ISA_AVX2) base = med;
            /* decode: the last position's query of every head, 20 times per repeat */
            double d[64];
            for (int r = 0; r < reps && r < 64; r++) {
                const double a = cpu_ms();
                for (int it = 0; it < 20; it++)
                    for (int h = 0; h < NH; h++)
                        wb_attention_forward(out + h * HD, q + (size_t)(n - 1) * Q + h * HD,
                                             k + (h / (NH / NKV)) * HD, v + (h / (NH / NKV)) * HD,
                                             KV, n - 1, HD, sc);
                d[r] = (cpu_ms() - a) / 20 * 1e3;
            }
            const int nd = reps < 64 ? reps : 64;
            qsort(d, nd, sizeof *d, cmp);
            wb_isa_limit(old);
            char ratio[32] = "";
            if (base > 0) snprintf(ratio, sizeof ratio, "%.2f", base / med);
            printf("| %s | %d | %.3f [%.3f - %.3f] | %.1f | %s | %.1f [%.1f - %.1f] |\n",
                   wb_isa_name((wb_isa)lv), n, med, lo, hi, flops / (med * 1e6), ratio, d[nd / 2],
                   d[0], d[nd - 1]);
            fflush(stdout);
        }
    }
    free(q), free(out), free(k), free(v), free(sc), free(t);
    return 0;
}
