/* test_quant_fallback.c - the ggml block types quant_fallback.c decodes (Q2_K, Q3_K, IQ4_XS, and
 * the references for the kernel types Q4_1, Q5_0, Q5_1, Q5_K, IQ4_NL) dequantize to values worked out by hand from their layouts
 * (core/quant_fallback.h) and to ggml's own values for llama-quantize's files, and what turning
 * them into a type with kernels at load costs, measured. */
#include "check.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>

#include "fileio.h"
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
    CHECK(wb_fallback_block_values(WB_GGML_Q2_K) == 256 && wb_fallback_block_bytes(WB_GGML_Q2_K) == 84);
    CHECK(wb_fallback_block_values(WB_GGML_Q3_K) == 256 && wb_fallback_block_bytes(WB_GGML_Q3_K) == 110);
    CHECK(wb_fallback_block_values(WB_GGML_IQ4_NL) == 32 && wb_fallback_block_bytes(WB_GGML_IQ4_NL) == 18);
    CHECK(wb_fallback_block_values(WB_GGML_IQ4_XS) == 256 && wb_fallback_block_bytes(WB_GGML_IQ4_XS) == 136);
    CHECK(wb_fallback_block_values(WB_GGML_Q8_0) == 0 && wb_fallback_block_bytes(WB_GGML_Q4_K) == 0);
    CHECK(wb_fallback_block_values(WB_GGML_IQ2_XXS) == 0); /* a grid type: named, not read */
    CHECK(wb_fallback_target(WB_GGML_Q3_K) == WB_QT_Q6_K && wb_fallback_target(WB_GGML_Q2_K) == WB_QT_Q8_0 &&
          wb_fallback_target(WB_GGML_IQ4_XS) == WB_QT_IQ4_NL);
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

/* d = 0.5, dmin = 0.25. Group 0 (values 0-15): scales[0] = 0x23, sc 3, m 2; group 9 (values
 * 144-159, half 1, quarter 0, positions 16-31): scales[9] = 0x1f, sc 15, m 1. qs[0] = 0xe4: value
 * 0 takes bits 0-1 (0), value 32 bits 2-3 (1), value 64 bits 4-5 (2), value 96 bits 6-7 (3);
 * qs[48] = 0x03: value 144 (half 1, position 16) = 3. */
static void q2_k_unpacks_two_bit_values_with_scale_and_min_per_16(void) {
    uint8_t b[84] = {0};
    b[0] = 0x23, b[2] = 0x11, b[4] = 0x11, b[6] = 0x11, b[9] = 0x1f;
    b[16 + 0] = 0xe4, b[16 + 48] = 0x03;
    put16(b + 80, 0x3800), put16(b + 82, 0x3400);
    float y[256];
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q2_K, y, b, 256) == 0);
    /* group 0: 1.5 * q - 0.5; group 2 (values 32-47) and 4, 6: sc 1, m 1: 0.5 * q - 0.25 */
    CHECK(y[0] == -0.5f && y[1] == -0.5f && y[15] == -0.5f);
    CHECK(y[32] == 0.25f && y[64] == 0.75f && y[96] == 1.25f);
    CHECK(y[144] == 7.5f * 3 - 0.25f && y[145] == -0.25f && y[128] == 0.0f);
    for (int i = 16; i < 32; i++) CHECK_MSG(y[i] == 0.0f, "value %d = %g", i, y[i]);
}

/* d = 0.5. Scale 0: low nibble scales[0] = 0xa (plus scale 8's 0x3 in its high nibble), top bits
 * scales[8] bits 0-1 = 2: s = 0x2a - 32 = 10; scale 8 (values 128-143): 0x3 | (scales[8] bits
 * 4-5 = 1) << 4 = 19 - 32 = -13; every other scale 0 - 32 = -32. Value 0: qs[0] bits 0-1 = 3,
 * hmask[0] bit 0 set: 3; value 1: q 0, hbit clear: -4; value 128 (half 1, quarter 0): qs[32]
 * bits 0-1 = 1, hmask[0] bit 4 set: 1; value 129: qs[33] = 0, hmask[1] bit 4 clear: -4. */
static void q3_k_unpacks_three_bit_values_and_six_bit_signed_scales(void) {
    uint8_t b[110] = {0};
    b[0] = 0x11, b[1] = 0x00;                 /* hmask */
    b[32 + 0] = 0x03, b[32 + 32] = 0x01;      /* qs */
    b[96 + 0] = 0x3a, b[96 + 8] = 0x12;       /* scales */
    put16(b + 108, 0x3800);
    float y[256];
    CHECK(wb_fallback_dequantize_row(WB_GGML_Q3_K, y, b, 256) == 0);
    CHECK(y[0] == 0.5f * 10 * 3 && y[1] == 0.5f * 10 * -4 && y[15] == 0.5f * 10 * -4);
    CHECK(y[128] == 0.5f * -13 * 1 && y[129] == 0.5f * -13 * -4);
    CHECK(y[16] == 0.5f * -32 * -4 && y[255] == 0.5f * -32 * -4);
    /* converted to Q6_K: the same values, bit for bit */
    uint8_t q6[210];
    float z[256];
    CHECK(wb_fallback_convert_row(WB_GGML_Q3_K, q6, b, y, 256) == 0);
    wb_dequantize_row(WB_QT_Q6_K, z, q6, 256);
    CHECK(!memcmp(y, z, sizeof y));
}

/* IQ4_NL: d = -0.5 (llama.cpp's quantizer makes d negative, as Q4_0's); byte j = j | (15 - j) << 4:
 * value j = d * K[j], value j + 16 = d * K[15 - j]. IQ4_XS: d = 0.25, group 0's scale
 * scales_l[0] low nibble 5 | scales_h bits 0-1 = 2 -> 37 - 32 = 5, group 3's scales_l[1] high
 * nibble 0 | bits 6-7 = 0 -> -32 (as every group after 0). */
static void iq4_levels_are_the_fixed_non_linear_grid(void) {
    static const int K[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    uint8_t b[18];
    put16(b, 0xb800);
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    float y[32], z[32];
    CHECK(wb_fallback_dequantize_row(WB_GGML_IQ4_NL, y, b, 32) == 0);
    for (int j = 0; j < 16; j++)
        CHECK_MSG(y[j] == -0.5f * K[j] && y[j + 16] == -0.5f * K[15 - j], "value %d = %g", j, y[j]);
    wb_dequantize_row(WB_QT_IQ4_NL, z, b, 32); /* quant.c's decode of the kernel type */
    CHECK(!memcmp(y, z, sizeof y));
    CHECK(wb_fallback_convert_row(WB_GGML_IQ4_NL, z, b, y, 32) == -1); /* not converted */

    uint8_t x[136] = {0};
    put16(x, 0x3400), put16(x + 2, 0x0002);
    x[4] = 0x05;
    for (int j = 0; j < 128; j++) x[8 + j] = 0xf0; /* low nibble 0, high 15 */
    float v[256];
    CHECK(wb_fallback_dequantize_row(WB_GGML_IQ4_XS, v, x, 256) == 0);
    CHECK(v[0] == 0.25f * 5 * -127 && v[16] == 0.25f * 5 * 113);
    CHECK(v[32] == 0.25f * -32 * -127 && v[96 + 16] == 0.25f * -32 * 113);
}

static uint64_t rng2 = 0x9e3779b97f4a7c15ull;
static uint8_t rbyte2(void) {
    rng2 ^= rng2 << 13, rng2 ^= rng2 >> 7, rng2 ^= rng2 << 17;
    return (uint8_t)(rng2 >> 24);
}

/* The conversions at load on random blocks: Q3_K -> Q6_K keeps every value bit for bit (and
 * quant.c decodes the kernel types IQ4_NL, Q4_1, Q5_1 and Q5_K as this file does); IQ4_XS ->
 * IQ4_NL moves a value by at most the f16 rounding of its group's scale (2^-11 relative). */
static wb_qtype kernel_type(uint32_t t) {
    return t == WB_GGML_IQ4_NL ? WB_QT_IQ4_NL : t == WB_GGML_Q4_1 ? WB_QT_Q4_1 : t == WB_GGML_Q5_1 ? WB_QT_Q5_1 : WB_QT_Q5_K;
}
static void conversions_keep_the_values(void) {
    const uint32_t types[] = {WB_GGML_Q3_K, WB_GGML_IQ4_NL, WB_GGML_IQ4_XS, WB_GGML_Q4_1, WB_GGML_Q5_1, WB_GGML_Q5_K};
    enum { N = 4096 };
    static float x[N], z[N];
    static uint8_t out[N / 32 * 34];
    for (int t = 0; t < 6; t++) {
        const int native = types[t] != WB_GGML_Q3_K && types[t] != WB_GGML_IQ4_XS;
        const size_t bb = wb_fallback_block_bytes(types[t]);
        const int bv = wb_fallback_block_values(types[t]);
        uint8_t *raw = malloc(N / bv * bb);
        for (size_t i = 0; i < N / bv * bb; i++) raw[i] = rbyte2();
        for (int k = 0; k < N / bv; k++) { /* a finite d of either sign (where d sits) */
            const uint16_t d = wb_f32_to_f16((rbyte2() & 1 ? -1.0f : 1.0f) * (0.0005f + 0.02f * (rbyte2() / 255.0f)));
            put16(raw + k * bb + (types[t] == WB_GGML_Q3_K ? 108 : 0), d);
            if (types[t] == WB_GGML_Q4_1 || types[t] == WB_GGML_Q5_1 || types[t] == WB_GGML_Q5_K) /* m or dmin */
                put16(raw + k * bb + 2, wb_f32_to_f16((rbyte2() & 1 ? -1.0f : 1.0f) * 0.03f * (rbyte2() / 255.0f)));
        }
        CHECK(wb_fallback_dequantize_row(types[t], x, raw, N) == 0);
        if (native) {
            wb_dequantize_row(kernel_type(types[t]), z, raw, N);
            CHECK(wb_fallback_convert_row(types[t], out, raw, x, N) == -1); /* read as they are */
        } else {
            CHECK(wb_fallback_convert_row(types[t], out, raw, x, N) == 0);
            wb_dequantize_row(wb_fallback_target(types[t]), z, out, N);
        }
        double worst = 0;
        for (int i = 0; i < N; i++) {
            const double e = fabs((double)x[i] - z[i]);
            if (x[i] != 0) worst = fmax(worst, e / fabs(x[i]));
            if (types[t] != WB_GGML_IQ4_XS) CHECK_MSG(x[i] == z[i], "type %u value %d: %g -> %g", types[t], i, x[i], z[i]);
            else CHECK_MSG(e <= fabs(x[i]) * 0x1p-11, "IQ4_XS value %d: %g -> %g", i, x[i], z[i]);
        }
        printf("  %s -> %s: max relative change %.2g\n", wb_ggml_type_name(types[t]),
               native ? "the same (quant.c's decode)" : wb_qtype_name(wb_fallback_target(types[t])), worst);
        free(raw);
    }
}

/* ggml's own values (bench/peer/ggml_dequant.c, in each vector's "dequant": rows 0 and last,
 * the sum and a position-weighted sum of all values) for every quantized tensor of
 * llama-quantize's files, native types through quant.c, the others through quant_fallback.c. */
static int decode_row(uint32_t type, float *dst, const uint8_t *src, int64_t n) {
    switch (type) {
    case WB_GGML_Q8_0: wb_dequantize_row(WB_QT_Q8_0, dst, src, (int)n); return 0;
    case WB_GGML_Q4_0: wb_dequantize_row(WB_QT_Q4_0, dst, src, (int)n); return 0;
    case WB_GGML_Q4_K: wb_dequantize_row(WB_QT_Q4_K, dst, src, (int)n); return 0;
    case WB_GGML_Q6_K: wb_dequantize_row(WB_QT_Q6_K, dst, src, (int)n); return 0;
    case WB_GGML_IQ4_NL: wb_dequantize_row(WB_QT_IQ4_NL, dst, src, (int)n); return 0;
    case WB_GGML_Q5_0: wb_dequantize_row(WB_QT_Q5_0, dst, src, (int)n); return 0;
    case WB_GGML_Q4_1: wb_dequantize_row(WB_QT_Q4_1, dst, src, (int)n); return 0;
    case WB_GGML_Q5_1: wb_dequantize_row(WB_QT_Q5_1, dst, src, (int)n); return 0;
    case WB_GGML_Q5_K: wb_dequantize_row(WB_QT_Q5_K, dst, src, (int)n); return 0;
    default: return wb_fallback_dequantize_row(type, dst, src, n);
    }
}

static void values_are_ggml_values(void) {
    const char *files[] = {"q4_k_m", "q6_k", "q8_0", "q5_0", "q5_1", "q4_1", "q5_k_m",
                           "q3_k_m", "q2_k", "iq4_nl", "iq4_xs"};
    int types_seen[40] = {0};
    for (int f = 0; f < (int)(sizeof files / sizeof *files); f++) {
        char path[160];
        char *json = NULL;
        size_t jl = 0;
        wb_err err = {0};
        snprintf(path, sizeof path, "tests/vectors/gguf/kq-llama-%s.gguf.json", files[f]);
        CHECK_MSG(wb_read_file(path, 1 << 24, &json, &jl, &err) == WB_OK, "%s", err.msg);
        cJSON *root = json ? cJSON_ParseWithLength(json, jl) : NULL;
        const cJSON *ts = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "dequant"), "tensors");
        CHECK_MSG(cJSON_GetArraySize(ts) >= 7, "%s: %d tensors in dequant", path, cJSON_GetArraySize(ts));
        snprintf(path, sizeof path, "tests/vectors/gguf/kq-llama-%s.gguf", files[f]);
        wb_gguf *g = NULL;
        CHECK_MSG(wb_gguf_open(path, &g, &err) == WB_OK, "%s", err.msg);
        double worst = 0;
        int n_t = 0;
        for (const cJSON *e = ts ? ts->child : NULL; g && e; e = e->next) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
            const wb_gguf_tensor *t = NULL;
            for (int64_t k = 0; name && k < wb_gguf_n_tensors(g); k++)
                if (!strcmp(wb_gguf_tensor_at(g, k)->name, name)) t = wb_gguf_tensor_at(g, k);
            CHECK_MSG(t, "%s: %s missing", path, name ? name : "?");
            if (!t) continue;
            const int64_t cols = t->dims[0], rows = t->n_elements / cols;
            float *v = malloc((size_t)t->n_elements * sizeof *v);
            const size_t rb = t->bytes / (size_t)rows;
            int ok = 1;
            for (int64_t r = 0; r < rows && ok; r++)
                ok = decode_row(t->type, v + r * cols, (const uint8_t *)t->data + rb * (size_t)r, cols) == 0;
            CHECK_MSG(ok, "%s %s: type %s not decoded", files[f], name, wb_ggml_type_name(t->type));
            double amax = 0, s = 0, w = 0, sa = 0;
            for (int64_t i = 0; i < t->n_elements; i++) {
                amax = fmax(amax, fabs(v[i]));
                s += v[i], w += (double)v[i] * (double)(i % 997 + 1), sa += fabs(v[i]) * (double)(i % 997 + 1);
            }
            const cJSON *rf[2] = {cJSON_GetObjectItem(e, "first"), cJSON_GetObjectItem(e, "last")};
            for (int k = 0; k < 2; k++) {
                CHECK(cJSON_GetArraySize(rf[k]) == cols);
                int64_t i = 0;
                for (const cJSON *x = rf[k] ? rf[k]->child : NULL; x && i < cols; x = x->next, i++) {
                    const double d = fabs(x->valuedouble - v[(k ? rows - 1 : 0) * cols + i]);
                    worst = fmax(worst, d / amax);
                    /* ggml may fuse a multiply-add where we round twice: a float ulp */
                    CHECK_MSG(d <= 1e-6 * amax, "%s %s row %s value %lld: %.9g against ggml %.9g", files[f],
                              name, k ? "last" : "0", (long long)i, v[(k ? rows - 1 : 0) * cols + i], x->valuedouble);
                }
            }
            const double gs = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "sum"));
            const double gw = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "wsum"));
            CHECK_MSG(fabs(gs - s) <= 1e-6 * sa && fabs(gw - w) <= 1e-6 * sa, "%s %s: sums %.9g %.9g against ggml %.9g %.9g",
                      files[f], name, s, w, gs, gw);
            if (t->type < 40) types_seen[t->type] = 1;
            n_t++;
            free(v);
        }
        printf("  %-7s %d tensors: rows 0 and last within %.2g of max|x| of ggml's values, sums agree\n",
               files[f], n_t, worst);
        wb_gguf_free(g);
        cJSON_Delete(root);
        free(json);
    }
    const uint32_t want[] = {WB_GGML_Q8_0, WB_GGML_Q4_1, WB_GGML_Q5_0, WB_GGML_Q5_1, WB_GGML_Q2_K,
                             WB_GGML_Q3_K, WB_GGML_Q4_K, WB_GGML_Q5_K, WB_GGML_Q6_K, WB_GGML_IQ4_NL,
                             WB_GGML_IQ4_XS};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK_MSG(types_seen[want[i]], "no %s tensor among the vectors", wb_ggml_type_name(want[i]));
}

static uint64_t rng = 88172645463325252ull;
static uint8_t rbyte(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

/* What the load did to these tensors before they had kernels (weights_gguf.c; Q2_K's still):
 * dequantize, quantize to Q8_0. Per block of 32 the error is at most half a Q8_0 step, max|x| /
 * 254, plus the f16 rounding of the Q8_0 scale (2^-11 relative, times |q| <= 127): measured over
 * random blocks of every type. */
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
    RUN(q2_k_unpacks_two_bit_values_with_scale_and_min_per_16);
    RUN(q3_k_unpacks_three_bit_values_and_six_bit_signed_scales);
    RUN(iq4_levels_are_the_fixed_non_linear_grid);
    RUN(conversions_keep_the_values);
    RUN(values_are_ggml_values);
    RUN(requantizing_to_q8_0_stays_within_half_a_step);
    RUN(llama_cpp_blocks_dequantize_near_the_q8_0_file);
    return check_summary();
}
