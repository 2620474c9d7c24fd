/* gguf_model.h - what a GGUF file's metadata, tensor names and row orders mean to the families.
 *
 * A GGUF's metadata becomes the equivalent Hugging Face config.json object, so the family's own
 * parse_config checks it exactly as it checks a directory's config.json; a GGUF tensor name maps
 * to the family's safetensors name through one table per architecture (gpt2, llama, qwen2,
 * phi3); and the one layout change llama.cpp's converter makes beyond transposition (the row
 * order of the llama architecture's Q and K) is described by wb_gguf_qk_row, which the GGUF
 * weight source (core/weights_gguf.c) undoes and a GGUF writer applies. docs/gguf.md.
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

/* 1 when llama.cpp's converter reorders the rows of this safetensors tensor for architecture
 * `arch`: the "llama" architecture's q_proj and k_proj weights and biases, because llama.cpp
 * rotates interleaved pairs (2i, 2i+1) of each head where transformers rotates halves
 * (i, i + hd/2). qwen2 and phi3 use the rotate-half (NEOX) order and keep the rows as they are. */
int wb_gguf_qk_permuted(const char *arch, const char *hf_name);

/* For such a tensor ([n_heads * head_dim] rows, any row content): GGUF row r holds
 * transformers' row wb_gguf_qk_row(r, head_dim). Within each head, GGUF row 2i + a is HF row
 * a * head_dim/2 + i (a = 0, 1). Reading: hf[wb_gguf_qk_row(r)] = gguf[r]; writing:
 * gguf[r] = hf[wb_gguf_qk_row(r)]. The same function serves both directions. */
int64_t wb_gguf_qk_row(int64_t r, int64_t head_dim);

#endif
