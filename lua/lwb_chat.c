/* lwb_chat.c - wb.ChatTemplate / wb.chat_template(dir), model:chat_prompt, and the model-directory
 * defaults of model:generate / model:chat / model:stream / model:stream_chat.
 *
 * The opener runs after lwb_open_sampling and wraps the generation methods it installed: a call
 * on a model whose directory has a generation_config.json starts from that file's sampling
 * parameters for every parameter the caller leaves unset (opts.defaults = "none" turns this off),
 * and model:generate / model:chat report params_used and params_source in the result (model:stream
 * / model:stream_chat on the stream and its results, lwb_stream_set_params). model:chat
 * renders its messages with the directory's chat template, parsed once per model and cached.
 *
 * Messages, tools and documents are Lua tables (encoded with wb.json.encode: keys of a table in
 * byte order, wb.json.array() for an empty list) or JSON text, which keeps key order as written
 * (it shows wherever a template applies tojson). */
#include "lwb.h"
#include "wb_chat.h"
#include "wb_generation_config.h"
#include "wb_sampler.h"

#include <string.h>

#define CHAT "wb.ChatTemplate"
#define REG_ENCODE "wb.chat.json_encode"
#define REG_TPL_CACHE "wb.chat.template_cache"
#define REG_GEN_CACHE "wb.chat.generation_cache"

typedef struct Chat {
    wb_chat_template *t; /* NULL once closed */
} Chat;

static wb_chat_template *checkchat(lua_State *L, int idx) {
    Chat *c = luaL_checkudata(L, idx, CHAT);
    if (!c->t) luaL_error(L, "attempt to use a closed ChatTemplate");
    return c->t;
}

/* The value at idx as JSON text (a string is taken as JSON already); NULL for nil. The text is
 * left on the stack (returned pointer valid while it stays there): pushes exactly one value. */
static const char *as_json(lua_State *L, int idx, const char *what) {
    idx = lua_absindex(L, idx);
    int t = lua_type(L, idx);
    if (t == LUA_TNIL) {
        lua_pushnil(L);
        return NULL;
    }
    if (t == LUA_TSTRING) {
        lua_pushvalue(L, idx);
        return lua_tostring(L, -1);
    }
    if (t != LUA_TTABLE) luaL_error(L, "%s must be a table or JSON text, not a %s", what, luaL_typename(L, idx));
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ENCODE);
    lua_pushvalue(L, idx);
    lua_call(L, 1, 1);
    return lua_tostring(L, -1);
}

static const char *const k_render_opts[] = {"add_generation_prompt", "tools", "documents", "template", "vars",
                                            "now", NULL};

/* Render messages (slot `mi`) with options table `oi` (render keys only); pushes the text. */
static void render_to_stack(lua_State *L, const wb_chat_template *t, int mi, int oi, int default_gen) {
    mi = lua_absindex(L, mi);
    oi = lua_absindex(L, oi);
    int top = lua_gettop(L);
    int has = lua_type(L, oi) == LUA_TTABLE;
    wb_chat_render_params p = wb_chat_render_default_params();
    p.add_generation_prompt = default_gen;
    if (has) {
        if (lua_getfield(L, oi, "add_generation_prompt") != LUA_TNIL) {
            luaL_argcheck(L, lua_isboolean(L, -1), oi, "option 'add_generation_prompt' must be a boolean");
            p.add_generation_prompt = lua_toboolean(L, -1);
        }
        lua_pop(L, 1);
        lua_getfield(L, oi, "tools");
        p.tools_json = as_json(L, -1, "option 'tools'");
        lua_getfield(L, oi, "documents");
        p.documents_json = as_json(L, -1, "option 'documents'");
        lua_getfield(L, oi, "vars");
        p.extra_json = as_json(L, -1, "option 'vars'");
        if (lua_getfield(L, oi, "template") != LUA_TNIL) {
            luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING, oi, "option 'template' must be a template name");
            p.template_name = lua_tostring(L, -1);
        }
        if (lua_getfield(L, oi, "now") != LUA_TNIL) {
            luaL_argcheck(L, lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 0, oi,
                          "option 'now' must be seconds since the epoch");
            p.now = (int64_t)lua_tointeger(L, -1);
        }
    }
    luaL_argcheck(L, lua_type(L, mi) == LUA_TTABLE || lua_type(L, mi) == LUA_TSTRING, mi,
                  "messages must be a list of {role=, content=, ...} or JSON text");
    size_t ml;
    const char *mj = as_json(L, mi, "messages");
    ml = lua_rawlen(L, -1);
    char *text = NULL;
    size_t len = 0;
    wb_err err = {0};
    if (wb_chat_render_json(t, mj, ml, &p, &text, &len, &err) != WB_OK) lwb_raise(L, &err);
    lua_settop(L, top);
    lua_pushlstring(L, text, len);
    wb_free(text);
}

static int l_chat_template(lua_State *L) {
    const char *dir = luaL_checkstring(L, 1);
    Chat *c = lua_newuserdatauv(L, sizeof *c, 0);
    c->t = NULL;
    luaL_setmetatable(L, CHAT);
    wb_err err = {0};
    if (wb_chat_template_load(dir, &c->t, &err) != WB_OK) return lwb_raise(L, &err);
    return 1;
}

/* tpl:render(messages, {add_generation_prompt=, tools=, documents=, template=, vars=, now=}) */
static int c_render(lua_State *L) {
    wb_chat_template *t = checkchat(L, 1);
    lwb_check_options(L, 3, k_render_opts);
    render_to_stack(L, t, 2, 3, 0);
    return 1;
}

static int c_gc(lua_State *L) {
    Chat *c = luaL_checkudata(L, 1, CHAT);
    wb_chat_template_free(c->t);
    c->t = NULL;
    return 0;
}

static void push_opt_string(lua_State *L, const char *s) {
    if (s) lua_pushstring(L, s);
    else lua_pushnil(L);
}

/* Fields first (eos_ids, eos_token, bos_token, add_bos_token, source, names), then methods. */
static int c_index(lua_State *L) {
    wb_chat_template *t = checkchat(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "eos_ids") == 0) {
        size_t n = 0;
        const int32_t *ids = wb_chat_eos_ids(t, &n);
        lwb_push_ids(L, ids, n);
    } else if (strcmp(k, "eos_token") == 0) {
        push_opt_string(L, wb_chat_eos_token(t));
    } else if (strcmp(k, "bos_token") == 0) {
        push_opt_string(L, wb_chat_bos_token(t));
    } else if (strcmp(k, "add_bos_token") == 0) {
        int a = wb_chat_add_bos_token(t);
        if (a < 0) lua_pushnil(L);
        else lua_pushboolean(L, a);
    } else if (strcmp(k, "source") == 0) {
        lua_pushstring(L, wb_chat_source(t));
    } else if (strcmp(k, "names") == 0) {
        size_t n = wb_chat_template_count(t);
        lua_createtable(L, (int)n, 0);
        for (size_t i = 0; i < n; i++) {
            lua_pushstring(L, wb_chat_template_name(t, i));
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
    } else {
        lua_getfield(L, lua_upvalueindex(1), k);
    }
    return 1;
}

static int c_tostring(lua_State *L) {
    Chat *c = luaL_checkudata(L, 1, CHAT);
    if (!c->t) lua_pushliteral(L, "wb.ChatTemplate (closed)");
    else lua_pushfstring(L, "wb.ChatTemplate (%s)", wb_chat_source(c->t));
    return 1;
}

/* ---- per-model caches ------------------------------------------------------------------------- */

/* The model's chat template (slot mi holds the Model), loaded and parsed on first use. */
static const wb_chat_template *model_template(lua_State *L, int mi) {
    mi = lua_absindex(L, mi);
    wb_model *m = lwb_check_model(L, mi);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_TPL_CACHE);
    lua_pushvalue(L, mi);
    if (lua_rawget(L, -2) == LUA_TUSERDATA) {
        const wb_chat_template *t = checkchat(L, -1);
        lua_pop(L, 2);
        return t;
    }
    lua_pop(L, 1);
    Chat *c = lua_newuserdatauv(L, sizeof *c, 0);
    c->t = NULL;
    luaL_setmetatable(L, CHAT);
    wb_err err = {0};
    if (wb_model_chat_template_load(m, &c->t, &err) != WB_OK) lwb_raise(L, &err);
    lua_pushvalue(L, mi);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
    const wb_chat_template *t = c->t;
    lua_pop(L, 2);
    return t;
}

/* Push the model's generation defaults as a params-shaped table (empty when the directory has no
 * generation_config.json), cached per model. */
static void push_model_defaults(lua_State *L, int mi) {
    mi = lua_absindex(L, mi);
    wb_model *m = lwb_check_model(L, mi);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_GEN_CACHE);
    lua_pushvalue(L, mi);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    wb_generation_config *g = NULL;
    wb_err err = {0};
    if (wb_generation_config_load(wb_model_dir(m), &g, &err) != WB_OK) lwb_raise(L, &err);
    const wb_generation_defaults *d = wb_generation_config_defaults(g);
    lua_createtable(L, 0, 8);
    if (d) {
        if (d->has_temperature) {
            lua_pushnumber(L, d->temperature);
            lua_setfield(L, -2, "temperature");
        }
        if (d->has_do_sample && !d->do_sample) { /* transformers: do_sample=false is greedy */
            lua_pushnumber(L, 0);
            lua_setfield(L, -2, "temperature");
        }
        if (d->has_top_p) {
            lua_pushnumber(L, d->top_p);
            lua_setfield(L, -2, "top_p");
        }
        if (d->has_top_k) {
            lua_pushinteger(L, d->top_k);
            lua_setfield(L, -2, "top_k");
        }
        if (d->has_min_p) {
            lua_pushnumber(L, d->min_p);
            lua_setfield(L, -2, "min_p");
        }
        if (d->has_repetition_penalty) {
            lua_pushnumber(L, d->repetition_penalty);
            lua_setfield(L, -2, "repetition_penalty");
        }
        if (d->has_max_new_tokens) {
            lua_pushinteger(L, d->max_new_tokens);
            lua_setfield(L, -2, "max_tokens");
        }
    }
    wb_generation_config_free(g);
    lua_pushvalue(L, mi);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
    lua_remove(L, -2);
}

/* ---- generation wrappers ---------------------------------------------------------------------- */

static const char *const k_sampling_keys[] = {"temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                                              "frequency_penalty", "presence_penalty", "max_tokens", NULL};

/* A copy of the table at idx without the listed keys (nil stays nil). Pushes one value. */
static void push_without(lua_State *L, int idx, const char *const *drop) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_pushvalue(L, idx);
        return;
    }
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int skip = 0;
        if (lua_type(L, -2) == LUA_TSTRING)
            for (int i = 0; drop[i]; i++)
                if (strcmp(lua_tostring(L, -2), drop[i]) == 0) skip = 1;
        if (skip) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
}

/* Slots 1..4 = model, prompt, params, opts. Replaces 3 by the params with the model's defaults
 * filled in and 4 by opts without `defaults`; pushes the report table
 * {params_used = {...}, params_source = {...}} at slot 5. */
static void apply_defaults(lua_State *L) {
    int use = 1;
    if (lua_type(L, 4) == LUA_TTABLE) {
        if (lua_getfield(L, 4, "defaults") != LUA_TNIL) {
            const char *d = lua_tostring(L, -1);
            if (lua_type(L, -1) != LUA_TSTRING || (strcmp(d, "none") && strcmp(d, "model")))
                luaL_argerror(L, 4, "option 'defaults' must be \"model\" or \"none\"");
            use = strcmp(d, "model") == 0;
        }
        lua_pop(L, 1);
        push_without(L, 4, (const char *const[]){"defaults", NULL});
        lua_replace(L, 4);
    }
    luaL_argcheck(L, lua_isnoneornil(L, 3) || lua_type(L, 3) == LUA_TTABLE, 3, "params must be a table");
    if (use) push_model_defaults(L, 1);
    else lua_newtable(L);
    int dflt = lua_gettop(L);
    /* merged params: the caller's keys, then the defaults' keys the caller left unset */
    push_without(L, 3, (const char *const[]){NULL});
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
    }
    int merged = lua_gettop(L);
    lua_createtable(L, 0, 2);
    int report = lua_gettop(L);
    lua_newtable(L); /* used */
    lua_newtable(L); /* source */
    int used = report + 1, source = report + 2;
    wb_sampling_params base = wb_sampling_default_params();
    for (int i = 0; k_sampling_keys[i]; i++) {
        const char *k = k_sampling_keys[i];
        if (lua_getfield(L, merged, k) != LUA_TNIL) {
            lua_setfield(L, used, k);
            lua_pushliteral(L, "caller");
        } else if (lua_getfield(L, dflt, k) != LUA_TNIL) {
            lua_pushvalue(L, -1);
            lua_setfield(L, merged, k);
            lua_setfield(L, used, k);
            lua_pop(L, 1);
            lua_pushliteral(L, "generation_config.json");
        } else {
            lua_pop(L, 2);
            double v = !strcmp(k, "temperature") ? base.temperature
                       : !strcmp(k, "top_k") ? base.top_k
                       : !strcmp(k, "top_p") ? base.top_p
                       : !strcmp(k, "min_p") ? base.min_p
                       : !strcmp(k, "repetition_penalty") ? base.repetition_penalty
                       : !strcmp(k, "frequency_penalty") ? base.frequency_penalty
                       : !strcmp(k, "presence_penalty") ? base.presence_penalty
                                                        : base.max_tokens;
            if (!strcmp(k, "top_k") || !strcmp(k, "max_tokens")) lua_pushinteger(L, (lua_Integer)v);
            else lua_pushnumber(L, (lua_Number)(float)v);
            lua_setfield(L, used, k);
            lua_pushliteral(L, "default");
        }
        lua_setfield(L, source, k);
    }
    /* generation also ends at the directory's eos ids (read by the model at load) */
    size_t n = 0;
    const int32_t *eos = wb_model_eos_ids(lwb_check_model(L, 1), &n);
    lwb_push_ids(L, eos, n);
    lua_setfield(L, used, "eos_token_ids");
    lua_pushstring(L, n ? "generation_config.json" : "tokenizer");
    lua_setfield(L, source, "eos_token_ids");
    lua_setfield(L, report, "params_source");
    lua_setfield(L, report, "params_used");
    lua_pushvalue(L, merged);
    lua_replace(L, 3);
    lua_replace(L, dflt); /* the report takes the defaults' slot, 5 */
    lua_settop(L, 5);
}

/* Call upvalue 1 (the binding's generate or stream) with slots 1..4; annotate a generate result. */
static int call_original(lua_State *L, int annotate) {
    lua_pushvalue(L, lua_upvalueindex(1));
    for (int i = 1; i <= 4; i++) lua_pushvalue(L, i);
    if (!annotate) {
        lua_call(L, 4, LUA_MULTRET);
        /* the stream (first result) carries the report as fields and in its results */
        if (lua_gettop(L) >= 6 && luaL_testudata(L, 6, "wb.Stream")) lwb_stream_set_params(L, 6, 5);
        return lua_gettop(L) - 5;
    }
    lua_call(L, 4, 1);
    if (lua_type(L, -1) == LUA_TTABLE) {
        lua_getfield(L, 5, "params_used");
        lua_setfield(L, -2, "params_used");
        lua_getfield(L, 5, "params_source");
        lua_setfield(L, -2, "params_source");
    }
    return 1;
}

static int w_generate(lua_State *L) {
    lua_settop(L, 4);
    apply_defaults(L);
    return call_original(L, 1);
}

static int w_stream(lua_State *L) {
    lua_settop(L, 4);
    apply_defaults(L);
    return call_original(L, 0);
}

/* model:chat(messages, params, opts): opts takes the render options too (tools, documents,
 * template, vars, now, add_generation_prompt, default true). */
static void render_chat_prompt(lua_State *L) {
    const wb_chat_template *t = model_template(L, 1);
    if (lua_type(L, 4) == LUA_TTABLE) {
        lua_createtable(L, 0, 6);
        for (int i = 0; k_render_opts[i]; i++) {
            lua_getfield(L, 4, k_render_opts[i]);
            lua_setfield(L, -2, k_render_opts[i]);
        }
    } else {
        lua_pushnil(L);
    }
    render_to_stack(L, t, 2, -1, 1);
    lua_replace(L, 2);
    lua_pop(L, 1);
    push_without(L, 4, k_render_opts);
    lua_replace(L, 4);
}

static int w_chat(lua_State *L) {
    lua_settop(L, 4);
    render_chat_prompt(L);
    apply_defaults(L);
    return call_original(L, 1);
}

static int w_stream_chat(lua_State *L) {
    lua_settop(L, 4);
    render_chat_prompt(L);
    apply_defaults(L);
    return call_original(L, 0);
}

/* model:chat_prompt(messages, opts) -> text, ids (the ids apply_chat_template(tokenize=True)
 * gives: the text encoded without adding special tokens, since the template wrote them). */
static int m_chat_prompt(lua_State *L) {
    lua_settop(L, 3);
    wb_model *m = lwb_check_model(L, 1);
    lwb_check_options(L, 3, k_render_opts);
    const wb_chat_template *t = model_template(L, 1);
    render_to_stack(L, t, 2, 3, 1);
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    int32_t *ids = NULL;
    size_t n = 0;
    wb_err err = {0};
    /* the prompt is model input: no truncation or padding from tokenizer.json (wb_tokenizer.h) */
    wb_tokenizer_encode_params ep = {.truncation = 0, .padding = 0};
    if (wb_tokenizer_encode_with(wb_model_tokenizer(m), text, len, &ep, &ids, &n, NULL, &err) != WB_OK)
        return lwb_raise(L, &err);
    /* building the table can raise (out of memory): copy into a GC'd buffer first */
    int32_t *copy = lua_newuserdatauv(L, (n > 0 ? n : 1) * sizeof(int32_t), 0);
    if (n) memcpy(copy, ids, n * sizeof(int32_t));
    wb_free(ids);
    lwb_push_ids(L, copy, n);
    lua_remove(L, -2);
    return 2;
}

static const luaL_Reg chat_methods[] = {
    {"render", c_render},
    {"close", c_gc},
    {NULL, NULL},
};

static const luaL_Reg chat_meta[] = {
    {"__gc", c_gc},
    {"__close", c_gc},
    {"__tostring", c_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

static void wrap_method(lua_State *L, const char *name, const char *original, lua_CFunction fn) {
    if (lua_getfield(L, -1, original) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        return;
    }
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, -2, name);
}

void lwb_open_chat(lua_State *L) {
    luaL_newmetatable(L, CHAT);
    luaL_setfuncs(L, chat_meta, 0);
    luaL_newlibtable(L, chat_methods);
    luaL_setfuncs(L, chat_methods, 0);
    lua_pushcclosure(L, c_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_chat_template);
    lua_setfield(L, -2, "chat_template");

    /* wb.json.encode, for message tables */
    if (lua_getfield(L, -1, "json") == LUA_TTABLE) {
        lua_getfield(L, -1, "encode");
        lua_setfield(L, LUA_REGISTRYINDEX, REG_ENCODE);
    }
    lua_pop(L, 1);
    /* caches keyed by the Model userdata, weak so a dropped model frees its template */
    for (int i = 0; i < 2; i++) {
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, i ? REG_GEN_CACHE : REG_TPL_CACHE);
    }
    if (lua_getfield(L, -1, "Model") == LUA_TTABLE) {
        wrap_method(L, "chat", "generate", w_chat);
        wrap_method(L, "stream_chat", "stream", w_stream_chat);
        wrap_method(L, "generate", "generate", w_generate);
        wrap_method(L, "stream", "stream", w_stream);
        lua_pushcfunction(L, m_chat_prompt);
        lua_setfield(L, -2, "chat_prompt");
    }
    lua_pop(L, 1);
}
