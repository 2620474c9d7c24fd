/* wb_base.h - status codes, error buffer, allocation and timing shared by every part of the core.
 *
 * Conventions (llama.h style):
 *   - every fallible function returns a wb_status and fills a caller-owned wb_err;
 *   - every *_new / *_load / *_open has exactly one *_free, and *_free(NULL) is a no-op;
 *   - the core never prints and never exits.
 */
#ifndef WB_BASE_H
#define WB_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wb_status {
    WB_OK = 0,
    WB_ERR_IO = 1,        /* a file is missing, unreadable or unwritable                 */
    WB_ERR_FORMAT = 2,    /* a file or buffer is malformed (JSON, safetensors, ...)      */
    WB_ERR_ARG = 3,       /* the caller passed a bad argument (NULL, negative size, ...)  */
    WB_ERR_NOMEM = 4,     /* allocation failed                                           */
    WB_ERR_RANGE = 5,     /* token id, position or size out of range; context full       */
    WB_ERR_NOTFOUND = 6,  /* a named item (tensor, token, key) does not exist             */
    WB_ERR_CANCELLED = 7, /* the abort callback asked to stop                            */
    WB_ERR_STATE = 8      /* the object is in the wrong state for this call              */
} wb_status;

#define WB_ERR_MSG_SIZE 512

/* Caller-owned error message. Functions write a NUL-terminated sentence naming the file, field
 * or argument at fault. A zero-initialised wb_err is ready to use. */
typedef struct wb_err {
    wb_status status;
    char msg[WB_ERR_MSG_SIZE];
} wb_err;

/* Fill err (if non-NULL) with a printf-style message and return status. */
wb_status wb_err_set(wb_err *err, wb_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A short constant name for a status ("ok", "io error", ...). */
const char *wb_status_name(wb_status s);

/* Free memory the core handed to the caller (encoded ids, decoded text, ...). NULL is a no-op. */
void wb_free(void *p);

/* Monotonic clock in milliseconds (CLOCK_MONOTONIC), for traces and benchmarks. */
double wb_clock_ms(void);

/* Compute threads used by the forward pass and trainer (process-wide; default 1).
 * n < 1 is clamped to 1; n above the number of online CPUs is allowed but pointless. */
void wb_threads_set(int n);
int wb_threads_get(void);

/* Abort callback for long calls (prefill, training steps, generation): polled between layers or
 * chunks; returning non-zero makes the call stop with WB_ERR_CANCELLED. */
typedef int (*wb_abort_fn)(void *user_data);

/* Version of the library, "MAJOR.MINOR.PATCH". */
const char *wb_version(void);

/* The BLAS library actually linked and the kernel it picked at run time
 * (e.g. "OpenBLAS 0.3.21 ... / Zen"). Never NULL. */
const char *wb_blas_info(void);
/* The kernels in use: dispatch level, CPU features, the variant each matrix kernel runs (cpu.c).
 * Static storage, per thread. */
const char *wb_kernels_info(void);
/* 16 where the kernels in use multiply BF16 weights by the activations rounded to BF16 (the
 * vdpbf16ps route, the default on CPUs where it is the faster one: docs/performance.md), 32
 * where they multiply the F32 activations (every other route). Per thread, as the level. */
int wb_kernels_bf16_input_bits(void);

/* When the linked OpenBLAS picked a kernel far below what this CPU can run (an old OpenBLAS on a
 * newer CPU), the OPENBLAS_CORETYPE value a host should set before re-executing itself;
 * NULL when the kernel is fine or OPENBLAS_CORETYPE is already set. */
const char *wb_blas_preferred_coretype(void);

#ifdef __cplusplus
}
#endif
#endif
