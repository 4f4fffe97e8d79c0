/* safetensors.h — read-only, validated view of a .safetensors file.
 *
 * Layout (docs/model-format.md): u64 little-endian header length n, n bytes of JSON
 * {name: {dtype, shape, data_offsets}}, then the data. The file is mmap'd read-only;
 * tensors point into the mapping. Opening checks the whole header: JSON shape,
 * known dtypes, byte sizes against shapes, ranges inside the file, no overlaps.
 * A non-regular file (FIFO, directory, device) is refused without blocking.
 *
 * The mapping is for loading only: a file replaced by truncating and rewriting it
 * (cp over it) makes reads of the mapping fault (SIGBUS), so the loader copies what
 * it keeps and closes the file before the model is used (model.c).
 */
#ifndef DEEPMT_MODEL_SAFETENSORS_H
#define DEEPMT_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { DMT_DTYPE_F32, DMT_DTYPE_F16, DMT_DTYPE_BF16, DMT_DTYPE_I8 } dmt_dtype;

#define DMT_ST_MAX_DIMS 4

typedef struct {
    char *name;
    dmt_dtype dtype;
    int ndim;
    int64_t shape[DMT_ST_MAX_DIMS];
    int64_t numel;
    const void *data;  /* inside the mapping; not necessarily aligned */
    size_t nbytes;
} dmt_st_tensor;

typedef struct dmt_safetensors dmt_safetensors;

/* Maps and validates `path`. NULL with a message naming the file (and tensor) on error. */
dmt_safetensors *dmt_st_open(const char *path, char *err, size_t errlen);
void dmt_st_close(dmt_safetensors *st);

int dmt_st_count(const dmt_safetensors *st);
const dmt_st_tensor *dmt_st_tensor_at(const dmt_safetensors *st, int i);
const dmt_st_tensor *dmt_st_find(const dmt_safetensors *st, const char *name);
size_t dmt_st_file_size(const dmt_safetensors *st);

/* The same for the whole pages inside [data, data + nbytes): called after a tensor is
 * widened, so loading a large F16 model never holds both copies in memory. Always safe:
 * the mapping is private and read-only, and dropped pages fault back in from the file. */
void dmt_st_drop_range(const void *data, size_t nbytes);

const char *dmt_dtype_name(dmt_dtype d);
size_t dmt_dtype_size(dmt_dtype d);

/* Widening conversions used at load (F16/BF16 -> F32). */
float dmt_f16_to_f32(uint16_t h);
float dmt_bf16_to_f32(uint16_t h);

/* (the bulk conversions the loader uses are kernels: model/kernels/kernels.h) */

/* failure injection for the loader's allocations: base/fault.h */

#endif
