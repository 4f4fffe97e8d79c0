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

size_t dmt_keys_stride(int nk) { return ((size_t)nk + 15) / 16 * 16; }

/* A panel at a time: 16 read streams, contiguous writes. */
void dmt_transpose_keys(float *kt, const float *k, int ldk, int nk, int d) {
    for (int j0 = 0; j0 < nk; j0 += 16) {
        float *panel = kt + (size_t)j0 * d; /* panel j0 / 16: 16 * d floats */
        int n = nk - j0 < 16 ? nk - j0 : 16;
        const float *src = k + (size_t)j0 * ldk;
        for (int t = 0; t < d; t++) {
            float *dst = panel + (size_t)t * 16;
            for (int j = 0; j < n; j++) dst[j] = src[(size_t)j * ldk + t];
            for (int j = n; j < 16; j++) dst[j] = 0; /* read by whole vectors, never used */
        }
    }
}

size_t dmt_attention_scratch(int nq, int nk, int d) { return ((size_t)nq + (size_t)d) * dmt_keys_stride(nk); }

void dmt_attention(float *out, int ldo, const float *q, int ldq, const float *k, const float *v, int ldkv,
                   int nq, int nk, int heads, int d, int causal_offset, float *scratch) {
    /* The level's own kernels, never OpenBLAS: sgemm's kernel family depends on the
     * CPU model (Haswell, SkylakeX, ...) and sums in its own order, so replicas on
     * different CPUs translated differently. Each thread takes a share of the rows
     * (all heads), whose weights in scratch are its own: the same bits as one thread.
     * Without a mask (the encoder) K is transposed first, heads one below the other,
     * for the keys-across-lanes kernel (kernels.h attend_kt). */
    int hd = d / heads, threads = nq >= 8 ? dmt_kernels_threads() : 1;
    if (threads > nq / 4) threads = nq / 4 > 1 ? nq / 4 : 1;
    const dmt_kernels *kern = dmt_kernels_active();
    size_t ldw = dmt_keys_stride(nk); /* a row of weights */
    float *kt = scratch, *weights = scratch; /* kt: the keys transposed (no mask) */
    if (causal_offset < 0) {
        dmt_transpose_keys(kt, k, ldkv, nk, d);
        weights = scratch + (size_t)d * ldw;
    }
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int c = 0; c < threads; c++) {
        int i0 = (int)((long)nq * c / threads), i1 = (int)((long)nq * (c + 1) / threads);
        for (int h = 0; h < heads; h++) {
            if (causal_offset < 0) {
                kern->attend_kt(out + (size_t)i0 * ldo + h * hd, (size_t)ldo, q + (size_t)i0 * ldq + h * hd,
                                (size_t)ldq, i1 - i0, kt + (size_t)h * hd * 16, (size_t)d * 16, v + h * hd,
                                (size_t)ldkv, nk, hd, weights + (size_t)i0 * ldw);
                continue;
            }
            float *p = scratch + (size_t)i0 * nk;
            for (int i = i0; i < i1; i++) {
                int keys = i + causal_offset + 1 < nk ? i + causal_offset + 1 : nk;
                kern->attend_row(out + (size_t)i * ldo + h * hd, q + (size_t)i * ldq + h * hd, k + h * hd, v + h * hd,
                                 (size_t)ldkv, NULL, keys, hd, p);
            }
        }
    }
}

void dmt_attention_rows(float *out, const float *q, const float *kt, const float *v, int ld, int nq, int nk, int heads,
                        float *scratch, int *align, float *sum) {
    int hd = ld / heads;
    size_t ldw = dmt_keys_stride(nk);
    dmt_attend_kt_fn attend_kt = dmt_kernels_active()->attend_kt;
    if (align) memset(sum, 0, (size_t)nq * nk * sizeof *sum);
    for (int h = 0; h < heads; h++) { /* head by head, each head's weights added to sum */
        attend_kt(out + h * hd, (size_t)ld, q + h * hd, (size_t)ld, nq, kt + (size_t)h * hd * 16, (size_t)ld * 16,
                  v + h * hd, (size_t)ld, nk, hd, scratch);
        for (int i = 0; align && i < nq; i++)
            for (int j = 0; j < nk; j++) sum[(size_t)i * nk + j] += scratch[(size_t)i * ldw + j];
    }
    for (int i = 0; align && i < nq; i++) {
        const float *row = sum + (size_t)i * nk;
        int best = 0;
        for (int j = 1; j < nk; j++)
            if (row[j] > row[best]) best = j;
        align[i] = best;
    }
}

void dmt_attention_slots(float *out, const float *q, const float *k, const float *v, int ld, const int *slots,
                         int nk, int heads, float *scratch) {
    int hd = ld / heads;
    dmt_attend_fn attend_row = dmt_kernels_active()->attend_row;
    for (int h = 0; h < heads; h++)
        attend_row(out + h * hd, q + h * hd, k + h * hd, v + h * hd, (size_t)ld, slots, nk, hd, scratch);
}
