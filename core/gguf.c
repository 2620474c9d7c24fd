/* gguf.c - GGUF reader (mmap, every field validated before use) and atomic writer; see gguf.h. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "quant.h"
#include "wb_model.h"

#define MAX_NAME 64          /* ggml's tensor name limit */
#define MAX_KEY 65535        /* the spec's key length limit */
#define MAX_ALIGN (1u << 20) /* far above any real file (32) */

typedef struct kv {
    char *key;
    wb_gguf_vtype type;
    size_t off;      /* of the value (arrays: of the first element) */
    wb_gguf_vtype etype;
    uint64_t n;      /* array elements */
    size_t *str_off; /* arrays of strings: offset of each element's u64 length, built at open */
} kv;

struct wb_gguf {
    const uint8_t *p;
    size_t len;
    void *map; /* non-NULL when we mapped the file */
    char *name;
    uint32_t version;
    size_t align;
    int64_t n_kv, n_t;
    kv *kvs;
    wb_gguf_tensor *ts;
};

/* ------------------------------------------------------------------------------ types */

static const struct {
    uint32_t type;
    const char *name;
    int block;
    int bytes;
} k_ggml[] = {
    {0, "F32", 1, 4},      {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},   {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},   {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50}, {20, "IQ4_NL", 32, 18}, {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82}, {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},     {25, "I16", 1, 2},
    {26, "I32", 1, 4},     {27, "I64", 1, 8},      {28, "F64", 1, 8},     {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},    {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66},
};

static int ggml_index(uint32_t type) {
    for (size_t i = 0; i < sizeof k_ggml / sizeof *k_ggml; i++)
        if (k_ggml[i].type == type) return (int)i;
    return -1;
}

const char *wb_ggml_type_name(uint32_t type) {
    static _Thread_local char buf[32];
    int i = ggml_index(type);
    if (i >= 0) return k_ggml[i].name;
    snprintf(buf, sizeof buf, "type %u", (unsigned)type);
    return buf;
}

static size_t vsize(wb_gguf_vtype t) {
    switch (t) {
    case WB_GGUF_U8: case WB_GGUF_I8: case WB_GGUF_BOOL: return 1;
    case WB_GGUF_U16: case WB_GGUF_I16: return 2;
    case WB_GGUF_U32: case WB_GGUF_I32: case WB_GGUF_F32: return 4;
    case WB_GGUF_U64: case WB_GGUF_I64: case WB_GGUF_F64: return 8;
    default: return 0; /* strings, arrays: variable */
    }
}

static const char *vname(uint32_t t) {
    static const char *const n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                    "bool", "string", "array", "u64", "i64", "f64"};
    return t < 13 ? n[t] : "unknown";
}

/* ----------------------------------------------------------------------------- reader */

typedef struct cur {
    const uint8_t *p;
    size_t len, pos;
} cur;

static int rd(cur *c, void *dst, size_t n) {
    if (n > c->len - c->pos) return -1;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return 0;
}
static uint64_t le(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
    return v;
}
static int rd_u32(cur *c, uint32_t *v) {
    uint8_t b[4];
    if (rd(c, b, 4)) return -1;
    *v = (uint32_t)le(b, 4);
    return 0;
}
static int rd_u64(cur *c, uint64_t *v) {
    uint8_t b[8];
    if (rd(c, b, 8)) return -1;
    *v = le(b, 8);
    return 0;
}
/* a string: its bytes at *off, *n long */
static int rd_str(cur *c, size_t *off, uint64_t *n) {
    if (rd_u64(c, n) || *n > c->len - c->pos) return -1;
    *off = c->pos;
    c->pos += (size_t)*n;
    return 0;
}

static char *dup_n(const uint8_t *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

void wb_gguf_free(wb_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; g->kvs && i < g->n_kv; i++) free(g->kvs[i].key), free(g->kvs[i].str_off);
    for (int64_t i = 0; g->ts && i < g->n_t; i++) free((char *)g->ts[i].name);
    free(g->kvs);
    free(g->ts);
    if (g->map) munmap(g->map, g->len);
    free(g->name);
    free(g);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_off(const void *a, const void *b) {
    const wb_gguf_tensor *x = *(wb_gguf_tensor *const *)a, *y = *(wb_gguf_tensor *const *)b;
    const uint8_t *p = x->data, *q = y->data;
    return p < q ? -1 : p > q;
}

/* Duplicate names among n strings (sorted copy of the pointers); returns the duplicate or NULL. */
static const char *first_duplicate(char **names, int64_t n, int *oom) {
    *oom = 0;
    if (n < 2) return NULL;
    char **s = malloc(sizeof *s * (size_t)n);
    if (!s) return *oom = 1, NULL;
    memcpy(s, names, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_str);
    const char *dup = NULL;
    for (int64_t i = 1; i < n && !dup; i++)
        if (!strcmp(s[i - 1], s[i])) dup = s[i];
    free(s);
    return dup;
}

#define FAIL(...) (st = wb_err_set(err, WB_ERR_FORMAT, __VA_ARGS__))

static wb_status parse(wb_gguf *g, wb_err *err) {
    wb_status st = WB_OK;
    const char *nm = g->name;
    cur c = {g->p, g->len, 0};
    uint8_t magic[4];
    uint32_t ver;
    uint64_t nt, nkv;
    if (rd(&c, magic, 4) || memcmp(magic, "GGUF", 4))
        return FAIL("%s: not a GGUF file (no \"GGUF\" magic at the start)", nm);
    if (rd_u32(&c, &ver)) return FAIL("%s: truncated header (version)", nm);
    if (ver == 1) return FAIL("%s: GGUF version 1 is not supported (only 2 and 3)", nm);
    if (ver != 2 && ver != 3) {
        if (ver == 0x02000000u || ver == 0x03000000u)
            return FAIL("%s: big-endian GGUF is not supported", nm);
        return FAIL("%s: unsupported GGUF version %u (only 2 and 3)", nm, (unsigned)ver);
    }
    g->version = ver;
    if (rd_u64(&c, &nt) || rd_u64(&c, &nkv)) return FAIL("%s: truncated header (counts)", nm);
    /* a key/value takes at least 12 bytes (u64 length, u32 type), a tensor info 24 */
    if (nkv > (c.len - c.pos) / 12)
        return FAIL("%s: metadata_kv_count %llu does not fit in the file", nm, (unsigned long long)nkv);
    if (nt > (c.len - c.pos) / 24)
        return FAIL("%s: tensor_count %llu does not fit in the file", nm, (unsigned long long)nt);
    g->kvs = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kvs);
    g->ts = calloc(nt ? (size_t)nt : 1, sizeof *g->ts);
    if (!g->kvs || !g->ts) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);

    g->align = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        kv *k = &g->kvs[i];
        size_t koff;
        uint64_t klen;
        uint32_t t;
        if (rd_str(&c, &koff, &klen)) return FAIL("%s: key %llu: truncated", nm, (unsigned long long)i);
        if (klen == 0 || klen > MAX_KEY)
            return FAIL("%s: key %llu: length %llu (must be 1-%d bytes)", nm, (unsigned long long)i,
                        (unsigned long long)klen, MAX_KEY);
        if (memchr(g->p + koff, 0, (size_t)klen))
            return FAIL("%s: key %llu: contains a NUL byte", nm, (unsigned long long)i);
        if (!(k->key = dup_n(g->p + koff, (size_t)klen)))
            return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        g->n_kv = (int64_t)i + 1;
        if (rd_u32(&c, &t)) return FAIL("%s: %s: truncated value type", nm, k->key);
        if (t > WB_GGUF_F64) return FAIL("%s: %s: unknown value type %u", nm, k->key, (unsigned)t);
        k->type = (wb_gguf_vtype)t;
        if (t == WB_GGUF_ARRAY) {
            uint32_t et;
            uint64_t n;
            if (rd_u32(&c, &et) || rd_u64(&c, &n)) return FAIL("%s: %s: truncated array header", nm, k->key);
            if (et > WB_GGUF_F64)
                return FAIL("%s: %s: unknown array element type %u", nm, k->key, (unsigned)et);
            if (et == WB_GGUF_ARRAY) return FAIL("%s: %s: nested arrays are not supported", nm, k->key);
            k->etype = (wb_gguf_vtype)et;
            k->n = n;
            k->off = c.pos;
            if (et == WB_GGUF_STRING) {
                if (n > (c.len - c.pos) / 8)
                    return FAIL("%s: %s: %llu strings do not fit in the file", nm, k->key, (unsigned long long)n);
                if (!(k->str_off = malloc(sizeof *k->str_off * (size_t)(n ? n : 1))))
                    return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
                for (uint64_t j = 0; j < n; j++) {
                    size_t so;
                    uint64_t sl;
                    k->str_off[j] = c.pos;
                    if (rd_str(&c, &so, &sl))
                        return FAIL("%s: %s: string %llu truncated", nm, k->key, (unsigned long long)j);
                }
            } else {
                const size_t es = vsize(k->etype);
                if (n > (c.len - c.pos) / es)
                    return FAIL("%s: %s: %llu elements do not fit in the file", nm, k->key, (unsigned long long)n);
                if (et == WB_GGUF_BOOL)
                    for (uint64_t j = 0; j < n; j++)
                        if (g->p[c.pos + j] > 1) return FAIL("%s: %s: bool element %llu is not 0 or 1", nm, k->key, (unsigned long long)j);
                c.pos += (size_t)n * es;
            }
        } else if (t == WB_GGUF_STRING) {
            size_t so;
            uint64_t sl;
            k->off = c.pos;
            if (rd_str(&c, &so, &sl)) return FAIL("%s: %s: truncated string value", nm, k->key);
        } else {
            k->off = c.pos;
            if (vsize(k->type) > c.len - c.pos) return FAIL("%s: %s: truncated value", nm, k->key);
            if (t == WB_GGUF_BOOL && g->p[c.pos] > 1) return FAIL("%s: %s: bool is not 0 or 1", nm, k->key);
            c.pos += vsize(k->type);
        }
        if (!strcmp(k->key, "general.alignment")) {
            if (t != WB_GGUF_U32) return FAIL("%s: general.alignment: must be a u32, not %s", nm, vname(t));
            uint32_t a = (uint32_t)le(g->p + k->off, 4);
            if (a == 0 || (a & (a - 1)) || a > MAX_ALIGN)
                return FAIL("%s: general.alignment: %u is not a power of two up to %u", nm, (unsigned)a, MAX_ALIGN);
            g->align = a;
        }
    }
    {
        char **keys = malloc(sizeof *keys * (size_t)(nkv ? nkv : 1));
        if (!keys) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        for (uint64_t i = 0; i < nkv; i++) keys[i] = g->kvs[i].key;
        int oom;
        const char *dup = first_duplicate(keys, (int64_t)nkv, &oom);
        if (dup) FAIL("%s: key %s appears twice", nm, dup);
        free(keys);
        if (oom) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        if (st) return st;
    }

    uint64_t *offs = malloc(sizeof *offs * (size_t)(nt ? nt : 1));
    if (!offs) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
    for (uint64_t i = 0; i < nt && !st; i++) {
        wb_gguf_tensor *t = &g->ts[i];
        size_t no;
        uint64_t nl;
        uint32_t nd, type;
        if (rd_str(&c, &no, &nl)) {
            FAIL("%s: tensor %llu: truncated name", nm, (unsigned long long)i);
            break;
        }
        if (nl == 0 || nl > MAX_NAME || memchr(g->p + no, 0, (size_t)nl)) {
            FAIL("%s: tensor %llu: name of %llu bytes (must be 1-%d, no NUL)", nm, (unsigned long long)i,
                 (unsigned long long)nl, MAX_NAME);
            break;
        }
        if (!(t->name = dup_n(g->p + no, (size_t)nl))) {
            st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
            break;
        }
        g->n_t = (int64_t)i + 1;
        if (rd_u32(&c, &nd)) {
            FAIL("%s: %s: truncated n_dimensions", nm, t->name);
            break;
        }
        if (nd < 1 || nd > 4) {
            FAIL("%s: %s: n_dimensions %u (must be 1-4)", nm, t->name, (unsigned)nd);
            break;
        }
        t->n_dims = (int)nd;
        int64_t ne = 1;
        for (uint32_t d = 0; d < nd && !st; d++) {
            uint64_t v;
            if (rd_u64(&c, &v)) FAIL("%s: %s: truncated dimensions", nm, t->name);
            else if (v < 1 || v > (uint64_t)INT64_MAX / (uint64_t)ne)
                FAIL("%s: %s: dimension %u is %llu (must be >= 1, product within int64)", nm, t->name,
                     (unsigned)d, (unsigned long long)v);
            else t->dims[d] = (int64_t)v, ne *= (int64_t)v;
        }
        if (st) break;
        for (int d = (int)nd; d < 4; d++) t->dims[d] = 1;
        t->n_elements = ne;
        if (rd_u32(&c, &type) || rd_u64(&c, &offs[i])) {
            FAIL("%s: %s: truncated type/offset", nm, t->name);
            break;
        }
        t->type = type;
        int ti = ggml_index(type);
        if (ti < 0) {
            FAIL("%s: %s: unknown tensor type %u", nm, t->name, (unsigned)type);
            break;
        }
        if (t->dims[0] % k_ggml[ti].block) {
            FAIL("%s: %s: row length %lld is not a multiple of %s's block of %d", nm, t->name,
                 (long long)t->dims[0], k_ggml[ti].name, k_ggml[ti].block);
            break;
        }
        const uint64_t blocks = (uint64_t)(ne / k_ggml[ti].block);
        if (blocks > SIZE_MAX / (uint64_t)k_ggml[ti].bytes) {
            FAIL("%s: %s: size overflows", nm, t->name);
            break;
        }
        t->bytes = (size_t)blocks * (size_t)k_ggml[ti].bytes;
        if (offs[i] % g->align) {
            FAIL("%s: %s: offset %llu is not a multiple of the alignment %zu", nm, t->name,
                 (unsigned long long)offs[i], g->align);
            break;
        }
    }
    if (!st && g->n_t > 1) {
        char **names = malloc(sizeof *names * (size_t)g->n_t);
        if (!names) st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        for (int64_t i = 0; names && i < g->n_t; i++) names[i] = (char *)g->ts[i].name;
        int oom = 0;
        const char *dup = names ? first_duplicate(names, g->n_t, &oom) : NULL;
        if (dup) FAIL("%s: tensor %s appears twice", nm, dup);
        if (oom) st = wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        free(names);
    }
    if (!st) {
        /* the data section starts at the next multiple of the alignment */
        size_t data = c.pos + (g->align - c.pos % g->align) % g->align;
        if (nt && data > g->len) FAIL("%s: the data section starts past the end of the file", nm);
        for (uint64_t i = 0; i < nt && !st; i++) {
            wb_gguf_tensor *t = &g->ts[i];
            const size_t avail = g->len - data;
            if (offs[i] > avail || t->bytes > avail - offs[i])
                FAIL("%s: %s: data [%llu, +%zu) runs past the end of the file (%zu data bytes)", nm,
                     t->name, (unsigned long long)offs[i], t->bytes, avail);
            else t->data = g->p + data + offs[i];
        }
    }
    free(offs);
    if (!st && g->n_t > 1) { /* no two tensors share bytes */
        wb_gguf_tensor **s = malloc(sizeof *s * (size_t)g->n_t);
        if (!s) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", nm);
        for (int64_t i = 0; i < g->n_t; i++) s[i] = &g->ts[i];
        qsort(s, (size_t)g->n_t, sizeof *s, cmp_off);
        for (int64_t i = 1; i < g->n_t && !st; i++)
            if ((const uint8_t *)s[i - 1]->data + s[i - 1]->bytes > (const uint8_t *)s[i]->data)
                FAIL("%s: tensors %s and %s overlap", nm, s[i - 1]->name, s[i]->name);
        free(s);
    }
    return st;
}

wb_status wb_gguf_open_memory(const void *buf, size_t len, const char *name, wb_gguf **out,
                              wb_err *err) {
    *out = NULL;
    wb_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->name = dup_n((const uint8_t *)(name ? name : "gguf"), strlen(name ? name : "gguf")))) {
        free(g);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", name ? name : "gguf");
    }
    g->p = buf;
    g->len = len;
    wb_status st = parse(g, err);
    if (st) {
        wb_gguf_free(g);
        return st;
    }
    *out = g;
    return WB_OK;
}

wb_status wb_gguf_open(const char *path, wb_gguf **out, wb_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return wb_err_set(err, WB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wb_err_set(err, WB_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size < 24) {
        close(fd);
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %lld bytes is too short for a GGUF header", path,
                          (long long)sb.st_size);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return wb_err_set(err, WB_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
    wb_gguf *g;
    wb_status st = wb_gguf_open_memory(map, (size_t)sb.st_size, path, &g, err);
    if (st) {
        munmap(map, (size_t)sb.st_size);
        return st;
    }
    g->map = map;
    *out = g;
    return WB_OK;
}

const char *wb_gguf_name(const wb_gguf *g) { return g->name; }
uint32_t wb_gguf_version(const wb_gguf *g) { return g->version; }
size_t wb_gguf_alignment(const wb_gguf *g) { return g->align; }
int64_t wb_gguf_n_kv(const wb_gguf *g) { return g->n_kv; }
const char *wb_gguf_key(const wb_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL; }
wb_gguf_vtype wb_gguf_type(const wb_gguf *g, int64_t i) { return g->kvs[i].type; }
wb_gguf_vtype wb_gguf_arr_type(const wb_gguf *g, int64_t i) { return g->kvs[i].type == WB_GGUF_ARRAY ? g->kvs[i].etype : 0; }
uint64_t wb_gguf_arr_n(const wb_gguf *g, int64_t i) { return g->kvs[i].type == WB_GGUF_ARRAY ? g->kvs[i].n : 0; }
int64_t wb_gguf_n_tensors(const wb_gguf *g) { return g->n_t; }
const wb_gguf_tensor *wb_gguf_tensor_at(const wb_gguf *g, int64_t i) { return i >= 0 && i < g->n_t ? &g->ts[i] : NULL; }

int64_t wb_gguf_find(const wb_gguf *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kvs[i].key, key)) return i;
    return -1;
}

const wb_gguf_tensor *wb_gguf_tensor_find(const wb_gguf *g, const char *name) {
    for (int64_t i = 0; i < g->n_t; i++)
        if (!strcmp(g->ts[i].name, name)) return &g->ts[i];
    return NULL;
}

/* value of type t at p as int64 (integers and bool); -1 when t is not an integer type or a u64
 * does not fit */
static int scalar_int(wb_gguf_vtype t, const uint8_t *p, int64_t *out) {
    switch (t) {
    case WB_GGUF_U8: case WB_GGUF_BOOL: *out = p[0]; return 0;
    case WB_GGUF_I8: *out = (int8_t)p[0]; return 0;
    case WB_GGUF_U16: *out = (int64_t)le(p, 2); return 0;
    case WB_GGUF_I16: *out = (int16_t)le(p, 2); return 0;
    case WB_GGUF_U32: *out = (int64_t)le(p, 4); return 0;
    case WB_GGUF_I32: *out = (int32_t)le(p, 4); return 0;
    case WB_GGUF_I64: *out = (int64_t)le(p, 8); return 0;
    case WB_GGUF_U64: {
        uint64_t v = le(p, 8);
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
        return 0;
    }
    default: return -1;
    }
}

static int scalar_float(wb_gguf_vtype t, const uint8_t *p, double *out) {
    if (t == WB_GGUF_F32) {
        uint32_t u = (uint32_t)le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return 0;
    }
    if (t == WB_GGUF_F64) {
        uint64_t u = le(p, 8);
        memcpy(out, &u, 8);
        return 0;
    }
    return -1;
}

static wb_status lookup(const wb_gguf *g, const char *key, const kv **k, wb_err *err) {
    int64_t i = wb_gguf_find(g, key);
    if (i < 0) return wb_err_set(err, WB_ERR_NOTFOUND, "%s: no metadata key %s", g->name, key);
    *k = &g->kvs[i];
    return WB_OK;
}

wb_status wb_gguf_get_int(const wb_gguf *g, const char *key, int64_t *out, wb_err *err) {
    const kv *k = NULL;
    wb_status st = lookup(g, key, &k, err);
    if (st) return st;
    if (k->type == WB_GGUF_BOOL || scalar_int(k->type, g->p + k->off, out))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected an integer, found %s", g->name, key, vname(k->type));
    return WB_OK;
}

wb_status wb_gguf_get_float(const wb_gguf *g, const char *key, double *out, wb_err *err) {
    const kv *k = NULL;
    wb_status st = lookup(g, key, &k, err);
    if (st) return st;
    if (scalar_float(k->type, g->p + k->off, out))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected a float, found %s", g->name, key, vname(k->type));
    return WB_OK;
}

wb_status wb_gguf_get_bool(const wb_gguf *g, const char *key, int *out, wb_err *err) {
    const kv *k = NULL;
    wb_status st = lookup(g, key, &k, err);
    if (st) return st;
    if (k->type != WB_GGUF_BOOL)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected a bool, found %s", g->name, key, vname(k->type));
    *out = g->p[k->off] != 0;
    return WB_OK;
}

wb_status wb_gguf_get_str(const wb_gguf *g, const char *key, const char **s, size_t *len,
                          wb_err *err) {
    const kv *k = NULL;
    wb_status st = lookup(g, key, &k, err);
    if (st) return st;
    if (k->type != WB_GGUF_STRING)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected a string, found %s", g->name, key, vname(k->type));
    *len = (size_t)le(g->p + k->off, 8);
    *s = (const char *)g->p + k->off + 8;
    return WB_OK;
}

static wb_status arr_elem(const wb_gguf *g, int64_t i, uint64_t j, const kv **k, wb_err *err) {
    if (i < 0 || i >= g->n_kv || g->kvs[i].type != WB_GGUF_ARRAY)
        return wb_err_set(err, WB_ERR_ARG, "%s: metadata %lld is not an array", g->name, (long long)i);
    *k = &g->kvs[i];
    if (j >= (*k)->n)
        return wb_err_set(err, WB_ERR_RANGE, "%s: %s: index %llu past %llu elements", g->name, (*k)->key,
                          (unsigned long long)j, (unsigned long long)(*k)->n);
    return WB_OK;
}

wb_status wb_gguf_arr_str(const wb_gguf *g, int64_t i, uint64_t j, const char **s, size_t *len,
                          wb_err *err) {
    const kv *k = NULL;
    wb_status st = arr_elem(g, i, j, &k, err);
    if (st) return st;
    if (k->etype != WB_GGUF_STRING)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected an array of strings, found %s", g->name, k->key, vname(k->etype));
    *len = (size_t)le(g->p + k->str_off[j], 8);
    *s = (const char *)g->p + k->str_off[j] + 8;
    return WB_OK;
}

wb_status wb_gguf_arr_int(const wb_gguf *g, int64_t i, uint64_t j, int64_t *out, wb_err *err) {
    const kv *k = NULL;
    wb_status st = arr_elem(g, i, j, &k, err);
    if (st) return st;
    if (!vsize(k->etype) || scalar_int(k->etype, g->p + k->off + j * vsize(k->etype), out))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected integers, found %s", g->name, k->key, vname(k->etype));
    return WB_OK;
}

wb_status wb_gguf_arr_float(const wb_gguf *g, int64_t i, uint64_t j, double *out, wb_err *err) {
    const kv *k = NULL;
    wb_status st = arr_elem(g, i, j, &k, err);
    if (st) return st;
    if (!vsize(k->etype) || scalar_float(k->etype, g->p + k->off + j * vsize(k->etype), out))
        return wb_err_set(err, WB_ERR_FORMAT, "%s: %s: expected floats, found %s", g->name, k->key, vname(k->etype));
    return WB_OK;
}

/* ----------------------------------------------------------------------------- writer */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    int oom;
} buf;

static void put(buf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (n > SIZE_MAX - b->n) {
        b->oom = 1;
        return;
    }
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c = c > SIZE_MAX / 2 ? b->n + n : c * 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q, b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void put_le(buf *b, uint64_t v, int n) {
    uint8_t t[8];
    for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    put(b, t, (size_t)n);
}
static void put_str(buf *b, const char *s, size_t n) {
    put_le(b, n, 8);
    put(b, s, n);
}

typedef struct wtensor {
    char *name;
    int n_dims;
    int64_t dims[4];
    uint32_t type;
    uint8_t *data;
    size_t bytes;
} wtensor;

struct wb_gguf_writer {
    buf kv;
    int64_t n_kv;
    wtensor *ts;
    int64_t n_t, cap_t;
};

wb_status wb_gguf_writer_new(wb_gguf_writer **out, wb_err *err) {
    *out = calloc(1, sizeof **out);
    return *out ? WB_OK : wb_err_set(err, WB_ERR_NOMEM, "gguf writer: out of memory");
}

void wb_gguf_writer_free(wb_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_t; i++) free(w->ts[i].name), free(w->ts[i].data);
    free(w->ts);
    free(w->kv.p);
    free(w);
}

static wb_status key_hdr(wb_gguf_writer *w, const char *key, uint32_t type, wb_err *err) {
    size_t n = key ? strlen(key) : 0;
    if (n == 0 || n > MAX_KEY) return wb_err_set(err, WB_ERR_ARG, "gguf writer: bad key \"%s\"", key ? key : "");
    if (!strcmp(key, "general.alignment")) /* the layout below is the writer's: 32 */
        return wb_err_set(err, WB_ERR_ARG, "gguf writer: general.alignment is set by the writer (32)");
    put_str(&w->kv, key, n);
    put_le(&w->kv, type, 4);
    w->n_kv++;
    return WB_OK;
}
#define WDONE() (w->kv.oom ? wb_err_set(err, WB_ERR_NOMEM, "gguf writer: out of memory") : WB_OK)

wb_status wb_gguf_set_str(wb_gguf_writer *w, const char *key, const char *s, size_t len, wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_STRING, err);
    if (st) return st;
    put_str(&w->kv, s, len);
    return WDONE();
}
wb_status wb_gguf_set_u32(wb_gguf_writer *w, const char *key, uint32_t v, wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_U32, err);
    if (st) return st;
    put_le(&w->kv, v, 4);
    return WDONE();
}
wb_status wb_gguf_set_i32(wb_gguf_writer *w, const char *key, int32_t v, wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_I32, err);
    if (st) return st;
    put_le(&w->kv, (uint32_t)v, 4);
    return WDONE();
}
wb_status wb_gguf_set_f32(wb_gguf_writer *w, const char *key, float v, wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_F32, err);
    if (st) return st;
    uint32_t u;
    memcpy(&u, &v, 4);
    put_le(&w->kv, u, 4);
    return WDONE();
}
wb_status wb_gguf_set_bool(wb_gguf_writer *w, const char *key, int v, wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_BOOL, err);
    if (st) return st;
    put_le(&w->kv, v != 0, 1);
    return WDONE();
}
wb_status wb_gguf_set_str_array(wb_gguf_writer *w, const char *key, const char *const *s, size_t n,
                                wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_ARRAY, err);
    if (st) return st;
    put_le(&w->kv, WB_GGUF_STRING, 4);
    put_le(&w->kv, n, 8);
    for (size_t i = 0; i < n; i++) put_str(&w->kv, s[i], strlen(s[i]));
    return WDONE();
}
wb_status wb_gguf_set_i32_array(wb_gguf_writer *w, const char *key, const int32_t *v, size_t n,
                                wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_ARRAY, err);
    if (st) return st;
    put_le(&w->kv, WB_GGUF_I32, 4);
    put_le(&w->kv, n, 8);
    for (size_t i = 0; i < n; i++) put_le(&w->kv, (uint32_t)v[i], 4);
    return WDONE();
}
wb_status wb_gguf_set_f32_array(wb_gguf_writer *w, const char *key, const float *v, size_t n,
                                wb_err *err) {
    wb_status st = key_hdr(w, key, WB_GGUF_ARRAY, err);
    if (st) return st;
    put_le(&w->kv, WB_GGUF_F32, 4);
    put_le(&w->kv, n, 8);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_le(&w->kv, u, 4);
    }
    return WDONE();
}

/* The next tensor slot: its name copied, bytes of data allocated for the caller to fill (who
 * then counts it in w->n_t), its dims, type and size set; a name already added is refused. */
static wb_status new_tensor(wb_gguf_writer *w, const char *name, size_t nl, int n_dims,
                            const int64_t *dims, uint32_t type, size_t bytes, wtensor **out,
                            wb_err *err) {
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->ts[i].name, name)) return wb_err_set(err, WB_ERR_ARG, "gguf writer: tensor %s added twice", name);
    if (w->n_t == w->cap_t) {
        int64_t c = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *q = realloc(w->ts, sizeof *q * (size_t)c);
        if (!q) return wb_err_set(err, WB_ERR_NOMEM, "gguf writer: out of memory");
        w->ts = q, w->cap_t = c;
    }
    wtensor *t = &w->ts[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = dup_n((const uint8_t *)name, nl);
    t->data = malloc(bytes ? bytes : 1);
    if (!t->name || !t->data) {
        free(t->name), free(t->data);
        return wb_err_set(err, WB_ERR_NOMEM, "gguf writer: out of memory");
    }
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++) t->dims[d] = d < n_dims ? dims[d] : 1;
    t->type = type;
    t->bytes = bytes;
    *out = t;
    return WB_OK;
}

wb_status wb_gguf_add_tensor(wb_gguf_writer *w, const char *name, int n_dims, const int64_t *dims,
                             uint32_t type, const float *values, wb_err *err) {
    size_t nl = name ? strlen(name) : 0;
    if (nl == 0 || nl > MAX_NAME)
        return wb_err_set(err, WB_ERR_ARG, "gguf writer: tensor name \"%s\" must be 1-%d bytes", name ? name : "", MAX_NAME);
    if (n_dims < 1 || n_dims > 4) return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: %d dims (1-4)", name, n_dims);
    int64_t ne = 1;
    for (int d = 0; d < n_dims; d++) {
        if (dims[d] < 1 || dims[d] > INT64_MAX / ne) return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: bad dimension", name);
        ne *= dims[d];
    }
    if (ne > INT32_MAX * 64LL) return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: too large", name);
    size_t bytes;
    switch (type) {
    case WB_GGML_F32: bytes = (size_t)ne * 4; break;
    case WB_GGML_F16: case WB_GGML_BF16: bytes = (size_t)ne * 2; break;
    case WB_GGML_Q8_0: case WB_GGML_Q4_0:
        if (dims[0] % 32 || dims[0] > INT32_MAX)
            return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: row length %lld is not a multiple of 32", name, (long long)dims[0]);
        bytes = (size_t)(ne / 32) * (type == WB_GGML_Q8_0 ? 34 : 18);
        break;
    default: return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: cannot write type %s", name, wb_ggml_type_name(type));
    }
    wtensor *t;
    wb_status st = new_tensor(w, name, nl, n_dims, dims, type, bytes, &t, err);
    if (st) return st;
    if (type == WB_GGML_F32) {
        for (int64_t i = 0; i < ne; i++) {
            uint32_t u;
            memcpy(&u, &values[i], 4);
            for (int k = 0; k < 4; k++) t->data[4 * i + k] = (uint8_t)(u >> (8 * k));
        }
    } else if (type == WB_GGML_F16 || type == WB_GGML_BF16) {
        for (int64_t i = 0; i < ne; i++) {
            uint16_t h = type == WB_GGML_F16 ? wb_f32_to_f16(values[i]) : wb_f32_to_bf16(values[i]);
            t->data[2 * i] = (uint8_t)h, t->data[2 * i + 1] = (uint8_t)(h >> 8);
        }
    } else {
        const wb_qtype q = type == WB_GGML_Q8_0 ? WB_QT_Q8_0 : WB_QT_Q4_0;
        const size_t rb = wb_quant_row_bytes(q, dims[0]);
        for (int64_t r = 0; r < ne / dims[0]; r++)
            wb_quantize_row(q, t->data + rb * (size_t)r, values + r * dims[0], (int)dims[0]);
    }
    w->n_t++;
    return WB_OK;
}

wb_status wb_gguf_add_tensor_raw(wb_gguf_writer *w, const char *name, int n_dims,
                                 const int64_t *dims, uint32_t type, const void *data, size_t len,
                                 wb_err *err) {
    size_t nl = name ? strlen(name) : 0;
    if (nl == 0 || nl > MAX_NAME)
        return wb_err_set(err, WB_ERR_ARG, "gguf writer: tensor name \"%s\" must be 1-%d bytes", name ? name : "", MAX_NAME);
    if (n_dims < 1 || n_dims > 4) return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: %d dims (1-4)", name, n_dims);
    const int ti = ggml_index(type);
    if (ti < 0) return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: unknown type %u", name, (unsigned)type);
    int64_t ne = 1;
    for (int d = 0; d < n_dims; d++) {
        if (dims[d] < 1 || dims[d] > INT64_MAX / ne) return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: bad dimension", name);
        ne *= dims[d];
    }
    if (dims[0] % k_ggml[ti].block || ne > INT32_MAX * 64LL ||
        (size_t)(ne / k_ggml[ti].block) * (size_t)k_ggml[ti].bytes != len)
        return wb_err_set(err, WB_ERR_ARG, "gguf writer: %s: %zu bytes do not hold a %s tensor of those dims", name, len, k_ggml[ti].name);
    wtensor *t;
    wb_status st = new_tensor(w, name, nl, n_dims, dims, type, len, &t, err);
    if (st) return st;
    memcpy(t->data, data, len);
    w->n_t++;
    return WB_OK;
}

wb_status wb_gguf_write(const wb_gguf_writer *w, const char *path, wb_err *err) {
    const size_t align = 32;
    buf h = {0};
    put(&h, "GGUF", 4);
    put_le(&h, 3, 4);
    put_le(&h, (uint64_t)w->n_t, 8);
    put_le(&h, (uint64_t)w->n_kv, 8);
    put(&h, w->kv.p, w->kv.n);
    size_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->ts[i];
        put_str(&h, t->name, strlen(t->name));
        put_le(&h, (uint64_t)t->n_dims, 4);
        for (int d = 0; d < t->n_dims; d++) put_le(&h, (uint64_t)t->dims[d], 8);
        put_le(&h, t->type, 4);
        put_le(&h, off, 8);
        off += t->bytes;
        off += (align - off % align) % align;
    }
    static const uint8_t zeros[32] = {0};
    put(&h, zeros, (align - h.n % align) % align);
    if (h.oom) {
        free(h.p);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory building the header", path);
    }
    /* the project's one atomic writer: temp file in the same directory, every write checked,
     * fsync, rename, directory fsync; a failure leaves the old target */
    wb_atomic_file *f = NULL;
    wb_status s = wb_atomic_begin(path, &f, err);
    if (!s) s = wb_atomic_write(f, h.p, h.n, err);
    for (int64_t i = 0; i < w->n_t && !s; i++) {
        s = wb_atomic_write(f, w->ts[i].data, w->ts[i].bytes, err);
        size_t pad = (align - w->ts[i].bytes % align) % align;
        if (!s && pad && i + 1 < w->n_t) s = wb_atomic_write(f, zeros, pad, err);
    }
    free(h.p);
    if (s) {
        wb_atomic_abort(f);
        return s;
    }
    return wb_atomic_commit(f, err);
}
