/* weights_gguf.h - a GGUF file as the source of a family's wb_want tensors (not a public API).
 *
 * The families ask core/weights.c for tensors by their safetensors names; when the model is a
 * GGUF file, weights.c hands the request to this source, which finds each name through
 * gguf_model.c's table, checks the GGUF tensor's type, dims and size against the want, undoes
 * llama.cpp's Q/K row order for the llama architecture, and either maps the rows straight from
 * the file (BF16 and the block-quantized types) or widens them into the store's F32 block.
 * docs/gguf.md.
 */
#ifndef WB_WEIGHTS_GGUF_H
#define WB_WEIGHTS_GGUF_H

#include "gguf.h"
#include "model_family.h"

typedef struct wb_gguf_src wb_gguf_src;

/* A source over g (taken: freed by wb_gguf_src_free, or moved into a weight store that maps its
 * rows; freed here on failure too). Every tensor of the file must be one the architecture
 * names (an error naming the tensor otherwise); c gives the head size for the Q/K row order.
 * path is used in messages. */
wb_status wb_gguf_src_new(wb_gguf *g, const char *path, const wb_config *c, wb_gguf_src **out,
                          wb_err *err);
void wb_gguf_src_free(wb_gguf_src *s);
/* 1 when the file holds the tensor of this safetensors name. */
int wb_gguf_src_has(const wb_gguf_src *s, const char *hf_name);
/* wb_weights_load for a GGUF (same contract; quant = wb_weights_set_quant's value, applied to
 * matrices loaded as F32 or BF16 only). Also an error: a tensor of the file no want asked for. */
wb_status wb_gguf_src_load(wb_gguf_src *s, const wb_want *wants, int n, int keep_bf16, int quant,
                           wb_weight_store *out, int64_t *n_params, wb_err *err);
/* The file types of the tensors the last load read, with counts. */
int wb_gguf_src_types(const wb_gguf_src *s, wb_type_count *out, int cap);

/* weights.c's checks and quantize-at-load, shared with this source. */
size_t wb_weights_nonfinite_f32(const float *x, size_t n);
size_t wb_weights_nonfinite_bf16(const uint16_t *x, size_t n);
wb_status wb_weights_quantize(const wb_want *wants, int n, int weights, wb_weight_store *out,
                              wb_err *err);

#endif
