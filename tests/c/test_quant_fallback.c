/* test_quant_fallback.c - the ggml fallback block types (Q4_1, Q5_0, Q5_1, Q5_K) dequantize to
 * values worked out by hand from their layouts (core/quant_fallback.h), and what turning them
 * into Q8_0 at load costs, measured. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

#include "gguf.h"
#include "quant.h"
#include "quant_fallback.h"
#include "wb_model.h"

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }

static void sizes_are_the_ggml_block_sizes(void) {
    CHECK(wb_fallback_block_values(WB_GGML_Q4_1) == 32 && wb_fallback_block_bytes(WB_GGML_Q4_1) == 20);
    CHECK(wb_fallback_block_values(WB_GGML_Q5_0) == 32 && wb_fallback_block_bytes(WB_GGML_Q5_0) == 22);
    CHECK(wb_fallback_block_values(WB_GGML_Q5_1) == 32 && wb_fallback_block_bytes(WB_GGML_Q5_1) == 24);
    CHECK(wb_fallback_block_values(WB_GGML_Q5_K) == 256 && wb_fallback_block_bytes(WB_GGML_Q5_K) == 176);
    CHECK(wb_fallback_block_values(WB_GGML_Q8_0) == 0 && wb_fallback_block_bytes(WB_GGML_Q4_K) == 0);
    float y[256];
    uint8_t b[176] = {0};
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q5_0, y, b, 48) == -1);
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q5_K, y, b, 128) == -1);
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q4_K, y, b, 256) == -1);
}

/* d = 0.5, m = -1; byte j holds j (value j) and 15 - j (value j + 16). */
static void q4_1_is_scale_times_nibble_plus_min(void) {
    uint8_t b[20];
    put16(b, 0x3800), put16(b + 2, 0xbc00);
    for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q4_1, y, b, 32) == 0);
    CHECK(y[0] == -1.0f && y[1] == -0.5f && y[15] == 6.5f && y[16] == 6.5f && y[31] == -1.0f);
    for (int j = 0; j < 16; j++) CHECK(y[j] == 0.5f * j - 1 && y[j + 16] == 0.5f * (15 - j) - 1);
}

/* d = 0.25; qh has bits 0 and 16; byte 0 = 0x3f: value 0 = (15 | 16) - 16 = 15, value 16 =
 * (3 | 16) - 16 = 3, every other value 0 - 16. */
static void q5_0_takes_the_fifth_bit_from_qh(void) {
    uint8_t b[22] = {0};
    put16(b, 0x3400), put32(b + 2, 0x00010001u);
    b[6] = 0x3f;
    float y[32];
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q5_0, y, b, 32) == 0);
    CHECK(y[0] == 3.75f && y[16] == 0.75f);
    for (int j = 1; j < 32; j++) if (j != 16) CHECK_MSG(y[j] == -4.0f, "value %d = %g", j, y[j]);
}

/* d = 2, m = 0.5; qh bit 31; byte 15 = 0xf7: value 15 = 7 * 2 + 0.5, value 31 = 31 * 2 + 0.5. */
static void q5_1_adds_the_min(void) {
    uint8_t b[24] = {0};
    put16(b, 0x4000), put16(b + 2, 0x3800), put32(b + 4, 0x80000000u);
    b[8 + 15] = 0xf7;
    float y[64];
    /* two blocks: the second all zero scales */
    uint8_t two[48] = {0};
    memcpy(two, b, 24);
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q5_1, y, two, 64) == 0);
    CHECK(y[15] == 14.5f && y[31] == 62.5f);
    for (int j = 0; j < 31; j++) if (j != 15) CHECK_MSG(y[j] == 0.5f, "value %d = %g", j, y[j]);
    for (int j = 32; j < 64; j++) CHECK(y[j] == 0.0f);
}

/* d = 1, dmin = 0.5. Scales: s[0] = 2 | 1 << 6, s[4] = 3 | 2 << 6, s[8] = 0x51, so group 0 has
 * sc 2, m 3 and group 4 sc 1 | 1 << 4 = 17, m 5 | 2 << 4 = 37; all others 0. Group 0 value 0:
 * nibble 7 (qs[0] low) with qh[0] bit 0 = 23 -> 2 * 23 - 1.5 = 44.5; group 4 (the low nibbles
 * of qs[64..95], qh bit 4) value 2: nibble 10 with the fifth bit = 26 -> 17 * 26 - 18.5 = 423.5.
 * The high nibble of qs[66] and qh[2] bit 5 belong to group 5, whose scale is 0. */
static void q5_k_unpacks_scales_mins_and_high_bits(void) {
    uint8_t b[176] = {0};
    put16(b, 0x3c00), put16(b + 2, 0x3800);
    uint8_t *s = b + 4, *qh = b + 16, *qs = b + 48;
    s[0] = 2 | 1 << 6, s[4] = 3 | 2 << 6, s[8] = 0x51;
    qs[0] = 0x07, qh[0] = 0x01;
    qs[66] = 0xfa, qh[2] = 0x30;
    float y[256];
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q5_K, y, b, 256) == 0);
    CHECK(y[0] == 44.5f && y[1] == -1.5f && y[31] == -1.5f);
    CHECK(y[128 + 2] == 423.5f && y[128] == -18.5f && y[159] == -18.5f);
    for (int i = 32; i < 128; i++) CHECK_MSG(y[i] == 0.0f, "value %d = %g", i, y[i]);
    for (int i = 160; i < 256; i++) CHECK_MSG(y[i] == 0.0f, "value %d = %g", i, y[i]);
}

static uint64_t rng = 88172645463325252ull;
static uint8_t rbyte(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

/* What the load does to these tensors (weights_gguf.c): dequantize, quantize to Q8_0. Per block
 * of 32 the error is at most half a Q8_0 step, max|x| / 254, plus the f16 rounding of the Q8_0
 * scale (2^-11 relative, times |q| <= 127): measured over random blocks of every type. */
static void requantizing_to_q8_0_stays_within_half_a_step(void) {
    const uint32_t types[] = {WB_GGML_Q4_1, WB_GGML_Q5_0, WB_GGML_Q5_1, WB_GGML_Q5_K};
    const char *names[] = {"Q4_1", "Q5_0", "Q5_1", "Q5_K"};
    enum { N = 2048 };
    float x[N], z[N];
    uint8_t q8[N / 32 * 34];
    for (int t = 0; t < 4; t++) {
        const size_t bb = wb_fallback_block_bytes(types[t]);
        const int bv = wb_fallback_block_values(types[t]);
        uint8_t *raw = malloc(N / bv * bb);
        for (size_t i = 0; i < N / bv * bb; i++) raw[i] = rbyte();
        for (int k = 0; k < N / bv; k++) { /* sane f16 scale and min (d, then m / dmin) */
            put16(raw + k * bb, wb_f32_to_f16(0.001f + 0.01f * (rbyte() / 255.0f)));
            put16(raw + k * bb + 2, wb_f32_to_f16((types[t] == WB_GGML_Q5_0 ? 0 : 1) *
                                                  (0.002f + 0.05f * (rbyte() / 255.0f)) *
                                                  (types[t] == WB_GGML_Q5_K ? 1 : -1)));
            if (types[t] == WB_GGML_Q5_0) raw[k * bb + 2] = rbyte(), raw[k * bb + 3] = rbyte();
        }
        CHECK(wb_fallback_dequantize_row(types[t], x, raw, N) == 0);
        CHECK(wb_quantize_row(WB_QT_Q8_0, q8, x, N) == 0);
        wb_dequantize_row(WB_QT_Q8_0, z, q8, N);
        double worst = 0, worst_step = 0; /* max |error| / max|x| of its block; / a 5-bit step */
        for (int b = 0; b < N / 32; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
            for (int i = 0; i < 32; i++) {
                const double e = fabs((double)x[32 * b + i] - z[32 * b + i]);
                CHECK_MSG(e <= amax * (1.0 / 254 + 1.0 / 2048) * 1.001, "%s block %d: %g of %g",
                          names[t], b, e, amax);
                if (amax > 0 && e / amax > worst) worst = e / amax;
                if (amax > 0 && e / (amax / 15.5) > worst_step) worst_step = e / (amax / 15.5);
            }
        }
        printf("  %s -> Q8_0: max |error| %.4f of the block's max|x| (%.3f of a 5-bit step)\n",
               names[t], worst, worst_step);
        CHECK(worst > 0); /* the conversion does round: the test can fail */
        free(raw);
    }
}

/* llama-quantize's own blocks (tests/vectors/gguf, made from one F32 file): every tensor of the
 * Q5_0 / Q5_1 / Q4_1 / Q5_K_M file dequantizes to within the type's step of the same tensor of
 * the Q8_0 file. A wrong bit or nibble order would be off by a large part of the range. */
static void llama_cpp_blocks_dequantize_near_the_q8_0_file(void) {
    wb_gguf *ref = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_gguf_open("tests/vectors/gguf/kq-llama-q8_0.gguf", &ref, &err) == WB_OK, "%s", err.msg);
    const char *files[] = {"q5_0", "q5_1", "q4_1", "q5_k_m"};
    for (int f = 0; ref && f < 4; f++) {
        char path[128];
        snprintf(path, sizeof path, "tests/vectors/gguf/kq-llama-%s.gguf", files[f]);
        wb_gguf *g = NULL;
        CHECK_MSG(wb_gguf_open(path, &g, &err) == WB_OK, "%s", err.msg);
        int checked = 0;
        double worst = 0;
        for (int64_t i = 0; g && i < wb_gguf_n_tensors(g); i++) {
            const wb_gguf_tensor *t = wb_gguf_tensor_at(g, i), *r = NULL;
            if (!wb_fallback_block_values(t->type)) continue;
            for (int64_t k = 0; k < wb_gguf_n_tensors(ref); k++)
                if (!strcmp(wb_gguf_tensor_at(ref, k)->name, t->name)) r = wb_gguf_tensor_at(ref, k);
            CHECK(r && r->type == WB_GGML_Q8_0 && r->n_elements == t->n_elements);
            if (!r || r->n_elements != t->n_elements) continue;
            float *x = malloc((size_t)t->n_elements * 2 * sizeof *x), *y = x + t->n_elements;
            CHECK(wb_fallback_dequantize_row(t->type, x, t->data, t->n_elements) == 0);
            wb_dequantize_row(WB_QT_Q8_0, y, r->data, (int)r->n_elements);
            double d = 0, amax = 0;
            for (int64_t j = 0; j < t->n_elements; j++) {
                d = fmax(d, fabs((double)x[j] - y[j]));
                amax = fmax(amax, fabs((double)y[j]));
            }
            /* each type's own rounding plus Q8_0's amax / 254: Q5_1 half a step of 2 amax / 31;
             * Q4_1 half of 2 amax / 15; Q5_0 a whole step amax / 16 (its d = max / -16 clamps
             * the opposite extreme at +15); Q5_K like Q5_1 plus its 6-bit group scales */
            const double tol = (t->type == WB_GGML_Q5_1 ? 0.04 : 0.075) * amax;
            CHECK_MSG(d <= tol && amax > 0, "%s %s (%s): max |diff| %g of %g", files[f], t->name,
                      wb_ggml_type_name(t->type), d, amax);
            worst = fmax(worst, d / amax);
            checked++;
            free(x);
        }
        CHECK_MSG(checked >= 5, "%s: %d tensors of the fallback types", files[f], checked);
        printf("  %-7s %d tensors: max |diff| to the Q8_0 file %.4f of the tensor's max|x|\n", files[f],
               checked, worst);
        wb_gguf_free(g);
    }
    wb_gguf_free(ref);
}

int main(void) {
    RUN(sizes_are_the_ggml_block_sizes);
    RUN(q4_1_is_scale_times_nibble_plus_min);
    RUN(q5_0_takes_the_fifth_bit_from_qh);
    RUN(q5_1_adds_the_min);
    RUN(q5_k_unpacks_scales_mins_and_high_bits);
    RUN(requantizing_to_q8_0_stays_within_half_a_step);
    RUN(llama_cpp_blocks_dequantize_near_the_q8_0_file);
    return check_summary();
}
