/* lwb_sampling.c - wb.sampling (apply, check, draw, defaults, keys), the one reader of
 * generation requests (lwb_check_request), model:generate, model:stream, model:chat and
 * model:stream_chat.
 *
 * The opener adds generate/stream to the wb.Model method table, so it must run after
 * lwb_open_model. */
#include "lwb.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "wb_batch.h"
#include "wb_chat.h"
#include "wb_generate.h"
#include "wb_sampler.h"

#define STREAM "wb.Stream"

/* What the request asks for (a hosted API's request parameters) ... */
const char *const lwb_sampling_keys[] = {
    "temperature", "top_k", "top_p", "min_p", "typical_p", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "logit_bias", "stop", "stop_token_ids",
    "max_tokens", "min_tokens", "seed", "mask_stage", "n", "logprobs", "top_logprobs", NULL};

/* ... and how the engine runs it. */
const char *const lwb_generation_option_keys[] = {
    "cache", "holdback", "n_ctx", "ignore_eos", "chunk_size", "cancel_after", "constraint", NULL};

static int in_list(const char *const *list, const char *key) {
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return 1;
    return 0;
}

/* Reject unknown keys in params (index p) and opts (index o); a key in the wrong one of the two
 * tables says where it belongs. */
static void check_request_keys(lua_State *L, int p, int o) {
    for (int which = 0; which < 2; which++) {
        int idx = which ? o : p;
        const char *const *own = which ? lwb_generation_option_keys : lwb_sampling_keys;
        const char *const *other = which ? lwb_sampling_keys : lwb_generation_option_keys;
        if (lua_isnoneornil(L, idx)) continue;
        luaL_checktype(L, idx, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_argerror(L, idx, lua_pushfstring(L, "option keys must be strings, got %s",
                                                      luaL_typename(L, -1)));
            const char *key = lua_tostring(L, -1);
            if (in_list(own, key)) continue;
            if (in_list(other, key))
                luaL_argerror(L, idx, lua_pushfstring(L, which
                    ? "'%s' is a sampling parameter: it belongs in the params table "
                      "(generate(prompt, params, opts)), not in the options"
                    : "'%s' is a generation option: it belongs in the options table "
                      "(generate(prompt, params, opts)), not in the sampling parameters", key));
            luaL_argerror(L, idx, lua_pushfstring(L, "unknown option '%s'", key));
        }
    }
}

/* ---- parameters ------------------------------------------------------------------------------ */

static int32_t opt_id(lua_State *L, int idx, const char *what, int arg) {
    int isint;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint || v < 0 || v > INT32_MAX)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must hold non-negative integer token ids, "
                                              "got %s", what, luaL_typename(L, idx)));
    return (int32_t)v;
}

/* An integer count option in [lo, INT32_MAX]: too large is said as such, naming the limit. */
static int32_t opt_count(lua_State *L, int idx, const char *key, lua_Integer def, lua_Integer lo,
                         const char *lo_words) {
    lua_Integer v = lwb_opt_integer(L, idx, key, def);
    if (v > INT32_MAX)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s = %I is too large (the limit is %d)", key,
                                              (LUAI_UACINT)v, (int)INT32_MAX));
    if (v < lo)
        luaL_argerror(L, idx, lua_pushfstring(L, "%s = %I must be %s", key, (LUAI_UACINT)v,
                                              lo_words));
    return (int32_t)v;
}

/* Read the params table at idx into *sp. Arrays live in one userdata pushed on the stack (so an
 * error cannot leak them); stop strings point into the table, which the caller keeps on the stack.
 * vocab > 0 range-checks ids. Errors name the key: "bad argument #2 to 'generate' (top_p = 1.5 is
 * outside (0, 1])". */
static void check_params(lua_State *L, int idx, int32_t vocab, wb_sampling_params *sp,
                         lwb_request_extra *ex) {
    idx = lua_absindex(L, idx);
    *sp = wb_sampling_default_params();
    if (ex) *ex = (lwb_request_extra){1, 0, 0};
    if (!ex) lwb_check_options(L, idx, lwb_sampling_keys);
    int has = lua_type(L, idx) == LUA_TTABLE;

    /* Sizes first, so one block holds everything. */
    lua_Integer n_bias = 0, n_stop = 0, n_ids = 0;
    if (has) {
        int t = lua_getfield(L, idx, "logit_bias");
        if (t == LUA_TTABLE) {
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pop(L, 1);
                n_bias++;
            }
        } else if (t != LUA_TNIL)
            luaL_argerror(L, idx, lua_pushfstring(L, "option 'logit_bias' must be a table "
                                                  "{[token_id] = bias}, got %s",
                                                  luaL_typename(L, -1)));
        lua_pop(L, 1);
        t = lua_getfield(L, idx, "stop");
        if (t == LUA_TSTRING) n_stop = 1;
        else if (t == LUA_TTABLE) n_stop = luaL_len(L, -1);
        else if (t != LUA_TNIL)
            luaL_argerror(L, idx, lua_pushfstring(L, "option 'stop' must be a string or a list "
                                                  "of strings, got %s", luaL_typename(L, -1)));
        lua_pop(L, 1);
        t = lua_getfield(L, idx, "stop_token_ids");
        if (t == LUA_TTABLE) n_ids = luaL_len(L, -1);
        else if (t != LUA_TNIL)
            luaL_argerror(L, idx, lua_pushfstring(L, "option 'stop_token_ids' must be a list of "
                                                  "token ids, got %s", luaL_typename(L, -1)));
        lua_pop(L, 1);
        if (n_bias > 1 << 24 || n_stop > 1 << 16 || n_ids > 1 << 24 || n_stop < 0 || n_ids < 0)
            luaL_argerror(L, idx, "too many logit_bias, stop or stop_token_ids entries");
    }
    size_t bytes = (size_t)n_stop * sizeof(const char *) + (size_t)n_bias * sizeof(wb_logit_bias) +
                   (size_t)n_ids * sizeof(int32_t);
    char *block = lua_newuserdatauv(L, bytes ? bytes : 1, 0);
    const char **stops = (const char **)block;
    wb_logit_bias *bias = (wb_logit_bias *)(block + (size_t)n_stop * sizeof(const char *));
    int32_t *ids = (int32_t *)((char *)bias + (size_t)n_bias * sizeof(wb_logit_bias));
    if (!has) return;

    if (ex) {
        ex->n = opt_count(L, idx, "n", 1, 1, ">= 1 (completions of the prompt)");
        if (ex->n > 128)
            luaL_argerror(L, idx, lua_pushfstring(L, "n = %d is too large (the limit is 128 "
                                                  "completions)", ex->n));
        ex->logprobs = lwb_opt_bool(L, idx, "logprobs", 0);
        ex->top_logprobs = opt_count(L, idx, "top_logprobs", 0, 0, ">= 0");
        if (ex->top_logprobs > WB_MAX_TOP_LOGPROBS)
            luaL_argerror(L, idx, lua_pushfstring(L, "top_logprobs = %d is too large (the limit "
                                                  "is %d)", ex->top_logprobs,
                                                  WB_MAX_TOP_LOGPROBS));
        if (ex->top_logprobs > 0) ex->logprobs = 1;
    }
    sp->typical_p = (float)lwb_opt_number(L, idx, "typical_p", sp->typical_p);
    sp->temperature = (float)lwb_opt_number(L, idx, "temperature", sp->temperature);
    sp->top_p = (float)lwb_opt_number(L, idx, "top_p", sp->top_p);
    sp->min_p = (float)lwb_opt_number(L, idx, "min_p", sp->min_p);
    sp->frequency_penalty = (float)lwb_opt_number(L, idx, "frequency_penalty", 0);
    sp->presence_penalty = (float)lwb_opt_number(L, idx, "presence_penalty", 0);
    sp->repetition_penalty = (float)lwb_opt_number(L, idx, "repetition_penalty", 1);
    lua_Integer k = lwb_opt_integer(L, idx, "top_k", 0);
    if (k < 0 || k > INT32_MAX)
        luaL_argerror(L, idx, lua_pushfstring(L, "top_k = %I must be >= 0 (0 turns it off)",
                                              (LUAI_UACINT)k));
    sp->top_k = (int32_t)k;
    sp->max_tokens = opt_count(L, idx, "max_tokens", sp->max_tokens, 1, ">= 1");
    sp->min_tokens = opt_count(L, idx, "min_tokens", 0, 0, ">= 0 (0 turns it off)");
    lua_getfield(L, idx, "seed");
    if (!lua_isnil(L, -1)) {
        int isint;
        lua_Integer s = lua_tointegerx(L, -1, &isint);
        if (!isint || lua_type(L, -1) != LUA_TNUMBER)
            luaL_argerror(L, idx, lua_pushfstring(L, "option 'seed' must be an integer, got %s",
                                                  luaL_typename(L, -1)));
        sp->seed = (uint64_t)s; /* negative seeds wrap; results report it back the same way */
        sp->has_seed = 1;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "mask_stage") != LUA_TNIL) {
        static const char *const names[] = {"logits", "after_filters", "after_filters_uniform"};
        const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        int k = -1;
        for (int i = 0; i < 3; i++)
            if (strcmp(v, names[i]) == 0) k = i;
        if (k < 0)
            luaL_argerror(L, idx, "option 'mask_stage' must be \"logits\", \"after_filters\" or "
                          "\"after_filters_uniform\"");
        sp->mask_stage = (wb_mask_stage)k;
    }
    lua_pop(L, 1);

    if (n_bias) {
        lua_getfield(L, idx, "logit_bias");
        int i = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            bias[i].id = opt_id(L, -2, "option 'logit_bias'", idx);
            if (lua_type(L, -1) != LUA_TNUMBER)
                luaL_argerror(L, idx, lua_pushfstring(L, "option 'logit_bias' values must be "
                                                      "numbers (-math.huge bans), got %s",
                                                      luaL_typename(L, -1)));
            bias[i].bias = (float)lua_tonumber(L, -1);
            i++;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        sp->logit_bias = bias;
        sp->n_logit_bias = (int)n_bias;
    }
    if (n_stop) {
        lua_getfield(L, idx, "stop");
        if (lua_type(L, -1) == LUA_TSTRING) stops[0] = lua_tostring(L, -1);
        else
            for (lua_Integer i = 1; i <= n_stop; i++) {
                if (lua_geti(L, -1, i) != LUA_TSTRING)
                    luaL_argerror(L, idx, lua_pushfstring(L, "option 'stop' entry %I must be a "
                                                          "string, got %s", (LUAI_UACINT)i,
                                                          luaL_typename(L, -1)));
                stops[i - 1] = lua_tostring(L, -1);
                lua_pop(L, 1); /* still referenced by the stop table inside params */
            }
        lua_pop(L, 1);
        sp->stop = stops;
        sp->n_stop = (int)n_stop;
    }
    if (n_ids) {
        lua_getfield(L, idx, "stop_token_ids");
        for (lua_Integer i = 1; i <= n_ids; i++) {
            lua_geti(L, -1, i);
            ids[i - 1] = opt_id(L, -1, "option 'stop_token_ids'", idx);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        sp->stop_token_ids = ids;
        sp->n_stop_token_ids = (int)n_ids;
    }
    wb_err err = {0};
    if (wb_sampling_params_check(sp, vocab, &err) != WB_OK) luaL_argerror(L, idx, err.msg);
}

/* wb.sampling.check(params) -> true */
static int l_check(lua_State *L) {
    lua_settop(L, 1);
    wb_sampling_params sp;
    check_params(L, 1, 0, &sp, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

/* wb.sampling.apply(logits, params, generated, allowed) -> Vec of the probabilities the sampler
 * draws from. The same code path generation uses. allowed: an optional list of token ids (the
 * constraint mask), applied where params.mask_stage says. */
static int l_apply(lua_State *L) {
    lua_settop(L, 4);
    size_t V;
    const float *logits = lwb_check_vec(L, 1, &V);
    if (V < 1 || V > INT32_MAX) luaL_argerror(L, 1, "logits must have between 1 and 2^31-1 entries");
    wb_sampling_params sp;
    check_params(L, 2, (int32_t)V, &sp, NULL);
    size_t n_gen = 0;
    const int32_t *gen = NULL;
    if (!lua_isnoneornil(L, 3)) gen = lwb_check_ids(L, 3, (int32_t)V, &n_gen);
    uint32_t *mask = NULL;
    if (!lua_isnoneornil(L, 4)) {
        size_t n_allowed;
        const int32_t *al = lwb_check_ids(L, 4, (int32_t)V, &n_allowed);
        size_t words = (V + 31) / 32;
        mask = lua_newuserdatauv(L, words * sizeof *mask, 0);
        memset(mask, 0, words * sizeof *mask);
        for (size_t i = 0; i < n_allowed; i++) mask[al[i] >> 5] |= 1u << (al[i] & 31);
    }
    float *out = lwb_push_vec(L, V);
    wb_err err = {0};
    if (!mask) {
        if (wb_sampling_apply(logits, (int32_t)V, &sp, gen, n_gen, out, &err) != WB_OK)
            return lwb_raise(L, &err);
        return 1;
    }
    sp.has_seed = 1; /* the distribution does not depend on the seed */
    wb_sampler *smp = NULL;
    if (wb_sampler_new(&sp, (int32_t)V, &smp, &err) != WB_OK) return lwb_raise(L, &err);
    wb_status st = wb_sampler_apply(smp, logits, gen, n_gen, mask, out, &err);
    wb_sampler_free(smp);
    if (st != WB_OK) return lwb_raise(L, &err);
    return 1;
}

/* wb.sampling.draw(probs, seed [, n]) -> {ids} : n draws (default 1) from a probability Vec with
 * a PCG32 seeded by `seed`, the same draw generation makes. */
static int l_draw(lua_State *L) {
    size_t V;
    const float *p = lwb_check_vec(L, 1, &V);
    lua_Integer seed = luaL_checkinteger(L, 2);
    lua_Integer n = luaL_optinteger(L, 3, 1);
    luaL_argcheck(L, n >= 0 && n <= (1 << 24), 3, "count must be in [0, 2^24]");
    luaL_argcheck(L, V >= 1 && V <= INT32_MAX, 1, "empty Vec");
    wb_rng rng;
    wb_rng_seed(&rng, (uint64_t)seed);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        int32_t id = wb_sampling_draw(p, (int32_t)V, &rng);
        if (id < 0) return luaL_argerror(L, 1, "every probability is zero");
        lua_pushinteger(L, id);
        lua_rawseti(L, -2, i);
    }
    return 1;
}

/* wb.sampling.defaults() -> table of the default parameters */
static int l_defaults(lua_State *L) {
    wb_sampling_params d = wb_sampling_default_params();
    lua_createtable(L, 0, 8);
    lua_pushnumber(L, d.temperature);
    lua_setfield(L, -2, "temperature");
    lua_pushinteger(L, d.top_k);
    lua_setfield(L, -2, "top_k");
    lua_pushnumber(L, d.top_p);
    lua_setfield(L, -2, "top_p");
    lua_pushnumber(L, d.min_p);
    lua_setfield(L, -2, "min_p");
    lua_pushnumber(L, d.typical_p);
    lua_setfield(L, -2, "typical_p");
    lua_pushinteger(L, d.min_tokens);
    lua_setfield(L, -2, "min_tokens");
    lua_pushnumber(L, d.frequency_penalty);
    lua_setfield(L, -2, "frequency_penalty");
    lua_pushnumber(L, d.presence_penalty);
    lua_setfield(L, -2, "presence_penalty");
    lua_pushnumber(L, d.repetition_penalty);
    lua_setfield(L, -2, "repetition_penalty");
    lua_pushinteger(L, d.max_tokens);
    lua_setfield(L, -2, "max_tokens");
    return 1;
}

/* ---- generation ------------------------------------------------------------------------------ */

static void push_logprob_fields(lua_State *L, const wb_token_logprob *e) {
    lua_pushinteger(L, e->id);
    lua_setfield(L, -2, "id");
    if (e->logprob > -INFINITY) { /* absent: the filters removed it (JSON has no -inf) */
        lua_pushnumber(L, e->logprob);
        lua_setfield(L, -2, "logprob");
    }
    lua_pushnumber(L, e->raw_logprob);
    lua_setfield(L, -2, "raw_logprob");
}

void lwb_push_gen_result(lua_State *L, const wb_gen_result *r) {
    lua_createtable(L, 0, 14);
    lua_pushlstring(L, r->text, r->text_len);
    lua_setfield(L, -2, "text");
    lwb_push_ids(L, r->token_ids, r->n_tokens);
    lua_setfield(L, -2, "token_ids");
    lua_pushstring(L, wb_stop_reason_name(r->stop_reason));
    lua_setfield(L, -2, "stop_reason");
    lua_pushinteger(L, r->prompt_tokens);
    lua_setfield(L, -2, "prompt_tokens");
    lua_pushinteger(L, r->prompt_tokens_dropped);
    lua_setfield(L, -2, "prompt_tokens_dropped");
    lua_pushnumber(L, r->prefill_ms);
    lua_setfield(L, -2, "prefill_ms");
    lua_pushnumber(L, r->decode_ms_per_token);
    lua_setfield(L, -2, "decode_ms_per_token");
    lua_pushnumber(L, r->ttft_ms);
    lua_setfield(L, -2, "ttft_ms");
    lua_createtable(L, (int)r->n_itl, 0);
    for (size_t i = 0; i < r->n_itl; i++) {
        lua_pushnumber(L, r->itl_ms[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "itl_ms");
    lua_pushnumber(L, r->e2e_ms);
    lua_setfield(L, -2, "e2e_ms");
    lua_pushinteger(L, (lua_Integer)r->seed);
    lua_setfield(L, -2, "seed");
    lua_pushnumber(L, r->tokenization_ms);
    lua_setfield(L, -2, "tokenization_ms");
    lua_pushboolean(L, r->use_cache);
    lua_setfield(L, -2, "use_cache");
    lua_pushinteger(L, r->chunk_size);
    lua_setfield(L, -2, "chunk_size");
    lua_pushinteger(L, r->cache_tokens_before_release);
    lua_setfield(L, -2, "cache_tokens_before_release");
    lua_pushboolean(L, r->cache_released);
    lua_setfield(L, -2, "cache_released");
    lua_pushnumber(L, r->last_token_ms);
    lua_setfield(L, -2, "last_token_ms");
    if (r->stop_index >= 0) {
        lua_pushinteger(L, r->stop_index + 1);
        lua_setfield(L, -2, "stop_index");
    }
    if (r->n_masked > 0) {
        lua_createtable(L, (int)r->n_masked, 0);
        for (size_t i = 0; i < r->n_masked; i++) {
            lua_pushnumber(L, r->allowed_mass[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "constraint_mass");
        lua_pushnumber(L, r->constraint_logprob);
        lua_setfield(L, -2, "constraint_logprob");
        lua_pushinteger(L, r->constraint_overruled);
        lua_setfield(L, -2, "constraint_overruled");
    }
    if (r->logprobs) {
        /* logprobs[i] = {id, logprob, raw_logprob, top = {{id, logprob, raw_logprob}, ...}} */
        lua_createtable(L, (int)r->n_tokens, 0);
        for (size_t i = 0; i < r->n_tokens; i++) {
            const wb_token_logprob *e = &r->logprobs[i];
            lua_createtable(L, 0, 4);
            push_logprob_fields(L, e);
            if (r->n_top_logprobs > 0) {
                const wb_token_logprob *t = r->top_logprobs + i * (size_t)r->n_top_logprobs;
                lua_createtable(L, r->n_top_logprobs, 0);
                lua_Integer k = 0;
                for (int j = 0; j < r->n_top_logprobs; j++) {
                    if (t[j].id < 0) break;
                    lua_createtable(L, 0, 3);
                    push_logprob_fields(L, &t[j]);
                    lua_rawseti(L, -2, ++k);
                }
                lua_setfield(L, -2, "top");
            }
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        lua_setfield(L, -2, "logprobs");
    }
}

/* The generator lives in a userdata while it runs so an error in between cannot leak it. While it
 * is alive it counts as a user of its Model (model:close() is refused), and while a step runs
 * (`running`) a constraint callback that calls or closes the same stream gets an error instead of
 * re-entering the generator. */
typedef struct Stream {
    wb_gen *g;          /* NULL once finished or closed */
    int done;           /* the iterator has returned nil */
    int running;        /* inside wb_gen_next / wb_gen_run */
    lwb_Model *owner;   /* counted in owner->users while g is alive */
    lwb_Constraint *lc; /* the request's constraint (user value 3), or NULL */
    size_t native;      /* cache bytes reported to lwb_native_alloc */
} Stream;

/* user value 4: the {params_used, params_source} report of the call that made the stream (set by
 * lwb_stream_set_params from lwb_chat.c's wrappers), copied into every result table */
enum { STREAM_UV_MODEL = 1, STREAM_UV_RESULT = 2, STREAM_UV_CONSTRAINT = 3, STREAM_UV_PARAMS = 4,
       STREAM_NUV = 4 };

static Stream *check_stream(lua_State *L, int idx) { return luaL_checkudata(L, idx, STREAM); }

/* A stream that is not inside one of its own steps (re-entry from a constraint callback). */
static Stream *check_idle_stream(lua_State *L, int idx) {
    Stream *s = check_stream(L, idx);
    if (s->running)
        luaL_error(L, "cannot call or close a Stream from inside its own generation step (a "
                   "constraint callback re-entered it)");
    return s;
}

static void stream_free_gen(Stream *s) {
    wb_gen_free(s->g);
    s->g = NULL;
    lwb_native_free(s->native);
    s->native = 0;
    if (s->owner) s->owner->users--;
    s->owner = NULL;
}

/* opts.constraint (opts at index opts): a wb.Constraint, or a function allowed(generated_ids) ->
 * set that is wrapped into one for this model's vocabulary. Pushes the Constraint (or nil): the
 * caller keeps it alive as long as the generator that borrows it. */
static lwb_Constraint *push_opt_constraint(lua_State *L, int opts, int32_t V) {
    if (lua_type(L, opts) != LUA_TTABLE || lua_getfield(L, opts, "constraint") == LUA_TNIL) {
        if (lua_type(L, opts) != LUA_TTABLE) lua_pushnil(L);
        return NULL;
    }
    if (lua_type(L, -1) == LUA_TFUNCTION) {
        lwb_push_function_constraint(L, -1, V);
        lua_replace(L, -2);
    }
    lwb_Constraint *lc = lwb_test_constraint(L, -1);
    if (!lc) luaL_argerror(L, opts, "option 'constraint' must be a wb.Constraint or a function");
    if (!lc->c) luaL_argerror(L, opts, "option 'constraint' is a closed Constraint");
    lc->L = L;
    return lc;
}

void lwb_check_request(lua_State *L, int params, int opts, int32_t V, wb_sampling_params *sp,
                       wb_gen_params *gp, lwb_request_extra *ex, lwb_Constraint **lc) {
    params = lua_absindex(L, params);
    opts = lua_absindex(L, opts);
    check_request_keys(L, params, opts);
    check_params(L, params, V, sp, ex);
    *gp = wb_gen_default_params();
    gp->cache = lwb_opt_bool(L, opts, "cache", 1);
    gp->holdback = lwb_opt_bool(L, opts, "holdback", 1);
    gp->ignore_eos = lwb_opt_bool(L, opts, "ignore_eos", 0);
    lua_Integer chunk = lwb_opt_integer(L, opts, "chunk_size", 0);
    if (chunk < 0 || chunk > INT32_MAX) luaL_argerror(L, opts, "option 'chunk_size' must be >= 0");
    gp->chunk_size = (int)chunk;
    lua_Integer cancel = lwb_opt_integer(L, opts, "cancel_after", 0);
    if (cancel < 0 || cancel > INT32_MAX)
        luaL_argerror(L, opts, "option 'cancel_after' must be >= 0");
    gp->cancel_after = (int)cancel;
    lua_Integer n_ctx = lwb_opt_integer(L, opts, "n_ctx", 0);
    if (n_ctx < 0 || n_ctx > INT32_MAX) luaL_argerror(L, opts, "option 'n_ctx' must be >= 0");
    gp->n_ctx = (int)n_ctx;
    gp->logprobs = ex->logprobs;
    gp->top_logprobs = ex->top_logprobs;
    gp->abort_fn = lwb_abort_fn;
    *lc = push_opt_constraint(L, opts, V);
    gp->constraint = *lc ? (*lc)->c : NULL;
}

/* Build a generator from (model, prompt, params, opts) at stack slots 1-4 into the Stream at
 * slot 5 (which then counts as a user of the model). */
static void new_gen(lua_State *L, Stream *s, lwb_request_extra *ex, wb_sampling_params *spp,
                    wb_gen_params *gpp, int single) {
    wb_model *m = lwb_check_model(L, 1);
    int32_t V = wb_model_config(m)->vocab_size;
    wb_sampling_params sp;
    wb_gen_params gp;
    lwb_check_request(L, 3, 4, V, &sp, &gp, ex, &s->lc); /* pushes arrays, constraint */
    lua_setiuservalue(L, 5, STREAM_UV_CONSTRAINT);
    if (single && ex->n > 1)
        luaL_argerror(L, 3, "n > 1 completions need model:generate or model:batch (a stream "
                      "gives one completion)");
    wb_err err = {0};
    wb_status st;
    if (lua_type(L, 2) == LUA_TTABLE) {
        size_t n;
        const int32_t *ids = lwb_check_ids(L, 2, V, &n);
        st = wb_gen_new_ids(m, ids, n, &sp, &gp, &s->g, &err);
    } else {
        size_t len;
        const char *prompt = luaL_checklstring(L, 2, &len);
        st = wb_gen_new(m, prompt, len, &sp, &gp, &s->g, &err);
    }
    if (st != WB_OK) lwb_raise(L, &err);
    s->owner = lwb_check_model_ud(L, 1);
    s->owner->users++;
    wb_session *sess = wb_gen_session(s->g);
    s->native = sess ? wb_session_cache_bytes(sess) : 0;
    lwb_native_alloc(L, s->native);
    if (spp) *spp = sp;
    if (gpp) *gpp = gp;
}

/* One generator step with the re-entry guard up and the constraint calling back into L. */
static wb_status stream_next(lua_State *L, Stream *s, const char **piece, size_t *n, int *done,
                             wb_err *err) {
    if (s->lc) s->lc->L = L;
    s->running = 1;
    wb_status st = wb_gen_next(s->g, piece, n, done, err);
    s->running = 0;
    return st;
}

/* Copy params_used / params_source of the stream at idx (if it has them) into the table on top. */
static void add_params(lua_State *L, int idx) {
    if (lua_getiuservalue(L, idx, STREAM_UV_PARAMS) == LUA_TTABLE) {
        lua_getfield(L, -1, "params_used");
        lua_setfield(L, -3, "params_used");
        lua_getfield(L, -1, "params_source");
        lua_setfield(L, -3, "params_source");
    }
    lua_pop(L, 1);
}

void lwb_stream_set_params(lua_State *L, int stream_idx, int report_idx) {
    stream_idx = lua_absindex(L, stream_idx);
    check_stream(L, stream_idx);
    luaL_checktype(L, report_idx, LUA_TTABLE);
    lua_pushvalue(L, report_idx);
    lua_setiuservalue(L, stream_idx, STREAM_UV_PARAMS);
    /* a stream that already ended (an empty completion) has its final result: annotate it too */
    if (lua_getiuservalue(L, stream_idx, STREAM_UV_RESULT) == LUA_TTABLE) add_params(L, stream_idx);
    lua_pop(L, 1);
}

/* Snapshot the result into user value 2 and free the generator (session, buffers). */
static void stream_finish(lua_State *L, Stream *s, int idx) {
    if (!s->g) return;
    idx = lua_absindex(L, idx);
    lwb_push_gen_result(L, wb_gen_result_get(s->g));
    add_params(L, idx);
    lua_setiuservalue(L, idx, STREAM_UV_RESULT);
    stream_free_gen(s);
}

static int stream_close(lua_State *L) {
    Stream *s = check_idle_stream(L, 1);
    if (s->g) {
        /* Leaving the loop early is a cancellation: the result says so and the cache goes now. */
        wb_err err = {0};
        wb_gen_cancel(s->g, &err);
        stream_finish(L, s, 1);
    }
    s->done = 1;
    return 0;
}

static int stream_gc(lua_State *L) {
    Stream *s = check_stream(L, 1);
    stream_free_gen(s); /* no result snapshot: nobody can ask for it any more */
    return 0;
}

/* An empty Stream userdata, pushed before the generator exists so an error while building it
 * cannot leak (the generator is attached by new_gen; __gc frees it). */
static Stream *push_stream(lua_State *L) {
    Stream *s = lua_newuserdatauv(L, sizeof *s, STREAM_NUV);
    memset(s, 0, sizeof *s);
    luaL_setmetatable(L, STREAM);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, STREAM_UV_MODEL); /* keep the model alive while the stream is */
    return s;
}

/* params.n > 1: n completions of one prompt. Completion 0 uses the request's seed (given, or
 * drawn and reported), completion i the seed + i, so each can be reproduced alone with
 * model:generate(prompt, {seed = r.choices[i].seed, ...}). The prompt is evaluated once and the
 * session forked (wb_gen_share_prefill); the completions then decode together, one forward pass
 * per step. Returns {choices = {result, ...}, n = n}. */
static int generate_n(lua_State *L, Stream *s, const lwb_request_extra *ex,
                      wb_sampling_params *sp, const wb_gen_params *gp) {
    wb_model *m = lwb_check_model(L, 1);
    const int n = ex->n;
    const uint64_t seed = wb_gen_result_get(s->g)->seed;
    wb_batch *core = lwb_push_batch(L, 1);
    int bi = lua_gettop(L);
    lua_getiuservalue(L, 5, STREAM_UV_CONSTRAINT);
    int ci = lua_gettop(L);
    int *ids = lua_newuserdatauv(L, (size_t)n * sizeof *ids, 0);
    wb_gen **gens = lua_newuserdatauv(L, (size_t)n * sizeof *gens, 0);
    wb_gen *g0 = s->g; /* the batch takes it over */
    s->g = NULL;
    lwb_native_free(s->native);
    s->native = 0;
    s->owner->users--;
    s->owner = NULL;
    ids[0] = lwb_batch_adopt(L, bi, g0, ci);
    sp->has_seed = 1;
    for (int i = 1; i < n; i++) {
        sp->seed = seed + (uint64_t)i;
        wb_gen *g = NULL;
        wb_err err = {0};
        wb_status st;
        if (lua_type(L, 2) == LUA_TTABLE) {
            size_t k;
            const int32_t *p = lwb_check_ids(L, 2, wb_model_config(m)->vocab_size, &k);
            st = wb_gen_new_ids(m, p, k, sp, gp, &g, &err);
            lua_pop(L, 1);
        } else {
            size_t len;
            const char *p = lua_tolstring(L, 2, &len);
            st = wb_gen_new(m, p, len, sp, gp, &g, &err);
        }
        if (st != WB_OK) {
            lwb_batch_clear(L, bi);
            return lwb_raise(L, &err);
        }
        ids[i] = lwb_batch_adopt(L, bi, g, ci);
    }
    for (int i = 0; i < n; i++) gens[i] = wb_batch_gen(core, ids[i]);
    if (gp->cache) {
        wb_err err = {0};
        if (wb_gen_share_prefill(gens, n, &err) != WB_OK) {
            lwb_batch_clear(L, bi);
            return lwb_raise(L, &err);
        }
    }
    lwb_batch_run(L, bi);
    lua_createtable(L, 0, 2);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lwb_push_gen_result(L, wb_gen_result_get(gens[i]));
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "choices");
    lua_pushinteger(L, n);
    lua_setfield(L, -2, "n");
    lwb_batch_clear(L, bi);
    return 1;
}

/* model:generate(prompt, params, opts) -> result table */
static int l_generate(lua_State *L) {
    lua_settop(L, 4);
    Stream *s = push_stream(L);
    lwb_request_extra ex;
    wb_sampling_params sp;
    wb_gen_params gp;
    new_gen(L, s, &ex, &sp, &gp, 0);
    if (ex.n > 1) return generate_n(L, s, &ex, &sp, &gp);
    wb_err err = {0};
    if (s->lc) s->lc->L = L;
    s->running = 1;
    wb_status st = wb_gen_run(s->g, &err);
    s->running = 0;
    if (st != WB_OK) {
        stream_free_gen(s);
        return lwb_raise(L, &err);
    }
    lwb_push_gen_result(L, wb_gen_result_get(s->g));
    stream_free_gen(s);
    return 1;
}

/* stream() -> piece, ms  (nil at the end). One call advances until a non-empty piece is
 * released or generation ends; the abort hook is polled before every token, so Ctrl-C ends the
 * stream between tokens with stop_reason "cancelled". */
static int stream_call(lua_State *L) {
    Stream *s = check_idle_stream(L, 1);
    if (s->done || !s->g) {
        s->done = 1;
        lua_pushnil(L);
        return 1;
    }
    wb_err err = {0};
    for (;;) {
        const char *piece;
        size_t n;
        int done;
        if (stream_next(L, s, &piece, &n, &done, &err) != WB_OK) {
            stream_finish(L, s, 1);
            s->done = 1;
            return lwb_raise(L, &err);
        }
        double ms = wb_gen_elapsed_ms(s->g);
        if (done) {
            lua_pushlstring(L, piece, n); /* copy before the generator is freed */
            stream_finish(L, s, 1);
            if (n == 0) {
                s->done = 1;
                lua_pushnil(L);
                return 1;
            }
            lua_pushnumber(L, ms);
            return 2;
        }
        if (n) {
            lua_pushlstring(L, piece, n);
            if (lwb_interrupted()) {
                /* Ctrl-C arrived during this step. Finish here, before returning to Lua where
                 * the host's hook would raise: the next step sees the flag and ends the
                 * generation as "cancelled", releasing any held-back text with this piece. */
                if (stream_next(L, s, &piece, &n, &done, &err) != WB_OK) {
                    stream_finish(L, s, 1);
                    s->done = 1;
                    return lwb_raise(L, &err);
                }
                lua_pushlstring(L, piece, n);
                lua_concat(L, 2);
                ms = wb_gen_elapsed_ms(s->g);
                if (done) stream_finish(L, s, 1);
            }
            lua_pushnumber(L, ms);
            return 2;
        }
    }
}

/* stream:result() -> the result table (final once the loop ended; a snapshot before that) */
static int stream_result(lua_State *L) {
    Stream *s = check_idle_stream(L, 1);
    if (s->g) {
        lwb_push_gen_result(L, wb_gen_result_get(s->g));
        add_params(L, 1);
        return 1;
    }
    lua_getiuservalue(L, 1, STREAM_UV_RESULT);
    return 1;
}

/* stream.params_used / stream.params_source (the report of the call), else the methods */
static int stream_index(lua_State *L) {
    check_stream(L, 1);
    const char *k = lua_tostring(L, 2);
    if (k && (strcmp(k, "params_used") == 0 || strcmp(k, "params_source") == 0)) {
        if (lua_getiuservalue(L, 1, STREAM_UV_PARAMS) != LUA_TTABLE) return 1; /* nil */
        lua_getfield(L, -1, k);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_gettable(L, lua_upvalueindex(1));
    return 1;
}

/* model:stream(prompt, params, opts) -> stream, nil, nil, stream
 * The Stream is callable, so `for piece, ms in model:stream(p, params) do` works; it is also the
 * to-be-closed value of the loop, so a `break` frees the generator at once. Keep a reference
 * (`local s = model:stream(...)`; `for piece, ms in s do ... end`; `s:result()`) to read the
 * stop_reason and timings afterwards. */
static int l_stream(lua_State *L) {
    lua_settop(L, 4);
    Stream *s = push_stream(L);
    lwb_request_extra ex;
    new_gen(L, s, &ex, NULL, NULL, 1);
    lua_settop(L, 5);
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushvalue(L, 5);
    return 4;
}

/* Replace messages (slot 2: a list of {role = ..., content = ...}) by the prompt text the chat
 * template of the model's directory renders for them, with the assistant header appended. Ends
 * come from generation_config.json through the model (wb_model_eos_ids), as "eos". */
/* A base model (TinyLM) has no chat template at all: say so in one line, before the core's
 * loader would report the missing tokenizer_config.json as an I/O error. */
static void check_has_chat_template(lua_State *L, const char *dir) {
    static const char *const files[] = {"tokenizer_config.json", "chat_template.jinja",
                                        "chat_template.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *path = lua_pushfstring(L, "%s/%s", dir, files[i]);
        int found = access(path, F_OK) == 0;
        lua_pop(L, 1);
        if (found) return;
    }
    luaL_error(L, "%s has no chat template (a base model): use model:generate with a plain prompt",
               dir);
}

static void render_chat(lua_State *L) {
    wb_model *m = lwb_check_model(L, 1);
    if (!wb_model_chat_template(m)) check_has_chat_template(L, wb_model_dir(m)); /* GGUF: its own */
    luaL_checktype(L, 2, LUA_TTABLE);
    const size_t n = lua_rawlen(L, 2);
    if (n == 0) luaL_argerror(L, 2, "messages must be a non-empty list of {role=, content=}");
    wb_chat_message *msgs = lua_newuserdatauv(L, n * sizeof *msgs, 0); /* freed by the GC */
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, 2, (lua_Integer)i + 1) != LUA_TTABLE)
            luaL_argerror(L, 2, lua_pushfstring(L, "message %d is not a table", (int)i + 1));
        /* the strings stay alive in the messages table, so the pointers do too */
        if (lua_getfield(L, -1, "role") != LUA_TSTRING || lua_getfield(L, -2, "content") != LUA_TSTRING)
            luaL_argerror(L, 2, lua_pushfstring(L, "message %d needs string role and content",
                                                (int)i + 1));
        msgs[i].content = lua_tostring(L, -1);
        msgs[i].role = lua_tostring(L, -2);
        lua_pop(L, 3);
    }
    wb_chat_template *t = NULL;
    wb_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (wb_model_chat_template_load(m, &t, &err) != WB_OK ||
        wb_chat_render(t, msgs, n, 1, &text, &len, &err) != WB_OK) {
        wb_chat_template_free(t);
        lwb_raise(L, &err);
    }
    wb_chat_template_free(t);
    lua_pushlstring(L, text, len);
    wb_free(text);
    lua_replace(L, 2);
    lua_pop(L, 1); /* msgs */
}

/* model:chat(messages, params, opts) -> result table (model:generate on the rendered prompt) */
static int l_chat(lua_State *L) {
    lua_settop(L, 4);
    render_chat(L);
    return l_generate(L);
}

/* model:stream_chat(messages, params, opts) -> stream, as model:stream */
static int l_stream_chat(lua_State *L) {
    lua_settop(L, 4);
    render_chat(L);
    return l_stream(L);
}

static int stream_tostring(lua_State *L) {
    Stream *s = check_stream(L, 1);
    lua_pushstring(L, s->g ? "Stream (running)" : "Stream (finished)");
    return 1;
}

static const luaL_Reg stream_methods[] = {
    {"result", stream_result},
    {"close", stream_close},
    {NULL, NULL},
};

static const luaL_Reg stream_meta[] = {
    {"__call", stream_call},
    {"__close", stream_close},
    {"__gc", stream_gc},
    {"__tostring", stream_tostring},
    {NULL, NULL},
};

static const luaL_Reg sampling_funcs[] = {
    {"apply", l_apply},
    {"check", l_check},
    {"draw", l_draw},
    {"defaults", l_defaults},
    {NULL, NULL},
};

void lwb_open_sampling(lua_State *L) {
    luaL_newmetatable(L, STREAM);
    luaL_setfuncs(L, stream_meta, 0);
    luaL_newlib(L, stream_methods);
    lua_pushcclosure(L, stream_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    luaL_newlib(L, sampling_funcs);
    for (int which = 0; which < 2; which++) {
        const char *const *list = which ? lwb_generation_option_keys : lwb_sampling_keys;
        lua_newtable(L);
        for (int i = 0; list[i]; i++) {
            lua_pushstring(L, list[i]);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, which ? "options" : "keys");
    }
    lua_setfield(L, -2, "sampling");

    /* wb.Model is the method table lwb_open_model installed (also its __index upvalue). */
    if (lua_getfield(L, -1, "Model") == LUA_TTABLE) {
        lua_pushcfunction(L, l_generate);
        lua_setfield(L, -2, "generate");
        lua_pushcfunction(L, l_stream);
        lua_setfield(L, -2, "stream");
        lua_pushcfunction(L, l_chat);
        lua_setfield(L, -2, "chat");
        lua_pushcfunction(L, l_stream_chat);
        lua_setfield(L, -2, "stream_chat");
    }
    lua_pop(L, 1);
}
