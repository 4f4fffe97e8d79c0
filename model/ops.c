/* ops.c — kernels of the forward pass (see ops.h). */
#include "model/ops.h"

#include "model/gemm.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Hot loops get AVX-512 and AVX2+FMA clones picked at run time; the baseline build
 * stays x86-64-v2 so the binary runs on any 64-bit x86 server. The AVX-512 clone
 * made log-softmax ~30% cheaper (perf shares, batch 32); attend_row, whose dot
 * products are only head_dim (64) long, gained nothing from it and keeps AVX2. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DMT_HOT __attribute__((target_clones("arch=x86-64-v4", "avx2,fma", "default")))
#define DMT_HOT_AVX2 __attribute__((target_clones("avx2,fma", "default")))
#else
#define DMT_HOT
#define DMT_HOT_AVX2
#endif

/* exp(x) for x <= 0, as in Cephes' expf (relative error ~1e-7), written so that
 * the compiler vectorises loops over it; glibc's expf is one value at a time. */
__attribute__((always_inline)) static inline float exp_nonpositive(float x) {
    /* x = max(x, -87) as a bitwise select: a ?: here stops GCC 12 from vectorising
     * the loop inside a target clone. Below -87, exp underflows anyway. */
    int32_t xb, lo;
    const float lof = -87.0f;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&lo, &lof, sizeof lo);
    int32_t keep = -(int32_t)(x >= -87.0f);
    xb = (xb & keep) | (lo & ~keep);
    memcpy(&x, &xb, sizeof x);
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick: arithmetic only, so it vectorises */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static float row_max(const float *r, int len) {
    float mx = -FLT_MAX;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < len; j++) mx = r[j] > mx ? r[j] : mx;
    return mx;
}

/* ---- few-row products --------------------------------------------------------------
 * A decoder step at batch 1 multiplies 1-4 rows (the beams) by each weight matrix.
 * There OpenBLAS's sgemm spends most of its time packing the weight matrix, which is
 * read once anyway: reading W straight, two rows at a time against up to four x rows
 * (eight independent FMA chains), is 2-4x faster (256x8000 at 1 row: 164 vs 585 us,
 * 4 rows: 253 vs 501 us; Haswell kernels, one thread). Used only when OpenBLAS runs
 * one thread (deepmt's default: one BLAS thread a worker), since it is single-threaded.
 * The sums run in a different order than sgemm's: results differ in the last bits. */
#define SMALL_ROWS 4

int openblas_get_num_threads(void); /* OpenBLAS; declared here to avoid its cblas.h extensions */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y[i][j] = b[j] + sum_t x[i][t] W[j][t] for i < n <= SMALL_ROWS. */
__attribute__((target("avx2,fma"))) static void matmul_few_rows(float *y, int ldy, const float *x, int ldx, int n,
                                                                const dmt_linear *lin) {
    const int in = lin->in, out = lin->out, vec_end = in & ~7;
    const float *w = lin->weight;
    for (int j = 0; j < out; j += 2) {
        const int cols = j + 1 < out ? 2 : 1;
        const float *w0 = w + (size_t)j * in, *w1 = cols == 2 ? w0 + in : w0;
        __m256 acc[SMALL_ROWS][2];
        for (int i = 0; i < SMALL_ROWS; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        /* the next pair of weight rows, a cache line per 16 floats: streaming W from
         * L3/DRAM is what bounds this loop once W is not cache-resident */
        const float *next = w + (size_t)(j + 2 < out ? j + 2 : j) * in;
        const float *next1 = j + 3 < out ? next + in : next; /* stay inside W */
        for (int t = 0; t < vec_end; t += 8) {
            if (!(t & 15)) {
                _mm_prefetch((const char *)(next + t), _MM_HINT_T0);
                _mm_prefetch((const char *)(next1 + t), _MM_HINT_T0);
            }
            __m256 v0 = _mm256_loadu_ps(w0 + t), v1 = _mm256_loadu_ps(w1 + t);
            for (int i = 0; i < SMALL_ROWS; i++) { /* unrolled; rows >= n are skipped */
                if (i >= n) break;
                __m256 xi = _mm256_loadu_ps(x + (size_t)i * ldx + t);
                acc[i][0] = _mm256_fmadd_ps(xi, v0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(xi, v1, acc[i][1]);
            }
        }
        for (int i = 0; i < n; i++)
            for (int c = 0; c < cols; c++) {
                const float *wr = c ? w1 : w0, *xr = x + (size_t)i * ldx;
                float r = hsum256(acc[i][c]);
                for (int t = vec_end; t < in; t++) r += xr[t] * wr[t];
                y[(size_t)i * ldy + j + c] = r + (lin->bias ? lin->bias[j + c] : 0.0f);
            }
    }
}

static int few_rows_path(int n) {
    return n <= SMALL_ROWS && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           openblas_get_num_threads() == 1;
}
#else
static void matmul_few_rows(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin) {
    (void)y, (void)ldy, (void)x, (void)ldx, (void)n, (void)lin;
}
static int few_rows_path(int n) { return (void)n, 0; }
#endif

void dmt_matmul_strided(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin) {
    if (lin->layout != DMT_LAYOUT_ROWS) {
        dmt_gemm_packed(y, ldy, x, ldx, n, lin, openblas_get_num_threads());
        return;
    }
    if (few_rows_path(n)) {
        matmul_few_rows(y, ldy, x, ldx, n, lin);
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

/* Mean and variance accumulate in double, one partial sum per SIMD lane (the simd
 * reductions let the compiler vectorise; the order change is far below float rounding). */
DMT_HOT static void norm_row(float *x, int d, const dmt_norm_weights *w, float eps) {
    double mean = 0, var = 0;
#pragma omp simd reduction(+ : mean)
    for (int j = 0; j < d; j++) mean += x[j];
    mean /= d;
#pragma omp simd reduction(+ : var)
    for (int j = 0; j < d; j++) { double t = x[j] - mean; var += t * t; }
    var /= d;
    float inv = (float)(1.0 / sqrt(var + eps)), m = (float)mean;
    for (int j = 0; j < d; j++) x[j] = (x[j] - m) * inv * w->weight[j] + w->bias[j];
}

void dmt_layer_norm(float *x, int n, int d, const dmt_norm_weights *w, float eps) {
    for (int i = 0; i < n; i++) norm_row(x + (size_t)i * d, d, w, eps);
}

void dmt_residual_norm(float *x, const float *y, int n, int d, float alpha, const dmt_norm_weights *w, float eps) {
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * d;
        const float *s = y + (size_t)i * d;
        for (int j = 0; j < d; j++) r[j] = alpha * r[j] + s[j];
        norm_row(r, d, w, eps);
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

DMT_HOT void dmt_softmax(float *x, int n, int len) {
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * len, mx = row_max(r, len);
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < len; j++) { r[j] = exp_nonpositive(r[j] - mx); sum += r[j]; }
        float inv = 1.0f / sum;
        for (int j = 0; j < len; j++) r[j] *= inv;
    }
}

DMT_HOT void dmt_log_softmax(float *x, int n, int len) {
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * len, mx = row_max(r, len), sum = 0;
        /* the simd reduction keeps one partial sum per lane, which also limits rounding drift */
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < len; j++) sum += exp_nonpositive(r[j] - mx);
        float lse = mx + logf(sum);
        for (int j = 0; j < len; j++) r[j] -= lse;
    }
}

/* One query row against nk keys of one head: the decoder-step case, where a GEMM
 * call costs more than the arithmetic. Key/value row j is at (slots ? slots[j] : j) * ld
 * from k and v: contiguous rows, or the decoder's slot cache. Four keys at a time:
 * one key's dot product is a chain of dependent vector FMAs, four are independent
 * (each sum still runs in the same order, so results do not change). */
DMT_HOT_AVX2 static void attend_row(float *restrict out, const float *restrict q, const float *k, const float *v,
                               size_t ld, const int *slots, int nk, int hd, float *restrict p) {
    float mx = -FLT_MAX;
    int j = 0;
    for (; j + 4 <= nk; j += 4) {
        const float *k0 = k + (size_t)(slots ? slots[j] : j) * ld, *k1 = k + (size_t)(slots ? slots[j + 1] : j + 1) * ld;
        const float *k2 = k + (size_t)(slots ? slots[j + 2] : j + 2) * ld, *k3 = k + (size_t)(slots ? slots[j + 3] : j + 3) * ld;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
        for (int t = 0; t < hd; t++) {
            s0 += q[t] * k0[t];
            s1 += q[t] * k1[t];
            s2 += q[t] * k2[t];
            s3 += q[t] * k3[t];
        }
        p[j] = s0, p[j + 1] = s1, p[j + 2] = s2, p[j + 3] = s3;
    }
    for (; j < nk; j++) {
        const float *kr = k + (size_t)(slots ? slots[j] : j) * ld;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int t = 0; t < hd; t++) s += q[t] * kr[t];
        p[j] = s;
    }
    for (j = 0; j < nk; j++) mx = p[j] > mx ? p[j] : mx;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < nk; i++) { p[i] = exp_nonpositive(p[i] - mx); sum += p[i]; }
    float inv = 1.0f / sum;
    for (j = 0; j < nk; j++) p[j] *= inv;
    /* out = sum_j p[j] v[j], 32 columns at a time so the sums stay in registers across
     * the keys (a plain out[t] += ... reloads and stores out for every key) */
    typedef float v8f __attribute__((vector_size(32))); /* GCC vectors: 8 lanes in either clone */
    int t0 = 0;
    for (; t0 + 32 <= hd; t0 += 32) {
        v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, x0, x1, x2, x3;
        for (j = 0; j < nk; j++) {
            const float *vr = v + (size_t)(slots ? slots[j] : j) * ld + t0;
            memcpy(&x0, vr, sizeof x0), memcpy(&x1, vr + 8, sizeof x1);
            memcpy(&x2, vr + 16, sizeof x2), memcpy(&x3, vr + 24, sizeof x3);
            a0 += p[j] * x0, a1 += p[j] * x1, a2 += p[j] * x2, a3 += p[j] * x3;
        }
        memcpy(out + t0, &a0, sizeof a0), memcpy(out + t0 + 8, &a1, sizeof a1);
        memcpy(out + t0 + 16, &a2, sizeof a2), memcpy(out + t0 + 24, &a3, sizeof a3);
    }
    if (t0 < hd) {
        memset(out + t0, 0, (size_t)(hd - t0) * sizeof(float));
        for (j = 0; j < nk; j++) {
            const float *restrict vr = v + (size_t)(slots ? slots[j] : j) * ld;
            for (int t = t0; t < hd; t++) out[t] += p[j] * vr[t];
        }
    }
}

void dmt_attention(float *out, int ldo, const float *q, int ldq, const float *k, const float *v, int ldkv,
                   int nq, int nk, int heads, int d, int causal_offset, float *scratch) {
    int hd = d / heads;
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

void dmt_attention_slots(float *out, const float *q, const float *k, const float *v, int ld, const int *slots,
                         int nk, int heads, float *scratch) {
    int hd = ld / heads;
    for (int h = 0; h < heads; h++)
        attend_row(out + h * hd, q + h * hd, k + h * hd, v + h * hd, (size_t)ld, slots, nk, hd, scratch);
}
