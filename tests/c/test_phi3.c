/* test_phi3.c - the Phi-3 family: fused qkv_proj / gate_up_proj, LongRoPE (short and long factor
 * sets, attention factor), sliding window, against a plain-loop double-precision reference
 * written here from transformers' Phi3 modeling code, on tiny random checkpoints each test writes
 * itself; batched steps equal each sequence alone; bad rope_scaling keys are named. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fixture.h"
#include "model_internal.h"
#include "wb_batch.h"
#include "wb_model.h"

/* ================================================================ fixture: a random model */

enum { V = 640, C = 32, L = 2, NH = 4, NKV = 2, HD = C / NH, F = 48, MAXPOS = 64, ORIG = 8 };
enum { Q = NH * HD, KV = NKV * HD, QKV = Q + 2 * KV };

typedef struct fx {
    int longrope;       /* rope_scaling longrope, original_max_position_embeddings ORIG */
    int window;         /* sliding_window, 0: none (written as null) */
    int tied;
    const char *rope_scaling; /* whole rope_scaling value instead */
    uint64_t seed;
} fx;

typedef struct ref_model {
    fx o;
    float *embed, *norm, *head;                 /* [V, C], [C], [V, C] */
    float *ln1[L], *qkv[L], *wo[L], *ln2[L], *gu[L], *wd[L];
    double short_f[HD / 2], long_f[HD / 2];
} ref_model;

static uint64_t rng_state;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static float *rnd(size_t n, float scale) { /* scale < 0: a norm weight near 1 */
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = scale < 0 ? 1.0f + 0.2f * frand() : scale * frand();
    return v;
}

static void ref_free(ref_model *r) {
    free(r->embed), free(r->norm), free(r->head);
    for (int l = 0; l < L; l++)
        free(r->ln1[l]), free(r->qkv[l]), free(r->wo[l]), free(r->ln2[l]), free(r->gu[l]),
            free(r->wd[l]);
}

static void make_model(const char *dir, const fx *o, ref_model *r) {
    rng_state = o->seed * 0x9E3779B97F4A7C15ull + 1;
    memset(r, 0, sizeof *r);
    r->o = *o;
    wb_tensor_view tv[3 + 6 * L + 1];
    char names[3 + 6 * L + 1][96];
    int n = 0;
#define T(ptr, d0, d1, sc, ...)                                                                  \
    do {                                                                                          \
        (ptr) = rnd((size_t)(d0) * (size_t)((d1) ? (d1) : 1), sc);                                \
        snprintf(names[n], sizeof names[n], __VA_ARGS__);                                         \
        tv[n] = (wb_tensor_view){.name = names[n], .dtype = WB_F32, .ndim = (d1) ? 2 : 1,         \
                                 .shape = {(d0), (d1)}, .data = (ptr),                            \
                                 .nbytes = (size_t)(d0) * ((d1) ? (d1) : 1) * 4};                 \
        n++;                                                                                      \
    } while (0)
    T(r->embed, V, C, 0.5f, "model.embed_tokens.weight");
    for (int l = 0; l < L; l++) {
        T(r->ln1[l], C, 0, -1, "model.layers.%d.input_layernorm.weight", l);
        T(r->qkv[l], QKV, C, 0.3f, "model.layers.%d.self_attn.qkv_proj.weight", l);
        T(r->wo[l], C, Q, 0.2f, "model.layers.%d.self_attn.o_proj.weight", l);
        T(r->ln2[l], C, 0, -1, "model.layers.%d.post_attention_layernorm.weight", l);
        T(r->gu[l], 2 * F, C, 0.3f, "model.layers.%d.mlp.gate_up_proj.weight", l);
        T(r->wd[l], C, F, 0.2f, "model.layers.%d.mlp.down_proj.weight", l);
    }
    T(r->norm, C, 0, -1, "model.norm.weight");
    if (!o->tied) T(r->head, V, C, 0.3f, "lm_head.weight");
#undef T
    char path[512];
    wb_err err = {0};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(wb_safetensors_write(path, tv, n, NULL, 0, &err) == WB_OK);
    /* factors between 1 and 4, distinct per pair so a swapped or misread list shows */
    char sf[512] = "", lf[512] = "";
    for (int i = 0; i < HD / 2; i++) {
        r->short_f[i] = 1.0 + 0.25 * i;
        r->long_f[i] = 1.5 + 0.5 * i;
        snprintf(sf + strlen(sf), sizeof sf - strlen(sf), "%s%.17g", i ? "," : "", r->short_f[i]);
        snprintf(lf + strlen(lf), sizeof lf - strlen(lf), "%s%.17g", i ? "," : "", r->long_f[i]);
    }
    char rs[1200];
    if (o->rope_scaling) snprintf(rs, sizeof rs, "%s", o->rope_scaling);
    else if (o->longrope)
        snprintf(rs, sizeof rs, "{\"type\":\"longrope\",\"short_factor\":[%s],\"long_factor\":[%s]}",
                 sf, lf);
    else snprintf(rs, sizeof rs, "null");
    char win[32];
    if (o->window) snprintf(win, sizeof win, "%d", o->window);
    else snprintf(win, sizeof win, "null");
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\":\"phi3\",\"architectures\":[\"Phi3ForCausalLM\"],\"vocab_size\":%d,"
             "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
             "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"max_position_embeddings\":%d,\"original_max_position_embeddings\":%d,"
             "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"hidden_act\":\"silu\","
             "\"tie_word_embeddings\":%s,\"sliding_window\":%s,\"rope_scaling\":%s}",
             V, C, F, L, NH, NKV, MAXPOS, ORIG, o->tied ? "true" : "false", win, rs);
    snprintf(path, sizeof path, "%s/config.json", dir);
    fixture_write_text(path, cfg);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    fixture_copy_file("tests/vectors/family_qwen2_tokenizer.json", path);
}

static wb_model *load(const fx *o, ref_model *r) {
    char *dir = fixture_new_dir("phi3");
    make_model(dir, o, r);
    wb_model *m = NULL;
    wb_err err = {0};
    wb_model_params p = wb_model_default_params();
    wb_status s = wb_model_load_ex(dir, &p, &m, &err);
    CHECK_MSG(s == WB_OK, "%s", err.msg);
    fixture_rm_dir(dir);
    return m;
}

/* ===================================================== reference (transformers, in double) */

static void ref_rms(double *out, const double *x, const float *w) {
    double ss = 0;
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    double rs = 1.0 / sqrt(ss / C + 1e-6);
    for (int i = 0; i < C; i++) out[i] = w[i] * (x[i] * rs);
}

/* y[out] = W[r0 .. r0 + out) x: a slice of rows of a (fused) matrix with `in` columns */
static void ref_lin(double *y, const double *x, const float *W, int r0, int out, int in) {
    for (int r = 0; r < out; r++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += (double)W[(size_t)(r0 + r) * in + i] * x[i];
        y[r] = s;
    }
}

/* Phi3RotaryEmbedding / LongRoPE: inv_freq = 1 / (ext * base^(2i/hd)), cos and sin times
 * sqrt(1 + ln(max/orig) / ln(orig)); q * cos + rotate_half(q) * sin. */
static void ref_rope(double *v, const ref_model *r, int use_long, int pos) {
    const int h = HD / 2;
    const double scale = r->o.longrope ? sqrt(1 + log((double)MAXPOS / ORIG) / log((double)ORIG))
                                       : 1.0;
    double tmp[HD];
    for (int i = 0; i < HD; i++) {
        double ext = !r->o.longrope ? 1.0 : use_long ? r->long_f[i % h] : r->short_f[i % h];
        double ang = pos / (ext * pow(10000.0, 2.0 * (i % h) / HD));
        double rot = i < h ? -v[i + h] : v[i - h];
        tmp[i] = (v[i] * cos(ang) + rot * sin(ang)) * scale;
    }
    memcpy(v, tmp, sizeof tmp);
}

/* When set, the reference also records ref_att [L, n, NH, n]: each query's softmax row (0
 * outside its window). */
static double *ref_att;

/* logits [n, V] for every position of one uncached pass; use_long picks the factor set */
static void ref_forward(const ref_model *r, const int32_t *ids, int n, int use_long,
                        float *logits) {
    double *x = calloc((size_t)n * C, sizeof *x), h[C], tmp[C], gu[2 * F], lg[V];
    double *q = malloc((size_t)n * Q * sizeof *q), *k = malloc((size_t)n * KV * sizeof *k);
    double *v = malloc((size_t)n * KV * sizeof *v), *a = malloc((size_t)n * Q * sizeof *a);
    double *sc = malloc((size_t)n * sizeof *sc);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = r->embed[(size_t)ids[t] * C + i];
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < n; t++) {
            ref_rms(h, x + (size_t)t * C, r->ln1[l]);
            /* qkv = qkv_proj(h); q = qkv[:Q], k = qkv[Q:Q+KV], v = qkv[Q+KV:] */
            ref_lin(q + (size_t)t * Q, h, r->qkv[l], 0, Q, C);
            ref_lin(k + (size_t)t * KV, h, r->qkv[l], Q, KV, C);
            ref_lin(v + (size_t)t * KV, h, r->qkv[l], Q + KV, KV, C);
            for (int hh = 0; hh < NH; hh++) ref_rope(q + (size_t)t * Q + hh * HD, r, use_long, t);
            for (int hh = 0; hh < NKV; hh++) ref_rope(k + (size_t)t * KV + hh * HD, r, use_long, t);
        }
        for (int t = 0; t < n; t++)
            for (int hh = 0; hh < NH; hh++) {
                const int kh = hh / (NH / NKV);
                const int s0 = r->o.window && t - r->o.window + 1 > 0 ? t - r->o.window + 1 : 0;
                double mx = -1e300, sum = 0;
                for (int s = s0; s <= t; s++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++)
                        d += q[(size_t)t * Q + hh * HD + i] * k[(size_t)s * KV + kh * HD + i];
                    sc[s] = d / sqrt((double)HD);
                    if (sc[s] > mx) mx = sc[s];
                }
                for (int s = s0; s <= t; s++) sum += (sc[s] = exp(sc[s] - mx));
                if (ref_att)
                    for (int s = s0; s <= t; s++)
                        ref_att[(((size_t)l * n + t) * NH + hh) * n + s] = sc[s] / sum;
                for (int i = 0; i < HD; i++) {
                    double acc = 0;
                    for (int s = s0; s <= t; s++) acc += sc[s] / sum * v[(size_t)s * KV + kh * HD + i];
                    a[(size_t)t * Q + hh * HD + i] = acc;
                }
            }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * C;
            ref_lin(tmp, a + (size_t)t * Q, r->wo[l], 0, C, Q);
            for (int i = 0; i < C; i++) xt[i] += tmp[i];
            ref_rms(h, xt, r->ln2[l]);
            /* gate, up = gate_up_proj(h).chunk(2); down(up * silu(gate)) */
            ref_lin(gu, h, r->gu[l], 0, 2 * F, C);
            for (int i = 0; i < F; i++) gu[i] = gu[F + i] * (gu[i] / (1 + exp(-gu[i])));
            ref_lin(tmp, gu, r->wd[l], 0, C, F);
            for (int i = 0; i < C; i++) xt[i] += tmp[i];
        }
    }
    const float *head = r->o.tied ? r->embed : r->head;
    for (int t = 0; t < n; t++) {
        ref_rms(h, x + (size_t)t * C, r->norm);
        ref_lin(lg, h, head, 0, V, C);
        for (int i = 0; i < V; i++) logits[(size_t)t * V + i] = (float)lg[i];
    }
    free(x), free(q), free(k), free(v), free(a), free(sc);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

static void ids_for(int32_t *ids, int n, uint64_t seed) {
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)((seed * 2654435761u + (uint64_t)i * 7919u) % (uint64_t)V);
}

/* ===================================================================== tests */

/* Uncached forward of n tokens, all positions: long factors exactly when n > ORIG. */
static void check_forward(fx o, int n, const char *what) {
    ref_model r;
    wb_model *m = load(&o, &r);
    if (m) {
        int32_t ids[64];
        ids_for(ids, n, o.seed);
        float *want = malloc((size_t)n * V * 4), *got = malloc((size_t)n * V * 4);
        ref_forward(&r, ids, n, n > ORIG, want);
        wb_err err = {0};
        CHECK_MSG(wb_model_forward(m, ids, n, got, 1, &err) == WB_OK, "%s", err.msg);
        double d = max_abs_diff(want, got, (size_t)n * V);
        CHECK_MSG(d < 1e-4, "%s: %d tokens: max |ours - reference| = %.3g", what, n, d);
        free(want), free(got);
        wb_model_free(m);
    }
    ref_free(&r);
}

static void forward_matches_the_plain_loop_reference(void) {
    check_forward((fx){.seed = 3}, 20, "phi3, no rope_scaling, untied");
    check_forward((fx){.tied = 1, .seed = 4}, 12, "phi3, tied embeddings");
    check_forward((fx){.longrope = 1, .seed = 5}, 6, "phi3 longrope, short factors (6 <= 8)");
    check_forward((fx){.longrope = 1, .seed = 5}, 20, "phi3 longrope, long factors (20 > 8)");
    check_forward((fx){.window = 5, .seed = 6}, 20, "phi3 sliding_window 5");
    check_forward((fx){.longrope = 1, .window = 7, .seed = 8}, 60, "phi3 longrope + window, GEMM");
}

/* Attention through the probe with LongRoPE (long factors, attention_factor scaling) and a
 * sliding window: the reference's rows, summing to 1, 0 outside the window and after the query;
 * probed logits are bit for bit the unprobed ones. */
static void attention_rows_match_the_reference_with_longrope_and_a_window(void) {
    fx o = {.longrope = 1, .window = 5, .seed = 12};
    ref_model r;
    wb_model *m = load(&o, &r);
    if (m) {
        enum { N = 20 };
        int32_t ids[N], pos[N];
        ids_for(ids, N, o.seed);
        for (int t = 0; t < N; t++) pos[t] = t;
        ref_att = calloc((size_t)L * N * NH * N, sizeof *ref_att);
        float *want = malloc((size_t)N * V * 4), *got = malloc((size_t)N * V * 4),
              *plain = malloc((size_t)N * V * 4), *att = malloc((size_t)L * N * NH * N * 4);
        ref_forward(&r, ids, N, 1, want);
        wb_probe p = {NULL, pos, N, att};
        wb_err err = {0};
        CHECK_MSG(wb_model_forward_inspect(m, ids, N, got, 1, &p, &err) == WB_OK, "%s", err.msg);
        CHECK(wb_model_forward(m, ids, N, plain, 1, &err) == WB_OK);
        CHECK(!memcmp(got, plain, (size_t)N * V * 4));
        double d = 0, worst_sum = 0;
        int outside = 0;
        for (size_t i = 0; i < (size_t)L * N * NH * N; i++) d = fmax(d, fabs(att[i] - ref_att[i]));
        for (int row = 0; row < L * N * NH; row++) {
            const int t = (row / NH) % N;
            double s = 0;
            for (int j = 0; j < N; j++) {
                const float w = att[(size_t)row * N + j];
                s += w;
                if ((j > t || j < t - o.window + 1) && w != 0.0f) outside++;
            }
            worst_sum = fmax(worst_sum, fabs(s - 1));
        }
        CHECK_MSG(d < 1e-5, "attention differs from the reference by %.3g", d);
        CHECK_MSG(worst_sum < 1e-5 && outside == 0, "rows sum to 1 +- %.3g; %d weights outside", worst_sum, outside);
        free(ref_att);
        ref_att = NULL;
        free(want), free(got), free(plain), free(att);
        wb_model_free(m);
    }
    ref_free(&r);
}

/* A session's factor set follows its n_ctx: n_ctx > ORIG long, else short (phi3.c's choice),
 * also for decode steps after the prefill. */
static void session_factor_set_follows_its_context(void) {
    fx o = {.longrope = 1, .seed = 9};
    ref_model r;
    wb_model *m = load(&o, &r);
    if (!m) {
        ref_free(&r);
        return;
    }
    const int n = 7;
    int32_t ids[7];
    ids_for(ids, n, 77);
    float *want = malloc((size_t)n * V * 4), *got = malloc((size_t)V * 4);
    for (int use_long = 0; use_long <= 1; use_long++) {
        ref_forward(&r, ids, n, use_long, want);
        wb_session *s = NULL;
        wb_err err = {0};
        CHECK(wb_session_new(m, use_long ? 32 : ORIG, &s, &err) == WB_OK);
        if (!s) continue;
        CHECK(wb_session_prefill(s, ids, 4, got, 0, &err) == WB_OK);
        double worst = max_abs_diff(got, want + (size_t)3 * V, V);
        for (int t = 4; t < n; t++) {
            CHECK(wb_session_decode(s, ids[t], got, &err) == WB_OK);
            double d = max_abs_diff(got, want + (size_t)t * V, V);
            if (d > worst) worst = d;
        }
        CHECK_MSG(worst < 1e-4, "n_ctx %d (%s factors): max diff %.3g", use_long ? 32 : ORIG,
                  use_long ? "long" : "short", worst);
        wb_session_free(s);
    }
    free(want), free(got);
    wb_model_free(m);
    ref_free(&r);
}

/* Two sequences stepped together (prefill of different lengths, then decode steps) give bit for
 * bit what each gets alone in a session of the same n_ctx. */
static void batched_steps_equal_each_sequence_alone(void) {
    fx o = {.longrope = 1, .window = 6, .seed = 10};
    ref_model r;
    wb_model *m = load(&o, &r);
    if (!m) {
        ref_free(&r);
        return;
    }
    wb_err err = {0};
    wb_batch *bt = NULL;
    wb_session *s[2] = {NULL, NULL}, *alone[2] = {NULL, NULL};
    CHECK(wb_batch_new(m, &bt, &err) == WB_OK);
    for (int i = 0; i < 2; i++) {
        CHECK(wb_session_new(m, 32, &s[i], &err) == WB_OK);
        CHECK(wb_session_new(m, 32, &alone[i], &err) == WB_OK);
    }
    int32_t p0[3] = {5, 6, 7}, p1[9] = {9, 10, 11, 12, 13, 14, 15, 16, 17};
    const int32_t *ids[2] = {p0, p1};
    int counts[2] = {3, 9};
    float *lg = malloc((size_t)2 * V * 4), *one = malloc((size_t)V * 4);
    if (bt && s[0] && s[1] && alone[0] && alone[1]) {
        CHECK(wb_batch_forward(bt, s, ids, counts, 2, lg, &err) == WB_OK);
        int same = 1;
        for (int i = 0; i < 2; i++) {
            CHECK(wb_session_prefill(alone[i], ids[i], counts[i], one, 0, &err) == WB_OK);
            same &= !memcmp(lg + (size_t)i * V, one, (size_t)V * 4);
        }
        for (int step = 0; step < 8; step++) {
            int32_t t0 = 20 + step, t1 = 40 + 3 * step;
            const int32_t *d[2] = {&t0, &t1};
            int ones[2] = {1, 1};
            CHECK(wb_batch_forward(bt, s, d, ones, 2, lg, &err) == WB_OK);
            for (int i = 0; i < 2; i++) {
                CHECK(wb_session_decode(alone[i], *d[i], one, &err) == WB_OK);
                same &= !memcmp(lg + (size_t)i * V, one, (size_t)V * 4);
            }
        }
        CHECK_MSG(same, "batched logits differ from each sequence alone");
    }
    free(lg), free(one);
    for (int i = 0; i < 2; i++) wb_session_free(s[i]), wb_session_free(alone[i]);
    wb_batch_free(bt);
    wb_model_free(m);
    ref_free(&r);
}

static void expect_bad(const char *rope_scaling, const char *needle) {
    fx o = {.rope_scaling = rope_scaling, .seed = 2};
    ref_model r;
    char *dir = fixture_new_dir("phi3");
    make_model(dir, &o, &r);
    wb_model *m = NULL;
    wb_err err = {0};
    CHECK(wb_model_load(dir, &m, &err) != WB_OK);
    CHECK(m == NULL);
    CHECK_MSG(strstr(err.msg, needle) && strstr(err.msg, "config.json"),
              "want \"%s\" and config.json in: %s", needle, err.msg);
    wb_model_free(m);
    fixture_rm_dir(dir);
    ref_free(&r);
}

static void bad_rope_scaling_fails_naming_the_key(void) {
    expect_bad("{\"type\":\"yarn\",\"factor\":4}", "rope_scaling.type");
    expect_bad("{\"type\":\"longrope\",\"short_factor\":[1,1],\"long_factor\":[1,1,1,1]}",
               "rope_scaling.short_factor");
    expect_bad("{\"type\":\"longrope\",\"short_factor\":[1,1,1,1],\"long_factor\":[1,1,-1,1]}",
               "rope_scaling.long_factor");
    expect_bad("{\"type\":\"longrope\",\"short_factor\":[1,1,1,1]}", "rope_scaling.long_factor");
    expect_bad("[1]", "rope_scaling");
}

int main(void) {
    RUN(forward_matches_the_plain_loop_reference);
    RUN(attention_rows_match_the_reference_with_longrope_and_a_window);
    RUN(session_factor_set_follows_its_context);
    RUN(batched_steps_equal_each_sequence_alone);
    RUN(bad_rope_scaling_fails_naming_the_key);
    return check_summary();
}
