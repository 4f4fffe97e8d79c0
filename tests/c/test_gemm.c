/* test_gemm.c — the packed-weight products (model/gemm.h) of every kernel level this
 * CPU runs (model/kernels/kernels.h), against double-precision references.
 *
 * Shapes cover every row-block remainder (1-13 rows and more than one block), outputs
 * that leave the last panel partly empty, input widths that are not a multiple of the
 * pair (BF16) or quad (INT8) size, strided views whose padding must stay untouched,
 * more rows than one conversion chunk, and 1 vs 2 threads (bit-identical: each panel
 * is computed by one thread in the same order).
 *   F32 must match sgemm's accuracy.
 *   BF16 must equal the exact product of the bfloat16-rounded operands (F32
 *     accumulation) and stay within bfloat16 rounding of the true product.
 *   INT8 must equal the exact integer product of the quantised operands (weights per
 *     output row, activations per input row, dmt_quantize_row), scaled back, and stay
 *     within int8 rounding of the true product. Every level gives the same integers,
 *     also on operands of +-1 only (the largest bytes, products and sums).
 * Levels the CPU lacks run emulated (kernels.h) where the test build has SIMDe, and
 * are skipped with a message otherwise.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemm.h"
#include "model/kernels/kernels.h"
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

/* A packed linear layer from a row-major w (the loader's path: pack_rows by 32 rows). */
static dmt_linear pack(const dmt_kernels *k, dmt_weight_layout layout, const float *w, const float *b, int out,
                       int in, void **mem) {
    size_t bytes = dmt_gemm_packed_bytes(k, layout, out, in);
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    memset(p, 0, bytes);
    for (int j0 = 0; j0 < out; j0 += 32)
        dmt_gemm_pack_rows(p, k, layout, out, in, j0, out - j0 < 32 ? out - j0 : 32, w + (size_t)j0 * in);
    *mem = p;
    return (dmt_linear){.packed = p, .bias = b, .out = out, .in = in, .layout = layout, .kernels = k};
}

static const char *layout_name(dmt_weight_layout l) {
    return l == DMT_LAYOUT_PACKED_BF16 ? "bf16" : l == DMT_LAYOUT_PACKED_I8 ? "int8" : "f32";
}

/* Operands of +-1 only instead of uniform ones: every value quantises to +-127 (the
 * activation bytes the VNNI kernels see are 255 and 1), every product is +-127^2, and
 * x's row 0 against w's row 0 (all +1) sums in of them: where a kernel could saturate
 * (vpmaddubsw's 16-bit pair sums) or overflow, this is the input that shows it. */
static int extreme_operands;

static float operand(size_t row, size_t col) {
    return extreme_operands ? (row == 0 || (row * 7 + col * 3) % 5 < 3 ? 1.0f : -1.0f) : uniform(-1, 1);
}

static void check_product(const dmt_kernels *k, dmt_weight_layout layout, int n, int in, int out, int with_bias,
                          int ldx, int ldy) {
    float *x = malloc((size_t)n * ldx * sizeof *x), *w = malloc((size_t)out * in * sizeof *w);
    float *b = with_bias ? malloc((size_t)out * sizeof *b) : NULL;
    for (size_t i = 0; i < (size_t)n * ldx; i++) x[i] = operand(i / ldx, i % ldx);
    for (size_t i = 0; i < (size_t)out * in; i++) w[i] = operand(i / in, i % in);
    for (int i = 0; b && i < out; i++) b[i] = uniform(-1, 1);
    if (out > 2) memset(w + (size_t)(out / 2) * in, 0, (size_t)in * sizeof *w); /* an all-zero row: scale 0 */
    void *mem;
    dmt_linear lin = pack(k, layout, w, b, out, in, &mem);
    float *y1 = malloc((size_t)n * ldy * sizeof *y1), *y2 = malloc((size_t)n * ldy * sizeof *y2);
    for (size_t i = 0; i < (size_t)n * ldy; i++) y1[i] = y2[i] = PAD;
    dmt_gemm_packed(y1, ldy, x, ldx, n, &lin, 1);
    dmt_gemm_packed(y2, ldy, x, ldx, n, &lin, 2);

    /* the quantised operands, as the kernels must see them */
    int8_t *qx = malloc((size_t)n * in), *qw = malloc((size_t)out * in);
    float *sx = malloc((size_t)n * sizeof *sx), *sw = malloc((size_t)out * sizeof *sw);
    for (int i = 0; i < n; i++) sx[i] = dmt_quantize_row(qx + (size_t)i * in, x + (size_t)i * ldx, in);
    for (int o = 0; o < out; o++) sw[o] = dmt_quantize_row(qw + (size_t)o * in, w + (size_t)o * in, in);

    int bf16 = layout == DMT_LAYOUT_PACKED_BF16, i8 = layout == DMT_LAYOUT_PACKED_I8, pad_ok = 1;
    double worst = 0, worst_exact = 0;
    for (int i = 0; i < n; i++) {
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0, mag = b ? fabs(b[o]) : 0, sr = s, mr = mag, qbound = 0;
            /* int8: x = qx sx + ex with |ex| <= sx / 2, likewise w, so each product is off
             * by at most |x| hw + |w| hx + hx hw (h: half a quantisation step) */
            double hx = i8 ? 0.5 * sx[i] : 0, hw = i8 ? 0.5 * sw[o] : 0;
            int64_t isum = 0, imag = 0;
            for (int kk = 0; kk < in; kk++) {
                double xv = x[(size_t)i * ldx + kk], wv = w[(size_t)o * in + kk];
                s += xv * wv;
                mag += fabs(xv * wv);
                qbound += fabs(xv) * hw + fabs(wv) * hx + hx * hw;
                sr += (double)bf16_round((float)xv) * bf16_round((float)wv);
                mr += fabs((double)bf16_round((float)xv) * bf16_round((float)wv));
                int p = qx[(size_t)i * in + kk] * qw[(size_t)o * in + kk];
                isum += p;
                imag += p < 0 ? -p : p;
            }
            if (i8) { /* the exact integer product, scaled back */
                double sc = (double)sx[i] * sw[o];
                sr = (b ? b[o] : 0) + sc * (double)isum;
                mr = (b ? fabs(b[o]) : 0) + fabs(sc) * (double)imag;
            }
            double got = y1[(size_t)i * ldy + o];
            double e = i8 ? fabs(got - s) / (qbound + 1e-6 * (mag + fabs(s)) + 1e-30)
                          : fabs(got - s) / (mag + fabs(s) + 1e-30);
            double er = fabs(got - sr) / (mr + fabs(sr) + 1e-30);
            if (!(e <= worst)) worst = e;
            if (!(er <= worst_exact)) worst_exact = er;
        }
        for (int o = out; o < ldy; o++) pad_ok &= y1[(size_t)i * ldy + o] == PAD;
    }
    char what[240];
    const char *name = layout_name(layout);
    snprintf(what, sizeof what, "%s %s n=%d in=%d out=%d %s ldx=%d ldy=%d: worst %.1e%s, padding untouched", k->name,
             name, n, in, out, b ? "bias" : "no bias", ldx, ldy, worst, i8 ? " of the quantisation bound" : "");
    /* bf16 keeps 8 significant bits: each product is off by <= 2^-8 of its size; int8:
     * worst is the error over the quantisation bound above (<= 1) */
    CHECK(worst <= (bf16 ? 8e-3 : i8 ? 1.0 : 1e-5) && pad_ok, what, "worst %.3e, padding %d", worst, pad_ok);
    if (bf16 || i8) {
        snprintf(what, sizeof what, "%s %s n=%d in=%d out=%d equals the %s (worst %.1e)", k->name, name, n, in, out,
                 i8 ? "exact integer product of the quantised operands" : "product of rounded operands",
                 worst_exact);
        CHECK(worst_exact <= (i8 ? 1e-6 : 1e-5), what, "worst %.3e", worst_exact);
    }
    snprintf(what, sizeof what, "%s %s n=%d in=%d out=%d: 2 threads give the same bits as 1", k->name, name, n, in,
             out);
    CHECK(!memcmp(y1, y2, (size_t)n * ldy * sizeof *y1), what);

    /* rows read back (the tied embedding's path) */
    float *row = malloc((size_t)in * sizeof *row);
    int rows_ok = 1;
    for (int o = 0; o < out; o += out > 7 ? out / 7 : 1) {
        dmt_linear_row(&lin, o, row);
        for (int kk = 0; kk < in; kk++) {
            float v = w[(size_t)o * in + kk];
            float want = bf16 ? bf16_round(v) : i8 ? sw[o] * qw[(size_t)o * in + kk] : v;
            rows_ok &= row[kk] == want;
        }
    }
    snprintf(what, sizeof what, "%s %s in=%d out=%d: dmt_linear_row reads back the packed rows", k->name, name, in,
             out);
    CHECK(rows_ok, what);
    free(row), free(qx), free(qw), free(sx), free(sw);
    free(x), free(w), free(b), free(y1), free(y2), free(mem);
}

static void check_level(const dmt_kernels *k, dmt_weight_layout layout) {
    for (int n = 1; n <= 13; n++) check_product(k, layout, n, 37, 45, n & 1, 37, 45);
    check_product(k, layout, 30, 256, 256, 1, 256, 256); /* whole panels, several row blocks */
    check_product(k, layout, 25, 64, 70, 1, 80, 75);     /* strided x and y, partial panel */
    check_product(k, layout, 4, 33, 1, 0, 33, 1);        /* one output column */
    check_product(k, layout, 2, 1, 16, 1, 1, 16);        /* one input */
    check_product(k, layout, 3, 1024, 17, 1, 1030, 17);  /* wide input */
    check_product(k, layout, 7, 1026, 33, 1, 1026, 33);  /* in = 2 mod 4 */
    check_product(k, layout, 300, 129, 40, 0, 129, 40);  /* more rows than one conversion chunk */
    check_product(k, layout, 1100, 5, 20, 1, 5, 20);    /* more rows than a chunk holds scales for */
    if (layout == DMT_LAYOUT_PACKED_I8) {                /* the largest bytes and sums */
        extreme_operands = 1;
        check_product(k, layout, 13, 4096, 40, 1, 4096, 40);
        check_product(k, layout, 5, 37, 45, 0, 37, 45);
        extreme_operands = 0;
    }
}

int main(void) {
    int levels = 0;
    for (int isa = 0; isa < DMT_ISA_COUNT; isa++) {
        const dmt_kernels *k = dmt_kernels_for((dmt_isa)isa);
        char why[160];
        if (!k) k = dmt_kernels_emulated((dmt_isa)isa);
        if (!k) {
            snprintf(why, sizeof why, "%s: this CPU cannot run it and the emulation (libsimde-dev) is not built",
                     dmt_isa_name((dmt_isa)isa));
            SKIP(why);
            continue;
        }
        printf("# level %s%s\n", k->name, k->emulated ? " (emulated on SIMDe: this CPU lacks it)" : "");
        levels++;
        CHECK(k->isa == (dmt_isa)isa && !strcmp(k->name, dmt_isa_name((dmt_isa)isa)), "level table names itself");
        if (k->panel_f32) check_level(k, DMT_LAYOUT_PACKED_F32);
        if (k->gemm_bf16) check_level(k, DMT_LAYOUT_PACKED_BF16);
        check_level(k, DMT_LAYOUT_PACKED_I8);
        /* every level the same int8 integers: compare with the generic level's output */
        const dmt_kernels *g = dmt_kernels_for(DMT_ISA_GENERIC);
        int n = 9, in = 203, out = 77;
        float *x = malloc((size_t)n * in * 4), *w = malloc((size_t)out * in * 4), *y = malloc((size_t)n * out * 4),
              *yg = malloc((size_t)n * out * 4);
        for (int i = 0; i < n * in; i++) x[i] = uniform(-3, 3);
        for (int i = 0; i < out * in; i++) w[i] = uniform(-0.1f, 0.1f);
        void *m1, *m2;
        dmt_linear a = pack(k, DMT_LAYOUT_PACKED_I8, w, NULL, out, in, &m1);
        dmt_linear c = pack(g, DMT_LAYOUT_PACKED_I8, w, NULL, out, in, &m2);
        dmt_gemm_packed(y, out, x, in, n, &a, 1);
        dmt_gemm_packed(yg, out, x, in, n, &c, 1);
        double worst = 0;
        for (int i = 0; i < n * out; i++) worst = fmax(worst, fabs(y[i] - yg[i]) / (fabs(yg[i]) + 1e-3));
        snprintf(why, sizeof why, "%s int8 = generic int8 up to the final float rounding (worst %.1e)", k->name, worst);
        CHECK(worst <= 1e-6, why);
        free(x), free(w), free(y), free(yg), free(m1), free(m2);
    }
    CHECK(levels >= 1, "at least the generic level runs");

    /* sizes: AVX-512 F32 panels hold in x 32 floats, BF16 pairs x 32 x 2 halves */
    const dmt_kernels *k512 = &dmt_kernels_avx512bf16, *k2 = &dmt_kernels_avx2;
    CHECK(dmt_gemm_packed_bytes(k512, DMT_LAYOUT_PACKED_F32, 33, 3) == 2 * 32 * 3 * 4, "packed F32 size (avx512)");
    CHECK(dmt_gemm_packed_bytes(k2, DMT_LAYOUT_PACKED_F32, 33, 3) == 3 * 16 * 3 * 4, "packed F32 size (avx2)");
    CHECK(dmt_gemm_packed_bytes(k512, DMT_LAYOUT_PACKED_BF16, 32, 3) == 1 * 32 * 2 * 2 * 2, "packed BF16 size");
    /* int8: quads x 4 bytes a column, then 4 + 4 bytes a column (compensation, scale) */
    CHECK(dmt_gemm_packed_bytes(k2, DMT_LAYOUT_PACKED_I8, 17, 5) == 2 * 16 * 2 * 4 + 32 * 8, "packed INT8 size");
    return check_done();
}
