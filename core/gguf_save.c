/* gguf_save.c - a loaded model, its tokenizer and chat template, written as one GGUF file that
 * llama.cpp (and so Ollama) loads: the other direction of core/gguf_model.c.
 *
 * What is written is what the forward pass holds (the family's weight store, walked by checkpoint
 * name), so a model quantized at load, or one just trained and reloaded, is saved as it runs.
 * Tensor and metadata names are the GGUF spec's as llama.cpp reads them; names come from
 * core/gguf_model.c's tables (wb_gguf_name_from_hf), used in reverse.
 *
 * Layout decisions, each the one llama.cpp's own converter makes:
 *   - every matrix is stored as `type` ([out, in] row-major: ggml dims {in, out}); vectors (norm
 *     weights, biases, GPT-2's position table) stay F32. A matrix whose rows are not a multiple
 *     of 32 values cannot be Q8_0/Q4_0 and is written F32 instead.
 *   - llama (model_type llama, mistral): llama.cpp rotates adjacent pairs (rope "normal"), HF
 *     rotates the two halves of each head, so q_proj/k_proj rows (and biases) are permuted per
 *     head: GGUF row 2j + a of a head is HF row a * hd/2 + j. qwen2 and phi3 rotate halves in
 *     llama.cpp too (rope "neox") and are written unpermuted.
 *   - llama3 rope_scaling becomes the rope_freqs.weight tensor (one divisor per frequency).
 *   - gpt2 and phi3 always get output.weight (llama.cpp requires it; a tied head is duplicated);
 *     llama and qwen2 leave it out when tied.
 */
#include "gguf_save.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fileio.h"
#include "gguf_model.h"
#include "gguf_tokenizer.h"
#include "json_strict.h"
#include "model_family.h"
#include "tokenizer_internal.h"

/* llama.cpp's general.file_type (enum llama_ftype) for each type we write */
static int file_type_of(uint32_t type) {
    switch (type) {
    case WB_GGML_F32: return 0;
    case WB_GGML_F16: return 1;
    case WB_GGML_Q4_0: return 2;
    case WB_GGML_Q8_0: return 7;
    case WB_GGML_BF16: return 32;
    default: return -1;
    }
}

/* The GGUF architecture of a model_type, or NULL. */
static const char *gguf_arch(const char *model_type) {
    if (!strcmp(model_type, "gpt2")) return "gpt2";
    if (!strcmp(model_type, "llama") || !strcmp(model_type, "mistral")) return "llama";
    if (!strcmp(model_type, "qwen2")) return "qwen2";
    if (!strcmp(model_type, "phi3")) return "phi3";
    return NULL;
}

typedef struct save_ctx {
    const wb_model *m;
    const char *path, *arch;
    wb_gguf_writer *w;
    uint32_t type;
    float *buf;       /* [rows * cols] the tensor being converted */
    size_t buf_cap;
} save_ctx;

static float *take(save_ctx *c, size_t n, wb_err *err) {
    if (n > c->buf_cap) {
        float *p = realloc(c->buf, n * sizeof *p);
        if (!p) {
            wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory for %zu values", c->path, n);
            return NULL;
        }
        c->buf = p, c->buf_cap = n;
    }
    return c->buf;
}

/* Rows of one Q/K projection (or its bias: cols = 1) reordered from HF's rotate-half layout to
 * llama.cpp's adjacent pairs, per head of hd rows: gguf[r] = hf[wb_gguf_qk_row(r)], the same map
 * the GGUF reader undoes (gguf_model.h). tmp holds one head. */
static void permute_rows(float *v, int rows, int cols, int hd, float *tmp) {
    for (int h = 0; h < rows / hd; h++) {
        float *head = v + (size_t)h * hd * cols;
        memcpy(tmp, head, (size_t)hd * cols * sizeof *tmp);
        for (int r = 0; r < hd; r++)
            memcpy(head + (size_t)r * cols, tmp + (size_t)wb_gguf_qk_row(r, hd) * cols,
                   (size_t)cols * sizeof *tmp);
    }
}

static wb_status add(save_ctx *c, const char *name, int rows, int cols, int is_matrix,
                     const float *v, wb_err *err) {
    uint32_t t = is_matrix ? c->type : WB_GGML_F32;
    if ((t == WB_GGML_Q8_0 || t == WB_GGML_Q4_0) && cols % 32) t = WB_GGML_F32;
    const int64_t dims[2] = {cols, rows};
    wb_err e = {0};
    wb_status s = wb_gguf_add_tensor(c->w, name, rows > 1 || is_matrix ? 2 : 1, dims, t, v, &e);
    return s ? wb_err_set(err, s, "%s: %s", c->path, e.msg) : WB_OK;
}

/* One loaded tensor: widened to F32, renamed, permuted where llama needs it, added. */
static wb_status put_tensor(save_ctx *c, const wb_loaded_tensor *lt, wb_err *err) {
    const wb_config *cfg = &c->m->cfg;
    const char *hf = lt->name;
    if (!strncmp(hf, "transformer.", 12)) hf += 12; /* GPT2LMHeadModel's prefix */
    char name[128];
    wb_err e = {0};
    wb_status s = wb_gguf_name_from_hf(c->arch, hf, name, sizeof name, &e);
    if (s) return wb_err_set(err, s, "%s: %s", c->path, e.msg);
    int rows, cols;
    float *v;
    if (lt->mat.w) {
        rows = lt->mat.rows, cols = lt->mat.cols;
        if (!(v = take(c, (size_t)rows * cols + (size_t)cfg->head_dim * cols, err)))
            return WB_ERR_NOMEM;
        for (int r = 0; r < rows; r++) wb_mat_row(&lt->mat, r, v + (size_t)r * cols);
    } else {
        rows = lt->d1 ? (int)lt->d0 : 1;
        cols = (int)(lt->d1 ? lt->d1 : lt->d0);
        if (!(v = take(c, (size_t)rows * cols + (size_t)cfg->head_dim * cols, err)))
            return WB_ERR_NOMEM;
        memcpy(v, lt->vec, (size_t)rows * cols * sizeof *v);
    }
    if (wb_gguf_qk_permuted(c->arch, hf)) {
        /* a bias is a vector of rows values: permute it as rows x 1 */
        const int R = lt->mat.w ? rows : cols, K = lt->mat.w ? cols : 1;
        permute_rows(v, R, K, cfg->head_dim, v + (size_t)rows * cols);
    }
    return add(c, name, rows, cols, lt->mat.w != NULL, v, err);
}

#define TRY(call)                                                                                 \
    do {                                                                                          \
        wb_err e_ = {0};                                                                          \
        if ((s = (call)) != WB_OK) {                                                              \
            wb_err_set(err, s, "%s: %s", path, e_.msg);                                           \
            goto done;                                                                            \
        }                                                                                         \
    } while (0)
#define E (&e_)

/* {arch}.<key> */
static const char *akey(char *buf, size_t n, const char *arch, const char *key) {
    snprintf(buf, n, "%s.%s", arch, key);
    return buf;
}

/* A number from config.json (the key's value), or dflt. */
static double cfg_num(const cJSON *root, const char *key, double dflt) {
    const cJSON *v = root ? cJSON_GetObjectItemCaseSensitive(root, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* llama3 rope_scaling as llama.cpp takes it: per frequency i < hd/2 a divisor of the angle
 * (1 for the high frequencies, factor for the low ones, a smooth blend between), the ratio of
 * the plain inverse frequency to transformers' rescaled one. */
static void llama3_freq_divisors(const wb_config *c, float *out) {
    const int hd = c->head_dim;
    const double lo_wl = c->rope_original_max_pos / c->rope_low_freq_factor,
                 hi_wl = c->rope_original_max_pos / c->rope_high_freq_factor;
    for (int i = 0; i < hd / 2; i++) {
        const double freq = 1.0 / pow(c->rope_theta, (2.0 * i) / hd), wl = 2 * M_PI / freq;
        double f;
        if (wl < hi_wl) f = 1;
        else if (wl > lo_wl) f = c->rope_factor;
        else {
            const double sm = (c->rope_original_max_pos / wl - c->rope_low_freq_factor) /
                              (c->rope_high_freq_factor - c->rope_low_freq_factor);
            f = 1 / ((1 - sm) / c->rope_factor + sm);
        }
        out[i] = (float)f;
    }
}

/* The tokenizer goes through helper ggtok's wb_gguf_tokenizer_put_ex (core/gguf_tokenizer.c:
 * every tokenizer kind llama.cpp can reproduce, checked pre-tokenizer names). One case it does not
 * cover is written here: an embedding with more rows than the tokenizer has ids, which llama.cpp
 * needs padded to the row count (below, byte-level BPE only). */
static const char *pre_name(const wb_tokenizer *tok) {
    const char *j = tok->json_pre ? tok->json_pre : "";
    if (!strstr(j, "Split")) return "gpt-2"; /* ByteLevel's own (GPT-2) regex */
    if (strstr(j, "\\p{N}{1,3}")) return "llama-bpe";
    if (strstr(j, "\\p{N}")) return "qwen2";
    return "default";
}

/* The padded case: a model whose embedding has more rows than the tokenizer has ids (Qwen2.5: 151936 against
 * 151665) gets "[PAD<i>]" tokens of type unused (5) up to n_vocab, as llama.cpp's converter pads
 * them: llama.cpp takes the vocabulary size from the token list. */
static wb_status put_tokenizer(wb_gguf_writer *w, const wb_tokenizer *tok, int32_t n_vocab,
                               int32_t eos, wb_err *err) {
    if (!tok->byte_level || tok->byte_fallback)
        return wb_err_set(err, WB_ERR_ARG, "only byte-level BPE tokenizers are written so far");
    const int32_t n = n_vocab;
    char *pads = NULL;
    const char **strs = calloc((size_t)n, sizeof *strs);
    int32_t *types = calloc((size_t)n, sizeof *types);
    char **merges = calloc(tok->n_merges ? tok->n_merges : 1, sizeof *merges);
    wb_status s = WB_OK;
    if (!strs || !types || !merges) {
        s = wb_err_set(err, WB_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    if (n > tok->n_total && !(pads = malloc((size_t)(n - tok->n_total) * 20))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        if (i >= tok->n_total) {
            char *p = pads + (size_t)(i - tok->n_total) * 20;
            snprintf(p, 20, "[PAD%d]", (int)i);
            strs[i] = p, types[i] = 5;
            continue;
        }
        strs[i] = tok->str[i];
        types[i] = tok->special[i] ? 3 : (i >= tok->n_model ? 4 : 1);
    }
    for (size_t a = 0; a < tok->n_added; a++) /* added tokens, inside the model vocab or not */
        if (tok->added[a].id >= 0 && tok->added[a].id < n)
            types[tok->added[a].id] = tok->added[a].special ? 3 : 4;
    for (size_t i = 0; i < tok->n_merges; i++) {
        const char *x = tok->str[tok->merges[i][0]], *y = tok->str[tok->merges[i][1]];
        const size_t lx = strlen(x), ly = strlen(y);
        if (!(merges[i] = malloc(lx + ly + 2))) {
            s = wb_err_set(err, WB_ERR_NOMEM, "tokenizer: out of memory");
            goto done;
        }
        memcpy(merges[i], x, lx), merges[i][lx] = ' ', memcpy(merges[i] + lx + 1, y, ly + 1);
    }
    const char *pre = pre_name(tok);
    if ((s = wb_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4, err)) ||
        (s = wb_gguf_set_str(w, "tokenizer.ggml.pre", pre, strlen(pre), err)) ||
        (s = wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", strs, (size_t)n, err)) ||
        (s = wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", types, (size_t)n, err)) ||
        (s = wb_gguf_set_str_array(w, "tokenizer.ggml.merges", (const char *const *)merges,
                                   tok->n_merges, err)) ||
        (s = wb_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0, err)))
        goto done;
    if (eos >= 0 && ((s = wb_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos, err)) ||
                     (s = wb_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)eos, err))))
        goto done;
done:
    if (merges)
        for (size_t i = 0; i < tok->n_merges; i++) free(merges[i]);
    free(merges), free(strs), free(types), free(pads);
    return s;
}

wb_gguf_save_params wb_gguf_save_default_params(void) {
    return (wb_gguf_save_params){.type = WB_GGML_F32, .name = NULL};
}

wb_status wb_model_save_gguf(const wb_model *m, const wb_tokenizer *tok, const char *chat_template,
                             const char *path, int type, wb_err *err) {
    wb_gguf_save_params p = wb_gguf_save_default_params();
    p.type = type;
    return wb_model_save_gguf_ex(m, tok, chat_template, path, &p, err);
}

wb_status wb_model_save_gguf_ex(const wb_model *m, const wb_tokenizer *tok,
                                const char *chat_template, const char *path,
                                const wb_gguf_save_params *prm, wb_err *err) {
    if (!m || !path || !prm)
        return wb_err_set(err, WB_ERR_ARG, "wb_model_save_gguf: NULL argument");
    if (!*path) return wb_err_set(err, WB_ERR_ARG, "wb_model_save_gguf: empty path");
    const uint32_t type = (uint32_t)prm->type;
    if (prm->type < 0 || file_type_of(type) < 0)
        return wb_err_set(err, WB_ERR_ARG,
                          "%s: GGUF tensor type %d is not one the writer makes (F32, F16, BF16, "
                          "Q8_0, Q4_0)", path, prm->type);
    const wb_config *cfg = &m->cfg;
    const char *arch = gguf_arch(m->model_type);
    if (!arch)
        return wb_err_set(err, WB_ERR_ARG, "%s: model_type \"%s\" has no GGUF architecture here "
                          "(gpt2, llama, mistral, qwen2, phi3)", path, m->model_type);
    const wb_weight_store *st = wb_model_store(m);
    if (!st || !st->loaded)
        return wb_err_set(err, WB_ERR_ARG, "%s: this model's weights cannot be listed for export",
                          path);
    if (tok && wb_tokenizer_vocab_size(tok) > cfg->vocab_size)
        return wb_err_set(err, WB_ERR_ARG, "%s: the tokenizer has %d ids, more than the model's "
                          "%d", path, (int)wb_tokenizer_vocab_size(tok), (int)cfg->vocab_size);
    cJSON *root = m->config_json ? cJSON_Parse(m->config_json) : NULL;
    if (!strcmp(arch, "phi3")) {
        const cJSON *rs = root ? cJSON_GetObjectItemCaseSensitive(root, "rope_scaling") : NULL;
        if (rs && !cJSON_IsNull(rs)) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "type");
            if (!cJSON_IsString(t) || strcmp(t->valuestring, "default")) {
                cJSON_Delete(root);
                return wb_err_set(err, WB_ERR_ARG, "%s: Phi-3 rope_scaling (LongRoPE) is not "
                                  "written to GGUF yet", path);
            }
        }
    }
    save_ctx c = {m, path, arch, NULL, type, NULL, 0};
    char k[160];
    wb_status s = WB_OK;
    if ((s = wb_gguf_writer_new(&c.w, err))) goto done;
    {
        const char *nm = prm->name;
        if (!nm) { /* the directory's last component */
            const char *d = m->dir ? m->dir : "model";
            size_t n = strlen(d);
            while (n > 1 && d[n - 1] == '/') n--;
            size_t b = n;
            while (b > 0 && d[b - 1] != '/') b--;
            snprintf(k, sizeof k, "%.*s", (int)(n - b), d + b);
            nm = k;
        }
        TRY(wb_gguf_set_str(c.w, "general.architecture", arch, strlen(arch), E));
        TRY(wb_gguf_set_str(c.w, "general.name", nm, strlen(nm), E));
    }
    TRY(wb_gguf_set_u32(c.w, "general.file_type", (uint32_t)file_type_of(type), E));
    if (type == WB_GGML_Q8_0 || type == WB_GGML_Q4_0)
        TRY(wb_gguf_set_u32(c.w, "general.quantization_version", 2, E));
    TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "context_length"),
                        (uint32_t)cfg->max_position_embeddings, E));
    TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "embedding_length"), (uint32_t)cfg->n_embd, E));
    TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "block_count"), (uint32_t)cfg->n_layer, E));
    TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "feed_forward_length"), (uint32_t)cfg->n_inner,
                        E));
    TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "attention.head_count"), (uint32_t)cfg->n_head,
                        E));
    if (!strcmp(arch, "gpt2")) {
        TRY(wb_gguf_set_f32(c.w, akey(k, sizeof k, arch, "attention.layer_norm_epsilon"),
                            cfg->layer_norm_epsilon, E));
    } else {
        TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "attention.head_count_kv"),
                            (uint32_t)cfg->n_kv_head, E));
        TRY(wb_gguf_set_f32(c.w, akey(k, sizeof k, arch, "attention.layer_norm_rms_epsilon"),
                            cfg->layer_norm_epsilon, E));
        TRY(wb_gguf_set_f32(c.w, akey(k, sizeof k, arch, "rope.freq_base"), cfg->rope_theta, E));
        TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "rope.dimension_count"),
                            (uint32_t)cfg->head_dim, E));
        if (cfg->head_dim * cfg->n_head != cfg->n_embd) {
            TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "attention.key_length"),
                                (uint32_t)cfg->head_dim, E));
            TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "attention.value_length"),
                                (uint32_t)cfg->head_dim, E));
        }
        if (!strcmp(arch, "phi3"))
            TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "attention.sliding_window"),
                                (uint32_t)cfg_num(root, "sliding_window", 0), E));
        if (!strcmp(arch, "llama"))
            TRY(wb_gguf_set_u32(c.w, akey(k, sizeof k, arch, "vocab_size"),
                                (uint32_t)cfg->vocab_size, E));
    }
    if (tok && wb_tokenizer_vocab_size(tok) == cfg->vocab_size) {
        wb_gguf_tok_specials sp = wb_gguf_tok_specials_auto();
        if (m->n_eos) sp.eos_id = m->eos_ids[0]; /* generation_config.json's first eos id */
        TRY(wb_gguf_tokenizer_put_ex(c.w, tok, chat_template, &sp, E));
    } else {
        if (tok) {
            int32_t eos = m->n_eos ? m->eos_ids[0] : wb_tokenizer_eos_id(tok);
            TRY(put_tokenizer(c.w, tok, cfg->vocab_size, eos, E));
        }
        if (chat_template)
            TRY(wb_gguf_set_str(c.w, "tokenizer.chat_template", chat_template,
                                strlen(chat_template), E));
    }
    /* tensors, in the family's load order; the head after the embedding's duplicate */
    int have_head = 0;
    const wb_loaded_tensor *embed = NULL;
    for (int i = 0; i < st->n_loaded; i++) {
        const wb_loaded_tensor *lt = &st->loaded[i];
        if (strstr(lt->name, "lm_head.weight")) have_head = 1;
        if (strstr(lt->name, "wte.weight") || strstr(lt->name, "embed_tokens.weight")) embed = lt;
        if ((s = put_tensor(&c, lt, err))) goto done;
    }
    if (!have_head && (!strcmp(arch, "gpt2") || !strcmp(arch, "phi3"))) {
        if (!embed || !embed->mat.w) {
            s = wb_err_set(err, WB_ERR_ARG, "%s: tied head without an embedding matrix", path);
            goto done;
        }
        wb_loaded_tensor head = *embed;
        snprintf(head.name, sizeof head.name, "lm_head.weight");
        if ((s = put_tensor(&c, &head, err))) goto done;
    }
    if (!strcmp(arch, "llama") && cfg->rope_scaling == WB_ROPE_LLAMA3) {
        float *f = take(&c, (size_t)cfg->head_dim, err);
        if (!f) {
            s = WB_ERR_NOMEM;
            goto done;
        }
        llama3_freq_divisors(cfg, f);
        if ((s = add(&c, "rope_freqs.weight", 1, cfg->head_dim / 2, 0, f, err))) goto done;
    }
    TRY(wb_gguf_write(c.w, path, E));
done:
    free(c.buf);
    wb_gguf_writer_free(c.w);
    cJSON_Delete(root);
    return s;
}

wb_status wb_model_chat_template_text(const wb_model *m, char **out, wb_err *err) {
    *out = NULL;
    if (!m || !m->dir) return WB_OK;
    /* A model loaded from a GGUF has its template in the file's metadata (or none): m->dir is
     * then the file's path, not a directory to look in. */
    if (m->format && !strcmp(m->format, "gguf")) {
        if (m->chat_template && !(*out = strdup(m->chat_template)))
            return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", m->dir);
        return WB_OK;
    }
    char *jin_path = wb_path_join(m->dir, "chat_template.jinja");
    char *cfg_path = wb_path_join(m->dir, "tokenizer_config.json");
    char *text = NULL;
    size_t n = 0;
    cJSON *root = NULL;
    wb_status s = WB_OK;
    if (!jin_path || !cfg_path) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", m->dir);
        goto done;
    }
    if ((s = wb_read_file_optional(jin_path, 1 << 20, &text, &n, err)) || text) {
        *out = text;
        goto done;
    }
    if ((s = wb_read_file_optional(cfg_path, 64 << 20, &text, &n, err)) || !text) goto done;
    if ((s = wb_json_parse_strict(text, n, cfg_path, &root, err))) goto done;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (cJSON_IsArray(t)) { /* [{name, template}]: the "default" one */
        const cJSON *e, *pick = NULL;
        cJSON_ArrayForEach(e, t) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default"))
                pick = cJSON_GetObjectItemCaseSensitive(e, "template");
        }
        t = pick;
    }
    if (cJSON_IsString(t)) {
        const size_t len = strlen(t->valuestring);
        if (!(*out = malloc(len + 1))) {
            s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", cfg_path);
            goto done;
        }
        memcpy(*out, t->valuestring, len + 1);
    }
done:
    if (!*out || *out != text) free(text);
    cJSON_Delete(root);
    free(jin_path), free(cfg_path);
    return s;
}
