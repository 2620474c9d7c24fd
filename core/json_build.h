/* json_build.h - building cJSON trees with one sticky failure flag. cJSON's Add* functions return
 * NULL when an allocation fails and leave the tree short of that field; cJSON_AddItemToObject
 * also leaves the item with the caller when its key cannot be copied. Built through these, a tree
 * is either complete or its builder says it failed, and every item handed over is owned by the
 * tree or deleted. Callers check b->failed (or use jsb_done) once at the end. */
#ifndef WB_JSON_BUILD_H
#define WB_JSON_BUILD_H

#include <cjson/cJSON.h>

typedef struct jsb {
    int failed;
} jsb;

static inline cJSON *jsb_mark(jsb *b, cJSON *x) {
    if (!x) b->failed = 1;
    return x;
}

static inline cJSON *jsb_str(jsb *b, cJSON *o, const char *k, const char *v) {
    return jsb_mark(b, cJSON_AddStringToObject(o, k, v));
}
static inline cJSON *jsb_bool(jsb *b, cJSON *o, const char *k, int v) {
    return jsb_mark(b, cJSON_AddBoolToObject(o, k, v));
}
static inline cJSON *jsb_num(jsb *b, cJSON *o, const char *k, double v) {
    return jsb_mark(b, cJSON_AddNumberToObject(o, k, v));
}
static inline cJSON *jsb_null(jsb *b, cJSON *o, const char *k) {
    return jsb_mark(b, cJSON_AddNullToObject(o, k));
}
static inline cJSON *jsb_obj(jsb *b, cJSON *o, const char *k) {
    return jsb_mark(b, cJSON_AddObjectToObject(o, k));
}
static inline cJSON *jsb_arr(jsb *b, cJSON *o, const char *k) {
    return jsb_mark(b, cJSON_AddArrayToObject(o, k));
}

/* item into object o under k / onto array a, owned by the tree from then on; a NULL item (a
 * failed create) or a failed add marks the builder and deletes the item */
static inline cJSON *jsb_put(jsb *b, cJSON *o, const char *k, cJSON *item) {
    if (item && o && cJSON_AddItemToObject(o, k, item)) return item;
    cJSON_Delete(item);
    b->failed = 1;
    return NULL;
}
static inline cJSON *jsb_push(jsb *b, cJSON *a, cJSON *item) {
    if (item && a && cJSON_AddItemToArray(a, item)) return item;
    cJSON_Delete(item);
    b->failed = 1;
    return NULL;
}

/* root when the build succeeded, else NULL (and root deleted) */
static inline cJSON *jsb_done(jsb *b, cJSON *root) {
    if (b->failed || !root) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

#endif
