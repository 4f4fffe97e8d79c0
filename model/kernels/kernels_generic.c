/* kernels_generic.c — the generic level: the build's baseline (x86-64-v2), OpenBLAS
 * F32 products, plain C int8 products (kernels.h). */
#include "model/kernels/internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define K(name) name##_generic
#include "model/kernels/portable.inc"

#define GENERIC_I8_PANEL 16

static void gemm_i8_generic(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    (void)threads;
    gemm_i8_plain_generic(y, ldy, x, ldx, n, lin, GENERIC_I8_PANEL);
}

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
    .f16_to_f32_n = f16_to_f32_n_generic,
    .bf16_to_f32_n = bf16_to_f32_n_generic,
};
