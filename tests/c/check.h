/* check.h — the smallest test harness that reports in TAP.
 *
 * Each CHECK prints "ok N - what" or "not ok N - what" (with the location and a
 * message on failure); tests/run.sh counts those lines across all test programs.
 * SKIP("why") prints "ok N - # SKIP why" and is counted as skipped, not passed.
 * A test program ends with `return check_done();`, which exits 1 when any check failed.
 */
#ifndef DEEPMT_TESTS_CHECK_H
#define DEEPMT_TESTS_CHECK_H

#include <stdio.h>
#include <stdarg.h>

static int check_count, check_failed;

static inline int check_report(int ok, const char *file, int line, const char *what,
                               const char *fmt, ...) {
    ++check_count;
    printf("%s %d - %s\n", ok ? "ok" : "not ok", check_count, what);
    if (!ok) {
        ++check_failed;
        printf("#   at %s:%d", file, line);
        if (fmt && *fmt) {
            va_list ap;
            va_start(ap, fmt);
            printf(": ");
            vprintf(fmt, ap);
            va_end(ap);
        }
        printf("\n");
    }
    fflush(stdout);
    return ok;
}

/* CHECK(cond, "what", "printf-format for the failure", ...) */
#define CHECK(cond, what, ...) check_report(!!(cond), __FILE__, __LINE__, what, "" __VA_ARGS__)
#define SKIP(why) do { ++check_count; printf("ok %d - # SKIP %s\n", check_count, why); fflush(stdout); } while (0)

static inline int check_done(void) {
    printf("# %d checks, %d failed\n", check_count, check_failed);
    return check_failed ? 1 : 0;
}

#endif
