/* test_threadpool.c - the compute pool's threads and what they inherit, helped jobs' waits. */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "threadpool.h"

typedef struct {
    atomic_int ran;
    atomic_int sigint_open; /* threads other than the caller where SIGINT is not blocked */
} mask_probe;

static void probe_mask(void *arg, int tid, int nt) {
    mask_probe *p = arg;
    (void)nt;
    atomic_fetch_add(&p->ran, 1);
    if (tid == 0) return;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    if (!sigismember(&cur, SIGINT)) atomic_fetch_add(&p->sigint_open, 1);
}

/* A host's Ctrl-C handler sets an interrupt hook for the thread running Lua: were SIGINT open in
 * a worker, the kernel could run the handler there, racing the Lua thread (the server once
 * missed a Ctrl-C that way). Workers block every signal; the caller's mask is left as it was. */
static void workers_block_signals_and_the_caller_keeps_its_mask(void) {
    sigset_t before, after;
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    CHECK(!sigismember(&before, SIGINT));
    wb_pool *pool = NULL;
    wb_err err = {0};
    CHECK(wb_pool_new(3, &pool, &err) == WB_OK);
    if (!pool) return;
    mask_probe p;
    atomic_init(&p.ran, 0);
    atomic_init(&p.sigint_open, 0);
    wb_pool_run(pool, probe_mask, &p);
    CHECK(atomic_load(&p.ran) == 3);
    CHECK(atomic_load(&p.sigint_open) == 0);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    CHECK(!sigismember(&after, SIGINT));
    CHECK(sigismember(&after, SIGTERM) == sigismember(&before, SIGTERM));
    wb_pool_free(pool);
    wb_pool_free(NULL); /* no-op */
}

/* A helped job as decode runs it: chunks claimed by whichever thread comes, counted done, and
 * every thread that came waits for the whole count before the next phase. */
enum { HELP_PHASES = 6, HELP_CHUNKS = 24, HELP_JOBS = 300 };
typedef struct {
    wb_pool *pool;
    atomic_uint claim[HELP_PHASES], done[HELP_PHASES];
    atomic_int ran[HELP_PHASES]; /* chunks run per phase */
    atomic_int early;            /* a thread saw a phase's chunks before the previous was complete */
} help_job;

static void help_fn(void *arg, int tid, int nt) {
    help_job *j = arg;
    (void)tid, (void)nt;
    for (int k = 0; k < HELP_PHASES; k++) {
        unsigned mine = 0;
        while (atomic_fetch_add(&j->claim[k], 1) < HELP_CHUNKS) {
            if (k && atomic_load(&j->ran[k - 1]) != HELP_CHUNKS) atomic_fetch_add(&j->early, 1);
            atomic_fetch_add(&j->ran[k], 1);
            mine++;
        }
        if (mine) wb_pool_count_add(j->pool, &j->done[k], mine);
        wb_pool_count_wait(j->pool, &j->done[k], HELP_CHUNKS);
    }
}

static void run_help_jobs(wb_pool *pool) {
    int bad = 0;
    for (int r = 0; r < HELP_JOBS; r++) {
        help_job j = {.pool = pool};
        for (int k = 0; k < HELP_PHASES; k++) {
            atomic_init(&j.claim[k], 0);
            atomic_init(&j.done[k], 0);
            atomic_init(&j.ran[k], 0);
        }
        atomic_init(&j.early, 0);
        wb_pool_run_helped(pool, help_fn, &j);
        for (int k = 0; k < HELP_PHASES; k++) bad += atomic_load(&j.ran[k]) != HELP_CHUNKS;
        bad += atomic_load(&j.early) != 0;
    }
    CHECK(bad == 0);
}

/* The waits poll, and yield only when a peer last ran on the waiter's CPU (else they keep
 * pausing, then sleep): helped jobs complete with every chunk run once and phases in order on
 * threads spread over CPUs and on threads that all share one CPU (where a waiter that kept
 * pausing would hold the CPU its peer needs until its spin ran out, every phase). */
static void helped_jobs_complete_spread_and_on_one_cpu(void) {
    wb_err err = {0};
    wb_pool *pool = NULL;
    CHECK(wb_pool_new(2, &pool, &err) == WB_OK);
    if (!pool) return;
    run_help_jobs(pool);
    wb_pool_free(pool);
#ifdef __linux__
    cpu_set_t before, one;
    if (sched_getaffinity(0, sizeof before, &before) == 0) {
        int cpu = 0;
        while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &before)) cpu++;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
        pool = NULL;
        CHECK(wb_pool_new(3, &pool, &err) == WB_OK); /* workers inherit the one-CPU mask */
        if (pool) {
            run_help_jobs(pool);
            wb_pool_free(pool);
        }
        CHECK(sched_setaffinity(0, sizeof before, &before) == 0);
    }
#endif
}

int main(void) {
    RUN(workers_block_signals_and_the_caller_keeps_its_mask);
    RUN(helped_jobs_complete_spread_and_on_one_cpu);
    return check_summary();
}
