/* test_tokenizer_families.c - tokenizer.json shapes of Qwen2, Llama-3, SmolLM2 and Llama-2 /
 * TinyLlama (normalizers, Split / Digits / Metaspace pre-tokenizers, byte fallback, decoder
 * chains) against ids and decoded text from Hugging Face tokenizers
 * (tests/vectors/gen_tokenizer_family_vectors.js), streaming, save/load and malformed sections. */
#include "check.h"
#include "wb_tokenizer.h"

#include <cjson/cJSON.h>
#include "fixture.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VECTORS "tests/vectors/tokenizer_family_vectors.json"

/* Maximal-subpart lossy UTF-8 (what HF's ByteLevel decoder does to the joined bytes). */
static char *lossy(const char *s, size_t n, size_t *out_len) {
    char *o = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        size_t need = c < 0x80 ? 0 : (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2
                                   : (c >= 0xF0 && c <= 0xF4) ? 3 : 99;
        if (need == 0) {
            o[k++] = s[i++];
            continue;
        }
        size_t j = 1;
        if (need != 99)
            for (; j <= need && i + j < n; j++) {
                unsigned b = (unsigned char)s[i + j];
                unsigned lo = 0x80, hi = 0xBF;
                if (j == 1 && c == 0xE0) lo = 0xA0;
                if (j == 1 && c == 0xED) hi = 0x9F;
                if (j == 1 && c == 0xF0) lo = 0x90;
                if (j == 1 && c == 0xF4) hi = 0x8F;
                if (b < lo || b > hi) break;
            }
        if (need != 99 && j == need + 1) {
            memcpy(o + k, s + i, j);
            k += j;
            i += j;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i += need == 99 ? 1 : j;
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

/* The streamed pieces of ids, concatenated (flush included). */
static char *stream(const wb_tokenizer *tok, const int32_t *ids, size_t n, size_t *len) {
    wb_detok *d = NULL;
    wb_err err = {0};
    if (wb_detok_new(tok, &d, &err) != WB_OK) return NULL;
    size_t cap = 64, k = 0;
    char *o = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t l;
        if (i < n) {
            if (wb_detok_push(d, ids[i], &p, &l, &err) != WB_OK) l = 0;
        } else {
            wb_detok_flush(d, &p, &l);
        }
        while (k + l + 1 > cap) o = realloc(o, cap *= 2);
        memcpy(o + k, p, l);
        k += l;
    }
    o[k] = 0;
    *len = k;
    wb_detok_free(d);
    return o;
}

static int has_fffd(const char *s, size_t n) {
    for (size_t i = 0; i + 3 <= n; i++)
        if (memcmp(s + i, "\xef\xbf\xbd", 3) == 0) return 1;
    return 0;
}

static void family_vectors_match_hugging_face(void) {
    size_t n;
    char *json = fixture_read_file(VECTORS, &n);
    CHECK_MSG(json != NULL, "cannot read %s", VECTORS);
    if (!json) return;
    cJSON *root = cJSON_ParseWithLength(json, n);
    CHECK(root != NULL);
    int total = 0, bad_ids = 0, bad_dec = 0, bad_stream = 0, n_dec = 0, n_exact = 0, n_sets = 0;
    const cJSON *set;
    cJSON_ArrayForEach(set, cJSON_GetObjectItem(root, "tokenizers")) {
        const char *file = cJSON_GetObjectItem(set, "file")->valuestring;
        wb_tokenizer *tok = NULL;
        wb_err err = {0};
        CHECK_MSG(wb_tokenizer_load(file, &tok, &err) == WB_OK, "%s", err.msg);
        if (!tok) continue;
        n_sets++;
        /* byte fallback turns each byte of an invalid run into its own U+FFFD, which byte-exact
         * decoding cannot reproduce; byte-level decoding is lossy by maximal subparts */
        int byte_level = strstr(file, "llama2") == NULL && strstr(file, "tinyllama") == NULL &&
                         strstr(file, "spm") == NULL;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(set, "cases")) {
            size_t bl, wl, nid = 0, nw;
            char *bytes = fixture_unhex(cJSON_GetObjectItem(c, "hex")->valuestring, &bl);
            char *want_text = fixture_unhex(cJSON_GetObjectItem(c, "decoded")->valuestring, &wl);
            int32_t *want = fixture_ids(cJSON_GetObjectItem(c, "ids"), &nw);
            int32_t *ids = NULL;
            int ok = wb_tokenizer_encode(tok, bytes, bl, &ids, &nid, &err) == WB_OK && nid == nw &&
                     (nid == 0 || memcmp(ids, want, nid * sizeof *ids) == 0);
            total++;
            if (!ok && bad_ids++ < 6) {
                fprintf(stderr, "  %s: ids differ for hex %.80s\n    got:", file,
                        cJSON_GetObjectItem(c, "hex")->valuestring);
                for (size_t i = 0; i < nid && i < 30; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n    want:");
                for (size_t i = 0; i < nw && i < 30; i++) fprintf(stderr, " %d", want[i]);
                fprintf(stderr, "\n");
            }
            /* decoding HF's ids gives HF's text, and streaming gives the same */
            char *text = NULL;
            size_t tl = 0, sl = 0;
            CHECK(wb_tokenizer_decode(tok, want, nw, &text, &tl, &err) == WB_OK);
            if (!(text && tl == wl && memcmp(text, want_text, wl) == 0) && bad_dec++ < 6)
                fprintf(stderr, "  %s: decode differs for hex %.60s: got \"%.60s\" want \"%.60s\"\n", file,
                        cJSON_GetObjectItem(c, "hex")->valuestring, text ? text : "", want_text);
            char *st = stream(tok, want, nw, &sl);
            if (!(st && sl == wl && memcmp(st, want_text, wl) == 0) && bad_stream++ < 6)
                fprintf(stderr, "  %s: stream differs for hex %.60s: got \"%.60s\"\n", file,
                        cJSON_GetObjectItem(c, "hex")->valuestring, st ? st : "");
            free(st);
            wb_free(text);
            wb_free(ids);
            free(want);
            free(want_text);
            free(bytes);
        }
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(set, "decodes")) {
            size_t nw, wl, tl = 0, ll, sl;
            int32_t *ids = fixture_ids(cJSON_GetObjectItem(c, "ids"), &nw);
            char *want = fixture_unhex(cJSON_GetObjectItem(c, "decoded")->valuestring, &wl);
            char *text = NULL;
            CHECK(wb_tokenizer_decode(tok, ids, nw, &text, &tl, &err) == WB_OK);
            char *lt = lossy(text ? text : "", tl, &ll);
            n_dec++;
            int exact = !has_fffd(want, wl) || byte_level;
            n_exact += exact;
            if (exact && !(ll == wl && memcmp(lt, want, wl) == 0) && bad_dec++ < 6) {
                fprintf(stderr, "  %s: decode of ids differs: got \"%.60s\" want \"%.60s\"\n    ids:", file,
                        lt, want);
                for (size_t i = 0; i < nw; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n");
            }
            /* the stream is the lossy form of the byte-exact decode */
            char *st = stream(tok, ids, nw, &sl);
            if (!(st && sl == ll && memcmp(st, lt, ll) == 0) && bad_stream++ < 6)
                fprintf(stderr, "  %s: stream of random ids differs: got \"%.60s\" want \"%.60s\"\n", file,
                        st ? st : "", lt);
            free(st);
            free(lt);
            wb_free(text);
            free(want);
            free(ids);
        }
        wb_tokenizer_free(tok);
    }
    CHECK_MSG(bad_ids == 0, "%d of %d id vectors differ from Hugging Face", bad_ids, total);
    CHECK_MSG(bad_dec == 0, "%d decodes differ from Hugging Face", bad_dec);
    CHECK_MSG(bad_stream == 0, "%d streams differ from the decode", bad_stream);
    CHECK(n_sets == 7 && total > 2000 && n_exact > n_dec * 3 / 4);
    cJSON_Delete(root);
    free(json);
}

#define SHAPE_VECTORS "tests/vectors/tokenizer_shape_vectors.json"

/* The real-shaped files of gen_tokenizer_shape_vectors.js (Llama-2 legacy, Mistral v0.3
 * Metaspace, Metaspace always, the oldest Metaspace(add_prefix_space), SmolLM2): every input's
 * ids, HF's decode of them (the input itself unless listed), streaming, and random id decodes. */
static void real_shape_vectors_match_hugging_face(void) {
    size_t n;
    char *json = fixture_read_file(SHAPE_VECTORS, &n);
    CHECK_MSG(json != NULL, "cannot read %s", SHAPE_VECTORS);
    if (!json) return;
    cJSON *root = cJSON_ParseWithLength(json, n);
    free(json);
    CHECK(root != NULL);
    const cJSON *inputs = cJSON_GetObjectItem(root, "inputs");
    size_t n_in = (size_t)cJSON_GetArraySize(inputs);
    const char **hex = calloc(n_in + 1, sizeof *hex);
    size_t k = 0;
    for (const cJSON *e = inputs ? inputs->child : NULL; e && k < n_in; e = e->next) hex[k++] = e->valuestring;
    int total = 0, bad_ids = 0, bad_dec = 0, bad_stream = 0, n_sets = 0, n_dec = 0;
    const cJSON *set;
    cJSON_ArrayForEach(set, cJSON_GetObjectItem(root, "tokenizers")) {
        const char *file = cJSON_GetObjectItem(set, "file")->valuestring;
        wb_tokenizer *tok = NULL;
        wb_err err = {0};
        CHECK_MSG(wb_tokenizer_load(file, &tok, &err) == WB_OK, "%s", err.msg);
        if (!tok) continue;
        n_sets++;
        int byte_level = strstr(file, "smollm2") != NULL;
        const cJSON *decoded = cJSON_GetObjectItem(set, "decoded");
        size_t i = 0;
        for (const cJSON *w = cJSON_GetObjectItem(set, "ids")->child; w && i < n_in; w = w->next, i++) {
            size_t bl, nw, nid = 0, wl, tl = 0, sl = 0;
            char *bytes = fixture_unhex(hex[i], &bl);
            int32_t *want = fixture_ids(w, &nw);
            int32_t *ids = NULL;
            int ok = wb_tokenizer_encode(tok, bytes, bl, &ids, &nid, &err) == WB_OK && nid == nw &&
                     (nid == 0 || memcmp(ids, want, nid * sizeof *ids) == 0);
            total++;
            if (!ok && bad_ids++ < 8) {
                fprintf(stderr, "  %s: ids differ for hex %.80s\n    got:", file, hex[i]);
                for (size_t j = 0; j < nid && j < 30; j++) fprintf(stderr, " %d", ids[j]);
                fprintf(stderr, "\n    want:");
                for (size_t j = 0; j < nw && j < 30; j++) fprintf(stderr, " %d", want[j]);
                fprintf(stderr, "\n");
            }
            /* HF's decode(ids): listed where it is not the input read lossily (stripped
             * spaces, <0xXX> names under a Metaspace decoder) */
            char key[24];
            snprintf(key, sizeof key, "%zu", i);
            const cJSON *d = cJSON_GetObjectItem(decoded, key);
            char *want_text = d ? fixture_unhex(d->valuestring, &wl) : lossy(bytes, bl, &wl);
            char *text = NULL;
            CHECK(wb_tokenizer_decode(tok, want, nw, &text, &tl, &err) == WB_OK);
            size_t ll;
            char *lt = lossy(text ? text : "", tl, &ll);
            /* byte fallback of an invalid run: HF writes one U+FFFD per byte (docs/tokenizer.md) */
            int exact = byte_level || !has_fffd(want_text, wl);
            if (exact && !(ll == wl && memcmp(lt, want_text, wl) == 0) && bad_dec++ < 8)
                fprintf(stderr, "  %s: decode differs for hex %.60s: got \"%.60s\" want \"%.60s\"\n", file,
                        hex[i], lt, want_text);
            char *st = stream(tok, want, nw, &sl);
            if (!(st && sl == ll && memcmp(st, lt, ll) == 0) && bad_stream++ < 8)
                fprintf(stderr, "  %s: stream differs for hex %.60s: got \"%.60s\" want \"%.60s\"\n", file,
                        hex[i], st ? st : "", lt);
            free(st);
            free(lt);
            wb_free(text);
            free(want_text);
            wb_free(ids);
            free(want);
            free(bytes);
        }
        CHECK_MSG(i == n_in, "%s: %zu id lists for %zu inputs", file, i, n_in);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(set, "decodes")) {
            size_t nw, wl, tl = 0, ll;
            int32_t *ids = fixture_ids(cJSON_GetObjectItem(c, "ids"), &nw);
            char *want = fixture_unhex(cJSON_GetObjectItem(c, "decoded")->valuestring, &wl);
            char *text = NULL;
            CHECK(wb_tokenizer_decode(tok, ids, nw, &text, &tl, &err) == WB_OK);
            char *lt = lossy(text ? text : "", tl, &ll);
            n_dec++;
            if ((byte_level || !has_fffd(want, wl)) && !(ll == wl && memcmp(lt, want, wl) == 0) && bad_dec++ < 8)
                fprintf(stderr, "  %s: decode of random ids differs: got \"%.60s\" want \"%.60s\"\n", file, lt,
                        want);
            free(lt);
            wb_free(text);
            free(want);
            free(ids);
        }
        wb_tokenizer_free(tok);
    }
    free(hex);
    cJSON_Delete(root);
    CHECK_MSG(bad_ids == 0, "%d of %d encodings differ from Hugging Face", bad_ids, total);
    CHECK_MSG(bad_dec == 0, "%d decodes differ from Hugging Face", bad_dec);
    CHECK_MSG(bad_stream == 0, "%d streams differ from the decode", bad_stream);
    CHECK_MSG(n_sets == 5 && total >= 5 * 2000, "only %d tokenizers, %d encodings", n_sets, total);
    if (!bad_ids && !bad_dec && !bad_stream)
        printf("real shapes: %d tokenizers, %d encodings and %d random decodes equal Hugging Face\n", n_sets,
               total, n_dec);
}

static int32_t *enc(const wb_tokenizer *tok, const char *s, size_t *n) {
    int32_t *ids = NULL;
    wb_err err = {0};
    *n = 0;
    if (wb_tokenizer_encode(tok, s, strlen(s), &ids, n, &err) != WB_OK) return NULL;
    return ids;
}

static void chat_markers_are_single_special_tokens(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_tokenizer_load("tests/vectors/family_qwen2_tokenizer.json", &tok, &err) == WB_OK, "%s",
              err.msg);
    if (!tok) return;
    int32_t st = wb_tokenizer_id_of_str(tok, "<|im_start|>"), en = wb_tokenizer_id_of_str(tok, "<|im_end|>");
    CHECK(st == 600 && en == 601 && wb_tokenizer_is_special(tok, st));
    CHECK(wb_tokenizer_eos_id(tok) == 599);
    size_t n;
    int32_t *ids = enc(tok, "<|im_start|>user\nhi<|im_end|>\n", &n);
    CHECK(ids && n >= 4 && ids[0] == st);
    int found = 0;
    for (size_t i = 0; ids && i < n; i++) found += ids[i] == en;
    CHECK(found == 1);
    wb_free(ids);
    wb_tokenizer_free(tok);
}

static void sentencepiece_decoding_strips_the_first_space_only(void) {
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_tokenizer_load("tests/vectors/family_llama2_tokenizer.json", &tok, &err) == WB_OK, "%s",
              err.msg);
    if (!tok) return;
    CHECK(wb_tokenizer_eos_id(tok) == 2);
    size_t n, l;
    int32_t *ids = enc(tok, "hello world\n東", &n);
    char *text = NULL;
    CHECK(ids && wb_tokenizer_decode(tok, ids, n, &text, &l, &err) == WB_OK);
    CHECK(text && strcmp(text, "hello world\n東") == 0);
    /* the newline and the rare CJK char come from byte-fallback tokens */
    CHECK(wb_tokenizer_id_of_str(tok, "<0x0A>") == 13);
    int nl = 0;
    for (size_t i = 0; ids && i < n; i++) nl += ids[i] == 13;
    CHECK(nl == 1);
    wb_free(text);
    /* streamed token by token: no leading space, whole chars only */
    char buf[64] = {0};
    size_t k = 0;
    wb_detok *d = NULL;
    CHECK(wb_detok_new(tok, &d, &err) == WB_OK);
    for (size_t i = 0; d && i < n; i++) {
        const char *p;
        size_t pl;
        CHECK(wb_detok_push(d, ids[i], &p, &pl, &err) == WB_OK);
        CHECK(pl == 0 || ((unsigned char)p[pl - 1] < 0x80 || pl >= 3));
        memcpy(buf + k, p, pl);
        k += pl;
    }
    CHECK(strcmp(buf, "hello world\n東") == 0);
    /* after a reset the first token loses its space again */
    wb_detok_reset(d);
    const char *p;
    CHECK(d && wb_detok_push(d, ids[0], &p, &l, &err) == WB_OK && l > 0 && p[0] != ' ');
    wb_detok_free(d);
    wb_free(ids);
    wb_tokenizer_free(tok);
}

static void save_keeps_the_pipeline(void) {
    const char *files[] = {"tests/vectors/family_qwen2_tokenizer.json",
                           "tests/vectors/family_llama2_tokenizer.json",
                           "tests/vectors/family_spm_misc_tokenizer.json"};
    const char *text = " Hello  world 123 <s>x</s> <|im_start|>caf\xc3\xa9 \xe2\x96\x81 [X] \xe6\x9d\xb1";
    for (size_t f = 0; f < 3; f++) {
        wb_tokenizer *a = NULL, *b = NULL;
        wb_err err = {0};
        CHECK(wb_tokenizer_load(files[f], &a, &err) == WB_OK);
        char path[] = "/tmp/wb_tokfam_XXXXXX";
        int fd = mkstemp(path);
        close(fd);
        CHECK_MSG(a && wb_tokenizer_save(a, path, &err) == WB_OK, "%s", err.msg);
        CHECK_MSG(wb_tokenizer_load(path, &b, &err) == WB_OK, "%s: %s", files[f], err.msg);
        if (a && b) {
            size_t na, nb;
            int32_t *x = enc(a, text, &na), *y = enc(b, text, &nb);
            CHECK_MSG(x && y && na == nb && memcmp(x, y, na * sizeof *x) == 0, "%s", files[f]);
            char *ta = NULL, *tb = NULL;
            size_t la, lb;
            CHECK(wb_tokenizer_decode(a, x, na, &ta, &la, &err) == WB_OK);
            CHECK(wb_tokenizer_decode(b, y, nb, &tb, &lb, &err) == WB_OK);
            CHECK(ta && tb && la == lb && memcmp(ta, tb, la) == 0);
            wb_free(ta);
            wb_free(tb);
            wb_free(x);
            wb_free(y);
        }
        remove(path);
        wb_tokenizer_free(a);
        wb_tokenizer_free(b);
    }
}

static wb_status load_patched(const char *file, const char *from, const char *to, wb_err *err) {
    size_t n;
    char *base = fixture_read_file(file, &n);
    if (!base) return WB_OK;
    const char *at = strstr(base, from);
    if (!at) {
        fprintf(stderr, "  patch target \"%s\" not found\n", from);
        free(base);
        return WB_OK;
    }
    size_t fl = strlen(from), tl = strlen(to);
    char *j = malloc(n - fl + tl + 1);
    memcpy(j, base, (size_t)(at - base));
    memcpy(j + (at - base), to, tl);
    memcpy(j + (at - base) + tl, at + fl, n - (size_t)(at - base) - fl + 1);
    wb_tokenizer *t = NULL;
    wb_status st = wb_tokenizer_load_json(j, strlen(j), "patched.json", &t, err);
    wb_tokenizer_free(t);
    free(j);
    free(base);
    return st;
}

static void malformed_sections_name_the_field(void) {
    const char *qwen = "tests/vectors/family_qwen2_tokenizer.json";
    const char *llama = "tests/vectors/family_llama2_tokenizer.json";
    struct {
        const char *file, *from, *to, *field;
    } cases[] = {
        {qwen, "\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\"", "pre_tokenizer.pretokenizers[0].behavior"},
        {qwen, "\"Regex\": \"(?i:", "\"Regex\": \"((?i:", "pre_tokenizer.pretokenizers[0].pattern"},
        {qwen, "\"pattern\": {", "\"pattern\": {\"Glob\": 1}, \"p\": {", "pattern"},
        {qwen, "\"type\": \"NFC\"", "\"type\": \"BertNormalizer\"", "BertNormalizer"},
        {qwen, "\"invert\": false", "\"invert\": 3", "invert"},
        {qwen, "\"pretokenizers\": [", "\"pretokenizers\": [{\"type\": \"ByteLevel\"}, ", "ByteLevel"},
        {qwen, "\"pretokenizers\": [", "\"pretokenizers\": [{\"type\": \"Punctuation\"}, ", "pre_tokenizer.pretokenizers[0]"},
        {llama, "\"stop\": 0", "\"stop\": 2", "decoder.decoders[3].stop"},
        {llama, "\"content\": \" \",\n    \"start\"", "\"content\": \"ab\",\n    \"start\"", "content"},
        {llama, "\"type\": \"Fuse\"", "\"type\": \"CTC\"", "decoder.decoders[2]"},
        {llama, "\"prepend\": \"\xe2\x96\x81\"", "\"prepend\": 5", "prepend"},
        {llama, "\"normalizers\": [", "\"normalizers\": 7, \"x\": [", "normalizer.normalizers"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        wb_err err = {0};
        wb_status st = load_patched(cases[k].file, cases[k].from, cases[k].to, &err);
        CHECK_MSG(st == WB_ERR_FORMAT, "case %zu (%s) gave %s", k, cases[k].field, wb_status_name(st));
        CHECK_ERR_MENTIONS(err.msg, cases[k].field);
        CHECK_ERR_MENTIONS(err.msg, "patched.json");
    }
}

static void long_inputs_do_not_hang(void) {
    const char *files[] = {"tests/vectors/family_qwen2_tokenizer.json",
                           "tests/vectors/family_llama2_tokenizer.json",
                           "tests/vectors/family_spm_misc_tokenizer.json",
                           "tests/vectors/family_splits_tokenizer.json"};
    size_t n = 60000;
    char *s = malloc(n);
    const char fill[] = {'a', ' ', '\n', '1', '-'};
    for (size_t f = 0; f < 4; f++) {
        wb_tokenizer *tok = NULL;
        wb_err err = {0};
        CHECK(wb_tokenizer_load(files[f], &tok, &err) == WB_OK);
        for (size_t k = 0; tok && k < sizeof fill; k++) {
            memset(s, fill[k], n);
            int32_t *ids = NULL;
            size_t nid = 0;
            /* linear work: a quadratic path would run into ctest's timeout (no wall-clock check here:
             * timings belong in bench/) */
            CHECK(wb_tokenizer_encode(tok, s, n, &ids, &nid, &err) == WB_OK);
            wb_free(ids);
        }
        wb_tokenizer_free(tok);
    }
    free(s);
}

/* A Replace normalizer that turns one byte into many cannot make encode's memory unbounded: past
 * 64x the input (plus 1 MiB) it is a clear WB_ERR_RANGE naming the cause (issue 12 item 8). */
static void replace_normalizer_expansion_is_bounded(void) {
    size_t n;
    char *base = fixture_read_file("tests/vectors/family_llama2_tokenizer.json", &n);
    CHECK(base != NULL);
    if (!base) return;
    const char *from = "\"content\": \"\xe2\x96\x81\"";
    const char *at = strstr(base, from);
    CHECK(at != NULL);
    if (!at) {
        free(base);
        return;
    }
    size_t fl = strlen(from), reps = 400, tl = 13 + reps * 3;
    char *j = malloc(n + tl + 16), *o = j;
    memcpy(o, base, (size_t)(at - base)), o += at - base;
    o += sprintf(o, "\"content\": \"");
    for (size_t i = 0; i < reps; i++) memcpy(o, "\xe2\x96\x81", 3), o += 3;
    *o++ = '"';
    memcpy(o, at + fl, n - (size_t)(at - base) - fl + 1);
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_tokenizer_load_json(j, strlen(j), "expand.json", &tok, &err) == WB_OK, "%s", err.msg);
    size_t sn = 100000;
    char *s = malloc(sn);
    memset(s, ' ', sn);
    int32_t *ids = NULL;
    size_t nid = 0;
    CHECK(tok && wb_tokenizer_encode(tok, s, sn, &ids, &nid, &err) == WB_ERR_RANGE && ids == NULL);
    CHECK_ERR_MENTIONS(err.msg, "Replace");
    CHECK(tok && wb_tokenizer_encode(tok, "a b", 3, &ids, &nid, &err) == WB_OK && nid > 0); /* small is fine */
    wb_free(ids);
    wb_tokenizer_free(tok);
    free(s);
    free(j);
    free(base);
}

int main(void) {
    RUN(family_vectors_match_hugging_face);
    RUN(real_shape_vectors_match_hugging_face);
    RUN(chat_markers_are_single_special_tokens);
    RUN(sentencepiece_decoding_strips_the_first_space_only);
    RUN(save_keeps_the_pipeline);
    RUN(malformed_sections_name_the_field);
    RUN(long_inputs_do_not_hang);
    RUN(replace_normalizer_expansion_is_bounded);
    return check_summary();
}
