/* blas_kernels.h — which OpenBLAS kernels this process runs.
 *
 * OpenBLAS (DYNAMIC_ARCH, as Debian builds it) picks its kernel family for the CPU
 * when the library loads, unless OPENBLAS_CORETYPE names one. Only the generic
 * level (CPUs without AVX2) still multiplies through it (its F32 products); from avx2
 * up the engine's own kernels do all the arithmetic, so the family changes neither
 * speed nor translations there (tests/sh/test_same_translation.sh). deepmt reports
 * it (`deepmt --version`, the server's start-up line, bench reports) all the same.
 */
#ifndef DMT_BLAS_KERNELS_H
#define DMT_BLAS_KERNELS_H

/* The kernel family OpenBLAS is running ("Haswell", "SkylakeX", "Cooperlake", ...). */
const char *dmt_blas_corename(void);

#endif
