/* cmd_forward.c — `deepmt forward MODEL_DIR [FILE]`: the network on token ids.
 *
 * Input JSON {"src": [[id, ...], ...], "prev": [[id, ...], ...]}: source rows
 * right-padded with pad_id (a row's length ends at its first pad), decoder-input
 * rows of equal length. Output JSON {"encoder_out": [B][S][d], "log_probs":
 * [B][T][vocab]}, the decoder run step by step with its KV cache. The encoder states
 * of padding positions are written as 0: the engine does not compute them (nothing
 * reads them, and a sentence's states must not depend on its batch mates' lengths). For checking a
 * converted checkpoint against its original framework, and for id-level scoring
 * of models that come without a tokenizer.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/options.h"
#include "cli/commands.h"
#include "model/forward.h"
#include "model/model.h"

/* rows of ints -> flat [n][width] (padded with pad) + per-row lengths. -1 on bad shape. */
static int read_rows(json_t *a, int pad, int32_t **flat, int *n, int *width, int **lens) {
    if (!json_is_array(a) || json_array_size(a) == 0) return -1;
    *n = (int)json_array_size(a);
    *width = 0;
    for (int i = 0; i < *n; i++) {
        json_t *r = json_array_get(a, (size_t)i);
        if (!json_is_array(r)) return -1;
        if ((int)json_array_size(r) > *width) *width = (int)json_array_size(r);
    }
    *flat = calloc((size_t)*n * *width + 1, sizeof **flat);
    *lens = calloc((size_t)*n, sizeof **lens);
    if (!*flat || !*lens) return -1;
    for (int i = 0; i < *n; i++) {
        json_t *r = json_array_get(a, (size_t)i);
        (*lens)[i] = -1;
        for (int t = 0; t < *width; t++) {
            json_t *v = json_array_get(r, (size_t)t);
            if (v && !json_is_integer(v)) return -1;
            int id = v ? (int)json_integer_value(v) : pad;
            (*flat)[(size_t)i * *width + t] = id;
            if (id == pad && (*lens)[i] < 0) (*lens)[i] = t;
        }
        if ((*lens)[i] < 0) (*lens)[i] = *width;
    }
    return 0;
}

/* rows x cols of x, rows from `live` on written as zeros (padding) */
static void print_matrix(const float *x, int rows, int live, int cols) {
    putchar('[');
    for (int r = 0; r < rows; r++) {
        printf("%s[", r ? "," : "");
        for (int c = 0; c < cols; c++) printf("%s%.9g", c ? "," : "", r < live ? x[(size_t)r * cols + c] : 0.0f);
        putchar(']');
    }
    putchar(']');
}

typedef struct {
    char model[4096];
} forward_args;

static const dmt_option forward_options[] = {
    DMT_OPTION_MODEL(offsetof(forward_args, model), sizeof ((forward_args *)0)->model),
};

int cmd_forward(int argc, char **argv) {
    forward_args a = {""};
    const char *pos[2];
    int n_pos = 0;
    char err[512];
    int prc = dmt_options_parse("forward", forward_options, 1, &a, argc, argv, NULL, pos, 2, &n_pos, err, sizeof err);
    struct stat st;
    /* MODEL_DIR [INPUT]: the arguments win over -m and DEEPMT_MODEL */
    if (prc == 0 && (n_pos == 2 || (n_pos == 1 && stat(pos[0], &st) == 0 && S_ISDIR(st.st_mode)))) a.model[0] = 0;
    if (prc == 0 && !a.model[0] && n_pos == 0) {
        prc = -1;
        snprintf(err, sizeof err, "a model directory is needed");
    }
    if (prc) {
        FILE *f = prc > 0 ? stdout : stderr;
        if (prc < 0) fprintf(f, "deepmt forward: %s\n", err);
        fprintf(f, "usage: deepmt forward [-m] MODEL_DIR [INPUT.json]   (stdin when no file)\n");
        return prc > 0 ? 0 : 2;
    }
    const char *dir = a.model[0] ? a.model : pos[0], *input = n_pos > (a.model[0] ? 0 : 1) ? pos[n_pos - 1] : NULL;
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (!m) { fprintf(stderr, "deepmt forward: %s\n", err); return 1; }
    json_error_t je;
    json_t *in = input ? json_load_file(input, 0, &je) : json_loadf(stdin, 0, &je);
    int rc = 1, B = 0, S = 0, Bp = 0, T = 0, *src_len = NULL, *prev_len = NULL;
    int32_t *src = NULL, *prev = NULL;
    float *lp = NULL, *all = NULL;
    dmt_state *s = NULL;
    if (!in) { fprintf(stderr, "deepmt forward: input is not JSON: %s\n", je.text); goto done; }
    if (read_rows(json_object_get(in, "src"), m->cfg.pad_id, &src, &B, &S, &src_len)) {
        fprintf(stderr, "deepmt forward: \"src\" must be a non-empty array of arrays of ids\n");
        goto done;
    }
    const int32_t **rows = calloc((size_t)B, sizeof *rows);
    int *hyp_src = calloc((size_t)B, sizeof *hyp_src);
    for (int i = 0; i < B; i++) rows[i] = src + (size_t)i * S, hyp_src[i] = i;
    s = dmt_state_new(m);
    int ok = s && dmt_encode(s, B, rows, src_len, err, sizeof err) == 0;
    free(rows);
    if (!ok) { free(hyp_src); fprintf(stderr, "deepmt forward: %s\n", err); goto done; }
    printf("{\"encoder_out\":[");
    for (int i = 0; i < B; i++) {
        if (i) putchar(',');
        print_matrix(dmt_encoder_out(s, i), S, src_len[i], m->cfg.d_model);
    }
    printf("]");
    json_t *pj = json_object_get(in, "prev");
    if (pj) {
        if (read_rows(pj, -1, &prev, &Bp, &T, &prev_len) || Bp != B) {
            free(hyp_src);
            fprintf(stderr, "deepmt forward: \"prev\" must have one row per source row\n");
            goto done;
        }
        int V = m->cfg.vocab_size;
        lp = malloc((size_t)B * V * sizeof *lp);
        all = malloc((size_t)B * T * V * sizeof *all);
        int32_t *tok = malloc((size_t)B * sizeof *tok);
        ok = lp && all && tok && dmt_decode_begin(s, B, hyp_src, B, T, err, sizeof err) == 0;
        for (int t = 0; ok && t < T; t++) {
            for (int b = 0; b < B; b++) tok[b] = prev[(size_t)b * T + t];
            ok = dmt_decode_step(s, tok, lp) == 0;
            for (int b = 0; ok && b < B; b++) memcpy(all + ((size_t)b * T + t) * V, lp + (size_t)b * V, V * sizeof *lp);
        }
        free(tok);
        if (!ok) { free(hyp_src); fprintf(stderr, "deepmt forward: decoding failed (%s)\n", err); goto done; }
        printf(",\"log_probs\":[");
        for (int b = 0; b < B; b++) {
            if (b) putchar(',');
            print_matrix(all + (size_t)b * T * V, T, T, V);
        }
        printf("]");
    }
    free(hyp_src);
    printf("}\n");
    rc = 0;
done:
    json_decref(in);
    free(src); free(src_len); free(prev); free(prev_len); free(lp); free(all);
    dmt_state_free(s);
    dmt_model_free(m);
    return rc;
}
