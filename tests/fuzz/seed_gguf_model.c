/* seed_gguf_model.c - writes the seed corpus of fuzz_gguf_model: one tiny random model per
 * architecture (gpt2, llama, qwen2, phi3) and tensor type (with Q5_0 / Q5_1 / Q4_1 / IQ4_NL
 * ones, which the load converts to Q8_0), in llama.cpp's layout, each well
 * under the fuzzer's 64 KiB input limit. Not part of the build; run from the source root:
 *   cc -Icore tests/fuzz/seed_gguf_model.c build/libwbcore.a -lopenblas -lcjson -lpcre2-8 \
 *      -lutf8proc -lm -lpthread -o /tmp/seed && /tmp/seed tests/fuzz/corpus/fuzz_gguf_model */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_model.h"
#include "quant_fallback.h"
#include "wb_model.h"

enum { V = 16, C = 32, NH = 2, NKV = 1, HD = 16, F = 64, T = 16 };

static unsigned rng = 12345;
static float rnd(void) {
    rng = rng * 1103515245u + 12345u;
    return ((rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}

static void tensor(wb_gguf_writer *w, const char *name, int64_t cols, int64_t rows, uint32_t type) {
    static float v[V * C * 8];
    wb_err err = {0};
    const int64_t dims[2] = {cols, rows};
    for (int64_t i = 0; i < cols * rows; i++) v[i] = rows > 1 ? 0.2f * rnd() : 1.0f + 0.1f * rnd();
    if (cols % 32 || (rows == 1 && wb_fallback_block_values(type))) type = WB_GGML_F32;
    if (wb_fallback_block_values(type)) { /* random blocks, small f16 scale (and min) */
        static uint8_t raw[V * C * 8];
        const size_t bb = wb_fallback_block_bytes(type), n = (size_t)(cols * rows) / 32 * bb;
        for (size_t i = 0; i < n; i++) raw[i] = (uint8_t)(rnd() * 256);
        for (size_t b = 0; b < n; b += bb) {
            const uint16_t d = wb_f32_to_f16(0.012f), m = wb_f32_to_f16(-0.1f);
            memcpy(raw + b, &d, 2);
            if (type != WB_GGML_Q5_0 && type != WB_GGML_IQ4_NL) memcpy(raw + b + 2, &m, 2);
        }
        if (wb_gguf_add_tensor_raw(w, name, 2, dims, type, raw, n, &err))
            fprintf(stderr, "%s: %s\n", name, err.msg);
        return;
    }
    if (wb_gguf_add_tensor(w, name, rows > 1 ? 2 : 1, dims, type, v, &err))
        fprintf(stderr, "%s: %s\n", name, err.msg);
}

static void key(wb_gguf_writer *w, const char *arch, const char *k, uint32_t v) {
    char full[96];
    wb_err err = {0};
    snprintf(full, sizeof full, "%s.%s", arch, k);
    wb_gguf_set_u32(w, full, v, &err);
}

static void model(const char *dir, const char *arch, uint32_t type, const char *tname) {
    wb_gguf_writer *w = NULL;
    wb_err err = {0};
    char k[96], p[512];
    wb_gguf_writer_new(&w, &err);
    wb_gguf_set_str(w, "general.architecture", arch, strlen(arch), &err);
    key(w, arch, "embedding_length", C);
    key(w, arch, "block_count", 1);
    key(w, arch, "attention.head_count", NH);
    key(w, arch, "context_length", T);
    key(w, arch, "feed_forward_length", F);
    const int gpt2 = !strcmp(arch, "gpt2"), phi3 = !strcmp(arch, "phi3");
    if (!gpt2) {
        key(w, arch, "attention.head_count_kv", NKV);
        snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
        wb_gguf_set_f32(w, k, 1e-6f, &err);
    }
    wb_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", V - 1, &err);
    tensor(w, "token_embd.weight", C, V, type);
    tensor(w, "output_norm.weight", C, 1, WB_GGML_F32);
    if (gpt2) {
        tensor(w, "position_embd.weight", C, T, WB_GGML_F32);
        tensor(w, "output_norm.bias", C, 1, WB_GGML_F32);
        const char *vecs[][2] = {{"attn_norm.weight", "32"}, {"attn_norm.bias", "32"},
                                 {"attn_qkv.bias", "96"},    {"attn_output.bias", "32"},
                                 {"ffn_norm.weight", "32"},  {"ffn_norm.bias", "32"},
                                 {"ffn_up.bias", "64"},      {"ffn_down.bias", "32"}};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
            snprintf(k, sizeof k, "blk.0.%s", vecs[i][0]);
            tensor(w, k, atoi(vecs[i][1]), 1, WB_GGML_F32);
        }
        tensor(w, "blk.0.attn_qkv.weight", C, 3 * C, type);
        tensor(w, "blk.0.attn_output.weight", C, C, type);
        tensor(w, "blk.0.ffn_up.weight", C, F, type);
        tensor(w, "blk.0.ffn_down.weight", F, C, type);
    } else {
        tensor(w, "output.weight", C, V, type);
        tensor(w, "blk.0.attn_norm.weight", C, 1, WB_GGML_F32);
        tensor(w, "blk.0.ffn_norm.weight", C, 1, WB_GGML_F32);
        tensor(w, "blk.0.attn_output.weight", NH * HD, C, type);
        tensor(w, "blk.0.ffn_down.weight", F, C, type);
        if (phi3) {
            tensor(w, "blk.0.attn_qkv.weight", C, (NH + 2 * NKV) * HD, type);
            tensor(w, "blk.0.ffn_up.weight", C, 2 * F, type);
        } else {
            tensor(w, "blk.0.attn_q.weight", C, NH * HD, type);
            tensor(w, "blk.0.attn_k.weight", C, NKV * HD, type);
            tensor(w, "blk.0.attn_v.weight", C, NKV * HD, type);
            tensor(w, "blk.0.ffn_gate.weight", C, F, type);
            tensor(w, "blk.0.ffn_up.weight", C, F, type);
            if (!strcmp(arch, "qwen2")) {
                tensor(w, "blk.0.attn_q.bias", NH * HD, 1, WB_GGML_F32);
                tensor(w, "blk.0.attn_k.bias", NKV * HD, 1, WB_GGML_F32);
                tensor(w, "blk.0.attn_v.bias", NKV * HD, 1, WB_GGML_F32);
            }
        }
    }
    snprintf(p, sizeof p, "%s/%s_%s.gguf", dir, arch, tname);
    if (wb_gguf_write(w, p, &err)) fprintf(stderr, "%s: %s\n", p, err.msg);
    wb_gguf_writer_free(w);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *archs[] = {"gpt2", "llama", "qwen2", "phi3"};
    const struct { uint32_t t; const char *n; } types[] = {
        {WB_GGML_F32, "f32"}, {WB_GGML_F16, "f16"}, {WB_GGML_BF16, "bf16"},
        {WB_GGML_Q8_0, "q8_0"}, {WB_GGML_Q4_0, "q4_0"}};
    for (int a = 0; a < 4; a++) /* F16 and Q8_0 for each, BF16 and Q4_0 for some */
        for (int t = 1; t < 5; t++)
            if (t == 1 || t == 3 || (a == 1 && t != 0) || (a == 2 && t == 2))
                model(argv[1], archs[a], types[t].t, types[t].n);
    /* Q5_0, Q5_1, Q4_1 and IQ4_NL, read natively (llama: its Q/K rows copied into llama's order;
     * qwen2: mapped); the 256-value types Q5_K, Q2_K, Q3_K, IQ4_XS need rows of 256: not at this
     * size */
    model(argv[1], "llama", WB_GGML_Q5_0, "q5_0");
    model(argv[1], "qwen2", WB_GGML_Q5_0, "q5_0");
    model(argv[1], "qwen2", WB_GGML_Q5_1, "q5_1");
    model(argv[1], "gpt2", WB_GGML_Q4_1, "q4_1");
    model(argv[1], "llama", WB_GGML_IQ4_NL, "iq4_nl");
    return 0;
}
