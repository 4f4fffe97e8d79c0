/* ops.h — the numeric kernels of the forward pass: small, output-first, no allocation.
 *
 * All matrices are row-major float. Every matrix product goes through dmt_matmul:
 * the model's packed kernels (model/gemm.h), or cblas_sgemm for row-major weights
 * (the generic level's F32). Softmax, LayerNorm and attention (its products included)
 * run the process's kernel level (model/kernels/kernels.h), which from avx2 up gives
 * the same bits at every level; the rest are plain loops the compiler vectorises.
 */
#ifndef DEEPMT_MODEL_OPS_H
#define DEEPMT_MODEL_OPS_H

#include "model/model.h"

/* y[n][lin.out] = x[n][lin.in] * W^T + b. */
void dmt_matmul(float *y, const float *x, int n, const dmt_linear *lin);

/* y[n][out] = x[n][in] * W^T + b, ldx/ldy strides (in floats) for strided views. */
void dmt_matmul_strided(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin);

/* Products of the same rows: y[c][n][lins[c].out] = x[n][in] * W_c^T + b_c for c <
 * count (attention's q, k and v): int8 weights quantise x once for all of them. */
void dmt_matmul_shared(float *const *y, const float *x, int n, const dmt_linear *const *lins, int count);

/* x[n][d] = LayerNorm(x) in place. */
void dmt_layer_norm(float *x, int n, int d, const dmt_norm_weights *w, float eps);

/* x[n][d] = LayerNorm(alpha * x + y) in place: the Post-LN / DeepNorm residual. */
void dmt_residual_norm(float *x, const float *y, int n, int d, float alpha, const dmt_norm_weights *w, float eps);

/* x += y over n values (the Pre-LN residual). */
void dmt_add(float *x, const float *y, long n);

void dmt_relu(float *x, long n);
void dmt_gelu(float *x, long n); /* exact: 0.5 x (1 + erf(x / sqrt 2)) */

/* Softmax over each of n rows of length len, in place. */
void dmt_softmax(float *x, int n, int len);

/* Log-softmax over each of n rows of length len, in place. */
void dmt_log_softmax(float *x, int n, int len);

/* Multi-head attention for one sequence: for each head h,
 *   out[:, h] = softmax(q[:, h] k[:, h]^T (+ causal mask)) v[:, h]
 * q [nq][ldq], k, v [nk][ldkv] (heads side by side, head_dim = d / heads), out [nq][ldo].
 * q must already be scaled by head_dim^-0.5. causal_offset >= 0 masks key j for query i
 * when j > i + causal_offset; -1 means no mask (the encoder: its scores sum in another
 * order than the rows below, kernels.h attend_kt). scratch holds
 * dmt_attention_scratch(nq, nk, d) floats. */
size_t dmt_attention_scratch(int nq, int nk, int d);
void dmt_attention(float *out, int ldo, const float *q, int ldq, const float *k, const float *v, int ldkv,
                   int nq, int nk, int heads, int d, int causal_offset, float *scratch);

/* Keys given transposed in panels of 16 (the encoder's and the cross-attention's,
 * kernels.h attend_kt): key j's column t at kt[(j / 16) * 16 * d + t * 16 + j % 16],
 * each panel 16 * d floats, dmt_keys_stride(nk) * d (nk rounded up to 16) in all.
 * dmt_transpose_keys writes it from k [nk][ldk] (d columns), with zeros past nk. */
size_t dmt_keys_stride(int nk);
void dmt_transpose_keys(float *kt, const float *k, int ldk, int nk, int d);

/* Attention of nq query rows against the same nk keys without a mask, keys in panels
 * (kt: above, d = ld), q, v and out rows ld apart: the decoder's cross-attention for
 * the hypotheses of one sentence. A row's numbers do not depend on nq (the same bits
 * one at a time), and equal dmt_attention's without a mask. With align (not NULL),
 * align[i] gets row i's key position of the largest attention weight averaged over the
 * heads (first on ties): the source position a decoder step attends to most, its word
 * alignment; sum then holds nq * nk floats. scratch holds nq * dmt_keys_stride(nk)
 * floats. */
void dmt_attention_rows(float *out, const float *q, const float *kt, const float *v, int ld, int nq, int nk, int heads,
                        float *scratch, int *align, float *sum);

/* Attention of one query row q [d] over nk cached positions whose K/V rows live at
 * k + slots[j] * ld and v + slots[j] * ld (the decoder's slot cache). q scaled already;
 * scratch holds nk floats. */
void dmt_attention_slots(float *out, const float *q, const float *k, const float *v, int ld, const int *slots,
                         int nk, int heads, float *scratch);

#endif
