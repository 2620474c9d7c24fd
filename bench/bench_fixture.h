/* bench_fixture.h - what the benchmarks share: a random TinyLM-sized GPT-2 checkpoint written to a
 * directory (vocab 2048, ctx 128, C 128, 4 layers, 4 heads, MLP 512; a byte-level tokenizer whose
 * ids 257.. decode but are never produced by encoding) and median [min - max] statistics.
 * Header-only: each benchmark is one executable. */
#ifndef WB_BENCH_FIXTURE_H
#define WB_BENCH_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wb_model.h"

enum { V = 2048, T = 128, C = 128, L = 4, NH = 4, F = 512 };

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static int byte_to_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
    return 256 + k;
}

static int write_fixture(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fprintf(f, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":256,\"content\":\"<|endoftext|>\","
               "\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,"
               "\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
               "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":"
               "true,\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\","
               "\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":\"\","
               "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        int cp = byte_to_cp(b);
        fputs(b ? ",\"" : "\"", f);
        if (cp == '"' || cp == '\\') fprintf(f, "\\%c", cp);
        else if (cp < 0x80) fputc(cp, f);
        else fprintf(f, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
        fprintf(f, "\":%d", b);
    }
    fprintf(f, ",\"<|endoftext|>\":256");
    /* Ids 257.. are two-byte tokens without merges: never produced by encoding, but decodable,
     * so generation over the full 2048-id vocabulary can detokenize whatever it samples. */
    for (int id = 257; id < V; id++) {
        int a = 'a' + (id - 257) / 64, b = '0' + (id - 257) % 64;
        if (b == '"' || b == '\\') b = '~';
        fprintf(f, ",\"%c%c%d\":%d", a, b, id, id);
    }
    fprintf(f, "},\"merges\":[]}}\n");
    fclose(f);
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    fprintf(f, "{\"model_type\":\"gpt2\",\"vocab_size\":%d,\"n_positions\":%d,\"n_embd\":%d,"
               "\"n_layer\":%d,\"n_head\":%d,\"n_inner\":null,\"activation_function\":"
               "\"gelu_new\",\"layer_norm_epsilon\":1e-5}\n", V, T, C, L, NH);
    fclose(f);
    wb_tensor_view tv[64];
    float *bufs[64];
    int n = 0;
#define ADD(nm, nd, a, b, sc, off)                                                                \
    do {                                                                                          \
        size_t cnt = (size_t)(a) * (size_t)((nd) == 2 ? (b) : 1);                                 \
        bufs[n] = malloc(cnt * sizeof(float));                                                    \
        for (size_t i = 0; i < cnt; i++) bufs[n][i] = (off) + (sc) * frand();                      \
        tv[n] = (wb_tensor_view){.name = strdup(nm), .dtype = WB_F32, .ndim = nd,                 \
                                 .shape = {a, b}, .data = bufs[n], .nbytes = cnt * 4};            \
        n++;                                                                                      \
    } while (0)
    ADD("transformer.wte.weight", 2, V, C, 0.1f, 0);
    ADD("transformer.wpe.weight", 2, T, C, 0.05f, 0);
    for (int l = 0; l < L; l++) {
        char nm[96];
#define LADD(s, nd, a, b, sc, off) snprintf(nm, sizeof nm, "transformer.h.%d.%s", l, s); ADD(nm, nd, a, b, sc, off)
        LADD("ln_1.weight", 1, C, 0, 0.1f, 1);
        LADD("ln_1.bias", 1, C, 0, 0.05f, 0);
        LADD("attn.c_attn.weight", 2, C, 3 * C, 0.1f, 0);
        LADD("attn.c_attn.bias", 1, 3 * C, 0, 0.05f, 0);
        LADD("attn.c_proj.weight", 2, C, C, 0.1f, 0);
        LADD("attn.c_proj.bias", 1, C, 0, 0.05f, 0);
        LADD("ln_2.weight", 1, C, 0, 0.1f, 1);
        LADD("ln_2.bias", 1, C, 0, 0.05f, 0);
        LADD("mlp.c_fc.weight", 2, C, F, 0.1f, 0);
        LADD("mlp.c_fc.bias", 1, F, 0, 0.05f, 0);
        LADD("mlp.c_proj.weight", 2, F, C, 0.05f, 0);
        LADD("mlp.c_proj.bias", 1, C, 0, 0.05f, 0);
#undef LADD
    }
    ADD("transformer.ln_f.weight", 1, C, 0, 0.1f, 1);
    ADD("transformer.ln_f.bias", 1, C, 0, 0.05f, 0);
#undef ADD
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    wb_status s = wb_safetensors_write(path, tv, n, NULL, 0, NULL);
    for (int i = 0; i < n; i++) free(bufs[i]), free((char *)tv[i].name);
    return s == WB_OK ? 0 : -1;
}

/* ---------------------------------------------------------------------------- stats */

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stat3 {
    double med, min, max;
} stat3;

static stat3 stats(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return (stat3){n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
}

#endif
