/* check.h - a tiny test harness: sentence-like test names, one executable per area.
 *
 *   static void loads_a_valid_file(void) { CHECK(x == 1); CHECK_NEAR(a, b, 1e-4); }
 *   int main(void) { RUN(loads_a_valid_file); return check_summary(); }
 */
#ifndef WB_CHECK_H
#define WB_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures_total = 0, check_tests_run = 0, check_tests_failed = 0;
static int check_failures_in_test = 0;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            check_failures_in_test++;                                                       \
        }                                                                                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            check_failures_in_test++;                                                       \
        }                                                                                   \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                               \
    do {                                                                                    \
        double check_a_ = (double)(a), check_b_ = (double)(b);                              \
        if (!(fabs(check_a_ - check_b_) <= (tol))) {                                        \
            fprintf(stderr, "  %s:%d: %s = %.9g, %s = %.9g, differ by more than %g\n",      \
                    __FILE__, __LINE__, #a, check_a_, #b, check_b_, (double)(tol));         \
            check_failures_in_test++;                                                       \
        }                                                                                   \
    } while (0)

/* The error message must mention `needle` (a file, field or argument name). */
#define CHECK_ERR_MENTIONS(errmsg, needle)                                                  \
    CHECK_MSG(strstr((errmsg), (needle)) != NULL, "message \"%s\" does not mention \"%s\"",  \
              (errmsg), (needle))

#define RUN(test)                                                                           \
    do {                                                                                    \
        check_failures_in_test = 0;                                                         \
        check_tests_run++;                                                                  \
        test();                                                                             \
        if (check_failures_in_test) {                                                       \
            check_tests_failed++;                                                           \
            check_failures_total += check_failures_in_test;                                 \
            fprintf(stderr, "FAIL %s\n", #test);                                            \
        } else {                                                                            \
            printf("ok   %s\n", #test);                                                     \
        }                                                                                   \
    } while (0)

static inline int check_summary(void) {
    printf("%d passed, %d failed\n", check_tests_run - check_tests_failed, check_tests_failed);
    return check_tests_failed ? 1 : 0;
}

#endif
