/* llama.c - the Llama family (model_type llama, qwen2, mistral): config keys, weights, and the
 * Llama-style decoder block's forward pass (also run by core/phi3.c).
 *
 * Block (pre-norm, as transformers' LlamaDecoderLayer), per position p, x the residual [C]:
 *   h = rmsnorm(x) * input_layernorm
 *   q = h Wq^T (+bq), k = h Wk^T (+bk), v = h Wv^T (+bv)      NH query heads, NKV kv heads of hd
 *   q, k = rope(q, p), rope(k, p)                             HF "rotate half" pairs (i, i + hd/2)
 *   a = softmax(q k^T / sqrt(hd), causal) v                   query head h reads kv head h / (NH/NKV)
 *   x += a Wo^T (+bo)
 *   h = rmsnorm(x) * post_attention_layernorm
 *   x += (silu(h Wg^T) * (h Wu^T)) Wd^T                       (+ biases with mlp_bias)
 * then logits = (rmsnorm(x) * norm) head^T, head = embed_tokens (tied) or lm_head.
 *
 * Weights: BF16 matrices stay in the mapped safetensors file and go through the BF16 kernels
 * (F32 accumulation); everything else, or everything with compute_f32, is converted to F32 in one
 * aligned block (core/weights.c). Matrices are HF nn.Linear [out, in], already the layout the
 * GEMV rows and the GEMM (B transposed) want.
 *
 * The forward takes the rows of several sequences stacked: every matrix is one wb_mat_mul over
 * all rows (the weights stream once per step for a whole batch of decoding sequences), while
 * RoPE, the K/V cache writes and attention run per sequence at its own positions. The K/V cache
 * rows are NKV*hd wide (GQA keeps only the kv heads). One code path serves prefill, decode and
 * batched decode.
 */
#include "llama_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Attention work items are (sequence, KV head, block of ATT_QB queries). */
#define ATT_QB 16

/* ------------------------------------------------------------------------------- config */

/* transformers' LlamaConfig / Qwen2Config / MistralConfig keys, defaults included, so a config
 * that leaves a key out means what it means to Hugging Face. Keys that would change the
 * computation in a way this forward pass does not implement (sliding windows, other RoPE
 * scalings, other activations, quantized weights) are errors naming the key, never ignored. */

wb_status wb_llama_parse_common(const cJSON *root, const char *mt, const char *name,
                                wb_config *out, wb_err *err) {
    wb_config c = {0};
    wb_status s;
    int p;
    if ((s = wb_cfg_int(root, "vocab_size", name, mt, 1, 1, WB_CAP_VOCAB, &c.vocab_size, &p, err)) ||
        (s = wb_cfg_int(root, "hidden_size", name, mt, 1, 1, WB_CAP_EMBD, &c.n_embd, &p, err)) ||
        (s = wb_cfg_int(root, "intermediate_size", name, mt, 1, 1, WB_CAP_INNER, &c.n_inner, &p,
                        err)) ||
        (s = wb_cfg_int(root, "num_hidden_layers", name, mt, 1, 1, WB_CAP_LAYER, &c.n_layer, &p,
                        err)) ||
        (s = wb_cfg_int(root, "num_attention_heads", name, mt, 1, 1, WB_CAP_HEAD, &c.n_head, &p,
                        err)) ||
        (s = wb_cfg_int(root, "max_position_embeddings", name, mt, 1, 1, WB_CAP_POS,
                        &c.max_position_embeddings, &p, err)))
        return s;
    c.n_ctx = c.max_position_embeddings;
    c.n_kv_head = c.n_head;
    if ((s = wb_cfg_int(root, "num_key_value_heads", name, mt, 0, 1, WB_CAP_HEAD, &c.n_kv_head,
                        &p, err)))
        return s;
    if (c.n_head % c.n_kv_head != 0)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"num_attention_heads\" = %d is not a multiple of "
                          "\"num_key_value_heads\" = %d", name, c.n_head, c.n_kv_head);
    if ((s = wb_cfg_int(root, "head_dim", name, mt, 0, 2, 1024, &c.head_dim, &p, err))) return s;
    if (!p) {
        if (c.n_embd % c.n_head != 0)
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: key \"hidden_size\" = %d is not divisible by "
                              "\"num_attention_heads\" = %d (and there is no \"head_dim\")",
                              name, c.n_embd, c.n_head);
        c.head_dim = c.n_embd / c.n_head;
    }
    if (c.head_dim % 2 != 0)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: head dimension %d is odd; rotary embedding needs pairs "
                          "(\"head_dim\" or hidden_size / num_attention_heads)", name, c.head_dim);
    c.layer_norm_epsilon = 1e-6f;
    c.rope_theta = 10000.0f;
    if ((s = wb_cfg_pos_num(root, "rms_norm_eps", "", name, 0, 1.0, &c.layer_norm_epsilon, err)) ||
        (s = wb_cfg_pos_num(root, "rope_theta", "", name, 0, 1e12, &c.rope_theta, err)) ||
        (s = wb_cfg_bool(root, "tie_word_embeddings", name, 0, &c.tie_word_embeddings, err)))
        return s;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"hidden_act\" = %s is not supported (silu)", name,
                          cJSON_IsString(act) ? act->valuestring : "(not a string)");
    if (cJSON_GetObjectItemCaseSensitive(root, "quantization_config"))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"quantization_config\": quantized checkpoints are not "
                          "supported (F32, F16, BF16 weights)", name);
    const cJSON *prf = cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor");
    if (prf && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"partial_rotary_factor\" must be 1 (rotary embedding over the "
                          "whole head)", name);
    *out = c;
    return WB_OK;
}

wb_status wb_llama_check_size(const wb_config *c, const char *name, wb_err *err) {
    int64_t V = c->vocab_size, C = c->n_embd, L = c->n_layer, F = c->n_inner;
    int64_t Q = (int64_t)c->n_head * c->head_dim, KV = (int64_t)c->n_kv_head * c->head_dim;
    int64_t per_layer = 2 * C + C * (Q + 2 * KV) + Q * C + 3 * C * F +
                        (c->qkv_bias ? Q + 2 * KV : 0) + (c->o_bias ? C : 0) +
                        (c->mlp_bias ? 2 * F + C : 0);
    int64_t total = V * C + L * per_layer + C + (c->tie_word_embeddings ? 0 : V * C);
    if (total > WB_CAP_PARAMS)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: sizes (vocab_size, hidden_size, num_hidden_layers, "
                          "intermediate_size, heads) give %lld parameters, above the limit of %lld",
                          name, (long long)total, (long long)WB_CAP_PARAMS);
    return WB_OK;
}

static wb_status rope_scaling(const cJSON *root, const char *name, wb_config *c, wb_err *err) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    c->rope_scaling = WB_ROPE_NONE;
    if (!rs || cJSON_IsNull(rs)) return WB_OK;
    if (!cJSON_IsObject(rs))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"rope_scaling\" must be null or an object",
                          name);
    /* transformers reads "rope_type", older configs say "type" */
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!t || !cJSON_IsString(t))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"rope_scaling.rope_type\" must be a string",
                          name);
    if (!strcmp(t->valuestring, "default")) return WB_OK;
    if (strcmp(t->valuestring, "llama3") != 0)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"rope_scaling.rope_type\" = \"%.40s\" is not supported "
                          "(default, llama3)", name, t->valuestring);
    wb_status s;
    int p;
    c->rope_scaling = WB_ROPE_LLAMA3;
    if ((s = wb_cfg_pos_num(rs, "factor", "rope_scaling.", name, 1, 1e6, &c->rope_factor, err)) ||
        (s = wb_cfg_pos_num(rs, "low_freq_factor", "rope_scaling.", name, 1, 1e6,
                            &c->rope_low_freq_factor, err)) ||
        (s = wb_cfg_pos_num(rs, "high_freq_factor", "rope_scaling.", name, 1, 1e6,
                            &c->rope_high_freq_factor, err)) ||
        (s = wb_cfg_int(rs, "original_max_position_embeddings", name, "llama3", 1, 1, WB_CAP_POS,
                        &c->rope_original_max_pos, &p, err)))
        return s;
    if (!(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"rope_scaling.high_freq_factor\" must be larger than "
                          "\"rope_scaling.low_freq_factor\"", name);
    return WB_OK;
}

static wb_status parse_config(const cJSON *root, const char *mt, const char *name,
                              wb_config *out, void **hparams, wb_err *err) {
    wb_config c;
    wb_status s;
    *hparams = NULL;
    const int qwen2 = !strcmp(mt, "qwen2"), mistral = !strcmp(mt, "mistral");
    if ((s = wb_llama_parse_common(root, mt, name, &c, err)) ||
        (s = rope_scaling(root, name, &c, err)))
        return s;
    /* Biases: Qwen2 always has q/k/v biases and no o_proj bias (Qwen2Attention hard-codes them);
     * Llama and Mistral follow attention_bias (all four) and mlp_bias. */
    int32_t ab = 0, mb = 0;
    if ((s = wb_cfg_bool(root, "attention_bias", name, 0, &ab, err)) ||
        (s = wb_cfg_bool(root, "mlp_bias", name, 0, &mb, err)))
        return s;
    if (qwen2) {
        c.qkv_bias = 1;
        c.o_bias = 0;
        c.mlp_bias = 0;
    } else {
        c.qkv_bias = c.o_bias = ab;
        c.mlp_bias = mistral ? 0 : mb;
    }
    /* Sliding-window attention is refused for these model types: Qwen2 and Mistral use it with
     * per-layer rules this family does not implement. Qwen2 configs carry a sliding_window value
     * but only use it with use_sliding_window = true. */
    int32_t usw = 0;
    if ((s = wb_cfg_bool(root, "use_sliding_window", name, 0, &usw, err))) return s;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (qwen2 ? usw : (sw && !cJSON_IsNull(sw)))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"%s\" asks for sliding-window attention, which is not "
                          "supported (model_type \"%s\" is supported with full attention only)",
                          name, qwen2 ? "use_sliding_window" : "sliding_window", mt);
    if ((s = wb_llama_check_size(&c, name, err))) return s;
    *out = c;
    return WB_OK;
}

/* ------------------------------------------------------------------------------ weights */

void wb_llama_free(void *impl) {
    wb_llama *ll = impl;
    if (!ll) return;
    wb_weight_store_free(&ll->store);
    free(ll->layers);
    free(ll->inv_freq);
    free(ll);
}

size_t wb_llama_kv_width(const wb_config *c) { return (size_t)c->n_kv_head * (size_t)c->head_dim; }
int32_t wb_llama_max_ctx(const wb_config *c) { return c->max_position_embeddings; }
size_t wb_llama_weight_bytes(const wb_model *m) {
    return wb_weight_store_bytes(&((const wb_llama *)m->impl)->store);
}
const wb_weight_store *wb_llama_store(const wb_model *m) {
    return &((const wb_llama *)m->impl)->store;
}

/* RoPE inverse frequencies as transformers computes them, in float32:
 * inv_freq[i] = 1 / theta^(2i/hd), then the llama3 rescaling of _compute_llama3_parameters. */
static void rope_init(const wb_config *c, float *inv) {
    const int half = c->head_dim / 2;
    for (int i = 0; i < half; i++)
        inv[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
    if (c->rope_scaling != WB_ROPE_LLAMA3) return;
    const float factor = c->rope_factor, lo = c->rope_low_freq_factor,
                hi = c->rope_high_freq_factor, old = (float)c->rope_original_max_pos;
    const float low_wavelen = old / lo, high_wavelen = old / hi;
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    for (int i = 0; i < half; i++) {
        const float wavelen = two_pi / inv[i];
        float f = wavelen > low_wavelen ? inv[i] / factor : inv[i];
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
            const float smooth = (old / wavelen - lo) / (hi - lo);
            f = (1.0f - smooth) * f / factor + smooth * f;
        }
        inv[i] = f;
    }
}

wb_status wb_llama_alloc(const wb_config *c, wb_llama **out, wb_err *err) {
    wb_llama *ll = calloc(1, sizeof *ll);
    if (!ll || !(ll->layers = calloc((size_t)c->n_layer, sizeof *ll->layers)) ||
        !(ll->inv_freq = malloc((size_t)(c->head_dim / 2) * sizeof(float)))) {
        wb_llama_free(ll);
        return wb_err_set(err, WB_ERR_NOMEM, "loading weights: out of memory");
    }
    rope_init(c, ll->inv_freq);
    *out = ll;
    return WB_OK;
}

static wb_status load(wb_model *m, wb_weights *w, const wb_model_params *p, wb_err *err) {
    const wb_config *c = &m->cfg;
    const int64_t V = c->vocab_size, C = c->n_embd, F = c->n_inner, L = c->n_layer;
    const int64_t Q = (int64_t)c->n_head * c->head_dim, KV = (int64_t)c->n_kv_head * c->head_dim;
    wb_want *wants = calloc((size_t)(3 + 16 * L), sizeof *wants);
    wb_llama *ll = NULL;
    wb_status s = wants ? wb_llama_alloc(c, &ll, err)
                        : wb_err_set(err, WB_ERR_NOMEM, "loading weights: out of memory");
    if (s) goto done;
    int n = 0;
#define WANT_V(ptr, d, fmt, ...)                                                                 \
    do {                                                                                          \
        snprintf(wants[n].name, sizeof wants[n].name, fmt, __VA_ARGS__);                          \
        wants[n].d0 = (d);                                                                        \
        wants[n++].vec = (ptr);                                                                   \
    } while (0)
#define WANT_M(ptr, a, b, fmt, ...)                                                              \
    do {                                                                                          \
        snprintf(wants[n].name, sizeof wants[n].name, fmt, __VA_ARGS__);                          \
        wants[n].d0 = (a);                                                                        \
        wants[n].d1 = (b);                                                                        \
        wants[n++].mat = (ptr);                                                                   \
    } while (0)
    WANT_M(&ll->embed, V, C, "%s", "model.embed_tokens.weight");
    for (int l = 0; l < (int)L; l++) {
        wb_llama_layer *y = &ll->layers[l];
        const char *pre = "model.layers";
        WANT_V(&y->attn_norm, C, "%s.%d.input_layernorm.weight", pre, l);
        WANT_M(&y->wq, Q, C, "%s.%d.self_attn.q_proj.weight", pre, l);
        WANT_M(&y->wk, KV, C, "%s.%d.self_attn.k_proj.weight", pre, l);
        WANT_M(&y->wv, KV, C, "%s.%d.self_attn.v_proj.weight", pre, l);
        if (c->qkv_bias) {
            WANT_V(&y->bq, Q, "%s.%d.self_attn.q_proj.bias", pre, l);
            WANT_V(&y->bk, KV, "%s.%d.self_attn.k_proj.bias", pre, l);
            WANT_V(&y->bv, KV, "%s.%d.self_attn.v_proj.bias", pre, l);
        }
        WANT_M(&y->wo, C, Q, "%s.%d.self_attn.o_proj.weight", pre, l);
        if (c->o_bias) WANT_V(&y->bo, C, "%s.%d.self_attn.o_proj.bias", pre, l);
        WANT_V(&y->mlp_norm, C, "%s.%d.post_attention_layernorm.weight", pre, l);
        WANT_M(&y->wg, F, C, "%s.%d.mlp.gate_proj.weight", pre, l);
        WANT_M(&y->wu, F, C, "%s.%d.mlp.up_proj.weight", pre, l);
        WANT_M(&y->wd, C, F, "%s.%d.mlp.down_proj.weight", pre, l);
        if (c->mlp_bias) {
            WANT_V(&y->bg, F, "%s.%d.mlp.gate_proj.bias", pre, l);
            WANT_V(&y->bu, F, "%s.%d.mlp.up_proj.bias", pre, l);
            WANT_V(&y->bd, C, "%s.%d.mlp.down_proj.bias", pre, l);
        }
    }
    WANT_V(&ll->norm, C, "%s", "model.norm.weight");
    /* a tied checkpoint may still carry lm_head.weight (a copy); transformers ignores it */
    if (!c->tie_word_embeddings) WANT_M(&ll->head, V, C, "%s", "lm_head.weight");
#undef WANT_V
#undef WANT_M
    if ((s = wb_weights_load(w, wants, n, !p->compute_f32, &ll->store, &m->n_params, err)))
        goto done;
    if (c->tie_word_embeddings) ll->head = ll->embed;
    m->impl = ll;
    ll = NULL;
done:
    free(wants);
    wb_llama_free(ll);
    return s;
}

/* ------------------------------------------------------------------------- forward pass */

typedef struct lin_job {
    float *Y;
    const float *X, *b;
    const wb_mm_run *runs;
    const wb_mat *W;
    int n_runs, residual;
} lin_job;

/* Y[n, out] = X[n, in] . W^T (+ b), or Y += that when residual, over thread tid's output rows,
 * each run of stacked rows in its mode (wb_mm_runs: prompts through the packed GEMM, decode rows
 * and short prompts through the GEMV kernels). */
static void lin_part(const wb_mm_run *runs, int n_runs, float *Y, const float *X,
                     const wb_mat *W, const float *b, int residual, int tid, int nt) {
    int r0, r1;
    wb_split_rows(W->rows, tid, nt, &r0, &r1);
    wb_mat_mul_runs(Y, X, runs, n_runs, W, b, r0, r1, residual);
}

static void lin_worker(void *arg, int tid, int nt) {
    const lin_job *j = arg;
    lin_part(j->runs, j->n_runs, j->Y, j->X, j->W, j->b, j->residual, tid, nt);
}

/* One matrix on its own pool job (the head, after the last layer's job). */
static wb_status linear(const wb_model *m, int nt, float *Y, const float *X,
                        const wb_mm_run *runs, int n_runs, const wb_mat *W, const float *b,
                        int residual, wb_err *err) {
    lin_job j = {Y, X, b, runs, W, n_runs, residual};
    return wb_pool_slot_run(wb_model_pool(m), nt, lin_worker, &j, err);
}

typedef struct att_job {
    const wb_seq_rows *seqs;
    const int *row0, *item0;  /* [n_seqs] first row, [n_seqs + 1] first item of each sequence */
    int n_seqs, n_items;
    const float *q;
    float *att, *sc;
    size_t sc_stride;
    int layer, NH, group, hd, Q, KV, window;
} att_job;

/* Item (sequence s, KV head h, query block b), blocks numbered longest first within a sequence:
 * the group of query heads sharing KV head h goes through the kernel together, so its keys and
 * values are read (and packed) once for all of them. */
static void att_item(const att_job *j, int item, int *hint, float *sc) {
    int s = *hint;
    while (j->item0[s + 1] <= item) s++;
    *hint = s;
    const wb_seq_rows *sq = &j->seqs[s];
    const int NKV = j->NH / j->group;
    const int local = item - j->item0[s], nblk = (sq->n + ATT_QB - 1) / ATT_QB;
    const int h = local % NKV, q0 = (nblk - 1 - local / NKV) * ATT_QB;
    const int nq = sq->n - q0 < ATT_QB ? sq->n - q0 : ATT_QB;
    const size_t lo = (size_t)j->layer * sq->cache_ctx * j->KV + (size_t)h * j->hd;
    const float *kl = sq->k + lo, *vl = sq->v + lo;
    const size_t r = (size_t)j->row0[s] + q0, c0 = (size_t)h * j->group * j->hd;
    float *o = j->att + r * j->Q + c0;
    const float *qq = j->q + r * j->Q + c0;
    const int p0 = sq->pos + q0;
    if (nq == 1) { /* decode: the one-query kernel per head, query p sees p - W + 1 .. p */
        const int k0 = j->window && p0 - j->window + 1 > 0 ? p0 - j->window + 1 : 0;
        for (int g = 0; g < j->group; g++)
            wb_attention_forward(o + (size_t)g * j->hd, qq + (size_t)g * j->hd,
                                 kl + (size_t)k0 * j->KV, vl + (size_t)k0 * j->KV, (size_t)j->KV,
                                 p0 - k0, j->hd, sc);
    } else {
        wb_attention_block_forward(o, (size_t)j->Q, qq, (size_t)j->Q, kl, vl, (size_t)j->KV, p0,
                                   nq, j->group, j->hd, j->window, sc);
    }
}

static void att_worker(void *arg, int tid, int nt) {
    const att_job *j = arg;
    float *sc = j->sc + (size_t)tid * j->sc_stride;
    int hint = 0;
    for (int it = tid; it < j->n_items; it += nt) att_item(j, it, &hint, sc);
}

/* Rotate-half RoPE over nh heads of hd in each of n rows (ld apart): row t uses
 * cs[t] = cos[hd/2] then sin[hd/2]. */
static void rope_rows(float *x, size_t ld, int n, int nh, int hd, const float *cs) {
    const int h = hd / 2;
    for (int t = 0; t < n; t++) {
        const float *co = cs + (size_t)t * hd, *si = co + h;
        for (int k = 0; k < nh; k++) {
            float *v = x + (size_t)t * ld + (size_t)k * hd;
            for (int i = 0; i < h; i++) {
                const float a = v[i], b = v[i + h];
                v[i] = a * co[i] - b * si[i];
                v[i + h] = b * co[i] + a * si[i];
            }
        }
    }
}

void wb_rope_angles(const float *inv_freq, float scale, int hd, int pos, int n, float *cs) {
    /* angles in float32, as transformers' rotary embedding forms position * inv_freq */
    for (int t = 0; t < n; t++)
        for (int i = 0; i < hd / 2; i++) {
            const float a = (float)(pos + t) * inv_freq[i];
            float co = (float)cos((double)a), si = (float)sin((double)a);
            if (scale != 1.0f) co *= scale, si *= scale;
            cs[(size_t)t * hd + i] = co;
            cs[(size_t)t * hd + hd / 2 + i] = si;
        }
}

/* One layer on every pool thread, phases separated by barriers (as gpt2.c's fwd_worker): RMSNorm,
 * RoPE with the K/V cache writes, and SwiGLU by rows; matrices by output rows (wb_split_rows);
 * attention by items. One pool wake per layer instead of one per matrix. Who computes a value
 * changes with the thread count, never the order of the sums that make it, so results stay
 * bit-identical for every thread count. */
typedef struct layer_job {
    const wb_model *m;
    const wb_llama_layer *y;
    const wb_seq_rows *seqs;
    const int *row0;
    const wb_mm_run *runs; /* [n_runs] the stacked rows by matrix-product mode */
    int n_runs;
    int n_seqs, n, layer, att_threads; /* att_threads 1: attention on thread 0 only */
    float *x, *xn, *qb, *kb, *vb, *att, *g, *u;
    const float *cs;
    att_job *aj;
    wb_pool *pool;
    float *P;          /* [n, max(C, Q, F)] packed (or quantized) prompt inputs (lin_phase), or NULL */
    int n_prompt;      /* runs of mode WB_MM_PROMPT */
    atomic_int *next;  /* [4] work counters of the phases, zeroed before each layer */
    /* The last layer when only each sequence's last position is asked for (wb_llama_forward):
     * NULL, or the attention of each sequence's last query block alone, after which every
     * sequence's last row of x and att moves to row s and the layer goes on over those n_seqs
     * rows in sel_runs (each sequence's mode kept) */
    att_job *sel_aj;
    const wb_mm_run *sel_runs;
    int n_sel_runs;
} layer_job;

/* One phase's matrices, all reading the same X[n, in] (q/k/v and gate/up read xn). */
typedef struct lin_out {
    const wb_mat *W;
    const float *b;
    float *Y;
    int residual;
} lin_out;

enum { LIN_ITEM = 32 }; /* output rows per shared-out work item of the prompt GEMM */

static int lin_packs(const layer_job *j, const lin_out *o, int no) {
    if (!j->P || !j->n_prompt) return 0;
    for (int i = 0; i < no; i++)
        if (wb_mat_takes_xpack(o[i].W)) return 1;
    return 0;
}

/* Whether a phase's inputs are quantized once and shared: a prompt in the call, and every matrix
 * of the phase quantized (P then holds the quantized rows; a phase mixing them with F32 / BF16
 * matrices packs P for those and each quantized product quantizes its own copy). */
static int lin_quant_shares(const layer_job *j, const lin_out *o, int no) {
    if (!j->P || !j->n_prompt || !wb_mat_qact_bytes(o[0].W->cols)) return 0;
    for (int i = 0; i < no; i++)
        if (!wb_mat_takes_qact(o[i].W)) return 0;
    return 1;
}

/* The bytes of a phase's inputs grouped once for the tile kernel (wb_mat_qgroup), every run's copy
 * end to end in P, or 0 when the phase cannot: every run a prompt of 2+ rows and every matrix of
 * one type taking that copy (AVX-512, Q8_0 / Q4_0 in the tile layout). At most P's size: a row's
 * copy is 1.25 in bytes, P holds 4 in. */
static size_t lin_quant_groups(const layer_job *j, const lin_out *o, int no) {
    if (!j->P || j->n_prompt != j->n_runs) return 0;
    size_t total = 0;
    for (int r = 0; r < j->n_runs; r++) {
        const size_t gb = wb_mat_qgroup_bytes(o[0].W, j->runs[r].n);
        if (!gb) return 0;
        for (int i = 1; i < no; i++)
            if (o[i].W->dtype != o[0].W->dtype || wb_mat_qgroup_bytes(o[i].W, j->runs[r].n) != gb) return 0;
        total += gb;
    }
    return total;
}

/* The matrices of one phase on thread tid of nt. A prompt's inputs are packed once, the blocks
 * shared out, behind a barrier, and every F32 / BF16 matrix of the phase reads that copy; their
 * output rows are then handed out LIN_ITEM at a time from one counter per phase (q, k and v
 * together: 896 + 128 + 128 rows on Qwen2.5-0.5B), so a thread that was slow (or descheduled)
 * takes fewer. Everything else (decode rows, short prompts, quantized weights) is split by rows
 * as before. Which thread computes an output never changes its chain, so the bits stay those
 * of one thread. */
static void lin_phase(const layer_job *j, int phase, const float *X, const lin_out *o, int no,
                      int tid, int nt) {
    const int packs = lin_packs(j, o, no), in = o[0].W->cols;
    const size_t xrow = wb_mat_xrow(in);
    if (lin_quant_groups(j, o, no)) {
        /* the same, grouped once for the tile kernel instead of regrouped by each matrix's
         * product on each thread; the threads quantize rows [t0, t1) of the call, each run's
         * share into its own copy */
        const int t0 = (int)((int64_t)j->n * tid / nt), t1 = (int)((int64_t)j->n * (tid + 1) / nt);
        char *G = (char *)j->P;
        for (int r = 0; r < j->n_runs; r++) {
            const wb_mm_run *u = &j->runs[r];
            const int a = t0 > u->row0 ? t0 - u->row0 : 0, e = t1 - u->row0 < u->n ? t1 - u->row0 : u->n;
            if (a < e) wb_mat_qgroup(o[0].W, G, X + (size_t)u->row0 * in, u->n, a, e);
            G += wb_mat_qgroup_bytes(o[0].W, u->n);
        }
        wb_pool_barrier(j->pool);
        /* the output rows of every run's matrices end to end, handed out in guided chunks as
         * for the packed matrices below (a multiple of LIN_ITEM rows, so of the tiles' 16, never
         * across a matrix), so a thread that was descheduled takes fewer */
        int per_run = 0;
        for (int i = 0; i < no; i++) per_run += o[i].W->rows;
        const int total = per_run * j->n_runs;
        int cur = atomic_load(&j->next[phase]);
        while (cur < total) {
            int r = cur / per_run, k = cur % per_run, i = 0;
            while (k >= o[i].W->rows) k -= o[i].W->rows, i++;
            const wb_mat *W = o[i].W;
            int size = (total - cur) / (2 * nt) / LIN_ITEM * LIN_ITEM;
            if (size < LIN_ITEM) size = LIN_ITEM;
            if (size > W->rows - k) size = W->rows - k;
            if (!atomic_compare_exchange_weak(&j->next[phase], &cur, cur + size)) continue;
            G = (char *)j->P;
            for (int q = 0; q < r; q++) G += wb_mat_qgroup_bytes(W, j->runs[q].n);
            const wb_mm_run *u = &j->runs[r];
            wb_mat_mul_qgroup(o[i].Y + (size_t)u->row0 * W->rows, G, u->n, W, o[i].b, k, k + size,
                              o[i].residual);
            cur = atomic_load(&j->next[phase]);
        }
        return;
    }
    if (lin_quant_shares(j, o, no)) {
        /* quantized weights: every row of X quantized once for all the phase's matrices (q/k/v,
         * gate/up) and both threads, the rows shared out, behind a barrier; then by rows */
        const size_t ab = wb_mat_qact_bytes(in);
        wb_mat_qact(j->P, X, in, (int)((int64_t)j->n * tid / nt),
                    (int)((int64_t)j->n * (tid + 1) / nt));
        wb_pool_barrier(j->pool);
        for (int i = 0; i < no; i++) {
            const wb_mat *W = o[i].W;
            int r0, r1;
            wb_split_rows(W->rows, tid, nt, &r0, &r1);
            for (int r = 0; r < j->n_runs; r++) {
                const wb_mm_run *u = &j->runs[r];
                wb_mat_mul_qact(o[i].Y + (size_t)u->row0 * W->rows,
                                (const char *)j->P + (size_t)u->row0 * ab, u->n, W, o[i].b, r0,
                                r1, o[i].residual);
            }
        }
        return;
    }
    /* the matrices reading the packed inputs: the first that can and every one packed alike
     * (F32 and BF16 may be packed differently); the others pack their own */
    const wb_mat *pk = NULL;
    for (int i = 0; packs && !pk && i < no; i++)
        if (wb_mat_takes_xpack(o[i].W)) pk = o[i].W;
    if (packs) {
        int total = 0;
        for (int r = 0; r < j->n_runs; r++)
            if (j->runs[r].mode == WB_MM_PROMPT) total += wb_mat_xblocks(j->runs[r].n);
        const int b0 = (int)((int64_t)total * tid / nt), b1 = (int)((int64_t)total * (tid + 1) / nt);
        for (int r = 0, base = 0; r < j->n_runs && base < b1; r++) {
            const wb_mm_run *u = &j->runs[r];
            if (u->mode != WB_MM_PROMPT) continue;
            const int nbk = wb_mat_xblocks(u->n), lo = b0 > base ? b0 - base : 0,
                      hi = b1 - base < nbk ? b1 - base : nbk;
            if (lo < hi)
                wb_mat_xpack(j->P + (size_t)u->row0 * xrow, X + (size_t)u->row0 * in, u->n, in, lo,
                             hi, pk);
            base += nbk;
        }
        wb_pool_barrier(j->pool);
    }
    for (int i = 0; i < no; i++) {
        const wb_mat *W = o[i].W;
        const int dyn = packs && wb_mat_xpack_shares(pk, W);
        int r0, r1;
        wb_split_rows(W->rows, tid, nt, &r0, &r1);
        for (int r = 0; r < j->n_runs; r++) {
            const wb_mm_run *u = &j->runs[r];
            if (dyn && u->mode == WB_MM_PROMPT) continue;
            wb_mat_mul(o[i].Y + (size_t)u->row0 * W->rows, X + (size_t)u->row0 * in, u->n, W,
                       o[i].b, r0, r1, o[i].residual, u->mode);
        }
    }
    if (!packs) return;
    /* the output rows of every prompt run's packed matrices end to end, handed out in guided
     * chunks: a share of what is left (a multiple of LIN_ITEM rows, at least LIN_ITEM, never
     * across a matrix), large first so the GEMM's prefetch of the next panel mostly stays in
     * one thread's chunk, small at the end so the threads finish together */
    int per_run = 0;
    for (int i = 0; i < no; i++)
        if (wb_mat_xpack_shares(pk, o[i].W)) per_run += o[i].W->rows;
    const int total = per_run * j->n_prompt;
    int cur = atomic_load(&j->next[phase]);
    while (cur < total) {
        int p = cur / per_run, k = cur % per_run, r = 0, i = 0;
        for (;; r++)
            if (j->runs[r].mode == WB_MM_PROMPT && p-- == 0) break;
        for (;; i++) {
            if (!wb_mat_xpack_shares(pk, o[i].W)) continue;
            if (k < o[i].W->rows) break;
            k -= o[i].W->rows;
        }
        const wb_mat *W = o[i].W;
        int size = (total - cur) / (2 * nt) / LIN_ITEM * LIN_ITEM;
        if (size < LIN_ITEM) size = LIN_ITEM;
        if (size > W->rows - k) size = W->rows - k;
        if (!atomic_compare_exchange_weak(&j->next[phase], &cur, cur + size)) continue;
        const wb_mm_run *u = &j->runs[r];
        wb_mat_mul_packed(o[i].Y + (size_t)u->row0 * W->rows, j->P + (size_t)u->row0 * xrow, u->n,
                          W, o[i].b, k, k + size, o[i].residual);
        cur = atomic_load(&j->next[phase]);
    }
}

static void layer_rest(const layer_job *j, int tid, int nt);

static void layer_worker(void *arg, int tid, int nt) {
    const layer_job *j = arg;
    const wb_config *c = &j->m->cfg;
    const wb_llama_layer *y = j->y;
    const int C = c->n_embd, NH = c->n_head, hd = c->head_dim, Q = NH * hd,
              KV = c->n_kv_head * hd, n = j->n;
    const float eps = c->layer_norm_epsilon;
    const int t0 = (int)((int64_t)n * tid / nt), t1 = (int)((int64_t)n * (tid + 1) / nt);
    for (int t = t0; t < t1; t++)
        wb_rmsnorm_forward(j->xn + (size_t)t * C, j->x + (size_t)t * C, y->attn_norm, C, eps);
    wb_pool_barrier(j->pool);
    const lin_out qkv[3] = {{&y->wq, y->bq, j->qb, 0}, {&y->wk, y->bk, j->kb, 0}, {&y->wv, y->bv, j->vb, 0}};
    lin_phase(j, 0, j->xn, qkv, 3, tid, nt);
    wb_pool_barrier(j->pool);
    /* RoPE and the K/V cache rows, by rows: row t's cache entry needs only row t's rotation */
    rope_rows(j->qb + (size_t)t0 * Q, (size_t)Q, t1 - t0, NH, hd, j->cs + (size_t)t0 * hd);
    rope_rows(j->kb + (size_t)t0 * KV, (size_t)KV, t1 - t0, c->n_kv_head, hd,
              j->cs + (size_t)t0 * hd);
    for (int s = 0; s < j->n_seqs; s++) {
        const wb_seq_rows *sq = &j->seqs[s];
        const int r = j->row0[s], a = r > t0 ? r : t0, e = r + sq->n < t1 ? r + sq->n : t1;
        if (a >= e) continue;
        const size_t lo = (size_t)j->layer * sq->cache_ctx * KV + (size_t)(sq->pos + a - r) * KV;
        memcpy(sq->k + lo, j->kb + (size_t)a * KV, (size_t)(e - a) * KV * sizeof(float));
        memcpy(sq->v + lo, j->vb + (size_t)a * KV, (size_t)(e - a) * KV * sizeof(float));
    }
    wb_pool_barrier(j->pool);
    att_job *aj = j->sel_aj ? j->sel_aj : j->aj;
    if (j->att_threads > 1) att_worker(aj, tid, nt);
    else if (tid == 0) att_worker(aj, 0, 1);
    wb_pool_barrier(j->pool);
    if (!j->sel_aj) {
        layer_rest(j, tid, nt);
        return;
    }
    /* the last rows r_s = row0[s] + n_s - 1 grow with s and r_s >= s, so moving them up in
     * order never overwrites a row still to be moved */
    if (tid == 0)
        for (int s = 0; s < j->n_seqs; s++) {
            const int r = j->row0[s] + j->seqs[s].n - 1;
            if (r == s) continue;
            memcpy(j->x + (size_t)s * C, j->x + (size_t)r * C, (size_t)C * sizeof(float));
            memcpy(j->att + (size_t)s * Q, j->att + (size_t)r * Q, (size_t)Q * sizeof(float));
        }
    wb_pool_barrier(j->pool);
    layer_job sel = *j;
    sel.runs = j->sel_runs;
    sel.n_runs = j->n_sel_runs;
    sel.n = j->n_seqs;
    layer_rest(&sel, tid, nt);
}

/* The layer from o_proj on over j's n rows (every row of the call, or in the last layer one per
 * sequence): x += att Wo^T, then the MLP block. */
static void layer_rest(const layer_job *j, int tid, int nt) {
    const wb_config *c = &j->m->cfg;
    const wb_llama_layer *y = j->y;
    const int C = c->n_embd, F = c->n_inner, n = j->n;
    const float eps = c->layer_norm_epsilon;
    const int t0 = (int)((int64_t)n * tid / nt), t1 = (int)((int64_t)n * (tid + 1) / nt);
    const lin_out o = {&y->wo, y->bo, j->x, 1};
    lin_phase(j, 1, j->att, &o, 1, tid, nt);
    wb_pool_barrier(j->pool);
    for (int t = t0; t < t1; t++)
        wb_rmsnorm_forward(j->xn + (size_t)t * C, j->x + (size_t)t * C, y->mlp_norm, C, eps);
    wb_pool_barrier(j->pool);
    const lin_out gu[2] = {{&y->wg, y->bg, j->g, 0}, {&y->wu, y->bu, j->u, 0}};
    lin_phase(j, 2, j->xn, gu, 2, tid, nt);
    wb_pool_barrier(j->pool);
    /* elementwise, so any split gives the same bits */
    wb_swiglu_forward(j->g + (size_t)t0 * F, j->u + (size_t)t0 * F, (size_t)(t1 - t0) * F);
    wb_pool_barrier(j->pool);
    const lin_out d = {&y->wd, y->bd, j->x, 1};
    lin_phase(j, 3, j->g, &d, 1, tid, nt);
}

wb_status wb_llama_forward(const wb_model *m, const wb_seq_rows *seqs, int n_seqs, float *logits,
                           int all_positions, wb_scratch *scratch, wb_err *err) {
    const wb_config *c = &m->cfg;
    const wb_llama *ll = m->impl;
    const int C = c->n_embd, F = c->n_inner, NH = c->n_head, hd = c->head_dim, Q = NH * hd,
              KV = c->n_kv_head * hd;
    const float eps = c->layer_norm_epsilon;
    const int nt = wb_compute_threads();
    int n = 0, n_items = 0, longest = 0;
    size_t sc_per = 0;
    for (int s = 0; s < n_seqs; s++) {
        n += seqs[s].n;
        n_items += (seqs[s].n + ATT_QB - 1) / ATT_QB * c->n_kv_head;
        /* enough for the last (longest) query block, and for att[pos + n] of a single query */
        const size_t need = (wb_attention_block_scratch(seqs[s].pos, seqs[s].n, hd) + 31) &
                            ~(size_t)15;
        if (need > sc_per) sc_per = need;
        if (seqs[s].pos + seqs[s].n > longest) longest = seqs[s].pos + seqs[s].n;
    }
    const size_t nn = (size_t)n;
    int prompt_rows = 0;
    for (int s = 0; s < n_seqs; s++)
        if (seqs[s].n >= WB_PROMPT_ROWS) prompt_rows = n;
    const size_t widest = (size_t)(C > Q ? (C > F ? C : F) : (Q > F ? Q : F));
    /* x, xn [n, C]; q, att [n, Q]; k, v [n, KV]; g, u [n, F]; cs [n, hd]; sc [nt, sc_per];
     * row0 / item0 [2 n_seqs + 1] ints, then runs [n_seqs], the last layer's item0 [n_seqs + 1]
     * and runs [n_seqs]; P [n, xrow(max(C, Q, F))] when a prompt is in the call */
    const size_t sz[12] = {nn * C, nn * C, nn * Q, nn * Q, nn * KV, nn * KV, nn * F, nn * F,
                           nn * hd, (size_t)nt * sc_per,
                           (size_t)3 * n_seqs + 2 + (size_t)2 * n_seqs * sizeof(wb_mm_run) / sizeof(int),
                           prompt_rows ? (size_t)prompt_rows * wb_mat_xrow((int)widest) : 1};
    float *b[12];
    wb_status st = wb_scratch_take(scratch, 12, sz, b, err);
    if (st) return st;
    float *x = b[0], *xn = b[1], *qb = b[2], *att = b[3], *kb = b[4], *vb = b[5], *g = b[6],
          *u = b[7], *cs = b[8], *sc = b[9];
    int *row0 = (int *)b[10], *item0 = row0 + n_seqs;
    wb_mm_run *runs = (wb_mm_run *)(item0 + n_seqs + 1);
    int *sel_item0 = (int *)(runs + n_seqs);
    wb_mm_run *sel_runs = (wb_mm_run *)(sel_item0 + n_seqs + 1);
    const int n_runs = wb_mm_runs(seqs, n_seqs, wb_model_batch_variant(m), runs);
    for (int s = 0, r = 0, it = 0; s <= n_seqs; s++) {
        item0[s] = it;
        if (s == n_seqs) break;
        row0[s] = r;
        for (int t = 0; t < seqs[s].n; t++)
            wb_mat_row(&ll->embed, seqs[s].ids[t], x + (size_t)(r + t) * C);
        if (ll->rope) ll->rope(m, &seqs[s], cs + (size_t)r * hd);
        else wb_rope_angles(ll->inv_freq, 1.0f, hd, seqs[s].pos, seqs[s].n, cs + (size_t)r * hd);
        r += seqs[s].n;
        it += (seqs[s].n + ATT_QB - 1) / ATT_QB * c->n_kv_head;
    }
    att_job aj = {seqs, row0, item0, n_seqs, n_items, qb, att, sc, sc_per, 0, NH,
                  NH / c->n_kv_head, hd, Q, KV, ll->sliding_window};
    const int att_nt = nt > 1 && (n_items * aj.group >= 2 * nt || longest >= 256) ? nt : 1;
    wb_probe_layer(m, seqs, n_seqs, row0, -1, x, NULL, NULL, 0, 0);
    int n_prompt = 0;
    for (int r = 0; r < n_runs; r++) n_prompt += runs[r].mode == WB_MM_PROMPT;
    atomic_int next[4];
    layer_job lj = {m, NULL, seqs, row0, runs, n_runs, n_seqs, n, 0, att_nt, x, xn, qb, kb, vb, att, g, u, cs,
                    &aj, NULL, prompt_rows ? b[11] : NULL, n_prompt, next, NULL, NULL, 0};
    /* Only the last position of each sequence is asked for: the last layer needs every row's k
     * and v (the cache), but attention, o_proj and the MLP only for the last rows, and the
     * head reads nothing else. Each sequence keeps its matrix-product mode (the GEMM's and the
     * GEMV's chains do not depend on the row count) and the attention item its last query
     * block (the same kernel call as in the full layer), so the logits and the cache are bit
     * for bit those of the whole layer (tests/c/test_llama.c). Not with a probe (it reads every
     * row's state after each layer) or the batch-variant lesson mode (cblas_sgemm's sums follow
     * the row count). */
    int some_long = 0;
    for (int s = 0; s < n_seqs; s++) some_long |= seqs[s].n > 1;
    int probed = 0;
    for (int s = 0; s < n_seqs; s++) probed |= seqs[s].probe != NULL;
    att_job sel_aj = aj;
    if (!all_positions && some_long && !probed && !wb_model_batch_variant(m)) {
        for (int s = 0; s <= n_seqs; s++) sel_item0[s] = s * c->n_kv_head;
        sel_aj.item0 = sel_item0;
        sel_aj.n_items = n_seqs * c->n_kv_head;
        for (int r = 0, s = 0; r < n_runs; r++) { /* a run of k sequences becomes k rows */
            int k = 0;
            for (int rows = 0; rows < runs[r].n; s++, k++) rows += seqs[s].n;
            sel_runs[r] = (wb_mm_run){r ? sel_runs[r - 1].row0 + sel_runs[r - 1].n : 0, k,
                                      runs[r].mode};
        }
        lj.sel_runs = sel_runs;
        lj.n_sel_runs = n_runs;
    }
    for (int l = 0; l < c->n_layer; l++) {
        if (wb_model_aborted(m, l, err)) {
            st = WB_ERR_CANCELLED;
            goto done;
        }
        lj.y = &ll->layers[l];
        lj.layer = aj.layer = sel_aj.layer = l;
        if (lj.sel_runs && l == c->n_layer - 1) lj.sel_aj = &sel_aj;
        for (int i = 0; i < 4; i++) atomic_store(&next[i], 0);
        if (nt > 1) { /* the pool is locked per layer, so the abort callback and probe run unlocked */
            if ((st = wb_pool_slot_acquire(wb_model_pool(m), nt, &lj.pool, err))) goto done;
            wb_pool_run(lj.pool, layer_worker, &lj);
            wb_pool_slot_release(wb_model_pool(m));
        } else {
            layer_worker(&lj, 0, 1);
        }
        wb_probe_layer(m, seqs, n_seqs, row0, l, x, NULL, qb, (size_t)Q, ll->sliding_window);
    }
    if (logits) {
        int rows = 0;
        if (all_positions)
            for (int t = 0; t < n; t++, rows++)
                wb_rmsnorm_forward(xn + (size_t)t * C, x + (size_t)t * C, ll->norm, C, eps);
        else
            for (int s = 0; s < n_seqs; s++, rows++)
                wb_rmsnorm_forward(xn + (size_t)s * C,
                                   x + (size_t)(lj.sel_aj ? s : row0[s] + seqs[s].n - 1) * C,
                                   ll->norm, C, eps);
        /* all positions: the layers' runs; else one row per sequence, as decode rows */
        const wb_mm_run last = {0, rows, wb_model_batch_variant(m) ? WB_MM_VARIANT : WB_MM_ROWS};
        st = all_positions ? linear(m, nt, logits, xn, runs, n_runs, &ll->head, NULL, 0, err)
                           : linear(m, nt, logits, xn, &last, 1, &ll->head, NULL, 0, err);
    }
done:
    return st;
}

void wb_llama_head(const wb_model *m, const float *x, int n, float *xn, float *logits) {
    const wb_llama *ll = m->impl;
    const int C = m->cfg.n_embd;
    for (int t = 0; t < n; t++)
        wb_rmsnorm_forward(xn + (size_t)t * C, x + (size_t)t * C, ll->norm, C,
                           m->cfg.layer_norm_epsilon);
    wb_mat_mul(logits, xn, n, &ll->head, NULL, 0, ll->head.rows, 0, 0);
}

const wb_family wb_family_llama = {
    .name = "llama",
    .model_types = (const char *const[]){"llama", "qwen2", "mistral", NULL},
    .architectures = (const char *const[]){"LlamaForCausalLM", "Qwen2ForCausalLM",
                                           "MistralForCausalLM", NULL},
    .parse_config = parse_config,
    .load = load,
    .free = wb_llama_free,
    .forward = wb_llama_forward,
    .decode = NULL, /* one row through the same block */
    .kv_width = wb_llama_kv_width,
    .max_ctx = wb_llama_max_ctx,
    .weight_bytes = wb_llama_weight_bytes,
    .head = wb_llama_head,
    .store = wb_llama_store,
};
