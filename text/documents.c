/* documents.c — text out of .txt/.html/.srt/.docx/.odt files and back in
 * (documents.h). Archives go through libzip, their XML through libxml2.
 *
 * Archive limits, checked before anything is inflated and again while reading
 * (declared sizes are not trusted): at most DOC_MAX_ENTRIES entries, declared
 * sizes summing to at most DOC_MAX_UNPACKED, the XML part at most DOC_MAX_XML
 * bytes and, past 1 MiB, at most DOC_MAX_RATIO times its compressed size; all the
 * parts read together at most DOC_MAX_RATIO times the upload (never less than
 * DOC_MIN_XML_BUDGET) and DOC_MAX_XML. A zip
 * bomb or a broken archive is refused with a message, never inflated.
 */
#include "text/documents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <zip.h>

#include "base/utf8.h"
#include "base/words.h"
#include "text/sentences.h"

#define DOC_MAX_ENTRIES 4096
#define DOC_MAX_UNPACKED (256u << 20)
#define DOC_MAX_XML (8u << 20) /* a DOM is several times its XML: this bounds a request */
#define DOC_MAX_RATIO 100
#define DOC_MIN_XML_BUDGET (1u << 20) /* a whole document's XML may always reach 1 MiB */
#define DOC_MAX_TEXTS 100000
#define DOC_MAX_PARTS 32           /* XML parts translated in one archive */

#define NS_W "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
#define NS_TEXT "urn:oasis:names:tc:opendocument:xmlns:text:1.0"

const char *const dmt_doc_extensions[] = {".txt", ".html", ".htm", ".srt", ".docx", ".odt", NULL};

typedef struct {
    char *text;
    size_t len;
    xmlNodePtr *nodes; /* docx/odt: the XML text nodes the paragraph's text came from */
    size_t *node_at;   /* where each one's text starts in text */
    int n_nodes, cap_nodes;
    char *head;        /* srt: the number and timing lines, line ends included */
    /* srt with markup (cut_marks): the text as it was, and where each of the n_nodes
     * stretches of words between marks starts in it (node_at: in text) */
    char *full;
    size_t full_len;
    size_t *src_at;
} piece;

struct dmt_doc {
    dmt_doc_kind kind;
    const char *data;  /* the file as sent (borrowed) */
    size_t len;
    piece *p;
    int n, cap;
    char *eol;         /* srt: "\n" or "\r\n" */
    /* docx/odt: the XML parts translated, first the main one */
    xmlDocPtr xml[DOC_MAX_PARTS];
    char part[DOC_MAX_PARTS][64];
    int n_parts;
};

int dmt_doc_kind_of(const char *name) {
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (!dot) return -1;
    static const struct { const char *ext; dmt_doc_kind k; } kinds[] = {
        {".txt", DMT_DOC_TXT}, {".html", DMT_DOC_HTML}, {".htm", DMT_DOC_HTML},
        {".srt", DMT_DOC_SRT}, {".docx", DMT_DOC_DOCX}, {".odt", DMT_DOC_ODT},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcasecmp(dot, kinds[i].ext)) return (int)kinds[i].k;
    return -1;
}

static piece *add_piece(dmt_doc *d) {
    if (d->n >= DOC_MAX_TEXTS) return NULL;
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        piece *p = realloc(d->p, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        d->p = p;
        d->cap = cap;
    }
    piece *p = &d->p[d->n++];
    memset(p, 0, sizeof *p);
    return p;
}

static int has_letter(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return 1;
    }
    return 0;
}

static int check_text(const char *data, size_t len, char *err, size_t errlen) {
    size_t bad;
    if (!dmt_utf8_validate(data, len, &bad)) {
        snprintf(err, errlen, "the file is not UTF-8 text (invalid byte at %zu)", bad);
        return -1;
    }
    if (memchr(data, 0, len)) {
        snprintf(err, errlen, "the file contains NUL bytes: not a text file");
        return -1;
    }
    return 0;
}

/* ---- .srt ---- */

static int assign_words(const piece *p, const char *tr, size_t tl, const int *pairs, int n_pairs, int **node_of);

/* The bytes [*from, *to) of translation tr (tl bytes, nt words starting at ts) that
 * assign_words gave node k, spaces after a word staying with it; *w, the first word
 * not yet given, moves past them. 0 when k has none ([0, 0)). */
static int node_bytes(const int *node_of, const size_t *ts, int nt, size_t tl, int k, int *w, size_t *from,
                      size_t *to) {
    *from = *to = 0;
    if (*w >= nt || node_of[*w] != k) return 0;
    *from = *w == 0 ? 0 : ts[*w];
    while (*w < nt && node_of[*w] == k) ++*w;
    *to = *w < nt ? ts[*w] : tl;
    return 1;
}

#define SRT_MAX_MARK 256 /* bytes in one tag or override block */

/* The length of the subtitle markup at s: a tag (<i>, </i>, <font color="#ff0">,
 * <c.yellow>) or an override block ({\an8}, {\i1}); 0 where s starts none ("a < b",
 * "{x}", a '<' never closed within SRT_MAX_MARK bytes). */
static size_t srt_mark(const char *s, const char *end) {
    const char *c = s + 1;
    char close;
    if (*s == '<') {
        if (c < end && *c == '/') c++;
        if (c >= end || (*c | 0x20) < 'a' || (*c | 0x20) > 'z') return 0;
        close = '>';
    } else if (*s == '{' && c < end && *c == '\\') {
        close = '}';
    } else {
        return 0;
    }
    for (; c < end && c - s < SRT_MAX_MARK; c++) {
        if (*c == close) return (size_t)(c - s) + 1;
        if (*c == *s) return 0;
    }
    return 0;
}

/* Cuts the markup out of subtitle p's text, so that the model sees the words alone
 * ("<i>I am looking for my keys.</i>" had come out as "économi écouliI cherche mes
 * clés."): p->text keeps the words, p->full the text as it was, and each of the
 * p->n_nodes stretches of words between marks starts at p->node_at[k] in the one
 * and p->src_at[k] in the other. write_subtitle puts every mark back, before the
 * words aligned to the stretch that followed it, as a .docx run gets its words.
 * Text without markup is left as it is. 0, or -1 (out of memory). */
static int cut_marks(piece *p) {
    const char *s = p->text, *end = s + p->len;
    int segs = 0, marks = 0, in_words = 0;
    for (const char *c = s; c < end;) {
        size_t m = srt_mark(c, end);
        if (m) {
            c += m, marks++, in_words = 0;
        } else {
            segs += !in_words, in_words = 1, c++;
        }
    }
    if (!marks) return 0;
    char *words = malloc(p->len + 1);
    size_t *node_at = malloc(((size_t)segs + 1) * sizeof *node_at), *src_at = malloc(((size_t)segs + 1) * sizeof *src_at);
    if (!words || !node_at || !src_at) {
        free(words), free(node_at), free(src_at);
        return -1;
    }
    size_t wl = 0;
    int k = 0;
    in_words = 0;
    for (const char *c = s; c < end;) {
        size_t m = srt_mark(c, end);
        if (m) {
            c += m, in_words = 0;
            continue;
        }
        if (!in_words) node_at[k] = wl, src_at[k] = (size_t)(c - s), k++, in_words = 1;
        words[wl++] = *c++;
    }
    words[wl] = 0;
    node_at[segs] = wl, src_at[segs] = p->len;
    p->full = p->text, p->full_len = p->len;
    p->text = words, p->len = wl;
    p->node_at = node_at, p->src_at = src_at, p->n_nodes = segs;
    return 0;
}

/* The bytes of the sentence punctuation (.,;:!? or an ellipsis) that ends s[from..to), or 0. */
static size_t end_punct(const char *s, size_t from, size_t to) {
    if (to - from >= 3 && !memcmp(s + to - 3, "\xE2\x80\xA6", 3)) return 3;
    return to > from && s[to - 1] && strchr(".,;:!?", s[to - 1]) ? 1 : 0;
}

/* Whether s[0..n) starts with sentence punctuation (.,;:!? or an ellipsis). */
static int starts_punct(const char *s, size_t n) {
    return (n >= 1 && s[0] && strchr(".,;:!?", s[0])) || (n >= 3 && !memcmp(s, "\xE2\x80\xA6", 3));
}

/* The subtitle's translation with its marks back (cut_marks): mark k before the
 * words aligned to stretch k (assign_words; without an alignment all words go to the
 * first stretch), the last mark after them all. A word's trailing spaces go after a
 * closing tag that follows it ("<i>Y</i> Z", not "<i>Y </i>Z"), and so does its
 * closing punctuation where the source had punctuation after that tag
 * ("the <b>station</b>?" -> "la <b>gare</b> ?", not "la <b>gare ?</b>": a word is
 * what whitespace delimits, so "station?" was one word, aligned as one). */
static void write_subtitle(const piece *p, const char *tr, size_t tl, const int *pairs, int n_pairs, FILE *f) {
    int nn = p->n_nodes;
    if (!p->full || nn == 0) { /* no markup, or nothing but markup */
        if (p->full) fwrite(p->full, 1, p->full_len, f);
        fwrite(tr, 1, tl, f);
        return;
    }
    int *node_of = NULL, nt = nn >= 2 && pairs && n_pairs > 0 ? assign_words(p, tr, tl, pairs, n_pairs, &node_of) : -1;
    size_t *ts = nt > 0 ? malloc((size_t)nt * sizeof *ts) : NULL;
    if (ts) dmt_word_bounds(tr, tl, ts, NULL);
    else nt = -1;
    size_t spaces_at = 0, spaces = 0; /* the last words' trailing spaces, not yet written */
    for (int k = 0, w = 0; k <= nn; k++) {
        size_t mark_at = k ? p->src_at[k - 1] + (p->node_at[k] - p->node_at[k - 1]) : 0;
        size_t mark_len = p->src_at[k] - mark_at;
        const char *mark = p->full + mark_at;
        int closing = mark_len >= 2 && mark[0] == '<' && mark[1] == '/';
        if (!closing) fwrite(tr + spaces_at, 1, spaces, f);
        fwrite(mark, 1, mark_len, f);
        if (closing) fwrite(tr + spaces_at, 1, spaces, f);
        spaces = 0;
        if (k == nn) break;
        size_t from = 0, to = 0;
        if (nt < 0) to = k == 0 ? tl : 0;
        else node_bytes(node_of, ts, nt, tl, k, &w, &from, &to);
        size_t t = to;
        while (t > from && (tr[t - 1] == ' ' || tr[t - 1] == '\t')) t--;
        size_t next_at = p->src_at[k] + (p->node_at[k + 1] - p->node_at[k]); /* mark k + 1 */
        if (k + 1 < nn && p->src_at[k + 1] - next_at >= 2 && !memcmp(p->full + next_at, "</", 2) &&
            starts_punct(p->full + p->src_at[k + 1], p->full_len - p->src_at[k + 1])) {
            size_t q = t, n;
            while ((n = end_punct(tr, from, q)) > 0) q -= n;
            while (q < t && q > from && tr[q - 1] == ' ') q--; /* French puts a space before ? ! ; : */
            if (q > from) t = q;
        }
        fwrite(tr + from, 1, t - from, f);
        spaces_at = t, spaces = to - t;
    }
    free(node_of);
    free(ts);
}

static int open_srt(dmt_doc *d, char *err, size_t errlen) {
    const char *s = d->data, *end = d->data + d->len;
    if (d->len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) s += 3;
    d->eol = strdup(memchr(s, '\r', (size_t)(end - s)) ? "\r\n" : "\n");
    if (!d->eol) goto oom;
    int block = 0;
    while (s < end) {
        /* skip blank lines */
        while (s < end && (*s == '\n' || *s == '\r' || *s == ' ' || *s == '\t')) s++;
        if (s >= end) break;
        block++;
        /* the block's lines */
        const char *line[3] = {0}, *lend[3] = {0};
        const char *text_start = NULL, *text_end = NULL;
        int nl = 0;
        while (s < end) {
            const char *e = memchr(s, '\n', (size_t)(end - s));
            const char *le = e ? e : end;
            const char *ce = le > s && le[-1] == '\r' ? le - 1 : le;
            const char *nb = s;
            while (nb < ce && (*nb == ' ' || *nb == '\t')) nb++; /* within the line: data is not NUL-terminated */
            if (nb == ce) break; /* blank: end of block */
            if (nl < 2) {
                line[nl] = s;
                lend[nl] = ce;
            } else {
                if (!text_start) text_start = s;
                text_end = ce;
            }
            nl++;
            s = e ? e + 1 : end;
        }
        int timing = -1;
        for (int i = 0; i < 2 && i < nl; i++)
            if (memmem(line[i], (size_t)(lend[i] - line[i]), "-->", 3)) timing = i;
        if (timing < 0) {
            snprintf(err, errlen, "not an SRT file: subtitle %d has no timing line (\"00:00:01,000 --> ...\")", block);
            return -1;
        }
        if (timing == 0 && nl >= 2) { /* no number line: the second line is text */
            text_start = line[1];
            if (!text_end) text_end = lend[1];
        }
        piece *p = add_piece(d);
        if (!p) goto oom;
        size_t hl = (size_t)(lend[timing] - line[0]);
        const char *tl = text_start ? text_start : "";
        size_t tlen = text_start ? (size_t)(text_end - text_start) : 0;
        p->head = malloc(hl + 1);
        p->text = malloc(tlen + 1);
        if (!p->head || !p->text) goto oom;
        /* header lines as they were, line ends normalised later */
        size_t o = 0;
        for (const char *c = line[0]; c < lend[timing]; c++)
            if (*c != '\r') p->head[o++] = *c;
        p->head[o] = 0;
        /* text lines joined by a space (a sentence often runs over two lines) */
        o = 0;
        for (size_t i = 0; i < tlen; i++) {
            char c = tl[i];
            if (c == '\r') continue;
            p->text[o++] = c == '\n' ? ' ' : c;
        }
        p->text[o] = 0;
        p->len = o;
        if (cut_marks(p)) goto oom;
    }
    if (d->n == 0) {
        snprintf(err, errlen, "not an SRT file: no subtitles found");
        return -1;
    }
    return 0;
oom:
    snprintf(err, errlen, d->n >= DOC_MAX_TEXTS ? "too many subtitles (limit %d)" : "out of memory", DOC_MAX_TEXTS);
    return -1;
}

static int write_srt(const dmt_doc *d, const char *const *tr, const size_t *tl, const int *const *pairs,
                     const int *n_pairs, FILE *f) {
    for (int i = 0; i < d->n; i++) {
        for (const char *c = d->p[i].head; *c; c++)
            if (*c == '\n') fputs(d->eol, f);
            else fputc(*c, f);
        fputs(d->eol, f);
        if (tl[i] || d->p[i].full_len) {
            write_subtitle(&d->p[i], tr[i], tl[i], pairs ? pairs[i] : NULL, n_pairs ? n_pairs[i] : 0, f);
            fputs(d->eol, f);
        }
        fputs(d->eol, f);
    }
    return ferror(f) ? -1 : 0;
}

/* ---- .docx / .odt ---- */

typedef struct {
    dmt_doc *d;
    int docx;
    int failed;
    char *buf;   /* the current paragraph's text */
    size_t len, cap;
} walk_state;

static int is_paragraph(const walk_state *w, xmlNodePtr n) {
    if (n->type != XML_ELEMENT_NODE || !n->ns || !n->ns->href) return 0;
    const char *ns = (const char *)n->ns->href, *name = (const char *)n->name;
    if (w->docx) return !strcmp(ns, NS_W) && !strcmp(name, "p");
    return !strcmp(ns, NS_TEXT) && (!strcmp(name, "p") || !strcmp(name, "h"));
}

static void append(walk_state *w, const char *s, size_t n) {
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (w->len + n + 1 > cap) cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->failed = 1;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = 0;
}

static void add_node(walk_state *w, piece *p, xmlNodePtr n) {
    if (p->n_nodes == p->cap_nodes) {
        int cap = p->cap_nodes ? 2 * p->cap_nodes : 8;
        xmlNodePtr *v = realloc(p->nodes, (size_t)cap * sizeof *v);
        if (v) p->nodes = v;
        size_t *at = v ? realloc(p->node_at, (size_t)cap * sizeof *at) : NULL;
        if (!v || !at) {
            w->failed = 1;
            return;
        }
        p->node_at = at;
        p->cap_nodes = cap;
    }
    p->node_at[p->n_nodes] = w->len;
    p->nodes[p->n_nodes++] = n;
    const char *c = (const char *)n->content;
    if (c) append(w, c, strlen(c));
}

/* The text of paragraph p's subtree, not entering nested paragraphs. Depth is
 * bounded by libxml2's parser (256 without XML_PARSE_HUGE). */
static void fill(walk_state *w, piece *p, xmlNodePtr n) {
    for (xmlNodePtr c = n->children; c && !w->failed; c = c->next) {
        if (is_paragraph(w, c)) continue;
        if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
            int in_t = !w->docx || (n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, "t") && n->ns &&
                                    !strcmp((const char *)n->ns->href, NS_W));
            if (in_t) add_node(w, p, c);
            continue;
        }
        if (c->type != XML_ELEMENT_NODE) continue;
        const char *name = (const char *)c->name;
        /* tabs, breaks and ODF's space runs separate words */
        if (w->docx ? !strcmp(name, "tab") || !strcmp(name, "br") || !strcmp(name, "cr")
                    : !strcmp(name, "s") || !strcmp(name, "tab") || !strcmp(name, "line-break"))
            append(w, " ", 1);
        if (w->docx && (!strcmp(name, "delText") || !strcmp(name, "instrText"))) continue;
        fill(w, p, c);
    }
}

static void walk(walk_state *w, xmlNodePtr n) {
    for (xmlNodePtr c = n->children; c && !w->failed; c = c->next) {
        if (c->type != XML_ELEMENT_NODE) continue;
        if (is_paragraph(w, c)) {
            piece *p = add_piece(w->d);
            if (!p) {
                w->failed = 1;
                return;
            }
            w->len = 0;
            fill(w, p, c);
            if (w->failed) return;
            if (p->n_nodes && has_letter(w->buf, w->len)) {
                p->text = malloc(w->len + 1);
                if (!p->text) {
                    w->failed = 1;
                    return;
                }
                memcpy(p->text, w->buf, w->len + 1);
                p->len = w->len;
            } else { /* nothing to translate: forget it */
                free(p->nodes);
                free(p->node_at);
                w->d->n--;
            }
        }
        walk(w, c);
    }
}

/* Reads entry name of za, at most DOC_MAX_XML bytes, refusing bombs. */
static char *read_entry(zip_t *za, const char *name, size_t *len, char *err, size_t errlen) {
    zip_stat_t st;
    zip_int64_t idx = zip_name_locate(za, name, 0);
    if (idx < 0 || zip_stat_index(za, (zip_uint64_t)idx, 0, &st) != 0) {
        snprintf(err, errlen, "malformed document: the archive has no %s", name);
        return NULL;
    }
    if ((st.valid & ZIP_STAT_SIZE) && st.size > DOC_MAX_XML) {
        snprintf(err, errlen, "%s unpacks to %llu bytes, limit %u", name, (unsigned long long)st.size, DOC_MAX_XML);
        return NULL;
    }
    if ((st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE) && st.size > (1u << 20) &&
        st.size / (st.comp_size ? st.comp_size : 1) > DOC_MAX_RATIO) {
        snprintf(err, errlen, "refused: %s would unpack %llu times its size (a zip bomb?)", name,
                 (unsigned long long)(st.size / (st.comp_size ? st.comp_size : 1)));
        return NULL;
    }
    zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)idx, 0);
    if (!zf) {
        snprintf(err, errlen, "malformed document: cannot read %s (%s)", name, zip_strerror(za));
        return NULL;
    }
    size_t cap = (st.valid & ZIP_STAT_SIZE) ? (size_t)st.size + 1 : 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap > DOC_MAX_XML) break;
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
        zip_int64_t r = zip_fread(zf, buf + n, cap - n);
        if (r < 0) {
            snprintf(err, errlen, "malformed document: %s is damaged (%s)", name, zip_file_strerror(zf));
            free(buf);
            zip_fclose(zf);
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    zip_fclose(zf);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (n > DOC_MAX_XML) {
        snprintf(err, errlen, "%s unpacks to more than %u bytes", name, DOC_MAX_XML);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static int open_zip(dmt_doc *d, char *err, size_t errlen) {
    int docx = d->kind == DMT_DOC_DOCX;
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(d->data, d->len, 0, &ze);
    zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
    if (!za) {
        snprintf(err, errlen, "malformed document: not a valid zip archive (%s)", zip_error_strerror(&ze));
        if (src) zip_source_free(src);
        zip_error_fini(&ze);
        return -1;
    }
    zip_error_fini(&ze);
    int rc = -1;
    char *xml = NULL;
    walk_state w = {.d = d, .docx = docx}; /* w.buf is freed at out: on every path */
    zip_int64_t n = zip_get_num_entries(za, 0);
    if (n < 0 || n > DOC_MAX_ENTRIES) {
        snprintf(err, errlen, "refused: the archive has %lld entries, limit %d", (long long)n, DOC_MAX_ENTRIES);
        goto out;
    }
    unsigned long long total = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t st;
        if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE)) total += st.size;
    }
    if (total > DOC_MAX_UNPACKED) {
        snprintf(err, errlen, "refused: the archive unpacks to %llu bytes, limit %u (a zip bomb?)", total,
                 DOC_MAX_UNPACKED);
        goto out;
    }
    if (!docx) { /* an OpenDocument text names itself in its first entry */
        size_t ml;
        char *mt = read_entry(za, "mimetype", &ml, err, errlen);
        if (!mt) goto out;
        int ok = !strncmp(mt, "application/vnd.oasis.opendocument.text", 39) && ml < 64 &&
                 strncmp(mt, "application/vnd.oasis.opendocument.text-", 40);
        free(mt);
        if (!ok) {
            snprintf(err, errlen, "not an OpenDocument text: its mimetype entry says otherwise");
            goto out;
        }
    }
    /* the main part, then those holding more of the text: a .docx's headers,
     * footers, footnotes and endnotes; an .odt's styles.xml (page headers and
     * footers). Their XML together is bounded like one part. */
    snprintf(d->part[d->n_parts++], sizeof d->part[0], "%s", docx ? "word/document.xml" : "content.xml");
    for (zip_int64_t i = 0; i < n && d->n_parts < DOC_MAX_PARTS; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        if (!name || strlen(name) >= sizeof d->part[0]) continue;
        unsigned num;
        char tail[8] = "";
        int extra = docx ? (sscanf(name, "word/header%u.xm%7s", &num, tail) == 2 && !strcmp(tail, "l")) ||
                               (sscanf(name, "word/footer%u.xm%7s", &num, tail) == 2 && !strcmp(tail, "l")) ||
                               !strcmp(name, "word/footnotes.xml") || !strcmp(name, "word/endnotes.xml")
                         : !strcmp(name, "styles.xml");
        if (extra) snprintf(d->part[d->n_parts++], sizeof d->part[0], "%s", name);
    }
    /* The whole document's XML is bounded, not only each part: by DOC_MAX_XML and by
     * DOC_MAX_RATIO times the upload (at least DOC_MIN_XML_BUDGET), so that a small
     * file of many highly compressed parts cannot expand into megabytes of elements. */
    size_t xml_total = 0, budget = d->len > DOC_MAX_XML / DOC_MAX_RATIO ? DOC_MAX_XML : d->len * DOC_MAX_RATIO;
    if (budget < DOC_MIN_XML_BUDGET) budget = DOC_MIN_XML_BUDGET;
    for (int k = 0; k < d->n_parts; k++) {
        size_t xl;
        xml = read_entry(za, d->part[k], &xl, err, errlen);
        if (!xml) goto out;
        if ((xml_total += xl) > budget) {
            snprintf(err, errlen,
                     "refused: the document's XML unpacks to more than %zu bytes, limit %zu for a %zu-byte file "
                     "(%d times its size, at least %u)",
                     xml_total, budget, d->len, DOC_MAX_RATIO, DOC_MIN_XML_BUDGET);
            goto out;
        }
        /* no network, no DTD loading, entities left unexpanded */
        d->xml[k] = xmlReadMemory(xml, (int)xl, d->part[k], NULL,
                                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        free(xml);
        xml = NULL;
        if (!d->xml[k] || !xmlDocGetRootElement(d->xml[k])) {
            const xmlError *e = xmlGetLastError();
            snprintf(err, errlen, "malformed document: %s is not well-formed XML%s%.200s", d->part[k],
                     e && e->message ? ": " : "", e && e->message ? e->message : "");
            size_t l = strlen(err);
            while (l && err[l - 1] == '\n') err[--l] = 0;
            goto out;
        }
        walk(&w, (xmlNodePtr)d->xml[k]);
        if (w.failed) break;
    }
    if (w.failed) {
        snprintf(err, errlen, d->n >= DOC_MAX_TEXTS ? "too many paragraphs (limit %d)" : "out of memory",
                 DOC_MAX_TEXTS);
        goto out;
    }
    rc = 0;
out:
    free(w.buf);
    free(xml);
    zip_close(za); /* read-only: nothing is written; frees src */
    return rc;
}

static int write_dom(dmt_doc *d, const char *const *tr, const size_t *tl, const int *const *pairs,
                     const int *n_pairs, const char *path, char *err, size_t errlen);

static void drop_dom(dmt_doc *d) {
    for (int i = 0; i < d->n; i++) {
        free(d->p[i].nodes);
        free(d->p[i].node_at);
        d->p[i].node_at = NULL;
        d->p[i].nodes = NULL;
        d->p[i].n_nodes = d->p[i].cap_nodes = 0;
    }
    for (int k = 0; k < d->n_parts; k++) {
        if (d->xml[k]) xmlFreeDoc(d->xml[k]);
        d->xml[k] = NULL;
    }
}

static int write_zip(dmt_doc *queued, const char *const *tr, const size_t *tl, const int *const *pairs,
                     const int *n_pairs, const char *path, char *err, size_t errlen) {
    /* The queued document kept its texts only (its DOM, several times the XML, was
     * dropped after reading): the archive is read again, which walks the same
     * paragraphs in the same order, and the translations go into that DOM. */
    dmt_doc *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    d->kind = queued->kind;
    d->data = queued->data;
    d->len = queued->len;
    if (open_zip(d, err, errlen) || d->n != queued->n) {
        if (!err[0] || d->n != queued->n) snprintf(err, errlen, "cannot read the document again to write it");
        dmt_doc_free(d);
        return -1;
    }
    int rc = write_dom(d, tr, tl, pairs, n_pairs, path, err, errlen);
    dmt_doc_free(d);
    return rc;
}

/* Which of paragraph p's text nodes each word of its translation tr goes into:
 * into *node (nt entries), non-decreasing, so that the nodes keep their order and
 * each holds a stretch of the translation; chosen to agree best with the word
 * alignment (pairs: n_pairs (source word, target word)), so a bold run gets the
 * words aligned to its own. Among assignments with as many agreements, the one
 * whose agreements fall in smaller nodes wins: when a translation moves a bold word
 * past its neighbours ("a <b>red</b> hat" -> "un chapeau rouge"), the bold run then
 * takes the word with its neighbour rather than end up empty. The number of
 * target words, or -1 (out of memory, or too large to weigh: the caller puts
 * everything in the first node). */
static int assign_words(const piece *p, const char *tr, size_t tl, const int *pairs, int n_pairs, int **node_of) {
    int nt = dmt_word_bounds(tr, tl, NULL, NULL), ns = dmt_word_bounds(p->text, p->len, NULL, NULL), nn = p->n_nodes;
    if (nt == 0 || nn < 2 || (long)nt * nn > 1000000) return -1;
    /* an agreement weighs AGREE, plus TIE / (source words in its node): the second
     * term only breaks ties (TIE * pairs stays under AGREE for any real sentence) */
    enum { AGREE = 1 << 20, TIE = 1 << 8 };
    size_t *ss = malloc(((size_t)ns + 1) * sizeof *ss);
    int *src_node = malloc(((size_t)ns + 1) * sizeof *src_node), *node_words = calloc((size_t)nn, sizeof *node_words);
    long long *score = calloc((size_t)nt * nn, sizeof *score), *best = malloc((size_t)nt * nn * sizeof *best);
    int *from = malloc((size_t)nt * nn * sizeof *from), *out = malloc((size_t)nt * sizeof *out);
    int rc = -1;
    if (!ss || !src_node || !node_words || !score || !best || !from || !out) goto done;
    dmt_word_bounds(p->text, p->len, ss, NULL);
    for (int w = 0, k = 0; w < ns; w++) { /* the node a source word starts in */
        while (k + 1 < nn && p->node_at[k + 1] <= ss[w]) k++;
        src_node[w] = k;
        node_words[k]++;
    }
    for (int q = 0; q < n_pairs; q++)
        if (pairs[2 * q] >= 0 && pairs[2 * q] < ns && pairs[2 * q + 1] >= 0 && pairs[2 * q + 1] < nt) {
            int k = src_node[pairs[2 * q]];
            score[(size_t)pairs[2 * q + 1] * nn + k] += AGREE + TIE / node_words[k];
        }
    /* best[w][k]: the most agreements of words 0..w with word w in node k */
    for (int w = 0; w < nt; w++) {
        long long run = -1;
        int arg = 0;
        for (int k = 0; k < nn; k++) {
            if (w > 0 && best[(size_t)(w - 1) * nn + k] >= run) run = best[(size_t)(w - 1) * nn + k], arg = k;
            best[(size_t)w * nn + k] = score[(size_t)w * nn + k] + (w > 0 ? run : 0);
            from[(size_t)w * nn + k] = arg;
        }
    }
    int k = 0;
    for (int j = 1; j < nn; j++)
        if (best[(size_t)(nt - 1) * nn + j] > best[(size_t)(nt - 1) * nn + k]) k = j;
    for (int w = nt - 1; w >= 0; w--) {
        out[w] = k;
        k = from[(size_t)w * nn + k];
    }
    *node_of = out;
    out = NULL;
    rc = nt;
done:
    free(ss); free(src_node); free(node_words); free(score); free(best); free(from); free(out);
    return rc;
}

/* Paragraph p's text nodes get the translation tr: by the alignment, each node the
 * stretch of words aligned to its own (assign_words), spaces after a word staying
 * with it; without one, all of it in the first node (keeping its run's formatting)
 * and the others emptied. Every element stays; only text moves. */
static void put_translation(dmt_doc *d, piece *p, const char *tr, size_t tl, const int *pairs, int n_pairs) {
    int *node_of = NULL, nt = pairs && n_pairs > 0 ? assign_words(p, tr, tl, pairs, n_pairs, &node_of) : -1;
    size_t *ts = nt > 0 ? malloc((size_t)nt * sizeof *ts) : NULL;
    if (nt <= 0 || !ts) {
        for (int k = 0; k < p->n_nodes; k++)
            xmlNodeSetContentLen(p->nodes[k], (const xmlChar *)(k ? "" : tr), k ? 0 : (int)tl);
        /* Word drops a run's edge spaces unless told to keep them */
        if (d->kind == DMT_DOC_DOCX && p->n_nodes) xmlNodeSetSpacePreserve(p->nodes[0]->parent, 1);
        free(node_of);
        free(ts);
        return;
    }
    dmt_word_bounds(tr, tl, ts, NULL);
    for (int k = 0, w = 0; k < p->n_nodes; k++) {
        size_t from, to;
        int has = node_bytes(node_of, ts, nt, tl, k, &w, &from, &to);
        xmlNodeSetContentLen(p->nodes[k], (const xmlChar *)(has ? tr + from : ""), has ? (int)(to - from) : 0);
        if (d->kind == DMT_DOC_DOCX && has) xmlNodeSetSpacePreserve(p->nodes[k]->parent, 1);
    }
    free(node_of);
    free(ts);
}

static int write_dom(dmt_doc *d, const char *const *tr, const size_t *tl, const int *const *pairs,
                     const int *n_pairs, const char *path, char *err, size_t errlen) {
    for (int i = 0; i < d->n; i++)
        put_translation(d, &d->p[i], tr[i], tl[i], pairs ? pairs[i] : NULL, n_pairs ? n_pairs[i] : 0);
    xmlChar *out[DOC_MAX_PARTS] = {0};
    int out_len[DOC_MAX_PARTS] = {0}, ok = 1;
    for (int k = 0; k < d->n_parts; k++) {
        xmlDocDumpMemoryEnc(d->xml[k], &out[k], &out_len[k], "UTF-8");
        ok = ok && out[k];
    }
    FILE *f = ok ? fopen(path, "wb") : NULL;
    ok = f && fwrite(d->data, 1, d->len, f) == d->len;
    if (f && fclose(f)) ok = 0;
    zip_t *za = NULL;
    int zerr = 0;
    if (ok) za = zip_open(path, 0, &zerr);
    ok = ok && za;
    /* the buffers stay ours until zip_close has written them */
    for (int k = 0; ok && k < d->n_parts; k++) {
        zip_source_t *src = zip_source_buffer(za, out[k], (zip_uint64_t)out_len[k], 0);
        zip_int64_t idx = zip_name_locate(za, d->part[k], 0);
        ok = src && idx >= 0 && zip_file_replace(za, (zip_uint64_t)idx, src, 0) == 0;
        if (!ok && src) zip_source_free(src);
    }
    if (za) {
        if (!ok) zip_discard(za);
        else if (zip_close(za) != 0) {
            ok = 0;
            zip_discard(za);
        }
    }
    for (int k = 0; k < d->n_parts; k++) xmlFree(out[k]);
    if (!ok) snprintf(err, errlen, "cannot write the translated document");
    return ok ? 0 : -1;
}

/* ---- the interface ---- */

dmt_doc *dmt_doc_open(dmt_doc_kind kind, const char *data, size_t len, char *err, size_t errlen) {
    dmt_doc *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->kind = kind;
    d->data = data;
    d->len = len;
    int rc;
    if (kind == DMT_DOC_DOCX || kind == DMT_DOC_ODT) {
        rc = open_zip(d, err, errlen);
        if (rc == 0) drop_dom(d); /* only the texts wait in the queue: the DOM is built again to write */
    } else if ((rc = check_text(data, len, err, errlen)) == 0) {
        if (kind == DMT_DOC_SRT) {
            rc = open_srt(d, err, errlen);
        } else {
            piece *p = add_piece(d);
            if (!p || !(p->text = malloc(len + 1))) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
            } else {
                memcpy(p->text, data, len);
                p->text[len] = 0;
                p->len = len;
            }
        }
    }
    if (rc) {
        dmt_doc_free(d);
        return NULL;
    }
    return d;
}

int dmt_doc_count(const dmt_doc *d) { return d->n; }

const char *dmt_doc_text(const dmt_doc *d, int i, size_t *len) {
    *len = d->p[i].len;
    return d->p[i].text;
}

int dmt_doc_is_html(const dmt_doc *d) { return d->kind == DMT_DOC_HTML; }

int dmt_doc_write(dmt_doc *d, const char *const *tr, const size_t *tl, const char *path, char *err, size_t errlen) {
    return dmt_doc_write_aligned(d, tr, tl, NULL, NULL, path, err, errlen);
}

int dmt_doc_write_aligned(dmt_doc *d, const char *const *tr, const size_t *tl, const int *const *pairs,
                          const int *n_pairs, const char *path, char *err, size_t errlen) {
    if (d->kind == DMT_DOC_DOCX || d->kind == DMT_DOC_ODT) return write_zip(d, tr, tl, pairs, n_pairs, path, err, errlen);
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (f) {
        if (d->kind == DMT_DOC_SRT) rc = write_srt(d, tr, tl, pairs, n_pairs, f);
        else rc = d->n && fwrite(tr[0], 1, tl[0], f) == tl[0] ? 0 : d->n ? -1 : 0;
        if (fclose(f)) rc = -1;
    }
    if (rc) snprintf(err, errlen, "cannot write the translated file");
    return rc;
}

void dmt_doc_free(dmt_doc *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        free(d->p[i].text);
        free(d->p[i].nodes);
        free(d->p[i].node_at);
        free(d->p[i].head);
        free(d->p[i].full);
        free(d->p[i].src_at);
    }
    free(d->p);
    free(d->eol);
    for (int k = 0; k < d->n_parts; k++)
        if (d->xml[k]) xmlFreeDoc(d->xml[k]);
    free(d);
}
