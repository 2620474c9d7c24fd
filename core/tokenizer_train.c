/* tokenizer_train.c - byte-level BPE training: special tokens split the text and are never
 * merged, GPT-2 pre-tokenization, word counts, merges by weighted pair count with incremental
 * count updates and a lazy max-heap. Tie-break: highest count, then the pair whose (left bytes,
 * right bytes) is smallest bytewise, so the result depends only on the text and the params. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct pairinfo {
    int32_t a, b;
    int64_t count;
    int32_t *where; /* words that contained the pair at some point (may be stale/duplicated) */
    uint32_t n_where, cap_where;
    uint32_t stamp;
} pairinfo;

typedef struct hitem {
    int64_t count;
    int32_t pair;
} hitem;

typedef struct trainer {
    /* words */
    int32_t **syms;
    uint32_t *n_syms;
    int64_t *freq;
    uint32_t *stamp;
    size_t n_words;
    /* tokens */
    char **tb;
    uint32_t *tbl;
    size_t n_tok, cap_tok;
    tk_strmap tok_map; /* token bytes -> id */
    /* pairs */
    tk_u64map pair_map;
    pairinfo *pairs;
    size_t n_pairs, cap_pairs;
    hitem *heap;
    size_t heap_n, heap_cap;
    int32_t *changed;
    size_t n_changed, cap_changed;
    uint32_t cur_stamp;
} trainer;

static int tgrow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

/* true when x should be merged before y */
static int hbefore(const trainer *t, const hitem *x, const hitem *y) {
    if (x->count != y->count) return x->count > y->count;
    const pairinfo *p = &t->pairs[x->pair], *q = &t->pairs[y->pair];
    int c = bytes_cmp(t->tb[p->a], t->tbl[p->a], t->tb[q->a], t->tbl[q->a]);
    if (c) return c < 0;
    return bytes_cmp(t->tb[p->b], t->tbl[p->b], t->tb[q->b], t->tbl[q->b]) < 0;
}

static int hpush(trainer *t, hitem e) {
    if (tgrow((void **)&t->heap, &t->heap_cap, t->heap_n + 1, sizeof *t->heap)) return -1;
    size_t i = t->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hbefore(t, &e, &t->heap[p])) break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = e;
    return 0;
}

static hitem hpop(trainer *t) {
    hitem top = t->heap[0], last = t->heap[--t->heap_n];
    size_t i = 0, n = t->heap_n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t m = (l + 1 < n && hbefore(t, &t->heap[l + 1], &t->heap[l])) ? l + 1 : l;
        if (!hbefore(t, &t->heap[m], &last)) break;
        t->heap[i] = t->heap[m];
        i = m;
    }
    if (n) t->heap[i] = last;
    return top;
}

static int32_t pair_get(trainer *t, int32_t a, int32_t b, int create) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    if (!create) {
        int64_t *v = tk_u64map_get(&t->pair_map, key);
        return v ? (int32_t)*v : -1;
    }
    int ins;
    int64_t *v = tk_u64map_put(&t->pair_map, key, (int64_t)t->n_pairs, &ins);
    if (!v) return -1;
    if (ins) {
        if (tgrow((void **)&t->pairs, &t->cap_pairs, t->n_pairs + 1, sizeof *t->pairs)) return -1;
        t->pairs[t->n_pairs] = (pairinfo){.a = a, .b = b};
        t->n_pairs++;
    }
    return (int32_t)*v;
}

/* Adds delta occurrences of (a,b) seen in word w; increases are remembered for the heap. */
static int pair_add(trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w) {
    int32_t pi = pair_get(t, a, b, delta > 0);
    if (pi < 0) return delta > 0 ? -1 : 0;
    pairinfo *p = &t->pairs[pi];
    p->count += delta;
    if (delta > 0) {
        if (!p->n_where || p->where[p->n_where - 1] != w) {
            size_t cap = p->cap_where;
            if (tgrow((void **)&p->where, &cap, (size_t)p->n_where + 1, sizeof *p->where)) return -1;
            p->cap_where = (uint32_t)cap;
            p->where[p->n_where++] = w;
        }
        if (p->stamp != t->cur_stamp) {
            p->stamp = t->cur_stamp;
            if (tgrow((void **)&t->changed, &t->cap_changed, t->n_changed + 1, sizeof *t->changed))
                return -1;
            t->changed[t->n_changed++] = pi;
        }
    }
    return 0;
}

static int add_token(trainer *t, const char *b, size_t n) {
    if (tgrow((void **)&t->tb, &t->cap_tok, t->n_tok + 1, sizeof *t->tb)) return -1;
    size_t cap = t->cap_tok;
    uint32_t *nl = realloc(t->tbl, cap * sizeof *nl);
    if (!nl) return -1;
    t->tbl = nl;
    char *c = malloc(n + 1);
    if (!c) return -1;
    memcpy(c, b, n);
    c[n] = 0;
    t->tb[t->n_tok] = c;
    t->tbl[t->n_tok] = (uint32_t)n;
    t->n_tok++;
    if (tk_strmap_add(&t->tok_map, c, n, (int32_t)t->n_tok - 1, NULL) < 0) return -1;
    return 0;
}

typedef struct count_ctx {
    tk_strmap words;
    int64_t *counts;
    size_t cap;
} count_ctx;

static int count_piece(void *ud, const char *p, size_t n) {
    count_ctx *c = ud;
    int32_t old;
    int r = tk_strmap_add(&c->words, p, n, (int32_t)c->words.n, &old);
    if (r < 0) return -1;
    if (r == 1) {
        if (tgrow((void **)&c->counts, &c->cap, c->words.n, sizeof *c->counts)) return -1;
        c->counts[c->words.n - 1] = 1;
    } else {
        c->counts[old]++;
    }
    return 0;
}

static void trainer_free(trainer *t) {
    for (size_t i = 0; t->syms && i < t->n_words; i++) free(t->syms[i]); /* syms may have failed */
    free(t->syms);
    free(t->n_syms);
    free(t->freq);
    free(t->stamp);
    for (size_t i = 0; i < t->n_tok; i++) free(t->tb[i]);
    free(t->tb);
    free(t->tbl);
    tk_strmap_free(&t->tok_map);
    tk_u64map_free(&t->pair_map);
    for (size_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].where);
    free(t->pairs);
    free(t->heap);
    free(t->changed);
}

wb_bpe_train_params wb_bpe_train_default_params(void) {
    wb_bpe_train_params p = {0};
    p.vocab_size = 2048;
    p.min_pair_count = 2;
    return p;
}

/* Leftmost-longest special token at or after pos: returns its index, or -1. */
static int next_special(const wb_bpe_train_params *p, const char *s, size_t n, size_t pos,
                        size_t *at) {
    for (size_t i = pos; i < n; i++) {
        int best = -1;
        size_t bl = 0;
        for (int k = 0; k < p->n_special_tokens; k++) {
            size_t l = strlen(p->special_tokens[k]);
            if (l > bl && l <= n - i && memcmp(s + i, p->special_tokens[k], l) == 0) {
                best = k;
                bl = l;
            }
        }
        if (best >= 0) {
            *at = i;
            return best;
        }
    }
    return -1;
}

#define NOMEM()                                                                            \
    do {                                                                                   \
        st = wb_err_set(err, WB_ERR_NOMEM, "wb_bpe_train: out of memory");                  \
        goto done;                                                                         \
    } while (0)

wb_status wb_bpe_train(const char *text, size_t len, const wb_bpe_train_params *params,
                       wb_tokenizer **out, wb_err *err) {
    if (!params || !out || (!text && len))
        return wb_err_set(err, WB_ERR_ARG, "wb_bpe_train: params and out must be non-NULL");
    *out = NULL;
    int ns = params->n_special_tokens;
    if (ns < 0 || (ns > 0 && !params->special_tokens))
        return wb_err_set(err, WB_ERR_ARG, "wb_bpe_train: special_tokens/n_special_tokens mismatch");
    if (params->vocab_size < 256 + ns)
        return wb_err_set(err, WB_ERR_ARG,
                          "wb_bpe_train: vocab_size %d is below 256 byte symbols + %d special tokens",
                          (int)params->vocab_size, ns);
    for (int k = 0; k < ns; k++) {
        const char *sp = params->special_tokens[k];
        if (!sp || !*sp)
            return wb_err_set(err, WB_ERR_ARG, "wb_bpe_train: special_tokens[%d] is empty", k);
        size_t cons;
        int tr, cl;
        for (size_t i = 0, l = strlen(sp); i < l; i += (size_t)cl)
            if (!(cl = tk_utf8_char((const unsigned char *)sp + i, l - i, &cons, &tr)))
                return wb_err_set(err, WB_ERR_ARG, "wb_bpe_train: special_tokens[%d] is not valid UTF-8", k);
        for (int j = 0; j < k; j++)
            if (strcmp(sp, params->special_tokens[j]) == 0)
                return wb_err_set(err, WB_ERR_ARG, "wb_bpe_train: special_tokens[%d] \"%s\" is repeated", k, sp);
    }
    int64_t min_count = params->min_pair_count < 1 ? 1 : params->min_pair_count;
    int32_t target = params->vocab_size - ns; /* ids for bytes + merges */

    wb_status st = WB_OK;
    trainer t = {0};
    count_ctx cc = {0};
    tk_regex re = {0};
    wb_tokenizer *tok = NULL;
    size_t n;
    char *owned;
    const char *s = tk_utf8_lossy(text, len, &n, &owned);
    if (!s) return wb_err_set(err, WB_ERR_NOMEM, "wb_bpe_train: out of memory");
    if ((st = tk_regex_init(&re, err)) != WB_OK) goto done;

    /* 1. words: text between special tokens, GPT-2 pre-tokenized, counted */
    for (size_t pos = 0; pos <= n;) {
        size_t at = n;
        int k = next_special(params, s, n, pos, &at);
        if (k < 0) at = n;
        if (at > pos && (st = tk_regex_split(&re, s + pos, at - pos, count_piece, &cc, err)) != WB_OK)
            goto done;
        if (k < 0) break;
        pos = at + strlen(params->special_tokens[k]);
    }
    t.n_words = cc.words.n;
    t.syms = calloc(t.n_words + 1, sizeof *t.syms);
    t.n_syms = calloc(t.n_words + 1, sizeof *t.n_syms);
    t.freq = calloc(t.n_words + 1, sizeof *t.freq);
    t.stamp = calloc(t.n_words + 1, sizeof *t.stamp);
    if (!t.syms || !t.n_syms || !t.freq || !t.stamp) NOMEM();
    for (size_t i = 0; i < cc.words.cap; i++) {
        if (!cc.words.keys[i]) continue;
        int32_t w = cc.words.vals[i];
        uint32_t l = cc.words.lens[i];
        t.syms[w] = malloc((l ? l : 1) * sizeof **t.syms);
        if (!t.syms[w]) NOMEM();
        for (uint32_t j = 0; j < l; j++) t.syms[w][j] = (unsigned char)cc.words.keys[i][j];
        t.n_syms[w] = l;
        t.freq[w] = cc.counts[w];
    }

    /* 2. byte symbols and initial pair counts */
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (add_token(&t, &c, 1)) NOMEM();
    }
    t.cur_stamp = 1;
    for (size_t w = 0; w < t.n_words; w++)
        for (uint32_t j = 0; j + 1 < t.n_syms[w]; j++)
            if (pair_add(&t, t.syms[w][j], t.syms[w][j + 1], t.freq[w], (int32_t)w)) NOMEM();
    for (size_t i = 0; i < t.n_pairs; i++)
        if (hpush(&t, (hitem){t.pairs[i].count, (int32_t)i})) NOMEM();
    t.n_changed = 0;

    /* 3. merges */
    int32_t (*merges)[2] = NULL;
    size_t n_merges = 0, cap_merges = 0;
    tk_u64map merged = {0}; /* pairs already recorded as merges */
    uint32_t word_stamp = 0;
    while ((int32_t)t.n_tok < target && t.heap_n) {
        if (params->abort_fn && (n_merges & 15) == 0 && params->abort_fn(params->abort_data)) {
            st = wb_err_set(err, WB_ERR_CANCELLED, "wb_bpe_train: cancelled after %zu merges", n_merges);
            break;
        }
        hitem top = hpop(&t);
        pairinfo *p = &t.pairs[top.pair];
        if (top.count != p->count) { /* stale: counts only fall without a fresh push */
            if (p->count > 0 && hpush(&t, (hitem){p->count, top.pair})) { st = WB_ERR_NOMEM; break; }
            continue;
        }
        if (p->count < min_count) break;
        int32_t a = p->a, b = p->b;
        size_t nl = (size_t)t.tbl[a] + t.tbl[b];
        char *nb = malloc(nl);
        if (!nb) { st = WB_ERR_NOMEM; break; }
        memcpy(nb, t.tb[a], t.tbl[a]);
        memcpy(nb + t.tbl[a], t.tb[b], t.tbl[b]);
        /* two different pairs can spell the same bytes: the later merge reuses the id */
        int32_t nid = tk_strmap_get(&t.tok_map, nb, nl);
        if (nid < 0) {
            if (add_token(&t, nb, nl)) { free(nb); st = WB_ERR_NOMEM; break; }
            nid = (int32_t)t.n_tok - 1;
        }
        free(nb);
        int ins;
        if (!tk_u64map_put(&merged, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, nid, &ins)) {
            st = WB_ERR_NOMEM;
            break;
        }
        if (ins) {
            if (tgrow((void **)&merges, &cap_merges, n_merges + 1, sizeof *merges)) { st = WB_ERR_NOMEM; break; }
            merges[n_merges][0] = a;
            merges[n_merges][1] = b;
            n_merges++;
        }
        /* apply to every word that holds the pair, updating neighbour pair counts */
        t.cur_stamp++;
        word_stamp++;
        int32_t *where = p->where;
        uint32_t n_where = p->n_where;
        p->where = NULL;
        p->n_where = p->cap_where = 0;
        int fail = 0;
        for (uint32_t k = 0; k < n_where && !fail; k++) {
            int32_t w = where[k];
            if (t.stamp[w] == word_stamp) continue;
            t.stamp[w] = word_stamp;
            int32_t *sy = t.syms[w];
            uint32_t m = t.n_syms[w], i = 0, j = 0;
            int64_t f = t.freq[w];
            while (i < m && !fail) {
                if (i + 1 < m && sy[i] == a && sy[i + 1] == b) {
                    if (j > 0) fail |= pair_add(&t, sy[j - 1], a, -f, w) | pair_add(&t, sy[j - 1], nid, f, w);
                    if (i + 2 < m) fail |= pair_add(&t, b, sy[i + 2], -f, w) | pair_add(&t, nid, sy[i + 2], f, w);
                    fail |= pair_add(&t, a, b, -f, w);
                    sy[j++] = nid;
                    i += 2;
                } else {
                    sy[j++] = sy[i++];
                }
            }
            t.n_syms[w] = j;
        }
        free(where);
        p = &t.pairs[top.pair]; /* pair_add may have moved the array */
        for (size_t k = 0; k < t.n_changed && !fail; k++)
            if (t.pairs[t.changed[k]].count > 0)
                fail |= hpush(&t, (hitem){t.pairs[t.changed[k]].count, t.changed[k]});
        t.n_changed = 0;
        if (fail) { st = WB_ERR_NOMEM; break; }
    }
    tk_u64map_free(&merged);
    if (st == WB_ERR_NOMEM) {
        free(merges);
        NOMEM();
    }
    if (st != WB_OK) {
        free(merges);
        goto done;
    }

    /* 4. the tokenizer: byte-level strings for learned tokens, specials at the end */
    tok = calloc(1, sizeof *tok);
    if (!tok) { free(merges); NOMEM(); }
    tok->merges = merges ? merges : malloc(sizeof *tok->merges);
    tok->n_merges = n_merges;
    tok->unk_id = -1;
    tok->use_regex = 1;
    tok->trim_offsets = 1;
    int32_t total = (int32_t)t.n_tok + ns;
    tok->n_model = tok->n_total = total;
    tok->str = calloc((size_t)total, sizeof *tok->str);
    tok->str_len = calloc((size_t)total, sizeof *tok->str_len);
    tok->added = calloc((size_t)ns + 1, sizeof *tok->added);
    if (!tok->merges || !tok->str || !tok->str_len || !tok->added) NOMEM();
    for (size_t i = 0; i < t.n_tok; i++) {
        char *sv = malloc((size_t)t.tbl[i] * 2 + 1); /* each byte maps to a 1- or 2-byte char */
        if (!sv) NOMEM();
        size_t o = 0;
        for (uint32_t j = 0; j < t.tbl[i]; j++)
            o += (size_t)tk_utf8_encode(tk_byte_to_cp((unsigned char)t.tb[i][j]), sv + o);
        sv[o] = 0;
        tok->str[i] = sv;
        tok->str_len[i] = (uint32_t)o;
    }
    for (int k = 0; k < ns; k++) {
        int32_t id = (int32_t)t.n_tok + k;
        size_t l = strlen(params->special_tokens[k]);
        if (!(tok->str[id] = strdup(params->special_tokens[k]))) NOMEM();
        tok->str_len[id] = (uint32_t)l;
        tk_added *a = &tok->added[tok->n_added++];
        if (!(a->content = strdup(params->special_tokens[k]))) NOMEM();
        a->len = (uint32_t)l;
        a->id = id;
        a->special = 1;
    }
    for (int32_t i = 0; i < total; i++) {
        int32_t old;
        int r = tk_strmap_add(&tok->model_map, tok->str[i], tok->str_len[i], i, &old);
        if (r < 0) NOMEM();
        if (r == 0) {
            st = wb_err_set(err, WB_ERR_ARG,
                            "wb_bpe_train: special token \"%.60s\" has the same vocab string as token %d",
                            tok->str[i], (int)old);
            goto done;
        }
    }
    for (size_t i = 0; i < n_merges; i++) {
        int32_t a = tok->merges[i][0], b = tok->merges[i][1];
        int64_t *nidp = NULL;
        char *cat = malloc((size_t)tok->str_len[a] + tok->str_len[b] + 1);
        if (!cat) NOMEM();
        memcpy(cat, tok->str[a], tok->str_len[a]);
        memcpy(cat + tok->str_len[a], tok->str[b], tok->str_len[b]);
        int32_t nid = tk_strmap_get(&tok->model_map, cat, (size_t)tok->str_len[a] + tok->str_len[b]);
        free(cat);
        nidp = tk_u64map_put(&tok->merge_map, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, 0, NULL);
        if (!nidp) NOMEM();
        *nidp = ((int64_t)i << 32) | (uint32_t)nid;
    }
    tok->re = re;
    re.code = NULL;
    if ((st = tk_finish(tok, "wb_bpe_train", err)) != WB_OK) goto done;
    *out = tok;
    tok = NULL;
done:
    wb_tokenizer_free(tok);
    tk_regex_free(&re);
    trainer_free(&t);
    tk_strmap_free(&cc.words);
    free(cc.counts);
    free(owned);
    return st;
}
