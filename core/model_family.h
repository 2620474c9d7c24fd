/* model_family.h - the model-family interface and what the family files share (not a public API).
 *
 * A family is one file (core/gpt2.c, core/llama.c, core/phi3.c) that fills one wb_family table:
 * the config.json keys it reads, how it loads its weights, its forward pass over sequences and
 * the sizes the rest of the core asks about. core/model.c reads config.json once, picks the
 * family once from its table (by model_type, else architectures[0]) and calls through the table
 * from then on; session.c (the KV cache), batch.c and generate.c never ask which family it is.
 *
 *   core/config.c    typed config.json readers shared by the families' parse_config
 *   core/weights.c   tensors by name in one file or an index's shards, dtype/shape/finiteness
 *                    checks, F16/BF16 widening, and wb_mat (the matrix type) with its kernels
 *   core/threadpool.c the compute pool and the per-model pool slot
 *
 * Adding a family: write core/<family>.c with a `const wb_family wb_family_<name>` and add it
 * to the table in core/model.c (docs/design.md, "How to add a model family").
 */
#ifndef WB_MODEL_FAMILY_H
#define WB_MODEL_FAMILY_H

#include <stdatomic.h>

#include "model_internal.h"
#include "threadpool.h"

struct cJSON;

/* ------------------------------------------------------------------- config.json readers */

/* Caps far above any real checkpoint but low enough that sizes multiply without overflow and a
 * hostile config cannot ask for terabytes before the tensor shapes are even compared. Learned
 * position tables ([n_positions, C] weights) get the lower position cap. */
#define WB_CAP_VOCAB (1 << 22)
#define WB_CAP_EMBD 65536
#define WB_CAP_LAYER 1024
#define WB_CAP_POS_LEARNED (1 << 20)
#define WB_CAP_POS (1 << 24)
#define WB_CAP_HEAD 4096
#define WB_CAP_INNER (1 << 20)
#define WB_CAP_PARAMS ((int64_t)1 << 34)

/* An integer key in [lo, hi]. Absent or JSON null: an error naming the key (and model_type
 * when not NULL) if required, else *present = 0 and *out untouched. */
wb_status wb_cfg_int(const struct cJSON *obj, const char *key, const char *name,
                     const char *model_type, int required, int64_t lo, int64_t hi, int32_t *out,
                     int *present, wb_err *err);
/* A finite number in (0, hi]; absent or null leaves *out (the default) unless required.
 * `where` prefixes the key in messages ("rope_scaling."), "" for top-level keys. */
wb_status wb_cfg_pos_num(const struct cJSON *obj, const char *key, const char *where,
                         const char *name, int required, double hi, float *out, wb_err *err);
/* true/false; absent or null gives dflt. */
wb_status wb_cfg_bool(const struct cJSON *obj, const char *key, const char *name, int dflt,
                      int32_t *out, wb_err *err);

/* ------------------------------------------------------------------------------ scratch */

/* Activations kept between calls (a session's, a batch's): fresh multi-MB mallocs are fresh
 * mmaps, and their page faults cost a few percent of a prefill. */
typedef struct wb_scratch {
    float *p;
    size_t cap; /* floats */
} wb_scratch;

/* Grow s to hold n buffers of sizes[i] floats, each 64-byte aligned, and point bufs[i] at them.
 * s NULL is an error; contents are not kept across growth. */
wb_status wb_scratch_take(wb_scratch *s, int n, const size_t *sizes, float **bufs, wb_err *err);

/* ------------------------------------------------------------------------------ matrices */

/* How a matrix's elements are stored. helper kernels: kernels.c (F32), kernels_bf16.c (BF16). */
/* Quantized: rows of blocks in the GGUF byte layouts (quant.h, quant.c), w pointing at the first
 * row's first block (any alignment): Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and IQ4_NL blocks of 32 values, Q4_K, Q5_K and Q6_K
 * super-blocks of 256 (a GGUF Q4_K_M file mixes them: Q5_0 where rows are not a multiple of 256). cols must be a multiple of the block. */
typedef enum wb_mat_dtype {
    WB_MAT_F32 = 0,
    WB_MAT_BF16 = 1,
    WB_MAT_Q8_0 = 2,
    WB_MAT_Q4_0 = 3,
    WB_MAT_Q4_K = 4,
    WB_MAT_Q6_K = 5,
    WB_MAT_Q5_0 = 6,
    WB_MAT_IQ4_NL = 7,
    WB_MAT_Q5_K = 8,
    WB_MAT_Q4_1 = 9,
    WB_MAT_Q5_1 = 10
} wb_mat_dtype;

/* A matrix [rows, cols] row-major, [out, in] (HF nn.Linear's layout; GPT-2's Conv1D [in, out]
 * is transposed at load). F32 ones are owned by the weight store (64-byte aligned); BF16 ones
 * point into the mapped file (2-byte aligned). */
typedef struct wb_mat {
    const void *w;
    wb_mat_dtype dtype;
    int rows, cols;
    /* Q8_0 / Q4_0 / Q5_0 only: 1 when w is in the 16-row tile layout of quant.h (chosen at load when
     * the load-time kernels read it: wb_quant_tiles_native), w then pointing at the first
     * group of 16 rows and row 0 being row tile_off (< 16) of that group (a row view) */
    int tiles, tile_off;
} wb_mat;

/* Rows [r0, r1) of m as a matrix of their own (fused projections: Phi-3's qkv_proj). */
wb_mat wb_mat_rows(const wb_mat *m, int r0, int r1);

/* The one place matrix kernels are chosen by dtype. For rows r in [r0, r1) of W and inputs
 * t < n (X [n, W.cols], Y [n, W.rows]):
 *   Y[t, r] = (accumulate ? Y[t, r] : 0) + b[r] + W[r, :] . X[t, :]      (b may be NULL)
 * mode says how F32 and BF16 products are summed (quantized dtypes have one order at any n:
 * integer block sums, one float chain per output, quant.c):
 *   WB_MM_ROWS     the GEMV kernels: every output gets exactly the sums it gets with n = 1 (a
 *                  decode row in a batch computes what it computes alone), the weights streamed
 *                  once per call whatever n is;
 *   WB_MM_PROMPT   the packed GEMM (kernels_gemm.c): one fused multiply-add chain per output,
 *                  the same for any n and any tile position, but not the GEMV's order;
 *   WB_MM_VARIANT  (wb_model_batch_variant: a lesson, never the default) F32 weights to
 *                  cblas_sgemm from n = 2 rows: OpenBLAS picks its kernel and blocking from the
 *                  shape, so a row's sums then depend on how many rows share the call, as on
 *                  most inference servers; BF16 as WB_MM_ROWS.
 * Families pick the mode per sequence (wb_mm_runs below), never from the call's row count. */
enum { WB_MM_ROWS = 0, WB_MM_VARIANT = 1, WB_MM_PROMPT = 2 };
void wb_mat_mul(float *Y, const float *X, int n, const wb_mat *W, const float *b, int r0, int r1,
                int accumulate, int mode);
/* dst[cols] = row r of m widened to F32 (embedding lookups). */
void wb_mat_row(const wb_mat *m, int r, float *dst);

/* ------------------------------------------------------------------------------ weights */

/* The tensors of a model directory: model.safetensors, or model.safetensors.index.json and the
 * shards its weight_map names. */
typedef struct wb_weights wb_weights;

wb_status wb_weights_open(const char *dir, wb_weights **out, wb_err *err);
/* The tensors of a GGUF file (core/weights_gguf.c): g is taken (freed with w, or kept by the
 * store that maps it; freed on failure too); c (parsed from g's metadata) gives head sizes. */
struct wb_gguf;
wb_status wb_weights_open_gguf(struct wb_gguf *g, const char *path, const wb_config *c,
                               wb_weights **out, wb_err *err);
/* The file types of the tensors the last wb_weights_load read ("F32", "BF16", "Q4_K", ...),
 * with counts; returns how many entries were written (at most cap). */
typedef struct wb_type_count {
    char name[8];
    int64_t n;
} wb_type_count;
#define WB_MAX_TYPE_COUNTS 8
int wb_weights_types(const wb_weights *w, wb_type_count *out, int cap);
/* Quantize every matrix wb_weights_load loads whose rows are a multiple of 32 values to
 * WB_WEIGHTS_Q8_0 or WB_WEIGHTS_Q4_0 (wb_model_params.weights); 0 keeps them as loaded. */
void wb_weights_set_quant(wb_weights *w, int weights);
void wb_weights_free(wb_weights *w);
/* 1 when the checkpoint holds a tensor of that name. */
int wb_weights_has(const wb_weights *w, const char *name);

/* One tensor a family asks for: its name and exact shape in the file ([d0] when d1 = 0, else
 * [d0, d1]), and where the loaded data goes: a vector (always F32) or a matrix. transpose: the
 * file holds the matrix as [in, out] (Conv1D) and it is stored [out, in] = [d1, d0]. */
typedef struct wb_want {
    char name[112];
    int64_t d0, d1;
    int transpose;
    const float **vec;
    wb_mat *mat;
} wb_want;

/* One tensor as loaded, under its checkpoint name (what an exporter such as core/gguf_save.c
 * walks): a matrix as the forward pass holds it ([out, in], any wb_mat dtype) or an F32 vector of
 * d0 (x d1) values. Pointers are into the store. */
typedef struct wb_loaded_tensor {
    char name[112];
    wb_mat mat;              /* mat.w NULL for a vector */
    const float *vec;
    int64_t d0, d1;          /* the want's shape (file order) */
} wb_loaded_tensor;

/* Where loaded weights live; wb_weight_store_free releases all of it. */
typedef struct wb_weight_store {
    wb_loaded_tensor *loaded;   /* every want, in the family's order, as loaded */
    int n_loaded;
    float *block;               /* F32 weights, every tensor 64-byte aligned */
    size_t block_floats;
    uint16_t *bf16_copy;        /* BF16 tensors whose file offset was odd, copied aligned */
    size_t mapped_bf16_bytes;   /* BF16 matrices used straight from the mapping */
    wb_safetensors **shards;    /* kept mapped when a BF16 matrix points into them */
    uint8_t *quant;             /* matrices quantized at load (wb_weights_set_quant) */
    size_t quant_bytes;
    size_t unread_f32_bytes;    /* F32 copies of matrices since quantized (kept allocated, not read) */
    int n_shards;
    struct wb_gguf *gguf;       /* a GGUF file kept mapped: BF16 / quantized matrices point into it */
    size_t mapped_quant_bytes;  /* quantized matrices used straight from that mapping */
    uint8_t *gguf_rows;         /* quantized GGUF matrices whose rows were reordered (llama Q/K) */
    size_t gguf_rows_bytes;
    uint8_t *tiles;             /* mapped Q8_0 / Q4_0 matrices copied into the tile layout */
    size_t tiles_bytes;
} wb_weight_store;

/* Load every want: first check that each is present with a float dtype (F32, F16, BF16) and its
 * exact shape (one message format for every family), before anything is allocated; then widen
 * into one aligned block, except matrices that are BF16 in the file when keep_bf16 (mapped, not
 * transposed). Every tensor is checked for NaN/Inf once, an error naming it and the element.
 * *n_params (may be NULL) gets the sum of the wants' element counts. On success the store owns
 * the mappings that are still needed; w keeps the rest (free it either way). */
wb_status wb_weights_load(wb_weights *w, const wb_want *wants, int n, int keep_bf16,
                          wb_weight_store *out, int64_t *n_params, wb_err *err);
void wb_weight_store_free(wb_weight_store *s);
/* Record every want as loaded (name, shape, matrix or vector) in s->loaded for exporters
 * (core/gguf_save.c); `what` names the source in the out-of-memory message. */
wb_status wb_weight_store_list(wb_weight_store *s, const wb_want *wants, int n, const char *what,
                               wb_err *err);
/* Q8_0 / Q4_0 matrices of the wants with rows a multiple of 16 into the tile layout when the level
 * in use reads it natively (in place where the store owns the bytes, copied out of a mapping
 * otherwise); nothing at other levels. Before wb_weight_store_list, so exporters see it. */
wb_status wb_weight_store_tile(wb_weight_store *s, const wb_want *wants, int n, const char *what,
                               wb_err *err);
size_t wb_weight_store_bytes(const wb_weight_store *s);

/* ---------------------------------------------------------------------------- sequences */

/* One sequence in a multi-sequence forward: n tokens at positions pos..pos+n-1 through its own
 * cache k/v ([L, cache_ctx, kv_width] each), attending to its rows 0..pos+n-1 only. */
typedef struct wb_seq_rows {
    float *k, *v;
    int cache_ctx;
    int pos;
    const int32_t *ids;
    int n;
    wb_probe *probe;  /* NULL (every normal path), or what to record (wb_probe_layer) */
} wb_seq_rows;

/* A sequence of at least WB_PROMPT_ROWS rows in a forward call is a prompt: its matrix products
 * go through the packed GEMM (WB_MM_PROMPT); shorter ones (decode rows, short prompts) through
 * the GEMV kernels (WB_MM_ROWS). The choice depends on the sequence alone, so each sequence's
 * rows get the same bits whatever else shares the batch. 32: Session 3 had moved it to 64 because
 * the GEMM then lost at 44 tokens (its packing waited on the weights from memory, where the GEMV's
 * prefetched streams did not); with the next panel prefetched during the tiles of short prompts,
 * the inputs packed once per phase and the rows shared out (Session 4), the whole Qwen2.5-0.5B-shaped
 * model took 10-15% less CPU time through the GEMM at 32 and 44 tokens and broke even at 24
 * (docs/performance.md, "Session 4: prompt GEMM"). */
#define WB_PROMPT_ROWS 32
/* Consecutive stacked rows of one mode: rows row0 .. row0 + n - 1. */
typedef struct wb_mm_run {
    int row0, n, mode;
} wb_mm_run;
/* Cuts the stacked rows of seqs[n_seqs] into runs[] of consecutive sequences of one mode (at
 * most n_seqs runs; every run WB_MM_VARIANT when variant); a WB_MM_PROMPT run is always one
 * sequence, so its row count is that sequence's. Returns the number of runs. */
int wb_mm_runs(const wb_seq_rows *seqs, int n_seqs, int variant, wb_mm_run *runs);
/* wb_mat_mul over every run (Y and X hold the stacked rows, W.rows and W.cols floats apart). */
void wb_mat_mul_runs(float *Y, const float *X, const wb_mm_run *runs, int n_runs,
                     const wb_mat *W, const float *b, int r0, int r1, int accumulate);
/* A prompt's inputs packed once for every F32 / BF16 matrix that reads them (q/k/v share xn):
 * wb_mat_takes_xpack says whether W's WB_MM_PROMPT products can read packed inputs;
 * wb_mat_xpack packs blocks [i0, i1) of X[n, in] into P[n * in] for matrices of W's type
 * (wb_mat_xblocks(n) blocks, so threads can share them out; the layout may differ between
 * F32 and BF16, so wb_mat_xpack_shares says whether two matrices can read one packing);
 * wb_mat_mul_packed is wb_mat_mul(..., WB_MM_PROMPT) over P, to the bit, with P packed under
 * the same kernel level for W's type. */
int wb_mat_takes_xpack(const wb_mat *W);
int wb_mat_xblocks(int n);
/* floats a packed row of `in` values takes in P (a run of n rows at row0: P + row0 * xrow, n *
 * xrow floats; at least in, more for the AMX route's layout) */
size_t wb_mat_xrow(int in);
void wb_mat_xpack(float *P, const float *X, int n, int in, int i0, int i1, const wb_mat *W);
int wb_mat_xpack_shares(const wb_mat *A, const wb_mat *B);
void wb_mat_mul_packed(float *Y, const float *P, int n, const wb_mat *W, const float *b, int r0,
                       int r1, int accumulate);
/* The same for block-quantized matrices: wb_mat_takes_qact says whether W multiplies quantized
 * inputs; wb_mat_qact_bytes(in) is the bytes of one input row quantized (a multiple of 64, at
 * most 4 in); wb_mat_qact quantizes rows [t0, t1) of X[n, in] into Q (one row every
 * wb_mat_qact_bytes(in) bytes, Q 64-byte aligned), so threads can share them out; and
 * wb_mat_mul_qact is wb_mat_mul over those n rows, to the bit, for every quantized type. */
int wb_mat_takes_qact(const wb_mat *W);
size_t wb_mat_qact_bytes(int in);
void wb_mat_qact(void *Q, const float *X, int in, int t0, int t1);
void wb_mat_mul_qact(float *Y, const void *Q, int n, const wb_mat *W, const float *b, int r0,
                     int r1, int accumulate);
/* A prompt phase's n input rows grouped once for the tile kernel of the level in use (AVX-512:
 * Q8_0 / Q4_0 in the tile layout from row 0): wb_mat_qgroup_bytes(W, n) is the bytes of that copy
 * (64-byte aligned; 0 when W or the level cannot take it: use wb_mat_qact); wb_mat_qgroup fills
 * rows [t0, t1) of X[n, W.cols] (threads share them out); every matrix of the same qtype for which
 * wb_mat_qgroup_bytes is not 0 reads that copy (wb_mat_mul_qgroup, wb_mat_mul's bits). */
size_t wb_mat_qgroup_bytes(const wb_mat *W, int n);
void wb_mat_qgroup(const wb_mat *W, void *G, const float *X, int n, int t0, int t1);
void wb_mat_mul_qgroup(float *Y, const void *G, int n, const wb_mat *W, const float *b, int r0,
                       int r1, int accumulate);

/* The one probe call a family's forward makes per layer (core/inspect.c), for the sequences
 * whose probe is not NULL (returns at once when none has one): after the embeddings
 * (layer = -1, q NULL) and after each layer l, with x [rows, C] the residual stream of the
 * stacked rows (row0[s] the first row of sequence s) plus pending [C] when a bias is still to
 * be added to it (NULL otherwise), q the layer's post-RoPE queries (NH heads of head_dim per
 * row, ldq floats apart), and layer l's K rows already in each sequence's cache. window: 0, or
 * the sliding window (query p sees keys p - window + 1 .. p). */
/* Check a probe against a call of n tokens at position pos (NULL passes): WB_ERR_ARG naming
 * the field (a position outside the call, a missing buffer). */
wb_status wb_probe_check(const wb_model *m, const wb_probe *p, int pos, int n, wb_err *err);
void wb_probe_layer(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, const int *row0,
                    int layer, const float *x, const float *pending, const float *q, size_t ldq,
                    int window);

/* ------------------------------------------------------------------------------ family */

typedef struct wb_family {
    const char *name;                  /* "gpt2", "llama", "phi3" */
    const char *const *model_types;    /* config.json model_type values it accepts, NULL-ended */
    /* architectures[i] is the class name of model_types[i] (HF config "architectures"), used
     * when config.json has no model_type */
    const char *const *architectures;
    /* Read this family's keys of config.json (root is an object) into *cfg, every error naming
     * `name` and the key. *hparams: family-private values beyond wb_config (one malloc'd block,
     * released with free(); NULL when none). */
    wb_status (*parse_config)(const struct cJSON *root, const char *model_type, const char *name,
                              wb_config *cfg, void **hparams, wb_err *err);
    /* Load m->cfg's weights from w (and m->hparams); set m->impl and m->n_params. */
    wb_status (*load)(wb_model *m, wb_weights *w, const wb_model_params *p, wb_err *err);
    void (*free)(void *impl);
    /* Several sequences in one pass: their rows stacked so every matrix runs over all of them
     * at once, attention per sequence over its own cache and positions (no padding).
     * logits: NULL; [n_seqs, V] for the last row of each sequence; or [sum n, V] when
     * all_positions. Sequences have n >= 1 and ids checked; scratch is never NULL. */
    wb_status (*forward)(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                         int all_positions, wb_scratch *scratch, wb_err *err);
    /* Optional single-token fast path (one sequence, n = 1; logits [V] or NULL); NULL: forward.
     * Must give exactly forward's logits. */
    wb_status (*decode)(const wb_model *m, const wb_seq_rows *one, float *logits,
                        wb_scratch *scratch, wb_err *err);
    /* Floats per K (and per V) cache row. */
    size_t (*kv_width)(const wb_config *c);
    /* The longest context a session may ask for. */
    int32_t (*max_ctx)(const wb_config *c);
    /* Bytes of weights held in memory, mapped BF16 matrices included. */
    size_t (*weight_bytes)(const wb_model *m);
    /* logits [n, V] = head(final_norm(x[n, C])), single-threaded (wb_model_head, the logit
     * lens); x is not modified. */
    void (*head)(const wb_model *m, const float *x, int n, float *xn, float *logits);
    /* The store the weights were loaded into (its `loaded` list: export to GGUF). */
    const wb_weight_store *(*store)(const wb_model *m);
} wb_family;

extern const wb_family wb_family_gpt2, wb_family_llama, wb_family_phi3;

/* ------------------------------------------------------------------------------- model */

struct wb_model {
    const wb_family *family;
    wb_config cfg;
    void *hparams;                /* family-private config values (free()) */
    void *impl;                   /* family weights (family->free) */
    char *dir;
    char *config_json;
    wb_tokenizer *tok;
    int64_t n_params;
    int32_t *eos_ids;             /* generation_config.json eos_token_id, [n_eos] */
    size_t n_eos;
    char model_type[32];
    const char *format;           /* "safetensors" or "gguf" */
    char *chat_template;          /* a GGUF's tokenizer.chat_template (malloc'd), else NULL */
    int32_t gguf_bos_id;          /* a GGUF's tokenizer.ggml.bos_token_id (the template's
                                   * bos_token), -1 when absent or not a GGUF */
    wb_type_count types[WB_MAX_TYPE_COUNTS]; /* file types of the loaded tensors */
    int n_types;

    wb_abort_fn abort_fn;
    void *abort_data;

    /* wb_model_set_batch_variant: 1 sends F32 products of more than one row to cblas_sgemm. */
    atomic_int batch_variant;

    /* The compute pool follows wb_threads_get(); mutable state behind a const model (the one
     * cast is in wb_model_pool). */
    wb_pool_slot pool;
};

wb_pool_slot *wb_model_pool(const wb_model *m);
/* The batch-variant flag to pass to wb_mat_mul (read once per matrix product). */
static inline int wb_model_batch_variant(const wb_model *m) {
    return atomic_load_explicit(&m->batch_variant, memory_order_relaxed);
}
/* 1 when the abort callback asks to stop (then err says where: "at layer l"). */
int wb_model_aborted(const wb_model *m, int layer, wb_err *err);

/* The family's forward through the table (model.c). scratch may be NULL (allocated for this
 * call only). */
wb_status wb_forward_seqs(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                          int all_positions, wb_scratch *scratch, wb_err *err);
/* One token of one sequence: the family's fast path, else its forward. */
wb_status wb_forward_decode(const wb_model *m, const wb_seq_rows *one, float *logits,
                            wb_scratch *scratch, wb_err *err);
/* Floats per K (and per V) cache row of m's family. */
size_t wb_model_kv_width(const wb_model *m);

/* A session as one sequence of a wb_forward_seqs call (core/batch.c): check that ids fit and
 * are in the vocabulary, then describe its cache; after a successful forward, wb_session_commit
 * records the ids and moves pos by n. */
wb_status wb_session_rows(wb_session *s, const int32_t *ids, int n, wb_seq_rows *out,
                          wb_err *err);
void wb_session_commit(wb_session *s, const int32_t *ids, int n);

/* m's weights by checkpoint name (the family's store), or NULL. */
const wb_weight_store *wb_model_store(const wb_model *m);
/* A GGUF model from a buffer (kept until the model is freed when matrices map it), without a
 * tokenizer (wb_model_tokenizer is NULL): the GGUF fuzz target's entry. name is used in
 * messages. */
wb_status wb_model_load_gguf_memory(const void *buf, size_t len, const char *name,
                                    const wb_model_params *params, wb_model **out, wb_err *err);

/* Check ids against the vocabulary: WB_ERR_RANGE naming the id and index. */
wb_status wb_check_ids(const wb_model *m, const int32_t *ids, int n, wb_err *err);

#endif
