/* bench_step.c — time of one decoder step (and of the encoder) for a model directory.
 *
 *   build/bench/bench_step MODEL_DIR [BATCH ...]     (default batches: 1 32)
 *
 * Sources are 20 random ids + </s>; every hypothesis reads its own source. Reports the
 * median over 30 steps after 5 warm-up steps, per batch size, then the median time
 * to encode the same batch with its lengths spread over 1..21 tokens (and compute
 * its cross-attention K/V), the cost that depends on batch mates, and of that batch
 * joining a continuous (server) batch at once. Thread count: the
 * OPENBLAS_NUM_THREADS environment variable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model/forward.h"
#include "model/model.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: bench_step MODEL_DIR [BATCH ...]\n"); return 2; }
    char err[512];
    double t0 = now();
    dmt_model *m = dmt_model_load(argv[1], (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (!m) { fprintf(stderr, "%s\n", err); return 1; }
    printf("model %s: %d+%d layers, d_model %d, vocab %d, load %.2f s\n", argv[1], m->cfg.encoder_layers,
           m->cfg.decoder_layers, m->cfg.d_model, m->cfg.vocab_size, now() - t0);
    int default_batches[] = {1, 32}, nb = argc > 2 ? argc - 2 : 2;
    enum { SRC = 21, WARM = 5, STEPS = 30 };
    for (int bi = 0; bi < nb; bi++) {
        int B = argc > 2 ? atoi(argv[2 + bi]) : default_batches[bi];
        int32_t *ids = malloc(sizeof(int32_t) * B * SRC), *tok = malloc(sizeof(int32_t) * B);
        const int32_t **rows = malloc(sizeof *rows * B);
        int *len = malloc(sizeof(int) * B), *hyp_src = malloc(sizeof(int) * B);
        float *lp = malloc(sizeof(float) * B * m->cfg.vocab_size);
        srand(1);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < SRC - 1; t++) ids[b * SRC + t] = 4 + rand() % (m->cfg.vocab_size - 4);
            ids[b * SRC + SRC - 1] = m->cfg.eos_id;
            rows[b] = ids + b * SRC;
            len[b] = SRC;
            hyp_src[b] = b;
            tok[b] = m->cfg.decoder_start_id;
        }
        dmt_state *s = dmt_state_new(m);
        double e0 = now();
        if (dmt_encode(s, B, rows, len, err, sizeof err) || dmt_decode_begin(s, B, hyp_src, B, WARM + STEPS, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        double enc = now() - e0, times[STEPS];
        for (int i = 0; i < WARM + STEPS; i++) {
            double a = now();
            dmt_decode_step(s, tok, lp);
            if (i >= WARM) times[i - WARM] = now() - a;
            for (int b = 0; b < B; b++) tok[b] = 4 + (i * 7 + b) % (m->cfg.vocab_size - 4);
        }
        qsort(times, STEPS, sizeof *times, cmp_double);
        printf("batch %3d: encoder %.2f ms, decoder step median %.3f ms (%.3f ms per hypothesis)\n", B, enc * 1e3,
               times[STEPS / 2] * 1e3, times[STEPS / 2] * 1e3 / B);
        /* The same batch with lengths spread over 1..SRC (one full-length source):
         * what the encoder costs when batch mates differ in length. */
        for (int b = 0; b < B; b++) {
            len[b] = b == 0 ? SRC : 1 + (b * 7) % SRC;
            ids[b * SRC + len[b] - 1] = m->cfg.eos_id;
        }
        double mixed[STEPS];
        for (int i = 0; i < STEPS; i++) {
            double a = now();
            if (dmt_encode(s, B, rows, len, err, sizeof err) || dmt_decode_begin(s, B, hyp_src, B, 1, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            mixed[i] = now() - a;
        }
        qsort(mixed, STEPS, sizeof *mixed, cmp_double);
        printf("batch %3d, lengths 1..%d: encoder and cross-attention K/V median %.3f ms\n", B, SRC, mixed[STEPS / 2] * 1e3);
        /* The same mixed batch joining a continuous state at once (as a document's
         * sentences join the server's running batch), then leaving it. */
        dmt_state *cs = dmt_state_new(m);
        int *ids_kept = malloc(sizeof(int) * B);
        for (int i = 0; i < STEPS; i++) {
            double a = now();
            if (dmt_cont_add_sources(cs, B, rows, len, ids_kept, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            mixed[i] = now() - a;
            for (int b = 0; b < B; b++) dmt_cont_release_source(cs, ids_kept[b]);
        }
        qsort(mixed, STEPS, sizeof *mixed, cmp_double);
        printf("batch %3d, lengths 1..%d, joining a continuous batch: encoder and K/V median %.3f ms\n", B, SRC,
               mixed[STEPS / 2] * 1e3);
        free(ids_kept);
        dmt_state_free(cs);
        dmt_state_free(s);
        free(ids); free(tok); free(rows); free(len); free(hyp_src); free(lp);
    }
    dmt_model_free(m);
    return 0;
}
