/* gguf_tokenizer.h - the tokenizer and chat template kept in a GGUF file's metadata, both ways.
 *
 * Reading builds the tokenizer from llama.cpp's keys (tokenizer.ggml.model "gpt2" = byte-level
 * BPE with merges and a pre-tokenizer named by tokenizer.ggml.pre; "llama" = SentencePiece BPE
 * whose merges follow from tokenizer.ggml.scores, with <0xNN> byte fallback and ▁ for spaces),
 * with ids identical to the Hugging Face tokenizer.json of the same model. Writing puts the same
 * keys, in the shapes llama.cpp's loader expects, for a tokenizer loaded from tokenizer.json.
 * Both directions are described in docs/gguf.md, "Tokenizer".
 */
#ifndef WB_GGUF_TOKENIZER_H
#define WB_GGUF_TOKENIZER_H

#include <stdint.h>

#include "gguf.h"
#include "wb_tokenizer.h"

/* Build the tokenizer from g's tokenizer.* metadata. *chat_template (when chat_template is not
 * NULL) receives a malloc'd NUL-terminated copy of tokenizer.chat_template, or NULL when the file
 * has none; the caller frees it with free(). Hostile metadata (arrays of other lengths or types,
 * token types out of range, unknown model or pre-tokenizer names, huge counts, ids out of range,
 * duplicate tokens, merges naming unknown tokens) is WB_ERR_FORMAT naming the file and the key;
 * a missing tokenizer.ggml.model / .tokens is WB_ERR_NOTFOUND. */
wb_status wb_gguf_tokenizer_load(const wb_gguf *g, wb_tokenizer **out, char **chat_template,
                                 wb_err *err);

/* Special ids and the BOS/EOS flags of the metadata (or of a tokenizer to be written). */
typedef struct wb_gguf_tok_specials {
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id; /* -1: absent */
    int add_bos, add_eos;                           /* 0 or 1 */
    int32_t n_vocab; /* token count; when writing, a count above the tokenizer's pads the list with
                      * "[PAD<i>]" unused tokens (llama.cpp's converter does this for an embedding with
                      * more rows than the tokenizer has ids); AUTO or 0: the tokenizer's own */
} wb_gguf_tok_specials;

/* tokenizer.ggml.bos/eos/unknown/padding/eot_token_id and add_bos_token / add_eos_token, with
 * llama.cpp's defaults for the model type when a key is absent; every id is checked against
 * the token count. */
wb_status wb_gguf_tokenizer_specials(const wb_gguf *g, wb_gguf_tok_specials *out, wb_err *err);

/* Write tok's metadata (tokenizer.ggml.model, .pre, .tokens, .token_type, .merges or .scores,
 * special ids, add_bos/add_eos/add_space_prefix) and tokenizer.chat_template when not NULL.
 * A tokenizer whose normalizer / pre-tokenizer chain no llama.cpp pre-tokenizer name reproduces is
 * WB_ERR_FORMAT naming what cannot be written (nothing is written then). */
wb_status wb_gguf_tokenizer_put(wb_gguf_writer *w, const wb_tokenizer *tok,
                                const char *chat_template, wb_err *err);

/* The same with the special ids chosen by the caller (for instance eos from
 * generation_config.json): a field WB_GGUF_TOK_AUTO is derived from the tokenizer as
 * wb_gguf_tokenizer_put does, -1 leaves the key out. sp may be NULL. */
#define WB_GGUF_TOK_AUTO (-2)
wb_gguf_tok_specials wb_gguf_tok_specials_auto(void);
wb_status wb_gguf_tokenizer_put_ex(wb_gguf_writer *w, const wb_tokenizer *tok,
                                   const char *chat_template, const wb_gguf_tok_specials *sp,
                                   wb_err *err);

#endif
