/* quant_fallback.c - dequantizing Q4_1, Q5_0, Q5_1 and Q5_K blocks (layouts: quant_fallback.h;
 * Q5_0 is read through quant.c now, this decode stays as its reference).
 *
 * Read once at load, never in a product, so one plain loop per type is all it needs: the
 * values are exact (an f16 scale times a small integer, plus an f16 offset, in float). */
#include "quant_fallback.h"

#include "wb_model.h"

#include <string.h>

enum { Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q5_K = 13 };

int wb_fallback_block_values(uint32_t type) {
    switch (type) {
    case Q4_1: case Q5_0: case Q5_1: return 32;
    case Q5_K: return 256;
    default: return 0;
    }
}

size_t wb_fallback_block_bytes(uint32_t type) {
    switch (type) {
    case Q4_1: return 20;
    case Q5_0: return 22;
    case Q5_1: return 24;
    case Q5_K: return 176;
    default: return 0;
    }
}

static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return wb_f16_to_f32(h);
}

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
        default: q5_k_block(dst, b); break;
        }
    }
    return 0;
}
