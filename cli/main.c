/* main.c — the deepmt command: dispatches to one subcommand a file (cli/cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "model/blas_kernels.h"
#include "model/gemm.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"serve", cmd_serve, "serve translations over HTTP (LibreTranslate-compatible JSON API)"},
    {"translate", cmd_translate, "translate sentences from stdin or a file"},
    {"inspect", cmd_inspect, "print a model's config, parameter count, dtype and memory use"},
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
        printf("deepmt %s (OpenBLAS %s kernels)\n", DEEPMT_VERSION, dmt_blas_corename());
        int f32 = dmt_gemm_layout(DMT_PRECISION_F32), bf16 = dmt_gemm_layout(DMT_PRECISION_BF16);
        printf("linear layers: %s; --precision bf16: %s\n", dmt_gemm_name((dmt_weight_layout)f32),
               bf16 < 0 ? "unavailable (no AVX-512 BF16)" : dmt_gemm_name((dmt_weight_layout)bf16));
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "deepmt: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
