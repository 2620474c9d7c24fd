/* test_threadpool.c - the compute pool's threads and what they inherit. */
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

int main(void) {
    RUN(workers_block_signals_and_the_caller_keeps_its_mask);
    return check_summary();
}
