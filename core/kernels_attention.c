/* kernels_attention.c - causal attention over a KV cache: one query (decode) and blocks of
 * queries (prefill), portable and AVX2+FMA versions, registered in the dispatch table (cpu.c).
 *
 * The portable versions are the reference the tests compare every other level with
 * (tests/c/test_kernels.c). The probe (inspect.c) recomputes the weights in double from the same
 * queries and cache rows, so nothing here may change q, k or v.
 */
#include "cpu.h"
#include "kernels_simd.h"
#include "model_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#endif

/* ------------------------------------------------------------------------------ portable */

static void attention_portable(float *out, const float *q, const float *k, const float *v,
                               size_t stride, int p, int hs, float *att) {
    const float scale = 1.0f / sqrtf((float)hs);
    for (int t = 0; t <= p; t++) {
        const float *kt = k + (size_t)t * stride;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += q[i] * kt[i];
        att[t] = s * scale;
    }
    float mx = att[0], sum = 0.0f;
    for (int t = 1; t <= p; t++) mx = att[t] > mx ? att[t] : mx;
    for (int t = 0; t <= p; t++) sum += (att[t] = expf(att[t] - mx));
    for (int t = 0; t <= p; t++) att[t] *= 1.0f / sum;
    for (int i = 0; i < hs; i++) out[i] = 0.0f;
    for (int t = 0; t <= p; t++) {
        const float *vt = v + (size_t)t * stride;
        for (int i = 0; i < hs; i++) out[i] += att[t] * vt[i];
    }
}

/* --------------------------------------------------------------------------------- AVX2 */

#ifdef WB_X86
#define AVX2 WB_AVX2

/* s[t] = q . k_t for t < n, key rows ld floats apart. */
AVX2 static void key_scores_avx2(float *s, const float *q, const float *k, size_t ld, int hs,
                                 int n) {
    const int hs8 = hs & ~7;
    int r = 0;
    for (; r + 8 <= n; r += 8) {
        const float *w = k + (size_t)r * ld;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int i = 0; i < hs8; i += 8) {
            __m256 xv = _mm256_loadu_ps(q + i);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), xv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + ld + i), xv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 2 * ld + i), xv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 3 * ld + i), xv, a3);
            a4 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 4 * ld + i), xv, a4);
            a5 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 5 * ld + i), xv, a5);
            a6 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 6 * ld + i), xv, a6);
            a7 = _mm256_fmadd_ps(_mm256_loadu_ps(w + 7 * ld + i), xv, a7);
        }
        __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
        __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
        __m128 lo = _mm_add_ps(_mm256_castps256_ps128(s0123), _mm256_extractf128_ps(s0123, 1));
        __m128 hi = _mm_add_ps(_mm256_castps256_ps128(s4567), _mm256_extractf128_ps(s4567, 1));
        __m256 out = _mm256_set_m128(hi, lo);
        if (hs8 < hs) {
            float t[8];
            for (int j = 0; j < 8; j++) {
                float acc = 0.0f;
                for (int i = hs8; i < hs; i++) acc += w[j * ld + i] * q[i];
                t[j] = acc;
            }
            out = _mm256_add_ps(out, _mm256_loadu_ps(t));
        }
        _mm256_storeu_ps(s + r, out);
    }
    for (; r < n; r++) {
        const float *w = k + (size_t)r * ld;
        __m256 a = _mm256_setzero_ps();
        int i = 0;
        for (; i < hs8; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(q + i), a);
        float acc = hsum256(a);
        for (; i < hs; i++) acc += w[i] * q[i];
        s[r] = acc;
    }
}

/* Scores are a GEMV over the key rows (stride C): 8 rows at a time sharing one load of q, then a
 * transposing hadd tree (the sums of kernels.c's 8-row GEMV); the weighted sum of values keeps 4
 * output vectors in registers across the whole t loop. */
AVX2 static void attention_avx2(float *out, const float *q, const float *k, const float *v,
                                size_t stride, int p, int hs, float *att) {
    const float scale = 1.0f / sqrtf((float)hs);
    key_scores_avx2(att, q, k, stride, hs, p + 1);
    for (int t = 0; t <= p; t++) att[t] *= scale;
    wb_softmax_forward(att, p + 1); /* the level's softmax */
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

/* kt[d * P16 + t] = k[t * ldkv + d] for t < P, zero for P <= t < P16 (P16 >= P, the row length
 * of kt): 8x8 register transposes (hs % 8 == 0), then the last P % 8 rows one by one. */
AVX2 static void transpose_keys(float *kt, const float *k, size_t ldkv, int P, int P16, int hs) {
    const int P8 = P & ~7;
    for (int t = 0; t < P8; t += 8)
        for (int d = 0; d < hs; d += 8) {
            __m256 r0 = _mm256_loadu_ps(k + (size_t)(t + 0) * ldkv + d);
            __m256 r1 = _mm256_loadu_ps(k + (size_t)(t + 1) * ldkv + d);
            __m256 r2 = _mm256_loadu_ps(k + (size_t)(t + 2) * ldkv + d);
            __m256 r3 = _mm256_loadu_ps(k + (size_t)(t + 3) * ldkv + d);
            __m256 r4 = _mm256_loadu_ps(k + (size_t)(t + 4) * ldkv + d);
            __m256 r5 = _mm256_loadu_ps(k + (size_t)(t + 5) * ldkv + d);
            __m256 r6 = _mm256_loadu_ps(k + (size_t)(t + 6) * ldkv + d);
            __m256 r7 = _mm256_loadu_ps(k + (size_t)(t + 7) * ldkv + d);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *o = kt + (size_t)d * P16 + t;
            _mm256_storeu_ps(o + 0 * (size_t)P16, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(o + 1 * (size_t)P16, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(o + 2 * (size_t)P16, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(o + 3 * (size_t)P16, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(o + 4 * (size_t)P16, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(o + 5 * (size_t)P16, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(o + 6 * (size_t)P16, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(o + 7 * (size_t)P16, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    for (int d = 0; d < hs; d++) {
        float *o = kt + (size_t)d * P16;
        for (int t = P8; t < P; t++) o[t] = k[(size_t)t * ldkv + d];
        for (int t = P; t < P16; t++) o[t] = 0.0f;
    }
}

/* nq consecutive queries of one head (absolute positions pos..pos+nq-1) against keys
 * 0..pos+nq-1, a flash-style pass per group of 6 queries:
 * - K is transposed once to kt [hs, P16] so scores for 6 queries x 16 keys are 12 independent
 *   broadcast-FMA chains (2 loads + 6 broadcasts per 12 FMAs: FMA-bound, and 12 chains hide
 *   the FMA latency where 8 did not quite), scaled on the store;
 *   only the key blocks the group's last query sees are computed (the causal triangle);
 * - softmax per row in whole vectors: future keys masked out of the max and to an exact 0
 *   after the exp (no scalar tails), the 1/sum left for the end;
 * - the weighted sum of values (over V packed to hs-float rows) takes two queries at a time, V
 *   rows loaded once for both, and is scaled by 1/sum on the store.
 * kt and the packed V (v, rows of hs) come from attention_block_avx2_heads, once for all the heads
 * that share them; S [6, P16] is scratch. Needs hs % 8 == 0. */
AVX2 static void attention_block_avx2(float *out, size_t ldo, const float *q, size_t ldq,
                                      const float *kt, const float *v, float *S, int pos, int nq,
                                      int hs) {
    const int P = pos + nq, P16 = (P + 15) & ~15;
    const size_t ldkv = (size_t)hs;
    const __m256 scale = _mm256_set1_ps(1.0f / sqrtf((float)hs));
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    for (int i0 = 0; i0 < nq; i0 += 6) {
        const int g = nq - i0 < 6 ? nq - i0 : 6;
        const int L = pos + i0 + g, L16 = (L + 15) & ~15; /* keys the group's last query sees */
        const float *q0 = q + (size_t)i0 * ldq;
        const float *q1 = q + (size_t)(i0 + (g > 1)) * ldq;
        const float *q2 = q + (size_t)(i0 + (g > 2 ? 2 : 0)) * ldq;
        const float *q3 = q + (size_t)(i0 + (g > 3 ? 3 : 0)) * ldq;
        const float *q4 = q + (size_t)(i0 + (g > 4 ? 4 : 0)) * ldq;
        const float *q5 = q + (size_t)(i0 + (g > 5 ? 5 : 0)) * ldq;
        for (int t = 0; t < L16; t += 16) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
            __m256 c0 = a0, c1 = a0, c2 = a0, c3 = a0, c4 = a0, c5 = a0;
            const float *kd = kt + t;
            for (int d = 0; d < hs; d++, kd += P16) {
                __m256 k0 = _mm256_load_ps(kd), k1 = _mm256_load_ps(kd + 8);
                __m256 b = _mm256_broadcast_ss(q0 + d);
                a0 = _mm256_fmadd_ps(b, k0, a0);
                c0 = _mm256_fmadd_ps(b, k1, c0);
                b = _mm256_broadcast_ss(q1 + d);
                a1 = _mm256_fmadd_ps(b, k0, a1);
                c1 = _mm256_fmadd_ps(b, k1, c1);
                b = _mm256_broadcast_ss(q2 + d);
                a2 = _mm256_fmadd_ps(b, k0, a2);
                c2 = _mm256_fmadd_ps(b, k1, c2);
                b = _mm256_broadcast_ss(q3 + d);
                a3 = _mm256_fmadd_ps(b, k0, a3);
                c3 = _mm256_fmadd_ps(b, k1, c3);
                b = _mm256_broadcast_ss(q4 + d);
                a4 = _mm256_fmadd_ps(b, k0, a4);
                c4 = _mm256_fmadd_ps(b, k1, c4);
                b = _mm256_broadcast_ss(q5 + d);
                a5 = _mm256_fmadd_ps(b, k0, a5);
                c5 = _mm256_fmadd_ps(b, k1, c5);
            }
            float *s = S + t;
            _mm256_store_ps(s, _mm256_mul_ps(a0, scale));
            _mm256_store_ps(s + 8, _mm256_mul_ps(c0, scale));
            _mm256_store_ps(s + P16, _mm256_mul_ps(a1, scale));
            _mm256_store_ps(s + P16 + 8, _mm256_mul_ps(c1, scale));
            _mm256_store_ps(s + 2 * (size_t)P16, _mm256_mul_ps(a2, scale));
            _mm256_store_ps(s + 2 * (size_t)P16 + 8, _mm256_mul_ps(c2, scale));
            _mm256_store_ps(s + 3 * (size_t)P16, _mm256_mul_ps(a3, scale));
            _mm256_store_ps(s + 3 * (size_t)P16 + 8, _mm256_mul_ps(c3, scale));
            _mm256_store_ps(s + 4 * (size_t)P16, _mm256_mul_ps(a4, scale));
            _mm256_store_ps(s + 4 * (size_t)P16 + 8, _mm256_mul_ps(c4, scale));
            _mm256_store_ps(s + 5 * (size_t)P16, _mm256_mul_ps(a5, scale));
            _mm256_store_ps(s + 5 * (size_t)P16 + 8, _mm256_mul_ps(c5, scale));
        }
        /* softmax for the group's 6 rows together, key block by key block (rows past g hold
         * finite scores of a duplicated query and are ignored): 6 independent max / exp / sum
         * chains per block keep the core busy where one row at a time waited on each row's
         * reductions. Row i sees Li = L0 + i keys; blocks below L0 & ~7 are whole for every
         * row, the last one or two are masked per row: no max over a future key, and an exact 0
         * after the exp, up to Le, as far as the value pass reads. */
        const int L0 = pos + i0 + 1, Lw = L0 & ~7, Le = (L + 7) & ~7;
        __m256 mv[6], sv[6];
        float inv[6];
        for (int i = 0; i < 6; i++) mv[i] = ninf, sv[i] = _mm256_setzero_ps();
        for (int t = 0; t < Lw; t += 8)
            for (int i = 0; i < 6; i++)
                mv[i] = _mm256_max_ps(mv[i], _mm256_load_ps(S + (size_t)i * P16 + t));
        for (int t = Lw; t < Le; t += 8) {
            const __m256 idx = _mm256_add_ps(lane, _mm256_set1_ps((float)(t - L0)));
            for (int i = 0; i < 6; i++) { /* keep t + lane < L0 + i */
                __m256 keep = _mm256_cmp_ps(idx, _mm256_set1_ps((float)i), _CMP_LT_OQ);
                mv[i] = _mm256_max_ps(
                    mv[i], _mm256_blendv_ps(ninf, _mm256_load_ps(S + (size_t)i * P16 + t), keep));
            }
        }
        for (int i = 0; i < 6; i++) {
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv[i]), _mm256_extractf128_ps(mv[i], 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            mv[i] = _mm256_broadcastss_ps(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        }
        for (int t = 0; t < Lw; t += 8)
            for (int i = 0; i < 6; i++) {
                float *r = S + (size_t)i * P16 + t;
                __m256 e = exp256(_mm256_sub_ps(_mm256_load_ps(r), mv[i]));
                _mm256_store_ps(r, e);
                sv[i] = _mm256_add_ps(sv[i], e);
            }
        for (int t = Lw; t < Le; t += 8) {
            const __m256 idx = _mm256_add_ps(lane, _mm256_set1_ps((float)(t - L0)));
            for (int i = 0; i < 6; i++) {
                float *r = S + (size_t)i * P16 + t;
                __m256 keep = _mm256_cmp_ps(idx, _mm256_set1_ps((float)i), _CMP_LT_OQ);
                __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_load_ps(r), mv[i])), keep);
                _mm256_store_ps(r, e);
                sv[i] = _mm256_add_ps(sv[i], e);
            }
        }
        for (int i = 0; i < 6; i++) inv[i] = 1.0f / hsum256(sv[i]);
        for (int i = 0; i < g; i += 2) {
            const int two = i + 1 < g;
            const float *p0 = S + (size_t)i * P16, *p1 = S + (size_t)(i + two) * P16;
            float *o0 = out + (size_t)(i0 + i) * ldo, *o1 = out + (size_t)(i0 + i + two) * ldo;
            /* row i sees one key fewer than row i+1: its weight there is 0 */
            const int Lp = pos + i0 + i + 1 + two;
            const __m256 s0 = _mm256_set1_ps(inv[i]), s1 = _mm256_set1_ps(inv[i + two]);
            for (int d = 0; d < hs; d += 32 <= hs - d ? 32 : 8) {
                if (d + 32 <= hs) {
                    __m256 x0 = _mm256_setzero_ps(), x1 = x0, x2 = x0, x3 = x0;
                    __m256 y0 = x0, y1 = x0, y2 = x0, y3 = x0;
                    for (int t = 0; t < Lp; t++) {
                        const float *vt = v + (size_t)t * ldkv + d;
                        __m256 v0 = _mm256_loadu_ps(vt), v1 = _mm256_loadu_ps(vt + 8),
                               v2 = _mm256_loadu_ps(vt + 16), v3 = _mm256_loadu_ps(vt + 24);
                        /* keep V in registers: folded into the FMAs, each V vector would be
                         * loaded once per query */
                        __asm__("" : "+x"(v0), "+x"(v1), "+x"(v2), "+x"(v3));
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
                    _mm256_storeu_ps(o0 + d, _mm256_mul_ps(x0, s0));
                    _mm256_storeu_ps(o0 + d + 8, _mm256_mul_ps(x1, s0));
                    _mm256_storeu_ps(o0 + d + 16, _mm256_mul_ps(x2, s0));
                    _mm256_storeu_ps(o0 + d + 24, _mm256_mul_ps(x3, s0));
                    if (two) {
                        _mm256_storeu_ps(o1 + d, _mm256_mul_ps(y0, s1));
                        _mm256_storeu_ps(o1 + d + 8, _mm256_mul_ps(y1, s1));
                        _mm256_storeu_ps(o1 + d + 16, _mm256_mul_ps(y2, s1));
                        _mm256_storeu_ps(o1 + d + 24, _mm256_mul_ps(y3, s1));
                    }
                } else {
                    __m256 x0 = _mm256_setzero_ps(), y0 = x0;
                    for (int t = 0; t < Lp; t++) {
                        __m256 v0 = _mm256_loadu_ps(v + (size_t)t * ldkv + d);
                        x0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + t), v0, x0);
                        y0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p1 + t), v0, y0);
                    }
                    _mm256_storeu_ps(o0 + d, _mm256_mul_ps(x0, s0));
                    if (two) _mm256_storeu_ps(o1 + d, _mm256_mul_ps(y0, s1));
                }
            }
        }
    }
}
/* ------------------------------------------------------------------------------ AVX-512 */

#define AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#define ATT_R 12 /* query rows per score tile: 12 rows x 32 keys = 24 accumulators */
#define ATT_PV 6 /* rows per weighted-sum tile: 6 rows x 64 columns = 24 accumulators */

AVX512 static inline float hmax512(__m512 v) { return _mm512_reduce_max_ps(v); }


/* Lanes l of the 16 keys from t with a <= t + l <= b. */
AVX512 static inline __mmask16 key_mask(int t, int a, int b) {
    const __m512i l = _mm512_add_epi32(_mm512_set1_epi32(t),
                                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                         12, 13, 14, 15));
    return _mm512_cmp_epi32_mask(l, _mm512_set1_epi32(a), _MM_CMPINT_GE) &
           _mm512_cmp_epi32_mask(l, _mm512_set1_epi32(b), _MM_CMPINT_LE);
}

/* S[r, t..t+32) = q_r . kt[:, t..t+32) for the tile's 12 rows: per d, two key vectors and 12
 * broadcasts of q_r[d], read straight from the query rows (a transpose of the queries into a
 * [hs, 12] block cost 12% of the kernel at hs = 32), feed 24 independent FMA chains (FMA-bound;
 * 12 chains of 2 cover the latency). */
AVX512 static inline void scores_tile_512(float *S, size_t lds, const float *const *qr,
                                          const float *kt, size_t ldt, int t, int hs) {
    __m512 a[ATT_R], c[ATT_R];
#pragma GCC unroll 12
    for (int r = 0; r < ATT_R; r++) a[r] = c[r] = _mm512_setzero_ps();
    const float *kd = kt + t;
    for (int d = 0; d < hs; d++, kd += ldt) {
        __m512 k0 = _mm512_load_ps(kd), k1 = _mm512_load_ps(kd + 16);
        /* in registers: gcc otherwise spills k1 and reloads it for every row */
        __asm__("" : "+v"(k0), "+v"(k1));
#pragma GCC unroll 12
        for (int r = 0; r < ATT_R; r++) {
            const __m512 b = _mm512_set1_ps(qr[r][d]);
            a[r] = _mm512_fmadd_ps(b, k0, a[r]);
            c[r] = _mm512_fmadd_ps(b, k1, c[r]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < ATT_R; r++) {
        _mm512_store_ps(S + (size_t)r * lds + t, a[r]);
        _mm512_store_ps(S + (size_t)r * lds + t + 16, c[r]);
    }
}

/* The softmax of a whole tile (ATT_R rows) in place over its key blocks t0..te, row r over keys
 * a[r]..b[r] (exact zeros elsewhere), 1/sum to inv[r]: every row's max, exp and sum as the row
 * loop below computes them (the same blocks in the same order, so the same bits), but all rows
 * through each key block together: 12 independent chains and loops of the same trip count
 * instead of a few short, latency-bound ones per row (the row loop was a third of the kernel at
 * hs = 32). */
AVX512 static inline void softmax_tile_512(float *S, size_t lds, const int *a, const int *b,
                                           int t0, int te, float scale, float *inv) {
    __m512 mv[ATT_R], sv[ATT_R];
#pragma GCC unroll 12
    for (int r = 0; r < ATT_R; r++) mv[r] = _mm512_set1_ps(-INFINITY);
    for (int t = t0; t < te; t += 16)
#pragma GCC unroll 12
        for (int r = 0; r < ATT_R; r++)
            mv[r] = _mm512_mask_max_ps(mv[r], key_mask(t, a[r], b[r]), mv[r],
                                       _mm512_load_ps(S + (size_t)r * lds + t));
    float ms[ATT_R];
#pragma GCC unroll 12
    for (int r = 0; r < ATT_R; r++) ms[r] = hmax512(mv[r]), sv[r] = _mm512_setzero_ps();
    const __m512 sc = _mm512_set1_ps(scale);
    for (int t = t0; t < te; t += 16)
#pragma GCC unroll 12
        for (int r = 0; r < ATT_R; r++) {
            float *st = S + (size_t)r * lds + t;
            const __m512 e = _mm512_maskz_mov_ps(
                key_mask(t, a[r], b[r]),
                exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_load_ps(st), _mm512_set1_ps(ms[r])), sc)));
            _mm512_store_ps(st, e);
            sv[r] = _mm512_add_ps(sv[r], e);
        }
#pragma GCC unroll 12
    for (int r = 0; r < ATT_R; r++) inv[r] = 1.0f / _mm512_reduce_add_ps(sv[r]);
}

/* acc[r][c] = sum_t P[r, t] V[t, c] for 6 rows and NV vectors of 16 columns from col, keys
 * t0..t1; out_r[col..] = acc * inv[r] (the last vector under cmask). */
AVX512 static inline __attribute__((always_inline)) void pv_tile_512(
    const int NV, float *const *o, const float *S, size_t lds, const float *vc, size_t ldv,
    int col, int t0, int t1, const float *inv, int rows, __mmask16 cmask) {
    __m512 acc[ATT_PV][4];
#pragma GCC unroll 6
    for (int r = 0; r < ATT_PV; r++)
#pragma GCC unroll 4
        for (int u = 0; u < NV; u++) acc[r][u] = _mm512_setzero_ps();
    const float *vt = vc + (size_t)t0 * ldv + col;
    for (int t = t0; t < t1; t++, vt += ldv) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int u = 0; u < NV; u++) vv[u] = _mm512_load_ps(vt + 16 * u);
#pragma GCC unroll 6
        for (int r = 0; r < ATT_PV; r++) {
            const __m512 b = _mm512_set1_ps(S[(size_t)r * lds + t]);
#pragma GCC unroll 4
            for (int u = 0; u < NV; u++) acc[r][u] = _mm512_fmadd_ps(b, vv[u], acc[r][u]);
        }
    }
    for (int r = 0; r < rows; r++) {
        const __m512 sc = _mm512_set1_ps(inv[r]);
        for (int u = 0; u < NV; u++)
            _mm512_mask_storeu_ps(o[r] + col + 16 * u, u == NV - 1 ? cmask : (__mmask16)0xffff,
                                  _mm512_mul_ps(acc[r][u], sc));
    }
}

/* Prefill attention for ng query heads sharing one KV head (GQA), nq consecutive queries at
 * positions pos..pos+nq-1: the heads' M = nq x ng query rows meet each key and value once per
 * item instead of once per head. Rows are ordered (query, head), so a tile's rows have nearly
 * the same position and the causal triangle costs little beyond what they see.
 * - the keys the item sees (from the window's start) are transposed once to kt [hs, NK32] and the
 *   values packed to vc [nk, hs16] (rows a power of two floats apart all fall into a few L1 sets);
 * - per tile of 12 rows: scores for 32-key blocks as a small GEMM (scores_tile_512, the queries
 *   broadcast from their rows), only over the key blocks some row of the tile sees; softmax per
 *   row (the exp over the row's own 16-key blocks) on the
 *   raw dot products (the scale applied inside the exp: exp((s - max) x scale)), keys outside
 *   a row's causal / window range masked out of the max and to an exact 0 after the exp, 1/sum
 *   kept for the end;
 * - the weighted sum of values as a second small GEMM (pv_tile_512) over the tile's key range,
 *   scaled by 1/sum on the store.
 * Any hs (tails by masks); the same result as the portable kernel up to float rounding. */
AVX512 static void attention_block_avx512(float *out, size_t ldo, const float *q, size_t ldq,
                                          const float *k, const float *v, size_t ldkv, int pos,
                                          int nq, int ng, int hs, int window, float *scratch) {
    const int kb = window && pos - window + 1 > 0 ? pos - window + 1 : 0; /* first key seen */
    const int nk = pos + nq - kb, NK32 = (nk + 31) & ~31, hs16 = (hs + 15) & ~15;
    const float scale = 1.0f / sqrtf((float)hs);
    float *kt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *S = kt + (size_t)hs * NK32, *vc = S + (size_t)ATT_R * NK32;
    k += (size_t)kb * ldkv;
    v += (size_t)kb * ldkv;
    if (hs % 8 == 0) {
        transpose_keys(kt, k, ldkv, nk, NK32, hs);
    } else {
        for (int d = 0; d < hs; d++) {
            float *o = kt + (size_t)d * NK32;
            for (int t = 0; t < nk; t++) o[t] = k[(size_t)t * ldkv + d];
            for (int t = nk; t < NK32; t++) o[t] = 0.0f;
        }
    }
    const __mmask16 cmask = (__mmask16)(0xffffu >> (hs16 - hs));
    for (int t = 0; t < nk; t++) /* the row and its zero tail in vector moves (memcpy and memset
                                  * calls of 128 bytes were 4% of the kernel at hs = 32) */
        for (int c = 0; c < hs16; c += 16)
            _mm512_store_ps(vc + (size_t)t * hs16 + c,
                            _mm512_maskz_loadu_ps(c + 16 < hs16 ? (__mmask16)0xffff : cmask,
                                                  v + (size_t)t * ldkv + c));
    const int M = nq * ng;
    for (int r0 = 0; r0 < M; r0 += ATT_R) {
        const int R = M - r0 < ATT_R ? M - r0 : ATT_R;
        int a[ATT_R], b[ATT_R]; /* row r sees packed keys a[r]..b[r] */
        float *o[ATT_R + ATT_PV];
        float inv[ATT_R + ATT_PV];
        const float *qr[ATT_R]; /* rows past R repeat row r0 (finite scores, never used) */
        for (int r = 0; r < ATT_R; r++) {
            const int rr = r0 + (r < R ? r : 0), i = rr / ng, g = rr % ng, p = pos + i;
            qr[r] = q + (size_t)i * ldq + (size_t)g * hs;
            a[r] = (window && p - window + 1 > 0 ? p - window + 1 : 0) - kb;
            b[r] = p - kb;
            o[r] = out + (size_t)i * ldo + (size_t)g * hs;
        }
        const int t0 = a[0] & ~31, t1 = b[R - 1] + 1; /* positions grow with the row */
        for (int t = t0; t < t1; t += 32) scores_tile_512(S, NK32, qr, kt, NK32, t, hs);
        const int te = (t1 + 15) & ~15;
        if (R == ATT_R) softmax_tile_512(S, NK32, a, b, t0, te, scale, inv);
        else for (int r = 0; r < R; r++) {
            float *sr = S + (size_t)r * NK32;
            __m512 mv = _mm512_set1_ps(-INFINITY);
            for (int t = a[r] & ~15; t <= b[r]; t += 16)
                mv = _mm512_mask_max_ps(mv, key_mask(t, a[r], b[r]), mv, _mm512_load_ps(sr + t));
            /* (s - max) x scale: exactly 0 at the max, so a row with one key gets weight 1
             * and out = v exactly, as from the one-query kernel (a fused s x scale - max x
             * scale leaves a rounding residue there) */
            const __m512 ms = _mm512_set1_ps(hmax512(mv)), sc = _mm512_set1_ps(scale);
            /* the exp over the row's own key blocks only; the tile's other blocks (t0..te)
             * get exact zeros, which the sum would have added as +0 (the same bits) */
            const int ea = a[r] & ~15, ee = (b[r] & ~15) + 16;
            for (int t = t0; t < ea; t += 16) _mm512_store_ps(sr + t, _mm512_setzero_ps());
            for (int t = ee; t < te; t += 16) _mm512_store_ps(sr + t, _mm512_setzero_ps());
            __m512 sv = _mm512_setzero_ps();
            for (int t = ea; t < ee; t += 16) {
                const __mmask16 m = key_mask(t, a[r], b[r]);
                const __m512 e =
                    _mm512_maskz_mov_ps(m, exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_load_ps(sr + t), ms), sc)));
                _mm512_store_ps(sr + t, e);
                sv = _mm512_add_ps(sv, e);
            }
            inv[r] = 1.0f / _mm512_reduce_add_ps(sv);
        }
        for (int j = 0; j < R; j += ATT_PV) {
            const int rows = R - j < ATT_PV ? R - j : ATT_PV;
            const float *Sj = S + (size_t)j * NK32; /* rows past R hold finite, unused scores */
            /* keys up to the group's last row only: past a row's own keys its weights are exact
             * zeros, which add nothing (the same bits as over the tile's range) */
            const int tj = b[j + rows - 1] + 1;
            for (int col = 0; col < hs16; col += 64) {
                const int nv = (hs16 - col) / 16 < 4 ? (hs16 - col) / 16 : 4;
                const __mmask16 m = col + 16 * nv == hs16 ? cmask : (__mmask16)0xffff;
                switch (nv) {
                case 4: pv_tile_512(4, o + j, Sj, NK32, vc, hs16, col, t0, tj, inv + j, rows, m); break;
                case 3: pv_tile_512(3, o + j, Sj, NK32, vc, hs16, col, t0, tj, inv + j, rows, m); break;
                case 2: pv_tile_512(2, o + j, Sj, NK32, vc, hs16, col, t0, tj, inv + j, rows, m); break;
                default: pv_tile_512(1, o + j, Sj, NK32, vc, hs16, col, t0, tj, inv + j, rows, m); break;
                }
            }
        }
    }
}
#endif

/* ------------------------------------------------------------------------------ dispatch */

/* Query by query and head by head through the level's one-query kernel (levels without a block
 * kernel, and the AVX2 level's cases its block kernel does not cover): query p sees keys
 * max(0, p - window + 1)..p. */
static void attention_block_by_query(const wb_kernel_table *kt, float *out, size_t ldo,
                                     const float *q, size_t ldq, const float *k, const float *v,
                                     size_t ldkv, int pos, int nq, int ng, int hs, int window,
                                     float *scratch) {
    for (int i = 0; i < nq; i++) {
        const int p = pos + i, k0 = window && p - window + 1 > 0 ? p - window + 1 : 0;
        for (int g = 0; g < ng; g++)
            kt->attention(out + (size_t)i * ldo + (size_t)g * hs, q + (size_t)i * ldq + (size_t)g * hs,
                          k + (size_t)k0 * ldkv, v + (size_t)k0 * ldkv, ldkv, p - k0, hs, scratch);
    }
}

#ifdef WB_X86
/* The AVX2 block kernel takes one head at a time with every key from 0 (hs % 8 == 0); the keys
 * are transposed and the values packed once for the ng heads that share them. */
AVX2 static void attention_block_avx2_heads(float *out, size_t ldo, const float *q, size_t ldq,
                                       const float *k, const float *v, size_t ldkv, int pos,
                                       int nq, int ng, int hs, int window, float *scratch) {
    if (hs % 8 || (window && pos + nq - 1 >= window)) {
        attention_block_by_query(wb_kt(), out, ldo, q, ldq, k, v, ldkv, pos, nq, ng, hs, window,
                                 scratch);
        return;
    }
    const int P = pos + nq, P16 = (P + 15) & ~15;
    /* kt [hs, P16], S [6, P16], vc [P, hs]: V rows packed, as rows ldkv floats apart (a power
     * of two in a model) all fall into a few L1 sets and evict each other */
    /* 64-byte aligned: the score loop's 16-key loads then never split a cache line (a
     * quarter faster); wb_attention_block_scratch has the 15 floats of slack */
    float *kt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *S = kt + (size_t)hs * P16, *vc = S + 6 * (size_t)P16;
    transpose_keys(kt, k, ldkv, P, P16, hs);
    for (int t = 0; t < P; t++) memcpy(vc + (size_t)t * hs, v + (size_t)t * ldkv, (size_t)hs * 4);
    for (int g = 0; g < ng; g++)
        attention_block_avx2(out + (size_t)g * hs, ldo, q + (size_t)g * hs, ldq, kt, vc, S, pos,
                             nq, hs);
}
#endif

void wb_kernels_attention_register(wb_kernel_table *t, wb_isa isa) {
    if (isa == WB_ISA_PORTABLE) {
        t->attention = attention_portable;
        t->attention_block = NULL;
        t->name_attention = "portable";
    }
#ifdef WB_X86
    if (isa == WB_ISA_AVX2) {
        t->attention = attention_avx2;
        t->attention_block = attention_block_avx2_heads;
        t->name_attention = "avx2 6-query blocks, keys packed once per KV head";
    }
    if (isa == WB_ISA_AVX512) {
        t->attention_block = attention_block_avx512;
        t->name_attention = "avx512 GQA tiles 12x32 (decode avx2)";
    }
#endif
}

/* -------------------------------------------------------------------------------- public */

void wb_attention_forward(float *out, const float *q, const float *k, const float *v,
                          size_t stride, int p, int hs, float *att) {
    wb_kt()->attention(out, q, k, v, stride, p, hs, att);
}

size_t wb_attention_block_scratch(int pos, int nq, int hs) {
    const size_t P = (size_t)pos + (size_t)nq, P16 = (P + 15) & ~(size_t)15, h = (size_t)hs;
    const size_t hs16 = (h + 15) & ~(size_t)15;
    /* AVX2: kt, S [6 rows], packed V, 16 floats to align them; AVX-512: kt and S [12 rows] of
     * P rounded to 32, packed V rows of hs16, qt [hs, 12], alignment; one query: att[P] */
    const size_t avx2 = (2 * h + 6) * P16 + 16, avx512 = (h + 12) * (P + 32) + P * hs16 + 12 * h + 16;
    const size_t blk = avx2 > avx512 ? avx2 : avx512;
    return blk > P ? blk : P;
}

void wb_attention_block_forward(float *out, size_t ldo, const float *q, size_t ldq, const float *k,
                                const float *v, size_t ldkv, int pos, int nq, int ng, int hs,
                                int window, float *scratch) {
    const wb_kernel_table *t = wb_kt();
    if (t->attention_block)
        t->attention_block(out, ldo, q, ldq, k, v, ldkv, pos, nq, ng, hs, window, scratch);
    else
        attention_block_by_query(t, out, ldo, q, ldq, k, v, ldkv, pos, nq, ng, hs, window, scratch);
}
