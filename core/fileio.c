/* fileio.c - whole-file reads with a size cap, and path joining, shared by the loaders. */
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *wb_path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

wb_status wb_read_file(const char *path, size_t max_bytes, char **out, size_t *len, wb_err *err) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return wb_err_set(err, WB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    wb_status st = WB_OK;
    for (;;) {
        if (cap - n < 65536 + 1) { /* room for a full chunk and the NUL */
            size_t nc = cap ? cap * 2 : 131072;
            char *q = realloc(buf, nc);
            if (!q) {
                st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            buf = q;
            cap = nc;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (n > max_bytes) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: larger than %zu bytes", path, max_bytes);
            break;
        }
        if (r < 65536) {
            if (ferror(f)) st = wb_err_set(err, WB_ERR_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st != WB_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return WB_OK;
}
