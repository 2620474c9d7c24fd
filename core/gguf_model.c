/* gguf_model.c - GGUF metadata -> config.json object, GGUF tensor names -> safetensors names.
 *
 * Building the config.json object (rather than filling wb_config here) keeps one parser per
 * family: the keys GGUF files carry are renamed, and the family's parse_config applies the same
 * type, range and divisibility checks a directory gets. Key names follow the public GGUF spec
 * ("{arch}.embedding_length", "{arch}.attention.head_count", ...).
 */
#include "gguf_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One metadata key renamed to one config key. */
typedef struct key_map {
    const char *gguf;   /* after "{arch}." */
    const char *hf;
    int is_float, required;
} key_map;

static const key_map GPT2_KEYS[] = {
    {"embedding_length", "n_embd", 0, 1},
    {"block_count", "n_layer", 0, 1},
    {"attention.head_count", "n_head", 0, 1},
    {"context_length", "n_positions", 0, 1},
    {"feed_forward_length", "n_inner", 0, 0},
    {"attention.layer_norm_epsilon", "layer_norm_epsilon", 1, 0},
    {NULL, NULL, 0, 0}};

static const key_map LLAMA_KEYS[] = {
    {"embedding_length", "hidden_size", 0, 1},
    {"block_count", "num_hidden_layers", 0, 1},
    {"attention.head_count", "num_attention_heads", 0, 1},
    {"attention.head_count_kv", "num_key_value_heads", 0, 0},
    {"feed_forward_length", "intermediate_size", 0, 1},
    {"context_length", "max_position_embeddings", 0, 1},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", 1, 1},
    {"rope.freq_base", "rope_theta", 1, 0},
    {"attention.key_length", "head_dim", 0, 0},
    {NULL, NULL, 0, 0}};

/* Phi-3: the Llama keys, plus LongRoPE's original context (the factors are tensors, below) */
static const key_map PHI3_KEYS[] = {
    {"embedding_length", "hidden_size", 0, 1},
    {"block_count", "num_hidden_layers", 0, 1},
    {"attention.head_count", "num_attention_heads", 0, 1},
    {"attention.head_count_kv", "num_key_value_heads", 0, 0},
    {"feed_forward_length", "intermediate_size", 0, 1},
    {"context_length", "max_position_embeddings", 0, 1},
    {"attention.layer_norm_rms_epsilon", "rms_norm_eps", 1, 1},
    {"rope.freq_base", "rope_theta", 1, 0},
    {"attention.key_length", "head_dim", 0, 0},
    {"rope.scaling.original_context_length", "original_max_position_embeddings", 0, 0},
    {NULL, NULL, 0, 0}};

/* Tensor names: GGUF suffix after "blk.N." (per layer) or the whole name (global) -> the
 * safetensors name, "%d" standing for the layer. */
typedef struct name_map {
    const char *gguf, *hf;
} name_map;

static const name_map GPT2_NAMES[] = {
    {"token_embd.weight", "wte.weight"},
    {"position_embd.weight", "wpe.weight"},
    {"output_norm.weight", "ln_f.weight"},
    {"output_norm.bias", "ln_f.bias"},
    {"output.weight", "lm_head.weight"},
    {"attn_norm.weight", "h.%d.ln_1.weight"},
    {"attn_norm.bias", "h.%d.ln_1.bias"},
    {"attn_qkv.weight", "h.%d.attn.c_attn.weight"},
    {"attn_qkv.bias", "h.%d.attn.c_attn.bias"},
    {"attn_output.weight", "h.%d.attn.c_proj.weight"},
    {"attn_output.bias", "h.%d.attn.c_proj.bias"},
    {"ffn_norm.weight", "h.%d.ln_2.weight"},
    {"ffn_norm.bias", "h.%d.ln_2.bias"},
    {"ffn_up.weight", "h.%d.mlp.c_fc.weight"},
    {"ffn_up.bias", "h.%d.mlp.c_fc.bias"},
    {"ffn_down.weight", "h.%d.mlp.c_proj.weight"},
    {"ffn_down.bias", "h.%d.mlp.c_proj.bias"},
    {NULL, NULL}};

static const name_map LLAMA_NAMES[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    {"attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
    {"attn_q.bias", "model.layers.%d.self_attn.q_proj.bias"},
    {"attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
    {"attn_k.bias", "model.layers.%d.self_attn.k_proj.bias"},
    {"attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
    {"attn_v.bias", "model.layers.%d.self_attn.v_proj.bias"},
    {"attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
    {"attn_output.bias", "model.layers.%d.self_attn.o_proj.bias"},
    {"ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    {"ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
    {"ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
    {"ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
    {NULL, NULL}};

/* Phi-3 keeps transformers' fused matrices: attn_qkv = qkv_proj (rows q, k, v) and ffn_up =
 * gate_up_proj (rows gate, then up), in the same row order. */
static const name_map PHI3_NAMES[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    {"attn_qkv.weight", "model.layers.%d.self_attn.qkv_proj.weight"},
    {"attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
    {"ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    {"ffn_up.weight", "model.layers.%d.mlp.gate_up_proj.weight"},
    {"ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
    {NULL, NULL}};

typedef struct arch_info {
    const char *arch;
    const key_map *keys;
    const name_map *names;
} arch_info;

static const arch_info ARCHS[] = {
    {"gpt2", GPT2_KEYS, GPT2_NAMES},
    {"llama", LLAMA_KEYS, LLAMA_NAMES},
    {"qwen2", LLAMA_KEYS, LLAMA_NAMES},
    {"phi3", PHI3_KEYS, PHI3_NAMES},
};

static const arch_info *find_arch(const char *arch, size_t len) {
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (strlen(ARCHS[i].arch) == len && !memcmp(ARCHS[i].arch, arch, len)) return &ARCHS[i];
    return NULL;
}

/* An optional integer key "{arch}.<key>": *present 0 when absent. */
static wb_status opt_int(const wb_gguf *g, const char *arch, const char *key, const char *path,
                         int64_t *v, int *present, wb_err *err) {
    char k[128];
    wb_err e = {0};
    snprintf(k, sizeof k, "%s.%s", arch, key);
    wb_status s = wb_gguf_get_int(g, k, v, &e);
    *present = s == WB_OK;
    if (s == WB_ERR_NOTFOUND) return WB_OK;
    return s ? wb_err_set(err, s, "%s: %s", path, e.msg) : WB_OK;
}

/* A 1-D F32 tensor of n values as a JSON array (LongRoPE factors). */
static wb_status factor_array(const wb_gguf *g, const char *name, int64_t n, const char *path,
                              cJSON **out, wb_err *err) {
    const wb_gguf_tensor *t = wb_gguf_tensor_find(g, name);
    *out = NULL;
    if (!t || t->n_dims != 1 || t->dims[0] != n || t->type != WB_GGML_F32)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' must be F32 of shape [%lld] (head_dim / 2 LongRoPE "
                          "factors)%s", path, name, (long long)n, t ? "" : ", and it is missing");
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; a && i < n; i++) {
        float f;
        memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
        cJSON *e = cJSON_CreateNumber(f);
        if (!e || !cJSON_AddItemToArray(a, e)) {
            cJSON_Delete(e);
            cJSON_Delete(a);
            a = NULL;
        }
    }
    if (!a) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    *out = a;
    return WB_OK;
}

/* Llama 3.1-style RoPE: llama.cpp's converter writes no rope_scaling keys but the per-frequency
 * divisors it derives from them, as tensor rope_freqs.weight [head_dim / 2]: 1 for wavelengths
 * below original / high_freq_factor, `factor` above original / low_freq_factor, and
 * 1 / ((1 - s) / factor + s) between, s = (original / wavelength - low) / (high - low). The
 * table is turned back into transformers' rope_scaling {rope_type: llama3, ...} so llama.c
 * computes the angles exactly as for the safetensors checkpoint: the released Llama 3.x
 * values (low 1, high 4, original 8192) with factor = the largest divisor, accepted only when
 * they reproduce every entry (else refused, naming the tensor). */
static wb_status llama3_rope(const wb_gguf *g, const char *arch, int64_t head_dim,
                             const char *path, cJSON *root, wb_err *err) {
    const wb_gguf_tensor *t = wb_gguf_tensor_find(g, "rope_freqs.weight");
    const int64_t half = head_dim / 2;
    if (strcmp(arch, "llama"))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' (RoPE frequency "
                          "factors) is not supported for %s", path, arch);
    if (t->n_dims != 1 || t->dims[0] != half || t->type != WB_GGML_F32 || half > 512)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' must be F32 of "
                          "shape [%lld] (head_dim / 2)", path, (long long)half);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
    const double theta = th ? th->valuedouble : 10000.0, lo = 1.0, hi = 4.0, old = 8192.0;
    double ff[512], factor = 1.0;
    for (int64_t i = 0; i < half; i++) {
        float f;
        memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
        ff[i] = f;
        if (!(f >= 1.0f && f <= 1e6f))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' element %lld "
                              "is %g, not a divisor >= 1", path, (long long)i, (double)f);
        if (f > factor) factor = f;
    }
    if (factor == 1.0) return WB_OK; /* every divisor 1: plain RoPE */
    for (int64_t i = 0; i < half; i++) {
        const double inv = 1.0 / pow(theta, (double)(2 * i) / (double)head_dim),
                     wl = 2.0 * 3.14159265358979323846 / inv;
        double want = 1.0;
        if (wl > old / lo) want = factor;
        else if (!(wl < old / hi)) want = 1.0 / ((1.0 - (old / wl - lo) / (hi - lo)) / factor +
                                                 (old / wl - lo) / (hi - lo));
        if (fabs(ff[i] - want) > 1e-5 * want)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' does not match "
                              "Llama 3's RoPE scaling (factor %g, low_freq_factor 1, "
                              "high_freq_factor 4, original 8192) at element %lld (%g, expected "
                              "%g); other tables are not supported", path, factor, (long long)i,
                              ff[i], want);
    }
    cJSON *rs = cJSON_CreateObject();
    if (!rs || !cJSON_AddStringToObject(rs, "rope_type", "llama3") ||
        !cJSON_AddNumberToObject(rs, "factor", factor) ||
        !cJSON_AddNumberToObject(rs, "low_freq_factor", lo) ||
        !cJSON_AddNumberToObject(rs, "high_freq_factor", hi) ||
        !cJSON_AddNumberToObject(rs, "original_max_position_embeddings", old) ||
        !cJSON_AddItemToObject(root, "rope_scaling", rs)) {
        cJSON_Delete(rs);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    }
    return WB_OK;
}

/* What a GGUF says that changes the computation beyond the renamed keys: refused when the
 * family does not implement it (mixture of experts, partial or scaled RoPE, sliding windows
 * where the family has none, Llama 3's frequency table), else added to the config (Phi-3's
 * sliding window and LongRoPE factors). Runs after the renamed keys are in root. */
static wb_status arch_checks(const wb_gguf *g, const char *arch, const char *path, cJSON *root,
                             wb_err *err) {
    int64_t v = 0;
    int has;
    wb_status s;
    if ((s = opt_int(g, arch, "expert_count", path, &v, &has, err))) return s;
    if (has && v > 0)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s.expert_count = %lld: mixture-of-experts "
                          "models are not supported", path, arch, (long long)v);
    char k[128];
    const char *str;
    size_t len;
    wb_err e = {0};
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    s = wb_gguf_get_str(g, k, &str, &len, &e);
    if (s && s != WB_ERR_NOTFOUND) return wb_err_set(err, s, "%s: %s", path, e.msg);
    if (!s && !(len == 4 && !memcmp(str, "none", 4)) &&
        !(!strcmp(arch, "phi3") && len == 8 && !memcmp(str, "longrope", 8)))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s = \"%.*s\": this RoPE scaling is not "
                          "supported", path, k, (int)(len < 40 ? len : 40), str);
    if (!strcmp(arch, "gpt2")) return WB_OK;
    /* the head dimension the family will derive: head_dim, else hidden_size / heads */
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim"),
                *hs = cJSON_GetObjectItemCaseSensitive(root, "hidden_size"),
                *nh = cJSON_GetObjectItemCaseSensitive(root, "num_attention_heads");
    const int64_t head_dim = hd ? (int64_t)hd->valuedouble
                             : (int64_t)(hs->valuedouble / (nh->valuedouble > 0 ? nh->valuedouble : 1));
    if ((s = opt_int(g, arch, "attention.value_length", path, &v, &has, err))) return s;
    if (has && v != head_dim)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s.attention.value_length = %lld differs from "
                          "the key length %lld, which is not supported", path, arch, (long long)v,
                          (long long)head_dim);
    if ((s = opt_int(g, arch, "rope.dimension_count", path, &v, &has, err))) return s;
    if (has && v != head_dim)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s.rope.dimension_count = %lld but the head "
                          "dimension is %lld: partial rotary embedding is not supported", path,
                          arch, (long long)v, (long long)head_dim);
    if (wb_gguf_tensor_find(g, "rope_freqs.weight") &&
        (s = llama3_rope(g, arch, head_dim, path, root, err)))
        return s;
    if ((s = opt_int(g, arch, "attention.sliding_window", path, &v, &has, err))) return s;
    if (has && v > 0) {
        if (strcmp(arch, "phi3"))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: %s.attention.sliding_window = %lld: "
                              "sliding-window attention is not supported for %s", path, arch,
                              (long long)v, arch);
        if (!cJSON_AddNumberToObject(root, "sliding_window", (double)v)) goto nomem;
    }
    if (strcmp(arch, "phi3")) return WB_OK;
    const int has_long = wb_gguf_tensor_find(g, "rope_factors_long.weight") != NULL,
              has_short = wb_gguf_tensor_find(g, "rope_factors_short.weight") != NULL;
    if (!has_long && !has_short) return WB_OK;
    cJSON *lf = NULL, *sf = NULL, *rs = NULL;
    if ((s = factor_array(g, "rope_factors_long.weight", head_dim / 2, path, &lf, err)) ||
        (s = factor_array(g, "rope_factors_short.weight", head_dim / 2, path, &sf, err))) {
        cJSON_Delete(lf);
        return s;
    }
    if (!(rs = cJSON_CreateObject()) || !cJSON_AddStringToObject(rs, "type", "longrope") ||
        !cJSON_AddItemToObject(rs, "long_factor", lf) || (lf = NULL) ||
        !cJSON_AddItemToObject(rs, "short_factor", sf) || (sf = NULL)) {
        cJSON_Delete(lf), cJSON_Delete(sf), cJSON_Delete(rs);
        goto nomem;
    }
    double af;
    snprintf(k, sizeof k, "%s.rope.scaling.attn_factor", arch);
    s = wb_gguf_get_float(g, k, &af, &e);
    if (s && s != WB_ERR_NOTFOUND) {
        cJSON_Delete(rs);
        return wb_err_set(err, s, "%s: %s", path, e.msg);
    }
    if ((!s && !cJSON_AddNumberToObject(rs, "attention_factor", af)) ||
        !cJSON_AddItemToObject(root, "rope_scaling", rs)) {
        cJSON_Delete(rs);
        goto nomem;
    }
    return WB_OK;
nomem:
    return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
}

wb_status wb_gguf_config_json(const wb_gguf *g, const char *path, cJSON **out, wb_err *err) {
    *out = NULL;
    const char *arch;
    size_t alen;
    wb_err e = {0}; /* the reader's message, prefixed with the path below */
    wb_status s = wb_gguf_get_str(g, "general.architecture", &arch, &alen, &e);
    if (s) return wb_err_set(err, s, "%s: %s", path, e.msg);
    const arch_info *ai = find_arch(arch, alen);
    if (!ai)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: general.architecture \"%.*s\" is not one the workbench loads "
                          "(gpt2, llama, qwen2, phi3)", path, (int)(alen < 40 ? alen : 40), arch);
    cJSON *root = cJSON_CreateObject();
    if (!root || !cJSON_AddStringToObject(root, "model_type", ai->arch)) goto nomem;
    for (const key_map *k = ai->keys; k->gguf; k++) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", ai->arch, k->gguf);
        double v = 0;
        int64_t iv = 0;
        s = k->is_float ? wb_gguf_get_float(g, key, &v, &e) : wb_gguf_get_int(g, key, &iv, &e);
        if (s == WB_ERR_NOTFOUND && !k->required) continue;
        if (s) {
            cJSON_Delete(root);
            return wb_err_set(err, s, "%s: %s%s", path,
                              s == WB_ERR_NOTFOUND ? "missing metadata key " : "",
                              s == WB_ERR_NOTFOUND ? key : e.msg);
        }
        if (!k->is_float) v = (double)iv;
        if (!cJSON_AddNumberToObject(root, k->hf, v)) goto nomem;
    }
    if ((s = arch_checks(g, ai->arch, path, root, err))) {
        cJSON_Delete(root);
        return s;
    }
    if (!strcmp(ai->arch, "gpt2")) {
        cJSON *nc = cJSON_Duplicate(cJSON_GetObjectItem(root, "n_positions"), 1);
        if (!nc || !cJSON_AddItemToObject(root, "n_ctx", nc)) { /* not taken when it fails */
            cJSON_Delete(nc);
            goto nomem;
        }
    }
    /* vocab_size: the embedding's rows (dims[1]; a tokenizer with more ids is refused at load),
     * else the tokenizer's token count */
    const int64_t ti = wb_gguf_find(g, "tokenizer.ggml.tokens");
    const wb_gguf_tensor *emb = wb_gguf_tensor_find(g, "token_embd.weight");
    double vocab = 0;
    if (emb && emb->n_dims == 2) vocab = (double)emb->dims[1]; /* as transformers' vocab_size */
    else if (ti >= 0 && wb_gguf_type(g, ti) == WB_GGUF_ARRAY) vocab = (double)wb_gguf_arr_n(g, ti);
    else {
        cJSON_Delete(root);
        return wb_err_set(err, WB_ERR_NOTFOUND, "%s: no tokenizer.ggml.tokens and no 2-D "
                          "token_embd.weight to take the vocabulary size from", path);
    }
    if (!cJSON_AddNumberToObject(root, "vocab_size", vocab)) goto nomem;
    /* llama: biases are announced by their tensors (qwen2 always has q/k/v biases) */
    if (!strcmp(ai->arch, "llama") &&
        !cJSON_AddBoolToObject(root, "attention_bias",
                               wb_gguf_tensor_find(g, "blk.0.attn_q.bias") != NULL))
        goto nomem;
    /* GGUF has no tie flag: a file without output.weight ties the head to the embedding */
    if (!cJSON_AddBoolToObject(root, "tie_word_embeddings",
                               wb_gguf_tensor_find(g, "output.weight") == NULL))
        goto nomem;
    *out = root;
    return WB_OK;
nomem:
    cJSON_Delete(root);
    return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
}

wb_status wb_gguf_hf_name(const char *arch, const char *gguf_name, char *out, size_t n,
                          wb_err *err) {
    const arch_info *ai = find_arch(arch, strlen(arch));
    if (!ai)
        return wb_err_set(err, WB_ERR_NOTFOUND, "GGUF architecture \"%.40s\" is not supported",
                          arch);
    int layer = -1, used = 0;
    const char *rest = gguf_name;
    if (sscanf(gguf_name, "blk.%d.%n", &layer, &used) == 1 && used > 0 && layer >= 0 &&
        layer < 100000)
        rest = gguf_name + used;
    else
        layer = -1;
    for (const name_map *m = ai->names; m->gguf; m++) {
        const int per_layer = strstr(m->hf, "%d") != NULL;
        if (per_layer != (layer >= 0) || strcmp(m->gguf, rest)) continue;
        const int w = per_layer ? snprintf(out, n, m->hf, layer) : snprintf(out, n, "%s", m->hf);
        if (w < 0 || (size_t)w >= n)
            return wb_err_set(err, WB_ERR_ARG, "tensor name buffer too small for '%.64s'",
                              gguf_name);
        return WB_OK;
    }
    return wb_err_set(err, WB_ERR_NOTFOUND, "GGUF tensor '%.64s' is not one a %s model has",
                      gguf_name, ai->arch);
}

int wb_gguf_qk_permuted(const char *arch, const char *hf_name) {
    if (!arch || !hf_name || strcmp(arch, "llama")) return 0;
    static const char *const ends[] = {".self_attn.q_proj.weight", ".self_attn.q_proj.bias",
                                       ".self_attn.k_proj.weight", ".self_attn.k_proj.bias"};
    const size_t n = strlen(hf_name);
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        const size_t m = strlen(ends[i]);
        if (n > m && !strcmp(hf_name + n - m, ends[i])) return 1;
    }
    return 0;
}

int64_t wb_gguf_qk_row(int64_t r, int64_t head_dim) {
    const int64_t half = head_dim / 2, h = r / head_dim, j = r % head_dim;
    return h * head_dim + (j % 2) * half + j / 2;
}

wb_status wb_gguf_name_from_hf(const char *arch, const char *hf_name, char *out, size_t n,
                               wb_err *err) {
    const arch_info *ai = find_arch(arch, strlen(arch));
    if (!ai)
        return wb_err_set(err, WB_ERR_NOTFOUND, "GGUF architecture \"%.40s\" is not supported",
                          arch);
    for (const name_map *m = ai->names; m->gguf; m++) {
        const char *d = strstr(m->hf, "%d");
        int w;
        if (!d) {
            if (strcmp(m->hf, hf_name)) continue;
            w = snprintf(out, n, "%s", m->gguf);
        } else {
            /* prefix, a layer number without sign or leading zeros, suffix */
            const size_t pre = (size_t)(d - m->hf);
            if (strncmp(hf_name, m->hf, pre)) continue;
            const char *p = hf_name + pre, *q = p;
            while (*q >= '0' && *q <= '9' && q - p < 6) q++;
            if (q == p || (*p == '0' && q - p > 1) || strcmp(q, d + 2)) continue;
            w = snprintf(out, n, "blk.%.*s.%s", (int)(q - p), p, m->gguf);
        }
        if (w < 0 || (size_t)w >= n)
            return wb_err_set(err, WB_ERR_ARG, "tensor name buffer too small for '%.64s'",
                              hf_name);
        return WB_OK;
    }
    return wb_err_set(err, WB_ERR_NOTFOUND, "tensor '%.64s' has no GGUF name for a %s model",
                      hf_name, ai->arch);
}
