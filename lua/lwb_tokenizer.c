/* lwb_tokenizer.c - wb.Tokenizer (owned or borrowed from a Model), wb.Detokenizer,
 * wb.tokenizer_load, wb.bpe_train. */
#include "lwb.h"

#include <string.h>

#define TOKENIZER LWB_TOKENIZER
#define DETOK "wb.Detokenizer"

typedef lwb_Tokenizer Tok; /* the layout is published in lwb.h */

typedef struct Detok {
    wb_detok *d; /* NULL once closed */
} Detok;

static Tok *newtok(lua_State *L) {
    Tok *t = lua_newuserdatauv(L, sizeof *t, 1);
    t->tok = NULL;
    t->owned = 1;
    t->owner_open = NULL;
    luaL_setmetatable(L, TOKENIZER);
    return t;
}

static const wb_tokenizer *checktok(lua_State *L, int idx) {
    Tok *t = luaL_checkudata(L, idx, TOKENIZER);
    if (!t->tok || (t->owner_open && !*t->owner_open))
        luaL_error(L, "attempt to use a closed Tokenizer");
    return t->tok;
}

const wb_tokenizer *lwb_check_tokenizer(lua_State *L, int idx) {
    if (luaL_testudata(L, idx, TOKENIZER)) return checktok(L, idx);
    if (luaL_testudata(L, idx, LWB_MODEL)) return wb_model_tokenizer(lwb_check_model(L, idx));
    luaL_typeerror(L, idx, "Tokenizer or Model");
    return NULL;
}

void lwb_push_borrowed_tokenizer(lua_State *L, const wb_tokenizer *tok, int owner_idx,
                                 const int *owner_open) {
    owner_idx = lua_absindex(L, owner_idx);
    Tok *t = newtok(L);
    t->tok = (wb_tokenizer *)tok; /* never freed through this userdata (owned = 0) */
    t->owned = 0;
    t->owner_open = owner_open;
    lua_pushvalue(L, owner_idx);
    lua_setiuservalue(L, -2, 1);
}

static int tok_gc(lua_State *L) {
    Tok *t = luaL_checkudata(L, 1, TOKENIZER);
    if (t->tok && t->owned) wb_tokenizer_free(t->tok);
    t->tok = NULL;
    return 0;
}

/* A borrowed tokenizer is closed with its owner, not by itself. */
static int tok_close(lua_State *L) {
    Tok *t = luaL_checkudata(L, 1, TOKENIZER);
    if (!t->owned) return 0;
    return tok_gc(L);
}

static int l_tokenizer_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    Tok *t = newtok(L);
    wb_err err = {0};
    if (wb_tokenizer_load(path, &t->tok, &err) != WB_OK) return lwb_raise(L, &err);
    return 1;
}

static int l_bpe_train(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    lwb_check_options(L, 2, (const char *const[]){"vocab_size", "special_tokens",
                                                  "min_pair_count", NULL});
    wb_bpe_train_params p = wb_bpe_train_default_params();
    lua_Integer vs = lwb_opt_integer(L, 2, "vocab_size", p.vocab_size);
    luaL_argcheck(L, vs >= 256 && vs <= (1 << 24), 2, "vocab_size must be in [256, 16777216]");
    p.vocab_size = (int32_t)vs;
    p.min_pair_count = lwb_opt_integer(L, 2, "min_pair_count", p.min_pair_count);
    luaL_argcheck(L, p.min_pair_count >= 1, 2, "min_pair_count must be at least 1");
    const char **specials = NULL;
    int nspec = 0;
    if (lua_type(L, 2) == LUA_TTABLE && lua_getfield(L, 2, "special_tokens") != LUA_TNIL) {
        luaL_argcheck(L, lua_istable(L, -1), 2, "option 'special_tokens' must be a table");
        int st = lua_gettop(L);
        lua_Integer n = luaL_len(L, st);
        luaL_argcheck(L, n >= 0 && n <= 4096, 2, "too many special tokens");
        specials = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n > 0 ? n : 1), 0);
        for (lua_Integer i = 1; i <= n; i++) {
            /* The strings stay referenced by the option table for the duration of the call. */
            if (lua_geti(L, st, i) != LUA_TSTRING)
                luaL_argerror(L, 2, lua_pushfstring(L, "special_tokens[%I] must be a string",
                                                    (LUAI_UACINT)i));
            specials[i - 1] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
        nspec = (int)n;
    }
    p.special_tokens = specials;
    p.n_special_tokens = nspec;
    p.abort_fn = lwb_abort_fn;
    p.abort_data = NULL;
    Tok *t = newtok(L);
    wb_err err = {0};
    if (wb_bpe_train(text, len, &p, &t->tok, &err) != WB_OK) return lwb_raise(L, &err);
    return 1;
}

static int32_t vocab_of(const wb_tokenizer *tok) { return wb_tokenizer_vocab_size(tok); }

static int32_t checktokid(lua_State *L, int arg, const wb_tokenizer *tok) {
    lua_Integer id = luaL_checkinteger(L, arg);
    int32_t v = vocab_of(tok);
    if (id < 0 || id >= v)
        luaL_argerror(L, arg, lua_pushfstring(L, "token id %I out of range [0, %d)",
                                              (LUAI_UACINT)id, (int)v));
    return (int32_t)id;
}

/* tok:encode(text [, {truncation = bool, padding = bool, attention_mask = bool}]): the ids, as
 * HF's encode(text, add_special_tokens=False) with tokenizer.json's truncation and padding (each
 * on unless turned off); with attention_mask = true also HF's mask (1 text, 0 padding). */
static int t_encode(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    lwb_check_options(L, 3, (const char *const[]){"truncation", "padding", "attention_mask", NULL});
    wb_tokenizer_encode_params p = wb_tokenizer_encode_default_params();
    p.truncation = lwb_opt_bool(L, 3, "truncation", 1);
    p.padding = lwb_opt_bool(L, 3, "padding", 1);
    int want_mask = lwb_opt_bool(L, 3, "attention_mask", 0);
    int32_t *ids = NULL;
    uint8_t *mask = NULL;
    size_t n = 0;
    wb_err err = {0};
    if (wb_tokenizer_encode_with(tok, text, len, &p, &ids, &n, want_mask ? &mask : NULL, &err) != WB_OK)
        return lwb_raise(L, &err);
    /* Building the tables can raise (out of memory): copy into GC'd buffers first. */
    int32_t *copy = lua_newuserdatauv(L, (n > 0 ? n : 1) * sizeof(int32_t), 0);
    uint8_t *mcopy = want_mask ? lua_newuserdatauv(L, n > 0 ? n : 1, 0) : NULL;
    if (n) memcpy(copy, ids, n * sizeof(int32_t));
    if (n && mcopy) memcpy(mcopy, mask, n);
    wb_free(ids);
    wb_free(mask);
    lwb_push_ids(L, copy, n);
    if (!want_mask) return 1;
    lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, mcopy[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 2;
}

static int t_decode(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    size_t n;
    int32_t *ids = lwb_check_ids(L, 2, vocab_of(tok), &n);
    char *text = NULL;
    size_t len = 0;
    wb_err err = {0};
    if (wb_tokenizer_decode(tok, ids, n, &text, &len, &err) != WB_OK) return lwb_raise(L, &err);
    luaL_Buffer b;
    /* lua_pushlstring may raise on memory errors; accept that rare leak rather than copying. */
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, text, len);
    wb_free(text);
    luaL_pushresult(&b);
    return 1;
}

static int t_token(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    int32_t id = checktokid(L, 2, tok);
    size_t len;
    const char *bytes = wb_tokenizer_token_bytes(tok, id, &len);
    if (!bytes) return luaL_argerror(L, 2, "token id out of range");
    lua_pushlstring(L, bytes, len);
    return 1;
}

static int t_str(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    int32_t id = checktokid(L, 2, tok);
    const char *s = wb_tokenizer_token_str(tok, id);
    if (!s) return luaL_argerror(L, 2, "token id out of range");
    lua_pushstring(L, s);
    return 1;
}

static int t_id(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    size_t len;
    const char *bytes = luaL_checklstring(L, 2, &len);
    int32_t id = wb_tokenizer_id_of_bytes(tok, bytes, len);
    if (id < 0) lua_pushnil(L);
    else lua_pushinteger(L, id);
    return 1;
}

static int t_id_of_str(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    int32_t id = wb_tokenizer_id_of_str(tok, luaL_checkstring(L, 2));
    if (id < 0) lua_pushnil(L);
    else lua_pushinteger(L, id);
    return 1;
}

static int t_is_special(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    lua_pushboolean(L, wb_tokenizer_is_special(tok, checktokid(L, 2, tok)));
    return 1;
}

static int t_save(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    wb_err err = {0};
    if (wb_tokenizer_save(tok, luaL_checkstring(L, 2), &err) != WB_OK) return lwb_raise(L, &err);
    lua_settop(L, 1);
    return 1;
}

static int t_len(lua_State *L) {
    lua_pushinteger(L, vocab_of(checktok(L, 1)));
    return 1;
}

static int t_tostring(lua_State *L) {
    Tok *t = luaL_checkudata(L, 1, TOKENIZER);
    if (!t->tok || (t->owner_open && !*t->owner_open)) lua_pushliteral(L, "Tokenizer (closed)");
    else lua_pushfstring(L, "Tokenizer (%d tokens)", (int)vocab_of(t->tok));
    return 1;
}

/* Methods stay reachable on a closed tokenizer (close is idempotent, the others raise). */
static int t_index(lua_State *L) {
    luaL_checkudata(L, 1, TOKENIZER);
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    if (key) {
        if (strcmp(key, "vocab_size") == 0) {
            lua_pushinteger(L, vocab_of(checktok(L, 1)));
            return 1;
        }
        if (strcmp(key, "eos_id") == 0) {
            int32_t id = wb_tokenizer_eos_id(checktok(L, 1));
            if (id < 0) lua_pushnil(L);
            else lua_pushinteger(L, id);
            return 1;
        }
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1)); /* methods */
    return 1;
}

/* ---- detokenizer ---------------------------------------------------------------------------- */

static wb_detok *checkdetok(lua_State *L, int idx) {
    Detok *d = luaL_checkudata(L, idx, DETOK);
    if (!d->d) luaL_error(L, "attempt to use a closed Detokenizer");
    /* The detokenizer reads the tokenizer: a closed tokenizer makes it unusable too. */
    lua_getiuservalue(L, idx, 1);
    checktok(L, -1);
    lua_pop(L, 1);
    return d->d;
}

static int t_detokenizer(lua_State *L) {
    const wb_tokenizer *tok = checktok(L, 1);
    Detok *d = lua_newuserdatauv(L, sizeof *d, 1);
    d->d = NULL;
    luaL_setmetatable(L, DETOK);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1); /* keeps the tokenizer (and its model) alive */
    wb_err err = {0};
    if (wb_detok_new(tok, &d->d, &err) != WB_OK) return lwb_raise(L, &err);
    return 1;
}

static int d_push(lua_State *L) {
    wb_detok *d = checkdetok(L, 1);
    lua_Integer id = luaL_checkinteger(L, 2);
    luaL_argcheck(L, id >= 0 && id <= INT32_MAX, 2, "token id out of range");
    const char *piece = NULL;
    size_t len = 0;
    wb_err err = {0};
    if (wb_detok_push(d, (int32_t)id, &piece, &len, &err) != WB_OK) return lwb_raise(L, &err);
    lua_pushlstring(L, piece ? piece : "", len);
    return 1;
}

static int d_flush(lua_State *L) {
    wb_detok *d = checkdetok(L, 1);
    const char *piece = NULL;
    size_t len = 0;
    wb_detok_flush(d, &piece, &len);
    lua_pushlstring(L, piece ? piece : "", len);
    return 1;
}

static int d_reset(lua_State *L) {
    wb_detok_reset(checkdetok(L, 1));
    lua_settop(L, 1);
    return 1;
}

static int d_gc(lua_State *L) {
    Detok *d = luaL_checkudata(L, 1, DETOK);
    if (d->d) wb_detok_free(d->d);
    d->d = NULL;
    return 0;
}

static int d_tostring(lua_State *L) {
    Detok *d = luaL_checkudata(L, 1, DETOK);
    lua_pushstring(L, d->d ? "Detokenizer" : "Detokenizer (closed)");
    return 1;
}

static const luaL_Reg tok_methods[] = {
    {"encode", t_encode},
    {"decode", t_decode},
    {"token", t_token},
    {"str", t_str},
    {"id", t_id},
    {"id_of_str", t_id_of_str},
    {"is_special", t_is_special},
    {"save", t_save},
    {"detokenizer", t_detokenizer},
    {"close", tok_close},
    {NULL, NULL},
};

static const luaL_Reg tok_meta[] = {
    {"__len", t_len},
    {"__tostring", t_tostring},
    {"__gc", tok_gc},
    {"__close", tok_close},
    {"__index", NULL},
    {NULL, NULL},
};

static const luaL_Reg detok_methods[] = {
    {"push", d_push},
    {"flush", d_flush},
    {"reset", d_reset},
    {"close", d_gc},
    {NULL, NULL},
};

static const luaL_Reg detok_meta[] = {
    {"__gc", d_gc},
    {"__close", d_gc},
    {"__tostring", d_tostring},
    {"__index", NULL},
    {NULL, NULL},
};

static const luaL_Reg tok_funcs[] = {
    {"tokenizer_load", l_tokenizer_load},
    {"bpe_train", l_bpe_train},
    {NULL, NULL},
};

void lwb_open_tokenizer(lua_State *L) {
    luaL_newmetatable(L, TOKENIZER);
    luaL_setfuncs(L, tok_meta, 0);
    luaL_newlibtable(L, tok_methods);
    luaL_setfuncs(L, tok_methods, 0);
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, t_index, 1); /* fields (vocab_size, eos_id) then methods */
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -3, "Tokenizer");
    lua_pop(L, 1);

    luaL_newmetatable(L, DETOK);
    luaL_setfuncs(L, detok_meta, 0);
    luaL_newlibtable(L, detok_methods);
    luaL_setfuncs(L, detok_methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    luaL_setfuncs(L, tok_funcs, 0);
}
