/* internal.h — shared by the kernels' own files (not part of the engine's API).
 *
 * DMT_KERNELS_X86 is the one compiler guard: the AVX2 and AVX-512 levels are built
 * where GCC targets x86-64 (clang lacks some of the AVX-512 BF16 vector casts used);
 * elsewhere only the generic level exists.
 */
#ifndef DEEPMT_MODEL_KERNELS_INTERNAL_H
#define DEEPMT_MODEL_KERNELS_INTERNAL_H

#include "model/kernels/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DMT_KERNELS_X86 1
#endif

/* Activations are converted (bfloat16 pairs, int8 quads) a chunk of rows at a time
 * into a stack buffer of this many bytes, so a product never allocates (and never
 * fails). 32 KiB: bench/profile.py's perf copies 64 KiB of stack a sample, which must
 * reach past this frame to see the callers. The loader refuses wider layers. */
#define DMT_XBUF_BYTES 32768
#define DMT_XBUF_ROWS 1024 /* and at most this many rows (their scales) */

static inline int dmt_panels_of(int out, int panel) { return (out + panel - 1) / panel; }
static inline int dmt_quads_of(int in) { return (in + 3) / 4; }

/* The int8 packed block (gemm.h): the panels, then the per-column compensation
 * (128 x column sum, int32) and the weight scales (float), each panels x panel long. */
static inline size_t dmt_i8_panels_bytes(int out, int in, int panel) {
    return (size_t)dmt_panels_of(out, panel) * panel * (size_t)dmt_quads_of(in) * 4;
}
static inline const int32_t *dmt_i8_comp(const dmt_linear *lin, int panel) {
    return (const int32_t *)((const char *)lin->packed + dmt_i8_panels_bytes(lin->out, lin->in, panel));
}
static inline const float *dmt_i8_scales(const dmt_linear *lin, int panel) {
    return (const float *)(dmt_i8_comp(lin, panel) + (size_t)dmt_panels_of(lin->out, panel) * panel);
}

/* The AVX2 F32 product (panels of 16): also the avxvnni level's. */
void dmt_gemm_f32_avx2(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads);
/* The AVX2 int8 product (panels of 16): also the avx512 level's, which lacks VNNI. */
void dmt_gemm_i8_avx2(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads);

#endif
