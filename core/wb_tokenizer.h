/* wb_tokenizer.h - BPE tokenizer compatible with Hugging Face tokenizer.json: byte-level BPE
 * (GPT-2, Qwen2, Llama-3, SmolLM2) and SentencePiece-style BPE with byte fallback (Llama-2,
 * TinyLlama).
 *
 * Ids are the 0-based ids of tokenizer.json. Encoding must give ids identical to the Hugging Face
 * `tokenizers` library for every input (model type BPE; the normalizers, pre-tokenizers and
 * decoders listed in docs/tokenizer.md; added/special tokens matched before pre-tokenization).
 */
#ifndef WB_TOKENIZER_H
#define WB_TOKENIZER_H

#include "wb_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_tokenizer wb_tokenizer;

/* Load tokenizer.json from a file. Errors name the path and the JSON field at fault. */
wb_status wb_tokenizer_load(const char *path, wb_tokenizer **out, wb_err *err);

/* Same from a buffer (need not be NUL-terminated); `name` is used in error messages. */
wb_status wb_tokenizer_load_json(const char *json, size_t len, const char *name,
                                 wb_tokenizer **out, wb_err *err);

void wb_tokenizer_free(wb_tokenizer *tok);

/* Total number of ids (model vocabulary plus added tokens not in it). */
int32_t wb_tokenizer_vocab_size(const wb_tokenizer *tok);

/* Encode `len` bytes of text (any bytes, invalid UTF-8 included) as Hugging Face's
 * `encode(text, add_special_tokens=False)`, with tokenizer.json's `truncation` and `padding`
 * applied when the file sets them. On success *ids is a wb_free()-able array of *n_ids ids
 * (non-NULL even when *n_ids == 0). */
wb_status wb_tokenizer_encode(const wb_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, size_t *n_ids, wb_err *err);

typedef struct wb_tokenizer_encode_params {
    int truncation; /* apply tokenizer.json's `truncation` when it is set (default 1) */
    int padding;    /* apply tokenizer.json's `padding` when it is set (default 1) */
} wb_tokenizer_encode_params;

wb_tokenizer_encode_params wb_tokenizer_encode_default_params(void);

/* wb_tokenizer_encode with explicit params (NULL = defaults). When mask is non-NULL, *mask
 * receives a wb_free()-able array of *n_ids bytes, HF's attention mask: 1 for a token of the
 * text, 0 for padding. Model prompts are encoded with both off (as transformers does unless
 * asked), so a file's max_length never cuts a prompt and pad ids never reach a model. */
wb_status wb_tokenizer_encode_with(const wb_tokenizer *tok, const char *text, size_t len,
                                   const wb_tokenizer_encode_params *params, int32_t **ids,
                                   size_t *n_ids, uint8_t **mask, wb_err *err);

/* Decode ids to the exact bytes they stand for (byte-exact, may be invalid UTF-8 for partial
 * sequences). *text is wb_free()-able and NUL-terminated; *len excludes the NUL.
 * An id out of range is WB_ERR_RANGE naming the id and its index. */
wb_status wb_tokenizer_decode(const wb_tokenizer *tok, const int32_t *ids, size_t n_ids,
                              char **text, size_t *len, wb_err *err);

/* The bytes one token stands for (e.g. " how"); NULL if id is out of range. Not NUL-terminated
 * in general: use *len. Valid while the tokenizer lives. */
const char *wb_tokenizer_token_bytes(const wb_tokenizer *tok, int32_t id, size_t *len);

/* The token's string as written in tokenizer.json's vocab (e.g. "Ġhow"); NULL if out of range. */
const char *wb_tokenizer_token_str(const wb_tokenizer *tok, int32_t id);

/* Id of the token whose bytes are exactly `bytes` (e.g. " how"), or -1 if none. */
int32_t wb_tokenizer_id_of_bytes(const wb_tokenizer *tok, const char *bytes, size_t len);

/* Id of the token whose vocab string is exactly `str` (e.g. "Ġhow" or "<|endoftext|>"), or -1. */
int32_t wb_tokenizer_id_of_str(const wb_tokenizer *tok, const char *str);

/* Whether id is an added token marked "special" (e.g. <|endoftext|>). */
int wb_tokenizer_is_special(const wb_tokenizer *tok, int32_t id);

/* Id of "<|endoftext|>", else "</s>", else "<|end_of_text|>", else -1. A chat model's stop ids
 * come from generation_config.json (wb_chat_eos_ids in wb_chat.h). */
int32_t wb_tokenizer_eos_id(const wb_tokenizer *tok);

/* Write the tokenizer as a Hugging Face tokenizer.json (atomic: temp file then rename). */
wb_status wb_tokenizer_save(const wb_tokenizer *tok, const char *path, wb_err *err);

/* ---- incremental decoding for streaming -------------------------------------------------- */

/* Accumulates token bytes and releases only complete UTF-8 characters, so a streamed piece never
 * ends in the middle of a character. Invalid byte sequences are released as U+FFFD (as the
 * Hugging Face ByteLevel decoder does with errors="replace") once they are known to be invalid. */
typedef struct wb_detok wb_detok;

wb_status wb_detok_new(const wb_tokenizer *tok, wb_detok **out, wb_err *err);
void wb_detok_free(wb_detok *d);

/* Feed one id. *piece and *len receive the newly complete text (possibly empty); the pointer stays
 * valid until the next call on d. */
wb_status wb_detok_push(wb_detok *d, int32_t id, const char **piece, size_t *len, wb_err *err);

/* End of stream: release whatever is held (incomplete tail as U+FFFD). */
void wb_detok_flush(wb_detok *d, const char **piece, size_t *len);

void wb_detok_reset(wb_detok *d);

/* ---- training ----------------------------------------------------------------------------- */

typedef struct wb_bpe_train_params {
    int32_t vocab_size;          /* total ids incl. 256 byte symbols and special tokens (2048) */
    const char *const *special_tokens; /* e.g. {"<|endoftext|>"}; split the text, never merged */
    int n_special_tokens;
    int64_t min_pair_count;      /* stop early when the best pair is rarer than this (default 2) */
    wb_abort_fn abort_fn;        /* optional */
    void *abort_data;
} wb_bpe_train_params;

wb_bpe_train_params wb_bpe_train_default_params(void);

/* Learn byte-level BPE merges from `text` (GPT-2 pre-tokenization, 256 byte symbols, merges by
 * pair count with deterministic tie-breaking) and build a tokenizer. */
wb_status wb_bpe_train(const char *text, size_t len, const wb_bpe_train_params *params,
                       wb_tokenizer **out, wb_err *err);

#ifdef __cplusplus
}
#endif
#endif
