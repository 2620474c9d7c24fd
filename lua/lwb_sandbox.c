/* lwb_sandbox.c - wb.load_data(source, name [, limits]): run a Lua data file (a preset, the
 * pricing table) in a separate, bounded lua_State and copy the table it returns into the caller.
 *
 * Why a separate state and not load(src, name, "t", {}) in the caller's: an empty environment
 * stops globals, but not `while true do end`, nor `("x"):rep(2^31)`, a table of a billion
 * entries or a gsub blow-up, all of which ran inside the caller with no bound. Here:
 *   - memory: the state's allocator refuses to grow past max_memory (default 64 MB), so any
 *     allocation (string.rep, table growth, concatenation) fails with a Lua memory error;
 *   - time: a count hook raises an error after max_instructions VM instructions (default 20M);
 *   - C functions that could run for long inside a single instruction are absent: the string
 *     metatable offers only byte, char, format, len, lower, upper, rep, reverse and sub (no
 *     pattern matching: find/match/gmatch/gsub can take super-linear time in one call);
 *   - the result is copied as plain data: nil, booleans, numbers, strings and tables of them,
 *     at most 64 levels deep, and every table at most once (no cycles, no shared subtables whose
 *     copies would multiply in the caller).
 * Every error names the file. */
#include "lwb.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#define SANDBOX_MAX_DEPTH 64

typedef struct Sandbox {
    lua_State *S;
    size_t used, limit;
    lua_Integer steps, max_steps;
    int out_of_steps;
} Sandbox;

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    Sandbox *sb = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        sb->used -= old;
        return NULL;
    }
    if (nsize > old && nsize - old > sb->limit - sb->used) return NULL; /* over the budget */
    void *p = realloc(ptr, nsize);
    if (p) sb->used = sb->used - old + nsize;
    return p;
}

static void sandbox_hook(lua_State *S, lua_Debug *ar) {
    (void)ar;
    Sandbox *sb = *(Sandbox **)lua_getextraspace(S);
    sb->steps += 1000;
    if (sb->steps > sb->max_steps) {
        sb->out_of_steps = 1;
        luaL_error(S, "instruction limit reached");
    }
}

static int sandbox_gc(lua_State *L) {
    Sandbox *sb = luaL_checkudata(L, 1, "wb.sandbox");
    if (sb->S) lua_close(sb->S);
    sb->S = NULL;
    return 0;
}

/* The string functions a data file may call as methods ("%d"):format(n). */
static int open_safe_string(lua_State *S) {
    static const char *const keep[] = {"byte", "char", "format", "len", "lower", "upper",
                                       "rep", "reverse", "sub", NULL};
    luaL_requiref(S, LUA_STRLIBNAME, luaopen_string, 0); /* sets the string metatable */
    lua_newtable(S);
    for (const char *const *k = keep; *k; k++) {
        lua_getfield(S, -2, *k);
        lua_setfield(S, -2, *k);
    }
    /* the metatable's __index now points at the reduced table */
    lua_pushliteral(S, "");
    lua_getmetatable(S, -1);
    lua_pushvalue(S, -3);
    lua_setfield(S, -2, "__index");
    lua_pop(S, 4);
    return 0;
}

/* Copy the value at index `from` of S onto L's stack. `seen` (in L at index seen_idx) holds the
 * tables already copied, by address. */
static void copy_value(lua_State *L, Sandbox *sb, int from, const char *name, int depth,
                       int seen_idx, const char *where) {
    lua_State *S = sb->S;
    luaL_checkstack(L, 6, "load_data");
    if (!lua_checkstack(S, 4)) luaL_error(L, "%s: out of memory copying the data", name);
    switch (lua_type(S, from)) {
    case LUA_TNIL: lua_pushnil(L); return;
    case LUA_TBOOLEAN: lua_pushboolean(L, lua_toboolean(S, from)); return;
    case LUA_TNUMBER:
        if (lua_isinteger(S, from)) lua_pushinteger(L, lua_tointeger(S, from));
        else lua_pushnumber(L, lua_tonumber(S, from));
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(S, from, &n);
        lua_pushlstring(L, s, n);
        return;
    }
    case LUA_TTABLE: break;
    default:
        luaL_error(L, "%s: a data file holds only tables, strings, numbers and booleans; %s is a %s",
                   name, where, luaL_typename(S, from));
    }
    if (depth >= SANDBOX_MAX_DEPTH)
        luaL_error(L, "%s: tables nested deeper than %d levels (at %s)", name, SANDBOX_MAX_DEPTH,
                   where);
    const void *id = lua_topointer(S, from);
    lua_pushlightuserdata(L, (void *)id);
    if (lua_rawget(L, seen_idx) != LUA_TNIL)
        luaL_error(L, "%s: %s is a table that appears twice (a cycle or a shared subtable); data "
                   "files are trees", name, where);
    lua_pop(L, 1);
    lua_pushlightuserdata(L, (void *)id);
    lua_pushboolean(L, 1);
    lua_rawset(L, seen_idx);
    lua_newtable(L);
    int dst = lua_gettop(L);
    int src = lua_absindex(S, from);
    lua_pushnil(S);
    while (lua_next(S, src)) {
        char sub[96];
        int kt = lua_type(S, -2);
        if (kt == LUA_TSTRING) snprintf(sub, sizeof sub, "%.40s.%.40s", where, lua_tostring(S, -2));
        else if (lua_isinteger(S, -2))
            snprintf(sub, sizeof sub, "%.40s[%lld]", where, (long long)lua_tointeger(S, -2));
        else snprintf(sub, sizeof sub, "%.40s[?]", where);
        if (kt != LUA_TSTRING && kt != LUA_TNUMBER && kt != LUA_TBOOLEAN)
            luaL_error(L, "%s: a key in %s is a %s (keys are strings, numbers or booleans)", name,
                       where, luaL_typename(S, -2));
        copy_value(L, sb, -2, name, depth + 1, seen_idx, sub); /* key */
        copy_value(L, sb, -1, name, depth + 1, seen_idx, sub); /* value */
        lua_rawset(L, dst);
        lua_pop(S, 1);
    }
}

void lwb_load_data(lua_State *L, const char *src, size_t len, const char *name, size_t max_memory,
                   lua_Integer max_instructions) {
    int base = lua_gettop(L);
    Sandbox *sb = lua_newuserdatauv(L, sizeof *sb, 0); /* before the resource it owns */
    memset(sb, 0, sizeof *sb);
    luaL_setmetatable(L, "wb.sandbox");
    sb->limit = max_memory;
    sb->max_steps = max_instructions;
    sb->S = lua_newstate(sandbox_alloc, sb);
    if (!sb->S) luaL_error(L, "%s: out of memory starting the data sandbox", name);
    lua_State *S = sb->S;
    *(Sandbox **)lua_getextraspace(S) = sb;
    lua_pushcfunction(S, open_safe_string);
    if (lua_pcall(S, 0, 0, 0) != LUA_OK)
        luaL_error(L, "%s: cannot start the data sandbox: %s", name, lua_tostring(S, -1));
    char chunk[512];
    snprintf(chunk, sizeof chunk, "@%s", name);
    int st = luaL_loadbufferx(S, src, len, chunk, "t");
    if (st == LUA_OK) {
        lua_newtable(S); /* the chunk's _ENV: empty */
        lua_setupvalue(S, -2, 1);
        lua_sethook(S, sandbox_hook, LUA_MASKCOUNT, 1000);
        st = lua_pcall(S, 0, 1, 0);
        lua_sethook(S, NULL, 0, 0);
    }
    if (st != LUA_OK) {
        if (sb->out_of_steps)
            luaL_error(L, "%s: gave up after %I instructions (a data file must not loop; is there "
                       "a 'while true'?)", name, (LUAI_UACINT)max_instructions);
        if (st == LUA_ERRMEM)
            luaL_error(L, "%s: needs more than %d MB of memory (a data file is limited; is there "
                       "a huge string.rep or table?)", name, (int)(max_memory >> 20));
        const char *msg = lua_tostring(S, -1);
        lua_pushstring(L, msg ? msg : "error");
        lua_error(L);
    }
    lua_newtable(L); /* tables already copied */
    int seen = lua_gettop(L);
    copy_value(L, sb, -1, name, 0, seen, "the returned value");
    lua_replace(L, base + 1); /* the value where the box was */
    lua_settop(L, base + 1);
    lua_close(S); /* now, rather than at the box's collection (which finds S NULL) */
    sb->S = NULL;
}

/* wb.load_data(source, name [, {max_memory = bytes, max_instructions = n}]) -> value */
static int l_load_data(lua_State *L) {
    size_t len;
    const char *src = luaL_checklstring(L, 1, &len);
    const char *name = luaL_checkstring(L, 2);
    lwb_check_options(L, 3, (const char *const[]){"max_memory", "max_instructions", NULL});
    lua_Integer mem = lwb_opt_integer(L, 3, "max_memory", 64 << 20);
    lua_Integer ins = lwb_opt_integer(L, 3, "max_instructions", 20000000);
    luaL_argcheck(L, mem >= (1 << 20) && mem <= ((lua_Integer)1 << 34), 3,
                  "max_memory must be in [1 MB, 16 GB]");
    luaL_argcheck(L, ins >= 1000, 3, "max_instructions must be >= 1000");
    lua_settop(L, 2);
    lwb_load_data(L, src, len, name, (size_t)mem, ins);
    return 1;
}

static const luaL_Reg sandbox_funcs[] = {
    {"load_data", l_load_data},
    {NULL, NULL},
};

void lwb_open_sandbox(lua_State *L) {
    if (luaL_newmetatable(L, "wb.sandbox")) {
        lua_pushcfunction(L, sandbox_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, sandbox_gc);
        lua_setfield(L, -2, "__close");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, sandbox_funcs, 0);
}
