/* clock.h — the monotonic clock that times requests, deadlines and batches. */
#ifndef DEEPMT_SERVER_CLOCK_H
#define DEEPMT_SERVER_CLOCK_H

#include <time.h>

/* Monotonic clock in seconds. */
static inline double dmt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
