/* model.c - loading a GPT-2 directory (config.json, model.safetensors, tokenizer.json).
 *
 * Every weight is converted to F32 into one 64-byte aligned block. Conv1D matrices arrive as
 * [in, out]; they are stored transposed, [out, in], so that a decode GEMV streams each output's
 * weights as one contiguous row and the prefill GEMM uses them as B^T (no copy either way).
 * The safetensors mapping is closed after loading: the block is all the forward pass reads.
 */
#include "fileio.h"
#include "json_strict.h"
#include "model_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <math.h>

#include <cjson/cJSON.h>

#define CONFIG_MAX_BYTES (16u << 20)

/* ---------------------------------------------------------------------------- file helpers */



/* ------------------------------------------------------------------------------- tensors */

/* Find `name` as GPT2LMHeadModel writes it ("transformer." prefix) or as GPT2Model does. */
static wb_status find_tensor(const wb_safetensors *st, const char *path, const char *name,
                             int prefixed, wb_tensor_view *v, wb_err *err) {
    char full[160];
    snprintf(full, sizeof full, "transformer.%s", name);
    if (prefixed && wb_safetensors_find(st, full, v, NULL) == WB_OK) return WB_OK;
    if (wb_safetensors_find(st, name, v, NULL) == WB_OK) return WB_OK;
    return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' is missing", path,
                      prefixed ? full : name);
}

/* Check dtype and exact shape, then convert to F32 into dst: [d0, d1] as is, or transposed to
 * [d1, d0] when `transpose` (Conv1D [in, out] -> [out, in]). */
static wb_status load_tensor(const wb_safetensors *st, const char *path, const char *name,
                             int prefixed, int ndim, int64_t d0, int64_t d1, int transpose,
                             float *dst, wb_err *err) {
    wb_tensor_view v;
    wb_status s = find_tensor(st, path, name, prefixed, &v, err);
    if (s) return s;
    if (v.dtype != WB_F32 && v.dtype != WB_F16 && v.dtype != WB_BF16)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16", path,
                          v.name, v.dtype == WB_I32 ? "I32" : "I64");
    int ok = v.ndim == ndim && v.shape[0] == d0 && (ndim == 1 || v.shape[1] == d1);
    if (!ok) {
        char got[128] = "[", *q = got + 1;
        for (int i = 0; i < v.ndim && q < got + sizeof got - 24; i++)
            q += snprintf(q, 24, "%s%lld", i ? ", " : "", (long long)v.shape[i]);
        snprintf(q, 2, "]");
        if (ndim == 1)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%lld]",
                              path, v.name, got, (long long)d0);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%lld, %lld]",
                          path, v.name, got, (long long)d0, (long long)d1);
    }
    if (!dst) return WB_OK; /* checking only */
    size_t n = (size_t)d0 * (size_t)(ndim == 1 ? 1 : d1);
    float *tmp = dst;
    if (transpose && !(tmp = malloc(n * sizeof *tmp)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory converting '%s'", path, v.name);
    const uint8_t *src = v.data; /* may be unaligned: memcpy element by element */
    if (v.dtype == WB_F32) {
        memcpy(tmp, src, n * 4);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            tmp[i] = v.dtype == WB_F16 ? wb_f16_to_f32(h) : wb_bf16_to_f32(h);
        }
    }
    if (transpose) {
        /* tiled so both sides stay in cache for the big matrices */
        const size_t R = (size_t)d0, Cc = (size_t)d1, B = 32;
        for (size_t i0 = 0; i0 < R; i0 += B)
            for (size_t j0 = 0; j0 < Cc; j0 += B)
                for (size_t i = i0; i < i0 + B && i < R; i++)
                    for (size_t j = j0; j < j0 + B && j < Cc; j++) dst[j * R + i] = tmp[i * Cc + j];
        free(tmp);
    }
    return WB_OK;
}

/* ---------------------------------------------------------------------------------- load */

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

void wb_model_free(wb_model *m) {
    if (!m) return;
    wb_pool_free(m->pool);
    pthread_mutex_destroy(&m->pool_mu);
    wb_llama_free(m->llama);
    free(m->eos_ids);
    wb_tokenizer_free(m->tok);
    free(m->block);
    free(m->layers);
    free(m->config_json);
    free(m->dir);
    free(m);
}

/* dry: only check presence, dtype and shape of every tensor, so that a config announcing a
 * huge model with a file that does not hold it fails before the block is allocated. */
static wb_status load_weights(wb_model *m, const wb_safetensors *st, const char *path, int dry,
                              wb_err *err) {
    const wb_config *c = &m->cfg;
    const size_t V = (size_t)c->vocab_size, T = (size_t)c->n_ctx, C = (size_t)c->n_embd,
                 F = (size_t)c->n_inner, L = (size_t)c->n_layer;
    const int untied = !c->tie_word_embeddings;
    size_t per_layer = 4 * align16(C) + align16(3 * C * C) + align16(3 * C) + align16(C * C) +
                       align16(C) + align16(F * C) + align16(F) + align16(C * F) + align16(C);
    size_t total = align16(V * C) + align16(T * C) + L * per_layer + 2 * align16(C) +
                   (untied ? align16(V * C) : 0);
    float *p = NULL;
    if (!dry) {
        m->block_floats = total;
        m->block = aligned_alloc(64, total * sizeof(float));
        m->layers = calloc(L, sizeof *m->layers);
        if (!m->block || !m->layers)
            return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory for %zu weights", path, total);
        memset(m->block, 0, total * sizeof(float)); /* the alignment padding */
        p = m->block;
    }
    wb_layer dummy;
#define TAKE(n) (dry ? NULL : (p += align16(n), p - align16(n)))
    wb_status s;
    float *wte = TAKE(V * C), *wpe = TAKE(T * C);
    if ((s = load_tensor(st, path, "wte.weight", 1, 2, (int64_t)V, (int64_t)C, 0, wte, err)) ||
        (s = load_tensor(st, path, "wpe.weight", 1, 2, (int64_t)T, (int64_t)C, 0, wpe, err)))
        return s;
    m->wte = wte;
    m->wpe = wpe;
    for (size_t l = 0; l < L; l++) {
        wb_layer *ly = dry ? &dummy : &m->layers[l];
        char nm[96];
        float *w;
#define LOAD(field, suffix, nd, a, b, tr, size)                                                  \
    do {                                                                                          \
        w = TAKE(size);                                                                           \
        snprintf(nm, sizeof nm, "h.%zu.%s", l, suffix);                                           \
        if ((s = load_tensor(st, path, nm, 1, nd, (int64_t)(a), (int64_t)(b), tr, w, err)))       \
            return s;                                                                             \
        ly->field = w;                                                                            \
    } while (0)
        LOAD(ln1_w, "ln_1.weight", 1, C, 0, 0, C);
        LOAD(ln1_b, "ln_1.bias", 1, C, 0, 0, C);
        LOAD(qkv_w, "attn.c_attn.weight", 2, C, 3 * C, 1, 3 * C * C);
        LOAD(qkv_b, "attn.c_attn.bias", 1, 3 * C, 0, 0, 3 * C);
        LOAD(attproj_w, "attn.c_proj.weight", 2, C, C, 1, C * C);
        LOAD(attproj_b, "attn.c_proj.bias", 1, C, 0, 0, C);
        LOAD(ln2_w, "ln_2.weight", 1, C, 0, 0, C);
        LOAD(ln2_b, "ln_2.bias", 1, C, 0, 0, C);
        LOAD(fc_w, "mlp.c_fc.weight", 2, C, F, 1, F * C);
        LOAD(fc_b, "mlp.c_fc.bias", 1, F, 0, 0, F);
        LOAD(mlpproj_w, "mlp.c_proj.weight", 2, F, C, 1, C * F);
        LOAD(mlpproj_b, "mlp.c_proj.bias", 1, C, 0, 0, C);
#undef LOAD
    }
    float *lw = TAKE(C), *lb = TAKE(C);
    if ((s = load_tensor(st, path, "ln_f.weight", 1, 1, (int64_t)C, 0, 0, lw, err)) ||
        (s = load_tensor(st, path, "ln_f.bias", 1, 1, (int64_t)C, 0, 0, lb, err)))
        return s;
    m->lnf_w = lw;
    m->lnf_b = lb;
    m->head = m->wte;
    if (untied) {
        /* HF drops lm_head.weight on save only when tied; untied models must carry it. */
        float *h = TAKE(V * C);
        if ((s = load_tensor(st, path, "lm_head.weight", 0, 2, (int64_t)V, (int64_t)C, 0, h, err)))
            return s;
        m->head = h;
    }
#undef TAKE
    int64_t per = 4 * (int64_t)C + 3 * (int64_t)(C * C) + 3 * (int64_t)C + (int64_t)(C * C) +
                  (int64_t)C + 2 * (int64_t)(F * C) + (int64_t)F + (int64_t)C;
    m->n_params = (int64_t)(V * C + T * C) + (int64_t)L * per + 2 * (int64_t)C +
                  (untied ? (int64_t)(V * C) : 0);
    return WB_OK;
}

wb_model_params wb_model_default_params(void) {
    wb_model_params p = {0};
    p.compute_f32 = 0;
    p.n_ctx = 4096;
    return p;
}

/* generation_config.json's eos_token_id (an integer or a list), when the file exists. */
static wb_status load_generation_config(wb_model *m, const char *dir, wb_err *err) {
    char *path = wb_path_join(dir, "generation_config.json"), *text = NULL;
    if (!path) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    struct stat sb;
    wb_status s = WB_OK;
    size_t len;
    cJSON *root = NULL;
    if (stat(path, &sb) != 0) goto done; /* optional */
    if ((s = wb_read_file(path, CONFIG_MAX_BYTES, &text, &len, err))) goto done;
    root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) {
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    if ((s = wb_json_check_unique_keys(root, path, err))) goto done;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (!e || cJSON_IsNull(e)) goto done;
    int n = cJSON_IsArray(e) ? cJSON_GetArraySize(e) : 1;
    if (!(m->eos_ids = malloc((size_t)(n ? n : 1) * sizeof *m->eos_ids))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_IsArray(e) ? cJSON_GetArrayItem(e, i) : e;
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble >= m->cfg.vocab_size) {
            s = wb_err_set(err, WB_ERR_FORMAT,
                           "%s: key \"eos_token_id\" must be a token id in [0, %d) or a list of "
                           "them", path, m->cfg.vocab_size);
            goto done;
        }
        m->eos_ids[i] = (int32_t)v->valuedouble;
    }
    m->n_eos = (size_t)n;
done:
    cJSON_Delete(root);
    free(text);
    free(path);
    return s;
}

wb_status wb_model_load(const char *dir, wb_model **out, wb_err *err) {
    return wb_model_load_ex(dir, NULL, out, err);
}

wb_status wb_model_load_ex(const char *dir, const wb_model_params *params, wb_model **out,
                           wb_err *err) {
    if (!out || !dir) return wb_err_set(err, WB_ERR_ARG, "wb_model_load: NULL argument");
    *out = NULL;
    const wb_model_params prm = params ? *params : wb_model_default_params();
    if (prm.n_ctx < 0)
        return wb_err_set(err, WB_ERR_ARG, "wb_model_load: params.n_ctx = %d is negative",
                          prm.n_ctx);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return wb_err_set(err, WB_ERR_IO, "%s: model directory does not exist or is not a directory",
                          dir);
    wb_model *m = calloc(1, sizeof *m);
    if (!m) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    pthread_mutex_init(&m->pool_mu, NULL);
    char *cpath = wb_path_join(dir, "config.json"), *spath = wb_path_join(dir, "model.safetensors"),
         *tpath = wb_path_join(dir, "tokenizer.json");
    wb_safetensors *st = NULL;
    wb_status s = WB_OK;
    size_t clen = 0;
    m->dir = strdup(dir);
    if (!cpath || !spath || !tpath || !m->dir) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    if ((s = wb_read_file(cpath, CONFIG_MAX_BYTES, &m->config_json, &clen, err)) ||
        (s = wb_config_parse_ex(m->config_json, clen, cpath, &m->cfg, &m->act, err)))
        goto done;
    if (m->cfg.family == WB_FAMILY_LLAMA) {
        cJSON *root = cJSON_ParseWithLength(m->config_json, clen);
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
        snprintf(m->model_type, sizeof m->model_type, "%s",
                 cJSON_IsString(mt) ? mt->valuestring : "llama");
        cJSON_Delete(root);
        /* the KV cache is sized from the context asked for, not max_position_embeddings */
        int32_t want = prm.n_ctx > 0 ? prm.n_ctx : 4096;
        m->cfg.n_ctx = want < m->cfg.max_position_embeddings ? want
                                                             : m->cfg.max_position_embeddings;
        if ((s = wb_tokenizer_load(tpath, &m->tok, err))) goto done;
    } else {
        snprintf(m->model_type, sizeof m->model_type, "gpt2");
        if ((s = wb_safetensors_open(spath, &st, err)) ||
            (s = wb_tokenizer_load(tpath, &m->tok, err)))
            goto done;
    }
    int32_t tv = wb_tokenizer_vocab_size(m->tok);
    if (tv > m->cfg.vocab_size) {
        s = wb_err_set(err, WB_ERR_FORMAT,
                       "%s: the tokenizer has %d ids but %s says vocab_size = %d", tpath, tv,
                       cpath, m->cfg.vocab_size);
        goto done;
    }
    if (m->cfg.family == WB_FAMILY_LLAMA) s = wb_llama_load(m, dir, &prm, err);
    else if (!(s = load_weights(m, st, spath, 1, err))) s = load_weights(m, st, spath, 0, err);
    if (!s) s = load_generation_config(m, dir, err);
done:
    wb_safetensors_free(st);
    free(cpath);
    free(spath);
    free(tpath);
    if (s) {
        wb_model_free(m);
        return s;
    }
    *out = m;
    return WB_OK;
}

/* ----------------------------------------------------------------------------- accessors */

const wb_config *wb_model_config(const wb_model *m) { return m ? &m->cfg : NULL; }
const wb_tokenizer *wb_model_tokenizer(const wb_model *m) { return m ? m->tok : NULL; }
const char *wb_model_dir(const wb_model *m) { return m ? m->dir : NULL; }
const char *wb_model_config_json(const wb_model *m) { return m ? m->config_json : NULL; }
int64_t wb_model_num_parameters(const wb_model *m) { return m ? m->n_params : 0; }
const char *wb_model_type(const wb_model *m) { return m ? m->model_type : NULL; }

const int32_t *wb_model_eos_ids(const wb_model *m, size_t *n) {
    if (n) *n = m ? m->n_eos : 0;
    return m ? m->eos_ids : NULL;
}

int wb_model_is_eos(const wb_model *m, int32_t id) {
    for (size_t i = 0; m && i < m->n_eos; i++)
        if (m->eos_ids[i] == id) return 1;
    return 0;
}

size_t wb_model_weight_bytes(const wb_model *m) {
    if (!m) return 0;
    return m->llama ? wb_llama_weight_bytes(m->llama) : m->block_floats * sizeof(float);
}

void wb_model_set_abort(wb_model *m, wb_abort_fn fn, void *user_data) {
    if (!m) return;
    m->abort_fn = fn;
    m->abort_data = user_data;
}

wb_status wb_check_ids(const wb_model *m, const int32_t *ids, int n, wb_err *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return wb_err_set(err, WB_ERR_RANGE,
                              "token id %d at index %d is out of range (vocab_size %d)", ids[i], i,
                              m->cfg.vocab_size);
    return WB_OK;
}

/* The "cache off" path: the whole sequence from scratch with a throwaway K/V of n rows. */
wb_status wb_model_forward(const wb_model *m, const int32_t *ids, int n, float *logits,
                           int all_positions, wb_err *err) {
    if (!m || (!ids && n > 0))
        return wb_err_set(err, WB_ERR_ARG, "wb_model_forward: NULL model or ids");
    if (n < 1 || n > m->cfg.n_ctx)
        return wb_err_set(err, WB_ERR_RANGE,
                          "wb_model_forward: %d tokens do not fit the context of %d (n_positions)",
                          n, m->cfg.n_ctx);
    wb_status s = wb_check_ids(m, ids, n, err);
    if (s) return s;
    size_t kv = (size_t)m->cfg.n_layer * (size_t)n * wb_model_kv_width(m);
    float *k = malloc(kv * sizeof *k), *v = malloc(kv * sizeof *v);
    if (!k || !v) s = wb_err_set(err, WB_ERR_NOMEM, "wb_model_forward: out of memory");
    else s = wb_forward_tokens(m, k, v, n, 0, ids, n, logits, all_positions, NULL, err);
    free(k);
    free(v);
    return s;
}
