/* model_internal.h - what the model files share among themselves (not a public API).
 *
 * core/safetensors.c  safetensors reader/writer, f16/bf16 conversion
 * core/config.c       config.json
 * core/kernels.c      layernorm / gemv / gelu / softmax / attention, AVX2 dispatch
 * core/threadpool.c   persistent pool with a spin-then-futex barrier
 * core/model.c        loading: one aligned weight block, [out,in] matrices
 * core/session.c      forward pass: GEMM prefill, GEMV decode, KV cache
 */
#ifndef WB_MODEL_INTERNAL_H
#define WB_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "wb_model.h"

/* ---------------------------------------------------------------------------------- config */

typedef enum wb_act { WB_ACT_GELU_TANH = 0, WB_ACT_GELU_ERF = 1 } wb_act;

/* wb_config_parse plus the activation, which wb_config has no field for. */
wb_status wb_config_parse_ex(const char *json, size_t len, const char *name, wb_config *out,
                             wb_act *act, wb_err *err);

/* ----------------------------------------------------------------------------- thread pool */

typedef void (*wb_pool_fn)(void *arg, int tid, int nt);
typedef struct wb_pool wb_pool;

wb_status wb_pool_new(int n_threads, wb_pool **out, wb_err *err);
void wb_pool_free(wb_pool *p);
int wb_pool_size(const wb_pool *p);
/* Run fn(arg, tid, n) on every thread of the pool, the caller being tid 0; returns when all
 * are done. A NULL pool runs fn(arg, 0, 1) inline. */
void wb_pool_run(wb_pool *p, wb_pool_fn fn, void *arg);
/* Every thread of the current wb_pool_run waits for the others. No-op for NULL / 1 thread. */
void wb_pool_barrier(wb_pool *p);

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

/* nq consecutive queries of one head at absolute positions pos..pos+nq-1: q rows ldq apart,
 * keys/values rows 0..pos+nq-1 ldkv apart, out rows ldo apart. scratch holds
 * wb_attention_block_scratch(pos, nq, hs) floats (any alignment). The same result as
 * wb_attention_forward per query up to float rounding (it scales by 1/sum after the weighted
 * sum); faster for many queries (prefill). */
size_t wb_attention_block_scratch(int pos, int nq, int hs);
void wb_attention_block_forward(float *out, size_t ldo, const float *q, size_t ldq, const float *k,
                                const float *v, size_t ldkv, int pos, int nq, int hs,
                                float *scratch);

/* ----------------------------------------------------------------------------------- model */

/* One transformer block; every matrix is [out, in] (the transpose of the file's Conv1D
 * [in, out]) so that both the GEMV rows and the GEMM (B transposed) stream contiguously. */
typedef struct wb_layer {
    const float *ln1_w, *ln1_b;   /* [C] */
    const float *qkv_w;           /* [3C, C] */
    const float *qkv_b;           /* [3C] */
    const float *attproj_w;       /* [C, C] */
    const float *attproj_b;       /* [C] */
    const float *ln2_w, *ln2_b;   /* [C] */
    const float *fc_w;            /* [F, C], F = n_inner */
    const float *fc_b;            /* [F] */
    const float *mlpproj_w;       /* [C, F] */
    const float *mlpproj_b;       /* [C] */
} wb_layer;

struct wb_model {
    wb_config cfg;
    wb_act act;
    char *dir;
    char *config_json;
    wb_tokenizer *tok;
    int64_t n_params;

    float *block;                 /* every weight below, 64-byte aligned sub-arrays */
    size_t block_floats;
    const float *wte;             /* [V, C] token embeddings, also the tied head */
    const float *wpe;             /* [T, C] position embeddings */
    wb_layer *layers;             /* [L] */
    const float *lnf_w, *lnf_b;   /* [C] */
    const float *head;            /* [V, C]: wte when tied, lm_head.weight otherwise */

    /* Llama family (core/llama.c): its weights, the mapped shards they live in, RoPE tables.
     * NULL for GPT-2, whose weights are the fields above. */
    struct wb_llama *llama;
    int32_t *eos_ids;             /* generation_config.json eos_token_id, [n_eos] */
    size_t n_eos;
    char model_type[16];

    wb_abort_fn abort_fn;
    void *abort_data;

    /* The decode pool follows wb_threads_get(); the mutex keeps two sessions from sharing it
     * at the same moment. */
    pthread_mutex_t pool_mu;
    wb_pool *pool;
};

/* Activations kept between prefill calls: fresh multi-MB mallocs are fresh mmaps, and their
 * page faults cost a few percent of a prefill. */
typedef struct wb_scratch {
    float *p;
    size_t cap; /* floats */
} wb_scratch;

/* One sequence in a multi-sequence forward: n tokens at positions pos..pos+n-1 through its own
 * cache k/v ([L, cache_ctx, C] each), attending to its rows 0..pos+n-1 only. */
typedef struct wb_seq_rows {
    float *k, *v;
    int cache_ctx;
    int pos;
    const int32_t *ids;
    int n;
} wb_seq_rows;

/* Forward several sequences in one pass: their rows are stacked so every matrix is one GEMM over
 * all of them, while attention runs per sequence over its own cache and positions (no padding).
 * logits: NULL; [n_seqs, V] for the last row of each sequence; or [sum n, V] when all_positions.
 * wb_forward_tokens is the one-sequence case. */
wb_status wb_forward_seqs(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                          int all_positions, wb_scratch *scratch, wb_err *err);

/* Forward n tokens at positions pos..pos+n-1 with GEMMs, writing their K/V into kcache/vcache
 * ([L, cache_ctx, C] each) and reading rows 0..pos+n-1. logits NULL, [V] or [n, V].
 * scratch may be NULL (allocated for this call only). */
wb_status wb_forward_tokens(const wb_model *m, float *kcache, float *vcache, int cache_ctx,
                            int pos, const int32_t *ids, int n, float *logits,
                            int all_positions, wb_scratch *scratch, wb_err *err);

/* A session as one sequence of a wb_forward_seqs call (core/batch.c): check that ids fit and are in
 * the vocabulary, then describe its cache; after a successful forward, wb_session_commit records
 * the ids and moves pos by n. */
wb_status wb_session_rows(wb_session *s, const int32_t *ids, int n, wb_seq_rows *out,
                          wb_err *err);
void wb_session_commit(wb_session *s, const int32_t *ids, int n);
/* The session's prefill activations, reused by batched calls that run through it. */
wb_scratch *wb_session_scratch(wb_session *s);

/* Check ids against the vocabulary: WB_ERR_RANGE naming the id and index. */
wb_status wb_check_ids(const wb_model *m, const int32_t *ids, int n, wb_err *err);

/* ------------------------------------------------------------- Llama family (core/llama.c) */

struct cJSON;
/* The Llama-family keys of config.json (core/config_llama.c); model_type is llama, qwen2 or
 * mistral. Fills every wb_config field; errors name `name` and the key. */
wb_status wb_config_parse_llama(const struct cJSON *root, const char *model_type,
                                const char *name, wb_config *out, wb_err *err);
/* Map and check the weights of m->cfg (a Llama-family config) from dir: model.safetensors, or
 * model.safetensors.index.json and its shards. Sets m->llama and m->n_params. */
wb_status wb_llama_load(wb_model *m, const char *dir, const wb_model_params *p, wb_err *err);
void wb_llama_free(struct wb_llama *ll);
size_t wb_llama_weight_bytes(const struct wb_llama *ll);
/* The Llama-family forward for wb_forward_seqs (same contract; K/V rows are kv_width wide). */
wb_status wb_llama_forward_seqs(const wb_model *m, const wb_seq_rows *seqs, int n_seqs,
                                float *logits, int all_positions, wb_scratch *scratch,
                                wb_err *err);
/* Floats per K (and per V) cache row: n_kv_head * head_dim (n_embd for GPT-2). */
size_t wb_model_kv_width(const wb_model *m);

/* session.c: wb_threads_get() capped at the online CPUs, and the model's thread pool made nt
 * wide and locked (the caller releases it); used by the GPT-2 and Llama forward passes alike. */
int wb_compute_threads(void);
wb_status wb_model_pool_acquire(const wb_model *m, int nt, wb_pool **out, wb_err *err);
void wb_model_pool_release(const wb_model *m);

#endif
