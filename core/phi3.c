/* phi3.c - the Phi-3 family (model_type phi3, Phi3ForCausalLM): its config keys, its fused
 * weights, LongRoPE; the block itself is llama.c's (wb_llama_forward).
 *
 * Differences from Llama, as transformers' Phi3 modeling code has them:
 *   self_attn.qkv_proj.weight [(NH + 2 NKV) hd, C]: rows q, then k, then v (no biases)
 *   mlp.gate_up_proj.weight   [2F, C]: rows gate, then up; mlp = down(silu(gate) * up)
 *   rope_scaling {"type": "longrope" (older configs "su"), "short_factor": [hd/2],
 *                 "long_factor": [hd/2]} with top-level original_max_position_embeddings:
 *     inv_freq[i] = 1 / (factor[i] * rope_theta^(2i/hd)), long_factor when the sequence is longer
 *     than original_max_position_embeddings, else short_factor; cos and sin times
 *     attention_factor = sqrt(1 + ln(s) / ln(original)), s = max_position_embeddings / original,
 *     (1 when s <= 1; rope_scaling.attention_factor overrides it as in newer transformers).
 *   sliding_window (optional): query p attends to keys p - W + 1 .. p.
 * The fused matrices are loaded whole and split into row ranges (wb_mat_rows): views, no copy.
 *
 * Which factor set a KV cache uses: transformers picks it per call from the largest position in
 * that call, so a cached generation that crosses original_max_position_embeddings would mix
 * keys rotated with both sets. Here the choice is fixed per cache: long_factor when the cache
 * (the session's n_ctx, or the n tokens of an uncached forward) is longer than
 * original_max_position_embeddings, else short_factor. An uncached forward of n tokens therefore
 * matches transformers exactly; a session behaves as one forward over its whole context.
 */
#include "llama_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* m->hparams (one malloc block): the sliding window and LongRoPE tables. */
typedef struct phi3_hparams {
    int longrope;
    int32_t original_max;
    int32_t sliding_window;      /* 0: none */
    float attention_factor;
    float *short_inv, *long_inv; /* [hd/2] each, inside this block */
} phi3_hparams;

/* A list of hd/2 positive finite factors at rope_scaling.<key>. */
static wb_status read_factors(const cJSON *rs, const char *key, const char *name, int half,
                              float *out, wb_err *err) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(rs, key);
    if (!cJSON_IsArray(a))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"rope_scaling.%s\" must be an array of %d numbers", name, key,
                          half);
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        if (i >= half || !cJSON_IsNumber(e) || !isfinite(e->valuedouble) ||
            !(e->valuedouble > 0) || e->valuedouble > 1e6)
            break;
        out[i] = (float)e->valuedouble;
    }
    if (i != half || cJSON_GetArraySize(a) != half)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"rope_scaling.%s\" must be an array of %d positive numbers "
                          "(head_dim / 2)", name, key, half);
    return WB_OK;
}

static wb_status parse_config(const cJSON *root, const char *mt, const char *name,
                              wb_config *out, void **hparams, wb_err *err) {
    wb_config c;
    wb_status s;
    int p;
    *hparams = NULL;
    if ((s = wb_llama_parse_common(root, mt, name, &c, err))) return s;
    c.qkv_bias = c.o_bias = c.mlp_bias = 0;
    c.rope_scaling = WB_ROPE_NONE;
    const int half = c.head_dim / 2;
    phi3_hparams *hp = calloc(1, sizeof *hp + 2 * (size_t)half * sizeof(float));
    if (!hp) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    hp->short_inv = (float *)(hp + 1);
    hp->long_inv = hp->short_inv + half;
    hp->attention_factor = 1.0f;
    hp->original_max = 4096; /* Phi3Config's default */
    if ((s = wb_cfg_int(root, "original_max_position_embeddings", name, mt, 0, 1, WB_CAP_POS,
                        &hp->original_max, &p, err)))
        goto fail;
    if ((s = wb_cfg_int(root, "sliding_window", name, mt, 0, 1, WB_CAP_POS, &hp->sliding_window,
                        &p, err)))
        goto fail;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        if (!cJSON_IsObject(rs)) {
            s = wb_err_set(err, WB_ERR_FORMAT, "%s: key \"rope_scaling\" must be null or an object",
                           name);
            goto fail;
        }
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *tn = cJSON_IsString(t) ? t->valuestring : NULL;
        if (!tn || (strcmp(tn, "longrope") && strcmp(tn, "su") && strcmp(tn, "default"))) {
            s = wb_err_set(err, WB_ERR_FORMAT,
                           "%s: key \"rope_scaling.type\" = %.40s is not supported (longrope, "
                           "default)", name, tn ? tn : "(not a string)");
            goto fail;
        }
        if (strcmp(tn, "default") != 0) {
            float *sf = hp->short_inv, *lf = hp->long_inv; /* factors first, tables below */
            if ((s = read_factors(rs, "short_factor", name, half, sf, err)) ||
                (s = read_factors(rs, "long_factor", name, half, lf, err)))
                goto fail;
            hp->longrope = 1;
            const double ratio = (double)c.max_position_embeddings / hp->original_max;
            hp->attention_factor =
                ratio <= 1.0 ? 1.0f : (float)sqrt(1.0 + log(ratio) / log((double)hp->original_max));
            if ((s = wb_cfg_pos_num(rs, "attention_factor", "rope_scaling.", name, 0, 1e6,
                                    &hp->attention_factor, err)))
                goto fail;
            /* in float32 as transformers: 1 / (factor * base ** (2i / hd)) */
            for (int i = 0; i < half; i++) {
                const float b = powf(c.rope_theta, (float)(2 * i) / (float)c.head_dim);
                sf[i] = 1.0f / (sf[i] * b);
                lf[i] = 1.0f / (lf[i] * b);
            }
        }
    }
    if ((s = wb_llama_check_size(&c, name, err))) goto fail;
    *out = c;
    *hparams = hp;
    return WB_OK;
fail:
    free(hp);
    return s;
}

/* LongRoPE angles for one sequence: the factor set follows its cache length (see the top). */
static void phi3_rope(const wb_model *m, const wb_seq_rows *sq, float *cs) {
    const phi3_hparams *hp = m->hparams;
    const float *inv = sq->cache_ctx > hp->original_max ? hp->long_inv : hp->short_inv;
    wb_rope_angles(inv, hp->attention_factor, m->cfg.head_dim, sq->pos, sq->n, cs);
}

static wb_status load(wb_model *m, wb_weights *w, const wb_model_params *p, wb_err *err) {
    const wb_config *c = &m->cfg;
    const int64_t V = c->vocab_size, C = c->n_embd, F = c->n_inner, L = c->n_layer;
    const int64_t Q = (int64_t)c->n_head * c->head_dim, KV = (int64_t)c->n_kv_head * c->head_dim;
    wb_want *wants = calloc((size_t)(3 + 6 * L), sizeof *wants);
    wb_mat *fused = calloc((size_t)(2 * L), sizeof *fused); /* [L] qkv, then [L] gate_up */
    wb_llama *ll = NULL;
    wb_status s = wants && fused ? wb_llama_alloc(c, &ll, err)
                                 : wb_err_set(err, WB_ERR_NOMEM, "loading weights: out of memory");
    if (s) goto done;
    int n = 0;
#define WANT(field, ptr, a, b, fmt, ...)                                                         \
    do {                                                                                          \
        snprintf(wants[n].name, sizeof wants[n].name, fmt, __VA_ARGS__);                          \
        wants[n].d0 = (a);                                                                        \
        wants[n].d1 = (b);                                                                        \
        wants[n++].field = (ptr);                                                                 \
    } while (0)
    WANT(mat, &ll->embed, V, C, "%s", "model.embed_tokens.weight");
    for (int l = 0; l < (int)L; l++) {
        wb_llama_layer *y = &ll->layers[l];
        WANT(vec, &y->attn_norm, C, 0, "model.layers.%d.input_layernorm.weight", l);
        WANT(mat, &fused[l], Q + 2 * KV, C, "model.layers.%d.self_attn.qkv_proj.weight", l);
        WANT(mat, &y->wo, C, Q, "model.layers.%d.self_attn.o_proj.weight", l);
        WANT(vec, &y->mlp_norm, C, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        WANT(mat, &fused[L + l], 2 * F, C, "model.layers.%d.mlp.gate_up_proj.weight", l);
        WANT(mat, &y->wd, C, F, "model.layers.%d.mlp.down_proj.weight", l);
    }
    WANT(vec, &ll->norm, C, 0, "%s", "model.norm.weight");
    if (!c->tie_word_embeddings) WANT(mat, &ll->head, V, C, "%s", "lm_head.weight");
#undef WANT
    if ((s = wb_weights_load(w, wants, n, !p->compute_f32, &ll->store, &m->n_params, err)))
        goto done;
    for (int l = 0; l < (int)L; l++) {
        wb_llama_layer *y = &ll->layers[l];
        y->wq = wb_mat_rows(&fused[l], 0, (int)Q);
        y->wk = wb_mat_rows(&fused[l], (int)Q, (int)(Q + KV));
        y->wv = wb_mat_rows(&fused[l], (int)(Q + KV), (int)(Q + 2 * KV));
        y->wg = wb_mat_rows(&fused[L + l], 0, (int)F);
        y->wu = wb_mat_rows(&fused[L + l], (int)F, (int)(2 * F));
    }
    if (c->tie_word_embeddings) ll->head = ll->embed;
    const phi3_hparams *hp = m->hparams;
    ll->sliding_window = hp->sliding_window;
    if (hp->longrope) ll->rope = phi3_rope;
    m->impl = ll;
    ll = NULL;
done:
    free(wants);
    free(fused);
    wb_llama_free(ll);
    return s;
}

const wb_family wb_family_phi3 = {
    .name = "phi3",
    .model_types = (const char *const[]){"phi3", NULL},
    .architectures = (const char *const[]){"Phi3ForCausalLM", NULL},
    .parse_config = parse_config,
    .load = load,
    .free = wb_llama_free,
    .forward = wb_llama_forward,
    .decode = NULL,
    .kv_width = wb_llama_kv_width,
    .max_ctx = wb_llama_max_ctx,
    .weight_bytes = wb_llama_weight_bytes,
    .head = wb_llama_head,
    .store = wb_llama_store,
};
