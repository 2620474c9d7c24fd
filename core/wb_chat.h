/* wb_chat.h - chat templates of Hugging Face model directories (tokenizer_config.json's
 * chat_template) and their end-of-sequence ids (generation_config.json).
 *
 * There is no Jinja interpreter: a template is recognised by the fragments that define its
 * output (see docs/chat.md) and rendered by C code that produces the same text as the Jinja
 * template under transformers' apply_chat_template. Known families: ChatML (Qwen2, Qwen2.5 with
 * its default system prompt, SmolLM2), Llama-3 and Llama-3.1/3.2 (system header with dates),
 * Zephyr/TinyLlama. Any other template is a WB_ERR_FORMAT error naming the file.
 */
#ifndef WB_CHAT_H
#define WB_CHAT_H

#include "wb_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_chat_template wb_chat_template;

typedef struct wb_chat_message {
    const char *role;    /* "system", "user", "assistant" (ChatML also "tool" and any other) */
    const char *content; /* UTF-8, NUL-terminated */
} wb_chat_message;

/* Read DIR/tokenizer_config.json (chat_template, or DIR/chat_template.jinja when the config has
 * none; eos_token, bos_token, add_bos_token) and DIR/generation_config.json (eos_token_id, an
 * integer or a list; the file is optional). */
wb_status wb_chat_template_load(const char *dir, wb_chat_template **out, wb_err *err);

/* Same from buffers: the tokenizer_config.json text, and the generation_config.json text or
 * NULL. `name` (the config's file name) is used in error messages. */
wb_status wb_chat_template_load_json(const char *tokenizer_config, size_t len,
                                     const char *generation_config, size_t gen_len,
                                     const char *name, wb_chat_template **out, wb_err *err);

void wb_chat_template_free(wb_chat_template *t);

/* Render n >= 1 messages; add_generation_prompt appends the assistant header. *text is
 * wb_free()-able and NUL-terminated, *len excludes the NUL. */
wb_status wb_chat_render(const wb_chat_template *t, const wb_chat_message *messages, size_t n,
                         int add_generation_prompt, char **text, size_t *len, wb_err *err);

/* "chatml", "llama3", "llama3.1" or "zephyr". */
const char *wb_chat_family(const wb_chat_template *t);

/* generation_config.json's eos_token_id as a list (*n = 0 when the file or key is absent). */
const int32_t *wb_chat_eos_ids(const wb_chat_template *t, size_t *n);

/* tokenizer_config.json's eos_token / bos_token content, or NULL when absent. */
const char *wb_chat_eos_token(const wb_chat_template *t);
const char *wb_chat_bos_token(const wb_chat_template *t);

/* tokenizer_config.json's add_bos_token: 1, 0, or -1 when absent. */
int wb_chat_add_bos_token(const wb_chat_template *t);

/* The system prompt the template inserts when the first message is not a system message
 * (Qwen2.5: "You are Qwen, created by Alibaba Cloud. ..."), or NULL. */
const char *wb_chat_default_system(const wb_chat_template *t);

/* The date a Llama-3.1 template puts in its system header ("26 Jul 2024" unless the template
 * takes today's date, as Llama-3.2's does); NULL for other families. Settable for
 * reproducible prompts. */
const char *wb_chat_date(const wb_chat_template *t);
wb_status wb_chat_set_date(wb_chat_template *t, const char *date, wb_err *err);

#ifdef __cplusplus
}
#endif
#endif
