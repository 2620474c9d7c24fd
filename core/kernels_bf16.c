/* kernels_bf16.c - BF16 weight kernels with F32 accumulation, and the Llama block's small ops.
 *
 * A BF16 value is the top half of an F32, so widening is a zero-extend and a 16-bit shift: the
 * GEMV reads half the bytes of the F32 one and does the same F32 FMAs. Decode is bound by
 * memory bandwidth, so halving the bytes halves the time. Prefill (several inputs) is a GEMM:
 * the AVX-512 kernel widens a tile of 4 rows once and runs FMAs over it for every input.
 * Dispatch: cpu.c.
 */
#include "cpu.h"
#include "kernels_simd.h"
#include "llama_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#include <immintrin.h>
#endif


static inline float bf16f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* x rounded to BF16 as vcvtne2ps2bf16 does (to nearest even; denormal inputs read as zero;
 * NaN quieted), kept as an F32 */
static float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    else if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
    else u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* ------------------------------------------------------------------------------- scalar */

/* round 1: over the inputs rounded to BF16 (wb_gemv_bf16_forward when its rounded copy cannot
 * be had: the same products, not the kernels' order of sums) */
static void gemv_bf16_chain(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                            const uint16_t *W, const float *b, int in, int r0, int r1,
                            int accumulate, int round) {
    for (int t = 0; t < nb; t++) {
        const float *x = X + (size_t)t * ldx;
        float *y = Y + (size_t)t * ldy;
        for (int r = r0; r < r1; r++) {
            const uint16_t *w = W + (size_t)r * in;
            float s = 0.0f;
            for (int i = 0; i < in; i++) s += bf16f(w[i]) * (round ? bf16_round(x[i]) : x[i]);
            if (b) s += b[r];
            y[r] = accumulate ? y[r] + s : s;
        }
    }
}

static void gemv_bf16_scalar(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                             const uint16_t *W, const float *b, int in, int r0, int r1,
                             int accumulate) {
    gemv_bf16_chain(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate, 0);
}

/* --------------------------------------------------------------------------------- AVX2 */

#ifdef WB_X86
#ifndef PF_AHEAD
#define PF_AHEAD 512
#endif
__attribute__((target("avx2,fma"))) static inline __m256 ld_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

__attribute__((target("avx2,fma"))) static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Dot products of one BF16 row with nb inputs, four accumulators, read front to back. */
__attribute__((target("avx2,fma"))) static inline void row_bf16(float *Y, size_t ldy,
                                                                const float *X, size_t ldx,
                                                                int nb, const uint16_t *w,
                                                                const float *b, int in, int r,
                                                                int accumulate) {
    const int in32 = in & ~31, in8 = in & ~7;
    for (int t = 0; t < nb; t++) {
        const float *x = X + (size_t)t * ldx;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int i = 0;
        for (; i < in32; i += 32) {
            _mm_prefetch((const char *)(w + i) + PF_AHEAD, _MM_HINT_T0);
            a0 = _mm256_fmadd_ps(ld_bf16(w + i), _mm256_loadu_ps(x + i), a0);
            a1 = _mm256_fmadd_ps(ld_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
            a2 = _mm256_fmadd_ps(ld_bf16(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
            a3 = _mm256_fmadd_ps(ld_bf16(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
        }
        for (; i < in8; i += 8) a0 = _mm256_fmadd_ps(ld_bf16(w + i), _mm256_loadu_ps(x + i), a0);
        float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        for (; i < in; i++) s += bf16f(w[i]) * x[i];
        s += b ? b[r] : 0.0f;
        float *y = Y + (size_t)t * ldy + r;
        *y = accumulate ? *y + s : s;
    }
}

/* Four consecutive rows and one input, one accumulator per row over 8-wide chunks in order:
 * exactly the sums of the 4 x 3 blocks below and of the decode kernel's four streams, so an
 * input left over from a batch's blocks of 3 gets what it gets alone. Needs in % 8 == 0. */
__attribute__((target("avx2,fma"))) static inline void rows4_bf16(float *y, const float *x,
                                                                  const uint16_t *w0, int in,
                                                                  const float *b, int r,
                                                                  int accumulate) {
    const uint16_t *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < in; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(ld_bf16(w0 + i), v, a0);
        a1 = _mm256_fmadd_ps(ld_bf16(w1 + i), v, a1);
        a2 = _mm256_fmadd_ps(ld_bf16(w2 + i), v, a2);
        a3 = _mm256_fmadd_ps(ld_bf16(w3 + i), v, a3);
    }
    const __m256 acc[4] = {a0, a1, a2, a3};
    for (int k = 0; k < 4; k++) {
        float v = hsum(acc[k]) + (b ? b[r + k] : 0.0f);
        y[r + k] = accumulate ? y[r + k] + v : v;
    }
}

/* Several inputs (prefill, batches): blocks of 4 rows x 3 inputs, twelve accumulators. Each
 * 8-wide step widens 4 weight vectors once and loads 3 input vectors for 12 FMAs, so the FMA
 * units, not the loads, set the pace; the 4 rows (7 KB at Qwen's width) stay in L1 while every
 * input block passes over them, and the inputs stay in L2. */
__attribute__((target("avx2,fma"))) static void gemm_bf16_avx2(float *Y, size_t ldy,
                                                               const float *X, size_t ldx, int nb,
                                                               const uint16_t *W, const float *b,
                                                               int in, int r0, int r1,
                                                               int accumulate) {
    int r = r0;
    for (; r + 4 <= r1; r += 4) {
        const uint16_t *w0 = W + (size_t)r * in, *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
        int t = 0;
        for (; t + 3 <= nb; t += 3) {
            const float *x0 = X + (size_t)t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00,
                   a12 = a00, a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
            for (int i = 0; i < in; i += 8) {
                const __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i),
                             v2 = _mm256_loadu_ps(x2 + i);
                __m256 w = ld_bf16(w0 + i);
                a00 = _mm256_fmadd_ps(w, v0, a00);
                a01 = _mm256_fmadd_ps(w, v1, a01);
                a02 = _mm256_fmadd_ps(w, v2, a02);
                w = ld_bf16(w1 + i);
                a10 = _mm256_fmadd_ps(w, v0, a10);
                a11 = _mm256_fmadd_ps(w, v1, a11);
                a12 = _mm256_fmadd_ps(w, v2, a12);
                w = ld_bf16(w2 + i);
                a20 = _mm256_fmadd_ps(w, v0, a20);
                a21 = _mm256_fmadd_ps(w, v1, a21);
                a22 = _mm256_fmadd_ps(w, v2, a22);
                w = ld_bf16(w3 + i);
                a30 = _mm256_fmadd_ps(w, v0, a30);
                a31 = _mm256_fmadd_ps(w, v1, a31);
                a32 = _mm256_fmadd_ps(w, v2, a32);
            }
            const __m256 acc[4][3] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22},
                                      {a30, a31, a32}};
            for (int k = 0; k < 4; k++)
                for (int u = 0; u < 3; u++) {
                    float v = hsum(acc[k][u]) + (b ? b[r + k] : 0.0f);
                    float *y = Y + (size_t)(t + u) * ldy + r + k;
                    *y = accumulate ? *y + v : v;
                }
        }
        for (; t < nb; t++) /* the last 1-2 inputs, summed as the 4-row blocks above are */
            rows4_bf16(Y + (size_t)t * ldy, X + (size_t)t * ldx, w0, in, b, r, accumulate);
    }
    for (; r < r1; r++)
        row_bf16(Y, ldy, X, ldx, nb, W + (size_t)r * in, b, in, r, accumulate);
}

/* Decode (nb = 1): four rows a quarter of the range apart, each read front to back, so the
 * matrix is four long sequential streams with a software prefetch half a KB ahead, and every
 * load of x serves four rows. Measured from DRAM on a 2-core Zen3 under load, 4096x896-class
 * matrices: 4 adjacent rows in flight (the F32 kernel's pattern, short strided streams of 1.8 KB
 * per row at Qwen's width) 8-10 GB/s; one row at a time 10-13; two streams 13-16; four streams
 * 20-24. More inputs (nb > 1) take the rows one by one, each row staying in L1 for all inputs. */
__attribute__((target("avx2,fma"))) static void gemv_bf16_avx2(float *Y, size_t ldy,
                                                               const float *X, size_t ldx, int nb,
                                                               const uint16_t *W, const float *b,
                                                               int in, int r0, int r1,
                                                               int accumulate) {
    if (nb > 1 && !(in & 7)) {
        gemm_bf16_avx2(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
        return;
    }
    if (nb != 1 || (in & 7)) {
        for (int r = r0; r < r1; r++)
            row_bf16(Y, ldy, X, ldx, nb, W + (size_t)r * in, b, in, r, accumulate);
        return;
    }
    /* four sequential streams, far apart: rows r + k * q for k < 4 */
    const int q = (r1 - r0) / 4;
    for (int r = r0; r < r0 + q; r++) {
        const uint16_t *w0 = W + (size_t)r * in, *w1 = w0 + (size_t)q * in, *w2 = w1 + (size_t)q * in,
                       *w3 = w2 + (size_t)q * in;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i + 16 <= in; i += 16) {
            _mm_prefetch((const char *)(w0 + i) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + i) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + i) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(w3 + i) + PF_AHEAD, _MM_HINT_T0);
            __m256 x0 = _mm256_loadu_ps(X + i), x1 = _mm256_loadu_ps(X + i + 8);
            a0 = _mm256_fmadd_ps(ld_bf16(w0 + i), x0, a0);
            a1 = _mm256_fmadd_ps(ld_bf16(w1 + i), x0, a1);
            a2 = _mm256_fmadd_ps(ld_bf16(w2 + i), x0, a2);
            a3 = _mm256_fmadd_ps(ld_bf16(w3 + i), x0, a3);
            a0 = _mm256_fmadd_ps(ld_bf16(w0 + i + 8), x1, a0);
            a1 = _mm256_fmadd_ps(ld_bf16(w1 + i + 8), x1, a1);
            a2 = _mm256_fmadd_ps(ld_bf16(w2 + i + 8), x1, a2);
            a3 = _mm256_fmadd_ps(ld_bf16(w3 + i + 8), x1, a3);
        }
        if (in & 8) { /* in % 16 == 8: the last chunk, still in order */
            const int i = in - 8;
            const __m256 x0 = _mm256_loadu_ps(X + i);
            a0 = _mm256_fmadd_ps(ld_bf16(w0 + i), x0, a0);
            a1 = _mm256_fmadd_ps(ld_bf16(w1 + i), x0, a1);
            a2 = _mm256_fmadd_ps(ld_bf16(w2 + i), x0, a2);
            a3 = _mm256_fmadd_ps(ld_bf16(w3 + i), x0, a3);
        }
        float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
        for (int k = 0; k < 4; k++) {
            const int rr = r + k * q;
            s[k] += b ? b[rr] : 0.0f;
            Y[rr] = accumulate ? Y[rr] + s[k] : s[k];
        }
    }
    for (int r = r0 + 4 * q; r < r1; r++)
        row_bf16(Y, ldy, X, ldx, nb, W + (size_t)r * in, b, in, r, accumulate);
}

__attribute__((target("avx2,fma"))) static void bf16_to_f32_avx2(float *dst, const uint16_t *src,
                                                                 size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ld_bf16(src + i));
    for (; i < n; i++) dst[i] = bf16f(src[i]);
}
#endif

/* ------------------------------------------------------------------------------ AVX-512 */

#ifdef WB_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))

AVX512 static inline __m512 ld16_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* Sums of four 16-lane accumulators, as 4 floats in order: halves added, then the 8-lane
 * transposing hadd tree of the AVX2 kernels. */
AVX512 static inline __m128 sum4_512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
#define H(v) _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1))
    __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(H(a0), H(a1)), _mm256_hadd_ps(H(a2), H(a3)));
#undef H
    return _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
}

/* Prefill and batches (nb > 1): a GEMM over the inputs. For each block of 4 weight rows and KC
 * columns the BF16 values are widened to F32 once into a tile (16 KB: stays in L1), then every
 * group of 6 inputs passes over it: per 16 columns 4 tile loads and 1 input load feed 24 FMAs in
 * 24 independent accumulators, so the FMA units set the pace (widening in the inner loop, as the
 * AVX2 kernel does, would add 2 more uops per weight vector per input group). KC bounds the tile
 * and the 6 input rows touched per pass (6 x 4 KB) for wide matrices (down_proj's 4864), whose
 * partial sums go through Y between column blocks. */
#define KC WB_TILE_KC
AVX512 static inline __attribute__((always_inline)) void micro_tile_512(
    const int G, float *Y, size_t ldy, const float *X, size_t ldx, const float *tile, int kn16,
    __mmask16 tail, int rr, int r, const float *b, int first, int accumulate) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int u = 0; u < G; u++)
        for (int k = 0; k < 4; k++) acc[u][k] = _mm512_setzero_ps();
    for (int i = 0; i < kn16; i += 16) {
        const __mmask16 m = i + 16 < kn16 ? (__mmask16)0xffff : tail;
        const __m512 w0 = _mm512_load_ps(tile + i), w1 = _mm512_load_ps(tile + KC + i),
                     w2 = _mm512_load_ps(tile + 2 * KC + i), w3 = _mm512_load_ps(tile + 3 * KC + i);
#pragma GCC unroll 6
        for (int u = 0; u < G; u++) {
            const __m512 x = _mm512_maskz_loadu_ps(m, X + (size_t)u * ldx + i);
            acc[u][0] = _mm512_fmadd_ps(w0, x, acc[u][0]);
            acc[u][1] = _mm512_fmadd_ps(w1, x, acc[u][1]);
            acc[u][2] = _mm512_fmadd_ps(w2, x, acc[u][2]);
            acc[u][3] = _mm512_fmadd_ps(w3, x, acc[u][3]);
        }
    }
#pragma GCC unroll 6
    for (int u = 0; u < G; u++) {
        float s[4];
        _mm_storeu_ps(s, sum4_512(acc[u][0], acc[u][1], acc[u][2], acc[u][3]));
        float *y = Y + (size_t)u * ldy + r;
        for (int k = 0; k < rr; k++) {
            float v = s[k];
            if (first) {
                if (b) v += b[r + k];
                if (accumulate) v += y[k];
            } else {
                v += y[k];
            }
            y[k] = v;
        }
    }
}

AVX512 static void gemm_tiled_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                     wb_widen_fn widen, const void *ctx, const float *b, int in,
                                     int r0, int r1, int accumulate) {
    _Alignas(64) float tile[4 * WB_TILE_KC];
    for (int k0 = 0; k0 < in; k0 += KC) {
        const int kn = in - k0 < KC ? in - k0 : KC, kn16 = (kn + 15) & ~15;
        const __mmask16 tail = (__mmask16)(kn % 16 ? (1u << (kn % 16)) - 1 : 0xffff);
        const int first = k0 == 0;
        for (int r = r0; r < r1; r += 4) {
            const int rr = r1 - r < 4 ? r1 - r : 4;
            for (int k = 0; k < 4; k++) { /* widen the tile once; missing rows and the pad are 0 */
                float *dst = tile + (size_t)k * KC;
                if (k < rr) widen(ctx, dst, r + k, k0, kn);
                for (int i = k < rr ? kn : 0; i < kn16; i++) dst[i] = 0.0f;
            }
            int t = 0;
            for (; t + 6 <= nb; t += 6)
                micro_tile_512(6, Y + (size_t)t * ldy, ldy, X + (size_t)t * ldx + k0, ldx, tile,
                               kn16, tail, rr, r, b, first, accumulate);
            const float *Xt = X + (size_t)t * ldx + k0;
            float *Yt = Y + (size_t)t * ldy;
            switch (nb - t) {
            case 5: micro_tile_512(5, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 4: micro_tile_512(4, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 3: micro_tile_512(3, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 2: micro_tile_512(2, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 1: micro_tile_512(1, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            default: break;
            }
        }
    }
}
#undef KC

/* The register-blocked BF16 kernel: decode, batches and prefill (every nb) sum each output in
 * one order, so a row of a batch or a prompt gets the bits it gets alone:
 *
 *   one 16-lane F32 accumulator per output; the columns go by in chunks of 32, in order; in
 *   chunk c lane j adds w[32c + 2j] x[32c + 2j] and then w[32c + 2j + 1] x[32c + 2j + 1] (two
 *   FMAs, even column first); columns past `in` are zeros; then the 16 lanes are added by the
 *   fixed tree of red4_512, then b[r] (when b), then the old Y (when accumulate).
 *
 * Why even/odd: one 64-byte load holds 32 BF16 values, and as 16 dwords its even values widen
 * with one shift (vpslld 16) and its odd ones with one AND: one uop per 16 F32 lanes, where the
 * natural-order widening (zero-extend, then shift) costs two on the FMA ports. The input rows are
 * rearranged to match once per call (pack_x: 16 even, then 16 odd values of each chunk).
 *
 * Blocking: R weight rows x G inputs of accumulators stay in registers (R*G + 2R + 2 of the 32
 * ZMM registers): each weight vector is loaded and widened once per group of G inputs, so the
 * FMA share of the uops is G / (G + 1) whatever R is. Rows are taken in four sequential streams
 * a quarter of the range apart (decode and batches alike): measured on a 65536 x 896 matrix, a
 * batch of 2 read as one stream of adjacent rows took 1.7x the time of decode, as four streams
 * 1.1x. Decode (nb = 1) rearranges its input in registers (no buffer); batches go over panels of
 * rows that stay in L2 while every group of inputs passes. */
#define BF16_GMAX4 5
#define BF16_GMAX2 12
/* prefetch distance into L2, bytes ahead in each row stream (1-4 KB measured alike, 512 B to L1
 * slower when a block computes longer than the stream takes to arrive) */
#define BF16_PF 2048
#define BF16_PFH _MM_HINT_T1

/* 16 floats each: the lanes of four accumulators added pairwise within each, as 4 floats in the
 * order of the arguments. The result for one accumulator does not depend on the other three. */
AVX512 static inline __m128 red4_512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    return sum4_512(a0, a1, a2, a3);
}

/* Indices of the even and odd values of a 32-float chunk held in two registers (a | b). */
AVX512 static inline __m512i idx_even(void) {
    return _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
}
AVX512 static inline __m512i idx_odd(void) {
    return _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
}

/* Floats of one packed input row: in rounded up to 32. */
static inline size_t pack_width(int in) { return (size_t)(in + 31) & ~(size_t)31; }

/* xp[t][chunk c] = the 16 even then the 16 odd values of X[t, 32c .. 32c + 32), zeros past in. */
AVX512 static void pack_x(float *xp, const float *X, size_t ldx, int nb, int in) {
    const size_t w = pack_width(in);
    const __m512i ie = idx_even(), io = idx_odd();
    for (int t = 0; t < nb; t++) {
        const float *x = X + (size_t)t * ldx;
        float *d = xp + (size_t)t * w;
        for (int i = 0; i < in; i += 32) {
            const int n = in - i < 32 ? in - i : 32;
            const __mmask16 ml = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
            const __mmask16 mh = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
            const __m512 a = _mm512_maskz_loadu_ps(ml, x + i), b = _mm512_maskz_loadu_ps(mh, x + i + 16);
            _mm512_store_ps(d + i, _mm512_permutex2var_ps(a, ie, b));
            _mm512_store_ps(d + i + 16, _mm512_permutex2var_ps(a, io, b));
        }
    }
}

/* One chunk of 32 columns for R rows x G inputs. m: the chunk's valid BF16 values (all ones but
 * in the last chunk). Inputs: packed rows (x + u * ldx, ldx = pack_width) when PACKED, else
 * G = 1 raw row x, rearranged here. */
AVX512 static inline __attribute__((always_inline)) void chunk_bf16_512(
    const int R, const int G, const int PACKED, __m512 acc[4][BF16_GMAX2],
    const uint16_t *const *w, int i, __mmask32 m, const float *x, size_t ldx) {
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512 we[4], wo[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const __m512i v = _mm512_maskz_loadu_epi16(m, w[k] + i);
        we[k] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        wo[k] = _mm512_castsi512_ps(_mm512_and_si512(v, hi));
    }
#pragma GCC unroll 12
    for (int u = 0; u < G; u++) {
        __m512 xe, xo;
        if (PACKED) {
            xe = _mm512_load_ps(x + (size_t)u * ldx + i);
            xo = _mm512_load_ps(x + (size_t)u * ldx + i + 16);
        } else {
            const __mmask16 ml = (__mmask16)m, mh = (__mmask16)(m >> 16);
            /* m covers BF16 values; the floats are in two halves of 16 */
            const __m512 a = _mm512_maskz_loadu_ps(ml, x + i), b = _mm512_maskz_loadu_ps(mh, x + i + 16);
            xe = _mm512_permutex2var_ps(a, idx_even(), b);
            xo = _mm512_permutex2var_ps(a, idx_odd(), b);
        }
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            acc[k][u] = _mm512_fmadd_ps(we[k], xe, acc[k][u]);
            acc[k][u] = _mm512_fmadd_ps(wo[k], xo, acc[k][u]);
        }
    }
}

/* Sums s[u * R + k] of rows w[k] (k < R) with inputs u < G over all `in` columns. pf: prefetch
 * the weight rows ahead (they come from memory: the first group over a panel, and decode). */
AVX512 static inline __attribute__((always_inline)) void micro_bf16_512(
    const int R, const int G, const int PACKED, const uint16_t *const *w, int in,
    const float *x, size_t ldx, size_t pf, float *s) {
    __m512 acc[4][BF16_GMAX2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 12
        for (int u = 0; u < G; u++) acc[k][u] = _mm512_setzero_ps();
    const int in32 = in & ~31;
    int i = 0;
    if (pf)
        for (; i < in32; i += 32) {
#pragma GCC unroll 4
            for (int k = 0; k < R; k++) _mm_prefetch((const char *)(w[k] + i) + pf, BF16_PFH);
            chunk_bf16_512(R, G, PACKED, acc, w, i, (__mmask32)0xffffffffu, x, ldx);
        }
    else
        for (; i < in32; i += 32) chunk_bf16_512(R, G, PACKED, acc, w, i, (__mmask32)0xffffffffu, x, ldx);
    if (i < in) chunk_bf16_512(R, G, PACKED, acc, w, i, (__mmask32)((1u << (in - i)) - 1), x, ldx);
    /* reduce four accumulators at a time (the flat order u-major); each sum is its own tree */
    __m512 flat[4 * BF16_GMAX2 + 3];
    int n = 0;
#pragma GCC unroll 12
    for (int u = 0; u < G; u++)
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) flat[n++] = acc[k][u];
    for (int j = n; j < ((n + 3) & ~3); j++) flat[j] = _mm512_setzero_ps();
    float tmp[4];
    for (int j = 0; j < n; j += 4) {
        _mm_storeu_ps(tmp, red4_512(flat[j], flat[j + 1], flat[j + 2], flat[j + 3]));
        for (int q = 0; q < 4 && j + q < n; q++) s[j + q] = tmp[q];
    }
}

/* Y[t, rows[k]] = s (+ b) (+ Y), as the order above says */
static inline void put_bf16(float *Y, size_t ldy, int t0, int G, int R, const int *rows,
                            const float *s, const float *b, int accumulate) {
    for (int u = 0; u < G; u++)
        for (int k = 0; k < R; k++) {
            float *y = Y + (size_t)(t0 + u) * ldy + rows[k], v = s[u * R + k];
            if (b) v += b[rows[k]];
            if (accumulate) v += *y;
            *y = v;
        }
}

typedef void (*micro_bf16_fn)(const uint16_t *const *w, int in, const float *x, size_t ldx,
                              size_t pf, float *s);
#define MK_BF16(R_, G_)                                                                          \
    AVX512 static void mk_bf16_##R_##_##G_(const uint16_t *const *w, int in, const float *x,      \
                                           size_t ldx, size_t pf, float *s) {                        \
        micro_bf16_512(R_, G_, 1, w, in, x, ldx, pf, s);                                          \
    }
MK_BF16(4, 1) MK_BF16(4, 2) MK_BF16(4, 3) MK_BF16(4, 4) MK_BF16(4, 5)
MK_BF16(2, 1) MK_BF16(2, 2) MK_BF16(2, 3) MK_BF16(2, 4) MK_BF16(2, 5) MK_BF16(2, 6)
MK_BF16(2, 7) MK_BF16(2, 8) MK_BF16(2, 9) MK_BF16(2, 10) MK_BF16(2, 11) MK_BF16(2, 12)
MK_BF16(1, 1) MK_BF16(1, 2) MK_BF16(1, 3) MK_BF16(1, 4) MK_BF16(1, 5) MK_BF16(1, 6)
MK_BF16(1, 7) MK_BF16(1, 8) MK_BF16(1, 9) MK_BF16(1, 10) MK_BF16(1, 11) MK_BF16(1, 12)
#undef MK_BF16
static const micro_bf16_fn mk_bf16_4[BF16_GMAX4 + 1] = {NULL, mk_bf16_4_1, mk_bf16_4_2,
                                                        mk_bf16_4_3, mk_bf16_4_4, mk_bf16_4_5};
static const micro_bf16_fn mk_bf16_2[BF16_GMAX2 + 1] = {
    NULL, mk_bf16_2_1, mk_bf16_2_2, mk_bf16_2_3, mk_bf16_2_4, mk_bf16_2_5, mk_bf16_2_6,
    mk_bf16_2_7, mk_bf16_2_8, mk_bf16_2_9, mk_bf16_2_10, mk_bf16_2_11, mk_bf16_2_12};
static const micro_bf16_fn mk_bf16_1[BF16_GMAX2 + 1] = {
    NULL, mk_bf16_1_1, mk_bf16_1_2, mk_bf16_1_3, mk_bf16_1_4, mk_bf16_1_5, mk_bf16_1_6,
    mk_bf16_1_7, mk_bf16_1_8, mk_bf16_1_9, mk_bf16_1_10, mk_bf16_1_11, mk_bf16_1_12};

/* Decode: one input, rows r, r + q, r + 2q, r + 3q (q a quarter of the range), the input
 * rearranged in registers (no buffer), weights prefetched; the last 0-3 rows one at a time. */
AVX512 static void gemv1_bf16_512(float *Y, const float *X, const uint16_t *W, const float *b,
                                  int in, int r0, int r1, int accumulate) {
    const int q = (r1 - r0) / 4;
    float s[4];
    for (int r = r0; r < r0 + q; r++) {
        const int rows[4] = {r, r + q, r + 2 * q, r + 3 * q};
        const uint16_t *const w[4] = {W + (size_t)rows[0] * in, W + (size_t)rows[1] * in,
                                      W + (size_t)rows[2] * in, W + (size_t)rows[3] * in};
        micro_bf16_512(4, 1, 0, w, in, X, 0, BF16_PF, s);
        put_bf16(Y, 0, 0, 1, 4, rows, s, b, accumulate);
    }
    for (int r = r0 + 4 * q; r < r1; r++) {
        const uint16_t *const w[1] = {W + (size_t)r * in};
        micro_bf16_512(1, 1, 0, w, in, X, 0, BF16_PF, s);
        put_bf16(Y, 0, 0, 1, 1, &r, s, b, accumulate);
    }
}

/* n floats of packed inputs, 64-byte aligned, or NULL when memory is short (the caller then
 * works without): the calling thread's kernel buffer 0 (cpu.h). */
static float *pack_take(size_t n) { return wb_kernel_buf(0, n); }

AVX512 static void gemv_bf16_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                    const uint16_t *W, const float *b, int in, int r0, int r1,
                                    int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    const size_t pw = pack_width(in);
    float *xp = nb > 1 ? pack_take((size_t)nb * pw) : NULL;
    if (!xp) { /* decode, or no memory for the packed inputs: one input at a time, same sums */
        for (int t = 0; t < nb; t++)
            gemv1_bf16_512(Y + (size_t)t * ldy, X + (size_t)t * ldx, W, b, in, r0, r1, accumulate);
        return;
    }
    pack_x(xp, X, ldx, nb, in);
    /* R = 4 rows x up to 5 inputs; 6-16 inputs: R = 2 x one or two groups of up to 12 (measured
     * faster there than groups of 4-5, and slower above, where the inputs no longer fit in L1) */
    const int R = nb <= BF16_GMAX4 || nb > 16 ? 4 : 2, gmax = R == 4 ? BF16_GMAX4 : BF16_GMAX2;
    const int ngr = (nb + gmax - 1) / gmax, gsz = (nb + ngr - 1) / ngr;
    /* Rows in the decode kernel's order: virtual row v < 4q is row r0 + (v % 4) q + v / 4, so
     * every block of 4 (or 2) reads from four (two) sequential streams a quarter of the range
     * apart, which fetch from memory faster than one; rows past 4q follow in order. Panels of
     * virtual rows (about 192 KB of BF16) stay in L2 while every group of inputs passes. */
    const int q = (r1 - r0) / 4, nv = r1 - r0;
    int panel = (int)((192u << 10) / ((size_t)in * 2)) & ~3;
    if (panel < 4) panel = 4;
    float s[4 * BF16_GMAX2];
    for (int p0 = 0; p0 < nv; p0 += panel) {
        const int p1 = nv - p0 < panel ? nv : p0 + panel;
        for (int t0 = 0, g = 0; t0 < nb; t0 += gsz, g++) {
            const int G = nb - t0 < gsz ? nb - t0 : gsz;
            const float *xg = xp + (size_t)t0 * pw;
            /* the first group reads the panel from memory, prefetching ahead in each stream;
             * the second prefetches the next panel into L2 while it computes from L2 */
            const size_t pfo = g == 0 ? BF16_PF : g == 1 && p1 < nv ? (size_t)(panel / 4) * in * 2 : 0;
            int v = p0;
            for (; v + R <= p1 && v + R <= 4 * q; v += R) {
                int rows[4];
                const uint16_t *w[4];
                for (int k = 0; k < R; k++) {
                    rows[k] = r0 + ((v + k) & 3) * q + ((v + k) >> 2);
                    w[k] = W + (size_t)rows[k] * in;
                }
                (R == 4 ? mk_bf16_4 : mk_bf16_2)[G](w, in, xg, pw, pfo, s);
                put_bf16(Y, ldy, t0, G, R, rows, s, b, accumulate);
            }
            for (; v < p1; v++) {
                const int r = v < 4 * q ? r0 + (v & 3) * q + (v >> 2) : r0 + v;
                const uint16_t *const w[1] = {W + (size_t)r * in};
                mk_bf16_1[G](w, in, xg, pw, pfo, s);
                put_bf16(Y, ldy, t0, G, 1, &r, s, b, accumulate);
            }
        }
    }
}


/* SwiGLU and RMSNorm at the AVX-512 level. silu(g) * u = g / (1 + e^-g) * u with e^-g by
 * Cephes' expf polynomial (2^n * p(r), |r| <= ln2 / 2, rel. error ~2e-7), so a prompt's 44 x 4864
 * values per layer cost microseconds, not the milliseconds of libm's scalar expf; the last
 * partial vector goes through the same code under a mask, so each value is computed alike
 * whatever the batch. exp512 is in kernels_simd.h. */

AVX512 static void swiglu_avx512(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
        const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), gv)));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(_mm512_div_ps(gv, d), uv));
    }
}

/* The mean of squares in double, as the portable version (8 double lanes, then their sum). */
AVX512 static void rmsnorm_avx512(float *out, const float *x, const float *w, int C, float eps) {
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    for (int i = 0; i < C; i += 16) {
        const __mmask16 m = C - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
        s0 = _mm512_fmadd_pd(lo, lo, s0);
        s1 = _mm512_fmadd_pd(hi, hi, s1);
    }
    const double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    const __m512 rs = _mm512_set1_ps((float)(1.0 / sqrt(ss / C + (double)eps)));
    for (int i = 0; i < C; i += 16) {
        const __mmask16 m = C - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_mul_ps(v, rs)));
    }
}
AVX512 static void bf16_to_f32_avx512(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, ld16_bf16(src + i));
    for (; i < n; i++) dst[i] = bf16f(src[i]);
}
#endif

/* ------------------------------------------------------------------ tile GEMM, other levels */

/* Portable: one widened row at a time, a dot product with each input. */
static void gemm_tiled_portable(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                wb_widen_fn widen, const void *ctx, const float *b, int in,
                                int r0, int r1, int accumulate) {
    float row[WB_TILE_KC];
    for (int k0 = 0; k0 < in; k0 += WB_TILE_KC) {
        const int kn = in - k0 < WB_TILE_KC ? in - k0 : WB_TILE_KC;
        for (int r = r0; r < r1; r++) {
            widen(ctx, row, r, k0, kn);
            for (int t = 0; t < nb; t++) {
                const float *x = X + (size_t)t * ldx + k0;
                float s = 0.0f;
                for (int i = 0; i < kn; i++) s += row[i] * x[i];
                float *y = Y + (size_t)t * ldy + r;
                if (k0 == 0) {
                    if (b) s += b[r];
                    if (accumulate) s += *y;
                } else {
                    s += *y;
                }
                *y = s;
            }
        }
    }
}

#ifdef WB_X86
/* AVX2: the AVX-512 kernel's plan at 8 lanes: 4 widened rows x 3 inputs, 12 accumulators. */
__attribute__((target("avx2,fma"))) static void gemm_tiled_avx2(
    float *Y, size_t ldy, const float *X, size_t ldx, int nb, wb_widen_fn widen, const void *ctx,
    const float *b, int in, int r0, int r1, int accumulate) {
    _Alignas(32) float tile[4 * WB_TILE_KC];
    enum { KC = WB_TILE_KC };
    for (int k0 = 0; k0 < in; k0 += KC) {
        const int kn = in - k0 < KC ? in - k0 : KC, kn8 = kn & ~7;
        for (int r = r0; r < r1; r += 4) {
            const int rr = r1 - r < 4 ? r1 - r : 4;
            for (int k = 0; k < 4; k++) {
                float *dst = tile + (size_t)k * KC;
                if (k < rr) widen(ctx, dst, r + k, k0, kn);
                else memset(dst, 0, (size_t)kn * sizeof *dst);
            }
            for (int t = 0; t < nb; t += 3) {
                const int g = nb - t < 3 ? nb - t : 3;
                const float *x0 = X + (size_t)t * ldx + k0;
                const float *x1 = g > 1 ? x0 + ldx : x0, *x2 = g > 2 ? x0 + 2 * ldx : x0;
                __m256 a[3][4];
                for (int u = 0; u < 3; u++)
                    for (int k = 0; k < 4; k++) a[u][k] = _mm256_setzero_ps();
                for (int i = 0; i < kn8; i += 8) {
                    const __m256 w0 = _mm256_load_ps(tile + i), w1 = _mm256_load_ps(tile + KC + i),
                                 w2 = _mm256_load_ps(tile + 2 * KC + i),
                                 w3 = _mm256_load_ps(tile + 3 * KC + i);
                    const __m256 v[3] = {_mm256_loadu_ps(x0 + i), _mm256_loadu_ps(x1 + i),
                                         _mm256_loadu_ps(x2 + i)};
                    for (int u = 0; u < 3; u++) {
                        a[u][0] = _mm256_fmadd_ps(w0, v[u], a[u][0]);
                        a[u][1] = _mm256_fmadd_ps(w1, v[u], a[u][1]);
                        a[u][2] = _mm256_fmadd_ps(w2, v[u], a[u][2]);
                        a[u][3] = _mm256_fmadd_ps(w3, v[u], a[u][3]);
                    }
                }
                const float *xs[3] = {x0, x1, x2};
                for (int u = 0; u < g; u++) {
                    float *y = Y + (size_t)(t + u) * ldy + r;
                    for (int k = 0; k < rr; k++) {
                        float s = hsum(a[u][k]);
                        for (int i = kn8; i < kn; i++) s += tile[(size_t)k * KC + i] * xs[u][i];
                        if (k0 == 0) {
                            if (b) s += b[r + k];
                            if (accumulate) s += y[k];
                        } else {
                            s += y[k];
                        }
                        y[k] = s;
                    }
                }
            }
        }
    }
}
#endif

/* ---------------------------------------------------------------------- portable entries */

static void bf16_to_f32_portable(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16f(src[i]);
}

static void swiglu_portable(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void rmsnorm_portable(float *out, const float *x, const float *w, int C, float eps) {
    /* the mean of squares in double: C up to 65536 terms would lose bits in a float sum */
    double ss = 0.0;
    for (int i = 0; i < C; i++) ss += (double)x[i] * x[i];
    const float rs = (float)(1.0 / sqrt(ss / C + (double)eps));
    for (int i = 0; i < C; i++) out[i] = w[i] * (x[i] * rs);
}

void wb_kernels_bf16_register(wb_kernel_table *t, wb_isa isa) {
    if (isa == WB_ISA_PORTABLE) {
        t->gemv_bf16 = gemv_bf16_scalar;
        t->bf16_to_f32 = bf16_to_f32_portable;
        t->rmsnorm = rmsnorm_portable;
        t->swiglu = swiglu_portable;
        t->gemm_tiled = gemm_tiled_portable;
        t->name_gemv_bf16 = t->name_gemm_bf16 = "portable";
    }
#ifdef WB_X86
    if (isa == WB_ISA_AVX2) {
        t->gemv_bf16 = gemv_bf16_avx2;
        t->bf16_to_f32 = bf16_to_f32_avx2;
        t->gemm_tiled = gemm_tiled_avx2;
        t->name_gemv_bf16 = "avx2 4-stream";
        t->name_gemm_bf16 = "avx2 widen-in-loop 4x3";
    }
    if (isa == WB_ISA_AVX512) {
        t->gemv_bf16 = gemv_bf16_avx512;
        t->bf16_to_f32 = bf16_to_f32_avx512;
        t->rmsnorm = rmsnorm_avx512;
        t->swiglu = swiglu_avx512;
        t->gemm_tiled = gemm_tiled_avx512;
        t->name_gemv_bf16 = "avx512 register blocks 4x5 / 2x12 (even/odd widening, 4 streams)";
        t->name_gemm_bf16 = "avx512 widened tile 4x6 fma";
    }
#endif
}

/* ---------------------------------------------------------------------------- public */

float wb_bf16_round(float x) { return bf16_round(x); }

/* Where the BF16 prompt route rounds the activations to BF16 (vdpbf16ps), the GEMV (decode, and
 * prompts under WB_PROMPT_ROWS rows) rounds them the same way first: every path then multiplies
 * the same values, so cached and uncached generation differ only in the order of the FP32 sums,
 * as on the routes that do not round (the promise of scripts/kv_cache.lua). The rounded copy is
 * the calling thread's kernel buffer 2. */
void wb_gemv_bf16_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                          const uint16_t *W, const float *b, int in, int r0, int r1,
                          int accumulate) {
    const wb_kernel_table *t = wb_kt();
    const wb_gemm_bf16_route *route = t->bf16_prompt;
    if (route && route->xround && nb > 0 && r1 > r0) {
        float *xr = wb_kernel_buf(2, (size_t)nb * (size_t)in);
        if (!xr) {
            gemv_bf16_chain(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate, 1);
            return;
        }
        route->xround(xr, X, ldx, nb, in);
        X = xr, ldx = (size_t)in;
    }
    t->gemv_bf16(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
}

void wb_bf16_to_f32_forward(float *dst, const uint16_t *src, size_t n) {
    wb_kt()->bf16_to_f32(dst, src, n);
}

void wb_rmsnorm_forward(float *out, const float *x, const float *w, int C, float eps) {
    wb_kt()->rmsnorm(out, x, w, C, eps);
}

void wb_swiglu_forward(float *g, const float *u, size_t n) { wb_kt()->swiglu(g, u, n); }
