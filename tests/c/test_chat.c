/* test_chat.c - chat templates of each known family rendered to the exact text the real Jinja
 * templates give under transformers' apply_chat_template (expected strings written from the
 * templates in tests/vectors/chat/), EOS ids, and the errors for unknown or broken files. */
#include "check.h"
#include "wb_chat.h"

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

static void qwen25_chatml_adds_its_default_system_prompt(void) {
    expect(DIR "qwen2.5", HI, 1, 1,
           "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
           "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect(DIR "qwen2.5", CONVO, 4, 0,
           "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n"
           "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n  2+2?  \n<|im_end|>\n");
    /* a later system message is an ordinary turn; tool results share one user turn */
    const wb_chat_message m[] = {{"user", "a"}, {"system", "b"}, {"tool", "r1"}, {"tool", "r2"}, {"user", "c"}};
    expect(DIR "qwen2.5", m, 5, 1,
           "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
           "<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n"
           "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
           "</tool_response><|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n");
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(DIR "qwen2.5", &t, &err) == WB_OK);
    size_t n = 0;
    const int32_t *eos = wb_chat_eos_ids(t, &n);
    CHECK(n == 2 && eos[0] == 151645 && eos[1] == 151643);
    CHECK(strcmp(wb_chat_family(t), "chatml") == 0);
    CHECK(strcmp(wb_chat_eos_token(t), "<|im_end|>") == 0 && wb_chat_bos_token(t) == NULL);
    CHECK(wb_chat_add_bos_token(t) == -1 && wb_chat_date(t) == NULL);
    wb_chat_template_free(t);
}

static void smollm2_chatml_has_its_own_default_system_prompt(void) {
    expect(DIR "smollm2", HI, 1, 1,
           "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
           "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect(DIR "smollm2", CONVO, 2, 0,
           "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there!<|im_end|>\n");
    /* the same template from chat_template.jinja when the config has none */
    expect(DIR "jinja_file", HI, 1, 0,
           "<|im_start|>system\nYou are a helpful AI assistant named Jinja, trained by Hugging Face"
           "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

static void llama3_trims_content_and_starts_with_bos(void) {
    expect(DIR "llama3", CONVO, 4, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(DIR "llama3", HI, 1, 0,
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(DIR "llama3", &t, &err) == WB_OK);
    size_t n = 0;
    const int32_t *eos = wb_chat_eos_ids(t, &n);
    CHECK(n == 2 && eos[0] == 128001 && eos[1] == 128009);
    CHECK(strcmp(wb_chat_family(t), "llama3") == 0);
    wb_chat_template_free(t);
}

static void llama31_always_has_a_dated_system_turn(void) {
    expect(DIR "llama3.1", HI, 1, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
           "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(DIR "llama3.1", CONVO, 2, 0,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
           "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>");
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(DIR "llama3.1", &t, &err) == WB_OK);
    if (!t) return;
    CHECK(strcmp(wb_chat_family(t), "llama3.1") == 0 && strcmp(wb_chat_date(t), "26 Jul 2024") == 0);
    CHECK(wb_chat_set_date(t, "01 Jan 2025", &err) == WB_OK);
    char *text = NULL;
    size_t len;
    CHECK(wb_chat_render(t, HI, 1, 0, &text, &len, &err) == WB_OK);
    CHECK(text && strstr(text, "Today Date: 01 Jan 2025\n\n") != NULL);
    wb_free(text);
    const wb_chat_message tool[] = {{"user", "x"}, {"tool", "{}"}};
    CHECK(wb_chat_render(t, tool, 2, 0, &text, &len, &err) == WB_ERR_ARG);
    CHECK_ERR_MENTIONS(err.msg, "messages[1]");
    size_t n = 0;
    wb_chat_eos_ids(t, &n);
    CHECK(n == 3);
    wb_chat_template_free(t);
}

static void zephyr_tinyllama_ends_turns_with_eos(void) {
    expect(DIR "tinyllama", CONVO, 4, 1,
           "<|system|>\nYou are terse.</s>\n<|user|>\nHi there!</s>\n<|assistant|>\nHello.</s>\n"
           "<|user|>\n  2+2?  \n</s>\n<|assistant|>\n");
    expect(DIR "tinyllama", HI, 1, 0, "<|user|>\nHi</s>\n");
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(DIR "tinyllama", &t, &err) == WB_OK);
    size_t n = 0;
    const int32_t *eos = wb_chat_eos_ids(t, &n);
    CHECK(n == 1 && eos[0] == 2);
    CHECK(strcmp(wb_chat_bos_token(t), "<s>") == 0 && strcmp(wb_chat_eos_token(t), "</s>") == 0);
    CHECK(wb_chat_add_bos_token(t) == 1 && wb_chat_default_system(t) == NULL);
    wb_chat_template_free(t);
}

static void unknown_and_broken_files_are_clear_errors(void) {
    wb_chat_template *t = NULL;
    wb_err err = {0};
    CHECK(wb_chat_template_load(DIR "unknown", &t, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "unknown/tokenizer_config.json");
    CHECK_ERR_MENTIONS(err.msg, "chat_template");
    CHECK(t == NULL);
    CHECK(wb_chat_template_load(DIR "nope", &t, &err) == WB_ERR_IO);
    CHECK_ERR_MENTIONS(err.msg, "nope/tokenizer_config.json");
    const char *cfg = "{\"eos_token\": \"x\"}";
    CHECK(wb_chat_template_load_json(cfg, strlen(cfg), NULL, 0, "cfg.json", &t, &err) == WB_ERR_NOTFOUND);
    CHECK_ERR_MENTIONS(err.msg, "cfg.json");
    CHECK(wb_chat_template_load_json("{", 1, NULL, 0, "cfg.json", &t, &err) == WB_ERR_FORMAT);
    CHECK_ERR_MENTIONS(err.msg, "cfg.json");
    const char *ok = "{\"chat_template\": \"{{'<|im_start|>' + message['role'] + '\\\\n' + "
                     "message['content'] + '<|im_end|>' + '\\\\n'}}{{'<|im_start|>assistant\\\\n'}}\"}";
    const char *gens[] = {"{\"eos_token_id\": \"2\"}", "{\"eos_token_id\": [1, -4]}", "[]"};
    for (int k = 0; k < 3; k++) {
        CHECK(wb_chat_template_load_json(ok, strlen(ok), gens[k], strlen(gens[k]), "cfg.json", &t, &err) ==
              WB_ERR_FORMAT);
        CHECK_ERR_MENTIONS(err.msg, "generation_config.json");
    }
    /* a minimal ChatML template without a default system prompt renders plainly */
    CHECK_MSG(wb_chat_template_load_json(ok, strlen(ok), "{}", 2, "cfg.json", &t, &err) == WB_OK, "%s", err.msg);
    char *text = NULL;
    size_t len;
    CHECK(t && wb_chat_render(t, HI, 1, 1, &text, &len, &err) == WB_OK);
    CHECK(text && strcmp(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") == 0);
    wb_free(text);
    CHECK(wb_chat_render(t, HI, 0, 1, &text, &len, &err) == WB_ERR_ARG);
    const wb_chat_message bad[] = {{"user", NULL}};
    CHECK(wb_chat_render(t, bad, 1, 1, &text, &len, &err) == WB_ERR_ARG);
    CHECK(wb_chat_set_date(t, "x", &err) == WB_ERR_STATE);
    wb_chat_template_free(t);
    wb_chat_template_free(NULL);
    /* a list of named templates uses "default" */
    const char *list = "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": "
                       "\"default\", \"template\": \"{{'<|user|>\\\\n' + message['content'] + eos_token}}"
                       "{{'<|assistant|>'}}\"}], \"eos_token\": \"</s>\"}";
    CHECK_MSG(wb_chat_template_load_json(list, strlen(list), NULL, 0, "cfg.json", &t, &err) == WB_OK, "%s",
              err.msg);
    CHECK(t && strcmp(wb_chat_family(t), "zephyr") == 0);
    wb_chat_template_free(t);
}

int main(void) {
    RUN(qwen25_chatml_adds_its_default_system_prompt);
    RUN(smollm2_chatml_has_its_own_default_system_prompt);
    RUN(llama3_trims_content_and_starts_with_bos);
    RUN(llama31_always_has_a_dated_system_turn);
    RUN(zephyr_tinyllama_ends_turns_with_eos);
    RUN(unknown_and_broken_files_are_clear_errors);
    return check_summary();
}
