/* fuzz_preset.c - libFuzzer target: arbitrary bytes as a preset data file, run in the same
 * bounded sandbox as wb.presets.load (lua/lwb_sandbox.c), with smaller limits so each input is
 * quick. It must return a plain-data value or raise a Lua error; never crash, hang or grow. */
#include "lwb.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *data;
    size_t size;
} Input;

static int run(lua_State *L) {
    const Input *in = lua_touserdata(L, 1);
    lwb_load_data(L, (const char *)in->data, in->size, "fuzz/preset.lua", (size_t)8 << 20, 200000);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static lua_State *L;
    if (!L) {
        L = luaL_newstate();
        lua_newtable(L);
        lwb_open_sandbox(L); /* registers the sandbox metatable */
        lua_pop(L, 1);
    }
    Input in = {data, size};
    lua_pushcfunction(L, run);
    lua_pushlightuserdata(L, &in);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK && !lua_isstring(L, -1)) __builtin_trap();
    lua_pop(L, 1);
    lua_gc(L, LUA_GCCOLLECT);
    return 0;
}
