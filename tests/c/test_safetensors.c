/* test_safetensors.c - the safetensors reader/writer and the f16/bf16 conversions. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "wb_model.h"

static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A buffer holding "u64 length + header + data" for hand-made headers. */
static size_t make_raw(unsigned char *buf, const char *header, size_t data_bytes) {
    size_t hl = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0, data_bytes);
    return 8 + hl + data_bytes;
}

static void writes_and_reads_back_every_dtype_with_metadata(void) {
    float f32[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
    uint16_t f16[4] = {0x3c00, 0xc000, 0x0001, 0x7c00};
    uint16_t bf16[2] = {0x3f80, 0xff80};
    int32_t i32[3] = {1, -1, 1 << 30};
    int64_t i64[2] = {(int64_t)1 << 40, -5};
    wb_tensor_view t[6] = {
        {.name = "a.weight", .dtype = WB_F32, .ndim = 2, .shape = {2, 3}, .data = f32, .nbytes = 24},
        {.name = "b", .dtype = WB_F16, .ndim = 1, .shape = {4}, .data = f16, .nbytes = 8},
        {.name = "c\"quoted\\", .dtype = WB_BF16, .ndim = 2, .shape = {1, 2}, .data = bf16, .nbytes = 4},
        {.name = "d", .dtype = WB_I32, .ndim = 1, .shape = {3}, .data = i32, .nbytes = 12},
        {.name = "e", .dtype = WB_I64, .ndim = 1, .shape = {2}, .data = i64, .nbytes = 16},
        {.name = "scalar_empty", .dtype = WB_F32, .ndim = 1, .shape = {0}, .data = NULL, .nbytes = 0},
    };
    const char *meta[] = {"format", "pt", "note", "line\nbreak"};
    wb_err err = {0};
    const char *path = tmp_path("rt.safetensors");
    CHECK(wb_safetensors_write(path, t, 6, meta, 2, &err) == WB_OK);
    wb_safetensors *st = NULL;
    CHECK(wb_safetensors_open(path, &st, &err) == WB_OK);
    if (!st) return;
    CHECK(wb_safetensors_count(st) == 6);
    CHECK(strcmp(wb_safetensors_metadata(st, "format"), "pt") == 0);
    CHECK(strcmp(wb_safetensors_metadata(st, "note"), "line\nbreak") == 0);
    CHECK(wb_safetensors_metadata(st, "absent") == NULL);
    for (int i = 0; i < 6; i++) {
        wb_tensor_view v;
        CHECK(wb_safetensors_get(st, i, &v) == WB_OK);
        CHECK(strcmp(v.name, t[i].name) == 0);
        CHECK(v.dtype == t[i].dtype && v.ndim == t[i].ndim && v.nbytes == t[i].nbytes);
        CHECK(memcmp(v.shape, t[i].shape, sizeof v.shape) == 0);
        if (v.nbytes) CHECK(memcmp(v.data, t[i].data, v.nbytes) == 0);
    }
    wb_tensor_view v;
    CHECK(wb_safetensors_find(st, "c\"quoted\\", &v, &err) == WB_OK);
    CHECK(wb_safetensors_find(st, "nope", &v, &err) == WB_ERR_NOTFOUND);
    CHECK_ERR_MENTIONS(err.msg, "nope");
    CHECK_ERR_MENTIONS(err.msg, "rt.safetensors");
    CHECK(wb_safetensors_get(st, 6, &v) != WB_OK);
    wb_safetensors_free(st);
    /* header padded to 8 bytes as HF does, so the data area is aligned */
    FILE *f = fopen(path, "rb");
    unsigned char hdr[8];
    CHECK(fread(hdr, 1, 8, f) == 8);
    fclose(f);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | hdr[i];
    CHECK(hl % 8 == 0);
    /* atomic: no temporary left behind; rewriting replaces */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
    CHECK(wb_safetensors_write(path, t, 1, NULL, 0, &err) == WB_OK);
    CHECK(wb_safetensors_open(path, &st, &err) == WB_OK);
    CHECK(wb_safetensors_count(st) == 1);
    wb_safetensors_free(st);
    unlink(path);
    wb_safetensors_free(NULL);
}

static void writer_rejects_bad_views_and_unwritable_paths(void) {
    float x[2] = {0};
    wb_tensor_view t = {.name = "x", .dtype = WB_F32, .ndim = 1, .shape = {3}, .data = x, .nbytes = 8};
    wb_err err = {0};
    CHECK(wb_safetensors_write(tmp_path("bad.safetensors"), &t, 1, NULL, 0, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "'x'");
    t.shape[0] = 2;
    CHECK(wb_safetensors_write("/nonexistent/dir/x.safetensors", &t, 1, NULL, 0, &err) == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent/dir/x.safetensors");
}

static void opening_a_missing_file_names_it(void) {
    wb_safetensors *st = (wb_safetensors *)1;
    wb_err err = {0};
    CHECK(wb_safetensors_open("/nonexistent/m.safetensors", &st, &err) == WB_ERR_IO);
    CHECK(st == NULL);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent/m.safetensors");
}

static void malformed_headers_are_rejected_naming_file_and_tensor(void) {
    static const struct {
        const char *header;
        size_t data;
        const char *needle;
    } cases[] = {
        {"[1,2,3]", 0, "JSON object"},
        {"{\"t\":", 0, "JSON"},
        {"{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "'t'"},
        {"{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "F64"},
        {"{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dimensions"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", 4, "overflow"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "data_offsets"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "data_offsets"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "need 8"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", 8, "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, "twice"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__"},
        {"{\"__metadata__\":[\"k\"]}", 0, "__metadata__"},
        {"{\"t\":7}", 0, "'t'"},
        {"{} x", 0, "trailing"},
    };
    unsigned char buf[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = make_raw(buf, cases[i].header, cases[i].data);
        wb_safetensors *st = (wb_safetensors *)1;
        wb_err err = {0};
        wb_status s = wb_safetensors_parse(buf, n, "m.safetensors", &st, &err);
        CHECK_MSG(s == WB_ERR_FORMAT, "case %zu accepted", i);
        CHECK(st == NULL);
        CHECK_ERR_MENTIONS(err.msg, "m.safetensors");
        CHECK_ERR_MENTIONS(err.msg, cases[i].needle);
    }
    /* header length field beyond the file, and a file shorter than the length field */
    size_t n = make_raw(buf, "{}", 0);
    buf[0] = 200;
    wb_safetensors *st;
    wb_err err = {0};
    CHECK(wb_safetensors_parse(buf, n, "m.safetensors", &st, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "header length");
    buf[0] = 0xff, buf[7] = 0xff;
    CHECK(wb_safetensors_parse(buf, n, "m.safetensors", &st, &err) == WB_ERR_FORMAT);
    CHECK(wb_safetensors_parse(buf, 5, "m.safetensors", &st, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "too short");
    /* valid minimal forms: empty header, HF space padding, zero-size tensors sharing an offset */
    n = make_raw(buf, "{}      ", 0);
    CHECK(wb_safetensors_parse(buf, n, "m", &st, &err) == WB_OK);
    CHECK(wb_safetensors_count(st) == 0);
    wb_safetensors_free(st);
    n = make_raw(buf, "{\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                      "\"f\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
                      "\"g\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[0,2]}}", 2);
    CHECK(wb_safetensors_parse(buf, n, "m", &st, &err) == WB_OK);
    CHECK(wb_safetensors_count(st) == 3);
    wb_safetensors_free(st);
}

static void f16_conversion_handles_subnormals_inf_nan_and_ties(void) {
    CHECK(wb_f16_to_f32(0x3c00) == 1.0f);
    CHECK(wb_f16_to_f32(0xc000) == -2.0f);
    CHECK(wb_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(wb_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(wb_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    CHECK(wb_f16_to_f32(0x0400) == 0x1p-14f);
    CHECK(wb_f16_to_f32(0x8000) == 0.0f && signbit(wb_f16_to_f32(0x8000)));
    CHECK(isinf(wb_f16_to_f32(0x7c00)) && wb_f16_to_f32(0xfc00) < 0);
    CHECK(isnan(wb_f16_to_f32(0x7e00)));
    /* every half survives the round trip (NaNs stay NaN) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = wb_f16_to_f32((uint16_t)h);
        uint16_t back = wb_f32_to_f16(f);
        if (isnan(f) ? !isnan(wb_f16_to_f32(back)) : back != h) bad++;
    }
    CHECK(bad == 0);
    CHECK(wb_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(wb_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(wb_f32_to_f16(65520.0f) == 0x7c00); /* tie rounds to even = inf */
    CHECK(wb_f32_to_f16(1e10f) == 0x7c00 && wb_f32_to_f16(-1e10f) == 0xfc00);
    CHECK(wb_f32_to_f16(INFINITY) == 0x7c00);
    CHECK((wb_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (wb_f32_to_f16(NAN) & 0x3ff));
    /* ties to even: 1 + 2^-11 is halfway between 1 and 1+2^-10 -> 1 (even) */
    CHECK(wb_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(wb_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02); /* 1.5 ulp -> 2 (even) */
    CHECK(wb_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
    /* subnormal ties: 0.5 * 2^-24 -> 0; 1.5 * 2^-24 -> 2 * 2^-24; tiny -> 0 */
    CHECK(wb_f32_to_f16(0x1p-25f) == 0x0000);
    CHECK(wb_f32_to_f16(3 * 0x1p-25f) == 0x0002);
    CHECK(wb_f32_to_f16(0x1p-25f + 0x1p-40f) == 0x0001);
    CHECK(wb_f32_to_f16(-0x1p-30f) == 0x8000);
    CHECK(wb_f32_to_f16(0x1p-14f - 0x1p-30f) == 0x0400); /* rounds up into the normals */
}

static void bf16_conversion_rounds_to_nearest_even(void) {
    CHECK(wb_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(wb_bf16_to_f32(0x0001) == bitsf(0x00010000)); /* subnormal */
    CHECK(isinf(wb_bf16_to_f32(0x7f80)));
    CHECK(isnan(wb_bf16_to_f32(0x7fc0)));
    CHECK(wb_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(wb_f32_to_bf16(bitsf(0x3f808000)) == 0x3f80); /* tie, even stays */
    CHECK(wb_f32_to_bf16(bitsf(0x3f818000)) == 0x3f82); /* tie, odd rounds up */
    CHECK(wb_f32_to_bf16(bitsf(0x3f808001)) == 0x3f81);
    CHECK(wb_f32_to_bf16(bitsf(0x7f7fffff)) == 0x7f80); /* max float rounds to inf */
    CHECK(wb_f32_to_bf16(INFINITY) == 0x7f80 && wb_f32_to_bf16(-INFINITY) == 0xff80);
    uint16_t n = wb_f32_to_bf16(bitsf(0x7f800001)); /* signalling NaN with low payload only */
    CHECK(isnan(wb_bf16_to_f32(n)));
    CHECK(wb_f32_to_bf16(bitsf(0x00018000)) == 0x0002); /* subnormal tie to even */
    int bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = wb_bf16_to_f32((uint16_t)b);
        if (!isnan(f) && wb_f32_to_bf16(f) != b) bad++;
    }
    CHECK(bad == 0);
    (void)fbits;
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/wb_test_st_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(writes_and_reads_back_every_dtype_with_metadata);
    RUN(writer_rejects_bad_views_and_unwritable_paths);
    RUN(opening_a_missing_file_names_it);
    RUN(malformed_headers_are_rejected_naming_file_and_tensor);
    RUN(f16_conversion_handles_subnormals_inf_nan_and_ties);
    RUN(bf16_conversion_rounds_to_nearest_even);
    rmdir(g_dir);
    return check_summary();
}
