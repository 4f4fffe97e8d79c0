/* kernels.h — deepmt's ISA-specific kernels and the one place where the ISA is chosen.
 *
 * Every x86-64 server CPU runs one of seven levels, each a table of function
 * pointers (one table per level, built at compile time with per-file target
 * pragmas, so the build keeps one set of flags):
 *
 *   generic     x86-64-v2 code; F32 products through OpenBLAS's sgemm
 *   avx2        AVX2+FMA: packed F32 panels of 16 columns (6x16 register tile), int8
 *   avxvnni     + AVX-VNNI int8 products (vpdpbusd on ymm; no AVX-512: Alder Lake
 *               and later client cores, Xeon 6 E-cores)
 *   avx512      AVX-512F: packed F32 panels of 32 columns (12x32 tile)
 *   avx512vnni  + AVX-512 VNNI int8 products (vpdpbusd)
 *   avx512bf16  + AVX-512 BF16 products (vdpbf16ps, `--precision bf16`)
 *   amx         + AMX tiles (Sapphire Rapids and later): int8 products with tdpbusd
 *               (the same bits as avx512vnni), BF16 with tdpbf16ps (amx.inc); needs
 *               the OS to enable tile state and Linux to grant it (kernels.c)
 *
 * The CPU's features are read once; the process runs the best level it has, or the
 * one DEEPMT_ISA names (refused with a message when the CPU lacks it): tests and
 * comparisons run every level a machine can execute that way. Softmax, LayerNorm,
 * attention and F16/BF16 widening are compiled once per level from one source
 * (portable.inc) so each level's code is what that CPU runs, and tested there. Every
 * level with FMA (avx2 and up) computes the same bits, products included: sums over
 * a row run in 16 lanes whatever the vector width (portable.inc), so replicas on
 * different CPUs translate alike (tests/c/test_levels_agree.c).
 *
 * Products take a packed dmt_linear (model/gemm.h packs weights for a table); the
 * layout a table packs F32 weights in is its panel width (0: row-major for OpenBLAS).
 */
#ifndef DEEPMT_MODEL_KERNELS_H
#define DEEPMT_MODEL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef enum {
    DMT_ISA_GENERIC = 0,
    DMT_ISA_AVX2,
    DMT_ISA_AVXVNNI,
    DMT_ISA_AVX512,
    DMT_ISA_AVX512VNNI,
    DMT_ISA_AVX512BF16,
    DMT_ISA_AMX,
    DMT_ISA_COUNT
} dmt_isa;

/* y[n][out] (row stride ldy) = x[n][in] (row stride ldx) W^T + b over a packed lin;
 * threads > 1 splits the panels over that many OpenMP threads (same bits as 1). */
typedef void (*dmt_gemm_fn)(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads);

/* count products of the same rows x, each into its own y[c] (row stride ldy[c]) over
 * lins[c] (every one int8, the same in): x is quantised once for all of them. The
 * same bits as count dmt_gemm_fn calls. */
typedef void (*dmt_gemm_shared_fn)(float *const *y, const int *ldy, const float *x, int ldx, int n,
                                   const dmt_linear *const *lins, int count, int threads);

/* One query row against nk keys of one head (ops.h's attention): keys/values at
 * (slots ? slots[j] : j) * ld from k and v; p holds nk floats of scratch. */
typedef void (*dmt_attend_fn)(float *out, const float *q, const float *k, const float *v, size_t ld,
                              const int *slots, int nk, int hd, float *p);

/* The encoder's self-attention and the decoder's cross-attention: nq query rows (q rows
 * ldq apart, out rows ldo apart) against nk keys of one head given transposed in panels
 * of 16 keys: key j's column t at kt[(j / 16) * ldp + t * 16 + j % 16] (the last
 * panel's keys past nk are read, never used). Each score is one fused chain over the
 * head's columns in order: the same bits at every level with FMA, and for a row
 * whatever the rows beside it (not dmt_attend_fn's order, whose sums run in 16 lanes).
 * p holds nq * ldw floats, ldw = nk rounded up to 16 (row i's weights at p + i * ldw). */
typedef void (*dmt_attend_kt_fn)(float *out, size_t ldo, const float *q, size_t ldq, int nq, const float *kt,
                                 size_t ldp, const float *v, size_t ld, int nk, int hd, float *p);

typedef struct dmt_kernels {
    dmt_isa isa;
    const char *name;     /* "avx2": what DEEPMT_ISA takes and reports print */
    int panel_f32;        /* output columns per packed F32 panel; 0: row-major, OpenBLAS */
    int panel_i8;         /* output columns per int8 panel (groups of 4 inputs, gemm.h) */
    int i8_offset;        /* 1: the int8 product adds 128 to activations (u8 x s8) and
                             subtracts 128 * column sums */
    dmt_gemm_fn gemm_f32; /* NULL when panel_f32 == 0 */
    dmt_gemm_fn gemm_bf16; /* NULL where the level has no BF16 arithmetic */
    dmt_gemm_fn gemm_i8;
    dmt_gemm_shared_fn gemm_i8_shared; /* NULL: one gemm_i8 call a product */
    int emulated;         /* 1: an emulated level's table (test programs only, below) */
    void (*softmax)(float *x, int n, int len);
    void (*log_softmax)(float *x, int n, int len);
    void (*norm_row)(float *x, int d, const float *gamma, const float *beta, float eps);
    dmt_attend_fn attend_row;
    dmt_attend_kt_fn attend_kt;
    void (*f16_to_f32_n)(float *dst, const void *src, size_t n);
    void (*bf16_to_f32_n)(float *dst, const void *src, size_t n);
} dmt_kernels;

/* "generic", "avx2", ...; NULL for an out-of-range level. */
const char *dmt_isa_name(dmt_isa isa);

/* The table of a level, or NULL when this CPU (or this compiler) cannot run it. */
const dmt_kernels *dmt_kernels_for(dmt_isa isa);

/* The process's level: DEEPMT_ISA when set, else the best this CPU runs. Decided on
 * the first call and kept. NULL with a message (unknown name, CPU lacks it) in err. */
const dmt_kernels *dmt_kernels_select(char *err, size_t errlen);

/* The same, for code that has no error path (ops on models loaded already, which
 * selected successfully): the best level when DEEPMT_ISA was refused. */
const dmt_kernels *dmt_kernels_active(void);

/* Threads each matrix product may use (the engine's, OpenBLAS's included). The
 * process-wide setting, as OpenBLAS's own is; default 1. */
void dmt_kernels_set_threads(int threads);
int dmt_kernels_threads(void);

/* Symmetric int8 of one row: scale = max|x| / 127, q = round(x / scale) in
 * [-127, 127] (never -128: the kernels rely on |q| <= 127). Returns the scale (0 for
 * an all-zero row, whose q are all 0). The one rule for weights and activations. */
float dmt_quantize_row(int8_t *q, const float *x, int n);

/* F16 / BF16 -> F32 over n values with the process's level (the loader's widening):
 * src holds n little-endian 16-bit values (any alignment), dst gets n floats.
 * Bit-for-bit equal to safetensors.h's per-value functions (NaNs stay NaN with their
 * sign and payload) at every level. */
void dmt_f16_to_f32_n(float *dst, const void *src, size_t n);
void dmt_bf16_to_f32_n(float *dst, const void *src, size_t n);

/* per-level tables (kernels_*.c); NULL where the compiler cannot build the level */
extern const dmt_kernels dmt_kernels_generic, dmt_kernels_avx2, dmt_kernels_avxvnni, dmt_kernels_avx512,
    dmt_kernels_avx512vnni, dmt_kernels_avx512bf16, dmt_kernels_amx;

/* Emulated levels, for tests. The test programs link kernels_avx512.c and
 * kernels_avxvnni.c a second time, built on SIMDe's portable AVX-512 (libsimde-dev,
 * itself on AVX2) and, for amx, on amx.h's software model of the tiles: the same
 * kernel source, so a machine without them still executes the avxvnni, avx512,
 * avx512vnni, avx512bf16 and amx code (tests/c/test_gemm.c; tests/run.sh runs the op,
 * golden, beam and checkpoint tests with DEEPMT_ISA naming them). The deepmt binary
 * does not link them (weak symbols: their addresses are NULL there). */
extern const dmt_kernels dmt_kernels_avxvnni_emulated __attribute__((weak)),
    dmt_kernels_avx512_emulated __attribute__((weak)),
    dmt_kernels_avx512vnni_emulated __attribute__((weak)), dmt_kernels_avx512bf16_emulated __attribute__((weak)),
    dmt_kernels_amx_emulated __attribute__((weak));
/* The emulated table of a level this CPU lacks; NULL where it runs the level itself,
 * where the emulation is not linked, or where the CPU lacks AVX2 (SIMDe's base here).
 * dmt_kernels_select takes it when DEEPMT_ISA names such a level; the best level
 * is always a native one. */
const dmt_kernels *dmt_kernels_emulated(dmt_isa isa);

#endif
