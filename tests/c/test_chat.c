/* test_chat.c - model directories' chat templates executed: every directory vector of
 * chat_vectors.json (real-shaped tokenizer_config.json / chat_template.jinja fixtures rendered
 * by @huggingface/jinja with the special tokens transformers passes) renders byte-identically
 * through wb_chat_template_load + wb_chat_render_json; hand-written expectations for the plain
 * API; named templates, tool_use selection, precedence of chat_template.jinja, the
 * Hermes-as-ChatML class of error, generation_config.json eos ids (linear in size), and the
 * errors for broken or template-less directories. */
#include "check.h"
#include "fileio.h"
#include "wb_chat.h"
#include "wb_generation_config.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define DIR "tests/vectors/chat/"

static const wb_chat_message CONVO[] = {
    {"system", "You are terse."},
    {"user", "Hi there!"},
    {"assistant", "Hello."},
    {"user", "  2+2?  \n"},
};
static const wb_chat_message HI[] = {{"user", "Hi"}};

static void expect(const char *dir, const wb_chat_message *m, size_t n, int gen, const char *want) {
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_chat_template_load(dir, &t, &err) == WB_OK, "%s", err.msg);
    if (!t) return;
    char *text = NULL;
    size_t len = 0;
    CHECK_MSG(wb_chat_render(t, m, n, gen, &text, &len, &err) == WB_OK, "%s", err.msg);
    CHECK_MSG(text && len == strlen(want) && strcmp(text, want) == 0, "%s:\n got: [%s]\nwant: [%s]", dir,
              text ? text : "(null)", want);
    wb_free(text);
    wb_chat_template_free(t);
}

static void every_directory_vector_renders_like_huggingface_jinja(void) {
    char *text = NULL;
    size_t n = 0;
    wb_err err = {0};
    CHECK(wb_read_file(DIR "chat_vectors.json", 64u << 20, &text, &n, &err) == WB_OK);
    cJSON *j = text ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    CHECK(j != NULL);
    int count = 0, good = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(j, "dirs")) {
        const char *dir = cJSON_GetObjectItem(v, "dir")->valuestring;
        char path[256], label[400];
        snprintf(path, sizeof path, DIR "%s", dir);
        int gen = cJSON_IsTrue(cJSON_GetObjectItem(v, "add_generation_prompt"));
        snprintf(label, sizeof label, "%s[%s, gen=%d]", dir, cJSON_GetObjectItem(v, "case")->valuestring, gen);
        wb_chat_template *t = NULL;
        if (wb_chat_template_load(path, &t, &err) != WB_OK) {
            CHECK_MSG(0, "%s: %s", label, err.msg);
            continue;
        }
        count++;
        char *msgs = cJSON_PrintUnformatted(cJSON_GetObjectItem(v, "messages"));
        const cJSON *tools = cJSON_GetObjectItem(v, "tools");
        char *tj = cJSON_IsArray(tools) ? cJSON_PrintUnformatted(tools) : NULL;
        wb_chat_render_params p = wb_chat_render_default_params();
        p.add_generation_prompt = gen;
        p.tools_json = tj;
        char *out = NULL;
        size_t len = 0;
        wb_status st = wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err);
        const cJSON *want = cJSON_GetObjectItem(v, "output");
        if (cJSON_IsString(want)) {
            int same = st == WB_OK && len == strlen(want->valuestring) && memcmp(out, want->valuestring, len) == 0;
            CHECK_MSG(same, "%s:\n got: [%s]\nwant: [%s]", label, st == WB_OK ? out : err.msg, want->valuestring);
            good += same;
        } else {
            CHECK_MSG(st != WB_OK, "%s: the reference fails (%s), we rendered", label,
                      cJSON_GetObjectItem(v, "error")->valuestring);
            if (cJSON_IsTrue(cJSON_GetObjectItem(v, "raised")))
                CHECK_ERR_MENTIONS(err.msg, cJSON_GetObjectItem(v, "error")->valuestring);
            good += st != WB_OK;
        }
        wb_free(out);
        cJSON_free(msgs);
        cJSON_free(tj);
        wb_chat_template_free(t);
    }
    printf("  %d/%d directory vectors match\n", good, count);
    CHECK(count >= 60);
    cJSON_Delete(j);
}

static void plain_messages_render_the_shipped_formats(void) {
    expect(DIR "qwen2.5", HI, 1, 1,
           "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
           "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    const wb_chat_message m[] = {{"user", "a"}, {"system", "b"}, {"tool", "r1"}, {"tool", "r2"}, {"user", "c"}};
    expect(DIR "qwen2.5", m, 5, 1,
           "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
           "<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n"
           "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
           "</tool_response><|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n");
    expect(DIR "llama3", CONVO, 4, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(DIR "llama3.1", HI, 1, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
           "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(DIR "tinyllama", CONVO, 4, 1,
           "<|system|>\nYou are terse.</s>\n<|user|>\nHi there!</s>\n<|assistant|>\nHello.</s>\n"
           "<|user|>\n  2+2?  \n</s>\n<|assistant|>\n");
    expect(DIR "jinja_file", HI, 1, 0,
           "<|im_start|>system\nYou are a helpful AI assistant named Jinja, trained by Hugging Face"
           "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    /* a Mistral [INST] template used to be refused as unknown: now it simply runs */
    expect(DIR "unknown", HI, 1, 0, "<s>[INST] Hi [/INST]");
}

static void extra_variables_reach_the_template(void) {
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(DIR "llama3.1", &t, &err) == WB_OK);
    if (!t) return;
    wb_chat_render_params p = wb_chat_render_default_params();
    p.extra_json = "{\"date_string\": \"01 Jan 2025\"}";
    char *out = NULL;
    size_t len;
    const char *msgs = "[{\"role\": \"user\", \"content\": \"x\"}]";
    CHECK_MSG(wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err) == WB_OK, "%s", err.msg);
    CHECK(out && strstr(out, "Today Date: 01 Jan 2025\n\n") != NULL);
    wb_free(out);
    p.extra_json = "[1]";
    CHECK(wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "extra variables");
    CHECK(wb_chat_render_json(t, "{}", 2, NULL, &out, &len, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "messages");
    size_t n = 0;
    wb_chat_eos_ids(t, &n);
    CHECK(n == 3);
    wb_chat_template_free(t);
}

/* A Hermes-style tool template that also emits bos_token and a fixed system prompt must render
 * with both: the old recogniser took it for ChatML and dropped them. */
static void a_chatml_lookalike_renders_its_own_text(void) {
    const char *cfg = "{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": \"<|im_end|>\", \"chat_template\": "
                      "\"{{ bos_token }}{{ '<|im_start|>system\\\\nFixed prompt.<|im_end|>\\\\n' }}"
                      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\\\n' + message['content'] + "
                      "'<|im_end|>' + '\\\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\\\n' }}"
                      "{% endif %}\"}";
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_chat_template_load_json(cfg, strlen(cfg), NULL, 0, "hermes.json", &t, &err) == WB_OK, "%s", err.msg);
    char *out = NULL;
    size_t len;
    CHECK(t && wb_chat_render(t, HI, 1, 1, &out, &len, &err) == WB_OK);
    CHECK_MSG(out && strcmp(out, "<|begin_of_text|><|im_start|>system\nFixed prompt.<|im_end|>\n<|im_start|>user\nHi"
                                 "<|im_end|>\n<|im_start|>assistant\n") == 0,
              "%s", out ? out : err.msg);
    wb_free(out);
    wb_chat_template_free(t);
}

static void named_templates_pick_default_or_tool_use(void) {
    const char *list = "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D{{ messages|length }}\"}, "
                       "{\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}\"}, "
                       "{\"name\": \"rag\", \"template\": \"R{{ documents[0].title }}\"}]}";
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK_MSG(wb_chat_template_load_json(list, strlen(list), NULL, 0, "cfg.json", &t, &err) == WB_OK, "%s", err.msg);
    if (!t) return;
    CHECK(wb_chat_template_count(t) == 3 && strcmp(wb_chat_template_name(t, 2), "rag") == 0);
    const char *msgs = "[{\"role\": \"user\", \"content\": \"x\"}]";
    char *out = NULL;
    size_t len;
    wb_chat_render_params p = wb_chat_render_default_params();
    CHECK(wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err) == WB_OK && strcmp(out, "D1") == 0);
    wb_free(out);
    p.tools_json = "[{\"type\": \"function\"}, {}]";
    CHECK(wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err) == WB_OK && strcmp(out, "T2") == 0);
    wb_free(out);
    p.tools_json = NULL;
    p.template_name = "rag";
    p.documents_json = "[{\"title\": \"Doc\", \"text\": \"...\"}]";
    CHECK(wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err) == WB_OK && strcmp(out, "RDoc") == 0);
    wb_free(out);
    p.template_name = "nope";
    CHECK(wb_chat_render_json(t, msgs, strlen(msgs), &p, &out, &len, &err) == WB_ERR_NOTFOUND);
    CHECK_ERR_MENTIONS(err.msg, "nope");
    wb_chat_template_free(t);
    /* chat_template.jinja wins over the config's template (hermes_dir has both) */
    CHECK(wb_chat_template_load(DIR "hermes_dir", &t, &err) == WB_OK);
    CHECK(t && strstr(wb_chat_source(t), "chat_template.jinja") != NULL);
    CHECK(t && wb_chat_render(t, HI, 1, 0, &out, &len, &err) == WB_OK && strncmp(out, "<|begin_of_text|>", 17) == 0);
    wb_free(out);
    wb_chat_template_free(t);
}

static void broken_and_templateless_directories_are_one_line_errors(void) {
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load("models/tinylm-base", &t, &err) == WB_ERR_NOTFOUND && t == NULL);
    CHECK_ERR_MENTIONS(err.msg, "no chat template");
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK(wb_chat_template_load(DIR "nope", &t, &err) == WB_ERR_NOTFOUND);
    CHECK_ERR_MENTIONS(err.msg, "nope");
    const char *cfg = "{\"eos_token\": \"x\"}";
    CHECK(wb_chat_template_load_json(cfg, strlen(cfg), NULL, 0, "cfg.json", &t, &err) == WB_ERR_NOTFOUND);
    CHECK_ERR_MENTIONS(err.msg, "cfg.json has no chat_template");
    CHECK(wb_chat_template_load_json("{", 1, NULL, 0, "cfg.json", &t, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "cfg.json");
    const char *bad = "{\"chat_template\": \"line1\\n{% for m in messages %}\\n{{ m.role | nosuch }}\\n{% endfor %}\"}";
    CHECK(wb_chat_template_load_json(bad, strlen(bad), NULL, 0, "dir/tokenizer_config.json", &t, &err) == WB_OK);
    char *out = NULL;
    size_t len;
    CHECK(t && wb_chat_render(t, HI, 1, 0, &out, &len, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "dir/tokenizer_config.json:3");
    CHECK_ERR_MENTIONS(err.msg, "nosuch");
    wb_chat_template_free(t);
    const char *unclosed = "{\"chat_template\": \"{% if x %}\"}";
    CHECK(wb_chat_template_load_json(unclosed, strlen(unclosed), NULL, 0, "u.json", &t, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "u.json:1");
    const char *ok = "{\"chat_template\": \"{{ messages[0].content }}\"}";
    const char *gens[] = {"{\"eos_token_id\": \"2\"}", "{\"eos_token_id\": [1, -4]}", "[]", "{\"temperature\": -1}",
                          "{\"top_p\": 0}", "{\"top_k\": 1.5}", "{\"do_sample\": 1}"};
    for (int k = 0; k < 7; k++) {
        CHECK(wb_chat_template_load_json(ok, strlen(ok), gens[k], strlen(gens[k]), "cfg.json", &t, &err) == WB_ERR_FORMAT);
        CHECK_ERR_MENTIONS(err.msg, "generation_config.json");
    }
    CHECK(wb_chat_template_load_json(ok, strlen(ok), "{}", 2, "cfg.json", &t, &err) == WB_OK);
    CHECK(t && wb_chat_render(t, HI, 0, 1, &out, &len, &err) == WB_ERR_ARG);
    const wb_chat_message nul[] = {{"user", NULL}};
    CHECK(t && wb_chat_render(t, nul, 1, 1, &out, &len, &err) == WB_ERR_ARG);
    wb_chat_template_free(t);
    wb_chat_template_free(NULL);
}

/* generation_config.json: the Qwen2.5 defaults, and 300k eos ids read in one linear pass. */
static void generation_config_defaults_and_long_eos_lists(void) {
    wb_generation_config *g = NULL;
    wb_err err = {0};
    CHECK(wb_generation_config_load(DIR "qwen2.5", &g, &err) == WB_OK && g);
    const wb_generation_defaults *d = wb_generation_config_defaults(g);
    CHECK(d && d->has_do_sample && d->do_sample && d->has_temperature && d->temperature == 0.7);
    CHECK(d && d->has_top_p && d->top_p == 0.8 && d->has_top_k && d->top_k == 20);
    CHECK(d && d->has_repetition_penalty && d->repetition_penalty == 1.1 && !d->has_min_p);
    CHECK(d && d->n_eos == 2 && d->eos_ids[0] == 151645 && d->eos_ids[1] == 151643);
    wb_generation_config_free(g);
    CHECK(wb_generation_config_load("models/tinylm-base", &g, &err) == WB_OK && g == NULL); /* optional */
    size_t n = 300000;
    char *big = malloc(n * 8 + 64), *p = big;
    p += sprintf(p, "{\"eos_token_id\": [");
    for (size_t i = 0; i < n; i++) p += sprintf(p, i ? ",%zu" : "%zu", i % 150000);
    strcpy(p, "]}");
    CHECK(wb_generation_config_parse(big, strlen(big), "big.json", &g, &err) == WB_OK);
    d = wb_generation_config_defaults(g);
    CHECK(d && d->n_eos == n && d->eos_ids[n - 1] == (int32_t)((n - 1) % 150000));
    wb_generation_config_free(g);
    strcpy(p, ",\"x\"]}");
    CHECK(wb_generation_config_parse(big, strlen(big), "big.json", &g, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "big.json: \"eos_token_id\"[300000]");
    free(big);
}

int main(void) {
    RUN(every_directory_vector_renders_like_huggingface_jinja);
    RUN(plain_messages_render_the_shipped_formats);
    RUN(extra_variables_reach_the_template);
    RUN(a_chatml_lookalike_renders_its_own_text);
    RUN(named_templates_pick_default_or_tool_use);
    RUN(broken_and_templateless_directories_are_one_line_errors);
    RUN(generation_config_defaults_and_long_eos_lists);
    return check_summary();
}
