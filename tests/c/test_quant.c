/* test_quant.c - Q8_0 / Q4_0 / Q4_K / Q6_K layouts, quantization error bounds, and every dot
 * product / GEMV / GEMM level this CPU supports against the portable one on the same inputs. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"
#include "quant.h"
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
    CHECK(wb_quant_row_bytes(WB_QT_Q8_0, 896) == 28 * 34);
    CHECK(wb_quant_row_bytes(WB_QT_Q4_K, 896) == 0); /* not a multiple of 256 */
    CHECK(wb_quant_row_bytes(WB_QT_Q4_0, 0) == 0 && wb_quant_row_bytes(WB_QT_Q4_0, -32) == 0);
    float x[32] = {0};
    uint8_t out[64];
    CHECK(wb_quantize_row(WB_QT_Q4_K, out, x, 32) == -1); /* K types are read-only */
    CHECK(wb_quantize_row(WB_QT_Q8_0, out, x, 31) == -1);
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

/* Every level's integer dot = the portable one (same int sums; float order may differ), and the
 * portable one = the float dot of the dequantized rows to within the input's quantization. */
static void dots_gemv_and_gemm_match_portable(void) {
    enum { IN = 1024 + 64, ROWS = 37, NB = 60 };
    static float W[ROWS * IN], X[NB * IN], Wd[ROWS * IN];
    static uint8_t Wq[ROWS * IN * 2];
    static float Y0[NB * ROWS], Y1[NB * ROWS], Yr[NB * ROWS];
    for (int i = 0; i < ROWS * IN; i++) W[i] = frand();
    for (int i = 0; i < NB * IN; i++) X[i] = frand() * 3.0f;
    for (int t = 0; t < 2; t++) {
        const wb_qtype qt = t ? WB_QT_Q4_0 : WB_QT_Q8_0;
        const size_t rb = wb_quant_row_bytes(qt, IN);
        for (int r = 0; r < ROWS; r++) {
            wb_quantize_row(qt, Wq + rb * r, W + (size_t)r * IN, IN);
            wb_dequantize_row(qt, Wd + (size_t)r * IN, Wq + rb * r, IN);
        }
        for (int j = 0; j < NB; j++) /* reference: dequantized weights, F32 inputs, double sums */
            for (int r = 0; r < ROWS; r++) {
                double s = 0;
                for (int i = 0; i < IN; i++) s += (double)Wd[(size_t)r * IN + i] * X[(size_t)j * IN + i];
                Yr[j * ROWS + r] = (float)s;
            }
        for (int nb = 1; nb <= NB; nb = nb == 1 ? 13 : nb == 13 ? NB : NB + 1) { /* dots, tiles */
            wb_isa old = wb_isa_limit(WB_ISA_PORTABLE);
            for (int j = 0; j < nb; j++) Y0[j * ROWS] = -7.0f;
            wb_gemm_q(qt, Y0, ROWS, X, IN, nb, Wq, NULL, IN, 1, ROWS, 0, NULL);
            wb_isa_limit(old);
            int bad = 0;
            for (int j = 0; j < nb; j++) {
                bad += Y0[j * ROWS] != -7.0f; /* outside [r0, r1): untouched */
                for (int r = 1; r < ROWS; r++) {
                    /* int8 inputs: each value within half a step of max|x|/127 of its block */
                    const double tol = nb <= WB_QUANT_DOT_ROWS ? 0.02 * sqrt((double)IN) : 1e-3;
                    bad += fabs(Y0[j * ROWS + r] - Yr[j * ROWS + r]) > tol;
                }
            }
            CHECK_MSG(!bad, "%s nb=%d portable: %d outputs off the float reference", wb_qtype_name(qt),
                      nb, bad);
            for (int lv = WB_ISA_AVX2; lv <= (int)wb_isa_best(); lv++) {
                wb_isa o = wb_isa_limit((wb_isa)lv);
                memcpy(Y1, Y0, sizeof Y1);
                for (int j = 0; j < nb; j++)
                    for (int r = 1; r < ROWS; r++) Y1[j * ROWS + r] = 1.0f;
                wb_gemm_q(qt, Y1, ROWS, X, IN, nb, Wq, NULL, IN, 1, ROWS, 0, NULL);
                wb_isa_limit(o);
                int off = 0;
                for (int j = 0; j < nb; j++)
                    for (int r = 0; r < ROWS; r++) {
                        const float a = Y1[j * ROWS + r], e = Y0[j * ROWS + r];
                        off += fabsf(a - e) > 1e-4f * (1.0f + fabsf(e));
                    }
                CHECK_MSG(!off, "%s nb=%d %s: %d outputs differ from portable", wb_qtype_name(qt), nb,
                          wb_isa_name(lv), off);
            }
        }
        /* bias and accumulate */
        float bias[ROWS], Ya[ROWS], Yb[ROWS];
        for (int r = 0; r < ROWS; r++) bias[r] = frand(), Ya[r] = Yb[r] = frand();
        wb_gemm_q(qt, Ya, ROWS, X, IN, 1, Wq, bias, IN, 0, ROWS, 1, NULL);
        for (int r = 0; r < ROWS; r++)
            CHECK_NEAR(Ya[r], Yb[r] + bias[r] + Yr[r], 0.02 * sqrt((double)IN));
    }
}

/* Up to WB_QUANT_DOT_ROWS inputs, each gets the bits it gets alone (batched decode). */
static void quant_batch_rows_equal_alone(void) {
    enum { IN = 320, ROWS = 11, NB = 9 };
    static float W[ROWS * IN], X[NB * IN], Yb[NB * ROWS], Y1[ROWS];
    static uint8_t Wq[ROWS * IN * 2];
    for (int i = 0; i < ROWS * IN; i++) W[i] = frand();
    for (int i = 0; i < NB * IN; i++) X[i] = frand();
    for (int t = 0; t < 2; t++) {
        const wb_qtype qt = t ? WB_QT_Q4_0 : WB_QT_Q8_0;
        const size_t rb = wb_quant_row_bytes(qt, IN);
        for (int r = 0; r < ROWS; r++) wb_quantize_row(qt, Wq + rb * r, W + (size_t)r * IN, IN);
        for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            wb_gemm_q(qt, Yb, ROWS, X, IN, NB, Wq, NULL, IN, 0, ROWS, 0, NULL);
            int diff = 0;
            for (int j = 0; j < NB; j++) {
                wb_gemm_q(qt, Y1, ROWS, X + (size_t)j * IN, IN, 1, Wq, NULL, IN, 0, ROWS, 0, NULL);
                diff += memcmp(Y1, Yb + (size_t)j * ROWS, sizeof Y1) != 0;
            }
            wb_isa_limit(o);
            CHECK_MSG(!diff, "%s %s: %d inputs differ from alone", wb_qtype_name(qt), wb_isa_name(lv), diff);
        }
    }
}

/* K types go through the widened tile for any nb, the portable and SIMD tiles agreeing. */
static void k_quant_gemm_matches_dequantized_reference(void) {
    enum { IN = 512, ROWS = 9, NB = 7 };
    static uint8_t Wq[ROWS * 210 * 2];
    static float Wd[ROWS * IN], X[NB * IN], Y[NB * ROWS];
    for (size_t i = 0; i < sizeof Wq; i++) Wq[i] = (uint8_t)(frand() * 128 + 128);
    for (int i = 0; i < NB * IN; i++) X[i] = frand();
    const wb_qtype types[2] = {WB_QT_Q4_K, WB_QT_Q6_K};
    for (int t = 0; t < 2; t++) {
        const size_t rb = wb_quant_row_bytes(types[t], IN);
        for (int r = 0; r < ROWS; r++) { /* sane scales: finite, modest F16 values */
            for (int b = 0; b < IN / 256; b++) {
                uint8_t *blk = Wq + rb * r + (size_t)b * wb_qtype_block_bytes(types[t]);
                if (types[t] == WB_QT_Q4_K) put16(blk, 0.01f), put16(blk + 2, 0.02f);
                else put16(blk + 208, 0.003f);
            }
            wb_dequantize_row(types[t], Wd + (size_t)r * IN, Wq + rb * r, IN);
        }
        for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
            wb_isa o = wb_isa_limit((wb_isa)lv);
            for (int nb = 1; nb <= NB; nb += 3) {
                wb_gemm_q(types[t], Y, ROWS, X, IN, nb, Wq, NULL, IN, 0, ROWS, 0, NULL);
                int bad = 0;
                for (int j = 0; j < nb; j++)
                    for (int r = 0; r < ROWS; r++) {
                        double s = 0, m = 0;
                        for (int i = 0; i < IN; i++) {
                            s += (double)Wd[r * IN + i] * X[j * IN + i];
                            m += fabs((double)Wd[r * IN + i] * X[j * IN + i]);
                        }
                        bad += fabs(Y[j * ROWS + r] - s) > 1e-5 * m + 1e-6;
                    }
                CHECK_MSG(!bad, "%s %s nb=%d: %d off", wb_qtype_name(types[t]), wb_isa_name(lv), nb, bad);
            }
            wb_isa_limit(o);
        }
    }
}

int main(void) {
    RUN(block_sizes_follow_the_gguf_layouts);
    RUN(hand_built_blocks_decode_as_specified);
    RUN(quantization_error_is_within_half_a_step);
    RUN(dots_gemv_and_gemm_match_portable);
    RUN(quant_batch_rows_equal_alone);
    RUN(k_quant_gemm_matches_dequantized_reference);
    return check_summary();
}
