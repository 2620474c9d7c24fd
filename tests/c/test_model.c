/* test_model.c - GPT-2 loading, forward pass and KV-cache sessions against a plain-loop
 * reference, on small random checkpoints each test writes itself. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "model_family.h"
#include "model_internal.h"
#include "threadpool.h"
#include "wb_model.h"

/* ================================================================ fixture: a random GPT-2 */

typedef struct fx_opts {
    int V, T, C, L, NH, F;
    int tied;              /* config tie_word_embeddings */
    int with_head;         /* write lm_head.weight */
    int prefix;            /* "transformer." names */
    int buffers;           /* write attn.bias / attn.masked_bias buffers */
    wb_dtype dtype;        /* of the weights */
    const char *skip;      /* tensor left out */
    const char *bad_dtype; /* tensor written as I32 */
    const char *bad_shape; /* tensor written with its dims swapped / one longer */
    const char *config;    /* config.json text instead of the generated one */
    int tok_extra;         /* > 0: tokenizer with more ids than vocab_size */
    const char *act;       /* activation_function (default gelu_new) */
    uint64_t seed;
} fx_opts;

static fx_opts fx_default(void) {
    fx_opts o = {.V = 300, .T = 48, .C = 32, .L = 2, .NH = 4, .F = 128, .tied = 1,
                 .prefix = 1, .dtype = WB_F32, .seed = 42};
    return o;
}

static uint64_t rng_state;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest map to 256+k. */
static int byte_to_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
    return 256 + k;
}

static void put_cp_json(FILE *f, int cp) {
    if (cp == '"' || cp == '\\') fprintf(f, "\\%c", cp);
    else if (cp < 0x80) fputc(cp, f);
    else if (cp < 0x800) fprintf(f, "%c%c", 0xC0 | (cp >> 6), 0x80 | (cp & 0x3F));
    else fprintf(f, "%c%c%c", 0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F));
}

/* A minimal byte-level BPE tokenizer.json: 256 byte symbols, 3 merges, <|endoftext|>. */
static void write_tokenizer(const char *path, int extra) {
    FILE *f = fopen(path, "wb");
    int n = 256 + 3 + 1 + extra;
    fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
               "{\"id\":%d,\"content\":\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,"
               "\"rstrip\":false,\"normalized\":true,\"special\":true}],\"normalizer\":null,"
               "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
               "\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":{\"type\":"
               "\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":true},"
               "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
               "\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
               "\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\",\"fuse_unk\":false,"
               "\"byte_fallback\":false,\"vocab\":{", n - 1);
    for (int b = 0; b < 256; b++) {
        fprintf(f, "%s\"", b ? "," : "");
        put_cp_json(f, byte_to_cp(b));
        fprintf(f, "\":%d", b);
    }
    fprintf(f, ",\"\xC4\xA0t\":256,\"he\":257,\"\xC4\xA0the\":258");
    for (int i = 0; i < extra; i++) fprintf(f, ",\"x%d\":%d", i, 259 + i);
    fprintf(f, ",\"<|endoftext|>\":%d},\"merges\":[\"\xC4\xA0 t\",\"h e\",\"\xC4\xA0t he\"]}}\n",
            n - 1);
    fclose(f);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

static void write_config(const char *dir, const fx_opts *o) {
    char path[512], buf[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (o->config) {
        write_text(path, o->config);
        return;
    }
    char inner[32];
    if (o->F == 4 * o->C) snprintf(inner, sizeof inner, "null");
    else snprintf(inner, sizeof inner, "%d", o->F);
    snprintf(buf, sizeof buf,
             "{\"model_type\":\"gpt2\",\"architectures\":[\"GPT2LMHeadModel\"],\"vocab_size\":%d,"
             "\"n_positions\":%d,\"n_ctx\":%d,\"n_embd\":%d,\"n_layer\":%d,\"n_head\":%d,"
             "\"n_inner\":%s,\"layer_norm_epsilon\":1e-05,\"activation_function\":\"%s\","
             "\"tie_word_embeddings\":%s}\n",
             o->V, o->T, o->T, o->C, o->L, o->NH, inner, o->act ? o->act : "gelu_new",
             o->tied ? "true" : "false");
    write_text(path, buf);
}

typedef struct fx_tensor {
    char name[96];
    int ndim;
    int64_t shape[4];
    float *f;
    size_t n;
} fx_tensor;

static int add_t(fx_tensor *t, int nt, const char *pre, const char *name, int ndim, int64_t a,
                 int64_t b, float scale, float offset) {
    fx_tensor *x = &t[nt];
    snprintf(x->name, sizeof x->name, "%s%s", pre, name);
    x->ndim = ndim;
    x->shape[0] = a;
    x->shape[1] = b;
    x->n = (size_t)a * (size_t)(ndim == 2 ? b : 1);
    x->f = malloc(x->n * sizeof(float));
    for (size_t i = 0; i < x->n; i++) x->f[i] = offset + scale * frand();
    return nt + 1;
}

/* Write config.json, model.safetensors and tokenizer.json into dir. */
static void make_model(const char *dir, const fx_opts *o) {
    rng_state = o->seed * 2654435761u + 1;
    fx_tensor t[256];
    int nt = 0;
    const char *pre = o->prefix ? "transformer." : "";
    int C = o->C, F = o->F;
    nt = add_t(t, nt, pre, "wte.weight", 2, o->V, C, 0.3f, 0);
    nt = add_t(t, nt, pre, "wpe.weight", 2, o->T, C, 0.1f, 0);
    for (int l = 0; l < o->L; l++) {
        char nm[64];
#define T(suffix, nd, a, b, sc, off)                                                              \
    snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);                                                \
    nt = add_t(t, nt, pre, nm, nd, a, b, sc, off)
        T("ln_1.weight", 1, C, 0, 0.1f, 1.0f);
        T("ln_1.bias", 1, C, 0, 0.05f, 0);
        T("attn.c_attn.weight", 2, C, 3 * C, 0.25f, 0);
        T("attn.c_attn.bias", 1, 3 * C, 0, 0.05f, 0);
        T("attn.c_proj.weight", 2, C, C, 0.15f, 0);
        T("attn.c_proj.bias", 1, C, 0, 0.05f, 0);
        T("ln_2.weight", 1, C, 0, 0.1f, 1.0f);
        T("ln_2.bias", 1, C, 0, 0.05f, 0);
        T("mlp.c_fc.weight", 2, C, F, 0.2f, 0);
        T("mlp.c_fc.bias", 1, F, 0, 0.05f, 0);
        T("mlp.c_proj.weight", 2, F, C, 0.1f, 0);
        T("mlp.c_proj.bias", 1, C, 0, 0.05f, 0);
        if (o->buffers) {
            T("attn.masked_bias", 1, 1, 0, 0.0f, -1e4f);
            T("attn.bias", 2, o->T, o->T, 0.0f, 1.0f);
        }
#undef T
    }
    nt = add_t(t, nt, pre, "ln_f.weight", 1, C, 0, 0.1f, 1.0f);
    nt = add_t(t, nt, pre, "ln_f.bias", 1, C, 0, 0.05f, 0);
    if (o->with_head) nt = add_t(t, nt, "", "lm_head.weight", 2, o->V, C, 0.3f, 0);

    wb_tensor_view v[256];
    void *bufs[256];
    int nv = 0;
    for (int i = 0; i < nt; i++) {
        const char *bare = t[i].name + strlen(pre);
        if (strncmp(t[i].name, "lm_head", 7) == 0) bare = t[i].name;
        if (o->skip && strcmp(bare, o->skip) == 0) continue;
        wb_tensor_view *x = &v[nv];
        x->name = t[i].name;
        x->ndim = t[i].ndim;
        memcpy(x->shape, t[i].shape, sizeof t[i].shape);
        int is_buffer = strstr(bare, "attn.bias") && !strstr(bare, "c_attn");
        is_buffer |= strstr(bare, "masked_bias") != NULL;
        x->dtype = is_buffer ? WB_F32 : o->dtype;
        size_t n = t[i].n;
        if (o->bad_shape && strcmp(bare, o->bad_shape) == 0) {
            if (x->ndim == 2) {
                int64_t s0 = x->shape[0];
                x->shape[0] = x->shape[1];
                x->shape[1] = s0;
                if (x->shape[0] == x->shape[1]) x->shape[0] = x->shape[0] / 2, x->shape[1] *= 2;
            } else {
                x->shape[0] -= 1;
                n -= 1;
            }
        }
        if (o->bad_dtype && strcmp(bare, o->bad_dtype) == 0) x->dtype = WB_I32;
        if (x->dtype == WB_F32 || x->dtype == WB_I32) {
            bufs[nv] = malloc(n * 4);
            memcpy(bufs[nv], t[i].f, n * 4);
            x->nbytes = n * 4;
        } else {
            uint16_t *h = malloc(n * 2);
            for (size_t k = 0; k < n; k++)
                h[k] = x->dtype == WB_F16 ? wb_f32_to_f16(t[i].f[k]) : wb_f32_to_bf16(t[i].f[k]);
            bufs[nv] = h;
            x->nbytes = n * 2;
        }
        x->data = bufs[nv];
        nv++;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt"};
    wb_err err = {0};
    wb_status s = wb_safetensors_write(path, v, nv, meta, 1, &err);
    if (s) fprintf(stderr, "fixture: %s\n", err.msg);
    for (int i = 0; i < nv; i++) free(bufs[i]);
    for (int i = 0; i < nt; i++) free(t[i].f);
    write_config(dir, o);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_tokenizer(path, o->tok_extra > 0 ? o->V : 0);
}

static char *new_dir(void) {
    char tmpl[] = "/tmp/wb_test_model_XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static void rm_dir(char *dir) {
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    char path[512];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(dir);
}

static wb_model *load_fixture(const fx_opts *o, char **dir_out) {
    char *dir = new_dir();
    make_model(dir, o);
    wb_model *m = NULL;
    wb_err err = {0};
    wb_status s = wb_model_load(dir, &m, &err);
    CHECK_MSG(s == WB_OK, "load: %s", err.msg);
    if (dir_out) *dir_out = dir;
    else rm_dir(dir);
    return m;
}

/* ================================================================ plain-loop reference */

static int ref_erf = 0; /* reference GELU: exact erf form instead of tanh */

typedef struct ref_model {
    int V, T, C, L, NH, F, tied;
    wb_safetensors *st;
    const char *pre;
} ref_model;

/* Element i of tensor name (any float dtype) read straight from the file. */
static double W(const ref_model *r, const char *name, size_t i) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", strncmp(name, "lm_head", 7) ? r->pre : "", name);
    wb_tensor_view v;
    if (wb_safetensors_find(r->st, full, &v, NULL) != WB_OK) return NAN;
    if (v.dtype == WB_F32) {
        float f;
        memcpy(&f, (const char *)v.data + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)v.data + 2 * i, 2);
    return v.dtype == WB_F16 ? wb_f16_to_f32(h) : wb_bf16_to_f32(h);
}

/* Cache weights as doubles so the reference is not dominated by name lookups. */
typedef struct ref_w {
    double *d;
} ref_w;

static double *get(const ref_model *r, const char *name, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = W(r, name, i);
    return d;
}

static void ref_ln(double *out, const double *x, const double *w, const double *b, int C) {
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
}

/* When set, the reference also records (NH = 4): ref_hid [L + 1, n, C] the residual entering
 * each layer (the last after every layer, before ln_f), ref_att [L, n, NH, n] the softmax rows,
 * ref_kc / ref_vc [L, n, C] the keys and values. */
static double *ref_hid, *ref_att, *ref_kc, *ref_vc;

/* logits [n, V] for every position, triple loops over Conv1D [in, out] weights. */
static void ref_forward(const char *dir, const int32_t *ids, int n, float *logits) {
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ref_model r = {0};
    wb_err err = {0};
    if (wb_safetensors_open(path, &r.st, &err)) {
        CHECK_MSG(0, "reference: %s", err.msg);
        return;
    }
    wb_tensor_view v;
    r.pre = wb_safetensors_find(r.st, "transformer.wte.weight", &v, NULL) == WB_OK ? "transformer." : "";
    wb_safetensors_find(r.st, strcmp(r.pre, "") ? "transformer.wte.weight" : "wte.weight", &v, NULL);
    int V = (int)v.shape[0], C = (int)v.shape[1];
    int L = 0;
    char nm[96];
    for (;; L++) {
        snprintf(nm, sizeof nm, "%sh.%d.ln_1.weight", r.pre, L);
        if (wb_safetensors_find(r.st, nm, &v, NULL) != WB_OK) break;
    }
    snprintf(nm, sizeof nm, "%sh.0.mlp.c_fc.bias", r.pre);
    wb_safetensors_find(r.st, nm, &v, NULL);
    int F = (int)v.shape[0], NH = 4, hs = C / NH;
    int has_head = wb_safetensors_find(r.st, "lm_head.weight", &v, NULL) == WB_OK;
    double *x = calloc((size_t)n * C, sizeof *x), *xn = calloc((size_t)n * C, sizeof *xn);
    double *qkv = calloc((size_t)n * 3 * C, sizeof *qkv), *att = calloc((size_t)n * C, sizeof *att);
    double *h = calloc((size_t)n * F, sizeof *h), *sc = calloc((size_t)n, sizeof *sc);
    double *wte = get(&r, "wte.weight", (size_t)V * C), *wpe = get(&r, "wpe.weight", (size_t)n * C);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C; i++) x[t * C + i] = wte[(size_t)ids[t] * C + i] + wpe[t * C + i];
    if (ref_hid) memcpy(ref_hid, x, (size_t)n * C * sizeof *x);
    for (int l = 0; l < L; l++) {
        char b[96];
#define G(var, suffix, count) snprintf(b, sizeof b, "h.%d.%s", l, suffix); double *var = get(&r, b, count)
        G(l1w, "ln_1.weight", C); G(l1b, "ln_1.bias", C);
        G(aw, "attn.c_attn.weight", (size_t)C * 3 * C); G(ab, "attn.c_attn.bias", 3 * C);
        G(pw, "attn.c_proj.weight", (size_t)C * C); G(pb, "attn.c_proj.bias", C);
        G(l2w, "ln_2.weight", C); G(l2b, "ln_2.bias", C);
        G(fw, "mlp.c_fc.weight", (size_t)C * F); G(fb, "mlp.c_fc.bias", F);
        G(mw, "mlp.c_proj.weight", (size_t)F * C); G(mb, "mlp.c_proj.bias", C);
#undef G
        for (int t = 0; t < n; t++) ref_ln(xn + t * C, x + t * C, l1w, l1b, C);
        for (int t = 0; t < n; t++)
            for (int j = 0; j < 3 * C; j++) {
                double s = ab[j];
                for (int i = 0; i < C; i++) s += xn[t * C + i] * aw[(size_t)i * 3 * C + j];
                qkv[t * 3 * C + j] = s;
            }
        for (int t = 0; t < n; t++)
            for (int hd = 0; hd < NH; hd++) {
                double mx = -1e300, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int i = 0; i < hs; i++)
                        s += qkv[t * 3 * C + hd * hs + i] * qkv[u * 3 * C + C + hd * hs + i];
                    sc[u] = s / sqrt((double)hs);
                    if (sc[u] > mx) mx = sc[u];
                }
                for (int u = 0; u <= t; u++) sum += (sc[u] = exp(sc[u] - mx));
                if (ref_att)
                    for (int u = 0; u <= t; u++)
                        ref_att[(((size_t)l * n + t) * NH + hd) * n + u] = sc[u] / sum;
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++) o += sc[u] / sum * qkv[u * 3 * C + 2 * C + hd * hs + i];
                    att[t * C + hd * hs + i] = o;
                }
            }
        for (int t = 0; t < n; t++)
            for (int j = 0; j < C; j++) {
                double s = pb[j];
                for (int i = 0; i < C; i++) s += att[t * C + i] * pw[(size_t)i * C + j];
                x[t * C + j] += s;
            }
        for (int t = 0; t < n; t++) ref_ln(xn + t * C, x + t * C, l2w, l2b, C);
        for (int t = 0; t < n; t++)
            for (int j = 0; j < F; j++) {
                double s = fb[j];
                for (int i = 0; i < C; i++) s += xn[t * C + i] * fw[(size_t)i * F + j];
                h[t * F + j] = ref_erf ? 0.5 * s * (1 + erf(s / sqrt(2.0)))
                                       : 0.5 * s * (1 + tanh(sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
            }
        for (int t = 0; t < n; t++)
            for (int j = 0; j < C; j++) {
                double s = mb[j];
                for (int i = 0; i < F; i++) s += h[t * F + i] * mw[(size_t)i * C + j];
                x[t * C + j] += s;
            }
        if (ref_hid) memcpy(ref_hid + (size_t)(l + 1) * n * C, x, (size_t)n * C * sizeof *x);
        for (int t = 0; t < n && ref_kc; t++)
            for (int i = 0; i < C; i++) {
                ref_kc[((size_t)l * n + t) * C + i] = qkv[t * 3 * C + C + i];
                ref_vc[((size_t)l * n + t) * C + i] = qkv[t * 3 * C + 2 * C + i];
            }
        free(l1w); free(l1b); free(aw); free(ab); free(pw); free(pb);
        free(l2w); free(l2b); free(fw); free(fb); free(mw); free(mb);
    }
    double *lw = get(&r, "ln_f.weight", C), *lb = get(&r, "ln_f.bias", C);
    double *head = has_head ? get(&r, "lm_head.weight", (size_t)V * C) : wte;
    for (int t = 0; t < n; t++) {
        ref_ln(xn + t * C, x + t * C, lw, lb, C);
        for (int vv = 0; vv < V; vv++) {
            double s = 0;
            for (int i = 0; i < C; i++) s += xn[t * C + i] * head[(size_t)vv * C + i];
            logits[(size_t)t * V + vv] = (float)s;
        }
    }
    if (has_head) free(head);
    free(lw); free(lb); free(wte); free(wpe);
    free(x); free(xn); free(qkv); free(att); free(h); free(sc);
    wb_safetensors_free(r.st);
}

/* ================================================================ helpers */

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as a failure */
    }
    return m;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* 20 tokens: long enough for prefill's GEMM attention (>= 16 rows) */
static const int32_t prompt[] = {259, 17, 256, 258, 72, 101, 108, 108, 111, 32,
                                 257, 3,   44,  299, 0,  255, 128, 7,   258, 258};
#define NPROMPT ((int)(sizeof prompt / sizeof prompt[0]))

/* ================================================================ tests */

static void tinylm_sized_model_counts_1071872_parameters(void) {
    fx_opts o = fx_default();
    o.V = 2048, o.T = 128, o.C = 128, o.L = 4, o.NH = 4, o.F = 512;
    wb_model *m = load_fixture(&o, NULL);
    if (!m) return;
    CHECK(wb_model_num_parameters(m) == 1071872);
    const wb_config *c = wb_model_config(m);
    CHECK(c->vocab_size == 2048 && c->n_ctx == 128 && c->n_embd == 128 && c->n_layer == 4 &&
          c->n_head == 4 && c->n_inner == 512 && c->tie_word_embeddings == 1);
    CHECK(strstr(wb_model_config_json(m), "\"n_embd\":128") != NULL);
    CHECK(wb_tokenizer_vocab_size(wb_model_tokenizer(m)) == 260);
    wb_session *s = NULL;
    CHECK(wb_session_new(m, 0, &s, NULL) == WB_OK);
    CHECK(wb_session_cache_bytes(s) == 2ull * 4 * 128 * 128 * 4);
    wb_session_free(s);
    wb_model_free(m);
}

static void forward_matches_the_plain_loop_reference_on_every_position(void) {
    fx_opts o = fx_default();
    char *dir;
    wb_model *m = load_fixture(&o, &dir);
    if (!m) return;
    int V = o.V, n = NPROMPT;
    float *ref = malloc((size_t)n * V * sizeof *ref), *got = malloc((size_t)n * V * sizeof *got);
    ref_forward(dir, prompt, n, ref);
    wb_err err = {0};
    CHECK(wb_model_forward(m, prompt, n, got, 1, &err) == WB_OK);
    CHECK_NEAR(max_abs_diff(ref, got, (size_t)n * V), 0, 1e-4);
    /* last position only */
    CHECK(wb_model_forward(m, prompt, n, got, 0, &err) == WB_OK);
    CHECK_NEAR(max_abs_diff(ref + (size_t)(n - 1) * V, got, V), 0, 1e-4);
    /* 40 tokens: several causal attention blocks in the GEMM prefill */
    {
        int32_t lng[40];
        for (int i = 0; i < 40; i++) lng[i] = (int32_t)((i * 53 + 5) % V);
        float *r40 = malloc((size_t)40 * V * sizeof *r40), *g40 = malloc((size_t)40 * V * sizeof *g40);
        ref_forward(dir, lng, 40, r40);
        CHECK(wb_model_forward(m, lng, 40, g40, 1, &err) == WB_OK);
        CHECK_NEAR(max_abs_diff(r40, g40, (size_t)40 * V), 0, 1e-4);
        wb_session *s2 = NULL;
        wb_session_new(m, 0, &s2, NULL);
        CHECK(wb_session_prefill(s2, lng, 5, NULL, 0, &err) == WB_OK);
        CHECK(wb_session_prefill(s2, lng + 5, 35, g40, 1, &err) == WB_OK);
        CHECK_NEAR(max_abs_diff(r40 + (size_t)5 * V, g40, (size_t)35 * V), 0, 1e-4);
        wb_session_free(s2);
        free(r40);
        free(g40);
    }
    /* the portable scalar kernels agree too */
    int old = wb_kernels_force_scalar(1);
    CHECK(wb_model_forward(m, prompt, n, got, 1, &err) == WB_OK);
    CHECK_NEAR(max_abs_diff(ref, got, (size_t)n * V), 0, 1e-4);
    wb_session *s = NULL;
    wb_session_new(m, 0, &s, NULL);
    for (int t = 0; t < n; t++) CHECK(wb_session_decode(s, prompt[t], got, &err) == WB_OK);
    CHECK_NEAR(max_abs_diff(ref + (size_t)(n - 1) * V, got, V), 0, 1e-4);
    wb_session_free(s);
    wb_kernels_force_scalar(old);
    free(ref);
    free(got);
    wb_model_free(m);
    rm_dir(dir);
}

/* Greedy for 20 steps three ways: decode with cache, full recompute, plain-loop reference. */
static void cached_uncached_and_reference_agree_over_20_greedy_steps(void) {
    fx_opts o = fx_default();
    char *dir;
    wb_model *m = load_fixture(&o, &dir);
    if (!m) return;
    const int V = o.V, steps = 20;
    int32_t seq[64];
    memcpy(seq, prompt, sizeof prompt);
    int n = NPROMPT;
    float *lc = malloc(V * sizeof *lc), *lu = malloc(V * sizeof *lu);
    float *lr = malloc((size_t)(n + steps) * V * sizeof *lr);
    wb_session *s = NULL;
    wb_err err = {0};
    CHECK(wb_session_new(m, 0, &s, &err) == WB_OK);
    CHECK(wb_session_prefill(s, seq, n, lc, 0, &err) == WB_OK);
    double worst = 0;
    for (int step = 0; step < steps; step++) {
        CHECK(wb_model_forward(m, seq, n, lu, 0, &err) == WB_OK);
        ref_forward(dir, seq, n, lr);
        const float *lref = lr + (size_t)(n - 1) * V;
        double d1 = max_abs_diff(lc, lu, V), d2 = max_abs_diff(lc, lref, V);
        worst = fmax(worst, fmax(d1, d2));
        int a = argmax(lc, V), b = argmax(lu, V), c = argmax(lref, V);
        CHECK_MSG(a == b && b == c, "step %d: greedy %d (cached) %d (uncached) %d (reference)",
                  step, a, b, c);
        seq[n++] = a;
        CHECK(wb_session_decode(s, a, lc, &err) == WB_OK);
    }
    CHECK_NEAR(worst, 0, 1e-4);
    CHECK(wb_session_pos(s) == n);
    CHECK(memcmp(wb_session_tokens(s), seq, (size_t)n * sizeof *seq) == 0);
    wb_session_free(s);
    free(lc);
    free(lu);
    free(lr);
    wb_model_free(m);
    rm_dir(dir);
}

static void gemm_prefill_matches_token_by_token_decode_on_all_positions(void) {
    fx_opts o = fx_default();
    wb_model *m = load_fixture(&o, NULL);
    if (!m) return;
    const int V = o.V, n = NPROMPT;
    float *all = malloc((size_t)n * V * sizeof *all), *one = malloc(V * sizeof *one);
    wb_session *a = NULL, *b = NULL;
    wb_session_new(m, 0, &a, NULL);
    wb_session_new(m, 0, &b, NULL);
    /* prefill in two chunks to exercise pos > 0 in the GEMM path */
    CHECK(wb_session_prefill(a, prompt, 3, all, 1, NULL) == WB_OK);
    CHECK(wb_session_prefill(a, prompt + 3, n - 3, all + (size_t)3 * V, 1, NULL) == WB_OK);
    double worst = 0;
    for (int t = 0; t < n; t++) {
        CHECK(wb_session_decode(b, prompt[t], one, NULL) == WB_OK);
        worst = fmax(worst, max_abs_diff(all + (size_t)t * V, one, V));
    }
    CHECK_NEAR(worst, 0, 1e-4);
    /* prefill without logits still fills the cache */
    wb_session_reset(a);
    CHECK(wb_session_prefill(a, prompt, n - 1, NULL, 0, NULL) == WB_OK);
    CHECK(wb_session_decode(a, prompt[n - 1], all, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(all, one, V), 0, 1e-4);
    wb_session_free(a);
    wb_session_free(b);
    free(all);
    free(one);
    wb_model_free(m);
}

static void fork_continues_identically_and_truncate_equals_fresh(void) {
    fx_opts o = fx_default();
    wb_model *m = load_fixture(&o, NULL);
    if (!m) return;
    const int V = o.V;
    float *x = malloc(V * sizeof *x), *y = malloc(V * sizeof *y);
    wb_session *s = NULL, *f = NULL, *fresh = NULL;
    wb_err err = {0};
    wb_session_new(m, 32, &s, NULL);
    CHECK(wb_session_n_ctx(s) == 32);
    CHECK(wb_session_prefill(s, prompt, 8, NULL, 0, NULL) == WB_OK);
    CHECK(wb_session_fork(s, &f, &err) == WB_OK);
    CHECK(wb_session_pos(f) == 8 && wb_session_n_ctx(f) == 32);
    for (int t = 8; t < NPROMPT; t++) {
        CHECK(wb_session_decode(s, prompt[t], x, NULL) == WB_OK);
        CHECK(wb_session_decode(f, prompt[t], y, NULL) == WB_OK);
        CHECK(memcmp(x, y, V * sizeof *x) == 0);
    }
    /* diverge the fork, then truncate it back and take the original path again */
    CHECK(wb_session_decode(f, 7, y, NULL) == WB_OK);
    CHECK(wb_session_decode(f, 9, y, NULL) == WB_OK);
    CHECK(wb_session_truncate(f, 6, &err) == WB_OK);
    CHECK(wb_session_pos(f) == 6);
    CHECK(wb_session_prefill(f, prompt + 6, NPROMPT - 6, y, 0, NULL) == WB_OK);
    wb_session_new(m, 32, &fresh, NULL);
    CHECK(wb_session_prefill(fresh, prompt, NPROMPT, x, 0, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(x, y, V), 0, 1e-5);
    CHECK(wb_session_truncate(f, 99, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "truncate");
    CHECK(wb_session_truncate(f, -1, &err) == WB_ERR_RANGE);
    wb_session_reset(f);
    CHECK(wb_session_pos(f) == 0);
    CHECK(wb_session_prefill(f, prompt, NPROMPT, y, 0, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(x, y, V), 0, 1e-5);
    wb_session_free(s);
    wb_session_free(f);
    wb_session_free(fresh);
    wb_session_free(NULL);
    free(x);
    free(y);
    wb_model_free(m);
}

/* F16/BF16 files hold rounded weights; an F32 file holding the same rounded values must give
 * the same logits, and both stay near the unrounded model. */
static void f16_and_bf16_checkpoints_load_and_agree_with_f32(void) {
    fx_opts o = fx_default();
    wb_model *m32 = load_fixture(&o, NULL);
    if (!m32) return;
    const int V = o.V, n = NPROMPT;
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    wb_model_forward(m32, prompt, n, a, 0, NULL);
    wb_dtype dts[2] = {WB_F16, WB_BF16};
    double tol[2] = {2e-2, 1.5e-1};
    for (int k = 0; k < 2; k++) {
        fx_opts h = o;
        h.dtype = dts[k];
        char *dir;
        wb_model *mh = load_fixture(&h, &dir);
        if (!mh) continue;
        CHECK(wb_model_forward(mh, prompt, n, b, 0, NULL) == WB_OK);
        double d = max_abs_diff(a, b, V);
        CHECK_MSG(d < tol[k], "%s logits differ from F32 by %g", k ? "BF16" : "F16", d);
        CHECK(argmax(a, V) == argmax(b, V));
        float *r = malloc((size_t)n * V * sizeof *r);
        ref_forward(dir, prompt, n, r); /* reference reads the rounded file itself */
        CHECK_NEAR(max_abs_diff(r + (size_t)(n - 1) * V, b, V), 0, 1e-4);
        free(r);
        wb_model_free(mh);
        rm_dir(dir);
    }
    free(a);
    free(b);
    wb_model_free(m32);
}

/* Decode gives the same bits at 1 and 2 threads: each logit is summed the same way whichever
 * thread computes its rows. The default fixture (4 heads of 8) takes the path where a chunk is
 * one head's q/k/v rows and attention; 3 heads of 12 split q/k/v by row blocks, with tails. */
static void decode_bits_do_not_depend_on_threads(void) {
    fx_opts opts[2] = {fx_default(), fx_default()};
    opts[1].NH = 3, opts[1].C = 36, opts[1].F = 144, opts[1].V = 293;
    const int old = wb_threads_get();
    for (int k = 0; k < 2; k++) {
        wb_model *m = load_fixture(&opts[k], NULL);
        if (!m) continue;
        const int V = opts[k].V;
        float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
        wb_session *s1 = NULL, *s2 = NULL;
        CHECK(wb_session_new(m, 0, &s1, NULL) == WB_OK);
        CHECK(wb_session_new(m, 0, &s2, NULL) == WB_OK);
        int differ = 0;
        for (int t = 0; s1 && s2 && t < 40; t++) {
            int32_t id = (int32_t)((t * 37 + 11) % V);
            wb_threads_set(1);
            CHECK(wb_session_decode(s1, id, a, NULL) == WB_OK);
            wb_threads_set(2);
            CHECK(wb_session_decode(s2, id, b, NULL) == WB_OK);
            differ += memcmp(a, b, V * sizeof *a) != 0;
        }
        CHECK_MSG(differ == 0, "fixture %d: %d of 40 decode steps differ between 1 and 2 threads",
                  k, differ);
        wb_session_free(s1);
        wb_session_free(s2);
        free(a);
        free(b);
        wb_model_free(m);
    }
    wb_threads_set(old);
}

/* The first session of a model at a thread count runs a throwaway decode step when it is created
 * (core/session.c): it must change nothing a caller sees. A warmed first session and a later one
 * give the same bits for a prompt and the decode steps after it, at 2 threads and at 1. */
static void session_warm_up_step_leaves_no_trace(void) {
    const int old = wb_threads_get();
    for (int nt = 2; nt >= 1; nt--) {
        fx_opts o = fx_default();
        wb_model *m = load_fixture(&o, NULL);
        if (!m) continue;
        wb_threads_set(nt);
        const int V = o.V;
        float *a = malloc((size_t)NPROMPT * V * sizeof *a), *b = malloc((size_t)NPROMPT * V * sizeof *b);
        int32_t ids[NPROMPT];
        for (int i = 0; i < NPROMPT; i++) ids[i] = prompt[i] % V;
        wb_session *s1 = NULL, *s2 = NULL;
        CHECK(wb_session_new(m, 0, &s1, NULL) == WB_OK); /* warms */
        CHECK(wb_session_new(m, 0, &s2, NULL) == WB_OK); /* does not */
        CHECK(wb_session_pos(s1) == 0 && wb_session_pos(s2) == 0);
        CHECK(s1 && wb_session_prefill(s1, ids, NPROMPT, a, 1, NULL) == WB_OK);
        CHECK(s2 && wb_session_prefill(s2, ids, NPROMPT, b, 1, NULL) == WB_OK);
        CHECK_MSG(memcmp(a, b, (size_t)NPROMPT * V * sizeof *a) == 0,
                  "%d threads: the warmed session's prompt logits differ", nt);
        int differ = 0;
        for (int t = 0; s1 && s2 && t < 12; t++) {
            const int32_t id = (int32_t)((t * 37 + 11) % V);
            CHECK(wb_session_decode(s1, id, a, NULL) == WB_OK);
            CHECK(wb_session_decode(s2, id, b, NULL) == WB_OK);
            differ += memcmp(a, b, V * sizeof *a) != 0;
        }
        CHECK_MSG(differ == 0, "%d threads: %d of 12 decode steps differ after the warm-up", nt,
                  differ);
        wb_session_free(s1);
        wb_session_free(s2);
        free(a);
        free(b);
        wb_model_free(m);
    }
    wb_threads_set(old);
    /* once per thread count (counts above 31 share one flag) */
    wb_pool_slot slot;
    wb_pool_slot_init(&slot);
    CHECK(wb_pool_slot_claim_warm(&slot, 2) == 1 && wb_pool_slot_claim_warm(&slot, 2) == 0);
    CHECK(wb_pool_slot_claim_warm(&slot, 1) == 1 && wb_pool_slot_claim_warm(&slot, 2) == 0);
    CHECK(wb_pool_slot_claim_warm(&slot, 40) == 1 && wb_pool_slot_claim_warm(&slot, 33) == 0);
    wb_pool_slot_destroy(&slot);
}

static void two_threads_give_the_same_results(void) {
    fx_opts o = fx_default();
    o.NH = 3, o.C = 48, o.F = 192, o.V = 293; /* odd sizes: row slices with tails */
    wb_model *m = load_fixture(&o, NULL);
    if (!m) return;
    const int V = o.V;
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    wb_session *s1 = NULL, *s2 = NULL;
    wb_session_new(m, 0, &s1, NULL);
    wb_session_new(m, 0, &s2, NULL);
    double worst = 0;
    int same = 1;
    for (int t = 0; t < 30; t++) {
        int32_t id = (int32_t)((t * 37 + 11) % V);
        wb_threads_set(1);
        CHECK(wb_session_decode(s1, id, a, NULL) == WB_OK);
        wb_threads_set(2);
        CHECK(wb_session_decode(s2, id, b, NULL) == WB_OK);
        worst = fmax(worst, max_abs_diff(a, b, V));
        same &= argmax(a, V) == argmax(b, V);
    }
    /* prefill: attention on the pool, GEMMs on OpenBLAS threads */
    float *pa = malloc((size_t)NPROMPT * V * sizeof *pa), *pb = malloc((size_t)NPROMPT * V * sizeof *pb);
    int32_t ids[NPROMPT];
    for (int i = 0; i < NPROMPT; i++) ids[i] = prompt[i] % V;
    wb_threads_set(1);
    CHECK(wb_model_forward(m, ids, NPROMPT, pa, 1, NULL) == WB_OK);
    wb_threads_set(2);
    CHECK(wb_model_forward(m, ids, NPROMPT, pb, 1, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(pa, pb, (size_t)NPROMPT * V), 0, 1e-5);
    wb_session_reset(s2);
    CHECK(wb_session_prefill(s2, ids, 3, NULL, 0, NULL) == WB_OK);
    CHECK(wb_session_prefill(s2, ids + 3, NPROMPT - 3, pb, 1, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(pa + (size_t)3 * V, pb, (size_t)(NPROMPT - 3) * V), 0, 1e-5);
    free(pa);
    free(pb);
    wb_session_reset(s1);
    wb_session_reset(s2);
    wb_threads_set(3); /* pool resized on the fly */
    CHECK(wb_session_decode(s2, 5, b, NULL) == WB_OK);
    wb_threads_set(1);
    CHECK(wb_session_decode(s1, 5, a, NULL) == WB_OK);
    worst = fmax(worst, max_abs_diff(a, b, V));
    CHECK_NEAR(worst, 0, 1e-5);
    CHECK(same);
    wb_session_free(s1);
    wb_session_free(s2);
    free(a);
    free(b);
    wb_model_free(m);
}

/* The KV caches of two sessions agree to the bit over their first pos rows, every layer. */
static int kv_caches_equal(const wb_model *m, const wb_session *a, const wb_session *b) {
    int same = wb_session_pos(a) == wb_session_pos(b);
    for (int l = 0; same && l < wb_model_config(m)->n_layer; l++) {
        wb_kv_view x, y;
        if (wb_session_kv(a, l, &x, NULL) || wb_session_kv(b, l, &y, NULL)) return 0;
        for (int t = 0; t < x.n_tokens; t++)
            same &= !memcmp(x.k + t * x.row_stride, y.k + t * y.row_stride,
                            x.row_stride * sizeof(float)) &&
                    !memcmp(x.v + t * x.row_stride, y.v + t * y.row_stride,
                            x.row_stride * sizeof(float));
    }
    return same;
}

/* Asked for the last position's logits only (or none), the forward trims its last layer to the
 * rows it needs (gpt2.c fwd_job): the caches and those logits must be the bits of the whole
 * pass, which a probe (it sees every row after every layer) makes the forward compute; not
 * all_positions = 1, whose head takes a prompt's rows through the GEMM, while one last row
 * goes through the GEMV as a decode row does. Cases: GEMV and GEMM prompts, a prompt after earlier
 * rows, a last attention block of one query (3 heads at 2 threads: blocks of 16, 33 rows), and
 * several sequences in one call (batches mix prompts, short prompts and decode rows). */
/* A model keeps its prompt-GEMM panels in the layout of the kernel level it was loaded at; run
 * at another level (here the portable one), it must pack per call, giving the bits of a model
 * loaded at that level. */
static void panels_of_another_kernel_level_are_not_used(void) {
    fx_opts o = fx_default();
    wb_model *here = load_fixture(&o, NULL);
    const int old = wb_kernels_force_scalar(1);
    wb_model *portable = load_fixture(&o, NULL);
    if (!here || !portable) {
        wb_kernels_force_scalar(old);
        wb_model_free(here);
        wb_model_free(portable);
        return;
    }
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)((i * 37 + 11) % o.V);
    float *a = malloc((size_t)o.V * sizeof *a), *b = malloc((size_t)o.V * sizeof *b);
    wb_session *sa = NULL, *sb = NULL;
    CHECK(wb_session_new(here, 0, &sa, NULL) == WB_OK);
    CHECK(wb_session_new(portable, 0, &sb, NULL) == WB_OK);
    if (sa && sb && a && b) {
        CHECK(wb_session_prefill(sa, ids, 40, a, 0, NULL) == WB_OK);
        CHECK(wb_session_prefill(sb, ids, 40, b, 0, NULL) == WB_OK);
        CHECK_MSG(!memcmp(a, b, (size_t)o.V * sizeof *a),
                  "a model loaded at this level and run at the portable one differs from one "
                  "loaded there");
        CHECK(kv_caches_equal(here, sa, sb));
    }
    wb_kernels_force_scalar(old);
    wb_session_free(sa);
    wb_session_free(sb);
    free(a);
    free(b);
    wb_model_free(here);
    wb_model_free(portable);
}

static void trimmed_last_layer_gives_the_bits_of_the_whole_pass(void) {
    fx_opts opts[2] = {fx_default(), fx_default()};
    opts[1].NH = 3, opts[1].C = 48, opts[1].F = 192, opts[1].V = 293;
    const int old = wb_threads_get();
    static const int cases[][2] = {{0, 20}, {0, 40}, {3, 33}, {0, 33}, {5, 1}, {0, 1}};
    for (int k = 0; k < 2; k++) {
        wb_model *m = load_fixture(&opts[k], NULL);
        if (!m) continue;
        const int V = opts[k].V;
        int32_t ids[48];
        for (int i = 0; i < 48; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
        const int C = opts[k].C, L = opts[k].L;
        float *all = malloc((size_t)4 * V * sizeof *all), *last = malloc((size_t)4 * V * sizeof *last);
        float *hid = malloc((size_t)(L + 1) * 48 * C * sizeof *hid);
        wb_probe probe = {hid, NULL, 0, NULL};
        for (int nt = 1; nt <= 2; nt++) {
            wb_threads_set(nt);
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                const int pos = cases[c][0], n = cases[c][1];
                wb_session *a = NULL, *b = NULL, *z = NULL;
                CHECK(wb_session_new(m, 0, &a, NULL) == WB_OK);
                CHECK(wb_session_new(m, 0, &b, NULL) == WB_OK);
                CHECK(wb_session_new(m, 0, &z, NULL) == WB_OK);
                if (!a || !b || !z) break;
                if (pos) {
                    CHECK(wb_session_prefill(a, ids, pos, NULL, 0, NULL) == WB_OK);
                    CHECK(wb_session_prefill_inspect(b, ids, pos, all, 0, &probe, NULL) == WB_OK);
                    CHECK(wb_session_prefill(z, ids, pos, all, 0, NULL) == WB_OK);
                }
                CHECK(wb_session_prefill(a, ids + pos, n, last, 0, NULL) == WB_OK);
                CHECK(wb_session_prefill_inspect(b, ids + pos, n, all, 0, &probe, NULL) == WB_OK);
                CHECK(wb_session_prefill(z, ids + pos, n, NULL, 0, NULL) == WB_OK);
                CHECK_MSG(!memcmp(last, all, (size_t)V * sizeof *last),
                          "fixture %d, %d threads, %d rows at %d: last logits differ", k, nt, n,
                          pos);
                CHECK_MSG(kv_caches_equal(m, a, b) && kv_caches_equal(m, z, b),
                          "fixture %d, %d threads, %d rows at %d: caches differ", k, nt, n, pos);
                wb_session_free(a);
                wb_session_free(b);
                wb_session_free(z);
            }
            /* four sequences in one call: trimmed (last logits) against the whole pass */
            static const int counts[4] = {35, 1, 5, 33}, starts[4] = {0, 4, 0, 2};
            wb_session *s1[4] = {0}, *s2[4] = {0};
            wb_seq_rows r1[4], r2[4];
            int ok = 1;
            for (int i = 0; i < 4; i++) {
                ok &= wb_session_new(m, 0, &s1[i], NULL) == WB_OK &&
                      wb_session_new(m, 0, &s2[i], NULL) == WB_OK;
                if (!ok) break;
                if (starts[i]) {
                    ok &= wb_session_prefill(s1[i], ids, starts[i], NULL, 0, NULL) == WB_OK;
                    ok &= wb_session_prefill(s2[i], ids, starts[i], NULL, 0, NULL) == WB_OK;
                }
                ok &= wb_session_rows(s1[i], ids + starts[i], counts[i], &r1[i], NULL) == WB_OK &&
                      wb_session_rows(s2[i], ids + starts[i], counts[i], &r2[i], NULL) == WB_OK;
            }
            CHECK(ok);
            if (ok) {
                r2[1].probe = &probe; /* a probe on one sequence: the whole call untrimmed */
                CHECK(wb_forward_seqs(m, r1, 4, last, 0, NULL, NULL) == WB_OK);
                CHECK(wb_forward_seqs(m, r2, 4, all, 0, NULL, NULL) == WB_OK);
                for (int i = 0; i < 4; i++) {
                    wb_session_commit(s1[i], ids + starts[i], counts[i]);
                    wb_session_commit(s2[i], ids + starts[i], counts[i]);
                    CHECK_MSG(!memcmp(last + (size_t)i * V, all + (size_t)i * V,
                                      (size_t)V * sizeof *last),
                              "fixture %d, %d threads: sequence %d's logits differ in a batch", k,
                              nt, i);
                    CHECK_MSG(kv_caches_equal(m, s1[i], s2[i]),
                              "fixture %d, %d threads: sequence %d's cache differs in a batch", k,
                              nt, i);
                }
            }
            for (int i = 0; i < 4; i++) {
                wb_session_free(s1[i]);
                wb_session_free(s2[i]);
            }
        }
        free(all);
        free(last);
        free(hid);
        wb_model_free(m);
    }
    wb_threads_set(old);
}

static void untied_head_unprefixed_names_and_buffers_load(void) {
    fx_opts o = fx_default();
    o.tied = 0, o.with_head = 1, o.prefix = 0, o.buffers = 1, o.F = 256;
    char *dir;
    wb_model *m = load_fixture(&o, &dir);
    if (!m) return;
    CHECK(wb_model_config(m)->n_inner == 256);
    int64_t C = o.C, V = o.V, F = o.F;
    int64_t per = 4 * C + 3 * C * C + 3 * C + C * C + C + 2 * F * C + F + C;
    CHECK(wb_model_num_parameters(m) == 2 * V * C + o.T * C + o.L * per + 2 * C);
    float *r = malloc((size_t)NPROMPT * V * sizeof *r), *g = malloc((size_t)NPROMPT * V * sizeof *g);
    ref_forward(dir, prompt, NPROMPT, r); /* uses lm_head.weight since it is there */
    CHECK(wb_model_forward(m, prompt, NPROMPT, g, 1, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(r, g, (size_t)NPROMPT * V), 0, 1e-4);
    free(r);
    free(g);
    wb_model_free(m);
    rm_dir(dir);
    /* untied but lm_head.weight missing */
    o.with_head = 0;
    dir = new_dir();
    make_model(dir, &o);
    wb_err err = {0};
    CHECK(wb_model_load(dir, &m, &err) == WB_ERR_NOTFOUND);
    CHECK_ERR_MENTIONS(err.msg, "lm_head.weight");
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    rm_dir(dir);
}

/* hs = 9 and C = 36: every kernel's vector tail and the non-AVX2 attention fallback */
static void odd_head_size_matches_the_reference(void) {
    fx_opts o = fx_default();
    o.C = 36, o.F = 144, o.V = 301;
    char *dir;
    wb_model *m = load_fixture(&o, &dir);
    if (!m) return;
    const int V = o.V, n = NPROMPT;
    float *r = malloc((size_t)n * V * sizeof *r), *g = malloc((size_t)n * V * sizeof *g);
    ref_forward(dir, prompt, n, r);
    CHECK(wb_model_forward(m, prompt, n, g, 1, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(r, g, (size_t)n * V), 0, 1e-4);
    wb_session *s = NULL;
    wb_session_new(m, 0, &s, NULL);
    for (int t = 0; t < n; t++) CHECK(wb_session_decode(s, prompt[t], g, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(r + (size_t)(n - 1) * V, g, V), 0, 1e-4);
    wb_session_free(s);
    free(r);
    free(g);
    wb_model_free(m);
    rm_dir(dir);
}

static void erf_gelu_models_match_the_reference(void) {
    fx_opts o = fx_default();
    o.act = "gelu";
    char *dir;
    wb_model *m = load_fixture(&o, &dir);
    if (!m) return;
    const int V = o.V, n = NPROMPT;
    float *r = malloc((size_t)n * V * sizeof *r), *g = malloc((size_t)n * V * sizeof *g);
    ref_erf = 1;
    ref_forward(dir, prompt, n, r);
    ref_erf = 0;
    CHECK(wb_model_forward(m, prompt, n, g, 1, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(r, g, (size_t)n * V), 0, 1e-4);
    wb_session *s = NULL;
    wb_session_new(m, 0, &s, NULL);
    for (int t = 0; t < n; t++) CHECK(wb_session_decode(s, prompt[t], g, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(r + (size_t)(n - 1) * V, g, V), 0, 1e-4);
    /* and it differs from the tanh model, so the switch really happened */
    ref_forward(dir, prompt, n, r);
    CHECK(max_abs_diff(r + (size_t)(n - 1) * V, g, V) > 1e-6);
    wb_session_free(s);
    free(r);
    free(g);
    wb_model_free(m);
    rm_dir(dir);
}

static int abort_after(void *ud) { return --*(int *)ud < 0; }

static void abort_callback_cancels_prefill_and_leaves_the_session(void) {
    fx_opts o = fx_default();
    wb_model *m = load_fixture(&o, NULL);
    if (!m) return;
    wb_session *s = NULL;
    wb_session_new(m, 0, &s, NULL);
    wb_session_prefill(s, prompt, 3, NULL, 0, NULL);
    int budget = 1; /* let layer 0 run, stop before layer 1 */
    wb_model_set_abort(m, abort_after, &budget);
    wb_err err = {0};
    CHECK(wb_session_prefill(s, prompt + 3, 5, NULL, 0, &err) == WB_ERR_CANCELLED);
    CHECK(wb_session_pos(s) == 3);
    wb_model_set_abort(m, NULL, NULL);
    float *a = malloc(o.V * sizeof *a), *b = malloc(o.V * sizeof *b);
    CHECK(wb_session_prefill(s, prompt + 3, 5, a, 0, NULL) == WB_OK);
    CHECK(wb_model_forward(m, prompt, 8, b, 0, NULL) == WB_OK);
    CHECK_NEAR(max_abs_diff(a, b, o.V), 0, 1e-4);
    free(a);
    free(b);
    wb_session_free(s);
    wb_model_free(m);
}

static void bad_ids_and_overlong_prompts_are_range_errors(void) {
    fx_opts o = fx_default();
    wb_model *m = load_fixture(&o, NULL);
    if (!m) return;
    float *lg = malloc(o.V * sizeof *lg);
    wb_err err = {0};
    int32_t bad[3] = {1, o.V, 2};
    CHECK(wb_model_forward(m, bad, 3, lg, 0, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "token id 300");
    CHECK_ERR_MENTIONS(err.msg, "index 1");
    wb_session *s = NULL;
    wb_session_new(m, 16, &s, NULL);
    CHECK(wb_session_decode(s, -1, lg, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "token id -1");
    CHECK(wb_session_prefill(s, bad, 3, lg, 0, &err) == WB_ERR_RANGE);
    CHECK(wb_session_pos(s) == 0);
    int32_t *longp = calloc(64, sizeof *longp);
    CHECK(wb_session_prefill(s, longp, 17, lg, 0, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "context");
    CHECK(wb_session_pos(s) == 0);
    CHECK(wb_session_prefill(s, longp, 16, lg, 0, &err) == WB_OK);
    CHECK(wb_session_decode(s, 1, lg, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "full");
    CHECK(wb_model_forward(m, longp, o.T + 1, lg, 0, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "context");
    CHECK(wb_model_forward(m, longp, 0, lg, 0, &err) == WB_ERR_RANGE);
    wb_session *big = NULL;
    CHECK(wb_session_new(m, o.T + 1, &big, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "maximum context of 48");
    CHECK(wb_session_prefill(s, longp, 0, lg, 0, &err) == WB_ERR_ARG);
    free(longp);
    free(lg);
    wb_session_free(s);
    wb_model_free(m);
}

/* Load a fixture with o and expect failure status st mentioning both needles. */
static void expect_load_error(const fx_opts *o, wb_status st, const char *n1, const char *n2) {
    char *dir = new_dir();
    make_model(dir, o);
    wb_model *m = (wb_model *)1;
    wb_err err = {0};
    wb_status s = wb_model_load(dir, &m, &err);
    CHECK_MSG(s == st, "status %d (%s), expected %d", s, err.msg, st);
    CHECK(m == NULL);
    if (n1) CHECK_ERR_MENTIONS(err.msg, n1);
    if (n2) CHECK_ERR_MENTIONS(err.msg, n2);
    rm_dir(dir);
}

static void bad_checkpoints_fail_naming_file_and_tensor(void) {
    fx_opts o = fx_default();
    o.skip = "h.1.mlp.c_fc.bias";
    expect_load_error(&o, WB_ERR_NOTFOUND, "model.safetensors", "transformer.h.1.mlp.c_fc.bias");
    o = fx_default();
    o.bad_dtype = "h.0.attn.c_proj.weight";
    expect_load_error(&o, WB_ERR_FORMAT, "model.safetensors", "h.0.attn.c_proj.weight");
    o = fx_default();
    o.bad_shape = "h.0.attn.c_attn.weight";
    expect_load_error(&o, WB_ERR_FORMAT, "model.safetensors", "h.0.attn.c_attn.weight");
    o = fx_default();
    o.bad_shape = "ln_f.bias";
    expect_load_error(&o, WB_ERR_FORMAT, "model.safetensors", "ln_f.bias");
    o = fx_default();
    o.tok_extra = 1; /* tokenizer with more ids than vocab_size */
    expect_load_error(&o, WB_ERR_FORMAT, "tokenizer.json", "vocab_size");
    /* config sizes that disagree with the tensors */
    o = fx_default();
    o.config = "{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":3,\"n_head\":4}";
    expect_load_error(&o, WB_ERR_NOTFOUND, "model.safetensors", "h.2.");
    /* a config announcing ~13G parameters over a tiny file: rejected before any allocation */
    o.config = "{\"vocab_size\":50257,\"n_positions\":2048,\"n_embd\":4096,\"n_layer\":64,"
               "\"n_head\":32}";
    expect_load_error(&o, WB_ERR_FORMAT, "model.safetensors", "transformer.wte.weight");
}

static void write_file_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static void damaged_safetensors_fail_naming_the_file(void) {
    fx_opts o = fx_default();
    char *dir = new_dir();
    make_model(dir, &o);
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *orig = malloc(size), *buf = malloc(size);
    CHECK(fread(orig, 1, size, f) == size);
    fclose(f);
    wb_model *m = NULL;
    wb_err err = {0};
    /* truncated: the last tensor's data_offsets now run past the end */
    write_file_bytes(path, orig, size - 100);
    CHECK(wb_model_load(dir, &m, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    CHECK_ERR_MENTIONS(err.msg, "data_offsets");
    /* header length beyond the file */
    memcpy(buf, orig, size);
    buf[5] = 0x7f;
    write_file_bytes(path, buf, size);
    CHECK(wb_model_load(dir, &m, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    CHECK_ERR_MENTIONS(err.msg, "header length");
    /* header not JSON */
    memcpy(buf, orig, size);
    buf[8] = '[';
    buf[9] = '!';
    write_file_bytes(path, buf, size);
    CHECK(wb_model_load(dir, &m, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    CHECK_ERR_MENTIONS(err.msg, "JSON");
    /* empty file */
    write_file_bytes(path, orig, 0);
    CHECK(wb_model_load(dir, &m, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    /* missing */
    unlink(path);
    CHECK(wb_model_load(dir, &m, &err) == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    CHECK(m == NULL);
    free(orig);
    free(buf);
    rm_dir(dir);
}

static void bad_configs_fail_naming_config_json_and_the_key(void) {
    static const struct {
        const char *json, *key;
    } cases[] = {
        {"{\"vocab_size\":300,", "config.json"},
        {"[1,2]", "config.json"},
        {"{\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "vocab_size"},
        {"{\"vocab_size\":300,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "n_positions"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_layer\":2,\"n_head\":4}", "n_embd"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_head\":4}", "n_layer"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2}", "n_head"},
        {"{\"vocab_size\":\"300\",\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "vocab_size"},
        {"{\"vocab_size\":300.5,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "vocab_size"},
        {"{\"vocab_size\":300,\"n_positions\":0,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "n_positions"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":-32,\"n_layer\":2,\"n_head\":4}", "n_embd"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":0,\"n_head\":4}", "n_layer"},
        {"{\"vocab_size\":1e12,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "vocab_size"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":1000000,\"n_layer\":2,\"n_head\":4}", "n_embd"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":5000,\"n_head\":4}", "n_layer"},
        {"{\"vocab_size\":300,\"n_positions\":4000000,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "n_positions"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":5}", "n_head"},
        {"{\"vocab_size\":4000000,\"n_positions\":1000000,\"n_embd\":65536,\"n_layer\":1000,\"n_head\":4}", "parameters"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4,\"n_inner\":\"x\"}", "n_inner"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4,\"activation_function\":\"relu\"}", "activation_function"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4,\"tie_word_embeddings\":1}", "tie_word_embeddings"},
        {"{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4,\"layer_norm_epsilon\":-1}", "layer_norm_epsilon"},
        {"{\"model_type\":\"llama\",\"vocab_size\":300,\"n_positions\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4}", "model_type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wb_config c;
        wb_err err = {0};
        wb_status s = wb_config_parse(cases[i].json, strlen(cases[i].json), "dir/config.json", &c, &err);
        CHECK_MSG(s == WB_ERR_FORMAT, "case %zu accepted", i);
        CHECK_ERR_MENTIONS(err.msg, "config.json");
        CHECK_ERR_MENTIONS(err.msg, cases[i].key);
    }
    /* defaults and the accepted variants */
    const char *ok = "{\"vocab_size\":300,\"n_ctx\":48,\"n_embd\":32,\"n_layer\":2,\"n_head\":4,"
                     "\"n_inner\":null,\"activation_function\":\"gelu_pytorch_tanh\"}";
    wb_config c;
    CHECK(wb_config_parse(ok, strlen(ok), "config.json", &c, NULL) == WB_OK);
    CHECK(c.n_ctx == 48 && c.n_inner == 128 && c.tie_word_embeddings == 1);
    CHECK_NEAR(c.layer_norm_epsilon, 1e-5, 1e-12);
    /* a config.json that is not JSON, through the loader: the message names the path */
    fx_opts o = fx_default();
    o.config = "not json";
    expect_load_error(&o, WB_ERR_FORMAT, "config.json", NULL);
    o.config = "{\"vocab_size\":300,\"n_positions\":48,\"n_embd\":0,\"n_layer\":2,\"n_head\":4}";
    expect_load_error(&o, WB_ERR_FORMAT, "config.json", "n_embd");
}

static void missing_directory_and_files_are_io_errors(void) {
    wb_model *m = (wb_model *)1;
    wb_err err = {0};
    CHECK(wb_model_load("/nonexistent/wb-model", &m, &err) == WB_ERR_IO);
    CHECK(m == NULL);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent/wb-model");
    const char *files[] = {"config.json", "tokenizer.json"};
    for (int i = 0; i < 2; i++) {
        fx_opts o = fx_default();
        char *dir = new_dir(), path[512];
        make_model(dir, &o);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
        CHECK(wb_model_load(dir, &m, &err) == WB_ERR_IO);
        CHECK_ERR_MENTIONS(err.msg, files[i]);
        rm_dir(dir);
    }
    wb_model_free(NULL);
}

/* generation_config.json goes through core/generation_config.c's linear reader: 100 000 eos ids
 * load (a per-element cJSON_GetArrayItem walk would be quadratic: a ctest timeout, no clock
 * here), in order; an id outside the vocabulary is an error naming the file, key and element. */
static void generation_config_with_100k_eos_ids_loads(void) {
    char *dir = new_dir();
    char cmd[700], path[512];
    snprintf(cmd, sizeof cmd,
             "cp models/tinylm-base/config.json models/tinylm-base/model.safetensors "
             "models/tinylm-base/tokenizer.json '%s'/", dir);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    enum { N = 100000, VOCAB = 2048 }; /* tinylm-base's vocab_size */
    for (int bad = 0; bad <= 1; bad++) {
        FILE *f = fopen(path, "wb");
        fprintf(f, "{\"eos_token_id\":[");
        for (int i = 0; i < N; i++)
            fprintf(f, "%s%d", i ? "," : "", bad && i == N - 2 ? VOCAB : (i * 7) % VOCAB);
        fprintf(f, "]}");
        CHECK(fclose(f) == 0);
        wb_model *m = NULL;
        wb_err err = {0};
        wb_status s = wb_model_load(dir, &m, &err);
        if (!bad) {
            CHECK_MSG(s == WB_OK, "%s", err.msg);
            size_t n = 0;
            const int32_t *ids = wb_model_eos_ids(m, &n);
            CHECK(n == N);
            int in_order = ids != NULL;
            for (size_t i = 0; ids && i < n; i++) in_order &= ids[i] == (int32_t)((i * 7) % VOCAB);
            CHECK(in_order);
            CHECK(wb_model_is_eos(m, 7) && wb_model_is_eos(m, 0));
        } else {
            CHECK(s == WB_ERR_FORMAT && m == NULL);
            CHECK_MSG(strstr(err.msg, "generation_config.json") && strstr(err.msg, "eos_token_id") &&
                          strstr(err.msg, "element 99998"),
                      "%s", err.msg);
        }
        wb_model_free(m);
    }
    unlink(path);
    rm_dir(dir);
}

/* ============================================================ looking inside (wb_probe) */

static double rel_diff_d(const float *got, const double *want, size_t n) {
    double m = 0, scale = 1;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= m)) m = d;
    }
    return m / scale;
}

/* n tokens uncached with a probe on every position, then a session (split tokens, the rest
 * probed at two positions, then one probed decode step): hidden states, attention and the
 * cache agree with the reference; rows sum to 1 and are causal; probed logits are bit for bit
 * the unprobed ones. n > 48 runs the GEMM prefill, whose residual bias waits for the next
 * LayerNorm (the probe adds it). */
static void check_gpt2_probe(int n, int split) {
    fx_opts o = fx_default();
    o.T = 80;
    char *dir;
    wb_model *m = load_fixture(&o, &dir);
    if (!m) return;
    const int V = o.V, C = o.C, L = o.L, NH = o.NH;
    int32_t ids[80];
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
    ref_hid = calloc((size_t)(L + 1) * n * C, sizeof(double));
    ref_att = calloc((size_t)L * n * NH * n, sizeof(double));
    ref_kc = calloc((size_t)L * n * C, sizeof(double));
    ref_vc = calloc((size_t)L * n * C, sizeof(double));
    float *want = malloc((size_t)n * V * sizeof *want);
    ref_forward(dir, ids, n, want);
    int32_t pos[80];
    for (int t = 0; t < n; t++) pos[t] = t;
    float *hid = malloc((size_t)(L + 1) * n * C * sizeof *hid);
    float *att = malloc((size_t)L * n * NH * n * sizeof *att);
    float *lg = malloc((size_t)n * V * sizeof *lg), *plain = malloc((size_t)n * V * sizeof *plain);
    wb_probe p = {hid, pos, n, att};
    wb_err err = {0};
    CHECK(wb_model_forward_inspect(m, ids, n, lg, 1, &p, &err) == WB_OK);
    CHECK(wb_model_forward(m, ids, n, plain, 1, &err) == WB_OK);
    CHECK_MSG(!memcmp(lg, plain, (size_t)n * V * sizeof *lg), "n=%d: a probe changed the logits", n);
    double dh = rel_diff_d(hid, ref_hid, (size_t)(L + 1) * n * C);
    double da = rel_diff_d(att, ref_att, (size_t)L * n * NH * n);
    CHECK_MSG(dh < 1e-4, "n=%d: hidden states differ from the reference by %.3g", n, dh);
    CHECK_MSG(da < 1e-5, "n=%d: attention differs from the reference by %.3g", n, da);
    double worst = 0;
    int acausal = 0;
    for (int r = 0; r < L * n * NH; r++) {
        const int t = (r / NH) % n;
        double s = 0;
        for (int j = 0; j < n; j++) {
            s += att[(size_t)r * n + j];
            if (j > t && att[(size_t)r * n + j] != 0.0f) acausal++;
        }
        worst = fmax(worst, fabs(s - 1));
    }
    CHECK_MSG(worst < 1e-5 && acausal == 0, "n=%d: rows sum to 1 +- %.3g, %d acausal weights", n,
              worst, acausal);
    float *head = malloc((size_t)V * sizeof *head);
    CHECK(wb_model_head(m, hid + ((size_t)L * n + n - 1) * C, 1, head, &err) == WB_OK);
    CHECK_NEAR(max_abs_diff(head, lg + (size_t)(n - 1) * V, (size_t)V), 0, 1e-5);

    wb_session *s = NULL;
    CHECK(wb_session_new(m, 0, &s, &err) == WB_OK);
    CHECK(wb_session_prefill(s, ids, split, NULL, 0, &err) == WB_OK);
    const int32_t chosen[2] = {n - 2, split};
    float *att2 = malloc((size_t)L * 2 * NH * n * sizeof *att2);
    wb_probe p2 = {NULL, chosen, 2, att2};
    CHECK(wb_session_prefill_inspect(s, ids + split, n - 1 - split, NULL, 0, &p2, &err) == WB_OK);
    /* keys T = n - 1 in this call's rows */
    double d2 = 0;
    for (int l = 0; l < L; l++)
        for (int a = 0; a < 2; a++)
            for (int h = 0; h < NH; h++)
                d2 = fmax(d2, rel_diff_d(att2 + (((size_t)l * 2 + a) * NH + h) * (n - 1),
                                         ref_att + (((size_t)l * n + chosen[a]) * NH + h) * n,
                                         (size_t)(n - 1)));
    /* one probed decode step: the last position, through the forward instead of the GEMV path */
    float *hid3 = malloc((size_t)(L + 1) * C * sizeof *hid3), *att3 = malloc((size_t)L * NH * n * sizeof *att3);
    const int32_t last = n - 1;
    wb_probe p3 = {hid3, &last, 1, att3};
    CHECK(wb_session_prefill_inspect(s, ids + n - 1, 1, lg, 0, &p3, &err) == WB_OK);
    CHECK_NEAR(max_abs_diff(lg, want + (size_t)(n - 1) * V, (size_t)V), 0, 1e-4);
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++)
            d2 = fmax(d2, rel_diff_d(att3 + ((size_t)l * NH + h) * n,
                                     ref_att + (((size_t)l * n + n - 1) * NH + h) * n, (size_t)n));
        CHECK(rel_diff_d(hid3 + (size_t)l * C, ref_hid + ((size_t)l * n + n - 1) * C, (size_t)C) < 1e-4);
    }
    CHECK_MSG(d2 < 1e-5, "n=%d: session attention differs from the reference by %.3g", n, d2);
    double dk = 0;
    for (int l = 0; l < L; l++) {
        wb_kv_view kv;
        CHECK(wb_session_kv(s, l, &kv, &err) == WB_OK);
        CHECK(kv.n_tokens == n && kv.n_kv_head == NH && kv.head_dim == C / NH);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < C; i++) {
                dk = fmax(dk, fabs(kv.k[(size_t)t * kv.row_stride + i] - ref_kc[((size_t)l * n + t) * C + i]));
                dk = fmax(dk, fabs(kv.v[(size_t)t * kv.row_stride + i] - ref_vc[((size_t)l * n + t) * C + i]));
            }
    }
    CHECK_MSG(dk < 1e-4, "n=%d: cache views differ from the reference by %.3g", n, dk);
    wb_session_free(s);
    free(ref_hid), free(ref_att), free(ref_kc), free(ref_vc);
    ref_hid = ref_att = ref_kc = ref_vc = NULL;
    free(want), free(hid), free(att), free(lg), free(plain), free(head), free(att2), free(hid3), free(att3);
    wb_model_free(m);
    rm_dir(dir);
}

static void hidden_states_attention_and_cache_views_match_the_reference(void) {
    check_gpt2_probe(20, 5);
    check_gpt2_probe(64, 3); /* GEMM prefill (> 48 rows): deferred residual biases */
    const int old = wb_threads_get();
    wb_threads_set(2); /* the pool paths: per-head items copy K/V themselves, or by rows */
    check_gpt2_probe(20, 5);
    check_gpt2_probe(64, 3);
    wb_threads_set(old);
}

int main(void) {
    RUN(tinylm_sized_model_counts_1071872_parameters);
    RUN(generation_config_with_100k_eos_ids_loads);
    RUN(forward_matches_the_plain_loop_reference_on_every_position);
    RUN(hidden_states_attention_and_cache_views_match_the_reference);
    RUN(cached_uncached_and_reference_agree_over_20_greedy_steps);
    RUN(gemm_prefill_matches_token_by_token_decode_on_all_positions);
    RUN(fork_continues_identically_and_truncate_equals_fresh);
    RUN(f16_and_bf16_checkpoints_load_and_agree_with_f32);
    RUN(two_threads_give_the_same_results);
    RUN(decode_bits_do_not_depend_on_threads);
    RUN(session_warm_up_step_leaves_no_trace);
    RUN(trimmed_last_layer_gives_the_bits_of_the_whole_pass);
    RUN(panels_of_another_kernel_level_are_not_used);
    RUN(untied_head_unprefixed_names_and_buffers_load);
    RUN(odd_head_size_matches_the_reference);
    RUN(erf_gelu_models_match_the_reference);
    RUN(abort_callback_cancels_prefill_and_leaves_the_session);
    RUN(bad_ids_and_overlong_prompts_are_range_errors);
    RUN(bad_checkpoints_fail_naming_file_and_tensor);
    RUN(damaged_safetensors_fail_naming_the_file);
    RUN(bad_configs_fail_naming_config_json_and_the_key);
    RUN(missing_directory_and_files_are_io_errors);
    return check_summary();
}
