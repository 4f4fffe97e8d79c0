/* bench_beam.c — beam search on token ids, timed: the engine without the tokenizer.
 *
 *   build/bench/bench_beam MODEL_DIR -i SRC.ids [-o HYP.ids] [--forced ID] [--beam 4]
 *                          [--batch-size 32] [--threads N] [--workers W] [--no-shortlist]
 *
 * SRC.ids holds one source a line as space-separated ids without </s> (appended
 * here). Like `deepmt translate`: lines sorted longest first, cut into batches,
 * W workers (default: N) each with its own dmt_state and N/W BLAS threads. Writes
 * the 1-best ids a line in input order (-o) and one JSON line on stdout: load and
 * search seconds, sentences, target tokens, and memory from /proc/self/status
 * (peak, and resident anonymous vs file-backed after loading and at the end).
 * Used by bench/ for the depth and size runs and for token-level agreement.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/beam.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"
#include "model/forward.h"
#include "model/model.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* kB value of a /proc/self/status field ("VmHWM"), -1 if absent. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

static void mem_json(char *buf, size_t len, const char *tag) {
    snprintf(buf, len, "\"%s_rss_kb\": %ld, \"%s_rss_anon_kb\": %ld, \"%s_rss_file_kb\": %ld", tag,
             status_kb("VmRSS"), tag, status_kb("RssAnon"), tag, status_kb("RssFile"));
}

typedef struct {
    const dmt_model *m;
    dmt_beam_options opt;
    int32_t **src;
    int *len, *order, n, batch, forced, next;
    dmt_hypothesis *best;  /* [n] 1-best */
    long long tokens;
    pthread_mutex_t mu;
    int failed;
} job;

static void *worker(void *arg) {
    job *J = arg;
    char err[512];
    dmt_state *s = dmt_state_new(J->m);
    const int32_t **src = malloc((size_t)J->batch * sizeof *src);
    int *len = malloc((size_t)J->batch * sizeof *len), *forced = malloc((size_t)J->batch * sizeof *forced);
    dmt_nbest *out = malloc((size_t)J->batch * sizeof *out);
    if (!s || !src || !len || !forced || !out) J->failed = 1;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        int first = J->failed ? J->n : J->next;
        J->next += J->batch;
        pthread_mutex_unlock(&J->mu);
        if (first >= J->n) break;
        int b = J->n - first < J->batch ? J->n - first : J->batch;
        for (int j = 0; j < b; j++) {
            int i = J->order[first + j];
            src[j] = J->src[i], len[j] = J->len[i], forced[j] = J->forced;
        }
        if (dmt_beam_search(s, b, src, len, forced, &J->opt, out, err, sizeof err)) {
            fprintf(stderr, "bench_beam: %s\n", err);
            J->failed = 1;
            break;
        }
        pthread_mutex_lock(&J->mu);
        for (int j = 0; j < b; j++) {
            int i = J->order[first + j];
            J->best[i] = out[j].hyps[0];
            out[j].hyps[0].tokens = NULL;  /* kept */
            J->tokens += J->best[i].n_tokens;
            dmt_nbest_clear(&out[j]);
        }
        pthread_mutex_unlock(&J->mu);
    }
    free(src), free(len), free(forced), free(out);
    dmt_state_free(s);
    return NULL;
}

static int *g_len;
static int by_length_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (g_len[x] != g_len[y]) return g_len[x] > g_len[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Reads one id list a line (</s> appended). -1 on a bad line. */
static int read_ids(FILE *f, int eos, int32_t ***src, int **len, int *n) {
    char *buf = NULL;
    size_t cap = 0;
    int cap_n = 0;
    *n = 0;
    while (getline(&buf, &cap, f) >= 0) {
        if (*n == cap_n) {
            cap_n = cap_n ? 2 * cap_n : 256;
            *src = realloc(*src, (size_t)cap_n * sizeof **src);
            *len = realloc(*len, (size_t)cap_n * sizeof **len);
        }
        int32_t *row = malloc((strlen(buf) / 2 + 2) * sizeof *row);
        int k = 0;
        char *p = buf, *end;
        for (long v; (v = strtol(p, &end, 10)), end != p; p = end) row[k++] = (int32_t)v;
        if (k == 0) { free(buf); return -1; }
        row[k++] = eos;
        (*src)[*n] = row;
        (*len)[(*n)++] = k;
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    dmt_precision precision = DMT_PRECISION_F32;
    int no_shortlist = 0;
    static const struct option opts[] = {{"input", 1, 0, 'i'}, {"output", 1, 0, 'o'}, {"forced", 1, 0, 'f'},
                                         {"beam", 1, 0, 'b'}, {"batch-size", 1, 0, 'B'}, {"threads", 1, 0, 't'},
                                         {"workers", 1, 0, 'w'}, {"precision", 1, 0, 'p'},
                                         {"no-shortlist", 0, 0, 'S'}, {0, 0, 0, 0}};
    const char *input = NULL, *output = NULL;
    int forced = -1, beam = 4, batch = 32, threads = 1, workers = 0, c;
    while ((c = getopt_long(argc, argv, "i:o:b:", opts, NULL)) != -1) {
        switch (c) {
        case 'i': input = optarg; break;
        case 'o': output = optarg; break;
        case 'f': forced = atoi(optarg); break;
        case 'b': beam = atoi(optarg); break;
        case 'B': batch = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'w': workers = atoi(optarg); break;
        case 'S': no_shortlist = 1; break;
        case 'p':
            precision = !strcmp(optarg, "bf16") ? DMT_PRECISION_BF16
                        : !strcmp(optarg, "int8") ? DMT_PRECISION_INT8 : DMT_PRECISION_F32;
            break;
        default: return 2;
        }
    }
    if (optind != argc - 1 || !input || batch < 1 || threads < 1) {
        fprintf(stderr, "usage: bench_beam MODEL_DIR -i SRC.ids [-o HYP.ids] [--forced ID] [--beam K] "
                        "[--batch-size N] [--threads N] [--workers W] [--precision f32|bf16|int8] [--no-shortlist]\n");
        return 2;
    }
    if (workers < 1) workers = threads;
    dmt_kernels_set_threads(threads / workers > 0 ? threads / workers : 1);
    char err[512], mem_load[200], mem_end[200];
    double t0 = now();
    dmt_model *m = dmt_model_load(argv[optind], (dmt_load_options){.ids_only = 1, .precision = precision, .no_shortlist = no_shortlist}, err,
                                  sizeof err);
    if (!m) { fprintf(stderr, "bench_beam: %s\n", err); return 1; }
    double load_s = now() - t0;
    mem_json(mem_load, sizeof mem_load, "load");
    job J = {.m = m, .batch = batch, .forced = forced};
    pthread_mutex_init(&J.mu, NULL);
    J.opt = dmt_beam_options_default(&m->cfg);
    J.opt.beam_size = beam;
    FILE *f = fopen(input, "r");
    if (!f || read_ids(f, m->cfg.eos_id, &J.src, &J.len, &J.n) || J.n == 0) {
        fprintf(stderr, "bench_beam: cannot read ids from %s\n", input);
        return 1;
    }
    fclose(f);
    J.order = malloc((size_t)J.n * sizeof *J.order);
    J.best = calloc((size_t)J.n, sizeof *J.best);
    for (int i = 0; i < J.n; i++) J.order[i] = i;
    g_len = J.len;
    qsort(J.order, (size_t)J.n, sizeof *J.order, by_length_desc);
    double t1 = now();
    pthread_t th[64];
    int nw = workers < 64 ? workers : 64, started = 0;
    for (int w = 1; w < nw; w++)
        if (pthread_create(&th[w], NULL, worker, &J) == 0) started = w;
    worker(&J);
    for (int w = 1; w <= started; w++) pthread_join(th[w], NULL);
    double run_s = now() - t1;
    if (J.failed) return 1;
    mem_json(mem_end, sizeof mem_end, "end");
    FILE *o = output ? fopen(output, "w") : NULL;
    for (int i = 0; o && i < J.n; i++) {
        for (int t = 0; t < J.best[i].n_tokens; t++) fprintf(o, "%s%d", t ? " " : "", J.best[i].tokens[t]);
        fputc('\n', o);
    }
    if (o) fclose(o);
    char kernels[64];
    printf("{\"engine\": \"deepmt\", \"sentences\": %d, \"target_tokens\": %lld, \"load_s\": %.4f, "
           "\"translate_s\": %.4f, \"sentences_per_s\": %.3f, \"tokens_per_s\": %.3f, \"threads\": %d, "
           "\"workers\": %d, \"params\": %lld, \"weight_bytes_f32\": %zu, \"weight_bytes_file\": %zu, "
           "\"weight_bytes_memory\": %zu, \"kernels\": \"%s\", "
           "\"peak_rss_kb\": %ld, %s, %s}\n",
           J.n, J.tokens, load_s, run_s, J.n / run_s, J.tokens / run_s, threads, workers, m->n_params,
           m->weight_bytes_f32, m->weight_bytes_file, m->weight_bytes_memory,
           dmt_gemm_describe(m->kernels, m->layout, kernels, sizeof kernels), status_kb("VmHWM"), mem_load, mem_end);
    for (int i = 0; i < J.n; i++) free(J.src[i]), free(J.best[i].tokens);
    free(J.src), free(J.len), free(J.order), free(J.best);
    dmt_model_free(m);
    return 0;
}
