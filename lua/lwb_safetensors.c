/* lwb_safetensors.c - wb.safetensors_read / wb.safetensors_write: build or inspect checkpoints
 * from scripts (tests make tiny random models with it). */
#include "lwb.h"

#include <string.h>

static const char *const dtype_names[] = {"F32", "F16", "BF16", "I32", "I64", NULL};
static const size_t dtype_sizes[] = {4, 2, 2, 4, 8};

/* A wb_safetensors handle owned by a userdata, so errors while building the result free it. */
typedef struct { wb_safetensors *st; } StBox;

static int stbox_gc(lua_State *L) {
    StBox *b = luaL_checkudata(L, 1, "wb.safetensors.box");
    if (b->st) wb_safetensors_free(b->st);
    b->st = NULL;
    return 0;
}

static void push_shape(lua_State *L, const wb_tensor_view *t) {
    lua_createtable(L, t->ndim, 0);
    for (int d = 0; d < t->ndim; d++) {
        lua_pushinteger(L, (lua_Integer)t->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
}

/* wb.safetensors_read(path) -> { [name] = {dtype=, shape=, vec=Vec} (floats) or
 *                                          {dtype=, shape=, values={...}} (integers) } */
static int l_read(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    StBox *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->st = NULL;
    luaL_setmetatable(L, "wb.safetensors.box");
    wb_err err = {0};
    if (wb_safetensors_open(path, &b->st, &err) != WB_OK) return lwb_raise(L, &err);
    int n = wb_safetensors_count(b->st);
    lua_createtable(L, 0, n);
    for (int i = 0; i < n; i++) {
        wb_tensor_view t;
        if (wb_safetensors_get(b->st, i, &t) != WB_OK) continue;
        lua_createtable(L, 0, 3);
        lua_pushstring(L, dtype_names[t.dtype]);
        lua_setfield(L, -2, "dtype");
        push_shape(L, &t);
        lua_setfield(L, -2, "shape");
        size_t count = t.nbytes / dtype_sizes[t.dtype];
        if (t.dtype == WB_I32 || t.dtype == WB_I64) {
            lua_createtable(L, count > INT32_MAX ? 0 : (int)count, 0);
            for (size_t j = 0; j < count; j++) {
                int64_t v;
                if (t.dtype == WB_I32) {
                    int32_t x;
                    memcpy(&x, (const char *)t.data + 4 * j, 4);
                    v = x;
                } else {
                    memcpy(&v, (const char *)t.data + 8 * j, 8);
                }
                lua_pushinteger(L, (lua_Integer)v);
                lua_rawseti(L, -2, (lua_Integer)j + 1);
            }
            lua_setfield(L, -2, "values");
        } else {
            float *out = lwb_push_vec(L, count);
            const unsigned char *src = t.data;
            for (size_t j = 0; j < count; j++) {
                if (t.dtype == WB_F32) {
                    memcpy(&out[j], src + 4 * j, 4);
                } else {
                    uint16_t h;
                    memcpy(&h, src + 2 * j, 2);
                    out[j] = t.dtype == WB_F16 ? wb_f16_to_f32(h) : wb_bf16_to_f32(h);
                }
            }
            lua_setfield(L, -2, "vec");
        }
        lua_setfield(L, -2, t.name);
    }
    wb_safetensors_free(b->st);
    b->st = NULL;
    return 1;
}

/* wb.safetensors_write(path, { {name=, shape={...}, data=Vec or {numbers}, dtype="F32"}, ... }
 *                      [, {key = "value", ...}]) */
static int l_write(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 0 && n <= 1000000, 2, "too many tensors");
    /* Every buffer is a userdata referenced from this anchor table: nothing leaks on error. */
    lua_newtable(L); /* 4: anchor */
    wb_tensor_view *views = lua_newuserdatauv(L, sizeof(wb_tensor_view) * (size_t)(n ? n : 1), 0);
    lua_rawseti(L, 4, 1);
    lua_Integer anchor_n = 1;
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, 2, i) != LUA_TTABLE)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor %I is not a table", (LUAI_UACINT)i));
        int ti = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, ti)) {
            lua_pop(L, 1);
            const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            if (strcmp(k, "name") && strcmp(k, "shape") && strcmp(k, "data") && strcmp(k, "dtype"))
                luaL_argerror(L, 2, lua_pushfstring(L, "tensor %I: unknown field '%s'",
                                                    (LUAI_UACINT)i, k));
        }
        wb_tensor_view *v = &views[i - 1];
        memset(v, 0, sizeof *v);
        if (lua_getfield(L, ti, "name") != LUA_TSTRING)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor %I: 'name' must be a string",
                                                (LUAI_UACINT)i));
        size_t name_len;
        v->name = lua_tolstring(L, -1, &name_len); /* anchored by the tensor table, in arg 2 */
        lua_pop(L, 1);
        /* the file stores C strings: a NUL would cut the name (and make two names equal) */
        if (strlen(v->name) != name_len)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor %I: name contains a NUL byte",
                                                (LUAI_UACINT)i));
        v->dtype = WB_F32;
        if (lua_getfield(L, ti, "dtype") != LUA_TNIL) {
            const char *dn = lua_tostring(L, -1);
            int d = 0;
            while (dtype_names[d] && (!dn || strcmp(dtype_names[d], dn) != 0)) d++;
            if (!dtype_names[d])
                luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': unknown dtype '%s'",
                                                    v->name, dn ? dn : "?"));
            v->dtype = (wb_dtype)d;
        }
        lua_pop(L, 1);
        if (v->dtype != WB_F32 && v->dtype != WB_F16 && v->dtype != WB_BF16)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': only F32, F16 and BF16 can be "
                                                "written", v->name));
        if (lua_getfield(L, ti, "shape") != LUA_TTABLE)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': 'shape' must be a table",
                                                v->name));
        lua_Integer nd = luaL_len(L, -1);
        if (nd < 0 || nd > WB_MAX_DIMS)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': at most %d dimensions", v->name,
                                                WB_MAX_DIMS));
        v->ndim = (int)nd;
        size_t count = 1;
        for (int d = 0; d < v->ndim; d++) {
            lua_geti(L, -1, d + 1);
            int isint;
            lua_Integer s = lua_tointegerx(L, -1, &isint);
            if (!isint || s < 0 || s > (1LL << 40))
                luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': bad shape[%d]", v->name,
                                                    d + 1));
            v->shape[d] = s;
            count *= (size_t)s;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        size_t esize = dtype_sizes[v->dtype];
        unsigned char *buf = lua_newuserdatauv(L, count * esize + 1, 0);
        lua_rawseti(L, 4, ++anchor_n);
        int dt = lua_getfield(L, ti, "data");
        const float *src = NULL;
        size_t have = 0;
        if (dt == LUA_TUSERDATA) {
            src = lwb_check_vec(L, -1, &have);
        } else if (dt == LUA_TTABLE) {
            have = (size_t)luaL_len(L, -1);
        } else {
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': 'data' must be a Vec or a table",
                                                v->name));
        }
        if (have != count)
            luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': data has %I values, shape needs %I",
                                                v->name, (LUAI_UACINT)have, (LUAI_UACINT)count));
        for (size_t j = 0; j < count; j++) {
            float x;
            if (src) {
                x = src[j];
            } else {
                lua_geti(L, -1, (lua_Integer)j + 1);
                int isnum;
                x = (float)lua_tonumberx(L, -1, &isnum);
                if (!isnum)
                    luaL_argerror(L, 2, lua_pushfstring(L, "tensor '%s': data[%I] is not a number",
                                                        v->name, (LUAI_UACINT)j + 1));
                lua_pop(L, 1);
            }
            if (v->dtype == WB_F32) {
                memcpy(buf + 4 * j, &x, 4);
            } else {
                uint16_t h = v->dtype == WB_F16 ? wb_f32_to_f16(x) : wb_f32_to_bf16(x);
                memcpy(buf + 2 * j, &h, 2);
            }
        }
        lua_pop(L, 2); /* data, tensor table */
        v->data = buf;
        v->nbytes = count * esize;
    }
    /* Metadata: string keys and values only (the safetensors format says so). */
    int nmeta = 0;
    const char **kv = NULL;
    if (!lua_isnil(L, 3)) {
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                luaL_argerror(L, 3, "metadata keys and values must be strings");
            size_t kl, vl;
            const char *ks = lua_tolstring(L, -2, &kl), *vs = lua_tolstring(L, -1, &vl);
            if (strlen(ks) != kl || strlen(vs) != vl)
                luaL_argerror(L, 3, "metadata keys and values must not contain NUL bytes");
            nmeta++;
            lua_pop(L, 1);
        }
        kv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(2 * nmeta + 1), 0);
        lua_rawseti(L, 4, ++anchor_n);
        int j = 0;
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            kv[j++] = lua_tostring(L, -2);
            kv[j++] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
    }
    wb_err err = {0};
    if (wb_safetensors_write(path, views, (int)n, kv, nmeta, &err) != WB_OK)
        return lwb_raise(L, &err);
    return 0;
}

static const luaL_Reg st_funcs[] = {
    {"safetensors_read", l_read},
    {"safetensors_write", l_write},
    {NULL, NULL},
};

void lwb_open_safetensors(lua_State *L) {
    if (luaL_newmetatable(L, "wb.safetensors.box")) {
        lua_pushcfunction(L, stbox_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    luaL_setfuncs(L, st_funcs, 0);
}
