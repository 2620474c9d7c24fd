/* llama_internal.h - what core/llama.c and core/kernels_bf16.c share (not a public API).
 *
 * core/config_llama.c  Llama / Qwen2 / Mistral config.json keys
 * core/kernels_bf16.c  BF16 GEMV with F32 accumulation, RMSNorm, SwiGLU, BF16 -> F32 rows
 * core/llama.c         weights (single file or shards, mapped) and the forward pass
 */
#ifndef WB_LLAMA_INTERNAL_H
#define WB_LLAMA_INTERNAL_H

#include "model_internal.h"

/* A matrix [rows, cols] row-major (HF nn.Linear keeps [out, in], so no transpose), either F32
 * (owned, 64-byte aligned) or BF16 (straight from the mapped file, 2-byte aligned). */
typedef struct wb_mat {
    const void *w;
    int bf16;
    int rows, cols;
} wb_mat;

typedef struct wb_llama_layer {
    const float *attn_norm;      /* [C] input_layernorm */
    wb_mat wq;                   /* [NH*hd, C] */
    wb_mat wk, wv;               /* [NKV*hd, C] */
    const float *bq, *bk, *bv;   /* [NH*hd], [NKV*hd], [NKV*hd] or NULL */
    wb_mat wo;                   /* [C, NH*hd] */
    const float *bo;             /* [C] or NULL */
    const float *mlp_norm;       /* [C] post_attention_layernorm */
    wb_mat wg, wu;               /* [F, C] gate_proj, up_proj */
    wb_mat wd;                   /* [C, F] down_proj */
    const float *bg, *bu, *bd;   /* [F], [F], [C] or NULL (mlp_bias) */
} wb_llama_layer;

struct wb_llama {
    wb_safetensors **shards;     /* [n_shards] kept mapped: BF16 matrices point into them */
    int n_shards;
    float *block;                /* F32 weights (vectors always; matrices unless BF16) */
    size_t block_floats;
    uint16_t *bf16_copy;         /* BF16 tensors whose file offset was odd, copied aligned */
    size_t mapped_bf16_bytes;
    wb_mat embed;                /* [V, C] embed_tokens */
    wb_llama_layer *layers;      /* [L] */
    const float *norm;           /* [C] final norm */
    wb_mat head;                 /* [V, C]: embed when tied, lm_head otherwise */
    float *inv_freq;             /* [hd/2] RoPE inverse frequencies after rope_scaling */
};

/* ---- kernels_bf16.c ---------------------------------------------------------------------- */

/* For rows r in [r0, r1) and inputs t < nb:
 *   Y[t*ldy + r] = (accumulate ? Y[t*ldy + r] : 0) + b[r] + sum_i bf16(W[r*in + i]) * X[t*ldx + i]
 * W is BF16 [rows, in] row-major, 2-byte aligned; every product and sum in F32. b may be NULL. */
void wb_gemv_bf16_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                          const uint16_t *W, const float *b, int in, int r0, int r1,
                          int accumulate);
/* dst[n] = src[n] widened (exact). */
void wb_bf16_to_f32_forward(float *dst, const uint16_t *src, size_t n);
/* out[C] = x / sqrt(mean(x^2) + eps) * w (HF LlamaRMSNorm: weight times the normalised x). */
void wb_rmsnorm_forward(float *out, const float *x, const float *w, int C, float eps);
/* g[n] = silu(g) * u = g / (1 + exp(-g)) * u (SwiGLU: act_fn(gate_proj(x)) * up_proj(x)). */
void wb_swiglu_forward(float *g, const float *u, size_t n);

#endif
