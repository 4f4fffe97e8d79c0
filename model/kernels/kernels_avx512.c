/* kernels_avx512.c — the avx512, avx512vnni, avx512bf16 and amx levels (kernels.h);
 * the amx level's tile products are amx.inc's, included here to share the rest.
 *
 * Panels of 32 output columns (two zmm); 12 x rows against one panel keep 24
 * accumulators in registers while the panel stays in L1.
 *   F32 (AVX-512F): sgemm's results up to summation order.
 *   BF16 (vdpbf16ps, `--precision bf16`): weights and activations rounded to
 *     bfloat16, pairs of inputs multiplied and summed in F32.
 *   int8 (vpdpbusd, AVX-512 VNNI): unsigned activation bytes times signed weight
 *     bytes, four at a time into int32. Activations are quantised to [-127, 127] and
 *     stored + 128 as unsigned bytes; the accumulators start at -128 x the column's
 *     weight sum (stored with the panels), so they end at the exact signed product.
 */
#include "model/kernels/internal.h"
#include "model/kernels/amx.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(DMT_KERNELS_EMULATED)
/* The test build's second copy of this file (Makefile: kernels_avx512_emulated.o):
 * the same kernels on SIMDe's portable AVX-512 (native aliases map each _mm512_*
 * intrinsic to its SIMDe function, here built on AVX2), so that the test suite runs
 * these levels on a CPU without AVX-512. Only the tables' names differ; the
 * bfloat16 conversion of activations takes its scalar path (SIMDe has no
 * cvtne2ps; both round to nearest even). */
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define DMT_TARGET(features)
#define K(name) name##_avx512emu
#define TABLE(name) name##_emulated
#define EMULATED 1
/* the intrinsics used here that SIMDe 0.7.4 lacks, lane by lane (a masked
 * load must not touch the lanes it leaves out: they may lie past an array's end) */
static inline __m512 emu_maskz_loadu_ps(__mmask16 k, const void *p) {
    float v[16] = {0};
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy(&v[i], (const char *)p + 4 * i, 4);
    return _mm512_loadu_ps(v);
}
static inline void emu_mask_storeu_ps(void *p, __mmask16 k, __m512 a) {
    float v[16];
    _mm512_storeu_ps(v, a);
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((char *)p + 4 * i, &v[i], 4);
}
static inline __m512 emu_cvtepi32_ps(__m512i a) {
    int32_t q[16];
    float v[16];
    _mm512_storeu_si512(q, a);
    for (int i = 0; i < 16; i++) v[i] = (float)q[i];
    return _mm512_loadu_ps(v);
}
/* and three more the hand-vectorised quantisation uses: as the instructions define
 * them (the maximum a > b ? a : b; rounding to nearest even, the integer
 * indefinite 0x80000000 for NaN and out-of-range values; truncation to bytes) */
static inline float emu_reduce_max_ps(__m512 a) {
    float v[16];
    _mm512_storeu_ps(v, a);
    float m = v[0];
    for (int i = 1; i < 16; i++) m = v[i] > m ? v[i] : m;
    return m;
}
static inline __m512i emu_cvtps_epi32(__m512 a) {
    float v[16];
    int32_t q[16];
    _mm512_storeu_ps(v, a);
    for (int i = 0; i < 16; i++) q[i] = v[i] >= -0x1p31f && v[i] < 0x1p31f ? (int32_t)nearbyintf(v[i]) : INT32_MIN;
    return _mm512_loadu_si512(q);
}
static inline __m128i emu_cvtepi32_epi8(__m512i a) {
    int32_t q[16];
    uint8_t b[16];
    _mm512_storeu_si512(q, a);
    for (int i = 0; i < 16; i++) b[i] = (uint8_t)q[i];
    return _mm_loadu_si128((const __m128i *)b);
}
#define _mm512_maskz_loadu_ps emu_maskz_loadu_ps
#define _mm512_mask_storeu_ps emu_mask_storeu_ps
#define _mm512_cvtepi32_ps emu_cvtepi32_ps
#define _mm512_reduce_max_ps emu_reduce_max_ps
#define _mm512_cvtps_epi32 emu_cvtps_epi32
#define _mm512_cvtepi32_epi8 emu_cvtepi32_epi8
static inline __m512bh as_bh(__m512i v) {
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}
#define DMT_KERNELS_AVX512_BUILD 1
#elif defined(DMT_KERNELS_X86)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd,avx2,fma")
#define DMT_TARGET(features) __attribute__((target(features)))
#define K(name) name##_avx512
#define TABLE(name) name
#define EMULATED 0
#define as_bh(v) ((__m512bh)(v))
#define DMT_KERNELS_AVX512_BUILD 1
#endif

#ifdef DMT_KERNELS_AVX512_BUILD
#include "model/kernels/portable.inc"

#define P 32  /* output columns a panel */
#define MR 12 /* x rows a block: 12 x 2 accumulators + 2 weight vectors + 1 broadcast <= 32 zmm */

#define CASES(CALL) \
    CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6) CALL(7) CALL(8) CALL(9) CALL(10) CALL(11) CALL(12)

/* Store masks for the two 16-column halves of panel p (its live columns) and the
 * bias there, the accumulators' starting values. */
static void panel_start(const dmt_linear *lin, int p, __mmask16 *m0, __mmask16 *m1, __m512 *b0, __m512 *b1) {
    int j = p * P, cols = lin->out - j < P ? lin->out - j : P;
    *m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    *m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
    *b0 = lin->bias ? _mm512_maskz_loadu_ps(*m0, lin->bias + j) : _mm512_setzero_ps();
    *b1 = lin->bias ? _mm512_maskz_loadu_ps(*m1, lin->bias + j + 16) : _mm512_setzero_ps();
}

/* rows (<= MR, a compile-time constant after inlining) x rows against one F32 panel. */
__attribute__((always_inline)) static inline void block_f32(float *y, int ldy, const float *x, int ldx, const int rows,
                                                            const float *panel, int in, __m512 b0, __m512 b1,
                                                            __mmask16 m0, __mmask16 m1) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = b0, acc[i][1] = b1;
    for (int k = 0; k < in; k++) {
        __m512 w0 = _mm512_load_ps(panel + (size_t)k * P), w1 = _mm512_load_ps(panel + (size_t)k * P + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m512 a = _mm512_set1_ps(x[(size_t)i * ldx + k]);
                acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
            }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) {
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, m0, acc[i][0]);
            _mm512_mask_storeu_ps(y + (size_t)i * ldy + 16, m1, acc[i][1]);
        }
}

/* One product's operands. The panel functions take at most six arguments, all in
 * registers: with one on the stack, GCC's realigned AVX-512 frame needs a DWARF
 * expression perf cannot unwind through (bench/profile.py would lose the caller). */
typedef struct {
    float *y;
    const void *x;     /* F32 rows, or converted rows (bfloat16 pairs, int8 quads) */
    const float *xs;   /* int8: the rows' scales */
    int ldy, ldx, n;   /* ldx in elements of x's type */
    const dmt_linear *lin;
} product;

/* One panel against rows [0, n) of x; every panel is independent (the parallel unit). */
static void panel_f32(const product *pr, int p) {
    const dmt_linear *lin = pr->lin;
    int j = p * P;
    __mmask16 m0, m1;
    __m512 b0, b1;
    panel_start(lin, p, &m0, &m1, &b0, &b1);
    const float *panel = (const float *)lin->packed + (size_t)p * P * lin->in;
    for (int i = 0; i < pr->n; i += MR) {
        float *yi = pr->y + (size_t)i * pr->ldy + j;
        const float *xi = (const float *)pr->x + (size_t)i * pr->ldx;
        switch (pr->n - i < MR ? pr->n - i : MR) {
#define CALL(R) case R: block_f32(yi, pr->ldy, xi, pr->ldx, R, panel, lin->in, b0, b1, m0, m1); break;
            CASES(CALL)
#undef CALL
        }
    }
}

/* Runs one of the panel functions over every panel, on `threads` OpenMP threads. One
 * thread runs the loop plainly: an OpenMP region, even an if(0) one, costs a team
 * set-up per product. */
static void all_panels(void (*fn)(const product *, int), const product *pr, int threads) {
    int panels = dmt_panels_of(pr->lin->out, P);
    if (threads > panels) threads = panels;
    if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int p = 0; p < panels; p++) fn(pr, p);
    } else {
        for (int p = 0; p < panels; p++) fn(pr, p);
    }
}

static void gemm_f32_avx512(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    product pr = {.y = y, .x = x, .ldy = ldy, .ldx = ldx, .n = n, .lin = lin};
    all_panels(panel_f32, &pr, threads);
}

/* ---- BF16 ------------------------------------------------------------------------- */

/* float -> bfloat16, round to nearest even (weights and activations are finite) */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

__attribute__((always_inline)) DMT_TARGET("avx512bf16") static inline void
block_bf16(float *y, int ldy, const uint32_t *xb, int ldxb, const int rows, const uint16_t *panel, int pairs,
           __m512 b0, __m512 b1, __mmask16 m0, __mmask16 m1) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = b0, acc[i][1] = b1;
    for (int q = 0; q < pairs; q++) {
        __m512bh w0 = as_bh(_mm512_load_si512(panel + (size_t)q * 2 * P));
        __m512bh w1 = as_bh(_mm512_load_si512(panel + (size_t)q * 2 * P + P));
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m512bh a = as_bh(_mm512_set1_epi32((int)xb[(size_t)i * ldxb + q]));
                acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, w0);
                acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, w1);
            }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) {
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, m0, acc[i][0]);
            _mm512_mask_storeu_ps(y + (size_t)i * ldy + 16, m1, acc[i][1]);
        }
}

DMT_TARGET("avx512bf16") static void panel_bf16(const product *pr, int p) {
    const dmt_linear *lin = pr->lin;
    int j = p * P, pairs = (lin->in + 1) / 2;
    __mmask16 m0, m1;
    __m512 b0, b1;
    panel_start(lin, p, &m0, &m1, &b0, &b1);
    const uint16_t *panel = (const uint16_t *)lin->packed + (size_t)p * P * pairs * 2;
    for (int i = 0; i < pr->n; i += MR) {
        float *yi = pr->y + (size_t)i * pr->ldy + j;
        const uint32_t *xi = (const uint32_t *)pr->x + (size_t)i * pairs;
        switch (pr->n - i < MR ? pr->n - i : MR) {
#define CALL(R) case R: block_bf16(yi, pr->ldy, xi, pairs, R, panel, pairs, b0, b1, m0, m1); break;
            CASES(CALL)
#undef CALL
        }
    }
}

/* x rows as bfloat16 pairs, ldd pairs a row (>= (in + 1) / 2), zero-padded. */
DMT_TARGET("avx512bf16") static void rows_to_bf16(uint32_t *dst, int ldd, const float *x, int ldx, int n, int in) {
    for (int i = 0; i < n; i++) {
        const float *src = x + (size_t)i * ldx;
        uint16_t *d = (uint16_t *)(dst + (size_t)i * ldd);
        int k = 0;
#ifndef DMT_KERNELS_EMULATED
        for (; k + 32 <= in; k += 32) /* cvtne2ps puts its second operand in the low half */
            _mm512_storeu_si512(d + k, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16),
                                                                    _mm512_loadu_ps(src + k)));
#endif
        for (; k < in; k++) d[k] = to_bf16(src[k]);
        for (; k < 2 * ldd; k++) d[k] = 0;
    }
}

__attribute__((noinline)) DMT_TARGET("avx512bf16") static void gemm_bf16_avx512(float *y, int ldy, const float *x,
                                                                            int ldx, int n, const dmt_linear *lin,
                                                                            int threads) {
    uint32_t xb[DMT_XBUF_BYTES / 4];
    int pairs = (lin->in + 1) / 2, chunk = (DMT_XBUF_BYTES / 4) / pairs;
    if (chunk > MR) chunk -= chunk % MR;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int rows = n - i0 < chunk ? n - i0 : chunk;
        rows_to_bf16(xb, pairs, x + (size_t)i0 * ldx, ldx, rows, lin->in);
        product pr = {.y = y + (size_t)i0 * ldy, .x = xb, .ldy = ldy, .ldx = pairs, .n = rows, .lin = lin};
        all_panels(panel_bf16, &pr, threads);
    }
}

/* ---- int8 (VNNI) ------------------------------------------------------------------ */

/* acc += a (unsigned bytes) . w (signed bytes), four at a time. GCC 12 compiles the
 * intrinsic over the accumulator array with register copies and a stack store of
 * the sum after every instruction of the inner loop (bench_gemm: ~200 GOP/s, half
 * of what the same loop of vpdpbusd runs at); the instruction written out keeps
 * the 24 sums in registers. */
#if EMULATED
#define DPBUSD(acc, a, w) ((acc) = _mm512_dpbusd_epi32((acc), (a), (w)))
#else
#define DPBUSD(acc, a, w) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w))
#endif

__attribute__((always_inline)) DMT_TARGET("avx512vnni") static inline void
block_i8(float *y, int ldy, const uint32_t *xq, int quads, const float *xs, const int rows, const int8_t *panel,
         __m512i c0, __m512i c1, __m512 s0, __m512 s1, __m512 b0, __m512 b1, __mmask16 m0, __mmask16 m1) {
    __m512i acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) acc[i][0] = c0, acc[i][1] = c1;
    for (int q = 0; q < quads; q++) {
        __m512i w0 = _mm512_load_si512(panel + (size_t)q * P * 4);
        __m512i w1 = _mm512_load_si512(panel + (size_t)q * P * 4 + 64);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++)
            if (i < rows) {
                __m512i a = _mm512_set1_epi32((int)xq[(size_t)i * quads + q]);
                DPBUSD(acc[i][0], a, w0);
                DPBUSD(acc[i][1], a, w1);
            }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
        if (i < rows) {
            __m512 sa = _mm512_set1_ps(xs[i]);
            _mm512_mask_storeu_ps(y + (size_t)i * ldy, m0,
                                  _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][0]), _mm512_mul_ps(sa, s0), b0));
            _mm512_mask_storeu_ps(y + (size_t)i * ldy + 16, m1,
                                  _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][1]), _mm512_mul_ps(sa, s1), b1));
        }
}

DMT_TARGET("avx512vnni") static void panel_i8(const product *pr, int p) {
    const dmt_linear *lin = pr->lin;
    int j = p * P, quads = dmt_quads_of(lin->in);
    __mmask16 m0, m1;
    __m512 b0, b1;
    panel_start(lin, p, &m0, &m1, &b0, &b1);
    const int32_t *comp = dmt_i8_comp(lin, P) + j;
    const float *ws = dmt_i8_scales(lin, P) + j;
    __m512i c0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(comp));
    __m512i c1 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(comp + 16));
    __m512 s0 = _mm512_loadu_ps(ws), s1 = _mm512_loadu_ps(ws + 16);
    const int8_t *panel = (const int8_t *)lin->packed + (size_t)p * P * quads * 4;
    for (int i = 0; i < pr->n; i += MR) {
        float *yi = pr->y + (size_t)i * pr->ldy + j;
        const uint32_t *xi = (const uint32_t *)pr->x + (size_t)i * quads;
        switch (pr->n - i < MR ? pr->n - i : MR) {
#define CALL(R) case R: block_i8(yi, pr->ldy, xi, quads, pr->xs + i, R, panel, c0, c1, s0, s1, b0, b1, m0, m1); break;
            CASES(CALL)
#undef CALL
        }
    }
}

/* K(quantize_rows)'s bytes and scales, value for value, vectorised by hand: GCC's
 * version of the portable loop keeps one chain of maxima and turns the clamps into
 * mask blends, which made it half of a 128 x 256 x 256 product at the amx level.
 * max_ps(a, b) is a > b ? a : b, the portable comparisons (a NaN is passed over by
 * the maximum and converts to the same integer); rounding is the CPU's default,
 * to nearest even, as the portable 1.5 * 2^23 trick; clamping before rounding
 * gives the same integers as after it. */
static void quantize_rows16(uint8_t *dst, float *scales, const float *x, int ldx, int n, int in, int offset, int ldq) {
    int padded = dmt_quads_of(in) * 4;
    if (ldq > padded) padded = ldq;
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), add = _mm512_set1_epi32(offset ? 128 : 0);
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    for (int i = 0; i < n; i++) {
        const float *r = x + (size_t)i * ldx;
        uint8_t *q = dst + (size_t)i * padded;
        __m512 m0 = _mm512_setzero_ps(), m1 = m0;
        int k = 0;
        for (; k + 32 <= in; k += 32) {
            m0 = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512(r + k), absmask)), m0);
            m1 = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512(r + k + 16), absmask)), m1);
        }
        for (; k < in; k += 16) {
            __m512 v = _mm512_maskz_loadu_ps((__mmask16)(in - k >= 16 ? 0xffff : (1u << (in - k)) - 1), r + k);
            m0 = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), absmask)), m0);
        }
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
        float inv = amax > 0 ? 127.0f / amax : 0.0f;
        scales[i] = amax > 0 ? amax / 127.0f : 0.0f;
        const __m512 vinv = _mm512_set1_ps(inv);
#define QUANTIZE16(v) _mm512_cvtepi32_epi8(_mm512_add_epi32( \
        _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_mul_ps((v), vinv)))), add))
        for (k = 0; k + 16 <= in; k += 16) _mm_storeu_si128((__m128i *)(q + k), QUANTIZE16(_mm512_loadu_ps(r + k)));
        for (; k < padded; k += 16) { /* the last inputs, then the padding: 0 times inv, plus add */
            __mmask16 live = (__mmask16)(in - k <= 0 ? 0 : (1u << (in - k)) - 1);
            __m128i bytes = QUANTIZE16(_mm512_maskz_loadu_ps(live, r + k));
            if (k + 16 <= padded) {
                _mm_storeu_si128((__m128i *)(q + k), bytes);
            } else {
                uint8_t last[16];
                _mm_storeu_si128((__m128i *)last, bytes);
                memcpy(q + k, last, (size_t)(padded - k));
            }
        }
#undef QUANTIZE16
    }
}

/* The int8 products of several weights over the same x (one weight: gemm_i8_vnni),
 * each chunk of x quantised once for all of them. */
__attribute__((noinline)) static void gemm_i8_vnni_shared(float *const *y, const int *ldy, const float *x, int ldx,
                                                          int n, const dmt_linear *const *lins, int count,
                                                          int threads) {
    uint32_t xq[DMT_XBUF_BYTES / 4];
    float xs[DMT_XBUF_ROWS];
    int quads = dmt_quads_of(lins[0]->in), chunk = (DMT_XBUF_BYTES / 4) / quads;
    if (chunk > DMT_XBUF_ROWS) chunk = DMT_XBUF_ROWS;
    if (chunk > MR) chunk -= chunk % MR;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int rows = n - i0 < chunk ? n - i0 : chunk;
        quantize_rows16((uint8_t *)xq, xs, x + (size_t)i0 * ldx, ldx, rows, lins[0]->in, 1, 0);
        for (int c = 0; c < count; c++) {
            product pr = {.y = y[c] + (size_t)i0 * ldy[c], .x = xq, .xs = xs, .ldy = ldy[c], .ldx = quads,
                          .n = rows, .lin = lins[c]};
            all_panels(panel_i8, &pr, threads);
        }
    }
}

static void gemm_i8_vnni(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    gemm_i8_vnni_shared(&y, &ldy, x, ldx, n, &lin, 1, threads);
}

/* ---- AMX ---------------------------------------------------------------------------- */
#include "model/kernels/amx.inc"

#ifndef DMT_KERNELS_EMULATED
#pragma GCC pop_options
#endif

#define AVX512_COMMON                                                                                                \
    .panel_f32 = P, .gemm_f32 = gemm_f32_avx512, .softmax = K(softmax), .log_softmax = K(log_softmax),               \
    .norm_row = K(norm_row), .attend_row = K(attend_row), .attend_kt = K(attend_kt),                                 \
    .f16_to_f32_n = K(f16_to_f32_n), .bf16_to_f32_n = K(bf16_to_f32_n), .emulated = EMULATED

/* without VNNI, int8 runs the AVX2 kernel (its panels are 16 columns wide) */
const dmt_kernels TABLE(dmt_kernels_avx512) = {.isa = DMT_ISA_AVX512, .name = "avx512", AVX512_COMMON,
                                        .panel_i8 = 16, .i8_offset = 0, .gemm_i8 = dmt_gemm_i8_avx2};
const dmt_kernels TABLE(dmt_kernels_avx512vnni) = {.isa = DMT_ISA_AVX512VNNI, .name = "avx512vnni", AVX512_COMMON,
                                            .panel_i8 = P, .i8_offset = 1, .gemm_i8 = gemm_i8_vnni,
                                            .gemm_i8_shared = gemm_i8_vnni_shared};
const dmt_kernels TABLE(dmt_kernels_avx512bf16) = {.isa = DMT_ISA_AVX512BF16, .name = "avx512bf16", AVX512_COMMON,
                                            .panel_i8 = P, .i8_offset = 1, .gemm_i8 = gemm_i8_vnni,
                                            .gemm_i8_shared = gemm_i8_vnni_shared, .gemm_bf16 = gemm_bf16_avx512};
/* the same packed layouts as avx512bf16: only the int8 and BF16 products differ */
const dmt_kernels TABLE(dmt_kernels_amx) = {.isa = DMT_ISA_AMX, .name = "amx", AVX512_COMMON, .panel_i8 = P,
                                            .i8_offset = 1, .gemm_i8 = gemm_i8_amx,
                                            .gemm_i8_shared = gemm_i8_amx_shared, .gemm_bf16 = gemm_bf16_amx};

#endif
