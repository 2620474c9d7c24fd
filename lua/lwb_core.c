/* lwb_core.c - wb.clock_ms, wb.threads, wb.version, wb.blas_info, wb.json, wb.default_model_dir. */
#include "lwb.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef WB_SOURCE_DIR
#define WB_SOURCE_DIR ""
#endif
#ifndef WB_INSTALL_DATADIR
#define WB_INSTALL_DATADIR ""
#endif

/* Registry key of the JSON null sentinel and of the metatable marking JSON arrays. */
#define JSON_NULL "wb.json.null"
#define JSON_ARRAY "wb.json.array"
#define JSON_MAX_DEPTH 1000

/* ---- small functions ----------------------------------------------------------------------- */

static int l_clock_ms(lua_State *L) {
    lua_pushnumber(L, wb_clock_ms());
    return 1;
}

static int l_threads(lua_State *L) {
    int old = wb_threads_get();
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 1 && n <= 4096, 1, "thread count must be in [1, 4096]");
        wb_threads_set((int)n);
    }
    lua_pushinteger(L, old);
    return 1;
}

static int l_blas_info(lua_State *L) {
    lua_pushstring(L, wb_blas_info());
    return 1;
}

static int is_dir(const char *p) {
    struct stat st;
    return p[0] && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* <dir of /proc/self/exe>/../share/workbench, or "" when unknown. */
static void exe_datadir(char *buf, size_t size) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    buf[0] = '\0';
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    int w = snprintf(buf, size, "%s/../share/workbench", exe);
    if (w < 0 || (size_t)w >= size) buf[0] = '\0'; /* too long to be a usable path */
}

/* The first existing <base>/<sub> over the exe-relative datadir (an installed workbench uses its
 * own files, wherever the prefix was moved), the source tree (a build-tree workbench, so edits
 * to lua/ and scripts/ need no install) and the configured install datadir; when none exists,
 * the first whose base exists (fallback_any: else the first). */
static const char *find_data(const char *sub, char *buf, size_t size, int fallback_any) {
    char exedir[4096];
    exe_datadir(exedir, sizeof exedir);
    const char *bases[3] = {exedir, WB_SOURCE_DIR, WB_INSTALL_DATADIR};
    for (int i = 0; i < 3; i++) {
        if (!bases[i][0]) continue;
        snprintf(buf, size, "%s/%s", bases[i], sub);
        if (is_dir(buf)) return buf;
    }
    if (!fallback_any) return NULL;
    for (int i = 0; i < 3; i++) {
        if (is_dir(bases[i])) {
            snprintf(buf, size, "%s/%s", bases[i], sub);
            return buf;
        }
    }
    snprintf(buf, size, "%s/%s", WB_INSTALL_DATADIR[0] ? WB_INSTALL_DATADIR : ".", sub);
    return buf;
}

const char *lwb_default_model_dir(char *buf, size_t size) {
    const char *env = getenv("WB_MODEL");
    if (env && env[0]) {
        snprintf(buf, size, "%s", env);
        return buf;
    }
    return find_data("models/tinylm-base", buf, size, 1);
}

const char *lwb_lua_dir(char *buf, size_t size) {
    char probe[4096];
    if (!find_data("lua/wb", probe, sizeof probe, 0)) return NULL;
    size_t len = strlen(probe) - strlen("/wb");
    snprintf(buf, size, "%.*s", (int)len, probe);
    return buf;
}

static int l_default_model_dir(lua_State *L) {
    char buf[4096];
    lua_pushstring(L, lwb_default_model_dir(buf, sizeof buf));
    return 1;
}

/* ---- JSON decode ----------------------------------------------------------------------------- */

static void push_cjson(lua_State *L, const cJSON *item, int depth) {
    luaL_checkstack(L, 4, "JSON nesting too deep");
    if (cJSON_IsNull(item)) {
        lua_getfield(L, LUA_REGISTRYINDEX, JSON_NULL);
    } else if (cJSON_IsFalse(item)) {
        lua_pushboolean(L, 0);
    } else if (cJSON_IsTrue(item)) {
        lua_pushboolean(L, 1);
    } else if (cJSON_IsNumber(item)) {
        /* cJSON keeps only a double: integral values that a double holds exactly become Lua
         * integers (so ids and sizes index tables), everything else stays a float. */
        double d = item->valuedouble;
        if (d == floor(d) && fabs(d) <= 9007199254740992.0) lua_pushinteger(L, (lua_Integer)d);
        else lua_pushnumber(L, d);
    } else if (cJSON_IsString(item)) {
        lua_pushstring(L, item->valuestring);
    } else if (cJSON_IsArray(item)) {
        lua_createtable(L, cJSON_GetArraySize(item), 0);
        lua_Integer i = 1;
        for (const cJSON *c = item->child; c; c = c->next) {
            push_cjson(L, c, depth + 1);
            lua_rawseti(L, -2, i++);
        }
        luaL_setmetatable(L, JSON_ARRAY);
    } else if (cJSON_IsObject(item)) {
        lua_newtable(L);
        for (const cJSON *c = item->child; c; c = c->next) {
            push_cjson(L, c, depth + 1);
            lua_setfield(L, -2, c->string);
        }
    } else {
        lua_pushnil(L);
    }
}

/* A cJSON tree owned by a userdata so a Lua error while building the result cannot leak it. */
typedef struct { cJSON *root; } JsonBox;

static int jsonbox_gc(lua_State *L) {
    JsonBox *b = lua_touserdata(L, 1);
    if (b->root) cJSON_Delete(b->root);
    b->root = NULL;
    return 0;
}

static JsonBox *push_jsonbox(lua_State *L) {
    JsonBox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->root = NULL;
    luaL_setmetatable(L, "wb.json.box");
    return b;
}

void lwb_push_json(lua_State *L, const char *text, size_t len, const char *name) {
    JsonBox *b = push_jsonbox(L);
    const char *end = NULL;
    b->root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!b->root) {
        size_t pos = end && end >= text ? (size_t)(end - text) : 0;
        if (pos >= len) luaL_error(L, "%s: JSON syntax error at byte %d (unexpected end of text)",
                                   name, (int)pos + 1);
        unsigned char c = (unsigned char)text[pos];
        if (c >= 0x20 && c < 0x7f)
            luaL_error(L, "%s: JSON syntax error at byte %d (near '%c')", name, (int)pos + 1, c);
        luaL_error(L, "%s: JSON syntax error at byte %d (byte value %d)", name, (int)pos + 1, c);
    }
    while (end < text + len && strchr(" \t\r\n", *end) && *end) end++;
    if (end < text + len)
        luaL_error(L, "%s: JSON syntax error at byte %d (trailing characters after the value)",
                   name, (int)(end - text) + 1);
    push_cjson(L, b->root, 0);
    cJSON_Delete(b->root);
    b->root = NULL;
    lua_remove(L, -2);
}

static int l_json_decode(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    lwb_push_json(L, text, len, "json.decode");
    return 1;
}

/* ---- JSON encode ----------------------------------------------------------------------------- */

/* Every node is attached to its parent (or to the box's root) as soon as it is made, so an
 * error anywhere in the walk leaves one tree that the box's __gc frees. */
typedef struct {
    lua_State *L;
    JsonBox *box;
    int visited; /* stack index of the set of tables on the current path */
} Enc;

static void attach(Enc *e, cJSON *parent, const char *key, cJSON *node) {
    if (!node) luaL_error(e->L, "json.encode: out of memory");
    if (!parent) e->box->root = node;
    else if (key) cJSON_AddItemToObject(parent, key, node);
    else cJSON_AddItemToArray(parent, node);
}

static void encode_value(Enc *e, int idx, int depth, cJSON *parent, const char *key);

static int cmp_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

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

static void encode_table(Enc *e, int idx, int depth, cJSON *parent, const char *key) {
    lua_State *L = e->L;
    if (depth > JSON_MAX_DEPTH) luaL_error(L, "json.encode: nesting deeper than %d", JSON_MAX_DEPTH);
    luaL_checkstack(L, 6, "json.encode: nesting too deep");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, e->visited) != LUA_TNIL)
        luaL_error(L, "json.encode: cycle (a table contains itself)");
    lua_pop(L, 1);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, e->visited);

    lua_Integer n;
    cJSON *node;
    if (table_is_array(L, idx, &n)) {
        attach(e, parent, key, node = cJSON_CreateArray());
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, idx, i);
            encode_value(e, lua_gettop(L), depth + 1, node, NULL);
            lua_pop(L, 1);
        }
    } else {
        attach(e, parent, key, node = cJSON_CreateObject());
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
        const char **keys = lua_newuserdatauv(L, (nkeys ? nkeys : 1) * sizeof(char *), 0);
        size_t k = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            keys[k++] = lua_tostring(L, -1); /* anchored by the table itself */
        }
        qsort(keys, nkeys, sizeof(char *), cmp_keys);
        for (k = 0; k < nkeys; k++) {
            lua_pushstring(L, keys[k]);
            lua_rawget(L, idx);
            encode_value(e, lua_gettop(L), depth + 1, node, keys[k]);
            lua_pop(L, 1);
        }
        lua_pop(L, 1); /* keys */
    }
    lua_pushvalue(L, idx);
    lua_pushnil(L);
    lua_rawset(L, e->visited);
}

static void encode_value(Enc *e, int idx, int depth, cJSON *parent, const char *key) {
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL: attach(e, parent, key, cJSON_CreateNull()); return;
    case LUA_TBOOLEAN: attach(e, parent, key, cJSON_CreateBool(lua_toboolean(L, idx))); return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            /* Raw text keeps 64-bit integers exact (cJSON numbers are doubles). */
            char buf[32];
            snprintf(buf, sizeof buf, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
            attach(e, parent, key, cJSON_CreateRaw(buf));
        } else {
            lua_Number d = lua_tonumber(L, idx);
            if (isnan(d) || isinf(d))
                luaL_error(L, "json.encode: %s is not representable in JSON",
                           isnan(d) ? "NaN" : (d > 0 ? "inf" : "-inf"));
            attach(e, parent, key, cJSON_CreateNumber(d));
        }
        return;
    case LUA_TSTRING: attach(e, parent, key, cJSON_CreateString(lua_tostring(L, idx))); return;
    case LUA_TUSERDATA:
        lua_getfield(L, LUA_REGISTRYINDEX, JSON_NULL);
        if (lua_rawequal(L, -1, idx)) {
            lua_pop(L, 1);
            attach(e, parent, key, cJSON_CreateNull());
            return;
        }
        lua_pop(L, 1);
        break;
    case LUA_TTABLE: encode_table(e, idx, depth, parent, key); return;
    default: break;
    }
    luaL_error(L, "json.encode: cannot encode a %s", luaL_typename(L, idx));
}

static int l_json_encode(lua_State *L) {
    luaL_checkany(L, 1);
    lwb_check_options(L, 2, (const char *const[]){"indent", NULL});
    int indent = lwb_opt_bool(L, 2, "indent", 0);
    lua_settop(L, 1);
    Enc e = {L, push_jsonbox(L), 0}; /* box at 2 */
    lua_newtable(L);
    e.visited = lua_gettop(L);
    encode_value(&e, 1, 0, NULL, NULL);
    char *s = indent ? cJSON_Print(e.box->root) : cJSON_PrintUnformatted(e.box->root);
    cJSON_Delete(e.box->root);
    e.box->root = NULL;
    if (!s) return luaL_error(L, "json.encode: out of memory");
    lua_pushstring(L, s);
    cJSON_free(s);
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

static const luaL_Reg core_funcs[] = {
    {"clock_ms", l_clock_ms},
    {"threads", l_threads},
    {"blas_info", l_blas_info},
    {"default_model_dir", l_default_model_dir},
    {NULL, NULL},
};

void lwb_open_core(lua_State *L) {
    luaL_setfuncs(L, core_funcs, 0);
    lua_pushstring(L, wb_version());
    lua_setfield(L, -2, "version");

    if (luaL_newmetatable(L, "wb.json.box")) {
        lua_pushcfunction(L, jsonbox_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, jsonbox_gc);
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
