/* main.c — the deepmt command: dispatches to one subcommand a file (cli/cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "model/blas_kernels.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"serve", cmd_serve, "serve translations over HTTP (LibreTranslate-compatible JSON API)"},
    {"translate", cmd_translate, "translate sentences from stdin or a file"},
    {"inspect", cmd_inspect, "print a model's config, parameter count, dtype and memory use"},
    {"quantize", cmd_quantize, "write a copy of a model with int8 weights (about a quarter of the F32 size)"},
    {"probe", cmd_probe, "GET a running server's /health or /ready: exit 0 on 200 (health checks without curl)"},
    {"forward", cmd_forward, "run the network on token ids (JSON in, JSON out): tests, scoring"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: deepmt COMMAND [options]   (deepmt COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        char err[200], f32[64], i8[64], bf16[64];
        const dmt_kernels *k = dmt_kernels_select(err, sizeof err);
        if (!k) {
            fprintf(stderr, "deepmt: %s\n", err);
            return 1;
        }
        printf("deepmt %s (OpenBLAS %s kernels)\n", DEEPMT_VERSION, dmt_blas_corename());
        int bf = dmt_gemm_layout(k, DMT_PRECISION_BF16);
        printf("kernels: %s; linear layers: %s; --precision int8: %s; --precision bf16: %s\n", k->name,
               dmt_gemm_describe(k, (dmt_weight_layout)dmt_gemm_layout(k, DMT_PRECISION_F32), f32, sizeof f32),
               dmt_gemm_describe(k, DMT_LAYOUT_PACKED_I8, i8, sizeof i8),
               bf < 0 ? "unavailable (needs avx512bf16)" : dmt_gemm_describe(k, (dmt_weight_layout)bf, bf16, sizeof bf16));
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "deepmt: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
