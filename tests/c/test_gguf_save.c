/* test_gguf_save.c - whole models written as GGUF (core/gguf_save.c), read back through the
 * project's own GGUF reader (core/gguf.c, core/gguf_model.c): the same tensors, bit for bit in
 * the stored type, the same config, the tokenizer and chat template in the metadata; Llama's q/k
 * rows permuted per head as llama.cpp expects; hostile paths and arguments refused with errors
 * naming them. (That llama.cpp itself loads these files and computes the same logits is checked
 * by bench/peer/check.sh, outside ctest; docs/gguf.md.) */
#include "check.h"
#include "fixture.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "gguf_model.h"
#include "gguf_save.h"
#include "model_family.h"
#include "quant.h"
#include "wb_model.h"

static char *scratch;

static wb_model *load(const char *dir, int weights) {
    wb_model_params p = wb_model_default_params();
    p.weights = weights;
    p.compute_f32 = 1;
    wb_model *m = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_model_load_ex(dir, &p, &m, &err) == WB_OK, "%s", err.msg);
    return m;
}

static wb_gguf *save_and_open(const wb_model *m, int type, const char *tpl, const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", scratch, file);
    wb_err err = {0};
    CHECK_MSG(wb_model_save_gguf(m, wb_model_tokenizer(m), tpl, path, type, &err) == WB_OK, "%s",
              err.msg);
    wb_gguf *g = NULL;
    CHECK_MSG(wb_gguf_open(path, &g, &err) == WB_OK, "%s", err.msg);
    return g;
}

/* The bytes tensor lt must have in a file of matrices stored as `type`: each row converted. */
static void expect_bytes(const wb_loaded_tensor *lt, const wb_gguf_tensor *t, uint32_t type,
                         int permute_hd) {
    const int is_mat = lt->mat.w != NULL;
    const int rows = is_mat ? lt->mat.rows : (lt->d1 ? (int)lt->d0 : 1);
    const int cols = is_mat ? lt->mat.cols : (int)(lt->d1 ? lt->d1 : lt->d0);
    const uint32_t want_type = !is_mat ? WB_GGML_F32
                               : ((type == WB_GGML_Q8_0 || type == WB_GGML_Q4_0) && cols % 32)
                                   ? WB_GGML_F32
                                   : type;
    CHECK_MSG(t->type == want_type, "%s stored as %s", t->name, wb_ggml_type_name(t->type));
    CHECK(t->dims[0] == cols && (rows == 1 ? t->n_dims == 1 || t->dims[1] == 1 : t->dims[1] == rows));
    if (t->type != want_type) return;
    float *row = malloc(sizeof *row * (size_t)cols);
    uint8_t *enc = malloc((size_t)cols * 4 + 64);
    const size_t rb = t->bytes / (size_t)rows;
    int bad = 0;
    for (int r = 0; r < rows && !bad; r++) {
        int src = r; /* llama q/k: GGUF row 2j + a of a head is HF row a * hd/2 + j */
        if (permute_hd) {
            const int h = r / permute_hd, i = r % permute_hd;
            src = h * permute_hd + (i % 2) * (permute_hd / 2) + i / 2;
        }
        if (is_mat) wb_mat_row(&lt->mat, src, row);
        else memcpy(row, lt->vec + (size_t)src * cols, sizeof *row * (size_t)cols);
        size_t n = 0;
        if (want_type == WB_GGML_F32) memcpy(enc, row, n = (size_t)cols * 4);
        else if (want_type == WB_GGML_F16 || want_type == WB_GGML_BF16)
            for (int i = 0; i < cols; i++) {
                const uint16_t h = want_type == WB_GGML_F16 ? wb_f32_to_f16(row[i]) : wb_f32_to_bf16(row[i]);
                enc[n++] = (uint8_t)h, enc[n++] = (uint8_t)(h >> 8);
            }
        else {
            const wb_qtype q = want_type == WB_GGML_Q8_0 ? WB_QT_Q8_0 : WB_QT_Q4_0;
            wb_quantize_row(q, enc, row, cols);
            n = wb_quant_row_bytes(q, cols);
        }
        CHECK(n == rb);
        if (memcmp(enc, (const uint8_t *)t->data + rb * (size_t)r, rb)) bad = 1;
    }
    CHECK_MSG(!bad, "%s: stored bytes differ from the loaded tensor", t->name);
    free(row), free(enc);
}

/* Every loaded tensor is in the file under its GGUF name with the expected bytes. */
static void expect_all_tensors(const wb_model *m, const wb_gguf *g, const char *arch, uint32_t type) {
    const wb_weight_store *st = wb_model_store(m);
    CHECK(st && st->n_loaded > 0);
    if (!st) return;
    for (int i = 0; i < st->n_loaded; i++) {
        const char *hf = st->loaded[i].name;
        if (!strncmp(hf, "transformer.", 12)) hf += 12;
        char name[128];
        wb_err err = {0};
        CHECK_MSG(wb_gguf_name_from_hf(arch, hf, name, sizeof name, &err) == WB_OK, "%s", err.msg);
        const wb_gguf_tensor *t = wb_gguf_tensor_find(g, name);
        CHECK_MSG(t != NULL, "%s missing", name);
        if (!t) continue;
        /* and the reader's map goes back to the same checkpoint name */
        char back[128];
        CHECK(wb_gguf_hf_name(arch, name, back, sizeof back, &err) == WB_OK && !strcmp(back, hf));
        const int qk = !strcmp(arch, "llama") && (strstr(name, "attn_q.") || strstr(name, "attn_k."));
        expect_bytes(&st->loaded[i], t, type, qk ? m->cfg.head_dim : 0);
    }
}

static int64_t get_int(const wb_gguf *g, const char *key) {
    int64_t v = -1;
    wb_err err = {0};
    CHECK_MSG(wb_gguf_get_int(g, key, &v, &err) == WB_OK, "%s", err.msg);
    return v;
}

static void tinylm_round_trips_through_our_reader_in_every_type(void) {
    wb_model *m = load("models/tinylm-base", WB_WEIGHTS_AS_STORED);
    if (!m) return;
    static const uint32_t types[] = {WB_GGML_F32, WB_GGML_F16, WB_GGML_BF16, WB_GGML_Q8_0,
                                     WB_GGML_Q4_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        wb_gguf *g = save_and_open(m, (int)types[k], "{{ messages }}", "tinylm.gguf");
        if (!g) continue;
        const char *s;
        size_t n;
        wb_err err = {0};
        CHECK(wb_gguf_get_str(g, "general.architecture", &s, &n, &err) == WB_OK && n == 4 &&
              !memcmp(s, "gpt2", 4));
        CHECK(get_int(g, "gpt2.embedding_length") == 128 && get_int(g, "gpt2.block_count") == 4 &&
              get_int(g, "gpt2.context_length") == 128 && get_int(g, "gpt2.feed_forward_length") == 512);
        /* the config our reader makes of it is the model's */
        cJSON *cj = NULL;
        CHECK_MSG(wb_gguf_config_json(g, "tinylm.gguf", &cj, &err) == WB_OK, "%s", err.msg);
        char *txt = cj ? cJSON_PrintUnformatted(cj) : NULL;
        wb_config c;
        CHECK_MSG(txt && wb_config_parse(txt, strlen(txt), "gguf", &c, &err) == WB_OK, "%s", err.msg);
        const wb_config *o = wb_model_config(m);
        CHECK(c.n_embd == o->n_embd && c.n_layer == o->n_layer && c.n_head == o->n_head &&
              c.vocab_size == o->vocab_size && c.n_inner == o->n_inner &&
              c.max_position_embeddings == o->max_position_embeddings &&
              c.layer_norm_epsilon == o->layer_norm_epsilon);
        free(txt);
        cJSON_Delete(cj);
        /* tokenizer and template */
        const int64_t ti = wb_gguf_find(g, "tokenizer.ggml.tokens");
        CHECK(ti >= 0 && wb_gguf_arr_n(g, ti) == 2048);
        const int64_t mi = wb_gguf_find(g, "tokenizer.ggml.merges");
        CHECK(mi >= 0 && wb_gguf_arr_n(g, mi) == 1791);
        if (ti >= 0) {
            CHECK(wb_gguf_arr_str(g, ti, 2047, &s, &n, &err) == WB_OK && n == 13 &&
                  !memcmp(s, "<|endoftext|>", 13));
            CHECK(wb_gguf_arr_str(g, ti, 300, &s, &n, &err) == WB_OK &&
                  !strncmp(s, wb_tokenizer_token_str(wb_model_tokenizer(m), 300), n));
        }
        CHECK(wb_gguf_get_str(g, "tokenizer.chat_template", &s, &n, &err) == WB_OK && n == 14);
        CHECK(get_int(g, "tokenizer.ggml.eos_token_id") == 2047);
        expect_all_tensors(m, g, "gpt2", types[k]);
        /* llama.cpp's gpt2 needs output.weight: the tied head is written as a copy */
        const wb_gguf_tensor *te = wb_gguf_tensor_find(g, "token_embd.weight"),
                             *to = wb_gguf_tensor_find(g, "output.weight");
        CHECK(te && to && te->bytes == to->bytes && !memcmp(te->data, to->data, te->bytes));
        wb_gguf_free(g);
    }
    wb_model_free(m);
}

static void a_model_quantized_at_load_is_saved_with_its_own_blocks(void) {
    wb_model *m = load("models/tinylm-base", WB_WEIGHTS_Q8_0);
    if (!m) return;
    wb_gguf *g = save_and_open(m, WB_GGML_Q8_0, NULL, "q8.gguf");
    const wb_weight_store *st = wb_model_store(m);
    int compared = 0;
    int tiled = 0;
    for (int i = 0; g && st && i < st->n_loaded; i++) {
        const wb_loaded_tensor *lt = &st->loaded[i];
        if (!lt->mat.w || lt->mat.dtype != WB_MAT_Q8_0) continue;
        char name[128];
        wb_err err = {0};
        const char *hf = strncmp(lt->name, "transformer.", 12) ? lt->name : lt->name + 12;
        CHECK(wb_gguf_name_from_hf("gpt2", hf, name, sizeof name, &err) == WB_OK);
        const wb_gguf_tensor *t = wb_gguf_tensor_find(g, name);
        const size_t rb = wb_quant_row_bytes(WB_QT_Q8_0, lt->mat.cols), bytes = rb * (size_t)lt->mat.rows;
        /* the file layout, also from a matrix kept in the tile layout (then read back row by row) */
        uint8_t *file = malloc(bytes);
        CHECK(file != NULL);
        if (!file) break;
        if (lt->mat.tiles) {
            tiled++;
            for (int r = 0; r < lt->mat.rows; r++)
                wb_quant_tile_row(WB_QT_Q8_0, file + rb * (size_t)r, lt->mat.w, r, lt->mat.cols);
        } else {
            memcpy(file, lt->mat.w, bytes);
        }
        CHECK(t && t->type == WB_GGML_Q8_0 && t->bytes == bytes && !memcmp(t->data, file, bytes));
        free(file);
        compared++;
    }
    CHECK(compared >= 17); /* wte and 4 x 4 layer matrices */
    /* at the AVX-512 level every one of them (rows a multiple of 16) is kept in the tile layout */
    CHECK(!wb_quant_tiles_native() || tiled == compared);
    CHECK(!g || wb_gguf_find(g, "tokenizer.chat_template") < 0);
    wb_gguf_free(g);
    wb_model_free(m);
}

/* ---- a small random Llama-family directory ---- */

static void write_llama_dir(const char *dir, const char *model_type, int tied) {
    enum { V = 2048, C = 64, F = 96, NH = 4, NKV = 2, HD = 16 };
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\":\"%s\",\"vocab_size\":%d,\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5,\"hidden_act\":\"silu\","
             "\"rope_theta\":10000.0,\"tie_word_embeddings\":%s}",
             model_type, V, C, F, NH, NKV, tied ? "true" : "false");
    fixture_write_text(path, cfg);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    fixture_copy_file("models/tinylm-base/tokenizer.json", path);
    const int qwen = !strcmp(model_type, "qwen2");
    wb_tensor_view t[40];
    float *bufs[40];
    int n = 0;
    uint32_t seed = 7;
#define ADD(nm, d0, d1)                                                                           \
    do {                                                                                          \
        const int64_t ne = (int64_t)(d0) * ((d1) ? (d1) : 1);                                     \
        float *v = malloc(sizeof *v * (size_t)ne);                                                \
        for (int64_t i = 0; i < ne; i++) {                                                        \
            seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;                            \
            v[i] = (float)((seed % 2000) / 1000.0 - 1) * 0.3f;                                    \
        }                                                                                         \
        char *name = strdup(nm);                                                                  \
        t[n] = (wb_tensor_view){name, WB_F32, (d1) ? 2 : 1, {(d0), (d1)}, v, (size_t)ne * 4};     \
        bufs[n++] = v;                                                                            \
    } while (0)
    ADD("model.embed_tokens.weight", V, C);
    char nm[128];
    for (int l = 0; l < 2; l++) {
#define L_ADD(suffix, d0, d1) do { snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix); ADD(nm, d0, d1); } while (0)
        L_ADD("input_layernorm.weight", C, 0);
        L_ADD("self_attn.q_proj.weight", NH * HD, C);
        L_ADD("self_attn.k_proj.weight", NKV * HD, C);
        L_ADD("self_attn.v_proj.weight", NKV * HD, C);
        if (qwen) {
            L_ADD("self_attn.q_proj.bias", NH * HD, 0);
            L_ADD("self_attn.k_proj.bias", NKV * HD, 0);
            L_ADD("self_attn.v_proj.bias", NKV * HD, 0);
        }
        L_ADD("self_attn.o_proj.weight", C, NH * HD);
        L_ADD("post_attention_layernorm.weight", C, 0);
        L_ADD("mlp.gate_proj.weight", F, C);
        L_ADD("mlp.up_proj.weight", F, C);
        L_ADD("mlp.down_proj.weight", C, F);
    }
    ADD("model.norm.weight", C, 0);
    if (!tied) ADD("lm_head.weight", V, C);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    wb_err err = {0};
    CHECK_MSG(wb_safetensors_write(path, t, n, NULL, 0, &err) == WB_OK, "%s", err.msg);
    for (int i = 0; i < n; i++) free(bufs[i]), free((char *)t[i].name);
#undef ADD
#undef L_ADD
}

static void llama_q_and_k_rows_are_permuted_per_head_and_qwen2_is_not(void) {
    static const char *const kinds[][2] = {{"llama", "llama"}, {"qwen2", "qwen2"},
                                           {"mistral", "llama"}};
    for (int k = 0; k < 3; k++) {
        char *dir = fixture_new_dir("gguf_save_llama");
        write_llama_dir(dir, kinds[k][0], k != 0);
        wb_model *m = load(dir, WB_WEIGHTS_AS_STORED);
        if (m) {
            wb_gguf *g = save_and_open(m, WB_GGML_F32, NULL, "llama.gguf");
            if (g) {
                const char *s;
                size_t n;
                wb_err err = {0};
                CHECK(wb_gguf_get_str(g, "general.architecture", &s, &n, &err) == WB_OK &&
                      n == strlen(kinds[k][1]) && !memcmp(s, kinds[k][1], n));
                char key[64];
                snprintf(key, sizeof key, "%s.attention.head_count_kv", kinds[k][1]);
                CHECK(get_int(g, key) == 2);
                expect_all_tensors(m, g, kinds[k][1], WB_GGML_F32);
                /* tied: no output.weight (llama.cpp reuses token_embd); untied: present */
                CHECK((wb_gguf_tensor_find(g, "output.weight") != NULL) == (k == 0));
                wb_gguf_free(g);
            }
            wb_model_free(m);
        }
        fixture_rm_dir(dir);
    }
}

/* A tokenizer with fewer ids than the embedding has rows is padded as llama.cpp's converter pads
 * it ("[PAD<i>]", type unused). */
static void a_short_tokenizer_is_padded_as_llama_cpp_pads_it(void) {
    char *dir = fixture_new_dir("gguf_save_pad");
    write_llama_dir(dir, "qwen2", 1);
    wb_model *m = load(dir, WB_WEIGHTS_AS_STORED); /* vocab 2048 */
    wb_tokenizer *small = NULL, *big = NULL;
    wb_err err = {0};
    const char *tj = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},"
                     "\"merges\":[\"a b\"]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}";
    CHECK(wb_tokenizer_load_json(tj, strlen(tj), "small", &small, &err) == WB_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/pad.gguf", scratch);
    CHECK_MSG(m && wb_model_save_gguf(m, small, NULL, path, WB_GGML_F32, &err) == WB_OK, "%s", err.msg);
    wb_gguf *g = NULL;
    CHECK(wb_gguf_open(path, &g, &err) == WB_OK);
    const int64_t ti = g ? wb_gguf_find(g, "tokenizer.ggml.tokens") : -1,
                  ty = g ? wb_gguf_find(g, "tokenizer.ggml.token_type") : -1;
    CHECK(ti >= 0 && wb_gguf_arr_n(g, ti) == 2048 && ty >= 0 && wb_gguf_arr_n(g, ty) == 2048);
    const char *s;
    size_t n;
    int64_t t2 = 0, t3 = 0;
    if (ti >= 0 && ty >= 0) {
        CHECK(wb_gguf_arr_str(g, ti, 2, &s, &n, &err) == WB_OK && n == 2 && !memcmp(s, "ab", 2));
        CHECK(wb_gguf_arr_str(g, ti, 2047, &s, &n, &err) == WB_OK && n == 9 && !memcmp(s, "[PAD2047]", 9));
        CHECK(wb_gguf_arr_int(g, ty, 2, &t2, &err) == WB_OK && t2 == 1);
        CHECK(wb_gguf_arr_int(g, ty, 3, &t3, &err) == WB_OK && t3 == 5);
    }
    wb_gguf_free(g);
    /* an exact fit needs no padding */
    CHECK(wb_tokenizer_load("models/tinylm-base/tokenizer.json", &big, &err) == WB_OK);
    wb_model *tl = load("models/tinylm-base", WB_WEIGHTS_AS_STORED);
    CHECK(tl && wb_model_save_gguf(tl, big, NULL, path, WB_GGML_F32, &err) == WB_OK);
    wb_model_free(tl);
    wb_tokenizer_free(small), wb_tokenizer_free(big);
    wb_model_free(m);
    fixture_rm_dir(dir);
}

static void hostile_paths_and_arguments_get_errors_naming_them(void) {
    wb_model *m = load("models/tinylm-base", WB_WEIGHTS_AS_STORED);
    if (!m) return;
    const wb_tokenizer *tok = wb_model_tokenizer(m);
    wb_err err = {0};
    CHECK(wb_model_save_gguf(m, tok, NULL, "/nonexistent-dir/x.gguf", WB_GGML_F32, &err) == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent-dir/x.gguf");
    /* a directory as the target: nothing is left behind, the directory stays */
    char path[512];
    snprintf(path, sizeof path, "%s/adir", scratch);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(wb_model_save_gguf(m, tok, NULL, path, WB_GGML_F32, &err) != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "adir");
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
    /* an unknown type changes nothing on disk */
    snprintf(path, sizeof path, "%s/keep.gguf", scratch);
    fixture_write_text(path, "old");
    CHECK(wb_model_save_gguf(m, tok, NULL, path, WB_GGML_Q4_K, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "keep.gguf");
    CHECK(wb_model_save_gguf(m, tok, NULL, path, -1, &err) == WB_ERR_ARG);
    CHECK(stat(path, &sb) == 0 && sb.st_size == 3);
    CHECK(wb_model_save_gguf(m, tok, NULL, "", WB_GGML_F32, &err) == WB_ERR_ARG);
    CHECK(wb_model_save_gguf(NULL, tok, NULL, path, WB_GGML_F32, &err) == WB_ERR_ARG);
    CHECK(wb_model_save_gguf(m, tok, NULL, NULL, WB_GGML_F32, &err) == WB_ERR_ARG);
    CHECK(stat(path, &sb) == 0 && sb.st_size == 3);
    wb_model_free(m);
}

static void the_chat_template_comes_from_the_model_directory(void) {
    char *dir = fixture_new_dir("gguf_save_tpl");
    static const char *const cases[][2] = {
        {"{\"chat_template\":\"{{ a }}\"}", "{{ a }}"},
        {"{\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},"
         "{\"name\":\"default\",\"template\":\"D\"}]}", "D"},
        {"{\"bos_token\":\"x\"}", NULL},
    };
    for (int k = 0; k < 3; k++) {
        write_llama_dir(dir, "qwen2", 1);
        char path[512];
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        fixture_write_text(path, cases[k][0]);
        wb_model *m = load(dir, WB_WEIGHTS_AS_STORED);
        char *tpl = NULL;
        wb_err err = {0};
        CHECK(m && wb_model_chat_template_text(m, &tpl, &err) == WB_OK);
        CHECK(cases[k][1] ? tpl && !strcmp(tpl, cases[k][1]) : tpl == NULL);
        free(tpl);
        wb_model_free(m);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    fixture_write_text(path, "J");
    wb_model *m = load(dir, WB_WEIGHTS_AS_STORED);
    char *tpl = NULL;
    wb_err err = {0};
    CHECK(m && wb_model_chat_template_text(m, &tpl, &err) == WB_OK && tpl && !strcmp(tpl, "J"));
    free(tpl);
    wb_model_free(m);
    fixture_rm_dir(dir);
}

/* tests/vectors/gguf/ (made by llama.cpp's llama-quantize, see its README): our reader opens
 * them and sees llama-quantize's types, our tokenizer gives llama.cpp's ids for the prompt. */
static void llama_cpp_quantized_files_open_with_their_types_and_ids(void) {
    static const char *const files[] = {"kq-llama-q4_k_m", "kq-llama-q6_k", "kq-llama-q8_0"};
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load("tests/vectors/family_llama3_tokenizer.json", &tok, &err) == WB_OK);
    for (int k = 0; k < 3; k++) {
        char path[256];
        snprintf(path, sizeof path, "tests/vectors/gguf/%s.gguf", files[k]);
        wb_gguf *g = NULL;
        CHECK_MSG(wb_gguf_open(path, &g, &err) == WB_OK, "%s", err.msg);
        snprintf(path, sizeof path, "tests/vectors/gguf/%s.gguf.json", files[k]);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL);
        char *js = calloc(1, 1 << 20);
        const size_t n = f ? fread(js, 1, (1 << 20) - 1, f) : 0;
        if (f) fclose(f);
        cJSON *root = cJSON_ParseWithLength(js, n);
        CHECK(root != NULL);
        const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "tensor_types"), *t;
        int seen = 0, kq = 0;
        cJSON_ArrayForEach(t, types) {
            const wb_gguf_tensor *gt = g ? wb_gguf_tensor_find(g, t->string) : NULL;
            CHECK_MSG(gt != NULL, "%s", t->string);
            if (!gt) continue;
            char want[16];
            snprintf(want, sizeof want, "%s", t->valuestring);
            for (char *p = want; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
            CHECK_MSG(!strcmp(wb_ggml_type_name(gt->type), want), "%s: %s, llama-quantize said %s",
                      t->string, wb_ggml_type_name(gt->type), want);
            kq += gt->type == WB_GGML_Q4_K || gt->type == WB_GGML_Q6_K;
            seen++;
        }
        CHECK(seen == 11 && (k == 2 ? kq == 0 : kq == 8));
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt"),
                    *ids = cJSON_GetObjectItemCaseSensitive(root, "ids");
        int32_t *ours = NULL;
        size_t n_ours = 0;
        CHECK(cJSON_IsString(prompt) && tok &&
              wb_tokenizer_encode(tok, prompt->valuestring, strlen(prompt->valuestring), &ours,
                                  &n_ours, &err) == WB_OK);
        int same = ids && (size_t)cJSON_GetArraySize(ids) == n_ours;
        for (size_t i = 0; same && i < n_ours; i++)
            same = cJSON_GetArrayItem(ids, (int)i)->valueint == ours[i];
        CHECK_MSG(same, "%s: our ids differ from llama.cpp's", files[k]);
        wb_free(ours);
        cJSON_Delete(root);
        free(js);
        wb_gguf_free(g);
    }
    wb_tokenizer_free(tok);
}

int main(void) {
    scratch = fixture_new_dir("gguf_save");
    RUN(tinylm_round_trips_through_our_reader_in_every_type);
    RUN(a_model_quantized_at_load_is_saved_with_its_own_blocks);
    RUN(llama_q_and_k_rows_are_permuted_per_head_and_qwen2_is_not);
    RUN(a_short_tokenizer_is_padded_as_llama_cpp_pads_it);
    RUN(hostile_paths_and_arguments_get_errors_naming_them);
    RUN(the_chat_template_comes_from_the_model_directory);
    RUN(llama_cpp_quantized_files_open_with_their_types_and_ids);
    fixture_rm_dir(scratch);
    return check_summary();
}
