/* test_tokenizer.c - BPE tokenizer: Hugging Face vectors, round trips, special tokens, streaming
 * decoder, training, save/load and malformed tokenizer.json.
 *
 *   test_tokenizer                         run the tests (from the source root)
 *   test_tokenizer --gen-small PATH        write the vectors tokenizer (see tests/vectors/) */
#include "check.h"
#include "tokenizer_textgen.h"
#include "wb_tokenizer.h"

#include <cjson/cJSON.h>
#include "fixture.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL_TOKENIZER "tests/vectors/small_tokenizer.json"
#define FIXTURE_TOKENIZER "tests/vectors/fixture_tokenizer.json"
#define VECTORS "tests/vectors/tokenizer_vectors.json"

static const char *const EOT[] = {"<|endoftext|>"};

/* The vectors tokenizer: 300 KB of generated text, 600 ids, <|endoftext|> last. */
static wb_status train_small(wb_tokenizer **out, wb_err *err) {
    size_t n;
    char *text = textgen_mixed(42, 300000, &n);
    wb_bpe_train_params p = wb_bpe_train_default_params();
    p.vocab_size = 600;
    p.special_tokens = EOT;
    p.n_special_tokens = 1;
    wb_status st = wb_bpe_train(text, n, &p, out, err);
    free(text);
    return st;
}

static void vectors_match_hugging_face(void) {
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
            const cJSON *want = cJSON_GetObjectItem(c, "ids");
            size_t bl;
            char *bytes = fixture_unhex(hex, &bl);
            int32_t *ids = NULL;
            size_t nid = 0;
            int ok = wb_tokenizer_encode(tok, bytes, bl, &ids, &nid, &err) == WB_OK &&
                     nid == (size_t)cJSON_GetArraySize(want);
            for (size_t i = 0; ok && i < nid; i++)
                ok = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
            total++;
            if (!ok && bad++ < 5) {
                fprintf(stderr, "  %s: mismatch for hex %.80s\n    got:", file, hex);
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
    CHECK_MSG(bad == 0, "%d of %d vectors differ from Hugging Face", bad, total);
    CHECK(total > 300);
    cJSON_Delete(root);
    free(json);
}

static void committed_small_tokenizer_is_reproduced_by_training(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK_MSG(train_small(&tok, &err) == WB_OK, "%s", err.msg);
    char path[] = "/tmp/wb_tok_small_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(wb_tokenizer_save(tok, path, &err) == WB_OK);
    size_t a, b;
    char *x = fixture_read_file(path, &a), *y = fixture_read_file(SMALL_TOKENIZER, &b);
    CHECK_MSG(x && y && a == b && memcmp(x, y, a) == 0,
              "training no longer reproduces %s byte for byte", SMALL_TOKENIZER);
    free(x);
    free(y);
    remove(path);
    wb_tokenizer_free(tok);
}

static void training_is_deterministic_with_exact_vocab_size(void) {
    size_t n;
    char *text = textgen_mixed(7, 200000, &n);
    wb_bpe_train_params p = wb_bpe_train_default_params();
    const char *const sp[] = {"<|endoftext|>", "<|pad|>"};
    p.vocab_size = 1000;
    p.special_tokens = sp;
    p.n_special_tokens = 2;
    wb_tokenizer *t1 = NULL, *t2 = NULL;
    wb_err err = {0};
    CHECK(wb_bpe_train(text, n, &p, &t1, &err) == WB_OK);
    CHECK(wb_bpe_train(text, n, &p, &t2, &err) == WB_OK);
    if (!t1 || !t2) goto out;
    CHECK(wb_tokenizer_vocab_size(t1) == 1000);
    CHECK(wb_tokenizer_eos_id(t1) == 998);
    CHECK(wb_tokenizer_id_of_str(t1, "<|pad|>") == 999);
    CHECK(wb_tokenizer_is_special(t1, 999) && !wb_tokenizer_is_special(t1, 5));
    for (int32_t i = 0; i < 1000; i++) {
        size_t l1, l2;
        const char *b1 = wb_tokenizer_token_bytes(t1, i, &l1), *b2 = wb_tokenizer_token_bytes(t2, i, &l2);
        CHECK(l1 == l2 && memcmp(b1, b2, l1) == 0);
    }
    /* specials are never merged with their neighbours */
    int32_t *ids = NULL;
    size_t nid = 0;
    CHECK(wb_tokenizer_encode(t1, "the<|endoftext|>the", 19, &ids, &nid, &err) == WB_OK);
    CHECK(nid == 3 && ids[1] == 998 && ids[0] == ids[2]);
    wb_free(ids);
    /* 200 KB trains (its speed is measured in bench/, not asserted here) */
    wb_tokenizer *t3 = NULL;
    CHECK(wb_bpe_train(text, n, &p, &t3, &err) == WB_OK);
    wb_tokenizer_free(t3);
out:
    wb_tokenizer_free(t1);
    wb_tokenizer_free(t2);
    free(text);
}

static void training_rejects_bad_params(void) {
    wb_bpe_train_params p = wb_bpe_train_default_params();
    wb_tokenizer *t = NULL;
    wb_err err = {0};
    p.vocab_size = 200;
    CHECK(wb_bpe_train("abc", 3, &p, &t, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "vocab_size");
    const char *const dup[] = {"<a>", "<a>"};
    p.vocab_size = 300;
    p.special_tokens = dup;
    p.n_special_tokens = 2;
    CHECK(wb_bpe_train("abc", 3, &p, &t, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "special_tokens");
    CHECK(t == NULL);
}

static void round_trip_valid_utf8(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(SMALL_TOKENIZER, &tok, &err) == WB_OK);
    if (!tok) return;
    const char *texts[] = {"", " ", "hello world", "  \n\n\t trailing   ", "I'm here, you'LL see",
                           "数字 12345 and 東京 😀👨‍👩‍👧", "e\xcc\x81\xcc\x81 العربية",
                           "<|endoftext|>x<|endoftext|>", "\xef\xbf\xbd"};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        int32_t *ids = NULL;
        size_t n = 0, l = 0;
        char *back = NULL;
        CHECK(wb_tokenizer_encode(tok, texts[k], strlen(texts[k]), &ids, &n, &err) == WB_OK);
        CHECK(ids != NULL);
        CHECK(wb_tokenizer_decode(tok, ids, n, &back, &l, &err) == WB_OK);
        CHECK_MSG(l == strlen(texts[k]) && memcmp(back, texts[k], l) == 0, "case %zu", k);
        wb_free(ids);
        wb_free(back);
    }
    /* generated text round-trips too */
    size_t n;
    char *text = textgen_mixed(99, 50000, &n);
    int32_t *ids = NULL;
    size_t nid = 0, l = 0;
    char *back = NULL;
    CHECK(wb_tokenizer_encode(tok, text, n, &ids, &nid, &err) == WB_OK);
    CHECK(wb_tokenizer_decode(tok, ids, nid, &back, &l, &err) == WB_OK);
    CHECK(l == n && memcmp(back, text, n) == 0);
    wb_free(ids);
    wb_free(back);
    free(text);
    wb_tokenizer_free(tok);
}

static void invalid_utf8_encodes_as_lossy_replacement(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(SMALL_TOKENIZER, &tok, &err) == WB_OK);
    if (!tok) return;
    /* maximal subparts: E2 82 is one U+FFFD, C0 is one, F0 9F 98 (truncated) one, ED A0 two */
    const char bad[] = "a\xe2\x82" "b\xc0\xff" "c\xed\xa0" "d\xf0\x9f\x98";
    const char good[] = "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd"
                        "d\xef\xbf\xbd";
    int32_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK(wb_tokenizer_encode(tok, bad, sizeof bad - 1, &x, &nx, &err) == WB_OK);
    CHECK(wb_tokenizer_encode(tok, good, sizeof good - 1, &y, &ny, &err) == WB_OK);
    CHECK(nx == ny && nx > 0 && memcmp(x, y, nx * sizeof *x) == 0);
    wb_free(x);
    wb_free(y);
    wb_tokenizer_free(tok);
}

static void special_tokens_and_accessors(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(SMALL_TOKENIZER, &tok, &err) == WB_OK);
    if (!tok) return;
    int32_t eos = wb_tokenizer_eos_id(tok);
    CHECK(eos == 599 && wb_tokenizer_vocab_size(tok) == 600);
    CHECK(wb_tokenizer_is_special(tok, eos));
    size_t l;
    const char *b = wb_tokenizer_token_bytes(tok, eos, &l);
    CHECK(l == 13 && memcmp(b, "<|endoftext|>", 13) == 0);
    CHECK(wb_tokenizer_token_bytes(tok, 600, &l) == NULL && wb_tokenizer_token_str(tok, -1) == NULL);
    int32_t sp = wb_tokenizer_id_of_bytes(tok, " ", 1);
    CHECK(sp >= 0 && strcmp(wb_tokenizer_token_str(tok, sp), "\xc4\xa0") == 0); /* "Ġ" */
    CHECK(wb_tokenizer_id_of_str(tok, "\xc4\xa0") == sp);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(wb_tokenizer_encode(tok, "<|endoftext|><|endoftext|>", 26, &ids, &n, &err) == WB_OK);
    CHECK(n == 2 && ids[0] == eos && ids[1] == eos);
    wb_free(ids);
    char *text = NULL;
    int32_t badid[] = {5, 600};
    CHECK(wb_tokenizer_decode(tok, badid, 2, &text, &l, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "600");
    CHECK_ERR_MENTIONS(err.msg, "index 1");
    wb_tokenizer_free(tok);
    wb_tokenizer_free(NULL);
}

static void added_tokens_decode_like_hugging_face(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(FIXTURE_TOKENIZER, &tok, &err) == WB_OK);
    if (!tok) return;
    /* "Ġthe" is an added token that is also in the vocab: it keeps the vocab id and decodes
     * through the byte alphabet; specials decode to their content */
    int32_t the = wb_tokenizer_id_of_str(tok, "\xc4\xa0the");
    int32_t mask = wb_tokenizer_id_of_str(tok, "[MASK]");
    CHECK(the >= 0 && the < 289 && mask == 290 && wb_tokenizer_is_special(tok, mask));
    CHECK(!wb_tokenizer_is_special(tok, the));
    int32_t ids[] = {the, mask};
    char *text = NULL;
    size_t l = 0;
    CHECK(wb_tokenizer_decode(tok, ids, 2, &text, &l, &err) == WB_OK);
    CHECK(l == 10 && memcmp(text, " the[MASK]", 10) == 0);
    wb_free(text);
    /* lstrip/rstrip swallow the spaces around [MASK]; add_prefix_space adds one to each piece */
    int32_t *out = NULL;
    size_t n = 0;
    CHECK(wb_tokenizer_encode(tok, "x   [MASK]   y", 14, &out, &n, &err) == WB_OK);
    CHECK(wb_tokenizer_decode(tok, out, n, &text, &l, &err) == WB_OK);
    CHECK(l == 10 && memcmp(text, " x[MASK] y", 10) == 0);
    wb_free(text);
    wb_free(out);
    wb_tokenizer_free(tok);
}

static void streaming_decoder_releases_whole_chars(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(SMALL_TOKENIZER, &tok, &err) == WB_OK);
    if (!tok) return;
    wb_detok *d = NULL;
    CHECK(wb_detok_new(tok, &d, &err) == WB_OK);
    /* "é😀" fed one byte token at a time */
    const unsigned char in[] = {0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80};
    char got[64];
    size_t gl = 0;
    for (size_t i = 0; i < sizeof in; i++) {
        char c = (char)in[i];
        int32_t id = wb_tokenizer_id_of_bytes(tok, &c, 1);
        const char *p;
        size_t l;
        CHECK(wb_detok_push(d, id, &p, &l, &err) == WB_OK);
        if (i == 0 || i == 2 || i == 3 || i == 4) CHECK(l == 0);
        memcpy(got + gl, p, l);
        gl += l;
    }
    CHECK(gl == 6 && memcmp(got, in, 6) == 0);
    /* an invalid continuation releases U+FFFD at once, a dangling lead byte only at flush */
    const unsigned char bad[] = {0xe2, 0x41, 0xe2, 0x82};
    gl = 0;
    for (size_t i = 0; i < sizeof bad; i++) {
        char c = (char)bad[i];
        const char *p;
        size_t l;
        CHECK(wb_detok_push(d, wb_tokenizer_id_of_bytes(tok, &c, 1), &p, &l, &err) == WB_OK);
        memcpy(got + gl, p, l);
        gl += l;
    }
    CHECK(gl == 4 && memcmp(got, "\xef\xbf\xbd" "A", 4) == 0);
    const char *p;
    size_t l;
    wb_detok_flush(d, &p, &l);
    CHECK(l == 3 && memcmp(p, "\xef\xbf\xbd", 3) == 0);
    wb_detok_flush(d, &p, &l);
    CHECK(l == 0);
    CHECK(wb_detok_push(d, 100000, &p, &l, &err) == WB_ERR_RANGE);
    wb_detok_free(d);
    wb_detok_free(NULL);
    wb_tokenizer_free(tok);
}

static void save_load_round_trip(void) {
    wb_tokenizer *a = NULL, *b = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(FIXTURE_TOKENIZER, &a, &err) == WB_OK);
    if (!a) return;
    char path[] = "/tmp/wb_tok_save_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_MSG(wb_tokenizer_save(a, path, &err) == WB_OK, "%s", err.msg);
    CHECK_MSG(wb_tokenizer_load(path, &b, &err) == WB_OK, "%s", err.msg);
    if (b) {
        CHECK(wb_tokenizer_vocab_size(a) == wb_tokenizer_vocab_size(b));
        for (int32_t i = 0; i < wb_tokenizer_vocab_size(a); i++) {
            CHECK(strcmp(wb_tokenizer_token_str(a, i), wb_tokenizer_token_str(b, i)) == 0);
            CHECK(wb_tokenizer_is_special(a, i) == wb_tokenizer_is_special(b, i));
        }
        const char *t = " hello [MASK]  there the<|endoftext|>thinking 123 héllo  ";
        int32_t *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        CHECK(wb_tokenizer_encode(a, t, strlen(t), &x, &nx, &err) == WB_OK);
        CHECK(wb_tokenizer_encode(b, t, strlen(t), &y, &ny, &err) == WB_OK);
        CHECK(nx == ny && memcmp(x, y, nx * sizeof *x) == 0);
        wb_free(x);
        wb_free(y);
    }
    CHECK(wb_tokenizer_save(a, "/nonexistent-dir/x.json", &err) == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent-dir/x.json");
    remove(path);
    wb_tokenizer_free(a);
    wb_tokenizer_free(b);
}

static void bytes_missing_from_vocab_are_dropped(void) {
    /* without unk_token HF silently drops symbols the vocab lacks (here every byte but a, b) */
    const char *j = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},"
                    "\"merges\":[\"a b\"]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
                    "\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"special\":true}]}";
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_tokenizer_load_json(j, strlen(j), "tiny", &tok, &err) == WB_OK, "%s", err.msg);
    if (!tok) return;
    CHECK(wb_tokenizer_vocab_size(tok) == 4);
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(wb_tokenizer_encode(tok, "ab ab<x>  ;  ;", 14, &ids, &n, &err) == WB_OK);
    CHECK(n == 3 && ids[0] == 2 && ids[1] == 2 && ids[2] == 3);
    wb_free(ids);
    wb_tokenizer_free(tok);
}

static void long_word_does_not_hang(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK(wb_tokenizer_load(SMALL_TOKENIZER, &tok, &err) == WB_OK);
    if (!tok) return;
    size_t n = 100000;
    char *s = malloc(n);
    int32_t *ids = NULL;
    size_t nid = 0;
    const char fill[] = {'a', ' ', '\n', '1', '!'};
    for (size_t k = 0; k < sizeof fill; k++) {
        memset(s, fill[k], n);
        /* a quadratic path would run into ctest's timeout; no wall-clock check (bench/) */
        CHECK(wb_tokenizer_encode(tok, s, n, &ids, &nid, &err) == WB_OK);
        CHECK(nid > 0 && nid <= n);
        wb_free(ids);
    }
    free(s);
    wb_tokenizer_free(tok);
}

/* Replace the first occurrence of `from` in the fixture with `to` and load it. */
static wb_status load_patched(const char *base, const char *from, const char *to, wb_err *err) {
    const char *at = strstr(base, from);
    if (!at) {
        fprintf(stderr, "  patch target \"%s\" not found\n", from);
        return WB_OK;
    }
    size_t bl = strlen(base), fl = strlen(from), tl = strlen(to);
    char *j = malloc(bl - fl + tl + 1);
    memcpy(j, base, (size_t)(at - base));
    memcpy(j + (at - base), to, tl);
    memcpy(j + (at - base) + tl, at + fl, bl - (size_t)(at - base) - fl + 1);
    wb_tokenizer *t = NULL;
    wb_status st = wb_tokenizer_load_json(j, strlen(j), "patched.json", &t, err);
    wb_tokenizer_free(t);
    free(j);
    return st;
}

static void malformed_files_name_the_field(void) {
    wb_err err = {0};
    wb_tokenizer *t = NULL;
    CHECK(wb_tokenizer_load("no/such/tokenizer.json", &t, &err) == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, "no/such/tokenizer.json");
    CHECK(wb_tokenizer_load_json("{not json", 9, "x.json", &t, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "x.json");
    CHECK_ERR_MENTIONS(err.msg, "JSON");
    CHECK(wb_tokenizer_load_json("[1]", 3, "x.json", &t, &err) == WB_ERR_FORMAT);
    const char *nomodel = "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}";
    CHECK(wb_tokenizer_load_json(nomodel, strlen(nomodel), "x.json", &t, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "model");
    CHECK(t == NULL);

    size_t n;
    char *base = fixture_read_file(FIXTURE_TOKENIZER, &n);
    CHECK(base != NULL);
    if (!base) return;
    struct {
        const char *from, *to, *field;
    } cases[] = {
        {"\"type\": \"BPE\"", "\"type\": \"WordPiece\"", "model.type"},
        {"\"vocab\": {", "\"vocab\": 3, \"x\": {", "model.vocab"},
        {"\"the\": ", "\"the\": -1, \"x1\": ", "model.vocab"},
        {"\"the\": ", "\"the\": 1.5, \"x1\": ", "model.vocab"},
        {"\"the\": ", "\"the\": 999999, \"x1\": ", "model.vocab"},
        {"\"the\": ", "\"the\": 1e300, \"x1\": ", "model.vocab"},
        {"\"the\": ", "\"the\": \"7\", \"x1\": ", "model.vocab"},
        {"\"merges\": [", "\"merges\": [[\"zzzz\", \"h\"], ", "model.merges[0]"},
        {"\"merges\": [", "\"merges\": [\"t\", ", "model.merges[0]"},
        {"\"merges\": [", "\"merges\": [[\"t\"], ", "model.merges[0]"},
        {"\"merges\": [", "\"merges\": [[\"(\", \")\"], ", "model.merges[0]"},
        {"\"merges\": [", "\"merges\": 5, \"y\": [", "model.merges"},
        {"\"normalizer\": null", "\"normalizer\": {\"type\": \"BertNormalizer\"}", "BertNormalizer"},
        {"\"pre_tokenizer\": {", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"old\": {", "Whitespace"},
        {"\"decoder\": {", "\"decoder\": {\"type\": \"WordPiece\"}, \"old\": {", "decoder"},
        {"\"dropout\": null", "\"dropout\": 0.5", "model.dropout"},
        {"\"unk_token\": null", "\"unk_token\": \"<nope>\"", "model.unk_token"},
        {"\"added_tokens\": [", "\"added_tokens\": [{\"id\": 1}, ", "added_tokens[0].content"},
        {"\"added_tokens\": [", "\"added_tokens\": [{\"id\": 1, \"content\": \"x\", \"lstrip\": 3}, ", "added_tokens[0].lstrip"},
        {"\"version\": \"1.0\"", "\"version\": \"2.0\"", "version"},
        {"\"model\": {", "\"model\": 7, \"m\": {", "model"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        err.msg[0] = 0;
        wb_status st = load_patched(base, cases[k].from, cases[k].to, &err);
        CHECK_MSG(st == WB_ERR_FORMAT, "case %zu (%s) gave %s", k, cases[k].field, wb_status_name(st));
        CHECK_ERR_MENTIONS(err.msg, cases[k].field);
        CHECK_ERR_MENTIONS(err.msg, "patched.json");
    }
    /* a duplicated id: give "the" the id of another entry */
    const char *at = strstr(base, "\"the\": ");
    if (at) {
        char from[64], to[64];
        int id = atoi(at + 7);
        snprintf(from, sizeof from, "\"the\": %d", id);
        snprintf(to, sizeof to, "\"the\": %d", id == 0 ? 1 : id - 1);
        CHECK(load_patched(base, from, to, &err) == WB_ERR_FORMAT);
        CHECK_ERR_MENTIONS(err.msg, "model.vocab");
    }
    free(base);
}

static int gen_small(const char *path) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    if (train_small(&tok, &err) != WB_OK || wb_tokenizer_save(tok, path, &err) != WB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    wb_tokenizer_free(tok);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--gen-small") == 0) return gen_small(argv[2]);
    RUN(vectors_match_hugging_face);
    RUN(committed_small_tokenizer_is_reproduced_by_training);
    RUN(training_is_deterministic_with_exact_vocab_size);
    RUN(training_rejects_bad_params);
    RUN(round_trip_valid_utf8);
    RUN(invalid_utf8_encodes_as_lossy_replacement);
    RUN(special_tokens_and_accessors);
    RUN(added_tokens_decode_like_hugging_face);
    RUN(streaming_decoder_releases_whole_chars);
    RUN(save_load_round_trip);
    RUN(bytes_missing_from_vocab_are_dropped);
    RUN(long_word_does_not_hang);
    RUN(malformed_files_name_the_field);
    return check_summary();
}
