/* fuzz_gguf_model.c - a whole model loaded from arbitrary GGUF bytes (wb_model_load_gguf_memory:
 * metadata -> config -> the family's parser -> every tensor through weights_gguf.c). It must
 * fail with a terminated message or give a model whose forward pass runs; never crash, hang,
 * leak or read outside the buffer. Seeds: tests/fuzz/seed_gguf_model.c (tiny models of each
 * architecture and tensor type). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_family.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wb_model *m = NULL;
    wb_err err = {0};
    if (wb_model_load_gguf_memory(data, size, "fuzz.gguf", NULL, &m, &err) != WB_OK) {
        if (!memchr(err.msg, 0, sizeof err.msg) || m) __builtin_trap();
        return 0;
    }
    const wb_config *c = wb_model_config(m);
    const int n = wb_model_max_ctx(m) >= 2 ? 2 : 1;
    const int32_t ids[2] = {0, c->vocab_size - 1};
    float *logits = malloc((size_t)c->vocab_size * sizeof *logits);
    if (logits && wb_model_forward(m, ids, n, logits, 0, &err) != WB_OK &&
        !memchr(err.msg, 0, sizeof err.msg))
        __builtin_trap();
    free(logits);
    wb_model_free(m);
    return 0;
}
