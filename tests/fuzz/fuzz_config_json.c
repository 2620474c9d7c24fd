/* fuzz_config_json.c - libFuzzer target: arbitrary bytes as config.json. The parse must fail
 * cleanly (an error message, no crash) or give a config; the strict JSON reader (duplicate keys)
 * must agree with itself on the same bytes. */
#include "json_strict.h"
#include "wb_model.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wb_config cfg;
    wb_err err = {0};
    if (wb_config_parse((const char *)data, size, "fuzz/config.json", &cfg, &err) != WB_OK &&
        !err.msg[0])
        __builtin_trap(); /* a failure must say why */
    cJSON *root = NULL;
    wb_err e2 = {0};
    wb_status st = wb_json_parse_strict((const char *)data, size, "fuzz.json", &root, &e2);
    if ((st == WB_OK) != (root != NULL) || (st != WB_OK && !e2.msg[0])) __builtin_trap();
    cJSON_Delete(root);
    return 0;
}
