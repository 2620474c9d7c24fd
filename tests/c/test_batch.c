/* test_batch.c - batched decode, chunked prefill, prefix reuse and cancellation on a tiny random
 * GPT-2: batch outputs equal single outputs for B up to 16 with mixed prompt lengths, chunked
 * prefill equals one-shot prefill, a forked prefix plus the suffix equals a cold prefill, and a
 * cancelled request frees its cache (the leak check is ASan's, in the sanitizer build). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "wb.h"
#include "wb_batch.h"

/* ---- fixture: a random GPT-2 directory ------------------------------------------------------ */

static const char *k_text =
    "Customer (Ana): Hi, how do I export my board data?\n"
    "Agent (Lena): Open the board menu and choose Export, then CSV.\n"
    "Customer (Bo): Hi, my account is locked. Can you help?\n"
    "Agent (Sam): Sure, I reset the lock. Try again now.\n";

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float frand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

enum { T_CTX = 96, C_EMB = 32, N_LAYER = 2, N_HEAD = 4 };
static char g_dir[64];
static wb_model *g_model;

static int add_tensor(wb_tensor_view *v, char (*names)[48], float **bufs, int n, const char *nm,
                      int d0, int d1, float scale, float offset) {
    size_t cnt = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    snprintf(names[n], 48, "%s", nm);
    bufs[n] = malloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++) bufs[n][i] = offset + scale * frand();
    v[n] = (wb_tensor_view){names[n], WB_F32, d1 ? 2 : 1, {d0, d1}, bufs[n], cnt * sizeof(float)};
    return n + 1;
}

static int make_model(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/wb_test_batch_XXXXXX");
    if (!mkdtemp(g_dir)) return 0;
    wb_err err = {0};
    wb_bpe_train_params bp = wb_bpe_train_default_params();
    static const char *const special[] = {"<|endoftext|>"};
    bp.vocab_size = 300;
    bp.special_tokens = special;
    bp.n_special_tokens = 1;
    wb_tokenizer *tok = NULL;
    if (wb_bpe_train(k_text, strlen(k_text), &bp, &tok, &err) != WB_OK) return 0;
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", g_dir);
    int V = wb_tokenizer_vocab_size(tok);
    wb_status st = wb_tokenizer_save(tok, path, &err);
    wb_tokenizer_free(tok);
    if (st) return 0;
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    FILE *fp = fopen(path, "w");
    if (!fp) return 0;
    fprintf(fp, "{\"model_type\":\"gpt2\",\"vocab_size\":%d,\"n_positions\":%d,\"n_embd\":%d,"
                "\"n_layer\":%d,\"n_head\":%d,\"n_inner\":null,\"activation_function\":"
                "\"gelu_new\"}\n", V, T_CTX, C_EMB, N_LAYER, N_HEAD);
    fclose(fp);
    wb_tensor_view v[64];
    char names[64][48];
    float *bufs[64];
    int n = 0;
    const int C = C_EMB;
    n = add_tensor(v, names, bufs, n, "wte.weight", V, C, 0.5f, 0);
    n = add_tensor(v, names, bufs, n, "wpe.weight", T_CTX, C, 0.1f, 0);
    for (int l = 0; l < N_LAYER; l++) {
        char nm[48];
#define L_(suffix, d0, d1, sc, off)                                                                \
    snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);                                                 \
    n = add_tensor(v, names, bufs, n, nm, d0, d1, sc, off)
        L_("ln_1.weight", C, 0, 0.1f, 1.0f);
        L_("ln_1.bias", C, 0, 0.05f, 0);
        L_("attn.c_attn.weight", C, 3 * C, 0.3f, 0);
        L_("attn.c_attn.bias", 3 * C, 0, 0.05f, 0);
        L_("attn.c_proj.weight", C, C, 0.2f, 0);
        L_("attn.c_proj.bias", C, 0, 0.05f, 0);
        L_("ln_2.weight", C, 0, 0.1f, 1.0f);
        L_("ln_2.bias", C, 0, 0.05f, 0);
        L_("mlp.c_fc.weight", C, 4 * C, 0.2f, 0);
        L_("mlp.c_fc.bias", 4 * C, 0, 0.05f, 0);
        L_("mlp.c_proj.weight", 4 * C, C, 0.1f, 0);
        L_("mlp.c_proj.bias", C, 0, 0.05f, 0);
#undef L_
    }
    n = add_tensor(v, names, bufs, n, "ln_f.weight", C, 0, 0.1f, 1.0f);
    n = add_tensor(v, names, bufs, n, "ln_f.bias", C, 0, 0.05f, 0);
    snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
    st = wb_safetensors_write(path, v, n, NULL, 0, &err);
    for (int i = 0; i < n; i++) free(bufs[i]);
    if (st == WB_OK) st = wb_model_load(g_dir, &g_model, &err);
    if (st) fprintf(stderr, "fixture: %s\n", err.msg);
    return st == WB_OK;
}

static void remove_model(void) {
    wb_model_free(g_model);
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    char path[128];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, files[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

static int32_t vocab(void) { return wb_model_config(g_model)->vocab_size; }

/* Prompt i of a batch: length 1 + (7i + 3) % 37 (mixed lengths), ids from a fixed stream. */
static int prompt_len(int i) { return 1 + (7 * i + 3) % 37; }
static void fill_prompt(int32_t *ids, int n, int i) {
    for (int t = 0; t < n; t++) ids[t] = (int32_t)((t * 31 + i * 17 + 5) % (vocab() - 1));
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double x = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        if (x > d) d = x;
    }
    return d;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void batch_tokens_equal_single_tokens_for_b_up_to_16_with_mixed_prompt_lengths(void) {
    const int sizes[] = {1, 2, 3, 5, 8, 16};
    wb_err err = {0};
    wb_batch *b = NULL;
    CHECK(wb_batch_new(g_model, &b, &err) == WB_OK);
    for (int threads = 1; threads <= 2; threads++) {
        wb_threads_set(threads);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            const int B = sizes[k];
            int32_t *prompts[16];
            size_t lens[16];
            for (int i = 0; i < B; i++) {
                lens[i] = (size_t)prompt_len(i);
                prompts[i] = malloc(lens[i] * sizeof(int32_t));
                fill_prompt(prompts[i], (int)lens[i], i);
            }
            wb_sampling_params sp = wb_sampling_default_params();
            sp.temperature = 0;
            sp.max_tokens = 6 + B % 5;
            for (int separate = 0; separate <= 1; separate++) {
                wb_batch_params bp = wb_batch_default_params();
                bp.gen.ignore_eos = 1;
                bp.separate_prefill = separate;
                wb_status st = wb_batch_generate(b, (const int32_t *const *)prompts, lens, B, &sp,
                                                 &bp, &err);
                CHECK_MSG(st == WB_OK, "%s", err.msg);
                const wb_batch_result *r = wb_batch_result_get(b);
                if (st || !r) continue;
                CHECK(r->n_seqs == B);
                CHECK(r->output_tokens == (int64_t)B * sp.max_tokens);
                CHECK(r->steps == sp.max_tokens - 1);
                CHECK(r->tokens_per_s > 0);
                for (int i = 0; i < B; i++) {
                    wb_gen_params gp = wb_gen_default_params();
                    gp.ignore_eos = 1;
                    wb_gen *g = NULL;
                    CHECK(wb_gen_new_ids(g_model, prompts[i], lens[i], &sp, &gp, &g, &err) ==
                          WB_OK);
                    CHECK(wb_gen_run(g, &err) == WB_OK);
                    const wb_gen_result *one = wb_gen_result_get(g);
                    CHECK(r->seqs[i].n_tokens == one->n_tokens);
                    CHECK_MSG(r->seqs[i].n_tokens == one->n_tokens &&
                                  !memcmp(r->seqs[i].token_ids, one->token_ids,
                                          one->n_tokens * sizeof(int32_t)),
                              "B %d sequence %d (prompt %zu tokens, %d threads, separate %d) "
                              "differs from running alone", B, i, lens[i], threads, separate);
                    CHECK(r->seqs[i].stop_reason == WB_STOP_LENGTH);
                    CHECK(r->seqs[i].prompt_tokens == one->prompt_tokens);
                    wb_gen_free(g);
                }
            }
            for (int i = 0; i < B; i++) free(prompts[i]);
        }
    }
    wb_threads_set(1);
    wb_batch_free(b);
}

static void a_batched_step_gives_each_session_its_own_decode_logits(void) {
    for (int threads = 1; threads <= 3; threads += 2) {
        wb_threads_set(threads);
        const int B = 7, V = vocab();
        wb_err err = {0};
        wb_batch *b = NULL;
        wb_session *s[7], *alone[7];
        int32_t ids[7], *idp[7], prompt[40];
        int counts[7];
        float *lb = malloc((size_t)B * V * sizeof(float)), *la = malloc((size_t)V * sizeof(float));
        CHECK(wb_batch_new(g_model, &b, &err) == WB_OK);
        for (int i = 0; i < B; i++) {
            int n = prompt_len(i);
            fill_prompt(prompt, n, i);
            CHECK(wb_session_new(g_model, 0, &s[i], &err) == WB_OK);
            CHECK(wb_session_prefill(s[i], prompt, n, NULL, 0, &err) == WB_OK);
            CHECK(wb_session_fork(s[i], &alone[i], &err) == WB_OK);
            ids[i] = (int32_t)(i * 13 % V);
            idp[i] = &ids[i];
            counts[i] = 1;
        }
        for (int step = 0; step < 3; step++) {
            CHECK(wb_batch_forward(b, s, (const int32_t *const *)idp, counts, B, lb, &err) ==
                  WB_OK);
            for (int i = 0; i < B; i++) {
                CHECK(wb_session_decode(alone[i], ids[i], la, &err) == WB_OK);
                CHECK(wb_session_pos(s[i]) == wb_session_pos(alone[i]));
                /* the batched kernels sum in the decode GEMV's order: not just close, identical */
                const double d = max_abs_diff(lb + (size_t)i * V, la, (size_t)V);
                CHECK_MSG(d == 0, "sequence %d step %d: %g", i, step, d);
                CHECK(argmax(lb + (size_t)i * V, V) == argmax(la, V));
                ids[i] = (int32_t)argmax(la, V);
            }
        }
        /* Errors name the argument and move no session. */
        int pos0 = wb_session_pos(s[0]);
        wb_session *dup[2] = {s[0], s[0]};
        CHECK(wb_batch_forward(b, dup, (const int32_t *const *)idp, counts, 2, lb, &err) ==
              WB_ERR_ARG);
        CHECK_ERR_MENTIONS(err.msg, "same session");
        int32_t bad = V + 5, *badp[2] = {&ids[0], &bad};
        CHECK(wb_batch_forward(b, s, (const int32_t *const *)badp, counts, 2, lb, &err) ==
              WB_ERR_RANGE);
        CHECK_ERR_MENTIONS(err.msg, "sessions[1]");
        CHECK(wb_session_pos(s[0]) == pos0);
        CHECK(wb_batch_forward(b, s, (const int32_t *const *)idp, counts, 0, lb, &err) ==
              WB_ERR_ARG);
        for (int i = 0; i < B; i++) {
            wb_session_free(s[i]);
            wb_session_free(alone[i]);
        }
        wb_batch_free(b);
        wb_batch_free(NULL);
        free(lb);
        free(la);
    }
    wb_threads_set(1);
}

static void chunked_prefill_gives_the_same_logits_as_one_shot(void) {
    const int V = vocab(), n = 70;
    int32_t prompt[70];
    fill_prompt(prompt, n, 3);
    wb_err err = {0};
    float *one = malloc((size_t)V * sizeof(float)), *chunked = malloc((size_t)V * sizeof(float));
    wb_session *s = NULL;
    CHECK(wb_session_new(g_model, 0, &s, &err) == WB_OK);
    CHECK(wb_session_prefill(s, prompt, n, one, 0, &err) == WB_OK);
    const int sizes[] = {1, 3, 7, 16, 64, 70, 200};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        wb_session_reset(s);
        for (int off = 0; off < n; off += sizes[k]) {
            int c = n - off < sizes[k] ? n - off : sizes[k];
            CHECK(wb_session_prefill(s, prompt + off, c, off + c == n ? chunked : NULL, 0, &err) ==
                  WB_OK);
        }
        CHECK_MSG(max_abs_diff(one, chunked, (size_t)V) <= 1e-4, "chunk %d: %g", sizes[k],
                  max_abs_diff(one, chunked, (size_t)V));
    }
    /* Through generation: same tokens, and chunk_size is echoed in the result. */
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    sp.max_tokens = 8;
    wb_gen_params gp = wb_gen_default_params();
    gp.ignore_eos = 1;
    wb_gen *a = NULL, *c = NULL;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &a, &err) == WB_OK);
    CHECK(wb_gen_run(a, &err) == WB_OK);
    gp.chunk_size = 16;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &c, &err) == WB_OK);
    CHECK(wb_gen_run(c, &err) == WB_OK);
    if (a && c) {
        const wb_gen_result *ra = wb_gen_result_get(a), *rc = wb_gen_result_get(c);
        CHECK(ra->n_tokens == rc->n_tokens &&
              !memcmp(ra->token_ids, rc->token_ids, ra->n_tokens * sizeof(int32_t)));
        CHECK(rc->chunk_size == 16 && ra->chunk_size == 0 && rc->use_cache == 1);
    }
    wb_gen_free(a);
    wb_gen_free(c);
    /* Chunking without a cache is an error that says why; so is a negative size. */
    gp.cache = 0;
    wb_gen *bad = NULL;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &bad, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "chunk_size");
    CHECK_ERR_MENTIONS(err.msg, "cache");
    CHECK(bad == NULL);
    gp.cache = 1;
    gp.chunk_size = -2;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &bad, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "chunk_size");
    wb_session_free(s);
    free(one);
    free(chunked);
}

static void a_forked_prefix_plus_the_suffix_matches_a_cold_prefill(void) {
    const int V = vocab(), n = 60;
    int32_t full[60];
    fill_prompt(full, n, 5);
    wb_err err = {0};
    float *cold = malloc((size_t)V * sizeof(float)), *warm = malloc((size_t)V * sizeof(float));
    wb_session *c = NULL, *prefix = NULL, *f = NULL;
    CHECK(wb_session_new(g_model, 0, &c, &err) == WB_OK);
    CHECK(wb_session_prefill(c, full, n, cold, 0, &err) == WB_OK);
    CHECK(wb_session_new(g_model, 0, &prefix, &err) == WB_OK);
    CHECK(wb_session_prefill(prefix, full, n / 2, NULL, 0, &err) == WB_OK);
    for (int rep = 0; rep < 2; rep++) { /* the prefix is reusable: forks leave it untouched */
        CHECK(wb_session_fork(prefix, &f, &err) == WB_OK);
        CHECK(wb_session_prefill(f, full + n / 2, n - n / 2, warm, 0, &err) == WB_OK);
        CHECK(max_abs_diff(cold, warm, (size_t)V) <= 1e-4);
        CHECK(argmax(cold, V) == argmax(warm, V));
        CHECK(wb_session_pos(prefix) == n / 2);
        wb_session_free(f);
        f = NULL;
    }
    wb_session_free(c);
    wb_session_free(prefix);
    free(cold);
    free(warm);
}

static int g_abort_countdown;
static int abort_when_zero(void *ud) {
    (void)ud;
    return --g_abort_countdown < 0;
}

static void cancellation_ends_the_request_and_releases_its_cache(void) {
    const int n = 12;
    int32_t prompt[12];
    fill_prompt(prompt, n, 1);
    wb_err err = {0};
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    sp.max_tokens = 20;
    wb_gen_params gp = wb_gen_default_params();
    gp.ignore_eos = 1;
    gp.cancel_after = 4;
    wb_gen *g = NULL;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &g, &err) == WB_OK);
    CHECK(wb_gen_run(g, &err) == WB_OK);
    const wb_gen_result *r = wb_gen_result_get(g);
    CHECK(r->stop_reason == WB_STOP_CANCELLED);
    CHECK(r->n_tokens == 4 && r->n_itl == 3);
    CHECK(r->cache_released == 1);
    CHECK(r->cache_tokens_before_release == n + 3); /* the 4th token was never fed back */
    CHECK(r->last_token_ms >= r->ttft_ms && r->e2e_ms >= r->last_token_ms);
    double sum = 0;
    for (size_t i = 0; i < r->n_itl; i++) sum += r->itl_ms[i];
    CHECK_NEAR(sum, r->last_token_ms - r->ttft_ms, 1e-6);
    wb_gen_free(g);

    /* From an abort callback, and from outside with wb_gen_cancel part way. */
    gp.cancel_after = 0;
    gp.abort_fn = abort_when_zero;
    g_abort_countdown = 3;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &g, &err) == WB_OK);
    CHECK(wb_gen_run(g, &err) == WB_OK);
    r = wb_gen_result_get(g);
    CHECK(r->stop_reason == WB_STOP_CANCELLED && r->cache_released == 1);
    wb_gen_free(g);
    gp.abort_fn = NULL;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &g, &err) == WB_OK);
    for (int i = 0; i < 5; i++) {
        const char *piece;
        size_t len;
        int done;
        CHECK(wb_gen_next(g, &piece, &len, &done, &err) == WB_OK);
    }
    CHECK(wb_gen_result_get(g)->cache_released == 0);
    CHECK(wb_gen_cancel(g, &err) == WB_OK);
    r = wb_gen_result_get(g);
    CHECK(r->stop_reason == WB_STOP_CANCELLED && r->n_tokens == 5);
    CHECK(r->cache_released == 1 && r->cache_tokens_before_release == n + 4);
    CHECK(wb_gen_cancel(g, &err) == WB_OK); /* idempotent */
    wb_gen_free(g);

    /* Every stop releases the cache, not only cancellation; without a cache there is none. */
    gp = wb_gen_default_params();
    gp.ignore_eos = 1;
    sp.max_tokens = 3;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &g, &err) == WB_OK);
    CHECK(wb_gen_run(g, &err) == WB_OK);
    r = wb_gen_result_get(g);
    CHECK(r->stop_reason == WB_STOP_LENGTH && r->cache_released == 1);
    CHECK(r->cache_tokens_before_release == n + 2);
    wb_gen_free(g);
    gp.cache = 0;
    CHECK(wb_gen_new_ids(g_model, prompt, (size_t)n, &sp, &gp, &g, &err) == WB_OK);
    CHECK(wb_gen_run(g, &err) == WB_OK);
    r = wb_gen_result_get(g);
    CHECK(r->cache_released == 0 && r->cache_tokens_before_release == 0 && r->use_cache == 0);
    wb_gen_free(g);
}

static void batch_arguments_are_checked(void) {
    wb_err err = {0};
    wb_batch *b = NULL;
    CHECK(wb_batch_new(NULL, &b, &err) == WB_ERR_ARG);
    CHECK(wb_batch_new(g_model, &b, &err) == WB_OK);
    int32_t p[3] = {1, 2, 3}, huge[1] = {1 << 30};
    const int32_t *ps[2] = {p, huge};
    size_t lens[2] = {3, 1};
    wb_sampling_params sp = wb_sampling_default_params();
    CHECK(wb_batch_generate(b, ps, lens, 0, &sp, NULL, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "n_seqs");
    CHECK(wb_batch_generate(b, ps, lens, 2, &sp, NULL, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "prompts[1]: prompt ids[0]");
    CHECK(wb_batch_result_get(b) == NULL);
    sp = wb_sampling_default_params();
    wb_batch_params bp = wb_batch_default_params();
    bp.gen.n_ctx = T_CTX + 1;
    CHECK(wb_batch_generate(b, ps, lens, 1, &sp, &bp, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "n_ctx");
    /* eos ends one sequence early while the other goes on; the empty prompt starts from eos. */
    size_t zero[2] = {0, 3};
    const int32_t *ps2[2] = {NULL, p};
    sp.max_tokens = 5;
    sp.seed = 7;
    sp.has_seed = 1;
    CHECK(wb_batch_generate(b, ps2, zero, 2, &sp, NULL, &err) == WB_OK);
    const wb_batch_result *r = wb_batch_result_get(b);
    CHECK(r && r->seqs[0].prompt_tokens == 1 && r->seqs[1].prompt_tokens == 3);
    wb_batch_free(b);
}

int main(void) {
    if (!make_model()) {
        fprintf(stderr, "could not build the fixture model\n");
        return 1;
    }
    RUN(batch_tokens_equal_single_tokens_for_b_up_to_16_with_mixed_prompt_lengths);
    RUN(a_batched_step_gives_each_session_its_own_decode_logits);
    RUN(chunked_prefill_gives_the_same_logits_as_one_shot);
    RUN(a_forked_prefix_plus_the_suffix_matches_a_cold_prefill);
    RUN(cancellation_ends_the_request_and_releases_its_cache);
    RUN(batch_arguments_are_checked);
    remove_model();
    return check_summary();
}
