/* config_llama.c - config.json of the Llama family (model_type llama, qwen2, mistral).
 *
 * Keys follow transformers' LlamaConfig / Qwen2Config / MistralConfig, defaults included, so a
 * config that leaves a key out means what it means to Hugging Face. Keys that would change the
 * computation in a way this forward pass does not implement (sliding windows, other RoPE
 * scalings, other activations, quantized weights) are errors naming the key, never ignored.
 */
#include "model_internal.h"

#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#define CAP_VOCAB (1 << 22)
#define CAP_EMBD 65536
#define CAP_LAYER 1024
#define CAP_POS (1 << 24)
#define CAP_HEAD 4096
#define CAP_INNER (1 << 20)
#define CAP_PARAMS ((int64_t)1 << 34)

/* *present: 0 absent (or null when null_ok), 1 present. */
static wb_status get_int(const cJSON *root, const char *key, const char *mt, const char *name,
                         int required, int64_t lo, int64_t hi, int32_t *out, int *present,
                         wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *present = 0;
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: required key \"%s\" is missing (model_type \"%s\")", name, key,
                              mt);
        return WB_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s\" must be an integer", name, key);
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s\" = %.17g is out of range [%lld, %lld]",
                          name, key, d, (long long)lo, (long long)hi);
    *out = (int32_t)d;
    *present = 1;
    return WB_OK;
}

/* A positive finite number; absent or null leaves *out (the default). */
static wb_status get_pos_num(const cJSON *obj, const char *key, const char *where,
                             const char *name, int required, double hi, float *out, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s%s\" is missing", name, where, key);
        return WB_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0.0) || !(v->valuedouble <= hi))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s%s\" must be a number in (0, %g]",
                          name, where, key, hi);
    *out = (float)v->valuedouble;
    return WB_OK;
}

static wb_status get_bool(const cJSON *root, const char *key, const char *name, int dflt,
                          int32_t *out, wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return WB_OK;
    }
    if (!cJSON_IsBool(v))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"%s\" must be true or false", name, key);
    *out = cJSON_IsTrue(v);
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
    if ((s = get_pos_num(rs, "factor", "rope_scaling.", name, 1, 1e6, &c->rope_factor, err)) ||
        (s = get_pos_num(rs, "low_freq_factor", "rope_scaling.", name, 1, 1e6,
                         &c->rope_low_freq_factor, err)) ||
        (s = get_pos_num(rs, "high_freq_factor", "rope_scaling.", name, 1, 1e6,
                         &c->rope_high_freq_factor, err)) ||
        (s = get_int(rs, "original_max_position_embeddings", "llama3", name, 1, 1, CAP_POS,
                     &c->rope_original_max_pos, &p, err)))
        return s;
    if (!(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"rope_scaling.high_freq_factor\" must be larger than "
                          "\"rope_scaling.low_freq_factor\"", name);
    return WB_OK;
}

wb_status wb_config_parse_llama(const struct cJSON *root, const char *mt, const char *name,
                                wb_config *out, wb_err *err) {
    wb_config c = {0};
    wb_status s;
    int p;
    const int qwen2 = !strcmp(mt, "qwen2"), mistral = !strcmp(mt, "mistral");
    c.family = WB_FAMILY_LLAMA;
    if ((s = get_int(root, "vocab_size", mt, name, 1, 1, CAP_VOCAB, &c.vocab_size, &p, err)) ||
        (s = get_int(root, "hidden_size", mt, name, 1, 1, CAP_EMBD, &c.n_embd, &p, err)) ||
        (s = get_int(root, "intermediate_size", mt, name, 1, 1, CAP_INNER, &c.n_inner, &p, err)) ||
        (s = get_int(root, "num_hidden_layers", mt, name, 1, 1, CAP_LAYER, &c.n_layer, &p, err)) ||
        (s = get_int(root, "num_attention_heads", mt, name, 1, 1, CAP_HEAD, &c.n_head, &p, err)) ||
        (s = get_int(root, "max_position_embeddings", mt, name, 1, 1, CAP_POS,
                     &c.max_position_embeddings, &p, err)))
        return s;
    c.n_ctx = c.max_position_embeddings;
    c.n_kv_head = c.n_head;
    if ((s = get_int(root, "num_key_value_heads", mt, name, 0, 1, CAP_HEAD, &c.n_kv_head, &p,
                     err)))
        return s;
    if (c.n_head % c.n_kv_head != 0)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"num_attention_heads\" = %d is not a multiple of "
                          "\"num_key_value_heads\" = %d", name, c.n_head, c.n_kv_head);
    if ((s = get_int(root, "head_dim", mt, name, 0, 2, 1024, &c.head_dim, &p, err))) return s;
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
    if ((s = get_pos_num(root, "rms_norm_eps", "", name, 0, 1.0, &c.layer_norm_epsilon, err)) ||
        (s = get_pos_num(root, "rope_theta", "", name, 0, 1e12, &c.rope_theta, err)) ||
        (s = rope_scaling(root, name, &c, err)) ||
        (s = get_bool(root, "tie_word_embeddings", name, 0, &c.tie_word_embeddings, err)))
        return s;

    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"hidden_act\" = %s is not supported (silu)", name,
                          cJSON_IsString(act) ? act->valuestring : "(not a string)");

    /* Biases: Qwen2 always has q/k/v biases and no o_proj bias (Qwen2Attention hard-codes them);
     * Llama and Mistral follow attention_bias (all four) and mlp_bias. */
    int32_t ab = 0, mb = 0;
    if ((s = get_bool(root, "attention_bias", name, 0, &ab, err)) ||
        (s = get_bool(root, "mlp_bias", name, 0, &mb, err)))
        return s;
    if (qwen2) {
        c.qkv_bias = 1;
        c.o_bias = 0;
        c.mlp_bias = 0;
    } else {
        c.qkv_bias = c.o_bias = ab;
        c.mlp_bias = mistral ? 0 : mb;
    }

    /* Sliding-window attention is not implemented: refuse any config that turns it on. Qwen2
     * configs carry a sliding_window value but only use it with use_sliding_window = true. */
    int32_t usw = 0;
    if ((s = get_bool(root, "use_sliding_window", name, 0, &usw, err))) return s;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (qwen2 ? usw : (sw && !cJSON_IsNull(sw)))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"%s\" asks for sliding-window attention, which is not "
                          "supported (model_type \"%s\" is supported with full attention only)",
                          name, qwen2 ? "use_sliding_window" : "sliding_window", mt);
    if (cJSON_GetObjectItemCaseSensitive(root, "quantization_config"))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"quantization_config\": quantized checkpoints are not "
                          "supported (F32, F16, BF16 weights)", name);
    const cJSON *prf = cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor");
    if (prf && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: key \"partial_rotary_factor\" must be 1 (rotary embedding over the "
                          "whole head)", name);

    int64_t V = c.vocab_size, C = c.n_embd, L = c.n_layer, F = c.n_inner;
    int64_t Q = (int64_t)c.n_head * c.head_dim, KV = (int64_t)c.n_kv_head * c.head_dim;
    int64_t per_layer = 2 * C + C * (Q + 2 * KV) + Q * C + 3 * C * F +
                        (c.qkv_bias ? Q + 2 * KV : 0) + (c.o_bias ? C : 0) +
                        (c.mlp_bias ? 2 * F + C : 0);
    int64_t total = V * C + L * per_layer + C + (c.tie_word_embeddings ? 0 : V * C);
    if (total > CAP_PARAMS)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: sizes (vocab_size, hidden_size, num_hidden_layers, "
                          "intermediate_size, heads) give %lld parameters, above the limit of %lld",
                          name, (long long)total, (long long)CAP_PARAMS);
    *out = c;
    return WB_OK;
}
