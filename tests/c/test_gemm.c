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
 * are skipped with a message otherwise. The amx level (at the end) is compared
 * with avx512vnni (int8: the same bits) and avx512bf16 / F32 (BF16: within F32
 * rounding / within bfloat16 rounding), and its software tile model (amx.h) with a
 * reference written here.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemm.h"
#include "model/kernels/amx.h"
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

/* Output columns gathered into a smaller matrix (dmt_linear_gather: what a
 * vocabulary shortlist scores) give the bits of those columns in the whole product:
 * every other column from the last down (any order), and one column. */
static void check_gather(const dmt_linear *lin, const float *x, int ldx, int n, const float *y_full, int ldy) {
    int m = 0, *ids = malloc((size_t)lin->out * sizeof *ids);
    for (int o = lin->out - 1; o >= 0; o -= 2) ids[m++] = o;
    for (int pass = 0; pass < 2; pass++) {
        int cols = pass == 0 ? m : 1;
        size_t bytes = dmt_linear_gather_bytes(lin, cols);
        void *buf = aligned_alloc(64, bytes);
        float *bias = malloc((size_t)cols * sizeof *bias), *y = malloc((size_t)n * cols * sizeof *y);
        dmt_linear g;
        dmt_linear_gather(&g, buf, bias, lin, cols, ids);
        dmt_gemm_packed(y, cols, x, ldx, n, &g, 1);
        int same = g.out == cols && g.layout == lin->layout && (g.bias != NULL) == (lin->bias != NULL);
        for (int i = 0; same && i < n; i++)
            for (int j = 0; same && j < cols; j++)
                same = !memcmp(&y[(size_t)i * cols + j], &y_full[(size_t)i * ldy + ids[j]], sizeof *y);
        char what[200];
        snprintf(what, sizeof what, "%s %s n=%d in=%d out=%d: %d columns gathered = those columns, bit for bit",
                 lin->kernels->name, layout_name(lin->layout), n, lin->in, lin->out, cols);
        CHECK(same, what);
        free(buf), free(bias), free(y);
    }
    /* The same columns in three parts (dmt_linear_gather_more: what a shortlist adds
     * as sentences join), the first two in a buffer only just big enough and then
     * copied whole to a bigger one, as the state grows it: the bits of one gather, and
     * its bytes. */
    if (m >= 3) {
        int p1 = m / 3 > 0 ? m / 3 : 1, p2 = (m - p1) / 2 > 0 ? (m - p1) / 2 : 1, p3 = m - p1 - p2;
        size_t small = dmt_linear_gather_bytes(lin, p1 + p2), whole = dmt_linear_gather_bytes(lin, m);
        void *buf = aligned_alloc(64, small), *big = aligned_alloc(64, whole), *one = aligned_alloc(64, whole);
        float *bias = malloc((size_t)m * sizeof *bias), *bias_one = malloc((size_t)m * sizeof *bias_one);
        float *y = malloc((size_t)n * m * sizeof *y);
        memset(big, 0x5a, whole); /* garbage where no column was written yet */
        dmt_linear g, g1;
        dmt_linear_gather(&g, buf, bias, lin, p1, ids);
        dmt_linear_gather_more(&g, buf, bias, lin, p2, ids + p1);
        memcpy(big, buf, small);
        dmt_linear_gather_more(&g, big, bias, lin, p3, ids + p1 + p2);
        dmt_linear_gather(&g1, one, bias_one, lin, m, ids);
        dmt_gemm_packed(y, m, x, ldx, n, &g, 1);
        int same = g.out == m && (g.bias != NULL) == (lin->bias != NULL);
        for (int i = 0; same && i < n; i++)
            for (int j = 0; same && j < m; j++)
                same = !memcmp(&y[(size_t)i * m + j], &y_full[(size_t)i * ldy + ids[j]], sizeof *y);
        /* the packed bytes (panels, then int8's compensations and scales) as one
         * gather's; the row layout's rows likewise */
        size_t used = lin->layout == DMT_LAYOUT_ROWS ? (size_t)m * lin->in * sizeof(float)
                                                     : dmt_gemm_packed_bytes(lin->kernels, lin->layout, m, lin->in);
        int bytes_same = !memcmp(big, one, used) && (!lin->bias || !memcmp(bias, bias_one, (size_t)m * sizeof *bias));
        char what[200];
        snprintf(what, sizeof what,
                 "%s %s n=%d in=%d out=%d: %d + %d + %d columns added = one gather of them, bits and bytes",
                 lin->kernels->name, layout_name(lin->layout), n, lin->in, lin->out, p1, p2, p3);
        CHECK(same && bytes_same, what, "products %s, bytes %s", same ? "same" : "differ",
              bytes_same ? "same" : "differ");
        free(buf), free(big), free(one), free(bias), free(bias_one), free(y);
    }
    free(ids);
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
    check_gather(&lin, x, ldx, n, y1, ldy);

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

/* ---- the amx level and its software tile model ------------------------------------
 * The model (model/kernels/amx.h) against references written here from the SDM's
 * definitions, independently of amx_model.c: TDPBUSD over random and extreme bytes
 * (0, 255 as unsigned; -128, 127 as signed) with int32 wrap-around, TDPBF16PS with
 * denormals (inputs read as zero, results flushed), infinities, NaN and the SDM's
 * order of summation, loads and stores of tiles smaller than 16 x 64 (the rest
 * zeroed, memory beyond untouched). Then the amx level's products against
 * avx512vnni's and avx512bf16's. */

static void amx_cfg(dmt_amx_config *cfg, int t, int rows, int colsb) {
    cfg->palette = 1;
    cfg->rows[t] = (uint8_t)rows;
    cfg->colsb[t] = (uint16_t)colsb;
}

/* A random byte, a quarter of them the extremes 0, 255, 127, 128 (s8: 0, -1, 127, -128). */
static uint8_t amx_byte(void) {
    static const uint8_t edge[4] = {0, 255, 127, 128};
    float u = uniform(0, 1);
    return u < 0.25f ? edge[(int)(u * 16) & 3] : (uint8_t)((int)uniform(0, 256) & 255);
}

/* Whether every byte of tile t outside rows x colsb is zero. */
static int amx_zero_outside(const dmt_amx_model *m, int t, int rows, int colsb) {
    for (int r = 0; r < DMT_AMX_ROWS; r++)
        for (int b = r < rows ? colsb : 0; b < DMT_AMX_COLSB; b++)
            if (m->tile[t][r][b]) return 0;
    return 1;
}

/* C (rows x n dwords) += A (rows x kd dwords) . B (kd rows x n dwords), u8 x s8. */
static int amx_check_dpbusd(int rows, int kd, int nd, int32_t start) {
    static dmt_amx_model m;
    dmt_amx_config cfg = {0};
    amx_cfg(&cfg, 0, rows, nd * 4), amx_cfg(&cfg, 1, rows, kd * 4), amx_cfg(&cfg, 2, kd, nd * 4);
    dmt_amx_ldtilecfg(&m, &cfg);
    uint8_t a[16][64], b[16][64];
    int32_t c[16][16], got[16][16];
    for (int r = 0; r < 16; r++)
        for (int i = 0; i < 64; i++) a[r][i] = amx_byte(), b[r][i] = amx_byte();
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) c[r][n] = start + (int32_t)uniform(-400, 400); /* |start| <= 2^31 - 500 */
    dmt_amx_tileloadd(&m, 0, c, sizeof c[0]);
    dmt_amx_tileloadd(&m, 1, a, sizeof a[0]);
    dmt_amx_tileloadd(&m, 2, b, sizeof b[0]);
    dmt_amx_tdpbusd(&m, 0, 1, 2);
    dmt_amx_tilestored(&m, 0, got, sizeof got[0]);
    int ok = amx_zero_outside(&m, 0, rows, nd * 4);
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < nd; n++) {
            int64_t s = c[r][n];
            for (int k = 0; k < kd * 4; k++) s += (int64_t)a[r][k] * (int8_t)b[k / 4][n * 4 + k % 4];
            ok &= got[r][n] == (int32_t)(uint32_t)(uint64_t)s; /* modulo 2^32 */
        }
    return ok;
}

static float amx_f(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
static uint32_t amx_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The SDM's TDPBF16PS for one output: two sums (even and odd elements of the pairs),
 * each an FP32 FMA a step, added, then added to c; denormal inputs and results are
 * zero. The reference rounds in double then to float (exact here: the operands'
 * exponents stay within 2^+-30 of each other). */
static float amx_ref_dot(float c, const uint16_t *x, const uint16_t *y, int pairs) {
    double t[2] = {0, 0};
    for (int k = 0; k < 2 * pairs; k++) {
        float a = amx_f((uint32_t)x[k] << 16), b = amx_f((uint32_t)y[k] << 16);
        if (fabsf(a) < 0x1p-126f) a = 0; /* denormal inputs (DAZ) */
        if (fabsf(b) < 0x1p-126f) b = 0;
        float r = (float)(t[k & 1] + (double)a * b);
        t[k & 1] = fabsf(r) < 0x1p-126f ? 0 : r; /* FTZ */
    }
    float s = (float)(t[0] + t[1]), d = (float)((double)c + s);
    return fabsf(d) < 0x1p-126f ? 0 : d;
}

static uint16_t amx_bf16_of(float f) { return (uint16_t)(amx_bits(f) >> 16); } /* exact for the values used */

/* TDPBF16PS on random bfloat16 (with `special` ones placed by the caller), rows x
 * pairs x n: every output against amx_ref_dot, NaN against NaN. */
static int amx_check_dpbf16ps(int rows, int pairs, int nd, void (*special)(uint16_t a[16][32], uint16_t b[16][32],
                                                                           float c[16][16])) {
    static dmt_amx_model m;
    dmt_amx_config cfg = {0};
    amx_cfg(&cfg, 3, rows, nd * 4), amx_cfg(&cfg, 5, rows, pairs * 4), amx_cfg(&cfg, 7, pairs, nd * 4);
    dmt_amx_ldtilecfg(&m, &cfg);
    uint16_t a[16][32], b[16][32];
    float c[16][16], got[16][16];
    for (int r = 0; r < 16; r++)
        for (int i = 0; i < 32; i++)
            a[r][i] = amx_bf16_of(bf16_round(uniform(-4, 4))), b[r][i] = amx_bf16_of(bf16_round(uniform(-4, 4)));
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) c[r][n] = uniform(-10, 10);
    if (special) special(a, b, c);
    dmt_amx_tileloadd(&m, 3, c, sizeof c[0]);
    dmt_amx_tileloadd(&m, 5, a, sizeof a[0]);
    dmt_amx_tileloadd(&m, 7, b, sizeof b[0]);
    dmt_amx_tdpbf16ps(&m, 3, 5, 7);
    dmt_amx_tilestored(&m, 3, got, sizeof got[0]);
    int ok = amx_zero_outside(&m, 3, rows, nd * 4);
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < nd; n++) {
            uint16_t col[32];
            for (int k = 0; k < pairs; k++) col[2 * k] = b[k][2 * n], col[2 * k + 1] = b[k][2 * n + 1];
            float want = amx_ref_dot(c[r][n], a[r], col, pairs);
            ok &= isnan(want) ? isnan(got[r][n]) : amx_bits(want) == amx_bits(got[r][n]);
        }
    return ok;
}

/* Row 0: denormal activations against huge weights (a product of 2^-130 * 2^100
 * were there no DAZ); row 1: products of 2^-130 (flushed); row 2: +inf; row 3:
 * inf * 0 (NaN); row 4: NaN; row 5 (column 2): a sum whose order matters (SDM:
 * 2^24 - 2^24 in the even sum, 1 + 1 in the odd one: +2; one product at a time
 * gives +1); row 6: a result of 2^-127 (flushed). The rest stays random. */
static void amx_specials(uint16_t a[16][32], uint16_t b[16][32], float c[16][16]) {
    for (int k = 0; k < 32; k++) {
        b[k / 2][k % 2] = amx_bf16_of(0x1p100f);       /* column 0 */
        b[k / 2][2 + k % 2] = amx_bf16_of(k < 4 ? 0x1p-60f : 0); /* column 1 */
        a[0][k] = (uint16_t)(0x0001 + k);              /* denormals */
        a[1][k] = amx_bf16_of(0x1p-70f);
        a[2][k] = k == 3 ? 0x7f80 : 0;                 /* +inf */
        a[3][k] = k == 5 ? 0x7f80 : 0;                 /* inf * 0 in column 1 (column 0: inf) */
        a[4][k] = k == 7 ? 0x7fc1 : 0;                 /* NaN */
        a[5][k] = 0, a[6][k] = 0;
    }
    c[1][1] = 0;
    /* row 5 against column 2: pairs (2^12, 1) . (2^12, 1) and (2^12, 1) . (-2^12, 1) */
    a[5][0] = amx_bf16_of(0x1p12f), a[5][1] = amx_bf16_of(1), a[5][2] = amx_bf16_of(0x1p12f), a[5][3] = amx_bf16_of(1);
    b[0][4] = amx_bf16_of(0x1p12f), b[0][5] = amx_bf16_of(1), b[1][4] = amx_bf16_of(-0x1p12f), b[1][5] = amx_bf16_of(1);
    c[5][2] = 0;
    c[6][0] = 0x1.8p-126f; /* + (-2^-126): row 6's products into column 0 */
    a[6][0] = amx_bf16_of(-0x1p-126f), b[0][0] = amx_bf16_of(1);
}

static void check_amx_model(void) {
    /* TDPBUSD */
    int ok = 1;
    for (int t = 0; t < 20; t++) ok &= amx_check_dpbusd(16, 16, 16, 0);
    CHECK(ok, "AMX model: tdpbusd 16 x 64 bytes, random and extreme bytes (0/255 unsigned, -128/127 signed)");
    ok = 1;
    for (int t = 0; t < 20; t++) ok &= amx_check_dpbusd(1 + t % 16, 1 + (t * 7) % 16, 1 + (t * 5) % 16, 0);
    CHECK(ok, "AMX model: tdpbusd on smaller tiles (rows, K and N of 1-16), the rest of C zero");
    CHECK(amx_check_dpbusd(16, 16, 16, INT32_MAX - 500) && amx_check_dpbusd(16, 16, 16, INT32_MIN + 500),
          "AMX model: tdpbusd wraps around modulo 2^32");
    /* TDPBF16PS */
    ok = 1;
    for (int t = 0; t < 20; t++) ok &= amx_check_dpbf16ps(16, 16, 16, NULL);
    for (int t = 0; t < 20; t++) ok &= amx_check_dpbf16ps(1 + t % 16, 1 + (t * 3) % 16, 1 + (t * 11) % 16, NULL);
    CHECK(ok, "AMX model: tdpbf16ps equals the SDM's summation (full and smaller tiles)");
    CHECK(amx_check_dpbf16ps(16, 16, 16, amx_specials), "AMX model: tdpbf16ps denormals (DAZ, FTZ), inf, NaN, order");
    static dmt_amx_model m;
    dmt_amx_config cfg = {0};
    amx_cfg(&cfg, 0, 16, 64), amx_cfg(&cfg, 1, 16, 64), amx_cfg(&cfg, 2, 16, 64);
    dmt_amx_ldtilecfg(&m, &cfg);
    uint16_t a[16][32] = {{0}}, b[16][32] = {{0}};
    float c[16][16] = {{0}}, got[16][16];
    amx_specials(a, b, c);
    dmt_amx_tileloadd(&m, 0, c, 64), dmt_amx_tileloadd(&m, 1, a, 64), dmt_amx_tileloadd(&m, 2, b, 64);
    dmt_amx_tdpbf16ps(&m, 0, 1, 2);
    dmt_amx_tilestored(&m, 0, got, 64);
    CHECK(got[0][0] == 0 && got[1][1] == 0 && isinf(got[2][0]) && got[2][0] > 0 && isnan(got[3][1]) &&
              isinf(got[3][0]) && isnan(got[4][0]) && got[5][2] == 2 && got[6][0] == 0 && !signbit(got[6][0]),
          "AMX model: tdpbf16ps special values as the SDM defines them", "%g %g %g %g %g %g %g", got[0][0], got[1][1],
          got[2][0], got[3][1], got[4][0], got[5][2], got[6][0]);
    /* loads and stores of smaller tiles */
    uint8_t mem[40 * 16], out[64 * 20];
    for (size_t i = 0; i < sizeof mem; i++) mem[i] = (uint8_t)(i * 7 + 3);
    memset(&cfg, 0, sizeof cfg);
    amx_cfg(&cfg, 4, 3, 10), amx_cfg(&cfg, 6, 16, 64);
    dmt_amx_ldtilecfg(&m, &cfg);
    memset(m.tile[4], 0xee, sizeof m.tile[4]); /* what the load must zero */
    dmt_amx_tileloadd(&m, 4, mem, 40);
    ok = amx_zero_outside(&m, 4, 3, 10);
    for (int r = 0; r < 3; r++) ok &= !memcmp(m.tile[4][r], mem + 40 * r, 10);
    memset(out, 0xaa, sizeof out);
    dmt_amx_tilestored(&m, 4, out, 64);
    for (int i = 0; i < (int)sizeof out; i++) ok &= out[i] == (i / 64 < 3 && i % 64 < 10 ? mem[i / 64 * 40 + i % 64] : 0xaa);
    CHECK(ok, "AMX model: a 3 x 10-byte tile loads its bytes, zeroes the rest, stores only its own");
    dmt_amx_tileloadd(&m, 6, mem, 0);
    ok = 1;
    for (int r = 0; r < 16; r++) ok &= !memcmp(m.tile[6][r], mem, 64);
    dmt_amx_tilezero(&m, 6);
    CHECK(ok && amx_zero_outside(&m, 6, 0, 0), "AMX model: stride 0 repeats a row; tilezero clears the tile");
    dmt_amx_ldtilecfg(&m, &cfg);
    int zero = amx_zero_outside(&m, 4, 0, 0);
    dmt_amx_tilerelease(&m);
    CHECK(zero && !m.configured, "AMX model: ldtilecfg zeroes the tiles; tilerelease returns to the init state");
}

static long amx_bf16_same, amx_bf16_all; /* outputs equal to avx512bf16's, of all compared */

/* The level for isa: native, else emulated; NULL when neither. */
static const dmt_kernels *amx_level(dmt_isa isa) {
    const dmt_kernels *k = dmt_kernels_for(isa);
    return k ? k : dmt_kernels_emulated(isa);
}

/* amx against avx512vnni (int8: every output bit) and avx512bf16 and F32 (BF16:
 * within F32 rounding of the same rounded operands, within bfloat16 rounding of
 * F32) on one shape; y has one padding column that must stay PAD. Returns 0 with
 * the first difference in why. */
static int amx_compare(const dmt_kernels *amx, const dmt_kernels *ref, const dmt_kernels *f32, dmt_weight_layout layout,
                       int n, int in, int out, int threads, char *why, size_t len) {
    int ldy = out + 1, bf16 = layout == DMT_LAYOUT_PACKED_BF16, ok = 1;
    float *x = malloc((size_t)n * in * 4), *w = malloc((size_t)out * in * 4), *b = malloc((size_t)out * 4);
    float *ya = malloc((size_t)n * ldy * 4), *yr = malloc((size_t)n * ldy * 4), *yf = malloc((size_t)n * ldy * 4);
    for (size_t i = 0; i < (size_t)n * in; i++) x[i] = operand(i / in, i % in);
    for (size_t i = 0; i < (size_t)out * in; i++) w[i] = operand(i / in, i % in);
    for (int i = 0; i < out; i++) b[i] = (out & 1) ? 0 : uniform(-1, 1);
    void *ma, *mr, *mf;
    dmt_linear la = pack(amx, layout, w, b, out, in, &ma), lr = pack(ref, layout, w, b, out, in, &mr);
    dmt_linear lf = pack(f32, DMT_LAYOUT_PACKED_F32, w, b, out, in, &mf);
    for (size_t i = 0; i < (size_t)n * ldy; i++) ya[i] = yr[i] = yf[i] = PAD;
    dmt_gemm_packed(ya, ldy, x, in, n, &la, threads);
    dmt_gemm_packed(yr, ldy, x, in, n, &lr, 1);
    if (!bf16) {
        ok = !memcmp(ya, yr, (size_t)n * ldy * 4);
        for (size_t i = 0; !ok && i < (size_t)n * ldy; i++)
            if (amx_bits(ya[i]) != amx_bits(yr[i])) {
                snprintf(why, len, "n=%d in=%d out=%d threads=%d: y[%zu][%zu] %.9g, %s %.9g", n, in, out, threads,
                         i / ldy, i % ldy, ya[i], ref->name, yr[i]);
                break;
            }
    } else {
        dmt_gemm_packed(yf, ldy, x, in, n, &lf, 1);
        for (int i = 0; ok && i < n; i++)
            for (int o = 0; ok && o <= out; o++) {
                size_t at = (size_t)i * ldy + o;
                if (o == out) { ok = ya[at] == PAD; continue; }
                /* sums of in + 1 terms in F32: each result is within (in + 1) 2^-24 of
                 * the sum of magnitudes of the exact one; bfloat16 operands (8
                 * significant bits, each within 2^-8): each product within 2^-7 + 2^-16 */
                double mag = fabs(b[o]), magr = fabs(b[o]);
                for (int kk = 0; kk < in; kk++) {
                    mag += fabs((double)x[(size_t)i * in + kk] * w[(size_t)o * in + kk]);
                    magr += fabs((double)bf16_round(x[(size_t)i * in + kk]) * bf16_round(w[(size_t)o * in + kk]));
                }
                double eps = (in + 1) * 0x1p-24;
                ok = fabs(ya[at] - yr[at]) <= 2 * eps * magr && fabs(ya[at] - yf[at]) <= (0x1p-7 + 0x1p-16 + 2 * eps) * mag;
                amx_bf16_same += ya[at] == yr[at], amx_bf16_all++;
                if (!ok)
                    snprintf(why, len, "n=%d in=%d out=%d: y[%d][%d] %.9g, %s %.9g, F32 %.9g (magnitude %.3g)", n, in,
                             out, i, o, ya[at], ref->name, yr[at], yf[at], mag);
            }
    }
    free(x), free(w), free(b), free(ya), free(yr), free(yf), free(ma), free(mr), free(mf);
    return ok;
}

static void check_amx_levels(void) {
    const dmt_kernels *amx = amx_level(DMT_ISA_AMX), *vnni = amx_level(DMT_ISA_AVX512VNNI);
    const dmt_kernels *bf = amx_level(DMT_ISA_AVX512BF16);
    if (!amx || !vnni || !bf) {
        SKIP("amx against avx512vnni / avx512bf16: a level is neither native nor emulated here");
        return;
    }
    static const int rows[] = {1, 2, 15, 16, 17, 31, 128}, ins[] = {4, 60, 64, 65, 256, 1000},
                     outs[] = {1, 16, 17, 100, 1024};
    char what[200], why[200];
    for (int hostile = 0; hostile < 2; hostile++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
            int ok = 1;
            why[0] = 0;
            extreme_operands = hostile;
            for (size_t i = 0; ok && i < sizeof ins / sizeof *ins; i++)
                for (size_t o = 0; ok && o < sizeof outs / sizeof *outs; o++)
                    ok = amx_compare(amx, vnni, bf, DMT_LAYOUT_PACKED_I8, rows[r], ins[i], outs[o],
                                     1 + (int)((i + o) & 1), why, sizeof why);
            extreme_operands = 0;
            snprintf(what, sizeof what, "%s int8 = %s int8 bit for bit, %d rows, in 4-1000, out 1-1024%s", amx->name,
                     vnni->name, rows[r], hostile ? ", operands +-1" : "");
            CHECK(ok, what, "%s", why);
        }
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        int ok = 1;
        why[0] = 0;
        for (size_t i = 0; ok && i < sizeof ins / sizeof *ins; i++)
            for (size_t o = 0; ok && o < sizeof outs / sizeof *outs; o++)
                if (rows[r] * ins[i] * outs[o] <= 128 * 256 * 1024) /* the model's tdpbf16ps is slow */
                    ok = amx_compare(amx, bf, bf, DMT_LAYOUT_PACKED_BF16, rows[r], ins[i], outs[o],
                                     1 + (int)((i + o) & 1), why, sizeof why);
        snprintf(what, sizeof what,
                 "%s bf16 within F32 rounding of %s bf16 and bf16 rounding of F32, %d rows, in 4-1000, out 1-1024",
                 amx->name, bf->name, rows[r]);
        CHECK(ok, what, "%s", why);
    }
    printf("# amx bf16: %ld of %ld outputs equal to %s's\n", amx_bf16_same, amx_bf16_all, bf->name);
}

/* A level's shared-input int8 product (gemm_i8_shared: x quantised once for several
 * weights) against one dmt_gemm_packed call a weight: the same bits, every output
 * where it belongs (strided ys with a padding column that stays PAD), for row counts
 * within one quantisation chunk and across several, 1-3 threads; and through
 * dmt_gemm_packed_shared, which falls back to separate calls for mixed inputs. */
static void check_shared(const dmt_kernels *k) {
    static const int rows[] = {1, 4, 17, 128, 300, 1100}, ins[] = {37, 256, 1000};
    int ok = 1;
    char why[200] = "";
    for (size_t r = 0; ok && r < sizeof rows / sizeof *rows; r++)
        for (size_t i = 0; ok && i < sizeof ins / sizeof *ins; i++) {
            int n = rows[r], in = ins[i], outs[3] = {33, 64, 5}, threads = 1 + (int)((r + i) % 3);
            float *x = malloc((size_t)n * in * 4), *w[3], *b[3], *ys[3], *yr[3];
            void *mem[3];
            dmt_linear lin[3];
            int ldy[3];
            for (size_t t = 0; t < (size_t)n * in; t++) x[t] = uniform(-2, 2);
            for (int c = 0; c < 3; c++) {
                ldy[c] = outs[c] + 1;
                w[c] = malloc((size_t)outs[c] * in * 4), b[c] = malloc((size_t)outs[c] * 4);
                ys[c] = malloc((size_t)n * ldy[c] * 4), yr[c] = malloc((size_t)n * ldy[c] * 4);
                for (size_t t = 0; t < (size_t)outs[c] * in; t++) w[c][t] = uniform(-0.2f, 0.2f);
                for (int t = 0; t < outs[c]; t++) b[c][t] = uniform(-1, 1);
                for (size_t t = 0; t < (size_t)n * ldy[c]; t++) ys[c][t] = yr[c][t] = PAD;
                lin[c] = pack(k, DMT_LAYOUT_PACKED_I8, w[c], b[c], outs[c], in, &mem[c]);
                dmt_gemm_packed(yr[c], ldy[c], x, in, n, &lin[c], 1);
            }
            const dmt_linear *const lins[3] = {&lin[0], &lin[1], &lin[2]};
            k->gemm_i8_shared(ys, ldy, x, in, n, lins, 3, threads);
            for (int c = 0; ok && c < 3; c++)
                if (memcmp(ys[c], yr[c], (size_t)n * ldy[c] * 4))
                    ok = 0, snprintf(why, sizeof why, "n=%d in=%d output %d differs (threads %d)", n, in, c, threads);
            for (int c = 0; c < 3; c++) free(w[c]), free(b[c]), free(ys[c]), free(yr[c]), free(mem[c]);
            free(x);
        }
    char what[160];
    snprintf(what, sizeof what, "%s int8: one quantisation for three weights = three products, bit for bit", k->name);
    CHECK(ok, what, "%s", why);
    /* different inputs: dmt_gemm_packed_shared must not share a quantisation */
    int n = 6;
    float *x = malloc((size_t)n * 64 * 4), *w1 = malloc(20 * 64 * 4), *w2 = malloc(20 * 32 * 4);
    float y1[6 * 20], y2[6 * 20], r1[6 * 20], r2[6 * 20];
    for (int t = 0; t < n * 64; t++) x[t] = uniform(-1, 1);
    for (int t = 0; t < 20 * 64; t++) w1[t] = uniform(-1, 1);
    for (int t = 0; t < 20 * 32; t++) w2[t] = uniform(-1, 1);
    void *m1, *m2;
    dmt_linear l1 = pack(k, DMT_LAYOUT_PACKED_I8, w1, NULL, 20, 64, &m1), l2 = pack(k, DMT_LAYOUT_PACKED_I8, w2, NULL, 20, 32, &m2);
    float *const ys[2] = {y1, y2};
    const int ldys[2] = {20, 20};
    const dmt_linear *const lins[2] = {&l1, &l2};
    dmt_gemm_packed_shared(ys, ldys, x, 64, n, lins, 2, 1); /* l2 reads the first 32 columns of each row */
    dmt_gemm_packed(r1, 20, x, 64, n, &l1, 1);
    dmt_gemm_packed(r2, 20, x, 64, n, &l2, 1);
    snprintf(what, sizeof what, "%s: products of different input widths are not shared", k->name);
    CHECK(!memcmp(y1, r1, sizeof y1) && !memcmp(y2, r2, sizeof y2), what);
    free(x), free(w1), free(w2), free(m1), free(m2);
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
        printf("# level %s%s\n", k->name,
               !k->emulated ? "" : isa == DMT_ISA_AMX ? " (emulated on the software tile model and SIMDe: this CPU lacks it)"
                                                      : " (emulated on SIMDe: this CPU lacks it)");
        levels++;
        CHECK(k->isa == (dmt_isa)isa && !strcmp(k->name, dmt_isa_name((dmt_isa)isa)), "level table names itself");
        if (k->panel_f32) check_level(k, DMT_LAYOUT_PACKED_F32);
        if (k->gemm_bf16) check_level(k, DMT_LAYOUT_PACKED_BF16);
        check_level(k, DMT_LAYOUT_PACKED_I8);
        if (k->gemm_i8_shared) check_shared(k);
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
    check_amx_model();
    check_amx_levels();

    /* sizes: AVX-512 F32 panels hold in x 32 floats, BF16 pairs x 32 x 2 halves */
    const dmt_kernels *k512 = &dmt_kernels_avx512bf16, *k2 = &dmt_kernels_avx2;
    CHECK(dmt_gemm_packed_bytes(k512, DMT_LAYOUT_PACKED_F32, 33, 3) == 2 * 32 * 3 * 4, "packed F32 size (avx512)");
    CHECK(dmt_gemm_packed_bytes(k2, DMT_LAYOUT_PACKED_F32, 33, 3) == 3 * 16 * 3 * 4, "packed F32 size (avx2)");
    CHECK(dmt_gemm_packed_bytes(k512, DMT_LAYOUT_PACKED_BF16, 32, 3) == 1 * 32 * 2 * 2 * 2, "packed BF16 size");
    /* int8: quads x 4 bytes a column, then 4 + 4 bytes a column (compensation, scale) */
    CHECK(dmt_gemm_packed_bytes(k2, DMT_LAYOUT_PACKED_I8, 17, 5) == 2 * 16 * 2 * 4 + 32 * 8, "packed INT8 size");
    return check_done();
}
