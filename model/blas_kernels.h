/* blas_kernels.h — which OpenBLAS kernels this process runs.
 *
 * OpenBLAS (DYNAMIC_ARCH, as Debian builds it) picks its kernel family for the CPU
 * when the library loads, unless OPENBLAS_CORETYPE names one. The choice matters:
 * on the AVX-512 AMD EPYC used for the benchmarks, OpenBLAS's own pick (Cooperlake)
 * runs deepmt translate ~15% faster than OPENBLAS_CORETYPE=Haswell, with identical
 * translations. deepmt reports the family (`deepmt --version`, the server's start-up
 * line, bench reports) so a slow configuration is visible.
 */
#ifndef DMT_BLAS_KERNELS_H
#define DMT_BLAS_KERNELS_H

/* The kernel family OpenBLAS is running ("Haswell", "SkylakeX", "Cooperlake", ...). */
const char *dmt_blas_corename(void);

#endif
