/* test_checkpoint.c — the loader against broken model directories, dtype widening,
 * and allocation-failure injection.
 *
 * 1. tests/fixtures/malformed/<case>/ (written by make_cases.py there): every case
 *    with an `expect` file must be refused with a message containing that text; the
 *    valid-* cases must load. An `options` file saying "tokenizer" loads with
 *    ids_only = 0.
 * 2. dmt_f16_to_f32 / dmt_bf16_to_f32 on every 16-bit pattern against a reference
 *    computed here from the formats' definitions (ldexp in double).
 * 3. Failure injection: with dmt_fault_after(n) the loader's (n+1)th allocation
 *    fails, and jansson's allocations are routed through the same countdown. For
 *    n = 0, 1, ... until a load succeeds, the load must fail cleanly (NULL and a
 *    message); under `make asan` LeakSanitizer checks nothing leaks on any path.
 * 4. A loaded model does not depend on its file: an F32 model (every tensor could be
 *    a view of the mapping) gives the same log-probabilities after its
 *    model.safetensors is truncated, rewritten with other bytes, or deleted (a SIGBUS
 *    on the old loader, reported here as a failure).
 * 5. Files that are not regular (FIFO, directory, /dev/zero) as config.json,
 *    model.safetensors, sentencepiece.model or vocab.txt are refused at once, never
 *    waited on (the test would hang: run.sh's caller sees the timeout).
 * 6. Configs that claim what the file cannot back (millions of layers, huge
 *    sinusoid tables) are refused before anything that size is allocated: the load
 *    runs under a 1 GiB address-space limit in a child process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/gemm.h"
#include "model/model.h"
#include "model/kernels/kernels.h"
#include "model/safetensors.h"
#include "tests/c/check.h"
#include "tests/c/fixtures.h"

/* The first line of dir/name into buf (newline stripped); 0 if the file is absent. */
static int read_line(const char *dir, const char *name, char *buf, size_t cap) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (!fgets(buf, (int)cap, f)) buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return 1;
}

static int is_dir(const struct dirent *e) { return e->d_name[0] != '.' && e->d_type == DT_DIR; }

static void malformed_cases(void) {
    char root[1024], dir[1300], expect[512], options[64], err[1024], what[1400];
    fixture_path(root, sizeof root, "malformed");
    struct dirent **list;
    int n = scandir(root, &list, is_dir, alphasort);
    if (!CHECK(n > 0, "malformed cases found", "%s: no case folders", root)) return;
    int refused = 0, loaded = 0;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        snprintf(dir, sizeof dir, "%s/%s", root, name);
        int valid = strncmp(name, "valid", 5) == 0, has_expect = read_line(dir, "expect", expect, sizeof expect);
        dmt_load_options opts = {.ids_only = 1};
        if (read_line(dir, "options", options, sizeof options) && strstr(options, "tokenizer")) opts.ids_only = 0;
        err[0] = 0;
        dmt_model *m = dmt_model_load(dir, opts, err, sizeof err);
        if (valid) {
            snprintf(what, sizeof what, "%s: loads", name);
            CHECK(m && !has_expect, what, "%s", m ? "a valid-* case must not have an expect file" : err);
            loaded += m != NULL;
        } else if (!has_expect) {
            snprintf(what, sizeof what, "%s: has an expect file", name);
            CHECK(0, what, "add %s/expect (or name the folder valid-*)", dir);
        } else {
            snprintf(what, sizeof what, "%s: refused with \"%s\"", name, expect);
            CHECK(!m && strstr(err, expect), what, "%s", m ? "it loaded" : err);
            refused += !m;
        }
        dmt_model_free(m);
        free(list[i]);
    }
    free(list);
    CHECK(loaded >= 1 && refused >= 20, "controls load and the broken cases are refused", "%d loaded, %d refused",
          loaded, refused);
}

/* ---- widening ---------------------------------------------------------------------- */

/* sign, exponent and mantissa fields -> value, per IEEE 754 binary16 / bfloat16. */
static double ref_half(uint16_t h, int exp_bits, int man_bits) {
    int bias = (1 << (exp_bits - 1)) - 1, e = (h >> man_bits) & ((1 << exp_bits) - 1);
    int man = h & ((1 << man_bits) - 1);
    double v;
    if (e == (1 << exp_bits) - 1) v = man ? NAN : INFINITY;
    else if (e == 0) v = ldexp(man, 1 - bias - man_bits); /* zero and subnormals */
    else v = ldexp(man + (1 << man_bits), e - bias - man_bits);
    return copysign(v, (h & 0x8000) ? -1.0 : 1.0);        /* -0 and negative NaNs too */
}

/* got equals ref exactly: same bits for numbers (so -0 != +0), NaN for NaN with the same sign. */
static int same(float got, double ref) {
    if (isnan(ref)) return isnan(got) && !signbit(got) == !signbit(ref);
    float r = (float)ref; /* exact: every binary16 / bfloat16 value is a float */
    return memcmp(&got, &r, sizeof r) == 0;
}

/* The loader's bulk conversions: all 65536 patterns, little-endian bytes at an even
 * and an odd address, lengths that end mid-vector, and nothing written past n. */
static void widening_bulk(void) {
    enum { N = 65536, GUARD = 8 };
    unsigned char *bytes = malloc(2 * N + 1);
    float *out = malloc((N + GUARD) * sizeof *out);
    if (!CHECK(bytes && out, "bulk widening: buffers")) { free(bytes); free(out); return; }
    static const struct { int offset; size_t n; } runs[] = {{0, N}, {1, N}, {1, N - 5}, {0, 3}, {1, 0}};
    char what[160];
    for (int fmt = 0; fmt < 2; fmt++)
        for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
            unsigned char *src = bytes + runs[r].offset;
            for (uint32_t h = 0; h < N; h++) src[2 * h] = (unsigned char)(h & 0xff), src[2 * h + 1] = (unsigned char)(h >> 8);
            for (int g = 0; g < N + GUARD; g++) out[g] = 12345.0f;
            if (fmt == 0) dmt_f16_to_f32_n(out, src, runs[r].n);
            else dmt_bf16_to_f32_n(out, src, runs[r].n);
            long bad = -1;
            for (size_t h = 0; h < runs[r].n && bad < 0; h++)
                if (!same(out[h], fmt == 0 ? ref_half((uint16_t)h, 5, 10) : ref_half((uint16_t)h, 8, 7))) bad = (long)h;
            int guard_ok = 1;
            for (size_t g = runs[r].n; g < runs[r].n + GUARD; g++) guard_ok &= out[g] == 12345.0f;
            snprintf(what, sizeof what, "%s bulk widening: %zu values from %s address exact, nothing past the end",
                     fmt == 0 ? "F16" : "BF16", runs[r].n, runs[r].offset ? "an odd" : "an even");
            CHECK(bad < 0 && guard_ok, what, "first mismatch 0x%04lx (-1: none), got %.9g; past the end %s", bad,
                  bad >= 0 ? (double)out[bad] : 0.0, guard_ok ? "untouched" : "written");
        }
    free(bytes);
    free(out);
}

static void widening(void) {
    static const struct { uint16_t bits; float value; const char *what; } f16[] = {
        {0x3c00, 1.0f, "1"}, {0xc000, -2.0f, "-2"}, {0x3555, 0.333251953125f, "0.33325"},
        {0x7bff, 65504.0f, "65504 (largest)"}, {0x0400, 6.103515625e-05f, "2^-14 (smallest normal)"},
        {0x0001, 5.9604644775390625e-08f, "2^-24 (smallest subnormal)"},
        {0x03ff, 6.097555160522461e-05f, "largest subnormal"}, {0x8001, -5.9604644775390625e-08f, "-2^-24"},
        {0x0000, 0.0f, "+0"}, {0x8000, -0.0f, "-0"}, {0x7c00, INFINITY, "+inf"}, {0xfc00, -INFINITY, "-inf"},
    };
    static const struct { uint16_t bits; float value; const char *what; } bf16[] = {
        {0x3f80, 1.0f, "1"}, {0xc040, -3.0f, "-3"}, {0x3eab, 0.333984375f, "0.33398"},
        {0x7f7f, 3.3895313892515355e+38f, "largest"}, {0x0080, 1.1754943508222875e-38f, "2^-126 (smallest normal)"},
        {0x0001, 9.183549615799121e-41f, "2^-133 (smallest subnormal)"}, {0x0000, 0.0f, "+0"},
        {0x8000, -0.0f, "-0"}, {0x7f80, INFINITY, "+inf"}, {0xff80, -INFINITY, "-inf"},
    };
    char what[128];
    for (size_t i = 0; i < sizeof f16 / sizeof *f16; i++) {
        float got = dmt_f16_to_f32(f16[i].bits);
        snprintf(what, sizeof what, "F16 0x%04x -> %s", f16[i].bits, f16[i].what);
        CHECK(same(got, f16[i].value) && same(got, ref_half(f16[i].bits, 5, 10)), what, "got %.9g", got);
    }
    for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++) {
        float got = dmt_bf16_to_f32(bf16[i].bits);
        snprintf(what, sizeof what, "BF16 0x%04x -> %s", bf16[i].bits, bf16[i].what);
        CHECK(same(got, bf16[i].value) && same(got, ref_half(bf16[i].bits, 8, 7)), what, "got %.9g", got);
    }
    static const uint16_t nans[][2] = {{0x7e00, 0x7fc0}, {0xfe00, 0xffc0}, {0x7c01, 0x7f81}, {0xfd55, 0xffaa}};
    int nan_ok = 1;
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++)
        nan_ok &= same(dmt_f16_to_f32(nans[i][0]), ref_half(nans[i][0], 5, 10)) &&
                  same(dmt_bf16_to_f32(nans[i][1]), ref_half(nans[i][1], 8, 7));
    CHECK(nan_ok, "F16 / BF16 NaNs (quiet, signalling, negative) stay NaN with their sign");
    int bad16 = -1, badbf = -1;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        if (bad16 < 0 && !same(dmt_f16_to_f32((uint16_t)h), ref_half((uint16_t)h, 5, 10))) bad16 = (int)h;
        if (badbf < 0 && !same(dmt_bf16_to_f32((uint16_t)h), ref_half((uint16_t)h, 8, 7))) badbf = (int)h;
    }
    CHECK(bad16 < 0, "F16 -> F32 exact for all 65536 patterns", "first mismatch 0x%04x", bad16);
    CHECK(badbf < 0, "BF16 -> F32 exact for all 65536 patterns", "first mismatch 0x%04x", badbf);
    widening_bulk();
}

/* ---- failure injection ------------------------------------------------------------- */

/* jansson reports some allocation failures as syntax errors ("string or '}' expected"),
 * so a load failing in jansson only needs some message; one failing in the loader's own
 * allocations must say "out of memory". */
static int json_alloc_failed;

static void *fault_json_malloc(size_t n) {
    if (dmt_fault_hit()) { json_alloc_failed = 1; return NULL; }
    return malloc(n);
}

/* Loads dir with the (n+1)th allocation failing, for n = 0, 1, ... until it loads. */
static void inject(const char *rel, int ids_only) {
    char dir[1024], err[1024], what[1200], first_err[1100] = "";
    fixture_path(dir, sizeof dir, rel);
    json_set_alloc_funcs(fault_json_malloc, free);
    int n, clean = 1, loaded = 0;
    const int limit = 100000;
    for (n = 0; n < limit && !loaded; n++) {
        dmt_fault_after(n);
        json_alloc_failed = 0;
        err[0] = 0;
        dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = ids_only}, err, sizeof err);
        dmt_fault_after(-1);
        if (m) loaded = 1;
        else if (!err[0] && clean) { clean = 0; snprintf(first_err, sizeof first_err, "no message at n = %d", n); }
        else if (!json_alloc_failed && !strstr(err, "memory")) {
            if (getenv("DEBUG_FAULT")) fprintf(stderr, "n=%d: %s\n", n, err);
            clean = 0;
            snprintf(first_err, sizeof first_err, "n = %d: %s", n, err);
        }
        dmt_model_free(m);
    }
    json_set_alloc_funcs(malloc, free);
    snprintf(what, sizeof what, "%s: each of %d injected allocation failures refused cleanly", rel, n);
    CHECK(loaded && clean, what, "%s", loaded ? first_err : "never loaded");
    /* and the countdown is off again: a normal load works */
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = ids_only}, err, sizeof err);
    snprintf(what, sizeof what, "%s: loads again with injection off", rel);
    CHECK(m, what, "%s", err);
    dmt_model_free(m);
}

/* ---- 4. the model file changes under a loaded model ---- */

/* Empties a temp dir (files, FIFOs, links, empty subdirectories) and removes it; a
 * leftover shows up as a failure rather than as litter in /tmp run after run. */
static void remove_temp_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1200];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) rmdir(path);
    }
    if (d) closedir(d);
    CHECK(rmdir(dir) == 0, "temp dir removed", "%s: %s", dir, strerror(errno));
}

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out)) ok = 0;
    return ok ? 0 : -1;
}

static const char *sigbus_what;

static void on_sigbus(int sig) {
    /* the old loader read weights straight from the mapping: report, do not crash the run */
    static const char msg[] = "not ok - SIGBUS: the loaded model read its (changed) file: ";
    ssize_t w = write(1, msg, sizeof msg - 1);
    w = write(1, sigbus_what, strlen(sigbus_what));
    w = write(1, "\n", 1);
    (void)w;
    _exit(1);
}

/* Encodes a fixed sentence and decodes one step; the log-probabilities into lp. */
static int run_model(const dmt_model *m, float *lp, char *err, size_t errlen) {
    static const int32_t src[] = {7, 9, 11, 13, 2};
    const int32_t *rows[] = {src};
    int len[] = {5}, hyp_src[] = {0};
    int32_t tok[] = {(int32_t)m->cfg.decoder_start_id};
    dmt_state *s = dmt_state_new(m);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    int rc = dmt_encode(s, 1, rows, len, err, errlen) || dmt_decode_begin(s, 1, hyp_src, 1, 4, err, errlen) ||
             dmt_decode_step(s, tok, lp);
    dmt_state_free(s);
    return rc ? -1 : 0;
}

static void file_changes(void) {
    char src[1024], dir[] = "/tmp/deepmt-file-XXXXXX", path[1200], from[1200], err[1024], what[256];
    fixture_path(src, sizeof src, "golden/deepnorm-6x6"); /* F32 */
    if (!CHECK(mkdtemp(dir), "file changes: temp dir")) return;
    snprintf(from, sizeof from, "%s/config.json", src);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int ok = copy_file(from, path) == 0;
    snprintf(from, sizeof from, "%s/model.safetensors", src);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ok = ok && copy_file(from, path) == 0;
    if (!CHECK(ok, "file changes: model copied")) return;
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (!CHECK(m, "file changes: F32 model loads", "%s", err)) return;
    int v = m->cfg.vocab_size;
    float *want = calloc((size_t)v, sizeof *want), *got = calloc((size_t)v, sizeof *got);
    CHECK(run_model(m, want, err, sizeof err) == 0, "file changes: model runs before", "%s", err);
    struct sigaction sa = {.sa_handler = on_sigbus}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old);
    static const char *const how[] = {"truncated to 0 bytes", "rewritten with other bytes (cp over it)", "deleted"};
    for (int k = 0; k < 3; k++) {
        if (k < 2) {
            int fd = open(path, O_WRONLY | O_TRUNC); /* what cp does to an existing file */
            if (k == 1 && fd >= 0) {
                char junk[4096];
                memset(junk, 0x7f, sizeof junk);
                for (int i = 0; i < 8; i++)
                    if (write(fd, junk, sizeof junk) != (ssize_t)sizeof junk) break;
            }
            if (fd >= 0) close(fd);
        } else {
            unlink(path);
        }
        snprintf(what, sizeof what, "file changes: same log-probabilities after model.safetensors is %s", how[k]);
        sigbus_what = what;
        memset(got, 0, (size_t)v * sizeof *got);
        int rc = run_model(m, got, err, sizeof err);
        CHECK(rc == 0 && memcmp(want, got, (size_t)v * sizeof *got) == 0, what, "%s", rc ? err : "values differ");
    }
    sigaction(SIGBUS, &old, NULL);
    free(want);
    free(got);
    dmt_model_free(m);
    remove_temp_dir(dir);
}

/* ---- 5. files that are not regular ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) /* TSan too: its shadow memory needs more than an RLIMIT_AS allows */
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Loads dir in a child under a 10 s alarm: the error text into err; -1 when it hung. */
static int load_in_child(const char *dir, int ids_only, rlim_t as_limit, char *err, size_t errlen, double *secs) {
    int fds[2];
    if (pipe(fds)) return -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(10);
        if (as_limit && !UNDER_ASAN) { /* ASan reserves terabytes of address space for its shadow */
            struct rlimit rl = {as_limit, as_limit};
            setrlimit(RLIMIT_AS, &rl);
        }
        char e[1024] = "";
        dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = ids_only}, e, sizeof e);
        if (m) snprintf(e, sizeof e, "LOADED");
        ssize_t w = write(fds[1], e, strlen(e));
        (void)w;
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < errlen && (r = read(fds[0], err + got, errlen - 1 - got)) > 0) got += (size_t)r;
    err[got] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (secs) *secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (WIFSIGNALED(status)) {
        snprintf(err, errlen, "child killed by signal %d%s", WTERMSIG(status),
                 WTERMSIG(status) == SIGALRM ? " (the load blocked for 10 s)" : "");
        return -1;
    }
    return 0;
}

static void copy_model_dir(const char *src, const char *dir, int with_spm) {
    static const char *const files[] = {"config.json", "model.safetensors", "sentencepiece.model"};
    char from[1200], to[1200];
    for (int i = 0; i < (with_spm ? 3 : 2); i++) {
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        unlink(to);
        copy_file(from, to);
    }
}

static void not_regular(void) {
    char src[1024], dir[] = "/tmp/deepmt-fifo-XXXXXX", path[1200], err[1024], what[256];
    fixture_path(src, sizeof src, "tiny-model");
    if (!CHECK(mkdtemp(dir), "not regular: temp dir")) return;
    static const char *const files[] = {"config.json", "model.safetensors", "sentencepiece.model", "vocab.txt"};
    static const char *const kinds[] = {"FIFO", "directory", "character device"};
    for (int f = 0; f < 4; f++)
        for (int k = 0; k < 3; k++) {
            copy_model_dir(src, dir, 1);
            snprintf(path, sizeof path, "%s/%s", dir, files[f]);
            unlink(path);
            int made = k == 0 ? mkfifo(path, 0600) : k == 1 ? mkdir(path, 0700) : symlink("/dev/zero", path);
            snprintf(what, sizeof what, "%s as a %s: refused at once", files[f], kinds[k]);
            if (!CHECK(made == 0, what, "cannot create it")) continue;
            int rc = load_in_child(dir, 0, 0, err, sizeof err, NULL);
            int named = strstr(err, files[f]) != NULL;
            CHECK(rc == 0 && named && strstr(err, "LOADED") == NULL, what, "%s", err);
            if (k == 1) rmdir(path);
            else unlink(path);
        }
    copy_model_dir(src, dir, 1);
    int rc = load_in_child(dir, 0, 0, err, sizeof err, NULL);
    CHECK(rc == 0 && !strcmp(err, "LOADED"), "not regular: the same directory with regular files loads", "%s", err);
    remove_temp_dir(dir);
}

/* ---- 6. configs the file cannot back ---- */

/* Writes dir/config.json: the tiny model's config with one key replaced (JSON text). */
static int write_config(const char *src, const char *dir, const char *key, const char *value) {
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/config.json", src);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
    if (!root || !v) { json_decref(root); json_decref(v); return -1; }
    json_object_set_new(root, key, v);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = json_dump_file(root, path, 0);
    json_decref(root);
    (void)err;
    return rc;
}

/* Appends one F16 tensor entry to the header (zeros: the file is extended sparsely). */
static void add_tensor(json_t *hdr, size_t *pos, const char *name, int64_t d0, int64_t d1) {
    int64_t n = d1 ? d0 * d1 : d0;
    json_t *shape = d1 ? json_pack("[II]", (json_int_t)d0, (json_int_t)d1) : json_pack("[I]", (json_int_t)d0);
    json_object_set_new(hdr, name, json_pack("{s:s,s:o,s:[II]}", "dtype", "F16", "shape", shape, "data_offsets",
                                             (json_int_t)*pos, (json_int_t)(*pos + (size_t)n * 2)));
    *pos += (size_t)n * 2;
}

/* dir/model.safetensors with every tensor dir/config.json implies (the rules of
 * docs/model-format.md, as tests/fixtures/malformed/make_cases.py writes them). */
static int write_zero_model(const char *dir) {
    char path[1200], err[512], name[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    dmt_config c;
    if (dmt_config_load(path, &c, err, sizeof err)) return -1;
    json_t *hdr = json_object();
    size_t pos = 0;
    int d = c.d_model, v = c.vocab_size, f = c.ffn_dim;
    add_tensor(hdr, &pos, "encoder.embed_tokens.weight", v, d);
    if (!c.share_embeddings) add_tensor(hdr, &pos, "decoder.embed_tokens.weight", v, d);
    if (!c.tie_output) add_tensor(hdr, &pos, "decoder.output_projection.weight", v, d);
    for (int dec = 0; dec < 2; dec++) {
        const char *st = dec ? "decoder" : "encoder";
        if (c.positions == DMT_POS_LEARNED) {
            snprintf(name, sizeof name, "%s.embed_positions.weight", st);
            add_tensor(hdr, &pos, name, c.max_positions + c.position_offset, d);
        }
        for (int i = 0; i < (dec ? c.decoder_layers : c.encoder_layers); i++) {
            static const char *const attn[] = {"self_attn", "encoder_attn"}, *const proj[] = {"q", "k", "v", "out"};
            for (int a = 0; a <= dec; a++) {
                for (int p = 0; p < 4; p++) {
                    snprintf(name, sizeof name, "%s.layers.%d.%s.%s_proj.weight", st, i, attn[a], proj[p]);
                    add_tensor(hdr, &pos, name, d, d);
                    snprintf(name, sizeof name, "%s.layers.%d.%s.%s_proj.bias", st, i, attn[a], proj[p]);
                    add_tensor(hdr, &pos, name, d, 0);
                }
                snprintf(name, sizeof name, "%s.layers.%d.%s_layer_norm.weight", st, i, attn[a]);
                add_tensor(hdr, &pos, name, d, 0);
                snprintf(name, sizeof name, "%s.layers.%d.%s_layer_norm.bias", st, i, attn[a]);
                add_tensor(hdr, &pos, name, d, 0);
            }
            static const char *const rest[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                               "final_layer_norm.weight", "final_layer_norm.bias"};
            int64_t shapes[][2] = {{f, d}, {f, 0}, {d, f}, {d, 0}, {d, 0}, {d, 0}};
            for (int r = 0; r < 6; r++) {
                snprintf(name, sizeof name, "%s.layers.%d.%s", st, i, rest[r]);
                add_tensor(hdr, &pos, name, shapes[r][0], shapes[r][1]);
            }
        }
    }
    char *text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *out = fopen(path, "wb");
    int ok = text && out;
    if (ok) {
        uint64_t n = strlen(text);
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(n >> (8 * i));
        ok = fwrite(len8, 1, 8, out) == 8 && fwrite(text, 1, n, out) == n && ftruncate(fileno(out), (off_t)(8 + n + pos)) == 0;
    }
    if (out && fclose(out)) ok = 0;
    free(text);
    return ok ? 0 : -1;
}

static void oversized_configs(void) {
    char src[1024], dir[] = "/tmp/deepmt-big-XXXXXX", err[1024], what[300];
    fixture_path(src, sizeof src, "tiny-model");
    if (!CHECK(mkdtemp(dir), "oversized configs: temp dir")) return;
    static const struct { const char *key, *value, *expect; } cases[] = {
        {"encoder_layers", "4000000", "missing tensor \"encoder.layers.2.self_attn.q_proj.weight\" (config.json implies"},
        {"decoder_layers", "40000000", "missing tensor \"decoder.layers.2.self_attn.q_proj.weight\" (config.json implies"},
        {"encoder_layers", "1000000000", "implies 16000000"},
        {"max_positions", "65536", NULL}, /* 65538 x 32 floats: 8 MiB, under the free allowance: loads */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        copy_model_dir(src, dir, 0);
        write_config(src, dir, cases[i].key, cases[i].value);
        double secs = 0;
        int rc = load_in_child(dir, 1, (rlim_t)1 << 30, err, sizeof err, &secs);
        snprintf(what, sizeof what, "\"%s\": %s %s within 1 GiB of address space", cases[i].key, cases[i].value,
                 cases[i].expect ? "refused" : "loads");
        if (cases[i].expect) CHECK(rc == 0 && strstr(err, cases[i].expect), what, "%s", err);
        else CHECK(rc == 0 && !strcmp(err, "LOADED"), what, "%s", err);
    }
    /* a real (zero) model of d_model 256: its sinusoid table grows with max_positions */
    static const struct { const char *max_positions, *expect; } sin_cases[] = {
        {"65536", "MiB sinusoid table, more than"}, /* 65538 x 256 floats: 64.0 MiB + 8 KiB, file ~1.8 MB */
        {"4096", NULL},
    };
    for (size_t i = 0; i < sizeof sin_cases / sizeof *sin_cases; i++) {
        copy_model_dir(src, dir, 0);
        char tmp[1200];
        write_config(src, dir, "max_positions", sin_cases[i].max_positions);
        snprintf(tmp, sizeof tmp, "%s", dir);
        write_config(tmp, dir, "d_model", "256");
        write_config(tmp, dir, "encoder_layers", "1");
        write_config(tmp, dir, "decoder_layers", "1");
        int made = write_zero_model(dir) == 0;
        double secs = 0;
        int rc = made ? load_in_child(dir, 1, (rlim_t)1 << 30, err, sizeof err, &secs) : -1;
        snprintf(what, sizeof what, "d_model 256, max_positions %s: %s", sin_cases[i].max_positions,
                 sin_cases[i].expect ? "the sinusoid table is refused" : "loads");
        if (sin_cases[i].expect) CHECK(rc == 0 && strstr(err, sin_cases[i].expect), what, "%s", made ? err : "no model");
        else CHECK(rc == 0 && !strcmp(err, "LOADED"), what, "%s", made ? err : "no model");
    }
    /* config.json is read only up to 1 MiB */
    copy_model_dir(src, dir, 0);
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "a");
    for (int i = 0; f && i < (1 << 20); i += 64) fputs("                                                               \n", f);
    if (f) fclose(f);
    int rc = load_in_child(dir, 1, 0, err, sizeof err, NULL);
    CHECK(rc == 0 && strstr(err, "config.json: ") && strstr(err, "bytes is over the limit of 1048576"),
          "a config.json over 1 MiB is refused unread", "%s", err);
    remove_temp_dir(dir);
}

/* ---- 7. precision_checks: what lets --precision auto pick a faster precision ---- */

static void precision_checks(void) {
    char src[1024], dir[] = "/tmp/deepmt-prec-XXXXXX", err[1024], what[400];
    fixture_path(src, sizeof src, "tiny-model");
    if (!CHECK(mkdtemp(dir), "precision checks: temp dir")) return;
    static const struct { const char *value, *expect; } bad[] = {
        {"[]", "\"precision_checks\" must be an object"},
        {"{\"f16\": {}}", "unknown precision \"f16\""},
        {"{\"int8\": 1}", "precision_checks.int8 must be an object"},
        {"{\"int8\": {\"worst_bleu_change\": -1, \"directions\": 2}}", "int8.mean_bleu_change must be a number"},
        {"{\"int8\": {\"mean_bleu_change\": \"-0.1\", \"worst_bleu_change\": -1, \"directions\": 2}}",
         "int8.mean_bleu_change must be a number"},
        {"{\"int8\": {\"mean_bleu_change\": -0.1, \"worst_bleu_change\": 1e300, \"directions\": 2}}",
         "int8.worst_bleu_change must be a number"},
        {"{\"bf16\": {\"mean_bleu_change\": -0.1, \"worst_bleu_change\": 0.2, \"directions\": 2}}",
         "worst_bleu_change 0.2 is above mean_bleu_change"},
        {"{\"int8\": {\"mean_bleu_change\": -0.1, \"worst_bleu_change\": -0.2, \"directions\": 0}}",
         "int8.directions must be an integer"},
        {"{\"int8\": {\"mean_bleu_change\": -0.1, \"worst_bleu_change\": -0.2, \"directions\": 3, "
         "\"test_set\": 5}}", "int8.test_set must be a string"},
    };
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        copy_model_dir(src, dir, 0);
        write_config(src, dir, "precision_checks", bad[i].value);
        dmt_config c;
        int rc = dmt_config_load(path, &c, err, sizeof err);
        snprintf(what, sizeof what, "precision_checks %s: refused, said why", bad[i].value);
        CHECK(rc != 0 && strstr(err, bad[i].expect), what, "%s", rc ? err : "accepted");
    }
    /* the choice, at every level (emulated tables where this CPU lacks one) */
    static const struct { const char *checks; int want_int8, want_bf16; const char *why; } cases[] = {
        {NULL, 0, 0, "vouches for no faster precision"},
        {"{\"int8\": {\"mean_bleu_change\": -0.01, \"worst_bleu_change\": -0.27, \"directions\": 12, "
         "\"test_set\": \"multi30k\"}}", 1, 0, "vouches for int8: BLEU -0.01 on average, -0.27 at worst, over 12 "
         "directions of multi30k"},
        {"{\"int8\": {\"mean_bleu_change\": -0.31, \"worst_bleu_change\": -0.4, \"directions\": 12}}", 0, 0,
         "misses the bar"},
        {"{\"int8\": {\"mean_bleu_change\": -0.1, \"worst_bleu_change\": -0.81, \"directions\": 12}}", 0, 0,
         "misses the bar"},
        {"{\"bf16\": {\"mean_bleu_change\": 0, \"worst_bleu_change\": -0.1, \"directions\": 1}}", 0, 1,
         "vouches for bf16"},
        {"{\"bf16\": {\"mean_bleu_change\": 0, \"worst_bleu_change\": -0.1, \"directions\": 1}, "
         "\"int8\": {\"mean_bleu_change\": 0.1, \"worst_bleu_change\": -0.3, \"directions\": 1}}", 1, 1, "vouches"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        copy_model_dir(src, dir, 0);
        if (cases[i].checks) write_config(src, dir, "precision_checks", cases[i].checks);
        dmt_config c;
        if (!CHECK(dmt_config_load(path, &c, err, sizeof err) == 0, "precision_checks: a valid one loads", "%s", err))
            continue;
        for (int level = 0; level < DMT_ISA_COUNT; level++) {
            const dmt_kernels *k = dmt_kernels_for((dmt_isa)level);
            if (!k) k = dmt_kernels_emulated((dmt_isa)level); /* the choice only reads the table */
            if (!k) continue;
            int fast_int8 = level >= DMT_ISA_AVX2, has_bf16 = dmt_gemm_layout(k, DMT_PRECISION_BF16) >= 0;
            dmt_precision want = cases[i].want_int8 && fast_int8   ? DMT_PRECISION_INT8
                                 : cases[i].want_bf16 && has_bf16 ? DMT_PRECISION_BF16
                                                                   : DMT_PRECISION_F32;
            char why[192];
            dmt_precision got = dmt_precision_choose(&c, k, 0, why, sizeof why);
            snprintf(what, sizeof what, "precision auto at %s with %s: %s", k->name,
                     cases[i].checks ? cases[i].checks : "no checks", dmt_precision_name(want));
            /* the reason is the case's own unless the level turned a vouched precision down */
            int turned_down = want == DMT_PRECISION_F32 && (cases[i].want_int8 || cases[i].want_bf16);
            const char *why_expected = turned_down ? "not fast on this CPU" : cases[i].why;
            CHECK(got == want && strstr(why, why_expected), what, "got %s: %s", dmt_precision_name(got), why);
            got = dmt_precision_choose(&c, k, 1, why, sizeof why);
            snprintf(what, sizeof what, "precision auto at %s, a file with int8 weights: int8", k->name);
            CHECK(got == DMT_PRECISION_INT8 && strstr(why, "int8"), what, "got %s: %s", dmt_precision_name(got), why);
        }
    }
    /* the load resolves AUTO and says why */
    copy_model_dir(src, dir, 0);
    write_config(src, dir, "precision_checks", cases[1].checks);
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1, .precision = DMT_PRECISION_AUTO}, err,
                                  sizeof err);
    int fast = m && m->kernels->isa >= DMT_ISA_AVX2;
    CHECK(m && m->precision == (fast ? DMT_PRECISION_INT8 : DMT_PRECISION_F32) &&
              m->layout == (fast ? DMT_LAYOUT_PACKED_I8 : m->layout) && m->precision_reason[0],
          "a load with AUTO runs what the checks vouch for, with its reason", "%s %s", m ? dmt_precision_name(m->precision) : err,
          m ? m->precision_reason : "");
    dmt_model_free(m);
    m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    CHECK(m && m->precision == DMT_PRECISION_F32 && !strcmp(m->precision_reason, "asked for"),
          "the library's default stays F32 whatever config.json vouches for", "%s", m ? m->precision_reason : err);
    dmt_model_free(m);
    remove_temp_dir(dir);
}

int main(void) {
    precision_checks();
    file_changes();
    not_regular();
    oversized_configs();
    malformed_cases();
    widening();
    inject("malformed/valid", 1);
    inject("malformed/valid-mixed-dtypes", 1);
    inject("malformed/valid-unaligned-f32", 1);
    inject("malformed/valid-pre-learned-untied", 1);
    return check_done();
}
