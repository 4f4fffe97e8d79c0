/* test_levels_agree.c — every kernel level with FMA (avx2 and up) computes the same
 * bits, so replicas on different x86 CPUs translate alike (model/kernels/portable.inc:
 * the one summation order).
 *
 * Each level's table (native, and emulated where the test build has SIMDe: the tables
 * a CPU without the level would run) runs the same inputs through attention (one row,
 * gathered slots, rows over a transposed K), softmax, log-softmax, LayerNorm and the F32
 * and int8 products; every output must equal avx2's, bit for bit. Sizes cover whole
 * 16-lane blocks, remainders below a vector and between vector widths, and head sizes
 * that are not a multiple of 16. The transposed-K kernel must also equal row-by-row
 * calls of the same level, and its fused chains written out in C. The generic level
 * (no FMA) is only checked to stay close. Levels neither native nor emulated here are
 * left out with a message.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gemm.h"
#include "model/kernels/kernels.h"
#include "tests/c/check.h"
#include "tests/c/random.h"

static const dmt_kernels *levels[2 * DMT_ISA_COUNT];
static int n_levels;

/* The first index where a and b differ bit-wise, or -1. */
static long first_difference(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a)) return (long)i;
    return -1;
}

/* run(level, out) fills out[n] for one level; every level must match the first. */
typedef void (*run_fn)(const dmt_kernels *k, float *out, const void *ctx);

static void check_same(const char *what, size_t n, run_fn run, const void *ctx) {
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    run(levels[0], want, ctx);
    for (int l = 1; l < n_levels; l++) {
        for (size_t i = 0; i < n; i++) got[i] = -12345.0f;
        run(levels[l], got, ctx);
        long at = first_difference(want, got, n);
        char label[240];
        snprintf(label, sizeof label, "%s: %s%s = %s, bit for bit", what, levels[l]->name,
                 levels[l]->emulated ? " (emulated)" : "", levels[0]->name);
        CHECK(at < 0, label, "first difference at %ld: %.9g vs %.9g", at, at < 0 ? 0.0 : (double)got[at],
              at < 0 ? 0.0 : (double)want[at]);
    }
    free(want), free(got);
}

/* ---- attention ---------------------------------------------------------------------- */

typedef struct {
    int nq, nk, hd, ld;
    const float *q, *k, *v;
    const int *slots;
} attn_case;

static void run_attend_row(const dmt_kernels *k, float *out, const void *ctx) {
    const attn_case *c = ctx;
    float *p = malloc((size_t)c->nk * sizeof *p);
    for (int i = 0; i < c->nq; i++) {
        k->attend_row(out + (size_t)i * c->hd, c->q + (size_t)i * c->ld, c->k, c->v, (size_t)c->ld, c->slots, c->nk,
                      c->hd, p);
        memcpy(out + (size_t)c->nq * c->hd + (size_t)i * c->nk, p, (size_t)c->nk * sizeof *p); /* the weights too */
    }
    free(p);
}

static void check_attention(int nq, int nk, int hd, int with_slots) {
    int ld = hd + 5, pool = nk * 2 + 3; /* rows wider than a head, as heads sit side by side */
    float *q = random_floats((size_t)nq * ld, -2, 2), *k = random_floats((size_t)pool * ld, -1, 1);
    float *v = random_floats((size_t)pool * ld, -1, 1);
    int *slots = malloc((size_t)nk * sizeof *slots);
    for (int j = 0; j < nk; j++) slots[j] = (j * 7 + 3) % pool;
    attn_case c = {nq, nk, hd, ld, q, k, v, with_slots ? slots : NULL};
    size_t n = (size_t)nq * hd + (size_t)nq * nk;
    char what[160];
    snprintf(what, sizeof what, "attend_row nq=%d nk=%d head_dim=%d%s", nq, nk, hd, with_slots ? " slots" : "");
    check_same(what, n, run_attend_row, &c);
    free(q), free(k), free(v), free(slots);
}

/* The encoder's kernel over a transposed K: every score one fused chain over the
 * head's columns in order, so it is checked against that chain written out (fmaf),
 * not only across levels. */
typedef struct {
    int nq, nk, hd, ld;
    size_t ldp, ldw; /* panel stride; a row of weights (nk rounded up to 16) */
    const float *q, *kt, *v;
} kt_case;

/* key j's column t in the panels (kernels.h attend_kt) */
static float kt_at(const kt_case *c, int j, int t) { return c->kt[(size_t)(j / 16) * c->ldp + t * 16 + j % 16]; }

/* out: nq * hd outputs, then nq * nk weights */
static void run_attend_kt(const dmt_kernels *k, float *out, const void *ctx) {
    const kt_case *c = ctx;
    float *p = malloc((size_t)c->nq * c->ldw * sizeof *p);
    k->attend_kt(out, (size_t)c->hd, c->q, (size_t)c->ld, c->nq, c->kt, c->ldp, c->v, (size_t)c->ld, c->nk, c->hd, p);
    for (int i = 0; i < c->nq; i++)
        memcpy(out + (size_t)c->nq * c->hd + (size_t)i * c->nk, p + (size_t)i * c->ldw, (size_t)c->nk * sizeof *p);
    free(p);
}

static void run_attend_kt_row_by_row(const dmt_kernels *k, float *out, const void *ctx) {
    kt_case one = *(const kt_case *)ctx;
    float *p = malloc(one.ldw * sizeof *p);
    for (int i = 0; i < one.nq; i++) {
        k->attend_kt(out + (size_t)i * one.hd, (size_t)one.hd, one.q + (size_t)i * one.ld, (size_t)one.ld, 1, one.kt,
                     one.ldp, one.v, (size_t)one.ld, one.nk, one.hd, p);
        memcpy(out + (size_t)one.nq * one.hd + (size_t)i * one.nk, p, (size_t)one.nk * sizeof *p);
    }
    free(p);
}

/* Whether this build's kernels fuse a * b + c: they ask GCC to contract it
 * (portable.inc, ATTEND_CONTRACT), which it does from -O2 up, not at the sanitizer
 * builds' -O1. The probe is compiled the same way: with a and b = 1 + 2^-12 and c = -1,
 * one rounding gives 2^-11 + 2^-24, two give 2^-11. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx2,fma"), optimize("fp-contract=fast")))
#endif
static float multiply_add_probe(float a, float b, float c) {
    return a * b + c;
}

static int build_fuses;

static float multiply_add(float a, float b, float c) { return build_fuses ? fmaf(a, b, c) : a * b + c; }

/* The definition: s = q[t] * k[j][t] + s over t in order (one rounding where the build
 * fuses), the level's softmax, then o[t] = p[j] * v[j][t] + o[t] over j in order. */
static void run_attend_kt_reference(const dmt_kernels *k, float *out, const void *ctx) {
    const kt_case *c = ctx;
    float *w = out + (size_t)c->nq * c->hd;
    for (int i = 0; i < c->nq; i++) {
        float *p = w + (size_t)i * c->nk;
        for (int j = 0; j < c->nk; j++) {
            float s = 0;
            for (int t = 0; t < c->hd; t++) s = multiply_add(c->q[(size_t)i * c->ld + t], kt_at(c, j, t), s);
            p[j] = s;
        }
        k->softmax(p, 1, c->nk);
        for (int t = 0; t < c->hd; t++) {
            float o = 0;
            for (int j = 0; j < c->nk; j++) o = multiply_add(p[j], c->v[(size_t)j * c->ld + t], o);
            out[(size_t)i * c->hd + t] = o;
        }
    }
}

static void check_attention_kt(int nq, int nk, int hd) {
    int ld = hd + 3, panels = (nk + 15) / 16;
    size_t ldp = (size_t)(hd + 5) * 16; /* panels wider than a head, as heads sit in them side by side */
    float *q = random_floats((size_t)nq * ld, -2, 2), *v = random_floats((size_t)nk * ld, -1, 1);
    float *kt = random_floats((size_t)panels * ldp, -1, 1);
    for (int t = 0; t < hd; t++) /* past nk: read by whole vectors, never used */
        for (int j = nk; j < panels * 16; j++) kt[(size_t)(j / 16) * ldp + t * 16 + j % 16] = NAN;
    kt_case c = {nq, nk, hd, ld, ldp, (size_t)panels * 16, q, kt, v};
    size_t n = (size_t)nq * hd + (size_t)nq * nk;
    char what[160];
    snprintf(what, sizeof what, "attend_kt nq=%d nk=%d head_dim=%d", nq, nk, hd);
    check_same(what, n, run_attend_kt, &c);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int l = 0; l < n_levels; l++) {
        run_attend_kt(levels[l], a, &c);
        run_attend_kt_row_by_row(levels[l], b, &c);
        long at = first_difference(a, b, n);
        snprintf(what, sizeof what, "%s%s attend_kt nq=%d nk=%d head_dim=%d = a row at a time", levels[l]->name,
                 levels[l]->emulated ? " (emulated)" : "", nq, nk, hd);
        CHECK(at < 0, what, "first difference at %ld", at);
        run_attend_kt_reference(levels[l], b, &c);
        at = first_difference(a, b, n);
        snprintf(what, sizeof what, "%s%s attend_kt nq=%d nk=%d head_dim=%d = its chains written out",
                 levels[l]->name, levels[l]->emulated ? " (emulated)" : "", nq, nk, hd);
        CHECK(at < 0, what, "first difference at %ld: %.9g vs %.9g", at, at < 0 ? 0.0 : (double)a[at],
              at < 0 ? 0.0 : (double)b[at]);
    }
    free(a), free(b), free(q), free(v), free(kt);
}

/* ---- rows: softmax, log-softmax, LayerNorm ------------------------------------------ */

typedef struct {
    int n, len;
    const float *x, *gamma, *beta;
} rows_case;

static void run_softmax(const dmt_kernels *k, float *out, const void *ctx) {
    const rows_case *c = ctx;
    memcpy(out, c->x, (size_t)c->n * c->len * sizeof *out);
    k->softmax(out, c->n, c->len);
}

static void run_log_softmax(const dmt_kernels *k, float *out, const void *ctx) {
    const rows_case *c = ctx;
    memcpy(out, c->x, (size_t)c->n * c->len * sizeof *out);
    k->log_softmax(out, c->n, c->len);
}

static void run_norm(const dmt_kernels *k, float *out, const void *ctx) {
    const rows_case *c = ctx;
    memcpy(out, c->x, (size_t)c->n * c->len * sizeof *out);
    for (int i = 0; i < c->n; i++) k->norm_row(out + (size_t)i * c->len, c->len, c->gamma, c->beta, 1e-5f);
}

static void check_rows(int len) {
    int n = 3;
    float *x = random_floats((size_t)n * len, -8, 8), *gamma = random_floats((size_t)len, 0.5f, 1.5f);
    float *beta = random_floats((size_t)len, -0.5f, 0.5f);
    for (int j = 0; j < len; j += 3) x[len + j] += 40.0f; /* row 1: a wide spread (underflowing terms) */
    rows_case c = {n, len, x, gamma, beta};
    char what[120];
    snprintf(what, sizeof what, "softmax len=%d", len);
    check_same(what, (size_t)n * len, run_softmax, &c);
    snprintf(what, sizeof what, "log_softmax len=%d", len);
    check_same(what, (size_t)n * len, run_log_softmax, &c);
    snprintf(what, sizeof what, "norm_row d=%d", len);
    check_same(what, (size_t)n * len, run_norm, &c);
    free(x), free(gamma), free(beta);
}

/* ---- products ------------------------------------------------------------------------ */

typedef struct {
    int n, in, out;
    dmt_weight_layout layout;
    const float *x, *w, *b;
} product_case;

static void run_product(const dmt_kernels *k, float *y, const void *ctx) {
    const product_case *c = ctx;
    size_t bytes = dmt_gemm_packed_bytes(k, c->layout, c->out, c->in);
    void *mem = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    memset(mem, 0, bytes);
    for (int j0 = 0; j0 < c->out; j0 += 32)
        dmt_gemm_pack_rows(mem, k, c->layout, c->out, c->in, j0, c->out - j0 < 32 ? c->out - j0 : 32,
                           c->w + (size_t)j0 * c->in);
    dmt_linear lin = {.packed = mem, .bias = c->b, .out = c->out, .in = c->in, .layout = c->layout, .kernels = k};
    dmt_gemm_packed(y, c->out, c->x, c->in, c->n, &lin, 1);
    free(mem);
}

static void check_product(dmt_weight_layout layout, int n, int in, int out) {
    float *x = random_floats((size_t)n * in, -1, 1), *w = random_floats((size_t)out * in, -1, 1);
    float *b = random_floats((size_t)out, -1, 1);
    product_case c = {n, in, out, layout, x, w, b};
    char what[120];
    snprintf(what, sizeof what, "%s product n=%d in=%d out=%d", layout == DMT_LAYOUT_PACKED_I8 ? "int8" : "f32", n,
             in, out);
    check_same(what, (size_t)n * out, run_product, &c);
    free(x), free(w), free(b);
}

int main(void) {
    for (int isa = DMT_ISA_AVX2; isa < DMT_ISA_COUNT; isa++) {
        const dmt_kernels *k = dmt_kernels_for((dmt_isa)isa);
        if (!k) k = dmt_kernels_emulated((dmt_isa)isa);
        if (k) levels[n_levels++] = k;
        else
            printf("# %s: not run (this CPU lacks it; its emulation needs libsimde-dev and an AVX2 CPU)\n",
                   dmt_isa_name((dmt_isa)isa));
    }
    /* the emulated tables too where the CPU has the level natively (the same source
     * built for AVX2, with 16-lane vectors and the software tiles): a CPU that lacks
     * the level runs them, so they must agree as well */
    const dmt_kernels *emulated[] = {&dmt_kernels_avxvnni_emulated, &dmt_kernels_avx512_emulated,
                                     &dmt_kernels_avx512vnni_emulated, &dmt_kernels_avx512bf16_emulated,
                                     &dmt_kernels_amx_emulated};
    for (size_t e = 0; e < sizeof emulated / sizeof *emulated && n_levels > 0 && levels[0]->isa == DMT_ISA_AVX2; e++)
        if (emulated[e] && dmt_kernels_for(emulated[e]->isa)) levels[n_levels++] = emulated[e];
    if (n_levels < 2 || levels[0]->isa != DMT_ISA_AVX2) {
        SKIP("fewer than two levels with FMA run here (native or emulated): nothing to compare");
        return check_done();
    }
    volatile float one_plus = 1.0f + 0x1p-12f, minus_one = -1.0f; /* not folded at compile time */
    build_fuses = multiply_add_probe(one_plus, one_plus, minus_one) != 0x1p-11f;
    printf("# this build fuses a * b + c in the kernels: %s\n", build_fuses ? "yes" : "no (unoptimised)");
    static const int nks[] = {1, 3, 4, 5, 8, 15, 16, 17, 31, 33, 130};
    static const int hds[] = {64, 8, 24, 40, 96};
    for (size_t a = 0; a < sizeof nks / sizeof *nks; a++)
        for (size_t b = 0; b < sizeof hds / sizeof *hds; b++) {
            if (hds[b] != 64 && nks[a] != 17 && nks[a] != 130) continue; /* odd head sizes: a few key counts */
            check_attention(a % 2 ? 5 : 9, nks[a], hds[b], 0);
        }
    check_attention(1, 33, 64, 1);
    check_attention(2, 130, 40, 1);
    /* rows: every count below a block (6 under AVX2, 8 under AVX-512), a block, and
     * blocks with every rest; keys: within one vector, whole blocks of 2, 3 or 4
     * vectors with every rest of 1 to 3, a long source; head sizes with a tail */
    static const int kt_shapes[][3] = {{1, 1, 64},   {2, 56, 64},  {3, 5, 64},  {4, 8, 64},    {5, 30, 96},
                                       {6, 130, 64}, {7, 100, 64}, {8, 17, 64}, {9, 24, 64},   {11, 7, 24},
                                       {13, 33, 64}, {17, 49, 40}, {1, 60, 64}, {20, 41, 64}, {120, 120, 64}};
    for (size_t s = 0; s < sizeof kt_shapes / sizeof *kt_shapes; s++)
        check_attention_kt(kt_shapes[s][0], kt_shapes[s][1], kt_shapes[s][2]);
    static const int lens[] = {1, 2, 7, 15, 16, 17, 31, 100, 256, 1000, 16000};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) check_rows(lens[i]);
    check_product(DMT_LAYOUT_PACKED_F32, 13, 256, 100);
    check_product(DMT_LAYOUT_PACKED_F32, 3, 37, 33);
    check_product(DMT_LAYOUT_PACKED_I8, 13, 256, 100);
    check_product(DMT_LAYOUT_PACKED_I8, 3, 37, 33);

    /* the generic level has no FMA: its fused steps round twice, so close, not equal */
    const dmt_kernels *g = dmt_kernels_for(DMT_ISA_GENERIC);
    float *x = random_floats(3 * 1000, -8, 8), *y = malloc(3 * 1000 * sizeof *y), *z = malloc(3 * 1000 * sizeof *z);
    rows_case c = {3, 1000, x, NULL, NULL};
    run_log_softmax(g, y, &c), run_log_softmax(levels[0], z, &c);
    double worst = 0;
    for (int i = 0; i < 3000; i++) worst = fmax(worst, fabs(y[i] - z[i]));
    char what[120];
    snprintf(what, sizeof what, "generic log_softmax within 1e-5 of avx2's (max difference %.1e)", worst);
    CHECK(worst <= 1e-5, what);
    free(x), free(y), free(z);
    return check_done();
}
