/* test_llama.c - the Llama family (llama, qwen2, mistral): config keys, weights in one file or
 * shards, F32 / F16 / BF16, and the forward pass against a plain-loop double-precision reference
 * written here from the Hugging Face modeling code, on tiny random checkpoints each test
 * writes itself. */
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
#include "fixture.h"
#include "cpu.h"
#include "llama_internal.h"
#include "model_internal.h"
#include "wb_batch.h"
#include "wb_chat.h"
#include "wb_generate.h"
#include "wb_model.h"

/* ================================================================ fixture: a random model */

typedef struct fx {
    const char *family;  /* model_type */
    int V, C, L, NH, NKV, F, HD; /* HD 0: C / NH, else written as head_dim */
    int max_pos;
    double theta;
    int tied;
    int attention_bias, mlp_bias; /* llama / mistral keys */
    int llama3;                   /* rope_scaling llama3 (factor 8, 1, 4, original 16) */
    wb_dtype dtype;
    int shards;                   /* 0: model.safetensors; k: k shards + index */
    const char *skip;             /* tensor left out */
    const char *bad_shape;        /* tensor written one row longer */
    const char *bad_dtype;        /* tensor written as I32 */
    const char *extra_config;     /* appended inside the config object */
    const char *config;           /* whole config.json instead */
    const char *gen_config;       /* generation_config.json text */
    uint64_t seed;
} fx;

static fx fx_qwen2(void) {
    return (fx){.family = "qwen2", .V = 640, .C = 48, .L = 2, .NH = 6, .NKV = 2, .F = 80,
                .max_pos = 96, .theta = 1000000.0, .tied = 1, .dtype = WB_F32, .seed = 7};
}
static fx fx_llama(void) {
    return (fx){.family = "llama", .V = 640, .C = 32, .L = 2, .NH = 4, .NKV = 4, .F = 72,
                .max_pos = 96, .theta = 500000.0, .tied = 0, .attention_bias = 1, .mlp_bias = 1,
                .llama3 = 1, .dtype = WB_F32, .seed = 11};
}
static fx fx_mistral(void) {
    return (fx){.family = "mistral", .V = 640, .C = 40, .L = 3, .NH = 4, .NKV = 1, .F = 64,
                .HD = 12, .max_pos = 96, .theta = 10000.0, .tied = 0, .dtype = WB_F32,
                .seed = 13};
}

static int hd_of(const fx *o) { return o->HD ? o->HD : o->C / o->NH; }

static uint64_t rng_state;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

/* The weights as the reference sees them: F32 values already rounded to the file's dtype. */
typedef struct ref_t {
    char name[96];
    int64_t d0, d1;
    float *v;
} ref_t;

typedef struct ref_model {
    fx o;
    ref_t t[256];
    int n;
} ref_model;

static const float *R(const ref_model *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].name, name)) return r->t[i].v;
    return NULL;
}

static void ref_free(ref_model *r) {
    for (int i = 0; i < r->n; i++) free(r->t[i].v);
    r->n = 0;
}

static void add(ref_model *r, const char *name, int64_t d0, int64_t d1, float scale) {
    ref_t *t = &r->t[r->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->d0 = d0;
    t->d1 = d1;
    size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    t->v = malloc(n * sizeof *t->v);
    for (size_t i = 0; i < n; i++) {
        float x = scale < 0 ? 1.0f + 0.2f * frand() : scale * frand(); /* < 0: a norm weight */
        if (r->o.dtype == WB_BF16) x = wb_bf16_to_f32(wb_f32_to_bf16(x));
        if (r->o.dtype == WB_F16) x = wb_f16_to_f32(wb_f32_to_f16(x));
        t->v[i] = x;
    }
}

static void write_config(const char *dir, const fx *o) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (o->config) {
        fixture_write_text(path, o->config);
        return;
    }
    FILE *f = fopen(path, "wb");
    fprintf(f, "{\"model_type\":\"%s\",\"vocab_size\":%d,\"hidden_size\":%d,"
               "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"max_position_embeddings\":%d,\"rms_norm_eps\":1e-6,"
               "\"tie_word_embeddings\":%s",
            o->family, o->V, o->C, o->F, o->L, o->NH, o->NKV, o->max_pos,
            o->tied ? "true" : "false");
    /* keys a bad-config case overrides are left to it (cJSON would read the first copy) */
#define OVERRIDDEN(k) (o->extra_config && strstr(o->extra_config, "\"" k "\""))
    if (!OVERRIDDEN("rope_theta")) fprintf(f, ",\"rope_theta\":%.1f", o->theta);
    if (!OVERRIDDEN("hidden_act")) fprintf(f, ",\"hidden_act\":\"silu\"");
    if (o->HD) fprintf(f, ",\"head_dim\":%d", o->HD);
    if (!strcmp(o->family, "llama") && !OVERRIDDEN("attention_bias"))
        fprintf(f, ",\"attention_bias\":%s,\"mlp_bias\":%s", o->attention_bias ? "true" : "false",
                o->mlp_bias ? "true" : "false");
    if (!strcmp(o->family, "qwen2"))
        fprintf(f, ",\"use_sliding_window\":false,\"sliding_window\":32768");
    if (!strcmp(o->family, "mistral")) fprintf(f, ",\"sliding_window\":null");
    if (o->llama3)
        fprintf(f, ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,"
                   "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                   "\"original_max_position_embeddings\":16}");
    if (o->extra_config) fprintf(f, ",%s", o->extra_config);
    fprintf(f, "}");
    fclose(f);
}

/* Build the reference weights (HF names) and write config, weights, tokenizer. */
static void make_model(const char *dir, const fx *o, ref_model *r) {
    rng_state = o->seed * 0x9E3779B97F4A7C15ull + 1;
    r->o = *o;
    r->n = 0;
    const int64_t V = o->V, C = o->C, F = o->F, HD = hd_of(o), Q = o->NH * HD, KV = o->NKV * HD;
    const int is_llama = !strcmp(o->family, "llama"), is_qwen = !strcmp(o->family, "qwen2");
    const int qkvb = is_qwen || (is_llama && o->attention_bias), ob = is_llama && o->attention_bias;
    const int mb = is_llama && o->mlp_bias;
    char nm[96];
    add(r, "model.embed_tokens.weight", V, C, 0.5f);
    for (int l = 0; l < o->L; l++) {
#define ADD(suffix, a, b, sc)                                                                    \
    do {                                                                                          \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);                                 \
        add(r, nm, a, b, sc);                                                                     \
    } while (0)
        ADD("input_layernorm.weight", C, 0, -1);
        ADD("self_attn.q_proj.weight", Q, C, 0.3f);
        ADD("self_attn.k_proj.weight", KV, C, 0.3f);
        ADD("self_attn.v_proj.weight", KV, C, 0.3f);
        if (qkvb) {
            ADD("self_attn.q_proj.bias", Q, 0, 0.2f);
            ADD("self_attn.k_proj.bias", KV, 0, 0.2f);
            ADD("self_attn.v_proj.bias", KV, 0, 0.2f);
        }
        ADD("self_attn.o_proj.weight", C, Q, 0.2f);
        if (ob) ADD("self_attn.o_proj.bias", C, 0, 0.1f);
        ADD("post_attention_layernorm.weight", C, 0, -1);
        ADD("mlp.gate_proj.weight", F, C, 0.3f);
        ADD("mlp.up_proj.weight", F, C, 0.3f);
        ADD("mlp.down_proj.weight", C, F, 0.2f);
        if (mb) {
            ADD("mlp.gate_proj.bias", F, 0, 0.1f);
            ADD("mlp.up_proj.bias", F, 0, 0.1f);
            ADD("mlp.down_proj.bias", C, 0, 0.1f);
        }
#undef ADD
    }
    add(r, "model.norm.weight", C, 0, -1);
    if (!o->tied) add(r, "lm_head.weight", V, C, 0.3f);

    /* tensors in the file's dtype */
    wb_tensor_view tv[256];
    void *bufs[256];
    int nt = 0;
    for (int i = 0; i < r->n; i++) {
        const ref_t *t = &r->t[i];
        if (o->skip && !strcmp(o->skip, t->name)) continue;
        size_t n = (size_t)t->d0 * (size_t)(t->d1 ? t->d1 : 1);
        int64_t d0 = t->d0;
        if (o->bad_shape && !strcmp(o->bad_shape, t->name)) d0++;
        size_t ne = (size_t)d0 * (size_t)(t->d1 ? t->d1 : 1);
        wb_dtype dt = o->bad_dtype && !strcmp(o->bad_dtype, t->name) ? WB_I32 : o->dtype;
        size_t es = dt == WB_F32 || dt == WB_I32 ? 4 : 2;
        uint8_t *b = calloc(ne, es);
        for (size_t k = 0; k < n; k++) {
            if (es == 4) memcpy(b + 4 * k, &t->v[k], 4);
            else {
                uint16_t h = dt == WB_BF16 ? wb_f32_to_bf16(t->v[k]) : wb_f32_to_f16(t->v[k]);
                memcpy(b + 2 * k, &h, 2);
            }
        }
        bufs[nt] = b;
        tv[nt] = (wb_tensor_view){.name = t->name, .dtype = dt, .ndim = t->d1 ? 2 : 1,
                                  .shape = {d0, t->d1}, .data = b, .nbytes = ne * es};
        nt++;
    }
    char path[512];
    wb_err err = {0};
    if (!o->shards) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(wb_safetensors_write(path, tv, nt, NULL, 0, &err) == WB_OK);
    } else {
        /* tensors dealt to shards in order, as save_pretrained's size-capped shards are */
        char ipath[512];
        snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir);
        FILE *ix = fopen(ipath, "wb");
        fprintf(ix, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
        for (int s = 0; s < o->shards; s++) {
            int a = nt * s / o->shards, b = nt * (s + 1) / o->shards;
            char file[96];
            snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, o->shards);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            CHECK(wb_safetensors_write(path, tv + a, b - a, NULL, 0, &err) == WB_OK);
            for (int i = a; i < b; i++)
                fprintf(ix, "%s\"%s\":\"%s\"", i ? "," : "", tv[i].name, file);
        }
        fprintf(ix, "}}");
        fclose(ix);
    }
    for (int i = 0; i < nt; i++) free(bufs[i]);
    write_config(dir, o);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    char src[512];
    snprintf(src, sizeof src, "tests/vectors/family_%s_tokenizer.json",
             !strcmp(o->family, "llama") ? "llama3" : "qwen2");
    fixture_copy_file(src, path);
    if (o->gen_config) {
        snprintf(path, sizeof path, "%s/generation_config.json", dir);
        fixture_write_text(path, o->gen_config);
    }
}

static wb_model *load(const fx *o, ref_model *r, const wb_model_params *p, char **dir_out) {
    char *dir = fixture_new_dir("llama");
    make_model(dir, o, r);
    wb_model *m = NULL;
    wb_err err = {0};
    wb_status s = wb_model_load_ex(dir, p, &m, &err);
    CHECK_MSG(s == WB_OK, "%s", err.msg);
    if (dir_out) *dir_out = dir;
    else fixture_rm_dir(dir);
    return m;
}

/* ===================================================== reference (transformers, in double) */

static void ref_rms(double *out, const double *x, const float *w, int C) {
    double ss = 0;
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    double rs = 1.0 / sqrt(ss / C + 1e-6);
    for (int i = 0; i < C; i++) out[i] = w[i] * (x[i] * rs);
}

/* 1: ref_lin rounds its inputs to BF16 first (to nearest even), as the vdpbf16ps prompt route
 * does the activations of every BF16 matrix */
static int ref_round_inputs;

static double bf16_round(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static void ref_lin(double *y, const double *x, const float *W, const float *b, int out, int in) {
    for (int r = 0; r < out; r++) {
        double s = b ? b[r] : 0.0;
        for (int i = 0; i < in; i++)
            s += (double)W[(size_t)r * in + i] * (ref_round_inputs ? bf16_round(x[i]) : x[i]);
        y[r] = s;
    }
}

/* LlamaRotaryEmbedding's inv_freq, with _compute_llama3_parameters when rope_scaling is llama3 */
static double ref_inv_freq(const fx *o, int i) {
    const int hd = hd_of(o);
    double f = 1.0 / pow(o->theta, 2.0 * i / hd);
    if (!o->llama3) return f;
    const double factor = 8, lo = 1, hi = 4, old = 16;
    const double wavelen = 2 * M_PI / f;
    if (wavelen < old / hi) return f;                /* high frequency: kept */
    if (wavelen > old / lo) return f / factor;       /* low frequency: divided by factor */
    double smooth = (old / wavelen - lo) / (hi - lo); /* in between: interpolated */
    return (1 - smooth) * f / factor + smooth * f;
}

/* q_embed = q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x[h:], x[:h]) */
static void ref_rope(double *v, const fx *o, int pos) {
    const int hd = hd_of(o), h = hd / 2;
    double tmp[512];
    for (int i = 0; i < hd; i++) {
        double ang = pos * ref_inv_freq(o, i % h);
        double rot = i < h ? -v[i + h] : v[i - h];
        tmp[i] = v[i] * cos(ang) + rot * sin(ang);
    }
    memcpy(v, tmp, (size_t)hd * sizeof *v);
}

/* What the reference records besides logits (each NULL or): hid [L + 1, n, C] the residual
 * entering each layer (the last after every layer, before the norm), att [L, n, NH, n] the
 * softmax rows, kc / vc [L, n, KV] the post-RoPE keys and the values. */
typedef struct ref_probe {
    double *hid, *att, *kc, *vc;
} ref_probe;

/* logits [n, V] for every position, recomputing the whole prefix: no cache at all */
static void ref_forward_probe(const ref_model *r, const int32_t *ids, int n, float *logits,
                              const ref_probe *pr) {
    const fx *o = &r->o;
    const int C = o->C, F = o->F, HD = hd_of(o), Q = o->NH * HD, KV = o->NKV * HD, V = o->V;
    double *x = calloc((size_t)n * C, sizeof *x), *h = malloc((size_t)C * sizeof *h);
    double *q = malloc((size_t)n * Q * sizeof *q), *k = malloc((size_t)n * KV * sizeof *k);
    double *v = malloc((size_t)n * KV * sizeof *v), *a = malloc((size_t)n * Q * sizeof *a);
    double *g = malloc((size_t)F * sizeof *g), *u = malloc((size_t)F * sizeof *u);
    double *tmp = malloc((size_t)(C > F ? C : F) * sizeof *tmp), *sc = malloc((size_t)n * sizeof *sc);
    char nm[128];
    const float *E = R(r, "model.embed_tokens.weight");
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = E[(size_t)ids[t] * C + i];
    if (pr && pr->hid) memcpy(pr->hid, x, (size_t)n * C * sizeof *x);
    for (int l = 0; l < o->L; l++) {
#define P(s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, s), R(r, nm))
        for (int t = 0; t < n; t++) {
            ref_rms(h, x + (size_t)t * C, P("input_layernorm.weight"), C);
            ref_lin(q + (size_t)t * Q, h, P("self_attn.q_proj.weight"), P("self_attn.q_proj.bias"), Q, C);
            ref_lin(k + (size_t)t * KV, h, P("self_attn.k_proj.weight"), P("self_attn.k_proj.bias"), KV, C);
            ref_lin(v + (size_t)t * KV, h, P("self_attn.v_proj.weight"), P("self_attn.v_proj.bias"), KV, C);
            for (int hh = 0; hh < o->NH; hh++) ref_rope(q + (size_t)t * Q + hh * HD, o, t);
            for (int hh = 0; hh < o->NKV; hh++) ref_rope(k + (size_t)t * KV + hh * HD, o, t);
        }
        /* repeat_kv: query head hh reads kv head hh / (NH / NKV); scaling head_dim^-0.5 */
        for (int t = 0; t < n; t++)
            for (int hh = 0; hh < o->NH; hh++) {
                const int kh = hh / (o->NH / o->NKV);
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++)
                        d += q[(size_t)t * Q + hh * HD + i] * k[(size_t)s * KV + kh * HD + i];
                    sc[s] = d / sqrt((double)HD);
                    if (sc[s] > mx) mx = sc[s];
                }
                for (int s = 0; s <= t; s++) sum += (sc[s] = exp(sc[s] - mx));
                if (pr && pr->att)
                    for (int s = 0; s <= t; s++)
                        pr->att[(((size_t)l * n + t) * o->NH + hh) * n + s] = sc[s] / sum;
                for (int i = 0; i < HD; i++) {
                    double acc = 0;
                    for (int s = 0; s <= t; s++) acc += sc[s] / sum * v[(size_t)s * KV + kh * HD + i];
                    a[(size_t)t * Q + hh * HD + i] = acc;
                }
            }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * C;
            ref_lin(tmp, a + (size_t)t * Q, P("self_attn.o_proj.weight"), P("self_attn.o_proj.bias"), C, Q);
            for (int i = 0; i < C; i++) xt[i] += tmp[i];
            ref_rms(h, xt, P("post_attention_layernorm.weight"), C);
            ref_lin(g, h, P("mlp.gate_proj.weight"), P("mlp.gate_proj.bias"), F, C);
            ref_lin(u, h, P("mlp.up_proj.weight"), P("mlp.up_proj.bias"), F, C);
            for (int i = 0; i < F; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            ref_lin(tmp, g, P("mlp.down_proj.weight"), P("mlp.down_proj.bias"), C, F);
            for (int i = 0; i < C; i++) xt[i] += tmp[i];
        }
        if (pr && pr->hid) memcpy(pr->hid + (size_t)(l + 1) * n * C, x, (size_t)n * C * sizeof *x);
        if (pr && pr->kc) memcpy(pr->kc + (size_t)l * n * KV, k, (size_t)n * KV * sizeof *k);
        if (pr && pr->vc) memcpy(pr->vc + (size_t)l * n * KV, v, (size_t)n * KV * sizeof *v);
#undef P
    }
    const float *head = o->tied ? E : R(r, "lm_head.weight");
    double *lg = malloc((size_t)V * sizeof *lg);
    for (int t = 0; t < n; t++) {
        ref_rms(h, x + (size_t)t * C, R(r, "model.norm.weight"), C);
        ref_lin(lg, h, head, NULL, V, C);
        for (int i = 0; i < V; i++) logits[(size_t)t * V + i] = (float)lg[i];
    }
    free(lg);
    free(x), free(h), free(q), free(k), free(v), free(a), free(g), free(u), free(tmp), free(sc);
}

static void ref_forward(const ref_model *r, const int32_t *ids, int n, float *logits) {
    ref_forward_probe(r, ids, n, logits, NULL);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

static void ids_for(int32_t *ids, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((seed * 2654435761u + (uint64_t)i * 7919u) % (uint64_t)V);
}

/* ===================================================================== forward pass */

/* Prefill of n tokens, all positions, against the reference; 1e-4 absolute on logits. */
static void check_family(fx o, int n, const char *what) {
    ref_model r;
    wb_model_params p = wb_model_default_params();
    p.compute_f32 = 1;
    wb_model *m = load(&o, &r, &p, NULL);
    if (!m) {
        ref_free(&r);
        return;
    }
    int32_t ids[128];
    ids_for(ids, n, o.V, o.seed);
    float *want = malloc((size_t)n * o.V * sizeof *want), *got = malloc((size_t)n * o.V * sizeof *got);
    ref_forward(&r, ids, n, want);
    wb_err err = {0};
    CHECK(wb_model_forward(m, ids, n, got, 1, &err) == WB_OK);
    double d = max_abs_diff(want, got, (size_t)n * o.V);
    CHECK_MSG(d < 1e-4, "%s: %d tokens: max |optimized - reference| = %.3g", what, n, d);
    free(want);
    free(got);
    wb_model_free(m);
    ref_free(&r);
}

static void each_family_matches_the_plain_loop_reference(void) {
    check_family(fx_qwen2(), 20, "qwen2 (tied, q/k/v bias, GQA 6:2, theta 1e6)");
    check_family(fx_llama(), 20, "llama (untied, attention_bias, mlp_bias, llama3 rope)");
    check_family(fx_mistral(), 20, "mistral (GQA 4:1, head_dim 12 != hidden/heads)");
}

static void gemm_prefill_of_many_tokens_matches_the_reference(void) {
    /* above 48 rows every matrix goes through cblas_sgemm, attention through 16-query blocks */
    check_family(fx_qwen2(), 70, "qwen2 GEMM path");
    fx o = fx_llama();
    o.dtype = WB_BF16; /* the compute_f32 path widens BF16 at load */
    check_family(o, 60, "llama BF16 checkpoint widened to F32");
}

static void scalar_kernels_match_the_reference(void) {
    int old = wb_kernels_force_scalar(1);
    check_family(fx_mistral(), 12, "mistral, scalar kernels");
    wb_kernels_force_scalar(old);
}

/* Decode token by token through the cache = the uncached forward of each prefix. */
static void cached_decode_matches_uncached_forward(void) {
    fx fams[3] = {fx_qwen2(), fx_llama(), fx_mistral()};
    for (int f = 0; f < 3; f++) {
        ref_model r;
        wb_model *m = load(&fams[f], &r, NULL, NULL);
        if (!m) continue;
        const int V = fams[f].V, n = 24;
        int32_t ids[24];
        ids_for(ids, n, V, 99 + f);
        wb_session *s = NULL;
        wb_err err = {0};
        CHECK(wb_session_new(m, 64, &s, &err) == WB_OK);
        float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
        double worst = 0;
        CHECK(wb_session_prefill(s, ids, 5, a, 0, &err) == WB_OK);
        CHECK(wb_model_forward(m, ids, 5, b, 0, &err) == WB_OK);
        worst = max_abs_diff(a, b, (size_t)V);
        for (int t = 5; t < n; t++) {
            CHECK(wb_session_decode(s, ids[t], a, &err) == WB_OK);
            CHECK(wb_model_forward(m, ids, t + 1, b, 0, &err) == WB_OK);
            double d = max_abs_diff(a, b, (size_t)V);
            if (d > worst) worst = d;
        }
        CHECK_MSG(worst < 1e-4, "%s: cached vs uncached max diff %.3g", fams[f].family, worst);
        CHECK(wb_session_pos(s) == n);
        /* fork + truncate keep working with kv rows narrower than hidden_size */
        wb_session *fk = NULL;
        CHECK(wb_session_truncate(s, 10, &err) == WB_OK);
        CHECK(wb_session_fork(s, &fk, &err) == WB_OK);
        CHECK(wb_session_decode(fk, ids[10], a, &err) == WB_OK);
        CHECK(wb_model_forward(m, ids, 11, b, 0, &err) == WB_OK);
        CHECK(max_abs_diff(a, b, (size_t)V) < 1e-4);
        wb_session_free(fk);
        wb_session_free(s);
        free(a);
        free(b);
        wb_model_free(m);
        ref_free(&r);
    }
}

/* BF16 checkpoint: BF16 kernels (default) vs the same rounded weights widened (compute_f32)
 * agree to 1e-4 (only the summation order differs); both match the reference on the rounded
 * weights; against the F32 checkpoint the rounding itself moves logits by up to 5e-2. Under the
 * vdpbf16ps prompt route (the default on AMD Zen 4/5, WB_BF16_DOT=1 elsewhere) every BF16 product
 * rounds the activations, prompt GEMM and GEMV alike: both splits are held to what that rounding
 * does to the reference, and the decode steps to the 60-row pass to 1e-4 (only the order of sums
 * differs between them, as without the rounding). */
static void bf16_weights_stay_bf16_and_agree_with_f32(void) {
    fx o = fx_qwen2();
    fx o32 = o;
    o.dtype = WB_BF16;
    ref_model r, r32;
    char *dir;
    wb_model *mb = load(&o, &r, NULL, &dir);
    wb_model_params p = wb_model_default_params();
    p.compute_f32 = 1;
    wb_model *mf = NULL, *m32 = load(&o32, &r32, &p, NULL);
    wb_err err = {0};
    CHECK(wb_model_load_ex(dir, &p, &mf, &err) == WB_OK);
    if (!mb || !mf || !m32) goto out;
    /* BF16 matrices are mapped, not widened: the owned F32 block holds the norms and biases */
    const size_t C = (size_t)o.C, HD = (size_t)hd_of(&o), Q = o.NH * HD, KV = o.NKV * HD;
    const size_t mats = (size_t)o.V * C + (size_t)o.L * (C * Q + 2 * C * KV + Q * C + 3 * C * o.F);
    CHECK_MSG(wb_model_weight_bytes(mb) < mats * 2 + mats / 4,
              "bf16 model holds %zu bytes for %zu matrix weights", wb_model_weight_bytes(mb), mats);
    CHECK(wb_model_weight_bytes(mf) >= mats * 4);
    const int n = 60;
    int32_t ids[60];
    ids_for(ids, n, o.V, 5);
    const size_t NV = (size_t)n * o.V;
    float *a = malloc(NV * 4), *b = malloc(NV * 4), *c = malloc(NV * 4), *ref = malloc(NV * 4);
    float *a0 = malloc(NV * 4);
    ref_forward(&r, ids, n, ref);
    /* the BF16 prompt route in use (cpu.h bf16_prompt): 1 rounds the activations */
    const int dot = wb_kt()->bf16_prompt->rounds;
    float *refr = malloc(NV * 4);
    if (refr && dot) {
        ref_round_inputs = 1;
        ref_forward(&r, ids, n, refr);
        ref_round_inputs = 0;
    }
    for (int split = 0; split < 2; split++) {
        /* split 0: one 60-row GEMM pass; split 1: 8 rows (GEMV path) then single decodes */
        if (!split) {
            CHECK(wb_model_forward(mb, ids, n, a, 1, &err) == WB_OK);
        } else {
            wb_session *s = NULL;
            CHECK(wb_session_new(mb, 0, &s, &err) == WB_OK);
            CHECK(wb_session_prefill(s, ids, 8, a, 1, &err) == WB_OK);
            for (int t = 8; t < n; t++)
                CHECK(wb_session_decode(s, ids[t], a + (size_t)t * o.V, &err) == WB_OK);
            wb_session_free(s);
        }
        CHECK(wb_model_forward(mf, ids, n, b, 1, &err) == WB_OK);
        double d_mode = max_abs_diff(a, b, NV), d_ref = max_abs_diff(a, ref, NV);
        if (split && dot) { /* both rounding: the cache changes the order of sums only */
            const double d_split = max_abs_diff(a, a0, NV);
            CHECK_MSG(d_split < 1e-4, "vdpbf16ps route: decode steps vs the 60-row pass %.3g", d_split);
            printf("     vdpbf16ps route: decode steps %.3g from the 60-row pass\n", d_split);
        }
        if (!split) memcpy(a0, a, NV * 4);
        if (dot) {
            /* the vdpbf16ps prompt route rounds every BF16 matrix's inputs to 8 significant
             * bits: that is the perturbation the reference makes with ref_round_inputs, so the
             * logits may move as far as it moves them (twice, for the model's inputs being
             * rounded from values its own earlier rounding moved), and they must be nearer the
             * rounding reference than the exact one (a route that did not round, or computed
             * anything else, is not) */
            const double d_round = max_abs_diff(refr, ref, NV), d_rr = max_abs_diff(a, refr, NV);
            CHECK_MSG(d_mode <= 2 * d_round && d_ref <= 2 * d_round,
                      "vdpbf16ps route vs widened %.3g, vs reference %.3g; rounding the "
                      "reference's inputs moves it %.3g", d_mode, d_ref, d_round);
            CHECK_MSG(d_rr < d_ref, "vdpbf16ps route %.3g from the rounding reference, %.3g "
                      "from the exact one", d_rr, d_ref);
            printf("     vdpbf16ps route: %.3g from widened, %.3g from the rounding reference "
                   "(rounding moves the reference %.3g)\n", d_mode, d_rr, d_round);
            continue;
        }
        CHECK_MSG(d_mode < 1e-4, "split %d: bf16 kernels vs widened: %.3g", split, d_mode);
        CHECK_MSG(d_ref < 1e-4, "split %d: bf16 kernels vs reference: %.3g", split, d_ref);
    }
    CHECK(wb_model_forward(m32, ids, n, c, 1, &err) == WB_OK);
    double d32 = max_abs_diff(a, c, NV), big = 0;
    for (size_t i = 0; i < NV; i++) big = fabs(c[i]) > big ? fabs(c[i]) : big;
    /* rounding every weight to 8 significant bits: a few percent of the largest logit */
    CHECK_MSG(d32 < 0.03 * big, "bf16 vs f32 checkpoint: %.3g (max |logit| %.3g)", d32, big);
    printf("     bf16 vs f32 checkpoint: max |logit diff| %.3g, max |logit| %.3g\n", d32, big);
    free(a), free(b), free(c), free(ref), free(refr), free(a0);
out:
    wb_model_free(mb);
    wb_model_free(mf);
    wb_model_free(m32);
    ref_free(&r);
    ref_free(&r32);
    fixture_rm_dir(dir);
}

static void f16_checkpoints_match_the_reference(void) {
    fx o = fx_mistral();
    o.dtype = WB_F16;
    check_family(o, 16, "mistral F16");
}

static void sharded_checkpoints_equal_the_single_file(void) {
    fx o = fx_llama();
    o.dtype = WB_BF16;
    ref_model r1, r2;
    wb_model *a = load(&o, &r1, NULL, NULL);
    o.shards = 3;
    wb_model *b = load(&o, &r2, NULL, NULL);
    if (a && b) {
        int32_t ids[12];
        ids_for(ids, 12, o.V, 3);
        float *la = malloc((size_t)12 * o.V * 4), *lb = malloc((size_t)12 * o.V * 4);
        wb_err err = {0};
        CHECK(wb_model_forward(a, ids, 12, la, 1, &err) == WB_OK);
        CHECK(wb_model_forward(b, ids, 12, lb, 1, &err) == WB_OK);
        CHECK(max_abs_diff(la, lb, (size_t)12 * o.V) == 0.0);
        CHECK(wb_model_num_parameters(a) == wb_model_num_parameters(b));
        free(la);
        free(lb);
    }
    wb_model_free(a);
    wb_model_free(b);
    ref_free(&r1);
    ref_free(&r2);
}

static void two_threads_give_the_same_results(void) {
    fx o = fx_qwen2();
    o.dtype = WB_BF16;
    ref_model r;
    wb_model *m = load(&o, &r, NULL, NULL);
    if (!m) return;
    const int n = 40, V = o.V;
    int32_t ids[40];
    ids_for(ids, n, V, 17);
    float *a = malloc((size_t)n * V * 4), *b = malloc((size_t)n * V * 4);
    wb_err err = {0};
    int old = wb_threads_get();
    for (int pass = 0; pass < 2; pass++) {
        wb_threads_set(pass ? 2 : 1);
        wb_session *s = NULL;
        CHECK(wb_session_new(m, 64, &s, &err) == WB_OK);
        float *out = pass ? b : a;
        CHECK(wb_session_prefill(s, ids, 20, out, 1, &err) == WB_OK);
        for (int t = 20; t < n; t++)
            CHECK(wb_session_decode(s, ids[t], out + (size_t)t * V, &err) == WB_OK);
        wb_session_free(s);
    }
    wb_threads_set(old);
    double d = max_abs_diff(a, b, (size_t)n * V);
    CHECK_MSG(d < 1e-5, "1 vs 2 threads: %.3g", d);
    free(a);
    free(b);
    wb_model_free(m);
    ref_free(&r);
}

static void batched_decode_equals_single_sequences(void) {
    fx o = fx_mistral();
    ref_model r;
    wb_model *m = load(&o, &r, NULL, NULL);
    if (!m) return;
    wb_err err = {0};
    wb_batch *bt = NULL;
    wb_session *s[2] = {NULL, NULL};
    CHECK(wb_batch_new(m, &bt, &err) == WB_OK);
    CHECK(wb_session_new(m, 32, &s[0], &err) == WB_OK);
    CHECK(wb_session_new(m, 32, &s[1], &err) == WB_OK);
    int32_t p0[3] = {5, 6, 7}, p1[5] = {9, 10, 11, 12, 13};
    const int32_t *ids[2] = {p0, p1};
    int counts[2] = {3, 5};
    float *lg = malloc((size_t)2 * o.V * 4), *one = malloc((size_t)o.V * 4);
    if (bt && s[0] && s[1]) {
        CHECK(wb_batch_forward(bt, s, ids, counts, 2, lg, &err) == WB_OK);
        CHECK(wb_model_forward(m, p0, 3, one, 0, &err) == WB_OK);
        CHECK(max_abs_diff(lg, one, (size_t)o.V) < 1e-5);
        CHECK(wb_model_forward(m, p1, 5, one, 0, &err) == WB_OK);
        CHECK(max_abs_diff(lg + o.V, one, (size_t)o.V) < 1e-5);
        CHECK(wb_session_pos(s[0]) == 3 && wb_session_pos(s[1]) == 5);
    }
    free(lg);
    free(one);
    wb_session_free(s[0]);
    wb_session_free(s[1]);
    wb_batch_free(bt);
    wb_model_free(m);
    ref_free(&r);
}

/* B sequences at different positions stepped together through one stacked forward give, row
 * for row, bit for bit the logits each gets alone: every matrix sums a row the same way whatever
 * the batch (F32 and BF16 kernels; a prompt of WB_PROMPT_ROWS or more rows through the packed
 * GEMM, the rest through the GEMV kernels, chosen per sequence), attention runs per sequence.
 * Steps mix decode rows with a sequence still prefilling and with a long prompt. 1 and 2
 * threads; shapes with in % 16 == 8 (llama F, mistral C). */
static void batched_steps_equal_each_sequence_alone(void) {
    const fx fams[3] = {fx_qwen2(), fx_llama(), fx_mistral()};
    int old = wb_threads_get();
    const wb_isa old_isa = wb_isa_limit(WB_ISA_COUNT - 1);
    for (int isa = 0; isa <= (int)wb_isa_best(); isa++)
    for (int f = 0; f < 3; f++)
        for (int bf = 0; bf < 4; bf++) {
            /* bf 2, 3: Q8_0, Q4_0 at load (llama: every matrix but the down projection, whose 72
             * columns are no multiple of 32; a prompt's quantized input shared per phase) */
            if (bf >= 2 && f != 1) continue;
            wb_isa_limit((wb_isa)isa);
            fx o = fams[f];
            o.dtype = bf == 1 ? WB_BF16 : WB_F32;
            wb_model_params p = wb_model_default_params();
            p.weights = bf == 2 ? WB_WEIGHTS_Q8_0 : bf == 3 ? WB_WEIGHTS_Q4_0 : 0;
            ref_model r;
            wb_model *m = load(&o, &r, &p, NULL);
            if (!m) continue;
            enum { B = 5, STEPS = 5 };
            const size_t V = (size_t)o.V;
            wb_err err = {0};
            wb_batch *bt = NULL;
            wb_session *sb[B] = {0}, *sa[B] = {0};
            float *lb = malloc(B * V * 4), *la = malloc(V * 4);
            CHECK(wb_batch_new(m, &bt, &err) == WB_OK);
            double worst = 0;
            for (int nt = 1; nt <= 2; nt++) {
                wb_threads_set(nt);
                for (int i = 0; i < B; i++) {
                    CHECK(wb_session_new(m, 96, &sb[i], &err) == WB_OK);
                    CHECK(wb_session_new(m, 96, &sa[i], &err) == WB_OK);
                }
                for (int step = 0; step < STEPS; step++) {
                    int32_t tok[B][WB_PROMPT_ROWS + 3];
                    const int32_t *ids[B];
                    int counts[B];
                    for (int i = 0; i < B; i++) {
                        /* step 0: prompts of 1..B-1 tokens and one of WB_PROMPT_ROWS + 3; then
                         * decode rows, except sequence 1 which takes 3 tokens at step 2 */
                        counts[i] = step == 0 ? (i == B - 1 ? WB_PROMPT_ROWS + 3 : i + 1)
                                    : (step == 2 && i == 1) ? 3
                                                            : 1;
                        for (int t = 0; t < counts[i]; t++)
                            tok[i][t] = (int32_t)((step * 37 + i * 11 + t * 5 + 3) % o.V);
                        ids[i] = tok[i];
                    }
                    CHECK_MSG(wb_batch_forward(bt, sb, ids, counts, B, lb, &err) == WB_OK, "step %d: %s",
                              step, err.msg);
                    for (int i = 0; i < B; i++) {
                        if (counts[i] == 1 && step > 0)
                            CHECK(wb_session_decode(sa[i], ids[i][0], la, &err) == WB_OK);
                        else
                            CHECK(wb_session_prefill(sa[i], ids[i], counts[i], la, 0, &err) ==
                                  WB_OK);
                        double d = max_abs_diff(lb + i * V, la, V);
                        if (d > worst) worst = d;
                    }
                }
                for (int i = 0; i < B; i++) {
                    CHECK(wb_session_pos(sb[i]) == wb_session_pos(sa[i]));
                    wb_session_free(sb[i]);
                    wb_session_free(sa[i]);
                    sb[i] = sa[i] = NULL;
                }
            }
            static const char *const kind[4] = {"F32", "BF16", "Q8_0", "Q4_0"};
            CHECK_MSG(worst == 0.0, "%s %s %s: batched vs alone differ by %.3g", o.family,
                      kind[bf], wb_isa_name((wb_isa)isa), worst);
            wb_threads_set(old);
            free(lb);
            free(la);
            wb_batch_free(bt);
            wb_model_free(m);
            ref_free(&r);
        }
    wb_isa_limit(old_isa);
    wb_threads_set(old);
}

/* The context rule is the model's, whatever the family and the key that sets it: a Llama config
 * with max_position_embeddings 8192 (and no n_positions) generates with n_ctx = 8192, and asking
 * for more names the limit in family-independent words. */
static void generate_accepts_any_context_up_to_the_models_maximum(void) {
    fx o = fx_llama();
    o.max_pos = 8192;
    ref_model r;
    wb_model *m = load(&o, &r, NULL, NULL);
    if (!m) return;
    CHECK(wb_model_max_ctx(m) == 8192);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    sp.max_tokens = 3;
    wb_gen_params gp = wb_gen_default_params();
    gp.n_ctx = 8192;
    wb_gen *g = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_generate(m, "hello", 5, &sp, &gp, &g, &err) == WB_OK, "%s", err.msg);
    if (g) CHECK(wb_gen_result_get(g)->n_tokens == 3);
    wb_gen_free(g);
    g = NULL;
    gp.n_ctx = 8193;
    CHECK(wb_generate(m, "hello", 5, &sp, &gp, &g, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "maximum context of 8192");
    CHECK(strstr(err.msg, "n_positions") == NULL);
    wb_gen_free(g);
    wb_session *s = NULL;
    CHECK(wb_session_new(m, 8192, &s, &err) == WB_OK);
    CHECK(wb_session_n_ctx(s) == 8192);
    wb_session_free(s);
    wb_model_free(m);
    ref_free(&r);
}

/* ======================================================= context, eos, config accessors */

static void kv_cache_is_sized_from_the_requested_context(void) {
    fx o = fx_qwen2();
    o.max_pos = 32768;
    ref_model r;
    wb_model *m = load(&o, &r, NULL, NULL);
    if (!m) return;
    const wb_config *c = wb_model_config(m);
    CHECK(!strcmp(wb_model_family(m), "llama") && c->max_position_embeddings == 32768);
    CHECK(wb_model_max_ctx(m) == 32768);
    CHECK(c->n_ctx == 4096); /* the default context, not max_position_embeddings */
    CHECK(c->n_kv_head == 2 && c->head_dim == 8 && c->qkv_bias == 1 && c->o_bias == 0);
    CHECK(!strcmp(wb_model_type(m), "qwen2"));
    wb_session *s = NULL;
    wb_err err = {0};
    CHECK(wb_session_new(m, 0, &s, &err) == WB_OK);
    CHECK(wb_session_n_ctx(s) == 4096);
    CHECK(wb_session_cache_bytes(s) == (size_t)2 * o.L * 4096 * (o.NKV * 8) * 4);
    wb_session_free(s);
    CHECK(wb_session_new(m, 16, &s, &err) == WB_OK);
    int32_t ids[20];
    ids_for(ids, 20, o.V, 1);
    float *lg = malloc((size_t)o.V * 4);
    CHECK(wb_session_prefill(s, ids, 17, lg, 0, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "does not fit the context of 16");
    CHECK(wb_session_pos(s) == 0);
    CHECK(wb_session_prefill(s, ids, 16, lg, 0, &err) == WB_OK);
    CHECK(wb_session_decode(s, 1, lg, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "full");
    wb_session_free(s);
    CHECK(wb_session_new(m, 40000, &s, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "maximum context of 32768");
    free(lg);
    wb_model_free(m);
    ref_free(&r);
    /* a larger context on request, still capped by max_position_embeddings */
    char *dir;
    wb_model_params p = wb_model_default_params();
    p.n_ctx = 100000;
    m = load(&o, &r, &p, &dir);
    if (m) CHECK(wb_model_config(m)->n_ctx == 32768);
    wb_model_free(m);
    ref_free(&r);
    fixture_rm_dir(dir);
}

static void generation_config_eos_list_ends_generation_as_eos(void) {
    fx o = fx_qwen2();
    o.gen_config = "{\"bos_token_id\":599,\"eos_token_id\":[601,599],\"do_sample\":true}";
    ref_model r;
    wb_model *m = load(&o, &r, NULL, NULL);
    if (!m) return;
    size_t n = 0;
    const int32_t *e = wb_model_eos_ids(m, &n);
    CHECK(n == 2 && e[0] == 601 && e[1] == 599);
    CHECK(wb_model_is_eos(m, 601) && !wb_model_is_eos(m, 600));
    /* push the sampler onto <|im_end|> (601): generation must end as "eos" */
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    sp.max_tokens = 8;
    wb_logit_bias lb = {601, 1000.0f};
    sp.logit_bias = &lb;
    sp.n_logit_bias = 1;
    wb_gen *g = NULL;
    wb_err err = {0};
    wb_gen_params gp = wb_gen_default_params();
    CHECK(wb_generate(m, "hello", 5, &sp, &gp, &g, &err) == WB_OK);
    if (g) {
        const wb_gen_result *res = wb_gen_result_get(g);
        CHECK(res->stop_reason == WB_STOP_EOS && res->n_tokens == 1 && res->token_ids[0] == 601);
    }
    wb_gen_free(g);
    wb_model_free(m);
    ref_free(&r);
}

/* What model:chat does, in C: the directory's chat template renders the messages, the prompt
 * is tokenized with the special tokens recognised, and generation ends at <|im_end|> as eos. */
static void chat_template_prompt_runs_and_ends_at_im_end(void) {
    fx o = fx_qwen2();
    o.gen_config = "{\"eos_token_id\":[601,599]}";
    ref_model r;
    char *dir;
    wb_model *m = load(&o, &r, NULL, &dir);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    fixture_copy_file("tests/vectors/chat/qwen2.5/tokenizer_config.json", path);
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(dir, &t, &err) == WB_OK);
    if (m && t) {
        const wb_chat_message msgs[] = {{"user", "Hello there"}};
        char *text = NULL;
        size_t len = 0;
        CHECK(wb_chat_render(t, msgs, 1, 1, &text, &len, &err) == WB_OK);
        CHECK(text && strstr(text, "<|im_start|>assistant\n") != NULL);
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(wb_tokenizer_encode(wb_model_tokenizer(m), text, len, &ids, &n, &err) == WB_OK);
        CHECK(n > 0 && ids && ids[0] == 600); /* <|im_start|> as one special token */
        wb_free(ids);
        wb_sampling_params sp = wb_sampling_default_params();
        sp.temperature = 0;
        sp.max_tokens = 6;
        wb_logit_bias lb = {601, 1000.0f};
        sp.logit_bias = &lb;
        sp.n_logit_bias = 1;
        wb_gen *g = NULL;
        CHECK(wb_generate(m, text, len, &sp, NULL, &g, &err) == WB_OK);
        if (g) CHECK(wb_gen_result_get(g)->stop_reason == WB_STOP_EOS);
        wb_gen_free(g);
        wb_free(text);
    }
    wb_chat_template_free(t);
    wb_model_free(m);
    ref_free(&r);
    fixture_rm_dir(dir);
}

/* ====================================================================== bad inputs */

static void expect_error(const fx *o, const char *n1, const char *n2) {
    char *dir = fixture_new_dir("llama");
    ref_model r;
    make_model(dir, o, &r);
    wb_model *m = NULL;
    wb_err err = {0};
    wb_status s = wb_model_load(dir, &m, &err);
    CHECK_MSG(s != WB_OK, "expected an error mentioning %s / %s", n1, n2 ? n2 : "");
    CHECK(m == NULL);
    if (s != WB_OK) {
        CHECK_ERR_MENTIONS(err.msg, n1);
        if (n2) CHECK_ERR_MENTIONS(err.msg, n2);
    }
    wb_model_free(m);
    ref_free(&r);
    fixture_rm_dir(dir);
}

static void bad_configs_fail_naming_config_json_and_the_key(void) {
    static const struct {
        const char *extra, *key;
    } cases[] = {
        {"\"hidden_act\":\"gelu\"", "hidden_act"},
        {"\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2.0}", "rope_scaling.rope_type"},
        {"\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0}", "yarn"},
        {"\"rope_scaling\":{\"rope_type\":\"llama3\",\"low_freq_factor\":1,\"high_freq_factor\":4,"
         "\"original_max_position_embeddings\":8192}", "rope_scaling.factor"},
        {"\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,"
         "\"high_freq_factor\":1,\"original_max_position_embeddings\":8192}", "high_freq_factor"},
        {"\"rope_scaling\":[1,2]", "rope_scaling"},
        {"\"quantization_config\":{\"bits\":4}", "quantization_config"},
        {"\"partial_rotary_factor\":0.5", "partial_rotary_factor"},
        {"\"rope_theta\":-1", "rope_theta"},
        {"\"attention_bias\":\"yes\"", "attention_bias"},
        {"\"head_dim\":7", "head dimension 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx o = fx_llama();
        o.llama3 = 0;
        o.extra_config = cases[i].extra;
        expect_error(&o, "config.json", cases[i].key);
    }
    fx q = fx_qwen2();
    q.extra_config = "\"use_sliding_window\":true";
    q.config = "{\"model_type\":\"qwen2\",\"vocab_size\":640,\"hidden_size\":48,"
               "\"intermediate_size\":80,\"num_hidden_layers\":2,\"num_attention_heads\":6,"
               "\"num_key_value_heads\":2,\"max_position_embeddings\":96,"
               "\"use_sliding_window\":true,\"sliding_window\":64}";
    expect_error(&q, "config.json", "use_sliding_window");
    fx mi = fx_mistral();
    mi.config = "{\"model_type\":\"mistral\",\"vocab_size\":640,\"hidden_size\":40,"
                "\"intermediate_size\":64,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":1,\"head_dim\":12,\"max_position_embeddings\":96,"
                "\"sliding_window\":4096}";
    expect_error(&mi, "config.json", "sliding_window");
    fx h = fx_qwen2();
    h.config = "{\"model_type\":\"qwen2\",\"vocab_size\":640,\"intermediate_size\":80,"
               "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"max_position_embeddings\":96}";
    expect_error(&h, "config.json", "hidden_size");
    h.config = "{\"model_type\":\"qwen2\",\"vocab_size\":640,\"hidden_size\":48,"
               "\"intermediate_size\":80,\"num_hidden_layers\":2,\"num_attention_heads\":6,"
               "\"num_key_value_heads\":4,\"max_position_embeddings\":96}";
    expect_error(&h, "config.json", "num_key_value_heads");
    h.config = "{\"model_type\":\"qwen2\",\"vocab_size\":640,\"hidden_size\":48,"
               "\"intermediate_size\":80,\"num_hidden_layers\":2,\"num_attention_heads\":6}";
    expect_error(&h, "config.json", "max_position_embeddings");
    h.config = "{\"model_type\":\"gemma\",\"vocab_size\":640}";
    expect_error(&h, "config.json", "model_type");
    h.config = "{\"model_type\":\"qwen2\",\"vocab_size\":100,\"hidden_size\":48,"
               "\"intermediate_size\":80,\"num_hidden_layers\":2,\"num_attention_heads\":6,"
               "\"max_position_embeddings\":96}";
    expect_error(&h, "tokenizer.json", "vocab_size"); /* tokenizer larger than the vocabulary */
    fx g = fx_qwen2();
    g.gen_config = "{\"eos_token_id\":[601,\"x\"]}";
    expect_error(&g, "generation_config.json", "eos_token_id");
}

static void bad_weights_fail_naming_the_file_and_tensor(void) {
    fx o = fx_qwen2();
    o.skip = "model.layers.1.self_attn.k_proj.bias";
    expect_error(&o, "model.safetensors", "model.layers.1.self_attn.k_proj.bias");
    o = fx_qwen2();
    o.bad_shape = "model.layers.0.mlp.down_proj.weight";
    expect_error(&o, "model.layers.0.mlp.down_proj.weight", "expected [48, 80]");
    o = fx_qwen2();
    o.bad_dtype = "model.norm.weight";
    expect_error(&o, "model.norm.weight", "I32");
    o = fx_llama();
    o.skip = "lm_head.weight"; /* untied: the head is required */
    expect_error(&o, "model.safetensors", "lm_head.weight");
    o = fx_llama();
    o.skip = "model.layers.0.mlp.up_proj.bias"; /* mlp_bias: true */
    expect_error(&o, "model.safetensors", "mlp.up_proj.bias");
    o = fx_llama();
    o.shards = 2;
    o.skip = "model.layers.1.input_layernorm.weight";
    expect_error(&o, "model.safetensors.index.json", "model.layers.1.input_layernorm.weight");

    /* index problems: a shard missing on disk, a path out of the directory, a wrong map */
    static const char *const bad_index[][2] = {
        {"{\"weight_map\":{\"model.norm.weight\":\"model-00009-of-00009.safetensors\"}}",
         "model-00009-of-00009.safetensors"},
        {"{\"weight_map\":{\"model.norm.weight\":\"../model-00001-of-00002.safetensors\"}}",
         "not a file name"},
        {"{\"weight_map\":{}}", "weight_map"},
        {"[1]", "model.safetensors.index.json"},
    };
    for (size_t i = 0; i < sizeof bad_index / sizeof bad_index[0]; i++) {
        char *dir = fixture_new_dir("llama");
        ref_model r;
        o = fx_llama();
        o.shards = 2;
        make_model(dir, &o, &r);
        char path[512];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        fixture_write_text(path, bad_index[i][0]);
        wb_model *m = NULL;
        wb_err err = {0};
        CHECK(wb_model_load(dir, &m, &err) != WB_OK);
        CHECK_ERR_MENTIONS(err.msg, bad_index[i][1]);
        ref_free(&r);
        fixture_rm_dir(dir);
    }
    /* every tensor mapped to the first shard, which does not hold them all */
    {
        char *dir = fixture_new_dir("llama");
        ref_model r;
        o = fx_llama();
        o.shards = 2;
        make_model(dir, &o, &r);
        char path[512];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        FILE *f = fopen(path, "wb");
        fprintf(f, "{\"weight_map\":{");
        for (int i = 0; i < r.n; i++)
            fprintf(f, "%s\"%s\":\"model-00001-of-00002.safetensors\"", i ? "," : "", r.t[i].name);
        fprintf(f, "}}");
        fclose(f);
        wb_model *m = NULL;
        wb_err err = {0};
        CHECK(wb_model_load(dir, &m, &err) == WB_ERR_NOTFOUND);
        CHECK_ERR_MENTIONS(err.msg, "model-00001-of-00002.safetensors");
        CHECK_ERR_MENTIONS(err.msg, "index.json maps it here");
        ref_free(&r);
        fixture_rm_dir(dir);
    }
    /* no weights at all */
    {
        char *dir = fixture_new_dir("llama");
        ref_model r;
        o = fx_qwen2();
        make_model(dir, &o, &r);
        char path[512];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        unlink(path);
        wb_model *m = NULL;
        wb_err err = {0};
        CHECK(wb_model_load(dir, &m, &err) == WB_ERR_IO);
        CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
        ref_free(&r);
        fixture_rm_dir(dir);
    }
}

/* ============================================================================ kernels */

/* Every path of the BF16 GEMV (4 streams, rows one by one, 4x3 blocks, their remainders), AVX2
 * and scalar, against double sums over the widened weights (and the inputs rounded to BF16 where
 * the route in use rounds them), with bias and accumulate. */
static void bf16_gemv_matches_double_sums_on_odd_shapes(void) {
    static const int ins[] = {7, 8, 16, 24, 33, 40, 64};
    double worst = 0;
    for (int sc = 0; sc < 2; sc++) {
        int old = wb_kernels_force_scalar(sc);
        for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
            for (int rows = 1; rows <= 13; rows += 3)
                for (int nb = 1; nb <= 7; nb += 2) {
                    const int in = ins[a], r0 = rows > 4 ? 1 : 0;
                    uint16_t *W = malloc((size_t)rows * in * 2);
                    float *X = malloc((size_t)nb * (in + 3) * 4), *Y = malloc((size_t)nb * (rows + 2) * 4);
                    float b[16];
                    rng_state = (uint64_t)(in * 131 + rows * 7 + nb);
                    for (int i = 0; i < rows * in; i++) W[i] = wb_f32_to_bf16(frand());
                    for (int i = 0; i < nb * (in + 3); i++) X[i] = frand();
                    for (int i = 0; i < 16; i++) b[i] = frand();
                    /* where the BF16 route rounds the activations the GEMV does too */
                    const int rnd = wb_kt()->bf16_prompt->xround != NULL;
                    for (int acc = 0; acc < 2; acc++) {
                        for (int i = 0; i < nb * (rows + 2); i++) Y[i] = 0.5f;
                        wb_gemv_bf16_forward(Y, (size_t)rows + 2, X, (size_t)in + 3, nb, W, b, in,
                                             r0, rows, acc);
                        for (int t = 0; t < nb; t++)
                            for (int r = 0; r < rows; r++) {
                                double want = r < r0 ? 0.5 : b[r] + (acc ? 0.5 : 0.0);
                                for (int i = 0; r >= r0 && i < in; i++)
                                    want += (double)wb_bf16_to_f32(W[r * in + i]) *
                                            (rnd ? wb_bf16_round(X[t * (in + 3) + i]) : X[t * (in + 3) + i]);
                                double d = fabs(want - Y[t * (rows + 2) + r]);
                                if (d > worst) worst = d;
                            }
                    }
                    free(W);
                    free(X);
                    free(Y);
                }
        wb_kernels_force_scalar(old);
    }
    CHECK_MSG(worst < 1e-5, "max |kernel - double| = %.3g", worst);
}

/* ============================================================ looking inside (wb_probe) */

static double max_rel_diff_d(const float *got, const double *want, size_t n) {
    double m = 0, scale = 1;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= m)) m = d;
    }
    return m / scale;
}

/* Hidden states, attention rows and the cache's keys and values of an uncached forward and of
 * a session prefilled in two calls agree with the reference; rows sum to 1 and are causal; the
 * probed logits are bit for bit the unprobed ones; the last hidden state through wb_model_head
 * gives the logits. */
static void check_probe(fx o, int n, int split, const char *what) {
    ref_model r;
    wb_model_params prm = wb_model_default_params();
    prm.compute_f32 = 1;
    wb_model *m = load(&o, &r, &prm, NULL);
    if (!m) {
        ref_free(&r);
        return;
    }
    const int C = o.C, L = o.L, NH = o.NH, HD = hd_of(&o), KV = o.NKV * HD, V = o.V;
    int32_t ids[64];
    ids_for(ids, n, V, o.seed + 5);
    ref_probe rp = {calloc((size_t)(L + 1) * n * C, sizeof(double)),
                    calloc((size_t)L * n * NH * n, sizeof(double)),
                    calloc((size_t)L * n * KV, sizeof(double)),
                    calloc((size_t)L * n * KV, sizeof(double))};
    float *want = malloc((size_t)n * V * sizeof *want);
    ref_forward_probe(&r, ids, n, want, &rp);

    /* uncached, every position */
    int32_t pos[64];
    for (int t = 0; t < n; t++) pos[t] = t;
    float *hid = malloc((size_t)(L + 1) * n * C * sizeof *hid);
    float *att = malloc((size_t)L * n * NH * n * sizeof *att);
    float *lg = malloc((size_t)n * V * sizeof *lg), *plain = malloc((size_t)n * V * sizeof *plain);
    wb_probe p = {hid, pos, n, att};
    wb_err err = {0};
    CHECK(wb_model_forward_inspect(m, ids, n, lg, 1, &p, &err) == WB_OK);
    CHECK(wb_model_forward(m, ids, n, plain, 1, &err) == WB_OK);
    CHECK_MSG(!memcmp(lg, plain, (size_t)n * V * sizeof *lg), "%s: a probe changed the logits", what);
    double dh = max_rel_diff_d(hid, rp.hid, (size_t)(L + 1) * n * C);
    double da = max_rel_diff_d(att, rp.att, (size_t)L * n * NH * n);
    CHECK_MSG(dh < 1e-4, "%s: hidden states differ from the reference by %.3g", what, dh);
    CHECK_MSG(da < 1e-5, "%s: attention differs from the reference by %.3g", what, da);
    double worst_sum = 0;
    int acausal = 0;
    for (int l = 0; l < L; l++)
        for (int t = 0; t < n; t++)
            for (int h = 0; h < NH; h++) {
                const float *w = att + (((size_t)l * n + t) * NH + h) * n;
                double s = 0;
                for (int j = 0; j < n; j++) {
                    s += w[j];
                    if (j > t && w[j] != 0.0f) acausal++;
                }
                worst_sum = fmax(worst_sum, fabs(s - 1));
            }
    CHECK_MSG(worst_sum < 1e-5, "%s: an attention row sums to 1 +- %.3g", what, worst_sum);
    CHECK_MSG(acausal == 0, "%s: %d weights on later positions", what, acausal);
    float *head = malloc((size_t)V * sizeof *head);
    CHECK(wb_model_head(m, hid + ((size_t)L * n + n - 1) * C, 1, head, &err) == WB_OK);
    CHECK_MSG(max_abs_diff(head, lg + (size_t)(n - 1) * V, (size_t)V) < 1e-5,
              "%s: the last hidden state through the head is not the logits", what);

    /* a session: `split` tokens, then the rest with two chosen positions; then the cache */
    wb_session *s = NULL;
    CHECK(wb_session_new(m, n + 4, &s, &err) == WB_OK);
    CHECK(wb_session_prefill(s, ids, split, NULL, 0, &err) == WB_OK);
    const int32_t chosen[2] = {split, n - 1};
    float *att2 = malloc((size_t)L * 2 * NH * n * sizeof *att2);
    float *hid2 = malloc((size_t)(L + 1) * (n - split) * C * sizeof *hid2);
    wb_probe p2 = {hid2, chosen, 2, att2};
    CHECK(wb_session_prefill_inspect(s, ids + split, n - split, lg, 0, &p2, &err) == WB_OK);
    double d2 = 0, dh2 = 0;
    for (int l = 0; l < L; l++)
        for (int a = 0; a < 2; a++)
            for (int h = 0; h < NH; h++)
                d2 = fmax(d2, max_rel_diff_d(att2 + (((size_t)l * 2 + a) * NH + h) * n,
                                             rp.att + (((size_t)l * n + chosen[a]) * NH + h) * n,
                                             (size_t)n));
    for (int l = 0; l <= L; l++)
        dh2 = fmax(dh2, max_rel_diff_d(hid2 + (size_t)l * (n - split) * C,
                                       rp.hid + ((size_t)l * n + split) * C,
                                       (size_t)(n - split) * C));
    CHECK_MSG(d2 < 1e-5, "%s: session attention at chosen positions differs by %.3g", what, d2);
    CHECK_MSG(dh2 < 1e-4, "%s: session hidden states differ by %.3g", what, dh2);
    double dk = 0, dv = 0;
    for (int l = 0; l < L; l++) {
        wb_kv_view kv;
        CHECK(wb_session_kv(s, l, &kv, &err) == WB_OK);
        CHECK(kv.n_tokens == n && kv.n_kv_head == o.NKV && kv.head_dim == HD);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < KV; i++) {
                dk = fmax(dk, fabs(kv.k[(size_t)t * kv.row_stride + i] - rp.kc[((size_t)l * n + t) * KV + i]));
                dv = fmax(dv, fabs(kv.v[(size_t)t * kv.row_stride + i] - rp.vc[((size_t)l * n + t) * KV + i]));
            }
    }
    CHECK_MSG(dk < 1e-4 && dv < 1e-4, "%s: cache views differ from the reference: K %.3g V %.3g",
              what, dk, dv);
    wb_kv_view bad;
    CHECK(wb_session_kv(s, L, &bad, &err) == WB_ERR_RANGE);
    const int32_t outside = 0; /* position 0 is not in a call that starts at n */
    wb_probe p3 = {NULL, &outside, 1, att2};
    int32_t one = ids[0];
    CHECK(wb_session_prefill_inspect(s, &one, 1, NULL, 0, &p3, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "att_pos[0]");
    CHECK(wb_session_pos(s) == n);
    wb_session_free(s);
    free(rp.hid), free(rp.att), free(rp.kc), free(rp.vc);
    free(want), free(hid), free(att), free(lg), free(plain), free(head), free(att2), free(hid2);
    wb_model_free(m);
    ref_free(&r);
}

static void hidden_states_attention_and_cache_views_match_the_reference(void) {
    check_probe(fx_qwen2(), 20, 7, "qwen2 (GQA 6:2)");
    check_probe(fx_llama(), 20, 1, "llama (llama3 rope, biases)");
    check_probe(fx_mistral(), 18, 9, "mistral (GQA 4:1, head_dim 12)");
    check_probe(fx_qwen2(), 60, 50, "qwen2, 60 tokens (GEMM and blocked attention)");
    const int old = wb_threads_get();
    wb_threads_set(2);
    check_probe(fx_mistral(), 18, 9, "mistral on 2 threads");
    wb_threads_set(old);
}

/* Asked for the last position's logits only, the forward's last layer runs attention, o_proj and
 * the MLP for each sequence's last row alone; a probe makes it run every row (it reads the state
 * of all of them). Both must give bit for bit the same logits and the same K/V cache, for every
 * kernel level, weight type, thread count and prompt length (GEMV-sized, GEMM-sized, a last
 * query block of one row, a second chunk at a later position), then the same next decode step;
 * and a batch of sequences, their last rows moved together, gives each its logits alone. */
static void last_layer_for_the_last_rows_only_keeps_logits_and_cache(void) {
    const int old = wb_threads_get();
    const wb_isa old_isa = wb_isa_limit(WB_ISA_COUNT - 1);
    const fx fams[3] = {fx_qwen2(), fx_llama(), fx_mistral()};
    /* weights: F32, BF16, then Q8_0 and Q4_0 (llama: C = 32, the rows that quantize) */
    for (int f = 0; f < 3; f++)
        for (int w = 0; w < (f == 1 ? 4 : 2); w++) {
            fx o = fams[f];
            o.dtype = w == 1 ? WB_BF16 : WB_F32;
            wb_model_params prm = wb_model_default_params();
            prm.weights = w == 2 ? WB_WEIGHTS_Q8_0 : w == 3 ? WB_WEIGHTS_Q4_0 : WB_WEIGHTS_AS_STORED;
            ref_model r;
            wb_model *m = load(&o, &r, &prm, NULL);
            if (!m) {
                ref_free(&r);
                continue;
            }
            const int V = o.V, L = o.L, KV = o.NKV * hd_of(&o);
            int32_t ids[96];
            ids_for(ids, 96, V, o.seed + 3);
            float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4);
            wb_err err = {0};
            for (int isa = 0; isa <= (int)wb_isa_best(); isa++)
                for (int nt = 1; nt <= 2; nt++) {
                    wb_isa_limit((wb_isa)isa);
                    wb_threads_set(nt);
                    /* {first chunk, second chunk (0: none)} */
                    static const int chunks[5][2] = {{20, 0}, {33, 0}, {60, 0}, {40, 37}, {7, 49}};
                    for (int c = 0; c < 5; c++) {
                        wb_session *sa = NULL, *sb = NULL;
                        CHECK(wb_session_new(m, 96, &sa, &err) == WB_OK);
                        CHECK(wb_session_new(m, 96, &sb, &err) == WB_OK);
                        if (!sa || !sb) break;
                        wb_probe every = {NULL, NULL, 0, NULL};
                        int at = 0;
                        for (int k = 0; k < 2 && chunks[c][k]; at += chunks[c][k], k++) {
                            CHECK(wb_session_prefill(sa, ids + at, chunks[c][k], a, 0, &err) == WB_OK);
                            CHECK(wb_session_prefill_inspect(sb, ids + at, chunks[c][k], b, 0, &every,
                                                             &err) == WB_OK);
                        }
                        CHECK_MSG(!memcmp(a, b, (size_t)V * 4), "%s weights %d %s %d threads, "
                                  "chunks %d + %d: the prefill's logits differ", o.family, w,
                                  wb_isa_name((wb_isa)isa), nt, chunks[c][0], chunks[c][1]);
                        float *a1 = malloc((size_t)V * 4), *b1 = malloc((size_t)V * 4);
                        CHECK(wb_session_decode(sa, ids[at], a1, &err) == WB_OK);
                        CHECK(wb_session_decode(sb, ids[at], b1, &err) == WB_OK);
                        int same_cache = 1;
                        for (int l = 0; l < L; l++) {
                            wb_kv_view ka, kb;
                            CHECK(wb_session_kv(sa, l, &ka, &err) == WB_OK);
                            CHECK(wb_session_kv(sb, l, &kb, &err) == WB_OK);
                            for (int t = 0; t < ka.n_tokens; t++)
                                same_cache &= !memcmp(ka.k + (size_t)t * ka.row_stride,
                                                      kb.k + (size_t)t * kb.row_stride,
                                                      (size_t)KV * 4) &&
                                              !memcmp(ka.v + (size_t)t * ka.row_stride,
                                                      kb.v + (size_t)t * kb.row_stride,
                                                      (size_t)KV * 4);
                        }
                        CHECK_MSG(same_cache && !memcmp(a1, b1, (size_t)V * 4),
                                  "%s weights %d %s %d threads, chunks %d + %d: cache %s, next "
                                  "step's logits %s", o.family, w, wb_isa_name((wb_isa)isa), nt,
                                  chunks[c][0], chunks[c][1], same_cache ? "same" : "differs",
                                  memcmp(a1, b1, (size_t)V * 4) ? "differ" : "same");
                        free(a1);
                        free(b1);
                        wb_session_free(sa);
                        wb_session_free(sb);
                    }
                    /* the prefills' own logits: one chunk of each length, compared directly */
                    for (int n = 20; n <= 60; n += 13) {
                        wb_probe every = {NULL, NULL, 0, NULL};
                        CHECK(wb_model_forward(m, ids, n, a, 0, &err) == WB_OK);
                        CHECK(wb_model_forward_inspect(m, ids, n, b, 0, &every, &err) == WB_OK);
                        CHECK_MSG(!memcmp(a, b, (size_t)V * 4), "%s weights %d %s %d threads, %d "
                                  "tokens: last logits differ from the whole last layer's",
                                  o.family, w, wb_isa_name((wb_isa)isa), nt, n);
                    }
                    /* a batch: prompts of 3, 35 and 18 tokens, last rows moved to rows 0..2 */
                    wb_batch *bt = NULL;
                    wb_session *s3[3] = {NULL, NULL, NULL};
                    CHECK(wb_batch_new(m, &bt, &err) == WB_OK);
                    for (int i = 0; i < 3; i++) CHECK(wb_session_new(m, 96, &s3[i], &err) == WB_OK);
                    const int counts[3] = {3, 35, 18};
                    const int32_t *bids[3] = {ids, ids + 3, ids + 38};
                    float *lb = malloc((size_t)3 * V * 4);
                    if (bt && s3[0] && s3[1] && s3[2]) {
                        CHECK(wb_batch_forward(bt, s3, bids, counts, 3, lb, &err) == WB_OK);
                        for (int i = 0; i < 3; i++) {
                            wb_probe every = {NULL, NULL, 0, NULL};
                            CHECK(wb_model_forward_inspect(m, bids[i], counts[i], b, 0, &every,
                                                           &err) == WB_OK);
                            CHECK_MSG(!memcmp(lb + (size_t)i * V, b, (size_t)V * 4),
                                      "%s weights %d %s %d threads: batched sequence %d differs",
                                      o.family, w, wb_isa_name((wb_isa)isa), nt, i);
                        }
                    }
                    free(lb);
                    for (int i = 0; i < 3; i++) wb_session_free(s3[i]);
                    wb_batch_free(bt);
                }
            free(a);
            free(b);
            wb_model_free(m);
            ref_free(&r);
        }
    wb_isa_limit(old_isa);
    wb_threads_set(old);
}


/* Q8_0 / Q4_0 matrices loaded at the AVX-512 level are kept in the 16-row tile layout (rows a
 * multiple of 16: llama's q/k/v/o and the tied embedding; gate/up's 72 rows stay in the file
 * layout); the same checkpoint loaded under the portable limit keeps the file layout. At every level
 * (the tiles read natively at AVX-512, row by row below it) both give the same logits bit for
 * bit: a prompt through the GEMM, decode steps, 1 and 2 threads. */
static void tile_layout_models_give_the_file_layout_bits(void) {
    const wb_isa old_isa = wb_isa_limit(WB_ISA_COUNT - 1);
    const int old = wb_threads_get();
    if (wb_isa_best() < WB_ISA_AVX512) {
        wb_isa_limit(old_isa);
        return; /* nothing is tiled below AVX-512 */
    }
    for (int w = 0; w < 2; w++) {
        fx o = fx_llama();
        o.dtype = WB_F32;
        wb_model_params p = wb_model_default_params();
        p.weights = w ? WB_WEIGHTS_Q4_0 : WB_WEIGHTS_Q8_0;
        ref_model r;
        char *dir = NULL;
        wb_isa_limit(WB_ISA_AVX512);
        wb_model *mt = load(&o, &r, &p, &dir), *mf = NULL;
        /* (not the AVX2 limit: without AVX-VNNI, Zen 4 say, AVX2's maddubs kernels read tiles) */
        wb_isa_limit(WB_ISA_PORTABLE);
        wb_err err = {0};
        CHECK_MSG(wb_model_load_ex(dir, &p, &mf, &err) == WB_OK, "%s", err.msg);
        fixture_rm_dir(dir);
        if (!mt || !mf) {
            wb_model_free(mt), wb_model_free(mf), ref_free(&r);
            continue;
        }
        const wb_weight_store *st = wb_model_store(mt), *sf = wb_model_store(mf);
        int tiled = 0, untiled = 0, file_tiled = 0;
        for (int i = 0; i < st->n_loaded; i++) {
            const wb_mat *a = &st->loaded[i].mat;
            if (!a->w || (a->dtype != WB_MAT_Q8_0 && a->dtype != WB_MAT_Q4_0)) continue;
            if (a->tiles) tiled++;
            else untiled++;
            CHECK(a->tiles == (a->rows % 16 == 0));
            /* each matrix of the store starts on a cache line (weights.c quantize_mats), where
             * the AVX-512 tiles' 64-byte loads then stay */
            CHECK_MSG(!a->tiles || ((uintptr_t)a->w & 63) == 0, "matrix %d at %p", i, a->w);
            file_tiled += sf->loaded[i].mat.tiles;
        }
        CHECK_MSG(tiled >= 5 && untiled >= 2 && file_tiled == 0, "%s: %d tiled, %d untiled, %d tiled under the portable limit",
                  w ? "q4_0" : "q8_0", tiled, untiled, file_tiled);
        const size_t V = (size_t)o.V;
        float *la = malloc(V * 4), *lb = malloc(V * 4);
        int32_t ids[WB_PROMPT_ROWS + 3];
        ids_for(ids, WB_PROMPT_ROWS + 3, o.V, 99);
        for (int isa = 0; isa <= (int)wb_isa_best(); isa++)
            for (int nt = 1; nt <= 2; nt++) {
                wb_isa_limit((wb_isa)isa);
                wb_threads_set(nt);
                wb_session *sa = NULL, *sb = NULL;
                CHECK(wb_session_new(mt, 96, &sa, &err) == WB_OK);
                CHECK(wb_session_new(mf, 96, &sb, &err) == WB_OK);
                int diff = 0;
                CHECK(wb_session_prefill(sa, ids, WB_PROMPT_ROWS + 3, la, 0, &err) == WB_OK);
                CHECK(wb_session_prefill(sb, ids, WB_PROMPT_ROWS + 3, lb, 0, &err) == WB_OK);
                diff += memcmp(la, lb, V * 4) != 0;
                for (int step = 0; step < 3; step++) {
                    CHECK(wb_session_decode(sa, ids[step], la, &err) == WB_OK);
                    CHECK(wb_session_decode(sb, ids[step], lb, &err) == WB_OK);
                    diff += memcmp(la, lb, V * 4) != 0;
                }
                CHECK_MSG(!diff, "%s at %s, %d threads: tile and file layouts differ in %d of 4 steps",
                          w ? "Q4_0" : "Q8_0", wb_isa_name((wb_isa)isa), nt, diff);
                wb_session_free(sa), wb_session_free(sb);
            }
        free(la), free(lb);
        wb_model_free(mt), wb_model_free(mf);
        ref_free(&r);
    }
    wb_isa_limit(old_isa);
    wb_threads_set(old);
}
int main(void) {
    RUN(last_layer_for_the_last_rows_only_keeps_logits_and_cache);
    RUN(bf16_gemv_matches_double_sums_on_odd_shapes);
    RUN(each_family_matches_the_plain_loop_reference);
    RUN(gemm_prefill_of_many_tokens_matches_the_reference);
    RUN(scalar_kernels_match_the_reference);
    RUN(cached_decode_matches_uncached_forward);
    RUN(hidden_states_attention_and_cache_views_match_the_reference);
    RUN(bf16_weights_stay_bf16_and_agree_with_f32);
    RUN(f16_checkpoints_match_the_reference);
    RUN(sharded_checkpoints_equal_the_single_file);
    RUN(two_threads_give_the_same_results);
    RUN(batched_decode_equals_single_sequences);
    RUN(batched_steps_equal_each_sequence_alone);
    RUN(generate_accepts_any_context_up_to_the_models_maximum);
    RUN(kv_cache_is_sized_from_the_requested_context);
    RUN(generation_config_eos_list_ends_generation_as_eos);
    RUN(chat_template_prompt_runs_and_ends_at_im_end);
    RUN(bad_configs_fail_naming_config_json_and_the_key);
    RUN(bad_weights_fail_naming_the_file_and_tensor);
    RUN(tile_layout_models_give_the_file_layout_bits);
    return check_summary();
}
