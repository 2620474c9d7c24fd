/* fuzz_choice.c - libFuzzer target: the input split at '\n' into choice labels (the first byte
 * picks the leading-space policy). Compilation fails with a message or the constraint walks, and
 * every label matches. */
#include "fuzz_constraint_common.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 2048) return 0; /* keep each run fast */
    wb_leading_space space = data[0] % 3 == 0 ? WB_SPACE_NONE
                             : data[0] % 3 == 1 ? WB_SPACE_OPTIONAL : WB_SPACE_ALWAYS;
    const char *labels[64];
    size_t lens[64];
    int n = 0;
    size_t start = 1;
    for (size_t i = 1; i <= size && n < 64; i++)
        if (i == size || data[i] == '\n') {
            labels[n] = (const char *)data + start;
            lens[n] = i - start;
            n++;
            start = i + 1;
        }
    wb_constraint *c = NULL;
    wb_err err = {0};
    if (wb_constraint_choice_new(fuzz_byte_vocab(), labels, lens, n, space, &c, &err) != WB_OK) {
        if (c || !err.msg[0]) __builtin_trap();
        return 0;
    }
    if (space == WB_SPACE_NONE)
        for (int i = 0; i < n; i++)
            if (!wb_constraint_matches(c, labels[i], lens[i])) __builtin_trap();
    fuzz_walk(c);
    wb_constraint_free(c);
    return 0;
}
