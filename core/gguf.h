/* gguf.h - GGUF files (llama.cpp / ggml's single-file model format): a strict reader and a writer.
 *
 * Layout (little-endian, versions 2 and 3): "GGUF", u32 version, u64 tensor count, u64 key/value
 * count; the key/values (u64-length string key, u32 value type, value; arrays are u32 element
 * type, u64 count, elements); the tensor infos (name, u32 n_dims, u64 dims innermost first, u32
 * ggml type, u64 offset into the data section); padding to the alignment (general.alignment,
 * default 32); the data section.
 *
 * wb_gguf_open maps the file and checks everything before anything is used: magic, version,
 * every count against the bytes left, every string length, every value and element type, nested
 * arrays (refused: no recursion on input depth), duplicate keys and tensor names, general.alignment
 * (a u32 power of two), tensor names (1-64 bytes), 1-4 dims of at least 1 with no overflow, the
 * row length a multiple of the type's block, every offset aligned, every tensor inside the data
 * section and no two overlapping. A hostile file gets WB_ERR_FORMAT naming the file and the field.
 */
#ifndef WB_GGUF_H
#define WB_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "wb_base.h"

/* Metadata value types, as numbered in the file. */
typedef enum wb_gguf_vtype {
    WB_GGUF_U8 = 0, WB_GGUF_I8 = 1, WB_GGUF_U16 = 2, WB_GGUF_I16 = 3, WB_GGUF_U32 = 4,
    WB_GGUF_I32 = 5, WB_GGUF_F32 = 6, WB_GGUF_BOOL = 7, WB_GGUF_STRING = 8, WB_GGUF_ARRAY = 9,
    WB_GGUF_U64 = 10, WB_GGUF_I64 = 11, WB_GGUF_F64 = 12
} wb_gguf_vtype;

/* ggml tensor types the workbench reads or writes (the file's numbers). */
enum {
    WB_GGML_F32 = 0, WB_GGML_F16 = 1, WB_GGML_Q4_0 = 2, WB_GGML_Q4_1 = 3, WB_GGML_Q5_0 = 6,
    WB_GGML_Q5_1 = 7, WB_GGML_Q8_0 = 8, WB_GGML_Q2_K = 10, WB_GGML_Q3_K = 11, WB_GGML_Q4_K = 12,
    WB_GGML_Q5_K = 13, WB_GGML_Q6_K = 14, WB_GGML_IQ2_XXS = 16, WB_GGML_IQ4_NL = 20,
    WB_GGML_IQ4_XS = 23, WB_GGML_BF16 = 30
};

typedef struct wb_gguf wb_gguf;

typedef struct wb_gguf_tensor {
    const char *name;     /* NUL-terminated copy */
    int n_dims;
    int64_t dims[4];      /* dims[0] is the row length (innermost) */
    uint32_t type;        /* ggml type */
    int64_t n_elements;
    size_t bytes;
    const void *data;     /* inside the mapping */
} wb_gguf_tensor;

wb_status wb_gguf_open(const char *path, wb_gguf **out, wb_err *err);
/* The same checks over a caller-owned buffer (kept, not copied, until wb_gguf_free). `name`
 * is used in messages. */
wb_status wb_gguf_open_memory(const void *buf, size_t len, const char *name, wb_gguf **out,
                              wb_err *err);
void wb_gguf_free(wb_gguf *g);

/* The name given at open (the path), for messages. */
const char *wb_gguf_name(const wb_gguf *g);
uint32_t wb_gguf_version(const wb_gguf *g);
size_t wb_gguf_alignment(const wb_gguf *g);

/* ---- metadata ---- */
int64_t wb_gguf_n_kv(const wb_gguf *g);
const char *wb_gguf_key(const wb_gguf *g, int64_t i); /* NUL-terminated copy */
/* index of key, or -1 */
int64_t wb_gguf_find(const wb_gguf *g, const char *key);
wb_gguf_vtype wb_gguf_type(const wb_gguf *g, int64_t i);
/* For arrays: the element type and count (0 and 0 for other values). */
wb_gguf_vtype wb_gguf_arr_type(const wb_gguf *g, int64_t i);
uint64_t wb_gguf_arr_n(const wb_gguf *g, int64_t i);
/* Typed reads of key `key`: WB_ERR_NOTFOUND when absent, WB_ERR_FORMAT when of another type (any
 * integer type converts when the value fits; floats accept F32/F64), message naming the key. */
wb_status wb_gguf_get_int(const wb_gguf *g, const char *key, int64_t *out, wb_err *err);
wb_status wb_gguf_get_float(const wb_gguf *g, const char *key, double *out, wb_err *err);
wb_status wb_gguf_get_bool(const wb_gguf *g, const char *key, int *out, wb_err *err);
/* *s points into the mapping, not NUL-terminated. */
wb_status wb_gguf_get_str(const wb_gguf *g, const char *key, const char **s, size_t *len,
                          wb_err *err);
/* Element j of an array of strings / of integers / of floats (bounds and type checked). */
wb_status wb_gguf_arr_str(const wb_gguf *g, int64_t i, uint64_t j, const char **s, size_t *len,
                          wb_err *err);
wb_status wb_gguf_arr_int(const wb_gguf *g, int64_t i, uint64_t j, int64_t *out, wb_err *err);
wb_status wb_gguf_arr_float(const wb_gguf *g, int64_t i, uint64_t j, double *out, wb_err *err);

/* ---- tensors ---- */
int64_t wb_gguf_n_tensors(const wb_gguf *g);
const wb_gguf_tensor *wb_gguf_tensor_at(const wb_gguf *g, int64_t i);
const wb_gguf_tensor *wb_gguf_tensor_find(const wb_gguf *g, const char *name);
/* "F32", "Q4_K", ... or "type 23" style for others (static storage per thread). */
const char *wb_ggml_type_name(uint32_t type);

/* ---- writer ---- */
typedef struct wb_gguf_writer wb_gguf_writer;
wb_status wb_gguf_writer_new(wb_gguf_writer **out, wb_err *err);
void wb_gguf_writer_free(wb_gguf_writer *w);
wb_status wb_gguf_set_str(wb_gguf_writer *w, const char *key, const char *s, size_t len,
                          wb_err *err);
wb_status wb_gguf_set_u32(wb_gguf_writer *w, const char *key, uint32_t v, wb_err *err);
wb_status wb_gguf_set_i32(wb_gguf_writer *w, const char *key, int32_t v, wb_err *err);
wb_status wb_gguf_set_f32(wb_gguf_writer *w, const char *key, float v, wb_err *err);
wb_status wb_gguf_set_bool(wb_gguf_writer *w, const char *key, int v, wb_err *err);
/* Arrays of n strings (NUL-terminated) or of n int32 / f32. */
wb_status wb_gguf_set_str_array(wb_gguf_writer *w, const char *key, const char *const *s,
                                size_t n, wb_err *err);
wb_status wb_gguf_set_i32_array(wb_gguf_writer *w, const char *key, const int32_t *v, size_t n,
                                wb_err *err);
wb_status wb_gguf_set_f32_array(wb_gguf_writer *w, const char *key, const float *v, size_t n,
                                wb_err *err);
/* A tensor [dims[n_dims-1], ..., dims[0]] of F32 values stored as `type` (F32, F16, BF16, Q8_0,
 * Q4_0; the quantized ones need dims[0] % 32 == 0). The values are converted now and copied. */
wb_status wb_gguf_add_tensor(wb_gguf_writer *w, const char *name, int n_dims,
                             const int64_t *dims, uint32_t type, const float *values,
                             wb_err *err);
/* A tensor of any type the reader knows given as its bytes (len must be exactly the size of
 * that type and those dims): blocks already quantized, e.g. Q4_K / Q6_K, which
 * wb_gguf_add_tensor cannot produce. Copied. */
wb_status wb_gguf_add_tensor_raw(wb_gguf_writer *w, const char *name, int n_dims,
                                 const int64_t *dims, uint32_t type, const void *data, size_t len,
                                 wb_err *err);
/* Written atomically (temp file in the same directory, every write checked, fsync, rename). */
wb_status wb_gguf_write(const wb_gguf_writer *w, const char *path, wb_err *err);

#endif
