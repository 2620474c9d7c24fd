/* wb_generation_config.h - generation_config.json: a Hugging Face model's default sampling.
 *
 * transformers and vLLM start generation from these values when the caller does not set a
 * parameter (Qwen2.5-Instruct: do_sample, temperature 0.7, top_p 0.8, top_k 20,
 * repetition_penalty 1.1 and two eos ids). Reading is linear in the file (a list of 300k eos ids
 * loads at once); every field is validated and errors name the file and the field.
 */
#ifndef WB_GENERATION_CONFIG_H
#define WB_GENERATION_CONFIG_H

#include "wb_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_generation_defaults {
    /* has_* is 1 when the file sets the field (to a valid value) */
    int has_do_sample, do_sample;
    int has_temperature;
    double temperature; /* >= 0 */
    int has_top_p;
    double top_p; /* (0, 1] */
    int has_top_k;
    int32_t top_k; /* >= 0; 0 = off */
    int has_min_p;
    double min_p; /* [0, 1] */
    int has_repetition_penalty;
    double repetition_penalty; /* > 0 */
    int has_max_new_tokens;
    int32_t max_new_tokens; /* >= 1 */
    const int32_t *eos_ids; /* eos_token_id: an integer or a list; n_eos = 0 when absent */
    size_t n_eos;
} wb_generation_defaults;

typedef struct wb_generation_config wb_generation_config;

/* DIR/generation_config.json; a missing file is WB_OK with *out = NULL (the file is optional).
 * Read through the capped reader: a file over 16 MiB is refused. */
wb_status wb_generation_config_load(const char *dir, wb_generation_config **out, wb_err *err);

/* From text; `name` is used in errors. */
wb_status wb_generation_config_parse(const char *json, size_t len, const char *name,
                                     wb_generation_config **out, wb_err *err);

void wb_generation_config_free(wb_generation_config *g);

const wb_generation_defaults *wb_generation_config_defaults(const wb_generation_config *g);

/* The file's path (or the name given to _parse). */
const char *wb_generation_config_name(const wb_generation_config *g);

#ifdef __cplusplus
}
#endif
#endif
