/* llama.c - the Llama family (model_type llama, qwen2, mistral): weights and forward pass.
 *
 * Block (pre-norm, as transformers' LlamaDecoderLayer), per position p, x the residual [C]:
 *   h = rmsnorm(x) * input_layernorm
 *   q = h Wq^T (+bq), k = h Wk^T (+bk), v = h Wv^T (+bv)      NH query heads, NKV kv heads of hd
 *   q, k = rope(q, p), rope(k, p)                             HF "rotate half" pairs (i, i + hd/2)
 *   a = softmax(q k^T / sqrt(hd), causal) v                   query head h reads kv head h / (NH/NKV)
 *   x += a Wo^T (+bo)
 *   h = rmsnorm(x) * post_attention_layernorm
 *   x += (silu(h Wg^T) * (h Wu^T)) Wd^T                       (+ biases with mlp_bias)
 * then logits = (rmsnorm(x) * norm) head^T, head = embed_tokens (tied) or lm_head.
 *
 * Weights: BF16 matrices stay in the mapped safetensors file and go through the BF16 kernels
 * (F32 accumulation); everything else, or everything with compute_f32, is converted to F32 in one
 * aligned block. Matrices are HF nn.Linear [out, in], which is already the layout the GEMV rows
 * and the GEMM (B transposed) want.
 *
 * The K/V cache rows are NKV*hd wide (GQA keeps only the kv heads). One code path serves prefill
 * (n tokens) and decode (n = 1): BF16 matrices always go through our kernels on our pool
 * (kernels_bf16.c); F32 matrices through wb_gemv_batch_forward up to SMALL_ROWS rows and a
 * cblas_sgemm beyond.
 */
#include "fileio.h"
#include "json_strict.h"
#include "llama_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cblas.h>
#include <cjson/cJSON.h>

#define SMALL_ROWS 48
#define ATT_QB 16
#define INDEX_MAX_BYTES (64u << 20)

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

size_t wb_model_kv_width(const wb_model *m) {
    return m->llama ? (size_t)m->cfg.n_kv_head * (size_t)m->cfg.head_dim : (size_t)m->cfg.n_embd;
}

size_t wb_llama_weight_bytes(const struct wb_llama *ll) {
    return ll ? ll->block_floats * sizeof(float) + ll->mapped_bf16_bytes : 0;
}

void wb_llama_free(struct wb_llama *ll) {
    if (!ll) return;
    for (int i = 0; i < ll->n_shards; i++) wb_safetensors_free(ll->shards[i]);
    free(ll->shards);
    free(ll->block);
    free(ll->bf16_copy);
    free(ll->layers);
    free(ll->inv_freq);
    free(ll);
}

/* ------------------------------------------------------------------------- weight files */



/* Where each tensor name lives: one file, or the shards of an index's weight_map. */
typedef struct weights {
    const char *dir;
    char *index_path;        /* NULL for a single model.safetensors */
    cJSON *index;            /* the parsed index (names point into it) */
    const cJSON *weight_map;
    char **shard_paths;      /* [n_shards] */
    wb_safetensors **shards; /* [n_shards], moved into the wb_llama on success */
    int n_shards;
} weights;

static void weights_free(weights *w) {
    free(w->index_path);
    cJSON_Delete(w->index);
    for (int i = 0; i < w->n_shards; i++) {
        free(w->shard_paths[i]);
        if (w->shards) wb_safetensors_free(w->shards[i]);
    }
    free(w->shard_paths);
    free(w->shards);
}

static wb_status shard_index(weights *w, const char *file, int *out, wb_err *err) {
    for (int i = 0; i < w->n_shards; i++)
        if (!strcmp(strrchr(w->shard_paths[i], '/') + 1, file)) {
            *out = i;
            return WB_OK;
        }
    /* a shard name is a file in the model directory, never a path out of it */
    if (!*file || strchr(file, '/') || file[0] == '.' || strlen(file) > 255)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: weight_map names \"%.60s\", which is not a file name in the model "
                          "directory", w->index_path, file);
    char **p = realloc(w->shard_paths, (size_t)(w->n_shards + 1) * sizeof *p);
    if (!p) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", w->index_path);
    w->shard_paths = p;
    if (!(p[w->n_shards] = wb_path_join(w->dir, file)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", w->index_path);
    *out = w->n_shards++;
    return WB_OK;
}

static wb_status weights_open(weights *w, const char *dir, wb_err *err) {
    memset(w, 0, sizeof *w);
    w->dir = dir;
    wb_status s;
    char *ipath = wb_path_join(dir, "model.safetensors.index.json");
    if (!ipath) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    struct stat sb;
    if (stat(ipath, &sb) != 0) { /* no index: a single file */
        free(ipath);
        w->shard_paths = malloc(sizeof *w->shard_paths);
        if (!w->shard_paths || !(w->shard_paths[0] = wb_path_join(dir, "model.safetensors"))) {
            free(w->shard_paths);
            w->shard_paths = NULL;
            return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        }
        w->n_shards = 1;
    } else {
        w->index_path = ipath;
        char *text = NULL;
        size_t len = 0;
        if ((s = wb_read_file(ipath, INDEX_MAX_BYTES, &text, &len, err))) return s;
        w->index = cJSON_ParseWithLength(text, len);
        free(text);
        if (!w->index || !cJSON_IsObject(w->index))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", ipath);
        if ((s = wb_json_check_unique_keys(w->index, ipath, err))) return s;
        w->weight_map = cJSON_GetObjectItemCaseSensitive(w->index, "weight_map");
        if (!cJSON_IsObject(w->weight_map) || !w->weight_map->child)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"weight_map\" must be a non-empty "
                              "object of tensor name -> file", ipath);
        int k;
        for (const cJSON *e = w->weight_map->child; e; e = e->next) {
            if (!cJSON_IsString(e))
                return wb_err_set(err, WB_ERR_FORMAT, "%s: weight_map[\"%.80s\"] must be a file "
                                  "name string", ipath, e->string);
            if ((s = shard_index(w, e->valuestring, &k, err))) return s;
        }
    }
    if (!(w->shards = calloc((size_t)w->n_shards, sizeof *w->shards)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    for (int i = 0; i < w->n_shards; i++)
        if ((s = wb_safetensors_open(w->shard_paths[i], &w->shards[i], err))) return s;
    return WB_OK;
}

/* The view of `name` and the file it is in (for messages). */
static wb_status weights_find(const weights *w, const char *name, wb_tensor_view *v,
                              const char **path, wb_err *err) {
    int k = 0;
    if (w->weight_map) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(w->weight_map, name);
        if (!e)
            return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' is missing from weight_map",
                              w->index_path, name);
        for (k = 0; k < w->n_shards; k++)
            if (!strcmp(strrchr(w->shard_paths[k], '/') + 1, e->valuestring)) break;
    }
    *path = w->shard_paths[k];
    if (wb_safetensors_find(w->shards[k], name, v, NULL) != WB_OK)
        return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' is missing%s", w->shard_paths[k],
                          name, w->weight_map ? " (model.safetensors.index.json maps it here)" : "");
    return WB_OK;
}

/* ------------------------------------------------------------------------------ loading */

/* One tensor the config asks for. Vectors always become F32; matrices stay BF16 (mapped) when
 * the file has BF16 and compute_f32 is off. */
typedef struct want {
    char name[96];
    int64_t d0, d1; /* d1 = 0: a vector */
    const float **vec;
    wb_mat *mat;
} want;

static wb_status check_want(const weights *w, const want *t, wb_tensor_view *v, const char **path,
                            wb_err *err) {
    *path = w->index_path;
    wb_status s = weights_find(w, t->name, v, path, err);
    if (s) return s;
    if (v->dtype != WB_F32 && v->dtype != WB_F16 && v->dtype != WB_BF16)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16", *path,
                          t->name, v->dtype == WB_I32 ? "I32" : "I64");
    const int nd = t->d1 ? 2 : 1;
    if (v->ndim != nd || v->shape[0] != t->d0 || (nd == 2 && v->shape[1] != t->d1)) {
        char got[128] = "[", *q = got + 1;
        for (int i = 0; i < v->ndim && q < got + sizeof got - 24; i++)
            q += snprintf(q, 24, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
        snprintf(q, 2, "]");
        if (nd == 1)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%lld]",
                              *path, t->name, got, (long long)t->d0);
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' has shape %s, expected [%lld, %lld]", *path, t->name,
                          got, (long long)t->d0, (long long)t->d1);
    }
    return WB_OK;
}

static void widen(float *dst, const wb_tensor_view *v, size_t n) {
    const uint8_t *src = v->data; /* may be unaligned: element by element through memcpy */
    if (v->dtype == WB_F32) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = v->dtype == WB_F16 ? wb_f16_to_f32(h) : wb_bf16_to_f32(h);
    }
}

static int keeps_bf16(const want *t, const wb_tensor_view *v, int compute_f32) {
    return t->mat && v->dtype == WB_BF16 && !compute_f32;
}

/* RoPE inverse frequencies as transformers computes them, in float32:
 * inv_freq[i] = 1 / theta^(2i/hd), then the llama3 rescaling of _compute_llama3_parameters. */
static void rope_init(const wb_config *c, float *inv) {
    const int half = c->head_dim / 2;
    for (int i = 0; i < half; i++)
        inv[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
    if (c->rope_scaling != WB_ROPE_LLAMA3) return;
    const float factor = c->rope_factor, lo = c->rope_low_freq_factor,
                hi = c->rope_high_freq_factor, old = (float)c->rope_original_max_pos;
    const float low_wavelen = old / lo, high_wavelen = old / hi;
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    for (int i = 0; i < half; i++) {
        const float wavelen = two_pi / inv[i];
        float f = wavelen > low_wavelen ? inv[i] / factor : inv[i];
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
            const float smooth = (old / wavelen - lo) / (hi - lo);
            f = (1.0f - smooth) * f / factor + smooth * f;
        }
        inv[i] = f;
    }
}

wb_status wb_llama_load(wb_model *m, const char *dir, const wb_model_params *p, wb_err *err) {
    const wb_config *c = &m->cfg;
    const int64_t V = c->vocab_size, C = c->n_embd, F = c->n_inner, L = c->n_layer;
    const int64_t Q = (int64_t)c->n_head * c->head_dim, KV = (int64_t)c->n_kv_head * c->head_dim;
    const int n_want = 3 + (int)L * 16;
    want *wants = calloc((size_t)n_want, sizeof *wants);
    wb_tensor_view *views = calloc((size_t)n_want, sizeof *views);
    struct wb_llama *ll = calloc(1, sizeof *ll);
    weights w;
    memset(&w, 0, sizeof w);
    wb_status s = WB_OK;
    if (!wants || !views || !ll || !(ll->layers = calloc((size_t)L, sizeof *ll->layers)) ||
        !(ll->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(float)))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    if ((s = weights_open(&w, dir, err))) goto done;

    int n = 0;
#define WANT_V(ptr, d, fmt, ...)                                                                 \
    do {                                                                                          \
        snprintf(wants[n].name, sizeof wants[n].name, fmt, __VA_ARGS__);                          \
        wants[n].d0 = (d);                                                                        \
        wants[n++].vec = (ptr);                                                                   \
    } while (0)
#define WANT_M(ptr, a, b, fmt, ...)                                                              \
    do {                                                                                          \
        snprintf(wants[n].name, sizeof wants[n].name, fmt, __VA_ARGS__);                          \
        wants[n].d0 = (a);                                                                        \
        wants[n].d1 = (b);                                                                        \
        wants[n++].mat = (ptr);                                                                   \
    } while (0)
    WANT_M(&ll->embed, V, C, "%s", "model.embed_tokens.weight");
    for (int l = 0; l < (int)L; l++) {
        wb_llama_layer *y = &ll->layers[l];
        const char *pre = "model.layers";
        WANT_V(&y->attn_norm, C, "%s.%d.input_layernorm.weight", pre, l);
        WANT_M(&y->wq, Q, C, "%s.%d.self_attn.q_proj.weight", pre, l);
        WANT_M(&y->wk, KV, C, "%s.%d.self_attn.k_proj.weight", pre, l);
        WANT_M(&y->wv, KV, C, "%s.%d.self_attn.v_proj.weight", pre, l);
        if (c->qkv_bias) {
            WANT_V(&y->bq, Q, "%s.%d.self_attn.q_proj.bias", pre, l);
            WANT_V(&y->bk, KV, "%s.%d.self_attn.k_proj.bias", pre, l);
            WANT_V(&y->bv, KV, "%s.%d.self_attn.v_proj.bias", pre, l);
        }
        WANT_M(&y->wo, C, Q, "%s.%d.self_attn.o_proj.weight", pre, l);
        if (c->o_bias) WANT_V(&y->bo, C, "%s.%d.self_attn.o_proj.bias", pre, l);
        WANT_V(&y->mlp_norm, C, "%s.%d.post_attention_layernorm.weight", pre, l);
        WANT_M(&y->wg, F, C, "%s.%d.mlp.gate_proj.weight", pre, l);
        WANT_M(&y->wu, F, C, "%s.%d.mlp.up_proj.weight", pre, l);
        WANT_M(&y->wd, C, F, "%s.%d.mlp.down_proj.weight", pre, l);
        if (c->mlp_bias) {
            WANT_V(&y->bg, F, "%s.%d.mlp.gate_proj.bias", pre, l);
            WANT_V(&y->bu, F, "%s.%d.mlp.up_proj.bias", pre, l);
            WANT_V(&y->bd, C, "%s.%d.mlp.down_proj.bias", pre, l);
        }
    }
    WANT_V(&ll->norm, C, "%s", "model.norm.weight");
    /* a tied checkpoint may still carry lm_head.weight (a copy); transformers ignores it */
    if (!c->tie_word_embeddings) WANT_M(&ll->head, V, C, "%s", "lm_head.weight");
#undef WANT_V
#undef WANT_M

    /* pass 1: every tensor present with the right dtype and shape before anything is
     * allocated, so a config announcing a model the files do not hold fails cheaply */
    size_t floats = 0, copies = 0;
    int64_t n_params = 0;
    const char *path = NULL;
    for (int i = 0; i < n; i++) {
        if ((s = check_want(&w, &wants[i], &views[i], &path, err))) goto done;
        size_t ne = (size_t)wants[i].d0 * (size_t)(wants[i].d1 ? wants[i].d1 : 1);
        n_params += (int64_t)ne;
        if (keeps_bf16(&wants[i], &views[i], p->compute_f32)) {
            if ((uintptr_t)views[i].data % 2) copies += ne;
        } else {
            floats += align16(ne);
        }
    }
    ll->block = aligned_alloc(64, (floats ? floats : 16) * sizeof(float));
    ll->bf16_copy = copies ? malloc(copies * 2) : NULL;
    if (!ll->block || (copies && !ll->bf16_copy)) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory for %zu weights", dir,
                       floats + copies);
        goto done;
    }
    ll->block_floats = floats;
    /* pass 2: convert or point into the mapping */
    float *fp = ll->block;
    uint16_t *cp = ll->bf16_copy;
    for (int i = 0; i < n; i++) {
        const want *t = &wants[i];
        size_t ne = (size_t)t->d0 * (size_t)(t->d1 ? t->d1 : 1);
        const void *data;
        int bf = keeps_bf16(t, &views[i], p->compute_f32);
        if (bf && (uintptr_t)views[i].data % 2) {
            memcpy(cp, views[i].data, ne * 2);
            data = cp;
            cp += ne;
        } else if (bf) {
            data = views[i].data;
            ll->mapped_bf16_bytes += ne * 2;
        } else {
            widen(fp, &views[i], ne);
            memset(fp + ne, 0, (align16(ne) - ne) * sizeof(float));
            data = fp;
            fp += align16(ne);
        }
        if (t->vec) *t->vec = data;
        else *t->mat = (wb_mat){data, bf, (int)t->d0, (int)t->d1};
    }
    if (c->tie_word_embeddings) ll->head = ll->embed;
    rope_init(c, ll->inv_freq);
    ll->shards = w.shards;
    ll->n_shards = w.n_shards;
    w.shards = NULL; /* owned by ll now: the BF16 matrices live in these mappings */
    m->n_params = n_params;
    m->llama = ll;
    ll = NULL;
done:
    weights_free(&w);
    free(wants);
    free(views);
    wb_llama_free(ll);
    return s;
}

/* ------------------------------------------------------------------------- forward pass */

/* Thread count and the model's pool: shared with the GPT-2 path (session.c). */

static void split8(int n, int tid, int nt, int *r0, int *r1) {
    int nb = (n + 7) / 8;
    int b0 = (int)((int64_t)nb * tid / nt), b1 = (int)((int64_t)nb * (tid + 1) / nt);
    *r0 = b0 * 8 < n ? b0 * 8 : n;
    *r1 = b1 * 8 < n ? b1 * 8 : n;
}

typedef struct lin_job {
    float *Y;
    const float *X, *b;
    const wb_mat *W;
    int n, residual;
} lin_job;

static void lin_worker(void *arg, int tid, int nt) {
    const lin_job *j = arg;
    const int out = j->W->rows, in = j->W->cols;
    int r0, r1;
    split8(out, tid, nt, &r0, &r1);
    if (r0 >= r1) return;
    if (!j->W->bf16 && j->n > SMALL_ROWS) { /* this thread's slice of columns, one sgemm */
        const int w = r1 - r0;
        for (int t = 0; j->b && t < j->n; t++) {
            float *y = j->Y + (size_t)t * out + r0;
            if (j->residual) for (int i = 0; i < w; i++) y[i] += j->b[r0 + i];
            else memcpy(y, j->b + r0, (size_t)w * sizeof *y);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, w, in, 1.0f, j->X, in,
                    (const float *)j->W->w + (size_t)r0 * in, in,
                    j->b || j->residual ? 1.0f : 0.0f, j->Y + r0, out);
        return;
    }
    if (j->W->bf16)
        wb_gemv_bf16_forward(j->Y, (size_t)out, j->X, (size_t)in, j->n, j->W->w, j->b, in, r0, r1,
                             j->residual);
    else
        wb_gemv_batch_forward(j->Y, (size_t)out, j->X, (size_t)in, j->n, j->W->w, j->b, in, r0,
                              r1, j->residual);
}

/* Y[n, out] = X[n, in] . W^T (+ b), or Y += that when residual. F32 weights: above SMALL_ROWS rows
 * one single-threaded cblas_sgemm per thread over its slice of output columns (OpenBLAS never
 * runs its own threads: base.c). BF16 weights: always our kernels on our pool; for a 44-token prefill of
 * a 4864x896 matrix the blocked BF16 kernel ran as fast as widening 1 MB tiles for cblas_sgemm
 * (25-28 GMAC/s per core either way) without the extra buffer. */
static wb_status linear(const wb_model *m, int nt, float *Y, const float *X, int n,
                        const wb_mat *W, const float *b, int residual, wb_err *err) {
    lin_job j = {Y, X, b, W, n, residual};
    if (nt <= 1) {
        lin_worker(&j, 0, 1);
        return WB_OK;
    }
    wb_pool *pool;
    wb_status st = wb_model_pool_acquire(m, nt, &pool, err);
    if (st) return st;
    wb_pool_run(pool, lin_worker, &j);
    wb_model_pool_release(m);
    return WB_OK;
}

/* Attention items (head, block of ATT_QB queries), longest blocks first. */
typedef struct att_job {
    const wb_seq_rows *sq;
    const float *q;
    float *att, *sc;
    size_t sc_stride;
    int layer, NH, group, hd, Q, KV, n_items;
} att_job;

static void att_worker(void *arg, int tid, int nt) {
    const att_job *j = arg;
    const wb_seq_rows *s = j->sq;
    float *sc = j->sc + (size_t)tid * j->sc_stride;
    const int nblk = (s->n + ATT_QB - 1) / ATT_QB;
    const size_t lo = (size_t)j->layer * s->cache_ctx * j->KV;
    for (int it = tid; it < j->n_items; it += nt) {
        const int hd = it % j->NH, q0 = (nblk - 1 - it / j->NH) * ATT_QB;
        const int nq = s->n - q0 < ATT_QB ? s->n - q0 : ATT_QB;
        const int kvh = hd / j->group;
        const float *kl = s->k + lo + (size_t)kvh * j->hd, *vl = s->v + lo + (size_t)kvh * j->hd;
        float *o = j->att + (size_t)q0 * j->Q + (size_t)hd * j->hd;
        const float *qq = j->q + (size_t)q0 * j->Q + (size_t)hd * j->hd;
        if (nq == 1)
            wb_attention_forward(o, qq, kl, vl, (size_t)j->KV, s->pos + q0, j->hd, sc);
        else
            wb_attention_block_forward(o, (size_t)j->Q, qq, (size_t)j->Q, kl, vl, (size_t)j->KV,
                                       s->pos + q0, nq, j->hd, sc);
    }
}

/* Rotate-half RoPE over nh heads of hd in each of n rows (ld apart): row t at position pos + t
 * uses cs[t] = cos[hd/2] then sin[hd/2]. */
static void rope_rows(float *x, size_t ld, int n, int nh, int hd, const float *cs) {
    const int h = hd / 2;
    for (int t = 0; t < n; t++) {
        const float *co = cs + (size_t)t * hd, *si = co + h;
        for (int k = 0; k < nh; k++) {
            float *v = x + (size_t)t * ld + (size_t)k * hd;
            for (int i = 0; i < h; i++) {
                const float a = v[i], b = v[i + h];
                v[i] = a * co[i] - b * si[i];
                v[i + h] = b * co[i] + a * si[i];
            }
        }
    }
}

static void embed_row(const wb_mat *E, int32_t id, float *x) {
    const size_t C = (size_t)E->cols;
    if (E->bf16) wb_bf16_to_f32_forward(x, (const uint16_t *)E->w + (size_t)id * C, C);
    else memcpy(x, (const float *)E->w + (size_t)id * C, C * sizeof *x);
}

static wb_status forward_one(const wb_model *m, const wb_seq_rows *sq, float *logits,
                             int all_positions, wb_scratch *scratch, wb_err *err) {
    const wb_config *c = &m->cfg;
    const struct wb_llama *ll = m->llama;
    const int n = sq->n, C = c->n_embd, F = c->n_inner, NH = c->n_head,
              hd = c->head_dim, Q = NH * hd, KV = c->n_kv_head * hd;
    const float eps = c->layer_norm_epsilon;
    const int nt = wb_compute_threads();
    /* enough for the last (longest) query block, and for att[pos + n] of a single query */
    const size_t sc_per = wb_attention_block_scratch(sq->pos, n, hd) + 16;
    /* x, xn [n, C]; q, att [n, Q]; k, v [n, KV]; g, u [n, F]; cs [n, hd]; sc [nt, sc_per] */
    const size_t nn = (size_t)n;
    const size_t sz[10] = {nn * C, nn * C, nn * Q, nn * Q, nn * KV, nn * KV, nn * F, nn * F,
                           nn * hd, (size_t)nt * sc_per};
    size_t need = 0;
    for (int i = 0; i < 10; i++) need += align16(sz[i]);
    wb_scratch local = {0};
    if (!scratch) scratch = &local;
    if (scratch->cap < need) {
        free(scratch->p);
        scratch->cap = 0;
        if (!(scratch->p = aligned_alloc(64, need * sizeof(float))))
            return wb_err_set(err, WB_ERR_NOMEM, "forward of %d tokens: out of memory", n);
        scratch->cap = need;
    }
    float *b[10], *q = scratch->p;
    for (int i = 0; i < 10; i++) b[i] = q, q += align16(sz[i]);
    float *x = b[0], *xn = b[1], *qb = b[2], *att = b[3], *kb = b[4], *vb = b[5], *g = b[6],
          *u = b[7], *cs = b[8], *sc = b[9];
    wb_status st = WB_OK;

    for (int t = 0; t < n; t++) {
        embed_row(&ll->embed, sq->ids[t], x + (size_t)t * C);
        /* angles in float32, as transformers' rotary embedding forms position * inv_freq */
        for (int i = 0; i < hd / 2; i++) {
            const float a = (float)(sq->pos + t) * ll->inv_freq[i];
            cs[(size_t)t * hd + i] = (float)cos((double)a);
            cs[(size_t)t * hd + hd / 2 + i] = (float)sin((double)a);
        }
    }
    const int n_items = (n + ATT_QB - 1) / ATT_QB * NH;
    att_job aj = {sq, qb, att, sc, sc_per, 0, NH, NH / c->n_kv_head, hd, Q, KV, n_items};
    for (int l = 0; l < c->n_layer; l++) {
        if (m->abort_fn && m->abort_fn(m->abort_data)) {
            st = wb_err_set(err, WB_ERR_CANCELLED,
                            "forward cancelled by the abort callback at layer %d", l);
            goto done;
        }
        const wb_llama_layer *y = &ll->layers[l];
        for (int t = 0; t < n; t++)
            wb_rmsnorm_forward(xn + (size_t)t * C, x + (size_t)t * C, y->attn_norm, C, eps);
        if ((st = linear(m, nt, qb, xn, n, &y->wq, y->bq, 0, err)) ||
            (st = linear(m, nt, kb, xn, n, &y->wk, y->bk, 0, err)) ||
            (st = linear(m, nt, vb, xn, n, &y->wv, y->bv, 0, err)))
            goto done;
        rope_rows(qb, (size_t)Q, n, NH, hd, cs);
        rope_rows(kb, (size_t)KV, n, c->n_kv_head, hd, cs);
        const size_t lo = (size_t)l * sq->cache_ctx * KV + (size_t)sq->pos * KV;
        memcpy(sq->k + lo, kb, nn * KV * sizeof(float));
        memcpy(sq->v + lo, vb, nn * KV * sizeof(float));
        aj.layer = l;
        if (nt > 1 && (n_items >= 2 * nt || sq->pos + n >= 256)) {
            wb_pool *pool;
            if ((st = wb_model_pool_acquire(m, nt, &pool, err))) goto done;
            wb_pool_run(pool, att_worker, &aj);
            wb_model_pool_release(m);
        } else {
            att_worker(&aj, 0, 1);
        }
        if ((st = linear(m, nt, x, att, n, &y->wo, y->bo, 1, err))) goto done;
        for (int t = 0; t < n; t++)
            wb_rmsnorm_forward(xn + (size_t)t * C, x + (size_t)t * C, y->mlp_norm, C, eps);
        if ((st = linear(m, nt, g, xn, n, &y->wg, y->bg, 0, err)) ||
            (st = linear(m, nt, u, xn, n, &y->wu, y->bu, 0, err)))
            goto done;
        wb_swiglu_forward(g, u, nn * F);
        if ((st = linear(m, nt, x, g, n, &y->wd, y->bd, 1, err))) goto done;
    }
    if (logits) {
        const int first = all_positions ? 0 : n - 1, rows = n - first;
        for (int t = first; t < n; t++)
            wb_rmsnorm_forward(xn + (size_t)(t - first) * C, x + (size_t)t * C, ll->norm, C, eps);
        st = linear(m, nt, logits, xn, rows, &ll->head, NULL, 0, err);
    }
done:
    free(local.p);
    return st;
}

wb_status wb_llama_forward_seqs(const wb_model *m, const wb_seq_rows *seqs, int n_seqs,
                                float *logits, int all_positions, wb_scratch *scratch,
                                wb_err *err) {
    if (n_seqs < 1)
        return wb_err_set(err, WB_ERR_ARG, "forward: n_seqs = %d, need at least 1", n_seqs);
    /* Sequences run one after another: correct for batched callers (core/batch.c), though the
     * weights stream once per sequence rather than once per step. */
    size_t row = 0;
    for (int s = 0; s < n_seqs; s++) {
        if (seqs[s].n < 1)
            return wb_err_set(err, WB_ERR_ARG, "forward: sequence %d has n = %d tokens", s,
                              seqs[s].n);
        float *lg = logits ? logits + row * (size_t)m->cfg.vocab_size : NULL;
        wb_status st = forward_one(m, &seqs[s], lg, all_positions, scratch, err);
        if (st) return st;
        row += all_positions ? (size_t)seqs[s].n : 1;
    }
    return WB_OK;
}
