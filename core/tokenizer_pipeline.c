/* tokenizer_pipeline.c - the parts of tokenizer.json around the BPE model: normalizers (NFC,
 * NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Sequence), pre-tokenizers (Split, Digits,
 * Metaspace, ByteLevel, Sequence) and decoders (ByteLevel, Replace, ByteFallback, Fuse, Strip,
 * Metaspace, Sequence), following Hugging Face tokenizers 0.22. The encoding loop that runs the
 * pre-tokenizers lives in tokenizer.c next to the model. */
#include "tokenizer_internal.h"
#include "unicode_classes.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- regexes ------------------------------------------------------------------------------- */

wb_status tk_regex_compile(tk_regex *re, const char *pattern, const char *name, const char *field,
                           wb_err *err) {
    /* PCRE2 would use its own Unicode tables; these are Hugging Face's */
    char *t = tk_pattern_with_hf_classes(pattern);
    if (!t) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    int ec;
    PCRE2_SIZE eo;
    re->code = pcre2_compile((PCRE2_SPTR)t, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo,
                             NULL);
    free(t);
    if (!re->code) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s regex \"%.80s\" does not compile: %s", name,
                          field, pattern, (const char *)msg);
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    return WB_OK;
}

void tk_matcher_free(tk_matcher *m) {
    free(m->lit);
    m->lit = NULL;
    tk_regex_free(&m->re);
}

static int span_push(tk_span **sp, size_t *n, size_t *cap, size_t a, size_t b, int m) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        tk_span *q = realloc(*sp, nc * sizeof *q);
        if (!q) return -1;
        *sp = q;
        *cap = nc;
    }
    (*sp)[(*n)++] = (tk_span){a, b, m};
    return 0;
}

int tk_matcher_find(const tk_matcher *m, const char *s, size_t n, tk_span **spans, size_t *n_spans,
                    size_t *cap) {
    *n_spans = 0;
    if (n == 0) return span_push(spans, n_spans, cap, 0, 0, 0);
    size_t prev = 0;
    if (m->lit) {
        /* an empty literal matches nothing, as in HF */
        for (size_t pos = 0; m->lit_len && pos + m->lit_len <= n;) {
            const char *hit = memmem(s + pos, n - pos, m->lit, m->lit_len);
            if (!hit) break;
            size_t a = (size_t)(hit - s), b = a + m->lit_len;
            if (a > prev && span_push(spans, n_spans, cap, prev, a, 0)) return -1;
            if (span_push(spans, n_spans, cap, a, b, 1)) return -1;
            prev = pos = b;
        }
    } else {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(m->re.code, NULL);
        if (!md) return -1;
        /* Oniguruma's find_iter (Rust onig crate): an empty match right where the previous match
         * ended is skipped by stepping one character, so the scan always advances */
        size_t last_end = 0;
        int have_last = 0;
        size_t last_match_end = 0;
        int r = 0;
        while (last_end <= n) {
            int rc = m->re.jit ? pcre2_jit_match(m->re.code, (PCRE2_SPTR)s, n, last_end, 0, md, NULL) : -1;
            if (!m->re.jit || rc < PCRE2_ERROR_NOMATCH)
                rc = pcre2_match(m->re.code, (PCRE2_SPTR)s, n, last_end, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                r = -2;
                break;
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t a = ov[0], b = ov[1];
            if (b < a) b = a; /* \K tricks can report end < start */
            if (a == b && have_last && last_match_end == b) {
                size_t step = 1;
                while (last_end + step < n && ((unsigned char)s[last_end + step] & 0xC0) == 0x80) step++;
                last_end += step;
                continue;
            }
            last_end = b;
            last_match_end = b;
            have_last = 1;
            if (a > prev && span_push(spans, n_spans, cap, prev, a, 0)) {
                r = -1;
                break;
            }
            if (span_push(spans, n_spans, cap, a, b, 1)) {
                r = -1;
                break;
            }
            prev = b;
        }
        pcre2_match_data_free(md);
        if (r) return r;
    }
    if (prev < n && span_push(spans, n_spans, cap, prev, n, 0)) return -1;
    return 0;
}

/* ---- normalizers --------------------------------------------------------------------------- */


/* Replace every match of pat in s by to; NULL on failure. */
size_t tk_norm_limit(size_t n) { return n > (SIZE_MAX - (1u << 20)) / 64 ? SIZE_MAX : n * 64 + (1u << 20); }

/* *why (when non-NULL) gets TK_ERR_MATCH or TK_ERR_EXPAND for those failures; the output must
 * stay within limit bytes. */
static char *replace_all_bounded(const tk_matcher *pat, const char *s, size_t n, const char *to, size_t to_len,
                                 size_t *out_len, size_t limit, int *why) {
    tk_span *sp = NULL;
    size_t ns = 0, cap = 0;
    int fr = tk_matcher_find(pat, s, n, &sp, &ns, &cap);
    if (fr) {
        if (why && fr == -2) *why = TK_ERR_MATCH;
        free(sp);
        return NULL;
    }
    size_t total = 0;
    for (size_t i = 0; i < ns; i++) {
        total += sp[i].m ? to_len : sp[i].b - sp[i].a;
        if (total > limit) {
            if (why) *why = TK_ERR_EXPAND;
            free(sp);
            return NULL;
        }
    }
    char *o = malloc(total + 1);
    if (o) {
        size_t k = 0;
        for (size_t i = 0; i < ns; i++) {
            if (sp[i].m) {
                memcpy(o + k, to, to_len);
                k += to_len;
            } else {
                memcpy(o + k, s + sp[i].a, sp[i].b - sp[i].a);
                k += sp[i].b - sp[i].a;
            }
        }
        o[k] = 0;
        *out_len = k;
    }
    free(sp);
    return o;
}

static char *replace_all(const tk_matcher *pat, const char *s, size_t n, const char *to, size_t to_len,
                         size_t *out_len) {
    return replace_all_bounded(pat, s, n, to, to_len, out_len, SIZE_MAX, NULL);
}

/* Rust's char::to_lowercase: the simple mapping everywhere except U+0130, the one character whose
 * unconditional lowercase is two characters. */
static char *lowercase(const char *s, size_t n, size_t *out_len) {
    char *o = malloc(n * 2 + 4);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int cl;
        uint32_t c = tk_utf8_decode((const unsigned char *)s + i, n - i, &cl);
        i += (size_t)cl;
        if (c == 0x130) {
            k += (size_t)tk_utf8_encode('i', o + k);
            k += (size_t)tk_utf8_encode(0x307, o + k);
        } else {
            k += (size_t)tk_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)c), o + k);
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

int tk_normalize(const wb_tokenizer *tok, const char *s, size_t n, char **out, size_t *out_len) {
    char *cur = tk_strndup(s, n);
    int why = 0;
    const size_t limit = tk_norm_limit(n);
    size_t cl = n;
    for (size_t i = 0; cur && i < tok->n_norms; i++) {
        const tk_norm *nm = &tok->norms[i];
        char *nx = NULL;
        size_t nl = 0;
        switch (nm->kind) {
        case TK_NORM_NFC:
        case TK_NORM_NFD:
        case TK_NORM_NFKC:
        case TK_NORM_NFKD: {
            int opt = UTF8PROC_STABLE;
            opt |= (nm->kind == TK_NORM_NFC || nm->kind == TK_NORM_NFKC) ? UTF8PROC_COMPOSE
                                                                         : UTF8PROC_DECOMPOSE;
            if (nm->kind == TK_NORM_NFKC || nm->kind == TK_NORM_NFKD) opt |= UTF8PROC_COMPAT;
            if (cl == 0) {
                nx = tk_strndup("", 0);
                break;
            }
            utf8proc_uint8_t *d = NULL;
            utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)cur, (utf8proc_ssize_t)cl, &d,
                                              (utf8proc_option_t)opt);
            if (r >= 0) {
                nx = (char *)d;
                nl = (size_t)r;
            } else {
                free(d);
            }
            break;
        }
        case TK_NORM_LOWERCASE:
            nx = lowercase(cur, cl, &nl);
            break;
        case TK_NORM_PREPEND:
            /* HF prepends only to a non-empty string */
            if (cl == 0) {
                nx = tk_strndup("", 0);
                break;
            }
            nx = malloc(nm->content_len + cl + 1);
            if (nx) {
                memcpy(nx, nm->content, nm->content_len);
                memcpy(nx + nm->content_len, cur, cl);
                nl = nm->content_len + cl;
                nx[nl] = 0;
            }
            break;
        case TK_NORM_REPLACE:
            nx = replace_all_bounded(&nm->pat, cur, cl, nm->content, nm->content_len, &nl, limit, &why);
            break;
        }
        free(cur);
        cur = nx;
        cl = nl;
    }
    *out = cur;
    *out_len = cur ? cl : 0;
    return cur ? 0 : why ? why : -1;
}

/* ---- parsing ------------------------------------------------------------------------------- */

static const char *type_of(const cJSON *obj) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int is(const char *a, const char *b) { return a && strcmp(a, b) == 0; }

static int opt_bool(const cJSON *obj, const char *key, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) return -1;
    return cJSON_IsTrue(v) ? 1 : 0;
}

/* A string field that must be present. */
static const char *req_string(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One character (Metaspace replacement, Strip content): HF stores a Rust char. */
static int one_char(const char *s, char out[8], int *len) {
    if (!s || !*s) return -1;
    size_t n = strlen(s), cons;
    int tr;
    int l = tk_utf8_char((const unsigned char *)s, n, &cons, &tr);
    if (!l || (size_t)l != n) return -1;
    memcpy(out, s, (size_t)l);
    out[l] = 0;
    *len = l;
    return 0;
}

/* {"String": "..."} or {"Regex": "..."} */
static wb_status parse_pattern(tk_matcher *m, const cJSON *pat, const char *name, const char *field,
                               wb_err *err) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    if (cJSON_IsString(s)) {
        size_t l = strlen(s->valuestring);
        if (!tk_utf8_valid(s->valuestring, l))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: %s.String is not valid UTF-8", name, field);
        if (!(m->lit = tk_strndup(s->valuestring, l))) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
        m->lit_len = l;
        return WB_OK;
    }
    if (cJSON_IsString(r)) return tk_regex_compile(&m->re, r->valuestring, name, field, err);
    return wb_err_set(err, WB_ERR_FORMAT, "%s: %s must be {\"String\": ...} or {\"Regex\": ...}", name,
                      field);
}

#define PFAIL(status, ...) return wb_err_set(err, status, __VA_ARGS__)

static wb_status add_norm(wb_tokenizer *tok, const cJSON *j, const char *name, const char *path,
                          int depth, wb_err *err) {
    if (depth > 16) PFAIL(WB_ERR_FORMAT, "%s: %s nests Sequences too deeply", name, path);
    if (!cJSON_IsObject(j)) PFAIL(WB_ERR_FORMAT, "%s: %s is not an object", name, path);
    const char *t = type_of(j);
    char sub[96];
    if (is(t, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(arr)) PFAIL(WB_ERR_FORMAT, "%s: %s.normalizers is not an array", name, path);
        int i = 0;
        for (const cJSON *e = arr->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", path, i);
            wb_status st = add_norm(tok, e, name, sub, depth + 1, err);
            if (st != WB_OK) return st;
        }
        return WB_OK;
    }
    tk_norm nm = {0};
    if (is(t, "NFC")) nm.kind = TK_NORM_NFC;
    else if (is(t, "NFD")) nm.kind = TK_NORM_NFD;
    else if (is(t, "NFKC")) nm.kind = TK_NORM_NFKC;
    else if (is(t, "NFKD")) nm.kind = TK_NORM_NFKD;
    else if (is(t, "Lowercase")) nm.kind = TK_NORM_LOWERCASE;
    else if (is(t, "Prepend") || is(t, "Replace")) {
        nm.kind = is(t, "Prepend") ? TK_NORM_PREPEND : TK_NORM_REPLACE;
        const char *c = req_string(j, is(t, "Prepend") ? "prepend" : "content");
        if (!c)
            PFAIL(WB_ERR_FORMAT, "%s: %s.%s is missing or not a string", name, path,
                  is(t, "Prepend") ? "prepend" : "content");
        nm.content_len = strlen(c);
        if (!tk_utf8_valid(c, nm.content_len))
            PFAIL(WB_ERR_FORMAT, "%s: %s: content is not valid UTF-8", name, path);
        if (!(nm.content = tk_strndup(c, nm.content_len))) PFAIL(WB_ERR_NOMEM, "%s: out of memory", name);
        if (nm.kind == TK_NORM_REPLACE) {
            snprintf(sub, sizeof sub, "%s.pattern", path);
            wb_status st = parse_pattern(&nm.pat, cJSON_GetObjectItemCaseSensitive(j, "pattern"), name, sub, err);
            if (st != WB_OK) {
                free(nm.content);
                tk_matcher_free(&nm.pat);
                return st;
            }
        }
    } else {
        PFAIL(WB_ERR_FORMAT,
              "%s: %s of type \"%s\" is not supported (NFC, NFD, NFKC, NFKD, Lowercase, Prepend, "
              "Replace, Sequence)",
              name, path, t ? t : "?");
    }
    tk_norm *nn = realloc(tok->norms, (tok->n_norms + 1) * sizeof *nn);
    if (!nn) {
        free(nm.content);
        tk_matcher_free(&nm.pat);
        PFAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    }
    tok->norms = nn;
    tok->norms[tok->n_norms++] = nm;
    return WB_OK;
}

wb_status tk_parse_normalizer(wb_tokenizer *tok, const cJSON *j, const char *name, wb_err *err) {
    if (!j || cJSON_IsNull(j)) return WB_OK;
    return add_norm(tok, j, name, "normalizer", 0, err);
}

static int parse_scheme(const cJSON *j, int *scheme) {
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "prepend_scheme");
    if (!ps || cJSON_IsNull(ps)) {
        /* files from before prepend_scheme carry add_prefix_space instead */
        int aps = opt_bool(j, "add_prefix_space", 1);
        if (aps < 0) return -1;
        *scheme = aps ? TK_PREPEND_ALWAYS : TK_PREPEND_NEVER;
        return 0;
    }
    if (!cJSON_IsString(ps)) return -1;
    if (is(ps->valuestring, "always")) *scheme = TK_PREPEND_ALWAYS;
    else if (is(ps->valuestring, "first")) *scheme = TK_PREPEND_FIRST;
    else if (is(ps->valuestring, "never")) *scheme = TK_PREPEND_NEVER;
    else return -1;
    return 0;
}

static wb_status add_pre(wb_tokenizer *tok, const cJSON *j, const char *name, const char *path,
                         int depth, wb_err *err) {
    if (depth > 16) PFAIL(WB_ERR_FORMAT, "%s: %s nests Sequences too deeply", name, path);
    if (!cJSON_IsObject(j)) PFAIL(WB_ERR_FORMAT, "%s: %s is not an object", name, path);
    const char *t = type_of(j);
    char sub[96];
    if (tok->byte_level)
        PFAIL(WB_ERR_FORMAT, "%s: %s: only ByteLevel as the last pre-tokenizer is supported", name, path);
    if (is(t, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        if (!cJSON_IsArray(arr)) PFAIL(WB_ERR_FORMAT, "%s: %s.pretokenizers is not an array", name, path);
        int i = 0;
        for (const cJSON *e = arr->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", path, i);
            wb_status st = add_pre(tok, e, name, sub, depth + 1, err);
            if (st != WB_OK) return st;
        }
        return WB_OK;
    }
    /* each step is one level of recursion while encoding */
    if (tok->n_pres >= 64) PFAIL(WB_ERR_FORMAT, "%s: %s: more than 64 pre-tokenizer steps", name, path);
    tk_pre p = {0};
    if (is(t, "ByteLevel")) {
        p.kind = TK_PRE_BYTELEVEL;
        p.add_prefix_space = opt_bool(j, "add_prefix_space", 1);
        p.use_regex = opt_bool(j, "use_regex", 1);
        int trim = opt_bool(j, "trim_offsets", 1);
        if (p.add_prefix_space < 0 || p.use_regex < 0 || trim < 0)
            PFAIL(WB_ERR_FORMAT, "%s: %s.add_prefix_space/trim_offsets/use_regex must be booleans", name,
                  path);
        tok->add_prefix_space = p.add_prefix_space;
        tok->use_regex = p.use_regex;
        tok->trim_offsets = trim;
        tok->byte_level = 1;
    } else if (is(t, "Split")) {
        p.kind = TK_PRE_SPLIT;
        const char *b = req_string(j, "behavior");
        if (is(b, "Removed")) p.behavior = TK_SPLIT_REMOVED;
        else if (is(b, "Isolated")) p.behavior = TK_SPLIT_ISOLATED;
        else if (is(b, "MergedWithPrevious")) p.behavior = TK_SPLIT_MERGED_PREV;
        else if (is(b, "MergedWithNext")) p.behavior = TK_SPLIT_MERGED_NEXT;
        else if (is(b, "Contiguous")) p.behavior = TK_SPLIT_CONTIGUOUS;
        else
            PFAIL(WB_ERR_FORMAT,
                  "%s: %s.behavior \"%s\" is not one of Removed, Isolated, MergedWithPrevious, "
                  "MergedWithNext, Contiguous",
                  name, path, b ? b : "?");
        p.invert = opt_bool(j, "invert", 0);
        if (p.invert < 0) PFAIL(WB_ERR_FORMAT, "%s: %s.invert is not a boolean", name, path);
        snprintf(sub, sizeof sub, "%s.pattern", path);
        wb_status st = parse_pattern(&p.pat, cJSON_GetObjectItemCaseSensitive(j, "pattern"), name, sub, err);
        if (st != WB_OK) {
            tk_matcher_free(&p.pat);
            return st;
        }
    } else if (is(t, "Digits")) {
        p.kind = TK_PRE_DIGITS;
        int ind = opt_bool(j, "individual_digits", 0);
        if (ind < 0) PFAIL(WB_ERR_FORMAT, "%s: %s.individual_digits is not a boolean", name, path);
        /* Rust's char::is_numeric is the N category: each digit is one match */
        p.behavior = ind ? TK_SPLIT_ISOLATED : TK_SPLIT_CONTIGUOUS;
        wb_status st = tk_regex_compile(&p.pat.re, "\\p{N}", name, path, err);
        if (st != WB_OK) return st;
    } else if (is(t, "Metaspace")) {
        p.kind = TK_PRE_METASPACE;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "replacement");
        if (one_char(cJSON_IsString(r) ? r->valuestring : "\xe2\x96\x81", p.repl, &p.repl_len))
            PFAIL(WB_ERR_FORMAT, "%s: %s.replacement must be one character", name, path);
        if (parse_scheme(j, &p.prepend_scheme))
            PFAIL(WB_ERR_FORMAT, "%s: %s.prepend_scheme must be \"always\", \"first\" or \"never\"", name,
                  path);
        p.split = opt_bool(j, "split", 1);
        if (p.split < 0) PFAIL(WB_ERR_FORMAT, "%s: %s.split is not a boolean", name, path);
        if (!(p.pat.lit = tk_strndup(p.repl, (size_t)p.repl_len))) PFAIL(WB_ERR_NOMEM, "%s: out of memory", name);
        p.pat.lit_len = (size_t)p.repl_len;
    } else {
        PFAIL(WB_ERR_FORMAT,
              "%s: %s of type \"%s\" is not supported (ByteLevel, Split, Digits, Metaspace, Sequence)",
              name, path, t ? t : "?");
    }
    tk_pre *np = realloc(tok->pres, (tok->n_pres + 1) * sizeof *np);
    if (!np) {
        tk_matcher_free(&p.pat);
        PFAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    }
    tok->pres = np;
    tok->pres[tok->n_pres++] = p;
    return WB_OK;
}

wb_status tk_parse_pre_tokenizer(wb_tokenizer *tok, const cJSON *j, const char *name, wb_err *err) {
    tok->pre_parsed = 1;
    tok->byte_level = 0;
    if (!j || cJSON_IsNull(j)) return WB_OK;
    return add_pre(tok, j, name, "pre_tokenizer", 0, err);
}

static wb_status add_dec(wb_tokenizer *tok, const cJSON *j, const char *name, const char *path,
                         int depth, int *fused, wb_err *err) {
    if (depth > 16) PFAIL(WB_ERR_FORMAT, "%s: %s nests Sequences too deeply", name, path);
    if (!cJSON_IsObject(j)) PFAIL(WB_ERR_FORMAT, "%s: %s is not an object", name, path);
    const char *t = type_of(j);
    char sub[96];
    if (is(t, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "decoders");
        if (!cJSON_IsArray(arr)) PFAIL(WB_ERR_FORMAT, "%s: %s.decoders is not an array", name, path);
        int i = 0;
        for (const cJSON *e = arr->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.decoders[%d]", path, i);
            wb_status st = add_dec(tok, e, name, sub, depth + 1, fused, err);
            if (st != WB_OK) return st;
        }
        return WB_OK;
    }
    tk_dec d = {0};
    if (is(t, "ByteLevel")) {
        d.kind = TK_DEC_BYTELEVEL;
        *fused = 1;
    } else if (is(t, "ByteFallback")) {
        d.kind = TK_DEC_BYTEFALLBACK;
    } else if (is(t, "Fuse")) {
        d.kind = TK_DEC_FUSE;
        *fused = 1;
    } else if (is(t, "Replace")) {
        d.kind = TK_DEC_REPLACE;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const char *c = req_string(j, "content");
        if (!cJSON_IsString(s) || !*s->valuestring)
            PFAIL(WB_ERR_FORMAT, "%s: %s.pattern: only a non-empty {\"String\": ...} is supported", name,
                  path);
        if (!c) PFAIL(WB_ERR_FORMAT, "%s: %s.content is missing or not a string", name, path);
        d.from_len = strlen(s->valuestring);
        d.to_len = strlen(c);
        d.from = tk_strndup(s->valuestring, d.from_len);
        d.to = tk_strndup(c, d.to_len);
        if (!d.from || !d.to) {
            free(d.from);
            free(d.to);
            PFAIL(WB_ERR_NOMEM, "%s: out of memory", name);
        }
    } else if (is(t, "Strip")) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "start");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(j, "stop");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content");
        if (!cJSON_IsNumber(st) || st->valuedouble < 0 || st->valuedouble > 64 ||
            st->valuedouble != (double)(int)st->valuedouble)
            PFAIL(WB_ERR_FORMAT, "%s: %s.start must be an integer in [0, 64]", name, path);
        if (sp && !(cJSON_IsNumber(sp) && sp->valuedouble == 0))
            PFAIL(WB_ERR_FORMAT, "%s: %s.stop: only 0 is supported (a streamed text cannot be "
                                 "stripped at its end)", name, path);
        if (one_char(cJSON_IsString(c) ? c->valuestring : NULL, d.content, &d.content_len))
            PFAIL(WB_ERR_FORMAT, "%s: %s.content must be one character", name, path);
        if (*fused) {
            /* after Fuse there is one string: the strip applies to the start of the output */
            if (tok->dec_strip_n)
                PFAIL(WB_ERR_FORMAT, "%s: %s: only one Strip after Fuse is supported", name, path);
            memcpy(tok->dec_strip, d.content, sizeof d.content);
            tok->dec_strip_len = d.content_len;
            tok->dec_strip_n = (int)st->valuedouble;
            return WB_OK;
        }
        d.kind = TK_DEC_STRIP;
        d.start = (int)st->valuedouble;
    } else if (is(t, "Metaspace")) {
        d.kind = TK_DEC_METASPACE;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "replacement");
        if (one_char(cJSON_IsString(r) ? r->valuestring : "\xe2\x96\x81", d.content, &d.content_len))
            PFAIL(WB_ERR_FORMAT, "%s: %s.replacement must be one character", name, path);
        if (parse_scheme(j, &d.prepend_scheme))
            PFAIL(WB_ERR_FORMAT, "%s: %s.prepend_scheme must be \"always\", \"first\" or \"never\"", name,
                  path);
        if (d.prepend_scheme != TK_PREPEND_NEVER) tok->dec_meta_first = 1;
    } else {
        PFAIL(WB_ERR_FORMAT,
              "%s: %s of type \"%s\" is not supported (ByteLevel, ByteFallback, Fuse, Replace, Strip, "
              "Metaspace, Sequence)",
              name, path, t ? t : "?");
    }
    tk_dec *nd = realloc(tok->decs, (tok->n_decs + 1) * sizeof *nd);
    if (!nd) {
        free(d.from);
        free(d.to);
        PFAIL(WB_ERR_NOMEM, "%s: out of memory", name);
    }
    tok->decs = nd;
    tok->decs[tok->n_decs++] = d;
    return WB_OK;
}

wb_status tk_parse_decoder(wb_tokenizer *tok, const cJSON *j, const char *name, wb_err *err) {
    tok->dec_parsed = 1;
    if (!j || cJSON_IsNull(j)) return WB_OK;
    int fused = 0;
    return add_dec(tok, j, name, "decoder", 0, &fused, err);
}

/* ---- decoding one token -------------------------------------------------------------------- */

static int hexdig(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int tk_token_decode(const wb_tokenizer *tok, int32_t id, int first, char **out, size_t *out_len) {
    const char *s0 = tok->str[id];
    size_t n = tok->str_len[id];
    char *cur = tk_strndup(s0, n);
    if (!cur) return -1;
    /* special tokens decode to their content (see docs/tokenizer.md) */
    int n_decs = tok->special[id] ? 0 : (int)tok->n_decs;
    int implicit_bl = !tok->dec_parsed || (tok->n_decs == 0 && tok->byte_level);
    if (tok->special[id]) implicit_bl = 0;
    for (int k = 0; k < n_decs + implicit_bl; k++) {
        tk_dec dl = {.kind = TK_DEC_BYTELEVEL};
        const tk_dec *d = k < n_decs ? &tok->decs[k] : &dl;
        switch (d->kind) {
        case TK_DEC_BYTELEVEL: {
            /* chars back to bytes, or the raw UTF-8 when any char is outside the byte alphabet */
            size_t o = 0;
            int ok = 1;
            char *b = malloc(n + 1);
            if (!b) goto nomem;
            for (size_t j = 0; ok && j < n;) {
                int cl;
                int by = tk_cp_to_byte(tk_utf8_decode((const unsigned char *)cur + j, n - j, &cl));
                if (by < 0) ok = 0;
                else b[o++] = (char)by;
                j += (size_t)cl;
            }
            if (ok) {
                free(cur);
                cur = b;
                n = o;
                cur[n] = 0;
            } else {
                free(b);
            }
            break;
        }
        case TK_DEC_BYTEFALLBACK:
            /* HF: a 6-byte "<0xHH>" parsed with u8::from_str_radix (which also takes a '+') */
            if (n == 6 && memcmp(cur, "<0x", 3) == 0 && cur[5] == '>') {
                int hi = hexdig(cur[3]), lo = hexdig(cur[4]);
                int v = -1;
                if (hi >= 0 && lo >= 0) v = hi * 16 + lo;
                else if (cur[3] == '+' && lo >= 0) v = lo;
                if (v >= 0) {
                    cur[0] = (char)v;
                    n = 1;
                    cur[1] = 0;
                }
            }
            break;
        case TK_DEC_REPLACE: {
            tk_matcher m = {.lit = d->from, .lit_len = d->from_len};
            size_t nl;
            char *nx = replace_all(&m, cur, n, d->to, d->to_len, &nl);
            if (!nx) goto nomem;
            free(cur);
            cur = nx;
            n = nl;
            break;
        }
        case TK_DEC_STRIP: {
            size_t cut = 0;
            for (int c = 0; c < d->start && cut + (size_t)d->content_len <= n &&
                            memcmp(cur + cut, d->content, (size_t)d->content_len) == 0;
                 c++)
                cut += (size_t)d->content_len;
            memmove(cur, cur + cut, n - cut + 1);
            n -= cut;
            break;
        }
        case TK_DEC_METASPACE: {
            size_t o = 0;
            int drop = first && d->prepend_scheme != TK_PREPEND_NEVER;
            for (size_t j = 0; j < n;) {
                if (j + (size_t)d->content_len <= n && memcmp(cur + j, d->content, (size_t)d->content_len) == 0) {
                    if (!drop) cur[o++] = ' ';
                    j += (size_t)d->content_len;
                } else {
                    cur[o++] = cur[j++];
                }
            }
            n = o;
            cur[n] = 0;
            break;
        }
        default: /* Fuse joins the strings: nothing to do token by token */
            break;
        }
    }
    *out = cur;
    *out_len = n;
    return 0;
nomem:
    free(cur);
    return -1;
}
