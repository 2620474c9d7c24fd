/* weights_gguf.c - a GGUF file as the source of the families' wanted tensors (weights_gguf.h).
 *
 * The families list their tensors by safetensors name and HF shape ([out, in] for matrices,
 * [in, out] with transpose for GPT-2's Conv1D). Here each name is found through gguf_model.c's
 * table and checked against the GGUF tensor info (the reader has already checked that its
 * bytes lie inside the data section, aligned and without overlap):
 *
 *   ggml dims list the innermost (row length) first, so an HF [out, in] matrix is ne = {in, out}
 *   with the same bytes; a 1-D vector is ne = {n}. llama.cpp's converter transposes GPT-2's
 *   Conv1D weights to [out, in], so a want with transpose (file [in, out] in safetensors) expects
 *   ne = {in, out} as well and is used without transposing.
 *
 * Types and where the rows go (one matrix type per tensor, no re-quantization):
 *   F32, F16          widened into the store's 64-byte aligned F32 block
 *   BF16              mapped from the file as a BF16 wb_mat when the family keeps BF16
 *                     (keep_bf16), else widened
 *   Q8_0, Q4_0,       mapped from the file as quantized wb_mat rows (quant.c's kernels)
 *   Q4_K, Q5_K, Q6_K,
 *   Q5_0, Q4_1, Q5_1,
 *   IQ4_NL
 *   Q2_K, Q3_K,       no kernels: decoded (quant_fallback.c) into a store-owned copy in a type
 *   IQ4_XS            that has them: Q3_K as Q6_K with the same values, IQ4_XS as IQ4_NL with
 *                     f16 group scales, Q2_K quantized again as Q8_0
 *                     (rows are multiples of 32 wide, as the types require); more bits than
 *                     the file's, near-lossless (docs/gguf.md)
 *   vectors           always F32 (any type above dequantized)
 * The llama architecture's Q and K weights and biases come with their rows in llama.cpp's
 * interleaved-pair order (gguf_model.h, wb_gguf_qk_row); they are put back in transformers'
 * order, into the F32 block or a store-owned copy (BF16, quantized rows), never mapped.
 *
 * Strictness, as for safetensors: every want must be present with a supported type and its
 * exact dims and byte size before anything is allocated; every value is scanned for NaN/Inf
 * (F32 after widening, BF16 as mapped, the f16 scales of quantized blocks); and every tensor
 * of the file must be asked for by the family: one it would silently ignore (an o_proj bias the
 * config does not announce, an unknown tensor) is an error naming it.
 */
#include "weights_gguf.h"

#include "gguf_model.h"
#include "llama_internal.h"
#include "quant.h"
#include "quant_fallback.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *hf;                  /* safetensors name */
    const wb_gguf_tensor *t;
} entry;

struct wb_gguf_src {
    wb_gguf *g;                /* NULL once a store has taken it */
    char *path;
    char arch[16];
    int64_t head_dim;
    entry *e;                  /* [n] sorted by hf */
    int64_t n;
    unsigned char *used;       /* [n] set by the last load */
    wb_type_count types[WB_MAX_TYPE_COUNTS];
    int n_types;
};

/* Tensors a GGUF carries that are read as metadata, not as weights (gguf_model.c reads them
 * into the config: Phi-3's LongRoPE factors, Llama 3's RoPE frequency divisors). */
static int is_config_tensor(const char *arch, const char *name) {
    if (!strcmp(arch, "llama")) return !strcmp(name, "rope_freqs.weight");
    return !strcmp(arch, "phi3") &&
           (!strcmp(name, "rope_factors_long.weight") || !strcmp(name, "rope_factors_short.weight"));
}

static int by_hf(const void *a, const void *b) {
    return strcmp(((const entry *)a)->hf, ((const entry *)b)->hf);
}

void wb_gguf_src_free(wb_gguf_src *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) free(s->e[i].hf);
    free(s->e);
    free(s->used);
    free(s->path);
    wb_gguf_free(s->g);
    free(s);
}

wb_status wb_gguf_src_new(wb_gguf *g, const char *path, const wb_config *c, wb_gguf_src **out,
                          wb_err *err) {
    *out = NULL;
    wb_gguf_src *s = calloc(1, sizeof *s);
    const int64_t nt = wb_gguf_n_tensors(g);
    if (!s) {
        wb_gguf_free(g);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    }
    s->g = g;
    s->head_dim = c->head_dim;
    wb_status st = WB_OK;
    const char *arch;
    size_t alen;
    wb_err e = {0};
    if ((st = wb_gguf_get_str(g, "general.architecture", &arch, &alen, &e))) {
        st = wb_err_set(err, st, "%s: %s", path, e.msg);
        goto done;
    }
    snprintf(s->arch, sizeof s->arch, "%.*s", (int)(alen < 15 ? alen : 15), arch);
    if (!(s->path = strdup(path)) || !(s->e = calloc((size_t)(nt ? nt : 1), sizeof *s->e)) ||
        !(s->used = calloc((size_t)(nt ? nt : 1), 1))) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int64_t i = 0; i < nt; i++) {
        const wb_gguf_tensor *t = wb_gguf_tensor_at(g, i);
        if (is_config_tensor(s->arch, t->name)) continue;
        char hf[160];
        if ((st = wb_gguf_hf_name(s->arch, t->name, hf, sizeof hf, &e))) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: %s", path, e.msg);
            goto done;
        }
        if (!(s->e[s->n].hf = strdup(hf))) {
            st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        s->e[s->n++].t = t;
    }
    qsort(s->e, (size_t)s->n, sizeof *s->e, by_hf);
    /* two GGUF names for one tensor (blk.1.x and blk.01.x) */
    for (int64_t i = 1; i < s->n; i++)
        if (!strcmp(s->e[i].hf, s->e[i - 1].hf)) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: tensors '%s' and '%s' are both '%s'", path,
                            s->e[i - 1].t->name, s->e[i].t->name, s->e[i].hf);
            goto done;
        }
done:
    if (st) wb_gguf_src_free(s);
    else *out = s;
    return st;
}

static const entry *lookup(const wb_gguf_src *s, const char *hf) {
    const entry key = {(char *)hf, NULL};
    return s->n ? bsearch(&key, s->e, (size_t)s->n, sizeof key, by_hf) : NULL;
}

int wb_gguf_src_has(const wb_gguf_src *s, const char *hf_name) {
    return s && lookup(s, hf_name) != NULL;
}

int wb_gguf_src_types(const wb_gguf_src *s, wb_type_count *out, int cap) {
    int n = 0;
    for (; s && n < s->n_types && n < cap; n++) out[n] = s->types[n];
    return n;
}

static void note_type(wb_gguf_src *s, uint32_t type) {
    const char *name = wb_ggml_type_name(type);
    for (int i = 0; i < s->n_types; i++)
        if (!strcmp(s->types[i].name, name)) {
            s->types[i].n++;
            return;
        }
    if (s->n_types < WB_MAX_TYPE_COUNTS) {
        snprintf(s->types[s->n_types].name, sizeof s->types[0].name, "%s", name);
        s->types[s->n_types++].n = 1;
    }
}

/* ------------------------------------------------------------------------------ types */

/* The block format of a ggml type, or -1 for the float types and the ones not read. */
static int qtype_of(uint32_t type) {
    switch (type) {
    case WB_GGML_Q8_0: return WB_QT_Q8_0;
    case WB_GGML_Q4_0: return WB_QT_Q4_0;
    case WB_GGML_Q4_K: return WB_QT_Q4_K;
    case WB_GGML_Q6_K: return WB_QT_Q6_K;
    case WB_GGML_Q5_0: return WB_QT_Q5_0;
    case WB_GGML_IQ4_NL: return WB_QT_IQ4_NL;
    case WB_GGML_Q5_K: return WB_QT_Q5_K;
    case WB_GGML_Q4_1: return WB_QT_Q4_1;
    case WB_GGML_Q5_1: return WB_QT_Q5_1;
    default: return -1;
    }
}

/* A type read through quant_fallback.c (no kernels): Q2_K, Q3_K, IQ4_XS (the file has the
 * decode of Q5_0, IQ4_NL, Q5_K, Q4_1 and Q5_1 too, the references the kernels' ones are tested
 * against). */
static int fallback(uint32_t type) { return qtype_of(type) < 0 && wb_fallback_block_values(type) > 0; }

static int readable(uint32_t type) {
    return type == WB_GGML_F32 || type == WB_GGML_F16 || type == WB_GGML_BF16 ||
           qtype_of(type) >= 0 || fallback(type);
}

/* Bytes of one row of `cols` values of a readable type. */
static size_t row_bytes(uint32_t type, int64_t cols) {
    const int q = qtype_of(type);
    if (q >= 0) return wb_quant_row_bytes((wb_qtype)q, cols);
    if (fallback(type)) {
        const int bv = wb_fallback_block_values(type);
        return cols > 0 && cols % bv == 0 ? (size_t)(cols / bv) * wb_fallback_block_bytes(type) : 0;
    }
    return (size_t)cols * (type == WB_GGML_F32 ? 4 : 2);
}

/* The wb_mat dtype quantized GGUF rows are used as, or -1 for the float types. */
static int mat_dtype_of(uint32_t type) {
    switch (type) {
    case WB_GGML_Q8_0: return WB_MAT_Q8_0;
    case WB_GGML_Q4_0: return WB_MAT_Q4_0;
    case WB_GGML_Q4_K: return WB_MAT_Q4_K;
    case WB_GGML_Q6_K: return WB_MAT_Q6_K;
    case WB_GGML_Q5_0: return WB_MAT_Q5_0;
    case WB_GGML_IQ4_NL: return WB_MAT_IQ4_NL;
    case WB_GGML_Q5_K: return WB_MAT_Q5_K;
    case WB_GGML_Q4_1: return WB_MAT_Q4_1;
    case WB_GGML_Q5_1: return WB_MAT_Q5_1;
    default: return -1;
    }
}

/* dst[cols] = one row of a readable type, widened. */
static void widen_row(float *dst, const uint8_t *src, uint32_t type, int64_t cols) {
    const int q = qtype_of(type);
    if (q >= 0) {
        wb_dequantize_row((wb_qtype)q, dst, src, (int)cols);
    } else if (fallback(type)) {
        wb_fallback_dequantize_row(type, dst, src, cols);
    } else if (type == WB_GGML_F32) {
        memcpy(dst, src, (size_t)cols * 4);
    } else {
        for (int64_t i = 0; i < cols; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = type == WB_GGML_F16 ? wb_f16_to_f32(h) : wb_bf16_to_f32(h);
        }
    }
}

/* Index of the first block of a quantized row set whose f16 scale (or min) is NaN/Inf, or
 * n_blocks. The value bits are small integers; only the scales can be non-finite. */
static size_t first_bad_block(int q, const uint8_t *p, size_t n_blocks) {
    const size_t bb = wb_qtype_block_bytes((wb_qtype)q);
    for (size_t b = 0; b < n_blocks; b++, p += bb) {
        uint16_t d, m = 0;
        switch (q) {
        case WB_QT_Q6_K: memcpy(&d, p + bb - 2, 2); break;   /* d last */
        case WB_QT_Q4_K: case WB_QT_Q5_K: case WB_QT_Q4_1: case WB_QT_Q5_1: /* d, dmin or m */
            memcpy(&d, p, 2), memcpy(&m, p + 2, 2);
            break;
        default: memcpy(&d, p, 2); break;                     /* d first */
        }
        if ((d & 0x7c00u) == 0x7c00u || (m & 0x7c00u) == 0x7c00u) return b;
    }
    return n_blocks;
}

/* ------------------------------------------------------------------------------ loading */

/* How one want is served. */
typedef enum how { HOW_F32, HOW_MAP, HOW_COPY, HOW_CONVERT } how;

typedef struct plan {
    const wb_gguf_tensor *t;
    int64_t rows, cols;        /* the HF [rows, cols] as stored in wb_mat ([n, 1] for vectors) */
    int permuted;
    how how;
} plan;

static wb_status want_error(const wb_gguf_src *s, const wb_want *w, const wb_gguf_tensor *t,
                            wb_err *err) {
    char got[96] = "{", *q = got + 1;
    for (int i = 0; i < t->n_dims; i++)
        q += snprintf(q, 24, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    snprintf(q, 2, "}");
    if (!w->d1)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' (%s) has ggml dims %s, expected "
                          "{%lld}", s->path, t->name, w->name, got, (long long)w->d0);
    /* rows, cols of the [out, in] matrix the family wants */
    const int64_t rows = w->transpose ? w->d1 : w->d0, cols = w->transpose ? w->d0 : w->d1;
    return wb_err_set(err, WB_ERR_FORMAT,
                      "%s: tensor '%s' (%s) has ggml dims %s, expected {%lld, %lld} (a [%lld, "
                      "%lld] matrix, innermost first)", s->path, t->name, w->name, got,
                      (long long)cols, (long long)rows, (long long)rows, (long long)cols);
}

static wb_status plan_want(wb_gguf_src *s, const wb_want *w, int keep_bf16, plan *p,
                           wb_err *err) {
    const entry *e = lookup(s, w->name);
    if (!e) {
        char gname[96];
        wb_err e2 = {0};
        if (wb_gguf_name_from_hf(s->arch, w->name, gname, sizeof gname, &e2))
            snprintf(gname, sizeof gname, "?");
        return wb_err_set(err, WB_ERR_NOTFOUND, "%s: tensor '%s' (%s) is missing", s->path,
                          gname, w->name);
    }
    const wb_gguf_tensor *t = e->t;
    s->used[e - s->e] = 1;
    if (!readable(t->type))
        return wb_err_set(err, WB_ERR_FORMAT,
                          "%s: tensor '%s' has type %s; the workbench reads F32, F16, BF16, Q8_0, "
                          "Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS", s->path, t->name, wb_ggml_type_name(t->type));
    p->t = t;
    if (!w->d1) {
        if (t->n_dims != 1 || t->dims[0] != w->d0) return want_error(s, w, t, err);
        p->rows = w->d0, p->cols = 1;
    } else {
        p->rows = w->transpose ? w->d1 : w->d0;
        p->cols = w->transpose ? w->d0 : w->d1;
        if (t->n_dims != 2 || t->dims[0] != p->cols || t->dims[1] != p->rows)
            return want_error(s, w, t, err);
    }
    /* the reader derived bytes from type and dims; check the want's view of them */
    const size_t need = w->d1 ? row_bytes(t->type, p->cols) * (size_t)p->rows
                              : row_bytes(t->type, p->rows);
    if (!need || t->bytes != need)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' holds %zu bytes, expected %zu for "
                          "%s", s->path, t->name, t->bytes, need, wb_ggml_type_name(t->type));
    p->permuted = wb_gguf_qk_permuted(s->arch, w->name);
    if (p->permuted && (s->head_dim < 2 || p->rows % s->head_dim))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' has %lld rows, not a whole number "
                          "of heads of %lld", s->path, t->name, (long long)p->rows,
                          (long long)s->head_dim);
    p->how = HOW_F32;
    if (w->mat && ((t->type == WB_GGML_BF16 && keep_bf16) || mat_dtype_of(t->type) >= 0))
        p->how = p->permuted ? HOW_COPY : HOW_MAP;
    else if (w->mat && fallback(t->type))
        p->how = HOW_CONVERT;
    note_type(s, t->type);
    return WB_OK;
}

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }
/* each matrix copied into gguf_rows starts on a cache line: the AVX-512 tile kernels read it in
 * 64-byte registers (weights.c quantize_mats) */
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* GGUF row r of p goes to row dst_row(p, r) of the loaded tensor. */
static int64_t dst_row(const wb_gguf_src *s, const plan *p, int64_t r) {
    return p->permuted ? wb_gguf_qk_row(r, s->head_dim) : r;
}

static wb_status nonfinite(const wb_gguf_src *s, const plan *p, size_t i, const char *unit,
                           wb_err *err) {
    return wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' holds NaN or Inf (%s %zu); the file "
                      "is corrupt", s->path, p->t->name, unit, i);
}

/* The rows of p (a fallback type) in its target type (wb_fallback_target) at dst, in the loaded
 * order: each row decoded and checked for NaN/Inf, then converted; a scale that does not fit an
 * f16 (an IQ4_XS group scale beyond 65504) is refused too, as the kernels would read Inf. Q2_K's
 * Q8_0 cannot overflow: its values reach 65504 x 60, a Q8_0 scale of 31,000. */
static wb_status convert_rows(const wb_gguf_src *s, const plan *p, uint8_t *dst, wb_err *err) {
    const int64_t rows = p->rows, cols = p->cols;
    const wb_qtype to = wb_fallback_target(p->t->type);
    const size_t rb = row_bytes(p->t->type, cols), qb = wb_quant_row_bytes(to, cols);
    const size_t nblk = qb / wb_qtype_block_bytes(to);
    float *tmp = malloc((size_t)cols * sizeof *tmp);
    if (!tmp) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", s->path);
    wb_status st = WB_OK;
    for (int64_t r = 0; r < rows && !st; r++) {
        const uint8_t *src = (const uint8_t *)p->t->data + rb * (size_t)r;
        wb_fallback_dequantize_row(p->t->type, tmp, src, cols);
        size_t bad = wb_weights_nonfinite_f32(tmp, (size_t)cols);
        if (bad < (size_t)cols) {
            st = nonfinite(s, p, (size_t)r * (size_t)cols + bad, "element", err);
            break;
        }
        uint8_t *q = dst + qb * (size_t)dst_row(s, p, r);
        wb_fallback_convert_row(p->t->type, q, src, tmp, cols);
        if ((bad = first_bad_block(to, q, nblk)) < nblk)
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s': row %lld, block %zu (%s) has "
                            "values beyond what a %s block's f16 scale holds", s->path, p->t->name,
                            (long long)r, bad * (size_t)wb_qtype_block_values(to) /
                                (size_t)wb_fallback_block_values(p->t->type),
                            wb_ggml_type_name(p->t->type), to == WB_QT_Q6_K ? "Q6_K" : to == WB_QT_IQ4_NL ? "IQ4_NL" : "Q8_0");
    }
    free(tmp);
    return st;
}

wb_status wb_gguf_src_load(wb_gguf_src *s, const wb_want *wants, int n, int keep_bf16, int quant,
                           wb_weight_store *out, int64_t *n_params, wb_err *err) {
    memset(out, 0, sizeof *out);
    memset(s->used, 0, (size_t)(s->n ? s->n : 1));
    s->n_types = 0;
    plan *pl = calloc((size_t)(n > 0 ? n : 1), sizeof *pl);
    wb_want *requant = NULL;
    wb_status st = WB_OK;
    if (!pl) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", s->path);
    size_t floats = 0, bf16_copy = 0, row_copy = 0;
    int64_t np = 0, mapped = 0;
    for (int i = 0; i < n; i++) {
        if ((st = plan_want(s, &wants[i], keep_bf16, &pl[i], err))) goto done;
        const size_t ne = (size_t)pl[i].rows * (size_t)pl[i].cols;
        np += (int64_t)ne;
        if (pl[i].how == HOW_F32) floats += align16(ne);
        else if (pl[i].how == HOW_MAP) mapped++;
        else if (pl[i].how == HOW_CONVERT)
            row_copy += align64(wb_quant_row_bytes(wb_fallback_target(pl[i].t->type),
                                                   pl[i].cols) * (size_t)pl[i].rows);
        else if (pl[i].t->type == WB_GGML_BF16) bf16_copy += ne;
        else row_copy += align64(pl[i].t->bytes);
    }
    for (int64_t i = 0; i < s->n; i++)
        if (!s->used[i]) {
            st = wb_err_set(err, WB_ERR_FORMAT, "%s: tensor '%s' (%s) is not used by this %s "
                            "model's configuration; refusing to ignore it", s->path,
                            s->e[i].t->name, s->e[i].hf, s->arch);
            goto done;
        }
    out->block = aligned_alloc(64, (floats ? floats : 16) * sizeof(float));
    out->bf16_copy = bf16_copy ? malloc(bf16_copy * 2) : NULL;
    out->gguf_rows = row_copy ? aligned_alloc(64, row_copy) : NULL;
    if (!out->block || (bf16_copy && !out->bf16_copy) || (row_copy && !out->gguf_rows)) {
        st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory for %zu weights", s->path,
                        floats + bf16_copy);
        goto done;
    }
    out->block_floats = floats;
    out->gguf_rows_bytes = row_copy;
    float *fp = out->block;
    uint16_t *cp = out->bf16_copy;
    uint8_t *rp = out->gguf_rows;
    for (int i = 0; i < n; i++) {
        const wb_want *w = &wants[i];
        const plan *p = &pl[i];
        const uint8_t *src = p->t->data;
        const int64_t rows = p->rows, cols = p->cols;
        const size_t ne = (size_t)rows * (size_t)cols;
        const void *data;
        wb_mat_dtype dt = WB_MAT_F32;
        size_t bad;
        if (p->how == HOW_CONVERT) {
            const wb_qtype to = wb_fallback_target(p->t->type);
            if ((st = convert_rows(s, p, rp, err))) goto done;
            data = rp;
            dt = to == WB_QT_Q6_K ? WB_MAT_Q6_K : to == WB_QT_IQ4_NL ? WB_MAT_IQ4_NL : WB_MAT_Q8_0;
            rp += align64(wb_quant_row_bytes(to, cols) * (size_t)rows);
        } else if (p->how == HOW_F32) {
            if (w->d1) {
                const size_t rb = row_bytes(p->t->type, cols);
                for (int64_t r = 0; r < rows; r++)
                    widen_row(fp + (size_t)dst_row(s, p, r) * (size_t)cols, src + rb * (size_t)r,
                              p->t->type, cols);
            } else if (!p->permuted) {
                widen_row(fp, src, p->t->type, rows);
            } else { /* a permuted bias: widen in file order, then move each element */
                float *tmp = malloc(ne * sizeof *tmp);
                if (!tmp) {
                    st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", s->path);
                    goto done;
                }
                widen_row(tmp, src, p->t->type, rows);
                for (int64_t r = 0; r < rows; r++) fp[dst_row(s, p, r)] = tmp[r];
                free(tmp);
            }
            memset(fp + ne, 0, (align16(ne) - ne) * sizeof(float));
            if ((bad = wb_weights_nonfinite_f32(fp, ne)) < ne) {
                st = nonfinite(s, p, bad, "element", err);
                goto done;
            }
            data = fp;
            fp += align16(ne);
        } else {
            const int q = qtype_of(p->t->type);
            const size_t rb = row_bytes(p->t->type, cols);
            if (p->how == HOW_MAP) {
                data = src;
                if (q < 0) out->mapped_bf16_bytes += p->t->bytes;
                else out->mapped_quant_bytes += p->t->bytes;
            } else {
                uint8_t *dst = q < 0 ? (uint8_t *)cp : rp;
                for (int64_t r = 0; r < rows; r++)
                    memcpy(dst + rb * (size_t)dst_row(s, p, r), src + rb * (size_t)r, rb);
                data = dst;
                if (q < 0) cp += ne;
                else rp += align64(p->t->bytes);
            }
            if (q < 0 ? (bad = wb_weights_nonfinite_bf16(data, ne)) < ne
                      : (bad = first_bad_block(q, data, p->t->bytes / wb_qtype_block_bytes(
                                                                         (wb_qtype)q))) <
                            p->t->bytes / wb_qtype_block_bytes((wb_qtype)q)) {
                st = nonfinite(s, p, bad, q < 0 ? "element" : "scale of block", err);
                goto done;
            }
            dt = q < 0 ? WB_MAT_BF16 : (wb_mat_dtype)mat_dtype_of(p->t->type);
        }
        if (w->vec) *w->vec = data;
        if (w->mat) *w->mat = (wb_mat){.w = data, .dtype = dt, .rows = (int)rows, .cols = (int)cols};
    }
    if (quant) { /* quantize-at-load for the matrices loaded as F32 or BF16 only */
        int k = 0;
        if (!(requant = calloc((size_t)(n > 0 ? n : 1), sizeof *requant))) {
            st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", s->path);
            goto done;
        }
        for (int i = 0; i < n; i++)
            if (wants[i].mat && (wants[i].mat->dtype == WB_MAT_F32 || wants[i].mat->dtype == WB_MAT_BF16))
                requant[k++] = wants[i];
        if ((st = wb_weights_quantize(requant, k, quant, out, err))) goto done;
    }
    if ((st = wb_weight_store_tile(out, wants, n, s->path, err))) goto done;
    /* what was loaded, by name, for exporters (core/gguf_save.c), as weights.c records it */
    if ((st = wb_weight_store_list(out, wants, n, s->path, err))) goto done;
    if (mapped) { /* rows point into the mapping: the store keeps the file */
        out->gguf = s->g;
        s->g = NULL;
    }
    if (n_params) *n_params = np;
done:
    free(pl);
    free(requant);
    if (st) wb_weight_store_free(out);
    return st;
}
