/* model_internal.h - the compute kernels the forward passes share (not a public API).
 *
 * core/kernels.c       layernorm / gemv / gelu / softmax (F32)
 * core/kernels_attention.c  attention over the KV cache (decode, prefill blocks)
 * core/kernels_bf16.c  BF16 GEMV, RMSNorm, SwiGLU (declared in llama_internal.h)
 * The model-family interface and everything the family files share: core/model_family.h.
 */
#ifndef WB_MODEL_INTERNAL_H
#define WB_MODEL_INTERNAL_H

#include "wb_model.h"

typedef enum wb_act { WB_ACT_GELU_TANH = 0, WB_ACT_GELU_ERF = 1 } wb_act;

/* --------------------------------------------------------------------------------- kernels */

/* Scalar fallback forced (tests compare both paths); returns the previous setting. */
int wb_kernels_force_scalar(int on);
/* "avx2+fma" or "scalar": the path in use. */
const char *wb_kernels_name(void);

/* out[C] = (x - mean) / sqrt(var + eps) * w + b over one row. */
void wb_layernorm_forward(float *out, const float *x, const float *w, const float *b, int C,
                          float eps);
/* x[C] += add (when add is not NULL), then out = layernorm(x) as above: a residual's pending
 * bias folded into the LayerNorm that reads it (prefill). */
void wb_layernorm_add_forward(float *out, float *x, const float *add, const float *w,
                              const float *b, int C, float eps);
/* For rows r in [r0, r1): y[r] = (accumulate ? y[r] : 0) + b[r] + W[r, :in] . x.
 * W is [rows, in] row-major (the transpose of Conv1D's [in, out]); b may be NULL. */
void wb_gemv_forward(float *y, const float *x, const float *W, const float *b, int in, int r0,
                     int r1, int accumulate);
/* The GEMV for nb inputs at once (X rows ldx apart, Y rows ldy apart), each output computed with
 * the same additions in the same order as wb_gemv_forward, so a row in a batch gets exactly the
 * values it gets alone. Weights stream once per call (a BLAS GEMM would spend a few-row call
 * packing them). */
void wb_gemv_batch_forward(float *Y, size_t ldy, const float *X, size_t ldx, int nb,
                           const float *W, const float *b, int in, int r0, int r1,
                           int accumulate);
/* x[n] = gelu(x) in place. */
void wb_gelu_forward(float *x, size_t n, wb_act act);
/* x[n] = softmax(x) in place (max-subtracted). */
void wb_softmax_forward(float *x, int n);
/* One head of causal attention for a query at absolute position p:
 * q[hs]; keys/values rows t = 0..p at k + t*stride, v + t*stride; scratch att[p+1];
 * out[hs] = sum_t softmax(q.k_t / sqrt(hs))_t v_t. */
void wb_attention_forward(float *out, const float *q, const float *k, const float *v,
                          size_t stride, int p, int hs, float *att);

/* nq consecutive queries at absolute positions pos..pos+nq-1 of ng query heads that share one
 * KV head (GQA; ng = 1 for one head): head g of query i at q + i*ldq + g*hs, its output at
 * out + i*ldo + g*hs; keys/values rows 0..pos+nq-1 ldkv apart. window 0: full causal; else query p
 * sees keys max(0, p - window + 1)..p. scratch holds wb_attention_block_scratch(pos, nq, hs)
 * floats (any alignment; enough for any ng and window). The same result as wb_attention_forward
 * per query and head up to float rounding (it scales by 1/sum after the weighted sum); faster for
 * many queries (prefill). q, k and v are only read. */
size_t wb_attention_block_scratch(int pos, int nq, int hs);
void wb_attention_block_forward(float *out, size_t ldo, const float *q, size_t ldq, const float *k,
                                const float *v, size_t ldkv, int pos, int nq, int ng, int hs,
                                int window, float *scratch);

#endif
