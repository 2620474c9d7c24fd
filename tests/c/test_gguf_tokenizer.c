/* test_gguf_tokenizer.c - tokenizers through GGUF metadata (core/gguf_tokenizer.h): every
 * tokenizer fixture written with wb_gguf_tokenizer_put, read back with wb_gguf_tokenizer_load and
 * compared on the Hugging Face vectors of tests/vectors/ (ids from the real tokenizers library);
 * the fixtures llama.cpp cannot express are refused with the reason named; hostile metadata. */
#include "check.h"
#include "fixture.h"
#include "gguf.h"
#include "gguf_tokenizer.h"
#include "wb_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)l + 1);
    if (b && fread(b, 1, (size_t)l, f) != (size_t)l) {
        free(b);
        b = NULL;
    }
    if (b) b[l] = 0;
    fclose(f);
    if (n) *n = (size_t)l;
    return b;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
}

static char *unhex(const char *hex, size_t *n) {
    size_t hl = strlen(hex);
    char *b = malloc(hl / 2 + 1);
    for (size_t i = 0; i < hl / 2; i++) b[i] = (char)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    b[hl / 2] = 0;
    *n = hl / 2;
    return b;
}

static char *g_dir;

/* put tok into a fresh GGUF file, open it and load the tokenizer back. */
static wb_status round_trip(const wb_tokenizer *tok, const char *tmpl, wb_tokenizer **back,
                            char **tmpl_back, wb_err *err) {
    wb_gguf_writer *w = NULL;
    wb_gguf *g = NULL;
    *back = NULL;
    wb_status st = wb_gguf_writer_new(&w, err);
    if (!st) st = wb_gguf_set_str(w, "general.architecture", "llama", 5, err);
    if (!st) st = wb_gguf_tokenizer_put(w, tok, tmpl, err);
    char path[600];
    snprintf(path, sizeof path, "%s/t.gguf", g_dir);
    if (!st) st = wb_gguf_write(w, path, err);
    wb_gguf_writer_free(w);
    if (!st) st = wb_gguf_open(path, &g, err);
    if (!st) st = wb_gguf_tokenizer_load(g, back, tmpl_back, err);
    wb_gguf_free(g);
    return st;
}

typedef struct expect {
    const char *file;
    const char *refusal; /* NULL: must round-trip; else a phrase of the error */
} expect;

static const expect k_expect[] = {
    {"tests/vectors/small_tokenizer.json", NULL},
    {"models/tinylm-base/tokenizer.json", NULL},
    {"tests/vectors/family_qwen2_tokenizer.json", NULL},
    {"tests/vectors/family_llama3_tokenizer.json", NULL},
    {"tests/vectors/family_smollm2_tokenizer.json", NULL},
    {"tests/vectors/family_llama2_tokenizer.json", NULL},
    {"tests/vectors/family_tinyllama_tokenizer.json", NULL},
    {"tests/vectors/unicode_single_word_tokenizer.json", NULL},
    /* ByteLevel(add_prefix_space) with ignore_merges: no llama.cpp pre-tokenizer does that */
    {"tests/vectors/fixture_tokenizer.json", "pre_tokenizer with ignore_merges"},
    {"tests/vectors/fixture_noregex_tokenizer.json", "not one of llama.cpp's pre-tokenizers"},
    {"tests/vectors/family_splits_tokenizer.json", "normalizer is neither none nor NFC"},
    {"tests/vectors/family_spm_misc_tokenizer.json", "SentencePiece-style tokenizer needs"},
};
#define N_EXPECT (sizeof k_expect / sizeof k_expect[0])

static const expect *expect_of(const char *file) {
    for (size_t i = 0; i < N_EXPECT; i++)
        if (!strcmp(k_expect[i].file, file)) return &k_expect[i];
    return NULL;
}

/* Every case of a vectors file ({"tokenizers": [{"file", "cases": [{"hex", "ids"}]}]}) through
 * the tokenizer read back from GGUF. Returns the number of cases compared. */
static int check_vectors(const char *vectors) {
    char *js = slurp(vectors, NULL);
    CHECK_MSG(js != NULL, "%s", vectors);
    if (!js) return 0;
    cJSON *root = cJSON_Parse(js);
    free(js);
    cJSON *toks = cJSON_GetObjectItem(root, "tokenizers");
    int compared = 0;
    for (cJSON *t = toks ? toks->child : NULL; t; t = t->next) {
        const char *file = cJSON_GetObjectItem(t, "file")->valuestring;
        const expect *ex = expect_of(file);
        CHECK_MSG(ex != NULL, "fixture %s has no expectation here", file);
        if (!ex) continue;
        wb_err err = {0};
        wb_tokenizer *orig = NULL, *back = NULL;
        CHECK_MSG(wb_tokenizer_load(file, &orig, &err) == WB_OK, "%s", err.msg);
        char *tmpl = NULL;
        wb_status st = round_trip(orig, "{{ messages }}", &back, &tmpl, &err);
        if (ex->refusal) {
            CHECK_MSG(st == WB_ERR_FORMAT, "%s: expected a refusal, got %d", file, (int)st);
            CHECK_ERR_MENTIONS(err.msg, ex->refusal);
        } else {
            CHECK_MSG(st == WB_OK, "%s: %s", file, err.msg);
            CHECK(tmpl && !strcmp(tmpl, "{{ messages }}"));
        }
        if (back) {
            CHECK(wb_tokenizer_vocab_size(back) == wb_tokenizer_vocab_size(orig));
            int bad = 0;
            for (cJSON *c = cJSON_GetObjectItem(t, "cases")->child; c; c = c->next) {
                size_t n;
                char *text = unhex(cJSON_GetObjectItem(c, "hex")->valuestring, &n);
                cJSON *want = cJSON_GetObjectItem(c, "ids");
                int32_t *ids = NULL;
                size_t nid = 0;
                wb_status e = wb_tokenizer_encode(back, text, n, &ids, &nid, &err);
                int same = e == WB_OK && nid == (size_t)cJSON_GetArraySize(want);
                size_t k = 0;
                for (cJSON *w = want->child; same && w; w = w->next, k++) same = ids[k] == w->valueint;
                if (!same && bad++ < 3)
                    fprintf(stderr, "  %s: ids differ from HF on hex %s\n", file,
                            cJSON_GetObjectItem(c, "hex")->valuestring);
                compared++;
                wb_free(ids);
                free(text);
            }
            CHECK_MSG(bad == 0, "%s (%s): %d cases differ", file, vectors, bad);
        }
        free(tmpl);
        wb_tokenizer_free(orig);
        wb_tokenizer_free(back);
    }
    cJSON_Delete(root);
    return compared;
}

static void every_fixture_round_trips_through_gguf_or_is_refused_by_name(void) {
    int n = check_vectors("tests/vectors/tokenizer_vectors.json");
    n += check_vectors("tests/vectors/tokenizer_family_vectors.json");
    n += check_vectors("tests/vectors/unicode_class_vectors.json");
    printf("     %d HF vectors compared through GGUF\n", n);
    CHECK(n > 2000);
}

/* TinyLM's own vectors are {text, ids} pairs. */
static void tinylm_round_trips_with_its_vectors(void) {
    wb_err err = {0};
    wb_tokenizer *orig = NULL, *back = NULL;
    CHECK(wb_tokenizer_load("models/tinylm-base/tokenizer.json", &orig, &err) == WB_OK);
    CHECK_MSG(round_trip(orig, NULL, &back, NULL, &err) == WB_OK, "%s", err.msg);
    char *js = slurp("tests/vectors/tinylm_vectors.json", NULL);
    cJSON *root = cJSON_Parse(js);
    free(js);
    int bad = 0, n = 0;
    for (cJSON *c = root ? root->child : NULL; back && c; c = c->next, n++) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        cJSON *want = cJSON_GetObjectItem(c, "ids");
        int32_t *ids = NULL;
        size_t nid = 0;
        CHECK(wb_tokenizer_encode(back, text, strlen(text), &ids, &nid, &err) == WB_OK);
        int same = nid == (size_t)cJSON_GetArraySize(want);
        size_t k = 0;
        for (cJSON *w = want->child; same && w; w = w->next, k++) same = ids[k] == w->valueint;
        bad += !same;
        wb_free(ids);
    }
    CHECK(n > 300);
    CHECK_MSG(bad == 0, "%d of %d differ", bad, n);
    cJSON_Delete(root);
    wb_tokenizer_free(orig);
    wb_tokenizer_free(back);
}

int main(void) {
    g_dir = fixture_new_dir("ggtok");
    CHECK(g_dir != NULL);
    if (!g_dir) return 1;
    RUN(every_fixture_round_trips_through_gguf_or_is_refused_by_name);
    RUN(tinylm_round_trips_with_its_vectors);
    fixture_rm_dir(g_dir);
    return check_summary();
}
