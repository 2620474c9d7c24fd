/* fuzz_chat_template.c - libFuzzer target: arbitrary bytes as a chat template, parsed and rendered
 * with a fixed conversation (system, user, assistant with a tool call, tool result), tools and
 * special tokens, with small limits so every input finishes fast. A parse or render must either
 * succeed or fail with a message, never crash, hang or leak. */
#include "wb_jinja.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

static const char VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83d\\ude00\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"id\": \"call12345\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"assistant\", \"content\": \"<think>x</think>ok\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"a\": {\"type\": \"integer\"}}}}}], \"documents\": null, \"add_generation_prompt\": true,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cJSON *vars;
    if (!vars) vars = cJSON_Parse(VARS);
    wb_jinja *t = NULL;
    wb_err err = {0};
    if (wb_jinja_parse((const char *)data, size, "fuzz.jinja", &t, &err) != WB_OK) {
        if (t || !err.msg[0]) __builtin_trap();
        return 0;
    }
    wb_jinja_params p = wb_jinja_default_params();
    p.max_steps = 200000;
    p.max_output = 1 << 20;
    p.max_memory = 64u << 20;
    p.now = 0;
    char *out = NULL;
    size_t len = 0;
    wb_status st = wb_jinja_render(t, vars, &p, &out, &len, &err);
    if (st != WB_OK && (out || !err.msg[0])) __builtin_trap();
    wb_free(out);
    wb_jinja_free(t);
    return 0;
}
