/* lwb_constraint.c - wb.constraint: choice, regex, json_schema and Lua-function constraints
 * (wb.Constraint) and their cursors (wb.ConstraintState).
 *
 *   local c = wb.constraint.choice(model.tokenizer, {"billing", "account"})
 *   local r = model:generate("Ticket: ...\nCategory:", {temperature = 0}, {constraint = c})
 *   -- r.stop_reason == "constraint", r.constraint_mass[i], r.constraint_logprob
 *
 * Generators retain the compiled constraint (wb_constraint_retain), so closing it under a running
 * stream is safe: the stream keeps its reference, and a Lua function whose registry entry is gone
 * makes the next step fail with a clear error instead of a crash. The userdata layout
 * (lwb_Constraint) is published in lwb.h for lwb_sampling.c and lwb_batch.c. */
#include "lwb.h"

#include <string.h>

#define CONSTRAINT LWB_CONSTRAINT
#define CSTATE "wb.ConstraintState"

typedef lwb_Constraint LConstraint; /* the layout is published in lwb.h */

typedef struct LState {
    wb_constraint_state *s; /* NULL once closed */
} LState;

static LConstraint *check_constraint(lua_State *L, int idx) {
    LConstraint *lc = luaL_checkudata(L, idx, CONSTRAINT);
    if (!lc->c) luaL_error(L, "attempt to use a closed Constraint");
    return lc;
}

/* Allocate the userdata first, so a failing compile cannot leak anything. */
static LConstraint *new_constraint(lua_State *L) {
    LConstraint *lc = lua_newuserdatauv(L, sizeof *lc, 1);
    lc->c = NULL;
    lc->L = L;
    lc->fn_ref = LUA_NOREF;
    luaL_setmetatable(L, CONSTRAINT);
    return lc;
}

/* One function for __gc, __close and close(): idempotent. */
static int constraint_close(lua_State *L) {
    LConstraint *lc = luaL_checkudata(L, 1, CONSTRAINT);
    wb_constraint_free(lc->c); /* drops this reference; running generators hold their own */
    lc->c = NULL;
    if (lc->fn_ref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, lc->fn_ref);
        lc->fn_ref = LUA_NOREF;
    }
    return 0;
}

/* Compile with a vocab view of the tokenizer; raises on error (the userdata at the top of the
 * stack then owns nothing). */
typedef wb_status (*compile_fn)(const wb_constraint_vocab *v, void *arg, wb_constraint **out,
                                wb_err *err);

static void compile_into(lua_State *L, LConstraint *lc, const wb_tokenizer *tok, compile_fn fn,
                         void *arg) {
    wb_constraint_vocab v;
    wb_err err = {0};
    if (wb_constraint_vocab_init(&v, tok, &err) != WB_OK) lwb_raise(L, &err);
    wb_status st = fn(&v, arg, &lc->c, &err);
    wb_constraint_vocab_release(&v);
    if (st != WB_OK) lwb_raise(L, &err);
}

/* ---- choice ---------------------------------------------------------------------------------- */

typedef struct choice_arg {
    const char **s;
    size_t *len;
    int n;
    wb_leading_space space;
} choice_arg;

static wb_status do_choice(const wb_constraint_vocab *v, void *arg, wb_constraint **out,
                           wb_err *err) {
    choice_arg *a = arg;
    return wb_constraint_choice_new(v, a->s, a->len, a->n, a->space, out, err);
}

static const char *const k_choice_opts[] = {"leading_space", NULL};

/* wb.constraint.choice(tok, {"billing", ...}, {leading_space = "optional"|"none"|"always"}) */
static int l_choice(lua_State *L) {
    lua_settop(L, 3);
    const wb_tokenizer *tok = lwb_check_tokenizer(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lwb_check_options(L, 3, k_choice_opts);
    wb_leading_space space = WB_SPACE_OPTIONAL;
    if (lua_type(L, 3) == LUA_TTABLE && lua_getfield(L, 3, "leading_space") != LUA_TNIL) {
        static const char *const names[] = {"optional", "none", "always", NULL};
        static const wb_leading_space vals[] = {WB_SPACE_OPTIONAL, WB_SPACE_NONE, WB_SPACE_ALWAYS};
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_argerror(L, 3, "option 'leading_space' must be \"optional\", \"none\" or "
                          "\"always\"");
        int k = -1;
        for (int i = 0; names[i]; i++)
            if (strcmp(names[i], lua_tostring(L, -1)) == 0) k = i;
        if (k < 0)
            luaL_argerror(L, 3, lua_pushfstring(L, "option 'leading_space' = '%s' is not "
                                                "\"optional\", \"none\" or \"always\"",
                                                lua_tostring(L, -1)));
        space = vals[k];
    }
    lua_settop(L, 3);
    lua_Integer n = luaL_len(L, 2);
    if (n < 1 || n > (1 << 20)) luaL_argerror(L, 2, "needs a non-empty list of strings");
    choice_arg a;
    a.s = lua_newuserdatauv(L, (size_t)n * sizeof *a.s, 0);     /* slot 4 */
    a.len = lua_newuserdatauv(L, (size_t)n * sizeof *a.len, 0); /* slot 5 */
    a.n = (int)n;
    a.space = space;
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, 2, i) != LUA_TSTRING)
            luaL_argerror(L, 2, lua_pushfstring(L, "entry %I must be a string, got %s",
                                                (LUAI_UACINT)i, luaL_typename(L, -1)));
        a.s[i - 1] = lua_tolstring(L, -1, &a.len[i - 1]);
        lua_pop(L, 1); /* still referenced by the table */
    }
    LConstraint *lc = new_constraint(L);
    compile_into(L, lc, tok, do_choice, &a);
    return 1;
}

/* ---- regex ----------------------------------------------------------------------------------- */

typedef struct regex_arg {
    const char *p;
    size_t len;
} regex_arg;

static wb_status do_regex(const wb_constraint_vocab *v, void *arg, wb_constraint **out,
                          wb_err *err) {
    regex_arg *a = arg;
    return wb_constraint_regex_new(v, a->p, a->len, out, err);
}

/* wb.constraint.regex(tok, pattern) */
static int l_regex(lua_State *L) {
    const wb_tokenizer *tok = lwb_check_tokenizer(L, 1);
    regex_arg a;
    a.p = luaL_checklstring(L, 2, &a.len);
    LConstraint *lc = new_constraint(L);
    compile_into(L, lc, tok, do_regex, &a);
    return 1;
}

/* ---- JSON schema ----------------------------------------------------------------------------- */

static const char *const k_json_opts[] = {"whitespace", NULL};

static wb_json_ws check_ws(lua_State *L, int idx) {
    lwb_check_options(L, idx, k_json_opts);
    if (lua_type(L, idx) != LUA_TTABLE) return WB_JSON_WS_SPACE;
    wb_json_ws ws = WB_JSON_WS_SPACE;
    if (lua_getfield(L, idx, "whitespace") != LUA_TNIL) {
        const char *s = lua_tostring(L, -1);
        if (lua_type(L, -1) != LUA_TSTRING) s = "";
        if (strcmp(s, "space") == 0) ws = WB_JSON_WS_SPACE;
        else if (strcmp(s, "compact") == 0) ws = WB_JSON_WS_COMPACT;
        else if (strcmp(s, "flexible") == 0) ws = WB_JSON_WS_FLEXIBLE;
        else luaL_argerror(L, idx, "option 'whitespace' must be \"space\", \"compact\" or "
                           "\"flexible\"");
    }
    lua_pop(L, 1);
    return ws;
}

/* The schema at idx as JSON text: a string as is, a table through wb.json.encode (keys sorted,
 * so the property order comes from "required"). Pushes the text. */
static const char *schema_text(lua_State *L, int idx, size_t *len) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) {
        lua_pushvalue(L, idx);
        return lua_tolstring(L, -1, len);
    }
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "wb");
    if (lua_type(L, -1) != LUA_TTABLE || lua_getfield(L, -1, "json") != LUA_TTABLE ||
        lua_getfield(L, -1, "encode") != LUA_TFUNCTION)
        luaL_error(L, "json_schema: wb.json.encode is not available");
    lua_pushvalue(L, idx);
    lua_call(L, 1, 1);
    lua_replace(L, -5);
    lua_pop(L, 3);
    return lua_tolstring(L, -1, len);
}

typedef struct json_arg {
    const char *s;
    size_t len;
    wb_json_ws ws;
} json_arg;

static wb_status do_json(const wb_constraint_vocab *v, void *arg, wb_constraint **out,
                         wb_err *err) {
    json_arg *a = arg;
    return wb_constraint_json_schema_new(v, a->s, a->len, a->ws, out, err);
}

/* wb.constraint.json_schema(tok, schema, {whitespace = "space"|"compact"|"flexible"}) */
static int l_json_schema(lua_State *L) {
    lua_settop(L, 3);
    const wb_tokenizer *tok = lwb_check_tokenizer(L, 1);
    json_arg a;
    a.ws = check_ws(L, 3);
    a.s = schema_text(L, 2, &a.len);
    LConstraint *lc = new_constraint(L);
    compile_into(L, lc, tok, do_json, &a);
    return 1;
}

/* wb.constraint.schema_regex(schema, opts) -> the regex the schema compiles to */
static int l_schema_regex(lua_State *L) {
    lua_settop(L, 2);
    wb_json_ws ws = check_ws(L, 2);
    size_t len;
    const char *s = schema_text(L, 1, &len);
    char *re = NULL;
    size_t rl = 0;
    wb_err err = {0};
    if (wb_json_schema_to_regex(s, len, ws, &re, &rl, &err) != WB_OK) return lwb_raise(L, &err);
    lua_pushlstring(L, re, rl);
    wb_free(re);
    return 1;
}

/* ---- Lua function ---------------------------------------------------------------------------- */

/* The course's interface: allowed(generated_ids) -> a list {id, ...} or a set {[id] = true};
 * nil means no restriction this step, an empty table ends the format. Runs under lua_pcall, so
 * a Lua error becomes a core error and the generator is freed properly. */
static wb_status lua_allowed(void *ud, const int32_t *gen, size_t n, uint32_t *allowed,
                             int32_t V, int32_t *n_allowed, wb_err *err) {
    LConstraint *lc = ud;
    lua_State *L = lc->L;
    if (!L || !lua_checkstack(L, 8))
        return wb_err_set(err, WB_ERR_STATE, "constraint function: no Lua state to call");
    int top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->fn_ref);
    lwb_push_ids(L, gen, n);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        wb_err_set(err, WB_ERR_ARG, "constraint function: %s", m ? m : "(error object)");
        lua_settop(L, top);
        return WB_ERR_ARG;
    }
    wb_status st = WB_OK;
    int32_t cnt = 0;
    if (lua_isnil(L, -1)) {
        *n_allowed = -1;
    } else if (!lua_istable(L, -1)) {
        st = wb_err_set(err, WB_ERR_ARG, "constraint function must return a table of token ids "
                        "(a list or a set) or nil, got %s", luaL_typename(L, -1));
    } else {
        lua_pushnil(L);
        while (st == WB_OK && lua_next(L, -2)) {
            int isint = 0;
            lua_Integer id = -1;
            if (lua_type(L, -1) == LUA_TBOOLEAN) {
                if (lua_toboolean(L, -1)) id = lua_tointegerx(L, -2, &isint);
                else isint = -1; /* {[id] = false}: not allowed */
            } else if (lua_type(L, -1) == LUA_TNUMBER) {
                id = lua_tointegerx(L, -1, &isint);
            }
            if (isint == 0)
                st = wb_err_set(err, WB_ERR_ARG, "constraint function returned a non-integer "
                                "token id");
            else if (isint > 0 && (id < 0 || id >= V))
                st = wb_err_set(err, WB_ERR_RANGE, "constraint function returned token id %lld, "
                                "outside [0, %d)", (long long)id, (int)V);
            else if (isint > 0 && !(allowed[id >> 5] >> (id & 31) & 1u)) {
                allowed[id >> 5] |= 1u << (id & 31);
                cnt++;
            }
            lua_pop(L, 1);
        }
        *n_allowed = cnt;
    }
    lua_settop(L, top);
    return st;
}

/* Make a function constraint for V tokens from the function at idx; pushes it. */
static LConstraint *wrap_function(lua_State *L, int idx, lua_Integer V) {
    idx = lua_absindex(L, idx);
    luaL_checktype(L, idx, LUA_TFUNCTION);
    if (V < 1 || V > INT32_MAX) luaL_error(L, "constraint: vocab_size must be >= 1");
    LConstraint *lc = new_constraint(L);
    lua_pushvalue(L, idx);
    lc->fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    wb_err err = {0};
    if (wb_constraint_fn_new((int32_t)V, lua_allowed, lc, &lc->c, &err) != WB_OK)
        lwb_raise(L, &err);
    return lc;
}

/* wb.constraint.fn(tok_or_vocab_size, function(generated_ids) return set end) */
static int l_fn(lua_State *L) {
    lua_Integer V;
    if (lua_type(L, 1) == LUA_TNUMBER) V = luaL_checkinteger(L, 1);
    else V = wb_tokenizer_vocab_size(lwb_check_tokenizer(L, 1));
    wrap_function(L, 2, V);
    return 1;
}

lwb_Constraint *lwb_push_function_constraint(lua_State *L, int idx, lua_Integer vocab_size) {
    return wrap_function(L, idx, vocab_size);
}

lwb_Constraint *lwb_check_constraint(lua_State *L, int idx) { return check_constraint(L, idx); }

lwb_Constraint *lwb_test_constraint(lua_State *L, int idx) {
    return luaL_testudata(L, idx, CONSTRAINT);
}

/* ---- methods --------------------------------------------------------------------------------- */

/* c:info() -> {kind, vocab_size, states, masks, memory_bytes, compile_ms} */
static int c_info(lua_State *L) {
    LConstraint *lc = check_constraint(L, 1);
    wb_constraint_info in = wb_constraint_get_info(lc->c);
    lua_createtable(L, 0, 6);
    lua_pushstring(L, wb_constraint_kind_name(wb_constraint_kind_of(lc->c)));
    lua_setfield(L, -2, "kind");
    lua_pushinteger(L, wb_constraint_vocab_size(lc->c));
    lua_setfield(L, -2, "vocab_size");
    lua_pushinteger(L, in.n_states);
    lua_setfield(L, -2, "states");
    lua_pushinteger(L, in.n_masks);
    lua_setfield(L, -2, "masks");
    lua_pushinteger(L, (lua_Integer)in.memory_bytes);
    lua_setfield(L, -2, "memory_bytes");
    lua_pushnumber(L, in.compile_ms);
    lua_setfield(L, -2, "compile_ms");
    return 1;
}

/* c:matches(text) -> whether text is a complete match */
static int c_matches(lua_State *L) {
    LConstraint *lc = check_constraint(L, 1);
    size_t n;
    const char *s = luaL_checklstring(L, 2, &n);
    lua_pushboolean(L, wb_constraint_matches(lc->c, s, n));
    return 1;
}

static int c_tostring(lua_State *L) {
    LConstraint *lc = luaL_checkudata(L, 1, CONSTRAINT);
    if (!lc->c) lua_pushstring(L, "Constraint (closed)");
    else {
        wb_constraint_info in = wb_constraint_get_info(lc->c);
        lua_pushfstring(L, "Constraint (%s, %d states)",
                        wb_constraint_kind_name(wb_constraint_kind_of(lc->c)), (int)in.n_states);
    }
    return 1;
}

/* ---- cursor ---------------------------------------------------------------------------------- */

static LState *check_state(lua_State *L, int idx) {
    LState *ls = luaL_checkudata(L, idx, CSTATE);
    if (!ls->s) luaL_error(L, "attempt to use a closed ConstraintState");
    lua_getiuservalue(L, idx, 1);
    LConstraint *lc = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!lc || !lc->c) luaL_error(L, "the ConstraintState's Constraint was closed");
    lc->L = L;
    return ls;
}

static int state_close(lua_State *L) {
    LState *ls = luaL_checkudata(L, 1, CSTATE);
    wb_constraint_state_free(ls->s);
    ls->s = NULL;
    return 0;
}

/* c:start() -> a fresh cursor (keeps c alive) */
static int c_start(lua_State *L) {
    LConstraint *lc = check_constraint(L, 1);
    LState *ls = lua_newuserdatauv(L, sizeof *ls, 1);
    ls->s = NULL;
    luaL_setmetatable(L, CSTATE);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    wb_err err = {0};
    if (wb_constraint_state_new(lc->c, &ls->s, &err) != WB_OK) return lwb_raise(L, &err);
    return 1;
}

/* st:allowed([generated]) -> list of allowed ids (ascending), or nil for "no restriction";
 * generated is read by function constraints only. */
static int state_allowed(lua_State *L) {
    LState *ls = check_state(L, 1);
    size_t n = 0;
    const int32_t *gen = NULL;
    if (!lua_isnoneornil(L, 2)) gen = lwb_check_ids(L, 2, 0, &n);
    const uint32_t *m;
    int32_t cnt;
    wb_err err = {0};
    if (wb_constraint_state_allowed(ls->s, gen, n, &m, &cnt, &err) != WB_OK)
        return lwb_raise(L, &err);
    if (cnt < 0) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, cnt, 0);
    lua_Integer k = 0;
    lua_getiuservalue(L, 1, 1);
    int32_t V = wb_constraint_vocab_size(((LConstraint *)lua_touserdata(L, -1))->c);
    lua_pop(L, 1);
    for (int32_t i = 0; m && i < V; i++)
        if (m[i >> 5] >> (i & 31) & 1u) {
            lua_pushinteger(L, i);
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}

/* st:advance(id) */
static int state_advance(lua_State *L) {
    LState *ls = check_state(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    wb_err err = {0};
    if (id < INT32_MIN || id > INT32_MAX) luaL_argerror(L, 2, "token id out of range");
    if (wb_constraint_state_advance(ls->s, (int32_t)id, &err) != WB_OK) return lwb_raise(L, &err);
    return 0;
}

static int state_complete(lua_State *L) {
    lua_pushboolean(L, wb_constraint_state_complete(check_state(L, 1)->s));
    return 1;
}

static int state_accepting(lua_State *L) {
    lua_pushboolean(L, wb_constraint_state_accepting(check_state(L, 1)->s));
    return 1;
}

static int state_reset(lua_State *L) {
    wb_constraint_state_reset(check_state(L, 1)->s);
    return 0;
}

static const luaL_Reg constraint_methods[] = {
    {"info", c_info},   {"matches", c_matches}, {"start", c_start},
    {"close", constraint_close}, {NULL, NULL},
};

static const luaL_Reg constraint_meta[] = {
    {"__gc", constraint_close},    {"__close", constraint_close}, {"__tostring", c_tostring},
    {NULL, NULL},
};

static const luaL_Reg state_methods[] = {
    {"allowed", state_allowed}, {"advance", state_advance},     {"complete", state_complete},
    {"accepting", state_accepting}, {"reset", state_reset},     {"close", state_close},
    {NULL, NULL},
};

static const luaL_Reg state_meta[] = {
    {"__gc", state_close}, {"__close", state_close}, {NULL, NULL},
};

static const luaL_Reg constraint_funcs[] = {
    {"choice", l_choice}, {"regex", l_regex},           {"json_schema", l_json_schema},
    {"fn", l_fn},         {"schema_regex", l_schema_regex}, {NULL, NULL},
};

void lwb_open_constraint(lua_State *L) {
    luaL_newmetatable(L, CONSTRAINT);
    luaL_setfuncs(L, constraint_meta, 0);
    luaL_newlib(L, constraint_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    luaL_newmetatable(L, CSTATE);
    luaL_setfuncs(L, state_meta, 0);
    luaL_newlib(L, state_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    luaL_newlib(L, constraint_funcs);
    lua_setfield(L, -2, "constraint");
}
