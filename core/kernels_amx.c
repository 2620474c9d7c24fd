/* kernels_amx.c - the BF16 prompt GEMM on AMX tiles (AMX-TILE + AMX-BF16: Intel Sapphire Rapids
 * and later), the route kernels_gemm.c registers for BF16 weights where the CPU has them and the
 * OS lets the process use them (cpu.c asks once).
 *
 *   Y[t, r] = (accumulate ? Y[t, r] : 0) + (s + b[r]),   s = sum over k of W[r, k] X[t, k]
 *
 * tdpbf16ps multiplies BF16 by BF16 into FP32 sums. The weights are BF16 already; each F32 input
 * is split into three BF16 parts, x = h + m + l exactly (h = bf16(x), m = bf16(x - h), l =
 * bf16(x - h - m), the last remainder has at most 8 significant bits left), so every product of
 * a weight and a part is exact in FP32 and the activations are not rounded: unlike the
 * vdpbf16ps route, only the order of the FP32 additions differs from the FMA chain of
 * kernels_gemm.c (the tests hold it to the tolerance of a sum in another order). The three parts
 * cost three tile products per step; one tdpbf16ps is 16 x 16 x 32 multiply-adds, and this CPU
 * class issues one per 16 cycles, so even a third of that rate is over five times the
 * 512-bit FMA's (docs/performance.md, Session 16).
 *
 * Each output's sum runs over the K steps in order, the three parts in order within a step,
 * whatever nb, the thread split, the token block (a partial block only has fewer tile rows) or
 * the row block: a prompt row gets the same bits in any call, as on the other routes.
 *
 * Layouts (our own; the tile shapes are the ISA's):
 * - packed inputs P: blocks of 16 rows (the last one the rest: mr rows), kp = in rounded up to 32
 *   (zeros past in); in a block, for each step of 32 columns, the parts h, m, l one after the
 *   other, each mr rows x 32 BF16 values: one token tile's operand as one run of mr x 64 bytes
 *   (rows kp apart measured 35% slower, the tile rows then coming from as many L2 lines apart).
 *   1.5 kp floats a row (wb_amx_xrow). The blocks are the unit threads share out (never more
 *   than the caller's ceil(nb / gemm_mr)).
 * - weights, packed per call: for 32 rows and each step of 32 columns, two tiles of 16 rows (the
 *   column pairs) x 16 dwords (one weight row's pair each), the VNNI order tdpbf16ps reads: a 16 x
 *   16 transpose of the rows' dwords.
 * - tiles: 0-3 the sums of 32 tokens x 32 weight rows (16 x 16 FP32 each), 4-5 two tokens'
 *   blocks of one part, 6-7 the two weight tiles.
 * Blocking for the 2 MB L2: K in chunks of 1024 columns; for as many weight rows as a chunk of
 * 512 KB holds, that chunk is packed, then each token pair's chunk (192 KB at most) runs over all
 * those rows while it sits in L2, the sums carried to the next chunk through a buffer (a tile
 * stored and loaded again keeps its FP32 values, so the chunks change no bit). Without chunks a
 * 4864-wide row's token pair (934 KB) came from L3 for every 32 rows: the 268-row down
 * projection took 9.1 ms at 1 thread, 5.0 with them. Prefetching the next chunk's weights in
 * software measured 5-30% slower (it competes with the tile loads for L2), so the packing waits
 * on memory; fetching Y's lines for writing before the finish changed nothing measurable.
 */
#include "cpu.h"

#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define WB_AMX_X86 1
#include <immintrin.h>

#include "kernels_simd.h"
#endif

static inline int kpad(int in) { return (in + 31) & ~31; }

static inline float bf16f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

size_t wb_amx_xrow(int in) { return (size_t)3 * (size_t)kpad(in) / 2; }

#ifdef WB_AMX_X86

#define AMX                                                                                        \
    __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,"      \
                          "avx2,fma")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")))

/* The 64-byte tile configuration, palette 1 (Intel SDM, LDTILECFG). */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

enum { TILE_BYTES = 1024, STEP_BF16 = 2 * TILE_BYTES / 2 /* two weight tiles a step */ };

/* Token blocks of m0 and m1 rows (m1 0: one block). */
static void cfg_make(amx_cfg *c, int m0, int m1) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    const int rows[8] = {m0, m0, m1, m1, m0, m1, 16, 16};
    for (int i = 0; i < 8; i++) {
        c->rows[i] = (uint8_t)rows[i];
        c->colsb[i] = rows[i] ? 64 : 0;
    }
}

/* One block of mr <= 16 packed rows: for each step of 32 columns, the parts h, m, l each as mr
 * rows of 32 BF16 values (a tile's rows, 64 bytes apart), so a tile load reads mr x 64 bytes in a
 * row. The block takes mr x 3 kp values. */
AVX512BF16 static void xpack_rows(uint16_t *d, const float *s, size_t ldx, int mr, int in) {
    const int kp = kpad(in);
    for (int m = 0; m < mr; m++) {
        const float *x = s + (size_t)m * ldx;
        for (int k = 0; k < kp; k += 16) {
            const __mmask16 mk = (__mmask16)(k + 16 <= in ? 0xffff : k < in ? (1u << (in - k)) - 1 : 0);
            const __m512 v = _mm512_maskz_loadu_ps(mk, x + k);
            const __m256i vh = (__m256i)_mm512_cvtneps_pbh(v);
            const __m512 r1 = _mm512_sub_ps(
                v, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(vh), 16)));
            const __m256i vm = (__m256i)_mm512_cvtneps_pbh(r1);
            const __m512 r2 = _mm512_sub_ps(
                r1, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(vm), 16)));
            const __m256i vl = (__m256i)_mm512_cvtneps_pbh(r2);
            uint16_t *h = d + (size_t)(k / 32) * 3 * mr * 32 + (size_t)m * 32 + k % 32;
            _mm256_storeu_si256((__m256i *)h, vh);
            _mm256_storeu_si256((__m256i *)(h + (size_t)mr * 32), vm);
            _mm256_storeu_si256((__m256i *)(h + (size_t)2 * mr * 32), vl);
        }
    }
}

AVX512BF16 void wb_amx_xpack(float *P, const float *X, size_t ldx, int nb, int in, int i0, int i1) {
    const int nblk = (nb + 15) / 16;
    const size_t row = wb_amx_xrow(in);
    if (i1 > nblk) i1 = nblk;
    for (int i = i0; i < i1; i++) {
        const int a = 16 * i, mr = nb - a < 16 ? nb - a : 16;
        xpack_rows((uint16_t *)(P + (size_t)a * row), X + (size_t)a * ldx, ldx, mr, in);
    }
}

/* x[t, k] back from the packed parts (h + m + l is x exactly): the scalar fallback's input */
static inline float xpacked(const uint16_t *P, int kp, int nb, int t, int k) {
    const int a = t / 16 * 16, mr = nb - a < 16 ? nb - a : 16;
    const uint16_t *h = P + (size_t)a * 3 * kp + (size_t)(k / 32) * 3 * mr * 32 + (size_t)(t - a) * 32 + k % 32;
    return (bf16f(h[0]) + bf16f(h[mr * 32])) + bf16f(h[2 * mr * 32]);
}

/* Weight rows [r, r + nr) (nr <= 32; zeros past them and past in), columns [k0, k1) (multiples
 * of 32), as the tiles of those steps. */
AVX512BF16 static void wpack(uint16_t *d, const uint16_t *W, int in, int r, int nr, int k0, int k1) {
    for (int k = k0; k < k1; k += 32, d += STEP_BF16) {
        const __mmask32 mk = k + 32 <= in ? 0xffffffffu : (__mmask32)((1ull << (in - k)) - 1);
        for (int j = 0; j < 2; j++) {
            __m512 v[16];
            for (int i = 0; i < 16; i++) {
                const int q = 16 * j + i;
                v[i] = q < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(
                                    mk, W + (size_t)(r + q) * in + k))
                              : _mm512_setzero_ps();
            }
            wb_tr16_512(v);
            for (int i = 0; i < 16; i++) _mm512_store_ps((float *)(d + j * 512) + 16 * i, v[i]);
        }
    }
}

/* The sums of one or two token blocks (A0 of m0 rows, A1 of m1; the packed layout of
 * xpack_rows) against 32 weight rows B over kp / 32 steps, stored to c[32][32]. */
#define AMX_STEP(two)                                                                              \
    do {                                                                                           \
        _tile_loadd(6, b, 64);                                                                     \
        _tile_loadd(7, b + 512, 64);                                                               \
        for (int p = 0; p < 3; p++) {                                                              \
            _tile_loadd(4, a0 + (size_t)p * m0 * 32, 64);                                          \
            if (two) _tile_loadd(5, a1 + (size_t)p * m1 * 32, 64);                                 \
            _tile_dpbf16ps(0, 4, 6);                                                               \
            _tile_dpbf16ps(1, 4, 7);                                                               \
            if (two) {                                                                             \
                _tile_dpbf16ps(2, 5, 6);                                                           \
                _tile_dpbf16ps(3, 5, 7);                                                           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ns steps of one or two token blocks, the sums continued from cin (NULL: from 0; a stored
 * tile reloads its FP32 values exactly, so K chunks do not change the bits) and stored to cout,
 * [32][32] (rows 16 on: the second block). */
AMX static void block2(const uint16_t *a0, int m0, const uint16_t *a1, int m1, const uint16_t *b,
                       int ns, const float *cin, float *cout) {
    if (cin) {
        _tile_loadd(0, cin, 128);
        _tile_loadd(1, cin + 16, 128);
        _tile_loadd(2, cin + 512, 128);
        _tile_loadd(3, cin + 528, 128);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int k = 0; k < ns; k++, a0 += 3 * 32 * m0, a1 += 3 * 32 * m1, b += STEP_BF16) AMX_STEP(1);
    _tile_stored(0, cout, 128);
    _tile_stored(1, cout + 16, 128);
    _tile_stored(2, cout + 512, 128);
    _tile_stored(3, cout + 528, 128);
}
AMX static void block1(const uint16_t *a0, int m0, const uint16_t *b, int ns, const float *cin,
                       float *cout) {
    if (cin) {
        _tile_loadd(0, cin, 128);
        _tile_loadd(1, cin + 16, 128);
    } else {
        _tile_zero(0);
        _tile_zero(1);
    }
    const uint16_t *a1 = a0;
    const int m1 = 0;
    for (int k = 0; k < ns; k++, a0 += 3 * 32 * m0, b += STEP_BF16) AMX_STEP(0);
    (void)a1, (void)m1;
    _tile_stored(0, cout, 128);
    _tile_stored(1, cout + 16, 128);
}

/* Rows [0, mt) of c[32][32] into Y's columns [r, r + nr): bias, then the old Y. */
AVX512BF16 static void finish(float *Y, size_t ldy, const float *c, int mt, int r, int nr,
                              const float *b, int accumulate) {
    for (int h = 0; h < 2 && 16 * h < nr; h++) {
        const int w = nr - 16 * h < 16 ? nr - 16 * h : 16;
        const __mmask16 mk = (__mmask16)(w == 16 ? 0xffff : (1u << w) - 1);
        const __m512 bv = b ? _mm512_maskz_loadu_ps(mk, b + r + 16 * h) : _mm512_setzero_ps();
        for (int m = 0; m < mt; m++) {
            float *y = Y + (size_t)m * ldy + r + 16 * h;
            __m512 s = _mm512_load_ps(c + 32 * m + 16 * h);
            if (b) s = _mm512_add_ps(s, bv);
            if (accumulate) s = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, y), s);
            _mm512_mask_storeu_ps(y, mk, s);
        }
    }
}

/* K chunks of KC_STEPS steps (1024 columns): the weights of a chunk for SB_BYTES worth of rows
 * (at least 32) and one token pair's chunk are what L2 holds at a time */
enum { KC_STEPS = 32, SB_BYTES = 1 << 19 };

AMX void wb_amx_gemm_bf16_packed(float *Y, size_t ldy, const float *P, int nb,
                                 const uint16_t *W, const float *b, int in, int r0, int r1,
                                 int accumulate) {
    if (r1 <= r0 || nb < 1) return;
    const int kp = kpad(in), nks = kp / 32, nkc = (nks + KC_STEPS - 1) / KC_STEPS;
    const int kcs = nks < KC_STEPS ? nks : KC_STEPS; /* steps in a full chunk */
    const size_t chunk_bytes = (size_t)kcs * 2 * TILE_BYTES; /* one 32-row block's chunk */
    int sb = (int)(SB_BYTES / chunk_bytes) * 32;
    if (sb < 32) sb = 32;
    const int span = r1 - r0 < sb ? (r1 - r0 + 31) / 32 * 32 : sb, npair = (nb + 31) / 32;
    const size_t wfl = (size_t)span / 32 * chunk_bytes / 4,
                 cfl = nkc > 1 ? (size_t)span / 32 * npair * 1024 : 0;
    float *buf = wb_kernel_buf(1, wfl + cfl);
    uint16_t *wp = (uint16_t *)buf;
    float *cb = buf + wfl; /* the sums between K chunks, 32 x 32 per row block and token pair */
    const uint16_t *Ph = (const uint16_t *)P;
    if (!buf) { /* the same products as one chain each, in scalar code */
        for (int t = 0; t < nb; t++)
            for (int r = r0; r < r1; r++) {
                const uint16_t *w = W + (size_t)r * in;
                float s = 0.0f;
                for (int k = 0; k < in; k++) s = fmaf(bf16f(w[k]), xpacked(Ph, kp, nb, t, k), s);
                if (b) s += b[r];
                float *y = Y + (size_t)t * ldy + r;
                *y = accumulate ? *y + s : s;
            }
        return;
    }
    const size_t xrow = (size_t)3 * kp; /* BF16 values a packed row */
    float c[32 * 32] __attribute__((aligned(64)));
    amx_cfg cfg;
    int cm0 = -1, cm1 = -1;
    for (int s0 = r0; s0 < r1; s0 += sb) {
        const int s1 = r1 - s0 < sb ? r1 : s0 + sb;
        for (int kc = 0; kc < nkc; kc++) {
            const int ns = nks - kc * KC_STEPS < KC_STEPS ? nks - kc * KC_STEPS : KC_STEPS;
            const int last = kc == nkc - 1;
            for (int r = s0, o = 0; r < s1; r += 32, o++)
                wpack(wp + (size_t)o * chunk_bytes / 2, W, in, r, s1 - r < 32 ? s1 - r : 32,
                      32 * kc * KC_STEPS, 32 * (kc * KC_STEPS + ns));
            /* each token pair's chunk stays in L2 over the row blocks */
            for (int t = 0, q = 0; t < nb; t += 32, q++) {
                const int m0 = nb - t < 16 ? nb - t : 16,
                          m1 = nb - t - 16 <= 0 ? 0 : nb - t - 16 < 16 ? nb - t - 16 : 16;
                if (m0 != cm0 || m1 != cm1) {
                    cfg_make(&cfg, m0, m1);
                    _tile_loadconfig(&cfg);
                    cm0 = m0, cm1 = m1;
                }
                const uint16_t *A0 = Ph + (size_t)t * xrow + (size_t)kc * KC_STEPS * 96 * m0,
                               *A1 = Ph + (size_t)(t + 16) * xrow + (size_t)kc * KC_STEPS * 96 * m1;
                for (int r = s0, o = 0; r < s1; r += 32, o++) {
                    const uint16_t *B = wp + (size_t)o * chunk_bytes / 2;
                    const int nr = s1 - r < 32 ? s1 - r : 32;
                    float *slot = cb + ((size_t)o * npair + q) * 1024;
                    const float *cin = kc ? slot : NULL;
                    float *cout = last ? c : slot;
                    if (m1) block2(A0, m0, A1, m1, B, ns, cin, cout);
                    else block1(A0, m0, B, ns, cin, cout);
                    if (last) finish(Y + (size_t)t * ldy, ldy, c, m0 + m1, r, nr, b, accumulate);
                }
            }
        }
    }
    _tile_release();
}

AMX int wb_amx_gemm_bf16(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                         const uint16_t *W, const float *b, int in, int r0, int r1,
                         int accumulate) {
    if (r1 <= r0 || nb < 1) return 0;
    float *P = wb_kernel_buf(0, (size_t)nb * wb_amx_xrow(in));
    if (!P) return -1;
    wb_amx_xpack(P, X, ldx, nb, in, 0, (nb + 15) / 16);
    wb_amx_gemm_bf16_packed(Y, ldy, P, nb, W, b, in, r0, r1, accumulate);
    return 0;
}

#else /* no AMX kernels on this target: the route is never registered */

void wb_amx_xpack(float *P, const float *X, size_t ldx, int nb, int in, int i0, int i1) {
    (void)P, (void)X, (void)ldx, (void)nb, (void)in, (void)i0, (void)i1;
}
void wb_amx_gemm_bf16_packed(float *Y, size_t ldy, const float *P, int nb, const uint16_t *W,
                             const float *b, int in, int r0, int r1, int accumulate) {
    (void)Y, (void)ldy, (void)P, (void)nb, (void)W, (void)b, (void)in, (void)r0, (void)r1;
    (void)accumulate;
}
int wb_amx_gemm_bf16(float *Y, size_t ldy, const float *X, size_t ldx, int nb, const uint16_t *W,
                     const float *b, int in, int r0, int r1, int accumulate) {
    (void)Y, (void)ldy, (void)X, (void)ldx, (void)nb, (void)W, (void)b, (void)in, (void)r0;
    (void)r1, (void)accumulate;
    return -1;
}

#endif
