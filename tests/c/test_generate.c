/* test_generate.c - the generation loop: stop hold-back over many random prompts and stops, stop
 * reasons, prompt trimming, seeds, timings, and cached = uncached on a tiny random GPT-2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "wb_generate.h"

/* ---- fixtures -------------------------------------------------------------------------------- */

static const char *k_corpus =
    "Customer (Ana): Hi, how do I export my board data?\n"
    "Agent (Lena): Open the board menu and choose Export, then CSV.\n"
    "Customer (Bo): Hi, my account is locked. Can you help?\n"
    "Agent (Sam): Sure, I reset the lock. Try again now.\n"
    "Customer (Zoë): Hi, can I pay in € or ¥? 日本から\n"
    "Agent (Lena): Yes, invoices support EUR and JPY.\n";

static wb_tokenizer *g_tok; /* trained once for the whole file */

static wb_tokenizer *tokenizer(void) {
    if (g_tok) return g_tok;
    wb_bpe_train_params bp = wb_bpe_train_default_params();
    static const char *const special[] = {"<|endoftext|>"};
    bp.vocab_size = 320;
    bp.special_tokens = special;
    bp.n_special_tokens = 1;
    bp.min_pair_count = 2;
    wb_err err = {0};
    size_t n = strlen(k_corpus);
    char *text = malloc(n * 4 + 1);
    for (int i = 0; i < 4; i++) memcpy(text + i * n, k_corpus, n);
    text[4 * n] = 0;
    if (wb_bpe_train(text, 4 * n, &bp, &g_tok, &err) != WB_OK)
        fprintf(stderr, "fixture tokenizer: %s\n", err.msg);
    free(text);
    return g_tok;
}

/* A fake model: next-token logits are a hash of the last two ids and the position, scaled so a
 * few tokens dominate; the `eos_after` knob makes eos overwhelming from that length on. */
typedef struct fake {
    int32_t V;
    uint64_t salt;
    float scale;
    int32_t eos;
    int eos_after; /* 0: never */
    int calls;
    const unsigned char *banned; /* ids whose bytes hold control characters */
} fake;

static unsigned char g_banned[4096];

/* Byte tokens for control characters (NUL, \x01, ...) would make stop strings built from the
 * output ambiguous in C strings; keep the fake model to printable text and newlines. */
static void ban_control_tokens(void) {
    int32_t V = wb_tokenizer_vocab_size(tokenizer());
    for (int32_t i = 0; i < V && i < 4096; i++) {
        size_t n = 0;
        const char *b = wb_tokenizer_token_bytes(tokenizer(), i, &n);
        g_banned[i] = !b;
        for (size_t k = 0; b && k < n; k++) {
            unsigned char c = (unsigned char)b[k];
            if ((c < 0x20 && c != '\n') || c == 0x7f) g_banned[i] = 1;
        }
    }
}

static wb_status fake_logits(void *ud, const int32_t *ids, int n, float *logits, wb_err *err) {
    (void)err;
    fake *f = ud;
    f->calls++;
    wb_rng r;
    uint64_t key = f->salt ^ ((uint64_t)ids[n - 1] * 0x9E3779B97F4A7C15ULL) ^
                   ((uint64_t)(n > 1 ? ids[n - 2] : 7) * 0xC2B2AE3D27D4EB4FULL) ^ (uint64_t)n;
    wb_rng_seed(&r, key);
    for (int32_t i = 0; i < f->V; i++) logits[i] = f->scale * (float)wb_rng_uniform(&r);
    for (int32_t i = 0; i < f->V && i < 4096; i++)
        if (g_banned[i]) logits[i] = -1e9f;
    if (f->eos >= 0) logits[f->eos] = -1e9f; /* no accidental eos */
    if (f->eos_after > 0 && f->eos >= 0 && n >= f->eos_after) logits[f->eos] = 1e9f;
    return WB_OK;
}

static fake fake_new(uint64_t salt) {
    fake f = {wb_tokenizer_vocab_size(tokenizer()), salt, 8.0f,
              wb_tokenizer_eos_id(tokenizer()), 0, 0, g_banned};
    return f;
}

typedef struct run_out {
    char *stream; /* concatenated pieces */
    size_t stream_len;
    int pieces_ok; /* every piece complete UTF-8 */
    char *text;
    size_t text_len;
    int32_t *ids;
    size_t n_ids;
    wb_stop_reason reason;
    int stop_index, prompt_tokens, dropped;
    uint64_t seed;
    double ttft, prefill, e2e, dpt;
    size_t n_itl;
    wb_status st;
} run_out;

static void run_out_free(run_out *o) {
    free(o->stream);
    free(o->text);
    free(o->ids);
}

static int utf8_complete(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

static run_out drive(wb_gen *g) {
    run_out o;
    memset(&o, 0, sizeof o);
    o.pieces_ok = 1;
    size_t cap = 16;
    o.stream = malloc(cap);
    wb_err err = {0};
    for (int done = 0; !done;) {
        const char *piece;
        size_t n;
        o.st = wb_gen_next(g, &piece, &n, &done, &err);
        if (o.st != WB_OK) break;
        if (!utf8_complete((const unsigned char *)piece, n)) o.pieces_ok = 0;
        while (o.stream_len + n + 1 > cap) o.stream = realloc(o.stream, cap *= 2);
        memcpy(o.stream + o.stream_len, piece, n);
        o.stream_len += n;
    }
    o.stream[o.stream_len] = 0;
    const wb_gen_result *r = wb_gen_result_get(g);
    o.text = malloc(r->text_len + 1);
    memcpy(o.text, r->text, r->text_len + 1);
    o.text_len = r->text_len;
    o.ids = malloc((r->n_tokens + 1) * sizeof *o.ids);
    memcpy(o.ids, r->token_ids, r->n_tokens * sizeof *o.ids);
    o.n_ids = r->n_tokens;
    o.reason = r->stop_reason;
    o.stop_index = r->stop_index;
    o.prompt_tokens = r->prompt_tokens;
    o.dropped = r->prompt_tokens_dropped;
    o.seed = r->seed;
    o.ttft = r->ttft_ms;
    o.prefill = r->prefill_ms;
    o.e2e = r->e2e_ms;
    o.dpt = r->decode_ms_per_token;
    o.n_itl = r->n_itl;
    return o;
}

static run_out run_fake(fake *f, const char *prompt, const wb_sampling_params *sp,
                        const wb_gen_params *gp, int n_ctx) {
    wb_gen *g = NULL;
    wb_err err = {0};
    wb_status st = wb_gen_new_custom(fake_logits, f, f->V, n_ctx, tokenizer(), prompt,
                                     strlen(prompt), sp, gp, &g, &err);
    CHECK_MSG(st == WB_OK, "%s", err.msg);
    run_out o;
    if (st != WB_OK) {
        memset(&o, 0, sizeof o);
        o.st = st;
        o.stream = calloc(1, 1);
        o.text = calloc(1, 1);
        return o;
    }
    o = drive(g);
    wb_gen_free(g);
    return o;
}

/* ---- stop hold-back -------------------------------------------------------------------------- */

static size_t char_start(const char *s, size_t i) {
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return i;
}

static void streamed_pieces_add_up_to_the_text_and_never_show_a_stop(void) {
    static const char *const prompts[] = {"Customer (Ana): Hi,", "Agent (", "Hi, my", "日本",
                                          "Export, then", "x"};
    wb_rng r;
    wb_rng_seed(&r, 2024);
    int matched = 0, multi_token = 0, held_then_flushed = 0;
    for (int iter = 0; iter < 300; iter++) {
        fake f = fake_new(iter * 31 + 5);
        const char *prompt = prompts[iter % 6];
        wb_sampling_params sp = wb_sampling_default_params();
        sp.max_tokens = 12 + (int)(wb_rng_u32(&r) % 30);
        sp.seed = wb_rng_u32(&r);
        sp.has_seed = 1;
        sp.temperature = 0.7f + (float)wb_rng_uniform(&r);
        wb_gen_params gp = wb_gen_default_params();
        run_out full = run_fake(&f, prompt, &sp, &gp, 128);
        CHECK(full.st == WB_OK);
        CHECK(full.reason == WB_STOP_LENGTH);
        CHECK(full.stream_len == full.text_len && !memcmp(full.stream, full.text, full.text_len));
        if (full.text_len < 2) {
            run_out_free(&full);
            continue;
        }
        /* Stops: a real substring of the output (often spanning tokens), a near miss that shares
         * its start and so must be held and later released, and a string that never occurs. */
        char stops[3][32];
        size_t a = char_start(full.text, wb_rng_u32(&r) % full.text_len);
        size_t b = a + 1 + wb_rng_u32(&r) % 12;
        if (b >= full.text_len) b = full.text_len;
        else b = char_start(full.text, b);
        while (b < full.text_len && b <= a) b = char_start(full.text, b + 4 < full.text_len ? b + 4 : full.text_len);
        if (b <= a) b = full.text_len;
        size_t len = b - a;
        if (len == 0 || len > 20) {
            run_out_free(&full);
            continue;
        }
        memcpy(stops[0], full.text + a, len);
        stops[0][len] = 0;
        snprintf(stops[1], sizeof stops[1], "%.*s\x01", (int)(len > 3 ? 3 : len), full.text + a);
        snprintf(stops[2], sizeof stops[2], "\x02never");
        const char *sv[3] = {stops[0], stops[1], stops[2]};
        int order = iter % 3; /* vary which stops are present and in what order */
        const char *use[3];
        int n_use = 0;
        if (order == 0) use[n_use++] = sv[0];
        else if (order == 1) use[n_use++] = sv[1], use[n_use++] = sv[0];
        else use[n_use++] = sv[2], use[n_use++] = sv[1], use[n_use++] = sv[0];
        sp.stop = use;
        sp.n_stop = n_use;
        f.calls = 0;
        run_out o = run_fake(&f, prompt, &sp, &gp, 128);
        CHECK(o.st == WB_OK);
        CHECK(o.pieces_ok);
        /* The reader saw exactly the final text: no byte of the stop ever went out. */
        CHECK_MSG(o.stream_len == o.text_len && !memcmp(o.stream, o.text, o.text_len),
                  "iter %d: stream \"%s\" vs text \"%s\"", iter, o.stream, o.text);
        CHECK_MSG(o.reason == WB_STOP_STOP, "iter %d: reason %s", iter,
                  wb_stop_reason_name(o.reason));
        if (o.reason == WB_STOP_STOP && o.stop_index >= 0) {
            matched++;
            const char *s = use[o.stop_index];
            size_t L = strlen(s);
            /* Same seed, same tokens until the stop: the full run continues with the stop. */
            CHECK(o.text_len + L <= full.text_len);
            CHECK(!memcmp(full.text, o.text, o.text_len));
            CHECK(!memcmp(full.text + o.text_len, s, L));
            for (int k = 0; k < n_use; k++) CHECK(strstr(o.text, use[k]) == NULL);
            CHECK(o.n_ids <= full.n_ids && !memcmp(o.ids, full.ids, o.n_ids * sizeof *o.ids));
            /* Tokens were paid for: the stop's own tokens are in token_ids. */
            if (o.n_ids >= 2) {
                char *dec;
                size_t dl;
                wb_err err = {0};
                CHECK(wb_tokenizer_decode(tokenizer(), o.ids, o.n_ids - 1, &dec, &dl, &err) ==
                      WB_OK);
                multi_token += dl > o.text_len; /* the stop began before the last token */
                wb_free(dec);
            }
        }
        run_out_free(&o);

        /* Only the near miss: held while it could still match, then released. */
        const char *miss[1] = {sv[1]};
        sp.stop = miss;
        sp.n_stop = 1;
        o = run_fake(&f, prompt, &sp, &gp, 128);
        CHECK(o.stream_len == o.text_len && !memcmp(o.stream, o.text, o.text_len));
        CHECK(o.reason == WB_STOP_LENGTH);
        CHECK(o.text_len == full.text_len && !memcmp(o.text, full.text, o.text_len));
        held_then_flushed++;
        run_out_free(&o);
        run_out_free(&full);
    }
    CHECK(matched > 200);
    CHECK(held_then_flushed > 200);
    CHECK(multi_token > 20);
    printf("     %d stops matched, %d ended inside a multi-token stop, %d near misses\n",
           matched, multi_token, held_then_flushed);
}

static void holdback_off_streams_the_stop_like_a_naive_loop(void) {
    fake f = fake_new(77);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = 0;
    sp.max_tokens = 20;
    wb_gen_params gp = wb_gen_default_params();
    run_out full = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(full.text_len >= 6);
    char stop[8];
    memcpy(stop, full.text + 3, 3);
    stop[3] = 0;
    const char *sv[1] = {stop};
    sp.stop = sv;
    sp.n_stop = 1;
    gp.holdback = 0;
    run_out leak = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(leak.reason == WB_STOP_STOP);
    CHECK(strstr(leak.text, stop) == NULL);
    CHECK(strstr(leak.stream, stop) != NULL); /* the classic bug, on purpose */
    gp.holdback = 1;
    run_out held = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(strcmp(held.text, leak.text) == 0);
    CHECK(strcmp(held.stream, held.text) == 0);
    run_out_free(&full);
    run_out_free(&leak);
    run_out_free(&held);
}

/* ---- stop reasons ---------------------------------------------------------------------------- */

static void eos_and_stop_token_ids_end_generation_and_stay_in_token_ids(void) {
    fake f = fake_new(3);
    f.eos_after = 8; /* sequence length 8: prompt tokens + generated */
    wb_sampling_params sp = wb_sampling_default_params();
    sp.seed = 1;
    sp.has_seed = 1;
    sp.max_tokens = 50;
    wb_gen_params gp = wb_gen_default_params();
    run_out o = run_fake(&f, "Hi,", &sp, &gp, 128);
    CHECK(o.reason == WB_STOP_EOS);
    CHECK(o.n_ids >= 1 && o.ids[o.n_ids - 1] == f.eos);
    CHECK(strstr(o.text, "<|endoftext|>") == NULL);
    CHECK(strcmp(o.stream, o.text) == 0);
    /* A stop id: the third generated token of the same run. */
    f.eos_after = 0;
    run_out base = run_fake(&f, "Hi,", &sp, &gp, 128);
    int32_t stop_id = base.ids[2];
    size_t first = 0;
    while (base.ids[first] != stop_id) first++;
    sp.stop_token_ids = &stop_id;
    sp.n_stop_token_ids = 1;
    run_out s = run_fake(&f, "Hi,", &sp, &gp, 128);
    CHECK(s.reason == WB_STOP_STOP && s.stop_index == 0);
    CHECK(s.n_ids == first + 1 && s.ids[first] == stop_id);
    char *dec;
    size_t dl;
    wb_err err = {0};
    CHECK(wb_tokenizer_decode(tokenizer(), s.ids, first, &dec, &dl, &err) == WB_OK);
    CHECK(dl == s.text_len && !memcmp(dec, s.text, dl)); /* the stop token's text is not in it */
    wb_free(dec);
    run_out_free(&o);
    run_out_free(&base);
    run_out_free(&s);
}

static void length_context_and_prompt_trimming(void) {
    fake f = fake_new(9);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.max_tokens = 5;
    sp.seed = 4;
    sp.has_seed = 1;
    wb_gen_params gp = wb_gen_default_params();
    run_out o = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(o.reason == WB_STOP_LENGTH && o.n_ids == 5 && o.dropped == 0);
    CHECK(o.n_itl == 4);
    CHECK(o.ttft >= o.prefill && o.e2e >= o.ttft && o.dpt >= 0);
    run_out_free(&o);

    /* A long prompt is cut on the left to leave room for max_tokens. */
    const char *longp = "Customer (Ana): Hi, how do I export my board data? Agent (Lena): Open "
                        "the board menu and choose Export, then CSV. Customer (Bo): Hi, my "
                        "account is locked.";
    int32_t *ids;
    size_t n;
    wb_err err = {0};
    CHECK(wb_tokenizer_encode(tokenizer(), longp, strlen(longp), &ids, &n, &err) == WB_OK);
    wb_free(ids);
    int n_ctx = 24;
    sp.max_tokens = 10;
    o = run_fake(&f, longp, &sp, &gp, n_ctx);
    CHECK((size_t)n > 14);
    CHECK(o.prompt_tokens == 14 && o.dropped == (int)n - 14);
    CHECK(o.reason == WB_STOP_LENGTH && o.n_ids == 10);
    run_out_free(&o);

    /* max_tokens above the context: one prompt token kept, generation ends at "context". */
    sp.max_tokens = 100;
    o = run_fake(&f, longp, &sp, &gp, n_ctx);
    CHECK(o.prompt_tokens == 1 && o.dropped == (int)n - 1);
    CHECK(o.reason == WB_STOP_CONTEXT && o.n_ids == (size_t)n_ctx - 1);
    CHECK(strcmp(o.stream, o.text) == 0);
    run_out_free(&o);

    /* An empty prompt starts from eos. */
    sp.max_tokens = 3;
    o = run_fake(&f, "", &sp, &gp, n_ctx);
    CHECK(o.st == WB_OK && o.prompt_tokens == 1 && o.n_ids == 3);
    run_out_free(&o);
}

static int abort_after(void *ud) { return --*(int *)ud < 0; }
/* WB_CONSTRAINT_FN callbacks: nothing restricted for two tokens, then the end; or ids 10, 35. */
static wb_status allow_none(void *ud, const int32_t *g, size_t n, uint32_t *bits, int32_t V,
                            int32_t *n_allowed, wb_err *err) {
    (void)ud, (void)g, (void)bits, (void)V, (void)err;
    *n_allowed = n >= 2 ? 0 : -1;
    return WB_OK;
}
static wb_status allow_two(void *ud, const int32_t *g, size_t n, uint32_t *bits, int32_t V,
                           int32_t *n_allowed, wb_err *err) {
    (void)ud, (void)g, (void)n, (void)V, (void)err;
    bits[0] |= 1u << 10;
    bits[1] |= 1u << 3; /* ids 10 and 35 */
    *n_allowed = 2;
    return WB_OK;
}

static void cancel_and_constraint_hooks(void) {
    fake f = fake_new(12);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.max_tokens = 30;
    wb_gen_params gp = wb_gen_default_params();
    int budget = 4;
    gp.abort_fn = abort_after;
    gp.abort_data = &budget;
    run_out o = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(o.reason == WB_STOP_CANCELLED && o.n_ids == 4);
    CHECK(strcmp(o.stream, o.text) == 0);
    run_out_free(&o);

    gp = wb_gen_default_params();
    wb_err err = {0};
    wb_constraint *c = NULL;
    CHECK(wb_constraint_fn_new(f.V, allow_none, NULL, &c, &err) == WB_OK);
    gp.constraint = c;
    o = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(o.reason == WB_STOP_CONSTRAINT && o.n_ids == 2);
    run_out_free(&o);
    wb_constraint_free(c);

    CHECK(wb_constraint_fn_new(f.V, allow_two, NULL, &c, &err) == WB_OK);
    gp.constraint = c;
    sp.max_tokens = 12;
    o = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(o.n_ids == 12);
    for (size_t i = 0; i < o.n_ids; i++) CHECK(o.ids[i] == 10 || o.ids[i] == 35);
    run_out_free(&o);
    wb_constraint_free(c);
}

static void seeds_reproduce_and_the_drawn_seed_is_reported(void) {
    fake f = fake_new(21);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.max_tokens = 25;
    sp.temperature = 1.2f;
    wb_gen_params gp = wb_gen_default_params();
    run_out a = run_fake(&f, "Hi,", &sp, &gp, 64); /* no seed: one is drawn */
    sp.seed = a.seed;
    sp.has_seed = 1;
    run_out b = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(a.n_ids == b.n_ids && !memcmp(a.ids, b.ids, a.n_ids * sizeof *a.ids));
    sp.seed = a.seed + 1;
    run_out c = run_fake(&f, "Hi,", &sp, &gp, 64);
    CHECK(c.n_ids != a.n_ids || memcmp(a.ids, c.ids, a.n_ids * sizeof *a.ids) != 0);
    run_out_free(&a);
    run_out_free(&b);
    run_out_free(&c);
}

static void bad_arguments_are_errors(void) {
    fake f = fake_new(1);
    wb_sampling_params sp = wb_sampling_default_params();
    sp.top_p = 2;
    wb_gen *g = NULL;
    wb_err err = {0};
    CHECK(wb_gen_new_custom(fake_logits, &f, f.V, 64, tokenizer(), "x", 1, &sp, NULL, &g,
                            &err) == WB_ERR_ARG);
    CHECK(g == NULL);
    CHECK_ERR_MENTIONS(err.msg, "top_p");
    sp = wb_sampling_default_params();
    CHECK(wb_gen_new_custom(fake_logits, &f, f.V, 1, tokenizer(), "x", 1, &sp, NULL, &g,
                            &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "n_ctx");
    wb_gen_free(NULL);
    CHECK(strcmp(wb_stop_reason_name(WB_STOP_CONTEXT), "context") == 0);
}

/* ---- a tiny random GPT-2 on disk: cached and uncached agree -------------------------------- */

static uint64_t fx_state = 88172645463325252ULL;
static float fx_rand(void) {
    fx_state ^= fx_state << 13;
    fx_state ^= fx_state >> 7;
    fx_state ^= fx_state << 17;
    return (float)((fx_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int write_model(const char *dir, int V, int T, int C, int L) {
    char path[600];
    wb_err err = {0};
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (wb_tokenizer_save(tokenizer(), path, &err) != WB_OK) return 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    if (!fp) return 0;
    fprintf(fp,
            "{\"model_type\":\"gpt2\",\"vocab_size\":%d,\"n_positions\":%d,\"n_embd\":%d,"
            "\"n_layer\":%d,\"n_head\":2,\"n_inner\":null,\"layer_norm_epsilon\":1e-05,"
            "\"activation_function\":\"gelu_new\",\"tie_word_embeddings\":true}\n",
            V, T, C, L);
    fclose(fp);
    enum { MAXT = 64 };
    wb_tensor_view v[MAXT];
    char names[MAXT][64];
    float *bufs[MAXT];
    int n = 0;
#define ADD(nm, d0, d1, sc, off)                                                             \
    do {                                                                                     \
        snprintf(names[n], sizeof names[n], "%s", nm);                                       \
        size_t cnt = (size_t)(d0) * (size_t)((d1) != 0 ? (d1) : 1);                               \
        bufs[n] = malloc(cnt * sizeof(float));                                               \
        for (size_t q = 0; q < cnt; q++) bufs[n][q] = (off) + (sc) * fx_rand();              \
        v[n].name = names[n];                                                                \
        v[n].dtype = WB_F32;                                                                 \
        v[n].ndim = (d1) != 0 ? 2 : 1;                                                            \
        v[n].shape[0] = (d0);                                                                \
        v[n].shape[1] = (d1);                                                                \
        v[n].data = bufs[n];                                                                 \
        v[n].nbytes = cnt * sizeof(float);                                                   \
        n++;                                                                                 \
    } while (0)
    ADD("wte.weight", V, C, 0.5f, 0);
    ADD("wpe.weight", T, C, 0.1f, 0);
    for (int l = 0; l < L; l++) {
        char nm[64];
#define LAYER(suffix, d0, d1, sc, off)                                                       \
    snprintf(nm, sizeof nm, "h.%d.%s", l, suffix);                                           \
    ADD(nm, d0, d1, sc, off)
        LAYER("ln_1.weight", C, 0, 0.1f, 1.0f);
        LAYER("ln_1.bias", C, 0, 0.05f, 0);
        LAYER("attn.c_attn.weight", C, 3 * C, 0.3f, 0);
        LAYER("attn.c_attn.bias", 3 * C, 0, 0.05f, 0);
        LAYER("attn.c_proj.weight", C, C, 0.2f, 0);
        LAYER("attn.c_proj.bias", C, 0, 0.05f, 0);
        LAYER("ln_2.weight", C, 0, 0.1f, 1.0f);
        LAYER("ln_2.bias", C, 0, 0.05f, 0);
        LAYER("mlp.c_fc.weight", C, 4 * C, 0.2f, 0);
        LAYER("mlp.c_fc.bias", 4 * C, 0, 0.05f, 0);
        LAYER("mlp.c_proj.weight", 4 * C, C, 0.1f, 0);
        LAYER("mlp.c_proj.bias", C, 0, 0.05f, 0);
#undef LAYER
    }
    ADD("ln_f.weight", C, 0, 0.1f, 1.0f);
    ADD("ln_f.bias", C, 0, 0.05f, 0);
#undef ADD
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    wb_status st = wb_safetensors_write(path, v, n, NULL, 0, &err);
    for (int i = 0; i < n; i++) free(bufs[i]);
    if (st != WB_OK) fprintf(stderr, "fixture: %s\n", err.msg);
    return st == WB_OK;
}

static void cached_and_uncached_give_the_same_tokens_on_a_real_model(void) {
    char tmpl[] = "/tmp/wb_test_generate_XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    if (!dir) return;
    int V = wb_tokenizer_vocab_size(tokenizer());
    CHECK(write_model(dir, V, 48, 32, 2));
    wb_model *m = NULL;
    wb_err err = {0};
    wb_status st = wb_model_load(dir, &m, &err);
    CHECK_MSG(st == WB_OK, "%s", err.msg);
    if (st == WB_OK) {
        const char *prompt = "Customer (Ana): Hi,";
        for (int mode = 0; mode < 3; mode++) {
            wb_sampling_params sp = wb_sampling_default_params();
            sp.max_tokens = 30;
            sp.seed = 99 + mode;
            sp.has_seed = 1;
            if (mode == 0) sp.temperature = 0;
            if (mode == 2) sp.top_k = 20, sp.top_p = 0.9f, sp.frequency_penalty = 0.5f;
            wb_gen_params gp = wb_gen_default_params();
            wb_gen *a = NULL, *b = NULL;
            CHECK(wb_generate(m, prompt, strlen(prompt), &sp, &gp, &a, &err) == WB_OK);
            gp.cache = 0;
            CHECK(wb_generate(m, prompt, strlen(prompt), &sp, &gp, &b, &err) == WB_OK);
            if (a && b) {
                const wb_gen_result *ra = wb_gen_result_get(a), *rb = wb_gen_result_get(b);
                CHECK(ra->n_tokens == rb->n_tokens);
                CHECK(!memcmp(ra->token_ids, rb->token_ids, ra->n_tokens * sizeof(int32_t)));
                CHECK(strcmp(ra->text, rb->text) == 0);
                CHECK(ra->prefill_ms >= 0 && ra->ttft_ms >= ra->prefill_ms);
                CHECK(ra->n_itl == ra->n_tokens - 1);
            }
            wb_gen_free(a);
            wb_gen_free(b);
        }
        /* Stream with context full on the real model: prompt + tokens reach n_ctx exactly. */
        wb_sampling_params sp = wb_sampling_default_params();
        sp.max_tokens = 100;
        sp.temperature = 0;
        wb_gen_params gp = wb_gen_default_params();
        wb_gen *g = NULL;
        CHECK(wb_gen_new(m, prompt, strlen(prompt), &sp, &gp, &g, &err) == WB_OK);
        run_out o = drive(g);
        CHECK(o.st == WB_OK && o.reason == WB_STOP_CONTEXT);
        CHECK(o.prompt_tokens + (int)o.n_ids == 48);
        CHECK(strcmp(o.stream, o.text) == 0);
        run_out_free(&o);
        wb_gen_free(g);
        gp.n_ctx = 1000;
        CHECK(wb_gen_new(m, prompt, strlen(prompt), &sp, &gp, &g, &err) == WB_ERR_RANGE);
        CHECK_ERR_MENTIONS(err.msg, "n_ctx");
    }
    wb_model_free(m);
    char path[600];
    const char *files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void) {
    if (!tokenizer()) return 1;
    ban_control_tokens();
    RUN(streamed_pieces_add_up_to_the_text_and_never_show_a_stop);
    RUN(holdback_off_streams_the_stop_like_a_naive_loop);
    RUN(eos_and_stop_token_ids_end_generation_and_stay_in_token_ids);
    RUN(length_context_and_prompt_trimming);
    RUN(cancel_and_constraint_hooks);
    RUN(seeds_reproduce_and_the_drawn_seed_is_reported);
    RUN(bad_arguments_are_errors);
    RUN(cached_and_uncached_give_the_same_tokens_on_a_real_model);
    wb_tokenizer_free(g_tok);
    return check_summary();
}
