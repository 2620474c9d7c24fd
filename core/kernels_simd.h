/* kernels_simd.h - small vector-math helpers shared by the kernel files (not a public API).
 *
 * Static inline with target attributes, so each kernel file compiles them for the levels it
 * registers and the library still builds and runs on any x86-64 (or non-x86) machine.
 */
#ifndef WB_KERNELS_SIMD_H
#define WB_KERNELS_SIMD_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define WB_AVX2 __attribute__((target("avx2,fma")))

WB_AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Cephes-style expf: 2^n * p(r), |r| <= ln2/2, degree-5 polynomial, rel. error ~2e-7.
 * Inputs are clamped so the result is finite or a clean 0 (softmax feeds it x - max <= 0). */
WB_AVX2 static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.3365447504f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i n = _mm256_cvtps_epi32(fx);
    n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

#define WB_AVX512F __attribute__((target("avx512f,avx2,fma")))

/* 16 x 16 transpose of dwords: r[j] row j in, r[c] column c out (the prompt GEMM's packing, the
 * AMX kernels' weight tiles). */
WB_AVX512F static inline void wb_tr16_512(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4q + c], 128-bit lane L: rows 4q..4q+3 of column 4L + c */
    for (int q = 0; q < 4; q++) {
        u[4 * q + 0] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
        u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
        u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
        u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
    }
    /* then a 4 x 4 transpose of 128-bit lanes for each c */
    for (int c = 0; c < 4; c++) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[4 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

/* The same expf on 16 lanes (SwiGLU in kernels_bf16.c, prefill attention in kernels_attention.c). */
WB_AVX512F static inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.3365447504f));
    /* x log2(e) rounded to a whole number by adding and subtracting 1.5 x 2^23 (exact here,
     * |x log2(e)| < 2^22, to nearest even as roundscale), which leaves it in t's low mantissa
     * bits for the exponent below: the same fx and 2^fx as roundscale and a convert, so the
     * same bits, without their port-0 operations */
    __m512 xl = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
    __asm__("" : "+v"(xl)); /* rounded first, as roundscale saw it: no fused multiply-add */
    const __m512 t = _mm512_add_ps(xl, _mm512_set1_ps(12582912.0f));
    const __m512 fx = _mm512_sub_ps(t, _mm512_set1_ps(12582912.0f));
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500E-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073E-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894E-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459E-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201E-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    const __m512i n = _mm512_slli_epi32(
        _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000 - 127)), 23);
    return _mm512_mul_ps(y, _mm512_castsi512_ps(n));
}

#endif
#endif
