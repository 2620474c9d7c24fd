/* threadpool.h - the persistent compute pool every forward pass runs on (not a public API).
 *
 * wb_pool is a fixed set of threads woken per job (core/threadpool.c). wb_pool_slot is the one a
 * model keeps: a pool resized on demand to the thread count asked for, behind a mutex so two
 * sessions of one model never share it at the same moment.
 */
#ifndef WB_THREADPOOL_H
#define WB_THREADPOOL_H

#include <pthread.h>
#include <stdatomic.h>

#include "wb_base.h"

typedef void (*wb_pool_fn)(void *arg, int tid, int nt);
typedef struct wb_pool wb_pool;

wb_status wb_pool_new(int n_threads, wb_pool **out, wb_err *err);
void wb_pool_free(wb_pool *p);
int wb_pool_size(const wb_pool *p);
/* Run fn(arg, tid, n) on every thread of the pool, the caller being tid 0; returns when all
 * are done. A NULL pool runs fn(arg, 0, 1) inline. */
void wb_pool_run(wb_pool *p, wb_pool_fn fn, void *arg);
/* Every thread of the current wb_pool_run waits for the others. No-op for NULL / 1 thread. */
void wb_pool_barrier(wb_pool *p);

/* Run fn(arg, tid, n) with the caller as tid 0 and whichever workers join before the caller
 * returns from fn; returns once the caller is done and no worker is inside fn. A worker that is
 * descheduled or wakes late is not waited for, so fn must hand out its work through claims
 * (atomic counters) that any thread may take, never count on a given tid taking part, and never
 * call wb_pool_barrier. Threads wait for each other's work with the counters below. */
void wb_pool_run_helped(wb_pool *p, wb_pool_fn fn, void *arg);
/* *c += n (release), waking threads asleep in wb_pool_count_wait on c. */
void wb_pool_count_add(wb_pool *p, atomic_uint *c, unsigned n);
/* Wait until *c reaches target (acquire; wrapping compare): a bounded spin, then futex sleep. */
void wb_pool_count_wait(wb_pool *p, atomic_uint *c, unsigned target);

/* wb_threads_get() capped at the online CPUs: more spinning threads than cores turns every
 * barrier into a wait for a descheduled peer. */
int wb_compute_threads(void);

/* Rows [r0, r1) of n owned by thread tid of nt, in blocks of 8 (the GEMV kernels' row group),
 * so every thread writes whole cache lines of its own. */
void wb_split_rows(int n, int tid, int nt, int *r0, int *r1);

typedef struct wb_pool_slot {
    pthread_mutex_t mu;
    wb_pool *pool;
    unsigned warmed; /* bit min(nt, 32) - 1: a warm-up step ran at nt threads (wb_pool_slot_claim_warm) */
} wb_pool_slot;

void wb_pool_slot_init(wb_pool_slot *s);
void wb_pool_slot_destroy(wb_pool_slot *s);
/* Lock the slot and make its pool nt threads wide; on WB_OK the caller runs jobs on *out and
 * then calls wb_pool_slot_release. On error the slot is left unlocked. */
wb_status wb_pool_slot_acquire(wb_pool_slot *s, int nt, wb_pool **out, wb_err *err);
void wb_pool_slot_release(wb_pool_slot *s);
/* acquire, run fn once on the pool, release (nt <= 1 runs fn inline without locking). */
wb_status wb_pool_slot_run(wb_pool_slot *s, int nt, wb_pool_fn fn, void *arg, wb_err *err);
/* 1 the first time it is asked for nt (above 31: for any of them), else 0: the caller is then to run a throwaway step at nt threads (first code,
 * cache and thread-placement costs paid before the user's first token; see core/session.c). */
int wb_pool_slot_claim_warm(wb_pool_slot *s, int nt);

#endif
