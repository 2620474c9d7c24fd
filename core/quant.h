/* quant.h - block-quantized weights in the GGUF byte layouts (not a public API).
 *
 * Every format splits a row into blocks and stores each block's values as small integers with
 * a scale; a row of n values (n a multiple of the block) is n / values * bytes bytes, blocks back
 * to back, little-endian, no padding:
 *
 *   Q8_0  32 values, 34 bytes: f16 d, int8 q[32]                 x = d * q
 *   Q4_0  32 values, 18 bytes: f16 d, uint8 qs[16]               x = d * (nibble - 8); byte j
 *         holds value j in its low nibble and value j + 16 in its high one
 *   Q4_K  256 values, 144 bytes: f16 d, f16 dmin, uint8 scales[12], uint8 qs[128]; 8 groups of
 *         32 with a 6-bit scale sc and min m each: x = d * sc * nibble - dmin * m. Group pairs
 *         (2c, 2c + 1) share qs[32c .. 32c + 31], low nibbles the first group, high the second.
 *         scales: groups 0-3 sc = s[j] & 63, m = s[j + 4] & 63; groups 4-7 take their low 4 bits
 *         from s[j + 4] (sc the low nibble, m the high one) and their top 2 bits from the top
 *         bits of s[j - 4] (sc) and s[j] (m).
 *   Q6_K  256 values, 210 bytes: uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d; value
 *         i = d * scales[i / 16] * (q - 32) with q 6 bits: each half of 128 values uses 64 bytes
 *         of ql and 32 of qh; for l < 32 the four values l, l + 32, l + 64, l + 96 of the half
 *         take their low 4 bits from ql[l] & 15, ql[l + 32] & 15, ql[l] >> 4, ql[l + 32] >> 4
 *         and their high 2 bits from bits 0-1, 2-3, 4-5, 6-7 of qh[l].
 *   Q5_0  32 values, 22 bytes: f16 d, uint8 qh[4], uint8 qs[16]   x = d * (q - 16); q's low 4
 *         bits are nibble j as in Q4_0, its fifth bit is bit j of qh read as a little-endian
 *         u32. Values d * [-16, 15]: exactly a Q8_0 block with the same d, and its products
 *         are Q8_0's integer sums; AVX2 prompts run Q8_0's tile kernel on rows widened per
 *         call, AVX-512 ones the Q8_0 / Q4_0 tile kernel on Q5_0's own registers.
 *   IQ4_NL 32 values, 18 bytes: f16 d, uint8 qs[16]   x = d * K[nibble], nibbles as in Q4_0 and
 *         K ggml's 16 int8 levels (quant_fallback.h): exactly the Q8_0 block with the same d
 *         and q = K[nibble]. Decode looks the levels up per block (one vpshufb) and runs
 *         Q8_0's dot chain; prompts widen rows to those Q8_0 blocks per call for the Q8_0
 *         kernels (no tile layout). llama.cpp writes it where a Q2_K / Q3_K / IQ4_XS row is not
 *         a multiple of 256 wide, and the GGUF loader turns IQ4_XS groups into it.
 *   Q5_K  256 values, 176 bytes: f16 d, f16 dmin, uint8 scales[12], uint8 qh[32], uint8 qs[128];
 *         Q4_K's groups, scales and mins (the first 16 bytes are laid out as Q4_K's) with a
 *         fifth bit: value l of group g is nibble | (bit g of qh[l]) << 4, the nibbles as in
 *         Q4_K from qs: x = d * sc * q - dmin * m, q in 0..31. Its kernels are Q4_K's with
 *         that bit or-ed in (Q5_K_M files hold it: 5.5 bits a value).
 *   Q4_1  32 values, 20 bytes: f16 d, f16 m, uint8 qs[16]   x = d * nibble + m (nibbles as Q4_0)
 *   Q5_1  32 values, 24 bytes: f16 d, f16 m, uint8 qh[4], uint8 qs[16]   x = d * q + m, q as in
 *         Q5_0 (0..31). llama.cpp writes Q5_1 where a Q5_K row is not a multiple of 256 wide
 *         (most of a Qwen2.5-0.5B Q5_K_M file), Q4_1 where Q4_1 files ask. Their products keep
 *         the min term (m times the input's block sum) in a chain of its own (quant.c).
 *
 * Q8_0 and Q4_0 can be written (wb_quantize_row, byte for byte what GGUF's reference quantizers
 * write); all nine are read and multiplied. The F32 input row is quantized once per product to
 * int8 per block of 32 with its own scale (wb_quantize_act), so a weight block times an input
 * block is an exact int32 sum; Q4_K, Q5_K and Q6_K apply their 6-bit / 8-bit sub-block scales to those
 * sums per 32 (per 16) values, where GGUF's own kernels use one input scale per 256 (Q8_K): a
 * finer input grid, the same integer arithmetic. How each output's float chain is fixed so that
 * a row in a batch gets the bits it gets alone: quant.c, "the canonical dot products".
 */
#ifndef WB_QUANT_H
#define WB_QUANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum wb_qtype {
    WB_QT_Q8_0 = 0,
    WB_QT_Q4_0,
    WB_QT_Q4_K,
    WB_QT_Q6_K,
    WB_QT_Q5_0,
    WB_QT_IQ4_NL,
    WB_QT_Q5_K,
    WB_QT_Q4_1,
    WB_QT_Q5_1,
    WB_QT_COUNT
} wb_qtype;

/* "q8_0", "q4_0", "q4_k", "q6_k", "q5_0", "iq4_nl", "q5_k", "q4_1", "q5_1" */
const char *wb_qtype_name(wb_qtype t);
/* Values and bytes per block. */
int wb_qtype_block_values(wb_qtype t);
size_t wb_qtype_block_bytes(wb_qtype t);
/* Bytes of a row of n values; 0 when n is not a positive multiple of the block. */
size_t wb_quant_row_bytes(wb_qtype t, int64_t n);

/* dst = the blocks of src[n] (n a multiple of 32; Q8_0 and Q4_0 only; returns 0, or -1 for
 * another type or n). Q8_0: d = max|x| / 127, q = round-half-away(x / d); Q4_0: d = x_m / -8
 * for the x_m of largest magnitude, nibble = min(15, floor(x / d + 8.5)); d stored as F16
 * (round to nearest even); a block of zeros gets d = 0. */
int wb_quantize_row(wb_qtype t, void *dst, const float *src, int n);
/* dst[n] = the values of the blocks at src (any type). */
void wb_dequantize_row(wb_qtype t, float *dst, const void *src, int n);
/* The same for the values [k0, k0 + kn) of the row, k0 and kn multiples of the block. */
void wb_dequantize_range(wb_qtype t, float *dst, const void *row, int k0, int kn);

/* The input side of the integer dot products: per block of 32 a float scale and 32 signed bytes
 * (|q| <= 127) plus their sums per 32 and per 16, in wb_quant_act_bytes(n) bytes (a multiple of
 * 64; the buffer must be 4-byte aligned, 64 is best) for a row of n values (a multiple of 32; 0
 * otherwise). The bytes do not depend on the kernel level. */
size_t wb_quant_act_bytes(int n);
void wb_quantize_act(void *dst, const float *x, int n);
/* sum over the row of w . x, w a row of n values of type t, xq from wb_quantize_act, through
 * the level in use: exactly what wb_gemm_q computes for that row and input (without bias). */
float wb_quant_dot(wb_qtype t, const void *w, const void *xq, int n);

/* For rows r in [r0, r1) of W (rows of `in` values in type t) and inputs j < nb:
 *   Y[j*ldy + r] = (accumulate ? Y[j*ldy + r] : 0) + b[r] + W[r, :] . X[j*ldx, :]
 * Every input quantized once (xq NULL, or nb * wb_quant_act_bytes(in) bytes, 64-byte aligned),
 * then integer dots: decode (nb = 1) with one kernel, batches and prefill with the tile kernel,
 * both giving every (row, input) the same bits, so an input gets the same outputs at any nb. */
void wb_gemm_q(wb_qtype t, float *Y, size_t ldy, const float *X, size_t ldx, int nb, const void *W,
               const float *b, int in, int r0, int r1, int accumulate, void *xq);

/* wb_gemm_q over inputs already quantized: xq holds nb rows from wb_quantize_act,
 * wb_quant_act_bytes(in) bytes apart (64-byte aligned), quantized under any level (the bytes do
 * not depend on it). The same bits as wb_gemm_q on the float rows, so one quantized copy of an
 * input can be shared by every matrix and thread that reads it (q/k/v, gate/up). */
void wb_gemm_q_act(wb_qtype t, float *Y, size_t ldy, const void *xq, int nb, const void *W,
                   const float *b, int in, int r0, int r1, int accumulate);

/* The 16-row tile layout of Q8_0, Q4_0 and Q5_0 matrices (rows a multiple of 16): the file's bytes
 * rearranged so that the AVX-512 and AVX2 kernels read them with plain loads (weights.c chooses it at
 * load when the load-time level has tile kernels: wb_quant_tiles_native). Rows 16g..16g+15 take
 * the same bytes as in the file, 16 x the row bytes from byte 16g x row bytes on, block after
 * block; each block of 16 rows (Q8_0 544 bytes, Q4_0 288, Q5_0 352) is
 *   values: 8 (Q8_0), 4 (Q4_0) or 5 (Q5_0) groups of 64 bytes, group k holding bytes 4k..4k+3 of
 *           each of the 16 rows' blocks (the bytes after the scale: Q8_0's q xor 0x80, the
 *           unsigned side of vpdpbusd, Q4_0's qs, Q5_0's qh then qs), row i at 4i;
 *   scales: the 16 rows' f16 d, row i at 2i.
 * Every product gives the bits the file layout gives (the same integer sums and chain). */
int wb_quant_tiles_ok(wb_qtype t, int rows, int in);
/* 1 when the level in use multiplies the tile layout directly (AVX-512 VNNI, AVX2 without
 * AVX-VNNI); other levels read it row by row (correct, slow: for tests that switch levels after
 * load). */
int wb_quant_tiles_native(void);
/* dst = the tile layout of the rows x in matrix src in the file layout (dst != src; nothing
 * when wb_quant_tiles_ok fails) */
void wb_quant_to_tiles(wb_qtype t, void *dst, const void *src, int rows, int in);
/* dst = row r of the tile-layout matrix W, in the file layout */
void wb_quant_tile_row(wb_qtype t, void *dst, const void *W, int r, int in);
/* dst[in] = the values of that row */
void wb_quant_tile_dequant_row(wb_qtype t, float *dst, const void *W, int r, int in);
/* wb_gemm_q / wb_gemm_q_act (and _with) for W in the tile layout (Q8_0, Q4_0, Q5_0); r0, r1 any rows
 * of it; rows r of the product are rows r + off of W (off < 16, a row view not starting at a
 * group: read row by row); the same bits as the file layout's call */
void wb_gemm_qt(wb_qtype t, int off, float *Y, size_t ldy, const float *X, size_t ldx, int nb, const void *W,
                const float *b, int in, int r0, int r1, int accumulate, void *xq);
void wb_gemm_qt_act(wb_qtype t, int off, float *Y, size_t ldy, const void *xq, int nb, const void *W,
                    const float *b, int in, int r0, int r1, int accumulate);

/* The kernel variants this CPU can run (portable first, then AVX2 maddubs, AVX2 + AVX-VNNI,
 * AVX-512 VNNI, as available), for tests and benchmarks that compare them on the same inputs;
 * each level of the dispatch table uses the last one of its level. Returns how many exist. */
typedef struct wb_quant_kernels wb_quant_kernels;
int wb_quant_kernel_variants(const wb_quant_kernels **out, int max);
const char *wb_quant_kernels_name(const wb_quant_kernels *k);
/* 1 when k multiplies the tile layout directly (otherwise it reads it row by row) */
int wb_quant_kernels_tiles(const wb_quant_kernels *k);
void wb_gemm_q_with(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy, const float *X,
                    size_t ldx, int nb, const void *W, const float *b, int in, int r0, int r1,
                    int accumulate, void *xq);
void wb_gemm_q_act_with(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy,
                        const void *xq, int nb, const void *W, const float *b, int in, int r0,
                        int r1, int accumulate);
void wb_gemm_qt_with(const wb_quant_kernels *k, wb_qtype t, int off, float *Y, size_t ldy, const float *X,
                     size_t ldx, int nb, const void *W, const float *b, int in, int r0, int r1,
                     int accumulate, void *xq);
void wb_gemm_qt_act_with(const wb_quant_kernels *k, wb_qtype t, int off, float *Y, size_t ldy,
                         const void *xq, int nb, const void *W, const float *b, int in, int r0,
                         int r1, int accumulate);

/* A prompt phase's inputs quantized and grouped once for every tile-layout matrix of type t it
 * multiplies (q/k/v, gate/up) and every thread, where the level in use has such a kernel
 * (AVX-512 VNNI): wb_quant_group_bytes is the buffer for nb inputs of in values (64-byte
 * aligned), 0 where the level has none (or t has no tile layout, or nb < 2): then use
 * wb_gemm_qt_act. wb_quant_group_act quantizes rows j0..j1 of X[nb, ldx] into it (threads may
 * fill disjoint ranges at once), wb_gemm_qt_group multiplies W (tile layout, a whole group at row
 * 0: off 0) by them: the same bits as wb_gemm_qt on X. The bytes depend on t and the level. */
size_t wb_quant_group_bytes(wb_qtype t, int nb, int in);
void wb_quant_group_act(wb_qtype t, void *grp, const float *X, size_t ldx, int nb, int in, int j0,
                        int j1);
void wb_gemm_qt_group(wb_qtype t, float *Y, size_t ldy, const void *grp, int nb, const void *W,
                      const float *b, int in, int r0, int r1, int accumulate);
size_t wb_quant_group_bytes_with(const wb_quant_kernels *k, wb_qtype t, int nb, int in);
void wb_quant_group_act_with(const wb_quant_kernels *k, wb_qtype t, void *grp, const float *X,
                             size_t ldx, int nb, int in, int j0, int j1);
void wb_gemm_qt_group_with(const wb_quant_kernels *k, wb_qtype t, float *Y, size_t ldy,
                           const void *grp, int nb, const void *W, const float *b, int in, int r0,
                           int r1, int accumulate);

#endif
