/* kernels_bf16.c - BF16 weight kernels with F32 accumulation, and the Llama block's small ops.
 *
 * A BF16 value is the top half of an F32, so widening is a zero-extend and a 16-bit shift: the
 * GEMV reads half the bytes of the F32 one and does the same F32 FMAs. Decode is bound by
 * memory bandwidth, so halving the bytes halves the time. Dispatch follows kernels.c (AVX2+FMA
 * when the CPU has it and the tests have not forced the scalar path).
 */
#include "llama_internal.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#include <immintrin.h>
#endif

static int use_avx2(void) { return strcmp(wb_kernels_name(), "avx2+fma") == 0; }

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
        if (t < nb) /* the last 1-2 inputs */
            for (int k = 0; k < 4; k++)
                row_bf16(Y + (size_t)t * ldy, ldy, X + (size_t)t * ldx, ldx, nb - t,
                         W + (size_t)(r + k) * in, b, in, r + k, accumulate);
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
    if (nb != 1 || (in & 15)) {
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
        for (int i = 0; i < in; i += 16) {
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

/* ---------------------------------------------------------------------------- public */

void wb_gemv_bf16_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                          const uint16_t *W, const float *b, int in, int r0, int r1,
                          int accumulate) {
#ifdef WB_X86
    if (use_avx2()) {
        gemv_bf16_avx2(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
        return;
    }
#endif
    gemv_bf16_scalar(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
}

void wb_bf16_to_f32_forward(float *dst, const uint16_t *src, size_t n) {
#ifdef WB_X86
    if (use_avx2()) {
        bf16_to_f32_avx2(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = bf16f(src[i]);
}

void wb_rmsnorm_forward(float *out, const float *x, const float *w, int C, float eps) {
    /* the mean of squares in double: C up to 65536 terms would lose bits in a float sum */
    double ss = 0.0;
    for (int i = 0; i < C; i++) ss += (double)x[i] * x[i];
    const float rs = (float)(1.0 / sqrt(ss / C + (double)eps));
    for (int i = 0; i < C; i++) out[i] = w[i] * (x[i] * rs);
}

void wb_swiglu_forward(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
