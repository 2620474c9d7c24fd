/* lwb_fileio.c - wb.write_file(path, data): the core's atomic writer (core/fileio.c) for Lua, so
 * every file the Lua side writes (traces, model cards, plots, loss logs) is written to a temporary
 * file in the same directory, checked at every write, fsync'ed and renamed only on success; and
 * wb.remove_stale_temps(path), which removes "<path>.tmp.<pid>" files of dead processes. */
#include "lwb.h"

#include "fileio.h"

#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* wb.write_file(path, data) -> true; raises "<path>: ... (the file is unchanged)" on failure. */
static int l_write_file(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *data = luaL_checklstring(L, 2, &n);
    luaL_argcheck(L, lua_gettop(L) <= 2, 3, "wb.write_file takes (path, data)");
    wb_err err = {0};
    if (wb_write_file_atomic(path, data, n, &err) != WB_OK) return luaL_error(L, "%s", err.msg);
    lua_pushboolean(L, 1);
    return 1;
}

/* wb.read_file(path [, max_bytes = 64 MB]) -> string: the core's reader (refuses FIFOs, devices
 * and directories without blocking, caps the size); raises an error naming the path. */
static int l_read_file(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    lua_Integer max = luaL_optinteger(L, 2, (lua_Integer)64 << 20);
    luaL_argcheck(L, max >= 0, 2, "max_bytes must be >= 0");
    char *buf = NULL;
    size_t n = 0;
    wb_err err = {0};
    if (wb_read_file(path, (size_t)max, &buf, &n, &err) != WB_OK) return luaL_error(L, "%s", err.msg);
    lua_pushlstring(L, buf, n);
    free(buf);
    return 1;
}

/* wb.remove_stale_temps(path) -> number of files removed. */
static int l_remove_stale_temps(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    wb_err err = {0};
    int removed = 0;
    if (wb_remove_stale_temps(path, &removed, &err) != WB_OK) return luaL_error(L, "%s", err.msg);
    lua_pushinteger(L, removed);
    return 1;
}

/* wb.fsync(path): flush a file (or a directory, after a rename in it) to the disk; raises an
 * error naming the path. For files written piece by piece (scripts/download.lua). */
static int l_fsync(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return luaL_error(L, "%s: cannot open for fsync: %s", path, strerror(errno));
    int rc = fsync(fd), e = errno;
    close(fd);
    if (rc != 0) return luaL_error(L, "%s: fsync failed: %s", path, strerror(e));
    lua_pushboolean(L, 1);
    return 1;
}

static const luaL_Reg fileio_funcs[] = {
    {"fsync", l_fsync},
    {"write_file", l_write_file},
    {"read_file", l_read_file},
    {"remove_stale_temps", l_remove_stale_temps},
    {NULL, NULL},
};

void lwb_open_fileio(lua_State *L) { luaL_setfuncs(L, fileio_funcs, 0); }
