/* sampler.c - sampling parameters, the filtered distribution and the seeded draw (wb_sampler.h). */
#include "wb_sampler.h"
#include "cpu.h"

#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ========================================== RNG ============================================ */

/* PCG32 (XSH-RR), as in O'Neill's reference pcg32_srandom_r / pcg32_random_r. The stream
 * constant is fixed so that a seed alone names the sequence. */
#define WB_PCG_MULT 6364136223846793005ULL
#define WB_PCG_STREAM 0xda3e39cb94b95bdbULL

uint32_t wb_rng_u32(wb_rng *rng) {
    uint64_t old = rng->state;
    rng->state = old * WB_PCG_MULT + rng->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

void wb_rng_seed(wb_rng *rng, uint64_t seed) {
    rng->state = 0;
    rng->inc = (WB_PCG_STREAM << 1u) | 1u;
    wb_rng_u32(rng);
    rng->state += seed;
    wb_rng_u32(rng);
}

double wb_rng_uniform(wb_rng *rng) {
    /* 27 + 26 bits, the genrand_res53 construction: every double in [0,1) on a 2^-53 grid. */
    uint32_t a = wb_rng_u32(rng) >> 5, b = wb_rng_u32(rng) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

uint64_t wb_rng_entropy_seed(void) {
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, &seed, sizeof seed);
        close(fd);
        if (got == (ssize_t)sizeof seed) return seed;
    }
    /* No urandom (chroot, sandbox): mix the clock with a stack address so two requests in the
     * same millisecond from different threads still differ. */
    double t = wb_clock_ms();
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    uintptr_t addr = (uintptr_t)&seed;
    seed = bits ^ ((uint64_t)addr * 0x9e3779b97f4a7c15ULL);
    seed ^= seed >> 31;
    return seed * 0xbf58476d1ce4e5b9ULL;
}

/* ======================================= parameters ======================================== */

wb_sampling_params wb_sampling_default_params(void) {
    wb_sampling_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.typical_p = 1.0f;
    p.repetition_penalty = 1.0f;
    p.max_tokens = 64;
    return p;
}

wb_status wb_sampling_params_check(const wb_sampling_params *p, int32_t vocab_size, wb_err *err) {
    if (!p) return wb_err_set(err, WB_ERR_ARG, "sampling params: NULL pointer");
    if (!isfinite(p->temperature) || p->temperature < 0)
        return wb_err_set(err, WB_ERR_ARG, "temperature = %g must be a finite number >= 0",
                          (double)p->temperature);
    if (p->top_k < 0)
        return wb_err_set(err, WB_ERR_ARG, "top_k = %d must be >= 0 (0 turns it off)",
                          (int)p->top_k);
    if (isnan(p->top_p) || !(p->top_p > 0 && p->top_p <= 1))
        return wb_err_set(err, WB_ERR_ARG, "top_p = %g is outside (0, 1]", (double)p->top_p);
    if (isnan(p->min_p) || !(p->min_p >= 0 && p->min_p <= 1))
        return wb_err_set(err, WB_ERR_ARG, "min_p = %g is outside [0, 1]", (double)p->min_p);
    if (isnan(p->typical_p) || !(p->typical_p > 0 && p->typical_p <= 1))
        return wb_err_set(err, WB_ERR_ARG, "typical_p = %g is outside (0, 1]", (double)p->typical_p);
    if (p->min_tokens < 0)
        return wb_err_set(err, WB_ERR_ARG, "min_tokens = %d must be >= 0 (0 turns it off)",
                          (int)p->min_tokens);
    if (p->min_tokens > p->max_tokens)
        return wb_err_set(err, WB_ERR_ARG, "min_tokens = %d exceeds max_tokens = %d",
                          (int)p->min_tokens, (int)p->max_tokens);
    if (!isfinite(p->frequency_penalty))
        return wb_err_set(err, WB_ERR_ARG, "frequency_penalty = %g must be finite",
                          (double)p->frequency_penalty);
    if (!isfinite(p->presence_penalty))
        return wb_err_set(err, WB_ERR_ARG, "presence_penalty = %g must be finite",
                          (double)p->presence_penalty);
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0)
        return wb_err_set(err, WB_ERR_ARG, "repetition_penalty = %g must be finite and > 0",
                          (double)p->repetition_penalty);
    if (p->mask_stage != WB_MASK_LOGITS && p->mask_stage != WB_MASK_AFTER_FILTERS &&
        p->mask_stage != WB_MASK_AFTER_FILTERS_UNIFORM)
        return wb_err_set(err, WB_ERR_ARG, "mask_stage = %d is not one of 0 (logits), 1 (after "
                          "filters), 2 (after filters, uniform fallback)", (int)p->mask_stage);
    if (p->max_tokens < 1)
        return wb_err_set(err, WB_ERR_ARG, "max_tokens = %d must be >= 1", (int)p->max_tokens);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return wb_err_set(err, WB_ERR_ARG, "logit_bias: %d entries but no array",
                          p->n_logit_bias);
    for (int i = 0; i < p->n_logit_bias; i++) {
        const wb_logit_bias *b = &p->logit_bias[i];
        if (b->id < 0 || (vocab_size > 0 && b->id >= vocab_size))
            return wb_err_set(err, WB_ERR_RANGE, "logit_bias: token id %d is outside [0, %d)",
                              (int)b->id, (int)vocab_size);
        if (isnan(b->bias) || (isinf(b->bias) && b->bias > 0))
            return wb_err_set(err, WB_ERR_ARG,
                              "logit_bias[%d] = %g must be finite or -inf (a ban)", (int)b->id,
                              (double)b->bias);
    }
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop))
        return wb_err_set(err, WB_ERR_ARG, "stop: %d strings but no array", p->n_stop);
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0])
            return wb_err_set(err, WB_ERR_ARG, "stop[%d] is empty (an empty stop would match "
                              "before any text)", i);
    if (p->n_stop_token_ids < 0 || (p->n_stop_token_ids > 0 && !p->stop_token_ids))
        return wb_err_set(err, WB_ERR_ARG, "stop_token_ids: %d ids but no array",
                          p->n_stop_token_ids);
    for (int i = 0; i < p->n_stop_token_ids; i++) {
        int32_t id = p->stop_token_ids[i];
        if (id < 0 || (vocab_size > 0 && id >= vocab_size))
            return wb_err_set(err, WB_ERR_RANGE, "stop_token_ids[%d] = %d is outside [0, %d)", i,
                              (int)id, (int)vocab_size);
    }
    return WB_OK;
}

/* ======================================== sampler ========================================== */

typedef struct wb_cand {
    float w; /* unnormalised weight exp((z - z_max) / T); the argmax has exactly 1 */
    int32_t id;
} wb_cand;

#define WB_HIST_TRASH 1024 /* top_p histogram row where lanes below the floor go */

struct wb_sampler {
    wb_sampling_params p; /* logit_bias points at `bias`; stop / stop ids are not kept */
    wb_logit_bias *bias;
    int32_t V;
    uint64_t seed;
    wb_rng rng;
    float *z;       /* [V] adjusted logits, used only when something adjusts them  */
    float *w;       /* [V] dense weights                                           */
    int32_t *count; /* [V] all zero between calls                                  */
    wb_cand *cand;  /* [V] candidates, then survivors                              */
    wb_cand *tmp;   /* [V] partition scratch                                       */
    double *hist;   /* [8200] top_p histogram (only when top_p < 1)                */
    int dense;      /* survivors are all ids with weight w[id] > 0, else cand[]    */
    int32_t n_surv; /* cand[0..n_surv) in ascending id order when !dense           */
    double w_sum;   /* total weight of the survivors                               */
    int32_t argmax;
    const float *z_used; /* the adjusted (unmasked when the mask comes late) logits   */
    int32_t *end_ids; /* [n_end_ids] ids banned while fewer than min_tokens are generated */
    int n_end_ids;
};

wb_status wb_sampler_new(const wb_sampling_params *p, int32_t vocab_size, wb_sampler **out,
                         wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "wb_sampler_new: out is NULL");
    *out = NULL;
    if (vocab_size < 1)
        return wb_err_set(err, WB_ERR_ARG, "vocab_size = %d must be >= 1", (int)vocab_size);
    wb_status st = wb_sampling_params_check(p, vocab_size, err);
    if (st != WB_OK) return st;
    wb_sampler *s = calloc(1, sizeof *s);
    if (!s) return wb_err_set(err, WB_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->p.stop = NULL;
    s->p.n_stop = 0;
    s->p.stop_token_ids = NULL;
    s->p.n_stop_token_ids = 0;
    if (p->n_stop_token_ids > 0) {
        s->end_ids = malloc((size_t)p->n_stop_token_ids * sizeof *s->end_ids);
        if (!s->end_ids) {
            free(s);
            return wb_err_set(err, WB_ERR_NOMEM, "sampler: out of memory");
        }
        memcpy(s->end_ids, p->stop_token_ids, (size_t)p->n_stop_token_ids * sizeof *s->end_ids);
        s->n_end_ids = p->n_stop_token_ids;
    }
    s->V = vocab_size;
    size_t V = (size_t)vocab_size;
    s->z = malloc(V * sizeof *s->z);
    s->w = malloc(V * sizeof *s->w);
    s->count = calloc(V, sizeof *s->count);
    s->cand = malloc(V * sizeof *s->cand);
    s->tmp = malloc(V * sizeof *s->tmp);
    if (p->top_p < 1.0f) s->hist = malloc((WB_HIST_TRASH + 1) * 8 * sizeof *s->hist);
    if (p->n_logit_bias > 0) {
        s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
        if (s->bias) memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias;
    if (!s->z || !s->w || !s->count || !s->cand || !s->tmp || (p->n_logit_bias > 0 && !s->bias) ||
        (p->top_p < 1.0f && !s->hist)) {
        wb_sampler_free(s);
        return wb_err_set(err, WB_ERR_NOMEM, "sampler: out of memory for vocab_size %d",
                          (int)vocab_size);
    }
    s->seed = p->has_seed ? p->seed : wb_rng_entropy_seed();
    wb_rng_seed(&s->rng, s->seed);
    *out = s;
    return WB_OK;
}

void wb_sampler_free(wb_sampler *s) {
    if (!s) return;
    free(s->z);
    free(s->w);
    free(s->count);
    free(s->cand);
    free(s->tmp);
    free(s->hist);
    free(s->end_ids);
    free(s->bias);
    free(s);
}

uint64_t wb_sampler_seed(const wb_sampler *s) { return s ? s->seed : 0; }
wb_status wb_sampler_set_end_ids(wb_sampler *s, const int32_t *ids, int n, wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "sampler is NULL");
    if (n < 0 || (n > 0 && !ids)) return wb_err_set(err, WB_ERR_ARG, "end ids: %d but no array", n);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->V)
            return wb_err_set(err, WB_ERR_RANGE, "end ids[%d] = %d is outside [0, %d)", i,
                              (int)ids[i], (int)s->V);
    int32_t *nb = n ? malloc((size_t)n * sizeof *nb) : NULL;
    if (n && !nb) return wb_err_set(err, WB_ERR_NOMEM, "sampler: out of memory");
    if (n) memcpy(nb, ids, (size_t)n * sizeof *nb);
    free(s->end_ids);
    s->end_ids = nb;
    s->n_end_ids = n;
    return WB_OK;
}

/* exp(x) for x <= 0 (Cephes expf: range reduction by ln 2, degree-6 polynomial, about 1 ulp).
 * exp(0) is exactly 1, which the "argmax has weight 1" reasoning below relies on; below -87
 * (under FLT_MIN) it returns 0. The clamp and the zeroing are integer masks on the bit pattern
 * (for x <= 0, "x < -87" is "bits > bits(-87)"), not float comparisons, so the softmax loop
 * vectorizes under GCC's default -ftrapping-math. */
static inline float exp_nonpos(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t lim = 0xC2AE0000u; /* -87.0f */
    uint32_t under = 0u - (uint32_t)(u > lim);
    u = (u & ~under) | (lim & under);
    float xc;
    memcpy(&xc, &u, sizeof xc);
    float t = xc * 1.44269504088896341f;
    float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest, exact for |t| < 2^22 */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    y *= scale;
    uint32_t yb;
    memcpy(&yb, &y, sizeof yb);
    yb &= ~under;
    memcpy(&y, &yb, sizeof y);
    return y;
}

/* w[i] = exp((z[i] - zmax) * inv_t). A function of its own so `restrict` lets the loop vectorize
 * without a runtime overlap check. */
static void exp_weights(const float *restrict z, float *restrict w, int32_t V, float zmax,
                        float inv_t) {
    for (int32_t i = 0; i < V; i++) w[i] = exp_nonpos((z[i] - zmax) * inv_t);
}

/* Strict total order "a is more probable than b", ties to the lower id, so selections are exact
 * (top_k = 5 leaves exactly 5) and independent of how the partition happened to run. */
static inline int cand_better(const wb_cand *a, const wb_cand *b) {
    /* Bitwise, not short-circuit: this sits in partition loops where a branch would mispredict
     * half the time. */
    return (a->w > b->w) | ((a->w == b->w) & (a->id < b->id));
}

static inline void cand_swap(wb_cand *a, wb_cand *b) {
    wb_cand t = *a;
    *a = *b;
    *b = t;
}

/* Quickselect: afterwards c[0..m) are the m best of c[0..n), in no particular order. Expected
 * O(n); median-of-three pivots keep sorted or reversed inputs linear too. The partition is
 * branch-free and out of place (through tmp[n]): every element is written to both ends of tmp
 * and the better-than-pivot test only moves the cursors, so there is neither a mispredicted
 * branch nor a load from a slot just stored to (an in-place swap stalls on store forwarding). */
static void select_best(wb_cand *c, size_t n, size_t m, wb_cand *tmp) {
    if (m == 0 || m >= n) return;
    size_t lo = 0, hi = n - 1, k = m - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        /* Order lo, mid, hi so the median lands on mid, then park it at hi. */
        if (cand_better(&c[mid], &c[lo])) cand_swap(&c[mid], &c[lo]);
        if (cand_better(&c[hi], &c[lo])) cand_swap(&c[hi], &c[lo]);
        if (cand_better(&c[hi], &c[mid])) cand_swap(&c[hi], &c[mid]);
        cand_swap(&c[mid], &c[hi]);
        const wb_cand pivot = c[hi];
        size_t L = 0, R = hi - lo;
        for (size_t i = lo; i < hi; i++) {
            wb_cand x = c[i];
            size_t b = (size_t)cand_better(&x, &pivot);
            tmp[L] = x;
            tmp[R] = x;
            L += b;
            R -= 1 - b;
        }
        tmp[L] = pivot; /* L == R: the one slot left */
        memcpy(c + lo, tmp, (hi - lo + 1) * sizeof *c);
        size_t store = lo + L;
        if (store == k) return;
        if (store > k) hi = store - 1;
        else lo = store + 1;
    }
}

/* Top-k in one pass over the logits with a buffer of candidates: a candidate is appended only if
 * it beats the current threshold (written unconditionally, counted conditionally, so the loop
 * has no data-dependent branch); when the buffer fills, quickselect keeps the k best and their
 * worst becomes the threshold. Ids arrive in ascending order, so a newcomer equal to the
 * threshold loses the tie and a strict > is exact. Writes the k best (logit, id) pairs to
 * c[0..k) and returns how many (fewer when fewer are finite). */
static inline __attribute__((always_inline)) size_t top_k_logits_body(const float *z, int32_t V,
                                                                     size_t k, wb_cand *c,
                                                                     wb_cand *tmp) {
    size_t B = 4 * k < 256 ? 256 : 4 * k, nb = 0;
    if (B >= (size_t)V) {
        for (int32_t i = 0; i < V; i++)
            if (z[i] != -INFINITY) {
                c[nb].w = z[i];
                c[nb].id = i;
                nb++;
            }
        select_best(c, nb, k, tmp);
        return nb < k ? nb : k;
    }
    float thr = -INFINITY; /* -inf never enters: banned tokens are not candidates */
    /* A starting threshold from a strided sample: the value that about 2k tokens of the whole
     * vocabulary should beat. If fewer than k beat it after all, redo the pass from -inf. */
    size_t S = (size_t)V / k > 128 ? (size_t)V / k : 128; /* so that about 2 sample values pass */
    float thr0 = -INFINITY;
    if (S <= (size_t)V / 8 && 2 * k * S / (size_t)V >= 1) {
        size_t stride = (size_t)V / S, r = 2 * k * S / (size_t)V;
        for (size_t j = 0; j < S; j++) {
            c[j].w = z[j * stride];
            c[j].id = (int32_t)(j * stride);
        }
        select_best(c, S, r, tmp);
        thr0 = c[0].w;
        for (size_t j = 1; j < r; j++) thr0 = c[j].w < thr0 ? c[j].w : thr0;
        /* Ties with thr0 must not be lost: step just below it. */
        thr0 = nextafterf(thr0, -INFINITY);
    }
    thr = thr0;
retry:
    for (int32_t i0 = 0; i0 < V; i0 += 16) {
        int32_t end = i0 + 16 < V ? i0 + 16 : V;
        /* Once the threshold is up, most blocks hold nothing above it: a vectorized test
         * skips them whole. */
        int any = 0;
        for (int32_t i = i0; i < end; i++) any |= isgreater(z[i], thr);
        if (!any) continue;
        for (int32_t i = i0; i < end; i++) {
            float x = z[i];
            c[nb].w = x;
            c[nb].id = i;
            nb += (size_t)(x > thr);
            if (nb == B) {
                select_best(c, B, k, tmp);
                thr = c[0].w;
                for (size_t j = 1; j < k; j++) thr = c[j].w < thr ? c[j].w : thr;
                nb = k;
            }
        }
    }
    if (nb < k && thr != -INFINITY && thr == thr0) {
        thr = thr0 = -INFINITY; /* the sample guessed too high */
        nb = 0;
        goto retry;
    }
    if (nb > k) {
        select_best(c, nb, k, tmp);
        nb = k;
    }
    return nb;
}

/* Sort a handful of candidates (n <= 64) by counting, for each, how many come before it: n^2
 * comparisons with no branches beat qsort's mispredicted ones at this size. The keys are
 * distinct (ids are unique), so the ranks are a permutation. The comparisons run on separate
 * arrays of weight bits and ids so they vectorize; weights are > 0 here, so their bit patterns
 * order as the floats do. */
static inline __attribute__((always_inline)) void rank_sort_body(wb_cand *c, size_t n,
                                                                 wb_cand *tmp, int by_id) {
    int32_t key[64], id[64];
    for (size_t i = 0; i < n; i++) {
        memcpy(&key[i], &c[i].w, sizeof key[i]);
        id[i] = c[i].id;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t r = 0;
        const int32_t ki = key[i], ii = id[i];
        if (by_id)
            for (size_t j = 0; j < n; j++) r += id[j] < ii;
        else
            for (size_t j = 0; j < n; j++) r += (key[j] > ki) | ((key[j] == ki) & (id[j] < ii));
        tmp[r] = c[i];
    }
    memcpy(c, tmp, n * sizeof *c);
}

static int cmp_better_first(const void *a, const void *b) {
    const wb_cand *x = a, *y = b;
    return cand_better(x, y) ? -1 : cand_better(y, x) ? 1 : 0;
}

static int cmp_id(const void *a, const void *b) {
    const wb_cand *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* First NaN or +inf logit, or -1. The common all-valid case is one branch-free pass over the
 * bit patterns (vectorizes); only a bad vector pays for the search. -inf is valid (banned). */
static inline __attribute__((always_inline)) int32_t first_invalid_body(const float *z,
                                                                       int32_t V) {
    uint32_t bad = 0;
    for (int32_t i = 0; i < V; i++) {
        uint32_t u;
        memcpy(&u, &z[i], sizeof u);
        bad |= (uint32_t)((u & 0x7fffffffu) > 0x7f800000u) | (uint32_t)(u == 0x7f800000u);
    }
    if (!bad) return -1;
    for (int32_t i = 0; i < V; i++)
        if (isnan(z[i]) || (isinf(z[i]) && z[i] > 0)) return i;
    return -1;
}

/* Largest value (valid input), as a branch-free max over order-preserving integer keys so it
 * vectorizes; then the lowest id holding it (-1 if all are -inf). */
static int32_t argmax_valid(const float *z, int32_t V, float *zmax) {
    int32_t kmax = INT32_MIN;
    for (int32_t i = 0; i < V; i++) {
        int32_t k;
        memcpy(&k, &z[i], sizeof k);
        k ^= (k >> 31) & 0x7fffffff;
        kmax = k > kmax ? k : kmax;
    }
    kmax ^= (kmax >> 31) & 0x7fffffff;
    float m;
    memcpy(&m, &kmax, sizeof m);
    *zmax = m;
    if (m == -INFINITY) return -1;
    for (int32_t i = 0; i < V; i++)
        if (z[i] == m) return i; /* == so that -0.0 and +0.0 tie, lowest id first */
    return -1;
}

/* ---------------------------------------------------------------- vector kernels, dispatch */

/* The O(V) passes come in two builds: portable C, and AVX2 (chosen at run time). The AVX2 exp
 * performs exactly the scalar exp_nonpos's operations (separate multiplies and adds: no FMA,
 * which would round differently), and every sum keeps the scalar code's order (four double
 * lanes by id % 4), so the two builds produce the same bits and the same draws for a seed. */
#if defined(__x86_64__) || defined(__i386__)
#define WB_SAMP_X86 1
#include <immintrin.h>
#define WB_AVX2 __attribute__((target("avx2")))
#endif
#define WB_INLINE static inline __attribute__((always_inline))

static int g_samp_force_scalar = 0;

void wb_sampler_force_scalar(int on) {
    __atomic_store_n(&g_samp_force_scalar, on != 0, __ATOMIC_RELAXED);
}

int wb_sampler_simd(void) {
#ifdef WB_SAMP_X86
    /* the one CPU probe and level (cpu.c): a process capped to portable kernels samples portably */
    return wb_isa_current() >= WB_ISA_AVX2 && !__atomic_load_n(&g_samp_force_scalar, __ATOMIC_RELAXED);
#else
    return 0;
#endif
}

/* Four double lanes by id % 4, combined pairwise: the order every dense sum here uses. */
WB_INLINE double lanes_total(const double l[4]) { return (l[0] + l[1]) + (l[2] + l[3]); }

/* w[i] = exp((z[i] - zmax) * inv_t) and their total. */
static double exp_sum_scalar(const float *restrict z, float *restrict w, int32_t V, float zmax,
                             float inv_t) {
    exp_weights(z, w, V, zmax, inv_t);
    double l[4] = {0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 4 <= V; i += 4)
        for (int j = 0; j < 4; j++) l[j] += w[i + j];
    for (; i < V; i++) l[i & 3] += w[i];
    return lanes_total(l);
}

/* Keep w[i] when (w > vcut or (w == vcut and i <= tie_last)) and w >= mp, else 0; the total. */
static double keep_sum_scalar(float *w, int32_t V, float vcut, int32_t tie_last, float mp) {
    double l[4] = {0, 0, 0, 0};
    for (int32_t i = 0; i < V; i++) {
        float x = w[i];
        int keep = (isgreater(x, vcut) | (x == vcut && i <= tie_last)) & isgreaterequal(x, mp);
        x = keep ? x : 0.0f;
        w[i] = x;
        l[i & 3] += x;
    }
    return lanes_total(l);
}

/* The total of (float)(w[i] * inv): the probabilities apply would write, summed as the draw
 * sums them. */
static double prob_total_scalar(const float *w, int32_t V, double inv) {
    double l[4] = {0, 0, 0, 0};
    for (int32_t i = 0; i < V; i++) l[i & 3] += (double)(float)(w[i] * inv);
    return lanes_total(l);
}

/* Largest value, the lowest id holding it (-1 if all are -inf) and whether any value is NaN or
 * +inf, in one pass. */
static int32_t scan_max_scalar(const float *z, int32_t V, float *zmax, int *bad) {
    uint32_t b = 0;
    for (int32_t i = 0; i < V; i++) {
        uint32_t u;
        memcpy(&u, &z[i], sizeof u);
        b |= (uint32_t)((u & 0x7fffffffu) > 0x7f800000u) | (uint32_t)(u == 0x7f800000u);
    }
    *bad = b != 0;
    if (b) return -1;
    return argmax_valid(z, V, zmax);
}

#ifdef WB_SAMP_X86
/* exp_nonpos on eight lanes, the same operations in the same order. */
WB_AVX2 static inline __m256 exp_nonpos8(__m256 x) {
    const __m256i lim1 = _mm256_set1_epi32((int)0xC2AE0001u); /* u > bits(-87) <=> u >= lim1 */
    __m256i u = _mm256_castps_si256(x);
    __m256i under = _mm256_cmpeq_epi32(_mm256_max_epu32(u, lim1), u);
    __m256 xc = _mm256_blendv_ps(x, _mm256_set1_ps(-87.0f), _mm256_castsi256_ps(under));
    __m256 t = _mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f));
    __m256 n = _mm256_sub_ps(_mm256_add_ps(t, _mm256_set1_ps(12582912.0f)),
                             _mm256_set1_ps(12582912.0f));
    __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_add_ps(_mm256_mul_ps(y, r), _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(y, r), r), r),
                      _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_castsi256_ps(under), y);
}

/* acc lanes j += x[j], then += x[4 + j]: the scalar l[i & 3] order for eight consecutive ids. */
WB_AVX2 static inline __m256d lanes_add8(__m256d acc, __m256 x) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
}

WB_AVX2 static double exp_sum_avx2(const float *restrict z, float *restrict w, int32_t V,
                                   float zmax, float inv_t) {
    const __m256 vm = _mm256_set1_ps(zmax), vt = _mm256_set1_ps(inv_t);
    __m256d acc = _mm256_setzero_pd();
    int32_t i = 0;
    for (; i + 8 <= V; i += 8) {
        __m256 y = exp_nonpos8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(z + i), vm), vt));
        _mm256_storeu_ps(w + i, y);
        acc = lanes_add8(acc, y);
    }
    double l[4];
    _mm256_storeu_pd(l, acc);
    for (; i < V; i++) {
        w[i] = exp_nonpos((z[i] - zmax) * inv_t);
        l[i & 3] += w[i];
    }
    return lanes_total(l);
}

WB_AVX2 static double keep_sum_avx2(float *w, int32_t V, float vcut, int32_t tie_last,
                                    float mp) {
    const __m256 vc = _mm256_set1_ps(vcut), vmp = _mm256_set1_ps(mp);
    const __m256i tl = _mm256_set1_epi32(tie_last), step = _mm256_set1_epi32(8);
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256d acc = _mm256_setzero_pd();
    int32_t i = 0;
    for (; i + 8 <= V; i += 8, idx = _mm256_add_epi32(idx, step)) {
        __m256 x = _mm256_loadu_ps(w + i);
        __m256 tie = _mm256_and_ps(_mm256_cmp_ps(x, vc, _CMP_EQ_OQ),
                                   _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                       _mm256_add_epi32(tl, _mm256_set1_epi32(1)), idx)));
        __m256 keep = _mm256_and_ps(_mm256_or_ps(_mm256_cmp_ps(x, vc, _CMP_GT_OQ), tie),
                                    _mm256_cmp_ps(x, vmp, _CMP_GE_OQ));
        x = _mm256_and_ps(x, keep);
        _mm256_storeu_ps(w + i, x);
        acc = lanes_add8(acc, x);
    }
    double l[4];
    _mm256_storeu_pd(l, acc);
    for (; i < V; i++) {
        float x = w[i];
        int keep = (isgreater(x, vcut) | (x == vcut && i <= tie_last)) & isgreaterequal(x, mp);
        x = keep ? x : 0.0f;
        w[i] = x;
        l[i & 3] += x;
    }
    return lanes_total(l);
}

WB_AVX2 static double prob_total_avx2(const float *w, int32_t V, double inv) {
    const __m256d vi = _mm256_set1_pd(inv);
    __m256d acc = _mm256_setzero_pd();
    int32_t i = 0;
    for (; i + 4 <= V; i += 4) {
        __m256d q = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(w + i)), vi);
        acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_cvtpd_ps(q)));
    }
    double l[4];
    _mm256_storeu_pd(l, acc);
    for (; i < V; i++) l[i & 3] += (double)(float)(w[i] * inv);
    return lanes_total(l);
}

/* Two independent (max, first index) accumulators so the compare-blend chains overlap; each
 * lane keeps the first index of its strict maximum, so the lowest index among lanes holding the
 * overall maximum is the lowest id overall (+0 and -0 compare equal, as in argmax_valid). */
WB_AVX2 static int32_t scan_max_avx2(const float *z, int32_t V, float *zmax, int *bad) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY), pinf = _mm256_set1_ps(INFINITY);
    __m256 m0 = ninf, m1 = ninf, b = _mm256_setzero_ps();
    __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
    __m256i c0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i c1 = _mm256_add_epi32(c0, _mm256_set1_epi32(8));
    const __m256i step = _mm256_set1_epi32(16);
    int32_t i = 0;
    for (; i + 16 <= V; i += 16) {
        __m256 x0 = _mm256_loadu_ps(z + i), x1 = _mm256_loadu_ps(z + i + 8);
        b = _mm256_or_ps(b, _mm256_or_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q),
                                         _mm256_or_ps(_mm256_cmp_ps(x0, pinf, _CMP_EQ_OQ),
                                                      _mm256_cmp_ps(x1, pinf, _CMP_EQ_OQ))));
        __m256 g0 = _mm256_cmp_ps(x0, m0, _CMP_GT_OQ), g1 = _mm256_cmp_ps(x1, m1, _CMP_GT_OQ);
        m0 = _mm256_blendv_ps(m0, x0, g0);
        m1 = _mm256_blendv_ps(m1, x1, g1);
        i0 = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(i0), _mm256_castsi256_ps(c0), g0));
        i1 = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(i1), _mm256_castsi256_ps(c1), g1));
        c0 = _mm256_add_epi32(c0, step);
        c1 = _mm256_add_epi32(c1, step);
    }
    float mv[16];
    int32_t iv[16];
    _mm256_storeu_ps(mv, m0);
    _mm256_storeu_ps(mv + 8, m1);
    _mm256_storeu_si256((__m256i *)iv, i0);
    _mm256_storeu_si256((__m256i *)(iv + 8), i1);
    int nb = _mm256_movemask_ps(b) != 0;
    float m = -INFINITY;
    int32_t best = -1;
    for (int j = 0; j < 16; j++)
        if (mv[j] > m || (mv[j] == m && mv[j] != -INFINITY && iv[j] < best)) {
            m = mv[j];
            best = iv[j];
        }
    for (; i < V; i++) {
        float x = z[i];
        nb |= isnan(x) || x == INFINITY;
        if (x > m) { /* later ids: a tie keeps the earlier one */
            m = x;
            best = i;
        }
    }
    *bad = nb;
    if (nb) return -1;
    *zmax = best >= 0 ? z[best] : -INFINITY;
    return best;
}
#endif

static double exp_sum(const float *z, float *w, int32_t V, float zmax, float inv_t) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return exp_sum_avx2(z, w, V, zmax, inv_t);
#endif
    return exp_sum_scalar(z, w, V, zmax, inv_t);
}

static double keep_sum(float *w, int32_t V, float vcut, int32_t tie_last, float mp) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return keep_sum_avx2(w, V, vcut, tie_last, mp);
#endif
    return keep_sum_scalar(w, V, vcut, tie_last, mp);
}

static double prob_total(const float *w, int32_t V, double inv) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return prob_total_avx2(w, V, inv);
#endif
    return prob_total_scalar(w, V, inv);
}

static int32_t scan_max(const float *z, int32_t V, float *zmax, int *bad) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return scan_max_avx2(z, V, zmax, bad);
#endif
    return scan_max_scalar(z, V, zmax, bad);
}

/* first_invalid and top_k_logits, also built for AVX2 (the same code, wider vectors). */
#ifdef WB_SAMP_X86
WB_AVX2 static int32_t first_invalid_avx2(const float *z, int32_t V) {
    return first_invalid_body(z, V);
}
/* top_k_logits with the validity check fused into its pass, and the buffer appends driven by a
 * compare mask: eight logits per test, and only the ones above the threshold are visited. A
 * stale mask after the threshold rises appends a few extra candidates, which the final
 * selection removes (it is exact on any superset of the k best). *bad: a NaN or +inf exists. */
WB_AVX2 static size_t top_k_logits_avx2(const float *z, int32_t V, size_t k, wb_cand *c,
                                        wb_cand *tmp, int *bad) {
    size_t B = 4 * k < 256 ? 256 : 4 * k, nb = 0;
    *bad = 0;
    if (B >= (size_t)V) {
        if (first_invalid_body(z, V) >= 0) {
            *bad = 1;
            return 0;
        }
        return top_k_logits_body(z, V, k, c, tmp);
    }
    size_t S = (size_t)V / k > 128 ? (size_t)V / k : 128;
    float thr0 = -INFINITY;
    if (S <= (size_t)V / 8 && 2 * k * S / (size_t)V >= 1) {
        size_t stride = (size_t)V / S, r = 2 * k * S / (size_t)V;
        if (r <= 32) {
            /* The r-th largest sample by insertion into a short sorted list: most samples
             * lose to its last entry on one compare. */
            float best[33];
            size_t nb0 = 0;
            for (size_t j = 0; j < S; j++) {
                float x = z[j * stride];
                if (nb0 == r && !(x > best[r - 1])) continue;
                size_t q = nb0 < r ? nb0++ : r - 1;
                while (q > 0 && best[q - 1] < x) {
                    best[q] = best[q - 1];
                    q--;
                }
                best[q] = x;
            }
            thr0 = best[r - 1];
        } else {
            for (size_t j = 0; j < S; j++) {
                c[j].w = z[j * stride];
                c[j].id = (int32_t)(j * stride);
            }
            select_best(c, S, r, tmp);
            thr0 = c[0].w;
            for (size_t j = 1; j < r; j++) thr0 = c[j].w < thr0 ? c[j].w : thr0;
        }
        thr0 = nextafterf(thr0, -INFINITY);
    }
    float thr = thr0;
    const __m256 pinf = _mm256_set1_ps(INFINITY);
    __m256 badv = _mm256_setzero_ps();
    int nbad = 0;
retry:;
    __m256 vthr = _mm256_set1_ps(thr);
    int32_t i = 0;
    /* 32 logits per test: fewer, better predicted branches than one per vector. */
    for (; i + 32 <= V; i += 32) {
        uint32_t m = 0;
        for (int q = 0; q < 4; q++) {
            __m256 x = _mm256_loadu_ps(z + i + 8 * q);
            badv = _mm256_or_ps(badv, _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q),
                                                   _mm256_cmp_ps(x, pinf, _CMP_EQ_OQ)));
            m |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(x, vthr, _CMP_GT_OQ)) << (8 * q);
        }
        while (m) {
            int32_t id = i + __builtin_ctz(m);
            m &= m - 1;
            c[nb].w = z[id];
            c[nb].id = id;
            if (++nb == B) {
                select_best(c, B, k, tmp);
                thr = c[0].w;
                for (size_t j = 1; j < k; j++) thr = c[j].w < thr ? c[j].w : thr;
                vthr = _mm256_set1_ps(thr);
                nb = k;
            }
        }
    }
    for (; i < V; i++) {
        float x = z[i];
        nbad |= isnan(x) || x == INFINITY;
        if (x > thr) {
            c[nb].w = x;
            c[nb].id = i;
            if (++nb == B) {
                select_best(c, B, k, tmp);
                thr = c[0].w;
                for (size_t j = 1; j < k; j++) thr = c[j].w < thr ? c[j].w : thr;
                nb = k;
            }
        }
    }
    if (nbad || _mm256_movemask_ps(badv)) {
        *bad = 1;
        return 0;
    }
    if (nb < k && thr != -INFINITY && thr == thr0) {
        thr = thr0 = -INFINITY; /* the sample guessed too high */
        nb = 0;
        goto retry;
    }
    if (nb > k) {
        select_best(c, nb, k, tmp);
        nb = k;
    }
    return nb;
}
WB_AVX2 static void rank_sort_avx2(wb_cand *c, size_t n, wb_cand *tmp, int by_id) {
    rank_sort_body(c, n, tmp, by_id);
}
#endif

static int32_t first_invalid(const float *z, int32_t V) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return first_invalid_avx2(z, V);
#endif
    return first_invalid_body(z, V);
}

/* The k best (logit, id) pairs after checking validity (*bad: some logit is NaN or +inf). */
static size_t top_k_logits(const float *z, int32_t V, size_t k, wb_cand *c, wb_cand *tmp,
                           int *bad) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return top_k_logits_avx2(z, V, k, c, tmp, bad);
#endif
    *bad = first_invalid_body(z, V) >= 0;
    return *bad ? 0 : top_k_logits_body(z, V, k, c, tmp);
}

static void rank_sort(wb_cand *c, size_t n, wb_cand *tmp, int by_id) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) {
        rank_sort_avx2(c, n, tmp, by_id);
        return;
    }
#endif
    rank_sort_body(c, n, tmp, by_id);
}

/* Level 1 of top_p_cut: h[key * 8 + id % 8] += w for every w >= t, key = the top 12 bits of
 * w's pattern (eight interleaved sub-histograms, so consecutive adds to one bucket do not wait
 * on each other through memory). */
static void hist_level1_scalar(const float *w, int32_t V, float t, double *h) {
    for (int32_t i = 0; i < V; i++) {
        if (!(w[i] >= t)) continue;
        uint32_t u;
        memcpy(&u, &w[i], sizeof u);
        h[(u >> 20) * 8 + (uint32_t)(i & 7)] += w[i];
    }
}

/* The tokens whose weight's top 12 bits are b, in id order, into c; returns how many. */
static size_t collect_bucket_scalar(const float *w, int32_t V, uint32_t b, wb_cand *c) {
    size_t n = 0;
    const uint32_t lo = b << 20;
    for (int32_t i = 0; i < V; i++) {
        uint32_t u;
        memcpy(&u, &w[i], sizeof u);
        c[n].w = w[i];
        c[n].id = i;
        n += (size_t)(u - lo < (1u << 20));
    }
    return n;
}

#ifdef WB_SAMP_X86
/* Blocks of eight with nothing at or above t are skipped on one test; in the others every lane
 * adds (lanes below t into a trash row), so there is no branch per token to mispredict. */
WB_AVX2 static void hist_level1_avx2(const float *w, int32_t V, float t, double *h) {
    const __m256 vt = _mm256_set1_ps(t);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i trash = _mm256_set1_epi32(WB_HIST_TRASH * 8);
    int32_t i = 0;
    for (; i + 8 <= V; i += 8) {
        __m256 x = _mm256_loadu_ps(w + i);
        __m256 ge = _mm256_cmp_ps(x, vt, _CMP_GE_OQ);
        if (!_mm256_movemask_ps(ge)) continue;
        __m256i key = _mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(x), 20), 3);
        key = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(trash), _mm256_castsi256_ps(key), ge));
        key = _mm256_add_epi32(key, lane);
        int32_t kb[8];
        _mm256_storeu_si256((__m256i *)kb, key);
        for (int j = 0; j < 8; j++) h[kb[j]] += w[i + j];
    }
    hist_level1_scalar(w + i, V - i, t, h); /* the tail: i is a multiple of 8, so id % 8 holds */
}

WB_AVX2 static size_t collect_bucket_avx2(const float *w, int32_t V, uint32_t b, wb_cand *c) {
    const __m256i vb = _mm256_set1_epi32((int)b);
    size_t n = 0;
    int32_t i = 0;
    for (; i + 8 <= V; i += 8) {
        __m256i u = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(w + i)), 20);
        unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(u, vb)));
        while (m) {
            int32_t id = i + __builtin_ctz(m);
            m &= m - 1;
            c[n].w = w[id];
            c[n].id = id;
            n++;
        }
    }
    size_t k = collect_bucket_scalar(w + i, V - i, b, c + n);
    for (size_t j = n; j < n + k; j++) c[j].id += i;
    return n + k;
}
#endif

static void hist_level1(const float *w, int32_t V, float t, double *h) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) {
        hist_level1_avx2(w, V, t, h);
        return;
    }
#endif
    hist_level1_scalar(w, V, t, h);
}

static size_t collect_bucket(const float *w, int32_t V, uint32_t b, wb_cand *c) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return collect_bucket_avx2(w, V, b, c);
#endif
    return collect_bucket_scalar(w, V, b, c);
}

/* top_p on dense weights without sorting: a radix select on the weights' bit patterns (for
 * w >= 0 the integer order is the float order). Level 1 histograms the mass of the weights by
 * their top 12 bits (exponent and 3 mantissa bits); weights under a floor t are left out, since
 * together they cannot reach the mass top_p drops. Walking the buckets from the top finds the
 * one where the cumulative mass reaches target, and only that bucket's tokens are collected. A
 * few are sorted outright (weight descending, id ascending, the sorted definition's order);
 * more are split by the next 10 and the last 10 bits, so at the end every remaining candidate
 * has the same weight v: they are the ties at the cut, taken lowest id first until the mass
 * reaches target. Survivors: w > v, and w == v with id <= *tie_last. The cumulative mass is
 * summed bucket by bucket rather than token by token, so only a cut that falls within rounding
 * of target can differ from the sorted definition. */
static void top_p_cut(wb_sampler *s, const float *w, int32_t V, double total, double target,
                      float *vcut, int32_t *tie_last) {
    double *h = s->hist;
    /* Tokens under t never reach the nucleus: together they weigh at most V * t, half of the
     * mass top_p leaves out, so the cut lies above them and level 1 skips them. */
    float t = (float)((total - target) * 0.5 / (double)V);
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const uint32_t kt = tb >> 20, ktop = 0x3f800000u >> 20; /* w <= 1 */
    memset(h + 8 * kt, 0, (ktop + 1 - kt) * 8 * sizeof *h);
    memset(h + 8 * WB_HIST_TRASH, 0, 8 * sizeof *h);
    hist_level1(w, V, t, h);
    double cum = 0;
    int64_t b = -1;
    for (int64_t k = ktop; k >= (int64_t)kt; k--) {
        const double *hk = h + 8 * k;
        double m = ((hk[0] + hk[1]) + (hk[2] + hk[3])) + ((hk[4] + hk[5]) + (hk[6] + hk[7]));
        if (m > 0 && cum + m >= target) {
            b = k;
            break;
        }
        cum += m;
    }
    if (b < 0) { /* rounding left the mass short of target: keep every token */
        *vcut = 0.0f;
        *tie_last = -1;
        return;
    }
    wb_cand *c = s->cand;
    size_t n = collect_bucket(w, V, (uint32_t)b, c);
    if (n <= 64) { /* few ties to break: sort them (weight descending, id ascending) */
        rank_sort(c, n, s->tmp, 0);
        size_t j = 0;
        for (; j + 1 < n; j++) {
            cum += c[j].w;
            if (cum >= target) break;
        }
        *vcut = c[j].w;
        *tie_last = c[j].id;
        return;
    }
    static const int shift[2] = {10, 0}, width[2] = {10, 10};
    for (int lev = 0; lev < 2; lev++) {
        const uint32_t nb = 1u << width[lev];
        memset(h, 0, nb * sizeof *h);
        for (size_t j = 0; j < n; j++) {
            uint32_t u;
            memcpy(&u, &c[j].w, sizeof u);
            h[(u >> shift[lev]) & (nb - 1)] += c[j].w;
        }
        int64_t bb = -1;
        for (int64_t k = (int64_t)nb - 1; k >= 0; k--) {
            if (h[k] > 0 && cum + h[k] >= target) {
                bb = k;
                break;
            }
            cum += h[k];
        }
        if (bb < 0) { /* rounding: keep the whole candidate set */
            float mn = c[0].w;
            for (size_t j = 1; j < n; j++) mn = c[j].w < mn ? c[j].w : mn;
            *vcut = mn;
            *tie_last = INT32_MAX;
            return;
        }
        size_t k2 = 0;
        for (size_t j = 0; j < n; j++) {
            uint32_t u;
            memcpy(&u, &c[j].w, sizeof u);
            c[k2] = c[j];
            k2 += (size_t)(((u >> shift[lev]) & (nb - 1)) == (uint32_t)bb);
        }
        n = k2;
    }
    const float v = c[0].w;
    int32_t last = c[n - 1].id;
    for (size_t j = 0; j < n; j++) {
        cum += v;
        if (cum >= target) {
            last = c[j].id;
            break;
        }
    }
    *vcut = v;
    *tie_last = last;
}

/* The draw over dense weights: the first id whose running probability passes target, with the
 * running sum in id order exactly as wb_sampling_draw keeps it. Adding a zero leaves the sum
 * unchanged, so it cannot be the step that passes target: runs of 16 zero weights are skipped
 * whole and zeros need no test. If rounding keeps the sum from passing target, the last id with
 * a non-zero probability is the pick, as in wb_sampling_draw. */
static inline __attribute__((always_inline)) int32_t walk_dense_body(const float *w, int32_t V,
                                                                     double inv, double target,
                                                                     float *pp) {
    double cum = 0;
    int32_t i = 0;
    while (i < V) {
        int32_t end = i + 16 < V ? i + 16 : V;
        uint32_t any = 0;
        for (int32_t j = i; j < end; j++) {
            uint32_t u;
            memcpy(&u, &w[j], sizeof u);
            any |= u;
        }
        if (!any) {
            i = end;
            continue;
        }
        double q[16];
        for (int32_t j = i; j < end; j++) q[j - i] = (double)(float)(w[j] * inv);
        for (int32_t j = i; j < end; j++) {
            cum += q[j - i];
            if (cum > target) {
                *pp = (float)q[j - i];
                return j;
            }
        }
        i = end;
    }
    for (int32_t j = V - 1; j >= 0; j--) {
        float q = (float)(w[j] * inv);
        if (q > 0) {
            *pp = q;
            return j;
        }
    }
    *pp = 0;
    return -1;
}

#ifdef WB_SAMP_X86
WB_AVX2 static int32_t walk_dense_avx2(const float *w, int32_t V, double inv, double target,
                                       float *pp) {
    return walk_dense_body(w, V, inv, target, pp);
}
#endif

static int32_t walk_dense(const float *w, int32_t V, double inv, double target, float *pp) {
#ifdef WB_SAMP_X86
    if (wb_sampler_simd()) return walk_dense_avx2(w, V, inv, target, pp);
#endif
    return walk_dense_body(w, V, inv, target, pp);
}

static wb_status invalid_logit(const float *logits, const float *z, int32_t bad, wb_err *err) {
    if (bad < 0) bad = 0; /* unreachable: the caller saw an invalid value */
    return wb_err_set(err, WB_ERR_ARG, "logits[%d] is %s", (int)bad,
                      isnan(logits[bad]) || isnan(z[bad]) ? "NaN" : "+inf");
}

static wb_status bad_generated(const int32_t *gen, size_t i, int32_t V, wb_err *err) {
    return wb_err_set(err, WB_ERR_RANGE, "generated ids[%zu] = %d is outside [0, %d)", i,
                      (int)gen[i], (int)V);
}

/* Steps 1-8 of the header. Leaves the survivors either dense (s->w, every id) or in
 * s->cand[0..n_surv) in ascending id order, with their total weight s->w_sum. At temperature 0
 * the single survivor is the argmax. Cost: O(V) passes that vectorize, plus work proportional
 * to the candidates the filters actually look at; the vocabulary is never fully sorted. */
/* Steps 1-5 over the allowed ids only (a sparse mask). Leaves c[0..*n) in ascending id order
 * with their weights (at temperature 0: the argmax alone, the sampler's final state). */
static wb_status sparse_candidates(wb_sampler *s, const float *logits, const int32_t *gen,
                                   size_t n_gen, const uint32_t *allowed, size_t *n_out,
                                   wb_err *err) {
    const wb_sampling_params *p = &s->p;
    const int32_t V = s->V;
    wb_cand *c = s->cand;
    size_t n = 0;
    for (int32_t w = 0; w < (V + 31) / 32; w++)
        for (uint32_t bits = allowed[w]; bits; bits &= bits - 1) {
            int32_t id = w * 32 + __builtin_ctz(bits);
            if (id >= V) break;
            float x = logits[id];
            if (isnan(x) || (isinf(x) && x > 0))
                return wb_err_set(err, WB_ERR_ARG, "logits[%d] is %s", (int)id,
                                  isnan(x) ? "NaN" : "+inf");
            c[n].w = x;
            c[n].id = id;
            n++;
        }
    int penalise = n_gen > 0 && (p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                 p->presence_penalty != 0.0f);
    if (penalise) {
        for (size_t i = 0; i < n_gen; i++) s->count[gen[i]]++;
        for (size_t i = 0; i < n; i++) {
            int32_t cnt = s->count[c[i].id];
            if (cnt == 0) continue;
            float x = c[i].w;
            if (p->repetition_penalty != 1.0f)
                x = x > 0 ? x / p->repetition_penalty : x * p->repetition_penalty;
            c[i].w = x - ((float)cnt * p->frequency_penalty + p->presence_penalty);
        }
        for (size_t i = 0; i < n_gen; i++) s->count[gen[i]] = 0;
    }
    for (int b = 0; b < p->n_logit_bias; b++) {
        int32_t id = p->logit_bias[b].id;
        size_t lo = 0, hi = n; /* ids ascend: binary search */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (c[mid].id < id) lo = mid + 1;
            else hi = mid;
        }
        if (lo < n && c[lo].id == id) c[lo].w += p->logit_bias[b].bias;
    }
    if (n_gen < (size_t)p->min_tokens)
        for (int b = 0; b < s->n_end_ids; b++) {
            int32_t id = s->end_ids[b];
            size_t lo = 0, hi = n;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (c[mid].id < id) lo = mid + 1;
                else hi = mid;
            }
            if (lo < n && c[lo].id == id) c[lo].w = -INFINITY;
        }
    size_t k = 0, best = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].w != -INFINITY) {
            c[k] = c[i];
            if (c[k].w > c[best].w || k == 0) best = k; /* strict: the lowest id wins ties */
            k++;
        }
    n = k;
    if (n == 0)
        return wb_err_set(err, WB_ERR_ARG,
                          "every token is banned (logit_bias or the allowed mask): nothing to "
                          "sample");
    s->dense = 0;
    s->argmax = c[best].id;
    s->z_used = logits;
    if (p->temperature == 0.0f) {
        c[0].w = 1.0f;
        c[0].id = s->argmax;
        s->n_surv = 1;
        s->w_sum = 1.0;
        *n_out = 1;
        return WB_OK;
    }
    const float zmax = c[best].w, inv_t = 1.0f / p->temperature;
    k = 0;
    for (size_t i = 0; i < n; i++) {
        float w = exp_nonpos((c[i].w - zmax) * inv_t);
        if (w > 0) {
            c[k].w = w;
            c[k].id = c[i].id;
            k++;
        }
    }
    n = k;
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        select_best(c, n, (size_t)p->top_k, s->tmp);
        n = (size_t)p->top_k;
    }
    *n_out = n;
    return WB_OK;
}

static wb_status sampler_filter_base(wb_sampler *s, const float *logits, const int32_t *gen,
                                     size_t n_gen, const uint32_t *allowed, wb_err *err) {
    const int32_t V = s->V;
    const wb_sampling_params *p = &s->p;
    if (!logits) return wb_err_set(err, WB_ERR_ARG, "logits is NULL");
    if (n_gen > 0 && !gen) return wb_err_set(err, WB_ERR_ARG, "generated ids: NULL array");
    for (size_t i = 0; i < n_gen; i++)
        if (gen[i] < 0 || gen[i] >= V) return bad_generated(gen, i, V, err);

    wb_cand *c = s->cand;
    size_t n = 0;
    int reordered = 0;
    if (allowed) {
        int32_t n_allowed = 0;
        for (int32_t w = 0; w < (V + 31) / 32; w++) n_allowed += __builtin_popcount(allowed[w]);
        /* A constraint usually allows a few tokens: then work on those alone instead of copying
         * and masking the whole vocabulary. */
        if ((int64_t)n_allowed * 8 <= V) {
            wb_status st = sparse_candidates(s, logits, gen, n_gen, allowed, &n, err);
            if (st != WB_OK) return st;
            if (p->temperature == 0.0f) return WB_OK;
            reordered = 1;
            goto filters;
        }
    }

    /* 1-3. Adjust a copy only when something adjusts: most requests use the logits as they are. */
    int penalise = n_gen > 0 && (p->repetition_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                 p->presence_penalty != 0.0f);
    const float *z = logits;
    const int ban_ends = n_gen < (size_t)p->min_tokens && s->n_end_ids > 0;
    if (penalise || p->n_logit_bias > 0 || allowed || ban_ends) {
        float *za = s->z;
        memcpy(za, logits, (size_t)V * sizeof *za);
        if (penalise) {
            /* Count in the scratch array, then visit each distinct id once and zero its count
             * on the way, which restores the all-zero invariant without an O(V) clear. */
            for (size_t i = 0; i < n_gen; i++) s->count[gen[i]]++;
            for (size_t i = 0; i < n_gen; i++) {
                int32_t id = gen[i], c = s->count[id];
                if (c == 0) continue;
                s->count[id] = 0;
                float x = za[id];
                if (p->repetition_penalty != 1.0f)
                    x = x > 0 ? x / p->repetition_penalty : x * p->repetition_penalty;
                x -= (float)c * p->frequency_penalty + p->presence_penalty;
                za[id] = x;
            }
        }
        for (int i = 0; i < p->n_logit_bias; i++) za[p->logit_bias[i].id] += p->logit_bias[i].bias;
        if (ban_ends)
            for (int i = 0; i < s->n_end_ids; i++) za[s->end_ids[i]] = -INFINITY;
        if (allowed)
            for (int32_t i = 0; i < V; i++)
                if (!(allowed[i >> 5] >> (i & 31) & 1u)) za[i] = -INFINITY;
        z = za;
    }
    s->z_used = z;

    /* 4. Validity, then the argmax (lowest id among ties). */
    static const char all_banned[] =
        "every token is banned (logit_bias or the allowed mask): nothing to sample";
    s->dense = 0;
    const int use_heap = p->temperature != 0.0f && p->top_k > 0 && p->top_k < V;
    float zmax = -INFINITY;
    size_t k_heap = 0;
    c = s->cand;
    if (use_heap) {
        /* 5. top_k on the logits (softmax is monotone): one pass that also checks validity,
         * and the heap's best is the argmax, so no separate max pass and only k exponentials. */
        int bad = 0;
        k_heap = top_k_logits(z, V, (size_t)p->top_k, c, s->tmp, &bad);
        if (bad) return invalid_logit(logits, z, first_invalid(z, V), err);
        if (k_heap == 0) return wb_err_set(err, WB_ERR_ARG, "%s", all_banned);
        size_t b = 0;
        for (size_t j = 1; j < k_heap; j++)
            if (cand_better(&c[j], &c[b])) b = j;
        s->argmax = c[b].id;
        zmax = c[b].w;
    } else {
        /* Validity, the max and the lowest id holding it: one pass. */
        int bad = 0;
        s->argmax = scan_max(z, V, &zmax, &bad);
        if (bad) return invalid_logit(logits, z, first_invalid(z, V), err);
        if (s->argmax < 0) return wb_err_set(err, WB_ERR_ARG, "%s", all_banned);
    }
    if (p->temperature == 0.0f) {
        c[0].w = 1.0f;
        c[0].id = s->argmax;
        s->n_surv = 1;
        s->w_sum = 1.0;
        return WB_OK;
    }

    /* Softmax weights relative to the max: exactly 1 for the argmax, no overflow for tiny T.
     * Tokens whose weight underflows to 0 can never be drawn, so they are dropped. */
    const float inv_t = 1.0f / p->temperature;
    if (use_heap) {
        for (size_t j = 0; j < k_heap; j++) {
            float w = exp_nonpos((c[j].w - zmax) * inv_t);
            if (w > 0) {
                c[n].w = w;
                c[n].id = c[j].id;
                n++;
            }
        }
        reordered = 1;
    } else {
        /* Dense: one exp pass that also totals the weights; top_p (without top_k) by a radix
         * select on the weights, and min_p, as one threshold pass that re-totals. */
        float *w = s->w;
        double sum = exp_sum(z, w, V, zmax, inv_t);
        if (p->top_p < 1.0f || p->min_p > 0.0f) {
            float vcut = -1.0f;
            int32_t tie_last = -1;
            if (p->top_p < 1.0f)
                top_p_cut(s, w, V, sum, (double)p->top_p * sum, &vcut, &tie_last);
            sum = keep_sum(w, V, vcut, tie_last, p->min_p);
        }
        s->dense = 1;
        s->w_sum = sum;
        return WB_OK;
    }

filters:
    /* 6. top_p: sort only as much of the head as the mass needs. Select the best `chunk`
     * remaining, sort just those, accumulate; grow the chunk geometrically, so a peaked
     * distribution costs O(n) and only a flat one approaches a full sort. */
    if (p->top_p < 1.0f && n > 1) {
        double total = 0;
        for (size_t i = 0; i < n; i++) total += c[i].w;
        const double target = (double)p->top_p * total;
        double cum = 0;
        /* Few candidates (the usual case after top_k): one small sort is cheapest. */
        size_t sorted = 0, chunk = n <= 64 ? n : 32, keep = n;
        while (sorted < n && keep == n) {
            size_t end = sorted + chunk < n ? sorted + chunk : n;
            select_best(c + sorted, n - sorted, end - sorted, s->tmp);
            if (end - sorted <= 64) rank_sort(c + sorted, end - sorted, s->tmp, 0);
            else qsort(c + sorted, end - sorted, sizeof *c, cmp_better_first);
            for (size_t j = sorted; j < end; j++) {
                cum += c[j].w;
                if (cum >= target) {
                    keep = j + 1;
                    break;
                }
            }
            sorted = end;
            chunk *= 4;
        }
        n = keep;
        reordered = 1;
    }

    /* 7. min_p relative to the most probable token, whose weight is exactly 1. */
    if (p->min_p > 0.0f) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].w >= p->min_p) c[k++] = c[i];
        n = k;
    }

    if (reordered) {
        if (n <= 64) rank_sort(c, n, s->tmp, 1);
        else qsort(c, n, sizeof *c, cmp_id);
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += c[i].w;
    s->n_surv = (int32_t)n;
    s->w_sum = sum;
    return WB_OK;
}

typedef struct typical_cand {
    double p, shift; /* probability among the survivors, |-ln p - H| */
    int32_t id;
    float w;
} typical_cand;

static int cmp_typical(const void *a, const void *b) {
    const typical_cand *x = a, *y = b;
    if (x->shift != y->shift) return x->shift < y->shift ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* 7b. typical_p (Meister et al.; the Hugging Face TypicalLogitsWarper rule, which llama.cpp
 * shares): over the survivors of steps 5-7, renormalised, H = -sum p ln p; rank tokens by how far
 * their surprise -ln p is from H (closest first, lower id on ties); keep the shortest head whose
 * mass reaches typical_p, plus any token tied with its last member; at least one token. Unlike
 * steps 5-7 this may remove the most likely token. O(n log n) in the survivors, opt-in. */
static wb_status typical_filter(wb_sampler *s, wb_err *err) {
    const double mass = (double)s->p.typical_p;
    size_t n = s->dense ? 0 : (size_t)s->n_surv;
    if (s->dense)
        for (int32_t i = 0; i < s->V; i++) n += s->w[i] > 0;
    if (n <= 1) return WB_OK;
    typical_cand *t = malloc(n * sizeof *t);
    if (!t) return wb_err_set(err, WB_ERR_NOMEM, "typical_p: out of memory");
    size_t k = 0;
    if (s->dense) {
        for (int32_t i = 0; i < s->V; i++)
            if (s->w[i] > 0) t[k++] = (typical_cand){0, 0, i, s->w[i]};
    } else {
        for (int32_t i = 0; i < s->n_surv; i++)
            t[k++] = (typical_cand){0, 0, s->cand[i].id, s->cand[i].w};
    }
    double sum = 0, h = 0;
    for (size_t i = 0; i < n; i++) sum += t[i].w;
    for (size_t i = 0; i < n; i++) {
        t[i].p = t[i].w / sum;
        if (t[i].p > 0) h -= t[i].p * log(t[i].p);
    }
    for (size_t i = 0; i < n; i++) t[i].shift = fabs(-log(t[i].p) - h);
    qsort(t, n, sizeof *t, cmp_typical);
    size_t last = 0;
    double cum = 0;
    for (size_t i = 0; i < n; i++) {
        cum += t[i].p;
        last = i;
        if (cum >= mass) break;
    }
    size_t keep = last + 1;
    while (keep < n && t[keep].shift == t[last].shift) keep++;
    /* survivors back into cand[] in ascending id order */
    for (size_t i = 0; i < keep; i++) {
        s->cand[i].w = t[i].w;
        s->cand[i].id = t[i].id;
    }
    free(t);
    if (keep <= 64) rank_sort(s->cand, keep, s->tmp, 1);
    else qsort(s->cand, keep, sizeof *s->cand, cmp_id);
    double ws = 0;
    for (size_t i = 0; i < keep; i++) ws += s->cand[i].w;
    s->dense = 0;
    s->n_surv = (int32_t)keep;
    s->w_sum = ws;
    return WB_OK;
}

/* Steps 1-7b (the allowed mask, if any, at step 3). */
static wb_status sampler_filter(wb_sampler *s, const float *logits, const int32_t *gen,
                                size_t n_gen, const uint32_t *allowed, wb_err *err) {
    wb_status st = sampler_filter_base(s, logits, gen, n_gen, allowed, err);
    if (st != WB_OK || s->p.temperature == 0.0f || s->p.typical_p >= 1.0f) return st;
    return typical_filter(s, err);
}

static inline int mask_has(const uint32_t *m, int32_t i) {
    return (int)(m[i >> 5] >> (i & 31) & 1u);
}

/* Steps 1-8, with the allowed mask where mask_stage puts it. */
static wb_status sampler_run(wb_sampler *s, const float *logits, const int32_t *gen, size_t n_gen,
                             const uint32_t *allowed, wb_err *err) {
    if (!allowed || s->p.mask_stage == WB_MASK_LOGITS)
        return sampler_filter(s, logits, gen, n_gen, allowed, err);
    const int32_t V = s->V;
    int32_t n_allowed = 0, first_allowed = -1;
    for (int32_t i = 0; i < V; i++)
        if (mask_has(allowed, i)) {
            if (first_allowed < 0) first_allowed = i;
            n_allowed++;
        }
    if (n_allowed == 0)
        return wb_err_set(err, WB_ERR_ARG, "the allowed mask is empty: nothing to sample");
    wb_status st = sampler_filter(s, logits, gen, n_gen, NULL, err);
    if (st != WB_OK) return st;
    /* Intersect the survivors with the mask and renormalise, as the reference loop did. */
    double sum = 0;
    if (s->dense) {
        float *w = s->w;
        for (int32_t i = 0; i < V; i++) {
            if (!mask_has(allowed, i)) w[i] = 0.0f;
            sum += w[i];
        }
    } else {
        int32_t k = 0;
        for (int32_t i = 0; i < s->n_surv; i++)
            if (mask_has(allowed, s->cand[i].id)) {
                s->cand[k++] = s->cand[i];
                sum += s->cand[i].w;
            }
        s->n_surv = k;
    }
    if (sum > 0) {
        s->w_sum = sum;
        return WB_OK; /* at temperature 0 the argmax itself was allowed */
    }
    s->dense = 0;
    if (s->p.mask_stage == WB_MASK_AFTER_FILTERS_UNIFORM) {
        /* The bug under study: probs = mask / mask.sum(). Every allowed id weighs the same, so
         * the greedy argmax is simply the lowest allowed id. */
        int32_t k = 0;
        for (int32_t i = 0; i < V; i++)
            if (mask_has(allowed, i)) {
                s->cand[k].w = 1.0f;
                s->cand[k].id = i;
                k++;
            }
        s->n_surv = k;
        s->w_sum = (double)k;
        s->argmax = first_allowed;
        return WB_OK;
    }
    /* The fix: the most likely allowed token (highest adjusted logit, lowest id on ties). */
    const float *z = s->z_used;
    int32_t best = -1;
    for (int32_t i = 0; i < V; i++)
        if (mask_has(allowed, i) && z[i] != -INFINITY && (best < 0 || z[i] > z[best])) best = i;
    if (best < 0)
        return wb_err_set(err, WB_ERR_ARG,
                          "every token is banned (logit_bias or the allowed mask): nothing to "
                          "sample");
    s->cand[0].w = 1.0f;
    s->cand[0].id = best;
    s->n_surv = 1;
    s->w_sum = 1.0;
    s->argmax = best;
    return WB_OK;
}

wb_status wb_sampler_apply(wb_sampler *s, const float *logits, const int32_t *generated,
                           size_t n_generated, const uint32_t *allowed, float *probs_out,
                           wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "sampler is NULL");
    if (!probs_out) return wb_err_set(err, WB_ERR_ARG, "probs_out is NULL");
    wb_status st = sampler_run(s, logits, generated, n_generated, allowed, err);
    if (st != WB_OK) return st;
    const double inv = 1.0 / s->w_sum;
    if (s->dense) {
        for (int32_t i = 0; i < s->V; i++) probs_out[i] = (float)(s->w[i] * inv);
        return WB_OK;
    }
    memset(probs_out, 0, (size_t)s->V * sizeof *probs_out);
    for (int32_t i = 0; i < s->n_surv; i++)
        probs_out[s->cand[i].id] = (float)(s->cand[i].w * inv);
    return WB_OK;
}

wb_status wb_sampler_sample(wb_sampler *s, const float *logits, const int32_t *generated,
                            size_t n_generated, const uint32_t *allowed, int32_t *id_out,
                            float *p_out, wb_err *err) {
    if (!s) return wb_err_set(err, WB_ERR_ARG, "sampler is NULL");
    if (!id_out) return wb_err_set(err, WB_ERR_ARG, "id_out is NULL");
    wb_status st = sampler_run(s, logits, generated, n_generated, allowed, err);
    if (st != WB_OK) return st;
    if (s->p.temperature == 0.0f) {
        *id_out = s->argmax;
        if (p_out) *p_out = 1.0f;
        return WB_OK;
    }
    /* The same arithmetic as wb_sampling_draw over the vector apply would write: float
     * probabilities, totalled in four partial sums by id % 4 (independent chains instead of one
     * long dependent one), one uniform, then a walk in ascending id order. */
    int32_t pick = -1;
    float pp = 0;
    const double inv = 1.0 / s->w_sum;
    if (s->dense) {
        double total = prob_total(s->w, s->V, inv);
        double target = wb_rng_uniform(&s->rng) * total;
        pick = walk_dense(s->w, s->V, inv, target, &pp);
    } else {
        const wb_cand *c = s->cand;
        double l[4] = {0, 0, 0, 0};
        for (int32_t i = 0; i < s->n_surv; i++) l[c[i].id & 3] += (double)(float)(c[i].w * inv);
        double total = (l[0] + l[1]) + (l[2] + l[3]);
        double target = wb_rng_uniform(&s->rng) * total, cum = 0;
        for (int32_t i = 0; i < s->n_surv; i++) {
            float q = (float)(c[i].w * inv);
            if (!(q > 0)) continue;
            cum += q;
            pick = c[i].id;
            pp = q;
            if (cum > target) break;
        }
    }
    if (pick < 0) { /* unreachable: the argmax always survives with weight 1 */
        pick = s->argmax;
        pp = 1.0f;
    }
    *id_out = pick;
    if (p_out) *p_out = pp;
    return WB_OK;
}

/* ===================================== one-shot helpers ==================================== */

wb_status wb_sampling_apply(const float *logits, int32_t vocab_size, const wb_sampling_params *p,
                            const int32_t *generated, size_t n_generated, float *probs_out,
                            wb_err *err) {
    if (!p) return wb_err_set(err, WB_ERR_ARG, "sampling params: NULL pointer");
    /* The distribution does not depend on the seed; fix it to skip reading urandom. */
    wb_sampling_params q = *p;
    q.has_seed = 1;
    wb_sampler *s = NULL;
    wb_status st = wb_sampler_new(&q, vocab_size, &s, err);
    if (st != WB_OK) return st;
    st = wb_sampler_apply(s, logits, generated, n_generated, NULL, probs_out, err);
    wb_sampler_free(s);
    return st;
}

int32_t wb_sampling_draw(const float *probs, int32_t vocab_size, wb_rng *rng) {
    if (!probs || !rng || vocab_size < 1) return -1;
    /* Four partial sums by id % 4, combined pairwise: the same arithmetic as
     * wb_sampler_sample, so a draw here and a draw there agree to the last bit. */
    double l[4] = {0, 0, 0, 0};
    for (int32_t i = 0; i < vocab_size; i++)
        if (probs[i] > 0) l[i & 3] += probs[i];
    double total = (l[0] + l[1]) + (l[2] + l[3]);
    if (!(total > 0)) return -1;
    double target = wb_rng_uniform(rng) * total, cum = 0;
    int32_t pick = -1;
    for (int32_t i = 0; i < vocab_size; i++) {
        if (!(probs[i] > 0)) continue;
        cum += probs[i];
        pick = i;
        if (cum > target) break;
    }
    return pick;
}

int32_t wb_sampling_argmax(const float *values, int32_t vocab_size) {
    if (!values) return -1;
    int32_t best = -1;
    float bv = -INFINITY;
    for (int32_t i = 0; i < vocab_size; i++)
        if (values[i] > bv) {
            bv = values[i];
            best = i;
        }
    return best;
}
