/* fuzz_tokenizer_json.c - libFuzzer target: arbitrary bytes as tokenizer.json. A load must either
 * fail cleanly or give a tokenizer that encodes, decodes and streams a fixed hostile string. */
#include "wb_tokenizer.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    if (wb_tokenizer_load_json((const char *)data, size, "fuzz.json", &tok, &err) != WB_OK) {
        if (tok || !err.msg[0]) __builtin_trap(); /* a failure must leave no object and say why */
        return 0;
    }
    static const char text[] = "Hello  world!\n\n\tI'm <|endoftext|> [MASK] 123 \xe6\x9d\xb1 \xf0\x9f\x98\x80"
                               "\xff\xe2\x82 ab abc   <s>x</s> <|im_start|>\xe2\x96\x81\xe2\x96\x81 "
                               "\xc4\xb0 I'LL 12345 a-b..c e\xcc\x81 \xef\xac\x81 [X]";
    int32_t *ids = NULL;
    size_t n = 0;
    if (wb_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n, &err) == WB_OK) {
        char *back = NULL;
        size_t len = 0;
        if (wb_tokenizer_decode(tok, ids, n, &back, &len, &err) == WB_OK) wb_free(back);
        wb_detok *d = NULL;
        if (wb_detok_new(tok, &d, &err) == WB_OK) {
            const char *p;
            size_t l;
            for (size_t i = 0; i < n; i++) wb_detok_push(d, ids[i], &p, &l, &err);
            wb_detok_flush(d, &p, &l);
            wb_detok_free(d);
        }
        wb_free(ids);
    }
    wb_tokenizer_free(tok);
    return 0;
}
