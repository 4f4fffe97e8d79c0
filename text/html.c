/* html.c — format "html" (html.h) over gumbo.
 *
 * Gumbo keeps, for every text node, where its source text lies in the input
 * (original_text). Putting translations back into the input at those places,
 * instead of printing the tree again, keeps everything else exactly as it was
 * sent — including what a browser would repair (unclosed tags), which a
 * reprinted tree would rewrite.
 */
#include "text/html.h"
#include "text/sentences.h"
#include "base/words.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gumbo.h>

/* An inline element inside a segment. Its tags are moved with the words they
 * enclose; a tag outside the segment (the element opened before it or closes after
 * it) stays where it is, and the element then reaches the segment's start or end. */
typedef struct {
    size_t open_at, open_len;   /* the start tag's bytes in the input; open_len 0: not in the segment */
    size_t close_at, close_len; /* the end tag's; close_len 0: not in the segment */
    size_t a, b;                /* the words it encloses: a byte range of the segment's words */
    int code;                   /* <code> never closed: translated inside a sentence, left alone as all of one */
    /* A literal (literal_tag) inside a sentence: the whole element, its text
     * included, is open_at/open_len, kept byte for byte; it encloses no words (a ==
     * b) and lands between the target words (place_tags, render_segment). */
    int literal;
    int space_before, space_after, before_punct; /* the decoded text around it */
} inline_tag;

typedef struct {
    int text;                  /* which input text */
    size_t src_start, src_len; /* the segment's source bytes in that text (text and inline tags) */
    char *lead, *trail;        /* whitespace around the words (from the decoded text) */
    char *words;               /* decoded text without that whitespace */
    size_t words_len;
    inline_tag *tags;
    int n_tags;
} segment;

/* A segment being collected: the decoded text of its text nodes, and its tags with
 * offsets into that text. */
typedef struct {
    int active;
    size_t start, end;         /* source bytes so far */
    char *raw;
    size_t raw_len, raw_cap;
    inline_tag *tags;          /* a, b: offsets into raw until the segment ends */
    int n_tags, cap_tags;
    int id;                    /* counts segments begun: an element's close tag finds its start tag by it */
} pending;

struct dmt_html {
    int n_texts;
    const char *const *texts;  /* borrowed */
    const size_t *lens;
    int *first, *count;
    segment *seg;
    int n_seg, cap_seg;
};

static int skipped_tag(GumboTag t) {
    switch (t) {
    case GUMBO_TAG_SCRIPT: case GUMBO_TAG_STYLE: case GUMBO_TAG_PRE: case GUMBO_TAG_TEXTAREA:
    case GUMBO_TAG_SVG: case GUMBO_TAG_MATH: case GUMBO_TAG_TEMPLATE: case GUMBO_TAG_NOSCRIPT:
        return 1;
    default:
        return 0;
    }
}

/* Inline elements whose text is a literal (an identifier, a command, a key, a
 * program's output, a variable): kept byte for byte while the sentence around them
 * is translated as one ("download the <code>deepmt</code> binary" had given "den
 * <code>tiefen</code> Binder herunterladen"; kbd, samp and var had split their
 * sentence in two). */
static int literal_tag(GumboTag t) {
    return t == GUMBO_TAG_CODE || t == GUMBO_TAG_KBD || t == GUMBO_TAG_SAMP || t == GUMBO_TAG_VAR;
}

/* translate="no", or "notranslate" among the classes. */
static int marked_no_translate(const GumboElement *e) {
    const GumboAttribute *a = gumbo_get_attribute(&e->attributes, "translate");
    if (a && !strcasecmp(a->value, "no")) return 1;
    a = gumbo_get_attribute(&e->attributes, "class");
    if (!a) return 0;
    for (const char *p = a->value; (p = strstr(p, "notranslate")); p += 11)
        if ((p == a->value || strchr(" \t\n\r\f", p[-1])) && (!p[11] || strchr(" \t\n\r\f", p[11]))) return 1;
    return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

static int has_letter(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return 1;
    }
    return 0;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Elements that stay inside a sentence: their tags move with the words they
 * enclose. Any other element (blocks, line breaks, images, the skipped ones) ends a
 * segment. */
static int inline_tag_of(GumboTag t) {
    switch (t) {
    case GUMBO_TAG_A: case GUMBO_TAG_ABBR: case GUMBO_TAG_B: case GUMBO_TAG_BDI: case GUMBO_TAG_BDO:
    case GUMBO_TAG_CITE: case GUMBO_TAG_DEL: case GUMBO_TAG_DFN: case GUMBO_TAG_EM: case GUMBO_TAG_FONT:
    case GUMBO_TAG_I: case GUMBO_TAG_INS: case GUMBO_TAG_LABEL: case GUMBO_TAG_MARK: case GUMBO_TAG_Q:
    case GUMBO_TAG_S: case GUMBO_TAG_SMALL: case GUMBO_TAG_SPAN: case GUMBO_TAG_STRIKE: case GUMBO_TAG_STRONG:
    case GUMBO_TAG_SUB: case GUMBO_TAG_SUP: case GUMBO_TAG_TIME: case GUMBO_TAG_TT: case GUMBO_TAG_U:
    case GUMBO_TAG_BIG: case GUMBO_TAG_CODE: case GUMBO_TAG_KBD: case GUMBO_TAG_SAMP: case GUMBO_TAG_VAR:
        return 1;
    default:
        return 0;
    }
}

static int pending_text(pending *p, const char *s, size_t n) {
    if (p->raw_len + n + 1 > p->raw_cap) {
        size_t cap = p->raw_cap ? p->raw_cap : 256;
        while (cap < p->raw_len + n + 1) cap *= 2;
        char *r = realloc(p->raw, cap);
        if (!r) return -1;
        p->raw = r;
        p->raw_cap = cap;
    }
    memcpy(p->raw + p->raw_len, s, n);
    p->raw_len += n;
    p->raw[p->raw_len] = 0;
    return 0;
}

/* Adds source bytes [at, at + n) to the pending segment (beginning it when idle).
 * 0; 1 when they lie before what it holds (the parser moved a node): the caller
 * ends the segment first. */
static int pending_span(pending *p, size_t at, size_t n) {
    if (!p->active) {
        p->active = 1;
        p->id++;
        p->start = p->end = at;
        p->raw_len = 0;
        p->n_tags = 0;
    } else if (at < p->end) {
        return 1;
    }
    p->end = at + n;
    return 0;
}

/* Inline elements a segment may hold: placing them costs their count squared, so
 * a segment with more ends at the next one (no tag is lost: it starts the next). */
#define MAX_SEGMENT_TAGS 256

static inline_tag *pending_tag(pending *p) {
    if (p->n_tags == p->cap_tags) {
        int cap = p->cap_tags ? 2 * p->cap_tags : 8;
        inline_tag *t = realloc(p->tags, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        p->tags = t;
        p->cap_tags = cap;
    }
    inline_tag *t = &p->tags[p->n_tags++];
    memset(t, 0, sizeof *t);
    return t;
}

/* Ends the pending segment: with a letter in it, it becomes segment n_seg (its text
 * decoded, whitespace runs read as one space, the tags' offsets moved into that
 * text); without, nothing happens (its bytes stay as they are). 0, or -1 out of
 * memory. */
static int pending_end(dmt_html *h, pending *p, int t) {
    if (!p->active) return 0;
    p->active = 0;
    const char *s = p->raw ? p->raw : "";
    size_t n = p->raw_len, a = 0, b = n;
    while (a < n && is_space(s[a])) a++;
    while (b > a && is_space(s[b - 1])) b--;
    if (!has_letter(s + a, b - a)) return 0;
    /* text that is all code (<code>x = 1</code> on its own) stays as it is */
    int all_code = 1;
    for (size_t i = a; i < b && all_code; i++) {
        if (is_space(s[i])) continue;
        int in_code = 0;
        for (int k = 0; k < p->n_tags && !in_code; k++)
            in_code = p->tags[k].code && p->tags[k].a <= i && (p->tags[k].b == (size_t)-1 || i < p->tags[k].b);
        all_code = in_code;
    }
    if (all_code) return 0;
    /* literals in the leading (trailing) whitespace: the lead ends (the trail starts)
     * at the first (last) of them; the whitespace on their other side is their own
     * spacing. A space between a literal and the punctuation after it is dropped, so
     * that the model reads "Run." for "Run <code>make</code>." */
    size_t lead_end = a, trail_from = b;
    unsigned char *drop = NULL;
    for (int k = 0; k < p->n_tags; k++) {
        inline_tag *x = &p->tags[k];
        if (!x->literal) continue;
        x->space_before = x->a > 0 && x->a <= n && is_space(s[x->a - 1]);
        x->space_after = x->a < n && is_space(s[x->a]);
        x->before_punct = x->a < n && s[x->a] && strchr(".,;:!?", s[x->a]) != NULL;
        if (x->a <= a && x->a < lead_end) lead_end = x->a;
        if (x->a >= b && x->a > trail_from) trail_from = x->a;
        if (x->before_punct && x->space_before && x->a > a && x->a < b) {
            if (!drop && !(drop = calloc(n + 1, 1))) return -1;
            drop[x->a - 1] = 1;
        }
    }
    if (h->n_seg == h->cap_seg) {
        int cap = h->cap_seg ? 2 * h->cap_seg : 64;
        segment *g = realloc(h->seg, (size_t)cap * sizeof *g);
        if (!g) return -1;
        h->seg = g;
        h->cap_seg = cap;
    }
    segment *g = &h->seg[h->n_seg++];
    memset(g, 0, sizeof *g);
    g->text = t;
    g->src_start = p->start;
    g->src_len = p->end - p->start;
    g->lead = dup_n(s, lead_end);
    g->trail = dup_n(s + trail_from, n - trail_from);
    /* runs of spaces and line breaks inside the text read as one space (as a
     * browser shows them); a line break would otherwise split a sentence */
    g->words = malloc(b - a + 1);
    size_t *at = malloc((n + 1) * sizeof *at); /* raw offset -> words offset */
    if (p->n_tags) g->tags = malloc((size_t)p->n_tags * sizeof *g->tags);
    if (!g->lead || !g->trail || !g->words || !at || (p->n_tags && !g->tags)) {
        free(at);
        free(drop);
        return -1;
    }
    size_t o = 0;
    for (size_t i = 0; i <= n; i++) {
        at[i] = o;
        if (i < a || i >= b || (drop && drop[i])) continue;
        if (!is_space(s[i])) g->words[o++] = s[i];
        else if (!is_space(s[i - 1])) g->words[o++] = ' ';
    }
    free(drop);
    g->words[o] = 0;
    g->words_len = o;
    for (int k = 0; k < p->n_tags; k++) {
        inline_tag x = p->tags[k];
        x.a = at[x.a < n ? x.a : n];
        x.b = at[x.b < n ? x.b : n];
        if (x.a > o) x.a = o;
        if (x.b > o) x.b = o;
        if (x.b < x.a) x.b = x.a;
        g->tags[g->n_tags++] = x;
    }
    free(at);
    return 0;
}

/* One entry of the walk: a node, and whether its children are done. */
typedef struct {
    GumboNode *node;
    int leaving;
    int tag;        /* leaving an inline element: its tag's index in the pending segment, or -1 */
    int seg_id;     /* ... begun in the pending segment with this id */
} step;

/* Walks the tree in document order without recursion (nesting depth is the
 * client's to choose), gathering text and inline elements into segments. 0, -1
 * out of memory, -2 too many segments. */
static int collect(dmt_html *h, int t, const char *base, GumboNode *root, int max_segments) {
    size_t cap = 256, n = 0;
    step *stack = malloc(cap * sizeof *stack);
    pending p = {0};
    if (!stack) return -1;
    stack[n++] = (step){root, 0, -1, 0};
    int rc = 0;
#define END_SEGMENT()                                                   \
    do {                                                                \
        if (pending_end(h, &p, t)) rc = -1;                             \
        else if (h->n_seg > max_segments) rc = -2;                      \
    } while (0)
    while (n && !rc) {
        step st = stack[--n];
        GumboNode *node = st.node;
        if (st.leaving == 2) { /* a block's end */
            END_SEGMENT();
            continue;
        }
        if (st.leaving) { /* an inline element's end */
            const GumboStringPiece *end = &node->v.element.original_end_tag;
            if (!end->data || !end->length) continue; /* implied: nothing to move */
            size_t at = (size_t)(end->data - base);
            if (p.active && st.seg_id == p.id && st.tag >= 0) { /* its start tag is in this segment */
                if (pending_span(&p, at, end->length)) { END_SEGMENT(); continue; }
                p.tags[st.tag].close_at = at;
                p.tags[st.tag].close_len = end->length;
                p.tags[st.tag].b = p.raw_len;
            } else if (p.active) { /* began before the segment: it reaches the segment's start */
                if (p.n_tags >= MAX_SEGMENT_TAGS || pending_span(&p, at, end->length)) { END_SEGMENT(); continue; }
                inline_tag *x = pending_tag(&p);
                if (!x) { rc = -1; break; }
                x->close_at = at;
                x->close_len = end->length;
                x->code = node->v.element.tag == GUMBO_TAG_CODE;
                x->a = 0;
                x->b = p.raw_len;
            }
            continue;
        }
        if (node->type == GUMBO_NODE_TEXT || node->type == GUMBO_NODE_WHITESPACE) {
            const GumboText *tx = &node->v.text;
            if (!tx->original_text.data || !tx->original_text.length) continue;
            if (!p.active && node->type == GUMBO_NODE_WHITESPACE) continue; /* never begins a segment */
            size_t at = (size_t)(tx->original_text.data - base);
            if (pending_span(&p, at, tx->original_text.length)) {
                END_SEGMENT();
                if (rc || pending_span(&p, at, tx->original_text.length)) continue;
            }
            if (pending_text(&p, tx->text, strlen(tx->text))) rc = -1;
            continue;
        }
        if (node->type != GUMBO_NODE_ELEMENT && node->type != GUMBO_NODE_DOCUMENT && node->type != GUMBO_NODE_TEMPLATE) {
            END_SEGMENT(); /* a comment or CDATA: kept where it is */
            continue;
        }
        const GumboVector *kids;
        step leave = {node, 1, -1, 0};
        int is_inline = 0;
        if (node->type == GUMBO_NODE_DOCUMENT) {
            kids = &node->v.document.children;
        } else {
            const GumboElement *e = &node->v.element;
            if (skipped_tag(e->tag) || marked_no_translate(e) || !inline_tag_of(e->tag)) {
                END_SEGMENT();
                if (rc || skipped_tag(e->tag) || marked_no_translate(e)) continue;
            } else if (literal_tag(e->tag) && e->original_tag.data && e->original_tag.length &&
                       e->original_end_tag.data && e->original_end_tag.length &&
                       e->original_end_tag.data > e->original_tag.data) {
                /* a literal, start tag to end tag: one piece of the segment, never
                 * translated (its children are part of it) */
                size_t at = (size_t)(e->original_tag.data - base),
                       whole = (size_t)(e->original_end_tag.data - e->original_tag.data) + e->original_end_tag.length;
                if (p.active && p.n_tags >= MAX_SEGMENT_TAGS) END_SEGMENT();
                if (rc) continue;
                if (pending_span(&p, at, whole)) {
                    END_SEGMENT();
                    if (rc || pending_span(&p, at, whole)) continue;
                }
                inline_tag *x = pending_tag(&p);
                if (!x) { rc = -1; break; }
                x->open_at = at;
                x->open_len = whole;
                x->literal = 1;
                x->a = x->b = p.raw_len;
                continue;
            } else {
                is_inline = 1;
                if (e->original_tag.data && e->original_tag.length) {
                    size_t at = (size_t)(e->original_tag.data - base);
                    if (p.active && p.n_tags >= MAX_SEGMENT_TAGS) END_SEGMENT();
                    if (rc) continue;
                    if (pending_span(&p, at, e->original_tag.length)) {
                        END_SEGMENT();
                        if (rc || pending_span(&p, at, e->original_tag.length)) continue;
                    }
                    inline_tag *x = pending_tag(&p);
                    if (!x) { rc = -1; break; }
                    x->open_at = at;
                    x->open_len = e->original_tag.length;
                    x->code = e->tag == GUMBO_TAG_CODE;
                    x->a = p.raw_len;
                    x->b = (size_t)-1; /* until its end tag: the segment's end */
                    leave.tag = p.n_tags - 1;
                    leave.seg_id = p.id;
                }
            }
            kids = &e->children;
        }
        if (n + kids->length + 1 > cap) {
            while (n + kids->length + 1 > cap) cap *= 2;
            step *s2 = realloc(stack, cap * sizeof *s2);
            if (!s2) {
                rc = -1;
                break;
            }
            stack = s2;
        }
        if (is_inline) stack[n++] = leave;
        else if (node->type == GUMBO_NODE_ELEMENT) stack[n++] = (step){node, 2, -1, 0}; /* a block's end ends a segment */
        for (unsigned k = kids->length; k-- > 0;) stack[n++] = (step){kids->data[k], 0, -1, 0}; /* first child on top */
    }
    if (!rc) END_SEGMENT();
#undef END_SEGMENT
    free(stack);
    free(p.raw);
    free(p.tags);
    return rc;
}

static int by_source(const void *a, const void *b) {
    const segment *x = a, *y = b;
    if (x->text != y->text) return x->text < y->text ? -1 : 1;
    return x->src_start < y->src_start ? -1 : x->src_start > y->src_start;
}

dmt_html *dmt_html_prepare(const char *const *texts, const size_t *lens, int n, int max_segments, char *err,
                           size_t errlen) {
    dmt_html *h = calloc(1, sizeof *h);
    if (!h) goto oom;
    h->n_texts = n;
    h->texts = texts;
    h->lens = lens;
    h->first = calloc((size_t)n + 1, sizeof *h->first);
    h->count = calloc((size_t)n + 1, sizeof *h->count);
    if (!h->first || !h->count) goto oom;
    for (int t = 0; t < n; t++) {
        h->first[t] = h->n_seg;
        GumboOptions opt = kGumboDefaultOptions;
        opt.max_errors = 0; /* errors are repaired anyway; their list is not wanted */
        GumboOutput *out = gumbo_parse_with_options(&opt, texts[t], lens[t]);
        if (!out) goto oom;
        int rc = collect(h, t, texts[t], out->document, max_segments);
        gumbo_destroy_output(&opt, out);
        if (rc == -1) goto oom;
        if (rc == -2) {
            snprintf(err, errlen, "too many text runs in the HTML: more than %d", max_segments);
            dmt_html_free(h);
            return NULL;
        }
        h->count[t] = h->n_seg - h->first[t];
        /* tree order is source order except where the parser moved nodes (text
         * in a table goes before it): splicing needs source order */
        if (h->count[t] > 1) qsort(h->seg + h->first[t], (size_t)h->count[t], sizeof *h->seg, by_source);
    }
    return h;
oom:
    snprintf(err, errlen, "out of memory");
    dmt_html_free(h);
    return NULL;
}

int dmt_html_segment_count(const dmt_html *h) { return h->n_seg; }

const char *dmt_html_segment(const dmt_html *h, int i, size_t *len) {
    *len = h->seg[i].words_len;
    return h->seg[i].words;
}

void dmt_html_range(const dmt_html *h, int t, int *first, int *count) {
    *first = h->first[t];
    *count = h->count[t];
}

static size_t escaped_len(const char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += s[i] == '&' ? 5 : s[i] == '<' || s[i] == '>' ? 4 : 1;
    return o;
}

static char *put_escaped(char *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *e = s[i] == '&' ? "&amp;" : s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;" : NULL;
        if (e) {
            size_t l = strlen(e);
            memcpy(o, e, l);
            o += l;
        } else {
            *o++ = s[i];
        }
    }
    return o;
}

static int is_closing_punct(char c) { return c && strchr(".,;:!?)]}\"'", c) != NULL; }

/* Where a tag lands in the translation: words [s, e) (s == e: between words). */
typedef struct { int s, e; } span;

static int contains(const inline_tag *x, const inline_tag *y) {
    if (x->literal) return 0;
    if (y->literal) /* by the source bytes: a zero-width literal at an element's edge may be outside it */
        return (!x->open_len || x->open_at < y->open_at) && (!x->close_len || y->open_at < x->close_at);
    return x->a <= y->a && y->b <= x->b;
}

/* The target words of segment g's tags, in tmp order of x->a ascending, x->b
 * descending (the order of the source tree: an element before what it encloses).
 * ns source words (sst/sen), nt target words. */
static void place_tags(const segment *g, const int *order, span *sp, const size_t *sst, const size_t *sen, int ns,
                       int nt, const int *pairs, int n_pairs) {
    for (int q = 0; q < g->n_tags; q++) {
        const inline_tag *x = &g->tags[order[q]];
        if (x->literal) { /* after the target word aligned to the source word before it */
            int before = 0, at = -1;
            for (int w = 0; w < ns; w++) before += sst[w] < x->a;
            for (int k = 0; before > 0 && k < n_pairs; k++)
                if (pairs[2 * k] == before - 1 && pairs[2 * k + 1] >= 0 && pairs[2 * k + 1] < nt &&
                    pairs[2 * k + 1] + 1 > at)
                    at = pairs[2 * k + 1] + 1;
            if (at < 0) at = before * nt / (ns ? ns : 1); /* no alignment: where it sits in proportion */
            span v = {at, at};
            for (int r = 0; r < q; r++) /* inside the elements that enclose it in the source */
                if (contains(&g->tags[order[r]], x)) {
                    if (v.s < sp[r].s) v.s = v.e = sp[r].s;
                    if (v.s > sp[r].e) v.s = v.e = sp[r].e;
                }
            sp[q] = v;
            continue;
        }
        int w0 = ns, w1 = -1; /* the source words it encloses */
        for (int w = 0; w < ns; w++)
            if (sst[w] < x->b && sen[w] > x->a) {
                if (w < w0) w0 = w;
                w1 = w;
            }
        span v = {nt, -1};
        for (int k = 0; k < n_pairs; k++)
            if (pairs[2 * k] >= w0 && pairs[2 * k] <= w1 && pairs[2 * k + 1] >= 0 && pairs[2 * k + 1] < nt) {
                if (pairs[2 * k + 1] < v.s) v.s = pairs[2 * k + 1];
                if (pairs[2 * k + 1] + 1 > v.e) v.e = pairs[2 * k + 1] + 1;
            }
        if (v.e < 0) { /* no alignment: where it sits in proportion */
            int before = 0;
            for (int w = 0; w < ns; w++) before += sst[w] < x->a;
            if (w1 >= w0) v = (span){w0 * nt / (ns ? ns : 1), (w1 + 1) * nt / (ns ? ns : 1)};
            else v.s = v.e = before * nt / (ns ? ns : 1);
            if (w1 >= w0 && v.e <= v.s && nt > 0) v.e = v.s < nt ? v.s + 1 : nt, v.s = v.e - 1;
        }
        if (!x->open_len) v.s = 0;   /* opened before the segment: from its start */
        if (!x->close_len) v.e = nt; /* closes after it: to its end */
        /* inside every element that encloses it in the source (placed already) */
        for (int r = 0; r < q; r++) {
            const inline_tag *y = &g->tags[order[r]];
            if (!contains(y, x)) continue;
            if (v.s < sp[r].s) v.s = sp[r].s;
            if (v.e > sp[r].e) v.e = sp[r].e;
            if (v.e < v.s) v.s = v.e = v.s > sp[r].e ? sp[r].e : sp[r].s;
        }
        /* no crossing any other: shrink until each pair is nested or apart (spans
         * only shrink, so this ends) */
        for (int changed = 1; changed;) {
            changed = 0;
            for (int r = 0; r < q; r++) {
                span o = sp[r];
                if (o.s == o.e || v.s == v.e) continue;
                if (v.s < o.s && o.s < v.e && v.e < o.e) v.e = o.s, changed = 1;
                else if (o.s < v.s && v.s < o.e && o.e < v.e) v.s = o.e, changed = 1;
            }
        }
        sp[q] = v;
    }
}

/* Writes literal q (its element byte for byte), a space before and after it where
 * asked, and marks it written. */
static char *put_literal(const char *src, const segment *g, const int *order, span *sp, int q, int before, int after,
                         char *o) {
    const inline_tag *x = &g->tags[order[q]];
    if (before) *o++ = ' ';
    memcpy(o, src + x->open_at, x->open_len);
    o += x->open_len;
    if (after) *o++ = ' ';
    sp[q].s = sp[q].e = -2;
    return o;
}

/* Whether literal q at b is written with the words (not by its enclosing element:
 * that one is empty and writes it, or opens at b and writes it after its start tag;
 * one that closes at b wrote it before its end tag). */
static int literal_free(const span *sp, const int *parent, int q, int b) {
    int r = parent[q];
    return r < 0 || !((sp[r].s == sp[r].e && sp[r].s >= 0) || (sp[r].s == b && sp[r].e > b));
}

/* The translation tr of segment g with g's tags put around the words aligned to
 * the words they enclosed, and its literals between them: written to o (room:
 * escaped tr + every tag's bytes + 2 a tag). parent: scratch, a tag each. */
static char *render_segment(const dmt_html *h, const segment *g, const char *tr, size_t tr_len, const int *pairs,
                            int n_pairs, char *o, int *order, span *sp, int *parent, size_t *buf) {
    const char *src = h->texts[g->text];
    if (!g->n_tags) return put_escaped(o, tr, tr_len);
    int ns = dmt_word_bounds(g->words, g->words_len, NULL, NULL), nt = dmt_word_bounds(tr, tr_len, NULL, NULL);
    size_t *sst = buf, *sen = sst + ns, *tst = sen + ns, *ten = tst + nt;
    dmt_word_bounds(g->words, g->words_len, sst, sen);
    dmt_word_bounds(tr, tr_len, tst, ten);
    for (int q = 0; q < g->n_tags; q++) order[q] = q;
    for (int q = 1; q < g->n_tags; q++) { /* insertion sort into tree order: a up, then b down */
        int x = order[q], r = q;
        while (r > 0 && (g->tags[order[r - 1]].a > g->tags[x].a ||
                         (g->tags[order[r - 1]].a == g->tags[x].a && g->tags[order[r - 1]].b < g->tags[x].b))) {
            order[r] = order[r - 1];
            r--;
        }
        order[r] = x;
    }
    place_tags(g, order, sp, sst, sen, ns, nt, pairs, n_pairs);
    for (int q = 0; q < g->n_tags; q++) { /* a literal's innermost enclosing element (in order: the last) */
        parent[q] = -1;
        for (int r = 0; r < q && g->tags[order[q]].literal; r++)
            if (contains(&g->tags[order[r]], &g->tags[order[q]])) parent[q] = r;
    }
    size_t pos = 0, punct = 0; /* in tr: written up to pos; the last word's closing punctuation from punct */
    for (int b = 0; b <= nt; b++) {
        /* closes after word b - 1: the innermost (latest start, then latest placed) first */
        for (int done = 0; !done;) {
            int best = -1;
            for (int q = 0; q < g->n_tags; q++) {
                if (-sp[q].e - 1 != b || sp[q].s < 0) continue; /* opened, ends here */
                if (best < 0 || sp[q].s > sp[best].s || (sp[q].s == sp[best].s && q > best)) best = q;
            }
            if (best < 0) { done = 1; continue; }
            for (int q = 0; q < g->n_tags; q++) /* the literals it holds at its end, before its end tag */
                if (g->tags[order[q]].literal && parent[q] == best && sp[q].s == b)
                    o = put_literal(h->texts[g->text], g, order, sp, q, g->tags[order[q]].space_before, 0, o);
            const inline_tag *x = &g->tags[order[best]];
            if (punct < pos && x->b > x->a && is_closing_punct(g->words[x->b - 1])) { /* it enclosed its punctuation */
                o = put_escaped(o, tr + punct, pos - punct);
                punct = pos;
            }
            memcpy(o, src + x->close_at, x->close_len);
            o += x->close_len;
            sp[best].s = -1; /* emitted */
        }
        /* literals glued to the word before, or to the punctuation after it: before that punctuation */
        for (int q = 0; b > 0 && q < g->n_tags; q++) {
            const inline_tag *x = &g->tags[order[q]];
            if (x->literal && sp[q].s == b && (!x->space_before || x->before_punct) && literal_free(sp, parent, q, b))
                o = put_literal(src, g, order, sp, q, x->space_before, 0, o);
        }
        if (punct < pos) o = put_escaped(o, tr + punct, pos - punct); /* after the tags that ended before it */
        punct = pos;
        size_t next = b < nt ? tst[b] : tr_len;
        o = put_escaped(o, tr + pos, next - pos); /* the space between the words */
        pos = next;
        for (int q = 0; q < g->n_tags; q++) { /* the other literals: before word b, with their spacing */
            const inline_tag *x = &g->tags[order[q]];
            if (x->literal && sp[q].s == b && literal_free(sp, parent, q, b))
                o = put_literal(src, g, order, sp, q, b == nt && x->space_before, b < nt && x->space_after, o);
        }
        /* empty ones here, whole (with the literals they hold); then opens before word b: the outermost first */
        for (int q = 0; q < g->n_tags; q++) {
            if (sp[q].s != b || sp[q].e != b || g->tags[order[q]].literal) continue;
            const inline_tag *x = &g->tags[order[q]];
            memcpy(o, src + x->open_at, x->open_len);
            o += x->open_len;
            int held = 0, space_after = 0;
            for (int l = 0; l < g->n_tags; l++)
                if (g->tags[order[l]].literal && parent[l] == q && sp[l].s == b) {
                    o = put_literal(src, g, order, sp, l, held && g->tags[order[l]].space_before, 0, o);
                    held = 1;
                    space_after = g->tags[order[l]].space_after;
                }
            memcpy(o, src + x->close_at, x->close_len);
            o += x->close_len;
            if (held && space_after && b < nt) *o++ = ' '; /* "<b><code>x</code></b> word" */
        }
        for (int done = 0; !done;) { /* the widest first (equal: the earlier in the source) */
            int best = -1;
            for (int q = 0; q < g->n_tags; q++) {
                if (sp[q].s != b || sp[q].e == b || sp[q].e < 0) continue;
                if (best < 0 || sp[q].e > sp[best].e) best = q;
            }
            if (best < 0) { done = 1; continue; }
            const inline_tag *x = &g->tags[order[best]];
            memcpy(o, src + x->open_at, x->open_len);
            o += x->open_len;
            int opened_at_e = sp[best].e;
            sp[best].e = -sp[best].e - 1; /* opened: kept as -(e + 1) until its close */
            for (int q = 0; q < g->n_tags; q++) /* the literals it holds at its start, after its start tag */
                if (g->tags[order[q]].literal && parent[q] == best && sp[q].s == b)
                    o = put_literal(src, g, order, sp, q, 0, b < nt && opened_at_e > b && g->tags[order[q]].space_after, o);
        }
        if (b < nt) { /* the word; its closing punctuation waits for the tags that end here */
            size_t cut = ten[b];
            while (cut > tst[b] + 1 && is_closing_punct(tr[cut - 1])) cut--;
            if (cut == tst[b] + 1 && is_closing_punct(tr[tst[b]])) cut = ten[b]; /* all punctuation: the word itself */
            o = put_escaped(o, tr + tst[b], cut - tst[b]);
            punct = cut;
            pos = ten[b];
        }
    }
    for (int q = 0; q < g->n_tags; q++) /* none is left: a literal is never lost */
        if (g->tags[order[q]].literal && sp[q].s != -2) o = put_literal(src, g, order, sp, q, 1, 0, o);
    return put_escaped(o, tr + pos, tr_len - pos);
}

char *dmt_html_render_aligned(const dmt_html *h, int t, const char *const *tr, const size_t *tr_lens,
                              const int *const *pairs, const int *n_pairs, size_t *len) {
    const char *src = h->texts[t];
    size_t cap = h->lens[t] + 1, words = 0;
    int f = h->first[t], c = h->count[t], most = 0;
    for (int i = f; i < f + c; i++) {
        const segment *g = &h->seg[i];
        cap += escaped_len(g->lead, strlen(g->lead)) + escaped_len(tr[i], tr_lens[i]) +
               escaped_len(g->trail, strlen(g->trail));
        for (int k = 0; k < g->n_tags; k++) cap += g->tags[k].open_len + g->tags[k].close_len + 2;
        size_t w = g->words_len + tr_lens[i] + 2;
        if (w > words) words = w;
        if (g->n_tags > most) most = g->n_tags;
    }
    char *buf = malloc(cap), *o = buf;
    int *order = malloc(((size_t)most + 1) * sizeof *order), *parent = malloc(((size_t)most + 1) * sizeof *parent);
    span *sp = malloc(((size_t)most + 1) * sizeof *sp);
    size_t *wb = malloc((2 * words + 2) * sizeof *wb); /* word starts and ends of both sides */
    if (!buf || !order || !parent || !sp || !wb) {
        free(buf); free(order); free(parent); free(sp); free(wb);
        return NULL;
    }
    size_t pos = 0;
    for (int i = f; i < f + c; i++) {
        const segment *g = &h->seg[i];
        if (g->src_start < pos) continue; /* cannot happen with source order; never write twice */
        memcpy(o, src + pos, g->src_start - pos);
        o += g->src_start - pos;
        o = put_escaped(o, g->lead, strlen(g->lead));
        o = render_segment(h, g, tr[i], tr_lens[i], pairs ? pairs[i] : NULL, n_pairs ? n_pairs[i] : 0, o, order, sp,
                           parent, wb);
        o = put_escaped(o, g->trail, strlen(g->trail));
        pos = g->src_start + g->src_len;
    }
    memcpy(o, src + pos, h->lens[t] - pos);
    o += h->lens[t] - pos;
    *o = 0;
    *len = (size_t)(o - buf);
    free(order);
    free(parent);
    free(sp);
    free(wb);
    return buf;
}

char *dmt_html_render(const dmt_html *h, int t, const char *const *tr, const size_t *tr_lens, size_t *len) {
    return dmt_html_render_aligned(h, t, tr, tr_lens, NULL, NULL, len);
}

void dmt_html_free(dmt_html *h) {
    if (!h) return;
    for (int i = 0; i < h->n_seg; i++) {
        free(h->seg[i].lead);
        free(h->seg[i].trail);
        free(h->seg[i].words);
        free(h->seg[i].tags);
    }
    free(h->seg);
    free(h->first);
    free(h->count);
    free(h);
}
