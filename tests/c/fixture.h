/* fixture.h - the scratch-directory and file helpers the model tests share (test_llama,
 * test_phi3, test_weights): a fresh /tmp directory, its removal, a text file, a file copy.
 * Failures are CHECKs, so a broken fixture fails the test that uses it. Include after check.h. */
#ifndef WB_TEST_FIXTURE_H
#define WB_TEST_FIXTURE_H

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

#endif
