/* test_gemm.c — the packed-weight products (model/gemm.h) against a naive double loop.
 *
 * Shapes cover every row-block remainder (1-12 rows and more than one block), outputs
 * that leave the last panel partly empty, odd input widths (BF16 pads pairs), strided
 * views whose padding must stay untouched, and 1 vs 2 threads (bit-identical: each
 * panel is computed by one thread in the same order). F32 must match sgemm's accuracy;
 * BF16 must equal the exact product of the bfloat16-rounded operands (F32 accumulation)
 * and stay within bfloat16 rounding of the true product. Skipped where the CPU lacks
 * the instructions (the model then keeps OpenBLAS, tested in test_ops.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemm.h"
#include "model/ops.h"
#include "tests/c/check.h"

#define PAD 12345.0f

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float uniform(float lo, float hi) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * 0x1.0p-53);
}

static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fff + ((u >> 16) & 1);
    u &= 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A packed linear layer from a row-major w (the loader's path: pack_rows by panels). */
static dmt_linear pack(dmt_weight_layout layout, const float *w, const float *b, int out, int in, void **mem) {
    size_t bytes = dmt_gemm_packed_bytes(layout, out, in);
    void *p = aligned_alloc(64, bytes);
    memset(p, 0, bytes);
    for (int j0 = 0; j0 < out; j0 += DMT_PANEL)
        dmt_gemm_pack_rows(p, layout, in, j0, out - j0 < DMT_PANEL ? out - j0 : DMT_PANEL, w + (size_t)j0 * in);
    *mem = p;
    return (dmt_linear){.packed = p, .bias = b, .out = out, .in = in, .layout = layout};
}

static void check_product(dmt_weight_layout layout, int n, int in, int out, int with_bias, int ldx, int ldy) {
    float *x = malloc((size_t)n * ldx * sizeof *x), *w = malloc((size_t)out * in * sizeof *w);
    float *b = with_bias ? malloc((size_t)out * sizeof *b) : NULL;
    for (size_t i = 0; i < (size_t)n * ldx; i++) x[i] = uniform(-1, 1);
    for (size_t i = 0; i < (size_t)out * in; i++) w[i] = uniform(-1, 1);
    for (int i = 0; b && i < out; i++) b[i] = uniform(-1, 1);
    void *mem;
    dmt_linear lin = pack(layout, w, b, out, in, &mem);
    float *y1 = malloc((size_t)n * ldy * sizeof *y1), *y2 = malloc((size_t)n * ldy * sizeof *y2);
    for (size_t i = 0; i < (size_t)n * ldy; i++) y1[i] = y2[i] = PAD;
    dmt_gemm_packed(y1, ldy, x, ldx, n, &lin, 1);
    dmt_gemm_packed(y2, ldy, x, ldx, n, &lin, 2);

    int bf16 = layout == DMT_LAYOUT_PACKED_BF16, pad_ok = 1;
    double worst = 0, worst_rounded = 0;
    for (int i = 0; i < n; i++) {
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0, mag = b ? fabs(b[o]) : 0, sr = s;
            for (int k = 0; k < in; k++) {
                double xv = x[(size_t)i * ldx + k], wv = w[(size_t)o * in + k];
                s += xv * wv;
                mag += fabs(xv * wv);
                sr += (double)bf16_round((float)xv) * bf16_round((float)wv);
            }
            double got = y1[(size_t)i * ldy + o];
            double e = fabs(got - s) / (mag + fabs(s)), er = fabs(got - sr) / (mag + fabs(sr));
            if (!(e <= worst)) worst = e;
            if (!(er <= worst_rounded)) worst_rounded = er;
        }
        for (int o = out; o < ldy; o++) pad_ok &= y1[(size_t)i * ldy + o] == PAD;
    }
    char what[200];
    const char *name = bf16 ? "bf16" : "f32";
    snprintf(what, sizeof what, "%s n=%d in=%d out=%d %s ldx=%d ldy=%d: worst %.1e, padding untouched", name, n, in,
             out, b ? "bias" : "no bias", ldx, ldy, worst);
    /* bf16 keeps 8 significant bits: each product is off by <= 2^-8 of its size */
    CHECK(worst <= (bf16 ? 8e-3 : 1e-5) && pad_ok, what, "worst %.3e, padding %d", worst, pad_ok);
    if (bf16) {
        snprintf(what, sizeof what, "bf16 n=%d in=%d out=%d equals the product of rounded operands (worst %.1e)", n,
                 in, out, worst_rounded);
        CHECK(worst_rounded <= 1e-5, what, "worst %.3e", worst_rounded);
    }
    snprintf(what, sizeof what, "%s n=%d in=%d out=%d: 2 threads give the same bits as 1", name, n, in, out);
    CHECK(!memcmp(y1, y2, (size_t)n * ldy * sizeof *y1), what);

    /* rows read back (the tied embedding's path) */
    float *row = malloc((size_t)in * sizeof *row);
    int rows_ok = 1;
    for (int o = 0; o < out; o += out > 7 ? out / 7 : 1) {
        dmt_linear_row(&lin, o, row);
        for (int k = 0; k < in; k++) {
            float want = bf16 ? bf16_round(w[(size_t)o * in + k]) : w[(size_t)o * in + k];
            rows_ok &= row[k] == want;
        }
    }
    snprintf(what, sizeof what, "%s in=%d out=%d: dmt_linear_row reads back the packed rows", name, in, out);
    CHECK(rows_ok, what);
    free(row);
    free(x), free(w), free(b), free(y1), free(y2), free(mem);
}

int main(void) {
    int has_f32 = __builtin_cpu_supports("avx512f"); /* the layout the loader picks may be OpenBLAS by DEEPMT_GEMM */
    int has_bf16 = dmt_gemm_layout(DMT_PRECISION_BF16) == DMT_LAYOUT_PACKED_BF16;
    dmt_weight_layout layouts[] = {DMT_LAYOUT_PACKED_F32, DMT_LAYOUT_PACKED_BF16};
    for (int l = 0; l < 2; l++) {
        if (!(l ? has_bf16 : has_f32)) {
            SKIP(l ? "this CPU lacks AVX-512 BF16: bf16 products are refused at load"
                   : "this CPU lacks AVX-512F: models keep OpenBLAS products");
            continue;
        }
        for (int n = 1; n <= 13; n++) check_product(layouts[l], n, 37, 45, n & 1, 37, 45);
        check_product(layouts[l], 30, 256, 256, 1, 256, 256);     /* whole panels, several row blocks */
        check_product(layouts[l], 25, 64, 70, 1, 80, 75);         /* strided x and y, partial panel */
        check_product(layouts[l], 4, 33, 1, 0, 33, 1);            /* one output column */
        check_product(layouts[l], 2, 1, 16, 1, 1, 16);            /* one input */
        check_product(layouts[l], 3, 1024, 17, 1, 1030, 17);      /* wide input */
        check_product(layouts[l], 300, 129, 40, 0, 129, 40);      /* bf16: more rows than one chunk */
    }

    /* dmt_gemm_packed_bytes: F32 panels hold in x 32 floats, BF16 pairs x 32 x 2 halves */
    CHECK(dmt_gemm_packed_bytes(DMT_LAYOUT_PACKED_F32, 33, 3) == 2 * 32 * 3 * 4, "packed F32 size");
    CHECK(dmt_gemm_packed_bytes(DMT_LAYOUT_PACKED_BF16, 32, 3) == 1 * 32 * 2 * 2 * 2, "packed BF16 size");
    return check_done();
}
