/* pool.h — the server's workers and batching policy without HTTP: one pool behind
 * every entry point (`deepmt serve` queues requests into it, `deepmt translate`
 * a file's lines). Each worker owns its buffers; the model is shared read-only.
 */
#ifndef DEEPMT_SERVER_SCHED_POOL_H
#define DEEPMT_SERVER_SCHED_POOL_H

#include <stddef.h>

#include "model/translate.h"

typedef struct {
    int workers;               /* decoding threads, each with its own state */
    int threads;               /* BLAS threads per worker */
    int batch_sentences;       /* sentences in a batch (running at once, continuous) */
    int precision;             /* a dmt_precision */
    int continuous;            /* iteration-level batching; 0: whole batches */
    int no_shortlist;          /* 1: ignore the model directory's shortlist.bin */
    int model_batch_limits;    /* the model's config.json batching.max_sentences lowers batch_sentences */
} dmt_pool_options;

typedef struct dmt_pool dmt_pool;

/* Loads the model and starts the workers (blocks until they run). NULL with a
 * message. */
dmt_pool *dmt_pool_open(const char *model_dir, dmt_pool_options o, char *err, size_t errlen);
const dmt_model *dmt_pool_model(const dmt_pool *p);

/* Translates n sentences with opt, batches taken in input order (a caller that
 * sorts by length gets batch mates that end at similar steps); out[i] as
 * dmt_translate gives it (free each with dmt_translate_output_clear).
 * progress(arg, done), when given, is called from this thread about every 200 ms
 * and at the end. 0, or -1 with a message. */
int dmt_pool_translate(dmt_pool *p, int n, const dmt_translate_input *in, const dmt_beam_options *opt,
                       dmt_translate_output *out, void (*progress)(void *arg, int done), void *arg, char *err,
                       size_t errlen);

/* Stops the workers and frees everything, the model included. */
void dmt_pool_close(dmt_pool *p);

#endif
