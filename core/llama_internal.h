/* llama_internal.h - the Llama-style decoder block, shared by core/llama.c and the families that
 * reuse it (core/phi3.c), and the BF16 kernels (core/kernels_bf16.c). Not a public API.
 *
 * core/llama.c         Llama / Qwen2 / Mistral: config keys, weights, the forward pass
 * core/phi3.c          Phi-3: its config keys and fused weights, longrope; llama.c's forward
 * core/kernels_bf16.c  BF16 GEMV with F32 accumulation, RMSNorm, SwiGLU, BF16 -> F32 rows
 */
#ifndef WB_LLAMA_INTERNAL_H
#define WB_LLAMA_INTERNAL_H

#include "model_family.h"

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

/* cos/sin of the rotary angles for the n rows of one sequence at positions pos..pos+n-1:
 * cs[t * hd + i] = cos, cs[t * hd + hd/2 + i] = sin, i < hd/2. */
typedef void (*wb_rope_fn)(const wb_model *m, const wb_seq_rows *sq, float *cs);

/* m->impl of every family that runs wb_llama_forward. */
typedef struct wb_llama {
    wb_weight_store store;
    wb_mat embed;                /* [V, C] embed_tokens */
    wb_llama_layer *layers;      /* [L] */
    const float *norm;           /* [C] final norm */
    wb_mat head;                 /* [V, C]: embed when tied, lm_head otherwise */
    float *inv_freq;             /* [hd/2] RoPE inverse frequencies (default and llama3) */
    wb_rope_fn rope;             /* NULL: angles pos * inv_freq */
    int32_t sliding_window;      /* 0: full causal attention; else keys q-W+1..q only */
} wb_llama;

/* The config.json keys every Llama-style family shares (sizes, heads, head_dim, rms_norm_eps,
 * rope_theta, tie_word_embeddings, hidden_act silu, no quantization, full rotary); the family adds
 * its own (biases, rope_scaling, sliding window) and then wb_llama_check_size. */
wb_status wb_llama_parse_common(const struct cJSON *root, const char *model_type,
                                const char *name, wb_config *out, wb_err *err);
/* The parameter count of c (biases included) against WB_CAP_PARAMS. */
wb_status wb_llama_check_size(const wb_config *c, const char *name, wb_err *err);
/* A wb_llama with c->n_layer empty layers and the default / llama3 inv_freq table. */
wb_status wb_llama_alloc(const wb_config *c, wb_llama **out, wb_err *err);
/* cs rows for positions pos..pos+n-1 (layout of wb_rope_fn) from an inverse-frequency table,
 * angles in float32 as transformers forms them, cos and sin times scale. */
void wb_rope_angles(const float *inv_freq, float scale, int hd, int pos, int n, float *cs);

/* The block's forward, the wb_family.forward of those families (same contract). */
wb_status wb_llama_forward(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                           int all_positions, wb_scratch *scratch, wb_err *err);
void wb_llama_free(void *impl);
size_t wb_llama_kv_width(const wb_config *c);
int32_t wb_llama_max_ctx(const wb_config *c);
size_t wb_llama_weight_bytes(const wb_model *m);
void wb_llama_head(const wb_model *m, const float *x, int n, float *xn, float *logits);
const wb_weight_store *wb_llama_store(const wb_model *m);

/* ---- kernels_bf16.c ---------------------------------------------------------------------- */

/* For rows r in [r0, r1) and inputs t < nb:
 *   Y[t*ldy + r] = (accumulate ? Y[t*ldy + r] : 0) + b[r] + sum_i bf16(W[r*in + i]) * X[t*ldx + i]
 * W is BF16 [rows, in] row-major, 2-byte aligned; every product and sum in F32. b may be NULL.
 * Each output is summed in the same order whatever nb is (a row in a batch gets exactly what it
 * gets alone, which batched generation relies on), and for nb > 1 the weights stream once. */
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
