/* test_hostile.c - issue 12: hostile inputs to the loaders and compilers end in a clear error
 * (or a correct result), never a crash, hang or unbounded allocation. Each test here failed on
 * the code before the fix it names. */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "wb.h"
#include "fileio.h"
#include "json_strict.h"

/* ---- a byte vocabulary: one token per byte value, eos last ------------------------------------ */

static char g_bytes[256][2];
static const char *g_ptrs[257];
static size_t g_lens[257];

static const wb_constraint_vocab *byte_vocab(void) {
    static wb_constraint_vocab v;
    if (!v.n_tokens) {
        for (int b = 0; b < 256; b++) {
            g_bytes[b][0] = (char)b;
            g_ptrs[b] = g_bytes[b];
            g_lens[b] = 1;
        }
        g_ptrs[256] = "<eos>";
        g_lens[256] = 5;
        v.n_tokens = 257;
        v.bytes = g_ptrs;
        v.lens = g_lens;
        v.eos_id = 256;
    }
    return &v;
}

static char *repeat(const char *unit, size_t times) {
    size_t u = strlen(unit);
    char *s = malloc(u * times + 1);
    for (size_t i = 0; i < times; i++) memcpy(s + i * u, unit, u);
    s[u * times] = 0;
    return s;
}

/* ---- item 3: no recursion as deep as the input ------------------------------------------------ */

/* A literal as long as the node limit allows is a concatenation chain that deep: the NFA builder
 * recursed once per character and overflowed the C stack. Now: a clear error (too many DFA
 * states), caught like any other. */
static void a_150k_character_regex_literal_is_an_error_not_a_stack_overflow(void) {
    char *p = repeat("a", 150000);
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_regex_new(byte_vocab(), p, strlen(p), &c, &err);
    CHECK(st != WB_OK);
    CHECK(c == NULL);
    CHECK_ERR_MENTIONS(err.msg, "regex");
    free(p);
}

/* A 20k literal fits the limits: it compiles and matches exactly itself. */
static void a_20k_character_literal_compiles_and_matches(void) {
    char *p = repeat("ab", 10000);
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_constraint_regex_new(byte_vocab(), p, strlen(p), &c, &err) == WB_OK, "%s", err.msg);
    if (c) {
        CHECK(wb_constraint_matches(c, p, strlen(p)));
        CHECK(!wb_constraint_matches(c, p, strlen(p) - 1));
    }
    wb_constraint_free(c);
    free(p);
}

/* 60k alternatives are a left-deep alternation tree 60k levels deep. */
static void sixty_thousand_alternatives_compile(void) {
    char *alts = repeat("x|", 60000);
    alts[strlen(alts) - 1] = 0; /* "x|x|...|x" */
    alts[strlen(alts) - 1] = 'y'; /* "x|...|x|y" */
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_regex_new(byte_vocab(), alts, strlen(alts), &c, &err);
    CHECK_MSG(st == WB_OK, "%s", err.msg);
    if (c) {
        CHECK(wb_constraint_matches(c, "x", 1));
        CHECK(wb_constraint_matches(c, "y", 1));
        CHECK(!wb_constraint_matches(c, "xy", 2));
    }
    wb_constraint_free(c);
    free(alts);
}

/* Stacked quantifiers nest repetition nodes as deep as the pattern is long. */
static void fifty_thousand_stacked_quantifiers_compile(void) {
    char *q = repeat("{1}", 50000);
    size_t n = strlen(q);
    char *p = malloc(n + 2);
    p[0] = 'a';
    memcpy(p + 1, q, n + 1);
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_constraint_regex_new(byte_vocab(), p, n + 1, &c, &err) == WB_OK, "%s", err.msg);
    if (c) {
        CHECK(wb_constraint_matches(c, "a", 1));
        CHECK(!wb_constraint_matches(c, "aa", 2));
    }
    wb_constraint_free(c);
    free(q);
    free(p);
}

static void deeply_nested_regex_groups_are_a_clear_error(void) {
    char *open = repeat("(", 100000), *close = repeat(")", 100000);
    size_t n = strlen(open);
    char *p = malloc(2 * n + 2);
    memcpy(p, open, n);
    p[n] = 'a';
    memcpy(p + n + 1, close, n + 1);
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK(wb_constraint_regex_new(byte_vocab(), p, strlen(p), &c, &err) != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "nested");
    free(open);
    free(close);
    free(p);
}

static void a_100k_character_choice_label_is_an_error_not_a_crash(void) {
    char *label = repeat("a-", 50000);
    const char *choices[] = {label, "short"};
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_choice_new(byte_vocab(), choices, NULL, 2, WB_SPACE_NONE, &c, &err);
    CHECK(st != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "choice: ");
    wb_constraint_free(c);
    free(label);
}

static void a_100k_character_schema_const_is_an_error_not_a_crash(void) {
    char *body = repeat("z", 100000);
    size_t n = strlen(body);
    char *schema = malloc(n + 64);
    snprintf(schema, n + 64, "{\"const\": \"%s\"}", body);
    wb_constraint *c = NULL;
    wb_err err = {0};
    wb_status st = wb_constraint_json_schema_new(byte_vocab(), schema, strlen(schema),
                                                 WB_JSON_WS_COMPACT, &c, &err);
    CHECK(st != WB_OK);
    CHECK(err.msg[0] != 0);
    wb_constraint_free(c);
    free(body);
    free(schema);
}

static void deeply_nested_schemas_are_a_clear_error(void) {
    /* 5000 levels of {"type":"object","properties":{"a": ... }} */
    const char *open = "{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":";
    size_t levels = 5000, on = strlen(open);
    char *s = malloc(levels * (on + 2) + 32), *p = s;
    for (size_t i = 0; i < levels; i++) memcpy(p, open, on), p += on;
    p += sprintf(p, "{\"type\":\"null\"}");
    for (size_t i = 0; i < levels; i++) *p++ = '}', *p++ = '}';
    *p = 0;
    wb_constraint *c = NULL;
    wb_err err = {0};
    CHECK(wb_constraint_json_schema_new(byte_vocab(), s, strlen(s), WB_JSON_WS_COMPACT, &c,
                                        &err) != WB_OK);
    CHECK(err.msg[0] != 0);
    free(s);
}

/* ---- items 4-5: every file is opened non-blocking and checked before it is read ---------------- */

static char g_dir[64];

/* A scratch model directory: links to the shipped model's files, one of which the test replaces. */
static const char *model_dir_with(const char *name, const char *kind) {
    snprintf(g_dir, sizeof g_dir, "/tmp/wb_hostile_%ld", (long)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && for f in config.json model.safetensors "
             "tokenizer.json; do ln -s \"$PWD/models/tinylm-base/$f\" %s/$f; done && "
             "printf '{\"eos_token\": \"<|endoftext|>\"}' > %s/tokenizer_config.json",
             g_dir, g_dir, g_dir, g_dir);
    if (system(cmd) != 0) return NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    unlink(path);
    if (strcmp(kind, "fifo") == 0) mkfifo(path, 0644);
    else if (strcmp(kind, "zero") == 0) symlink("/dev/zero", path);
    else if (strcmp(kind, "dir") == 0) mkdir(path, 0755);
    return g_dir;
}

static void cleanup_dir(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    (void)system(cmd);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "  hung: a loader blocked on a non-regular file\n";
    (void)write(2, msg, sizeof msg - 1);
    _exit(2);
}

static void expect_model_load_error(const char *name, const char *kind, const char *needle) {
    const char *dir = model_dir_with(name, kind);
    CHECK(dir != NULL);
    if (!dir) return;
    alarm(20); /* the old code blocked in open() forever */
    wb_model *m = NULL;
    wb_err err = {0};
    double t0 = wb_clock_ms();
    wb_status st = wb_model_load(dir, &m, &err);
    double ms = wb_clock_ms() - t0;
    alarm(0);
    CHECK_MSG(st != WB_OK, "%s as a %s loaded", name, kind);
    CHECK_ERR_MENTIONS(err.msg, name);
    CHECK_ERR_MENTIONS(err.msg, needle);
    (void)ms;
    wb_model_free(m);
    cleanup_dir();
}

static void a_fifo_named_like_a_model_file_is_an_error_not_a_hang(void) {
    expect_model_load_error("config.json", "fifo", "FIFO");
    expect_model_load_error("model.safetensors", "fifo", "FIFO");
    expect_model_load_error("tokenizer.json", "fifo", "FIFO");
}

static void dev_zero_and_directories_named_like_model_files_are_errors(void) {
    expect_model_load_error("config.json", "zero", "character device");
    expect_model_load_error("tokenizer.json", "dir", "directory");
    expect_model_load_error("generation_config.json", "zero", "character device");
}

static void chat_files_pointing_at_dev_zero_are_a_fast_error(void) {
    const char *names[] = {"tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 2; i++) {
        const char *dir = model_dir_with(names[i], "zero");
        CHECK(dir != NULL);
        if (!dir) return;
        alarm(20); /* the old reader looped forever once the allocation failed */
        wb_chat_template *t = NULL;
        wb_err err = {0};
        wb_status st = wb_chat_template_load(dir, &t, &err);
        alarm(0);
        CHECK(st != WB_OK);
        CHECK_ERR_MENTIONS(err.msg, names[i]);
        CHECK_ERR_MENTIONS(err.msg, "character device");
        wb_chat_template_free(t);
        cleanup_dir();
    }
    const char *dir = model_dir_with("tokenizer_config.json", "fifo");
    alarm(20);
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(dir, &t, &err) != WB_OK);
    alarm(0);
    CHECK_ERR_MENTIONS(err.msg, "FIFO");
    cleanup_dir();
}

static void the_capped_reader_refuses_files_over_the_cap(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/wb_hostile_cap_%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 1000; i++) fputc('x', f);
    fclose(f);
    char *buf = NULL;
    size_t n = 0;
    wb_err err = {0};
    CHECK(wb_read_file(path, 999, &buf, &n, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, path);
    CHECK(wb_read_file(path, 1000, &buf, &n, &err) == WB_OK && n == 1000 && buf[1000] == 0);
    free(buf);
    buf = NULL;
    CHECK(wb_read_file_optional("/nonexistent/x.json", 10, &buf, &n, &err) == WB_OK && !buf);
    unlink(path);
}

/* ---- item 14: duplicate keys are errors naming the key and the file ----------------------------- */

static void a_config_json_with_a_duplicate_key_is_rejected(void) {
    const char *dir = model_dir_with("config.json", "none");
    char path[512], text[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *src = fopen("models/tinylm-base/config.json", "rb");
    size_t n = fread(text, 1, sizeof text - 1, src);
    fclose(src);
    text[n] = 0;
    char *brace = strchr(text, '{');
    FILE *f = fopen(path, "wb");
    fprintf(f, "{\"n_layer\": 99,%s", brace + 1); /* n_layer appears again further down */
    fclose(f);
    wb_model *m = NULL;
    wb_err err = {0};
    CHECK(wb_model_load(dir, &m, &err) != WB_OK);
    CHECK_ERR_MENTIONS(err.msg, "config.json");
    CHECK_ERR_MENTIONS(err.msg, "duplicate key \"n_layer\"");
    wb_model_free(m);
    cleanup_dir();
}

static void duplicate_keys_are_found_at_any_depth_and_named_with_their_path(void) {
    cJSON *root = NULL;
    wb_err err = {0};
    const char *ok = "{\"a\": {\"b\": 1, \"c\": [ {\"x\": 1}, {\"x\": 2} ]}, \"b\": 1}";
    CHECK(wb_json_parse_strict(ok, strlen(ok), "t.json", &root, &err) == WB_OK);
    cJSON_Delete(root);
    const char *bad = "{\"a\": {\"b\": 1, \"c\": [ {\"x\": 1}, {\"x\": 2, \"x\": 3} ]}}";
    CHECK(wb_json_parse_strict(bad, strlen(bad), "t.json", &root, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "t.json: duplicate key \"x\" in a.c[1]");
    /* many keys take the sorted path */
    char big[4096], *p = big;
    p += sprintf(p, "{");
    for (int i = 0; i < 200; i++) p += sprintf(p, "\"k%d\": %d,", i, i);
    p += sprintf(p, "\"k17\": 0}");
    CHECK(wb_json_parse_strict(big, strlen(big), "big.json", &root, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "\"k17\"");
    const char *trail = "{\"a\": 1} x";
    CHECK(wb_json_parse_strict(trail, strlen(trail), "t.json", &root, &err) == WB_ERR_FORMAT);
    /* 900 nested arrays: no recursion in the check */
    char deep[2000];
    memset(deep, '[', 900);
    memset(deep + 900, ']', 900);
    deep[1800] = 0;
    CHECK(wb_json_parse_strict(deep, 1800, "deep.json", &root, &err) == WB_OK);
    cJSON_Delete(root);
}

/* ---- safetensors: messages and the writer's validation -------------------------------------- */

static void reversed_data_offsets_say_end_before_start(void) {
    const char *hdr = "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}";
    size_t hl = strlen(hdr);
    unsigned char buf[256] = {0};
    buf[0] = (unsigned char)hl;
    memcpy(buf + 8, hdr, hl);
    wb_safetensors *st = NULL;
    wb_err err = {0};
    CHECK(wb_safetensors_parse(buf, 8 + hl + 8, "rev.safetensors", &st, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "end before they start");
    wb_safetensors_free(st);
}

static char *scratch(const char *name) {
    static char p[256];
    snprintf(p, sizeof p, "/tmp/wb_hostile_%ld_%s", (long)getpid(), name);
    return p;
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void safetensors_write_rejects_duplicate_names_and_keeps_the_old_file(void) {
    const char *path = scratch("dup.safetensors");
    float a[2] = {1, 2}, b[2] = {3, 4};
    wb_tensor_view v[2] = {{"w", WB_F32, 1, {2}, a, 8}, {"w", WB_F32, 1, {2}, b, 8}};
    wb_err err = {0};
    CHECK(wb_safetensors_write(path, v, 1, NULL, 0, &err) == WB_OK);
    long before = file_size(path);
    CHECK(wb_safetensors_write(path, v, 2, NULL, 0, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "'w' appears twice");
    CHECK(file_size(path) == before);
    const char *kv[] = {"k", "1", "k", "2"};
    CHECK(wb_safetensors_write(path, v, 1, kv, 2, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "metadata key 'k'");
    wb_safetensors *st = NULL;
    CHECK(wb_safetensors_open(path, &st, &err) == WB_OK);
    wb_safetensors_free(st);
    unlink(path);
}

/* ---- items 10-13: atomic writes -------------------------------------------------------------- */

/* RLIMIT_FSIZE makes every write past the limit fail (EFBIG) like a full disk would, without
 * privileges; SIGXFSZ is ignored so the write returns an error instead of killing us. */
static void a_failed_write_leaves_the_old_file_and_names_the_path(void) {
    const char *path = scratch("atomic.txt");
    wb_err err = {0};
    CHECK(wb_write_file_atomic(path, "old contents\n", 13, &err) == WB_OK);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, old.rlim_max};
    setrlimit(RLIMIT_FSIZE, &lim);
    char *big = malloc(100000);
    memset(big, 'n', 100000);
    wb_status st = wb_write_file_atomic(path, big, 100000, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(st == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, path);
    char *back = NULL;
    size_t n = 0;
    CHECK(wb_read_file(path, 1000, &back, &n, &err) == WB_OK);
    CHECK(back && n == 13 && memcmp(back, "old contents\n", 13) == 0);
    free(back);
    /* and the temporary file is gone */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
    /* safetensors and the tokenizer go through the same writer */
    float *w = calloc(4096, sizeof *w);
    wb_tensor_view v = {"w", WB_F32, 1, {4096}, w, 4096 * 4};
    const char *sp = scratch("atomic.safetensors");
    CHECK(wb_safetensors_write(sp, &v, 1, NULL, 0, &err) == WB_OK);
    long before = file_size(sp);
    for (int i = 0; i < 4096; i++) w[i] = 1;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    st = wb_safetensors_write(sp, &v, 1, NULL, 0, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(st == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, sp);
    wb_safetensors *h = NULL;
    wb_tensor_view got;
    CHECK(file_size(sp) == before);
    CHECK(wb_safetensors_open(sp, &h, &err) == WB_OK);
    CHECK(h && wb_safetensors_find(h, "w", &got, &err) == WB_OK && ((const float *)got.data)[0] == 0);
    wb_safetensors_free(h);
    free(w);
    free(big);
    unlink(path);
    unlink(sp);
}

static void stale_temporary_files_of_dead_processes_are_removed(void) {
    const char *path = scratch("ck.safetensors");
    char stale[300], live[300];
    /* a pid that cannot be running: above pid_max */
    snprintf(stale, sizeof stale, "%s.tmp.%ld", path, 99999999L);
    snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
    fclose(fopen(stale, "wb"));
    fclose(fopen(live, "wb"));
    int removed = -1;
    wb_err err = {0};
    CHECK(wb_remove_stale_temps(path, &removed, &err) == WB_OK);
    CHECK(removed == 1);
    CHECK(access(stale, F_OK) != 0);
    CHECK(access(live, F_OK) == 0);
    unlink(live);
}

int main(void) {
    RUN(a_150k_character_regex_literal_is_an_error_not_a_stack_overflow);
    RUN(a_20k_character_literal_compiles_and_matches);
    RUN(sixty_thousand_alternatives_compile);
    RUN(fifty_thousand_stacked_quantifiers_compile);
    RUN(deeply_nested_regex_groups_are_a_clear_error);
    RUN(a_100k_character_choice_label_is_an_error_not_a_crash);
    RUN(a_100k_character_schema_const_is_an_error_not_a_crash);
    RUN(deeply_nested_schemas_are_a_clear_error);
    signal(SIGALRM, on_alarm);
    RUN(a_fifo_named_like_a_model_file_is_an_error_not_a_hang);
    RUN(dev_zero_and_directories_named_like_model_files_are_errors);
    RUN(chat_files_pointing_at_dev_zero_are_a_fast_error);
    RUN(the_capped_reader_refuses_files_over_the_cap);
    RUN(a_config_json_with_a_duplicate_key_is_rejected);
    RUN(duplicate_keys_are_found_at_any_depth_and_named_with_their_path);
    RUN(reversed_data_offsets_say_end_before_start);
    RUN(safetensors_write_rejects_duplicate_names_and_keeps_the_old_file);
    RUN(a_failed_write_leaves_the_old_file_and_names_the_path);
    RUN(stale_temporary_files_of_dead_processes_are_removed);
    return check_summary();
}
