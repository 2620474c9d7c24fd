/* base.c - error messages, clock, thread setting, version and BLAS identification. */
#include "wb_base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cblas.h>

/* Provided by OpenBLAS but not declared in every version of its cblas.h. */
char *openblas_get_corename(void);
char *openblas_get_config(void);

#ifndef WB_VERSION
#define WB_VERSION "0.0.0"
#endif

wb_status wb_err_set(wb_err *err, wb_status status, const char *fmt, ...) {
    if (err) {
        err->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *wb_status_name(wb_status s) {
    switch (s) {
    case WB_OK: return "ok";
    case WB_ERR_IO: return "i/o error";
    case WB_ERR_FORMAT: return "format error";
    case WB_ERR_ARG: return "bad argument";
    case WB_ERR_NOMEM: return "out of memory";
    case WB_ERR_RANGE: return "out of range";
    case WB_ERR_NOTFOUND: return "not found";
    case WB_ERR_CANCELLED: return "cancelled";
    case WB_ERR_STATE: return "wrong state";
    }
    return "unknown status";
}

void wb_free(void *p) { free(p); }

double wb_clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The one process-wide setting: how many cores the kernels may use. Sampling and RNG state are
 * per request and never global. */
static int g_threads = 1;

void wb_threads_set(int n) {
    g_threads = n < 1 ? 1 : n;
    /* Our own kernels split work themselves; OpenBLAS GEMM gets the same budget. */
    openblas_set_num_threads(g_threads);
}

int wb_threads_get(void) { return g_threads; }

/* OpenBLAS starts one thread per core unless told otherwise; make its GEMMs follow our setting
 * (1 by default) from the moment the library is loaded, not only after wb_threads_set. */
__attribute__((constructor)) static void threads_init(void) { openblas_set_num_threads(g_threads); }

const char *wb_version(void) { return WB_VERSION; }

const char *wb_blas_info(void) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s / kernel %s", openblas_get_config(), openblas_get_corename());
    return buf;
}

/* Debian's OpenBLAS 0.3.21 predates some CPUs (Sapphire Rapids, for one) and silently falls back
 * to SSE-era kernels that are 5-10x slower. OPENBLAS_CORETYPE must be set before the library
 * initialises, i.e. before the process starts, so the core only diagnoses; hosts re-exec. */
static int core_is_fallback(const char *core) {
    static const char *const fallback[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                           "Atom", "Katmai", "Coppermine", "Northwood", "Banias",
                                           "Opteron", "Barcelona", "Bobcat", "Unknown", NULL};
    for (int i = 0; fallback[i]; i++)
        if (core && strcasecmp(core, fallback[i]) == 0) return 1;
    return 0;
}

const char *wb_blas_preferred_coretype(void) {
    const char *core = openblas_get_corename();
    if (getenv("OPENBLAS_CORETYPE")) return NULL; /* the user decided */
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx512 && (core_is_fallback(core) || strcasecmp(core, "Sandybridge") == 0 ||
                   strcasecmp(core, "Haswell") == 0))
        return "SkylakeX";
    if (avx2 && (core_is_fallback(core) || strcasecmp(core, "Sandybridge") == 0))
        return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
    return NULL;
}
