/* inspect.c - looking inside a forward pass: hidden states, attention weights, the logit lens.
 *
 * A family's forward makes one wb_probe_layer call after its embeddings and one after each
 * layer; without a probe on any sequence the call returns at once, so the normal path computes
 * exactly what it computed before (the bit-equality tests say so). With one:
 *   - hidden states are copied from the residual rows (plus a bias the GPT-2 prefill still
 *     holds back for the next LayerNorm, added here the way that LayerNorm adds it);
 *   - attention weights are not taken from the attention kernels (which never materialise a
 *     normalised row in the blocked prefill path, and whose threading helper kern owns); they
 *     are recomputed, in double, from the layer's post-RoPE queries of the chosen positions and
 *     the keys the layer has just written into the cache. So every family, GQA, LongRoPE and
 *     the sliding window come for free: the query and the cached keys already carry them.
 */
#include "model_family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

wb_status wb_probe_check(const wb_model *m, const wb_probe *p, int pos, int n, wb_err *err) {
    if (!p) return WB_OK;
    if (p->n_att < 0 || (p->n_att > 0 && (!p->att_pos || !p->attention)))
        return wb_err_set(err, WB_ERR_ARG,
                          "probe: n_att = %d needs att_pos and attention buffers", p->n_att);
    for (int i = 0; i < p->n_att; i++)
        if (p->att_pos[i] < pos || p->att_pos[i] >= pos + n)
            return wb_err_set(err, WB_ERR_ARG,
                              "probe: att_pos[%d] = %d is not a position of this call [%d, %d)",
                              i, (int)p->att_pos[i], pos, pos + n);
    (void)m;
    return WB_OK;
}

static double score(const float *q, const float *k, int hd, double scale) {
    double d = 0;
    for (int i = 0; i < hd; i++) d += (double)q[i] * k[i];
    return d * scale;
}

/* Attention of the query at absolute position p of one head: w[0..T) (0 outside the keys it
 * sees). q [hd] post-RoPE; key row j at k + j * ld. Three passes over the dot products (max,
 * sum, weights) instead of a scratch row: this runs only when asked, and needs no allocation. */
static void attention_row(float *w, int T, const float *q, const float *k, size_t ld, int hd,
                          int p, int window) {
    const int j0 = window && p - window + 1 > 0 ? p - window + 1 : 0;
    const double scale = 1.0 / sqrt((double)hd);
    double mx = -HUGE_VAL, sum = 0;
    for (int j = 0; j < T; j++) w[j] = 0.0f;
    for (int j = j0; j <= p; j++) mx = fmax(mx, score(q, k + (size_t)j * ld, hd, scale));
    for (int j = j0; j <= p; j++) sum += exp(score(q, k + (size_t)j * ld, hd, scale) - mx);
    for (int j = j0; j <= p; j++) w[j] = (float)(exp(score(q, k + (size_t)j * ld, hd, scale) - mx) / sum);
}

void wb_probe_layer(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, const int *row0,
                    int layer, const float *x, const float *pending, const float *q, size_t ldq,
                    int window) {
    const wb_config *c = &m->cfg;
    const int C = c->n_embd, NH = c->n_head, hd = c->head_dim, group = NH / c->n_kv_head;
    const size_t kvw = wb_model_kv_width(m);
    for (int s = 0; s < n_seqs; s++) {
        const wb_seq_rows *sq = &seqs[s];
        wb_probe *p = sq->probe;
        if (!p) continue;
        if (p->hidden) { /* hidden [L + 1, n, C]: layer + 1 is the one entering the next layer */
            float *h = p->hidden + (size_t)(layer + 1) * sq->n * C;
            memcpy(h, x + (size_t)row0[s] * C, (size_t)sq->n * C * sizeof(float));
            if (pending)
                for (int t = 0; t < sq->n; t++)
                    for (int i = 0; i < C; i++) h[(size_t)t * C + i] += pending[i];
        }
        if (layer < 0 || !q || p->n_att == 0) continue;
        const int T = sq->pos + sq->n;
        const float *kl = sq->k + (size_t)layer * sq->cache_ctx * kvw;
        for (int a = 0; a < p->n_att; a++) {
            const int pa = p->att_pos[a], t = pa - sq->pos;
            const float *qr = q + (size_t)(row0[s] + t) * ldq;
            /* attention [L, n_att, NH, T] */
            float *w = p->attention + (((size_t)layer * p->n_att + a) * NH) * (size_t)T;
            for (int h = 0; h < NH; h++)
                attention_row(w + (size_t)h * T, T, qr + (size_t)h * hd,
                              kl + (size_t)(h / group) * hd, kvw, hd, pa, window);
        }
    }
}

wb_status wb_model_head(const wb_model *m, const float *x, int n, float *logits, wb_err *err) {
    if (!m || !x || !logits) return wb_err_set(err, WB_ERR_ARG, "wb_model_head: NULL argument");
    if (n < 1 || n > (1 << 20))
        return wb_err_set(err, WB_ERR_ARG, "wb_model_head: n = %d rows", n);
    float *xn = malloc((size_t)n * m->cfg.n_embd * sizeof *xn);
    if (!xn) return wb_err_set(err, WB_ERR_NOMEM, "wb_model_head: out of memory");
    m->family->head(m, x, n, xn, logits);
    free(xn);
    return WB_OK;
}
