/* tokenizer_post.c - tokenizer.json's `truncation` and `padding`: parsing them and applying them
 * to one encoding, in the order and with the arithmetic of Hugging Face tokenizers'
 * `TokenizerImpl::post_process` (truncate, post-processor, pad) for a single sequence encoded
 * without special tokens. */
#include "tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(status, ...)                                                                  \
    do {                                                                                   \
        return wb_err_set(err, status, __VA_ARGS__);                                       \
    } while (0)

/* A required non-negative integer (HF's usize / u32 fields); `what` names it in errors. */
static wb_status get_count(const cJSON *obj, const char *key, int required, double max, double *out,
                           const char *name, const char *what, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || (cJSON_IsNull(v) && !required)) {
        if (required) FAIL(WB_ERR_FORMAT, "%s: %s.%s is missing", name, what, key);
        *out = -1;
        return WB_OK;
    }
    /* floor, not an integer cast: converting a double beyond int64 is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble != floor(v->valuedouble))
        FAIL(WB_ERR_FORMAT, "%s: %s.%s must be a non-negative integer", name, what, key);
    if (v->valuedouble > max)
        FAIL(WB_ERR_FORMAT, "%s: %s.%s = %.0f is above the limit %.0f", name, what, key, v->valuedouble, max);
    *out = v->valuedouble;
    return WB_OK;
}

/* An enum written as its Rust variant name ("Left", "LongestFirst"); returns the index in
 * `names`, or -1 after setting err. */
static int get_enum(const cJSON *obj, const char *key, const char *const *names, int n, int def,
                    const char *name, const char *what, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (def >= 0) return def;
        wb_err_set(err, WB_ERR_FORMAT, "%s: %s.%s is missing", name, what, key);
        return -1;
    }
    if (cJSON_IsString(v))
        for (int i = 0; i < n; i++)
            if (strcmp(v->valuestring, names[i]) == 0) return i;
    wb_err_set(err, WB_ERR_FORMAT, "%s: %s.%s must be one of %s%s%s%s%s", name, what, key, names[0],
               n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "", n > 2 ? names[2] : "");
    return -1;
}

wb_status tk_parse_truncation(wb_tokenizer *tok, const cJSON *j, const char *name, wb_err *err) {
    tk_trunc *t = &tok->trunc;
    memset(t, 0, sizeof *t);
    if (!j || cJSON_IsNull(j)) return WB_OK;
    if (!cJSON_IsObject(j)) FAIL(WB_ERR_FORMAT, "%s: truncation is not an object or null", name);
    static const char *const dirs[] = {"Left", "Right"};
    static const char *const strategies[] = {"LongestFirst", "OnlyFirst", "OnlySecond"};
    double max_length, stride;
    wb_status st;
    if ((st = get_count(j, "max_length", 1, (double)SIZE_MAX, &max_length, name, "truncation", err)) ||
        (st = get_count(j, "stride", 1, (double)SIZE_MAX, &stride, name, "truncation", err)))
        return st;
    int dir = get_enum(j, "direction", dirs, 2, 1, name, "truncation", err); /* serde default Right */
    if (dir < 0) return WB_ERR_FORMAT;
    int strategy = get_enum(j, "strategy", strategies, 3, -1, name, "truncation", err);
    if (strategy < 0) return WB_ERR_FORMAT;
    t->on = 1;
    t->max_length = max_length >= (double)SIZE_MAX ? SIZE_MAX : (size_t)max_length;
    t->stride = stride >= (double)SIZE_MAX ? SIZE_MAX : (size_t)stride;
    t->left = dir == 0;
    t->strategy = strategy;
    return WB_OK;
}

wb_status tk_parse_padding(wb_tokenizer *tok, const cJSON *j, const char *name, wb_err *err) {
    tk_pad *p = &tok->pad;
    memset(p, 0, sizeof *p);
    if (!j || cJSON_IsNull(j)) return WB_OK;
    if (!cJSON_IsObject(j)) FAIL(WB_ERR_FORMAT, "%s: padding is not an object or null", name);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "strategy");
    wb_status st;
    double v;
    if (!s) FAIL(WB_ERR_FORMAT, "%s: padding.strategy is missing", name);
    if (cJSON_IsString(s) && strcmp(s->valuestring, "BatchLongest") == 0) {
        p->fixed = 0;
    } else if (cJSON_IsObject(s) && s->child && !s->child->next && s->child->string &&
               strcmp(s->child->string, "Fixed") == 0) {
        if ((st = get_count(s, "Fixed", 1, TK_PAD_MAX, &v, name, "padding.strategy", err))) return st;
        p->fixed = 1;
        p->length = (size_t)v;
    } else {
        FAIL(WB_ERR_FORMAT, "%s: padding.strategy must be \"BatchLongest\" or {\"Fixed\": N}", name);
    }
    static const char *const dirs[] = {"Left", "Right"};
    int dir = get_enum(j, "direction", dirs, 2, -1, name, "padding", err);
    if (dir < 0) return WB_ERR_FORMAT;
    p->left = dir == 0;
    if ((st = get_count(j, "pad_to_multiple_of", 0, TK_PAD_MAX, &v, name, "padding", err))) return st;
    p->multiple = v < 0 ? 0 : (size_t)v; /* null and 0 both mean none, as in HF */
    /* HF's pad_id is a u32; ids here are int32 */
    if ((st = get_count(j, "pad_id", 1, (double)INT32_MAX, &v, name, "padding", err))) return st;
    p->id = (int32_t)v;
    if ((st = get_count(j, "pad_type_id", 1, (double)UINT32_MAX, &v, name, "padding", err))) return st;
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "pad_token");
    if (!cJSON_IsString(pt)) FAIL(WB_ERR_FORMAT, "%s: padding.pad_token is missing or not a string", name);
    if (!(p->token = strdup(pt->valuestring))) FAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    p->on = 1;
    return WB_OK;
}

void tk_post_free(wb_tokenizer *tok) {
    free(tok->pad.token);
    tok->pad.token = NULL;
}

wb_status tk_post_apply(const wb_tokenizer *tok, int truncate, int pad, int32_t **ids, size_t *n,
                        uint8_t **mask, wb_err *err) {
    size_t len = *n, start = 0;
    const tk_trunc *t = &tok->trunc;
    if (truncate && t->on && len > t->max_length) {
        /* truncate_encodings with no pair: LongestFirst and OnlyFirst keep max_length ids,
         * OnlySecond has no second sequence to cut. Encoding::truncate asserts stride < max_len
         * (HF aborts the process there); a zero max_length empties the encoding first. */
        if (t->max_length > 0 && t->strategy == TK_TRUNC_ONLY_SECOND)
            return wb_err_set(err, WB_ERR_ARG,
                              "wb_tokenizer_encode: tokenizer.json's truncation strategy OnlySecond needs a "
                              "second sequence (%zu ids exceed max_length %zu); encode with truncation off",
                              len, t->max_length);
        if (t->max_length > 0 && t->stride >= t->max_length)
            return wb_err_set(err, WB_ERR_ARG,
                              "wb_tokenizer_encode: tokenizer.json's truncation stride %zu must be less than "
                              "max_length %zu",
                              t->stride, t->max_length);
        if (t->left) start = len - t->max_length;
        len = t->max_length;
    }
    size_t target = len, n_pad = 0;
    const tk_pad *p = &tok->pad;
    if (pad && p->on) {
        /* pad_encodings: Fixed(size) or the encoding's own length (BatchLongest of a batch of
         * one), rounded up to pad_to_multiple_of; never shortens */
        if (p->fixed) target = p->length;
        if (p->multiple > 0 && target % p->multiple)
            target += p->multiple - target % p->multiple;
        if (target > len) n_pad = target - len;
    }
    size_t total = len + n_pad;
    int32_t *out = *ids;
    if (n_pad || start) {
        if (!(out = malloc((total ? total : 1) * sizeof *out)))
            return wb_err_set(err, WB_ERR_NOMEM, "wb_tokenizer_encode: out of memory");
        size_t lead = p->left ? n_pad : 0;
        for (size_t i = 0; i < n_pad; i++) out[(p->left ? 0 : len) + i] = p->id;
        if (len) memcpy(out + lead, *ids + start, len * sizeof *out);
        free(*ids);
        *ids = out;
    }
    if (mask) {
        uint8_t *m = malloc(total ? total : 1);
        if (!m) return wb_err_set(err, WB_ERR_NOMEM, "wb_tokenizer_encode: out of memory");
        size_t lead = p->left ? n_pad : 0;
        memset(m, 0, total);
        memset(m + lead, 1, len);
        *mask = m;
    }
    *n = total;
    return WB_OK;
}
