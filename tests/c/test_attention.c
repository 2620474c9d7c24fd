/* test_attention.c - the attention kernels (core/kernels_attention.c): every level this CPU
 * supports against the portable one on the same inputs, and the portable one against a plain
 * double-precision loop.
 *
 * Shapes: head sizes that are and are not multiples of 8 and 16, GQA groups of 1, 2 and 7 query
 * heads per KV head, first positions and query counts off any block, no window and windows
 * shorter than, equal to and longer than the context; rows of q, out, k and v with padding
 * between them (lds that are not the head width), and an unaligned scratch.
 *
 * Tolerance: an output is a convex combination of values in [-1, 1], with weights from scores of
 * magnitude up to ~8 whose float dot products and polynomial exp differ from double by ~1e-6
 * relative; 3e-5 absolute is well above that rounding and far below what a masking or scaling
 * mistake moves (a wrong key in or out of a row changes its output by ~1e-2 or more).
 */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"
#include "model_internal.h"

#define TOL 3e-5

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

typedef struct shape {
    int hs, ng, pos, nq, window;
} shape;

/* out[i, g] for query i (position pos + i), head g, in double: softmax over keys k0..p */
static void reference(double *out, const shape *s, const float *q, size_t ldq, const float *k,
                      const float *v, size_t ldkv) {
    double *w = malloc(sizeof(double) * (size_t)(s->pos + s->nq));
    const double scale = 1.0 / sqrt((double)s->hs);
    for (int i = 0; i < s->nq; i++)
        for (int g = 0; g < s->ng; g++) {
            const int p = s->pos + i;
            const int k0 = s->window && p - s->window + 1 > 0 ? p - s->window + 1 : 0;
            const float *qr = q + (size_t)i * ldq + (size_t)g * s->hs;
            double mx = -HUGE_VAL, sum = 0;
            for (int t = k0; t <= p; t++) {
                double d = 0;
                for (int c = 0; c < s->hs; c++) d += (double)qr[c] * k[(size_t)t * ldkv + c];
                w[t] = d * scale;
                if (w[t] > mx) mx = w[t];
            }
            for (int t = k0; t <= p; t++) sum += (w[t] = exp(w[t] - mx));
            double *o = out + ((size_t)i * s->ng + g) * s->hs;
            for (int c = 0; c < s->hs; c++) {
                double acc = 0;
                for (int t = k0; t <= p; t++) acc += w[t] / sum * v[(size_t)t * ldkv + c];
                o[c] = acc;
            }
        }
    free(w);
}

/* One shape on every level: returns the number of outputs off (and checks that nothing outside
 * the outputs was written and that q, k, v are unchanged). */
static int run_shape(const shape *s) {
    const int P = s->pos + s->nq, hs = s->hs, ng = s->ng;
    const size_t ldq = (size_t)ng * hs + 3, ldo = (size_t)ng * hs + 5;
    const size_t ldkv = (size_t)hs * 2 + 7; /* two KV heads side by side; the test reads the 2nd */
    const size_t nqf = (size_t)s->nq * ldq, nof = (size_t)s->nq * ldo, nkv = (size_t)P * ldkv;
    float *q = malloc(sizeof(float) * nqf), *k = malloc(sizeof(float) * nkv);
    float *v = malloc(sizeof(float) * nkv), *out = malloc(sizeof(float) * nof);
    float *want = malloc(sizeof(float) * nof);
    float *q0 = malloc(sizeof(float) * nqf), *k0 = malloc(sizeof(float) * nkv);
    float *v0 = malloc(sizeof(float) * nkv);
    double *ref = malloc(sizeof(double) * (size_t)s->nq * ng * hs);
    /* queries scaled so that scores reach ~8: softmax rows from flat to peaked */
    const float qs = 3.0f * 8.0f / sqrtf((float)hs);
    for (size_t i = 0; i < nqf; i++) q[i] = frand() * qs;
    for (size_t i = 0; i < nkv; i++) k[i] = frand(), v[i] = frand();
    memcpy(q0, q, sizeof(float) * nqf), memcpy(k0, k, sizeof(float) * nkv);
    memcpy(v0, v, sizeof(float) * nkv);
    const float *kh = k + hs + 7, *vh = v + hs + 7; /* KV head 1 */
    reference(ref, s, q, ldq, kh, vh, ldkv);
    const size_t nsc = wb_attention_block_scratch(s->pos, s->nq, hs) + 1;
    float *scr = malloc(sizeof(float) * nsc);
    int bad = 0;
    for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
        for (size_t i = 0; i < nof; i++) out[i] = 1234.5f; /* a sentinel in the gaps */
        wb_isa old = wb_isa_limit((wb_isa)lv);
        wb_attention_block_forward(out, ldo, q, ldq, kh, vh, ldkv, s->pos, s->nq, ng, hs,
                                   s->window, scr + 1);
        wb_isa_limit(old);
        int off = 0, gaps = 0;
        for (int i = 0; i < s->nq; i++) {
            for (int g = 0; g < ng; g++)
                for (int c = 0; c < hs; c++) {
                    const float got = out[(size_t)i * ldo + (size_t)g * hs + c];
                    const double r = ref[((size_t)i * ng + g) * hs + c];
                    off += !(fabs(got - r) <= TOL);
                    if (lv > 0)
                        off += !(fabs(got - want[(size_t)i * ldo + (size_t)g * hs + c]) <= TOL);
                }
            for (size_t c = (size_t)ng * hs; c < ldo; c++) gaps += out[(size_t)i * ldo + c] != 1234.5f;
        }
        if (lv == 0) memcpy(want, out, sizeof(float) * nof);
        CHECK_MSG(!off && !gaps, "%s hs %d ng %d pos %d nq %d window %d: %d off, %d gap writes",
                  wb_isa_name((wb_isa)lv), hs, ng, s->pos, s->nq, s->window, off, gaps);
        CHECK(!memcmp(q, q0, sizeof(float) * nqf) && !memcmp(k, k0, sizeof(float) * nkv) &&
              !memcmp(v, v0, sizeof(float) * nkv));
        bad += off + gaps;
    }
    free(q), free(k), free(v), free(out), free(want), free(q0), free(k0), free(v0), free(ref);
    free(scr);
    return bad;
}

static void blocks_of_queries_match_portable_and_double_on_every_level(void) {
    const int hss[] = {64, 128, 13, 40, 8, 80};
    const int ngs[] = {1, 2, 7};
    const int pq[][2] = {{0, 2}, {0, 16}, {5, 3}, {37, 16}, {100, 45}, {3, 29}, {61, 1}};
    const int windows[] = {0, 1, 7, 40, 4096};
    int cases = 0, bad = 0;
    for (size_t a = 0; a < sizeof hss / sizeof *hss; a++)
        for (size_t b = 0; b < sizeof ngs / sizeof *ngs; b++)
            for (size_t c = 0; c < sizeof pq / sizeof *pq; c++)
                for (size_t d = 0; d < sizeof windows / sizeof *windows; d++) {
                    shape s = {hss[a], ngs[b], pq[c][0], pq[c][1], windows[d]};
                    bad += run_shape(&s);
                    cases++;
                }
    printf("     %d shapes, levels portable..%s\n", cases, wb_isa_name(wb_isa_best()));
    CHECK(bad == 0);
}

/* A long context: key blocks of the score tiles and the window edge far from position 0. */
static void a_long_prompt_with_a_window_matches(void) {
    shape s1 = {64, 7, 700, 37, 0}, s2 = {64, 7, 700, 37, 333}, s3 = {128, 4, 0, 300, 64};
    CHECK(run_shape(&s1) == 0);
    CHECK(run_shape(&s2) == 0);
    CHECK(run_shape(&s3) == 0);
}

/* The one-query kernel (decode) on every level against portable, at odd head sizes. */
static void one_query_matches_portable_on_every_level(void) {
    const int hss[] = {64, 13, 128, 40};
    for (size_t a = 0; a < sizeof hss / sizeof *hss; a++) {
        const int hs = hss[a], P = 203;
        const size_t ld = (size_t)hs + 9;
        float *k = malloc(sizeof(float) * P * ld), *v = malloc(sizeof(float) * P * ld);
        float q[128], want[128], got[128], att[256];
        for (size_t i = 0; i < (size_t)P * ld; i++) k[i] = frand(), v[i] = frand();
        for (int i = 0; i < hs; i++) q[i] = frand() * 3.0f;
        for (int p = 0; p < P; p += 29) {
            wb_isa old = wb_isa_limit(WB_ISA_PORTABLE);
            wb_attention_forward(want, q, k, v, ld, p, hs, att);
            wb_isa_limit(old);
            for (int lv = 1; lv <= (int)wb_isa_best(); lv++) {
                old = wb_isa_limit((wb_isa)lv);
                wb_attention_forward(got, q, k, v, ld, p, hs, att);
                wb_isa_limit(old);
                int off = 0;
                for (int i = 0; i < hs; i++) off += !(fabsf(got[i] - want[i]) <= TOL);
                CHECK_MSG(!off, "%s hs %d p %d: %d off", wb_isa_name((wb_isa)lv), hs, p, off);
            }
        }
        free(k), free(v);
    }
}

/* A query's output does not depend on how many queries share its pass (bit for bit: the zero
 * weights a tile adds for its other rows' keys add exact zeros), and the first query, which sees
 * one key, gets exactly that key's value, as from the one-query kernel: a prompt's logits at
 * position k - 1 are then the same from a pass of k rows and from the whole prompt
 * (scripts/batch_variance.lua checks that on TinyLM). */
static void a_query_gets_the_same_bits_in_any_block(void) {
    enum { HS = 64, NG = 7, N = 30 };
    const size_t ld = (size_t)NG * HS;
    float *q = malloc(sizeof(float) * N * ld), *k = malloc(sizeof(float) * N * HS);
    float *v = malloc(sizeof(float) * N * HS), *full = malloc(sizeof(float) * N * ld);
    float *part = malloc(sizeof(float) * N * ld);
    float *scr = malloc(sizeof(float) * wb_attention_block_scratch(0, N, HS));
    for (size_t i = 0; i < (size_t)N * ld; i++) q[i] = frand() * 3.0f;
    for (size_t i = 0; i < (size_t)N * HS; i++) k[i] = frand(), v[i] = frand();
    for (int lv = 0; lv <= (int)wb_isa_best(); lv++) {
        wb_isa old = wb_isa_limit((wb_isa)lv);
        for (int ng = 1; ng <= NG; ng += NG - 1) {
            wb_attention_block_forward(full, ld, q, ld, k, v, HS, 0, N, ng, HS, 0, scr);
            for (int c = 0; c < ng * HS; c++) CHECK(full[c] == v[c % HS]);
            for (int n = 2; n <= N; n += 3) {
                wb_attention_block_forward(part, ld, q, ld, k, v, HS, 0, n, ng, HS, 0, scr);
                CHECK_MSG(!memcmp(part + (size_t)(n - 1) * ld, full + (size_t)(n - 1) * ld,
                                  sizeof(float) * ng * HS),
                          "%s ng %d: query %d of a block of %d", wb_isa_name((wb_isa)lv), ng,
                          n - 1, n);
            }
        }
        wb_isa_limit(old);
    }
    free(q), free(k), free(v), free(full), free(part), free(scr);
}

/* Each level above portable registers its own kernels (a file compiled without its x86 part
 * would leave every level on the portable ones and still pass the comparisons above). */
static void every_level_runs_its_own_attention_kernel(void) {
    for (int lv = 1; lv <= (int)wb_isa_best(); lv++) {
        wb_isa old = wb_isa_limit((wb_isa)lv);
        CHECK_MSG(strcmp(wb_kt()->name_attention, "portable") != 0, "%s", wb_isa_name((wb_isa)lv));
        wb_isa_limit(old);
    }
}

int main(void) {
    RUN(every_level_runs_its_own_attention_kernel);
    RUN(blocks_of_queries_match_portable_and_double_on_every_level);
    RUN(a_long_prompt_with_a_window_matches);
    RUN(one_query_matches_portable_on_every_level);
    RUN(a_query_gets_the_same_bits_in_any_block);
    return check_summary();
}
