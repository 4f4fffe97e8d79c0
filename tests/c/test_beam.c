/* test_beam.c — beam search (model/beam.c) and text translation (model/translate.c).
 *
 * Golden: every folder under tests/fixtures/beam/ is a model plus beam.json
 * (tools/make_beam_golden.py): one batch of sources of very different lengths with
 * mixed forced languages, and the PyTorch reference's n-best lists for beam 1, 4, 8,
 * length penalties, min/max length and no-repeat-ngram. Tokens must match exactly,
 * scores within the file's tolerance.
 *
 * Properties: greedy = argmax decoding by hand; a sentence alone = the same sentence
 * in a batch of 32 (agreement rate printed; a difference must be a near-tie);
 * n-best sorted and distinct; min_len, max_len, no-repeat-ngram respected; bad
 * options refused. Translate: text in, text out on tests/fixtures/tiny-model.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "model/beam.h"
#include "model/forward.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"
#include "model/model.h"
#include "model/translate.h"
#include "tests/c/check.h"
#include "tests/c/fixtures.h"

typedef struct {
    int n;
    int32_t **src;
    int *len, *forced;
} batch;

static void batch_free(batch *b) {
    for (int i = 0; i < b->n; i++) free(b->src[i]);
    free(b->src); free(b->len); free(b->forced);
    *b = (batch){0};
}

static void batch_alloc(batch *b, int n) {
    b->n = n;
    b->src = calloc((size_t)n, sizeof *b->src);
    b->len = calloc((size_t)n, sizeof *b->len);
    b->forced = calloc((size_t)n, sizeof *b->forced);
}

static int run(dmt_state *s, const batch *b, const dmt_beam_options *o, dmt_nbest *out, char *err, size_t errlen) {
    return dmt_beam_search(s, b->n, (const int32_t *const *)b->src, b->len, b->forced, o, out, err, errlen);
}

static void clear_all(dmt_nbest *out, int n) {
    for (int i = 0; i < n; i++) dmt_nbest_clear(&out[i]);
}

/* The same tokens, aligned to the same source positions. */
static int same_hyp(const dmt_hypothesis *a, const dmt_hypothesis *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens) &&
           !memcmp(a->align, b->align, (size_t)a->n_tokens * sizeof *a->align);
}

static int same_nbest(const dmt_nbest *a, const dmt_nbest *b) {
    if (a->n != b->n) return 0;
    for (int r = 0; r < a->n; r++)
        if (!same_hyp(&a->hyps[r], &b->hyps[r])) return 0;
    return 1;
}

/* -------------------------------------------------------------- golden -- */

static int json_int(json_t *o, const char *key) { return (int)json_integer_value(json_object_get(o, key)); }

static dmt_beam_options options_from_json(json_t *o) {
    return (dmt_beam_options){.beam_size = json_int(o, "beam_size"),
                              .length_penalty = (float)json_number_value(json_object_get(o, "length_penalty")),
                              .max_len_a = (float)json_number_value(json_object_get(o, "max_len_a")),
                              .max_len_b = json_int(o, "max_len_b"),
                              .min_len = json_int(o, "min_len"),
                              .nbest = json_int(o, "nbest"),
                              .no_repeat_ngram_size = json_int(o, "no_repeat_ngram_size")};
}

/* 1 when got equals the reference's list; describes the first difference in why. */
/* Alignments (forward.h dmt_decode_alignment) are compared where the reference's
 * winning source position leads the next by more than this (averaged attention):
 * closer than that, float rounding may pick either. */
#define ALIGN_MARGIN 1e-5

static int match_reference(const dmt_nbest *got, json_t *want, double tol, double *max_err, int *aligned, char *why,
                           size_t cap) {
    json_t *list = json_object_get(want, "nbest");
    if ((size_t)got->n != json_array_size(list)) {
        snprintf(why, cap, "%d hypotheses, reference %zu", got->n, json_array_size(list));
        return 0;
    }
    for (int r = 0; r < got->n; r++) {
        json_t *h = json_array_get(list, (size_t)r), *toks = json_object_get(h, "tokens");
        const dmt_hypothesis *g = &got->hyps[r];
        int same = (size_t)g->n_tokens == json_array_size(toks);
        for (int t = 0; same && t < g->n_tokens; t++) same = g->tokens[t] == json_integer_value(json_array_get(toks, (size_t)t));
        double e = fabs(g->score - json_number_value(json_object_get(h, "score")));
        if (e > *max_err) *max_err = e;
        if (!same) { snprintf(why, cap, "rank %d: tokens differ (%d vs %zu tokens)", r, g->n_tokens, json_array_size(toks)); return 0; }
        if (!(e <= tol)) { snprintf(why, cap, "rank %d: score %.6f vs %.6f", r, g->score, json_number_value(json_object_get(h, "score"))); return 0; }
        json_t *al = json_object_get(h, "align"), *mg = json_object_get(h, "align_margin");
        if (json_array_size(al) != (size_t)g->n_tokens || json_array_size(mg) != (size_t)g->n_tokens) {
            snprintf(why, cap, "rank %d: the reference has %zu alignments for %d tokens", r, json_array_size(al), g->n_tokens);
            return 0;
        }
        for (int t = 0; t < g->n_tokens; t++) {
            if (json_number_value(json_array_get(mg, (size_t)t)) <= ALIGN_MARGIN) continue;
            int want_at = (int)json_integer_value(json_array_get(al, (size_t)t));
            if (g->align[t] != want_at) {
                snprintf(why, cap, "rank %d, token %d: aligned to source position %d, reference %d", r, t, g->align[t], want_at);
                return 0;
            }
            (*aligned)++;
        }
    }
    return 1;
}

static void golden_case(const char *dir, const char *name) {
    char path[1200], err[512], what[300], why[200];
    snprintf(path, sizeof path, "%s/beam.json", dir);
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    snprintf(what, sizeof what, "%s: beam.json readable", name);
    if (!CHECK(g, what, "%s", je.text)) return;
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    snprintf(what, sizeof what, "%s: model loads", name);
    if (!CHECK(m, what, "%s", err)) { json_decref(g); return; }
    json_t *sources = json_object_get(g, "sources"), *forced = json_object_get(g, "forced");
    double tol = json_number_value(json_object_get(g, "score_tolerance"));
    batch b;
    batch_alloc(&b, (int)json_array_size(sources));
    for (int i = 0; i < b.n; i++) {
        json_t *row = json_array_get(sources, (size_t)i);
        b.len[i] = (int)json_array_size(row);
        b.src[i] = malloc((size_t)b.len[i] * sizeof **b.src);
        for (int t = 0; t < b.len[i]; t++) b.src[i][t] = (int32_t)json_integer_value(json_array_get(row, (size_t)t));
        b.forced[i] = (int)json_integer_value(json_array_get(forced, (size_t)i));
    }
    dmt_state *s = dmt_state_new(m);
    dmt_nbest *out = calloc((size_t)b.n, sizeof *out);
    size_t ri;
    json_t *r;
    json_array_foreach(json_object_get(g, "runs"), ri, r) {
        const char *run_name = json_string_value(json_object_get(r, "name"));
        dmt_beam_options o = options_from_json(json_object_get(r, "options"));
        int ok = run(s, &b, &o, out, err, sizeof err) == 0;
        double max_err = 0;
        int bad = -1, aligned = 0;
        why[0] = '\0';
        for (int i = 0; ok && i < b.n && bad < 0; i++)
            if (!match_reference(&out[i], json_array_get(json_object_get(r, "results"), (size_t)i), tol, &max_err,
                                 &aligned, why, sizeof why))
                bad = i;
        snprintf(what, sizeof what, "%s/%s: %d sentences (lengths %d..%d, mixed targets) = reference n-best (score error "
                 "%.1e) and alignments (%d tokens)", name, run_name, b.n, b.len[0], b.len[2], max_err, aligned);
        CHECK(ok && bad < 0, what, "%s", ok ? why : err);
        if (bad >= 0) printf("#   sentence %d: %s\n", bad, why);
        clear_all(out, b.n);
    }
    free(out);
    dmt_state_free(s);
    batch_free(&b);
    dmt_model_free(m);
    json_decref(g);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void golden_tests(void) {
    char root[512];
    fixture_path(root, sizeof root, "beam");
    DIR *dir = opendir(root);
    if (!CHECK(dir, "beam fixtures present", "cannot open %s (run from the repo root)", root)) return;
    char *names[32];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < 32)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= 2, "at least two beam fixture models");
    for (int i = 0; i < n; i++) {
        char d[1024];
        snprintf(d, sizeof d, "%s/%s", root, names[i]);
        golden_case(d, names[i]);
        free(names[i]);
    }
}

/* ---------------------------------------------------------- properties -- */

static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* n random sentences of 1..max_body tokens + </s>, random target languages (or none). */
static void random_batch(batch *b, int n, const dmt_config *c, int max_body) {
    batch_alloc(b, n);
    int lo = 4 + c->n_languages;
    for (int i = 0; i < n; i++) {
        int body = 1 + (int)rnd((unsigned)max_body);
        b->len[i] = body + 1;
        b->src[i] = malloc((size_t)b->len[i] * sizeof **b->src);
        for (int t = 0; t < body; t++) b->src[i][t] = lo + (int)rnd((unsigned)(c->vocab_size - lo));
        b->src[i][body] = c->eos_id;
        int l = (int)rnd((unsigned)c->n_languages + 1);
        b->forced[i] = l < c->n_languages ? c->languages[l].id : -1;
    }
}

/* Greedy decoding by hand, one sentence at a time: argmax (lowest id on ties) with
 * <pad>/<s> never and </s> not before min_len, until </s> or max_len. */
static int greedy_by_hand(dmt_state *s, const dmt_model *m, const int32_t *src, int len, int forced,
                          const dmt_beam_options *o, int32_t *out, int cap) {
    const dmt_config *c = &m->cfg;
    char err[256];
    int hyp = 0, V = c->vocab_size, plen = forced >= 0 ? 2 : 1;
    int max_len = (int)floor((double)o->max_len_a * len + o->max_len_b);
    if (max_len > c->max_positions - plen + 1) max_len = c->max_positions - plen + 1;
    if (max_len < 1) max_len = 1;
    float *lp = malloc((size_t)V * sizeof *lp);
    int n = -1;
    if (dmt_encode(s, 1, &src, &len, err, sizeof err) || dmt_decode_begin(s, 1, &hyp, 1, plen + max_len, err, sizeof err))
        goto done;
    int32_t tok = c->decoder_start_id;
    dmt_decode_step(s, &tok, lp);
    if (forced >= 0) { tok = forced; dmt_decode_step(s, &tok, lp); }
    for (n = 0; n < max_len && n < cap;) {
        int best = -1;
        for (int v = 0; v < V; v++) {
            if (v == c->pad_id || v == c->bos_id || (v == c->eos_id && n + 1 <= o->min_len)) continue;
            if (best < 0 || lp[v] > lp[best]) best = v;
        }
        if (best == c->eos_id) break;
        out[n++] = best;
        if (n < max_len) { tok = best; dmt_decode_step(s, &tok, lp); }
    }
done:
    free(lp);
    return n;
}

static void greedy_test(const dmt_model *m, dmt_state *s) {
    batch b;
    random_batch(&b, 24, &m->cfg, 25);
    dmt_beam_options o = dmt_beam_options_default(&m->cfg);
    o.beam_size = 1;
    dmt_nbest *out = calloc((size_t)b.n, sizeof *out);
    char err[256];
    int ok = run(s, &b, &o, out, err, sizeof err) == 0, same = 0;
    int32_t hand[128];
    for (int i = 0; ok && i < b.n; i++) {
        int n = greedy_by_hand(s, m, b.src[i], b.len[i], b.forced[i], &o, hand, 128);
        same += out[i].n == 1 && n == out[i].hyps[0].n_tokens && !memcmp(hand, out[i].hyps[0].tokens, (size_t)n * 4);
    }
    CHECK(ok && same == b.n, "greedy (beam 1) over a batch of 24 = argmax decoding by hand with dmt_decode_step",
          "%d of %d agree (%s)", same, b.n, ok ? "" : err);
    clear_all(out, b.n);
    free(out);
    batch_free(&b);
}

/* The decoder fan-out beam search relies on: one row per source for the prefix steps,
 * then dmt_decode_reorder growing to 3 rows each (parents repeated), must give the
 * log-probs of running 3 identical rows per source from the start. */
static void fan_out_test(const dmt_model *m, dmt_state *s) {
    enum { N = 2, K = 3, STEPS = 4 };
    const dmt_config *c = &m->cfg;
    int V = c->vocab_size, lo = 4 + c->n_languages;
    int32_t src0[] = {lo, lo + 5, lo + 9, c->eos_id}, src1[] = {lo + 2, lo + 7, c->eos_id};
    const int32_t *srcs[N] = {src0, src1};
    int lens[N] = {4, 3}, narrow_src[N] = {0, 1}, wide_src[N * K] = {0, 0, 0, 1, 1, 1};
    int parent[N * K] = {0, 0, 0, 1, 1, 1};
    float *lp_narrow = malloc((size_t)N * K * V * sizeof(float)), *lp_wide = malloc((size_t)N * K * V * sizeof(float));
    int32_t tok[STEPS][N * K];
    for (int t = 0; t < STEPS; t++)
        for (int r = 0; r < N * K; r++) tok[t][r] = t == 0 ? c->decoder_start_id : t == 1 ? lo + r / K : lo + 11 * t + r;
    char err[256];
    int ok = lp_narrow && lp_wide && dmt_encode(s, N, srcs, lens, err, sizeof err) == 0 &&
             dmt_decode_begin(s, N, narrow_src, N * K, STEPS, err, sizeof err) == 0;
    int32_t first[N];
    for (int t = 0; ok && t < 2; t++) { /* the prefix, one row per source */
        for (int i = 0; i < N; i++) first[i] = tok[t][i * K];
        ok = dmt_decode_step(s, first, lp_narrow) == 0;
    }
    if (ok) dmt_decode_reorder(s, N * K, parent);
    for (int t = 2; ok && t < STEPS; t++) ok = dmt_decode_step(s, tok[t], lp_narrow) == 0;
    ok = ok && dmt_decode_hyps(s) == N * K && dmt_encode(s, N, srcs, lens, err, sizeof err) == 0 &&
         dmt_decode_begin(s, N * K, wide_src, N * K, STEPS, err, sizeof err) == 0;
    for (int t = 0; ok && t < STEPS; t++) ok = dmt_decode_step(s, tok[t], lp_wide) == 0;
    double worst = 0;
    for (size_t i = 0; ok && i < (size_t)N * K * V; i++) {
        double e = fabs((double)lp_narrow[i] - lp_wide[i]);
        if (!(e <= worst)) worst = e; /* NaN shows up as a failure too */
    }
    CHECK(ok && worst <= 1e-5, "decoder fan-out: 1 row per source, reorder to 3 = 3 rows from the start",
          "%s; largest log-prob difference %.3g", ok ? "ran" : err, worst);
    free(lp_narrow);
    free(lp_wide);
}

/* A sentence alone vs inside a batch of 32 longer and shorter mates: the same n-best,
 * scores bit for bit. deepmt's own products work row by row and the encoder attends
 * over a sentence's own tokens only, so nothing of the mates (their number, their
 * padding) can reach a sentence; int8 would turn a last-bit difference into another
 * quantised byte, and with it another word now and then. The generic level's F32
 * products are OpenBLAS's sgemm, whose rounding changes with the number of rows: there
 * a difference must come with a near-tie (< 1e-4) in the search. */
static void single_vs_batch_test(const dmt_model *m, dmt_state *s) {
    enum { BATCHES = 8, B = 32 };
    const char *prec = dmt_precision_name(m->precision);
    int exact = dmt_gemm_layout(dmt_kernels_active(), m->precision) != DMT_LAYOUT_ROWS; /* not OpenBLAS's */
    dmt_beam_options o = dmt_beam_options_default(&m->cfg);
    o.beam_size = 4;
    o.nbest = 2;
    char err[256] = "", what[192];
    int total = 0, agree = 0, explained = 0, failed = 0;
    double worst_gap = 0;
    dmt_nbest *out = calloc(B, sizeof *out), one;
    for (int bi = 0; bi < BATCHES && !failed; bi++) {
        batch b;
        random_batch(&b, B, &m->cfg, 40);
        failed = run(s, &b, &o, out, err, sizeof err) != 0;
        for (int i = 0; !failed && i < B; i++) {
            batch single = {1, &b.src[i], &b.len[i], &b.forced[i]};
            if (run(s, &single, &o, &one, err, sizeof err)) { failed = 1; break; }
            total++;
            int same = same_nbest(&one, &out[i]);
            for (int r = 0; same && r < one.n; r++)
                same = exact ? one.hyps[r].score == out[i].hyps[r].score
                             : fabsf(one.hyps[r].score - out[i].hyps[r].score) <= 1e-4f;
            if (same) agree++;
            else {
                double gap = fminf(one.min_gap, out[i].min_gap);
                printf("# %s: sentence %d of batch %d differs alone vs batched; smallest decision gap %.2e\n", prec, i,
                       bi, gap);
                if (!exact && gap < 1e-4) explained++;
                if (gap > worst_gap) worst_gap = gap;
            }
            dmt_nbest_clear(&one);
        }
        clear_all(out, B);
        batch_free(&b);
    }
    free(out);
    printf("# %s single vs batch of %d: %d of %d sentences agree, beam 4, n-best 2\n", prec, B, agree, total);
    snprintf(what, sizeof what, "%s single-vs-batch searches ran", prec);
    CHECK(!failed && total == BATCHES * B, what, "%s", err);
    if (exact)
        snprintf(what, sizeof what, "%s: a sentence alone = the same sentence in a batch of %d (n-best and scores bit "
                 "for bit)", prec, B);
    else
        snprintf(what, sizeof what, "%s (OpenBLAS products): a sentence alone = the same sentence in a batch of %d "
                 "(scores within 1e-4; other words only at near-ties < 1e-4)", prec, B);
    CHECK(agree + explained == total, what, "%d of %d differ (largest decision gap %.2e)", total - agree - explained,
          total, worst_gap);
}

/* The control hooks: sentences cancelled between steps leave the batch (empty
 * output, no finished call); the others give what they give without the hooks,
 * each announced exactly once. */
typedef struct {
    int polls[32], cancel_at[32], was_cancelled[32], finished[32];
} control_log;

static int log_cancelled(void *arg, int i) {
    control_log *l = arg;
    if (++l->polls[i] < l->cancel_at[i] || l->cancel_at[i] == 0) return 0;
    l->was_cancelled[i] = 1;
    return 1;
}

static void log_finished(void *arg, int i) { ((control_log *)arg)->finished[i]++; }

static void control_test(const dmt_model *m, dmt_state *s) {
    enum { B = 24 };
    dmt_beam_options o = dmt_beam_options_default(&m->cfg);
    o.beam_size = 4;
    o.nbest = 2;
    char err[256];
    dmt_nbest plain[B], ctl[B];
    batch b;
    random_batch(&b, B, &m->cfg, 40);
    int ok = run(s, &b, &o, plain, err, sizeof err) == 0;
    control_log log = {0};
    for (int i = 0; i < B; i++) log.cancel_at[i] = i % 3 == 1 ? 1 + i / 3 : i == 0 ? 1 : 0; /* 0: never */
    dmt_beam_control c = {log_cancelled, log_finished, &log};
    dmt_beam_options oc = o;
    oc.control = &c;
    ok = ok && run(s, &b, &oc, ctl, err, sizeof err) == 0;
    int cancelled = 0, bad = 0, explained = 0;
    for (int i = 0; ok && i < B; i++) {
        if (log.was_cancelled[i]) {
            cancelled++;
            bad += ctl[i].n != 0 || log.finished[i] != 0;
        } else if (log.finished[i] != 1) {
            bad++;
        } else if (!same_nbest(&plain[i], &ctl[i])) {
            if (fminf(plain[i].min_gap, ctl[i].min_gap) < 1e-4) explained++;
            else bad++;
        }
    }
    CHECK(ok && cancelled >= 2 && bad == 0,
          "control: cancelled sentences leave the batch (empty), the rest are unchanged and announced once",
          "%s; %d cancelled, %d wrong, %d near-tie differences", err, cancelled, bad, explained);
    if (ok) {
        clear_all(plain, B);
        clear_all(ctl, B);
    }
    batch_free(&b);
}

/* A beam session: sentences joining at different steps (and one cancelled) give
 * what each gives alone with dmt_beam_search; the cache is empty afterwards. */
static void session_test(const dmt_model *m, dmt_state *s, int max_repeats) {
    enum { B = 20 };
    dmt_beam_options o = dmt_beam_options_default(&m->cfg);
    o.beam_size = 4;
    o.nbest = 2;
    o.max_repeats = max_repeats; /* the guard reads each sentence's source */
    char err[256] = "";
    batch b;
    random_batch(&b, B, &m->cfg, 40);
    dmt_nbest alone[B], got[B];
    int ok = 1, have[B] = {0};
    for (int i = 0; ok && i < B; i++) {
        batch single = {1, &b.src[i], &b.len[i], &b.forced[i]};
        ok = run(s, &single, &o, &alone[i], err, sizeof err) == 0;
    }
    dmt_state *st = dmt_state_new(m);
    dmt_beam_session *ses = ok ? dmt_beam_session_new(st, &o, 6, err, sizeof err) : NULL;
    int next = 0, steps = 0, cancelled = 7, finished = 0, max_active = 0, asked = 0;
    while (ses && ok && (next < B || dmt_beam_session_active(ses) > 0) && steps < 5000) {
        /* one or two join every third step while there is room */
        int want = steps % 3 == 0 ? 1 + steps % 2 : 0, room = dmt_beam_session_room(ses);
        if (want > room) want = room;
        if (want > B - next) want = B - next;
        if (want > 0) {
            int tags[2] = {next, next + 1};
            ok = dmt_beam_session_admit(ses, want, (const int32_t *const *)&b.src[next], &b.len[next],
                                        &b.forced[next], tags, err, sizeof err) == 0;
            next += want;
        }
        if (next > cancelled && !asked) { /* it has just joined: cancelled before its first step */
            dmt_beam_session_cancel(ses, cancelled);
            asked = 1;
        }
        if (dmt_beam_session_active(ses) > max_active) max_active = dmt_beam_session_active(ses);
        ok = ok && dmt_beam_session_step(ses, err, sizeof err) == 0;
        int tag;
        dmt_nbest nb;
        while (ok && dmt_beam_session_take(ses, &tag, &nb)) {
            got[tag] = nb;
            have[tag] = 1;
            finished++;
        }
        steps++;
    }
    int same = 0, explained = 0, bad = 0;
    for (int i = 0; i < B; i++) {
        if (!have[i]) continue;
        if (same_nbest(&alone[i], &got[i])) same++;
        else if (fminf(alone[i].min_gap, got[i].min_gap) < 1e-4) explained++;
        else bad++;
    }
    CHECK(ses && ok && finished == B - 1 && !have[cancelled] && max_active > 1,
          "beam session: sentences join between steps, finish one by one, a cancelled one leaves",
          "%s; %d finished, max %d active", err, finished, max_active);
    CHECK(ok && bad == 0, "beam session: each sentence = the same sentence alone (dmt_beam_search)",
          "%d differ beyond near-ties (%d same, %d near-tie)", bad, same, explained);
    printf("# beam session (max_repeats %d): %d of %d identical to alone, %d near-tie differences, %d steps\n",
           max_repeats, same, finished, explained, steps);
    CHECK(dmt_cont_slots_used(st) == 0 && dmt_cont_hyps(st) == 0, "beam session: every cache slot is returned",
          "%d slots, %d hypotheses", dmt_cont_slots_used(st), dmt_cont_hyps(st));
    dmt_beam_session_free(ses);
    dmt_state_free(st);
    for (int i = 0; i < B; i++) {
        dmt_nbest_clear(&alone[i]);
        if (have[i]) dmt_nbest_clear(&got[i]);
    }
    batch_free(&b);
}

/* Sources join all or none: an allocation that fails part-way through
 * dmt_cont_add_sources leaves none of that call's sources kept (they would hold
 * their K/V for the state's life, as no caller holds their ids). */
static void add_sources_fault_test(const dmt_model *m) {
    enum { N = 3 };
    batch b;
    random_batch(&b, N, &m->cfg, 30);
    char err[256] = "";
    int ids[N], failures = 0, leaked = 0, added = 0;
    for (long k = 0; k < 64 && !added; k++) {
        dmt_state *st = dmt_state_new(m);
        dmt_fault_after(k);
        int rc = dmt_cont_add_sources(st, N, (const int32_t *const *)b.src, b.len, ids, err, sizeof err);
        dmt_fault_after(-1);
        if (rc) {
            failures++;
            leaked += dmt_cont_sources(st) != 0 || !strstr(err, "out of memory");
        } else {
            added = dmt_cont_sources(st) == N;
            for (int i = 0; i < N; i++) dmt_cont_release_source(st, ids[i]);
            added = added && dmt_cont_sources(st) == 0;
        }
        dmt_state_free(st);
    }
    CHECK(failures >= 2 * N && leaked == 0 && added,
          "continuous sources: a failed allocation at any point keeps none of the call's sources",
          "%d failures, %d left sources or said something else (%s), added %d", failures, leaked, err, added);
    batch_free(&b);
}

static int has_repeated_ngram(const dmt_hypothesis *h, int n) {
    for (int a = 0; a + n <= h->n_tokens; a++)
        for (int b = a + 1; b + n <= h->n_tokens; b++)
            if (!memcmp(h->tokens + a, h->tokens + b, (size_t)n * sizeof *h->tokens)) return 1;
    return 0;
}

/* Longest run of one unit (1..DMT_REPEAT_MAX_UNIT tokens) in tok[0..n): the most
 * copies in a row of any unit, as a count. *unit_len gets the unit's length. */
static int longest_repeat(const int32_t *tok, int n, int *unit_len) {
    int best = n > 0, best_p = 1;
    for (int p = 1; p <= DMT_REPEAT_MAX_UNIT; p++)
        for (int st = 0; st + p <= n; st++) {
            int c = 1;
            while (st + (c + 1) * p <= n && !memcmp(tok + st, tok + st + c * p, (size_t)p * sizeof *tok)) c++;
            if (c > best) { best = c; best_p = p; }
        }
    if (unit_len) *unit_len = best_p;
    return best;
}

/* 1 when greedy output h has R copies of a unit followed by the unit's first token:
 * the only place the repetition guard can act on a greedy search. */
static int guard_would_act(const dmt_hypothesis *h, int R) {
    for (int g = 1; g <= h->n_tokens; g++)         /* g tokens generated, next is tokens[g] or </s> */
        for (int p = 1; p <= DMT_REPEAT_MAX_UNIT && p * R <= g; p++) {
            const int32_t *unit = h->tokens + g - p;
            int c = 1;
            while (c < R && !memcmp(h->tokens + g - (c + 1) * p, unit, (size_t)p * sizeof *unit)) c++;
            if (c == R && g < h->n_tokens && h->tokens[g] == unit[0]) return 1;
        }
    return 0;
}

/* The repetition guard (max_repeats): this random model loops when it may not stop
 * (min_len), so without the guard some outputs hold 3+ copies of a unit in a row;
 * with max_repeats 2 none does (its sources have no such runs), and a greedy output
 * the guard never had to act on is unchanged. */
static void repeat_guard_tests(const dmt_model *m, dmt_state *s) {
    const dmt_config *c = &m->cfg;
    char err[256];
    batch b;
    random_batch(&b, 16, c, 30);
    dmt_nbest off[16], on[16];
    int src_runs = 0;
    for (int i = 0; i < b.n; i++) src_runs += longest_repeat(b.src[i], b.len[i] - 1, NULL) > 2;
    CHECK(src_runs == 0, "repeat guard: the random sources have no unit 3 times in a row", "%d do", src_runs);
    for (int beam = 1; beam <= 4; beam += 3) {
        dmt_beam_options o = dmt_beam_options_default(c);
        o.beam_size = beam; o.nbest = beam; o.max_len_a = 2.0f; o.min_len = 20;
        o.max_repeats = 0;
        int ok = run(s, &b, &o, off, err, sizeof err) == 0;
        o.max_repeats = 2;
        ok = ok && run(s, &b, &o, on, err, sizeof err) == 0;
        int loops_off = 0, loops_on = 0, worst = 0, changed = 0;
        for (int i = 0; ok && i < b.n; i++) {
            for (int r = 0; r < off[i].n; r++) loops_off += longest_repeat(off[i].hyps[r].tokens, off[i].hyps[r].n_tokens, NULL) > 2;
            for (int r = 0; r < on[i].n; r++) {
                int run_len = longest_repeat(on[i].hyps[r].tokens, on[i].hyps[r].n_tokens, NULL);
                loops_on += run_len > 2;
                if (run_len > worst) worst = run_len;
            }
            changed += !same_nbest(&off[i], &on[i]);
        }
        CHECK(ok && loops_off > 0, "repeat guard off: this model loops (a unit 3+ times in a row)", "beam %d: %d hypotheses", beam, loops_off);
        CHECK(ok && loops_on == 0, "repeat guard max_repeats 2: no unit 3 times in a row", "beam %d: %d hypotheses, longest run %d", beam, loops_on, worst);
        CHECK(ok && changed > 0 && changed <= b.n, "repeat guard changes the looping outputs", "beam %d: %d of %d lists changed", beam, changed, b.n);
        clear_all(off, b.n);
        clear_all(on, b.n);
    }
    {   /* default lengths: most greedy outputs never meet the guard and must not change */
        batch g;
        random_batch(&g, 32, c, 30);
        dmt_nbest goff[32], gon[32];
        dmt_beam_options o = dmt_beam_options_default(c);
        o.beam_size = 1; o.max_repeats = 0;
        int ok = run(s, &g, &o, goff, err, sizeof err) == 0;
        o.max_repeats = 2;
        ok = ok && run(s, &g, &o, gon, err, sizeof err) == 0;
        int untouched = 0, same = 0, acted = 0;
        for (int i = 0; ok && i < g.n; i++) {
            if (guard_would_act(&goff[i].hyps[0], 2)) { acted++; continue; }
            untouched++;
            same += same_hyp(&goff[i].hyps[0], &gon[i].hyps[0]);
        }
        CHECK(ok && untouched > 0 && same == untouched, "repeat guard: greedy outputs it never acted on are unchanged",
              "%d of %d identical (%d outputs it acted on)", same, untouched, acted);
        if (ok) { clear_all(goff, g.n); clear_all(gon, g.n); }
        batch_free(&g);
    }
    /* The exception: runs the source holds stay allowed. A source is grown from a
     * looping sentence by appending its own unguarded output (runs included) until the
     * unguarded output's every run of 3 is also in the source; the guarded output must
     * then be the same. */
    dmt_beam_options o = dmt_beam_options_default(c);
    o.beam_size = 1; o.max_len_a = 1.0f; o.max_len_b = 0; o.min_len = 15;
    int tried = 0, checked = 0, same = 0;
    for (int i = 0; i < b.n && checked < 3; i++) {
        int len = b.len[i];
        int32_t src[64];
        memcpy(src, b.src[i], (size_t)len * sizeof *src);
        for (int round = 0; round < 4; round++) {
            const int32_t *srcs[1] = {src};
            dmt_nbest a1, a2;
            o.max_repeats = 0;
            if (dmt_beam_search(s, 1, srcs, &len, &b.forced[i], &o, &a1, err, sizeof err)) break;
            const dmt_hypothesis *x = &a1.hyps[0];
            int loops = longest_repeat(x->tokens, x->n_tokens, NULL) > 2, supported = 1;
            for (int g = 2; g < x->n_tokens && supported; g++) /* every place the guard could act */
                for (int p = 1; p <= DMT_REPEAT_MAX_UNIT && 2 * p <= g; p++) {
                    const int32_t *unit = x->tokens + g - p;
                    if (memcmp(x->tokens + g - 2 * p, unit, (size_t)p * sizeof *unit) || x->tokens[g] != unit[0]) continue;
                    int seen = 0;
                    for (int st = 0; st + 3 * p <= len - 1 && !seen; st++) {
                        int j = 0;
                        while (j < 3 * p && src[st + j] == unit[j % p]) j++;
                        seen = j == 3 * p;
                    }
                    if (!seen) { supported = 0; break; }
                }
            if (round == 0 && !loops) { dmt_nbest_clear(&a1); break; }
            tried += round == 0;
            if (supported && loops) {
                o.max_repeats = 2;
                if (!dmt_beam_search(s, 1, srcs, &len, &b.forced[i], &o, &a2, err, sizeof err)) {
                    checked++;
                    same += same_hyp(&a1.hyps[0], &a2.hyps[0]);
                    dmt_nbest_clear(&a2);
                }
                dmt_nbest_clear(&a1);
                break;
            }
            if (len - 1 + x->n_tokens + 1 > 60) { dmt_nbest_clear(&a1); break; } /* max_positions 64 */
            memcpy(src + len - 1, x->tokens, (size_t)x->n_tokens * sizeof *src);
            len += x->n_tokens;
            src[len - 1] = c->eos_id;
            dmt_nbest_clear(&a1);
        }
    }
    if (checked == 0) SKIP("repeat guard exception: no looping sentence's runs could be copied into its source");
    else CHECK(same == checked, "repeat guard: a run the source holds is allowed (output unchanged)",
               "%d of %d unchanged (%d looping sentences tried)", same, checked, tried);
    batch_free(&b);
}

static void property_tests(const dmt_model *m, dmt_state *s) {
    const dmt_config *c = &m->cfg;
    char err[256];
    batch b;
    random_batch(&b, 16, c, 30);
    dmt_nbest *out = calloc((size_t)b.n, sizeof *out);
    dmt_beam_options o = dmt_beam_options_default(c);

    /* n-best: sorted, distinct, nbest of them */
    o.beam_size = 8; o.nbest = 8; o.length_penalty = 1.0f;
    int ok = run(s, &b, &o, out, err, sizeof err) == 0, sorted = 1, distinct = 1, counted = 1;
    for (int i = 0; ok && i < b.n; i++) {
        counted &= out[i].n == 8;
        for (int r = 0; r + 1 < out[i].n; r++) sorted &= out[i].hyps[r].score >= out[i].hyps[r + 1].score;
        for (int r = 0; r < out[i].n; r++)
            for (int q = r + 1; q < out[i].n; q++) distinct &= !same_hyp(&out[i].hyps[r], &out[i].hyps[q]);
    }
    CHECK(ok && counted, "beam 8, n-best 8: eight hypotheses per sentence", "%s", err);
    CHECK(ok && sorted, "n-best lists are sorted by score");
    CHECK(ok && distinct, "n-best hypotheses are distinct");
    clear_all(out, b.n);

    /* min_len: no hypothesis shorter, unless max_len cut it first */
    o = dmt_beam_options_default(c);
    o.beam_size = 4; o.nbest = 4; o.min_len = 7;
    ok = run(s, &b, &o, out, err, sizeof err) == 0;
    int shortest = 1 << 30;
    for (int i = 0; ok && i < b.n; i++)
        for (int r = 0; r < out[i].n; r++)
            if (out[i].hyps[r].n_tokens < shortest) shortest = out[i].hyps[r].n_tokens;
    CHECK(ok && shortest >= 7, "min_len 7: every hypothesis has at least 7 tokens", "shortest %d", shortest);
    clear_all(out, b.n);

    /* max_len = floor(a * src_len + b), </s> included */
    o = dmt_beam_options_default(c);
    o.beam_size = 4; o.nbest = 4; o.max_len_a = 0.25f; o.max_len_b = 2; o.min_len = 0;
    ok = run(s, &b, &o, out, err, sizeof err) == 0;
    int over = 0, at_limit = 0;
    for (int i = 0; ok && i < b.n; i++) {
        int lim = (int)floor(0.25 * b.len[i] + 2);
        for (int r = 0; r < out[i].n; r++) {
            over += out[i].hyps[r].n_tokens > lim;
            at_limit += out[i].hyps[r].n_tokens == lim;
        }
    }
    CHECK(ok && over == 0, "max_len 0.25*src_len+2: no hypothesis longer", "%d longer", over);
    CHECK(ok && at_limit > 0, "max_len: some hypotheses are cut off exactly at the limit");
    clear_all(out, b.n);

    /* no-repeat-ngram: off, repeats happen on this model; on, none */
    for (int ng = 0; ng <= 3; ng += 3) {
        o = dmt_beam_options_default(c);
        o.beam_size = 4; o.nbest = 4; o.max_len_a = 2.0f; o.no_repeat_ngram_size = ng;
        o.min_len = 20; /* long outputs, so repeats have room */
        ok = run(s, &b, &o, out, err, sizeof err) == 0;
        int rep = 0;
        for (int i = 0; ok && i < b.n; i++)
            for (int r = 0; r < out[i].n; r++) rep += has_repeated_ngram(&out[i].hyps[r], 3);
        if (ng == 0) CHECK(ok && rep > 0, "without no_repeat_ngram_size, 3-grams repeat on this model", "%d", rep);
        else CHECK(ok && rep == 0, "no_repeat_ngram_size 3: no 3-gram appears twice", "%d hypotheses repeat one", rep);
        clear_all(out, b.n);
    }
    o = dmt_beam_options_default(c);
    o.beam_size = 2; o.no_repeat_ngram_size = 1; o.min_len = 10;
    ok = run(s, &b, &o, out, err, sizeof err) == 0;
    int rep = 0;
    for (int i = 0; ok && i < b.n; i++) rep += has_repeated_ngram(&out[i].hyps[0], 1);
    CHECK(ok && rep == 0, "no_repeat_ngram_size 1: no token twice", "%d", rep);
    clear_all(out, b.n);

    /* bad options and inputs: refused with a message naming the problem */
    struct { const char *what, *word; dmt_beam_options o; } bad[] = {
        {"beam_size 0", "beam_size", {.beam_size = 0, .nbest = 1}},
        {"beam_size 1000", "beam_size", {.beam_size = 1000, .nbest = 1}},
        {"nbest > beam_size", "nbest", {.beam_size = 2, .nbest = 3}},
        {"nbest 0", "nbest", {.beam_size = 2, .nbest = 0}},
        {"length_penalty NaN", "length_penalty", {.beam_size = 2, .nbest = 1, .length_penalty = NAN}},
        {"max_len_a < 0", "max_len_a", {.beam_size = 2, .nbest = 1, .max_len_a = -1}},
        {"max_len_b < 0", "max_len_b", {.beam_size = 2, .nbest = 1, .max_len_b = -1}},
        {"min_len < 0", "min_len", {.beam_size = 2, .nbest = 1, .min_len = -1}},
        {"no_repeat_ngram_size < 0", "no_repeat_ngram_size", {.beam_size = 2, .nbest = 1, .no_repeat_ngram_size = -2}},
        {"max_repeats < 0", "max_repeats", {.beam_size = 2, .nbest = 1, .max_repeats = -1}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char what[128];
        err[0] = '\0';
        int rc = run(s, &b, &bad[i].o, out, err, sizeof err);
        snprintf(what, sizeof what, "refused: %s (\"%s\")", bad[i].what, err);
        CHECK(rc == -1 && strstr(err, bad[i].word), what);
    }
    o = dmt_beam_options_default(c);
    int saved = b.forced[3];
    b.forced[3] = c->vocab_size;
    err[0] = '\0';
    CHECK(run(s, &b, &o, out, err, sizeof err) == -1 && strstr(err, "forced"), "refused: forced token out of range", "%s", err);
    b.forced[3] = saved;
    int saved_len = b.len[2];
    b.len[2] = 0;
    err[0] = '\0';
    CHECK(run(s, &b, &o, out, err, sizeof err) == -1 && err[0], "refused: empty source", "%s", err);
    CHECK(run(s, &b, &o, out, err, 0) == -1, "refused with errlen 0 (no message written)");
    b.len[2] = saved_len;
    /* forced NULL = no forced token for any sentence */
    {
        o = dmt_beam_options_default(c);
        int *none_forced = malloc((size_t)b.n * sizeof *none_forced), *saved_forced = b.forced;
        for (int i = 0; i < b.n; i++) none_forced[i] = -1;
        dmt_nbest *out2 = calloc((size_t)b.n, sizeof *out2);
        b.forced = none_forced;
        ok = run(s, &b, &o, out, err, sizeof err) == 0;
        b.forced = NULL;
        ok = ok && run(s, &b, &o, out2, err, sizeof err) == 0;
        int same = 0;
        for (int i = 0; ok && i < b.n; i++) same += same_nbest(&out[i], &out2[i]);
        CHECK(ok && same == b.n, "forced NULL = forced -1 for every sentence", "%s", err);
        clear_all(out, b.n);
        clear_all(out2, b.n);
        free(out2);
        b.forced = saved_forced;
        free(none_forced);
    }
    batch none = {0};
    CHECK(run(s, &none, &o, out, err, sizeof err) == 0, "zero sentences: nothing to do");
    free(out);
    batch_free(&b);
}

/* ----------------------------------------------------------- translate -- */

static void translate_tests(void) {
    char dir[512], err[512];
    fixture_path(dir, sizeof dir, "tiny-model");
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){0}, err, sizeof err);
    if (!CHECK(m, "tiny-model loads with its tokenizer", "%s", err)) return;
    const dmt_language *de = dmt_config_language(&m->cfg, "de"), *fr = dmt_config_language(&m->cfg, "fr");
    dmt_state *s = dmt_state_new(m);
    int maxsrc = dmt_translate_max_source_tokens(m);
    CHECK(maxsrc == m->cfg.max_positions - 1, "max source tokens = max_positions - 1");
    /* a line far over the limit */
    size_t longlen = (size_t)maxsrc * 8;
    char *longtext = malloc(longlen + 1);
    for (size_t i = 0; i < longlen; i++) longtext[i] = i % 4 == 3 ? ' ' : "xqz"[i % 4 % 3];
    longtext[longlen] = '\0';
    const char *texts[] = {"Der Lehrer liest heute einen Brief.", "", "   \t ", "bad \xff utf8", longtext,
                           "__de__ the teacher", "__fr__ the teacher", "the old man sees the red car", "__de__"};
    enum { N = sizeof texts / sizeof *texts };
    dmt_translate_input in[N];
    for (int i = 0; i < N; i++) in[i] = (dmt_translate_input){texts[i], strlen(texts[i]), i % 2 ? fr->id : de->id};
    in[5].target_id = in[6].target_id = de->id;
    dmt_translate_output out[N];
    dmt_beam_options o = dmt_beam_options_default(&m->cfg);
    o.beam_size = 3;
    o.nbest = 2;
    int rc = dmt_translate(m, s, N, in, &o, out, err, sizeof err);
    CHECK(rc == 0, "dmt_translate runs a mixed batch", "%s", err);
    if (rc == 0) {
        CHECK(!out[0].error[0] && out[0].n == 2 && out[0].texts[0] && out[0].src_tokens > 0 && out[0].out_tokens > 0,
              "a sentence translates: 2-best texts, token counts", "%s", out[0].error);
        CHECK(!out[0].error[0] && out[0].scores[0] >= out[0].scores[1], "translations best first");
        CHECK(!out[1].error[0] && out[1].n == 1 && !strcmp(out[1].texts[0], "") && out[1].src_tokens == 0,
              "empty input -> \"\"");
        CHECK(!out[2].error[0] && out[2].n == 1 && !strcmp(out[2].texts[0], ""), "whitespace-only input -> \"\"");
        CHECK(out[3].error[0] && strstr(out[3].error, "UTF-8") && !out[3].texts, "invalid UTF-8: this sentence's error",
              "\"%s\"", out[3].error);
        CHECK(out[4].error[0] && strstr(out[4].error, "too long") && !out[4].texts, "over the length limit: this sentence's error",
              "\"%s\"", out[4].error);
        CHECK(!out[5].error[0] && !out[6].error[0] && !strcmp(out[5].texts[0], out[6].texts[0]) &&
                  !strcmp(out[5].texts[1], out[6].texts[1]) && fabsf(out[5].scores[0] - out[6].scores[0]) < 1e-4f,
              "language tokens typed by the user are neutralised (__de__ x = __fr__ x)");
        CHECK(!out[7].error[0] && out[7].n == 2, "sentences after failed ones still translate", "%s", out[7].error);
        CHECK(!out[8].error[0] && out[8].src_tokens == 2 && out[8].n == 2,
              "a lone language token translates as unknown text (two pieces: space, unk)", "%s", out[8].error);
        /* the same sentence alone gives the same translation */
        dmt_translate_output one;
        rc = dmt_translate(m, s, 1, &in[7], &o, &one, err, sizeof err);
        CHECK(rc == 0 && !one.error[0] && !strcmp(one.texts[0], out[7].texts[0]) && !strcmp(one.texts[1], out[7].texts[1]),
              "a sentence alone = the same sentence in the batch (text)");
        if (rc == 0) dmt_translate_output_clear(&one);
    }
    for (int i = 0; rc == 0 && i < N; i++) dmt_translate_output_clear(&out[i]);
    /* no tokenizer: a batch-level error */
    char gdir[512];
    fixture_path(gdir, sizeof gdir, "beam/deepnorm-6x6");
    dmt_model *ids = dmt_model_load(gdir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (ids) {
        dmt_state *s2 = dmt_state_new(ids);
        err[0] = '\0';
        CHECK(dmt_translate(ids, s2, 1, in, &o, out, err, sizeof err) == -1 && strstr(err, "tokenizer"),
              "translate without a tokenizer is refused", "%s", err);
        dmt_state_free(s2);
        dmt_model_free(ids);
    }
    free(longtext);
    dmt_state_free(s);
    dmt_model_free(m);
}

int main(void) {
    golden_tests();
    char dir[512], err[512];
    fixture_path(dir, sizeof dir, "beam/deepnorm-6x6");
    dmt_model *m = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (CHECK(m, "property-test model loads", "%s", err)) {
        dmt_state *s = dmt_state_new(m);
        greedy_test(m, s);
        fan_out_test(m, s);
        property_tests(m, s);
        repeat_guard_tests(m, s);
        single_vs_batch_test(m, s);
        control_test(m, s);
        session_test(m, s, 0);
        session_test(m, s, 1);
        add_sources_fault_test(m);
        dmt_state_free(s);
        dmt_model_free(m);
    }
    /* the same independence from batch mates in the faster precisions */
    for (int p = DMT_PRECISION_BF16; p <= DMT_PRECISION_INT8; p++) {
        dmt_model *mp = dmt_model_load(dir, (dmt_load_options){.ids_only = 1, .precision = (dmt_precision)p}, err,
                                       sizeof err);
        if (!mp) { /* bf16 needs AVX-512 BF16: a level without it refuses, and says so */
            printf("# %s: not run at this level (%s)\n", dmt_precision_name((dmt_precision)p), err);
            CHECK(p == DMT_PRECISION_BF16, "int8 property-test model loads", "%s", err);
            continue;
        }
        dmt_state *sp = dmt_state_new(mp);
        single_vs_batch_test(mp, sp);
        dmt_state_free(sp);
        dmt_model_free(mp);
    }
    translate_tests();
    return check_done();
}
