/* kernels_generic.c — the generic level: the build's baseline (x86-64-v2), OpenBLAS
 * F32 products, int8 products with SSSE3 (part of x86-64-v2: pmaddubsw, psignb, the
 * AVX2 kernel's method on 16-byte vectors) or, where the build lacks it, plain C
 * (kernels.h). */
#include "model/kernels/internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define K(name) name##_generic
#include "model/kernels/portable.inc"

#define GENERIC_I8_PANEL 16

#ifdef __SSSE3__
#include <tmmintrin.h>

#define P GENERIC_I8_PANEL
#define MR 2 /* rows a block: 2 x 4 accumulators + 4 weight vectors + temporaries <= 16 xmm */

/* rows (<= MR) quantised x rows against one int8 panel: |a| x sign(a) * w with
 * pmaddubsw (pairs sum to at most 2 x 127 x 127: no saturation), pmaddwd by 1 to
 * widen into int32: the exact integer product, as every level computes it. */
static void block_i8(float *y, int ldy, const uint32_t *xq, int quads, const float *xs, int rows,
                     const int8_t *panel, const float *ws, const float *bias, int cols) {
    __m128i acc[MR][4];
    const __m128i ones = _mm_set1_epi16(1);
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < 4; v++) acc[i][v] = _mm_setzero_si128();
    for (int q = 0; q < quads; q++) {
        const __m128i *wq = (const __m128i *)(panel + (size_t)q * P * 4);
        __m128i w[4] = {_mm_load_si128(wq), _mm_load_si128(wq + 1), _mm_load_si128(wq + 2), _mm_load_si128(wq + 3)};
        for (int i = 0; i < MR; i++) {
            if (i >= rows) break;
            __m128i a = _mm_set1_epi32((int)xq[(size_t)i * quads + q]), ua = _mm_abs_epi8(a);
            for (int v = 0; v < 4; v++)
                acc[i][v] = _mm_add_epi32(acc[i][v],
                                          _mm_madd_epi16(_mm_maddubs_epi16(ua, _mm_sign_epi8(w[v], a)), ones));
        }
    }
    for (int i = 0; i < rows; i++) {
        int32_t sums[P];
        for (int v = 0; v < 4; v++) _mm_storeu_si128((__m128i *)(sums + 4 * v), acc[i][v]);
        float *yr = y + (size_t)i * ldy;
        for (int c = 0; c < cols; c++) yr[c] = (float)sums[c] * (xs[i] * ws[c]) + (bias ? bias[c] : 0.0f);
    }
}

static void gemm_i8_generic(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    (void)threads;
    int quads = dmt_quads_of(lin->in), panels = dmt_panels_of(lin->out, P);
    uint32_t xq[DMT_XBUF_BYTES / 4];
    float xs[DMT_XBUF_ROWS];
    int chunk = DMT_XBUF_BYTES / (quads * 4);
    if (chunk > DMT_XBUF_ROWS) chunk = DMT_XBUF_ROWS;
    const float *ws = dmt_i8_scales(lin, P);
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int rows = n - i0 < chunk ? n - i0 : chunk;
        quantize_rows_generic((uint8_t *)xq, xs, x + (size_t)i0 * ldx, ldx, rows, lin->in, 0);
        for (int p = 0; p < panels; p++) {
            int j = p * P, cols = lin->out - j < P ? lin->out - j : P;
            const int8_t *panel = (const int8_t *)lin->packed + (size_t)p * P * quads * 4;
            for (int i = 0; i < rows; i += MR)
                block_i8(y + (size_t)(i0 + i) * ldy + j, ldy, xq + (size_t)i * quads, quads, xs + i,
                         rows - i < MR ? rows - i : MR, panel, ws + j, lin->bias ? lin->bias + j : NULL, cols);
        }
    }
}
#else
static void gemm_i8_generic(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    (void)threads;
    gemm_i8_plain_generic(y, ldy, x, ldx, n, lin, GENERIC_I8_PANEL);
}
#endif

const dmt_kernels dmt_kernels_generic = {
    .isa = DMT_ISA_GENERIC,
    .name = "generic",
    .panel_f32 = 0,
    .panel_i8 = GENERIC_I8_PANEL,
    .i8_offset = 0,
    .gemm_f32 = NULL,
    .gemm_bf16 = NULL,
    .gemm_i8 = gemm_i8_generic,
    .softmax = softmax_generic,
    .log_softmax = log_softmax_generic,
    .norm_row = norm_row_generic,
    .attend_row = attend_row_generic,
    .attend_kt = attend_kt_generic,
    .f16_to_f32_n = f16_to_f32_n_generic,
    .bf16_to_f32_n = bf16_to_f32_n_generic,
};
