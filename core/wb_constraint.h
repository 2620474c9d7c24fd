/* wb_constraint.h - constrained decoding: which tokens may come next, per step.
 *
 * A constraint is compiled once (wb_constraint, immutable, shareable between requests) and
 * walked by a cursor (wb_constraint_state, one per request):
 *
 *     wb_constraint_state *st; wb_constraint_state_new(c, &st, &err);
 *     for (;;) {
 *         const uint32_t *mask; int32_t n;
 *         wb_constraint_state_allowed(st, gen, n_gen, &mask, &n, &err);  // bitset over the vocab
 *         ... sample id from the logits with mask ...
 *         wb_constraint_state_advance(st, id, &err);
 *         if (wb_constraint_state_complete(st)) break;
 *     }
 *
 * Kinds:
 *   choice       exactly one of a list of strings (optionally with one leading space);
 *   regex        a full match of a practical regex subset (see wb_constraint_regex_new);
 *   json_schema  a JSON document for a small schema subset (object with required properties in a
 *                fixed order, enum, string with maxLength, integer with bounds, boolean);
 *   fn           a caller's callback that fills the mask from the ids generated so far.
 *
 * The three compiled kinds share one engine, in the manner of outlines' index: the pattern
 * becomes a byte-level DFA; then, for every DFA state, one walk of a byte trie of the whole
 * vocabulary finds every token whose bytes keep the DFA alive. So every tokenization of an
 * allowed string is reachable (" billing" as one token, or " bill" + "ing", or byte by byte),
 * and a decoding step is a table lookup (the state's precomputed bitset) plus a walk of the
 * chosen token's few bytes. Tokens that could only lead into a state from which no token
 * sequence can finish are removed at compile time, so a compiled constraint never strands the
 * decoder; a language no token sequence can spell is a compile error.
 *
 * End of output: in a state where the match could end but could also go on, the eos token (if
 * the vocabulary has one) is allowed as well; taking it completes the constraint. In a state
 * where the match is over and nothing can follow, the constraint is complete at once.
 */
#ifndef WB_CONSTRAINT_H
#define WB_CONSTRAINT_H

#include "wb_base.h"
#include "wb_tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The vocabulary as the compiler sees it: the bytes of every id. bytes[i] == NULL (or
 * lens[i] == 0) marks an id that a constraint never allows (special tokens); eos_id >= 0 is
 * the id allowed where the match may end. Borrowed during compilation only. */
typedef struct wb_constraint_vocab {
    int32_t n_tokens;
    const char *const *bytes;
    const size_t *lens;
    int32_t eos_id; /* -1: none */
} wb_constraint_vocab;

/* Point a vocab at a tokenizer's tokens (special tokens excluded, eos = <|endoftext|>). The
 * arrays are allocated: release them with wb_constraint_vocab_release; the bytes stay the
 * tokenizer's. */
wb_status wb_constraint_vocab_init(wb_constraint_vocab *v, const wb_tokenizer *tok, wb_err *err);
void wb_constraint_vocab_release(wb_constraint_vocab *v);

typedef struct wb_constraint wb_constraint;

typedef enum wb_constraint_kind {
    WB_CONSTRAINT_CHOICE = 1,
    WB_CONSTRAINT_REGEX = 2,
    WB_CONSTRAINT_JSON = 3,
    WB_CONSTRAINT_FN = 4
} wb_constraint_kind;

/* "choice", "regex", "json_schema", "fn". */
const char *wb_constraint_kind_name(wb_constraint_kind k);

/* Leading space for choices: the label as written, an optional single space before it (the
 * default: after "Category:" a model writes " billing"), or always one space. */
typedef enum wb_leading_space {
    WB_SPACE_OPTIONAL = 0,
    WB_SPACE_NONE = 1,
    WB_SPACE_ALWAYS = 2
} wb_leading_space;

/* Exactly one of n strings (each len bytes; lens NULL: NUL-terminated). Empty strings and n < 1
 * are errors; duplicates are harmless. */
wb_status wb_constraint_choice_new(const wb_constraint_vocab *v, const char *const *choices,
                                   const size_t *lens, int n, wb_leading_space space,
                                   wb_constraint **out, wb_err *err);

/* A full (anchored) match of `pattern`. Supported: literal bytes and UTF-8 characters; `.`
 * (one UTF-8 character other than newline); classes [a-z_] and [^...] (a negated class matches
 * any UTF-8 character outside it; ranges must be ASCII); escapes \d \w \s \D \W \S \n \r \t \f
 * \v \xHH and an escaped punctuation character; alternation |; groups (...) and (?:...);
 * quantifiers * + ? {m} {m,} {m,n} (greedy; laziness is meaningless here and is rejected);
 * ^ at the very start and $ at the very end (redundant: the match is always full). Anything else
 * (backreferences, lookaround, named groups, \b, lazy or possessive quantifiers) is WB_ERR_ARG
 * with the byte offset and the construct named. */
wb_status wb_constraint_regex_new(const wb_constraint_vocab *v, const char *pattern, size_t len,
                                  wb_constraint **out, wb_err *err);

/* Whitespace a JSON constraint allows between tokens of the document. */
typedef enum wb_json_ws {
    WB_JSON_WS_SPACE = 0,   /* {"a": 1, "b": true}: one space after ':' and ',' (the default,
                               the form the triage corpus uses), and an optional single space
                               before the document, as after "Triage:"                          */
    WB_JSON_WS_COMPACT = 1, /* {"a":1,"b":true}, nothing before it                               */
    WB_JSON_WS_FLEXIBLE = 2 /* 0 to 2 spaces, newlines or tabs around every structural token     */
} wb_json_ws;

/* A JSON document valid against `schema_json`, a JSON Schema subset:
 *   {"type": "object", "properties": {...}, "required": [...]}: every property is emitted, in
 *       the order of "required" (or of "properties" when "required" is absent); a property not
 *       listed in "required" is an error, since optional properties are not supported;
 *       "additionalProperties" is accepted and ignored (none are ever emitted);
 *   {"enum": [...]}: one of the listed strings, integers, booleans or null;
 *   {"type": "string"} with optional "maxLength" (characters) and "minLength";
 *   {"type": "integer"} with optional "minimum" / "maximum" (inclusive; |bound| < 10^15);
 *   {"type": "boolean"}, {"type": "null"}.
 * Anything else is WB_ERR_ARG naming the JSON path ("properties.priority: ..."). */
wb_status wb_constraint_json_schema_new(const wb_constraint_vocab *v, const char *schema_json,
                                        size_t len, wb_json_ws ws, wb_constraint **out,
                                        wb_err *err);

/* The regex a JSON schema compiles to (for inspection and the docs); wb_free() it. */
wb_status wb_json_schema_to_regex(const char *schema_json, size_t len, wb_json_ws ws,
                                  char **regex_out, size_t *regex_len, wb_err *err);

/* Callback for the fn kind: given the ids generated so far, set the bits of the allowed ids in
 * `allowed` (ceil(V/32) words, zeroed by the caller) and store their count in *n_allowed;
 * *n_allowed = 0 means the constraint is complete (nothing more may come), -1 means no
 * restriction this step. A non-OK return (with err filled) fails the generation. */
typedef wb_status (*wb_constraint_fn)(void *user_data, const int32_t *generated,
                                      size_t n_generated, uint32_t *allowed, int32_t vocab_size,
                                      int32_t *n_allowed, wb_err *err);

/* The slow path: the callback is asked at every step. user_data must outlive the constraint. */
wb_status wb_constraint_fn_new(int32_t vocab_size, wb_constraint_fn fn, void *user_data,
                               wb_constraint **out, wb_err *err);

/* Constraints are reference-counted (atomically): wb_constraint_retain adds a reference and
 * returns c; wb_constraint_free drops one and frees on the last. A generator retains the
 * constraint it runs with, so its creator may free it at any time. */
const wb_constraint *wb_constraint_retain(const wb_constraint *c);
void wb_constraint_free(wb_constraint *c);

wb_constraint_kind wb_constraint_kind_of(const wb_constraint *c);
int32_t wb_constraint_vocab_size(const wb_constraint *c);

/* Compiled kinds: DFA states (0 for fn), distinct masks stored, bytes held, compile time. */
typedef struct wb_constraint_info {
    int32_t n_states;
    int32_t n_masks;
    size_t memory_bytes;
    double compile_ms;
} wb_constraint_info;
wb_constraint_info wb_constraint_get_info(const wb_constraint *c);

/* Whether `len` bytes are a complete match (compiled kinds; the fn kind answers 0). */
int wb_constraint_matches(const wb_constraint *c, const char *bytes, size_t len);

/* ---- the per-request cursor ---------------------------------------------------------------- */

typedef struct wb_constraint_state wb_constraint_state;

/* A state retains its constraint (the caller may free the constraint while states live). */
wb_status wb_constraint_state_new(const wb_constraint *c, wb_constraint_state **out,
                                  wb_err *err);
void wb_constraint_state_free(wb_constraint_state *s);
void wb_constraint_state_reset(wb_constraint_state *s);

/* The allowed set for the next token: *mask (ceil(V/32) words, bit id%32 of word id/32; valid
 * until the next call on s) and *n_allowed. *mask is NULL with *n_allowed = -1 when the fn
 * callback put no restriction on this step. generated/n_generated: the ids so far (used by the
 * fn kind only; the compiled kinds track their own state). */
wb_status wb_constraint_state_allowed(wb_constraint_state *s, const int32_t *generated,
                                      size_t n_generated, const uint32_t **mask,
                                      int32_t *n_allowed, wb_err *err);

/* Accept one token. WB_ERR_ARG (state unchanged) when it is not allowed here; WB_ERR_STATE when
 * the constraint is already complete. */
wb_status wb_constraint_state_advance(wb_constraint_state *s, int32_t id, wb_err *err);

/* Nothing more may be generated: the match is over (or the fn callback allowed nothing). */
int wb_constraint_state_complete(const wb_constraint_state *s);
/* The text so far is a complete match (compiled kinds), though it may go on. */
int wb_constraint_state_accepting(const wb_constraint_state *s);
/* Whether id is the eos token that completes the match in this state. */
int wb_constraint_state_is_end(const wb_constraint_state *s, int32_t id);

#ifdef __cplusplus
}
#endif
#endif
