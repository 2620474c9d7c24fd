/* lwb_tensor.c - wb.Tensor: floats with a shape, for what a forward pass shows of its insides.
 *
 * A Tensor either owns its floats (hidden states and attention weights copied out of a forward
 * pass, stored inside the userdata) or is a read-only view: of a Session's KV cache (s:kv) or
 * of another Tensor (t:select). A view keeps what it looks into alive through its user value,
 * and a view of a cache checks on every access that the cache rows it shows are still the
 * ones it was made for: once its Session is closed, truncated or reset the view raises instead
 * of reading freed or rewritten memory. Indices are 0-based, like token ids and Vec:get.
 */
#include "lwb.h"

#include <stdio.h>
#include <string.h>

#define TENSOR LWB_TENSOR

static void init(lwb_Tensor *t, const float *data, int ndim, const int64_t *shape,
                 const int64_t *stride) {
    memset(t, 0, sizeof *t);
    t->data = data;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    if (stride) {
        for (int i = 0; i < ndim; i++) t->stride[i] = stride[i];
    } else {
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) t->stride[i] = s, s *= shape[i];
    }
}

float *lwb_push_tensor(lua_State *L, int ndim, const int64_t *shape) {
    if (ndim < 1 || ndim > LWB_TENSOR_MAXDIM) luaL_error(L, "Tensor: %d dimensions", ndim);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && n > ((size_t)1 << 40) / (size_t)shape[i]))
            luaL_error(L, "Tensor: shape too large");
        n *= (size_t)shape[i];
    }
    /* the floats follow the header (whose size is a multiple of 8) in the same block */
    lwb_Tensor *t = lua_newuserdatauv(L, sizeof *t + n * sizeof(float), 1);
    float *data = (float *)(t + 1);
    init(t, data, ndim, shape, NULL);
    luaL_setmetatable(L, TENSOR);
    return data;
}

void lwb_push_tensor_view(lua_State *L, const float *data, int ndim, const int64_t *shape,
                          const int64_t *stride, int session_idx) {
    session_idx = lua_absindex(L, session_idx);
    const lwb_Session *s = luaL_checkudata(L, session_idx, LWB_SESSION);
    lwb_Tensor *t = lua_newuserdatauv(L, sizeof *t, 1);
    init(t, data, ndim, shape, stride);
    t->session = s;
    t->epoch = s->epoch;
    luaL_setmetatable(L, TENSOR);
    lua_pushvalue(L, session_idx);
    lua_setiuservalue(L, -2, 1);
}

/* The Tensor at idx, refusing a view whose cache rows are gone. */
static const lwb_Tensor *checktensor(lua_State *L, int idx) {
    const lwb_Tensor *t = luaL_checkudata(L, idx, TENSOR);
    if (t->session && (!t->session->s || t->session->epoch != t->epoch))
        luaL_error(L, "Tensor view of a Session cache is no longer valid: the Session was "
                      "closed, truncated or reset after s:kv() made it");
    return t;
}

const lwb_Tensor *lwb_check_tensor(lua_State *L, int idx) { return checktensor(L, idx); }

/* Read k indices from arguments first.. (0-based) into the offset of that sub-block. */
static int64_t offset_of(lua_State *L, const lwb_Tensor *t, int first, int k) {
    int64_t off = 0;
    for (int d = 0; d < k; d++) {
        lua_Integer i = luaL_checkinteger(L, first + d);
        if (i < 0 || i >= t->shape[d])
            luaL_argerror(L, first + d,
                          lua_pushfstring(L, "index %I out of range [0, %I) on axis %d",
                                          (LUAI_UACINT)i, (LUAI_UACINT)t->shape[d], d));
        off += (int64_t)i * t->stride[d];
    }
    return off;
}

static int t_shape(lua_State *L) {
    const lwb_Tensor *t = luaL_checkudata(L, 1, TENSOR); /* the shape stays readable */
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
        lua_pushinteger(L, (lua_Integer)t->shape[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int t_len(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)((const lwb_Tensor *)luaL_checkudata(L, 1, TENSOR))->shape[0]);
    return 1;
}

/* t:get(i0, ..., i_{ndim-1}) -> number */
static int t_get(lua_State *L) {
    const lwb_Tensor *t = checktensor(L, 1);
    if (lua_gettop(L) != 1 + t->ndim)
        return luaL_argerror(L, 2, lua_pushfstring(L, "get needs %d indices, got %d", t->ndim,
                                                   lua_gettop(L) - 1));
    lua_pushnumber(L, (lua_Number)t->data[offset_of(L, t, 2, t->ndim)]);
    return 1;
}

/* t:vec(i0, ..., i_{ndim-2}) -> a Vec (a copy) of the last axis at those indices */
static int t_vec(lua_State *L) {
    const lwb_Tensor *t = checktensor(L, 1);
    const int k = t->ndim - 1;
    if (lua_gettop(L) != 1 + k)
        return luaL_argerror(L, 2, lua_pushfstring(L, "vec needs %d indices (all but the last "
                                                   "axis), got %d", k, lua_gettop(L) - 1));
    const float *src = t->data + offset_of(L, t, 2, k);
    const int64_t n = t->shape[k], st = t->stride[k];
    float *dst = lwb_push_vec(L, (size_t)n);
    for (int64_t i = 0; i < n; i++) dst[i] = src[i * st];
    return 1;
}

/* t:select(i) -> a view of t[i] (one axis fewer), keeping t alive */
static int t_select(lua_State *L) {
    const lwb_Tensor *t = checktensor(L, 1);
    luaL_argcheck(L, t->ndim > 1, 1, "select needs a Tensor of 2 or more axes (use get)");
    const int64_t off = offset_of(L, t, 2, 1);
    lwb_Tensor *v = lua_newuserdatauv(L, sizeof *v, 1);
    init(v, t->data + off, t->ndim - 1, t->shape + 1, t->stride + 1);
    v->session = t->session;
    v->epoch = t->epoch;
    luaL_setmetatable(L, TENSOR);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* Nested Lua tables, 1-based: t:totable()[i0 + 1][i1 + 1]... Elements in row-major order
 * with one open table per axis on the stack (no recursion): a finished inner table is stored
 * into its parent and a fresh one opened. */
static int t_totable(lua_State *L) {
    const lwb_Tensor *t = checktensor(L, 1);
    const int nd = t->ndim;
    int64_t idx[LWB_TENSOR_MAXDIM] = {0}, total = 1;
    for (int d = 0; d < nd; d++) total *= t->shape[d];
    lua_settop(L, 1);
    lua_createtable(L, (int)t->shape[0], 0);
    if (total == 0) return 1;
    for (int d = 1; d < nd; d++) lua_createtable(L, (int)t->shape[d], 0);
    for (int64_t e = 0; e < total; e++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * t->stride[d];
        lua_pushnumber(L, (lua_Number)t->data[off]);
        lua_rawseti(L, -2, (lua_Integer)idx[nd - 1] + 1);
        int d = nd - 1;
        idx[d]++;
        while (d > 0 && idx[d] == t->shape[d]) {
            idx[d] = 0;
            lua_rawseti(L, -2, (lua_Integer)idx[d - 1] + 1); /* axis d's table into axis d-1's */
            idx[--d]++;
        }
        if (e + 1 < total)
            for (int o = d + 1; o < nd; o++) lua_createtable(L, (int)t->shape[o], 0);
    }
    return 1; /* the outermost table, at index 2 */
}

static int t_valid(lua_State *L) {
    const lwb_Tensor *t = luaL_checkudata(L, 1, TENSOR);
    lua_pushboolean(L, !t->session || (t->session->s && t->session->epoch == t->epoch));
    return 1;
}

static int t_tostring(lua_State *L) {
    const lwb_Tensor *t = luaL_checkudata(L, 1, TENSOR);
    char buf[160];
    int n = snprintf(buf, sizeof buf, "Tensor[");
    for (int i = 0; i < t->ndim; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)t->shape[i]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]%s", t->session ? " (view of a Session cache)" : "");
    lua_pushstring(L, buf);
    return 1;
}

static const luaL_Reg tensor_methods[] = {
    {"shape", t_shape},   {"get", t_get},         {"vec", t_vec},
    {"select", t_select}, {"totable", t_totable}, {"valid", t_valid},
    {NULL, NULL},
};

static const luaL_Reg tensor_meta[] = {
    {"__len", t_len},
    {"__tostring", t_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

void lwb_open_tensor(lua_State *L) {
    luaL_newmetatable(L, TENSOR);
    luaL_setfuncs(L, tensor_meta, 0);
    luaL_newlibtable(L, tensor_methods);
    luaL_setfuncs(L, tensor_methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Tensor");
    lua_pop(L, 1);
}
