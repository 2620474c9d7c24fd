/* test_weights.c - core/weights.c on hand-written checkpoints: a NaN or Inf anywhere in a tensor
 * (F32, F16, BF16; widened or kept BF16; vector or transposed matrix) is a load error naming the
 * file, the tensor and the element; an index naming 60 000 distinct shards fails with a clear
 * error at the first missing shard (the index is sorted, not scanned per entry: a quadratic scan
 * would show as a ctest timeout, no wall clock here). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fixture.h"
#include "model_family.h"
#include "wb_model.h"

enum { R = 6, K = 40 }; /* matrix [R, K]; vector [K] */

/* model.safetensors with "m.weight" [R, K] and "v.weight" [K] in dtype dt; element bad_at of
 * tensor `bad` (0: the matrix, 1: the vector) set to bad_value. */
static void write_pair(const char *dir, wb_dtype dt, int bad, size_t bad_at, float bad_value) {
    const size_t es = dt == WB_F32 ? 4 : 2, n[2] = {(size_t)R * K, K};
    uint8_t *buf[2];
    wb_tensor_view tv[2];
    const char *names[2] = {"m.weight", "v.weight"};
    for (int t = 0; t < 2; t++) {
        buf[t] = malloc(n[t] * es);
        for (size_t i = 0; i < n[t]; i++) {
            float x = (t == bad && i == bad_at) ? bad_value : 0.01f * (float)(i % 97) - 0.3f;
            if (es == 4) memcpy(buf[t] + 4 * i, &x, 4);
            else {
                uint16_t h = dt == WB_BF16 ? wb_f32_to_bf16(x) : wb_f32_to_f16(x);
                memcpy(buf[t] + 2 * i, &h, 2);
            }
        }
        tv[t] = (wb_tensor_view){.name = names[t], .dtype = dt, .ndim = t ? 1 : 2,
                                 .shape = {t ? K : R, t ? 0 : K}, .data = buf[t],
                                 .nbytes = n[t] * es};
    }
    char path[512];
    wb_err err = {0};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(wb_safetensors_write(path, tv, 2, NULL, 0, &err) == WB_OK);
    free(buf[0]), free(buf[1]);
}

/* Load both tensors (matrix transposed when transpose); the status, err filled. */
static wb_status load_pair(const char *dir, int keep_bf16, int transpose, wb_err *err) {
    wb_weights *w = NULL;
    wb_status s = wb_weights_open(dir, &w, err);
    if (s) return s;
    const float *vec = NULL;
    wb_mat mat = {0};
    wb_want wants[2] = {{.name = "m.weight", .d0 = R, .d1 = K, .transpose = transpose, .mat = &mat},
                        {.name = "v.weight", .d0 = K, .vec = &vec}};
    wb_weight_store store = {0};
    s = wb_weights_load(w, wants, 2, keep_bf16, &store, NULL, err);
    wb_weight_store_free(&store);
    wb_weights_free(w);
    return s;
}

static void nonfinite_weights_fail_naming_the_tensor_and_element(void) {
    const wb_dtype dts[3] = {WB_F32, WB_F16, WB_BF16};
    const float bads[3] = {NAN, INFINITY, -INFINITY};
    char *dir = fixture_new_dir("weights");
    for (int d = 0; d < 3; d++)
        for (int b = 0; b < 3; b++)
            for (int which = 0; which < 2; which++)
                for (int mode = 0; mode < 3; mode++) { /* widened, kept BF16, transposed */
                    const size_t at = which ? K - 1 : (size_t)R * K - 3 - (size_t)(7 * b);
                    write_pair(dir, dts[d], which, at, bads[b]);
                    wb_err err = {0};
                    wb_status s = load_pair(dir, mode == 1, mode == 2, &err);
                    char want[64];
                    snprintf(want, sizeof want, "tensor '%s' holds NaN or Inf (element %zu ",
                             which ? "v.weight" : "m.weight", at);
                    CHECK_MSG(s == WB_ERR_FORMAT && strstr(err.msg, want) &&
                                  strstr(err.msg, "model.safetensors"),
                              "dtype %d value %g tensor %d mode %d: status %d, message: %s",
                              (int)dts[d], (double)bads[b], which, mode, (int)s, err.msg);
                }
    /* the same file with only finite values loads */
    write_pair(dir, WB_BF16, 0, 0, 1.0f);
    wb_err err = {0};
    CHECK_MSG(load_pair(dir, 1, 0, &err) == WB_OK, "%s", err.msg);
    CHECK_MSG(load_pair(dir, 0, 1, &err) == WB_OK, "%s", err.msg);
    fixture_rm_dir(dir);
}

static void index_of_60000_shards_fails_at_the_first_missing_shard(void) {
    char *dir = fixture_new_dir("weights");
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) {
        fixture_rm_dir(dir);
        return;
    }
    /* listed in reverse so the first shard by name is the last entry */
    fprintf(f, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    for (int i = 60000; i >= 1; i--)
        fprintf(f, "%s\"model.layers.%d.weight\":\"model-%05d-of-60000.safetensors\"",
                i == 60000 ? "" : ",", i, i);
    fprintf(f, "}}");
    CHECK(fclose(f) == 0);
    wb_weights *w = NULL;
    wb_err err = {0};
    wb_status s = wb_weights_open(dir, &w, &err);
    CHECK(s != WB_OK && w == NULL);
    CHECK_MSG(strstr(err.msg, "model-00001-of-60000.safetensors") != NULL, "%s", err.msg);
    wb_weights_free(w);
    /* a shard name that leaves the model directory is refused, naming it */
    f = fopen(path, "wb");
    fprintf(f, "{\"weight_map\":{\"a\":\"x.safetensors\",\"b\":\"../y.safetensors\"}}");
    fclose(f);
    CHECK(wb_weights_open(dir, &w, &err) == WB_ERR_FORMAT && w == NULL);
    CHECK_MSG(strstr(err.msg, "../y.safetensors") && strstr(err.msg, "index.json"), "%s",
              err.msg);
    fixture_rm_dir(dir);
}

int main(void) {
    RUN(nonfinite_weights_fail_naming_the_tensor_and_element);
    RUN(index_of_60000_shards_fails_at_the_first_missing_shard);
    return check_summary();
}
