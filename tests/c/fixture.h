/* fixture.h - the scratch-directory and file helpers the model tests share (test_llama,
 * test_phi3, test_weights): a fresh /tmp directory, its removal, a text file, a file copy; and
 * the readers of committed vectors the tokenizer tests share (whole file, hex bytes, id arrays;
 * fixture_ids only when cjson/cJSON.h is included first). Failures are CHECKs, so a broken
 * fixture fails the test that uses it. Include after check.h. */
#ifndef WB_TEST_FIXTURE_H
#define WB_TEST_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* A new empty directory /tmp/wb_<name>_XXXXXX (malloc'd path; NULL if it cannot be made). */
static inline char *fixture_new_dir(const char *name) {
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/wb_%s_XXXXXX", name);
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

/* Removes dir and everything in it, then frees the path. */
static inline void fixture_rm_dir(char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(dir);
}

static inline void fixture_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    CHECK(fclose(f) == 0);
}

static inline void fixture_copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a != NULL && b != NULL);
    char buf[8192];
    size_t k;
    while (a && b && (k = fread(buf, 1, sizeof buf, a)) > 0) CHECK(fwrite(buf, 1, k, b) == k);
    if (a) fclose(a);
    if (b) CHECK(fclose(b) == 0);
}


/* ---- committed test vectors (JSON files in tests/vectors) ------------------------------------------ */

/* The whole file, NUL-terminated (malloc'd); NULL when it cannot be read. *n gets its length. */
static inline char *fixture_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long l = -1;
    if (fseek(f, 0, SEEK_END) == 0) l = ftell(f);
    char *b = l >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)l + 1) : NULL;
    if (b && fread(b, 1, (size_t)l, f) != (size_t)l) {
        free(b);
        b = NULL;
    }
    if (b) b[l] = 0;
    fclose(f);
    if (n) *n = b ? (size_t)l : 0;
    return b;
}

static inline int fixture_hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
}

/* The bytes a vector's "hex" field spells (malloc'd, NUL-terminated; *n excludes the NUL). */
static inline char *fixture_unhex(const char *hex, size_t *n) {
    size_t hl = strlen(hex);
    *n = 0;
    char *b = malloc(hl / 2 + 1);
    CHECK(b != NULL);
    if (!b) return NULL;
    for (size_t i = 0; i < hl / 2; i++)
        b[i] = (char)(fixture_hexval(hex[2 * i]) << 4 | fixture_hexval(hex[2 * i + 1]));
    b[hl / 2] = 0;
    *n = hl / 2;
    return b;
}

#ifdef cJSON__h
/* A JSON array of integers as a malloc'd int32 array (one walk of the list, not
 * cJSON_GetArrayItem per element). */
static inline int32_t *fixture_ids(const cJSON *arr, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    CHECK(ids != NULL);
    if (!ids) return NULL;
    size_t i = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e && i < *n; e = e->next) ids[i++] = (int32_t)e->valuedouble;
    return ids;
}
#endif

#endif
