/* gguf_tokenizer.c - a GGUF file's tokenizer.* metadata <-> wb_tokenizer.
 *
 * Reading does not tokenize by itself: it turns the metadata into the tokenizer.json that the
 * Hugging Face converter would have written for the same model (vocab, merges, added tokens, the
 * normalizer / pre-tokenizer / decoder of the family that tokenizer.ggml.pre names) and hands it to
 * the one tokenizer.json loader, so every rule of encoding lives in one place (docs/gguf.md).
 * Writing goes the other way: it recognises the tokenizer's pipeline as one of llama.cpp's
 * pre-tokenizer names and refuses the ones llama.cpp cannot reproduce. */
#include "gguf_tokenizer.h"

#include "json_build.h"
#include "tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K_MODEL "tokenizer.ggml.model"
#define K_PRE "tokenizer.ggml.pre"
#define K_TOKENS "tokenizer.ggml.tokens"
#define K_TYPES "tokenizer.ggml.token_type"
#define K_SCORES "tokenizer.ggml.scores"
#define K_MERGES "tokenizer.ggml.merges"
#define K_BOS "tokenizer.ggml.bos_token_id"
#define K_EOS "tokenizer.ggml.eos_token_id"
#define K_UNK "tokenizer.ggml.unknown_token_id"
#define K_PAD "tokenizer.ggml.padding_token_id"
#define K_EOT "tokenizer.ggml.eot_token_id"
#define K_ADD_BOS "tokenizer.ggml.add_bos_token"
#define K_ADD_EOS "tokenizer.ggml.add_eos_token"
#define K_ADD_SPACE "tokenizer.ggml.add_space_prefix"
#define K_TEMPLATE "tokenizer.chat_template"
/* Hugging Face facts llama.cpp's keys cannot carry (llama.cpp ignores these keys). */
#define K_WB_FLAGS "workbench.tokenizer.added_flags"
#define K_WB_PREPEND "workbench.tokenizer.prepend_scheme"

/* llama.cpp's token types (gguf-py TokenType). */
enum { TT_UNDEFINED = 0, TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5,
       TT_BYTE = 6 };

/* Bits of workbench.tokenizer.added_flags (pairs id, bits). */
enum { AF_SPECIAL = 1, AF_NORMALIZED = 2, AF_LSTRIP = 4, AF_RSTRIP = 8, AF_SINGLE_WORD = 16,
       AF_NOT_ADDED = 32 };

/* Caps: the largest real vocabularies are ~262k tokens (Gemma 3); 4x that keeps a hostile file
 * of empty tokens from costing more than ~200 MB. */
#define MAX_TOKENS ((uint64_t)1 << 20)
#define MAX_MERGES ((uint64_t)1 << 21)
#define MAX_TOKEN_BYTES 4096

/* ---- the pre-tokenizer names ------------------------------------------------------------------ */

enum { SHAPE_BYTELEVEL_REGEX, SHAPE_DIGITS_BYTELEVEL, SHAPE_SPLITS };

#define RX_GPT2_LLAMACPP "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_QWEN2 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_BLOOM " ?[^(\\s|.,!?…。，、।۔،)]+"

/* One llama.cpp pre-tokenizer type: the names that select it (the first is the one written),
 * and the Hugging Face pipeline it stands for. Where the HF file of the family is known the
 * HF pattern is used (the (?i:...) contractions that llama.cpp spells out case by case, GPT-2's
 * ByteLevel regex, SmolLM's Digits); otherwise llama.cpp's regexes as Split(Isolated) steps,
 * which is how llama.cpp applies them. */
typedef struct pre_def {
    const char *names[12];
    int shape;
    const char *regex[7];
    int nfc, ignore_merges, add_bos;
} pre_def;

static const pre_def k_pre[] = {
    {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "gigachat", "jina-v1-en",
      "jina-v2-es", "jina-v2-de", "jina-v2-code"}, SHAPE_BYTELEVEL_REGEX, {0}, 0, 0, 0},
    {{"roberta-bpe"}, SHAPE_BYTELEVEL_REGEX, {0}, 0, 0, 0},
    {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, SHAPE_SPLITS, {RX_LLAMA3}, 0, 1, 1},
    {{"dbrx", "smaug-bpe", "chatglm-bpe"}, SHAPE_SPLITS, {RX_LLAMA3}, 0, 0, 0},
    {{"qwen2", "deepseek-r1-qwen"}, SHAPE_SPLITS, {RX_QWEN2}, 1, 0, 0},
    {{"stablelm2", "megrez"}, SHAPE_SPLITS, {RX_QWEN2}, 0, 0, 0},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
     SHAPE_DIGITS_BYTELEVEL, {0}, 0, 0, 0},
    {{"deepseek-llm"}, SHAPE_SPLITS,
     {"[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"},
     0, 0, 0},
    {{"deepseek-coder"}, SHAPE_SPLITS,
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"}, 0, 0, 0},
    {{"deepseek-v3"}, SHAPE_SPLITS,
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     0, 0, 0},
    {{"falcon"}, SHAPE_SPLITS,
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2_LLAMACPP, "[0-9][0-9][0-9]"}, 0, 0, 0},
    {{"poro-chat", "bloom", "gpt3-finnish"}, SHAPE_SPLITS, {RX_BLOOM}, 0, 0, 0},
    {{"viking"}, SHAPE_SPLITS, {RX_BLOOM, "\\p{N}"}, 0, 0, 0},
    {{"tekken"}, SHAPE_SPLITS,
     {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0, 1, 1},
    {{"chameleon"}, SHAPE_SPLITS,
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2_LLAMACPP},
     0, 0, 1},
    /* no tokenizer.ggml.pre, or "default": what llama.cpp does for old files */
    {{"default"}, SHAPE_SPLITS,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2_LLAMACPP, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0, 0},
};
#define N_PRE (sizeof k_pre / sizeof k_pre[0])

static const pre_def *pre_find(const char *name, size_t len) {
    for (size_t i = 0; i < N_PRE; i++)
        for (int j = 0; j < 12 && k_pre[i].names[j]; j++)
            if (strlen(k_pre[i].names[j]) == len && memcmp(k_pre[i].names[j], name, len) == 0)
                return &k_pre[i];
    return NULL;
}

static cJSON *byte_level(int use_regex) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject();
    jsb_str(b, o, "type", "ByteLevel");
    jsb_bool(b, o, "add_prefix_space", 0);
    jsb_bool(b, o, "trim_offsets", 1);
    jsb_bool(b, o, "use_regex", use_regex);
    return jsb_done(b, o);
}

static cJSON *split_regex(const char *rx) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject();
    jsb_str(b, o, "type", "Split");
    cJSON *p = jsb_obj(b, o, "pattern");
    jsb_str(b, p, "Regex", rx);
    jsb_str(b, o, "behavior", "Isolated");
    jsb_bool(b, o, "invert", 0);
    return jsb_done(b, o);
}

/* The pre_tokenizer section a name stands for (a new tree). */
static cJSON *pre_json(const pre_def *d) {
    if (d->shape == SHAPE_BYTELEVEL_REGEX) return byte_level(1);
    jsb jb_ = {0}, *b = &jb_;
    cJSON *seq = cJSON_CreateObject();
    jsb_str(b, seq, "type", "Sequence");
    cJSON *arr = jsb_arr(b, seq, "pretokenizers");
    if (d->shape == SHAPE_DIGITS_BYTELEVEL) {
        cJSON *dg = cJSON_CreateObject();
        jsb_str(b, dg, "type", "Digits");
        jsb_bool(b, dg, "individual_digits", 1);
        jsb_push(b, arr, dg);
        jsb_push(b, arr, byte_level(1));
        return jsb_done(b, seq);
    }
    for (int i = 0; i < 7 && d->regex[i]; i++) jsb_push(b, arr, split_regex(d->regex[i]));
    jsb_push(b, arr, byte_level(0));
    return jsb_done(b, seq);
}

/* ---- canonical forms, to recognise a tokenizer's pipeline ------------------------------------- */

static int jbool(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Appends the steps of a normalizer or pre-tokenizer (Sequence flattened, defaults filled in,
 * fields that do not change ids dropped) to arr as small objects compared with cJSON_Compare.
 * Returns 0, or -1 for a step this file does not know (then the pipeline cannot be written). */
static int canon(const cJSON *j, cJSON *arr, int depth) {
    if (!j || cJSON_IsNull(j)) return 0;
    if (depth > 8 || !cJSON_IsObject(j)) return -1;
    const char *t = jstr(j, "type");
    if (!t) return -1;
    if (!strcmp(t, "Sequence")) {
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        if (!items) items = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(items)) return -1;
        for (const cJSON *e = items->child; e; e = e->next)
            if (canon(e, arr, depth + 1)) return -1;
        return 0;
    }
    jsb jb_ = {0}, *b = &jb_; /* out of memory: -1 as well (the caller cannot go on) */
    cJSON *o = jsb_push(b, arr, cJSON_CreateObject()); /* NULL once pushing failed: later adds just mark b */
    jsb_str(b, o, "type", t);
    if (!strcmp(t, "ByteLevel")) {
        jsb_bool(b, o, "add_prefix_space", jbool(j, "add_prefix_space", 1));
        jsb_bool(b, o, "use_regex", jbool(j, "use_regex", 1));
    } else if (!strcmp(t, "Split")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "pattern");
        const char *rx = jstr(p, "Regex"), *lit = jstr(p, "String");
        if (!rx && !lit) return -1;
        jsb_str(b, o, rx ? "Regex" : "String", rx ? rx : lit);
        jsb_str(b, o, "behavior", jstr(j, "behavior") ? jstr(j, "behavior") : "?");
        jsb_bool(b, o, "invert", jbool(j, "invert", 0));
    } else if (!strcmp(t, "Digits")) {
        jsb_bool(b, o, "individual_digits", jbool(j, "individual_digits", 0));
    } else if (!strcmp(t, "Metaspace")) {
        const char *r = jstr(j, "replacement");
        const char *ps = jstr(j, "prepend_scheme");
        if (!ps) ps = jbool(j, "add_prefix_space", 1) ? "always" : "never";
        jsb_str(b, o, "replacement", r ? r : "\xe2\x96\x81");
        jsb_str(b, o, "prepend_scheme", ps);
        jsb_bool(b, o, "split", jbool(j, "split", 1));
    } else if (!strcmp(t, "Prepend")) {
        jsb_str(b, o, "prepend", jstr(j, "prepend") ? jstr(j, "prepend") : "");
    } else if (!strcmp(t, "Replace")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "pattern");
        const char *rx = jstr(p, "Regex"), *lit = jstr(p, "String");
        if (!rx && !lit) return -1;
        jsb_str(b, o, rx ? "Regex" : "String", rx ? rx : lit);
        jsb_str(b, o, "content", jstr(j, "content") ? jstr(j, "content") : "");
    } else if (strcmp(t, "NFC") && strcmp(t, "NFD") && strcmp(t, "NFKC") && strcmp(t, "NFKD") &&
               strcmp(t, "Lowercase")) {
        return -1;
    }
    return b->failed ? -1 : 0;
}

/* canon() of a section kept as text by the tokenizer (NULL text = the section was absent); NULL
 * when out of memory (the text was valid JSON when the tokenizer kept it). */
static cJSON *canon_text(const char *text, int *bad) {
    cJSON *arr = cJSON_CreateArray();
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    if (!arr || (text && !j)) {
        cJSON_Delete(arr);
        cJSON_Delete(j);
        return NULL;
    }
    *bad = canon(j, arr, 0) != 0;
    cJSON_Delete(j);
    return arr;
}

static int canon_equal(const cJSON *canon_arr, const cJSON *section) {
    cJSON *b = cJSON_CreateArray();
    int ok = b && canon(section, b, 0) == 0 && cJSON_Compare(canon_arr, b, 1);
    cJSON_Delete(b);
    return ok;
}

/* ---- small helpers --------------------------------------------------------------------------- */

#define FAIL(status, ...)                                                                          \
    do {                                                                                           \
        st = wb_err_set(err, status, __VA_ARGS__);                                                 \
        goto done;                                                                                 \
    } while (0)

/* "<0xNN>": the byte, else -1. */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static int utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* One SentencePiece merge: the two pieces and the result, by id. */
typedef struct spm_merge {
    int32_t l, r, res;
} spm_merge;

typedef struct spm_src {
    const char *const *s;
    const uint32_t *len;
    const int *types;
    const float *scores;
    const tk_strmap *map;
    int32_t n;
} spm_src;

/* A piece and its score, sorted together (qsort has no user pointer, and no global is used). */
typedef struct scored {
    float score;
    int32_t id;
} scored;

static int cmp_piece(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_merge(const void *a, const void *b) {
    const spm_merge *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

/* The merges Hugging Face's SentencePiece converter derives from a vocabulary with scores:
 * every split of a piece into two pieces of the vocabulary, pieces by descending score (ties in
 * id order), each piece's splits by (left id, right id). Control, user-defined, unknown, unused
 * and byte tokens are not results: they are matched whole before BPE (or never), so a merge into
 * them never fires. *out is malloc'd. -1 on nomem. */
static int spm_merges(const spm_src *src, spm_merge **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    scored *pieces = malloc(((size_t)src->n + 1) * sizeof *pieces);
    if (!pieces) return -1;
    size_t np = 0;
    for (int32_t i = 0; i < src->n; i++) {
        int t = src->types ? src->types[i] : TT_NORMAL;
        if ((t == TT_NORMAL || t == TT_UNDEFINED) && src->len[i] > 1) pieces[np++] = (scored){src->scores ? src->scores[i] : 0.0f, i};
    }
    if (src->scores) qsort(pieces, np, sizeof *pieces, cmp_piece);
    size_t cap = 1024, n = 0;
    spm_merge *m = malloc(cap * sizeof *m);
    if (!m) {
        free(pieces);
        return -1;
    }
    for (size_t k = 0; k < np; k++) {
        int32_t id = pieces[k].id;
        const char *s = src->s[id];
        uint32_t len = src->len[id];
        size_t first = n;
        for (uint32_t at = (uint32_t)utf8_len((unsigned char)s[0]); at < len;
             at += (uint32_t)utf8_len((unsigned char)s[at])) {
            int32_t l = tk_strmap_get(src->map, s, at), r = tk_strmap_get(src->map, s + at, len - at);
            if (l < 0 || r < 0) continue;
            if (n == cap) {
                spm_merge *q = realloc(m, cap * 2 * sizeof *m);
                if (!q) {
                    free(m);
                    free(pieces);
                    return -1;
                }
                m = q;
                cap *= 2;
            }
            m[n++] = (spm_merge){l, r, id};
        }
        qsort(m + first, n - first, sizeof *m, cmp_merge);
    }
    free(pieces);
    *out = m;
    *n_out = n;
    return 0;
}

/* ---- reading ---------------------------------------------------------------------------------- */

static wb_status get_id(const wb_gguf *g, const char *key, int64_t n_tokens, int32_t *id,
                        wb_err *err) {
    int64_t v;
    wb_status st = wb_gguf_get_int(g, key, &v, err);
    if (st == WB_ERR_NOTFOUND) return st;
    if (st) return st;
    if (v < 0 || v >= n_tokens)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: token id %lld is outside the %lld tokens",
                          wb_gguf_name(g), key, (long long)v, (long long)n_tokens);
    *id = (int32_t)v;
    return WB_OK;
}

static wb_status get_flag(const wb_gguf *g, const char *key, int *v, wb_err *err) {
    wb_status st = wb_gguf_get_bool(g, key, v, err);
    return st == WB_ERR_NOTFOUND ? WB_OK : st;
}

/* The array key `key`: its index and count, checked to be an array of `want` (strings, or any
 * integer type for WB_GGUF_I32, F32/F64 for WB_GGUF_F32) of `n` elements when n >= 0. -1 when
 * absent. */
static wb_status get_array(const wb_gguf *g, const char *key, int want, int64_t n, uint64_t cap,
                           int64_t *idx, uint64_t *count, wb_err *err) {
    const char *nm = wb_gguf_name(g);
    *idx = wb_gguf_find(g, key);
    *count = 0;
    if (*idx < 0) return WB_OK;
    if (wb_gguf_type(g, *idx) != WB_GGUF_ARRAY)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected an array", nm, key);
    wb_gguf_vtype et = wb_gguf_arr_type(g, *idx);
    int ok = want == WB_GGUF_STRING ? et == WB_GGUF_STRING
           : want == WB_GGUF_F32   ? (et == WB_GGUF_F32 || et == WB_GGUF_F64)
                                   : (et <= WB_GGUF_I32 && et != WB_GGUF_F32 && et != WB_GGUF_BOOL) ||
                                         et == WB_GGUF_U64 || et == WB_GGUF_I64;
    if (!ok)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected an array of %s", nm, key,
                          want == WB_GGUF_STRING ? "strings" : want == WB_GGUF_F32 ? "floats" : "integers");
    *count = wb_gguf_arr_n(g, *idx);
    if (*count > cap)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: %llu elements (more than the limit of %llu)", nm,
                          key, (unsigned long long)*count, (unsigned long long)cap);
    if (n >= 0 && *count != (uint64_t)n)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: %llu elements, but %s has %lld", nm, key,
                          (unsigned long long)*count, K_TOKENS, (long long)n);
    return WB_OK;
}

wb_status wb_gguf_tokenizer_specials(const wb_gguf *g, wb_gguf_tok_specials *out, wb_err *err) {
    if (!g || !out) return wb_err_set(err, WB_ERR_ARG, "wb_gguf_tokenizer_specials: NULL argument");
    const char *nm = wb_gguf_name(g);
    wb_status st;
    const char *model, *pre = NULL;
    size_t ml, pl = 0;
    if ((st = wb_gguf_get_str(g, K_MODEL, &model, &ml, err))) return st;
    int spm = ml == 5 && !memcmp(model, "llama", 5);
    if (!spm && !(ml == 4 && !memcmp(model, "gpt2", 4)))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: tokenizer model \"%.*s\" is not supported (gpt2, llama)",
                          nm, K_MODEL, (int)(ml > 40 ? 40 : ml), model);
    st = wb_gguf_get_str(g, K_PRE, &pre, &pl, err);
    if (st && st != WB_ERR_NOTFOUND) return st;
    int64_t idx;
    uint64_t n;
    if ((st = get_array(g, K_TOKENS, WB_GGUF_STRING, -1, MAX_TOKENS, &idx, &n, err))) return st;
    if (idx < 0) return wb_err_set(err, WB_ERR_NOTFOUND, "%s: no metadata key %s", nm, K_TOKENS);
    const pre_def *pd = pre && !spm ? pre_find(pre, pl) : NULL;
    wb_gguf_tok_specials s = {spm ? 1 : -1, spm ? 2 : -1, spm ? 0 : -1, -1, -1, spm || (pd && pd->add_bos), 0, (int32_t)n};
    if (s.bos_id >= (int64_t)n) s.bos_id = -1;
    if (s.eos_id >= (int64_t)n) s.eos_id = -1;
    if (s.unk_id >= (int64_t)n) s.unk_id = -1;
    const char *keys[5] = {K_BOS, K_EOS, K_UNK, K_PAD, K_EOT};
    int32_t *ids[5] = {&s.bos_id, &s.eos_id, &s.unk_id, &s.pad_id, &s.eot_id};
    for (int k = 0; k < 5; k++) {
        st = get_id(g, keys[k], (int64_t)n, ids[k], err);
        if (st && st != WB_ERR_NOTFOUND) return st;
    }
    if ((st = get_flag(g, K_ADD_BOS, &s.add_bos, err)) || (st = get_flag(g, K_ADD_EOS, &s.add_eos, err)))
        return st;
    if (s.add_bos && s.bos_id < 0)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s is true but there is no %s", nm, K_ADD_BOS, K_BOS);
    if (s.add_eos && s.eos_id < 0)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s is true but there is no %s", nm, K_ADD_EOS, K_EOS);
    *out = s;
    return WB_OK;
}

static cJSON *special_item(const char *tok, int type_id) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject(), *s = jsb_obj(b, o, "SpecialToken");
    jsb_str(b, s, "id", tok);
    jsb_num(b, s, "type_id", type_id);
    return jsb_done(b, o);
}

static cJSON *seq_item(const char *id, int type_id) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject(), *s = jsb_obj(b, o, "Sequence");
    jsb_str(b, s, "id", id);
    jsb_num(b, s, "type_id", type_id);
    return jsb_done(b, o);
}

/* TemplateProcessing adding BOS / EOS as add_bos_token / add_eos_token say (the tokenizer's
 * encode never adds them; the section is kept so that saving and writing back preserve it). */
static cJSON *post_json(const char *bos, const char *eos, int32_t bos_id, int32_t eos_id) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject();
    jsb_str(b, o, "type", "TemplateProcessing");
    cJSON *single = jsb_arr(b, o, "single"), *pair = jsb_arr(b, o, "pair");
    for (int t = 0; t < 2; t++) {
        cJSON *a = t ? pair : single;
        for (int part = 0; part <= t; part++) {
            if (bos) jsb_push(b, a, special_item(bos, part));
            jsb_push(b, a, seq_item(part ? "B" : "A", part));
            if (eos) jsb_push(b, a, special_item(eos, part));
        }
    }
    cJSON *sp = jsb_obj(b, o, "special_tokens");
    for (int k = 0; k < 2; k++) {
        const char *t = k ? eos : bos;
        if (!t || cJSON_GetObjectItemCaseSensitive(sp, t)) continue;
        cJSON *e = jsb_obj(b, sp, t);
        jsb_str(b, e, "id", t);
        cJSON *ids = jsb_arr(b, e, "ids");
        jsb_push(b, ids, cJSON_CreateNumber(k ? eos_id : bos_id));
        cJSON *toks = jsb_arr(b, e, "tokens");
        jsb_push(b, toks, cJSON_CreateString(t));
    }
    return jsb_done(b, o);
}

static cJSON *replace_json(const char *from, const char *to) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject();
    jsb_str(b, o, "type", "Replace");
    cJSON *p = jsb_obj(b, o, "pattern");
    jsb_str(b, p, "String", from);
    jsb_str(b, o, "content", to);
    return jsb_done(b, o);
}

static cJSON *type_only(const char *t) {
    jsb jb_ = {0}, *b = &jb_;
    cJSON *o = cJSON_CreateObject();
    jsb_str(b, o, "type", t);
    return jsb_done(b, o);
}

#define SPACE_MARK "\xe2\x96\x81" /* ▁ */

/* A growing text buffer for the JSON of the vocabulary and the merges. */
typedef struct jbuf {
    char *p;
    size_t n, cap;
    int oom;
} jbuf;

static void jb_put(jbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* A JSON string of valid UTF-8 without NUL (checked at read). */
static void jb_str(jbuf *b, const char *s, size_t n) {
    jb_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        jb_put(b, s + run, i - run);
        char esc[8];
        int k = c == '"' ? snprintf(esc, sizeof esc, "\\\"") : c == '\\' ? snprintf(esc, sizeof esc, "\\\\")
                                                                       : snprintf(esc, sizeof esc, "\\u%04x", c);
        jb_put(b, esc, (size_t)k);
        run = i + 1;
    }
    jb_put(b, s + run, n - run);
    jb_put(b, "\"", 1);
}

/* head is the printed tokenizer.json whose last member is "model" (so it ends in "}}"); the
 * result adds model.vocab and model.merges (pairs, or the derived SentencePiece merges). */
static char *json_with_vocab(const char *head, const char *const *strs, const uint32_t *lens,
                             uint64_t n, const int32_t *pairs, size_t n_pairs, const spm_merge *sm,
                             size_t n_sm) {
    size_t hl = head ? strlen(head) : 0;
    if (hl < 2 || strcmp(head + hl - 2, "}}") != 0) return NULL;
    jbuf b = {0};
    jb_put(&b, head, hl - 2);
    jb_put(&b, ",\"vocab\":{", 10);
    char num[24];
    for (uint64_t i = 0; i < n; i++) {
        if (i) jb_put(&b, ",", 1);
        jb_str(&b, strs[i], lens[i]);
        jb_put(&b, num, (size_t)snprintf(num, sizeof num, ":%llu", (unsigned long long)i));
    }
    jb_put(&b, "},\"merges\":[", 12);
    size_t nm = pairs ? n_pairs : 0;
    for (size_t k = 0; k < nm + n_sm; k++) {
        int32_t l = k < nm ? pairs[2 * k] : sm[k - nm].l, r = k < nm ? pairs[2 * k + 1] : sm[k - nm].r;
        jb_put(&b, k ? ",[" : "[", k ? 2 : 1);
        jb_str(&b, strs[l], lens[l]);
        jb_put(&b, ",", 1);
        jb_str(&b, strs[r], lens[r]);
        jb_put(&b, "]", 1);
    }
    jb_put(&b, "]}}", 3);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

wb_status wb_gguf_tokenizer_load(const wb_gguf *g, wb_tokenizer **out, char **chat_template,
                                 wb_err *err) {
    if (out) *out = NULL;
    if (chat_template) *chat_template = NULL;
    if (!g || !out) return wb_err_set(err, WB_ERR_ARG, "wb_gguf_tokenizer_load: NULL argument");
    const char *nm = wb_gguf_name(g);
    wb_status st = WB_OK;
    jsb tb_ = {0}, *tb = &tb_; /* the tokenizer.json tree's builder */
    char **strs = NULL, *text = NULL, *tmpl = NULL;
    uint32_t *lens = NULL;
    int *types = NULL, *aflags = NULL;
    float *scores = NULL;
    tk_strmap map = {0};
    spm_merge *sm = NULL;
    size_t n_sm = 0;
    cJSON *root = NULL;
    int32_t *pairs = NULL;
    size_t n_pairs = 0;

    const char *model, *pre = NULL, *prep = NULL;
    size_t ml, pl = 0, prepl = 0;
    if ((st = wb_gguf_get_str(g, K_MODEL, &model, &ml, err))) goto done;
    int spm = ml == 5 && !memcmp(model, "llama", 5);
    if (!spm && !(ml == 4 && !memcmp(model, "gpt2", 4)))
        FAIL(WB_ERR_FORMAT, "%s: %s: tokenizer model \"%.*s\" is not supported (gpt2, llama)", nm,
             K_MODEL, (int)(ml > 40 ? 40 : ml), model);
    st = wb_gguf_get_str(g, K_PRE, &pre, &pl, err);
    if (st && st != WB_ERR_NOTFOUND) goto done;
    st = WB_OK;
    const pre_def *pd = NULL;
    if (!spm) {
        pd = pre ? pre_find(pre, pl) : pre_find("default", 7);
        if (!pd)
            FAIL(WB_ERR_FORMAT, "%s: %s: pre-tokenizer \"%.*s\" is not one the workbench knows "
                 "(llama.cpp's names such as gpt-2, llama-bpe, qwen2, smollm, deepseek-llm; see docs/gguf.md)",
                 nm, K_PRE, (int)(pl > 40 ? 40 : pl), pre);
    }
    st = wb_gguf_get_str(g, K_WB_PREPEND, &prep, &prepl, err);
    if (st && st != WB_ERR_NOTFOUND) goto done;
    st = WB_OK;
    char scheme[8] = "";
    if (prep) {
        if (spm && prepl < sizeof scheme) memcpy(scheme, prep, prepl);
        if (strcmp(scheme, "first") && strcmp(scheme, "always") && strcmp(scheme, "never"))
            FAIL(WB_ERR_FORMAT, "%s: %s: expected \"first\", \"always\" or \"never\" with a llama tokenizer",
                 nm, K_WB_PREPEND);
    }

    int64_t ti, yi, si, mi, fi;
    uint64_t n, ny, ns, nmg, nf;
    if ((st = get_array(g, K_TOKENS, WB_GGUF_STRING, -1, MAX_TOKENS, &ti, &n, err))) goto done;
    if (ti < 0) FAIL(WB_ERR_NOTFOUND, "%s: no metadata key %s", nm, K_TOKENS);
    if (n == 0) FAIL(WB_ERR_FORMAT, "%s: %s is empty", nm, K_TOKENS);
    if ((st = get_array(g, K_TYPES, WB_GGUF_I32, (int64_t)n, MAX_TOKENS, &yi, &ny, err))) goto done;
    if ((st = get_array(g, K_SCORES, WB_GGUF_F32, (int64_t)n, MAX_TOKENS, &si, &ns, err))) goto done;
    if ((st = get_array(g, K_MERGES, WB_GGUF_STRING, -1, MAX_MERGES, &mi, &nmg, err))) goto done;
    if ((st = get_array(g, K_WB_FLAGS, WB_GGUF_I32, -1, 2 * MAX_TOKENS, &fi, &nf, err))) goto done;
    if (!spm && mi < 0) FAIL(WB_ERR_NOTFOUND, "%s: no metadata key %s (a gpt2 tokenizer needs its merges)", nm, K_MERGES);
    if (nf % 2) FAIL(WB_ERR_FORMAT, "%s: %s: odd number of elements (pairs of id, flags)", nm, K_WB_FLAGS);

    strs = calloc(n, sizeof *strs);
    lens = calloc(n, sizeof *lens);
    types = calloc(n, sizeof *types);
    aflags = calloc(n, sizeof *aflags);
    if (spm) scores = calloc(n, sizeof *scores);
    if (!strs || !lens || !types || !aflags || (spm && !scores)) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t l;
        if ((st = wb_gguf_arr_str(g, ti, i, &s, &l, err))) goto done;
        if (l > MAX_TOKEN_BYTES)
            FAIL(WB_ERR_FORMAT, "%s: %s[%llu]: %zu bytes (the limit is %d)", nm, K_TOKENS,
                 (unsigned long long)i, l, MAX_TOKEN_BYTES);
        if (memchr(s, 0, l)) FAIL(WB_ERR_FORMAT, "%s: %s[%llu] contains a NUL byte", nm, K_TOKENS, (unsigned long long)i);
        if (!tk_utf8_valid(s, l)) FAIL(WB_ERR_FORMAT, "%s: %s[%llu] is not valid UTF-8", nm, K_TOKENS, (unsigned long long)i);
        char buf[40];
        if (l == 0) { /* llama.cpp renames empty tokens the same way */
            l = (size_t)snprintf(buf, sizeof buf, "[EMPTY_%llu]", (unsigned long long)i);
            s = buf;
        }
        if (!(strs[i] = tk_strndup(s, l))) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        lens[i] = (uint32_t)l;
        int32_t old = -1;
        int r = tk_strmap_add(&map, strs[i], l, (int32_t)i, &old);
        if (r < 0) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        if (r == 0)
            FAIL(WB_ERR_FORMAT, "%s: %s[%llu] and [%d] are the same token \"%.40s\"", nm, K_TOKENS,
                 (unsigned long long)i, old, strs[i]);
        int64_t t = TT_NORMAL;
        if (yi >= 0) {
            if ((st = wb_gguf_arr_int(g, yi, i, &t, err))) goto done;
            if (t < TT_UNDEFINED || t > TT_BYTE)
                FAIL(WB_ERR_FORMAT, "%s: %s[%llu] = %lld is not a token type (0-6)", nm, K_TYPES,
                     (unsigned long long)i, (long long)t);
        }
        types[i] = (int)t;
        aflags[i] = t == TT_CONTROL || t == TT_UNKNOWN ? AF_SPECIAL : t == TT_USER ? 0 : AF_NOT_ADDED;
        if (spm && si >= 0) {
            double d;
            if ((st = wb_gguf_arr_float(g, si, i, &d, err))) goto done;
            if (!isfinite(d) || fabs(d) > 3.0e38)
                FAIL(WB_ERR_FORMAT, "%s: %s[%llu] is not a finite float", nm, K_SCORES, (unsigned long long)i);
            scores[i] = (float)d;
        }
    }
    for (uint64_t k = 0; k < nf; k += 2) {
        int64_t id, f;
        if ((st = wb_gguf_arr_int(g, fi, k, &id, err)) || (st = wb_gguf_arr_int(g, fi, k + 1, &f, err))) goto done;
        if (id < 0 || (uint64_t)id >= n || f < 0 || f > 63 || ((f & AF_NOT_ADDED) && f != AF_NOT_ADDED))
            FAIL(WB_ERR_FORMAT, "%s: %s[%llu]: (%lld, %lld) is not a token id and flags", nm, K_WB_FLAGS,
                 (unsigned long long)k, (long long)id, (long long)f);
        aflags[id] = (int)f;
    }
    wb_gguf_tok_specials sp;
    if ((st = wb_gguf_tokenizer_specials(g, &sp, err))) goto done;

    /* tokenizer.json */
    root = cJSON_CreateObject();
    if (!root) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    jsb_str(tb, root, "version", "1.0");
    jsb_null(tb, root, "truncation");
    jsb_null(tb, root, "padding");
    cJSON *added = jsb_arr(tb, root, "added_tokens");
    for (uint64_t i = 0; i < n; i++) {
        if (aflags[i] & AF_NOT_ADDED) continue;
        cJSON *a = jsb_push(tb, added, cJSON_CreateObject()); /* a failed push deleted it: a is NULL then */
        jsb_num(tb, a, "id", (double)i);
        jsb_str(tb, a, "content", strs[i]);
        jsb_bool(tb, a, "single_word", !!(aflags[i] & AF_SINGLE_WORD));
        jsb_bool(tb, a, "lstrip", !!(aflags[i] & AF_LSTRIP));
        jsb_bool(tb, a, "rstrip", !!(aflags[i] & AF_RSTRIP));
        jsb_bool(tb, a, "normalized", !!(aflags[i] & AF_NORMALIZED));
        jsb_bool(tb, a, "special", !!(aflags[i] & AF_SPECIAL));
    }
    int add_space = 1;
    if (spm) {
        if ((st = get_flag(g, K_ADD_SPACE, &add_space, err))) goto done;
        if (prep) { /* Metaspace(prepend_scheme): unlike Prepend, never a second ▁ before a space */
            jsb_null(tb, root, "normalizer");
            cJSON *ms = jsb_obj(tb, root, "pre_tokenizer");
            jsb_str(tb, ms, "type", "Metaspace");
            jsb_str(tb, ms, "replacement", SPACE_MARK);
            jsb_str(tb, ms, "prepend_scheme", add_space ? scheme : "never");
            jsb_bool(tb, ms, "split", 0);
        } else { /* the legacy Llama-2 shape, which is also what llama.cpp does */
            cJSON *nz = jsb_obj(tb, root, "normalizer");
            jsb_str(tb, nz, "type", "Sequence");
            cJSON *arr = jsb_arr(tb, nz, "normalizers");
            if (add_space) {
                cJSON *p = cJSON_CreateObject();
                jsb_str(tb, p, "type", "Prepend");
                jsb_str(tb, p, "prepend", SPACE_MARK);
                jsb_push(tb, arr, p);
            }
            jsb_push(tb, arr, replace_json(" ", SPACE_MARK));
            jsb_null(tb, root, "pre_tokenizer");
        }
        cJSON *dec = jsb_obj(tb, root, "decoder");
        jsb_str(tb, dec, "type", "Sequence");
        cJSON *arr = jsb_arr(tb, dec, "decoders");
        jsb_push(tb, arr, replace_json(SPACE_MARK, " "));
        jsb_push(tb, arr, type_only("ByteFallback"));
        jsb_push(tb, arr, type_only("Fuse"));
        if (add_space) {
            cJSON *s = type_only("Strip");
            jsb_str(tb, s, "content", " ");
            jsb_num(tb, s, "start", 1);
            jsb_num(tb, s, "stop", 0);
            jsb_push(tb, arr, s);
        }
    } else {
        if (pd->nfc) jsb_put(tb, root, "normalizer", type_only("NFC"));
        else jsb_null(tb, root, "normalizer");
        jsb_put(tb, root, "pre_tokenizer", pre_json(pd));
        jsb_put(tb, root, "decoder", byte_level(1));
    }
    if (sp.add_bos || sp.add_eos)
        jsb_put(tb, root, "post_processor",
                              post_json(sp.add_bos ? strs[sp.bos_id] : NULL, sp.add_eos ? strs[sp.eos_id] : NULL,
                                        sp.bos_id, sp.eos_id));
    else
        jsb_null(tb, root, "post_processor");

    cJSON *mdl = jsb_obj(tb, root, "model");
    jsb_str(tb, mdl, "type", "BPE");
    jsb_null(tb, mdl, "dropout");
    int32_t unk = sp.unk_id;
    if (unk < 0)
        for (uint64_t i = 0; i < n && unk < 0; i++)
            if (types[i] == TT_UNKNOWN) unk = (int32_t)i;
    if (unk >= 0) jsb_str(tb, mdl, "unk_token", strs[unk]);
    else jsb_null(tb, mdl, "unk_token");
    jsb_null(tb, mdl, "continuing_subword_prefix");
    jsb_null(tb, mdl, "end_of_word_suffix");
    jsb_bool(tb, mdl, "fuse_unk", spm);
    jsb_bool(tb, mdl, "byte_fallback", spm);
    jsb_bool(tb, mdl, "ignore_merges", pd && pd->ignore_merges);
    /* vocab and merges are written as text (json_with_vocab): a cJSON tree of them costs more
     * than the load itself */
    pairs = malloc(((mi >= 0 ? nmg : 0) + 1) * 2 * sizeof *pairs);
    if (!pairs) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    if (mi >= 0) {
        /* "a b", split at the first space after the first byte as llama.cpp does */
        char *cat = malloc(2 * MAX_TOKEN_BYTES + 2);
        if (!cat) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        for (uint64_t k = 0; k < nmg; k++) {
            const char *s;
            size_t l;
            if ((st = wb_gguf_arr_str(g, mi, k, &s, &l, err))) break;
            const char *sep = l > 1 ? memchr(s + 1, ' ', l - 1) : NULL;
            size_t al = sep ? (size_t)(sep - s) : 0, bl = sep ? l - al - 1 : 0;
            int32_t a = sep ? tk_strmap_get(&map, s, al) : -1, b = sep ? tk_strmap_get(&map, sep + 1, bl) : -1;
            int32_t c = -1;
            if (a >= 0 && b >= 0 && al + bl <= 2 * MAX_TOKEN_BYTES) {
                memcpy(cat, s, al);
                memcpy(cat + al, sep + 1, bl);
                c = tk_strmap_get(&map, cat, al + bl);
            }
            if (c < 0) {
                st = wb_err_set(err, WB_ERR_FORMAT,
                                "%s: %s[%llu] \"%.*s\" is not two tokens whose concatenation is a token",
                                nm, K_MERGES, (unsigned long long)k, (int)(l > 60 ? 60 : l), s);
                break;
            }
            pairs[2 * n_pairs] = a;
            pairs[2 * n_pairs + 1] = b;
            n_pairs++;
        }
        free(cat);
        if (st) goto done;
    } else {
        spm_src src = {(const char *const *)strs, lens, types, si >= 0 ? scores : NULL, &map, (int32_t)n};
        if (spm_merges(&src, &sm, &n_sm)) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    }

    if (chat_template) {
        const char *t;
        size_t tl;
        st = wb_gguf_get_str(g, K_TEMPLATE, &t, &tl, err);
        if (st && st != WB_ERR_NOTFOUND) goto done;
        if (st == WB_OK) {
            if (memchr(t, 0, tl)) FAIL(WB_ERR_FORMAT, "%s: %s contains a NUL byte", nm, K_TEMPLATE);
            if (!tk_utf8_valid(t, tl)) FAIL(WB_ERR_FORMAT, "%s: %s is not valid UTF-8", nm, K_TEMPLATE);
            if (!(tmpl = tk_strndup(t, tl))) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        }
        st = WB_OK;
    }

    if (tb->failed) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    char *head = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    root = NULL;
    if (!head) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    text = json_with_vocab(head, (const char *const *)strs, lens, n, pairs, n_pairs, sm, n_sm);
    free(head);
    if (!text) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    char label[512];
    snprintf(label, sizeof label, "%s (tokenizer from GGUF metadata)", nm);
    if ((st = wb_tokenizer_load_json(text, strlen(text), label, out, err))) goto done;
    if (chat_template) {
        *chat_template = tmpl;
        tmpl = NULL;
    }
done:
    cJSON_Delete(root);
    free(text);
    free(pairs);
    free(tmpl);
    free(sm);
    tk_strmap_free(&map);
    if (strs)
        for (uint64_t i = 0; i < n; i++) free(strs[i]);
    free(strs);
    free(lens);
    free(types);
    free(aflags);
    free(scores);
    return st;
}

/* ---- writing ---------------------------------------------------------------------------------- */

wb_gguf_tok_specials wb_gguf_tok_specials_auto(void) {
    return (wb_gguf_tok_specials){WB_GGUF_TOK_AUTO, WB_GGUF_TOK_AUTO, WB_GGUF_TOK_AUTO,
                                  WB_GGUF_TOK_AUTO, WB_GGUF_TOK_AUTO, WB_GGUF_TOK_AUTO,
                                  WB_GGUF_TOK_AUTO, WB_GGUF_TOK_AUTO};
}

static const tk_added *added_of(const wb_tokenizer *tok, int32_t id) {
    for (size_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].id == id) return &tok->added[i];
    return NULL;
}

/* Leading / trailing special token of a TemplateProcessing's "single" (BOS / EOS it adds). */
static void template_ends(const wb_tokenizer *tok, int32_t *bos, int32_t *eos) {
    *bos = *eos = -1;
    cJSON *root = tok->json_post ? cJSON_Parse(tok->json_post) : NULL, *j = root;
    const char *t = jstr(j, "type");
    if (t && !strcmp(t, "Sequence")) { /* Llama-3: [ByteLevel, TemplateProcessing] */
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "processors");
        j = NULL;
        for (const cJSON *e = cJSON_IsArray(ps) ? ps->child : NULL; e; e = e->next)
            if (jstr(e, "type") && !strcmp(jstr(e, "type"), "TemplateProcessing")) j = (cJSON *)e;
        t = jstr(j, "type");
    }
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
    if (t && !strcmp(t, "TemplateProcessing") && cJSON_IsArray(single)) {
        int n = cJSON_GetArraySize(single);
        for (int k = 0; k < n; k += n > 1 ? n - 1 : 1) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, k), "SpecialToken");
            const char *id = jstr(st, "id");
            if (!id) continue;
            const cJSON *sps = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sps, id), "ids");
            int32_t v = cJSON_IsArray(ids) && cJSON_GetArraySize(ids) == 1 && cJSON_IsNumber(ids->child)
                            ? (int32_t)ids->child->valuedouble : wb_tokenizer_id_of_str(tok, id);
            if (v < 0 || v >= tok->n_total) continue;
            if (k == 0 && n > 1) *bos = v;
            else if (k == n - 1 && k > 0) *eos = v;
            else if (n == 1) *bos = v;
        }
    }
    cJSON_Delete(root);
}

static int32_t first_of(const wb_tokenizer *tok, const char *const *names) {
    for (; *names; names++) {
        int32_t id = wb_tokenizer_id_of_str(tok, *names);
        if (id >= 0) return id;
    }
    return -1;
}

wb_status wb_gguf_tokenizer_put(wb_gguf_writer *w, const wb_tokenizer *tok,
                                const char *chat_template, wb_err *err) {
    return wb_gguf_tokenizer_put_ex(w, tok, chat_template, NULL, err);
}

wb_status wb_gguf_tokenizer_put_ex(wb_gguf_writer *w, const wb_tokenizer *tok,
                                   const char *chat_template, const wb_gguf_tok_specials *spec,
                                   wb_err *err) {
    if (!w || !tok) return wb_err_set(err, WB_ERR_ARG, "wb_gguf_tokenizer_put: NULL argument");
    const char *nm = "GGUF tokenizer";
    wb_status st = WB_OK;
    int32_t n = tok->n_total;
    const char **strs = NULL;
    int32_t *types = NULL, *flags = NULL;
    float *scores = NULL;
    char **mstr = NULL, *pads = NULL;
    size_t n_mstr = 0, n_flags = 0;
    spm_merge *sm = NULL;
    size_t n_sm = 0;
    tk_strmap map = {0};
    int bad_n = 0, bad_p = 0;
    cJSON *cn = canon_text(tok->json_normalizer, &bad_n), *cp = NULL;
    if (tok->json_pre || tok->pre_parsed) {
        cp = canon_text(tok->json_pre, &bad_p);
    } else { /* a trained tokenizer: ByteLevel(add_prefix_space, use_regex) */
        cJSON *bl = byte_level(tok->use_regex), *aps = cJSON_CreateBool(tok->add_prefix_space);
        if (bl && aps && cJSON_ReplaceItemInObjectCaseSensitive(bl, "add_prefix_space", aps)) {
            aps = NULL;
            cp = cJSON_CreateArray();
            bad_p = !cp || canon(bl, cp, 0) != 0;
        }
        cJSON_Delete(aps);
        cJSON_Delete(bl);
    }
    if (!cn || !cp) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    if (bad_n || bad_p)
        FAIL(WB_ERR_FORMAT, "%s: the tokenizer's %s has a step llama.cpp has no equivalent for", nm,
             bad_n ? "normalizer" : "pre_tokenizer");
    if (tok->cont_prefix || tok->eow_suffix)
        FAIL(WB_ERR_FORMAT, "%s: continuing_subword_prefix / end_of_word_suffix cannot be written to GGUF", nm);

    int spm = !tok->byte_level;
    const pre_def *pd = NULL;
    int add_space = 0;
    const char *scheme = NULL; /* Metaspace prepend_scheme, written to K_WB_PREPEND */
    if (!spm) {
        if (tok->byte_fallback) FAIL(WB_ERR_FORMAT, "%s: a byte-level tokenizer with byte_fallback cannot be written to GGUF", nm);
        cJSON *nfc = cJSON_CreateArray();
        int is_nfc = 0, is_none = cJSON_GetArraySize(cn) == 0;
        cJSON *o = nfc ? type_only("NFC") : NULL;
        int built = o && canon(o, nfc, 0) == 0;
        if (built) is_nfc = cJSON_Compare(cn, nfc, 1);
        cJSON_Delete(o);
        cJSON_Delete(nfc);
        if (!built) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        if (!is_nfc && !is_none)
            FAIL(WB_ERR_FORMAT, "%s: the tokenizer's normalizer is neither none nor NFC: llama.cpp has no equivalent", nm);
        for (size_t i = 0; i < N_PRE && !pd; i++) {
            if (k_pre[i].nfc != is_nfc || k_pre[i].ignore_merges != !!tok->ignore_merges) continue;
            cJSON *pj = pre_json(&k_pre[i]);
            if (!pj) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
            if (canon_equal(cp, pj)) pd = &k_pre[i];
            cJSON_Delete(pj);
        }
        if (!pd)
            FAIL(WB_ERR_FORMAT, "%s: the tokenizer's pre_tokenizer%s%s is not one of llama.cpp's pre-tokenizers "
                 "(gpt-2, llama-bpe, qwen2, smollm, ...; see docs/gguf.md)", nm,
                 tok->ignore_merges ? " with ignore_merges" : "", is_nfc ? " after NFC" : "");
    } else {
        /* SentencePiece style: legacy Prepend+Replace, Replace only, or Metaspace without split */
        cJSON *meta = cJSON_GetArraySize(cp) == 1 ? cJSON_GetArrayItem(cp, 0) : NULL;
        const char *mt = jstr(meta, "type");
        int nn = cJSON_GetArraySize(cn);
        const cJSON *n0 = cJSON_GetArrayItem(cn, 0), *nl = cJSON_GetArrayItem(cn, nn - 1);
        int repl_last = nn >= 1 && !strcmp(jstr(nl, "type"), "Replace") && jstr(nl, "String") &&
                        !strcmp(jstr(nl, "String"), " ") && !strcmp(jstr(nl, "content"), SPACE_MARK);
        if (cJSON_GetArraySize(cp) == 0 && nn == 2 && repl_last && !strcmp(jstr(n0, "type"), "Prepend") &&
            !strcmp(jstr(n0, "prepend"), SPACE_MARK)) {
            add_space = 1;
        } else if (cJSON_GetArraySize(cp) == 0 && nn == 1 && repl_last) {
            add_space = 0;
        } else if (nn == 0 && mt && !strcmp(mt, "Metaspace") && !jbool(meta, "split", 1) &&
                   !strcmp(jstr(meta, "replacement"), SPACE_MARK)) {
            const char *ps = jstr(meta, "prepend_scheme");
            add_space = strcmp(ps, "never") != 0;
            scheme = ps;
        } else {
            FAIL(WB_ERR_FORMAT, "%s: a SentencePiece-style tokenizer needs the Llama normalizer "
                 "(Prepend \"▁\", Replace \" \" with \"▁\") or a Metaspace pre_tokenizer without split; "
                 "this one has another chain, which llama.cpp cannot reproduce", nm);
        }
        if (!tok->byte_fallback)
            FAIL(WB_ERR_FORMAT, "%s: a SentencePiece-style tokenizer without byte_fallback cannot be written to GGUF", nm);
        int have = 0;
        for (int b = 0; b < 256; b++) {
            char s[8];
            snprintf(s, sizeof s, "<0x%02X>", b);
            have += tk_strmap_get(&tok->model_map, s, 6) >= 0;
        }
        if (have < 256 && !tok->fuse_unk)
            FAIL(WB_ERR_FORMAT, "%s: %d of the 256 <0xNN> byte tokens are missing and fuse_unk is off", nm, 256 - have);
    }

    /* tokens and their types; added-token flags where they differ from the type's default */
    strs = malloc(((size_t)n + 1) * sizeof *strs);
    types = malloc(((size_t)n + 1) * sizeof *types);
    flags = malloc(((size_t)n + 1) * 2 * sizeof *flags);
    if (!strs || !types || !flags) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
    for (int32_t i = 0; i < n; i++) {
        strs[i] = tok->str[i];
        if (memchr(tok->str[i], 0, tok->str_len[i]) || tok->str_len[i] == 0)
            FAIL(WB_ERR_FORMAT, "%s: token %d is empty", nm, i);
        const tk_added *a = added_of(tok, i);
        int t = TT_NORMAL;
        if (i == tok->unk_id) t = TT_UNKNOWN;
        else if (a) t = a->special ? TT_CONTROL : TT_USER;
        else if (spm && byte_token(tok->str[i], tok->str_len[i]) >= 0) t = TT_BYTE;
        types[i] = t;
        int def = t == TT_CONTROL || t == TT_UNKNOWN ? AF_SPECIAL : t == TT_USER ? 0 : AF_NOT_ADDED;
        int f = a ? (a->special ? AF_SPECIAL : 0) | (a->normalized ? AF_NORMALIZED : 0) |
                        (a->lstrip ? AF_LSTRIP : 0) | (a->rstrip ? AF_RSTRIP : 0) |
                        (a->single_word ? AF_SINGLE_WORD : 0)
                  : AF_NOT_ADDED;
        if (f != def) {
            flags[n_flags++] = i;
            flags[n_flags++] = f;
        }
    }

    if (spm) {
        /* scores: a piece made by merges ranks by its first merge (higher = earlier), so the
         * merges Hugging Face's converter derives from the scores are the tokenizer's own */
        scores = malloc(((size_t)n + 1) * sizeof *scores);
        if (!scores) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        for (int32_t i = 0; i < n; i++) scores[i] = 1.0f; /* not yet ranked */
        float next = -1.0f;
        for (size_t k = 0; k < tok->n_merges; k++) {
            int64_t *v = tk_u64map_get(&tok->merge_map, ((uint64_t)(uint32_t)tok->merges[k][0] << 32) |
                                                           (uint32_t)tok->merges[k][1]);
            int32_t res = v ? (int32_t)(uint32_t)*v : -1;
            if (res >= 0 && scores[res] > 0) scores[res] = next--;
        }
        for (int32_t i = 0; i < n; i++)
            if (scores[i] > 0) scores[i] = types[i] == TT_NORMAL && tok->str_len[i] > 1 ? next-- : 0.0f;
        for (int32_t i = 0; i < n; i++) {
            int32_t old;
            if (tk_strmap_add(&map, strs[i], tok->str_len[i], i, &old) < 0) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        }
        spm_src src = {strs, tok->str_len, (const int *)types, scores, &map, n};
        if (spm_merges(&src, &sm, &n_sm)) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        int same = n_sm == tok->n_merges;
        for (size_t k = 0; same && k < n_sm; k++)
            same = sm[k].l == tok->merges[k][0] && sm[k].r == tok->merges[k][1];
        if (same) n_mstr = 0;
        else n_mstr = tok->n_merges; /* explicit merges (llama.cpp itself goes by the scores) */
    } else {
        n_mstr = tok->n_merges;
    }
    if (n_mstr) {
        mstr = calloc(n_mstr, sizeof *mstr);
        if (!mstr) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        for (size_t k = 0; k < n_mstr; k++) {
            int32_t a = tok->merges[k][0], b = tok->merges[k][1];
            const char *sa = tok->str[a], *sb = tok->str[b];
            size_t al = tok->str_len[a], bl = tok->str_len[b];
            /* llama.cpp splits "a b" at the first space after the first byte */
            const char *sp2 = al > 1 ? memchr(sa + 1, ' ', al - 1) : NULL;
            if (sp2 || al == 0)
                FAIL(WB_ERR_FORMAT, "%s: merge %zu (\"%.40s\" + \"%.40s\") has a space inside its first "
                     "token, which GGUF's \"a b\" merges cannot express", nm, k, sa, sb);
            if (!(mstr[k] = malloc(al + bl + 2))) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
            memcpy(mstr[k], sa, al);
            mstr[k][al] = ' ';
            memcpy(mstr[k] + al + 1, sb, bl);
            mstr[k][al + 1 + bl] = 0;
        }
    }

    /* special ids */
    wb_gguf_tok_specials s = spec ? *spec : wb_gguf_tok_specials_auto();
    int32_t t_bos, t_eos;
    template_ends(tok, &t_bos, &t_eos);
    static const char *const bos_names[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>", NULL};
    static const char *const pad_names[] = {"<pad>", "<|pad|>", "[PAD]", "<|finetune_right_pad_id|>", NULL};
    if (s.eos_id == WB_GGUF_TOK_AUTO) s.eos_id = t_eos >= 0 ? t_eos : wb_tokenizer_eos_id(tok);
    if (s.bos_id == WB_GGUF_TOK_AUTO) {
        s.bos_id = t_bos >= 0 ? t_bos : first_of(tok, bos_names);
        if (s.bos_id < 0 && !spm) s.bos_id = s.eos_id; /* GPT-2 style: one <|endoftext|> */
    }
    if (s.unk_id == WB_GGUF_TOK_AUTO) s.unk_id = tok->unk_id;
    if (s.pad_id == WB_GGUF_TOK_AUTO) s.pad_id = first_of(tok, pad_names);
    if (s.eot_id == WB_GGUF_TOK_AUTO) s.eot_id = -1;
    if (s.add_bos == WB_GGUF_TOK_AUTO) s.add_bos = t_bos >= 0;
    if (s.add_eos == WB_GGUF_TOK_AUTO) s.add_eos = t_eos >= 0;
    int32_t *sids[5] = {&s.bos_id, &s.eos_id, &s.unk_id, &s.pad_id, &s.eot_id};
    static const char *const skeys[5] = {K_BOS, K_EOS, K_UNK, K_PAD, K_EOT};
    for (int k = 0; k < 5; k++)
        if (*sids[k] < -1 || *sids[k] >= n)
            FAIL(WB_ERR_ARG, "%s: %s %d is outside the %d tokens", nm, skeys[k], *sids[k], n);
    if ((s.add_bos && s.bos_id < 0) || (s.add_eos && s.eos_id < 0))
        FAIL(WB_ERR_ARG, "%s: add_bos/add_eos without a bos/eos token", nm);

    /* padding to the model's row count: "[PAD<i>]" unused tokens, as llama.cpp's converter */
    int32_t nv = s.n_vocab > 0 ? s.n_vocab : n;
    if (nv < n || (uint64_t)nv > MAX_TOKENS)
        FAIL(WB_ERR_ARG, "%s: n_vocab %d is below the tokenizer's %d ids or above %llu", nm, nv, n,
             (unsigned long long)MAX_TOKENS);
    if (nv > n) {
        const char **s2 = realloc(strs, ((size_t)nv + 1) * sizeof *s2);
        if (s2) strs = s2;
        int32_t *t2 = s2 ? realloc(types, ((size_t)nv + 1) * sizeof *t2) : NULL;
        if (t2) types = t2;
        float *f2 = t2 && spm ? realloc(scores, ((size_t)nv + 1) * sizeof *f2) : NULL;
        if (f2) scores = f2;
        pads = t2 && (!spm || f2) ? malloc((size_t)(nv - n) * 24) : NULL;
        if (!pads) FAIL(WB_ERR_NOMEM, "%s: out of memory", nm);
        for (int32_t i = n; i < nv; i++) {
            char *p = pads + (size_t)(i - n) * 24;
            snprintf(p, 24, "[PAD%d]", (int)i);
            if (wb_tokenizer_id_of_str(tok, p) >= 0)
                FAIL(WB_ERR_ARG, "%s: padding token %s is already a token", nm, p);
            strs[i] = p;
            types[i] = TT_UNUSED;
            if (spm) scores[i] = -1000.0f;
        }
    }

    /* everything is known: write */
#define W(call) do { if ((st = (call)) != WB_OK) goto done; } while (0)
    W(wb_gguf_set_str(w, K_MODEL, spm ? "llama" : "gpt2", spm ? 5 : 4, err));
    if (!spm) W(wb_gguf_set_str(w, K_PRE, pd->names[0], strlen(pd->names[0]), err));
    W(wb_gguf_set_str_array(w, K_TOKENS, strs, (size_t)nv, err));
    if (spm) W(wb_gguf_set_f32_array(w, K_SCORES, scores, (size_t)nv, err));
    W(wb_gguf_set_i32_array(w, K_TYPES, types, (size_t)nv, err));
    if (n_mstr) W(wb_gguf_set_str_array(w, K_MERGES, (const char *const *)mstr, n_mstr, err));
    for (int k = 0; k < 5; k++)
        if (*sids[k] >= 0) W(wb_gguf_set_u32(w, skeys[k], (uint32_t)*sids[k], err));
    W(wb_gguf_set_bool(w, K_ADD_BOS, s.add_bos, err));
    W(wb_gguf_set_bool(w, K_ADD_EOS, s.add_eos, err));
    if (spm) W(wb_gguf_set_bool(w, K_ADD_SPACE, add_space, err));
    if (scheme) W(wb_gguf_set_str(w, K_WB_PREPEND, scheme, strlen(scheme), err));
    if (n_flags) W(wb_gguf_set_i32_array(w, K_WB_FLAGS, flags, n_flags, err));
    if (chat_template) W(wb_gguf_set_str(w, K_TEMPLATE, chat_template, strlen(chat_template), err));
#undef W
done:
    cJSON_Delete(cn);
    cJSON_Delete(cp);
    free(strs);
    free(types);
    free(flags);
    free(scores);
    free(sm);
    tk_strmap_free(&map);
    if (mstr)
        for (size_t k = 0; k < n_mstr; k++) free(mstr[k]);
    free(mstr);
    free(pads);
    return st;
}
