/* fuzz_safetensors.c - wb_safetensors_parse on arbitrary bytes: it must return an error or a
 * handle whose every view lies inside the buffer, never crash, hang or leak. */
#include <stdint.h>
#include <string.h>

#include "wb_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wb_safetensors *st = NULL;
    wb_err err = {0};
    if (wb_safetensors_parse(data, size, "fuzz.safetensors", &st, &err) != WB_OK) {
        if (!memchr(err.msg, 0, sizeof err.msg)) __builtin_trap(); /* message not terminated */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < wb_safetensors_count(st); i++) {
        wb_tensor_view v;
        if (wb_safetensors_get(st, i, &v) != WB_OK) __builtin_trap();
        const uint8_t *p = v.data;
        if (v.nbytes && (p < data || p + v.nbytes > data + size)) __builtin_trap();
        if (v.nbytes) sink ^= p[0] ^ p[v.nbytes - 1]; /* touch both ends under ASan */
        wb_tensor_view w;
        if (wb_safetensors_find(st, v.name, &w, NULL) != WB_OK) __builtin_trap();
    }
    (void)wb_safetensors_metadata(st, "format");
    (void)sink;
    wb_safetensors_free(st);
    return 0;
}
