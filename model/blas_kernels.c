/* blas_kernels.c — see blas_kernels.h. */
#include "model/blas_kernels.h"

char *openblas_get_corename(void); /* OpenBLAS; declared here to avoid cblas.h */

const char *dmt_blas_corename(void) {
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}
