/* lwb_json.c - wb.json.encode / wb.json.decode / wb.json.array / wb.json.null.
 *
 * Hand-written rather than on cJSON (which the core uses for its own files): cJSON keeps strings
 * NUL-terminated, so "a\0b" encoded as "a" and a key with a NUL lost its value. Lua strings carry
 * their length; this codec moves every byte ("\u0000" included) both ways. The decoder recurses
 * once per nesting level, bounded by JSON_MAX_DEPTH; the encoder likewise, with a cycle check. */
#include "lwb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_NULL "wb.json.null"
#define JSON_ARRAY "wb.json.array"
#define JSON_MAX_DEPTH 1000

/* ---- decode ---------------------------------------------------------------------------------- */

typedef struct {
    lua_State *L;
    const unsigned char *s;
    size_t n, i;
    const char *name;
    int depth;
} Dec;

static void dec_fail(Dec *d, const char *why) {
    if (why) luaL_error(d->L, "%s: JSON syntax error at byte %d (%s)", d->name, (int)d->i + 1, why);
    if (d->i >= d->n)
        luaL_error(d->L, "%s: JSON syntax error at byte %d (unexpected end of text)", d->name,
                   (int)d->i + 1);
    unsigned c = d->s[d->i];
    if (c >= 0x20 && c < 0x7f)
        luaL_error(d->L, "%s: JSON syntax error at byte %d (near '%c')", d->name, (int)d->i + 1, c);
    luaL_error(d->L, "%s: JSON syntax error at byte %d (byte value %d)", d->name, (int)d->i + 1,
               (int)c);
}

static void skip_ws(Dec *d) {
    while (d->i < d->n && (d->s[d->i] == ' ' || d->s[d->i] == '\t' || d->s[d->i] == '\n' ||
                           d->s[d->i] == '\r'))
        d->i++;
}

static int hex4(Dec *d) {
    if (d->n - d->i < 4) {
        d->i = d->n;
        dec_fail(d, NULL);
    }
    int v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = d->s[d->i];
        int x = c >= '0' && c <= '9' ? (int)c - '0' : c >= 'a' && c <= 'f' ? (int)c - 'a' + 10
                : c >= 'A' && c <= 'F' ? (int)c - 'A' + 10 : -1;
        if (x < 0) dec_fail(d, "bad \\u escape");
        v = v * 16 + x;
        d->i++;
    }
    return v;
}

static void put_utf8(luaL_Buffer *b, unsigned long cp) {
    char u[4];
    int n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    luaL_addlstring(b, u, (size_t)n);
}

/* The string starting at the opening quote; pushes it. */
static void dec_string(Dec *d) {
    lua_State *L = d->L;
    luaL_Buffer b;
    d->i++; /* '"' */
    size_t run = d->i;
    /* fast path: no escapes */
    while (d->i < d->n && d->s[d->i] != '"' && d->s[d->i] != '\\' && d->s[d->i] >= 0x20) d->i++;
    if (d->i < d->n && d->s[d->i] == '"') {
        lua_pushlstring(L, (const char *)d->s + run, d->i - run);
        d->i++;
        return;
    }
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, (const char *)d->s + run, d->i - run);
    for (;;) {
        if (d->i >= d->n) dec_fail(d, NULL);
        unsigned c = d->s[d->i];
        if (c == '"') {
            d->i++;
            break;
        }
        if (c < 0x20) dec_fail(d, "control character in a string (escape it)");
        if (c != '\\') {
            luaL_addchar(&b, (char)c);
            d->i++;
            continue;
        }
        d->i++;
        if (d->i >= d->n) dec_fail(d, NULL);
        c = d->s[d->i++];
        switch (c) {
        case '"': luaL_addchar(&b, '"'); break;
        case '\\': luaL_addchar(&b, '\\'); break;
        case '/': luaL_addchar(&b, '/'); break;
        case 'b': luaL_addchar(&b, '\b'); break;
        case 'f': luaL_addchar(&b, '\f'); break;
        case 'n': luaL_addchar(&b, '\n'); break;
        case 'r': luaL_addchar(&b, '\r'); break;
        case 't': luaL_addchar(&b, '\t'); break;
        case 'u': {
            unsigned long cp = (unsigned long)hex4(d);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (d->n - d->i < 2 || d->s[d->i] != '\\' || d->s[d->i + 1] != 'u')
                    dec_fail(d, "a high surrogate \\u escape without its low half");
                d->i += 2;
                unsigned long lo = (unsigned long)hex4(d);
                if (lo < 0xDC00 || lo > 0xDFFF) dec_fail(d, "bad low surrogate \\u escape");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                dec_fail(d, "a lone low surrogate \\u escape");
            }
            put_utf8(&b, cp);
            break;
        }
        default: d->i--; dec_fail(d, "unknown escape");
        }
    }
    luaL_pushresult(&b);
}

static void dec_number(Dec *d) {
    size_t st = d->i;
    int is_int = 1;
    if (d->i < d->n && d->s[d->i] == '-') d->i++;
    if (d->i >= d->n) dec_fail(d, NULL);
    if (d->s[d->i] == '0') d->i++;
    else if (d->s[d->i] >= '1' && d->s[d->i] <= '9')
        while (d->i < d->n && d->s[d->i] >= '0' && d->s[d->i] <= '9') d->i++;
    else dec_fail(d, NULL);
    if (d->i < d->n && d->s[d->i] == '.') {
        is_int = 0;
        d->i++;
        if (d->i >= d->n || d->s[d->i] < '0' || d->s[d->i] > '9') dec_fail(d, NULL);
        while (d->i < d->n && d->s[d->i] >= '0' && d->s[d->i] <= '9') d->i++;
    }
    if (d->i < d->n && (d->s[d->i] == 'e' || d->s[d->i] == 'E')) {
        is_int = 0;
        d->i++;
        if (d->i < d->n && (d->s[d->i] == '+' || d->s[d->i] == '-')) d->i++;
        if (d->i >= d->n || d->s[d->i] < '0' || d->s[d->i] > '9') dec_fail(d, NULL);
        while (d->i < d->n && d->s[d->i] >= '0' && d->s[d->i] <= '9') d->i++;
    }
    char buf[64], *tmp = NULL;
    size_t len = d->i - st;
    char *p = buf;
    if (len >= sizeof buf) p = tmp = malloc(len + 1);
    if (!p) luaL_error(d->L, "%s: out of memory", d->name);
    memcpy(p, d->s + st, len);
    p[len] = 0;
    if (is_int && len < 19) { /* exact 64-bit integers where they fit for sure */
        lua_pushinteger(d->L, (lua_Integer)strtoll(p, NULL, 10));
        free(tmp);
        return;
    }
    double v = strtod(p, NULL);
    free(tmp);
    /* integral values that a double holds exactly become integers (ids and sizes index tables) */
    if (v == floor(v) && fabs(v) <= 9007199254740992.0) lua_pushinteger(d->L, (lua_Integer)v);
    else lua_pushnumber(d->L, v);
}

static int lit(Dec *d, const char *w, size_t n) {
    if (d->n - d->i >= n && memcmp(d->s + d->i, w, n) == 0) {
        d->i += n;
        return 1;
    }
    return 0;
}

static void dec_value(Dec *d) {
    lua_State *L = d->L;
    skip_ws(d);
    if (d->i >= d->n) dec_fail(d, NULL);
    unsigned c = d->s[d->i];
    if (c == '{' || c == '[') {
        if (++d->depth > JSON_MAX_DEPTH) dec_fail(d, "nested deeper than 1000");
        luaL_checkstack(L, 4, "JSON nesting too deep");
        d->i++;
        skip_ws(d);
        if (c == '[') {
            lua_newtable(L);
            lua_Integer k = 1;
            if (d->i < d->n && d->s[d->i] == ']') d->i++;
            else
                for (;;) {
                    dec_value(d);
                    lua_rawseti(L, -2, k++);
                    skip_ws(d);
                    if (d->i < d->n && d->s[d->i] == ',') {
                        d->i++;
                        continue;
                    }
                    if (d->i < d->n && d->s[d->i] == ']') {
                        d->i++;
                        break;
                    }
                    dec_fail(d, NULL);
                }
            luaL_setmetatable(L, JSON_ARRAY);
        } else {
            lua_newtable(L);
            if (d->i < d->n && d->s[d->i] == '}') d->i++;
            else
                for (;;) {
                    skip_ws(d);
                    if (d->i >= d->n || d->s[d->i] != '"') dec_fail(d, NULL);
                    dec_string(d);
                    skip_ws(d);
                    if (d->i >= d->n || d->s[d->i] != ':') dec_fail(d, NULL);
                    d->i++;
                    dec_value(d);
                    lua_rawset(L, -3); /* a repeated key keeps the last value, as Python does */
                    skip_ws(d);
                    if (d->i < d->n && d->s[d->i] == ',') {
                        d->i++;
                        continue;
                    }
                    if (d->i < d->n && d->s[d->i] == '}') {
                        d->i++;
                        break;
                    }
                    dec_fail(d, NULL);
                }
        }
        d->depth--;
        return;
    }
    if (c == '"') {
        dec_string(d);
        return;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        dec_number(d);
        return;
    }
    if (lit(d, "true", 4)) lua_pushboolean(L, 1);
    else if (lit(d, "false", 5)) lua_pushboolean(L, 0);
    else if (lit(d, "null", 4)) lua_getfield(L, LUA_REGISTRYINDEX, JSON_NULL);
    else dec_fail(d, NULL);
}

void lwb_push_json(lua_State *L, const char *text, size_t len, const char *name) {
    Dec d = {L, (const unsigned char *)text, len, 0, name, 0};
    dec_value(&d);
    skip_ws(&d);
    if (d.i < d.n) dec_fail(&d, "trailing characters after the value");
}

static int l_json_decode(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    lua_settop(L, 1);
    lwb_push_json(L, text, len, "json.decode");
    return 1;
}

/* ---- encode ---------------------------------------------------------------------------------- */

/* The text grows in a C buffer owned by a userdata (its __gc frees it if the walk raises an
 * error): a luaL_Buffer would need the stack balanced between additions, and the walk pushes. */
typedef struct {
    char *p;
    size_t n, cap;
} Out;

typedef struct {
    lua_State *L;
    Out *b;
    int visited; /* stack index of the set of tables on the current path */
    int indent;
} Enc;

static void out_add(lua_State *L, Out *o, const char *s, size_t n) {
    if (o->cap - o->n < n) {
        size_t nc = o->cap ? o->cap : 256;
        while (nc - o->n < n) {
            if (nc > ((size_t)-1) / 2) luaL_error(L, "json.encode: out of memory");
            nc *= 2;
        }
        char *q = realloc(o->p, nc);
        if (!q) luaL_error(L, "json.encode: out of memory");
        o->p = q;
        o->cap = nc;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static int out_gc(lua_State *L) {
    Out *o = luaL_checkudata(L, 1, "wb.json.out");
    free(o->p);
    o->p = NULL;
    o->n = o->cap = 0;
    return 0;
}

#define ADDS(e, str) out_add((e)->L, (e)->b, (str), strlen(str))
#define ADDC(e, ch)                                                                             \
    do {                                                                                        \
        char c_ = (ch);                                                                         \
        out_add((e)->L, (e)->b, &c_, 1);                                                        \
    } while (0)

static void enc_string(Enc *e, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    ADDC(e, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': ADDS(e, "\\\""); break;
        case '\\': ADDS(e, "\\\\"); break;
        case '\b': ADDS(e, "\\b"); break;
        case '\f': ADDS(e, "\\f"); break;
        case '\n': ADDS(e, "\\n"); break;
        case '\r': ADDS(e, "\\r"); break;
        case '\t': ADDS(e, "\\t"); break;
        default:
            if (c < 0x20 || c == 0x7f) {
                char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                out_add(e->L, e->b, u, 6);
            } else {
                size_t j = i + 1;
                while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' &&
                       (unsigned char)s[j] != 0x7f)
                    j++;
                out_add(e->L, e->b, s + i, j - i);
                i = j - 1;
            }
        }
    }
    ADDC(e, '"');
}

static void enc_newline(Enc *e, int depth) {
    if (!e->indent) return;
    ADDC(e, '\n');
    for (int i = 0; i < depth; i++) ADDC(e, '\t');
}

static void encode_value(Enc *e, int idx, int depth);


/* Is the table at idx a sequence 1..n (n >= 1, or any size with the array metatable)? */
static int table_is_array(lua_State *L, int idx, lua_Integer *n) {
    lua_Integer count = 0, max = 0;
    int marked = 0;
    if (lua_getmetatable(L, idx)) {
        luaL_getmetatable(L, JSON_ARRAY);
        marked = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
            lua_Integer k = lua_tointeger(L, -1);
            if (k > max) max = k;
            count++;
        } else {
            lua_pop(L, 1);
            return 0;
        }
    }
    *n = max;
    return count == max && (count > 0 || marked);
}

typedef struct {
    const char *s;
    size_t n;
} KeyRef;

/* Keys are Lua strings: compared by bytes and length (an embedded NUL included). */
static int cmp_keys(const void *a, const void *b) {
    const KeyRef *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void encode_table(Enc *e, int idx, int depth) {
    lua_State *L = e->L;
    if (depth > JSON_MAX_DEPTH) luaL_error(L, "json.encode: nesting deeper than %d", JSON_MAX_DEPTH);
    luaL_checkstack(L, 8, "json.encode: nesting too deep");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, e->visited) != LUA_TNIL)
        luaL_error(L, "json.encode: cycle (a table contains itself)");
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, e->visited);

    lua_Integer n;
    if (table_is_array(L, idx, &n)) {
        ADDC(e, '[');
        for (lua_Integer i = 1; i <= n; i++) {
            if (i > 1) ADDS(e, e->indent ? ", " : ",");
            lua_rawgeti(L, idx, i);
            encode_value(e, lua_gettop(L), depth + 1);
            lua_pop(L, 1);
        }
        ADDC(e, ']');
    } else {
        /* Keys in byte order: the same table always gives the same text (diffable files). */
        size_t nkeys = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "json.encode: object key is a %s, not a string (only tables with "
                              "keys 1..n are arrays)", luaL_typename(L, -1));
            nkeys++;
        }
        KeyRef *keys = lua_newuserdatauv(L, (nkeys ? nkeys : 1) * sizeof *keys, 0);
        int kidx = lua_gettop(L);
        size_t k = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            keys[k].s = lua_tolstring(L, -1, &keys[k].n); /* anchored by the table itself */
            k++;
        }
        qsort(keys, nkeys, sizeof *keys, cmp_keys);
        ADDC(e, '{');
        for (k = 0; k < nkeys; k++) {
            if (k) ADDC(e, ',');
            enc_newline(e, depth + 1);
            lua_pushlstring(L, keys[k].s, keys[k].n);
            lua_rawget(L, idx);
            int vidx = lua_gettop(L);
            enc_string(e, keys[k].s, keys[k].n);
            ADDS(e, e->indent ? ":\t" : ":");
            encode_value(e, vidx, depth + 1);
            lua_remove(L, vidx);
        }
        if (nkeys) enc_newline(e, depth);
        ADDC(e, '}');
        lua_remove(L, kidx);
    }
    lua_pushvalue(L, idx);
    lua_pushnil(L);
    lua_rawset(L, e->visited);
}

static void encode_value(Enc *e, int idx, int depth) {
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL: ADDS(e, "null"); return;
    case LUA_TBOOLEAN: ADDS(e, lua_toboolean(L, idx) ? "true" : "false"); return;
    case LUA_TNUMBER: {
        char buf[40];
        if (lua_isinteger(L, idx)) {
            snprintf(buf, sizeof buf, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
        } else {
            lua_Number d = lua_tonumber(L, idx);
            if (isnan(d) || isinf(d))
                luaL_error(L, "json.encode: %s is not representable in JSON",
                           isnan(d) ? "NaN" : (d > 0 ? "inf" : "-inf"));
            /* the shortest of %.15g / %.17g that reads back exactly */
            snprintf(buf, sizeof buf, "%1.15g", (double)d);
            if (strtod(buf, NULL) != (double)d) snprintf(buf, sizeof buf, "%1.17g", (double)d);
        }
        ADDS(e, buf);
        return;
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        enc_string(e, s, n);
        return;
    }
    case LUA_TUSERDATA:
        lua_getfield(L, LUA_REGISTRYINDEX, JSON_NULL);
        if (lua_rawequal(L, -1, idx)) {
            lua_pop(L, 1);
            ADDS(e, "null");
            return;
        }
        lua_pop(L, 1);
        break;
    case LUA_TTABLE: encode_table(e, idx, depth); return;
    default: break;
    }
    luaL_error(L, "json.encode: cannot encode a %s", luaL_typename(L, idx));
}

static int l_json_encode(lua_State *L) {
    luaL_checkany(L, 1);
    lwb_check_options(L, 2, (const char *const[]){"indent", NULL});
    int indent = lwb_opt_bool(L, 2, "indent", 0);
    lua_settop(L, 1);
    lua_newtable(L); /* 2: tables on the current path */
    Out *o = lua_newuserdatauv(L, sizeof *o, 0); /* 3 */
    o->p = NULL;
    o->n = o->cap = 0;
    luaL_setmetatable(L, "wb.json.out");
    Enc e = {L, o, 2, indent};
    encode_value(&e, 1, 0);
    lua_pushlstring(L, o->p ? o->p : "", o->n);
    free(o->p);
    o->p = NULL;
    o->cap = o->n = 0;
    return 1;
}

static int l_json_array(lua_State *L) {
    if (lua_isnoneornil(L, 1)) lua_newtable(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    luaL_setmetatable(L, JSON_ARRAY);
    return 1;
}

static int json_null_tostring(lua_State *L) {
    lua_pushliteral(L, "json.null");
    return 1;
}

static const luaL_Reg json_funcs[] = {
    {"encode", l_json_encode},
    {"decode", l_json_decode},
    {"array", l_json_array},
    {NULL, NULL},
};

/* Sets wb.json on the table at the top of the stack. */
void lwb_open_json(lua_State *L) {
    if (luaL_newmetatable(L, "wb.json.out")) {
        lua_pushcfunction(L, out_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, out_gc);
        lua_setfield(L, -2, "__close");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, JSON_ARRAY)) {
        lua_pushliteral(L, "json.array");
        lua_setfield(L, -2, "__name");
    }
    lua_pop(L, 1);
    lua_newtable(L);
    luaL_setfuncs(L, json_funcs, 0);
    /* null: one full userdata per Lua state, compared with ==, printed as "json.null". */
    if (lua_getfield(L, LUA_REGISTRYINDEX, JSON_NULL) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_newuserdatauv(L, 1, 0);
        if (luaL_newmetatable(L, "wb.json.nulltype")) {
            lua_pushcfunction(L, json_null_tostring);
            lua_setfield(L, -2, "__tostring");
        }
        lua_setmetatable(L, -2);
        lua_pushvalue(L, -1);
        lua_setfield(L, LUA_REGISTRYINDEX, JSON_NULL);
    }
    lua_setfield(L, -2, "null");
    lua_setfield(L, -2, "json");
}
