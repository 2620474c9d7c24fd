/* lwb_train.c - wb.Trainer (wb.trainer): GPT-2 training from Lua.
 *
 *   local tr = wb.trainer{ vocab_size = 2048, n_ctx = 128, batch_size = 16, max_steps = 3000 }
 *   tr:set_data(train_ids, val_ids)      -- tables of 0-based ids, or strings of packed int32
 *   local loss, grad_norm = tr:step()
 *   local val = tr:eval(8)
 *   tr:save_model("out/model.safetensors"); tr:save_checkpoint("out/checkpoint.safetensors")
 */
#include "lwb.h"

#include <string.h>

#define TRAINER "wb.Trainer"

typedef struct Trainer {
    wb_trainer *t; /* NULL once closed */
} Trainer;

static Trainer *checktrainerud(lua_State *L, int idx) { return luaL_checkudata(L, idx, TRAINER); }

static wb_trainer *checktrainer(lua_State *L, int idx) {
    Trainer *u = checktrainerud(L, idx);
    if (!u->t) luaL_error(L, "attempt to use a closed Trainer");
    return u->t;
}

/* Every key of the parameter table: the model shape (named as in config.json) and the
 * optimisation settings (named as in wb_train_params). */
static const char *const PARAM_KEYS[] = {
    "vocab_size", "n_ctx",        "n_embd", "n_layer", "n_head",       "n_inner",
    "layer_norm_epsilon",         "seed",   "batch_size", "seq_len",   "max_steps",
    "warmup_steps", "lr",         "min_lr", "weight_decay", "beta1",   "beta2",
    "eps",        "grad_clip",    "init_std", NULL};

static int32_t opt_int32(lua_State *L, int idx, const char *key, int32_t def) {
    lua_Integer v = lwb_opt_integer(L, idx, key, def);
    if (v < INT32_MIN || v > INT32_MAX)
        luaL_argerror(L, idx, lua_pushfstring(L, "option '%s' out of range", key));
    return (int32_t)v;
}

static float opt_float(lua_State *L, int idx, const char *key, float def) {
    return (float)lwb_opt_number(L, idx, key, def);
}

static int l_trainer(lua_State *L) {
    lwb_check_options(L, 1, PARAM_KEYS);
    wb_train_params p = wb_train_default_params();
    wb_config *c = &p.config;
    c->vocab_size = opt_int32(L, 1, "vocab_size", c->vocab_size);
    c->n_ctx = opt_int32(L, 1, "n_ctx", c->n_ctx);
    c->n_embd = opt_int32(L, 1, "n_embd", c->n_embd);
    c->n_layer = opt_int32(L, 1, "n_layer", c->n_layer);
    c->n_head = opt_int32(L, 1, "n_head", c->n_head);
    /* n_inner defaults to 4 * n_embd (config.json's null), whatever n_embd was given */
    c->n_inner = opt_int32(L, 1, "n_inner", 0);
    c->layer_norm_epsilon = opt_float(L, 1, "layer_norm_epsilon", c->layer_norm_epsilon);
    p.seed = (uint64_t)lwb_opt_integer(L, 1, "seed", (lua_Integer)p.seed);
    p.batch_size = opt_int32(L, 1, "batch_size", p.batch_size);
    p.seq_len = opt_int32(L, 1, "seq_len", lua_type(L, 1) == LUA_TTABLE ? c->n_ctx : p.seq_len);
    p.max_steps = opt_int32(L, 1, "max_steps", p.max_steps);
    p.warmup_steps = opt_int32(L, 1, "warmup_steps", p.warmup_steps);
    p.lr = opt_float(L, 1, "lr", p.lr);
    p.min_lr = opt_float(L, 1, "min_lr", p.min_lr);
    p.weight_decay = opt_float(L, 1, "weight_decay", p.weight_decay);
    p.beta1 = opt_float(L, 1, "beta1", p.beta1);
    p.beta2 = opt_float(L, 1, "beta2", p.beta2);
    p.eps = opt_float(L, 1, "eps", p.eps);
    p.grad_clip = opt_float(L, 1, "grad_clip", p.grad_clip);
    p.init_std = opt_float(L, 1, "init_std", p.init_std);

    Trainer *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->t = NULL;
    luaL_setmetatable(L, TRAINER);
    wb_err err = {0};
    if (wb_trainer_new(&p, &u->t, &err) != WB_OK) return lwb_raise(L, &err);
    wb_trainer_set_abort(u->t, lwb_abort_fn, NULL);
    return 1;
}

/* Token ids from a table (0-based ids) or a string of little-endian int32 (string.pack("<i4")
 * per id), the compact form for streams of millions of tokens. Ranges are checked by the core,
 * whose message names the stream and the index. */
static const int32_t *check_stream(lua_State *L, int idx, size_t *n) {
    if (lua_type(L, idx) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (len % 4 != 0)
            luaL_argerror(L, idx, "a packed id string must hold a whole number of int32");
        int32_t *ids = lua_newuserdatauv(L, len ? len : 4, 0); /* aligned copy, GC-owned */
        memcpy(ids, s, len);
        *n = len / 4;
        return ids;
    }
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_typeerror(L, idx, "table of token ids or packed int32 string");
    return lwb_check_ids(L, idx, 0, n); /* pushes its buffer */
}

static int t_set_data(lua_State *L) {
    wb_trainer *t = checktrainer(L, 1);
    lua_settop(L, 3); /* the id buffers pushed below must not take the place of a missing val */
    size_t n_train = 0, n_val = 0;
    const int32_t *train = check_stream(L, 2, &n_train);
    const int32_t *val = lua_isnoneornil(L, 3) ? NULL : check_stream(L, 3, &n_val);
    wb_err err = {0};
    if (wb_trainer_set_data(t, train, n_train, val, n_val, &err) != WB_OK)
        return lwb_raise(L, &err);
    lua_settop(L, 1);
    return 1;
}

static int t_step(lua_State *L) {
    wb_trainer *t = checktrainer(L, 1);
    float loss = 0, norm = 0;
    wb_err err = {0};
    if (wb_trainer_step(t, &loss, &norm, &err) != WB_OK) return lwb_raise(L, &err);
    lua_pushnumber(L, loss);
    lua_pushnumber(L, norm);
    return 2;
}

static int t_eval(lua_State *L) {
    wb_trainer *t = checktrainer(L, 1);
    lua_Integer n = luaL_optinteger(L, 2, 8);
    luaL_argcheck(L, n >= 1 && n <= INT32_MAX, 2, "n_batches must be positive");
    float loss = 0;
    wb_err err = {0};
    if (wb_trainer_eval(t, (int)n, &loss, &err) != WB_OK) return lwb_raise(L, &err);
    lua_pushnumber(L, loss);
    return 1;
}

/* Mean loss of predicting ids[2..n+1] from the ids before them (one window, n <= n_ctx): for
 * comparing with a model loaded from save_model. Overwrites the gradient buffer only. */
static int t_loss(lua_State *L) {
    wb_trainer *t = checktrainer(L, 1);
    size_t n;
    int32_t *ids = lwb_check_ids(L, 2, wb_trainer_params(t)->config.vocab_size, &n);
    luaL_argcheck(L, n >= 2, 2, "need at least two token ids");
    if (n - 1 > (size_t)wb_trainer_params(t)->config.n_ctx)
        luaL_argerror(L, 2, lua_pushfstring(L, "%d targets exceed the context of %d", (int)n - 1,
                                            (int)wb_trainer_params(t)->config.n_ctx));
    float loss = 0;
    wb_err err = {0};
    if (wb_trainer_loss_and_grad(t, ids, ids + 1, 1, (int)n - 1, &loss, &err) != WB_OK)
        return lwb_raise(L, &err);
    lua_pushnumber(L, loss);
    return 1;
}

static int t_step_index(lua_State *L) {
    lua_pushinteger(L, wb_trainer_step_index(checktrainer(L, 1)));
    return 1;
}

static int t_lr(lua_State *L) {
    lua_pushnumber(L, wb_trainer_lr(checktrainer(L, 1)));
    return 1;
}

static int t_num_params(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_trainer_num_params(checktrainer(L, 1)));
    return 1;
}

/* The resolved parameters as a table with the same keys wb.trainer accepts. */
static int t_params(lua_State *L) {
    const wb_train_params *p = wb_trainer_params(checktrainer(L, 1));
    const wb_config *c = &p->config;
    lua_createtable(L, 0, 20);
#define SETI(k, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, k))
#define SETF(k, v) (lua_pushnumber(L, (lua_Number)(v)), lua_setfield(L, -2, k))
    SETI("vocab_size", c->vocab_size);
    SETI("n_ctx", c->n_ctx);
    SETI("n_embd", c->n_embd);
    SETI("n_layer", c->n_layer);
    SETI("n_head", c->n_head);
    SETI("n_inner", c->n_inner);
    SETF("layer_norm_epsilon", c->layer_norm_epsilon);
    SETI("seed", p->seed);
    SETI("batch_size", p->batch_size);
    SETI("seq_len", p->seq_len);
    SETI("max_steps", p->max_steps);
    SETI("warmup_steps", p->warmup_steps);
    SETF("lr", p->lr);
    SETF("min_lr", p->min_lr);
    SETF("weight_decay", p->weight_decay);
    SETF("beta1", p->beta1);
    SETF("beta2", p->beta2);
    SETF("eps", p->eps);
    SETF("grad_clip", p->grad_clip);
    SETF("init_std", p->init_std);
#undef SETI
#undef SETF
    return 1;
}

typedef wb_status (*save_fn)(const wb_trainer *, const char *, wb_err *);

static int save_with(lua_State *L, save_fn fn) {
    wb_trainer *t = checktrainer(L, 1);
    const char *path = luaL_checkstring(L, 2);
    wb_err err = {0};
    if (fn(t, path, &err) != WB_OK) return lwb_raise(L, &err);
    return 0;
}

static int t_save_model(lua_State *L) { return save_with(L, wb_trainer_save_model); }
static int t_save_checkpoint(lua_State *L) { return save_with(L, wb_trainer_save_checkpoint); }

static int t_load_checkpoint(lua_State *L) {
    wb_trainer *t = checktrainer(L, 1);
    const char *path = luaL_checkstring(L, 2);
    wb_err err = {0};
    if (wb_trainer_load_checkpoint(t, path, &err) != WB_OK) return lwb_raise(L, &err);
    lua_pushinteger(L, wb_trainer_step_index(t));
    return 1;
}

static int t_gc(lua_State *L) {
    Trainer *u = checktrainerud(L, 1);
    wb_trainer_free(u->t);
    u->t = NULL;
    return 0;
}

static int t_tostring(lua_State *L) {
    Trainer *u = checktrainerud(L, 1);
    if (!u->t) {
        lua_pushliteral(L, "Trainer (closed)");
        return 1;
    }
    const wb_train_params *p = wb_trainer_params(u->t);
    lua_pushfstring(L, "Trainer (%I parameters, step %d of %d, batch %d x %d)",
                    (LUAI_UACINT)wb_trainer_num_params(u->t), wb_trainer_step_index(u->t),
                    p->max_steps, p->batch_size, p->seq_len);
    return 1;
}

static const luaL_Reg trainer_methods[] = {
    {"set_data", t_set_data},
    {"step", t_step},
    {"eval", t_eval},
    {"loss", t_loss},
    {"step_index", t_step_index},
    {"lr", t_lr},
    {"num_params", t_num_params},
    {"params", t_params},
    {"save_model", t_save_model},
    {"save_checkpoint", t_save_checkpoint},
    {"load_checkpoint", t_load_checkpoint},
    {"close", t_gc},
    {NULL, NULL},
};

static const luaL_Reg trainer_meta[] = {
    {"__gc", t_gc},
    {"__close", t_gc},
    {"__tostring", t_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

void lwb_open_train(lua_State *L) {
    luaL_newmetatable(L, TRAINER);
    luaL_setfuncs(L, trainer_meta, 0);
    luaL_newlibtable(L, trainer_methods);
    luaL_setfuncs(L, trainer_methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Trainer");
    lua_pop(L, 1);

    lua_pushcfunction(L, l_trainer);
    lua_setfield(L, -2, "trainer");
}
