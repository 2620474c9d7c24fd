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
    {"tests/vectors/gguf_spm_legacy_tokenizer.json", NULL},
    {"tests/vectors/gguf_spm_first_tokenizer.json", NULL},
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
    n += check_vectors("tests/vectors/gguf_spm_vectors.json");
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

/* ---- SentencePiece GGUFs as llama.cpp's converter writes them: pieces, scores, no merges ---- */

static cJSON *g_spm; /* tests/vectors/gguf_spm_vectors.json */

static int piece_type(const char *p, int id) {
    if (id == 0) return 2;                      /* unknown */
    if (id <= 2) return 3;                      /* control */
    if (!strncmp(p, "<0x", 3) && strlen(p) == 6) return 6; /* byte */
    return 1;
}

/* The metadata llama.cpp's convert_hf_to_gguf.py writes from a Llama-2 tokenizer.model. */
static void put_spm_metadata(wb_gguf_writer *w, int first_scheme) {
    wb_err err = {0};
    cJSON *pieces = cJSON_GetObjectItem(g_spm, "pieces");
    int n = cJSON_GetArraySize(pieces);
    const char **toks = malloc((size_t)n * sizeof *toks);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    int i = 0;
    for (cJSON *p = pieces->child; p; p = p->next, i++) {
        toks[i] = p->child->valuestring;
        scores[i] = (float)p->child->next->valuedouble;
        types[i] = piece_type(toks[i], i);
    }
    CHECK(wb_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5, &err) == WB_OK);
    CHECK(wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", toks, (size_t)n, &err) == WB_OK);
    CHECK(wb_gguf_set_f32_array(w, "tokenizer.ggml.scores", scores, (size_t)n, &err) == WB_OK);
    CHECK(wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", types, (size_t)n, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2, &err) == WB_OK);
    CHECK(wb_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0, &err) == WB_OK);
    CHECK(wb_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1, &err) == WB_OK);
    CHECK(wb_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0, &err) == WB_OK);
    if (first_scheme) CHECK(wb_gguf_set_str(w, "workbench.tokenizer.prepend_scheme", "first", 5, &err) == WB_OK);
    free(toks);
    free(scores);
    free(types);
}

static wb_gguf *open_written(wb_gguf_writer *w, wb_err *err) {
    char path[600];
    snprintf(path, sizeof path, "%s/m.gguf", g_dir);
    wb_gguf *g = NULL;
    CHECK_MSG(wb_gguf_write(w, path, err) == WB_OK, "%s", err->msg);
    CHECK_MSG(wb_gguf_open(path, &g, err) == WB_OK, "%s", err->msg);
    return g;
}

static int compare_cases(const wb_tokenizer *tok, const cJSON *cases, const char *what) {
    int bad = 0;
    wb_err err = {0};
    for (const cJSON *c = cases->child; c; c = c->next) {
        size_t n;
        char *text = unhex(cJSON_GetObjectItem(c, "hex")->valuestring, &n);
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        int32_t *ids = NULL;
        size_t nid = 0;
        int same = wb_tokenizer_encode(tok, text, n, &ids, &nid, &err) == WB_OK &&
                   nid == (size_t)cJSON_GetArraySize(want);
        size_t k = 0;
        for (const cJSON *x = want->child; same && x; x = x->next, k++) same = ids[k] == x->valueint;
        if (!same && bad++ < 3) fprintf(stderr, "  %s: ids differ from HF on hex %s\n", what, cJSON_GetObjectItem(c, "hex")->valuestring);
        wb_free(ids);
        free(text);
    }
    return bad;
}

static void llama_metadata_with_scores_gives_hf_ids(void) {
    for (int first = 0; first < 2; first++) {
        wb_err err = {0};
        wb_gguf_writer *w = NULL;
        CHECK(wb_gguf_writer_new(&w, &err) == WB_OK);
        put_spm_metadata(w, first);
        wb_gguf *g = open_written(w, &err);
        wb_gguf_writer_free(w);
        wb_tokenizer *tok = NULL;
        CHECK_MSG(g && wb_gguf_tokenizer_load(g, &tok, NULL, &err) == WB_OK, "%s", err.msg);
        wb_gguf_tok_specials sp;
        CHECK(g && wb_gguf_tokenizer_specials(g, &sp, &err) == WB_OK);
        CHECK(sp.bos_id == 1 && sp.eos_id == 2 && sp.unk_id == 0 && sp.add_bos == 1 && sp.add_eos == 0);
        const cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(g_spm, "tokenizers"), first);
        if (tok) {
            int bad = compare_cases(tok, cJSON_GetObjectItem(t, "cases"), first ? "first" : "legacy");
            CHECK_MSG(bad == 0, "%s: %d cases differ", first ? "first" : "legacy", bad);
            /* decoding: byte fallback and ▁ back to bytes */
            const char *s = "kalo 日本 😀 <0x41>";
            int32_t *ids = NULL;
            size_t nid = 0;
            char *back = NULL;
            size_t bl = 0;
            CHECK(wb_tokenizer_encode(tok, s, strlen(s), &ids, &nid, &err) == WB_OK);
            CHECK(wb_tokenizer_decode(tok, ids, nid, &back, &bl, &err) == WB_OK);
            CHECK_MSG(back && !strcmp(back, s), "decoded \"%s\"", back ? back : "");
            wb_free(ids);
            wb_free(back);
        }
        wb_tokenizer_free(tok);
        wb_gguf_free(g);
    }
}

/* Writing a converter-shaped SentencePiece tokenizer gives scores from which the same merges
 * follow, so no tokenizer.ggml.merges (llama.cpp goes by the scores too). */
static void spm_tokenizers_are_written_as_scores_without_merges(void) {
    const char *files[] = {"tests/vectors/gguf_spm_legacy_tokenizer.json", "tests/vectors/gguf_spm_first_tokenizer.json"};
    for (int f = 0; f < 2; f++) {
        wb_err err = {0};
        wb_tokenizer *tok = NULL;
        CHECK(wb_tokenizer_load(files[f], &tok, &err) == WB_OK);
        wb_gguf_writer *w = NULL;
        CHECK(wb_gguf_writer_new(&w, &err) == WB_OK);
        CHECK_MSG(wb_gguf_tokenizer_put(w, tok, NULL, &err) == WB_OK, "%s", err.msg);
        wb_gguf *g = open_written(w, &err);
        wb_gguf_writer_free(w);
        CHECK(g && wb_gguf_find(g, "tokenizer.ggml.merges") < 0);
        CHECK(g && wb_gguf_find(g, "tokenizer.ggml.scores") >= 0);
        CHECK(g && wb_gguf_find(g, "workbench.tokenizer.added_flags") < 0);
        CHECK(g && (wb_gguf_find(g, "workbench.tokenizer.prepend_scheme") >= 0) == f);
        const char *s;
        size_t l;
        CHECK(g && wb_gguf_get_str(g, "tokenizer.ggml.model", &s, &l, &err) == WB_OK && l == 5 && !memcmp(s, "llama", 5));
        int64_t ti = g ? wb_gguf_find(g, "tokenizer.ggml.token_type") : -1, v = -1;
        CHECK(ti >= 0 && wb_gguf_arr_int(g, ti, 0, &v, &err) == WB_OK && v == 2);  /* <unk> */
        CHECK(ti >= 0 && wb_gguf_arr_int(g, ti, 1, &v, &err) == WB_OK && v == 3);  /* <s> */
        CHECK(ti >= 0 && wb_gguf_arr_int(g, ti, 3, &v, &err) == WB_OK && v == 6);  /* <0x00> */
        CHECK(ti >= 0 && wb_gguf_arr_int(g, ti, 300, &v, &err) == WB_OK && v == 1);
        int64_t add = 0;
        int b = -1;
        CHECK(g && wb_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, &err) == WB_OK && b == 1);
        CHECK(g && wb_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b, &err) == WB_OK && b == 1);
        CHECK(g && wb_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &add, &err) == WB_OK && add == 1);
        wb_gguf_free(g);
        wb_tokenizer_free(tok);
    }
}

/* Metaspace "always" and "never" (variants of the "first" file) read back as the same Metaspace:
 * ids equal to the tokenizer.json's own on every input of the vectors (a leading space is where
 * Metaspace and Llama-2's Prepend normalizer differ). */
static void metaspace_schemes_round_trip(void) {
    static const char *const schemes[] = {"always", "never"};
    char *js = slurp("tests/vectors/gguf_spm_first_tokenizer.json", NULL);
    CHECK(js != NULL);
    const cJSON *cases = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(g_spm, "tokenizers"), 1), "cases");
    for (int s = 0; js && s < 2; s++) {
        cJSON *root = cJSON_Parse(js);
        cJSON *pre = cJSON_GetObjectItem(root, "pre_tokenizer");
        cJSON_ReplaceItemInObject(pre, "prepend_scheme", cJSON_CreateString(schemes[s]));
        char *text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        wb_err err = {0};
        wb_tokenizer *orig = NULL, *back = NULL;
        CHECK(wb_tokenizer_load_json(text, strlen(text), schemes[s], &orig, &err) == WB_OK);
        free(text);
        CHECK_MSG(orig && round_trip(orig, NULL, &back, NULL, &err) == WB_OK, "%s", err.msg);
        int bad = 0, differs_from_first = 0;
        for (const cJSON *c = cases->child; back && c; c = c->next) {
            size_t n;
            char *in = unhex(cJSON_GetObjectItem(c, "hex")->valuestring, &n);
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            CHECK(wb_tokenizer_encode(orig, in, n, &a, &na, &err) == WB_OK);
            CHECK(wb_tokenizer_encode(back, in, n, &b, &nb, &err) == WB_OK);
            bad += na != nb || (na && memcmp(a, b, na * sizeof *a));
            const cJSON *want = cJSON_GetObjectItem(c, "ids");
            int same = (size_t)cJSON_GetArraySize(want) == na;
            size_t k = 0;
            for (const cJSON *x = want->child; same && x; x = x->next, k++) same = a[k] == x->valueint;
            differs_from_first += !same;
            wb_free(a);
            wb_free(b);
            free(in);
        }
        CHECK_MSG(bad == 0, "%s: %d inputs differ after the round trip", schemes[s], bad);
        CHECK(differs_from_first > 0); /* the variant is really another tokenizer */
        wb_tokenizer_free(orig);
        wb_tokenizer_free(back);
    }
    free(js);
}

/* An embedding with more rows than ids: put_ex pads with "[PAD<i>]" unused tokens, which load
 * back as ids no text produces. */
static void padded_vocabularies_keep_the_ids(void) {
    const char *files[] = {"tests/vectors/family_qwen2_tokenizer.json", "tests/vectors/gguf_spm_legacy_tokenizer.json"};
    const char *vec[] = {"tests/vectors/tokenizer_family_vectors.json", "tests/vectors/gguf_spm_vectors.json"};
    for (int f = 0; f < 2; f++) {
        wb_err err = {0};
        wb_tokenizer *tok = NULL, *back = NULL;
        CHECK(wb_tokenizer_load(files[f], &tok, &err) == WB_OK);
        if (!tok) continue;
        int32_t n = wb_tokenizer_vocab_size(tok);
        wb_gguf_writer *w = NULL;
        CHECK(wb_gguf_writer_new(&w, &err) == WB_OK);
        wb_gguf_tok_specials sp = wb_gguf_tok_specials_auto();
        sp.n_vocab = n - 1;
        CHECK(wb_gguf_tokenizer_put_ex(w, tok, NULL, &sp, &err) == WB_ERR_ARG);
        CHECK_ERR_MENTIONS(err.msg, "n_vocab");
        sp.n_vocab = n + 7;
        CHECK_MSG(wb_gguf_tokenizer_put_ex(w, tok, NULL, &sp, &err) == WB_OK, "%s", err.msg);
        wb_gguf *g = open_written(w, &err);
        wb_gguf_writer_free(w);
        int64_t ti = g ? wb_gguf_find(g, "tokenizer.ggml.token_type") : -1, v = 0;
        CHECK(ti >= 0 && wb_gguf_arr_n(g, ti) == (uint64_t)n + 7);
        CHECK(ti >= 0 && wb_gguf_arr_int(g, ti, (uint64_t)n, &v, &err) == WB_OK && v == 5);
        CHECK_MSG(g && wb_gguf_tokenizer_load(g, &back, NULL, &err) == WB_OK, "%s", err.msg);
        if (back) {
            char name[32];
            snprintf(name, sizeof name, "[PAD%d]", (int)n);
            CHECK(wb_tokenizer_vocab_size(back) == n + 7 && wb_tokenizer_id_of_str(back, name) == n);
            char *js = slurp(vec[f], NULL);
            cJSON *root = js ? cJSON_Parse(js) : NULL;
            free(js);
            for (cJSON *t = cJSON_GetObjectItem(root, "tokenizers")->child; t; t = t->next)
                if (!strcmp(cJSON_GetObjectItem(t, "file")->valuestring, files[f]))
                    CHECK(compare_cases(back, cJSON_GetObjectItem(t, "cases"), files[f]) == 0);
            cJSON_Delete(root);
        }
        wb_tokenizer_free(back);
        wb_tokenizer_free(tok);
        wb_gguf_free(g);
    }
}

/* ---- hostile metadata ---------------------------------------------------------------------- */

typedef void (*meta_fn)(wb_gguf_writer *w);

static const char *const k_small_toks[] = {"a", "b", "ab", "<s>"};

static void base_gpt2(wb_gguf_writer *w, int skip_types) {
    wb_err err = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4, &err);
    wb_gguf_set_str(w, "tokenizer.ggml.pre", "gpt-2", 5, &err);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", k_small_toks, 4, &err);
    if (!skip_types) {
        const int32_t t[4] = {1, 1, 1, 3};
        wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", t, 4, &err);
    }
}

static wb_status load_meta(void (*fill)(wb_gguf_writer *), wb_err *err) {
    wb_gguf_writer *w = NULL;
    wb_gguf_writer_new(&w, err);
    fill(w);
    wb_gguf *g = open_written(w, err);
    wb_gguf_writer_free(w);
    wb_tokenizer *tok = NULL;
    char *tmpl = NULL;
    wb_status st = g ? wb_gguf_tokenizer_load(g, &tok, &tmpl, err) : WB_ERR_IO;
    CHECK(st == WB_OK || (!tok && !tmpl));
    wb_tokenizer_free(tok);
    free(tmpl);
    wb_gguf_free(g);
    return st;
}

static void m_ok(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 0);
    const char *m[] = {"a b"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
    wb_gguf_set_str(w, "tokenizer.chat_template", "{{ x }}", 7, &e);
}
static void m_no_tokens(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4, &e);
}
static void m_bert(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "bert", 4, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", k_small_toks, 4, &e);
}
static void m_short_types(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 1);
    const int32_t t[3] = {1, 1, 1};
    wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", t, 3, &e);
    const char *m[] = {"a b"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
}
static void m_bad_type(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 1);
    const int32_t t[4] = {1, 9, 1, 1};
    wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", t, 4, &e);
    const char *m[] = {"a b"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
}
static void m_types_strings(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 1);
    wb_gguf_set_str_array(w, "tokenizer.ggml.token_type", k_small_toks, 4, &e);
    const char *m[] = {"a b"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
}
static void m_unknown_pre(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4, &e);
    wb_gguf_set_str(w, "tokenizer.ggml.pre", "no-such-pre", 11, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", k_small_toks, 4, &e);
    const char *m[] = {"a b"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
}
static void m_no_merges(wb_gguf_writer *w) { base_gpt2(w, 0); }
static void m_bad_merge(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 0);
    const char *m[] = {"a b", "b zz"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 2, &e);
}
static void m_merge_no_space(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 0);
    const char *m[] = {"ab"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
}
static void m_dup_tokens(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "gpt2", 4, &e);
    const char *t[] = {"a", "b", "a"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", t, 3, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", t, 0, &e);
}
static void m_bos_range(wb_gguf_writer *w) {
    wb_err e = {0};
    m_ok(w);
    wb_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 4, &e);
}
static void m_eos_type(wb_gguf_writer *w) {
    wb_err e = {0};
    m_ok(w);
    wb_gguf_set_str(w, "tokenizer.ggml.eos_token_id", "2", 1, &e);
}
static void m_scores_short(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", k_small_toks, 4, &e);
    const float s[2] = {0, 0};
    wb_gguf_set_f32_array(w, "tokenizer.ggml.scores", s, 2, &e);
}
static void m_scores_nan(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", k_small_toks, 4, &e);
    const float s[4] = {0, NAN, 0, 0};
    wb_gguf_set_f32_array(w, "tokenizer.ggml.scores", s, 4, &e);
}
static void m_bad_utf8(wb_gguf_writer *w) {
    wb_err e = {0};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5, &e);
    const char *t[] = {"a", "\xff\xfe"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", t, 2, &e);
}
static void m_odd_flags(wb_gguf_writer *w) {
    wb_err e = {0};
    m_ok(w);
    const int32_t f[3] = {3, 1, 2};
    wb_gguf_set_i32_array(w, "workbench.tokenizer.added_flags", f, 3, &e);
}
static void m_flags_range(wb_gguf_writer *w) {
    wb_err e = {0};
    m_ok(w);
    const int32_t f[2] = {7, 1};
    wb_gguf_set_i32_array(w, "workbench.tokenizer.added_flags", f, 2, &e);
}
static void m_template_type(wb_gguf_writer *w) {
    wb_err e = {0};
    base_gpt2(w, 0);
    const char *m[] = {"a b"};
    wb_gguf_set_str_array(w, "tokenizer.ggml.merges", m, 1, &e);
    wb_gguf_set_u32(w, "tokenizer.chat_template", 3, &e);
}
static void m_add_bos_no_bos(wb_gguf_writer *w) {
    wb_err e = {0};
    m_ok(w);
    wb_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1, &e);
}
static void m_huge(wb_gguf_writer *w) {
    wb_err e = {0};
    size_t n = ((size_t)1 << 20) + 1;
    const char **t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = "";
    wb_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", t, n, &e);
    free(t);
}

/* Tokens that JSON must escape (the vocabulary is written as JSON text internally). */
static void m_escapes(wb_gguf_writer *w) {
    wb_err e = {0};
    const char *t[] = {"<unk>", "\"", "\\", "\x01", "\t", "\"\\", "\xe2\x96\x81\""};
    const int32_t ty[] = {2, 1, 1, 1, 1, 1, 1};
    const float sc[] = {0, 0, 0, 0, 0, -1, -2};
    wb_gguf_set_str(w, "tokenizer.ggml.model", "llama", 5, &e);
    wb_gguf_set_str_array(w, "tokenizer.ggml.tokens", t, 7, &e);
    wb_gguf_set_i32_array(w, "tokenizer.ggml.token_type", ty, 7, &e);
    wb_gguf_set_f32_array(w, "tokenizer.ggml.scores", sc, 7, &e);
}

static void tokens_that_json_escapes_load_and_encode(void) {
    wb_err err = {0};
    wb_gguf_writer *w = NULL;
    CHECK(wb_gguf_writer_new(&w, &err) == WB_OK);
    m_escapes(w);
    wb_gguf *g = open_written(w, &err);
    wb_gguf_writer_free(w);
    wb_tokenizer *tok = NULL;
    CHECK_MSG(g && wb_gguf_tokenizer_load(g, &tok, NULL, &err) == WB_OK, "%s", err.msg);
    if (tok) {
        CHECK(wb_tokenizer_id_of_str(tok, "\"\\") == 5 && wb_tokenizer_id_of_str(tok, "\x01") == 3);
        int32_t *ids = NULL;
        size_t n = 0;
        /* ▁ (prepended; not a token, no byte pieces: <unk>), "\\ merged by its score, \x01, \t */
        CHECK(wb_tokenizer_encode(tok, "\"\\\x01\t", 4, &ids, &n, &err) == WB_OK);
        CHECK_MSG(n == 4 && ids[0] == 0 && ids[1] == 5 && ids[2] == 3 && ids[3] == 4, "n=%zu", n);
        wb_free(ids);
    }
    wb_tokenizer_free(tok);
    wb_gguf_free(g);
}

static void hostile_metadata_is_refused_naming_the_key(void) {
    static const struct {
        void (*fill)(wb_gguf_writer *);
        wb_status st;
        const char *needle;
    } cases[] = {
        {m_no_tokens, WB_ERR_NOTFOUND, "tokenizer.ggml.tokens"},
        {m_bert, WB_ERR_FORMAT, "tokenizer.ggml.model"},
        {m_short_types, WB_ERR_FORMAT, "tokenizer.ggml.token_type: 3 elements"},
        {m_bad_type, WB_ERR_FORMAT, "tokenizer.ggml.token_type[1] = 9"},
        {m_types_strings, WB_ERR_FORMAT, "tokenizer.ggml.token_type: expected an array of integers"},
        {m_unknown_pre, WB_ERR_FORMAT, "tokenizer.ggml.pre: pre-tokenizer \"no-such-pre\""},
        {m_no_merges, WB_ERR_NOTFOUND, "tokenizer.ggml.merges"},
        {m_bad_merge, WB_ERR_FORMAT, "tokenizer.ggml.merges[1]"},
        {m_merge_no_space, WB_ERR_FORMAT, "tokenizer.ggml.merges[0]"},
        {m_dup_tokens, WB_ERR_FORMAT, "tokenizer.ggml.tokens[2] and [0]"},
        {m_bos_range, WB_ERR_FORMAT, "tokenizer.ggml.bos_token_id: token id 4"},
        {m_eos_type, WB_ERR_FORMAT, "tokenizer.ggml.eos_token_id"},
        {m_scores_short, WB_ERR_FORMAT, "tokenizer.ggml.scores: 2 elements"},
        {m_scores_nan, WB_ERR_FORMAT, "tokenizer.ggml.scores[1]"},
        {m_bad_utf8, WB_ERR_FORMAT, "tokenizer.ggml.tokens[1] is not valid UTF-8"},
        {m_odd_flags, WB_ERR_FORMAT, "workbench.tokenizer.added_flags"},
        {m_flags_range, WB_ERR_FORMAT, "workbench.tokenizer.added_flags[0]"},
        {m_template_type, WB_ERR_FORMAT, "tokenizer.chat_template"},
        {m_add_bos_no_bos, WB_ERR_FORMAT, "tokenizer.ggml.add_bos_token"},
        {m_huge, WB_ERR_FORMAT, "tokenizer.ggml.tokens: 1048577 elements"},
    };
    wb_err err = {0};
    CHECK_MSG(load_meta(m_ok, &err) == WB_OK, "%s", err.msg);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&err, 0, sizeof err);
        wb_status st = load_meta(cases[i].fill, &err);
        CHECK_MSG(st == cases[i].st, "case %zu: status %d (%s)", i, (int)st, err.msg);
        CHECK_ERR_MENTIONS(err.msg, cases[i].needle);
        CHECK_ERR_MENTIONS(err.msg, "m.gguf");
    }
}

int main(void) {
    g_dir = fixture_new_dir("ggtok");
    CHECK(g_dir != NULL);
    if (!g_dir) return 1;
    RUN(every_fixture_round_trips_through_gguf_or_is_refused_by_name);
    RUN(tinylm_round_trips_with_its_vectors);
    char *js = slurp("tests/vectors/gguf_spm_vectors.json", NULL);
    g_spm = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(g_spm != NULL);
    if (g_spm) {
        RUN(llama_metadata_with_scores_gives_hf_ids);
        RUN(spm_tokenizers_are_written_as_scores_without_merges);
        RUN(metaspace_schemes_round_trip);
        RUN(padded_vocabularies_keep_the_ids);
    }
    cJSON_Delete(g_spm);
    RUN(tokens_that_json_escapes_load_and_encode);
    RUN(hostile_metadata_is_refused_naming_the_key);
    fixture_rm_dir(g_dir);
    return check_summary();
}
