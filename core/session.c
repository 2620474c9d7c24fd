/* session.c - a KV cache for one sequence and the calls that run tokens through it.
 *
 * The cache is key/value [L, n_ctx, kv_width] each (kv_width from the model's family); the
 * forward passes themselves are the family's (core/model_family.h), reached through
 * wb_forward_seqs / wb_forward_decode. A session also keeps its activations (wb_scratch) between
 * calls, so a token costs no allocation.
 *
 * A session is made ready for its first tokens when it is created, so that a fresh process's
 * first decode steps cost what later ones do: the first positions of every layer's cache are
 * touched (page faults now, not one every few tokens; up to PREFAULT_BYTES, so a long context
 * is not committed up front) and the model's pool is started at the current thread count. The
 * first session of a model at a thread count also runs one throwaway decode step at position 0
 * (warm_step), so that what a process pays once (the decode code's first execution, the weights
 * into each thread's caches, the activations' allocation, the workers settling on their own
 * cores) is paid here, not by the user's first tokens: measured on TinyLM at 1 thread, a fresh
 * process's first step took 0.33 ms and its second 0.16-0.23, against 0.145 after. Before it,
 * the caller waits (up to READY_WAIT_MS) for the workers to run a job, so they take part in that
 * step: a decode step does not wait for a worker, and one that had not run yet (measured in fresh
 * TinyLM processes: absent from the warm step in 6 of 10, then from the first 8-20 steps) left
 * the weights of its share out of its core's cache and the first steps to the caller alone.
 */
#include "model_family.h"

#include <stdlib.h>
#include <string.h>

struct wb_session {
    const wb_model *m;
    int n_ctx, pos;
    int32_t *tokens;    /* [n_ctx] */
    float *k, *v;       /* [L, n_ctx, kv_width] each */
    wb_scratch scratch; /* activations, grown on demand */
};

void wb_session_free(wb_session *s) {
    if (!s) return;
    free(s->tokens);
    free(s->k);
    free(s->v);
    free(s->scratch.p);
    free(s);
}

#define PREFAULT_BYTES ((size_t)8 << 20)

/* One decode step of token 0 at position 0 into the session's own cache and scratch; pos stays 0,
 * so the row it wrote is dead (overwritten before it is read). */
static wb_status warm_step(wb_session *s, wb_err *err) {
    float *logits = malloc((size_t)s->m->cfg.vocab_size * sizeof *logits);
    if (!logits) return wb_err_set(err, WB_ERR_NOMEM, "wb_session_new: out of memory");
    const int32_t id = 0;
    wb_seq_rows one = {s->k, s->v, s->n_ctx, 0, &id, 1, NULL};
    wb_status st = wb_forward_decode(s->m, &one, logits, &s->scratch, err);
    free(logits);
    return st;
}

/* Before the warm-up step, the caller waits up to READY_WAIT_MS for every worker to join a job:
 * a worker just started, or asleep on a core that has been idle, may take milliseconds to run for
 * the first time, and a decode step does not wait for it (wb_pool_run_helped), so it would miss
 * the warm-up and the first steps would run alone. Bounded: under load another process can keep
 * a worker off its CPU for a whole time slice (measured with load 7 on 2 cores: waiting for all
 * of them made wb_session_new take 6-9 ms, median, against 1-2), and a late worker still joins
 * the decode steps it finds running. */
#define READY_WAIT_MS 1.0

typedef struct ready_job {
    wb_pool *pool;
    atomic_uint joined; /* workers that ran the job */
} ready_job;

static void pool_ready(void *arg, int tid, int nt) {
    ready_job *j = arg;
    if (tid) {
        wb_pool_count_add(j->pool, &j->joined, 1);
        return;
    }
    const double t0 = wb_clock_ms();
    while (atomic_load(&j->joined) < (unsigned)(nt - 1) && wb_clock_ms() - t0 < READY_WAIT_MS) {
    }
}

static wb_status wait_workers(const wb_model *m, int nt, wb_err *err) {
    ready_job j = {NULL, 0};
    wb_status st = wb_pool_slot_acquire(wb_model_pool(m), nt, &j.pool, err);
    if (st) return st;
    wb_pool_run_helped(j.pool, pool_ready, &j);
    wb_pool_slot_release(wb_model_pool(m));
    return WB_OK;
}

static size_t cache_floats(const wb_model *m, int n_ctx) {
    return (size_t)m->cfg.n_layer * (size_t)n_ctx * wb_model_kv_width(m);
}

wb_status wb_session_new(const wb_model *m, int n_ctx, wb_session **out, wb_err *err) {
    if (!m || !out) return wb_err_set(err, WB_ERR_ARG, "wb_session_new: NULL argument");
    *out = NULL;
    wb_status st = wb_model_check_ctx(m, n_ctx, &n_ctx, err);
    if (st) return st;
    const size_t kv = cache_floats(m, n_ctx);
    wb_session *s = calloc(1, sizeof *s);
    if (!s) return wb_err_set(err, WB_ERR_NOMEM, "wb_session_new: out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
    s->tokens = malloc((size_t)n_ctx * sizeof *s->tokens);
    s->k = malloc(kv * sizeof(float));
    s->v = malloc(kv * sizeof(float));
    if (!s->tokens || !s->k || !s->v) {
        wb_session_free(s);
        return wb_err_set(err, WB_ERR_NOMEM, "wb_session_new: out of memory for a %zu-byte cache",
                          2 * kv * sizeof(float));
    }
    const size_t w = wb_model_kv_width(m), per_pos = 2 * (size_t)m->cfg.n_layer * w * sizeof(float);
    const size_t touch = per_pos ? PREFAULT_BYTES / per_pos : 0;
    const size_t npos = touch < (size_t)n_ctx ? touch : (size_t)n_ctx;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        memset(s->k + (size_t)l * n_ctx * w, 0, npos * w * sizeof(float));
        memset(s->v + (size_t)l * n_ctx * w, 0, npos * w * sizeof(float));
    }
    const int nt = wb_compute_threads();
    wb_pool *pool;
    if (nt > 1) {
        if ((st = wb_pool_slot_acquire(wb_model_pool(m), nt, &pool, err))) {
            wb_session_free(s);
            return st;
        }
        wb_pool_slot_release(wb_model_pool(m));
    }
    if (wb_pool_slot_claim_warm(wb_model_pool(m), nt) &&
        ((nt > 1 && (st = wait_workers(m, nt, err))) ||
         (st = warm_step(s, err)))) {
        wb_session_free(s);
        return st;
    }
    *out = s;
    return WB_OK;
}

const wb_model *wb_session_model(const wb_session *s) { return s ? s->m : NULL; }
int wb_session_pos(const wb_session *s) { return s ? s->pos : 0; }
int wb_session_n_ctx(const wb_session *s) { return s ? s->n_ctx : 0; }
const int32_t *wb_session_tokens(const wb_session *s) { return s ? s->tokens : NULL; }

size_t wb_session_cache_bytes(const wb_session *s) {
    return s ? 2 * cache_floats(s->m, s->n_ctx) * sizeof(float) : 0;
}

void wb_session_reset(wb_session *s) {
    if (s) s->pos = 0;
}

wb_status wb_session_truncate(wb_session *s, int n, wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "wb_session_truncate: NULL session");
    if (n < 0 || n > s->pos)
        return wb_err_set(err, WB_ERR_RANGE, "wb_session_truncate: n = %d is outside [0, %d]", n,
                          s->pos);
    s->pos = n; /* rows past pos are dead: overwritten before they are read again */
    return WB_OK;
}

wb_status wb_session_fork(const wb_session *s, wb_session **out, wb_err *err) {
    if (!s || !out) return wb_err_set(err, WB_ERR_ARG, "wb_session_fork: NULL argument");
    wb_session *f;
    wb_status st = wb_session_new(s->m, s->n_ctx, &f, err);
    if (st) return st;
    const size_t C = wb_model_kv_width(s->m), row = (size_t)s->n_ctx * C;
    for (int l = 0; l < s->m->cfg.n_layer; l++) {
        memcpy(f->k + l * row, s->k + l * row, (size_t)s->pos * C * sizeof(float));
        memcpy(f->v + l * row, s->v + l * row, (size_t)s->pos * C * sizeof(float));
    }
    memcpy(f->tokens, s->tokens, (size_t)s->pos * sizeof *s->tokens);
    f->pos = s->pos;
    *out = f;
    return WB_OK;
}

wb_status wb_session_rows(wb_session *s, const int32_t *ids, int n, wb_seq_rows *out,
                          wb_err *err) {
    if (!s || !out || (!ids && n > 0))
        return wb_err_set(err, WB_ERR_ARG, "wb_session_rows: NULL argument");
    if (n < 1) return wb_err_set(err, WB_ERR_ARG, "wb_session_rows: n = %d, need at least 1", n);
    if (n > s->n_ctx - s->pos)
        return wb_err_set(err, WB_ERR_RANGE,
                          "%d tokens at position %d do not fit the context of %d tokens (n_ctx)",
                          n, s->pos, s->n_ctx);
    wb_status st = wb_check_ids(s->m, ids, n, err);
    if (st) return st;
    *out = (wb_seq_rows){s->k, s->v, s->n_ctx, s->pos, ids, n, NULL};
    return WB_OK;
}

void wb_session_commit(wb_session *s, const int32_t *ids, int n) {
    memcpy(s->tokens + s->pos, ids, (size_t)n * sizeof *ids);
    s->pos += n;
}

wb_status wb_session_prefill(wb_session *s, const int32_t *ids, int n, float *logits,
                             int all_positions, wb_err *err) {
    return wb_session_prefill_inspect(s, ids, n, logits, all_positions, NULL, err);
}

wb_status wb_session_prefill_inspect(wb_session *s, const int32_t *ids, int n, float *logits,
                                     int all_positions, wb_probe *probe, wb_err *err) {
    if (!s || (!ids && n > 0)) return wb_err_set(err, WB_ERR_ARG, "wb_session_prefill: NULL argument");
    if (n < 1) return wb_err_set(err, WB_ERR_ARG, "wb_session_prefill: n = %d, need at least 1", n);
    if (n > s->n_ctx - s->pos)
        return wb_err_set(err, WB_ERR_RANGE,
                          "prompt of %d tokens at position %d does not fit the context of %d "
                          "tokens (n_ctx)", n, s->pos, s->n_ctx);
    wb_seq_rows rows;
    wb_status st = wb_session_rows(s, ids, n, &rows, err);
    if (!st) st = wb_probe_check(s->m, probe, s->pos, n, err);
    rows.probe = probe;
    if (!st) st = wb_forward_seqs(s->m, &rows, 1, logits, all_positions, &s->scratch, err);
    if (st) return st; /* pos unchanged: rows written past it are dead */
    wb_session_commit(s, ids, n);
    return WB_OK;
}

wb_status wb_session_kv(const wb_session *s, int layer, wb_kv_view *out, wb_err *err) {
    if (!s || !out) return wb_err_set(err, WB_ERR_ARG, "wb_session_kv: NULL argument");
    const wb_config *c = &s->m->cfg;
    if (layer < 0 || layer >= c->n_layer)
        return wb_err_set(err, WB_ERR_RANGE, "wb_session_kv: layer %d is outside [0, %d)", layer,
                          (int)c->n_layer);
    const size_t w = wb_model_kv_width(s->m), lo = (size_t)layer * (size_t)s->n_ctx * w;
    /* GPT-2 caches all n_head heads of C / n_head; the rotary families n_kv_head of head_dim */
    *out = (wb_kv_view){s->k + lo, s->v + lo, s->pos, c->n_kv_head, c->head_dim, w};
    return WB_OK;
}

wb_status wb_session_decode(wb_session *s, int32_t id, float *logits, wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "wb_session_decode: NULL session");
    if (s->pos >= s->n_ctx)
        return wb_err_set(err, WB_ERR_RANGE,
                          "wb_session_decode: the context of %d tokens (n_ctx) is full", s->n_ctx);
    wb_seq_rows one;
    wb_status st = wb_session_rows(s, &id, 1, &one, err);
    if (!st) st = wb_forward_decode(s->m, &one, logits, &s->scratch, err);
    if (st) return st;
    wb_session_commit(s, &id, 1);
    return WB_OK;
}
