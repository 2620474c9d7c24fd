/* constraint.c - the constraint engine (wb_constraint.h): regex -> byte DFA -> per-state token
 * masks, the choice and fn kinds, and the per-request cursor. JSON schemas compile to a regex in
 * constraint_json.c. */
#include "wb_constraint.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits that turn a pathological pattern into an error instead of a long stall. */
#define RX_MAX_NODES 400000
#define RX_MAX_NFA 400000
#define RX_MAX_DFA 30000
#define RX_MAX_REPEAT 1000
#define RX_MAX_DEPTH 200

const char *wb_constraint_kind_name(wb_constraint_kind k) {
    switch (k) {
    case WB_CONSTRAINT_CHOICE: return "choice";
    case WB_CONSTRAINT_REGEX: return "regex";
    case WB_CONSTRAINT_JSON: return "json_schema";
    case WB_CONSTRAINT_FN: return "fn";
    }
    return "";
}

/* ======================================= vocabulary ======================================== */

wb_status wb_constraint_vocab_init(wb_constraint_vocab *v, const wb_tokenizer *tok, wb_err *err) {
    if (!v) return wb_err_set(err, WB_ERR_ARG, "constraint vocab: NULL pointer");
    memset(v, 0, sizeof *v);
    v->eos_id = -1;
    if (!tok) return wb_err_set(err, WB_ERR_ARG, "constraint vocab: tokenizer is NULL");
    int32_t n = wb_tokenizer_vocab_size(tok);
    const char **bytes = malloc((size_t)(n > 0 ? n : 1) * sizeof *bytes);
    size_t *lens = malloc((size_t)(n > 0 ? n : 1) * sizeof *lens);
    if (!bytes || !lens) {
        free(bytes);
        free(lens);
        return wb_err_set(err, WB_ERR_NOMEM, "constraint vocab: out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *b = wb_tokenizer_token_bytes(tok, i, &len);
        /* Special tokens are control signals, not text a format could contain. */
        if (wb_tokenizer_is_special(tok, i)) b = NULL, len = 0;
        bytes[i] = b;
        lens[i] = len;
    }
    v->n_tokens = n;
    v->bytes = bytes;
    v->lens = lens;
    v->eos_id = wb_tokenizer_eos_id(tok);
    return WB_OK;
}

void wb_constraint_vocab_release(wb_constraint_vocab *v) {
    if (!v) return;
    free((void *)v->bytes);
    free((void *)v->lens);
    v->bytes = NULL;
    v->lens = NULL;
    v->n_tokens = 0;
}

/* ======================================= regex AST ========================================= */

typedef struct bset {
    uint32_t w[8];
} bset;

static inline void bset_add(bset *s, unsigned b) { s->w[b >> 5] |= 1u << (b & 31); }
static inline int bset_has(const bset *s, unsigned b) { return (s->w[b >> 5] >> (b & 31)) & 1u; }
static void bset_range(bset *s, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) bset_add(s, b);
}

enum { N_EMPTY, N_SET, N_CAT, N_ALT, N_REP };

typedef struct rnode {
    int type;
    int a, b;     /* children (CAT, ALT), or child in a (REP) */
    int set;      /* N_SET: index into sets */
    int min, max; /* N_REP: max -1 = unbounded */
} rnode;

typedef struct rx {
    const unsigned char *p;
    size_t n, i;
    int depth;
    rnode *nodes;
    int n_nodes, cap_nodes;
    bset *sets;
    int n_sets, cap_sets;
    wb_err *err;
    wb_status st;
} rx;

static int rx_fail(rx *r, wb_status st, const char *fmt, ...) {
    if (r->st == WB_OK) {
        char msg[WB_ERR_MSG_SIZE];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        wb_err_set(r->err, st, "%s", msg);
        r->st = st;
    }
    return -1;
}

static int rx_node(rx *r, int type, int a, int b) {
    if (r->n_nodes >= RX_MAX_NODES)
        return rx_fail(r, WB_ERR_ARG, "regex: pattern too large (over %d nodes)", RX_MAX_NODES);
    if (r->n_nodes == r->cap_nodes) {
        int nc = r->cap_nodes ? 2 * r->cap_nodes : 64;
        rnode *nn = realloc(r->nodes, (size_t)nc * sizeof *nn);
        if (!nn) return rx_fail(r, WB_ERR_NOMEM, "regex: out of memory");
        r->nodes = nn;
        r->cap_nodes = nc;
    }
    rnode *x = &r->nodes[r->n_nodes];
    memset(x, 0, sizeof *x);
    x->type = type;
    x->a = a;
    x->b = b;
    return r->n_nodes++;
}

/* Sets are interned so that the copies a repetition makes share ids (fewer byte classes). */
static int rx_set(rx *r, const bset *s) {
    int set = -1;
    for (int i = 0; i < r->n_sets && set < 0; i++)
        if (memcmp(&r->sets[i], s, sizeof *s) == 0) set = i;
    if (set < 0) {
        if (r->n_sets == r->cap_sets) {
            int nc = r->cap_sets ? 2 * r->cap_sets : 32;
            bset *ns = realloc(r->sets, (size_t)nc * sizeof *ns);
            if (!ns) return rx_fail(r, WB_ERR_NOMEM, "regex: out of memory");
            r->sets = ns;
            r->cap_sets = nc;
        }
        r->sets[r->n_sets] = *s;
        set = r->n_sets++;
    }
    int id = rx_node(r, N_SET, 0, 0);
    if (id >= 0) r->nodes[id].set = set;
    return id;
}

static int rx_byte(rx *r, unsigned b) {
    bset s = {{0}};
    bset_add(&s, b);
    return rx_set(r, &s);
}

static int rx_cat(rx *r, int a, int b) {
    if (a < 0 || b < 0) return -1;
    if (r->nodes[a].type == N_EMPTY) return b;
    if (r->nodes[b].type == N_EMPTY) return a;
    return rx_node(r, N_CAT, a, b);
}

static int rx_alt(rx *r, int a, int b) {
    if (a < 0 || b < 0) return -1;
    return rx_node(r, N_ALT, a, b);
}

static int rx_rep(rx *r, int a, int min, int max) {
    if (a < 0) return -1;
    int id = rx_node(r, N_REP, a, 0);
    if (id < 0) return -1;
    r->nodes[id].min = min;
    r->nodes[id].max = max;
    return id;
}

/* Every well-formed multi-byte UTF-8 character (no overlongs, surrogates or code points past
 * U+10FFFF): anything looser would let the detokenizer turn the bytes into U+FFFD, and the text
 * would no longer match. Each row: byte ranges, one per position. */
static int rx_utf8_multibyte(rx *r) {
    static const unsigned char seqs[][4][2] = {
        {{0xC2, 0xDF}, {0x80, 0xBF}, {0, 0}, {0, 0}},
        {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}, {0, 0}},
        {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}, {0, 0}},
        {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}, {0, 0}},
        {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}, {0, 0}},
        {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
    };
    int acc = -1;
    for (size_t k = 0; k < sizeof seqs / sizeof *seqs; k++) {
        int seq = -1;
        for (int j = 0; j < 4 && seqs[k][j][0]; j++) {
            bset b = {{0}};
            bset_range(&b, seqs[k][j][0], seqs[k][j][1]);
            int x = rx_set(r, &b);
            seq = seq < 0 ? x : rx_cat(r, seq, x);
        }
        acc = acc < 0 ? seq : rx_alt(r, acc, seq);
        if (r->st != WB_OK) return -1;
    }
    return acc;
}

/* An ASCII set, optionally with every multi-byte UTF-8 character added (negated classes, `.`). */
static int rx_ascii_set(rx *r, const bset *ascii, int with_multibyte) {
    int any = 0;
    for (int i = 0; i < 4; i++) any |= ascii->w[i] != 0;
    int a = any ? rx_set(r, ascii) : -1;
    if (!with_multibyte) return any ? a : rx_fail(r, WB_ERR_ARG, "regex: empty class matches "
                                                      "nothing");
    int m = rx_utf8_multibyte(r);
    return a < 0 ? m : rx_alt(r, a, m);
}

static void rx_class_escape(unsigned c, bset *s, int *is_class) {
    *is_class = 1;
    switch (c) {
    case 'd': bset_range(s, '0', '9'); return;
    case 'w':
        bset_range(s, '0', '9'), bset_range(s, 'a', 'z'), bset_range(s, 'A', 'Z'), bset_add(s, '_');
        return;
    case 's':
        bset_add(s, ' '), bset_add(s, '\t'), bset_add(s, '\n'), bset_add(s, '\r'),
            bset_add(s, '\f'), bset_add(s, '\v');
        return;
    }
    *is_class = 0;
}

/* One escaped byte after '\' (not a class shorthand). Returns the byte or -1 (error set). */
static int rx_escape_byte(rx *r) {
    if (r->i >= r->n) return rx_fail(r, WB_ERR_ARG, "regex: pattern ends with a lone '\\'");
    unsigned c = r->p[r->i++];
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': {
        int v = 0;
        for (int k = 0; k < 2; k++) {
            if (r->i >= r->n) return rx_fail(r, WB_ERR_ARG, "regex: \\x needs two hex digits at "
                                             "byte %zu", r->i);
            unsigned h = r->p[r->i++];
            int d = h >= '0' && h <= '9' ? (int)h - '0' : h >= 'a' && h <= 'f' ? (int)h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? (int)h - 'A' + 10 : -1;
            if (d < 0) return rx_fail(r, WB_ERR_ARG, "regex: \\x needs two hex digits at byte %zu",
                                      r->i - 1);
            v = v * 16 + d;
        }
        return v;
    }
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
        return rx_fail(r, WB_ERR_ARG, "regex: unsupported escape '\\%c' at byte %zu%s", (int)c,
                       r->i - 2, c == 'b' || c == 'B' ? " (word boundaries are not supported)"
                       : c >= '1' && c <= '9' ? " (backreferences are not supported)" : "");
    return (int)c; /* escaped punctuation or a raw byte */
}

static int utf8_len(unsigned lead) {
    return lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
           : lead >= 0xF0 && lead <= 0xF4 ? 4 : 1;
}

/* [...]: ASCII members (single bytes, ranges, \d-style escapes, \xHH) in a bset; non-ASCII
 * characters as literal byte sequences in an alternation (not in negated classes). */
static int rx_class(rx *r) {
    size_t start = r->i - 1;
    int neg = 0;
    if (r->i < r->n && r->p[r->i] == '^') neg = 1, r->i++;
    bset s = {{0}};
    int extra = -1; /* alternation of multi-byte characters */
    int first = 1;
    for (;;) {
        if (r->i >= r->n) return rx_fail(r, WB_ERR_ARG, "regex: unterminated '[' at byte %zu",
                                         start);
        unsigned c = r->p[r->i];
        if (c == ']' && !first) {
            r->i++;
            break;
        }
        first = 0;
        int lo;
        if (c == '\\') {
            r->i++;
            if (r->i < r->n) {
                int is_class = 0;
                rx_class_escape(r->p[r->i], &s, &is_class);
                if (is_class) {
                    r->i++;
                    continue;
                }
            }
            lo = rx_escape_byte(r);
            if (lo < 0) return -1;
        } else if (c == '[' && r->i + 1 < r->n && r->p[r->i + 1] == ':') {
            return rx_fail(r, WB_ERR_ARG, "regex: POSIX classes like [:alpha:] are not "
                           "supported (byte %zu)", r->i);
        } else if (c >= 0x80) {
            int len = utf8_len(c);
            if (neg) return rx_fail(r, WB_ERR_ARG, "regex: a negated class may hold only ASCII "
                                    "(byte %zu)", r->i);
            if (r->i + (size_t)len > r->n) return rx_fail(r, WB_ERR_ARG, "regex: truncated UTF-8 "
                                                          "in class at byte %zu", r->i);
            if (r->i + (size_t)len < r->n && r->p[r->i + (size_t)len] == '-' &&
                r->i + (size_t)len + 1 < r->n && r->p[r->i + (size_t)len + 1] != ']')
                return rx_fail(r, WB_ERR_ARG, "regex: ranges of non-ASCII characters are not "
                               "supported (byte %zu)", r->i);
            int seq = rx_byte(r, r->p[r->i]);
            for (int k = 1; k < len; k++) seq = rx_cat(r, seq, rx_byte(r, r->p[r->i + (size_t)k]));
            r->i += (size_t)len;
            extra = extra < 0 ? seq : rx_alt(r, extra, seq);
            if (r->st != WB_OK) return -1;
            continue;
        } else {
            lo = (int)c;
            r->i++;
        }
        int hi = lo;
        if (r->i + 1 < r->n && r->p[r->i] == '-' && r->p[r->i + 1] != ']') {
            r->i++;
            unsigned d = r->p[r->i];
            if (d == '\\') {
                r->i++;
                hi = rx_escape_byte(r);
                if (hi < 0) return -1;
            } else if (d >= 0x80) {
                return rx_fail(r, WB_ERR_ARG, "regex: ranges of non-ASCII characters are not "
                               "supported (byte %zu)", r->i);
            } else {
                hi = (int)d;
                r->i++;
            }
            if (hi < lo) return rx_fail(r, WB_ERR_ARG, "regex: range out of order in class at "
                                        "byte %zu", start);
        }
        bset_range(&s, (unsigned)lo, (unsigned)hi);
    }
    if (neg) {
        bset t = {{0}};
        for (unsigned b = 0; b < 128; b++)
            if (!bset_has(&s, b)) bset_add(&t, b);
        return rx_ascii_set(r, &t, 1);
    }
    int any = 0;
    for (int i = 0; i < 8; i++) any |= s.w[i] != 0;
    if (!any && extra < 0) return rx_fail(r, WB_ERR_ARG, "regex: empty class at byte %zu", start);
    int a = any ? rx_set(r, &s) : -1;
    if (extra < 0) return a;
    return a < 0 ? extra : rx_alt(r, a, extra);
}

static int rx_alt_expr(rx *r);

static int rx_atom(rx *r) {
    unsigned c = r->p[r->i];
    size_t at = r->i;
    r->i++;
    switch (c) {
    case '(': {
        if (r->i < r->n && r->p[r->i] == '?') {
            if (r->i + 1 < r->n && r->p[r->i + 1] == ':') r->i += 2;
            else return rx_fail(r, WB_ERR_ARG, "regex: group syntax '(?' at byte %zu is not "
                                "supported (only (?:...))", at);
        }
        if (++r->depth > RX_MAX_DEPTH)
            return rx_fail(r, WB_ERR_ARG, "regex: groups nested deeper than %d", RX_MAX_DEPTH);
        int e = rx_alt_expr(r);
        r->depth--;
        if (e < 0) return -1;
        if (r->i >= r->n || r->p[r->i] != ')')
            return rx_fail(r, WB_ERR_ARG, "regex: unclosed '(' at byte %zu", at);
        r->i++;
        return e;
    }
    case '[': return rx_class(r);
    case '.': {
        bset s = {{0}};
        bset_range(&s, 0, 127);
        s.w['\n' >> 5] &= ~(1u << ('\n' & 31));
        return rx_ascii_set(r, &s, 1);
    }
    case '^':
        if (at == 0) return rx_node(r, N_EMPTY, 0, 0);
        return rx_fail(r, WB_ERR_ARG, "regex: '^' is supported only at the start (byte %zu)", at);
    case '$':
        if (at + 1 == r->n) return rx_node(r, N_EMPTY, 0, 0);
        return rx_fail(r, WB_ERR_ARG, "regex: '$' is supported only at the end (byte %zu)", at);
    case '*': case '+': case '?': case '{':
        return rx_fail(r, WB_ERR_ARG, "regex: '%c' at byte %zu has nothing to repeat", (int)c, at);
    case '\\': {
        if (r->i < r->n) {
            unsigned e = r->p[r->i];
            bset s = {{0}};
            int is_class = 0;
            unsigned lower = e | 0x20;
            if (e == 'd' || e == 'w' || e == 's' || e == 'D' || e == 'W' || e == 'S') {
                rx_class_escape(lower, &s, &is_class);
                r->i++;
                if (e == lower) return rx_set(r, &s);
                bset t = {{0}};
                for (unsigned b = 0; b < 128; b++)
                    if (!bset_has(&s, b)) bset_add(&t, b);
                return rx_ascii_set(r, &t, 1);
            }
        }
        int b = rx_escape_byte(r);
        return b < 0 ? -1 : rx_byte(r, (unsigned)b);
    }
    }
    /* A literal; a UTF-8 character is one atom so that a quantifier repeats all of it. */
    int len = utf8_len(c);
    int seq = rx_byte(r, c);
    for (int k = 1; k < len && r->i < r->n; k++) seq = rx_cat(r, seq, rx_byte(r, r->p[r->i++]));
    return seq;
}

static int rx_number(rx *r, int *v) {
    size_t s = r->i;
    long x = 0;
    while (r->i < r->n && r->p[r->i] >= '0' && r->p[r->i] <= '9') {
        x = x * 10 + (r->p[r->i] - '0');
        if (x > RX_MAX_REPEAT) {
            rx_fail(r, WB_ERR_ARG, "regex: repetition count at byte %zu exceeds %d", s,
                    RX_MAX_REPEAT);
            return 0;
        }
        r->i++;
    }
    *v = (int)x;
    return r->i > s;
}

static int rx_repeat(rx *r) {
    int a = rx_atom(r);
    while (a >= 0 && r->i < r->n) {
        unsigned c = r->p[r->i];
        size_t at = r->i;
        int min, max;
        if (c == '*') min = 0, max = -1, r->i++;
        else if (c == '+') min = 1, max = -1, r->i++;
        else if (c == '?') min = 0, max = 1, r->i++;
        else if (c == '{') {
            r->i++;
            if (!rx_number(r, &min)) return r->st != WB_OK ? -1 :
                rx_fail(r, WB_ERR_ARG, "regex: '{' at byte %zu is not a {m,n} quantifier", at);
            max = min;
            if (r->i < r->n && r->p[r->i] == ',') {
                r->i++;
                if (!rx_number(r, &max)) {
                    if (r->st != WB_OK) return -1;
                    max = -1;
                }
            }
            if (r->i >= r->n || r->p[r->i] != '}')
                return rx_fail(r, WB_ERR_ARG, "regex: unterminated {m,n} at byte %zu", at);
            r->i++;
            if (max >= 0 && max < min)
                return rx_fail(r, WB_ERR_ARG, "regex: {%d,%d} at byte %zu has max < min", min, max,
                               at);
        } else break;
        if (r->i < r->n && (r->p[r->i] == '?' || r->p[r->i] == '+'))
            return rx_fail(r, WB_ERR_ARG, "regex: lazy or possessive quantifier at byte %zu is "
                           "not supported (a full match has no preference)", r->i);
        a = rx_rep(r, a, min, max);
    }
    return a;
}

static int rx_cat_expr(rx *r) {
    int acc = rx_node(r, N_EMPTY, 0, 0);
    while (acc >= 0 && r->i < r->n && r->p[r->i] != '|' && r->p[r->i] != ')')
        acc = rx_cat(r, acc, rx_repeat(r));
    return acc;
}

static int rx_alt_expr(rx *r) {
    int acc = rx_cat_expr(r);
    while (acc >= 0 && r->i < r->n && r->p[r->i] == '|') {
        r->i++;
        acc = rx_alt(r, acc, rx_cat_expr(r));
    }
    return acc;
}

/* ========================================= NFA ============================================= */

typedef struct nstate {
    int set;       /* byte set id, or -1 for an epsilon state */
    int out1, out2;
} nstate;

typedef struct nfa {
    nstate *s;
    int n, cap;
    rx *r;
} nfa;

static int nfa_new(nfa *f, int set) {
    if (f->n >= RX_MAX_NFA)
        return rx_fail(f->r, WB_ERR_ARG, "regex: pattern too large (over %d automaton states; "
                       "large {m,n} counts multiply)", RX_MAX_NFA);
    if (f->n == f->cap) {
        int nc = f->cap ? 2 * f->cap : 256;
        nstate *ns = realloc(f->s, (size_t)nc * sizeof *ns);
        if (!ns) return rx_fail(f->r, WB_ERR_NOMEM, "regex: out of memory");
        f->s = ns;
        f->cap = nc;
    }
    f->s[f->n] = (nstate){set, -1, -1};
    return f->n++;
}

/* Build the fragment for node x; returns 0 and its start/end states (end: an epsilon state with
 * free outs), -1 on error. Repetitions compile their child once per copy.
 *
 * The walk keeps its own stack on the heap: a concatenation chain is as deep as the pattern is
 * long (an 80k-character literal is an 80k-deep tree), far deeper than the C stack allows. Each
 * frame is one node in progress; `phase` says which child it waits for, and a finished child
 * hands its fragment back through (rs, re). */
typedef struct nframe {
    int x, phase, k;
    int s, cur, e, fork, s1, e1;
} nframe;

static int nfa_build(nfa *f, int root, int *start, int *end) {
    nframe *stk = NULL;
    int sp = 0, cap = 0, rs = -1, re = -1, rc = -1;
#define NFA_PUSH(node)                                                                          \
    do {                                                                                        \
        if (sp == cap) {                                                                        \
            int nc = cap ? 2 * cap : 64;                                                        \
            nframe *ns = realloc(stk, (size_t)nc * sizeof *ns);                                 \
            if (!ns) {                                                                          \
                rx_fail(f->r, WB_ERR_NOMEM, "regex: out of memory");                            \
                goto done;                                                                      \
            }                                                                                   \
            stk = ns, cap = nc;                                                                 \
        }                                                                                       \
        stk[sp++] = (nframe){.x = (node)};                                                      \
    } while (0)
#define NFA_RETURN(a, b)                                                                        \
    do {                                                                                        \
        rs = (a), re = (b);                                                                     \
        sp--;                                                                                   \
        goto next;                                                                              \
    } while (0)
    NFA_PUSH(root);
    while (sp > 0) {
        nframe *fr = &stk[sp - 1];
        const rnode nd = f->r->nodes[fr->x];
        switch (nd.type) {
        case N_EMPTY: {
            int s = nfa_new(f, -1);
            if (s < 0) goto done;
            NFA_RETURN(s, s);
        }
        case N_SET: {
            int s = nfa_new(f, nd.set), e = nfa_new(f, -1);
            if (s < 0 || e < 0) goto done;
            f->s[s].out1 = e;
            NFA_RETURN(s, e);
        }
        case N_CAT:
        case N_ALT:
            if (fr->phase == 0) {
                fr->phase = 1;
                NFA_PUSH(nd.a);
                break;
            }
            if (fr->phase == 1) {
                fr->phase = 2;
                fr->s1 = rs, fr->e1 = re;
                NFA_PUSH(nd.b);
                break;
            }
            if (nd.type == N_CAT) {
                f->s[fr->e1].out1 = rs;
                NFA_RETURN(fr->s1, re);
            } else {
                int s = nfa_new(f, -1), e = nfa_new(f, -1);
                if (s < 0 || e < 0) goto done;
                f->s[s].out1 = fr->s1, f->s[s].out2 = rs;
                f->s[fr->e1].out1 = e, f->s[re].out1 = e;
                NFA_RETURN(s, e);
            }
        case N_REP:
            switch (fr->phase) {
            case 0: /* the entry state, then nd.min mandatory copies */
                if ((fr->s = nfa_new(f, -1)) < 0) goto done;
                fr->cur = fr->s;
                fr->k = 0;
                fr->phase = 1;
                /* fall through */
            case 1:
                if (fr->k < nd.min) {
                    fr->phase = 2;
                    NFA_PUSH(nd.a);
                    break;
                }
                fr->phase = 3;
                goto rep_tail;
            case 2: /* a mandatory copy came back */
                f->s[fr->cur].out1 = rs;
                fr->cur = re;
                fr->k++;
                fr->phase = 1;
                break;
            case 3:
            rep_tail:
                if (nd.max < 0) { /* a loop around one more copy */
                    if ((fr->fork = nfa_new(f, -1)) < 0 || (fr->e = nfa_new(f, -1)) < 0)
                        goto done;
                    fr->phase = 4;
                    NFA_PUSH(nd.a);
                    break;
                }
                if (nd.max == nd.min) NFA_RETURN(fr->s, fr->cur);
                if ((fr->e = nfa_new(f, -1)) < 0) goto done;
                fr->phase = 5;
                /* fall through */
            case 5: /* optional copies, each behind a fork to the end */
                if (fr->k < nd.max) {
                    if ((fr->fork = nfa_new(f, -1)) < 0) goto done;
                    fr->phase = 6;
                    NFA_PUSH(nd.a);
                    break;
                }
                f->s[fr->cur].out1 = fr->e;
                NFA_RETURN(fr->s, fr->e);
            case 4: /* the looped copy came back */
                f->s[fr->cur].out1 = fr->fork;
                f->s[fr->fork].out1 = rs, f->s[fr->fork].out2 = fr->e;
                f->s[re].out1 = fr->fork;
                NFA_RETURN(fr->s, fr->e);
            case 6: /* an optional copy came back */
                f->s[fr->cur].out1 = fr->fork;
                f->s[fr->fork].out1 = rs, f->s[fr->fork].out2 = fr->e;
                fr->cur = re;
                fr->k++;
                fr->phase = 5;
                break;
            }
            break;
        default: goto done;
        }
    next:;
    }
    *start = rs, *end = re;
    rc = 0;
done:
    free(stk);
    return rc;
#undef NFA_PUSH
#undef NFA_RETURN
}

/* ========================================= DFA ============================================= */

typedef struct dfa {
    int n;          /* states; 0 is the start */
    int32_t *delta; /* [n * 256], -1 = dead */
    unsigned char *accept;
} dfa;

typedef struct setmap {
    int *slots; /* dfa id or -1 */
    size_t cap;
} setmap;

static uint64_t hash_ints(const int *a, int n) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)(uint32_t)a[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Working state of the subset construction. */
typedef struct dctx {
    nfa *f;
    int accept;
    int *stack, *buf;
    unsigned *mark, stamp;
    int *pool; /* the sorted NFA sets of every DFA state, concatenated */
    size_t pool_n, pool_cap;
    size_t *off;
    int *len;
    int cap_d;
    int *slots; /* hash: DFA id or -1 */
    size_t cap;
    dfa *d;
} dctx;

/* Epsilon closure of buf[0..nseed), kept to the important states, sorted, back into buf. */
static int dctx_closure(dctx *x, int nseed) {
    x->stamp++;
    int sp = 0, no = 0;
    const nstate *S = x->f->s;
    for (int q = 0; q < nseed; q++)
        if (x->mark[x->buf[q]] != x->stamp) {
            x->mark[x->buf[q]] = x->stamp;
            x->stack[sp++] = x->buf[q];
        }
    while (sp) {
        int s = x->stack[--sp];
        if (S[s].set >= 0 || s == x->accept) x->buf[no++] = s;
        if (S[s].set < 0) {
            int o = S[s].out1;
            if (o >= 0 && x->mark[o] != x->stamp) x->mark[o] = x->stamp, x->stack[sp++] = o;
            o = S[s].out2;
            if (o >= 0 && x->mark[o] != x->stamp) x->mark[o] = x->stamp, x->stack[sp++] = o;
        }
    }
    qsort(x->buf, (size_t)no, sizeof *x->buf, cmp_int);
    return no;
}

static int dctx_rehash(dctx *x, size_t ncap) {
    int *ns = malloc(ncap * sizeof *ns);
    if (!ns) return -1;
    for (size_t q = 0; q < ncap; q++) ns[q] = -1;
    for (int q = 0; q < x->d->n; q++) {
        size_t h = (size_t)hash_ints(x->pool + x->off[q], x->len[q]) & (ncap - 1);
        while (ns[h] >= 0) h = (h + 1) & (ncap - 1);
        ns[h] = q;
    }
    free(x->slots);
    x->slots = ns;
    x->cap = ncap;
    return 0;
}

/* The DFA state for the set buf[0..n), added if new. -1: out of memory, -2: too many. */
static int dctx_lookup(dctx *x, int n) {
    dfa *d = x->d;
    size_t h = (size_t)hash_ints(x->buf, n) & (x->cap - 1);
    while (x->slots[h] >= 0) {
        int id = x->slots[h];
        if (x->len[id] == n && memcmp(x->pool + x->off[id], x->buf, (size_t)n * sizeof(int)) == 0)
            return id;
        h = (h + 1) & (x->cap - 1);
    }
    if (d->n >= RX_MAX_DFA) return -2;
    if (d->n == x->cap_d) {
        int nc = x->cap_d ? 2 * x->cap_d : 64;
        size_t *no = realloc(x->off, (size_t)nc * sizeof *no);
        if (!no) return -1;
        x->off = no;
        int *nl = realloc(x->len, (size_t)nc * sizeof *nl);
        if (!nl) return -1;
        x->len = nl;
        int32_t *nd = realloc(d->delta, (size_t)nc * 256 * sizeof *nd);
        if (!nd) return -1;
        d->delta = nd;
        unsigned char *na = realloc(d->accept, (size_t)nc);
        if (!na) return -1;
        d->accept = na;
        x->cap_d = nc;
    }
    if (x->pool_n + (size_t)n > x->pool_cap) {
        size_t pc = x->pool_cap ? x->pool_cap : 1024;
        while (pc < x->pool_n + (size_t)n) pc *= 2;
        int *np = realloc(x->pool, pc * sizeof *np);
        if (!np) return -1;
        x->pool = np;
        x->pool_cap = pc;
    }
    memcpy(x->pool + x->pool_n, x->buf, (size_t)n * sizeof(int));
    x->off[d->n] = x->pool_n;
    x->len[d->n] = n;
    x->pool_n += (size_t)n;
    d->accept[d->n] = 0;
    for (int q = 0; q < n; q++)
        if (x->buf[q] == x->accept) d->accept[d->n] = 1;
    x->slots[h] = d->n;
    int id = d->n++;
    if ((size_t)d->n * 2 > x->cap && dctx_rehash(x, x->cap * 2) < 0) return -1;
    return id;
}

/* Subset construction over "important" NFA states (byte states and the accepting one), with
 * bytes grouped into classes that no set distinguishes. */
static wb_status dfa_build(nfa *f, const bset *sets, int n_sets, int start, int accept, dfa *d,
                           wb_err *err) {
    wb_status st = WB_OK;
    /* Byte classes: refine the partition by every set. */
    int cls[256] = {0}, n_cls = 1;
    for (int k = 0; k < n_sets; k++) {
        int remap[512], ncls[256], nn = 0;
        for (int i = 0; i < 512; i++) remap[i] = -1;
        for (int b = 0; b < 256; b++) {
            int key = cls[b] * 2 + (int)bset_has(&sets[k], (unsigned)b);
            if (remap[key] < 0) remap[key] = nn++;
            ncls[b] = remap[key];
        }
        memcpy(cls, ncls, sizeof cls);
        n_cls = nn;
    }
    int rep[256];
    for (int b = 255; b >= 0; b--) rep[cls[b]] = b;

    dctx x;
    memset(&x, 0, sizeof x);
    x.f = f;
    x.accept = accept;
    x.d = d;
    d->n = 0;
    d->delta = NULL;
    d->accept = NULL;
    x.stack = malloc((size_t)f->n * sizeof *x.stack);
    x.buf = malloc((size_t)f->n * sizeof *x.buf);
    x.mark = calloc((size_t)f->n, sizeof *x.mark);
    if (!x.stack || !x.buf || !x.mark || dctx_rehash(&x, 1024) < 0) goto nomem;
    x.buf[0] = start;
    if (dctx_lookup(&x, dctx_closure(&x, 1)) < 0) goto nomem;
    for (int q = 0; q < d->n; q++) {
        for (int c = 0; c < n_cls; c++) {
            int b = rep[c], nseed = 0;
            for (int k = 0; k < x.len[q]; k++) {
                const nstate *ns = &f->s[x.pool[x.off[q] + (size_t)k]];
                if (ns->set >= 0 && bset_has(&sets[ns->set], (unsigned)b))
                    x.buf[nseed++] = ns->out1;
            }
            int to = -1;
            if (nseed) {
                int nn = dctx_closure(&x, nseed);
                if (nn) {
                    to = dctx_lookup(&x, nn);
                    if (to == -1) goto nomem;
                    if (to == -2) {
                        st = wb_err_set(err, WB_ERR_ARG, "regex: the automaton exceeds %d "
                                        "states; simplify the pattern", RX_MAX_DFA);
                        goto out;
                    }
                }
            }
            for (int bb = 0; bb < 256; bb++)
                if (cls[bb] == c) d->delta[(size_t)q * 256 + (size_t)bb] = to;
        }
    }
    goto out;
nomem:
    st = wb_err_set(err, WB_ERR_NOMEM, "regex: out of memory building the automaton");
out:
    free(x.stack);
    free(x.buf);
    free(x.mark);
    free(x.pool);
    free(x.off);
    free(x.len);
    free(x.slots);
    if (st != WB_OK) {
        free(d->delta);
        free(d->accept);
        d->delta = NULL;
        d->accept = NULL;
        d->n = 0;
    }
    return st;
}

/* Remove transitions into states from which no accepting state is reachable. Returns whether
 * the start state is alive. */
static int dfa_trim(dfa *d) {
    int n = d->n;
    unsigned char *live = calloc((size_t)n, 1);
    int *cnt = calloc((size_t)n + 1, sizeof *cnt), *pred = NULL, *queue = NULL;
    if (!live || !cnt) goto fail;
    size_t edges = 0;
    for (int q = 0; q < n; q++)
        for (int b = 0; b < 256; b++) {
            int32_t t = d->delta[(size_t)q * 256 + (size_t)b];
            if (t >= 0 && (b == 0 || d->delta[(size_t)q * 256 + (size_t)b - 1] != t)) {
                cnt[t + 1]++;
                edges++;
            }
        }
    for (int q = 0; q < n; q++) cnt[q + 1] += cnt[q];
    pred = malloc((edges ? edges : 1) * sizeof *pred);
    queue = malloc((size_t)n * sizeof *queue);
    if (!pred || !queue) goto fail;
    {
        int *fill = malloc((size_t)n * sizeof *fill);
        if (!fill) goto fail;
        memcpy(fill, cnt, (size_t)n * sizeof *fill);
        for (int q = 0; q < n; q++)
            for (int b = 0; b < 256; b++) {
                int32_t t = d->delta[(size_t)q * 256 + (size_t)b];
                if (t >= 0 && (b == 0 || d->delta[(size_t)q * 256 + (size_t)b - 1] != t))
                    pred[fill[t]++] = q;
            }
        free(fill);
    }
    int qh = 0, qt = 0;
    for (int q = 0; q < n; q++)
        if (d->accept[q]) live[q] = 1, queue[qt++] = q;
    while (qh < qt) {
        int t = queue[qh++];
        for (int k = cnt[t]; k < cnt[t + 1]; k++)
            if (!live[pred[k]]) live[pred[k]] = 1, queue[qt++] = pred[k];
    }
    for (size_t i = 0; i < (size_t)n * 256; i++)
        if (d->delta[i] >= 0 && !live[d->delta[i]]) d->delta[i] = -1;
    int ok = n > 0 && live[0];
    free(live);
    free(cnt);
    free(pred);
    free(queue);
    return ok;
fail:
    free(live);
    free(cnt);
    free(pred);
    free(queue);
    return -1;
}

/* =================================== the constraint ======================================== */

struct wb_constraint {
    atomic_int refs;
    wb_constraint_kind kind;
    int32_t V, W; /* vocab size, mask words */
    int32_t eos;
    /* compiled kinds */
    int n_states;
    int32_t *delta;         /* [n_states * 256] */
    unsigned char *accept;  /* [n_states] */
    int32_t *mask_of;       /* [n_states] index into masks, -1: none allowed */
    int32_t *n_allowed;     /* [n_states], eos included */
    int32_t *n_cont;        /* [n_states], tokens that continue the match */
    uint32_t *masks;        /* [n_masks * W] */
    int n_masks;
    char *tok_bytes;        /* every allowed-able token's bytes, concatenated */
    size_t *tok_off;        /* [V + 1] */
    /* fn kind */
    wb_constraint_fn fn;
    void *fn_data;
    double compile_ms;
};

const wb_constraint *wb_constraint_retain(const wb_constraint *c) {
    if (c) atomic_fetch_add(&((wb_constraint *)c)->refs, 1);
    return c;
}

void wb_constraint_free(wb_constraint *c) {
    if (!c) return;
    if (atomic_fetch_sub(&c->refs, 1) > 1) return;
    free(c->delta);
    free(c->accept);
    free(c->mask_of);
    free(c->n_allowed);
    free(c->n_cont);
    free(c->masks);
    free(c->tok_bytes);
    free(c->tok_off);
    free(c);
}

wb_constraint_kind wb_constraint_kind_of(const wb_constraint *c) { return c ? c->kind : 0; }
int32_t wb_constraint_vocab_size(const wb_constraint *c) { return c ? c->V : 0; }

wb_constraint_info wb_constraint_get_info(const wb_constraint *c) {
    wb_constraint_info in = {0, 0, 0, 0};
    if (!c) return in;
    in.n_states = c->n_states;
    in.n_masks = c->n_masks;
    in.compile_ms = c->compile_ms;
    size_t n = (size_t)c->n_states;
    in.memory_bytes = sizeof *c + n * (256 * 4 + 1 + 12) + (size_t)c->n_masks * (size_t)c->W * 4 +
                      (c->tok_off ? (size_t)(c->V + 1) * sizeof(size_t) + c->tok_off[c->V] : 0);
    return in;
}

/* A byte trie of the vocabulary: first-child / next-sibling lists, one token id per node plus a
 * chain for ids with identical bytes. */
typedef struct trie {
    int32_t *child, *sib, *tok;
    unsigned char *byte;
    int32_t n, cap;
    int32_t root_child[256];
    int32_t *same; /* [V] next id with the same bytes, -1 */
} trie;

static void trie_free(trie *t) {
    free(t->child);
    free(t->sib);
    free(t->tok);
    free(t->byte);
    free(t->same);
}

static int32_t trie_node(trie *t, unsigned char b) {
    /* Capacity is reserved up front (one node per token byte at most). */
    t->child[t->n] = -1;
    t->sib[t->n] = -1;
    t->tok[t->n] = -1;
    t->byte[t->n] = b;
    return t->n++;
}

/* Children are found through a hash of (parent, byte), not by walking sibling lists: near the
 * root of a large vocabulary a node has dozens of children and the walks dominate. */
static int trie_build(trie *t, const wb_constraint *c) {
    memset(t, 0, sizeof *t);
    for (int b = 0; b < 256; b++) t->root_child[b] = -1;
    size_t total = c->tok_off[c->V] + 1, hcap = 1024;
    while (hcap < 2 * total) hcap *= 2;
    t->same = malloc((size_t)c->V * sizeof *t->same);
    t->child = malloc(total * sizeof *t->child);
    t->sib = malloc(total * sizeof *t->sib);
    t->tok = malloc(total * sizeof *t->tok);
    t->byte = malloc(total);
    uint64_t *keys = calloc(hcap, sizeof *keys); /* (parent << 8 | byte) + 1; 0 = empty */
    int32_t *vals = malloc(hcap * sizeof *vals);
    if (!t->same || !t->child || !t->sib || !t->tok || !t->byte || !keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    t->cap = (int32_t)total;
    for (int32_t id = 0; id < c->V; id++) {
        t->same[id] = -1;
        size_t L = c->tok_off[id + 1] - c->tok_off[id];
        if (L == 0) continue;
        const unsigned char *s = (const unsigned char *)c->tok_bytes + c->tok_off[id];
        int32_t node = t->root_child[s[0]];
        if (node < 0) {
            node = trie_node(t, s[0]);
            t->root_child[s[0]] = node;
        }
        for (size_t i = 1; i < L; i++) {
            uint64_t key = (((uint64_t)(uint32_t)node << 8) | s[i]) + 1;
            size_t h = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (hcap - 1);
            while (keys[h] && keys[h] != key) h = (h + 1) & (hcap - 1);
            if (!keys[h]) {
                int32_t ch = trie_node(t, s[i]);
                t->sib[ch] = t->child[node];
                t->child[node] = ch;
                keys[h] = key;
                vals[h] = ch;
            }
            node = vals[h];
        }
        t->same[id] = t->tok[node];
        t->tok[node] = id;
    }
    free(keys);
    free(vals);
    return 0;
}

static uint64_t hash_words(const uint32_t *w, int32_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (int32_t i = 0; i < n; i++) h = (h ^ w[i]) * 1099511628211ULL;
    return h ^ (h >> 31);
}

/* Mask store: distinct masks only (states inside a long string or a count share them). */
typedef struct maskset {
    uint32_t *masks;
    int32_t n, cap;
    int32_t *slots; /* hash of mask index, -1 empty */
    size_t hcap;
} maskset;

/* Index of mask m (W words) in the set, added if new; -1 on allocation failure. */
static int32_t maskset_add(maskset *ms, const uint32_t *m, int32_t W) {
    size_t h = (size_t)hash_words(m, W) & (ms->hcap - 1);
    while (ms->slots[h] >= 0) {
        if (memcmp(ms->masks + (size_t)ms->slots[h] * (size_t)W, m, (size_t)W * 4) == 0)
            return ms->slots[h];
        h = (h + 1) & (ms->hcap - 1);
    }
    if (ms->n == ms->cap) {
        int32_t nc = ms->cap ? 2 * ms->cap : 16;
        uint32_t *nm = realloc(ms->masks, (size_t)nc * (size_t)W * sizeof *nm);
        if (!nm) return -1;
        ms->masks = nm;
        ms->cap = nc;
    }
    memcpy(ms->masks + (size_t)ms->n * (size_t)W, m, (size_t)W * 4);
    ms->slots[h] = ms->n;
    return ms->n++;
}

/* One state's mask: every token whose bytes walk the DFA from q without dying and end in a
 * state that is not `dead`. A depth-first walk of the vocabulary trie, pruned where the DFA
 * dies. With `edges`, also records the distinct states tokens lead to. Returns the count. */
typedef struct walk {
    const trie *t;
    int32_t *stk_node, *stk_state;
    int32_t *seen; /* stamp per state for edge dedupe */
    int32_t *edges;
    size_t n_edges, cap_edges;
    int oom;
} walk;

static int32_t mask_of_state(const wb_constraint *c, walk *w, int q, const unsigned char *dead,
                             int collect, uint32_t *m) {
    const trie *t = w->t;
    memset(m, 0, (size_t)c->W * sizeof *m);
    int32_t cont = 0;
    const int32_t *dq = c->delta + (size_t)q * 256;
    int32_t sp = 0;
    for (int b = 0; b < 256; b++)
        if (t->root_child[b] >= 0 && dq[b] >= 0)
            w->stk_node[sp] = t->root_child[b], w->stk_state[sp] = dq[b], sp++;
    while (sp) {
        sp--;
        int32_t nd = w->stk_node[sp], s = w->stk_state[sp];
        if (t->tok[nd] >= 0 && !dead[s]) {
            for (int32_t id = t->tok[nd]; id >= 0; id = t->same[id]) {
                m[id >> 5] |= 1u << (id & 31);
                cont++;
            }
            if (collect && w->seen[s] != q + 1) {
                w->seen[s] = q + 1;
                if (w->n_edges == w->cap_edges) {
                    size_t nc = w->cap_edges ? 2 * w->cap_edges : 1024;
                    int32_t *ne = realloc(w->edges, nc * 2 * sizeof *ne);
                    if (!ne) {
                        w->oom = 1;
                        return cont;
                    }
                    w->edges = ne;
                    w->cap_edges = nc;
                }
                w->edges[2 * w->n_edges] = q;
                w->edges[2 * w->n_edges + 1] = s;
                w->n_edges++;
            }
        }
        const int32_t *ds = c->delta + (size_t)s * 256;
        for (int32_t ch = t->child[nd]; ch >= 0; ch = t->sib[ch])
            if (ds[t->byte[ch]] >= 0) {
                w->stk_node[sp] = ch;
                w->stk_state[sp] = ds[t->byte[ch]];
                sp++;
            }
    }
    return cont;
}

/* The masks of every state. Pass 0 also records the token-level graph (state -> states a token
 * leads to); a state is live when that graph reaches an accepting state. Byte-level trimming
 * already makes every state live when each byte the pattern needs is some token, so the second
 * pass, which drops tokens into dead states, runs only for vocabularies with gaps. */
static wb_status build_masks(wb_constraint *c, wb_err *err) {
    const int n = c->n_states;
    const int32_t W = c->W;
    wb_status st = WB_OK;
    trie t;
    walk w;
    memset(&w, 0, sizeof w);
    maskset ms;
    memset(&ms, 0, sizeof ms);
    unsigned char *dead = calloc((size_t)n, 1);
    uint32_t *m = malloc((size_t)W * sizeof *m);
    int32_t *rcnt = NULL, *pred = NULL, *queue = NULL;
    w.seen = calloc((size_t)n, sizeof *w.seen);
    c->mask_of = malloc((size_t)n * sizeof *c->mask_of);
    c->n_allowed = malloc((size_t)n * sizeof *c->n_allowed);
    c->n_cont = malloc((size_t)n * sizeof *c->n_cont);
    ms.hcap = 64;
    while (ms.hcap < (size_t)n * 2) ms.hcap *= 2;
    ms.slots = malloc(ms.hcap * sizeof *ms.slots);
    int tb = trie_build(&t, c);
    if (!dead || !m || !w.seen || !c->mask_of || !c->n_allowed || !c->n_cont || !ms.slots ||
        tb < 0)
        goto nomem;
    w.t = &t;
    w.stk_node = malloc((size_t)(t.n + 1) * sizeof *w.stk_node);
    w.stk_state = malloc((size_t)(t.n + 1) * sizeof *w.stk_state);
    if (!w.stk_node || !w.stk_state) goto nomem;

    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < ms.hcap; i++) ms.slots[i] = -1;
        ms.n = 0;
        for (int q = 0; q < n; q++) {
            int32_t cont = mask_of_state(c, &w, q, dead, pass == 0, m);
            if (w.oom) goto nomem;
            c->n_cont[q] = cont;
            int32_t na = cont;
            /* eos where the match may end but could go on */
            if (c->accept[q] && cont > 0 && c->eos >= 0) {
                m[c->eos >> 5] |= 1u << (c->eos & 31);
                na++;
            }
            c->n_allowed[q] = na;
            c->mask_of[q] = na ? maskset_add(&ms, m, W) : -1;
            if (na && c->mask_of[q] < 0) goto nomem;
        }
        if (pass == 1) break;
        /* Backward reachability from the accepting states over the token graph. */
        rcnt = calloc((size_t)n + 1, sizeof *rcnt);
        pred = malloc((w.n_edges ? w.n_edges : 1) * sizeof *pred);
        queue = malloc((size_t)n * sizeof *queue);
        if (!rcnt || !pred || !queue) goto nomem;
        for (size_t e = 0; e < w.n_edges; e++) rcnt[w.edges[2 * e + 1] + 1]++;
        for (int q = 0; q < n; q++) rcnt[q + 1] += rcnt[q];
        for (size_t e = 0; e < w.n_edges; e++) pred[rcnt[w.edges[2 * e + 1]]++] = w.edges[2 * e];
        for (int q = n; q > 0; q--) rcnt[q] = rcnt[q - 1]; /* restore the starts */
        rcnt[0] = 0;
        int qh = 0, qt = 0, any_dead = 0;
        for (int q = 0; q < n; q++) {
            dead[q] = !c->accept[q];
            if (!dead[q]) queue[qt++] = q;
        }
        while (qh < qt) {
            int x = queue[qh++];
            for (int32_t k = rcnt[x]; k < rcnt[x + 1]; k++)
                if (dead[pred[k]]) dead[pred[k]] = 0, queue[qt++] = pred[k];
        }
        for (int q = 0; q < n; q++) any_dead |= dead[q];
        if (!any_dead) break;
    }
    if (dead[0]) {
        st = wb_err_set(err, WB_ERR_ARG, "constraint cannot be satisfied: no sequence of tokens "
                        "in this vocabulary spells a match (a byte it needs is in no token)");
        goto out;
    }
    c->masks = ms.masks;
    c->n_masks = ms.n;
    ms.masks = NULL;
    goto out;
nomem:
    st = wb_err_set(err, WB_ERR_NOMEM, "constraint: out of memory building token masks");
out:
    trie_free(&t);
    free(dead);
    free(m);
    free(rcnt);
    free(pred);
    free(queue);
    free(w.seen);
    free(w.edges);
    free(w.stk_node);
    free(w.stk_state);
    free(ms.masks);
    free(ms.slots);
    return st;
}

static wb_status check_vocab(const wb_constraint_vocab *v, wb_err *err) {
    if (!v) return wb_err_set(err, WB_ERR_ARG, "constraint: vocab is NULL");
    if (v->n_tokens < 1) return wb_err_set(err, WB_ERR_ARG, "constraint: vocab has %d tokens",
                                           (int)v->n_tokens);
    if (!v->bytes || !v->lens) return wb_err_set(err, WB_ERR_ARG, "constraint: vocab arrays "
                                                 "are NULL");
    if (v->eos_id >= v->n_tokens) return wb_err_set(err, WB_ERR_RANGE, "constraint: eos_id %d "
                                                    "is outside the vocab of %d", (int)v->eos_id,
                                                    (int)v->n_tokens);
    return WB_OK;
}

/* The shared compiler: pattern -> AST -> NFA -> DFA -> masks. `what` names the source in
 * errors ("regex", "choice", "json_schema"). */
static wb_status compile_regex(const wb_constraint_vocab *v, const char *pattern, size_t len,
                               wb_constraint_kind kind, wb_constraint **out, wb_err *err) {
    double t0 = wb_clock_ms();
    if (!out) return wb_err_set(err, WB_ERR_ARG, "constraint: out is NULL");
    *out = NULL;
    wb_status st = check_vocab(v, err);
    if (st != WB_OK) return st;
    if (!pattern && len) return wb_err_set(err, WB_ERR_ARG, "regex: pattern is NULL");
    rx r;
    memset(&r, 0, sizeof r);
    r.p = (const unsigned char *)(pattern ? pattern : "");
    r.n = len;
    r.err = err;
    int root = rx_alt_expr(&r);
    if (root >= 0 && r.i < r.n)
        root = rx_fail(&r, WB_ERR_ARG, "regex: unbalanced ')' at byte %zu", r.i);
    nfa f;
    memset(&f, 0, sizeof f);
    f.r = &r;
    dfa d = {0, NULL, NULL};
    wb_constraint *c = NULL;
    int s0 = -1, e0 = -1, acc = -1;
    if (root < 0 || nfa_build(&f, root, &s0, &e0) < 0 || (acc = nfa_new(&f, -1)) < 0) {
        st = r.st != WB_OK ? r.st : wb_err_set(err, WB_ERR_ARG, "regex: invalid pattern");
        goto out;
    }
    f.s[e0].out1 = acc;
    if ((st = dfa_build(&f, r.sets, r.n_sets, s0, acc, &d, err)) != WB_OK) goto out;
    int alive = dfa_trim(&d);
    if (alive < 0) {
        st = wb_err_set(err, WB_ERR_NOMEM, "regex: out of memory");
        goto out;
    }
    if (!alive) {
        st = wb_err_set(err, WB_ERR_ARG, "%s: the pattern matches no string at all",
                        wb_constraint_kind_name(kind));
        goto out;
    }
    c = calloc(1, sizeof *c);
    if (!c) goto nomem;
    atomic_init(&c->refs, 1);
    c->kind = kind;
    c->V = v->n_tokens;
    c->W = (v->n_tokens + 31) / 32;
    c->eos = v->eos_id;
    c->n_states = d.n;
    c->delta = d.delta;
    c->accept = d.accept;
    d.delta = NULL;
    d.accept = NULL;
    c->tok_off = malloc(((size_t)c->V + 1) * sizeof *c->tok_off);
    if (!c->tok_off) goto nomem;
    size_t total = 0;
    for (int32_t i = 0; i < c->V; i++) {
        c->tok_off[i] = total;
        if (v->bytes[i] && i != v->eos_id) total += v->lens[i];
    }
    c->tok_off[c->V] = total;
    c->tok_bytes = malloc(total ? total : 1);
    if (!c->tok_bytes) goto nomem;
    for (int32_t i = 0; i < c->V; i++)
        if (c->tok_off[i + 1] > c->tok_off[i])
            memcpy(c->tok_bytes + c->tok_off[i], v->bytes[i], v->lens[i]);
    if ((st = build_masks(c, err)) != WB_OK) goto out;
    c->compile_ms = wb_clock_ms() - t0;
    *out = c;
    c = NULL;
    goto out;
nomem:
    st = wb_err_set(err, WB_ERR_NOMEM, "constraint: out of memory");
out:
    wb_constraint_free(c);
    free(d.delta);
    free(d.accept);
    free(f.s);
    free(r.nodes);
    free(r.sets);
    /* A choice or schema compiles through a generated regex: say which kind failed, so a too-long
     * label is not reported as a pattern the caller never wrote. */
    if (st != WB_OK && err && kind != WB_CONSTRAINT_REGEX && strncmp(err->msg, "regex: ", 7) == 0) {
        char msg[WB_ERR_MSG_SIZE];
        snprintf(msg, sizeof msg, "%s", err->msg + 7);
        wb_err_set(err, st, "%s: %s (compiled as a regex)", wb_constraint_kind_name(kind), msg);
    }
    return st;
}

wb_status wb_constraint_regex_new(const wb_constraint_vocab *v, const char *pattern, size_t len,
                                  wb_constraint **out, wb_err *err) {
    return compile_regex(v, pattern, len, WB_CONSTRAINT_REGEX, out, err);
}

/* The JSON kind: constraint_json.c turns the schema into a regex. */
wb_status wb_constraint_json_schema_new(const wb_constraint_vocab *v, const char *schema_json,
                                        size_t len, wb_json_ws ws, wb_constraint **out,
                                        wb_err *err) {
    if (out) *out = NULL;
    char *re = NULL;
    size_t rl = 0;
    wb_status st = wb_json_schema_to_regex(schema_json, len, ws, &re, &rl, err);
    if (st != WB_OK) return st;
    st = compile_regex(v, re, rl, WB_CONSTRAINT_JSON, out, err);
    wb_free(re);
    return st;
}

/* Append one byte as a regex literal: letters, digits and space as themselves, anything else
 * as \xHH so no byte can be mistaken for syntax. */
static char *append_literal(char *p, unsigned char b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == ' ' ||
        b == '_')
        *p++ = (char)b;
    else p += sprintf(p, "\\x%02x", b);
    return p;
}

wb_status wb_constraint_choice_new(const wb_constraint_vocab *v, const char *const *choices,
                                   const size_t *lens, int n, wb_leading_space space,
                                   wb_constraint **out, wb_err *err) {
    if (out) *out = NULL;
    if (n < 1 || !choices) return wb_err_set(err, WB_ERR_ARG, "choice: needs at least one string");
    if (space != WB_SPACE_OPTIONAL && space != WB_SPACE_NONE && space != WB_SPACE_ALWAYS)
        return wb_err_set(err, WB_ERR_ARG, "choice: leading space policy %d is unknown",
                          (int)space);
    size_t need = 16;
    for (int i = 0; i < n; i++) {
        if (!choices[i]) return wb_err_set(err, WB_ERR_ARG, "choice: string %d is NULL", i + 1);
        size_t L = lens ? lens[i] : strlen(choices[i]);
        if (L == 0) return wb_err_set(err, WB_ERR_ARG, "choice: string %d is empty", i + 1);
        need += 4 * L + 1;
    }
    char *re = malloc(need), *p = re;
    if (!re) return wb_err_set(err, WB_ERR_NOMEM, "choice: out of memory");
    if (space == WB_SPACE_OPTIONAL) p += sprintf(p, " ?");
    else if (space == WB_SPACE_ALWAYS) *p++ = ' ';
    *p++ = '(';
    for (int i = 0; i < n; i++) {
        if (i) *p++ = '|';
        size_t L = lens ? lens[i] : strlen(choices[i]);
        for (size_t k = 0; k < L; k++) p = append_literal(p, (unsigned char)choices[i][k]);
    }
    *p++ = ')';
    wb_status st = compile_regex(v, re, (size_t)(p - re), WB_CONSTRAINT_CHOICE, out, err);
    free(re);
    return st;
}

wb_status wb_constraint_fn_new(int32_t vocab_size, wb_constraint_fn fn, void *user_data,
                               wb_constraint **out, wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "constraint: out is NULL");
    *out = NULL;
    if (!fn) return wb_err_set(err, WB_ERR_ARG, "constraint fn: callback is NULL");
    if (vocab_size < 1) return wb_err_set(err, WB_ERR_ARG, "constraint fn: vocab_size = %d must "
                                          "be >= 1", (int)vocab_size);
    wb_constraint *c = calloc(1, sizeof *c);
    if (!c) return wb_err_set(err, WB_ERR_NOMEM, "constraint: out of memory");
    atomic_init(&c->refs, 1);
    c->kind = WB_CONSTRAINT_FN;
    c->V = vocab_size;
    c->W = (vocab_size + 31) / 32;
    c->eos = -1;
    c->fn = fn;
    c->fn_data = user_data;
    *out = c;
    return WB_OK;
}

int wb_constraint_matches(const wb_constraint *c, const char *bytes, size_t len) {
    if (!c || c->kind == WB_CONSTRAINT_FN || (!bytes && len)) return 0;
    int32_t q = 0;
    for (size_t i = 0; i < len && q >= 0; i++)
        q = c->delta[(size_t)q * 256 + (unsigned char)bytes[i]];
    return q >= 0 && c->accept[q];
}

/* ====================================== the cursor ========================================= */

struct wb_constraint_state {
    const wb_constraint *c;
    int32_t q;      /* DFA state */
    int ended;      /* eos taken, or the fn callback allowed nothing */
    int free_step;  /* fn kind: the callback put no restriction on this step */
    uint32_t *buf;  /* fn kind: the mask the callback fills */
};

wb_status wb_constraint_state_new(const wb_constraint *c, wb_constraint_state **out,
                                  wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "constraint state: out is NULL");
    *out = NULL;
    if (!c) return wb_err_set(err, WB_ERR_ARG, "constraint state: constraint is NULL");
    wb_constraint_state *s = calloc(1, sizeof *s);
    if (!s) return wb_err_set(err, WB_ERR_NOMEM, "constraint state: out of memory");
    s->c = wb_constraint_retain(c);
    if (c->kind == WB_CONSTRAINT_FN) {
        s->buf = malloc((size_t)c->W * sizeof *s->buf);
        if (!s->buf) {
            wb_constraint_free((wb_constraint *)s->c);
            free(s);
            return wb_err_set(err, WB_ERR_NOMEM, "constraint state: out of memory");
        }
    }
    *out = s;
    return WB_OK;
}

void wb_constraint_state_free(wb_constraint_state *s) {
    if (!s) return;
    wb_constraint_free((wb_constraint *)s->c);
    free(s->buf);
    free(s);
}

void wb_constraint_state_reset(wb_constraint_state *s) {
    if (!s) return;
    s->q = 0;
    s->ended = 0;
    s->free_step = 0;
}

wb_status wb_constraint_state_allowed(wb_constraint_state *s, const int32_t *generated,
                                      size_t n_generated, const uint32_t **mask,
                                      int32_t *n_allowed, wb_err *err) {
    if (!s || !mask || !n_allowed)
        return wb_err_set(err, WB_ERR_ARG, "constraint state: NULL argument");
    const wb_constraint *c = s->c;
    *mask = NULL;
    *n_allowed = 0;
    if (s->ended) return WB_OK;
    if (c->kind == WB_CONSTRAINT_FN) {
        memset(s->buf, 0, (size_t)c->W * sizeof *s->buf);
        int32_t n = 0;
        wb_status st = c->fn(c->fn_data, generated, n_generated, s->buf, c->V, &n, err);
        if (st != WB_OK) return st;
        s->free_step = n < 0;
        if (n < 0) {
            *n_allowed = -1;
            return WB_OK;
        }
        /* Count the bits rather than trust the callback's count, so the two cannot disagree. */
        if (c->V % 32) s->buf[c->W - 1] &= (1u << (c->V % 32)) - 1u;
        int32_t cnt = 0;
        for (int32_t w = 0; w < c->W; w++) cnt += __builtin_popcount(s->buf[w]);
        if (cnt == 0) s->ended = 1; /* the course's interface: an empty set ends the format */
        *n_allowed = cnt;
        *mask = cnt ? s->buf : NULL;
        return WB_OK;
    }
    int32_t m = c->mask_of[s->q];
    *n_allowed = c->n_allowed[s->q];
    *mask = m >= 0 ? c->masks + (size_t)m * (size_t)c->W : NULL;
    return WB_OK;
}

wb_status wb_constraint_state_advance(wb_constraint_state *s, int32_t id, wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "constraint state: NULL");
    const wb_constraint *c = s->c;
    if (id < 0 || id >= c->V)
        return wb_err_set(err, WB_ERR_RANGE, "constraint: token id %d is outside [0, %d)",
                          (int)id, (int)c->V);
    if (wb_constraint_state_complete(s))
        return wb_err_set(err, WB_ERR_STATE, "constraint: already complete, token %d cannot "
                          "follow", (int)id);
    if (c->kind == WB_CONSTRAINT_FN) {
        if (!s->free_step && !(s->buf[id >> 5] >> (id & 31) & 1u))
            return wb_err_set(err, WB_ERR_ARG, "constraint: token %d is not allowed here",
                              (int)id);
        return WB_OK;
    }
    int32_t m = c->mask_of[s->q];
    if (m < 0 || !(c->masks[(size_t)m * (size_t)c->W + (size_t)(id >> 5)] >> (id & 31) & 1u))
        return wb_err_set(err, WB_ERR_ARG, "constraint: token %d is not allowed in this state",
                          (int)id);
    if (id == c->eos && c->accept[s->q]) {
        s->ended = 1;
        return WB_OK;
    }
    int32_t q = s->q;
    for (size_t i = c->tok_off[id]; i < c->tok_off[id + 1]; i++)
        q = c->delta[(size_t)q * 256 + (unsigned char)c->tok_bytes[i]];
    s->q = q; /* >= 0: the mask admitted only tokens that stay alive */
    return WB_OK;
}

int wb_constraint_state_complete(const wb_constraint_state *s) {
    if (!s) return 0;
    if (s->ended) return 1;
    if (s->c->kind == WB_CONSTRAINT_FN) return 0;
    return s->c->accept[s->q] && s->c->n_cont[s->q] == 0;
}

int wb_constraint_state_accepting(const wb_constraint_state *s) {
    if (!s) return 0;
    if (s->c->kind == WB_CONSTRAINT_FN) return s->ended;
    return s->ended || s->c->accept[s->q];
}

int wb_constraint_state_is_end(const wb_constraint_state *s, int32_t id) {
    return s && s->c->kind != WB_CONSTRAINT_FN && !s->ended && id == s->c->eos && id >= 0 &&
           s->c->accept[s->q];
}
