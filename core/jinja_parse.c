/* jinja_parse.c - tokens -> syntax tree, by recursive descent with the grammar and precedence
 * of @huggingface/jinja (lowest first): ternary / select (`a if c else b`, `a if c`), or, and,
 * not, comparisons and in / not in, + - ~, * / // %, **, is-tests, |filters, unary sign,
 * calls and member access, primaries. Every recursive step counts against a hard nesting cap,
 * so the C stack used is bounded whatever the input; elif chains are built iteratively. */
#include "jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ps {
    jarena *a;
    const jtok *t;
    size_t n, cur;
    int depth, max_depth;
} ps;

static _Noreturn void perr(ps *p, const char *fmt, const char *arg) {
    int line = p->cur < p->n ? p->t[p->cur].line : p->n ? p->t[p->n - 1].line : 0;
    jfailf(p->a->fail, WB_ERR_FORMAT, line, fmt, arg);
}

static const char *tok_desc(ps *p) {
    if (p->cur >= p->n) return "the end of the template";
    return p->t[p->cur].type == T_TEXT ? "text" : p->t[p->cur].s;
}

static void enter(ps *p) {
    if (++p->depth > p->max_depth) {
        char m[16];
        snprintf(m, sizeof m, "%d", p->max_depth);
        perr(p, "the template is nested deeper than %s levels", m);
    }
}
static void leave(ps *p) { p->depth--; }

static jnode *node(ps *p, jnode_kind k, int line) {
    jnode *x = ja_alloc(p->a, sizeof *x);
    x->kind = k;
    x->line = line;
    return x;
}

static int cur_line(ps *p) { return p->cur < p->n ? p->t[p->cur].line : p->n ? p->t[p->n - 1].line : 0; }

static void lpush(ps *p, jlist *l, jnode *x) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        l->v = ja_grow(p->a, l->v, l->n * sizeof *l->v, nc * sizeof *l->v);
        l->cap = nc;
    }
    l->v[l->n++] = x;
}

static int is(ps *p, jtok_type t) { return p->cur < p->n && p->t[p->cur].type == t; }
static int is2(ps *p, jtok_type a, jtok_type b) {
    return p->cur + 1 < p->n && p->t[p->cur].type == a && p->t[p->cur + 1].type == b;
}
static int is_ident(ps *p, const char *name) {
    return p->cur < p->n && p->t[p->cur].type == T_IDENT && strcmp(p->t[p->cur].s, name) == 0;
}
static int is_ident_at(ps *p, size_t k, const char *name) {
    return p->cur + k < p->n && p->t[p->cur + k].type == T_IDENT && strcmp(p->t[p->cur + k].s, name) == 0;
}
/* {% name ... for one of the names (NULL-terminated) */
static int is_stmt(ps *p, const char *const *names) {
    if (!(p->cur + 1 < p->n && p->t[p->cur].type == T_OPEN_STMT && p->t[p->cur + 1].type == T_IDENT)) return 0;
    for (; *names; names++)
        if (strcmp(p->t[p->cur + 1].s, *names) == 0) return 1;
    return 0;
}

static const jtok *expect(ps *p, jtok_type t, const char *what) {
    if (!is(p, t)) {
        char m[160];
        snprintf(m, sizeof m, "expected %s, found '%.60s'", what, tok_desc(p));
        perr(p, "%s", m);
    }
    return &p->t[p->cur++];
}

static void expect_ident(ps *p, const char *name) {
    if (!is_ident(p, name)) {
        char m[160];
        snprintf(m, sizeof m, "expected '%s', found '%.60s'", name, tok_desc(p));
        perr(p, "%s", m);
    }
    p->cur++;
}

static jnode *parse_any(ps *p);
static jnode *parse_expression(ps *p);
static jnode *parse_primary(ps *p);
static void parse_args(ps *p, jlist *out, int params);
static jnode *parse_call(ps *p, jnode *callee);
static jnode *parse_member(ps *p, jnode *obj);

/* Statements up to (not including) {% one-of-names; errors at the end of the template. */
static void parse_body(ps *p, jlist *body, const char *const *names, const char *opener, int line) {
    while (!is_stmt(p, names)) {
        if (p->cur >= p->n) {
            char m[160];
            snprintf(m, sizeof m, "{%% %s %%} (line %d) is never closed with {%% %s %%}", opener, line, names[0]);
            jfailf(p->a->fail, WB_ERR_FORMAT, line, "%s", m);
        }
        lpush(p, body, parse_any(p));
    }
}

static void close_block(ps *p, const char *name) {
    expect(p, T_OPEN_STMT, "{%");
    expect_ident(p, name);
    expect(p, T_CLOSE_STMT, "%}");
}

static jnode *parse_sequence(ps *p, int primary) {
    int line = cur_line(p);
    jnode *first = primary ? parse_primary(p) : parse_expression(p);
    if (!is(p, T_COMMA)) return first;
    jnode *t = node(p, N_TUPLE, line);
    lpush(p, &t->list, first);
    while (is(p, T_COMMA)) {
        p->cur++;
        lpush(p, &t->list, primary ? parse_primary(p) : parse_expression(p));
    }
    return t;
}

static jnode *parse_if(ps *p, int line) {
    static const char *const stops[] = {"endif", "elif", "else", NULL};
    static const char *const endif[] = {"endif", NULL};
    jnode *head = node(p, N_IF, line), *cur = head;
    cur->a = parse_expression(p);
    expect(p, T_CLOSE_STMT, "%}");
    for (;;) {
        parse_body(p, &cur->list, stops, "if", line);
        if (is_stmt(p, (const char *const[]){"elif", NULL})) {
            p->cur += 2;
            jnode *e = node(p, N_IF, cur_line(p));
            e->flag = 1;
            e->a = parse_expression(p);
            expect(p, T_CLOSE_STMT, "%}");
            lpush(p, &cur->list2, e);
            cur = e;
            continue;
        }
        if (is_stmt(p, (const char *const[]){"else", NULL})) {
            p->cur += 2;
            expect(p, T_CLOSE_STMT, "%}");
            parse_body(p, &cur->list2, endif, "if", line);
        }
        break;
    }
    return head;
}

static jnode *parse_statement(ps *p) {
    int line = cur_line(p);
    expect(p, T_OPEN_STMT, "{%");
    if (!is(p, T_IDENT)) perr(p, "expected a statement name after {%%, found '%.60s'", tok_desc(p));
    const char *name = p->t[p->cur].s;
    p->cur++;
    jnode *r;
    if (strcmp(name, "set") == 0) {
        r = node(p, N_SET, line);
        r->a = parse_sequence(p, 0);
        if (is(p, T_EQUALS)) {
            p->cur++;
            r->b = parse_sequence(p, 0);
        } else {
            expect(p, T_CLOSE_STMT, "%} or = after {% set");
            parse_body(p, &r->list, (const char *const[]){"endset", NULL}, "set", line);
            expect(p, T_OPEN_STMT, "{%");
            expect_ident(p, "endset");
        }
        expect(p, T_CLOSE_STMT, "%}");
    } else if (strcmp(name, "if") == 0) {
        r = parse_if(p, line);
        close_block(p, "endif");
    } else if (strcmp(name, "macro") == 0) {
        r = node(p, N_MACRO, line);
        jnode *nm = parse_primary(p);
        if (nm->kind != N_IDENT) perr(p, "expected a macro name after {%% macro%s", "");
        r->s = nm->s;
        r->n = nm->n;
        parse_args(p, &r->list, 1);
        expect(p, T_CLOSE_STMT, "%}");
        parse_body(p, &r->list2, (const char *const[]){"endmacro", NULL}, "macro", line);
        close_block(p, "endmacro");
    } else if (strcmp(name, "for") == 0) {
        r = node(p, N_FOR, line);
        r->a = parse_sequence(p, 1);
        if (r->a->kind != N_IDENT && r->a->kind != N_TUPLE) perr(p, "expected a loop variable after {%% for%s", "");
        if (!is_ident(p, "in")) perr(p, "expected 'in' after the loop variable, found '%.60s'", tok_desc(p));
        p->cur++;
        r->b = parse_expression(p);
        expect(p, T_CLOSE_STMT, "%}");
        parse_body(p, &r->list, (const char *const[]){"endfor", "else", NULL}, "for", line);
        if (is_stmt(p, (const char *const[]){"else", NULL})) {
            p->cur += 2;
            expect(p, T_CLOSE_STMT, "%}");
            parse_body(p, &r->list2, (const char *const[]){"endfor", NULL}, "for", line);
        }
        close_block(p, "endfor");
    } else if (strcmp(name, "call") == 0) {
        r = node(p, N_CALLSTMT, line);
        if (is(p, T_LPAREN)) {
            parse_args(p, &r->list, 1);
            r->flag = 1;
        }
        jnode *callee = parse_primary(p);
        if (callee->kind != N_IDENT) perr(p, "expected a macro name after {%% call%s", "");
        jnode *call = node(p, N_CALL, line);
        call->a = callee;
        parse_args(p, &call->list, 0);
        r->a = call;
        expect(p, T_CLOSE_STMT, "%}");
        parse_body(p, &r->list2, (const char *const[]){"endcall", NULL}, "call", line);
        close_block(p, "endcall");
    } else if (strcmp(name, "break") == 0 || strcmp(name, "continue") == 0) {
        r = node(p, name[0] == 'b' ? N_BREAK : N_CONTINUE, line);
        expect(p, T_CLOSE_STMT, "%}");
    } else if (strcmp(name, "filter") == 0) {
        r = node(p, N_FILTERSTMT, line);
        jnode *f = parse_primary(p);
        if (f->kind == N_IDENT && is(p, T_LPAREN)) f = parse_call(p, f);
        r->a = f;
        expect(p, T_CLOSE_STMT, "%}");
        parse_body(p, &r->list, (const char *const[]){"endfilter", NULL}, "filter", line);
        close_block(p, "endfilter");
    } else {
        jfailf(p->a->fail, WB_ERR_FORMAT, line, "unknown statement {%% %s %%}", name);
    }
    return r;
}

static jnode *parse_any(ps *p) {
    enter(p);
    jnode *r;
    const jtok *t = &p->t[p->cur];
    switch (t->type) {
    case T_COMMENT:
        r = node(p, N_COMMENT, t->line);
        p->cur++;
        break;
    case T_TEXT:
        r = node(p, N_TEXT, t->line);
        r->s = t->s;
        r->n = t->n;
        p->cur++;
        break;
    case T_OPEN_STMT: r = parse_statement(p); break;
    case T_OPEN_EXPR:
        p->cur++;
        r = parse_expression(p);
        expect(p, T_CLOSE_EXPR, "}}");
        break;
    default: perr(p, "unexpected '%.60s' outside a tag", t->s);
    }
    leave(p);
    return r;
}

/* ---- expressions -------------------------------------------------------------------------------- */

static jnode *binary(ps *p, jop op, jnode *l, jnode *r, int line) {
    jnode *x = node(p, N_BINARY, line);
    x->op = op;
    x->a = l;
    x->b = r;
    return x;
}

static jnode *parse_or(ps *p);

static jnode *parse_if_expr(ps *p) {
    jnode *a = parse_or(p);
    if (is_ident(p, "if")) {
        int line = cur_line(p);
        p->cur++;
        jnode *test = parse_or(p);
        if (is_ident(p, "else")) {
            p->cur++;
            enter(p);
            jnode *t = node(p, N_TERNARY, line);
            t->a = test;
            t->b = a;
            t->c = parse_if_expr(p);
            leave(p);
            return t;
        }
        jnode *s = node(p, N_SELECT, line);
        s->a = a;
        s->b = test;
        return s;
    }
    return a;
}

static jnode *parse_expression(ps *p) {
    enter(p);
    jnode *r = parse_if_expr(p);
    leave(p);
    return r;
}

static jnode *parse_not(ps *p);
static jnode *parse_and(ps *p) {
    jnode *l = parse_not(p);
    while (is_ident(p, "and")) {
        int line = cur_line(p);
        p->cur++;
        l = binary(p, OP_AND, l, parse_not(p), line);
    }
    return l;
}

static jnode *parse_or(ps *p) {
    jnode *l = parse_and(p);
    while (is_ident(p, "or")) {
        int line = cur_line(p);
        p->cur++;
        l = binary(p, OP_OR, l, parse_and(p), line);
    }
    return l;
}

static jnode *parse_cmp(ps *p);
static jnode *parse_not(ps *p) {
    if (is_ident(p, "not")) {
        int line = cur_line(p);
        p->cur++;
        enter(p);
        jnode *u = node(p, N_UNARY, line);
        u->op = OP_NOT;
        u->a = parse_not(p);
        leave(p);
        return u;
    }
    return parse_cmp(p);
}

static jnode *parse_add(ps *p);
static jnode *parse_cmp(ps *p) {
    jnode *l = parse_add(p);
    for (;;) {
        int line = cur_line(p);
        jop op;
        if (is_ident(p, "not") && is_ident_at(p, 1, "in")) {
            op = OP_NOTIN;
            p->cur += 2;
        } else if (is_ident(p, "in")) {
            op = OP_IN;
            p->cur++;
        } else if (is(p, T_CMP)) {
            const char *s = p->t[p->cur++].s;
            op = strcmp(s, "==") == 0   ? OP_EQ
                 : strcmp(s, "!=") == 0 ? OP_NE
                 : strcmp(s, "<") == 0  ? OP_LT
                 : strcmp(s, ">") == 0  ? OP_GT
                 : strcmp(s, "<=") == 0 ? OP_LE
                                        : OP_GE;
        } else {
            break;
        }
        l = binary(p, op, l, parse_add(p), line);
    }
    return l;
}

static jnode *parse_mul(ps *p);
static jnode *parse_add(ps *p) {
    jnode *l = parse_mul(p);
    while (is(p, T_ADD)) {
        int line = cur_line(p);
        char c = p->t[p->cur++].s[0];
        l = binary(p, c == '+' ? OP_ADD : c == '-' ? OP_SUB : OP_CONCAT, l, parse_mul(p), line);
    }
    return l;
}

static jnode *parse_pow(ps *p);
static jnode *parse_mul(ps *p) {
    jnode *l = parse_pow(p);
    while (is(p, T_MUL)) {
        int line = cur_line(p);
        const char *s = p->t[p->cur++].s;
        jop op = s[0] == '*' ? OP_MUL : s[0] == '%' ? OP_MOD : s[1] == '/' ? OP_FLOORDIV : OP_DIV;
        l = binary(p, op, l, parse_pow(p), line);
    }
    return l;
}

static jnode *parse_test(ps *p);
static jnode *parse_pow(ps *p) {
    jnode *l = parse_test(p);
    while (is(p, T_POW)) {
        int line = cur_line(p);
        p->cur++;
        l = binary(p, OP_POW, l, parse_test(p), line);
    }
    return l;
}

static int is_keyword(const char *s) {
    static const char *const kw[] = {"and", "or", "not", "in", "is", "if", "else", NULL};
    for (int i = 0; kw[i]; i++)
        if (strcmp(s, kw[i]) == 0) return 1;
    return 0;
}

static jnode *parse_filter(ps *p);
static jnode *parse_test(ps *p) {
    jnode *operand = parse_filter(p);
    while (is_ident(p, "is")) {
        int line = cur_line(p);
        p->cur++;
        int neg = is_ident(p, "not");
        if (neg) p->cur++;
        if (!is(p, T_IDENT)) perr(p, "expected a test name after 'is', found '%.60s'", tok_desc(p));
        jnode *t = node(p, N_TEST, line);
        t->s = p->t[p->cur].s;
        t->n = p->t[p->cur].n;
        t->flag = neg;
        t->a = operand;
        p->cur++;
        /* Jinja2's test arguments: `is divisibleby(3)`, `is equalto 2`, `is sameas none` */
        if (is(p, T_LPAREN)) {
            parse_args(p, &t->list, 0);
        } else if (is(p, T_NUM) || is(p, T_STR) || (is(p, T_IDENT) && !is_keyword(p->t[p->cur].s))) {
            enter(p);
            lpush(p, &t->list, parse_member(p, parse_primary(p)));
            leave(p);
        }
        operand = t;
    }
    return operand;
}

static jnode *parse_unary(ps *p);
static jnode *parse_filter(ps *p) {
    jnode *operand = parse_unary(p);
    while (is(p, T_PIPE)) {
        int line = cur_line(p);
        p->cur++;
        jnode *f = parse_primary(p);
        if (f->kind != N_IDENT) perr(p, "expected a filter name after '|'%s", "");
        if (is(p, T_LPAREN)) f = parse_call(p, f);
        jnode *x = node(p, N_FILTER, line);
        x->a = operand;
        x->b = f;
        operand = x;
    }
    return operand;
}

static jnode *parse_unary(ps *p) {
    if ((is(p, T_UNARY) || is(p, T_ADD)) && (p->t[p->cur].s[0] == '-' || p->t[p->cur].s[0] == '+') &&
        p->t[p->cur].n == 1) {
        int line = cur_line(p);
        char c = p->t[p->cur++].s[0];
        enter(p);
        jnode *u = node(p, N_UNARY, line);
        u->op = c == '-' ? OP_NEG : OP_POS;
        u->a = parse_unary(p);
        leave(p);
        return u;
    }
    jnode *m = parse_member(p, parse_primary(p));
    if (is(p, T_LPAREN)) return parse_call(p, m);
    return m;
}

static jnode *parse_call(ps *p, jnode *callee) {
    /* f(a)(b).c(d): a loop, not recursion, over the chain */
    jnode *e = callee;
    while (is(p, T_LPAREN)) {
        jnode *c = node(p, N_CALL, cur_line(p));
        c->a = e;
        parse_args(p, &c->list, 0);
        e = parse_member(p, c);
    }
    return e;
}

static void parse_args(ps *p, jlist *out, int params) {
    enter(p);
    expect(p, T_LPAREN, "(");
    int saw_kw = 0, saw_spread = 0;
    while (!is(p, T_RPAREN)) {
        if (p->cur >= p->n) perr(p, "an argument list is never closed with ')'%s", "");
        int line = cur_line(p);
        int kwspread = is(p, T_POW), spread = is(p, T_MUL) && strcmp(p->t[p->cur].s, "*") == 0;
        if (params && (kwspread || spread)) perr(p, "argument unpacking is not allowed in parameters%s", "");
        if (kwspread) {
            p->cur++;
            jnode *x = node(p, N_KWSPREAD, line);
            x->a = parse_expression(p);
            lpush(p, out, x);
            if (is(p, T_COMMA)) p->cur++;
            if (!is(p, T_RPAREN)) perr(p, "`**` must be applied to the last argument%s", "");
            break;
        }
        jnode *arg;
        if (spread) {
            if (saw_spread) perr(p, "only one `*` argument unpacking is allowed%s", "");
            saw_spread = 1;
            p->cur++;
            arg = node(p, N_SPREAD, line);
            arg->a = parse_expression(p);
        } else {
            arg = parse_expression(p);
            if (is(p, T_EQUALS)) {
                p->cur++;
                if (arg->kind != N_IDENT) perr(p, "expected a name before '=' in an argument list%s", "");
                jnode *kw = node(p, N_KWARG, line);
                kw->s = arg->s;
                kw->n = arg->n;
                kw->a = parse_expression(p);
                arg = kw;
            }
            if (params) {
                if (arg->kind != N_IDENT && arg->kind != N_KWARG) perr(p, "expected a parameter name%s", "");
                for (size_t i = 0; i < out->n; i++)
                    if (strcmp(out->v[i]->s, arg->s) == 0) perr(p, "duplicate parameter name '%s'", arg->s);
            }
            if (arg->kind == N_KWARG) saw_kw = 1;
            else if (saw_kw)
                perr(p, "%s", params ? "a parameter without a default follows one with a default"
                                     : "a positional argument follows a keyword argument");
            else if (saw_spread) perr(p, "a positional argument follows `*` unpacking%s", "");
        }
        lpush(p, out, arg);
        if (is(p, T_COMMA)) p->cur++;
        else if (!is(p, T_RPAREN)) perr(p, "expected ',' or ')' in an argument list, found '%.60s'", tok_desc(p));
    }
    p->cur++;
    leave(p);
}

static jnode *parse_subscript(ps *p) {
    jnode *parts[3] = {NULL, NULL, NULL};
    size_t np = 0;
    int is_slice = 0, line = cur_line(p);
    while (!is(p, T_RBRACKET)) {
        if (p->cur >= p->n) perr(p, "a subscript is never closed with ']'%s", "");
        if (np == 3) perr(p, "a slice takes at most three parts%s", "");
        if (is(p, T_COLON)) {
            parts[np++] = NULL;
            p->cur++;
            is_slice = 1;
        } else {
            parts[np++] = parse_expression(p);
            if (is(p, T_COLON)) {
                p->cur++;
                is_slice = 1;
            } else if (!is(p, T_RBRACKET)) {
                perr(p, "expected ':' or ']' in a subscript, found '%.60s'", tok_desc(p));
            }
        }
    }
    if (np == 0) perr(p, "empty subscript []%s", "");
    if (!is_slice) return parts[0];
    jnode *s = node(p, N_SLICE, line);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static jnode *parse_member(ps *p, jnode *obj) {
    while (is(p, T_DOT) || is(p, T_LBRACKET)) {
        int line = cur_line(p);
        int computed = is(p, T_LBRACKET);
        p->cur++;
        jnode *m = node(p, N_MEMBER, line);
        m->a = obj;
        m->flag = computed;
        enter(p);
        if (computed) {
            m->b = parse_subscript(p);
            expect(p, T_RBRACKET, "]");
        } else {
            m->b = parse_primary(p);
            if (m->b->kind != N_IDENT && m->b->kind != N_INT) perr(p, "expected a name after '.'%s", "");
        }
        leave(p);
        obj = m;
    }
    return obj;
}

static jnode *parse_primary(ps *p) {
    if (p->cur >= p->n) perr(p, "unexpected end of the template in an expression%s", "");
    enter(p);
    const jtok *t = &p->t[p->cur++];
    jnode *r;
    switch (t->type) {
    case T_NUM:
        if (strchr(t->s, '.')) {
            r = node(p, N_FLOAT, t->line);
            r->f = strtod(t->s, NULL);
        } else {
            r = node(p, N_INT, t->line);
            double d = strtod(t->s, NULL);
            if (d > 9.2e18 || d < -9.2e18) {
                r->kind = N_FLOAT;
                r->f = d;
            } else {
                r->i = strtoll(t->s, NULL, 10);
            }
        }
        break;
    case T_STR: {
        r = node(p, N_STR, t->line);
        if (!is(p, T_STR)) {
            r->s = t->s;
            r->n = t->n;
            break;
        }
        /* adjacent literals join: 'a' "b" */
        jbuf b = {.a = p->a};
        jb_add(&b, t->s, t->n);
        while (is(p, T_STR)) {
            jb_add(&b, p->t[p->cur].s, p->t[p->cur].n);
            p->cur++;
        }
        r->s = b.p;
        r->n = b.n;
        break;
    }
    case T_IDENT:
        r = node(p, N_IDENT, t->line);
        r->s = t->s;
        r->n = t->n;
        break;
    case T_LPAREN:
        r = parse_sequence(p, 0);
        expect(p, T_RPAREN, ")");
        break;
    case T_LBRACKET:
        r = node(p, N_ARRAY, t->line);
        while (!is(p, T_RBRACKET)) {
            if (p->cur >= p->n) perr(p, "a list is never closed with ']'%s", "");
            lpush(p, &r->list, parse_expression(p));
            if (is(p, T_COMMA)) p->cur++;
            else if (!is(p, T_RBRACKET)) perr(p, "expected ',' or ']' in a list, found '%.60s'", tok_desc(p));
        }
        p->cur++;
        break;
    case T_LBRACE:
        r = node(p, N_DICT, t->line);
        while (!is(p, T_RBRACE)) {
            if (p->cur >= p->n) perr(p, "a dict is never closed with '}'%s", "");
            lpush(p, &r->list, parse_expression(p));
            expect(p, T_COLON, "':' between a key and its value");
            lpush(p, &r->list2, parse_expression(p));
            if (is(p, T_COMMA)) p->cur++;
            else if (!is(p, T_RBRACE)) perr(p, "expected ',' or '}' in a dict, found '%.60s'", tok_desc(p));
        }
        p->cur++;
        break;
    default:
        p->cur--;
        perr(p, "unexpected '%.60s' in an expression", tok_desc(p));
    }
    leave(p);
    return r;
}

jnode *jinja_parse_tokens(jarena *a, const jtok *toks, size_t ntok, int max_depth) {
    ps p = {.a = a, .t = toks, .n = ntok, .max_depth = max_depth};
    jnode *prog = node(&p, N_IF, 1); /* the program: an always-true block with the top-level body */
    while (p.cur < p.n) {
        if (is2(&p, T_OPEN_STMT, T_IDENT)) {
            const char *s = p.t[p.cur + 1].s;
            if (!strcmp(s, "endif") || !strcmp(s, "endfor") || !strcmp(s, "endmacro") || !strcmp(s, "else") ||
                !strcmp(s, "elif") || !strcmp(s, "endset") || !strcmp(s, "endcall") || !strcmp(s, "endfilter")) {
                p.cur++;
                perr(&p, "{%% %s %%} without a matching opening tag", s);
            }
        }
        lpush(&p, &prog->list, parse_any(&p));
    }
    return prog;
}
