/* json_strict.c - strict JSON reading for the loaders (json_strict.h). */
#include "json_strict.h"

#include "fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jframe {
    const cJSON *node; /* a container on the current path */
    const cJSON *next; /* its next child to visit */
    int index;         /* that child's position */
} jframe;

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "a.b[3].c" for the path to stk[0..sp) (the object that holds the duplicate is stk[sp-1]). */
static void path_of(const jframe *stk, int sp, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 1; i < sp && n + 1 < size; i++) {
        const cJSON *parent = stk[i - 1].node, *me = stk[i].node;
        int w = cJSON_IsArray(parent) ? snprintf(buf + n, size - n, "[%d]", stk[i - 1].index - 1)
                : snprintf(buf + n, size - n, "%s%.60s", n ? "." : "", me->string ? me->string : "");
        if (w < 0) break;
        n += (size_t)w < size - n ? (size_t)w : size - n - 1;
    }
    if (!buf[0]) snprintf(buf, size, "the top-level object");
}

static wb_status dup_error(const jframe *stk, int sp, const char *name, const char *key,
                           wb_err *err) {
    char path[200];
    path_of(stk, sp, path, sizeof path);
    return wb_err_set(err, WB_ERR_FORMAT, "%s: duplicate key \"%.80s\" in %s", name, key, path);
}

wb_status wb_json_check_unique_keys(const cJSON *root, const char *name, wb_err *err) {
    if (!name) name = "JSON";
    if (!root || !(cJSON_IsObject(root) || cJSON_IsArray(root))) return WB_OK;
    int sp = 0, cap = 64;
    jframe *stk = malloc((size_t)cap * sizeof *stk);
    const char **keys = NULL;
    size_t kcap = 0;
    wb_status st = WB_OK;
    if (!stk) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
    stk[sp++] = (jframe){root, root->child, 0};
    int fresh = 1; /* the top frame's keys are not checked yet */
    while (sp > 0 && st == WB_OK) {
        jframe *fr = &stk[sp - 1];
        if (fresh && cJSON_IsObject(fr->node)) {
            size_t n = 0;
            for (const cJSON *c = fr->node->child; c; c = c->next) n++;
            if (n > 1) {
                if (n > kcap) {
                    const char **nk = realloc(keys, n * sizeof *nk);
                    if (!nk) {
                        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
                        break;
                    }
                    keys = nk, kcap = n;
                }
                size_t k = 0;
                for (const cJSON *c = fr->node->child; c; c = c->next)
                    keys[k++] = c->string ? c->string : "";
                if (n <= 8) { /* small objects: no sort */
                    for (size_t i = 0; i < n && st == WB_OK; i++)
                        for (size_t j = i + 1; j < n; j++)
                            if (strcmp(keys[i], keys[j]) == 0) {
                                st = dup_error(stk, sp, name, keys[i], err);
                                break;
                            }
                } else {
                    qsort(keys, n, sizeof *keys, cmp_key);
                    for (size_t i = 1; i < n; i++)
                        if (strcmp(keys[i - 1], keys[i]) == 0) {
                            st = dup_error(stk, sp, name, keys[i], err);
                            break;
                        }
                }
                if (st != WB_OK) break;
            }
        }
        fresh = 0;
        /* descend into the next container child, or pop */
        const cJSON *c = fr->next;
        while (c && !(cJSON_IsObject(c) || cJSON_IsArray(c))) c = c->next, fr->index++;
        if (!c) {
            sp--;
            continue;
        }
        fr->next = c->next;
        fr->index++;
        if (sp == cap) {
            jframe *ns = realloc(stk, (size_t)cap * 2 * sizeof *ns);
            if (!ns) {
                st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name);
                break;
            }
            stk = ns, cap *= 2;
        }
        stk[sp++] = (jframe){c, c->child, 0};
        fresh = 1;
    }
    free(stk);
    free(keys);
    return st;
}

wb_status wb_json_parse_strict(const char *text, size_t len, const char *name, cJSON **out,
                               wb_err *err) {
    if (!name) name = "JSON";
    if (!out) return wb_err_set(err, WB_ERR_ARG, "%s: out is NULL", name);
    *out = NULL;
    if (!text && len) return wb_err_set(err, WB_ERR_ARG, "%s: text is NULL", name);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text ? text : "", len, &end, 0);
    if (!root) {
        size_t at = end && text && end >= text ? (size_t)(end - text) : 0;
        return wb_err_set(err, WB_ERR_FORMAT, "%s: not valid JSON (near byte %zu)", name, at);
    }
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return wb_err_set(err, WB_ERR_FORMAT, "%s: not valid JSON (trailing bytes after the "
                              "value at byte %zu)", name, (size_t)(p - text));
        }
    wb_status st = wb_json_check_unique_keys(root, name, err);
    if (st != WB_OK) {
        cJSON_Delete(root);
        return st;
    }
    *out = root;
    return WB_OK;
}

wb_status wb_json_parse_file(const char *path, size_t max_bytes, cJSON **out, wb_err *err) {
    if (out) *out = NULL;
    char *text = NULL;
    size_t len = 0;
    wb_status st = wb_read_file(path, max_bytes, &text, &len, err);
    if (st != WB_OK) return st;
    st = wb_json_parse_strict(text, len, path, out, err);
    free(text);
    return st;
}
