/* test_gguf.c - GGUF writer -> reader round trip, and hostile files rejected with a clear error. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf.h"
#include "quant.h"
#include "wb_model.h"

/* ---- a tiny byte builder for hand-made files ---- */
typedef struct bb {
    uint8_t p[4096];
    size_t n;
} bb;
static void b_raw(bb *b, const void *s, size_t n) {
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void b_le(bb *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b->p[b->n++] = (uint8_t)(v >> (8 * i));
}
static void b_str(bb *b, const char *s) {
    b_le(b, strlen(s), 8);
    b_raw(b, s, strlen(s));
}
static void b_hdr(bb *b, uint32_t ver, uint64_t nt, uint64_t nkv) {
    b->n = 0;
    b_raw(b, "GGUF", 4);
    b_le(b, ver, 4);
    b_le(b, nt, 8);
    b_le(b, nkv, 8);
}
static void b_tensor(bb *b, const char *name, int nd, const uint64_t *dims, uint32_t type, uint64_t off) {
    b_str(b, name);
    b_le(b, (uint64_t)nd, 4);
    for (int d = 0; d < nd; d++) b_le(b, dims[d], 8);
    b_le(b, type, 4);
    b_le(b, off, 8);
}
static void b_pad(bb *b, size_t a) {
    while (b->n % a) b->p[b->n++] = 0;
}

static char g_err_msg[512];
/* open the bytes; returns the status, message in g_err_msg */
static wb_status open_bytes(const bb *b) {
    wb_gguf *g = NULL;
    wb_err err = {0};
    wb_status st = wb_gguf_open_memory(b->p, b->n, "t.gguf", &g, &err);
    snprintf(g_err_msg, sizeof g_err_msg, "%s", st ? err.msg : "");
    CHECK((st == WB_OK) == (g != NULL));
    wb_gguf_free(g);
    return st;
}

static void writer_and_reader_round_trip(void) {
    char path[] = "/tmp/wb_test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    wb_gguf_writer *w;
    wb_err err = {0};
    CHECK(wb_gguf_writer_new(&w, &err) == WB_OK);
    CHECK(wb_gguf_set_str(w, "general.architecture", "llama", 5, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, "llama.block_count", 2, &err) == WB_OK);
    CHECK(wb_gguf_set_i32(w, "tokenizer.ggml.bos_token_id", -1, &err) == WB_OK);
    CHECK(wb_gguf_set_f32(w, "llama.rope.freq_base", 10000.5f, &err) == WB_OK);
    CHECK(wb_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1, &err) == WB_OK);
    const char *toks[] = {"a", "", "\xc4\xa0the"};
    CHECK(wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", toks, 3, &err) == WB_OK);
    const int32_t tt[] = {1, 3, 6};
    CHECK(wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", tt, 3, &err) == WB_OK);
    enum { R = 3, C = 64 };
    float x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = (float)((i * 37) % 101 - 50) / 25.0f;
    const int64_t dims[2] = {C, R};
    const uint32_t types[] = {WB_GGML_F32, WB_GGML_F16, WB_GGML_BF16, WB_GGML_Q8_0, WB_GGML_Q4_0};
    const char *names[] = {"t.f32", "t.f16", "t.bf16", "t.q8_0", "t.q4_0"};
    for (int t = 0; t < 5; t++) CHECK(wb_gguf_add_tensor(w, names[t], 2, dims, types[t], x, &err) == WB_OK);
    CHECK(wb_gguf_add_tensor(w, "t.f32", 2, dims, WB_GGML_F32, x, &err) == WB_ERR_ARG); /* twice */
    const int64_t odd[1] = {33};
    CHECK(wb_gguf_add_tensor(w, "t.odd", 1, odd, WB_GGML_Q8_0, x, &err) == WB_ERR_ARG);
    CHECK(wb_gguf_write(w, path, &err) == WB_OK);
    wb_gguf_writer_free(w);

    wb_gguf *g = NULL;
    CHECK_MSG(wb_gguf_open(path, &g, &err) == WB_OK, "%s", err.msg);
    if (!g) return;
    CHECK(wb_gguf_version(g) == 3 && wb_gguf_alignment(g) == 32);
    const char *s;
    size_t n;
    int64_t iv;
    double fv;
    int bv;
    CHECK(wb_gguf_get_str(g, "general.architecture", &s, &n, &err) == WB_OK && n == 5 && !memcmp(s, "llama", 5));
    CHECK(wb_gguf_get_int(g, "llama.block_count", &iv, &err) == WB_OK && iv == 2);
    CHECK(wb_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &iv, &err) == WB_OK && iv == -1);
    CHECK(wb_gguf_get_float(g, "llama.rope.freq_base", &fv, &err) == WB_OK && fv == 10000.5);
    CHECK(wb_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &bv, &err) == WB_OK && bv == 1);
    CHECK(wb_gguf_get_int(g, "general.architecture", &iv, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "general.architecture");
    CHECK(wb_gguf_get_int(g, "no.such.key", &iv, &err) == WB_ERR_NOTFOUND);
    int64_t k = wb_gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(k >= 0 && wb_gguf_arr_n(g, k) == 3 && wb_gguf_arr_type(g, k) == WB_GGUF_STRING);
    for (int i = 0; i < 3; i++)
        CHECK(wb_gguf_arr_str(g, k, (uint64_t)i, &s, &n, &err) == WB_OK && n == strlen(toks[i]) &&
              !memcmp(s, toks[i], n));
    CHECK(wb_gguf_arr_str(g, k, 3, &s, &n, &err) == WB_ERR_RANGE);
    k = wb_gguf_find(g, "tokenizer.ggml.token_type");
    for (int i = 0; i < 3; i++) CHECK(wb_gguf_arr_int(g, k, (uint64_t)i, &iv, &err) == WB_OK && iv == tt[i]);
    CHECK(wb_gguf_n_tensors(g) == 5);
    for (int t = 0; t < 5; t++) {
        const wb_gguf_tensor *tv = wb_gguf_tensor_find(g, names[t]);
        CHECK(tv && tv->type == types[t] && tv->n_dims == 2 && tv->dims[0] == C && tv->dims[1] == R);
        if (!tv) continue;
        CHECK(((uintptr_t)tv->data - (uintptr_t)wb_gguf_tensor_at(g, 0)->data) % 32 == 0);
        float y[R * C];
        const uint8_t *p = tv->data;
        for (int i = 0; i < R * C; i++) {
            if (types[t] == WB_GGML_F32) memcpy(&y[i], p + 4 * i, 4);
            if (types[t] == WB_GGML_F16) y[i] = wb_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
            if (types[t] == WB_GGML_BF16) y[i] = wb_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        }
        if (types[t] == WB_GGML_Q8_0 || types[t] == WB_GGML_Q4_0) {
            const wb_qtype q = types[t] == WB_GGML_Q8_0 ? WB_QT_Q8_0 : WB_QT_Q4_0;
            CHECK(tv->bytes == wb_quant_row_bytes(q, C) * R);
            wb_dequantize_row(q, y, tv->data, R * C);
        }
        double tol = types[t] == WB_GGML_F32 ? 0 : types[t] == WB_GGML_Q4_0 ? 0.3 : 0.02;
        int bad = 0;
        for (int i = 0; i < R * C; i++) bad += fabs(y[i] - x[i]) > tol;
        CHECK_MSG(!bad, "%s: %d values off", names[t], bad);
    }
    wb_gguf_free(g);
    unlink(path);
    wb_gguf_free(NULL);
}

static void hostile_headers_are_rejected_with_the_field_named(void) {
    bb b;
    const uint64_t d64[1] = {64};
    b_hdr(&b, 3, 0, 0);
    CHECK(open_bytes(&b) == WB_OK); /* the smallest valid file */
    b.p[0] = 'X';
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "magic"));
    b_hdr(&b, 1, 0, 0);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "version 1"));
    b_hdr(&b, 0x03000000u, 0, 0);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "big-endian"));
    b_hdr(&b, 4, 0, 0);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "version 4"));
    b_hdr(&b, 3, 0, UINT64_MAX);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "metadata_kv_count"));
    b_hdr(&b, 3, 1ull << 40, 0);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "tensor_count"));
    /* a string longer than the file */
    b_hdr(&b, 3, 0, 1);
    b_le(&b, 1ull << 62, 8);
    b.n += 16;
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "truncated"));
    /* unknown value type, nested array, duplicate key, bad alignment */
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "a.b");
    b_le(&b, 13, 4);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "a.b") && strstr(g_err_msg, "type 13"));
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "nest");
    b_le(&b, WB_GGUF_ARRAY, 4), b_le(&b, WB_GGUF_ARRAY, 4), b_le(&b, 1, 8);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "nested"));
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "arr");
    b_le(&b, WB_GGUF_ARRAY, 4), b_le(&b, WB_GGUF_U32, 4), b_le(&b, 1ull << 61, 8);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "do not fit"));
    b_hdr(&b, 3, 0, 2);
    b_str(&b, "k"), b_le(&b, WB_GGUF_U8, 4), b_le(&b, 1, 1);
    b_str(&b, "k"), b_le(&b, WB_GGUF_U8, 4), b_le(&b, 2, 1);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "twice"));
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "general.alignment"), b_le(&b, WB_GGUF_U32, 4), b_le(&b, 48, 4);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "power of two"));
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "general.alignment"), b_le(&b, WB_GGUF_U64, 4), b_le(&b, 32, 8);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "u32"));
    b_hdr(&b, 3, 0, 1);
    b_str(&b, "flag"), b_le(&b, WB_GGUF_BOOL, 4), b_le(&b, 7, 1);
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "bool"));
    /* tensors: one valid, then each field broken */
    b_hdr(&b, 3, 1, 0);
    b_tensor(&b, "w", 1, d64, WB_GGML_F32, 0);
    b_pad(&b, 32);
    b.n += 256;
    CHECK(open_bytes(&b) == WB_OK);
    const struct {
        const char *name;
        int nd;
        uint64_t dims[5];
        uint32_t type;
        uint64_t off;
        const char *needle;
    } cases[] = {
        {"w", 5, {1, 1, 1, 1, 1}, WB_GGML_F32, 0, "n_dimensions"},
        {"w", 1, {0}, WB_GGML_F32, 0, "dimension 0"},
        {"w", 2, {1ull << 40, 1ull << 40}, WB_GGML_F32, 0, "dimension 1"},
        {"w", 1, {64}, 99, 0, "unknown tensor type"},
        {"w", 1, {48}, WB_GGML_Q8_0, 0, "multiple of Q8_0"},
        {"w", 1, {64}, WB_GGML_F32, 16, "alignment"},
        {"w", 1, {64}, WB_GGML_F32, 64, "past the end"},
        {"w", 1, {1024}, WB_GGML_Q4_K, 0, "past the end"},
        /* the fallback types: blocks of 32 (256 for Q5_K), bytes = block bytes x blocks */
        {"w", 1, {48}, WB_GGML_Q5_0, 0, "multiple of Q5_0"},
        {"w", 1, {80}, WB_GGML_Q4_1, 0, "multiple of Q4_1"},
        {"w", 1, {16}, WB_GGML_Q5_1, 0, "multiple of Q5_1"},
        {"w", 2, {896, 2}, WB_GGML_Q5_K, 0, "multiple of Q5_K"},
        {"w", 1, {384}, WB_GGML_Q5_0, 0, "past the end"},  /* 12 x 22 = 264 > 256 */
        {"w", 1, {416}, WB_GGML_Q4_1, 0, "past the end"},  /* 13 x 20 = 260 */
        {"w", 1, {352}, WB_GGML_Q5_1, 0, "past the end"},  /* 11 x 24 = 264 */
        {"w", 1, {512}, WB_GGML_Q5_K, 0, "past the end"},  /* 2 x 176 = 352 */
        {"w", 1, {1024}, WB_GGML_Q2_K, 0, "past the end"}, /* 4 x 84 = 336 */
        {"w", 1, {100}, WB_GGML_IQ4_NL, 0, "multiple of IQ4_NL"},
        {"w", 1, {480}, WB_GGML_IQ4_NL, 0, "past the end"}, /* 15 x 18 = 270 */
        {"w", 1, {128}, WB_GGML_IQ4_XS, 0, "multiple of IQ4_XS"},
        {"w", 1, {512}, WB_GGML_IQ4_XS, 0, "past the end"}, /* 2 x 136 = 272 */
        {"w", 1, {256}, 31, 0, "unknown tensor type"},      /* Q4_0_4_4: gone from GGUF */
        {"a-name-of-sixty-five-bytes-is-one-byte-longer-than-ggml-allows-xyz", 1, {64}, WB_GGML_F32, 0, "name"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        b_hdr(&b, 3, 1, 0);
        b_tensor(&b, cases[i].name, cases[i].nd, cases[i].dims, cases[i].type, cases[i].off);
        b_pad(&b, 32);
        b.n += 256;
        CHECK_MSG(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, cases[i].needle),
                  "case %zu: \"%s\" lacks \"%s\"", i, g_err_msg, cases[i].needle);
    }
    /* exactly block bytes x blocks: the last fitting size is accepted and measured so */
    const struct { uint32_t type; uint64_t n; size_t bytes; } fit[] = {
        {WB_GGML_Q5_0, 352, 242}, {WB_GGML_Q4_1, 384, 240}, {WB_GGML_Q5_1, 320, 240},
        {WB_GGML_Q5_K, 256, 176}, {WB_GGML_Q2_K, 512, 168}, {WB_GGML_Q3_K, 512, 220},
        {WB_GGML_IQ4_NL, 416, 234}, {WB_GGML_IQ4_XS, 256, 136}, {WB_GGML_IQ2_XXS, 768, 198}};
    for (size_t i = 0; i < sizeof fit / sizeof *fit; i++) {
        b_hdr(&b, 3, 1, 0);
        b_tensor(&b, "w", 1, &fit[i].n, fit[i].type, 0);
        b_pad(&b, 32);
        b.n += 256;
        wb_gguf *g = NULL;
        wb_err err = {0};
        CHECK_MSG(wb_gguf_open_memory(b.p, b.n, "t.gguf", &g, &err) == WB_OK, "%s", err.msg);
        if (g) CHECK(wb_gguf_tensor_at(g, 0)->bytes == fit[i].bytes);
        wb_gguf_free(g);
    }
    /* two tensors: same name; overlapping bytes */
    b_hdr(&b, 3, 2, 0);
    b_tensor(&b, "w", 1, d64, WB_GGML_F32, 0);
    b_tensor(&b, "w", 1, d64, WB_GGML_F32, 256);
    b_pad(&b, 32);
    b.n += 512;
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "twice"));
    b_hdr(&b, 3, 2, 0);
    b_tensor(&b, "w", 1, d64, WB_GGML_F32, 0);
    b_tensor(&b, "v", 1, d64, WB_GGML_F32, 128);
    b_pad(&b, 32);
    b.n += 512;
    CHECK(open_bytes(&b) == WB_ERR_FORMAT && strstr(g_err_msg, "overlap"));
}

/* Every prefix of a valid file is rejected cleanly (never read past the end). */
static void every_truncation_is_rejected(void) {
    bb b;
    b_hdr(&b, 3, 1, 2);
    b_str(&b, "general.architecture"), b_le(&b, WB_GGUF_STRING, 4), b_str(&b, "gpt2");
    b_str(&b, "toks"), b_le(&b, WB_GGUF_ARRAY, 4), b_le(&b, WB_GGUF_STRING, 4), b_le(&b, 2, 8);
    b_str(&b, "x"), b_str(&b, "yz");
    const uint64_t d[2] = {32, 2};
    b_tensor(&b, "w", 2, d, WB_GGML_Q8_0, 0);
    b_pad(&b, 32);
    b.n += 68;
    const size_t full = b.n;
    CHECK(open_bytes(&b) == WB_OK);
    int bad = 0;
    for (size_t n = 0; n < full; n++) {
        b.n = n;
        bad += open_bytes(&b) != WB_ERR_FORMAT;
    }
    CHECK_MSG(!bad, "%d prefixes accepted", bad);
}

static void missing_and_non_regular_files_are_io_errors(void) {
    wb_gguf *g = NULL;
    wb_err err = {0};
    CHECK(wb_gguf_open("/nonexistent/x.gguf", &g, &err) == WB_ERR_IO && !g);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent/x.gguf");
    CHECK(wb_gguf_open("/dev/zero", &g, &err) == WB_ERR_IO && !g);
    CHECK(wb_gguf_open("/tmp", &g, &err) == WB_ERR_IO && !g);
}

int main(void) {
    RUN(writer_and_reader_round_trip);
    RUN(hostile_headers_are_rejected_with_the_field_named);
    RUN(every_truncation_is_rejected);
    RUN(missing_and_non_regular_files_are_io_errors);
    return check_summary();
}
