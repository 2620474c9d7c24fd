/* lwb_core.c - wb.clock_ms, wb.interrupts, wb.threads, wb.version, wb.blas_info, wb.json (lwb_json.c), wb.default_model_dir. */
#include "lwb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef WB_SOURCE_DIR
#define WB_SOURCE_DIR ""
#endif
#ifndef WB_INSTALL_DATADIR
#define WB_INSTALL_DATADIR ""
#endif


/* ---- small functions ----------------------------------------------------------------------- */

static int l_clock_ms(lua_State *L) {
    lua_pushnumber(L, wb_clock_ms());
    return 1;
}

/* wb.interrupts(): Ctrl-Cs the host has passed on so far in this process. A loop that must end
 * on one compares it with the value it started with (a pcall inside can catch the error). */
static int l_interrupts(lua_State *L) {
    lua_pushinteger(L, lwb_interrupt_count());
    return 1;
}

static int l_threads(lua_State *L) {
    int old = wb_threads_get();
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        luaL_argcheck(L, n >= 1 && n <= 4096, 1, "thread count must be in [1, 4096]");
        wb_threads_set((int)n);
    }
    lua_pushinteger(L, old);
    return 1;
}

static int l_blas_info(lua_State *L) {
    lua_pushstring(L, wb_blas_info());
    return 1;
}

static int is_dir(const char *p) {
    struct stat st;
    return p[0] && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* <dir of /proc/self/exe>/../share/workbench, or "" when unknown. */
static void exe_datadir(char *buf, size_t size) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    buf[0] = '\0';
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    int w = snprintf(buf, size, "%s/../share/workbench", exe);
    if (w < 0 || (size_t)w >= size) buf[0] = '\0'; /* too long to be a usable path */
}

/* The first existing <base>/<sub> over the exe-relative datadir (an installed workbench uses its
 * own files, wherever the prefix was moved), the source tree (a build-tree workbench, so edits
 * to lua/ and scripts/ need no install) and the configured install datadir; when none exists,
 * the first whose base exists (fallback_any: else the first). */
static const char *find_data(const char *sub, char *buf, size_t size, int fallback_any) {
    char exedir[4096];
    exe_datadir(exedir, sizeof exedir);
    const char *bases[3] = {exedir, WB_SOURCE_DIR, WB_INSTALL_DATADIR};
    for (int i = 0; i < 3; i++) {
        if (!bases[i][0]) continue;
        snprintf(buf, size, "%s/%s", bases[i], sub);
        if (is_dir(buf)) return buf;
    }
    if (!fallback_any) return NULL;
    for (int i = 0; i < 3; i++) {
        if (is_dir(bases[i])) {
            snprintf(buf, size, "%s/%s", bases[i], sub);
            return buf;
        }
    }
    snprintf(buf, size, "%s/%s", WB_INSTALL_DATADIR[0] ? WB_INSTALL_DATADIR : ".", sub);
    return buf;
}

const char *lwb_default_model_dir(char *buf, size_t size) {
    const char *env = getenv("WB_MODEL");
    if (env && env[0]) {
        snprintf(buf, size, "%s", env);
        return buf;
    }
    return find_data("models/tinylm-base", buf, size, 1);
}

const char *lwb_lua_dir(char *buf, size_t size) {
    char probe[4096];
    if (!find_data("lua/wb", probe, sizeof probe, 0)) return NULL;
    size_t len = strlen(probe) - strlen("/wb");
    snprintf(buf, size, "%.*s", (int)len, probe);
    return buf;
}

const char *lwb_script_path(const char *name, char *buf, size_t size) {
    if (!name[0] || strlen(name) > 64) return NULL;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return NULL;
    char dir[4096];
    if (!find_data("scripts", dir, sizeof dir, 0)) return NULL;
    int w = snprintf(buf, size, "%s/%s.lua", dir, name);
    if (w < 0 || (size_t)w >= size) return NULL;
    struct stat st;
    return stat(buf, &st) == 0 && S_ISREG(st.st_mode) ? buf : NULL;
}

static int l_default_model_dir(lua_State *L) {
    char buf[4096];
    lua_pushstring(L, lwb_default_model_dir(buf, sizeof buf));
    return 1;
}

static const luaL_Reg core_funcs[] = {
    {"clock_ms", l_clock_ms},
    {"interrupts", l_interrupts},
    {"threads", l_threads},
    {"blas_info", l_blas_info},
    {"default_model_dir", l_default_model_dir},
    {NULL, NULL},
};

void lwb_open_core(lua_State *L) {
    luaL_setfuncs(L, core_funcs, 0);
    lua_pushstring(L, wb_version());
    lua_setfield(L, -2, "version");

    lwb_open_json(L);
    lwb_open_fileio(L);
    lwb_open_sandbox(L);
}
