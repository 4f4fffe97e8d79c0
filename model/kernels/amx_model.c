/* amx_model.c — the software model of the AMX tile instructions (amx.h), after the
 * Intel SDM's pseudocode for palette 1. Plain C; used by the emulated amx level of
 * the test programs and tested by tests/c/test_gemm.c against its own reference.
 */
#include "model/kernels/amx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the CPU would raise (#UD, #GP): never expected, so it stops the program. */
static void fault(const char *what) {
    fprintf(stderr, "deepmt: AMX model: %s\n", what);
    abort();
}

/* The shape of tile t as configured (faults for a tile the config leaves out). */
static void shape(const dmt_amx_model *m, int t, int *rows, int *colsb) {
    if (!m->configured) fault("tile instruction before LDTILECFG (or after TILERELEASE)");
    if (t < 0 || t >= DMT_AMX_TILES) fault("tile number out of range");
    *rows = m->cfg.rows[t];
    *colsb = m->cfg.colsb[t];
    if (!*rows || !*colsb) fault("tile not configured");
}

/* LDTILECFG: palette 0 releases; palette 1 checks the limits, loads the shapes and
 * zeroes every tile. */
void dmt_amx_ldtilecfg(dmt_amx_model *m, const dmt_amx_config *cfg) {
    if (cfg->palette == 0) {
        dmt_amx_tilerelease(m);
        return;
    }
    if (cfg->palette != 1) fault("LDTILECFG: unsupported palette");
    if (cfg->start_row) fault("LDTILECFG: start_row is not 0");
    for (int i = 0; i < 14; i++)
        if (cfg->reserved[i]) fault("LDTILECFG: reserved bytes not 0");
    for (int t = 0; t < 16; t++) {
        int rows = cfg->rows[t], colsb = cfg->colsb[t];
        if (t >= DMT_AMX_TILES ? rows || colsb : rows > DMT_AMX_ROWS || colsb > DMT_AMX_COLSB || !rows != !colsb)
            fault("LDTILECFG: tile shape out of the palette's limits");
    }
    m->cfg = *cfg;
    m->configured = 1;
    memset(m->tile, 0, sizeof m->tile);
}

/* TILERELEASE: back to the init state (tiles zero, no config). */
void dmt_amx_tilerelease(dmt_amx_model *m) {
    memset(m, 0, sizeof *m);
}

void dmt_amx_tilezero(dmt_amx_model *m, int t) {
    int rows, colsb;
    shape(m, t, &rows, &colsb);
    memset(m->tile[t], 0, sizeof m->tile[t]);
}

/* TILELOADD: `rows` rows of `colsb` bytes from base + r * stride; the rest of each
 * row and the rows beyond are zeroed. */
void dmt_amx_tileloadd(dmt_amx_model *m, int t, const void *base, ptrdiff_t stride) {
    int rows, colsb;
    shape(m, t, &rows, &colsb);
    memset(m->tile[t], 0, sizeof m->tile[t]);
    for (int r = 0; r < rows; r++) memcpy(m->tile[t][r], (const char *)base + r * stride, (size_t)colsb);
}

/* TILESTORED: `rows` rows of `colsb` bytes to base + r * stride, nothing else. */
void dmt_amx_tilestored(dmt_amx_model *m, int t, void *base, ptrdiff_t stride) {
    int rows, colsb;
    shape(m, t, &rows, &colsb);
    for (int r = 0; r < rows; r++) memcpy((char *)base + r * stride, m->tile[t][r], (size_t)colsb);
}

/* The SDM's operand checks of the dot-product instructions: c += a (rows x K dwords)
 * times b (K rows x N dwords), c rows x N dwords, three distinct tiles. */
static void dot_shapes(const dmt_amx_model *m, int c, int a, int b, int *rows, int *kd, int *nd) {
    int cr, cc, ar, ac, br, bc;
    shape(m, c, &cr, &cc);
    shape(m, a, &ar, &ac);
    shape(m, b, &br, &bc);
    if (c == a || c == b || a == b) fault("dot product: tiles not distinct");
    if (ac % 4 || cc % 4 || bc % 4) fault("dot product: colsb not a multiple of 4");
    if (ac / 4 != br || cc != bc || cr != ar) fault("dot product: shapes do not match");
    *rows = cr, *kd = ac / 4, *nd = cc / 4;
}

/* Only row bytes [0, colsb) of the destination are written; the rest of the row and
 * the rows past `rows` are zeroed (write_row_and_zero, zero_upper_rows). */
static void zero_outside(dmt_amx_model *m, int c, int rows, int colsb) {
    for (int r = 0; r < DMT_AMX_ROWS; r++)
        if (r >= rows) memset(m->tile[c][r], 0, DMT_AMX_COLSB);
        else memset(m->tile[c][r] + colsb, 0, (size_t)(DMT_AMX_COLSB - colsb));
}

void dmt_amx_tdpbusd(dmt_amx_model *m, int c, int a, int b) {
    int rows, kd, nd;
    dot_shapes(m, c, a, b, &rows, &kd, &nd);
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < nd; n++) {
            uint32_t acc;
            memcpy(&acc, m->tile[c][r] + 4 * n, 4);
            for (int k = 0; k < kd; k++) {
                const uint8_t *x = m->tile[a][r] + 4 * k, *y = m->tile[b][k] + 4 * n;
                for (int e = 0; e < 4; e++) /* u8 zero-extended times s8 sign-extended; mod 2^32 */
                    acc += (uint32_t)((int32_t)x[e] * (int32_t)(int8_t)y[e]);
            }
            memcpy(m->tile[c][r] + 4 * n, &acc, 4);
        }
    zero_outside(m, c, rows, nd * 4);
}

/* DAZ for an input, FTZ for a result: a denormal is a zero of its sign. */
static float flush(float f) { return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f; }

static float bf16_at(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return flush(f);
}

/* acc + x * y rounded once (an FMA; round to nearest even, the C default), denormals
 * flushed. x and y are bfloat16 values, so x * y is exact in float unless it leaves
 * the normal range: then fmaf rounds the exact product plus acc once. */
static float fma_ftz(float acc, float x, float y) {
    float p = x * y, r;
    if (p != 0 && (fabsf(p) < 0x1p-126f || isinf(p)) && isfinite(x) && isfinite(y)) r = fmaf(x, y, acc);
    else r = acc + p;
    return flush(r);
}

/* TDPBF16PS per the SDM: for each row, temp[2n + e] (e = 0, 1) start at 0 and sum the
 * products of element e of every pair k in turn; then c[n] += temp[2n] + temp[2n+1]. */
void dmt_amx_tdpbf16ps(dmt_amx_model *m, int c, int a, int b) {
    int rows, kd, nd;
    dot_shapes(m, c, a, b, &rows, &kd, &nd);
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < nd; n++) {
            float t0 = 0, t1 = 0, d;
            for (int k = 0; k < kd; k++) {
                const uint8_t *x = m->tile[a][r] + 4 * k, *y = m->tile[b][k] + 4 * n;
                t0 = fma_ftz(t0, bf16_at(x), bf16_at(y));
                t1 = fma_ftz(t1, bf16_at(x + 2), bf16_at(y + 2));
            }
            memcpy(&d, m->tile[c][r] + 4 * n, 4);
            d = flush(flush(d) + flush(t0 + t1));
            memcpy(m->tile[c][r] + 4 * n, &d, 4);
        }
    zero_outside(m, c, rows, nd * 4);
}
