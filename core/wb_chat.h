/* wb_chat.h - chat templates of Hugging Face model directories, executed.
 *
 * The template (tokenizer_config.json's chat_template, a string or a list of named templates,
 * or chat_template.jinja beside it, which takes precedence as in transformers) is parsed once
 * by the Jinja engine (wb_jinja.h) when loaded, and rendered per call with the variables
 * transformers' apply_chat_template passes: messages, tools, documents, add_generation_prompt,
 * the special tokens of tokenizer_config.json (bos_token, eos_token, unk_token, pad_token, ...,
 * additional_special_tokens) and any extra variables of the caller. There is no list of known
 * templates: any template renders as the Jinja engine of transformers.js renders it.
 */
#ifndef WB_CHAT_H
#define WB_CHAT_H

#include "wb_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_chat_template wb_chat_template;

typedef struct wb_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* UTF-8, NUL-terminated */
} wb_chat_message;

/* Read DIR/tokenizer_config.json (chat_template; special tokens; add_bos_token),
 * DIR/chat_template.jinja when present, and DIR/generation_config.json (eos_token_id; optional).
 * A directory without any template is WB_ERR_NOTFOUND with a one-line message saying so. */
wb_status wb_chat_template_load(const char *dir, wb_chat_template **out, wb_err *err);

/* Same from buffers: the tokenizer_config.json text, and the generation_config.json text or
 * NULL. `name` (the config's file name) is used in error messages. */
wb_status wb_chat_template_load_json(const char *tokenizer_config, size_t len,
                                     const char *generation_config, size_t gen_len,
                                     const char *name, wb_chat_template **out, wb_err *err);

void wb_chat_template_free(wb_chat_template *t);

typedef struct wb_chat_render_params {
    int add_generation_prompt;
    const char *template_name;  /* NULL: "tool_use" when tools are given and the file has such a
                                   template, else "default" (or the only template) */
    const char *tools_json;     /* a JSON list of tool schemas, or NULL (the template sees none) */
    const char *documents_json; /* a JSON list of documents, or NULL */
    const char *extra_json;     /* a JSON object of more variables ({"date_string": ...}), or NULL */
    int64_t now;                /* seconds since the epoch for strftime_now; < 0: now */
} wb_chat_render_params;

wb_chat_render_params wb_chat_render_default_params(void);

/* Render a JSON list of messages (objects with role, content, and whatever else the template
 * reads: tool_calls, tool_call_id, name, ...). Key order is kept (it shows in tojson).
 * *text is wb_free()-able and NUL-terminated; *len excludes the NUL. Template errors name the
 * file, the line and the construct; raise_exception() is WB_ERR_ARG with the template's message. */
wb_status wb_chat_render_json(const wb_chat_template *t, const char *messages_json, size_t messages_len,
                              const wb_chat_render_params *params, char **text, size_t *len,
                              wb_err *err);

/* Render n >= 1 plain {role, content} messages. */
wb_status wb_chat_render(const wb_chat_template *t, const wb_chat_message *messages, size_t n,
                         int add_generation_prompt, char **text, size_t *len, wb_err *err);

/* The named templates of the file ("default" for a single template), i in [0, count). */
size_t wb_chat_template_count(const wb_chat_template *t);
const char *wb_chat_template_name(const wb_chat_template *t, size_t i);

/* Where the template text came from ("DIR/chat_template.jinja" or "DIR/tokenizer_config.json"). */
const char *wb_chat_source(const wb_chat_template *t);

/* generation_config.json's eos_token_id as a list (*n = 0 when the file or key is absent). */
const int32_t *wb_chat_eos_ids(const wb_chat_template *t, size_t *n);

/* tokenizer_config.json's eos_token / bos_token content, or NULL when absent. */
const char *wb_chat_eos_token(const wb_chat_template *t);
const char *wb_chat_bos_token(const wb_chat_template *t);

/* tokenizer_config.json's add_bos_token: 1, 0, or -1 when absent. */
int wb_chat_add_bos_token(const wb_chat_template *t);

#ifdef __cplusplus
}
#endif
#endif
