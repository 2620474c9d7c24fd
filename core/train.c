/* train.c - GPT-2 training on the CPU: forward and backward passes, AdamW, schedule, checkpoints.
 *
 * The layout follows llm.c's train_gpt2.c: every parameter tensor lives in one contiguous block
 * (and every gradient in a second block of the same shape), the activations of the forward pass
 * are kept for the backward pass, and each layer is a *_forward / *_backward pair of kernels whose
 * shape contract is stated first. Unlike llm.c, the weights are stored in Hugging Face's Conv1D
 * layout ([in, out]), so the parameter block can be written straight to a GPT2LMHeadModel
 * safetensors file and every matrix product is a plain row-major cblas_sgemm.
 *
 * Threads split the batch: each worker runs whole sequences through single-threaded BLAS and
 * its own gradient buffer (see run_pass). The trainer's random generator, abort flag and buffers
 * are its own; the only process-wide state touched is OpenBLAS's thread count during a pass.
 */
#include "wb_train.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#define NUM_PARAM_TENSORS 16

// ----------------------------------------------------------------------------------------------
// random numbers: xoshiro256** seeded through splitmix64, owned by the trainer

typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* uniform in [0, 1) with 53 random bits */
static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* uniform integer in [0, n) without modulo bias (Lemire's multiply-shift with rejection) */
static uint64_t rng_below(rng *r, uint64_t n) {
    unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t threshold = (0 - n) % n;
        while (lo < threshold) {
            m = (unsigned __int128)rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static double rng_normal(rng *r) {
    /* Box-Muller; the second value is dropped so the stream position depends only on the count */
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

// ----------------------------------------------------------------------------------------------
// threads: a parallel-for over row ranges for the elementwise kernels (BLAS threads itself)

typedef void (*range_fn)(void *ctx, int begin, int end);

typedef struct range_job {
    range_fn fn;
    void *ctx;
    int begin, end;
} range_job;

static void *range_thread(void *arg) {
    range_job *j = arg;
    j->fn(j->ctx, j->begin, j->end);
    return NULL;
}

/* Set on threads that already are one of several workers: their kernels must not fan out. */
static _Thread_local int tl_serial;

/* Rows are split into contiguous blocks, one per thread. Every kernel run through here writes
 * only its own rows, so results do not depend on the number of threads. */
static void parallel_for(int n, int min_rows_per_thread, range_fn fn, void *ctx) {
    enum { MAX_THREADS = 64 };
    int nt = tl_serial ? 1 : wb_threads_get();
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (min_rows_per_thread < 1) min_rows_per_thread = 1;
    if (nt > n / min_rows_per_thread) nt = n / min_rows_per_thread;
    if (nt <= 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_t tid[MAX_THREADS];
    range_job jobs[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 0; i < nt; i++) {
        jobs[i] = (range_job){fn, ctx, (int)((int64_t)n * i / nt), (int)((int64_t)n * (i + 1) / nt)};
        if (i > 0) started[i] = pthread_create(&tid[i], NULL, range_thread, &jobs[i]) == 0;
    }
    fn(ctx, jobs[0].begin, jobs[0].end);
    for (int i = 1; i < nt; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else fn(ctx, jobs[i].begin, jobs[i].end); /* no thread to spare: do it here */
    }
}

// ----------------------------------------------------------------------------------------------
// parameters: one contiguous block, tensors in Hugging Face GPT2LMHeadModel order

typedef struct param_tensors {
    float *wte;      /* [V, C]    token embedding, also the (tied) output head          */
    float *wpe;      /* [maxT, C] position embedding                                     */
    float *ln1w;     /* [L, C]                                                           */
    float *ln1b;     /* [L, C]                                                           */
    float *qkvw;     /* [L, C, 3C] Conv1D [in, out]; output columns are q | k | v       */
    float *qkvb;     /* [L, 3C]                                                          */
    float *attprojw; /* [L, C, C]                                                        */
    float *attprojb; /* [L, C]                                                           */
    float *ln2w;     /* [L, C]                                                           */
    float *ln2b;     /* [L, C]                                                           */
    float *fcw;      /* [L, C, F] F = n_inner                                            */
    float *fcb;      /* [L, F]                                                           */
    float *fcprojw;  /* [L, F, C]                                                        */
    float *fcprojb;  /* [L, C]                                                           */
    float *lnfw;     /* [C]                                                              */
    float *lnfb;     /* [C]                                                              */
} param_tensors;

/* Per-tensor facts used by init, weight decay and saving. */
typedef struct param_kind {
    const char *hf_name; /* "%d" is the layer; NULL-free names are global tensors          */
    int per_layer;
    int matrix;          /* 2-D weight: decayed, normal-initialised                         */
    int residual_proj;   /* output projection into the residual stream: init std / sqrt(2L) */
    int ones;            /* LayerNorm gain: initialised to 1                                */
} param_kind;

static const param_kind PARAM_KINDS[NUM_PARAM_TENSORS] = {
    {"transformer.wte.weight", 0, 1, 0, 0},
    {"transformer.wpe.weight", 0, 1, 0, 0},
    {"transformer.h.%d.ln_1.weight", 1, 0, 0, 1},
    {"transformer.h.%d.ln_1.bias", 1, 0, 0, 0},
    {"transformer.h.%d.attn.c_attn.weight", 1, 1, 0, 0},
    {"transformer.h.%d.attn.c_attn.bias", 1, 0, 0, 0},
    {"transformer.h.%d.attn.c_proj.weight", 1, 1, 1, 0},
    {"transformer.h.%d.attn.c_proj.bias", 1, 0, 0, 0},
    {"transformer.h.%d.ln_2.weight", 1, 0, 0, 1},
    {"transformer.h.%d.ln_2.bias", 1, 0, 0, 0},
    {"transformer.h.%d.mlp.c_fc.weight", 1, 1, 0, 0},
    {"transformer.h.%d.mlp.c_fc.bias", 1, 0, 0, 0},
    {"transformer.h.%d.mlp.c_proj.weight", 1, 1, 1, 0},
    {"transformer.h.%d.mlp.c_proj.bias", 1, 0, 0, 0},
    {"transformer.ln_f.weight", 0, 0, 0, 1},
    {"transformer.ln_f.bias", 0, 0, 0, 0},
};

/* Shape of one layer's slice (or of the whole tensor for global ones). */
static void param_shape(const wb_config *c, int i, int *ndim, int64_t shape[2]) {
    int64_t V = c->vocab_size, T = c->n_ctx, C = c->n_embd, F = c->n_inner;
    static const int nd[NUM_PARAM_TENSORS] = {2, 2, 1, 1, 2, 1, 2, 1, 1, 1, 2, 1, 2, 1, 1, 1};
    const int64_t rows[NUM_PARAM_TENSORS] = {V, T, C, C, C, 3 * C, C, C, C, C, C, F, F, C, C, C};
    const int64_t cols[NUM_PARAM_TENSORS] = {C, C, 0, 0, 3 * C, 0, C, 0, 0, 0, F, 0, C, 0, 0, 0};
    *ndim = nd[i];
    shape[0] = rows[i];
    shape[1] = cols[i];
}

static size_t param_slice_numel(const wb_config *c, int i) {
    int nd;
    int64_t s[2];
    param_shape(c, i, &nd, s);
    return (size_t)(nd == 2 ? s[0] * s[1] : s[0]);
}

static void param_sizes(const wb_config *c, size_t sizes[NUM_PARAM_TENSORS]) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        sizes[i] = param_slice_numel(c, i) * (PARAM_KINDS[i].per_layer ? (size_t)c->n_layer : 1);
}

static void point_params(param_tensors *p, float *mem, const size_t sizes[NUM_PARAM_TENSORS]) {
    float **ptrs[NUM_PARAM_TENSORS] = {&p->wte,      &p->wpe,      &p->ln1w, &p->ln1b,
                                       &p->qkvw,     &p->qkvb,     &p->attprojw, &p->attprojb,
                                       &p->ln2w,     &p->ln2b,     &p->fcw,  &p->fcb,
                                       &p->fcprojw,  &p->fcprojb,  &p->lnfw, &p->lnfb};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        *ptrs[i] = mem;
        mem += sizes[i];
    }
}

// ----------------------------------------------------------------------------------------------
// activations: everything the backward pass needs, for one (B, T)

typedef struct act_tensors {
    float *encoded;   /* [B, T, C]   wte[token] + wpe[pos]                                  */
    float *ln1;       /* [L, B, T, C]                                                       */
    float *ln1_mean;  /* [L, B, T]                                                          */
    float *ln1_rstd;  /* [L, B, T]                                                          */
    float *qkv;       /* [L, B, T, 3C]                                                      */
    float *atty;      /* [L, B, T, C]  attention output, heads side by side                 */
    float *att;       /* [L, B, NH, T, T] softmax probabilities, zero above the diagonal    */
    float *attproj;   /* [L, B, T, C]                                                       */
    float *residual2; /* [L, B, T, C]                                                       */
    float *ln2;       /* [L, B, T, C]                                                       */
    float *ln2_mean;  /* [L, B, T]                                                          */
    float *ln2_rstd;  /* [L, B, T]                                                          */
    float *fch;       /* [L, B, T, F]  before GELU                                          */
    float *fch_gelu;  /* [L, B, T, F]                                                       */
    float *fcproj;    /* [L, B, T, C]                                                       */
    float *residual3; /* [L, B, T, C]  output of each block                                 */
    float *lnf;       /* [B, T, C]                                                          */
    float *lnf_mean;  /* [B, T]                                                             */
    float *lnf_rstd;  /* [B, T]                                                             */
    float *probs;     /* [B, T, V]  logits, then softmax in place, then dlogits in place    */
    float *losses;    /* [B, T]                                                             */
} act_tensors;
#define NUM_ACT_TENSORS 21

/* Gradients of activations live only for one layer at a time: the backward pass walks the
 * layers in reverse and each layer's scratch is overwritten by the next, so these are sized for
 * one layer instead of L (llm.c keeps L of each). Each worker has its own, and B here is the
 * worker's share of the batch. */
typedef struct grad_scratch {
    float *dresidual; /* [B, T, C]  gradient flowing down the residual stream             */
    float *dln;       /* [B, T, C]  gradient w.r.t. a LayerNorm output                    */
    float *datty;     /* [B, T, C]                                                        */
    float *dbig;      /* [B, T, max(F, 3C)]  dfch (before and after GELU), then dqkv     */
    float *datt;      /* [B, NH, T, T]  scores' gradient, all heads                       */
} grad_scratch;

/* One thread's share of a batch: sequences [b0, b0 + nb). Scratch is sized for nb sequences. */
#define MAX_WORKERS 64
typedef struct worker {
    int b0, nb;
    float *grads_memory;    /* [num_params]; worker 0's is the trainer's own grads_memory    */
    param_tensors grads;
    float *scratch_memory;
    grad_scratch gs;
} worker;

// ----------------------------------------------------------------------------------------------
// the trainer

struct wb_trainer {
    wb_train_params p;      /* config.n_inner resolved                                       */
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    float *params_memory;   /* [num_params]                                                  */
    float *grads_memory;    /* [num_params]                                                  */
    float *m_memory;        /* [num_params] AdamW first moment                               */
    float *v_memory;        /* [num_params] AdamW second moment                              */
    param_tensors params;

    int act_B, act_T;       /* shape the activations are allocated for (0 = none)            */
    float *acts_memory;
    act_tensors acts;
    worker *workers;        /* [n_workers] = min(threads, B)                                 */
    int n_workers;
    atomic_int cancel;      /* set by worker 0 when the abort callback fires                 */
    int32_t *inputs;        /* [B, T]                                                        */
    int32_t *targets;       /* [B, T]                                                        */

    int32_t *train;         /* [n_train] token stream                                        */
    size_t n_train;
    int32_t *val;           /* [n_val]                                                       */
    size_t n_val;

    rng rng;                /* batch sampling (initialisation used it first)                 */
    int step;               /* optimizer steps done                                          */
    wb_abort_fn abort_fn;
    void *abort_data;
};

static int aborted(const wb_trainer *t) { return t->abort_fn && t->abort_fn(t->abort_data); }

static wb_status cancelled(wb_err *err) {
    return wb_err_set(err, WB_ERR_CANCELLED, "trainer: cancelled by the abort callback");
}

// ----------------------------------------------------------------------------------------------
// kernels. Shapes: B batch, T time, C channels, OC output channels, F MLP width, NH heads, V vocab.

/* encoder: out[B,T,C] = wte[inp[b,t]] + wpe[t] */
static void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                            int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

/* dwte[V,C] += scatter of dout[B,T,C] by token; dwpe[T,C] += sum over b */
static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                             int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *dwe = dwte + (size_t)inp[b * T + t] * C, *dpe = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                dwe[i] += d[i];
                dpe[i] += d[i];
            }
        }
}

/* layernorm over C: out[N,C], mean[N], rstd[N] from inp[N,C], weight[C], bias[C] */
typedef struct ln_ctx {
    float *out, *mean, *rstd;
    const float *inp, *w, *b;
    int C;
    float eps;
    /* backward */
    float *dinp;
    const float *dout;
} ln_ctx;

static void layernorm_forward_rows(void *vctx, int begin, int end) {
    const ln_ctx *c = vctx;
    int C = c->C;
    for (int n = begin; n < end; n++) {
        const float *x = c->inp + (size_t)n * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= C;
        float s = 1.0f / sqrtf(v + c->eps);
        float *o = c->out + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - m) * s * c->w[i] + c->b[i];
        c->mean[n] = m;
        c->rstd[n] = s;
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C, float eps) {
    ln_ctx c = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .w = w, .b = b, .C = C,
                .eps = eps};
    parallel_for(N, 64, layernorm_forward_rows, &c);
}

static void layernorm_backward_rows(void *vctx, int begin, int end) {
    const ln_ctx *c = vctx;
    int C = c->C;
    for (int n = begin; n < end; n++) {
        const float *x = c->inp + (size_t)n * C, *dy = c->dout + (size_t)n * C;
        float m = c->mean[n], s = c->rstd[n];
        /* dxhat = dy * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s, dxhat = dy[i] * c->w[i];
            dnorm_mean += dxhat;
            dnorm_norm_mean += dxhat * xhat;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        float *dx = c->dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s, dxhat = dy[i] * c->w[i];
            dx[i] += s * (dxhat - dnorm_mean - xhat * dnorm_norm_mean);
        }
    }
}

/* dinp[N,C] += ..., dw[C] += ..., db[C] += ... from dout[N,C]. The parameter gradients are summed
 * over rows serially so their rounding never depends on the thread count. */
static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        for (int i = 0; i < C; i++) {
            db[i] += dy[i];
            dw[i] += (x[i] - m) * s * dy[i];
        }
    }
    ln_ctx c = {.dinp = dinp, .dout = dout, .inp = inp, .w = w, .mean = (float *)mean,
                .rstd = (float *)rstd, .C = C};
    parallel_for(N, 64, layernorm_backward_rows, &c);
}

/* matmul: out[N,OC] = inp[N,C] @ w[C,OC] + bias[OC]   (bias may be NULL) */
static void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N,
                           int C, int OC) {
    float beta = 0.0f;
    if (bias) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, C, 1.0f, inp, C, w, OC, beta,
                out, OC);
}

/* dinp[N,C] = dout[N,OC] @ w^T (overwritten), dw[C,OC] += inp^T @ dout, dbias[OC] += sum dout */
static void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC, 1.0f, dout, OC, w, OC, 0.0f,
                dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f,
                dw, OC);
    if (dbias)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) dbias[o] += d[o];
        }
}

/* 4-float vectors (GCC/Clang vector extensions; plain SSE2 on x86-64). libm's expf and tanhf
 * are scalar calls and were a third of the step time; these branch-free forms vectorise. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f v4_load(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void v4_store(float *p, v4f v) { memcpy(p, &v, sizeof v); }

static inline v4f v4_select(v4i mask, v4f a, v4f b) { return (v4f)(((v4i)a & mask) | ((v4i)b & ~mask)); }

/* exp(x), Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r, 2^n through the
 * exponent bits. Relative error ~2e-7; inputs clamped to the finite range. */
static inline v4f v4_exp(v4f x) {
    x = v4_select(x > 88.3762626647949f, x - x + 88.3762626647949f, x);
    x = v4_select(x < -87.3365447505531f, x - x - 87.3365447505531f, x);
    v4f n = x * 1.44269504088896341f + 12582912.0f; /* round to nearest via 1.5 * 2^23 */
    n = n - 12582912.0f;
    v4f r = x - n * 0.693359375f - n * -2.12194440e-4f;
    v4f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    v4i e = (__builtin_convertvector(n, v4i) + 127) << 23;
    return p * (v4f)e;
}

static inline float exp_scalar(float x) { return v4_exp((v4f){x, 0, 0, 0})[0]; }

/* In place over row[0..n): row = exp(row - mx); returns the sum. Same order of operations for
 * every n, so results never depend on how rows are split over threads. */
static float exp_shift_sum(float *row, int n, float mx) {
    v4f acc = {0, 0, 0, 0};
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        v4f e = v4_exp(v4_load(row + j) - mx);
        v4_store(row + j, e);
        acc += e;
    }
    float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (; j < n; j++) sum += (row[j] = exp_scalar(row[j] - mx));
    return sum;
}

static float row_max(const float *row, int n) {
    v4f m = {-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX};
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        v4f v = v4_load(row + j);
        m = v4_select(v > m, v, m);
    }
    float mx = fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
    for (; j < n; j++) mx = row[j] > mx ? row[j] : mx;
    return mx;
}

/* attention: out[B,T,C] and att[B,NH,T,T] from qkv[B,T,3C]; causal, scaled by 1/sqrt(hs).
 * Q K^T and att V are GEMMs per (b, h) on strided views of qkv. The upper triangle of the score
 * matrix is computed and then zeroed, which costs less than looping over the triangle by hand;
 * the softmax in between runs over all B*NH*T rows on the threads. */
typedef struct att_ctx {
    float *att, *datt;
    int T;
} att_ctx;

static void attention_softmax_rows(void *vctx, int begin, int end) {
    const att_ctx *c = vctx;
    int T = c->T;
    for (int r = begin; r < end; r++) {
        int t = r % T;
        float *row = c->att + (size_t)r * T;
        float inv = 1.0f / exp_shift_sum(row, t + 1, row_max(row, t + 1));
        for (int j = 0; j <= t; j++) row[j] *= inv;
        for (int j = t + 1; j < T; j++) row[j] = 0.0f;
    }
}

static void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                              int NH) {
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hs, *k = q + C;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3,
                        0.0f, att + ((size_t)b * NH + h) * T * T, T);
        }
    att_ctx c = {.att = att, .T = T};
    parallel_for(B * NH * T, 64, attention_softmax_rows, &c);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *v = qkv + (size_t)b * T * C3 + h * hs + 2 * C;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f,
                        att + ((size_t)b * NH + h) * T * T, T, v, C3, 0.0f,
                        out + (size_t)b * T * C + h * hs, C);
        }
}

/* softmax backward, in place: datt becomes dscore = att * (datt - sum(att * datt)) */
static void attention_softmax_backward_rows(void *vctx, int begin, int end) {
    const att_ctx *c = vctx;
    int T = c->T;
    for (int r = begin; r < end; r++) {
        int t = r % T;
        const float *ar = c->att + (size_t)r * T;
        float *dr = c->datt + (size_t)r * T;
        float dot = 0.0f;
        for (int j = 0; j <= t; j++) dot += ar[j] * dr[j];
        for (int j = 0; j <= t; j++) dr[j] = ar[j] * (dr[j] - dot);
        for (int j = t + 1; j < T; j++) dr[j] = 0.0f;
    }
}

/* dqkv[B,T,3C] (overwritten) from dout[B,T,C], qkv, att; datt[B,NH,T,T] is scratch */
static void attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv,
                               const float *att, int B, int T, int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *v = qkv + (size_t)b * T * C3 + h * hs + 2 * C;
            float *dv = dqkv + (size_t)b * T * C3 + h * hs + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hs;
            /* datt = dy v^T ; dv = att^T dy */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3,
                        0.0f, datt + ((size_t)b * NH + h) * T * T, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dy, C,
                        0.0f, dv, C3);
        }
    att_ctx c = {.att = (float *)att, .datt = datt, .T = T};
    parallel_for(B * NH * T, 64, attention_softmax_backward_rows, &c);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hs, *k = q + C;
            float *dq = dqkv + (size_t)b * T * C3 + h * hs, *dk = dq + C;
            const float *ds = datt + ((size_t)b * NH + h) * T * T;
            /* dq = dscore k * scale ; dk = dscore^T q * scale */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, ds, T, k, C3,
                        0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, ds, T, q, C3,
                        0.0f, dk, C3);
        }
}

/* GELU, tanh approximation ("gelu_new"): out[N] from inp[N] */
#define GELU_SCALING_FACTOR 0.7978845608028654f /* sqrt(2 / pi) */

/* tanh as a 13/6 rational function (Eigen's fast float tanh, error below 4e-7). */
static inline v4f v4_tanh(v4f a) {
    const float clamp = 7.90531110763549805f; /* tanh is 1.0f beyond this */
    v4f x = v4_select(a > clamp, a - a + clamp, a);
    x = v4_select(x < -clamp, x - x - clamp, x);
    v4f x2 = x * x;
    v4f p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * x;
    v4f q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return p / q; /* near 0 this is x * 0.99999987: no special case needed */
}

static inline v4f v4_gelu(v4f x) {
    return 0.5f * x * (1.0f + v4_tanh(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x)));
}

/* d gelu(x) / dx */
static inline v4f v4_gelu_grad(v4f x) {
    v4f th = v4_tanh(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x));
    v4f sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) +
           x * 0.5f * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
}

typedef struct gelu_ctx {
    float *out;
    const float *inp;
} gelu_ctx;

/* ranges are in units of 4 floats; N is a multiple of 4 (see gelu_forward) */
static void gelu_forward_rows(void *vctx, int begin, int end) {
    const gelu_ctx *c = vctx;
    for (int i = begin * 4; i < end * 4; i += 4) v4_store(c->out + i, v4_gelu(v4_load(c->inp + i)));
}

static void gelu_forward(float *out, const float *inp, int N) {
    gelu_ctx c = {out, inp};
    parallel_for(N / 4, 4096, gelu_forward_rows, &c);
    for (int i = N / 4 * 4; i < N; i++) { /* tail */
        float x[4] = {inp[i]};
        out[i] = v4_gelu(v4_load(x))[0];
    }
}

/* in place: d[N] (gradient w.r.t. the output) becomes the gradient w.r.t. inp[N] */
static void gelu_backward_rows(void *vctx, int begin, int end) {
    const gelu_ctx *c = vctx;
    for (int i = begin * 4; i < end * 4; i += 4)
        v4_store(c->out + i, v4_load(c->out + i) * v4_gelu_grad(v4_load(c->inp + i)));
}

static void gelu_backward(float *d, const float *inp, int N) {
    gelu_ctx c = {d, inp};
    parallel_for(N / 4, 4096, gelu_backward_rows, &c);
    for (int i = N / 4 * 4; i < N; i++) {
        float x[4] = {inp[i]};
        d[i] *= v4_gelu_grad(v4_load(x))[0];
    }
}

/* residual: out[N] = a[N] + b[N] */
static void residual_forward(float *out, const float *a, const float *b, size_t N) {
    for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

/* softmax cross-entropy: probs[N,V] holds logits and becomes softmax; losses[N].
 * With targets == NULL only the softmax is taken. */
typedef struct xent_ctx {
    float *probs, *losses;
    const int32_t *targets;
    int V;
    float dscale;
} xent_ctx;

static void softmax_crossentropy_forward_rows(void *vctx, int begin, int end) {
    const xent_ctx *c = vctx;
    int V = c->V;
    for (int n = begin; n < end; n++) {
        float *p = c->probs + (size_t)n * V;
        float inv = 1.0f / exp_shift_sum(p, V, row_max(p, V));
        for (int i = 0; i < V; i++) p[i] *= inv;
        if (c->targets) c->losses[n] = -logf(fmaxf(p[c->targets[n]], 1e-30f));
    }
}

static void softmax_crossentropy_forward(float *probs, float *losses, const int32_t *targets,
                                         int N, int V) {
    xent_ctx c = {.probs = probs, .losses = losses, .targets = targets, .V = V};
    parallel_for(N, 32, softmax_crossentropy_forward_rows, &c);
}

/* in place: probs[N,V] becomes dlogits = (probs - onehot(target)) * dscale, the gradient of the
 * mean loss over the whole batch (dscale = 1/(B*T)) */
static void softmax_crossentropy_backward_rows(void *vctx, int begin, int end) {
    const xent_ctx *c = vctx;
    int V = c->V;
    for (int n = begin; n < end; n++) {
        float *p = c->probs + (size_t)n * V;
        p[c->targets[n]] -= 1.0f;
        for (int i = 0; i < V; i++) p[i] *= c->dscale;
    }
}

static void softmax_crossentropy_backward(float *probs, const int32_t *targets, int N, int V,
                                          float dscale) {
    xent_ctx c = {.probs = probs, .targets = targets, .V = V, .dscale = dscale};
    parallel_for(N, 32, softmax_crossentropy_backward_rows, &c);
}

// ----------------------------------------------------------------------------------------------
// allocation

static void trainer_free_acts(wb_trainer *t) {
    free(t->acts_memory);
    free(t->inputs);
    free(t->targets);
    for (int i = 0; i < t->n_workers; i++) {
        free(t->workers[i].scratch_memory);
        if (i > 0) free(t->workers[i].grads_memory);
    }
    free(t->workers);
    t->acts_memory = NULL;
    t->inputs = t->targets = NULL;
    t->workers = NULL;
    t->n_workers = 0;
    t->act_B = t->act_T = 0;
}

/* (Re)allocate activations for B x T and the workers for the current thread count; a no-op
 * when nothing changed. */
static wb_status trainer_ensure_acts(wb_trainer *t, int B, int T, wb_err *err) {
    int nw = wb_threads_get();
    if (nw > B) nw = B;
    if (nw > MAX_WORKERS) nw = MAX_WORKERS;
    if (t->act_B == B && t->act_T == T && t->n_workers == nw) return WB_OK;
    trainer_free_acts(t);
    const wb_config *c = &t->p.config;
    size_t L = c->n_layer, C = c->n_embd, NH = c->n_head, F = c->n_inner, V = c->vocab_size;
    size_t BT = (size_t)B * T;
    size_t sizes[NUM_ACT_TENSORS] = {
        BT * C,     L * BT * C, L * BT,     L * BT,     L * BT * 3 * C, L * BT * C,
        L * B * NH * T * T,     L * BT * C, L * BT * C, L * BT * C,     L * BT,
        L * BT,     L * BT * F, L * BT * F, L * BT * C, L * BT * C,     BT * C,
        BT,         BT,         BT * V,     BT};
    size_t total = 0;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) total += sizes[i];
    t->acts_memory = malloc(total * sizeof(float));
    t->inputs = malloc(BT * sizeof(int32_t));
    t->targets = malloc(BT * sizeof(int32_t));
    t->workers = calloc((size_t)nw, sizeof *t->workers);
    int ok = t->acts_memory && t->inputs && t->targets && t->workers;
    if (t->workers) t->n_workers = nw;
    size_t big = F > 3 * C ? F : 3 * C;
    for (int i = 0; ok && i < nw; i++) {
        worker *w = &t->workers[i];
        w->b0 = (int)((int64_t)B * i / nw);
        w->nb = (int)((int64_t)B * (i + 1) / nw) - w->b0;
        size_t rows = (size_t)w->nb * T;
        w->scratch_memory = malloc((rows * C * 3 + rows * big + (size_t)w->nb * NH * T * T) *
                                   sizeof(float));
        w->grads_memory = i == 0 ? t->grads_memory : malloc(t->num_params * sizeof(float));
        ok = w->scratch_memory && w->grads_memory;
        if (!ok) break;
        point_params(&w->grads, w->grads_memory, t->param_sizes);
        float *s = w->scratch_memory;
        w->gs.dresidual = s, s += rows * C;
        w->gs.dln = s, s += rows * C;
        w->gs.datty = s, s += rows * C;
        w->gs.dbig = s, s += rows * big;
        w->gs.datt = s;
    }
    if (!ok) {
        trainer_free_acts(t);
        return wb_err_set(err, WB_ERR_NOMEM, "trainer: cannot allocate %.1f MB of activations for "
                          "batch %d x %d", (double)total * 4 / 1e6, B, T);
    }
    float **ptrs[NUM_ACT_TENSORS] = {
        &t->acts.encoded,   &t->acts.ln1,      &t->acts.ln1_mean,  &t->acts.ln1_rstd,
        &t->acts.qkv,       &t->acts.atty,     &t->acts.att,       &t->acts.attproj,
        &t->acts.residual2, &t->acts.ln2,      &t->acts.ln2_mean,  &t->acts.ln2_rstd,
        &t->acts.fch,       &t->acts.fch_gelu, &t->acts.fcproj,    &t->acts.residual3,
        &t->acts.lnf,       &t->acts.lnf_mean, &t->acts.lnf_rstd,  &t->acts.probs,
        &t->acts.losses};
    float *m = t->acts_memory;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) {
        *ptrs[i] = m;
        m += sizes[i];
    }
    t->act_B = B;
    t->act_T = T;
    return WB_OK;
}

// ----------------------------------------------------------------------------------------------
// forward and backward passes of the whole model, on one worker's share of the batch
//
// Threads split the batch, not the matrices: with W threads, worker i runs sequences
// [b0, b0 + nb) through the whole model with single-threaded BLAS, into its slice of the shared
// activations and its own gradient buffer; the buffers are summed in worker order afterwards.
// On two cores this scales better than OpenBLAS's threading of the many small per-head GEMMs.
// The split is fixed for a given thread count, so results are reproducible for that count.

/* Polled between layers. Only worker 0 (the caller's thread) calls the user's callback, which
 * need not be thread-safe; the others follow through an atomic flag. */
static int should_stop(wb_trainer *t, const worker *w) {
    if (w == &t->workers[0] && aborted(t)) atomic_store(&t->cancel, 1);
    return atomic_load(&t->cancel);
}

/* Per-position losses of the worker's sequences into acts.losses; 1 when cancelled. */
static int gpt2_forward(wb_trainer *t, const worker *w) {
    const wb_config *cfg = &t->p.config;
    int L = cfg->n_layer, C = cfg->n_embd, NH = cfg->n_head, F = cfg->n_inner, V = cfg->vocab_size;
    int B = t->act_B, T = t->act_T, N = w->nb * T; /* N rows of this worker */
    size_t r0 = (size_t)w->b0 * T;                  /* its first row in [B*T] */
    float eps = cfg->layer_norm_epsilon;
    const param_tensors *p = &t->params;
    act_tensors *a = &t->acts;
    const int32_t *inputs = t->inputs + r0, *targets = t->targets + r0;

    float *encoded = a->encoded + r0 * C;
    encoder_forward(encoded, inputs, p->wte, p->wpe, w->nb, T, C);
    const float *residual = encoded;
    for (int l = 0; l < L; l++) {
        if (should_stop(t, w)) return 1;
        size_t o = (size_t)l * B * T + r0; /* this worker's first row of layer l */
        float *ln1 = a->ln1 + o * C, *qkv = a->qkv + o * 3 * C, *atty = a->atty + o * C;
        float *att = a->att + ((size_t)l * B + w->b0) * NH * T * T, *attproj = a->attproj + o * C;
        float *res2 = a->residual2 + o * C, *ln2 = a->ln2 + o * C, *fch = a->fch + o * F;
        float *fchg = a->fch_gelu + o * F, *fcproj = a->fcproj + o * C, *res3 = a->residual3 + o * C;
        layernorm_forward(ln1, a->ln1_mean + o, a->ln1_rstd + o, residual, p->ln1w + l * C,
                          p->ln1b + l * C, N, C, eps);
        matmul_forward(qkv, ln1, p->qkvw + (size_t)l * C * 3 * C, p->qkvb + l * 3 * C, N, C,
                       3 * C);
        attention_forward(atty, att, qkv, w->nb, T, C, NH);
        matmul_forward(attproj, atty, p->attprojw + (size_t)l * C * C, p->attprojb + l * C, N,
                       C, C);
        residual_forward(res2, residual, attproj, (size_t)N * C);
        layernorm_forward(ln2, a->ln2_mean + o, a->ln2_rstd + o, res2, p->ln2w + l * C,
                          p->ln2b + l * C, N, C, eps);
        matmul_forward(fch, ln2, p->fcw + (size_t)l * C * F, p->fcb + (size_t)l * F, N, C, F);
        gelu_forward(fchg, fch, N * F);
        matmul_forward(fcproj, fchg, p->fcprojw + (size_t)l * F * C, p->fcprojb + l * C, N, F,
                       C);
        residual_forward(res3, res2, fcproj, (size_t)N * C);
        residual = res3;
    }
    float *lnf = a->lnf + r0 * C, *probs = a->probs + r0 * V;
    layernorm_forward(lnf, a->lnf_mean + r0, a->lnf_rstd + r0, residual, p->lnfw, p->lnfb, N, C,
                      eps);
    /* tied head: logits[N,V] = lnf[N,C] @ wte[V,C]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, lnf, C, p->wte, C, 0.0f,
                probs, V);
    softmax_crossentropy_forward(probs, a->losses + r0, targets, N, V);
    return 0;
}

/* Gradients of the batch's mean loss (over all B*T targets) from this worker's sequences,
 * written (not added) to the worker's gradient buffer; 1 when cancelled. */
static int gpt2_backward(wb_trainer *t, worker *w) {
    const wb_config *cfg = &t->p.config;
    int L = cfg->n_layer, C = cfg->n_embd, NH = cfg->n_head, F = cfg->n_inner, V = cfg->vocab_size;
    int B = t->act_B, T = t->act_T, N = w->nb * T;
    size_t r0 = (size_t)w->b0 * T;
    const param_tensors *p = &t->params;
    param_tensors *g = &w->grads;
    act_tensors *a = &t->acts;
    grad_scratch *s = &w->gs;

    memset(w->grads_memory, 0, t->num_params * sizeof(float));
    float *dlogits = a->probs + r0 * V, *lnf = a->lnf + r0 * C;
    softmax_crossentropy_backward(dlogits, t->targets + r0, N, V, 1.0f / ((float)B * T));
    /* head: dlnf = dlogits @ wte ; dwte += dlogits^T @ lnf */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, dlogits, V, p->wte, C,
                0.0f, s->dln, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, dlogits, V, lnf, C, 1.0f,
                g->wte, C);
    memset(s->dresidual, 0, (size_t)N * C * sizeof(float));
    const float *last = a->residual3 + ((size_t)(L - 1) * B * T + r0) * C;
    layernorm_backward(s->dresidual, g->lnfw, g->lnfb, s->dln, last, p->lnfw, a->lnf_mean + r0,
                       a->lnf_rstd + r0, N, C);

    for (int l = L - 1; l >= 0; l--) {
        if (should_stop(t, w)) return 1;
        size_t o = (size_t)l * B * T + r0;
        const float *residual = l == 0 ? a->encoded + r0 * C
                                       : a->residual3 + (o - (size_t)B * T) * C;
        const float *ln1 = a->ln1 + o * C, *qkv = a->qkv + o * 3 * C, *atty = a->atty + o * C;
        const float *att = a->att + ((size_t)l * B + w->b0) * NH * T * T;
        const float *res2 = a->residual2 + o * C;
        const float *ln2 = a->ln2 + o * C, *fch = a->fch + o * F, *fchg = a->fch_gelu + o * F;
        float *dfch = s->dbig, *dqkv = s->dbig;

        /* dresidual is d(residual3): it flows to residual2 unchanged and into the MLP */
        matmul_backward(dfch, g->fcprojw + (size_t)l * F * C, g->fcprojb + l * C, s->dresidual,
                        fchg, p->fcprojw + (size_t)l * F * C, N, F, C);
        gelu_backward(dfch, fch, N * F);
        matmul_backward(s->dln, g->fcw + (size_t)l * C * F, g->fcb + (size_t)l * F, dfch, ln2,
                        p->fcw + (size_t)l * C * F, N, C, F);
        layernorm_backward(s->dresidual, g->ln2w + l * C, g->ln2b + l * C, s->dln, res2,
                           p->ln2w + l * C, a->ln2_mean + o, a->ln2_rstd + o, N, C);
        /* dresidual is now d(residual2): it flows to the block input and into attention */
        matmul_backward(s->datty, g->attprojw + (size_t)l * C * C, g->attprojb + l * C,
                        s->dresidual, atty, p->attprojw + (size_t)l * C * C, N, C, C);
        attention_backward(dqkv, s->datt, s->datty, qkv, att, w->nb, T, C, NH);
        matmul_backward(s->dln, g->qkvw + (size_t)l * C * 3 * C, g->qkvb + l * 3 * C, dqkv, ln1,
                        p->qkvw + (size_t)l * C * 3 * C, N, C, 3 * C);
        layernorm_backward(s->dresidual, g->ln1w + l * C, g->ln1b + l * C, s->dln, residual,
                           p->ln1w + l * C, a->ln1_mean + o, a->ln1_rstd + o, N, C);
    }
    encoder_backward(g->wte, g->wpe, s->dresidual, t->inputs + r0, w->nb, T, C);
    return 0;
}

typedef struct pass_job {
    wb_trainer *t;
    worker *w;
    int backward;
} pass_job;

static void *pass_thread(void *arg) {
    pass_job *j = arg;
    tl_serial = 1;
    if (!gpt2_forward(j->t, j->w) && j->backward) gpt2_backward(j->t, j->w);
    return NULL;
}

typedef struct reduce_ctx {
    wb_trainer *t;
} reduce_ctx;

static void reduce_grads_rows(void *vctx, int begin, int end) {
    wb_trainer *t = ((reduce_ctx *)vctx)->t;
    size_t lo = (size_t)begin * 1024, hi = (size_t)end * 1024;
    if (hi > t->num_params) hi = t->num_params;
    float *g0 = t->grads_memory;
    for (int k = 1; k < t->n_workers; k++) { /* fixed order: reproducible sums */
        const float *gk = t->workers[k].grads_memory;
        for (size_t i = lo; i < hi; i++) g0[i] += gk[i];
    }
}

/* Forward (and backward) over t->inputs/targets on all workers; *loss = mean over B*T. */
static wb_status run_pass(wb_trainer *t, int backward, float *loss, wb_err *err) {
    int nw = t->n_workers;
    atomic_store(&t->cancel, 0);
    pthread_t tid[MAX_WORKERS];
    pass_job jobs[MAX_WORKERS];
    int started[MAX_WORKERS] = {0};
    if (nw > 1) { /* OpenBLAS is always single-threaded (base.c) */
        tl_serial = 1;
        for (int i = 1; i < nw; i++) {
            jobs[i] = (pass_job){t, &t->workers[i], backward};
            started[i] = pthread_create(&tid[i], NULL, pass_thread, &jobs[i]) == 0;
        }
    }
    if (!gpt2_forward(t, &t->workers[0]) && backward) gpt2_backward(t, &t->workers[0]);
    for (int i = 1; i < nw; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else if (!gpt2_forward(t, &t->workers[i]) && backward) /* no thread: do it here */
            gpt2_backward(t, &t->workers[i]);
    }
    if (nw > 1) {
        tl_serial = 0;
    }
    if (atomic_load(&t->cancel)) return cancelled(err);
    if (backward && nw > 1) {
        reduce_ctx rc = {t};
        parallel_for((int)((t->num_params + 1023) / 1024), 64, reduce_grads_rows, &rc);
    }
    int BT = t->act_B * t->act_T;
    double sum = 0.0;
    for (int i = 0; i < BT; i++) sum += t->acts.losses[i];
    *loss = (float)(sum / BT);
    return WB_OK;
}

// ----------------------------------------------------------------------------------------------
// parameters: validation, init

wb_train_params wb_train_default_params(void) {
    wb_train_params p;
    memset(&p, 0, sizeof p);
    /* TinyLM */
    p.config.vocab_size = 2048;
    p.config.n_ctx = 128;
    p.config.n_embd = 128;
    p.config.n_layer = 4;
    p.config.n_head = 4;
    p.config.n_inner = 512;
    p.config.layer_norm_epsilon = 1e-5f;
    p.config.tie_word_embeddings = 1;
    p.seed = 1337;
    p.batch_size = 16;
    p.seq_len = 128;
    p.max_steps = 3000;
    p.warmup_steps = 100;
    p.lr = 3e-3f;
    p.min_lr = 3e-4f;
    p.weight_decay = 0.1f;
    p.beta1 = 0.9f;
    p.beta2 = 0.95f;
    p.eps = 1e-8f;
    p.grad_clip = 1.0f;
    p.init_std = 0.02f;
    return p;
}

static wb_status check_int(const char *field, int64_t v, int64_t lo, int64_t hi, wb_err *err) {
    if (v < lo || v > hi)
        return wb_err_set(err, lo > 0 && v <= 0 ? WB_ERR_ARG : WB_ERR_RANGE,
                          "trainer: %s must be in [%" PRId64 ", %" PRId64 "] (got %" PRId64 ")",
                          field, lo, hi, v);
    return WB_OK;
}

static wb_status check_float(const char *field, float v, double lo, double hi, int hi_open,
                             wb_err *err) {
    if (!isfinite(v) || v < lo || v > hi || (hi_open && v >= hi))
        return wb_err_set(err, WB_ERR_ARG, "trainer: %s must be in [%g, %g%c (got %g)", field, lo,
                          hi, hi_open ? ')' : ']', (double)v);
    return WB_OK;
}

/* Validate p and resolve defaults (n_inner 0 = 4C) into *out. */
static wb_status check_params(const wb_train_params *p, wb_train_params *out, wb_err *err) {
    wb_status st;
    const wb_config *c = &p->config;
#define TRY(x)                                                                                 \
    if ((st = (x)) != WB_OK) return st
    TRY(check_int("config.vocab_size", c->vocab_size, 1, 1 << 20, err));
    TRY(check_int("config.n_ctx", c->n_ctx, 1, 1 << 14, err));
    TRY(check_int("config.n_embd", c->n_embd, 1, 1 << 14, err));
    TRY(check_int("config.n_layer", c->n_layer, 1, 256, err));
    TRY(check_int("config.n_head", c->n_head, 1, c->n_embd, err));
    if (c->n_embd % c->n_head != 0)
        return wb_err_set(err, WB_ERR_ARG, "trainer: config.n_embd (%d) must be a multiple of "
                          "config.n_head (%d)", c->n_embd, c->n_head);
    TRY(check_int("config.n_inner", c->n_inner, 0, 1 << 16, err));
    TRY(check_float("config.layer_norm_epsilon", c->layer_norm_epsilon, 1e-12, 1.0, 0, err));
    if (!c->tie_word_embeddings)
        return wb_err_set(err, WB_ERR_ARG, "trainer: config.tie_word_embeddings must be set (the "
                          "trainer always ties the head to wte)");
    TRY(check_int("batch_size", p->batch_size, 1, 1 << 16, err));
    TRY(check_int("seq_len", p->seq_len, 1, 1 << 14, err));
    if (p->seq_len > c->n_ctx)
        return wb_err_set(err, WB_ERR_RANGE, "trainer: seq_len (%d) exceeds config.n_ctx (%d)",
                          p->seq_len, c->n_ctx);
    TRY(check_int("max_steps", p->max_steps, 1, INT32_MAX, err));
    TRY(check_int("warmup_steps", p->warmup_steps, 0, INT32_MAX, err));
    TRY(check_float("lr", p->lr, 0.0, 10.0, 0, err));
    TRY(check_float("min_lr", p->min_lr, 0.0, 10.0, 0, err));
    TRY(check_float("weight_decay", p->weight_decay, 0.0, 10.0, 0, err));
    TRY(check_float("beta1", p->beta1, 0.0, 1.0, 1, err));
    TRY(check_float("beta2", p->beta2, 0.0, 1.0, 1, err));
    TRY(check_float("eps", p->eps, 1e-30, 1.0, 0, err));
    TRY(check_float("grad_clip", p->grad_clip, 0.0, 1e30, 0, err));
    TRY(check_float("init_std", p->init_std, 1e-9, 10.0, 0, err));
#undef TRY
    *out = *p;
    if (out->config.n_inner == 0) out->config.n_inner = 4 * c->n_embd;
    /* activations are indexed with int B*T*max(V, F, 3C) in places */
    double bt = (double)p->batch_size * p->seq_len;
    double widest = fmax(fmax(c->vocab_size, out->config.n_inner), 3.0 * c->n_embd);
    if (bt * widest > (double)INT32_MAX || bt * p->seq_len * c->n_head > (double)INT32_MAX)
        return wb_err_set(err, WB_ERR_RANGE, "trainer: batch_size x seq_len (%d x %d) is too "
                          "large for this model", p->batch_size, p->seq_len);
    return WB_OK;
}

static void init_params(wb_trainer *t) {
    const wb_config *c = &t->p.config;
    float *m = t->params_memory;
    double resid_scale = 1.0 / sqrt(2.0 * c->n_layer);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const param_kind *k = &PARAM_KINDS[i];
        size_t n = t->param_sizes[i];
        if (k->matrix) {
            /* GPT-2: N(0, 0.02); projections into the residual stream scaled by 1/sqrt(2L) so
             * the residual's variance does not grow with depth */
            double std = t->p.init_std * (k->residual_proj ? resid_scale : 1.0);
            for (size_t j = 0; j < n; j++) m[j] = (float)(std * rng_normal(&t->rng));
        } else {
            for (size_t j = 0; j < n; j++) m[j] = k->ones ? 1.0f : 0.0f;
        }
        m += n;
    }
}

// ----------------------------------------------------------------------------------------------
// public API: lifetime and data

wb_status wb_trainer_new(const wb_train_params *p, wb_trainer **out, wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "wb_trainer_new: out is NULL");
    *out = NULL;
    if (!p) return wb_err_set(err, WB_ERR_ARG, "wb_trainer_new: params is NULL");
    wb_train_params rp;
    wb_status st = check_params(p, &rp, err);
    if (st != WB_OK) return st;
    wb_trainer *t = calloc(1, sizeof *t);
    if (!t) return wb_err_set(err, WB_ERR_NOMEM, "wb_trainer_new: out of memory");
    t->p = rp;
    param_sizes(&t->p.config, t->param_sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) t->num_params += t->param_sizes[i];
    size_t bytes = t->num_params * sizeof(float);
    t->params_memory = malloc(bytes);
    t->grads_memory = calloc(t->num_params, sizeof(float));
    t->m_memory = calloc(t->num_params, sizeof(float));
    t->v_memory = calloc(t->num_params, sizeof(float));
    if (!t->params_memory || !t->grads_memory || !t->m_memory || !t->v_memory) {
        size_t n = t->num_params;
        wb_trainer_free(t);
        return wb_err_set(err, WB_ERR_NOMEM, "wb_trainer_new: cannot allocate %zu parameters", n);
    }
    point_params(&t->params, t->params_memory, t->param_sizes);
    rng_seed(&t->rng, t->p.seed);
    init_params(t);
    *out = t;
    return WB_OK;
}

void wb_trainer_free(wb_trainer *t) {
    if (!t) return;
    trainer_free_acts(t);
    free(t->params_memory);
    free(t->grads_memory);
    free(t->m_memory);
    free(t->v_memory);
    free(t->train);
    free(t->val);
    free(t);
}

static wb_status check_ids(const char *what, const int32_t *ids, size_t n, int32_t V,
                           wb_err *err) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return wb_err_set(err, WB_ERR_RANGE, "trainer: %s token %" PRId32 " at index %zu is "
                              "outside the vocabulary [0, %" PRId32 ")", what, ids[i], i, V);
    return WB_OK;
}

wb_status wb_trainer_set_data(wb_trainer *t, const int32_t *train, size_t n_train,
                              const int32_t *val, size_t n_val, wb_err *err) {
    if (!t) return wb_err_set(err, WB_ERR_ARG, "wb_trainer_set_data: trainer is NULL");
    size_t need = (size_t)t->p.seq_len + 1;
    if (!train || n_train < need)
        return wb_err_set(err, WB_ERR_ARG, "trainer: train data has %zu tokens, a window needs "
                          "seq_len + 1 = %zu", train ? n_train : 0, need);
    if (val && n_val > 0 && n_val < need)
        return wb_err_set(err, WB_ERR_ARG, "trainer: val data has %zu tokens, a window needs "
                          "seq_len + 1 = %zu", n_val, need);
    int32_t V = t->p.config.vocab_size;
    wb_status st = check_ids("train", train, n_train, V, err);
    if (st == WB_OK && val) st = check_ids("val", val, n_val, V, err);
    if (st != WB_OK) return st;
    int32_t *tr = malloc(n_train * sizeof(int32_t));
    int32_t *va = val && n_val ? malloc(n_val * sizeof(int32_t)) : NULL;
    if (!tr || (val && n_val && !va)) {
        free(tr);
        free(va);
        return wb_err_set(err, WB_ERR_NOMEM, "trainer: cannot copy %zu + %zu tokens", n_train,
                          n_val);
    }
    memcpy(tr, train, n_train * sizeof(int32_t));
    if (va) memcpy(va, val, n_val * sizeof(int32_t));
    free(t->train);
    free(t->val);
    t->train = tr;
    t->n_train = n_train;
    t->val = va;
    t->n_val = va ? n_val : 0;
    return WB_OK;
}

void wb_trainer_set_abort(wb_trainer *t, wb_abort_fn fn, void *user_data) {
    if (!t) return;
    t->abort_fn = fn;
    t->abort_data = user_data;
}

int wb_trainer_step_index(const wb_trainer *t) { return t ? t->step : 0; }
const wb_train_params *wb_trainer_params(const wb_trainer *t) { return t ? &t->p : NULL; }
size_t wb_trainer_num_params(const wb_trainer *t) { return t ? t->num_params : 0; }
float *wb_trainer_param_data(wb_trainer *t) { return t ? t->params_memory : NULL; }
float *wb_trainer_grad_data(wb_trainer *t) { return t ? t->grads_memory : NULL; }

// ----------------------------------------------------------------------------------------------
// optimisation: schedule, clipping, AdamW

static float lr_at(const wb_train_params *p, int step) {
    if (step < p->warmup_steps) return p->lr * (float)(step + 1) / (float)p->warmup_steps;
    if (step >= p->max_steps) return p->min_lr;
    int span = p->max_steps - p->warmup_steps;
    double ratio = span > 0 ? (double)(step - p->warmup_steps) / span : 1.0;
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(p->min_lr + coeff * (p->lr - p->min_lr));
}

float wb_trainer_lr(const wb_trainer *t) { return t ? lr_at(&t->p, t->step) : 0.0f; }

static double grad_global_norm(const wb_trainer *t) {
    double sum = 0.0;
    for (size_t i = 0; i < t->num_params; i++) sum += (double)t->grads_memory[i] * t->grads_memory[i];
    return sqrt(sum);
}

static void adamw_update(wb_trainer *t, float lr, float grad_scale) {
    const wb_train_params *p = &t->p;
    int step = t->step + 1;
    float b1c = 1.0f - powf(p->beta1, (float)step), b2c = 1.0f - powf(p->beta2, (float)step);
    size_t off = 0;
    for (int k = 0; k < NUM_PARAM_TENSORS; k++) {
        /* decay pulls 2-D matrices (embeddings included, as in nanoGPT) towards zero; biases and
         * LayerNorm gains keep their scale */
        float wd = PARAM_KINDS[k].matrix ? p->weight_decay : 0.0f;
        float *w = t->params_memory + off, *g = t->grads_memory + off;
        float *m = t->m_memory + off, *v = t->v_memory + off;
        size_t n = t->param_sizes[k];
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] * grad_scale;
            m[i] = p->beta1 * m[i] + (1.0f - p->beta1) * gi;
            v[i] = p->beta2 * v[i] + (1.0f - p->beta2) * gi * gi;
            float mhat = m[i] / b1c, vhat = v[i] / b2c;
            w[i] -= lr * (mhat / (sqrtf(vhat) + p->eps) + wd * w[i]);
        }
        off += n;
    }
}

// ----------------------------------------------------------------------------------------------
// public API: steps and evaluation

wb_status wb_trainer_loss_and_grad(wb_trainer *t, const int32_t *inputs, const int32_t *targets,
                                   int B, int T, float *loss, wb_err *err) {
    if (!t || !inputs || !targets)
        return wb_err_set(err, WB_ERR_ARG, "wb_trainer_loss_and_grad: NULL argument");
    if (B < 1 || T < 1 || T > t->p.config.n_ctx)
        return wb_err_set(err, WB_ERR_RANGE, "wb_trainer_loss_and_grad: B=%d, T=%d (T must be in "
                          "[1, config.n_ctx=%d])", B, T, t->p.config.n_ctx);
    wb_status st = check_ids("inputs", inputs, (size_t)B * T, t->p.config.vocab_size, err);
    if (st == WB_OK) st = check_ids("targets", targets, (size_t)B * T, t->p.config.vocab_size, err);
    if (st == WB_OK) st = trainer_ensure_acts(t, B, T, err);
    if (st != WB_OK) return st;
    memcpy(t->inputs, inputs, (size_t)B * T * sizeof(int32_t));
    memcpy(t->targets, targets, (size_t)B * T * sizeof(int32_t));
    float l = 0.0f;
    st = run_pass(t, 1, &l, err);
    if (st == WB_OK && loss) *loss = l;
    return st;
}

wb_status wb_trainer_step(wb_trainer *t, float *train_loss, float *grad_norm, wb_err *err) {
    if (!t) return wb_err_set(err, WB_ERR_ARG, "wb_trainer_step: trainer is NULL");
    if (!t->train)
        return wb_err_set(err, WB_ERR_STATE, "trainer: no training data (call set_data first)");
    if (aborted(t)) return cancelled(err);
    int B = t->p.batch_size, T = t->p.seq_len;
    wb_status st = trainer_ensure_acts(t, B, T, err);
    if (st != WB_OK) return st;
    /* a cancelled step restores the generator, so the trainer is exactly as before the call */
    rng saved = t->rng;
    uint64_t n_starts = t->n_train - (size_t)T; /* windows of T+1 tokens */
    for (int b = 0; b < B; b++) {
        size_t s = (size_t)rng_below(&t->rng, n_starts);
        memcpy(t->inputs + (size_t)b * T, t->train + s, (size_t)T * sizeof(int32_t));
        memcpy(t->targets + (size_t)b * T, t->train + s + 1, (size_t)T * sizeof(int32_t));
    }
    float loss = 0.0f;
    st = run_pass(t, 1, &loss, err);
    if (st != WB_OK) {
        t->rng = saved;
        return st;
    }
    double norm = grad_global_norm(t);
    float scale = 1.0f;
    if (t->p.grad_clip > 0.0f && norm > t->p.grad_clip) scale = (float)(t->p.grad_clip / norm);
    adamw_update(t, lr_at(&t->p, t->step), scale);
    t->step++;
    if (train_loss) *train_loss = loss;
    if (grad_norm) *grad_norm = (float)norm;
    return WB_OK;
}

wb_status wb_trainer_eval(wb_trainer *t, int n_batches, float *val_loss, wb_err *err) {
    if (!t) return wb_err_set(err, WB_ERR_ARG, "wb_trainer_eval: trainer is NULL");
    if (n_batches < 1)
        return wb_err_set(err, WB_ERR_ARG, "trainer: eval n_batches must be positive (got %d)",
                          n_batches);
    if (!t->val)
        return wb_err_set(err, WB_ERR_STATE, "trainer: no validation data (set_data without val)");
    int B = t->p.batch_size, T = t->p.seq_len;
    wb_status st = trainer_ensure_acts(t, B, T, err);
    if (st != WB_OK) return st;
    /* W windows evenly spaced over the stream, first at 0 and last at the end */
    uint64_t W = (uint64_t)n_batches * B, span = t->n_val - (size_t)T - 1;
    double sum = 0.0;
    for (int nb = 0; nb < n_batches; nb++) {
        for (int b = 0; b < B; b++) {
            uint64_t w = (uint64_t)nb * B + b;
            size_t s = W > 1 ? (size_t)((unsigned __int128)w * span / (W - 1)) : 0;
            memcpy(t->inputs + (size_t)b * T, t->val + s, (size_t)T * sizeof(int32_t));
            memcpy(t->targets + (size_t)b * T, t->val + s + 1, (size_t)T * sizeof(int32_t));
        }
        float loss = 0.0f;
        if ((st = run_pass(t, 0, &loss, err)) != WB_OK) return st;
        sum += loss;
    }
    if (val_loss) *val_loss = (float)(sum / n_batches);
    return WB_OK;
}

// ----------------------------------------------------------------------------------------------
// saving and loading

/* Views of the parameter tensors (and, for checkpoints, of m and v laid out the same way).
 * names must hold as many entries as views. Returns the number of views written. */
static int param_views(const wb_trainer *t, const float *mem, const char *prefix,
                       wb_tensor_view *views, char (*names)[80]) {
    const wb_config *c = &t->p.config;
    size_t offs[NUM_PARAM_TENSORS];
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        offs[i] = off;
        off += t->param_sizes[i];
    }
    /* HF order: wte, wpe, then block by block, then ln_f */
    int n = 0;
    for (int pass = 0; pass < 3; pass++) {
        int first = pass == 0 ? 0 : pass == 1 ? 2 : 14, last = pass == 0 ? 2 : pass == 1 ? 14 : 16;
        int layers = pass == 1 ? c->n_layer : 1;
        for (int l = 0; l < layers; l++)
            for (int i = first; i < last; i++) {
                wb_tensor_view *v = &views[n];
                char fmt[80];
                snprintf(fmt, sizeof fmt, "%s%s", prefix, PARAM_KINDS[i].hf_name);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-extra-args"
                snprintf(names[n], sizeof names[n], fmt, l); /* global names have no %d */
#pragma GCC diagnostic pop
                size_t slice = param_slice_numel(c, i);
                v->name = names[n];
                v->dtype = WB_F32;
                param_shape(c, i, &v->ndim, v->shape);
                v->data = mem + offs[i] + (size_t)l * slice;
                v->nbytes = slice * sizeof(float);
                n++;
            }
    }
    return n;
}

static int num_views(const wb_trainer *t) { return 4 + 12 * t->p.config.n_layer; }

wb_status wb_trainer_save_model(const wb_trainer *t, const char *path, wb_err *err) {
    if (!t || !path) return wb_err_set(err, WB_ERR_ARG, "wb_trainer_save_model: NULL argument");
    int nv = num_views(t);
    wb_tensor_view *views = calloc((size_t)nv, sizeof *views);
    char (*names)[80] = calloc((size_t)nv, sizeof *names);
    if (!views || !names) {
        free(views);
        free(names);
        return wb_err_set(err, WB_ERR_NOMEM, "wb_trainer_save_model: out of memory");
    }
    int n = param_views(t, t->params_memory, "", views, names);
    static const char *const meta[] = {"format", "pt"};
    wb_status st = wb_safetensors_write(path, views, n, meta, 1, err);
    free(views);
    free(names);
    return st;
}

/* Checkpoint: the model tensors, "optimizer.m.<name>" / "optimizer.v.<name>" for the moments,
 * "trainer.rng" (4 x I64, the xoshiro state) and every training parameter plus the step in the
 * metadata, so a checkpoint is self-describing and validated field by field on load. */
#define CKPT_FORMAT "workbench-train-checkpoint-1"

typedef struct meta_field {
    const char *key;
    char value[48];
} meta_field;

enum { N_META = 22 };

static void params_meta(const wb_train_params *p, int step, meta_field f[N_META]) {
    const wb_config *c = &p->config;
    int i = 0;
#define META_I(k, v) (f[i].key = k, snprintf(f[i].value, sizeof f[i].value, "%" PRId64, (int64_t)(v)), i++)
#define META_F(k, v) (f[i].key = k, snprintf(f[i].value, sizeof f[i].value, "%.9g", (double)(v)), i++)
    f[i].key = "format", snprintf(f[i].value, sizeof f[i].value, "%s", CKPT_FORMAT), i++;
    META_I("step", step);
    META_I("config.vocab_size", c->vocab_size);
    META_I("config.n_ctx", c->n_ctx);
    META_I("config.n_embd", c->n_embd);
    META_I("config.n_layer", c->n_layer);
    META_I("config.n_head", c->n_head);
    META_I("config.n_inner", c->n_inner);
    META_F("config.layer_norm_epsilon", c->layer_norm_epsilon);
    f[i].key = "seed", snprintf(f[i].value, sizeof f[i].value, "%" PRIu64, p->seed), i++;
    META_I("batch_size", p->batch_size);
    META_I("seq_len", p->seq_len);
    META_I("max_steps", p->max_steps);
    META_I("warmup_steps", p->warmup_steps);
    META_F("lr", p->lr);
    META_F("min_lr", p->min_lr);
    META_F("weight_decay", p->weight_decay);
    META_F("beta1", p->beta1);
    META_F("beta2", p->beta2);
    META_F("eps", p->eps);
    META_F("grad_clip", p->grad_clip);
    META_F("init_std", p->init_std);
#undef META_I
#undef META_F
}

wb_status wb_trainer_save_checkpoint(const wb_trainer *t, const char *path, wb_err *err) {
    if (!t || !path)
        return wb_err_set(err, WB_ERR_ARG, "wb_trainer_save_checkpoint: NULL argument");
    int nv = num_views(t);
    int total = 3 * nv + 1;
    wb_tensor_view *views = calloc((size_t)total, sizeof *views);
    char (*names)[80] = calloc((size_t)total, sizeof *names);
    if (!views || !names) {
        free(views);
        free(names);
        return wb_err_set(err, WB_ERR_NOMEM, "wb_trainer_save_checkpoint: out of memory");
    }
    int n = param_views(t, t->params_memory, "", views, names);
    n += param_views(t, t->m_memory, "optimizer.m.", views + n, names + n);
    n += param_views(t, t->v_memory, "optimizer.v.", views + n, names + n);
    int64_t rng_state[4];
    memcpy(rng_state, t->rng.s, sizeof rng_state);
    views[n] = (wb_tensor_view){.name = "trainer.rng", .dtype = WB_I64, .ndim = 1,
                                .shape = {4}, .data = rng_state, .nbytes = sizeof rng_state};
    n++;
    meta_field f[N_META];
    params_meta(&t->p, t->step, f);
    const char *kv[2 * N_META];
    for (int i = 0; i < N_META; i++) {
        kv[2 * i] = f[i].key;
        kv[2 * i + 1] = f[i].value;
    }
    wb_status st = wb_safetensors_write(path, views, n, kv, N_META, err);
    free(views);
    free(names);
    return st;
}

wb_status wb_trainer_load_checkpoint(wb_trainer *t, const char *path, wb_err *err) {
    if (!t || !path)
        return wb_err_set(err, WB_ERR_ARG, "wb_trainer_load_checkpoint: NULL argument");
    wb_safetensors *st = NULL;
    wb_status s = wb_safetensors_open(path, &st, err);
    if (s != WB_OK) return s;
    const char *format = wb_safetensors_metadata(st, "format");
    if (!format || strcmp(format, CKPT_FORMAT) != 0) {
        wb_err_set(err, WB_ERR_FORMAT, "%s: not a trainer checkpoint (metadata format is \"%s\", "
                   "expected \"%s\")", path, format ? format : "(none)", CKPT_FORMAT);
        wb_safetensors_free(st);
        return WB_ERR_FORMAT;
    }
    /* every training parameter must match: resuming with a different schedule or batch would
     * silently produce a different run */
    meta_field f[N_META];
    params_meta(&t->p, 0, f);
    long long step = -1;
    for (int i = 1; i < N_META; i++) {
        const char *v = wb_safetensors_metadata(st, f[i].key);
        if (!v) {
            wb_safetensors_free(st);
            return wb_err_set(err, WB_ERR_FORMAT, "%s: metadata key \"%s\" is missing", path,
                              f[i].key);
        }
        if (strcmp(f[i].key, "step") == 0) {
            char *end;
            errno = 0;
            step = strtoll(v, &end, 10);
            if (errno || *end || step < 0 || step > INT32_MAX) {
                wb_err_set(err, WB_ERR_FORMAT, "%s: metadata step \"%s\" is not a valid step",
                           path, v);
                wb_safetensors_free(st);
                return WB_ERR_FORMAT;
            }
        } else if (strcmp(v, f[i].value) != 0) {
            wb_err_set(err, WB_ERR_ARG, "%s: checkpoint has %s = %s but the trainer has %s", path,
                       f[i].key, v, f[i].value);
            wb_safetensors_free(st);
            return WB_ERR_ARG;
        }
    }
    /* copy into temporaries first: a checkpoint that fails halfway leaves the trainer intact */
    size_t P = t->num_params;
    float *buf = malloc(3 * P * sizeof(float));
    int nv = num_views(t);
    wb_tensor_view *views = calloc((size_t)nv, sizeof *views);
    char (*names)[80] = calloc((size_t)nv, sizeof *names);
    if (!buf || !views || !names) {
        free(buf);
        free(views);
        free(names);
        wb_safetensors_free(st);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory loading the checkpoint", path);
    }
    static const char *const prefixes[3] = {"", "optimizer.m.", "optimizer.v."};
    for (int k = 0; k < 3 && s == WB_OK; k++) {
        float *dst = buf + (size_t)k * P;
        int n = param_views(t, dst, prefixes[k], views, names);
        for (int i = 0; i < n && s == WB_OK; i++) {
            wb_tensor_view got;
            s = wb_safetensors_find(st, views[i].name, &got, err);
            if (s != WB_OK) break;
            int same = got.dtype == WB_F32 && got.ndim == views[i].ndim;
            for (int d = 0; same && d < got.ndim; d++) same = got.shape[d] == views[i].shape[d];
            if (!same || got.nbytes != views[i].nbytes) {
                s = wb_err_set(err, WB_ERR_FORMAT, "%s: tensor %s has the wrong dtype or shape "
                               "for this trainer", path, views[i].name);
                break;
            }
            memcpy((void *)views[i].data, got.data, got.nbytes);
        }
    }
    wb_tensor_view rv;
    int64_t rng_state[4];
    if (s == WB_OK) s = wb_safetensors_find(st, "trainer.rng", &rv, err);
    if (s == WB_OK) {
        if (rv.dtype != WB_I64 || rv.ndim != 1 || rv.shape[0] != 4 || rv.nbytes != 32)
            s = wb_err_set(err, WB_ERR_FORMAT, "%s: tensor trainer.rng must be I64 [4]", path);
        else
            memcpy(rng_state, rv.data, sizeof rng_state);
    }
    if (s == WB_OK) {
        memcpy(t->params_memory, buf, P * sizeof(float));
        memcpy(t->m_memory, buf + P, P * sizeof(float));
        memcpy(t->v_memory, buf + 2 * P, P * sizeof(float));
        memcpy(t->rng.s, rng_state, sizeof rng_state);
        t->step = (int)step;
    }
    free(buf);
    free(views);
    free(names);
    wb_safetensors_free(st);
    return s;
}
