/* chat.c - a model directory's chat template: found, parsed once with the Jinja engine, and
 * rendered with the variables transformers passes. Which text is the template follows
 * transformers: chat_template.jinja beside tokenizer_config.json wins over the config's
 * chat_template, which is a string or a list of {name, template}; with a list, a render picks
 * the caller's name, else "tool_use" when tools are given and it exists, else "default". */
#include "wb_chat.h"

#include "fileio.h"
#include "json_strict.h"
#include "wb_generation_config.h"
#include "wb_jinja.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_BYTES (16u << 20)
#define TEMPLATE_MAX_BYTES (4u << 20)

struct wb_chat_template {
    char *source; /* file the template text came from */
    size_t n_tpl;
    char **names;
    wb_jinja **tpls;
    cJSON *special; /* the special-token variables, as an object */
    char *eos_token, *bos_token;
    int add_bos;
    wb_generation_config *gen;
};

static char *dup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

void wb_chat_template_free(wb_chat_template *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n_tpl; i++) {
        free(t->names ? t->names[i] : NULL);
        wb_jinja_free(t->tpls ? t->tpls[i] : NULL);
    }
    free(t->names);
    free(t->tpls);
    cJSON_Delete(t->special);
    free(t->source);
    free(t->eos_token);
    free(t->bos_token);
    wb_generation_config_free(t->gen);
    free(t);
}

/* A token field of tokenizer_config.json: a string or an AddedToken object with "content". */
static const char *token_text(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static wb_status add_template(wb_chat_template *t, const char *name, const char *text, size_t len,
                              const char *where, wb_err *err) {
    char label[1200];
    if (strcmp(name, "default") == 0 && t->n_tpl == 0) snprintf(label, sizeof label, "%s", where);
    else snprintf(label, sizeof label, "%s[%s]", where, name);
    wb_jinja *j = NULL;
    wb_status st = wb_jinja_parse(text, len, label, &j, err);
    if (st != WB_OK) return st;
    char **nn = realloc(t->names, (t->n_tpl + 1) * sizeof *nn);
    if (nn) t->names = nn;
    wb_jinja **nt = nn ? realloc(t->tpls, (t->n_tpl + 1) * sizeof *nt) : NULL;
    if (nt) t->tpls = nt;
    char *nm = dup(name);
    if (!nn || !nt || !nm) {
        free(nm);
        wb_jinja_free(j);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", where);
    }
    t->names[t->n_tpl] = nm;
    t->tpls[t->n_tpl] = j;
    t->n_tpl++;
    return WB_OK;
}

static const char *const SPECIAL_KEYS[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                           "pad_token", "cls_token", "mask_token", NULL};

/* cfg: parsed tokenizer_config.json (may be NULL when only a .jinja file exists). */
static wb_status build(const cJSON *cfg, const char *cfg_name, const char *jinja, size_t jinja_len,
                       const char *jinja_name, const char *gen_text, size_t gen_len, const char *gen_name,
                       wb_chat_template **out, wb_err *err) {
    wb_chat_template *t = calloc(1, sizeof *t);
    if (!t) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", cfg_name);
    t->add_bos = -1;
    wb_status st = WB_OK;
    if (!(t->special = cJSON_CreateObject())) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", cfg_name);
        goto done;
    }
    if (cfg) {
        for (int i = 0; SPECIAL_KEYS[i]; i++) {
            const char *s = token_text(cJSON_GetObjectItemCaseSensitive(cfg, SPECIAL_KEYS[i]));
            if (s && !cJSON_AddStringToObject(t->special, SPECIAL_KEYS[i], s)) {
                st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", cfg_name);
                goto done;
            }
        }
        const cJSON *extra = cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens");
        if (cJSON_IsArray(extra)) {
            cJSON *list = cJSON_AddArrayToObject(t->special, "additional_special_tokens");
            for (const cJSON *e = extra ? extra->child : NULL; list && e; e = e->next) {
                const char *s = token_text(e);
                if (s) cJSON_AddItemToArray(list, cJSON_CreateString(s));
            }
        }
        t->eos_token = dup(token_text(cJSON_GetObjectItemCaseSensitive(cfg, "eos_token")));
        t->bos_token = dup(token_text(cJSON_GetObjectItemCaseSensitive(cfg, "bos_token")));
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        if (cJSON_IsBool(ab)) t->add_bos = cJSON_IsTrue(ab);
    }
    if (jinja) {
        t->source = dup(jinja_name);
        st = add_template(t, "default", jinja, jinja_len, jinja_name, err);
    } else {
        const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
        t->source = dup(cfg_name);
        if (cJSON_IsString(ct)) {
            st = add_template(t, "default", ct->valuestring, strlen(ct->valuestring), cfg_name, err);
        } else if (cJSON_IsArray(ct)) {
            size_t i = 0;
            for (const cJSON *e = ct->child; e && st == WB_OK; e = e->next, i++) {
                const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
                const cJSON *tt = cJSON_GetObjectItemCaseSensitive(e, "template");
                if (!cJSON_IsString(nm) || !cJSON_IsString(tt)) {
                    st = wb_err_set(err, WB_ERR_FORMAT,
                                    "%s: chat_template[%zu] must be an object with string \"name\" and \"template\"",
                                    cfg_name, i);
                    break;
                }
                for (size_t k = 0; k < t->n_tpl; k++)
                    if (strcmp(t->names[k], nm->valuestring) == 0)
                        st = wb_err_set(err, WB_ERR_FORMAT, "%s: chat_template names \"%s\" twice", cfg_name,
                                        nm->valuestring);
                if (st == WB_OK) st = add_template(t, nm->valuestring, tt->valuestring, strlen(tt->valuestring), cfg_name, err);
            }
            if (st == WB_OK && t->n_tpl == 0)
                st = wb_err_set(err, WB_ERR_FORMAT, "%s: chat_template is an empty list", cfg_name);
        } else if (ct && !cJSON_IsNull(ct)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: chat_template is neither a string nor a list", cfg_name);
        } else {
            st = wb_err_set(err, WB_ERR_NOTFOUND,
                            "%s has no chat_template and there is no chat_template.jinja beside it (a base "
                            "model): use model:generate with a plain prompt",
                            cfg_name);
        }
    }
    if (st == WB_OK && !t->source) st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", cfg_name);
    if (st == WB_OK && gen_text)
        st = wb_generation_config_parse(gen_text, gen_len, gen_name ? gen_name : "generation_config.json", &t->gen, err);
done:
    if (st != WB_OK) {
        wb_chat_template_free(t);
        return st;
    }
    *out = t;
    return WB_OK;
}

wb_status wb_chat_template_load_json(const char *tokenizer_config, size_t len, const char *generation_config,
                                     size_t gen_len, const char *name, wb_chat_template **out, wb_err *err) {
    if (!out || (!tokenizer_config && len))
        return wb_err_set(err, WB_ERR_ARG, "wb_chat_template_load_json: NULL argument");
    *out = NULL;
    if (!name) name = "tokenizer_config.json";
    cJSON *cfg = NULL;
    wb_status ps = wb_json_parse_strict(tokenizer_config ? tokenizer_config : "", len, name, &cfg, err);
    if (ps != WB_OK) return ps;
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", name);
    }
    wb_status st = build(cfg, name, NULL, 0, NULL, generation_config, gen_len, "generation_config.json", out, err);
    cJSON_Delete(cfg);
    return st;
}

wb_status wb_chat_template_load(const char *dir, wb_chat_template **out, wb_err *err) {
    if (!dir || !out) return wb_err_set(err, WB_ERR_ARG, "wb_chat_template_load: NULL argument");
    *out = NULL;
    char *cfg_path = wb_path_join(dir, "tokenizer_config.json");
    char *jin_path = wb_path_join(dir, "chat_template.jinja");
    char *gen_path = wb_path_join(dir, "generation_config.json");
    char *cfg_text = NULL, *jin = NULL, *gen = NULL;
    size_t cn = 0, jn = 0, gn = 0;
    cJSON *cfg = NULL;
    wb_status st = WB_OK;
    if (!cfg_path || !jin_path || !gen_path) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    if ((st = wb_read_file_optional(cfg_path, CONFIG_MAX_BYTES, &cfg_text, &cn, err)) != WB_OK ||
        (st = wb_read_file_optional(jin_path, TEMPLATE_MAX_BYTES, &jin, &jn, err)) != WB_OK ||
        (st = wb_read_file_optional(gen_path, CONFIG_MAX_BYTES, &gen, &gn, err)) != WB_OK)
        goto done;
    if (!cfg_text && !jin) {
        st = wb_err_set(err, WB_ERR_NOTFOUND,
                        "%s has no chat template (a base model): use model:generate with a plain prompt",
                        dir);
        goto done;
    }
    if (cfg_text) {
        if ((st = wb_json_parse_strict(cfg_text, cn, cfg_path, &cfg, err)) != WB_OK) goto done;
        if (!cJSON_IsObject(cfg)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", cfg_path);
            goto done;
        }
    }
    st = build(cfg, cfg_path, jin, jn, jin_path, gen, gn, gen_path, out, err);
done:
    cJSON_Delete(cfg);
    free(cfg_text);
    free(jin);
    free(gen);
    free(cfg_path);
    free(jin_path);
    free(gen_path);
    return st;
}

/* ---- rendering -------------------------------------------------------------------------------- */

wb_chat_render_params wb_chat_render_default_params(void) {
    wb_chat_render_params p = {0};
    p.now = -1;
    return p;
}

static const wb_jinja *pick(const wb_chat_template *t, const char *name, int tools, wb_err *err) {
    if (name) {
        for (size_t i = 0; i < t->n_tpl; i++)
            if (strcmp(t->names[i], name) == 0) return t->tpls[i];
        wb_err_set(err, WB_ERR_NOTFOUND, "%s: no chat template named \"%s\"", t->source, name);
        return NULL;
    }
    if (tools)
        for (size_t i = 0; i < t->n_tpl; i++)
            if (strcmp(t->names[i], "tool_use") == 0) return t->tpls[i];
    for (size_t i = 0; i < t->n_tpl; i++)
        if (strcmp(t->names[i], "default") == 0) return t->tpls[i];
    if (t->n_tpl == 1) return t->tpls[0];
    wb_err_set(err, WB_ERR_NOTFOUND, "%s: chat_template has no \"default\" template; name one of the %zu", t->source,
               t->n_tpl);
    return NULL;
}

static cJSON *parse_part(const char *text, size_t len, const char *what, int want_array, wb_err *err) {
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j || (want_array ? !cJSON_IsArray(j) : !cJSON_IsObject(j))) {
        cJSON_Delete(j);
        wb_err_set(err, WB_ERR_ARG, "wb_chat_render: %s is not a JSON %s", what, want_array ? "list" : "object");
        return NULL;
    }
    return j;
}

/* Adds item to obj under key, taking it; 0 (and item deleted) when item is NULL or the key
 * cannot be copied. */
static int add_owned(cJSON *obj, const char *key, cJSON *item) {
    if (item && cJSON_AddItemToObject(obj, key, item)) return 1;
    cJSON_Delete(item);
    return 0;
}

/* Render with messages already parsed (owned by the caller). */
static wb_status render_tree(const wb_chat_template *t, cJSON *messages, const wb_chat_render_params *p, char **text,
                             size_t *len, wb_err *err) {
    cJSON *tools = NULL, *docs = NULL, *extra = NULL, *vars = NULL;
    wb_status st = WB_OK;
    if (p->tools_json && !(tools = parse_part(p->tools_json, strlen(p->tools_json), "tools", 1, err))) return WB_ERR_ARG;
    if (p->documents_json && !(docs = parse_part(p->documents_json, strlen(p->documents_json), "documents", 1, err))) {
        cJSON_Delete(tools);
        return WB_ERR_ARG;
    }
    if (p->extra_json && !(extra = parse_part(p->extra_json, strlen(p->extra_json), "the extra variables", 0, err))) {
        cJSON_Delete(tools);
        cJSON_Delete(docs);
        return WB_ERR_ARG;
    }
    const wb_jinja *j = pick(t, p->template_name, tools != NULL, err);
    if (!j) {
        st = err ? err->status : WB_ERR_NOTFOUND;
        goto done;
    }
    /* The variables in transformers' order: messages, tools, documents, add_generation_prompt,
     * then the special tokens, then the caller's extras (which may override them). The messages
     * tree and the extras are borrowed by reference or copied, never moved. */
    vars = cJSON_CreateObject();
    if (!vars) {
        st = wb_err_set(err, WB_ERR_NOMEM, "wb_chat_render: out of memory");
        goto done;
    }
    /* every addition checked: a variable lost to a failed allocation would render a different
     * prompt, not an error */
    /* references made here, not by cJSON_AddItemReferenceToObject, which leaks its reference
     * when the key cannot be copied (cJSON 1.7.15) */
    int ok = add_owned(vars, "messages", cJSON_CreateArrayReference(messages->child));
    ok = add_owned(vars, "tools", tools ? tools : cJSON_CreateNull()) && ok; /* taken either way */
    tools = NULL;
    ok = add_owned(vars, "documents", docs ? docs : cJSON_CreateNull()) && ok;
    docs = NULL;
    ok = ok && add_owned(vars, "add_generation_prompt", cJSON_CreateBool(p->add_generation_prompt != 0));
    for (const cJSON *s = t->special->child; ok && s; s = s->next) {
        if (extra && cJSON_GetObjectItemCaseSensitive(extra, s->string)) continue;
        ok = add_owned(vars, s->string, cJSON_Duplicate(s, 1));
    }
    if (extra)
        for (cJSON *e = extra->child; ok && e; e = e->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(vars, e->string);
            ok = add_owned(vars, e->string, cJSON_Duplicate(e, 1));
        }
    if (!ok) {
        st = wb_err_set(err, WB_ERR_NOMEM, "wb_chat_render: out of memory");
        goto done;
    }
    wb_jinja_params jp = wb_jinja_default_params();
    jp.now = p->now;
    st = wb_jinja_render(j, vars, &jp, text, len, err);
done:
    cJSON_Delete(vars);
    cJSON_Delete(tools);
    cJSON_Delete(docs);
    cJSON_Delete(extra);
    return st;
}

wb_status wb_chat_render_json(const wb_chat_template *t, const char *messages_json, size_t messages_len,
                              const wb_chat_render_params *params, char **text, size_t *len, wb_err *err) {
    if (!t || !text || !len || !messages_json) return wb_err_set(err, WB_ERR_ARG, "wb_chat_render_json: NULL argument");
    *text = NULL;
    *len = 0;
    wb_chat_render_params p = params ? *params : wb_chat_render_default_params();
    cJSON *m = parse_part(messages_json, messages_len, "messages", 1, err);
    if (!m) return WB_ERR_ARG;
    wb_status st = render_tree(t, m, &p, text, len, err);
    cJSON_Delete(m);
    return st;
}

wb_status wb_chat_render(const wb_chat_template *t, const wb_chat_message *messages, size_t n, int add_generation_prompt,
                         char **text, size_t *len, wb_err *err) {
    if (!t || !text || !len || (!messages && n)) return wb_err_set(err, WB_ERR_ARG, "wb_chat_render: NULL argument");
    *text = NULL;
    *len = 0;
    if (n == 0) return wb_err_set(err, WB_ERR_ARG, "wb_chat_render: no messages");
    cJSON *m = cJSON_CreateArray();
    if (!m) return wb_err_set(err, WB_ERR_NOMEM, "wb_chat_render: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!messages[i].role || !messages[i].content) {
            cJSON_Delete(m);
            return wb_err_set(err, WB_ERR_ARG, "wb_chat_render: messages[%zu] lacks a role or content", i);
        }
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "role", messages[i].role) ||
            !cJSON_AddStringToObject(o, "content", messages[i].content)) {
            cJSON_Delete(o);
            cJSON_Delete(m);
            return wb_err_set(err, WB_ERR_NOMEM, "wb_chat_render: out of memory");
        }
        cJSON_AddItemToArray(m, o);
    }
    wb_chat_render_params p = wb_chat_render_default_params();
    p.add_generation_prompt = add_generation_prompt;
    wb_status st = render_tree(t, m, &p, text, len, err);
    cJSON_Delete(m);
    return st;
}

/* ---- accessors --------------------------------------------------------------------------------- */

size_t wb_chat_template_count(const wb_chat_template *t) { return t ? t->n_tpl : 0; }
const char *wb_chat_template_name(const wb_chat_template *t, size_t i) {
    return t && i < t->n_tpl ? t->names[i] : NULL;
}
const char *wb_chat_source(const wb_chat_template *t) { return t ? t->source : NULL; }

const int32_t *wb_chat_eos_ids(const wb_chat_template *t, size_t *n) {
    const wb_generation_defaults *d = t ? wb_generation_config_defaults(t->gen) : NULL;
    if (n) *n = d ? d->n_eos : 0;
    return d ? d->eos_ids : NULL;
}

const char *wb_chat_eos_token(const wb_chat_template *t) { return t ? t->eos_token : NULL; }
const char *wb_chat_bos_token(const wb_chat_template *t) { return t ? t->bos_token : NULL; }
int wb_chat_add_bos_token(const wb_chat_template *t) { return t ? t->add_bos : -1; }
