/* spm.h — internal: the C face of the SentencePiece C++ library (spm.cc).
 *
 * Only tokenizer.c includes this. Ids here are SentencePiece ids; tokenizer.c maps
 * them to model ids. Every function is safe to call from several threads at once
 * on the same handle except dmt_spm_load / dmt_spm_free. No C++ exception leaves
 * these functions.
 */
#ifndef DEEPMT_TOKENIZER_SPM_H
#define DEEPMT_TOKENIZER_SPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dmt_spm dmt_spm;

/* Loads a sentencepiece.model file; NULL plus a message in err on failure. */
dmt_spm *dmt_spm_load(const char *path, char *err, size_t errlen);
void dmt_spm_free(dmt_spm *spm);

int dmt_spm_size(const dmt_spm *spm);                      /* number of pieces */
int dmt_spm_unk_id(const dmt_spm *spm);
/* The piece of id (0 <= id < size); the string lives as long as the handle. */
const char *dmt_spm_id_to_piece(const dmt_spm *spm, int id);
/* The id of a piece, or -1 when the model does not have it. */
int dmt_spm_piece_to_id(const dmt_spm *spm, const char *piece);
int dmt_spm_is_control(const dmt_spm *spm, int id);        /* <s>, </s>, <pad> */

/* Encodes len bytes of UTF-8 (no checks here). Writes up to max_ids ids and
 * returns how many there are in all (possibly more than max_ids), or -1. */
int dmt_spm_encode(const dmt_spm *spm, const char *text, size_t len,
                   int32_t *ids, int max_ids, char *err, size_t errlen);

/* Decodes n ids (each 0 <= id < size) into a malloc'd NUL-terminated string the
 * caller frees; returns its length in bytes, or -1. */
int dmt_spm_decode(const dmt_spm *spm, const int32_t *ids, int n, char **out,
                   char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
