/* bench_gemm.c — deepmt's packed products (model/gemm.h) against OpenBLAS's sgemm, one
 * thread, on the default model's shapes, in microseconds and GFLOP/s.
 *
 *   OPENBLAS_NUM_THREADS=1 build/bench/bench_gemm        (best of 5 timings each)
 *
 * Shapes: decoder steps at batch 32 x beam 4 (128 rows) and batch 1 (4 rows) against
 * the attention (256x256), FFN (1024x256, 256x1024) and output (8000x256) matrices,
 * and an encoder batch (480 rows). sgemm gets y = bias then beta = 1, as ops.c calls
 * it. The largest difference to sgemm's output is printed as a sanity check.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gemm.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *random_floats(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
    return x;
}

int main(void) {
    static const int shapes[][3] = {{128, 256, 256},  {128, 256, 1024}, {128, 1024, 256}, {128, 256, 8000},
                                    {480, 256, 1024}, {4, 256, 256},    {4, 256, 8000},   {1, 256, 1024}};
    int layouts[2] = {dmt_gemm_layout(DMT_PRECISION_F32), dmt_gemm_layout(DMT_PRECISION_BF16)};
    if (layouts[0] == DMT_LAYOUT_ROWS) layouts[0] = -1;
    printf("%-18s %14s %20s %20s\n", "rows x in x out", "sgemm", "packed F32", "packed BF16");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = random_floats((size_t)n * in), *w = random_floats((size_t)out * in), *b = random_floats(out);
        float *y = malloc((size_t)n * out * sizeof *y), *ref = malloc((size_t)n * out * sizeof *ref);
        double flop = 2.0 * n * in * out;
        int reps = (int)(1e9 / flop) + 1;
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            double t = now();
            for (int q = 0; q < reps; q++) {
                for (int i = 0; i < n; i++) memcpy(ref + (size_t)i * out, b, (size_t)out * sizeof *b);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 1.0f, ref, out);
            }
            t = (now() - t) / reps;
            best = t < best ? t : best;
        }
        printf("%4d x %4d x %4d %8.1f us %4.0f GF", n, in, out, best * 1e6, flop / best * 1e-9);
        for (int l = 0; l < 2; l++) {
            if (layouts[l] < 0) {
                printf(" %20s", "(no AVX-512)");
                continue;
            }
            size_t bytes = dmt_gemm_packed_bytes(layouts[l], out, in);
            void *packed = aligned_alloc(64, bytes);
            memset(packed, 0, bytes);
            for (int j0 = 0; j0 < out; j0 += DMT_PANEL)
                dmt_gemm_pack_rows(packed, layouts[l], in, j0, out - j0 < DMT_PANEL ? out - j0 : DMT_PANEL,
                                   w + (size_t)j0 * in);
            dmt_linear lin = {.packed = packed, .bias = b, .out = out, .in = in, .layout = layouts[l]};
            double bp = 1e30, diff = 0;
            for (int r = 0; r < 5; r++) {
                double t = now();
                for (int q = 0; q < reps; q++) dmt_gemm_packed(y, out, x, in, n, &lin, 1);
                t = (now() - t) / reps;
                bp = t < bp ? t : bp;
            }
            for (size_t i = 0; i < (size_t)n * out; i++) diff = fmax(diff, fabs(y[i] - ref[i]));
            printf(" %8.1f us %4.0f GF %4.1fx (max diff %.0e)", bp * 1e6, flop / bp * 1e-9, best / bp, diff);
            free(packed);
        }
        printf("\n");
        free(x), free(w), free(b), free(y), free(ref);
    }
    return 0;
}
