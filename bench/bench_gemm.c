/* bench_gemm.c — the product kernels of every level this CPU runs
 * (model/kernels/kernels.h) against OpenBLAS's sgemm, one thread, on the default
 * model's shapes: microseconds, GFLOP/s (int8: "GOP/s", same count) and the speed-up
 * over sgemm.
 *
 *   build/bench/bench_gemm [--json] [--shape ROWS,IN,OUT]   (after make bench-bin)
 *
 * Each figure is the fastest single call out of many (at least 30, about 0.3 s of
 * calls): on a shared machine, a call that ran without being preempted.
 *
 * Shapes: decoder steps at batch 32 x beam 4 (128 rows) and batch 1 (4 rows) against
 * the attention (256x256), FFN (1024x256, 256x1024) and output (8000x256) matrices,
 * and an encoder batch (480 rows); --shape measures one shape instead (repeatable:
 * several shapes). sgemm gets y = bias then beta = 1, as ops.c calls
 * it. The largest difference to sgemm's output is printed as a sanity check (int8:
 * relative to the largest output). --json prints one object a line instead.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gemm.h"
#include "model/kernels/kernels.h"

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

int main(int argc, char **argv) {
    int json = 0;
    static int shapes[16][3] = {{128, 256, 256},  {128, 256, 1024}, {128, 1024, 256}, {128, 256, 8000},
                                {480, 256, 1024}, {4, 256, 256},    {4, 256, 8000},   {1, 256, 1024}};
    size_t n_shapes = 8, asked = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--json")) {
            json = 1;
        } else if (!strcmp(argv[a], "--shape") && a + 1 < argc && asked < 16 &&
                   sscanf(argv[a + 1], "%d,%d,%d", &shapes[asked][0], &shapes[asked][1], &shapes[asked][2]) == 3 &&
                   shapes[asked][0] > 0 && shapes[asked][1] > 0 && shapes[asked][2] > 0 &&
                   (double)shapes[asked][0] * shapes[asked][1] * shapes[asked][2] < 1e11) {
            n_shapes = ++asked;
            a++;
        } else {
            fprintf(stderr, "usage: bench_gemm [--json] [--shape ROWS,IN,OUT]... (at most 16 shapes)\n");
            return 2;
        }
    }
    dmt_kernels_set_threads(1);
    for (size_t s = 0; s < n_shapes; s++) {
        int n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = random_floats((size_t)n * in), *w = random_floats((size_t)out * in), *b = random_floats(out);
        float *y = malloc((size_t)n * out * sizeof *y), *ref = malloc((size_t)n * out * sizeof *ref);
        double flop = 2.0 * n * in * out;
        int reps = (int)(3e9 / flop) + 30;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t = now();
            for (int i = 0; i < n; i++) memcpy(ref + (size_t)i * out, b, (size_t)out * sizeof *b);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 1.0f, ref, out);
            t = now() - t;
            best = t < best ? t : best;
        }
        double refmax = 0;
        for (size_t i = 0; i < (size_t)n * out; i++) refmax = fmax(refmax, fabs(ref[i]));
        if (json)
            printf("{\"rows\": %d, \"in\": %d, \"out\": %d, \"kernel\": \"sgemm\", \"us\": %.2f}\n", n, in, out,
                   best * 1e6);
        else
            printf("%4d x %4d x %4d  %-24s %9.1f us %5.0f GF\n", n, in, out, "OpenBLAS sgemm", best * 1e6,
                   flop / best * 1e-9);
        for (int isa = 0; isa < DMT_ISA_COUNT; isa++) {
            const dmt_kernels *k = dmt_kernels_for((dmt_isa)isa);
            if (!k) continue;
            dmt_weight_layout layouts[3] = {DMT_LAYOUT_PACKED_F32, DMT_LAYOUT_PACKED_BF16, DMT_LAYOUT_PACKED_I8};
            for (int l = 0; l < 3; l++) {
                if ((layouts[l] == DMT_LAYOUT_PACKED_F32 && !k->panel_f32) ||
                    (layouts[l] == DMT_LAYOUT_PACKED_BF16 && !k->gemm_bf16))
                    continue;
                size_t bytes = dmt_gemm_packed_bytes(k, layouts[l], out, in);
                void *packed = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
                memset(packed, 0, bytes);
                for (int j0 = 0; j0 < out; j0 += 32)
                    dmt_gemm_pack_rows(packed, k, layouts[l], out, in, j0, out - j0 < 32 ? out - j0 : 32,
                                       w + (size_t)j0 * in);
                dmt_linear lin = {.packed = packed, .bias = b, .out = out, .in = in, .layout = layouts[l],
                                  .kernels = k};
                double bp = 1e30, diff = 0;
                for (int r = 0; r < reps; r++) {
                    double t = now();
                    dmt_gemm_packed(y, out, x, in, n, &lin, 1);
                    t = now() - t;
                    bp = t < bp ? t : bp;
                }
                for (size_t i = 0; i < (size_t)n * out; i++) diff = fmax(diff, fabs(y[i] - ref[i]));
                char name[64];
                dmt_gemm_describe(k, layouts[l], name, sizeof name);
                if (json)
                    printf("{\"rows\": %d, \"in\": %d, \"out\": %d, \"kernel\": \"%s\", \"us\": %.2f, "
                           "\"vs_sgemm\": %.3f}\n", n, in, out, name, bp * 1e6, best / bp);
                else
                    printf("%4d x %4d x %4d  %-24s %9.1f us %5.0f GF %5.2fx sgemm (max diff %.0e of %.1f)\n", n, in,
                           out, name, bp * 1e6, flop / bp * 1e-9, best / bp, diff, refmax);
                free(packed);
            }
        }
        free(x), free(w), free(b), free(y), free(ref);
    }
    return 0;
}
