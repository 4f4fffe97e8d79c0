/* gemm.c — packed-weight matrix products (see gemm.h). */
#include "model/gemm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MR 12 /* x rows a block: 12 x 2 accumulators + 2 weight vectors + 1 broadcast <= 32 zmm */

static int pairs_of(int in) { return (in + 1) / 2; }
static int panels_of(int out) { return (out + DMT_PANEL - 1) / DMT_PANEL; }

/* float -> bfloat16, round to nearest even (weights and activations are finite) */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Where element (j, k) of an [out][in] matrix sits in the packed layouts (gemm.h). */
static size_t f32_offset(int in, int j, int k) {
    return ((size_t)(j / DMT_PANEL) * in + k) * DMT_PANEL + j % DMT_PANEL;
}
static size_t bf16_offset(int in, int j, int k) {
    return (((size_t)(j / DMT_PANEL) * pairs_of(in) + k / 2) * DMT_PANEL + j % DMT_PANEL) * 2 + (k & 1);
}

size_t dmt_gemm_packed_bytes(dmt_weight_layout layout, int out, int in) {
    size_t cols = (size_t)panels_of(out) * DMT_PANEL;
    if (layout == DMT_LAYOUT_PACKED_BF16) return cols * (size_t)pairs_of(in) * 2 * sizeof(uint16_t);
    if (layout == DMT_LAYOUT_PACKED_F32) return cols * (size_t)in * sizeof(float);
    return (size_t)out * (size_t)in * sizeof(float);
}

void dmt_gemm_pack_rows(void *dst, dmt_weight_layout layout, int in, int j0, int rows, const float *w) {
    for (int r = 0; r < rows; r++) {
        int j = j0 + r;
        const float *src = w + (size_t)r * in;
        if (layout == DMT_LAYOUT_PACKED_F32) {
            for (int k = 0; k < in; k++) ((float *)dst)[f32_offset(in, j, k)] = src[k];
        } else if (layout == DMT_LAYOUT_PACKED_BF16) {
            for (int k = 0; k < in; k++) ((uint16_t *)dst)[bf16_offset(in, j, k)] = to_bf16(src[k]);
        } else {
            memcpy((float *)dst + (size_t)j * in, src, (size_t)in * sizeof(float));
        }
    }
}

void dmt_linear_row(const dmt_linear *lin, int j, float *out) {
    int in = lin->in;
    if (lin->layout == DMT_LAYOUT_PACKED_F32) {
        for (int k = 0; k < in; k++) out[k] = ((const float *)lin->packed)[f32_offset(in, j, k)];
    } else if (lin->layout == DMT_LAYOUT_PACKED_BF16) {
        for (int k = 0; k < in; k++) out[k] = from_bf16(((const uint16_t *)lin->packed)[bf16_offset(in, j, k)]);
    } else {
        memcpy(out, lin->weight + (size_t)j * in, (size_t)in * sizeof(float));
    }
}

const char *dmt_gemm_name(dmt_weight_layout layout) {
    switch (layout) {
    case DMT_LAYOUT_PACKED_F32: return "AVX-512 F32";
    case DMT_LAYOUT_PACKED_BF16: return "AVX-512 BF16";
    default: return "OpenBLAS";
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

static int env_wants_openblas(void) {
    const char *e = getenv("DEEPMT_GEMM");
    return e && !strcmp(e, "openblas");
}

int dmt_gemm_layout(dmt_precision precision) {
    __builtin_cpu_init();
    int f32 = __builtin_cpu_supports("avx512f"), bf16 = f32 && __builtin_cpu_supports("avx512bf16");
    if (precision == DMT_PRECISION_BF16) return bf16 ? DMT_LAYOUT_PACKED_BF16 : -1;
    return f32 && !env_wants_openblas() ? DMT_LAYOUT_PACKED_F32 : DMT_LAYOUT_ROWS;
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bf16")

/* Store masks for the two 16-column halves of panel p (its live columns) and the
 * bias there, the accumulators' starting values. */
static void panel_start(const dmt_linear *lin, int p, __mmask16 *m0, __mmask16 *m1, __m512 *b0, __m512 *b1) {
    int j = p * DMT_PANEL, cols = lin->out - j < DMT_PANEL ? lin->out - j : DMT_PANEL;
    *m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    *m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
    *b0 = lin->bias ? _mm512_maskz_loadu_ps(*m0, lin->bias + j) : _mm512_setzero_ps();
    *b1 = lin->bias ? _mm512_maskz_loadu_ps(*m1, lin->bias + j + 16) : _mm512_setzero_ps();
}

/* rows (<= MR, a compile-time constant after inlining) x rows against one F32 panel. */
__attribute__((always_inline)) static inline void block_f32(float *y, int ldy, const float *x, int ldx, const int rows,
                                                            const float *panel, int in, __m512 b0, __m512 b1,
                                                            __mmask16 m0, __mmask16 m1) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = b0, acc[i][1] = b1;
    for (int k = 0; k < in; k++) {
        __m512 w0 = _mm512_load_ps(panel + (size_t)k * DMT_PANEL), w1 = _mm512_load_ps(panel + (size_t)k * DMT_PANEL + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m512 a = _mm512_set1_ps(x[(size_t)i * ldx + k]);
                acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
            }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) {
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, m0, acc[i][0]);
            _mm512_mask_storeu_ps(y + (size_t)i * ldy + 16, m1, acc[i][1]);
        }
}

/* The same over a BF16 panel; xb holds the x rows as bfloat16 pairs (one uint32 each). */
__attribute__((always_inline)) static inline void block_bf16(float *y, int ldy, const uint32_t *xb, int ldxb,
                                                             const int rows, const uint16_t *panel, int pairs,
                                                             __m512 b0, __m512 b1, __mmask16 m0, __mmask16 m1) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = b0, acc[i][1] = b1;
    for (int q = 0; q < pairs; q++) {
        __m512bh w0 = (__m512bh)_mm512_load_si512(panel + (size_t)q * 2 * DMT_PANEL);
        __m512bh w1 = (__m512bh)_mm512_load_si512(panel + (size_t)q * 2 * DMT_PANEL + DMT_PANEL);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m512bh a = (__m512bh)_mm512_set1_epi32((int)xb[(size_t)i * ldxb + q]);
                acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, w0);
                acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, w1);
            }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) {
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, m0, acc[i][0]);
            _mm512_mask_storeu_ps(y + (size_t)i * ldy + 16, m1, acc[i][1]);
        }
}

#define CASES(CALL) \
    CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6) CALL(7) CALL(8) CALL(9) CALL(10) CALL(11) CALL(12)

/* One product's operands. The panel functions take at most six arguments, all in
 * registers: with one on the stack, GCC's realigned AVX-512 frame needs a DWARF
 * expression perf cannot unwind through (bench/profile.py would lose the caller). */
typedef struct {
    float *y;
    const float *x;
    int ldy, ldx, n;
    const dmt_linear *lin;
} product;

/* One panel against rows [0, n) of x; every panel is independent (the parallel unit). */
static void panel_f32(const product *pr, int p) {
    float *y = pr->y;
    const float *x = pr->x;
    int ldy = pr->ldy, ldx = pr->ldx, n = pr->n;
    const dmt_linear *lin = pr->lin;
    int j = p * DMT_PANEL;
    __mmask16 m0, m1;
    __m512 b0, b1;
    panel_start(lin, p, &m0, &m1, &b0, &b1);
    const float *panel = (const float *)lin->packed + (size_t)p * DMT_PANEL * lin->in;
    for (int i = 0; i < n; i += MR) {
        float *yi = y + (size_t)i * ldy + j;
        const float *xi = x + (size_t)i * ldx;
        switch (n - i < MR ? n - i : MR) {
#define CALL(R) case R: block_f32(yi, ldy, xi, ldx, R, panel, lin->in, b0, b1, m0, m1); break;
            CASES(CALL)
#undef CALL
        }
    }
}

static void panel_bf16(float *y, int ldy, const uint32_t *xb, int n, const dmt_linear *lin, int p) {
    int j = p * DMT_PANEL, pairs = pairs_of(lin->in);
    __mmask16 m0, m1;
    __m512 b0, b1;
    panel_start(lin, p, &m0, &m1, &b0, &b1);
    const uint16_t *panel = (const uint16_t *)lin->packed + (size_t)p * DMT_PANEL * pairs * 2;
    for (int i = 0; i < n; i += MR) {
        float *yi = y + (size_t)i * ldy + j;
        const uint32_t *xi = xb + (size_t)i * pairs;
        switch (n - i < MR ? n - i : MR) {
#define CALL(R) case R: block_bf16(yi, ldy, xi, pairs, R, panel, pairs, b0, b1, m0, m1); break;
            CASES(CALL)
#undef CALL
        }
    }
}

/* x rows as bfloat16 pairs, zero-padded to an even length. */
static void rows_to_bf16(uint32_t *dst, const float *x, int ldx, int n, int in) {
    int pairs = pairs_of(in);
    for (int i = 0; i < n; i++) {
        const float *src = x + (size_t)i * ldx;
        uint16_t *d = (uint16_t *)(dst + (size_t)i * pairs);
        int k = 0;
        for (; k + 32 <= in; k += 32) /* cvtne2ps puts its second operand in the low half */
            _mm512_storeu_si512(d + k, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16),
                                                                    _mm512_loadu_ps(src + k)));
        for (; k < in; k++) d[k] = to_bf16(src[k]);
        if (in & 1) d[in] = 0;
    }
}

/* BF16 activations are converted in chunks of rows through a stack buffer, so a
 * product never allocates (and never fails). 32 KiB: bench/profile.py's perf copies
 * 64 KiB of stack a sample, which must reach past this frame to see the callers. */
#define XB_WORDS (DMT_GEMM_BF16_MAX_IN / 2) /* at least one row: load checks `in` */

__attribute__((noinline)) static void product_bf16(float *y, int ldy, const float *x, int ldx, int n,
                                                   const dmt_linear *lin, int threads) {
    uint32_t xb[XB_WORDS];
    int panels = panels_of(lin->out), pairs = pairs_of(lin->in), chunk = XB_WORDS / pairs;
    if (chunk > MR) chunk -= chunk % MR;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int rows = n - i0 < chunk ? n - i0 : chunk;
        rows_to_bf16(xb, x + (size_t)i0 * ldx, ldx, rows, lin->in);
        float *yi = y + (size_t)i0 * ldy;
        if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
            for (int p = 0; p < panels; p++) panel_bf16(yi, ldy, xb, rows, lin, p);
        } else {
            for (int p = 0; p < panels; p++) panel_bf16(yi, ldy, xb, rows, lin, p);
        }
    }
}

void dmt_gemm_packed(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    int panels = panels_of(lin->out);
    if (threads > panels) threads = panels;
    if (lin->layout == DMT_LAYOUT_PACKED_BF16) {
        product_bf16(y, ldy, x, ldx, n, lin, threads);
        return;
    }
    /* one thread runs the loop plainly: an OpenMP region, even an if(0) one, costs a
     * team set-up per product */
    product pr = {.y = y, .x = x, .ldy = ldy, .ldx = ldx, .n = n, .lin = lin};
    if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int p = 0; p < panels; p++) panel_f32(&pr, p);
    } else {
        for (int p = 0; p < panels; p++) panel_f32(&pr, p);
    }
}

#pragma GCC pop_options

#else /* no AVX-512 kernels on this compiler/architecture: OpenBLAS only */

int dmt_gemm_layout(dmt_precision precision) { return precision == DMT_PRECISION_BF16 ? -1 : DMT_LAYOUT_ROWS; }

void dmt_gemm_packed(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    (void)y, (void)ldy, (void)x, (void)ldx, (void)n, (void)lin, (void)threads;
    abort(); /* unreachable: load never packs here */
}
#endif
