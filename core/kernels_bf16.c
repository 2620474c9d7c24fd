/* kernels_bf16.c - BF16 weight kernels with F32 accumulation, and the Llama block's small ops.
 *
 * A BF16 value is the top half of an F32, so widening is a zero-extend and a 16-bit shift: the
 * GEMV reads half the bytes of the F32 one and does the same F32 FMAs. Decode is bound by
 * memory bandwidth, so halving the bytes halves the time. Prefill (several inputs) is a GEMM:
 * the AVX-512 kernel widens a tile of 4 rows once and runs FMAs over it for every input.
 * Dispatch: cpu.c.
 */
#include "cpu.h"
#include "llama_internal.h"

#include <math.h>
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

/* ------------------------------------------------------------------------------- scalar */

static void gemv_bf16_scalar(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                             const uint16_t *W, const float *b, int in, int r0, int r1,
                             int accumulate) {
    for (int t = 0; t < nb; t++) {
        const float *x = X + (size_t)t * ldx;
        float *y = Y + (size_t)t * ldy;
        for (int r = r0; r < r1; r++) {
            const uint16_t *w = W + (size_t)r * in;
            float s = 0.0f;
            for (int i = 0; i < in; i++) s += bf16f(w[i]) * x[i];
            if (b) s += b[r];
            y[r] = accumulate ? y[r] + s : s;
        }
    }
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

AVX512 static inline __m512 ld16_bf16_mask(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
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
AVX512 static inline __attribute__((always_inline)) void micro_bf16_512(
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
                micro_bf16_512(6, Y + (size_t)t * ldy, ldy, X + (size_t)t * ldx + k0, ldx, tile,
                               kn16, tail, rr, r, b, first, accumulate);
            const float *Xt = X + (size_t)t * ldx + k0;
            float *Yt = Y + (size_t)t * ldy;
            switch (nb - t) {
            case 5: micro_bf16_512(5, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 4: micro_bf16_512(4, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 3: micro_bf16_512(3, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 2: micro_bf16_512(2, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            case 1: micro_bf16_512(1, Yt, ldy, Xt, ldx, tile, kn16, tail, rr, r, b, first, accumulate); break;
            default: break;
            }
        }
    }
}
#undef KC

typedef struct bf16_rows {
    const uint16_t *W;
    int in;
} bf16_rows;

AVX512 static void widen_bf16_512(const void *ctx, float *dst, int r, int k0, int kn) {
    const bf16_rows *m = ctx;
    const uint16_t *src = m->W + (size_t)r * m->in + k0;
    int i = 0;
    for (; i + 16 <= kn; i += 16) _mm512_store_ps(dst + i, ld16_bf16(src + i));
    if (i < kn) {
        const __mmask16 t = (__mmask16)((1u << (kn - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, t, ld16_bf16_mask(src + i, t));
    }
}

AVX512 static void gemm_bf16_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                    const uint16_t *W, const float *b, int in, int r0, int r1,
                                    int accumulate) {
    const bf16_rows m = {W, in};
    gemm_tiled_avx512(Y, ldy, X, ldx, nb, widen_bf16_512, &m, b, in, r0, r1, accumulate);
}

/* Decode (nb = 1): four far-apart sequential row streams, as the AVX2 kernel, 16 lanes. Each
 * output is summed exactly as the tile GEMM sums it (one 16-lane chain per row over the
 * columns in order, restarted every WB_TILE_KC columns, the same reduction, the same order of
 * adding bias and Y), so a row in a batch or a prompt gets the bits it gets alone. */
AVX512 static inline void rows4_bf16_512(float *Y, const float *X, const uint16_t *const w[4],
                                         const int rows[4], int nr, int in, const float *b,
                                         int accumulate) {
    for (int k0 = 0; k0 < in; k0 += WB_TILE_KC) {
        const int kn = in - k0 < WB_TILE_KC ? in - k0 : WB_TILE_KC, kn16 = (kn + 15) & ~15;
        const __mmask16 tail = (__mmask16)(kn % 16 ? (1u << (kn % 16)) - 1 : 0xffff);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const uint16_t *w0 = w[0] + k0, *w1 = w[1] + k0, *w2 = w[2] + k0, *w3 = w[3] + k0;
        const float *x = X + k0;
        for (int i = 0; i < kn16; i += 16) {
            const __mmask16 m = i + 16 < kn16 ? (__mmask16)0xffff : tail;
            _mm_prefetch((const char *)(w0 + i) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + i) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + i) + PF_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(w3 + i) + PF_AHEAD, _MM_HINT_T0);
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
            a0 = _mm512_fmadd_ps(ld16_bf16_mask(w0 + i, m), xv, a0);
            a1 = _mm512_fmadd_ps(ld16_bf16_mask(w1 + i, m), xv, a1);
            a2 = _mm512_fmadd_ps(ld16_bf16_mask(w2 + i, m), xv, a2);
            a3 = _mm512_fmadd_ps(ld16_bf16_mask(w3 + i, m), xv, a3);
        }
        float s[4];
        _mm_storeu_ps(s, sum4_512(a0, a1, a2, a3));
        for (int k = 0; k < nr; k++) {
            float *y = Y + rows[k], v = s[k];
            if (k0 == 0) {
                if (b) v += b[rows[k]];
                if (accumulate) v += *y;
            } else {
                v += *y;
            }
            *y = v;
        }
    }
}

AVX512 static void gemv_bf16_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                    const uint16_t *W, const float *b, int in, int r0, int r1,
                                    int accumulate) {
    if (nb > 1) {
        gemm_bf16_avx512(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
        return;
    }
    const int q = (r1 - r0) / 4;
    for (int r = r0; r < r0 + q; r++) {
        const int rows[4] = {r, r + q, r + 2 * q, r + 3 * q};
        const uint16_t *const w[4] = {W + (size_t)rows[0] * in, W + (size_t)rows[1] * in,
                                      W + (size_t)rows[2] * in, W + (size_t)rows[3] * in};
        rows4_bf16_512(Y, X, w, rows, 4, in, b, accumulate);
    }
    for (int r = r0 + 4 * q; r < r1; r++) { /* the last 0-3 rows, one at a time */
        const int rows[4] = {r, r, r, r};
        const uint16_t *const w[4] = {W + (size_t)r * in, W + (size_t)r * in, W + (size_t)r * in,
                                      W + (size_t)r * in};
        rows4_bf16_512(Y, X, w, rows, 1, in, b, accumulate);
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
        t->gemm_tiled = gemm_tiled_avx512;
        t->name_gemv_bf16 = "avx512 4-stream";
        t->name_gemm_bf16 = "avx512 widened tile 4x6 fma";
    }
#endif
}

/* ---------------------------------------------------------------------------- public */

void wb_gemv_bf16_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                          const uint16_t *W, const float *b, int in, int r0, int r1,
                          int accumulate) {
    wb_kt()->gemv_bf16(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
}

void wb_bf16_to_f32_forward(float *dst, const uint16_t *src, size_t n) {
    wb_kt()->bf16_to_f32(dst, src, n);
}

void wb_rmsnorm_forward(float *out, const float *x, const float *w, int C, float eps) {
    wb_kt()->rmsnorm(out, x, w, C, eps);
}

void wb_swiglu_forward(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
