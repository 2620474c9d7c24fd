/* jinja_eval.c - the interpreter of parsed chat templates.
 *
 * Semantics are those of @huggingface/jinja (the reference the committed vectors come from):
 * scoping (a for loop has its own scope; if and set do not; a macro runs in a child of the
 * calling scope), the output of a loop iteration that ends in {% break %} / {% continue %} is
 * dropped, none and undefined print nothing, == is JavaScript's loose equality and `in` its
 * strict one. Where the reference raises an error for something Python's Jinja2 accepts
 * (comparing strings with <, iterating a string, a test with an argument, `x|default` without
 * parentheses, `undefined in list`), we do what Jinja2 does: no template that renders there
 * renders differently here. Every construct counts against the step, depth, memory and output
 * limits of the render. */
#include "jinja_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#define MAX_TEMPLATE_BYTES (4u << 20)
#define MAX_PARSE_DEPTH 128
#define MAX_RANGE 1000000

struct wb_jinja {
    char *name;
    jarena arena;
    jnode *prog;
};

typedef struct jenv jenv;
struct jenv {
    jenv *parent;
    jv vars;
};

enum { FN_NAMESPACE, FN_RAISE, FN_RANGE, FN_STRFTIME, FN_METHOD, FN_MACRO, FN_CALLER };

struct jfn {
    int kind;
    const char *method; /* FN_METHOD: the method name */
    jv self;            /* FN_METHOD: the string or mapping it is bound to */
    const jnode *node;  /* FN_MACRO: the macro; FN_CALLER: the call statement */
    jenv *env;          /* FN_CALLER: the scope of the call statement */
};

typedef struct jx {
    jarena a;
    jfail fail;
    wb_jinja_params prm;
    uint64_t steps;
    int depth;
    int ctl; /* 1: break, 2: continue pending */
    int line;
} jx;

typedef struct jargs {
    jv *pos;
    size_t npos;
    jv kw; /* JV_OBJ (JO_KWARGS) or JV_UNDEF when there are none */
} jargs;

static _Noreturn void fail(jx *x, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(jx *x, int line, const char *fmt, ...) {
    char m[WB_ERR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    jfailf(&x->fail, WB_ERR_FORMAT, line, "%s", m);
}

static jv eval(jx *x, const jnode *n, jenv *env);
static void exec_block(jx *x, const jlist *body, jenv *env, jbuf *out);

static void step(jx *x, int line) {
    if (++x->steps > x->prm.max_steps)
        jfailf(&x->fail, WB_ERR_RANGE, line, "the template ran more than %llu steps",
               (unsigned long long)x->prm.max_steps);
}

static jbuf newbuf(jx *x, int line) { return (jbuf){.a = &x->a, .limit = x->prm.max_output, .line = line}; }

/* ---- environments ------------------------------------------------------------------------------ */

static jenv *env_new(jx *x, jenv *parent) {
    jenv *e = ja_alloc(&x->a, sizeof *e);
    e->parent = parent;
    e->vars = jv_obj_new(&x->a, JO_DICT);
    return e;
}

static void env_set(jx *x, jenv *e, const char *k, size_t n, jv v) { jv_obj_set(&x->a, e->vars, k, n, v); }

static jv env_get(jenv *e, const char *k, size_t n) {
    for (; e; e = e->parent) {
        jv *v = jv_obj_get(e->vars, k, n);
        if (v) return *v;
    }
    return JV_UNDEFINED;
}

static jv fn_value(jx *x, int kind, const char *method, jv self, const jnode *node, jenv *env) {
    jfn *f = ja_alloc(&x->a, sizeof *f);
    f->kind = kind;
    f->method = method;
    f->self = self;
    f->node = node;
    f->env = env;
    return (jv){.t = JV_FN, .u.fn = f};
}

/* ---- strings ------------------------------------------------------------------------------------ */

static size_t cp_count(const jstr *s) {
    size_t c = 0, i = 0, l;
    while (i < s->n) {
        ju_decode(s->p + i, s->n - i, &l);
        i += l;
        c++;
    }
    return c;
}

/* Byte offsets of each code point (n+1 entries). */
static size_t *cp_offsets(jx *x, const jstr *s, size_t *count) {
    size_t n = cp_count(s), i = 0, k = 0, l;
    size_t *o = ja_alloc(&x->a, (n + 1) * sizeof *o);
    while (i < s->n) {
        o[k++] = i;
        ju_decode(s->p + i, s->n - i, &l);
        i += l;
    }
    o[k] = s->n;
    *count = n;
    return o;
}

static jv str_map_case(jx *x, const jstr *s, int upper, int first_only) {
    jbuf b = newbuf(x, x->line);
    size_t i = 0, l;
    int done = 0;
    while (i < s->n) {
        uint32_t cp = ju_decode(s->p + i, s->n - i, &l);
        if (cp < 0xDC80 || cp > 0xDCFF) {
            if (!done) cp = (uint32_t)(upper ? utf8proc_toupper((utf8proc_int32_t)cp) : utf8proc_tolower((utf8proc_int32_t)cp));
            char u[4];
            jb_add(&b, u, ju_encode(cp, u));
        } else {
            jb_add(&b, s->p + i, 1);
        }
        if (first_only) done = 1;
        i += l;
    }
    return jb_take(&b);
}

static void js_trim(const char *s, size_t n, int left, int right, size_t *a, size_t *e) {
    size_t i = 0, l;
    if (left)
        while (i < n && ju_js_space(ju_decode(s + i, n - i, &l))) i += l;
    size_t end = n;
    if (right) {
        size_t j = i;
        end = i;
        while (j < n) {
            uint32_t cp = ju_decode(s + j, n - j, &l);
            j += l;
            if (!ju_js_space(cp)) end = j;
        }
    }
    *a = i;
    *e = end;
}

static jv str_trim(jx *x, jv v, int left, int right) {
    size_t a, e;
    js_trim(v.u.s->p, v.u.s->n, left, right, &a, &e);
    return jv_str(&x->a, v.u.s->p + a, e - a);
}

static int is_ascii_word(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* JavaScript's value.replace(/\b\w/g, upper): only ASCII letters at a word start change. */
static jv str_title(jx *x, jv v) {
    jv r = jv_str(&x->a, v.u.s->p, v.u.s->n);
    char *p = r.u.s->p;
    for (size_t i = 0; i < r.u.s->n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (is_ascii_word(c) && (i == 0 || !is_ascii_word((unsigned char)p[i - 1])) && c >= 'a' && c <= 'z')
            p[i] = (char)(c - 32);
    }
    return r;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && memcmp(h + i, nd, nn) == 0) return h + i;
    return NULL;
}

static jv str_replace(jx *x, const jstr *s, const jstr *old, const jstr *new_, int64_t count) {
    jbuf b = newbuf(x, x->line);
    if (count == 0) return jv_str(&x->a, s->p, s->n);
    int64_t left = count < 0 ? INT64_MAX : count;
    if (old->n == 0) {
        /* an empty pattern matches before every code point and at the end */
        size_t i = 0, l;
        while (i <= s->n) {
            if (left > 0) {
                jb_add(&b, new_->p, new_->n);
                left--;
            }
            if (i == s->n) break;
            ju_decode(s->p + i, s->n - i, &l);
            jb_add(&b, s->p + i, l);
            i += l;
            step(x, x->line);
        }
        return jb_take(&b);
    }
    const char *p = s->p, *end = s->p + s->n;
    while (p < end) {
        const char *m = left > 0 ? find_bytes(p, (size_t)(end - p), old->p, old->n) : NULL;
        if (!m) break;
        jb_add(&b, p, (size_t)(m - p));
        jb_add(&b, new_->p, new_->n);
        p = m + old->n;
        left--;
        step(x, x->line);
    }
    jb_add(&b, p, (size_t)(end - p));
    return jb_take(&b);
}

static jv str_split(jx *x, jv self, jargs *a, int line) {
    jv sep = a->npos > 0 ? a->pos[0] : JV_NULL;
    jv maxs = a->npos > 1 ? a->pos[1] : jv_int(-1);
    if (sep.t != JV_STR && sep.t != JV_NONE) fail(x, line, "split(): the separator must be a string or none");
    if (maxs.t != JV_INT) fail(x, line, "split(): maxsplit must be an integer");
    jv r = jv_arr_new(&x->a, 0, JA_LIST);
    const jstr *s = self.u.s;
    if (sep.t == JV_NONE) {
        size_t a0, e0;
        js_trim(s->p, s->n, 1, 0, &a0, &e0);
        const char *t = s->p + a0;
        size_t tn = s->n - a0, i = 0, l;
        while (i < tn) {
            while (i < tn && ju_js_space(ju_decode(t + i, tn - i, &l))) i += l;
            if (i >= tn) break;
            size_t st = i;
            while (i < tn && !ju_js_space(ju_decode(t + i, tn - i, &l))) i += l;
            if (maxs.u.i != -1 && (int64_t)r.u.a->n >= maxs.u.i) {
                jv_arr_push(&x->a, r, jv_str(&x->a, t + st, tn - st));
                break;
            }
            jv_arr_push(&x->a, r, jv_str(&x->a, t + st, i - st));
            step(x, line);
        }
        return r;
    }
    if (sep.u.s->n == 0) fail(x, line, "split(): empty separator");
    const char *p = s->p, *end = s->p + s->n;
    for (;;) {
        if (maxs.u.i != -1 && (int64_t)r.u.a->n >= maxs.u.i) {
            jv_arr_push(&x->a, r, jv_str(&x->a, p, (size_t)(end - p)));
            break;
        }
        const char *m = find_bytes(p, (size_t)(end - p), sep.u.s->p, sep.u.s->n);
        if (!m) {
            jv_arr_push(&x->a, r, jv_str(&x->a, p, (size_t)(end - p)));
            break;
        }
        jv_arr_push(&x->a, r, jv_str(&x->a, p, (size_t)(m - p)));
        p = m + sep.u.s->n;
        step(x, line);
    }
    return r;
}

static int str_affix(jx *x, jv self, jargs *a, int ends, const char *what, int line) {
    if (a->npos == 0) fail(x, line, "%s() needs an argument", what);
    jv pat = a->pos[0];
    const jstr *s = self.u.s;
    if (pat.t == JV_STR) {
        const jstr *q = pat.u.s;
        if (q->n > s->n) return 0;
        return memcmp(ends ? s->p + s->n - q->n : s->p, q->p, q->n) == 0;
    }
    if (pat.t == JV_ARR) {
        for (size_t i = 0; i < pat.u.a->n; i++) {
            if (pat.u.a->v[i].t != JV_STR) fail(x, line, "%s(): tuple elements must be strings", what);
            const jstr *q = pat.u.a->v[i].u.s;
            if (q->n <= s->n && memcmp(ends ? s->p + s->n - q->n : s->p, q->p, q->n) == 0) return 1;
        }
        return 0;
    }
    fail(x, line, "%s(): the argument must be a string or a tuple of strings", what);
}

/* ---- printing to strings ------------------------------------------------------------------------ */

static jv to_string(jx *x, jv v) {
    if (v.t == JV_STR) return v;
    jbuf b = newbuf(x, x->line);
    jv_print(&b, v);
    return jb_take(&b);
}

/* JavaScript's String(value.value): what ~, + and join use. */
static void raw_string(jx *x, jbuf *b, jv v) {
    char num[32];
    switch (v.t) {
    case JV_STR: jb_add(b, v.u.s->p, v.u.s->n); return;
    case JV_FLOAT: jv_js_number(v.u.f, num); jb_puts(b, num); return;
    case JV_UNDEF:
    case JV_NONE: return;
    case JV_ARR:
        for (size_t i = 0; i < v.u.a->n; i++) {
            if (i) jb_add(b, ",", 1);
            jv e = v.u.a->v[i];
            if (e.t == JV_UNDEF || e.t == JV_NONE) jb_puts(b, "undefined");
            else jv_print(b, e);
        }
        return;
    case JV_OBJ: jb_puts(b, "[object Map]"); return;
    default: jv_print(b, v); (void)x; return;
    }
}

/* ---- comparisons ------------------------------------------------------------------------------- */

static int is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT; }
static double num(jv v) { return v.t == JV_INT ? (double)v.u.i : v.t == JV_FLOAT ? v.u.f : v.t == JV_BOOL ? v.u.b : NAN; }

static int str_eq(const jstr *a, const jstr *b) { return a->n == b->n && memcmp(a->p, b->p, a->n) == 0; }

/* JavaScript's Number(string) */
static double js_to_number(const jstr *s) {
    size_t a, e;
    js_trim(s->p, s->n, 1, 1, &a, &e);
    if (a == e) return 0;
    char tmp[64];
    size_t n = e - a;
    if (n >= sizeof tmp) return NAN;
    memcpy(tmp, s->p + a, n);
    tmp[n] = 0;
    if (!strcmp(tmp, "Infinity") || !strcmp(tmp, "+Infinity")) return INFINITY;
    if (!strcmp(tmp, "-Infinity")) return -INFINITY;
    for (size_t i = 0; i < n; i++) {
        char c = tmp[i];
        if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' ||
              ((c == 'x' || c == 'X') && i == 1 && tmp[0] == '0') ||
              (tmp[1] == 'x' && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))))
            return NAN;
    }
    char *end;
    double d = strtod(tmp, &end);
    return *end ? NAN : d;
}

/* a.value == b.value in JavaScript */
static int loose_eq(jv a, jv b) {
    int an = a.t == JV_UNDEF || a.t == JV_NONE, bn = b.t == JV_UNDEF || b.t == JV_NONE;
    if (an || bn) return an && bn;
    int anum = is_num(a) || a.t == JV_BOOL, bnum = is_num(b) || b.t == JV_BOOL;
    if (anum && bnum) return num(a) == num(b);
    if (a.t == JV_STR && b.t == JV_STR) return str_eq(a.u.s, b.u.s);
    if (a.t == JV_STR && bnum) return js_to_number(a.u.s) == num(b);
    if (b.t == JV_STR && anum) return js_to_number(b.u.s) == num(a);
    if (a.t == b.t && (a.t == JV_ARR || a.t == JV_OBJ || a.t == JV_FN)) return a.u.a == b.u.a;
    return 0;
}

/* a.value === b.value in JavaScript */
static int strict_eq(jv a, jv b) {
    int an = a.t == JV_UNDEF || a.t == JV_NONE, bn = b.t == JV_UNDEF || b.t == JV_NONE;
    if (an || bn) return an && bn;
    if (is_num(a) && is_num(b)) return num(a) == num(b);
    if (a.t != b.t) return 0;
    if (a.t == JV_BOOL) return a.u.b == b.u.b;
    if (a.t == JV_STR) return str_eq(a.u.s, b.u.s);
    return a.u.a == b.u.a;
}

static int str_cmp_ci(jx *x, jv a, jv b, int case_sensitive) {
    if (!case_sensitive) {
        a = str_map_case(x, a.u.s, 0, 0);
        b = str_map_case(x, b.u.s, 0, 0);
    }
    size_t m = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
    int r = memcmp(a.u.s->p, b.u.s->p, m);
    return r ? (r < 0 ? -1 : 1) : (a.u.s->n > b.u.s->n) - (a.u.s->n < b.u.s->n);
}

static int compare_values(jx *x, jv a, jv b, int case_sensitive, int line) {
    if (a.t == JV_NONE && b.t == JV_NONE) return 0;
    if (a.t == JV_UNDEF && b.t == JV_UNDEF) return 0;
    if (a.t == JV_NONE || b.t == JV_NONE || a.t == JV_UNDEF || b.t == JV_UNDEF)
        fail(x, line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
    if ((is_num(a) || a.t == JV_BOOL) && (is_num(b) || b.t == JV_BOOL)) {
        double p = num(a), q = num(b);
        return p < q ? -1 : p > q ? 1 : 0;
    }
    if (a.t == JV_STR && b.t == JV_STR) return str_cmp_ci(x, a, b, case_sensitive);
    fail(x, line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
}

/* A stable merge sort whose comparisons may fail (through longjmp: all memory is arena). */
typedef struct sortctx {
    jx *x;
    int case_sensitive, reverse, line;
    jv *keys;
} sortctx;

static void sort_values(sortctx *c, jv *v, size_t n) {
    jx *x = c->x;
    size_t *idx = ja_alloc(&x->a, (n ? n : 1) * sizeof *idx), *tmp = ja_alloc(&x->a, (n ? n : 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                step(x, c->line);
                int r = compare_values(x, c->keys[idx[j]], c->keys[idx[i]], c->case_sensitive, c->line);
                if (c->reverse) r = -r;
                tmp[k++] = r < 0 ? idx[j++] : idx[i++];
            }
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
    jv *copy = ja_alloc(&x->a, (n ? n : 1) * sizeof *copy);
    for (size_t i = 0; i < n; i++) copy[i] = v[idx[i]];
    memcpy(v, copy, n * sizeof *v);
}

/* ---- arguments ----------------------------------------------------------------------------------- */

static void eval_args(jx *x, const jlist *args, jenv *env, jargs *out) {
    size_t cap = args->n + 1, n = 0;
    jv *pos = ja_alloc(&x->a, cap * sizeof *pos);
    for (size_t i = 0; i < args->n; i++) {
        const jnode *a = args->v[i];
        if (a->kind == N_SPREAD) {
            jv v = eval(x, a->a, env);
            if (v.t != JV_ARR) fail(x, a->line, "cannot unpack %s with *", jv_type_name(v));
            if (v.u.a->n > 0) {
                pos = ja_grow(&x->a, pos, n * sizeof *pos, (cap + v.u.a->n) * sizeof *pos);
                cap += v.u.a->n;
                for (size_t k = 0; k < v.u.a->n; k++) pos[n++] = v.u.a->v[k];
            }
        } else if (a->kind != N_KWARG && a->kind != N_KWSPREAD) {
            pos[n++] = eval(x, a, env);
        }
    }
    jv kw = JV_UNDEFINED;
    for (size_t i = 0; i < args->n; i++) {
        const jnode *a = args->v[i];
        if (a->kind != N_KWARG && a->kind != N_KWSPREAD) continue;
        if (kw.t == JV_UNDEF) kw = jv_obj_new(&x->a, JO_KWARGS);
        if (a->kind == N_KWARG) {
            if (jv_obj_get(kw, a->s, a->n)) fail(x, a->line, "got multiple values for keyword argument '%s'", a->s);
            jv_obj_set(&x->a, kw, a->s, a->n, eval(x, a->a, env));
        } else {
            jv v = eval(x, a->a, env);
            if (v.t != JV_OBJ || v.sub == JO_NAMESPACE) fail(x, a->line, "the argument after ** must be a mapping, not %s", jv_type_name(v));
            for (size_t k = 0; k < v.u.o->n; k++) {
                if (jv_obj_get(kw, v.u.o->k[k]->p, v.u.o->k[k]->n))
                    fail(x, a->line, "got multiple values for keyword argument '%s'", v.u.o->k[k]->p);
                jv_obj_set(&x->a, kw, v.u.o->k[k]->p, v.u.o->k[k]->n, v.u.o->v[k]);
            }
        }
    }
    out->pos = pos;
    out->npos = n;
    out->kw = kw;
}

static jv arg(const jargs *a, size_t i, const char *kwname, jv dflt) {
    if (i < a->npos) return a->pos[i];
    if (kwname && a->kw.t == JV_OBJ) {
        jv *v = jv_obj_get(a->kw, kwname, strlen(kwname));
        if (v) return *v;
    }
    return dflt;
}

/* ---- macros ---------------------------------------------------------------------------------------- */

/* Does the body read `kwargs` / `varargs`? (1, 2 bits). The tree's depth is capped by the parser,
 * so this walk's recursion is bounded. */
static int special_args(const jnode *n) {
    if (!n) return 0;
    int r = 0;
    if (n->kind == N_IDENT) {
        if (n->n == 6 && !memcmp(n->s, "kwargs", 6)) r |= 1;
        if (n->n == 7 && !memcmp(n->s, "varargs", 7)) r |= 2;
        return r;
    }
    if (n->kind == N_MEMBER && !n->flag) return special_args(n->a);
    r |= special_args(n->a) | special_args(n->b) | special_args(n->c);
    for (size_t i = 0; i < n->list.n; i++) r |= special_args(n->list.v[i]);
    for (size_t i = 0; i < n->list2.n; i++) r |= special_args(n->list2.v[i]);
    return r;
}

static void bind_params(jx *x, const char *who, const jlist *params, const jlist *body, jargs *a, jenv *scope, int line) {
    int special = 0;
    for (size_t i = 0; i < body->n; i++) special |= special_args(body->v[i]);
    for (size_t i = 0; i < params->n; i++) special |= special_args(params->v[i]->kind == N_KWARG ? params->v[i]->a : NULL);
    jv rest = jv_obj_new(&x->a, JO_DICT);
    if (a->kw.t == JV_OBJ)
        for (size_t k = 0; k < a->kw.u.o->n; k++)
            jv_obj_set(&x->a, rest, a->kw.u.o->k[k]->p, a->kw.u.o->k[k]->n, a->kw.u.o->v[k]);
    int *pending = ja_alloc(&x->a, (params->n + 1) * sizeof *pending);
    for (size_t i = 0; i < params->n; i++) {
        const jnode *p = params->v[i];
        jv v = JV_UNDEFINED;
        int have = 0;
        if (i < a->npos) {
            v = a->pos[i];
            have = 1;
        } else {
            jv *kv = jv_obj_get(rest, p->s, p->n);
            if (kv) {
                v = *kv;
                have = 1;
                /* remove it from the rest by rebuilding (parameter lists are short) */
                jv r2 = jv_obj_new(&x->a, JO_DICT);
                for (size_t k = 0; k < rest.u.o->n; k++)
                    if (!(rest.u.o->k[k]->n == p->n && !memcmp(rest.u.o->k[k]->p, p->s, p->n)))
                        jv_obj_set(&x->a, r2, rest.u.o->k[k]->p, rest.u.o->k[k]->n, rest.u.o->v[k]);
                rest = r2;
            }
        }
        pending[i] = !have && p->kind == N_KWARG;
        env_set(x, scope, p->s, p->n, v);
    }
    if (special & 1) env_set(x, scope, "kwargs", 6, rest);
    else if (rest.u.o->n) fail(x, line, "macro %s takes no keyword argument '%s'", who, rest.u.o->k[0]->p);
    if (special & 2) {
        jv va = jv_arr_new(&x->a, 0, JA_LIST);
        for (size_t i = params->n; i < a->npos; i++) jv_arr_push(&x->a, va, a->pos[i]);
        env_set(x, scope, "varargs", 7, va);
    } else if (a->npos > params->n) {
        fail(x, line, "macro %s takes not more than %zu argument(s)", who, params->n);
    }
    for (size_t i = 0; i < params->n; i++)
        if (pending[i]) env_set(x, scope, params->v[i]->s, params->v[i]->n, eval(x, params->v[i]->a, scope));
}

static jv render_body(jx *x, const jlist *body, jenv *env, int line) {
    jbuf b = newbuf(x, line);
    exec_block(x, body, env, &b);
    if (x->ctl) fail(x, line, "{%% %s %%} outside a loop", x->ctl == 1 ? "break" : "continue");
    return jb_take(&b);
}

/* ---- built-in functions ------------------------------------------------------------------------ */

static jv do_namespace(jx *x, jargs *a, int line) {
    if (a->npos > 1) fail(x, line, "namespace() takes at most 1 positional argument, got %zu", a->npos);
    jv ns = jv_obj_new(&x->a, JO_NAMESPACE);
    if (a->npos == 1) {
        jv src = a->pos[0];
        if (src.t == JV_OBJ && src.sub != JO_NAMESPACE) {
            for (size_t i = 0; i < src.u.o->n; i++)
                jv_obj_set(&x->a, ns, src.u.o->k[i]->p, src.u.o->k[i]->n, src.u.o->v[i]);
        } else if (src.t == JV_ARR) {
            for (size_t i = 0; i < src.u.a->n; i++) {
                jv pr = src.u.a->v[i];
                if (pr.t != JV_ARR || pr.u.a->n != 2 || pr.u.a->v[0].t != JV_STR)
                    fail(x, line, "namespace() expects a mapping or a list of [key, value] pairs");
                jv_obj_set(&x->a, ns, pr.u.a->v[0].u.s->p, pr.u.a->v[0].u.s->n, pr.u.a->v[1]);
            }
        } else {
            fail(x, line, "namespace(): a %s is not iterable", jv_type_name(src));
        }
    }
    if (a->kw.t == JV_OBJ)
        for (size_t i = 0; i < a->kw.u.o->n; i++)
            jv_obj_set(&x->a, ns, a->kw.u.o->k[i]->p, a->kw.u.o->k[i]->n, a->kw.u.o->v[i]);
    return ns;
}

static jv do_range(jx *x, jargs *a, int line) {
    for (size_t i = 0; i < a->npos; i++)
        if (a->pos[i].t != JV_INT) fail(x, line, "range() takes integers, not %s", jv_type_name(a->pos[i]));
    if (a->npos < 1 || a->npos > 3) fail(x, line, "range() takes 1 to 3 arguments");
    int64_t start = 0, stop, stp = 1;
    if (a->npos == 1) stop = a->pos[0].u.i;
    else {
        start = a->pos[0].u.i;
        stop = a->pos[1].u.i;
        if (a->npos == 3) stp = a->pos[2].u.i;
    }
    if (stp == 0) fail(x, line, "range() step must not be zero");
    double count = ceil(((double)stop - (double)start) / (double)stp);
    if (count > MAX_RANGE) fail(x, line, "range() longer than %d", MAX_RANGE);
    jv r = jv_arr_new(&x->a, count > 0 ? (size_t)count : 0, JA_LIST);
    for (int64_t i = start; stp > 0 ? i < stop : i > stop; i += stp) {
        step(x, line); /* building the list is work too */
        jv_arr_push(&x->a, r, jv_int(i));
        if ((stp > 0 && i > INT64_MAX - stp) || (stp < 0 && i < INT64_MIN - stp)) break;
    }
    return r;
}

static jv do_strftime(jx *x, jargs *a, int line) {
    jv f = arg(a, 0, NULL, JV_UNDEFINED);
    if (f.t != JV_STR) fail(x, line, "strftime_now() takes a format string");
    static const char *const months[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};
    time_t now = x->prm.now >= 0 ? (time_t)x->prm.now : time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    jbuf b = newbuf(x, line);
    const char *s = f.u.s->p;
    size_t n = f.u.s->n;
    char tmp[16];
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 1 < n && strchr("YmdbBHM%", s[i + 1])) {
            switch (s[++i]) {
            case 'Y': snprintf(tmp, sizeof tmp, "%d", tm.tm_year + 1900); break;
            case 'm': snprintf(tmp, sizeof tmp, "%02d", tm.tm_mon + 1); break;
            case 'd': snprintf(tmp, sizeof tmp, "%02d", tm.tm_mday); break;
            case 'b': snprintf(tmp, sizeof tmp, "%.3s", months[tm.tm_mon]); break;
            case 'B': snprintf(tmp, sizeof tmp, "%s", months[tm.tm_mon]); break;
            case 'H': snprintf(tmp, sizeof tmp, "%02d", tm.tm_hour); break;
            case 'M': snprintf(tmp, sizeof tmp, "%02d", tm.tm_min); break;
            default: strcpy(tmp, "%"); break;
            }
            jb_puts(&b, tmp);
        } else {
            jb_add(&b, s + i, 1);
        }
    }
    return jb_take(&b);
}

static jv obj_items(jx *x, jv o) {
    jv r = jv_arr_new(&x->a, o.u.o->n, JA_LIST);
    for (size_t i = 0; i < o.u.o->n; i++) {
        jv pr = jv_arr_new(&x->a, 2, JA_LIST);
        jv_arr_push(&x->a, pr, jv_str(&x->a, o.u.o->k[i]->p, o.u.o->k[i]->n));
        jv_arr_push(&x->a, pr, o.u.o->v[i]);
        jv_arr_push(&x->a, r, pr);
    }
    return r;
}

static jv obj_keys(jx *x, jv o) {
    jv r = jv_arr_new(&x->a, o.u.o->n, JA_LIST);
    for (size_t i = 0; i < o.u.o->n; i++) jv_arr_push(&x->a, r, jv_str(&x->a, o.u.o->k[i]->p, o.u.o->k[i]->n));
    return r;
}

static jv obj_values(jx *x, jv o) {
    jv r = jv_arr_new(&x->a, o.u.o->n, JA_LIST);
    for (size_t i = 0; i < o.u.o->n; i++) jv_arr_push(&x->a, r, o.u.o->v[i]);
    return r;
}

static int is_obj_method(const char *m) {
    return !strcmp(m, "get") || !strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values") ||
           !strcmp(m, "dictsort");
}

static int is_str_method(const char *m) {
    static const char *const names[] = {"upper", "lower", "strip", "title", "capitalize", "rstrip",
                                        "lstrip", "startswith", "endswith", "split", "replace", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(m, names[i])) return 1;
    return 0;
}

static jv call_obj_method(jx *x, jv self, const char *m, jargs *a, int line) {
    if (!strcmp(m, "get")) {
        jv k = arg(a, 0, NULL, JV_UNDEFINED);
        if (k.t != JV_STR) fail(x, line, "get(): the key must be a string, not %s", jv_type_name(k));
        jv *v = jv_obj_get(self, k.u.s->p, k.u.s->n);
        if (v) return *v;
        return a->npos > 1 ? a->pos[1] : JV_NULL;
    }
    if (!strcmp(m, "items")) return obj_items(x, self);
    if (!strcmp(m, "keys")) return obj_keys(x, self);
    if (!strcmp(m, "values")) return obj_values(x, self);
    /* dictsort(case_sensitive=false, by='key', reverse=false) */
    jv cs = arg(a, 0, "case_sensitive", jv_bool(0)), by = arg(a, 1, "by", JV_UNDEFINED),
       rev = arg(a, 2, "reverse", jv_bool(0));
    if (cs.t != JV_BOOL) fail(x, line, "dictsort(): case_sensitive must be a boolean");
    if (rev.t != JV_BOOL) fail(x, line, "dictsort(): reverse must be a boolean");
    int by_value = 0;
    if (by.t == JV_STR) {
        if (!strcmp(by.u.s->p, "value")) by_value = 1;
        else if (strcmp(by.u.s->p, "key")) fail(x, line, "dictsort(): by must be 'key' or 'value'");
    } else if (by.t != JV_UNDEF) {
        fail(x, line, "dictsort(): by must be a string");
    }
    jv items = obj_items(x, self);
    size_t n = items.u.a->n;
    jv *keys = ja_alloc(&x->a, (n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = items.u.a->v[i].u.a->v[by_value];
    sortctx c = {x, cs.u.b, rev.u.b, line, keys};
    /* sort indices through keys: sort_values sorts v by keys[] positions */
    sort_values(&c, items.u.a->v, n);
    return items;
}

static jv call_str_method(jx *x, jv self, const char *m, jargs *a, int line) {
    if (!strcmp(m, "upper")) return str_map_case(x, self.u.s, 1, 0);
    if (!strcmp(m, "lower")) return str_map_case(x, self.u.s, 0, 0);
    if (!strcmp(m, "strip")) return str_trim(x, self, 1, 1);
    if (!strcmp(m, "lstrip")) return str_trim(x, self, 1, 0);
    if (!strcmp(m, "rstrip")) return str_trim(x, self, 0, 1);
    if (!strcmp(m, "title")) return str_title(x, self);
    if (!strcmp(m, "capitalize")) return str_map_case(x, self.u.s, 1, 1);
    if (!strcmp(m, "startswith")) return jv_bool(str_affix(x, self, a, 0, "startswith", line));
    if (!strcmp(m, "endswith")) return jv_bool(str_affix(x, self, a, 1, "endswith", line));
    if (!strcmp(m, "split")) return str_split(x, self, a, line);
    /* replace(old, new, count=None) */
    if (a->npos < 2) fail(x, line, "replace() needs two arguments");
    jv o = a->pos[0], nw = a->pos[1], cnt = arg(a, 2, "count", JV_NULL);
    if (o.t != JV_STR || nw.t != JV_STR) fail(x, line, "replace(): the arguments must be strings");
    if (cnt.t != JV_INT && cnt.t != JV_NONE) fail(x, line, "replace(): count must be an integer or none");
    return str_replace(x, self.u.s, o.u.s, nw.u.s, cnt.t == JV_INT ? cnt.u.i : -1);
}

static jv call_value(jx *x, jv f, jargs *a, jenv *env, int line) {
    if (f.t != JV_FN) fail(x, line, "cannot call a %s: it is not a function", jv_type_name(f));
    jfn *fn = f.u.fn;
    switch (fn->kind) {
    case FN_NAMESPACE: return do_namespace(x, a, line);
    case FN_RANGE: return do_range(x, a, line);
    case FN_STRFTIME: return do_strftime(x, a, line);
    case FN_RAISE: {
        jbuf b = newbuf(x, line);
        for (size_t i = 0; i < a->npos; i++) {
            if (i) jb_add(&b, ",", 1);
            jv_print(&b, a->pos[i]);
        }
        jfailf(&x->fail, WB_ERR_ARG, line, "the template raised an error: %s", b.p ? b.p : "");
    }
    case FN_METHOD:
        if (fn->self.t == JV_STR) return call_str_method(x, fn->self, fn->method, a, line);
        return call_obj_method(x, fn->self, fn->method, a, line);
    case FN_MACRO: {
        if (++x->depth > x->prm.max_depth)
            jfailf(&x->fail, WB_ERR_RANGE, line, "macro calls nested deeper than %d levels", x->prm.max_depth);
        jenv *scope = env_new(x, env);
        char who[80];
        snprintf(who, sizeof who, "'%.60s'", fn->node->s);
        bind_params(x, who, &fn->node->list, &fn->node->list2, a, scope, line);
        jv r = render_body(x, &fn->node->list2, scope, fn->node->line);
        x->depth--;
        return r;
    }
    default: { /* FN_CALLER */
        if (++x->depth > x->prm.max_depth)
            jfailf(&x->fail, WB_ERR_RANGE, line, "macro calls nested deeper than %d levels", x->prm.max_depth);
        jenv *scope = env_new(x, fn->env);
        bind_params(x, "None", &fn->node->list, &fn->node->list2, a, scope, line);
        jv r = render_body(x, &fn->node->list2, scope, fn->node->line);
        x->depth--;
        return r;
    }
    }
}

/* ---- member access ------------------------------------------------------------------------------ */

static jv get_member(jx *x, jv obj, jv prop, int line) {
    if (obj.t == JV_OBJ) {
        if (prop.t != JV_STR) fail(x, line, "cannot look up a %s key in a %s", jv_type_name(prop), jv_type_name(obj));
        jv *v = jv_obj_get(obj, prop.u.s->p, prop.u.s->n);
        if (v) return *v;
        if (obj.sub != JO_NAMESPACE && is_obj_method(prop.u.s->p))
            return fn_value(x, FN_METHOD, ja_strndup(&x->a, prop.u.s->p, prop.u.s->n), obj, NULL, NULL);
        return JV_UNDEFINED;
    }
    if (obj.t == JV_ARR || obj.t == JV_STR) {
        if (prop.t == JV_INT) {
            if (obj.t == JV_ARR) {
                int64_t n = (int64_t)obj.u.a->n, i = prop.u.i < 0 ? prop.u.i + n : prop.u.i;
                return i >= 0 && i < n ? obj.u.a->v[i] : JV_UNDEFINED;
            }
            size_t cnt;
            size_t *off = cp_offsets(x, obj.u.s, &cnt);
            int64_t n = (int64_t)cnt, i = prop.u.i < 0 ? prop.u.i + n : prop.u.i;
            if (i < 0 || i >= n) return JV_UNDEFINED;
            return jv_str(&x->a, obj.u.s->p + off[i], off[i + 1] - off[i]);
        }
        if (prop.t == JV_STR) {
            if (!strcmp(prop.u.s->p, "length"))
                return jv_int(obj.t == JV_ARR ? (int64_t)obj.u.a->n : (int64_t)cp_count(obj.u.s));
            if (obj.t == JV_STR && is_str_method(prop.u.s->p))
                return fn_value(x, FN_METHOD, ja_strndup(&x->a, prop.u.s->p, prop.u.s->n), obj, NULL, NULL);
            return JV_UNDEFINED;
        }
        fail(x, line, "cannot index a %s with a %s", jv_type_name(obj), jv_type_name(prop));
    }
    if (prop.t != JV_STR) fail(x, line, "cannot look up a %s key in a %s", jv_type_name(prop), jv_type_name(obj));
    return JV_UNDEFINED;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static jv eval_slice(jx *x, jv obj, const jnode *s, jenv *env) {
    if (obj.t != JV_ARR && obj.t != JV_STR) fail(x, s->line, "cannot slice a %s", jv_type_name(obj));
    jv st = s->a ? eval(x, s->a, env) : JV_UNDEFINED, sp = s->b ? eval(x, s->b, env) : JV_UNDEFINED,
       stepv = s->c ? eval(x, s->c, env) : JV_UNDEFINED;
    if ((st.t != JV_INT && st.t != JV_UNDEF) || (sp.t != JV_INT && sp.t != JV_UNDEF) ||
        (stepv.t != JV_INT && stepv.t != JV_UNDEF))
        fail(x, s->line, "slice bounds must be integers");
    size_t *off = NULL, cnt;
    int64_t len;
    if (obj.t == JV_STR) {
        off = cp_offsets(x, obj.u.s, &cnt);
        len = (int64_t)cnt;
    } else {
        len = (int64_t)obj.u.a->n;
    }
    int64_t stp = stepv.t == JV_INT ? stepv.u.i : 1, dir = stp > 0 ? 1 : stp < 0 ? -1 : 0;
    int64_t a, b;
    if (dir >= 0) {
        a = st.t == JV_INT ? st.u.i : 0;
        a = a < 0 ? clamp64(len + a, 0, len) : clamp64(a, 0, len);
        b = sp.t == JV_INT ? sp.u.i : len;
        b = b < 0 ? clamp64(len + b, 0, len) : clamp64(b, 0, len);
    } else {
        a = st.t == JV_INT ? st.u.i : len - 1;
        a = a < 0 ? clamp64(len + a, -1, len) : clamp64(a, -1, len - 1);
        b = sp.t == JV_INT ? sp.u.i : -1;
        b = b < -1 ? clamp64(len + b, -1, len) : clamp64(b, -1, len - 1);
    }
    if (obj.t == JV_ARR) {
        jv r = jv_arr_new(&x->a, 0, JA_LIST);
        if (dir != 0)
            for (int64_t i = a; dir * i < dir * b; i += stp) jv_arr_push(&x->a, r, obj.u.a->v[i]);
        return r;
    }
    jbuf out = newbuf(x, s->line);
    if (dir != 0)
        for (int64_t i = a; dir * i < dir * b; i += stp) jb_add(&out, obj.u.s->p + off[i], off[i + 1] - off[i]);
    return jb_take(&out);
}

/* ---- tests --------------------------------------------------------------------------------------- */

static int run_test(jx *x, const char *name, jv v, jargs *a, int line) {
    jv b = arg(a, 0, NULL, JV_UNDEFINED);
    if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
    if (!strcmp(name, "none")) return v.t == JV_NONE;
    if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
    if (!strcmp(name, "true")) return v.t == JV_BOOL && v.u.b;
    if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.u.b;
    if (!strcmp(name, "string")) return v.t == JV_STR;
    if (!strcmp(name, "number")) return is_num(v);
    if (!strcmp(name, "integer")) return v.t == JV_INT;
    if (!strcmp(name, "float")) return v.t == JV_FLOAT;
    if (!strcmp(name, "mapping")) return v.t == JV_OBJ && v.sub != JO_NAMESPACE;
    if (!strcmp(name, "iterable")) return (v.t == JV_ARR && v.sub == JA_LIST) || v.t == JV_STR;
    if (!strcmp(name, "sequence")) return v.t == JV_ARR || v.t == JV_STR || (v.t == JV_OBJ && v.sub != JO_NAMESPACE);
    if (!strcmp(name, "callable")) return v.t == JV_FN;
    if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t != JV_INT) fail(x, line, "test '%s' needs an integer, not %s", name, jv_type_name(v));
        return (v.u.i % 2 != 0) == (name[0] == 'o');
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (v.t != JV_STR) return 0;
        jv m = str_map_case(x, v.u.s, name[0] == 'u', 0);
        return str_eq(m.u.s, v.u.s);
    }
    if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "sameas")) return strict_eq(v, b);
    if (!strcmp(name, "ne")) return !strict_eq(v, b);
    if (!strcmp(name, "divisibleby")) {
        if (v.t != JV_INT || b.t != JV_INT || b.u.i == 0) fail(x, line, "test 'divisibleby' needs two integers");
        return v.u.i % b.u.i == 0;
    }
    fail(x, line, "unknown test '%s'", name);
}

/* ---- filters ------------------------------------------------------------------------------------- */

static jv attr_path(jv item, const jstr *path) {
    const char *p = path->p, *end = path->p + path->n;
    jv v = item;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        if (v.t == JV_OBJ) {
            jv *g = jv_obj_get(v, p, n);
            v = g ? *g : JV_UNDEFINED;
        } else if (v.t == JV_ARR) {
            char tmp[24];
            if (n == 0 || n >= sizeof tmp) return JV_UNDEFINED;
            memcpy(tmp, p, n);
            tmp[n] = 0;
            char *e;
            long long i = strtoll(tmp, &e, 10);
            if (e == tmp || i < 0 || (size_t)i >= v.u.a->n) return JV_UNDEFINED;
            v = v.u.a->v[i];
        } else {
            return JV_UNDEFINED;
        }
        if (!dot) break;
        p = dot + 1;
    }
    return v;
}

static jv parse_int_js(jx *x, const jstr *s, jv dflt) {
    size_t a, e;
    js_trim(s->p, s->n, 1, 0, &a, &e);
    const char *p = s->p + a;
    int neg = 0;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (!(*p >= '0' && *p <= '9')) return dflt;
    double v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
    (void)x;
    if (neg) v = -v;
    if (fabs(v) < 9.2e18) return jv_int((int64_t)v);
    return jv_float(v);
}

static jv parse_float_js(const jstr *s, jv dflt) {
    size_t a, e;
    js_trim(s->p, s->n, 1, 0, &a, &e);
    const char *p = s->p + a;
    const char *q = p + (*p == '+' || *p == '-');
    if (!strncmp(q, "Infinity", 8)) return jv_float(*p == '-' ? -INFINITY : INFINITY);
    if (!((*q >= '0' && *q <= '9') || (*q == '.' && q[1] >= '0' && q[1] <= '9'))) return dflt;
    if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) return jv_float(0);
    char *end;
    double d = strtod(p, &end);
    return jv_float(d);
}

static jv filter_tojson(jx *x, jv v, jargs *a, int line) {
    jjson_opts o = {.indent = -1, .undefined_as_null = 1};
    jv ind = arg(a, 99, "indent", JV_NULL), ea = arg(a, 99, "ensure_ascii", jv_bool(0)),
       sk = arg(a, 99, "sort_keys", jv_bool(0)), sep = arg(a, 99, "separators", JV_NULL);
    if (ind.t != JV_INT && ind.t != JV_NONE) fail(x, line, "tojson: indent must be an integer");
    if (ea.t != JV_BOOL) fail(x, line, "tojson: ensure_ascii must be a boolean");
    if (sk.t != JV_BOOL) fail(x, line, "tojson: sort_keys must be a boolean");
    if (ind.t == JV_INT) {
        if (ind.u.i > 64) fail(x, line, "tojson: indent larger than 64");
        o.indent = ind.u.i;
    }
    o.ensure_ascii = ea.u.b;
    o.sort_keys = sk.u.b;
    if (sep.t == JV_ARR) {
        if (sep.u.a->n != 2 || sep.u.a->v[0].t != JV_STR || sep.u.a->v[1].t != JV_STR)
            fail(x, line, "tojson: separators must be a pair of strings");
        o.item_sep = sep.u.a->v[0].u.s->p;
        o.key_sep = sep.u.a->v[1].u.s->p;
    } else if (sep.t != JV_NONE) {
        fail(x, line, "tojson: separators must be a pair of strings");
    }
    jbuf b = newbuf(x, line);
    jv_tojson(&b, v, &o, 0, line);
    return jb_take(&b);
}

static jv filter_indent(jx *x, jv v, jargs *a, int line) {
    jv w = arg(a, 0, "width", jv_int(4)), first = arg(a, 1, "first", jv_bool(0)), blank = arg(a, 2, "blank", jv_bool(0));
    if (w.t != JV_INT || w.u.i < 0 || w.u.i > 1024) fail(x, line, "indent: width must be an integer from 0 to 1024");
    jbuf b = newbuf(x, line);
    const char *p = v.u.s->p, *end = p + v.u.s->n;
    for (int li = 0;; li++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (!((!jv_truthy(first) && li == 0) || (!jv_truthy(blank) && n == 0)))
            for (int64_t k = 0; k < w.u.i; k++) jb_add(&b, " ", 1);
        jb_add(&b, p, n);
        if (!nl) break;
        jb_add(&b, "\n", 1);
        p = nl + 1;
    }
    return jb_take(&b);
}

static jv select_attr(jx *x, jv v, const jnode *call, jenv *env, int select, int line) {
    const char *fname = select ? "selectattr" : "rejectattr";
    for (size_t i = 0; i < v.u.a->n; i++)
        if (v.u.a->v[i].t != JV_OBJ) fail(x, line, "%s can only filter a list of mappings", fname);
    jv av[3] = {JV_UNDEFINED, JV_UNDEFINED, JV_UNDEFINED};
    size_t na = call->list.n;
    if (na < 1 || na > 3) fail(x, line, "%s takes 1 to 3 arguments", fname);
    for (size_t i = 0; i < na; i++) av[i] = eval(x, call->list.v[i], env);
    if (av[0].t != JV_STR || (na > 1 && av[1].t != JV_STR)) fail(x, line, "%s: the attribute and test must be strings", fname);
    jv r = jv_arr_new(&x->a, 0, JA_LIST);
    for (size_t i = 0; i < v.u.a->n; i++) {
        step(x, line);
        jv *g = jv_obj_get(v.u.a->v[i], av[0].u.s->p, av[0].u.s->n);
        int ok = 0;
        if (g) {
            if (na > 1) {
                jargs ta = {.pos = &av[2], .npos = na > 2 ? 1 : 0, .kw = JV_UNDEFINED};
                ok = run_test(x, av[1].u.s->p, *g, &ta, line);
            } else {
                ok = jv_truthy(*g);
            }
        }
        if (ok == select) jv_arr_push(&x->a, r, v.u.a->v[i]);
    }
    return r;
}

static jv apply_filter(jx *x, jv v, const jnode *f, jenv *env);

static jv filter_map(jx *x, jv v, const jnode *call, jargs *a, jenv *env, int line) {
    jv r = jv_arr_new(&x->a, 0, JA_LIST);
    jv at = arg(a, 99, "attribute", JV_UNDEFINED);
    if (at.t != JV_UNDEF) {
        if (at.t != JV_STR) fail(x, line, "map: attribute must be a string");
        jv *dflt = a->kw.t == JV_OBJ ? jv_obj_get(a->kw, "default", 7) : NULL;
        for (size_t i = 0; i < v.u.a->n; i++) {
            jv it = v.u.a->v[i];
            if (it.t != JV_OBJ) fail(x, line, "map(attribute=...) needs a list of mappings");
            jv g = attr_path(it, at.u.s);
            jv_arr_push(&x->a, r, g.t == JV_UNDEF && dflt ? *dflt : g);
        }
        return r;
    }
    /* Jinja2's map('filter', args...): apply a named filter to each item */
    if (a->npos >= 1 && a->pos[0].t == JV_STR) {
        jnode fn = {.kind = N_IDENT, .line = line, .s = a->pos[0].u.s->p, .n = a->pos[0].u.s->n};
        if (call->list.n > 1) fail(x, line, "map('%s', ...) with arguments is not supported", fn.s);
        for (size_t i = 0; i < v.u.a->n; i++) jv_arr_push(&x->a, r, apply_filter(x, v.u.a->v[i], &fn, env));
        return r;
    }
    fail(x, line, "map needs attribute= or a filter name");
}

static jv filter_sort(jx *x, jv v, jargs *a, int line) {
    jv rev = arg(a, 0, "reverse", jv_bool(0)), cs = arg(a, 1, "case_sensitive", jv_bool(0)),
       at = arg(a, 2, "attribute", JV_NULL);
    if (rev.t != JV_BOOL || cs.t != JV_BOOL) fail(x, line, "sort: reverse and case_sensitive must be booleans");
    size_t n = v.u.a->n;
    jv r = jv_arr_new(&x->a, n, JA_LIST);
    for (size_t i = 0; i < n; i++) jv_arr_push(&x->a, r, v.u.a->v[i]);
    jv *keys = ja_alloc(&x->a, (n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        if (at.t == JV_NONE) keys[i] = v.u.a->v[i];
        else if (at.t == JV_STR) keys[i] = attr_path(v.u.a->v[i], at.u.s);
        else if (at.t == JV_INT) {
            char t[24];
            snprintf(t, sizeof t, "%lld", (long long)at.u.i);
            keys[i] = attr_path(v.u.a->v[i], jv_cstr(&x->a, t).u.s);
        } else fail(x, line, "sort: attribute must be a string or an integer");
    }
    sortctx c = {x, cs.u.b, rev.u.b, line, keys};
    sort_values(&c, r.u.a->v, n);
    return r;
}

/* Identifier filters (no arguments) and called filters share one dispatcher: `call` is the
 * N_CALL node of `x|name(args)` or NULL for `x|name`. */
static jv apply_filter(jx *x, jv v, const jnode *f, jenv *env) {
    int line = f->line;
    const jnode *call = NULL;
    const char *name;
    if (f->kind == N_CALL) {
        call = f;
        if (f->a->kind != N_IDENT) fail(x, line, "a filter must be a name");
        name = f->a->s;
    } else {
        name = f->s;
    }
    if (!name) fail(x, line, "a filter must be a name");
    step(x, line);
    jargs a = {.pos = NULL, .npos = 0, .kw = JV_UNDEFINED};
    if (call && strcmp(name, "selectattr") && strcmp(name, "rejectattr")) eval_args(x, &call->list, env, &a);

    if (!strcmp(name, "safe")) return v;
    if (!strcmp(name, "tojson")) return filter_tojson(x, v, &a, line);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv dv = arg(&a, 0, "default_value", jv_cstr(&x->a, "")), bo = arg(&a, 1, "boolean", jv_bool(0));
        if (bo.t != JV_BOOL) fail(x, line, "default: the boolean flag must be a boolean");
        if (v.t == JV_UNDEF || (bo.u.b && !jv_truthy(v))) return dv;
        return v;
    }
    if (call && !strcmp(name, "join") && (v.t == JV_STR || v.t == JV_ARR)) {
        jv sep = arg(&a, 0, "separator", jv_str(&x->a, "", 0));
        if (sep.t != JV_STR) fail(x, line, "join: the separator must be a string");
        jbuf b = newbuf(x, line);
        if (v.t == JV_STR) {
            size_t i = 0, l;
            while (i < v.u.s->n) {
                if (i) jb_add(&b, sep.u.s->p, sep.u.s->n);
                ju_decode(v.u.s->p + i, v.u.s->n - i, &l);
                jb_add(&b, v.u.s->p + i, l);
                i += l;
            }
        } else {
            for (size_t i = 0; i < v.u.a->n; i++) {
                if (i) jb_add(&b, sep.u.s->p, sep.u.s->n);
                raw_string(x, &b, v.u.a->v[i]);
            }
        }
        return jb_take(&b);
    }
    if (call && (!strcmp(name, "int") || !strcmp(name, "float"))) {
        int is_int = name[0] == 'i';
        jv dflt = arg(&a, 0, "default", is_int ? jv_int(0) : jv_float(0));
        if (v.t == JV_STR) return is_int ? parse_int_js(x, v.u.s, dflt) : parse_float_js(v.u.s, dflt);
        if (is_num(v)) return v;
        if (v.t == JV_BOOL) return is_int ? jv_int(v.u.b) : jv_float(v.u.b);
        fail(x, line, "filter '%s' cannot convert a %s", name, jv_type_name(v));
    }

    if (v.t == JV_ARR) {
        if (!strcmp(name, "list")) return v;
        if (!strcmp(name, "first")) return v.u.a->n ? v.u.a->v[0] : JV_UNDEFINED;
        if (!strcmp(name, "last")) return v.u.a->n ? v.u.a->v[v.u.a->n - 1] : JV_UNDEFINED;
        if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int((int64_t)v.u.a->n);
        if (!strcmp(name, "reverse")) {
            jv r = jv_arr_new(&x->a, v.u.a->n, JA_LIST);
            for (size_t i = v.u.a->n; i > 0; i--) jv_arr_push(&x->a, r, v.u.a->v[i - 1]);
            return r;
        }
        if (!strcmp(name, "sort")) return filter_sort(x, v, &a, line);
        if (!strcmp(name, "join")) {
            jbuf b = newbuf(x, line);
            for (size_t i = 0; i < v.u.a->n; i++) raw_string(x, &b, v.u.a->v[i]);
            return jb_take(&b);
        }
        if (!strcmp(name, "string")) {
            jbuf b = newbuf(x, line);
            jjson_opts o = {.indent = -1};
            jv_tojson(&b, v, &o, 0, line);
            return jb_take(&b);
        }
        if (!strcmp(name, "unique")) {
            jv r = jv_arr_new(&x->a, 0, JA_LIST);
            for (size_t i = 0; i < v.u.a->n; i++) {
                int seen = 0;
                for (size_t k = 0; k < r.u.a->n && !seen; k++) {
                    step(x, line);
                    seen = strict_eq(r.u.a->v[k], v.u.a->v[i]);
                }
                if (!seen) jv_arr_push(&x->a, r, v.u.a->v[i]);
            }
            return r;
        }
        if (call && (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")))
            return select_attr(x, v, call, env, name[0] == 's', line);
        if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) fail(x, line, "%s needs an attribute", name);
        if (call && !strcmp(name, "map")) return filter_map(x, v, call, &a, env, line);
        fail(x, line, "unknown filter '%s' for a list", name);
    }
    if (v.t == JV_STR) {
        if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int((int64_t)cp_count(v.u.s));
        if (!strcmp(name, "upper")) return str_map_case(x, v.u.s, 1, 0);
        if (!strcmp(name, "lower")) return str_map_case(x, v.u.s, 0, 0);
        if (!strcmp(name, "title")) return str_title(x, v);
        if (!strcmp(name, "capitalize")) return str_map_case(x, v.u.s, 1, 1);
        if (!strcmp(name, "trim")) return str_trim(x, v, 1, 1);
        if (!strcmp(name, "indent")) return filter_indent(x, v, &a, line);
        if (!strcmp(name, "join") || !strcmp(name, "string")) return v;
        if (!strcmp(name, "int")) return parse_int_js(x, v.u.s, jv_int(0));
        if (!strcmp(name, "float")) return parse_float_js(v.u.s, jv_float(0));
        if (call && !strcmp(name, "replace")) return call_str_method(x, v, "replace", &a, line);
        if (!strcmp(name, "list")) {
            jv r = jv_arr_new(&x->a, 0, JA_LIST);
            size_t i = 0, l;
            while (i < v.u.s->n) {
                ju_decode(v.u.s->p + i, v.u.s->n - i, &l);
                jv_arr_push(&x->a, r, jv_str(&x->a, v.u.s->p + i, l));
                i += l;
            }
            return r;
        }
        fail(x, line, "unknown filter '%s' for a string", name);
    }
    if (is_num(v)) {
        if (!strcmp(name, "abs")) return v.t == JV_INT ? jv_int(v.u.i < 0 ? -v.u.i : v.u.i) : jv_float(fabs(v.u.f));
        if (!strcmp(name, "int")) return v.t == JV_INT ? v : fabs(v.u.f) < 9.2e18 ? jv_int((int64_t)floor(v.u.f)) : v;
        if (!strcmp(name, "float")) return jv_float(num(v));
        if (!strcmp(name, "string")) return to_string(x, v);
        fail(x, line, "unknown filter '%s' for a number", name);
    }
    if (v.t == JV_OBJ && v.sub != JO_NAMESPACE) {
        if (!strcmp(name, "items")) return obj_items(x, v);
        if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int((int64_t)v.u.o->n);
        if (is_obj_method(name)) return call_obj_method(x, v, name, &a, line);
        fail(x, line, "unknown filter '%s' for a mapping", name);
    }
    if (v.t == JV_BOOL) {
        if (!strcmp(name, "bool")) return v;
        if (!strcmp(name, "int")) return jv_int(v.u.b);
        if (!strcmp(name, "float")) return jv_float(v.u.b);
        if (!strcmp(name, "string")) return jv_cstr(&x->a, v.u.b ? "true" : "false");
        fail(x, line, "unknown filter '%s' for a boolean", name);
    }
    fail(x, line, "cannot apply filter '%s' to %s", name, jv_type_name(v));
}

/* ---- expressions ---------------------------------------------------------------------------------- */

static jv concat(jx *x, jv l, jv r, int line) {
    jbuf b = newbuf(x, line);
    raw_string(x, &b, l);
    raw_string(x, &b, r);
    return jb_take(&b);
}

static jv arith(jx *x, jop op, jv l, jv r, int line) {
    int fl = l.t == JV_FLOAT || r.t == JV_FLOAT;
    if (!fl && (op == OP_ADD || op == OP_SUB || op == OP_MUL)) {
        int64_t out;
        int ovf = op == OP_ADD ? __builtin_add_overflow(l.u.i, r.u.i, &out)
                  : op == OP_SUB ? __builtin_sub_overflow(l.u.i, r.u.i, &out)
                                 : __builtin_mul_overflow(l.u.i, r.u.i, &out);
        if (!ovf) return jv_int(out);
    }
    double a = num(l), b = num(r);
    switch (op) {
    case OP_ADD: return jv_float(a + b);
    case OP_SUB: return jv_float(a - b);
    case OP_MUL: return jv_float(a * b);
    case OP_DIV: return jv_float(a / b);
    case OP_FLOORDIV:
        if (!fl) {
            if (r.u.i == 0) fail(x, line, "integer division by zero");
            if (!(l.u.i == INT64_MIN && r.u.i == -1)) {
                int64_t q = l.u.i / r.u.i;
                if ((l.u.i % r.u.i != 0) && ((l.u.i < 0) != (r.u.i < 0))) q--;
                return jv_int(q);
            }
        }
        return jv_float(floor(a / b));
    case OP_MOD:
        if (!fl) {
            if (r.u.i == 0) fail(x, line, "integer modulo by zero");
            if (r.u.i == -1) return jv_int(0);
            return jv_int(l.u.i % r.u.i);
        }
        return jv_float(fmod(a, b));
    default: return JV_UNDEFINED;
    }
}

static jv eval_binary(jx *x, const jnode *n, jenv *env) {
    jv l = eval(x, n->a, env);
    if (n->op == OP_AND) return jv_truthy(l) ? eval(x, n->b, env) : l;
    if (n->op == OP_OR) return jv_truthy(l) ? l : eval(x, n->b, env);
    jv r = eval(x, n->b, env);
    int line = n->line;
    switch (n->op) {
    case OP_EQ: return jv_bool(loose_eq(l, r));
    case OP_NE: return jv_bool(!loose_eq(l, r));
    default: break;
    }
    if (n->op == OP_IN || n->op == OP_NOTIN) {
        int neg = n->op == OP_NOTIN, found;
        if (r.t == JV_UNDEF) return jv_bool(neg);
        if (r.t == JV_ARR) {
            found = 0;
            for (size_t i = 0; i < r.u.a->n && !found; i++) found = strict_eq(r.u.a->v[i], l);
            return jv_bool(found != neg);
        }
        if (r.t == JV_STR && l.t == JV_STR) return jv_bool((find_bytes(r.u.s->p, r.u.s->n, l.u.s->p, l.u.s->n) != NULL) != neg);
        if (r.t == JV_OBJ && l.t == JV_STR) return jv_bool((jv_obj_get(r, l.u.s->p, l.u.s->n) != NULL) != neg);
        if (r.t == JV_OBJ && (l.t == JV_UNDEF || l.t == JV_NONE)) return jv_bool(neg);
        fail(x, line, "cannot test whether a %s is in a %s", jv_type_name(l), jv_type_name(r));
    }
    if (l.t == JV_UNDEF || r.t == JV_UNDEF) fail(x, line, "cannot apply an operator to an undefined value");
    if (l.t == JV_NONE || r.t == JV_NONE) fail(x, line, "cannot apply an operator to none");
    if (n->op == OP_CONCAT) return concat(x, l, r, line);
    int ln = is_num(l), rn = is_num(r);
    if (n->op == OP_POW && (ln || l.t == JV_BOOL) && (rn || r.t == JV_BOOL)) {
        double a = num(l), b = num(r);
        if (a == 0 && b < 0) fail(x, line, "0.0 cannot be raised to a negative power");
        double p = pow(a, b);
        if (!isfinite(p)) fail(x, line, "the power is not a finite number");
        if (l.t == JV_FLOAT || r.t == JV_FLOAT || b < 0 || fabs(p) >= 9.2e18) return jv_float(p);
        return jv_int((int64_t)p);
    }
    if (ln && rn) {
        switch (n->op) {
        case OP_LT: return jv_bool(num(l) < num(r));
        case OP_GT: return jv_bool(num(l) > num(r));
        case OP_LE: return jv_bool(num(l) <= num(r));
        case OP_GE: return jv_bool(num(l) >= num(r));
        default: return arith(x, n->op, l, r, line);
        }
    }
    if (l.t == JV_ARR && r.t == JV_ARR && n->op == OP_ADD) {
        jv out = jv_arr_new(&x->a, l.u.a->n + r.u.a->n, JA_LIST);
        for (size_t i = 0; i < l.u.a->n; i++) jv_arr_push(&x->a, out, l.u.a->v[i]);
        for (size_t i = 0; i < r.u.a->n; i++) jv_arr_push(&x->a, out, r.u.a->v[i]);
        return out;
    }
    if ((l.t == JV_STR || r.t == JV_STR) && n->op == OP_ADD) return concat(x, l, r, line);
    if (l.t == JV_STR && r.t == JV_STR && (n->op == OP_LT || n->op == OP_GT || n->op == OP_LE || n->op == OP_GE)) {
        int c = str_cmp_ci(x, l, r, 1);
        return jv_bool(n->op == OP_LT ? c < 0 : n->op == OP_GT ? c > 0 : n->op == OP_LE ? c <= 0 : c >= 0);
    }
    static const char *const names[] = {"or", "and", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "+",
                                        "-",  "~",   "*",  "/",  "//", "%", "**", "not", "-", "+"};
    fail(x, line, "unsupported operator '%s' between %s and %s", names[n->op], jv_type_name(l), jv_type_name(r));
}

static jv eval(jx *x, const jnode *n, jenv *env) {
    step(x, n->line);
    x->line = n->line;
    if (++x->depth > x->prm.max_depth)
        jfailf(&x->fail, WB_ERR_RANGE, n->line, "the template nests expressions deeper than %d levels", x->prm.max_depth);
    jv r;
    switch (n->kind) {
    case N_INT: r = jv_int(n->i); break;
    case N_FLOAT: r = jv_float(n->f); break;
    case N_STR: r = jv_str(&x->a, n->s, n->n); break;
    case N_IDENT: r = env_get(env, n->s, n->n); break;
    case N_ARRAY:
    case N_TUPLE:
        r = jv_arr_new(&x->a, n->list.n, n->kind == N_TUPLE ? JA_TUPLE : JA_LIST);
        for (size_t i = 0; i < n->list.n; i++) jv_arr_push(&x->a, r, eval(x, n->list.v[i], env));
        break;
    case N_DICT:
        r = jv_obj_new(&x->a, JO_DICT);
        for (size_t i = 0; i < n->list.n; i++) {
            jv k = eval(x, n->list.v[i], env);
            if (k.t != JV_STR) fail(x, n->line, "dict keys must be strings, not %s", jv_type_name(k));
            jv_obj_set(&x->a, r, k.u.s->p, k.u.s->n, eval(x, n->list2.v[i], env));
        }
        break;
    case N_MEMBER: {
        jv obj = eval(x, n->a, env);
        if (n->flag && n->b->kind == N_SLICE) {
            r = eval_slice(x, obj, n->b, env);
            break;
        }
        jv prop;
        if (n->flag) prop = eval(x, n->b, env);
        else if (n->b->kind == N_INT) prop = jv_int(n->b->i);
        else prop = jv_str(&x->a, n->b->s, n->b->n);
        r = get_member(x, obj, prop, n->line);
        break;
    }
    case N_CALL: {
        jargs a;
        eval_args(x, &n->list, env, &a);
        jv f = eval(x, n->a, env);
        x->line = n->line;
        r = call_value(x, f, &a, env, n->line);
        break;
    }
    case N_UNARY: {
        jv v = eval(x, n->a, env);
        if (n->op == OP_NOT) {
            r = jv_bool(!jv_truthy(v));
        } else if (v.t == JV_INT || v.t == JV_BOOL) {
            int64_t i = v.t == JV_BOOL ? v.u.b : v.u.i;
            r = n->op == OP_NEG ? (i == INT64_MIN ? jv_float(-(double)i) : jv_int(-i)) : jv_int(i);
        } else if (v.t == JV_FLOAT) {
            r = jv_float(n->op == OP_NEG ? -v.u.f : v.u.f);
        } else {
            fail(x, n->line, "unary %s needs a number, not %s", n->op == OP_NEG ? "-" : "+", jv_type_name(v));
        }
        break;
    }
    case N_BINARY: r = eval_binary(x, n, env); break;
    case N_FILTER: r = apply_filter(x, eval(x, n->a, env), n->b, env); break;
    case N_TEST: {
        jv v = eval(x, n->a, env);
        jargs a = {.pos = NULL, .npos = 0, .kw = JV_UNDEFINED};
        if (n->list.n) eval_args(x, &n->list, env, &a);
        r = jv_bool(run_test(x, n->s, v, &a, n->line) != n->flag);
        break;
    }
    case N_SELECT: r = jv_truthy(eval(x, n->b, env)) ? eval(x, n->a, env) : JV_UNDEFINED; break;
    case N_TERNARY: r = jv_truthy(eval(x, n->a, env)) ? eval(x, n->b, env) : eval(x, n->c, env); break;
    case N_SLICE: fail(x, n->line, "a slice outside a subscript");
    case N_KWARG:
    case N_SPREAD:
    case N_KWSPREAD: fail(x, n->line, "an argument outside a call");
    default: fail(x, n->line, "a statement used as an expression");
    }
    x->depth--;
    return r;
}

/* ---- statements ------------------------------------------------------------------------------------ */

static void assign(jx *x, const jnode *target, jv v, jenv *env, int line) {
    if (target->kind == N_IDENT) {
        env_set(x, env, target->s, target->n, v);
    } else if (target->kind == N_TUPLE) {
        if (v.t != JV_ARR) fail(x, line, "cannot unpack a %s in {%% set %%}", jv_type_name(v));
        if (v.u.a->n != target->list.n)
            fail(x, line, "too %s values to unpack in {%% set %%}", target->list.n > v.u.a->n ? "few" : "many");
        for (size_t i = 0; i < target->list.n; i++) {
            if (target->list.v[i]->kind != N_IDENT) fail(x, line, "can only unpack into names");
            env_set(x, env, target->list.v[i]->s, target->list.v[i]->n, v.u.a->v[i]);
        }
    } else if (target->kind == N_MEMBER) {
        jv obj = eval(x, target->a, env);
        if (obj.t != JV_OBJ || obj.sub != JO_NAMESPACE)
            fail(x, line, "{%% set a.b = ... %%} needs a namespace(), not %s", jv_type_name(obj));
        if (target->flag || target->b->kind != N_IDENT) fail(x, line, "{%% set %%} of a namespace needs an attribute name");
        jv_obj_set(&x->a, obj, target->b->s, target->b->n, v);
    } else {
        fail(x, line, "cannot assign to this expression in {%% set %%}");
    }
}

static void bind_loopvar(jx *x, const jnode *var, jv item, jenv *scope, int line) {
    if (var->kind == N_IDENT) {
        env_set(x, scope, var->s, var->n, item);
        return;
    }
    if (item.t != JV_ARR) fail(x, line, "cannot unpack a %s into the loop variables", jv_type_name(item));
    if (item.u.a->n != var->list.n)
        fail(x, line, "too %s values to unpack into the loop variables", var->list.n > item.u.a->n ? "few" : "many");
    for (size_t i = 0; i < var->list.n; i++) {
        if (var->list.v[i]->kind != N_IDENT) fail(x, line, "loop variables must be names");
        env_set(x, scope, var->list.v[i]->s, var->list.v[i]->n, item.u.a->v[i]);
    }
}

static void exec_for(jx *x, const jnode *n, jenv *env, jbuf *out) {
    jenv *scope = env_new(x, env);
    const jnode *test = NULL, *src = n->b;
    if (src->kind == N_SELECT) {
        test = src->b;
        src = src->a;
    }
    jv it = eval(x, src, scope);
    if (it.t == JV_OBJ && it.sub != JO_NAMESPACE) it = obj_keys(x, it);
    else if (it.t == JV_STR) {
        jv r = jv_arr_new(&x->a, 0, JA_LIST);
        size_t i = 0, l;
        while (i < it.u.s->n) {
            ju_decode(it.u.s->p + i, it.u.s->n - i, &l);
            jv_arr_push(&x->a, r, jv_str(&x->a, it.u.s->p + i, l));
            i += l;
        }
        it = r;
    } else if (it.t != JV_ARR) {
        fail(x, n->line, "{%% for %%} cannot iterate over %s", jv_type_name(it));
    }
    jv items = it;
    if (test) {
        items = jv_arr_new(&x->a, 0, JA_LIST);
        for (size_t i = 0; i < it.u.a->n; i++) {
            jenv *ls = env_new(x, scope);
            bind_loopvar(x, n->a, it.u.a->v[i], ls, n->line);
            if (jv_truthy(eval(x, test, ls))) jv_arr_push(&x->a, items, it.u.a->v[i]);
        }
    }
    size_t len = items.u.a->n;
    int none = 1;
    /* one loop object and one iteration buffer, updated in place: per-iteration garbage would
     * otherwise grow with the number of iterations */
    jv loop = jv_obj_new(&x->a, JO_DICT);
    jbuf b = newbuf(x, n->line);
    for (size_t i = 0; i < len; i++) {
        step(x, n->line);
        jv_obj_set(&x->a, loop, "index", 5, jv_int((int64_t)i + 1));
        jv_obj_set(&x->a, loop, "index0", 6, jv_int((int64_t)i));
        jv_obj_set(&x->a, loop, "revindex", 8, jv_int((int64_t)(len - i)));
        jv_obj_set(&x->a, loop, "revindex0", 9, jv_int((int64_t)(len - i - 1)));
        jv_obj_set(&x->a, loop, "first", 5, jv_bool(i == 0));
        jv_obj_set(&x->a, loop, "last", 4, jv_bool(i == len - 1));
        jv_obj_set(&x->a, loop, "length", 6, jv_int((int64_t)len));
        jv_obj_set(&x->a, loop, "previtem", 8, i > 0 ? items.u.a->v[i - 1] : JV_UNDEFINED);
        jv_obj_set(&x->a, loop, "nextitem", 8, i + 1 < len ? items.u.a->v[i + 1] : JV_UNDEFINED);
        env_set(x, scope, "loop", 4, loop);
        bind_loopvar(x, n->a, items.u.a->v[i], scope, n->line);
        b.n = 0;
        exec_block(x, &n->list, scope, &b);
        if (x->ctl == 2) { /* continue: this iteration's output is dropped, as in the reference */
            x->ctl = 0;
            continue;
        }
        if (x->ctl == 1) {
            x->ctl = 0;
            break;
        }
        if (b.n) jb_add(out, b.p, b.n);
        none = 0;
    }
    if (none) exec_block(x, &n->list2, scope, out);
}

static void exec_stmt(jx *x, const jnode *n, jenv *env, jbuf *out) {
    step(x, n->line);
    x->line = n->line;
    out->line = n->line;
    if (++x->depth > x->prm.max_depth)
        jfailf(&x->fail, WB_ERR_RANGE, n->line, "the template nests blocks deeper than %d levels", x->prm.max_depth);
    switch (n->kind) {
    case N_TEXT: jb_add(out, n->s, n->n); break;
    case N_COMMENT: break;
    case N_IF: {
        /* an elif chain is a list of one N_IF with flag set: walk it iteratively */
        const jnode *c = n;
        for (;;) {
            if (jv_truthy(eval(x, c->a, env))) {
                exec_block(x, &c->list, env, out);
                break;
            }
            if (c->list2.n == 1 && c->list2.v[0]->kind == N_IF && c->list2.v[0]->flag) {
                c = c->list2.v[0];
                continue;
            }
            exec_block(x, &c->list2, env, out);
            break;
        }
        break;
    }
    case N_FOR: exec_for(x, n, env, out); break;
    case N_SET: {
        jv v = n->b ? eval(x, n->b, env) : render_body(x, &n->list, env, n->line);
        assign(x, n->a, v, env, n->line);
        break;
    }
    case N_MACRO: env_set(x, env, n->s, n->n, fn_value(x, FN_MACRO, NULL, JV_UNDEFINED, n, NULL)); break;
    case N_CALLSTMT: {
        jv caller = fn_value(x, FN_CALLER, NULL, JV_UNDEFINED, n, env);
        jargs a;
        eval_args(x, &n->a->list, env, &a);
        jv f = eval(x, n->a->a, env);
        jenv *ne = env_new(x, env);
        env_set(x, ne, "caller", 6, caller);
        jv r = call_value(x, f, &a, ne, n->line);
        jv_print(out, r);
        break;
    }
    case N_BREAK: x->ctl = 1; break;
    case N_CONTINUE: x->ctl = 2; break;
    case N_FILTERSTMT: {
        jv body = render_body(x, &n->list, env, n->line);
        jv_print(out, apply_filter(x, body, n->a, env));
        break;
    }
    default: {
        jv v = eval(x, n, env);
        out->line = n->line;
        jv_print(out, v);
    }
    }
    x->depth--;
}

static void exec_block(jx *x, const jlist *body, jenv *env, jbuf *out) {
    for (size_t i = 0; i < body->n && !x->ctl; i++) exec_stmt(x, body->v[i], env, out);
}

/* ---- API ------------------------------------------------------------------------------------------- */

wb_jinja_params wb_jinja_default_params(void) {
    return (wb_jinja_params){.max_output = 16u << 20, .max_memory = 256u << 20, .max_steps = 20000000,
                             .max_depth = 256, .now = -1};
}

wb_status wb_jinja_parse(const char *src, size_t len, const char *name, wb_jinja **out, wb_err *err) {
    if (!out || (!src && len)) return wb_err_set(err, WB_ERR_ARG, "wb_jinja_parse: NULL argument");
    *out = NULL;
    if (!name) name = "template";
    if (len > MAX_TEMPLATE_BYTES)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: the template is larger than %u bytes", name, MAX_TEMPLATE_BYTES);
    if (memchr(src ? src : "", 0, len)) return wb_err_set(err, WB_ERR_FORMAT, "%s: the template contains a NUL byte", name);
    wb_jinja *t = calloc(1, sizeof *t);
    if (!t) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    size_t nl = strlen(name);
    t->name = malloc(nl + 1);
    if (!t->name) {
        free(t);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(t->name, name, nl + 1);
    jfail f = {.err = err, .name = t->name};
    t->arena = (jarena){.limit = 64 * (size_t)MAX_TEMPLATE_BYTES, .fail = &f};
    if (setjmp(f.jb)) {
        ja_free_all(&t->arena);
        free(t->name);
        free(t);
        return f.status;
    }
    jtok *toks;
    size_t nt;
    jinja_tokenize(&t->arena, src ? src : "", len, &toks, &nt);
    t->prog = jinja_parse_tokens(&t->arena, toks, nt, MAX_PARSE_DEPTH);
    t->arena.fail = NULL;
    *out = t;
    return WB_OK;
}

void wb_jinja_free(wb_jinja *t) {
    if (!t) return;
    ja_free_all(&t->arena);
    free(t->name);
    free(t);
}

const char *wb_jinja_name(const wb_jinja *t) { return t ? t->name : NULL; }

wb_status wb_jinja_render(const wb_jinja *t, const cJSON *vars, const wb_jinja_params *params, char **out,
                          size_t *len, wb_err *err) {
    if (!t || !out || !len) return wb_err_set(err, WB_ERR_ARG, "wb_jinja_render: NULL argument");
    *out = NULL;
    *len = 0;
    if (vars && !cJSON_IsObject(vars)) return wb_err_set(err, WB_ERR_ARG, "%s: the variables must be a JSON object", t->name);
    jx *x = calloc(1, sizeof *x);
    if (!x) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", t->name);
    x->prm = params ? *params : wb_jinja_default_params();
    if (!x->prm.max_output) x->prm.max_output = 16u << 20;
    if (!x->prm.max_memory) x->prm.max_memory = 256u << 20;
    if (!x->prm.max_steps) x->prm.max_steps = 20000000;
    if (x->prm.max_depth <= 0) x->prm.max_depth = 256;
    x->fail = (jfail){.err = err, .name = t->name};
    x->a = (jarena){.limit = x->prm.max_memory, .fail = &x->fail};
    if (setjmp(x->fail.jb)) {
        wb_status st = x->fail.status;
        ja_free_all(&x->a);
        free(x);
        return st;
    }
    jenv *g = env_new(x, NULL);
    env_set(x, g, "true", 4, jv_bool(1));
    env_set(x, g, "false", 5, jv_bool(0));
    env_set(x, g, "none", 4, JV_NULL);
    env_set(x, g, "True", 4, jv_bool(1));
    env_set(x, g, "False", 5, jv_bool(0));
    env_set(x, g, "None", 4, JV_NULL);
    env_set(x, g, "namespace", 9, fn_value(x, FN_NAMESPACE, NULL, JV_UNDEFINED, NULL, NULL));
    env_set(x, g, "raise_exception", 15, fn_value(x, FN_RAISE, NULL, JV_UNDEFINED, NULL, NULL));
    env_set(x, g, "range", 5, fn_value(x, FN_RANGE, NULL, JV_UNDEFINED, NULL, NULL));
    env_set(x, g, "strftime_now", 12, fn_value(x, FN_STRFTIME, NULL, JV_UNDEFINED, NULL, NULL));
    if (vars)
        for (const cJSON *e = vars->child; e; e = e->next) {
            const char *k = e->string ? e->string : "";
            env_set(x, g, k, strlen(k), jv_from_cjson(&x->a, e, 0, 0));
        }
    jbuf b = newbuf(x, 1);
    exec_block(x, &t->prog->list, g, &b);
    if (x->ctl) jfailf(&x->fail, WB_ERR_FORMAT, x->line, "{%% %s %%} outside a loop", x->ctl == 1 ? "break" : "continue");
    char *r = malloc(b.n + 1);
    if (!r) jfailf(&x->fail, WB_ERR_NOMEM, 0, "out of memory");
    if (b.n) memcpy(r, b.p, b.n);
    r[b.n] = 0;
    *out = r;
    *len = b.n;
    ja_free_all(&x->a);
    free(x);
    return WB_OK;
}
