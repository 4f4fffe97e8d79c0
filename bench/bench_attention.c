/* bench_attention.c — the attention kernels of every level this CPU runs
 * (model/kernels/kernels.h) against OpenBLAS's sgemm, one thread, on the default
 * model's heads (4 of 64): microseconds and the speed-up over the baseline measured in
 * the same run.
 *
 *   build/bench/bench_attention [--json]   (after make bench-bin)
 *
 * Each figure is the fastest single call out of many (at least 30, about 0.2 s of
 * calls): on a shared machine, a call that ran without being preempted.
 *
 * Two cases, as the engine runs them:
 * - the encoder's self-attention of one source of N pieces (all heads): K transposed
 *   into panels and attend_kt, against sgemm (Q K^T), the level's softmax and sgemm
 *   (P V), which is what the engine ran before it had its own kernels;
 * - the cross-attention of a sentence's 4 beam hypotheses against a source of N
 *   pieces (all heads, the keys transposed once when decoding starts): attend_kt on the
 *   4 rows together, against 4 calls of attend_row (one row at a time, the decoder's
 *   self-attention kernel).
 * The largest difference to the baseline's output is printed as a sanity check.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/kernels/kernels.h"
#include "model/ops.h"

enum { D = 256, HEADS = 4, HD = D / HEADS, HYPS = 4 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *random_floats(size_t n, float scale) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = ((float)rand() / RAND_MAX - 0.5f) * scale;
    return x;
}

typedef struct {
    const dmt_kernels *k;
    int n;                      /* source pieces */
    const float *q, *kr, *v;    /* [n][D] (q: [HYPS][D] for the cross-attention) */
    float *kt, *out, *scratch;
} attn_case;

typedef void (*attn_fn)(attn_case *c);

/* the encoder, before: sgemm, softmax, sgemm a head */
static void encoder_sgemm(attn_case *c) {
    for (int h = 0; h < HEADS; h++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->n, c->n, HD, 1.0f, c->q + h * HD, D, c->kr + h * HD, D,
                    0.0f, c->scratch, c->n);
        c->k->softmax(c->scratch, c->n, c->n);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->n, HD, c->n, 1.0f, c->scratch, c->n, c->v + h * HD, D,
                    0.0f, c->out + h * HD, D);
    }
}

/* the encoder now: K into panels, then the keys-across-lanes kernel a head */
static void encoder_kt(attn_case *c) {
    dmt_transpose_keys(c->kt, c->kr, D, c->n, D);
    for (int h = 0; h < HEADS; h++)
        c->k->attend_kt(c->out + h * HD, D, c->q + h * HD, D, c->n, c->kt + h * HD * 16, (size_t)D * 16, c->v + h * HD,
                        D, c->n, HD, c->scratch);
}

static void cross_row_by_row(attn_case *c) {
    for (int i = 0; i < HYPS; i++)
        for (int h = 0; h < HEADS; h++)
            c->k->attend_row(c->out + i * D + h * HD, c->q + i * D + h * HD, c->kr + h * HD, c->v + h * HD, D, NULL,
                             c->n, HD, c->scratch);
}

static void cross_kt(attn_case *c) { /* the keys transposed when decoding started */
    for (int h = 0; h < HEADS; h++)
        c->k->attend_kt(c->out + h * HD, D, c->q + h * HD, D, HYPS, c->kt + h * HD * 16, (size_t)D * 16,
                        c->v + h * HD, D, c->n, HD, c->scratch);
}

/* the fastest call, in seconds */
static double fastest(attn_fn f, attn_case *c) {
    double best = 1e9, start = now();
    for (int calls = 0; calls < 30 || now() - start < 0.2; calls++) {
        double t0 = now();
        f(c);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void report(int json, const char *what, const dmt_kernels *k, int n, const char *base_name, double base,
                   double t, double diff) {
    if (json)
        printf("{\"case\": \"%s\", \"level\": \"%s\", \"pieces\": %d, \"baseline\": \"%s\", \"baseline_us\": %.2f, "
               "\"us\": %.2f, \"speedup\": %.3f, \"max_abs_diff\": %.2e}\n",
               what, k->name, n, base_name, base * 1e6, t * 1e6, base / t, diff);
    else
        printf("%-26s %-11s %4d  %-13s %9.1f %9.1f %7.2fx  %.1e\n", what, k->name, n, base_name, base * 1e6, t * 1e6,
               base / t, diff);
}

static double max_diff(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

int main(int argc, char **argv) {
    int json = argc > 1 && !strcmp(argv[1], "--json");
    if (argc > 2 || (argc == 2 && !json)) {
        fprintf(stderr, "usage: bench_attention [--json]\n");
        return 2;
    }
    openblas_set_num_threads(1);
    dmt_kernels_set_threads(1);
    static const int lengths[] = {30, 60, 120};
    if (!json)
        printf("%-26s %-11s %4s  %-13s %9s %9s %8s  %s\n", "case (4 heads of 64)", "level", "N", "baseline",
               "base us", "us", "speedup", "max diff");
    for (int isa = DMT_ISA_AVX2; isa < DMT_ISA_COUNT; isa++) {
        const dmt_kernels *k = dmt_kernels_for((dmt_isa)isa);
        if (!k) continue;
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            int n = lengths[l];
            float *q = random_floats((size_t)n * D, 0.25f), *kr = random_floats((size_t)n * D, 2.0f);
            float *v = random_floats((size_t)n * D, 2.0f), *kt = malloc(dmt_keys_stride(n) * D * sizeof *kt);
            float *want = malloc((size_t)n * D * sizeof *want), *got = malloc((size_t)n * D * sizeof *got);
            float *scratch = malloc((size_t)n * dmt_keys_stride(n) * sizeof *scratch);
            attn_case c = {k, n, q, kr, v, kt, want, scratch};
            double base = fastest(encoder_sgemm, &c);
            c.out = got;
            double t = fastest(encoder_kt, &c);
            report(json, "encoder self-attention", k, n, "sgemm", base, t, max_diff(want, got, (size_t)n * D));
            c.out = want;
            base = fastest(cross_row_by_row, &c);
            c.out = got;
            t = fastest(cross_kt, &c);
            report(json, "cross-attention, 4 rows", k, n, "row by row", base, t, max_diff(want, got, HYPS * D));
            free(q), free(kr), free(v), free(kt), free(want), free(got), free(scratch);
        }
    }
    return 0;
}
