/* random.h — the test programs' reproducible random numbers (xorshift64: the same
 * sequence on every machine and build, so a failure reproduces). */
#ifndef DEEPMT_TESTS_RANDOM_H
#define DEEPMT_TESTS_RANDOM_H

#include <stdint.h>
#include <stdlib.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* uniform in [lo, hi) */
static inline float uniform(float lo, float hi) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * 0x1.0p-53);
}

/* n floats uniform in [lo, hi); the caller frees them */
static inline float *random_floats(size_t n, float lo, float hi) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
    return x;
}

#endif
