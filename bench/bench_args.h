/* bench_args.h - the command line every bench shares: `--help` (or -h) prints the bench's usage
 * and exits 0; an option it does not declare exits 2 with the usage, as the scripts do (wb.cli).
 * The positional arguments (repeat counts, paths) stay each bench's own. */
#ifndef WB_BENCH_ARGS_H
#define WB_BENCH_ARGS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* usage: what follows the program name, then lines of explanation. known: NULL-terminated list
 * of the bench's own options (may be NULL). */
static inline void bench_args(int argc, char **argv, const char *usage, const char *const *known) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s %s\n", argv[0], usage);
            exit(0);
        }
        if (a[0] != '-' || a[1] == '\0' || (a[1] >= '0' && a[1] <= '9')) continue; /* positional */
        int ok = 0;
        for (const char *const *k = known; k && *k; k++) ok |= strcmp(a, *k) == 0;
        if (!ok) {
            fprintf(stderr, "%s: unknown option '%s'\nusage: %s %s\n", argv[0], a, argv[0], usage);
            exit(2);
        }
    }
}

#endif
