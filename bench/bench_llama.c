/* bench_llama.c - a Qwen2.5-0.5B-shaped model (vocab 151936, hidden 896, 24 layers, 14 query and
 * 2 key/value heads of 64, MLP 4864, tied embeddings, q/k/v bias) with random BF16 weights
 * written to a temporary directory at start and deleted at the end (about 1 GB; nothing is
 * committed or downloaded).
 *
 * For BF16 (matrices used in BF16 from the mapping) and F32 (compute_f32: widened at load), at 1
 * and 2 threads: prefill of 44 and of 268 tokens (ms, and the fraction of the FMA peak measured
 * with the same thread count in the same repeat: 24 chains of 512-bit FMAs per thread) and decode (ms/token after that prompt), each as
 * median [min - max] over repeats, against the memory-bandwidth bound: bound = weight bytes /
 * bandwidth, since a decode step must read every weight once. The bandwidth is a streaming AVX2
 * read of 512 MB with the same thread count (four streams per thread, the BF16 GEMV's pattern),
 * measured in every repeat right before its decode, so that a machine shared with other work
 * slows both sides of the ratio alike; decode / bound is the median of the per-repeat ratios.
 *
 *   bench_llama [repeats] [decode tokens]        (run from the source root, for the tokenizer)
 *   bench_llama --bandwidth                      (the bandwidth measurement alone)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include "bench_args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <immintrin.h>

#include "cpu.h"
#include "wb_model.h"
#include "bench_qwen2_fixture.h"
#include "bench_floors.h"

/* ------------------------------------------------------------------------ FMA peak */

/* GFLOP/s of 24 independent chains of 512-bit FMAs (256-bit without AVX-512) per thread, nt
 * threads at once: the compute floor of a prefill, measured next to it. */
typedef struct peak_arg {
    double gflops;
} peak_arg;

/* g_dot: this run's peak is vdpbf16ps's (BF16 weights on the vdpbf16ps route), or with 2 the AMX tiles'
 * over three (BF16 weights on the AMX route: three tile products per product) */
static int g_have512, g_dot;
static void *peak_thread(void *arg) {
    ((peak_arg *)arg)->gflops = g_dot == 2  ? bench_amx_bf16_peak(200000, wb_clock_ms) / 3
                                : g_dot     ? bench_bf16dot_peak_512(1000000, wb_clock_ms)
                                : g_have512 ? bench_fma_peak_512(2000000, wb_clock_ms)
                                            : bench_fma_peak_256(4000000, wb_clock_ms);
    return NULL;
}

/* the compute floor of the prefill's matrix products at nt threads: the FMA peak, or for BF16
 * weights on the vdpbf16ps route that instruction's (the products run there, twice the FMA's FLOP
 * rate on Zen 5, so against the FMA peak the fraction would read over 100%) */
static double fma_peak(int nt, int dot) {
    pthread_t th[8];
    peak_arg a[8] = {{0}};
    g_dot = dot;
    for (int i = 1; i < nt; i++) pthread_create(&th[i], NULL, peak_thread, &a[i]);
    peak_thread(&a[0]);
    double sum = a[0].gflops;
    for (int i = 1; i < nt; i++) pthread_join(th[i], NULL), sum += a[i].gflops;
    return sum;
}

/* FLOPs of a prefill of n tokens from position 0, as computed: every layer matrix for each
 * token, attention scores and weighted values (token t sees t + 1 keys), except in the last
 * layer, where only q/k/v run for every token and attention (the last query block of 16, which
 * the kernel computes whole), o_proj and the MLP for the last one (core/llama.c); the head for
 * the last token only. */
static double prefill_flops(int n) {
    const double qkv = 2.0 * ((double)C * NH * HD + 2.0 * C * NKV * HD),
                 rest = 2.0 * ((double)NH * HD * C + 3.0 * C * F);
    const double att = 4.0 * (L - 1) * NH * HD * ((double)n * (n + 1) / 2);
    double last_att = 0;
    for (int t = (n - 1) / 16 * 16; t < n; t++) last_att += 4.0 * NH * HD * (t + 1);
    return n * (L * qkv + (L - 1) * rest) + rest + att + last_att + 2.0 * V * C;
}

/* ------------------------------------------------------------------------ statistics */

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct stat3 {
    double med, lo, hi;
} stat3;

static stat3 stats(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return (stat3){n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
}

/* ------------------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    bench_args(argc, argv, "[REPS=5] [NTOK=16] | --bandwidth\n  Llama-family forward pass and the memory-bandwidth bound",
               (const char *const[]){"--bandwidth", NULL});
    const char *core = wb_blas_preferred_coretype();
    if (core) {
        setenv("OPENBLAS_CORETYPE", core, 1);
        execv("/proc/self/exe", argv);
    }
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    int ntok = argc > 2 ? atoi(argv[2]) : 16;
    if (reps < 3) reps = 3;
    if (ntok < 2) ntok = 2;
    if (argc > 1 && !strcmp(argv[1], "--bandwidth")) { /* the bound's measurement alone */
        float *buf = aligned_alloc(64, BENCH_BW_BYTES);
        memset(buf, 1, BENCH_BW_BYTES);
        for (int nt = 1; nt <= 2; nt++) {
            double v[9];
            for (int r = 0; r < 9; r++) v[r] = bench_read_gbs(buf, nt);
            stat3 st = stats(v, 9);
            printf("read, %d thread(s): %.1f GB/s [%.1f - %.1f]\n", nt, st.med, st.lo, st.hi);
        }
        free(buf);
        return 0;
    }
    const char *tok = getenv("WB_BENCH_TOKENIZER");
    if (!tok) tok = "tests/vectors/family_qwen2_tokenizer.json";
    char dir[] = "/tmp/wb_bench_llama_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    double t0 = wb_clock_ms();
    if (write_model(dir, tok)) {
        fprintf(stderr, "bench_llama: cannot write the model to %s (tokenizer %s)\n", dir, tok);
        return 1;
    }
    printf("Qwen2.5-0.5B-shaped random BF16 model written in %.1f s to %s\n",
           (wb_clock_ms() - t0) / 1000, dir);
    printf("%s\n\n", wb_blas_info());

    float *bw_buf = aligned_alloc(64, BENCH_BW_BYTES);
    memset(bw_buf, 1, BENCH_BW_BYTES); /* fault the pages in before timing */

    enum { LONG = 268 };
    int32_t prompt[LONG];
    for (int i = 0; i < LONG; i++) prompt[i] = (int32_t)(17 + 13 * i) % 600;
    float *logits = malloc((size_t)V * sizeof *logits);
    g_have512 = __builtin_cpu_supports("avx512f");
    const int bf16_dot = wb_isa_current() == WB_ISA_AVX512 && wb_cpu()->bf16_amx ? 2
                         : wb_isa_current() == WB_ISA_AVX512 && wb_cpu()->bf16_dot ? 1
                                                                             : 0;
    char pre_rows[4][400];
    int n_pre = 0;
    printf("| weights | threads | weight GB | prefill 44 (ms) | decode (ms/token) | read GB/s | bound (ms/token) | decode / bound |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int f32 = 0; f32 <= 1; f32++) {
        wb_model_params p = wb_model_default_params();
        p.compute_f32 = f32;
        p.n_ctx = 512;
        wb_model *m = NULL;
        wb_err err = {0};
        if (wb_model_load_ex(dir, &p, &m, &err)) {
            fprintf(stderr, "bench_llama: %s\n", err.msg);
            break;
        }
        const double gb = (double)wb_model_weight_bytes(m) / 1e9;
        for (int nt = 1; nt <= 2; nt++) {
            wb_threads_set(nt);
            double *v = calloc((size_t)reps * 10, sizeof *v);
            double *pf = v, *dc = v + reps, *bw = v + 2 * reps, *bd = v + 3 * reps, *ra = v + 4 * reps;
            double *pl = v + 5 * reps, *pk = v + 6 * reps, *f44 = v + 7 * reps, *f268 = v + 8 * reps;
            for (int r = -1; r < reps; r++) { /* r = -1: warm-up (page faults, pool start) */
                wb_session *s = NULL;
                if (wb_session_new(m, 512, &s, &err)) break;
                const double pkr = fma_peak(nt, f32 ? 0 : bf16_dot);
                double a = wb_clock_ms();
                wb_session_prefill(s, prompt, PROMPT, logits, 0, &err);
                double a2 = wb_clock_ms();
                const double g = bench_read_gbs(bw_buf, nt);
                double b = wb_clock_ms();
                int32_t id = 1;
                for (int t = 0; t < ntok; t++) {
                    wb_session_decode(s, id, logits, &err);
                    id = (id * 31 + 7) % 600;
                }
                double c = wb_clock_ms();
                wb_session_reset(s);
                double d0 = wb_clock_ms();
                wb_session_prefill(s, prompt, LONG, logits, 0, &err);
                double d1 = wb_clock_ms();
                if (r >= 0) {
                    pf[r] = a2 - a;
                    dc[r] = (c - b) / ntok;
                    bw[r] = g;
                    bd[r] = gb / g * 1e3;
                    ra[r] = dc[r] / bd[r];
                    pl[r] = d1 - d0;
                    pk[r] = pkr;
                    f44[r] = prefill_flops(PROMPT) / (pf[r] * 1e6) / pkr;
                    f268[r] = prefill_flops(LONG) / (pl[r] * 1e6) / pkr;
                }
                wb_session_free(s);
            }
            stat3 sp = stats(pf, reps), sd = stats(dc, reps), sb = stats(bw, reps),
                  sbd = stats(bd, reps), sr = stats(ra, reps), sl = stats(pl, reps),
                  sk = stats(pk, reps), s44 = stats(f44, reps), s268 = stats(f268, reps);
            printf("| %s | %d | %.2f | %.0f [%.0f - %.0f] | %.1f [%.1f - %.1f] | %.1f [%.1f - %.1f] "
                   "| %.1f | %.2fx [%.2f - %.2f] |\n",
                   f32 ? "F32" : "BF16", nt, gb, sp.med, sp.lo, sp.hi, sd.med, sd.lo, sd.hi, sb.med,
                   sb.lo, sb.hi, sbd.med, sr.med, sr.lo, sr.hi);
            snprintf(pre_rows[n_pre++], sizeof pre_rows[0],
                     "| %s | %d | %.0f [%.0f - %.0f] | %.0f [%.0f - %.0f] | %.0f%% [%.0f - %.0f] "
                     "| %.0f [%.0f - %.0f] | %.0f%% [%.0f - %.0f] |",
                     f32 ? "F32" : bf16_dot == 2 ? "BF16 (AMX peak / 3)" : bf16_dot ? "BF16 (vdpbf16ps peak)" : "BF16", nt, sk.med, sk.lo, sk.hi, sp.med, sp.lo, sp.hi,
                     100 * s44.med, 100 * s44.lo, 100 * s44.hi, sl.med, sl.lo, sl.hi,
                     100 * s268.med, 100 * s268.lo, 100 * s268.hi);
            fflush(stdout);
            free(v);
        }
        wb_model_free(m);
    }
    printf("\nPrefill against the FMA peak measured in each repeat right before it (%s FMAs, the "
           "same thread count; a BF16 row marked vdpbf16ps: that instruction's peak, the route "
           "of AMD Zen 4/5 (WB_BF16_DOT=1 elsewhere, =0 off); marked AMX: a third of the tdpbf16ps peak, the AMX route's three "
           "tile products per product; of peak = the prefill's FLOPs / its time / that peak, median of "
           "the repeats). FLOPs: %.1f G for 44 tokens, %.1f G for 268 (the last layer past k/v and the head for the last token only).\n\n",
           g_have512 ? "512-bit" : "256-bit", prefill_flops(PROMPT) / 1e9, prefill_flops(LONG) / 1e9);
    printf("| weights | threads | peak GFLOP/s | prefill 44 (ms) | of peak | prefill 268 (ms) | of peak |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_pre; i++) printf("%s\n", pre_rows[i]);
    free(logits);
    free(bw_buf);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_llama: could not remove %s\n", dir);
    return 0;
}
