/* bench_qwen2_fixture.h - what bench_llama and bench_llama_batch share: a Qwen2.5-0.5B-shaped
 * checkpoint (vocab 151936, hidden 896, 24 layers, 14 query and 2 key/value heads of 64, MLP 4864,
 * tied embeddings, q/k/v bias) with random BF16 weights, written to a directory by write_model.
 * Header-only: each benchmark is one executable. (bench_fixture.h is the TinyLM-sized GPT-2 one;
 * its enum of sizes differs, so the two cannot be included together.)
 * With BENCH_QWEN2_WIDE defined first: hidden 1024, 28 layers, 16 query and 8 key/value heads of
 * 64, MLP 3072 (Qwen3-0.6B's widths in the qwen2 layout): every row a multiple of 256 values, so a
 * Q4_K_M of it is the K types a download of such a model holds (bench_peer_fixture_wide). */
#ifndef WB_BENCH_QWEN2_FIXTURE_H
#define WB_BENCH_QWEN2_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wb_model.h"


#ifdef BENCH_QWEN2_WIDE
enum { V = 151936, C = 1024, L = 28, NH = 16, NKV = 8, HD = 64, F = 3072, PROMPT = 44 };
#else
enum { V = 151936, C = 896, L = 24, NH = 14, NKV = 2, HD = 64, F = 4864, PROMPT = 44 };
#endif

static uint64_t rng = 88172645463325252ull;
static inline uint32_t xr(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* uniform in [-s, s) rounded to BF16 */
static uint16_t rbf(float s) {
    float x = ((float)(xr() >> 8) * (1.0f / (1 << 24)) * 2.0f - 1.0f) * s;
    return wb_f32_to_bf16(x);
}

static int write_model(const char *dir, const char *tokenizer) {
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fprintf(f, "{\"model_type\":\"qwen2\",\"vocab_size\":%d,\"hidden_size\":%d,"
               "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"max_position_embeddings\":32768,"
               "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":true,"
               "\"hidden_act\":\"silu\",\"use_sliding_window\":false,\"sliding_window\":32768}",
            V, C, F, L, NH, NKV);
    fclose(f);
    /* tensors: name, rows, cols (0: vector), scale */
    int n = 0;
    wb_tensor_view *tv = calloc(3 + 12 * L, sizeof *tv);
    char (*names)[96] = calloc(3 + 12 * L, sizeof *names);
    void **bufs = calloc(3 + 12 * L, sizeof *bufs);
#define T(nm, r, c, s)                                                                           \
    do {                                                                                          \
        size_t ne_ = (size_t)(r) * (size_t)((c) ? (c) : 1);                                       \
        uint16_t *b_ = malloc(ne_ * 2);                                                           \
        for (size_t i_ = 0; i_ < ne_; i_++) b_[i_] = (s) < 0 ? wb_f32_to_bf16(1.0f) : rbf(s);     \
        snprintf(names[n], 96, "%s", nm);                                                         \
        tv[n] = (wb_tensor_view){.name = names[n], .dtype = WB_BF16, .ndim = (c) ? 2 : 1,         \
                                 .shape = {(r), (c)}, .data = b_, .nbytes = ne_ * 2};             \
        bufs[n++] = b_;                                                                           \
    } while (0)
    char nm[96];
    T("model.embed_tokens.weight", V, C, 0.05f);
    for (int l = 0; l < L; l++) {
#define LT(suffix, r, c, s)                                                                      \
    do {                                                                                          \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);                                 \
        T(nm, r, c, s);                                                                           \
    } while (0)
        LT("input_layernorm.weight", C, 0, -1);
        LT("self_attn.q_proj.weight", NH * HD, C, 0.05f);
        LT("self_attn.q_proj.bias", NH * HD, 0, 0.05f);
        LT("self_attn.k_proj.weight", NKV * HD, C, 0.05f);
        LT("self_attn.k_proj.bias", NKV * HD, 0, 0.05f);
        LT("self_attn.v_proj.weight", NKV * HD, C, 0.05f);
        LT("self_attn.v_proj.bias", NKV * HD, 0, 0.05f);
        LT("self_attn.o_proj.weight", C, NH * HD, 0.05f);
        LT("post_attention_layernorm.weight", C, 0, -1);
        LT("mlp.gate_proj.weight", F, C, 0.05f);
        LT("mlp.up_proj.weight", F, C, 0.05f);
        LT("mlp.down_proj.weight", C, F, 0.03f);
#undef LT
    }
    T("model.norm.weight", C, 0, -1);
#undef T
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    wb_err err = {0};
    wb_status s = wb_safetensors_write(path, tv, n, NULL, 0, &err);
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(tv);
    free(names);
    if (s) {
        fprintf(stderr, "bench_llama: %s\n", err.msg);
        return -1;
    }
    /* tokenizer: any Qwen2-style tokenizer.json with at most V ids will do */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *in = fopen(tokenizer, "rb"), *out = fopen(path, "wb");
    if (!in || !out) {
        if (in) fclose(in);
        if (out) fclose(out);
        return -1;
    }
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
    fclose(in);
    fclose(out);
    return 0;
}

#endif
