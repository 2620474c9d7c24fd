/* tokenizer.c - byte-level BPE encoding and decoding with Hugging Face `tokenizers` semantics:
 * added tokens split off first, ByteLevel pre-tokenization (GPT-2 regex), BPE merges applied
 * lowest rank first, byte-exact decoding and a streaming UTF-8-safe decoder. */
#include "tokenizer_internal.h"
#include "unicode_classes.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- hash maps ------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

uint64_t tk_hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ mix64(w)) * 0x100000001b3ULL;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    return mix64(h ^ w ^ ((uint64_t)(n - i) << 56));
}

void tk_u64map_free(tk_u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int u64map_grow(tk_u64map *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    uint64_t *nk = malloc(ncap * sizeof *nk);
    int64_t *nv = malloc(ncap * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -1;
    }
    memset(nk, 0xff, ncap * sizeof *nk);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == UINT64_MAX) continue;
        size_t j = mix64(m->keys[i]) & (ncap - 1);
        while (nk[j] != UINT64_MAX) j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

int64_t *tk_u64map_get(const tk_u64map *m, uint64_t key) {
    if (!m->cap) return NULL;
    size_t j = mix64(key) & (m->cap - 1);
    while (m->keys[j] != UINT64_MAX) {
        if (m->keys[j] == key) return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

int64_t *tk_u64map_put(tk_u64map *m, uint64_t key, int64_t init, int *inserted) {
    if (inserted) *inserted = 0;
    if ((m->n + 1) * 2 > m->cap && u64map_grow(m)) return NULL;
    size_t j = mix64(key) & (m->cap - 1);
    while (m->keys[j] != UINT64_MAX) {
        if (m->keys[j] == key) return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = init;
    m->n++;
    if (inserted) *inserted = 1;
    return &m->vals[j];
}

void tk_strmap_free(tk_strmap *m) {
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int strmap_grow(tk_strmap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    const char **nk = calloc(ncap, sizeof *nk);
    uint32_t *nl = malloc(ncap * sizeof *nl);
    int32_t *nv = malloc(ncap * sizeof *nv);
    if (!nk || !nl || !nv) {
        free(nk);
        free(nl);
        free(nv);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = tk_hash_bytes(m->keys[i], m->lens[i]) & (ncap - 1);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nl[j] = m->lens[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->lens);
    free(m->vals);
    m->keys = nk;
    m->lens = nl;
    m->vals = nv;
    m->cap = ncap;
    return 0;
}

int32_t tk_strmap_get(const tk_strmap *m, const char *key, size_t len) {
    if (!m->cap) return -1;
    size_t j = tk_hash_bytes(key, len) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->lens[j] == len && memcmp(m->keys[j], key, len) == 0) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

int tk_strmap_add(tk_strmap *m, const char *key, size_t len, int32_t val, int32_t *old) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m)) return -1;
    size_t j = tk_hash_bytes(key, len) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->lens[j] == len && memcmp(m->keys[j], key, len) == 0) {
            if (old) *old = m->vals[j];
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    /* an empty key still needs a non-NULL pointer to mark the slot used */
    m->keys[j] = key ? key : "";
    m->lens[j] = (uint32_t)len;
    m->vals[j] = val;
    m->n++;
    return 1;
}

/* ---- UTF-8 ------------------------------------------------------------------------------- */

int tk_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t cons;
        int tr;
        int l = tk_utf8_char((const unsigned char *)s + i, n - i, &cons, &tr);
        if (!l) return 0;
        i += (size_t)l;
    }
    return 1;
}

int tk_utf8_char(const unsigned char *s, size_t n, size_t *consumed, int *truncated) {
    unsigned c = s[0];
    *truncated = 0;
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *consumed = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= (size_t)need; i++) {
        if (i >= n) {
            *consumed = i;
            *truncated = 1;
            return 0;
        }
        unsigned b = s[i];
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) {
            *consumed = i;
            return 0;
        }
    }
    return need + 1;
}

const char *tk_utf8_lossy(const char *text, size_t len, size_t *out_len, char **owned) {
    const unsigned char *s = (const unsigned char *)text;
    *owned = NULL;
    size_t i = 0;
    /* fast scan: most input is valid and needs no copy */
    while (i < len) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t cons;
        int tr;
        int l = tk_utf8_char(s + i, len - i, &cons, &tr);
        if (!l) break;
        i += (size_t)l;
    }
    if (i == len) {
        *out_len = len;
        return text ? text : "";
    }
    /* each invalid byte becomes at most 3 bytes */
    if (len > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(len * 3 + 1);
    if (!out) return NULL;
    memcpy(out, text, i);
    size_t o = i;
    while (i < len) {
        size_t cons;
        int tr;
        int l = tk_utf8_char(s + i, len - i, &cons, &tr);
        if (l) {
            memcpy(out + o, s + i, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += cons;
        }
    }
    out[o] = 0;
    *owned = out;
    *out_len = o;
    return out;
}

uint32_t tk_utf8_decode(const unsigned char *s, size_t n, int *clen) {
    unsigned c = s[0];
    if (c < 0x80 || n < 2) {
        *clen = 1;
        return c;
    }
    if (c < 0xE0) {
        *clen = 2;
        return ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    }
    if (c < 0xF0 || n < 4) {
        *clen = 3;
        return ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    }
    *clen = 4;
    return ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

char *tk_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

int tk_utf8_encode(uint32_t cp, char *out) {
    return wb_utf8_encode(cp, out);
}

/* GPT-2 keeps printable Latin-1 bytes as themselves and moves the rest to U+0100.. in byte
 * order, so every byte has a visible, non-space character. */
static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t tk_byte_to_cp(unsigned b) {
    if (byte_is_printable(b)) return b;
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!byte_is_printable(x)) k++;
    return 256 + k;
}

int tk_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1; /* 68 non-printable bytes */
    unsigned k = cp - 256;
    for (unsigned x = 0; x < 256; x++)
        if (!byte_is_printable(x) && k-- == 0) return (int)x;
    return -1;
}

/* ---- GPT-2 regex ------------------------------------------------------------------------- */

/* HF's ByteLevel pattern. Its classes are rewritten to Hugging Face's tables
 * (unicode_classes.h) before compiling, as for every tokenizer.json regex. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

wb_status tk_regex_init(tk_regex *re, wb_err *err) {
    return tk_regex_compile(re, GPT2_PATTERN, "tokenizer", "ByteLevel", err);
}

void tk_regex_free(tk_regex *re) {
    pcre2_code_free(re->code);
    re->code = NULL;
}

wb_status tk_regex_split(const tk_regex *re, const char *s, size_t n, tk_piece_fn fn, void *ud,
                         wb_err *err) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!md) return wb_err_set(err, WB_ERR_NOMEM, "tokenizer: out of memory");
    size_t pos = 0;
    wb_status st = WB_OK;
    while (pos < n) {
        int rc = re->jit ? pcre2_jit_match(re->code, (PCRE2_SPTR)s, n, pos, 0, md, NULL) : -1;
        if (!re->jit || rc < PCRE2_ERROR_NOMATCH) /* JIT stack exhausted: the interpreter copes */
            rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (fn(ud, s + pos, n - pos)) st = WB_ERR_NOMEM;
            break;
        }
        if (rc < 0) {
            st = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT
                     ? wb_err_set(err, WB_ERR_RANGE, "tokenizer: the pre-tokenizer regex hit PCRE2's match limit on this input (%d)", rc)
                     : wb_err_set(err, WB_ERR_FORMAT, "tokenizer: regex match failed (%d)", rc);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b <= a) { /* cannot happen with this pattern; never loop forever anyway */
            b = a + 1;
            while (b < n && ((unsigned char)s[b] & 0xC0) == 0x80) b++;
        }
        if (a > pos && fn(ud, s + pos, a - pos)) {
            st = WB_ERR_NOMEM;
            break;
        }
        if (fn(ud, s + a, b - a)) {
            st = WB_ERR_NOMEM;
            break;
        }
        pos = b;
    }
    pcre2_match_data_free(md);
    if (st == WB_ERR_NOMEM) wb_err_set(err, st, "tokenizer: out of memory");
    return st;
}

/* ---- added tokens -------------------------------------------------------------------------- */

/* Rust's char::is_whitespace (Unicode White_Space), used by HF for lstrip/rstrip. */
static int is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Rust regex's Unicode \w, which HF uses for single_word boundaries: the "rust_w" table probed from
 * HF itself (unicode_classes.c), not PCRE2's older Unicode tables. s is valid UTF-8, n > 0. */
static int is_word_char(const char *s, size_t n) {
    const tk_uclass *w = tk_uclass_find("rust_w", 6);
    int cl;
    return w && tk_uclass_has(w, tk_utf8_decode((const unsigned char *)s, n, &cl));
}

static size_t char_start_before(const char *s, size_t i) {
    do i--;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
    return i;
}

static int trie_longest(const tk_trie *t, const char *s, size_t n, size_t pos, size_t *end) {
    int64_t node = 0;
    int best = -1;
    for (size_t i = pos; i < n; i++) {
        int64_t *nx = tk_u64map_get(&t->edges, ((uint64_t)node << 8) | (unsigned char)s[i]);
        if (!nx) break;
        node = *nx;
        if (t->term[node] >= 0) {
            best = t->term[node];
            *end = i + 1;
        }
    }
    return best;
}

typedef struct split_cb {
    tk_seg_fn fn;
    void *ud;
    const wb_tokenizer *tok;
    const char *raw;  /* the whole input: a piece starting here is the first */
    const char *base; /* the normalized piece pass 2 is working on */
    int first;        /* base starts at offset 0 of the input */
} split_cb;

/* HF AddedVocabulary::find_matches: leftmost-longest matches, each possibly discarded
 * (single_word) or widened (lstrip/rstrip); a discarded match still consumes its bytes, as the
 * Aho-Corasick iterator has already moved past it. */
static int find_matches(const wb_tokenizer *tok, const tk_trie *t, const char *s, size_t n,
                        int (*emit)(void *, const char *, size_t, int32_t),
                        void *ud) {
    size_t start_offset = 0, pos = 0;
    if (!t->empty) {
        while (pos < n) {
            if (!t->first[(unsigned char)s[pos]]) {
                pos++;
                continue;
            }
            size_t stop = 0;
            int k = trie_longest(t, s, n, pos, &stop);
            if (k < 0) {
                pos++;
                continue;
            }
            size_t start = pos;
            pos = stop;
            const tk_added *a = &tok->added[k];
            if (a->single_word) {
                int start_space = 1, stop_space = 1;
                if (start > 0) {
                    size_t c = char_start_before(s, start);
                    start_space = !is_word_char(s + c, start - c);
                }
                if (stop < n) stop_space = !is_word_char(s + stop, n - stop);
                if (!start_space || !stop_space) continue;
            }
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t c = char_start_before(s, ns);
                    int cl;
                    if (!is_white_space(tk_utf8_decode((const unsigned char *)s + c, ns - c, &cl)))
                        break;
                    ns = c;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < n) {
                    int cl;
                    uint32_t c = tk_utf8_decode((const unsigned char *)s + stop, n - stop, &cl);
                    if (!is_white_space(c)) break;
                    stop += (size_t)cl;
                }
            }
            int e;
            if (start_offset < start && (e = emit(ud, s + start_offset, start - start_offset, -1)))
                return e < 0 ? e : -1;
            /* rstrip may run past the next match; HF then emits overlapping pieces, as here */
            if (stop > start && (e = emit(ud, s + start, stop - start, a->id))) return e < 0 ? e : -1;
            start_offset = stop;
        }
    }
    int e;
    if (start_offset < n && (e = emit(ud, s + start_offset, n - start_offset, -1))) return e < 0 ? e : -1;
    return 0;
}

static int split_pass2(void *ud, const char *p, size_t n, int32_t id) {
    split_cb *c = ud;
    return c->fn(c->ud, p, n, id, c->first && p == c->base);
}

/* HF normalizes each piece left between the non-normalized added tokens, then looks for the
 * normalized added tokens in the normalized text. */
static int split_pass1(void *ud, const char *p, size_t n, int32_t id) {
    split_cb *c = ud;
    int first = p == c->raw;
    if (id >= 0) return c->fn(c->ud, p, n, id, first);
    if (!c->tok->n_norms) {
        c->base = p;
        c->first = first;
        return find_matches(c->tok, &c->tok->trie_norm, p, n, split_pass2, c);
    }
    char *norm;
    size_t nl;
    int nr = tk_normalize(c->tok, p, n, &norm, &nl);
    if (nr) return nr; /* TK_ERR_MATCH or TK_ERR_EXPAND say why */
    c->base = norm;
    c->first = first;
    int r = find_matches(c->tok, &c->tok->trie_norm, norm, nl, split_pass2, c);
    free(norm);
    return r;
}

int tk_split_added(const wb_tokenizer *tok, const char *s, size_t n, tk_seg_fn fn, void *ud) {
    split_cb c = {fn, ud, tok, s, NULL, 0};
    return find_matches(tok, &tok->trie_raw, s, n, split_pass1, &c);
}

/* ---- BPE ------------------------------------------------------------------------------------ */

typedef struct sym {
    int32_t id, prev, next;
    int32_t alive;
} sym;

typedef struct hent {
    int32_t rank, pos, new_id;
} hent;

/* Per-call cache of piece -> ids: natural text repeats words constantly. Direct-mapped (a
 * colliding piece overwrites the slot) so a lookup touches one slot; the arenas stop growing at
 * CACHE_MAX_ARENA bytes, after which nothing new is cached. */
#define CACHE_MAX_PIECE 48
#define CACHE_SLOTS 8192
#define CACHE_MAX_ARENA (4u << 20)

typedef struct cache_ent {
    uint64_t h; /* 0 = empty */
    uint32_t off, len;       /* piece bytes in cache_bytes */
    uint32_t ids_off, n_ids; /* in cache_ids */
} cache_ent;

typedef struct enc_ctx {
    const wb_tokenizer *tok;
    int32_t *ids;
    size_t n, cap;
    sym *syms;
    size_t syms_cap;
    hent *heap;
    size_t heap_cap, heap_n;
    char *tmp;
    size_t tmp_cap;
    cache_ent *slots;
    char *cache_bytes;
    size_t cb_n, cb_cap;
    int32_t *cache_ids;
    size_t ci_n, ci_cap;
    wb_err *err;
    wb_status st;
} enc_ctx;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int push_id(enc_ctx *c, int32_t id) {
    if (c->n == c->cap && grow((void **)&c->ids, &c->cap, c->n + 1, sizeof *c->ids)) return -1;
    c->ids[c->n++] = id;
    return 0;
}

static int hless(const hent *a, const hent *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(enc_ctx *c, hent e) {
    if (grow((void **)&c->heap, &c->heap_cap, c->heap_n + 1, sizeof *c->heap)) return -1;
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hless(&e, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = e;
    return 0;
}

static hent heap_pop(enc_ctx *c) {
    hent top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t m = (l + 1 < n && hless(&c->heap[l + 1], &c->heap[l])) ? l + 1 : l;
        if (!hless(&c->heap[m], &last)) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

static int add_sym(enc_ctx *c, size_t *ns, int32_t id) {
    if (grow((void **)&c->syms, &c->syms_cap, *ns + 1, sizeof *c->syms)) return -1;
    c->syms[*ns] = (sym){id, (int32_t)*ns - 1, (int32_t)*ns + 1, 1};
    (*ns)++;
    return 0;
}

/* One symbol of the word as HF's merge_word sees it: a byte-level char (byte mode: the raw byte
 * u[0] mapped through bytes_to_unicode) or one UTF-8 char u[0..ul), with the continuing prefix
 * when not first and the end-of-word suffix when last. */
static size_t sym_string(const wb_tokenizer *tok, const unsigned char *u, size_t ul, int first,
                         int last, char *out) {
    size_t k = 0;
    if (!first && tok->cont_prefix) {
        size_t l = strlen(tok->cont_prefix);
        memcpy(out, tok->cont_prefix, l);
        k = l;
    }
    if (tok->byte_level) {
        k += (size_t)tk_utf8_encode(tk_byte_to_cp(u[0]), out + k);
    } else {
        memcpy(out + k, u, ul);
        k += ul;
    }
    if (last && tok->eow_suffix) {
        size_t l = strlen(tok->eow_suffix);
        memcpy(out + k, tok->eow_suffix, l);
        k += l;
    }
    return k;
}

/* BPE of one pre-token p[0..n): raw bytes for a byte-level tokenizer, else valid UTF-8 whose
 * chars are the initial symbols. Appends ids to c. */
static int bpe_piece(enc_ctx *c, const unsigned char *p, size_t n) {
    const wb_tokenizer *tok = c->tok;
    if (n == 0) return 0;
    if (tok->ignore_merges) {
        int32_t id;
        if (tok->byte_level) {
            if (grow((void **)&c->tmp, &c->tmp_cap, n * 2 + 1, 1)) return -1;
            size_t k = 0;
            for (size_t i = 0; i < n; i++) k += (size_t)tk_utf8_encode(tk_byte_to_cp(p[i]), c->tmp + k);
            id = tk_strmap_get(&tok->model_map, c->tmp, k);
        } else {
            id = tk_strmap_get(&tok->model_map, (const char *)p, n);
        }
        if (id >= 0) return push_id(c, id);
    }
    size_t ns = 0;
    if (tok->byte_level && tok->simple_syms && !tok->byte_fallback && tok->unk_id < 0) {
        for (size_t i = 0; i < n; i++) {
            int32_t id = tok->byte_sym[p[i]];
            if (id >= 0 && add_sym(c, &ns, id)) return -1;
        }
    } else {
        size_t plen = tok->cont_prefix ? strlen(tok->cont_prefix) : 0;
        size_t slen = tok->eow_suffix ? strlen(tok->eow_suffix) : 0;
        if (grow((void **)&c->tmp, &c->tmp_cap, plen + slen + 8, 1)) return -1;
        int32_t unk = -1;
        size_t unk_pending = 0;
        for (size_t i = 0; i < n;) {
            size_t ul = 1;
            if (!tok->byte_level) {
                int cl;
                tk_utf8_decode(p + i, n - i, &cl);
                ul = (size_t)cl;
                if (ul > n - i) ul = n - i;
            }
            size_t k = sym_string(tok, p + i, ul, i == 0, i + ul >= n, c->tmp);
            i += ul;
            int32_t id = tk_strmap_get(&tok->model_map, c->tmp, k);
            if (id >= 0) {
                if (unk_pending && add_sym(c, &ns, unk)) return -1;
                unk_pending = 0;
                if (add_sym(c, &ns, id)) return -1;
                continue;
            }
            if (tok->byte_fallback) {
                int32_t fb[64];
                size_t nf = 0;
                for (size_t j = 0; j < k && j < 64; j++) {
                    char name[8];
                    snprintf(name, sizeof name, "<0x%02X>", (unsigned char)c->tmp[j]);
                    fb[nf] = tk_strmap_get(&tok->model_map, name, strlen(name));
                    if (fb[nf] < 0) break;
                    nf++;
                }
                if (nf == k) {
                    /* HF adds the byte tokens without flushing a pending unk first */
                    for (size_t j = 0; j < nf; j++)
                        if (add_sym(c, &ns, fb[j])) return -1;
                    continue;
                }
            }
            if (tok->unk_id >= 0) {
                if (unk_pending && !tok->fuse_unk && add_sym(c, &ns, unk)) return -1;
                unk = tok->unk_id;
                unk_pending = 1;
            }
        }
        if (unk_pending && add_sym(c, &ns, unk)) return -1;
    }
    if (ns == 0) return 0;
    c->syms[ns - 1].next = -1;
    if (ns > 1) {
        c->heap_n = 0;
        for (size_t i = 0; i + 1 < ns; i++) {
            uint64_t key = ((uint64_t)(uint32_t)c->syms[i].id << 32) | (uint32_t)c->syms[i + 1].id;
            int64_t *v = tk_u64map_get(&tok->merge_map, key);
            if (v && heap_push(c, (hent){(int32_t)(*v >> 32), (int32_t)i, (int32_t)(*v & 0xffffffff)}))
                return -1;
        }
        while (c->heap_n) {
            hent top = heap_pop(c);
            sym *s = &c->syms[top.pos];
            if (!s->alive || s->next < 0) continue;
            sym *r = &c->syms[s->next];
            uint64_t key = ((uint64_t)(uint32_t)s->id << 32) | (uint32_t)r->id;
            int64_t *v = tk_u64map_get(&tok->merge_map, key);
            if (!v || (int32_t)(*v & 0xffffffff) != top.new_id) continue; /* stale entry */
            s->id = top.new_id;
            r->alive = 0;
            s->next = r->next;
            if (r->next >= 0) c->syms[r->next].prev = top.pos;
            if (s->prev >= 0) {
                sym *l = &c->syms[s->prev];
                key = ((uint64_t)(uint32_t)l->id << 32) | (uint32_t)s->id;
                v = tk_u64map_get(&tok->merge_map, key);
                if (v && heap_push(c, (hent){(int32_t)(*v >> 32), s->prev, (int32_t)(*v & 0xffffffff)}))
                    return -1;
            }
            if (s->next >= 0) {
                key = ((uint64_t)(uint32_t)s->id << 32) | (uint32_t)c->syms[s->next].id;
                v = tk_u64map_get(&tok->merge_map, key);
                if (v && heap_push(c, (hent){(int32_t)(*v >> 32), top.pos, (int32_t)(*v & 0xffffffff)}))
                    return -1;
            }
        }
    }
    for (int32_t i = 0; i >= 0; i = c->syms[i].next)
        if (push_id(c, c->syms[i].id)) return -1;
    return 0;
}

static int piece_cb(void *ud, const char *p, size_t n) {
    enc_ctx *c = ud;
    if (n == 0) return 0;
    if (n > CACHE_MAX_PIECE) return bpe_piece(c, (const unsigned char *)p, n);
    if (!c->slots && !(c->slots = calloc(CACHE_SLOTS, sizeof *c->slots))) return -1;
    uint64_t h = tk_hash_bytes(p, n) | 1;
    cache_ent *e = &c->slots[(h >> 7) & (CACHE_SLOTS - 1)];
    if (e->h == h && e->len == n && memcmp(c->cache_bytes + e->off, p, n) == 0) {
        if (!e->n_ids) return 0; /* a piece of bytes the vocab lacks: HF drops them */
        if (grow((void **)&c->ids, &c->cap, c->n + e->n_ids, sizeof *c->ids)) return -1;
        memcpy(c->ids + c->n, c->cache_ids + e->ids_off, e->n_ids * sizeof *c->ids);
        c->n += e->n_ids;
        return 0;
    }
    size_t before = c->n;
    if (bpe_piece(c, (const unsigned char *)p, n)) return -1;
    size_t k = c->n - before;
    if (c->cb_n + n > CACHE_MAX_ARENA || (c->ci_n + k) * sizeof *c->ids > CACHE_MAX_ARENA) return 0;
    if (grow((void **)&c->cache_bytes, &c->cb_cap, c->cb_n + n, 1) ||
        grow((void **)&c->cache_ids, &c->ci_cap, c->ci_n + k, sizeof *c->cache_ids))
        return -1;
    *e = (cache_ent){h, (uint32_t)c->cb_n, (uint32_t)n, (uint32_t)c->ci_n, (uint32_t)k};
    memcpy(c->cache_bytes + c->cb_n, p, n);
    c->cb_n += n;
    if (k) memcpy(c->cache_ids + c->ci_n, c->ids + before, k * sizeof *c->ids);
    c->ci_n += k;
    return 0;
}

static int pre_run(enc_ctx *c, size_t step, const char *p, size_t n, int first);

/* Split / Digits: HF's NormalizedString::split, spans then the delimiter behavior. */
static int pre_split(enc_ctx *c, size_t step, const tk_pre *pr, const char *p, size_t n, int first) {
    tk_span *sp = NULL;
    size_t ns = 0, cap = 0;
    int r = tk_matcher_find(&pr->pat, p, n, &sp, &ns, &cap);
    if (r) {
        free(sp);
        if (r == -2) {
            c->st = wb_err_set(c->err, WB_ERR_FORMAT, "tokenizer: the pre_tokenizer regex hit PCRE2's match limit (or failed) on this input");
        }
        return -1;
    }
    if (pr->invert)
        for (size_t i = 0; i < ns; i++) sp[i].m = !sp[i].m;
    size_t o = 0;
    int prev = 0;
    switch (pr->behavior) {
    case TK_SPLIT_ISOLATED:
        o = ns;
        break;
    case TK_SPLIT_REMOVED:
        for (size_t i = 0; i < ns; i++)
            if (!sp[i].m) sp[o++] = sp[i];
        break;
    case TK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < ns; i++) {
            int m = sp[i].m;
            if (m == prev && o > 0) sp[o - 1].b = sp[i].b;
            else sp[o++] = sp[i];
            prev = m;
        }
        break;
    case TK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < ns; i++) {
            int m = sp[i].m;
            if (m && !prev && o > 0) sp[o - 1].b = sp[i].b;
            else sp[o++] = sp[i];
            prev = m;
        }
        break;
    case TK_SPLIT_MERGED_NEXT: {
        /* HF folds from the right: a match joins the piece after it; kept right-aligned */
        size_t w = ns;
        for (size_t i = ns; i-- > 0;) {
            int m = sp[i].m;
            if (m && !prev && w < ns) sp[w].a = sp[i].a;
            else sp[--w] = sp[i];
            prev = m;
        }
        o = ns - w;
        memmove(sp, sp + w, o * sizeof *sp);
        break;
    }
    }
    r = 0;
    for (size_t i = 0; i < o && !r; i++)
        if (sp[i].b > sp[i].a) r = pre_run(c, step + 1, p + sp[i].a, sp[i].b - sp[i].a, first && sp[i].a == 0);
    free(sp);
    return r;
}

static int pre_metaspace(enc_ctx *c, size_t step, const tk_pre *pr, const char *p, size_t n, int first) {
    size_t rl = (size_t)pr->repl_len, spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += p[i] == ' ';
    char *b = malloc(n + spaces * rl + rl + 1);
    if (!b) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            memcpy(b + k, pr->repl, rl);
            k += rl;
        } else {
            b[k++] = p[i];
        }
    }
    int starts = k >= rl && memcmp(b, pr->repl, rl) == 0;
    if (!starts && (pr->prepend_scheme == TK_PREPEND_ALWAYS || (pr->prepend_scheme == TK_PREPEND_FIRST && first))) {
        memmove(b + rl, b, k);
        memcpy(b, pr->repl, rl);
        k += rl;
    }
    int r;
    if (pr->split) {
        tk_pre sp = *pr;
        sp.behavior = TK_SPLIT_MERGED_NEXT;
        sp.invert = 0;
        r = pre_split(c, step, &sp, b, k, first);
    } else {
        r = pre_run(c, step + 1, b, k, first);
    }
    free(b);
    return r;
}

static int pre_bytelevel(enc_ctx *c, const tk_pre *pr, const char *p, size_t n) {
    const char *s = p;
    char *tmp = NULL;
    if (pr->add_prefix_space && p[0] != ' ') {
        tmp = malloc(n + 1);
        if (!tmp) return -1;
        tmp[0] = ' ';
        memcpy(tmp + 1, p, n);
        s = tmp;
        n++;
    }
    int r = 0;
    if (pr->use_regex) {
        wb_err e = {0};
        wb_status st = tk_regex_split(&c->tok->re, s, n, piece_cb, c, &e);
        if (st != WB_OK) {
            c->st = st;
            if (c->err) *c->err = e;
            r = -1;
        }
    } else {
        r = piece_cb(c, s, n);
    }
    free(tmp);
    return r;
}

/* Run pre-tokenizer `step` on one piece; past the last step the piece goes to the model. */
static int pre_run(enc_ctx *c, size_t step, const char *p, size_t n, int first) {
    if (n == 0) return 0; /* HF drops empty splits */
    if (step == c->tok->n_pres) return piece_cb(c, p, n);
    const tk_pre *pr = &c->tok->pres[step];
    switch (pr->kind) {
    case TK_PRE_SPLIT:
    case TK_PRE_DIGITS:
        return pre_split(c, step, pr, p, n, first);
    case TK_PRE_METASPACE:
        return pre_metaspace(c, step, pr, p, n, first);
    default:
        return pre_bytelevel(c, pr, p, n);
    }
}

static int seg_cb(void *ud, const char *p, size_t n, int32_t id, int first) {
    enc_ctx *c = ud;
    if (n == 0) return 0; /* HF drops empty splits */
    if (id >= 0) return push_id(c, id);
    return pre_run(c, 0, p, n, first);
}

wb_tokenizer_encode_params wb_tokenizer_encode_default_params(void) {
    wb_tokenizer_encode_params p = {.truncation = 1, .padding = 1};
    return p;
}

wb_status wb_tokenizer_encode(const wb_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, size_t *n_ids, wb_err *err) {
    return wb_tokenizer_encode_with(tok, text, len, NULL, ids, n_ids, NULL, err);
}

wb_status wb_tokenizer_encode_with(const wb_tokenizer *tok, const char *text, size_t len,
                                   const wb_tokenizer_encode_params *params, int32_t **ids,
                                   size_t *n_ids, uint8_t **mask, wb_err *err) {
    if (mask) *mask = NULL;
    if (!tok || !ids || !n_ids || (!text && len))
        return wb_err_set(err, WB_ERR_ARG, "wb_tokenizer_encode: tok, ids and n_ids must be non-NULL");
    *ids = NULL;
    *n_ids = 0;
    wb_tokenizer_encode_params dp = wb_tokenizer_encode_default_params();
    if (!params) params = &dp;
    size_t n;
    char *owned;
    const char *s = tk_utf8_lossy(text, len, &n, &owned);
    if (!s) return wb_err_set(err, WB_ERR_NOMEM, "wb_tokenizer_encode: out of memory");
    enc_ctx c = {.tok = tok, .err = err, .st = WB_OK};
    int r = push_id(&c, 0); /* guarantees a non-NULL array even for empty output */
    c.n = 0;
    if (!r) r = tk_split_added(tok, s, n, seg_cb, &c);
    free(owned);
    free(c.syms);
    free(c.heap);
    free(c.tmp);
    free(c.slots);
    free(c.cache_bytes);
    free(c.cache_ids);
    if (r) {
        free(c.ids);
        if (c.st != WB_OK) return c.st;
        if (r == TK_ERR_EXPAND)
            return wb_err_set(err, WB_ERR_RANGE,
                              "wb_tokenizer_encode: the normalizer would turn %zu bytes into more than "
                              "%zu (a Replace normalizer expanding without bound)",
                              len, tk_norm_limit(len));
        if (r == TK_ERR_MATCH)
            return wb_err_set(err, WB_ERR_RANGE,
                              "wb_tokenizer_encode: a normalizer regex hit PCRE2's match limit on this input");
        return wb_err_set(err, WB_ERR_NOMEM, "wb_tokenizer_encode: out of memory");
    }
    size_t nid = c.n;
    wb_status st = tk_post_apply(tok, params->truncation, params->padding, &c.ids, &nid, mask, err);
    if (st != WB_OK) {
        free(c.ids);
        return st;
    }
    *ids = c.ids;
    *n_ids = nid;
    return WB_OK;
}

/* ---- decoding ------------------------------------------------------------------------------ */

/* Strip after Fuse (Llama-2's Strip(" ", 1, 0)) removes up to dec_strip_n leading content chars
 * of the whole output: *left counts what may still be stripped, 0 once other text came out. */
static size_t strip_lead(const wb_tokenizer *tok, const char *b, size_t n, int *left) {
    size_t cut = 0, cl = (size_t)tok->dec_strip_len;
    while (*left > 0 && cut < n) {
        if (cut + cl <= n && memcmp(b + cut, tok->dec_strip, cl) == 0) {
            cut += cl;
            (*left)--;
        } else {
            *left = 0;
        }
    }
    if (cut < n) *left = 0;
    return cut;
}

/* The bytes of ids[i] at stream position i: the first token may decode differently. */
static const char *id_bytes(const wb_tokenizer *tok, int32_t id, int first, char **owned, size_t *len) {
    *owned = NULL;
    if (first && tok->dec_meta_first) {
        if (tk_token_decode(tok, id, 1, owned, len)) return NULL;
        return *owned;
    }
    *len = tok->bytes_len[id];
    return tok->bytes[id];
}

wb_status wb_tokenizer_decode(const wb_tokenizer *tok, const int32_t *ids, size_t n_ids,
                              char **text, size_t *len, wb_err *err) {
    if (!tok || !text || !len || (!ids && n_ids))
        return wb_err_set(err, WB_ERR_ARG, "wb_tokenizer_decode: tok, text and len must be non-NULL");
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_total)
            return wb_err_set(err, WB_ERR_RANGE,
                              "wb_tokenizer_decode: id %d at index %zu is out of range [0, %d)",
                              (int)ids[i], i, (int)tok->n_total);
        total += tok->bytes_len[ids[i]];
    }
    char *out = malloc(total + 1);
    if (!out) return wb_err_set(err, WB_ERR_NOMEM, "wb_tokenizer_decode: out of memory");
    size_t o = 0;
    int left = tok->dec_strip_n;
    for (size_t i = 0; i < n_ids; i++) {
        char *owned;
        size_t bl;
        const char *b = id_bytes(tok, ids[i], i == 0, &owned, &bl);
        if (!b) {
            free(out);
            return wb_err_set(err, WB_ERR_NOMEM, "wb_tokenizer_decode: out of memory");
        }
        size_t cut = left ? strip_lead(tok, b, bl, &left) : 0;
        /* the first-token form is never longer than the usual one */
        memcpy(out + o, b + cut, bl - cut);
        o += bl - cut;
        free(owned);
    }
    out[o] = 0;
    *text = out;
    *len = o;
    return WB_OK;
}

struct wb_detok {
    const wb_tokenizer *tok;
    unsigned char pend[8]; /* an incomplete but so far valid UTF-8 prefix (at most 3 bytes) */
    size_t n_pend;
    char *out;
    size_t out_cap;
    size_t n_pushed;
    int strip_left;
};

wb_status wb_detok_new(const wb_tokenizer *tok, wb_detok **out, wb_err *err) {
    if (!tok || !out) return wb_err_set(err, WB_ERR_ARG, "wb_detok_new: tok and out must be non-NULL");
    wb_detok *d = calloc(1, sizeof *d);
    if (!d) return wb_err_set(err, WB_ERR_NOMEM, "wb_detok_new: out of memory");
    d->tok = tok;
    d->strip_left = tok->dec_strip_n;
    *out = d;
    return WB_OK;
}

void wb_detok_free(wb_detok *d) {
    if (!d) return;
    free(d->out);
    free(d);
}

void wb_detok_reset(wb_detok *d) {
    if (!d) return;
    d->n_pend = 0;
    d->n_pushed = 0;
    d->strip_left = d->tok->dec_strip_n;
}

wb_status wb_detok_push(wb_detok *d, int32_t id, const char **piece, size_t *len, wb_err *err) {
    if (!d || !piece || !len) return wb_err_set(err, WB_ERR_ARG, "wb_detok_push: NULL argument");
    *piece = "";
    *len = 0;
    if (id < 0 || id >= d->tok->n_total)
        return wb_err_set(err, WB_ERR_RANGE, "wb_detok_push: id %d is out of range [0, %d)", (int)id,
                          (int)d->tok->n_total);
    char *owned;
    size_t bl;
    const char *tb = id_bytes(d->tok, id, d->n_pushed == 0, &owned, &bl);
    if (!tb) return wb_err_set(err, WB_ERR_NOMEM, "wb_detok_push: out of memory");
    d->n_pushed++;
    if (d->strip_left) {
        if (d->n_pend) d->strip_left = 0;
        size_t cut = strip_lead(d->tok, tb, bl, &d->strip_left);
        tb += cut;
        bl -= cut;
    }
    size_t n = d->n_pend + bl;
    /* worst case every byte becomes U+FFFD */
    if (grow((void **)&d->out, &d->out_cap, 3 * n + 8 + n, 1)) {
        free(owned);
        return wb_err_set(err, WB_ERR_NOMEM, "wb_detok_push: out of memory");
    }
    /* the input (pending + token bytes) is staged at the end of the buffer */
    unsigned char *in = (unsigned char *)d->out + 3 * n + 8;
    memcpy(in, d->pend, d->n_pend);
    memcpy(in + d->n_pend, tb, bl);
    free(owned);
    size_t i = 0, o = 0;
    d->n_pend = 0;
    while (i < n) {
        size_t cons;
        int tr;
        int l = tk_utf8_char(in + i, n - i, &cons, &tr);
        if (l) {
            memmove(d->out + o, in + i, (size_t)l);
            o += (size_t)l;
            i += (size_t)l;
        } else if (tr) { /* may still complete with the next token */
            memcpy(d->pend, in + i, n - i);
            d->n_pend = n - i;
            break;
        } else {
            memcpy(d->out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += cons;
        }
    }
    *piece = d->out;
    *len = o;
    return WB_OK;
}

void wb_detok_flush(wb_detok *d, const char **piece, size_t *len) {
    if (piece) *piece = "";
    if (len) *len = 0;
    if (!d) return;
    if (d->n_pend && !grow((void **)&d->out, &d->out_cap, 4, 1)) {
        memcpy(d->out, "\xEF\xBF\xBD", 3);
        if (piece) *piece = d->out;
        if (len) *len = 3;
    }
    d->n_pend = 0;
}

/* ---- accessors ----------------------------------------------------------------------------- */

int32_t wb_tokenizer_vocab_size(const wb_tokenizer *tok) { return tok ? tok->n_total : 0; }

const char *wb_tokenizer_token_bytes(const wb_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->n_total) return NULL;
    if (len) *len = tok->bytes_len[id];
    return tok->bytes[id];
}

const char *wb_tokenizer_token_str(const wb_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_total) return NULL;
    return tok->str[id];
}

int32_t wb_tokenizer_id_of_bytes(const wb_tokenizer *tok, const char *bytes, size_t len) {
    if (!tok || (!bytes && len)) return -1;
    return tk_strmap_get(&tok->bytes_map, bytes ? bytes : "", len);
}

int32_t wb_tokenizer_id_of_str(const wb_tokenizer *tok, const char *str) {
    if (!tok || !str) return -1;
    int32_t id = tk_strmap_get(&tok->added_map, str, strlen(str));
    return id >= 0 ? id : tk_strmap_get(&tok->model_map, str, strlen(str));
}

int wb_tokenizer_is_special(const wb_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_total && tok->special[id];
}

int32_t wb_tokenizer_eos_id(const wb_tokenizer *tok) {
    /* GPT-2 and Qwen, then the SentencePiece and Llama-3 names */
    static const char *const names[] = {"<|endoftext|>", "</s>", "<|end_of_text|>"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int32_t id = wb_tokenizer_id_of_str(tok, names[i]);
        if (id >= 0) return id;
    }
    return -1;
}

static void trie_free(tk_trie *t) {
    tk_u64map_free(&t->edges);
    free(t->term);
}

void wb_tokenizer_free(wb_tokenizer *tok) {
    if (!tok) return;
    for (int32_t i = 0; i < tok->n_total; i++) {
        if (tok->str) free(tok->str[i]);
        if (tok->bytes) free(tok->bytes[i]);
    }
    free(tok->str);
    free(tok->str_len);
    free(tok->bytes);
    free(tok->bytes_len);
    free(tok->special);
    tk_strmap_free(&tok->model_map);
    tk_strmap_free(&tok->added_map);
    tk_strmap_free(&tok->bytes_map);
    free(tok->merges);
    tk_u64map_free(&tok->merge_map);
    for (size_t i = 0; i < tok->n_added; i++) free(tok->added[i].content);
    free(tok->added);
    trie_free(&tok->trie_raw);
    trie_free(&tok->trie_norm);
    free(tok->cont_prefix);
    free(tok->eow_suffix);
    free(tok->unk_token);
    tk_regex_free(&tok->re);
    for (size_t i = 0; i < tok->n_norms; i++) {
        free(tok->norms[i].content);
        tk_matcher_free(&tok->norms[i].pat);
    }
    free(tok->norms);
    for (size_t i = 0; i < tok->n_pres; i++) tk_matcher_free(&tok->pres[i].pat);
    free(tok->pres);
    for (size_t i = 0; i < tok->n_decs; i++) {
        free(tok->decs[i].from);
        free(tok->decs[i].to);
    }
    free(tok->decs);
    if (tok->norm_added)
        for (size_t i = 0; i < tok->n_added; i++) free(tok->norm_added[i]);
    free(tok->norm_added);
    free(tok->norm_added_len);
    tk_post_free(tok);
    free(tok->json_truncation);
    free(tok->json_padding);
    free(tok->json_normalizer);
    free(tok->json_pre);
    free(tok->json_post);
    free(tok->json_decoder);
    free(tok);
}

/* ---- derived state ------------------------------------------------------------------------- */

static int trie_add(tk_trie *t, const char *s, size_t n, int32_t idx) {
    if (n == 0) return 0;
    if (grow((void **)&t->term, &t->cap_nodes, t->n_nodes + n + 1, sizeof *t->term)) return -1;
    if (t->n_nodes == 0) t->term[t->n_nodes++] = -1;
    int64_t node = 0;
    for (size_t i = 0; i < n; i++) {
        int ins;
        int64_t *v = tk_u64map_put(&t->edges, ((uint64_t)node << 8) | (unsigned char)s[i],
                                   (int64_t)t->n_nodes, &ins);
        if (!v) return -1;
        if (ins) t->term[t->n_nodes++] = -1;
        node = *v;
    }
    if (t->term[node] < 0) t->term[node] = idx; /* duplicates were removed earlier anyway */
    t->first[(unsigned char)s[0]] = 1;
    t->empty = 0;
    return 0;
}

wb_status tk_finish(wb_tokenizer *tok, const char *name, wb_err *err) {
    int32_t n = tok->n_total;
    if (!tok->pre_parsed && !tok->n_pres) {
        tok->pres = calloc(1, sizeof *tok->pres);
        if (!tok->pres) goto nomem;
        tok->pres[0].kind = TK_PRE_BYTELEVEL;
        tok->pres[0].add_prefix_space = tok->add_prefix_space;
        tok->pres[0].use_regex = tok->use_regex;
        tok->n_pres = 1;
        tok->byte_level = 1;
    }
    tok->bytes = calloc((size_t)n ? (size_t)n : 1, sizeof *tok->bytes);
    tok->bytes_len = calloc((size_t)n ? (size_t)n : 1, sizeof *tok->bytes_len);
    if (!tok->special) tok->special = calloc((size_t)n ? (size_t)n : 1, 1);
    if (!tok->bytes || !tok->bytes_len || !tok->special) goto nomem;
    for (size_t k = 0; k < tok->n_added; k++) {
        tk_added *a = &tok->added[k];
        if (tk_strmap_add(&tok->added_map, a->content, a->len, a->id, NULL) < 0) goto nomem;
        if (a->special) tok->special[a->id] = 1;
    }
    /* HF's decoders (ByteLevel, ByteFallback, Metaspace, ...) token by token; special tokens
     * decode to their content so that e.g. "<|naïve|>" does not come out as broken UTF-8 */
    for (int32_t i = 0; i < n; i++) {
        char *b;
        size_t o;
        if (tk_token_decode(tok, i, 0, &b, &o)) goto nomem;
        tok->bytes[i] = b;
        tok->bytes_len[i] = (uint32_t)o;
    }
    for (int32_t i = 0; i < n; i++)
        if (tk_strmap_add(&tok->bytes_map, tok->bytes[i], tok->bytes_len[i], i, NULL) < 0) goto nomem;
    /* HF looks for normalized added tokens in normalized text, so it normalizes their content */
    if (tok->n_norms && tok->n_added) {
        tok->norm_added = calloc(tok->n_added, sizeof *tok->norm_added);
        tok->norm_added_len = calloc(tok->n_added, sizeof *tok->norm_added_len);
        if (!tok->norm_added || !tok->norm_added_len) goto nomem;
    }
    for (size_t k = 0; k < tok->n_added; k++) {
        tk_added *a = &tok->added[k];
        const char *c = a->content;
        size_t cl = a->len;
        if (a->normalized && tok->norm_added) {
            size_t nl;
            if (tk_normalize(tok, a->content, a->len, &tok->norm_added[k], &nl)) goto nomem;
            tok->norm_added_len[k] = (uint32_t)nl;
            c = tok->norm_added[k];
            cl = nl;
        }
        if (trie_add(a->normalized ? &tok->trie_norm : &tok->trie_raw, c, cl, (int32_t)k)) goto nomem;
    }
    if (tok->trie_raw.n_nodes == 0) tok->trie_raw.empty = 1;
    if (tok->trie_norm.n_nodes == 0) tok->trie_norm.empty = 1;
    tok->simple_syms = !tok->cont_prefix && !tok->eow_suffix;
    for (unsigned b = 0; b < 256; b++) {
        char buf[8];
        int l = tk_utf8_encode(tk_byte_to_cp(b), buf);
        tok->byte_sym[b] = tk_strmap_get(&tok->model_map, buf, (size_t)l);
    }
    if (!tok->re.code) {
        wb_status st = tk_regex_init(&tok->re, err);
        if (st != WB_OK) return st;
    }
    return WB_OK;
nomem:
    return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
}
