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
void lwb_open_tensor(lua_State *L);      /* wb.Tensor (lwb_tensor.c)                            */
void lwb_open_safetensors(lua_State *L); /* wb.safetensors_read, wb.safetensors_write           */
void lwb_open_sampling(lua_State *L);    /* wb.sampling, model:generate, model:stream (after
                                            lwb_open_model: it extends the wb.Model methods)    */
void lwb_open_train(lua_State *L);       /* wb.Trainer, wb.trainer                              */
void lwb_open_chat(lua_State *L);        /* wb.ChatTemplate, wb.chat_template                  */
void lwb_open_constraint(lua_State *L);  /* wb.constraint, wb.Constraint, wb.ConstraintState    */
void lwb_open_batch(lua_State *L);       /* wb.Batch, model:batch, model:generate_batch (after
                                            lwb_open_model)                                     */
void lwb_open_http(lua_State *L);       /* wb.http: HTTP client over libcurl (lwb_http.c)      */
void lwb_open_httpd(lua_State *L);      /* wb.httpd: HTTP server over libmicrohttpd            */
void lwb_open_hash(lua_State *L);       /* wb.sha256: streaming SHA-256 over libcrypto (lwb_hash.c) */

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

/* ---- shared userdata layouts -------------------------------------------------------------
 * Published here, the way lauxlib.h publishes luaL_Stream, so every binding file reads the same
 * struct through the same typed accessor: no file mirrors another's private layout. Each type has
 * one metatable name. Userdata are allocated (with fields cleared) before the resource they own,
 * so an error while creating the resource cannot leak it. */

/* wb.Model (lwb_model.c). */
#define LWB_MODEL "wb.Model"
typedef struct lwb_Model {
    wb_model *m; /* NULL once closed */
    int open;    /* m != NULL, as an int that a borrowed Tokenizer can watch */
    int users;   /* open sessions, streams, running generations and batches with requests:
                    model:close() is refused while this is > 0 */
    size_t native; /* bytes reported to lwb_native_alloc (the weights) */
} lwb_Model;

/* wb.Tokenizer (lwb_tokenizer.c): owned, or borrowed from an owner (a Model). */
#define LWB_TOKENIZER "wb.Tokenizer"
typedef struct lwb_Tokenizer {
    wb_tokenizer *tok;     /* NULL once closed */
    int owned;             /* freed by this userdata, or borrowed from its owner */
    const int *owner_open; /* borrowed: the owner's open flag, 0 once the owner is closed */
} lwb_Tokenizer;

/* wb.Constraint (lwb_constraint.c). */
#define LWB_CONSTRAINT "wb.Constraint"
typedef struct lwb_Constraint {
    wb_constraint *c; /* NULL once closed; running generators hold their own reference */
    lua_State *L;     /* where a Lua-function constraint calls back into: whoever steps a
                         generation that uses it sets this to its own thread first */
    int fn_ref;       /* the Lua function (wb.constraint.fn), LUA_NOREF otherwise */
} lwb_Constraint;

/* wb.Session (lwb_model.c): a KV cache over one sequence. */
#define LWB_SESSION "wb.Session"
typedef struct lwb_Session {
    wb_session *s;     /* NULL once closed */
    lwb_Model *owner;  /* kept alive by the session's user value */
    size_t native;     /* cache bytes reported to lwb_native_alloc */
    unsigned epoch;    /* moves when cache rows may change under a view: truncate, reset, close */
} lwb_Session;

/* wb.Tensor (lwb_tensor.c): floats with a shape (up to LWB_TENSOR_MAXDIM axes, 0-based
 * indices), owned (the floats follow the header in the same userdata) or a read-only view.
 * A view of a Session's cache (session != NULL) is valid while session->s is open and
 * session->epoch equals epoch; the view's user value keeps the Session (or the parent Tensor)
 * alive. */
#define LWB_TENSOR "wb.Tensor"
#define LWB_TENSOR_MAXDIM 4
typedef struct lwb_Tensor {
    const float *data;
    int ndim;
    int64_t shape[LWB_TENSOR_MAXDIM], stride[LWB_TENSOR_MAXDIM]; /* strides in floats */
    const lwb_Session *session;
    unsigned epoch;
} lwb_Tensor;

/* Push an owned, contiguous Tensor of that shape (contents uninitialised); returns its floats. */
float *lwb_push_tensor(lua_State *L, int ndim, const int64_t *shape);
/* Push a read-only view of the cache of the Session at session_idx (stride NULL: contiguous). */
void lwb_push_tensor_view(lua_State *L, const float *data, int ndim, const int64_t *shape,
                          const int64_t *stride, int session_idx);
/* The Tensor at idx; raises on a view whose Session rows are gone. */
const lwb_Tensor *lwb_check_tensor(lua_State *L, int idx);

/* Typed accessors. The *_ud forms accept a closed object; the others raise on one. */
lwb_Model *lwb_check_model_ud(lua_State *L, int idx);
wb_model *lwb_check_model(lua_State *L, int idx);
/* The users counter of the Model at idx (see lwb_Model.users): increment when an object starts
 * using the model beyond one call, decrement (once) when it stops. */
int *lwb_model_users(lua_State *L, int idx);
/* A Tokenizer or a Model (its tokenizer) at idx; raises on a closed one. */
const wb_tokenizer *lwb_check_tokenizer(lua_State *L, int idx);
lwb_Constraint *lwb_check_constraint(lua_State *L, int idx); /* raises on a closed one */
lwb_Constraint *lwb_test_constraint(lua_State *L, int idx);  /* NULL when not a Constraint */
/* Push a wb.Constraint for vocab_size tokens wrapping the Lua function at idx
 * (allowed(generated_ids) -> list or set of ids, nil for no restriction). */
lwb_Constraint *lwb_push_function_constraint(lua_State *L, int idx, lua_Integer vocab_size);

/* Native memory accounting. The collector sees a model or a session as a few bytes of userdata;
 * the megabytes behind it are invisible to its pacing (and in generational mode extra debt does
 * not trigger a major collection), so dropped objects could pile up. Every binding object that
 * owns large native memory reports it: lwb_native_alloc when it takes bytes, lwb_native_free
 * when it lets them go. When the bytes allocated since the last full collection reach the bytes
 * that were live after it (at least 4 MB), a full collection runs, the pause rule Lua applies to
 * its own heap; so memory stays within about twice what is live. Per process (Lua states are
 * used from one thread). wb.native_bytes() reports the live total. */
void lwb_native_alloc(lua_State *L, size_t bytes);
void lwb_native_free(size_t bytes);
size_t lwb_native_live(void);


/* ---- generation requests (lwb_sampling.c) ------------------------------------------------
 * One reader for the (params, opts) pair of model:generate / stream / chat / generate_batch and
 * batch:add. params holds what a hosted API calls request parameters (lwb_sampling_keys: the
 * sampler's, plus n, logprobs, top_logprobs); opts holds how the engine runs it
 * (lwb_generation_option_keys: cache, n_ctx, constraint, ...). A key given in the wrong table is
 * an error that says where it belongs. */
extern const char *const lwb_sampling_keys[];         /* NULL-terminated */
extern const char *const lwb_generation_option_keys[];/* NULL-terminated */

/* Attach the report table at report_idx ({params_used = ..., params_source = ...}) to the
 * wb.Stream at stream_idx: stream.params_used / params_source and every stream:result() carry it. */
void lwb_stream_set_params(lua_State *L, int stream_idx, int report_idx);

typedef struct lwb_request_extra {
    int n;            /* completions (params.n, default 1)   */
    int logprobs;     /* params.logprobs                     */
    int top_logprobs; /* params.top_logprobs                 */
} lwb_request_extra;

/* Read params (index params) and opts (index opts); V range-checks token ids. Pushes two values
 * the caller keeps while it builds the generator: a block holding the parameter arrays, then the
 * request's Constraint userdata (or nil), which must stay alive as long as the generator (*lc is
 * it, or NULL; its L is set to this thread). */
void lwb_check_request(lua_State *L, int params, int opts, int32_t V, wb_sampling_params *sp,
                       wb_gen_params *gp, lwb_request_extra *ex, lwb_Constraint **lc);

/* Push the result table of a generation (text, token_ids, stop_reason, timings, logprobs, ...). */
void lwb_push_gen_result(lua_State *L, const wb_gen_result *r);


/* ---- batches (lwb_batch.c) ----------------------------------------------------------------
 * wb.Batch (model:batch()) owns a wb_batch; it counts as a user of its Model while it holds
 * requests. For other binding files (n completions in lwb_sampling.c): */
/* Push an empty wb.Batch for the Model at model_idx and return its core batch. */
wb_batch *lwb_push_batch(lua_State *L, int model_idx);
/* Add g to the wb.Batch at batch_idx (the batch owns g from here, also when this raises); the
 * value at keep_idx (a Constraint, or 0 for none) stays alive as long as the request. Returns the
 * request id. */
int lwb_batch_adopt(lua_State *L, int batch_idx, wb_gen *g, int keep_idx);
/* Step the wb.Batch at batch_idx until no request runs; raises on the first request error.
 * Finished requests stay in the batch for their results. */
void lwb_batch_run(lua_State *L, int batch_idx);
/* Free every request and cache of the wb.Batch at batch_idx now (it stays usable). */
void lwb_batch_clear(lua_State *L, int batch_idx);


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
/* wb.load_data (lwb_sandbox.c): run a data file in a bounded lua_State and push the value it
 * returns, copied as plain data; raises errors naming `name`. */
void lwb_open_sandbox(lua_State *L);
void lwb_load_data(lua_State *L, const char *src, size_t len, const char *name, size_t max_memory,
                   lua_Integer max_instructions);

/* Cooperative interruption. A host's SIGINT handler calls lwb_interrupt(1); long core calls
 * (prefill, forward, BPE training, trainer steps) poll lwb_abort_fn through their abort hooks
 * and stop with WB_ERR_CANCELLED. The host clears the flag before running each chunk. */
void lwb_interrupt(int on);
int lwb_interrupted(void);
/* How many interrupts lwb_interrupt(1) has raised in this process (wraps at 2^30; compare for
 * inequality). Unlike the flag, nothing clears it. */
int lwb_interrupt_count(void);
int lwb_abort_fn(void *user_data); /* a wb_abort_fn */

/* Paths (lwb_core.c). The default model directory: $WB_MODEL if set and non-empty, else the
 * first existing of <source>/models/tinylm-base, <install datadir>/models/tinylm-base,
 * <dir of /proc/self/exe>/../share/workbench/models/tinylm-base; when none exists the first
 * candidate whose parent tree exists, so error messages name a sensible path. */
const char *lwb_default_model_dir(char *buf, size_t size);
/* The directory holding the pure-Lua library (contains wb/stats.lua): <source>/lua, else
 * <datadir>/lua, else exe-relative ../share/workbench/lua; NULL when none exists. */
const char *lwb_lua_dir(char *buf, size_t size);
/* <data>/scripts/<name>.lua when `name` is a bare word naming a shipped script (`workbench serve`
 * runs scripts/serve.lua), else NULL. */
const char *lwb_script_path(const char *name, char *buf, size_t size);

#endif
