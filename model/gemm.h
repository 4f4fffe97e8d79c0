/* gemm.h — deepmt's own matrix-product kernels over weights packed at load.
 *
 * Every linear layer computes y[n][out] = x[n][in] W^T + b. OpenBLAS's sgemm repacks
 * W into cache-sized panels on every call; deepmt packs each weight matrix once, at
 * load, into panels of DMT_PANEL output columns,
 *
 *   F32:  panel p, input k, column c        -> packed[(p * in + k) * 32 + c]
 *   BF16: panel p, input pair q, column c, e -> packed[((p * pairs + q) * 32 + c) * 2 + e]
 *         (k = 2q + e; pairs = ceil(in / 2); the pairs are what vdpbf16ps multiplies)
 *
 * (the last panel is zero-padded), and multiplies with AVX-512: 12 x rows against one
 * panel keep 24 accumulators in registers while the panel stays in L1. F32 needs
 * AVX-512F and gives sgemm's results up to summation order. BF16 (opt-in, `--precision
 * bf16`) rounds weights and activations to bfloat16 and accumulates in F32 with
 * AVX-512 BF16 (vdpbf16ps): twice the F32 speed and half the memory, with slightly
 * different translations. Without AVX-512 the model keeps row-major weights and
 * ops.c uses OpenBLAS.
 */
#ifndef DEEPMT_MODEL_GEMM_H
#define DEEPMT_MODEL_GEMM_H

#include <stddef.h>

#include "model/model.h"

#define DMT_PANEL 32
#define DMT_GEMM_BF16_MAX_IN 16384 /* widest BF16 layer input (the loader checks) */

/* The layout load should give weights for a precision on this CPU: DMT_LAYOUT_ROWS
 * when the CPU lacks AVX-512F (or DEEPMT_GEMM=openblas is set: a switch for tests and
 * comparisons), else the packed layout. -1 when bf16 is asked for and the CPU lacks
 * AVX-512 BF16. */
int dmt_gemm_layout(dmt_precision precision);

/* Bytes a packed [out][in] matrix takes (a multiple of 64). */
size_t dmt_gemm_packed_bytes(dmt_weight_layout layout, int out, int in);

/* Packs rows [j0, j0 + rows) of a row-major float matrix w ([rows][in], row r is
 * output j0 + r) into dst, a buffer of dmt_gemm_packed_bytes(layout, out, in).
 * Rows never passed in stay as they were: callers zero the last panel's padding. */
void dmt_gemm_pack_rows(void *dst, dmt_weight_layout layout, int in, int j0, int rows, const float *w);

/* y[n][out] (row stride ldy) = x[n][in] (row stride ldx) W^T + b, for a packed lin.
 * threads > 1 splits the panels over that many OpenMP threads. */
void dmt_gemm_packed(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads);

/* out[in] = row j of W (as the packed layout holds it: BF16 rounds), any layout. */
void dmt_linear_row(const dmt_linear *lin, int j, float *out);

/* "AVX-512 F32", "AVX-512 BF16" or "OpenBLAS" for a layout: for logs and reports. */
const char *dmt_gemm_name(dmt_weight_layout layout);

#endif
