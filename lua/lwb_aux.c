/* lwb_aux.c - the helpers every binding file shares (lwb.h): errors, option tables, token id
 * arrays, interruption and collector pressure. lwb_module.c keeps only the opener list, as
 * linit.c sits beside lauxlib.c. */
#include "lwb.h"

#include <signal.h>
#include <string.h>

/* ---- errors and options ------------------------------------------------------------------ */

int lwb_raise(lua_State *L, const wb_err *err) {
    if (err->status == WB_ERR_CANCELLED) {
        lwb_interrupt(0);
        return luaL_error(L, "interrupted");
    }
    if (err->msg[0] == '\0') return luaL_error(L, "%s", wb_status_name(err->status));
    return luaL_error(L, "%s", err->msg);
}

void lwb_check_options(lua_State *L, int idx, const char *const *allowed) {
    if (lua_isnoneornil(L, idx)) return;
    luaL_checktype(L, idx, LUA_TTABLE);
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            luaL_argerror(L, idx, lua_pushfstring(L, "option keys must be strings, got %s",
                                                  luaL_typename(L, -1)));
        }
        const char *key = lua_tostring(L, -1);
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) {
            if (strcmp(*a, key) == 0) { ok = 1; break; }
        }
        if (!ok) luaL_argerror(L, idx, lua_pushfstring(L, "unknown option '%s'", key));
    }
}

/* Push opts[key] (nil when opts is absent). */
static int get_opt(lua_State *L, int idx, const char *key) {
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, idx, key);
}

int lwb_opt_bool(lua_State *L, int idx, const char *key, int def) {
    int t = get_opt(L, idx, key);
    int v = def;
    if (t == LUA_TBOOLEAN) v = lua_toboolean(L, -1);
    else if (t != LUA_TNIL)
        luaL_argerror(L, idx, lua_pushfstring(L, "option '%s' must be a boolean, got %s", key,
                                              luaL_typename(L, -1)));
    lua_pop(L, 1);
    return v;
}

lua_Integer lwb_opt_integer(lua_State *L, int idx, const char *key, lua_Integer def) {
    int t = get_opt(L, idx, key);
    lua_Integer v = def;
    if (t != LUA_TNIL) {
        int isint;
        v = lua_tointegerx(L, -1, &isint);
        if (!isint || t != LUA_TNUMBER)
            luaL_argerror(L, idx, lua_pushfstring(L, "option '%s' must be an integer, got %s",
                                                  key, luaL_typename(L, -1)));
    }
    lua_pop(L, 1);
    return v;
}

lua_Number lwb_opt_number(lua_State *L, int idx, const char *key, lua_Number def) {
    int t = get_opt(L, idx, key);
    lua_Number v = def;
    if (t == LUA_TNUMBER) v = lua_tonumber(L, -1);
    else if (t != LUA_TNIL)
        luaL_argerror(L, idx, lua_pushfstring(L, "option '%s' must be a number, got %s", key,
                                              luaL_typename(L, -1)));
    lua_pop(L, 1);
    return v;
}

/* ---- token id arrays ----------------------------------------------------------------------- */

int32_t *lwb_check_ids(lua_State *L, int idx, int32_t vocab, size_t *n) {
    idx = lua_absindex(L, idx);
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer len = luaL_len(L, idx);
    if (len < 0 || (lua_Unsigned)len > (lua_Unsigned)(INT32_MAX / sizeof(int32_t)))
        luaL_argerror(L, idx, "too many token ids");
    /* A full userdata rather than malloc: an error below (or in the caller) cannot leak it. */
    int32_t *ids = lua_newuserdatauv(L, (size_t)(len > 0 ? len : 1) * sizeof(int32_t), 0);
    for (lua_Integer i = 1; i <= len; i++) {
        int isint;
        int t = lua_geti(L, idx, i);
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (t != LUA_TNUMBER || !isint) {
            luaL_argerror(L, idx, lua_pushfstring(L, "token id at index %I is not an integer (%s)",
                                                  (LUAI_UACINT)i, luaL_typename(L, -1)));
        }
        if (v < 0 || (vocab > 0 && v >= vocab) || v > INT32_MAX) {
            if (vocab > 0)
                luaL_argerror(L, idx,
                              lua_pushfstring(L, "token id %I at index %I out of range [0, %d)",
                                              (LUAI_UACINT)v, (LUAI_UACINT)i, (int)vocab));
            luaL_argerror(L, idx, lua_pushfstring(L, "token id %I at index %I is negative",
                                                  (LUAI_UACINT)v, (LUAI_UACINT)i));
        }
        ids[i - 1] = (int32_t)v;
        lua_pop(L, 1);
    }
    *n = (size_t)len;
    return ids;
}

void lwb_push_ids(lua_State *L, const int32_t *ids, size_t n) {
    lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, ids[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* ---- interruption -------------------------------------------------------------------------- */

static volatile sig_atomic_t g_interrupted = 0;
/* Every Ctrl-C the host passed on, never cleared: a loop that must stop for one (the server)
 * compares it with the count it started with, since a pcall inside the loop can catch the
 * interruption error, and the binding clears the flag when it raises that error. */
static volatile sig_atomic_t g_interrupt_count = 0;

void lwb_interrupt(int on) {
    if (on) g_interrupt_count = (g_interrupt_count + 1) & 0x3fffffff;
    g_interrupted = on ? 1 : 0;
}
int lwb_interrupt_count(void) { return (int)g_interrupt_count; }
int lwb_interrupted(void) { return g_interrupted != 0; }
int lwb_abort_fn(void *user_data) {
    (void)user_data;
    return g_interrupted != 0;
}

/* ---- native memory accounting -------------------------------------------------------------- */

static size_t g_native_live, g_native_since, g_native_after_gc;

void lwb_native_alloc(lua_State *L, size_t bytes) {
    g_native_live += bytes;
    g_native_since += bytes;
    size_t threshold = g_native_after_gc > ((size_t)4 << 20) ? g_native_after_gc : (size_t)4 << 20;
    if (g_native_since >= threshold) {
        g_native_since = 0;
        lua_gc(L, LUA_GCCOLLECT); /* finalizers of dropped objects call lwb_native_free */
        g_native_after_gc = g_native_live;
    }
}

void lwb_native_free(size_t bytes) { g_native_live -= bytes < g_native_live ? bytes : g_native_live; }

size_t lwb_native_live(void) { return g_native_live; }
