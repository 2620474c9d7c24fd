/* wb_batch.h - batched generation: many requests decode together, one forward pass per step.
 *
 * A batch is a set of generation cursors (wb_gen, wb_generate.h) stepped together. Each step
 * stacks one row per running request (its prompt on its first step, its last token after) into
 * one forward pass over their own sessions, so each weight matrix is read once per step for all
 * of them (a GEMM instead of B GEMVs), while attention runs per sequence over its own cache:
 * prompts of different lengths need no padding. Sampling, every stop rule (eos ids of the
 * tokenizer and generation_config.json, stop_token_ids, stop strings, max_tokens, context),
 * constraints, penalties, seeds and log-probabilities are the generator's own, so a request's
 * tokens are those it gets alone (logits agree to float rounding: a GEMM sums in another order
 * than the decode GEMV).
 *
 * Continuous batching: requests join (wb_batch_add) and leave (wb_batch_remove) between steps.
 *
 *     wb_batch *b; wb_batch_new(model, &b, &err);
 *     wb_gen *g; wb_gen_new(model, prompt, len, &sp, &gp, &g, &err);
 *     int id; wb_batch_add(b, g, &id, &err);                 // the batch owns g now
 *     while (wb_batch_active(b) > 0) {
 *         const wb_batch_event *ev; int n;
 *         wb_batch_step(b, &ev, &n, NULL, &err);
 *         for (int k = 0; k < n; k++) {                      // one per request that stepped
 *             fwrite(ev[k].piece, 1, ev[k].len, out[ev[k].id]);
 *             if (ev[k].done) { ... wb_gen_result_get(wb_batch_gen(b, ev[k].id)) ...;
 *                               wb_batch_remove(b, ev[k].id, &err); }
 *         }
 *     }
 *     wb_batch_free(b);
 *
 * wb_batch_generate runs a fixed set of prompts that way to the end (model:generate_batch).
 */
#ifndef WB_BATCH_H
#define WB_BATCH_H

#include "wb_base.h"
#include "wb_generate.h"
#include "wb_model.h"
#include "wb_sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_batch wb_batch;

/* A batch for one model (which must outlive it). Its buffers are kept between steps and calls,
 * so steady-state steps allocate nothing. */
wb_status wb_batch_new(const wb_model *m, wb_batch **out, wb_err *err);
/* Frees every generator still in the batch (and so their caches). */
void wb_batch_free(wb_batch *b);

/* One forward pass over n distinct sessions of b's model: counts[i] tokens ids[i] go through
 * sessions[i] at its own position. logits: NULL or [n, V], the last position of each. On any
 * error no session moves. With every count 1 this is one batched decode step. */
wb_status wb_batch_forward(wb_batch *b, wb_session *const *sessions, const int32_t *const *ids,
                           const int *counts, int n, float *logits, wb_err *err);

/* ---- continuous batching ---------------------------------------------------------------- */

/* Add a generator (made by wb_gen_new / wb_gen_new_ids for b's model; not yet stepped, or part
 * way: it continues where it is). The batch takes ownership, also when this fails (g is freed).
 * *id: a handle, unique among the batch's requests, > 0. */
wb_status wb_batch_add(wb_batch *b, wb_gen *g, int *id, wb_err *err);

/* What one request did in a step. */
typedef struct wb_batch_event {
    int id;            /* the request's handle                                            */
    const char *piece; /* text released this step (complete UTF-8, never part of a stop
                          string); valid until the request's next step or removal          */
    size_t len;
    int32_t token;     /* the id sampled this step, or -1 (the request ended without one) */
    int done;          /* the request ended this step: read its result, then remove it    */
    wb_status status;  /* WB_OK, or the error that ended this request alone (err.msg)     */
    wb_err err;
} wb_batch_event;

/* Advance every running request by one token: one stacked forward pass for all of them (a
 * request's first step prefills its prompt in the same pass, or alone with separate prefill).
 * *events: one entry per request that was running, valid until the next step. *evaluated
 * (optional): rows evaluated (0 when every request ended before evaluating). A failing forward
 * pass ends the requests in it (status in their events; WB_ERR_CANCELLED from the model's abort
 * hook ends them as "cancelled"); the step itself fails only on bad arguments or memory. */
wb_status wb_batch_step(wb_batch *b, const wb_batch_event **events, int *n_events, int *evaluated,
                        wb_err *err);

/* The generator of a request (for wb_gen_result_get, wb_gen_cancel), NULL for an unknown id. */
wb_gen *wb_batch_gen(const wb_batch *b, int id);
/* Remove a request: cancels it if running and frees its generator and cache at once. */
wb_status wb_batch_remove(wb_batch *b, int id, wb_err *err);
/* Requests still running / requests in the batch (running or done, not yet removed). */
int wb_batch_active(const wb_batch *b);
int wb_batch_size(const wb_batch *b);
/* Bytes of KV cache the batch's requests hold now (finished requests have released theirs). */
size_t wb_batch_cache_bytes(const wb_batch *b);
/* 1: a request's first step prefills its prompt in its own pass (as alone); 0 (default): in the
 * step's stacked pass with everyone else's rows. */
void wb_batch_set_separate_prefill(wb_batch *b, int on);

/* ---- a fixed set of prompts to the end -------------------------------------------------- */

typedef struct wb_batch_params {
    wb_gen_params gen;    /* every request's generation options (n_ctx, ignore_eos, holdback,
                             constraint, logprobs, ...; cache must stay on to batch)          */
    int separate_prefill; /* see wb_batch_set_separate_prefill                               */
} wb_batch_params;

wb_batch_params wb_batch_default_params(void);

typedef struct wb_batch_seq {
    const int32_t *token_ids;  /* generated ids, stop tokens included                         */
    size_t n_tokens;
    wb_stop_reason stop_reason;
    int32_t prompt_tokens;     /* ids evaluated after trimming                                */
    const char *text;          /* as wb_gen_result.text (stop string and eos removed)         */
    size_t text_len;
    const wb_gen_result *result; /* everything else (timings, logprobs, constraint pressure)  */
} wb_batch_seq;

typedef struct wb_batch_result {
    int n_seqs;
    const wb_batch_seq *seqs;  /* [n_seqs] */
    int steps;                 /* forward passes after the first (the decode steps)           */
    int64_t output_tokens;     /* sum of n_tokens                                             */
    double prefill_ms;         /* start to the first tokens of every sequence                 */
    double decode_ms;          /* the rest                                                    */
    double elapsed_ms;         /* prefill_ms + decode_ms                                      */
    double tokens_per_s;       /* output_tokens / elapsed                                     */
    double decode_tokens_per_s;/* tokens made by decode steps / decode_ms (0 when none)       */
} wb_batch_result;

/* Generate for n_seqs prompt id arrays at once (n_prompt[i] may be 0: start from eos), each
 * request built from sp and bp->gen exactly as wb_gen_new_ids would (so the same seed when
 * sp->has_seed). Finished requests leave the batch; the others go on. Replaces whatever the
 * batch held. An error names the prompt: "prompts[2]: ...". */
wb_status wb_batch_generate(wb_batch *b, const int32_t *const *prompts, const size_t *n_prompt,
                            int n_seqs, const wb_sampling_params *sp, const wb_batch_params *bp,
                            wb_err *err);

/* The last wb_batch_generate's result; valid until the next call on b or wb_batch_free. */
const wb_batch_result *wb_batch_result_get(const wb_batch *b);

#ifdef __cplusplus
}
#endif
#endif
