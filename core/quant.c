/* quant.c - Q8_0 / Q4_0 / Q4_K / Q6_K rows (layouts in quant.h): quantize, dequantize, and the
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

/* The activation block: scale, the sum of q, 32 values. */
typedef struct q8a {
    float d;
    int32_t s;
    int8_t q[32];
} q8a;

static const struct {
    const char *name;
    int values;
    size_t bytes;
} k_types[WB_QT_COUNT] = {
    {"q8_0", 32, 34}, {"q4_0", 32, 18}, {"q4_k", 256, 144}, {"q6_k", 256, 210}};

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

/* -------------------------------------------------------------------------- quantize */

int wb_quantize_row(wb_qtype t, void *dst, const float *src, int n) {
    if (n <= 0 || n % 32 || (t != WB_QT_Q8_0 && t != WB_QT_Q4_0)) return -1;
    uint8_t *o = dst;
    for (int b = 0; b < n / 32; b++) {
        const float *x = src + (size_t)b * 32;
        if (t == WB_QT_Q8_0) { /* d = max|x| / 127: the largest maps to +-127 */
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
            const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
            wr16(o, wb_f32_to_f16(d));
            for (int i = 0; i < 32; i++) {
                float q = nearbyintf(x[i] * id);
                o[2 + i] = (uint8_t)(int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
            }
            o += 34;
        } else { /* the value of largest magnitude maps to -8, so the other side reaches +7 */
            float amax = 0.0f, mx = 0.0f;
            for (int i = 0; i < 32; i++)
                if (fabsf(x[i]) > amax) amax = fabsf(x[i]), mx = x[i];
            const float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            wr16(o, wb_f32_to_f16(d));
            for (int i = 0; i < 16; i++) {
                int lo = (int)floorf(x[i] * id + 8.5f), hi = (int)floorf(x[i + 16] * id + 8.5f);
                lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
                hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
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
        default: break;
        }
}

void wb_dequantize_row(wb_qtype t, float *dst, const void *src, int n) {
    wb_dequantize_range(t, dst, src, 0, n);
}

/* ------------------------------------------------------------------- input quantization */

size_t wb_quant_act_bytes(int n) { return n > 0 ? (size_t)(n / 32) * sizeof(q8a) : 0; }

void wb_quantize_act(void *dst, const float *x, int n) {
    q8a *a = dst;
    for (int b = 0; b < n / 32; b++, x += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
        const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        int s = 0;
        for (int i = 0; i < 32; i++) {
            int q = (int)nearbyintf(x[i] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            a[b].q[i] = (int8_t)q;
            s += q;
        }
        a[b].d = d;
        a[b].s = s;
    }
}

/* ----------------------------------------------------------------------- dots, portable */

static float dot_q8_0_portable(const void *w, const void *xq, int nblk) {
    const uint8_t *p = w;
    const q8a *a = xq;
    float sum = 0.0f;
    for (int b = 0; b < nblk; b++, p += 34) {
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += (int8_t)p[2 + i] * a[b].q[i];
        sum += f16(p) * a[b].d * (float)s;
    }
    return sum;
}

static float dot_q4_0_portable(const void *w, const void *xq, int nblk) {
    const uint8_t *p = w;
    const q8a *a = xq;
    float sum = 0.0f;
    for (int b = 0; b < nblk; b++, p += 18) {
        int32_t s = 0;
        for (int i = 0; i < 16; i++)
            s += (p[2 + i] & 15) * a[b].q[i] + (p[2 + i] >> 4) * a[b].q[i + 16];
        sum += f16(p) * a[b].d * (float)(s - 8 * a[b].s);
    }
    return sum;
}

/* --------------------------------------------------------------------------- dots, AVX2 */

#ifdef WB_X86
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline float h2f(const uint8_t *p) { return _cvtsh_ss(rd16(p)); }

/* 32 nibbles of a Q4_0 block as bytes 0..15 in value order */
AVX2 static inline __m256i nibbles(const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* Signed x signed bytes: maddubs needs an unsigned side, so |w| and x with w's sign. */
AVX2 static inline __m256i dot_s8(__m256i w, __m256i x) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

AVX2 static float dot_q8_0_avx2(const void *w, const void *xq, int nblk) {
    const uint8_t *p = w;
    const q8a *a = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nblk; b++, p += 34) {
        const __m256i wv = _mm256_loadu_si256((const __m256i *)(p + 2));
        const __m256i xv = _mm256_loadu_si256((const __m256i *)a[b].q);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_s8(wv, xv)), _mm256_set1_ps(h2f(p) * a[b].d),
                              acc);
    }
    return hsum8(acc);
}

AVX2 static float dot_q4_0_avx2(const void *w, const void *xq, int nblk) {
    const uint8_t *p = w;
    const q8a *a = xq;
    __m256 acc = _mm256_setzero_ps();
    float corr = 0.0f; /* the -8 of every value, as -8 * d_w * d_x * sum(x) per block */
    for (int b = 0; b < nblk; b++, p += 18) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)a[b].q);
        const __m256i p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(nibbles(p + 2), xv),
                                              _mm256_set1_epi16(1));
        const float s = h2f(p) * a[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(s), acc);
        corr += s * (float)a[b].s;
    }
    return hsum8(acc) - 8.0f * corr;
}

/* ----------------------------------------------------------------- dots, AVX-512 VNNI */

/* vpdpbusd multiplies unsigned by signed bytes and adds groups of 4 into int32 lanes: one
 * instruction where AVX2 takes maddubs + madd (and no int16 saturation). */
VNNI static float dot_q8_0_vnni(const void *w, const void *xq, int nblk) {
    const uint8_t *p = w;
    const q8a *a = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int b = 0;
    for (; b + 2 <= nblk; b += 2, p += 68) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(p + 2));
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(p + 36));
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)a[b].q);
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)a[b + 1].q);
        const __m256i z = _mm256_setzero_si256();
        const __m256i s0 = _mm256_dpbusd_epi32(z, _mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0));
        const __m256i s1 = _mm256_dpbusd_epi32(z, _mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(h2f(p) * a[b].d), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(h2f(p + 34) * a[b + 1].d),
                               acc1);
    }
    for (; b < nblk; b++, p += 34) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(p + 2));
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)a[b].q);
        const __m256i s0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w0, w0),
                                               _mm256_sign_epi8(x0, w0));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(h2f(p) * a[b].d), acc0);
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

VNNI static float dot_q4_0_vnni(const void *w, const void *xq, int nblk) {
    const uint8_t *p = w;
    const q8a *a = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    float corr = 0.0f;
    int b = 0;
    for (; b + 2 <= nblk; b += 2, p += 36) {
        const __m256i z = _mm256_setzero_si256();
        const __m256i s0 = _mm256_dpbusd_epi32(z, nibbles(p + 2), _mm256_loadu_si256((const __m256i *)a[b].q));
        const __m256i s1 =
            _mm256_dpbusd_epi32(z, nibbles(p + 20), _mm256_loadu_si256((const __m256i *)a[b + 1].q));
        const float d0 = h2f(p) * a[b].d, d1 = h2f(p + 18) * a[b + 1].d;
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(d0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(d1), acc1);
        corr += d0 * (float)a[b].s + d1 * (float)a[b + 1].s;
    }
    for (; b < nblk; b++, p += 18) {
        const __m256i s0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), nibbles(p + 2),
                                               _mm256_loadu_si256((const __m256i *)a[b].q));
        const float d0 = h2f(p) * a[b].d;
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(d0), acc0);
        corr += d0 * (float)a[b].s;
    }
    return hsum8(_mm256_add_ps(acc0, acc1)) - 8.0f * corr;
}
#endif

void wb_kernels_quant_register(wb_kernel_table *t, wb_isa isa) {
    if (isa == WB_ISA_PORTABLE) {
        t->dot_q8_0 = dot_q8_0_portable;
        t->dot_q4_0 = dot_q4_0_portable;
        t->name_dot_q8 = "portable";
    }
#ifdef WB_X86
    if (isa == WB_ISA_AVX2) {
        t->dot_q8_0 = dot_q8_0_avx2;
        t->dot_q4_0 = dot_q4_0_avx2;
        t->name_dot_q8 = "avx2 maddubs";
    }
    if (isa == WB_ISA_AVX512 && t->cpu->avx512vnni) {
        t->dot_q8_0 = dot_q8_0_vnni;
        t->dot_q4_0 = dot_q4_0_vnni;
        t->name_dot_q8 = "avx512-vnni vpdpbusd";
    }
#endif
}

/* ------------------------------------------------------------------------ GEMV / GEMM */

float wb_quant_dot(wb_qtype t, const void *w, const void *xq, int n) {
    const wb_kernel_table *k = wb_kt();
    if (t == WB_QT_Q8_0) return k->dot_q8_0(w, xq, n / 32);
    if (t == WB_QT_Q4_0) return k->dot_q4_0(w, xq, n / 32);
    return 0.0f;
}

typedef struct qrows {
    wb_qtype t;
    const uint8_t *W;
    size_t row_bytes;
} qrows;

static void widen_q(const void *ctx, float *dst, int r, int k0, int kn) {
    const qrows *m = ctx;
    const int v = k_types[m->t].values;
    /* the tile's last column block may end inside a row's last block only when `in` is not a
     * multiple of the block, which wb_quant_row_bytes rules out */
    wb_dequantize_range(m->t, dst, m->W + (size_t)r * m->row_bytes, k0, (kn + v - 1) / v * v);
}

void wb_gemm_q(wb_qtype t, float *Y, size_t ldy, const float *X, size_t ldx, int nb, const void *W,
               const float *b, int in, int r0, int r1, int accumulate, void *xq) {
    const size_t rb = wb_quant_row_bytes(t, in);
    if (!rb || r0 >= r1 || nb <= 0) return;
    const wb_kernel_table *k = wb_kt();
    if (nb <= WB_QUANT_DOT_ROWS && (t == WB_QT_Q8_0 || t == WB_QT_Q4_0)) {
        _Alignas(64) unsigned char local[8192];
        const size_t one = wb_quant_act_bytes(in), need = one * (size_t)nb;
        void *buf = xq ? xq : need <= sizeof local ? (void *)local : malloc(need);
        int per_input = 0; /* out of memory: one input at a time in `local` */
        if (!buf && one <= sizeof local) buf = local, per_input = 1;
        if (!buf) { /* no memory for the input's blocks: the widened path needs none */
            const qrows m = {t, W, rb};
            k->gemm_tiled(Y, ldy, X, ldx, nb, widen_q, &m, b, in, r0, r1, accumulate);
            return;
        }
        float (*dot)(const void *, const void *, int) = t == WB_QT_Q8_0 ? k->dot_q8_0 : k->dot_q4_0;
        const uint8_t *w = (const uint8_t *)W;
        for (int j0 = 0; j0 < nb; j0 = per_input ? j0 + 1 : nb) {
            const int j1 = per_input ? j0 + 1 : nb;
            for (int j = j0; j < j1; j++)
                wb_quantize_act((char *)buf + one * (j - j0), X + (size_t)j * ldx, in);
            for (int r = r0; r < r1; r++) /* each row once from memory for all the inputs */
                for (int j = j0; j < j1; j++) {
                    float s = dot(w + (size_t)r * rb, (char *)buf + one * (j - j0), in / 32) +
                              (b ? b[r] : 0.0f);
                    float *y = Y + (size_t)j * ldy + r;
                    *y = accumulate ? *y + s : s;
                }
        }
        if (buf != xq && buf != (void *)local) free(buf);
        return;
    }
    const qrows m = {t, W, rb};
    k->gemm_tiled(Y, ldy, X, ldx, nb, widen_q, &m, b, in, r0, r1, accumulate);
}
