/* fuzz_regex.c - libFuzzer target: arbitrary bytes as a regex constraint. Compilation must fail
 * with a message or give a constraint whose masks walk without error (no recursion as deep as the
 * pattern: long literals and stacked quantifiers are in the seed corpus). */
#include "fuzz_constraint_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 2048) return 0; /* keep each run fast (the unit tests cover 150k-deep patterns) */
    wb_constraint *c = NULL;
    wb_err err = {0};
    if (wb_constraint_regex_new(fuzz_byte_vocab(), (const char *)data, size, &c, &err) != WB_OK) {
        if (c || !err.msg[0]) __builtin_trap();
        return 0;
    }
    (void)wb_constraint_matches(c, (const char *)data, size);
    fuzz_walk(c);
    wb_constraint_free(c);
    return 0;
}
