/* safetensors.c - reader (mmap + full header validation), atomic writer, f16/bf16 conversion.
 *
 * File layout: u64 little-endian header length N, N bytes of JSON header, then the data area.
 * The header maps tensor names to {dtype, shape, data_offsets [begin, end)} relative to the data
 * area, plus an optional "__metadata__" string->string map. Every check is done at open time so
 * that a handle, once returned, only ever hands out views that lie inside the file.
 */
#include "wb_model.h"
#include "json_strict.h"

#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

/* HF's reader refuses headers above 100 MB; a bigger one is hostile, not a model. */
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* ------------------------------------------------------------------------------- handle */

typedef struct st_entry {
    char *name;
    wb_dtype dtype;
    int ndim;
    int64_t shape[WB_MAX_DIMS];
    uint64_t begin, end; /* relative to the data area */
} st_entry;

struct wb_safetensors {
    char *name;           /* file name for messages */
    const uint8_t *base;  /* whole file / buffer */
    size_t size;
    const uint8_t *data;  /* data area */
    size_t data_size;
    void *map;            /* non-NULL when we mmap'ed it */
    size_t map_size;
    st_entry *entries;
    int n;
    char **meta;          /* k0, v0, k1, v1, ... */
    int n_meta;
};

static const struct {
    const char *name;
    wb_dtype dtype;
    size_t size;
} st_dtypes[] = {{"F32", WB_F32, 4}, {"F16", WB_F16, 2}, {"BF16", WB_BF16, 2},
                 {"I32", WB_I32, 4}, {"I64", WB_I64, 8}};

static size_t dtype_size(wb_dtype d) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == d) return st_dtypes[i].size;
    return 0;
}

static const char *dtype_name(wb_dtype d) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == d) return st_dtypes[i].name;
    return "?";
}

void wb_safetensors_free(wb_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->entries[i].name);
    free(st->entries);
    for (int i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
    free(st->meta);
    if (st->map) munmap(st->map, st->map_size);
    free(st->name);
    free(st);
}

/* ------------------------------------------------------------------------------- parsing */

/* A JSON number that is an exact non-negative integer below 2^53 (doubles are exact there). */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

static wb_status parse_entry(wb_safetensors *st, const cJSON *item, st_entry *e, wb_err *err) {
    const char *nm = st->name, *tn = item->string;
    if (!cJSON_IsObject(item))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", nm,
                          tn);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(dt))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s': dtype is missing or not a string",
                          nm, tn);
    size_t i;
    for (i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(dt->valuestring, st_dtypes[i].name) == 0) break;
    if (i == sizeof st_dtypes / sizeof st_dtypes[0])
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s': dtype '%.32s' is not supported (F32, F16, BF16, I32, "
                          "I64)", nm, tn, dt->valuestring);
    e->dtype = st_dtypes[i].dtype;
    if (!cJSON_IsArray(sh))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s': shape is missing or not an array",
                          nm, tn);
    int nd = cJSON_GetArraySize(sh);
    if (nd > WB_MAX_DIMS)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s': shape has %d dimensions (max %d)",
                          nm, tn, nd, WB_MAX_DIMS);
    e->ndim = nd;
    uint64_t numel = 1;
    int d = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, sh) {
        uint64_t x;
        if (!json_uint(v, &x))
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: tensor '%s': shape[%d] is not a non-negative integer", nm, tn,
                              d);
        e->shape[d++] = (int64_t)x;
        if (x != 0 && numel > (UINT64_MAX / 8) / x)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s': shape product overflows", nm,
                              tn);
        numel *= x;
    }
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets must be an array [begin, end]", nm, tn);
    if (!json_uint(cJSON_GetArrayItem(of, 0), &e->begin) ||
        !json_uint(cJSON_GetArrayItem(of, 1), &e->end))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets are not non-negative integers", nm, tn);
    if (e->begin > e->end)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] end before they start", nm,
                          tn, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > st->data_size)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] lie outside the data area "
                          "of %zu bytes", nm, tn, (unsigned long long)e->begin,
                          (unsigned long long)e->end, st->data_size);
    uint64_t want = numel * dtype_size(e->dtype);
    if (e->end - e->begin != want)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets span %llu bytes but shape and dtype "
                          "need %llu", nm, tn, (unsigned long long)(e->end - e->begin),
                          (unsigned long long)want);
    e->name = strdup(tn);
    if (!e->name) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
    return WB_OK;
}

static wb_status parse_metadata(wb_safetensors *st, const cJSON *item, wb_err *err) {
    if (!cJSON_IsObject(item))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: __metadata__ is not a JSON object", st->name);
    int n = cJSON_GetArraySize(item);
    st->meta = calloc((size_t)n * 2 + 1, sizeof *st->meta);
    if (!st->meta) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", st->name);
    const cJSON *v;
    cJSON_ArrayForEach(v, item) {
        if (!cJSON_IsString(v))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: __metadata__ value for '%s' is not a string",
                              st->name, v->string);
        st->meta[2 * st->n_meta] = strdup(v->string);
        st->meta[2 * st->n_meta + 1] = strdup(v->valuestring);
        st->n_meta++;
        if (!st->meta[2 * st->n_meta - 2] || !st->meta[2 * st->n_meta - 1])
            return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", st->name);
    }
    return WB_OK;
}

static wb_status parse_header(wb_safetensors *st, wb_err *err) {
    const char *nm = st->name;
    if (st->size < 8)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: file of %zu bytes is too short for the 8-byte header length", nm,
                          st->size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | st->base[i];
    if (hl > st->size - 8)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: header length %llu runs past the end of the file (%zu bytes)", nm,
                          (unsigned long long)hl, st->size);
    if (hl > ST_MAX_HEADER)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: header length %llu exceeds the 100 MB limit",
                          nm, (unsigned long long)hl);
    if (hl < 2)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: header of %llu bytes cannot hold a JSON object",
                          nm, (unsigned long long)hl);
    st->data = st->base + 8 + hl;
    st->data_size = st->size - 8 - (size_t)hl;

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)st->base + 8, (size_t)hl, &end, 0);
    if (!root)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: header is not valid JSON (near byte %lld)", nm,
                          end ? (long long)(end - (const char *)st->base) : -1LL);
    wb_status s = WB_OK;
    if (!cJSON_IsObject(root)) {
        s = wb_err_set(err, WB_ERR_FORMAT, "%s: header is not a JSON object", nm);
        goto done;
    }
    /* Only whitespace (HF pads with spaces) may follow the object inside the header. */
    for (const char *p = end; p && p < (const char *)st->base + 8 + hl; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
            s = wb_err_set(err, WB_ERR_FORMAT, "%s: header has trailing bytes after the JSON object",
                           nm);
            goto done;
        }
    int count = cJSON_GetArraySize(root);
    st->entries = calloc((size_t)count + 1, sizeof *st->entries);
    if (!st->entries) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        goto done;
    }
    int seen_meta = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (seen_meta++) {
                s = wb_err_set(err, WB_ERR_FORMAT, "%s: __metadata__ appears twice", nm);
                goto done;
            }
            if ((s = parse_metadata(st, item, err))) goto done;
            continue;
        }
        if ((s = parse_entry(st, item, &st->entries[st->n], err))) goto done;
        st->n++;
    }
    if (st->n > 0) {
        st_entry **order = malloc((size_t)st->n * sizeof *order);
        if (!order) {
            s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
            goto done;
        }
        for (int i = 0; i < st->n; i++) order[i] = &st->entries[i];
        qsort(order, (size_t)st->n, sizeof *order, cmp_name);
        for (int i = 1; i < st->n && !s; i++)
            if (strcmp(order[i - 1]->name, order[i]->name) == 0)
                s = wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' appears twice", nm,
                               order[i]->name);
        qsort(order, (size_t)st->n, sizeof *order, cmp_begin);
        /* Empty tensors occupy no bytes and may sit anywhere, even on another's begin. */
        uint64_t prev_end = 0;
        const char *prev = NULL;
        for (int i = 0; i < st->n && !s; i++) {
            if (order[i]->begin == order[i]->end) continue;
            if (prev && order[i]->begin < prev_end)
                s = wb_err_set(err, WB_ERR_FORMAT,
                               "%s: tensor '%s': data_offsets overlap those of tensor '%s'", nm,
                               order[i]->name, prev);
            prev_end = order[i]->end;
            prev = order[i]->name;
        }
        free(order);
    }
    if (!s) s = wb_json_check_unique_keys(root, nm, err); /* e.g. an entry with two "dtype" */
done:
    cJSON_Delete(root);
    return s;
}

static wb_status st_alloc(const char *name, wb_safetensors **out, wb_err *err) {
    wb_safetensors *st = calloc(1, sizeof *st);
    if (st) st->name = strdup(name ? name : "<buffer>");
    if (!st || !st->name) {
        free(st);
        wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name ? name : "safetensors");
        return WB_ERR_NOMEM;
    }
    *out = st;
    return WB_OK;
}

wb_status wb_safetensors_parse(const void *data, size_t size, const char *name,
                               wb_safetensors **out, wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "wb_safetensors_parse: out is NULL");
    *out = NULL;
    if (!data && size)
        return wb_err_set(err, WB_ERR_ARG, "wb_safetensors_parse: data is NULL");
    wb_safetensors *st = NULL;
    wb_status s = st_alloc(name, &st, err);
    if (s) return s;
    st->base = data;
    st->size = size;
    if ((s = parse_header(st, err))) {
        wb_safetensors_free(st);
        return s;
    }
    *out = st;
    return WB_OK;
}

wb_status wb_safetensors_open(const char *path, wb_safetensors **out, wb_err *err) {
    if (!out || !path) return wb_err_set(err, WB_ERR_ARG, "wb_safetensors_open: NULL argument");
    *out = NULL;
    int fd;
    uint64_t fsize;
    wb_status os = wb_open_regular(path, &fd, &fsize, err); /* a FIFO must not block the open */
    if (os != WB_OK) return os;
    if (fsize > SIZE_MAX) {
        close(fd);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: too large to map", path);
    }
    size_t size = (size_t)fsize;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return wb_err_set(err, WB_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
        }
    }
    close(fd);
    wb_safetensors *st = NULL;
    wb_status s = st_alloc(path, &st, err);
    if (s) {
        if (map) munmap(map, size);
        return s;
    }
    st->map = map;
    st->map_size = size;
    st->base = map;
    st->size = size;
    if ((s = parse_header(st, err))) {
        wb_safetensors_free(st);
        return s;
    }
    *out = st;
    return WB_OK;
}

/* -------------------------------------------------------------------------------- access */

int wb_safetensors_count(const wb_safetensors *st) { return st ? st->n : 0; }

static void fill_view(const wb_safetensors *st, const st_entry *e, wb_tensor_view *v) {
    v->name = e->name;
    v->dtype = e->dtype;
    v->ndim = e->ndim;
    memset(v->shape, 0, sizeof v->shape);
    memcpy(v->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim);
    v->data = st->data + e->begin;
    v->nbytes = (size_t)(e->end - e->begin);
}

wb_status wb_safetensors_get(const wb_safetensors *st, int index, wb_tensor_view *out) {
    if (!st || !out || index < 0 || index >= st->n) return WB_ERR_RANGE;
    fill_view(st, &st->entries[index], out);
    return WB_OK;
}

wb_status wb_safetensors_find(const wb_safetensors *st, const char *name, wb_tensor_view *out,
                              wb_err *err) {
    if (!st || !name || !out)
        return wb_err_set(err, WB_ERR_ARG, "wb_safetensors_find: NULL argument");
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->entries[i].name, name) == 0) {
            fill_view(st, &st->entries[i], out);
            return WB_OK;
        }
    return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' not found", st->name, name);
}

const char *wb_safetensors_metadata(const wb_safetensors *st, const char *key) {
    if (!st || !key) return NULL;
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
    return NULL;
}

/* -------------------------------------------------------------------------------- writer */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            sb_put(b, tmp, 2);
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            sb_put(b, tmp, 6);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Tensor names and metadata keys must be distinct: the reader (a JSON object, keys unique)
 * rejects a file that repeats one. */
static wb_status check_unique_names(const char *path, const wb_tensor_view *t, int n,
                                    const char *const *kv, int n_meta, wb_err *err) {
    int m = n > n_meta ? n : n_meta;
    if (m < 2) return WB_OK;
    const char **names = malloc((size_t)m * sizeof *names);
    if (!names) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    wb_status s = WB_OK;
    for (int pass = 0; pass < 2 && s == WB_OK; pass++) {
        int k = pass == 0 ? n : n_meta;
        for (int i = 0; i < k; i++) names[i] = pass == 0 ? t[i].name : kv[2 * i];
        qsort(names, (size_t)k, sizeof *names, cmp_cstr);
        for (int i = 1; i < k && s == WB_OK; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                s = pass == 0 ? wb_err_set(err, WB_ERR_ARG, "%s: tensor name '%s' appears twice",
                                           path, names[i])
                              : wb_err_set(err, WB_ERR_ARG, "%s: metadata key '%s' appears twice",
                                           path, names[i]);
    }
    free(names);
    return s;
}

wb_status wb_safetensors_write(const char *path, const wb_tensor_view *tensors, int n,
                               const char *const *metadata_kv, int n_metadata, wb_err *err) {
    if (!path || n < 0 || n_metadata < 0 || (n > 0 && !tensors) ||
        (n_metadata > 0 && !metadata_kv))
        return wb_err_set(err, WB_ERR_ARG, "wb_safetensors_write: bad argument for %s",
                          path ? path : "(null path)");
    sbuf h = {0};
    sb_str(&h, "{");
    int first = 1;
    if (n_metadata > 0) {
        sb_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_metadata; i++) {
            if (!metadata_kv[2 * i] || !metadata_kv[2 * i + 1]) {
                free(h.p);
                return wb_err_set(err, WB_ERR_ARG, "%s: metadata pair %d has a NULL key or value",
                                  path, i);
            }
            if (i) sb_str(&h, ",");
            sb_json_str(&h, metadata_kv[2 * i]);
            sb_str(&h, ":");
            sb_json_str(&h, metadata_kv[2 * i + 1]);
        }
        sb_str(&h, "}");
        first = 0;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const wb_tensor_view *t = &tensors[i];
        size_t es = dtype_size(t->dtype);
        uint64_t numel = 1;
        int bad = !t->name || es == 0 || t->ndim < 0 || t->ndim > WB_MAX_DIMS ||
                  (t->nbytes && !t->data) || strcmp(t->name ? t->name : "", "__metadata__") == 0;
        for (int d = 0; !bad && d < t->ndim; d++) {
            if (t->shape[d] < 0) bad = 1;
            else numel *= (uint64_t)t->shape[d];
        }
        if (bad || numel * es != t->nbytes) {
            free(h.p);
            return wb_err_set(err, WB_ERR_ARG,
                              "%s: tensor %d ('%s') has a bad name, dtype, shape or nbytes", path,
                              i, t->name ? t->name : "(null)");
        }
        if (!first) sb_str(&h, ",");
        first = 0;
        sb_json_str(&h, t->name);
        char tmp[96];
        snprintf(tmp, sizeof tmp, ":{\"dtype\":\"%s\",\"shape\":[", dtype_name(t->dtype));
        sb_str(&h, tmp);
        for (int d = 0; d < t->ndim; d++) {
            snprintf(tmp, sizeof tmp, "%s%lld", d ? "," : "", (long long)t->shape[d]);
            sb_str(&h, tmp);
        }
        snprintf(tmp, sizeof tmp, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + t->nbytes));
        sb_str(&h, tmp);
        off += t->nbytes;
    }
    sb_str(&h, "}");
    while (!h.oom && h.n % 8) sb_put(&h, " ", 1); /* the data area starts 8-byte aligned */
    if (h.oom) {
        free(h.p);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory building the header", path);
    }

    /* What the reader would reject is rejected before a byte is written: the old file stays. */
    wb_status vs = check_unique_names(path, tensors, n, metadata_kv, n_metadata, err);
    if (vs != WB_OK) {
        free(h.p);
        return vs;
    }
    wb_atomic_file *af;
    wb_status s = wb_atomic_begin(path, &af, err);
    if (s != WB_OK) {
        free(h.p);
        return s;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    s = wb_atomic_write(af, len8, 8, err);
    if (s == WB_OK) s = wb_atomic_write(af, h.p, h.n, err);
    for (int i = 0; i < n && s == WB_OK; i++)
        if (tensors[i].nbytes) s = wb_atomic_write(af, tensors[i].data, tensors[i].nbytes, err);
    free(h.p);
    if (s != WB_OK) {
        wb_atomic_abort(af);
        return s;
    }
    return wb_atomic_commit(af, err);
}

/* ---------------------------------------------------------------------------- conversions */

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float wb_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        float f = (float)mant * 0x1p-24f; /* zero or subnormal: exact in f32 */
        return sign ? -f : f;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t wb_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf stays inf; NaN stays a (quiet) NaN with its top payload */
        return sign | (ax > 0x7f800000u ? (uint16_t)(0x7e00 | ((ax >> 13) & 0x3ff)) : 0x7c00);
    if (ax >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds (to even) past 65504 */
    if (ax < 0x38800000u) {
        /* Below the smallest normal: adding 0.5 makes the FPU round at 2^-24, the subnormal
         * step, with its own round-to-nearest-even; the low bits are then the half mantissa. */
        float t = bits_f32(ax) + 0.5f;
        return sign | (uint16_t)(f32_bits(t) - 0x3f000000u);
    }
    uint32_t odd = (ax >> 13) & 1;
    ax = ax - (112u << 23) + 0xfffu + odd;
    return sign | (uint16_t)(ax >> 13);
}

float wb_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

uint16_t wb_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
