/* test_hostile.c - issue 12: hostile inputs to the loaders and compilers end in a clear error
 * (or a correct result), never a crash, hang or unbounded allocation. Each test here failed on
 * the code before the fix it names. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "wb.h"

/* ---- a byte vocabulary: one token per byte value, eos last ------------------------------------ */

static char g_bytes[256][2];
static const char *g_ptrs[257];
static size_t g_lens[257];

static const wb_constraint_vocab *byte_vocab(void) {
    static wb_constraint_vocab v;
    if (!v.n_tokens) {
        for (int b = 0; b < 256; b++) {
            g_bytes[b][0] = (char)b;
            g_ptrs[b] = g_bytes[b];
            g_lens[b] = 1;
        }
        g_ptrs[256] = "<eos>";
        g_lens[256] = 5;
        v.n_tokens = 257;
        v.bytes = g_ptrs;
        v.lens = g_lens;
        v.eos_id = 256;
    }
    return &v;
}

static char *repeat(const char *unit, size_t times) {
    size_t u = strlen(unit);
    char *s = malloc(u * times + 1);
    for (size_t i = 0; i < times; i++) memcpy(s + i * u, unit, u);
    s[u * times] = 0;
    return s;
}

/* ---- item 3: no recursion as deep as the input ------------------------------------------------ */

/* A literal as long as the node limit allows is a concatenation chain that deep: the NFA builder
 * recursed once per character and overflowed the C stack. Now: a clear error (too many DFA
 * states), caught like any other. */
static void a_150k_character_regex_literal_is_an_error_not_a_stack_overflow(void) {
    char *p = repeat("a", 150000);
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_regex_new(byte_vocab(), p, strlen(p), &c, &err);
    CHECK(st != WB_OK);
    CHECK(c == NULL);
    CHECK_ERR_MENTIONS(err.msg, "regex");
    free(p);
}

/* A 20k literal fits the limits: it compiles and matches exactly itself. */
static void a_20k_character_literal_compiles_and_matches(void) {
    char *p = repeat("ab", 10000);
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_constraint_regex_new(byte_vocab(), p, strlen(p), &c, &err) == WB_OK, "%s", err.msg);
    if (c) {
        CHECK(wb_constraint_matches(c, p, strlen(p)));
        CHECK(!wb_constraint_matches(c, p, strlen(p) - 1));
    }
    wb_constraint_free(c);
    free(p);
}

/* 60k alternatives are a left-deep alternation tree 60k levels deep. */
static void sixty_thousand_alternatives_compile(void) {
    char *alts = repeat("x|", 60000);
    alts[strlen(alts) - 1] = 0; /* "x|x|...|x" */
    alts[strlen(alts) - 1] = 'y'; /* "x|...|x|y" */
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_regex_new(byte_vocab(), alts, strlen(alts), &c, &err);
    CHECK_MSG(st == WB_OK, "%s", err.msg);
    if (c) {
        CHECK(wb_constraint_matches(c, "x", 1));
        CHECK(wb_constraint_matches(c, "y", 1));
        CHECK(!wb_constraint_matches(c, "xy", 2));
    }
    wb_constraint_free(c);
    free(alts);
}

/* Stacked quantifiers nest repetition nodes as deep as the pattern is long. */
static void fifty_thousand_stacked_quantifiers_compile(void) {
    char *q = repeat("{1}", 50000);
    size_t n = strlen(q);
    char *p = malloc(n + 2);
    p[0] = 'a';
    memcpy(p + 1, q, n + 1);
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_constraint_regex_new(byte_vocab(), p, n + 1, &c, &err) == WB_OK, "%s", err.msg);
    if (c) {
        CHECK(wb_constraint_matches(c, "a", 1));
        CHECK(!wb_constraint_matches(c, "aa", 2));
    }
    wb_constraint_free(c);
    free(q);
    free(p);
}

static void deeply_nested_regex_groups_are_a_clear_error(void) {
    char *open = repeat("(", 100000), *close = repeat(")", 100000);
    size_t n = strlen(open);
    char *p = malloc(2 * n + 2);
    memcpy(p, open, n);
    p[n] = 'a';
    memcpy(p + n + 1, close, n + 1);
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK(wb_constraint_regex_new(byte_vocab(), p, strlen(p), &c, &err) != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "nested");
    free(open);
    free(close);
    free(p);
}

static void a_100k_character_choice_label_is_an_error_not_a_crash(void) {
    char *label = repeat("a-", 50000);
    const char *choices[] = {label, "short"};
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_choice_new(byte_vocab(), choices, NULL, 2, WB_SPACE_NONE, &c, &err);
    CHECK(st != WB_OK);
    CHECK(err.msg[0] != 0);
    wb_constraint_free(c);
    free(label);
}

static void a_100k_character_schema_const_is_an_error_not_a_crash(void) {
    char *body = repeat("z", 100000);
    size_t n = strlen(body);
    char *schema = malloc(n + 64);
    snprintf(schema, n + 64, "{\"const\": \"%s\"}", body);
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_json_schema_new(byte_vocab(), schema, strlen(schema),
                                                 WB_JSON_WS_COMPACT, &c, &err);
    CHECK(st != WB_OK);
    CHECK(err.msg[0] != 0);
    wb_constraint_free(c);
    free(body);
    free(schema);
}

static void deeply_nested_schemas_are_a_clear_error(void) {
    /* 5000 levels of {"type":"object","properties":{"a": ... }} */
    const char *open = "{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":";
    size_t levels = 5000, on = strlen(open);
    char *s = malloc(levels * (on + 2) + 32), *p = s;
    for (size_t i = 0; i < levels; i++) memcpy(p, open, on), p += on;
    p += sprintf(p, "{\"type\":\"null\"}");
    for (size_t i = 0; i < levels; i++) *p++ = '}', *p++ = '}';
    *p = 0;
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK(wb_constraint_json_schema_new(byte_vocab(), s, strlen(s), WB_JSON_WS_COMPACT, &c,
                                        &err) != WB_OK);
    CHECK(err.msg[0] != 0);
    free(s);
}

int main(void) {
    RUN(a_150k_character_regex_literal_is_an_error_not_a_stack_overflow);
    RUN(a_20k_character_literal_compiles_and_matches);
    RUN(sixty_thousand_alternatives_compile);
    RUN(fifty_thousand_stacked_quantifiers_compile);
    RUN(deeply_nested_regex_groups_are_a_clear_error);
    RUN(a_100k_character_choice_label_is_an_error_not_a_crash);
    RUN(a_100k_character_schema_const_is_an_error_not_a_crash);
    RUN(deeply_nested_schemas_are_a_clear_error);
    return check_summary();
}
