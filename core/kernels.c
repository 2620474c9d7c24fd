/* kernels.c - the forward-pass building blocks, scalar reference and AVX2+FMA versions.
 *
 * Dispatch is decided once (__builtin_cpu_supports) and can be forced to scalar by tests. The
 * AVX2 code is compiled with target attributes so the library still builds and runs on any
 * x86-64 (or non-x86) machine; the scalar versions double as the portable fallback.
 */
#include "model_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------------------ dispatch */

static atomic_int g_force_scalar = 0;
static atomic_int g_have_avx2 = -1; /* -1: not probed yet; racing probes agree */

static int use_avx2(void) {
#ifdef WB_X86
    if (g_have_avx2 < 0) {
        __builtin_cpu_init();
        g_have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    return g_have_avx2 && !g_force_scalar;
#else
    return 0;
#endif
}

int wb_kernels_force_scalar(int on) {
    int old = g_force_scalar;
    g_force_scalar = on;
    return old;
}

const char *wb_kernels_name(void) { return use_avx2() ? "avx2+fma" : "scalar"; }

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

static float dot_scalar(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
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

AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Cephes-style expf: 2^n * p(r), |r| <= ln2/2, degree-5 polynomial, rel. error ~2e-7.
 * Inputs are clamped so the result is finite or a clean 0 (softmax feeds it x - max <= 0). */
AVX2 static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3365447504f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i n = _mm256_cvtps_epi32(fx);
    n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

/* 8 rows at a time: 8 independent FMA chains (enough to cover FMA latency on Zen3/Skylake)
 * sharing one load of x, then a transposing hadd tree turns the 8 accumulators into 8 outputs.
 * Rows are ld floats apart (in for weights, C for the K cache). */
AVX2 static void gemv_ld_avx2(float *y, const float *x, const float *W, size_t ld,
                              const float *b, int in, int r0, int r1, int accumulate) {
    int r = r0;
    const int in8 = in & ~7;
    for (; r + 8 <= r1; r += 8) {
        const float *w = W + (size_t)r * ld;
        const size_t s = ld;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int i = 0; i < in8; i += 8) {
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
 * one exp and stays finite at both ends (exp is clamped, x / huge -> 0). */
AVX2 static void gelu_tanh_avx2(float *x, size_t n) {
    const __m256 c0 = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
    const __m256 c1 = _mm256_set1_ps(0.044715f), one = _mm256_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 v2 = _mm256_mul_ps(v, v);
        __m256 u = _mm256_mul_ps(_mm256_mul_ps(c0, v), _mm256_fmadd_ps(c1, v2, one));
        __m256 e = exp256(u);
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
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

/* Scores are a GEMV over the key rows (stride C), so they reuse the 8-row kernel; the weighted
 * sum of values keeps 4 output vectors in registers across the whole t loop. */
AVX2 static void attention_avx2(float *out, const float *q, const float *k, const float *v,
                                size_t stride, int p, int hs, float *att) {
    const float scale = 1.0f / sqrtf((float)hs);
    gemv_ld_avx2(att, q, k, stride, NULL, hs, 0, p + 1, 0);
    for (int t = 0; t <= p; t++) att[t] *= scale;
    softmax_avx2(att, p + 1);
    const int hs8 = hs & ~7;
    int i = 0;
    for (; i + 32 <= hs8; i += 32) {
        __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
        for (int t = 0; t <= p; t++) {
            const float *vt = v + (size_t)t * stride + i;
            __m256 a = _mm256_broadcast_ss(att + t);
            o0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vt), o0);
            o1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vt + 8), o1);
            o2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vt + 16), o2);
            o3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(vt + 24), o3);
        }
        _mm256_storeu_ps(out + i, o0);
        _mm256_storeu_ps(out + i + 8, o1);
        _mm256_storeu_ps(out + i + 16, o2);
        _mm256_storeu_ps(out + i + 24, o3);
    }
    for (; i < hs8; i += 8) {
        __m256 o = _mm256_setzero_ps();
        for (int t = 0; t <= p; t++)
            o = _mm256_fmadd_ps(_mm256_broadcast_ss(att + t), _mm256_loadu_ps(v + (size_t)t * stride + i), o);
        _mm256_storeu_ps(out + i, o);
    }
    for (; i < hs; i++) {
        float o = 0.0f;
        for (int t = 0; t <= p; t++) o += att[t] * v[(size_t)t * stride + i];
        out[i] = o;
    }
}

/* nq consecutive queries of one head (absolute positions pos..pos+nq-1) against keys
 * 0..pos+nq-1. K is first transposed to kt [hs, P8] so that scores for 8 keys x 4 queries come
 * from plain broadcast-FMAs with no horizontal sums; the weighted sum of values then takes two
 * queries at a time with V rows loaded once for both. Needs hs % 8 == 0. */
AVX2 static void attention_block_avx2(float *out, size_t ldo, const float *q, size_t ldq,
                                      const float *k, const float *v, size_t ldkv, int pos, int nq,
                                      int hs, float *scratch) {
    const int P = pos + nq, P8 = (P + 7) & ~7;
    const float scale = 1.0f / sqrtf((float)hs);
    float *kt = scratch, *S = scratch + (size_t)hs * P8; /* kt [hs, P8], S [4, P8] */
    for (int t = 0; t < P; t++)
        for (int d = 0; d < hs; d++) kt[(size_t)d * P8 + t] = k[(size_t)t * ldkv + d];
    for (int d = 0; d < hs; d++)
        for (int t = P; t < P8; t++) kt[(size_t)d * P8 + t] = 0.0f;
    for (int i0 = 0; i0 < nq; i0 += 4) {
        const int g = nq - i0 < 4 ? nq - i0 : 4;
        const int L = pos + i0 + g, L8 = (L + 7) & ~7; /* keys the last query of the group sees */
        const float *qi[4];
        for (int i = 0; i < 4; i++) qi[i] = q + (size_t)(i0 + (i < g ? i : 0)) * ldq;
        for (int t = 0; t < L8; t += 8) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int d = 0; d < hs; d++) {
                __m256 kv = _mm256_loadu_ps(kt + (size_t)d * P8 + t);
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(qi[0] + d), kv, a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(qi[1] + d), kv, a1);
                a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(qi[2] + d), kv, a2);
                a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(qi[3] + d), kv, a3);
            }
            __m256 sc = _mm256_set1_ps(scale);
            _mm256_storeu_ps(S + t, _mm256_mul_ps(a0, sc));
            _mm256_storeu_ps(S + P8 + t, _mm256_mul_ps(a1, sc));
            _mm256_storeu_ps(S + 2 * (size_t)P8 + t, _mm256_mul_ps(a2, sc));
            _mm256_storeu_ps(S + 3 * (size_t)P8 + t, _mm256_mul_ps(a3, sc));
        }
        for (int i = 0; i < g; i++) {
            float *row = S + (size_t)i * P8;
            const int Li = pos + i0 + i + 1;
            softmax_avx2(row, Li);
            for (int t = Li; t < L; t++) row[t] = 0.0f; /* causal: future keys weigh nothing */
        }
        for (int i = 0; i < g; i += 2) {
            const int two = i + 1 < g;
            const float *p0 = S + (size_t)i * P8, *p1 = S + (size_t)(i + two) * P8;
            float *o0 = out + (size_t)(i0 + i) * ldo, *o1 = out + (size_t)(i0 + i + two) * ldo;
            for (int d = 0; d < hs; d += 32 <= hs - d ? 32 : 8) {
                if (d + 32 <= hs) {
                    __m256 x0 = _mm256_setzero_ps(), x1 = x0, x2 = x0, x3 = x0;
                    __m256 y0 = x0, y1 = x0, y2 = x0, y3 = x0;
                    for (int t = 0; t < L; t++) {
                        const float *vt = v + (size_t)t * ldkv + d;
                        __m256 v0 = _mm256_loadu_ps(vt), v1 = _mm256_loadu_ps(vt + 8),
                               v2 = _mm256_loadu_ps(vt + 16), v3 = _mm256_loadu_ps(vt + 24);
                        __m256 b0 = _mm256_broadcast_ss(p0 + t), b1 = _mm256_broadcast_ss(p1 + t);
                        x0 = _mm256_fmadd_ps(b0, v0, x0);
                        x1 = _mm256_fmadd_ps(b0, v1, x1);
                        x2 = _mm256_fmadd_ps(b0, v2, x2);
                        x3 = _mm256_fmadd_ps(b0, v3, x3);
                        y0 = _mm256_fmadd_ps(b1, v0, y0);
                        y1 = _mm256_fmadd_ps(b1, v1, y1);
                        y2 = _mm256_fmadd_ps(b1, v2, y2);
                        y3 = _mm256_fmadd_ps(b1, v3, y3);
                    }
                    _mm256_storeu_ps(o0 + d, x0);
                    _mm256_storeu_ps(o0 + d + 8, x1);
                    _mm256_storeu_ps(o0 + d + 16, x2);
                    _mm256_storeu_ps(o0 + d + 24, x3);
                    if (two) {
                        _mm256_storeu_ps(o1 + d, y0);
                        _mm256_storeu_ps(o1 + d + 8, y1);
                        _mm256_storeu_ps(o1 + d + 16, y2);
                        _mm256_storeu_ps(o1 + d + 24, y3);
                    }
                } else {
                    __m256 x0 = _mm256_setzero_ps(), y0 = x0;
                    for (int t = 0; t < L; t++) {
                        __m256 v0 = _mm256_loadu_ps(v + (size_t)t * ldkv + d);
                        x0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + t), v0, x0);
                        y0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p1 + t), v0, y0);
                    }
                    _mm256_storeu_ps(o0 + d, x0);
                    if (two) _mm256_storeu_ps(o1 + d, y0);
                }
            }
        }
    }
}

AVX2 static void layernorm_avx2(float *out, const float *x, const float *w, const float *b, int C,
                                float eps) {
    const int C8 = C & ~7;
    __m256 sv = _mm256_setzero_ps();
    int i = 0;
    for (; i < C8; i += 8) sv = _mm256_add_ps(sv, _mm256_loadu_ps(x + i));
    float mean = hsum256(sv);
    for (; i < C; i++) mean += x[i];
    mean /= (float)C;
    __m256 m = _mm256_set1_ps(mean), vv = _mm256_setzero_ps();
    for (i = 0; i < C8; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        vv = _mm256_fmadd_ps(d, d, vv);
    }
    float var = hsum256(vv);
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

/* -------------------------------------------------------------------------------- public */

void wb_layernorm_forward(float *out, const float *x, const float *w, const float *b, int C,
                          float eps) {
#ifdef WB_X86
    if (use_avx2()) {
        layernorm_avx2(out, x, w, b, C, eps);
        return;
    }
#endif
    layernorm_scalar(out, x, w, b, C, eps);
}

void wb_gemv_forward(float *y, const float *x, const float *W, const float *b, int in, int r0,
                     int r1, int accumulate) {
#ifdef WB_X86
    if (use_avx2()) {
        gemv_ld_avx2(y, x, W, (size_t)in, b, in, r0, r1, accumulate);
        return;
    }
#endif
    gemv_scalar(y, x, W, b, in, r0, r1, accumulate);
}

void wb_gemv_batch_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                           const float *W, const float *b, int in, int r0, int r1,
                           int accumulate) {
#ifdef WB_X86
    if (use_avx2()) {
        gemv_batch_avx2(Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate);
        return;
    }
#endif
    for (int j = 0; j < nb; j++)
        gemv_scalar(Y + (size_t)j * ldy, X + (size_t)j * ldx, W, b, in, r0, r1, accumulate);
}

void wb_gelu_forward(float *x, size_t n, wb_act act) {
    if (act == WB_ACT_GELU_ERF) {
        for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        return;
    }
#ifdef WB_X86
    if (use_avx2()) {
        gelu_tanh_avx2(x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) x[i] = gelu_tanh_1(x[i]);
}

void wb_softmax_forward(float *x, int n) {
#ifdef WB_X86
    if (use_avx2()) {
        softmax_avx2(x, n);
        return;
    }
#endif
    softmax_scalar(x, n);
}

void wb_attention_forward(float *out, const float *q, const float *k, const float *v,
                          size_t stride, int p, int hs, float *att) {
#ifdef WB_X86
    if (use_avx2()) {
        attention_avx2(out, q, k, v, stride, p, hs, att);
        return;
    }
#endif
    const float scale = 1.0f / sqrtf((float)hs);
    for (int t = 0; t <= p; t++) att[t] = dot_scalar(q, k + (size_t)t * stride, hs) * scale;
    softmax_scalar(att, p + 1);
    for (int i = 0; i < hs; i++) out[i] = 0.0f;
    for (int t = 0; t <= p; t++) {
        const float *vt = v + (size_t)t * stride;
        for (int i = 0; i < hs; i++) out[i] += att[t] * vt[i];
    }
}

size_t wb_attention_block_scratch(int pos, int nq, int hs) {
    size_t P8 = (size_t)((pos + nq + 7) & ~7);
    return ((size_t)hs + 4) * P8;
}

void wb_attention_block_forward(float *out, size_t ldo, const float *q, size_t ldq, const float *k,
                                const float *v, size_t ldkv, int pos, int nq, int hs,
                                float *scratch) {
#ifdef WB_X86
    if (use_avx2() && hs % 8 == 0) {
        attention_block_avx2(out, ldo, q, ldq, k, v, ldkv, pos, nq, hs, scratch);
        return;
    }
#endif
    for (int i = 0; i < nq; i++)
        wb_attention_forward(out + (size_t)i * ldo, q + (size_t)i * ldq, k, v, ldkv, pos + i, hs,
                             scratch);
}
