/* kernels_avxvnni.c — the avxvnni level: AVX2 + FMA + AVX-VNNI (kernels.h).
 *
 * For CPUs with the VEX-encoded VNNI instructions but no AVX-512: Intel's client
 * cores from Alder Lake on and the Xeon 6 E-core servers (Sierra Forest). F32
 * products, softmax, LayerNorm, attention and widening are the avx2 level's; int8
 * products use vpdpbusd on ymm: unsigned activation bytes (q + 128) times signed
 * weight bytes, four at a time into int32 (at most 4 x 255 x 127, no saturation),
 * the accumulators starting at -128 x the column's weight sum (stored with the
 * panels), so they end at the exact signed product, as at avx512vnni. Panels of 16
 * columns (two ymm, the avx2 layout); 6 rows a block keep 12 accumulators, 2 weight
 * vectors and a broadcast in 15 of the 16 ymm registers.
 */
#include "model/kernels/internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(DMT_KERNELS_EMULATED)
/* The test build's second copy (Makefile: kernels_avxvnni_emulated.o): vpdpbusd
 * from SIMDe (the AVX-512VL form computes the same), the rest native AVX2. */
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512/dpbusd.h>
#include <immintrin.h>
#define DPBUSD(acc, a, w) ((acc) = simde_mm256_dpbusd_epi32((acc), (a), (w)))
#define TABLE(name) name##_emulated
#define EMULATED 1
#define DMT_KERNELS_AVXVNNI_BUILD 1
#elif defined(DMT_KERNELS_X86)
#include <immintrin.h>
#pragma GCC push_options
#pragma GCC target("avx2,fma,avxvnni")
/* acc += a (unsigned bytes) . w (signed bytes), written out: GCC 12 compiles the
 * intrinsic over the accumulator array with a stack store of the sum after every
 * instruction of the inner loop (as in kernels_avx512.c). "x": VEX encodes only
 * ymm0-15. */
#define DPBUSD(acc, a, w) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(w))
#define TABLE(name) name
#define EMULATED 0
#define DMT_KERNELS_AVXVNNI_BUILD 1
#endif

#ifdef DMT_KERNELS_AVXVNNI_BUILD
#define K(name) name##_avxvnni
#include "model/kernels/portable.inc"

#include "model/kernels/panels16.inc"

#define MR 6 /* rows a block */

/* rows (<= MR, a constant after inlining) quantised x rows (quads of bytes + 128)
 * against one int8 panel. */
__attribute__((always_inline)) static inline void block_i8(float *y, int ldy, const uint32_t *xq, int quads,
                                                           const float *xs, const int rows, const int8_t *panel,
                                                           __m256i c0, __m256i c1, __m256 s0, __m256 s1, __m256 b0,
                                                           __m256 b1, int cols) {
    __m256i acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = c0, acc[i][1] = c1;
    for (int q = 0; q < quads; q++) {
        __m256i w0 = _mm256_load_si256((const __m256i *)(panel + (size_t)q * P * 4));
        __m256i w1 = _mm256_load_si256((const __m256i *)(panel + (size_t)q * P * 4 + 32));
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m256i a = _mm256_set1_epi32((int)xq[(size_t)i * quads + q]);
                DPBUSD(acc[i][0], a, w0);
                DPBUSD(acc[i][1], a, w1);
            }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
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
    const int32_t *comp = dmt_i8_comp(lin, P) + j;
    const float *ws = dmt_i8_scales(lin, P) + j;
    __m256i c0 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)comp));
    __m256i c1 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)(comp + 8)));
    __m256 s0 = _mm256_loadu_ps(ws), s1 = _mm256_loadu_ps(ws + 8);
    const int8_t *panel = (const int8_t *)lin->packed + (size_t)p * P * quads * 4;
    for (int i = 0; i < pr->n; i += MR) {
        float *yi = pr->y + (size_t)i * pr->ldy + j;
        const uint32_t *xi = pr->xq + (size_t)i * quads;
        switch (pr->n - i < MR ? pr->n - i : MR) {
#define CALL(R) case R: block_i8(yi, pr->ldy, xi, quads, pr->xs + i, R, panel, c0, c1, s0, s1, b0, b1, cols); break;
            CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6)
#undef CALL
        }
    }
}

static void gemm_i8_avxvnni(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    gemm_i8_chunks(y, ldy, x, ldx, n, lin, threads, MR, 1, 0, panel_i8);
}

#ifndef DMT_KERNELS_EMULATED
#pragma GCC pop_options
#endif

/* everything but the int8 product is the avx2 level's (same panels of 16) */
const dmt_kernels TABLE(dmt_kernels_avxvnni) = {
    .isa = DMT_ISA_AVXVNNI,
    .name = "avxvnni",
    .panel_f32 = P,
    .panel_i8 = P,
    .i8_offset = 1,
    .gemm_f32 = dmt_gemm_f32_avx2,
    .gemm_bf16 = NULL,
    .gemm_i8 = gemm_i8_avxvnni,
    .softmax = K(softmax),
    .log_softmax = K(log_softmax),
    .norm_row = K(norm_row),
    .attend_row = K(attend_row),
    .attend_kt = K(attend_kt),
    .f16_to_f32_n = K(f16_to_f32_n),
    .bf16_to_f32_n = K(bf16_to_f32_n),
    .emulated = EMULATED,
};

#endif
