/* config.c - GPT-2 config.json: types, ranges and the few keys whose absence has a default. */
#include "model_internal.h"
#include "json_strict.h"

#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Caps far above any GPT-2 but low enough that sizes multiply without overflow and a hostile
 * config cannot ask for terabytes before the safetensors shapes are even compared. */
#define CAP_VOCAB (1 << 22)
#define CAP_EMBD 65536
#define CAP_LAYER 1024
#define CAP_POS (1 << 20)
#define CAP_HEAD 4096
#define CAP_INNER (1 << 20)
#define CAP_PARAMS ((int64_t)1 << 34)

/* present: 0 absent, 1 present (also when JSON null and null_ok) */
static wb_status get_int(const cJSON *root, const char *key, const char *name, int required,
                         int null_ok, int64_t lo, int64_t hi, int32_t *out, int *present,
                         wb_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *present = 0;
    if (!v) {
        if (required)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: required key \"%s\" is missing", name, key);
        return WB_OK;
    }
    if (cJSON_IsNull(v) && null_ok) return WB_OK;
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

wb_status wb_config_parse_ex(const char *json, size_t len, const char *name, wb_config *out,
                             wb_act *act, wb_err *err) {
    if (!name) name = "config.json";
    if (!json || !out) return wb_err_set(err, WB_ERR_ARG, "%s: NULL argument", name);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return wb_err_set(err, WB_ERR_FORMAT, "%s: not valid JSON", name);
    wb_status s = WB_OK;
    wb_config c = {0};
    wb_act a = WB_ACT_GELU_TANH;
    int p;
    if (!cJSON_IsObject(root)) {
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: top level is not a JSON object", name);
        goto done;
    }
    if ((s = wb_json_check_unique_keys(root, name, err))) goto done;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && cJSON_IsString(mt) &&
        (!strcmp(mt->valuestring, "llama") || !strcmp(mt->valuestring, "qwen2") ||
         !strcmp(mt->valuestring, "mistral"))) {
        /* the Llama family has its own keys (core/config_llama.c) */
        if (!(s = wb_config_parse_llama(root, mt->valuestring, name, &c, err))) *out = c;
        if (!s && act) *act = a;
        goto done;
    }
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gpt2") != 0)) {
        s = wb_err_set(err, WB_ERR_FORMAT,
                       "%s: key \"model_type\" must be \"gpt2\", \"llama\", \"qwen2\" or "
                       "\"mistral\"", name);
        goto done;
    }
    if ((s = get_int(root, "vocab_size", name, 1, 0, 1, CAP_VOCAB, &c.vocab_size, &p, err)))
        goto done;
    int32_t npos = 0, nctx = 0;
    int has_pos, has_ctx;
    if ((s = get_int(root, "n_positions", name, 0, 0, 1, CAP_POS, &npos, &has_pos, err)) ||
        (s = get_int(root, "n_ctx", name, 0, 0, 1, CAP_POS, &nctx, &has_ctx, err)))
        goto done;
    if (!has_pos && !has_ctx) {
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: required key \"n_positions\" is missing", name);
        goto done;
    }
    /* n_positions sizes wpe; old configs carry n_ctx alongside (equal) or alone. */
    c.n_ctx = has_pos ? npos : nctx;
    if ((s = get_int(root, "n_embd", name, 1, 0, 1, CAP_EMBD, &c.n_embd, &p, err)) ||
        (s = get_int(root, "n_layer", name, 1, 0, 1, CAP_LAYER, &c.n_layer, &p, err)) ||
        (s = get_int(root, "n_head", name, 1, 0, 1, CAP_HEAD, &c.n_head, &p, err)) ||
        (s = get_int(root, "n_inner", name, 0, 1, 1, CAP_INNER, &c.n_inner, &p, err)))
        goto done;
    if (!p) c.n_inner = 4 * c.n_embd;
    if (c.n_embd % c.n_head != 0) {
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: key \"n_embd\" = %d is not divisible by \"n_head\" = %d",
                       name, c.n_embd, c.n_head);
        goto done;
    }
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    if (!eps) c.layer_norm_epsilon = 1e-5f;
    else if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0.0) || eps->valuedouble > 1.0) {
        s = wb_err_set(err, WB_ERR_FORMAT,
                       "%s: key \"layer_norm_epsilon\" must be a number in (0, 1]", name);
        goto done;
    } else c.layer_norm_epsilon = (float)eps->valuedouble;
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    if (af) {
        if (!cJSON_IsString(af)) {
            s = wb_err_set(err, WB_ERR_FORMAT, "%s: key \"activation_function\" must be a string",
                           name);
            goto done;
        }
        if (!strcmp(af->valuestring, "gelu_new") || !strcmp(af->valuestring, "gelu_pytorch_tanh") ||
            !strcmp(af->valuestring, "gelu_fast"))
            a = WB_ACT_GELU_TANH;
        else if (!strcmp(af->valuestring, "gelu"))
            a = WB_ACT_GELU_ERF;
        else {
            s = wb_err_set(err, WB_ERR_FORMAT,
                           "%s: key \"activation_function\" = \"%.40s\" is not supported "
                           "(gelu_new, gelu_pytorch_tanh, gelu)", name, af->valuestring);
            goto done;
        }
    }
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (!tie) c.tie_word_embeddings = 1;
    else if (!cJSON_IsBool(tie)) {
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: key \"tie_word_embeddings\" must be true or false",
                       name);
        goto done;
    } else c.tie_word_embeddings = cJSON_IsTrue(tie);

    int64_t V = c.vocab_size, T = c.n_ctx, C = c.n_embd, L = c.n_layer, F = c.n_inner;
    int64_t per_layer = 4 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * F + F) + (F * C + C);
    int64_t total = V * C + T * C + L * per_layer + 2 * C + (c.tie_word_embeddings ? 0 : V * C);
    if (total > CAP_PARAMS) {
        s = wb_err_set(err, WB_ERR_FORMAT,
                       "%s: sizes (vocab_size, n_positions, n_embd, n_layer, n_inner) give %lld "
                       "parameters, above the limit of %lld", name, (long long)total,
                       (long long)CAP_PARAMS);
        goto done;
    }
    c.family = WB_FAMILY_GPT2;
    c.max_position_embeddings = c.n_ctx;
    c.n_kv_head = c.n_head;
    c.head_dim = c.n_embd / c.n_head;
    *out = c;
    if (act) *act = a;
done:
    cJSON_Delete(root);
    return s;
}

wb_status wb_config_parse(const char *json, size_t len, const char *name, wb_config *out,
                          wb_err *err) {
    return wb_config_parse_ex(json, len, name, out, NULL, err);
}
