/* test_constraint.c - constrained decoding: the regex engine against PCRE2, every tokenization of
 * a choice, JSON outputs that parse and validate (cJSON), regex outputs that match, greedy under
 * a mask, the mask-stage fallbacks, unsatisfiable constraints and unsupported syntax. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "check.h"
#include "wb.h"

/* ---- fixtures -------------------------------------------------------------------------------- */

static const char *k_corpus =
    "Ticket: I was charged twice this month\nCategory: billing\n"
    "Ticket: I can't log in after resetting my password\nCategory: account\n"
    "Ticket: Cards are not syncing between my laptop and phone\nCategory: bug\n"
    "Ticket: How do I export my board data\nCategory: how_to\n"
    "Ticket: Please add a dark mode\nCategory: feature_request\n"
    "Ticket: Please cancel my subscription\nCategory: cancellation\n"
    "Ticket: There is a duplicate charge on my card\nTriage: {\"category\": \"billing\", "
    "\"priority\": \"high\", \"needs_human\": true}\n"
    "Ticket: How do I archive old cards\nTriage: {\"category\": \"how_to\", \"priority\": "
    "\"low\", \"needs_human\": false}\n"
    "Order 12345 shipped to alice@example.com on 2024-05-17, total 99.50 EUR.\n";

static wb_tokenizer *g_tok;

static wb_tokenizer *tokenizer(void) {
    if (g_tok) return g_tok;
    wb_bpe_train_params bp = wb_bpe_train_default_params();
    static const char *const special[] = {"<|endoftext|>"};
    bp.vocab_size = 420;
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

static wb_constraint_vocab g_vocab;

static const wb_constraint_vocab *vocab(void) {
    if (!g_vocab.bytes) {
        wb_err err = {0};
        if (wb_constraint_vocab_init(&g_vocab, tokenizer(), &err) != WB_OK)
            fprintf(stderr, "vocab: %s\n", err.msg);
    }
    return &g_vocab;
}

/* A fake model: logits hashed from the last two ids and the position, flat enough that high
 * temperature wanders everywhere the mask allows. */
typedef struct fake {
    int32_t V;
    uint64_t salt;
    float scale;
} fake;

static wb_status fake_logits(void *ud, const int32_t *ids, int n, float *logits, wb_err *err) {
    (void)err;
    fake *f = ud;
    wb_rng r;
    uint64_t key = f->salt ^ ((uint64_t)ids[n - 1] * 0x9E3779B97F4A7C15ULL) ^
                   ((uint64_t)(n > 1 ? ids[n - 2] : 7) * 0xC2B2AE3D27D4EB4FULL) ^ (uint64_t)n;
    wb_rng_seed(&r, key);
    for (int32_t i = 0; i < f->V; i++) logits[i] = f->scale * (float)wb_rng_uniform(&r);
    return WB_OK;
}

/* Generate under constraint c; returns the status, the text in *text (malloc'd) and the
 * result's stop reason. */
typedef struct gen_out {
    wb_status st;
    char *text;
    size_t len;
    wb_stop_reason reason;
    size_t n_tokens, n_masked;
    double logprob;
    char msg[WB_ERR_MSG_SIZE];
} gen_out;

static gen_out generate(const wb_constraint *c, const char *prompt, float temperature,
                        uint64_t seed, int max_tokens, wb_mask_stage stage,
                        const wb_logit_bias *bias, int n_bias) {
    gen_out o;
    memset(&o, 0, sizeof o);
    fake f = {wb_tokenizer_vocab_size(tokenizer()), seed * 7919 + 3, 6.0f};
    wb_sampling_params sp = wb_sampling_default_params();
    sp.temperature = temperature;
    sp.seed = seed;
    sp.has_seed = 1;
    sp.max_tokens = max_tokens;
    sp.mask_stage = stage;
    sp.logit_bias = bias;
    sp.n_logit_bias = n_bias;
    wb_gen_params gp = wb_gen_default_params();
    gp.constraint = c;
    wb_gen *g = NULL;
    wb_err err = {0};
    o.st = wb_gen_new_custom(fake_logits, &f, f.V, 256, tokenizer(), prompt, strlen(prompt), &sp,
                             &gp, &g, &err);
    if (o.st == WB_OK) o.st = wb_gen_run(g, &err);
    if (g) {
        const wb_gen_result *r = wb_gen_result_get(g);
        o.text = malloc(r->text_len + 1);
        memcpy(o.text, r->text, r->text_len + 1);
        o.len = r->text_len;
        o.reason = r->stop_reason;
        o.n_tokens = r->n_tokens;
        o.n_masked = r->n_masked;
        o.logprob = r->constraint_logprob;
        for (size_t i = 0; i < r->n_masked; i++)
            if (!(r->allowed_mass[i] >= 0 && r->allowed_mass[i] <= 1.0001f)) o.logprob = 1;
    }
    if (o.st != WB_OK) memcpy(o.msg, err.msg, sizeof o.msg);
    wb_gen_free(g);
    return o;
}

static wb_constraint *regex(const char *pattern) {
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_regex_new(vocab(), pattern, strlen(pattern), &c, &err);
    CHECK_MSG(st == WB_OK, "%s: %s", pattern, err.msg);
    return c;
}

static pcre2_code *pcre(const char *pattern) {
    int ec;
    PCRE2_SIZE eo;
    char *anch = malloc(strlen(pattern) + 16);
    sprintf(anch, "^(?:%s)$", pattern);
    /* UTF mode: our classes and `.` match whole UTF-8 characters, never stray bytes. */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)anch, PCRE2_ZERO_TERMINATED,
                                   PCRE2_DOLLAR_ENDONLY | PCRE2_UTF, &ec, &eo, NULL);
    free(anch);
    CHECK_MSG(re != NULL, "pcre2 cannot compile %s", pattern);
    return re;
}

static int pcre_match(pcre2_code *re, const char *s, size_t n) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

/* ---- the byte-level regex engine ------------------------------------------------------------- */

static const char *const k_patterns[] = {
    "abc", "a|b|cd", "(ab)*c", "a+b?", "[a-c]{2,4}x", "(?:foo|ba[rz])+", "\\d{3}-\\d{2}",
    "[^a-c]+", "x(yz){0,2}", "(a|ab)(c|bcd)", "[\\w.]+@[a-z]+\\.(com|org)",
    "-?(0|[1-9][0-9]*)", "\\s*\\S+", "a{3,}", "(a|b)*abb", "\\x41\\x42?[\\x30-\\x39]",
};

/* Random short strings over the patterns' alphabet, whole UTF-8 characters and stray bytes. */
static void random_string(wb_rng *r, char *buf, size_t *n) {
    static const char alpha[] = "abcxyzfobrABO0123456789-@._ \t\n";
    static const char *const multi[] = {"é", "日", "ü", "😀"};
    size_t len = wb_rng_u32(r) % 9, i = 0;
    for (size_t k = 0; k < len; k++) {
        uint32_t x = wb_rng_u32(r) % 44;
        if (x < sizeof alpha - 1) buf[i++] = alpha[x];
        else if (x < 42) {
            const char *m = multi[wb_rng_u32(r) % 4];
            memcpy(buf + i, m, strlen(m));
            i += strlen(m);
        } else buf[i++] = (char)(0x80 + wb_rng_u32(r) % 64);
    }
    *n = i;
}

static void regex_full_matches_agree_with_pcre2_on_random_strings(void) {
    wb_rng r;
    wb_rng_seed(&r, 11);
    for (size_t p = 0; p < sizeof k_patterns / sizeof *k_patterns; p++) {
        wb_constraint *c = regex(k_patterns[p]);
        pcre2_code *re = pcre(k_patterns[p]);
        if (!c || !re) {
            wb_constraint_free(c);
            pcre2_code_free(re);
            continue;
        }
        int disagreements = 0, matches = 0;
        for (int i = 0; i < 3000; i++) {
            char buf[48];
            size_t n;
            random_string(&r, buf, &n);
            int a = wb_constraint_matches(c, buf, n), b = pcre_match(re, buf, n);
            matches += b;
            if (a != b && disagreements++ < 3)
                fprintf(stderr, "  %s on %.*s: ours %d pcre2 %d\n", k_patterns[p], (int)n, buf, a,
                        b);
        }
        CHECK_MSG(disagreements == 0, "%s: %d disagreements", k_patterns[p], disagreements);
        (void)matches;
        wb_constraint_free(c);
        pcre2_code_free(re);
    }
}

static void every_regex_output_matches_over_hundreds_of_hot_generations(void) {
    static const char *const pats[] = {"[a-z]+@[a-z]+\\.(com|org)", "\\d{4}-\\d{2}-\\d{2}",
                                       "(Order|Ticket) [0-9]{1,5}", "[A-Z][a-z ]{0,20}[.!?]"};
    static const char *const prompts[] = {"Order ", "Ticket: ", "x", "Category:"};
    int total = 0, complete = 0;
    for (size_t p = 0; p < 4; p++) {
        wb_constraint *c = regex(pats[p]);
        pcre2_code *re = pcre(pats[p]);
        for (int i = 0; c && re && i < 60; i++) {
            gen_out o = generate(c, prompts[i % 4], 2.0f, (uint64_t)(i * 4 + p), 48,
                                 WB_MASK_LOGITS, NULL, 0);
            CHECK_MSG(o.st == WB_OK, "%s", o.msg);
            total++;
            if (o.st == WB_OK && o.reason == WB_STOP_CONSTRAINT) {
                complete++;
                CHECK_MSG(pcre_match(re, o.text, o.len), "%s produced '%s'", pats[p], o.text);
                CHECK(o.n_masked == o.n_tokens);
            } else if (o.st == WB_OK) {
                CHECK_MSG(o.reason == WB_STOP_LENGTH, "reason %d", (int)o.reason);
            }
            free(o.text);
        }
        wb_constraint_free(c);
        pcre2_code_free(re);
    }
    /* Open-ended patterns may hit max_tokens; most generations should finish. */
    CHECK_MSG(complete > total / 2, "%d of %d complete", complete, total);
}

/* ---- choice ---------------------------------------------------------------------------------- */

static const char *const k_labels[] = {"billing", "account", "bug", "how_to", "feature_request",
                                       "cancellation"};

static wb_constraint *labels(wb_leading_space sp) {
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_choice_new(vocab(), k_labels, NULL, 6, sp, &c, &err);
    CHECK_MSG(st == WB_OK, "%s", err.msg);
    return c;
}

/* Walk ids through a fresh state: 1 if every one is allowed and the end is complete. */
static int walk(const wb_constraint *c, const int32_t *ids, size_t n) {
    wb_constraint_state *s = NULL;
    wb_err err = {0};
    if (wb_constraint_state_new(c, &s, &err) != WB_OK) return 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        const uint32_t *m;
        int32_t na;
        ok = wb_constraint_state_allowed(s, NULL, 0, &m, &na, &err) == WB_OK && m &&
             (m[ids[i] >> 5] >> (ids[i] & 31) & 1u) &&
             wb_constraint_state_advance(s, ids[i], &err) == WB_OK;
    }
    ok = ok && wb_constraint_state_complete(s);
    wb_constraint_state_free(s);
    return ok;
}

static void a_choice_admits_every_tokenization_of_each_label(void) {
    wb_constraint *c = labels(WB_SPACE_OPTIONAL);
    wb_tokenizer *tok = tokenizer();
    for (int k = 0; c && k < 6; k++) {
        char text[64];
        for (int space = 0; space < 2; space++) {
            snprintf(text, sizeof text, "%s%s", space ? " " : "", k_labels[k]);
            int32_t *ids = NULL;
            size_t n = 0;
            wb_err err = {0};
            wb_tokenizer_encode(tok, text, strlen(text), &ids, &n, &err);
            CHECK_MSG(walk(c, ids, n), "canonical encoding of '%s'", text);
            wb_free(ids);
            /* Byte by byte: one single-byte token per byte. */
            int32_t by[64];
            size_t L = strlen(text);
            for (size_t i = 0; i < L; i++) by[i] = wb_tokenizer_id_of_bytes(tok, text + i, 1);
            CHECK_MSG(walk(c, by, L), "byte-by-byte spelling of '%s'", text);
            /* A split at every point: the two halves re-encoded separately. */
            for (size_t cut = 1; cut < L; cut++) {
                int32_t *a = NULL, *b = NULL, all[64];
                size_t na = 0, nb = 0;
                wb_tokenizer_encode(tok, text, cut, &a, &na, &err);
                wb_tokenizer_encode(tok, text + cut, L - cut, &b, &nb, &err);
                memcpy(all, a, na * sizeof *a);
                memcpy(all + na, b, nb * sizeof *b);
                CHECK_MSG(walk(c, all, na + nb), "'%s' split at %zu", text, cut);
                wb_free(a);
                wb_free(b);
            }
        }
    }
    /* Not a label, or a label with more after it, is refused. */
    int32_t x[3] = {wb_tokenizer_id_of_bytes(tok, "b", 1), wb_tokenizer_id_of_bytes(tok, "u", 1),
                    wb_tokenizer_id_of_bytes(tok, "s", 1)};
    CHECK(c && !walk(c, x, 3));
    wb_constraint_free(c);

    wb_constraint *strict = labels(WB_SPACE_NONE);
    int32_t sp_b[2] = {wb_tokenizer_id_of_bytes(tok, " ", 1),
                       wb_tokenizer_id_of_bytes(tok, "b", 1)};
    const uint32_t *m;
    int32_t na;
    wb_constraint_state *s = NULL;
    wb_err err = {0};
    CHECK(strict && wb_constraint_state_new(strict, &s, &err) == WB_OK);
    CHECK(s && wb_constraint_state_allowed(s, NULL, 0, &m, &na, &err) == WB_OK);
    CHECK(s && m && !(m[sp_b[0] >> 5] >> (sp_b[0] & 31) & 1u)); /* no space without the option */
    wb_constraint_state_free(s);
    wb_constraint_free(strict);
}

static void every_choice_output_is_exactly_one_label_at_high_temperature(void) {
    wb_constraint *c = labels(WB_SPACE_OPTIONAL);
    static const char *const prompts[] = {"Ticket: my card was charged twice\nCategory:",
                                          "Category:", "x", "Ticket: I can't log in\nCategory: "};
    int seen[6] = {0};
    for (int i = 0; c && i < 240; i++) {
        gen_out o = generate(c, prompts[i % 4], 3.0f, (uint64_t)i, 24, WB_MASK_LOGITS, NULL, 0);
        CHECK_MSG(o.st == WB_OK, "%s", o.msg);
        CHECK_MSG(o.reason == WB_STOP_CONSTRAINT, "reason %d", (int)o.reason);
        const char *t = o.text && o.text[0] == ' ' ? o.text + 1 : o.text;
        int hit = -1;
        for (int k = 0; t && k < 6; k++)
            if (strcmp(t, k_labels[k]) == 0) hit = k;
        CHECK_MSG(hit >= 0, "output '%s' is not a label", o.text ? o.text : "(null)");
        if (hit >= 0) seen[hit]++;
        CHECK(o.logprob <= 0);
        free(o.text);
    }
    for (int k = 0; k < 6; k++) CHECK_MSG(seen[k] > 0, "label %s never produced", k_labels[k]);
    wb_constraint_free(c);
}

/* ---- JSON schema ---------------------------------------------------------------------------- */

static const char *k_triage =
    "{\"type\": \"object\", \"properties\": {"
    "\"category\": {\"enum\": [\"billing\", \"account\", \"bug\", \"how_to\", "
    "\"feature_request\", \"cancellation\"]},"
    "\"priority\": {\"enum\": [\"low\", \"medium\", \"high\", \"urgent\"]},"
    "\"needs_human\": {\"type\": \"boolean\"}},"
    "\"required\": [\"category\", \"priority\", \"needs_human\"]}";

static const char *k_rich =
    "{\"type\": \"object\", \"properties\": {"
    "\"id\": {\"type\": \"integer\", \"minimum\": -40, \"maximum\": 1234},"
    "\"note\": {\"type\": \"string\", \"maxLength\": 12},"
    "\"ok\": {\"type\": \"boolean\"},"
    "\"inner\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"null\"}}}},"
    "\"required\": [\"id\", \"note\", \"ok\", \"inner\"]}";

static int utf8_chars(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int validate_triage(const cJSON *j) {
    static const char *const pr[] = {"low", "medium", "high", "urgent"};
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "category");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "priority");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "needs_human");
    if (!cJSON_IsString(c) || !cJSON_IsString(p) || !cJSON_IsBool(h)) return 0;
    if (cJSON_GetArraySize(j) != 3) return 0;
    int okc = 0, okp = 0;
    for (int k = 0; k < 6; k++) okc |= strcmp(c->valuestring, k_labels[k]) == 0;
    for (int k = 0; k < 4; k++) okp |= strcmp(p->valuestring, pr[k]) == 0;
    return okc && okp;
}

static int validate_rich(const cJSON *j) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(j, "note");
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(j, "ok");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "inner");
    if (!cJSON_IsNumber(id) || id->valuedouble < -40 || id->valuedouble > 1234) return 0;
    if (!cJSON_IsString(note) || utf8_chars(note->valuestring) > 12) return 0;
    if (!cJSON_IsBool(ok) || !cJSON_IsObject(in)) return 0;
    return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(in, "n"));
}

static void every_json_output_parses_and_validates_at_high_temperature(void) {
    static const wb_json_ws ws[] = {WB_JSON_WS_SPACE, WB_JSON_WS_COMPACT, WB_JSON_WS_FLEXIBLE};
    for (int w = 0; w < 3; w++) {
        for (int which = 0; which < 2; which++) {
            const char *schema = which ? k_rich : k_triage;
            wb_constraint *c = NULL;
            wb_err err = {0};
            wb_status st = wb_constraint_json_schema_new(vocab(), schema, strlen(schema), ws[w],
                                                         &c, &err);
            CHECK_MSG(st == WB_OK, "%s", err.msg);
            int valid = 0, n = which ? 50 : 70;
            for (int i = 0; c && i < n; i++) {
                gen_out o = generate(c, "Triage: ", 2.5f, (uint64_t)(1000 * w + 100 * which + i),
                                     160, WB_MASK_LOGITS, NULL, 0);
                CHECK_MSG(o.st == WB_OK, "%s", o.msg);
                CHECK_MSG(o.reason == WB_STOP_CONSTRAINT, "ws %d schema %d reason %d: %s", w,
                          which, (int)o.reason, o.text);
                cJSON *j = o.text ? cJSON_Parse(o.text) : NULL;
                CHECK_MSG(j != NULL, "does not parse: %s", o.text);
                int v = j && (which ? validate_rich(j) : validate_triage(j));
                CHECK_MSG(v, "does not validate: %s", o.text);
                valid += v;
                if (w == 0 && which == 0 && o.text) {
                    const char *t = o.text[0] == ' ' ? o.text + 1 : o.text;
                    CHECK_MSG(strstr(t, "{\"category\": \"") == t, "%s", o.text);
                }
                cJSON_Delete(j);
                free(o.text);
            }
            CHECK(valid == n);
            wb_constraint_free(c);
        }
    }
}

static void integer_bounds_compile_to_exact_ranges(void) {
    static const long long ranges[][2] = {{0, 0},   {0, 9},     {3, 17},   {-40, 1234}, {-5, -2},
                                          {7, 7},   {99, 101},  {0, 1000}, {-1000, 0},  {15, 9999},
                                          {1, 100}, {-99, 99},  {120, 129}, {199, 2001}};
    char schema[256], num[32];
    for (size_t k = 0; k < sizeof ranges / sizeof *ranges; k++) {
        long long lo = ranges[k][0], hi = ranges[k][1];
        snprintf(schema, sizeof schema, "{\"type\": \"integer\", \"minimum\": %lld, \"maximum\": "
                 "%lld}", lo, hi);
        wb_constraint *c = NULL;
        wb_err err = {0};
        CHECK_MSG(wb_constraint_json_schema_new(vocab(), schema, strlen(schema), WB_JSON_WS_SPACE,
                                                &c, &err) == WB_OK, "%s", err.msg);
        int bad = 0;
        for (long long x = lo - 120; c && x <= hi + 120; x++) {
            snprintf(num, sizeof num, "%lld", x);
            if (wb_constraint_matches(c, num, strlen(num)) != (x >= lo && x <= hi) && bad++ < 3)
                fprintf(stderr, "  [%lld, %lld]: %s\n", lo, hi, num);
        }
        /* No leading zeros, no "-0", no sign on positives. */
        CHECK(c && !wb_constraint_matches(c, "007", 3) && !wb_constraint_matches(c, "-0", 2) &&
              !wb_constraint_matches(c, "+5", 2));
        CHECK_MSG(bad == 0, "[%lld, %lld]: %d wrong", lo, hi, bad);
        wb_constraint_free(c);
    }
}

static void triage_schema_compiles_to_the_expected_regex_and_quickly(void) {
    char *re = NULL;
    size_t n = 0;
    wb_err err = {0};
    CHECK(wb_json_schema_to_regex(k_triage, strlen(k_triage), WB_JSON_WS_SPACE, &re, &n, &err) ==
          WB_OK);
    CHECK(re && strstr(re, "(?:true|false)") != NULL);
    wb_free(re);
    wb_constraint *c = NULL;
    CHECK(wb_constraint_json_schema_new(vocab(), k_triage, strlen(k_triage), WB_JSON_WS_SPACE, &c,
                                        &err) == WB_OK);
    const char *doc = "{\"category\": \"bug\", \"priority\": \"urgent\", \"needs_human\": false}";
    CHECK(c && wb_constraint_matches(c, doc, strlen(doc)));
    CHECK(c && !wb_constraint_matches(c, "{\"category\": \"bug\"}", 19));
    wb_constraint_info in = wb_constraint_get_info(c);
    CHECK(in.n_states > 10 && in.n_masks > 0 && in.n_masks <= in.n_states);
    /* no wall-clock bound here: 2 shared cores make it flaky (compile time belongs in bench/) */
    CHECK(in.compile_ms >= 0);
    wb_constraint_free(c);
}

static void schema_errors_name_the_path_and_keyword(void) {
    static const struct { const char *schema, *needle; } bad[] = {
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}}}", "properties.a"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"pattern\": "
         "\"x\"}}}", "'pattern'"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"boolean\"}, \"b\": {\"type\":"
         " \"boolean\"}}, \"required\": [\"a\"]}", "'b' is not in 'required'"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 2}", "above 'maximum'"},
        {"{\"enum\": []}", "non-empty"},
        {"{\"type\": ", "not valid JSON"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        wb_constraint *c = NULL;
        wb_err err = {0};
        wb_status st = wb_constraint_json_schema_new(vocab(), bad[k].schema, strlen(bad[k].schema),
                                                     WB_JSON_WS_SPACE, &c, &err);
        CHECK(st != WB_OK && c == NULL);
        CHECK_ERR_MENTIONS(err.msg, bad[k].needle);
    }
}

/* ---- decoding under a mask ------------------------------------------------------------------- */

/* Greedy with a mask must pick the argmax of the masked logits, at every step. */
static void greedy_under_a_mask_is_the_argmax_of_the_masked_logits(void) {
    wb_constraint *c = regex("[a-z ]{1,30}(\\.|!)");
    int32_t V = wb_tokenizer_vocab_size(tokenizer());
    float *logits = malloc((size_t)V * sizeof *logits);
    float *masked = malloc((size_t)V * sizeof *masked);
    int mismatches = 0, steps = 0;
    for (int trial = 0; c && trial < 20; trial++) {
        fake f = {V, (uint64_t)trial * 17 + 1, 6.0f};
        wb_sampling_params sp = wb_sampling_default_params();
        sp.temperature = 0;
        sp.max_tokens = 40;
        wb_gen_params gp = wb_gen_default_params();
        gp.constraint = c;
        wb_gen *g = NULL;
        wb_err err = {0};
        CHECK(wb_gen_new_custom(fake_logits, &f, V, 256, tokenizer(), "Hi", 2, &sp, &gp, &g,
                                &err) == WB_OK);
        CHECK(wb_gen_run(g, &err) == WB_OK);
        const wb_gen_result *r = wb_gen_result_get(g);
        /* Replay: recompute the logits and the mask at every step. */
        wb_constraint_state *s = NULL;
        wb_constraint_state_new(c, &s, &err);
        int32_t *ids = NULL;
        size_t n = 0;
        wb_tokenizer_encode(tokenizer(), "Hi", 2, &ids, &n, &err);
        ids = realloc(ids, (n + r->n_tokens + 1) * sizeof *ids);
        for (size_t t = 0; t < r->n_tokens; t++) {
            fake_logits(&f, ids, (int)(n + t), logits, &err);
            const uint32_t *m;
            int32_t na;
            wb_constraint_state_allowed(s, NULL, 0, &m, &na, &err);
            for (int32_t i = 0; i < V; i++)
                masked[i] = m && (m[i >> 5] >> (i & 31) & 1u) ? logits[i] : -INFINITY;
            int32_t want = wb_sampling_argmax(masked, V);
            mismatches += want != r->token_ids[t];
            steps++;
            ids[n + t] = r->token_ids[t];
            wb_constraint_state_advance(s, r->token_ids[t], &err);
        }
        CHECK(r->stop_reason == WB_STOP_CONSTRAINT);
        wb_free(ids);
        wb_constraint_state_free(s);
        wb_gen_free(g);
    }
    CHECK_MSG(mismatches == 0, "%d of %d steps differ", mismatches, steps);
    CHECK(steps > 20);
    free(logits);
    free(masked);
    wb_constraint_free(c);
}

static void mask_after_filters_reproduces_the_uniform_fallback_and_its_fix(void) {
    /* Logits: token 5 is the runaway favourite; allowed = {7, 9, 12}, with 12 the most likely
     * of them. Greedy masks first -> 12; the reference loop (mask after, uniform) -> 7, the
     * lowest allowed id; mask after with the fix -> 12. */
    const int32_t V = 16;
    float logits[16];
    for (int i = 0; i < V; i++) logits[i] = (float)i * 0.1f;
    logits[5] = 20.0f;
    logits[7] = 1.0f;
    logits[9] = 2.0f;
    logits[12] = 3.0f;
    uint32_t allowed[1] = {(1u << 7) | (1u << 9) | (1u << 12)};
    static const wb_mask_stage stages[] = {WB_MASK_LOGITS, WB_MASK_AFTER_FILTERS,
                                           WB_MASK_AFTER_FILTERS_UNIFORM};
    static const int32_t want[] = {12, 12, 7};
    for (int k = 0; k < 3; k++) {
        wb_sampling_params sp = wb_sampling_default_params();
        sp.temperature = 0;
        sp.mask_stage = stages[k];
        sp.has_seed = 1;
        wb_sampler *s = NULL;
        wb_err err = {0};
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        int32_t id = -1;
        CHECK(wb_sampler_sample(s, logits, NULL, 0, allowed, &id, NULL, &err) == WB_OK);
        CHECK_MSG(id == want[k], "stage %d picked %d", k, (int)id);
        /* Sampling with top_k = 1 behaves like greedy: the same three answers, and the uniform
         * fallback spreads over all three allowed ids. */
        wb_sampler_free(s);
        sp.temperature = 1.0f;
        sp.top_k = 1;
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        int hits[16] = {0};
        for (int i = 0; i < 300; i++) {
            CHECK(wb_sampler_sample(s, logits, NULL, 0, allowed, &id, NULL, &err) == WB_OK);
            if (id >= 0 && id < V) hits[id]++;
        }
        if (k < 2) CHECK(hits[12] == 300);
        else CHECK(hits[7] > 50 && hits[9] > 50 && hits[12] > 50);
        wb_sampler_free(s);
    }
}

/* A sparse mask takes a shortcut through the sampler (only the allowed ids are touched); it must
 * give the distribution that banning every other token through the logits gives. */
static void a_sparse_mask_gives_the_same_distribution_as_banned_logits(void) {
    const int32_t V = 3000;
    float *z = malloc((size_t)V * sizeof *z), *zb = malloc((size_t)V * sizeof *zb);
    float *pa = malloc((size_t)V * sizeof *pa), *pb = malloc((size_t)V * sizeof *pb);
    uint32_t mask[(3000 + 31) / 32];
    wb_rng r;
    wb_rng_seed(&r, 4);
    int32_t gen[6] = {5, 17, 17, 300, 2999, 5};
    wb_logit_bias bias[3] = {{17, 2.0f}, {40, -INFINITY}, {1000, 1.5f}};
    for (int trial = 0; trial < 40; trial++) {
        memset(mask, 0, sizeof mask);
        for (int32_t i = 0; i < V; i++) z[i] = (float)(6 * wb_rng_uniform(&r));
        for (int k = 0; k < 60; k++) {
            int32_t id = (int32_t)(wb_rng_u32(&r) % (uint32_t)V);
            mask[id >> 5] |= 1u << (id & 31);
        }
        mask[17 >> 5] |= 1u << (17 & 31);
        mask[40 >> 5] |= 1u << (40 & 31);
        for (int32_t i = 0; i < V; i++) zb[i] = (mask[i >> 5] >> (i & 31) & 1u) ? z[i] : -INFINITY;
        wb_sampling_params sp = wb_sampling_default_params();
        sp.temperature = trial % 5 == 0 ? 0.0f : 0.5f + 0.1f * (float)(trial % 7);
        sp.top_k = trial % 3 == 0 ? 7 : 0;
        sp.top_p = trial % 4 == 1 ? 0.8f : 1.0f;
        sp.min_p = trial % 6 == 2 ? 0.05f : 0.0f;
        sp.frequency_penalty = 0.3f;
        sp.repetition_penalty = 1.2f;
        sp.logit_bias = bias;
        sp.n_logit_bias = 3;
        sp.has_seed = 1;
        wb_sampler *s = NULL;
        wb_err err = {0};
        CHECK(wb_sampler_new(&sp, V, &s, &err) == WB_OK);
        CHECK(wb_sampler_apply(s, z, gen, 6, mask, pa, &err) == WB_OK);
        CHECK(wb_sampler_apply(s, zb, gen, 6, NULL, pb, &err) == WB_OK);
        double diff = 0;
        for (int32_t i = 0; i < V; i++) diff = fmax(diff, fabs((double)pa[i] - (double)pb[i]));
        CHECK_MSG(diff < 1e-6, "trial %d: max difference %g", trial, diff);
        CHECK(pa[40] == 0.0f);
        wb_sampler_free(s);
    }
    free(z);
    free(zb);
    free(pa);
    free(pb);
}

static void logit_bias_bans_nudges_and_forces_under_a_constraint(void) {
    wb_constraint *c = labels(WB_SPACE_NONE);
    wb_tokenizer *tok = tokenizer();
    /* Every first token that could start "bug": banning all of them leaves five labels. */
    int32_t V = wb_tokenizer_vocab_size(tok);
    wb_logit_bias ban[64];
    int nb = 0;
    for (int32_t i = 0; i < V && nb < 64; i++) {
        size_t n;
        const char *b = wb_tokenizer_token_bytes(tok, i, &n);
        if (b && n <= 3 && n > 0 && memcmp(b, "bug", n) == 0)
            ban[nb++] = (wb_logit_bias){i, -INFINITY};
    }
    for (int i = 0; c && i < 60; i++) {
        gen_out o = generate(c, "Category:", 2.0f, (uint64_t)i, 24, WB_MASK_LOGITS, ban, nb);
        CHECK_MSG(o.st == WB_OK, "%s", o.msg);
        CHECK(o.text && strcmp(o.text, "bug") != 0);
        free(o.text);
    }
    /* Force: a large bias on the token "c" (start of "cancellation") wins every greedy run. */
    wb_logit_bias force[1] = {{wb_tokenizer_id_of_bytes(tok, "c", 1), 100.0f}};
    for (int i = 0; c && i < 10; i++) {
        gen_out o = generate(c, "Category:", 0.0f, (uint64_t)i, 24, WB_MASK_LOGITS, force, 1);
        CHECK(o.st == WB_OK && o.text && strcmp(o.text, "cancellation") == 0);
        free(o.text);
    }
    /* Banning every allowed first token is a clean error, not a hang. */
    wb_logit_bias all[512];
    int na = 0;
    wb_constraint_state *s = NULL;
    wb_err err = {0};
    const uint32_t *m;
    int32_t cnt;
    wb_constraint_state_new(c, &s, &err);
    wb_constraint_state_allowed(s, NULL, 0, &m, &cnt, &err);
    for (int32_t i = 0; m && i < V && na < 512; i++)
        if (m[i >> 5] >> (i & 31) & 1u) all[na++] = (wb_logit_bias){i, -INFINITY};
    gen_out o = generate(c, "Category:", 1.0f, 1, 24, WB_MASK_LOGITS, all, na);
    CHECK(o.st == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(o.msg, "banned");
    free(o.text);
    wb_constraint_state_free(s);
    wb_constraint_free(c);
}

/* ---- unsatisfiable and unsupported ----------------------------------------------------------- */

static void impossible_constraints_fail_cleanly(void) {
    /* A vocabulary that cannot spell 'z': a choice that needs it cannot be compiled. */
    const char *bytes[4] = {"a", "b", "ab", NULL};
    size_t lens[4] = {1, 1, 2, 0};
    wb_constraint_vocab v = {4, bytes, lens, 3};
    wb_constraint *c = NULL;
    wb_err err = {0};
    static const char *const need_z[] = {"az", "bz"};
    CHECK(wb_constraint_choice_new(&v, need_z, NULL, 2, WB_SPACE_NONE, &c, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "cannot be satisfied");
    CHECK(c == NULL);
    /* One label spellable, one not: only the spellable one is offered. */
    static const char *const mixed[] = {"ab", "az"};
    CHECK(wb_constraint_choice_new(&v, mixed, NULL, 2, WB_SPACE_NONE, &c, &err) == WB_OK);
    wb_constraint_state *s = NULL;
    CHECK(c && wb_constraint_state_new(c, &s, &err) == WB_OK);
    const uint32_t *m;
    int32_t n;
    CHECK(s && wb_constraint_state_allowed(s, NULL, 0, &m, &n, &err) == WB_OK);
    /* "a" then "b" or "ab": never the dead end "a" + "a" */
    CHECK(s && n == 2 && m && m[0] == ((1u << 0) | (1u << 2)));
    CHECK(s && wb_constraint_state_advance(s, 1, &err) == WB_ERR_ARG);
    CHECK(s && wb_constraint_state_advance(s, 2, &err) == WB_OK && wb_constraint_state_complete(s));
    CHECK(s && wb_constraint_state_advance(s, 2, &err) == WB_ERR_STATE);
    wb_constraint_state_free(s);
    wb_constraint_free(c);
    /* A regex whose every match needs the unspellable byte. */
    CHECK(wb_constraint_regex_new(&v, "(ab)+z", 6, &c, &err) == WB_ERR_ARG && c == NULL);
    CHECK_ERR_MENTIONS(err.msg, "cannot be satisfied");
    CHECK(wb_constraint_choice_new(vocab(), NULL, NULL, 0, WB_SPACE_NONE, &c, &err) == WB_ERR_ARG);
    static const char *const has_empty[] = {"a", ""};
    CHECK(wb_constraint_choice_new(vocab(), has_empty, NULL, 2, WB_SPACE_NONE, &c, &err) ==
          WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "empty");
    /* A constraint compiled for another vocabulary. */
    static const char *const ab[] = {"ab"};
    CHECK(wb_constraint_choice_new(&v, ab, NULL, 1, WB_SPACE_NONE, &c, &err) == WB_OK);
    gen_out o = generate(c, "x", 1.0f, 1, 8, WB_MASK_LOGITS, NULL, 0);
    CHECK(o.st == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(o.msg, "vocabulary");
    free(o.text);
    wb_constraint_free(c);
}

static void unsupported_regex_syntax_is_named(void) {
    static const struct { const char *p, *needle; } bad[] = {
        {"(a)\\1", "backreference"}, {"(?=a)b", "(?"},   {"a*?", "lazy"},
        {"\\bword", "word boundar"}, {"[z-a]", "out of order"}, {"(ab", "unclosed"},
        {"ab)", "unbalanced"},      {"*a", "nothing to repeat"}, {"a{2,1}", "max < min"},
        {"a{5000}", "exceeds"},     {"[é-ü]", "non-ASCII"}, {"a^b", "'^'"},
        {"[[:alpha:]]", "POSIX"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        wb_constraint *c = NULL;
        wb_err err = {0};
        wb_status st = wb_constraint_regex_new(vocab(), bad[k].p, strlen(bad[k].p), &c, &err);
        CHECK_MSG(st == WB_ERR_ARG, "%s compiled", bad[k].p);
        CHECK_ERR_MENTIONS(err.msg, bad[k].needle);
        wb_constraint_free(c);
    }
    /* UTF-8 literals and classes with non-ASCII members are fine. */
    wb_constraint *c = regex("(é|ü)+[àé]?\\.");
    CHECK(c && wb_constraint_matches(c, "éüé.", strlen("éüé.")));
    CHECK(c && !wb_constraint_matches(c, "e.", 2));
    wb_constraint_free(c);
}

/* ---- the fn kind ----------------------------------------------------------------------------- */

/* The course's interface: allowed(generated) -> set. Spell "ok" then allow nothing. */
static wb_status spell_ok(void *ud, const int32_t *gen, size_t n, uint32_t *allowed, int32_t V,
                          int32_t *n_allowed, wb_err *err) {
    (void)V;
    (void)err;
    const int32_t *ids = ud;
    if (n >= 2) {
        *n_allowed = 0;
        return WB_OK;
    }
    (void)gen;
    allowed[ids[n] >> 5] |= 1u << (ids[n] & 31);
    *n_allowed = 1;
    return WB_OK;
}

static wb_status failing(void *ud, const int32_t *gen, size_t n, uint32_t *allowed, int32_t V,
                         int32_t *n_allowed, wb_err *err) {
    (void)ud, (void)gen, (void)n, (void)allowed, (void)V, (void)n_allowed;
    return wb_err_set(err, WB_ERR_ARG, "allowed callback failed on purpose");
}

static void a_callback_constraint_drives_generation_and_errors_propagate(void) {
    int32_t V = wb_tokenizer_vocab_size(tokenizer());
    int32_t ids[2] = {wb_tokenizer_id_of_bytes(tokenizer(), "o", 1),
                      wb_tokenizer_id_of_bytes(tokenizer(), "k", 1)};
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK(wb_constraint_fn_new(V, spell_ok, ids, &c, &err) == WB_OK);
    gen_out o = generate(c, "x", 2.0f, 5, 16, WB_MASK_LOGITS, NULL, 0);
    CHECK(o.st == WB_OK && o.text && strcmp(o.text, "ok") == 0);
    CHECK(o.reason == WB_STOP_CONSTRAINT && o.n_masked == 2);
    free(o.text);
    wb_constraint_free(c);
    CHECK(wb_constraint_fn_new(V, failing, NULL, &c, &err) == WB_OK);
    o = generate(c, "x", 2.0f, 5, 16, WB_MASK_LOGITS, NULL, 0);
    CHECK(o.st == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(o.msg, "on purpose");
    free(o.text);
    wb_constraint_free(c);
    wb_constraint_free(NULL);
    wb_constraint_state_free(NULL);
}

static void eos_ends_an_open_ended_match_with_reason_constraint(void) {
    /* [a-z]+ can always go on, so eos is allowed once a letter is out; biasing eos up makes the
     * model take it, which ends the generation as "constraint" with the eos kept out of text. */
    wb_constraint *c = regex("[a-z]+");
    int32_t eos = wb_tokenizer_eos_id(tokenizer());
    wb_logit_bias b[1] = {{eos, 50.0f}};
    gen_out o = generate(c, "x", 0.0f, 1, 16, WB_MASK_LOGITS, b, 1);
    CHECK(o.st == WB_OK && o.reason == WB_STOP_CONSTRAINT && o.n_tokens == 2);
    CHECK(o.text && strlen(o.text) >= 1 && !strchr(o.text, '<'));
    free(o.text);
    wb_constraint_free(c);
}

int main(void) {
    RUN(regex_full_matches_agree_with_pcre2_on_random_strings);
    RUN(every_regex_output_matches_over_hundreds_of_hot_generations);
    RUN(a_choice_admits_every_tokenization_of_each_label);
    RUN(every_choice_output_is_exactly_one_label_at_high_temperature);
    RUN(every_json_output_parses_and_validates_at_high_temperature);
    RUN(integer_bounds_compile_to_exact_ranges);
    RUN(triage_schema_compiles_to_the_expected_regex_and_quickly);
    RUN(schema_errors_name_the_path_and_keyword);
    RUN(greedy_under_a_mask_is_the_argmax_of_the_masked_logits);
    RUN(mask_after_filters_reproduces_the_uniform_fallback_and_its_fix);
    RUN(a_sparse_mask_gives_the_same_distribution_as_banned_logits);
    RUN(logit_bias_bans_nudges_and_forces_under_a_constraint);
    RUN(impossible_constraints_fail_cleanly);
    RUN(unsupported_regex_syntax_is_named);
    RUN(a_callback_constraint_drives_generation_and_errors_propagate);
    RUN(eos_ends_an_open_ended_match_with_reason_constraint);
    wb_constraint_vocab_release(&g_vocab);
    wb_tokenizer_free(g_tok);
    return check_summary();
}
