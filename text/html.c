/* html.c — format "html" (html.h) over gumbo.
 *
 * Gumbo keeps, for every text node, where its source text lies in the input
 * (original_text). Putting translations back into the input at those places,
 * instead of printing the tree again, keeps everything else exactly as it was
 * sent — including what a browser would repair (unclosed tags), which a
 * reprinted tree would rewrite.
 */
#include "text/html.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gumbo.h>

typedef struct {
    int text;                  /* which input text */
    size_t src_start, src_len; /* the text node's source bytes in that text */
    char *lead, *trail;        /* whitespace around the words (from the decoded text) */
    char *words;               /* decoded text without that whitespace */
    size_t words_len;
} segment;

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
    case GUMBO_TAG_SCRIPT: case GUMBO_TAG_STYLE: case GUMBO_TAG_CODE: case GUMBO_TAG_PRE:
    case GUMBO_TAG_TEXTAREA: case GUMBO_TAG_KBD: case GUMBO_TAG_SAMP: case GUMBO_TAG_VAR:
    case GUMBO_TAG_SVG: case GUMBO_TAG_MATH: case GUMBO_TAG_TEMPLATE: case GUMBO_TAG_NOSCRIPT:
        return 1;
    default:
        return 0;
    }
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

/* A text node worth translating becomes a segment. 0, or -1 out of memory. */
static int add_segment(dmt_html *h, int t, const char *base, const GumboText *tx) {
    const char *s = tx->text;
    size_t n = strlen(s), a = 0, b = n;
    while (a < n && is_space(s[a])) a++;
    while (b > a && is_space(s[b - 1])) b--;
    if (!has_letter(s + a, b - a) || !tx->original_text.data || tx->original_text.length == 0) return 0;
    if (h->n_seg == h->cap_seg) {
        int cap = h->cap_seg ? 2 * h->cap_seg : 64;
        segment *g = realloc(h->seg, (size_t)cap * sizeof *g);
        if (!g) return -1;
        h->seg = g;
        h->cap_seg = cap;
    }
    segment *g = &h->seg[h->n_seg];
    memset(g, 0, sizeof *g);
    g->text = t;
    g->src_start = (size_t)(tx->original_text.data - base);
    g->src_len = tx->original_text.length;
    g->lead = dup_n(s, a);
    g->trail = dup_n(s + b, n - b);
    /* runs of spaces and line breaks inside the text read as one space (as a
     * browser shows them); a line break would otherwise split a sentence */
    g->words = malloc(b - a + 1);
    if (g->words) {
        size_t o = 0;
        for (size_t i = a; i < b; i++)
            if (!is_space(s[i])) g->words[o++] = s[i];
            else if (!is_space(s[i - 1])) g->words[o++] = ' ';
        g->words[o] = 0;
        g->words_len = o;
    }
    h->n_seg++;
    if (!g->lead || !g->trail || !g->words) return -1;
    return 0;
}

/* Walks the tree in document order without recursion (nesting depth is the
 * client's to choose). 0, -1 out of memory, -2 too many segments. */
static int collect(dmt_html *h, int t, const char *base, GumboNode *root, int max_segments) {
    size_t cap = 256, n = 0;
    GumboNode **stack = malloc(cap * sizeof *stack);
    if (!stack) return -1;
    stack[n++] = root;
    int rc = 0;
    while (n && !rc) {
        GumboNode *node = stack[--n];
        if (node->type == GUMBO_NODE_TEXT) {
            rc = add_segment(h, t, base, &node->v.text);
            if (!rc && h->n_seg > max_segments) rc = -2;
            continue;
        }
        if (node->type != GUMBO_NODE_ELEMENT && node->type != GUMBO_NODE_DOCUMENT && node->type != GUMBO_NODE_TEMPLATE)
            continue;
        const GumboVector *kids;
        if (node->type == GUMBO_NODE_DOCUMENT) {
            kids = &node->v.document.children;
        } else {
            if (skipped_tag(node->v.element.tag) || marked_no_translate(&node->v.element)) continue;
            kids = &node->v.element.children;
        }
        if (n + kids->length > cap) {
            while (n + kids->length > cap) cap *= 2;
            GumboNode **s2 = realloc(stack, cap * sizeof *s2);
            if (!s2) {
                rc = -1;
                break;
            }
            stack = s2;
        }
        for (unsigned k = kids->length; k-- > 0;) stack[n++] = kids->data[k]; /* first child on top */
    }
    free(stack);
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

char *dmt_html_render(const dmt_html *h, int t, const char *const *tr, const size_t *tr_lens, size_t *len) {
    const char *src = h->texts[t];
    size_t cap = h->lens[t] + 1;
    int f = h->first[t], c = h->count[t];
    for (int i = f; i < f + c; i++) {
        const segment *g = &h->seg[i];
        cap += escaped_len(g->lead, strlen(g->lead)) + escaped_len(tr[i], tr_lens[i]) +
               escaped_len(g->trail, strlen(g->trail));
    }
    char *buf = malloc(cap), *o = buf;
    if (!buf) return NULL;
    size_t pos = 0;
    for (int i = f; i < f + c; i++) {
        const segment *g = &h->seg[i];
        if (g->src_start < pos) continue; /* cannot happen with source order; never write twice */
        memcpy(o, src + pos, g->src_start - pos);
        o += g->src_start - pos;
        o = put_escaped(o, g->lead, strlen(g->lead));
        o = put_escaped(o, tr[i], tr_lens[i]);
        o = put_escaped(o, g->trail, strlen(g->trail));
        pos = g->src_start + g->src_len;
    }
    memcpy(o, src + pos, h->lens[t] - pos);
    o += h->lens[t] - pos;
    *o = 0;
    *len = (size_t)(o - buf);
    return buf;
}

void dmt_html_free(dmt_html *h) {
    if (!h) return;
    for (int i = 0; i < h->n_seg; i++) {
        free(h->seg[i].lead);
        free(h->seg[i].trail);
        free(h->seg[i].words);
    }
    free(h->seg);
    free(h->first);
    free(h->count);
    free(h);
}
