/* bench_constraint.c - constrained decoding cost: compile time of the choice, regex and triage
 * JSON constraints, and per-token mask time (the allowed-set lookup plus the advance over the
 * chosen token's bytes), at vocab 2048 and at a synthetic 150,000-token vocabulary; plus what
 * applying the mask costs inside the sampler (masked vs unmasked wb_sampler_sample) and, when a
 * trained model is at hand, a decode step for scale. Median and p99 in microseconds.
 *
 *   bench_constraint [model_dir]   (default models/tinylm-base; without one, the 2048 case uses
 *                                   a synthetic vocabulary too and no decode step is timed)
 */
#include <math.h>
#include "bench_args.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wb.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stats {
    double med, p99;
} stats;

static stats summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stats s = {v[n / 2], v[(int)((double)n * 0.99)]};
    return s;
}

/* A synthetic byte-level vocabulary: the 256 bytes, then word-like pieces (half with a leading
 * space, as in GPT-2) and some punctuation runs, with an eos id at the end. */
typedef struct synth {
    char **bytes;
    size_t *lens;
    int32_t n;
} synth;

static synth synth_vocab(int32_t n, uint64_t seed) {
    static const char letters[] = "etaoinshrdlcumwfgypbvkjxqz";
    static const char punct[] = "\"{}:,_.-!?'()[]0123456789";
    synth s = {malloc((size_t)n * sizeof(char *)), malloc((size_t)n * sizeof(size_t)), n};
    wb_rng r;
    wb_rng_seed(&r, seed);
    for (int32_t i = 0; i < n; i++) {
        char buf[16];
        size_t L = 0;
        if (i < 256) buf[L++] = (char)i;
        else if (i == n - 1) {
            memcpy(buf, "<eos>", 5);
            L = 5;
        } else if (wb_rng_u32(&r) % 10 == 0) {
            size_t k = 1 + wb_rng_u32(&r) % 3;
            for (size_t j = 0; j < k; j++) buf[L++] = punct[wb_rng_u32(&r) % (sizeof punct - 1)];
        } else {
            if (wb_rng_u32(&r) % 2) buf[L++] = ' ';
            size_t k = 2 + wb_rng_u32(&r) % 9;
            for (size_t j = 0; j < k; j++) {
                /* Skewed towards frequent letters, like real subwords. */
                double u = wb_rng_uniform(&r);
                buf[L++] = letters[(int)(u * u * 26)];
            }
        }
        s.bytes[i] = malloc(L);
        memcpy(s.bytes[i], buf, L);
        s.lens[i] = L;
    }
    return s;
}

static void synth_free(synth *s) {
    for (int32_t i = 0; i < s->n; i++) free(s->bytes[i]);
    free(s->bytes);
    free(s->lens);
}

static const char *const k_labels[] = {"billing", "account", "bug", "how_to", "feature_request",
                                       "cancellation"};
static const char *k_triage =
    "{\"type\": \"object\", \"properties\": {"
    "\"category\": {\"enum\": [\"billing\", \"account\", \"bug\", \"how_to\", "
    "\"feature_request\", \"cancellation\"]},"
    "\"priority\": {\"enum\": [\"low\", \"medium\", \"high\", \"urgent\"]},"
    "\"needs_human\": {\"type\": \"boolean\"}},"
    "\"required\": [\"category\", \"priority\", \"needs_human\"]}";
static const char *k_regex = "[a-z][a-z ]{0,30}[.!?]";

static wb_status compile(int kind, const wb_constraint_vocab *v, wb_constraint **c, wb_err *err) {
    if (kind == 0) return wb_constraint_choice_new(v, k_labels, NULL, 6, WB_SPACE_OPTIONAL, c, err);
    if (kind == 1) return wb_constraint_regex_new(v, k_regex, strlen(k_regex), c, err);
    return wb_constraint_json_schema_new(v, k_triage, strlen(k_triage), WB_JSON_WS_SPACE, c, err);
}

static const char *const k_kind[] = {"choice (6 labels)", "regex [a-z][a-z ]{0,30}[.!?]",
                                     "json (triage)"};

/* Random walks through the constraint: time allowed() + advance() per token. Also keeps the
 * masks met, to time the sampler with them. */
static stats time_steps(const wb_constraint *c, int32_t V, int walks, const uint32_t **masks,
                        int *n_masks, int cap_masks) {
    wb_constraint_state *s = NULL;
    wb_err err = {0};
    wb_constraint_state_new(c, &s, &err);
    int cap = walks * 64, n = 0;
    double *t = malloc((size_t)cap * sizeof *t);
    wb_rng r;
    wb_rng_seed(&r, 5);
    *n_masks = 0;
    for (int w = 0; w < walks; w++) {
        wb_constraint_state_reset(s);
        for (int step = 0; step < 64 && !wb_constraint_state_complete(s); step++) {
            const uint32_t *m;
            int32_t na;
            double t0 = wb_clock_ms();
            wb_constraint_state_allowed(s, NULL, 0, &m, &na, &err);
            double t1 = wb_clock_ms();
            if (!m || na <= 0) break;
            /* The k-th allowed id, untimed: choosing is the sampler's job. */
            int32_t k = (int32_t)(wb_rng_u32(&r) % (uint32_t)na), id = -1;
            for (int32_t i = 0; i < V && id < 0; i++)
                if (m[i >> 5] >> (i & 31) & 1u && k-- == 0) id = i;
            if (*n_masks < cap_masks) masks[(*n_masks)++] = m;
            double t2 = wb_clock_ms();
            wb_constraint_state_advance(s, id, &err);
            double t3 = wb_clock_ms();
            if (n < cap) t[n++] = ((t1 - t0) + (t3 - t2)) * 1000.0;
        }
    }
    stats st = summarize(t, n);
    free(t);
    wb_constraint_state_free(s);
    return st;
}

/* wb_sampler_sample per token with the given masks (NULL: unmasked), greedy or T = 1. */
static stats time_sampler(int32_t V, const uint32_t *const *masks, int n_masks, float temp,
                          int reps) {
    float *z = malloc((size_t)V * sizeof *z);
    wb_rng r;
    wb_rng_seed(&r, 9);
    for (int32_t i = 0; i < V; i++) z[i] = (float)(4.0 * wb_rng_uniform(&r));
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = temp;
    sp.has_seed = 1;
    wb_sampler *s = NULL;
    wb_err err = {0};
    wb_sampler_new(&sp, V, &s, &err);
    double *t = malloc((size_t)reps * sizeof *t);
    int32_t id;
    for (int i = 0; i < reps; i++) {
        const uint32_t *m = masks ? masks[i % n_masks] : NULL;
        double t0 = wb_clock_ms();
        wb_sampler_sample(s, z, NULL, 0, m, &id, NULL, &err);
        t[i] = (wb_clock_ms() - t0) * 1000.0;
    }
    stats st = summarize(t, reps);
    free(t);
    free(z);
    wb_sampler_free(s);
    return st;
}

static double decode_step_us(const char *dir) {
    wb_model *m = NULL;
    wb_session *s = NULL;
    wb_err err = {0};
    if (wb_model_load(dir, &m, &err) != WB_OK) return -1;
    if (wb_session_new(m, 0, &s, &err) != WB_OK) {
        wb_model_free(m);
        return -1;
    }
    int32_t V = wb_model_config(m)->vocab_size;
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) prompt[i] = 100 + i;
    double t[400];
    int n = 0;
    for (int rep = 0; rep < 8; rep++) {
        wb_session_reset(s);
        wb_session_prefill(s, prompt, 16, logits, 0, &err);
        for (int pos = 0; pos < 50; pos++) {
            double t0 = wb_clock_ms();
            wb_session_decode(s, 40 + pos, logits, &err);
            t[n++] = (wb_clock_ms() - t0) * 1000.0;
        }
    }
    free(logits);
    wb_session_free(s);
    wb_model_free(m);
    return summarize(t, n).med;
}

static void run(const char *title, const wb_constraint_vocab *v, double step_us) {
    printf("\n%s: vocab %d\n", title, (int)v->n_tokens);
    printf("%-30s %9s %7s %7s %12s %12s %14s %14s\n", "constraint", "compile", "states", "masks",
           "mask med", "mask p99", "sample+mask", "sample alone");
    for (int kind = 0; kind < 3; kind++) {
        double ct[7];
        wb_constraint *c = NULL;
        wb_err err = {0};
        int nc = v->n_tokens > 10000 ? 3 : 7;
        for (int k = 0; k < nc; k++) {
            wb_constraint_free(c);
            c = NULL;
            double t0 = wb_clock_ms();
            if (compile(kind, v, &c, &err) != WB_OK) {
                fprintf(stderr, "bench_constraint: %s\n", err.msg);
                exit(1);
            }
            ct[k] = wb_clock_ms() - t0;
        }
        stats cs = summarize(ct, nc);
        enum { CAPM = 512 };
        const uint32_t *masks[CAPM];
        int n_masks = 0;
        stats ms = time_steps(c, v->n_tokens, v->n_tokens > 10000 ? 100 : 400, masks, &n_masks,
                              CAPM);
        int reps = v->n_tokens > 10000 ? 300 : 3000;
        stats with = time_sampler(v->n_tokens, masks, n_masks, 1.0f, reps);
        stats without = time_sampler(v->n_tokens, NULL, 0, 1.0f, reps);
        wb_constraint_info in = wb_constraint_get_info(c);
        printf("%-30s %6.2f ms %7d %7d %9.3f us %9.3f us %11.1f us %11.1f us\n", k_kind[kind],
               cs.med, (int)in.n_states, (int)in.n_masks, ms.med, ms.p99, with.med, without.med);
        if (step_us > 0)
            printf("%-30s mask time = %.3f%% of a %.0f us decode step (median)\n", "", 100.0 *
                   ms.med / step_us, step_us);
        wb_constraint_free(c);
    }
}

int main(int argc, char **argv) {
    bench_args(argc, argv, "[MODEL_DIR=models/tinylm-base]\n  constraint compile and per-step mask costs", NULL);
    wb_threads_set(1); /* idle OpenBLAS threads would otherwise spin against the timings */
    const char *dir = argc > 1 ? argv[1] : "models/tinylm-base";
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    wb_tokenizer *tok = NULL;
    wb_err err = {0};
    double step = -1;
    if (access(path, R_OK) == 0 && wb_tokenizer_load(path, &tok, &err) == WB_OK) {
        wb_constraint_vocab v;
        wb_constraint_vocab_init(&v, tok, &err);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (access(path, R_OK) == 0) step = decode_step_us(dir);
        run(dir, &v, step);
        wb_constraint_vocab_release(&v);
        wb_tokenizer_free(tok);
    } else {
        synth s = synth_vocab(2048, 1);
        wb_constraint_vocab v = {s.n, (const char *const *)s.bytes, s.lens, s.n - 1};
        run("synthetic", &v, -1);
        synth_free(&s);
    }
    synth s = synth_vocab(150000, 2);
    wb_constraint_vocab v = {s.n, (const char *const *)s.bytes, s.lens, s.n - 1};
    run("synthetic", &v, -1);
    synth_free(&s);
    return 0;
}
