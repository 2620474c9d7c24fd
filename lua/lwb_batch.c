/* lwb_batch.c - wb.Batch (model:batch(): requests that join and leave between steps, one forward
 * pass per step) and model:generate_batch (a fixed list of prompts run to the end on one).
 *
 *   local b <close> = model:batch()
 *   local id = b:add("Customer: Hi", {temperature = 0, max_tokens = 32}, {n_ctx = 256})
 *   while b:active() > 0 do
 *     for _, ev in ipairs(b:step()) do   -- {id, text, token, done, result, error}
 *       io.write(ev.text)
 *     end
 *   end
 *
 * The opener adds batch/generate_batch to the wb.Model method table, so it runs after
 * lwb_open_model. */
#include "lwb.h"

#include <string.h>

#include "wb_batch.h"

#define BATCH "wb.Batch"

enum { BATCH_UV_MODEL = 1, BATCH_UV_KEEP = 2, BATCH_NUV = 2 };

typedef struct Batch {
    wb_batch *b;      /* NULL once closed */
    lwb_Model *owner; /* the model (user value 1) */
    int counted;      /* 1 while the batch holds requests and so counts in owner->users */
    int running;      /* inside wb_batch_step: a constraint callback must not re-enter */
    size_t native;    /* cache bytes reported to lwb_native_alloc */
} Batch;

static Batch *check_batch_ud(lua_State *L, int idx) { return luaL_checkudata(L, idx, BATCH); }

/* An open batch of an open model, not inside its own step. */
static Batch *check_batch(lua_State *L, int idx) {
    Batch *B = check_batch_ud(L, idx);
    if (!B->b) luaL_error(L, "attempt to use a closed Batch");
    if (B->running)
        luaL_error(L, "cannot use a Batch from inside its own step (a constraint callback "
                   "re-entered it)");
    if (!B->owner->m) luaL_error(L, "attempt to use a Batch whose Model was closed");
    return B;
}

/* Count the batch as a model user exactly while it holds requests, and report its cache bytes
 * (L NULL: only frees are possible). */
static void sync_users_L(lua_State *L, Batch *B) {
    size_t now = B->b ? wb_batch_cache_bytes(B->b) : 0;
    if (now > B->native && L) lwb_native_alloc(L, now - B->native);
    else if (now < B->native) lwb_native_free(B->native - now);
    if (L || now < B->native) B->native = now;
    int want = B->b && wb_batch_size(B->b) > 0;
    if (want != B->counted) B->owner->users += want ? 1 : -1;
    B->counted = want;
}

static int batch_close(lua_State *L) {
    Batch *B = check_batch_ud(L, 1);
    if (B->running)
        return luaL_error(L, "cannot close a Batch from inside its own step (a constraint "
                          "callback re-entered it)");
    wb_batch_free(B->b);
    B->b = NULL;
    sync_users_L(L, B);
    return 0;
}

wb_batch *lwb_push_batch(lua_State *L, int model_idx) {
    model_idx = lua_absindex(L, model_idx);
    lwb_check_model(L, model_idx);
    Batch *B = lua_newuserdatauv(L, sizeof *B, BATCH_NUV);
    memset(B, 0, sizeof *B);
    luaL_setmetatable(L, BATCH);
    lua_pushvalue(L, model_idx);
    lua_setiuservalue(L, -2, BATCH_UV_MODEL);
    lua_newtable(L); /* request id -> the values its generator borrows (its Constraint) */
    lua_setiuservalue(L, -2, BATCH_UV_KEEP);
    B->owner = lwb_check_model_ud(L, model_idx);
    wb_err err = {0};
    if (wb_batch_new(B->owner->m, &B->b, &err) != WB_OK) lwb_raise(L, &err);
    return B->b;
}

int lwb_batch_adopt(lua_State *L, int batch_idx, wb_gen *g, int keep_idx) {
    batch_idx = lua_absindex(L, batch_idx);
    if (keep_idx) keep_idx = lua_absindex(L, keep_idx);
    Batch *B = check_batch_ud(L, batch_idx);
    if (!B->b) {
        wb_gen_free(g);
        luaL_error(L, "attempt to use a closed Batch");
    }
    int id = 0;
    wb_err err = {0};
    wb_status st = wb_batch_add(B->b, g, &id, &err); /* owns g now */
    sync_users_L(L, B);
    if (st != WB_OK) lwb_raise(L, &err);
    if (keep_idx && !lua_isnil(L, keep_idx)) {
        lua_getiuservalue(L, batch_idx, BATCH_UV_KEEP);
        lua_pushvalue(L, keep_idx);
        lua_rawseti(L, -2, id);
        lua_pop(L, 1);
    }
    return id;
}

static void forget(lua_State *L, int batch_idx, Batch *B, int id) {
    wb_err err = {0};
    wb_batch_remove(B->b, id, &err);
    sync_users_L(L, B);
    lua_getiuservalue(L, batch_idx, BATCH_UV_KEEP);
    lua_pushnil(L);
    lua_rawseti(L, -2, id);
    lua_pop(L, 1);
}

void lwb_batch_clear(lua_State *L, int batch_idx) {
    batch_idx = lua_absindex(L, batch_idx);
    Batch *B = check_batch_ud(L, batch_idx);
    if (!B->b) return;
    wb_batch_free(B->b);
    B->b = NULL;
    sync_users_L(L, B);
    wb_err err = {0};
    if (wb_batch_new(B->owner->m, &B->b, &err) != WB_OK) lwb_raise(L, &err);
    lua_newtable(L);
    lua_setiuservalue(L, batch_idx, BATCH_UV_KEEP);
}

/* One step with the re-entry guard up; constraint callbacks call back into L. */
static wb_status step(Batch *B, const wb_batch_event **ev, int *n, int *n_eval,
                      wb_err *err) {
    B->running = 1;
    wb_status st = wb_batch_step(B->b, ev, n, n_eval, err);
    B->running = 0;
    sync_users_L(NULL, B); /* finished requests released their caches */
    return st;
}

/* Every request's Lua-function constraint must call back into this thread. */
static void point_constraints_at(lua_State *L, int batch_idx) {
    lua_getiuservalue(L, batch_idx, BATCH_UV_KEEP);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lwb_Constraint *lc = lwb_test_constraint(L, -1);
        if (lc) lc->L = L;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

void lwb_batch_run(lua_State *L, int batch_idx) {
    batch_idx = lua_absindex(L, batch_idx);
    Batch *B = check_batch(L, batch_idx);
    point_constraints_at(L, batch_idx);
    while (wb_batch_active(B->b) > 0) {
        const wb_batch_event *ev;
        int n;
        wb_err err = {0};
        if (step(B, &ev, &n, NULL, &err) != WB_OK) lwb_raise(L, &err);
        for (int k = 0; k < n; k++)
            if (ev[k].status != WB_OK) {
                err = ev[k].err;
                lwb_batch_clear(L, batch_idx);
                lwb_raise(L, &err);
            }
    }
}

/* ---- methods ------------------------------------------------------------------------------ */

/* b:add(prompt, params, opts) -> id. prompt: a string or a table of token ids. */
static int batch_add(lua_State *L) {
    lua_settop(L, 4);
    Batch *B = check_batch(L, 1);
    lua_getiuservalue(L, 1, BATCH_UV_MODEL); /* 5: the model */
    wb_model *m = lwb_check_model(L, 5);
    int32_t V = wb_model_config(m)->vocab_size;
    wb_sampling_params sp;
    wb_gen_params gp;
    lwb_request_extra ex;
    lwb_Constraint *lc;
    lwb_check_request(L, 3, 4, V, &sp, &gp, &ex, &lc); /* 6: arrays, 7: constraint or nil */
    if (ex.n > 1)
        luaL_argerror(L, 3, "n > 1 completions: add the prompt n times with seeds of your "
                      "choice, or use model:generate");
    wb_gen *g = NULL;
    wb_err err = {0};
    wb_status st;
    if (lua_type(L, 2) == LUA_TTABLE) {
        size_t n;
        const int32_t *ids = lwb_check_ids(L, 2, V, &n);
        st = wb_gen_new_ids(m, ids, n, &sp, &gp, &g, &err);
    } else {
        size_t len;
        const char *prompt = luaL_checklstring(L, 2, &len);
        st = wb_gen_new(m, prompt, len, &sp, &gp, &g, &err);
    }
    if (st != WB_OK) lwb_raise(L, &err);
    (void)B;
    lua_pushinteger(L, lwb_batch_adopt(L, 1, g, 7));
    return 1;
}

/* b:step() -> list of events, one per request that was running:
 *   {id, text (released this step), token (the id sampled, or nil), done,
 *    result (the request's result table, once done), error (message, when it failed)}
 * Finished requests leave the batch (their caches are freed) after their last event. */
static int batch_step(lua_State *L) {
    lua_settop(L, 1);
    Batch *B = check_batch(L, 1);
    point_constraints_at(L, 1);
    const wb_batch_event *ev;
    int n;
    wb_err err = {0};
    if (step(B, &ev, &n, NULL, &err) != WB_OK) return lwb_raise(L, &err);
    lua_createtable(L, n, 0);
    for (int k = 0; k < n; k++) {
        lua_createtable(L, 0, 6);
        lua_pushinteger(L, ev[k].id);
        lua_setfield(L, -2, "id");
        lua_pushlstring(L, ev[k].piece, ev[k].len);
        lua_setfield(L, -2, "text");
        if (ev[k].token >= 0) {
            lua_pushinteger(L, ev[k].token);
            lua_setfield(L, -2, "token");
        }
        lua_pushboolean(L, ev[k].done);
        lua_setfield(L, -2, "done");
        if (ev[k].status != WB_OK) {
            lua_pushstring(L, ev[k].err.msg[0] ? ev[k].err.msg : wb_status_name(ev[k].status));
            lua_setfield(L, -2, "error");
        }
        if (ev[k].done) {
            lwb_push_gen_result(L, wb_gen_result_get(wb_batch_gen(B->b, ev[k].id)));
            lua_setfield(L, -2, "result");
        }
        lua_rawseti(L, -2, k + 1);
    }
    /* the events' pieces are copied: now the finished requests can go */
    for (int k = 0; k < n; k++)
        if (ev[k].done) forget(L, 1, B, ev[k].id);
    return 1;
}

/* b:cancel(id) -> the request's result (stop_reason "cancelled" unless it had ended); its cache
 * is freed at once and the id is no longer in the batch. */
static int batch_cancel(lua_State *L) {
    Batch *B = check_batch(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    wb_gen *g = id > 0 && id <= INT32_MAX ? wb_batch_gen(B->b, (int)id) : NULL;
    if (!g)
        return luaL_argerror(L, 2, lua_pushfstring(L, "no request with id %I in this batch",
                                                   (LUAI_UACINT)id));
    wb_err err = {0};
    wb_gen_cancel(g, &err);
    lwb_push_gen_result(L, wb_gen_result_get(g));
    forget(L, 1, B, (int)id);
    return 1;
}

/* b:active() -> requests still running */
static int batch_active(lua_State *L) {
    Batch *B = check_batch_ud(L, 1);
    lua_pushinteger(L, B->b ? wb_batch_active(B->b) : 0);
    return 1;
}

static int batch_tostring(lua_State *L) {
    Batch *B = check_batch_ud(L, 1);
    if (!B->b) lua_pushliteral(L, "Batch (closed)");
    else lua_pushfstring(L, "Batch (%d running)", wb_batch_active(B->b));
    return 1;
}

/* model:batch() -> an empty wb.Batch */
static int l_batch(lua_State *L) {
    lua_settop(L, 1);
    lwb_push_batch(L, 1);
    return 1;
}

/* ---- generate_batch ----------------------------------------------------------------------- */

/* The i-th entry of a value that is either one table for every prompt or a list of tables, one
 * per prompt (detected by its first entry being a table). Pushes it (or nil). */
static void push_row(lua_State *L, int idx, lua_Integer i) {
    if (lua_type(L, idx) == LUA_TTABLE && lua_rawgeti(L, idx, 1) == LUA_TTABLE) {
        lua_pop(L, 1);
        lua_rawgeti(L, idx, i);
        return;
    }
    if (lua_type(L, idx) == LUA_TTABLE) lua_pop(L, 1);
    lua_pushvalue(L, idx);
}

/* model:generate_batch(prompts, params, opts) -> {results = {...}, batch_size, steps, ...}
 * prompts: a list of strings or of id tables; params and opts: one table for all, or a list with
 * one table per prompt. opts.separate_prefill: prefill each prompt in its own pass. Every
 * request is exactly what model:generate would give it alone (stop strings, constraints,
 * penalties, seeds, eos ids), while the decode steps share one forward pass. */
static int l_generate_batch(lua_State *L) {
    lua_settop(L, 4);
    lwb_check_model(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int separate = 0;
    if (lua_type(L, 4) == LUA_TTABLE && lua_rawgeti(L, 4, 1) != LUA_TTABLE) {
        lua_pop(L, 1);
        /* one options table: take out the batch's own key, pass the rest to every request */
        separate = lwb_opt_bool(L, 4, "separate_prefill", 0);
        lua_newtable(L);
        lua_pushnil(L);
        while (lua_next(L, 4)) {
            if (lua_type(L, -2) == LUA_TSTRING &&
                strcmp(lua_tostring(L, -2), "separate_prefill") == 0) {
                lua_pop(L, 1);
                continue;
            }
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_rawset(L, -4);
        }
        lua_replace(L, 4);
    } else if (lua_type(L, 4) == LUA_TTABLE) {
        lua_pop(L, 1);
    }
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 1 && n <= 65536, 2, "need between 1 and 65536 prompts");
    wb_batch *core = lwb_push_batch(L, 1); /* 5 */
    wb_batch_set_separate_prefill(core, separate);
    const int32_t V = wb_model_config(lwb_check_model(L, 1))->vocab_size;
    wb_model *m = lwb_check_model(L, 1);
    lua_createtable(L, (int)n, 0); /* 6: ids in prompt order */
    for (lua_Integer i = 1; i <= n; i++) {
        int top = lua_gettop(L);
        int t = lua_geti(L, 2, i); /* top+1 */
        if (t != LUA_TSTRING && t != LUA_TTABLE)
            return luaL_argerror(L, 2, lua_pushfstring(L, "prompt %I must be a string or a table "
                                                       "of token ids, got %s", (LUAI_UACINT)i,
                                                       luaL_typename(L, -1)));
        push_row(L, 3, i); /* top+2 */
        push_row(L, 4, i); /* top+3 */
        wb_sampling_params sp;
        wb_gen_params gp;
        lwb_request_extra ex;
        lwb_Constraint *lc;
        lwb_check_request(L, top + 2, top + 3, V, &sp, &gp, &ex, &lc); /* top+4, top+5 */
        if (ex.n > 1) luaL_argerror(L, 3, "n > 1 completions are not available in generate_batch");
        wb_gen *g = NULL;
        wb_err err = {0};
        wb_status st;
        if (t == LUA_TTABLE) {
            size_t k;
            const int32_t *ids = lwb_check_ids(L, top + 1, V, &k);
            st = wb_gen_new_ids(m, ids, k, &sp, &gp, &g, &err);
        } else {
            size_t len;
            const char *s = lua_tolstring(L, top + 1, &len);
            st = wb_gen_new(m, s, len, &sp, &gp, &g, &err);
        }
        if (st != WB_OK)
            return luaL_error(L, "prompt %d: %s", (int)i, err.msg[0] ? err.msg : "error");
        lua_pushinteger(L, lwb_batch_adopt(L, 5, g, top + 5));
        lua_rawseti(L, 6, i);
        lua_settop(L, top);
    }
    const double t0 = wb_clock_ms();
    double t_first = 0;
    int steps = -1;
    {
        Batch *B = check_batch(L, 5);
        point_constraints_at(L, 5);
        while (wb_batch_active(core) > 0) {
            const wb_batch_event *ev;
            int k, n_eval;
            wb_err err = {0};
            if (step(B, &ev, &k, &n_eval, &err) != WB_OK) return lwb_raise(L, &err);
            if (steps < 0) t_first = wb_clock_ms();
            if (n_eval > 0) steps++;
            for (int e = 0; e < k; e++)
                if (ev[e].status != WB_OK) {
                    err = ev[e].err;
                    lwb_batch_clear(L, 5);
                    return lwb_raise(L, &err);
                }
        }
    }
    const double t_end = wb_clock_ms();
    lua_createtable(L, 0, 10);
    lua_createtable(L, (int)n, 0);
    lua_Integer total = 0, first = 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 6, i);
        int id = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
        const wb_gen_result *r = wb_gen_result_get(wb_batch_gen(core, id));
        total += (lua_Integer)r->n_tokens;
        first += r->n_tokens > 0;
        lwb_push_gen_result(L, r);
        lua_rawseti(L, -2, i);
    }
    lua_setfield(L, -2, "results");
    lua_pushinteger(L, n);
    lua_setfield(L, -2, "batch_size");
    lua_pushinteger(L, steps < 0 ? 0 : steps);
    lua_setfield(L, -2, "steps");
    lua_pushinteger(L, total);
    lua_setfield(L, -2, "output_tokens");
    double prefill = t_first - t0, decode = t_end - t_first, elapsed = t_end - t0;
    lua_pushnumber(L, prefill);
    lua_setfield(L, -2, "prefill_ms");
    lua_pushnumber(L, decode);
    lua_setfield(L, -2, "decode_ms");
    lua_pushnumber(L, elapsed);
    lua_setfield(L, -2, "elapsed_ms");
    lua_pushnumber(L, elapsed > 0 ? 1000.0 * (double)total / elapsed : 0);
    lua_setfield(L, -2, "output_tokens_per_s");
    lua_pushnumber(L, decode > 0 ? 1000.0 * (double)(total - first) / decode : 0);
    lua_setfield(L, -2, "decode_tokens_per_s");
    lwb_batch_clear(L, 5); /* now, not at the next collection: the caches are B x n_ctx rows */
    return 1;
}

static const luaL_Reg batch_methods[] = {
    {"add", batch_add},     {"step", batch_step},   {"cancel", batch_cancel},
    {"active", batch_active}, {"close", batch_close}, {NULL, NULL},
};

static const luaL_Reg batch_meta[] = {
    {"__gc", batch_close},
    {"__close", batch_close},
    {"__tostring", batch_tostring},
    {NULL, NULL},
};

void lwb_open_batch(lua_State *L) {
    luaL_newmetatable(L, BATCH);
    luaL_setfuncs(L, batch_meta, 0);
    luaL_newlib(L, batch_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "Model") == LUA_TTABLE) {
        lua_pushcfunction(L, l_batch);
        lua_setfield(L, -2, "batch");
        lua_pushcfunction(L, l_generate_batch);
        lua_setfield(L, -2, "generate_batch");
    }
    lua_pop(L, 1);
}
