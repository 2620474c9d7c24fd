/* lwb_model.c - wb.Model (wb.load) and wb.Session (a KV cache over one sequence), with what a
 * forward pass shows of its insides (hidden states, attention, the cache) as wb.Tensor. */
#include "lwb.h"

#include <stdlib.h>
#include <string.h>

#include "gguf_save.h"

#define MODEL LWB_MODEL
#define SESSION LWB_SESSION

/* User values of a Model userdata. */
enum { MODEL_UV_TOKENIZER = 1, MODEL_UV_CONFIG = 2, MODEL_NUV = 2 };

typedef lwb_Model Model; /* the layout is published in lwb.h */

typedef lwb_Session Session; /* the layout is published in lwb.h (Tensor views read it) */

/* ---- model ---------------------------------------------------------------------------------- */

static Model *checkmodelud(lua_State *L, int idx) { return luaL_checkudata(L, idx, MODEL); }

lwb_Model *lwb_check_model_ud(lua_State *L, int idx) { return checkmodelud(L, idx); }

static wb_model *checkmodel(lua_State *L, int idx) {
    Model *m = checkmodelud(L, idx);
    if (!m->m) luaL_error(L, "attempt to use a closed Model");
    return m->m;
}

wb_model *lwb_check_model(lua_State *L, int idx) { return checkmodel(L, idx); }

int *lwb_model_users(lua_State *L, int idx) { return &checkmodelud(L, idx)->users; }

static int l_load(lua_State *L) {
    char buf[4096];
    const char *dir = lua_isnoneornil(L, 1) ? lwb_default_model_dir(buf, sizeof buf)
                                            : luaL_checkstring(L, 1);
    Model *m = lua_newuserdatauv(L, sizeof *m, MODEL_NUV);
    m->m = NULL;
    m->open = 0;
    m->users = 0;
    m->native = 0;
    luaL_setmetatable(L, MODEL);
    int mi = lua_gettop(L);
    /* wb.load(dir, {compute_f32 = true, n_ctx = N, weights = "q8_0"|"q4_0"}): wb_model_params */
    wb_model_params prm = wb_model_default_params();
    if (lua_istable(L, 2)) {
        lwb_check_options(L, 2, (const char *const[]){"compute_f32", "n_ctx", "weights", NULL});
        lua_getfield(L, 2, "compute_f32");
        prm.compute_f32 = lua_toboolean(L, -1);
        lua_getfield(L, 2, "n_ctx");
        if (!lua_isnil(L, -1)) prm.n_ctx = (int32_t)luaL_checkinteger(L, -1);
        lua_pop(L, 2);
        lua_getfield(L, 2, "weights");
        if (!lua_isnil(L, -1)) {
            static const char *const kinds[] = {"as_stored", "q8_0", "q4_0", NULL};
            const char *s = lua_tostring(L, -1);
            int k = -1;
            for (int i = 0; s && kinds[i]; i++)
                if (!strcmp(s, kinds[i])) k = i;
            if (k < 0)
                return luaL_argerror(L, 2, "weights must be \"q8_0\", \"q4_0\" or \"as_stored\"");
            prm.weights = k; /* the order of WB_WEIGHTS_AS_STORED, _Q8_0, _Q4_0 */
        }
        lua_pop(L, 1);
    }
    wb_err err = {0};
    if (wb_model_load_ex(dir, &prm, &m->m, &err) != WB_OK) return lwb_raise(L, &err);
    m->open = 1;
    wb_model_set_abort(m->m, lwb_abort_fn, NULL);
    m->native = wb_model_weight_bytes(m->m);
    lwb_native_alloc(L, m->native);

    lwb_push_borrowed_tokenizer(L, wb_model_tokenizer(m->m), mi, &m->open);
    lua_setiuservalue(L, mi, MODEL_UV_TOKENIZER);
    const char *cfg = wb_model_config_json(m->m);
    lwb_push_json(L, cfg, strlen(cfg), "config.json");
    lua_setiuservalue(L, mi, MODEL_UV_CONFIG);
    return 1;
}

/* wb.native_bytes() -> bytes of native memory held by live binding objects (lwb.h) */
static int l_native_bytes(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)lwb_native_live());
    return 1;
}

static int model_gc(lua_State *L) {
    Model *m = checkmodelud(L, 1);
    /* Sessions hold the model through their user value, so the collector finalizes them first;
     * an explicit close under live sessions is refused in model_close. */
    if (m->m) wb_model_free(m->m);
    m->m = NULL;
    lwb_native_free(m->native);
    m->native = 0;
    m->open = 0;
    return 0;
}

static int model_close(lua_State *L) {
    Model *m = checkmodelud(L, 1);
    /* Users that are no longer reachable (a dropped stream, a session left to the collector)
     * must not keep the model open: finalize them first. */
    if (m->m && m->users > 0) lua_gc(L, LUA_GCCOLLECT);
    if (m->m && m->users > 0)
        return luaL_error(L, "cannot close a Model with %d open Session(s) or stream(s)", m->users);
    return model_gc(L);
}

static int model_num_parameters(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_model_num_parameters(checkmodel(L, 1)));
    return 1;
}

/* model:batch_variant(on) -> the previous setting: the batch-variant mode of core/wb_model.h. */
static int model_batch_variant(lua_State *L) {
    wb_model *m = checkmodel(L, 1);
    luaL_checktype(L, 2, LUA_TBOOLEAN);
    lua_pushboolean(L, wb_model_set_batch_variant(m, lua_toboolean(L, 2)));
    return 1;
}

/* The shape facts scripts need, the same keys for every family (config.json's own names differ:
 * n_positions vs max_position_embeddings, n_layer vs num_hidden_layers, ...). */
static int model_info(lua_State *L) {
    const wb_model *m = checkmodel(L, 1);
    const wb_config *c = wb_model_config(m);
    lua_createtable(L, 0, 16);
    lua_pushstring(L, wb_model_type(m));
    lua_setfield(L, -2, "model_type");
    const struct { const char *k; lua_Integer v; } ints[] = {
        {"vocab_size", c->vocab_size}, {"n_ctx", c->n_ctx},
        {"max_position_embeddings", c->max_position_embeddings}, {"n_embd", c->n_embd},
        {"n_layer", c->n_layer}, {"n_head", c->n_head}, {"n_kv_head", c->n_kv_head},
        {"head_dim", c->head_dim}, {"n_inner", c->n_inner},
        {"parameters", (lua_Integer)wb_model_num_parameters(m)},
        {"weight_bytes", (lua_Integer)wb_model_weight_bytes(m)},
        /* keys and values, F32, for every layer */
        {"kv_bytes_per_token", (lua_Integer)2 * c->n_layer * c->n_kv_head * c->head_dim * 4},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        lua_pushinteger(L, ints[i].v);
        lua_setfield(L, -2, ints[i].k);
    }
    lua_pushboolean(L, c->tie_word_embeddings);
    lua_setfield(L, -2, "tie_word_embeddings");
    lua_pushstring(L, wb_model_format(m)); /* "safetensors" or "gguf" */
    lua_setfield(L, -2, "format");
    /* the file types of the loaded tensors: {F32 = 65, Q4_K = 144, Q6_K = 25} */
    lua_newtable(L);
    const char *tn;
    int64_t tc;
    for (int i = 0; wb_model_tensor_types(m, i, &tn, &tc); i++) {
        lua_pushinteger(L, (lua_Integer)tc);
        lua_setfield(L, -2, tn);
    }
    lua_setfield(L, -2, "tensor_types");
    lua_pushstring(L, wb_kernels_info()); /* the dispatch level and kernel variants in use */
    lua_setfield(L, -2, "kernels");
    /* 16: BF16 matrices multiply the activations rounded to BF16 (vdpbf16ps); 32: as F32 */
    lua_pushinteger(L, wb_kernels_bf16_input_bits());
    lua_setfield(L, -2, "bf16_input_bits");
    return 1;
}

/* Push a table of n Vecs of V floats from logits [n, V]. */
static void push_rows(lua_State *L, const float *logits, int n, int32_t V) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        float *row = lwb_push_vec(L, (size_t)V);
        memcpy(row, logits + (size_t)i * V, (size_t)V * sizeof(float));
        lua_rawseti(L, -2, i + 1);
    }
}

static int model_logits(lua_State *L) {
    wb_model *m = checkmodel(L, 1);
    const wb_config *cfg = wb_model_config(m);
    lwb_check_options(L, 3, (const char *const[]){"all", NULL});
    int all = lwb_opt_bool(L, 3, "all", 0);
    size_t n;
    int32_t *ids = lwb_check_ids(L, 2, cfg->vocab_size, &n);
    luaL_argcheck(L, n >= 1, 2, "need at least one token id");
    if (n > (size_t)cfg->n_ctx)
        luaL_argerror(L, 2, lua_pushfstring(L, "%d ids exceed the context of %d", (int)n,
                                            (int)cfg->n_ctx));
    size_t V = (size_t)cfg->vocab_size;
    wb_err err = {0};
    if (!all) {
        float *out = lwb_push_vec(L, V);
        if (wb_model_forward(m, ids, (int)n, out, 0, &err) != WB_OK) return lwb_raise(L, &err);
        return 1;
    }
    float *buf = lua_newuserdatauv(L, n * V * sizeof(float), 0);
    if (wb_model_forward(m, ids, (int)n, buf, 1, &err) != WB_OK) return lwb_raise(L, &err);
    push_rows(L, buf, (int)n, cfg->vocab_size);
    return 1;
}

/* ---- looking inside: hidden states, attention, the logit lens ------------------------------- */

/* The options that ask a forward call for its insides (core/wb_model.h, wb_probe). */
#define INSPECT_KEYS "hidden_states", "attentions", "positions"

/* Attention weights one call may return, in floats (a longer call names its positions). */
#define MAX_ATTENTION_FLOATS ((size_t)1 << 26)

typedef struct inspect_req {
    int hidden;    /* hidden_states = true */
    int n_att;     /* positions whose attention to record (0: none) */
    int32_t *pos;  /* [n_att] absolute positions, in a userdata on the stack */
} inspect_req;

/* Read hidden_states / attentions / positions from the options table at idx for a call of n
 * tokens at positions pos0..pos0+n-1. positions: absolute positions, or negative ones counted
 * from the end of the call (-1 = its last token); given alone it implies attentions = true;
 * attentions = true alone means every position of the call. Pushes one userdata (the positions
 * buffer). Returns 1 when anything is asked. */
static int check_inspect(lua_State *L, int idx, const wb_config *c, int pos0, int n,
                         inspect_req *r) {
    r->hidden = lwb_opt_bool(L, idx, "hidden_states", 0);
    int att = lwb_opt_bool(L, idx, "attentions", 0);
    int given = 0;
    if (lua_istable(L, idx)) {
        lua_getfield(L, idx, "positions");
        given = !lua_isnil(L, -1);
        if (given && !lua_istable(L, -1))
            luaL_argerror(L, idx, "option 'positions' must be a list of positions");
        lua_pop(L, 1);
    }
    if (given) att = 1;
    r->n_att = 0;
    if (given) {
        lua_getfield(L, idx, "positions");
        r->n_att = (int)luaL_len(L, -1);
        lua_pop(L, 1);
        if (r->n_att < 1) luaL_argerror(L, idx, "option 'positions' is an empty list");
    } else if (att) {
        r->n_att = n;
    }
    if (r->n_att > n) luaL_argerror(L, idx, "option 'positions' lists more positions than tokens");
    r->pos = lua_newuserdatauv(L, (size_t)(r->n_att ? r->n_att : 1) * sizeof(int32_t), 0);
    for (int i = 0; i < r->n_att; i++) {
        if (!given) {
            r->pos[i] = pos0 + i;
            continue;
        }
        lua_getfield(L, idx, "positions");
        lua_rawgeti(L, -1, i + 1);
        int ok;
        lua_Integer p = lua_tointegerx(L, -1, &ok);
        lua_pop(L, 2);
        if (!ok) luaL_argerror(L, idx, lua_pushfstring(L, "positions[%d] is not an integer", i + 1));
        if (p < 0) p += pos0 + n;
        if (p < pos0 || p >= pos0 + n)
            luaL_argerror(L, idx, lua_pushfstring(L, "positions[%d] = %I is not a position of "
                                                  "this call [%d, %d)", i + 1, (LUAI_UACINT)p,
                                                  pos0, pos0 + n));
        r->pos[i] = (int32_t)p;
    }
    if (r->n_att && (size_t)c->n_layer * (size_t)r->n_att * (size_t)c->n_head *
                            (size_t)(pos0 + n) > MAX_ATTENTION_FLOATS)
        luaL_argerror(L, idx, lua_pushfstring(L, "attentions of %d positions over %d keys are "
                                              "too many floats: choose fewer 'positions'",
                                              r->n_att, pos0 + n));
    return r->hidden || r->n_att;
}

/* Push the Tensors the probe fills (hidden [L + 1, n, C], attention [L, n_att, NH, T]) and
 * point the probe at them; *hidx / *aidx get their stack indices (0 when not asked). */
static void push_probe(lua_State *L, const wb_config *c, int n, int T, const inspect_req *r,
                       wb_probe *p, int *hidx, int *aidx) {
    memset(p, 0, sizeof *p);
    *hidx = *aidx = 0;
    if (r->hidden) {
        p->hidden = lwb_push_tensor(L, 3, (const int64_t[]){c->n_layer + 1, n, c->n_embd});
        *hidx = lua_gettop(L);
    }
    if (r->n_att) {
        p->attention = lwb_push_tensor(
            L, 4, (const int64_t[]){c->n_layer, r->n_att, c->n_head, T});
        p->att_pos = r->pos;
        p->n_att = r->n_att;
        *aidx = lua_gettop(L);
    }
}

/* Push {hidden_states =, attentions =, positions =} for a filled probe. */
static void push_inspection(lua_State *L, const inspect_req *r, int hidx, int aidx) {
    lua_createtable(L, 0, 3);
    if (hidx) {
        lua_pushvalue(L, hidx);
        lua_setfield(L, -2, "hidden_states");
    }
    if (aidx) {
        lua_pushvalue(L, aidx);
        lua_setfield(L, -2, "attentions");
        lwb_push_ids(L, r->pos, (size_t)r->n_att);
        lua_setfield(L, -2, "positions");
    }
}

/* model:forward(ids [, {all =, hidden_states =, attentions =, positions =}]) -> {logits =,
 * hidden_states =, attentions =, positions =}: one uncached forward pass and its insides. */
static int model_forward(lua_State *L) {
    wb_model *m = checkmodel(L, 1);
    const wb_config *cfg = wb_model_config(m);
    lwb_check_options(L, 3, (const char *const[]){"all", INSPECT_KEYS, NULL});
    int all = lwb_opt_bool(L, 3, "all", 0);
    size_t n;
    int32_t *ids = lwb_check_ids(L, 2, cfg->vocab_size, &n);
    luaL_argcheck(L, n >= 1, 2, "need at least one token id");
    if (n > (size_t)cfg->n_ctx)
        luaL_argerror(L, 2, lua_pushfstring(L, "%d ids exceed the context of %d", (int)n,
                                            (int)cfg->n_ctx));
    inspect_req r;
    int want = check_inspect(L, 3, cfg, 0, (int)n, &r);
    wb_probe p;
    int hidx, aidx;
    push_probe(L, cfg, (int)n, (int)n, &r, &p, &hidx, &aidx);
    const size_t V = (size_t)cfg->vocab_size;
    float *out = all ? lua_newuserdatauv(L, n * V * sizeof(float), 0) : lwb_push_vec(L, V);
    const int oidx = lua_gettop(L);
    wb_err err = {0};
    if (wb_model_forward_inspect(m, ids, (int)n, out, all, want ? &p : NULL, &err) != WB_OK)
        return lwb_raise(L, &err);
    push_inspection(L, &r, hidx, aidx);
    if (all) push_rows(L, out, (int)n, cfg->vocab_size);
    else lua_pushvalue(L, oidx);
    lua_setfield(L, -2, "logits");
    return 1;
}

/* model:head(x) -> logits Vec: the final norm and the output head applied to a Vec of n_embd
 * floats of the residual stream (the logit lens over hidden_states). */
static int model_head(lua_State *L) {
    wb_model *m = checkmodel(L, 1);
    const wb_config *cfg = wb_model_config(m);
    size_t n;
    const float *x = lwb_check_vec(L, 2, &n);
    if (n != (size_t)cfg->n_embd)
        luaL_argerror(L, 2, lua_pushfstring(L, "a Vec of n_embd = %d floats expected, got %d",
                                            (int)cfg->n_embd, (int)n));
    float *out = lwb_push_vec(L, (size_t)cfg->vocab_size);
    wb_err err = {0};
    if (wb_model_head(m, x, 1, out, &err) != WB_OK) return lwb_raise(L, &err);
    return 1;
}

static int model_session(lua_State *L) {
    Model *mu = checkmodelud(L, 1);
    wb_model *m = checkmodel(L, 1);
    lwb_check_options(L, 2, (const char *const[]){"n_ctx", NULL});
    lua_Integer n_ctx = lwb_opt_integer(L, 2, "n_ctx", 0);
    luaL_argcheck(L, n_ctx >= 0 && n_ctx <= INT32_MAX, 2, "n_ctx must be non-negative");
    Session *s = lua_newuserdatauv(L, sizeof *s, 1);
    s->s = NULL;
    s->owner = NULL;
    s->native = 0;
    s->epoch = 0;
    luaL_setmetatable(L, SESSION);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    wb_err err = {0};
    if (wb_session_new(m, (int)n_ctx, &s->s, &err) != WB_OK) return lwb_raise(L, &err);
    s->native = wb_session_cache_bytes(s->s);
    lwb_native_alloc(L, s->native);
    s->owner = mu;
    mu->users++;
    return 1;
}

/* model:save_gguf(path, {type = "f32"|"f16"|"bf16"|"q8_0"|"q4_0", name = "...",
 *                        chat_template = text | false}): the model, its tokenizer and (unless
 * false) its directory's chat template as one GGUF file llama.cpp loads. */
static int model_save_gguf(lua_State *L) {
    wb_model *m = checkmodel(L, 1);
    const char *path = luaL_checkstring(L, 2);
    lwb_check_options(L, 3, (const char *const[]){"type", "name", "chat_template", NULL});
    static const char *const types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", NULL};
    static const int ggml[] = {WB_GGML_F32, WB_GGML_F16, WB_GGML_BF16, WB_GGML_Q8_0, WB_GGML_Q4_0};
    wb_gguf_save_params p = wb_gguf_save_default_params();
    int own_tpl = 1;
    const char *tpl_opt = NULL;
    if (lua_istable(L, 3)) {
        if (lua_getfield(L, 3, "type") != LUA_TNIL) {
            luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, 3, "option 'type' must be a string");
            int i = 0;
            const char *t = lua_tostring(L, -1);
            while (types[i] && strcmp(types[i], t)) i++;
            if (!types[i])
                return luaL_argerror(L, 3, lua_pushfstring(L, "option 'type' = '%s': expected "
                                     "f32, f16, bf16, q8_0 or q4_0", t));
            p.type = ggml[i];
        }
        lua_pop(L, 1);
        if (lua_getfield(L, 3, "name") != LUA_TNIL) {
            luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, 3, "option 'name' must be a string");
            p.name = lua_tostring(L, -1);
        }
        lua_pop(L, 1); /* the table keeps the string alive */
        const int tt = lua_getfield(L, 3, "chat_template");
        if (tt == LUA_TSTRING) own_tpl = 0, tpl_opt = lua_tostring(L, -1);
        else if (tt == LUA_TBOOLEAN && !lua_toboolean(L, -1)) own_tpl = 0;
        else if (tt != LUA_TNIL)
            return luaL_argerror(L, 3, "option 'chat_template' must be a string or false");
        lua_pop(L, 1);
    }
    wb_err err = {0};
    char *tpl = NULL;
    if (own_tpl && wb_model_chat_template_text(m, &tpl, &err) != WB_OK) return lwb_raise(L, &err);
    wb_status s = wb_model_save_gguf_ex(m, wb_model_tokenizer(m), own_tpl ? tpl : tpl_opt, path,
                                        &p, &err);
    free(tpl);
    if (s != WB_OK) return lwb_raise(L, &err);
    lua_pushstring(L, path);
    return 1;
}

static int model_index(lua_State *L) {
    Model *mu = checkmodelud(L, 1);
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *key = lua_tostring(L, 2);
        if (strcmp(key, "tokenizer") == 0 || strcmp(key, "config") == 0 ||
            strcmp(key, "dir") == 0) {
            if (!mu->m) return luaL_error(L, "attempt to use a closed Model");
            if (key[0] == 't') lua_getiuservalue(L, 1, MODEL_UV_TOKENIZER);
            else if (key[0] == 'c') lua_getiuservalue(L, 1, MODEL_UV_CONFIG);
            else lua_pushstring(L, wb_model_dir(mu->m));
            return 1;
        }
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

static int model_tostring(lua_State *L) {
    Model *mu = checkmodelud(L, 1);
    if (!mu->m) {
        lua_pushliteral(L, "Model (closed)");
        return 1;
    }
    const wb_config *c = wb_model_config(mu->m);
    lua_pushfstring(L, "Model %s (%I parameters, %d layers, %d heads, n_embd %d, vocab %d, "
                       "n_ctx %d)",
                    wb_model_dir(mu->m), (LUAI_UACINT)wb_model_num_parameters(mu->m),
                    (int)c->n_layer, (int)c->n_head, (int)c->n_embd, (int)c->vocab_size,
                    (int)c->n_ctx);
    return 1;
}

/* ---- session -------------------------------------------------------------------------------- */

static Session *checksessionud(lua_State *L, int idx) { return luaL_checkudata(L, idx, SESSION); }

static wb_session *checksession(lua_State *L, int idx) {
    Session *s = checksessionud(L, idx);
    if (!s->s) luaL_error(L, "attempt to use a closed Session");
    return s->s;
}

static int session_gc(lua_State *L) {
    Session *s = checksessionud(L, 1);
    if (s->s) {
        wb_session_free(s->s);
        s->s = NULL;
        s->epoch++; /* Tensor views of the cache now refuse to read */
        lwb_native_free(s->native);
        s->native = 0;
        if (s->owner) s->owner->users--;
        s->owner = NULL;
    }
    return 0;
}

static int32_t session_vocab(wb_session *s) {
    return wb_model_config(wb_session_model(s))->vocab_size;
}

/* s:prefill(ids [, {all =, hidden_states =, attentions =, positions =}]) -> logits [, insides] */
static int session_prefill(lua_State *L) {
    wb_session *s = checksession(L, 1);
    const wb_config *cfg = wb_model_config(wb_session_model(s));
    lwb_check_options(L, 3, (const char *const[]){"all", INSPECT_KEYS, NULL});
    int all = lwb_opt_bool(L, 3, "all", 0);
    int32_t V = session_vocab(s);
    size_t n;
    int32_t *ids = lwb_check_ids(L, 2, V, &n);
    luaL_argcheck(L, n >= 1, 2, "need at least one token id");
    int room = wb_session_n_ctx(s) - wb_session_pos(s);
    if (n > (size_t)room)
        luaL_argerror(L, 2, lua_pushfstring(L, "%d ids do not fit: position %d of %d", (int)n,
                                            wb_session_pos(s), wb_session_n_ctx(s)));
    const int pos0 = wb_session_pos(s);
    inspect_req r;
    int want = check_inspect(L, 3, cfg, pos0, (int)n, &r);
    wb_probe p;
    int hidx, aidx;
    push_probe(L, cfg, (int)n, pos0 + (int)n, &r, &p, &hidx, &aidx);
    wb_err err = {0};
    float *out = all ? lua_newuserdatauv(L, n * (size_t)V * sizeof(float), 0)
                     : lwb_push_vec(L, (size_t)V);
    if (wb_session_prefill_inspect(s, ids, (int)n, out, all, want ? &p : NULL, &err) != WB_OK)
        return lwb_raise(L, &err);
    if (all) push_rows(L, out, (int)n, V);
    if (!want) return 1;
    push_inspection(L, &r, hidx, aidx);
    return 2;
}

/* s:decode(id [, {hidden_states =, attentions =}]) -> logits [, insides] */
static int session_decode(lua_State *L) {
    wb_session *s = checksession(L, 1);
    int32_t V = session_vocab(s);
    lua_Integer id = luaL_checkinteger(L, 2);
    if (id < 0 || id >= V)
        luaL_argerror(L, 2, lua_pushfstring(L, "token id %I out of range [0, %d)",
                                            (LUAI_UACINT)id, (int)V));
    if (wb_session_pos(s) >= wb_session_n_ctx(s))
        return luaL_error(L, "Session is full (%d tokens)", wb_session_n_ctx(s));
    lwb_check_options(L, 3, (const char *const[]){INSPECT_KEYS, NULL});
    const wb_config *cfg = wb_model_config(wb_session_model(s));
    const int pos0 = wb_session_pos(s);
    inspect_req r;
    int want = check_inspect(L, 3, cfg, pos0, 1, &r);
    wb_probe p;
    int hidx, aidx;
    push_probe(L, cfg, 1, pos0 + 1, &r, &p, &hidx, &aidx);
    float *out = lwb_push_vec(L, (size_t)V);
    wb_err err = {0};
    const int32_t one = (int32_t)id;
    if (!want) {
        if (wb_session_decode(s, one, out, &err) != WB_OK) return lwb_raise(L, &err);
        return 1;
    }
    if (wb_session_prefill_inspect(s, &one, 1, out, 0, &p, &err) != WB_OK)
        return lwb_raise(L, &err);
    push_inspection(L, &r, hidx, aidx);
    return 2;
}

/* s:kv(layer) -> keys, values: read-only Tensor views [pos, n_kv_head, head_dim] of layer
 * `layer` (0-based) of the cache, valid until the session is truncated, reset or closed. */
static int session_kv(lua_State *L) {
    wb_session *s = checksession(L, 1);
    const int nl = wb_model_config(wb_session_model(s))->n_layer;
    lua_Integer layer = luaL_checkinteger(L, 2);
    if (layer < 0 || layer >= nl)
        luaL_argerror(L, 2, lua_pushfstring(L, "layer %I out of range [0, %d)",
                                            (LUAI_UACINT)layer, nl));
    wb_kv_view kv;
    wb_err err = {0};
    if (wb_session_kv(s, (int)layer, &kv, &err) != WB_OK) return lwb_raise(L, &err);
    const int64_t shape[3] = {kv.n_tokens, kv.n_kv_head, kv.head_dim};
    const int64_t stride[3] = {(int64_t)kv.row_stride, kv.head_dim, 1};
    lwb_push_tensor_view(L, kv.k, 3, shape, stride, 1);
    lwb_push_tensor_view(L, kv.v, 3, shape, stride, 1);
    return 2;
}

static int session_pos(lua_State *L) {
    lua_pushinteger(L, wb_session_pos(checksession(L, 1)));
    return 1;
}

static int session_n_ctx(lua_State *L) {
    lua_pushinteger(L, wb_session_n_ctx(checksession(L, 1)));
    return 1;
}

static int session_reset(lua_State *L) {
    wb_session_reset(checksession(L, 1));
    checksessionud(L, 1)->epoch++;
    lua_settop(L, 1);
    return 1;
}

static int session_truncate(lua_State *L) {
    wb_session *s = checksession(L, 1);
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n < 0 || n > wb_session_pos(s))
        luaL_argerror(L, 2, lua_pushfstring(L, "length %I out of range [0, %d]", (LUAI_UACINT)n,
                                            wb_session_pos(s)));
    wb_err err = {0};
    if (wb_session_truncate(s, (int)n, &err) != WB_OK) return lwb_raise(L, &err);
    checksessionud(L, 1)->epoch++;
    lua_settop(L, 1);
    return 1;
}

static int session_fork(lua_State *L) {
    Session *src = checksessionud(L, 1);
    wb_session *s = checksession(L, 1);
    Session *f = lua_newuserdatauv(L, sizeof *f, 1);
    f->s = NULL;
    f->owner = NULL;
    f->native = 0;
    f->epoch = 0;
    luaL_setmetatable(L, SESSION);
    lua_getiuservalue(L, 1, 1);
    lua_setiuservalue(L, -2, 1);
    wb_err err = {0};
    if (wb_session_fork(s, &f->s, &err) != WB_OK) return lwb_raise(L, &err);
    f->native = wb_session_cache_bytes(f->s);
    lwb_native_alloc(L, f->native);
    f->owner = src->owner;
    if (f->owner) f->owner->users++;
    return 1;
}

static int session_tokens(lua_State *L) {
    wb_session *s = checksession(L, 1);
    lwb_push_ids(L, wb_session_tokens(s), (size_t)wb_session_pos(s));
    return 1;
}

static int session_cache_bytes(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)wb_session_cache_bytes(checksession(L, 1)));
    return 1;
}

static int session_model(lua_State *L) {
    checksession(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int session_tostring(lua_State *L) {
    Session *s = checksessionud(L, 1);
    if (!s->s) lua_pushliteral(L, "Session (closed)");
    else lua_pushfstring(L, "Session (%d of %d tokens)", wb_session_pos(s->s),
                         wb_session_n_ctx(s->s));
    return 1;
}

/* ---- registration ----------------------------------------------------------------------------- */

static const luaL_Reg model_methods[] = {
    {"num_parameters", model_num_parameters},
    {"info", model_info},
    {"batch_variant", model_batch_variant},
    {"save_gguf", model_save_gguf},
    {"logits", model_logits},
    {"forward", model_forward},
    {"head", model_head},
    {"session", model_session},
    {"close", model_close},
    {NULL, NULL},
};

static const luaL_Reg model_meta[] = {
    {"__gc", model_gc},
    {"__close", model_close},
    {"__tostring", model_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

static const luaL_Reg session_methods[] = {
    {"prefill", session_prefill},
    {"decode", session_decode},
    {"pos", session_pos},
    {"n_ctx", session_n_ctx},
    {"reset", session_reset},
    {"truncate", session_truncate},
    {"fork", session_fork},
    {"tokens", session_tokens},
    {"cache_bytes", session_cache_bytes},
    {"model", session_model},
    {"kv", session_kv},
    {"close", session_gc},
    {NULL, NULL},
};

static const luaL_Reg session_meta[] = {
    {"__gc", session_gc},
    {"__close", session_gc},
    {"__tostring", session_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

void lwb_open_model(lua_State *L) {
    luaL_newmetatable(L, MODEL);
    luaL_setfuncs(L, model_meta, 0);
    luaL_newlibtable(L, model_methods);
    luaL_setfuncs(L, model_methods, 0);
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, model_index, 1); /* fields (config, tokenizer, dir) then methods */
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Model");
    lua_pop(L, 1);

    luaL_newmetatable(L, SESSION);
    luaL_setfuncs(L, session_meta, 0);
    luaL_newlibtable(L, session_methods);
    luaL_setfuncs(L, session_methods, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Session");
    lua_pop(L, 1);

    lua_pushcfunction(L, l_load);
    lua_setfield(L, -2, "load");
    lua_pushcfunction(L, l_native_bytes);
    lua_setfield(L, -2, "native_bytes");
}
