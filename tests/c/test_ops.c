/* test_ops.c — every kernel in model/ops.h against a naive double-precision loop.
 *
 * Inputs come from a fixed-seed generator; sizes are odd on purpose and strided
 * views carry padding that must stay untouched. An output passes when
 * |got - ref| <= tol * (scale + |ref|), scale being the size of the terms that were
 * summed (so cancellation is not held against float arithmetic).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/ops.h"
#include "model/kernels/kernels.h"
#include "tests/c/check.h"
#include "tests/c/random.h"

void openblas_set_num_threads(int num_threads); /* OpenBLAS */

#define TOL 1e-5
#define PAD 12345.0f /* sentinel in the padding of strided outputs */

/* Worst error ratio |got - ref| / (scale + |ref|) seen so far; pass when <= TOL. */
typedef struct { double worst; int bad_index; } errstat;

static void track(errstat *e, int index, double got, double ref, double scale) {
    double r = fabs(got - ref) / (scale + fabs(ref));
    if (!(r <= e->worst)) { e->worst = r; e->bad_index = index; } /* NaN counts as worst */
}

/* ---- matmul ------------------------------------------------------------------------ */

static void check_matmul(int n, int in, int out, int with_bias, int ldx, int ldy) {
    float *x = random_floats((size_t)n * ldx, -1, 1), *w = random_floats((size_t)out * in, -1, 1);
    float *b = with_bias ? random_floats((size_t)out, -1, 1) : NULL;
    float *y = malloc((size_t)n * ldy * sizeof *y);
    for (long i = 0; i < (long)n * ldy; i++) y[i] = PAD;
    dmt_linear lin = {.weight = w, .bias = b, .out = out, .in = in};
    int strided = ldx != in || ldy != out;
    if (strided) dmt_matmul_strided(y, ldy, x, ldx, n, &lin);
    else dmt_matmul(y, x, n, &lin);
    errstat e = {0, -1};
    int pad_ok = 1;
    for (int i = 0; i < n; i++) {
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0, mag = b ? fabs(b[o]) : 0;
            for (int k = 0; k < in; k++) {
                s += (double)x[(size_t)i * ldx + k] * w[(size_t)o * in + k];
                mag += fabs((double)x[(size_t)i * ldx + k] * w[(size_t)o * in + k]);
            }
            track(&e, i * out + o, y[(size_t)i * ldy + o], s, mag);
        }
        for (int o = out; o < ldy; o++) pad_ok &= y[(size_t)i * ldy + o] == PAD;
    }
    char what[160];
    snprintf(what, sizeof what, "%s n=%d in=%d out=%d %s ldx=%d ldy=%d (worst %.1e)",
             strided ? "dmt_matmul_strided" : "dmt_matmul", n, in, out, b ? "bias" : "no bias", ldx, ldy, e.worst);
    CHECK(e.worst <= TOL && pad_ok, what, "worst relative error %.3e at %d; padding untouched %d", e.worst,
          e.bad_index, pad_ok);
    free(x), free(w), free(b), free(y);
}

/* ---- normalisation ------------------------------------------------------------------ */

/* ref[n][d] = LayerNorm(alpha * x + y) in double (y may be NULL). */
static void ref_norm(double *ref, const float *x, const float *y, int n, int d, double alpha,
                     const float *gamma, const float *beta, double eps) {
    for (int i = 0; i < n; i++) {
        double mean = 0, var = 0, *r = ref + (size_t)i * d;
        for (int j = 0; j < d; j++) {
            r[j] = alpha * x[(size_t)i * d + j] + (y ? y[(size_t)i * d + j] : 0);
            mean += r[j];
        }
        mean /= d;
        for (int j = 0; j < d; j++) var += (r[j] - mean) * (r[j] - mean);
        var /= d;
        for (int j = 0; j < d; j++) r[j] = (r[j] - mean) / sqrt(var + eps) * gamma[j] + beta[j];
    }
}

static void check_norm(int n, int d, int residual, float alpha, float offset) {
    float *x = random_floats((size_t)n * d, offset - 2, offset + 2), *y = random_floats((size_t)n * d, -1, 1);
    float *gamma = random_floats((size_t)d, 0.5f, 1.5f), *beta = random_floats((size_t)d, -0.5f, 0.5f);
    double *ref = malloc((size_t)n * d * sizeof *ref);
    float eps = 1e-5f;
    ref_norm(ref, x, residual ? y : NULL, n, d, residual ? alpha : 1.0, gamma, beta, eps);
    dmt_norm_weights w = {gamma, beta};
    if (residual) dmt_residual_norm(x, y, n, d, alpha, &w, eps);
    else dmt_layer_norm(x, n, d, &w, eps);
    errstat e = {0, -1};
    for (long i = 0; i < (long)n * d; i++) track(&e, (int)i, x[i], ref[i], 1.0); /* outputs are O(1) */
    char what[160];
    if (residual)
        snprintf(what, sizeof what, "dmt_residual_norm n=%d d=%d alpha=%g (worst %.1e)", n, d, alpha, e.worst);
    else snprintf(what, sizeof what, "dmt_layer_norm n=%d d=%d mean ~%g (worst %.1e)", n, d, offset, e.worst);
    CHECK(e.worst <= TOL, what, "worst relative error %.3e at %d", e.worst, e.bad_index);
    free(x), free(y), free(gamma), free(beta), free(ref);
}

/* ---- softmax ------------------------------------------------------------------------ */

static void check_softmax(int n, int len, float lo, float hi, int log_form) {
    float *x = random_floats((size_t)n * len, lo, hi);
    if (len > 2) x[1] = -INFINITY; /* a masked entry, as attention produces */
    double *ref = malloc((size_t)n * len * sizeof *ref);
    for (int i = 0; i < n; i++) {
        const float *r = x + (size_t)i * len;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < len; j++) mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < len; j++) sum += exp((double)r[j] - mx);
        for (int j = 0; j < len; j++)
            ref[(size_t)i * len + j] = log_form ? (double)r[j] - mx - log(sum) : exp((double)r[j] - mx) / sum;
    }
    if (log_form) dmt_log_softmax(x, n, len);
    else dmt_softmax(x, n, len);
    errstat e = {0, -1};
    int finite = 1, inf_ok = 1;
    /* log-probs are differences of numbers as large as the logits: allow their rounding
     * (eps * |logit| absolute); probabilities are compared relatively, down to 1e-8 */
    double scale = log_form ? 1.0 + FLT_EPSILON / TOL * fmax(fabs(lo), fabs(hi)) : 1e-3;
    for (long i = 0; i < (long)n * len; i++) {
        if (isinf(ref[i])) { inf_ok &= isinf(x[i]) && x[i] < 0; continue; }
        finite &= isfinite(x[i]);
        track(&e, (int)i, x[i], ref[i], scale);
    }
    char what[160];
    snprintf(what, sizeof what, "%s n=%d len=%d logits in [%g, %g] (worst %.1e)",
             log_form ? "dmt_log_softmax" : "dmt_softmax", n, len, lo, hi, e.worst);
    CHECK(e.worst <= TOL && finite && inf_ok, what, "worst relative error %.3e at %d; finite %d; -inf kept %d",
          e.worst, e.bad_index, finite, inf_ok);
    free(x), free(ref);
}

/* ---- activations -------------------------------------------------------------------- */

static void check_activations(void) {
    enum { N = 4001 };
    float *x = malloc(N * sizeof *x), *g = malloc(N * sizeof *g), *r = malloc(N * sizeof *r);
    for (int i = 0; i < N; i++) x[i] = -10.0f + 20.0f * i / (N - 1); /* -10 .. 10 step 0.005 */
    x[N / 2] = 0.0f;
    x[0] = -0.0f;
    x[1] = 1e-30f;
    x[2] = -1e-30f;
    x[3] = 30.0f;
    x[4] = -30.0f;
    memcpy(g, x, N * sizeof *x);
    memcpy(r, x, N * sizeof *x);
    dmt_gelu(g, N);
    dmt_relu(r, N);
    errstat e = {0, -1};
    int relu_ok = 1;
    for (int i = 0; i < N; i++) {
        double ref = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
        /* 1e-7 absolute: for x << 0, 1 + erf(x) cancels in float (the result is ~0 anyway) */
        track(&e, i, g[i], ref, 1e-2);
        relu_ok &= r[i] == (x[i] > 0 ? x[i] : 0.0f) && !signbit(r[i]);
    }
    CHECK(e.worst <= TOL, "dmt_gelu on [-10, 10] and +-30 against 0.5 x (1 + erf(x / sqrt 2)) in double",
          "worst relative error %.3e at x = %g: got %.9g", e.worst, e.bad_index >= 0 ? x[e.bad_index] : 0,
          e.bad_index >= 0 ? g[e.bad_index] : 0);
    CHECK(relu_ok, "dmt_relu exact (negatives and -0 -> +0)");
    float a[5] = {1, -2, 3.5f, 0, 1e30f}, b[5] = {0.5f, 2, -3.5f, -0.0f, 1e30f};
    dmt_add(a, b, 5);
    CHECK(a[0] == 1.5f && a[1] == 0 && a[2] == 0 && a[3] == 0 && a[4] == 2e30f, "dmt_add");
    free(x), free(g), free(r);
}

/* ---- attention ---------------------------------------------------------------------- */

static void check_attention(int nq, int nk, int heads, int hd, int causal, int ldq_pad, int ldkv_pad, int ldo_pad,
                            float qscale) {
    int d = heads * hd, ldq = d + ldq_pad, ldkv = d + ldkv_pad, ldo = d + ldo_pad;
    float *q = random_floats((size_t)nq * ldq, -qscale, qscale);
    float *k = random_floats((size_t)nk * ldkv, -1, 1), *v = random_floats((size_t)nk * ldkv, -1, 1);
    float *out = malloc((size_t)nq * ldo * sizeof *out);
    float *scratch = malloc(dmt_attention_scratch(nq, nk, d) * sizeof *scratch);
    for (long i = 0; i < (long)nq * ldo; i++) out[i] = PAD;
    dmt_attention(out, ldo, q, ldq, k, v, ldkv, nq, nk, heads, d, causal, scratch);
    errstat e = {0, -1};
    int pad_ok = 1;
    double *p = malloc((size_t)nk * sizeof *p);
    for (int i = 0; i < nq; i++) {
        int keys = causal >= 0 && i + causal + 1 < nk ? i + causal + 1 : nk;
        for (int h = 0; h < heads; h++) {
            double mx = -INFINITY, sum = 0, smax = 0;
            for (int j = 0; j < keys; j++) {
                double s = 0;
                for (int t = 0; t < hd; t++) s += (double)q[(size_t)i * ldq + h * hd + t] * k[(size_t)j * ldkv + h * hd + t];
                p[j] = s;
                mx = s > mx ? s : mx;
                smax = fmax(smax, fabs(s));
            }
            for (int j = 0; j < keys; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
            for (int t = 0; t < hd; t++) {
                double o = 0;
                for (int j = 0; j < keys; j++) o += p[j] / sum * v[(size_t)j * ldkv + h * hd + t];
                /* scores are rounded to float: each weight is off by ~eps * |score| relative */
                track(&e, i * d + h * hd + t, out[(size_t)i * ldo + h * hd + t], o, 1.0 + smax * FLT_EPSILON / TOL);
            }
        }
        for (int c = d; c < ldo; c++) pad_ok &= out[(size_t)i * ldo + c] == PAD;
    }
    char what[200];
    snprintf(what, sizeof what, "dmt_attention nq=%d nk=%d heads=%d head_dim=%d causal=%d ld q/kv/o +%d/+%d/+%d%s "
             "(worst %.1e)", nq, nk, heads, hd, causal, ldq_pad, ldkv_pad, ldo_pad, qscale > 1 ? " large scores" : "",
             e.worst);
    CHECK(e.worst <= TOL && pad_ok, what, "worst relative error %.3e at %d; padding untouched %d", e.worst,
          e.bad_index, pad_ok);
    free(q), free(k), free(v), free(out), free(scratch), free(p);
}

/* The decoder's slot cache: keys gathered through an index list must give the same
 * result as the same keys laid out contiguously (checked against dmt_attention). */
static void check_attention_slots(int nk, int heads, int hd, int pool) {
    int d = heads * hd;
    float *q = random_floats((size_t)d, -1, 1);
    float *kpool = random_floats((size_t)pool * d, -1, 1), *vpool = random_floats((size_t)pool * d, -1, 1);
    float *k = malloc((size_t)nk * d * sizeof *k), *v = malloc((size_t)nk * d * sizeof *v);
    float *got = malloc((size_t)d * sizeof *got), *want = malloc((size_t)d * sizeof *want);
    float *scratch = malloc(dmt_attention_scratch(1, nk, d) * sizeof *scratch);
    int *slots = malloc((size_t)nk * sizeof *slots);
    for (int j = 0; j < nk; j++) {
        slots[j] = (j * 7 + 3) % pool; /* scattered, repeats allowed */
        memcpy(k + (size_t)j * d, kpool + (size_t)slots[j] * d, (size_t)d * sizeof *k);
        memcpy(v + (size_t)j * d, vpool + (size_t)slots[j] * d, (size_t)d * sizeof *v);
    }
    dmt_attention_slots(got, q, kpool, vpool, d, slots, nk, heads, scratch);
    dmt_attention(want, d, q, d, k, v, d, 1, nk, heads, d, -1, scratch);
    double worst = 0;
    for (int t = 0; t < d; t++) worst = fmax(worst, fabs(got[t] - want[t]));
    char what[160];
    snprintf(what, sizeof what, "dmt_attention_slots nk=%d heads=%d head_dim=%d = contiguous attention (max diff %.1e)",
             nk, heads, hd, worst);
    CHECK(worst <= 1e-6, what, "max abs difference %.3e", worst);
    free(q), free(kpool), free(vpool), free(k), free(v), free(got), free(want), free(scratch), free(slots);
}

int main(void) {
    /* the level tests/run.sh asked for (DEEPMT_ISA) is the one these checks run on */
    char err[200] = "";
    const dmt_kernels *level = dmt_kernels_select(err, sizeof err);
    const char *want = getenv("DEEPMT_ISA");
    char what[200];
    snprintf(what, sizeof what, "kernel level %s%s", level ? level->name : "?",
             level && level->emulated ? " (emulated: this CPU lacks it)" : "");
    CHECK(level && (!want || !*want || !strcmp(want, level->name)), what, "%s", err);
    /* matmul: contiguous and strided, with and without bias, odd and degenerate sizes */
    check_matmul(7, 13, 5, 1, 13, 5);
    check_matmul(7, 13, 5, 0, 13, 5);
    check_matmul(1, 1, 1, 1, 1, 1);
    check_matmul(33, 64, 17, 1, 64, 17);
    check_matmul(3, 257, 129, 1, 257, 129);
    check_matmul(5, 11, 9, 1, 16, 12);
    check_matmul(5, 11, 9, 0, 19, 10);
    check_matmul(1, 31, 7, 1, 40, 21);

    /* row-major weights (sgemm) with few rows: every row count, widths with and
     * without a tail past the last 8 columns, odd and even outputs, strided views;
     * with one and two BLAS threads. */
    for (int threads = 1; threads <= 2; threads++) {
        openblas_set_num_threads(threads);
        for (int n = 1; n <= 5; n++) {
            check_matmul(n, 256, 37, 1, 256, 37);
            check_matmul(n, 19, 8, n & 1, 19, 8);
            check_matmul(n, 7, 3, 1, 9, 5);
            check_matmul(n, 264, 1, 0, 270, 3);
        }
    }

    check_norm(5, 7, 0, 1.0f, 0.0f);
    check_norm(3, 64, 0, 1.0f, 0.0f);
    check_norm(4, 33, 0, 1.0f, 100.0f); /* large mean: the variance must not cancel */
    check_norm(5, 7, 1, 2.3f, 0.0f);
    check_norm(3, 64, 1, 0.7f, 0.0f);
    check_norm(2, 48, 1, 8.5f, 10.0f);

    check_softmax(4, 9, -3, 3, 0);
    check_softmax(3, 17, 1000, 1010, 0);   /* expf(1000) overflows: the max must be subtracted */
    check_softmax(3, 17, -1010, -1000, 0); /* and underflows */
    check_softmax(2, 1, -5, 5, 0);
    check_softmax(4, 9, -3, 3, 1);
    check_softmax(3, 101, 1000, 1010, 1);
    check_softmax(3, 101, -1010, -1000, 1);
    check_softmax(2, 1, -5, 5, 1);

    check_activations();

    /* rows below, at and above a block of the transposed-K kernel (4 or 8 rows), with
     * and without a mask; head sizes of whole vectors (16 floats under AVX-512), of 4 vectors + 1 and
     * with a scalar tail; key counts below, at and above a vector and a 4-key block */
    static const int shapes[][4] = {{1, 1, 1, 4},   {1, 7, 2, 4},  {2, 5, 3, 5},   {3, 3, 1, 8},  {5, 9, 2, 4},
                                    {8, 8, 4, 3},   {1, 13, 4, 64}, {2, 16, 2, 64}, {1, 21, 2, 80}, {1, 33, 1, 70},
                                    {1, 3, 3, 16}, {2, 17, 1, 128}, {1, 4, 2, 24}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int causal = -1; causal <= 2; causal += (causal < 0 ? 1 : 2)) { /* -1, 0, 2 */
            const int *sh = shapes[s];
            check_attention(sh[0], sh[1], sh[2], sh[3], causal, 0, 0, 0, 1.0f);
            check_attention(sh[0], sh[1], sh[2], sh[3], causal, 3, sh[2] * sh[3] + 1, 5, 1.0f);
        }
    check_attention_slots(1, 1, 4, 3);
    check_attention_slots(9, 2, 4, 16);
    check_attention_slots(40, 4, 8, 23);
    check_attention_slots(13, 4, 64, 40);
    check_attention_slots(37, 2, 72, 50);
    /* decoder steps: a query row against a longer cache with the offset of its position */
    check_attention(1, 11, 2, 4, 10, 0, 3, 0, 1.0f);
    check_attention(2, 11, 2, 4, 9, 1, 3, 2, 1.0f);
    /* large scores: softmax inside attention must not overflow either */
    check_attention(1, 6, 2, 8, -1, 0, 0, 0, 30.0f);
    check_attention(6, 6, 2, 8, 0, 0, 0, 0, 30.0f);
    return check_done();
}
