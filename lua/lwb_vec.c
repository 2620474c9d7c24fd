/* lwb_vec.c - wb.Vec: a float vector living in C (logits, probabilities), indexed by 0-based
 * token ids so that v:get(id) and tok:token(id) agree. */
#include "lwb.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VEC "wb.Vec"

typedef struct Vec {
    size_t n;
    float data[]; /* inline: one allocation, freed by the GC with the userdata */
} Vec;

float *lwb_push_vec(lua_State *L, size_t n) {
    if (n > ((size_t)1 << 40)) luaL_error(L, "Vec too large (%I floats)", (LUAI_UACINT)n);
    Vec *v = lua_newuserdatauv(L, sizeof(Vec) + n * sizeof(float), 0);
    v->n = n;
    luaL_setmetatable(L, VEC);
    return v->data;
}

static Vec *checkvec(lua_State *L, int idx) { return luaL_checkudata(L, idx, VEC); }

float *lwb_check_vec(lua_State *L, int idx, size_t *n) {
    Vec *v = checkvec(L, idx);
    *n = v->n;
    return v->data;
}

static Vec *newvec(lua_State *L, size_t n) {
    lwb_push_vec(L, n);
    return lua_touserdata(L, -1);
}

/* A 0-based id argument in [0, n). */
static size_t checkid(lua_State *L, int arg, const Vec *v) {
    lua_Integer id = luaL_checkinteger(L, arg);
    if (id < 0 || (lua_Unsigned)id >= v->n)
        luaL_argerror(L, arg, lua_pushfstring(L, "id %I out of range [0, %I)", (LUAI_UACINT)id,
                                              (LUAI_UACINT)v->n));
    return (size_t)id;
}

static void checknonempty(lua_State *L, const Vec *v) {
    if (v->n == 0) luaL_error(L, "Vec is empty");
}

/* wb.vec(n [, fill]) or wb.vec({x1, x2, ...}) */
static int l_vec(lua_State *L) {
    if (lua_type(L, 1) == LUA_TTABLE) {
        lua_Integer n = luaL_len(L, 1);
        Vec *v = newvec(L, n > 0 ? (size_t)n : 0);
        for (lua_Integer i = 1; i <= n; i++) {
            int isnum;
            lua_geti(L, 1, i);
            lua_Number x = lua_tonumberx(L, -1, &isnum);
            if (!isnum)
                luaL_argerror(L, 1, lua_pushfstring(L, "element %I is not a number (%s)",
                                                    (LUAI_UACINT)i, luaL_typename(L, -1)));
            v->data[i - 1] = (float)x;
            lua_pop(L, 1);
        }
        return 1;
    }
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0, 1, "length must be non-negative");
    float fill = (float)luaL_optnumber(L, 2, 0.0);
    Vec *v = newvec(L, (size_t)n);
    for (size_t i = 0; i < v->n; i++) v->data[i] = fill;
    return 1;
}

static int v_len(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)checkvec(L, 1)->n);
    return 1;
}

static int v_get(lua_State *L) {
    Vec *v = checkvec(L, 1);
    lua_pushnumber(L, v->data[checkid(L, 2, v)]);
    return 1;
}

static int v_set(lua_State *L) {
    Vec *v = checkvec(L, 1);
    size_t i = checkid(L, 2, v);
    v->data[i] = (float)luaL_checknumber(L, 3);
    lua_settop(L, 1);
    return 1;
}

/* NaN never wins: comparisons with NaN are false, so the first non-NaN maximum stays. */
static size_t argmax_of(const Vec *v) {
    size_t best = 0;
    while (best < v->n && isnan(v->data[best])) best++;
    if (best == v->n) return 0;
    for (size_t i = best + 1; i < v->n; i++)
        if (v->data[i] > v->data[best]) best = i;
    return best;
}

static int v_argmax(lua_State *L) {
    Vec *v = checkvec(L, 1);
    checknonempty(L, v);
    size_t i = argmax_of(v);
    lua_pushinteger(L, (lua_Integer)i);
    lua_pushnumber(L, v->data[i]);
    return 2;
}

static int v_max(lua_State *L) {
    Vec *v = checkvec(L, 1);
    checknonempty(L, v);
    lua_pushnumber(L, v->data[argmax_of(v)]);
    return 1;
}

static int v_min(lua_State *L) {
    Vec *v = checkvec(L, 1);
    checknonempty(L, v);
    float m = v->data[0];
    for (size_t i = 1; i < v->n; i++)
        if (v->data[i] < m || isnan(m)) m = v->data[i];
    lua_pushnumber(L, m);
    return 1;
}

static int v_sum(lua_State *L) {
    Vec *v = checkvec(L, 1);
    double s = 0;
    for (size_t i = 0; i < v->n; i++) s += v->data[i];
    lua_pushnumber(L, s);
    return 1;
}

static int v_dot(lua_State *L) {
    Vec *a = checkvec(L, 1), *b = checkvec(L, 2);
    luaL_argcheck(L, a->n == b->n, 2, "length mismatch");
    double s = 0;
    for (size_t i = 0; i < a->n; i++) s += (double)a->data[i] * b->data[i];
    lua_pushnumber(L, s);
    return 1;
}

/* Better = larger value, and on equal values the lower id. */
static int better(const Vec *v, size_t a, size_t b) {
    float x = v->data[a], y = v->data[b];
    if (isnan(y)) return !isnan(x) || a < b;
    if (isnan(x)) return 0;
    return x > y || (x == y && a < b);
}

static const Vec *sort_vec; /* qsort has no context argument; the Lua state is single-threaded */

static int cmp_ids(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return better(sort_vec, a, b) ? -1 : (better(sort_vec, b, a) ? 1 : 0);
}

static int v_topk(lua_State *L) {
    Vec *v = checkvec(L, 1);
    lua_Integer k = luaL_optinteger(L, 2, 10);
    luaL_argcheck(L, k >= 0, 2, "k must be non-negative");
    size_t kk = (lua_Unsigned)k < v->n ? (size_t)k : v->n;
    size_t *idx = lua_newuserdatauv(L, (kk > 0 ? kk : 1) * sizeof(size_t), 0);
    size_t have = 0;
    if (kk > 64) {
        /* Large k: sort all ids. The scratch array is a userdata so an error cannot leak it. */
        size_t *all = lua_newuserdatauv(L, v->n * sizeof(size_t), 0);
        for (size_t i = 0; i < v->n; i++) all[i] = i;
        sort_vec = v;
        qsort(all, v->n, sizeof(size_t), cmp_ids);
        memcpy(idx, all, kk * sizeof(size_t));
        have = kk;
        lua_pop(L, 1);
    } else {
        /* Small k (the usual case): insertion into a sorted buffer, O(n k) without allocation. */
        for (size_t i = 0; i < v->n && kk > 0; i++) {
            if (have == kk && !better(v, i, idx[have - 1])) continue;
            size_t j = have < kk ? have++ : kk - 1;
            while (j > 0 && better(v, i, idx[j - 1])) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = i;
        }
    }
    lua_createtable(L, (int)have, 0);
    for (size_t j = 0; j < have; j++) {
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, (lua_Integer)idx[j]);
        lua_setfield(L, -2, "id");
        lua_pushnumber(L, v->data[idx[j]]);
        lua_setfield(L, -2, "p");
        lua_rawseti(L, -2, (lua_Integer)j + 1);
    }
    return 1;
}

static int v_softmax(lua_State *L) {
    Vec *v = checkvec(L, 1);
    double t = luaL_optnumber(L, 2, 1.0);
    luaL_argcheck(L, t > 0 && isfinite(t), 2, "temperature must be a positive number");
    checknonempty(L, v);
    Vec *o = newvec(L, v->n);
    double m = v->data[argmax_of(v)], s = 0;
    for (size_t i = 0; i < v->n; i++) {
        double e = exp(((double)v->data[i] - m) / t);
        o->data[i] = (float)e;
        s += e;
    }
    for (size_t i = 0; i < v->n; i++) o->data[i] = (float)(o->data[i] / s);
    return 1;
}

static int v_log_softmax(lua_State *L) {
    Vec *v = checkvec(L, 1);
    double t = luaL_optnumber(L, 2, 1.0);
    luaL_argcheck(L, t > 0 && isfinite(t), 2, "temperature must be a positive number");
    checknonempty(L, v);
    Vec *o = newvec(L, v->n);
    double m = v->data[argmax_of(v)], s = 0;
    for (size_t i = 0; i < v->n; i++) s += exp(((double)v->data[i] - m) / t);
    double lse = log(s);
    for (size_t i = 0; i < v->n; i++) o->data[i] = (float)(((double)v->data[i] - m) / t - lse);
    return 1;
}

/* Entropy in bits of v read as a probability distribution; 0 log 0 = 0. */
static int v_entropy_bits(lua_State *L) {
    Vec *v = checkvec(L, 1);
    double h = 0;
    for (size_t i = 0; i < v->n; i++) {
        double p = v->data[i];
        if (p > 0) h -= p * log2(p);
    }
    lua_pushnumber(L, h + 0.0); /* -0.0 + 0.0 is +0.0: a one-hot vector prints 0.0, not -0.0 */
    return 1;
}

static int v_count_nonzero(lua_State *L) {
    Vec *v = checkvec(L, 1);
    lua_Integer c = 0;
    for (size_t i = 0; i < v->n; i++) c += v->data[i] != 0.0f;
    lua_pushinteger(L, c);
    return 1;
}

static int v_totable(lua_State *L) {
    Vec *v = checkvec(L, 1);
    lua_createtable(L, v->n > INT32_MAX ? 0 : (int)v->n, 0);
    for (size_t i = 0; i < v->n; i++) {
        lua_pushnumber(L, v->data[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int v_copy(lua_State *L) {
    Vec *v = checkvec(L, 1);
    Vec *o = newvec(L, v->n);
    memcpy(o->data, v->data, v->n * sizeof(float));
    return 1;
}

/* Sum of the values at a set of ids (e.g. the probability mass of all tokens starting with a
 * space). Ids repeated in the table count once per occurrence. */
static int v_sum_over(lua_State *L) {
    Vec *v = checkvec(L, 1);
    size_t n;
    /* vocab 0 would disable the range check: an empty Vec accepts only an empty id list. */
    int32_t *ids = lwb_check_ids(L, 2, v->n > INT32_MAX ? INT32_MAX : (v->n ? (int32_t)v->n : 1), &n);
    if (v->n == 0 && n > 0) return luaL_argerror(L, 2, "Vec is empty");
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v->data[ids[i]];
    lua_pushnumber(L, s);
    return 1;
}

static int v_scale(lua_State *L) {
    Vec *v = checkvec(L, 1);
    float x = (float)luaL_checknumber(L, 2);
    Vec *o = newvec(L, v->n);
    for (size_t i = 0; i < v->n; i++) o->data[i] = v->data[i] * x;
    return 1;
}

/* a:add(b [, alpha]) = a + alpha * b; b may also be a number added to every element. */
static int v_add(lua_State *L) {
    Vec *a = checkvec(L, 1);
    if (lua_type(L, 2) == LUA_TNUMBER) {
        float x = (float)lua_tonumber(L, 2);
        Vec *o = newvec(L, a->n);
        for (size_t i = 0; i < a->n; i++) o->data[i] = a->data[i] + x;
        return 1;
    }
    Vec *b = checkvec(L, 2);
    luaL_argcheck(L, a->n == b->n, 2, "length mismatch");
    float alpha = (float)luaL_optnumber(L, 3, 1.0);
    Vec *o = newvec(L, a->n);
    for (size_t i = 0; i < a->n; i++) o->data[i] = a->data[i] + alpha * b->data[i];
    return 1;
}

/* Inverse-CDF sampling over non-negative weights (probabilities need not sum to 1): u in [0,1)
 * comes from the caller (math.random()) so that runs are reproducible from Lua's seed. */
static int v_sample(lua_State *L) {
    Vec *v = checkvec(L, 1);
    double u = luaL_checknumber(L, 2);
    luaL_argcheck(L, u >= 0 && u < 1, 2, "u must be in [0, 1)");
    double total = 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->data[i] > 0) total += v->data[i];
    if (!(total > 0)) return luaL_error(L, "Vec has no positive weight to sample from");
    double target = u * total, acc = 0;
    size_t last = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (!(v->data[i] > 0)) continue;
        acc += v->data[i];
        last = i;
        if (target < acc) break;
    }
    lua_pushinteger(L, (lua_Integer)last);
    return 1;
}

static int v_tostring(lua_State *L) {
    Vec *v = checkvec(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "Vec(%I)[", (LUAI_UACINT)v->n);
    luaL_addvalue(&b);
    size_t show = v->n < 6 ? v->n : 5;
    for (size_t i = 0; i < show; i++) {
        char num[64];
        snprintf(num, sizeof num, "%s%.6g", i ? ", " : "", (double)v->data[i]);
        luaL_addstring(&b, num);
    }
    if (show < v->n) luaL_addstring(&b, ", ...");
    luaL_addchar(&b, ']');
    luaL_pushresult(&b);
    return 1;
}

static const luaL_Reg vec_methods[] = {
    {"get", v_get},
    {"set", v_set},
    {"argmax", v_argmax},
    {"topk", v_topk},
    {"sum", v_sum},
    {"max", v_max},
    {"min", v_min},
    {"dot", v_dot},
    {"softmax", v_softmax},
    {"log_softmax", v_log_softmax},
    {"entropy_bits", v_entropy_bits},
    {"count_nonzero", v_count_nonzero},
    {"totable", v_totable},
    {"copy", v_copy},
    {"sum_over", v_sum_over},
    {"scale", v_scale},
    {"add", v_add},
    {"sample", v_sample},
    {NULL, NULL},
};

static const luaL_Reg vec_meta[] = {
    {"__len", v_len},
    {"__tostring", v_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

void lwb_open_vec(lua_State *L) {
    luaL_newmetatable(L, VEC);
    luaL_setfuncs(L, vec_meta, 0);
    luaL_newlibtable(L, vec_methods);
    luaL_setfuncs(L, vec_methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Vec"); /* wb.Vec = the methods table, so scripts can extend Vecs */
    lua_pop(L, 1);
    lua_pushcfunction(L, l_vec);
    lua_setfield(L, -2, "vec");
}
