/* wb_jinja.h - a Jinja2 template engine for Hugging Face chat templates.
 *
 * A template is parsed once (wb_jinja_parse) and rendered any number of times
 * (wb_jinja_render) with a JSON object of variables. The language is what chat templates use,
 * with the settings transformers applies: trim_blocks and lstrip_blocks on, the trailing
 * newline of the template dropped, loop controls, raise_exception() and strftime_now().
 * Output matches @huggingface/jinja byte for byte (docs/chat.md lists the language and gaps).
 *
 * Every render is bounded: output size, memory, evaluation steps and nesting depth; passing
 * those limits is a WB_ERR_RANGE error naming the template and line, never a crash or a hang.
 */
#ifndef WB_JINJA_H
#define WB_JINJA_H

#include "wb_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wb_jinja wb_jinja;
struct cJSON;

/* Parse src[0..len). `name` (copied) prefixes every error: "NAME:LINE: ...". Templates larger
 * than 4 MiB, or nested deeper than 128 levels, are refused. */
wb_status wb_jinja_parse(const char *src, size_t len, const char *name, wb_jinja **out, wb_err *err);
void wb_jinja_free(wb_jinja *t);
const char *wb_jinja_name(const wb_jinja *t);

typedef struct wb_jinja_params {
    size_t max_output;  /* bytes of rendered text (default 16 MiB) */
    size_t max_memory;  /* bytes of working memory for one render (default 256 MiB) */
    uint64_t max_steps; /* expressions and statements evaluated (default 20 million) */
    int max_depth;      /* evaluation nesting, macro calls included (default 256) */
    int64_t now;        /* seconds since the epoch for strftime_now; < 0: the current time */
} wb_jinja_params;

wb_jinja_params wb_jinja_default_params(void);

/* Render with `vars` (a JSON object, or NULL for none) as the template's variables, plus the
 * globals true/false/none (and True/False/None), range, namespace, raise_exception and
 * strftime_now. *out is wb_free()-able and NUL-terminated; *len excludes the NUL.
 * raise_exception("msg") in the template gives WB_ERR_ARG with "NAME: the template raised an
 * error: msg". params may be NULL for the defaults. */
wb_status wb_jinja_render(const wb_jinja *t, const struct cJSON *vars, const wb_jinja_params *params,
                          char **out, size_t *len, wb_err *err);

#ifdef __cplusplus
}
#endif
#endif
