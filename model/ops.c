/* ops.c — kernels of the forward pass (see ops.h). */
#include "model/ops.h"

#include "model/gemm.h"
#include "model/kernels/kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void dmt_matmul_strided(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin) {
    if (lin->layout != DMT_LAYOUT_ROWS) {
        dmt_gemm_packed(y, ldy, x, ldx, n, lin, dmt_kernels_threads());
        return;
    }
    float beta = 0.0f;
    if (lin->bias) {
        for (int i = 0; i < n; i++) memcpy(y + (size_t)i * ldy, lin->bias, (size_t)lin->out * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, lin->out, lin->in, 1.0f, x, ldx, lin->weight,
                lin->in, beta, y, ldy);
}

void dmt_matmul(float *y, const float *x, int n, const dmt_linear *lin) {
    dmt_matmul_strided(y, lin->out, x, lin->in, n, lin);
}

void dmt_matmul_shared(float *const *y, const float *x, int n, const dmt_linear *const *lins, int count) {
    int ldy[4], packed = count <= 4;
    for (int c = 0; packed && c < count; c++) packed = lins[c]->layout != DMT_LAYOUT_ROWS;
    if (packed) {
        for (int c = 0; c < count; c++) ldy[c] = lins[c]->out;
        dmt_gemm_packed_shared(y, ldy, x, lins[0]->in, n, lins, count, dmt_kernels_threads());
        return;
    }
    for (int c = 0; c < count; c++) dmt_matmul(y[c], x, n, lins[c]);
}

void dmt_layer_norm(float *x, int n, int d, const dmt_norm_weights *w, float eps) {
    const dmt_kernels *k = dmt_kernels_active();
    for (int i = 0; i < n; i++) k->norm_row(x + (size_t)i * d, d, w->weight, w->bias, eps);
}

void dmt_residual_norm(float *x, const float *y, int n, int d, float alpha, const dmt_norm_weights *w, float eps) {
    const dmt_kernels *k = dmt_kernels_active();
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * d;
        const float *s = y + (size_t)i * d;
        for (int j = 0; j < d; j++) r[j] = alpha * r[j] + s[j];
        k->norm_row(r, d, w->weight, w->bias, eps);
    }
}

void dmt_add(float *x, const float *y, long n) {
    for (long i = 0; i < n; i++) x[i] += y[i];
}

void dmt_relu(float *x, long n) {
    for (long i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
}

void dmt_gelu(float *x, long n) {
    for (long i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

void dmt_softmax(float *x, int n, int len) { dmt_kernels_active()->softmax(x, n, len); }

void dmt_log_softmax(float *x, int n, int len) { dmt_kernels_active()->log_softmax(x, n, len); }

void dmt_attention(float *out, int ldo, const float *q, int ldq, const float *k, const float *v, int ldkv,
                   int nq, int nk, int heads, int d, int causal_offset, float *scratch) {
    int hd = d / heads;
    dmt_attend_fn attend_row = dmt_kernels_active()->attend_row;
    if (nq <= 2) {
        for (int i = 0; i < nq; i++) {
            int keys = causal_offset >= 0 && i + causal_offset + 1 < nk ? i + causal_offset + 1 : nk;
            for (int h = 0; h < heads; h++)
                attend_row(out + (size_t)i * ldo + h * hd, q + (size_t)i * ldq + h * hd, k + h * hd, v + h * hd,
                           (size_t)ldkv, NULL, keys, hd, scratch);
        }
        return;
    }
    for (int h = 0; h < heads; h++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, hd, 1.0f, q + h * hd, ldq, k + h * hd, ldkv,
                    0.0f, scratch, nk);
        if (causal_offset >= 0)
            for (int i = 0; i < nq; i++)
                for (int j = i + causal_offset + 1; j < nk; j++) scratch[(size_t)i * nk + j] = -INFINITY;
        dmt_softmax(scratch, nq, nk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, nk, 1.0f, scratch, nk, v + h * hd, ldkv,
                    0.0f, out + h * hd, ldo);
    }
}

int dmt_attention_row_argmax(float *out, const float *q, const float *k, const float *v, int ld, int nk, int heads,
                             float *scratch, float *sum) {
    int hd = ld / heads, best = 0;
    dmt_attend_fn attend_row = dmt_kernels_active()->attend_row;
    memset(sum, 0, (size_t)nk * sizeof *sum);
    for (int h = 0; h < heads; h++) { /* as dmt_attention's nq <= 2 path: head by head */
        attend_row(out + h * hd, q + h * hd, k + h * hd, v + h * hd, (size_t)ld, NULL, nk, hd, scratch);
        for (int j = 0; j < nk; j++) sum[j] += scratch[j];
    }
    for (int j = 1; j < nk; j++)
        if (sum[j] > sum[best]) best = j;
    return best;
}

void dmt_attention_slots(float *out, const float *q, const float *k, const float *v, int ld, const int *slots,
                         int nk, int heads, float *scratch) {
    int hd = ld / heads;
    dmt_attend_fn attend_row = dmt_kernels_active()->attend_row;
    for (int h = 0; h < heads; h++)
        attend_row(out + h * hd, q + h * hd, k + h * hd, v + h * hd, (size_t)ld, slots, nk, hd, scratch);
}
