/* threadpool.c - a persistent pool for decode and prefill, tuned for microsecond-scale jobs.
 *
 * A decode step is ~20 short phases (one per matrix) separated by barriers, so sync cost is what
 * matters: workers poll a generation counter for a while (a token every few hundred us keeps
 * them hot) and only then sleep on a futex, so an idle pool costs no CPU. The caller is thread 0
 * and does its share, which also means a 1-thread "pool" is just a function call.
 */
#include "threadpool.h"

#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Every wait (an idle worker for the next job, a barrier, the caller for the workers' last phase)
 * polls for a bounded time, then sleeps on the futex: PAUSE for the first SPIN_PAUSE_NS, then a
 * sched_yield between polls. The clock is read every SPIN_CHECK polls through the vDSO, so the
 * budgets are in time whatever a PAUSE costs (~10-150 cycles depending on the core).
 * - Idle workers poll up to SPIN_IDLE_NS after a job: a generation loop that samples and
 *   detokenises for 5-100 us between tokens finds them awake (a futex wake costs more than the
 *   whole token), and an idle pool still costs no CPU a fraction of a millisecond later.
 * - Barriers separate phases of a few us; SPIN_BARRIER_NS covers a peer late by a scheduler
 *   hiccup, and a peer descheduled for longer wakes us through the futex.
 * - The yields are for a waiter whose peer is queued on its own CPU: one that only PAUSEs holds
 *   the core that peer needs (measured on 2 cores with one taken by another process: 0.7-1.6
 *   ms/token at 2 threads with a 200 us PAUSE spin, 0.06-0.09 with the yields). A waiter whose
 *   peers all last ran on other CPUs keeps PAUSEing instead: there a yield helps none of them,
 *   and when another process is runnable on the waiter's CPU it hands that process the CPU for
 *   the rest of its time slice (measured on TinyLM decode with other processes on both cores:
 *   1-14 ms stalls every few dozen steps, the caller yielding in a phase wait or the worker
 *   yielding between steps and coming back milliseconds later). A yield returns at once when
 *   nothing else is runnable on the core.
 * A 1-thread pool never waits: wb_pool_run calls the function, barriers return at once. */
#define SPIN_IDLE_NS 200000
#define SPIN_BARRIER_NS 50000
#define SPIN_PAUSE_NS 4000
#define SPIN_CHECK 32
/* The caller moves a worker off its own CPU at most this often (spread_workers). */
#define PLACE_EVERY_NS 5000000

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One cache line per thread for its barrier count, so an arrival is one store to a line of its
 * own and a waiter's polls read its peers' lines, never a line every thread writes. */
typedef struct bar_flag {
    _Alignas(64) atomic_uint passed; /* barriers this thread has reached */
    atomic_int cpu;                  /* where the thread last took a job (-1: not known) */
} bar_flag;

struct wb_pool {
    int n;
    pthread_t *threads;
    bar_flag *flags;                     /* [n] */
    wb_pool_fn fn;
    void *arg;
    int helped;                          /* the job is a wb_pool_run_helped one */
    long long placed_ns;                 /* when the caller last moved a worker off its CPU */
    _Alignas(64) atomic_uint gen;        /* bumped to start a job (or stop) */
    atomic_int stop;
    atomic_int sleepers;                 /* threads in futex_wait on gen */
    atomic_uint open;                    /* gen of the job workers may still join; closed: other */
    _Alignas(64) atomic_uint pending;    /* workers still to finish the current wb_pool_run job */
    atomic_uint inside;                  /* workers between joining a job and leaving it */
    atomic_int main_sleeping;
    _Alignas(64) atomic_int bar_sleepers; /* threads in futex_wait on some flags[].passed */
};

/* The pool-thread index of the calling thread in the job it runs: barriers need it to find
 * their own flag, and wb_pool_barrier's callers only pass the pool. */
static _Thread_local int tl_tid;

static int this_cpu(void) {
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* One poll of a bounded wait: pause or yield, and 0 once budget_ns has passed since the first
 * clock reading. Past SPIN_PAUSE_NS it yields if a peer of thread tid in pool p was last seen on
 * the caller's CPU (or p is NULL), else it keeps pausing, deciding again every SPIN_PAUSE_NS
 * (the peers' records move as they wait too); the clock is then read at every poll: a yield to
 * another process can take a whole time slice, and 32 of them between readings once cost 1-3 ms
 * of CPU per "200 us" idle spin on a loaded machine (each switch is CPU time of ours too). */
typedef struct spin {
    unsigned i;
    unsigned char yield;          /* past SPIN_PAUSE_NS: whether to yield */
    long long t0, t, decided;     /* decided: when yield was last set (0: not yet) */
} spin;

/* 1 when a thread of p other than tid was last seen (taking a job or in a long wait) on the CPU
 * the caller runs on; records the caller's CPU as its own. */
static int shares_cpu(const wb_pool *p, int tid) {
    const int me = this_cpu();
    if (me < 0) return 1;
    atomic_store_explicit(&p->flags[tid].cpu, me, memory_order_relaxed);
    for (int i = 0; i < p->n; i++)
        if (i != tid && atomic_load_explicit(&p->flags[i].cpu, memory_order_relaxed) == me) return 1;
    return 0;
}

static int spin_more(spin *sp, long long budget_ns, const wb_pool *p, int tid) {
    if (++sp->i % SPIN_CHECK == 0 || (sp->t0 && sp->t - sp->t0 >= SPIN_PAUSE_NS)) {
        sp->t = now_ns();
        if (!sp->t0) sp->t0 = sp->t;
        else if (sp->t - sp->t0 > budget_ns) return 0;
    }
    if (sp->t - sp->t0 < SPIN_PAUSE_NS) {
        cpu_relax();
        return 1;
    }
    if (!sp->decided || sp->t - sp->decided >= SPIN_PAUSE_NS)
        sp->decided = sp->t, sp->yield = (unsigned char)(!p || shares_cpu(p, tid));
    if (sp->yield) sched_yield();
    else cpu_relax();
    return 1;
}

typedef struct worker_arg {
    wb_pool *p;
    int tid;
} worker_arg;

static void fwait(atomic_uint *addr, unsigned val) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    (void)addr, (void)val;
    sched_yield();
#endif
}

static void fwake(atomic_uint *addr) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Wait until *addr != val: poll for up to spin_ns (spin_more), then sleep with a registered
 * sleeper count so the waker only pays for a syscall when someone is actually asleep. The seq_cst
 * increment of the sleeper count before the futex's own compare closes the lost-wakeup window. */
static void wait_change(atomic_uint *addr, unsigned val, atomic_int *sleepers, long long spin_ns,
                        const wb_pool *p, int tid) {
    spin sp = {0};
    do {
        if (atomic_load_explicit(addr, memory_order_acquire) != val) return;
    } while (spin_more(&sp, spin_ns, p, tid));
    while (atomic_load(addr) == val) {
        atomic_fetch_add(sleepers, 1);
        fwait(addr, val);
        atomic_fetch_sub(sleepers, 1);
    }
}

/* A worker takes part in a job only while the job is open (p->open == the gen it saw): a
 * wb_pool_run job stays open until every worker has run it; a wb_pool_run_helped job closes when
 * the caller is done, and a worker that comes late finds it closed and goes back to waiting. The
 * inside count (incremented before the open check, seq_cst against the caller's close-then-read)
 * tells the caller when no worker can still be reading the job. */
static void *worker_main(void *a) {
    worker_arg wa = *(worker_arg *)a;
    free(a);
    wb_pool *p = wa.p;
    unsigned seen = 0;
    tl_tid = wa.tid;
    for (;;) {
        wait_change(&p->gen, seen, &p->sleepers, SPIN_IDLE_NS, p, wa.tid);
        seen = atomic_load(&p->gen);
        if (atomic_load(&p->stop)) break;
        atomic_store_explicit(&p->flags[wa.tid].cpu, this_cpu(), memory_order_relaxed);
        atomic_fetch_add(&p->inside, 1);
        if (atomic_load(&p->open) == seen) {
            const int counted = !p->helped;
            p->fn(p->arg, wa.tid, p->n);
            if (counted && atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->main_sleeping))
                fwake(&p->pending);
        }
        if (atomic_fetch_sub(&p->inside, 1) == 1 && atomic_load(&p->main_sleeping))
            fwake(&p->inside);
    }
    return NULL;
}

/* Start each worker on a CPU other than the caller's (the next ones of the caller's allowed set,
 * round robin), then give it back the whole set: a placement, not a pin. Linux places a new thread
 * on its creator's CPU when that looks idlest at the time, and the two then share one core while
 * the other is idle: the caller, busy with the decode loop, leaves the worker queued behind it,
 * and the load balancer keeps both there while they are cache-hot (measured in a fresh process:
 * the worker ran 0.1 ms and waited 8-11 ms in the run queue over the first 64 TinyLM steps, no
 * migration). Moving a queued or running thread to a CPU outside its new mask is synchronous, so
 * restoring the mask at once keeps the placement. Best effort: any failure leaves the thread
 * where the scheduler put it. */
static void place_worker(pthread_t t, int k) {
#ifdef __linux__
    cpu_set_t all, one;
    const int me = sched_getcpu();
    if (me < 0 || sched_getaffinity(0, sizeof all, &all) || CPU_COUNT(&all) < 2 ||
        !CPU_ISSET(me, &all))
        return;
    int idx = 0, n = 0, cpus[CPU_SETSIZE];
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            if (c == me) idx = n;
            cpus[n++] = c;
        }
    CPU_ZERO(&one);
    CPU_SET(cpus[(idx + k) % n], &one);
    if (pthread_setaffinity_np(t, sizeof one, &one) == 0) pthread_setaffinity_np(t, sizeof all, &all);
#else
    (void)t, (void)k;
#endif
}

wb_status wb_pool_new(int n_threads, wb_pool **out, wb_err *err) {
    if (!out || n_threads < 1) return wb_err_set(err, WB_ERR_ARG, "wb_pool_new: bad thread count");
    wb_pool *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
    if (!p) return wb_err_set(err, WB_ERR_NOMEM, "thread pool: out of memory");
    memset(p, 0, sizeof *p);
    p->n = n_threads;
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->flags = aligned_alloc(64, (size_t)n_threads * sizeof *p->flags);
    if (!p->threads || !p->flags) {
        free(p->threads);
        free(p->flags);
        free(p);
        return wb_err_set(err, WB_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 0; i < n_threads; i++) {
        atomic_init(&p->flags[i].passed, 0);
        atomic_init(&p->flags[i].cpu, -1);
    }
    /* Workers block every signal (they inherit the mask at creation), so a host's Ctrl-C handler
     * always runs on the thread that called in, not on a worker in the middle of a barrier. */
    sigset_t all, old_mask;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_mask);
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        int rc = wa ? 0 : ENOMEM;
        if (wa) {
            wa->p = p;
            wa->tid = i;
            rc = pthread_create(&p->threads[i], NULL, worker_main, wa);
            if (rc) free(wa);
            else place_worker(p->threads[i], i);
        }
        if (rc) {
            pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
            p->n = i; /* join the ones already started */
            wb_pool_free(p);
            return wb_err_set(err, WB_ERR_NOMEM, "thread pool: cannot start thread %d: %s", i,
                              strerror(rc));
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    *out = p;
    return WB_OK;
}

void wb_pool_free(wb_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    fwake(&p->gen);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->flags);
    free(p);
}

int wb_pool_size(const wb_pool *p) { return p ? p->n : 1; }

/* Wait (bounded spin, then futex sleep) until *cnt is 0; workers wake the caller when they
 * bring it to 0 while main_sleeping is set. */
static void wait_zero(wb_pool *p, atomic_uint *cnt) {
    spin sp = {0};
    do {
        if (atomic_load_explicit(cnt, memory_order_acquire) == 0) return;
    } while (spin_more(&sp, SPIN_IDLE_NS, p, 0));
    for (;;) {
        unsigned v = atomic_load(cnt);
        if (v == 0) break;
        atomic_store(&p->main_sleeping, 1);
        if (atomic_load(cnt) == v) fwait(cnt, v);
        atomic_store(&p->main_sleeping, 0);
    }
}

/* Move a worker that last ran on the caller's CPU to another one (place_worker), at most once
 * every PLACE_EVERY_NS: the scheduler sometimes puts a worker back beside the caller (a wake-up
 * while the other core was taken), and a worker queued behind a caller that never sleeps waits
 * for the load balancer, milliseconds. One CPU read per job when nothing needs moving. */
static void spread_workers(wb_pool *p) {
    const int me = this_cpu();
    atomic_store_explicit(&p->flags[0].cpu, me, memory_order_relaxed); /* for shares_cpu */
    if (me < 0) return;
    for (int i = 1; i < p->n; i++) {
        if (atomic_load_explicit(&p->flags[i].cpu, memory_order_relaxed) != me) continue;
        const long long t = now_ns();
        if (p->placed_ns && t - p->placed_ns < PLACE_EVERY_NS) return;
        p->placed_ns = t;
        atomic_store_explicit(&p->flags[i].cpu, -1, memory_order_relaxed); /* until it reports */
        place_worker(p->threads[i], i);
    }
}

/* Publish a job and wake the workers: fn, arg and the counts first, then open, then gen, so a
 * worker that sees the new gen sees the job. */
static void start_job(wb_pool *p, wb_pool_fn fn, void *arg, int helped) {
    spread_workers(p);
    const unsigned g = atomic_load(&p->gen) + 1;
    p->fn = fn;
    p->arg = arg;
    p->helped = helped;
    atomic_store(&p->pending, helped ? 0u : (unsigned)(p->n - 1));
    atomic_store(&p->open, g);
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers)) fwake(&p->gen);
    tl_tid = 0;
}

static void close_job(wb_pool *p) {
    atomic_store(&p->open, atomic_load(&p->gen) + 0x80000000u);
    wait_zero(p, &p->inside);
}

void wb_pool_run(wb_pool *p, wb_pool_fn fn, void *arg) {
    if (!p || p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    start_job(p, fn, arg, 0);
    fn(arg, 0, p->n);
    wait_zero(p, &p->pending);
    close_job(p);
}

void wb_pool_run_helped(wb_pool *p, wb_pool_fn fn, void *arg) {
    if (!p || p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    start_job(p, fn, arg, 1);
    fn(arg, 0, p->n);
    close_job(p);
}

void wb_pool_count_add(wb_pool *p, atomic_uint *c, unsigned n) {
    atomic_fetch_add(c, n);
    if (p && atomic_load(&p->bar_sleepers)) fwake(c);
}

void wb_pool_count_wait(wb_pool *p, atomic_uint *c, unsigned target) {
    spin sp = {0};
    unsigned v;
    while ((int)((v = atomic_load_explicit(c, memory_order_acquire)) - target) < 0) {
        if (spin_more(&sp, SPIN_BARRIER_NS, p, tl_tid) || !p) continue;
        atomic_fetch_add(&p->bar_sleepers, 1);
        if ((int)(atomic_load(c) - target) < 0) fwait(c, v);
        atomic_fetch_sub(&p->bar_sleepers, 1);
    }
}

/* Each thread counts the barriers it has passed in its own flag and waits until every peer's
 * count has caught up with its own: an arrival is one store, and the last thread to arrive frees
 * the others with that store alone (a shared counter would need its read-modify-write, then a
 * second store the waiters re-read: two cache-line transfers in series instead of one). Counts
 * are compared as a wrapping difference. A waiter that runs out of spin sleeps on the flag it
 * waits for; arrivals then wake that flag's sleepers (the seq_cst store before the seq_cst
 * sleeper-count load, against the waiter's increment before the futex's own compare, closes the
 * lost-wakeup window). */
void wb_pool_barrier(wb_pool *p) {
    if (!p || p->n == 1) return;
    const int me = tl_tid;
    const unsigned mine = atomic_load_explicit(&p->flags[me].passed, memory_order_relaxed) + 1;
    atomic_store(&p->flags[me].passed, mine);
    if (atomic_load(&p->bar_sleepers)) fwake(&p->flags[me].passed);
    for (int j = 0; j < p->n; j++) {
        if (j == me) continue;
        atomic_uint *f = &p->flags[j].passed;
        spin sp = {0};
        unsigned v;
        while ((int)((v = atomic_load_explicit(f, memory_order_acquire)) - mine) < 0) {
            if (spin_more(&sp, SPIN_BARRIER_NS, p, me)) continue;
            atomic_fetch_add(&p->bar_sleepers, 1);
            if ((int)(atomic_load(f) - mine) < 0) fwait(f, v);
            atomic_fetch_sub(&p->bar_sleepers, 1);
        }
    }
}

/* ------------------------------------------------------------------------ helpers, slots */

int wb_compute_threads(void) {
    static atomic_int ncpu = 0; /* racing first calls agree */
    if (ncpu == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        ncpu = n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
    }
    int nt = wb_threads_get();
    return nt < ncpu ? nt : ncpu;
}

void wb_split_rows(int n, int tid, int nt, int *r0, int *r1) {
    int nb = (n + 7) / 8;
    int b0 = (int)((int64_t)nb * tid / nt), b1 = (int)((int64_t)nb * (tid + 1) / nt);
    *r0 = b0 * 8 < n ? b0 * 8 : n;
    *r1 = b1 * 8 < n ? b1 * 8 : n;
}

void wb_pool_slot_init(wb_pool_slot *s) {
    pthread_mutex_init(&s->mu, NULL);
    s->pool = NULL;
    s->warmed = 0;
}

void wb_pool_slot_destroy(wb_pool_slot *s) {
    wb_pool_free(s->pool);
    s->pool = NULL;
    pthread_mutex_destroy(&s->mu);
}

wb_status wb_pool_slot_acquire(wb_pool_slot *s, int nt, wb_pool **out, wb_err *err) {
    pthread_mutex_lock(&s->mu);
    if (s->pool && wb_pool_size(s->pool) != nt) {
        wb_pool_free(s->pool);
        s->pool = NULL;
    }
    wb_status st = s->pool ? WB_OK : wb_pool_new(nt, &s->pool, err);
    if (st) pthread_mutex_unlock(&s->mu);
    *out = s->pool;
    return st;
}

void wb_pool_slot_release(wb_pool_slot *s) { pthread_mutex_unlock(&s->mu); }

int wb_pool_slot_claim_warm(wb_pool_slot *s, int nt) {
    pthread_mutex_lock(&s->mu);
    const unsigned bit = 1u << ((nt < 1 ? 1 : nt > 32 ? 32 : nt) - 1);
    const int first = !(s->warmed & bit);
    s->warmed |= bit;
    pthread_mutex_unlock(&s->mu);
    return first;
}

wb_status wb_pool_slot_run(wb_pool_slot *s, int nt, wb_pool_fn fn, void *arg, wb_err *err) {
    if (nt <= 1) {
        fn(arg, 0, 1);
        return WB_OK;
    }
    wb_pool *p;
    wb_status st = wb_pool_slot_acquire(s, nt, &p, err);
    if (st) return st;
    wb_pool_run(p, fn, arg);
    wb_pool_slot_release(s);
    return WB_OK;
}
