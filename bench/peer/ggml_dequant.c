/* ggml_dequant.c - asks ggml (libggml-base, through its public C API) what the values of a GGUF
 * file's quantized tensors are: the independent reference for the workbench's own decoding of
 * the block types (core/quant_fallback.c, core/quant.c). Built by
 * tests/vectors/gguf/make_vectors.sh against a llama.cpp build outside the repository; never
 * part of the workbench build or its tests, which read only the JSON it prints.
 *
 *   ggml_dequant MODEL.gguf     prints {"tensors":[{"name":..,"type":..,"rows":R,"cols":C,
 *                               "first":[row 0],"last":[row R-1],"sum":S,"wsum":W},..]} for
 *                               every tensor that is not F32/F16/BF16, where S is the sum of all
 *                               its values and W the sum of value i times (i mod 997) + 1 (so a
 *                               permutation inside a block changes it), both in double
 */
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"
#include "gguf.h"

static void print_row(const float *x, int64_t n) {
    putchar('[');
    for (int64_t i = 0; i < n; i++) printf("%s%.9g", i ? "," : "", x[i]);
    putchar(']');
}

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: ggml_dequant MODEL.gguf\n"), 2;
    struct ggml_context *ctx = NULL;
    struct gguf_init_params ip = {.no_alloc = false, .ctx = &ctx};
    struct gguf_context *g = gguf_init_from_file(argv[1], ip);
    if (!g) return fprintf(stderr, "ggml_dequant: cannot read %s\n", argv[1]), 1;
    printf("{\"tensors\":[");
    int first = 1;
    for (int64_t t = 0; t < gguf_get_n_tensors(g); t++) {
        const char *name = gguf_get_tensor_name(g, t);
        struct ggml_tensor *x = ggml_get_tensor(ctx, name);
        if (!x || x->type == GGML_TYPE_F32 || x->type == GGML_TYPE_F16 || x->type == GGML_TYPE_BF16)
            continue;
        const int64_t cols = x->ne[0], rows = ggml_nrows(x);
        float *v = malloc((size_t)(cols * rows) * sizeof *v);
        if (!v) return fprintf(stderr, "ggml_dequant: out of memory\n"), 1;
        const struct ggml_type_traits *tr = ggml_get_type_traits(x->type);
        for (int64_t r = 0; r < rows; r++)
            tr->to_float((const char *)x->data + (size_t)r * x->nb[1], v + r * cols, cols);
        double s = 0, w = 0;
        for (int64_t i = 0; i < cols * rows; i++) s += v[i], w += (double)v[i] * (double)(i % 997 + 1);
        printf("%s{\"name\":\"%s\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"first\":", first ? "" : ",",
               name, ggml_type_name(x->type), (long long)rows, (long long)cols);
        print_row(v, cols);
        printf(",\"last\":");
        print_row(v + (rows - 1) * cols, cols);
        printf(",\"sum\":%.17g,\"wsum\":%.17g}", s, w);
        first = 0;
        free(v);
    }
    printf("]}\n");
    gguf_free(g);
    ggml_free(ctx);
    return 0;
}
