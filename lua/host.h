/* host.h - pieces of the `workbench` executable shared by host_main.c and host_repl.c.
 * Modelled on lua.c: the same protected-call, message-handler and interrupt structure. */
#ifndef WB_HOST_H
#define WB_HOST_H

#include <lua.h>

extern const char *host_progname;

/* Print "progname: msg" to stderr. */
void host_message(const char *msg);
/* Print the error at the top of the stack (if status != LUA_OK) and pop it; returns status. */
int host_report(lua_State *L, int status);
/* lua_pcall with a traceback message handler; Ctrl-C interrupts the call (lua.c's laction). */
int host_docall(lua_State *L, int narg, int nres);
/* The interactive loop (prompts and readline only when stdin is a terminal). Returns LUA_OK, or
 * LUA_ERRRUN when stdin is not a terminal and a chunk failed (so piped input exits 1). */
int host_repl(lua_State *L);
/* Set when the last host_docall failed after a Ctrl-C arrived during it. */
extern int host_interrupted;

#endif
