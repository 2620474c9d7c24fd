/* batch.c - batched generation over B sessions: one stacked forward pass per step.
 *
 * The block code is wb_forward_seqs (session.c), shared with prefill, so a new block type only
 * needs teaching there. This file owns the bookkeeping: which sequences are still running, their
 * samplers, the stop rules and the timings. */
#include "wb_batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

typedef struct seq_state {
    wb_session *sess;
    wb_sampler *smp;
    int32_t *gen;   /* [max_tokens] */
    size_t n_gen;
    int32_t last;
    wb_stop_reason stop;
    int32_t prompt_tokens;
} seq_state;

struct wb_batch {
    const wb_model *m;
    wb_scratch scratch;
    seq_state *seq;
    int cap, n_ctx_of_sessions; /* cap: seq entries */
    int arr_cap;                /* entries of the per-step arrays below */
    /* per-step arrays, [cap] each */
    wb_session **act_sess;
    const int32_t **act_ids;
    int *act_counts, *act_index;
    float *logits; /* [cap, V] */
    wb_batch_seq *out;
    wb_batch_result res;
};

wb_batch_params wb_batch_default_params(void) {
    wb_batch_params p;
    memset(&p, 0, sizeof p);
    return p;
}

wb_status wb_batch_new(const wb_model *m, wb_batch **out, wb_err *err) {
    if (!m || !out) return wb_err_set(err, WB_ERR_ARG, "wb_batch_new: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out) return wb_err_set(err, WB_ERR_NOMEM, "wb_batch_new: out of memory");
    (*out)->m = m;
    return WB_OK;
}

static void release_seqs(wb_batch *b) {
    for (int i = 0; i < b->cap; i++) {
        wb_session_free(b->seq[i].sess);
        wb_sampler_free(b->seq[i].smp);
        free(b->seq[i].gen);
    }
}

void wb_batch_free(wb_batch *b) {
    if (!b) return;
    release_seqs(b);
    free(b->seq);
    free(b->act_sess);
    free(b->act_ids);
    free(b->act_counts);
    free(b->act_index);
    free(b->logits);
    free(b->out);
    free(b->scratch.p);
    free(b);
}

wb_status wb_batch_forward(wb_batch *b, wb_session *const *sessions, const int32_t *const *ids,
                           const int *counts, int n, float *logits, wb_err *err) {
    if (!b || !sessions || !ids || !counts)
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_forward: NULL argument");
    if (n < 1) return wb_err_set(err, WB_ERR_ARG, "wb_batch_forward: n = %d, need at least 1", n);
    wb_seq_rows small[16] = {{0}}, *rows = n <= 16 ? small : malloc((size_t)n * sizeof *rows);
    if (!rows) return wb_err_set(err, WB_ERR_NOMEM, "wb_batch_forward: out of memory");
    wb_status st = WB_OK;
    for (int i = 0; i < n && !st; i++) {
        if (!sessions[i] || wb_session_model(sessions[i]) != b->m) {
            st = wb_err_set(err, WB_ERR_ARG, "wb_batch_forward: sessions[%d] is %s", i,
                            sessions[i] ? "of another model" : "NULL");
            break;
        }
        /* Two rows of one session would both write its next cache row. */
        for (int j = 0; j < i; j++)
            if (sessions[j] == sessions[i]) {
                st = wb_err_set(err, WB_ERR_ARG,
                                "wb_batch_forward: sessions[%d] and sessions[%d] are the same "
                                "session", j, i);
                break;
            }
        if (!st) {
            wb_err e = {0};
            st = wb_session_rows(sessions[i], ids[i], counts[i], &rows[i], &e);
            if (st) wb_err_set(err, st, "wb_batch_forward: sessions[%d]: %s", i, e.msg);
        }
    }
    if (!st) st = wb_forward_seqs(b->m, rows, n, logits, 0, &b->scratch, err);
    if (!st)
        for (int i = 0; i < n; i++) wb_session_commit(sessions[i], ids[i], counts[i]);
    if (rows != small) free(rows);
    return st;
}

/* Room for n sequences of n_ctx tokens; sessions are kept when the context matches. */
static wb_status reserve(wb_batch *b, int n, int n_ctx, int32_t max_tokens, wb_err *err) {
    const int32_t V = wb_model_config(b->m)->vocab_size;
    if (n_ctx != b->n_ctx_of_sessions) {
        for (int i = 0; i < b->cap; i++) {
            wb_session_free(b->seq[i].sess);
            b->seq[i].sess = NULL;
        }
        b->n_ctx_of_sessions = n_ctx;
    }
    if (n > b->cap) {
        seq_state *seq = realloc(b->seq, (size_t)n * sizeof *seq);
        if (!seq) goto nomem;
        memset(seq + b->cap, 0, (size_t)(n - b->cap) * sizeof *seq);
        b->seq = seq;
        b->cap = n;
    }
    if (n > b->arr_cap) {
        b->arr_cap = 0;
        free(b->act_sess);
        free(b->act_ids);
        free(b->act_counts);
        free(b->act_index);
        free(b->logits);
        free(b->out);
        b->act_sess = malloc((size_t)n * sizeof *b->act_sess);
        b->act_ids = malloc((size_t)n * sizeof *b->act_ids);
        b->act_counts = malloc((size_t)n * sizeof *b->act_counts);
        b->act_index = malloc((size_t)n * sizeof *b->act_index);
        b->logits = malloc((size_t)n * (size_t)V * sizeof *b->logits);
        b->out = malloc((size_t)n * sizeof *b->out);
        if (!b->act_sess || !b->act_ids || !b->act_counts || !b->act_index || !b->logits ||
            !b->out)
            goto nomem;
        b->arr_cap = n;
    }
    for (int i = 0; i < n; i++) {
        seq_state *q = &b->seq[i];
        wb_status st;
        if (!q->sess && (st = wb_session_new(b->m, n_ctx, &q->sess, err))) return st;
        wb_session_reset(q->sess);
        free(q->gen);
        q->gen = malloc((size_t)max_tokens * sizeof *q->gen);
        if (!q->gen) goto nomem;
        q->n_gen = 0;
        q->stop = WB_STOP_NONE;
        wb_sampler_free(q->smp);
        q->smp = NULL;
    }
    return WB_OK;
nomem:
    return wb_err_set(err, WB_ERR_NOMEM, "batched generation of %d sequences: out of memory", n);
}

/* Take a sampled id: record it and decide whether the sequence is done (wb_gen's order). */
static void accept(seq_state *q, int32_t id, const wb_sampling_params *sp, int32_t eos,
                   int ignore_eos, int n_ctx) {
    q->gen[q->n_gen++] = id;
    q->last = id;
    if (id == eos && !ignore_eos) q->stop = WB_STOP_EOS;
    for (int k = 0; k < sp->n_stop_token_ids && !q->stop; k++)
        if (sp->stop_token_ids[k] == id) q->stop = WB_STOP_STOP;
    if (!q->stop && q->n_gen >= (size_t)sp->max_tokens) q->stop = WB_STOP_LENGTH;
    if (!q->stop && q->prompt_tokens + (int64_t)q->n_gen >= n_ctx) q->stop = WB_STOP_CONTEXT;
}

wb_status wb_batch_generate(wb_batch *b, const int32_t *const *prompts, const size_t *n_prompt,
                            int n_seqs, const wb_sampling_params *sp, const wb_batch_params *bp,
                            wb_err *err) {
    if (!b || !n_prompt || !sp || (!prompts && n_seqs > 0))
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: NULL argument");
    if (n_seqs < 1)
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: n_seqs = %d, need at least 1",
                          n_seqs);
    if (sp->n_stop > 0)
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: stop strings are not supported "
                          "in batched generation (use stop_token_ids)");
    b->res.n_seqs = 0; /* a failed call leaves no stale result */
    const double t0 = wb_clock_ms();
    const wb_batch_params p = bp ? *bp : wb_batch_default_params();
    const wb_config *cfg = wb_model_config(b->m);
    const int32_t V = cfg->vocab_size, eos = wb_tokenizer_eos_id(wb_model_tokenizer(b->m));
    /* ids past the tokenizer (padded embedding rows) have no text: never sampled (generate.c) */
    const int32_t n_tok = wb_tokenizer_vocab_size(wb_model_tokenizer(b->m));
    if (p.n_ctx > cfg->n_ctx)
        return wb_err_set(err, WB_ERR_RANGE, "n_ctx = %d exceeds the model's n_positions %d",
                          p.n_ctx, (int)cfg->n_ctx);
    const int n_ctx = p.n_ctx > 0 ? p.n_ctx : cfg->n_ctx;
    wb_status st = wb_sampling_params_check(sp, V, err);
    if (st) return st;
    for (int i = 0; i < n_seqs; i++) {
        if (n_prompt[i] > 0 && !prompts[i])
            return wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: prompts[%d] is NULL", i);
        if (n_prompt[i] == 0 && eos < 0)
            return wb_err_set(err, WB_ERR_ARG, "prompts[%d] is empty and the tokenizer has no "
                              "<|endoftext|> to start from", i);
        for (size_t t = 0; t < n_prompt[i]; t++)
            if (prompts[i][t] < 0 || prompts[i][t] >= V)
                return wb_err_set(err, WB_ERR_RANGE, "prompts[%d][%zu] = %d is outside [0, %d)",
                                  i, t, (int)prompts[i][t], (int)V);
    }
    if ((st = reserve(b, n_seqs, n_ctx, sp->max_tokens, err))) return st;
    for (int i = 0; i < n_seqs; i++)
        if ((st = wb_sampler_new(sp, V, &b->seq[i].smp, err))) return st;

    /* Prompts: trimmed from the left as wb_gen does, so prompt + max_tokens fits. */
    int64_t keep = (int64_t)n_ctx - sp->max_tokens;
    if (keep < 1) keep = 1;
    int n_act = 0;
    for (int i = 0; i < n_seqs; i++) {
        seq_state *q = &b->seq[i];
        size_t n = n_prompt[i], drop = (int64_t)n > keep ? n - (size_t)keep : 0;
        q->prompt_tokens = n ? (int32_t)(n - drop) : 1;
        b->act_sess[i] = q->sess;
        b->act_ids[i] = n ? prompts[i] + drop : &eos;
        b->act_counts[i] = q->prompt_tokens;
        b->act_index[i] = i;
        n_act++;
    }
    if (p.separate_prefill) {
        for (int i = 0; i < n_seqs && !st; i++)
            st = wb_batch_forward(b, &b->act_sess[i], &b->act_ids[i], &b->act_counts[i], 1,
                                  b->logits + (size_t)i * V, err);
    } else {
        st = wb_batch_forward(b, b->act_sess, b->act_ids, b->act_counts, n_act, b->logits, err);
    }
    if (st) return st;
    int64_t total = 0;
    for (int i = 0; i < n_seqs; i++) {
        seq_state *q = &b->seq[i];
        int32_t id;
        for (int32_t t = n_tok; t < V; t++) b->logits[(size_t)i * V + t] = -INFINITY;
        if ((st = wb_sampler_sample(q->smp, b->logits + (size_t)i * V, q->gen, q->n_gen, NULL, &id,
                                    NULL, err)))
            return st;
        accept(q, id, sp, eos, p.ignore_eos, n_ctx);
        total++;
    }
    const double t_first = wb_clock_ms();
    int steps = 0;
    for (;;) {
        n_act = 0;
        for (int i = 0; i < n_seqs; i++) {
            seq_state *q = &b->seq[i];
            if (q->stop) continue;
            b->act_sess[n_act] = q->sess;
            b->act_ids[n_act] = &q->last;
            b->act_counts[n_act] = 1;
            b->act_index[n_act] = i;
            n_act++;
        }
        if (n_act == 0) break;
        if ((st = wb_batch_forward(b, b->act_sess, b->act_ids, b->act_counts, n_act, b->logits,
                                   err)))
            return st;
        steps++;
        for (int a = 0; a < n_act; a++) {
            seq_state *q = &b->seq[b->act_index[a]];
            int32_t id;
            for (int32_t t = n_tok; t < V; t++) b->logits[(size_t)a * V + t] = -INFINITY;
            if ((st = wb_sampler_sample(q->smp, b->logits + (size_t)a * V, q->gen, q->n_gen, NULL,
                                        &id, NULL, err)))
                return st;
            accept(q, id, sp, eos, p.ignore_eos, n_ctx);
            total++;
        }
    }
    const double t_end = wb_clock_ms();
    for (int i = 0; i < n_seqs; i++)
        b->out[i] = (wb_batch_seq){b->seq[i].gen, b->seq[i].n_gen, b->seq[i].stop,
                                   b->seq[i].prompt_tokens};
    wb_batch_result *r = &b->res;
    r->n_seqs = n_seqs;
    r->seqs = b->out;
    r->steps = steps;
    r->output_tokens = total;
    r->prefill_ms = t_first - t0;
    r->decode_ms = t_end - t_first;
    r->elapsed_ms = t_end - t0;
    r->tokens_per_s = r->elapsed_ms > 0 ? 1000.0 * (double)total / r->elapsed_ms : 0;
    r->decode_tokens_per_s =
        r->decode_ms > 0 ? 1000.0 * (double)(total - n_seqs) / r->decode_ms : 0;
    return WB_OK;
}

const wb_batch_result *wb_batch_result_get(const wb_batch *b) {
    return b && b->res.n_seqs > 0 ? &b->res : NULL;
}
