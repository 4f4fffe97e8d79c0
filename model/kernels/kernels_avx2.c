/* kernels_avx2.c — the avx2 level: AVX2 + FMA (x86-64-v3; kernels.h).
 *
 * F32: panels of 16 output columns (two ymm), 6 x rows a block: 12 accumulators, 2
 * weight vectors and a broadcast fill 15 of the 16 ymm registers, and the panel
 * (16 floats an input, 16 KiB at 256 inputs) stays in L1 while the rows stream by.
 * int8: the same panels over groups of 4 inputs; vpmaddubsw multiplies unsigned by
 * signed bytes and saturates its pair sums at 16 bits, so the kernel feeds it |a|
 * and sign(a) * w (vpsignb): both in [-127, 127], a pair sums to at most 32,258, never
 * saturates, and the integer sums equal the exact product of the quantised operands.
 * 4 rows a block, each row's step one asm statement (ROW_I8) so that the 8
 * accumulators stay in registers; |a| is computed once a chunk (gemm_i8_chunks'
 * with_abs) rather than by vpabsb in the loop.
 */
#include "model/kernels/internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef DMT_KERNELS_X86
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

#define K(name) name##_avx2
#include "model/kernels/portable.inc"

#include "model/kernels/panels16.inc"

#define MR 6     /* F32 rows a block */
#define MR_I8 4  /* int8 rows a block */

/* rows (<= MR, a constant after inlining) x rows against one F32 panel. */
__attribute__((always_inline)) static inline void block_f32(float *y, int ldy, const float *x, int ldx, const int rows,
                                                            const float *panel, int in, __m256 b0, __m256 b1,
                                                            int cols) {
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = b0, acc[i][1] = b1;
    for (int k = 0; k < in; k++) {
        __m256 w0 = _mm256_load_ps(panel + (size_t)k * P), w1 = _mm256_load_ps(panel + (size_t)k * P + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m256 a = _mm256_broadcast_ss(x + (size_t)i * ldx + k);
                acc[i][0] = _mm256_fmadd_ps(a, w0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(a, w1, acc[i][1]);
            }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
        if (i < rows) store16(y + (size_t)i * ldy, cols, acc[i][0], acc[i][1]);
}

typedef struct {
    float *y;
    const float *x;
    int ldy, ldx, n;
    const dmt_linear *lin;
} product;

static void panel_f32(const product *pr, int p) {
    const dmt_linear *lin = pr->lin;
    int j = p * P, cols = lin->out - j < P ? lin->out - j : P, in = lin->in;
    __m256 b0, b1;
    bias16(lin, j, cols, &b0, &b1);
    const float *panel = (const float *)lin->packed + (size_t)p * P * in;
    for (int i = 0; i < pr->n; i += MR) {
        float *yi = pr->y + (size_t)i * pr->ldy + j;
        const float *xi = pr->x + (size_t)i * pr->ldx;
        switch (pr->n - i < MR ? pr->n - i : MR) {
#define CALL(R) case R: block_f32(yi, pr->ldy, xi, pr->ldx, R, panel, in, b0, b1, cols); break;
            CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6)
#undef CALL
        }
    }
}

void dmt_gemm_f32_avx2(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    int panels = dmt_panels_of(lin->out, P);
    if (threads > panels) threads = panels;
    product pr = {.y = y, .x = x, .ldy = ldy, .ldx = ldx, .n = n, .lin = lin};
    /* one thread runs the loop plainly: an OpenMP region, even an if(0) one, costs a
     * team set-up per product */
    if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int p = 0; p < panels; p++) panel_f32(&pr, p);
    } else {
        for (int p = 0; p < panels; p++) panel_f32(&pr, p);
    }
}

/* One row and quad against the panel's 16 columns: acc += sign(w, a) x |a| summed in
 * pairs (vpmaddubsw), then in fours (vpmaddwd by 1). One asm statement: written as
 * intrinsics, GCC 12 kept some of the 8 accumulators of a 4-row block on the stack
 * (a store and a reload every quad) or copied each sum back with a vmovdqa; here
 * each accumulator stays in its register (15 of the 16 ymm in use). AT&T operand
 * order: the destination last. */
#define ROW_I8(acc0, acc1, a, ua, w0, w1, ones)                                                              \
    do {                                                                                                     \
        __m256i t0_, t1_;                                                                                    \
        __asm__("vpsignb %[va], %[vw0], %[t0]\n\t"                                                           \
                "vpsignb %[va], %[vw1], %[t1]\n\t"                                                           \
                "vpmaddubsw %[t0], %[vua], %[t0]\n\t"                                                        \
                "vpmaddubsw %[t1], %[vua], %[t1]\n\t"                                                        \
                "vpmaddwd %[v1], %[t0], %[t0]\n\t"                                                           \
                "vpmaddwd %[v1], %[t1], %[t1]\n\t"                                                           \
                "vpaddd %[t0], %[c0], %[c0]\n\t"                                                             \
                "vpaddd %[t1], %[c1], %[c1]"                                                                 \
                : [c0] "+x"(acc0), [c1] "+x"(acc1), [t0] "=&x"(t0_), [t1] "=&x"(t1_)                         \
                : [va] "x"(a), [vua] "x"(ua), [vw0] "x"(w0), [vw1] "x"(w1), [v1] "x"(ones));                 \
    } while (0)

/* rows (<= MR_I8) quantised x rows (quads of signed bytes) against one int8 panel. */
__attribute__((always_inline)) static inline void block_i8(float *y, int ldy, const uint32_t *xq,
                                                           const uint32_t *xa, int quads,
                                                           const float *xs, const int rows, const int8_t *panel,
                                                           __m256 s0, __m256 s1, __m256 b0, __m256 b1, int cols) {
    __m256i acc[MR_I8][2];
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int i = 0; i < MR_I8; i++)
        if (i < rows) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int q = 0; q < quads; q++) {
        __m256i w0 = _mm256_load_si256((const __m256i *)(panel + (size_t)q * P * 4));
        __m256i w1 = _mm256_load_si256((const __m256i *)(panel + (size_t)q * P * 4 + 32));
#pragma GCC unroll 4
        for (int i = 0; i < MR_I8; i++)
            if (i < rows) {
                /* |a| comes precomputed (a broadcast load): vpabsb here was one of the
                 * nine vector operations a row and quad, on the pipes the multiplies need */
                __m256i a = _mm256_set1_epi32((int)xq[(size_t)i * quads + q]);
                __m256i ua = _mm256_set1_epi32((int)xa[(size_t)i * quads + q]);
                ROW_I8(acc[i][0], acc[i][1], a, ua, w0, w1, ones);
            }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR_I8; i++)
        if (i < rows) {
            __m256 sa = _mm256_set1_ps(xs[i]);
            store16(y + (size_t)i * ldy, cols,
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][0]), _mm256_mul_ps(sa, s0), b0),
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][1]), _mm256_mul_ps(sa, s1), b1));
        }
}

static void panel_i8(const product_i8 *pr, int p) {
    const dmt_linear *lin = pr->lin;
    int j = p * P, cols = lin->out - j < P ? lin->out - j : P, quads = dmt_quads_of(lin->in);
    __m256 b0, b1;
    bias16(lin, j, cols, &b0, &b1);
    const float *ws = dmt_i8_scales(lin, P) + j;
    __m256 s0 = _mm256_loadu_ps(ws), s1 = _mm256_loadu_ps(ws + 8);
    const int8_t *panel = (const int8_t *)lin->packed + (size_t)p * P * quads * 4;
    for (int i = 0; i < pr->n; i += MR_I8) {
        float *yi = pr->y + (size_t)i * pr->ldy + j;
        const uint32_t *xi = pr->xq + (size_t)i * quads, *ai = pr->xa + (size_t)i * quads;
        switch (pr->n - i < MR_I8 ? pr->n - i : MR_I8) {
#define CALL(R) case R: block_i8(yi, pr->ldy, xi, ai, quads, pr->xs + i, R, panel, s0, s1, b0, b1, cols); break;
            CALL(1) CALL(2) CALL(3) CALL(4)
#undef CALL
        }
    }
}

void dmt_gemm_i8_avx2(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    gemm_i8_chunks(y, ldy, x, ldx, n, lin, threads, MR_I8, 0, 1, panel_i8);
}

#pragma GCC pop_options

const dmt_kernels dmt_kernels_avx2 = {
    .isa = DMT_ISA_AVX2,
    .name = "avx2",
    .panel_f32 = P,
    .panel_i8 = P,
    .i8_offset = 0,
    .gemm_f32 = dmt_gemm_f32_avx2,
    .gemm_bf16 = NULL,
    .gemm_i8 = dmt_gemm_i8_avx2,
    .softmax = softmax_avx2,
    .log_softmax = log_softmax_avx2,
    .norm_row = norm_row_avx2,
    .attend_row = attend_row_avx2,
    .attend_kt = attend_kt_avx2,
    .f16_to_f32_n = f16_to_f32_n_avx2,
    .bf16_to_f32_n = bf16_to_f32_n_avx2,
};

#endif
