/* test_gguf_model.c - GGUF metadata becomes a config the families accept, and GGUF tensor names
 * map to the families' safetensors names. Files are made with our own GGUF writer. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_model.h"
#include "gguf_save.h"
#include "gguf_tokenizer.h"
#include "wb_chat.h"
#include "fileio.h"
#include "model_family.h"
#include "wb_model.h"

static char path[64];

/* A GGUF with the given architecture's metadata (omit: a key left out) and a token_embd. */
static void write_file(const char *arch, const char *omit, int with_output) {
    wb_gguf_writer *w = NULL;
    wb_err err = {0};
    CHECK(wb_gguf_writer_new(&w, &err) == WB_OK);
    char k[96];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
#define SKIP(s) (omit && !strcmp(omit, s))
    CHECK(wb_gguf_set_str(w, "general.architecture", arch, strlen(arch), &err) == WB_OK);
    if (!SKIP("embedding_length")) CHECK(wb_gguf_set_u32(w, KEY("embedding_length"), 64, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, KEY("block_count"), 3, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, KEY("attention.head_count"), 4, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, KEY("attention.head_count_kv"), 2, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, KEY("context_length"), 128, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, KEY("feed_forward_length"), 160, &err) == WB_OK);
    if (!SKIP("rms"))
        CHECK(wb_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f, &err) == WB_OK);
    CHECK(wb_gguf_set_f32(w, KEY("attention.layer_norm_epsilon"), 1e-5f, &err) == WB_OK);
    CHECK(wb_gguf_set_f32(w, KEY("rope.freq_base"), 500000.0f, &err) == WB_OK);
    static float emb[64 * 50];
    const int64_t dims[2] = {64, 50}; /* fastest first: 50 rows of 64 */
    CHECK(wb_gguf_add_tensor(w, "token_embd.weight", 2, dims, WB_GGML_F32, emb, &err) == WB_OK);
    if (with_output)
        CHECK(wb_gguf_add_tensor(w, "output.weight", 2, dims, WB_GGML_F32, emb, &err) == WB_OK);
    CHECK_MSG(wb_gguf_write(w, path, &err) == WB_OK, "%s", err.msg);
    wb_gguf_writer_free(w);
#undef KEY
#undef SKIP
}

/* config_json of the file at `path` parsed by the family parser */
static wb_status parse(wb_config *c, wb_err *err) {
    wb_gguf *g = NULL;
    cJSON *root = NULL;
    wb_status s = wb_gguf_open(path, &g, err);
    if (!s) s = wb_gguf_config_json(g, path, &root, err);
    if (!s) {
        char *json = cJSON_PrintUnformatted(root);
        s = wb_config_parse(json, strlen(json), path, c, err);
        free(json);
    }
    cJSON_Delete(root);
    wb_gguf_free(g);
    return s;
}

static void llama_metadata_becomes_a_llama_config(void) {
    write_file("llama", NULL, 1);
    wb_config c;
    wb_err err = {0};
    CHECK_MSG(parse(&c, &err) == WB_OK, "%s", err.msg);
    CHECK(c.n_embd == 64 && c.n_layer == 3 && c.n_head == 4 && c.n_kv_head == 2);
    CHECK(c.n_inner == 160 && c.max_position_embeddings == 128 && c.vocab_size == 50);
    CHECK(c.head_dim == 16 && !c.tie_word_embeddings && c.qkv_bias == 0);
    CHECK_NEAR(c.layer_norm_epsilon, 1e-6, 1e-12);
    CHECK_NEAR(c.rope_theta, 500000.0, 1e-3);
}

static void qwen2_without_output_ties_and_has_qkv_bias(void) {
    write_file("qwen2", NULL, 0);
    wb_config c;
    wb_err err = {0};
    CHECK_MSG(parse(&c, &err) == WB_OK, "%s", err.msg);
    CHECK(c.tie_word_embeddings == 1 && c.qkv_bias == 1 && c.o_bias == 0);
}

static void gpt2_metadata_becomes_a_gpt2_config(void) {
    write_file("gpt2", NULL, 0);
    wb_config c;
    wb_err err = {0};
    CHECK_MSG(parse(&c, &err) == WB_OK, "%s", err.msg);
    CHECK(c.n_embd == 64 && c.n_layer == 3 && c.n_head == 4 && c.n_inner == 160);
    CHECK(c.max_position_embeddings == 128 && c.vocab_size == 50 && c.tie_word_embeddings);
    CHECK_NEAR(c.layer_norm_epsilon, 1e-5, 1e-12);
}

static void missing_or_unknown_metadata_is_a_clear_error(void) {
    wb_config c;
    wb_err err = {0};
    write_file("llama", "embedding_length", 1);
    CHECK(parse(&c, &err) == WB_ERR_NOTFOUND);
    CHECK(strstr(err.msg, "llama.embedding_length") && strstr(err.msg, path));
    write_file("llama", "rms", 1);
    CHECK(parse(&c, &err) == WB_ERR_NOTFOUND);
    CHECK(strstr(err.msg, "llama.attention.layer_norm_rms_epsilon"));
    write_file("mamba", NULL, 1);
    CHECK(parse(&c, &err) == WB_ERR_FORMAT);
    CHECK(strstr(err.msg, "\"mamba\"") && strstr(err.msg, path));
}

static void tensor_names_map_per_architecture(void) {
    char out[128];
    wb_err err = {0};
    CHECK(wb_gguf_hf_name("llama", "blk.11.attn_q.weight", out, sizeof out, &err) == WB_OK);
    CHECK(!strcmp(out, "model.layers.11.self_attn.q_proj.weight"));
    CHECK(wb_gguf_hf_name("qwen2", "blk.0.attn_k.bias", out, sizeof out, &err) == WB_OK);
    CHECK(!strcmp(out, "model.layers.0.self_attn.k_proj.bias"));
    CHECK(wb_gguf_hf_name("llama", "output_norm.weight", out, sizeof out, &err) == WB_OK);
    CHECK(!strcmp(out, "model.norm.weight"));
    CHECK(wb_gguf_hf_name("gpt2", "blk.2.attn_qkv.weight", out, sizeof out, &err) == WB_OK);
    CHECK(!strcmp(out, "h.2.attn.c_attn.weight"));
    CHECK(wb_gguf_hf_name("gpt2", "position_embd.weight", out, sizeof out, &err) == WB_OK);
    CHECK(!strcmp(out, "wpe.weight"));
    /* a per-layer name without its layer, a global name with one, unknown names */
    CHECK(wb_gguf_hf_name("llama", "attn_q.weight", out, sizeof out, &err) == WB_ERR_NOTFOUND);
    CHECK(wb_gguf_hf_name("llama", "blk.1.token_embd.weight", out, sizeof out, &err) ==
          WB_ERR_NOTFOUND);
    CHECK(wb_gguf_hf_name("llama", "blk.1.attn_qkv.weight", out, sizeof out, &err) ==
          WB_ERR_NOTFOUND && strstr(err.msg, "blk.1.attn_qkv.weight"));
    CHECK(wb_gguf_hf_name("llama", "blk.-1.attn_q.weight", out, sizeof out, &err) ==
          WB_ERR_NOTFOUND);
    CHECK(wb_gguf_hf_name("llama", "blk.1.attn_q.weight", out, 8, &err) == WB_ERR_ARG);
}

/* ======================================================================================
 * GGUF model loading: the same weights from safetensors and from a GGUF give the same logits.
 *
 * Each case writes a small random model of one family twice: a Hugging Face directory
 * (config.json, model.safetensors, tokenizer.json) and a GGUF made here the way llama.cpp's
 * convert_hf_to_gguf.py lays it out: its tensor names, ggml dims innermost first, GPT-2's
 * Conv1D weights transposed to [out, in], the llama architecture's Q/K rows (and biases) in
 * interleaved-pair order (re-implemented below, independently of wb_gguf_qk_row), no
 * output.weight when tied, Phi-3's LongRoPE factors as tensors, config values as metadata.
 * Matrices are stored in the case's type; the safetensors copy holds exactly the values that
 * type represents (rounded, or dequantized), so the two loads compute on the same numbers.
 * ====================================================================================== */

#include <math.h>
#include <sys/stat.h>

#include "fixture.h"
#include "quant.h"
#include "quant_fallback.h"

#define RT_V 640
#define RT_C 256
#define RT_NH 4
#define RT_NKV 2
#define RT_HD 64
#define RT_F 512
#define RT_L 2
#define RT_T 64
#define RT_ORIG 32

enum { TY_F32, TY_F16, TY_BF16, TY_Q8_0, TY_Q4_0, TY_KMIX, TY_FALLBACK, TY_Q5_0, TY_Q5KMIX, TY_MINS, TY_COUNT };
static const char *const TY_NAME[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K/Q6_K",
                                      "Q2_K", "Q5_0", "Q5_K/Q6_K", "Q4_1/Q5_1"};

typedef struct rt_tensor {
    char hf[96];
    int64_t d0, d1;  /* safetensors shape ([d0] when d1 = 0) */
    float *v;        /* values in safetensors order, replaced by what the GGUF type holds */
} rt_tensor;

typedef struct rt_model {
    const char *arch;
    int tied;
    rt_tensor t[64];
    int n;
} rt_model;

static uint64_t rt_rng;
static float rt_rand(void) {
    rt_rng ^= rt_rng << 13, rt_rng ^= rt_rng >> 7, rt_rng ^= rt_rng << 17;
    return (float)((rt_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void rt_add(rt_model *m, int64_t d0, int64_t d1, float scale, const char *fmt, int l) {
    rt_tensor *t = &m->t[m->n++];
    snprintf(t->hf, sizeof t->hf, fmt, l);
    t->d0 = d0, t->d1 = d1;
    const size_t ne = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    t->v = malloc(ne * sizeof *t->v);
    for (size_t i = 0; i < ne; i++)
        t->v[i] = scale < 0 ? 1.0f + 0.1f * rt_rand() : scale * rt_rand();
}

static void rt_free(rt_model *m) {
    for (int i = 0; i < m->n; i++) free(m->t[i].v);
}

static void rt_make(rt_model *m, const char *arch, uint64_t seed) {
    memset(m, 0, sizeof *m);
    rt_rng = seed * 0x9E3779B97F4A7C15ull + 7;
    m->arch = arch;
    const int C = RT_C, F = RT_F, Q = RT_NH * RT_HD, KV = RT_NKV * RT_HD;
    const float w = 0.08f; /* small enough that the logits stay O(1) */
    if (!strcmp(arch, "gpt2")) {
        m->tied = 1;
        rt_add(m, RT_V, C, 0.3f, "wte.weight", 0);
        rt_add(m, RT_T, C, 0.1f, "wpe.weight", 0);
        for (int l = 0; l < RT_L; l++) {
            rt_add(m, C, 0, -1, "h.%d.ln_1.weight", l);
            rt_add(m, C, 0, 0.05f, "h.%d.ln_1.bias", l);
            rt_add(m, C, 3 * C, w, "h.%d.attn.c_attn.weight", l); /* Conv1D [in, out] */
            rt_add(m, 3 * C, 0, 0.05f, "h.%d.attn.c_attn.bias", l);
            rt_add(m, C, C, w, "h.%d.attn.c_proj.weight", l);
            rt_add(m, C, 0, 0.05f, "h.%d.attn.c_proj.bias", l);
            rt_add(m, C, 0, -1, "h.%d.ln_2.weight", l);
            rt_add(m, C, 0, 0.05f, "h.%d.ln_2.bias", l);
            rt_add(m, C, F, w, "h.%d.mlp.c_fc.weight", l);
            rt_add(m, F, 0, 0.05f, "h.%d.mlp.c_fc.bias", l);
            rt_add(m, F, C, w, "h.%d.mlp.c_proj.weight", l);
            rt_add(m, C, 0, 0.05f, "h.%d.mlp.c_proj.bias", l);
        }
        rt_add(m, C, 0, -1, "ln_f.weight", 0);
        rt_add(m, C, 0, 0.05f, "ln_f.bias", 0);
        return;
    }
    const int llama = !strcmp(arch, "llama"), qwen2 = !strcmp(arch, "qwen2"),
              phi3 = !strcmp(arch, "phi3");
    m->tied = qwen2;
    rt_add(m, RT_V, C, 0.3f, "model.embed_tokens.weight", 0);
    for (int l = 0; l < RT_L; l++) {
        rt_add(m, C, 0, -1, "model.layers.%d.input_layernorm.weight", l);
        if (phi3) {
            rt_add(m, Q + 2 * KV, C, w, "model.layers.%d.self_attn.qkv_proj.weight", l);
        } else {
            rt_add(m, Q, C, w, "model.layers.%d.self_attn.q_proj.weight", l);
            rt_add(m, KV, C, w, "model.layers.%d.self_attn.k_proj.weight", l);
            rt_add(m, KV, C, w, "model.layers.%d.self_attn.v_proj.weight", l);
            /* llama with attention_bias (all four), qwen2's q/k/v biases */
            rt_add(m, Q, 0, 0.2f, "model.layers.%d.self_attn.q_proj.bias", l);
            rt_add(m, KV, 0, 0.2f, "model.layers.%d.self_attn.k_proj.bias", l);
            rt_add(m, KV, 0, 0.2f, "model.layers.%d.self_attn.v_proj.bias", l);
        }
        rt_add(m, C, Q, w, "model.layers.%d.self_attn.o_proj.weight", l);
        if (llama) rt_add(m, C, 0, 0.05f, "model.layers.%d.self_attn.o_proj.bias", l);
        rt_add(m, C, 0, -1, "model.layers.%d.post_attention_layernorm.weight", l);
        if (phi3) {
            rt_add(m, 2 * F, C, w, "model.layers.%d.mlp.gate_up_proj.weight", l);
        } else {
            rt_add(m, F, C, w, "model.layers.%d.mlp.gate_proj.weight", l);
            rt_add(m, F, C, w, "model.layers.%d.mlp.up_proj.weight", l);
        }
        rt_add(m, C, F, w, "model.layers.%d.mlp.down_proj.weight", l);
    }
    rt_add(m, C, 0, -1, "model.norm.weight", 0);
    if (!m->tied) rt_add(m, RT_V, C, 0.3f, "lm_head.weight", 0);
}

static int rt_ends(const char *s, const char *end) {
    size_t n = strlen(s), k = strlen(end);
    return n >= k && !strcmp(s + n - k, end);
}

static int rt_is_conv1d(const rt_model *m, const rt_tensor *t) {
    return !strcmp(m->arch, "gpt2") && t->d1 && !rt_ends(t->hf, "wte.weight") &&
           !rt_ends(t->hf, "wpe.weight");
}

/* llama.cpp's LlamaModel.permute: rows viewed as [heads, 2, hd/2] with the middle two axes
 * swapped. out[h][i][a] = in[h][a][i], i.e. GGUF row h*hd + 2i + a holds HF row
 * h*hd + a*hd/2 + i. */
static int rt_permuted(const rt_model *m, const rt_tensor *t) {
    return !strcmp(m->arch, "llama") &&
           (strstr(t->hf, "q_proj.") != NULL || strstr(t->hf, "k_proj.") != NULL);
}

/* The GGUF type of a tensor in case `ty`: vectors stay F32; Q4_K_M-like mix for KMIX. */
static uint32_t rt_type(const rt_model *m, const rt_tensor *t, int ty) {
    if (!t->d1 || !strcmp(t->hf, "wpe.weight")) return WB_GGML_F32;
    switch (ty) {
    case TY_F16: return WB_GGML_F16;
    case TY_BF16: return WB_GGML_BF16;
    case TY_Q8_0: return WB_GGML_Q8_0;
    case TY_Q4_0: return WB_GGML_Q4_0;
    case TY_KMIX:
        return strstr(t->hf, "down_proj") || strstr(t->hf, "mlp.c_proj") ||
                       strstr(t->hf, "embed") || strstr(t->hf, "wte") || strstr(t->hf, "lm_head")
                   ? WB_GGML_Q6_K
                   : WB_GGML_Q4_K;
    case TY_Q5KMIX: /* a Q5_K_M file's mix */
        return strstr(t->hf, "down_proj") || strstr(t->hf, "mlp.c_proj") ||
                       strstr(t->hf, "embed") || strstr(t->hf, "wte") || strstr(t->hf, "lm_head")
                   ? WB_GGML_Q6_K
                   : WB_GGML_Q5_K;
    case TY_FALLBACK: return WB_GGML_Q2_K; /* the type still requantized to Q8_0 at load */
    case TY_MINS: /* the types llama.cpp falls back to for Q4_K / Q5_K where rows are not 256-multiples */
        return strstr(t->hf, "embed") || strstr(t->hf, "wte") || strstr(t->hf, "lm_head") ||
                       strstr(t->hf, "down_proj") || strstr(t->hf, "mlp.c_proj")
                   ? WB_GGML_Q5_1
                   : WB_GGML_Q4_1;
    case TY_Q5_0: return WB_GGML_Q5_0; /* every matrix, as Q4_K_M files hold 896-wide rows */
    default: (void)m; return WB_GGML_F32;
    }
}

/* Random K-quant blocks with sane scales: any bits are valid values. */
static void rt_kblocks(uint8_t *p, size_t n_blocks, uint32_t type) {
    const size_t bb = type == WB_GGML_Q4_K ? 144 : 210;
    for (size_t b = 0; b < n_blocks; b++, p += bb) {
        for (size_t i = 0; i < bb; i++) {
            rt_rng = rt_rng * 6364136223846793005ull + 1442695040888963407ull;
            p[i] = (uint8_t)(rt_rng >> 33);
        }
        const uint16_t d = wb_f32_to_f16(type == WB_GGML_Q4_K ? 0.0015f : 0.0008f),
                       dm = wb_f32_to_f16(0.004f);
        if (type == WB_GGML_Q4_K) memcpy(p, &d, 2), memcpy(p + 2, &dm, 2);
        else memcpy(p + bb - 2, &d, 2);
    }
}

/* Random blocks of a fallback type with sane scales (d, then m / dmin, lead every block). */
static void rt_fblocks(uint8_t *p, size_t n_blocks, uint32_t type) {
    const size_t bb = wb_fallback_block_bytes(type);
    for (size_t b = 0; b < n_blocks; b++, p += bb) {
        for (size_t i = 0; i < bb; i++) {
            rt_rng = rt_rng * 6364136223846793005ull + 1442695040888963407ull;
            p[i] = (uint8_t)(rt_rng >> 33);
        }
        const int k = type == WB_GGML_Q5_K;
        /* ranges like rt_make's: matrices about +-0.08 (Q5_K: d * sc * q up to 63 * 31 * d;
         * Q2_K: 15 * 3 * d), the embeddings (Q5_1) +-0.3 */
        if (type == WB_GGML_Q2_K) { /* scales and values first, then d and dmin */
            const uint16_t d2 = wb_f32_to_f16(0.0018f), m2 = wb_f32_to_f16(0.0052f);
            memcpy(p + 80, &d2, 2), memcpy(p + 82, &m2, 2);
            continue;
        }
        const uint16_t d = wb_f32_to_f16(k ? 0.00008f : type == WB_GGML_Q4_1 ? 0.011f : type == WB_GGML_Q5_1 ? 0.02f : 0.0052f),
                       m = wb_f32_to_f16(k ? 0.0012f : type == WB_GGML_Q5_1 ? -0.3f : -0.08f);
        memcpy(p, &d, 2);
        if (type != WB_GGML_Q5_0) memcpy(p + 2, &m, 2);
    }
}

/* Convert one tensor: GGUF dims and data (written to w) and the values the type holds, moved
 * back into t->v in safetensors order. */
/* A hostile variation of the file rt_write makes (0: none). */
enum {
    MUT_NONE, MUT_SWAP_DIMS, MUT_Q5_K, MUT_EXTRA, MUT_UNUSED, MUT_NAN, MUT_NAN_SCALE, MUT_MISSING,
    MUT_EXPERTS, MUT_ROPE_DIM, MUT_WINDOW, MUT_ROPE_FREQS, MUT_ROPE_LINEAR, MUT_NO_TOKENIZER,
    MUT_Q5_K_HUGE, MUT_Q5_0_INF, MUT_Q5_0_NAN_QK, MUT_IQ4_XS_HUGE, MUT_Q3_K_NAN
};
static int rt_mut;
static int rt_llama3;
#define RT_TEMPLATE "{{ bos_token }}{{ messages[0].content }}!"
#define RT_BOS_ID 7
static int rt_q5_twin; /* Q5_0 tensors written as the Q8_0 blocks of the same values instead */
static int rt_gguf_tok; /* tokenizer and chat template in the GGUF metadata, no tokenizer.json */ /* llama: Llama 3.1 RoPE scaling (factor 8, low 1, high 4, original 8192) */

static void rt_convert(const rt_model *m, rt_tensor *t, int ty, wb_gguf_writer *gw) {
    wb_err err = {0};
    const int conv = rt_is_conv1d(m, t), perm = rt_permuted(m, t);
    const int64_t rows = !t->d1 ? 1 : conv ? t->d1 : t->d0, cols = !t->d1 ? t->d0 : conv ? t->d0 : t->d1;
    const size_t ne = (size_t)rows * (size_t)cols;
    float *g = malloc(ne * sizeof *g); /* GGUF order: [rows][cols] */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            g[r * cols + c] = conv ? t->v[c * rows + r] : t->v[r * cols + c];
    if (perm) { /* rows (or, for a bias, elements) reordered within each head */
        const int64_t n = t->d1 ? rows : cols, per = t->d1 ? cols : 1, half = RT_HD / 2;
        float *p = malloc(ne * sizeof *p);
        for (int64_t hr = 0; hr < n; hr++) {
            const int64_t h = hr / RT_HD, a = (hr % RT_HD) / half, i = hr % half;
            memcpy(p + (h * RT_HD + 2 * i + a) * per, g + hr * per, (size_t)per * sizeof *p);
        }
        free(g);
        g = p;
    }
    char gname[96];
    CHECK(wb_gguf_name_from_hf(m->arch, t->hf, gname, sizeof gname, &err) == WB_OK);
    const uint32_t type = rt_type(m, t, ty);
    int64_t dims[2] = {cols, rows};
    if (rt_mut == MUT_MISSING && !strcmp(gname, "blk.1.ffn_down.weight")) {
        free(g);
        return;
    }
    if (rt_mut == MUT_SWAP_DIMS && !strcmp(gname, "blk.0.attn_v.weight"))
        dims[0] = rows, dims[1] = cols; /* the HF order, as a converter that forgot to reverse */
    if (rt_mut == MUT_NAN && !strcmp(gname, "output_norm.weight")) g[7] = NAN;
    if (rt_mut == MUT_Q5_K_HUGE && !strcmp(gname, "blk.0.ffn_gate.weight")) {
        /* Q5_K blocks whose values reach 65504 * 63 * 31: beyond any Q8_0 (f16) scale, once a
         * reason to refuse them (they were requantized); now read as they are */
        const size_t nb = ne / 256;
        uint8_t *raw = calloc(nb, 176);
        for (size_t b = 0; b < nb; b++) {
            const uint16_t d = 0x7bff; /* 65504 */
            memcpy(raw + b * 176, &d, 2);
            memset(raw + b * 176 + 4, 0xff, 12 + 32 + 128);
        }
        CHECK(wb_gguf_add_tensor_raw(gw, gname, 2, dims, WB_GGML_Q5_K, raw, nb * 176, &err) == WB_OK);
        free(raw);
        free(g);
        return;
    }
    if ((rt_mut == MUT_IQ4_XS_HUGE && !strcmp(gname, "blk.1.ffn_up.weight")) ||
        (rt_mut == MUT_Q3_K_NAN && !strcmp(gname, "blk.0.attn_q.weight"))) {
        /* IQ4_XS blocks with d = 65504 and group scales s - 32 = -32 (finite values, a group
         * scale no f16 holds); Q3_K blocks of zeros with block 2's d NaN (a permuted tensor) */
        const int xs = rt_mut == MUT_IQ4_XS_HUGE;
        const size_t bb = xs ? 136 : 110, nb = ne / 256;
        uint8_t *raw = calloc(nb, bb);
        for (size_t b = 0; b < nb; b++) {
            const uint16_t d = xs ? 0x7bff : b == 2 ? 0x7e00 : 0x3c00;
            memcpy(raw + b * bb + (xs ? 0 : 108), &d, 2);
        }
        CHECK(wb_gguf_add_tensor_raw(gw, gname, 2, dims, xs ? WB_GGML_IQ4_XS : WB_GGML_Q3_K, raw,
                                     nb * bb, &err) == WB_OK);
        free(raw);
        free(g);
        return;
    }
    if ((rt_mut == MUT_Q5_0_INF && !strcmp(gname, "blk.1.ffn_down.weight")) ||
        (rt_mut == MUT_Q5_0_NAN_QK && !strcmp(gname, "blk.0.attn_k.weight"))) {
        /* Q5_0 blocks with block 5's scale Inf (mapped) or NaN (a permuted, copied tensor) */
        const size_t nb = ne / 32;
        uint8_t *raw = malloc(nb * 22);
        rt_fblocks(raw, nb, WB_GGML_Q5_0);
        const uint16_t bad = rt_mut == MUT_Q5_0_INF ? 0x7c00 : 0x7e00;
        memcpy(raw + 5 * 22, &bad, 2);
        CHECK(wb_gguf_add_tensor_raw(gw, gname, 2, dims, WB_GGML_Q5_0, raw, nb * 22, &err) == WB_OK);
        free(raw);
        free(g);
        return;
    }
    if ((rt_mut == MUT_Q5_K && !strcmp(gname, "blk.0.ffn_up.weight")) ||
        (rt_mut == MUT_NAN_SCALE && !strcmp(gname, "blk.1.ffn_down.weight"))) {
        const int q5 = rt_mut == MUT_Q5_K; /* now IQ2_XXS: a grid type still not read */
        const size_t bb = q5 ? 66 : 34, nb = ne / (q5 ? 256 : 32);
        uint8_t *raw = calloc(nb, bb);
        if (!q5) { /* Q8_0 blocks of ones, block 3's scale an f16 NaN */
            for (size_t b = 0; b < nb; b++) {
                const uint16_t d = b == 3 ? 0x7e00 : wb_f32_to_f16(0.01f);
                memcpy(raw + b * bb, &d, 2);
                memset(raw + b * bb + 2, 1, 32);
            }
        }
        CHECK(wb_gguf_add_tensor_raw(gw, gname, 2, dims, q5 ? WB_GGML_IQ2_XXS : WB_GGML_Q8_0, raw, nb * bb,
                                     &err) == WB_OK);
        free(raw);
        free(g);
        return;
    }
    const int nd = t->d1 ? 2 : 1;
    if (type == WB_GGML_Q4_K || type == WB_GGML_Q6_K) {
        const size_t nb = ne / 256, bytes = nb * (type == WB_GGML_Q4_K ? 144 : 210);
        uint8_t *raw = malloc(bytes);
        rt_kblocks(raw, nb, type);
        CHECK_MSG(wb_gguf_add_tensor_raw(gw, gname, nd, dims, type, raw, bytes, &err) == WB_OK, "%s", err.msg);
        const wb_qtype q = type == WB_GGML_Q4_K ? WB_QT_Q4_K : WB_QT_Q6_K;
        for (int64_t r = 0; r < rows; r++)
            wb_dequantize_row(q, g + r * cols, raw + (size_t)r * wb_quant_row_bytes(q, cols), (int)cols);
        free(raw);
    } else if (wb_fallback_block_values(type)) { /* the values: exactly what the blocks hold */
        const size_t bb = wb_fallback_block_bytes(type),
                     nb = ne / (size_t)wb_fallback_block_values(type);
        uint8_t *raw = malloc(nb * bb);
        rt_fblocks(raw, nb, type);
        if (type == WB_GGML_Q5_0 && rt_q5_twin) { /* d and q - 16 as Q8_0: the same values */
            uint8_t *q8 = malloc(nb * 34);
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *p = raw + b * 22;
                const uint32_t h = (uint32_t)p[2] | (uint32_t)p[3] << 8 | (uint32_t)p[4] << 16 | (uint32_t)p[5] << 24;
                memcpy(q8 + b * 34, p, 2);
                for (int j = 0; j < 32; j++)
                    q8[b * 34 + 2 + j] = (uint8_t)(int8_t)((((j < 16 ? p[6 + j] : p[6 + j - 16] >> 4) & 15) |
                                                            (int)((h >> j) & 1) << 4) - 16);
            }
            CHECK_MSG(wb_gguf_add_tensor_raw(gw, gname, nd, dims, WB_GGML_Q8_0, q8, nb * 34, &err) == WB_OK, "%s", err.msg);
            free(q8);
        } else {
            CHECK_MSG(wb_gguf_add_tensor_raw(gw, gname, nd, dims, type, raw, nb * bb, &err) == WB_OK, "%s", err.msg);
        }
        CHECK(wb_fallback_dequantize_row(type, g, raw, (int64_t)ne) == 0);
        free(raw);
    } else {
        CHECK_MSG(wb_gguf_add_tensor(gw, gname, nd, dims, type, g, &err) == WB_OK, "%s", err.msg);
        /* the values the type holds */
        if (type == WB_GGML_F16 || type == WB_GGML_BF16) {
            for (size_t i = 0; i < ne; i++)
                g[i] = type == WB_GGML_F16 ? wb_f16_to_f32(wb_f32_to_f16(g[i]))
                                           : wb_bf16_to_f32(wb_f32_to_bf16(g[i]));
        } else if (type != WB_GGML_F32) {
            const wb_qtype q = type == WB_GGML_Q8_0 ? WB_QT_Q8_0 : WB_QT_Q4_0;
            uint8_t *blk = malloc(wb_quant_row_bytes(q, cols));
            for (int64_t r = 0; r < rows; r++) {
                wb_quantize_row(q, blk, g + r * cols, (int)cols);
                wb_dequantize_row(q, g + r * cols, blk, (int)cols);
            }
            free(blk);
        }
    }
    /* back to safetensors order */
    float *u = malloc(ne * sizeof *u);
    memcpy(u, g, ne * sizeof *u);
    if (perm) {
        const int64_t n = t->d1 ? rows : cols, per = t->d1 ? cols : 1, half = RT_HD / 2;
        for (int64_t hr = 0; hr < n; hr++) {
            const int64_t h = hr / RT_HD, a = (hr % RT_HD) / half, i = hr % half;
            memcpy(u + hr * per, g + (h * RT_HD + 2 * i + a) * per, (size_t)per * sizeof *u);
        }
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            t->v[conv ? c * rows + r : r * cols + c] = u[r * cols + c];
    free(u);
    free(g);
}

static void rt_meta(const rt_model *m, wb_gguf_writer *w) {
    wb_err err = {0};
    char k[96];
    const char *a = m->arch;
#define U32(key, v) do { snprintf(k, sizeof k, "%s.%s", a, key); CHECK(wb_gguf_set_u32(w, k, v, &err) == WB_OK); } while (0)
#define F32(key, v) do { snprintf(k, sizeof k, "%s.%s", a, key); CHECK(wb_gguf_set_f32(w, k, v, &err) == WB_OK); } while (0)
    CHECK(wb_gguf_set_str(w, "general.architecture", a, strlen(a), &err) == WB_OK);
    U32("embedding_length", RT_C);
    U32("block_count", RT_L);
    U32("context_length", RT_T);
    if (!strcmp(a, "gpt2")) {
        U32("attention.head_count", RT_NH);
        U32("feed_forward_length", RT_F);
        F32("attention.layer_norm_epsilon", 1e-5f);
    } else {
        U32("attention.head_count", RT_NH);
        U32("attention.head_count_kv", RT_NKV);
        U32("feed_forward_length", RT_F);
        U32("rope.dimension_count", rt_mut == MUT_ROPE_DIM ? RT_HD / 2 : RT_HD);
        F32("rope.freq_base", 10000.0f);
        F32("attention.layer_norm_rms_epsilon", 1e-6f);
    }
    if (!strcmp(a, "phi3")) {
        U32("rope.scaling.original_context_length", RT_ORIG);
        U32("attention.sliding_window", 48);
        const double ratio = (double)RT_T / RT_ORIG;
        F32("rope.scaling.attn_factor", (float)sqrt(1 + log(ratio) / log((double)RT_ORIG)));
        float lf[RT_HD / 2], sf[RT_HD / 2];
        for (int i = 0; i < RT_HD / 2; i++) sf[i] = 1.0f + 0.25f * i, lf[i] = 1.5f + 0.5f * i;
        const int64_t d = RT_HD / 2;
        CHECK(wb_gguf_add_tensor(w, "rope_factors_long.weight", 1, &d, WB_GGML_F32, lf, &err) == WB_OK);
        CHECK(wb_gguf_add_tensor(w, "rope_factors_short.weight", 1, &d, WB_GGML_F32, sf, &err) == WB_OK);
    }
    if (rt_mut == MUT_EXPERTS) U32("expert_count", 8);
    if (rt_mut == MUT_WINDOW) U32("attention.sliding_window", 16);
    if (rt_mut == MUT_ROPE_LINEAR) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        CHECK(wb_gguf_set_str(w, k, "linear", 6, &err) == WB_OK);
    }
    float ones[256];
    for (int i = 0; i < 256; i++) ones[i] = 1.0f;
    const int64_t d32 = RT_HD / 2, dc = RT_C;
    if (rt_mut == MUT_ROPE_FREQS)
        CHECK(wb_gguf_add_tensor(w, "rope_freqs.weight", 1, &d32, WB_GGML_F32, ones, &err) == WB_OK);
    if (rt_llama3) { /* the converter's divisors, in float32 as it computes them */
        float ff[RT_HD / 2];
        const float lo_wl = 8192.0f / 1.0f, hi_wl = 8192.0f / 4.0f;
        for (int i = 0; i < RT_HD / 2; i++) {
            const float freq = 1.0f / powf(10000.0f, (float)(2 * i) / RT_HD),
                        wl = 2.0f * 3.14159265f / freq;
            if (wl < hi_wl) ff[i] = 1.0f;
            else if (wl > lo_wl) ff[i] = 8.0f;
            else {
                const float sm = (8192.0f / wl - 1.0f) / (4.0f - 1.0f);
                ff[i] = 1.0f / ((1.0f - sm) / 8.0f + sm);
            }
        }
        CHECK(wb_gguf_add_tensor(w, "rope_freqs.weight", 1, &d32, WB_GGML_F32, ff, &err) == WB_OK);
    }
    if (rt_mut == MUT_EXTRA)
        CHECK(wb_gguf_add_tensor(w, "blk.0.attn_q_norm.weight", 1, &dc, WB_GGML_F32, ones, &err) == WB_OK);
    if (rt_mut == MUT_UNUSED)
        CHECK(wb_gguf_add_tensor(w, "blk.1.attn_output.bias", 1, &dc, WB_GGML_F32, ones, &err) == WB_OK);
#undef U32
#undef F32
}

static void rt_config(const rt_model *m, const char *dir) {
    char cfg[2048], path[1024];
    if (!strcmp(m->arch, "gpt2")) {
        snprintf(cfg, sizeof cfg, "{\"model_type\":\"gpt2\",\"vocab_size\":%d,\"n_positions\":%d,"
                 "\"n_ctx\":%d,\"n_embd\":%d,\"n_layer\":%d,\"n_head\":%d,\"n_inner\":%d,"
                 "\"layer_norm_epsilon\":1e-5}", RT_V, RT_T, RT_T, RT_C, RT_L, RT_NH, RT_F);
    } else {
        char extra[1024] = "";
        if (!strcmp(m->arch, "llama"))
            snprintf(extra, sizeof extra, ",\"attention_bias\":true%s",
                     rt_llama3 ? ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,"
                                 "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                                 "\"original_max_position_embeddings\":8192}" : "");
        if (!strcmp(m->arch, "phi3")) {
            char sf[400] = "", lf[400] = "";
            for (int i = 0; i < RT_HD / 2; i++) {
                snprintf(sf + strlen(sf), sizeof sf - strlen(sf), "%s%.9g", i ? "," : "", 1.0f + 0.25f * i);
                snprintf(lf + strlen(lf), sizeof lf - strlen(lf), "%s%.9g", i ? "," : "", 1.5f + 0.5f * i);
            }
            snprintf(extra, sizeof extra, ",\"original_max_position_embeddings\":%d,"
                     "\"sliding_window\":48,\"rope_scaling\":{\"type\":\"longrope\","
                     "\"short_factor\":[%s],\"long_factor\":[%s]}", RT_ORIG, sf, lf);
        }
        snprintf(cfg, sizeof cfg, "{\"model_type\":\"%s\",\"vocab_size\":%d,\"hidden_size\":%d,"
                 "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
                 "\"num_key_value_heads\":%d,\"max_position_embeddings\":%d,\"rms_norm_eps\":1e-6,"
                 "\"rope_theta\":10000.0,\"tie_word_embeddings\":%s%s}", m->arch, RT_V, RT_C, RT_F,
                 RT_L, RT_NH, RT_NKV, RT_T, m->tied ? "true" : "false", extra);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    fixture_write_text(path, cfg);
}

/* The safetensors copy: BF16 case matrices as BF16 (so both loads use the BF16 kernels), the
 * rest F32. */
static void rt_safetensors(const rt_model *m, const char *dir, int ty) {
    wb_tensor_view tv[64];
    uint16_t *h[64] = {0};
    for (int i = 0; i < m->n; i++) {
        const rt_tensor *t = &m->t[i];
        const size_t ne = (size_t)t->d0 * (size_t)(t->d1 ? t->d1 : 1);
        const int bf = ty == TY_BF16 && rt_type(m, t, ty) == WB_GGML_BF16;
        tv[i] = (wb_tensor_view){.name = t->hf, .dtype = bf ? WB_BF16 : WB_F32,
                                 .ndim = t->d1 ? 2 : 1, .shape = {t->d0, t->d1},
                                 .data = t->v, .nbytes = ne * (bf ? 2 : 4)};
        if (bf) {
            h[i] = malloc(ne * 2);
            for (size_t j = 0; j < ne; j++) h[i][j] = wb_f32_to_bf16(t->v[j]);
            tv[i].data = h[i];
        }
    }
    char path[1024];
    wb_err err = {0};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_MSG(wb_safetensors_write(path, tv, m->n, NULL, 0, &err) == WB_OK, "%s", err.msg);
    for (int i = 0; i < m->n; i++) free(h[i]);
}

/* Writes <dir>/ref (safetensors) and <dir>/model.gguf (+ tokenizer.json) for arch in type ty. */
static void rt_write(const char *dir, const char *arch, int ty, uint64_t seed) {
    rt_model m;
    rt_make(&m, arch, seed);
    wb_gguf_writer *gw = NULL;
    wb_err err = {0};
    CHECK(wb_gguf_writer_new(&gw, &err) == WB_OK);
    rt_meta(&m, gw);
    for (int i = 0; i < m.n; i++) rt_convert(&m, &m.t[i], ty, gw);
    if (rt_gguf_tok) {
        wb_tokenizer *tok = NULL;
        CHECK(wb_tokenizer_load("tests/vectors/family_qwen2_tokenizer.json", &tok, &err) == WB_OK);
        /* a bos id the template can name (Qwen2's own files have none) */
        wb_gguf_tok_specials sp = wb_gguf_tok_specials_auto();
        sp.bos_id = RT_BOS_ID;
        CHECK_MSG(wb_gguf_tokenizer_put_ex(gw, tok, RT_TEMPLATE, &sp, &err) == WB_OK, "%s", err.msg);
        wb_tokenizer_free(tok);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    CHECK_MSG(wb_gguf_write(gw, path, &err) == WB_OK, "%s", err.msg);
    wb_gguf_writer_free(gw);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (rt_mut != MUT_NO_TOKENIZER && !rt_gguf_tok)
        fixture_copy_file("tests/vectors/family_qwen2_tokenizer.json", path);
    snprintf(path, sizeof path, "%s/ref", dir);
    CHECK(mkdir(path, 0700) == 0);
    rt_config(&m, path);
    rt_safetensors(&m, path, ty);
    snprintf(path, sizeof path, "%s/ref/tokenizer.json", dir);
    fixture_copy_file("tests/vectors/family_qwen2_tokenizer.json", path);
    rt_free(&m);
}

static float *rt_logits(const char *path, int weights, int n) {
    wb_model *mo = NULL;
    wb_err err = {0};
    wb_model_params p = wb_model_default_params();
    p.weights = weights;
    CHECK_MSG(wb_model_load_ex(path, &p, &mo, &err) == WB_OK, "%s: %s", path, err.msg);
    if (!mo) return NULL;
    int32_t ids[64];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 97 + 13) % RT_V);
    float *lg = malloc((size_t)n * RT_V * sizeof *lg);
    CHECK_MSG(wb_model_forward(mo, ids, n, lg, 1, &err) == WB_OK, "%s", err.msg);
    wb_model_free(mo);
    return lg;
}

static double rt_maxdiff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    if (scale) *scale = s;
    return d;
}

/* Every tensor the GGUF model loaded, row by row as the forward pass reads it (wb_mat_row:
 * dequantized, widened), equals the safetensors model's: the reading itself, exactly, whatever
 * the kernels then do with the rows. */
static void rt_rows_equal(const char *gpath, const char *rpath, int rweights, const char *what) {
    wb_model *a = NULL, *b = NULL;
    wb_err err = {0};
    wb_model_params rp = wb_model_default_params();
    rp.weights = rweights;
    CHECK_MSG(wb_model_load(gpath, &a, &err) == WB_OK, "%s", err.msg);
    CHECK_MSG(wb_model_load_ex(rpath, &rp, &b, &err) == WB_OK, "%s", err.msg);
    const wb_weight_store *sa = a ? wb_model_store(a) : NULL, *sb = b ? wb_model_store(b) : NULL;
    CHECK(sa && sb && sa->n_loaded == sb->n_loaded && sa->n_loaded > 0);
    int bad = 0;
    for (int i = 0; sa && sb && i < sa->n_loaded && i < sb->n_loaded; i++) {
        const wb_loaded_tensor *x = &sa->loaded[i], *y = &sb->loaded[i];
        CHECK(!strcmp(x->name, y->name));
        if (x->mat.w && y->mat.w) {
            CHECK(x->mat.rows == y->mat.rows && x->mat.cols == y->mat.cols);
            /* tiled matrices start on a cache line, copied or converted ones included */
            CHECK_MSG(!x->mat.tiles || ((uintptr_t)x->mat.w & 63) == 0, "%s: %s at %p", what, x->name, x->mat.w);
            CHECK_MSG(!y->mat.tiles || ((uintptr_t)y->mat.w & 63) == 0, "%s: %s at %p", what, y->name, y->mat.w);
            float *u = malloc((size_t)x->mat.cols * 2 * sizeof *u), *v = u + x->mat.cols;
            for (int r = 0; r < x->mat.rows && !bad; r++) {
                wb_mat_row(&x->mat, r, u);
                wb_mat_row(&y->mat, r, v);
                if (memcmp(u, v, (size_t)x->mat.cols * sizeof *u)) {
                    bad = 1;
                    CHECK_MSG(0, "%s: %s row %d differs", what, x->name, r);
                }
            }
            free(u);
        } else if (x->vec && y->vec) {
            const size_t n = (size_t)x->d0 * (size_t)(x->d1 ? x->d1 : 1);
            CHECK_MSG(!memcmp(x->vec, y->vec, n * sizeof(float)), "%s: %s differs", what, x->name);
        } else {
            CHECK_MSG(0, "%s: %s loaded as a matrix on one side only", what, x->name);
        }
    }
    wb_model_free(a);
    wb_model_free(b);
}

static void rt_case(const char *arch, int ty) {
    char *dir = fixture_new_dir("gguf_rt");
    rt_write(dir, arch, ty, (uint64_t)(ty * 31 + strlen(arch)));
    char gpath[512], rpath[512];
    snprintf(gpath, sizeof gpath, "%s/model.gguf", dir);
    snprintf(rpath, sizeof rpath, "%s/ref", dir);
    char what[64];
    snprintf(what, sizeof what, "%s %s", arch, TY_NAME[ty]);
    /* Q2_K is Q8_0 once loaded: the same rows as the safetensors model's values quantized to
     * Q8_0 at load; the other types are read as they are (the values exactly) */
    rt_rows_equal(gpath, rpath, ty == TY_FALLBACK ? WB_WEIGHTS_Q8_0 : 0, what);
    const int n = !strcmp(arch, "phi3") ? 40 : 12; /* phi3: past original_max, long factors */
    float *lg = rt_logits(gpath, 0, n), *ref = rt_logits(rpath, 0, n);
    if (lg && ref) {
        double scale, d = rt_maxdiff(lg, ref, (size_t)n * RT_V, &scale);
        /* the same numbers through the same kernels: exact for the float types; quantized
         * matrices multiply with on-the-fly quantized activations (quant.c's integer dots), so
         * against the F32 reference they agree to the activation rounding only (measured: Q8_0
         * and Q4_0 1-2% of the logit range; Q4_K/Q6_K 1% for the Llama-style ones, 8% for GPT-2
         * with these random blocks; the fallback types, as Q8_0, 1-3%; Q5_0 1-2%); the rows themselves are
         * checked exactly above */
        const double tol = ty <= TY_BF16 ? 0.0 : ty == TY_KMIX || ty == TY_Q5KMIX ? 0.12 * scale : 0.05 * scale;
        CHECK_MSG(d <= tol, "%s %s: max |logit diff| %.3g (scale %.3g, tolerance %.3g)", arch,
                  TY_NAME[ty], d, scale, tol);
        CHECK(scale > 0.1); /* not a model of zeros */
        printf("  %s %-9s max |diff| %.3g of %.3g\n", arch, TY_NAME[ty], d, scale);
    }
    if (ty == TY_Q8_0 || ty == TY_Q4_0 || ty == TY_FALLBACK) {
        /* the same blocks quantized at load from the dequantized values: tight */
        float *rq = rt_logits(rpath, ty == TY_Q4_0 ? WB_WEIGHTS_Q4_0 : WB_WEIGHTS_Q8_0, n);
        if (lg && rq) {
            double scale, d = rt_maxdiff(lg, rq, (size_t)n * RT_V, &scale);
            CHECK_MSG(d <= 1e-4 * scale, "%s %s vs quantized at load: max |diff| %.3g of %.3g",
                      arch, TY_NAME[ty], d, scale);
        }
        free(rq);
    }
    if (ty == TY_Q5_0) {
        /* the same file with every Q5_0 block written as the Q8_0 block of the same values (d,
         * q - 16): the same integer sums and scales, so the same logits bit for bit (the Q5_0
         * kernels against the Q8_0 ones, tiles included, prompt and decode) */
        char *dir2 = fixture_new_dir("gguf_rt_q8twin");
        rt_q5_twin = 1;
        rt_write(dir2, arch, ty, (uint64_t)(ty * 31 + strlen(arch)));
        rt_q5_twin = 0;
        char tpath[512];
        snprintf(tpath, sizeof tpath, "%s/model.gguf", dir2);
        rt_rows_equal(gpath, tpath, 0, what);
        float *tw = rt_logits(tpath, 0, n);
        if (lg && tw)
            CHECK_MSG(memcmp(lg, tw, (size_t)n * RT_V * sizeof *lg) == 0,
                      "%s Q5_0: logits differ from the same values as Q8_0 blocks", arch);
        free(tw);
        /* one token: the decode kernels (one input) */
        float *l1 = rt_logits(gpath, 0, 1), *t1 = rt_logits(tpath, 0, 1);
        if (l1 && t1)
            CHECK_MSG(memcmp(l1, t1, RT_V * sizeof *l1) == 0,
                      "%s Q5_0: one token's logits differ from the same values as Q8_0 blocks", arch);
        free(l1);
        free(t1);
        fixture_rm_dir(dir2);
    }
    free(lg);
    free(ref);
    fixture_rm_dir(dir);
}

static void gguf_logits_match_safetensors_for_every_family_and_type(void) {
    const char *archs[] = {"gpt2", "llama", "qwen2", "phi3"};
    for (int a = 0; a < 4; a++)
        for (int ty = 0; ty < TY_COUNT; ty++) rt_case(archs[a], ty);
}

/* Llama 3.1's RoPE scaling arrives as rope_freqs.weight (no rope_scaling keys): read back into
 * the llama3 parameters, the logits equal the safetensors model's with its config. */
static void llama3_rope_frequency_table_loads_as_its_rope_scaling(void) {
    rt_llama3 = 1;
    rt_case("llama", TY_F32);
    rt_case("llama", TY_Q8_0);
    rt_llama3 = 0;
}

/* One hostile variation: the load fails with status `want`, the message naming the file and
 * `needle` (the tensor or key at fault). */
static void expect_refused(const char *arch, int ty, int mut, wb_status want, const char *needle) {
    char *dir = fixture_new_dir("gguf_bad");
    rt_mut = mut;
    rt_write(dir, arch, ty, 3);
    rt_mut = MUT_NONE;
    char path[1024];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    wb_model *m = NULL;
    wb_err err = {0};
    const wb_status s = wb_model_load(path, &m, &err);
    CHECK_MSG(s == want && m == NULL, "%s mutation %d: status %d (want %d): %s", arch, mut, s,
              want, err.msg);
    CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, needle), "%s mutation %d: \"%s\" lacks %s",
              arch, mut, err.msg, needle); if (getenv("WB_TEST_VERBOSE")) printf("  refused: %s\n", err.msg);
    wb_model_free(m);
    fixture_rm_dir(dir);
}

/* A Q5_K tensor whose values reach 65504 x 63 x 31 (more than a Q8_0 block can hold) loads:
 * its blocks are used as they are, every value exact. */
static void wide_q5_k_values_load_as_they_are(void) {
    char *dir = fixture_new_dir("gguf_q5k_wide");
    rt_mut = MUT_Q5_K_HUGE;
    rt_write(dir, "qwen2", TY_F32, 3);
    rt_mut = MUT_NONE;
    char path[1024];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    wb_model *m = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_model_load(path, &m, &err) == WB_OK, "%s", err.msg);
    const wb_weight_store *st = m ? wb_model_store(m) : NULL;
    int found = 0;
    for (int i = 0; st && i < st->n_loaded; i++) {
        const wb_loaded_tensor *x = &st->loaded[i];
        if (strcmp(x->name, "model.layers.0.mlp.gate_proj.weight")) continue;
        found = 1;
        CHECK(x->mat.w && x->mat.dtype == WB_MAT_Q5_K);
        float *row = malloc((size_t)x->mat.cols * sizeof *row);
        int bad = 0;
        for (int r = 0; row && r < x->mat.rows; r += x->mat.rows - 1) {
            wb_mat_row(&x->mat, r, row);
            for (int c = 0; c < x->mat.cols; c++) bad += row[c] != 127929312.0f; /* d sc q, dmin 0 */
        }
        CHECK_MSG(!bad, "%d values not 65504 x 63 x 31", bad);
        free(row);
    }
    CHECK(found);
    wb_model_free(m);
    fixture_rm_dir(dir);
}

static void hostile_files_are_refused_naming_the_file_and_the_tensor(void) {
    expect_refused("llama", TY_F32, MUT_SWAP_DIMS, WB_ERR_FORMAT, "blk.0.attn_v.weight");
    expect_refused("qwen2", TY_F32, MUT_Q5_K, WB_ERR_FORMAT, "IQ2_XXS");
    expect_refused("llama", TY_F32, MUT_EXTRA, WB_ERR_FORMAT, "blk.0.attn_q_norm.weight");
    expect_refused("qwen2", TY_F32, MUT_UNUSED, WB_ERR_FORMAT, "blk.1.attn_output.bias");
    expect_refused("phi3", TY_F16, MUT_NAN, WB_ERR_FORMAT, "output_norm.weight");
    expect_refused("gpt2", TY_Q8_0, MUT_NAN_SCALE, WB_ERR_FORMAT, "blk.1.ffn_down.weight");
    expect_refused("qwen2", TY_Q4_0, MUT_MISSING, WB_ERR_NOTFOUND, "blk.1.ffn_down.weight");
    expect_refused("qwen2", TY_Q5_0, MUT_Q5_0_INF, WB_ERR_FORMAT, "blk.1.ffn_down.weight");
    expect_refused("llama", TY_Q5_0, MUT_Q5_0_NAN_QK, WB_ERR_FORMAT, "blk.0.attn_k.weight");
    expect_refused("qwen2", TY_F32, MUT_IQ4_XS_HUGE, WB_ERR_FORMAT, "blk.1.ffn_up.weight");
    expect_refused("llama", TY_Q8_0, MUT_Q3_K_NAN, WB_ERR_FORMAT, "blk.0.attn_q.weight");
    expect_refused("llama", TY_F32, MUT_EXPERTS, WB_ERR_FORMAT, "expert_count");
    expect_refused("qwen2", TY_F32, MUT_ROPE_DIM, WB_ERR_FORMAT, "rope.dimension_count");
    expect_refused("llama", TY_F32, MUT_WINDOW, WB_ERR_FORMAT, "sliding_window");
    expect_refused("qwen2", TY_F32, MUT_ROPE_FREQS, WB_ERR_FORMAT, "rope_freqs.weight");
    expect_refused("qwen2", TY_F32, MUT_ROPE_LINEAR, WB_ERR_FORMAT, "rope.scaling.type");
    expect_refused("llama", TY_F32, MUT_NO_TOKENIZER, WB_ERR_NOTFOUND, "tokenizer.json");
}

/* Read and write agree: a GGUF loaded here and saved by core/gguf_save.c (which applies the
 * llama Q/K order and Llama 3's rope_freqs itself) loads back to the same logits. F16 weights
 * saved as F32 are exact, so any disagreement on layout shows as a difference. */
static void gguf_loaded_then_saved_loads_back_the_same(void) {
    const struct { const char *arch; int llama3; } cases[] = {
        {"gpt2", 0}, {"llama", 0}, {"llama", 1}, {"qwen2", 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *dir = fixture_new_dir("gguf_resave");
        rt_llama3 = cases[c].llama3;
        rt_write(dir, cases[c].arch, TY_F16, 11 + c);
        rt_llama3 = 0;
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/model.gguf", dir);
        snprintf(b, sizeof b, "%s/resaved.gguf", dir);
        wb_model *m = NULL;
        wb_err err = {0};
        CHECK_MSG(wb_model_load(a, &m, &err) == WB_OK, "%s", err.msg);
        if (m) CHECK_MSG(wb_model_save_gguf(m, NULL, NULL, b, WB_GGML_F32, &err) == WB_OK, "%s: %s",
                         cases[c].arch, err.msg);
        wb_model_free(m);
        float *la = rt_logits(a, 0, 12), *lb = rt_logits(b, 0, 12);
        if (la && lb) {
            double scale, d = rt_maxdiff(lb, la, (size_t)12 * RT_V, &scale);
            CHECK_MSG(d == 0 && scale > 0.1, "%s%s: resaved max |diff| %.3g of %.3g",
                      cases[c].arch, cases[c].llama3 ? " (llama3 rope)" : "", d, scale);
        }
        free(la);
        free(lb);
        fixture_rm_dir(dir);
    }
}

/* Files llama.cpp itself quantized (tests/vectors/gguf: llama-quantize Q4_K_M, Q6_K, Q8_0 of a
 * llama-architecture model, so with llama.cpp's Q/K row order), run on llama.cpp's prompt ids:
 * the logits of the last position and of 8 greedy steps agree with llama.cpp's own, and so do
 * the greedy tokens. llama.cpp quantizes its activations in these products, hence the
 * tolerance. */
static void llama_cpp_quantized_files_give_llama_cpp_logits(void) {
    /* and Q5_0 (native), Q5_1 and Q4_1 with a Q6_K embedding (read as Q8_0), Q5_K_M (Q5_K
     * native) */
    const char *files[] = {"kq-llama-q4_k_m", "kq-llama-q6_k", "kq-llama-q8_0",
                           "kq-llama-q5_0", "kq-llama-q5_1", "kq-llama-q4_1", "kq-llama-q5_k_m",
                           "kq-llama-q3_k_m", "kq-llama-q2_k", "kq-llama-iq4_nl", "kq-llama-iq4_xs"};
    for (int f = 0; f < (int)(sizeof files / sizeof *files); f++) {
        char path[256];
        char *json = NULL, *bin = NULL;
        size_t jl = 0, bl = 0;
        wb_err err = {0};
        snprintf(path, sizeof path, "tests/vectors/gguf/%s.gguf.json", files[f]);
        CHECK_MSG(wb_read_file(path, 1 << 24, &json, &jl, &err) == WB_OK, "%s", err.msg);
        snprintf(path, sizeof path, "tests/vectors/gguf/%s.gguf", files[f]);
        CHECK_MSG(wb_read_file(path, 1 << 24, &bin, &bl, &err) == WB_OK, "%s", err.msg);
        cJSON *root = json ? cJSON_ParseWithLength(json, jl) : NULL;
        wb_model *m = NULL;
        if (bin) CHECK_MSG(wb_model_load_gguf_memory(bin, bl, path, NULL, &m, &err) == WB_OK, "%s",
                           err.msg);
        const cJSON *ids = cJSON_GetObjectItem(root, "ids"), *steps = cJSON_GetObjectItem(root, "steps");
        CHECK(cJSON_IsArray(ids) && cJSON_IsArray(steps) && m);
        if (m && cJSON_IsArray(ids) && cJSON_IsArray(steps)) {
            const int32_t V = wb_model_config(m)->vocab_size;
            int32_t seq[128];
            int n = 0;
            for (const cJSON *e = ids->child; e && n < 100; e = e->next) seq[n++] = e->valueint;
            float *lg = malloc((size_t)V * sizeof *lg);
            double worst = 0, range = 0;
            int k = 0, top_same = 0;
            for (const cJSON *st = steps->child; st; st = st->next, k++) {
                const cJSON *ref = cJSON_GetObjectItem(st, "logits"), *next = cJSON_GetObjectItem(st, "next");
                CHECK(cJSON_GetArraySize(ref) == V);
                CHECK_MSG(wb_model_forward(m, seq, n, lg, 0, &err) == WB_OK, "%s", err.msg);
                int i = 0, am = 0, ram = 0;
                double rmax = -1e30;
                for (const cJSON *e = ref->child; e && i < V; e = e->next, i++) {
                    const double d = fabs(lg[i] - e->valuedouble);
                    if (d > worst) worst = d;
                    if (fabs(e->valuedouble) > range) range = fabs(e->valuedouble);
                    if (e->valuedouble > rmax) rmax = e->valuedouble, ram = i;
                    if (lg[i] > lg[am]) am = i;
                }
                top_same += am == ram;
                /* follow llama.cpp's tokens so both see the same sequence */
                if (cJSON_IsNumber(next) && n < 127) seq[n++] = next->valueint;
                else break;
            }
            printf("  %-16s %d steps: max |logit diff| %.3g of %.3g, top-1 equal %d/%d\n",
                   files[f], k, worst, range, top_same, k);
            /* measured: Q8_0 0.014 of the range, Q4_K_M 0.033, Q6_K 0.050. With the files'
             * tensors first dequantized to F32 here: 0.024-0.031 for all three, so the rest is
             * the two implementations' activation quantization (here quant.c's integer dots),
             * not the reading of the blocks (rows checked exactly in rt_rows_equal) */
            /* Q2_K (the Q2_K file, with Q3_K): 0.063 of the range, while its values are
             * ggml's to the float ulp (test_quant_fallback values_are_ggml_values): the 2-bit
             * weights make the logits more sensitive to the activations' rounding */
            const double tol = strstr(files[f], "q2_k") ? 0.08 : 0.06;
            CHECK_MSG(k >= 2 && worst <= tol * range, "%s: %.3g of %.3g", files[f], worst, range);
            CHECK_MSG(top_same >= k - 2, "%s: top-1 equal %d/%d", files[f], top_same, k);
            free(lg);
        }
        wb_model_free(m);
        cJSON_Delete(root);
        free(json);
        free(bin);
    }
}

/* The tokenizer and chat template come from the GGUF metadata (core/gguf_tokenizer.c) when the
 * file has them: same ids as the tokenizer.json they were written from, the template text kept. */
static void gguf_tokenizer_and_chat_template_come_from_the_metadata(void) {
    char *dir = fixture_new_dir("gguf_tok");
    rt_gguf_tok = 1;
    rt_write(dir, "qwen2", TY_Q8_0, 9);
    rt_gguf_tok = 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    wb_model *m = NULL;
    wb_tokenizer *ref = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_model_load(path, &m, &err) == WB_OK, "%s", err.msg);
    CHECK(wb_tokenizer_load("tests/vectors/family_qwen2_tokenizer.json", &ref, &err) == WB_OK);
    if (m && ref) {
        const char *text = "Hello world, it's 12 o'clock: time <|im_end|> to read!";
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK(wb_tokenizer_encode(wb_model_tokenizer(m), text, strlen(text), &a, &na, &err) == WB_OK);
        CHECK(wb_tokenizer_encode(ref, text, strlen(text), &b, &nb, &err) == WB_OK);
        CHECK(na == nb && na > 3 && !memcmp(a, b, na * sizeof *a));
        wb_free(a);
        wb_free(b);
        CHECK(wb_model_chat_template(m) && !strcmp(wb_model_chat_template(m), RT_TEMPLATE));
        wb_chat_template *ct = NULL;
        const wb_chat_message msg = {.role = "user", .content = "hi"};
        char *out = NULL;
        size_t ol = 0;
        CHECK_MSG(wb_model_chat_template_load(m, &ct, &err) == WB_OK, "%s", err.msg);
        /* bos_token is tokenizer.ggml.bos_token_id's text, as transformers passes it */
        char want[256];
        snprintf(want, sizeof want, "%shi!", wb_tokenizer_token_str(ref, RT_BOS_ID));
        CHECK_MSG(ct && wb_chat_render(ct, &msg, 1, 0, &out, &ol, &err) == WB_OK && out &&
                  !strcmp(out, want), "rendered '%s', want '%s'", out ? out : "", want);
        wb_free(out);
        wb_chat_template_free(ct);
    }
    wb_tokenizer_free(ref);
    wb_model_free(m);
    fixture_rm_dir(dir);
}

static void info_names_the_format_and_the_tensor_types(void) {
    char *dir = fixture_new_dir("gguf_info");
    rt_write(dir, "qwen2", TY_KMIX, 5);
    char path[1024];
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    wb_model *m = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_model_load(path, &m, &err) == WB_OK, "%s", err.msg);
    if (m) {
        CHECK(!strcmp(wb_model_format(m), "gguf") && !strcmp(wb_model_type(m), "qwen2"));
        /* per layer 2 norms + 3 biases, and the final norm; q k v o gate up; embed + downs */
        int64_t f32 = 0, q4k = 0, q6k = 0, other = 0;
        const char *name;
        int64_t n;
        for (int i = 0; wb_model_tensor_types(m, i, &name, &n); i++) {
            if (!strcmp(name, "F32")) f32 = n;
            else if (!strcmp(name, "Q4_K")) q4k = n;
            else if (!strcmp(name, "Q6_K")) q6k = n;
            else other += n;
        }
        CHECK_MSG(f32 == 5 * RT_L + 1 && q4k == 6 * RT_L && q6k == 1 + RT_L && !other,
                  "F32 %lld Q4_K %lld Q6_K %lld other %lld", (long long)f32, (long long)q4k,
                  (long long)q6k, (long long)other);
        /* the quantized rows are used from the mapping, not widened: far below F32 bytes */
        CHECK(wb_model_weight_bytes(m) < (size_t)wb_model_num_parameters(m)); /* < 1 byte each */
        wb_model_free(m);
    }
    snprintf(path, sizeof path, "%s/ref", dir);
    CHECK(wb_model_load(path, &m, &err) == WB_OK);
    if (m) {
        const char *name;
        int64_t n;
        CHECK(!strcmp(wb_model_format(m), "safetensors"));
        CHECK(wb_model_tensor_types(m, 0, &name, &n) && !strcmp(name, "F32") && n > 0);
        CHECK(!wb_model_tensor_types(m, 1, &name, &n));
        wb_model_free(m);
    }
    fixture_rm_dir(dir);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/wb_test_gguf_model_%d.gguf", (int)getpid());
    RUN(llama_metadata_becomes_a_llama_config);
    RUN(qwen2_without_output_ties_and_has_qkv_bias);
    RUN(gpt2_metadata_becomes_a_gpt2_config);
    RUN(missing_or_unknown_metadata_is_a_clear_error);
    RUN(tensor_names_map_per_architecture);
    RUN(gguf_logits_match_safetensors_for_every_family_and_type);
    RUN(llama3_rope_frequency_table_loads_as_its_rope_scaling);
    RUN(info_names_the_format_and_the_tensor_types);
    RUN(gguf_tokenizer_and_chat_template_come_from_the_metadata);
    RUN(llama_cpp_quantized_files_give_llama_cpp_logits);
    RUN(gguf_loaded_then_saved_loads_back_the_same);
    RUN(hostile_files_are_refused_naming_the_file_and_the_tensor);
    RUN(wide_q5_k_values_load_as_they_are);
    unlink(path);
    return check_summary();
}
