/* safetensors.c — mmap + header validation for .safetensors files. */
#include "base/fault.h"
#include "model/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fileio.h"

/* A header larger than this is refused before it is parsed (real ones are KBs). */
#define MAX_HEADER_BYTES (100u << 20)

struct dmt_safetensors {
    const unsigned char *map;
    size_t size;
    int count;
    dmt_st_tensor *tensors;
};

static void *fault_calloc(size_t n, size_t size) { return dmt_fault_hit() ? NULL : calloc(n, size); }
static char *fault_strdup(const char *s) { return dmt_fault_hit() ? NULL : strdup(s); }

const char *dmt_dtype_name(dmt_dtype d) {
    return d == DMT_DTYPE_F32 ? "F32" : d == DMT_DTYPE_F16 ? "F16" : d == DMT_DTYPE_BF16 ? "BF16" : "I8";
}

size_t dmt_dtype_size(dmt_dtype d) { return d == DMT_DTYPE_F32 ? 4 : d == DMT_DTYPE_I8 ? 1 : 2; }

float dmt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float dmt_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static int parse_dtype(const char *s, dmt_dtype *d) {
    if (!strcmp(s, "F32")) *d = DMT_DTYPE_F32;
    else if (!strcmp(s, "F16")) *d = DMT_DTYPE_F16;
    else if (!strcmp(s, "BF16")) *d = DMT_DTYPE_BF16;
    else if (!strcmp(s, "I8")) *d = DMT_DTYPE_I8; /* quantised weights (docs/model-format.md) */
    else return -1;
    return 0;
}

/* Fills t from one header entry; data_size is the byte count after the header. */
static int parse_entry(const char *path, const char *name, json_t *e, uint64_t data_size,
                       dmt_st_tensor *t, uint64_t *begin, uint64_t *end, char *err, size_t errlen) {
    json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
           *offs = json_object_get(e, "data_offsets");
    if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs)) {
        snprintf(err, errlen, "%s: tensor \"%s\": entry needs \"dtype\", \"shape\" and \"data_offsets\"", path, name);
        return -1;
    }
    if (parse_dtype(json_string_value(dt), &t->dtype)) {
        snprintf(err, errlen, "%s: tensor \"%s\": unsupported dtype \"%s\" (F32, F16, BF16 or I8)", path, name,
                 json_string_value(dt));
        return -1;
    }
    size_t nd = json_array_size(shape);
    if (nd > DMT_ST_MAX_DIMS) {
        snprintf(err, errlen, "%s: tensor \"%s\": %zu dimensions (at most %d)", path, name, nd, DMT_ST_MAX_DIMS);
        return -1;
    }
    t->ndim = (int)nd;
    t->numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1ll << 40)) {
            snprintf(err, errlen, "%s: tensor \"%s\": bad shape entry %zu", path, name, i);
            return -1;
        }
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] && t->numel > (int64_t)(1ll << 40) / t->shape[i]) {
            snprintf(err, errlen, "%s: tensor \"%s\": shape too large", path, name);
            return -1;
        }
        t->numel *= t->shape[i];
    }
    json_t *b = json_array_get(offs, 0), *en = json_array_get(offs, 1);
    if (json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(en) ||
        json_integer_value(b) < 0 || json_integer_value(en) < json_integer_value(b)) {
        snprintf(err, errlen, "%s: tensor \"%s\": data_offsets must be [begin, end] with 0 <= begin <= end", path, name);
        return -1;
    }
    *begin = (uint64_t)json_integer_value(b);
    *end = (uint64_t)json_integer_value(en);
    if (*end > data_size) {
        snprintf(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the end of the file (%llu data bytes)",
                 path, name, (unsigned long long)*begin, (unsigned long long)*end, (unsigned long long)data_size);
        return -1;
    }
    uint64_t want = (uint64_t)t->numel * dmt_dtype_size(t->dtype);
    if (*end - *begin != want) {
        snprintf(err, errlen, "%s: tensor \"%s\": %llu bytes for %lld %s values (expected %llu)", path, name,
                 (unsigned long long)(*end - *begin), (long long)t->numel, dmt_dtype_name(t->dtype),
                 (unsigned long long)want);
        return -1;
    }
    return 0;
}

typedef struct { uint64_t begin, end; int index; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const dmt_st_tensor *)a)->name, ((const dmt_st_tensor *)b)->name);
}

static int parse_header(dmt_safetensors *st, const char *path, const char *text, size_t len,
                        uint64_t data_off, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (!je.text[0]) snprintf(err, errlen, "%s: out of memory parsing the header", path); /* jansson: no text */
        else snprintf(err, errlen, "%s: header is not valid JSON (byte %d: %s)", path, je.position, je.text);
        return -1;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "%s: header is not a JSON object", path);
        json_decref(root);
        return -1;
    }
    size_t n = json_object_size(root);
    st->tensors = fault_calloc(n ? n : 1, sizeof *st->tensors);
    span *spans = fault_calloc(n ? n : 1, sizeof *spans);
    int rc = -1;
    if (!st->tensors || !spans) { snprintf(err, errlen, "%s: out of memory", path); goto done; }
    const char *name;
    json_t *e;
    uint64_t data_size = st->size - data_off;
    json_object_foreach(root, name, e) {
        if (!strcmp(name, "__metadata__")) continue;
        dmt_st_tensor *t = &st->tensors[st->count];
        uint64_t b, en;
        if (parse_entry(path, name, e, data_size, t, &b, &en, err, errlen)) goto done;
        t->name = fault_strdup(name);
        if (!t->name) { snprintf(err, errlen, "%s: out of memory", path); goto done; }
        t->data = st->map + data_off + b;
        t->nbytes = (size_t)(en - b);
        spans[st->count] = (span){b, en, st->count};
        st->count++;
    }
    qsort(spans, (size_t)st->count, sizeof *spans, cmp_span);
    for (int i = 1; i < st->count; i++)
        if (spans[i].begin < spans[i - 1].end) {
            snprintf(err, errlen, "%s: tensors \"%s\" and \"%s\" overlap in the file", path,
                     st->tensors[spans[i - 1].index].name, st->tensors[spans[i].index].name);
            goto done;
        }
    /* Sorted by name so lookups are binary searches (deep models have 10^4+ tensors). */
    qsort(st->tensors, (size_t)st->count, sizeof *st->tensors, cmp_tensor_name);
    rc = 0;
done:
    free(spans);
    json_decref(root);
    return rc;
}

dmt_safetensors *dmt_st_open(const char *path, char *err, size_t errlen) {
    char *header = NULL;
    dmt_safetensors *st = fault_calloc(1, sizeof *st);
    if (!st) { snprintf(err, errlen, "%s: out of memory", path); return NULL; }
    int fd = dmt_file_open_regular(path, &st->size, err, errlen);
    if (fd < 0) {
        free(st);
        return NULL;
    }
    if (st->size < 8) {
        snprintf(err, errlen, "%s: truncated: %zu bytes, shorter than the 8-byte header length", path, st->size);
        goto fail;
    }
    /* The header is read, not mapped: only the tensor data is read through the
     * mapping, under the loader's SIGBUS guard (base/busguard.h), in case the file
     * shrinks meanwhile. */
    unsigned char len8[8];
    if (pread(fd, len8, 8, 0) != 8) {
        snprintf(err, errlen, "%s: cannot read the header length", path);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    if (hlen > st->size - 8) {
        snprintf(err, errlen, "%s: header length %llu runs past the end of the file (%zu bytes)", path,
                 (unsigned long long)hlen, st->size);
        goto fail;
    }
    if (hlen > MAX_HEADER_BYTES) {
        snprintf(err, errlen, "%s: header of %llu bytes is implausibly large", path, (unsigned long long)hlen);
        goto fail;
    }
    header = fault_calloc((size_t)hlen + 1, 1);
    if (!header) { snprintf(err, errlen, "%s: out of memory", path); goto fail; }
    size_t got = 0;
    while (got < hlen) {
        ssize_t r = pread(fd, header + got, (size_t)hlen - got, (off_t)(8 + got));
        if (r <= 0) {
            snprintf(err, errlen, "%s: the header could not be read whole (the file changed?)", path);
            goto fail;
        }
        got += (size_t)r;
    }
    void *map = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) { snprintf(err, errlen, "%s: mmap failed: %s", path, strerror(errno)); goto fail; }
    st->map = map;
    close(fd);
    fd = -1;
    if (parse_header(st, path, header, (size_t)hlen, 8 + hlen, err, errlen)) goto fail;
    free(header);
    return st;
fail:
    free(header);
    if (fd >= 0) close(fd);
    dmt_st_close(st);
    return NULL;
}

void dmt_st_close(dmt_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->count; i++) free(st->tensors[i].name);
    free(st->tensors);
    if (st->map) munmap((void *)st->map, st->size);
    free(st);
}

int dmt_st_count(const dmt_safetensors *st) { return st->count; }
const dmt_st_tensor *dmt_st_tensor_at(const dmt_safetensors *st, int i) { return &st->tensors[i]; }
size_t dmt_st_file_size(const dmt_safetensors *st) { return st->size; }

void dmt_st_drop_range(const void *data, size_t nbytes) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin = ((uintptr_t)data + page - 1) & ~(page - 1),
              end = ((uintptr_t)data + nbytes) & ~(page - 1);
    if (end > begin) madvise((void *)begin, end - begin, MADV_DONTNEED);
}

const dmt_st_tensor *dmt_st_find(const dmt_safetensors *st, const char *name) {
    dmt_st_tensor key = {.name = (char *)name};
    return bsearch(&key, st->tensors, (size_t)st->count, sizeof key, cmp_tensor_name);
}
