/* test_jinja.c - the chat-template engine against @huggingface/jinja: every vector of
 * tests/vectors/chat/chat_vectors.json (our own templates shaped like the Qwen2.5, Llama 3.x,
 * Phi-3, Mistral, Mistral-Nemo, Gemma 2/3, DeepSeek-R1-distill, SmolLM2, Hermes and Zephyr
 * ones, with system, multi-turn, prefill, tool-call and tool-result conversations, generation
 * prompt on and off) renders byte-identically, templates that raise give the template's
 * message; plus the language probes, error positions and the limits of a render. */
#include "check.h"
#include "fileio.h"
#include "wb_jinja.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VEC "tests/vectors/chat/"

static cJSON *load_vectors(void) {
    char *text = NULL;
    size_t n = 0;
    wb_err err = {0};
    if (wb_read_file(VEC "chat_vectors.json", 64u << 20, &text, &n, &err) != WB_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    return j;
}

/* Render `tpl` with `vars`; compare with the vector's output or error. */
static int check_one(const char *label, const char *tpl, size_t tlen, const cJSON *vars, const cJSON *want_out,
                     const cJSON *want_err, int raised) {
    wb_jinja *t = NULL;
    wb_err err = {0};
    int ok = 1;
    if (wb_jinja_parse(tpl, tlen, label, &t, &err) != WB_OK) {
        CHECK_MSG(0, "%s: parse failed: %s", label, err.msg);
        return 0;
    }
    char *out = NULL;
    size_t len = 0;
    wb_jinja_params p = wb_jinja_default_params();
    p.now = 1721952000; /* 26 Jul 2024 */
    wb_status st = wb_jinja_render(t, vars, &p, &out, &len, &err);
    if (cJSON_IsString(want_out)) {
        const char *w = want_out->valuestring;
        if (st != WB_OK) {
            CHECK_MSG(0, "%s: render failed: %s", label, err.msg);
            ok = 0;
        } else if (len != strlen(w) || memcmp(out, w, len) != 0) {
            size_t i = 0;
            while (i < len && w[i] && out[i] == w[i]) i++;
            CHECK_MSG(0, "%s: differs at byte %zu:\n  got:  [%.*s]\n  want: [%.*s]", label, i, (int)(len - i < 80 ? len - i : 80),
                      out + i, (int)(strlen(w + i) < 80 ? strlen(w + i) : 80), w + i);
            ok = 0;
        }
    } else if (cJSON_IsString(want_err) && !raised) {
        CHECK_MSG(st != WB_OK, "%s: the reference fails here (%s), we rendered", label, want_err->valuestring);
        ok = st != WB_OK;
    } else if (cJSON_IsString(want_err)) {
        CHECK_MSG(st == WB_ERR_ARG, "%s: expected the template's error, got status %d (%s)", label, st, st ? err.msg : "ok");
        CHECK_MSG(st != WB_OK && strstr(err.msg, want_err->valuestring) != NULL, "%s: error [%s] lacks [%s]", label,
                  err.msg, want_err->valuestring);
        CHECK_MSG(st == WB_OK || strstr(err.msg, label) != NULL, "%s: error [%s] does not name the template", label, err.msg);
        ok = st == WB_ERR_ARG;
    }
    wb_free(out);
    wb_jinja_free(t);
    return ok;
}

static void every_template_vector_renders_like_huggingface_jinja(void) {
    cJSON *j = load_vectors();
    CHECK(j != NULL);
    if (!j) return;
    const cJSON *vs = cJSON_GetObjectItem(j, "vectors");
    int n = 0, good = 0, errors = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, vs) {
        const char *file = cJSON_GetObjectItem(v, "template")->valuestring;
        char path[512], label[600];
        snprintf(path, sizeof path, VEC "templates/%s", file);
        snprintf(label, sizeof label, "%s[%s, gen=%d]", file, cJSON_GetObjectItem(v, "case")->valuestring,
                 cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(v, "vars"), "add_generation_prompt")));
        char *tpl = NULL;
        size_t tl = 0;
        wb_err err = {0};
        if (wb_read_file(path, 1u << 20, &tpl, &tl, &err) != WB_OK) {
            CHECK_MSG(0, "%s", err.msg);
            continue;
        }
        n++;
        errors += cJSON_GetObjectItem(v, "error") != NULL;
        good += check_one(label, tpl, tl, cJSON_GetObjectItem(v, "vars"), cJSON_GetObjectItem(v, "output"),
                          cJSON_GetObjectItem(v, "error"), cJSON_IsTrue(cJSON_GetObjectItem(v, "raised")));
        free(tpl);
    }
    printf("  %d/%d template vectors match (%d of them raise)\n", good, n, errors);
    CHECK(n >= 100);
    cJSON_Delete(j);
}

static void every_language_probe_renders_like_huggingface_jinja(void) {
    cJSON *j = load_vectors();
    if (!j) return;
    int n = 0, good = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(j, "probes")) {
        const char *tpl = cJSON_GetObjectItem(v, "template")->valuestring;
        n++;
        good += check_one(cJSON_GetObjectItem(v, "name")->valuestring, tpl, strlen(tpl), cJSON_GetObjectItem(v, "vars"),
                          cJSON_GetObjectItem(v, "output"), cJSON_GetObjectItem(v, "error"),
                          cJSON_IsTrue(cJSON_GetObjectItem(v, "raised")));
    }
    printf("  %d/%d probes match\n", good, n);
    CHECK(n >= 30);
    cJSON_Delete(j);
}

static wb_status render_text(const char *tpl, const char *vars_json, const wb_jinja_params *p, char **out, wb_err *err) {
    wb_jinja *t = NULL;
    *out = NULL;
    wb_status st = wb_jinja_parse(tpl, strlen(tpl), "t.jinja", &t, err);
    if (st != WB_OK) return st;
    cJSON *vars = vars_json ? cJSON_Parse(vars_json) : NULL;
    size_t len;
    st = wb_jinja_render(t, vars, p, out, &len, err);
    cJSON_Delete(vars);
    wb_jinja_free(t);
    return st;
}

static void errors_name_the_file_line_and_construct(void) {
    char *out;
    wb_err err = {0};
    CHECK(render_text("a\nb\n{% if x %}\nc", NULL, NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "t.jinja:3");
    CHECK_ERR_MENTIONS(err.msg, "endif");
    CHECK(render_text("x\n{{ 1 +* 2 }}", NULL, NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "t.jinja:2");
    CHECK(render_text("{% frobnicate %}", NULL, NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "frobnicate");
    CHECK(render_text("\n\n{{ x|nosuchfilter }}", "{\"x\": 1}", NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "t.jinja:3");
    CHECK_ERR_MENTIONS(err.msg, "nosuchfilter");
    CHECK(render_text("{% endfor %}", NULL, NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "endfor");
    CHECK(render_text("{{ 'abc }}", NULL, NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "string");
    CHECK(render_text("line\n{{ raise_exception('Only user and assistant roles') }}", NULL, NULL, &out, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "t.jinja:2: the template raised an error: Only user and assistant roles");
    CHECK(render_text("{% break %}", NULL, NULL, &out, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "outside a loop");
    CHECK(render_text("{{ x.y.z }}{{ none.a }}", "{}", NULL, &out, &err) == WB_OK); /* undefined is quiet */
    CHECK(out && strcmp(out, "") == 0);
    wb_free(out);
}

static void strftime_now_uses_the_given_clock(void) {
    char *out;
    wb_err err = {0};
    wb_jinja_params p = wb_jinja_default_params();
    p.now = 1721952000 + 12 * 3600; /* 26 Jul 2024, midday UTC: the same date in every zone */
    CHECK(render_text("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %B %%') }}", NULL, &p, &out, &err) == WB_OK);
    CHECK_MSG(out && strcmp(out, "26 Jul 2024|2024-07-26 July %") == 0, "%s", out ? out : err.msg);
    wb_free(out);
}

/* Bounded in depth, steps, output and memory whatever the template or variables. */
static void hostile_templates_hit_limits_not_the_stack(void) {
    char *out;
    wb_err err = {0};
    /* 100k nested parentheses / lists / nots / unary minus: parse-time cap */
    size_t n = 100000;
    char *deep = malloc(2 * n + 16);
    const char *opens[] = {"(", "[", "not ", "-"};
    for (int k = 0; k < 4; k++) {
        size_t w = strlen(opens[k]), o = 0;
        strcpy(deep, "{{ ");
        o = 3;
        char *big = malloc(n * (w + 1) + 16);
        memcpy(big, deep, o);
        for (size_t i = 0; i < n; i++, o += w) memcpy(big + o, opens[k], w);
        big[o++] = '1';
        if (k < 2)
            for (size_t i = 0; i < n; i++) big[o++] = k == 0 ? ')' : ']';
        memcpy(big + o, " }}", 4);
        CHECK(render_text(big, NULL, NULL, &out, &err) == WB_ERR_FORMAT);
        CHECK_ERR_MENTIONS(err.msg, "nested deeper");
        free(big);
    }
    free(deep);
    /* a long flat chain is fine to parse; evaluating 50k levels of a+b+... is refused cleanly */
    char *chain = malloc(n * 4 + 16);
    size_t o = 0;
    memcpy(chain, "{{ 1", 4);
    o = 4;
    for (size_t i = 0; i < 50000; i++) memcpy(chain + o, " + 1", 4), o += 4;
    memcpy(chain + o, " }}", 4);
    CHECK(render_text(chain, NULL, NULL, &out, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "deeper");
    free(chain);
    /* 5000 elifs are built and run without recursion */
    char *elifs = malloc(5000 * 24 + 64);
    o = (size_t)sprintf(elifs, "{%% if x == 0 %%}0");
    for (int i = 1; i < 5000; i++) o += (size_t)sprintf(elifs + o, "{%% elif x == %d %%}%d", i, i);
    strcpy(elifs + o, "{% endif %}");
    CHECK(render_text(elifs, "{\"x\": 4999}", NULL, &out, &err) == WB_OK);
    CHECK(out && strcmp(out, "4999") == 0);
    wb_free(out);
    free(elifs);
    /* infinite-ish work, doubling strings, huge output, runaway macro recursion */
    wb_jinja_params few = wb_jinja_default_params();
    few.max_steps = 2000000; /* the default is 10x this: same rule, a faster test */
    CHECK(render_text("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}", NULL, &few,
                      &out, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "steps");
    CHECK(render_text("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      NULL, NULL, &out, &err) == WB_ERR_RANGE);
    CHECK(render_text("{% for i in range(1000000) %}0123456789012345678901234567890123456789{% endfor %}",
                      NULL, NULL, &out, &err) == WB_ERR_RANGE);
    CHECK(render_text("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, NULL, &out, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "deeper");
    wb_jinja_params p = wb_jinja_default_params();
    p.max_output = 100;
    CHECK(render_text("{% for i in range(200) %}x{% endfor %}", NULL, &p, &out, &err) == WB_ERR_RANGE);
    CHECK_ERR_MENTIONS(err.msg, "longer than 100 bytes");
    /* deeply nested variables: refused, not recursed into */
    char *json = malloc(300 * 2 + 8);
    o = 0;
    json[o++] = '{', memcpy(json + o, "\"v\":", 4), o += 4;
    for (int i = 0; i < 300; i++) json[o++] = '[';
    for (int i = 0; i < 300; i++) json[o++] = ']';
    json[o++] = '}', json[o] = 0;
    CHECK(render_text("{{ v|tojson }}", json, NULL, &out, &err) == WB_ERR_RANGE);
    free(json);
    CHECK(render_text("{% set ns = namespace(v=[]) %}{% for i in range(500) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v|tojson }}",
                      NULL, NULL, &out, &err) == WB_ERR_RANGE);
    /* a 4 MB template with no tags parses and renders in linear time */
    size_t big = 4u << 20;
    char *flat = malloc(big);
    memset(flat, 'a', big - 1);
    flat[big - 1] = 0;
    CHECK(render_text(flat, NULL, NULL, &out, &err) == WB_OK);
    CHECK(out && strlen(out) == big - 1);
    wb_free(out);
    free(flat);
    wb_jinja *t = NULL;
    CHECK(wb_jinja_parse("a\0b", 3, "nul.jinja", &t, &err) == WB_ERR_FORMAT && t == NULL);
    wb_jinja_free(NULL);
}

int main(void) {
    RUN(every_template_vector_renders_like_huggingface_jinja);
    RUN(every_language_probe_renders_like_huggingface_jinja);
    RUN(errors_name_the_file_line_and_construct);
    RUN(strftime_now_uses_the_given_clock);
    RUN(hostile_templates_hit_limits_not_the_stack);
    return check_summary();
}
