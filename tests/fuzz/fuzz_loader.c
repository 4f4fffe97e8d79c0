/* fuzz_loader.c — libFuzzer target for the model loader (config.json + safetensors).
 *
 * An input is a model directory in one buffer: config.json's text up to the first
 * NUL byte, then the bytes of model.safetensors (tests/fuzz/make_seeds.sh writes the
 * seeds from tests/fixtures/malformed). Both are written to a private temporary
 * directory and loaded with the real loader (dmt_model_load, ids only), so the
 * config parser, the header parser, the tensor binding and the packing all run on
 * the mutated bytes. A load must either fail with a message or give a model that
 * runs: one short sentence is encoded and one decoder step taken (the values are
 * not checked, the weights are arbitrary: memory errors, undefined behaviour, leaks,
 * hangs and a failure without a message are the findings).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/forward.h"
#include "model/model.h"

static char dir[256], config_path[300], model_path[300];

static void cleanup(void) {
    unlink(config_path);
    unlink(model_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    /* tmpfs when there is one: two files are written per input */
    struct stat sb;
    const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/deepmt-fuzz-loader-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("fuzz_loader: mkdtemp");
        exit(1);
    }
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    atexit(cleanup);
    return 0;
}

static void write_all(const char *path, const uint8_t *p, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) { perror(path); abort(); }
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { perror(path); abort(); }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* Encodes 3 tokens and takes one decoder step on a loaded model. */
static void run(const dmt_model *m) {
    int v = m->cfg.vocab_size;
    if ((long long)v * m->cfg.d_model > (1 << 22)) return; /* keep each input fast */
    int32_t src[4] = {(int32_t)(7 % v), (int32_t)(11 % v), (int32_t)(13 % v), (int32_t)m->cfg.eos_id};
    const int32_t *rows[] = {src};
    int len[] = {4}, hyp_src[] = {0};
    int32_t tok[] = {(int32_t)m->cfg.decoder_start_id};
    char err[256];
    dmt_state *s = dmt_state_new(m);
    float *lp = malloc((size_t)v * sizeof *lp);
    if (s && lp && dmt_encode(s, 1, rows, len, err, sizeof err) == 0 &&
        dmt_decode_begin(s, 1, hyp_src, 1, 2, err, sizeof err) == 0)
        dmt_decode_step(s, tok, lp);
    free(lp);
    dmt_state_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t clen = nul ? (size_t)(nul - data) : size;
    write_all(config_path, data, clen);
    write_all(model_path, nul ? nul + 1 : data + size, nul ? size - clen - 1 : 0);
    char err[1024] = "";
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (!m && !err[0]) {
        fprintf(stderr, "fuzz_loader: a load failed without a message\n");
        abort();
    }
    if (m) run(m);
    dmt_model_free(m);
    return 0;
}
