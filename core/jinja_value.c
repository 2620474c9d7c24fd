/* jinja_value.c - values of the template engine, the arena they live in, and how they print
 * ({{ v }}, the ~ operator, tojson). Printing follows @huggingface/jinja, which follows
 * JavaScript: integers print as integers, integral floats as "1.0", other floats as JavaScript's
 * shortest round-trip form; true/false print in lower case; none prints nothing. */
#include "jinja_internal.h"
#include "utf8.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failure ---------------------------------------------------------------------------------- */

void jfailf(jfail *f, wb_status st, int line, const char *fmt, ...) {
    char msg[WB_ERR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) wb_err_set(f->err, st, "%s:%d: %s", f->name, line, msg);
    else wb_err_set(f->err, st, "%s: %s", f->name, msg);
    f->status = st;
    longjmp(f->jb, 1);
}

/* ---- arena ------------------------------------------------------------------------------------ */

struct jblock {
    jblock *next;
    size_t size;
    max_align_t data[];
};

void *ja_alloc(jarena *a, size_t n) {
    if (n > a->limit || a->used > a->limit - n)
        jfailf(a->fail, WB_ERR_RANGE, 0, "the template needs more than %zu MiB of working memory",
               a->limit >> 20);
    jblock *b = calloc(1, sizeof *b + (n ? n : 1));
    if (!b) jfailf(a->fail, WB_ERR_NOMEM, 0, "out of memory");
    b->next = a->head;
    b->size = n;
    a->head = b;
    a->used += n + sizeof *b;
    return b->data;
}

void *ja_grow(jarena *a, void *p, size_t old_n, size_t new_n) {
    void *q = ja_alloc(a, new_n);
    if (p && old_n) memcpy(q, p, old_n < new_n ? old_n : new_n);
    return q;
}

char *ja_strndup(jarena *a, const char *s, size_t n) {
    char *d = ja_alloc(a, n + 1);
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void ja_free_all(jarena *a) {
    jblock *b = a->head;
    while (b) {
        jblock *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- UTF-8 ------------------------------------------------------------------------------------ */

uint32_t ju_decode(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[0];
    *len = 1;
    if (c < 0x80) return c;
    size_t k;
    uint32_t cp, min;
    if (c >= 0xC2 && c < 0xE0) k = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c < 0xF0) k = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c < 0xF5) k = 4, cp = c & 0x07, min = 0x10000;
    else return 0xDC00 + c;
    if (n < k) return 0xDC00 + c;
    for (size_t i = 1; i < k; i++) {
        if ((u[i] & 0xC0) != 0x80) return 0xDC00 + c;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0xDC00 + c;
    *len = k;
    return cp;
}

size_t ju_encode(uint32_t cp, char out[4]) {
    return (size_t)wb_utf8_encode(cp, out);
}

int ju_js_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

/* ---- values ----------------------------------------------------------------------------------- */

const jv JV_UNDEFINED = {.t = JV_UNDEF};
const jv JV_NULL = {.t = JV_NONE};

jv jv_bool(int b) { return (jv){.t = JV_BOOL, .u.b = b != 0}; }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.t = JV_FLOAT, .u.f = f}; }

jv jv_str(jarena *a, const char *s, size_t n) {
    jstr *x = ja_alloc(a, sizeof *x + n + 1);
    x->n = n;
    if (n) memcpy(x->p, s, n);
    x->p[n] = 0;
    return (jv){.t = JV_STR, .u.s = x};
}

jv jv_cstr(jarena *a, const char *s) { return jv_str(a, s, strlen(s)); }

jv jv_arr_new(jarena *a, size_t cap, int sub) {
    jarr *x = ja_alloc(a, sizeof *x);
    if (cap) {
        x->v = ja_alloc(a, cap * sizeof *x->v);
        x->cap = cap;
    }
    return (jv){.t = JV_ARR, .sub = sub, .u.a = x};
}

void jv_arr_push(jarena *a, jv arr, jv x) {
    jarr *r = arr.u.a;
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 4;
        r->v = ja_grow(a, r->v, r->n * sizeof *r->v, nc * sizeof *r->v);
        r->cap = nc;
    }
    r->v[r->n++] = x;
}

jv jv_obj_new(jarena *a, int sub) {
    jobj *o = ja_alloc(a, sizeof *o);
    return (jv){.t = JV_OBJ, .sub = sub, .u.o = o};
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void obj_reindex(jarena *a, jobj *o) {
    size_t hc = 64;
    while (hc < o->n * 2 + 2) hc *= 2;
    o->hash = ja_alloc(a, hc * sizeof *o->hash);
    o->hcap = hc;
    for (size_t i = 0; i < o->n; i++) {
        size_t h = hash_bytes(o->k[i]->p, o->k[i]->n) & (hc - 1);
        while (o->hash[h]) h = (h + 1) & (hc - 1);
        o->hash[h] = (uint32_t)(i + 1);
    }
}

static size_t obj_find(const jobj *o, const char *k, size_t n) {
    if (o->hash) {
        size_t h = hash_bytes(k, n) & (o->hcap - 1);
        while (o->hash[h]) {
            size_t i = o->hash[h] - 1;
            if (o->k[i]->n == n && memcmp(o->k[i]->p, k, n) == 0) return i;
            h = (h + 1) & (o->hcap - 1);
        }
        return (size_t)-1;
    }
    for (size_t i = 0; i < o->n; i++)
        if (o->k[i]->n == n && memcmp(o->k[i]->p, k, n) == 0) return i;
    return (size_t)-1;
}

jv *jv_obj_get(jv obj, const char *k, size_t n) {
    size_t i = obj_find(obj.u.o, k, n);
    return i == (size_t)-1 ? NULL : &obj.u.o->v[i];
}

void jv_obj_set(jarena *a, jv obj, const char *k, size_t n, jv x) {
    jobj *o = obj.u.o;
    size_t i = obj_find(o, k, n);
    if (i != (size_t)-1) {
        o->v[i] = x;
        return;
    }
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 4;
        o->k = ja_grow(a, o->k, o->n * sizeof *o->k, nc * sizeof *o->k);
        o->v = ja_grow(a, o->v, o->n * sizeof *o->v, nc * sizeof *o->v);
        o->cap = nc;
    }
    o->k[o->n] = jv_str(a, k, n).u.s;
    o->v[o->n] = x;
    o->n++;
    if (o->n > 16 && (!o->hash || o->n * 2 + 2 > o->hcap)) obj_reindex(a, o);
    else if (o->hash) {
        size_t h = hash_bytes(k, n) & (o->hcap - 1);
        while (o->hash[h]) h = (h + 1) & (o->hcap - 1);
        o->hash[h] = (uint32_t)o->n;
    }
}

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0 && !isnan(v.u.f);
    case JV_STR: return v.u.s->n > 0;
    case JV_ARR: return v.u.a->n > 0;
    case JV_OBJ: return v.sub == JO_NAMESPACE ? 1 : v.u.o->n > 0;
    default: return 1;
    }
}

const char *jv_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "undefined";
    case JV_NONE: return "none";
    case JV_BOOL: return "boolean";
    case JV_INT: return "integer";
    case JV_FLOAT: return "float";
    case JV_STR: return "string";
    case JV_ARR: return v.sub == JA_TUPLE ? "tuple" : "list";
    case JV_OBJ: return v.sub == JO_NAMESPACE ? "namespace" : "mapping";
    default: return "function";
    }
}

/* ---- buffers ---------------------------------------------------------------------------------- */

void jb_add(jbuf *b, const char *s, size_t n) {
    size_t lim = b->limit ? b->limit : b->a->limit;
    if (n > lim || b->n > lim - n)
        jfailf(b->a->fail, WB_ERR_RANGE, b->line, "the rendered text is longer than %zu bytes", lim);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) nc *= 2;
        b->p = ja_grow(b->a, b->p, b->n, nc);
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jb_puts(jbuf *b, const char *s) { jb_add(b, s, strlen(s)); }

jv jb_take(jbuf *b) {
    if (!b->p) return jv_str(b->a, "", 0);
    /* the buffer is arena memory of the right layout only by copying; strings are small */
    return jv_str(b->a, b->p, b->n);
}

/* ---- numbers as JavaScript prints them --------------------------------------------------------- */

void jv_js_number(double f, char out[32]) {
    if (isnan(f)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (f == 0) {
        strcpy(out, "0");
        return;
    }
    /* the shortest precision that round-trips, as ECMAScript's Number::toString */
    char digits[40];
    int prec, exp10 = 0;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(digits, sizeof digits, "%.*e", prec - 1, f);
        if (strtod(digits, NULL) == f) break;
    }
    /* digits is "-d.ddde+XX": pull out the mantissa digits and the exponent */
    char mant[24];
    int k = 0, neg = digits[0] == '-';
    const char *p = digits + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') mant[k++] = *p;
    mant[k] = 0;
    exp10 = atoi(p + 1);
    while (k > 1 && mant[k - 1] == '0') mant[--k] = 0;
    int n = exp10 + 1; /* position of the decimal point relative to the digits */
    char *o = out;
    if (neg) *o++ = '-';
    if (k <= n && n <= 21) {
        memcpy(o, mant, (size_t)k);
        o += k;
        for (int i = k; i < n; i++) *o++ = '0';
    } else if (0 < n && n <= 21) {
        memcpy(o, mant, (size_t)n);
        o += n;
        *o++ = '.';
        memcpy(o, mant + n, (size_t)(k - n));
        o += k - n;
    } else if (-6 < n && n <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -n; i++) *o++ = '0';
        memcpy(o, mant, (size_t)k);
        o += k;
    } else {
        *o++ = mant[0];
        if (k > 1) {
            *o++ = '.';
            memcpy(o, mant + 1, (size_t)(k - 1));
            o += k - 1;
        }
        o += sprintf(o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    *o = 0;
}

/* ---- tojson ----------------------------------------------------------------------------------- */

#define JSON_MAX_DEPTH 128

static void json_string(jbuf *b, const char *s, size_t n, int ascii) {
    jb_add(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        char esc[16];
        if (c < 0x80) {
            const char *e = NULL;
            switch (c) {
            case '"': e = "\\\""; break;
            case '\\': e = "\\\\"; break;
            case '\b': e = "\\b"; break;
            case '\f': e = "\\f"; break;
            case '\n': e = "\\n"; break;
            case '\r': e = "\\r"; break;
            case '\t': e = "\\t"; break;
            default:
                if (c < 0x20) {
                    snprintf(esc, sizeof esc, "\\u%04x", c);
                    e = esc;
                } else if (c == 0x7F && ascii) {
                    e = "\\u007f";
                }
            }
            if (e) jb_puts(b, e);
            else jb_add(b, (const char *)&c, 1);
            i++;
            continue;
        }
        size_t l;
        uint32_t cp = ju_decode(s + i, n - i, &l);
        if (ascii) {
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            jb_puts(b, esc);
        } else {
            jb_add(b, s + i, l);
        }
        i += l;
    }
    jb_add(b, "\"", 1);
}

static void json_pad(jbuf *b, int64_t indent, int depth) {
    jb_add(b, "\n", 1);
    for (int64_t i = 0; i < indent * depth; i++) jb_add(b, " ", 1);
}

static int key_cmp(const void *x, const void *y) {
    const jstr *a = **(jstr *const *const *)x, *c = **(jstr *const *const *)y;
    size_t m = a->n < c->n ? a->n : c->n;
    int r = memcmp(a->p, c->p, m);
    return r ? r : (a->n > c->n) - (a->n < c->n);
}

void jv_tojson(jbuf *b, jv v, const jjson_opts *o, int depth, int line) {
    if (depth > JSON_MAX_DEPTH)
        jfailf(b->a->fail, WB_ERR_RANGE, line, "tojson: value nested deeper than %d levels", JSON_MAX_DEPTH);
    const int ind = o->indent > 0;
    const char *isep = o->item_sep ? o->item_sep : ind ? "," : ", ";
    const char *ksep = o->key_sep ? o->key_sep : ": ";
    char num[32];
    switch (v.t) {
    case JV_UNDEF: jb_puts(b, o->undefined_as_null ? "null" : "undefined"); return;
    case JV_NONE: jb_puts(b, "null"); return;
    case JV_BOOL: jb_puts(b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); jb_puts(b, num); return;
    case JV_FLOAT:
        if (!isfinite(v.u.f)) strcpy(num, "null");
        else jv_js_number(v.u.f, num);
        jb_puts(b, num);
        return;
    case JV_STR: json_string(b, v.u.s->p, v.u.s->n, o->ensure_ascii); return;
    case JV_ARR: {
        const jarr *a = v.u.a;
        jb_add(b, "[", 1);
        for (size_t i = 0; i < a->n; i++) {
            if (i) jb_puts(b, isep);
            if (ind) json_pad(b, o->indent, depth + 1);
            jv_tojson(b, a->v[i], o, depth + 1, line);
        }
        if (ind && a->n) json_pad(b, o->indent, depth);
        jb_add(b, "]", 1);
        return;
    }
    case JV_OBJ: {
        const jobj *ob = v.u.o;
        size_t *order = NULL;
        if (o->sort_keys && ob->n > 1) {
            jstr ***ks = ja_alloc(b->a, ob->n * sizeof *ks);
            for (size_t i = 0; i < ob->n; i++) ks[i] = &ob->k[i];
            qsort(ks, ob->n, sizeof *ks, key_cmp);
            order = ja_alloc(b->a, ob->n * sizeof *order);
            for (size_t i = 0; i < ob->n; i++) order[i] = (size_t)(ks[i] - ob->k);
        }
        jb_add(b, "{", 1);
        for (size_t j = 0; j < ob->n; j++) {
            size_t i = order ? order[j] : j;
            if (j) jb_puts(b, isep);
            if (ind) json_pad(b, o->indent, depth + 1);
            json_string(b, ob->k[i]->p, ob->k[i]->n, o->ensure_ascii);
            jb_puts(b, ksep);
            jv_tojson(b, ob->v[i], o, depth + 1, line);
        }
        if (ind && ob->n) json_pad(b, o->indent, depth);
        jb_add(b, "}", 1);
        return;
    }
    default: jfailf(b->a->fail, WB_ERR_ARG, line, "tojson: cannot convert a function to JSON");
    }
}

void jv_print(jbuf *b, jv v) {
    char num[40];
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return;
    case JV_BOOL: jb_puts(b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(num, sizeof num, "%lld", (long long)v.u.i); jb_puts(b, num); return;
    case JV_FLOAT:
        if (v.u.f == 0 && signbit(v.u.f)) strcpy(num, "-0.0");
        else if (isfinite(v.u.f) && v.u.f == floor(v.u.f) && fabs(v.u.f) < 1e21) snprintf(num, sizeof num, "%.1f", v.u.f);
        else jv_js_number(v.u.f, num);
        jb_puts(b, num);
        return;
    case JV_STR: jb_add(b, v.u.s->p, v.u.s->n); return;
    case JV_ARR:
    case JV_OBJ: {
        jjson_opts o = {.indent = -1};
        jv_tojson(b, v, &o, 0, b->line);
        return;
    }
    default: jb_puts(b, "[function]"); return;
    }
}

/* ---- from cJSON ------------------------------------------------------------------------------- */

jv jv_from_cjson(jarena *a, const cJSON *j, int depth, int line) {
    if (depth > JSON_MAX_DEPTH)
        jfailf(a->fail, WB_ERR_RANGE, line, "a variable is nested deeper than %d levels", JSON_MAX_DEPTH);
    if (!j || cJSON_IsNull(j)) return JV_NULL;
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_cstr(a, j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        jv r = jv_arr_new(a, 0, JA_LIST);
        for (const cJSON *e = j->child; e; e = e->next) jv_arr_push(a, r, jv_from_cjson(a, e, depth + 1, line));
        return r;
    }
    if (cJSON_IsObject(j)) {
        jv r = jv_obj_new(a, JO_DICT);
        for (const cJSON *e = j->child; e; e = e->next) {
            const char *k = e->string ? e->string : "";
            jv_obj_set(a, r, k, strlen(k), jv_from_cjson(a, e, depth + 1, line));
        }
        return r;
    }
    return JV_NULL;
}
