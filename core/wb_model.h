/* wb_model.h - safetensors I/O, model loading (GPT-2, Llama, Phi-3 families), forward pass and
 * KV-cache sessions. */
#ifndef WB_MODEL_H
#define WB_MODEL_H

#include "wb_base.h"
#include "wb_tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================= safetensors ======================================= */

typedef enum wb_dtype { WB_F32 = 0, WB_F16 = 1, WB_BF16 = 2, WB_I32 = 3, WB_I64 = 4 } wb_dtype;

#define WB_MAX_DIMS 8

/* A view of one tensor; `data` points into the mapped file (reader) or the caller's buffer
 * (writer). */
typedef struct wb_tensor_view {
    const char *name;
    wb_dtype dtype;
    int ndim;
    int64_t shape[WB_MAX_DIMS];
    const void *data;
    size_t nbytes;
} wb_tensor_view;

typedef struct wb_safetensors wb_safetensors;

/* mmap a .safetensors file and validate its header completely (length, JSON, dtypes, shapes,
 * offsets inside the data area, no overlaps, nbytes == product(shape) * dtype size). */
wb_status wb_safetensors_open(const char *path, wb_safetensors **out, wb_err *err);

/* Same over a caller-owned buffer that must outlive the handle (used by the fuzzer). */
wb_status wb_safetensors_parse(const void *data, size_t size, const char *name,
                               wb_safetensors **out, wb_err *err);

void wb_safetensors_free(wb_safetensors *st);

int wb_safetensors_count(const wb_safetensors *st);
wb_status wb_safetensors_get(const wb_safetensors *st, int index, wb_tensor_view *out);
/* WB_ERR_NOTFOUND (with a message naming the tensor and file) when absent. */
wb_status wb_safetensors_find(const wb_safetensors *st, const char *name, wb_tensor_view *out,
                              wb_err *err);
/* The "__metadata__" value for key, or NULL. */
const char *wb_safetensors_metadata(const wb_safetensors *st, const char *key);

/* Write tensors (in the given order, 8-byte aligned header as HF writes) with optional string
 * metadata pairs {k0, v0, k1, v1, ...}. Atomic: write to "<path>.tmp.<pid>" then rename. */
wb_status wb_safetensors_write(const char *path, const wb_tensor_view *tensors, int n,
                               const char *const *metadata_kv, int n_metadata, wb_err *err);

/* Element conversion helpers: half / bfloat16 to float. */
float wb_f16_to_f32(uint16_t h);
float wb_bf16_to_f32(uint16_t b);
uint16_t wb_f32_to_bf16(float f);
uint16_t wb_f32_to_f16(float f);

/* ========================================= model ========================================== */

typedef struct wb_config {
    int32_t vocab_size;   /* V */
    int32_t n_ctx;        /* default context of sessions (load parameter n_ctx, at most
                           * wb_model_max_ctx: GPT-2 n_positions, max_position_embeddings) */
    int32_t n_embd;       /* C */
    int32_t n_layer;      /* L */
    int32_t n_head;       /* NH; head size C / NH */
    int32_t n_inner;      /* MLP width (4C when config says null) */
    float layer_norm_epsilon;   /* GPT-2 layer_norm_epsilon; Llama family rms_norm_eps */
    int tie_word_embeddings;
    /* Rotary families (model_type llama, qwen2, mistral, phi3; see docs/model.md): n_inner is
     * intermediate_size. GPT-2 has max_position_embeddings = n_positions, n_kv_head = n_head,
     * head_dim = C / NH and zeros below. */
    int32_t max_position_embeddings; /* the longest context a session may ask for */
    int32_t n_kv_head;               /* num_key_value_heads: GQA groups of n_head / n_kv_head */
    int32_t head_dim;                /* head_dim key, else n_embd / n_head */
    float rope_theta;
    int32_t rope_scaling;            /* WB_ROPE_NONE or WB_ROPE_LLAMA3 */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor; /* llama3 only */
    int32_t rope_original_max_pos;   /* llama3 original_max_position_embeddings */
    int32_t qkv_bias, o_bias, mlp_bias; /* 1 when q/k/v_proj, o_proj, MLP projections have bias */
} wb_config;

enum { WB_ROPE_NONE = 0, WB_ROPE_LLAMA3 = 1 };

/* Parse a config.json (buffer) of any supported family (picked by model_type, else
 * architectures[0], else GPT-2); errors name `name` and the key. Checks types and ranges
 * (positive sizes, divisibility, sizes below sane limits, supported activations and options). */
wb_status wb_config_parse(const char *json, size_t len, const char *name, wb_config *out,
                          wb_err *err);

typedef struct wb_model wb_model;

/* Load a model directory in Hugging Face layout: config.json, model.safetensors (F32/F16/BF16,
 * GPT2LMHeadModel names, with or without the "transformer." prefix, Conv1D [in,out] weights,
 * tied or explicit lm_head.weight) and tokenizer.json. config.json's model_type llama, qwen2,
 * mistral or phi3 loads those families instead (wb_model_load_ex, docs/model.md).
 * A path to a regular file loads it as GGUF (general.architecture gpt2, llama, qwen2 or phi3;
 * F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL tensors; Q2_K as Q8_0,
 * Q3_K as Q6_K, IQ4_XS as IQ4_NL), with the
 * tokenizer.json beside it (docs/gguf.md). */
wb_status wb_model_load(const char *dir, wb_model **out, wb_err *err);
void wb_model_free(wb_model *m);

/* Load options (wb_model_default_params() for the defaults). */
typedef struct wb_model_params {
    /* 0 (default): BF16 matrices are used in BF16 straight from the mapped file by the matrix
     * kernels (F32 accumulation), F32/F16 ones are converted to F32. 1: everything is converted
     * to F32 at load (twice the memory; for exact comparisons against an F32 reference).
     * GPT-2 models are always F32. */
    int compute_f32;
    /* The context sessions and generation get when they ask for n_ctx <= 0, and so the KV cache
     * size (default 4096, capped at wb_model_max_ctx). */
    int32_t n_ctx;
    /* WB_WEIGHTS_AS_STORED (default), or every matrix whose rows are a multiple of 32 values
     * quantized at load to Q8_0 or Q4_0 (GGUF block layouts; docs/performance.md): a quarter or
     * an eighth of the F32 bytes, integer dot products in decode. */
    int weights;
} wb_model_params;

enum { WB_WEIGHTS_AS_STORED = 0, WB_WEIGHTS_Q8_0 = 1, WB_WEIGHTS_Q4_0 = 2 };

wb_model_params wb_model_default_params(void);

/* wb_model_load with options; params NULL means the defaults. A Llama-family directory holds
 * config.json, model.safetensors or model.safetensors.index.json with its shards, and
 * tokenizer.json; generation_config.json (eos_token_id) is optional. */
wb_status wb_model_load_ex(const char *dir, const wb_model_params *params, wb_model **out,
                           wb_err *err);

/* generation_config.json's eos_token_id (an integer or a list) as read at load: the ids that end
 * generation with stop_reason "eos" besides the tokenizer's own; *n = 0 when absent. */
const int32_t *wb_model_eos_ids(const wb_model *m, size_t *n);
/* 1 when id is one of wb_model_eos_ids. */
int wb_model_is_eos(const wb_model *m, int32_t id);
/* "gpt2", "llama", "qwen2", "mistral" or "phi3" (config.json model_type; "gpt2" when absent). */
const char *wb_model_type(const wb_model *m);
/* The family that runs it: "gpt2", "llama" (llama, qwen2, mistral) or "phi3". */
const char *wb_model_family(const wb_model *m);
/* "safetensors" (a model directory) or "gguf" (a GGUF file). */
const char *wb_model_format(const wb_model *m);
/* A GGUF model's tokenizer.chat_template text, NULL when it has none (and for directories, whose
 * template is read by wb_chat_template_load). */
const char *wb_model_chat_template(const wb_model *m);
/* The model's chat template parsed: a GGUF's tokenizer.chat_template, else the directory's
 * (wb_chat_template_load). */
struct wb_chat_template;
wb_status wb_model_chat_template_load(const wb_model *m, struct wb_chat_template **out,
                                      wb_err *err);
/* Entry i of the file types of the tensors the model loaded ("F32", "BF16", "Q4_K", ...) and how
 * many tensors had it; returns 0 when i is past the last entry. */
int wb_model_tensor_types(const wb_model *m, int i, const char **name, int64_t *count);
/* The longest context a session or a generation may use: n_positions for GPT-2,
 * max_position_embeddings for the rotary families. */
int32_t wb_model_max_ctx(const wb_model *m);
/* The one context rule: n_ctx <= 0 means the default (wb_config.n_ctx), above
 * wb_model_max_ctx is WB_ERR_RANGE ("n_ctx = N exceeds the model's maximum context of M
 * tokens"); *out (may be NULL) gets the context to use. */
wb_status wb_model_check_ctx(const wb_model *m, int n_ctx, int *out, wb_err *err);
/* Bytes of weights the model holds in memory, mapped BF16 matrices included. */
size_t wb_model_weight_bytes(const wb_model *m);

const wb_config *wb_model_config(const wb_model *m);
const wb_tokenizer *wb_model_tokenizer(const wb_model *m);
const char *wb_model_dir(const wb_model *m);
/* config.json as read (NUL-terminated), so bindings can expose every key. */
const char *wb_model_config_json(const wb_model *m);
/* Number of distinct parameters (tied head counted once): 1,071,872 for TinyLM. */
int64_t wb_model_num_parameters(const wb_model *m);

void wb_model_set_abort(wb_model *m, wb_abort_fn fn, void *user_data);

/* Batch-variant mode (off by default), for showing why served models vary at temperature 0:
 * while on, every F32 matrix product over more than one row (a prefill, a batched decode step)
 * goes through OpenBLAS cblas_sgemm, whose kernel and blocking, and so the order of each dot
 * product's sums, follow the number of rows, in every model family. A row's logits then differ in
 * the last bits with the batch it shares; off, the fixed-order kernels give every row the sums it
 * gets alone. BF16 and quantized matrices always use their fixed-order kernels. Returns the
 * previous setting (0 or 1); m NULL: returns 0. Switch it between forward calls: a pass running
 * meanwhile may mix both. */
int wb_model_set_batch_variant(wb_model *m, int on);

/* Full forward pass without a cache over n tokens (1 <= n <= wb_model_max_ctx).
 * logits: [n, V] when all_positions, else [V] for the last position. */
wb_status wb_model_forward(const wb_model *m, const int32_t *ids, int n, float *logits,
                           int all_positions, wb_err *err);

/* ======================================== session ========================================= */

/* A session owns a KV cache for one sequence: key/value [L, n_ctx, kv width] each. */
typedef struct wb_session wb_session;

/* n_ctx as wb_model_check_ctx: <= 0 the default, above wb_model_max_ctx WB_ERR_RANGE. */
wb_status wb_session_new(const wb_model *m, int n_ctx, wb_session **out, wb_err *err);
void wb_session_free(wb_session *s);

const wb_model *wb_session_model(const wb_session *s);
int wb_session_pos(const wb_session *s);     /* tokens in the cache */
int wb_session_n_ctx(const wb_session *s);
const int32_t *wb_session_tokens(const wb_session *s); /* the pos tokens in the cache */
size_t wb_session_cache_bytes(const wb_session *s);    /* bytes allocated for K and V */

/* Run n tokens at positions pos..pos+n-1 through the cache in one GEMM pass.
 * logits: NULL, or [V] (last position), or [n, V] when all_positions.
 * pos + n > n_ctx is WB_ERR_RANGE and leaves the session unchanged. */
wb_status wb_session_prefill(wb_session *s, const int32_t *ids, int n, float *logits,
                             int all_positions, wb_err *err);

/* One token at position pos (GEMV path). logits: [V] or NULL. */
wb_status wb_session_decode(wb_session *s, int32_t id, float *logits, wb_err *err);

void wb_session_reset(wb_session *s);
/* Keep the first n tokens (0 <= n <= pos). */
wb_status wb_session_truncate(wb_session *s, int n, wb_err *err);
/* A new session with a copy of s's cache (only the first pos rows copied). */
wb_status wb_session_fork(const wb_session *s, wb_session **out, wb_err *err);


/* ====================================== looking inside ===================================== */

/* What a forward pass records besides its logits (core/inspect.c; docs/design.md, "Looking
 * inside the model"). Zero it, then point at caller-owned buffers for what you want; a forward
 * without a probe (every normal path) runs exactly as before. For a call of n tokens at
 * positions pos..pos+n-1, C = n_embd, L = n_layer, NH = n_head, T = pos + n:
 *   hidden     NULL, or [L + 1, n, C]: hidden[l][t] is the residual stream entering layer l at
 *              the call's t-th token (l = 0: the embeddings; l = L: after the last layer,
 *              before the final norm, which wb_model_head applies).
 *   att_pos    n_att absolute positions in [pos, pos + n) whose attention to record
 *   attention  NULL when n_att = 0, else [L, n_att, NH, T]: for query head h at position p,
 *              softmax(q_h . k_j / sqrt(head_dim)) over the keys j the model attends to (0..p,
 *              or the sliding window), k_j the cached key of kv head h / (NH / NKV); 0 for the
 *              other j. Recomputed in double from the layer's post-RoPE queries and the cache. */
typedef struct wb_probe {
    float *hidden;
    const int32_t *att_pos;
    int n_att;
    float *attention;
} wb_probe;

/* wb_model_forward with a probe (NULL: wb_model_forward). */
wb_status wb_model_forward_inspect(const wb_model *m, const int32_t *ids, int n, float *logits,
                                   int all_positions, wb_probe *probe, wb_err *err);
/* wb_session_prefill with a probe (NULL: wb_session_prefill); n = 1 is a probed decode step. */
wb_status wb_session_prefill_inspect(wb_session *s, const int32_t *ids, int n, float *logits,
                                     int all_positions, wb_probe *probe, wb_err *err);

/* logits [n, V] = head(final_norm(x)) for n rows x [n, C] of the residual stream (the logit
 * lens: what an intermediate hidden state would predict). */
wb_status wb_model_head(const wb_model *m, const float *x, int n, float *logits, wb_err *err);

/* A read-only view of one layer of a session's cache: rows t < n_tokens of K and V at
 * k + t * row_stride (and v + ...), each n_kv_head heads of head_dim floats (post-RoPE keys for
 * the rotary families). Valid until the session is truncated, reset, or freed. */
typedef struct wb_kv_view {
    const float *k, *v;
    int n_tokens, n_kv_head, head_dim;
    size_t row_stride;
} wb_kv_view;

wb_status wb_session_kv(const wb_session *s, int layer, wb_kv_view *out, wb_err *err);

#ifdef __cplusplus
}
#endif
#endif
