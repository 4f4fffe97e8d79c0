/* bench_widen.c — F16/BF16 -> F32 widening rate of the loader, in M values/s.
 *
 *   build/bench/bench_widen [MVALUES]        (default 16 M values, best of 5)
 *
 * "per value" is the loop the loader ran before the bulk functions (a call through
 * a function pointer for each value); "bulk" is dmt_{f16,bf16}_to_f32_n. The input is
 * random 16-bit patterns with NaN/Inf exponents remapped, from a buffer at an odd
 * address, as a safetensors tensor may be.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model/kernels/kernels.h"
#include "model/safetensors.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void per_value(float *dst, const unsigned char *src, size_t n, float (*widen)(uint16_t)) {
    for (size_t i = 0; i < n; i++) dst[i] = widen((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
}

int main(int argc, char **argv) {
    size_t n = (size_t)((argc > 1 ? atof(argv[1]) : 16.0) * 1e6);
    unsigned char *raw = malloc(2 * n + 1), *src = raw + 1;
    float *dst = malloc(n * sizeof *dst);
    if (!raw || !dst) return 1;
    srand(1);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)rand();
        if (((h >> 10) & 0x1f) == 0x1f) h ^= 0x4000; /* keep F16 values finite, like weights */
        src[2 * i] = (unsigned char)h, src[2 * i + 1] = (unsigned char)(h >> 8);
    }
    for (int fmt = 0; fmt < 2; fmt++)
        for (int bulk = 0; bulk < 2; bulk++) {
            double best = 1e9;
            for (int r = 0; r < 5; r++) {
                double t = now();
                if (bulk) (fmt ? dmt_bf16_to_f32_n : dmt_f16_to_f32_n)(dst, src, n);
                else per_value(dst, src, n, fmt ? dmt_bf16_to_f32 : dmt_f16_to_f32);
                t = now() - t;
                best = t < best ? t : best;
            }
            printf("%-4s %-9s %8.1f M values/s (%zu values, %.2f ms)\n", fmt ? "BF16" : "F16",
                   bulk ? "bulk" : "per value", n / best * 1e-6, n, best * 1e3);
        }
    free(raw);
    free(dst);
    return 0;
}
