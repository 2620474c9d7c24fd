/* bench_cputime.h - what the kernel benches share: the calling thread's CPU time (a shared
 * machine's descheduling left out) and a fixed-seed xorshift for their random inputs. */
#ifndef WB_BENCH_CPUTIME_H
#define WB_BENCH_CPUTIME_H

#include <time.h>

static inline double bench_thread_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static unsigned long long bench_rng_state = 88172645463325252ull;
static inline unsigned bench_rand32(void) {
    unsigned long long s = bench_rng_state;
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    bench_rng_state = s;
    return (unsigned)(s >> 32);
}

#endif
