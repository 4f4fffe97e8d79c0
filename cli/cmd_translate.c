/* cmd_translate.c — `deepmt translate`: lines of text in, translations out.
 *
 * Reads every line first (stdin or --input) and cuts it the way the server cuts a
 * text (text/sentences.h): into sentences (unless --no-split: one line, one
 * sentence), and a sentence too long for the model into chunks, so that no text is
 * dropped (a model trained on single sentences drops the later sentences of a
 * line) and none is refused for its length. Each piece is tokenized once to check
 * it (bad lines are reported now, by line number, and skipped), the pieces are
 * sorted longest first and handed to the same worker pool `deepmt serve` runs on
 * (server/sched/pool.h): --workers threads, each with its own dmt_state, batches of
 * --batch-size sentences (by default one worker per core, each with a
 * single-threaded BLAS; --batching as in serve). A line's translation is its
 * pieces' translations joined with the line's own spacing. Output comes in input
 * order once everything is done: --nbest lines per input line (best first; for a
 * line of several sentences, hypothesis r of each), each "score<TAB>text" with
 * --scores (for several sentences, the mean of their scores); a failed or empty
 * line still gets its lines (empty), so output line i*N+r always belongs to input
 * line i. Exit status: 0, 1 when any line failed (the rest are translated) or the
 * model cannot be used, 2 for a usage error. docs/decoding.md documents the options.
 */
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "model/beam.h"
#include "model/forward.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"
#include "model/model.h"
#include "model/translate.h"
#include "server/sched/pool.h"
#include "base/options.h"
#include "base/words.h"
#include "text/documents.h"
#include "text/html.h"
#include "text/sentences.h"
#include "tokenizer/tokenizer.h"

static void print_options(FILE *f);

static void usage(FILE *f) {
    fprintf(f,
            "usage: deepmt translate [-m MODEL_DIR] --target LANG [options] [< input] [> output]\n"
            "       deepmt translate [-m MODEL_DIR] --target LANG FILE [-o OUT]   (.txt .html .srt .docx .odt)\n"
            "\n"
            "Translates text a line at a time: each line is split into sentences (and a\n"
            "sentence too long for the model into chunks), translated, and joined again.\n"
            "Output is in input order: N lines per input line with --nbest N, best first;\n"
            "failed and empty lines give empty lines. A FILE argument is a document: the\n"
            "same kind of file is written, to -o OUT or to FILE with the target before its\n"
            "extension (report.de.docx).\n"
            "\n"
            "options (those with a variable shown can also be set there; a flag wins):\n");
    print_options(f);
    fprintf(f, "  %-30s %s\n\n", "-h, --help", "this help");
    fprintf(f, "Exit status: 0; 1 when a line failed (invalid UTF-8, a NUL byte: reported on stderr\n"
               "with its line number, the other lines are still translated) or the model cannot be\n"
               "loaded; 2 for bad options.\n");
}

typedef struct {
    char *text;
    size_t len;
    int first, count; /* its pieces (sentences, chunks): units[first .. first + count) */
    int failed;       /* a piece failed its check or its translation */
    char *out;        /* formatted output lines (malloc'd), NULL until translated */
    char *error;      /* malloc'd message when the line failed */
    int *pairs;       /* documents: word pairs (text word, translation word) of out; malloc'd */
    int n_pairs;
} line;

/* One piece of a line translated on its own: a sentence, or a chunk of one. */
typedef struct {
    int line;
    dmt_span span;    /* in the line */
    int pieces;       /* source pieces; -1 when it failed its check */
} unit;

typedef struct {
    const dmt_model *m;
    dmt_beam_options opt;
    int target_id, scores, alignments;
    int raw;                   /* documents: the best translation alone, no score, no newline added */
    int quiet;
    /* progress */
    int show, tty, done_lines, total_lines;
    long long done_tokens;
    double t0, last_print;
} job;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads all lines of f (without '\n' and a '\r' before it). -1 on a read error. */
static int read_lines(FILE *f, line **out, int *n) {
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    int cap_lines = 0;
    *out = NULL;
    *n = 0;
    while ((got = getline(&buf, &cap, f)) >= 0) {
        size_t len = (size_t)got;
        if (len && buf[len - 1] == '\n') len--;
        if (len && buf[len - 1] == '\r') len--;
        if (*n == cap_lines) {
            cap_lines = cap_lines ? 2 * cap_lines : 1024;
            line *p = realloc(*out, (size_t)cap_lines * sizeof *p);
            if (!p) break;
            *out = p;
        }
        line *l = &(*out)[(*n)++];
        memset(l, 0, sizeof *l);
        l->text = malloc(len + 1);
        if (!l->text) { (*n)--; break; }
        memcpy(l->text, buf, len);
        l->text[len] = '\0';
        l->len = len;
    }
    free(buf);
    return ferror(f) || !feof(f) ? -1 : 0;
}

static void progress(job *J, int final) {
    if (!J->show) return;
    double t = now(), dt = t - J->t0;
    if (!final && !J->tty && t - J->last_print < 10.0) return;
    if (!final && J->tty && t - J->last_print < 0.2) return;
    J->last_print = t;
    double sps = dt > 0 ? J->done_lines / dt : 0;
    if (final) {
        char products[64];
        fprintf(stderr, "%s%d sentences in %.1f s: %.1f sentences/s, %.1f target tokens/s (%s products: %s%s)\n",
                J->tty ? "\r\033[K" : "", J->done_lines, dt, sps, dt > 0 ? J->done_tokens / dt : 0,
                dmt_gemm_describe(J->m->kernels, J->m->layout, products, sizeof products), J->m->precision_reason,
                J->m->shortlist ? "; vocabulary shortlist" : "");
    } else {
        fprintf(stderr, "%s%d/%d sentences, %.1f sentences/s%s", J->tty ? "\r\033[K" : "", J->done_lines,
                J->total_lines, sps, J->tty ? "" : "\n");
    }
    fflush(stderr);
}

/* The line's word pairs (source word, target word) into l->pairs: each piece's own
 * pairs, its words counted over the whole line and over the translation out
 * (out_start[u]: where piece u's translation starts in it). 0, or -1 out of memory. */
static int line_pairs(line *l, const dmt_span *spans, const dmt_translate_output *res, const char *out,
                      const size_t *out_start) {
    size_t most = 1, out_len = strlen(out);
    for (int u = 0; u < l->count; u++) most += (size_t)res[u].n_alignment;
    most += (size_t)dmt_gap_pairs(l->text, l->len, 0, l->len, NULL, 0, 0, NULL); /* the gaps' words: at most all */
    free(l->pairs);
    l->n_pairs = 0;
    if (!(l->pairs = malloc(most * 2 * sizeof *l->pairs))) return -1;
    for (int u = 0; u < l->count; u++) {
        size_t gap = u ? spans[u - 1].start + spans[u - 1].len : 0; /* copied list markers: their own pairs */
        l->n_pairs += dmt_gap_pairs(l->text, l->len, gap, spans[u].start, out, out_len,
                                    out_start[u] - (spans[u].start - gap), l->pairs + 2 * l->n_pairs);
        int so = dmt_word_index_at(l->text, l->len, spans[u].start), to = dmt_word_index_at(out, out_len, out_start[u]);
        for (int q = 0; q < res[u].n_alignment; q++, l->n_pairs++) {
            l->pairs[2 * l->n_pairs] = so + res[u].alignment[2 * q];
            l->pairs[2 * l->n_pairs + 1] = to + res[u].alignment[2 * q + 1];
        }
    }
    return 0;
}

/* " i-j" for each of the line's word pairs (line_pairs). */
static char *line_alignment(line *l, const dmt_span *spans, const dmt_translate_output *res, const char *out,
                            const size_t *out_start) {
    if (line_pairs(l, spans, res, out, out_start)) return NULL;
    char *a = malloc((size_t)l->n_pairs * 24 + 1), *p = a;
    if (!a) return NULL;
    *p = 0;
    for (int q = 0; q < l->n_pairs; q++)
        p += sprintf(p, "%s%d-%d", q ? " " : "", l->pairs[2 * q], l->pairs[2 * q + 1]);
    return a;
}

/* A line's output: for each of nbest hypotheses r, the line with every piece
 * replaced by its hypothesis r (its best when it has fewer), "score<TAB>" first with
 * --scores (the mean over the pieces); one line each. NULL when out of memory. */
static char *format_output(const job *J, line *l, const dmt_span *spans, const dmt_translate_output *res) {
    if (J->raw) { /* a document's text: the best translation, spacing as it was, nothing added */
        size_t need = l->len + 1, pos = 0, o = 0;
        for (int u = 0; u < l->count; u++) need += strlen(res[u].texts[0]);
        char *t = malloc(need);
        size_t *starts = malloc(((size_t)(l->count > 0 ? l->count : 0) + 1) * sizeof *starts);
        if (!t || !starts) { free(t); free(starts); return NULL; }
        for (int u = 0; u < l->count; u++) {
            memcpy(t + o, l->text + pos, spans[u].start - pos);
            o += spans[u].start - pos;
            starts[u] = o;
            size_t k = strlen(res[u].texts[0]);
            memcpy(t + o, res[u].texts[0], k);
            o += k;
            pos = spans[u].start + spans[u].len;
        }
        memcpy(t + o, l->text + pos, l->len - pos);
        t[o + l->len - pos] = 0;
        int failed = line_pairs(l, spans, res, t, starts); /* for the inline tags of HTML, runs of documents */
        free(starts);
        if (failed) { free(t); return NULL; }
        return t;
    }
    size_t need = 1;
    for (int u = 0; u < l->count; u++)
        for (int r = 0; r < res[u].n; r++) need += strlen(res[u].texts[r]);
    need = (need + l->len + 32) * (size_t)J->opt.nbest;
    char *s = malloc(need), *p = s;
    if (!s) return NULL;
    for (int r = 0; r < J->opt.nbest; r++) {
        int have = 0;
        double score = 0;
        for (int u = 0; u < l->count; u++) have |= r < res[u].n, score += res[u].scores[r < res[u].n ? r : 0];
        if (l->count == 0) have = r == 0;
        if (J->scores) {
            if (have && l->count) p += sprintf(p, "%.6f\t", score / l->count);
            else p += sprintf(p, have ? "0.000000\t" : "-inf\t");
        }
        size_t pos = 0;
        char *text_start = p;
        size_t *out_start = J->alignments ? calloc((size_t)(l->count > 0 ? l->count : 0) + 1, sizeof *out_start) : NULL;
        if (J->alignments && !out_start) { free(s); return NULL; }
        for (int u = 0; have && u < l->count; u++) {
            memcpy(p, l->text + pos, spans[u].start - pos); /* the spacing before the piece */
            p += spans[u].start - pos;
            if (out_start) out_start[u] = (size_t)(p - text_start);
            for (const char *t = res[u].texts[r < res[u].n ? r : 0]; *t; t++) *p++ = *t == '\n' || *t == '\r' ? ' ' : *t;
            pos = spans[u].start + spans[u].len;
        }
        if (have && l->count) {
            memcpy(p, l->text + pos, l->len - pos);
            p += l->len - pos;
        }
        if (out_start) {
            *p = 0;
            char *al = line_alignment(l, spans, res, text_start, out_start);
            free(out_start);
            if (!al) { free(s); return NULL; }
            size_t k = strlen(al), at = (size_t)(p - s);
            char *grown = realloc(s, at + k + 3 + need - at);
            if (!grown) { free(al); free(s); return NULL; }
            s = grown;
            p = s + at;
            *p++ = '\t';
            memcpy(p, al, k);
            p += k;
            free(al);
        }
        *p++ = '\n';
    }
    *p = '\0';
    return s;
}

/* The pool's progress callback. */
static void on_progress(void *arg, int done) {
    job *J = arg;
    J->done_lines = done;
    if (done < J->total_lines) progress(J, 0);
}

static const unit *sort_units;
static int by_length_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    int px = sort_units[x].pieces, py = sort_units[y].pieces;
    if (px != py) return px > py ? -1 : 1;
    return (x > y) - (x < y);
}

/* fits(): a piece of a sentence is short enough for the model at once. */
static int fits_model(void *arg, const char *text, size_t len) {
    const dmt_model *m = arg;
    int k = dmt_translate_source_pieces(m, text, len);
    return k >= 0 && k <= dmt_translate_chunk_tokens(m);
}

/* Cuts every line into units: its sentences (or the whole line with no_split), and
 * a sentence too long for the model into chunks. *units is malloc'd; the count, or
 * -1 when out of memory. */
static int cut_lines(const dmt_model *m, line *lines, int n, int no_split, unit **units) {
    int cap = n + 16, k = 0;
    unit *u = malloc((size_t)cap * sizeof *u);
    for (int i = 0; u && i < n; i++) {
        line *l = &lines[i];
        l->first = k;
        int ns = no_split ? 1 : dmt_sentences_split(l->text, l->len, NULL, 0);
        dmt_span *sent = calloc((size_t)ns + 1, sizeof *sent);
        if (!sent) { free(u); return -1; }
        if (no_split) sent[0] = (dmt_span){0, l->len};
        else dmt_sentences_split(l->text, l->len, sent, ns);
        for (int j = 0; j < ns; j++) {
            int nc = dmt_sentence_chunks(l->text + sent[j].start, sent[j].len, fits_model, (void *)m, NULL, 0);
            if (nc == 0) continue; /* whitespace only (--no-split) */
            if (k + (nc > 0 ? nc : 1) > cap) {
                cap = 2 * cap + nc;
                unit *p = realloc(u, (size_t)cap * sizeof *p);
                if (!p) { free(sent); free(u); return -1; }
                u = p;
            }
            if (nc < 0) { /* cannot be cut: as it is (the check reports why) */
                u[k++] = (unit){i, sent[j], 0};
                continue;
            }
            dmt_span *chunks = calloc((size_t)nc, sizeof *chunks);
            if (!chunks) { free(sent); free(u); return -1; }
            dmt_sentence_chunks(l->text + sent[j].start, sent[j].len, fits_model, (void *)m, chunks, nc);
            for (int c = 0; c < nc; c++)
                u[k++] = (unit){i, {sent[j].start + chunks[c].start, chunks[c].len}, 0};
            free(chunks);
        }
        free(sent);
        l->count = k - l->first;
    }
    *units = u;
    return u ? k : -1;
}

/* Checks and measures every unit; reports the lines with a bad one. The number of
 * bad lines. */
static int check_units(const dmt_model *m, line *lines, unit *units, int n) {
    int maxsrc = dmt_translate_max_source_tokens(m), bad = 0;
    int32_t *ids = malloc((size_t)(maxsrc + 1) * sizeof *ids);
    for (int i = 0; i < n; i++) {
        line *l = &lines[units[i].line];
        dmt_translate_output tmp = {0}; /* as the search will tokenize it (all-caps rule included) */
        int got = ids ? dmt_translate_encode(m, l->text + units[i].span.start, units[i].span.len, ids, &tmp) : -1;
        units[i].pieces = got > 0 ? got - 1 : got;
        if (units[i].pieces < 0 && !l->failed) {
            const char *err = ids ? tmp.error : "out of memory";
            fprintf(stderr, "deepmt translate: line %d: %s\n", units[i].line + 1, err);
            l->error = strdup(err);
            l->failed = 1;
            bad++;
        }
        dmt_translate_output_clear(&tmp);
    }
    free(ids);
    return bad;
}

static void list_languages(const dmt_config *c) {
    fprintf(stderr, "deepmt translate: this model translates into:");
    for (int i = 0; i < c->n_languages; i++)
        fprintf(stderr, "%s %s (%s)", i ? "," : "", c->languages[i].code, c->languages[i].name);
    fprintf(stderr, "%s\n", c->n_languages ? "" : " (none: config.json lists no languages)");
}

typedef struct {
    char model[4096], target[64], input[4096], output[4096], format[8];
    int beam, nbest, scores, alignments, batch_size, threads, workers, quiet, show_progress, min_len, ngram, max_len_b;
    int batching, no_split, html, no_shortlist, set_batch;
    const char *file;          /* a document to translate (positional) */
    int precision; /* dmt_precision */
    float length_penalty, max_len_a;
    int set_lp, set_a, set_b, set_min, set_ngram, set_repeats, max_repeats;
} args;

#define F(field) offsetof(args, field)
#define S(field) sizeof ((args *)0)->field
/* The options of deepmt translate: the shared ones (base/options.h) mean what they
 * mean in deepmt serve. */
static const dmt_option options[] = {
    DMT_OPTION_MODEL(F(model), S(model)),
    {"target", 't', DMT_OPT_STR, F(target), S(target), 0, 0, "LANG", "target language code, e.g. de (required)", 0,
     NULL},
    {"input", 'i', DMT_OPT_STR, F(input), S(input), 0, 0, "FILE",
     "read FILE instead of stdin (shows progress on stderr) [stdin]", DMT_OPT_NO_ENV, NULL},
    {"output", 'o', DMT_OPT_STR, F(output), S(output), 0, 0, "FILE",
     "write FILE instead of stdout (for a FILE argument: FILE with the target before its extension, "
     "report.de.docx) [stdout]", DMT_OPT_NO_ENV, NULL},
    {"format", 0, DMT_OPT_CHOICE, F(html), 0, 0, 0, "text|html",
     "text: a line at a time; html: the whole input is one HTML text (tags kept, inline tags around the "
     "right words) [text]", DMT_OPT_NO_ENV, NULL},
    {"beam", 'b', DMT_OPT_INT, F(beam), 0, 1, DMT_BEAM_MAX_SIZE, "N", "beam size [the model's decoding.beam_size]",
     0, NULL},
    {"beam-size", 0, DMT_OPT_INT, F(beam), 0, 1, DMT_BEAM_MAX_SIZE, "N", "the same as --beam (the API's beam_size)",
     DMT_OPT_HIDDEN | DMT_OPT_NO_ENV, NULL},
    {"nbest", 'n', DMT_OPT_INT, F(nbest), 0, 1, DMT_BEAM_MAX_SIZE, "N", "translations per line, at most --beam [1]",
     DMT_OPT_NO_ENV, NULL},
    {"scores", 0, DMT_OPT_FLAG, F(scores), 0, 0, 0, "", "write \"score<TAB>translation\" (length-normalised "
     "log-probability)", DMT_OPT_NO_ENV, NULL},
    {"alignments", 0, DMT_OPT_FLAG, F(alignments), 0, 0, 0, "", "append \"<TAB>i-j ...\": source word i aligned "
     "to target word j (words split at whitespace, from 0; from the decoder's cross-attention)", DMT_OPT_NO_ENV, NULL},
    {"length-penalty", 0, DMT_OPT_FLOAT, F(length_penalty), 0, -10, 10, "X",
     "score = sum of log-probs / length^X [the model's]", 0, NULL},
    {"max-len-a", 0, DMT_OPT_FLOAT, F(max_len_a), 0, 0, 1000, "A",
     "at most A * source tokens + B target tokens [the model's]", 0, NULL},
    {"max-len-b", 0, DMT_OPT_INT, F(max_len_b), 0, 0, 1000000, "B", "see --max-len-a [the model's]", 0, NULL},
    {"min-len", 0, DMT_OPT_INT, F(min_len), 0, 0, 1000000, "N", "no end of sentence before N target tokens "
     "[the model's]", 0, NULL},
    {"no-repeat-ngram", 0, DMT_OPT_INT, F(ngram), 0, 0, 1000000, "N",
     "no n-gram of N tokens twice in a translation (0: off) [the model's]", 0, NULL},
    {"max-repeats", 0, DMT_OPT_INT, F(max_repeats), 0, 0, 1000, "N",
     "repetition guard: a unit of 1-8 tokens at most N times in a row unless the source repeats it more "
     "(0: off) [the model's]", 0, NULL},
    DMT_OPTION_MAX_BATCH_SENTENCES(F(batch_size)),
    DMT_OPTION_THREADS(F(threads)),
    DMT_OPTION_WORKERS(F(workers)),
    DMT_OPTION_BATCHING(F(batching)),
    DMT_OPTION_PRECISION(F(precision)),
    DMT_OPTION_NO_SHORTLIST(F(no_shortlist)),
    {"no-split", 0, DMT_OPT_FLAG, F(no_split), 0, 0, 0, "", "one line, one sentence: translate each line whole "
     "(for test sets aligned by line; a line too long for the model is still cut)", DMT_OPT_NO_ENV, NULL},
    {"quiet", 'q', DMT_OPT_FLAG, F(quiet), 0, 0, 0, "", "no progress or summary on stderr", DMT_OPT_NO_ENV, NULL},
    {"progress", 0, DMT_OPT_FLAG, F(show_progress), 0, 0, 0, "", "progress and summary on stderr also when "
     "reading stdin", DMT_OPT_NO_ENV, NULL},
};
#undef F
#undef S
#define N_OPTIONS (int)(sizeof options / sizeof *options)

static void print_options(FILE *f) { dmt_options_usage(f, options, N_OPTIONS); }

/* 0, 1 for --help, -1 for a usage error (message printed), -2 for an unknown
 * option or a bad value (message printed; no usage after it). */
static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.nbest = 1, .batch_size = 32, .batching = 1, .precision = DMT_PRECISION_AUTO};
    snprintf(a->model, sizeof a->model, "%s", DMT_DEFAULT_MODEL);
    int given[N_OPTIONS];
    memset(given, 0, sizeof given);
    const char *pos[1];
    int n_pos = 0;
    char err[512];
    int rc = dmt_options_parse("translate", options, N_OPTIONS, a, argc, argv, given, pos, 1, &n_pos, err, sizeof err);
    if (rc == 1) return 1;
    if (rc) {
        fprintf(stderr, "deepmt translate: %s\n", err);
        return -2;
    }
    for (int i = 0; i < N_OPTIONS; i++) {
        if (!given[i]) continue;
        const char *n = options[i].name;
        a->set_lp |= !strcmp(n, "length-penalty");
        a->set_a |= !strcmp(n, "max-len-a");
        a->set_b |= !strcmp(n, "max-len-b");
        a->set_min |= !strcmp(n, "min-len");
        a->set_ngram |= !strcmp(n, "no-repeat-ngram");
        a->set_repeats |= !strcmp(n, "max-repeats");
        a->set_batch |= options[i].offset == offsetof(args, batch_size); /* either spelling */
    }
    if (n_pos) a->file = pos[0];
    if (a->file && (a->input[0] || a->html || a->nbest > 1 || a->scores)) {
        fprintf(stderr, "deepmt translate: a FILE argument goes with none of --input, --format, --nbest, --scores\n");
        return -1;
    }
    if (a->alignments && (a->file || a->html || a->nbest > 1)) {
        fprintf(stderr, "deepmt translate: --alignments goes with plain text and one translation a line "
                        "(no FILE, --format html, --nbest)\n");
        return -1;
    }
    if (a->html && (a->nbest > 1 || a->scores)) {
        fprintf(stderr, "deepmt translate: --format html gives one translation (no --nbest, --scores)\n");
        return -1;
    }
    if (!a->target[0]) { fprintf(stderr, "deepmt translate: --target LANG is required\n"); return -1; }
    return 0;
}

/* Writes every line's output in input order; failed lines get empty lines. */
static int write_output(FILE *f, const char *name, const job *J, const line *lines, int n) {
    for (int i = 0; i < n; i++) {
        if (lines[i].out) fputs(lines[i].out, f);
        else
            for (int r = 0; r < J->opt.nbest; r++) fputs(J->scores ? "-inf\t\n" : "\n", f);
    }
    if (fflush(f) == 0 && !ferror(f)) return 0;
    fprintf(stderr, "deepmt translate: writing %s failed\n", name);
    return -1;
}

/* Translates lines[0..n) (each cut into sentences and chunks, see cut_lines) through
 * the pool and fills each line's out (format_output) or error. *bad counts the lines
 * that failed. 0, or -1 when the pool or memory failed (message printed). */
static int translate_lines(dmt_pool *pool, job *J, line *lines, int n, int no_split, int *bad) {
    const dmt_model *m = J->m;
    char err[512];
    int rc = -1, n_order = 0;
    unit *units = NULL;
    dmt_span *spans = NULL;
    int *order = NULL;
    dmt_translate_input *src = NULL;
    dmt_translate_output *res = NULL, *byunit = NULL;
    int n_units = cut_lines(m, lines, n, no_split, &units);
    if (n_units < 0) { fprintf(stderr, "deepmt translate: out of memory\n"); return -1; }
    *bad += check_units(m, lines, units, n_units);
    order = malloc((size_t)(n_units ? n_units : 1) * sizeof *order);
    src = malloc((size_t)(n_units ? n_units : 1) * sizeof *src);
    res = calloc((size_t)(n_units ? n_units : 1), sizeof *res);
    spans = malloc((size_t)(n_units ? n_units : 1) * sizeof *spans);
    byunit = calloc((size_t)(n_units ? n_units : 1), sizeof *byunit);
    if (!order || !src || !res || !spans || !byunit) { fprintf(stderr, "deepmt translate: out of memory\n"); goto out; }
    for (int i = 0; i < n_units; i++)
        if (!lines[units[i].line].failed) order[n_order++] = i;
    sort_units = units;
    qsort(order, (size_t)n_order, sizeof *order, by_length_desc); /* longest first: batch mates end together, slow ones start first */
    for (int k = 0; k < n_order; k++) {
        const unit *u = &units[order[k]];
        src[k] = (dmt_translate_input){lines[u->line].text + u->span.start, u->span.len, J->target_id};
    }
    J->total_lines = n_order;
    J->t0 = J->last_print = now();
    if (dmt_pool_translate(pool, n_order, src, &J->opt, res, J->show ? on_progress : NULL, J, err, sizeof err)) {
        fprintf(stderr, "%sdeepmt translate: %s\n", J->show && J->tty ? "\n" : "", err);
        goto out;
    }
    for (int k = 0; k < n_order; k++) {
        const unit *u = &units[order[k]];
        line *l = &lines[u->line];
        if (res[k].error[0] && !l->failed) {
            l->failed = 1;
            l->error = strdup(res[k].error);
            fprintf(stderr, "%sdeepmt translate: %s %d: %s\n", J->show && J->tty ? "\r\033[K" : "",
                    J->raw ? "text" : "line", u->line + 1, res[k].error);
            (*bad)++;
        }
        J->done_tokens += res[k].out_tokens;
        byunit[order[k]] = res[k]; /* back in unit order */
    }
    for (int i = 0; i < n; i++) {
        line *l = &lines[i];
        if (l->failed) continue;
        for (int u = 0; u < l->count; u++) spans[u] = units[l->first + u].span;
        l->out = format_output(J, l, spans, byunit + l->first);
        if (!l->out) {
            l->failed = 1;
            l->error = strdup("out of memory");
            (*bad)++;
        }
    }
    J->done_lines = n_order;
    progress(J, 1);
    rc = 0;
out:
    for (int k = 0; res && k < n_order; k++) dmt_translate_output_clear(&res[k]);
    free(order);
    free(src);
    free(res);
    free(byunit);
    free(units);
    free(spans);
    return rc;
}

/* texts[0..n) as lines of their own (copies; lines[i].out comes from translate_lines). */
static line *lines_of(const char *const *texts, const size_t *lens, int n) {
    line *lines = calloc((size_t)(n ? n : 1), sizeof *lines);
    for (int i = 0; lines && i < n; i++) {
        lines[i].text = malloc(lens[i] + 1);
        if (!lines[i].text) return lines; /* the caller frees; a NULL text fails below */
        memcpy(lines[i].text, texts[i], lens[i]);
        lines[i].text[lens[i]] = 0;
        lines[i].len = lens[i];
    }
    return lines;
}

static void free_lines(line *lines, int n) {
    for (int i = 0; lines && i < n; i++) {
        free(lines[i].text);
        free(lines[i].out);
        free(lines[i].error);
        free(lines[i].pairs);
    }
    free(lines);
}

/* An HTML text with its runs of text translated (text/html.h: markup kept byte for
 * byte). malloc'd, *out_len set; NULL on failure (message printed). */
static char *translate_html(dmt_pool *pool, job *J, const char *text, size_t len, int no_split, int *bad,
                            size_t *out_len) {
    char err[256];
    dmt_html *h = dmt_html_prepare(&text, &len, 1, 1 << 20, err, sizeof err);
    if (!h) { fprintf(stderr, "deepmt translate: %s\n", err); return NULL; }
    int n = dmt_html_segment_count(h);
    const char **seg = calloc((size_t)n + 1, sizeof *seg);
    size_t *sl = calloc((size_t)n + 1, sizeof *sl);
    char *page = NULL;
    line *lines = NULL;
    if (!seg || !sl) goto out;
    for (int i = 0; i < n; i++) seg[i] = dmt_html_segment(h, i, &sl[i]);
    if (!(lines = lines_of(seg, sl, n)) || translate_lines(pool, J, lines, n, no_split, bad)) goto out;
    const int **pairs = calloc((size_t)n + 1, sizeof *pairs);
    int *n_pairs = calloc((size_t)n + 1, sizeof *n_pairs);
    if (!pairs || !n_pairs) { free(pairs); free(n_pairs); goto out; }
    for (int i = 0; i < n; i++) { /* a failed run keeps its text (and its tags, by position) */
        seg[i] = lines[i].out ? lines[i].out : lines[i].text;
        sl[i] = strlen(seg[i]);
        pairs[i] = lines[i].out ? lines[i].pairs : NULL;
        n_pairs[i] = lines[i].out ? lines[i].n_pairs : 0;
    }
    page = dmt_html_render_aligned(h, 0, seg, sl, pairs, n_pairs, out_len);
    free(pairs);
    free(n_pairs);
out:
    free_lines(lines, n);
    free(seg);
    free(sl);
    dmt_html_free(h);
    return page;
}

/* deepmt translate FILE: a .txt/.html/.srt/.docx/.odt translated into the same kind
 * of file (text/documents.h), written to out_path. 0, 1 when a text failed (written
 * untranslated) or the file could not be used (message printed). */
static int translate_document(dmt_pool *pool, job *J, const char *path, const char *out_path, int no_split) {
    int kind = dmt_doc_kind_of(path), rc = 1, bad = 0, n = 0;
    if (kind < 0) {
        fprintf(stderr, "deepmt translate: %s: not a supported file type (.txt, .html, .htm, .srt, .docx, .odt)\n",
                path);
        return 1;
    }
    FILE *f = fopen(path, "rb");
    char *data = NULL, err[512];
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f && size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size + 1)) &&
        fread(data, 1, (size_t)size, f) != (size_t)size) {
        free(data);
        data = NULL;
    }
    if (f) fclose(f);
    if (!data) {
        fprintf(stderr, "deepmt translate: %s: %s\n", path, errno ? strerror(errno) : "cannot read it");
        return 1;
    }
    dmt_doc *d = dmt_doc_open((dmt_doc_kind)kind, data, (size_t)size, err, sizeof err);
    const char **tr = NULL;
    size_t *tl = NULL;
    line *lines = NULL;
    char *page = NULL;
    if (!d) {
        fprintf(stderr, "deepmt translate: %s: %s\n", path, err);
        goto out;
    }
    n = dmt_doc_count(d);
    tr = calloc((size_t)n + 1, sizeof *tr);
    tl = calloc((size_t)n + 1, sizeof *tl);
    if (!tr || !tl) goto out;
    for (int i = 0; i < n; i++) tr[i] = dmt_doc_text(d, i, &tl[i]);
    if (dmt_doc_is_html(d) && n == 1) {
        if (!(page = translate_html(pool, J, tr[0], tl[0], no_split, &bad, &tl[0]))) goto out;
        tr[0] = page;
    } else {
        if (!(lines = lines_of(tr, tl, n)) || translate_lines(pool, J, lines, n, no_split, &bad)) goto out;
        for (int i = 0; i < n; i++) { /* a failed text stays as it was */
            if (lines[i].out) tr[i] = lines[i].out, tl[i] = strlen(lines[i].out);
        }
    }
    const int **pairs = lines ? calloc((size_t)n + 1, sizeof *pairs) : NULL; /* runs keep their words (documents.h) */
    int *n_pairs = pairs ? calloc((size_t)n + 1, sizeof *n_pairs) : NULL;
    for (int i = 0; n_pairs && i < n; i++)
        if (lines[i].out) pairs[i] = lines[i].pairs, n_pairs[i] = lines[i].n_pairs;
    int wrote = dmt_doc_write_aligned(d, tr, tl, n_pairs ? pairs : NULL, n_pairs, out_path, err, sizeof err);
    free(pairs);
    free(n_pairs);
    if (wrote) {
        fprintf(stderr, "deepmt translate: %s: %s\n", out_path, err);
        goto out;
    }
    if (!J->quiet) fprintf(stderr, "deepmt translate: wrote %s\n", out_path);
    if (bad) fprintf(stderr, "deepmt translate: %d of %d texts failed (left untranslated)\n", bad, n);
    rc = bad ? 1 : 0;
out:
    free_lines(lines, n);
    free(page);
    free(tr);
    free(tl);
    dmt_doc_free(d);
    free(data);
    return rc;
}

/* "report.docx" -> "report.de.docx": the default output of deepmt translate FILE. */
static void default_output(const char *path, const char *target, char *out, size_t cap) {
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) dot = path + strlen(path);
    snprintf(out, cap, "%.*s.%s%s", (int)(dot - path), path, target, dot);
}

int cmd_translate(int argc, char **argv) {
    args a;
    int pa = parse_args(argc, argv, &a);
    if (pa) { /* -2: a mistyped option, said in one line; -1: the usage helps */
        if (pa != -2) usage(pa > 0 ? stdout : stderr);
        return pa > 0 ? 0 : 2;
    }
    char err[512];
    struct stat st;
    if (stat(a.model, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "deepmt translate: model directory '%s' not found\n", a.model);
        return 1;
    }
    /* Workers over batches beat BLAS threads inside each matrix product on small
     * models and busy machines (docs/decoding.md, "Threads"): as in deepmt serve,
     * min(threads, 4) workers by default, threads / workers BLAS threads each. */
    int workers, blas;
    dmt_options_threads(a.threads, a.workers, &workers, &blas);
    dmt_pool_options po = {workers, blas, a.batch_size, a.precision, a.batching == 1, a.no_shortlist, !a.set_batch};
    dmt_pool *pool = dmt_pool_open(a.model, po, err, sizeof err);
    if (!pool) { fprintf(stderr, "deepmt translate: %s\n", err); return 1; }
    const dmt_model *m = dmt_pool_model(pool);
    int rc = 1, n = 0, bad = 0;
    line *lines = NULL;
    FILE *out = NULL;
    job J = {.m = m, .scores = a.scores, .alignments = a.alignments, .quiet = a.quiet};
    const dmt_language *lang = dmt_config_language(&m->cfg, a.target);
    if (!lang) {
        fprintf(stderr, "deepmt translate: unknown target language '%s'\n", a.target);
        list_languages(&m->cfg);
        goto done;
    }
    J.target_id = lang->id;
    J.opt = dmt_beam_options_default(&m->cfg);
    if (a.beam) J.opt.beam_size = a.beam;
    J.opt.nbest = a.nbest;
    if (a.set_lp) J.opt.length_penalty = a.length_penalty;
    if (a.set_a) J.opt.max_len_a = a.max_len_a;
    if (a.set_b) J.opt.max_len_b = a.max_len_b;
    if (a.set_min) J.opt.min_len = a.min_len;
    if (a.set_ngram) J.opt.no_repeat_ngram_size = a.ngram;
    if (a.set_repeats) J.opt.max_repeats = a.max_repeats;
    if (dmt_beam_options_check(&J.opt, err, sizeof err)) {
        fprintf(stderr, "deepmt translate: %s\n", err);
        rc = 2;
        goto done;
    }
    J.tty = isatty(STDERR_FILENO);
    if (a.file) { /* a document: the same kind of file back */
        char def[4096];
        if (!a.output[0]) default_output(a.file, a.target, def, sizeof def);
        J.raw = 1;
        J.show = !a.quiet;
        rc = translate_document(pool, &J, a.file, a.output[0] ? a.output : def, a.no_split);
        goto done;
    }
    FILE *in = a.input[0] ? fopen(a.input, "r") : stdin;
    if (!in) { fprintf(stderr, "deepmt translate: %s: %s\n", a.input, strerror(errno)); goto done; }
    if (a.html) { /* the whole input is one HTML text: markup kept, its runs of text translated */
        char *text = NULL;
        size_t len = 0, got;
        FILE *mem = open_memstream(&text, &len);
        char buf[65536];
        while (mem && (got = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, got, mem);
        int read_failed = !mem || ferror(in);
        if (mem) fclose(mem);
        if (a.input[0]) fclose(in);
        if (read_failed || !text) { free(text); fprintf(stderr, "deepmt translate: reading the input failed\n"); goto done; }
        J.raw = 1;
        J.show = !a.quiet && (a.input[0] || a.show_progress);
        size_t out_len;
        char *page = translate_html(pool, &J, text, len, a.no_split, &bad, &out_len);
        free(text);
        out = a.output[0] ? fopen(a.output, "w") : stdout;
        if (page && out) fwrite(page, 1, out_len, out);
        if (!out) fprintf(stderr, "deepmt translate: %s: %s\n", a.output, strerror(errno));
        rc = page && out && !ferror(out) ? (bad ? 1 : 0) : 1;
        free(page);
        goto done;
    }
    int read_failed = read_lines(in, &lines, &n);
    if (a.input[0]) fclose(in);
    if (read_failed) { fprintf(stderr, "deepmt translate: reading %s failed\n", a.input[0] ? a.input : "stdin"); goto done; }
    out = a.output[0] ? fopen(a.output, "w") : stdout; /* now, not after hours of work */
    if (!out) { fprintf(stderr, "deepmt translate: %s: %s\n", a.output, strerror(errno)); goto done; }
    J.show = !a.quiet && (a.input[0] || a.show_progress) && n > 0;
    if (translate_lines(pool, &J, lines, n, a.no_split, &bad)) goto done;
    if (write_output(out, a.output[0] ? a.output : "stdout", &J, lines, n)) goto done;
    if (bad) fprintf(stderr, "deepmt translate: %d of %d lines failed (empty output lines)\n", bad, n);
    rc = bad ? 1 : 0;
done:
    if (out && a.output[0] && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "deepmt translate: writing %s failed\n", a.output);
        rc = 1;
    }
    free_lines(lines, n);
    dmt_pool_close(pool);
    return rc;
}
