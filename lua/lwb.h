/* lwb.h - internals shared by the Lua binding files (lua/lwb_*.c).
 *
 * Each binding file owns one area and exports one opener that adds its functions and metatables
 * to the `wb` table at the top of the stack:
 *     void lwb_open_<area>(lua_State *L);   -- wb table at index -1, left there
 * luaopen_wb (lwb_module.c) creates the table and calls every opener in turn.
 *
 * The binding depends on nothing from the host: the same objects go into the `workbench`
 * executable (static lib wblua) and into wb.so for a plain lua5.4.
 */
#ifndef LWB_H
#define LWB_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "wb.h"

/* Openers (one per binding file). */
void lwb_open_core(lua_State *L);        /* clock_ms, threads, version, json, blas_info, paths */
void lwb_open_vec(lua_State *L);         /* wb.Vec                                              */
void lwb_open_tokenizer(lua_State *L);   /* wb.Tokenizer, wb.tokenizer_load, wb.bpe_train       */
void lwb_open_model(lua_State *L);       /* wb.Model, wb.Session, wb.load                       */
void lwb_open_safetensors(lua_State *L); /* wb.safetensors_read, wb.safetensors_write           */
void lwb_open_sampling(lua_State *L);    /* wb.sampling, model:generate, model:stream (after
                                            lwb_open_model: it extends the wb.Model methods)    */
void lwb_open_train(lua_State *L);       /* wb.Trainer, wb.trainer                              */
void lwb_open_chat(lua_State *L);        /* wb.ChatTemplate, wb.chat_template                  */
void lwb_open_constraint(lua_State *L);  /* wb.constraint, wb.Constraint, wb.ConstraintState    */
void lwb_open_batch(lua_State *L);       /* model:generate_batch (after lwb_open_model)         */
void lwb_open_http(lua_State *L);       /* wb.http: HTTP client over libcurl (lwb_http.c)      */
void lwb_open_httpd(lua_State *L);      /* wb.httpd: HTTP server over libmicrohttpd            */

/* The module entry point (lwb_module.c); the host preloads it as package.loaded.wb. */
int luaopen_wb(lua_State *L);

/* Raise a Lua error from a core error: "<msg>" (the core's message already names the file). */
int lwb_raise(lua_State *L, const wb_err *err);

/* Reject unknown keys in an option table at index idx: `allowed` is NULL-terminated.
 * Raises "bad argument #arg to 'fname' (unknown option 'temprature')". Accepts nil/none.
 * Non-string keys are rejected too. */
void lwb_check_options(lua_State *L, int idx, const char *const *allowed);

/* Option readers for a table at idx (nil/none means "absent"): return the default when the key
 * is absent or nil, raise an argument error naming the option when it has the wrong type. */
int lwb_opt_bool(lua_State *L, int idx, const char *key, int def);
lua_Integer lwb_opt_integer(lua_State *L, int idx, const char *key, lua_Integer def);
lua_Number lwb_opt_number(lua_State *L, int idx, const char *key, lua_Number def);

/* Read an array of token ids (Lua integers, 0-based token ids) from the table at idx into a
 * buffer; raises on non-integers or ids outside [0, vocab) when vocab > 0. The buffer is a full
 * userdata pushed on the stack (one extra slot), so errors cannot leak it; it lives until popped
 * and collected. *n may be 0 (the pointer is still valid). */
int32_t *lwb_check_ids(lua_State *L, int idx, int32_t vocab, size_t *n);

/* Push a Lua sequence {ids[0], ..., ids[n-1]}. */
void lwb_push_ids(lua_State *L, const int32_t *ids, size_t n);

/* wb.Vec: push a new vector of n floats (uninitialised) and return its data pointer. */
float *lwb_push_vec(lua_State *L, size_t n);
/* Check argument idx is a wb.Vec; returns data and sets *n. */
float *lwb_check_vec(lua_State *L, int idx, size_t *n);

/* Model (lwb_model.c). The wb.Model userdata begins with its wb_model pointer (NULL once
 * closed); lwb_check_model is the typed accessor (raises on a closed model). Objects that use the
 * model beyond one call (a session, a generation stream) keep the Model userdata in a user value
 * and count themselves in *lwb_model_users(L, idx) (increment when made, decrement when closed),
 * so that model:close() refuses while they are open. The pointer is valid while the Model
 * userdata is alive. */
wb_model *lwb_check_model(lua_State *L, int idx);
int *lwb_model_users(lua_State *L, int idx);

/* Tokenizer (lwb_tokenizer.c): push a Tokenizer that borrows `tok` from an owner object (a
 * Model). The userdata keeps the owner (at index owner_idx) alive through its user value, and
 * *owner_open going 0 (the owner was closed) makes later use an error. */
void lwb_push_borrowed_tokenizer(lua_State *L, const wb_tokenizer *tok, int owner_idx,
                                 const int *owner_open);

/* JSON (lwb_core.c): push the Lua value for a JSON document; raises "<name>: JSON syntax error
 * at byte N" on a malformed one. */
void lwb_push_json(lua_State *L, const char *text, size_t len, const char *name);
/* wb.json (lwb_json.c) and wb.write_file/wb.read_file (lwb_fileio.c), set on the table on top. */
void lwb_open_json(lua_State *L);
void lwb_open_fileio(lua_State *L);

/* Cooperative interruption. A host's SIGINT handler calls lwb_interrupt(1); long core calls
 * (prefill, forward, BPE training, trainer steps) poll lwb_abort_fn through their abort hooks
 * and stop with WB_ERR_CANCELLED. The host clears the flag before running each chunk. */
void lwb_interrupt(int on);
int lwb_interrupted(void);
int lwb_abort_fn(void *user_data); /* a wb_abort_fn */

/* Paths (lwb_core.c). The default model directory: $WB_MODEL if set and non-empty, else the
 * first existing of <source>/models/tinylm-base, <install datadir>/models/tinylm-base,
 * <dir of /proc/self/exe>/../share/workbench/models/tinylm-base; when none exists the first
 * candidate whose parent tree exists, so error messages name a sensible path. */
const char *lwb_default_model_dir(char *buf, size_t size);
/* The directory holding the pure-Lua library (contains wb/stats.lua): <source>/lua, else
 * <datadir>/lua, else exe-relative ../share/workbench/lua; NULL when none exists. */
const char *lwb_lua_dir(char *buf, size_t size);

#endif
