/* test_tokenizer_post - tokenizer.json's truncation and padding against Hugging Face tokenizers:
 * ids and attention masks of tests/vectors/tokenizer_post_vectors.json (made by
 * gen_tokenizer_post_vectors.js with the npm binding), the files HF refuses, the switches that
 * turn both off, and save writing the settings back. */
#include "check.h"
#include "wb_tokenizer.h"

#include <cjson/cJSON.h>
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VECTORS "tests/vectors/tokenizer_post_vectors.json"

/* The base fixture with its truncation and padding replaced by the set's. */
static wb_status load_with(const char *base, const cJSON *trunc, const cJSON *pad, wb_tokenizer **tok,
                           wb_err *err) {
    char path[256];
    snprintf(path, sizeof path, "tests/vectors/%s", base);
    size_t n;
    char *text = fixture_read_file(path, &n);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    cJSON *root = text ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    CHECK(root != NULL);
    if (!root) return WB_ERR_IO;
    cJSON_ReplaceItemInObjectCaseSensitive(root, "truncation", cJSON_Duplicate(trunc, 1));
    cJSON_ReplaceItemInObjectCaseSensitive(root, "padding", cJSON_Duplicate(pad, 1));
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    wb_status st = wb_tokenizer_load_json(json, strlen(json), base, tok, err);
    free(json);
    return st;
}

static void vectors_match_hugging_face(void) {
    size_t n;
    char *json = fixture_read_file(VECTORS, &n);
    CHECK_MSG(json != NULL, "cannot read %s", VECTORS);
    if (!json) return;
    cJSON *root = cJSON_ParseWithLength(json, n);
    free(json);
    CHECK(root != NULL);
    int cases = 0, bad = 0, refused = 0, sets = 0;
    const cJSON *set;
    cJSON_ArrayForEach(set, cJSON_GetObjectItem(root, "sets")) {
        const char *base = cJSON_GetObjectItem(set, "base")->valuestring;
        const cJSON *tr = cJSON_GetObjectItem(set, "truncation"), *pd = cJSON_GetObjectItem(set, "padding");
        wb_tokenizer *tok = NULL;
        wb_err err = {0};
        wb_status st = load_with(base, tr, pd, &tok, &err);
        char *desc = NULL;
        {
            char *a = cJSON_PrintUnformatted(tr), *b = cJSON_PrintUnformatted(pd);
            size_t l = strlen(a) + strlen(b) + 64;
            desc = malloc(l);
            snprintf(desc, l, "truncation=%s padding=%s", a, b);
            free(a);
            free(b);
        }
        sets++;
        if (cJSON_IsTrue(cJSON_GetObjectItem(set, "load_error"))) {
            refused++;
            /* refused like HF, with a message naming the section */
            CHECK_MSG(st == WB_ERR_FORMAT && (strstr(err.msg, "truncation") || strstr(err.msg, "padding")),
                      "%s: %s should be refused (HF: %s); got status %d \"%s\"", base, desc,
                      cJSON_GetObjectItem(set, "hf_error")->valuestring, (int)st, err.msg);
            wb_tokenizer_free(tok);
            free(desc);
            continue;
        }
        CHECK_MSG(st == WB_OK, "%s: %s: %s", base, desc, err.msg);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(set, "cases")) {
            if (!tok) break;
            size_t bl, nid = 0, nw = 0, nm = 0;
            char *bytes = fixture_unhex(cJSON_GetObjectItem(c, "hex")->valuestring, &bl);
            int32_t *ids = NULL;
            uint8_t *mask = NULL;
            st = wb_tokenizer_encode_with(tok, bytes, bl, NULL, &ids, &nid, &mask, &err);
            int ok;
            cases++;
            const cJSON *want_err = cJSON_GetObjectItem(c, "error");
            if (want_err) {
                /* HF's "Second sequence not provided" and its abort on stride >= max_length are
                 * errors here, with nothing returned */
                ok = st == WB_ERR_ARG && ids == NULL && mask == NULL && strstr(err.msg, "truncation");
            } else {
                int32_t *want = fixture_ids(cJSON_GetObjectItem(c, "ids"), &nw);
                int32_t *wmask = fixture_ids(cJSON_GetObjectItem(c, "mask"), &nm);
                ok = st == WB_OK && nid == nw && nm == nw && (!nid || memcmp(ids, want, nid * sizeof *ids) == 0);
                for (size_t i = 0; ok && i < nid; i++) ok = mask[i] == wmask[i];
                /* the plain call gives the same ids */
                int32_t *ids2 = NULL;
                size_t n2 = 0;
                ok = ok && wb_tokenizer_encode(tok, bytes, bl, &ids2, &n2, &err) == WB_OK && n2 == nid &&
                     (!nid || memcmp(ids2, ids, nid * sizeof *ids) == 0);
                wb_free(ids2);
                free(want);
                free(wmask);
            }
            if (!ok && bad++ < 8) {
                fprintf(stderr, "  %s %s: hex %.60s: status %d \"%s\", got", base, desc,
                        cJSON_GetObjectItem(c, "hex")->valuestring, (int)st, err.msg);
                for (size_t i = 0; i < nid && i < 20; i++) fprintf(stderr, " %d/%d", ids[i], mask[i]);
                char *w = cJSON_PrintUnformatted(c);
                fprintf(stderr, "\n    want %.300s\n", w);
                free(w);
            }
            wb_free(ids);
            wb_free(mask);
            free(bytes);
        }
        wb_tokenizer_free(tok);
        free(desc);
    }
    cJSON_Delete(root);
    CHECK_MSG(bad == 0, "%d of %d encodings differ from Hugging Face", bad, cases);
    CHECK_MSG(cases >= 1500 && refused >= 40 && sets >= 100, "only %d sets, %d cases, %d refused", sets,
              cases, refused);
    if (bad == 0)
        printf("tokenizer_post: %d settings, %d encodings, %d refused files equal Hugging Face\n", sets, cases,
           refused);
}

static cJSON *parse(const char *s) {
    cJSON *j = cJSON_Parse(s);
    CHECK(j != NULL);
    return j;
}

/* Both switches off give the ids of a file without the sections; a model prompt is never cut. */
static void switches_turn_both_off(void) {
    cJSON *tr = parse("{\"direction\":\"Left\",\"max_length\":2,\"strategy\":\"LongestFirst\",\"stride\":0}");
    cJSON *pd = parse("{\"strategy\":{\"Fixed\":30},\"direction\":\"Right\",\"pad_to_multiple_of\":null,"
                      "\"pad_id\":5,\"pad_type_id\":0,\"pad_token\":\"<pad>\"}");
    cJSON *null = cJSON_CreateNull();
    wb_tokenizer *plain = NULL, *both = NULL;
    wb_err err = {0};
    CHECK(load_with("family_qwen2_tokenizer.json", null, null, &plain, &err) == WB_OK);
    CHECK(load_with("family_qwen2_tokenizer.json", tr, pd, &both, &err) == WB_OK);
    const char *s = "hello world the thing thinking";
    int32_t *a = NULL, *b = NULL;
    uint8_t *m = NULL;
    size_t na = 0, nb = 0;
    CHECK(plain && both);
    if (plain && both) {
        CHECK(wb_tokenizer_encode(plain, s, strlen(s), &a, &na, &err) == WB_OK && na > 2);
        wb_tokenizer_encode_params p = {.truncation = 0, .padding = 0};
        CHECK(wb_tokenizer_encode_with(both, s, strlen(s), &p, &b, &nb, &m, &err) == WB_OK);
        CHECK(nb == na && memcmp(a, b, na * sizeof *a) == 0);
        for (size_t i = 0; i < nb; i++) CHECK(m[i] == 1);
        wb_free(b);
        wb_free(m);
        /* truncation alone: the last two ids (Left), padded to 30 on the right with 5 */
        p.truncation = 1;
        p.padding = 1;
        CHECK(wb_tokenizer_encode_with(both, s, strlen(s), &p, &b, &nb, &m, &err) == WB_OK && nb == 30);
        CHECK(b[0] == a[na - 2] && b[1] == a[na - 1] && b[2] == 5 && b[29] == 5 && m[1] == 1 && m[2] == 0);
        wb_free(b);
        wb_free(m);
        p.padding = 0;
        CHECK(wb_tokenizer_encode_with(both, s, strlen(s), &p, &b, &nb, NULL, &err) == WB_OK && nb == 2);
        wb_free(b);
        p.truncation = 0;
        p.padding = 1;
        CHECK(wb_tokenizer_encode_with(both, s, strlen(s), &p, &b, &nb, NULL, &err) == WB_OK && nb == 30 &&
              memcmp(a, b, na * sizeof *a) == 0);
        wb_free(b);
    }
    wb_free(a);
    wb_tokenizer_free(plain);
    wb_tokenizer_free(both);
    cJSON_Delete(tr);
    cJSON_Delete(pd);
    cJSON_Delete(null);
}

/* save writes the sections back, and the reloaded file encodes the same. */
static void save_keeps_the_settings(void) {
    cJSON *tr = parse("{\"direction\":\"Left\",\"max_length\":3,\"strategy\":\"OnlyFirst\",\"stride\":1}");
    cJSON *pd = parse("{\"strategy\":\"BatchLongest\",\"direction\":\"Left\",\"pad_to_multiple_of\":4,"
                      "\"pad_id\":2,\"pad_type_id\":0,\"pad_token\":\"</s>\"}");
    wb_tokenizer *t = NULL, *u = NULL;
    wb_err err = {0};
    CHECK(load_with("family_tinyllama_tokenizer.json", tr, pd, &t, &err) == WB_OK);
    char dir[] = "/tmp/wb_tokpost_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[300];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(t && wb_tokenizer_save(t, path, &err) == WB_OK);
    CHECK_MSG(wb_tokenizer_load(path, &u, &err) == WB_OK, "%s", err.msg);
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    const char *s = "hello world the thing";
    if (t && u) {
        CHECK(wb_tokenizer_encode(t, s, strlen(s), &a, &na, &err) == WB_OK && na == 4 && a[0] == 2);
        CHECK(wb_tokenizer_encode(u, s, strlen(s), &b, &nb, &err) == WB_OK && nb == na &&
              memcmp(a, b, na * sizeof *a) == 0);
    }
    wb_free(a);
    wb_free(b);
    wb_tokenizer_free(t);
    wb_tokenizer_free(u);
    unlink(path);
    rmdir(dir);
    cJSON_Delete(tr);
    cJSON_Delete(pd);
}

/* Lengths that would allocate without bound, and numbers beyond any integer, are refused at load
 * naming the field; the largest usize is read as no limit. */
static void huge_counts_are_refused_by_name(void) {
    cJSON *null = cJSON_CreateNull();
    cJSON *pd = parse("{\"strategy\":{\"Fixed\":1e12},\"direction\":\"Right\",\"pad_to_multiple_of\":null,"
                      "\"pad_id\":0,\"pad_type_id\":0,\"pad_token\":\"x\"}");
    cJSON *pm = parse("{\"strategy\":\"BatchLongest\",\"direction\":\"Right\",\"pad_to_multiple_of\":99999999999,"
                      "\"pad_id\":0,\"pad_type_id\":0,\"pad_token\":\"x\"}");
    cJSON *pi = parse("{\"strategy\":\"BatchLongest\",\"direction\":\"Right\",\"pad_to_multiple_of\":null,"
                      "\"pad_id\":4294967295,\"pad_type_id\":0,\"pad_token\":\"x\"}");
    wb_tokenizer *t = NULL;
    wb_err err = {0};
    CHECK(load_with("family_qwen2_tokenizer.json", null, pd, &t, &err) == WB_ERR_FORMAT && !t &&
          strstr(err.msg, "padding.strategy.Fixed") && strstr(err.msg, "limit"));
    CHECK(load_with("family_qwen2_tokenizer.json", null, pm, &t, &err) == WB_ERR_FORMAT && !t &&
          strstr(err.msg, "padding.pad_to_multiple_of"));
    CHECK(load_with("family_qwen2_tokenizer.json", null, pi, &t, &err) == WB_ERR_FORMAT && !t &&
          strstr(err.msg, "padding.pad_id"));
    /* beyond any integer type, and the largest usize: refused by name, taken as "no limit" */
    cJSON *tb = parse("{\"direction\":\"Right\",\"max_length\":1e30,\"strategy\":\"LongestFirst\",\"stride\":0}");
    cJSON *tu = parse("{\"direction\":\"Right\",\"max_length\":18446744073709551615,\"strategy\":\"LongestFirst\","
                      "\"stride\":0}");
    CHECK(load_with("family_qwen2_tokenizer.json", tb, null, &t, &err) == WB_ERR_FORMAT && !t &&
          strstr(err.msg, "truncation.max_length"));
    CHECK(load_with("family_qwen2_tokenizer.json", tu, null, &t, &err) == WB_OK && t);
    int32_t *ids = NULL;
    size_t nid = 0;
    CHECK(t && wb_tokenizer_encode(t, "hello world", 11, &ids, &nid, &err) == WB_OK && nid > 1);
    wb_free(ids);
    wb_tokenizer_free(t);
    cJSON_Delete(tb);
    cJSON_Delete(tu);
    cJSON_Delete(null);
    cJSON_Delete(pd);
    cJSON_Delete(pm);
    cJSON_Delete(pi);
}

int main(void) {
    RUN(vectors_match_hugging_face);
    RUN(switches_turn_both_off);
    RUN(save_keeps_the_settings);
    RUN(huge_counts_are_refused_by_name);
    return check_summary();
}
