/* test_checkpoint.c — the loader against broken model directories, dtype widening,
 * and allocation-failure injection.
 *
 * 1. tests/fixtures/malformed/<case>/ (written by make_cases.py there): every case
 *    with an `expect` file must be refused with a message containing that text; the
 *    valid-* cases must load. An `options` file saying "tokenizer" loads with
 *    ids_only = 0.
 * 2. dmt_f16_to_f32 / dmt_bf16_to_f32 on every 16-bit pattern against a reference
 *    computed here from the formats' definitions (ldexp in double).
 * 3. Failure injection: with dmt_st_fault_after(n) the loader's (n+1)th allocation
 *    fails, and jansson's allocations are routed through the same countdown. For
 *    n = 0, 1, ... until a load succeeds, the load must fail cleanly (NULL and a
 *    message); under `make asan` LeakSanitizer checks nothing leaks on any path.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    if (dmt_st_fault_hit()) { json_alloc_failed = 1; return NULL; }
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
        dmt_st_fault_after(n);
        json_alloc_failed = 0;
        err[0] = 0;
        dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = ids_only}, err, sizeof err);
        dmt_st_fault_after(-1);
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

int main(void) {
    malformed_cases();
    widening();
    inject("malformed/valid", 1);
    inject("malformed/valid-mixed-dtypes", 1);
    inject("malformed/valid-unaligned-f32", 1);
    inject("malformed/valid-pre-learned-untied", 1);
    return check_done();
}
