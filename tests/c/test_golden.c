/* test_golden.c — the C forward pass against the PyTorch reference.
 *
 * Every folder under tests/fixtures/golden/ is a model directory plus golden.json
 * (tools/make_golden.py): token ids and the reference's encoder states, teacher-forced
 * log-probs and step-by-step log-probs. The C engine decodes step by step with its
 * KV cache, so matching the teacher-forced pass also shows the cache is right.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward.h"
#include "model/model.h"
#include "tests/c/check.h"
#include "tests/c/fixtures.h"

/* max |a - b| between a flat float array and a nested JSON array (walked in order). */
static void walk(json_t *j, const float *x, size_t *i, size_t n, double *maxerr, int *bad) {
    if (json_is_array(j)) {
        for (size_t k = 0; k < json_array_size(j); k++) walk(json_array_get(j, k), x, i, n, maxerr, bad);
        return;
    }
    if (!json_is_number(j) || *i >= n) { *bad = 1; return; }
    double e = fabs(json_number_value(j) - x[(*i)++]);
    if (!(e <= *maxerr)) *maxerr = e; /* also catches NaN */
}

static double compare(json_t *expected, const float *got, size_t n, int *bad) {
    size_t i = 0;
    double maxerr = 0;
    walk(expected, got, &i, n, &maxerr, bad);
    if (i != n) *bad = 1;
    return maxerr;
}

/* max |a - b| over the real (unpadded) rows of [B][S][d] encoder states against the
 * reference's nested [B][S][d] array; a shape other than that sets *bad. Padding rows
 * are no output: nothing reads them, and the engine does not compute their attention
 * (a sentence's states must not depend on how long its batch mates are). */
static double compare_real_rows(json_t *expected, const float *got, int B, int S, int d, const int *len, int *bad) {
    double maxerr = 0;
    if (!json_is_array(expected) || (int)json_array_size(expected) != B) { *bad = 1; return maxerr; }
    for (int b = 0; b < B; b++) {
        json_t *sent = json_array_get(expected, (size_t)b);
        if (!json_is_array(sent) || (int)json_array_size(sent) != S) { *bad = 1; return maxerr; }
        for (int t = 0; t < len[b]; t++) {
            json_t *row = json_array_get(sent, (size_t)t);
            if ((int)json_array_size(row) != d) { *bad = 1; return maxerr; }
            size_t i = 0;
            walk(row, got + ((size_t)b * S + t) * d, &i, (size_t)d, &maxerr, bad);
        }
    }
    return maxerr;
}

static void run_case(const char *dir, const char *name) {
    char path[1200], err[512], what[256];
    snprintf(path, sizeof path, "%s/golden.json", dir);
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    snprintf(what, sizeof what, "%s: golden.json readable", name);
    if (!CHECK(g, what, "%s", je.text)) return;
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    snprintf(what, sizeof what, "%s: model loads", name);
    if (!CHECK(m, what, "%s", err)) { json_decref(g); return; }
    const dmt_config *c = &m->cfg;
    double tol = json_number_value(json_object_get(g, "tolerance"));
    json_t *src = json_object_get(g, "src"), *prev = json_object_get(g, "prev");
    int B = (int)json_array_size(src), S = (int)json_array_size(json_array_get(src, 0));
    int T = (int)json_array_size(json_array_get(prev, 0)), V = c->vocab_size, d = c->d_model;
    int32_t *ids = calloc((size_t)B * S, sizeof *ids), *tok = calloc((size_t)B, sizeof *tok);
    int *len = calloc((size_t)B, sizeof *len), *hyp_src = calloc((size_t)B, sizeof *hyp_src);
    const int32_t **rows = calloc((size_t)B, sizeof *rows);
    for (int b = 0; b < B; b++) {
        len[b] = S;
        for (int t = 0; t < S; t++) {
            ids[b * S + t] = (int32_t)json_integer_value(json_array_get(json_array_get(src, b), t));
            if (ids[b * S + t] == c->pad_id && len[b] == S) len[b] = t;
        }
        rows[b] = ids + b * S;
        hyp_src[b] = b;
    }
    dmt_state *s = dmt_state_new(m);
    int ok = dmt_encode(s, B, rows, len, err, sizeof err) == 0;
    snprintf(what, sizeof what, "%s: encode", name);
    CHECK(ok, what, "%s", err);
    if (ok) {
        /* encoder states of the real tokens (padding rows are no output) */
        float *enc = calloc((size_t)B * S * d, sizeof *enc);
        for (int b = 0; b < B; b++)
            memcpy(enc + (size_t)b * S * d, dmt_encoder_out(s, b), (size_t)len[b] * d * sizeof *enc);
        int bad = 0;
        double e = compare_real_rows(json_object_get(g, "encoder_out"), enc, B, S, d, len, &bad);
        snprintf(what, sizeof what, "%s: encoder states of the real tokens within %g (max abs error %.2e)", name, tol, e);
        CHECK(!bad && e <= tol, what, "max abs error %.3e, shape mismatch %d", e, bad);
        free(enc);

        float *lp = calloc((size_t)B * V, sizeof *lp), *all = calloc((size_t)B * T * V, sizeof *all);
        ok = dmt_decode_begin(s, B, hyp_src, B, T, err, sizeof err) == 0;
        for (int t = 0; ok && t < T; t++) {
            for (int b = 0; b < B; b++) tok[b] = (int32_t)json_integer_value(json_array_get(json_array_get(prev, b), t));
            ok = dmt_decode_step(s, tok, lp) == 0;
            for (int b = 0; b < B; b++) memcpy(all + ((size_t)b * T + t) * V, lp + (size_t)b * V, V * sizeof *lp);
        }
        snprintf(what, sizeof what, "%s: %d decoder steps", name, T);
        CHECK(ok, what, "%s", err);
        bad = 0;
        e = compare(json_object_get(g, "log_probs"), all, (size_t)B * T * V, &bad);
        snprintf(what, sizeof what, "%s: step-by-step log-probs = reference teacher-forced pass (max abs error %.2e)", name, e);
        CHECK(!bad && e <= tol, what, "max abs error %.3e", e);
        bad = 0;
        e = compare(json_object_get(g, "log_probs_incremental"), all, (size_t)B * T * V, &bad);
        snprintf(what, sizeof what, "%s: step-by-step log-probs = reference incremental pass (max abs error %.2e)", name, e);
        CHECK(!bad && e <= tol, what, "max abs error %.3e", e);
        /* one more step than begin() allowed must be refused, not overrun the cache */
        CHECK(dmt_decode_step(s, tok, lp) == -1, "step past max_steps is refused");
        free(lp);
        free(all);
    }
    dmt_state_free(s);
    dmt_model_free(m);
    free(ids); free(tok); free(len); free(hyp_src); free(rows);
    json_decref(g);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    char root[512];
    fixture_path(root, sizeof root, "golden");
    DIR *dir = opendir(root);
    if (!CHECK(dir, "golden fixtures present", "cannot open %s (run from the repo root)", root)) return check_done();
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < 64)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= 6, "at least six golden configurations");
    for (int i = 0; i < n; i++) {
        char d[1024];
        snprintf(d, sizeof d, "%s/%s", root, names[i]);
        run_case(d, names[i]);
        free(names[i]);
    }
    return check_done();
}
