/* wb_batch.h - batched generation: B sequences decode together, one forward pass per step.
 *
 * Every sequence keeps its own session (KV cache and position). A step stacks one row per active
 * sequence, so each weight matrix is read once per step for all of them (a GEMM instead of B
 * GEMVs), while attention runs per sequence over its own cache: prompts of different lengths
 * need no padding, and a sequence's tokens are those it would get alone (the same greedy ids;
 * logits agree to float rounding, since a GEMM sums in another order than the decode GEMV).
 *
 *     wb_batch *b; wb_batch_new(model, &b, &err);
 *     wb_batch_generate(b, prompts, lens, n, &sp, NULL, &err);
 *     const wb_batch_result *r = wb_batch_result_get(b);   ... r->seqs[i].token_ids ...
 *     wb_batch_free(b);
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

/* A batch runner for one model (which must outlive it). It keeps its sessions and buffers
 * between calls, so repeated runs of the same size allocate nothing. */
wb_status wb_batch_new(const wb_model *m, wb_batch **out, wb_err *err);
void wb_batch_free(wb_batch *b);

/* One forward pass over n distinct sessions of b's model: counts[i] tokens ids[i] go through
 * sessions[i] at its own position. logits: NULL or [n, V], the last position of each. On any
 * error no session moves. With every count 1 this is one batched decode step. */
wb_status wb_batch_forward(wb_batch *b, wb_session *const *sessions, const int32_t *const *ids,
                           const int *counts, int n, float *logits, wb_err *err);

typedef struct wb_batch_params {
    int n_ctx;          /* per-sequence context; <= 0: the model's n_positions              */
    int ignore_eos;     /* 1: <|endoftext|> is an ordinary token (fixed-length benchmarks)  */
    int separate_prefill; /* 1: prefill each prompt in its own pass (as alone); 0 (default):
                             all prompts in one stacked pass                                 */
} wb_batch_params;

wb_batch_params wb_batch_default_params(void);

typedef struct wb_batch_seq {
    const int32_t *token_ids;  /* generated ids, stop tokens included                         */
    size_t n_tokens;
    wb_stop_reason stop_reason;/* "eos", "stop" (stop_token_ids), "length" or "context"      */
    int32_t prompt_tokens;     /* ids evaluated after trimming (as wb_gen trims)              */
} wb_batch_seq;

typedef struct wb_batch_result {
    int n_seqs;
    const wb_batch_seq *seqs;  /* [n_seqs] */
    int steps;                 /* decode forward passes                                       */
    int64_t output_tokens;     /* sum of n_tokens                                             */
    double prefill_ms;         /* start to the first tokens of every sequence                 */
    double decode_ms;          /* the rest                                                    */
    double elapsed_ms;         /* prefill_ms + decode_ms                                      */
    double tokens_per_s;       /* output_tokens / elapsed                                     */
    double decode_tokens_per_s;/* tokens made by decode steps / decode_ms (0 when none)       */
} wb_batch_result;

/* Generate for n_seqs prompt id arrays at once (n_prompt[i] may be 0: start from eos). Each
 * sequence has its own sampler made from sp (same seed when sp->has_seed, so a sequence samples
 * as it would alone); stop strings are not supported here (use stop_token_ids). Finished
 * sequences leave the batch; the others go on. */
wb_status wb_batch_generate(wb_batch *b, const int32_t *const *prompts, const size_t *n_prompt,
                            int n_seqs, const wb_sampling_params *sp, const wb_batch_params *bp,
                            wb_err *err);

/* The last wb_batch_generate's result; valid until the next call on b or wb_batch_free. */
const wb_batch_result *wb_batch_result_get(const wb_batch *b);

#ifdef __cplusplus
}
#endif
#endif
