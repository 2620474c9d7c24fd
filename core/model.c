/* model.c - loading a model directory, the family table, and the calls that go through it.
 *
 * config.json is read and parsed once; its model_type (else architectures[0], else GPT-2) picks
 * one entry of `families` below, and from then on every family-specific step is a call through
 * that entry: parse the config keys, load the weights, forward, KV width, context limit, bytes.
 * Nothing else in the core asks which family a model is.
 */
#include "fileio.h"
#include "gguf.h"
#include "gguf_model.h"
#include "gguf_tokenizer.h"
#include "json_strict.h"
#include "model_family.h"
#include "wb_chat.h"
#include "wb_generation_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#define CONFIG_MAX_BYTES (16u << 20)

/* Every family the core knows; the first is the default for configs without model_type. */
static const wb_family *const families[] = {&wb_family_gpt2, &wb_family_llama, &wb_family_phi3};
#define N_FAMILIES (sizeof families / sizeof families[0])

/* The family and the model_type for a parsed config.json. */
static wb_status pick_family(const cJSON *root, const char *name, const wb_family **fam,
                             const char **model_type, wb_err *err) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
    const int by_type = mt && !cJSON_IsNull(mt);
    const char *want = by_type ? (cJSON_IsString(mt) ? mt->valuestring : NULL)
                               : (cJSON_IsString(a0) ? a0->valuestring : NULL);
    if (!by_type && !want) { /* old GPT-2 configs name neither */
        *fam = families[0];
        *model_type = families[0]->model_types[0];
        return WB_OK;
    }
    for (size_t f = 0; want && f < N_FAMILIES; f++) {
        const char *const *names = by_type ? families[f]->model_types : families[f]->architectures;
        for (int i = 0; names[i]; i++)
            if (!strcmp(names[i], want)) {
                *fam = families[f];
                *model_type = families[f]->model_types[i];
                return WB_OK;
            }
    }
    if (!by_type) { /* an unknown architecture without model_type: the default family */
        *fam = families[0];
        *model_type = families[0]->model_types[0];
        return WB_OK;
    }
    char list[256] = "", *q = list;
    for (size_t f = 0; f < N_FAMILIES; f++)
        for (int i = 0; families[f]->model_types[i]; i++)
            q += snprintf(q, (size_t)(list + sizeof list - q), "%s\"%s\"", q == list ? "" : ", ",
                          families[f]->model_types[i]);
    if (want)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"model_type\" = \"%.40s\" is not supported "
                          "(one of %s)", name, want, list);
    return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"model_type\" must be a string (one of %s)",
                      name, list);
}

static wb_status parse_root(const char *json, size_t len, const char *name, cJSON **root,
                            wb_err *err) {
    *root = cJSON_ParseWithLength(json, len);
    if (!*root) return wb_err_set(err, WB_ERR_FORMAT, "%s: not valid JSON", name);
    if (!cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return wb_err_set(err, WB_ERR_FORMAT, "%s: top level is not a JSON object", name);
    }
    wb_status s = wb_json_check_unique_keys(*root, name, err);
    if (s) {
        cJSON_Delete(*root);
        *root = NULL;
    }
    return s;
}

wb_status wb_config_parse(const char *json, size_t len, const char *name, wb_config *out,
                          wb_err *err) {
    if (!name) name = "config.json";
    if (!json || !out) return wb_err_set(err, WB_ERR_ARG, "%s: NULL argument", name);
    cJSON *root;
    wb_status s = parse_root(json, len, name, &root, err);
    if (s) return s;
    const wb_family *fam;
    const char *mt;
    void *hp = NULL;
    if (!(s = pick_family(root, name, &fam, &mt, err)))
        s = fam->parse_config(root, mt, name, out, &hp, err);
    free(hp);
    cJSON_Delete(root);
    return s;
}

/* ---------------------------------------------------------------------------------- load */

void wb_model_free(wb_model *m) {
    if (!m) return;
    wb_pool_slot_destroy(&m->pool);
    if (m->family) m->family->free(m->impl);
    free(m->hparams);
    free(m->eos_ids);
    wb_tokenizer_free(m->tok);
    free(m->config_json);
    free(m->chat_template);
    free(m->dir);
    free(m);
}

wb_model_params wb_model_default_params(void) {
    wb_model_params p = {0};
    p.compute_f32 = 0;
    p.n_ctx = 4096;
    return p;
}


/* generation_config.json's eos_token_id (an integer or a list), when the file exists: parsed by
 * core/generation_config.c (the one reader of that file, linear in its length); the model adds
 * the check that every id is inside its vocabulary. */
static wb_status load_generation_config(wb_model *m, const char *dir, wb_err *err) {
    wb_generation_config *g = NULL;
    wb_status s = wb_generation_config_load(dir, &g, err);
    if (s || !g) return s; /* optional */
    const wb_generation_defaults *d = wb_generation_config_defaults(g);
    for (size_t i = 0; i < d->n_eos; i++)
        if (d->eos_ids[i] < 0 || d->eos_ids[i] >= m->cfg.vocab_size) {
            s = wb_err_set(err, WB_ERR_FORMAT,
                           "%s: key \"eos_token_id\" must be a token id in [0, %d) or a list of "
                           "them (element %zu is %d)", wb_generation_config_name(g),
                           m->cfg.vocab_size, i, (int)d->eos_ids[i]);
            goto done;
        }
    if (d->n_eos) {
        if (!(m->eos_ids = malloc(d->n_eos * sizeof *m->eos_ids))) {
            s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", wb_generation_config_name(g));
            goto done;
        }
        memcpy(m->eos_ids, d->eos_ids, d->n_eos * sizeof *m->eos_ids);
        m->n_eos = d->n_eos;
    }
done:
    wb_generation_config_free(g);
    return s;
}

/* ---------------------------------------------------------------------------- GGUF files */

/* tokenizer.ggml.eos_token_id and eot_token_id (when present) as the model's end ids. */
static wb_status gguf_eos(wb_model *m, const wb_gguf *g, const char *path, wb_err *err) {
    static const char *const keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    int32_t ids[2];
    size_t n = 0;
    for (size_t i = 0; i < 2; i++) {
        int64_t v;
        wb_err e = {0};
        wb_status s = wb_gguf_get_int(g, keys[i], &v, &e);
        if (s == WB_ERR_NOTFOUND) continue;
        if (s) return wb_err_set(err, s, "%s: %s", path, e.msg);
        if (v < 0 || v >= m->cfg.vocab_size)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: %s = %lld is not a token id in [0, %d)",
                              path, keys[i], (long long)v, m->cfg.vocab_size);
        if (n == 0 || ids[0] != (int32_t)v) ids[n++] = (int32_t)v;
    }
    if (!n) return WB_OK;
    if (!(m->eos_ids = malloc(n * sizeof *m->eos_ids)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    memcpy(m->eos_ids, ids, n * sizeof *ids);
    m->n_eos = n;
    return WB_OK;
}

/* The tokenizer of a GGUF model: from its tokenizer.ggml.* metadata (core/gguf_tokenizer.c, with
 * tokenizer.chat_template), else, for a file without one, tokenizer.json in the file's
 * directory. */
static wb_status gguf_tokenizer(wb_model *m, const wb_gguf *g, const char *path, wb_err *err) {
    if (wb_gguf_find(g, "tokenizer.ggml.model") >= 0 || wb_gguf_find(g, "tokenizer.ggml.tokens") >= 0) {
        wb_status s = wb_gguf_tokenizer_load(g, &m->tok, &m->chat_template, err);
        wb_gguf_tok_specials sp;
        if (!s && !(s = wb_gguf_tokenizer_specials(g, &sp, err))) m->gguf_bos_id = sp.bos_id;
        if (!s && wb_tokenizer_vocab_size(m->tok) > m->cfg.vocab_size)
            s = wb_err_set(err, WB_ERR_FORMAT, "%s: the tokenizer has %d ids but the model's "
                           "vocabulary is %d", path, wb_tokenizer_vocab_size(m->tok),
                           m->cfg.vocab_size);
        return s;
    }
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path > 0 ? slash - path : 1)) : strdup(".");
    char *tpath = dir ? wb_path_join(dir, "tokenizer.json") : NULL;
    free(dir);
    if (!tpath) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    struct stat sb;
    wb_status s;
    if (stat(tpath, &sb) != 0)
        s = wb_err_set(err, WB_ERR_NOTFOUND, "%s: no tokenizer: the file has no tokenizer.ggml.* "
                       "metadata and there is no %s beside it", path, tpath);
    else if (!(s = wb_tokenizer_load(tpath, &m->tok, err)) &&
             wb_tokenizer_vocab_size(m->tok) > m->cfg.vocab_size)
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: the tokenizer has %d ids but %s has a vocabulary "
                       "of %d", tpath, wb_tokenizer_vocab_size(m->tok), path, m->cfg.vocab_size);
    free(tpath);
    return s;
}

/* A model from an open GGUF (taken): metadata -> config.json object -> the family's parser,
 * then the tokenizer (with_tokenizer), end ids, and the weights through weights_gguf.c. */
static wb_status load_gguf(wb_gguf *g, const char *path, const wb_model_params *prm,
                           int with_tokenizer, wb_model **out, wb_err *err) {
    wb_model *m = calloc(1, sizeof *m);
    if (!m) {
        wb_gguf_free(g);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    }
    wb_pool_slot_init(&m->pool);
    m->format = "gguf";
    m->gguf_bos_id = -1;
    cJSON *root = NULL;
    wb_weights *w = NULL;
    const char *mt = NULL;
    wb_status s;
    if (!(m->dir = strdup(path))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((s = wb_gguf_config_json(g, path, &root, err))) goto done;
    if (!(m->config_json = cJSON_PrintUnformatted(root))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((s = pick_family(root, path, &m->family, &mt, err))) goto done;
    snprintf(m->model_type, sizeof m->model_type, "%s", mt);
    if ((s = m->family->parse_config(root, mt, path, &m->cfg, &m->hparams, err))) {
        m->family = NULL;
        goto done;
    }
    const int32_t want = prm->n_ctx > 0 ? prm->n_ctx : 4096, most = m->family->max_ctx(&m->cfg);
    m->cfg.n_ctx = want < most ? want : most;
    if ((with_tokenizer && (s = gguf_tokenizer(m, g, path, err))) || (s = gguf_eos(m, g, path, err)))
        goto done;
    s = wb_weights_open_gguf(g, path, &m->cfg, &w, err);
    g = NULL; /* taken */
    if (s) goto done;
    wb_weights_set_quant(w, prm->weights);
    if ((s = m->family->load(m, w, prm, err))) goto done;
    m->n_types = wb_weights_types(w, m->types, WB_MAX_TYPE_COUNTS);
done:
    wb_gguf_free(g);
    wb_weights_free(w);
    cJSON_Delete(root);
    if (s) {
        wb_model_free(m);
        return s;
    }
    *out = m;
    return WB_OK;
}

static wb_status check_params(const wb_model_params *prm, wb_err *err) {
    if (prm->n_ctx < 0)
        return wb_err_set(err, WB_ERR_ARG, "wb_model_load: params.n_ctx = %d is negative",
                          prm->n_ctx);
    if (prm->weights < WB_WEIGHTS_AS_STORED || prm->weights > WB_WEIGHTS_Q4_0)
        return wb_err_set(err, WB_ERR_ARG, "wb_model_load: params.weights = %d is not one of the WB_WEIGHTS_ values", prm->weights);
    return WB_OK;
}

wb_status wb_model_load_gguf_memory(const void *buf, size_t len, const char *name,
                                    const wb_model_params *params, wb_model **out, wb_err *err) {
    if (!out || !buf || !name) return wb_err_set(err, WB_ERR_ARG, "wb_model_load: NULL argument");
    *out = NULL;
    const wb_model_params prm = params ? *params : wb_model_default_params();
    wb_gguf *g = NULL;
    wb_status s = check_params(&prm, err);
    if (s || (s = wb_gguf_open_memory(buf, len, name, &g, err))) return s;
    return load_gguf(g, name, &prm, 0, out, err);
}

wb_status wb_model_load(const char *dir, wb_model **out, wb_err *err) {
    return wb_model_load_ex(dir, NULL, out, err);
}

wb_status wb_model_load_ex(const char *dir, const wb_model_params *params, wb_model **out,
                           wb_err *err) {
    if (!out || !dir) return wb_err_set(err, WB_ERR_ARG, "wb_model_load: NULL argument");
    *out = NULL;
    const wb_model_params prm = params ? *params : wb_model_default_params();
    wb_status s0 = check_params(&prm, err);
    if (s0) return s0;
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a single file: GGUF */
        wb_gguf *g = NULL;
        if ((s0 = wb_gguf_open(dir, &g, err))) return s0;
        return load_gguf(g, dir, &prm, 1, out, err);
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return wb_err_set(err, WB_ERR_IO, "%s: model directory (or .gguf file) does not exist or "
                          "is not a directory or regular file", dir);
    wb_model *m = calloc(1, sizeof *m);
    if (!m) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    wb_pool_slot_init(&m->pool);
    m->format = "safetensors";
    m->gguf_bos_id = -1;
    char *cpath = wb_path_join(dir, "config.json"), *tpath = wb_path_join(dir, "tokenizer.json");
    cJSON *root = NULL;
    wb_weights *w = NULL;
    wb_status s = WB_OK;
    size_t clen = 0;
    const char *mt = NULL;
    m->dir = strdup(dir);
    if (!cpath || !tpath || !m->dir) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    if ((s = wb_read_file(cpath, CONFIG_MAX_BYTES, &m->config_json, &clen, err)) ||
        (s = parse_root(m->config_json, clen, cpath, &root, err)) ||
        (s = pick_family(root, cpath, &m->family, &mt, err)))
        goto done;
    snprintf(m->model_type, sizeof m->model_type, "%s", mt);
    if ((s = m->family->parse_config(root, mt, cpath, &m->cfg, &m->hparams, err))) {
        m->family = NULL; /* nothing loaded for it to free */
        goto done;
    }
    /* the default context of sessions (and the KV cache they allocate): what the caller asked
     * for, at most what the model allows */
    const int32_t want = prm.n_ctx > 0 ? prm.n_ctx : 4096, most = m->family->max_ctx(&m->cfg);
    m->cfg.n_ctx = want < most ? want : most;
    if ((s = wb_tokenizer_load(tpath, &m->tok, err))) goto done;
    int32_t tv = wb_tokenizer_vocab_size(m->tok);
    if (tv > m->cfg.vocab_size) {
        s = wb_err_set(err, WB_ERR_FORMAT,
                       "%s: the tokenizer has %d ids but %s says vocab_size = %d", tpath, tv,
                       cpath, m->cfg.vocab_size);
        goto done;
    }
    if ((s = wb_weights_open(dir, &w, err))) goto done;
    wb_weights_set_quant(w, prm.weights);
    if ((s = m->family->load(m, w, &prm, err)) ||
        (s = load_generation_config(m, dir, err)))
        goto done;
    m->n_types = wb_weights_types(w, m->types, WB_MAX_TYPE_COUNTS);
done:
    wb_weights_free(w);
    cJSON_Delete(root);
    free(cpath);
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
const char *wb_model_family(const wb_model *m) { return m ? m->family->name : NULL; }
const char *wb_model_format(const wb_model *m) { return m ? m->format : NULL; }
const char *wb_model_chat_template(const wb_model *m) { return m ? m->chat_template : NULL; }

wb_status wb_model_chat_template_load(const wb_model *m, struct wb_chat_template **out,
                                      wb_err *err) {
    if (!m || !out) return wb_err_set(err, WB_ERR_ARG, "wb_model_chat_template_load: NULL argument");
    if (!m->chat_template) return wb_chat_template_load(m->dir, out, err);
    /* a GGUF's template as the tokenizer_config.json object chat.c reads, with the end token */
    cJSON *cfg = cJSON_CreateObject();
    const char *eos = m->n_eos && m->tok ? wb_tokenizer_token_str(m->tok, m->eos_ids[0]) : NULL;
    const char *bos = m->gguf_bos_id >= 0 && m->tok ? wb_tokenizer_token_str(m->tok, m->gguf_bos_id)
                                                    : NULL;
    char *text = NULL;
    if (!cfg || !cJSON_AddStringToObject(cfg, "chat_template", m->chat_template) ||
        (eos && !cJSON_AddStringToObject(cfg, "eos_token", eos)) ||
        (bos && !cJSON_AddStringToObject(cfg, "bos_token", bos)) ||
        !(text = cJSON_PrintUnformatted(cfg))) {
        cJSON_Delete(cfg);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", m->dir);
    }
    cJSON_Delete(cfg);
    wb_status s = wb_chat_template_load_json(text, strlen(text), NULL, 0, m->dir, out, err);
    free(text);
    return s;
}

int wb_model_tensor_types(const wb_model *m, int i, const char **name, int64_t *count) {
    if (!m || i < 0 || i >= m->n_types) return 0;
    if (name) *name = m->types[i].name;
    if (count) *count = m->types[i].n;
    return 1;
}

const int32_t *wb_model_eos_ids(const wb_model *m, size_t *n) {
    if (n) *n = m ? m->n_eos : 0;
    return m ? m->eos_ids : NULL;
}

int wb_model_is_eos(const wb_model *m, int32_t id) {
    for (size_t i = 0; m && i < m->n_eos; i++)
        if (m->eos_ids[i] == id) return 1;
    return 0;
}

size_t wb_model_weight_bytes(const wb_model *m) { return m ? m->family->weight_bytes(m) : 0; }
const wb_weight_store *wb_model_store(const wb_model *m) {
    return m && m->impl && m->family->store ? m->family->store(m) : NULL;
}
size_t wb_model_kv_width(const wb_model *m) { return m->family->kv_width(&m->cfg); }
int32_t wb_model_max_ctx(const wb_model *m) { return m ? m->family->max_ctx(&m->cfg) : 0; }

wb_status wb_model_check_ctx(const wb_model *m, int n_ctx, int *out, wb_err *err) {
    if (!m) return wb_err_set(err, WB_ERR_ARG, "NULL model");
    const int32_t most = wb_model_max_ctx(m);
    if (n_ctx > most)
        return wb_err_set(err, WB_ERR_RANGE,
                          "n_ctx = %d exceeds the model's maximum context of %d tokens", n_ctx,
                          (int)most);
    if (out) *out = n_ctx > 0 ? n_ctx : m->cfg.n_ctx;
    return WB_OK;
}

void wb_model_set_abort(wb_model *m, wb_abort_fn fn, void *user_data) {
    if (!m) return;
    m->abort_fn = fn;
    m->abort_data = user_data;
}

int wb_model_set_batch_variant(wb_model *m, int on) {
    if (!m) return 0;
    return atomic_exchange(&m->batch_variant, on ? 1 : 0);
}

wb_pool_slot *wb_model_pool(const wb_model *m) { return (wb_pool_slot *)&m->pool; }

int wb_model_aborted(const wb_model *m, int layer, wb_err *err) {
    if (!m->abort_fn || !m->abort_fn(m->abort_data)) return 0;
    wb_err_set(err, WB_ERR_CANCELLED, "forward cancelled by the abort callback at layer %d",
               layer);
    return 1;
}

wb_status wb_check_ids(const wb_model *m, const int32_t *ids, int n, wb_err *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return wb_err_set(err, WB_ERR_RANGE,
                              "token id %d at index %d is out of range (vocab_size %d)", ids[i], i,
                              m->cfg.vocab_size);
    return WB_OK;
}

/* ------------------------------------------------------------------------------ forward */

wb_status wb_scratch_take(wb_scratch *s, int n, const size_t *sizes, float **bufs, wb_err *err) {
    size_t need = 0;
    for (int i = 0; i < n; i++) need += (sizes[i] + 15) & ~(size_t)15;
    if (s->cap < need) {
        free(s->p);
        s->cap = 0;
        if (!(s->p = aligned_alloc(64, need * sizeof(float))))
            return wb_err_set(err, WB_ERR_NOMEM, "forward: out of memory for %zu activations",
                              need);
        s->cap = need;
    }
    float *q = s->p;
    for (int i = 0; i < n; i++) bufs[i] = q, q += (sizes[i] + 15) & ~(size_t)15;
    return WB_OK;
}

wb_status wb_forward_seqs(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                          int all_positions, wb_scratch *scratch, wb_err *err) {
    if (n_seqs < 1)
        return wb_err_set(err, WB_ERR_ARG, "forward: n_seqs = %d, need at least 1", n_seqs);
    for (int s = 0, n = 0; s < n_seqs; n += seqs[s].n, s++)
        if (seqs[s].n < 1 || seqs[s].n > INT32_MAX / 2 - n)
            return wb_err_set(err, WB_ERR_ARG, "forward: sequence %d has n = %d tokens", s,
                              seqs[s].n);
    wb_scratch local = {0};
    wb_status st = m->family->forward(m, seqs, n_seqs, logits, all_positions,
                                      scratch ? scratch : &local, err);
    free(local.p);
    return st;
}

wb_status wb_forward_decode(const wb_model *m, const wb_seq_rows *one, float *logits,
                            wb_scratch *scratch, wb_err *err) {
    /* a probed step runs the forward, whose layers the probe sees (the decode path has no hooks) */
    if (!m->family->decode || one->probe) return wb_forward_seqs(m, one, 1, logits, 0, scratch, err);
    wb_scratch local = {0};
    wb_status st = m->family->decode(m, one, logits, scratch ? scratch : &local, err);
    free(local.p);
    return st;
}

/* The "cache off" path: the whole sequence from scratch with a throwaway K/V of n rows. */
wb_status wb_model_forward(const wb_model *m, const int32_t *ids, int n, float *logits,
                           int all_positions, wb_err *err) {
    return wb_model_forward_inspect(m, ids, n, logits, all_positions, NULL, err);
}

wb_status wb_model_forward_inspect(const wb_model *m, const int32_t *ids, int n, float *logits,
                                   int all_positions, wb_probe *probe, wb_err *err) {
    if (!m || (!ids && n > 0))
        return wb_err_set(err, WB_ERR_ARG, "wb_model_forward: NULL model or ids");
    if (n < 1 || n > wb_model_max_ctx(m))
        return wb_err_set(err, WB_ERR_RANGE,
                          "wb_model_forward: %d tokens do not fit the model's maximum context of "
                          "%d tokens", n, (int)wb_model_max_ctx(m));
    wb_status s = wb_check_ids(m, ids, n, err);
    if (s) return s;
    size_t kv = (size_t)m->cfg.n_layer * (size_t)n * wb_model_kv_width(m);
    float *k = malloc(kv * sizeof *k), *v = malloc(kv * sizeof *v);
    if (!k || !v) s = wb_err_set(err, WB_ERR_NOMEM, "wb_model_forward: out of memory");
    else if (!(s = wb_probe_check(m, probe, 0, n, err))) {
        const wb_seq_rows one = {k, v, n, 0, ids, n, probe};
        s = wb_forward_seqs(m, &one, 1, logits, all_positions, NULL, err);
    }
    free(k);
    free(v);
    return s;
}
