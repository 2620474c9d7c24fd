/* session.c - the GPT-2 forward pass: GEMM prefill, GEMV decode, and the KV cache around them.
 *
 * Block (pre-LayerNorm GPT-2), per position, x the residual stream [C]:
 *   x += c_proj(attn(ln_1(x)))      attn: causal, NH heads of hs = C/NH, scale 1/sqrt(hs)
 *   x += mlp_proj(gelu(c_fc(ln_2(x))))
 * then logits = head(ln_f(x)) with head = wte (tied) or lm_head.
 *
 * Prefill runs n positions at once: the matrices through cblas_sgemm (OpenBLAS threads itself),
 * attention through our block kernel (on the pool when threaded). Decode runs one position
 * through our GEMV kernels with each pool thread owning a slice of output rows of every matrix
 * and a slice of the heads, five barriers per layer.
 */
#include "model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

/* Prefill attention goes to the pool from this many tokens (below, waking it costs more than it
 * saves), in items of ATT_QB queries of one head. */
#define ATT_POOL_MIN 16
#define ATT_QB 16

/* ------------------------------------------------------------------------- GEMM prefill */

/* Y[n, out] = (beta ? Y : 0) + X[n, in] . W[out, in]^T; W is stored [out, in]. */
static void gemm_bt(float *Y, const float *X, const float *W, int n, int out, int in, float beta) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, X, in, W, in, beta, Y,
                out);
}

static void add_bias_rows(float *Y, const float *b, int n, int cols) {
    for (int t = 0; t < n; t++)
        for (int i = 0; i < cols; i++) Y[(size_t)t * cols + i] += b[i];
}

static void set_bias_rows(float *Y, const float *b, int n, int cols) {
    for (int t = 0; t < n; t++) memcpy(Y + (size_t)t * cols, b, (size_t)cols * sizeof *Y);
}

/* wb_threads_get() capped at the online CPUs: more spinning threads than cores turns every
 * barrier into a wait for a descheduled peer. */
static int compute_threads(void) {
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
static wb_status pool_acquire(const wb_model *m, int nt, wb_pool **out, wb_err *err) {
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

static void pool_release(const wb_model *m) { pthread_mutex_unlock(&((wb_model *)m)->pool_mu); }

/* Prefill attention on the pool: (head, block of ATT_QB queries) items dealt round-robin, which
 * roughly balances the causal triangle; OpenBLAS stays out of it (its threads would fight ours). */
typedef struct att_job {
    const float *qkv, *kl, *vl;
    float *att, *sc; /* sc: [nt, sc_stride] per-thread scratch */
    size_t sc_stride;
    int n, pos, C, NH;
} att_job;

static void att_worker(void *arg, int tid, int nt) {
    const att_job *j = arg;
    const int C = j->C, hs = C / j->NH, nblk = (j->n + ATT_QB - 1) / ATT_QB;
    float *sc = j->sc + (size_t)tid * j->sc_stride;
    for (int i = tid; i < nblk * j->NH; i += nt) {
        const int hd = i % j->NH, q0 = (nblk - 1 - i / j->NH) * ATT_QB; /* long rows first */
        const int nq = j->n - q0 < ATT_QB ? j->n - q0 : ATT_QB;
        wb_attention_block_forward(j->att + (size_t)q0 * C + hd * hs, (size_t)C,
                                   j->qkv + (size_t)q0 * 3 * C + hd * hs, (size_t)3 * C,
                                   j->kl + hd * hs, j->vl + hd * hs, (size_t)C, j->pos + q0, nq,
                                   hs, sc);
    }
}

wb_status wb_forward_tokens(const wb_model *m, float *kcache, float *vcache, int cache_ctx,
                            int pos, const int32_t *ids, int n, float *logits, int all_positions,
                            wb_scratch *scratch, wb_err *err) {
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, F = c->n_inner, V = c->vocab_size, NH = c->n_head, hs = C / NH;
    const size_t nC = (size_t)n * C;
    /* x [n, C] residual; xn [n, C] normed; qkv [n, 3C]; att [n, C]; h [n, F];
     * sc [nt, attention scratch]; each 64-byte aligned */
    const int nt = compute_threads();
    const size_t sc_per_thread = wb_attention_block_scratch(pos, n, hs);
    const size_t sz[6] = {nC, nC, 3 * nC, nC, (size_t)n * F, (size_t)nt * sc_per_thread};
    size_t need = 0;
    for (int i = 0; i < 6; i++) need += (sz[i] + 15) & ~(size_t)15;
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
    float *bufs[6], *q = scratch->p;
    for (int i = 0; i < 6; i++) bufs[i] = q, q += (sz[i] + 15) & ~(size_t)15;
    float *x = bufs[0], *xn = bufs[1], *qkv = bufs[2], *att = bufs[3], *h = bufs[4], *sc = bufs[5];
    wb_status s = WB_OK;
    for (int t = 0; t < n; t++) {
        const float *te = m->wte + (size_t)ids[t] * C, *pe = m->wpe + (size_t)(pos + t) * C;
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = te[i] + pe[i];
    }
    for (int l = 0; l < c->n_layer; l++) {
        if (m->abort_fn && m->abort_fn(m->abort_data)) {
            s = wb_err_set(err, WB_ERR_CANCELLED, "forward cancelled by the abort callback at layer %d",
                           l);
            goto done;
        }
        const wb_layer *ly = &m->layers[l];
        float *kl = kcache + (size_t)l * cache_ctx * C, *vl = vcache + (size_t)l * cache_ctx * C;
        for (int t = 0; t < n; t++)
            wb_layernorm_forward(xn + (size_t)t * C, x + (size_t)t * C, ly->ln1_w, ly->ln1_b, C,
                                 c->layer_norm_epsilon);
        set_bias_rows(qkv, ly->qkv_b, n, 3 * C);
        gemm_bt(qkv, xn, ly->qkv_w, n, 3 * C, C, 1.0f);
        for (int t = 0; t < n; t++) {
            memcpy(kl + (size_t)(pos + t) * C, qkv + (size_t)t * 3 * C + C, (size_t)C * sizeof(float));
            memcpy(vl + (size_t)(pos + t) * C, qkv + (size_t)t * 3 * C + 2 * C, (size_t)C * sizeof(float));
        }
        if (nt > 1 && n >= ATT_POOL_MIN) {
            att_job aj = {qkv, kl, vl, att, sc, sc_per_thread, n, pos, C, NH};
            wb_pool *pool;
            if ((s = pool_acquire(m, nt, &pool, err))) goto done;
            wb_pool_run(pool, att_worker, &aj);
            pool_release(m);
        } else {
            for (int hd = 0; hd < NH; hd++)
                wb_attention_block_forward(att + hd * hs, (size_t)C, qkv + hd * hs, (size_t)3 * C,
                                           kl + hd * hs, vl + hd * hs, (size_t)C, pos, n, hs, sc);
        }
        add_bias_rows(x, ly->attproj_b, n, C); /* residual: x += att . W^T + b in one GEMM */
        gemm_bt(x, att, ly->attproj_w, n, C, C, 1.0f);
        for (int t = 0; t < n; t++)
            wb_layernorm_forward(xn + (size_t)t * C, x + (size_t)t * C, ly->ln2_w, ly->ln2_b, C,
                                 c->layer_norm_epsilon);
        set_bias_rows(h, ly->fc_b, n, F);
        gemm_bt(h, xn, ly->fc_w, n, F, C, 1.0f);
        wb_gelu_forward(h, (size_t)n * F, m->act);
        add_bias_rows(x, ly->mlpproj_b, n, C);
        gemm_bt(x, h, ly->mlpproj_w, n, C, F, 1.0f);
    }
    if (logits) {
        int t0 = all_positions ? 0 : n - 1;
        for (int t = t0; t < n; t++)
            wb_layernorm_forward(xn + (size_t)t * C, x + (size_t)t * C, m->lnf_w, m->lnf_b, C,
                                 c->layer_norm_epsilon);
        if (all_positions) gemm_bt(logits, xn, m->head, n, V, C, 0.0f);
        else wb_gemv_forward(logits, xn + (size_t)(n - 1) * C, m->head, NULL, C, 0, V, 0);
    }
done:
    free(local.p);
    return s;
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
    if (n_ctx > m->cfg.n_ctx)
        return wb_err_set(err, WB_ERR_RANGE,
                          "wb_session_new: n_ctx %d exceeds the model's n_positions %d", n_ctx,
                          m->cfg.n_ctx);
    const size_t C = (size_t)m->cfg.n_embd, F = (size_t)m->cfg.n_inner;
    const size_t kv = (size_t)m->cfg.n_layer * (size_t)n_ctx * C;
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
    return 2 * (size_t)s->m->cfg.n_layer * (size_t)s->n_ctx * (size_t)s->m->cfg.n_embd *
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
    const size_t C = (size_t)s->m->cfg.n_embd, row = (size_t)s->n_ctx * C;
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
    const int C = m->cfg.n_embd;
    const float *te = m->wte + (size_t)id * C, *pe = m->wpe + (size_t)s->pos * C;
    for (int i = 0; i < C; i++) s->x[i] = te[i] + pe[i];
    decode_job job = {s, logits, NULL};
    int nt = compute_threads();
    if (nt <= 1) {
        decode_worker(&job, 0, 1); /* no pool, no atomics: the 1-thread path pays nothing */
    } else {
        wb_pool *pool;
        if ((st = pool_acquire(m, nt, &pool, err))) return st;
        st = ensure_scratch(s, nt, err);
        if (!st) {
            job.pool = pool;
            wb_pool_run(pool, decode_worker, &job);
        }
        pool_release(m);
        if (st) return st;
    }
    s->tokens[s->pos++] = id;
    return WB_OK;
}
