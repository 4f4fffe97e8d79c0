/* amx.h — the AMX tile instructions the amx level uses (kernels.h), and a software
 * model of them in plain C.
 *
 * The amx kernels (amx.inc) are written against a thin layer of seven operations:
 * LDTILECFG, TILERELEASE, TILEZERO, TILELOADD, TILESTORED, TDPBUSD, TDPBF16PS. In the
 * library they are the instructions themselves (inline asm); in the test programs'
 * emulated build (kernels.h: dmt_kernels_amx_emulated) they are the functions below,
 * which follow the Intel SDM's pseudocode for palette 1 (8 tiles of at most 16 rows x
 * 64 bytes), so the same kernel source runs, and is tested, on a CPU without AMX.
 *
 * Faults (#UD / #GP in hardware: a bad config, mismatched shapes, a tile used before
 * LDTILECFG or after TILERELEASE) print a message and abort: the kernels never cause
 * them, so one is a bug to see at once.
 */
#ifndef DEEPMT_MODEL_KERNELS_AMX_H
#define DEEPMT_MODEL_KERNELS_AMX_H

#include <stddef.h>
#include <stdint.h>

#define DMT_AMX_TILES 8
#define DMT_AMX_ROWS 16
#define DMT_AMX_COLSB 64

/* The 64-byte memory operand of LDTILECFG (palette 1). */
typedef struct {
    uint8_t palette;   /* 1; 0 releases the tiles */
    uint8_t start_row; /* 0 (only non-zero while an interrupted load is restarted) */
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes a row of tile t; entries 8-15 must be 0 */
    uint8_t rows[16];   /* rows of tile t */
} dmt_amx_config;

_Static_assert(sizeof(dmt_amx_config) == 64, "LDTILECFG reads 64 bytes");

/* One thread's tile state: the config LDTILECFG loaded and the 8 tile registers. */
typedef struct {
    dmt_amx_config cfg;
    int configured; /* 0: the init state (before LDTILECFG, after TILERELEASE) */
    uint8_t tile[DMT_AMX_TILES][DMT_AMX_ROWS][DMT_AMX_COLSB];
} dmt_amx_model;

/* The software model, one function an instruction (amx_model.c). t, c, a, b: tile
 * numbers 0-7; stride: bytes between rows in memory (any value, 0 included). */
void dmt_amx_ldtilecfg(dmt_amx_model *m, const dmt_amx_config *cfg);
void dmt_amx_tilerelease(dmt_amx_model *m);
void dmt_amx_tilezero(dmt_amx_model *m, int t);
void dmt_amx_tileloadd(dmt_amx_model *m, int t, const void *base, ptrdiff_t stride);
void dmt_amx_tilestored(dmt_amx_model *m, int t, void *base, ptrdiff_t stride);
/* c[m][n] += sum over k of the four u8 bytes of a[m] dword k times the four s8 bytes
 * of b[k] dword n (int32, wrapping) */
void dmt_amx_tdpbusd(dmt_amx_model *m, int c, int a, int b);
/* c[m][n] (fp32) += bf16 pair products of a[m] dword k and b[k] dword n, as the SDM
 * computes them: even and odd products summed separately over k, then added */
void dmt_amx_tdpbf16ps(dmt_amx_model *m, int c, int a, int b);

#endif
