/* base.c - error messages, clock, thread setting, version and BLAS identification. */
#include "cpu.h"
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

void wb_threads_set(int n) { g_threads = n < 1 ? 1 : n; }

int wb_threads_get(void) { return g_threads; }

/* OpenBLAS stays single-threaded: every caller splits its GEMMs over our own pool (one slice of
 * output columns per thread). Its pthread build starts one worker per core when the library is
 * loaded, and a worker whose queue is empty spins (sched_yield) for 2^28 cycles before it sleeps;
 * raising its thread count later starts fresh workers that spin again, and so does every GEMM
 * it runs threaded. On a 2-core machine that spinning worker took a core from our pool: a fresh
 * process decoded TinyLM at 2 threads at ~0.3 ms/token for its first 0.1-1 s against 0.08 after.
 * So: one thread from the start, and the workers started at load are shut down (when this
 * OpenBLAS exports its shutdown hook; the pthread build does, the OpenMP one has no such
 * workers), before any of our threads exist. */
int blas_thread_shutdown_(void) __attribute__((weak));

__attribute__((constructor)) static void blas_single_thread(void) {
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
}

const char *wb_version(void) { return WB_VERSION; }

const char *wb_blas_info(void) {
    static char buf[640];
    snprintf(buf, sizeof buf, "%s / kernel %s, 1 thread; %s", openblas_get_config(),
             openblas_get_corename(), wb_kernels_info());
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
    const wb_cpu_features *f = wb_cpu(); /* the one probe (cpu.c) */
    int avx512 = f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
    int avx2 = f->avx2 && f->fma;
    if (avx512 && (core_is_fallback(core) || strcasecmp(core, "Sandybridge") == 0 ||
                   strcasecmp(core, "Haswell") == 0))
        return "SkylakeX";
    if (avx2 && (core_is_fallback(core) || strcasecmp(core, "Sandybridge") == 0))
        return f->amd ? "Zen" : "Haswell";
    return NULL;
}
