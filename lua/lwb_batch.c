/* lwb_batch.c - model:generate_batch: B prompts decoded together, one forward pass per step.
 *
 * The opener adds generate_batch to the wb.Model method table, so it runs after lwb_open_model. */
#include "lwb.h"

#include <string.h>

#include "wb_batch.h"

#define MODEL "wb.Model"
#define BATCH "wb.BatchRun"

static const char *const k_params[] = {"max_tokens", "temperature", "top_k", "top_p",
                                       "min_p",      "seed",        NULL};
static const char *const k_opts[] = {"ignore_eos", "n_ctx", "separate_prefill", NULL};

/* The runner lives in a userdata for the length of the call, so an error cannot leak it. */
typedef struct BatchRun {
    wb_batch *b;
} BatchRun;

static int batchrun_gc(lua_State *L) {
    BatchRun *r = luaL_checkudata(L, 1, BATCH);
    wb_batch_free(r->b);
    r->b = NULL;
    return 0;
}

static void read_params(lua_State *L, int idx, wb_sampling_params *sp) {
    lwb_check_options(L, idx, k_params);
    *sp = wb_sampling_default_params();
    lua_Integer mt = lwb_opt_integer(L, idx, "max_tokens", sp->max_tokens);
    if (mt < 1 || mt > INT32_MAX)
        luaL_argerror(L, idx, lua_pushfstring(L, "max_tokens = %I must be >= 1", (LUAI_UACINT)mt));
    sp->max_tokens = (int32_t)mt;
    sp->temperature = (float)lwb_opt_number(L, idx, "temperature", sp->temperature);
    lua_Integer k = lwb_opt_integer(L, idx, "top_k", 0);
    if (k < 0 || k > INT32_MAX) luaL_argerror(L, idx, "top_k must be >= 0 (0 turns it off)");
    sp->top_k = (int32_t)k;
    sp->top_p = (float)lwb_opt_number(L, idx, "top_p", sp->top_p);
    sp->min_p = (float)lwb_opt_number(L, idx, "min_p", sp->min_p);
    if (lua_type(L, idx) == LUA_TTABLE && lua_getfield(L, idx, "seed") != LUA_TNIL) {
        lua_pop(L, 1);
        sp->seed = (uint64_t)lwb_opt_integer(L, idx, "seed", 0);
        sp->has_seed = 1;
    } else if (lua_type(L, idx) == LUA_TTABLE) {
        lua_pop(L, 1);
    }
    wb_err err = {0};
    if (wb_sampling_params_check(sp, 0, &err) != WB_OK) luaL_argerror(L, idx, err.msg);
}

/* model:generate_batch(prompts, params, opts) -> {results = {...}, batch_size, steps, ...}
 * prompts: a list of strings or of id tables. Every sequence keeps its own KV cache and position,
 * so the prompts may differ in length; each gets the tokens it would get alone. */
static int l_generate_batch(lua_State *L) {
    lua_settop(L, 4);
    wb_model *m = lwb_check_model(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    wb_sampling_params sp;
    read_params(L, 3, &sp);
    lwb_check_options(L, 4, k_opts);
    wb_batch_params bp = wb_batch_default_params();
    bp.ignore_eos = lwb_opt_bool(L, 4, "ignore_eos", 0);
    bp.separate_prefill = lwb_opt_bool(L, 4, "separate_prefill", 0);
    lua_Integer n_ctx = lwb_opt_integer(L, 4, "n_ctx", 0);
    if (n_ctx < 0 || n_ctx > INT32_MAX) luaL_argerror(L, 4, "option 'n_ctx' must be >= 0");
    bp.n_ctx = (int)n_ctx;

    lua_Integer B = luaL_len(L, 2);
    luaL_argcheck(L, B >= 1 && B <= 65536, 2, "need between 1 and 65536 prompts");
    const wb_tokenizer *tok = wb_model_tokenizer(m);
    const int32_t V = wb_model_config(m)->vocab_size;
    /* Prompt arrays are userdata on the stack (5 .. 5+B-1); pointers and lengths in two more. */
    const int32_t **prompts = lua_newuserdatauv(L, (size_t)B * sizeof *prompts, 0);
    size_t *lens = lua_newuserdatauv(L, (size_t)B * sizeof *lens, 0);
    luaL_checkstack(L, (int)B + 8, "too many prompts");
    for (lua_Integer i = 1; i <= B; i++) {
        int t = lua_geti(L, 2, i);
        if (t == LUA_TSTRING) {
            size_t len;
            const char *s = lua_tolstring(L, -1, &len);
            int32_t *ids = NULL;
            size_t n = 0;
            wb_err err = {0};
            if (wb_tokenizer_encode(tok, s, len, &ids, &n, &err) != WB_OK)
                return lwb_raise(L, &err);
            int32_t *keep = lua_newuserdatauv(L, (n ? n : 1) * sizeof *keep, 0);
            memcpy(keep, ids, n * sizeof *keep);
            wb_free(ids);
            lua_replace(L, -2);
            prompts[i - 1] = keep;
            lens[i - 1] = n;
        } else if (t == LUA_TTABLE) {
            size_t n;
            prompts[i - 1] = lwb_check_ids(L, -1, V, &n);
            lua_replace(L, -2);
            lens[i - 1] = n;
        } else {
            return luaL_argerror(L, 2, lua_pushfstring(L, "prompt %I must be a string or a table "
                                                       "of token ids, got %s", (LUAI_UACINT)i,
                                                       luaL_typename(L, -1)));
        }
    }
    BatchRun *run = lua_newuserdatauv(L, sizeof *run, 0);
    run->b = NULL;
    luaL_setmetatable(L, BATCH);
    wb_err err = {0};
    if (wb_batch_new(m, &run->b, &err) != WB_OK) return lwb_raise(L, &err);
    if (wb_batch_generate(run->b, prompts, lens, (int)B, &sp, &bp, &err) != WB_OK) {
        wb_batch_free(run->b);
        run->b = NULL;
        return lwb_raise(L, &err);
    }
    const wb_batch_result *r = wb_batch_result_get(run->b);
    lua_createtable(L, 0, 10);
    lua_createtable(L, (int)B, 0);
    for (int i = 0; i < r->n_seqs; i++) {
        const wb_batch_seq *q = &r->seqs[i];
        lua_createtable(L, 0, 5);
        lwb_push_ids(L, q->token_ids, q->n_tokens);
        lua_setfield(L, -2, "token_ids");
        /* The detokenizer, as generation uses: the same text (U+FFFD for broken UTF-8). */
        wb_detok *d = NULL;
        if (wb_detok_new(tok, &d, &err) != WB_OK) return lwb_raise(L, &err);
        luaL_Buffer buf;
        luaL_buffinit(L, &buf);
        /* an eos or stop_token_ids token ends the reply and is not part of its text */
        size_t n_text = q->n_tokens;
        if (n_text && (q->stop_reason == WB_STOP_EOS || q->stop_reason == WB_STOP_STOP)) n_text--;
        for (size_t t = 0; t < n_text; t++) {
            const char *piece;
            size_t len;
            if (wb_detok_push(d, q->token_ids[t], &piece, &len, &err) != WB_OK) {
                wb_detok_free(d);
                return lwb_raise(L, &err);
            }
            luaL_addlstring(&buf, piece, len);
        }
        const char *tail;
        size_t tail_len;
        wb_detok_flush(d, &tail, &tail_len);
        luaL_addlstring(&buf, tail, tail_len);
        wb_detok_free(d);
        luaL_pushresult(&buf);
        lua_setfield(L, -2, "text");
        lua_pushstring(L, wb_stop_reason_name(q->stop_reason));
        lua_setfield(L, -2, "stop_reason");
        lua_pushinteger(L, q->prompt_tokens);
        lua_setfield(L, -2, "prompt_tokens");
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "results");
    lua_pushinteger(L, r->n_seqs);
    lua_setfield(L, -2, "batch_size");
    lua_pushinteger(L, r->steps);
    lua_setfield(L, -2, "steps");
    lua_pushinteger(L, (lua_Integer)r->output_tokens);
    lua_setfield(L, -2, "output_tokens");
    lua_pushnumber(L, r->prefill_ms);
    lua_setfield(L, -2, "prefill_ms");
    lua_pushnumber(L, r->decode_ms);
    lua_setfield(L, -2, "decode_ms");
    lua_pushnumber(L, r->elapsed_ms);
    lua_setfield(L, -2, "elapsed_ms");
    lua_pushnumber(L, r->tokens_per_s);
    lua_setfield(L, -2, "output_tokens_per_s");
    lua_pushnumber(L, r->decode_tokens_per_s);
    lua_setfield(L, -2, "decode_tokens_per_s");
    wb_batch_free(run->b); /* now, not at the next collection: the caches are B x n_ctx rows */
    run->b = NULL;
    return 1;
}

void lwb_open_batch(lua_State *L) {
    luaL_newmetatable(L, BATCH);
    lua_pushcfunction(L, batchrun_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, batchrun_gc);
    lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "Model") == LUA_TTABLE) {
        lua_pushcfunction(L, l_generate_batch);
        lua_setfield(L, -2, "generate_batch");
    }
    lua_pop(L, 1);
}
