/* weights.c - a checkpoint's tensors by name, loaded and checked once for every family; and the
 * matrix type wb_mat with the one function that picks its kernels.
 *
 * A directory holds model.safetensors, or model.safetensors.index.json whose weight_map sends
 * each tensor name to a shard file. The index is sorted twice (by shard file, to open each shard
 * once; by tensor name, to find tensors by binary search), so an index naming tens of thousands
 * of shards or tensors costs n log n, never a scan per entry.
 *
 * Loading is two passes over the family's list of wanted tensors: check every one (present,
 * float dtype, exact shape) before allocating anything, so a config announcing a model the files
 * do not hold fails cheaply; then widen F32/F16/BF16 into one 64-byte aligned F32 block, or keep
 * BF16 matrices in the mapping. Every tensor is scanned for NaN/Inf once, as loaded: a corrupt
 * checkpoint is a load error naming the tensor, not garbage logits later.
 */
#include "cpu.h"
#include "fileio.h"
#include "json_strict.h"
#include "llama_internal.h"
#include "quant.h"
#include "weights_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cblas.h>
#include <cjson/cJSON.h>

#define INDEX_MAX_BYTES (64u << 20)

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* --------------------------------------------------------------------------------- files */

typedef struct map_entry {
    const char *tensor, *file; /* point into the parsed index */
    int shard;
} map_entry;

struct wb_weights {
    char *index_path;        /* NULL for a single model.safetensors */
    cJSON *index;
    map_entry *map;          /* [n_map] sorted by tensor name */
    int n_map;
    char **shard_paths;      /* [n_shards] */
    wb_safetensors **shards; /* [n_shards]; entries moved to a store are NULL */
    int n_shards;
    int quant; /* wb_weights_set_quant */
    wb_gguf_src *gguf; /* a GGUF file instead of safetensors (weights_gguf.c) */
    wb_type_count types[WB_MAX_TYPE_COUNTS]; /* file types of the last load */
    int n_types;
};

void wb_weights_set_quant(wb_weights *w, int weights) { w->quant = weights; }

void wb_weights_free(wb_weights *w) {
    if (!w) return;
    free(w->index_path);
    cJSON_Delete(w->index);
    free(w->map);
    for (int i = 0; i < w->n_shards; i++) {
        free(w->shard_paths[i]);
        if (w->shards) wb_safetensors_free(w->shards[i]);
    }
    free(w->shard_paths);
    free(w->shards);
    wb_gguf_src_free(w->gguf);
    free(w);
}

wb_status wb_weights_open_gguf(struct wb_gguf *g, const char *path, const wb_config *c,
                               wb_weights **out, wb_err *err) {
    *out = NULL;
    wb_weights *w = calloc(1, sizeof *w);
    if (!w) {
        wb_gguf_free(g);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    }
    wb_status s = wb_gguf_src_new(g, path, c, &w->gguf, err);
    if (s) free(w);
    else *out = w;
    return s;
}

int wb_weights_types(const wb_weights *w, wb_type_count *out, int cap) {
    if (w && w->gguf) return wb_gguf_src_types(w->gguf, out, cap);
    int n = 0;
    for (; w && n < w->n_types && n < cap; n++) out[n] = w->types[n];
    return n;
}

/* Count one more tensor of file type `name` (safetensors dtypes). */
static void note_type(wb_weights *w, const char *name) {
    for (int i = 0; i < w->n_types; i++)
        if (!strcmp(w->types[i].name, name)) {
            w->types[i].n++;
            return;
        }
    if (w->n_types < WB_MAX_TYPE_COUNTS) {
        snprintf(w->types[w->n_types].name, sizeof w->types[0].name, "%s", name);
        w->types[w->n_types++].n = 1;
    }
}

static int by_file(const void *a, const void *b) {
    return strcmp(((const map_entry *)a)->file, ((const map_entry *)b)->file);
}

static int by_tensor(const void *a, const void *b) {
    return strcmp(((const map_entry *)a)->tensor, ((const map_entry *)b)->tensor);
}

/* The index's weight_map into w->map and the distinct shard paths. */
static wb_status read_index(wb_weights *w, const char *dir, wb_err *err) {
    const char *ipath = w->index_path;
    char *text = NULL;
    size_t len = 0;
    wb_status s = wb_read_file(ipath, INDEX_MAX_BYTES, &text, &len, err);
    if (s) return s;
    w->index = cJSON_ParseWithLength(text, len);
    free(text);
    if (!w->index || !cJSON_IsObject(w->index))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: not a JSON object", ipath);
    if ((s = wb_json_check_unique_keys(w->index, ipath, err))) return s;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(w->index, "weight_map");
    if (!cJSON_IsObject(wm) || !wm->child)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: key \"weight_map\" must be a non-empty "
                          "object of tensor name -> file", ipath);
    int n = 0;
    for (const cJSON *e = wm->child; e; e = e->next) n++;
    if (!(w->map = malloc((size_t)n * sizeof *w->map)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", ipath);
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: weight_map[\"%.80s\"] must be a file "
                              "name string", ipath, e->string);
        const char *f = e->valuestring;
        /* a shard name is a file in the model directory, never a path out of it */
        if (!*f || strchr(f, '/') || f[0] == '.' || strlen(f) > 255)
            return wb_err_set(err, WB_ERR_FORMAT,
                              "%s: weight_map names \"%.60s\", which is not a file name in the "
                              "model directory", ipath, f);
        w->map[w->n_map++] = (map_entry){e->string, f, 0};
    }
    qsort(w->map, (size_t)n, sizeof *w->map, by_file);
    int n_files = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(w->map[i].file, w->map[i - 1].file)) n_files++;
    if (!(w->shard_paths = calloc((size_t)n_files, sizeof *w->shard_paths)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", ipath);
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(w->map[i].file, w->map[i - 1].file)) {
            if (!(w->shard_paths[w->n_shards] = wb_path_join(dir, w->map[i].file)))
                return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", ipath);
            w->n_shards++;
        }
        w->map[i].shard = w->n_shards - 1;
    }
    qsort(w->map, (size_t)n, sizeof *w->map, by_tensor);
    for (int i = 1; i < n; i++)
        if (!strcmp(w->map[i].tensor, w->map[i - 1].tensor))
            return wb_err_set(err, WB_ERR_FORMAT, "%s: weight_map names tensor '%.80s' twice",
                              ipath, w->map[i].tensor);
    return WB_OK;
}

wb_status wb_weights_open(const char *dir, wb_weights **out, wb_err *err) {
    *out = NULL;
    wb_weights *w = calloc(1, sizeof *w);
    char *ipath = wb_path_join(dir, "model.safetensors.index.json");
    wb_status s = WB_OK;
    if (!w || !ipath) {
        free(w);
        free(ipath);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
    }
    struct stat sb;
    if (stat(ipath, &sb) != 0) { /* no index: a single file */
        free(ipath);
        if (!(w->shard_paths = calloc(1, sizeof *w->shard_paths)) ||
            !(w->shard_paths[0] = wb_path_join(dir, "model.safetensors"))) {
            s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
            goto done;
        }
        w->n_shards = 1;
    } else {
        w->index_path = ipath;
        if ((s = read_index(w, dir, err))) goto done;
    }
    if (!(w->shards = calloc((size_t)w->n_shards, sizeof *w->shards))) {
        s = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    for (int i = 0; i < w->n_shards; i++)
        if ((s = wb_safetensors_open(w->shard_paths[i], &w->shards[i], err))) goto done;
done:
    if (s) wb_weights_free(w);
    else *out = w;
    return s;
}

/* The view of `name` and the file it is in (for messages). */
static wb_status find(const wb_weights *w, const char *name, wb_tensor_view *v,
                      const char **path, wb_err *err) {
    int k = 0;
    if (w->map) {
        const map_entry key = {name, NULL, 0};
        const map_entry *e = bsearch(&key, w->map, (size_t)w->n_map, sizeof key, by_tensor);
        if (!e)
            return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' is missing from weight_map",
                              w->index_path, name);
        k = e->shard;
    }
    *path = w->shard_paths[k];
    if (wb_safetensors_find(w->shards[k], name, v, NULL) != WB_OK)
        return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' is missing%s", w->shard_paths[k],
                          name, w->map ? " (model.safetensors.index.json maps it here)" : "");
    return WB_OK;
}

int wb_weights_has(const wb_weights *w, const char *name) {
    wb_tensor_view v;
    const char *p;
    if (w && w->gguf) return wb_gguf_src_has(w->gguf, name);
    return w && find(w, name, &v, &p, NULL) == WB_OK;
}

/* ------------------------------------------------------------------------------ loading */

static wb_status check(const wb_weights *w, const wb_want *t, wb_tensor_view *v,
                       const char **path, wb_err *err) {
    wb_status s = find(w, t->name, v, path, err);
    if (s) return s;
    if (v->dtype != WB_F32 && v->dtype != WB_F16 && v->dtype != WB_BF16)
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16", *path,
                          t->name, v->dtype == WB_I32 ? "I32" : "I64");
    const int nd = t->d1 ? 2 : 1;
    if (v->ndim != nd || v->shape[0] != t->d0 || (nd == 2 && v->shape[1] != t->d1)) {
        char got[128] = "[", *q = got + 1;
        for (int i = 0; i < v->ndim && q < got + sizeof got - 24; i++)
            q += snprintf(q, 24, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
        snprintf(q, 2, "]");
        if (nd == 1)
            return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%lld]",
                              *path, t->name, got, (long long)t->d0);
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' has shape %s, expected [%lld, %lld]", *path, t->name,
                          got, (long long)t->d0, (long long)t->d1);
    }
    return WB_OK;
}

static void widen(float *dst, const wb_tensor_view *v, size_t n) {
    const uint8_t *src = v->data; /* may be unaligned: element by element through memcpy */
    if (v->dtype == WB_F32) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = v->dtype == WB_F16 ? wb_f16_to_f32(h) : wb_bf16_to_f32(h);
    }
}

/* [d0, d1] -> [d1, d0], tiled so both sides stay in cache for the big matrices. */
static void transpose(float *dst, const float *src, size_t R, size_t C) {
    const size_t B = 32;
    for (size_t i0 = 0; i0 < R; i0 += B)
        for (size_t j0 = 0; j0 < C; j0 += B)
            for (size_t i = i0; i < i0 + B && i < R; i++)
                for (size_t j = j0; j < j0 + B && j < C; j++) dst[j * R + i] = src[i * C + j];
}

/* Index of the first NaN/Inf, or n. An exponent field of all ones is NaN or Inf; adding one
 * exponent unit then carries into the top bit, so a block is one and/add/or pass (vectorised by
 * the compiler) and only a block that has one is searched element by element. */
static size_t first_nonfinite_f32(const float *x, size_t n) {
    for (size_t i0 = 0; i0 < n; i0 += 4096) {
        const size_t i1 = n - i0 < 4096 ? n : i0 + 4096;
        uint32_t acc = 0;
        for (size_t i = i0; i < i1; i++) {
            uint32_t u;
            memcpy(&u, x + i, 4);
            acc |= (u & 0x7f800000u) + 0x00800000u;
        }
        if (acc & 0x80000000u)
            for (size_t i = i0; i < i1; i++) {
                uint32_t u;
                memcpy(&u, x + i, 4);
                if ((u & 0x7f800000u) == 0x7f800000u) return i;
            }
    }
    return n;
}

static size_t first_nonfinite_bf16(const uint16_t *x, size_t n) {
    for (size_t i0 = 0; i0 < n; i0 += 8192) {
        const size_t i1 = n - i0 < 8192 ? n : i0 + 8192;
        uint16_t acc = 0;
        for (size_t i = i0; i < i1; i++) acc |= (uint16_t)((x[i] & 0x7f80u) + 0x0080u);
        if (acc & 0x8000u)
            for (size_t i = i0; i < i1; i++)
                if ((x[i] & 0x7f80u) == 0x7f80u) return i;
    }
    return n;
}

static wb_status nonfinite_error(const char *path, const char *name, size_t i, size_t n,
                                 wb_err *err) {
    return wb_err_set(err, WB_ERR_FORMAT,
                      "%s: tensor '%s' holds NaN or Inf (element %zu of %zu); the checkpoint is "
                      "corrupt", path, name, i, n);
}

static int keeps_bf16(const wb_want *t, const wb_tensor_view *v, int keep_bf16) {
    return keep_bf16 && t->mat && !t->transpose && v->dtype == WB_BF16;
}

/* Matrices to Q8_0 / Q4_0 after loading (wb_weights_set_quant): each row quantized from its F32
 * or BF16 values into one block owned by the store; matrices with rows not a multiple of 32
 * stay as they are. (A tied head is a copy of the embedding's wb_mat made after loading, so it
 * shares the quantized rows.) Each matrix starts on a cache line: the tile layout is then made
 * in place, and the AVX-512 tile kernels read it in 64-byte registers; from malloc's 16-byte
 * alignment every such load of a Q8_0 matrix straddled two lines (docs/performance.md Session 18). */
static wb_status quantize_mats(const wb_want *wants, int n, int weights, wb_weight_store *out,
                               wb_err *err) {
    const wb_qtype qt = weights == WB_WEIGHTS_Q4_0 ? WB_QT_Q4_0 : WB_QT_Q8_0;
    const wb_mat_dtype dt = weights == WB_WEIGHTS_Q4_0 ? WB_MAT_Q4_0 : WB_MAT_Q8_0;
    size_t total = 0, widest = 0;
    for (int i = 0; i < n; i++) {
        const wb_mat *m = wants[i].mat;
        if (!m || m->cols % 32) continue;
        total += (wb_quant_row_bytes(qt, m->cols) * (size_t)m->rows + 63) & ~(size_t)63;
        if ((size_t)m->cols > widest) widest = (size_t)m->cols;
    }
    if (!total) return WB_OK;
    uint8_t *q = aligned_alloc(64, total);
    float *row = malloc(widest * sizeof *row);
    if (!q || !row) {
        free(q), free(row);
        return wb_err_set(err, WB_ERR_NOMEM, "quantizing weights: out of memory for %zu bytes", total);
    }
    uint8_t *p = q;
    for (int i = 0; i < n; i++) {
        wb_mat *m = wants[i].mat;
        if (!m || m->cols % 32) continue;
        /* the source rows are no longer read: weight_bytes counts what the forward pass reads */
        if (m->dtype == WB_MAT_BF16) out->mapped_bf16_bytes -= (size_t)m->rows * m->cols * 2;
        else out->unread_f32_bytes += (size_t)m->rows * m->cols * 4;
        const size_t rb = wb_quant_row_bytes(qt, m->cols);
        for (int r = 0; r < m->rows; r++) {
            wb_mat_row(m, r, row);
            wb_quantize_row(qt, p + rb * (size_t)r, row, m->cols);
        }
        *m = (wb_mat){.w = p, .dtype = dt, .rows = m->rows, .cols = m->cols};
        p += (rb * (size_t)m->rows + 63) & ~(size_t)63;
    }
    free(row);
    out->quant = q;
    out->quant_bytes = total;
    return WB_OK;
}

wb_status wb_weights_load(wb_weights *w, const wb_want *wants, int n, int keep_bf16,
                          wb_weight_store *out, int64_t *n_params, wb_err *err) {
    memset(out, 0, sizeof *out);
    if (w->gguf) return wb_gguf_src_load(w->gguf, wants, n, keep_bf16, w->quant, out, n_params, err);
    w->n_types = 0;
    wb_tensor_view *views = calloc((size_t)(n > 0 ? n : 1), sizeof *views);
    const char **paths = calloc((size_t)(n > 0 ? n : 1), sizeof *paths);
    float *tmp = NULL;
    wb_status s = WB_OK;
    if (!views || !paths) {
        s = wb_err_set(err, WB_ERR_NOMEM, "loading weights: out of memory");
        goto done;
    }
    size_t floats = 0, copies = 0, biggest_t = 0;
    int64_t np = 0, mapped = 0;
    for (int i = 0; i < n; i++) {
        if ((s = check(w, &wants[i], &views[i], &paths[i], err))) goto done;
        note_type(w, views[i].dtype == WB_F32 ? "F32" : views[i].dtype == WB_F16 ? "F16" : "BF16");
        const size_t ne = (size_t)wants[i].d0 * (size_t)(wants[i].d1 ? wants[i].d1 : 1);
        np += (int64_t)ne;
        if (keeps_bf16(&wants[i], &views[i], keep_bf16)) {
            if ((uintptr_t)views[i].data % 2) copies += ne;
            else mapped++;
        } else {
            floats += align16(ne);
            if (wants[i].transpose && ne > biggest_t) biggest_t = ne;
        }
    }
    out->block = aligned_alloc(64, (floats ? floats : 16) * sizeof(float));
    out->bf16_copy = copies ? malloc(copies * 2) : NULL;
    tmp = biggest_t ? malloc(biggest_t * sizeof *tmp) : NULL;
    if (!out->block || (copies && !out->bf16_copy) || (biggest_t && !tmp)) {
        s = wb_err_set(err, WB_ERR_NOMEM, "loading weights: out of memory for %zu weights",
                       floats + copies);
        goto done;
    }
    out->block_floats = floats;
    float *fp = out->block;
    uint16_t *cp = out->bf16_copy;
    for (int i = 0; i < n; i++) {
        const wb_want *t = &wants[i];
        const size_t ne = (size_t)t->d0 * (size_t)(t->d1 ? t->d1 : 1);
        const void *data;
        size_t bad;
        wb_mat_dtype dt = WB_MAT_F32;
        if (keeps_bf16(t, &views[i], keep_bf16)) {
            const uint16_t *src = views[i].data;
            if ((uintptr_t)src % 2) {
                memcpy(cp, src, ne * 2);
                src = cp;
                cp += ne;
            } else {
                out->mapped_bf16_bytes += ne * 2;
            }
            if ((bad = first_nonfinite_bf16(src, ne)) < ne) {
                s = nonfinite_error(paths[i], t->name, bad, ne, err);
                goto done;
            }
            data = src;
            dt = WB_MAT_BF16;
        } else {
            if (t->transpose) {
                widen(tmp, &views[i], ne);
                transpose(fp, tmp, (size_t)t->d0, (size_t)t->d1);
            } else {
                widen(fp, &views[i], ne);
            }
            memset(fp + ne, 0, (align16(ne) - ne) * sizeof(float));
            if ((bad = first_nonfinite_f32(fp, ne)) < ne) {
                /* element index in the file's order */
                if (t->transpose) bad = (bad % (size_t)t->d0) * (size_t)t->d1 + bad / (size_t)t->d0;
                s = nonfinite_error(paths[i], t->name, bad, ne, err);
                goto done;
            }
            data = fp;
            fp += align16(ne);
        }
        if (t->vec) *t->vec = data;
        if (t->mat) {
            const int rows = (int)(t->transpose ? t->d1 : t->d0),
                      cols = (int)(t->transpose ? t->d0 : (t->d1 ? t->d1 : 1));
            *t->mat = (wb_mat){.w = data, .dtype = dt, .rows = rows, .cols = cols};
        }
    }
    if (mapped) { /* the BF16 matrices live in these mappings: the store keeps them */
        out->shards = w->shards;
        out->n_shards = w->n_shards;
        w->shards = NULL;
    }
    if (w->quant && (s = quantize_mats(wants, n, w->quant, out, err))) goto done;
    if ((s = wb_weight_store_tile(out, wants, n, "loading weights", err))) goto done;
    /* what was loaded, by name, for exporters (the matrices as quantized, if they were) */
    if ((s = wb_weight_store_list(out, wants, n, "loading weights", err))) goto done;
    if (n_params) *n_params = np;
done:
    free(tmp);
    free(views);
    free(paths);
    if (s) wb_weight_store_free(out);
    return s;
}

wb_status wb_weight_store_list(wb_weight_store *s, const wb_want *wants, int n, const char *what,
                               wb_err *err) {
    if (!(s->loaded = calloc((size_t)(n > 0 ? n : 1), sizeof *s->loaded)))
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < n; i++) {
        wb_loaded_tensor *lt = &s->loaded[i];
        memcpy(lt->name, wants[i].name, sizeof lt->name);
        lt->d0 = wants[i].d0, lt->d1 = wants[i].d1;
        if (wants[i].mat) lt->mat = *wants[i].mat;
        if (wants[i].vec) lt->vec = *wants[i].vec;
    }
    s->n_loaded = n;
    return WB_OK;
}

/* The block format of a quantized dtype, or -1. */
static int mat_qtype(wb_mat_dtype d);

static int owns(const uint8_t *base, size_t bytes, const void *p) {
    return base && (const uint8_t *)p >= base && (const uint8_t *)p < base + bytes;
}

wb_status wb_weight_store_tile(wb_weight_store *s, const wb_want *wants, int n, const char *what,
                               wb_err *err) {
    if (!wb_quant_tiles_native()) return WB_OK;
    size_t copy = 0, widest = 0;
    for (int i = 0; i < n; i++) {
        const wb_mat *m = wants[i].mat;
        const int qt = m ? mat_qtype(m->dtype) : -1;
        if (qt < 0 || m->tiles || !wb_quant_tiles_ok((wb_qtype)qt, m->rows, m->cols)) continue;
        const size_t rb = wb_quant_row_bytes((wb_qtype)qt, m->cols);
        if (16 * rb > widest) widest = 16 * rb;
        if (!owns(s->quant, s->quant_bytes, m->w) && !owns(s->gguf_rows, s->gguf_rows_bytes, m->w))
            copy += (rb * (size_t)m->rows + 63) & ~(size_t)63;
    }
    if (!widest) return WB_OK;
    uint8_t *group = malloc(widest);
    uint8_t *tiles = copy ? aligned_alloc(64, copy) : NULL;
    const void **orig = calloc((size_t)n, sizeof *orig); /* each want's bytes before */
    if (!group || (copy && !tiles) || !orig) {
        free(group), free(tiles), free(orig);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory for %zu bytes of quantized "
                          "matrices in the tile layout", what, copy + widest);
    }
    uint8_t *tp = tiles;
    for (int i = 0; i < n; i++) {
        wb_mat *m = wants[i].mat;
        const int qt = m ? mat_qtype(m->dtype) : -1;
        if (qt < 0 || m->tiles || !wb_quant_tiles_ok((wb_qtype)qt, m->rows, m->cols)) continue;
        int j = 0; /* bytes two wants share are converted once */
        while (j < i && !(orig[j] == m->w && wants[j].mat->dtype == m->dtype &&
                          wants[j].mat->rows == m->rows && wants[j].mat->cols == m->cols))
            j++;
        orig[i] = m->w;
        if (j < i) {
            *m = *wants[j].mat;
            continue;
        }
        const size_t rb = wb_quant_row_bytes((wb_qtype)qt, m->cols), bytes = rb * (size_t)m->rows;
        const uint8_t *src = m->w;
        if (owns(s->quant, s->quant_bytes, src) || owns(s->gguf_rows, s->gguf_rows_bytes, src)) {
            uint8_t *dst = (uint8_t *)(uintptr_t)src; /* the store's own bytes: group by group */
            for (int r = 0; r < m->rows; r += 16) {
                memcpy(group, dst + rb * (size_t)r, 16 * rb);
                wb_quant_to_tiles((wb_qtype)qt, dst + rb * (size_t)r, group, 16, m->cols);
            }
        } else { /* out of a mapping: its pages are then no longer read */
            wb_quant_to_tiles((wb_qtype)qt, tp, src, m->rows, m->cols);
            m->w = tp;
            tp += (bytes + 63) & ~(size_t)63;
            s->mapped_quant_bytes -= bytes;
            s->tiles_bytes += bytes;
        }
        m->tiles = 1, m->tile_off = 0;
    }
    free(group);
    free(orig);
    s->tiles = tiles;
    return WB_OK;
}

void wb_weight_store_free(wb_weight_store *s) {
    if (!s) return;
    free(s->tiles);
    for (int i = 0; i < s->n_shards; i++) wb_safetensors_free(s->shards[i]);
    free(s->shards);
    free(s->block);
    free(s->bf16_copy);
    free(s->quant);
    free(s->loaded);
    wb_gguf_free(s->gguf);
    free(s->gguf_rows);
    memset(s, 0, sizeof *s);
}

size_t wb_weight_store_bytes(const wb_weight_store *s) {
    return s ? s->block_floats * sizeof(float) - s->unread_f32_bytes + s->mapped_bf16_bytes +
                   s->quant_bytes + s->mapped_quant_bytes + s->gguf_rows_bytes + s->tiles_bytes
             : 0;
}

/* ----------------------------------------------------------------------------- matrices */

static int mat_qtype(wb_mat_dtype d) {
    switch (d) {
    case WB_MAT_Q8_0: return WB_QT_Q8_0;
    case WB_MAT_Q4_0: return WB_QT_Q4_0;
    case WB_MAT_Q4_K: return WB_QT_Q4_K;
    case WB_MAT_Q6_K: return WB_QT_Q6_K;
    case WB_MAT_Q5_0: return WB_QT_Q5_0;
    case WB_MAT_IQ4_NL: return WB_QT_IQ4_NL;
    case WB_MAT_Q5_K: return WB_QT_Q5_K;
    case WB_MAT_Q4_1: return WB_QT_Q4_1;
    case WB_MAT_Q5_1: return WB_QT_Q5_1;
    default: return -1;
    }
}

static size_t row_bytes(const wb_mat *m) {
    const int qt = mat_qtype(m->dtype);
    if (qt >= 0) return wb_quant_row_bytes((wb_qtype)qt, m->cols);
    return (size_t)m->cols * (m->dtype == WB_MAT_BF16 ? 2 : 4);
}

wb_mat wb_mat_rows(const wb_mat *m, int r0, int r1) {
    wb_mat v = *m;
    if (m->tiles) { /* groups of 16 rows keep 16 x the row bytes: the view's first group */
        const int a = m->tile_off + r0;
        v.w = (const char *)m->w + (size_t)(a / 16) * 16 * row_bytes(m);
        v.tile_off = a % 16;
        v.rows = r1 - r0;
        return v;
    }
    v.w = (const char *)m->w + (size_t)r0 * row_bytes(m);
    v.rows = r1 - r0;
    return v;
}

void wb_mat_mul(float *Y, const float *X, int n, const wb_mat *W, const float *b, int r0, int r1,
                int accumulate, int mode) {
    const int out = W->rows, in = W->cols, w = r1 - r0;
    if (w <= 0 || n <= 0) return;
    const int qt = mat_qtype(W->dtype);
    if (qt >= 0 && W->tiles) {
        wb_gemm_qt((wb_qtype)qt, W->tile_off, Y, (size_t)out, X, (size_t)in, n, W->w, b, in, r0, r1,
                   accumulate, NULL);
        return;
    }
    if (qt >= 0) { /* integer dots up to 48 inputs */
        wb_gemm_q((wb_qtype)qt, Y, (size_t)out, X, (size_t)in, n,
                  W->w, b, in, r0, r1, accumulate, NULL);
        return;
    }
    if (W->dtype == WB_MAT_BF16) {
        if (mode == WB_MM_PROMPT)
            wb_kt()->gemm_bf16(Y, (size_t)out, X, (size_t)in, n, W->w, b, in, r0, r1, accumulate);
        else
            wb_gemv_bf16_forward(Y, (size_t)out, X, (size_t)in, n, W->w, b, in, r0, r1, accumulate);
        return;
    }
    if (mode == WB_MM_PROMPT) {
        wb_kt()->gemm_f32(Y, (size_t)out, X, (size_t)in, n, W->w, b, in, r0, r1, accumulate);
        return;
    }
    if (mode != WB_MM_VARIANT || n == 1) {
        wb_gemv_batch_forward(Y, (size_t)out, X, (size_t)in, n, W->w, b, in, r0, r1, accumulate);
        return;
    }
    /* the bias is written (or added) first, as the initial C of a beta = 1 GEMM: it costs what
     * the zeroing pass of beta = 0 would */
    if (b)
        for (int t = 0; t < n; t++) {
            float *y = Y + (size_t)t * out + r0;
            if (accumulate)
                for (int i = 0; i < w; i++) y[i] += b[r0 + i];
            else
                memcpy(y, b + r0, (size_t)w * sizeof *y);
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w, in, 1.0f, X, in,
                (const float *)W->w + (size_t)r0 * in, in, b || accumulate ? 1.0f : 0.0f, Y + r0,
                out);
}

int wb_mm_runs(const wb_seq_rows *seqs, int n_seqs, int variant, wb_mm_run *runs) {
    int nr = 0;
    for (int s = 0, row = 0; s < n_seqs; row += seqs[s].n, s++) {
        const int mode = variant ? WB_MM_VARIANT
                         : seqs[s].n >= WB_PROMPT_ROWS ? WB_MM_PROMPT
                                                       : WB_MM_ROWS;
        if (nr && runs[nr - 1].mode == mode && mode != WB_MM_PROMPT) { /* a prompt: a call alone */
            runs[nr - 1].n += seqs[s].n;
        } else {
            runs[nr++] = (wb_mm_run){row, seqs[s].n, mode};
        }
    }
    return nr;
}

int wb_mat_takes_xpack(const wb_mat *W) {
    return W->dtype == WB_MAT_F32 || W->dtype == WB_MAT_BF16;
}

int wb_mat_xpack_shares(const wb_mat *A, const wb_mat *B) {
    return wb_mat_takes_xpack(A) && wb_mat_takes_xpack(B) &&
           (A->dtype == WB_MAT_BF16) == (B->dtype == WB_MAT_BF16);
}

int wb_mat_xblocks(int n) { return (n + wb_kt()->gemm_mr - 1) / wb_kt()->gemm_mr; }

size_t wb_mat_xrow(int in) { return wb_kt()->gemm_xrow(in); }

void wb_mat_xpack(float *P, const float *X, int n, int in, int i0, int i1, const wb_mat *W) {
    wb_kt()->gemm_xpack(P, X, (size_t)in, n, in, i0, i1, W->dtype == WB_MAT_BF16);
}

void wb_mat_mul_packed(float *Y, const float *P, int n, const wb_mat *W, const float *b, int r0,
                       int r1, int accumulate) {
    if (r1 <= r0 || n <= 0) return;
    if (W->dtype == WB_MAT_BF16)
        wb_kt()->gemm_bf16_packed(Y, (size_t)W->rows, P, n, W->w, b, W->cols, r0, r1, accumulate);
    else
        wb_kt()->gemm_f32_packed(Y, (size_t)W->rows, P, n, W->w, b, W->cols, r0, r1, accumulate);
}

int wb_mat_takes_qact(const wb_mat *W) { return mat_qtype(W->dtype) >= 0; }

size_t wb_mat_qact_bytes(int in) { return wb_quant_act_bytes(in); }

void wb_mat_qact(void *Q, const float *X, int in, int t0, int t1) {
    const size_t ab = wb_quant_act_bytes(in);
    for (int t = t0; t < t1; t++) wb_quantize_act((char *)Q + ab * (size_t)t, X + (size_t)t * in, in);
}

void wb_mat_mul_qact(float *Y, const void *Q, int n, const wb_mat *W, const float *b, int r0,
                     int r1, int accumulate) {
    if (r1 <= r0 || n <= 0) return;
    if (W->tiles) {
        wb_gemm_qt_act((wb_qtype)mat_qtype(W->dtype), W->tile_off, Y, (size_t)W->rows, Q, n, W->w, b,
                       W->cols, r0, r1, accumulate);
        return;
    }
    wb_gemm_q_act((wb_qtype)mat_qtype(W->dtype), Y, (size_t)W->rows, Q, n, W->w, b, W->cols, r0,
                  r1, accumulate);
}

size_t wb_mat_qgroup_bytes(const wb_mat *W, int n) {
    const int qt = mat_qtype(W->dtype);
    if (!W->tiles || W->tile_off || qt < 0) return 0;
    return wb_quant_group_bytes((wb_qtype)qt, n, W->cols);
}

void wb_mat_qgroup(const wb_mat *W, void *G, const float *X, int n, int t0, int t1) {
    wb_quant_group_act((wb_qtype)mat_qtype(W->dtype), G, X, (size_t)W->cols, n, W->cols, t0, t1);
}

void wb_mat_mul_qgroup(float *Y, const void *G, int n, const wb_mat *W, const float *b, int r0,
                       int r1, int accumulate) {
    if (r1 <= r0 || n <= 0) return;
    wb_gemm_qt_group((wb_qtype)mat_qtype(W->dtype), Y, (size_t)W->rows, G, n, W->w, b, W->cols, r0, r1,
                     accumulate);
}

void wb_mat_mul_runs(float *Y, const float *X, const wb_mm_run *runs, int n_runs,
                     const wb_mat *W, const float *b, int r0, int r1, int accumulate) {
    for (int i = 0; i < n_runs; i++)
        wb_mat_mul(Y + (size_t)runs[i].row0 * W->rows, X + (size_t)runs[i].row0 * W->cols,
                   runs[i].n, W, b, r0, r1, accumulate, runs[i].mode);
}

void wb_mat_row(const wb_mat *m, int r, float *dst) {
    const size_t C = (size_t)m->cols;
    const int qt = mat_qtype(m->dtype);
    if (qt >= 0 && m->tiles)
        wb_quant_tile_dequant_row((wb_qtype)qt, dst, m->w, m->tile_off + r, (int)C);
    else if (qt >= 0)
        wb_dequantize_row((wb_qtype)qt, dst,
                          (const uint8_t *)m->w + row_bytes(m) * (size_t)r, (int)C);
    else if (m->dtype == WB_MAT_BF16)
        wb_bf16_to_f32_forward(dst, (const uint16_t *)m->w + (size_t)r * C, C);
    else memcpy(dst, (const float *)m->w + (size_t)r * C, C * sizeof *dst);
}

/* ------------------------------------------------------------- shared with weights_gguf.c */

size_t wb_weights_nonfinite_f32(const float *x, size_t n) { return first_nonfinite_f32(x, n); }
size_t wb_weights_nonfinite_bf16(const uint16_t *x, size_t n) { return first_nonfinite_bf16(x, n); }
wb_status wb_weights_quantize(const wb_want *wants, int n, int weights, wb_weight_store *out,
                              wb_err *err) {
    return quantize_mats(wants, n, weights, out, err);
}
