/* tokenizer_internal.h - state shared by tokenizer.c (encode/decode), tokenizer_json.c
 * (tokenizer.json load/save) and tokenizer_train.c (BPE training). Not a public header. */
#ifndef WB_TOKENIZER_INTERNAL_H
#define WB_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "wb_tokenizer.h"

/* ---- hash maps ------------------------------------------------------------------------------ */

/* uint64 key -> int64 value, open addressing. Keys are pairs of ids or trie edges, so
 * UINT64_MAX never occurs and marks an empty slot. */
typedef struct tk_u64map {
    uint64_t *keys;
    int64_t *vals;
    size_t cap, n; /* cap is a power of two or 0 */
} tk_u64map;

void tk_u64map_free(tk_u64map *m);
/* Pointer to the value for key, inserting `init` if absent; NULL on allocation failure. */
int64_t *tk_u64map_put(tk_u64map *m, uint64_t key, int64_t init, int *inserted);
int64_t *tk_u64map_get(const tk_u64map *m, uint64_t key);

/* byte string -> int32; the strings are not owned (they live in the tokenizer's arrays). */
typedef struct tk_strmap {
    const char **keys;
    uint32_t *lens;
    int32_t *vals;
    size_t cap, n;
} tk_strmap;

void tk_strmap_free(tk_strmap *m);
/* Inserts key -> val unless key is present. Returns 1 inserted, 0 present (*old set), -1 nomem. */
int tk_strmap_add(tk_strmap *m, const char *key, size_t len, int32_t val, int32_t *old);
int32_t tk_strmap_get(const tk_strmap *m, const char *key, size_t len); /* -1 if absent */

uint64_t tk_hash_bytes(const char *s, size_t n);

/* ---- UTF-8 ------------------------------------------------------------------------------- */

/* Length of the longest valid prefix of a well-formed UTF-8 sequence starting at s[0]
 * (1..4) when complete and valid; otherwise 0 and *consumed receives the length of the maximal
 * subpart (>= 1) that a lossy decoder replaces with one U+FFFD, and *truncated whether the
 * subpart was cut short only by the end of the buffer. */
int tk_utf8_char(const unsigned char *s, size_t n, size_t *consumed, int *truncated);

/* Lossy-decode text (maximal-subpart rule, one U+FFFD per invalid subpart). Returns text itself
 * when already valid (*owned = NULL), else a malloc'd copy in *owned. NULL on nomem. */
const char *tk_utf8_lossy(const char *text, size_t len, size_t *out_len, char **owned);

/* Decode one code point of valid UTF-8 at s (n > 0). */
uint32_t tk_utf8_decode(const unsigned char *s, size_t n, int *clen);
int tk_utf8_encode(uint32_t cp, char *out);

/* GPT-2 bytes_to_unicode: byte -> code point, and code point -> byte (or -1). */
uint32_t tk_byte_to_cp(unsigned b);
int tk_cp_to_byte(uint32_t cp);

/* ---- GPT-2 pre-tokenization ---------------------------------------------------------------- */

typedef struct tk_regex {
    pcre2_code *code;
    int jit;
} tk_regex;

wb_status tk_regex_init(tk_regex *re, wb_err *err);
void tk_regex_free(tk_regex *re);

/* Calls fn for every GPT-2 piece of valid UTF-8 `s` (pieces cover s entirely). */
typedef int (*tk_piece_fn)(void *ud, const char *p, size_t n);
wb_status tk_regex_split(const tk_regex *re, const char *s, size_t n, tk_piece_fn fn, void *ud,
                         wb_err *err);

/* ---- the tokenizer ----------------------------------------------------------------------- */

typedef struct tk_added {
    char *content;
    uint32_t len;
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} tk_added;

/* Byte trie for leftmost-longest matching of added tokens. Node 0 is the root; edges live in a
 * map keyed by (node << 8 | byte). */
typedef struct tk_trie {
    tk_u64map edges;
    int32_t *term; /* per node: index into tok->added, or -1 */
    size_t n_nodes, cap_nodes;
    uint8_t first[256]; /* bytes that can start a match: skips most positions cheaply */
    int empty;
} tk_trie;

struct wb_tokenizer {
    int32_t n_model; /* model vocab: ids 0..n_model-1 */
    int32_t n_total;
    char **str;       /* per id: vocab string (model) or content (added-only), NUL-terminated */
    uint32_t *str_len;
    char **bytes;     /* per id: the bytes the token stands for */
    uint32_t *bytes_len;
    uint8_t *special;
    tk_strmap model_map; /* model vocab string -> id */
    tk_strmap added_map; /* added token content -> id */
    tk_strmap bytes_map; /* token bytes -> id */

    int32_t (*merges)[2]; /* merges in file order (rank = index) */
    size_t n_merges;
    tk_u64map merge_map;  /* (a << 32 | b) -> (rank << 32 | new_id) */

    tk_added *added;
    size_t n_added;
    tk_trie trie_raw, trie_norm;

    int32_t byte_sym[256]; /* byte -> model id of its byte-level char, -1 if absent */
    int simple_syms;       /* no prefix/suffix: byte_sym is enough for the initial symbols */
    int add_prefix_space, use_regex, trim_offsets, ignore_merges, fuse_unk, byte_fallback;
    char *cont_prefix, *eow_suffix; /* NULL when absent */
    int32_t unk_id;                 /* -1 when no unk_token */
    char *unk_token;
    tk_regex re;
};

/* Build everything derivable (bytes, maps, tries, byte_sym) once str/merges/added are set. */
wb_status tk_finish(wb_tokenizer *tok, const char *name, wb_err *err);

/* Split valid UTF-8 on added tokens as Hugging Face does (two passes); calls fn for text pieces
 * (id -1) and added tokens. */
typedef int (*tk_seg_fn)(void *ud, const char *p, size_t n, int32_t id);
int tk_split_added(const wb_tokenizer *tok, const char *s, size_t n, tk_seg_fn fn, void *ud);

#endif
