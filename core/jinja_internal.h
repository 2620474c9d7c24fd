/* jinja_internal.h - internal: the pieces of the chat-template engine shared by its files.
 *
 *   jinja_lex.c    preprocessing (trim_blocks, lstrip_blocks) and tokens
 *   jinja_parse.c  tokens -> syntax tree (recursive descent with a hard nesting cap)
 *   jinja_value.c  values, the per-render arena, printing and tojson
 *   jinja_eval.c   the interpreter: statements, expressions, filters, tests, built-ins
 *
 * Memory: every node of a parsed template lives in the template's arena, every value of a
 * render in the render's arena; an arena is freed as a whole, so an error anywhere can unwind
 * with longjmp without leaking. Semantics follow @huggingface/jinja (the engine transformers.js
 * uses), which is what the committed test vectors are generated with; see docs/chat.md. */
#ifndef WB_JINJA_INTERNAL_H
#define WB_JINJA_INTERNAL_H

#include "wb_jinja.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- failure and arena --------------------------------------------------------------------- */

typedef struct jfail {
    jmp_buf jb;
    wb_err *err;
    const char *name; /* template name for messages ("…/tokenizer_config.json") */
    wb_status status;
} jfail;

/* Fill err with "NAME:LINE: message" (line 0: no line) and longjmp to f->jb. */
_Noreturn void jfailf(jfail *f, wb_status st, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

typedef struct jblock jblock;
typedef struct jarena {
    jblock *head;
    size_t used, limit; /* bytes handed out; a request beyond limit fails */
    jfail *fail;
} jarena;

void *ja_alloc(jarena *a, size_t n); /* zeroed; fails through a->fail */
void *ja_grow(jarena *a, void *p, size_t old_n, size_t new_n);
char *ja_strndup(jarena *a, const char *s, size_t n);
void ja_free_all(jarena *a);

/* ---- UTF-8 and JavaScript whitespace --------------------------------------------------------- */

/* Decode one code point of s[0..n) (n >= 1); a malformed byte decodes as itself (cp < 0x100
 * for bytes 0x80..0xFF would be wrong, so it becomes 0xDC00 + byte) with *len = 1. */
uint32_t ju_decode(const char *s, size_t n, size_t *len);
size_t ju_encode(uint32_t cp, char out[4]);
int ju_js_space(uint32_t cp); /* JavaScript's \s (String.prototype.trim's set) */

/* ---- tokens ---------------------------------------------------------------------------------- */

typedef enum jtok_type {
    T_TEXT, T_NUM, T_STR, T_IDENT, T_EQUALS, T_LPAREN, T_RPAREN, T_OPEN_STMT, T_CLOSE_STMT,
    T_OPEN_EXPR, T_CLOSE_EXPR, T_LBRACKET, T_RBRACKET, T_LBRACE, T_RBRACE, T_COMMA, T_DOT,
    T_COLON, T_PIPE, T_ADD, T_MUL, T_POW, T_CMP, T_UNARY, T_COMMENT
} jtok_type;

typedef struct jtok {
    jtok_type type;
    int line;
    const char *s; /* arena copy, NUL-terminated */
    size_t n;
} jtok;

void jinja_tokenize(jarena *a, const char *src, size_t len, jtok **toks, size_t *ntok);

/* ---- syntax tree ------------------------------------------------------------------------------ */

typedef enum jnode_kind {
    /* statements */
    N_TEXT, N_COMMENT, N_IF, N_FOR, N_SET, N_MACRO, N_CALLSTMT, N_BREAK, N_CONTINUE, N_FILTERSTMT,
    /* expressions */
    N_INT, N_FLOAT, N_STR, N_IDENT, N_ARRAY, N_TUPLE, N_DICT, N_MEMBER, N_SLICE, N_CALL, N_KWARG,
    N_SPREAD, N_KWSPREAD, N_UNARY, N_BINARY, N_FILTER, N_TEST, N_SELECT, N_TERNARY
} jnode_kind;

typedef enum jop {
    OP_OR, OP_AND, OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE, OP_IN, OP_NOTIN, OP_ADD, OP_SUB,
    OP_CONCAT, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_NOT, OP_NEG, OP_POS
} jop;

typedef struct jnode jnode;
typedef struct jlist {
    jnode **v;
    size_t n, cap;
} jlist;

struct jnode {
    jnode_kind kind;
    int line;
    int flag;      /* N_MEMBER: computed; N_TEST: negated; N_IF: is an elif; N_CALLSTMT: has params */
    jop op;        /* N_UNARY, N_BINARY */
    const char *s; /* identifier, string literal, keyword name, test or macro name */
    size_t n;      /* length of s */
    int64_t i;
    double f;
    jnode *a, *b, *c;
    jlist list, list2;
};

jnode *jinja_parse_tokens(jarena *a, const jtok *toks, size_t ntok, int max_depth);

/* ---- values ---------------------------------------------------------------------------------- */

typedef enum jvt { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_ARR, JV_OBJ, JV_FN } jvt;
enum { JO_DICT = 0, JO_KWARGS = 1, JO_NAMESPACE = 2 }; /* jv.sub for JV_OBJ */
enum { JA_LIST = 0, JA_TUPLE = 1 };                  /* jv.sub for JV_ARR */

typedef struct jstr {
    size_t n;
    char p[]; /* NUL-terminated */
} jstr;
typedef struct jarr jarr;
typedef struct jobj jobj;
typedef struct jfn jfn;

typedef struct jv {
    jvt t;
    int sub;
    union {
        int b;
        int64_t i;
        double f;
        jstr *s;
        jarr *a;
        jobj *o;
        jfn *fn;
    } u;
} jv;

struct jarr {
    size_t n, cap;
    jv *v;
};
struct jobj {
    size_t n, cap;
    jstr **k;
    jv *v;
    uint32_t *hash; /* open-addressing index into k (slot+1, 0 = empty), built above 16 keys */
    size_t hcap;
};

extern const jv JV_UNDEFINED, JV_NULL;
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(jarena *a, const char *s, size_t n);
jv jv_cstr(jarena *a, const char *s);
jv jv_arr_new(jarena *a, size_t cap, int sub);
void jv_arr_push(jarena *a, jv arr, jv x);
jv jv_obj_new(jarena *a, int sub);
jv *jv_obj_get(jv obj, const char *k, size_t n); /* NULL when absent */
void jv_obj_set(jarena *a, jv obj, const char *k, size_t n, jv x);
int jv_truthy(jv v);
const char *jv_type_name(jv v);

/* A growable byte buffer in the arena, capped at `limit` bytes (0 = the arena's limit). */
typedef struct jbuf {
    jarena *a;
    char *p;
    size_t n, cap, limit;
    int line; /* for the overflow message */
} jbuf;
void jb_add(jbuf *b, const char *s, size_t n);
void jb_puts(jbuf *b, const char *s);
jv jb_take(jbuf *b); /* the contents as a string value */

/* JavaScript's Number.prototype.toString for a double. */
void jv_js_number(double f, char out[32]);
/* How {{ v }} prints (RuntimeValue.toString): none/undefined print nothing. */
void jv_print(jbuf *b, jv v);
/* JSON.stringify-like output with Python's separators, as the tojson filter. */
typedef struct jjson_opts {
    int64_t indent; /* < 0: none */
    int ensure_ascii, sort_keys;
    const char *item_sep, *key_sep; /* NULL: the defaults */
    int undefined_as_null;
} jjson_opts;
void jv_tojson(jbuf *b, jv v, const jjson_opts *o, int depth, int line);

/* cJSON -> value (object key order kept; integral numbers become integers as in JavaScript). */
struct cJSON;
jv jv_from_cjson(jarena *a, const struct cJSON *j, int depth, int line);

#endif
