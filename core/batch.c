/* batch.c - many generation cursors stepped together over one batched forward pass.
 *
 * A batch holds wb_gen generators (generate.c: the one generation loop). A step asks each running
 * generator what it needs evaluated (wb_gen_step_begin: the prompt on its first step, the last
 * token after), runs all of that as one stacked forward pass over their sessions
 * (wb_batch_forward -> wb_forward_seqs, shared with prefill), and hands each its logits
 * (wb_gen_step_end), which samples, checks every stop rule and releases text exactly as
 * wb_gen_next would. So nothing about a request's tokens depends on what else is in the batch,
 * and requests can join and leave between any two steps (continuous batching). */
#include "wb_batch.h"

#include <stdlib.h>
#include <string.h>

#include "model_family.h"

typedef struct slot {
    wb_gen *g;
    int id;
    int running; /* not yet done */
    int fresh;   /* no step taken yet: its next evaluation is the prompt */
} slot;

struct wb_batch {
    const wb_model *m;
    wb_scratch scratch;
    slot *slots; /* [n_slots], in the order they were added */
    int n_slots, cap_slots, next_id;
    int separate_prefill;
    /* per-step arrays, [arr_cap] each */
    int arr_cap;
    wb_session **act_sess;
    const int32_t **act_ids;
    int *act_counts, *act_slot, *act_event;
    float *logits; /* [arr_cap, V] */
    wb_batch_event *events;
    /* wb_batch_generate's result */
    wb_batch_seq *out;
    int out_cap;
    wb_batch_result res;
};

wb_batch_params wb_batch_default_params(void) {
    wb_batch_params p;
    memset(&p, 0, sizeof p);
    p.gen = wb_gen_default_params();
    return p;
}

wb_status wb_batch_new(const wb_model *m, wb_batch **out, wb_err *err) {
    if (!m || !out) return wb_err_set(err, WB_ERR_ARG, "wb_batch_new: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out) return wb_err_set(err, WB_ERR_NOMEM, "wb_batch_new: out of memory");
    (*out)->m = m;
    (*out)->next_id = 1;
    return WB_OK;
}

static void free_arrays(wb_batch *b) {
    free(b->act_sess);
    free(b->act_ids);
    free(b->act_counts);
    free(b->act_slot);
    free(b->act_event);
    free(b->logits);
    free(b->events);
    b->act_sess = NULL;
    b->act_ids = NULL;
    b->act_counts = b->act_slot = b->act_event = NULL;
    b->logits = NULL;
    b->events = NULL;
    b->arr_cap = 0;
}

void wb_batch_free(wb_batch *b) {
    if (!b) return;
    for (int i = 0; i < b->n_slots; i++) wb_gen_free(b->slots[i].g);
    free(b->slots);
    free_arrays(b);
    free(b->out);
    free(b->scratch.p);
    free(b);
}

void wb_batch_set_separate_prefill(wb_batch *b, int on) {
    if (b) b->separate_prefill = on != 0;
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

/* Room for n rows per step. */
static wb_status reserve_rows(wb_batch *b, int n, wb_err *err) {
    if (n <= b->arr_cap) return WB_OK;
    const size_t V = (size_t)wb_model_config(b->m)->vocab_size;
    int cap = b->arr_cap ? b->arr_cap : 4;
    while (cap < n) cap *= 2;
    free_arrays(b);
    b->act_sess = malloc((size_t)cap * sizeof *b->act_sess);
    b->act_ids = malloc((size_t)cap * sizeof *b->act_ids);
    b->act_counts = malloc((size_t)cap * sizeof *b->act_counts);
    b->act_slot = malloc((size_t)cap * sizeof *b->act_slot);
    b->act_event = malloc((size_t)cap * sizeof *b->act_event);
    b->logits = malloc((size_t)cap * V * sizeof *b->logits);
    b->events = malloc((size_t)cap * sizeof *b->events);
    if (!b->act_sess || !b->act_ids || !b->act_counts || !b->act_slot || !b->act_event || !b->logits ||
        !b->events) {
        free_arrays(b);
        return wb_err_set(err, WB_ERR_NOMEM, "batch of %d requests: out of memory", n);
    }
    b->arr_cap = cap;
    return WB_OK;
}

wb_status wb_batch_add(wb_batch *b, wb_gen *g, int *id_out, wb_err *err) {
    if (!b || !g) {
        wb_gen_free(g);
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_add: NULL argument");
    }
    wb_session *s = wb_gen_session(g);
    if (s && wb_session_model(s) != b->m) {
        wb_gen_free(g);
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_add: the generator runs another model");
    }
    if (b->n_slots == b->cap_slots) {
        int cap = b->cap_slots ? 2 * b->cap_slots : 8;
        slot *ns = realloc(b->slots, (size_t)cap * sizeof *ns);
        if (!ns) {
            wb_gen_free(g);
            return wb_err_set(err, WB_ERR_NOMEM, "wb_batch_add: out of memory");
        }
        b->slots = ns;
        b->cap_slots = cap;
    }
    wb_status st = reserve_rows(b, b->n_slots + 1, err);
    if (st != WB_OK) {
        wb_gen_free(g);
        return st;
    }
    slot *q = &b->slots[b->n_slots++];
    q->g = g;
    q->id = b->next_id++;
    if (b->next_id == INT32_MAX) b->next_id = 1;
    q->running = 1;
    q->fresh = 1;
    if (id_out) *id_out = q->id;
    return WB_OK;
}

static int find_slot(const wb_batch *b, int id) {
    for (int i = 0; i < b->n_slots; i++)
        if (b->slots[i].id == id) return i;
    return -1;
}

wb_gen *wb_batch_gen(const wb_batch *b, int id) {
    int i = b ? find_slot(b, id) : -1;
    return i < 0 ? NULL : b->slots[i].g;
}

wb_status wb_batch_remove(wb_batch *b, int id, wb_err *err) {
    int i = b ? find_slot(b, id) : -1;
    if (i < 0) return wb_err_set(err, WB_ERR_ARG, "batch: no request with id %d", id);
    wb_gen_free(b->slots[i].g); /* frees its cache at once, running or not */
    memmove(&b->slots[i], &b->slots[i + 1], (size_t)(b->n_slots - i - 1) * sizeof *b->slots);
    b->n_slots--;
    return WB_OK;
}

int wb_batch_active(const wb_batch *b) {
    int n = 0;
    for (int i = 0; b && i < b->n_slots; i++) n += b->slots[i].running;
    return n;
}

int wb_batch_size(const wb_batch *b) { return b ? b->n_slots : 0; }

/* Fill the event of slot q after its step ended (st: that step's status). */
static void close_event(wb_batch_event *e, slot *q, size_t n_before, const char *piece,
                        size_t len, int done, wb_status st, const wb_err *err) {
    const wb_gen_result *r = wb_gen_result_get(q->g);
    e->piece = piece ? piece : "";
    e->len = len;
    e->token = r->n_tokens > n_before ? r->token_ids[r->n_tokens - 1] : -1;
    e->done = done;
    e->status = st;
    e->err.status = st;
    e->err.msg[0] = '\0';
    if (st != WB_OK && err) e->err = *err;
    if (done) q->running = 0;
    q->fresh = 0;
}

wb_status wb_batch_step(wb_batch *b, const wb_batch_event **events, int *n_events, int *evaluated,
                        wb_err *err) {
    if (events) *events = NULL;
    if (n_events) *n_events = 0;
    if (evaluated) *evaluated = 0;
    if (!b) return wb_err_set(err, WB_ERR_ARG, "wb_batch_step: batch is NULL");
    wb_status st = reserve_rows(b, b->n_slots, err);
    if (st != WB_OK) return st;
    const size_t V = (size_t)wb_model_config(b->m)->vocab_size;
    int n_ev = 0, n_act = 0, n_eval = 0;
    size_t *before = NULL, small[16];
    before = b->n_slots <= 16 ? small : malloc((size_t)b->n_slots * sizeof *before);
    if (!before) return wb_err_set(err, WB_ERR_NOMEM, "wb_batch_step: out of memory");
    for (int i = 0; i < b->n_slots; i++) {
        slot *q = &b->slots[i];
        if (!q->running) continue;
        wb_batch_event *e = &b->events[n_ev];
        memset(e, 0, sizeof *e);
        e->id = q->id;
        before[i] = wb_gen_result_get(q->g)->n_tokens;
        wb_gen_feed f;
        const char *piece;
        size_t len;
        int done;
        wb_err e_err = {0};
        st = wb_gen_step_begin(q->g, &f, &piece, &len, &done, &e_err);
        if (st != WB_OK || done || f.n == 0) {
            /* ended before evaluating, or evaluated by itself (no cache, a chunked or shared
             * prefill): finish its step now */
            if (st == WB_OK && !done) {
                st = wb_gen_step_end(q->g, NULL, WB_OK, &piece, &len, &done, &e_err);
                n_eval++;
            }
            close_event(e, q, before[i], piece, len, done, st, &e_err);
            n_ev++;
            continue;
        }
        if (q->fresh && b->separate_prefill) {
            /* the prompt in its own pass, as alone */
            float *lg = b->logits + (size_t)n_act * V; /* free row: not yet handed out */
            wb_status fs = wb_batch_forward(b, &f.sess, &f.ids, &f.n, 1, lg, &e_err);
            st = wb_gen_step_end(q->g, lg, fs, &piece, &len, &done, &e_err);
            n_eval++;
            close_event(e, q, before[i], piece, len, done, st, &e_err);
            n_ev++;
            continue;
        }
        b->act_sess[n_act] = f.sess;
        b->act_ids[n_act] = f.ids;
        b->act_counts[n_act] = f.n;
        b->act_slot[n_act] = i;
        b->act_event[n_act] = n_ev;
        n_act++;
        n_ev++; /* its event is closed after the pass */
    }
    if (n_act > 0) {
        wb_err fe = {0};
        wb_status fs = wb_batch_forward(b, b->act_sess, b->act_ids, b->act_counts, n_act,
                                        b->logits, &fe);
        n_eval += n_act;
        for (int a = 0; a < n_act; a++) {
            slot *q = &b->slots[b->act_slot[a]];
            wb_batch_event *e = &b->events[b->act_event[a]];
            const char *piece;
            size_t len;
            int done;
            wb_err e_err = fe;
            st = wb_gen_step_end(q->g, fs == WB_OK ? b->logits + (size_t)a * V : NULL, fs, &piece,
                                 &len, &done, &e_err);
            close_event(e, q, before[b->act_slot[a]], piece, len, done, st, &e_err);
        }
    }
    if (before != small) free(before);
    if (events) *events = b->events;
    if (n_events) *n_events = n_ev;
    if (evaluated) *evaluated = n_eval;
    return WB_OK;
}

/* ---- all at once -------------------------------------------------------------------------- */

static void clear(wb_batch *b) {
    for (int i = 0; i < b->n_slots; i++) wb_gen_free(b->slots[i].g);
    b->n_slots = 0;
}

wb_status wb_batch_generate(wb_batch *b, const int32_t *const *prompts, const size_t *n_prompt,
                            int n_seqs, const wb_sampling_params *sp, const wb_batch_params *bp,
                            wb_err *err) {
    if (!b || !n_prompt || !sp || (!prompts && n_seqs > 0))
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: NULL argument");
    if (n_seqs < 1)
        return wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: n_seqs = %d, need at least 1",
                          n_seqs);
    b->res.n_seqs = 0; /* a failed call leaves no stale result */
    clear(b);
    const wb_batch_params p = bp ? *bp : wb_batch_default_params();
    const double t0 = wb_clock_ms();
    wb_status st = WB_OK;
    for (int i = 0; i < n_seqs && st == WB_OK; i++) {
        wb_gen *g = NULL;
        wb_err e = {0};
        if (n_prompt[i] > 0 && !prompts[i])
            st = wb_err_set(err, WB_ERR_ARG, "wb_batch_generate: prompts[%d] is NULL", i);
        else if ((st = wb_gen_new_ids(b->m, prompts[i], n_prompt[i], sp, &p.gen, &g, &e)))
            wb_err_set(err, st, "prompts[%d]: %s", i, e.msg);
        else
            st = wb_batch_add(b, g, NULL, err);
    }
    if (st != WB_OK) {
        clear(b);
        return st;
    }
    b->separate_prefill = p.separate_prefill;
    double t_first = 0;
    int steps = -1;
    while (wb_batch_active(b) > 0) {
        const wb_batch_event *ev;
        int n_ev, n_eval;
        if ((st = wb_batch_step(b, &ev, &n_ev, &n_eval, err)) != WB_OK) break;
        if (steps < 0) t_first = wb_clock_ms();
        if (n_eval > 0) steps++;
        for (int k = 0; k < n_ev && st == WB_OK; k++)
            if (ev[k].status != WB_OK) {
                int at = find_slot(b, ev[k].id);
                st = wb_err_set(err, ev[k].status, "prompts[%d]: %s", at, ev[k].err.msg);
            }
        if (st != WB_OK) break;
    }
    b->separate_prefill = 0;
    if (st != WB_OK) {
        clear(b);
        return st;
    }
    const double t_end = wb_clock_ms();
    if (n_seqs > b->out_cap) {
        wb_batch_seq *o = realloc(b->out, (size_t)n_seqs * sizeof *o);
        if (!o) {
            clear(b);
            return wb_err_set(err, WB_ERR_NOMEM, "wb_batch_generate: out of memory");
        }
        b->out = o;
        b->out_cap = n_seqs;
    }
    int64_t total = 0;
    for (int i = 0; i < n_seqs; i++) {
        const wb_gen_result *r = wb_gen_result_get(b->slots[i].g);
        b->out[i] = (wb_batch_seq){r->token_ids, r->n_tokens, r->stop_reason, r->prompt_tokens,
                                   r->text, r->text_len, r};
        total += (int64_t)r->n_tokens;
    }
    wb_batch_result *r = &b->res;
    r->n_seqs = n_seqs;
    r->seqs = b->out;
    r->steps = steps < 0 ? 0 : steps;
    r->output_tokens = total;
    r->prefill_ms = t_first - t0;
    r->decode_ms = t_end - t_first;
    r->elapsed_ms = t_end - t0;
    r->tokens_per_s = r->elapsed_ms > 0 ? 1000.0 * (double)total / r->elapsed_ms : 0;
    int64_t first = 0;
    for (int i = 0; i < n_seqs; i++) first += b->out[i].n_tokens > 0;
    r->decode_tokens_per_s =
        r->decode_ms > 0 ? 1000.0 * (double)(total - first) / r->decode_ms : 0;
    return WB_OK;
}

const wb_batch_result *wb_batch_result_get(const wb_batch *b) {
    return b && b->res.n_seqs > 0 ? &b->res : NULL;
}

size_t wb_batch_cache_bytes(const wb_batch *b) {
    size_t n = 0;
    for (int i = 0; b && i < b->n_slots; i++) {
        wb_session *s = wb_gen_session(b->slots[i].g);
        if (s) n += wb_session_cache_bytes(s);
    }
    return n;
}
