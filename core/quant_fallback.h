/* quant_fallback.h - reading the ggml block types the workbench has no kernels for (not a
 * public API).
 *
 * A Q4_K_M or Q5_K_M file of a model whose rows are not a multiple of 256 wide (Qwen2.5-0.5B:
 * 896) stores some tensors as Q5_0, Q5_1 or Q4_1 instead of a K type; the low-bit files
 * people download for small machines hold Q3_K and Q2_K (Q3_K_M, Q2_K mixes) or the non-linear
 * IQ4_NL / IQ4_XS. These are decoded here, and the GGUF weight source
 * (weights_gguf.c) turns their matrices into a type that has kernels at load
 * (wb_fallback_target): Q3_K into Q6_K with every value kept exactly, IQ4_XS into IQ4_NL with
 * its group scales rounded to f16, Q2_K into Q8_0 by quantizing the values again. Q5_0, Q4_1,
 * Q5_1, IQ4_NL and Q5_K have kernels (quant.c, which maps them from the file); their decode here
 * is their tests' reference. Layouts (little-endian, f16 scales, no padding; "nibble j" of 16 bytes
 * qs is qs[j] & 15 for j < 16 and qs[j - 16] >> 4 after; in the 256-value K types value i is in
 * half h = i / 128, quarter k = (i % 128) / 32, position l = i % 32):
 *
 *   Q4_1    32 values, 20 bytes: f16 d, f16 m, uint8 qs[16]          x_j = d * nibble_j + m
 *   Q5_0    32 values, 22 bytes: f16 d, uint8 qh[4], uint8 qs[16]    x_j = d * (q_j - 16)
 *   Q5_1    32 values, 24 bytes: f16 d, f16 m, uint8 qh[4], qs[16]   x_j = d * q_j + m
 *           q_j = nibble_j | (bit j of the little-endian u32 qh) << 4
 *   Q5_K    256 values, 176 bytes: f16 d, f16 dmin, uint8 scales[12], uint8 qh[32], uint8 qs[128];
 *           8 groups of 32 with the 6-bit scale sc and min m packed as in Q4_K (quant.h):
 *           x = d * sc * q - dmin * m. Group pair (2c, 2c + 1) shares qs[32c .. 32c + 31], low
 *           nibbles the first group, high the second; value l (< 32) of group g takes its fifth
 *           bit from bit g of qh[l].
 *   Q2_K    256 values, 84 bytes: uint8 scales[16], uint8 qs[64], f16 d, f16 dmin; 16 groups of
 *           16 (group i / 16) with sc = scales & 15, m = scales >> 4: x = d * sc * q - dmin * m,
 *           q = bits 2k, 2k + 1 of qs[32h + l]
 *   Q3_K    256 values, 110 bytes: uint8 hmask[32], uint8 qs[64], uint8 scales[12], f16 d; 16
 *           groups of 16 with a 6-bit scale s: x = d * (s - 32) * (q - 4 + 4 * hbit), q = bits
 *           2k, 2k + 1 of qs[32h + l], hbit = bit 4h + k of hmask[l]; scale g takes its low 4
 *           bits from scales[g] & 15 (g < 8) or scales[g - 8] >> 4, its top 2 from bits
 *           2 (g / 4), 2 (g / 4) + 1 of scales[8 + g % 4]
 *   IQ4_NL  32 values, 18 bytes: f16 d, uint8 qs[16]                 x_j = d * K[nibble_j]
 *   IQ4_XS  256 values, 136 bytes: f16 d, u16 scales_h, uint8 scales_l[4], uint8 qs[128]; 8
 *           groups of 32, group g with the nibbles of qs[16g .. 16g + 15] and the 6-bit scale
 *           s = (scales_l[g / 2] >> 4 (g % 2)) & 15 | ((scales_h >> 2g) & 3) << 4:
 *           x = d * (s - 32) * K[nibble]
 *   K = the 16 int8 levels {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
 *       113} (ggml's kvalues_iq4nl: a fixed non-uniform grid, denser near 0)
 */
#ifndef WB_QUANT_FALLBACK_H
#define WB_QUANT_FALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/* Values and bytes per block of ggml type `type` (the file's number) when it is one of the
 * types above; 0 otherwise. */
int wb_fallback_block_values(uint32_t type);
size_t wb_fallback_block_bytes(uint32_t type);
/* dst[n] = the values of the blocks at src; n a multiple of the block (else nothing written,
 * returns -1; 0 on success, -1 for a type not listed above). */
int wb_fallback_dequantize_row(uint32_t type, float *dst, const void *src, int64_t n);
/* The type a matrix of `type` becomes at load: WB_QT_Q6_K for Q3_K, WB_QT_IQ4_NL for IQ4_XS,
 * WB_QT_Q8_0 for Q2_K (Q5_0, Q4_1, Q5_1, IQ4_NL and Q5_K are not converted: the value
 * returned for them means nothing). */
wb_qtype wb_fallback_target(uint32_t type);
/* dst = the row of n values at src (x: the same row dequantized by wb_fallback_dequantize_row)
 * in the target type's layout: Q3_K's values exactly, IQ4_XS's with each group's scale
 * d * (s - 32) rounded to f16 (a scale beyond f16 becomes Inf: callers check), the others' x
 * quantized as Q8_0 (wb_quantize_row). Returns 0, or -1 for the kernel types, a type or n not
 * listed above. */
int wb_fallback_convert_row(uint32_t type, void *dst, const void *src, const float *x, int64_t n);

#endif
