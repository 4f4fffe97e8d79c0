/* gemm.c — packing weights for the product kernels, and reading them back (gemm.h). */
#include "model/gemm.h"

#include <stdio.h>
#include <string.h>

#include "model/kernels/internal.h"

static int pairs_of(int in) { return (in + 1) / 2; }

/* float -> bfloat16, round to nearest even (weights are finite) */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Where element (j, k) of an [out][in] matrix sits in the packed layouts (gemm.h). */
static size_t f32_offset(int P, int in, int j, int k) { return ((size_t)(j / P) * in + k) * P + j % P; }
static size_t bf16_offset(int P, int in, int j, int k) {
    return (((size_t)(j / P) * pairs_of(in) + k / 2) * P + j % P) * 2 + (k & 1);
}
static size_t i8_offset(int P, int in, int j, int k) {
    return (((size_t)(j / P) * dmt_quads_of(in) + k / 4) * P + j % P) * 4 + (k & 3);
}

int dmt_gemm_layout(const dmt_kernels *k, dmt_precision precision) {
    switch (precision) {
    case DMT_PRECISION_BF16: return k->gemm_bf16 ? DMT_LAYOUT_PACKED_BF16 : -1;
    case DMT_PRECISION_INT8: return DMT_LAYOUT_PACKED_I8;
    default: return k->panel_f32 ? DMT_LAYOUT_PACKED_F32 : DMT_LAYOUT_ROWS;
    }
}

size_t dmt_gemm_packed_bytes(const dmt_kernels *k, dmt_weight_layout layout, int out, int in) {
    switch (layout) {
    case DMT_LAYOUT_PACKED_F32:
        return (size_t)dmt_panels_of(out, k->panel_f32) * k->panel_f32 * (size_t)in * sizeof(float);
    case DMT_LAYOUT_PACKED_BF16:
        return (size_t)dmt_panels_of(out, k->panel_f32) * k->panel_f32 * (size_t)pairs_of(in) * 2 * sizeof(uint16_t);
    case DMT_LAYOUT_PACKED_I8: {
        size_t cols = (size_t)dmt_panels_of(out, k->panel_i8) * k->panel_i8;
        return dmt_i8_panels_bytes(out, in, k->panel_i8) + cols * (sizeof(int32_t) + sizeof(float));
    }
    default: return (size_t)out * (size_t)in * sizeof(float);
    }
}

void dmt_gemm_pack_rows_i8(void *dst, const dmt_kernels *k, int out, int in, int j0, int rows, const int8_t *q,
                           const float *scales) {
    int P = k->panel_i8;
    dmt_linear view = {.packed = dst, .out = out, .in = in};
    int32_t *comp = (int32_t *)dmt_i8_comp(&view, P);
    float *scale = (float *)dmt_i8_scales(&view, P);
    for (int r = 0; r < rows; r++) {
        int j = j0 + r;
        const int8_t *src = q + (size_t)r * in;
        int32_t sum = 0;
        for (int kk = 0; kk < in; kk++) {
            ((int8_t *)dst)[i8_offset(P, in, j, kk)] = src[kk];
            sum += src[kk];
        }
        comp[j] = 128 * sum;
        scale[j] = scales[r];
    }
}

void dmt_gemm_pack_rows(void *dst, const dmt_kernels *k, dmt_weight_layout layout, int out, int in, int j0,
                        int rows, const float *w) {
    int P = k->panel_f32;
    if (layout == DMT_LAYOUT_PACKED_I8) {
        int8_t q[DMT_GEMM_MAX_IN]; /* the loader refuses wider layers */
        for (int r = 0; r < rows && in <= DMT_GEMM_MAX_IN; r++) {
            float s = dmt_quantize_row(q, w + (size_t)r * in, in);
            dmt_gemm_pack_rows_i8(dst, k, out, in, j0 + r, 1, q, &s);
        }
        return;
    }
    for (int r = 0; r < rows; r++) {
        int j = j0 + r;
        const float *src = w + (size_t)r * in;
        if (layout == DMT_LAYOUT_PACKED_F32) {
            for (int kk = 0; kk < in; kk++) ((float *)dst)[f32_offset(P, in, j, kk)] = src[kk];
        } else if (layout == DMT_LAYOUT_PACKED_BF16) {
            for (int kk = 0; kk < in; kk++) ((uint16_t *)dst)[bf16_offset(P, in, j, kk)] = to_bf16(src[kk]);
        } else {
            memcpy((float *)dst + (size_t)j * in, src, (size_t)in * sizeof(float));
        }
    }
}

void dmt_linear_row(const dmt_linear *lin, int j, float *out) {
    int in = lin->in;
    const dmt_kernels *k = lin->kernels;
    switch (lin->layout) {
    case DMT_LAYOUT_PACKED_F32:
        for (int kk = 0; kk < in; kk++) out[kk] = ((const float *)lin->packed)[f32_offset(k->panel_f32, in, j, kk)];
        break;
    case DMT_LAYOUT_PACKED_BF16:
        for (int kk = 0; kk < in; kk++)
            out[kk] = from_bf16(((const uint16_t *)lin->packed)[bf16_offset(k->panel_f32, in, j, kk)]);
        break;
    case DMT_LAYOUT_PACKED_I8: {
        float s = dmt_i8_scales(lin, k->panel_i8)[j];
        for (int kk = 0; kk < in; kk++)
            out[kk] = s * ((const int8_t *)lin->packed)[i8_offset(k->panel_i8, in, j, kk)];
        break;
    }
    default: memcpy(out, lin->weight + (size_t)j * in, (size_t)in * sizeof(float));
    }
}

size_t dmt_linear_gather_bytes(const dmt_linear *src, int n) {
    size_t b = src->layout == DMT_LAYOUT_ROWS ? (size_t)n * src->in * sizeof(float)
                                              : dmt_gemm_packed_bytes(src->kernels, src->layout, n, src->in);
    return (b + 63) / 64 * 64;
}

void dmt_linear_gather(dmt_linear *dst, void *buf, float *bias_buf, const dmt_linear *src, int n, const int32_t *ids) {
    *dst = *src;
    dst->out = 0;
    dmt_linear_gather_more(dst, buf, bias_buf, src, n, ids);
}

void dmt_linear_gather_more(dmt_linear *dst, void *buf, float *bias_buf, const dmt_linear *src, int n,
                            const int32_t *ids) {
    int in = src->in, first = dst->out, total = first + n;
    const dmt_kernels *k = src->kernels;
    dst->out = total;
    dst->bias = src->bias ? bias_buf : NULL;
    for (int i = 0; src->bias && i < n; i++) bias_buf[first + i] = src->bias[ids[i]];
    if (src->layout == DMT_LAYOUT_ROWS) {
        for (int i = 0; i < n; i++)
            memcpy((float *)buf + (size_t)(first + i) * in, src->weight + (size_t)ids[i] * in,
                   (size_t)in * sizeof(float));
        dst->weight = buf;
        dst->packed = NULL;
        return;
    }
    /* A column is a run of fixed-size groups (1 float, a bf16 pair, an int8 quad) one
     * panel row (P groups) apart: copy group by group from the column's first one,
     * without the offset arithmetic (a division by P) per element. */
    int i8 = src->layout == DMT_LAYOUT_PACKED_I8, bf16 = src->layout == DMT_LAYOUT_PACKED_BF16;
    int P = i8 ? k->panel_i8 : k->panel_f32;
    int old_panels = dmt_panels_of(first, P), panels = dmt_panels_of(total, P);
    size_t group = i8 ? 4 : bf16 ? 2 * sizeof(uint16_t) : sizeof(float);
    size_t groups = (size_t)(i8 ? dmt_quads_of(in) : bf16 ? pairs_of(in) : in); /* a column's */
    size_t panel = groups * P * group, stride = (size_t)P * group;
    if (i8 && first && panels > old_panels) {
        /* the compensations and scales follow the panels: move them past the new ones
         * (the scales first: they move furthest) */
        dmt_linear before = *dst;
        before.out = first, before.packed = buf;
        dst->packed = buf;
        memmove((float *)dmt_i8_scales(dst, P), dmt_i8_scales(&before, P), (size_t)old_panels * P * sizeof(float));
        memmove((int32_t *)dmt_i8_comp(dst, P), dmt_i8_comp(&before, P), (size_t)old_panels * P * sizeof(int32_t));
    }
    /* a new last panel's padding columns must be zero: clear it (the columns fill the
     * others whole; an old last panel's padding is zero already) */
    if (panels > old_panels) memset((char *)buf + (size_t)(panels - 1) * panel, 0, panel);
    const char *from = src->packed;
    for (int i = first; i < total; i++) {
        int id = ids[i - first];
        const char *s0 = from + (size_t)(id / P) * panel + (size_t)(id % P) * group;
        char *d0 = (char *)buf + (size_t)(i / P) * panel + (size_t)(i % P) * group;
        for (size_t g = 0; g < groups; g++) memcpy(d0 + g * stride, s0 + g * stride, group);
    }
    dst->packed = buf;
    if (i8) {
        int32_t *comp = (int32_t *)dmt_i8_comp(dst, P);
        float *scale = (float *)dmt_i8_scales(dst, P);
        const int32_t *comp_from = dmt_i8_comp(src, P);
        const float *scale_from = dmt_i8_scales(src, P);
        for (int i = first; i < panels * P; i++) {
            comp[i] = i < total ? comp_from[ids[i - first]] : 0;
            scale[i] = i < total ? scale_from[ids[i - first]] : 0.0f;
        }
    }
}

void dmt_gemm_packed(float *y, int ldy, const float *x, int ldx, int n, const dmt_linear *lin, int threads) {
    const dmt_kernels *k = lin->kernels;
    dmt_gemm_fn fn = lin->layout == DMT_LAYOUT_PACKED_BF16 ? k->gemm_bf16
                     : lin->layout == DMT_LAYOUT_PACKED_I8 ? k->gemm_i8
                                                           : k->gemm_f32;
    fn(y, ldy, x, ldx, n, lin, threads);
}

void dmt_gemm_packed_shared(float *const *y, const int *ldy, const float *x, int ldx, int n,
                            const dmt_linear *const *lins, int count, int threads) {
    const dmt_kernels *k = lins[0]->kernels;
    int shared = count > 1 && k->gemm_i8_shared;
    for (int c = 0; shared && c < count; c++)
        shared = lins[c]->layout == DMT_LAYOUT_PACKED_I8 && lins[c]->kernels == k && lins[c]->in == lins[0]->in;
    if (shared) {
        k->gemm_i8_shared(y, ldy, x, ldx, n, lins, count, threads);
        return;
    }
    for (int c = 0; c < count; c++) dmt_gemm_packed(y[c], ldy[c], x, ldx, n, lins[c], threads);
}

const char *dmt_gemm_describe(const dmt_kernels *k, dmt_weight_layout layout, char *buf, size_t len) {
    static const char *const kinds[] = {"F32", "F32", "BF16", "INT8"};
    snprintf(buf, len, "%s %s", k->name, layout == DMT_LAYOUT_ROWS ? "(OpenBLAS) F32" : kinds[layout]);
    return buf;
}
