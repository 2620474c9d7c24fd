/* fuzz_json_schema.c - libFuzzer target: arbitrary bytes as a JSON schema constraint (cJSON parse,
 * duplicate-key check, schema to regex, regex to masks). Fails with a message or walks. */
#include "fuzz_constraint_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 2048) return 0; /* keep each run fast */
    wb_constraint *c = NULL;
    wb_err err = {0};
    if (wb_constraint_json_schema_new(fuzz_byte_vocab(), (const char *)data, size,
                                      WB_JSON_WS_COMPACT, &c, &err) != WB_OK) {
        if (c || !err.msg[0]) __builtin_trap();
        return 0;
    }
    fuzz_walk(c);
    wb_constraint_free(c);
    return 0;
}
