/* wb_model.h - safetensors I/O, GPT-2 model loading, forward pass and KV-cache sessions. */
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
    int32_t n_ctx;        /* n_positions: maximum sequence length T */
    int32_t n_embd;       /* C */
    int32_t n_layer;      /* L */
    int32_t n_head;       /* NH; head size C / NH */
    int32_t n_inner;      /* MLP width (4C when config says null) */
    float layer_norm_epsilon;
    int tie_word_embeddings;
} wb_config;

/* Parse a GPT-2 config.json (buffer); errors name `name` and the key. Checks types and ranges
 * (positive sizes, n_embd % n_head == 0, sizes below sane limits, activation gelu_new /
 * gelu_pytorch_tanh / gelu). */
wb_status wb_config_parse(const char *json, size_t len, const char *name, wb_config *out,
                          wb_err *err);

typedef struct wb_model wb_model;

/* Load a model directory in Hugging Face layout: config.json, model.safetensors (F32/F16/BF16,
 * GPT2LMHeadModel names, with or without the "transformer." prefix, Conv1D [in,out] weights,
 * tied or explicit lm_head.weight) and tokenizer.json. */
wb_status wb_model_load(const char *dir, wb_model **out, wb_err *err);
void wb_model_free(wb_model *m);

const wb_config *wb_model_config(const wb_model *m);
const wb_tokenizer *wb_model_tokenizer(const wb_model *m);
const char *wb_model_dir(const wb_model *m);
/* config.json as read (NUL-terminated), so bindings can expose every key. */
const char *wb_model_config_json(const wb_model *m);
/* Number of distinct parameters (tied head counted once): 1,071,872 for TinyLM. */
int64_t wb_model_num_parameters(const wb_model *m);

void wb_model_set_abort(wb_model *m, wb_abort_fn fn, void *user_data);

/* Full forward pass without a cache over n tokens (1 <= n <= n_ctx).
 * logits: [n, V] when all_positions, else [V] for the last position. */
wb_status wb_model_forward(const wb_model *m, const int32_t *ids, int n, float *logits,
                           int all_positions, wb_err *err);

/* ======================================== session ========================================= */

/* A session owns a KV cache for one sequence: key/value [L, n_ctx, C] each. */
typedef struct wb_session wb_session;

/* n_ctx <= 0 means the model's n_positions; larger than it is WB_ERR_RANGE. */
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

#ifdef __cplusplus
}
#endif
#endif
