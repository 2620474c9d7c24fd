/* tokenizer_json.c - reading and writing Hugging Face tokenizer.json (BPE model, added tokens;
 * the normalizer, pre-tokenizer and decoder sections are parsed in tokenizer_pipeline.c) with
 * errors that name the field at fault. */
#include "fileio.h"
#include "json_build.h"
#include "json_strict.h"
#include "tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* A JSON string field: NULL when absent or null; *bad set when present with another type. */
static const char *opt_string(const cJSON *obj, const char *key, int *bad) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *bad = 0;
    if (!v || cJSON_IsNull(v)) return NULL;
    if (!cJSON_IsString(v)) {
        *bad = 1;
        return NULL;
    }
    return v->valuestring;
}

/* A JSON bool field: def when absent or null; -1 when present with another type. */
static int opt_bool(const cJSON *obj, const char *key, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) return -1;
    return cJSON_IsTrue(v) ? 1 : 0;
}


#define FAIL(status, ...)                                                                  \
    do {                                                                                   \
        st = wb_err_set(err, status, __VA_ARGS__);                                         \
        goto fail;                                                                         \
    } while (0)

static wb_status parse_merge(wb_tokenizer *tok, const cJSON *m, size_t idx, const char *name,
                             wb_err *err) {
    wb_status st = WB_OK;
    const char *a, *b;
    size_t al, bl;
    char *tmp = NULL;
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring;
        const char *sp = strchr(s, ' ');
        if (!sp)
            FAIL(WB_ERR_FORMAT, "%s: model.merges[%zu] \"%.60s\" is not two tokens separated by a space",
                 name, idx, s);
        a = s;
        al = (size_t)(sp - s);
        b = sp + 1;
        bl = strlen(b);
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
               cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
        a = cJSON_GetArrayItem(m, 0)->valuestring;
        b = cJSON_GetArrayItem(m, 1)->valuestring;
        al = strlen(a);
        bl = strlen(b);
    } else {
        FAIL(WB_ERR_FORMAT, "%s: model.merges[%zu] is neither a \"a b\" string nor a [\"a\", \"b\"] pair",
             name, idx);
    }
    int32_t ia = tk_strmap_get(&tok->model_map, a, al), ib = tk_strmap_get(&tok->model_map, b, bl);
    if (ia < 0)
        FAIL(WB_ERR_FORMAT, "%s: model.merges[%zu] names token \"%.*s\" that is not in model.vocab",
             name, idx, (int)(al > 60 ? 60 : al), a);
    if (ib < 0)
        FAIL(WB_ERR_FORMAT, "%s: model.merges[%zu] names token \"%.*s\" that is not in model.vocab",
             name, idx, (int)(bl > 60 ? 60 : bl), b);
    size_t pl = tok->cont_prefix ? strlen(tok->cont_prefix) : 0;
    if (bl < pl || memcmp(b, tok->cont_prefix ? tok->cont_prefix : "", pl) != 0)
        FAIL(WB_ERR_FORMAT, "%s: model.merges[%zu]: second token lacks continuing_subword_prefix",
             name, idx);
    tmp = malloc(al + bl + 1);
    if (!tmp) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    memcpy(tmp, a, al);
    memcpy(tmp + al, b + pl, bl - pl);
    int32_t nid = tk_strmap_get(&tok->model_map, tmp, al + bl - pl);
    if (nid < 0)
        FAIL(WB_ERR_FORMAT, "%s: model.merges[%zu]: merged token \"%.*s\" is not in model.vocab", name,
             idx, (int)((al + bl - pl) > 60 ? 60 : al + bl - pl), tmp);
    tok->merges[tok->n_merges][0] = ia;
    tok->merges[tok->n_merges][1] = ib;
    /* a repeated pair keeps its last rank, as HF's HashMap collect does */
    int64_t *v = tk_u64map_put(&tok->merge_map, ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib, 0, NULL);
    if (!v) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    *v = ((int64_t)tok->n_merges << 32) | (uint32_t)nid;
    tok->n_merges++;
fail:
    free(tmp);
    return st;
}

static wb_status parse_added(wb_tokenizer *tok, const cJSON *arr, const char *name, wb_err *err) {
    wb_status st = WB_OK;
    tk_strmap seen = {0};
    int na = cJSON_GetArraySize(arr);
    tok->added = calloc((size_t)na + 1, sizeof *tok->added);
    if (!tok->added) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        if (!cJSON_IsObject(e)) FAIL(WB_ERR_FORMAT, "%s: added_tokens[%d] is not an object", name, i);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsString(c))
            FAIL(WB_ERR_FORMAT, "%s: added_tokens[%d].content is missing or not a string", name, i);
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (idv && !cJSON_IsNumber(idv))
            FAIL(WB_ERR_FORMAT, "%s: added_tokens[%d].id is not a number", name, i);
        size_t cl = strlen(c->valuestring);
        if (!tk_utf8_valid(c->valuestring, cl))
            FAIL(WB_ERR_FORMAT, "%s: added_tokens[%d].content is not valid UTF-8", name, i);
        int special = opt_bool(e, "special", 0);
        int sw = opt_bool(e, "single_word", 0), ls = opt_bool(e, "lstrip", 0),
            rs = opt_bool(e, "rstrip", 0);
        int norm = opt_bool(e, "normalized", special < 1);
        static const char *const fields[] = {"special", "single_word", "lstrip", "rstrip", "normalized"};
        int vals[] = {special, sw, ls, rs, norm};
        for (int k = 0; k < 5; k++)
            if (vals[k] < 0)
                FAIL(WB_ERR_FORMAT, "%s: added_tokens[%d].%s is not a boolean", name, i, fields[k]);
        if (cl == 0) continue; /* HF ignores empty added tokens */
        if (tk_strmap_get(&seen, c->valuestring, cl) >= 0) continue; /* HF keeps the first */
        /* HF ignores the stored id: a token already in the vocab keeps that id, a new one gets
         * the next id after the model vocabulary and previous added tokens */
        int32_t id = tk_strmap_get(&tok->model_map, c->valuestring, cl);
        if (id < 0) {
            if (tok->n_total == INT32_MAX) FAIL(WB_ERR_RANGE, "%s: added_tokens: too many", name);
            id = tok->n_total++;
            char **ns = realloc(tok->str, (size_t)tok->n_total * sizeof *ns);
            if (ns) tok->str = ns;
            uint32_t *nl = realloc(tok->str_len, (size_t)tok->n_total * sizeof *nl);
            if (nl) tok->str_len = nl;
            if (!ns || !nl) {
                tok->n_total--;
                FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
            }
            tok->str[id] = tk_strndup(c->valuestring, cl);
            tok->str_len[id] = (uint32_t)cl;
            if (!tok->str[id]) {
                tok->n_total--;
                FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
            }
        }
        tk_added *a = &tok->added[tok->n_added];
        a->content = tk_strndup(c->valuestring, cl);
        if (!a->content || tk_strmap_add(&seen, a->content, cl, id, NULL) < 0) {
            free(a->content);
            a->content = NULL;
            FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
        }
        a->len = (uint32_t)cl;
        a->id = id;
        a->special = (uint8_t)special;
        a->single_word = (uint8_t)sw;
        a->lstrip = (uint8_t)ls;
        a->rstrip = (uint8_t)rs;
        a->normalized = (uint8_t)norm;
        tok->n_added++;
    }
fail:
    tk_strmap_free(&seen);
    return st;
}

wb_status wb_tokenizer_load_json(const char *json, size_t len, const char *name,
                                 wb_tokenizer **out, wb_err *err) {
    if (!name) name = "tokenizer.json";
    if (!out || (!json && len)) return wb_err_set(err, WB_ERR_ARG, "wb_tokenizer_load_json: NULL argument");
    *out = NULL;
    wb_status st = WB_OK;
    int bad;
    wb_tokenizer *tok = NULL;
    cJSON *root = cJSON_ParseWithLength(json ? json : "", len);
    if (!root) FAIL(WB_ERR_FORMAT, "%s: not valid JSON", name);
    if (!cJSON_IsObject(root)) FAIL(WB_ERR_FORMAT, "%s: top level is not a JSON object", name);
    if ((st = wb_json_check_unique_keys(root, name, err))) goto fail;
    tok = calloc(1, sizeof *tok);
    if (!tok) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    tok->unk_id = -1;

    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (ver && !(cJSON_IsString(ver) && strcmp(ver->valuestring, "1.0") == 0))
        FAIL(WB_ERR_FORMAT, "%s: version must be \"1.0\"", name);

    /* the sections are kept as text so that save writes back what was read */
    static const char *const kept[] = {"normalizer", "pre_tokenizer", "post_processor", "decoder"};
    char **dst[] = {&tok->json_normalizer, &tok->json_pre, &tok->json_post, &tok->json_decoder};
    for (int k = 0; k < 4; k++) {
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(root, kept[k]);
        if (sec && !(*dst[k] = cJSON_PrintUnformatted(sec))) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    }
    if ((st = tk_parse_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), name, err)) != WB_OK)
        goto fail;
    if ((st = tk_parse_pre_tokenizer(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), name,
                                     err)) != WB_OK)
        goto fail;
    if ((st = tk_parse_decoder(tok, cJSON_GetObjectItemCaseSensitive(root, "decoder"), name, err)) != WB_OK)
        goto fail;
    if ((st = tk_parse_truncation(tok, cJSON_GetObjectItemCaseSensitive(root, "truncation"), name, err)) !=
            WB_OK ||
        (st = tk_parse_padding(tok, cJSON_GetObjectItemCaseSensitive(root, "padding"), name, err)) != WB_OK)
        goto fail;
    static const char *const post_keys[] = {"truncation", "padding"};
    char **post_dst[] = {&tok->json_truncation, &tok->json_padding};
    for (int k = 0; k < 2; k++) {
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(root, post_keys[k]);
        if (sec && !cJSON_IsNull(sec) && !(*post_dst[k] = cJSON_PrintUnformatted(sec)))
            FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    }
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (post && !cJSON_IsNull(post) && !cJSON_IsObject(post))
        FAIL(WB_ERR_FORMAT, "%s: post_processor is not an object", name);

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) FAIL(WB_ERR_FORMAT, "%s: model is missing or not an object", name);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (mt && !(cJSON_IsString(mt) && strcmp(mt->valuestring, "BPE") == 0))
        FAIL(WB_ERR_FORMAT, "%s: model.type \"%s\" is not supported (only BPE)", name,
             cJSON_IsString(mt) ? mt->valuestring : "?");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0.0))
        FAIL(WB_ERR_FORMAT, "%s: model.dropout must be null (dropout makes encoding random)", name);
    tok->fuse_unk = opt_bool(model, "fuse_unk", 0);
    tok->byte_fallback = opt_bool(model, "byte_fallback", 0);
    tok->ignore_merges = opt_bool(model, "ignore_merges", 0);
    if (tok->fuse_unk < 0 || tok->byte_fallback < 0 || tok->ignore_merges < 0)
        FAIL(WB_ERR_FORMAT, "%s: model.fuse_unk/byte_fallback/ignore_merges must be booleans", name);
    const char *cp = opt_string(model, "continuing_subword_prefix", &bad);
    if (bad) FAIL(WB_ERR_FORMAT, "%s: model.continuing_subword_prefix is not a string", name);
    if (cp && *cp && !(tok->cont_prefix = strdup(cp))) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    const char *ews = opt_string(model, "end_of_word_suffix", &bad);
    if (bad) FAIL(WB_ERR_FORMAT, "%s: model.end_of_word_suffix is not a string", name);
    if (ews && *ews && !(tok->eow_suffix = strdup(ews))) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);

    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) FAIL(WB_ERR_FORMAT, "%s: model.vocab is missing or not an object", name);
    int nv = cJSON_GetArraySize(vocab);
    tok->n_model = tok->n_total = nv;
    tok->str = calloc((size_t)nv + 1, sizeof *tok->str);
    tok->str_len = calloc((size_t)nv + 1, sizeof *tok->str_len);
    if (!tok->str || !tok->str_len) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    for (const cJSON *e = vocab->child; e; e = e->next) {
        const char *k = e->string ? e->string : "";
        size_t kl = strlen(k);
        if (!cJSON_IsNumber(e))
            FAIL(WB_ERR_FORMAT, "%s: model.vocab[\"%.60s\"] is not an integer id", name, k);
        /* range first: converting a huge double to an integer is undefined */
        if (!(e->valuedouble >= 0 && e->valuedouble < nv))
            FAIL(WB_ERR_FORMAT, "%s: model.vocab[\"%.60s\"] = %g is out of range [0, %d)", name, k,
                 e->valuedouble, nv);
        if (e->valuedouble != (double)(int32_t)e->valuedouble)
            FAIL(WB_ERR_FORMAT, "%s: model.vocab[\"%.60s\"] is not an integer id", name, k);
        int32_t id = (int32_t)e->valuedouble;
        if (!tk_utf8_valid(k, kl)) FAIL(WB_ERR_FORMAT, "%s: model.vocab key for id %d is not valid UTF-8", name, id);
        if (tok->str[id])
            FAIL(WB_ERR_FORMAT, "%s: model.vocab: id %d is used by both \"%.60s\" and \"%.60s\"", name,
                 id, tok->str[id], k);
        if (!(tok->str[id] = tk_strndup(k, kl))) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
        tok->str_len[id] = (uint32_t)kl;
        int32_t old;
        int r = tk_strmap_add(&tok->model_map, tok->str[id], kl, id, &old);
        if (r < 0) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
        if (r == 0) FAIL(WB_ERR_FORMAT, "%s: model.vocab: token \"%.60s\" appears twice", name, k);
    }

    const char *unk = opt_string(model, "unk_token", &bad);
    if (bad) FAIL(WB_ERR_FORMAT, "%s: model.unk_token is not a string", name);
    if (unk) {
        tok->unk_id = tk_strmap_get(&tok->model_map, unk, strlen(unk));
        if (tok->unk_id < 0)
            FAIL(WB_ERR_FORMAT, "%s: model.unk_token \"%.60s\" is not in model.vocab", name, unk);
        if (!(tok->unk_token = strdup(unk))) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    }

    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (merges && !cJSON_IsArray(merges) && !cJSON_IsNull(merges))
        FAIL(WB_ERR_FORMAT, "%s: model.merges is not an array", name);
    int nm = merges ? cJSON_GetArraySize(merges) : 0;
    tok->merges = malloc(((size_t)nm + 1) * sizeof *tok->merges);
    if (!tok->merges) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    size_t mi = 0;
    for (const cJSON *m = merges ? merges->child : NULL; m; m = m->next, mi++)
        if ((st = parse_merge(tok, m, mi, name, err)) != WB_OK) goto fail;

    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added))
        FAIL(WB_ERR_FORMAT, "%s: added_tokens is not an array", name);
    if (cJSON_IsArray(added) && (st = parse_added(tok, added, name, err)) != WB_OK) goto fail;

    if ((st = tk_finish(tok, name, err)) != WB_OK) goto fail;
    cJSON_Delete(root);
    *out = tok;
    return WB_OK;
fail:
    cJSON_Delete(root);
    wb_tokenizer_free(tok);
    return st;
}

/* Real tokenizer.json files reach ~10 MB (Llama-3, Qwen2); a cap keeps /dev/zero out. */
#define TOKENIZER_MAX_BYTES ((size_t)256 << 20)

wb_status wb_tokenizer_load(const char *path, wb_tokenizer **out, wb_err *err) {
    if (!path || !out) return wb_err_set(err, WB_ERR_ARG, "wb_tokenizer_load: NULL argument");
    *out = NULL;
    char *buf;
    size_t n;
    wb_status st = wb_read_file(path, TOKENIZER_MAX_BYTES, &buf, &n, err);
    if (st != WB_OK) return st;
    st = wb_tokenizer_load_json(buf, n, path, out, err);
    free(buf);
    return st;
}

/* ---- saving -------------------------------------------------------------------------------- */

static cJSON *str_or_null(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

/* root[key]: the section as the file had it (kept as text), else the ByteLevel step the
 * tokenizer's flags describe */
static void section(jsb *b, cJSON *root, const char *key, const char *kept, const wb_tokenizer *tok) {
    if (kept) {
        jsb_put(b, root, key, cJSON_Parse(kept));
        return;
    }
    cJSON *o = jsb_obj(b, root, key);
    jsb_str(b, o, "type", "ByteLevel");
    jsb_bool(b, o, "add_prefix_space", tok->add_prefix_space);
    jsb_bool(b, o, "trim_offsets", tok->trim_offsets);
    jsb_bool(b, o, "use_regex", tok->use_regex);
}

/* The tokenizer.json tree, NULL when out of memory: a tree short of a field would be written as a
 * different tokenizer. */
static cJSON *build_json(const wb_tokenizer *tok) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    jsb_str(b, root, "version", "1.0");
    if (tok->json_truncation) jsb_put(b, root, "truncation", cJSON_Parse(tok->json_truncation));
    else jsb_null(b, root, "truncation");
    if (tok->json_padding) jsb_put(b, root, "padding", cJSON_Parse(tok->json_padding));
    else jsb_null(b, root, "padding");
    cJSON *added = jsb_arr(b, root, "added_tokens");
    /* HF writes added tokens ordered by id; reloading assigns new ids in that same order */
    int32_t *order = malloc((tok->n_added + 1) * sizeof *order);
    if (!order) goto fail;
    for (size_t i = 0; i < tok->n_added; i++) order[i] = (int32_t)i;
    for (size_t i = 1; i < tok->n_added; i++)
        for (size_t j = i; j > 0 && tok->added[order[j - 1]].id > tok->added[order[j]].id; j--) {
            int32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (size_t i = 0; added && i < tok->n_added; i++) {
        const tk_added *a = &tok->added[order[i]];
        cJSON *o = jsb_push(b, added, cJSON_CreateObject());
        if (!o) break;
        jsb_num(b, o, "id", a->id);
        jsb_str(b, o, "content", a->content);
        jsb_bool(b, o, "single_word", a->single_word);
        jsb_bool(b, o, "lstrip", a->lstrip);
        jsb_bool(b, o, "rstrip", a->rstrip);
        jsb_bool(b, o, "normalized", a->normalized);
        jsb_bool(b, o, "special", a->special);
    }
    free(order);
    if (tok->json_normalizer) jsb_put(b, root, "normalizer", cJSON_Parse(tok->json_normalizer));
    else jsb_null(b, root, "normalizer");
    section(b, root, "pre_tokenizer", tok->json_pre, tok);
    section(b, root, "post_processor", tok->json_post, tok);
    section(b, root, "decoder", tok->json_decoder, tok);
    cJSON *model = jsb_obj(b, root, "model");
    if (!model) goto fail;
    jsb_str(b, model, "type", "BPE");
    jsb_null(b, model, "dropout");
    jsb_put(b, model, "unk_token", str_or_null(tok->unk_token));
    jsb_put(b, model, "continuing_subword_prefix", str_or_null(tok->cont_prefix));
    jsb_put(b, model, "end_of_word_suffix", str_or_null(tok->eow_suffix));
    jsb_bool(b, model, "fuse_unk", tok->fuse_unk);
    jsb_bool(b, model, "byte_fallback", tok->byte_fallback);
    jsb_bool(b, model, "ignore_merges", tok->ignore_merges);
    cJSON *vocab = jsb_obj(b, model, "vocab");
    cJSON *merges = jsb_arr(b, model, "merges");
    if (!vocab || !merges) goto fail;
    for (int32_t i = 0; i < tok->n_model; i++) {
        cJSON *v = cJSON_CreateNumber(i);
        if (!v) goto fail;
        jsb_put(b, vocab, tok->str[i], v);
    }
    /* the ["a", "b"] form is unambiguous even when a token contains a space */
    for (size_t i = 0; i < tok->n_merges; i++) {
        const char *pair[2] = {tok->str[tok->merges[i][0]], tok->str[tok->merges[i][1]]};
        cJSON *m = cJSON_CreateStringArray(pair, 2);
        if (!m) goto fail;
        jsb_push(b, merges, m);
    }
    return jsb_done(b, root);
fail:
    cJSON_Delete(root);
    return NULL;
}

wb_status wb_tokenizer_save(const wb_tokenizer *tok, const char *path, wb_err *err) {
    if (!tok || !path) return wb_err_set(err, WB_ERR_ARG, "wb_tokenizer_save: NULL argument");
    cJSON *root = build_json(tok);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory while building JSON", path);
    /* fileio's atomic writer: temp file in the same directory, checked writes, fsync, rename */
    wb_atomic_file *af = NULL;
    wb_status st = wb_atomic_begin(path, &af, err);
    if (st == WB_OK) st = wb_atomic_write(af, text, strlen(text), err);
    if (st == WB_OK) st = wb_atomic_write(af, "\n", 1, err);
    if (st == WB_OK) st = wb_atomic_commit(af, err);
    else wb_atomic_abort(af);
    free(text);
    return st;
}
