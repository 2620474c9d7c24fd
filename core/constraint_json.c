/* constraint_json.c - a JSON Schema subset compiled to a regex (wb_json_schema_to_regex), which
 * the constraint engine then compiles like any other pattern. Outlines does the same; the
 * subset here is the one the triage lessons need (see wb_constraint.h). */
#include "wb_constraint.h"
#include "json_strict.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JS_MAX_DEPTH 16
#define JS_INT_LIMIT 1000000000000000LL /* 10^15: bounds beyond are rejected */

typedef struct sb {
    char *p;
    size_t n, cap;
    int oom;
} sb;

static void sb_put(sb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sb *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sb *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Bytes as regex literals (\xHH for everything but letters, digits and space). */
static void sb_lit(sb *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == ' ' || c == '_')
            sb_put(b, (const char *)&c, 1);
        else sb_fmt(b, "\\x%02x", c);
    }
}

typedef struct js {
    sb out;
    wb_json_ws ws;
    wb_err *err;
    wb_status st;
    char path[256];
} js;

static int js_fail(js *j, const char *fmt, ...) {
    if (j->st == WB_OK) {
        char msg[WB_ERR_MSG_SIZE - 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        wb_err_set(j->err, WB_ERR_ARG, "json_schema: %s: %s", j->path[0] ? j->path : "(root)",
                   msg);
        j->st = WB_ERR_ARG;
    }
    return -1;
}

/* Whitespace between structural tokens: `after_sep` marks the place after ':' or ',', where the
 * corpus style puts one space. */
static void js_ws(js *j, int after_sep) {
    if (j->ws == WB_JSON_WS_FLEXIBLE) sb_str(&j->out, "[ \\t\\n]{0,2}");
    else if (j->ws == WB_JSON_WS_SPACE && after_sep) sb_str(&j->out, " ");
}

/* ---- integers in a range ------------------------------------------------------------------ */

/* Decimal strings a and b of equal length n, a <= b: every number in between, written with
 * exactly n digits (no sign). Classic digit-by-digit splitting. */
static void range_same_len(sb *b, const char *lo, const char *hi, size_t n) {
    if (n == 0) return;
    if (lo[0] == hi[0]) {
        sb_put(b, lo, 1);
        range_same_len(b, lo + 1, hi + 1, n - 1);
        return;
    }
    int lo_rest_zero = 1, hi_rest_nine = 1;
    for (size_t i = 1; i < n; i++) {
        lo_rest_zero &= lo[i] == '0';
        hi_rest_nine &= hi[i] == '9';
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    int first = lo[0] - '0', last = hi[0] - '0', alts = 0;
    sb_str(b, "(?:");
    if (!lo_rest_zero) {
        sb_put(b, lo, 1);
        sb_str(b, "(?:");
        range_same_len(b, lo + 1, nines, n - 1);
        sb_str(b, ")");
        alts++;
        first++;
    }
    int mid_last = hi_rest_nine ? last : last - 1;
    if (first <= mid_last) {
        if (alts++) sb_str(b, "|");
        if (first == mid_last) sb_fmt(b, "%d", first);
        else sb_fmt(b, "[%d-%d]", first, mid_last);
        if (n > 1) sb_fmt(b, "[0-9]{%zu}", n - 1);
    }
    if (!hi_rest_nine) {
        if (alts++) sb_str(b, "|");
        sb_put(b, hi, 1);
        sb_str(b, "(?:");
        range_same_len(b, zeros, hi + 1, n - 1);
        sb_str(b, ")");
    }
    sb_str(b, ")");
}

/* 0 <= lo <= hi: every number in [lo, hi] without leading zeros. */
static void range_nonneg(sb *b, long long lo, long long hi) {
    sb_str(b, "(?:");
    long long p = 1;
    int d = 1, alts = 0;
    while (p <= hi / 10) p *= 10, d++; /* p = 10^(digits(hi)-1) */
    long long lower = 0, upper = 9;
    for (int k = 1; k <= d; k++) {
        if (k > 1) lower = upper + 1, upper = upper * 10 + 9;
        long long a = lo > lower ? lo : lower, z = hi < upper ? hi : upper;
        if (a > z) continue;
        char sa[24], sz[24];
        snprintf(sa, sizeof sa, "%lld", a);
        snprintf(sz, sizeof sz, "%lld", z);
        if (alts++) sb_str(b, "|");
        range_same_len(b, sa, sz, strlen(sa));
    }
    sb_str(b, ")");
}

static void range_int(sb *b, long long lo, long long hi) {
    int alts = 0;
    sb_str(b, "(?:");
    if (lo < 0) {
        long long nhi = hi < -1 ? hi : -1; /* negatives in [lo, nhi] */
        sb_str(b, "-");
        range_nonneg(b, -nhi, -lo);
        alts++;
    }
    if (hi >= 0) {
        if (alts) sb_str(b, "|");
        range_nonneg(b, lo > 0 ? lo : 0, hi);
    }
    sb_str(b, ")");
}

/* ---- schema nodes --------------------------------------------------------------------------- */

static int js_value(js *j, const cJSON *s, int depth);

static int js_bound(js *j, const cJSON *s, const char *key, long long def, long long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    *out = def;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) >= (double)JS_INT_LIMIT)
        return js_fail(j, "'%s' must be an integer with absolute value below 10^15", key);
    *out = (long long)v->valuedouble;
    return 0;
}

static const char *const k_annot[] = {"title", "description", "$schema", "$id", "examples",
                                      "default", NULL};

static int is_annot(const char *k) {
    for (const char *const *a = k_annot; *a; a++)
        if (strcmp(*a, k) == 0) return 1;
    return 0;
}

/* Unknown keywords are errors (silently ignoring one would emit documents the schema rejects),
 * except pure annotations. */
static int js_keys(js *j, const cJSON *s, const char *const *allowed) {
    for (const cJSON *it = s->child; it; it = it->next) {
        if (is_annot(it->string)) continue;
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) ok |= strcmp(*a, it->string) == 0;
        if (!ok) return js_fail(j, "keyword '%s' is not supported here", it->string);
    }
    return 0;
}

static int js_enum(js *j, const cJSON *e) {
    if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) < 1)
        return js_fail(j, "'enum' must be a non-empty array");
    sb_str(&j->out, "(?:");
    int k = 0;
    for (const cJSON *it = e->child; it; it = it->next, k++) {
        if (cJSON_IsObject(it) || cJSON_IsArray(it))
            return js_fail(j, "enum value %d: only strings, numbers, booleans and null", k + 1);
        char *txt = cJSON_PrintUnformatted(it);
        if (!txt) return js_fail(j, "out of memory");
        if (k) sb_str(&j->out, "|");
        sb_lit(&j->out, txt, strlen(txt));
        cJSON_free(txt);
    }
    sb_str(&j->out, ")");
    return 0;
}

static int js_object(js *j, const cJSON *s, int depth) {
    static const char *const keys[] = {"type", "properties", "required", "additionalProperties",
                                       NULL};
    if (js_keys(j, s, keys)) return -1;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (!cJSON_IsObject(props) || !props->child)
        return js_fail(j, "an object needs a non-empty 'properties' object");
    if (req && !cJSON_IsArray(req)) return js_fail(j, "'required' must be an array of names");
    /* Every property must be required: optional ones would need "emit or skip" choices that the
     * fixed-order subset does not model. */
    for (const cJSON *p = props->child; p && req; p = p->next) {
        int found = 0;
        for (const cJSON *r = req->child; r; r = r->next)
            found |= cJSON_IsString(r) && strcmp(r->valuestring, p->string) == 0;
        if (!found)
            return js_fail(j, "property '%s' is not in 'required' (optional properties are not "
                           "supported)", p->string);
    }
    sb_str(&j->out, "\\{");
    js_ws(j, 0);
    const cJSON *order = req ? req->child : props->child;
    size_t plen = strlen(j->path);
    for (int k = 0; order; order = order->next, k++) {
        const char *name = !req ? order->string
                           : cJSON_IsString(order) ? order->valuestring : NULL;
        if (!name) return js_fail(j, "'required' entry %d is not a string", k + 1);
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, name);
        if (!ps) return js_fail(j, "required property '%s' has no schema in 'properties'", name);
        if (k) {
            sb_str(&j->out, ",");
            js_ws(j, 1);
        }
        cJSON *key = cJSON_CreateString(name);
        char *kt = key ? cJSON_PrintUnformatted(key) : NULL;
        cJSON_Delete(key);
        if (!kt) return js_fail(j, "out of memory");
        sb_lit(&j->out, kt, strlen(kt));
        cJSON_free(kt);
        js_ws(j, 0);
        sb_str(&j->out, ":");
        js_ws(j, 1);
        snprintf(j->path + plen, sizeof j->path - plen, "%sproperties.%s", plen ? "." : "", name);
        int rc = js_value(j, ps, depth + 1);
        j->path[plen] = '\0';
        if (rc) return -1;
    }
    js_ws(j, 0);
    sb_str(&j->out, "\\}");
    return 0;
}

/* One JSON string character: printable ASCII except '"' and '\', an escape, or a well-formed
 * multi-byte character (a negated all-ASCII class: the engine's negated classes match whole
 * UTF-8 characters). */
#define JSON_CHAR                                                                               \
    "(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4}|[^\\x00-\\x7f])"

static int js_value(js *j, const cJSON *s, int depth) {
    if (depth > JS_MAX_DEPTH) return js_fail(j, "nested deeper than %d", JS_MAX_DEPTH);
    if (!cJSON_IsObject(s)) return js_fail(j, "a schema must be an object");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (e || cst) {
        static const char *const keys[] = {"enum", "const", "type", NULL};
        if (js_keys(j, s, keys)) return -1;
        if (e && cst) return js_fail(j, "give 'enum' or 'const', not both");
        if (e) return js_enum(j, e);
        cJSON *arr = cJSON_CreateArray();
        cJSON *dup = cJSON_Duplicate(cst, 1);
        if (!arr || !dup) {
            cJSON_Delete(arr);
            cJSON_Delete(dup);
            return js_fail(j, "out of memory");
        }
        cJSON_AddItemToArray(arr, dup);
        int rc = js_enum(j, arr);
        cJSON_Delete(arr);
        return rc;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!cJSON_IsString(t)) {
        if (cJSON_GetObjectItemCaseSensitive(s, "properties")) return js_object(j, s, depth);
        return js_fail(j, "needs 'type' (a string) or 'enum'");
    }
    const char *ty = t->valuestring;
    if (strcmp(ty, "object") == 0) return js_object(j, s, depth);
    if (strcmp(ty, "string") == 0) {
        static const char *const keys[] = {"type", "maxLength", "minLength", NULL};
        if (js_keys(j, s, keys)) return -1;
        long long mn, mx;
        if (js_bound(j, s, "minLength", 0, &mn) || js_bound(j, s, "maxLength", -1, &mx)) return -1;
        if (mn < 0 || mn > 1000) return js_fail(j, "'minLength' must be in [0, 1000]");
        if (mx > 1000) return js_fail(j, "'maxLength' above 1000 is not supported");
        if (mx >= 0 && mx < mn) return js_fail(j, "'maxLength' is below 'minLength'");
        sb_str(&j->out, "\"" JSON_CHAR);
        if (mx < 0) sb_fmt(&j->out, "{%lld,}", mn);
        else sb_fmt(&j->out, "{%lld,%lld}", mn, mx);
        sb_str(&j->out, "\"");
        return 0;
    }
    if (strcmp(ty, "integer") == 0) {
        static const char *const keys[] = {"type", "minimum", "maximum", NULL};
        if (js_keys(j, s, keys)) return -1;
        long long lo, hi;
        if (js_bound(j, s, "minimum", -(JS_INT_LIMIT - 1), &lo) ||
            js_bound(j, s, "maximum", JS_INT_LIMIT - 1, &hi))
            return -1;
        if (lo > hi) return js_fail(j, "'minimum' %lld is above 'maximum' %lld", lo, hi);
        range_int(&j->out, lo, hi);
        return 0;
    }
    if (strcmp(ty, "boolean") == 0) {
        static const char *const keys[] = {"type", NULL};
        if (js_keys(j, s, keys)) return -1;
        sb_str(&j->out, "(?:true|false)");
        return 0;
    }
    if (strcmp(ty, "null") == 0) {
        static const char *const keys[] = {"type", NULL};
        if (js_keys(j, s, keys)) return -1;
        sb_str(&j->out, "null");
        return 0;
    }
    return js_fail(j, "type '%s' is not supported (object, string, integer, boolean, null)", ty);
}

wb_status wb_json_schema_to_regex(const char *schema_json, size_t len, wb_json_ws ws,
                                  char **regex_out, size_t *regex_len, wb_err *err) {
    if (!regex_out) return wb_err_set(err, WB_ERR_ARG, "json_schema: regex_out is NULL");
    *regex_out = NULL;
    if (regex_len) *regex_len = 0;
    if (!schema_json) return wb_err_set(err, WB_ERR_ARG, "json_schema: schema is NULL");
    if (ws != WB_JSON_WS_SPACE && ws != WB_JSON_WS_COMPACT && ws != WB_JSON_WS_FLEXIBLE)
        return wb_err_set(err, WB_ERR_ARG, "json_schema: whitespace policy %d is unknown", (int)ws);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(schema_json, len, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - schema_json) : 0;
        return wb_err_set(err, WB_ERR_FORMAT, "json_schema: the schema is not valid JSON (near "
                          "byte %zu)", at);
    }
    wb_status ust = wb_json_check_unique_keys(root, "json_schema", err);
    if (ust != WB_OK) {
        cJSON_Delete(root);
        return ust;
    }
    js j;
    memset(&j, 0, sizeof j);
    j.ws = ws;
    j.err = err;
    /* The document may start with the space a prompt like "Triage:" is followed by in text. */
    if (ws == WB_JSON_WS_SPACE) sb_str(&j.out, " ?");
    else js_ws(&j, 0);
    int rc = js_value(&j, root, 0);
    cJSON_Delete(root);
    if (rc == 0 && j.out.oom) rc = -1, j.st = wb_err_set(err, WB_ERR_NOMEM, "json_schema: out of "
                                                         "memory");
    if (rc) {
        free(j.out.p);
        return j.st != WB_OK ? j.st : wb_err_set(err, WB_ERR_ARG, "json_schema: invalid schema");
    }
    *regex_out = j.out.p;
    if (regex_len) *regex_len = j.out.n;
    return WB_OK;
}
