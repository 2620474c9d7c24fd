/* fuzz_gguf.c - wb_gguf_open_memory on arbitrary bytes: it must return an error or a handle whose
 * every tensor lies inside the buffer and whose every metadata read stays in bounds; never crash,
 * hang or leak. */
#include <stdint.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wb_gguf *g = NULL;
    wb_err err = {0};
    if (wb_gguf_open_memory(data, size, "fuzz.gguf", &g, &err) != WB_OK) {
        if (!memchr(err.msg, 0, sizeof err.msg)) __builtin_trap(); /* message not terminated */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < wb_gguf_n_tensors(g); i++) {
        const wb_gguf_tensor *t = wb_gguf_tensor_at(g, i);
        const uint8_t *p = t->data;
        if (t->bytes && (p < data || p + t->bytes > data + size)) __builtin_trap();
        if (t->bytes) sink ^= p[0] ^ p[t->bytes - 1];
        if (wb_gguf_tensor_find(g, t->name) != t) __builtin_trap();
    }
    for (int64_t i = 0; i < wb_gguf_n_kv(g); i++) {
        const char *key = wb_gguf_key(g, i), *s;
        size_t n;
        int64_t iv;
        double fv;
        int bv;
        (void)wb_gguf_get_int(g, key, &iv, &err);
        (void)wb_gguf_get_float(g, key, &fv, &err);
        (void)wb_gguf_get_bool(g, key, &bv, &err);
        if (wb_gguf_get_str(g, key, &s, &n, &err) == WB_OK && n) sink ^= (uint8_t)s[n - 1];
        uint64_t m = wb_gguf_arr_n(g, i);
        for (uint64_t j = 0; j < m && j < 64; j++) {
            if (wb_gguf_arr_str(g, i, j, &s, &n, &err) == WB_OK && n) sink ^= (uint8_t)s[n - 1];
            (void)wb_gguf_arr_int(g, i, j, &iv, &err);
            (void)wb_gguf_arr_float(g, i, j, &fv, &err);
        }
        if (m) (void)wb_gguf_arr_str(g, i, m, &s, &n, &err); /* one past the end: refused */
    }
    (void)sink;
    wb_gguf_free(g);
    return 0;
}
