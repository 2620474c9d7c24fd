/* gpt2.c - the GPT-2 family: config.json keys, weights, GEMM forward over sequences, GEMV decode.
 *
 * Block (pre-LayerNorm GPT-2), per position, x the residual stream [C]:
 *   x += c_proj(attn(ln_1(x)))      attn: causal, NH heads of hs = C/NH, scale 1/sqrt(hs)
 *   x += mlp_proj(gelu(c_fc(ln_2(x))))
 * with x = wte[id] + wpe[pos] at the input, then logits = head(ln_f(x)), head = wte (tied) or
 * lm_head.
 *
 * Weights: every tensor converted to F32 into one aligned block. Conv1D matrices arrive as
 * [in, out]; they are stored transposed, [out, in], so that a decode GEMV streams each output's
 * weights as one contiguous row and the prefill GEMM uses them as B^T (no copy either way).
 * The safetensors mapping is closed after loading.
 *
 * Forward (n rows of one or more sequences) runs one pool job per layer: each thread owns a
 * slice of the output columns of every matrix (wb_mat_mul_runs: the rows of prompts of
 * WB_PROMPT_ROWS or more tokens through the packed GEMM, decode rows and short prompts through
 * the batched GEMV; bias and GELU on the same slice), a share of the rows for the LayerNorms and
 * a share of the attention items. Decode runs one position as a chain of phases whose chunks (row
 * blocks, heads) any pool thread may take, each thread first its own share (see decode_helped).
 */
#include "cpu.h"
#include "model_family.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Forward attention goes to the pool from this many rows (below, waking it costs more than it
 * saves), in items of one head and a block of queries: every query of the sequence when the
 * heads alone deal evenly over the threads (each item then packs its head's K and V once),
 * else blocks of ATT_QB. */
#define ATT_POOL_MIN 16
#define ATT_QB 16

/* Every matrix is [out, in] (the transpose of the file's Conv1D [in, out]). */
typedef struct gpt2_layer {
    const float *ln1_w, *ln1_b;   /* [C] */
    wb_mat qkv;                   /* [3C, C] */
    const float *qkv_b;           /* [3C] */
    wb_mat attproj;               /* [C, C] */
    const float *attproj_b;       /* [C] */
    const float *ln2_w, *ln2_b;   /* [C] */
    wb_mat fc;                    /* [F, C], F = n_inner */
    const float *fc_b;            /* [F] */
    wb_mat mlpproj;               /* [C, F] */
    const float *mlpproj_b;       /* [C] */
    /* the matrices' prompt-GEMM panels (gemm_f32_panels), or NULL: qkv, attproj, fc, mlpproj */
    const float *panels[4];
} gpt2_layer;

/* F32 models up to this many bytes of layer matrices also keep them as the prompt GEMM's
 * weight panels, packed once at load instead of by every prompt (about a tenth of a 96-token
 * TinyLM prefill). It doubles those matrices' memory, which a small model affords; a large one's
 * weights come from memory in either layout and would pay hundreds of megabytes for a few
 * percent. */
#define GPT2_PANEL_BYTES ((size_t)64 << 20)

typedef struct gpt2 {
    wb_weight_store store;
    wb_mat wte;                   /* [V, C] token embeddings, also the tied head */
    const float *wpe;             /* [T, C] position embeddings */
    gpt2_layer *layers;           /* [L] */
    const float *lnf_w, *lnf_b;   /* [C] */
    wb_mat head;                  /* [V, C]: wte when tied, lm_head.weight otherwise */
    wb_act act;
    float *panels;                /* the layers' panels, one block (NULL: none) */
    void (*panels_by)(float *, const float *, int, int); /* the level's packer that made them */
} gpt2;

typedef struct gpt2_hparams {
    wb_act act;
} gpt2_hparams;

/* ------------------------------------------------------------------------------- config */

static wb_status parse_config(const cJSON *root, const char *mt, const char *name,
                              wb_config *out, void **hparams, wb_err *err) {
    (void)mt; /* "gpt2" or absent */
    wb_config c = {0};
    wb_act a = WB_ACT_GELU_TANH;
    wb_status s;
    int p;
    if ((s = wb_cfg_int(root, "vocab_size", name, NULL, 1, 1, WB_CAP_VOCAB, &c.vocab_size, &p,
                        err)))
        return s;
    int32_t npos = 0, nctx = 0;
    int has_pos, has_ctx;
    if ((s = wb_cfg_int(root, "n_positions", name, NULL, 0, 1, WB_CAP_POS_LEARNED, &npos,
                        &has_pos, err)) ||
        (s = wb_cfg_int(root, "n_ctx", name, NULL, 0, 1, WB_CAP_POS_LEARNED, &nctx, &has_ctx,
                        err)))
        return s;
    if (!has_pos && !has_ctx)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: required key \"n_positions\" is missing", name);
    /* n_positions sizes wpe; old configs carry n_ctx alongside (equal) or alone. */
    c.n_ctx = has_pos ? npos : nctx;
    if ((s = wb_cfg_int(root, "n_embd", name, NULL, 1, 1, WB_CAP_EMBD, &c.n_embd, &p, err)) ||
        (s = wb_cfg_int(root, "n_layer", name, NULL, 1, 1, WB_CAP_LAYER, &c.n_layer, &p, err)) ||
        (s = wb_cfg_int(root, "n_head", name, NULL, 1, 1, WB_CAP_HEAD, &c.n_head, &p, err)) ||
        (s = wb_cfg_int(root, "n_inner", name, NULL, 0, 1, WB_CAP_INNER, &c.n_inner, &p, err)))
        return s;
    if (!p) c.n_inner = 4 * c.n_embd; /* absent or null */
    if (c.n_embd % c.n_head != 0)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"n_embd\" = %d is not divisible by \"n_head\" = %d", name,
                          c.n_embd, c.n_head);
    c.layer_norm_epsilon = 1e-5f;
    if ((s = wb_cfg_pos_num(root, "layer_norm_epsilon", "", name, 0, 1.0, &c.layer_norm_epsilon,
                            err)))
        return s;
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    if (af) {
        if (!cJSON_IsString(af))
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: key \"activation_function\" must be a string", name);
        if (!strcmp(af->valuestring, "gelu_new") || !strcmp(af->valuestring, "gelu_pytorch_tanh") ||
            !strcmp(af->valuestring, "gelu_fast"))
            a = WB_ACT_GELU_TANH;
        else if (!strcmp(af->valuestring, "gelu"))
            a = WB_ACT_GELU_ERF;
        else
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: key \"activation_function\" = \"%.40s\" is not supported "
                              "(gelu_new, gelu_pytorch_tanh, gelu)", name, af->valuestring);
    }
    if ((s = wb_cfg_bool(root, "tie_word_embeddings", name, 1, &c.tie_word_embeddings, err)))
        return s;

    int64_t V = c.vocab_size, T = c.n_ctx, C = c.n_embd, L = c.n_layer, F = c.n_inner;
    int64_t per_layer = 4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * F + F) + (F * C + C);
    int64_t total = V * C + T * C + L * per_layer + 2 * C + (c.tie_word_embeddings ? 0 : V * C);
    if (total > WB_CAP_PARAMS)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: sizes (vocab_size, n_positions, n_embd, n_layer, n_inner) give %lld "
                          "parameters, above the limit of %lld", name, (long long)total,
                          (long long)WB_CAP_PARAMS);
    c.max_position_embeddings = c.n_ctx;
    c.n_kv_head = c.n_head;
    c.head_dim = c.n_embd / c.n_head;
    gpt2_hparams *hp = malloc(sizeof *hp);
    if (!hp) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    hp->act = a;
    *hparams = hp;
    *out = c;
    return WB_OK;
}

/* ------------------------------------------------------------------------------- weights */

static void gpt2_free(void *impl) {
    gpt2 *g = impl;
    if (!g) return;
    wb_weight_store_free(&g->store);
    free(g->layers);
    free(g->panels);
    free(g);
}

/* The layer matrices' prompt-GEMM panels at the kernel level in use (none when it has none,
 * a matrix is not F32, or they would pass GPT2_PANEL_BYTES). Without them (or at another level
 * later) the GEMM packs each prompt's panels itself: the same bits either way. */
static void pack_panels(gpt2 *g, int L) {
    const wb_kernel_table *kt = wb_kt();
    if (!kt->gemm_f32_panels) return;
    size_t total = 0;
    for (int l = 0; l < L; l++) {
        const wb_mat *ms[4] = {&g->layers[l].qkv, &g->layers[l].attproj, &g->layers[l].fc,
                               &g->layers[l].mlpproj};
        for (int i = 0; i < 4; i++) {
            if (ms[i]->dtype != WB_MAT_F32) return;
            total += (kt->gemm_f32_panels_size(ms[i]->rows, ms[i]->cols) + 15) & ~(size_t)15;
        }
    }
    if (total * sizeof(float) > GPT2_PANEL_BYTES ||
        !(g->panels = aligned_alloc(64, total * sizeof(float))))
        return; /* out of memory: the GEMM packs per call, as without panels */
    float *p = g->panels;
    for (int l = 0; l < L; l++) {
        const wb_mat *ms[4] = {&g->layers[l].qkv, &g->layers[l].attproj, &g->layers[l].fc,
                               &g->layers[l].mlpproj};
        for (int i = 0; i < 4; i++) {
            kt->gemm_f32_panels(p, ms[i]->w, ms[i]->rows, ms[i]->cols);
            g->layers[l].panels[i] = p;
            p += (kt->gemm_f32_panels_size(ms[i]->rows, ms[i]->cols) + 15) & ~(size_t)15;
        }
    }
    g->panels_by = kt->gemm_f32_panels;
}

static wb_status load(wb_model *m, wb_weights *w, const wb_model_params *prm, wb_err *err) {
    (void)prm; /* GPT-2 is always F32 */
    const wb_config *c = &m->cfg;
    const int64_t V = c->vocab_size, T = c->max_position_embeddings, C = c->n_embd, F = c->n_inner,
                  L = c->n_layer;
    gpt2 *g = calloc(1, sizeof *g);
    wb_want *wants = calloc((size_t)(5 + 12 * L), sizeof *wants);
    wb_status s = WB_OK;
    if (!g || !wants || !(g->layers = calloc((size_t)L, sizeof *g->layers))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", m->dir);
        goto done;
    }
    g->act = ((const gpt2_hparams *)m->hparams)->act;
    /* GPT2LMHeadModel writes "transformer." names, GPT2Model none */
    const char *pre = wb_weights_has(w, "transformer.wte.weight") ? "transformer." : "";
    int n = 0;
#define WANT(vecp, matp, tr, a, b, fmt, ...)                                                      \
    do {                                                                                          \
        wb_want *t = &wants[n++];                                                                 \
        snprintf(t->name, sizeof t->name, "%s" fmt, pre, __VA_ARGS__);                            \
        t->d0 = (a), t->d1 = (b), t->transpose = (tr), t->vec = (vecp), t->mat = (matp);          \
    } while (0)
    WANT(NULL, &g->wte, 0, V, C, "%s", "wte.weight");
    WANT(&g->wpe, NULL, 0, T, C, "%s", "wpe.weight");
    for (int l = 0; l < (int)L; l++) {
        gpt2_layer *y = &g->layers[l];
        WANT(&y->ln1_w, NULL, 0, C, 0, "h.%d.ln_1.weight", l);
        WANT(&y->ln1_b, NULL, 0, C, 0, "h.%d.ln_1.bias", l);
        WANT(NULL, &y->qkv, 1, C, 3 * C, "h.%d.attn.c_attn.weight", l);
        WANT(&y->qkv_b, NULL, 0, 3 * C, 0, "h.%d.attn.c_attn.bias", l);
        WANT(NULL, &y->attproj, 1, C, C, "h.%d.attn.c_proj.weight", l);
        WANT(&y->attproj_b, NULL, 0, C, 0, "h.%d.attn.c_proj.bias", l);
        WANT(&y->ln2_w, NULL, 0, C, 0, "h.%d.ln_2.weight", l);
        WANT(&y->ln2_b, NULL, 0, C, 0, "h.%d.ln_2.bias", l);
        WANT(NULL, &y->fc, 1, C, F, "h.%d.mlp.c_fc.weight", l);
        WANT(&y->fc_b, NULL, 0, F, 0, "h.%d.mlp.c_fc.bias", l);
        WANT(NULL, &y->mlpproj, 1, F, C, "h.%d.mlp.c_proj.weight", l);
        WANT(&y->mlpproj_b, NULL, 0, C, 0, "h.%d.mlp.c_proj.bias", l);
    }
    WANT(&g->lnf_w, NULL, 0, C, 0, "%s", "ln_f.weight");
    WANT(&g->lnf_b, NULL, 0, C, 0, "%s", "ln_f.bias");
    /* HF drops lm_head.weight on save only when tied; untied models must carry it (unprefixed) */
    pre = "";
    if (!c->tie_word_embeddings) WANT(NULL, &g->head, 0, V, C, "%s", "lm_head.weight");
#undef WANT
    if ((s = wb_weights_load(w, wants, n, 0, &g->store, &m->n_params, err))) goto done;
    if (c->tie_word_embeddings) g->head = g->wte;
    pack_panels(g, (int)L);
    m->impl = g;
    g = NULL;
done:
    free(wants);
    gpt2_free(g);
    return s;
}

static size_t kv_width(const wb_config *c) { return (size_t)c->n_embd; }
static int32_t max_ctx(const wb_config *c) { return c->max_position_embeddings; } /* wpe rows */
static size_t weight_bytes(const wb_model *m) {
    return wb_weight_store_bytes(&((const gpt2 *)m->impl)->store);
}
static const wb_weight_store *store_of(const wb_model *m) { return &((const gpt2 *)m->impl)->store; }

/* ------------------------------------------------------------------------- GEMM forward */

/* Thread tid's share of Y[n, out] = X[n, in] . W^T + b (b may be NULL), or Y += that when
 * residual, then gelu(Y) in place when gelu, for the output columns [c0, c1) (0 and out: all):
 * columns [r0, r1) in the decode path's slices (blocks of 8), so bias, activation and the
 * GEMM's writes stay in the thread's own columns. Wp: W's prompt-GEMM panels (pack_panels) or
 * NULL. */
static void mm_part(const wb_model *m, const wb_mm_run *runs, int n_runs, float *Y,
                    const float *X, int n, const wb_mat *W, const float *Wp, const float *b,
                    int residual, int gelu, int c0, int c1, int tid, int nt) {
    const gpt2 *g = m->impl;
    const wb_kernel_table *kt = wb_kt();
    int r0, r1;
    wb_split_rows(c1 - c0, tid, nt, &r0, &r1);
    r0 += c0, r1 += c0;
    if (r0 >= r1) return;
    if (Wp && g->panels_by != kt->gemm_f32_panels) Wp = NULL; /* packed by another level */
    for (int i = 0; i < n_runs; i++) {
        float *y = Y + (size_t)runs[i].row0 * W->rows;
        const float *x = X + (size_t)runs[i].row0 * W->cols;
        if (Wp && runs[i].mode == WB_MM_PROMPT) /* wb_mat_mul's prompt GEMM, panels prepacked */
            kt->gemm_f32_prepacked(y, (size_t)W->rows, x, (size_t)W->cols, runs[i].n, Wp, W->w, b,
                                   W->cols, r0, r1, residual);
        else
            wb_mat_mul(y, x, runs[i].n, W, b, r0, r1, residual, runs[i].mode);
    }
    if (gelu)
        for (int t = 0; t < n; t++)
            wb_gelu_forward(Y + (size_t)t * W->rows + r0, (size_t)(r1 - r0), g->act);
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
    const int *kv_direct; /* [n_seqs] 1: the qkv GEMM stored the sequence's K/V rows (qkv_part) */
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
    if (!j->qb && !j->kv_direct[s])
        for (int t = 0; t < q->n; t++) {
            const float *qr = j->qkv + (r + t) * 3 * C + hd * hs;
            memcpy(kl + (size_t)(q->pos + t) * C, qr + C, (size_t)hs * sizeof(float));
            memcpy(vl + (size_t)(q->pos + t) * C, qr + 2 * C, (size_t)hs * sizeof(float));
        }
    if (nq == 1) /* a decode row: the same kernel, so the same sums, as the decode path */
        wb_attention_forward(j->att + r * C + hd * hs, j->qkv + r * 3 * C + hd * hs, kl, vl,
                             (size_t)C, q->pos + q0, hs, sc);
    else
        wb_attention_block_forward(j->att + r * C + hd * hs, (size_t)C,
                                   j->qkv + r * 3 * C + hd * hs, (size_t)3 * C, kl, vl,
                                   (size_t)C, q->pos + q0, nq, 1, hs, 0, sc);
}

static void att_worker(const att_job *j, int tid, int nt) {
    float *sc = j->sc + (size_t)tid * j->sc_stride;
    int hint = 0;
    for (int i = tid; i < j->n_items; i += nt) att_item(j, i, &hint, sc);
}

/* The last query of each sequence only (item = s * NH + head, out row s), through the kernel
 * att_item would give it: the one-query kernel when it is alone in its block (a decode row, or
 * the last block of qb holds one query), else the block kernel with nq = 1, whose sums for a
 * query do not depend on the other queries of its block (kernels_attention.c). So the output
 * row has the bits the whole layer would give it. The K/V rows are already in the cache. */
static void att_last_worker(const att_job *j, int tid, int nt) {
    const int C = j->C, NH = j->NH, hs = C / NH;
    float *sc = j->sc + (size_t)tid * j->sc_stride;
    for (int i = tid; i < j->n_seqs * NH; i += nt) {
        const int s = i / NH, hd = i % NH;
        const wb_seq_rows *q = &j->seqs[s];
        const int qb = j->qb ? j->qb : q->n, alone = q->n - (q->n - 1) / qb * qb == 1;
        const size_t lo = (size_t)j->layer * q->cache_ctx * C;
        const float *kl = q->k + lo + hd * hs, *vl = q->v + lo + hd * hs;
        const float *qr = j->qkv + (size_t)s * 3 * C + hd * hs; /* the kept rows' q, row s */
        float *out = j->att + (size_t)s * C + hd * hs;
        if (alone)
            wb_attention_forward(out, qr, kl, vl, (size_t)C, q->pos + q->n - 1, hs, sc);
        else
            wb_attention_block_forward(out, (size_t)C, qr, (size_t)3 * C, kl, vl, (size_t)C,
                                       q->pos + q->n - 1, 1, 1, hs, 0, sc);
    }
}

/* One layer (or, with layer = -1, the final LayerNorm and head) on every pool thread, phases
 * separated by barriers: LayerNorm by rows, matrices by output columns (mm_part), attention by
 * items. One wake-up per layer, and with OpenBLAS kept single-threaded meanwhile, only our
 * threads run: no second pool of spinning workers competes for the cores.
 *
 * The last layer is trimmed when only the last position's logits are asked (or none) and no
 * probe looks at the layers: every row still gets its k/v (they go to the cache), but q, the
 * attention output, c_proj, ln_2 and the MLP run only for the rows kept, the last of each
 * sequence (none without logits), moved to rows 0..n_keep-1 of xn, qkv, x and att. Each kept
 * row goes through the same kernels in the same mode (kept_runs) as in the whole layer, so its
 * bits are those of the untrimmed pass; of a 4-layer prompt's matrix work, about a fifth is
 * skipped. */
typedef struct fwd_job {
    const wb_model *m;
    const gpt2 *g;
    const wb_seq_rows *seqs;
    int n_seqs, n;
    const int *row0;
    const wb_mm_run *runs; /* [n_runs] the stacked rows by matrix-product mode (wb_mm_runs) */
    int n_runs;
    float *x, *xn, *qkv, *att, *h;
    att_job *aj;
    wb_pool *pool;
    int layer;
    int att_threads;    /* 1: attention on thread 0 only (too small to split) */
    float *logits;      /* head phase */
    int all_positions;
    int trim_layer;     /* the layer trimmed as above, or -1 */
    int n_keep;         /* rows kept there: n_seqs, or 0 without logits */
    const wb_mm_run *kruns; /* [n_kruns] the kept rows by mode (kept_runs) */
    int n_kruns;
    float *xp;          /* [nt, xp_stride] each thread's packed xn for qkv_part */
    size_t xp_stride;
} fwd_job;

/* xn = layernorm(x) over thread tid's share of rows 0..n-1. */
static void ln_rows(const fwd_job *j, int n, const float *w, const float *b, int tid, int nt) {
    const int C = j->m->cfg.n_embd, t0 = (int)((int64_t)n * tid / nt),
              t1 = (int)((int64_t)n * (tid + 1) / nt);
    for (int t = t0; t < t1; t++)
        wb_layernorm_forward(j->xn + (size_t)t * C, j->x + (size_t)t * C, w, b, C,
                             j->m->cfg.layer_norm_epsilon);
}

/* Thread tid's columns of qkv [n, 3C] = xn . W^T + b from column c0 (0, or C in the trimmed
 * layer), as mm_part, except that the prompt run of a sequence with kv_direct stores its k and v
 * columns straight into its cache rows of this layer (rows pos.., C floats apart) and only its q
 * columns into qkv: the same prepacked GEMM over the same panels (C is a whole number of them),
 * so the bits the copy from qkv gave, without the copy (3-4% of a 96-token TinyLM prefill went
 * to copying K/V rows); the rows are packed once (gemm_xpack) for the three calls. */
static void qkv_part(const fwd_job *j, const gpt2_layer *ly, int c0, int tid, int nt) {
    const int C = j->m->cfg.n_embd;
    int any = 0;
    for (int s = 0; s < j->n_seqs; s++) any |= j->aj->kv_direct[s];
    if (!any) {
        mm_part(j->m, j->runs, j->n_runs, j->qkv, j->xn, j->n, &ly->qkv, ly->panels[0], ly->qkv_b,
                0, 0, c0, 3 * C, tid, nt);
        return;
    }
    const wb_kernel_table *kt = wb_kt();
    int r0, r1;
    wb_split_rows(3 * C - c0, tid, nt, &r0, &r1);
    r0 += c0, r1 += c0;
    for (int i = 0, s = 0; i < j->n_runs; i++) {
        const wb_mm_run *u = &j->runs[i];
        while (s + 1 < j->n_seqs && j->row0[s + 1] <= u->row0) s++;
        if (u->mode != WB_MM_PROMPT || !j->aj->kv_direct[s]) {
            mm_part(j->m, u, 1, j->qkv, j->xn, u->n, &ly->qkv, ly->panels[0], ly->qkv_b, 0, 0, c0,
                    3 * C, tid, nt);
            continue;
        }
        if (r0 >= r1) continue;
        const wb_seq_rows *q = &j->seqs[s];
        const size_t lo = (size_t)j->layer * q->cache_ctx * C + (size_t)q->pos * C;
        /* the rows packed once for the three calls, as each call would pack them */
        float *P = j->xp + (size_t)tid * j->xp_stride;
        kt->gemm_xpack(P, j->xn + (size_t)u->row0 * C, (size_t)C, u->n, C, 0, u->n, 0); /* F32 */
        for (int part = 0; part < 3; part++) { /* q, k, v: columns [part C, part C + C) */
            const int a = r0 > part * C ? r0 : part * C, e = r1 < part * C + C ? r1 : part * C + C;
            if (a >= e) continue;
            const int o = part * C; /* the part's first weight row: a panel's */
            float *y = part == 0 ? j->qkv + (size_t)u->row0 * 3 * C : (part == 1 ? q->k : q->v) + lo;
            kt->gemm_f32_prepacked_packed(y, part == 0 ? (size_t)3 * C : (size_t)C, P, u->n,
                                          ly->panels[0] + (size_t)o * C,
                                          (const float *)ly->qkv.w + (size_t)o * C, ly->qkv_b + o,
                                          C, a - o, e - o, 0);
        }
    }
}

/* The runs of the kept rows (row s: the last of sequence s), each in the mode of its sequence's
 * run, merged as wb_mm_runs merges (never a prompt's). Returns how many. */
static int kept_runs(const wb_mm_run *runs, const int *row0, const wb_seq_rows *seqs, int n_seqs,
                     wb_mm_run *out) {
    int nk = 0;
    for (int s = 0, i = 0; s < n_seqs; s++) {
        const int last = row0[s] + seqs[s].n - 1;
        while (runs[i].row0 + runs[i].n <= last) i++;
        const int mode = runs[i].mode;
        if (nk && out[nk - 1].mode == mode && mode != WB_MM_PROMPT) out[nk - 1].n++;
        else out[nk++] = (wb_mm_run){s, 1, mode};
    }
    return nk;
}

static void fwd_worker(void *arg, int tid, int nt) {
    const fwd_job *j = arg;
    const gpt2 *g = j->g;
    const wb_config *c = &j->m->cfg;
    const int C = c->n_embd, n = j->n;
    if (j->layer < 0) { /* final LayerNorm + head */
        if (j->all_positions) {
            ln_rows(j, n, g->lnf_w, g->lnf_b, tid, nt);
            wb_pool_barrier(j->pool);
            mm_part(j->m, j->runs, j->n_runs, j->logits, j->xn, n, &g->head, NULL, NULL, 0, 0, 0, g->head.rows,
                    tid, nt);
        } else {
            /* the last row of each sequence (row s once the last layer was trimmed), normalised
             * into xn rows 0..n_seqs-1 */
            if (tid == 0)
                for (int s = 0; s < j->n_seqs; s++) {
                    const int r = j->trim_layer >= 0 ? s : j->row0[s] + j->seqs[s].n - 1;
                    wb_layernorm_forward(j->xn + (size_t)s * C, j->x + (size_t)r * C, g->lnf_w,
                                         g->lnf_b, C, c->layer_norm_epsilon);
                }
            wb_pool_barrier(j->pool);
            /* one row per sequence, as decode rows */
            const wb_mm_run last = {0, j->n_seqs,
                                    wb_model_batch_variant(j->m) ? WB_MM_VARIANT : WB_MM_ROWS};
            mm_part(j->m, &last, 1, j->logits, j->xn, j->n_seqs, &g->head, NULL, NULL, 0, 0, 0, g->head.rows,
                    tid, nt);
        }
        return;
    }
    const gpt2_layer *ly = &g->layers[j->layer];
    const int trim = j->layer == j->trim_layer;
    ln_rows(j, n, ly->ln1_w, ly->ln1_b, tid, nt);
    wb_pool_barrier(j->pool);
    /* the trimmed layer's k/v columns for every row here, its q columns after (kept rows) */
    qkv_part(j, ly, trim ? C : 0, tid, nt);
    wb_pool_barrier(j->pool);
    if (j->aj->qb || trim) { /* K/V rows into the caches, by rows (whole-sequence items copy
                              * their own, except in the trimmed layer) */
        const int t0 = (int)((int64_t)n * tid / nt), t1 = (int)((int64_t)n * (tid + 1) / nt);
        for (int s = 0, r = 0; s < j->n_seqs; r += j->seqs[s].n, s++) {
            const wb_seq_rows *q = &j->seqs[s];
            if (j->aj->kv_direct[s]) continue; /* stored by the GEMM */
            const size_t lo = (size_t)j->layer * q->cache_ctx * C;
            for (int t = r > t0 ? r : t0; t < r + q->n && t < t1; t++) {
                const float *qr = j->qkv + (size_t)t * 3 * C;
                memcpy(q->k + lo + (size_t)(q->pos + t - r) * C, qr + C, (size_t)C * sizeof(float));
                memcpy(q->v + lo + (size_t)(q->pos + t - r) * C, qr + 2 * C,
                       (size_t)C * sizeof(float));
            }
        }
        if (trim && !j->n_keep) return; /* no logits: the cache was all this layer owed */
        if (trim && tid == 0) /* the kept rows' xn to rows 0..n_keep-1 (row s from row >= s) */
            for (int s = 0; s < j->n_seqs; s++)
                memmove(j->xn + (size_t)s * C,
                        j->xn + (size_t)(j->row0[s] + j->seqs[s].n - 1) * C,
                        (size_t)C * sizeof(float));
        wb_pool_barrier(j->pool);
    }
    if (trim) { /* their q, into qkv rows 0..n_keep-1 (whose k/v columns are in the caches) */
        mm_part(j->m, j->kruns, j->n_kruns, j->qkv, j->xn, j->n_keep, &ly->qkv, ly->panels[0],
                ly->qkv_b, 0, 0, 0, C, tid, nt);
        wb_pool_barrier(j->pool);
    }
    const int nk = trim ? j->n_keep : n;
    const wb_mm_run *runs = trim ? j->kruns : j->runs;
    const int n_runs = trim ? j->n_kruns : j->n_runs;
    if (trim) {
        if (j->att_threads > 1) att_last_worker(j->aj, tid, nt);
        else if (tid == 0) att_last_worker(j->aj, 0, 1);
        if (tid == 0) /* the kept residual rows to rows 0..n_keep-1 (row s from row >= s) */
            for (int s = 0; s < j->n_seqs; s++)
                memmove(j->x + (size_t)s * C,
                        j->x + (size_t)(j->row0[s] + j->seqs[s].n - 1) * C,
                        (size_t)C * sizeof(float));
    } else if (j->att_threads > 1) {
        att_worker(j->aj, tid, nt);
    } else if (tid == 0) {
        att_worker(j->aj, 0, 1);
    }
    wb_pool_barrier(j->pool);
    mm_part(j->m, runs, n_runs, j->x, j->att, nk, &ly->attproj, ly->panels[1], ly->attproj_b, 1, 0, 0, C,
            tid, nt);
    wb_pool_barrier(j->pool);
    ln_rows(j, nk, ly->ln2_w, ly->ln2_b, tid, nt);
    wb_pool_barrier(j->pool);
    mm_part(j->m, runs, n_runs, j->h, j->xn, nk, &ly->fc, ly->panels[2], ly->fc_b, 0, 1, 0,
            c->n_inner, tid, nt);
    wb_pool_barrier(j->pool);
    mm_part(j->m, runs, n_runs, j->x, j->h, nk, &ly->mlpproj, ly->panels[3], ly->mlpproj_b, 1, 0, 0, C,
            tid, nt);
}

static wb_status forward(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                         int all_positions, wb_scratch *scratch, wb_err *err) {
    const gpt2 *g = m->impl;
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, F = c->n_inner, NH = c->n_head, hs = C / NH;
    int n = 0, n_items = 0;
    size_t sc_per_thread = 0;
    const int nt = wb_compute_threads();
    const int qb = n_seqs == 1 && NH % nt == 0 ? 0 : ATT_QB;
    for (int s = 0; s < n_seqs; s++) {
        n += seqs[s].n;
        n_items += (qb ? (seqs[s].n + qb - 1) / qb : 1) * NH;
        /* rounded to 16 floats: each thread's scratch starts on its own cache line */
        size_t need = (wb_attention_block_scratch(seqs[s].pos, seqs[s].n, hs) + 15) & ~(size_t)15;
        if (need > sc_per_thread) sc_per_thread = need;
    }
    const size_t nC = (size_t)n * C, xp_stride = (nC + 15) & ~(size_t)15;
    /* x [n, C] residual; xn [n, C] normed; qkv [n, 3C]; att [n, C]; h [n, F];
     * sc [nt, attention scratch]; row0/item0 [2 n_seqs + 1] ints, then runs and kept runs
     * [n_seqs] each, kv_direct [n_seqs]; xp [nt, xp_stride] packed xn per thread */
    const size_t sz[8] = {nC, nC, 3 * nC, nC, (size_t)n * F, (size_t)nt * sc_per_thread,
                          (size_t)3 * n_seqs + 1 +
                              (size_t)2 * n_seqs * sizeof(wb_mm_run) / sizeof(int),
                          (size_t)nt * xp_stride};
    float *b[8];
    wb_status st = wb_scratch_take(scratch, 8, sz, b, err);
    if (st) return st;
    float *x = b[0], *xn = b[1], *qkv = b[2], *att = b[3], *h = b[4], *sc = b[5];
    int *row0 = (int *)b[6], *item0 = row0 + n_seqs;
    wb_mm_run *runs = (wb_mm_run *)(item0 + n_seqs + 1), *kruns = runs + n_seqs;
    int *kv_direct = (int *)(kruns + n_seqs);
    const int variant = wb_model_batch_variant(m);
    const int n_runs = wb_mm_runs(seqs, n_seqs, variant, runs);
    /* a prompt sequence's K/V rows straight from the qkv GEMM into its cache (qkv_part): where
     * the prepacked panels run (this level packed them) and C is a whole number of panels */
    const wb_kernel_table *kt = wb_kt();
    const int direct = g->panels && g->panels_by == kt->gemm_f32_panels && kt->gemm_nr > 0 &&
                       C % kt->gemm_nr == 0 && kt->gemm_f32_prepacked_packed;
    for (int s = 0; s < n_seqs; s++)
        kv_direct[s] = direct && !variant && seqs[s].n >= WB_PROMPT_ROWS;
    for (int s = 0, r = 0, it = 0; s <= n_seqs; s++) {
        item0[s] = it;
        if (s == n_seqs) break;
        row0[s] = r;
        r += seqs[s].n;
        it += (qb ? (seqs[s].n + qb - 1) / qb : 1) * NH;
    }
    for (int s = 0; s < n_seqs; s++)
        for (int t = 0; t < seqs[s].n; t++) {
            const float *pe = g->wpe + (size_t)(seqs[s].pos + t) * C;
            float *xr = x + (size_t)(row0[s] + t) * C;
            wb_mat_row(&g->wte, seqs[s].ids[t], xr); /* F32, or quantized rows */
            for (int i = 0; i < C; i++) xr[i] += pe[i];
        }
    wb_probe_layer(m, seqs, n_seqs, row0, -1, x, NULL, NULL, 0, 0);
    att_job aj = {seqs, row0, item0, n_seqs, n_items, qb, qkv, att, sc, sc_per_thread, 0, C, NH,
                  kv_direct};
    /* the last layer trimmed (fwd_job): not when every position's logits are asked, nor under
     * a probe (it records every row after every layer), nor for batch-variant products, whose
     * bits may depend on the rows in the call */
    int probed = 0;
    for (int s = 0; s < n_seqs; s++) probed |= seqs[s].probe != NULL;
    const int trim = !probed && (!logits || (!all_positions && !variant));
    const int n_kruns = trim && logits ? kept_runs(runs, row0, seqs, n_seqs, kruns) : 0;
    fwd_job fj = {m, g, seqs, n_seqs, n, row0, runs, n_runs, x, xn, qkv, att, h, &aj, NULL, 0,
                  nt > 1 && (n >= ATT_POOL_MIN || n_seqs > 1) ? nt : 1, logits, all_positions,
                  trim ? c->n_layer - 1 : -1, logits ? n_seqs : 0, kruns, n_kruns, b[7], xp_stride};
    for (int l = 0; l <= c->n_layer; l++) {
        if (l == c->n_layer && !logits) break;
        if (l < c->n_layer && wb_model_aborted(m, l, err)) {
            st = WB_ERR_CANCELLED;
            break;
        }
        aj.layer = l;
        fj.layer = l < c->n_layer ? l : -1;
        if (nt > 1) { /* the pool is locked per layer, so the abort callback runs unlocked */
            if ((st = wb_pool_slot_acquire(wb_model_pool(m), nt, &fj.pool, err))) break;
            wb_pool_run(fj.pool, fwd_worker, &fj);
            wb_pool_slot_release(wb_model_pool(m));
        } else {
            fwd_worker(&fj, 0, 1);
        }
        if (l < c->n_layer) /* q: qkv's first C of each row */
            wb_probe_layer(m, seqs, n_seqs, row0, l, x, NULL, qkv, (size_t)3 * C, 0);
    }
    return st;
}

/* --------------------------------------------------------------------------- GEMV decode */

/* A decode step is a chain of phases, each a set of chunks any thread may compute once the
 * previous phase is complete: per layer QKV_ATT (one head's q, k, v rows, its K/V cache rows
 * and its attention; a head's attention reads only its own rows) when a head's rows are whole
 * GEMV row blocks (hs % 8 == 0), else QKV (row blocks) then ATT (heads); then ATTPROJ, FC (with
 * GELU) and MLPPROJ by row blocks; then HEAD by row blocks. Each output row is summed the same
 * way whichever thread computes it and whatever chunk it is in, so every thread count gives the
 * same bits as one thread. */
enum { PH_QKV_ATT, PH_QKV, PH_ATT, PH_ATTPROJ, PH_FC, PH_MLPPROJ, PH_HEAD };

/* Weights per chunk: small enough that two threads share a phase evenly and one can take over
 * what the other has not started, large enough that a claim (one atomic add) is noise. */
#define DECODE_CHUNK_BYTES 16384

typedef struct decode_job {
    const wb_model *m;
    const wb_seq_rows *sq;
    float *x, *qkv, *att, *h, *xn, *sc; /* xn [nt, C] and sc [nt, cache_ctx] per thread */
    float *logits;
    wb_pool *pool;
    int by_heads, per_layer, n_phases;
    atomic_uint *claim; /* [nt][claim_stride]: chunks of phase k taken from thread t's share */
    atomic_uint *done;  /* [n_phases][16]: chunks of phase k finished (a cache line each) */
    int claim_stride;
} decode_job;

static int phase_kind(const decode_job *j, int k, int *layer) {
    static const unsigned char heads[4] = {PH_QKV_ATT, PH_ATTPROJ, PH_FC, PH_MLPPROJ},
                               rows[5] = {PH_QKV, PH_ATT, PH_ATTPROJ, PH_FC, PH_MLPPROJ};
    if (k == j->m->cfg.n_layer * j->per_layer) {
        *layer = -1;
        return PH_HEAD;
    }
    *layer = k / j->per_layer;
    return j->by_heads ? heads[k % j->per_layer] : rows[k % j->per_layer];
}

/* Chunks of a phase; *rows: rows per chunk (whole 8-row blocks), 0 when chunks are heads. */
static int phase_chunks(const decode_job *j, int kind, int *rows) {
    const wb_config *c = &j->m->cfg;
    int out = 0, in = c->n_embd;
    switch (kind) {
    case PH_QKV_ATT:
    case PH_ATT: *rows = 0; return c->n_head;
    case PH_QKV: out = 3 * c->n_embd; break;
    case PH_ATTPROJ: out = c->n_embd; break;
    case PH_FC: out = c->n_inner; break;
    case PH_MLPPROJ: out = c->n_embd, in = c->n_inner; break;
    default: out = c->vocab_size; break;
    }
    int r = (DECODE_CHUNK_BYTES / 4 / in + 7) & ~7;
    *rows = r < 8 ? 8 : r;
    return (out + *rows - 1) / *rows;
}

/* xn = the LayerNorm a phase reads (ln_1, ln_2 or ln_f of x); 0 when it reads none. */
static int phase_norm(const decode_job *j, int kind, int l, float *xn) {
    const gpt2 *g = j->m->impl;
    const wb_config *c = &j->m->cfg;
    const float *w, *b;
    if (kind == PH_QKV_ATT || kind == PH_QKV) w = g->layers[l].ln1_w, b = g->layers[l].ln1_b;
    else if (kind == PH_FC) w = g->layers[l].ln2_w, b = g->layers[l].ln2_b;
    else if (kind == PH_HEAD) w = g->lnf_w, b = g->lnf_b;
    else return 0;
    wb_layernorm_forward(xn, j->x, w, b, c->n_embd, c->layer_norm_epsilon);
    return 1;
}

/* Chunks [i0, i1) of a phase on thread tid's buffers (xn holds the phase's LayerNorm). */
static void phase_run(const decode_job *j, int kind, int l, int i0, int i1, int rows, int tid) {
    const wb_model *m = j->m;
    const gpt2 *g = m->impl;
    const wb_config *c = &m->cfg;
    const wb_seq_rows *sq = j->sq;
    const int C = c->n_embd, NH = c->n_head, hs = C / NH, pos = sq->pos;
    const float *xn = j->xn + (size_t)tid * C;
    float *sc = j->sc + (size_t)tid * sq->cache_ctx;
    const gpt2_layer *ly = l >= 0 ? &g->layers[l] : NULL;
    int r0 = i0 * rows, r1 = i1 * rows;
    switch (kind) {
    case PH_QKV_ATT: /* qkv [3C]: the q, k and v rows of heads i0..i1 (every row at once) */
        if (i0 == 0 && i1 == NH)
            wb_mat_mul(j->qkv, xn, 1, &ly->qkv, ly->qkv_b, 0, 3 * C, 0, 0);
        else
            for (int part = 0; part < 3; part++)
                wb_mat_mul(j->qkv, xn, 1, &ly->qkv, ly->qkv_b, part * C + i0 * hs,
                           part * C + i1 * hs, 0, 0);
        /* fall through */
    case PH_ATT: {
        float *kl = sq->k + (size_t)l * sq->cache_ctx * C, *vl = sq->v + (size_t)l * sq->cache_ctx * C;
        for (int hd = i0; hd < i1; hd++) {
            memcpy(kl + (size_t)pos * C + hd * hs, j->qkv + C + hd * hs, (size_t)hs * sizeof(float));
            memcpy(vl + (size_t)pos * C + hd * hs, j->qkv + 2 * C + hd * hs,
                   (size_t)hs * sizeof(float));
            wb_attention_forward(j->att + hd * hs, j->qkv + hd * hs, kl + hd * hs, vl + hd * hs,
                                 (size_t)C, pos, hs, sc);
        }
        return;
    }
    case PH_QKV:
        if (r1 > 3 * C) r1 = 3 * C;
        wb_mat_mul(j->qkv, xn, 1, &ly->qkv, ly->qkv_b, r0, r1, 0, 0);
        return;
    case PH_ATTPROJ: /* x [C] += c_proj(att) */
        if (r1 > C) r1 = C;
        wb_mat_mul(j->x, j->att, 1, &ly->attproj, ly->attproj_b, r0, r1, 1, 0);
        return;
    case PH_FC: /* h [F] = gelu(c_fc(ln_2(x))) */
        if (r1 > c->n_inner) r1 = c->n_inner;
        wb_mat_mul(j->h, xn, 1, &ly->fc, ly->fc_b, r0, r1, 0, 0);
        wb_gelu_forward(j->h + r0, (size_t)(r1 - r0), g->act);
        return;
    case PH_MLPPROJ: /* x [C] += mlp c_proj(h) */
        if (r1 > C) r1 = C;
        wb_mat_mul(j->x, j->h, 1, &ly->mlpproj, ly->mlpproj_b, r0, r1, 1, 0);
        return;
    default: /* logits [V] = head(ln_f(x)) */
        if (r1 > c->vocab_size) r1 = c->vocab_size;
        wb_mat_mul(j->logits, xn, 1, &g->head, NULL, r0, r1, 0, 0);
        return;
    }
}

/* One thread: every phase whole, no atomics. */
static void decode_alone(decode_job *j) {
    for (int k = 0; k < j->n_phases; k++) {
        int l, rows;
        const int kind = phase_kind(j, k, &l), n = phase_chunks(j, kind, &rows);
        phase_norm(j, kind, l, j->xn);
        phase_run(j, kind, l, 0, n, rows, 0);
    }
}

/* On the pool (wb_pool_run_helped): thread t's share of phase k is chunks [n t / nt,
 * n (t + 1) / nt), the same rows every step, so its weights stay in its core's cache; it claims
 * them in order, then claims whatever is left of the other threads' shares, and waits until the
 * phase's done count reaches n. A peer that is descheduled or late (or, in a fresh process,
 * still waking) holds up at most the one chunk it has claimed: the others run its share. */
static void decode_helped(void *arg, int tid, int nt) {
    decode_job *j = arg;
    float *xn = j->xn + (size_t)tid * j->m->cfg.n_embd;
    for (int k = 0; k < j->n_phases; k++) {
        int l, rows;
        const int kind = phase_kind(j, k, &l), n = phase_chunks(j, kind, &rows);
        int normed = 0;
        unsigned mine = 0;
        for (int v = 0; v < nt; v++) {
            const int u = (tid + v) % nt, a = (int)((int64_t)n * u / nt),
                      share = (int)((int64_t)n * (u + 1) / nt) - a;
            atomic_uint *cl = &j->claim[(size_t)u * j->claim_stride + k];
            if (v && (int)atomic_load_explicit(cl, memory_order_relaxed) >= share) continue;
            for (;;) {
                const int i = (int)atomic_fetch_add_explicit(cl, 1, memory_order_relaxed);
                if (i >= share) break;
                if (!normed) normed = phase_norm(j, kind, l, xn) || 1;
                phase_run(j, kind, l, a + i, a + i + 1, rows, tid);
                mine++;
            }
        }
        atomic_uint *done = &j->done[(size_t)k * 16];
        if (mine) wb_pool_count_add(j->pool, done, mine);
        wb_pool_count_wait(j->pool, done, (unsigned)n);
    }
}

static wb_status decode(const wb_model *m, const wb_seq_rows *one, float *logits,
                        wb_scratch *scratch, wb_err *err) {
    const gpt2 *g = m->impl;
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, nt = wb_compute_threads(), by_heads = (C / c->n_head) % 8 == 0;
    const int per_layer = by_heads ? 4 : 5, n_phases = c->n_layer * per_layer + (logits != NULL);
    const int claim_stride = (n_phases + 15) & ~15;
    /* x [C], qkv [3C], att [C], h [F], xn [nt, C], sc [nt, cache_ctx]; claim [nt, stride] and
     * done [n_phases, 16] counters (atomic_uint, the size of a float) */
    const size_t sz[8] = {(size_t)C, 3 * (size_t)C, (size_t)C, (size_t)c->n_inner, (size_t)nt * C,
                          (size_t)nt * (size_t)one->cache_ctx,
                          nt > 1 ? (size_t)nt * claim_stride : 0,
                          nt > 1 ? (size_t)n_phases * 16 : 0};
    float *b[8];
    _Static_assert(sizeof(atomic_uint) == sizeof(float), "counters live in float scratch");
    wb_status st = wb_scratch_take(scratch, 8, sz, b, err);
    if (st) return st;
    const float *pe = g->wpe + (size_t)one->pos * C;
    wb_mat_row(&g->wte, one->ids[0], b[0]); /* F32, or quantized rows */
    for (int i = 0; i < C; i++) b[0][i] += pe[i];
    decode_job job = {m, one, b[0], b[1], b[2], b[3], b[4], b[5], logits, NULL,
                      by_heads, per_layer, n_phases, (atomic_uint *)(void *)b[6],
                      (atomic_uint *)(void *)b[7], claim_stride};
    if (nt <= 1) {
        decode_alone(&job); /* no pool, no atomics: the 1-thread path pays nothing */
        return WB_OK;
    }
    for (size_t i = 0; i < sz[6]; i++) atomic_init(&job.claim[i], 0);
    for (size_t i = 0; i < sz[7]; i++) atomic_init(&job.done[i], 0);
    if ((st = wb_pool_slot_acquire(wb_model_pool(m), nt, &job.pool, err))) return st;
    wb_pool_run_helped(job.pool, decode_helped, &job);
    wb_pool_slot_release(wb_model_pool(m));
    return WB_OK;
}

static void head_rows(const wb_model *m, const float *x, int n, float *xn, float *logits) {
    const gpt2 *g = m->impl;
    const int C = m->cfg.n_embd;
    for (int t = 0; t < n; t++)
        wb_layernorm_forward(xn + (size_t)t * C, x + (size_t)t * C, g->lnf_w, g->lnf_b, C,
                             m->cfg.layer_norm_epsilon);
    wb_mat_mul(logits, xn, n, &g->head, NULL, 0, g->head.rows, 0, 0);
}

const wb_family wb_family_gpt2 = {
    .name = "gpt2",
    .model_types = (const char *const[]){"gpt2", NULL},
    .architectures = (const char *const[]){"GPT2LMHeadModel", NULL},
    .parse_config = parse_config,
    .load = load,
    .free = gpt2_free,
    .forward = forward,
    .decode = decode,
    .kv_width = kv_width,
    .max_ctx = max_ctx,
    .weight_bytes = weight_bytes,
    .head = head_rows,
    .store = store_of,
};
