/* quant_fallback.h - reading the ggml block types llama.cpp's quantizer falls back to (not a
 * public API).
 *
 * A Q4_K_M or Q5_K_M file of a model whose rows are not a multiple of 256 wide (Qwen2.5-0.5B:
 * 896) stores some tensors as Q5_0, Q5_1 or Q4_1 instead of a K type; Q5_K_M files hold Q5_K.
 * The workbench has no dot kernels for Q4_1, Q5_1 and Q5_K: they are only dequantized here, and
 * the GGUF weight source (weights_gguf.c) turns their matrices into Q8_0 at load. Q5_0 has
 * kernels (quant.c, which maps it from the file); its decode here is their tests' reference. Layouts (little-endian,
 * f16 scales, no padding; "nibble j" of qs is qs[j] & 15 for j < 16 and qs[j - 16] >> 4 after):
 *
 *   Q4_1  32 values, 20 bytes: f16 d, f16 m, uint8 qs[16]          x_j = d * nibble_j + m
 *   Q5_0  32 values, 22 bytes: f16 d, uint8 qh[4], uint8 qs[16]    x_j = d * (q_j - 16)
 *   Q5_1  32 values, 24 bytes: f16 d, f16 m, uint8 qh[4], qs[16]   x_j = d * q_j + m
 *         q_j = nibble_j | (bit j of the little-endian u32 qh) << 4
 *   Q5_K  256 values, 176 bytes: f16 d, f16 dmin, uint8 scales[12], uint8 qh[32], uint8 qs[128];
 *         8 groups of 32 with the 6-bit scale sc and min m packed as in Q4_K (quant.h):
 *         x = d * sc * q - dmin * m. Group pair (2c, 2c + 1) shares qs[32c .. 32c + 31], low
 *         nibbles the first group, high the second; value l (< 32) of group g takes its fifth
 *         bit from bit g of qh[l].
 */
#ifndef WB_QUANT_FALLBACK_H
#define WB_QUANT_FALLBACK_H

#include <stddef.h>
#include <stdint.h>

/* Values and bytes per block of ggml type `type` (the file's number) when it is one of Q4_1,
 * Q5_0, Q5_1, Q5_K; 0 otherwise. */
int wb_fallback_block_values(uint32_t type);
size_t wb_fallback_block_bytes(uint32_t type);
/* dst[n] = the values of the blocks at src; n a multiple of the block (else nothing written,
 * returns -1; 0 on success, -1 for a type not listed above). */
int wb_fallback_dequantize_row(uint32_t type, float *dst, const void *src, int64_t n);

#endif
