/* lwb_chat.c - wb.ChatTemplate and wb.chat_template(dir): a model directory's chat template
 * rendered from Lua message tables, with its EOS ids and special-token names. */
#include "lwb.h"
#include "wb_chat.h"

#include <string.h>

#define CHAT "wb.ChatTemplate"

typedef struct Chat {
    wb_chat_template *t; /* NULL once closed */
} Chat;

static wb_chat_template *checkchat(lua_State *L, int idx) {
    Chat *c = luaL_checkudata(L, idx, CHAT);
    if (!c->t) luaL_error(L, "attempt to use a closed ChatTemplate");
    return c->t;
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

/* tpl:render(messages, {add_generation_prompt = true}) -> string */
static int c_render(lua_State *L) {
    wb_chat_template *t = checkchat(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lwb_check_options(L, 3, (const char *const[]){"add_generation_prompt", NULL});
    int gen = lwb_opt_bool(L, 3, "add_generation_prompt", 0);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 1, 2, "expected at least one message");
    /* the role and content strings stay on the stack while the C side points at them */
    luaL_checkstack(L, (int)(2 * n + 4), "too many messages");
    wb_chat_message *m = lua_newuserdatauv(L, (size_t)n * sizeof *m, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, 2, i) != LUA_TTABLE)
            return luaL_error(L, "bad argument #2 to 'render' (messages[%d] is not a table)", (int)i);
        if (lua_getfield(L, -1, "role") != LUA_TSTRING)
            return luaL_error(L, "bad argument #2 to 'render' (messages[%d].role is not a string)", (int)i);
        m[i - 1].role = lua_tostring(L, -1);
        if (lua_getfield(L, -2, "content") != LUA_TSTRING)
            return luaL_error(L, "bad argument #2 to 'render' (messages[%d].content is not a string)",
                              (int)i);
        m[i - 1].content = lua_tostring(L, -1);
        lua_remove(L, -3); /* the message table itself is still referenced by messages */
    }
    char *text = NULL;
    size_t len = 0;
    wb_err err = {0};
    if (wb_chat_render(t, m, (size_t)n, gen, &text, &len, &err) != WB_OK) return lwb_raise(L, &err);
    lua_pushlstring(L, text, len);
    wb_free(text);
    return 1;
}

static int c_set_date(lua_State *L) {
    wb_chat_template *t = checkchat(L, 1);
    const char *d = luaL_checkstring(L, 2);
    wb_err err = {0};
    if (wb_chat_set_date(t, d, &err) != WB_OK) return lwb_raise(L, &err);
    return 0;
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

/* Fields first (family, eos_ids, eos_token, bos_token, add_bos_token, default_system, date),
 * then methods (upvalue 1). */
static int c_index(lua_State *L) {
    wb_chat_template *t = checkchat(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "family") == 0) {
        lua_pushstring(L, wb_chat_family(t));
    } else if (strcmp(k, "eos_ids") == 0) {
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
    } else if (strcmp(k, "default_system") == 0) {
        push_opt_string(L, wb_chat_default_system(t));
    } else if (strcmp(k, "date") == 0) {
        push_opt_string(L, wb_chat_date(t));
    } else {
        lua_getfield(L, lua_upvalueindex(1), k);
    }
    return 1;
}

static int c_tostring(lua_State *L) {
    Chat *c = luaL_checkudata(L, 1, CHAT);
    if (!c->t) lua_pushliteral(L, "wb.ChatTemplate (closed)");
    else lua_pushfstring(L, "wb.ChatTemplate (%s)", wb_chat_family(c->t));
    return 1;
}

static const luaL_Reg chat_methods[] = {
    {"render", c_render},
    {"set_date", c_set_date},
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
}
