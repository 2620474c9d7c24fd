/* session.c - the GPT-2 forward pass: GEMM prefill, GEMV decode, and the KV cache around them.
 *
 * Block (pre-LayerNorm GPT-2), per position, x the residual stream [C]:
 *   x += c_proj(attn(ln_1(x)))      attn: causal, NH heads of hs = C/NH, scale 1/sqrt(hs)
 *   x += mlp_proj(gelu(c_fc(ln_2(x))))
 * then logits = head(ln_f(x)) with head = wte (tied) or lm_head.
 *
 * Prefill runs n positions at once, one pool job per layer: each thread owns a slice of the
 * output columns of every matrix (a single-threaded cblas_sgemm above SMALL_ROWS rows, our batched
 * GEMV below, bias and GELU on the same slice), a share of the rows for the LayerNorms and a share
 * of the attention heads (our block kernel); OpenBLAS is kept to one thread meanwhile. Decode runs
 * one position through our GEMV kernels with each pool thread owning a slice of output rows of
 * every matrix and a slice of the heads, five barriers per layer.
 */
#include "model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

/* Prefill attention goes to the pool from this many tokens (below, waking it costs more than it
 * saves), in items of one head and a block of queries: every query of the sequence when the
 * heads alone deal evenly over the threads (each item then packs its head's K and V once),
 * else blocks of ATT_QB. */
#define ATT_POOL_MIN 16
#define ATT_QB 16

/* ------------------------------------------------------------------------- GEMM prefill */

/* wb_threads_get() capped at the online CPUs: more spinning threads than cores turns every
 * barrier into a wait for a descheduled peer. */
int wb_compute_threads(void) {
    static atomic_int ncpu = 0; /* racing first calls agree */
    if (ncpu == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        ncpu = n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
    }
    int nt = wb_threads_get();
    return nt < ncpu ? nt : ncpu;
}

/* Lock the model's pool and make it nt threads wide; the caller unlocks pool_mu. The pool is
 * mutable state behind a const model, which is why the cast is here and nowhere else. */
wb_status wb_model_pool_acquire(const wb_model *m, int nt, wb_pool **out, wb_err *err) {
    wb_model *mm = (wb_model *)m;
    pthread_mutex_lock(&mm->pool_mu);
    if (mm->pool && wb_pool_size(mm->pool) != nt) {
        wb_pool_free(mm->pool);
        mm->pool = NULL;
    }
    wb_status s = mm->pool ? WB_OK : wb_pool_new(nt, &mm->pool, err);
    if (s) pthread_mutex_unlock(&mm->pool_mu);
    *out = mm->pool;
    return s;
}

void wb_model_pool_release(const wb_model *m) { pthread_mutex_unlock(&((wb_model *)m)->pool_mu); }

/* Up to this many rows a matrix goes through wb_gemv_batch_forward instead of a BLAS GEMM: a
 * batched decode step (one row per sequence) then sums exactly as a single decode does, and a
 * few-row GEMM would spend most of its time packing the weights. */
#ifndef SMALL_ROWS
#define SMALL_ROWS 48
#endif

static void split(int n, int tid, int nt, int *r0, int *r1);

/* Thread tid's share of Y[n, out] = X[n, in] . W^T + b (b may be NULL), or Y += that when
 * residual, then gelu(Y) in place when gelu: output columns [r0, r1) in the decode path's slices
 * (blocks of 8), so bias, activation and the GEMM's writes stay in the thread's own columns.
 * Above SMALL_ROWS rows the slice is one single-threaded cblas_sgemm (OpenBLAS packs only this
 * thread's share of W); the bias is written (or added) just before it, as the initial C of a
 * beta = 1 GEMM, which costs what the zeroing pass of beta = 0 would. */
static void mm_part(const wb_model *m, float *Y, const float *X, int n, const float *W,
                    const float *b, int out, int in, int residual, int gelu, int tid, int nt) {
    int r0, r1;
    split(out, tid, nt, &r0, &r1);
    if (r0 >= r1) return;
    const int w = r1 - r0;
    if (n <= SMALL_ROWS) {
        wb_gemv_batch_forward(Y, (size_t)out, X, (size_t)in, n, W, b, in, r0, r1, residual);
    } else {
        if (b)
            for (int t = 0; t < n; t++) {
                float *y = Y + (size_t)t * out + r0;
                const float *bb = b + r0;
                if (residual)
                    for (int i = 0; i < w; i++) y[i] += bb[i];
                else
                    memcpy(y, bb, (size_t)w * sizeof *y);
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w, in, 1.0f, X, in,
                    W + (size_t)r0 * in, in, b || residual ? 1.0f : 0.0f, Y + r0, out);
    }
    if (gelu)
        for (int t = 0; t < n; t++) wb_gelu_forward(Y + (size_t)t * out + r0, (size_t)w, m->act);
}

/* Attention work items: (sequence, head, block of queries), numbered per sequence from
 * item0[s]. On the pool they are dealt round-robin, longest rows first within a sequence, which
 * roughly balances the causal triangles. */
typedef struct att_job {
    const wb_seq_rows *seqs;
    const int *row0;  /* [n_seqs] first stacked row of each sequence */
    const int *item0; /* [n_seqs + 1] first item of each sequence; item0[n_seqs] = total */
    int n_seqs, n_items;
    int qb;           /* queries per item; 0: every query of the sequence (the item also
                       * copies its head's new K/V rows into the cache) */
    const float *qkv;
    float *att, *sc;  /* sc: [nt, sc_stride] per-thread scratch */
    size_t sc_stride;
    int layer, C, NH;
} att_job;

static void att_item(const att_job *j, int item, int *seq_hint, float *sc) {
    const int C = j->C, NH = j->NH, hs = C / NH;
    int s = *seq_hint;
    while (j->item0[s + 1] <= item) s++;
    *seq_hint = s;
    const wb_seq_rows *q = &j->seqs[s];
    const int qb = j->qb ? j->qb : q->n;
    const int local = item - j->item0[s], nblk = (q->n + qb - 1) / qb;
    const int hd = local % NH, q0 = (nblk - 1 - local / NH) * qb;
    const int nq = q->n - q0 < qb ? q->n - q0 : qb;
    const size_t lo = (size_t)j->layer * q->cache_ctx * C;
    float *kl = q->k + lo + hd * hs, *vl = q->v + lo + hd * hs;
    const size_t r = (size_t)j->row0[s] + q0;
    if (!j->qb)
        for (int t = 0; t < q->n; t++) {
            const float *qr = j->qkv + (r + t) * 3 * C + hd * hs;
            memcpy(kl + (size_t)(q->pos + t) * C, qr + C, (size_t)hs * sizeof(float));
            memcpy(vl + (size_t)(q->pos + t) * C, qr + 2 * C, (size_t)hs * sizeof(float));
        }
    if (nq == 1) /* a decode row: the same kernel, so the same sums, as wb_session_decode */
        wb_attention_forward(j->att + r * C + hd * hs, j->qkv + r * 3 * C + hd * hs, kl, vl,
                             (size_t)C, q->pos + q0, hs, sc);
    else
        wb_attention_block_forward(j->att + r * C + hd * hs, (size_t)C,
                                   j->qkv + r * 3 * C + hd * hs, (size_t)3 * C, kl, vl,
                                   (size_t)C, q->pos + q0, nq, hs, sc);
}

static void att_worker(const att_job *j, int tid, int nt) {
    float *sc = j->sc + (size_t)tid * j->sc_stride;
    int hint = 0;
    for (int i = tid; i < j->n_items; i += nt) att_item(j, i, &hint, sc);
}

/* One layer (or, with layer = -1, the final LayerNorm and head) on every pool thread, phases
 * separated by barriers: LayerNorm by rows, matrices by output columns (mm_part), attention by
 * items. One wake-up per layer, and with OpenBLAS kept single-threaded meanwhile, only our
 * threads run: no second pool of spinning workers competes for the cores. */
typedef struct fwd_job {
    const wb_model *m;
    const wb_seq_rows *seqs;
    int n_seqs, n;
    const int *row0;
    float *x, *xn, *qkv, *att, *h;
    att_job *aj;
    wb_pool *pool;
    int layer;
    int att_threads;    /* 1: attention on thread 0 only (too small to split) */
    float *logits;      /* head phase */
    int all_positions;
} fwd_job;

/* Above SMALL_ROWS rows a residual matrix leaves its bias to the LayerNorm that next reads x
 * (one pass over x fewer); at or below, the bias is added inside the GEMV as in decode, so the
 * sums stay decode's. */
static const float *deferred_bias(const fwd_job *j, const float *b) {
    return j->n > SMALL_ROWS ? b : NULL;
}

/* xn = layernorm(x += add) over thread tid's rows; add: a deferred bias or NULL. */
static void ln_rows(const fwd_job *j, const float *add, const float *w, const float *b, int tid,
                    int nt) {
    const int C = j->m->cfg.n_embd, t0 = (int)((int64_t)j->n * tid / nt),
              t1 = (int)((int64_t)j->n * (tid + 1) / nt);
    for (int t = t0; t < t1; t++)
        wb_layernorm_add_forward(j->xn + (size_t)t * C, j->x + (size_t)t * C, add, w, b, C,
                                 j->m->cfg.layer_norm_epsilon);
}

static void fwd_worker(void *arg, int tid, int nt) {
    const fwd_job *j = arg;
    const wb_model *m = j->m;
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, F = c->n_inner, n = j->n;
    if (j->layer < 0) { /* final LayerNorm + head */
        const float *add = deferred_bias(j, m->layers[c->n_layer - 1].mlpproj_b);
        if (j->all_positions) {
            ln_rows(j, add, m->lnf_w, m->lnf_b, tid, nt);
            wb_pool_barrier(j->pool);
            mm_part(m, j->logits, j->xn, n, m->head, NULL, c->vocab_size, C, 0, 0, tid, nt);
        } else {
            /* the last row of each sequence, normalised into xn rows 0..n_seqs-1 */
            if (tid == 0)
                for (int s = 0; s < j->n_seqs; s++)
                    wb_layernorm_add_forward(
                        j->xn + (size_t)s * C, j->x + (size_t)(j->row0[s] + j->seqs[s].n - 1) * C,
                        add, m->lnf_w, m->lnf_b, C, c->layer_norm_epsilon);
            wb_pool_barrier(j->pool);
            mm_part(m, j->logits, j->xn, j->n_seqs, m->head, NULL, c->vocab_size, C, 0, 0, tid,
                    nt);
        }
        return;
    }
    const wb_layer *ly = &m->layers[j->layer];
    ln_rows(j, j->layer ? deferred_bias(j, m->layers[j->layer - 1].mlpproj_b) : NULL, ly->ln1_w,
            ly->ln1_b, tid, nt);
    wb_pool_barrier(j->pool);
    mm_part(m, j->qkv, j->xn, n, ly->qkv_w, ly->qkv_b, 3 * C, C, 0, 0, tid, nt);
    wb_pool_barrier(j->pool);
    if (j->aj->qb) { /* K/V rows into the caches, by rows (whole-sequence items copy their own) */
        const int t0 = (int)((int64_t)n * tid / nt), t1 = (int)((int64_t)n * (tid + 1) / nt);
        for (int s = 0, r = 0; s < j->n_seqs; r += j->seqs[s].n, s++) {
            const wb_seq_rows *q = &j->seqs[s];
            const size_t lo = (size_t)j->layer * q->cache_ctx * C;
            for (int t = r > t0 ? r : t0; t < r + q->n && t < t1; t++) {
                const float *qr = j->qkv + (size_t)t * 3 * C;
                memcpy(q->k + lo + (size_t)(q->pos + t - r) * C, qr + C, (size_t)C * sizeof(float));
                memcpy(q->v + lo + (size_t)(q->pos + t - r) * C, qr + 2 * C,
                       (size_t)C * sizeof(float));
            }
        }
        wb_pool_barrier(j->pool);
    }
    if (j->att_threads > 1) att_worker(j->aj, tid, nt);
    else if (tid == 0) att_worker(j->aj, 0, 1);
    wb_pool_barrier(j->pool);
    mm_part(m, j->x, j->att, n, ly->attproj_w, deferred_bias(j, ly->attproj_b) ? NULL
                                                                              : ly->attproj_b,
            C, C, 1, 0, tid, nt);
    wb_pool_barrier(j->pool);
    ln_rows(j, deferred_bias(j, ly->attproj_b), ly->ln2_w, ly->ln2_b, tid, nt);
    wb_pool_barrier(j->pool);
    mm_part(m, j->h, j->xn, n, ly->fc_w, ly->fc_b, F, C, 0, 1, tid, nt);
    wb_pool_barrier(j->pool);
    mm_part(m, j->x, j->h, n, ly->mlpproj_w,
            deferred_bias(j, ly->mlpproj_b) ? NULL : ly->mlpproj_b, C, F, 1, 0, tid, nt);
}

wb_status wb_forward_seqs(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                          int all_positions, wb_scratch *scratch, wb_err *err) {
    if (m->llama) /* the Llama family has its own block (core/llama.c) */
        return wb_llama_forward_seqs(m, seqs, n_seqs, logits, all_positions, scratch, err);
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, F = c->n_inner, NH = c->n_head, hs = C / NH;
    if (n_seqs < 1) return wb_err_set(err, WB_ERR_ARG, "forward: n_seqs = %d, need at least 1",
                                      n_seqs);
    int n = 0, n_items = 0;
    size_t sc_per_thread = 0;
    const int nt = wb_compute_threads();
    const int qb = n_seqs == 1 && NH % nt == 0 ? 0 : ATT_QB;
    for (int s = 0; s < n_seqs; s++) {
        if (seqs[s].n < 1 || seqs[s].n > INT32_MAX / 2 - n)
            return wb_err_set(err, WB_ERR_ARG, "forward: sequence %d has n = %d tokens", s,
                              seqs[s].n);
        n += seqs[s].n;
        n_items += (qb ? (seqs[s].n + qb - 1) / qb : 1) * NH;
        /* rounded to 16 floats: each thread's scratch starts on its own cache line */
        size_t need = (wb_attention_block_scratch(seqs[s].pos, seqs[s].n, hs) + 15) & ~(size_t)15;
        if (need > sc_per_thread) sc_per_thread = need;
    }
    const size_t nC = (size_t)n * C;
    /* x [n, C] residual; xn [n, C] normed; qkv [n, 3C]; att [n, C]; h [n, F];
     * sc [nt, attention scratch]; row0/item0 [2 n_seqs + 1] ints; each 64-byte aligned */
    const size_t n_int = ((size_t)2 * n_seqs + 1 + 15) & ~(size_t)15;
    const size_t sz[7] = {nC, nC, 3 * nC, nC, (size_t)n * F, (size_t)nt * sc_per_thread, n_int};
    size_t need = 0;
    for (int i = 0; i < 7; i++) need += (sz[i] + 15) & ~(size_t)15;
    wb_scratch local = {0};
    if (!scratch) scratch = &local;
    if (scratch->cap < need) {
        free(scratch->p);
        scratch->cap = 0;
        scratch->p = aligned_alloc(64, need * sizeof(float));
        if (!scratch->p)
            return wb_err_set(err, WB_ERR_NOMEM, "forward of %d tokens: out of memory", n);
        scratch->cap = need;
    }
    float *bufs[7], *q = scratch->p;
    for (int i = 0; i < 7; i++) bufs[i] = q, q += (sz[i] + 15) & ~(size_t)15;
    float *x = bufs[0], *xn = bufs[1], *qkv = bufs[2], *att = bufs[3], *h = bufs[4], *sc = bufs[5];
    int *row0 = (int *)bufs[6], *item0 = row0 + n_seqs;
    for (int s = 0, r = 0, it = 0; s <= n_seqs; s++) {
        item0[s] = it;
        if (s == n_seqs) break;
        row0[s] = r;
        r += seqs[s].n;
        it += (qb ? (seqs[s].n + qb - 1) / qb : 1) * NH;
    }
    for (int s = 0; s < n_seqs; s++)
        for (int t = 0; t < seqs[s].n; t++) {
            const float *te = m->wte + (size_t)seqs[s].ids[t] * C;
            const float *pe = m->wpe + (size_t)(seqs[s].pos + t) * C;
            float *xr = x + (size_t)(row0[s] + t) * C;
            for (int i = 0; i < C; i++) xr[i] = te[i] + pe[i];
        }
    att_job aj = {seqs, row0, item0, n_seqs, n_items, qb, qkv, att, sc, sc_per_thread, 0, C, NH};
    fwd_job fj = {m, seqs, n_seqs, n, row0, x, xn, qkv, att, h, &aj, NULL, 0,
                  nt > 1 && (n >= ATT_POOL_MIN || n_seqs > 1) ? nt : 1, logits, all_positions};
    wb_status st = WB_OK;
    for (int l = 0; l <= c->n_layer; l++) {
        if (l == c->n_layer && !logits) break;
        if (l < c->n_layer && m->abort_fn && m->abort_fn(m->abort_data)) {
            st = wb_err_set(err, WB_ERR_CANCELLED,
                            "forward cancelled by the abort callback at layer %d", l);
            break;
        }
        aj.layer = l;
        fj.layer = l < c->n_layer ? l : -1;
        if (nt > 1) { /* the pool is locked per layer, so the abort callback runs unlocked */
            if ((st = wb_model_pool_acquire(m, nt, &fj.pool, err))) break;
            wb_pool_run(fj.pool, fwd_worker, &fj);
            wb_model_pool_release(m);
        } else {
            fwd_worker(&fj, 0, 1);
        }
    }
    free(local.p);
    return st;
}

wb_status wb_forward_tokens(const wb_model *m, float *kcache, float *vcache, int cache_ctx,
                            int pos, const int32_t *ids, int n, float *logits, int all_positions,
                            wb_scratch *scratch, wb_err *err) {
    const wb_seq_rows one = {kcache, vcache, cache_ctx, pos, ids, n};
    return wb_forward_seqs(m, &one, 1, logits, all_positions, scratch, err);
}

/* --------------------------------------------------------------------------- session */

struct wb_session {
    const wb_model *m;
    int n_ctx, pos;
    int32_t *tokens;   /* [n_ctx] */
    float *k, *v;      /* [L, n_ctx, C] each */
    /* decode scratch, shared by the pool threads unless marked per thread */
    float *x;          /* [C] residual */
    float *qkv;        /* [3C] */
    float *att;        /* [C] */
    float *h;          /* [F] */
    float *xn;         /* [nt, C] per thread */
    float *sc;         /* [nt, n_ctx] per thread */
    int scratch_nt;
    wb_scratch prefill; /* prefill activations, grown on demand */
};

static wb_status ensure_scratch(wb_session *s, int nt, wb_err *err) {
    if (s->scratch_nt >= nt) return WB_OK;
    const wb_config *c = &s->m->cfg;
    size_t C = (size_t)c->n_embd, F = (size_t)c->n_inner;
    float *xn = aligned_alloc(64, ((size_t)nt * C * sizeof(float) + 63) & ~(size_t)63);
    float *sc = malloc((size_t)nt * (size_t)s->n_ctx * sizeof(float));
    if (!xn || !sc) {
        free(xn);
        free(sc);
        return wb_err_set(err, WB_ERR_NOMEM, "session: out of memory for %d threads' scratch", nt);
    }
    (void)F;
    free(s->xn);
    free(s->sc);
    s->xn = xn;
    s->sc = sc;
    s->scratch_nt = nt;
    return WB_OK;
}

void wb_session_free(wb_session *s) {
    if (!s) return;
    free(s->tokens);
    free(s->k);
    free(s->v);
    free(s->x);
    free(s->qkv);
    free(s->att);
    free(s->h);
    free(s->xn);
    free(s->sc);
    free(s->prefill.p);
    free(s);
}

wb_status wb_session_new(const wb_model *m, int n_ctx, wb_session **out, wb_err *err) {
    if (!m || !out) return wb_err_set(err, WB_ERR_ARG, "wb_session_new: NULL argument");
    *out = NULL;
    if (n_ctx <= 0) n_ctx = m->cfg.n_ctx;
    if (n_ctx > m->cfg.n_ctx && (!m->llama || n_ctx > m->cfg.max_position_embeddings))
        return wb_err_set(err, WB_ERR_RANGE,
                          "wb_session_new: n_ctx %d exceeds the model's %s %d", n_ctx,
                          m->llama ? "max_position_embeddings" : "n_positions",
                          m->llama ? m->cfg.max_position_embeddings : m->cfg.n_ctx);
    const size_t C = (size_t)m->cfg.n_embd, F = (size_t)m->cfg.n_inner;
    const size_t kv = (size_t)m->cfg.n_layer * (size_t)n_ctx * wb_model_kv_width(m);
    wb_session *s = calloc(1, sizeof *s);
    if (!s) return wb_err_set(err, WB_ERR_NOMEM, "wb_session_new: out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
    s->tokens = malloc((size_t)n_ctx * sizeof *s->tokens);
    s->k = malloc(kv * sizeof(float));
    s->v = malloc(kv * sizeof(float));
    s->x = malloc(C * sizeof(float));
    s->qkv = malloc(3 * C * sizeof(float));
    s->att = malloc(C * sizeof(float));
    s->h = malloc(F * sizeof(float));
    wb_status st = WB_OK;
    if (!s->tokens || !s->k || !s->v || !s->x || !s->qkv || !s->att || !s->h)
        st = wb_err_set(err, WB_ERR_NOMEM, "wb_session_new: out of memory for a %zu-byte cache",
                        2 * kv * sizeof(float));
    else st = ensure_scratch(s, 1, err);
    if (st) {
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
    if (!s) return 0;
    return 2 * (size_t)s->m->cfg.n_layer * (size_t)s->n_ctx * wb_model_kv_width(s->m) *
           sizeof(float);
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

wb_status wb_session_prefill(wb_session *s, const int32_t *ids, int n, float *logits,
                             int all_positions, wb_err *err) {
    if (!s || (!ids && n > 0)) return wb_err_set(err, WB_ERR_ARG, "wb_session_prefill: NULL argument");
    if (n < 1) return wb_err_set(err, WB_ERR_ARG, "wb_session_prefill: n = %d, need at least 1", n);
    if (n > s->n_ctx - s->pos)
        return wb_err_set(err, WB_ERR_RANGE,
                          "prompt of %d tokens at position %d does not fit the context of %d "
                          "tokens (n_ctx)", n, s->pos, s->n_ctx);
    wb_status st = wb_check_ids(s->m, ids, n, err);
    if (st) return st;
    st = wb_forward_tokens(s->m, s->k, s->v, s->n_ctx, s->pos, ids, n, logits, all_positions,
                           &s->prefill, err);
    if (st) return st; /* pos unchanged: rows written past it are dead */
    memcpy(s->tokens + s->pos, ids, (size_t)n * sizeof *ids);
    s->pos += n;
    return WB_OK;
}

/* ----------------------------------------------------------------------------- GEMV decode */

typedef struct decode_job {
    wb_session *s;
    float *logits;
    wb_pool *pool;
} decode_job;

/* Rows [r0, r1) of n owned by thread tid, in blocks of 8 (the GEMV kernel's row group). */
static void split(int n, int tid, int nt, int *r0, int *r1) {
    int nb = (n + 7) / 8;
    int b0 = (int)((int64_t)nb * tid / nt), b1 = (int)((int64_t)nb * (tid + 1) / nt);
    *r0 = b0 * 8 < n ? b0 * 8 : n;
    *r1 = b1 * 8 < n ? b1 * 8 : n;
}

static void decode_worker(void *arg, int tid, int nt) {
    decode_job *j = arg;
    wb_session *s = j->s;
    const wb_model *m = s->m;
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, F = c->n_inner, NH = c->n_head, hs = C / NH, pos = s->pos;
    const float eps = c->layer_norm_epsilon;
    float *x = s->x, *qkv = s->qkv, *att = s->att, *h = s->h;
    float *xn = s->xn + (size_t)tid * C, *sc = s->sc + (size_t)tid * s->n_ctx;
    int r0, r1, h0, h1;
    h0 = (int)((int64_t)NH * tid / nt);
    h1 = (int)((int64_t)NH * (tid + 1) / nt);
    for (int l = 0; l < c->n_layer; l++) {
        const wb_layer *ly = &m->layers[l];
        float *kl = s->k + (size_t)l * s->n_ctx * C, *vl = s->v + (size_t)l * s->n_ctx * C;
        /* every thread normalises x itself: cheaper than a barrier */
        wb_layernorm_forward(xn, x, ly->ln1_w, ly->ln1_b, C, eps);
        split(3 * C, tid, nt, &r0, &r1);
        wb_gemv_forward(qkv, xn, ly->qkv_w, ly->qkv_b, C, r0, r1, 0);
        wb_pool_barrier(j->pool);
        for (int hd = h0; hd < h1; hd++) {
            memcpy(kl + (size_t)pos * C + hd * hs, qkv + C + hd * hs, (size_t)hs * sizeof(float));
            memcpy(vl + (size_t)pos * C + hd * hs, qkv + 2 * C + hd * hs, (size_t)hs * sizeof(float));
            wb_attention_forward(att + hd * hs, qkv + hd * hs, kl + hd * hs, vl + hd * hs,
                                 (size_t)C, pos, hs, sc);
        }
        wb_pool_barrier(j->pool);
        split(C, tid, nt, &r0, &r1);
        wb_gemv_forward(x, att, ly->attproj_w, ly->attproj_b, C, r0, r1, 1);
        wb_pool_barrier(j->pool);
        wb_layernorm_forward(xn, x, ly->ln2_w, ly->ln2_b, C, eps);
        split(F, tid, nt, &r0, &r1);
        wb_gemv_forward(h, xn, ly->fc_w, ly->fc_b, C, r0, r1, 0);
        wb_gelu_forward(h + r0, (size_t)(r1 - r0), m->act);
        wb_pool_barrier(j->pool);
        split(C, tid, nt, &r0, &r1);
        wb_gemv_forward(x, h, ly->mlpproj_w, ly->mlpproj_b, F, r0, r1, 1);
        wb_pool_barrier(j->pool);
    }
    if (j->logits) {
        wb_layernorm_forward(xn, x, m->lnf_w, m->lnf_b, C, eps);
        split(c->vocab_size, tid, nt, &r0, &r1);
        wb_gemv_forward(j->logits, xn, m->head, NULL, C, r0, r1, 0);
    }
}

wb_status wb_session_decode(wb_session *s, int32_t id, float *logits, wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "wb_session_decode: NULL session");
    if (s->pos >= s->n_ctx)
        return wb_err_set(err, WB_ERR_RANGE,
                          "wb_session_decode: the context of %d tokens (n_ctx) is full", s->n_ctx);
    wb_status st = wb_check_ids(s->m, &id, 1, err);
    if (st) return st;
    const wb_model *m = s->m;
    if (m->llama) { /* one row through the Llama block, GEMV path (core/llama.c) */
        const wb_seq_rows one = {s->k, s->v, s->n_ctx, s->pos, &id, 1};
        if ((st = wb_llama_forward_seqs(m, &one, 1, logits, 0, &s->prefill, err))) return st;
        s->tokens[s->pos++] = id;
        return WB_OK;
    }
    const int C = m->cfg.n_embd;
    const float *te = m->wte + (size_t)id * C, *pe = m->wpe + (size_t)s->pos * C;
    for (int i = 0; i < C; i++) s->x[i] = te[i] + pe[i];
    decode_job job = {s, logits, NULL};
    int nt = wb_compute_threads();
    if (nt <= 1) {
        decode_worker(&job, 0, 1); /* no pool, no atomics: the 1-thread path pays nothing */
    } else {
        wb_pool *pool;
        if ((st = wb_model_pool_acquire(m, nt, &pool, err))) return st;
        st = ensure_scratch(s, nt, err);
        if (!st) {
            job.pool = pool;
            wb_pool_run(pool, decode_worker, &job);
        }
        wb_model_pool_release(m);
        if (st) return st;
    }
    s->tokens[s->pos++] = id;
    return WB_OK;
}

/* --------------------------------------------------------------- batched calls (batch.c) */

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
    *out = (wb_seq_rows){s->k, s->v, s->n_ctx, s->pos, ids, n};
    return WB_OK;
}

void wb_session_commit(wb_session *s, const int32_t *ids, int n) {
    memcpy(s->tokens + s->pos, ids, (size_t)n * sizeof *ids);
    s->pos += n;
}

wb_scratch *wb_session_scratch(wb_session *s) { return &s->prefill; }
