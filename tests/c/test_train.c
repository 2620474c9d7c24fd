/* test_train.c - the trainer: gradients against finite differences of an independent
 * double-precision forward pass, learning, determinism, exact resume, errors that name fields. */
#include "check.h"
#include "wb.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * fixtures */

/* V=23 so no dimension is a multiple of anything convenient; T=8, C=16, 2 layers, 2 heads. */
static wb_train_params tiny_params(void) {
    wb_train_params p = wb_train_default_params();
    p.config.vocab_size = 23;
    p.config.n_ctx = 8;
    p.config.n_embd = 16;
    p.config.n_layer = 2;
    p.config.n_head = 2;
    p.config.n_inner = 64;
    p.batch_size = 2;
    p.seq_len = 8;
    p.max_steps = 60;
    p.warmup_steps = 5;
    p.lr = 1e-2f;
    p.min_lr = 1e-3f;
    p.seed = 42;
    return p;
}

static uint64_t test_rng = 0x1234567887654321ULL;
static uint64_t next_u64(void) { /* xorshift64*, test-local */
    test_rng ^= test_rng >> 12;
    test_rng ^= test_rng << 25;
    test_rng ^= test_rng >> 27;
    return test_rng * 0x2545F4914F6CDD1DULL;
}
static double next_uniform(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }
static double next_normal(void) {
    double u1 = next_uniform() + 1e-300, u2 = next_uniform();
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* A phrase of 12 tokens repeated: each token determines the next, learnable in a few dozen
 * steps. */
static int32_t *pattern_stream(size_t n, int32_t V) {
    int32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i % 12) * 5 % (size_t)V);
    return ids;
}

static wb_trainer *new_trainer_with_data(const wb_train_params *p) {
    wb_err err = {0};
    wb_trainer *t = NULL;
    if (wb_trainer_new(p, &t, &err) != WB_OK) {
        fprintf(stderr, "  wb_trainer_new: %s\n", err.msg);
        return NULL;
    }
    int32_t *train = pattern_stream(600, p->config.vocab_size);
    int32_t *val = pattern_stream(200, p->config.vocab_size);
    if (wb_trainer_set_data(t, train, 600, val, 200, &err) != WB_OK)
        fprintf(stderr, "  set_data: %s\n", err.msg);
    free(train);
    free(val);
    return t;
}

/* ---------------------------------------------------------------------------------------------
 * an independent GPT-2 forward pass in double precision, straight from the definitions, over the
 * layout documented in wb_train.h */

enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB, LNFW, LNFB, NT };

static void layout(const wb_config *c, size_t off[NT + 1], size_t size[NT]) {
    size_t V = c->vocab_size, T = c->n_ctx, C = c->n_embd, L = c->n_layer, F = c->n_inner;
    size_t s[NT] = {V * C, T * C, L * C, L * C, L * C * 3 * C, L * 3 * C, L * C * C, L * C,
                    L * C, L * C, L * C * F, L * F, L * F * C, L * C, C, C};
    off[0] = 0;
    for (int i = 0; i < NT; i++) {
        size[i] = s[i];
        off[i + 1] = off[i] + s[i];
    }
}

static void ref_layernorm(double *out, const double *x, const double *w, const double *b, int T,
                          int C, double eps) {
    for (int t = 0; t < T; t++) {
        const double *r = x + (size_t)t * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += r[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (r[i] - m) * (r[i] - m);
        v /= C;
        double s = 1.0 / sqrt(v + eps);
        for (int i = 0; i < C; i++) out[(size_t)t * C + i] = (r[i] - m) * s * w[i] + b[i];
    }
}

/* out[T,OC] = in[T,IC] @ w[IC,OC] + b */
static void ref_linear(double *out, const double *in, const double *w, const double *b, int T,
                       int IC, int OC) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OC; o++) {
            double s = b[o];
            for (int i = 0; i < IC; i++) s += in[(size_t)t * IC + i] * w[(size_t)i * OC + o];
            out[(size_t)t * OC + o] = s;
        }
}

static double ref_loss(const wb_config *c, const double *P, const int32_t *in, const int32_t *tg,
                       int B, int T) {
    int V = c->vocab_size, C = c->n_embd, L = c->n_layer, NH = c->n_head, F = c->n_inner;
    int hs = C / NH;
    size_t off[NT + 1], size[NT];
    layout(c, off, size);
    double *x = malloc(sizeof(double) * T * C), *h = malloc(sizeof(double) * T * C);
    double *qkv = malloc(sizeof(double) * T * 3 * C), *y = malloc(sizeof(double) * T * C);
    double *f = malloc(sizeof(double) * T * F), *tmp = malloc(sizeof(double) * T * C);
    double *att = malloc(sizeof(double) * T), total = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                x[t * C + i] = P[off[WTE] + (size_t)in[b * T + t] * C + i] + P[off[WPE] + t * C + i];
        for (int l = 0; l < L; l++) {
            ref_layernorm(h, x, P + off[LN1W] + l * C, P + off[LN1B] + l * C, T, C,
                          c->layer_norm_epsilon);
            ref_linear(qkv, h, P + off[QKVW] + (size_t)l * C * 3 * C, P + off[QKVB] + l * 3 * C,
                       T, C, 3 * C);
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    double mx = -1e300, sum = 0;
                    for (int j = 0; j <= t; j++) {
                        double s = 0;
                        for (int i = 0; i < hs; i++)
                            s += qkv[t * 3 * C + hd * hs + i] * qkv[j * 3 * C + C + hd * hs + i];
                        att[j] = s / sqrt((double)hs);
                        mx = att[j] > mx ? att[j] : mx;
                    }
                    for (int j = 0; j <= t; j++) sum += (att[j] = exp(att[j] - mx));
                    for (int i = 0; i < hs; i++) {
                        double s = 0;
                        for (int j = 0; j <= t; j++)
                            s += att[j] / sum * qkv[j * 3 * C + 2 * C + hd * hs + i];
                        y[t * C + hd * hs + i] = s;
                    }
                }
            ref_linear(tmp, y, P + off[APW] + (size_t)l * C * C, P + off[APB] + l * C, T, C, C);
            for (int i = 0; i < T * C; i++) x[i] += tmp[i];
            ref_layernorm(h, x, P + off[LN2W] + l * C, P + off[LN2B] + l * C, T, C,
                          c->layer_norm_epsilon);
            ref_linear(f, h, P + off[FCW] + (size_t)l * C * F, P + off[FCB] + l * F, T, C, F);
            for (int i = 0; i < T * F; i++) {
                double v = f[i];
                f[i] = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
            }
            ref_linear(tmp, f, P + off[FPW] + (size_t)l * F * C, P + off[FPB] + l * C, T, F, C);
            for (int i = 0; i < T * C; i++) x[i] += tmp[i];
        }
        ref_layernorm(h, x, P + off[LNFW], P + off[LNFB], T, C, c->layer_norm_epsilon);
        for (int t = 0; t < T; t++) {
            double mx = -1e300, sum = 0, target = 0;
            double *logit = malloc(sizeof(double) * V);
            for (int v = 0; v < V; v++) {
                double s = 0;
                for (int i = 0; i < C; i++) s += h[t * C + i] * P[off[WTE] + (size_t)v * C + i];
                logit[v] = s;
                mx = s > mx ? s : mx;
            }
            for (int v = 0; v < V; v++) sum += exp(logit[v] - mx);
            target = logit[tg[b * T + t]];
            total += log(sum) + mx - target;
            free(logit);
        }
    }
    free(x), free(h), free(qkv), free(y), free(f), free(tmp), free(att);
    return total / (B * T);
}

/* ---------------------------------------------------------------------------------------------
 * tests */

static void gradients_match_double_precision_finite_differences(void) {
    wb_train_params p = tiny_params();
    wb_trainer *t = NULL;
    wb_err err = {0};
    CHECK(wb_trainer_new(&p, &t, &err) == WB_OK);
    if (!t) return;
    const wb_config *c = &wb_trainer_params(t)->config;
    size_t off[NT + 1], size[NT];
    layout(c, off, size);
    size_t n = wb_trainer_num_params(t);
    CHECK(n == off[NT]);
    /* move every parameter off its init (LN gains off 1, biases off 0) so no gradient is
     * trivially zero or symmetric */
    float *w = wb_trainer_param_data(t);
    for (size_t i = 0; i < n; i++) w[i] += (float)(0.15 * next_normal());
    int B = 2, T = 8;
    int32_t in[16], tg[16];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(next_u64() % 23);
        tg[i] = (int32_t)(next_u64() % 23);
    }
    float loss = 0;
    CHECK(wb_trainer_loss_and_grad(t, in, tg, B, T, &loss, &err) == WB_OK);
    double *P = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) P[i] = w[i];
    double ref = ref_loss(c, P, in, tg, B, T);
    CHECK_NEAR(loss, ref, 1e-5 * fabs(ref));
    const float *g = wb_trainer_grad_data(t);
    /* Central differences on the double forward are accurate to ~1e-10, so the comparison measures
     * the float32 analytic gradient alone: within 1e-3 relative, or 2e-6 absolute for the tiny
     * ones where float rounding of the loss dominates. */
    const double h = 1e-5;
    double worst = 0;
    int bad = 0;
    for (int k = 0; k < NT; k++) {
        for (int s = 0; s < 8; s++) {
            size_t i = off[k] + next_u64() % size[k];
            double keep = P[i];
            P[i] = keep + h;
            double lp = ref_loss(c, P, in, tg, B, T);
            P[i] = keep - h;
            double lm = ref_loss(c, P, in, tg, B, T);
            P[i] = keep;
            double num = (lp - lm) / (2 * h), ana = g[i];
            double diff = fabs(num - ana), rel = diff / fmax(fabs(num), fabs(ana));
            if (diff > 2e-6 && rel > 1e-3) {
                if (bad++ < 5)
                    fprintf(stderr, "  tensor %d index %zu: analytic %.9g numeric %.9g\n", k,
                            i - off[k], ana, num);
            }
            if (rel > worst && diff > 1e-9) worst = rel;
        }
    }
    printf("     worst relative gradient error over %d samples: %.2g\n", NT * 8, worst);
    CHECK_MSG(bad == 0, "%d of %d sampled gradients off (worst relative error %.3g)", bad, NT * 8,
              worst);
    free(P);
    wb_trainer_free(t);
}

static void loss_falls_on_a_repetitive_stream(void) {
    wb_train_params p = tiny_params();
    wb_trainer *t = new_trainer_with_data(&p);
    if (!t) return;
    wb_err err = {0};
    float first = 0, last = 0, norm = 0, v0 = 0, v1 = 0;
    CHECK(wb_trainer_eval(t, 2, &v0, &err) == WB_OK);
    for (int s = 0; s < 50; s++) {
        float l;
        CHECK(wb_trainer_step(t, &l, &norm, &err) == WB_OK);
        if (s == 0) first = l;
        last = l;
    }
    CHECK(wb_trainer_eval(t, 2, &v1, &err) == WB_OK);
    CHECK_MSG(first > 2.5f && first < 3.6f, "first loss %g should be near ln(23) = 3.14", first);
    CHECK_MSG(last < 0.25f * first, "loss went from %g to %g", first, last);
    CHECK_MSG(v1 < 0.25f * v0, "val loss went from %g to %g", v0, v1);
    CHECK(isfinite(norm) && norm > 0);
    CHECK(wb_trainer_step_index(t) == 50);
    wb_trainer_free(t);
}

static void schedule_warms_up_then_decays_to_min_lr(void) {
    wb_train_params p = tiny_params();
    p.max_steps = 20;
    p.warmup_steps = 4;
    wb_trainer *t = new_trainer_with_data(&p);
    if (!t) return;
    wb_err err = {0};
    float lrs[22];
    for (int s = 0; s < 22; s++) {
        lrs[s] = wb_trainer_lr(t);
        CHECK(wb_trainer_step(t, NULL, NULL, &err) == WB_OK);
    }
    CHECK_NEAR(lrs[0], p.lr / 4, 1e-9);
    CHECK_NEAR(lrs[3], p.lr, 1e-9);
    CHECK_NEAR(lrs[12], (p.lr + p.min_lr) / 2, 1e-6); /* halfway through the cosine */
    CHECK(lrs[10] > lrs[11] && lrs[11] > lrs[19]);
    CHECK_NEAR(lrs[20], p.min_lr, 1e-9);
    CHECK_NEAR(lrs[21], p.min_lr, 1e-9); /* past the schedule it stays at min_lr */
    wb_trainer_free(t);
}

static int abort_after(void *ud) { return --*(int *)ud < 0; }

static void run_losses(const wb_train_params *p, int n, float *out) {
    wb_trainer *t = new_trainer_with_data(p);
    wb_err err = {0};
    for (int s = 0; s < n && t; s++) CHECK(wb_trainer_step(t, &out[s], NULL, &err) == WB_OK);
    wb_trainer_free(t);
}

static void same_seed_gives_identical_losses(void) {
    wb_train_params p = tiny_params();
    float a[12], b[12], c[12];
    run_losses(&p, 12, a);
    run_losses(&p, 12, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    p.seed = 43;
    run_losses(&p, 12, c);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

/* With 2 threads each worker runs half the batch and the gradients are summed afterwards: the
 * result must be reproducible, agree with one thread to rounding, and still stop on abort. */
static void two_threads_split_the_batch_reproducibly(void) {
    wb_train_params p = tiny_params();
    p.batch_size = 3; /* uneven split: 1 + 2 sequences */
    float one[8], two[8], again[8];
    wb_threads_set(1);
    run_losses(&p, 8, one);
    wb_threads_set(2);
    run_losses(&p, 8, two);
    run_losses(&p, 8, again);
    CHECK(memcmp(two, again, sizeof two) == 0);
    for (int s = 0; s < 8; s++) CHECK_NEAR(one[s], two[s], 1e-5 * fabs(one[s]));

    wb_trainer *t = new_trainer_with_data(&p);
    wb_err err = {0};
    float v1 = 0, v2 = 0, l = 0;
    CHECK(wb_trainer_eval(t, 3, &v2, &err) == WB_OK);
    int budget = 2;
    wb_trainer_set_abort(t, abort_after, &budget);
    CHECK(wb_trainer_step(t, &l, NULL, &err) == WB_ERR_CANCELLED);
    wb_trainer_set_abort(t, NULL, NULL);
    CHECK(wb_trainer_step(t, &l, NULL, &err) == WB_OK);
    CHECK(l == two[0]);
    wb_threads_set(1);
    wb_trainer *u = new_trainer_with_data(&p);
    CHECK(wb_trainer_eval(u, 3, &v1, &err) == WB_OK);
    CHECK_NEAR(v1, v2, 1e-5 * fabs(v1));
    wb_trainer_free(t);
    wb_trainer_free(u);
}


static void abort_cancels_a_step_without_changing_the_trainer(void) {
    wb_train_params p = tiny_params();
    float ref[3];
    run_losses(&p, 3, ref);
    wb_trainer *t = new_trainer_with_data(&p);
    if (!t) return;
    wb_err err = {0};
    float l[3];
    CHECK(wb_trainer_step(t, &l[0], NULL, &err) == WB_OK);
    int budget = 3; /* polled before the step and between layers: stops mid-backward */
    wb_trainer_set_abort(t, abort_after, &budget);
    CHECK(wb_trainer_step(t, &l[1], NULL, &err) == WB_ERR_CANCELLED);
    CHECK(wb_trainer_step_index(t) == 1);
    wb_trainer_set_abort(t, NULL, NULL);
    CHECK(wb_trainer_step(t, &l[1], NULL, &err) == WB_OK);
    CHECK(wb_trainer_step(t, &l[2], NULL, &err) == WB_OK);
    CHECK(memcmp(l, ref, sizeof l) == 0);
    wb_trainer_free(t);
}

static char tmpdir[64];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/wb_test_train_XXXXXX");
    if (!mkdtemp(tmpdir)) tmpdir[0] = 0;
}

static void resume_from_checkpoint_equals_uninterrupted_run(void) {
    wb_train_params p = tiny_params();
    float full[10], resumed[10];
    float val_full = 0, val_resumed = 0;
    wb_err err = {0};
    wb_trainer *a = new_trainer_with_data(&p);
    if (!a) return;
    for (int s = 0; s < 10; s++) CHECK(wb_trainer_step(a, &full[s], NULL, &err) == WB_OK);
    CHECK(wb_trainer_eval(a, 2, &val_full, &err) == WB_OK);

    char path[128];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", tmpdir);
    wb_trainer *b = new_trainer_with_data(&p);
    for (int s = 0; s < 4; s++) CHECK(wb_trainer_step(b, &resumed[s], NULL, &err) == WB_OK);
    CHECK(wb_trainer_eval(b, 2, &val_resumed, &err) == WB_OK); /* eval must not disturb a run */
    CHECK_MSG(wb_trainer_save_checkpoint(b, path, &err) == WB_OK, "%s", err.msg);
    wb_trainer_free(b);

    p.seed = 7; /* a different init: everything must come from the checkpoint... */
    wb_trainer *c = new_trainer_with_data(&p);
    CHECK_MSG(wb_trainer_load_checkpoint(c, path, &err) != WB_OK, "seed mismatch accepted");
    CHECK_ERR_MENTIONS(err.msg, "seed");
    wb_trainer_free(c);
    p.seed = 42; /* ...and the parameters must match it */
    c = new_trainer_with_data(&p);
    CHECK_MSG(wb_trainer_load_checkpoint(c, path, &err) == WB_OK, "%s", err.msg);
    CHECK(wb_trainer_step_index(c) == 4);
    for (int s = 4; s < 10; s++) CHECK(wb_trainer_step(c, &resumed[s], NULL, &err) == WB_OK);
    CHECK(wb_trainer_eval(c, 2, &val_resumed, &err) == WB_OK);
    CHECK(memcmp(full, resumed, sizeof full) == 0);
    CHECK(val_full == val_resumed);
    for (int s = 0; s < 10; s++)
        if (full[s] != resumed[s]) fprintf(stderr, "  step %d: %.9g vs %.9g\n", s, full[s], resumed[s]);
    CHECK(memcmp(wb_trainer_param_data(a), wb_trainer_param_data(c),
                 wb_trainer_num_params(a) * sizeof(float)) == 0);
    wb_trainer_free(a);
    wb_trainer_free(c);

    /* a model file is not a checkpoint */
    p = tiny_params();
    wb_trainer *d = new_trainer_with_data(&p);
    char model[128];
    snprintf(model, sizeof model, "%s/model.safetensors", tmpdir);
    CHECK(wb_trainer_save_model(d, model, &err) == WB_OK);
    CHECK(wb_trainer_load_checkpoint(d, model, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "model.safetensors");
    p.lr = 5e-3f;
    wb_trainer *e = new_trainer_with_data(&p);
    CHECK(wb_trainer_load_checkpoint(e, path, &err) != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "lr");
    CHECK(wb_trainer_step_index(e) == 0);
    wb_trainer_free(d);
    wb_trainer_free(e);
    unlink(path);
    unlink(model);
}

static void saved_model_has_hf_gpt2_names_shapes_and_values(void) {
    wb_train_params p = tiny_params();
    wb_trainer *t = new_trainer_with_data(&p);
    if (!t) return;
    wb_err err = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    CHECK_MSG(wb_trainer_save_model(t, path, &err) == WB_OK, "%s", err.msg);
    wb_safetensors *st = NULL;
    CHECK_MSG(wb_safetensors_open(path, &st, &err) == WB_OK, "%s", err.msg);
    if (!st) return;
    CHECK(wb_safetensors_count(st) == 4 + 12 * 2);
    const char *fmt = wb_safetensors_metadata(st, "format");
    CHECK(fmt && strcmp(fmt, "pt") == 0);
    size_t off[NT + 1], size[NT];
    layout(&wb_trainer_params(t)->config, off, size);
    const float *w = wb_trainer_param_data(t);
    struct {
        const char *name;
        int64_t r, c;
        size_t at;
    } want[] = {
        {"transformer.wte.weight", 23, 16, off[WTE]},
        {"transformer.wpe.weight", 8, 16, off[WPE]},
        {"transformer.h.1.ln_1.weight", 16, 0, off[LN1W] + 16},
        {"transformer.h.0.attn.c_attn.weight", 16, 48, off[QKVW]},
        {"transformer.h.1.attn.c_attn.bias", 48, 0, off[QKVB] + 48},
        {"transformer.h.1.attn.c_proj.weight", 16, 16, off[APW] + 256},
        {"transformer.h.0.mlp.c_fc.weight", 16, 64, off[FCW]},
        {"transformer.h.1.mlp.c_proj.weight", 64, 16, off[FPW] + 1024},
        {"transformer.h.1.mlp.c_proj.bias", 16, 0, off[FPB] + 16},
        {"transformer.ln_f.bias", 16, 0, off[LNFB]},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        wb_tensor_view v;
        if (wb_safetensors_find(st, want[i].name, &v, &err) != WB_OK) {
            CHECK_MSG(0, "%s", err.msg);
            continue;
        }
        CHECK(v.dtype == WB_F32);
        CHECK(v.ndim == (want[i].c ? 2 : 1));
        CHECK(v.shape[0] == want[i].r && (!want[i].c || v.shape[1] == want[i].c));
        CHECK(memcmp(v.data, w + want[i].at, v.nbytes) == 0);
    }
    wb_tensor_view v;
    CHECK(wb_safetensors_find(st, "lm_head.weight", &v, &err) == WB_ERR_NOTFOUND);
    wb_safetensors_free(st);
    unlink(path);
    wb_trainer_free(t);
}

static void bad_params_and_data_give_errors_naming_the_field(void) {
    wb_err err = {0};
    wb_trainer *t = NULL;
    wb_train_params p = tiny_params();
    p.seq_len = 9;
    CHECK(wb_trainer_new(&p, &t, &err) == WB_ERR_RANGE && !t);
    CHECK_ERR_MENTIONS(err.msg, "seq_len");
    CHECK_ERR_MENTIONS(err.msg, "n_ctx");
    p = tiny_params();
    p.batch_size = 0;
    CHECK(wb_trainer_new(&p, &t, &err) != WB_OK && !t);
    CHECK_ERR_MENTIONS(err.msg, "batch_size");
    p = tiny_params();
    p.config.n_embd = 0;
    CHECK(wb_trainer_new(&p, &t, &err) != WB_OK && !t);
    CHECK_ERR_MENTIONS(err.msg, "n_embd");
    p = tiny_params();
    p.config.n_head = 3;
    CHECK(wb_trainer_new(&p, &t, &err) != WB_OK && !t);
    CHECK_ERR_MENTIONS(err.msg, "n_head");
    p = tiny_params();
    p.config.vocab_size = 0;
    CHECK(wb_trainer_new(&p, &t, &err) != WB_OK && !t);
    CHECK_ERR_MENTIONS(err.msg, "vocab_size");
    p = tiny_params();
    p.beta2 = 1.0f;
    CHECK(wb_trainer_new(&p, &t, &err) != WB_OK && !t);
    CHECK_ERR_MENTIONS(err.msg, "beta2");
    p = tiny_params();
    p.lr = NAN;
    CHECK(wb_trainer_new(&p, &t, &err) != WB_OK && !t);
    CHECK_ERR_MENTIONS(err.msg, "lr");
    CHECK(wb_trainer_new(NULL, &t, &err) == WB_ERR_ARG);

    p = tiny_params();
    CHECK(wb_trainer_new(&p, &t, &err) == WB_OK);
    float l;
    CHECK(wb_trainer_step(t, &l, NULL, &err) == WB_ERR_STATE);
    CHECK_ERR_MENTIONS(err.msg, "set_data");
    int32_t *ids = pattern_stream(100, 23);
    ids[57] = 23;
    CHECK(wb_trainer_set_data(t, ids, 100, ids, 50, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "train");
    CHECK_ERR_MENTIONS(err.msg, "57");
    ids[57] = 0;
    ids[3] = -1;
    CHECK(wb_trainer_set_data(t, ids + 50, 50, ids, 50, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "val");
    ids[3] = 0;
    CHECK(wb_trainer_set_data(t, ids, 8, ids, 50, &err) == WB_ERR_ARG); /* shorter than T+1 */
    CHECK_ERR_MENTIONS(err.msg, "seq_len");
    CHECK(wb_trainer_set_data(t, ids, 100, NULL, 0, &err) == WB_OK);
    CHECK(wb_trainer_eval(t, 1, &l, &err) == WB_ERR_STATE);
    CHECK(wb_trainer_set_data(t, ids, 100, ids, 100, &err) == WB_OK);
    CHECK(wb_trainer_eval(t, 0, &l, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "n_batches");
    CHECK(wb_trainer_load_checkpoint(t, "/nonexistent/ckpt.safetensors", &err) != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "/nonexistent/ckpt.safetensors");
    free(ids);
    wb_trainer_free(t);
    wb_trainer_free(NULL);
}

static void default_params_describe_tinylm(void) {
    wb_train_params p = wb_train_default_params();
    p.batch_size = 1; /* keep the activations small */
    p.seq_len = 8;
    wb_trainer *t = NULL;
    wb_err err = {0};
    CHECK(wb_trainer_new(&p, &t, &err) == WB_OK);
    CHECK(wb_trainer_num_params(t) == 1071872);
    wb_trainer_free(t);
}

int main(void) {
    make_tmpdir();
    RUN(gradients_match_double_precision_finite_differences);
    RUN(loss_falls_on_a_repetitive_stream);
    RUN(schedule_warms_up_then_decays_to_min_lr);
    RUN(same_seed_gives_identical_losses);
    RUN(abort_cancels_a_step_without_changing_the_trainer);
    RUN(two_threads_split_the_batch_reproducibly);
    RUN(resume_from_checkpoint_equals_uninterrupted_run);
    RUN(saved_model_has_hf_gpt2_names_shapes_and_values);
    RUN(bad_params_and_data_give_errors_naming_the_field);
    RUN(default_params_describe_tinylm);
    if (tmpdir[0]) rmdir(tmpdir);
    return check_summary();
}
