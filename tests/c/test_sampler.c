/* test_sampler.c - the sampling distribution against a plain full-sort reference, the draw, the
 * RNG and parameter validation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wb_sampler.h"

/* ---- a deliberately naive reference: full sort, one filter after another ---------------- */

typedef struct ref_item {
    double p;
    int id;
} ref_item;

static int ref_cmp(const void *a, const void *b) {
    const ref_item *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

/* Reference for steps 4-8 on already-adjusted logits. */
static void reference(const float *z, int V, double T, int top_k, double top_p, double min_p,
                      double *out) {
    ref_item *it = malloc((size_t)V * sizeof *it);
    double m = -INFINITY;
    for (int i = 0; i < V; i++) m = z[i] > m ? z[i] : m;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        it[i].p = exp(((double)z[i] - m) / T);
        it[i].id = i;
        sum += it[i].p;
    }
    for (int i = 0; i < V; i++) it[i].p /= sum;
    qsort(it, (size_t)V, sizeof *it, ref_cmp);
    int n = V;
    if (top_k > 0 && top_k < n) n = top_k;
    if (top_p < 1) {
        double tot = 0, cum = 0;
        for (int i = 0; i < n; i++) tot += it[i].p;
        for (int i = 0; i < n; i++) {
            cum += it[i].p / tot;
            if (cum >= top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (min_p > 0) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (it[i].p >= min_p * it[0].p) it[k++] = it[i];
        n = k;
    }
    double s = 0;
    for (int i = 0; i < n; i++) s += it[i].p;
    for (int i = 0; i < V; i++) out[i] = 0;
    for (int i = 0; i < n; i++) out[it[i].id] = it[i].p / s;
    free(it);
}

static void random_logits(float *z, int V, unsigned seed, double scale) {
    wb_rng r;
    wb_rng_seed(&r, seed);
    for (int i = 0; i < V; i++) {
        /* Box-Muller: roughly Gaussian logits like a real model's. */
        double u1 = wb_rng_uniform(&r) + 1e-12, u2 = wb_rng_uniform(&r);
        z[i] = (float)(scale * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

static int survivors(const float *p, int V) {
    int n = 0;
    for (int i = 0; i < V; i++) n += p[i] > 0;
    return n;
}

static double max_abs_diff(const float *p, const double *q, int V) {
    double d = 0;
    for (int i = 0; i < V; i++) d = fmax(d, fabs((double)p[i] - q[i]));
    return d;
}

/* Compare wb_sampling_apply with the reference for one setting; returns survivors. */
static int compare(const float *z, int V, float T, int k, float tp, float mp) {
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = T;
    sp.top_k = k;
    sp.top_p = tp;
    sp.min_p = mp;
    float *p = malloc((size_t)V * sizeof *p);
    double *q = malloc((size_t)V * sizeof *q);
    wb_err err = {0};
    CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
    reference(z, V, T, k, tp, mp, q);
    double d = max_abs_diff(p, q, V);
    CHECK_MSG(d < 1e-5, "T=%g k=%d top_p=%g min_p=%g: max diff %g", T, k, tp, mp, d);
    /* Probabilities below float range underflow to 0 in the sampler (a float softmax) but not
     * in the double reference; count both above a tiny floor. */
    int ns = 0, nq = 0;
    for (int i = 0; i < V; i++) {
        ns += p[i] > 1e-30f;
        nq += q[i] > 1e-30;
    }
    CHECK_MSG(ns == nq, "T=%g k=%d top_p=%g min_p=%g: %d survivors, reference %d", T, k, tp,
              mp, ns, nq);
    double s = 0;
    for (int i = 0; i < V; i++) s += p[i];
    CHECK_NEAR(s, 1.0, 1e-5);
    free(p);
    free(q);
    return ns;
}

static void temperature_one_is_the_plain_softmax(void) {
    enum { V = 300 };
    float z[V];
    random_logits(z, V, 1, 2.0);
    compare(z, V, 1.0f, 0, 1.0f, 0.0f);
}

static void each_filter_matches_the_reference(void) {
    enum { V = 2048 };
    static float z[V];
    for (unsigned seed = 1; seed <= 5; seed++) {
        random_logits(z, V, seed, seed * 1.5);
        const float temps[] = {0.3f, 0.7f, 1.0f, 1.8f};
        for (int t = 0; t < 4; t++) {
            compare(z, V, temps[t], 0, 1.0f, 0.0f);
            compare(z, V, temps[t], 40, 1.0f, 0.0f);
            compare(z, V, temps[t], 0, 0.9f, 0.0f);
            compare(z, V, temps[t], 0, 0.5f, 0.0f);
            compare(z, V, temps[t], 0, 1.0f, 0.05f);
            compare(z, V, temps[t], 50, 0.95f, 0.01f);
            compare(z, V, temps[t], 1000, 0.99f, 0.0f);
        }
    }
}

static void top_k_five_leaves_exactly_five(void) {
    enum { V = 2048 };
    static float z[V], p[V];
    random_logits(z, V, 7, 3.0);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.top_k = 5;
    wb_err err = {0};
    CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
    CHECK(survivors(p, V) == 5);
    CHECK(compare(z, V, 1.0f, 5, 1.0f, 0.0f) == 5);
    /* Ties at the cut: equal logits everywhere, so the five lowest ids must be kept. */
    for (int i = 0; i < V; i++) z[i] = 0.5f;
    CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
    CHECK(survivors(p, V) == 5);
    for (int i = 0; i < 5; i++) CHECK_NEAR(p[i], 0.2, 1e-6);
}

static void top_k_counts_only_tokens_that_are_not_banned(void) {
    enum { V = 3000 };
    static float z[V], p[V];
    for (int i = 0; i < V; i++) z[i] = -INFINITY;
    z[2999] = 1.0f;
    z[7] = 2.0f;
    z[1500] = 1.0f;
    wb_sampling_params sp = wb_sampling_default_params();
    sp.top_k = 10;
    wb_err err = {0};
    CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
    CHECK(survivors(p, V) == 3 && p[7] > p[1500] && p[1500] == p[2999]);
    /* Rising logits: every block raises the threshold, the worst case for the buffer. */
    for (int i = 0; i < V; i++) z[i] = (float)i * 0.01f;
    sp.top_k = 100;
    CHECK(compare(z, V, 1.0f, 100, 1.0f, 0.0f) == 100);
    for (int i = 0; i < V; i++) z[i] = (float)(V - i) * 0.01f;
    CHECK(compare(z, V, 1.0f, 100, 1.0f, 0.0f) == 100);
}

static void filters_never_remove_the_most_likely_token(void) {
    enum { V = 1000 };
    static float z[V], p[V];
    wb_err err = {0};
    for (unsigned seed = 1; seed <= 20; seed++) {
        random_logits(z, V, seed, 0.01 * seed); /* from nearly flat to peaked */
        int am = wb_sampling_argmax(z, V);
        wb_sampling_params sp = wb_sampling_default_params();
        sp.top_p = 1e-6f;
        CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
        CHECK(p[am] == 1.0f && survivors(p, V) == 1);
        sp = wb_sampling_default_params();
        sp.min_p = 1.0f;
        CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
        CHECK(p[am] > 0);
        sp = wb_sampling_default_params();
        sp.top_k = 1;
        sp.top_p = 0.01f;
        sp.min_p = 0.99f;
        sp.temperature = 5.0f;
        CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
        CHECK(p[am] == 1.0f);
    }
}

static void a_large_vocabulary_matches_the_reference(void) {
    enum { V = 150000 };
    float *z = malloc(V * sizeof *z);
    random_logits(z, V, 11, 2.5);
    compare(z, V, 0.8f, 40, 0.95f, 0.0f);
    compare(z, V, 1.0f, 0, 0.9f, 0.0f);
    compare(z, V, 1.0f, 0, 1.0f, 0.02f);
    free(z);
}

static void greedy_is_one_hot_and_ties_go_to_the_lowest_id(void) {
    float z[6] = {0.0f, 3.0f, -1.0f, 3.0f, 2.0f, 3.0f};
    float p[6];
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    wb_err err = {0};
    CHECK(wb_sampling_apply(z, 6, &sp, NULL, 0, p, &err) == WB_OK);
    CHECK(p[1] == 1.0f && survivors(p, 6) == 1);
    wb_sampler *s = NULL;
    CHECK(wb_sampler_new(&sp, 6, &s, &err) == WB_OK);
    int32_t id = -1;
    for (int i = 0; i < 10; i++) {
        CHECK(wb_sampler_sample(s, z, NULL, 0, NULL, &id, NULL, &err) == WB_OK);
        CHECK(id == 1);
    }
    wb_sampler_free(s);
    CHECK(wb_sampling_argmax(z, 6) == 1);
}

static void penalties_follow_the_documented_formulas(void) {
    /* Token 0: positive logit, seen twice; token 1: negative, seen once; 2: unseen. */
    float z[4] = {2.0f, -1.0f, 0.5f, 0.0f};
    int32_t gen[3] = {0, 1, 0};
    wb_sampling_params sp = wb_sampling_default_params();
    sp.repetition_penalty = 2.0f;
    sp.frequency_penalty = 0.25f;
    sp.presence_penalty = 0.5f;
    float adj[4] = {2.0f / 2 - 2 * 0.25f - 0.5f, -1.0f * 2 - 0.25f - 0.5f, 0.5f, 0.0f};
    float p[4];
    double q[4];
    wb_err err = {0};
    CHECK(wb_sampling_apply(z, 4, &sp, gen, 3, p, &err) == WB_OK);
    reference(adj, 4, 1.0, 0, 1.0, 0.0, q);
    CHECK(max_abs_diff(p, q, 4) < 1e-6);
    /* Penalties come before temperature: the adjusted logits are what T divides. */
    sp.temperature = 0.5f;
    CHECK(wb_sampling_apply(z, 4, &sp, gen, 3, p, &err) == WB_OK);
    reference(adj, 4, 0.5, 0, 1.0, 0.0, q);
    CHECK(max_abs_diff(p, q, 4) < 1e-6);
    /* A generated id outside the vocabulary is an error naming it. */
    int32_t bad[2] = {1, 9};
    CHECK(wb_sampling_apply(z, 4, &sp, bad, 2, p, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "generated ids[1]");
}

static void logit_bias_adds_and_minus_infinity_bans(void) {
    float z[5] = {1.0f, 2.0f, 3.0f, 0.0f, 0.0f};
    wb_logit_bias b[3] = {{2, -INFINITY}, {3, 1.5f}, {3, 0.5f}};
    wb_sampling_params sp = wb_sampling_default_params();
    sp.logit_bias = b;
    sp.n_logit_bias = 3;
    float p[5];
    double q[5];
    float adj[5] = {1.0f, 2.0f, -INFINITY, 2.0f, 0.0f};
    wb_err err = {0};
    CHECK(wb_sampling_apply(z, 5, &sp, NULL, 0, p, &err) == WB_OK);
    reference(adj, 5, 1.0, 0, 1.0, 0.0, q);
    CHECK(p[2] == 0.0f);
    CHECK(max_abs_diff(p, q, 5) < 1e-6);
    sp.temperature = 0; /* the ban also applies to greedy, and the tie 1/3 goes to id 1 */
    CHECK(wb_sampling_apply(z, 5, &sp, NULL, 0, p, &err) == WB_OK);
    CHECK(p[1] == 1.0f);
    wb_logit_bias all[5] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {3, -INFINITY},
                            {4, -INFINITY}};
    sp.logit_bias = all;
    sp.n_logit_bias = 5;
    CHECK(wb_sampling_apply(z, 5, &sp, NULL, 0, p, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "banned");
}

static void the_allowed_mask_removes_tokens_before_the_filters(void) {
    enum { V = 70 };
    float z[V], p[V];
    random_logits(z, V, 3, 1.0);
    uint32_t mask[3] = {0, 0, 0};
    mask[1] |= 1u << 5;  /* id 37 */
    mask[2] |= 1u << 1;  /* id 65 */
    wb_sampling_params sp = wb_sampling_default_params();
    wb_sampler *s = NULL;
    wb_err err = {0};
    CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
    CHECK(wb_sampler_apply(s, z, NULL, 0, mask, p, &err) == WB_OK);
    CHECK(survivors(p, V) == 2 && p[37] > 0 && p[65] > 0);
    CHECK_NEAR(p[37] + p[65], 1.0, 1e-6);
    wb_sampler_free(s);
}

static void the_same_seed_gives_the_same_draws(void) {
    enum { V = 512 };
    static float z[V], p[V];
    random_logits(z, V, 5, 1.0);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.seed = 1234;
    sp.has_seed = 1;
    sp.top_p = 0.95f;
    wb_sampler *a = NULL, *b = NULL, *c = NULL;
    wb_err err = {0};
    CHECK(wb_sampler_new(&sp, V, &a, &err) == WB_OK);
    CHECK(wb_sampler_new(&sp, V, &b, &err) == WB_OK);
    sp.seed = 1235;
    CHECK(wb_sampler_new(&sp, V, &c, &err) == WB_OK);
    CHECK(wb_sampler_seed(a) == 1234);
    int differs = 0;
    wb_rng mirror;
    wb_rng_seed(&mirror, 1234);
    CHECK(wb_sampler_apply(a, z, NULL, 0, NULL, p, &err) == WB_OK);
    for (int i = 0; i < 200; i++) {
        int32_t x, y, w;
        CHECK(wb_sampler_sample(a, z, NULL, 0, NULL, &x, NULL, &err) == WB_OK);
        CHECK(wb_sampler_sample(b, z, NULL, 0, NULL, &y, NULL, &err) == WB_OK);
        CHECK(wb_sampler_sample(c, z, NULL, 0, NULL, &w, NULL, &err) == WB_OK);
        CHECK(x == y);
        differs += x != w;
        /* sample == draw(apply) with the same RNG stream. */
        CHECK(wb_sampling_draw(p, V, &mirror) == x);
    }
    CHECK(differs > 50);
    wb_sampler_free(a);
    wb_sampler_free(b);
    wb_sampler_free(c);
    /* PCG32 is pinned: the first outputs for seed 42 never change across versions. */
    wb_rng r1, r2;
    wb_rng_seed(&r1, 42);
    wb_rng_seed(&r2, 42);
    for (int i = 0; i < 5; i++) CHECK(wb_rng_u32(&r1) == wb_rng_u32(&r2));
    /* No seed: one is drawn and reported. */
    sp.has_seed = 0;
    wb_sampler *d = NULL, *e = NULL;
    CHECK(wb_sampler_new(&sp, V, &d, &err) == WB_OK);
    CHECK(wb_sampler_new(&sp, V, &e, &err) == WB_OK);
    CHECK(wb_sampler_seed(d) != wb_sampler_seed(e));
    wb_sampler_free(d);
    wb_sampler_free(e);
}

static void draws_follow_the_distribution(void) {
    float z[4] = {0.0f, 1.0f, 2.0f, -30.0f};
    wb_sampling_params sp = wb_sampling_default_params();
    sp.seed = 9;
    sp.has_seed = 1;
    float p[4];
    wb_err err = {0};
    wb_sampler *s = NULL;
    CHECK(wb_sampler_new(&sp, 4, &s, &err) == WB_OK);
    CHECK(wb_sampler_apply(s, z, NULL, 0, NULL, p, &err) == WB_OK);
    int counts[4] = {0};
    const int N = 40000;
    for (int i = 0; i < N; i++) {
        int32_t id;
        float pp;
        CHECK(wb_sampler_sample(s, z, NULL, 0, NULL, &id, &pp, &err) == WB_OK);
        counts[id]++;
    }
    for (int i = 0; i < 3; i++) {
        double sd = sqrt(N * p[i] * (1 - p[i]));
        CHECK_MSG(fabs(counts[i] - N * p[i]) < 5 * sd, "id %d: %d draws, expected %.0f", i,
                  counts[i], N * p[i]);
    }
    wb_sampler_free(s);
}

static void bad_parameters_are_errors_naming_the_field(void) {
    float p[8];
    float z[8] = {0};
    wb_err err = {0};
    wb_sampling_params sp;
#define EXPECT_BAD(stmt, needle)                                                          \
    do {                                                                                  \
        sp = wb_sampling_default_params();                                                \
        stmt;                                                                             \
        err.msg[0] = 0;                                                                   \
        CHECK(wb_sampling_params_check(&sp, 8, &err) != WB_OK);                           \
        CHECK_ERR_MENTIONS(err.msg, needle);                                              \
        CHECK(wb_sampling_apply(z, 8, &sp, NULL, 0, p, &err) != WB_OK);                   \
    } while (0)
    EXPECT_BAD(sp.temperature = -0.1f, "temperature");
    EXPECT_BAD(sp.temperature = NAN, "temperature");
    EXPECT_BAD(sp.temperature = INFINITY, "temperature");
    EXPECT_BAD(sp.top_p = 0.0f, "top_p");
    EXPECT_BAD(sp.top_p = 1.5f, "top_p");
    EXPECT_BAD(sp.top_p = NAN, "top_p");
    EXPECT_BAD(sp.min_p = -0.1f, "min_p");
    EXPECT_BAD(sp.min_p = 1.01f, "min_p");
    EXPECT_BAD(sp.min_p = NAN, "min_p");
    EXPECT_BAD(sp.top_k = -1, "top_k");
    EXPECT_BAD(sp.frequency_penalty = NAN, "frequency_penalty");
    EXPECT_BAD(sp.presence_penalty = INFINITY, "presence_penalty");
    EXPECT_BAD(sp.repetition_penalty = 0.0f, "repetition_penalty");
    EXPECT_BAD(sp.max_tokens = 0, "max_tokens");
    static const wb_logit_bias far[1] = {{8, 1.0f}};
    EXPECT_BAD((sp.logit_bias = far, sp.n_logit_bias = 1), "logit_bias");
    static const wb_logit_bias nan_bias[1] = {{2, NAN}};
    EXPECT_BAD((sp.logit_bias = nan_bias, sp.n_logit_bias = 1), "logit_bias");
    static const char *const empty_stop[1] = {""};
    EXPECT_BAD((sp.stop = empty_stop, sp.n_stop = 1), "stop[0]");
    static const int32_t far_ids[2] = {1, 99};
    EXPECT_BAD((sp.stop_token_ids = far_ids, sp.n_stop_token_ids = 2), "stop_token_ids[1]");
    /* NaN logits are refused rather than sampled from. */
    sp = wb_sampling_default_params();
    z[3] = NAN;
    CHECK(wb_sampling_apply(z, 8, &sp, NULL, 0, p, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "logits[3]");
    /* Edges that are valid. */
    sp.top_p = 1.0f;
    sp.min_p = 1.0f;
    sp.temperature = 0.0f;
    CHECK(wb_sampling_params_check(&sp, 8, &err) == WB_OK);
    wb_sampler_free(NULL);
}

/* ---- the vectorised fast paths ------------------------------------------------------------ */

/* Apply and 64 seeded draws with the AVX2 build and with the portable one: the same bits. */
static void the_vector_and_portable_builds_agree_bit_for_bit(void) {
    static const int Vs[] = {2048, 2053, 150000};
    int32_t gen[40];
    for (int i = 0; i < 40; i++) gen[i] = (i * 37) % 1500;
    wb_logit_bias bias[4] = {{3, -INFINITY}, {97, 0.5f}, {194, 2.0f}, {1999, -1.0f}};
    for (int v = 0; v < 3; v++) {
        const int V = Vs[v];
        float *z = malloc((size_t)V * sizeof *z);
        float *pa = malloc((size_t)V * sizeof *pa), *pb = malloc((size_t)V * sizeof *pb);
        random_logits(z, V, 21 + (unsigned)v, 3.0);
        for (int mode = 0; mode < 6; mode++) {
            wb_sampling_params sp = wb_sampling_default_params();
            sp.seed = 77;
            sp.has_seed = 1;
            size_t ng = 0;
            if (mode == 0) sp.temperature = 0;
            if (mode >= 1) sp.temperature = 0.8f;
            if (mode == 2) sp.top_p = 0.95f;
            if (mode == 3) sp.min_p = 0.01f;
            if (mode == 4) sp.top_p = 0.5f, sp.min_p = 0.001f;
            if (mode == 5) {
                sp.top_k = 40, sp.top_p = 0.95f, sp.min_p = 0.05f;
                sp.repetition_penalty = 1.1f, sp.frequency_penalty = 0.3f;
                sp.presence_penalty = 0.2f, sp.logit_bias = bias, sp.n_logit_bias = 4, ng = 40;
            }
            int32_t ida[64], idb[64];
            wb_err err = {0};
            for (int build = 0; build < 2; build++) {
                wb_sampler_force_scalar(build);
                wb_sampler *s = NULL;
                CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
                CHECK(wb_sampler_apply(s, z, gen, ng, NULL, build ? pb : pa, &err) == WB_OK);
                for (int i = 0; i < 64; i++)
                    CHECK(wb_sampler_sample(s, z, gen, ng, NULL, build ? &idb[i] : &ida[i], NULL,
                                            &err) == WB_OK);
                wb_sampler_free(s);
            }
            wb_sampler_force_scalar(0);
            CHECK_MSG(memcmp(pa, pb, (size_t)V * sizeof *pa) == 0, "V=%d mode %d: apply differs",
                      V, mode);
            CHECK_MSG(memcmp(ida, idb, sizeof ida) == 0, "V=%d mode %d: draws differ", V, mode);
        }
        free(z);
        free(pa);
        free(pb);
    }
}

/* Greedy is one pass: the argmax of the adjusted, masked logits, lowest id among ties, wherever
 * the ties sit (vector lanes, the two accumulators, the scalar tail). */
static void fast_greedy_matches_the_plain_argmax(void) {
    enum { V = 150007 };
    float *z = malloc(V * sizeof *z), *adj = malloc(V * sizeof *adj);
    random_logits(z, V, 5, 2.0);
    static const int32_t spots[][2] = {{5, 9}, {16, 8}, {140000, 150006}, {150001, 150003},
                                       {7, 150005}, {100, 3}};
    wb_err err = {0};
    for (int build = 0; build < 2; build++) {
        wb_sampler_force_scalar(build);
        for (int t = 0; t < 6; t++) {
            memcpy(adj, z, V * sizeof *z);
            adj[spots[t][0]] = adj[spots[t][1]] = 40.0f;
            wb_sampling_params sp = wb_sampling_default_params();
            sp.temperature = 0;
            wb_sampler *s = NULL;
            CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
            int32_t id = -1;
            CHECK(wb_sampler_sample(s, adj, NULL, 0, NULL, &id, NULL, &err) == WB_OK);
            int32_t lo = spots[t][0] < spots[t][1] ? spots[t][0] : spots[t][1];
            CHECK_MSG(id == lo, "ties at %d and %d: picked %d", spots[t][0], spots[t][1], id);
            CHECK(wb_sampling_argmax(adj, V) == lo);
            wb_sampler_free(s);
        }
        /* -0 and +0 tie; a bias that lifts a token; a ban on the argmax. */
        for (int i = 0; i < V; i++) adj[i] = -1.0f;
        adj[70000] = -0.0f;
        adj[80000] = 0.0f;
        wb_sampling_params sp = wb_sampling_default_params();
        sp.temperature = 0;
        int32_t id = -1;
        wb_sampler *s = NULL;
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        CHECK(wb_sampler_sample(s, adj, NULL, 0, NULL, &id, NULL, &err) == WB_OK && id == 70000);
        wb_sampler_free(s);
        wb_logit_bias b[2] = {{70000, -INFINITY}, {123, 1.5f}};
        sp.logit_bias = b;
        sp.n_logit_bias = 2;
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        CHECK(wb_sampler_sample(s, adj, NULL, 0, NULL, &id, NULL, &err) == WB_OK && id == 123);
        wb_sampler_free(s);
        /* Invalid logits are still found, in the body and in the tail. */
        sp = wb_sampling_default_params();
        sp.temperature = 0;
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        adj[150006] = NAN;
        CHECK(wb_sampler_sample(s, adj, NULL, 0, NULL, &id, NULL, &err) == WB_ERR_ARG);
        CHECK_ERR_MENTIONS(err.msg, "logits[150006] is NaN");
        adj[150006] = 0;
        adj[4242] = INFINITY;
        CHECK(wb_sampler_sample(s, adj, NULL, 0, NULL, &id, NULL, &err) == WB_ERR_ARG);
        CHECK_ERR_MENTIONS(err.msg, "logits[4242] is +inf");
        wb_sampler_free(s);
        sp.temperature = 1.0f;
        sp.top_k = 40;
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        CHECK(wb_sampler_sample(s, adj, NULL, 0, NULL, &id, NULL, &err) == WB_ERR_ARG);
        CHECK_ERR_MENTIONS(err.msg, "logits[4242] is +inf");
        wb_sampler_free(s);
    }
    wb_sampler_force_scalar(0);
    free(z);
    free(adj);
}

/* top_p without top_k finds its cut by a radix select: check it on ties at the cut, few and
 * many (a bucket of more than 64 equal weights), against the sorting reference. */
static void top_p_without_top_k_breaks_ties_like_the_sort(void) {
    enum { V = 5000 };
    static float z[V], p[V];
    wb_err err = {0};
    for (int i = 0; i < V; i++) z[i] = 0.5f;
    wb_sampling_params sp = wb_sampling_default_params();
    sp.top_p = 0.5f;
    CHECK(wb_sampling_apply(z, V, &sp, NULL, 0, p, &err) == WB_OK);
    CHECK(survivors(p, V) == V / 2);
    CHECK(p[0] > 0 && p[V / 2 - 1] > 0 && p[V / 2] == 0);
    for (int levels = 3; levels <= 400; levels *= 4) {
        for (int i = 0; i < V; i++) z[i] = (float)((i * 7919) % levels) * (4.0f / levels);
        const float tps[] = {0.3f, 0.9f, 0.95f, 0.999f};
        for (int t = 0; t < 4; t++) {
            compare(z, V, 1.0f, 0, tps[t], 0.0f);
            compare(z, V, 0.5f, 0, tps[t], 0.01f);
        }
    }
}

/* The dense draw (zero runs skipped, sums in four lanes) is the draw over apply's vector. */
static void dense_draws_equal_draws_from_apply(void) {
    enum { V = 150000 };
    float *z = malloc(V * sizeof *z), *p = malloc(V * sizeof *p);
    random_logits(z, V, 8, 3.0);
    const float tps[] = {1.0f, 0.95f, 0.3f};
    for (int t = 0; t < 3; t++) {
        wb_sampling_params sp = wb_sampling_default_params();
        sp.seed = 99;
        sp.has_seed = 1;
        sp.temperature = 0.8f;
        sp.top_p = tps[t];
        wb_sampler *s = NULL;
        wb_err err = {0};
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        CHECK(wb_sampler_apply(s, z, NULL, 0, NULL, p, &err) == WB_OK);
        double sum = 0;
        for (int i = 0; i < V; i++) sum += p[i];
        CHECK_NEAR(sum, 1.0, 1e-6);
        wb_rng mirror;
        wb_rng_seed(&mirror, 99);
        for (int i = 0; i < 50; i++) {
            int32_t id;
            float pp;
            CHECK(wb_sampler_sample(s, z, NULL, 0, NULL, &id, &pp, &err) == WB_OK);
            CHECK(wb_sampling_draw(p, V, &mirror) == id);
            CHECK(pp == p[id]);
        }
        wb_sampler_free(s);
    }
    free(z);
    free(p);
}

/* min_tokens bans the end ids while fewer tokens are generated, on the dense path and on the
 * sparse (few allowed ids) path alike: the same distribution as logit_bias = -inf on them. */
static void min_tokens_bans_end_ids_like_a_minus_infinity_bias(void) {
    enum { V = 300 };
    float z[V], pa[V], pb[V];
    random_logits(z, V, 77, 3.0);
    const int32_t ends[2] = {5, 17};
    z[5] = 9.0f; /* the end ids are the most likely tokens */
    z[17] = 8.5f;
    int32_t gen[3] = {1, 2, 3};
    uint32_t sparse[(V + 31) / 32] = {0};
    for (int i = 0; i < 20; i++) sparse[i >> 5] |= 1u << (i & 31); /* ids 0..19: sparse path */
    for (int use_mask = 0; use_mask <= 1; use_mask++)
        for (size_t n_gen = 0; n_gen <= 3; n_gen++) {
            wb_err err = {0};
            wb_sampling_params p = wb_sampling_default_params();
            p.temperature = 0.9f;
            p.min_tokens = 2;
            p.max_tokens = 8;
            p.has_seed = 1;
            wb_sampler *s = NULL;
            CHECK(wb_sampler_new(&p, V, &s, &err) == WB_OK);
            CHECK(wb_sampler_set_end_ids(s, ends, 2, &err) == WB_OK);
            CHECK(wb_sampler_apply(s, z, gen, n_gen, use_mask ? sparse : NULL, pa, &err) == WB_OK);
            wb_sampler_free(s);
            wb_sampling_params q = wb_sampling_default_params();
            q.temperature = 0.9f;
            q.has_seed = 1;
            wb_logit_bias bans[2] = {{5, -INFINITY}, {17, -INFINITY}};
            if (n_gen < 2) {
                q.logit_bias = bans;
                q.n_logit_bias = 2;
            }
            CHECK(wb_sampler_new(&q, V, &s, &err) == WB_OK);
            CHECK(wb_sampler_apply(s, z, gen, n_gen, use_mask ? sparse : NULL, pb, &err) == WB_OK);
            wb_sampler_free(s);
            for (int i = 0; i < V; i++)
                CHECK_MSG(fabsf(pa[i] - pb[i]) < 1e-7f, "mask %d n_gen %zu id %d: %g vs %g",
                          use_mask, n_gen, i, (double)pa[i], (double)pb[i]);
            CHECK((n_gen < 2) == (pa[5] == 0.0f));
        }
    wb_err err = {0};
    wb_sampling_params p = wb_sampling_default_params();
    p.min_tokens = 9;
    p.max_tokens = 8;
    CHECK(wb_sampling_params_check(&p, V, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "min_tokens");
}

/* typical_p keeps the same set on the sparse path (a mask allowing few ids) as on the dense one. */
static void typical_p_is_the_same_on_the_sparse_and_dense_paths(void) {
    enum { V = 256 };
    float z[V], pa[V], pb[V];
    random_logits(z, V, 5, 2.0);
    uint32_t few[V / 32] = {0};
    for (int i = 0; i < V; i += 13) few[i >> 5] |= 1u << (i & 31);
    float zm[V];
    for (int i = 0; i < V; i++) zm[i] = (few[i >> 5] >> (i & 31) & 1u) ? z[i] : -INFINITY;
    wb_err err = {0};
    wb_sampling_params p = wb_sampling_default_params();
    p.typical_p = 0.6f;
    CHECK(wb_sampling_apply(zm, V, &p, NULL, 0, pa, &err) == WB_OK); /* dense over banned logits */
    wb_sampler *s = NULL;
    p.has_seed = 1;
    CHECK(wb_sampler_new(&p, V, &s, &err) == WB_OK);
    CHECK(wb_sampler_apply(s, z, NULL, 0, few, pb, &err) == WB_OK); /* sparse candidates */
    wb_sampler_free(s);
    int kept = 0, allowed = 0;
    for (int i = 0; i < V; i++) {
        CHECK_MSG(fabsf(pa[i] - pb[i]) < 1e-6f, "id %d: %g vs %g", i, (double)pa[i], (double)pb[i]);
        kept += pa[i] > 0;
        allowed += zm[i] > -INFINITY;
    }
    CHECK(kept >= 1 && kept < allowed);
}

int main(void) {
    RUN(temperature_one_is_the_plain_softmax);
    RUN(each_filter_matches_the_reference);
    RUN(top_k_five_leaves_exactly_five);
    RUN(top_k_counts_only_tokens_that_are_not_banned);
    RUN(filters_never_remove_the_most_likely_token);
    RUN(a_large_vocabulary_matches_the_reference);
    RUN(greedy_is_one_hot_and_ties_go_to_the_lowest_id);
    RUN(penalties_follow_the_documented_formulas);
    RUN(logit_bias_adds_and_minus_infinity_bans);
    RUN(the_allowed_mask_removes_tokens_before_the_filters);
    RUN(the_same_seed_gives_the_same_draws);
    RUN(draws_follow_the_distribution);
    RUN(bad_parameters_are_errors_naming_the_field);
    RUN(the_vector_and_portable_builds_agree_bit_for_bit);
    RUN(fast_greedy_matches_the_plain_argmax);
    RUN(top_p_without_top_k_breaks_ties_like_the_sort);
    RUN(dense_draws_equal_draws_from_apply);
    RUN(min_tokens_bans_end_ids_like_a_minus_infinity_bias);
    RUN(typical_p_is_the_same_on_the_sparse_and_dense_paths);
    return check_summary();
}
