/* fuzz_gguf_tokenizer.c - wb_gguf_tokenizer_load on arbitrary GGUF bytes: an error with a
 * terminated message, or a tokenizer that encodes, decodes and writes back (wb_gguf_tokenizer_put)
 * without crashing, hanging or leaking. Seeds: tokenizer-only GGUFs of the test fixtures. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wb_gguf *g = NULL;
    wb_err err = {0};
    if (wb_gguf_open_memory(data, size, "fuzz.gguf", &g, &err) != WB_OK) return 0;
    wb_tokenizer *tok = NULL;
    char *tmpl = NULL;
    wb_status st = wb_gguf_tokenizer_load(g, &tok, &tmpl, &err);
    if (st != WB_OK) {
        if (!memchr(err.msg, 0, sizeof err.msg) || tok || tmpl) __builtin_trap();
        wb_gguf_free(g);
        return 0;
    }
    static const char *const texts[] = {"Hello, world! 123 \xe2\x96\x81x", " <s>a</s>  \n\t\xf0\x9f\x98\x80",
                                        "\xff\xfe\xe4\xb8", ""};
    for (int k = 0; k < 4; k++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (wb_tokenizer_encode(tok, texts[k], strlen(texts[k]), &ids, &n, &err) == WB_OK) {
            char *back = NULL;
            size_t bl = 0;
            if (wb_tokenizer_decode(tok, ids, n, &back, &bl, &err) == WB_OK) wb_free(back);
        }
        wb_free(ids);
    }
    wb_gguf_writer *w = NULL;
    if (wb_gguf_writer_new(&w, &err) == WB_OK) {
        (void)wb_gguf_tokenizer_put(w, tok, tmpl, &err);
        wb_gguf_writer_free(w);
    }
    free(tmpl);
    wb_tokenizer_free(tok);
    wb_gguf_free(g);
    return 0;
}
