/* bench_insn.c — the multiply-add instructions the kernels are built on, bare: how
 * long one takes when nothing else limits it (eight independent accumulators for
 * the vector ones; the AMX tile products with one and with four accumulators, and
 * with a tile load each from L1). Tells, on a new CPU, which precision its vector
 * units favour before any kernel is blamed: e.g. vdpbf16ps at a quarter of the FMA's
 * rate on Sapphire Rapids, at the FMA's rate on AMD Zen 5.
 *
 *   build/bench/bench_insn          (after make bench-bin; instructions this CPU
 *                                    lacks are listed as skipped)
 *
 * Each figure is the fastest of 5 runs of a loop; "MACs/ns" counts the multiply-adds
 * (an FMA lane: 1; a vdpbf16ps lane: 2; a vpdpbusd lane: 4; a tile product: 16 x 16 x
 * 64 int8 or 16 x 16 x 32 bf16).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define X86 1
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#ifdef X86
#define EIGHT(ins)                                                                                                   \
    ins " %%zmm16, %%zmm17, %%zmm0\n" ins " %%zmm16, %%zmm17, %%zmm1\n" ins " %%zmm16, %%zmm17, %%zmm2\n" ins           \
        " %%zmm16, %%zmm17, %%zmm3\n" ins " %%zmm16, %%zmm17, %%zmm4\n" ins " %%zmm16, %%zmm17, %%zmm5\n" ins           \
        " %%zmm16, %%zmm17, %%zmm6\n" ins " %%zmm16, %%zmm17, %%zmm7\n"
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7"

/* ns per instruction, fastest of 5 runs of n loops of `per` instructions */
#define TIME(per, n, body)                                                                                           \
    ({                                                                                                               \
        double best = 1e30;                                                                                          \
        for (int run = 0; run < 5; run++) {                                                                          \
            double t = now();                                                                                        \
            for (long i = 0; i < (n); i++) body;                                                                     \
            t = (now() - t) / ((double)(n) * (per)) * 1e9;                                                           \
            best = t < best ? t : best;                                                                              \
        }                                                                                                            \
        best;                                                                                                        \
    })

__attribute__((target("avx512f"))) static double fma_ns(void) {
    return TIME(8, 20000000L, __asm__ volatile(EIGHT("vfmadd231ps")::: CLOBBER));
}
__attribute__((target("avx512f,avx512bf16"))) static double dpbf16_ns(void) {
    return TIME(8, 20000000L, __asm__ volatile(EIGHT("vdpbf16ps")::: CLOBBER));
}
__attribute__((target("avx512f,avx512vnni"))) static double dpbusd_ns(void) {
    return TIME(8, 20000000L, __asm__ volatile(EIGHT("vpdpbusd")::: CLOBBER));
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static uint8_t tile_mem[4][1024] __attribute__((aligned(64)));

__attribute__((target("amx-tile,amx-int8,amx-bf16"))) static void amx_times(double t[4]) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) c.colsb[i] = 64, c.rows[i] = 16;
    memset(tile_mem, 1, sizeof tile_mem);
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
    t[0] = TIME(1, 2000000L, __asm__ volatile("tdpbusd %%tmm6, %%tmm4, %%tmm0" ::));
    t[1] = TIME(4, 1000000L,
                __asm__ volatile("tdpbusd %%tmm6, %%tmm4, %%tmm0\n tdpbusd %%tmm7, %%tmm4, %%tmm1\n"
                                 "tdpbusd %%tmm6, %%tmm5, %%tmm2\n tdpbusd %%tmm7, %%tmm5, %%tmm3" ::));
    t[2] = TIME(4, 1000000L,
                __asm__ volatile("tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n"
                                 "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::));
    /* the kernels' inner step: an activation tile and two weight tiles loaded (from
     * L1 here), two products */
    t[3] = TIME(2, 1000000L,
                __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n tileloadd (%2,%1,1), %%tmm6\n"
                                 "tileloadd (%3,%1,1), %%tmm7\n tdpbusd %%tmm6, %%tmm4, %%tmm0\n"
                                 "tdpbusd %%tmm7, %%tmm4, %%tmm1" ::"r"(tile_mem[0]),
                                 "r"(64L), "r"(tile_mem[1]), "r"(tile_mem[2]) : "memory"));
    __asm__ volatile("tilerelease");
}
#endif

static void row(const char *name, double ns, double macs) {
    printf("%-44s %7.3f ns  %8.1f MACs/ns\n", name, ns, macs / ns);
}

int main(void) {
#ifdef X86
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        printf("no AVX-512 on this CPU: nothing to measure\n");
        return 0;
    }
    double f = fma_ns();
    row("vfmadd231ps zmm (F32)", f, 16);
    if (__builtin_cpu_supports("avx512bf16")) {
        double b = dpbf16_ns();
        row("vdpbf16ps zmm (BF16)", b, 32);
        printf("  BF16 / F32 multiply-add rate: %.2fx\n", (32 / b) / (16 / f));
    } else {
        printf("vdpbf16ps: skipped (no AVX512_BF16)\n");
    }
    if (__builtin_cpu_supports("avx512vnni")) {
        double v = dpbusd_ns();
        row("vpdpbusd zmm (int8)", v, 64);
        printf("  int8 / F32 multiply-add rate: %.2fx\n", (64 / v) / (16 / f));
    } else {
        printf("vpdpbusd: skipped (no AVX512_VNNI)\n");
    }
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    int amx = (d >> 24 & 1) && (d >> 25 & 1) && (d >> 22 & 1);
    if (amx && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0) {
        double t[4];
        amx_times(t);
        row("tdpbusd, one accumulator", t[0], 16 * 16 * 64);
        row("tdpbusd, four accumulators", t[1], 16 * 16 * 64);
        row("tdpbf16ps, four accumulators", t[2], 16 * 16 * 32);
        row("3 tile loads (L1) + 2 tdpbusd, per tdpbusd", t[3], 16 * 16 * 64);
    } else {
        printf("AMX: skipped (%s)\n", amx ? "Linux refused tile data" : "the CPU lacks AMX");
    }
#else
    printf("not an x86-64 Linux machine: nothing to measure\n");
#endif
    return 0;
}
