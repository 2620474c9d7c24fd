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
/* 1 when s[0..n) is well-formed UTF-8 throughout (vocabulary entries, added tokens, templates). */
int tk_utf8_valid(const char *s, size_t n);

/* Lossy-decode text (maximal-subpart rule, one U+FFFD per invalid subpart). Returns text itself
 * when already valid (*owned = NULL), else a malloc'd copy in *owned. NULL on nomem. */
const char *tk_utf8_lossy(const char *text, size_t len, size_t *out_len, char **owned);

/* Decode one code point of valid UTF-8 at s (n > 0). */
uint32_t tk_utf8_decode(const unsigned char *s, size_t n, int *clen);
int tk_utf8_encode(uint32_t cp, char *out);

/* n bytes of s as a NUL-terminated malloc'd string; NULL when out of memory. */
char *tk_strndup(const char *s, size_t n);

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

/* General regexes from tokenizer.json (Split, Replace, Digits, ByteLevel's own): written for
 * Oniguruma, compiled with PCRE2 after their class escapes are rewritten to Hugging Face's
 * code-point tables (unicode_classes.h). */
wb_status tk_regex_compile(tk_regex *re, const char *pattern, const char *name, const char *field,
                           wb_err *err);

/* ---- normalizers, pre-tokenizers and decoders (tokenizer_pipeline.c) ------------------------ */

/* A Split / Replace pattern: a literal string or a regex. */
typedef struct tk_matcher {
    char *lit; /* literal when non-NULL */
    size_t lit_len;
    tk_regex re;
} tk_matcher;

enum { TK_NORM_NFC, TK_NORM_NFD, TK_NORM_NFKC, TK_NORM_NFKD, TK_NORM_LOWERCASE, TK_NORM_PREPEND,
       TK_NORM_REPLACE };
typedef struct tk_norm {
    int kind;
    char *content; /* Prepend / Replace content */
    size_t content_len;
    tk_matcher pat; /* Replace */
} tk_norm;

enum { TK_PRE_SPLIT, TK_PRE_DIGITS, TK_PRE_METASPACE, TK_PRE_BYTELEVEL };
enum { TK_SPLIT_REMOVED, TK_SPLIT_ISOLATED, TK_SPLIT_MERGED_PREV, TK_SPLIT_MERGED_NEXT,
       TK_SPLIT_CONTIGUOUS };
enum { TK_PREPEND_ALWAYS, TK_PREPEND_FIRST, TK_PREPEND_NEVER };
typedef struct tk_pre {
    int kind;
    tk_matcher pat; /* Split (Digits uses a \p{N} regex) */
    int behavior, invert;
    char repl[8]; /* Metaspace replacement (one char) */
    int repl_len, prepend_scheme, split;
    int add_prefix_space, use_regex; /* ByteLevel */
} tk_pre;

enum { TK_DEC_BYTELEVEL, TK_DEC_REPLACE, TK_DEC_BYTEFALLBACK, TK_DEC_FUSE, TK_DEC_STRIP,
       TK_DEC_METASPACE };
typedef struct tk_dec {
    int kind;
    char *from, *to; /* Replace (string pattern) */
    size_t from_len, to_len;
    char content[8]; /* Strip content / Metaspace replacement */
    int content_len, start, prepend_scheme;
} tk_dec;

void tk_matcher_free(tk_matcher *m);

/* The spans (start, end, is_match) covering s[0..n), as HF's Pattern::find_matches gives them
 * (empty s: one empty non-match; empty regex matches are kept, as Oniguruma's find_iter reports
 * them). *spans grows as needed. Returns 0, -1 on nomem, -2 when the regex engine fails. */
typedef struct tk_span {
    size_t a, b;
    int m;
} tk_span;
int tk_matcher_find(const tk_matcher *m, const char *s, size_t n, tk_span **spans, size_t *n_spans,
                    size_t *cap);

/* Failure codes of tk_normalize (and of the added-token split that runs it): -1 out of memory. */
#define TK_ERR_MATCH (-2)  /* a regex hit PCRE2's match or depth limit */
#define TK_ERR_EXPAND (-3) /* the chain would grow the text beyond tk_norm_limit */
/* How long a normalized text may get for n input bytes: Replace normalizers can expand without
 * bound (one byte to many, every byte), so the chain stops at 64 times the input plus 1 MiB. */
size_t tk_norm_limit(size_t n);
/* Apply the normalizer chain to valid UTF-8; *out is malloc'd (NULL on nomem or engine failure). */
int tk_normalize(const wb_tokenizer *tok, const char *s, size_t n, char **out, size_t *out_len);

/* Parse the normalizer / pre_tokenizer / decoder sections into tok (NULL or JSON null = none). */
struct cJSON;
wb_status tk_parse_normalizer(wb_tokenizer *tok, const struct cJSON *j, const char *name, wb_err *err);
wb_status tk_parse_pre_tokenizer(wb_tokenizer *tok, const struct cJSON *j, const char *name,
                                 wb_err *err);
wb_status tk_parse_decoder(wb_tokenizer *tok, const struct cJSON *j, const char *name, wb_err *err);

/* The bytes a token stands for through the decoder chain; `first` applies the first-token rule of
 * a Metaspace decoder. *out is malloc'd. -1 on nomem. */
int tk_token_decode(const wb_tokenizer *tok, int32_t id, int first, char **out, size_t *out_len);

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

/* ---- truncation and padding (tokenizer_post.c) ---------------------------------------------- */

enum { TK_TRUNC_LONGEST_FIRST, TK_TRUNC_ONLY_FIRST, TK_TRUNC_ONLY_SECOND };
typedef struct tk_trunc {
    int on; /* tokenizer.json has a truncation object */
    size_t max_length, stride;
    int strategy, left;
} tk_trunc;

/* Fixed padding lengths and multiples above this are refused at load (memory per encode). */
#define TK_PAD_MAX ((double)(1 << 24))
typedef struct tk_pad {
    int on, fixed, left;
    size_t length;   /* Fixed(length) */
    size_t multiple; /* pad_to_multiple_of, 0 = none */
    int32_t id;
    char *token;
} tk_pad;

wb_status tk_parse_truncation(wb_tokenizer *tok, const struct cJSON *j, const char *name, wb_err *err);
wb_status tk_parse_padding(wb_tokenizer *tok, const struct cJSON *j, const char *name, wb_err *err);
void tk_post_free(wb_tokenizer *tok);
/* Truncate then pad *ids (malloc'd, *n of them) as HF's post_process does for one sequence
 * without special tokens; *mask (when mask is non-NULL) receives the attention mask. */
wb_status tk_post_apply(const wb_tokenizer *tok, int truncate, int pad, int32_t **ids, size_t *n,
                        uint8_t **mask, wb_err *err);

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

    /* the pipeline; a tokenizer without a parsed pre_tokenizer (trained ones) gets
     * [ByteLevel(add_prefix_space, use_regex)] and a ByteLevel decoder in tk_finish */
    tk_norm *norms;
    size_t n_norms;
    tk_pre *pres;
    size_t n_pres;
    int pre_parsed;  /* pre_tokenizer came from the file (even when null) */
    int byte_level;  /* model input is byte-level chars: raw bytes map through byte_sym */
    tk_dec *decs;
    size_t n_decs;
    int dec_parsed;  /* decoder came from the file (even when null) */
    int dec_meta_first;          /* Metaspace decoder: the first token drops its replacement chars */
    char dec_strip[8];           /* Strip after a fusing decoder: strip up to dec_strip_n leading */
    int dec_strip_len, dec_strip_n; /*   dec_strip chars from the start of the whole output */
    char **norm_added;           /* per added token: its content normalized (normalized tokens) */
    uint32_t *norm_added_len;
    /* the file's sections, kept verbatim so that save writes them back */
    char *json_normalizer, *json_pre, *json_post, *json_decoder;
    tk_trunc trunc;
    tk_pad pad;
    char *json_truncation, *json_padding; /* verbatim, NULL when absent or null */
};

/* Build everything derivable (bytes, maps, tries, byte_sym) once str/merges/added are set. */
wb_status tk_finish(wb_tokenizer *tok, const char *name, wb_err *err);

/* Split valid UTF-8 on added tokens as Hugging Face does (two passes); calls fn for text pieces
 * (id -1) and added tokens. */
/* `first`: the piece starts at offset 0 of the input (Metaspace prepend_scheme "first"). */
typedef int (*tk_seg_fn)(void *ud, const char *p, size_t n, int32_t id, int first);
int tk_split_added(const wb_tokenizer *tok, const char *s, size_t n, tk_seg_fn fn, void *ud);

#endif
