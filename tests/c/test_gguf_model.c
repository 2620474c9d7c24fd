/* test_gguf_model.c - GGUF metadata becomes a config the families accept, and GGUF tensor names
 * map to the families' safetensors names. Files are made with our own GGUF writer. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_model.h"
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

int main(void) {
    snprintf(path, sizeof path, "/tmp/wb_test_gguf_model_%d.gguf", (int)getpid());
    RUN(llama_metadata_becomes_a_llama_config);
    RUN(qwen2_without_output_ties_and_has_qkv_bias);
    RUN(gpt2_metadata_becomes_a_gpt2_config);
    RUN(missing_or_unknown_metadata_is_a_clear_error);
    RUN(tensor_names_map_per_architecture);
    unlink(path);
    return check_summary();
}
