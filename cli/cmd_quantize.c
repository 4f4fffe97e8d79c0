/* cmd_quantize.c — `deepmt quantize IN_DIR OUT_DIR`: a copy of a model with int8 weights.
 *
 * Every weight matrix (2-D "*.weight" tensor: linear layers, the embedding tables,
 * which the tied output projection shares; not the learned position table) becomes
 * I8 [out, in] plus "<name>_scale", F32 [out]: per output row, symmetric,
 * W[j][k] ~ scale[j] * byte (dmt_quantize_row, the rule the loader uses to quantise
 * at load with --precision int8). Biases, norms and positions are copied as they
 * are. config.json, sentencepiece.model and shortlist.bin (when there) are copied. docs/model-format.md.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/options.h"
#include "cli/commands.h"
#include "model/kernels/kernels.h"
#include "model/model.h"
#include "model/safetensors.h"

static int quantised(const dmt_st_tensor *t) {
    size_t n = strlen(t->name);
    return t->ndim == 2 && n > 7 && !strcmp(t->name + n - 7, ".weight") && !strstr(t->name, "embed_positions");
}

static int copy_file(const char *from, const char *to, char *err, size_t errlen) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    int rc = 0;
    if (!in || !out) {
        snprintf(err, errlen, "%s: %s", in ? to : from, strerror(errno));
        rc = -1;
    } else {
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, n, out) != n) { rc = -1; break; }
        if (ferror(in)) rc = -1;
        if (fclose(out)) rc = -1;
        out = NULL;
        if (rc) snprintf(err, errlen, "copying %s to %s failed", from, to);
    }
    if (in) fclose(in);
    if (out) fclose(out);
    return rc;
}

/* Writes the quantised safetensors file to path. */
static int write_quantised(const dmt_safetensors *st, const char *path, char *err, size_t errlen) {
    int n = dmt_st_count(st), rc = -1;
    json_t *header = json_object();
    uint64_t off = 0;
    json_object_set_new(header, "__metadata__", json_pack("{s:s}", "quantization", "int8 per-row symmetric"));
    for (int i = 0; i < n; i++) { /* offsets: each tensor, then its scales, 8-byte aligned */
        const dmt_st_tensor *t = dmt_st_tensor_at(st, i);
        if (t->dtype == DMT_DTYPE_I8) {
            snprintf(err, errlen, "tensor \"%s\" is int8 already: the model is quantised", t->name);
            json_decref(header);
            return -1;
        }
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        int q = quantised(t);
        uint64_t bytes = q ? (uint64_t)t->numel : t->nbytes;
        json_object_set_new(header, t->name, json_pack("{s:s,s:o,s:[I,I]}", "dtype", q ? "I8" : dmt_dtype_name(t->dtype),
                                                       "shape", shape, "data_offsets", (json_int_t)off,
                                                       (json_int_t)(off + bytes)));
        off = (off + bytes + 7) & ~(uint64_t)7;
        if (q) {
            char name[600];
            snprintf(name, sizeof name, "%s_scale", t->name);
            uint64_t sb = (uint64_t)t->shape[0] * 4;
            json_object_set_new(header, name, json_pack("{s:s,s:[I],s:[I,I]}", "dtype", "F32", "shape",
                                                        (json_int_t)t->shape[0], "data_offsets", (json_int_t)off,
                                                        (json_int_t)(off + sb)));
            off = (off + sb + 7) & ~(uint64_t)7;
        }
    }
    char *text = json_dumps(header, JSON_COMPACT);
    json_decref(header);
    if (!text) { snprintf(err, errlen, "out of memory"); return -1; }
    size_t hlen = strlen(text), padded = (hlen + 7) & ~(size_t)7;
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(text);
        return -1;
    }
    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(text, 1, hlen, f) == hlen;
    for (size_t p = hlen; ok && p < padded; p++) ok = fputc(' ', f) != EOF;
    free(text);
    float *row = NULL, *scales = NULL;
    int8_t *qrow = NULL;
    uint64_t written = 0;
    static const char zeros[8];
    for (int i = 0; ok && i < n; i++) {
        const dmt_st_tensor *t = dmt_st_tensor_at(st, i);
        if (!quantised(t)) {
            ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
            written += t->nbytes;
        } else {
            int64_t rows = t->shape[0], cols = t->shape[1];
            row = realloc(row, (size_t)cols * sizeof *row);
            qrow = realloc(qrow, (size_t)cols);
            scales = realloc(scales, (size_t)rows * sizeof *scales);
            if (!row || !qrow || !scales) { snprintf(err, errlen, "out of memory"); goto out; }
            for (int64_t r = 0; ok && r < rows; r++) {
                const unsigned char *src = (const unsigned char *)t->data + (size_t)(r * cols) * dmt_dtype_size(t->dtype);
                if (t->dtype == DMT_DTYPE_F16) dmt_f16_to_f32_n(row, src, (size_t)cols);
                else if (t->dtype == DMT_DTYPE_BF16) dmt_bf16_to_f32_n(row, src, (size_t)cols);
                else memcpy(row, src, (size_t)cols * sizeof *row);
                scales[r] = dmt_quantize_row(qrow, row, (int)cols);
                ok = fwrite(qrow, 1, (size_t)cols, f) == (size_t)cols;
            }
            written += (uint64_t)t->numel;
            size_t pad = (size_t)(((written + 7) & ~(uint64_t)7) - written);
            ok = ok && fwrite(zeros, 1, pad, f) == pad;
            written += pad;
            ok = ok && fwrite(scales, sizeof *scales, (size_t)rows, f) == (size_t)rows;
            written += (uint64_t)rows * 4;
        }
        size_t pad = (size_t)(((written + 7) & ~(uint64_t)7) - written);
        ok = ok && fwrite(zeros, 1, pad, f) == pad;
        written += pad;
    }
    if (!ok) snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    else rc = 0;
out:
    if (fclose(f) && !rc) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    free(row), free(qrow), free(scales);
    return rc;
}

typedef struct {
    char model[4096];
} quantize_args;

static const dmt_option quantize_options[] = {
    DMT_OPTION_MODEL(offsetof(quantize_args, model), sizeof ((quantize_args *)0)->model),
};

int cmd_quantize(int argc, char **argv) {
    quantize_args a = {""};
    const char *pos[2];
    int n_pos = 0;
    char perr[512];
    int prc = dmt_options_parse("quantize", quantize_options, 1, &a, argc, argv, NULL, pos, 2, &n_pos, perr,
                                sizeof perr);
    if (prc == 0 && n_pos == 2) a.model[0] = 0; /* IN_DIR OUT_DIR: the arguments win over DEEPMT_MODEL */
    if (prc == 0 && n_pos != (a.model[0] ? 1 : 2)) {
        prc = -1;
        snprintf(perr, sizeof perr, "expected IN_DIR OUT_DIR (or -m IN_DIR OUT_DIR)");
    }
    if (prc) {
        FILE *f = prc > 0 ? stdout : stderr;
        if (prc < 0) fprintf(f, "deepmt quantize: %s\n", perr);
        fprintf(f, "usage: deepmt quantize [-m] IN_DIR OUT_DIR\n"
                   "  writes OUT_DIR/{config.json, model.safetensors, sentencepiece.model}: the model with int8\n"
                   "  weight matrices and per-row F32 scales (docs/model-format.md); about a quarter of the F32\n"
                   "  size. It runs int8 products (as --precision int8 does with the F32 model). A shortlist.bin\n"
                   "  is copied too.\n");
        return prc > 0 ? 0 : 2;
    }
    const char *in = a.model[0] ? a.model : pos[0], *outdir = pos[n_pos - 1];
    char err[2 * PATH_MAX + 100], src[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX + 8], rin[PATH_MAX], rout[PATH_MAX];
    /* the input must load: a model that does not match its config is not quantised */
    dmt_model *m = dmt_model_load(in, (dmt_load_options){.ids_only = 1, .precision = DMT_PRECISION_INT8}, err,
                                  sizeof err); /* int8: a quarter of the memory F32 would take */
    if (!m) {
        fprintf(stderr, "deepmt quantize: %s\n", err);
        return 1;
    }
    dmt_model_free(m);
    if (mkdir(outdir, 0755) && errno != EEXIST) {
        fprintf(stderr, "deepmt quantize: %s: %s\n", outdir, strerror(errno));
        return 1;
    }
    if (realpath(in, rin) && realpath(outdir, rout) && !strcmp(rin, rout)) {
        fprintf(stderr, "deepmt quantize: OUT_DIR is IN_DIR: write the quantised model elsewhere\n");
        return 1;
    }
    snprintf(src, sizeof src, "%s/model.safetensors", in);
    dmt_safetensors *st = dmt_st_open(src, err, sizeof err);
    if (!st) {
        fprintf(stderr, "deepmt quantize: %s\n", err);
        return 1;
    }
    snprintf(dst, sizeof dst, "%s/model.safetensors", outdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    int rc = write_quantised(st, tmp, err, sizeof err);
    if (!rc && rename(tmp, dst)) {
        snprintf(err, sizeof err, "%s: %s", dst, strerror(errno));
        rc = -1;
    }
    if (rc) unlink(tmp);
    long long in_bytes = (long long)dmt_st_file_size(st);
    dmt_st_close(st);
    static const char *const copied[] = {"config.json", "sentencepiece.model", "shortlist.bin"};
    for (int i = 0; !rc && i < 3; i++) {
        snprintf(src, sizeof src, "%s/%s", in, copied[i]);
        snprintf(dst, sizeof dst, "%s/%s", outdir, copied[i]);
        if (i > 0 && access(src, R_OK)) continue; /* optional: ids-only models have no tokenizer */
        rc = copy_file(src, dst, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "deepmt quantize: %s\n", err);
        return 1;
    }
    struct stat sb;
    snprintf(dst, sizeof dst, "%s/model.safetensors", outdir);
    if (!stat(dst, &sb))
        fprintf(stderr, "deepmt quantize: %s: %.1f MB (from %.1f MB)\n", dst, sb.st_size / 1e6, in_bytes / 1e6);
    return 0;
}
