/* test_quant.c - Q8_0 / Q4_0 / Q4_K / Q6_K / Q5_0 layouts, quantization error bounds, and every dot
 * product / GEMV / GEMM level this CPU supports against the portable one on the same inputs. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"
#include "gguf.h"
#include "quant.h"
#include "quant_fallback.h"
#include "wb_model.h"

static uint64_t rs = 0x243f6a8885a308d3ull;
static float frand(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((rs >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void put16(uint8_t *p, float v) {
    uint16_t h = wb_f32_to_f16(v);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

static void block_sizes_follow_the_gguf_layouts(void) {
    CHECK(wb_qtype_block_bytes(WB_QT_Q8_0) == 34 && wb_qtype_block_values(WB_QT_Q8_0) == 32);
    CHECK(wb_qtype_block_bytes(WB_QT_Q4_0) == 18 && wb_qtype_block_values(WB_QT_Q4_0) == 32);
    CHECK(wb_qtype_block_bytes(WB_QT_Q4_K) == 144 && wb_qtype_block_values(WB_QT_Q4_K) == 256);
    CHECK(wb_qtype_block_bytes(WB_QT_Q6_K) == 210 && wb_qtype_block_values(WB_QT_Q6_K) == 256);
    CHECK(wb_qtype_block_bytes(WB_QT_Q5_0) == 22 && wb_qtype_block_values(WB_QT_Q5_0) == 32);
    CHECK(wb_quant_row_bytes(WB_QT_Q5_0, 896) == 28 * 22 && wb_quant_row_bytes(WB_QT_Q5_0, 48) == 0);
    CHECK(strcmp(wb_qtype_name(WB_QT_Q5_0), "q5_0") == 0);
    CHECK(wb_qtype_block_bytes(WB_QT_IQ4_NL) == 18 && wb_qtype_block_values(WB_QT_IQ4_NL) == 32);
    CHECK(strcmp(wb_qtype_name(WB_QT_IQ4_NL), "iq4_nl") == 0 && !wb_quant_tiles_ok(WB_QT_IQ4_NL, 16, 32));
    CHECK(wb_quant_row_bytes(WB_QT_Q8_0, 896) == 28 * 34);
    CHECK(wb_quant_row_bytes(WB_QT_Q4_K, 896) == 0); /* not a multiple of 256 */
    CHECK(wb_quant_row_bytes(WB_QT_Q4_0, 0) == 0 && wb_quant_row_bytes(WB_QT_Q4_0, -32) == 0);
    float x[32] = {0};
    uint8_t out[64];
    CHECK(wb_quantize_row(WB_QT_Q4_K, out, x, 32) == -1); /* K types are read-only */
    CHECK(wb_quantize_row(WB_QT_Q8_0, out, x, 31) == -1);
    CHECK(wb_quantize_row(WB_QT_Q5_0, out, x, 32) == -1); /* read-only, as the K types */
    CHECK(wb_quantize_row(WB_QT_IQ4_NL, out, x, 32) == -1);
}

/* Blocks written byte by byte from the layout description decode to the values it defines. */
static void hand_built_blocks_decode_as_specified(void) {
    uint8_t b[210];
    float y[256];
    /* Q8_0: d = 0.5, q[i] = i - 16 */
    put16(b, 0.5f);
    for (int i = 0; i < 32; i++) b[2 + i] = (uint8_t)(int8_t)(i - 16);
    wb_dequantize_row(WB_QT_Q8_0, y, b, 32);
    for (int i = 0; i < 32; i++) CHECK(y[i] == 0.5f * (float)(i - 16));
    /* Q4_0: d = 2, byte j = (value j + 8) | (value j+16 + 8) << 4 */
    put16(b, 2.0f);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)((j & 15) | ((15 - j) << 4));
    wb_dequantize_row(WB_QT_Q4_0, y, b, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 2.0f * (float)(j - 8));
        CHECK(y[j + 16] == 2.0f * (float)(7 - j));
    }
    /* Q4_K: d = 1, dmin = 0.5; group g has scale g + 1 and min 2g (6 bits: g = 5 uses 12 and 10
     * split over the low nibble of s[9] and the top bits of s[1] / s[5]); nibble = l % 16 */
    memset(b, 0, 144);
    put16(b, 1.0f), put16(b + 2, 0.5f);
    uint8_t *s = b + 4;
    int sc[8], mn[8];
    for (int g = 0; g < 8; g++) sc[g] = g + 1 + (g == 5 ? 32 : 0), mn[g] = 2 * g + (g == 6 ? 48 : 0);
    for (int g = 0; g < 4; g++) {
        s[g] = (uint8_t)(sc[g] | ((sc[g + 4] >> 4) << 6));
        s[g + 4] = (uint8_t)(mn[g] | ((mn[g + 4] >> 4) << 6));
        s[g + 8] = (uint8_t)((sc[g + 4] & 15) | ((mn[g + 4] & 15) << 4));
    }
    uint8_t *qs = b + 16;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)((l % 16) | (((l + 3) % 16) << 4));
    wb_dequantize_row(WB_QT_Q4_K, y, b, 256);
    int bad = 0;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int g0 = 2 * c, g1 = 2 * c + 1;
            bad += y[64 * c + l] != (float)sc[g0] * (float)(l % 16) - 0.5f * (float)mn[g0];
            bad += y[64 * c + 32 + l] != (float)sc[g1] * (float)((l + 3) % 16) - 0.5f * (float)mn[g1];
        }
    CHECK_MSG(!bad, "%d Q4_K values off", bad);
    /* Q6_K: value i has q = (7 * i) % 64, scale[i / 16] = i / 16 - 8, d = 0.25 */
    memset(b, 0, 210);
    for (int i = 0; i < 256; i++) {
        const int q = (7 * i) % 64, h = i / 128, w = i % 128, l = w % 32, part = w / 32;
        uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int lo = q & 15, hi = q >> 4;
        if (part == 0) ql[l] |= (uint8_t)lo;
        if (part == 1) ql[l + 32] |= (uint8_t)lo;
        if (part == 2) ql[l] |= (uint8_t)(lo << 4);
        if (part == 3) ql[l + 32] |= (uint8_t)(lo << 4);
        qh[l] |= (uint8_t)(hi << (2 * part));
    }
    for (int k = 0; k < 16; k++) b[192 + k] = (uint8_t)(int8_t)(k - 8);
    put16(b + 208, 0.25f);
    wb_dequantize_row(WB_QT_Q6_K, y, b, 256);
    bad = 0;
    for (int i = 0; i < 256; i++) bad += y[i] != 0.25f * (float)(i / 16 - 8) * (float)((7 * i) % 64 - 32);
    CHECK_MSG(!bad, "%d Q6_K values off", bad);
}

/* Round to nearest with d stored in F16: |x - d16 q| <= d/2 + 127 |d - d16| for Q8_0, and
 * the analogue for Q4_0 (8 steps either side). */
static void quantization_error_is_within_half_a_step(void) {
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    for (int i = 0; i < N; i++) x[i] = frand() * (i % 97 == 0 ? 40.0f : 1.0f);
    for (int i = 0; i < 32; i++) x[i] = 0.0f; /* a zero block */
    for (int t = 0; t < 2; t++) {
        const wb_qtype qt = t ? WB_QT_Q4_0 : WB_QT_Q8_0;
        CHECK(wb_quantize_row(qt, q, x, N) == 0);
        wb_dequantize_row(qt, y, q, N);
        int bad = 0;
        for (int b = 0; b < N / 32; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
            const float step = t ? amax / 8.0f : amax / 127.0f;
            for (int i = 0; i < 32; i++) {
                /* Q4_0 reaches -8 steps on the side of the largest value and only 7 on the
                 * other: values past 7.5 steps there clamp to 7, up to a step away */
                const float xi = x[32 * b + i];
                const int clamps = t && fabsf(xi) > 7.5f * step;
                const float lim = clamps ? 1.01f : t ? 0.51f : 0.57f;
                bad += fabsf(y[32 * b + i] - xi) > step * lim + 1e-30f;
            }
        }
        CHECK_MSG(!bad, "%s: %d values beyond half a step", wb_qtype_name(qt), bad);
        for (int i = 0; i < 32; i++) CHECK(y[i] == 0.0f);
    }
}

/* wb_quantize_row against its specification in libm's words (quant.h): Q8_0 q = roundf(x / d)
 * clamped to +-127 with the reciprocal 1 / d, Q4_0 nibble = min(15, floorf(x / d + 8.5)); over
 * random blocks of many magnitudes and blocks whose values sit on exact halves of a step. */
static void quantize_row_matches_its_libm_specification(void) {
    enum { N = 32 * 400 };
    static float x[N];
    static uint8_t got[N * 2], want[N * 2];
    for (int i = 0; i < N; i++) x[i] = frand() * powf(10.0f, (float)((i / 32) % 13 - 6));
    for (int b = 0; b < 40; b++) /* d = 1 (Q8_0) or 2 (Q4_0) exactly, values on halves */
        for (int i = 0; i < 32; i++) {
            float *v = x + 32 * (size_t)b;
            v[i] = i == 0 ? (b & 1 ? -127.0f : 127.0f) : (float)((int)(frand() * 126.0f)) + 0.5f;
            if (b >= 20) v[i] = i == 0 ? -16.0f : (float)((int)(frand() * 15.0f)) + 1.0f;
        }
    for (int t = 0; t < 2; t++) {
        const wb_qtype qt = t ? WB_QT_Q4_0 : WB_QT_Q8_0;
        CHECK(wb_quantize_row(qt, got, x, N) == 0);
        uint8_t *o = want;
        for (int b = 0; b < N / 32; b++) {
            const float *v = x + 32 * (size_t)b;
            float amax = 0.0f, mx = 0.0f;
            for (int i = 0; i < 32; i++)
                if (fabsf(v[i]) > amax) amax = fabsf(v[i]), mx = v[i];
            const float d = t ? mx / -8.0f : amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            const uint16_t h = wb_f32_to_f16(d);
            o[0] = (uint8_t)h, o[1] = (uint8_t)(h >> 8);
            for (int i = 0; i < (t ? 16 : 32); i++) {
                if (!t) {
                    const float q = roundf(v[i] * id);
                    o[2 + i] = (uint8_t)(int8_t)(q > 127.0f ? 127 : q < -127.0f ? -127 : (int)q);
                } else {
                    const float lo = floorf(v[i] * id + 8.5f), hi = floorf(v[i + 16] * id + 8.5f);
                    const int l = lo < 0 ? 0 : lo > 15 ? 15 : (int)lo, u = hi < 0 ? 0 : hi > 15 ? 15 : (int)hi;
                    o[2 + i] = (uint8_t)(l | (u << 4));
                }
            }
            o += t ? 18 : 34;
        }
        const size_t bytes = (size_t)(o - want);
        size_t first = bytes;
        for (size_t i = 0; i < bytes && first == bytes; i++)
            if (got[i] != want[i]) first = i;
        CHECK_MSG(first == bytes, "%s: byte %zu is 0x%02x, the specification gives 0x%02x",
                  wb_qtype_name(qt), first, first < bytes ? got[first] : 0, first < bytes ? want[first] : 0);
    }
}

/* ------------------------------------------------------------------ the kernels */

enum { N_TYPES = 9 };
static const wb_qtype all_types[N_TYPES] = {WB_QT_Q8_0, WB_QT_Q4_0, WB_QT_Q4_K, WB_QT_Q6_K, WB_QT_Q5_0,
                                            WB_QT_IQ4_NL, WB_QT_Q5_K, WB_QT_Q4_1, WB_QT_Q5_1};
/* the types with the 16-row tile layout */
static const wb_qtype tile_types[3] = {WB_QT_Q8_0, WB_QT_Q4_0, WB_QT_Q5_0};

/* Rows of random blocks of type t with sane scales (finite, modest F16 values): Q8_0 / Q4_0
 * through the quantizer, the K types and Q5_0 as random bytes with their F16 fields set (every
 * value and fifth-bit pattern turns up; some Q5_0 blocks all 0 or all 31, the extremes). */
static void random_rows(wb_qtype t, uint8_t *Wq, float *Wd, int rows, int in) {
    const size_t rb = wb_quant_row_bytes(t, in);
    float *tmp = malloc(sizeof(float) * (size_t)in);
    for (int r = 0; r < rows; r++) {
        uint8_t *row = Wq + rb * (size_t)r;
        if (t == WB_QT_Q8_0 || t == WB_QT_Q4_0) {
            for (int i = 0; i < in; i++) tmp[i] = frand() * (i % 61 == 0 ? 4.0f : 1.0f);
            wb_quantize_row(t, row, tmp, in);
        } else {
            for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)(frand() * 128 + 128);
            for (int b = 0; t == WB_QT_Q5_0 && b < in / 32; b++) {
                uint8_t *blk = row + (size_t)b * 22;
                put16(blk, 0.02f * (1.0f + 0.5f * (float)((r + b) % 4)) * (b % 7 == 3 ? -1.0f : 1.0f));
                if ((r + b) % 11 == 5) memset(blk + 2, 0xff, 20); /* every q 31 (value 15) */
                if ((r + b) % 11 == 6) memset(blk + 2, 0x00, 20); /* every q 0 (value -16) */
            }
            for (int b = 0; t == WB_QT_IQ4_NL && b < in / 32; b++) { /* d of either sign */
                uint8_t *blk = row + (size_t)b * 18;
                put16(blk, 0.0003f * (1.0f + 0.5f * (float)((r + b) % 4)) * (b % 5 == 2 ? -1.0f : 1.0f));
                if ((r + b) % 13 == 4) memset(blk + 2, 0x00, 16); /* every level -127 */
            }
            for (int b = 0; (t == WB_QT_Q4_1 || t == WB_QT_Q5_1) && b < in / 32; b++) { /* m of either sign */
                uint8_t *blk = row + (size_t)b * wb_qtype_block_bytes(t);
                put16(blk, 0.01f * (1.0f + 0.5f * (float)((r + b) % 4)));
                put16(blk + 2, 0.08f * (b % 3 == 1 ? 1.0f : -1.0f) * (1.0f + 0.25f * (float)(r % 3)));
                if ((r + b) % 9 == 4) memset(blk + 4, 0xff, wb_qtype_block_bytes(t) - 4); /* every q at its top */
            }
            for (int b = 0; wb_qtype_block_values(t) == 256 && b < in / 256; b++) {
                uint8_t *blk = row + (size_t)b * wb_qtype_block_bytes(t);
                if (t == WB_QT_Q4_K) put16(blk, 0.01f + 0.002f * (float)(r % 5)), put16(blk + 2, 0.02f);
                else if (t == WB_QT_Q5_K) {
                    put16(blk, 0.005f + 0.001f * (float)(r % 5)), put16(blk + 2, 0.02f);
                    /* every q 31 (int16 pair sums at their largest against a block of 127s) */
                    if ((r + b) % 5 == 2) memset(blk + 16, 0xff, 160);
                } else put16(blk + 208, 0.003f * (1.0f + 0.25f * (float)(b % 3)));
            }
        }
        wb_dequantize_row(t, Wd + (size_t)r * in, row, in);
    }
    free(tmp);
}

/* The bound of the int8 inputs: each x within half a step (max|x| of its block / 254), so an
 * output is within sum |w_i| step_i / 2 of the float dot of the dequantized row. */
static double input_rounding_bound(const float *w, const float *x, int in) {
    double s = 0;
    for (int b = 0; b < in / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        for (int i = 0; i < 32; i++) s += fabs((double)w[32 * b + i]) * amax / 254.0;
    }
    return s;
}

/* Every variant this CPU runs, every type, on awkward shapes (rows not a multiple of 16, a row
 * range starting inside, one input and many): (a) the portable one is within the input-rounding
 * bound of the double dot of the dequantized rows; (b) the others agree with portable to float
 * rounding (the same integer sums, FMA against multiply-add); (c) the FMA variants (AVX2, AVX2 +
 * AVX-VNNI, AVX-512) agree with each other bit for bit; (d) rows outside [r0, r1) untouched;
 * (e) bias and accumulate. */
static void every_variant_matches_portable_and_the_float_reference(void) {
    enum { IN = 1024 + 256, ROWS = 37, NB = 21 };
    static float Wd[ROWS * IN], X[NB * IN], Yr[NB * ROWS], Ym[NB * ROWS], Yb[NB * ROWS];
    static float Y0[NB * ROWS], Y1[NB * ROWS], Yf[NB * ROWS];
    static uint8_t Wq[ROWS * IN * 2];
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    CHECK(nv >= 1 && strcmp(wb_quant_kernels_name(v[0]), "portable") == 0);
    if (wb_cpu()->avx512vnni && wb_cpu()->avx512vl && wb_isa_best() == WB_ISA_AVX512) /* the tile kernels are among them */
        CHECK(nv >= 3 && strstr(wb_quant_kernels_name(v[nv - 1]), "avx512") != NULL);
    for (int i = 0; i < NB * IN; i++) X[i] = frand() * (i % 37 == 0 ? 6.0f : 1.5f);
    /* in every input one block of equal values: its q all 127 or all -127, the largest integer sums */
    for (int j = 0; j < NB; j++)
        for (int i = 0; i < 32; i++) X[j * IN + 32 * ((3 * j) % (IN / 32)) + i] = j % 2 ? 1.25f : -1.25f;
    float bias[ROWS];
    for (int r = 0; r < ROWS; r++) bias[r] = frand();
    for (int t = 0; t < N_TYPES; t++) {
        const wb_qtype qt = all_types[t];
        random_rows(qt, Wq, Wd, ROWS, IN);
        for (int j = 0; j < NB; j++)
            for (int r = 0; r < ROWS; r++) {
                const float *w = Wd + (size_t)r * IN, *x = X + (size_t)j * IN;
                double s = 0, m = 0;
                for (int i = 0; i < IN; i++) s += (double)w[i] * x[i], m += fabs((double)w[i] * x[i]);
                Yr[j * ROWS + r] = (float)s;
                Ym[j * ROWS + r] = (float)m;
                Yb[j * ROWS + r] = (float)input_rounding_bound(w, x, IN);
            }
        for (int nb = 1; nb <= NB; nb = nb == 1 ? 2 : nb == 2 ? 6 : nb == 6 ? 17 : nb == 17 ? NB : NB + 1) {
            int have_fma = 0;
            for (int k = 0; k < nv; k++) {
                float *Y = k ? Y1 : Y0;
                for (int i = 0; i < NB * ROWS; i++) Y[i] = -7.0f;
                wb_gemm_q_with(v[k], qt, Y, ROWS, X, IN, nb, Wq, NULL, IN, 3, ROWS, 0, NULL);
                int bad = 0, outside = 0;
                for (int j = 0; j < nb; j++)
                    for (int r = 0; r < ROWS; r++) {
                        const float a = Y[j * ROWS + r];
                        if (r < 3) {
                            outside += a != -7.0f;
                            continue;
                        }
                        if (k == 0) bad += fabs(a - Yr[j * ROWS + r]) > Yb[j * ROWS + r] * 1.001 + 1e-5 * Ym[j * ROWS + r];
                        else bad += fabsf(a - Y0[j * ROWS + r]) > 1e-5f * Ym[j * ROWS + r] + 1e-6f;
                    }
                CHECK_MSG(!bad && !outside, "%s nb=%d %s: %d outputs off %s, %d written outside",
                          wb_qtype_name(qt), nb, wb_quant_kernels_name(v[k]), bad,
                          k ? "portable" : "the float reference", outside);
                if (k) {
                    if (have_fma) {
                        CHECK_MSG(memcmp(Y1, Yf, sizeof Y1) == 0, "%s nb=%d %s differs from the other FMA variants",
                                  wb_qtype_name(qt), nb, wb_quant_kernels_name(v[k]));
                    } else {
                        memcpy(Yf, Y1, sizeof Yf);
                        have_fma = 1;
                    }
                }
            }
        }
        for (int k = 0; k < nv; k++) { /* bias and accumulate, 1 input, 5 and 9 (the tiles) */
            for (int nb = 1; nb <= 9; nb += 4) {
                float Ya[9 * ROWS], Yc[9 * ROWS];
                for (int i = 0; i < 9 * ROWS; i++) Ya[i] = Yc[i] = frand();
                wb_gemm_q_with(v[k], qt, Ya, ROWS, X, IN, nb, Wq, bias, IN, 0, ROWS, 1, NULL);
                int bad = 0;
                for (int j = 0; j < nb; j++)
                    for (int r = 0; r < ROWS; r++)
                        bad += fabs(Ya[j * ROWS + r] - (Yc[j * ROWS + r] + bias[r] + Yr[j * ROWS + r])) >
                               Yb[j * ROWS + r] * 1.001 + 1e-5 * Ym[j * ROWS + r] + 1e-5;
                CHECK_MSG(!bad, "%s %s nb=%d bias+accumulate: %d off", wb_qtype_name(qt),
                          wb_quant_kernels_name(v[k]), nb, bad);
            }
        }
    }
}

/* Any batch size: each input gets the bits it gets alone (batched decode and prompts of a
 * quantized model equal to one sequence at a time), through the dispatch table at every level
 * and through every variant; wb_quant_dot is the same number too. */
static void quant_batch_rows_equal_alone(void) {
    enum { IN = 512 + 256, ROWS = 19, NB = 50 };
    static float Wd[ROWS * IN], X[NB * IN], Yb[NB * ROWS], Y1[ROWS];
    static uint8_t Wq[ROWS * IN * 2];
    static _Alignas(64) uint8_t xq[8192];
    for (int i = 0; i < NB * IN; i++) X[i] = frand();
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    for (int t = 0; t < N_TYPES; t++) {
        const wb_qtype qt = all_types[t];
        random_rows(qt, Wq, Wd, ROWS, IN);
        const size_t rb = wb_quant_row_bytes(qt, IN);
        for (int k = 0; k < nv; k++) {
            wb_gemm_q_with(v[k], qt, Yb, ROWS, X, IN, NB, Wq, NULL, IN, 0, ROWS, 0, NULL);
            int diff = 0;
            for (int j = 0; j < NB; j++) {
                wb_gemm_q_with(v[k], qt, Y1, ROWS, X + (size_t)j * IN, IN, 1, Wq, NULL, IN, 0, ROWS, 0, NULL);
                diff += memcmp(Y1, Yb + (size_t)j * ROWS, sizeof Y1) != 0;
            }
            CHECK_MSG(!diff, "%s %s: %d inputs differ from alone", wb_qtype_name(qt),
                      wb_quant_kernels_name(v[k]), diff);
            /* with a bias, added to what Y holds: the same bits too (the order of the adds) */
            float bias[ROWS];
            for (int r = 0; r < ROWS; r++) bias[r] = frand();
            for (int i = 0; i < NB * ROWS; i++) Yb[i] = (float)(i % 7) * 0.375f - 1.0f;
            wb_gemm_q_with(v[k], qt, Yb, ROWS, X, IN, NB, Wq, bias, IN, 0, ROWS, 1, NULL);
            diff = 0;
            for (int j = 0; j < NB; j++) {
                for (int r = 0; r < ROWS; r++) Y1[r] = (float)((j * ROWS + r) % 7) * 0.375f - 1.0f;
                wb_gemm_q_with(v[k], qt, Y1, ROWS, X + (size_t)j * IN, IN, 1, Wq, bias, IN, 0, ROWS, 1, NULL);
                diff += memcmp(Y1, Yb + (size_t)j * ROWS, sizeof Y1) != 0;
            }
            CHECK_MSG(!diff, "%s %s: with bias and accumulate, %d inputs differ from alone", wb_qtype_name(qt),
                      wb_quant_kernels_name(v[k]), diff);
        }
        for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            wb_gemm_q(qt, Yb, ROWS, X, IN, 7, Wq, NULL, IN, 0, ROWS, 0, NULL);
            CHECK(wb_quant_act_bytes(IN) <= sizeof xq);
            wb_quantize_act(xq, X + 5 * IN, IN);
            int diff = 0;
            for (int r = 0; r < ROWS; r++)
                diff += wb_quant_dot(qt, Wq + rb * (size_t)r, xq, IN) != Yb[5 * ROWS + r];
            wb_isa_limit(o);
            CHECK_MSG(!diff, "%s %s: wb_quant_dot differs from the batch in %d rows", wb_qtype_name(qt),
                      wb_isa_name((wb_isa)lv), diff);
        }
    }
}

/* Inputs quantized once (wb_quantize_act, under any level) and handed to wb_gemm_q_act: the
 * bits of wb_gemm_q on the float rows, for every variant, one input and a batch, a row range and
 * a bias with accumulation (how the model shares one quantized copy of q/k/v's and gate/up's
 * input between matrices and threads). */
static void prequantized_inputs_give_the_same_bits(void) {
    enum { IN = 512 + 256, ROWS = 37, NB = 23 };
    static float Wd[ROWS * IN], X[NB * IN], bias[ROWS], Ya[NB * ROWS], Yb[NB * ROWS];
    static uint8_t Wq[ROWS * IN * 2];
    static _Alignas(64) uint8_t xq[NB * 1088];
    const size_t ab = wb_quant_act_bytes(IN);
    CHECK(ab * NB <= sizeof xq && ab % 64 == 0);
    for (int i = 0; i < NB * IN; i++) X[i] = frand();
    for (int i = 0; i < ROWS; i++) bias[i] = frand();
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    for (int t = 0; t < N_TYPES; t++) {
        const wb_qtype qt = all_types[t];
        random_rows(qt, Wq, Wd, ROWS, IN);
        for (int k = 0; k < nv; k++) {
            wb_isa o = wb_isa_limit((wb_isa)(k % ((int)wb_isa_best() + 1))); /* any level's bytes */
            for (int j = 0; j < NB; j++) wb_quantize_act(xq + ab * (size_t)j, X + (size_t)j * IN, IN);
            wb_isa_limit(o);
            const int nbs[3] = {1, 2, NB};
            for (int c = 0; c < 3; c++) {
                const int nb = nbs[c];
                for (int i = 0; i < NB * ROWS; i++) Ya[i] = Yb[i] = (float)i;
                wb_gemm_q_with(v[k], qt, Ya, ROWS, X, IN, nb, Wq, bias, IN, 2, ROWS - 3, 1, NULL);
                wb_gemm_q_act_with(v[k], qt, Yb, ROWS, xq, nb, Wq, bias, IN, 2, ROWS - 3, 1);
                CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s %s nb %d: pre-quantized inputs differ",
                          wb_qtype_name(qt), wb_quant_kernels_name(v[k]), nb);
                wb_gemm_q_with(v[k], qt, Ya, ROWS, X, IN, nb, Wq, NULL, IN, 0, ROWS, 0, NULL);
                wb_gemm_q_act_with(v[k], qt, Yb, ROWS, xq, nb, Wq, NULL, IN, 0, ROWS, 0);
                CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s %s nb %d: pre-quantized inputs differ",
                          wb_qtype_name(qt), wb_quant_kernels_name(v[k]), nb);
            }
        }
        wb_gemm_q(qt, Ya, ROWS, X, IN, NB, Wq, NULL, IN, 0, ROWS, 0, NULL);
        wb_gemm_q_act(qt, Yb, ROWS, xq, NB, Wq, NULL, IN, 0, ROWS, 0);
        CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s: wb_gemm_q_act differs", wb_qtype_name(qt));
    }
}

/* The input quantization is the same bytes at every level (the vector code rounds as the
 * scalar one), including zero blocks, tiny blocks and a NaN. */
static void input_quantization_is_the_same_at_every_level(void) {
    enum { IN = 32 * 41 }; /* two groups of 16 blocks (the vector code's unit) and 9 alone */
    static float x[IN];
    for (int i = 0; i < IN; i++) x[i] = frand() * 3.0f * (float)(1 + (i / 32) % 7);
    for (int i = 0; i < 32; i++) x[i] = 0.0f, x[32 + i] = 1e-38f * (float)(i % 3), x[64 + i] = (float)(i - 16) * 0.5f;
    x[100] = NAN;
    for (int i = 0; i < 32; i++) x[32 * 20 + i] = 0.0f, x[32 * 37 + i] = 1e-38f; /* inside a group, and alone */
    x[32 * 17 + 3] = NAN, x[32 * 18 + 20] = NAN, x[32 * 19 + 31] = INFINITY, x[32 * 38 + 17] = NAN;
    _Alignas(64) static uint8_t a0[8192], a1[8192];
    const size_t n = wb_quant_act_bytes(IN);
    CHECK(n > 0 && n <= sizeof a0 && n % 64 == 0 && wb_quant_act_bytes(33) == 0);
    wb_isa o = wb_isa_limit(WB_ISA_PORTABLE);
    wb_quantize_act(a0, x, IN);
    for (int lv = 1; lv <= (int)wb_isa_best(); lv++) {
        wb_isa_limit((wb_isa)lv);
        memset(a1, 0xee, sizeof a1);
        wb_quantize_act(a1, x, IN);
        CHECK_MSG(memcmp(a0, a1, n) == 0, "%s quantizes inputs differently", wb_isa_name((wb_isa)lv));
    }
    wb_isa_limit(o);
    const int8_t *q = (const int8_t *)a0;
    for (int i = 0; i < 64; i++) CHECK(q[i] == 0); /* zeros and values below 1e-30 */
    CHECK(q[64] == -127 && q[64 + 31] == 119); /* max |x| = 8 -> 127; 7.5 * 127 / 8 = 119.06 */
}

/* Hand-computed GGUF blocks: what wb_quantize_row writes is what GGUF's reference quantizers
 * write for the same values (so a saved Q8_0 / Q4_0 tensor reloads, here or in llama.cpp, to the
 * same weights). Q8_0 rounds halves away from zero; Q4_0 maps the value of largest magnitude to
 * nibble 0 (d = x_m / -8) and rounds with floor(x / d + 8.5). */
static void quantize_row_writes_the_gguf_reference_bytes(void) {
    float x[32];
    uint8_t b[34];
    /* Q8_0: max |x| = 127 -> d = 1 exactly (F16 0x3c00); 2.5 -> 3 and -2.5 -> -3 (halves away
     * from zero), 126.4 -> 126, -127 -> -127 */
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 10);
    x[0] = 2.5f, x[1] = -2.5f, x[2] = 126.4f, x[3] = -127.0f, x[4] = 0.5f;
    CHECK(wb_quantize_row(WB_QT_Q8_0, b, x, 32) == 0);
    CHECK(b[0] == 0x00 && b[1] == 0x3c);
    CHECK((int8_t)b[2] == 3 && (int8_t)b[3] == -3 && (int8_t)b[4] == 126 && (int8_t)b[5] == -127 &&
          (int8_t)b[6] == 1);
    for (int i = 5; i < 32; i++) CHECK((int8_t)b[2 + i] == i - 10);
    /* Q4_0: x_m = -16 -> d = 2 (F16 0x4000); x = 2k maps to nibble k + 8, clamped at 15; value j
     * in the low nibble of byte j, value j + 16 in the high nibble */
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 16) - 8.0f; /* -8..7, d = 1 if alone */
    x[5] = -16.0f, x[20] = 15.0f, x[21] = 3.0f, x[22] = -1.0f;
    CHECK(wb_quantize_row(WB_QT_Q4_0, b, x, 32) == 0);
    CHECK(b[0] == 0x00 && b[1] == 0x40);
    for (int j = 0; j < 16; j++) {
        int lo = (int)floorf(x[j] / 2.0f + 8.5f), hi = (int)floorf(x[j + 16] / 2.0f + 8.5f);
        lo = lo > 15 ? 15 : lo, hi = hi > 15 ? 15 : hi;
        CHECK_MSG(b[2 + j] == (uint8_t)(lo | (hi << 4)), "Q4_0 byte %d = 0x%02x", j, b[2 + j]);
    }
    CHECK((b[2 + 5] & 15) == 0);        /* -16 / 2 + 8.5 = 0.5 -> 0 */
    CHECK((b[2 + 4] >> 4) == 15);       /* 15 / 2 + 8.5 = 16 -> clamped to 15 */
    CHECK((b[2 + 5] >> 4) == 10);       /* 3 / 2 + 8.5 = 10 */
    CHECK((b[2 + 6] >> 4) == 8);        /* -1 / 2 + 8.5 = 8 */
}


/* The 16-row tile layout (quant.h): hand-placed bytes where the layout says, every row read back
 * in the file layout, and every variant's products from the tiles bit for bit the file layout's
 * with the same variant: one input and batches (1, 2, 11, 23), row ranges starting and ending
 * inside a group, a view starting inside a group (off), bias and accumulation, float and
 * pre-quantized inputs, and more than one chunk of blocks (in = 1088 > 32 blocks). */
static void tile_layout_gives_the_file_layout_bits(void) {
    enum { IN = 1088, ROWS = 48, NB = 23 };
    static float Wd[ROWS * IN], X[NB * IN], bias[ROWS], Ya[NB * ROWS], Yb[NB * ROWS];
    static uint8_t Wq[ROWS * IN * 2], Wt[ROWS * IN * 2], row[IN * 2];
    static _Alignas(64) uint8_t xq[NB * 1536];
    const size_t ab = wb_quant_act_bytes(IN);
    CHECK(ab * NB <= sizeof xq);
    CHECK(!wb_quant_tiles_ok(WB_QT_Q4_K, 16, 256) && !wb_quant_tiles_ok(WB_QT_Q8_0, 24, 32));
    CHECK(wb_quant_tiles_ok(WB_QT_Q8_0, 32, 64) && wb_quant_tiles_ok(WB_QT_Q4_0, 16, 32));
    CHECK(wb_quant_tiles_ok(WB_QT_Q5_0, 16, 896) && !wb_quant_tiles_ok(WB_QT_Q5_0, 8, 896));
    for (int i = 0; i < NB * IN; i++) X[i] = frand();
    for (int i = 0; i < ROWS; i++) bias[i] = frand();
    for (int j = 0; j < NB; j++) wb_quantize_act(xq + ab * (size_t)j, X + (size_t)j * IN, IN);
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    for (int t = 0; t < 3; t++) {
        const wb_qtype qt = tile_types[t];
        const size_t rb = wb_quant_row_bytes(qt, IN), bs = wb_qtype_block_bytes(qt);
        random_rows(qt, Wq, Wd, ROWS, IN);
        memset(Wt, 0xa5, sizeof Wt);
        wb_quant_to_tiles(qt, Wt, Wq, ROWS, IN);
        /* the layout as documented: row 21 (group 1, lane 5), block 3, value byte 6, and scale */
        const uint8_t *blk = Wq + 21 * rb + 3 * bs, *tb = Wt + 16 * rb + 3 * 16 * bs;
        CHECK(tb[64 * 1 + 4 * 5 + 2] == (blk[2 + 6] ^ (qt == WB_QT_Q8_0 ? 0x80 : 0)));
        CHECK(tb[16 * (bs - 2) + 2 * 5] == blk[0] && tb[16 * (bs - 2) + 2 * 5 + 1] == blk[1]);
        CHECK(Wt[ROWS * rb] == 0xa5); /* nothing written past the matrix */
        int bad = 0;
        for (int r = 0; r < ROWS; r++) {
            wb_quant_tile_row(qt, row, Wt, r, IN);
            bad += memcmp(row, Wq + rb * (size_t)r, rb) != 0;
        }
        CHECK_MSG(!bad, "%s: %d rows read back wrong", wb_qtype_name(qt), bad);
        const int nbs[4] = {1, 2, 11, NB};
        const int ranges[4][2] = {{0, ROWS}, {8, 40}, {3, 45}, {17, 30}};
        for (int k = 0; k < nv; k++)
            for (int c = 0; c < 4; c++)
                for (int g = 0; g < 4; g++) {
                    const int nb = nbs[c], r0 = ranges[g][0], r1 = ranges[g][1], acc = g & 1;
                    const float *bb = g >= 2 ? bias : NULL;
                    for (int i = 0; i < NB * ROWS; i++) Ya[i] = Yb[i] = (float)i;
                    wb_gemm_q_with(v[k], qt, Ya, ROWS, X, IN, nb, Wq, bb, IN, r0, r1, acc, NULL);
                    wb_gemm_qt_with(v[k], qt, 0, Yb, ROWS, X, IN, nb, Wt, bb, IN, r0, r1, acc, NULL);
                    CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s %s nb %d rows %d-%d: tiles differ",
                              wb_qtype_name(qt), wb_quant_kernels_name(v[k]), nb, r0, r1);
                    for (int i = 0; i < NB * ROWS; i++) Yb[i] = (float)i;
                    wb_gemm_qt_act_with(v[k], qt, 0, Yb, ROWS, xq, nb, Wt, bb, IN, r0, r1, acc);
                    CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s %s nb %d rows %d-%d: tiles (act) differ",
                              wb_qtype_name(qt), wb_quant_kernels_name(v[k]), nb, r0, r1);
                    /* a view of rows 5.. (off 5): its rows 0..24 are the file's rows 5..29 */
                    for (int i = 0; i < NB * ROWS; i++) Ya[i] = Yb[i] = (float)i;
                    wb_gemm_q_with(v[k], qt, Ya, ROWS, X, IN, nb, Wq + 5 * rb, bb, IN, 0, 25, acc, NULL);
                    wb_gemm_qt_with(v[k], qt, 5, Yb, ROWS, X, IN, nb, Wt, bb, IN, 0, 25, acc, NULL);
                    CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s %s nb %d: an offset view differs",
                              wb_qtype_name(qt), wb_quant_kernels_name(v[k]), nb);
                }
        /* through the level in use, as the model calls it */
        wb_gemm_q(qt, Ya, ROWS, X, IN, NB, Wq, NULL, IN, 0, ROWS, 0, NULL);
        wb_gemm_qt(qt, 0, Yb, ROWS, X, IN, NB, Wt, NULL, IN, 0, ROWS, 0, NULL);
        CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s: wb_gemm_qt differs", wb_qtype_name(qt));
        wb_gemm_qt_act(qt, 0, Yb, ROWS, xq, NB, Wt, NULL, IN, 0, ROWS, 0);
        CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s: wb_gemm_qt_act differs", wb_qtype_name(qt));
    }
}
/* A prompt phase's inputs grouped once (wb_quant_group_act, filled in two ranges as two threads
 * would, in either order) give every variant that has the kernel the bits of its tile-layout
 * product on the float rows (row ranges inside groups, bias, accumulate, one chunk and two);
 * variants without it, nb < 2 and other types have no such buffer. */
static void grouped_inputs_give_the_tile_bits(void) {
    enum { ROWS = 48, NB = 23, MAXIN = 1088 };
    static float X[NB * MAXIN], bias[ROWS], Ya[NB * ROWS], Yb[NB * ROWS], Wd[ROWS * MAXIN];
    static uint8_t Wq[ROWS * MAXIN * 2], Wt[ROWS * MAXIN * 2];
    static _Alignas(64) uint8_t G[NB * MAXIN * 2];
    for (int i = 0; i < NB * MAXIN; i++) X[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
    for (int i = 0; i < ROWS; i++) bias[i] = frand();
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    int ran = 0;
    CHECK(!wb_quant_group_bytes_with(v[0], WB_QT_Q8_0, 4, 64));
    for (int k = 0; k < nv; k++) {
        CHECK(!wb_quant_group_bytes_with(v[k], WB_QT_Q8_0, 1, 64));
        CHECK(!wb_quant_group_bytes_with(v[k], WB_QT_Q4_K, 4, 256));
        CHECK(!wb_quant_group_bytes_with(v[k], WB_QT_Q8_0, 4, 48));
    }
    const int ins[2] = {96, MAXIN}, nbs[5] = {2, 3, 11, 21, NB};
    const int ranges[4][2] = {{0, ROWS}, {8, 40}, {3, 45}, {17, 30}};
    for (int t = 0; t < 3; t++)
        for (int s = 0; s < 2; s++) {
            const wb_qtype qt = tile_types[t];
            const int in = ins[s];
            random_rows(qt, Wq, Wd, ROWS, in);
            wb_quant_to_tiles(qt, Wt, Wq, ROWS, in);
            for (int k = 0; k < nv; k++)
                for (int c = 0; c < 5; c++) {
                    const int nb = nbs[c];
                    const size_t gb = wb_quant_group_bytes_with(v[k], qt, nb, in);
                    if (!gb) continue;
                    ran++;
                    CHECK(gb % 64 == 0 && gb <= sizeof G && gb >= (size_t)nb * (size_t)in);
                    memset(G, 0xa5, sizeof G);
                    const int cut = (2 * nb + 1) / 3;
                    if (c & 1) {
                        wb_quant_group_act_with(v[k], qt, G, X, (size_t)MAXIN, nb, in, cut, nb);
                        wb_quant_group_act_with(v[k], qt, G, X, (size_t)MAXIN, nb, in, 0, cut);
                    } else {
                        wb_quant_group_act_with(v[k], qt, G, X, (size_t)MAXIN, nb, in, 0, cut);
                        wb_quant_group_act_with(v[k], qt, G, X, (size_t)MAXIN, nb, in, cut, nb);
                    }
                    for (int g = 0; g < 4; g++) {
                        const int r0 = ranges[g][0], r1 = ranges[g][1], acc = g & 1;
                        const float *bb = g >= 2 ? bias : NULL;
                        for (int i = 0; i < NB * ROWS; i++) Ya[i] = Yb[i] = (float)i;
                        wb_gemm_qt_with(v[k], qt, 0, Ya, ROWS, X, MAXIN, nb, Wt, bb, in, r0, r1, acc, NULL);
                        wb_gemm_qt_group_with(v[k], qt, Yb, ROWS, G, nb, Wt, bb, in, r0, r1, acc);
                        CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s %s in %d nb %d rows %d-%d: grouped differ",
                                  wb_qtype_name(qt), wb_quant_kernels_name(v[k]), in, nb, r0, r1);
                    }
                }
            /* through the level in use, as the model calls it */
            const size_t gb = wb_quant_group_bytes(qt, NB, in);
            if (!gb) continue;
            wb_quant_group_act(qt, G, X, (size_t)MAXIN, NB, in, 0, NB);
            wb_gemm_q(qt, Ya, ROWS, X, MAXIN, NB, Wq, NULL, in, 0, ROWS, 0, NULL);
            wb_gemm_qt_group(qt, Yb, ROWS, G, NB, Wt, NULL, in, 0, ROWS, 0);
            CHECK_MSG(memcmp(Ya, Yb, sizeof Ya) == 0, "%s in %d: wb_gemm_qt_group differs", wb_qtype_name(qt), in);
        }
    const wb_cpu_features *f = wb_cpu();
    if (wb_isa_best() >= WB_ISA_AVX512 && f->avx512vnni) CHECK(ran > 0);
}

/* Q5_0's decode is quant_fallback.c's (the reference it replaced at load) bit for bit, over
 * random blocks and the extremes: q 0 and 31 (values -16, 15), qh all clear, all set, one bit,
 * alternating; d = +-65504, +-0, the smallest and largest f16 subnormals; and a hand-built block
 * decodes as the layout says. */
static void q5_0_decodes_as_the_fallback_reference(void) {
    enum { NBLK = 600 };
    static uint8_t raw[NBLK * 22];
    static float a[NBLK * 32], b[NBLK * 32];
    const uint16_t ds[] = {0x7bff, 0xfbff, 0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x3c00, 0xbc00};
    const uint32_t hs[] = {0u, 0xffffffffu, 1u, 0x80000000u, 0x00010000u, 0x0000ffffu, 0x55555555u, 0xaaaaaaaau};
    for (int k = 0; k < NBLK; k++) {
        uint8_t *p = raw + 22 * (size_t)k;
        for (int i = 0; i < 22; i++) p[i] = (uint8_t)(frand() * 128 + 128);
        const uint16_t d = k < 160 ? ds[k % 10] : wb_f32_to_f16(frand() * 4.0f);
        p[0] = (uint8_t)d, p[1] = (uint8_t)(d >> 8);
        if (k < 320) { /* qh patterns against qs 0x00, 0xff, 0x0f, 0xf0 and random */
            const uint32_t h = hs[(k / 10) % 8];
            for (int i = 0; i < 4; i++) p[2 + i] = (uint8_t)(h >> (8 * i));
            const int qs = (k / 80) % 4;
            if ((k / 10) % 5 != 4) memset(p + 6, qs == 0 ? 0x00 : qs == 1 ? 0xff : qs == 2 ? 0x0f : 0xf0, 16);
        }
    }
    wb_dequantize_row(WB_QT_Q5_0, a, raw, NBLK * 32);
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q5_0, b, raw, NBLK * 32) == 0);
    size_t first = (size_t)NBLK * 32;
    for (size_t i = 0; i < (size_t)NBLK * 32 && first == (size_t)NBLK * 32; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i])) first = i;
    CHECK_MSG(first == (size_t)NBLK * 32, "Q5_0 value %zu: %g, the fallback decode %g", first,
              first < (size_t)NBLK * 32 ? a[first] : 0.0f, first < (size_t)NBLK * 32 ? b[first] : 0.0f);
    float r[64];
    wb_dequantize_range(WB_QT_Q5_0, r, raw, 64, 64); /* blocks 2 and 3 */
    CHECK(memcmp(r, a + 64, sizeof r) == 0);
    /* by hand: d = 0.5, value j from q = j (j < 16: nibble j, no fifth bit; j >= 16: nibble
     * j - 16 and the fifth bit) */
    uint8_t h[22];
    put16(h, 0.5f);
    h[2] = h[3] = 0x00, h[4] = h[5] = 0xff;
    for (int j = 0; j < 16; j++) h[6 + j] = (uint8_t)(j | (j << 4));
    float y[32];
    wb_dequantize_row(WB_QT_Q5_0, y, h, 32);
    int bad = 0;
    for (int j = 0; j < 32; j++) bad += y[j] != 0.5f * (float)(j - 16);
    CHECK_MSG(!bad, "hand-built Q5_0 block: %d values off", bad);
}

/* Q5_0 on the shapes of a Qwen2.5-0.5B Q4_K_M file (its 896-wide rows: attention and gate/up,
 * and the 4864-wide down projection), decode and a prompt of 44 over row ranges that are not
 * multiples of 16 (the prompt path widens rows to Q8_0 a chunk at a time: 1203 rows of 896 are
 * several chunks and a part): every variant within float rounding of portable, the FMA ones bit
 * for bit the same, and every input of the prompt the bits it gets alone, with accumulate. */
static void q5_0_real_shapes_agree_across_variants(void) {
    const int shapes[2][2] = {{896, 1203}, {4864, 141}}; /* in, rows */
    enum { NB = 44 };
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    for (int sh = 0; sh < 2; sh++) {
        const int in = shapes[sh][0], rows = shapes[sh][1], r0 = 5, r1 = rows - 2;
        const size_t rb = wb_quant_row_bytes(WB_QT_Q5_0, in);
        uint8_t *W = malloc(rb * (size_t)rows);
        float *Wd = malloc(sizeof(float) * (size_t)in * (size_t)rows);
        float *X = malloc(sizeof(float) * (size_t)in * NB);
        float *Y0 = malloc(sizeof(float) * (size_t)rows * NB), *Y = malloc(sizeof(float) * (size_t)rows * NB);
        float *Yf = malloc(sizeof(float) * (size_t)rows * NB), *Y1 = malloc(sizeof(float) * (size_t)rows);
        float *Ym = malloc(sizeof(float) * (size_t)rows * NB);
        random_rows(WB_QT_Q5_0, W, Wd, rows, in);
        for (int i = 0; i < in * NB; i++) X[i] = frand() * (i % 41 == 0 ? 5.0f : 1.0f);
        for (int j = 0; j < NB; j++)
            for (int r = 0; r < rows; r++) {
                double m = 0;
                for (int i = 0; i < in; i++) m += fabs((double)Wd[(size_t)r * in + i] * X[(size_t)j * in + i]);
                Ym[(size_t)j * rows + r] = (float)m;
            }
        int have_fma = 0;
        for (int k = 0; k < nv; k++) {
            float *out = k ? Y : Y0;
            for (int i = 0; i < rows * NB; i++) out[i] = (float)(i % 13);
            wb_gemm_q_with(v[k], WB_QT_Q5_0, out, (size_t)rows, X, (size_t)in, NB, W, NULL, in, r0, r1, 1, NULL);
            int bad = 0, outside = 0, alone = 0;
            for (int j = 0; j < NB; j++) {
                for (int r = 0; r < rows; r++) {
                    const size_t o = (size_t)j * rows + r;
                    if (r < r0 || r >= r1) outside += out[o] != (float)(o % 13);
                    else if (k) bad += fabsf(out[o] - Y0[o]) > 1e-5f * Ym[o] + 1e-6f;
                }
                if (j % 7 == 0 || j == NB - 1) { /* alone (decode), from the same old Y */
                    for (int r = 0; r < rows; r++) Y1[r] = (float)(((size_t)j * rows + r) % 13);
                    wb_gemm_q_with(v[k], WB_QT_Q5_0, Y1, (size_t)rows, X + (size_t)j * in, (size_t)in, 1, W, NULL, in, r0, r1, 1, NULL);
                    alone += memcmp(Y1, out + (size_t)j * rows, sizeof(float) * (size_t)rows) != 0;
                }
            }
            CHECK_MSG(!bad && !outside && !alone, "q5_0 %d x %d %s: %d off portable, %d written outside, %d inputs differ from alone",
                      rows, in, wb_quant_kernels_name(v[k]), bad, outside, alone);
            if (k && have_fma)
                CHECK_MSG(memcmp(Y, Yf, sizeof(float) * (size_t)rows * NB) == 0, "q5_0 %d x %d %s differs from the other FMA variants",
                          rows, in, wb_quant_kernels_name(v[k]));
            else if (k) memcpy(Yf, Y, sizeof(float) * (size_t)rows * NB), have_fma = 1;
        }
        free(W), free(Wd), free(X), free(Y0), free(Y), free(Yf), free(Y1), free(Ym);
    }
}

/* Q8_0, Q4_0 and Q5_0 at the int8 extremes through every variant's batch kernel: Q8_0 weights -128
 * and 127 (a file's rows may hold -128, which the quantizer never writes), Q4_0 nibbles 0 and 15
 * and Q5_0 values 0 and 31, in
 * whole blocks and alternating, against inputs whose blocks quantize to +-127 (equal
 * magnitudes), so the largest sums the byte multiplies and the int16 sums can form (Q8_0's pair
 * 2 x 128 x 127; Q4_0's 8 steps of 2 x 15 x 127) turn up with both signs; a saturating or
 * mis-signed sum is off by thousands of steps. Rows 0-44 and 5-43 (full 16-row passes, then 13
 * and 7 rows; and the tile layout of rows 0-31, as 0-31 and 5-30, ranges inside groups), every
 * batch size 1-9 and 45 (every tail of a 4- or 6-input tile; 1 is the decode GEMV), 40 blocks
 * (chunks of 16 or 32 and a short one). Each output must be the per-row dot of that input
 * alone (wb_quant_dot, bit for bit, for the FMA variants) and within the input-rounding bound
 * of the double dot. */
static void int8_extreme_values_through_every_batch_kernel(void) {
    enum { IN = 40 * 32, ROWS = 45, NB = 45, TROWS = 32 };
    static float Wd[ROWS * IN], X[NB * IN], Y[NB * ROWS];
    static uint8_t Wq[ROWS * 34 * (IN / 32)], Wt[ROWS * 34 * (IN / 32)];
    static _Alignas(64) uint8_t xq[2048];
    for (int j = 0; j < NB; j++)
        for (int i = 0; i < IN; i++) {
            const int m = (j + i / 32) % 4;
            X[(size_t)j * IN + i] = m == 0 ? 1.0f : m == 1 ? -1.0f : m == 2 ? (i & 1 ? 1.0f : -1.0f)
                                  : (frand() < 0 ? -1.0f : 1.0f);
        }
    CHECK(wb_quant_act_bytes(IN) <= sizeof xq);
    /* wb_quant_dot at the best level, an FMA variant, whatever WB_KERNELS says (the portable dot
     * rounds the products first) */
    const wb_isa old_isa = wb_isa_limit(wb_isa_best());
    const wb_quant_kernels *v[8];
    const int nv = wb_quant_kernel_variants(v, 8);
    /* the file layout over 45 rows, then the tile layout of the first 32 (each range inside groups) */
    static const int ranges[4][2] = {{0, ROWS}, {5, ROWS - 1}, {0, TROWS}, {5, TROWS - 1}};
    static const wb_qtype types[3] = {WB_QT_Q8_0, WB_QT_Q4_0, WB_QT_Q5_0};
    for (int t = 0; t < 3; t++) {
        const wb_qtype qt = types[t];
        const size_t rb = wb_quant_row_bytes(qt, IN), bs = wb_qtype_block_bytes(qt);
        const int lo = qt == WB_QT_Q8_0 ? -128 : 0, hi = qt == WB_QT_Q8_0 ? 127 : qt == WB_QT_Q4_0 ? 15 : 31;
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < IN / 32; b++) {
                uint8_t *blk = Wq + rb * (size_t)r + bs * (size_t)b;
                put16(blk, 0.01f * (float)(1 + (r + b) % 5));
                const int m = (r + 3 * b) % 6;
                int q[32];
                for (int i = 0; i < 32; i++)
                    q[i] = m == 0 ? lo : m == 1 ? hi : m == 2 ? (i & 1 ? hi : lo) : m == 3 ? (i & 2 ? lo : hi)
                         : lo + (int)((frand() * 0.5f + 0.5f) * (float)(hi - lo) + 0.5f);
                if (qt == WB_QT_Q8_0)
                    for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(int8_t)q[i];
                else { /* value i: low nibble of qs byte i (i < 16) or high of byte i - 16; Q5_0's bit 4 in qh bit i */
                    uint8_t *qs = blk + (qt == WB_QT_Q5_0 ? 6 : 2);
                    uint32_t qh = 0;
                    for (int i = 0; i < 16; i++) qs[i] = (uint8_t)((q[i] & 15) | (q[i + 16] & 15) << 4);
                    for (int i = 0; i < 32; i++) qh |= (uint32_t)(q[i] >> 4 & 1) << i;
                    if (qt == WB_QT_Q5_0)
                        for (int k = 0; k < 4; k++) blk[2 + k] = (uint8_t)(qh >> (8 * k));
                }
            }
        for (int r = 0; r < ROWS; r++) wb_dequantize_row(qt, Wd + (size_t)r * IN, Wq + rb * (size_t)r, IN);
        CHECK(wb_quant_tiles_ok(qt, TROWS, IN));
        wb_quant_to_tiles(qt, Wt, Wq, TROWS, IN);
        for (int k = 0; k < nv; k++)
            for (int g = 0; g < 4; g++)
                for (int nb = 1; nb <= NB; nb = nb == 9 ? NB : nb + 1) {
                    const int r0 = ranges[g][0], r1 = ranges[g][1], tiles = g >= 2;
                    if (tiles) wb_gemm_qt_with(v[k], qt, 0, Y, ROWS, X, IN, nb, Wt, NULL, IN, r0, r1, 0, NULL);
                    else wb_gemm_q_with(v[k], qt, Y, ROWS, X, IN, nb, Wq, NULL, IN, r0, r1, 0, NULL);
                    int bad = 0, alone = 0;
                    for (int j = 0; j < nb; j++) {
                        const float *x = X + (size_t)j * IN;
                        wb_quantize_act(xq, x, IN);
                        for (int r = r0; r < r1; r++) {
                            const float *w = Wd + (size_t)r * IN;
                            double s = 0, m = 0;
                            for (int i = 0; i < IN; i++) s += (double)w[i] * x[i], m += fabs((double)w[i] * x[i]);
                            const float a = Y[(size_t)j * ROWS + r];
                            bad += !(fabs(a - s) <= input_rounding_bound(w, x, IN) * 1.001 + 1e-5 * m); /* NaN too */
                            alone += k > 0 && wb_quant_dot(qt, Wq + rb * (size_t)r, xq, IN) != a;
                        }
                    }
                    CHECK_MSG(!bad && !alone, "%s %s%s rows %d-%d nb %d: %d off the double dot, %d differ from the row alone",
                              wb_qtype_name(qt), wb_quant_kernels_name(v[k]), tiles ? " (tiles)" : "", r0, r1, nb, bad, alone);
                }
    }
    wb_isa_limit(old_isa);
}

int main(void) {
    RUN(block_sizes_follow_the_gguf_layouts);
    RUN(hand_built_blocks_decode_as_specified);
    RUN(quantization_error_is_within_half_a_step);
    RUN(quantize_row_writes_the_gguf_reference_bytes);
    RUN(quantize_row_matches_its_libm_specification);
    RUN(input_quantization_is_the_same_at_every_level);
    RUN(every_variant_matches_portable_and_the_float_reference);
    RUN(quant_batch_rows_equal_alone);
    RUN(int8_extreme_values_through_every_batch_kernel);
    RUN(prequantized_inputs_give_the_same_bits);
    RUN(tile_layout_gives_the_file_layout_bits);
    RUN(grouped_inputs_give_the_tile_bits);
    RUN(q5_0_decodes_as_the_fallback_reference);
    RUN(q5_0_real_shapes_agree_across_variants);
    return check_summary();
}
