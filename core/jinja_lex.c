/* jinja_lex.c - template text -> tokens, with the whitespace settings transformers uses.
 *
 * Preprocessing, in this order (as @huggingface/jinja does it): one trailing newline of the
 * template is dropped; lstrip_blocks removes spaces and tabs between a line start and "{%",
 * "{#" or "{-"; trim_blocks removes the newline right after "%}", "#}" or "-}"; and
 * {% generation %} / {% endgeneration %} markers (assistant-mask tags) are removed together with
 * the whitespace around them unless a dash asks to strip it. Every preprocessed byte keeps the
 * line it came from so that errors name source lines.
 *
 * Tokenizing then splits text from tags; "{%-" / "{{-" strip the whitespace before, "-%}" /
 * "-}}" the whitespace after (JavaScript's \s, which is also what trim() removes). */
#include "jinja_internal.h"

#include <string.h>

typedef struct pp {
    jarena *a;
    char *s;
    int *line;
    size_t n;
} pp;

static void pp_init(pp *o, jarena *a, size_t cap) {
    o->a = a;
    o->s = ja_alloc(a, cap + 1);
    o->line = ja_alloc(a, (cap + 1) * sizeof *o->line);
    o->n = 0;
}

static void pp_put(pp *o, char c, int line) {
    o->s[o->n] = c;
    o->line[o->n] = line;
    o->n++;
}

/* Is s[i] the start of a line for JavaScript's /m flag (after \n, \r, U+2028, U+2029)? */
static int line_start(const char *s, size_t i) {
    if (i == 0) return 1;
    if (s[i - 1] == '\n' || s[i - 1] == '\r') return 1;
    return i >= 3 && (unsigned char)s[i - 3] == 0xE2 && (unsigned char)s[i - 2] == 0x80 &&
           ((unsigned char)s[i - 1] == 0xA8 || (unsigned char)s[i - 1] == 0xA9);
}

static size_t js_space_at(const char *s, size_t n, size_t i) {
    if (i >= n) return 0;
    size_t l;
    uint32_t cp = ju_decode(s + i, n - i, &l);
    return ju_js_space(cp) ? l : 0;
}

/* Length of the JavaScript whitespace character ending at s[i) (0 if none). */
static size_t js_space_before(const char *s, size_t i) {
    if (i == 0) return 0;
    size_t k = i - 1, steps = 0;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80 && steps < 3) k--, steps++;
    size_t l;
    uint32_t cp = ju_decode(s + k, i - k, &l);
    return (k + l == i && ju_js_space(cp)) ? l : 0;
}

static int match_word(const char *s, size_t n, size_t i, const char *w) {
    size_t k = strlen(w);
    return i + k <= n && memcmp(s + i, w, k) == 0;
}

/* {%-? \s* (end)?generation \s* -?%} at s[i]: its end and the two dashes, or 0. */
static size_t generation_tag(const char *s, size_t n, size_t i, int *lstrip, int *rstrip) {
    if (!(i + 1 < n && s[i] == '{' && s[i + 1] == '%')) return 0;
    size_t j = i + 2, l;
    *lstrip = j < n && s[j] == '-';
    if (*lstrip) j++;
    while ((l = js_space_at(s, n, j))) j += l;
    if (match_word(s, n, j, "endgeneration")) j += 13;
    else if (match_word(s, n, j, "generation")) j += 10;
    else return 0;
    while ((l = js_space_at(s, n, j))) j += l;
    *rstrip = j < n && s[j] == '-';
    if (*rstrip) j++;
    if (!(j + 1 < n && s[j] == '%' && s[j + 1] == '}')) return 0;
    return j + 2;
}

static void preprocess(jarena *a, const char *src, size_t len, pp *out) {
    pp p0, p1, p2;
    pp_init(&p0, a, len);
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        pp_put(&p0, src[i], line);
        if (src[i] == '\n') line++;
    }
    if (p0.n && p0.s[p0.n - 1] == '\n') p0.n--;
    /* lstrip_blocks */
    pp_init(&p1, a, p0.n);
    for (size_t i = 0; i < p0.n;) {
        if (line_start(p0.s, i)) {
            size_t j = i;
            while (j < p0.n && (p0.s[j] == ' ' || p0.s[j] == '\t')) j++;
            if (j + 1 < p0.n && p0.s[j] == '{' && (p0.s[j + 1] == '#' || p0.s[j + 1] == '%' || p0.s[j + 1] == '-')) {
                i = j;
                pp_put(&p1, p0.s[i], p0.line[i]);
                i++;
                continue;
            }
        }
        pp_put(&p1, p0.s[i], p0.line[i]);
        i++;
    }
    /* trim_blocks */
    pp_init(&p2, a, p1.n);
    for (size_t i = 0; i < p1.n;) {
        char c = p1.s[i];
        if ((c == '#' || c == '%' || c == '-') && i + 2 < p1.n + 0 && p1.s[i + 1] == '}' && p1.s[i + 2] == '\n') {
            pp_put(&p2, c, p1.line[i]);
            pp_put(&p2, '}', p1.line[i + 1]);
            i += 3;
            continue;
        }
        pp_put(&p2, c, p1.line[i]);
        i++;
    }
    /* generation markers */
    pp_init(out, a, p2.n);
    size_t floor_n = 0; /* output before this belongs to an earlier match */
    for (size_t i = 0; i < p2.n;) {
        int ls, rs;
        size_t end = generation_tag(p2.s, p2.n, i, &ls, &rs);
        if (!end) {
            pp_put(out, p2.s[i], p2.line[i]);
            i++;
            continue;
        }
        if (ls) {
            size_t l;
            while (out->n > floor_n && (l = js_space_before(out->s, out->n)) && out->n - l >= floor_n) out->n -= l;
        }
        i = end;
        if (rs) {
            size_t l;
            while ((l = js_space_at(p2.s, p2.n, i))) i += l;
        }
        floor_n = out->n;
    }
    out->s[out->n] = 0;
}

/* ---- tokens ------------------------------------------------------------------------------------ */

typedef struct lx {
    jarena *a;
    const char *s;
    const int *line;
    size_t n, pos;
    jtok *t;
    size_t nt, cap;
} lx;

static int lx_line(const lx *x) {
    if (x->n == 0) return 1;
    return x->line[x->pos < x->n ? x->pos : x->n - 1];
}

static _Noreturn void lx_fail(lx *x, const char *fmt, const char *arg) {
    jfailf(x->a->fail, WB_ERR_FORMAT, lx_line(x), fmt, arg);
}

static void push(lx *x, jtok_type type, const char *s, size_t n, int line) {
    if (x->nt == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 64;
        x->t = ja_grow(x->a, x->t, x->nt * sizeof *x->t, nc * sizeof *x->t);
        x->cap = nc;
    }
    x->t[x->nt++] = (jtok){type, line, ja_strndup(x->a, s, n), n};
}

static jtok_type last_type(const lx *x) { return x->nt ? x->t[x->nt - 1].type : (jtok_type)-1; }

static void strip_trailing_ws(lx *x) {
    if (!x->nt || x->t[x->nt - 1].type != T_TEXT) return;
    jtok *t = &x->t[x->nt - 1];
    size_t l;
    while (t->n && (l = js_space_before(t->s, t->n))) t->n -= l;
    ((char *)t->s)[t->n] = 0;
    if (t->n == 0) x->nt--;
}

static void skip_ws(lx *x) {
    size_t l;
    while ((l = js_space_at(x->s, x->n, x->pos))) x->pos += l;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string literal body up to the closing quote, escapes undone, in the arena. */
static void lex_string(lx *x, char quote) {
    int line = lx_line(x);
    x->pos++;
    jbuf b = {.a = x->a};
    uint32_t pending_hi = 0;
    for (;;) {
        if (x->pos >= x->n) lx_fail(x, "unterminated string literal%s", "");
        char c = x->s[x->pos];
        if (c == quote) break;
        if (c != '\\') {
            jb_add(&b, &c, 1);
            x->pos++;
            continue;
        }
        if (++x->pos >= x->n) lx_fail(x, "unterminated string literal%s", "");
        char e = x->s[x->pos++];
        char one = 0;
        switch (e) {
        case 'n': one = '\n'; break;
        case 't': one = '\t'; break;
        case 'r': one = '\r'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'v': one = '\v'; break;
        case '\'': one = '\''; break;
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case 'x':
        case 'u': {
            int k = e == 'x' ? 2 : 4;
            uint32_t cp = 0;
            for (int i = 0; i < k; i++) {
                int h = x->pos + (size_t)i < x->n ? hexval(x->s[x->pos + (size_t)i]) : -1;
                if (h < 0) lx_fail(x, "invalid \\%s escape in a string literal", e == 'x' ? "x" : "u");
                cp = cp * 16 + (uint32_t)h;
            }
            x->pos += (size_t)k;
            /* \uD83D\uDE00: a surrogate pair is one code point in UTF-8 */
            if (cp >= 0xD800 && cp < 0xDC00) {
                pending_hi = cp;
                continue;
            }
            if (cp >= 0xDC00 && cp < 0xE000 && pending_hi) {
                cp = 0x10000 + ((pending_hi - 0xD800) << 10) + (cp - 0xDC00);
            }
            pending_hi = 0;
            char u[4];
            jb_add(&b, u, ju_encode(cp >= 0xD800 && cp < 0xE000 ? 0xFFFD : cp, u));
            continue;
        }
        default: {
            char s[2] = {e, 0};
            lx_fail(x, "unexpected escape \\%s in a string literal", s);
        }
        }
        pending_hi = 0;
        jb_add(&b, &one, 1);
    }
    x->pos++;
    push(x, T_STR, b.p ? b.p : "", b.n, line);
}

static const struct {
    const char *seq;
    jtok_type type;
} SYMBOLS[] = {
    {"{%", T_OPEN_STMT}, {"%}", T_CLOSE_STMT}, {"{{", T_OPEN_EXPR}, {"}}", T_CLOSE_EXPR},
    {"(", T_LPAREN},     {")", T_RPAREN},      {"{", T_LBRACE},     {"}", T_RBRACE},
    {"[", T_LBRACKET},   {"]", T_RBRACKET},    {",", T_COMMA},      {".", T_DOT},
    {":", T_COLON},      {"|", T_PIPE},        {"<=", T_CMP},       {">=", T_CMP},
    {"==", T_CMP},       {"!=", T_CMP},        {"<", T_CMP},        {">", T_CMP},
    {"+", T_ADD},        {"-", T_ADD},         {"~", T_ADD},        {"**", T_POW},
    {"*", T_MUL},        {"//", T_MUL},        {"/", T_MUL},        {"%", T_MUL},
    {"=", T_EQUALS},
};

void jinja_tokenize(jarena *a, const char *src, size_t len, jtok **toks, size_t *ntok) {
    pp p;
    preprocess(a, src, len, &p);
    lx x = {.a = a, .s = p.s, .line = p.line, .n = p.n};
    int brace_depth = 0;
    while (x.pos < x.n) {
        jtok_type lt = last_type(&x);
        if (x.nt == 0 || lt == T_CLOSE_STMT || lt == T_CLOSE_EXPR || lt == T_COMMENT) {
            size_t st = x.pos;
            while (x.pos < x.n && !(x.s[x.pos] == '{' && x.pos + 1 < x.n &&
                                    (x.s[x.pos + 1] == '%' || x.s[x.pos + 1] == '{' || x.s[x.pos + 1] == '#')))
                x.pos++;
            if (x.pos > st) {
                push(&x, T_TEXT, x.s + st, x.pos - st, x.line[st]);
                continue;
            }
        }
        if (x.s[x.pos] == '{' && x.pos + 1 < x.n && x.s[x.pos + 1] == '#') {
            int line = lx_line(&x);
            x.pos += 2;
            int strip_before = x.pos < x.n && x.s[x.pos] == '-';
            if (strip_before) x.pos++;
            size_t st = x.pos;
            while (!(x.pos + 1 < x.n && x.s[x.pos] == '#' && x.s[x.pos + 1] == '}')) {
                if (x.pos + 2 >= x.n) jfailf(a->fail, WB_ERR_FORMAT, line, "comment {# is never closed with #}");
                x.pos++;
            }
            size_t cn = x.pos - st;
            int strip_after = cn > 0 && x.s[x.pos - 1] == '-';
            if (strip_after) cn--;
            if (strip_before) strip_trailing_ws(&x);
            push(&x, T_COMMENT, x.s + st, cn, line);
            x.pos += 2;
            if (strip_after) skip_ws(&x);
            continue;
        }
        if (x.pos + 2 < x.n + 0 && x.s[x.pos] == '{' && (x.s[x.pos + 1] == '%' || x.s[x.pos + 1] == '{') &&
            x.s[x.pos + 2] == '-') {
            strip_trailing_ws(&x);
            int stmt = x.s[x.pos + 1] == '%';
            push(&x, stmt ? T_OPEN_STMT : T_OPEN_EXPR, stmt ? "{%" : "{{", 2, lx_line(&x));
            if (!stmt) brace_depth = 0;
            x.pos += 3;
            continue;
        }
        skip_ws(&x);
        if (x.pos >= x.n) break;
        if (x.pos + 2 < x.n + 0 && x.s[x.pos] == '-' && (x.s[x.pos + 1] == '%' || x.s[x.pos + 1] == '}') &&
            x.s[x.pos + 2] == '}') {
            int stmt = x.s[x.pos + 1] == '%';
            push(&x, stmt ? T_CLOSE_STMT : T_CLOSE_EXPR, stmt ? "%}" : "}}", 2, lx_line(&x));
            x.pos += 3;
            skip_ws(&x);
            continue;
        }
        char c = x.s[x.pos];
        int line = lx_line(&x);
        if (c == '-' || c == '+') {
            jtok_type t = last_type(&x);
            if (x.nt == 0 || t == T_TEXT) lx_fail(&x, "unexpected character '%s' outside a tag", c == '-' ? "-" : "+");
            if (!(t == T_IDENT || t == T_NUM || t == T_STR || t == T_RPAREN || t == T_RBRACKET)) {
                size_t st = x.pos++;
                while (x.pos < x.n && is_digit(x.s[x.pos])) x.pos++;
                int digits = x.pos > st + 1;
                if (digits && x.pos + 1 < x.n && x.s[x.pos] == '.' && is_digit(x.s[x.pos + 1])) {
                    x.pos++;
                    while (x.pos < x.n && is_digit(x.s[x.pos])) x.pos++;
                }
                push(&x, digits ? T_NUM : T_UNARY, x.s + st, x.pos - st, line);
                continue;
            }
        }
        int matched = 0;
        for (size_t k = 0; k < sizeof SYMBOLS / sizeof SYMBOLS[0]; k++) {
            if (SYMBOLS[k].type == T_CLOSE_EXPR && brace_depth > 0) continue;
            size_t sl = strlen(SYMBOLS[k].seq);
            if (x.pos + sl <= x.n && memcmp(x.s + x.pos, SYMBOLS[k].seq, sl) == 0) {
                push(&x, SYMBOLS[k].type, SYMBOLS[k].seq, sl, line);
                if (SYMBOLS[k].type == T_OPEN_EXPR) brace_depth = 0;
                else if (SYMBOLS[k].type == T_LBRACE) brace_depth++;
                else if (SYMBOLS[k].type == T_RBRACE) brace_depth--;
                x.pos += sl;
                matched = 1;
                break;
            }
        }
        if (matched) continue;
        if (c == '\'' || c == '"') {
            lex_string(&x, c);
            continue;
        }
        if (is_digit(c)) {
            size_t st = x.pos;
            while (x.pos < x.n && is_digit(x.s[x.pos])) x.pos++;
            if (last_type(&x) != T_DOT && x.pos + 1 < x.n && x.s[x.pos] == '.' && is_digit(x.s[x.pos + 1])) {
                x.pos++;
                while (x.pos < x.n && is_digit(x.s[x.pos])) x.pos++;
            }
            push(&x, T_NUM, x.s + st, x.pos - st, line);
            continue;
        }
        if (is_word(c)) {
            size_t st = x.pos;
            while (x.pos < x.n && is_word(x.s[x.pos])) x.pos++;
            push(&x, T_IDENT, x.s + st, x.pos - st, line);
            continue;
        }
        char cs[8] = {0};
        size_t l;
        ju_decode(x.s + x.pos, x.n - x.pos, &l);
        memcpy(cs, x.s + x.pos, l);
        lx_fail(&x, "unexpected character '%s' in a tag", cs);
    }
    *toks = x.t;
    *ntok = x.nt;
}
