/* wb_generate.h - the generation loop: prompt trimming, prefill, decode steps, stops, timings.
 *
 * A generator (wb_gen) runs one request one token per call, so a caller can stream:
 *
 *     wb_gen *g; wb_gen_new(model, prompt, len, &sp, &gp, &g, &err);
 *     for (int done = 0; !done;) {
 *         const char *piece; size_t n;
 *         if (wb_gen_next(g, &piece, &n, &done, &err) != WB_OK) break;
 *         fwrite(piece, 1, n, stdout);      // complete UTF-8, never part of a stop string
 *     }
 *     const wb_gen_result *r = wb_gen_result_get(g);  ... wb_gen_free(g);
 *
 * wb_generate() runs the same loop to the end, with an optional per-piece callback.
 *
 * Each wb_gen_next: (first call) prefill the prompt, or evaluate the previous token; poll the
 * abort callback; sample one token; decide whether it ends generation; release text.
 * Stop rules, checked after every token in this order:
 *   eos id (the tokenizer's <|endoftext|>)   -> "eos"      token kept in token_ids, not in text
 *   an id in stop_token_ids                  -> "stop"     token kept in token_ids, not in text
 *   a stop string appears in the decoded text-> "stop"     text cut before it; tokens kept
 *   max_tokens generated                     -> "length"
 *   the context is full                      -> "context"
 *   abort callback or model abort            -> "cancelled"
 *   the constraint is complete               -> "constraint" (checked after the stop rules
 *                                               above but before max_tokens; an eos token that
 *                                               ends a match also counts here, not as "eos")
 * Constraints (gp.constraint, wb_constraint.h): before each draw the constraint's allowed set
 * masks the logits (wb_sampler.h, step 3); the drawn token advances the constraint. An allowed
 * set that is empty while the constraint is not complete is an error (WB_ERR_STATE), never a
 * hang. Constraint pressure is recorded per step: the probability mass the raw model
 * (softmax of the logits as they came, temperature 1, no penalties or filters) put on the allowed
 * set, and the sum of its natural logs over the sequence (the log-probability the format
 * overruled; 0 when the model already agreed with the format).
 * Hold-back: with gp.holdback (default on) text that could still become the start of a stop
 * string is kept until a later token rules it out, so no byte of a matched stop string is ever
 * released and the concatenation of all pieces equals the final text exactly. With holdback off
 * every complete character is released at once (the classic leak, for the lesson).
 */
#ifndef WB_GENERATE_H
#define WB_GENERATE_H

#include "wb_base.h"
#include "wb_constraint.h"
#include "wb_model.h"
#include "wb_sampler.h"
#include "wb_tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wb_stop_reason {
    WB_STOP_NONE = 0, /* still running */
    WB_STOP_STOP,
    WB_STOP_LENGTH,
    WB_STOP_EOS,
    WB_STOP_CONTEXT,
    WB_STOP_CONSTRAINT,
    WB_STOP_CANCELLED
} wb_stop_reason;

/* "stop", "length", "eos", "context", "constraint", "cancelled" ("" for WB_STOP_NONE). */
const char *wb_stop_reason_name(wb_stop_reason r);

/* Streaming callback for wb_generate: a released piece and ms since the request started.
 * Return non-zero to cancel. */
typedef int (*wb_piece_fn)(void *user_data, const char *piece, size_t len, double ms);

/* Logits source for wb_gen_new_custom: the next-token logits [V] after the whole sequence
 * ids[0..n) (the no-cache contract). Lets tests and lessons drive the loop without a model. */
typedef wb_status (*wb_logits_fn)(void *user_data, const int32_t *ids, int n, float *logits,
                                  wb_err *err);

typedef struct wb_gen_params {
    int cache;               /* 1 (default): KV-cache session; 0: wb_model_forward per step    */
    int holdback;            /* 1 (default): hold text that may start a stop string            */
    int ignore_eos;          /* 1: <|endoftext|> is an ordinary token (fixed-length benchmarks) */
    int n_ctx;               /* <= 0: the model's n_positions                                  */
    wb_abort_fn abort_fn;    /* polled before every token; non-zero -> "cancelled"             */
    void *abort_data;
    const wb_constraint *constraint; /* optional; retained by the generator (wb_constraint.h),
                                        so the caller may free it                             */
    int logprobs;            /* 1: record each token's log-probabilities (result.logprobs)    */
    int top_logprobs;        /* 0..WB_MAX_TOP_LOGPROBS: also the k most likely alternatives     */
    int chunk_size;          /* > 0: prefill the prompt in chunks of this many tokens through
                                the cache (same logits); needs cache; 0 (default): one pass    */
    int cancel_after;        /* > 0: end as "cancelled" once this many tokens are generated     */
    wb_piece_fn on_piece;    /* wb_generate only                                               */
    void *piece_data;
} wb_gen_params;

wb_gen_params wb_gen_default_params(void);

/* Log-probabilities of one token at one step (natural logs). */
typedef struct wb_token_logprob {
    int32_t id;        /* -1: no entry (fewer than k tokens had a finite logit)               */
    float logprob;     /* under the distribution the draw used: penalties, bias, mask, min_tokens,
                          temperature and filters applied (0 for greedy's one-hot; -inf when
                          the filters removed the token)                                     */
    float raw_logprob; /* log-softmax of the logits as the model gave them (temperature 1,
                          nothing applied; padded vocabulary rows excluded)                  */
} wb_token_logprob;

#define WB_MAX_TOP_LOGPROBS 100

typedef struct wb_gen_result {
    const char *text;          /* NUL-terminated, stop string removed                          */
    size_t text_len;
    const int32_t *token_ids;  /* every sampled id, stop tokens included (they were paid for)  */
    size_t n_tokens;
    wb_stop_reason stop_reason;
    int stop_index;            /* the stop string (or stop_token_ids entry) that matched, or -1 */
    int32_t prompt_tokens;     /* ids actually evaluated                                       */
    int32_t prompt_tokens_dropped; /* cut from the left to leave room for max_tokens           */
    double prefill_ms;         /* the prefill call alone                                       */
    double decode_ms_per_token;/* (end - end of prefill) / tokens                              */
    double ttft_ms;            /* request start to the first token sampled                     */
    const double *itl_ms;      /* n_tokens - 1 gaps between consecutive tokens being sampled   */
    size_t n_itl;
    double e2e_ms;             /* request start to the end                                     */
    uint64_t seed;             /* the seed actually used                                       */
    /* Constraint pressure (gp.constraint; n_masked 0 otherwise): one entry per step
     * that had a mask. */
    const float *allowed_mass;    /* raw model probability of the allowed set, per step         */
    size_t n_masked;
    double constraint_logprob;    /* sum of ln(allowed_mass): <= 0, the log-probability overruled */
    int32_t constraint_overruled; /* steps where the raw model's argmax was not allowed          */
    /* gp.logprobs: one entry per generated token (NULL otherwise). gp.top_logprobs = k: k entries
     * per step, the k largest raw logits in descending order (lower id first on ties), each with
     * both log-probabilities. */
    const wb_token_logprob *logprobs;     /* [n_tokens]                                     */
    const wb_token_logprob *top_logprobs; /* [n_tokens * n_top_logprobs]                    */
    int n_top_logprobs;
    /* Trace fields. The KV cache is freed on every stop (cancellation included): a finished
     * request holds no cache, and cache_tokens_before_release says how much it held. */
    double tokenization_ms;    /* request start to the prompt ids (0 for id prompts)          */
    int use_cache;             /* gp.cache as run                                              */
    int32_t chunk_size;        /* gp.chunk_size as run (0: one-shot prefill)                   */
    int32_t cache_tokens_before_release; /* tokens in the session when it was freed (0: none) */
    int cache_released;        /* 1 once the session has been freed                            */
    double last_token_ms;      /* request start to the last token sampled: the trace's end    */
} wb_gen_result;

typedef struct wb_gen wb_gen;

/* Start a request on a model: tokenize the prompt, trim it, set up sampler and cache. Nothing is
 * evaluated until the first wb_gen_next. An empty prompt starts from the eos token (GPT-2's
 * convention) and is an error when the tokenizer has none. The model must outlive the generator. */
wb_status wb_gen_new(const wb_model *m, const char *prompt, size_t prompt_len,
                     const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                     wb_err *err);

/* The same over prompt ids instead of text (copied, then trimmed like text prompts). */
wb_status wb_gen_new_ids(const wb_model *m, const int32_t *ids, size_t n_ids,
                         const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                         wb_err *err);

/* The same loop over a caller-supplied logits source (no cache, gp->cache ignored). tok must
 * outlive the generator; n_ctx is the sequence limit. */
wb_status wb_gen_new_custom(wb_logits_fn fn, void *user_data, int32_t vocab_size, int32_t n_ctx,
                            const wb_tokenizer *tok, const char *prompt, size_t prompt_len,
                            const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                            wb_err *err);

void wb_gen_free(wb_gen *g);

/* One token. *piece and *len: text released by this step (possibly empty; valid until the next call
 * on g). *done becomes 1 on the step that ends generation (its piece includes the final flush);
 * later calls return WB_OK, done = 1 and an empty piece. A failing model call returns its status
 * and also ends the generator (done = 1; text so far is kept). */
wb_status wb_gen_next(wb_gen *g, const char **piece, size_t *len, int *done, wb_err *err);

/* The result so far (final once done). Pointers stay valid until wb_gen_free or the next call. */
const wb_gen_result *wb_gen_result_get(const wb_gen *g);

/* Milliseconds since the request started (for stamping streamed pieces). */
double wb_gen_elapsed_ms(const wb_gen *g);

/* Create, run to the end (calling gp->on_piece per non-empty piece), return the finished
 * generator in *out for wb_gen_result_get; free it with wb_gen_free. */
wb_status wb_generate(const wb_model *m, const char *prompt, size_t prompt_len,
                      const wb_sampling_params *sp, const wb_gen_params *gp, wb_gen **out,
                      wb_err *err);

/* Cancel a running generator from outside (a closed stream, a caller's own stop): it ends as
 * "cancelled", held-back text is released into the final text, and the cache is freed. A no-op
 * once done. */
wb_status wb_gen_cancel(wb_gen *g, wb_err *err);

/* Run an already created generator to the end (as wb_generate). */
wb_status wb_gen_run(wb_gen *g, wb_err *err);

/* ---- driving generators from outside (wb_batch.h) ---------------------------------------
 * wb_gen_next is wb_gen_step_begin, an evaluation, then wb_gen_step_end; a driver that evaluates
 * many generators in one forward pass calls the halves itself, so every stop rule, eos id, stop
 * string, constraint, penalty, seed and log-probability behaves exactly as in wb_gen_next:
 *
 *     wb_gen_feed f;
 *     wb_gen_step_begin(g, &f, &piece, &len, &done, &err);    // done: ended before evaluating
 *     if (!done && f.n)  run f.ids[0..f.n) through f.sess     // e.g. wb_batch_forward
 *     wb_gen_step_end(g, logits_after_the_last_id, status_of_that_run, &piece, &len, &done, &err);
 *
 * f.n == 0 (logits already there: a shared or chunked prefill done by begin) means pass NULL
 * logits to step_end. A generator without a cache (gp.cache = 0, custom logits) evaluates inside
 * begin. A failed evaluation (status != WB_OK) ends the generator as wb_gen_next would:
 * WB_ERR_CANCELLED as "cancelled", anything else as an error (the message already in err). */
typedef struct wb_gen_feed {
    wb_session *sess; /* the generator's own session                          */
    const int32_t *ids; /* the prompt (first step) or the previous token       */
    int n;
} wb_gen_feed;

wb_status wb_gen_step_begin(wb_gen *g, wb_gen_feed *feed, const char **piece, size_t *len,
                            int *done, wb_err *err);
wb_status wb_gen_step_end(wb_gen *g, const float *logits, wb_status eval_status,
                          const char **piece, size_t *len, int *done, wb_err *err);

/* The generator's KV cache (NULL without a cache or once released). */
wb_session *wb_gen_session(const wb_gen *g);

/* n completions of one prompt (n = 4): evaluate gens[0]'s prompt once and give every other
 * generator a fork of that session and the same logits. All must be fresh cached generators of
 * one model with the same (trimmed) prompt and context; each keeps its own sampler and seed, so
 * completion i is exactly what it would be alone. */
wb_status wb_gen_share_prefill(wb_gen *const *gens, int n, wb_err *err);

#ifdef __cplusplus
}
#endif
#endif
