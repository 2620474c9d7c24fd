/* bench_floors.h - the machine floors benchmarks print beside their figures, measured in the
 * same run: the FMA peak of one thread (512- and 256-bit), its int8 `vpdpbusd` and BF16
 * `vdpbf16ps` peaks, and the streaming read rate in the pattern the GEMV kernels read weights with. Header-only (static
 * functions), like bench_args.h; include after <immintrin.h> and <pthread.h>. */
#ifndef WB_BENCH_FLOORS_H
#define WB_BENCH_FLOORS_H

#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "wb_base.h"

/* wb_clock_ms (wall) or a thread-CPU-time clock (bench_kernels: descheduling left out) */
typedef double (*bench_clock_fn)(void);

/* GFLOP/s of 24 independent chains of 512-bit FMAs, iters rounds, on the calling thread */
__attribute__((target("avx512f,fma"), unused)) static double bench_fma_peak_512(long iters,
                                                                         bench_clock_fn clk) {
    __m512 a[24];
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps(1.0f + i * 1e-7f);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    double ms = clk() - t0;
    float s = 0;
    for (int i = 0; i < 24; i++) s += _mm512_reduce_add_ps(a[i]);
    if (s == 12345.0f) puts(""); /* keeps the chains live */
    return (double)iters * 24 * 16 * 2 / (ms * 1e6);
}

/* One round of 12 independent chains of the 3-operand instruction OP (a_i = OP(a_i, u, s)) on the
 * accumulators a0..a11 of the caller: asm operands keep them in registers, as a C array of
 * accumulators does not (the int8 peak below says why that matters). */
#define BENCH_CHAINS12(OP, u, s)                                                                  \
    __asm__ volatile(OP " %[s_], %[u_], %[a0]\n\t" OP " %[s_], %[u_], %[a1]\n\t"                 \
                     OP " %[s_], %[u_], %[a2]\n\t" OP " %[s_], %[u_], %[a3]\n\t"                 \
                     OP " %[s_], %[u_], %[a4]\n\t" OP " %[s_], %[u_], %[a5]\n\t"                 \
                     OP " %[s_], %[u_], %[a6]\n\t" OP " %[s_], %[u_], %[a7]\n\t"                 \
                     OP " %[s_], %[u_], %[a8]\n\t" OP " %[s_], %[u_], %[a9]\n\t"                 \
                     OP " %[s_], %[u_], %[a10]\n\t" OP " %[s_], %[u_], %[a11]"                     \
                     : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), \
                       [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), \
                       [a10] "+v"(a10), [a11] "+v"(a11)                                           \
                     : [u_] "v"(u), [s_] "v"(s))

/* Gop/s (a multiply and an add per byte pair) of 12 independent chains of 512-bit `vpdpbusd`,
 * iters rounds, on the calling thread. The chains are kept in registers by the asm operands: the
 * same loop written with an array of 24 accumulators in C (as the benches had it) was compiled
 * by GCC 12 with a store and reload around each instruction and read 384 Gop/s on a Zen 5 core
 * that issues 2 `vpdpbusd` a cycle (~960 Gop/s), so the "of peak" columns read over 100%. 12
 * chains cover the instruction's latency at 2 a cycle on the CPUs measured (Zen 5, Sapphire
 * Rapids). */
__attribute__((target("avx512f,avx512vnni"), unused)) static double bench_int8_peak_512(long iters,
                                                                                bench_clock_fn clk) {
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2),
            a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5),
            a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8),
            a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
    const __m512i u = _mm512_set1_epi8(3), s8 = _mm512_set1_epi8(-2);
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
        BENCH_CHAINS12("vpdpbusd", u, s8);
    }
    double ms = clk() - t0;
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
    if (_mm512_reduce_add_epi32(s) == 12345) puts(""); /* keeps the chains live */
    return (double)iters * 12 * 64 * 2 / (ms * 1e6);
}

/* GFLOP/s of 12 independent chains of 512-bit `vdpbf16ps` (16 lanes x a pair of BF16 products
 * and their adds: 64 FLOPs an instruction), iters rounds, on the calling thread: the compute floor
 * of the BF16 prompt GEMM's vdpbf16ps route, twice the FMA's on a CPU that issues both at one
 * rate (Zen 4 and Zen 5, where the route is the default). asm operands keep the chains in registers, as above. */
__attribute__((target("avx512f,avx512bf16"), unused)) static double bench_bf16dot_peak_512(long iters,
                                                                                  bench_clock_fn clk) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
           a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    const __m512i u = _mm512_set1_epi16(0x3f80), s16 = _mm512_set1_epi16(0x3580); /* 1, 2^-20 */
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
        BENCH_CHAINS12("vdpbf16ps", u, s16);
    }
    double ms = clk() - t0;
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    if (_mm512_reduce_add_ps(s) == 12345.0f) puts(""); /* keeps the chains live */
    return (double)iters * 12 * 64 / (ms * 1e6);
}

/* GFLOP/s of `tdpbf16ps` (16 x 16 FP32 sums, each of 32 BF16 products: 16,384 FLOPs an
 * instruction) on four independent accumulator tiles, iters rounds, on the calling thread: the
 * compute floor of the AMX tiles. Only where wb_cpu()->amx_bf16 (the process holds the tile state
 * then); the BF16 prompt GEMM's AMX route runs three of them per product (the inputs in three
 * parts), so its floor is a third of this. */
typedef struct bench_amx_cfg {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
} bench_amx_cfg;
__attribute__((target("amx-tile,amx-bf16"), unused)) static double bench_amx_bf16_peak(long iters,
                                                                                 bench_clock_fn clk) {
    bench_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.rows[i] = 16, c.colsb[i] = 64;
    static const unsigned short ones[16 * 32] __attribute__((aligned(64))) = {0};
    _tile_loadconfig(&c);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    double ms = clk() - t0;
    _tile_release();
    return (double)iters * 4 * 16384 / (ms * 1e6);
}

/* The same with 12 chains of 256-bit FMAs (AVX2 machines) */
__attribute__((target("avx2,fma"), unused)) static double bench_fma_peak_256(long iters,
                                                                     bench_clock_fn clk) {
    __m256 a[12];
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(1.0f + i * 1e-7f);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    double ms = clk() - t0;
    float s = 0, t[8];
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(t, a[i]);
        s += t[0];
    }
    if (s == 12345.0f) puts("");
    return (double)iters * 12 * 8 * 2 / (ms * 1e6);
}

/* Gop/s (a multiply and an add per byte pair, as above) of the int8 dot an AVX2 kernel without
 * VNNI has: `vpmaddubsw` (32 u8 x s8 products, added in pairs to int16), `vpmaddwd` by ones (to
 * int32) and `vpaddd` into an accumulator, 64 ops a sequence; 8 accumulator chains, the two
 * multiplies of each sequence independent of the chains. This, not twice the FMA peak, is the
 * quantized kernels' compute floor at the AVX2 level: each sequence takes two multiplier issues
 * where `vpdpbusd` takes one. */
__attribute__((target("avx2"), unused)) static double bench_int8_peak_256(long iters, bench_clock_fn clk) {
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2),
            a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5),
            a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7), t0_, t1_;
    const __m256i u = _mm256_set1_epi8(3), s8 = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
#define BENCH_MADD2(A, B)                                                                         \
    "vpmaddubsw %[s_], %[u_], %[t0]\n\t"                                                          \
    "vpmaddubsw %[s_], %[u_], %[t1]\n\t"                                                          \
    "vpmaddwd %[one_], %[t0], %[t0]\n\t"                                                          \
    "vpmaddwd %[one_], %[t1], %[t1]\n\t"                                                          \
    "vpaddd %[t0], %[" A "], %[" A "]\n\t"                                                         \
    "vpaddd %[t1], %[" B "], %[" B "]\n\t"
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
        __asm__ volatile(BENCH_MADD2("a0", "a1") BENCH_MADD2("a2", "a3") BENCH_MADD2("a4", "a5")
                             BENCH_MADD2("a6", "a7")
                         : [a0] "+x"(a0), [a1] "+x"(a1), [a2] "+x"(a2), [a3] "+x"(a3), [a4] "+x"(a4),
                           [a5] "+x"(a5), [a6] "+x"(a6), [a7] "+x"(a7), [t0] "=&x"(t0_), [t1] "=&x"(t1_)
                         : [u_] "x"(u), [s_] "x"(s8), [one_] "x"(one));
    }
#undef BENCH_MADD2
    double ms = clk() - t0;
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                 _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, s);
    if (t[0] + t[7] == 12345) puts(""); /* keeps the chains live */
    return (double)iters * 8 * 32 * 2 / (ms * 1e6);
}

/* The same as the 512-bit vpdpbusd peak with 256-bit AVX-VNNI `vpdpbusd` (VEX encoded): the
 * AVX-VNNI kernels' floor on CPUs that have it without AVX-512. Assembled here but not run on
 * the CPUs measured so far (those with AVX-VNNI also had AVX-512, whose peak is used there). */
__attribute__((target("avx2,avxvnni"), unused)) static double bench_int8_peak_vnni256(long iters,
                                                                              bench_clock_fn clk) {
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2),
            a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5),
            a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7), a8 = _mm256_set1_epi32(8),
            a9 = _mm256_set1_epi32(9), a10 = _mm256_set1_epi32(10), a11 = _mm256_set1_epi32(11);
    const __m256i u = _mm256_set1_epi8(3), s8 = _mm256_set1_epi8(-2);
    double t0 = clk();
    for (long k = 0; k < iters; k++) {
        BENCH_CHAINS12("%{vex%} vpdpbusd", u, s8);
    }
    double ms = clk() - t0;
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                 _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(a8, a9), _mm256_add_epi32(a10, a11)));
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, s);
    if (t[0] + t[7] == 12345) puts(""); /* keeps the chains live */
    return (double)iters * 12 * 32 * 2 / (ms * 1e6);
}

/* The FMA and int8 peaks of the kernel level in use (the CPU's best unless WB_KERNELS capped it),
 * one thread, and what each one measured (for the tables' labels). iters: rounds of the 512-bit
 * loops; the 256-bit ones run twice as many. */
static inline int bench_level512(void) {
    return wb_isa_current() >= WB_ISA_AVX512 && wb_cpu()->avx512f;
}
__attribute__((unused)) static double bench_fma_peak_level(long iters, bench_clock_fn clk, const char **what) {
    if (bench_level512()) return *what = "512-bit FMA", bench_fma_peak_512(iters, clk);
    return *what = "256-bit FMA", bench_fma_peak_256(2 * iters, clk);
}
__attribute__((unused)) static double bench_int8_peak_level(long iters, bench_clock_fn clk, const char **what) {
    if (bench_level512() && wb_cpu()->avx512vnni)
        return *what = "512-bit vpdpbusd", bench_int8_peak_512(iters, clk);
    if (wb_cpu()->avxvnni) return *what = "256-bit AVX-VNNI vpdpbusd", bench_int8_peak_vnni256(2 * iters, clk);
    return *what = "256-bit vpmaddubsw+vpmaddwd+vpaddd", bench_int8_peak_256(2 * iters, clk);
}

/* The int8 peak of one quantized kernel variant (wb_quant_kernels_name): the instruction its
 * products are built on, told by the variant's name ("avx512..." vpdpbusd 512-bit, "...avx-vnni..."
 * 256-bit vpdpbusd, other x86 variants vpmaddubsw+vpmaddwd). */
__attribute__((unused)) static double bench_int8_peak_variant(const char *variant, long iters,
                                                             bench_clock_fn clk) {
    if (strstr(variant, "avx512")) return bench_int8_peak_512(iters, clk);
    if (strstr(variant, "avx-vnni")) return bench_int8_peak_vnni256(2 * iters, clk);
    return bench_int8_peak_256(2 * iters, clk);
}

/* ---------------------------------------------------------------- streaming read rate */

#define BENCH_BW_BYTES ((size_t)512 << 20)

typedef struct bench_bw_arg {
    const float *p;
    size_t n;
    float sink;
} bench_bw_arg;

/* The read pattern the BF16 GEMV uses on a 4864 x 896 matrix: chunks of 8 MB (one matrix), each
 * read as four sequential streams a quarter of the chunk apart, prefetched half a KB ahead. (One
 * single stream is latency-bound well below the DRAM rate; streams 128 MB apart were slower.) */
__attribute__((target("avx2"), unused)) static void *bench_bw_read(void *arg) {
    bench_bw_arg *a = arg;
    const size_t chunk = (size_t)2 << 20; /* floats */
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t c0 = 0; c0 + chunk <= a->n; c0 += chunk) {
        const size_t q = chunk / 4;
        const float *p0 = a->p + c0, *p1 = p0 + q, *p2 = p1 + q, *p3 = p2 + q;
        for (size_t i = 0; i < q; i += 16) {
            _mm_prefetch((const char *)(p0 + i) + 512, _MM_HINT_T0);
            _mm_prefetch((const char *)(p1 + i) + 512, _MM_HINT_T0);
            _mm_prefetch((const char *)(p2 + i) + 512, _MM_HINT_T0);
            _mm_prefetch((const char *)(p3 + i) + 512, _MM_HINT_T0);
            s0 = _mm256_add_ps(s0, _mm256_add_ps(_mm256_load_ps(p0 + i), _mm256_load_ps(p0 + i + 8)));
            s1 = _mm256_add_ps(s1, _mm256_add_ps(_mm256_load_ps(p1 + i), _mm256_load_ps(p1 + i + 8)));
            s2 = _mm256_add_ps(s2, _mm256_add_ps(_mm256_load_ps(p2 + i), _mm256_load_ps(p2 + i + 8)));
            s3 = _mm256_add_ps(s3, _mm256_add_ps(_mm256_load_ps(p3 + i), _mm256_load_ps(p3 + i + 8)));
        }
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    a->sink = t[0] + t[7];
    return NULL;
}

/* GB/s of one streaming read over BENCH_BW_BYTES of buf (64-byte aligned) split across nt <= 8
 * threads */
__attribute__((unused)) static double bench_read_gbs(const float *buf, int nt) {
    pthread_t th[8];
    bench_bw_arg a[8];
    if (nt < 1) nt = 1;
    if (nt > 8) nt = 8;
    const size_t per = BENCH_BW_BYTES / 4 / (size_t)nt;
    double t0 = wb_clock_ms();
    for (int i = 0; i < nt; i++) {
        a[i] = (bench_bw_arg){buf + (size_t)i * per, per, 0};
        if (i) pthread_create(&th[i], NULL, bench_bw_read, &a[i]);
    }
    bench_bw_read(&a[0]);
    for (int i = 1; i < nt; i++) pthread_join(th[i], NULL);
    return (double)BENCH_BW_BYTES / ((wb_clock_ms() - t0) * 1e6);
}

/* The load average line, printed before and after a bench: the figures are only as quiet as it. */
static inline void print_load(const char *when) {
    FILE *f = fopen("/proc/loadavg", "r");
    char buf[128] = "?";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    printf("load average %s: %s", when, buf);
}

#endif
