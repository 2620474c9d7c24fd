/* tokenizer_classes.c - rewrites a pre-tokenizer regex so that its Unicode class escapes mean
 * what they mean for Hugging Face tokenizers. PCRE2 (Unicode 14 on Debian 12) and Oniguruma
 * (as built into HF tokenizers) disagree on about 9,400 code points (U+180E is \s for PCRE2; code
 * points assigned in Unicode 15..16 are in no class for PCRE2), so each class escape is spelled
 * out as the ranges in the probed tables of unicode_classes.c. */
#include "unicode_classes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (b->n + n + 1 > nc) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void put_range(buf *b, uint32_t lo, uint32_t hi) {
    char t[40];
    int k = lo == hi ? snprintf(t, sizeof t, "\\x{%X}", (unsigned)lo)
                     : snprintf(t, sizeof t, "\\x{%X}-\\x{%X}", (unsigned)lo, (unsigned)hi);
    put(b, t, (size_t)k);
}

/* [lo, hi] without the surrogates, which cannot appear in a UTF pattern. */
static void put_gap(buf *b, uint32_t lo, uint32_t hi) {
    if (lo > hi) return;
    if (lo < 0xD800) put_range(b, lo, hi < 0xD7FF ? hi : 0xD7FF);
    if (hi > 0xDFFF) put_range(b, lo > 0xE000 ? lo : 0xE000, hi);
}

/* The class's ranges, or (negated) those of its complement over the Unicode scalar values. */
static void put_ranges(buf *b, const tk_uclass *c, int negated) {
    if (!negated) {
        for (size_t i = 0; i < c->n; i++) put_range(b, c->ranges[i].lo, c->ranges[i].hi);
        return;
    }
    uint32_t next = 0; /* first code point after the last member seen */
    for (size_t i = 0; i < c->n; i++) {
        if (c->ranges[i].lo > next) put_gap(b, next, c->ranges[i].lo - 1);
        next = c->ranges[i].hi + 1;
    }
    if (next <= 0x10FFFF) put_gap(b, next, 0x10FFFF);
}

/* If p[i] starts a class escape with a table, sets *cls, *neg and *len (bytes of the escape). */
static int class_escape(const char *p, size_t n, size_t i, const tk_uclass **cls, int *neg, size_t *len) {
    if (p[i] != '\\' || i + 1 >= n) return 0;
    char e = p[i + 1];
    const char *single = "sSdDwW";
    if (e && strchr(single, e)) {
        char lower = (char)(e | 0x20);
        *cls = tk_uclass_find(&lower, 1);
        *neg = e != lower;
        *len = 2;
        return *cls != NULL;
    }
    if (e != 'p' && e != 'P') return 0;
    *neg = e == 'P';
    if (i + 2 >= n) return 0;
    if (p[i + 2] != '{') { /* \pL */
        *cls = tk_uclass_find(p + i + 2, 1);
        *len = 3;
        return *cls != NULL;
    }
    size_t a = i + 3;
    if (a < n && p[a] == '^') {
        *neg = !*neg;
        a++;
    }
    size_t z = a;
    while (z < n && p[z] != '}') z++;
    if (z >= n) return 0;
    *cls = tk_uclass_find(p + a, z - a);
    *len = z + 1 - i;
    return *cls != NULL;
}

/* Length of the escape starting at p[i] == '\\' that is copied unchanged (\x{..}, \p{..} without
 * a table, \Q is not special-cased). */
static size_t other_escape_len(const char *p, size_t n, size_t i) {
    if (i + 1 >= n) return 1;
    char e = p[i + 1];
    if ((e == 'x' || e == 'p' || e == 'P' || e == 'o' || e == 'N') && i + 2 < n && p[i + 2] == '{') {
        size_t z = i + 3;
        while (z < n && p[z] != '}') z++;
        return z < n ? z + 1 - i : 2;
    }
    return 2;
}

char *tk_pattern_with_hf_classes(const char *p) {
    size_t n = strlen(p);
    buf b = {0};
    put(&b, "", 0);
    for (size_t i = 0; i < n;) {
        const tk_uclass *cls;
        int neg;
        size_t len;
        if (class_escape(p, n, i, &cls, &neg, &len)) {
            put(&b, neg ? "[^" : "[", neg ? 2 : 1);
            put_ranges(&b, cls, 0);
            put(&b, "]", 1);
            i += len;
            continue;
        }
        if (p[i] == '\\') {
            size_t l = other_escape_len(p, n, i);
            put(&b, p + i, l);
            i += l;
            continue;
        }
        if (p[i] != '[') {
            put(&b, p + i, 1);
            i++;
            continue;
        }
        /* a bracket class: copy its other items, collect the class escapes, append their ranges
         * at the end (the class is the union of its items, negated or not) */
        size_t j = i + 1;
        put(&b, "[", 1);
        if (j < n && p[j] == '^') put(&b, p + j++, 1);
        if (j < n && p[j] == ']') put(&b, p + j++, 1); /* a leading ']' is a literal */
        buf tail = {0};
        put(&tail, "", 0);
        int prev_was_class = 0;
        while (j < n && p[j] != ']') {
            if (class_escape(p, n, j, &cls, &neg, &len)) {
                put_ranges(&tail, cls, neg);
                j += len;
                prev_was_class = 1;
                continue;
            }
            if (p[j] == '\\') {
                size_t l = other_escape_len(p, n, j);
                put(&b, p + j, l);
                j += l;
            } else if (p[j] == '[' ) { /* POSIX [:name:] or a nested set: copied up to its ']' */
                size_t z = j + 1;
                while (z < n && p[z] != ']') z++;
                size_t l = z < n ? z + 1 - j : n - j;
                put(&b, p + j, l);
                j += l;
            } else if (p[j] == '-') {
                /* a '-' next to a class escape cannot be a range operator once the escape moves
                 * to the end: make it a literal, as both engines read it there */
                int next_is_class = class_escape(p, n, j + 1, &cls, &neg, &len);
                int at_edge = j + 1 >= n || p[j + 1] == ']';
                put(&b, prev_was_class || next_is_class || at_edge ? "\\-" : "-",
                    prev_was_class || next_is_class || at_edge ? 2 : 1);
                j++;
            } else {
                put(&b, p + j, 1);
                j++;
            }
            prev_was_class = 0;
        }
        put(&b, tail.p ? tail.p : "", tail.n);
        if (tail.oom) b.oom = 1;
        free(tail.p);
        if (j < n) { /* the closing ']' */
            put(&b, "]", 1);
            j++;
        }
        i = j;
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
