/* generation_config.c - generation_config.json as a model's default sampling parameters.
 * Lists are walked through cJSON's child/next links (cJSON_GetArrayItem in a loop is quadratic:
 * 20 s for 100k ids); every value is validated and an error names the file and the field. */
#include "wb_generation_config.h"

#include "fileio.h"
#include "json_strict.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GEN_CONFIG_MAX_BYTES (16u << 20)

struct wb_generation_config {
    char *name;
    wb_generation_defaults d;
    int32_t *ids;
};

void wb_generation_config_free(wb_generation_config *g) {
    if (!g) return;
    free(g->name);
    free(g->ids);
    free(g);
}

const wb_generation_defaults *wb_generation_config_defaults(const wb_generation_config *g) {
    return g ? &g->d : NULL;
}

const char *wb_generation_config_name(const wb_generation_config *g) { return g ? g->name : NULL; }

static int is_id(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 2147483647.0 &&
           v->valuedouble == floor(v->valuedouble);
}

/* A number field: absent or null is "not set"; anything else must be a finite number in range. */
static wb_status num_field(const cJSON *root, const char *key, double lo, double hi, int lo_open, int *has,
                           double *out, const char *name, const char *range, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *has = 0;
    if (!v || cJSON_IsNull(v)) return WB_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi ||
        (lo_open && v->valuedouble == lo))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: \"%s\" must be a number in %s", name, key, range);
    *has = 1;
    *out = v->valuedouble;
    return WB_OK;
}

wb_status wb_generation_config_parse(const char *json, size_t len, const char *name, wb_generation_config **out,
                                     wb_err *err) {
    if (!out || (!json && len)) return wb_err_set(err, WB_ERR_ARG, "wb_generation_config_parse: NULL argument");
    *out = NULL;
    if (!name) name = "generation_config.json";
    cJSON *root = NULL;
    wb_status ps = wb_json_parse_strict(json ? json : "", len, name, &root, err);
    if (ps != WB_OK) return ps;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", name);
    }
    wb_status st = WB_OK;
    wb_generation_config *g = calloc(1, sizeof *g);
    size_t nl = strlen(name);
    if (!g || !(g->name = malloc(nl + 1))) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    memcpy(g->name, name, nl + 1);
    wb_generation_defaults *d = &g->d;
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(root, "do_sample");
    if (ds && !cJSON_IsNull(ds)) {
        if (!cJSON_IsBool(ds)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: \"do_sample\" must be true or false", name);
            goto done;
        }
        d->has_do_sample = 1;
        d->do_sample = cJSON_IsTrue(ds);
    }
    double v;
    int has;
    if ((st = num_field(root, "temperature", 0, 1e6, 0, &d->has_temperature, &d->temperature, name, "[0, 1e6]", err)))
        goto done;
    if ((st = num_field(root, "top_p", 0, 1, 1, &d->has_top_p, &d->top_p, name, "(0, 1]", err))) goto done;
    if ((st = num_field(root, "min_p", 0, 1, 0, &d->has_min_p, &d->min_p, name, "[0, 1]", err))) goto done;
    if ((st = num_field(root, "repetition_penalty", 0, 1e6, 1, &d->has_repetition_penalty, &d->repetition_penalty,
                        name, "(0, 1e6]", err)))
        goto done;
    if ((st = num_field(root, "top_k", 0, 2147483647.0, 0, &has, &v, name, "[0, 2^31)", err))) goto done;
    if (has) {
        if (v != floor(v)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: \"top_k\" must be an integer", name);
            goto done;
        }
        d->has_top_k = 1;
        d->top_k = (int32_t)v;
    }
    if ((st = num_field(root, "max_new_tokens", 1, 2147483647.0, 0, &has, &v, name, "[1, 2^31)", err))) goto done;
    if (has) {
        if (v != floor(v)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: \"max_new_tokens\" must be an integer", name);
            goto done;
        }
        d->has_max_new_tokens = 1;
        d->max_new_tokens = (int32_t)v;
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (e && !cJSON_IsNull(e)) {
        size_t n = 0;
        if (cJSON_IsArray(e)) {
            for (const cJSON *c = e->child; c; c = c->next) n++;
        } else if (is_id(e)) {
            n = 1;
        } else {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: \"eos_token_id\" must be a token id or a list of token ids", name);
            goto done;
        }
        if (!(g->ids = malloc((n ? n : 1) * sizeof *g->ids))) {
            st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
            goto done;
        }
        if (cJSON_IsArray(e)) {
            size_t i = 0;
            for (const cJSON *c = e->child; c; c = c->next, i++) {
                if (!is_id(c)) {
                    st = wb_err_set(err, WB_ERR_FORMAT, "%s: \"eos_token_id\"[%zu] is not a token id", name, i);
                    goto done;
                }
                g->ids[i] = (int32_t)c->valuedouble;
            }
        } else {
            g->ids[0] = (int32_t)e->valuedouble;
        }
        d->eos_ids = g->ids;
        d->n_eos = n;
    }
done:
    cJSON_Delete(root);
    if (st != WB_OK) {
        wb_generation_config_free(g);
        return st;
    }
    *out = g;
    return WB_OK;
}

wb_status wb_generation_config_load(const char *dir, wb_generation_config **out, wb_err *err) {
    if (!dir || !out) return wb_err_set(err, WB_ERR_ARG, "wb_generation_config_load: NULL argument");
    *out = NULL;
    char *path = wb_path_join(dir, "generation_config.json"), *text = NULL;
    if (!path) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    wb_status st = WB_OK;
    size_t len = 0;
    if ((st = wb_read_file_optional(path, GEN_CONFIG_MAX_BYTES, &text, &len, err)) != WB_OK || !text) goto done;
    st = wb_generation_config_parse(text, len, path, out, err);
done:
    free(text);
    free(path);
    return st;
}
