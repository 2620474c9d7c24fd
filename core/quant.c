/* quant.c - Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K / Q5_0 / IQ4_NL rows (layouts in quant.h): quantize, dequantize, and the
 * integer dot products of decode, portable, AVX2 and AVX-512 VNNI.
 *
 * The input row is quantized per block of 32 to int8 with its own float scale, and its block
 * sums are kept (Q4_0's values are nibble - 8: the -8 comes out as -8 * sum(x) once per block).
 * A weight block times an input block is then one int32 dot product and one float multiply-add.
 */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "wb_model.h"

#if defined(__x86_64__) || defined(__i386__)
#define WB_X86 1
#include <immintrin.h>
#endif

static const struct {
    const char *name;
    int values;
    size_t bytes;
} k_types[WB_QT_COUNT] = {
    {"q8_0", 32, 34}, {"q4_0", 32, 18}, {"q4_k", 256, 144}, {"q6_k", 256, 210}, {"q5_0", 32, 22},
    {"iq4_nl", 32, 18}, {"q5_k", 256, 176}, {"q4_1", 32, 20}, {"q5_1", 32, 24}};

/* IQ4_NL's levels (ggml's kvalues_iq4nl) */
static const int8_t k_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

const char *wb_qtype_name(wb_qtype t) { return (unsigned)t < WB_QT_COUNT ? k_types[t].name : "?"; }
int wb_qtype_block_values(wb_qtype t) { return (unsigned)t < WB_QT_COUNT ? k_types[t].values : 0; }
size_t wb_qtype_block_bytes(wb_qtype t) { return (unsigned)t < WB_QT_COUNT ? k_types[t].bytes : 0; }

size_t wb_quant_row_bytes(wb_qtype t, int64_t n) {
    if ((unsigned)t >= WB_QT_COUNT || n <= 0 || n % k_types[t].values) return 0;
    return (size_t)(n / k_types[t].values) * k_types[t].bytes;
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline float f16(const uint8_t *p) { return wb_f16_to_f32(rd16(p)); }
static inline uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* -------------------------------------------------------------------------- quantize */

/* roundf(q) (halves away from zero) clamped to +-127, without the libm calls that made load-time
 * quantization most of a quantized model's load: the integer part by truncation, then the
 * fraction, exact for |q| < 2^23, decides. A NaN gives 0 (what the conversion gave before). */
static inline int8_t round_q8(float q) {
    if (q >= 127.0f) return 127;
    if (q <= -127.0f) return -127;
    if (q != q) return 0;
    const int i = (int)q;
    const float f = q - (float)i;
    return (int8_t)(i + (f >= 0.5f) - (f <= -0.5f));
}

/* min(15, max(0, floorf(v))) for Q4_0's v = x / d + 8.5: truncation is the floor for v >= 0, and
 * a negative v clamps to 0 either way; NaN and v >= 2^31 give 0 (the conversion's value before). */
static inline int floor_q4(float v) {
    if (!(v >= 0.0f) || v >= 2147483648.0f) return 0;
    const int i = (int)v;
    return i > 15 ? 15 : i;
}

int wb_quantize_row(wb_qtype t, void *dst, const float *src, int n) {
    if (n <= 0 || n % 32 || (t != WB_QT_Q8_0 && t != WB_QT_Q4_0)) return -1;
    uint8_t *o = dst;
    for (int b = 0; b < n / 32; b++) {
        const float *x = src + (size_t)b * 32;
        if (t == WB_QT_Q8_0) { /* d = max|x| / 127: the largest maps to +-127 */
            /* fmaxf's result (a NaN is skipped, so the order does not matter) on 8 independent
             * chains: one chain of 32 dependent maxes was half of the load-time quantization */
            float m8[8] = {0};
            for (int i = 0; i < 32; i++) {
                const float v = fabsf(x[i]);
                m8[i % 8] = v > m8[i % 8] ? v : m8[i % 8];
            }
            float amax = 0.0f;
            for (int i = 0; i < 8; i++) amax = m8[i] > amax ? m8[i] : amax;
            const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
            wr16(o, wb_f32_to_f16(d));
            for (int i = 0; i < 32; i++) /* half away from zero, as GGUF writers round */
                o[2 + i] = (uint8_t)round_q8(x[i] * id);
            o += 34;
        } else { /* the value of largest magnitude maps to -8, so the other side reaches +7 */
            float amax = 0.0f, mx = 0.0f;
            for (int i = 0; i < 32; i++)
                if (fabsf(x[i]) > amax) amax = fabsf(x[i]), mx = x[i];
            const float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            wr16(o, wb_f32_to_f16(d));
            for (int i = 0; i < 16; i++) {
                const int lo = floor_q4(x[i] * id + 8.5f), hi = floor_q4(x[i + 16] * id + 8.5f);
                o[2 + i] = (uint8_t)(lo | (hi << 4));
            }
            o += 18;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ dequantize */

static void deq_q8_0(float *y, const uint8_t *p) {
    const float d = f16(p);
    for (int i = 0; i < 32; i++) y[i] = d * (float)(int8_t)p[2 + i];
}

static void deq_q4_0(float *y, const uint8_t *p) {
    const float d = f16(p);
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)((p[2 + i] & 15) - 8);
        y[i + 16] = d * (float)((p[2 + i] >> 4) - 8);
    }
}

/* value j (0..31) of a Q5_0 block, 0..31 (the stored q; the value is q - 16) */
static inline int q5_value(const uint8_t *p, int j) {
    const int nib = j < 16 ? p[6 + j] & 15 : p[6 + j - 16] >> 4;
    return nib | (int)((rd32(p + 2) >> j) & 1u) << 4;
}

/* + 0.0f: quant_fallback.c's decode (Q5_1's offset, 0 here) turns d * 0 = -0 into +0, and the
 * two decodes agree bit for bit (tests/c/test_quant.c) */
static void deq_q5_0(float *y, const uint8_t *p) {
    const float d = f16(p);
    for (int j = 0; j < 32; j++) y[j] = d * (float)(q5_value(p, j) - 16) + 0.0f;
}

/* Q4_1 / Q5_1: d * q + m (q the nibble, or Q5_0's five bits two bytes further on) */
static void deq_q4_1(float *y, const uint8_t *p) {
    const float d = f16(p), m = f16(p + 2);
    for (int j = 0; j < 16; j++) y[j] = d * (float)(p[4 + j] & 15) + m, y[j + 16] = d * (float)(p[4 + j] >> 4) + m;
}
static void deq_q5_1(float *y, const uint8_t *p) {
    const float d = f16(p), m = f16(p + 2);
    for (int j = 0; j < 32; j++) y[j] = d * (float)q5_value(p + 2, j) + m;
}

static void deq_iq4_nl(float *y, const uint8_t *p) {
    const float d = f16(p);
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)k_iq4_levels[p[2 + i] & 15];
        y[i + 16] = d * (float)k_iq4_levels[p[2 + i] >> 4];
    }
}

static void q4k_scale_min(int j, const uint8_t *s, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void deq_q4_k(float *y, const uint8_t *p) {
    const float d = f16(p), dmin = f16(p + 2);
    const uint8_t *s = p + 4, *qs = p + 16;
    for (int c = 0; c < 4; c++) { /* groups 2c (low nibbles) and 2c + 1 (high) */
        int sc0, m0, sc1, m1;
        q4k_scale_min(2 * c, s, &sc0, &m0);
        q4k_scale_min(2 * c + 1, s, &sc1, &m1);
        const float a0 = d * (float)sc0, b0 = dmin * (float)m0;
        const float a1 = d * (float)sc1, b1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = a0 * (float)(qs[32 * c + l] & 15) - b0;
            y[64 * c + 32 + l] = a1 * (float)(qs[32 * c + l] >> 4) - b1;
        }
    }
}

/* q of value l (< 32) of group g of a Q5_K super-block: Q4_K's nibble and bit g of qh[l] */
static inline int q5k_value(const uint8_t *blk, int g, int l) {
    return ((blk[48 + 32 * (g / 2) + l] >> (4 * (g & 1))) & 15) | (((blk[16 + l] >> g) & 1) << 4);
}

static void deq_q5_k(float *y, const uint8_t *p) {
    const float d = f16(p), dmin = f16(p + 2);
    for (int g = 0; g < 8; g++) {
        int sc, m;
        q4k_scale_min(g, p + 4, &sc, &m);
        const float a = d * (float)sc, b = dmin * (float)m;
        for (int l = 0; l < 32; l++) y[32 * g + l] = a * (float)q5k_value(p, g, l) - b;
    }
}

static void deq_q6_k(float *y, const uint8_t *p) {
    const uint8_t *ql = p, *qh = p + 128;
    const int8_t *sc = (const int8_t *)(p + 192);
    const float d = f16(p + 208);
    for (int h = 0; h < 2; h++) {
        const uint8_t *L = ql + 64 * h, *H = qh + 32 * h;
        float *o = y + 128 * h;
        const int8_t *S = sc + 8 * h;
        for (int l = 0; l < 32; l++) {
            const int q0 = ((L[l] & 15) | ((H[l] & 3) << 4)) - 32;
            const int q1 = ((L[l + 32] & 15) | (((H[l] >> 2) & 3) << 4)) - 32;
            const int q2 = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
            const int q3 = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
            o[l] = d * (float)S[l / 16] * (float)q0;
            o[l + 32] = d * (float)S[2 + l / 16] * (float)q1;
            o[l + 64] = d * (float)S[4 + l / 16] * (float)q2;
            o[l + 96] = d * (float)S[6 + l / 16] * (float)q3;
        }
    }
}

void wb_dequantize_range(wb_qtype t, float *dst, const void *row, int k0, int kn) {
    if ((unsigned)t >= WB_QT_COUNT) return;
    const int v = k_types[t].values;
    const uint8_t *p = (const uint8_t *)row + (size_t)(k0 / v) * k_types[t].bytes;
    for (int b = 0; b < kn / v; b++, p += k_types[t].bytes, dst += v) switch (t) {
        case WB_QT_Q8_0: deq_q8_0(dst, p); break;
        case WB_QT_Q4_0: deq_q4_0(dst, p); break;
        case WB_QT_Q4_K: deq_q4_k(dst, p); break;
        case WB_QT_Q6_K: deq_q6_k(dst, p); break;
        case WB_QT_Q5_0: deq_q5_0(dst, p); break;
        case WB_QT_IQ4_NL: deq_iq4_nl(dst, p); break;
        case WB_QT_Q5_K: deq_q5_k(dst, p); break;
        case WB_QT_Q4_1: deq_q4_1(dst, p); break;
        case WB_QT_Q5_1: deq_q5_1(dst, p); break;
        default: break;
        }
}

void wb_dequantize_row(wb_qtype t, float *dst, const void *src, int n) {
    wb_dequantize_range(t, dst, src, 0, n);
}

/* ------------------------------------------------------------------- input quantization */

/* An input row of n values (n a multiple of 32) quantized for the integer dots, one block of
 * wb_quant_act_bytes(n) bytes, arrays back to back:
 *   int8  q[n]        round(x / d_b), |q| <= 127
 *   float d[n / 32]   d_b = max |x| / 127 over block b
 *   int32 s[n / 32]   sum of q over block b (Q8_0's +128, Q4_0's -8 and Q5_0's -16 offsets,
 *                     Q4_K's mins)
 *   int16 h[n / 16]   sum of q over each 16 (Q6_K's -32 offset, scales per 16) */
typedef struct qact {
    const int8_t *q;
    const float *d;
    const int32_t *s;
    const int16_t *h;
} qact;

/* a row's canonical dot with one input (no bias) */
typedef float (*qdot_fn)(const uint8_t *w, const qact *a, int nblk);

/* The products' scratch (slot 0 the quantized inputs, slot 1 the tile kernels' regrouped ones):
 * 64-byte aligned, kept by the calling thread between calls (wb_kernel_buf, freed when the
 * thread ends). Allocated per call, buffers above malloc's mmap threshold were mapped and
 * faulted in again on every product: about 2,500 page faults per 44-token Q8_0 prefill of the
 * Qwen2.5-0.5B-shaped model. NULL when out of memory (the callers have a way without). */
static void *qscratch(int slot, size_t bytes) { return wb_kernel_buf(slot, (bytes + 3) / 4); }

static size_t act_bytes(int n) { return ((size_t)n + (size_t)(n / 32) * 12 + 63) & ~(size_t)63; }
size_t wb_quant_act_bytes(int n) { return n > 0 && n % 32 == 0 ? act_bytes(n) : 0; }

/* The same arrays, for the quantizers to fill. */
typedef struct qact_out {
    int8_t *q;
    float *d;
    int32_t *s;
    int16_t *h;
} qact_out;
static qact_out act_slots(void *buf, int n) {
    uint8_t *p = buf;
    const size_t nb = (size_t)(n / 32);
    return (qact_out){(int8_t *)p, (float *)(p + n), (int32_t *)(p + n + 4 * nb),
                      (int16_t *)(p + n + 8 * nb)};
}

static qact act_view(const void *buf, int n) {
    const qact_out o = act_slots((void *)buf, n); /* read only from here on */
    return (qact){o.q, o.d, o.s, o.h};
}

/* q = round-half-even(x * (1 / d)) in every level (the vector code does the same operations),
 * so the quantized input is the same bytes whatever the level. */
static void quantize_act_c(void *dst, const float *x, int n) {
    const qact_out a = act_slots(dst, n);
    const size_t nb = (size_t)(n / 32);
    int8_t *q = a.q;
    float *d = a.d;
    int32_t *s = a.s;
    int16_t *h = a.h;
    for (size_t b = 0; b < nb; b++, x += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
        /* a block below 1e-30 is zeros (1 / d would overflow) */
        const float db = amax >= 1e-30f ? amax / 127.0f : 0.0f, id = db > 0.0f ? 1.0f / db : 0.0f;
        int s0 = 0, s1 = 0;
        for (int i = 0; i < 32; i++) {
            /* clamped as floats first: a NaN becomes -127, as vmaxps makes it */
            const int v = (int)fminf(fmaxf(nearbyintf(x[i] * id), -127.0f), 127.0f);
            q[32 * b + i] = (int8_t)v;
            if (i < 16) s0 += v;
            else s1 += v;
        }
        d[b] = db;
        s[b] = s0 + s1;
        h[2 * b] = (int16_t)s0;
        h[2 * b + 1] = (int16_t)s1;
    }
}

#ifdef WB_X86
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define VNNI512                                                                                   \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

/* Lane i of the result = the max (float) / the sum (int32) of the 16 lanes of v[i], for 16
 * vectors at once: four levels of two-source shuffles, each halving the vectors and the lanes
 * per block, 45 shuffles and ops for 16 blocks where one reduction per block costs 8; the
 * last permute puts block B, which the tree leaves at lane 4 (B % 4) + B / 4, at lane B. */
#define REDUCE16(NAME, T, OP, SH4, SHIN, UNLO, UNHI, SHPS, PERM)                                  \
    VNNI512 static inline T NAME(T *v) {                                                          \
        for (int p = 0; p < 8; p++) v[p] = OP(SH4(v[2 * p], v[2 * p + 1], 0x44), SH4(v[2 * p], v[2 * p + 1], 0xee)); \
        for (int p = 0; p < 4; p++) v[p] = OP(SH4(v[2 * p], v[2 * p + 1], 0x88), SH4(v[2 * p], v[2 * p + 1], 0xdd)); \
        for (int p = 0; p < 2; p++) v[p] = OP(UNLO(v[2 * p], v[2 * p + 1]), UNHI(v[2 * p], v[2 * p + 1]));            \
        const T r = OP(SHPS(v[0], v[1], 0x88), SHPS(v[0], v[1], 0xdd));                          \
        return PERM(r);                                                                           \
    }
VNNI512 static inline __m512i tree_lane_order(void) {
    _Alignas(64) int32_t o[16];
    for (int b = 0; b < 16; b++) o[b] = 4 * (b & 3) + (b >> 2);
    return _mm512_load_si512(o);
}
#define F_UNLO(a, b) _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define F_UNHI(a, b) _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)))
#define F_PERM(r) _mm512_permutexvar_ps(tree_lane_order(), r)
#define I_SHPS(a, b, imm) _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), imm))
#define I_PERM(r) _mm512_permutexvar_epi32(tree_lane_order(), r)
REDUCE16(max16_ps, __m512, _mm512_max_ps, _mm512_shuffle_f32x4, _, F_UNLO, F_UNHI, _mm512_shuffle_ps, F_PERM)
REDUCE16(sum16_epi32, __m512i, _mm512_add_epi32, _mm512_shuffle_i32x4, _, _mm512_unpacklo_epi64, _mm512_unpackhi_epi64, I_SHPS, I_PERM)

/* Sixteen blocks (512 values) of quantize_act_512 with the reductions vectorised; the same
 * operations per value, so the same bytes (a NaN counts as 0 in the max, as fmaxf skips it). */
VNNI512 static void quantize16_512(const float *x, int8_t *q, float *d, int32_t *s, int16_t *h) {
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f), zero = _mm512_setzero_ps();
    __m512 m[16];
    for (int i = 0; i < 16; i++) {
        const __m512 a0 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * i)), zero);
        const __m512 a1 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 32 * i + 16)), zero);
        m[i] = _mm512_max_ps(a0, a1);
    }
    const __m512 amax = max16_ps(m);
    const __mmask16 big = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(1e-30f), _CMP_GE_OQ);
    const __m512 db = _mm512_maskz_div_ps(big, amax, lim);
    const __mmask16 pos = _mm512_cmp_ps_mask(db, zero, _CMP_GT_OQ);
    const __m512 idv = _mm512_maskz_div_ps(pos, _mm512_set1_ps(1.0f), db);
    _mm512_storeu_ps(d, db);
    _Alignas(64) float id[16];
    _mm512_store_ps(id, idv);
    __m512i lo[16], hi[16];
    for (int i = 0; i < 16; i++) {
        const __m512 vid = _mm512_set1_ps(id[i]);
        __m512 y0 = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * i), vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 y1 = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * i + 16), vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y0 = _mm512_min_ps(_mm512_max_ps(y0, nlim), lim);
        y1 = _mm512_min_ps(_mm512_max_ps(y1, nlim), lim);
        lo[i] = _mm512_cvtps_epi32(y0), hi[i] = _mm512_cvtps_epi32(y1);
        _mm_storeu_si128((__m128i *)(q + 32 * i), _mm512_cvtepi32_epi8(lo[i]));
        _mm_storeu_si128((__m128i *)(q + 32 * i + 16), _mm512_cvtepi32_epi8(hi[i]));
    }
    const __m512i s0 = sum16_epi32(lo), s1 = sum16_epi32(hi);
    _mm512_storeu_si512(s, _mm512_add_epi32(s0, s1));
    /* h[2b] = s0[b], h[2b + 1] = s1[b] */
    const __m256i h0 = _mm512_cvtepi32_epi16(s0), h1 = _mm512_cvtepi32_epi16(s1);
    _mm256_storeu_si256((__m256i *)h, _mm256_permute2x128_si256(_mm256_unpacklo_epi16(h0, h1), _mm256_unpackhi_epi16(h0, h1), 0x20));
    _mm256_storeu_si256((__m256i *)(h + 16), _mm256_permute2x128_si256(_mm256_unpacklo_epi16(h0, h1), _mm256_unpackhi_epi16(h0, h1), 0x31));
}


/* The per-block form of quantize_act_512 on 8 lanes, for the AVX2 level (whose decode spent
 * about a tenth of a Q4_0 step in the scalar loop): the same operations per value in the same
 * order (max with 0 after the absolute value, so a NaN counts as 0; clamp before the convert, so
 * a NaN becomes -127), so the same bytes. */
AVX2 static void quantize_act_avx2(void *dst, const float *x, int n) {
    const qact_out a = act_slots(dst, n);
    const size_t nb = (size_t)(n / 32);
    const __m256 lim = _mm256_set1_ps(127.0f), nlim = _mm256_set1_ps(-127.0f),
                 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (size_t b = 0; b < nb; b++, x += 32) {
        __m256 v[4], m = zero;
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), zero));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float amax = _mm_cvtss_f32(m4);
        const float db = amax >= 1e-30f ? amax / 127.0f : 0.0f, id = db > 0.0f ? 1.0f / db : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i iv[4];
        for (int k = 0; k < 4; k++) {
            __m256 y = _mm256_round_ps(_mm256_mul_ps(v[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            y = _mm256_min_ps(_mm256_max_ps(y, nlim), lim);
            iv[k] = _mm256_cvtps_epi32(y);
        }
        /* packs work per 128-bit lane: the bytes come out as lanes 0 2 4 6 1 3 5 7 of 32-bit
         * groups, put back in order by one dword permute */
        const __m256i w01 = _mm256_packs_epi32(iv[0], iv[1]), w23 = _mm256_packs_epi32(iv[2], iv[3]);
        const __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23),
                                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(a.q + 32 * b), b8);
        const __m256i lo = _mm256_add_epi32(iv[0], iv[1]), hi = _mm256_add_epi32(iv[2], iv[3]);
        __m128i l4 = _mm_add_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
        __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
        l4 = _mm_hadd_epi32(l4, h4); /* l0+l1, l2+l3, h0+h1, h2+h3 */
        l4 = _mm_hadd_epi32(l4, l4); /* s0, s1, s0, s1 */
        const int s0 = _mm_cvtsi128_si32(l4), s1 = _mm_extract_epi32(l4, 1);
        a.d[b] = db;
        a.s[b] = s0 + s1;
        a.h[2 * b] = (int16_t)s0;
        a.h[2 * b + 1] = (int16_t)s1;
    }
}

VNNI512 static void quantize_act_512(void *dst, const float *x, int n) {
    const qact_out a = act_slots(dst, n);
    const size_t nb = (size_t)(n / 32);
    int8_t *q = a.q;
    float *d = a.d;
    int32_t *s = a.s;
    int16_t *h = a.h;
    size_t b = 0;
    for (; b + 16 <= nb; b += 16, x += 512) quantize16_512(x, q + 32 * b, d + b, s + b, h + 2 * b);
    const __m512 lim = _mm512_set1_ps(127.0f), nlim = _mm512_set1_ps(-127.0f), zero = _mm512_setzero_ps();
    for (; b < nb; b++, x += 32) {
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), zero), _mm512_max_ps(_mm512_abs_ps(x1), zero)));
        const float db = amax >= 1e-30f ? amax / 127.0f : 0.0f, id = db > 0.0f ? 1.0f / db : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        __m512 y0 = _mm512_roundscale_ps(_mm512_mul_ps(x0, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 y1 = _mm512_roundscale_ps(_mm512_mul_ps(x1, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y0 = _mm512_min_ps(_mm512_max_ps(y0, nlim), lim);
        y1 = _mm512_min_ps(_mm512_max_ps(y1, nlim), lim);
        const __m512i i0 = _mm512_cvtps_epi32(y0), i1 = _mm512_cvtps_epi32(y1);
        _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtepi32_epi8(i1));
        const int s0 = _mm512_reduce_add_epi32(i0), s1 = _mm512_reduce_add_epi32(i1);
        d[b] = db;
        s[b] = s0 + s1;
        h[2 * b] = (int16_t)s0;
        h[2 * b + 1] = (int16_t)s1;
    }
}
#endif

void wb_quantize_act(void *dst, const float *x, int n) {
    const size_t used = (size_t)n + (size_t)(n / 32) * 12;
    memset((uint8_t *)dst + used, 0, act_bytes(n) - used); /* the padding too: same bytes always */
#ifdef WB_X86
    if (wb_isa_current() == WB_ISA_AVX512) {
        quantize_act_512(dst, x, n);
        return;
    }
    if (wb_isa_current() == WB_ISA_AVX2) {
        quantize_act_avx2(dst, x, n);
        return;
    }
#endif
    quantize_act_c(dst, x, n);
}

/* ------------------------------------------------------------- the canonical dot products
 *
 * Every level computes, for a weight row and an input, exactly the same integer sum per block of
 * 32 values (isum below; integer sums do not depend on their order) and then one float chain in
 * block order, acc = acc + isum * (d_w * d_x), with the terms listed per type:
 *   Q8_0  isum = sum w q                                   scale d
 *   Q4_0  isum = sum nibble q - 8 s                        scale d
 *   Q5_0  isum = sum q5 q - 16 s                           scale d
 *   IQ4_NL isum = sum K[nibble] q                          scale d   (Q8_0's, with w = K[nibble])
 *   Q4_K  isum = sum nibble q, scale d sc; then  -s with scale dmin m   (group b of 8)
 *   Q5_K  the same with q5 (nibble + 16 x its qh bit) for the nibble
 *   Q4_1  isum = sum nibble q, scale d; and a second chain acc2 = acc2 + m (s d_x), added at
 *   Q5_1  the end: (acc + 0) + acc2 (Q5_1: q5 for the nibble). The value chain is then exactly
 *         Q8_0's on the block (d, q) and the min chain one multiply-add per block with s d_x a
 *         number per input, so prompts run the Q8_0 kernels on rows widened per call and add
 *         the min chains after (widened_gemm)
 *   Q6_K  per 16: isum = sum q6 q - 32 h, scale d sc16 (two terms per block)
 * The AVX2 and AVX-512 levels fuse each step into one FMA (so their outputs are bit-identical),
 * the portable one rounds the product first. An output is then acc + bias, added to Y when
 * accumulating. Every input of a batch is computed the same way alone, so a batched row equals
 * its row alone bit for bit at every batch size (tests/c/test_quant.c). */

#define PORTABLE_MAC(acc, a, s) ((acc) + (a) * (s))

static inline void q4k_block_scales(const uint8_t *blk, int g, float *dsc, float *dmn) {
    int sc, m;
    q4k_scale_min(g, blk + 4, &sc, &m);
    *dsc = f16(blk) * (float)sc;
    *dmn = f16(blk + 2) * (float)m;
}

static float dot_q8_0_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f;
    for (int b = 0; b < nblk; b++, w += 34) {
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += (int8_t)w[2 + i] * a->q[32 * b + i];
        acc = PORTABLE_MAC(acc, (float)s, f16(w) * a->d[b]);
    }
    return acc;
}

static float dot_q4_0_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f;
    for (int b = 0; b < nblk; b++, w += 18) {
        const int8_t *q = a->q + 32 * b;
        int32_t s = 0;
        for (int i = 0; i < 16; i++) s += (w[2 + i] & 15) * q[i] + (w[2 + i] >> 4) * q[i + 16];
        acc = PORTABLE_MAC(acc, (float)(s - 8 * a->s[b]), f16(w) * a->d[b]);
    }
    return acc;
}

/* Q4_K and Q5_K (five: the fifth bit of each value from qh) */
static inline float dot_k45_c(int five, const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f;
    for (int b = 0; b < nblk; b++) {
        const uint8_t *blk = w + (size_t)(b / 8) * (five ? 176 : 144);
        const uint8_t *qs = blk + 16 + 32 * ((b % 8) / 2);
        const int sh = (b & 1) * 4;
        const int8_t *q = a->q + 32 * b;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += (five ? q5k_value(blk, b % 8, i) : ((qs[i] >> sh) & 15)) * q[i];
        float dsc, dmn;
        q4k_block_scales(blk, b % 8, &dsc, &dmn);
        acc = PORTABLE_MAC(acc, (float)s, dsc * a->d[b]);
        acc = PORTABLE_MAC(acc, (float)(-a->s[b]), dmn * a->d[b]);
    }
    return acc;
}
static float dot_q4_k_c(const uint8_t *w, const qact *a, int nblk) { return dot_k45_c(0, w, a, nblk); }
static float dot_q5_k_c(const uint8_t *w, const qact *a, int nblk) { return dot_k45_c(1, w, a, nblk); }

static float dot_q4_1_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f, acc2 = 0.0f;
    for (int b = 0; b < nblk; b++, w += 20) {
        const int8_t *q = a->q + 32 * b;
        int32_t s = 0;
        for (int i = 0; i < 16; i++) s += (w[4 + i] & 15) * q[i] + (w[4 + i] >> 4) * q[i + 16];
        acc = PORTABLE_MAC(acc, (float)s, f16(w) * a->d[b]);
        acc2 = PORTABLE_MAC(acc2, f16(w + 2), (float)a->s[b] * a->d[b]);
    }
    return (acc + 0.0f) + acc2;
}

static float dot_q5_1_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f, acc2 = 0.0f;
    for (int b = 0; b < nblk; b++, w += 24) {
        const int8_t *q = a->q + 32 * b;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += q5_value(w + 2, i) * q[i];
        acc = PORTABLE_MAC(acc, (float)s, f16(w) * a->d[b]);
        acc2 = PORTABLE_MAC(acc2, f16(w + 2), (float)a->s[b] * a->d[b]);
    }
    return (acc + 0.0f) + acc2;
}

static float dot_iq4_nl_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f;
    for (int b = 0; b < nblk; b++, w += 18) {
        const int8_t *q = a->q + 32 * b;
        int32_t s = 0;
        for (int i = 0; i < 16; i++)
            s += k_iq4_levels[w[2 + i] & 15] * q[i] + k_iq4_levels[w[2 + i] >> 4] * q[i + 16];
        acc = PORTABLE_MAC(acc, (float)s, f16(w) * a->d[b]);
    }
    return acc;
}

static float dot_q5_0_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f;
    for (int b = 0; b < nblk; b++, w += 22) {
        const int8_t *q = a->q + 32 * b;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += q5_value(w, i) * q[i];
        acc = PORTABLE_MAC(acc, (float)(s - 16 * a->s[b]), f16(w) * a->d[b]);
    }
    return acc;
}

/* value l of 32-block bb (0..7) of a Q6_K super-block: half h = bb / 4, part = bb % 4 */
static inline int q6_value(const uint8_t *blk, int bb, int l) {
    const int h = bb / 4, part = bb % 4;
    const uint8_t lo = blk[64 * h + 32 * (part & 1) + l], hi = blk[128 + 32 * h + l];
    return ((part >= 2 ? lo >> 4 : lo & 15) | (((hi >> (2 * part)) & 3) << 4));
}

static float dot_q6_k_c(const uint8_t *w, const qact *a, int nblk) {
    float acc = 0.0f;
    for (int b = 0; b < nblk; b++) {
        const uint8_t *blk = w + (size_t)(b / 8) * 210;
        const int bb = b % 8;
        const int8_t *q = a->q + 32 * b;
        const float d = f16(blk + 208);
        for (int g = 0; g < 2; g++) {
            int32_t s = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) s += q6_value(blk, bb, i) * q[i];
            const float ds = d * (float)(int8_t)blk[192 + 2 * bb + g];
            acc = PORTABLE_MAC(acc, (float)(s - 32 * a->h[2 * b + g]), ds * a->d[b]);
        }
    }
    return acc;
}

/* ----------------------------------------------------------------------- dots, AVX2 */

#ifdef WB_X86
AVX2 static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
AVX2 static inline int32_t hsum_i32x4(__m128i s) {
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
AVX2 static inline float h2f(const uint8_t *p) { return _cvtsh_ss(rd16(p)); }

/* q4k_block_scales with the F16C conversion */
AVX2 static inline void q4k_block_scales_h(const uint8_t *blk, int g, float *dsc, float *dmn) {
    int sc, m;
    q4k_scale_min(g, blk + 4, &sc, &m);
    *dsc = h2f(blk) * (float)sc;
    *dmn = h2f(blk + 2) * (float)m;
}

/* 32 nibbles of a Q4_0 block as bytes 0..15 in value order */
AVX2 static inline __m256i nibbles(const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}
/* the 32 five-bit q of a Q5_0 block (at p) in value order: the nibbles, and each bit of qh
 * spread to its byte (byte i takes byte i / 8 of qh, tests bit i % 8) as 16 */
AVX2 static inline __m256i q5_values(const uint8_t *p) {
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)rd32(p + 2)), sel);
    const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(16));
    return _mm256_or_si256(nibbles(p + 6), hi);
}
/* the 32 int8 levels of an IQ4_NL block (at p) in value order: its nibbles looked up in K */
AVX2 static inline __m256i iq4_values(const uint8_t *p) {
    const __m256i k = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k_iq4_levels));
    return _mm256_shuffle_epi8(k, nibbles(p + 2));
}
AVX2 static inline __m256i q4k_nibbles(const uint8_t *qs, int sh) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_and_si256(sh ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(15));
}
/* the 32 q5 of group bb (0..7) of a Q5_K super-block: Q4_K's nibbles (qs at 48) or bit bb of
 * each qh byte moved to bit 4 (one 16-bit shift keeps every byte's bit inside its byte) */
AVX2 static inline __m256i q5k_values(const uint8_t *blk, int bb) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 16));
    const __m256i hb = bb <= 4 ? _mm256_slli_epi16(h, 4 - bb) : _mm256_srli_epi16(h, bb - 4);
    return _mm256_or_si256(q4k_nibbles(blk + 48 + 32 * (bb / 2), bb & 1), _mm256_and_si256(hb, _mm256_set1_epi8(16)));
}
AVX2 static inline __m256i q6_values(const uint8_t *blk, int bb) {
    const int h = bb / 4, part = bb % 4;
    __m256i lo = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32 * (part & 1)));
    __m256i hi = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
    if (part >= 2) lo = _mm256_srli_epi16(lo, 4);
    lo = _mm256_and_si256(lo, _mm256_set1_epi8(15));
    hi = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * part), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}
/* the values of group bb of a K super-block as unsigned bytes: Q4_K's nibbles, Q5_K's q5,
 * Q6_K's q6 (t a constant where it is inlined) */
AVX2 static inline __attribute__((always_inline)) __m256i k_values(const wb_qtype t, const uint8_t *blk, int bb) {
    if (t == WB_QT_Q4_K) return q4k_nibbles(blk + 16 + 32 * (bb / 2), bb & 1);
    if (t == WB_QT_Q5_K) return q5k_values(blk, bb);
    return q6_values(blk, bb);
}
/* bytes of a K super-block */
#define KBYTES(t) ((t) == WB_QT_Q4_K ? 144 : (t) == WB_QT_Q5_K ? 176 : 210)
/* u8 x s8 -> 8 int32 lanes of 4-sums, without int16 saturation: every pair here sums to at most
 * 2 * 63 * 127 (or |w| <= 128 times 127 for Q8_0's sign trick) */
AVX2 static inline __m256i mul_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
AVX2 static inline __m256i mul_s8s8(__m256i w, __m256i x) { /* |w| and x with w's sign */
    return mul_u8s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}
AVXVNNI static inline __m256i vnni_u8s8(__m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
}

/* Q4_1 / Q5_1 blocks (at w) as unsigned bytes in value order */
AVX2 static inline __m256i q4_1_values(const uint8_t *w) { return nibbles(w + 4); }
AVX2 static inline __m256i q5_1_values(const uint8_t *w) { return q5_values(w + 2); }
/* Q4_K / Q5_K's dot (T): a block's values times the input, then its scale's and its min's FMA */
#define DOT_K45_256(NAME, ATTR, MULU, T)                                                          \
    ATTR static float NAME(const uint8_t *w, const qact *a, int nblk) {                           \
        float acc = 0.0f;                                                                         \
        for (int b = 0; b < nblk; b++) {                                                          \
            const uint8_t *blk = w + (size_t)(b / 8) * KBYTES(T);                                 \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const int32_t s = hsum_i32(MULU(k_values(T, blk, b % 8), xv));                        \
            float dsc, dmn;                                                                       \
            q4k_block_scales_h(blk, b % 8, &dsc, &dmn);                                           \
            acc = fmaf((float)s, dsc * a->d[b], acc);                                             \
            acc = fmaf((float)(-a->s[b]), dmn * a->d[b], acc);                                    \
        }                                                                                         \
        return acc;                                                                               \
    }
/* Q4_1 / Q5_1's dot (BS bytes a block): the value chain and the min chain, added at the end */
#define DOT_MIN_256(NAME, ATTR, MULU, BS, VALUES)                                                 \
    ATTR static float NAME(const uint8_t *w, const qact *a, int nblk) {                           \
        float acc = 0.0f, acc2 = 0.0f;                                                            \
        for (int b = 0; b < nblk; b++, w += BS) {                                                 \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const int32_t s = hsum_i32(MULU(VALUES(w), xv));                                      \
            acc = fmaf((float)s, h2f(w) * a->d[b], acc);                                          \
            acc2 = fmaf(h2f(w + 2), (float)a->s[b] * a->d[b], acc2);                              \
        }                                                                                         \
        return (acc + 0.0f) + acc2;                                                               \
    }

/* One body per type for the two AVX2 variants: MUL is maddubs+madd or AVX-VNNI's vpdpbusd. */
#define DEFINE_DOTS_256(SUFFIX, ATTR, MULU)                                                       \
    ATTR static float dot_q8_0_##SUFFIX(const uint8_t *w, const qact *a, int nblk) {              \
        float acc = 0.0f;                                                                         \
        for (int b = 0; b < nblk; b++, w += 34) {                                                 \
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(w + 2));                      \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const int32_t s = Q8_ISUM_##SUFFIX(wv, xv, a->s[b]);                                 \
            acc = fmaf((float)s, h2f(w) * a->d[b], acc);                                          \
        }                                                                                         \
        return acc;                                                                               \
    }                                                                                             \
    ATTR static float dot_q4_0_##SUFFIX(const uint8_t *w, const qact *a, int nblk) {              \
        float acc = 0.0f;                                                                         \
        for (int b = 0; b < nblk; b++, w += 18) {                                                 \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const int32_t s = hsum_i32(MULU(nibbles(w + 2), xv)) - 8 * a->s[b];                   \
            acc = fmaf((float)s, h2f(w) * a->d[b], acc);                                          \
        }                                                                                         \
        return acc;                                                                               \
    }                                                                                             \
    ATTR static float dot_iq4_nl_##SUFFIX(const uint8_t *w, const qact *a, int nblk) {            \
        float acc = 0.0f;                                                                         \
        for (int b = 0; b < nblk; b++, w += 18) {                                                 \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const int32_t s = Q8_ISUM_##SUFFIX(iq4_values(w), xv, a->s[b]);                      \
            acc = fmaf((float)s, h2f(w) * a->d[b], acc);                                          \
        }                                                                                         \
        return acc;                                                                               \
    }                                                                                             \
    ATTR static float dot_q5_0_##SUFFIX(const uint8_t *w, const qact *a, int nblk) {              \
        float acc = 0.0f;                                                                         \
        for (int b = 0; b < nblk; b++, w += 22) {                                                 \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const int32_t s = hsum_i32(MULU(q5_values(w), xv)) - 16 * a->s[b];                    \
            acc = fmaf((float)s, h2f(w) * a->d[b], acc);                                          \
        }                                                                                         \
        return acc;                                                                               \
    }                                                                                             \
    DOT_K45_256(dot_q4_k_##SUFFIX, ATTR, MULU, WB_QT_Q4_K)                                      \
    DOT_MIN_256(dot_q4_1_##SUFFIX, ATTR, MULU, 20, q4_1_values)                                   \
    DOT_MIN_256(dot_q5_1_##SUFFIX, ATTR, MULU, 24, q5_1_values)                                   \
    DOT_K45_256(dot_q5_k_##SUFFIX, ATTR, MULU, WB_QT_Q5_K)                                      \
    ATTR static float dot_q6_k_##SUFFIX(const uint8_t *w, const qact *a, int nblk) {              \
        float acc = 0.0f;                                                                         \
        for (int b = 0; b < nblk; b++) {                                                          \
            const uint8_t *blk = w + (size_t)(b / 8) * 210;                                       \
            const int bb = b % 8;                                                                 \
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(a->q + 32 * b));              \
            const __m256i p = MULU(q6_values(blk, bb), xv); /* lanes 0-3: values 0-15 */          \
            const int32_t s0 = hsum_i32x4(_mm256_castsi256_si128(p)) - 32 * a->h[2 * b];          \
            const int32_t s1 = hsum_i32x4(_mm256_extracti128_si256(p, 1)) - 32 * a->h[2 * b + 1]; \
            const float d = h2f(blk + 208);                                                       \
            acc = fmaf((float)s0, (d * (float)(int8_t)blk[192 + 2 * bb]) * a->d[b], acc);         \
            acc = fmaf((float)s1, (d * (float)(int8_t)blk[193 + 2 * bb]) * a->d[b], acc);         \
        }                                                                                         \
        return acc;                                                                               \
    }

#define Q8_ISUM_avx2(wv, xv, sx) hsum_i32(mul_s8s8(wv, xv))
/* w + 128 as unsigned bytes: sum (w + 128) q - 128 s */
#define Q8_ISUM_avxvnni(wv, xv, sx)                                                               \
    (hsum_i32(vnni_u8s8(_mm256_xor_si256(wv, _mm256_set1_epi8((char)0x80)), xv)) - 128 * (sx))
DEFINE_DOTS_256(avx2, AVX2, mul_u8s8)
DEFINE_DOTS_256(avxvnni, AVXVNNI, vnni_u8s8)

/* Decode on the AVX2 level, Q8_0 and Q4_0: 8 rows at a time, one row per float lane, the 8
 * rows' integer block sums folded to one lane per row by horizontal adds; then the chain of the
 * per-row dots above (so these give the same bits as they do).
 * Q8_0: each row's block is one 256-bit multiply (8 partial sums per row, three hadd levels).
 * Q4_0: rows i and i + 4 share a register (a 128-bit half each): one AND gives both rows' low
 * nibbles, one shift + AND the high ones, each multiplied by its half of the input broadcast to
 * both halves; the 4 partial sums per row then take two hadd levels, and the halves come out in
 * row order (rows 0-3 low, 4-7 high) with no cross-lane step. With maddubs the two products add
 * as int16 before the widening madd: each pair sums to at most 2 * 15 * 127, two of them 7620.
 * The 8 f16 scales are gathered by 8 movd loads and a tree of 7 unpacks (scales8): through the
 * stack (2 stores and a wider load) store forwarding failed on every block (40% of the samples);
 * built with scalar shifts and ors in two 64-bit registers they cost 7% more of the Q8_0 and
 * Q4_0 decode kernels' time than the unpacks (4% of Q5_0's), and a vpgatherdd 14-30% more (Zen 3,
 * docs/performance.md Session 13). The next group of rows is prefetched as one linear stream
 * while this one is read, as in the AVX-512 kernel. */
AVX2 static inline __m256i fold8(const __m256i P[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(P[0], P[1]), _mm256_hadd_epi32(P[2], P[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(P[4], P[5]), _mm256_hadd_epi32(P[6], P[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}
/* the f16 scales of 8 blocks rb apart (c: the first; each block's bytes 0-1), lane i block i */
AVX2 static inline __m256 scales8(const uint8_t *c, size_t rb) {
    __m128i v[8];
    for (int i = 0; i < 8; i++) v[i] = _mm_cvtsi32_si128((int)rd32(c + (size_t)i * rb));
    const __m128i a = _mm_unpacklo_epi32(_mm_unpacklo_epi16(v[0], v[1]), _mm_unpacklo_epi16(v[2], v[3]));
    const __m128i b = _mm_unpacklo_epi32(_mm_unpacklo_epi16(v[4], v[5]), _mm_unpacklo_epi16(v[6], v[7]));
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(a, b));
}
/* the next 8-row group's lines of block b (pb: its offset in W; nothing past end), read while
 * this group's block is multiplied: one linear stream the hardware prefetchers take up late.
 * Always inlined: gcc left it a call, and a call in these loops spills every live ymm register
 * (the file-layout Q8_0 decode from memory read 1.35x slower, bench_quant_decode). */
AVX2 static inline __attribute__((always_inline)) void prefetch_group(const uint8_t *W, size_t pb, size_t end,
                                                                      int lines) {
    if (pb < end)
        for (int l = 0; l < lines; l++) _mm_prefetch((const char *)W + pb + 64 * l, _MM_HINT_T0);
}
AVX2 static inline __m256i hsum4x2(const __m256i S[4]) { /* lane i: row i (rows 0-3 low half, 4-7 high) */
    return _mm256_hadd_epi32(_mm256_hadd_epi32(S[0], S[1]), _mm256_hadd_epi32(S[2], S[3]));
}
AVX2 static inline __m256i nib2_avx2(__m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)),
                             _mm256_set1_epi16(1));
}
AVXVNNI static inline __m256i nib2_avxvnni(__m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, xl), hi, xh);
}
/* the same for products whose pair sums may reach 2 * 127 * 127: widened before they add */
AVX2 static inline __m256i nib2w_avx2(__m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_add_epi32(mul_u8s8(lo, xl), mul_u8s8(hi, xh));
}
#define nib2w_avxvnni nib2_avxvnni

/* Q4_K / Q6_K on the AVX2 level. Their per-row dots above run one block at a time through two
 * dependent FMAs and a horizontal sum, so a prompt or a decode step reads them at a few percent
 * of the integer rate (a 268-token prefill of Q4_K rows took ten times the Q4_0 time). Two forms
 * keep the per-row chains in float lanes, so every lane still runs the canonical FMAs of its row
 * and input (the same bits as the per-row dots):
 * - decode (one input): 8 rows at a time, lane i row i. A block's 8 products fold to one lane
 *   per row (fold8); each super-block's scales are read for the 8 rows at once (its first 16
 *   bytes, transposed to one 32-bit lane per row: d and dmin, then the 12 bytes of 6-bit scales
 *   and mins; Q6_K: its 16 int8 scales, and d).
 * - prompts of 2-7 inputs: 8 inputs at a time, lane j input j, for a chunk of rows that stays in
 *   L1 while every group of 8 inputs passes; a block's weight values are unpacked once for the 8
 *   inputs and folded to one lane per input; the rows' block scales are read once per chunk, and
 *   the inputs' (d; Q4_K's -s as a float, Q6_K's 32 h) laid out per block once per group.
 *   Prompts of 8 or more take the transposed tile further down (ktile), which needs no folds.
 * Measured (1 thread, thread CPU time, 896 x 4864 from cache, docs/performance.md Session 7). */
#define K_ROWS_CHUNK 16

/* 8 rows' 16 bytes at p[i] as 4 vectors, lane i row i: bytes 0-3, 4-7, 8-11, 12-15 */
AVX2 static inline void rows16_t(const uint8_t *const p[8], __m256i out[4]) {
    __m256i A[4];
    for (int i = 0; i < 4; i++)
        A[i] = _mm256_loadu2_m128i((const __m128i *)p[i + 4], (const __m128i *)p[i]);
    const __m256i t0 = _mm256_unpacklo_epi32(A[0], A[1]), t1 = _mm256_unpackhi_epi32(A[0], A[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(A[2], A[3]), t3 = _mm256_unpackhi_epi32(A[2], A[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2), out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3), out[3] = _mm256_unpackhi_epi64(t1, t3);
}
/* Q4_K group g's 6-bit scale (or min, from w1 instead of w0) per lane, as in q4k_scale_min */
AVX2 static inline __m256 q4k_lane_scale(__m256i w0, __m256i w2, int g, int mins) {
    const __m256i m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3);
    if (g < 4) return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(w0, 8 * g), m6));
    const int k = g - 4;
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(w2, 8 * k + (mins ? 4 : 0)), m4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(w0, 8 * k + 6), m2);
    return _mm256_cvtepi32_ps(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)));
}
/* the 8 lanes' halves of a block's products: lane i of *lo sums lanes 0-3 of P[i], *hi 4-7 */
AVX2 static inline void fold8_halves(const __m256i P[8], __m256i *lo, __m256i *hi) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(P[0], P[1]), _mm256_hadd_epi32(P[2], P[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(P[4], P[5]), _mm256_hadd_epi32(P[6], P[7]));
    *lo = _mm256_permute2x128_si256(a, b, 0x20);
    *hi = _mm256_permute2x128_si256(a, b, 0x31);
}
/* Q6_K scale idx (0..15) per lane from the transposed scale bytes S[4], as a float */
AVX2 static inline __m256 q6k_lane_scale(const __m256i S[4], int idx) {
    const int sh = 24 - 8 * (idx % 4);
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(S[idx / 4], sh), 24));
}

/* A super-block's scales for 8 rows (blk[i] row i's super-block), lane i row i: Q4_K d, dmin
 * and H = its first 16 bytes transposed (d | dmin, the 6-bit scales 0-3, 4-7, 8-11); Q6_K d and
 * H = its 16 int8 scales transposed (dmin unused). */
AVX2 static inline void ksuper_scales(int q4k, const uint8_t *const blk[8], __m256i H[4], __m256 *d,
                                      __m256 *dmin) {
    if (q4k) {
        rows16_t(blk, H);
        const __m256i dd = _mm256_permute4x64_epi64(
            _mm256_packus_epi32(_mm256_and_si256(H[0], _mm256_set1_epi32(0xffff)), _mm256_srli_epi32(H[0], 16)),
            0xd8);
        *d = _mm256_cvtph_ps(_mm256_castsi256_si128(dd));
        *dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(dd, 1));
        return;
    }
    const uint8_t *sp[8];
    uint16_t dh[8];
    for (int i = 0; i < 8; i++) sp[i] = blk[i] + 192, dh[i] = rd16(blk[i] + 208);
    rows16_t(sp, H);
    *d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
    *dmin = _mm256_setzero_ps();
}
/* Rows r+keep_from..r+7 of Y from the 8 lanes of y, with bias, added to Y when accumulating */
AVX2 static inline void store8_rows(float *Y, __m256 y, const float *bias, int r, int keep_from,
                                    int accumulate) {
    _Alignas(32) float v[8];
    _mm256_store_ps(v, y);
    for (int i = keep_from; i < 8; i++) {
        const float s = v[i] + (bias ? bias[r + i] : 0.0f);
        Y[r + i] = accumulate ? Y[r + i] + s : s;
    }
}

/* 16 bytes at p in both halves */
AVX2 static inline __m256i bcast16(const int8_t *p) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
}
/* bit g (a constant where inlined) of every byte moved to bit 4 (16 or 0): Q5_K's fifth bits */
AVX2 static inline __attribute__((always_inline)) __m256i bit_as_16(__m256i v, int g) {
    return _mm256_and_si256(g <= 4 ? _mm256_slli_epi16(v, 4 - g) : _mm256_srli_epi16(v, g - 4), _mm256_set1_epi8(16));
}

/* one half-register product of the Q6_K decode: u8 x s8 pair sums (at most 2 x 63 x 127) widened */
#define Q6HALF_avx2(v, x, one) _mm256_madd_epi16(_mm256_maddubs_epi16(v, x), one)
#define Q6HALF_avxvnni(v, x, one) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), v, x)

#define DEFINE_KQUANT_256(SUFFIX, ATTR, MULU)                                                     \
    /* Q4_K / Q5_K decode, 8 rows (lanes below keep_from computed, not stored): kgemv8's        \
     * prefetch and chain, with Q4_0's row pairs (rows i and i + 4 in the halves of a register)  \
     * and a group pair per step: the 32 bytes of qs that hold groups 2c (low nibbles) and 2c + 1 \
     * (high) are read once as two 16-value halves, each multiplied by its half of the input    \
     * broadcast, so a group's 8 rows fold in three hadds where kgemv8 takes six and two lane    \
     * crossings; the scales' group index is a constant (the loop unrolled). Pair sums: Q4_K    \
     * 2 x 2 x 15 x 127, Q5_K 2 x 2 x 31 x 127 = 15748, in int16 before the widening madd. From \
     * cache (1 thread, 3072 x 1024) Q4_K ran at 10.3 GB/s through kgemv8. */                   \
    ATTR static inline __attribute__((always_inline)) void kgemv8m_##SUFFIX(                      \
        const wb_qtype t, float *Y, const qact *a, const uint8_t *W, size_t rb, const float *bias, \
        int nblk, int r, int keep_from, size_t end, int accumulate) {                             \
        const int five = t == WB_QT_Q5_K;                                                         \
        const size_t bs = five ? 176 : 144, pf = (size_t)(r + 8) * rb, qo = five ? 48 : 16;       \
        const __m256i m4 = _mm256_set1_epi8(15);                                                  \
        const uint8_t *base = W + (size_t)r * rb;                                                 \
        __m256 y = _mm256_setzero_ps();                                                           \
        for (int sb = 0; sb < nblk / 8; sb++) {                                                   \
            const uint8_t *blk[8];                                                                \
            for (int i = 0; i < 8; i++) blk[i] = base + (size_t)i * rb + (size_t)sb * bs;         \
            __m256i H[4];                                                                         \
            __m256 d, dmin;                                                                       \
            ksuper_scales(1, blk, H, &d, &dmin);                                                  \
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                                 \
                const int b0 = 8 * sb + 2 * c;                                                    \
                prefetch_group(W, pf + (size_t)b0 * bs, end, 3);                                  \
                prefetch_group(W, pf + (size_t)(b0 + 1) * bs, end, 3);                            \
                const int8_t *x0 = a->q + 32 * b0, *x1 = x0 + 32;                                 \
                const __m256i x0a = bcast16(x0), x0b = bcast16(x0 + 16);                          \
                const __m256i x1a = bcast16(x1), x1b = bcast16(x1 + 16);                          \
                __m256i S0[4], S1[4];                                                             \
                for (int i = 0; i < 4; i++) {                                                     \
                    const uint8_t *p0 = blk[i] + qo + 32 * c, *p1 = blk[i + 4] + qo + 32 * c;     \
                    const __m256i A = _mm256_loadu2_m128i((const __m128i *)p1, (const __m128i *)p0); \
                    const __m256i B = _mm256_loadu2_m128i((const __m128i *)(p1 + 16), (const __m128i *)(p0 + 16)); \
                    __m256i lA = _mm256_and_si256(A, m4), hA = _mm256_and_si256(_mm256_srli_epi16(A, 4), m4); \
                    __m256i lB = _mm256_and_si256(B, m4), hB = _mm256_and_si256(_mm256_srli_epi16(B, 4), m4); \
                    if (five) { /* value l's fifth bits: bits 2c and 2c + 1 of qh[l] */           \
                        const uint8_t *h0 = blk[i] + 16, *h1 = blk[i + 4] + 16;                   \
                        const __m256i QA = _mm256_loadu2_m128i((const __m128i *)h1, (const __m128i *)h0); \
                        const __m256i QB = _mm256_loadu2_m128i((const __m128i *)(h1 + 16), (const __m128i *)(h0 + 16)); \
                        lA = _mm256_or_si256(lA, bit_as_16(QA, 2 * c));                           \
                        hA = _mm256_or_si256(hA, bit_as_16(QA, 2 * c + 1));                       \
                        lB = _mm256_or_si256(lB, bit_as_16(QB, 2 * c));                           \
                        hB = _mm256_or_si256(hB, bit_as_16(QB, 2 * c + 1));                       \
                    }                                                                             \
                    S0[i] = nib2_##SUFFIX(lA, x0a, lB, x0b);                                      \
                    S1[i] = nib2_##SUFFIX(hA, x1a, hB, x1b);                                      \
                }                                                                                 \
                const __m256 dx0 = _mm256_set1_ps(a->d[b0]), dx1 = _mm256_set1_ps(a->d[b0 + 1]);  \
                const __m256 s00 = _mm256_mul_ps(d, q4k_lane_scale(H[1], H[3], 2 * c, 0));        \
                const __m256 s01 = _mm256_mul_ps(dmin, q4k_lane_scale(H[2], H[3], 2 * c, 1));     \
                const __m256 s10 = _mm256_mul_ps(d, q4k_lane_scale(H[1], H[3], 2 * c + 1, 0));    \
                const __m256 s11 = _mm256_mul_ps(dmin, q4k_lane_scale(H[2], H[3], 2 * c + 1, 1)); \
                y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum4x2(S0)), _mm256_mul_ps(s00, dx0), y); \
                y = _mm256_fmadd_ps(_mm256_set1_ps((float)(-a->s[b0])), _mm256_mul_ps(s01, dx0), y); \
                y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum4x2(S1)), _mm256_mul_ps(s10, dx1), y); \
                y = _mm256_fmadd_ps(_mm256_set1_ps((float)(-a->s[b0 + 1])), _mm256_mul_ps(s11, dx1), y); \
            }                                                                                     \
        }                                                                                         \
        store8_rows(Y, y, bias, r, keep_from, accumulate);                                        \
    }                                                                                             \
    /* Q6_K decode, rows r..r+7 (lanes below keep_from computed, not stored) against one input.  \
     * The 8 rows are 8 streams of a few lines each, too short for the hardware prefetchers:     \
     * read from memory every line was a demand miss (a Qwen3-0.6B-shaped Q4_K step ran at 4.8x  \
     * its bound on 1 thread, 2.6 GB/s), so the next group's rows, one linear run of 8 rb bytes,  \
     * are prefetched while this group is multiplied, bs bytes (a block's worth of 8 rows) per   \
     * block, as gemv8 does. Rows i and i + 4 share a register as in Q4_0's decode: its halves    \
     * are the two rows' values 0-15 (A, the scale of 16 values 2 bb) or 16-31 (B, 2 bb + 1), so  \
     * each half-block's 8 rows fold in three hadds and no lane crossing (pair sums 2 x 63 x 127  \
     * fit int16 before the madd). The group loop is unrolled: its shifts are constants. */       \
    ATTR static inline __attribute__((always_inline)) void kgemv8q6_##SUFFIX(                     \
        float *Y, const qact *a, const uint8_t *W, size_t rb, const float *bias, int nblk, int r, \
        int keep_from, size_t end, int accumulate) {                                              \
        const size_t pf = (size_t)(r + 8) * rb;                                                   \
        const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi16(1); \
        (void)one; /* Q6HALF_avxvnni has no use for it */                                        \
        const uint8_t *base = W + (size_t)r * rb;                                                 \
        __m256 y = _mm256_setzero_ps();                                                           \
        for (int sb = 0; sb < nblk / 8; sb++) {                                                   \
            const uint8_t *blk[8];                                                                \
            for (int i = 0; i < 8; i++) blk[i] = base + (size_t)i * rb + (size_t)sb * 210;        \
            __m256i H[4];                                                                         \
            __m256 d, dmin;                                                                       \
            ksuper_scales(0, blk, H, &d, &dmin);                                                  \
            _Pragma("GCC unroll 8") for (int bb = 0; bb < 8; bb++) {                              \
                const int b = 8 * sb + bb, h = bb / 4, part = bb % 4;                             \
                prefetch_group(W, pf + (size_t)b * 210, end, 4);                                  \
                const int8_t *x = a->q + 32 * b;                                                  \
                const __m256i xa = bcast16(x), xb = bcast16(x + 16);                              \
                __m256i SA[4], SB[4];                                                             \
                for (int i = 0; i < 4; i++) {                                                     \
                    const uint8_t *l0 = blk[i] + 64 * h + 32 * (part & 1), *l1 = blk[i + 4] + 64 * h + 32 * (part & 1); \
                    const uint8_t *h0 = blk[i] + 128 + 32 * h, *h1 = blk[i + 4] + 128 + 32 * h;   \
                    __m256i LA = _mm256_loadu2_m128i((const __m128i *)l1, (const __m128i *)l0);   \
                    __m256i LB = _mm256_loadu2_m128i((const __m128i *)(l1 + 16), (const __m128i *)(l0 + 16)); \
                    const __m256i QA = _mm256_loadu2_m128i((const __m128i *)h1, (const __m128i *)h0); \
                    const __m256i QB = _mm256_loadu2_m128i((const __m128i *)(h1 + 16), (const __m128i *)(h0 + 16)); \
                    if (part >= 2) LA = _mm256_srli_epi16(LA, 4), LB = _mm256_srli_epi16(LB, 4);  \
                    const __m256i vA = _mm256_or_si256(_mm256_and_si256(LA, m4),                   \
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(QA, 2 * part), m3), 4)); \
                    const __m256i vB = _mm256_or_si256(_mm256_and_si256(LB, m4),                   \
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(QB, 2 * part), m3), 4)); \
                    SA[i] = Q6HALF_##SUFFIX(vA, xa, one);                                         \
                    SB[i] = Q6HALF_##SUFFIX(vB, xb, one);                                         \
                }                                                                                 \
                const __m256i lo = _mm256_sub_epi32(hsum4x2(SA), _mm256_set1_epi32(32 * a->h[2 * b])); \
                const __m256i hi = _mm256_sub_epi32(hsum4x2(SB), _mm256_set1_epi32(32 * a->h[2 * b + 1])); \
                const __m256 dx = _mm256_set1_ps(a->d[b]);                                        \
                const __m256 d0 = _mm256_mul_ps(d, q6k_lane_scale(H, 2 * bb));                    \
                const __m256 d1 = _mm256_mul_ps(d, q6k_lane_scale(H, 2 * bb + 1));                \
                y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_mul_ps(d0, dx), y);            \
                y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_mul_ps(d1, dx), y);            \
            }                                                                                     \
        }                                                                                         \
        store8_rows(Y, y, bias, r, keep_from, accumulate);                                        \
    }                                                                                             \
    /* rows [r0, r1), at least 8: the last group of 8 ends at r1 */                               \
    ATTR static inline __attribute__((always_inline)) void kgemv_rows_##SUFFIX(                   \
        const wb_qtype t, float *Y, const qact *a, const uint8_t *W, size_t rb, const float *bias, \
        int nblk, int r0, int r1, int accumulate) {                                               \
        const size_t end = (size_t)r1 * rb;                                                       \
        int r = r0;                                                                               \
        if (t == WB_QT_Q6_K) {                                                                    \
            for (; r + 8 <= r1; r += 8) kgemv8q6_##SUFFIX(Y, a, W, rb, bias, nblk, r, 0, end, accumulate); \
            if (r < r1) kgemv8q6_##SUFFIX(Y, a, W, rb, bias, nblk, r1 - 8, 8 - (r1 - r), end, accumulate); \
            return;                                                                               \
        }                                                                                         \
        for (; r + 8 <= r1; r += 8) kgemv8m_##SUFFIX(t, Y, a, W, rb, bias, nblk, r, 0, end, accumulate); \
        if (r < r1) kgemv8m_##SUFFIX(t, Y, a, W, rb, bias, nblk, r1 - 8, 8 - (r1 - r), end, accumulate); \
    }                                                                                             \
    /* nb inputs (act, astride apart); 0 without scratch (the caller has the per-row dots) */    \
    ATTR static int kgemm_##SUFFIX(wb_qtype t, float *Y, size_t ldy, const uint8_t *act,         \
                                   size_t astride, int nb, const uint8_t *W, size_t rb,           \
                                   const float *bias, int in, int r0, int r1, int accumulate) {   \
        const int nblk = in / 32, q4k = t != WB_QT_Q6_K; /* Q4_K and Q5_K: scales and mins */    \
        const size_t bs = KBYTES(t);                                                              \
        /* per block, the group's 8 d, then Q4_K / Q5_K: 8 (float)-s; Q6_K: 8 + 8 int32 32 h */  \
        /* then the chunk's two float scales per row and block (Q4_K d sc, dmin m; Q6_K d sc16 \
         * of each half), read once per chunk rather than once per group */                      \
        float *dx = qscratch(1, (size_t)nblk * (8 * 3 + 2 * K_ROWS_CHUNK) * sizeof(float));      \
        if (!dx) return 0;                                                                        \
        float *ms = dx + (size_t)8 * nblk, *ws = dx + (size_t)24 * nblk;                          \
        int32_t *h0 = (int32_t *)(void *)ms, *h1 = h0 + (size_t)8 * nblk;                         \
        for (int c0 = r0; c0 < r1; c0 += K_ROWS_CHUNK) {                                          \
            const int c1 = r1 - c0 < K_ROWS_CHUNK ? r1 : c0 + K_ROWS_CHUNK;                       \
            for (int r = c0; r < c1; r++)                                                         \
                for (int b = 0; b < nblk; b++) {                                                  \
                    const uint8_t *blk = W + (size_t)r * rb + (size_t)(b / 8) * bs;               \
                    float *w2 = ws + 2 * ((size_t)(r - c0) * nblk + b);                           \
                    if (q4k) q4k_block_scales_h(blk, b % 8, &w2[0], &w2[1]);                      \
                    else {                                                                        \
                        const float d = h2f(blk + 208);                                           \
                        w2[0] = d * (float)(int8_t)blk[192 + 2 * (b % 8)];                        \
                        w2[1] = d * (float)(int8_t)blk[193 + 2 * (b % 8)];                        \
                    }                                                                             \
                }                                                                                 \
            for (int j0 = 0; j0 < nb; j0 += 8) {                                                  \
                const int jn = nb - j0 < 8 ? nb - j0 : 8;                                         \
                const int8_t *xq[8];                                                              \
                for (int j = 0; j < 8; j++) { /* a short group repeats its last input */          \
                    const qact aj = act_view(act + astride * (size_t)(j0 + (j < jn ? j : jn - 1)), in); \
                    xq[j] = aj.q;                                                                 \
                    for (int b = 0; b < nblk; b++) {                                              \
                        dx[8 * b + j] = aj.d[b];                                                  \
                        if (q4k) ms[8 * b + j] = (float)(-aj.s[b]);                               \
                        else h0[8 * b + j] = 32 * aj.h[2 * b], h1[8 * b + j] = 32 * aj.h[2 * b + 1]; \
                    }                                                                             \
                }                                                                                 \
                for (int r = c0; r < c1; r++) {                                                   \
                    const uint8_t *row = W + (size_t)r * rb;                                      \
                    const float *w2 = ws + 2 * (size_t)(r - c0) * nblk;                           \
                    __m256 y = _mm256_setzero_ps();                                               \
                    __m256i P[8];                                                                 \
                    for (int b = 0; b < nblk; b++) {                                              \
                        const uint8_t *blk = row + (size_t)(b / 8) * bs;                          \
                        const int bb = b % 8;                                                     \
                        const __m256 dxv = _mm256_load_ps(dx + 8 * b);                            \
                        if (q4k) {                                                                \
                            const __m256i u = k_values(t, blk, bb);                               \
                            for (int j = 0; j < 8; j++)                                           \
                                P[j] = MULU(u, _mm256_loadu_si256((const __m256i *)(xq[j] + 32 * b))); \
                            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fold8(P)),                     \
                                                _mm256_mul_ps(_mm256_set1_ps(w2[2 * b]), dxv), y); \
                            y = _mm256_fmadd_ps(_mm256_load_ps(ms + 8 * b),                       \
                                                _mm256_mul_ps(_mm256_set1_ps(w2[2 * b + 1]), dxv), y); \
                        } else {                                                                  \
                            const __m256i u = q6_values(blk, bb);                                 \
                            for (int j = 0; j < 8; j++)                                           \
                                P[j] = MULU(u, _mm256_loadu_si256((const __m256i *)(xq[j] + 32 * b))); \
                            __m256i lo, hi;                                                       \
                            fold8_halves(P, &lo, &hi);                                            \
                            lo = _mm256_sub_epi32(lo, _mm256_load_si256((const __m256i *)(h0 + 8 * b))); \
                            hi = _mm256_sub_epi32(hi, _mm256_load_si256((const __m256i *)(h1 + 8 * b))); \
                            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo),                           \
                                                _mm256_mul_ps(_mm256_set1_ps(w2[2 * b]), dxv), y); \
                            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi),                           \
                                                _mm256_mul_ps(_mm256_set1_ps(w2[2 * b + 1]), dxv), y); \
                        }                                                                         \
                    }                                                                             \
                    _Alignas(32) float v[8];                                                      \
                    _mm256_store_ps(v, y);                                                        \
                    for (int j = 0; j < jn; j++) {                                                \
                        const float s = v[j] + (bias ? bias[r] : 0.0f);                           \
                        float *yp = Y + (size_t)(j0 + j) * ldy + r;                               \
                        *yp = accumulate ? *yp + s : s;                                           \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        return 1;                                                                                 \
    }
DEFINE_KQUANT_256(avx2, AVX2, mul_u8s8)
DEFINE_KQUANT_256(avxvnni, AVXVNNI, vnni_u8s8)

#define DEFINE_GEMV_256(SUFFIX, ATTR, Q8MUL, Q8CORR)                                              \
    ATTR static void gemv8_##SUFFIX(const int q8, float *Y, const qact *a, const uint8_t *W,      \
                                    size_t rb, const float *bias, int nblk, int r, int keep_from, \
                                    size_t end, int accumulate) {                                 \
        const size_t bs = q8 ? 34 : 18;                                                           \
        const uint8_t *base = W + (size_t)r * rb;                                                 \
        const size_t pf = (size_t)(r + 8) * rb;                                                   \
        const __m256i m4 = _mm256_set1_epi8(15);                                                  \
        __m256 y = _mm256_setzero_ps();                                                           \
        for (int b = 0; b < nblk; b++) {                                                          \
            prefetch_group(W, pf + (size_t)b * 8 * bs, end, q8 ? 5 : 3); /* 272 / 144 bytes */     \
            const int8_t *x = a->q + 32 * b;                                                      \
            const uint8_t *c = base + (size_t)b * bs;                                             \
            __m256i isum;                                                                         \
            if (q8) {                                                                             \
                const __m256i xv = _mm256_loadu_si256((const __m256i *)x);                        \
                __m256i P[8];                                                                     \
                for (int i = 0; i < 8; i++)                                                       \
                    P[i] = Q8MUL(_mm256_loadu_si256((const __m256i *)(c + (size_t)i * rb + 2)), xv); \
                isum = _mm256_add_epi32(fold8(P), _mm256_set1_epi32(Q8CORR * a->s[b]));          \
            } else {                                                                              \
                const __m256i xl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x)); \
                const __m256i xh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 16))); \
                __m256i S[4];                                                                     \
                for (int i = 0; i < 4; i++) {                                                     \
                    const __m256i v = _mm256_loadu2_m128i((const __m128i *)(c + (size_t)(i + 4) * rb + 2), \
                                                          (const __m128i *)(c + (size_t)i * rb + 2)); \
                    S[i] = nib2_##SUFFIX(_mm256_and_si256(v, m4), xl,                             \
                                         _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xh);      \
                }                                                                                 \
                isum = _mm256_add_epi32(hsum4x2(S), _mm256_set1_epi32(-8 * a->s[b]));             \
            }                                                                                     \
            const __m256 dw = scales8(c, rb);                                                     \
            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(a->d[b])), y); \
        }                                                                                         \
        store8_rows(Y, y, bias, r, keep_from, accumulate);                                        \
    }                                                                                             \
    /* Q5_0, Q4_1 and Q5_1 (t a constant where inlined): Q4_0's row pairs (rows i and i + 4 in  \
     * the halves of a register, nibbles against the two halves of the input), the five-bit      \
     * types' qh in each row's half, its bytes spread as in q5_values (bytes 0-1 for the low      \
     * nibbles' values 0-15, 2-3 for the high ones'); Q5_0's sums minus 16 s; Q4_1 / Q5_1 (q      \
     * unsigned) with the min chain of s with scale m (the f16 after d, gathered as d is) in     \
     * lanes beside the value chain, the two added at the end as the canonical dot does. With    \
     * maddubs each of the two products' pair sums is at most 2 * 31 * 127, both 15748. */       \
    ATTR static inline __attribute__((always_inline)) void gemv8q5m_##SUFFIX(                     \
        const wb_qtype t, float *Y, const qact *a, const uint8_t *W, size_t rb, const float *bias, \
        int nblk, int r, int keep_from, size_t end, int accumulate) {                             \
        const int five = t != WB_QT_Q4_1, mins = t != WB_QT_Q5_0;                                 \
        const size_t bs = t == WB_QT_Q5_0 ? 22 : five ? 24 : 20, ho = mins ? 4 : 2, qo = ho + (five ? 4 : 0); \
        const uint8_t *base = W + (size_t)r * rb;                                                 \
        const size_t pf = (size_t)(r + 8) * rb;                                                   \
        const __m256i m4 = _mm256_set1_epi8(15), c16 = _mm256_set1_epi8(16);                      \
        const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);                             \
        const __m256i sel_lo = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,    \
                                                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);   \
        const __m256i sel_hi = _mm256_add_epi8(sel_lo, _mm256_set1_epi8(2));                      \
        __m256 y = _mm256_setzero_ps(), y2 = _mm256_setzero_ps();                                 \
        for (int b = 0; b < nblk; b++) {                                                          \
            prefetch_group(W, pf + (size_t)b * 8 * bs, end, 3); /* 160 to 192 bytes */           \
            const int8_t *x = a->q + 32 * b;                                                      \
            const __m256i xl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x)); \
            const __m256i xh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 16))); \
            const uint8_t *c = base + (size_t)b * bs;                                             \
            __m256i S[4];                                                                         \
            for (int i = 0; i < 4; i++) {                                                         \
                const uint8_t *c0 = c + (size_t)i * rb, *c1 = c + (size_t)(i + 4) * rb;           \
                const __m256i v = _mm256_loadu2_m128i((const __m128i *)(c1 + qo), (const __m128i *)(c0 + qo)); \
                __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4); \
                if (five) {                                                                       \
                    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_cvtsi32_si128((int)rd32(c0 + ho))), \
                                                              _mm_cvtsi32_si128((int)rd32(c1 + ho)), 1); \
                    const __m256i hl = _mm256_and_si256(_mm256_shuffle_epi8(h, sel_lo), bit);     \
                    const __m256i hh = _mm256_and_si256(_mm256_shuffle_epi8(h, sel_hi), bit);     \
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(hl, bit), c16));  \
                    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(hh, bit), c16));  \
                }                                                                                 \
                S[i] = nib2_##SUFFIX(lo, xl, hi, xh);                                             \
            }                                                                                     \
            __m256i isum = hsum4x2(S);                                                            \
            if (!mins) isum = _mm256_add_epi32(isum, _mm256_set1_epi32(-16 * a->s[b]));           \
            const __m256 dx = _mm256_set1_ps(a->d[b]);                                            \
            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(scales8(c, rb), dx), y);  \
            if (mins)                                                                             \
                y2 = _mm256_fmadd_ps(scales8(c + 2, rb), _mm256_set1_ps((float)a->s[b] * a->d[b]), y2); \
        }                                                                                         \
        if (mins) y = _mm256_add_ps(_mm256_add_ps(y, _mm256_setzero_ps()), y2);                   \
        store8_rows(Y, y, bias, r, keep_from, accumulate);                                        \
    }                                                                                             \
    ATTR static inline __attribute__((always_inline)) void gemv_rows_q5m_##SUFFIX(                \
        const wb_qtype t, float *Y, const qact *a, const uint8_t *W, size_t rb, const float *bias, \
        int nblk, int r0, int r1, int accumulate) {                                               \
        const size_t end = (size_t)r1 * rb;                                                       \
        int r = r0;                                                                               \
        for (; r + 8 <= r1; r += 8) gemv8q5m_##SUFFIX(t, Y, a, W, rb, bias, nblk, r, 0, end, accumulate); \
        if (r < r1) gemv8q5m_##SUFFIX(t, Y, a, W, rb, bias, nblk, r1 - 8, 8 - (r1 - r), end, accumulate); \
    }                                                                                             \
    /* IQ4_NL: Q4_0's row pairs (rows i and i + 4 in the halves of a register), the nibbles      \
     * looked up as |K| (vpshufb) against the input with K's sign (the input or its negation,   \
     * chosen by the nibble's bit 3: K < 0 exactly for nibbles 0-7), so each product is |K| x   \
     * +-x, unsigned by signed; each maddubs pair sums to at most 2 * 127 * 127, so the two      \
     * products widen before they add (nib2w). */                                               \
    ATTR static void gemv8iq4_##SUFFIX(float *Y, const qact *a, const uint8_t *W, size_t rb,      \
                                       const float *bias, int nblk, int r, int keep_from,         \
                                       size_t end, int accumulate) {                              \
        const uint8_t *base = W + (size_t)r * rb;                                                 \
        const size_t pf = (size_t)(r + 8) * rb;                                                   \
        const __m256i m4 = _mm256_set1_epi8(15);                                                  \
        const __m256i kabs = _mm256_broadcastsi128_si256(_mm_abs_epi8(_mm_loadu_si128((const __m128i *)k_iq4_levels))); \
        __m256 y = _mm256_setzero_ps();                                                           \
        for (int b = 0; b < nblk; b++) {                                                          \
            prefetch_group(W, pf + (size_t)b * 8 * 18, end, 3); /* 144 bytes: 3 lines at most */ \
            const int8_t *x = a->q + 32 * b;                                                      \
            const __m256i xl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)x)); \
            const __m256i xh = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 16))); \
            const __m256i nxl = _mm256_sub_epi8(_mm256_setzero_si256(), xl);                      \
            const __m256i nxh = _mm256_sub_epi8(_mm256_setzero_si256(), xh);                      \
            const uint8_t *c = base + (size_t)b * 18;                                             \
            __m256i S[4];                                                                         \
            for (int i = 0; i < 4; i++) {                                                         \
                const __m256i v = _mm256_loadu2_m128i((const __m128i *)(c + (size_t)(i + 4) * rb + 2), \
                                                      (const __m128i *)(c + (size_t)i * rb + 2)); \
                const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4); \
                S[i] = nib2w_##SUFFIX(_mm256_shuffle_epi8(kabs, lo),                              \
                                      _mm256_blendv_epi8(nxl, xl, _mm256_slli_epi16(lo, 4)),      \
                                      _mm256_shuffle_epi8(kabs, hi),                              \
                                      _mm256_blendv_epi8(nxh, xh, _mm256_slli_epi16(hi, 4)));     \
            }                                                                                     \
            const __m256i isum = hsum4x2(S);                                                      \
            const __m256 dw = scales8(c, rb);                                                     \
            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(a->d[b])), y); \
        }                                                                                         \
        store8_rows(Y, y, bias, r, keep_from, accumulate);                                        \
    }                                                                                             \
    ATTR static void gemv_##SUFFIX(wb_qtype t, float *Y, const uint8_t *act, const uint8_t *W,    \
                                   size_t rb, const float *bias, int in, int r0, int r1,          \
                                   int accumulate) {                                              \
        const qact a = act_view(act, in);                                                         \
        if ((t == WB_QT_Q4_K || t == WB_QT_Q5_K || t == WB_QT_Q6_K) && r1 - r0 >= 8) {           \
            if (t == WB_QT_Q4_K) kgemv_rows_##SUFFIX(WB_QT_Q4_K, Y, &a, W, rb, bias, in / 32, r0, r1, accumulate); \
            else if (t == WB_QT_Q5_K) kgemv_rows_##SUFFIX(WB_QT_Q5_K, Y, &a, W, rb, bias, in / 32, r0, r1, accumulate); \
            else kgemv_rows_##SUFFIX(WB_QT_Q6_K, Y, &a, W, rb, bias, in / 32, r0, r1, accumulate); \
            return;                                                                               \
        }                                                                                         \
        if ((t == WB_QT_Q5_0 || t == WB_QT_Q4_1 || t == WB_QT_Q5_1) && r1 - r0 >= 8) {             \
            if (t == WB_QT_Q5_0) gemv_rows_q5m_##SUFFIX(WB_QT_Q5_0, Y, &a, W, rb, bias, in / 32, r0, r1, accumulate); \
            else if (t == WB_QT_Q4_1) gemv_rows_q5m_##SUFFIX(WB_QT_Q4_1, Y, &a, W, rb, bias, in / 32, r0, r1, accumulate); \
            else gemv_rows_q5m_##SUFFIX(WB_QT_Q5_1, Y, &a, W, rb, bias, in / 32, r0, r1, accumulate); \
            return;                                                                               \
        }                                                                                         \
        if (t == WB_QT_IQ4_NL && r1 - r0 >= 8) {                                                  \
            const size_t end = (size_t)r1 * rb;                                                   \
            int r = r0;                                                                           \
            for (; r + 8 <= r1; r += 8) gemv8iq4_##SUFFIX(Y, &a, W, rb, bias, in / 32, r, 0, end, accumulate); \
            if (r < r1) gemv8iq4_##SUFFIX(Y, &a, W, rb, bias, in / 32, r1 - 8, 8 - (r1 - r), end, accumulate); \
            return;                                                                               \
        }                                                                                         \
        if ((t != WB_QT_Q8_0 && t != WB_QT_Q4_0) || r1 - r0 < 8) {                                \
            const qdot_fn dot = t == WB_QT_Q8_0   ? dot_q8_0_##SUFFIX                             \
                                : t == WB_QT_Q4_0 ? dot_q4_0_##SUFFIX                             \
                                : t == WB_QT_IQ4_NL ? dot_iq4_nl_##SUFFIX                         \
                                : t == WB_QT_Q5_0 ? dot_q5_0_##SUFFIX                             \
                                : t == WB_QT_Q4_K ? dot_q4_k_##SUFFIX                             \
                                : t == WB_QT_Q5_K ? dot_q5_k_##SUFFIX                             \
                                : t == WB_QT_Q4_1 ? dot_q4_1_##SUFFIX                             \
                                : t == WB_QT_Q5_1 ? dot_q5_1_##SUFFIX                             \
                                                  : dot_q6_k_##SUFFIX;                            \
            for (int r = r0; r < r1; r++) {                                                       \
                const float s = dot(W + (size_t)r * rb, &a, in / 32) + (bias ? bias[r] : 0.0f);   \
                Y[r] = accumulate ? Y[r] + s : s;                                                 \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        const int q8 = t == WB_QT_Q8_0;                                                           \
        const size_t end = (size_t)r1 * rb;                                                       \
        int r = r0;                                                                               \
        for (; r + 8 <= r1; r += 8) gemv8_##SUFFIX(q8, Y, &a, W, rb, bias, in / 32, r, 0, end, accumulate); \
        if (r < r1) gemv8_##SUFFIX(q8, Y, &a, W, rb, bias, in / 32, r1 - 8, 8 - (r1 - r), end, accumulate); \
    }

#define Q8MUL_avx2(w, x) mul_s8s8(w, x)
#define Q8MUL_avxvnni(w, x) vnni_u8s8(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), x)
DEFINE_GEMV_256(avx2, AVX2, Q8MUL_avx2, 0)
DEFINE_GEMV_256(avxvnni, AVXVNNI, Q8MUL_avxvnni, -128)

VNNI512 static inline __m256i vnni512_u8s8(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
#define Q8_ISUM_vnni512(wv, xv, sx)                                                               \
    (hsum_i32(vnni512_u8s8(_mm256_xor_si256(wv, _mm256_set1_epi8((char)0x80)), xv)) - 128 * (sx))
DEFINE_DOTS_256(vnni512, VNNI512, vnni512_u8s8)
/* The AVX2 level's decode kernels once more with the EVEX vpdpbusd on ymm registers (AVX512_VNNI
 * with VL: what AVX-VNNI's instruction is on CPUs without AVX-VNNI, Zen 4 say): the AVX-512
 * variant's decode of the types it has no 16-row kernel for (the K types, IQ4_NL, Q5_1; Q4_1
 * keeps the maddubs kernel, gemv_q_512).
 * The integer sums are exact either way, so the same bits as the maddubs kernels. */
VNNI512 static inline __m256i nib2_vnni512(__m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, xl), hi, xh);
}
#define nib2w_vnni512 nib2_vnni512
#define Q6HALF_vnni512(v, x, one) _mm256_dpbusd_epi32(_mm256_setzero_si256(), v, x)
#define Q8MUL_vnni512(w, x) vnni512_u8s8(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), x)
#define VNNI512_UNUSED VNNI512 __attribute__((unused)) /* kgemm_vnni512: prompts run gemm_q_512 */
DEFINE_KQUANT_256(vnni512, VNNI512_UNUSED, vnni512_u8s8)
DEFINE_GEMV_256(vnni512, VNNI512, Q8MUL_vnni512, -128)

/* ------------------------------------------------------------------- AVX-512 VNNI kernels
 *
 * 16 weight rows at a time, one row per float lane, so the float chain of each lane is the
 * canonical one above (the same FMAs as the AVX2 level). */

/* Prefill / batches: for each block of 32 values, the 16 rows' bytes are gathered into the
 * vpdpbusd layout (8 registers, register k holding values 4k..4k+3 of every row as unsigned
 * bytes), and each input's 4-byte groups are broadcast against them: no horizontal sums. */
typedef struct kscales { /* Q4_K: a super-block's d sc and dmin m per group, 16 rows */
    __m512 s0[8], s1[8];
} kscales;

typedef struct tile16 {
    __m512i w[8];
    __m512 s0, s1;  /* per-row scales: d (Q8_0/Q4_0), d sc / dmin m (Q4_K), d sc16 (Q6_K) */
} tile16;

VNNI512 static inline __m512i gather32(__m512i offs, const uint8_t *base) {
    return _mm512_i32gather_epi32(offs, (const void *)base, 1);
}
VNNI512 static inline __m512 gather_f16(__m512i offs, const uint8_t *base) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(gather32(offs, base)));
}

VNNI512 static inline __attribute__((always_inline)) void tile_prep(const wb_qtype t, tile16 *T, kscales *K, __m512i offs, const uint8_t *base, int b) {
    memset(T, 0, sizeof *T);
    const __m512i m4 = _mm512_set1_epi8(15);
    switch (t) {
    case WB_QT_Q8_0: {
        const uint8_t *blk = base + (size_t)b * 34;
        for (int k = 0; k < 8; k++)
            T->w[k] = _mm512_xor_si512(gather32(offs, blk + 2 + 4 * k), _mm512_set1_epi8((char)0x80));
        T->s0 = gather_f16(offs, blk);
        break;
    }
    case WB_QT_Q4_0: {
        const uint8_t *blk = base + (size_t)b * 18;
        for (int k = 0; k < 4; k++) {
            const __m512i g = gather32(offs, blk + 2 + 4 * k);
            T->w[k] = _mm512_and_si512(g, m4);
            T->w[k + 4] = _mm512_and_si512(_mm512_srli_epi32(g, 4), m4);
        }
        T->s0 = gather_f16(offs, blk);
        break;
    }
    case WB_QT_Q4_K: {
        const uint8_t *blk = base + (size_t)(b / 8) * 144 + 16 + 32 * ((b % 8) / 2);
        for (int k = 0; k < 8; k++) {
            __m512i g = gather32(offs, blk + 4 * k);
            if (b & 1) g = _mm512_srli_epi32(g, 4);
            T->w[k] = _mm512_and_si512(g, m4);
        }
        if (b % 8 == 0) { /* the super-block's 16 rows x 8 groups of 6-bit scales and mins, once */
            const uint8_t *sb = base + (size_t)(b / 8) * 144;
            const __m512i dd = gather32(offs, sb), A = gather32(offs, sb + 4);
            const __m512i B = gather32(offs, sb + 8), C = gather32(offs, sb + 12);
            const __m512i lo16 = _mm512_set1_epi32(0xffff), m6 = _mm512_set1_epi32(63);
            const __m512i m4d = _mm512_set1_epi32(15), mb = _mm512_set1_epi32(255);
            const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(dd, lo16)));
            const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
            for (int g = 0; g < 8; g++) {
                const int j8 = 8 * (g & 3);
                const __m512i a = _mm512_and_si512(_mm512_srlv_epi32(A, _mm512_set1_epi32(j8)), mb);
                const __m512i bq = _mm512_and_si512(_mm512_srlv_epi32(B, _mm512_set1_epi32(j8)), mb);
                __m512i sc, m;
                if (g < 4) {
                    sc = _mm512_and_si512(a, m6), m = _mm512_and_si512(bq, m6);
                } else {
                    const __m512i c = _mm512_and_si512(_mm512_srlv_epi32(C, _mm512_set1_epi32(j8)), mb);
                    sc = _mm512_or_si512(_mm512_and_si512(c, m4d), _mm512_slli_epi32(_mm512_srli_epi32(a, 6), 4));
                    m = _mm512_or_si512(_mm512_srli_epi32(c, 4), _mm512_slli_epi32(_mm512_srli_epi32(bq, 6), 4));
                }
                K->s0[g] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
                K->s1[g] = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m));
            }
        }
        T->s0 = K->s0[b % 8];
        T->s1 = K->s1[b % 8];
        break;
    }
    case WB_QT_Q6_K: {
        const int bb = b % 8, h = bb / 4, part = bb % 4;
        const uint8_t *blk = base + (size_t)(b / 8) * 210;
        for (int k = 0; k < 8; k++) {
            __m512i lo = gather32(offs, blk + 64 * h + 32 * (part & 1) + 4 * k);
            __m512i hi = gather32(offs, blk + 128 + 32 * h + 4 * k);
            if (part >= 2) lo = _mm512_srli_epi32(lo, 4);
            lo = _mm512_and_si512(lo, m4);
            hi = _mm512_and_si512(_mm512_srli_epi32(hi, 2 * part), _mm512_set1_epi8(3));
            T->w[k] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
        }
        /* d is the high half of the dword at 206; the two scales the low bytes at 192 + 2 bb */
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather32(offs, blk + 206), 16)));
        const __m512i sc = gather32(offs, blk + 192 + 2 * bb);
        const __m512i sc0 = _mm512_srai_epi32(_mm512_slli_epi32(sc, 24), 24);
        const __m512i sc1 = _mm512_srai_epi32(_mm512_slli_epi32(sc, 16), 24);
        T->s0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc0));
        T->s1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc1));
        break;
    }
    default: break;
    }
}

VNNI512 static inline __m512i bcast4(const int8_t *p) { /* vpbroadcastd from memory */
    return _mm512_broadcastd_epi32(_mm_loadu_si32(p));
}

/* acc[j] (16 rows) += block b of input j, for j < nb. Inlined per type (t a constant), so the
 * eight weight registers stay in registers across the inputs. */
#define INLINE_VNNI512 VNNI512 static inline __attribute__((always_inline))
INLINE_VNNI512 void tile_inputs(const wb_qtype t, const tile16 *T, const uint8_t *act,
                                size_t astride, int in, int nb, int b, float *acc) {
    const __m512i w0 = T->w[0], w1 = T->w[1], w2 = T->w[2], w3 = T->w[3];
    const __m512i w4 = T->w[4], w5 = T->w[5], w6 = T->w[6], w7 = T->w[7];
    const __m512 s0 = T->s0, s1 = T->s1;
    const size_t nblk = (size_t)in / 32;
    const uint8_t *p = act;
    for (int j = 0; j < nb; j++, p += astride) {
        const int8_t *x = (const int8_t *)p + 32 * b;
        const float *dxp = (const float *)(p + in) + b;
        const int32_t *sp = (const int32_t *)(p + in + 4 * nblk) + b;
        const __m512 dx = _mm512_set1_ps(*dxp);
        __m512 y = _mm512_load_ps(acc + 16 * j);
        if (t == WB_QT_Q6_K) {
            const int16_t *hp = (const int16_t *)(p + in + 8 * nblk) + 2 * b;
            __m512i i0 = _mm512_set1_epi32(-32 * hp[0]), i1 = _mm512_set1_epi32(-32 * hp[1]);
            i0 = _mm512_dpbusd_epi32(i0, w0, bcast4(x));
            i0 = _mm512_dpbusd_epi32(i0, w1, bcast4(x + 4));
            i0 = _mm512_dpbusd_epi32(i0, w2, bcast4(x + 8));
            i0 = _mm512_dpbusd_epi32(i0, w3, bcast4(x + 12));
            i1 = _mm512_dpbusd_epi32(i1, w4, bcast4(x + 16));
            i1 = _mm512_dpbusd_epi32(i1, w5, bcast4(x + 20));
            i1 = _mm512_dpbusd_epi32(i1, w6, bcast4(x + 24));
            i1 = _mm512_dpbusd_epi32(i1, w7, bcast4(x + 28));
            y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(s0, dx), y);
            y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(s1, dx), y);
        } else {
            const int c = t == WB_QT_Q8_0 ? -128 : t == WB_QT_Q4_0 ? -8 : 0;
            __m512i i0 = _mm512_set1_epi32(c * *sp);
            i0 = _mm512_dpbusd_epi32(i0, w0, bcast4(x));
            i0 = _mm512_dpbusd_epi32(i0, w1, bcast4(x + 4));
            i0 = _mm512_dpbusd_epi32(i0, w2, bcast4(x + 8));
            i0 = _mm512_dpbusd_epi32(i0, w3, bcast4(x + 12));
            i0 = _mm512_dpbusd_epi32(i0, w4, bcast4(x + 16));
            i0 = _mm512_dpbusd_epi32(i0, w5, bcast4(x + 20));
            i0 = _mm512_dpbusd_epi32(i0, w6, bcast4(x + 24));
            i0 = _mm512_dpbusd_epi32(i0, w7, bcast4(x + 28));
            y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(s0, dx), y);
            if (t == WB_QT_Q4_K)
                y = _mm512_fmadd_ps(_mm512_set1_ps((float)(-*sp)), _mm512_mul_ps(s1, dx), y);
        }
        _mm512_store_ps(acc + 16 * j, y);
    }
}

/* The 16 row pointers and byte offsets of rows [r, r + 16), rows past r1 repeating the last one
 * (computed, never stored). */
VNNI512 static __m512i group_rows(const uint8_t *W, size_t rb, int r, int r1, const uint8_t *rows[16]) {
    for (int i = 0; i < 16; i++) rows[i] = W + (size_t)(r + i < r1 ? r + i : r1 - 1) * rb;
    /* the offsets in a register by vector arithmetic: 16 scalar stores read back as one vector
     * miss store forwarding (10% of the prefill GEMM's own samples sat on that load) */
    const __m512i i16 = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_mullo_epi32(_mm512_min_epi32(i16, _mm512_set1_epi32(r1 - 1 - r)),
                              _mm512_set1_epi32((int32_t)rb));
}

VNNI512 static void store16(float *Y, size_t ldy, int j, int r, int nr, __m512 v, const float *bias,
                            int accumulate) {
    const __mmask16 m = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
    float *y = Y + (size_t)j * ldy + r;
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + r));
    else v = _mm512_add_ps(v, _mm512_setzero_ps());
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y), v);
    _mm512_mask_storeu_ps(y, m, v);
}

#define GEMM_CHUNK 128 /* inputs per pass over a group's tiles: acc stays in L1 */

INLINE_VNNI512 void gemm_body(const wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride,
                               int nb, const uint8_t *W, size_t rb, const float *bias, int in,
                               int r0, int r1, int accumulate) {
    _Alignas(64) float acc[GEMM_CHUNK * 16];
    kscales K;
    const int nblk = in / 32;
    for (int r = r0; r < r1; r += 16) {
        const uint8_t *rows[16];
        const __m512i offs = group_rows(W, rb, r, r1, rows);
        const uint8_t *base = W + (size_t)r * rb;
        for (int j0 = 0; j0 < nb; j0 += GEMM_CHUNK) {
            const int jn = nb - j0 < GEMM_CHUNK ? nb - j0 : GEMM_CHUNK;
            memset(acc, 0, sizeof(float) * 16 * (size_t)jn);
            for (int b = 0; b < nblk; b++) {
                tile16 T;
                tile_prep(t, &T, &K, offs, base, b);
                tile_inputs(t, &T, act + astride * (size_t)j0, astride, in, jn, b, acc);
            }
            for (int j = 0; j < jn; j++)
                store16(Y, ldy, j0 + j, r, r1 - r, _mm512_load_ps(acc + 16 * j), bias, accumulate);
        }
    }
}
/* Prefill / batches of Q8_0 and Q4_0: the 16-row tiles of a chunk of KC blocks are gathered
 * once into an L1 buffer (the vpdpbusd layout of tile_prep, 576 bytes a block), and the inputs
 * are regrouped once per call, NR at a time, so that a group's block is one record: NR x 32
 * bytes of q, NR scales and NR offset corrections (c s, c = -128 or -8). Each group then runs
 * a register tile of 16 rows x NR inputs over the chunk: per block the 8 weight registers are
 * loaded once and every input's 4-byte groups are broadcast against them (8 NR vpdpbusd on NR
 * independent chains), then per input the canonical step acc = fma(isum, d_w d_x, acc); the
 * float accumulators stay in registers across the chunk. */
#define KC 32
#define NR 10

typedef struct pack16 {
    __m512i w[8];
    __m512 d;
} pack16;

/* bytes of one input group's record per block */
static size_t grp_rec(int n) { return (size_t)n * 40; }

/* The regrouped inputs: groups of NR (the last one shorter), per group nblk records of
 * n x 32 q bytes, n float d, n int32 corrections. */
static size_t grouped_bytes(int nb, int in) { return (size_t)nb * ((size_t)in + (size_t)(in / 32) * 8); }

static void group_inputs(uint8_t *dst, const uint8_t *act, size_t astride, int nb, int in, int c, int nr,
                         uint32_t k0) {
    const int nblk = in / 32;
    for (int j0 = 0; j0 < nb; j0 += nr) {
        const int n = nb - j0 < nr ? nb - j0 : nr;
        for (int j = 0; j < n; j++) {
            const qact a = act_view(act + astride * (size_t)(j0 + j), in);
            uint8_t *r = dst;
            for (int b = 0; b < nblk; b++, r += grp_rec(n)) {
                memcpy(r + 32 * j, a.q + 32 * b, 32);
                memcpy(r + 32 * n + 4 * j, a.d + b, 4);
                const int32_t cs = (int32_t)((uint32_t)(c * a.s[b]) + k0);
                memcpy(r + 36 * n + 4 * j, &cs, 4);
            }
        }
        dst += grp_rec(n) * (size_t)nblk;
    }
}

/* The lanes of the group at row g that fall in [r0, r1) */
static inline __mmask16 group_lanes(int g, int r0, int r1) {
    const int lo = r0 > g ? r0 - g : 0, hi = r1 - g < 16 ? r1 - g : 16;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* store16 for the lanes m of the group at row g */
INLINE_VNNI512 void store16m(float *Y, size_t ldy, int j, int g, __mmask16 m, __m512 v,
                             const float *bias, int accumulate) {
    float *y = Y + (size_t)j * ldy + g;
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + g));
    else v = _mm512_add_ps(v, _mm512_setzero_ps());
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y), v);
    _mm512_mask_storeu_ps(y, m, v);
}

/* The bits of the float 1.5 * 2^23: an int32 n with |n| < 2^22 added to them reads, as a float,
 * 1.5 * 2^23 + n exactly, so subtracting 1.5 * 2^23 gives (float)n. A block's sum is under
 * 32 * 128 * 127 in size (Q8_0 at its widest; Q4_0 32 * 8 * 127), so both AVX-512 tiles start
 * its integer sums from these bits (added to the inputs' corrections by group_inputs) and turns
 * them into floats with a subtraction, which runs on port 5 beside the vpdpbusd of port 0, where
 * vcvtdq2ps would take a port-0 slot per input and block: the same value, so the same bits. */
#define TMAGIC 0x4B400000u
#define TMAGICF 12582912.0f

/* Where the last chunk of a row group leaves its sums: stored into Y (bias, accumulate) from the
 * registers as each input group finishes, so the stores drain while the next group computes
 * (stored from acc after the whole group, every input's line a miss, they stalled the store
 * buffer: 77% of gemm_t_512's own samples, 15% of the tile's, sat on that loop) */
typedef struct tile_dst {
    float *Y;
    size_t ldy;
    const float *bias;
    int g, accumulate;
    __mmask16 m;
} tile_dst;
/* A block's float step for both tiles: y[j] += (float)(sum j) * (d * dx[j]), the sums read
 * through the TMAGIC bits */
INLINE_VNNI512 void tile_block_fma(const int N, __m512 *y, const __m512i *s, __m512 d, const float *dx) {
    const __m512 mf = _mm512_set1_ps(TMAGICF);
    for (int j = 0; j < N; j++)
        y[j] = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_castsi512_ps(s[j]), mf),
                               _mm512_mul_ps(d, _mm512_set1_ps(dx[j])), y[j]);
}
/* The chunk's end for both tiles: into o's rows of Y (the last chunk), else into acc */
INLINE_VNNI512 void tile_chunk_end(const int N, const __m512 *y, float *acc, const tile_dst *o, int j0) {
    if (o)
        for (int j = 0; j < N; j++) store16m(o->Y, o->ldy, j0 + j, o->g, o->m, y[j], o->bias, o->accumulate);
    else
        for (int j = 0; j < N; j++) _mm512_store_ps(acc + 16 * j, y[j]);
}
/* y from acc (zero for the first chunk), the chunk's blocks, then into acc or into o's rows of Y
 * (the last chunk); the inputs' corrections carry TMAGIC (group_inputs) */
INLINE_VNNI512 void tile_run(const int N, const pack16 *P, int nbk, const uint8_t *rec, float *acc,
                             int first, const tile_dst *o, int j0) {
    __m512 y[NR];
    for (int j = 0; j < N; j++) y[j] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + 16 * j);
    for (int i = 0; i < nbk; i++, rec += 40 * N) {
        const __m512i w0 = P[i].w[0], w1 = P[i].w[1], w2 = P[i].w[2], w3 = P[i].w[3];
        const __m512i w4 = P[i].w[4], w5 = P[i].w[5], w6 = P[i].w[6], w7 = P[i].w[7];
        const int8_t *x = (const int8_t *)rec;
        const float *dx = (const float *)(rec + 32 * N);
        const int32_t *cs = (const int32_t *)(rec + 36 * N);
        __m512i s[NR];
        for (int j = 0; j < N; j++) s[j] = _mm512_set1_epi32(cs[j]);
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w0, bcast4(x + 32 * j));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w1, bcast4(x + 32 * j + 4));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w2, bcast4(x + 32 * j + 8));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w3, bcast4(x + 32 * j + 12));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w4, bcast4(x + 32 * j + 16));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w5, bcast4(x + 32 * j + 20));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w6, bcast4(x + 32 * j + 24));
        for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w7, bcast4(x + 32 * j + 28));
        tile_block_fma(N, y, s, P[i].d, dx);
    }
    tile_chunk_end(N, y, acc, o, j0);
}

VNNI512 static void tile_run_n(int n, const pack16 *P, int nbk, const uint8_t *rec, float *acc, int first,
                               const tile_dst *o, int j0) {
    switch (n) {
    case 1: tile_run(1, P, nbk, rec, acc, first, o, j0); break;
    case 2: tile_run(2, P, nbk, rec, acc, first, o, j0); break;
    case 3: tile_run(3, P, nbk, rec, acc, first, o, j0); break;
    case 4: tile_run(4, P, nbk, rec, acc, first, o, j0); break;
    case 5: tile_run(5, P, nbk, rec, acc, first, o, j0); break;
    case 6: tile_run(6, P, nbk, rec, acc, first, o, j0); break;
    case 7: tile_run(7, P, nbk, rec, acc, first, o, j0); break;
    case 8: tile_run(8, P, nbk, rec, acc, first, o, j0); break;
    case 9: tile_run(9, P, nbk, rec, acc, first, o, j0); break;
    default: tile_run(NR, P, nbk, rec, acc, first, o, j0); break;
    }
}

/* The chunk [b0, b0 + nbk) of 16 rows into P (Q8_0: bytes xor 0x80; Q4_0: nibbles). The rows'
 * bytes come in by plain loads (two rows a register for Q8_0, rows i + 8 in the upper half;
 * four for Q4_0, one a 128-bit lane) and are transposed to dwords by unpacks and one
 * two-source permute level: gathers, 8 or 4 a block, measured slower on this CPU (they were
 * 40% of the prefill GEMM's time at 44 inputs). The scales come from one gather a block. */
/* kind: 1 Q8_0, 0 Q4_0, 2 Q5_0 (Q4_0's nibbles, then each register's fifth bits: register k
 * holds values 4k..4k+3, whose bits are nibble k % 2 of byte k / 2 of each row's qh; that byte
 * copied to its row's 4 bytes and tested against bits 4 (k % 2) + m is the byte mask of 16s) */
INLINE_VNNI512 void pack_chunk(const int kind, pack16 *P, __m512i offs, const uint8_t *const rows[16], int b0, int nbk) {
    const int q8 = kind == 1;
    const __m512i m4 = _mm512_set1_epi8(15), flip = _mm512_set1_epi8((char)0x80);
    const __m512i lo_idx = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i hi_idx = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    const size_t bs = q8 ? 34 : kind == 2 ? 22 : 18;
    for (int i = 0; i < nbk; i++) {
        const size_t o = (size_t)(b0 + i) * bs + 2;
        if (q8) {
            __m512i in[8], t[8], u[8];
            for (int r = 0; r < 8; r++)
                in[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(rows[r] + o))),
                                           _mm256_loadu_si256((const __m256i *)(rows[r + 8] + o)), 1);
            for (int p = 0; p < 4; p++) {
                t[2 * p] = _mm512_unpacklo_epi32(in[2 * p], in[2 * p + 1]);
                t[2 * p + 1] = _mm512_unpackhi_epi32(in[2 * p], in[2 * p + 1]);
            }
            for (int h = 0; h < 2; h++) {
                u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
                u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
                u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
                u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
            }
            /* u[k] (k < 4): 128-bit lane 0 = rows 0-3 dword k, lane 1 = rows 0-3 dword k + 4, lanes
             * 2-3 the same for rows 8-11; u[4 + k] rows 4-7 and 12-15 */
            for (int k = 0; k < 4; k++) {
                P[i].w[k] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[k], lo_idx, u[4 + k]), flip);
                P[i].w[k + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[k], hi_idx, u[4 + k]), flip);
            }
        } else {
            __m512i in[4];
            const size_t oq = o + (kind == 2 ? 4 : 0); /* Q5_0: qs after qh */
            for (int p = 0; p < 4; p++) {
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(rows[p] + oq)));
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rows[p + 4] + oq)), 1);
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rows[p + 8] + oq)), 2);
                in[p] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rows[p + 12] + oq)), 3);
            }
            const __m512i t0 = _mm512_unpacklo_epi32(in[0], in[1]), t1 = _mm512_unpackhi_epi32(in[0], in[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(in[2], in[3]), t3 = _mm512_unpackhi_epi32(in[2], in[3]);
            const __m512i g[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                                  _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            for (int k = 0; k < 4; k++) {
                P[i].w[k] = _mm512_and_si512(g[k], m4);
                P[i].w[k + 4] = _mm512_and_si512(_mm512_srli_epi32(g[k], 4), m4);
            }
            if (kind == 2) {
                const __m512i h = gather32(offs, rows[0] + o), c16 = _mm512_set1_epi8(16);
                const __m512i pat0 = _mm512_set1_epi32(0x08040201), pat1 = _mm512_set1_epi32((int)0x80402010);
                for (int q = 0; q < 4; q++) { /* byte q of each row's qh: registers 2q, 2q + 1 */
                    const __m512i hb = _mm512_shuffle_epi8(h, _mm512_set4_epi32(0x01010101 * (12 + q), 0x01010101 * (8 + q),
                                                                            0x01010101 * (4 + q), 0x01010101 * q));
                    P[i].w[2 * q] = _mm512_mask_add_epi8(P[i].w[2 * q], _mm512_test_epi8_mask(hb, pat0), P[i].w[2 * q], c16);
                    P[i].w[2 * q + 1] = _mm512_mask_add_epi8(P[i].w[2 * q + 1], _mm512_test_epi8_mask(hb, pat1), P[i].w[2 * q + 1], c16);
                }
            }
        }
        P[i].d = gather_f16(offs, rows[0] + o - 2);
    }
}

/* Software prefetch of rows [ra, rb_) (clamped to r1) over bytes [off, off + len) of each. */
static inline void prefetch_rows(const uint8_t *W, size_t rb, int ra, int rz, int r1, size_t off, size_t len) {
    for (int r = ra; r < rz && r < r1; r++)
        for (size_t p = 0; p < len; p += 64) _mm_prefetch((const char *)W + (size_t)r * rb + off + p, _MM_HINT_T1);
}

INLINE_VNNI512 void gemm_tiles(const int kind, float *Y, size_t ldy, const uint8_t *grp, int nb,
                               const uint8_t *W, size_t rb, const float *bias, int in, int r0,
                               int r1, int accumulate, float *acc) {
    _Alignas(64) pack16 P[KC];
    const int nblk = in / 32, groups = (nb + NR - 1) / NR;
    const size_t bs = kind == 1 ? 34 : kind == 2 ? 22 : 18;
    for (int r = r0; r < r1; r += 16) {
        const uint8_t *rows[16];
        const __m512i offs = group_rows(W, rb, r, r1, rows);
        const tile_dst o = {Y, ldy, bias, r, accumulate, group_lanes(r, r, r1)};
        for (int b0 = 0; b0 < nblk; b0 += KC) {
            const int nbk = nblk - b0 < KC ? nblk - b0 : KC;
            pack_chunk(kind, P, offs, rows, b0, nbk);
            /* the next chunk (of these rows, or the first of the next rows) comes in while the
             * inputs run, a share of its rows beside each input group */
            const int nr = b0 + KC < nblk ? r : r + 16, nb0 = b0 + KC < nblk ? b0 + KC : 0;
            const size_t poff = (size_t)nb0 * bs, plen = (size_t)(nblk - nb0 < KC ? nblk - nb0 : KC) * bs;
            const uint8_t *g = grp;
            for (int j0 = 0, gi = 0; j0 < nb; j0 += NR, gi++) {
                const int n = nb - j0 < NR ? nb - j0 : NR;
                prefetch_rows(W, rb, nr + 16 * gi / groups, nr + 16 * (gi + 1) / groups, r1, poff, plen);
                tile_run_n(n, P, nbk, g + grp_rec(n) * (size_t)b0, acc + 16 * (size_t)j0, b0 == 0,
                           b0 + nbk >= nblk ? &o : NULL, j0);
                g += grp_rec(n) * (size_t)nblk;
            }
        }
    }
}


VNNI512 static int ktile_512(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride,
                             int nb, const uint8_t *W, size_t rb, const float *bias, int in,
                             int r0, int r1, int accumulate);
AVX2 static void gemm_q_avx2(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride, int nb,
                            const uint8_t *W, size_t rb, const float *bias, int in, int r0, int r1,
                            int accumulate);
VNNI512 static void gemm_q_512(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride,
                               int nb, const uint8_t *W, size_t rb, const float *bias, int in,
                               int r0, int r1, int accumulate) {
    if (t == WB_QT_Q5_K) { /* the AVX2 kernels: the same FMA chain (no 16-row Q5_K form yet) */
        gemm_q_avx2(t, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate);
        return;
    }
    if ((t == WB_QT_Q8_0 || t == WB_QT_Q4_0 || t == WB_QT_Q5_0) && nb >= 2) {
        const size_t gb = (grouped_bytes(nb, in) + 63) & ~(size_t)63;
        uint8_t *grp = qscratch(1, gb + 64 * (size_t)nb);
        if (grp) { /* (without the memory: the tile kernel below, the same sums) */
            const int q8 = t == WB_QT_Q8_0;
            group_inputs(grp, act, astride, nb, in, q8 ? -128 : t == WB_QT_Q5_0 ? -16 : -8, NR, TMAGIC);
            float *acc = (float *)(grp + gb);
            if (q8) gemm_tiles(1, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
            else if (t == WB_QT_Q5_0) gemm_tiles(2, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
            else gemm_tiles(0, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
            return;
        }
    }
    /* Q4_K / Q6_K prompts: the transposed 16-row tile (without its scratch, the copies below) */
    if ((t == WB_QT_Q4_K || t == WB_QT_Q6_K) && nb >= 8 && r1 - r0 >= 16 &&
        ktile_512(t, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate))
        return;
    switch (t) { /* one specialised copy per type */
    case WB_QT_Q8_0: gemm_body(WB_QT_Q8_0, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate); break;
    case WB_QT_Q4_0: gemm_body(WB_QT_Q4_0, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate); break;
    case WB_QT_Q4_K: gemm_body(WB_QT_Q4_K, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate); break;
    case WB_QT_Q6_K: gemm_body(WB_QT_Q6_K, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate); break;
    default: { /* Q5_0, IQ4_NL, Q4_1, Q5_1 (gemm_act gives them Q8_0 rows; here only without the
                * memory): per-row dots */
        const qdot_fn dot = t == WB_QT_IQ4_NL ? dot_iq4_nl_vnni512
                            : t == WB_QT_Q4_1 ? dot_q4_1_vnni512
                            : t == WB_QT_Q5_1 ? dot_q5_1_vnni512
                                              : dot_q5_0_vnni512;
        for (int r = r0; r < r1; r++)
            for (int j = 0; j < nb; j++) {
                const qact a = act_view(act + astride * (size_t)j, in);
                const float s = dot(W + (size_t)r * rb, &a, in / 32) + (bias ? bias[r] : 0.0f);
                float *yp = Y + (size_t)j * ldy + r;
                *yp = accumulate ? *yp + s : s;
            }
        break;
    }
    }
}



/* ------------------------------------------------------- the 16-row tile layout, AVX-512
 *
 * Q8_0 / Q4_0 matrices kept from load in the tile layout of quant.h (wb_quant_to_tiles): a
 * block of 16 rows is the registers tile_run multiplies (before Q8_0's xor) followed by the 16
 * scales. The prefill tile reads them with plain loads (no transpose), and decode gets the 16
 * rows' sums in the lanes of one register (no folds, no scale gather). The integer sums and the
 * float chain are the file layout's, so the same bits. */
/* kind (the q8 argument below): 1 Q8_0, 0 Q4_0, 2 Q5_0 */
#define TQ(q8) ((q8) == 1 ? 512 : (q8) == 2 ? 320 : 256) /* bytes of a tile block's values */
#define TB(q8) ((q8) == 1 ? 544 : (q8) == 2 ? 352 : 288) /* bytes of a tile block: 16 rows' blocks */

/* Q5_0's register k: Q4_0's nibbles from the qs groups (after the qh group), and the fifth bits
 * as pack_chunk makes them (byte k / 2 of each row's qh to its 4 bytes, bits 4 (k % 2) + m) */
INLINE_VNNI512 __m512i tile_reg(const int q8, const uint8_t *p, int k) {
    if (q8 == 1) return _mm512_loadu_si512(p + 64 * k); /* stored as q xor 0x80 */
    const __m512i m4 = _mm512_set1_epi8(15);
    if (q8 == 2) {
        const __m512i g = _mm512_loadu_si512(p + 64 * (1 + (k & 3)));
        const __m512i v = _mm512_and_si512(k < 4 ? g : _mm512_srli_epi32(g, 4), m4);
        const int q = k / 2;
        const __m512i hb = _mm512_shuffle_epi8(_mm512_loadu_si512(p),
                                               _mm512_set4_epi32(0x01010101 * (12 + q), 0x01010101 * (8 + q),
                                                                 0x01010101 * (4 + q), 0x01010101 * q));
        const __mmask64 h = _mm512_test_epi8_mask(hb, _mm512_set1_epi32(k & 1 ? (int)0x80402010 : 0x08040201));
        return _mm512_mask_add_epi8(v, h, v, _mm512_set1_epi8(16));
    }
    const __m512i g = _mm512_loadu_si512(p + 64 * (k & 3));
    return _mm512_and_si512(k < 4 ? g : _mm512_srli_epi32(g, 4), m4);
}


/* tile_run over tile-layout blocks T (TB bytes each) instead of packed ones: y from acc (zero
 * for the first chunk), into acc, or into o's rows of Y (the last chunk) */
INLINE_VNNI512 void tile_run_t(const int q8, const int N, const uint8_t *T, int nbk, const uint8_t *rec,
                               float *acc, int first, const tile_dst *o, int j0, const char *pf, int lpb,
                               int pfl) {
    __m512 y[NR];
    for (int j = 0; j < N; j++) y[j] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + 16 * j);
    for (int i = 0; i < nbk; i++, rec += 40 * N, T += TB(q8)) {
        for (int l = i * lpb; l < (i + 1) * lpb && l < pfl; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T1);
        const int8_t *x = (const int8_t *)rec;
        const float *dx = (const float *)(rec + 32 * N);
        const int32_t *cs = (const int32_t *)(rec + 36 * N); /* corrections + TMAGIC */
        __m512i s[NR];
        for (int j = 0; j < N; j++) s[j] = _mm512_set1_epi32(cs[j]);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m512i w = tile_reg(q8, T, k);
            for (int j = 0; j < N; j++) s[j] = _mm512_dpbusd_epi32(s[j], w, bcast4(x + 32 * j + 4 * k));
        }
        tile_block_fma(N, y, s, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(T + TQ(q8)))), dx);
    }
    tile_chunk_end(N, y, acc, o, j0);
}

#define TILE_RUN_T_N(Q8)                                                                          \
    VNNI512 static void tile_run_t_n##Q8(int n, const uint8_t *T, int nbk, const uint8_t *rec,     \
                                         float *acc, int first, const tile_dst *o, int j0,        \
                                         const char *pf, int lpb, int pfl) {                      \
        switch (n) {                                                                              \
        case 1: tile_run_t(Q8, 1, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 2: tile_run_t(Q8, 2, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 3: tile_run_t(Q8, 3, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 4: tile_run_t(Q8, 4, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 5: tile_run_t(Q8, 5, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 6: tile_run_t(Q8, 6, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 7: tile_run_t(Q8, 7, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 8: tile_run_t(Q8, 8, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        case 9: tile_run_t(Q8, 9, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;           \
        default: tile_run_t(Q8, NR, T, nbk, rec, acc, first, o, j0, pf, lpb, pfl); break;         \
        }                                                                                         \
    }
TILE_RUN_T_N(0)
TILE_RUN_T_N(1)
TILE_RUN_T_N(2)

/* Prefill / batches from the tile layout: gemm_tiles without the packing. A group's blocks
 * are one linear stream; the next chunk is prefetched in shares, one per input group, and each
 * share a few lines per block inside the tile (all of a share at once stalled on the line fill
 * buffers: 8% of gemm_t_512's samples sat behind those prefetches in a 44-token prefill). grp
 * from group_inputs in groups of gs inputs (the last shorter) with TMAGIC added to the corrections. */
INLINE_VNNI512 void gemm_tiles_t(const int q8, float *Y, size_t ldy, const uint8_t *grp, int nb,
                                 const uint8_t *W, size_t rb, const float *bias, int in, int r0,
                                 int r1, int accumulate, float *acc, int gs) {
    const int nblk = in / 32, groups = (nb + gs - 1) / gs;
    const size_t gbytes = 16 * rb, end = (size_t)((r1 + 15) & ~15) * rb;
    for (int g = r0 & ~15; g < r1; g += 16) {
        const uint8_t *T = W + (size_t)(g / 16) * gbytes;
        const tile_dst o = {Y, ldy, bias, g, accumulate, group_lanes(g, r0, r1)};
        for (int b0 = 0; b0 < nblk; b0 += KC) {
            const int nbk = nblk - b0 < KC ? nblk - b0 : KC;
            const tile_dst *dst = b0 + nbk >= nblk ? &o : NULL;
            /* the next chunk: the bytes after this one (of this group or the next) */
            const size_t pstart = (size_t)(T - W) + (size_t)(b0 + nbk) * TB(q8);
            const size_t plen = (size_t)KC * TB(q8);
            const uint8_t *gp = grp;
            for (int j0 = 0, gi = 0; j0 < nb; j0 += gs, gi++) {
                const int n = nb - j0 < gs ? nb - j0 : gs;
                const size_t a = pstart + plen * (size_t)gi / (size_t)groups,
                             z = pstart + plen * (size_t)(gi + 1) / (size_t)groups;
                const size_t zz = z < end ? z : end, aa = a & ~(size_t)63;
                const int pfl = zz > aa ? (int)((zz - aa + 63) / 64) : 0;
                const int lpb = (pfl + nbk - 1) / nbk; /* spread over the blocks: a burst stalled */
                const char *pf = (const char *)W + (pfl ? aa : 0);
                const uint8_t *tb = T + (size_t)b0 * TB(q8), *rec = gp + grp_rec(n) * (size_t)b0;
                float *ac = acc + 16 * (size_t)j0;
                if (q8 == 1) tile_run_t_n1(n, tb, nbk, rec, ac, b0 == 0, dst, j0, pf, lpb, pfl);
                else if (q8 == 2) tile_run_t_n2(n, tb, nbk, rec, ac, b0 == 0, dst, j0, pf, lpb, pfl);
                else tile_run_t_n0(n, tb, nbk, rec, ac, b0 == 0, dst, j0, pf, lpb, pfl);
                gp += grp_rec(n) * (size_t)nblk;
            }
        }
    }
}

/* Decode from the tile layout: per block 8 (Q8_0) or 4 (Q4_0) register loads, vpdpbusd against
 * the input's dwords broadcast, the sums of the 16 rows in lanes; the block's 16 scales are one
 * load. Two integer chains per block (even and odd dwords), added: the same exact sum. The
 * weights are one linear stream per thread, left to the hardware prefetchers unless
 * qgemv_prefetch (cpu.h) asks for the next group to be prefetched as the kernel goes: on Zen 4,
 * on the 64-byte aligned store, that prefetch made Q8_0 10-22% slower and Q4_0 / Q5_0 2-10%
 * (docs/performance.md Session 18). */
INLINE_VNNI512 void gemv_t_body(const int q8, float *Y, const uint8_t *act, const uint8_t *W,
                                size_t rb, const float *bias, int in, int r0, int r1, int accumulate) {
    const qact a = act_view(act, in);
    const int nblk = in / 32, corr = q8 == 1 ? -128 : q8 == 2 ? -16 : -8;
    const size_t gbytes = 16 * rb;
    /* with the prefetch off (cpu.h qgemv_prefetch), end 0 skips it */
    const size_t end = wb_cpu()->qgemv_prefetch ? (size_t)((r1 + 15) & ~15) * rb : 0;
    for (int g = r0 & ~15; g < r1; g += 16) {
        const uint8_t *T = W + (size_t)(g / 16) * gbytes;
        const size_t pf = (size_t)(T - W) + gbytes; /* the next group, one block per block */
        __m512 y = _mm512_setzero_ps();
        for (int b = 0; b < nblk; b++, T += TB(q8)) {
            const size_t pb = pf + (size_t)b * TB(q8);
            if (pb < end) {
                const char *pp = (const char *)W + pb;
                for (int l = 0; l < (TB(q8) + 63) / 64; l++) _mm_prefetch(pp + 64 * l, _MM_HINT_T0);
            }
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(T + TQ(q8))));
            const int8_t *x = a.q + 32 * b;
            __m512i s0 = _mm512_set1_epi32(corr * a.s[b]), s1 = _mm512_setzero_si512();
            for (int k = 0; k < 8; k += 2) {
                s0 = _mm512_dpbusd_epi32(s0, tile_reg(q8, T, k), bcast4(x + 4 * k));
                s1 = _mm512_dpbusd_epi32(s1, tile_reg(q8, T, k + 1), bcast4(x + 4 * k + 4));
            }
            y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                                _mm512_mul_ps(dw, _mm512_set1_ps(a.d[b])), y);
        }
        store16m(Y, 0, 0, g, group_lanes(g, r0, r1), y, bias, accumulate);
    }
}

VNNI512 static void gemv_t_512(wb_qtype t, float *Y, const uint8_t *act, const uint8_t *W, size_t rb,
                               const float *bias, int in, int r0, int r1, int accumulate) {
    if (t == WB_QT_Q8_0) gemv_t_body(1, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else if (t == WB_QT_Q5_0) gemv_t_body(2, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else gemv_t_body(0, Y, act, W, rb, bias, in, r0, r1, accumulate);
}

/* NULL when the scratch cannot be had: the caller then reads the tiles row by row */
VNNI512 static int gemm_t_512(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride,
                              int nb, const uint8_t *W, size_t rb, const float *bias, int in,
                              int r0, int r1, int accumulate) {
    const size_t gb = (grouped_bytes(nb, in) + 63) & ~(size_t)63;
    uint8_t *grp = qscratch(1, gb + 64 * (size_t)nb);
    if (!grp) return 0;
    const int q8 = t == WB_QT_Q8_0, ng = (nb + NR - 1) / NR, gs = (nb + ng - 1) / ng;
    /* as few groups as of NR, evened out (44 inputs: 9, 9, 9, 9, 8, not 10, 10, 10, 10, 4, whose
     * last paid a block's weight loads, scales and loop for 4 inputs) */
    group_inputs(grp, act, astride, nb, in, q8 ? -128 : t == WB_QT_Q5_0 ? -16 : -8, gs, TMAGIC);
    float *acc = (float *)(grp + gb);
    if (q8) gemm_tiles_t(1, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc, gs);
    else if (t == WB_QT_Q5_0) gemm_tiles_t(2, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc, gs);
    else gemm_tiles_t(0, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc, gs);
    return 1;
}

/* The inputs of a prompt phase grouped once (wb_quant_group_act): gemm_t_512's regrouped
 * records, written straight from the float rows by the threads that quantize them (each row's
 * blocks quantized 512 values at a time, as quantize_act_512 does, so the same bytes), so the
 * phase's matrices and both threads read one copy instead of regrouping every input per matrix
 * and thread (7 times a layer on a thread: gemm_t_512's own 3-4% of a prefill). */
static int group_size(int nb) {
    const int ng = (nb + NR - 1) / NR;
    return (nb + ng - 1) / ng;
}

VNNI512 static void group_act_512(wb_qtype t, uint8_t *grp, const float *X, size_t ldx, int nb, int in,
                                  int j0, int j1) {
    const int nblk = in / 32, gs = group_size(nb), c = t == WB_QT_Q8_0 ? -128 : t == WB_QT_Q5_0 ? -16 : -8;
    _Alignas(64) uint8_t tmp[512 + 16 * 12 + 64];
    for (int j = j0; j < j1; j++) {
        const int gi = j / gs, jj = j % gs, n = nb - gi * gs < gs ? nb - gi * gs : gs;
        uint8_t *r = grp + grp_rec(gs) * (size_t)nblk * (size_t)gi;
        for (int b0 = 0; b0 < nblk; b0 += 16) {
            const int k = nblk - b0 < 16 ? nblk - b0 : 16;
            quantize_act_512(tmp, X + (size_t)j * ldx + 32 * (size_t)b0, 32 * k);
            const qact a = act_view(tmp, 32 * k);
            for (int b = 0; b < k; b++, r += grp_rec(n)) {
                memcpy(r + 32 * jj, a.q + 32 * b, 32);
                memcpy(r + 32 * n + 4 * jj, a.d + b, 4);
                const int32_t cs = (int32_t)((uint32_t)(c * a.s[b]) + TMAGIC);
                memcpy(r + 36 * n + 4 * jj, &cs, 4);
            }
        }
    }
}

/* gemm_t_512 over inputs grouped by group_act_512; with no scratch for the row group's sums,
 * a few input groups at a time from the stack (the same chains, so the same bits) */
VNNI512 static void gemm_tg_512(wb_qtype t, float *Y, size_t ldy, const uint8_t *grp, int nb,
                                const uint8_t *W, size_t rb, const float *bias, int in, int r0,
                                int r1, int accumulate) {
    const int q8 = t == WB_QT_Q8_0, gs = group_size(nb), nblk = in / 32;
    _Alignas(64) float local[16 * NR * 8];
    float *acc = qscratch(1, 64 * (size_t)nb);
    int per = nb;
    if (!acc) acc = local, per = 8 * gs;
    for (int j = 0; j < nb; j += per) {
        const int m = nb - j < per ? nb - j : per;
        const uint8_t *g = grp + grp_rec(gs) * (size_t)nblk * (size_t)(j / gs);
        if (q8) gemm_tiles_t(1, Y + (size_t)j * ldy, ldy, g, m, W, rb, bias, in, r0, r1, accumulate, acc, gs);
        else if (t == WB_QT_Q5_0) gemm_tiles_t(2, Y + (size_t)j * ldy, ldy, g, m, W, rb, bias, in, r0, r1, accumulate, acc, gs);
        else gemm_tiles_t(0, Y + (size_t)j * ldy, ldy, g, m, W, rb, bias, in, r0, r1, accumulate, acc, gs);
    }
}
/* ------------------------------------------------------------------ AVX2 tile GEMM
 *
 * Batches and prefill on the AVX2 level, Q8_0 and Q4_0: the AVX-512 scheme at 8 rows (one row
 * per lane of a 256-bit register). A chunk of KC blocks of 8 rows is transposed once into the
 * dword layout (register k = values 4k..4k+3 of every row; loads and unpacks, no gathers), and
 * register tiles broadcast each input's 4-byte groups against it: with maddubs two such packs,
 * 16 rows x NR16 inputs (gemm_tiles16), with AVX-VNNI 8 rows x NR2 (gemm_tiles8_avxvnni). The
 * integer sums are
 * the per-row dots' (maddubs: |w| against x with w's sign for Q8_0, nibbles against x for Q4_0,
 * whose 8 int16 pair sums stay below 2^15; AVX-VNNI: vpdpbusd), and the float chain is theirs,
 * so every variant still gives a row in a batch the bits it gets alone. */
#define NR2 6

typedef struct pack8 {
    __m256i w[8]; /* Q8_0: |w| (maddubs) or w xor 0x80 (vpdpbusd); Q4_0: nibbles */
    __m256i s[8]; /* Q8_0 maddubs: w, for the signs */
    __m256 d;
} pack8;

/* 8 x 8 dwords: in[i] = row i's dwords 0-7 -> out[k] = dword k of rows 0-7 */
AVX2 static inline void transpose8(const __m256i in[8], __m256i out[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3 (h = 0) and 4-7 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        out[k + 4] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

/* kind: 0 Q8_0 maddubs, 1 Q8_0 vpdpbusd, 2 Q4_0 (either) */
AVX2 static inline __attribute__((always_inline)) void pack_chunk8(const int kind, pack8 *P, const uint8_t *const rows[8], int b0, int nbk) {
    const size_t bs = kind == 2 ? 18 : 34;
    const __m256i m4 = _mm256_set1_epi8(15), flip = _mm256_set1_epi8((char)0x80);
    for (int i = 0; i < nbk; i++) {
        const size_t o = (size_t)(b0 + i) * bs;
        __m256i in[8], g[8];
        _Alignas(16) uint16_t hs[8];
        for (int r = 0; r < 8; r++) hs[r] = rd16(rows[r] + o);
        P[i].d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)hs));
        if (kind == 2) { /* 4 dwords a row: rows i and i + 4 share a register, 4 x 4 per lane */
            for (int r = 0; r < 4; r++)
                in[r] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(rows[r + 4] + o + 2)),
                                         _mm_loadu_si128((const __m128i *)(rows[r] + o + 2)));
            const __m256i t0 = _mm256_unpacklo_epi32(in[0], in[1]), t1 = _mm256_unpackhi_epi32(in[0], in[1]);
            const __m256i t2 = _mm256_unpacklo_epi32(in[2], in[3]), t3 = _mm256_unpackhi_epi32(in[2], in[3]);
            g[0] = _mm256_unpacklo_epi64(t0, t2), g[1] = _mm256_unpackhi_epi64(t0, t2);
            g[2] = _mm256_unpacklo_epi64(t1, t3), g[3] = _mm256_unpackhi_epi64(t1, t3);
            for (int k = 0; k < 4; k++) {
                P[i].w[k] = _mm256_and_si256(g[k], m4);
                P[i].w[k + 4] = _mm256_and_si256(_mm256_srli_epi32(g[k], 4), m4);
            }
        } else {
            for (int r = 0; r < 8; r++) in[r] = _mm256_loadu_si256((const __m256i *)(rows[r] + o + 2));
            transpose8(in, g);
            for (int k = 0; k < 8; k++) {
                if (kind == 0) P[i].w[k] = _mm256_sign_epi8(g[k], g[k]), P[i].s[k] = g[k];
                else P[i].w[k] = _mm256_xor_si256(g[k], flip);
            }
        }
    }
}

AVX2 static inline __m256i bcast4_256(const int8_t *p) {
    return _mm256_set1_epi32((int32_t)((uint32_t)(uint8_t)p[0] | (uint32_t)(uint8_t)p[1] << 8 |
                                       (uint32_t)(uint8_t)p[2] << 16 | (uint32_t)(uint8_t)p[3] << 24));
}

/* acc[j] (8 rows) over the chunk, inputs j < N of a group record stream (grp_rec(N) a block) */
/* Q4_K / Q6_K prompts of 8 inputs or more on the AVX2 level: 8 rows at a time, lane i row i, as
 * the Q4_0 tile below. Each block's values of the 8 rows are transposed once (register k: values
 * 4k..4k+3 of every row) and multiplied by every input's 4-byte groups broadcast, so no fold is
 * needed; each input's float chain (the canonical one of its row, lane by lane) waits in acc[j]
 * between blocks. The inputs are first regrouped block by block (read with a stride of one input
 * row, each input cost a line of values and two of scales per block: half the speed at 268).
 * Q4_K's eight 16-bit pair sums of a block add without overflow (8 x 2 x 15 x 127 = 30480)
 * before one widening madd; Q5_K's (2 x 31 x 127 each) four at a time (31496), Q6_K's (2 x 63
 * x 127 each) two at a time, per half. */
AVX2 static inline __m256i kbcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
AVX2 static inline __m256i q4k_isum_avx2(const __m256i R[8], const int8_t *x) {
    __m256i s = _mm256_maddubs_epi16(R[0], kbcast4(x));
    for (int k = 1; k < 8; k++) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(R[k], kbcast4(x + 4 * k)));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}
AVX2 static inline __m256i q5k_isum_avx2(const __m256i R[8], const int8_t *x) {
    __m256i a = _mm256_maddubs_epi16(R[0], kbcast4(x)), b = _mm256_maddubs_epi16(R[4], kbcast4(x + 16));
    for (int k = 1; k < 4; k++) {
        a = _mm256_add_epi16(a, _mm256_maddubs_epi16(R[k], kbcast4(x + 4 * k)));
        b = _mm256_add_epi16(b, _mm256_maddubs_epi16(R[k + 4], kbcast4(x + 16 + 4 * k)));
    }
    const __m256i one = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_madd_epi16(a, one), _mm256_madd_epi16(b, one));
}
AVX2 static inline __m256i q6k_half_avx2(const __m256i R[4], const int8_t *x) {
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(R[0], kbcast4(x)), _mm256_maddubs_epi16(R[1], kbcast4(x + 4)));
    const __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(R[2], kbcast4(x + 8)), _mm256_maddubs_epi16(R[3], kbcast4(x + 12)));
    return _mm256_add_epi32(_mm256_madd_epi16(a, one), _mm256_madd_epi16(b, one));
}
AVXVNNI static inline __m256i q4k_isum_avxvnni(const __m256i R[8], const int8_t *x) {
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) s = _mm256_dpbusd_avx_epi32(s, R[k], kbcast4(x + 4 * k));
    return s;
}
#define q5k_isum_avxvnni q4k_isum_avxvnni /* int32 accumulation: no int16 bound */
AVXVNNI static inline __m256i q6k_half_avxvnni(const __m256i R[4], const int8_t *x) {
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) s = _mm256_dpbusd_avx_epi32(s, R[k], kbcast4(x + 4 * k));
    return s;
}

/* The K tiles' inputs regrouped by block: for block b and input j (o = b * nb + j) its 32 values
 * at xg + 32 o, d at dg[o], then Q4_K's (float)-s at mg[o] or Q6_K's 32 h pair at g0/g1[o] (the
 * same memory as mg), so the tiles' input loop reads one stream instead of a line per input row */
static void kregroup(int q4k, const uint8_t *act, size_t astride, int nb, int in, int8_t *xg,
                     float *dg, float *mg, int32_t *g0, int32_t *g1) {
    for (int j = 0; j < nb; j++) {
        const qact a = act_view(act + astride * (size_t)j, in);
        for (int b = 0; b < in / 32; b++) {
            const size_t o = (size_t)b * nb + j;
            memcpy(xg + 32 * o, a.q + 32 * b, 32);
            dg[o] = a.d[b];
            if (q4k) mg[o] = (float)(-a.s[b]);
            else g0[o] = 32 * a.h[2 * b], g1[o] = 32 * a.h[2 * b + 1];
        }
    }
}

#define DEFINE_KTILE_256(SUFFIX, ATTR)                                                            \
    /* nb inputs, r1 - r0 >= 8; 0 without scratch; t a constant where it is inlined */           \
    ATTR static inline __attribute__((always_inline)) int ktile_body_##SUFFIX(                    \
        const wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride, int nb,       \
        const uint8_t *W, size_t rb, const float *bias, int in, int r0, int r1, int accumulate) { \
        const int nblk = in / 32, q4k = t != WB_QT_Q6_K; /* Q4_K and Q5_K: scales and mins */    \
        const size_t bs = KBYTES(t), nx = (size_t)nblk * nb;                                      \
        /* acc [nb][8]; then the inputs regrouped by block (the 32 values of every input, block \
         * after block) and per block and input d, then Q4_K's (float)-s or Q6_K's 32 h pair, so \
         * the input loop reads one stream instead of a line per input row */                   \
        float *acc = qscratch(1, (size_t)nb * 8 * sizeof(float) + nx * (32 + 3 * sizeof(float)));  \
        if (!acc) return 0;                                                                       \
        int8_t *xg = (int8_t *)(acc + (size_t)nb * 8);                                            \
        float *dg = (float *)(void *)(xg + 32 * nx), *mg = dg + nx;                               \
        int32_t *g0 = (int32_t *)(void *)mg, *g1 = g0 + nx;                                       \
        kregroup(q4k, act, astride, nb, in, xg, dg, mg, g0, g1);                                  \
        for (int r = r0; r < r1; r += 8) {                                                        \
            const int rr = r1 - r < 8 ? r1 - 8 : r, keep = r - rr; /* the last 8 end at r1 */     \
            memset(acc, 0, (size_t)nb * 8 * sizeof(float));                                       \
            for (int sb = 0; sb < nblk / 8; sb++) {                                               \
                const uint8_t *blk[8];                                                            \
                for (int i = 0; i < 8; i++) blk[i] = W + (size_t)(rr + i) * rb + (size_t)sb * bs; \
                __m256i H[4];                                                                     \
                __m256 d, dmin;                                                                   \
                ksuper_scales(q4k, blk, H, &d, &dmin);                                            \
                for (int bb = 0; bb < 8; bb++) {                                                  \
                    const int b = 8 * sb + bb;                                                    \
                    __m256i V[8], R[8];                                                           \
                    for (int i = 0; i < 8; i++) V[i] = k_values(t, blk[i], bb);                   \
                    transpose8(V, R);                                                             \
                    /* Q4_K: d sc and dmin m per row; Q6_K: d sc16 of each half */               \
                    const __m256 s0 = _mm256_mul_ps(d, q4k ? q4k_lane_scale(H[1], H[3], bb, 0) : q6k_lane_scale(H, 2 * bb)); \
                    const __m256 s1 = q4k ? _mm256_mul_ps(dmin, q4k_lane_scale(H[2], H[3], bb, 1))  \
                                          : _mm256_mul_ps(d, q6k_lane_scale(H, 2 * bb + 1));       \
                    for (int j = 0; j < nb; j++) {                                                \
                        const size_t o = (size_t)b * nb + j;                                      \
                        const int8_t *x = xg + 32 * o;                                            \
                        const __m256 dx = _mm256_set1_ps(dg[o]);                                  \
                        __m256 y = _mm256_load_ps(acc + 8 * (size_t)j);                           \
                        if (q4k) {                                                                \
                            const __m256i is = t == WB_QT_Q5_K ? q5k_isum_##SUFFIX(R, x) : q4k_isum_##SUFFIX(R, x); \
                            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(s0, dx), y); \
                            y = _mm256_fmadd_ps(_mm256_set1_ps(mg[o]), _mm256_mul_ps(s1, dx), y); \
                        } else {                                                                  \
                            const __m256i lo = _mm256_sub_epi32(q6k_half_##SUFFIX(R, x), _mm256_set1_epi32(g0[o])); \
                            const __m256i hi = _mm256_sub_epi32(q6k_half_##SUFFIX(R + 4, x + 16),  \
                                                                _mm256_set1_epi32(g1[o]));         \
                            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_mul_ps(s0, dx), y); \
                            y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_mul_ps(s1, dx), y); \
                        }                                                                         \
                        _mm256_store_ps(acc + 8 * (size_t)j, y);                                  \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            for (int j = 0; j < nb; j++)                                                          \
                for (int i = keep; i < 8; i++) {                                                  \
                    const float s = acc[8 * (size_t)j + i] + (bias ? bias[rr + i] : 0.0f);        \
                    float *yp = Y + (size_t)j * ldy + rr + i;                                     \
                    *yp = accumulate ? *yp + s : s;                                               \
                }                                                                                 \
        }                                                                                         \
        return 1;                                                                                 \
    }                                                                                             \
    ATTR static int ktile_##SUFFIX(wb_qtype t, float *Y, size_t ldy, const uint8_t *act,         \
                                   size_t astride, int nb, const uint8_t *W, size_t rb,           \
                                   const float *bias, int in, int r0, int r1, int accumulate) {   \
        return t == WB_QT_Q4_K ? ktile_body_##SUFFIX(WB_QT_Q4_K, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate) \
             : t == WB_QT_Q5_K ? ktile_body_##SUFFIX(WB_QT_Q5_K, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate) \
                               : ktile_body_##SUFFIX(WB_QT_Q6_K, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate); \
    }
DEFINE_KTILE_256(avx2, AVX2)
DEFINE_KTILE_256(avxvnni, AVXVNNI)

/* Q4_K / Q6_K prompts of 8 inputs or more on the AVX-512 level: ktile above with 16 rows in the
 * lanes of one 512-bit register, so each 4-byte group of an input broadcast feeds 16 rows in one
 * vpdpbusd (the AVX2 form feeds 8). A block's values of the 16 rows are transposed as two halves
 * of 8 rows (the AVX2 transpose) joined per register, and the super-block scales are the AVX2
 * ones of each half joined: both are paid once per block and row group, not per input. The
 * float chain of each lane is its row's and input's canonical one (the same bits as the per-row
 * dots and the AVX2 tile). */
VNNI512 static inline __m512 join8_ps(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}
VNNI512 static inline __m512i join8_si(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
VNNI512 static inline __m512i kbcast4_512(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
/* nb inputs, r1 - r0 >= 16; 0 without scratch */
VNNI512 static int ktile_512(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride,
                             int nb, const uint8_t *W, size_t rb, const float *bias, int in,
                             int r0, int r1, int accumulate) {
    const int nblk = in / 32, q4k = t == WB_QT_Q4_K;
    const size_t bs = q4k ? 144 : 210, nx = (size_t)nblk * nb;
    /* acc [nb][16], then the regrouped inputs as in ktile */
    float *acc = qscratch(1, (size_t)nb * 16 * sizeof(float) + nx * (32 + 3 * sizeof(float)));
    if (!acc) return 0;
    int8_t *xg = (int8_t *)(acc + (size_t)nb * 16);
    float *dg = (float *)(void *)(xg + 32 * nx), *mg = dg + nx;
    int32_t *g0 = (int32_t *)(void *)mg, *g1 = g0 + nx;
    kregroup(q4k, act, astride, nb, in, xg, dg, mg, g0, g1);
    for (int r = r0; r < r1; r += 16) {
        const int rr = r1 - r < 16 ? r1 - 16 : r, keep = r - rr; /* the last 16 end at r1 */
        memset(acc, 0, (size_t)nb * 16 * sizeof(float));
        for (int sb = 0; sb < nblk / 8; sb++) {
            const uint8_t *blk[16];
            for (int i = 0; i < 16; i++) blk[i] = W + (size_t)(rr + i) * rb + (size_t)sb * bs;
            __m256i H0[4], H1[4];
            __m256 d0, d1, m0, m1;
            ksuper_scales(q4k, blk, H0, &d0, &m0);
            ksuper_scales(q4k, blk + 8, H1, &d1, &m1);
            for (int bb = 0; bb < 8; bb++) {
                const int b = 8 * sb + bb;
                __m256i V[16], T0[8], T1[8];
                for (int i = 0; i < 16; i++)
                    V[i] = q4k ? q4k_nibbles(blk[i] + 16 + 32 * (bb / 2), bb & 1) : q6_values(blk[i], bb);
                transpose8(V, T0);
                transpose8(V + 8, T1);
                __m512i R[8];
                for (int k = 0; k < 8; k++) R[k] = join8_si(T0[k], T1[k]);
                /* Q4_K: d sc and dmin m per row; Q6_K: d sc16 of each half */
                const __m512 s0 = q4k ? join8_ps(_mm256_mul_ps(d0, q4k_lane_scale(H0[1], H0[3], bb, 0)),
                                                 _mm256_mul_ps(d1, q4k_lane_scale(H1[1], H1[3], bb, 0)))
                                      : join8_ps(_mm256_mul_ps(d0, q6k_lane_scale(H0, 2 * bb)),
                                                 _mm256_mul_ps(d1, q6k_lane_scale(H1, 2 * bb)));
                const __m512 s1 = q4k ? join8_ps(_mm256_mul_ps(m0, q4k_lane_scale(H0[2], H0[3], bb, 1)),
                                                 _mm256_mul_ps(m1, q4k_lane_scale(H1[2], H1[3], bb, 1)))
                                      : join8_ps(_mm256_mul_ps(d0, q6k_lane_scale(H0, 2 * bb + 1)),
                                                 _mm256_mul_ps(d1, q6k_lane_scale(H1, 2 * bb + 1)));
                for (int j = 0; j < nb; j++) {
                    const size_t o = (size_t)b * nb + j;
                    const int8_t *x = xg + 32 * o;
                    const __m512 dx = _mm512_set1_ps(dg[o]);
                    __m512 y = _mm512_load_ps(acc + 16 * (size_t)j);
                    if (q4k) {
                        __m512i s = _mm512_setzero_si512();
                        for (int k = 0; k < 8; k++) s = _mm512_dpbusd_epi32(s, R[k], kbcast4_512(x + 4 * k));
                        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(s0, dx), y);
                        y = _mm512_fmadd_ps(_mm512_set1_ps(mg[o]), _mm512_mul_ps(s1, dx), y);
                    } else {
                        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
                        for (int k = 0; k < 4; k++) {
                            lo = _mm512_dpbusd_epi32(lo, R[k], kbcast4_512(x + 4 * k));
                            hi = _mm512_dpbusd_epi32(hi, R[k + 4], kbcast4_512(x + 16 + 4 * k));
                        }
                        lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(g0[o]));
                        hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(g1[o]));
                        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_mul_ps(s0, dx), y);
                        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_mul_ps(s1, dx), y);
                    }
                    _mm512_store_ps(acc + 16 * (size_t)j, y);
                }
            }
        }
        for (int j = 0; j < nb; j++)
            for (int i = keep; i < 16; i++) {
                const float s = acc[16 * (size_t)j + i] + (bias ? bias[rr + i] : 0.0f);
                float *yp = Y + (size_t)j * ldy + rr + i;
                *yp = accumulate ? *yp + s : s;
            }
    }
    return 1;
}

/* Q8_0 with maddubs (the AVX2 level without AVX-VNNI): 16 rows x NR16 inputs, two 8-row packs
 * of one chunk against each broadcast. A signed x signed byte product needs the sign trick
 * (|w| against x carrying w's sign: one vpsignb per row register and input), and on Zen 3
 * vpsignb and the memory broadcast issue at 2 a cycle each while maddubs + madd take 1 cycle
 * per 32 products: 8 rows x 6 inputs paid a broadcast per sign and measured 1.35 cycles per 32
 * products in a bare loop; one broadcast for two row registers, 1.2. The four inputs' 8 int32
 * sums and the two sign registers fit in the 16 ymm registers with |w| reloaded per 4-byte
 * group; the float accumulators stay in acc (a load and a store per block and input). The
 * integer sums and the float chain are the 8-row tile's, so the bits do not change. */
#define NR16 4
#define KC16 16 /* two packs of KC16 blocks: 17 KB, in L1 beside a group's records */

/* One block of 4 inputs: "+x" pins on C intrinsics still left gcc's schedule at 1.9 cycles per
 * 32 products against the bare loop's 1.2 (register copies for every chain and spilled sign
 * registers), so the 8 x 4 steps are written out. */
#define T16_STEP(K, J)                                                                               \
    "vpbroadcastd " #J "*32+" #K "*4(%[x]), %[t]\n\t"                                             \
    "vpsignb 256+" #K "*32(%[p0]), %[t], %[u]\n\t"                                                \
    "vpsignb 256+" #K "*32(%[p1]), %[t], %[t]\n\t"                                                \
    "vpmaddubsw %[u], %[w0], %[u]\n\t"                                                            \
    "vpmaddubsw %[t], %[w1], %[t]\n\t"                                                            \
    "vpmaddwd %[one], %[u], %[u]\n\t"                                                             \
    "vpmaddwd %[one], %[t], %[t]\n\t"                                                             \
    "vpaddd %[u], %[a" #J "], %[a" #J "]\n\t"                                                     \
    "vpaddd %[t], %[b" #J "], %[b" #J "]\n\t"
#define T16_K(K)                                                                                  \
    "vmovdqa " #K "*32(%[p0]), %[w0]\n\t"                                                         \
    "vmovdqa " #K "*32(%[p1]), %[w1]\n\t" T16_STEP(K, 0) T16_STEP(K, 1) T16_STEP(K, 2) T16_STEP(K, 3)

AVX2 static inline __attribute__((always_inline)) void tile16_q8(const int N, const pack8 *P0, const pack8 *P1,
                                                                 int nbk, const uint8_t *rec, float *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < nbk; i++, rec += 40 * N) {
        const int8_t *x = (const int8_t *)rec;
        const float *dx = (const float *)(rec + 32 * N);
        __m256i s0[NR16], s1[NR16];
        for (int j = 0; j < N; j++) s0[j] = s1[j] = _mm256_setzero_si256();
        if (N == NR16) {
            __m256i w0, w1, t, u;
            __asm__("" T16_K(0) T16_K(1) T16_K(2) T16_K(3) T16_K(4) T16_K(5) T16_K(6) T16_K(7)
                    : [a0] "+x"(s0[0]), [a1] "+x"(s0[1]), [a2] "+x"(s0[2]), [a3] "+x"(s0[3]),
                      [b0] "+x"(s1[0]), [b1] "+x"(s1[1]), [b2] "+x"(s1[2]), [b3] "+x"(s1[3]),
                      [w0] "=&x"(w0), [w1] "=&x"(w1), [t] "=&x"(t), [u] "=&x"(u)
                    : [x] "r"(x), [p0] "r"(P0[i].w), [p1] "r"(P1[i].w), [one] "x"(ones), "m"(P0[i]), "m"(P1[i]),
                      "m"(*(const uint8_t(*)[128])x));
        } else
            for (int k = 0; k < 8; k++) {
                const __m256i w0 = _mm256_load_si256(&P0[i].w[k]), w1 = _mm256_load_si256(&P1[i].w[k]);
                const __m256i g0 = _mm256_load_si256(&P0[i].s[k]), g1 = _mm256_load_si256(&P1[i].s[k]);
                for (int j = 0; j < N; j++) {
                    const __m256i xb = bcast4_256(x + 32 * j + 4 * k);
                    s0[j] = _mm256_add_epi32(s0[j], _mm256_madd_epi16(_mm256_maddubs_epi16(w0, _mm256_sign_epi8(xb, g0)), ones));
                    s1[j] = _mm256_add_epi32(s1[j], _mm256_madd_epi16(_mm256_maddubs_epi16(w1, _mm256_sign_epi8(xb, g1)), ones));
                }
            }
        for (int j = 0; j < N; j++) {
            const __m256 dj = _mm256_set1_ps(dx[j]);
            float *a = acc + 16 * j;
            _mm256_store_ps(a, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0[j]), _mm256_mul_ps(P0[i].d, dj), _mm256_load_ps(a)));
            _mm256_store_ps(a + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1[j]), _mm256_mul_ps(P1[i].d, dj), _mm256_load_ps(a + 8)));
        }
    }
}

/* Q4_0 the same way (the 8-row x 6-input tile ran at 65% of the peak, this one 80-94% on
 * Zen 3): nibbles against the broadcast, each chain's 8 steps summed in int16 (8 pair sums of at
 * most 2 x 15 x 127), widened once a block and offset by -8 s (cs). */
#define T16Q4_STEP(K, J)                                                                          \
    "vpbroadcastd " #J "*32+" #K "*4(%[x]), %[t]\n\t"                                             \
    "vpmaddubsw %[t], %[w0], %[u]\n\t"                                                            \
    "vpmaddubsw %[t], %[w1], %[t]\n\t"                                                            \
    "vpaddw %[u], %[a" #J "], %[a" #J "]\n\t"                                                     \
    "vpaddw %[t], %[b" #J "], %[b" #J "]\n\t"
#define T16Q4_K(K)                                                                                \
    "vmovdqa " #K "*32(%[p0]), %[w0]\n\t"                                                         \
    "vmovdqa " #K "*32(%[p1]), %[w1]\n\t" T16Q4_STEP(K, 0) T16Q4_STEP(K, 1) T16Q4_STEP(K, 2) T16Q4_STEP(K, 3)

AVX2 static inline __attribute__((always_inline)) void tile16_q4(const int N, const pack8 *P0, const pack8 *P1,
                                                                 int nbk, const uint8_t *rec, float *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < nbk; i++, rec += 40 * N) {
        const int8_t *x = (const int8_t *)rec;
        const float *dx = (const float *)(rec + 32 * N);
        const int32_t *cs = (const int32_t *)(rec + 36 * N);
        __m256i s0[NR16], s1[NR16];
        for (int j = 0; j < N; j++) s0[j] = s1[j] = _mm256_setzero_si256();
        if (N == NR16) {
            __m256i w0, w1, t, u;
            __asm__("" T16Q4_K(0) T16Q4_K(1) T16Q4_K(2) T16Q4_K(3) T16Q4_K(4) T16Q4_K(5) T16Q4_K(6) T16Q4_K(7)
                    : [a0] "+x"(s0[0]), [a1] "+x"(s0[1]), [a2] "+x"(s0[2]), [a3] "+x"(s0[3]),
                      [b0] "+x"(s1[0]), [b1] "+x"(s1[1]), [b2] "+x"(s1[2]), [b3] "+x"(s1[3]),
                      [w0] "=&x"(w0), [w1] "=&x"(w1), [t] "=&x"(t), [u] "=&x"(u)
                    : [x] "r"(x), [p0] "r"(P0[i].w), [p1] "r"(P1[i].w), "m"(P0[i]), "m"(P1[i]),
                      "m"(*(const uint8_t(*)[128])x));
        } else
            for (int k = 0; k < 8; k++) {
                const __m256i w0 = _mm256_load_si256(&P0[i].w[k]), w1 = _mm256_load_si256(&P1[i].w[k]);
                for (int j = 0; j < N; j++) {
                    const __m256i xb = bcast4_256(x + 32 * j + 4 * k);
                    s0[j] = _mm256_add_epi16(s0[j], _mm256_maddubs_epi16(w0, xb));
                    s1[j] = _mm256_add_epi16(s1[j], _mm256_maddubs_epi16(w1, xb));
                }
            }
        for (int j = 0; j < N; j++) {
            const __m256 dj = _mm256_set1_ps(dx[j]);
            const __m256i c = _mm256_set1_epi32(cs[j]);
            const __m256i i0 = _mm256_add_epi32(_mm256_madd_epi16(s0[j], ones), c);
            const __m256i i1 = _mm256_add_epi32(_mm256_madd_epi16(s1[j], ones), c);
            float *a = acc + 16 * j;
            _mm256_store_ps(a, _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(P0[i].d, dj), _mm256_load_ps(a)));
            _mm256_store_ps(a + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(P1[i].d, dj), _mm256_load_ps(a + 8)));
        }
    }
}

/* The AVX2 level's 16-row tile layout (quant.h, wb_quant_to_tiles): half h (rows 0-7 or 8-15) of
 * a tile block's register k is 32 bytes at 64 k + 32 h, lane i row 8 h + i, values 4k..4k+3;
 * its 8 scales at TQ + 16 h. Q8_0 stored as w xor 0x80; Q4_0 and Q5_0 (after its qh group)
 * hold 4 qs dwords whose low nibbles are registers 0-3, high ones 4-7. tk: 1 Q8_0, 0 Q4_0, 2
 * Q5_0 (TQ / TB's numbering). */
AVX2 static inline __m256i q8_tile_reg(const uint8_t *p, int k) { /* signed w */
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(p + 64 * k)), _mm256_set1_epi8((char)0x80));
}
AVX2 static inline __m256i q4_tile_reg(const uint8_t *p, int k) { /* nibbles 0..15 */
    const __m256i g = _mm256_loadu_si256((const __m256i *)(p + 64 * (k & 3)));
    return _mm256_and_si256(k < 4 ? g : _mm256_srli_epi32(g, 4), _mm256_set1_epi8(15));
}
/* Q5_0: the nibbles (qs groups after the qh group at p) with each fifth bit as 16: value 4k + m
 * takes bit 4k + m of its row's qh, i.e. bit 4 (k % 2) + m of byte k / 2, spread to its byte by a
 * shuffle and tested against that byte's bit */
AVX2 static inline __m256i q5_tile_reg(const uint8_t *p, int k) { /* 0..31 */
    const __m256i v = q4_tile_reg(p + 64, k);
    const __m256i sel = _mm256_add_epi8(_mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0,
                                                         0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
                                        _mm256_set1_epi8((char)(k / 2)));
    const __m256i bits = _mm256_set1_epi32(k & 1 ? (int)0x80402010 : 0x08040201);
    const __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)p), sel), bits);
    return _mm256_or_si256(v, _mm256_and_si256(_mm256_cmpeq_epi8(hb, bits), _mm256_set1_epi8(16)));
}

/* pack_chunk8's packs read from half h of tile blocks b0.. (T: the 16-row group): plain loads, no
 * transpose. Q5_0 packs as Q8_0's maddubs form of q - 16 (the same integer sums as its dot). */
AVX2 static inline __attribute__((always_inline)) void pack_tile8(const int tk, pack8 *P, const uint8_t *T, int h,
                                                                  int b0, int nbk) {
    for (int i = 0; i < nbk; i++) {
        const uint8_t *p = T + (size_t)(b0 + i) * TB(tk);
        P[i].d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + TQ(tk) + 16 * h)));
        p += 32 * h;
        for (int k = 0; k < 8; k++) {
            if (tk == 0) {
                P[i].w[k] = q4_tile_reg(p, k);
                continue;
            }
            const __m256i w = tk == 1 ? q8_tile_reg(p, k) : _mm256_sub_epi8(q5_tile_reg(p, k), _mm256_set1_epi8(16));
            P[i].w[k] = _mm256_sign_epi8(w, w), P[i].s[k] = w;
        }
    }
}

/* acc: 16 floats per input. tk < 0: W in the file layout, rows r0.. packed by pack_chunk8; else
 * in the tile layout (kind tk), its groups from the one holding r0, rows outside r0..r1 computed
 * and not stored. */
AVX2 static inline __attribute__((always_inline)) void gemm_tiles16_any(
    const int q4, const int tk, float *Y, size_t ldy, const uint8_t *grp, int nb, const uint8_t *W, size_t rb,
    const float *bias, int in, int r0, int r1, int accumulate, float *acc) {
    _Alignas(64) pack8 P0[KC16], P1[KC16];
    const int nblk = in / 32;
    for (int r = tk < 0 ? r0 : r0 & ~15; r < r1; r += 16) {
        const uint8_t *rows[16], *T = W + (size_t)(r / 16) * 16 * rb;
        for (int i = 0; i < 16; i++) rows[i] = W + (size_t)(r + i < r1 ? r + i : r1 - 1) * rb;
        memset(acc, 0, sizeof(float) * 16 * (size_t)nb);
        for (int b0 = 0; b0 < nblk; b0 += KC16) {
            const int nbk = nblk - b0 < KC16 ? nblk - b0 : KC16;
            if (tk >= 0) {
                pack_tile8(tk, P0, T, 0, b0, nbk);
                pack_tile8(tk, P1, T, 1, b0, nbk);
            } else {
                pack_chunk8(q4 ? 2 : 0, P0, rows, b0, nbk);
                if (r1 - r > 8) pack_chunk8(q4 ? 2 : 0, P1, rows + 8, b0, nbk);
                else memcpy(P1, P0, sizeof(pack8) * (size_t)nbk); /* rows past r1: never stored */
            }
            const uint8_t *g = grp;
            for (int j0 = 0; j0 < nb; j0 += NR16) {
                const int n = nb - j0 < NR16 ? nb - j0 : NR16;
                const uint8_t *rec = g + grp_rec(n) * (size_t)b0;
                float *a = acc + 16 * (size_t)j0;
                if (q4) switch (n) {
                    case 1: tile16_q4(1, P0, P1, nbk, rec, a); break;
                    case 2: tile16_q4(2, P0, P1, nbk, rec, a); break;
                    case 3: tile16_q4(3, P0, P1, nbk, rec, a); break;
                    default: tile16_q4(NR16, P0, P1, nbk, rec, a); break;
                    }
                else switch (n) {
                    case 1: tile16_q8(1, P0, P1, nbk, rec, a); break;
                    case 2: tile16_q8(2, P0, P1, nbk, rec, a); break;
                    case 3: tile16_q8(3, P0, P1, nbk, rec, a); break;
                    default: tile16_q8(NR16, P0, P1, nbk, rec, a); break;
                    }
                g += grp_rec(n) * (size_t)nblk;
            }
        }
        for (int j = 0; j < nb; j++)
            for (int i = r < r0 ? r0 - r : 0; i < 16 && r + i < r1; i++) {
                const float s = acc[16 * j + i] + (bias ? bias[r + i] : 0.0f);
                float *yp = Y + (size_t)j * ldy + r + i;
                *yp = accumulate ? *yp + s : s;
            }
    }
}
AVX2 static void gemm_tiles16(const int q4, float *Y, size_t ldy, const uint8_t *grp, int nb, const uint8_t *W,
                              size_t rb, const float *bias, int in, int r0, int r1, int accumulate, float *acc) {
    gemm_tiles16_any(q4, -1, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
}

/* Prompts and batches from the tile layout: the inputs grouped as for gemm_tiles16, the packs
 * loaded from the tiles (Q5_0 through Q8_0's tile); 0 without scratch (the caller then reads the
 * tiles row by row) */
AVX2 static int gemm_t_avx2(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride, int nb,
                            const uint8_t *W, size_t rb, const float *bias, int in, int r0, int r1, int accumulate) {
    const size_t gb = (grouped_bytes(nb, in) + 63) & ~(size_t)63;
    uint8_t *grp = qscratch(1, gb + 64 * (size_t)nb);
    if (!grp) return 0;
    float *acc = (float *)(grp + gb);
    group_inputs(grp, act, astride, nb, in, t == WB_QT_Q4_0 ? -8 : 0, NR16, 0);
    if (t == WB_QT_Q4_0) gemm_tiles16_any(1, 0, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
    else if (t == WB_QT_Q8_0) gemm_tiles16_any(0, 1, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
    else gemm_tiles16_any(0, 2, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, acc);
    return 1;
}

/* Decode from the tile layout: a 16-row group as two 8-row halves, lane i row i of its half, so a
 * block's sums need no fold and its 8 scales are one load. Q8_0: |w| against x with w's sign per
 * register (pair sums <= 2 * 128 * 127); Q4_0 / Q5_0: registers k and k + 4 (values 4k.. and
 * 16 + 4k..) multiplied and added as int16 before widening (two pair sums <= 2 * 31 * 127 each:
 * 15748). Each half's chain is its rows' canonical FMAs, so the bits of the per-row dots. */
AVX2 static inline __attribute__((always_inline)) __m256i tile_isum8(const int tk, const uint8_t *p, const int8_t *x) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    if (tk == 1)
        for (int k = 0; k < 8; k += 2) {
            const __m256i w0 = q8_tile_reg(p, k), w1 = q8_tile_reg(p, k + 1);
            s0 = _mm256_add_epi32(s0, mul_s8s8(w0, bcast4_256(x + 4 * k)));
            s1 = _mm256_add_epi32(s1, mul_s8s8(w1, bcast4_256(x + 4 * k + 4)));
        }
    else
        for (int k = 0; k < 4; k++) {
            const __m256i lo = tk == 0 ? q4_tile_reg(p, k) : q5_tile_reg(p, k);
            const __m256i hi = tk == 0 ? q4_tile_reg(p, k + 4) : q5_tile_reg(p, k + 4);
            const __m256i m = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4_256(x + 4 * k)),
                                                                 _mm256_maddubs_epi16(hi, bcast4_256(x + 16 + 4 * k))),
                                                ones);
            if (k & 1) s1 = _mm256_add_epi32(s1, m);
            else s0 = _mm256_add_epi32(s0, m);
        }
    return _mm256_add_epi32(s0, s1);
}
/* The tile layout is one linear stream per thread, which the hardware prefetchers follow except
 * across 4 KB pages; a software prefetch TB_AHEAD blocks (1-2 KB) ahead carries it over them.
 * Prefetching the next group (16 rows on, as the AVX-512 kernel can; 15-82 KB ahead) decoded
 * Qwen2.5-0.5B's matrices 5-10% slower on Zen 3 at 2 threads, none at all 5-25% slower
 * (bench_quant_decode, docs/performance.md Session 13). */
#define TB_AHEAD 4
AVX2 static inline __attribute__((always_inline)) void gemv_t_body256(const int tk, float *Y, const uint8_t *act,
                                                                      const uint8_t *W, size_t rb, const float *bias,
                                                                      int in, int r0, int r1, int accumulate) {
    const qact a = act_view(act, in);
    const int nblk = in / 32, corr = tk == 1 ? 0 : tk == 2 ? -16 : -8;
    const size_t gbytes = 16 * rb, end = (size_t)((r1 + 15) & ~15) * rb;
    for (int g = r0 & ~15; g < r1; g += 16) {
        const uint8_t *T = W + (size_t)(g / 16) * gbytes;
        const size_t pf = (size_t)(T - W) + TB_AHEAD * TB(tk); /* TB_AHEAD blocks on */
        __m256 y0 = _mm256_setzero_ps(), y1 = _mm256_setzero_ps();
        for (int b = 0; b < nblk; b++, T += TB(tk)) {
            const size_t pb = pf + (size_t)b * TB(tk);
            if (pb < end)
                for (int l = 0; l < (TB(tk) + 63) / 64; l++) _mm_prefetch((const char *)W + pb + 64 * l, _MM_HINT_T0);
            const int8_t *x = a.q + 32 * b;
            const __m256i c = _mm256_set1_epi32(corr * a.s[b]);
            const __m256i i0 = _mm256_add_epi32(tile_isum8(tk, T, x), c);
            const __m256i i1 = _mm256_add_epi32(tile_isum8(tk, T + 32, x), c);
            const __m256 dx = _mm256_set1_ps(a.d[b]);
            const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(T + TQ(tk))));
            const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(T + TQ(tk) + 16)));
            y0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(d0, dx), y0);
            y1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(d1, dx), y1);
        }
        _Alignas(32) float v[16];
        _mm256_store_ps(v, y0);
        _mm256_store_ps(v + 8, y1);
        for (int i = g < r0 ? r0 - g : 0; i < 16 && g + i < r1; i++) {
            const float s = v[i] + (bias ? bias[g + i] : 0.0f);
            Y[g + i] = accumulate ? Y[g + i] + s : s;
        }
    }
}
AVX2 static void gemv_t_avx2(wb_qtype t, float *Y, const uint8_t *act, const uint8_t *W, size_t rb,
                             const float *bias, int in, int r0, int r1, int accumulate) {
    if (t == WB_QT_Q8_0) gemv_t_body256(1, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else if (t == WB_QT_Q5_0) gemv_t_body256(2, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else gemv_t_body256(0, Y, act, W, rb, bias, in, r0, r1, accumulate);
}

/* AVX-VNNI: the 8-row x NR2 tile, one vpdpbusd per 32 products for both types (Q8_0 as
 * w xor 0x80, its sums started at -128 s; Q4_0's nibbles, started at -8 s: the records' cs) */
AVXVNNI static inline __attribute__((always_inline)) void tile8_avxvnni(const int N, const pack8 *P, int nbk,
                                                                        const uint8_t *rec, float *acc) {
    __m256 y[NR2];
    for (int j = 0; j < N; j++) y[j] = _mm256_load_ps(acc + 8 * j);
    for (int i = 0; i < nbk; i++, rec += 40 * N) {
        const int8_t *x = (const int8_t *)rec;
        const float *dx = (const float *)(rec + 32 * N);
        const int32_t *cs = (const int32_t *)(rec + 36 * N);
        __m256i s[NR2];
        for (int j = 0; j < N; j++) s[j] = _mm256_set1_epi32(cs[j]);
        for (int k = 0; k < 8; k++) {
            const __m256i w = _mm256_load_si256(&P[i].w[k]);
            for (int j = 0; j < N; j++) s[j] = _mm256_dpbusd_avx_epi32(s[j], w, bcast4_256(x + 32 * j + 4 * k));
        }
        const __m256 d = P[i].d;
        for (int j = 0; j < N; j++)
            y[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), _mm256_mul_ps(d, _mm256_set1_ps(dx[j])), y[j]);
    }
    for (int j = 0; j < N; j++) _mm256_store_ps(acc + 8 * j, y[j]);
}

AVXVNNI static void gemm_tiles8_avxvnni(const int q4, float *Y, size_t ldy, const uint8_t *grp, int nb,
                                        const uint8_t *W, size_t rb, const float *bias, int in, int r0, int r1,
                                        int accumulate, float *acc) {
    _Alignas(64) pack8 P[KC];
    const int nblk = in / 32;
    for (int r = r0; r < r1; r += 8) {
        const uint8_t *rows[8];
        for (int i = 0; i < 8; i++) rows[i] = W + (size_t)(r + i < r1 ? r + i : r1 - 1) * rb;
        memset(acc, 0, sizeof(float) * 8 * (size_t)nb);
        for (int b0 = 0; b0 < nblk; b0 += KC) {
            const int nbk = nblk - b0 < KC ? nblk - b0 : KC;
            if (q4) pack_chunk8(2, P, rows, b0, nbk);
            else pack_chunk8(1, P, rows, b0, nbk);
            const uint8_t *g = grp;
            for (int j0 = 0; j0 < nb; j0 += NR2) {
                const int n = nb - j0 < NR2 ? nb - j0 : NR2;
                const uint8_t *rec = g + grp_rec(n) * (size_t)b0;
                float *a = acc + 8 * (size_t)j0;
                switch (n) {
                case 1: tile8_avxvnni(1, P, nbk, rec, a); break;
                case 2: tile8_avxvnni(2, P, nbk, rec, a); break;
                case 3: tile8_avxvnni(3, P, nbk, rec, a); break;
                case 4: tile8_avxvnni(4, P, nbk, rec, a); break;
                case 5: tile8_avxvnni(5, P, nbk, rec, a); break;
                default: tile8_avxvnni(NR2, P, nbk, rec, a); break;
                }
                g += grp_rec(n) * (size_t)nblk;
            }
        }
        for (int j = 0; j < nb; j++)
            for (int i = 0; i < 8 && r + i < r1; i++) {
                const float s = acc[8 * j + i] + (bias ? bias[r + i] : 0.0f);
                float *yp = Y + (size_t)j * ldy + r + i;
                *yp = accumulate ? *yp + s : s;
            }
    }
}

/* The batch kernel of a level: Q8_0 / Q4_0 through its tiles (QTILES_, inputs grouped QNR_ at a
 * time), the K types through theirs, anything else (or no memory) through the per-row dots */
#define DEFINE_GEMM_Q_256(SUFFIX, ATTR)                                                           \
    ATTR static void gemm_q_##SUFFIX(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride, \
                                     int nb, const uint8_t *W, size_t rb, const float *bias, int in, \
                                     int r0, int r1, int accumulate) {                            \
        uint8_t *grp = NULL;                                                                      \
        const size_t gb = (grouped_bytes(nb, in) + 63) & ~(size_t)63;                             \
        if ((t == WB_QT_Q8_0 || t == WB_QT_Q4_0) && (grp = qscratch(1, gb + 64 * (size_t)nb))) { \
            const int kind = t == WB_QT_Q4_0 ? 2 : KIND8_##SUFFIX;                                \
            group_inputs(grp, act, astride, nb, in, kind == 2 ? -8 : kind == 1 ? -128 : 0, QNR_##SUFFIX, 0); \
            QTILES_##SUFFIX(kind == 2, Y, ldy, grp, nb, W, rb, bias, in, r0, r1, accumulate, (float *)(grp + gb)); \
            return;                                                                               \
        }                                                                                         \
        /* K types, 2-5 inputs: one 8-row decode pass per input (kgemm's cost per row chunk is  \
         * that of 8 inputs whatever nb: 2 inputs took 9 single-input passes' time, 7 about 6.5) */ \
        const int ktype = t == WB_QT_Q4_K || t == WB_QT_Q5_K || t == WB_QT_Q6_K;                 \
        if (ktype && nb <= 5 && r1 - r0 >= 8) {                                                   \
            for (int j = 0; j < nb; j++)                                                          \
                gemv_##SUFFIX(t, Y + (size_t)j * ldy, act + astride * (size_t)j, W, rb, bias, in, r0, r1, accumulate); \
            return;                                                                               \
        }                                                                                         \
        if (ktype &&                                                                              \
            (nb >= 8 && r1 - r0 >= 8                                                              \
                 ? ktile_##SUFFIX(t, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate) \
                 : kgemm_##SUFFIX(t, Y, ldy, act, astride, nb, W, rb, bias, in, r0, r1, accumulate))) \
            return;                                                                               \
        const qdot_fn dot = t == WB_QT_Q8_0   ? dot_q8_0_##SUFFIX                                 \
                            : t == WB_QT_Q4_0 ? dot_q4_0_##SUFFIX                                 \
                            : t == WB_QT_Q5_0 ? dot_q5_0_##SUFFIX                                 \
                            : t == WB_QT_Q4_K ? dot_q4_k_##SUFFIX                                 \
                            : t == WB_QT_Q5_K ? dot_q5_k_##SUFFIX                                 \
                            : t == WB_QT_IQ4_NL ? dot_iq4_nl_##SUFFIX                             \
                                              : dot_q6_k_##SUFFIX;                                \
        for (int r = r0; r < r1; r++) /* other types (or no memory): the per-row dots */         \
            for (int j = 0; j < nb; j++) {                                                        \
                const qact a = act_view(act + astride * (size_t)j, in);                           \
                const float s = dot(W + (size_t)r * rb, &a, in / 32) + (bias ? bias[r] : 0.0f);   \
                float *y = Y + (size_t)j * ldy + r;                                               \
                *y = accumulate ? *y + s : s;                                                     \
            }                                                                                     \
    }

/* Q8_0's kind: 0 the sign trick (no offset), 1 vpdpbusd on w xor 0x80 (-128 s) */
#define KIND8_avx2 0
#define KIND8_avxvnni 1
#define QTILES_avx2 gemm_tiles16
#define QTILES_avxvnni gemm_tiles8_avxvnni
#define QNR_avx2 NR16
#define QNR_avxvnni NR2
DEFINE_GEMM_Q_256(avx2, AVX2)
DEFINE_GEMM_Q_256(avxvnni, AVXVNNI)
/* Decode (one input), Q8_0 and Q4_0: each pair of rows' block is one 512-bit vpdpbusd against
 * the input block, and the 8 pairs' partial sums are folded into one lane per row by three
 * levels of two-source permutes (integers, so the order is free); the result is the isum the
 * tile kernel computes, followed by the same FMA. The next group of rows is prefetched as one
 * sequential stream while this one is read. */
typedef struct fold_idx {
    __m512i l1lo, l1hi, l2lo, l2hi, l3lo, l3hi;
} fold_idx;

/* pos(row 0/1 of the pair, partial j 0..7) -> lane of the dpbusd result */
static int pos_q8(int il, int j) { return 8 * il + j; }

VNNI512 static fold_idx make_fold(int (*pos)(int, int)) {
    _Alignas(64) int32_t a[16], b[16], c[16], d[16], e[16], f[16];
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 4; l++) {
            a[4 * i + l] = (i < 2 ? 0 : 16) + pos(i % 2, l);
            b[4 * i + l] = (i < 2 ? 0 : 16) + pos(i % 2, l + 4);
        }
    for (int i = 0; i < 8; i++)
        for (int l = 0; l < 2; l++) {
            c[2 * i + l] = (i < 4 ? 4 * i : 16 + 4 * (i - 4)) + l;
            d[2 * i + l] = c[2 * i + l] + 2;
        }
    for (int i = 0; i < 16; i++) {
        e[i] = i < 8 ? 2 * i : 16 + 2 * (i - 8);
        f[i] = e[i] + 1;
    }
    return (fold_idx){_mm512_load_si512(a), _mm512_load_si512(b), _mm512_load_si512(c),
                      _mm512_load_si512(d), _mm512_load_si512(e), _mm512_load_si512(f)};
}

VNNI512 static inline __m512i fold2(__m512i x, __m512i y, __m512i lo, __m512i hi) {
    return _mm512_add_epi32(_mm512_permutex2var_epi32(x, lo, y), _mm512_permutex2var_epi32(x, hi, y));
}

VNNI512 static inline __m512i fold16(const __m512i P[8], const fold_idx *F) {
    const __m512i s0 = fold2(P[0], P[1], F->l1lo, F->l1hi), s1 = fold2(P[2], P[3], F->l1lo, F->l1hi);
    const __m512i s2 = fold2(P[4], P[5], F->l1lo, F->l1hi), s3 = fold2(P[6], P[7], F->l1lo, F->l1hi);
    const __m512i t0 = fold2(s0, s1, F->l2lo, F->l2hi), t1 = fold2(s2, s3, F->l2lo, F->l2hi);
    return fold2(t0, t1, F->l3lo, F->l3hi);
}

#define PF_GROUPS 1 /* prefetch this many row groups ahead */

/* A 16-row group's outputs into Y[r..r + 16) (the lanes in keep): + bias, or + 0 (so a -0 sum
 * reads +0), then + Y when accumulating */
INLINE_VNNI512 void group_store(float *Y, int r, __m512 y, const float *bias, __mmask16 keep,
                                int accumulate) {
    float *yp = Y + r;
    if (bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(keep, bias + r));
    else y = _mm512_add_ps(y, _mm512_setzero_ps());
    if (accumulate) y = _mm512_add_ps(_mm512_maskz_loadu_ps(keep, yp), y);
    _mm512_mask_storeu_ps(yp, keep, y);
}

/* The byte offsets of rows 0..15 of a group, rows rb bytes apart, for the gathers and masked
 * broadcasts of the 16-row decode groups (15 rb fits an int32: a few MB for the widest rows) */
INLINE_VNNI512 __m512i row_offsets16(size_t rb) {
    return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                              _mm512_set1_epi32((int32_t)rb));
}

/* Rows [r, r + 16) of a matrix whose rows are rb bytes apart, all present. Only the lanes in
 * `keep` are stored (the last group of a range overlaps the one before it). */
INLINE_VNNI512 void gemv_group(const int q8, float *Y, const qact *a, const uint8_t *W, size_t rb,
                               const float *bias, int nblk, int r, size_t end, __mmask16 keep,
                               int accumulate, const fold_idx *F) {
    const size_t bs = q8 ? 34 : 18;
    const __m512i flip = _mm512_set1_epi8((char)0x80), m4 = _mm512_set1_epi8(15);
    /* the offset correction goes into lane 0 of each row of a pair */
    const __mmask16 corr_lanes = (__mmask16)(q8 ? 0x0101 : 0x1111);
    const int corr = q8 ? -128 : -8;
    const __m512i offs = row_offsets16(rb);
    const uint8_t *base = W + (size_t)r * rb;
    const size_t pf = (size_t)(r + 16 * PF_GROUPS) * rb;
    __m512 y = _mm512_setzero_ps();
    for (int b = 0; b < nblk; b++) {
        /* this block's share of the group PF_GROUPS ahead, as one linear stream: a fixed count
         * of lines (16 * bs bytes rounded up), so there is no exit branch to mispredict; none
         * from a block starting past the range's end (a prefetch never faults) */
        const size_t pb = pf + (size_t)b * 16 * bs;
        if (pb < end) {
            const char *pp = (const char *)W + pb;
            for (int l = 0; l < 5; l++) _mm_prefetch(pp + 64 * l, _MM_HINT_T0);
            if (q8)
                for (int l = 5; l < 9; l++) _mm_prefetch(pp + 64 * l, _MM_HINT_T0);
        }
        const int8_t *x = a->q + 32 * b;
        const __m512i init = _mm512_maskz_set1_epi32(corr_lanes, corr * a->s[b]);
        const uint8_t *c = base + (size_t)b * bs + 2;
        __m512i isum;
        if (q8) {
            __m512i P[8];
            const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x));
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++, c += 2 * rb) {
                const __m512i wv = _mm512_mask_broadcast_i64x4(
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)c)), 0xf0,
                    _mm256_loadu_si256((const __m256i *)(c + rb)));
                P[p] = _mm512_dpbusd_epi32(init, _mm512_xor_si512(wv, flip), xv);
            }
            isum = fold16(P, F);
        } else { /* four rows per register, one per 128-bit lane: low nibbles against values
                  * 0-15 of the input, high nibbles against 16-31; the lanes are then in the
                  * layout of the first fold level's output */
            const __m512i xl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)x));
            const __m512i xh = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(x + 16)));
            __m512i S[4];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++, c += 4 * rb) {
                /* masked broadcasts: a load and a blend each, where inserts take the shuffle
                 * port (the one the folds need) */
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)c));
                v = _mm512_mask_broadcast_i32x4(v, 0x00f0, _mm_loadu_si128((const __m128i *)(c + rb)));
                v = _mm512_mask_broadcast_i32x4(v, 0x0f00, _mm_loadu_si128((const __m128i *)(c + 2 * rb)));
                v = _mm512_mask_broadcast_i32x4(v, 0xf000, _mm_loadu_si128((const __m128i *)(c + 3 * rb)));
                const __m512i lo = _mm512_and_si512(v, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                S[p] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, lo, xl), hi, xh);
            }
            const __m512i t0 = fold2(S[0], S[1], F->l2lo, F->l2hi);
            const __m512i t1 = fold2(S[2], S[3], F->l2lo, F->l2hi);
            isum = fold2(t0, t1, F->l3lo, F->l3hi);
        }
        const __m512 dw = gather_f16(offs, base + (size_t)b * bs);
        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(a->d[b])), y);
    }
    group_store(Y, r, y, bias, keep, accumulate);
}

INLINE_VNNI512 void gemv_body(const int q8, float *Y, const uint8_t *act, const uint8_t *W,
                              size_t rb, const float *bias, int in, int r0, int r1, int accumulate) {
    const qact a = act_view(act, in);
    const int nblk = in / 32;
    if (r1 - r0 < 16) { /* too few rows for a group: the same sums one row at a time */
        for (int r = r0; r < r1; r++) {
            const float s = (q8 ? dot_q8_0_vnni512 : dot_q4_0_vnni512)(W + (size_t)r * rb, &a, nblk) +
                            (bias ? bias[r] : 0.0f);
            Y[r] = accumulate ? Y[r] + s : s;
        }
        return;
    }
    const fold_idx F = make_fold(pos_q8); /* Q4_0 uses its last two levels */
    const size_t end = (size_t)r1 * rb;
    int r = r0;
    for (; r + 16 <= r1; r += 16)
        gemv_group(q8, Y, &a, W, rb, bias, nblk, r, end, 0xffff, accumulate, &F);
    if (r < r1) /* the last rows: a group ending at r1, storing only the rows not yet done */
        gemv_group(q8, Y, &a, W, rb, bias, nblk, r1 - 16, end,
                   (__mmask16)(0xffffu << (16 - (r1 - r))), accumulate, &F);
}

/* Decode of Q5_0: gemv_group's Q8_0 form, a pair of rows per vpdpbusd, each row's 32 q5 built
 * in its 256-bit half from its 16 bytes of nibbles (broadcast to two 128-bit lanes, the second
 * shifted down by 4) and its 32 fifth bits (qh as a byte mask, row pair = one 64-bit mask: a
 * masked add of 16); then - 16 s, the fold and the FMA of the other types. */
INLINE_VNNI512 void gemv_group_q5(float *Y, const qact *a, const uint8_t *W, size_t rb,
                                  const float *bias, int nblk, int r, size_t end, __mmask16 keep,
                                  int accumulate, const fold_idx *F) {
    const __m512i m4 = _mm512_set1_epi8(15), c16 = _mm512_set1_epi8(16);
    const __m512i offs = row_offsets16(rb);
    const uint8_t *base = W + (size_t)r * rb;
    const size_t pf = (size_t)(r + 16 * PF_GROUPS) * rb;
    __m512 y = _mm512_setzero_ps();
    for (int b = 0; b < nblk; b++) {
        const size_t pb = pf + (size_t)b * 16 * 22; /* 352 bytes: 6 lines at most */
        if (pb < end) {
            const char *pp = (const char *)W + pb;
            for (int l = 0; l < 6; l++) _mm_prefetch(pp + 64 * l, _MM_HINT_T0);
        }
        const int8_t *x = a->q + 32 * b;
        const __m512i init = _mm512_maskz_set1_epi32(0x0101, -16 * a->s[b]);
        const __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x));
        const uint8_t *c = base + (size_t)b * 22;
        __m512i P[8];
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++, c += 2 * rb) {
            __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(c + 6)));
            v = _mm512_mask_broadcast_i32x4(v, 0xff00, _mm_loadu_si128((const __m128i *)(c + rb + 6)));
            v = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xff00ff00u, v, 4), m4);
            const __mmask64 h = _cvtu64_mask64((uint64_t)rd32(c + 2) | (uint64_t)rd32(c + rb + 2) << 32);
            P[p] = _mm512_dpbusd_epi32(init, _mm512_mask_add_epi8(v, h, v, c16), xv);
        }
        const __m512i isum = fold16(P, F);
        const __m512 dw = gather_f16(offs, base + (size_t)b * 22);
        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(a->d[b])), y);
    }
    group_store(Y, r, y, bias, keep, accumulate);
}

INLINE_VNNI512 void gemv_body_q5(float *Y, const uint8_t *act, const uint8_t *W, size_t rb,
                                 const float *bias, int in, int r0, int r1, int accumulate) {
    const qact a = act_view(act, in);
    const int nblk = in / 32;
    if (r1 - r0 < 16) {
        for (int r = r0; r < r1; r++) {
            const float s = dot_q5_0_vnni512(W + (size_t)r * rb, &a, nblk) + (bias ? bias[r] : 0.0f);
            Y[r] = accumulate ? Y[r] + s : s;
        }
        return;
    }
    const fold_idx F = make_fold(pos_q8);
    const size_t end = (size_t)r1 * rb;
    int r = r0;
    for (; r + 16 <= r1; r += 16) gemv_group_q5(Y, &a, W, rb, bias, nblk, r, end, 0xffff, accumulate, &F);
    if (r < r1)
        gemv_group_q5(Y, &a, W, rb, bias, nblk, r1 - 16, end, (__mmask16)(0xffffu << (16 - (r1 - r))),
                      accumulate, &F);
}

VNNI512 static void gemv_q_512(wb_qtype t, float *Y, const uint8_t *act, const uint8_t *W, size_t rb,
                               const float *bias, int in, int r0, int r1, int accumulate) {
    if (t == WB_QT_Q8_0) gemv_body(1, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else if (t == WB_QT_Q4_0) gemv_body(0, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else if (t == WB_QT_Q5_0) gemv_body_q5(Y, act, W, rb, bias, in, r0, r1, accumulate);
    else if (t == WB_QT_Q4_1) /* the same FMA chain; its vpdpbusd form measured 4-19% slower */
        gemv_avx2(t, Y, act, W, rb, bias, in, r0, r1, accumulate);
    else /* the AVX2 level's kernels over EVEX vpdpbusd (the same FMA chain): on Zen 4 4-14%
          * faster than over maddubs; for Q4_K / Q6_K faster than a 16-row AVX-512 kernel with
          * gathered scales was, which read 1.45-1.5x of the bound at 2 threads against
          * 1.04-1.06x (docs/performance.md Session 18) */
        gemv_vnni512(t, Y, act, W, rb, bias, in, r0, r1, accumulate);
}
#endif

/* -------------------------------------------------------------------------- the variants */


struct wb_quant_kernels {
    const char *name;
    qdot_fn dot[WB_QT_COUNT];
    /* NULL: per-row dots. Otherwise the whole product for any nb >= 1 (gemv: nb = 1, Q8_0/Q4_0) */
    void (*gemm)(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride, int nb,
                 const uint8_t *W, size_t rb, const float *bias, int in, int r0, int r1,
                 int accumulate);
    void (*gemv)(wb_qtype t, float *Y, const uint8_t *act, const uint8_t *W, size_t rb,
                 const float *bias, int in, int r0, int r1, int accumulate);
    /* the same from the 16-row tile layout (NULL: the tiles are read row by row through dot);
     * gemm_t returns 0 when it cannot have its scratch */
    int (*gemm_t)(wb_qtype t, float *Y, size_t ldy, const uint8_t *act, size_t astride, int nb,
                  const uint8_t *W, size_t rb, const float *bias, int in, int r0, int r1,
                  int accumulate);
    void (*gemv_t)(wb_qtype t, float *Y, const uint8_t *act, const uint8_t *W, size_t rb,
                   const float *bias, int in, int r0, int r1, int accumulate);
    wb_isa isa;
    int (*usable)(const wb_cpu_features *f);
    /* NULL, or the inputs of a prompt phase grouped once for its tile-layout matrices (group:
     * rows j0..j1 of nb, any thread; gemm_tg: the product over them): wb_quant_group_act */
    void (*group)(wb_qtype t, uint8_t *grp, const float *X, size_t ldx, int nb, int in, int j0, int j1);
    void (*gemm_tg)(wb_qtype t, float *Y, size_t ldy, const uint8_t *grp, int nb, const uint8_t *W,
                    size_t rb, const float *bias, int in, int r0, int r1, int accumulate);
    int q5_tiles; /* gemm multiplies Q5_0 rows itself (else they are widened to Q8_0 for it) */
};

static int always(const wb_cpu_features *f) { return (void)f, 1; }
#ifdef WB_X86
static int has_avx2(const wb_cpu_features *f) { return f->avx2 && f->fma && f->f16c; }
static int has_avxvnni(const wb_cpu_features *f) {
    return has_avx2(f) && f->avxvnni;
}
static int has_vnni512(const wb_cpu_features *f) {
    return has_avx2(f) && f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->avx512vnni;
}
#endif

static const wb_quant_kernels k_variants[] = {
    {"portable", {dot_q8_0_c, dot_q4_0_c, dot_q4_k_c, dot_q6_k_c, dot_q5_0_c, dot_iq4_nl_c, dot_q5_k_c, dot_q4_1_c, dot_q5_1_c}, NULL, NULL, NULL, NULL, WB_ISA_PORTABLE, always, NULL, NULL, 0},
#ifdef WB_X86
    {"avx2 maddubs", {dot_q8_0_avx2, dot_q4_0_avx2, dot_q4_k_avx2, dot_q6_k_avx2, dot_q5_0_avx2, dot_iq4_nl_avx2, dot_q5_k_avx2, dot_q4_1_avx2, dot_q5_1_avx2}, gemm_q_avx2, gemv_avx2, gemm_t_avx2,
     gemv_t_avx2, WB_ISA_AVX2, has_avx2, NULL, NULL, 0},
    {"avx2 avx-vnni vpdpbusd", {dot_q8_0_avxvnni, dot_q4_0_avxvnni, dot_q4_k_avxvnni, dot_q6_k_avxvnni, dot_q5_0_avxvnni, dot_iq4_nl_avxvnni, dot_q5_k_avxvnni, dot_q4_1_avxvnni, dot_q5_1_avxvnni},
     gemm_q_avxvnni, gemv_avxvnni, NULL, NULL, WB_ISA_AVX2, has_avxvnni, NULL, NULL, 0},
    {"avx512-vnni 16-row tiles", {dot_q8_0_vnni512, dot_q4_0_vnni512, dot_q4_k_vnni512, dot_q6_k_vnni512, dot_q5_0_vnni512, dot_iq4_nl_vnni512, dot_q5_k_vnni512, dot_q4_1_vnni512, dot_q5_1_vnni512},
     gemm_q_512, gemv_q_512, gemm_t_512, gemv_t_512, WB_ISA_AVX512, has_vnni512, group_act_512, gemm_tg_512, 1},
#endif
};
#define N_VARIANTS ((int)(sizeof k_variants / sizeof k_variants[0]))

int wb_quant_kernel_variants(const wb_quant_kernels **out, int max) {
    const wb_cpu_features *f = wb_cpu();
    int n = 0;
    for (int i = 0; i < N_VARIANTS; i++)
        if (k_variants[i].usable(f) && (int)k_variants[i].isa <= (int)wb_isa_best()) {
            if (n < max) out[n] = &k_variants[i];
            n++;
        }
    return n;
}
const char *wb_quant_kernels_name(const wb_quant_kernels *k) { return k->name; }
int wb_quant_kernels_tiles(const wb_quant_kernels *k) { return k->gemv_t != NULL; }

/* Each level takes the last variant of its level (or below) that the CPU can run. */
void wb_kernels_quant_register(wb_kernel_table *t, wb_isa isa) {
    for (int i = 0; i < N_VARIANTS; i++)
        if (k_variants[i].isa == isa && k_variants[i].usable(t->cpu)) {
            t->quant = &k_variants[i];
            t->name_dot_q8 = k_variants[i].name;
        }
}

/* ------------------------------------------------------------------ the 16-row tile layout */

static int tile_type(wb_qtype t) { return t == WB_QT_Q8_0 || t == WB_QT_Q4_0 || t == WB_QT_Q5_0; }

int wb_quant_tiles_ok(wb_qtype t, int rows, int in) {
    return tile_type(t) && rows > 0 && rows % 16 == 0 && in > 0 &&
           in % 32 == 0;
}

int wb_quant_tiles_native(void) { return wb_quant_kernels_tiles(wb_kt()->quant); }

/* Byte j of the values of block b of row r (j < 32 for Q8_0, 16 for Q4_0; the file block's
 * bytes 2 + j), and the block's scale (bytes 0-1), in the tile layout of rows rb bytes long. */
static size_t tile_val(wb_qtype t, size_t rb, int r, int b, int j) {
    const size_t bs = wb_qtype_block_bytes(t);
    return (size_t)(r / 16) * 16 * rb + (size_t)b * 16 * bs + (size_t)(64 * (j / 4) + 4 * (r % 16) + j % 4);
}
static size_t tile_scale(wb_qtype t, size_t rb, int r, int b) {
    const size_t bs = wb_qtype_block_bytes(t);
    return (size_t)(r / 16) * 16 * rb + (size_t)b * 16 * bs + 16 * (bs - 2) + 2 * (size_t)(r % 16);
}

/* one file-layout block of row r */
static void tile_block(wb_qtype t, uint8_t *dst, const uint8_t *W, size_t rb, int r, int b) {
    const size_t bs = wb_qtype_block_bytes(t), sc = tile_scale(t, rb, r, b);
    const uint8_t flip = t == WB_QT_Q8_0 ? 0x80 : 0;
    dst[0] = W[sc], dst[1] = W[sc + 1];
    for (int j = 0; j < (int)bs - 2; j++) dst[2 + j] = W[tile_val(t, rb, r, b, j)] ^ flip;
}

void wb_quant_to_tiles(wb_qtype t, void *dst, const void *src, int rows, int in) {
    if (!wb_quant_tiles_ok(t, rows, in)) return;
    const size_t bs = wb_qtype_block_bytes(t), rb = wb_quant_row_bytes(t, in);
    const int nblk = in / 32;
    uint8_t *d = dst;
    const uint8_t flip = t == WB_QT_Q8_0 ? 0x80 : 0;
    const uint8_t *s = src;
    const int nq = (int)bs - 2; /* value bytes of a block */
    for (int r = 0; r < rows; r++) {
        const uint8_t *blk = s + (size_t)r * rb;
        uint8_t *tb = d + (size_t)(r / 16) * 16 * rb + 4 * (size_t)(r % 16);
        for (int b = 0; b < nblk; b++, blk += bs, tb += 16 * bs) { /* tile_val, tile_scale */
            tb[16 * nq - 4 * (r % 16) + 2 * (r % 16)] = blk[0];
            tb[16 * nq - 4 * (r % 16) + 2 * (r % 16) + 1] = blk[1];
            for (int k = 0; k < nq / 4; k++)
                for (int j = 0; j < 4; j++) tb[64 * k + j] = blk[2 + 4 * k + j] ^ flip;
        }
    }
}

void wb_quant_tile_dequant_row(wb_qtype t, float *dst, const void *W, int r, int in) {
    const size_t rb = wb_quant_row_bytes(t, in);
    if (!tile_type(t) || !rb || r < 0) return;
    uint8_t blk[34];
    for (int b = 0; b < in / 32; b++) {
        tile_block(t, blk, W, rb, r, b);
        wb_dequantize_range(t, dst + 32 * (size_t)b, blk, 0, 32);
    }
}

void wb_quant_tile_row(wb_qtype t, void *dst, const void *W, int r, int in) {
    const size_t bs = wb_qtype_block_bytes(t), rb = wb_quant_row_bytes(t, in);
    if (!tile_type(t) || !rb || r < 0) return;
    for (int b = 0; b < in / 32; b++) tile_block(t, (uint8_t *)dst + (size_t)b * bs, W, rb, r, b);
}

/* ------------------------------------------------------------------------ GEMV / GEMM */

float wb_quant_dot(wb_qtype t, const void *w, const void *xq, int n) {
    if ((unsigned)t >= WB_QT_COUNT || n <= 0 || n % 32) return 0.0f;
    const qact a = act_view(xq, n);
    return wb_kt()->quant->dot[t](w, &a, n / 32);
}

static void rows_dots(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy, const uint8_t *act,
                      size_t astride, int nb, const uint8_t *W, size_t rb, const float *b, int in,
                      int r0, int r1, int accumulate) {
    const qdot_fn dot = k->dot[t];
    for (int r = r0; r < r1; r++) /* each row once from memory for all the inputs */
        for (int j = 0; j < nb; j++) {
            const qact a = act_view(act + astride * (size_t)j, in);
            const float s = dot(W + (size_t)r * rb, &a, in / 32) + (b ? b[r] : 0.0f);
            float *y = Y + (size_t)j * ldy + r;
            *y = accumulate ? *y + s : s;
        }
}

/* Without memory for a row: dequantize and sum in float, a block at a time (not the canonical
 * bits; only when malloc fails). */
static void float_dots(wb_qtype t, int tiles, int off, float *Y, size_t ldy, const float *X, size_t ldx,
                       int nb, const uint8_t *W, size_t rb, const float *b, int in, int r0, int r1,
                       int accumulate) {
    uint8_t blk[34];
    float v[32];
    const size_t bs = wb_qtype_block_bytes(t);
    for (int r = r0; r < r1; r++)
        for (int j = 0; j < nb; j++) {
            double s = 0.0;
            for (int k0 = 0; k0 < in; k0 += 32) {
                const uint8_t *p = W + (size_t)r * rb + (size_t)(k0 / 32) * bs;
                if (tiles) tile_block(t, blk, W, rb, r + off, k0 / 32), p = blk;
                wb_dequantize_range(t, v, p, 0, 32);
                for (int i = 0; i < 32; i++) s += (double)v[i] * X[(size_t)j * ldx + k0 + i];
            }
            float *y = Y + (size_t)j * ldy + r;
            const float o = (float)s + (b ? b[r] : 0.0f);
            *y = accumulate ? *y + o : o;
        }
}

/* The tile layout through a level without tile kernels: each row back in the file layout, then
 * the per-row dot, whose bits every kernel of the level gives. 0 without memory for a row. */
static int tile_rows_dots(const wb_quant_kernels *k, wb_qtype t, int off, float *Y, size_t ldy, const uint8_t *act,
                          int nb, const uint8_t *W, size_t rb, const float *b, int in, int r0, int r1,
                          int accumulate) {
    uint8_t *row = malloc(rb);
    if (!row) return 0;
    const size_t one = act_bytes(in);
    for (int r = r0; r < r1; r++) {
        wb_quant_tile_row(t, row, W, r + off, in);
        for (int j = 0; j < nb; j++) {
            const qact a = act_view(act + one * (size_t)j, in);
            const float s = k->dot[t](row, &a, in / 32) + (b ? b[r] : 0.0f);
            float *y = Y + (size_t)j * ldy + r;
            *y = accumulate ? *y + s : s;
        }
    }
    free(row);
    return 1;
}

/* Q5_0 prompts and batches in the file layout on a level without its own Q5_0 tiles (AVX2 with
 * AVX-VNNI, or AVX2 rows that are not a multiple of 16; AVX-512 packs Q5_0 rows into its tile
 * registers directly: pack_chunk; AVX2 reads the tile layout's as Q8_0 packs: pack_tile8). A Q5_0 block is a Q8_0 block with the same d
 * and q - 16 as its int8 values: the same integer sum (sum (q - 16) x = sum q x - 16 s) and
 * scale, so the level's Q8_0 tile kernels give the canonical Q5_0 bits on it. Each call widens
 * its rows, a chunk at a time into the thread's scratch (34 bytes per 22, read from cache while
 * the inputs are many); decode reads the 22 bytes. */
static void q5_to_q8_c(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 22, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        for (int j = 0; j < 32; j++) dst[2 + j] = (uint8_t)(int8_t)(q5_value(src, j) - 16);
    }
}
/* IQ4_NL the same way: the Q8_0 block with the same d and the levels K[nibble] as its int8
 * values, the same integer sum and scale as its canonical dot */
static void iq4_to_q8_c(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 18, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        for (int j = 0; j < 16; j++)
            dst[2 + j] = (uint8_t)k_iq4_levels[src[2 + j] & 15], dst[18 + j] = (uint8_t)k_iq4_levels[src[2 + j] >> 4];
    }
}
/* Q4_1 / Q5_1: the Q8_0 block of d and the unsigned q, their value chain (the min chain is
 * added after: min_chain_avx2) */
static void q4_1_to_q8_c(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 20, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        for (int j = 0; j < 16; j++) dst[2 + j] = src[4 + j] & 15, dst[18 + j] = src[4 + j] >> 4;
    }
}
static void q5_1_to_q8_c(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 24, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        for (int j = 0; j < 32; j++) dst[2 + j] = (uint8_t)q5_value(src + 2, j);
    }
}
#ifdef WB_X86
AVX2 static void q4_1_to_q8_avx2(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 20, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        _mm256_storeu_si256((__m256i *)(dst + 2), nibbles(src + 4));
    }
}
AVX2 static void q5_1_to_q8_avx2(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 24, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        _mm256_storeu_si256((__m256i *)(dst + 2), q5_values(src + 2));
    }
}
/* Rows [0, n) of Q4_1 / Q5_1 (W, rows rb apart, blocks bs bytes) for inputs j < nb: their value
 * chains T[j n + i] (from the Q8_0 kernel, no bias: acc + 0), the min chain of each (input j's
 * s d_x of block b at SD[b nbp + j], nbp a multiple of 8, zeros past nb), then Y[j ldy + i] = [Y +] ((T + acc2) + bias): the
 * canonical dot's bits. Eight rows to a register (lane i row i, so T, the bias and Y are read
 * and written eight at a time) and eight inputs at a time (eight chains, so no FMA waits on
 * another: per row and one chain at a time the pass took 19% of a Q5_K_M 268-token prefill).
 * m8: 8 nblk floats. */
AVX2 static void min_chain_avx2(float *Y, size_t ldy, const float *T, int n, int nb, int nbp, const float *SD,
                                const uint8_t *W, size_t rb, size_t bs, int nblk, const float *bias,
                                int accumulate, float *m8) {
    for (int i0 = 0; i0 < n; i0 += 8) {
        const int cnt = n - i0 < 8 ? n - i0 : 8; /* a short last group repeats its last row */
        for (int k = 0; k < 8; k++) {
            const uint8_t *row = W + rb * (size_t)(i0 + (k < cnt ? k : cnt - 1)) + 2;
            for (int b = 0; b < nblk; b++) m8[8 * b + k] = h2f(row + bs * (size_t)b);
        }
        _Alignas(32) float bv[8] = {0};
        for (int k = 0; bias && k < cnt; k++) bv[k] = bias[i0 + k];
        const __m256 bias8 = _mm256_load_ps(bv);
        for (int j0 = 0; j0 < nb; j0 += 8) {
            const int jn = nb - j0 < 8 ? nb - j0 : 8;
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
            for (int b = 0; b < nblk; b++) { /* eight chains in registers */
                const __m256 m = _mm256_load_ps(m8 + 8 * b);
                const float *p = SD + (size_t)b * nbp + j0;
                c0 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p), c0);
                c1 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 1), c1);
                c2 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 2), c2);
                c3 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 3), c3);
                c4 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 4), c4);
                c5 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 5), c5);
                c6 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 6), c6);
                c7 = _mm256_fmadd_ps(m, _mm256_broadcast_ss(p + 7), c7);
            }
            const __m256 c[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
            for (int j = 0; j < jn; j++) {
                const float *t = T + (size_t)(j0 + j) * n + i0;
                float *y = Y + (size_t)(j0 + j) * ldy + i0;
                if (cnt == 8) {
                    __m256 v = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(t), c[j]), bias8);
                    if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(y), v);
                    _mm256_storeu_ps(y, v);
                } else {
                    _Alignas(32) float a2[8];
                    _mm256_store_ps(a2, c[j]);
                    for (int k = 0; k < cnt; k++) {
                        const float v = (t[k] + a2[k]) + bv[k];
                        y[k] = accumulate ? y[k] + v : v;
                    }
                }
            }
        }
    }
}
AVX2 static void q5_to_q8_avx2(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 22, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        _mm256_storeu_si256((__m256i *)(dst + 2), _mm256_sub_epi8(q5_values(src), _mm256_set1_epi8(16)));
    }
}
AVX2 static void iq4_to_q8_avx2(uint8_t *dst, const uint8_t *src, int nblk) {
    for (int b = 0; b < nblk; b++, src += 18, dst += 34) {
        dst[0] = src[0], dst[1] = src[1];
        _mm256_storeu_si256((__m256i *)(dst + 2), iq4_values(src));
    }
}
#endif

/* t (Q5_0, IQ4_NL, Q4_1 or Q5_1) as Q8_0 rows for the level's Q8_0 batch kernel; Q4_1 / Q5_1
 * then add their min chains (min_chain_avx2). 0 without the scratch (then the level's per-row
 * dots). */
static int widened_gemm(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy, const uint8_t *act,
                        size_t one, int nb, const uint8_t *W, size_t rb, const float *b, int in, int r0,
                        int r1, int accumulate) {
    const int mins = t == WB_QT_Q4_1 || t == WB_QT_Q5_1;
#ifndef WB_X86
    if (mins) return 0; /* (no level here has a batch kernel) */
#endif
    const size_t rb8 = wb_quant_row_bytes(WB_QT_Q8_0, in);
    /* about 512 KB of Q8_0 rows per chunk, whole groups of 16 (the AVX-512 tile's rows): the
     * tile kernels regroup the inputs per call, a cost per chunk */
    int ch = (int)(((size_t)512 << 10) / rb8) & ~15;
    if (ch < 16) ch = 16;
    if (ch > r1 - r0) ch = r1 - r0;
    uint8_t *q8 = qscratch(2, rb8 * (size_t)ch);
    if (!q8) return 0;
    const int nblk = in / 32;
    const int nbp = (nb + 7) & ~7;
    float *T = NULL, *SD = NULL, *m8 = NULL; /* mins: the value chains, the inputs' s d_x by block */
    if (mins) {
        const size_t tn = ((size_t)ch * nb + 7) & ~(size_t)7; /* m8 32-byte aligned */
        if (!(T = (float *)qscratch(3, sizeof(float) * (tn + 8 * (size_t)nblk + (size_t)nblk * nbp)))) return 0;
        m8 = T + tn, SD = m8 + 8 * (size_t)nblk;
        for (int j = 0; j < nbp; j++) {
            const qact a = act_view(act + one * (size_t)(j < nb ? j : 0), in);
            for (int bb = 0; bb < nblk; bb++) SD[(size_t)bb * nbp + j] = j < nb ? (float)a.s[bb] * a.d[bb] : 0.0f;
        }
    }
    void (*widen)(uint8_t *, const uint8_t *, int) = t == WB_QT_IQ4_NL ? iq4_to_q8_c
                                                    : t == WB_QT_Q4_1  ? q4_1_to_q8_c
                                                    : t == WB_QT_Q5_1  ? q5_1_to_q8_c
                                                                       : q5_to_q8_c;
#ifdef WB_X86
    if (k->isa >= WB_ISA_AVX2)
        widen = t == WB_QT_IQ4_NL ? iq4_to_q8_avx2
                : t == WB_QT_Q4_1 ? q4_1_to_q8_avx2
                : t == WB_QT_Q5_1 ? q5_1_to_q8_avx2
                                  : q5_to_q8_avx2;
#endif
    for (int r = r0; r < r1; r += ch) {
        const int n = r1 - r < ch ? r1 - r : ch;
        for (int i = 0; i < n; i++) widen(q8 + rb8 * (size_t)i, W + rb * (size_t)(r + i), in / 32);
        if (!mins) {
            k->gemm(WB_QT_Q8_0, Y + r, ldy, act, one, nb, q8, rb8, b ? b + r : NULL, in, 0, n, accumulate);
            continue;
        }
#ifdef WB_X86
        k->gemm(WB_QT_Q8_0, T, (size_t)n, act, one, nb, q8, rb8, NULL, in, 0, n, 0);
        min_chain_avx2(Y + r, ldy, T, n, nb, nbp, SD, W + rb * (size_t)r, rb, wb_qtype_block_bytes(t), nblk,
                       b ? b + r : NULL, accumulate, m8);
#endif
    }
    return 1;
}

/* The product over nb inputs already quantized, act_bytes(in) apart: the level's one-input
 * kernel, its tile kernel for more, or per-row dots where it has neither; for the tile layout
 * the level's tile-layout kernels, or rows read back one at a time. Returns 0 only when the
 * tile layout found no memory for a row. */
static int gemm_act(const wb_quant_kernels *k, wb_qtype t, int tiles, int off, float *Y, size_t ldy,
                    const void *act, int nb, const void *W, size_t rb, const float *b, int in,
                    int r0, int r1, int accumulate) {
    const size_t one = act_bytes(in);
    if (tiles) {
        if (off) return tile_rows_dots(k, t, off, Y, ldy, act, nb, W, rb, b, in, r0, r1, accumulate);
        if (nb == 1 && k->gemv_t) {
            k->gemv_t(t, Y, act, W, rb, b, in, r0, r1, accumulate);
            return 1;
        }
        if (k->gemm_t && k->gemm_t(t, Y, ldy, act, one, nb, W, rb, b, in, r0, r1, accumulate)) return 1;
        return tile_rows_dots(k, t, 0, Y, ldy, act, nb, W, rb, b, in, r0, r1, accumulate);
    }
    if (t == WB_QT_Q5_0 && nb > 1 && k->gemm && !k->q5_tiles &&
        widened_gemm(k, t, Y, ldy, act, one, nb, W, rb, b, in, r0, r1, accumulate))
        return 1;
    if ((t == WB_QT_IQ4_NL || t == WB_QT_Q4_1 || t == WB_QT_Q5_1) && nb > 1) { /* prompts: as Q8_0 rows, widened per call */
        if (!(k->gemm && widened_gemm(k, t, Y, ldy, act, one, nb, W, rb, b, in, r0, r1, accumulate)))
            rows_dots(k, t, Y, ldy, act, one, nb, W, rb, b, in, r0, r1, accumulate);
        return 1;
    }
    if (nb == 1 && k->gemv)
        k->gemv(t, Y, act, W, rb, b, in, r0, r1, accumulate);
    else if (k->gemm)
        k->gemm(t, Y, ldy, act, one, nb, W, rb, b, in, r0, r1, accumulate);
    else
        rows_dots(k, t, Y, ldy, act, one, nb, W, rb, b, in, r0, r1, accumulate);
    return 1;
}

static void gemm_q_impl(const wb_quant_kernels *k, wb_qtype t, int tiles, int off, float *Y, size_t ldy,
                        const float *X, size_t ldx, int nb, const void *W, const float *b, int in,
                        int r0, int r1, int accumulate, void *xq) {
    const size_t rb = wb_quant_row_bytes(t, in);
    if (!rb || in % 32 || r0 >= r1 || nb <= 0) return;
    if (tiles && (!tile_type(t) || off < 0 || off > 15)) return;
    const size_t one = act_bytes(in);
    _Alignas(64) unsigned char local[16384];
    int cap = nb; /* inputs quantized per pass: all of them, unless memory is short */
    void *buf = xq;
    if (!buf) {
        if (one * (size_t)nb <= sizeof local) buf = local;
        else if (!(buf = qscratch(0, one * (size_t)nb))) {
            /* every (row, input) is computed the same way in any grouping: fewer at a time */
            cap = (int)(sizeof local / one);
            buf = local;
            if (cap < 1) { /* no memory at all */
                float_dots(t, tiles, off, Y, ldy, X, ldx, nb, W, rb, b, in, r0, r1, accumulate);
                return;
            }
        }
    }
    for (int j0 = 0; j0 < nb; j0 += cap) {
        const int jn = nb - j0 < cap ? nb - j0 : cap;
        for (int j = 0; j < jn; j++)
            wb_quantize_act((unsigned char *)buf + one * (size_t)j, X + (size_t)(j0 + j) * ldx, in);
        if (!gemm_act(k, t, tiles, off, Y + (size_t)j0 * ldy, ldy, buf, jn, W, rb, b, in, r0, r1, accumulate))
            float_dots(t, tiles, off, Y + (size_t)j0 * ldy, ldy, X + (size_t)j0 * ldx, ldx, jn, W, rb, b,
                       in, r0, r1, accumulate);
    }
}

static void gemm_q_act_impl(const wb_quant_kernels *k, wb_qtype t, int tiles, int off, float *Y, size_t ldy,
                            const void *xq, int nb, const void *W, const float *b, int in, int r0,
                            int r1, int accumulate) {
    const size_t rb = wb_quant_row_bytes(t, in);
    if (!rb || in % 32 || r0 >= r1 || nb <= 0) return;
    if (tiles && (!tile_type(t) || off < 0 || off > 15)) return;
    if (!gemm_act(k, t, tiles, off, Y, ldy, xq, nb, W, rb, b, in, r0, r1, accumulate)) {
        /* no memory for a row: dequantize the inputs' int8 values and sum in float */
        const size_t one = act_bytes(in);
        for (int j = 0; j < nb; j++) {
            const qact a = act_view((const uint8_t *)xq + one * (size_t)j, in);
            for (int r = r0; r < r1; r++) {
                double s = 0.0;
                uint8_t blk[34];
                float v[32];
                for (int bb = 0; bb < in / 32; bb++) {
                    tile_block(t, blk, W, rb, r + off, bb);
                    wb_dequantize_range(t, v, blk, 0, 32);
                    for (int i = 0; i < 32; i++) s += (double)v[i] * a.d[bb] * a.q[32 * bb + i];
                }
                float *y = Y + (size_t)j * ldy + r;
                const float o = (float)s + (b ? b[r] : 0.0f);
                *y = accumulate ? *y + o : o;
            }
        }
    }
}

void wb_gemm_q_with(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy, const float *X,
                    size_t ldx, int nb, const void *W, const float *b, int in, int r0, int r1,
                    int accumulate, void *xq) {
    gemm_q_impl(k, t, 0, 0, Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate, xq);
}

void wb_gemm_q_act_with(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy,
                        const void *xq, int nb, const void *W, const float *b, int in, int r0,
                        int r1, int accumulate) {
    gemm_q_act_impl(k, t, 0, 0, Y, ldy, xq, nb, W, b, in, r0, r1, accumulate);
}

void wb_gemm_q(wb_qtype t, float *Y, size_t ldy, const float *X, size_t ldx, int nb, const void *W,
               const float *b, int in, int r0, int r1, int accumulate, void *xq) {
    gemm_q_impl(wb_kt()->quant, t, 0, 0, Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate, xq);
}

void wb_gemm_q_act(wb_qtype t, float *Y, size_t ldy, const void *xq, int nb, const void *W,
                   const float *b, int in, int r0, int r1, int accumulate) {
    gemm_q_act_impl(wb_kt()->quant, t, 0, 0, Y, ldy, xq, nb, W, b, in, r0, r1, accumulate);
}

void wb_gemm_qt_with(const wb_quant_kernels *k, wb_qtype t, int off, float *Y, size_t ldy, const float *X,
                     size_t ldx, int nb, const void *W, const float *b, int in, int r0, int r1,
                     int accumulate, void *xq) {
    gemm_q_impl(k, t, 1, off, Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate, xq);
}

void wb_gemm_qt_act_with(const wb_quant_kernels *k, wb_qtype t, int off, float *Y, size_t ldy,
                         const void *xq, int nb, const void *W, const float *b, int in, int r0,
                         int r1, int accumulate) {
    gemm_q_act_impl(k, t, 1, off, Y, ldy, xq, nb, W, b, in, r0, r1, accumulate);
}

void wb_gemm_qt(wb_qtype t, int off, float *Y, size_t ldy, const float *X, size_t ldx, int nb, const void *W,
                const float *b, int in, int r0, int r1, int accumulate, void *xq) {
    gemm_q_impl(wb_kt()->quant, t, 1, off, Y, ldy, X, ldx, nb, W, b, in, r0, r1, accumulate, xq);
}

void wb_gemm_qt_act(wb_qtype t, int off, float *Y, size_t ldy, const void *xq, int nb, const void *W,
                    const float *b, int in, int r0, int r1, int accumulate) {
    gemm_q_act_impl(wb_kt()->quant, t, 1, off, Y, ldy, xq, nb, W, b, in, r0, r1, accumulate);
}

/* ---------------------------------------------- a prompt phase's inputs grouped once */

size_t wb_quant_group_bytes_with(const wb_quant_kernels *k, wb_qtype t, int nb, int in) {
    if (!k->group || !tile_type(t) || nb < 2 || in <= 0 || in % 32) return 0;
    return ((size_t)nb * ((size_t)in + (size_t)(in / 32) * 8) + 63) & ~(size_t)63; /* grouped_bytes */
}

void wb_quant_group_act_with(const wb_quant_kernels *k, wb_qtype t, void *grp, const float *X,
                             size_t ldx, int nb, int in, int j0, int j1) {
    if (!wb_quant_group_bytes_with(k, t, nb, in) || j0 < 0 || j1 > nb || j0 >= j1) return;
    k->group(t, grp, X, ldx, nb, in, j0, j1);
}

void wb_gemm_qt_group_with(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy,
                           const void *grp, int nb, const void *W, const float *b, int in, int r0,
                           int r1, int accumulate) {
    if (!wb_quant_group_bytes_with(k, t, nb, in) || r0 >= r1) return;
    k->gemm_tg(t, Y, ldy, grp, nb, W, wb_quant_row_bytes(t, in), b, in, r0, r1, accumulate);
}

size_t wb_quant_group_bytes(wb_qtype t, int nb, int in) {
    return wb_quant_group_bytes_with(wb_kt()->quant, t, nb, in);
}

void wb_quant_group_act(wb_qtype t, void *grp, const float *X, size_t ldx, int nb, int in, int j0,
                        int j1) {
    wb_quant_group_act_with(wb_kt()->quant, t, grp, X, ldx, nb, in, j0, j1);
}

void wb_gemm_qt_group(wb_qtype t, float *Y, size_t ldy, const void *grp, int nb, const void *W,
                      const float *b, int in, int r0, int r1, int accumulate) {
    wb_gemm_qt_group_with(wb_kt()->quant, t, Y, ldy, grp, nb, W, b, in, r0, r1, accumulate);
}
