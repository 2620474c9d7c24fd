/* lwb.h - internals shared by the Lua binding files (lua/lwb_*.c).
 *
 * Each binding file owns one area and exports one opener that adds its functions and metatables
 * to the `wb` table at the top of the stack:
 *     void lwb_open_<area>(lua_State *L);   -- wb table at index -1, left there
 * luaopen_wb (lwb_module.c) creates the table and calls every opener in turn.
 */
#ifndef LWB_H
#define LWB_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "wb.h"

/* Openers (one per binding file). */
void lwb_open_core(lua_State *L);      /* clock_ms, threads, version, json, blas_info        */
void lwb_open_vec(lua_State *L);       /* wb.Vec                                              */
void lwb_open_tokenizer(lua_State *L); /* wb.Tokenizer, wb.tokenizer_load, wb.bpe_train       */
void lwb_open_model(lua_State *L);     /* wb.Model, wb.Session, wb.load                       */
void lwb_open_train(lua_State *L);     /* wb.Trainer, wb.trainer                              */

/* Raise a Lua error from a core error: "<msg>" (the core's message already names the file). */
int lwb_raise(lua_State *L, const wb_err *err);

/* Reject unknown keys in an option table at index idx: `allowed` is NULL-terminated.
 * Raises "bad argument #arg to 'fname' (unknown option 'temprature')". */
void lwb_check_options(lua_State *L, int idx, const char *const *allowed);

/* Read an array of token ids (Lua integers, 0-based token ids) from the table at idx into a
 * malloc'd buffer; raises on non-integers or ids outside [0, vocab) when vocab > 0. The buffer is
 * owned by a to-be-closed/GC'd userdata pushed on the stack so errors cannot leak it. */
int32_t *lwb_check_ids(lua_State *L, int idx, int32_t vocab, size_t *n);

/* wb.Vec: push a new vector of n floats (uninitialised) and return its data pointer. */
float *lwb_push_vec(lua_State *L, size_t n);
/* Check argument idx is a wb.Vec; returns data and sets *n. */
float *lwb_check_vec(lua_State *L, int idx, size_t *n);

#endif
