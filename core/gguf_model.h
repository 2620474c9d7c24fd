/* gguf_model.h - what a GGUF file's metadata and tensor names mean to the model families.
 *
 * The first slice of GGUF import (issue 15 item 3): a GGUF's metadata becomes the equivalent
 * Hugging Face config.json object, so the family's own parse_config checks it exactly as it
 * checks a directory's config.json; and a GGUF tensor name maps to the family's safetensors name
 * through one table per architecture, so weights.c's lookup/shape/dtype checks can be reused.
 * Not yet wired into wb_model_load (see docs/model.md, "GGUF files").
 */
#ifndef WB_GGUF_MODEL_H
#define WB_GGUF_MODEL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "wb_base.h"

/* general.architecture gpt2 / llama / qwen2 -> a new config.json-shaped object (caller frees it
 * with cJSON_Delete). A missing required key is WB_ERR_NOTFOUND, a wrong type, a value out of
 * range or another architecture WB_ERR_FORMAT; messages name `path` and the metadata key. */
wb_status wb_gguf_config_json(const wb_gguf *g, const char *path, cJSON **out, wb_err *err);

/* The safetensors name of GGUF tensor `gguf_name` for architecture `arch` into out[n]; WB_OK,
 * or WB_ERR_NOTFOUND when the name is not one the family has (message names both). */
wb_status wb_gguf_hf_name(const char *arch, const char *gguf_name, char *out, size_t n,
                          wb_err *err);

/* The reverse: the GGUF name of safetensors tensor `hf_name` ("model.layers.3.mlp.up_proj.weight"
 * -> "blk.3.ffn_up.weight") for architecture `arch`; WB_ERR_NOTFOUND when it has none. */
wb_status wb_gguf_name_from_hf(const char *arch, const char *hf_name, char *out, size_t n,
                               wb_err *err);

#endif
