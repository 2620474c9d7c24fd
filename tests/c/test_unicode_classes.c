/* test_unicode_classes.c - the pre-tokenizer regexes use Hugging Face's Unicode classes: the probed
 * tables (core/unicode_classes.c, tests/vectors/gen_unicode_classes.js) are pinned, the pattern
 * rewrite gives PCRE2 exactly those sets (also negated and inside bracket classes), and ids of
 * class-sensitive strings equal Hugging Face's on the family fixtures
 * (tests/vectors/unicode_class_vectors.json). */
#include "check.h"
#include "unicode_classes.h"
#include "wb_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include "fixture.h"
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VECTORS "tests/vectors/unicode_class_vectors.json"

static int in(const char *name, uint32_t cp) {
    const tk_uclass *c = tk_uclass_find(name, strlen(name));
    return c && tk_uclass_has(c, cp);
}

static size_t count(const char *name) {
    const tk_uclass *c = tk_uclass_find(name, strlen(name));
    size_t k = 0;
    for (size_t i = 0; c && i < c->n; i++) k += c->ranges[i].hi - c->ranges[i].lo + 1;
    return k;
}

static void tables_are_pinned(void) {
    /* whitespace: Oniguruma's \s is Unicode White_Space; U+180E left it in Unicode 6.3 */
    CHECK(in("s", 0x20) && in("s", 0x09) && in("s", 0x0D) && in("s", 0x85) && in("s", 0xA0) &&
          in("s", 0x1680) && in("s", 0x2028) && in("s", 0x3000));
    CHECK(!in("s", 0x180E) && !in("s", 0x200B) && !in("s", 0xFEFF) && !in("s", 'a'));
    /* letters, digits and marks assigned in Unicode 15, 15.1 and 16 */
    CHECK(in("L", 0x11F04) && in("Lo", 0x11F04)); /* KAWI LETTER A (15.0) */
    CHECK(in("L", 0x1E4D0) && in("Lo", 0x1E4D0)); /* NAG MUNDARI LETTER O (15.0) */
    CHECK(in("L", 0x2EBF0));                      /* CJK Extension I (15.1) */
    CHECK(in("L", 0x10D4A));                      /* GARAY (16.0) */
    CHECK(in("N", 0x11F50) && in("Nd", 0x11F50) && in("d", 0x11F50)); /* KAWI DIGIT ZERO (15.0) */
    CHECK(in("N", 0x1E4F0) && in("N", 0x1CCF0) && in("N", 0x16D70));   /* 15.0, 16.0, 16.0 */
    CHECK(in("M", 0x11F00) && in("Mn", 0x11F00) && !in("L", 0x11F00)); /* KAWI SIGN CANDRABINDU */
    CHECK(in("M", 0x11F41) && in("Mc", 0x11F41));
    /* old ground still holds */
    CHECK(in("L", 'A') && in("Lu", 'A') && in("Ll", 'a') && !in("L", '1') && in("N", 0xB2) &&
          !in("Nd", 0xB2) && in("N", 0x2070) && in("P", '_') && in("w", '_') && !in("L", 0xD7FF + 1));
    CHECK(tk_uclass_find("Xx", 2) == NULL);
    /* whole-table sizes from the probe of @anush008/tokenizers 0.6.0 */
    CHECK_MSG(count("s") == 25, "s: %zu", count("s"));
    CHECK_MSG(count("L") == 141028, "L: %zu", count("L"));
    CHECK_MSG(count("N") == 1911, "N: %zu", count("N"));
    CHECK_MSG(count("M") == 2501, "M: %zu", count("M"));
    CHECK_MSG(count("Nd") == 760 && count("d") == 760, "Nd: %zu", count("Nd"));
    /* Rust regex's \w (single_word boundaries): Unicode 15 letters, Alphabetic symbols, ZWJ, marks */
    CHECK_MSG(count("rust_w") == 144667, "rust_w: %zu", count("rust_w"));
    CHECK(in("rust_w", 0x31350) && in("rust_w", 0x11F04) && in("rust_w", 0x24B6) && in("rust_w", 0x2160) &&
          in("rust_w", 0x200D) && in("rust_w", 0x0301) && in("rust_w", '_') && in("rust_w", 0x11F50));
    CHECK(!in("rust_w", ' ') && !in("rust_w", 0x180E) && !in("rust_w", 0x1F600) && !in("rust_w", '<'));
    /* tables are sorted, disjoint and avoid surrogates, as the rewrite and the search assume */
    const char *names[] = {"s", "d", "w", "L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc",
                           "Me", "N", "Nd", "Nl", "No", "P", "S", "Z"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const tk_uclass *c = tk_uclass_find(names[k], strlen(names[k]));
        CHECK_MSG(c != NULL, "%s", names[k]);
        for (size_t i = 0; c && i < c->n; i++) {
            CHECK(c->ranges[i].lo <= c->ranges[i].hi && c->ranges[i].hi <= 0x10FFFF);
            CHECK(!(c->ranges[i].lo <= 0xDFFF && c->ranges[i].hi >= 0xD800));
            if (i) CHECK(c->ranges[i].lo > c->ranges[i - 1].hi + 1);
        }
    }
}

static size_t utf8(uint32_t cp, char *o) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Code points where a union of table ranges can change membership (every range edge of every
 * table, each side), plus every 61st scalar value: checking these is checking every code point
 * for sets built from the tables, at a fraction of the time under ASan. */
static uint32_t *probe_points(size_t *np) {
    static uint32_t *pts;
    static size_t n;
    if (pts) return *np = n, pts;
    const char *names[] = {"s", "d", "w", "L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc",
                           "Me", "N", "Nd", "Nl", "No", "P", "S", "Z"};
    static unsigned char mark[0x110000];
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp += 61) mark[cp] = 1;
    mark[0] = mark[0xD7FF] = mark[0xE000] = mark[0x10FFFF] = mark['-'] = mark['z'] = 1;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const tk_uclass *c = tk_uclass_find(names[k], strlen(names[k]));
        for (size_t i = 0; c && i < c->n; i++) {
            uint32_t e[4] = {c->ranges[i].lo - 1, c->ranges[i].lo, c->ranges[i].hi, c->ranges[i].hi + 1};
            for (int j = 0; j < 4; j++)
                if (e[j] <= 0x10FFFF) mark[e[j]] = 1;
        }
    }
    pts = malloc(0x110000 * sizeof *pts);
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++)
        if (mark[cp] && (cp < 0xD800 || cp > 0xDFFF)) pts[n++] = cp;
    return *np = n, pts;
}

/* Does the rewritten `pattern` match a code point alone exactly when want(cp)? */
static void rewrite_matches(const char *pattern, int (*want)(uint32_t)) {
    char *t = tk_pattern_with_hf_classes(pattern);
    CHECK(t != NULL);
    if (!t) return;
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)t, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ec, &eo, NULL);
    CHECK_MSG(re != NULL, "%s does not compile (error %d at %zu)", pattern, ec, (size_t)eo);
    free(t);
    if (!re) return;
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    size_t bad = 0;
    uint32_t first = 0;
    size_t np;
    const uint32_t *pts = probe_points(&np);
    for (size_t k = 0; k < np; k++) {
        uint32_t cp = pts[k];
        char s[4];
        size_t n = utf8(cp, s);
        int got = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL) >= 0;
        if (got != !!want(cp) && bad++ == 0) first = cp;
    }
    CHECK_MSG(bad == 0, "%s: %zu code points differ from the tables, first U+%04X", pattern, bad,
              (unsigned)first);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
}

static int is_s(uint32_t c) { return in("s", c); }
static int not_s(uint32_t c) { return !in("s", c); }
static int is_l(uint32_t c) { return in("L", c); }
static int not_l(uint32_t c) { return !in("L", c); }
static int is_n(uint32_t c) { return in("N", c); }
static int not_s_l_n(uint32_t c) { return !in("s", c) && !in("L", c) && !in("N", c); }
static int not_crlf_l_n(uint32_t c) { return c != '\r' && c != '\n' && !in("L", c) && !in("N", c); }
static int s_or_not_l(uint32_t c) { return in("s", c) || !in("L", c); }
static int l_and_not_lu(uint32_t c) { return !(in("Lu", c) || !in("L", c)); }
static int dash_or_s_or_z(uint32_t c) { return c == '-' || in("s", c) || c == 'z'; }
static int mn(uint32_t c) { return in("Mn", c); }

static void rewrite_gives_the_tables_to_pcre2(void) {
    rewrite_matches("\\s", is_s);
    rewrite_matches("\\S", not_s);
    rewrite_matches("[\\S]", not_s);
    rewrite_matches("[^\\s]", not_s);
    rewrite_matches("[^\\S]", is_s);
    rewrite_matches("\\p{L}", is_l);
    rewrite_matches("\\pL", is_l);
    rewrite_matches("\\P{L}", not_l);
    rewrite_matches("\\p{^L}", not_l);
    rewrite_matches("[^\\P{N}]", is_n);
    rewrite_matches("\\p{Mn}", mn);
    rewrite_matches("[^\\s\\p{L}\\p{N}]", not_s_l_n);
    rewrite_matches("[^\\r\\n\\p{L}\\p{N}]", not_crlf_l_n);
    rewrite_matches("[\\s\\P{L}]", s_or_not_l);
    rewrite_matches("[^\\p{Lu}\\P{L}]", l_and_not_lu);
    rewrite_matches("[\\s-z]", dash_or_s_or_z); /* '-' after a class is a literal */
    /* text around the escapes is kept, including a class with a leading ']' */
    char *t = tk_pattern_with_hf_classes("a\\x{41}[]b]\\p{Xyz}(?i:'s)");
    CHECK(t && strcmp(t, "a\\x{41}[]b]\\p{Xyz}(?i:'s)") == 0);
    free(t);
    /* broken patterns are copied through (PCRE2 then reports them), never read past their end */
    const char *broken[] = {"\\", "[", "[^", "[]", "[\\", "[\\s", "\\p", "\\p{", "\\p{L", "[\\p{L",
                            "\\P{^", "[a-", "[\\s-", "[-\\s", "[[:alpha:", "\\x{", "[\\x{41", "\\pXyz"};
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        char *r = tk_pattern_with_hf_classes(broken[i]);
        CHECK_MSG(r != NULL, "%s", broken[i]);
        free(r);
    }
}

static void ids_equal_hugging_face(void) {
    size_t n;
    char *json = fixture_read_file(VECTORS, &n);
    CHECK_MSG(json != NULL, "cannot read %s", VECTORS);
    if (!json) return;
    cJSON *root = cJSON_ParseWithLength(json, n);
    CHECK(root != NULL);
    int total = 0, bad = 0;
    const cJSON *set;
    cJSON_ArrayForEach(set, cJSON_GetObjectItem(root, "tokenizers")) {
        const char *file = cJSON_GetObjectItem(set, "file")->valuestring;
        wb_tokenizer *tok = NULL;
        wb_err err = {0};
        CHECK_MSG(wb_tokenizer_load(file, &tok, &err) == WB_OK, "%s", err.msg);
        if (!tok) continue;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(set, "cases")) {
            const char *hex = cJSON_GetObjectItem(c, "hex")->valuestring;
            size_t bl, nid = 0;
            char *bytes = fixture_unhex(hex, &bl);
            const cJSON *want = cJSON_GetObjectItem(c, "ids");
            int32_t *ids = NULL;
            int ok = wb_tokenizer_encode(tok, bytes, bl, &ids, &nid, &err) == WB_OK &&
                     nid == (size_t)cJSON_GetArraySize(want);
            for (size_t i = 0; ok && i < nid; i++) ok = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
            total++;
            if (!ok && bad++ < 8) {
                fprintf(stderr, "  %s: hex %s\n    got:", file, hex);
                for (size_t i = 0; i < nid && i < 30; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n    want:");
                for (int i = 0; i < cJSON_GetArraySize(want) && i < 30; i++)
                    fprintf(stderr, " %d", cJSON_GetArrayItem(want, i)->valueint);
                fprintf(stderr, "\n");
            }
            wb_free(ids);
            free(bytes);
        }
        wb_tokenizer_free(tok);
    }
    CHECK_MSG(bad == 0, "%d of %d cases differ from Hugging Face", bad, total);
    CHECK(total >= 60);
    cJSON_Delete(root);
    free(json);
}

int main(void) {
    RUN(tables_are_pinned);
    RUN(rewrite_gives_the_tables_to_pcre2);
    RUN(ids_equal_hugging_face);
    size_t np;
    free(probe_points(&np));
    return check_summary();
}
