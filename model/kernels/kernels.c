/* kernels.c — CPU detection, level selection, threads, quantisation (kernels.h). */
#include "model/kernels/internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DMT_KERNELS_X86
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

void openblas_set_num_threads(int num_threads); /* OpenBLAS; declared here to avoid cblas.h */

static const char *const isa_names[DMT_ISA_COUNT] = {"generic",    "avx2",       "avxvnni", "avx512",
                                                     "avx512vnni", "avx512bf16", "amx"};

const char *dmt_isa_name(dmt_isa isa) { return isa >= 0 && isa < DMT_ISA_COUNT ? isa_names[isa] : NULL; }

#ifdef DMT_KERNELS_X86
/* AMX takes three yeses, asked once a process: the CPU's (CPUID leaf 7: AMX-TILE,
 * AMX-INT8, AMX-BF16), the OS's (XCR0 enables the tile config and tile data state,
 * bits 17 and 18) and, on Linux, the kernel's permission for this process to use
 * tile data (arch_prctl ARCH_REQ_XCOMP_PERM), which must be granted before any
 * thread touches a tile: detection runs before any product. why: the first no. */
static struct {
    pthread_once_t once;
    int usable;
    char why[96];
} amx = {PTHREAD_ONCE_INIT, 0, ""};

static void amx_detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 25 & 1) || !(d >> 22 & 1)) {
        snprintf(amx.why, sizeof amx.why, "the CPU lacks AMX-TILE, AMX-INT8 or AMX-BF16");
        return;
    }
    uint32_t lo = 0, hi = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1)) /* OSXSAVE: XGETBV is there */
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo >> 17 & 3) != 3) {
        snprintf(amx.why, sizeof amx.why, "the OS does not enable AMX tile state (XCR0)");
        return;
    }
#ifdef __linux__
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
        snprintf(amx.why, sizeof amx.why, "Linux refused AMX tile data to this process (arch_prctl: %s)",
                 strerror(errno));
        return;
    }
#endif
    amx.usable = 1;
}

static int amx_usable(void) {
    pthread_once(&amx.once, amx_detect);
    return amx.usable;
}
#endif

/* Whether this CPU runs a level (its own features and every lower level's). */
static int cpu_has(dmt_isa isa) {
#ifdef DMT_KERNELS_X86
    __builtin_cpu_init();
    switch (isa) {
    case DMT_ISA_GENERIC: return 1;
    case DMT_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    /* not implied by the AVX-512 levels (Skylake-SP and Ice Lake-SP lack it), nor
     * implying them: a level of its own above avx2, below them in preference */
    case DMT_ISA_AVXVNNI: return cpu_has(DMT_ISA_AVX2) && __builtin_cpu_supports("avxvnni");
    case DMT_ISA_AVX512: /* F with the BW, DQ, VL and CD extensions every AVX-512 server CPU has */
        return cpu_has(DMT_ISA_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512cd");
    case DMT_ISA_AVX512VNNI:
        return cpu_has(DMT_ISA_AVX512) && __builtin_cpu_supports("avx512vnni");
    case DMT_ISA_AVX512BF16: return cpu_has(DMT_ISA_AVX512VNNI) && __builtin_cpu_supports("avx512bf16");
    case DMT_ISA_AMX: return cpu_has(DMT_ISA_AVX512BF16) && amx_usable();
    default: return 0;
    }
#else
    return isa == DMT_ISA_GENERIC;
#endif
}

const dmt_kernels *dmt_kernels_for(dmt_isa isa) {
    if (isa < 0 || isa >= DMT_ISA_COUNT || !cpu_has(isa)) return NULL;
#ifdef DMT_KERNELS_X86
    static const dmt_kernels *const tables[DMT_ISA_COUNT] = {&dmt_kernels_generic,    &dmt_kernels_avx2,
                                                             &dmt_kernels_avxvnni,    &dmt_kernels_avx512,
                                                             &dmt_kernels_avx512vnni, &dmt_kernels_avx512bf16,
                                                             &dmt_kernels_amx};
    return tables[isa];
#else
    return &dmt_kernels_generic;
#endif
}

const dmt_kernels *dmt_kernels_emulated(dmt_isa isa) {
#ifdef DMT_KERNELS_X86
    const dmt_kernels *t = isa == DMT_ISA_AVXVNNI      ? &dmt_kernels_avxvnni_emulated
                           : isa == DMT_ISA_AVX512     ? &dmt_kernels_avx512_emulated
                           : isa == DMT_ISA_AVX512VNNI ? &dmt_kernels_avx512vnni_emulated
                           : isa == DMT_ISA_AVX512BF16 ? &dmt_kernels_avx512bf16_emulated
                           : isa == DMT_ISA_AMX        ? &dmt_kernels_amx_emulated
                                                       : NULL;
    if (!t || cpu_has(isa) || !cpu_has(DMT_ISA_AVX2)) return NULL;
    return t;
#else
    (void)isa;
    return NULL;
#endif
}

/* The choice, made once (DEEPMT_ISA is read when the first model loads or the first
 * report is printed; later changes to the environment do not switch kernels under
 * loaded weights). */
static struct {
    pthread_once_t once;
    const dmt_kernels *chosen, *best;
    char err[200];
} choice = {PTHREAD_ONCE_INIT, NULL, NULL, ""};

static void choose(void) {
    for (int i = DMT_ISA_COUNT - 1; i >= 0 && !choice.best; i--) choice.best = dmt_kernels_for((dmt_isa)i);
    const char *want = getenv("DEEPMT_ISA");
    if (!want || !*want) {
        choice.chosen = choice.best;
        return;
    }
    for (int i = 0; i < DMT_ISA_COUNT; i++)
        if (!strcmp(want, isa_names[i])) {
            choice.chosen = dmt_kernels_for((dmt_isa)i);
            if (!choice.chosen) choice.chosen = dmt_kernels_emulated((dmt_isa)i);
            if (!choice.chosen) {
                const char *why = "";
#ifdef DMT_KERNELS_X86
                if (i == DMT_ISA_AMX && cpu_has(DMT_ISA_AVX512BF16)) why = amx.why; /* detected by now */
#endif
                snprintf(choice.err, sizeof choice.err, "DEEPMT_ISA=%s: this CPU cannot run it (its best level is %s)%s%s",
                         want, choice.best->name, *why ? ": " : "", why);
            }
            return;
        }
    snprintf(choice.err, sizeof choice.err,
             "DEEPMT_ISA=%.32s: unknown level (generic, avx2, avxvnni, avx512, avx512vnni, avx512bf16 or amx)", want);
}

const dmt_kernels *dmt_kernels_select(char *err, size_t errlen) {
    pthread_once(&choice.once, choose);
    if (!choice.chosen && err && errlen) snprintf(err, errlen, "%s", choice.err);
    return choice.chosen;
}

const dmt_kernels *dmt_kernels_active(void) {
    pthread_once(&choice.once, choose);
    return choice.chosen ? choice.chosen : choice.best;
}

/* Process-wide like OpenBLAS's own setting, which it also drives. */
static atomic_int product_threads = 1;

void dmt_kernels_set_threads(int threads) {
    if (threads < 1) threads = 1;
    atomic_store(&product_threads, threads);
    openblas_set_num_threads(threads);
}

int dmt_kernels_threads(void) { return atomic_load(&product_threads); }

float dmt_quantize_row(int8_t *q, const float *x, int n) {
    float amax = 0;
    for (int k = 0; k < n; k++) amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
    if (!(amax > 0)) {
        memset(q, 0, (size_t)n);
        return 0;
    }
    /* the arithmetic of the kernels' activation quantisation (portable.inc), value
     * for value: the 1.5 * 2^23 trick rounds half to even */
    float inv = 127.0f / amax;
    for (int k = 0; k < n; k++) {
        float v = (x[k] * inv + 12582912.0f) - 12582912.0f;
        v = v > 127.0f ? 127.0f : v;
        v = v < -127.0f ? -127.0f : v;
        q[k] = (int8_t)v;
    }
    return amax / 127.0f;
}

void dmt_f16_to_f32_n(float *dst, const void *src, size_t n) { dmt_kernels_active()->f16_to_f32_n(dst, src, n); }
void dmt_bf16_to_f32_n(float *dst, const void *src, size_t n) { dmt_kernels_active()->bf16_to_f32_n(dst, src, n); }
