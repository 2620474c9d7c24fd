/* gguf_save.h - a whole model (weights as the forward pass holds them, config, tokenizer, chat
 * template) written as one GGUF file llama.cpp loads (core/gguf_save.c; docs/gguf.md). */
#ifndef WB_GGUF_SAVE_H
#define WB_GGUF_SAVE_H

#include "gguf.h"
#include "wb_model.h"

typedef struct wb_gguf_save_params {
    int type;          /* matrices as WB_GGML_F32 (default), F16, BF16, Q8_0 or Q4_0 */
    const char *name;  /* general.name; NULL: the model directory's last component */
} wb_gguf_save_params;

wb_gguf_save_params wb_gguf_save_default_params(void);

/* Write m to path (atomically) for architecture gpt2, llama (llama, mistral), qwen2 or phi3.
 * tok (may be NULL: no tokenizer.* keys) must have the model's vocabulary size; chat_template
 * (may be NULL) becomes tokenizer.chat_template. Norm weights and biases stay F32; matrices are
 * stored as `type` (F32 where a quantized type does not fit their rows). Errors name path. */
wb_status wb_model_save_gguf(const wb_model *m, const wb_tokenizer *tok, const char *chat_template,
                             const char *path, int type, wb_err *err);
wb_status wb_model_save_gguf_ex(const wb_model *m, const wb_tokenizer *tok,
                                const char *chat_template, const char *path,
                                const wb_gguf_save_params *params, wb_err *err);

/* The chat template text of m's directory (chat_template.jinja, else tokenizer_config.json's
 * chat_template string or its "default" entry) into *out (malloc'd; free()), NULL when it has
 * none. */
wb_status wb_model_chat_template_text(const wb_model *m, char **out, wb_err *err);

#endif
