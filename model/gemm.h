/* gemm.h — weights packed at load for the product kernels (model/kernels/).
 *
 * Every linear layer computes y[n][out] = x[n][in] W^T + b. OpenBLAS's sgemm repacks
 * W into cache-sized panels on every call; deepmt packs each weight matrix once, at
 * load, into panels of P output columns (P is the kernel level's: 16 for AVX2, 32
 * for AVX-512),
 *
 *   F32:  panel p, input k, column c         -> packed[(p * in + k) * P + c]
 *   BF16: panel p, input pair q, column c, e -> packed[((p * pairs + q) * P + c) * 2 + e]
 *         (k = 2q + e; pairs = ceil(in / 2); the pairs are what vdpbf16ps multiplies)
 *   INT8: panel p, input quad q, column c, e -> packed[((p * quads + q) * P + c) * 4 + e]
 *         (k = 4q + e; quads = ceil(in / 4): vpdpbusd / vpmaddubsw take 4 bytes a lane),
 *         then int32 comp[panels * P] (128 x the column's sum of bytes) and float
 *         scale[panels * P] (the column's scale: W[j][k] ~ scale[j] * byte)
 *
 * (the last panel is zero-padded). A level without packed F32 (generic) keeps
 * row-major weights for OpenBLAS. INT8 weights are symmetric per output column
 * (dmt_quantize_row); activations are quantised per row at run time.
 */
#ifndef DEEPMT_MODEL_GEMM_H
#define DEEPMT_MODEL_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "model/kernels/kernels.h"
#include "model/model.h"

#define DMT_GEMM_MAX_IN 16384 /* widest BF16/INT8 layer input (the loader checks) */

/* The layout weights get for a precision with kernels k: -1 when k cannot multiply
 * in that precision (bf16 without AVX-512 BF16). */
int dmt_gemm_layout(const dmt_kernels *k, dmt_precision precision);

/* Bytes a packed [out][in] matrix takes (a multiple of 64). */
size_t dmt_gemm_packed_bytes(const dmt_kernels *k, dmt_weight_layout layout, int out, int in);

/* Packs rows [j0, j0 + rows) of a row-major float matrix w ([rows][in], row r is
 * output j0 + r) into dst, a zeroed buffer of dmt_gemm_packed_bytes(k, layout, out, in).
 * INT8 quantises each row. */
void dmt_gemm_pack_rows(void *dst, const dmt_kernels *k, dmt_weight_layout layout, int out, int in, int j0,
                        int rows, const float *w);

/* The same for rows quantised already (a quantised model file): bytes q [rows][in]
 * and their scales, into an INT8 buffer. */
void dmt_gemm_pack_rows_i8(void *dst, const dmt_kernels *k, int out, int in, int j0, int rows, const int8_t *q,
                           const float *scales);

/* y[n][out] (row stride ldy) = x[n][in] (row stride ldx) W^T + b, for a packed lin,
 * with the kernels it was packed for. threads > 1 splits the panels (same bits). */
void dmt_gemm_packed(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads);

/* count products of the same x (n rows), y[c] = x lins[c]^T + b[c], row strides
 * ldy[c]: where every lin is int8 with the same in and kernels that can, x is
 * quantised once (the same bits as count dmt_gemm_packed calls). */
void dmt_gemm_packed_shared(float *const *y, const int *ldy, const float *x, int ldx, int n,
                            const dmt_linear *const *lins, int count, int threads);

/* out[in] = row j of W as the layout holds it (BF16 rounded, INT8 scale x byte). */
void dmt_linear_row(const dmt_linear *lin, int j, float *out);

/* Bytes dmt_linear_gather needs for n of src's output columns (a multiple of 64). */
size_t dmt_linear_gather_bytes(const dmt_linear *src, int n);

/* dst = the output columns ids[0..n) of src (each < src->out), in that order, with
 * src's layout and kernels, its panels written into buf (dmt_linear_gather_bytes,
 * 64-byte aligned) and its bias, if any, into bias_buf ([n]). Column i of a product
 * with dst is column ids[i] of the same product with src, bit for bit in the packed
 * layouts (tests/c/test_gemm.c; OpenBLAS's row layout may round differently). What a
 * vocabulary shortlist scores (model/shortlist.h). */
void dmt_linear_gather(dmt_linear *dst, void *buf, float *bias_buf, const dmt_linear *src, int n, const int32_t *ids);
/* Appends the columns ids[0..n) of src to dst, a dmt_linear_gather of src, as columns
 * dst->out .. dst->out + n - 1, copying only those: buf and bias_buf hold dst's
 * columns (buf may have been copied whole to a larger buffer) and have room for the
 * new ones (dmt_linear_gather_bytes of the new count). The result is the gather of
 * the old ids followed by these, byte for byte. */
void dmt_linear_gather_more(dmt_linear *dst, void *buf, float *bias_buf, const dmt_linear *src, int n,
                            const int32_t *ids);

/* What multiplies a layout's products: "generic (OpenBLAS) F32", "avx2 F32",
 * "avx512bf16 BF16", "avx512vnni INT8", ... into buf; for logs and reports. Returns buf. */
const char *dmt_gemm_describe(const dmt_kernels *k, dmt_weight_layout layout, char *buf, size_t len);

#endif
