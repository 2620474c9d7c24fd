/* kernels.c - the F32 forward-pass building blocks (GEMV, LayerNorm, GELU, softmax), portable,
 * AVX2+FMA and AVX-512 versions; attention is in kernels_attention.c.
 *
 * The AVX2 code is compiled with target attributes so the library still builds and runs on any
 * x86-64 (or non-x86) machine; the portable versions are the reference the tests compare every
 * other path with. Which one runs is the dispatch table's choice (cpu.c).
 */
#include "cpu.h"
#include "kernels_simd.h"
#include "model_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------------------ dispatch */

/* Tests force the portable path (the old name of wb_isa_limit(WB_ISA_PORTABLE)). Returns 1 when
 * the previous cap was the portable level. */
int wb_kernels_force_scalar(int on) {
    wb_isa old = wb_isa_limit(on ? WB_ISA_PORTABLE : WB_ISA_COUNT - 1);
    return old == WB_ISA_PORTABLE;
}

const char *wb_kernels_name(void) { return wb_isa_name(wb_isa_current()); }

/* ------------------------------------------------------------------------------- scalar */

static void gemv_scalar(float *y, const float *x, const float *W, const float *b, int in, int r0,
                        int r1, int accumulate) {
    for (int r = r0; r < r1; r++) {
        const float *w = W + (size_t)r * in;
        float s = 0.0f;
        for (int i = 0; i < in; i++) s += w[i] * x[i];
        if (b) s += b[r];
        y[r] = accumulate ? y[r] + s : s;
    }
}

static float gelu_tanh_1(float x) {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

static void softmax_scalar(float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static void layernorm_scalar(float *out, const float *x, const float *w, const float *b, int C,
                             float eps) {
    /* centred variance: no E[x^2] - E[x]^2 cancellation */
    float mean = 0.0f;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= (float)C;
    float var = 0.0f;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)C;
    float rs = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) * rs * w[i] + b[i];
}

/* --------------------------------------------------------------------------------- AVX2 */

#ifdef WB_X86
#define AVX2 __attribute__((target("avx2,fma")))

/* 8 rows at a time: 8 independent FMA chains (enough to cover FMA latency on Zen3/Skylake)
 * sharing one load of x, then a transposing hadd tree turns the 8 accumulators into 8 outputs.
 * Rows are ld floats apart (in for weights, C for the K cache). */
AVX2 static void gemv_ld_avx2(float *y, const float *x, const float *W, size_t ld,
                              const float *b, int in, int r0, int r1, int accumulate) {
    int r = r0;
    const int in8 = in & ~7;
    /* Weight rows are contiguous (ld == in): the next block of 8 rows is the next 32 * in bytes,
     * fetched 4 lines per step of this block (8 rows of 8-32 lines each are too short a stream
     * for the hardware prefetcher to ramp up on, and the weights come from L3). */
    const int pf = ld == (size_t)in && in8 == in;
    for (; r + 8 <= r1; r += 8) {
        const float *w = W + (size_t)r * ld;
        const size_t s = ld;
        const char *next = (const char *)(w + 8 * s);
        const int more = pf && r + 16 <= r1;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int i = 0; i < in8; i += 8) {
            if (more) {
                const char *p = next + (size_t)i * 32;
                _mm_prefetch(p, _MM_HINT_T0);
                _mm_prefetch(p + 64, _MM_HINT_T0);
                _mm_prefetch(p + 128, _MM_HINT_T0);
                _mm_prefetch(p + 192, _MM_HINT_T0);
            }
            __m256 xv = _mm256_loadu_ps(x + i);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), xv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + s + i), xv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 2 * s + i), xv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 3 * s + i), xv, a3);
            a4 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 4 * s + i), xv, a4);
            a5 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 5 * s + i), xv, a5);
            a6 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 6 * s + i), xv, a6);
            a7 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 7 * s + i), xv, a7);
        }
        __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
        __m128 lo = _mm_add_ps(_mm256_castps256_ps128(s0123), _mm256_extractf128_ps(s0123, 1));
        __m128 hi = _mm_add_ps(_mm256_castps256_ps128(s4567), _mm256_extractf128_ps(s4567, 1));
        __m256 out = _mm256_set_m128(hi, lo);
        if (in8 < in) {
            float t[8];
            for (int k = 0; k < 8; k++) {
                float acc = 0.0f;
                for (int i = in8; i < in; i++) acc += w[k * s + i] * x[i];
                t[k] = acc;
            }
            out = _mm256_add_ps(out, _mm256_loadu_ps(t));
        }
        if (b) out = _mm256_add_ps(out, _mm256_loadu_ps(b + r));
        if (accumulate) out = _mm256_add_ps(out, _mm256_loadu_ps(y + r));
        _mm256_storeu_ps(y + r, out);
    }
    for (; r < r1; r++) {
        const float *w = W + (size_t)r * ld;
        __m256 a = _mm256_setzero_ps();
        int i = 0;
        for (; i < in8; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a);
        float acc = hsum256(a);
        for (; i < in; i++) acc += w[i] * x[i];
        if (b) acc += b[r];
        y[r] = accumulate ? y[r] + acc : acc;
    }
}

/* Four rows of the 8-row hadd tree: per row the same additions in the same order as
 * gemv_ld_avx2, so each output is bit-identical to the single-vector GEMV's. */
AVX2 static inline void store4_rows(float *y, __m256 a0, __m256 a1, __m256 a2, __m256 a3,
                                    const float *w, size_t s, const float *x, int in8, int in,
                                    const float *b, int accumulate) {
    __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    __m128 out = _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
    if (in8 < in) {
        float t[4];
        for (int k = 0; k < 4; k++) {
            float acc = 0.0f;
            for (int i = in8; i < in; i++) acc += w[k * s + i] * x[i];
            t[k] = acc;
        }
        out = _mm_add_ps(out, _mm_loadu_ps(t));
    }
    if (b) out = _mm_add_ps(out, _mm_loadu_ps(b));
    if (accumulate) out = _mm_add_ps(out, _mm_loadu_ps(y));
    _mm_storeu_ps(y, out);
}

/* The GEMV over nb inputs at once: each block of 4 weight rows stays in L1 while the inputs pass
 * over it two at a time (8 FMA chains, 6 loads), so the weights stream from memory once per call
 * instead of once per input. Outputs go to a small tile first: written straight into Y, the
 * inputs' rows would be out floats apart, and at a power-of-two stride the 4-float stores of all
 * inputs fall into one L1 set and evict each other. Row blocks follow gemv_ld_avx2's (8 from r0,
 * then single rows), and the tile holds tree + bias with Y added last, so every output is
 * bit-identical to what gemv_ld_avx2 gives that input alone. */
#define GB_ROWS 64 /* rows per tile */
#define GB_INPUTS 32 /* inputs per tile */
AVX2 static void gemv_batch_avx2(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                 const float *W, const float *b, int in, int r0, int r1,
                                 int accumulate) {
    const int in8 = in & ~7, npair = nb & ~1;
    const size_t s = (size_t)in;
    float tile[GB_INPUTS * GB_ROWS];
    const int r8 = r0 + (r1 - r0) / 8 * 8; /* end of the 8-row blocks */
    for (int j0 = 0; j0 < npair; j0 += GB_INPUTS) {
        const int j1 = j0 + GB_INPUTS < npair ? j0 + GB_INPUTS : npair;
        for (int rc = r0; rc < r8; rc += GB_ROWS) {
            const int rce = rc + GB_ROWS < r8 ? rc + GB_ROWS : r8;
            for (int r = rc; r < rce; r += 4) {
                const float *w = W + (size_t)r * s;
                const float *bb = b ? b + r : NULL;
                for (int j = j0; j < j1; j += 2) {
                    const float *x0 = X + (size_t)j * ldx, *x1 = x0 + ldx;
                    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                    __m256 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
                    for (int i = 0; i < in8; i += 8) {
                        __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + s + i);
                        __m256 w2 = _mm256_loadu_ps(w + 2 * s + i);
                        __m256 w3 = _mm256_loadu_ps(w + 3 * s + i);
                        __m256 xa = _mm256_loadu_ps(x0 + i), xb = _mm256_loadu_ps(x1 + i);
                        a0 = _mm256_fmadd_ps(w0, xa, a0);
                        a1 = _mm256_fmadd_ps(w1, xa, a1);
                        a2 = _mm256_fmadd_ps(w2, xa, a2);
                        a3 = _mm256_fmadd_ps(w3, xa, a3);
                        c0 = _mm256_fmadd_ps(w0, xb, c0);
                        c1 = _mm256_fmadd_ps(w1, xb, c1);
                        c2 = _mm256_fmadd_ps(w2, xb, c2);
                        c3 = _mm256_fmadd_ps(w3, xb, c3);
                    }
                    float *t = tile + (size_t)(j - j0) * GB_ROWS + (r - rc);
                    store4_rows(t, a0, a1, a2, a3, w, s, x0, in8, in, bb, 0);
                    store4_rows(t + GB_ROWS, c0, c1, c2, c3, w, s, x1, in8, in, bb, 0);
                }
            }
            for (int j = j0; j < j1; j++) {
                float *y = Y + (size_t)j * ldy + rc;
                const float *t = tile + (size_t)(j - j0) * GB_ROWS;
                if (accumulate)
                    for (int k = 0; k < rce - rc; k++) y[k] = y[k] + t[k];
                else
                    memcpy(y, t, (size_t)(rce - rc) * sizeof *y);
            }
        }
    }
    /* Rows past the last block of 8, and an odd last input over every row: the plain GEMV,
     * which is exactly what these would have got alone. */
    for (int j = 0; j < nb; j++) {
        const int from = j >= npair ? r0 : r8;
        if (from < r1)
            gemv_ld_avx2(Y + (size_t)j * ldy, X + (size_t)j * ldx, W, s, b, in, from, r1,
                         accumulate);
    }
}

/* gelu_new(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)); the last form needs
 * one exponential and stays finite at both ends. The exponential is taken base 2 with the
 * log2(e) folded into the cubic's constants, z = -2u log2(e): no Cody-Waite split, 2^f for the
 * fraction f in [-1/2, 1/2] by Cephes' exp2f polynomial (rel. error ~2e-7), 2^n from the
 * exponent bits with z clamped to [-126, 126]; the division is a reciprocal estimate and one
 * Newton step (rel. error ~1e-7; d <= ~1e38 so r stays finite and x * r -> 0 at the far end).
 * 12 multiply-adds per 8 values where exp256 + divide took 17 and the divider. */
AVX2 static void gelu_tanh_avx2(float *x, size_t n) {
    const float k = -2.0f * 0.7978845608028654f * 1.4426950408889634f;
    const __m256 c0 = _mm256_set1_ps(k), c1 = _mm256_set1_ps(k * 0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    const __m256 hi = _mm256_set1_ps(126.0f), lo = _mm256_set1_ps(-126.0f);
    const __m256 p0 = _mm256_set1_ps(1.535336188319500e-4f);
    const __m256 p1 = _mm256_set1_ps(1.339887440266574e-3f);
    const __m256 p2 = _mm256_set1_ps(9.618437357674640e-3f);
    const __m256 p3 = _mm256_set1_ps(5.550332471162809e-2f);
    const __m256 p4 = _mm256_set1_ps(2.402264791363012e-1f);
    const __m256 p5 = _mm256_set1_ps(6.931472028550421e-1f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 z = _mm256_mul_ps(v, _mm256_fmadd_ps(c1, _mm256_mul_ps(v, v), c0));
        z = _mm256_max_ps(_mm256_min_ps(z, hi), lo);
        __m256 fz = _mm256_round_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 f = _mm256_sub_ps(z, fz);
        __m256 y = _mm256_fmadd_ps(p0, f, p1);
        y = _mm256_fmadd_ps(y, f, p2);
        y = _mm256_fmadd_ps(y, f, p3);
        y = _mm256_fmadd_ps(y, f, p4);
        y = _mm256_fmadd_ps(y, f, p5);
        y = _mm256_fmadd_ps(y, f, one);
        __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fz), _mm256_set1_epi32(127));
        e = _mm256_slli_epi32(e, 23);
        __m256 d = _mm256_fmadd_ps(y, _mm256_castsi256_ps(e), one);
        __m256 r = _mm256_rcp_ps(d);
        r = _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, two));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(v, r));
    }
    for (; i < n; i++) x[i] = gelu_tanh_1(x[i]);
}

AVX2 static void softmax_avx2(float *x, int n) {
    int i = 0;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float mx = _mm_cvtss_f32(m4);
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    __m256 m = _mm256_set1_ps(mx), sv = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        sv = _mm256_add_ps(sv, e);
    }
    float sum = hsum256(sv);
    for (; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= 1.0f / sum;
}

/* Two accumulators per reduction: a row of 128 is 16 vectors, and one chain of dependent adds
 * would take 16 x 3-4 cycles. With add (may be NULL), x += add first, in the same pass as the
 * sum, and x is written back: the residual's bias folded into the LayerNorm that reads it. */
AVX2 static void layernorm_avx2(float *out, float *x, const float *add, const float *w,
                                const float *b, int C, float eps) {
    const int C16 = C & ~15, C8 = C & ~7;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int i = 0;
    if (add) {
        for (; i < C8; i += 8) {
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(add + i));
            _mm256_storeu_ps(x + i, v);
            s0 = _mm256_add_ps(s0, v);
        }
        for (int k = i; k < C; k++) x[k] += add[k];
    } else {
        for (; i < C16; i += 16) {
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
        }
        for (; i < C8; i += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    }
    float mean = hsum256(_mm256_add_ps(s0, s1));
    for (; i < C; i++) mean += x[i];
    mean /= (float)C;
    __m256 m = _mm256_set1_ps(mean), v0 = _mm256_setzero_ps(), v1 = v0;
    for (i = 0; i < C16; i += 16) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m);
        v0 = _mm256_fmadd_ps(d0, d0, v0);
        v1 = _mm256_fmadd_ps(d1, d1, v1);
    }
    for (; i < C8; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        v0 = _mm256_fmadd_ps(d, d, v0);
    }
    float var = hsum256(_mm256_add_ps(v0, v1));
    for (; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)C;
    float rs = 1.0f / sqrtf(var + eps);
    __m256 r = _mm256_set1_ps(rs);
    for (i = 0; i < C8; i += 8) {
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), r);
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(d, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
    }
    for (; i < C; i++) out[i] = (x[i] - mean) * rs * w[i] + b[i];
}
#endif

#ifdef WB_X86
/* ------------------------------------------------------------------------------ AVX-512 */

/* The F32 GEMV / batched GEMV at the AVX-512 level, one summation order for every nb (decode,
 * batches, prompts shorter than WB_PROMPT_ROWS), so a row of a batch gets the bits it gets alone:
 *
 *   one 16-lane accumulator per output over the columns in chunks of 16, in order (columns past
 *   `in` are zeros); the 16 lanes added by a fixed tree (halves, then the transposing hadd tree
 *   of the AVX2 kernels); then b[r] (when b); then the old Y (when accumulate).
 *
 * Blocking as the BF16 kernel's (kernels_bf16.c): R rows x G inputs of accumulators in registers
 * (R*G + R + 1 of the 32), each weight vector loaded once per group of inputs; rows in four
 * sequential streams a quarter of the range apart, prefetched into L2 ahead of each stream;
 * panels of rows that stay in L2 while every group of inputs passes over them. */
#define AVX512F __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#define F32_GMAX4 6
#define F32_GMAX2 12
#define F32_PF 2048

AVX512F static inline __m128 sum4_f32_512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
#define H(v) _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1))
    __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(H(a0), H(a1)), _mm256_hadd_ps(H(a2), H(a3)));
#undef H
    return _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
}

AVX512F static inline __attribute__((always_inline)) void chunk_f32_512(
    const int R, const int G, __m512 acc[4][F32_GMAX2], const float *const *w, int i,
    __mmask16 m, const float *x, size_t ldx) {
    __m512 wv[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) wv[k] = _mm512_maskz_loadu_ps(m, w[k] + i);
#pragma GCC unroll 12
    for (int u = 0; u < G; u++) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)u * ldx + i);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) acc[k][u] = _mm512_fmadd_ps(wv[k], xv, acc[k][u]);
    }
}

/* s[u * R + k] = row w[k] . input u over `in` columns; pf: prefetch offset in bytes (0: none) */
AVX512F static inline __attribute__((always_inline)) void micro_f32_512(
    const int R, const int G, const float *const *w, int in, const float *x, size_t ldx,
    size_t pf, float *s) {
    __m512 acc[4][F32_GMAX2];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++)
#pragma GCC unroll 12
        for (int u = 0; u < G; u++) acc[k][u] = _mm512_setzero_ps();
    const int in16 = in & ~15;
    int i = 0;
    if (pf)
        for (; i < in16; i += 16) {
#pragma GCC unroll 4
            for (int k = 0; k < R; k++) _mm_prefetch((const char *)(w[k] + i) + pf, _MM_HINT_T1);
            chunk_f32_512(R, G, acc, w, i, (__mmask16)0xffff, x, ldx);
        }
    else
        for (; i < in16; i += 16) chunk_f32_512(R, G, acc, w, i, (__mmask16)0xffff, x, ldx);
    if (i < in) chunk_f32_512(R, G, acc, w, i, (__mmask16)((1u << (in - i)) - 1), x, ldx);
    __m512 flat[4 * F32_GMAX2 + 3];
    int n = 0;
#pragma GCC unroll 12
    for (int u = 0; u < G; u++)
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) flat[n++] = acc[k][u];
    for (int j = n; j < ((n + 3) & ~3); j++) flat[j] = _mm512_setzero_ps();
    float tmp[4];
    for (int j = 0; j < n; j += 4) {
        _mm_storeu_ps(tmp, sum4_f32_512(flat[j], flat[j + 1], flat[j + 2], flat[j + 3]));
        for (int q = 0; q < 4 && j + q < n; q++) s[j + q] = tmp[q];
    }
}

static inline void put_f32(float *Y, size_t ldy, int t0, int G, int R, const int *rows,
                           const float *s, const float *b, int accumulate) {
    for (int u = 0; u < G; u++)
        for (int k = 0; k < R; k++) {
            float *y = Y + (size_t)(t0 + u) * ldy + rows[k], v = s[u * R + k];
            if (b) v += b[rows[k]];
            if (accumulate) v += *y;
            *y = v;
        }
}

typedef void (*micro_f32_fn)(const float *const *w, int in, const float *x, size_t ldx,
                             size_t pf, float *s);
#define MK_F32(R_, G_)                                                                           \
    AVX512F static void mk_f32_##R_##_##G_(const float *const *w, int in, const float *x,         \
                                           size_t ldx, size_t pf, float *s) {                     \
        micro_f32_512(R_, G_, w, in, x, ldx, pf, s);                                              \
    }
MK_F32(4, 1) MK_F32(4, 2) MK_F32(4, 3) MK_F32(4, 4) MK_F32(4, 5) MK_F32(4, 6)
MK_F32(2, 1) MK_F32(2, 2) MK_F32(2, 3) MK_F32(2, 4) MK_F32(2, 5) MK_F32(2, 6)
MK_F32(2, 7) MK_F32(2, 8) MK_F32(2, 9) MK_F32(2, 10) MK_F32(2, 11) MK_F32(2, 12)
MK_F32(1, 1) MK_F32(1, 2) MK_F32(1, 3) MK_F32(1, 4) MK_F32(1, 5) MK_F32(1, 6)
MK_F32(1, 7) MK_F32(1, 8) MK_F32(1, 9) MK_F32(1, 10) MK_F32(1, 11) MK_F32(1, 12)
#undef MK_F32
static const micro_f32_fn mk_f32_4[F32_GMAX4 + 1] = {NULL, mk_f32_4_1, mk_f32_4_2, mk_f32_4_3,
                                                     mk_f32_4_4, mk_f32_4_5, mk_f32_4_6};
static const micro_f32_fn mk_f32_2[F32_GMAX2 + 1] = {
    NULL, mk_f32_2_1, mk_f32_2_2, mk_f32_2_3, mk_f32_2_4, mk_f32_2_5, mk_f32_2_6,
    mk_f32_2_7, mk_f32_2_8, mk_f32_2_9, mk_f32_2_10, mk_f32_2_11, mk_f32_2_12};
static const micro_f32_fn mk_f32_1[F32_GMAX2 + 1] = {
    NULL, mk_f32_1_1, mk_f32_1_2, mk_f32_1_3, mk_f32_1_4, mk_f32_1_5, mk_f32_1_6,
    mk_f32_1_7, mk_f32_1_8, mk_f32_1_9, mk_f32_1_10, mk_f32_1_11, mk_f32_1_12};


/* Decode (nb = 1): blocks of 8 rows (two adjacent rows in each of the four streams), each
 * output summed exactly as micro_f32_512 sums it (16-lane chain, the same tree), then bias and
 * Y added per output. Measured on TinyLM (C = 128, weights in L3), 4-row blocks through the
 * batch kernel's table were 5-7% slower than the AVX2 GEMV; this is level with it, and 1 KB
 * prefetches into L1 measured 2% faster than 2 KB into L2. */
AVX512F static void gemv1_f32_512(float *y, const float *x, const float *W, const float *b, int in,
                                  int r0, int r1, int accumulate) {
    const int q = (r1 - r0) / 4, q2 = q & ~1, in16 = in & ~15;
    const __mmask16 tail = (__mmask16)(in & 15 ? (1u << (in & 15)) - 1 : 0);
    for (int v = 0; v < q2; v += 2) {
        const float *w[8];
        int rows[8];
        for (int k = 0; k < 8; k++) {
            rows[k] = r0 + (k >> 1) * q + v + (k & 1);
            w[k] = W + (size_t)rows[k] * in;
        }
        __m512 a[8];
        for (int k = 0; k < 8; k++) a[k] = _mm512_setzero_ps();
        int i = 0;
        for (; i < in16; i += 16) {
            for (int k = 0; k < 8; k += 2) _mm_prefetch((const char *)(w[k] + i) + 1024, _MM_HINT_T0);
            const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) a[k] = _mm512_fmadd_ps(_mm512_loadu_ps(w[k] + i), xv, a[k]);
        }
        if (i < in) {
            const __m512 xv = _mm512_maskz_loadu_ps(tail, x + i);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                a[k] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w[k] + i), xv, a[k]);
        }
        float s[8];
        _mm_storeu_ps(s, sum4_f32_512(a[0], a[1], a[2], a[3]));
        _mm_storeu_ps(s + 4, sum4_f32_512(a[4], a[5], a[6], a[7]));
        for (int k = 0; k < 8; k++) {
            float o = s[k];
            if (b) o += b[rows[k]];
            if (accumulate) o += y[rows[k]];
            y[rows[k]] = o;
        }
    }
    /* the rest (an odd row per stream, the last 0-3 rows) through the block kernel */
    if (q2 < q) {
        float s[4];
        for (int k = 0; k < 4; k++) {
            const int r = r0 + k * q + q2;
            const float *const w[1] = {W + (size_t)r * in};
            mk_f32_1[1](w, in, x, 0, F32_PF, s);
            put_f32(y, 0, 0, 1, 1, &r, s, b, accumulate);
        }
    }
    for (int r = r0 + 4 * q; r < r1; r++) {
        float s[4];
        const float *const w[1] = {W + (size_t)r * in};
        mk_f32_1[1](w, in, x, 0, F32_PF, s);
        put_f32(y, 0, 0, 1, 1, &r, s, b, accumulate);
    }
}
AVX512F static void gemv_batch_avx512(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                      const float *W, const float *b, int in, int r0, int r1,
                                      int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    if (nb == 1) {
        gemv1_f32_512(Y, X, W, b, in, r0, r1, accumulate);
        return;
    }
    /* R = 4 rows x up to 6 inputs; 7-16 inputs R = 2 x one or two groups of up to 12 */
    const int R = nb <= F32_GMAX4 || nb > 16 ? 4 : 2, gmax = R == 4 ? F32_GMAX4 : F32_GMAX2;
    const int ngr = (nb + gmax - 1) / gmax, gsz = (nb + ngr - 1) / ngr;
    /* virtual row v < 4q is row r0 + (v % 4) q + v / 4 (four streams), then rows in order */
    const int q = (r1 - r0) / 4, nv = r1 - r0;
    int panel = (int)((192u << 10) / ((size_t)in * 4)) & ~3;
    if (panel < 4) panel = 4;
    float s[4 * F32_GMAX2];
    for (int p0 = 0; p0 < nv; p0 += panel) {
        const int p1 = nv - p0 < panel ? nv : p0 + panel;
        for (int t0 = 0, g = 0; t0 < nb; t0 += gsz, g++) {
            const int G = nb - t0 < gsz ? nb - t0 : gsz;
            const float *xg = X + (size_t)t0 * ldx;
            const size_t pfo = g == 0 ? F32_PF : g == 1 && p1 < nv ? (size_t)(panel / 4) * in * 4 : 0;
            int v = p0;
            for (; v + R <= p1 && v + R <= 4 * q; v += R) {
                int rows[4];
                const float *w[4];
                for (int k = 0; k < R; k++) {
                    rows[k] = r0 + ((v + k) & 3) * q + ((v + k) >> 2);
                    w[k] = W + (size_t)rows[k] * in;
                }
                (R == 4 ? mk_f32_4 : mk_f32_2)[G](w, in, xg, ldx, pfo, s);
                put_f32(Y, ldy, t0, G, R, rows, s, b, accumulate);
            }
            for (; v < p1; v++) {
                const int r = v < 4 * q ? r0 + (v & 3) * q + (v >> 2) : r0 + v;
                const float *const w[1] = {W + (size_t)r * in};
                mk_f32_1[G](w, in, xg, ldx, pfo, s);
                put_f32(Y, ldy, t0, G, 1, &r, s, b, accumulate);
            }
        }
    }
}

AVX512F static void gemv_avx512(float *y, const float *x, const float *W, const float *b, int in,
                                int r0, int r1, int accumulate) {
    gemv_batch_avx512(y, 0, x, 0, 1, W, b, in, r0, r1, accumulate);
}

/* gelu_tanh_avx2's arithmetic on 16 lanes (the reciprocal estimate is rcp14 here, so one Newton
 * step leaves ~1e-8 rather than ~1e-7), the tail under a mask instead of the scalar form: a
 * 96-token TinyLM prefill spends 5% of its time in GELU at 8 lanes. */
/* One vector of it; full: all 16 lanes (plain load and store). The rounding of z to a whole number
 * by adding and subtracting 1.5 x 2^23 (exact for |z| <= 126, to nearest even as roundscale's)
 * leaves that number in t's low mantissa bits, so 2^fz's exponent comes from t by an integer
 * subtract and shift: the same fz and 2^fz, so the same bits, without roundscale's and the
 * convert's port-0 operations (96 x 512 values 0.87x). */
AVX512F static inline __attribute__((always_inline)) void gelu_tanh16(float *x, __mmask16 m,
                                                                       int full) {
    const float k = -2.0f * 0.7978845608028654f * 1.4426950408889634f;
    const __m512 c0 = _mm512_set1_ps(k), c1 = _mm512_set1_ps(k * 0.044715f);
    const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    const __m512 hi = _mm512_set1_ps(126.0f), lo = _mm512_set1_ps(-126.0f);
    const __m512 M = _mm512_set1_ps(12582912.0f); /* 1.5 x 2^23 */
    const __m512i Mb = _mm512_set1_epi32(0x4B400000 - 127); /* its bits, less the bias */
    const __m512 p0 = _mm512_set1_ps(1.535336188319500e-4f);
    const __m512 p1 = _mm512_set1_ps(1.339887440266574e-3f);
    const __m512 p2 = _mm512_set1_ps(9.618437357674640e-3f);
    const __m512 p3 = _mm512_set1_ps(5.550332471162809e-2f);
    const __m512 p4 = _mm512_set1_ps(2.402264791363012e-1f);
    const __m512 p5 = _mm512_set1_ps(6.931472028550421e-1f);
    __m512 v = full ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m, x);
    __m512 z = _mm512_mul_ps(v, _mm512_fmadd_ps(c1, _mm512_mul_ps(v, v), c0));
    z = _mm512_max_ps(_mm512_min_ps(z, hi), lo);
    const __m512 t = _mm512_add_ps(z, M);
    const __m512 fz = _mm512_sub_ps(t, M);
    __m512 f = _mm512_sub_ps(z, fz);
    __m512 y = _mm512_fmadd_ps(p0, f, p1);
    y = _mm512_fmadd_ps(y, f, p2);
    y = _mm512_fmadd_ps(y, f, p3);
    y = _mm512_fmadd_ps(y, f, p4);
    y = _mm512_fmadd_ps(y, f, p5);
    y = _mm512_fmadd_ps(y, f, one);
    const __m512i e = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_castps_si512(t), Mb), 23);
    __m512 d = _mm512_fmadd_ps(y, _mm512_castsi512_ps(e), one);
    __m512 r = _mm512_rcp14_ps(d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, two));
    if (full) _mm512_storeu_ps(x, _mm512_mul_ps(v, r));
    else _mm512_mask_storeu_ps(x, m, _mm512_mul_ps(v, r));
}

AVX512F static void gelu_tanh_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) gelu_tanh16(x + i, 0xFFFF, 1);
    if (i < n) gelu_tanh16(x + i, (__mmask16)((1u << (n - i)) - 1), 0);
}

/* layernorm_avx2 on 16 lanes with its bits: the two 8-lane sums s0 (floats 0-7 of each 16) and
 * s1 (floats 8-15) are the low and high halves of one 16-lane sum, so each of their lanes adds
 * the same values in the same order, and s0 + s1 is formed as before; the normalisation is per
 * element. Half the vector operations of the 8-lane kernel (it was throughput-bound: about 110
 * cycles a 128-float row, 3% of a 96-token TinyLM prefill). With add (decode's residual form),
 * whose sum is one 8-lane chain, the 8-lane kernel runs. */
AVX512F static void layernorm_avx512(float *out, float *x, const float *add, const float *w,
                                     const float *b, int C, float eps) {
    if (add) {
        layernorm_avx2(out, x, add, w, b, C, eps);
        return;
    }
    const int C16 = C & ~15, C8 = C & ~7;
    __m512 s = _mm512_setzero_ps();
    int i = 0;
    for (; i < C16; i += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(x + i));
    __m256 s0 = _mm512_castps512_ps256(s), s1 = _mm512_extractf32x8_ps(s, 1);
    for (; i < C8; i += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    float mean = hsum256(_mm256_add_ps(s0, s1));
    for (; i < C; i++) mean += x[i];
    mean /= (float)C;
    const __m512 m = _mm512_set1_ps(mean);
    __m512 v = _mm512_setzero_ps();
    for (i = 0; i < C16; i += 16) {
        const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), m);
        v = _mm512_fmadd_ps(d, d, v);
    }
    __m256 v0 = _mm512_castps512_ps256(v), v1 = _mm512_extractf32x8_ps(v, 1);
    for (; i < C8; i += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm512_castps512_ps256(m));
        v0 = _mm256_fmadd_ps(d, d, v0);
    }
    float var = hsum256(_mm256_add_ps(v0, v1));
    for (; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (float)C;
    const float rs = 1.0f / sqrtf(var + eps);
    const __m512 r = _mm512_set1_ps(rs);
    for (i = 0; i < C16; i += 16) {
        const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m), r);
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(d, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i)));
    }
    for (; i < C8; i += 8) {
        const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm512_castps512_ps256(m)),
                                       _mm512_castps512_ps256(r));
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(d, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
    }
    for (; i < C; i++) out[i] = (x[i] - mean) * rs * w[i] + b[i];
}
#endif

/* ---------------------------------------------------------------------- portable entries */

static void layernorm_portable(float *out, float *x, const float *add, const float *w,
                               const float *b, int C, float eps) {
    if (add)
        for (int i = 0; i < C; i++) x[i] += add[i];
    layernorm_scalar(out, x, w, b, C, eps);
}

static void gemv_batch_portable(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                                const float *W, const float *b, int in, int r0, int r1,
                                int accumulate) {
    for (int j = 0; j < nb; j++)
        gemv_scalar(Y + (size_t)j * ldy, X + (size_t)j * ldx, W, b, in, r0, r1, accumulate);
}

static void gelu_tanh_portable(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = gelu_tanh_1(x[i]);
}

#ifdef WB_X86
AVX2 static void gemv_avx2(float *y, const float *x, const float *W, const float *b, int in,
                           int r0, int r1, int accumulate) {
    gemv_ld_avx2(y, x, W, (size_t)in, b, in, r0, r1, accumulate);
}
#endif

void wb_kernels_f32_register(wb_kernel_table *t, wb_isa isa) {
    if (isa == WB_ISA_PORTABLE) {
        t->gemv = gemv_scalar;
        t->gemv_batch = gemv_batch_portable;
        t->layernorm = layernorm_portable;
        t->gelu_tanh = gelu_tanh_portable;
        t->softmax = softmax_scalar;
        t->name_gemv = "portable";
    }
#ifdef WB_X86
    if (isa == WB_ISA_AVX2) {
        t->gemv = gemv_avx2;
        t->gemv_batch = gemv_batch_avx2;
        t->layernorm = layernorm_avx2;
        t->gelu_tanh = gelu_tanh_avx2;
        t->softmax = softmax_avx2;
        t->name_gemv = "avx2";
    }
    if (isa == WB_ISA_AVX512) { /* GEMV and batched GEMV change together: they sum alike */
        t->gemv = gemv_avx512;
        t->gemv_batch = gemv_batch_avx512;
        t->gelu_tanh = gelu_tanh_avx512;
        t->layernorm = layernorm_avx512;
        t->name_gemv = "avx512 register blocks 4x6 / 2x12 (4 streams)";
    }
#endif
}

/* -------------------------------------------------------------------------------- public */

void wb_layernorm_forward(float *out, const float *x, const float *w, const float *b, int C,
                          float eps) {
    /* x is only read when add is NULL */
    wb_kt()->layernorm(out, (float *)x, NULL, w, b, C, eps);
}

void wb_layernorm_add_forward(float *out, float *x, const float *add, const float *w,
                              const float *b, int C, float eps) {
    wb_kt()->layernorm(out, x, add, w, b, C, eps);
}

void wb_gemv_forward(float *y, const float *x, const float *W, const float *b, int in, int r0,
                     int r1, int accumulate) {
    wb_kt()->gemv(y, x, W, b, in, r0, r1, accumulate);
}

void wb_gemv_batch_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                           const float *W, const float *b, int in, int r0, int r1,
                           int accumulate) {
    wb_kt()->gemv_batch(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
}

void wb_gelu_forward(float *x, size_t n, wb_act act) {
    if (act == WB_ACT_GELU_ERF) {
        for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        return;
    }
    wb_kt()->gelu_tanh(x, n);
}

void wb_softmax_forward(float *x, int n) { wb_kt()->softmax(x, n); }
