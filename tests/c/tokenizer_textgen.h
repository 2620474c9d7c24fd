/* tokenizer_textgen.h - a seeded generator of mixed-script text (English words, numbers,
 * punctuation, contractions, accents, CJK, emoji, whitespace runs, <|endoftext|>) shared by the
 * tokenizer test (training data for the committed vectors tokenizer) and the benchmark.
 * Changing it changes tests/vectors/small_tokenizer.json: regenerate the vectors if you do. */
#ifndef WB_TOKENIZER_TEXTGEN_H
#define WB_TOKENIZER_TEXTGEN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t textgen_next(uint64_t *s) {
    /* splitmix64: tiny, and identical on every platform */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Returns a malloc'd NUL-terminated text of about `size` bytes (never less). */
static char *textgen_mixed(uint64_t seed, size_t size, size_t *out_len) {
    static const char *const words[] = {
        "the", "of", "and", "to", "in", "is", "was", "that", "for", "it", "with", "as", "his",
        "on", "be", "at", "by", "had", "this", "not", "but", "from", "have", "they", "which",
        "one", "you", "were", "her", "all", "she", "there", "would", "their", "we", "him",
        "been", "has", "when", "who", "will", "more", "if", "out", "so", "said", "what", "up",
        "its", "about", "into", "than", "them", "can", "only", "other", "new", "some", "could",
        "time", "these", "two", "may", "then", "do", "first", "any", "my", "now", "such", "like",
        "our", "over", "man", "me", "even", "most", "made", "after", "also", "did", "many",
        "before", "must", "through", "back", "years", "where", "much", "your", "way", "well",
        "down", "should", "because", "each", "just", "those", "people", "tokenizer", "model",
        "training", "inference", "workbench", "language", "matrix", "gradient", "attention",
        "café", "naïve", "über", "façade", "résumé", "Straße", "Ærø", "élan", "mañana",
        "東京", "日本語", "中文", "漢字", "한국어", "русский", "Ελληνικά", "עברית", "العربية",
        "हिन्दी", "ไทย", "😀", "🚀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "e\xcc\x81", "n\xcc\x83",
        "I'm", "you'll", "it's", "we've", "they're", "I'd", "don't", "it’s", "YOU'LL"};
    static const char *const seps[] = {" ", " ", " ", " ", " ", " ", " ", ", ", ". ", "! ",
                                       "? ", "; ", ": ", "\n", "\n\n", "  ", "\t", " - ",
                                       " (", ") ", "\"", "'", " ... ", "\r\n", "   "};
    size_t nw = sizeof words / sizeof *words, nsep = sizeof seps / sizeof *seps;
    size_t cap = size + 256, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return NULL;
    uint64_t s = seed;
    while (n < size) {
        uint64_t r = textgen_next(&s);
        const char *piece;
        char num[32];
        unsigned kind = (unsigned)(r % 100);
        if (kind < 80) {
            piece = words[(r >> 8) % nw];
            if (((r >> 40) & 7) == 0 && n + 64 < cap) { /* capitalised */
                size_t l = strlen(piece);
                memcpy(buf + n, piece, l);
                if (buf[n] >= 'a' && buf[n] <= 'z') buf[n] = (char)(buf[n] - 32);
                n += l;
                piece = "";
            }
        } else if (kind < 88) {
            int l = 0;
            uint64_t v = (r >> 8) % 1000000;
            char tmp[24];
            do tmp[l++] = (char)('0' + v % 10), v /= 10;
            while (v);
            for (int i = 0; i < l; i++) num[i] = tmp[l - 1 - i];
            num[l] = 0;
            piece = num;
        } else if (kind < 99) {
            piece = seps[(r >> 8) % nsep];
        } else {
            piece = "<|endoftext|>";
        }
        size_t l = strlen(piece);
        if (n + l + 8 > cap) break;
        memcpy(buf + n, piece, l);
        n += l;
        const char *sep = seps[(r >> 32) % nsep];
        size_t sl = strlen(sep);
        if (n + sl + 8 > cap) break;
        memcpy(buf + n, sep, sl);
        n += sl;
    }
    buf[n] = 0;
    *out_len = n;
    return buf;
}

#endif
