/* quant_fallback.c - decoding the ggml block types without kernels, and turning their rows into
 * a type that has them (layouts: quant_fallback.h; Q5_0 is read through quant.c now, this
 * decode stays as its reference).
 *
 * Read once at load, never in a product, so one plain loop per type is all it needs: the
 * values are exact (an f16 scale times small integers, plus an f16 offset, in float), computed
 * in ggml's order (the group's scale d * sc first, then times q) so that they are ggml's values. */
#include "quant_fallback.h"

#include "gguf.h"
#include "wb_model.h"

#include <string.h>

enum {
    Q4_1 = WB_GGML_Q4_1, Q5_0 = WB_GGML_Q5_0, Q5_1 = WB_GGML_Q5_1, Q2_K = WB_GGML_Q2_K,
    Q3_K = WB_GGML_Q3_K, Q5_K = WB_GGML_Q5_K, IQ4_NL = WB_GGML_IQ4_NL, IQ4_XS = WB_GGML_IQ4_XS
};

static const int8_t k_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};

int wb_fallback_block_values(uint32_t type) {
    switch (type) {
    case Q4_1: case Q5_0: case Q5_1: case IQ4_NL: return 32;
    case Q2_K: case Q3_K: case Q5_K: case IQ4_XS: return 256;
    default: return 0;
    }
}

size_t wb_fallback_block_bytes(uint32_t type) {
    switch (type) {
    case Q4_1: return 20;
    case Q5_0: return 22;
    case Q5_1: return 24;
    case Q2_K: return 84;
    case Q3_K: return 110;
    case Q5_K: return 176;
    case IQ4_NL: return 18;
    case IQ4_XS: return 136;
    default: return 0;
    }
}

wb_qtype wb_fallback_target(uint32_t type) {
    return type == Q3_K ? WB_QT_Q6_K : type == IQ4_XS ? WB_QT_IQ4_NL : WB_QT_Q8_0;
}

static uint16_t u16_at(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static float half_at(const uint8_t *p) { return wb_f16_to_f32(u16_at(p)); }

static uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* One block of 32 of the legacy types: scale d, offset m (0 and -16 * d for Q5_0 folded into
 * the integer), optional fifth bits hbits. */
static void legacy_block(float *y, const uint8_t *qs, float d, float m, uint32_t hbits, int five,
                         int centre) {
    for (int j = 0; j < 32; j++) {
        int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
        if (five) q |= (int)((hbits >> j) & 1u) << 4;
        y[j] = d * (float)(q - centre) + m;
    }
}

/* Group g's 6-bit scale and min from the 12 packed bytes (the Q4_K / Q5_K packing). */
static void k_scale_min(const uint8_t *s, int g, int *sc, int *m) {
    if (g < 4) {
        *sc = s[g] & 63, *m = s[g + 4] & 63;
    } else {
        *sc = (s[g + 4] & 15) | (s[g - 4] >> 6) << 4;
        *m = (s[g + 4] >> 4) | (s[g] >> 6) << 4;
    }
}

static void q5_k_block(float *y, const uint8_t *b) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + 48;
    for (int g = 0; g < 8; g++) {
        int sc, m;
        k_scale_min(scales, g, &sc, &m);
        const float dg = d * (float)sc, mg = dmin * (float)m;
        const uint8_t *q = qs + 32 * (g / 2);
        for (int l = 0; l < 32; l++) {
            const int lo = g % 2 ? q[l] >> 4 : q[l] & 15;
            const int v = lo | ((qh[l] >> g) & 1) << 4;
            y[32 * g + l] = dg * (float)v - mg;
        }
    }
}

/* The 2 low bits of value i of a Q2_K / Q3_K block (qs: its 64 bytes). */
static int k_low2(const uint8_t *qs, int i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    return (qs[32 * h + l] >> 2 * k) & 3;
}

static void q2_k_block(float *y, const uint8_t *b) {
    const uint8_t *scales = b, *qs = b + 16;
    const float d = half_at(b + 80), dmin = half_at(b + 82);
    for (int g = 0; g < 16; g++) {
        const float dg = d * (float)(scales[g] & 15), mg = dmin * (float)(scales[g] >> 4);
        for (int i = 16 * g; i < 16 * g + 16; i++) y[i] = dg * (float)k_low2(qs, i) - mg;
    }
}

/* Q3_K's group g scale, s - 32 in [-32, 31] */
static int q3_k_scale(const uint8_t *sc, int g) {
    const int lo = g < 8 ? sc[g] & 15 : sc[g - 8] >> 4, hi = (sc[8 + g % 4] >> 2 * (g / 4)) & 3;
    return (lo | hi << 4) - 32;
}

/* value i of a Q3_K block as an integer in [-4, 3] */
static int q3_k_value(const uint8_t *b, int i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    return k_low2(b + 32, i) - ((b[l] >> (4 * h + k)) & 1 ? 0 : 4);
}

static void q3_k_block(float *y, const uint8_t *b) {
    const float d = half_at(b + 108);
    for (int g = 0; g < 16; g++) {
        const float dg = d * (float)q3_k_scale(b + 96, g);
        for (int i = 16 * g; i < 16 * g + 16; i++) y[i] = dg * (float)q3_k_value(b, i);
    }
}

/* IQ4_XS group g's scale, s - 32 */
static int iq4_xs_scale(const uint8_t *b, int g) {
    return (((b[4 + g / 2] >> 4 * (g % 2)) & 15) | ((u16_at(b + 2) >> 2 * g) & 3) << 4) - 32;
}

/* the 32 levels of one group of IQ4_NL / IQ4_XS nibbles qs[16] */
static void iq4_levels(int8_t *v, const uint8_t *qs) {
    for (int j = 0; j < 16; j++) v[j] = k_iq4[qs[j] & 15], v[j + 16] = k_iq4[qs[j] >> 4];
}

static void iq4_group(float *y, const uint8_t *qs, float d) {
    int8_t v[32];
    iq4_levels(v, qs);
    for (int j = 0; j < 32; j++) y[j] = d * (float)v[j];
}

int wb_fallback_dequantize_row(uint32_t type, float *dst, const void *src, int64_t n) {
    const int bv = wb_fallback_block_values(type);
    const size_t bb = wb_fallback_block_bytes(type);
    if (!bv || n < 0 || n % bv) return -1;
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / bv; i++, b += bb, dst += bv) {
        switch (type) {
        case Q4_1: legacy_block(dst, b + 4, half_at(b), half_at(b + 2), 0, 0, 0); break;
        case Q5_0: legacy_block(dst, b + 6, half_at(b), 0.0f, u32_at(b + 2), 1, 16); break;
        case Q5_1: legacy_block(dst, b + 8, half_at(b), half_at(b + 2), u32_at(b + 4), 1, 0); break;
        case Q2_K: q2_k_block(dst, b); break;
        case Q3_K: q3_k_block(dst, b); break;
        case IQ4_NL: iq4_group(dst, b + 2, half_at(b)); break;
        case IQ4_XS:
            for (int g = 0; g < 8; g++)
                iq4_group(dst + 32 * g, b + 8 + 16 * g, half_at(b) * (float)iq4_xs_scale(b, g));
            break;
        default: q5_k_block(dst, b); break;
        }
    }
    return 0;
}

/* A Q3_K block as the Q6_K block with the same d, its group scales s - 32 as Q6_K's int8 ones
 * and q + 32 as the 6-bit values (Q6_K layout: quant.h): the same values. */
static void q3_k_to_q6_k(uint8_t *o, const uint8_t *b) {
    memset(o, 0, 210);
    for (int i = 0; i < 256; i++) {
        const int q = q3_k_value(b, i) + 32, h = i / 128, k = (i % 128) / 32, l = i % 32;
        o[64 * h + 32 * (k % 2) + l] |= (uint8_t)((q & 15) << 4 * (k / 2));
        o[128 + 32 * h + l] |= (uint8_t)((q >> 4) << 2 * k);
    }
    for (int g = 0; g < 16; g++) o[192 + g] = (uint8_t)(int8_t)q3_k_scale(b + 96, g);
    o[208] = b[108], o[209] = b[109];
}

int wb_fallback_convert_row(uint32_t type, void *dst, const void *src, const float *x, int64_t n) {
    const int bv = wb_fallback_block_values(type);
    const size_t bb = wb_fallback_block_bytes(type);
    if (!bv || n <= 0 || n % bv || n > 1 << 30) return -1;
    const uint8_t *b = src;
    uint8_t *o = dst;
    switch (type) {
    case Q3_K:
        for (int64_t i = 0; i < n / bv; i++) q3_k_to_q6_k(o + 210 * i, b + bb * i);
        return 0;
    case Q5_0: case IQ4_NL: case Q5_K: case Q4_1: case Q5_1: return -1; /* kernel types: read as they are */
    case IQ4_XS: /* group g as the IQ4_NL block of scale d * (s - 32) and the same nibbles */
        for (int64_t i = 0; i < n / bv; i++)
            for (int g = 0; g < 8; g++) {
                uint8_t *blk = o + 18 * (8 * i + g);
                const uint16_t h = wb_f32_to_f16(half_at(b + bb * i) * (float)iq4_xs_scale(b + bb * i, g));
                blk[0] = (uint8_t)h, blk[1] = (uint8_t)(h >> 8);
                memcpy(blk + 2, b + bb * i + 8 + 16 * g, 16);
            }
        return 0;
    default: return wb_quantize_row(WB_QT_Q8_0, dst, x, (int)n);
    }
}
