/* translate.c — text in, text out: tokenize, one beam search, detokenize (translate.h).
 *
 * Language tokens in user text: the SentencePiece model holds each language token
 * (__de__) as a user-defined piece, so typing "__de__" would put a real language
 * token into the source. Any language-token id in an encoded source (a piece of the
 * form __xx__, or an id config.json lists as a language) becomes unk_id instead.
 *
 * ALL-CAPS input (model/casing.h): with config.json's decoding.all_caps "lower", a
 * sentence typed in capitals is tokenized in sentence case and its translations are
 * given back in capitals (dmt_translate_output.all_caps).
 *
 * Numbers with several group separators (model/numbers.h): with
 * decoding.copy_numbers, given to the model as one run of digits (after the
 * pass-through, so a URL's digits stay its own) and put back first, as the target
 * language writes them (o->target_id) or as written; the alignment then counts the
 * words of one grouped with plain spaces.
 *
 * URLs, e-mail addresses, emoji and words the vocabulary cannot spell
 * (model/passthrough.h, unspellable below): with decoding.pass_through, they
 * are taken out of the sentence before everything else (so an ALL-CAPS sentence
 * with a lower-case URL is still ALL-CAPS, and the URL keeps its case), and put
 * back into each translation after casing, the best one by the word alignment.
 */
#include "model/translate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/casing.h"
#include "model/scripts.h"
#include "tokenizer/tokenizer.h"

int dmt_translate_max_source_tokens(const dmt_model *m) { return m->cfg.max_positions - 1; }

int dmt_translate_chunk_tokens(const dmt_model *m) {
    int k = m->cfg.max_positions / 2, most = dmt_translate_max_source_tokens(m);
    if (k < 16) k = 16;
    return k < most ? k : most;
}

/* dmt_casing_true_case's oracle: "▁word" is a piece of the model's vocabulary */
static int known_piece(void *arg, const char *word, size_t len) {
    char piece[260] = "\xE2\x96\x81";
    if (len > sizeof piece - 4) return 0;
    memcpy(piece + 3, word, len);
    piece[3 + len] = 0;
    return dmt_tokenizer_piece_to_id(((const dmt_model *)arg)->tokenizer, piece) >= 0;
}

/* dmt_passthrough's test for a word the model cannot spell:
 * - a letter of it is in a script none of the model's languages is written in
 *   (m->scripts): the default model's vocabulary has every Cyrillic letter, from a
 *   few stray lines, and Russian came out as invented German;
 * - or a character of it is one the vocabulary never learnt, and comes out as
 *   byte-fallback pieces ("<0xD9>") or unk. The model has hardly seen those and
 *   answers with invented words, for a whole script (Arabic, Hebrew, Greek,
 *   Chinese) and for a name with one such letter alike ("Łódź" had given
 *   "eigenód-Geschäftig").
 * Copied, the word stays right. */
static int unspellable(void *arg, const char *word, size_t len) {
    const dmt_model *m = arg;
    if (m->scripts && dmt_scripts_foreign_letter(word, len, m->scripts)) return 1;
    /* a word of nothing but General Punctuation (a "―" between words) is left to
     * the model, which copies a lone dash as well as the span rule would place it */
    int punctuation = 1;
    for (size_t i = 0; i < len && punctuation; i++) {
        const unsigned char *c = (const unsigned char *)word + i;
        punctuation = i + 2 < len + 0 && c[0] == 0xE2 && (c[1] == 0x80 || c[1] == 0x81);
        if (punctuation) i += 2;
    }
    if (punctuation || dmt_tokenizer_spells(m->tokenizer, word, len) != 0) return 0;
    /* "PÈRE", "CŒUR": capitals the vocabulary lacks, in a word it spells in lower
     * case. In an ALL-CAPS sentence the all-caps rule lowers it for the model (a copy
     * had kept "MY PÈRE IMPROVED"); elsewhere the model gets it as before. */
    size_t n = 0;
    char *lower = dmt_casing_lower(word, len, &n);
    int unspelt = !lower || (n == len && !memcmp(lower, word, len)) || dmt_tokenizer_spells(m->tokenizer, lower, n) == 0;
    free(lower);
    return unspelt;
}

/* The sentence's spans (model/passthrough.h), with the vocabulary's tests. */
static int find_spans(const dmt_model *m, const char *text, size_t len, dmt_passthrough *p) {
    if (!m->tokenizer) return dmt_passthrough_find(text, len, p);
    dmt_passthrough_spelling spelling = {m->missing_ascii, unspellable, (void *)m, m->lone_letters};
    return dmt_passthrough_find_with(text, len, &spelling, p);
}

static char *shouted_to_cased(const dmt_model *m, const char *text, size_t len, size_t *out_len) {
    return dmt_casing_true_case(text, len, out_len, m->tokenizer ? known_piece : NULL, (void *)m);
}

int dmt_translate_source_pieces(const dmt_model *m, const char *text, size_t len) {
    char *cased = NULL, err[256];
    dmt_passthrough pass;
    int nothing = dmt_passthrough_verbatim(text, len, &pass);
    dmt_passthrough_clear(&pass);
    if (nothing) return nothing < 0 ? -1 : 0; /* given back as it is, never cut */
    int spans = m->cfg.decoding.pass_through ? find_spans(m, text, len, &pass) : 0;
    if (spans < 0) return -1;
    if (spans) {
        text = pass.stripped;
        len = pass.stripped_len;
    }
    if (m->cfg.decoding.all_caps_lower && dmt_casing_is_all_caps(text, len)) {
        size_t n = 0;
        if (!(cased = shouted_to_cased(m, text, len, &n))) return -1;
        text = cased;
        len = n;
    }
    int k = dmt_tokenizer_count(m->tokenizer, text, len, err, sizeof err);
    free(cased);
    if (spans) dmt_passthrough_clear(&pass);
    return k;
}

void dmt_translate_output_clear(dmt_translate_output *o) {
    if (!o) return;
    for (int i = 0; o->texts && i < o->n; i++) free(o->texts[i]);
    free(o->texts);
    free(o->scores);
    free(o->alignment);
    free(o->src_words);
    dmt_passthrough_clear(o->pass);
    free(o->pass);
    o->pass = NULL;
    dmt_numbers_clear(&o->numbers);
    dmt_placeholders_clear(&o->placeholders);
    o->texts = NULL;
    o->scores = NULL;
    o->alignment = NULL;
    o->src_words = NULL;
    o->n = o->n_alignment = 0;
}

static int is_language_id(const dmt_model *m, int32_t id) {
    for (int l = 0; l < m->cfg.n_languages; l++)
        if (m->cfg.languages[l].id == id) return 1;
    return dmt_tokenizer_is_language_piece(dmt_tokenizer_id_to_piece(m->tokenizer, id));
}

/* The word of each of n pieces, as the text they decode to splits at whitespace: a
 * piece that begins with U+2581 starts a word (so does the first piece); pieces
 * that decode to nothing (control and language pieces) get -1. */
static void piece_words(const dmt_model *m, const int32_t *ids, int n, int *words) {
    int word = -1;
    for (int t = 0; t < n; t++) {
        const char *p = dmt_tokenizer_id_to_piece(m->tokenizer, ids[t]);
        if (!p || ids[t] == m->cfg.eos_id || ids[t] == m->cfg.pad_id || ids[t] == m->cfg.decoder_start_id ||
            is_language_id(m, ids[t])) {
            words[t] = -1;
            continue;
        }
        if (word < 0 || !strncmp(p, "\xe2\x96\x81", 3)) word++;
        words[t] = word;
    }
}

/* A space the tokenizer's normalisation makes an ordinary one at c[0..n) (U+00A0,
 * U+2000-U+200A, U+202F, U+205F, U+3000): its length, or 0. */
static size_t unicode_space(const unsigned char *c, size_t n) {
    if (n >= 2 && c[0] == 0xC2 && c[1] == 0xA0) return 2;
    if (n >= 3 && c[0] == 0xE2 && c[1] == 0x80 && (c[2] <= 0x8A || c[2] == 0xAF)) return 3;
    if (n >= 3 && c[0] == 0xE2 && c[1] == 0x81 && c[2] == 0x9F) return 3;
    if (n >= 3 && c[0] == 0xE3 && c[1] == 0x80 && c[2] == 0x80) return 3;
    return 0;
}

/* The words of text as the model sees them (split at white space and at the spaces
 * the normaliser makes ordinary ones) in the text's own words (split at white space
 * only, as the alignment counts them): "10 km" with U+00A0 is one word of the text
 * and two of the model's, and had shifted every pair after it by one. model_word[w]
 * gets the text word of model word w (room for len + 1); the model words' count. */
static int text_words(const char *text, size_t len, int *text_word) {
    int model_words = 0, word = -1, in_model = 0, in_text = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)text[i];
        size_t u = unicode_space((const unsigned char *)text + i, len - i);
        int ascii = c == ' ' || (c >= '\t' && c <= '\r');
        if (!ascii && !in_text) word++;
        in_text = !ascii;
        if (ascii || u) {
            in_model = 0;
            i += u ? u : 1;
            continue;
        }
        if (!in_model) text_word[model_words++] = word;
        in_model = 1;
        i++;
    }
    return model_words;
}

/* The best hypothesis' word pairs into o (needs o->src_words); 0, or -1 when out of memory. */
static int word_alignment(const dmt_model *m, const dmt_hypothesis *h, dmt_translate_output *o) {
    if (!o->src_words || !h->align || h->n_tokens == 0) return 0;
    int *tw = malloc((size_t)h->n_tokens * sizeof *tw);
    int *pairs = malloc((size_t)h->n_tokens * 2 * sizeof *pairs);
    if (!tw || !pairs) { free(tw); free(pairs); return -1; }
    piece_words(m, h->tokens, h->n_tokens, tw);
    int n = 0;
    for (int t = 0; t < h->n_tokens; t++) {
        int sp = h->align[t];
        if (tw[t] < 0 || sp < 0 || sp >= o->src_tokens || o->src_words[sp] < 0) continue;
        int sw = o->src_words[sp], seen = 0;
        for (int q = n - 1; q >= 0 && pairs[2 * q + 1] == tw[t] && !seen; q--) seen = pairs[2 * q] == sw;
        if (seen) continue;
        pairs[2 * n] = sw;
        pairs[2 * n + 1] = tw[t];
        n++;
    }
    free(tw);
    free(o->alignment);
    o->alignment = pairs;
    o->n_alignment = n;
    return 0;
}

/* Puts the format placeholders back into every translation, in place of their
 * numbers (model/placeholders.h): after the spans, whose digits are their own. */
static int restore_placeholders(dmt_translate_output *o) {
    for (int r = 0; r < o->n; r++) {
        size_t len = 0;
        char *t = dmt_placeholders_restore(&o->placeholders, o->texts[r], strlen(o->texts[r]), &len);
        if (!t) return -1;
        free(o->texts[r]);
        o->texts[r] = t;
    }
    return 0;
}

/* Puts the source's final run of marks back into every translation (model/marks.h). */
static int restore_marks(dmt_translate_output *o) {
    for (int r = 0; r < o->n; r++) {
        size_t len = 0;
        char *t = dmt_marks_restore(o->texts[r], strlen(o->texts[r]), &o->marks, &len);
        if (!t) return -1;
        free(o->texts[r]);
        o->texts[r] = t;
    }
    return 0;
}

/* Fills o with the single translation "" (empty input), or the sentence as it
 * was when it held nothing to translate (no letter or digit) or nothing but
 * pass-through spans and punctuation. */
static int empty_translation(dmt_translate_output *o) {
    o->texts = calloc(1, sizeof *o->texts);
    o->scores = calloc(1, sizeof *o->scores);
    if (!o->texts || !o->scores || !(o->texts[0] = strdup(o->pass ? o->pass->original : ""))) return -1;
    o->n = 1;
    return o->marks.len ? restore_marks(o) : 0;
}

/* Puts the spans kept out of the model back into every translation: the best one
 * by the word alignment (which then counts the original sentence's words and the
 * spans), the others by relative position. */
static int restore_spans(dmt_translate_output *o) {
    for (int r = 0; r < o->n; r++) {
        size_t len = 0;
        int *pairs = NULL, n_pairs = 0;
        char *t = dmt_passthrough_restore(o->pass, o->texts[r], strlen(o->texts[r]), r ? NULL : o->alignment,
                                          r ? 0 : o->n_alignment, &len, r ? NULL : &pairs, r ? NULL : &n_pairs);
        if (!t) return -1;
        free(o->texts[r]);
        o->texts[r] = t;
        if (r == 0) {
            free(o->alignment);
            o->alignment = pairs;
            o->n_alignment = n_pairs;
        }
    }
    return 0;
}

/* The best translation's alignment through the numbers grouped with plain spaces:
 * their words on both sides (placed: the words they went into). 0, or -1. */
static int number_alignment(dmt_translate_output *o, const int *placed) {
    int *pairs = NULL, n = 0;
    if (dmt_numbers_map_pairs(&o->numbers, placed, o->alignment, o->n_alignment, &pairs, &n)) return -1;
    free(o->alignment);
    o->alignment = pairs;
    o->n_alignment = n;
    return 0;
}

/* How the target language writes numbers (decoding.number_format "target"), or NULL:
 * as the source wrote them. */
static const dmt_number_style *target_number_style(const dmt_model *m, int target_id) {
    if (m->cfg.decoding.numbers_as_written || target_id <= 0) return NULL;
    for (int l = 0; l < m->cfg.n_languages; l++)
        if (m->cfg.languages[l].id == target_id) return dmt_numbers_style(m->cfg.languages[l].code);
    return NULL;
}

/* n-best token lists -> texts. -1 on failure (message in o->error). */
static int detokenize(const dmt_model *m, const dmt_nbest *nb, dmt_translate_output *o) {
    o->texts = calloc((size_t)(nb->n ? nb->n : 1), sizeof *o->texts);
    o->scores = calloc((size_t)(nb->n ? nb->n : 1), sizeof *o->scores);
    /* where the best translation's numbers went, for its alignment */
    int *placed = o->numbers.spaced ? malloc((size_t)o->numbers.n * sizeof *placed) : NULL;
    if (!o->texts || !o->scores || (o->numbers.spaced && !placed)) goto out_of_memory;
    const dmt_number_style *style = o->numbers.n ? target_number_style(m, o->target_id) : NULL;
    for (int r = 0; r < nb->n; r++) {
        if (dmt_tokenizer_decode(m->tokenizer, nb->hyps[r].tokens, nb->hyps[r].n_tokens, &o->texts[r], o->error,
                                 sizeof o->error) < 0) {
            free(placed);
            return -1;
        }
        if (o->numbers.n) { /* before the spans go back: a URL's digits are its own */
            size_t n = 0;
            char *t = dmt_numbers_restore(o->texts[r], strlen(o->texts[r]), &o->numbers, &n, r ? NULL : placed,
                                          style);
            if (!t) goto out_of_memory;
            free(o->texts[r]);
            o->texts[r] = t;
        }
        if (o->all_caps) {
            char *up = dmt_casing_upper(o->texts[r], strlen(o->texts[r]), NULL);
            if (!up) goto out_of_memory;
            free(o->texts[r]);
            o->texts[r] = up;
        }
        o->scores[r] = nb->hyps[r].score;
        o->n = r + 1;
    }
    if (nb->n == 0) {
        free(placed);
        snprintf(o->error, sizeof o->error, "no translation found");
        return -1;
    }
    o->out_tokens = nb->hyps[0].n_tokens;
    if (word_alignment(m, &nb->hyps[0], o)) goto out_of_memory;
    if (o->numbers.spaced && o->alignment && number_alignment(o, placed)) goto out_of_memory;
    free(placed);
    placed = NULL;
    if (o->pass && restore_spans(o)) goto out_of_memory;
    if (o->placeholders.n && restore_placeholders(o)) goto out_of_memory;
    if (o->marks.len && restore_marks(o)) goto out_of_memory;
    return 0;
out_of_memory:
    free(placed);
    snprintf(o->error, sizeof o->error, "out of memory");
    return -1;
}

static int encode_source(const dmt_model *m, const char *text, size_t len, int32_t *ids, dmt_translate_output *o);

/* found (filled by a dmt_passthrough_* call that returned status) becomes o->pass
 * when status > 0; status, or -1 with o->error set when out of memory. */
static int adopt_pass(dmt_translate_output *o, dmt_passthrough *found, int status) {
    if (status > 0 && !(o->pass = malloc(sizeof *o->pass))) {
        dmt_passthrough_clear(found);
        status = -1;
    }
    if (status < 0) {
        snprintf(o->error, sizeof o->error, "out of memory");
        return -1;
    }
    if (status > 0) *o->pass = *found;
    return status;
}

/* One sentence's pieces into ids (language tokens made <unk>, no </s>), with the
 * text rules: nothing to translate, the final run of marks, format placeholders,
 * the pass-through, grouped numbers and the all-caps rule; the count, or -1 with
 * o->error set. */
static int tokenize_source(const dmt_model *m, const char *text, size_t len, int32_t *ids, dmt_translate_output *o) {
    o->all_caps = 0;
    memset(&o->marks, 0, sizeof o->marks);
    dmt_numbers_clear(&o->numbers);
    dmt_placeholders_clear(&o->placeholders);
    dmt_passthrough_clear(o->pass);
    free(o->pass);
    o->pass = NULL;
    dmt_passthrough verbatim; /* no letter or digit: nothing to translate, given back as it is */
    int nothing = adopt_pass(o, &verbatim, dmt_passthrough_verbatim(text, len, &verbatim));
    if (nothing) return nothing < 0 ? -1 : 0;
    char *unmarked = NULL; /* "What???" -> "What?" for the model; the run goes back in detokenize */
    if (dmt_marks_find(text, len, &o->marks)) {
        size_t n = 0;
        if (!(unmarked = dmt_marks_strip(text, len, &o->marks, &n))) {
            snprintf(o->error, sizeof o->error, "out of memory");
            return -1;
        }
        text = unmarked;
        len = n;
    }
    char *numbered = NULL; /* "Delete %d files?" -> "Delete 201 files?"; "%d" goes back in detokenize */
    int found = m->cfg.decoding.placeholders ? dmt_placeholders_find(text, len, &o->placeholders) : 0;
    if (found > 0) {
        size_t n = 0;
        if (!(numbered = dmt_placeholders_strip(&o->placeholders, &n))) found = -1;
        text = numbered;
        len = n;
    }
    if (found < 0) {
        free(unmarked);
        snprintf(o->error, sizeof o->error, "out of memory");
        return -1;
    }
    int k = encode_source(m, text, len, ids, o);
    free(numbered);
    free(unmarked);
    return k;
}

/* tokenize_source after the sentence's final run of marks: the pass-through, grouped
 * numbers, the all-caps rule, the pieces. */
static int encode_source(const dmt_model *m, const char *text, size_t len, int32_t *ids, dmt_translate_output *o) {
    char *cased = NULL;
    if (m->cfg.decoding.pass_through) {
        dmt_passthrough found;
        int spans = adopt_pass(o, &found, find_spans(m, text, len, &found));
        if (spans < 0) return -1;
        if (spans > 0) {
            text = o->pass->stripped;
            len = o->pass->stripped_len;
        }
    }
    char *plain = NULL; /* "1,500,000" -> "1500000" for the model; the number goes back in detokenize */
    int grouped = m->cfg.decoding.copy_numbers ? dmt_numbers_find(text, len, &o->numbers) : 0;
    if (grouped > 0) {
        size_t n = 0;
        if (!(plain = dmt_numbers_strip(text, len, &o->numbers, &n))) grouped = -1;
        text = plain;
        len = n;
    }
    if (grouped < 0) {
        snprintf(o->error, sizeof o->error, "out of memory");
        return -1;
    }
    if (m->cfg.decoding.all_caps_lower && dmt_casing_is_all_caps(text, len)) {
        size_t n = 0;
        if (!(cased = shouted_to_cased(m, text, len, &n))) {
            free(plain);
            snprintf(o->error, sizeof o->error, "out of memory");
            return -1;
        }
        text = cased;
        len = n;
        o->all_caps = 1;
    }
    int k = dmt_tokenizer_encode(m->tokenizer, text, len, ids, dmt_translate_max_source_tokens(m), o->error,
                                 sizeof o->error);
    int *text_word = k > 0 ? malloc((len + 1) * sizeof *text_word) : NULL;
    int model_words = text_word ? text_words(text, len, text_word) : 0;
    free(cased);
    free(plain);
    if (k > 0) {
        free(o->src_words);
        if (!text_word || !(o->src_words = malloc((size_t)k * sizeof *o->src_words))) {
            free(text_word);
            snprintf(o->error, sizeof o->error, "out of memory");
            return -1;
        }
        piece_words(m, ids, k, o->src_words);
        for (int t = 0; t < k; t++) /* a language piece in the text is part of a word, not nothing */
            if (o->src_words[t] < 0) o->src_words[t] = t > 0 ? o->src_words[t - 1] : 0;
        for (int t = 0; t < k; t++) /* the model's words as the text's */
            if (o->src_words[t] < model_words) o->src_words[t] = text_word[o->src_words[t]];
        free(text_word);
    }
    for (int t = 0; t < k; t++)
        if (is_language_id(m, ids[t])) ids[t] = m->cfg.unk_id;
    return k;
}

int dmt_translate_encode(const dmt_model *m, const char *text, size_t len, int32_t *ids, dmt_translate_output *o) {
    int k = tokenize_source(m, text, len, ids, o);
    if (k <= 0) return k;
    ids[k] = m->cfg.eos_id;
    return k + 1;
}

int dmt_translate_decode(const dmt_model *m, const dmt_nbest *nb, dmt_translate_output *o) {
    if (!nb) {
        if (empty_translation(o)) { snprintf(o->error, sizeof o->error, "out of memory"); return -1; }
        return 0;
    }
    if (detokenize(m, nb, o)) {
        dmt_translate_output_clear(o);
        if (!o->error[0]) snprintf(o->error, sizeof o->error, "detokenization failed");
        return -1;
    }
    return 0;
}

/* The caller's dmt_beam_control, seen through the beam search's sentence numbers
 * (only the sentences that tokenized cleanly reach the search): a finished sentence
 * is detokenized at once, so the caller may use out[i] from its finished hook. */
typedef struct {
    const dmt_beam_control *user;
    const dmt_model *m;
    const int *which;          /* search sentence -> input index */
    dmt_nbest *best;
    dmt_translate_output *out;
    char *delivered;           /* [search sentence] detokenized already */
} relay;

static void deliver(const dmt_model *m, dmt_nbest *nb, dmt_translate_output *o) {
    if (detokenize(m, nb, o)) {
        dmt_translate_output_clear(o);
        if (!o->error[0]) snprintf(o->error, sizeof o->error, "detokenization failed");
    }
}

static int relay_cancelled(void *arg, int j) {
    relay *r = arg;
    return r->user->cancelled(r->user->arg, r->which[j]);
}

static void relay_finished(void *arg, int j) {
    relay *r = arg;
    deliver(r->m, &r->best[j], &r->out[r->which[j]]);
    r->delivered[j] = 1;
    if (r->user->finished) r->user->finished(r->user->arg, r->which[j]);
}

int dmt_translate(const dmt_model *m, dmt_state *s, int n, const dmt_translate_input *in,
                  const dmt_beam_options *opt, dmt_translate_output *out, char *err, size_t errlen) {
    if (!m->tokenizer) { snprintf(err, errlen, "translate: the model was loaded without its tokenizer"); return -1; }
    if (dmt_beam_options_check(opt, err, errlen)) return -1;
    if (n <= 0) return n == 0 ? 0 : (snprintf(err, errlen, "translate: negative sentence count"), -1);
    for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
    const dmt_config *c = &m->cfg;
    int maxsrc = dmt_translate_max_source_tokens(m), rc = -1, nb = 0;
    relay r = {0};
    int32_t *ids = malloc((size_t)n * (maxsrc + 1) * sizeof *ids);
    int32_t **rows = malloc((size_t)n * sizeof *rows);
    int *len = malloc((size_t)n * sizeof *len), *forced = malloc((size_t)n * sizeof *forced);
    int *which = malloc((size_t)n * sizeof *which);
    dmt_nbest *best = calloc((size_t)n, sizeof *best);
    if (!ids || !rows || !len || !forced || !which || !best) { snprintf(err, errlen, "out of memory"); goto done; }
    for (int i = 0; i < n; i++) {
        dmt_translate_output *o = &out[i];
        int32_t *row = ids + (size_t)i * (maxsrc + 1);
        o->target_id = in[i].target_id;
        if (in[i].target_id < -1 || in[i].target_id >= c->vocab_size) {
            snprintf(o->error, sizeof o->error, "target language token %d is outside the vocabulary", in[i].target_id);
            continue;
        }
        int k = tokenize_source(m, in[i].text, in[i].len, row, o);
        if (k < 0) continue;
        o->src_tokens = k;
        if (k == 0) {
            if (empty_translation(o)) { snprintf(err, errlen, "out of memory"); goto done; }
            continue;
        }
        row[k] = c->eos_id;
        rows[nb] = row;
        len[nb] = k + 1;
        forced[nb] = in[i].target_id;
        which[nb++] = i;
    }
    dmt_beam_options o = *opt;
    dmt_beam_control relayed;
    r = (relay){opt->control, m, which, best, out, NULL};
    if (opt->control && nb > 0) {
        if (!(r.delivered = calloc((size_t)nb, 1))) { snprintf(err, errlen, "out of memory"); goto done; }
        relayed = (dmt_beam_control){opt->control->cancelled ? relay_cancelled : NULL, relay_finished, &r};
        o.control = &relayed;
    }
    if (nb > 0 && dmt_beam_search(s, nb, (const int32_t *const *)rows, len, forced, &o, best, err, errlen)) goto done;
    for (int j = 0; j < nb; j++) {
        if (r.delivered && r.delivered[j]) continue;
        dmt_translate_output *to = &out[which[j]];
        if (best[j].n == 0 && opt->control && opt->control->cancelled &&
            opt->control->cancelled(opt->control->arg, which[j]))
            snprintf(to->error, sizeof to->error, "cancelled");
        else
            deliver(m, &best[j], to);
    }
    rc = 0;
done:
    for (int j = 0; j < nb; j++) dmt_nbest_clear(&best[j]);
    if (rc)
        for (int i = 0; i < n; i++) dmt_translate_output_clear(&out[i]);
    free(ids); free(rows); free(len); free(forced); free(which); free(best); free(r.delivered);
    return rc;
}
