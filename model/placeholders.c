/* placeholders.c — format placeholders given to the model as numbers and put back
 * (placeholders.h). */
#include "model/placeholders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PLACEHOLDERS 64
#define FIRST_NUMBER 201

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_alpha(unsigned char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }
static int is_alnum(unsigned char c) { return is_alpha(c) || is_digit(c); }
static int is_name_char(unsigned char c) { return is_alnum(c) || c == '_' || c == '.' || c == '-' || c == ':'; }

/* The length of a braced name at s[0..n) ("{name}", "{{name}}", "${name}", "${{name}}",
 * "%{name}" after its '%'; "$(NAME)"), or 0. */
static size_t braced(const char *s, size_t n) {
    size_t i = 0, open = 0;
    if (i < n && s[i] == '$') {
        i++;
        if (i < n && s[i] == '(') { /* LibreOffice's and make's "$(ARG1)" */
            size_t j = i + 1;
            while (j < n && (is_alnum((unsigned char)s[j]) || s[j] == '_')) j++;
            return j > i + 1 && j < n && s[j] == ')' ? j + 1 : 0;
        }
    }
    while (i < n && s[i] == '{' && open < 2) i++, open++;
    if (!open) return 0;
    while (i < n && is_name_char((unsigned char)s[i])) i++;
    for (size_t k = 0; k < open; k++, i++)
        if (i >= n || s[i] != '}') return 0;
    return i;
}

/* printf's conversion after s[i..n) (flags, width, precision, length, letter): the
 * placeholder's end, or 0. */
static size_t conversion(const char *s, size_t n, size_t i) {
    while (i < n && s[i] && strchr("-+#0'", s[i])) i++;
    if (i < n && s[i] == '*') i++;
    else while (i < n && is_digit((unsigned char)s[i])) i++;
    if (i < n && s[i] == '.') {
        i++;
        if (i < n && s[i] == '*') i++;
        else while (i < n && is_digit((unsigned char)s[i])) i++;
    }
    static const char *const lengths[] = {"hh", "ll", "h", "l", "L", "q", "j", "z", "t"};
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        size_t m = strlen(lengths[k]);
        if (i + m <= n && !memcmp(s + i, lengths[k], m)) { i += m; break; }
    }
    return i < n && s[i] && strchr("diouxXeEfFgGaAcspn@", s[i]) ? i + 1 : 0;
}

/* The length of a placeholder at s[0..n) that starts with '%', or 0; *format: it
 * ends in printf's conversion letter, so a letter may follow ("%dx%d"); the others
 * (Qt's "%1", "%PRODUCTNAME", "%{name}") end where the word's letters and digits do. */
static size_t percent_spec(const char *s, size_t n, int *format) {
    *format = 0;
    if (n < 2) return 0;
    if (s[1] == '{') {
        size_t k = braced(s + 1, n - 1);
        return k ? 1 + k : 0;
    }
    if (s[1] >= 'A' && s[1] <= 'Z' && n > 2 && ((s[2] >= 'A' && s[2] <= 'Z') || s[2] == '_')) {
        size_t j = 2; /* LibreOffice's "%PRODUCTNAME", Windows' "%APPDATA%" */
        while (j < n && ((s[j] >= 'A' && s[j] <= 'Z') || is_digit((unsigned char)s[j]) || s[j] == '_')) j++;
        return j < n && s[j] == '%' ? j + 1 : j;
    }
    size_t i = 1;
    if (is_digit((unsigned char)s[1]) && s[1] != '0') { /* "%1$s", a width ("%3f"), or Qt's "%1" */
        size_t j = 1;
        while (j < n && is_digit((unsigned char)s[j]) && j < 4) j++;
        if (j < n && s[j] == '$') {
            i = j + 1;
        } else {
            size_t end = conversion(s, n, 1);
            if (end) { *format = 1; return end; }
            return j <= 3 ? j : 0;
        }
    } else if (s[1] == '(') { /* Python's "%(name)d" */
        size_t j = 2;
        while (j < n && (is_alnum((unsigned char)s[j]) || s[j] == '_')) j++;
        if (j == 2 || j >= n || s[j] != ')') return 0;
        i = j + 1;
    }
    size_t end = conversion(s, n, i);
    *format = end > 0;
    return end;
}

/* The placeholder starting at text[i], its length, or 0; *format as percent_spec's. */
static size_t one_placeholder(const char *text, size_t len, size_t i, int *format) {
    *format = 0;
    if (text[i] == '%') return percent_spec(text + i, len - i, format);
    if (text[i] == '{' || text[i] == '$') return braced(text + i, len - i);
    return 0;
}

/* The run of placeholders (and "%%" beside them) starting at text[i] (text[i - 1]
 * is no digit), its length, or 0 when none starts there, or it runs on into a
 * digit, or into a letter after a placeholder that must end a word. lone_percent:
 * a "%%" alone is one too (the sentence has printf's placeholders: it is their
 * literal percent sign, "Volume: %i %%"). *all_format: all of the run are printf's. */
static size_t placeholder_at(const char *text, size_t len, size_t i, int lone_percent, int *all_format) {
    size_t k = 0;
    int real = 0, format = 0;
    *all_format = 1;
    for (;;) { /* format: of the last one */
        int f = 1;
        size_t m = i + k + 1 < len && text[i + k] == '%' && text[i + k + 1] == '%' ? 2 : 0;
        if (!m && i + k < len && (m = one_placeholder(text, len, i + k, &f))) real = 1;
        if (!m) break;
        k += m;
        format = f;
        *all_format &= f;
    }
    if (!k || (!real && !(lone_percent && k == 2))) return 0;
    /* its number must not run on into a digit, nor a name into a word */
    if (i + k < len && (is_digit((unsigned char)text[i + k]) || (!format && is_alpha((unsigned char)text[i + k]))))
        return 0;
    return k;
}

/* The numbers of n placeholders: the first n from FIRST_NUMBER up that no whole run
 * of digits in text[0..len) is (written plainly: "0201" is another). Linear in len:
 * a run can only take a number below FIRST_NUMBER + runs + n. */
static int choose_numbers(const char *text, size_t len, dmt_placeholder *found, int n) {
    size_t runs = 0;
    for (size_t i = 0; i < len; i++) runs += is_digit((unsigned char)text[i]) && (i == 0 || !is_digit((unsigned char)text[i - 1]));
    size_t span = runs + (size_t)n;
    unsigned char *taken = calloc(span, 1);
    if (!taken) return -1;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit((unsigned char)text[i]) || (i > 0 && is_digit((unsigned char)text[i - 1]))) continue;
        size_t j = i, value = 0;
        while (j < len && is_digit((unsigned char)text[j]) && j - i < 10) value = value * 10 + (size_t)(text[j++] - '0');
        if (text[i] != '0' && (j == len || !is_digit((unsigned char)text[j])) && value >= FIRST_NUMBER &&
            value - FIRST_NUMBER < span)
            taken[value - FIRST_NUMBER] = 1;
    }
    size_t next = 0;
    for (int k = 0; k < n; k++) {
        while (taken[next]) next++;
        snprintf(found[k].number, sizeof found[k].number, "%zu", FIRST_NUMBER + next++);
    }
    free(taken);
    return 0;
}

void dmt_placeholders_clear(dmt_placeholders *p) {
    if (!p) return;
    free(p->source);
    free(p->items);
    memset(p, 0, sizeof *p);
}

int dmt_placeholders_find(const char *text, size_t len, dmt_placeholders *p) {
    memset(p, 0, sizeof *p);
    if (!memchr(text, '%', len) && !memchr(text, '{', len) && !memchr(text, '$', len)) return 0; /* most sentences */
    dmt_placeholder found[MAX_PLACEHOLDERS];
    int n = 0, printf_seen = 0, firm = 0;
    for (size_t i = 0; i + 1 < len && !printf_seen; i++) {
        int format = 0;
        if (text[i] == '%' && text[i + 1] == '%') i++;
        else if (text[i] == '%' && (i == 0 || !is_alnum((unsigned char)text[i - 1])))
            printf_seen = percent_spec(text + i, len - i, &format) && format;
    }
    for (size_t i = 0; i < len && n < MAX_PLACEHOLDERS; i++) {
        if (text[i] != '%' && text[i] != '{' && text[i] != '$') continue;
        /* after a digit its number would run on ("5%d"); after '{', '$' or '%' it is part
           of an escape ("{{x}", "%%s") or of a longer form already refused; after a
           letter only printf's ("file%d.png", "%dx%d") */
        if (i > 0 && (is_digit((unsigned char)text[i - 1]) || strchr("{$%", text[i - 1]))) continue;
        int format = 0;
        size_t k = placeholder_at(text, len, i, printf_seen, &format);
        if (k && i > 0 && is_alpha((unsigned char)text[i - 1]) && !format) k = 0;
        if (!k) {
            if (text[i] == '%' && i + 1 < len && text[i + 1] == '%') i++; /* "%%" alone: a percent sign */
            continue;
        }
        found[n].at = i;
        found[n].len = k;
        n++;
        /* one that starts a word and runs on into letters may be a typo ("um 6 %zu
           verringern", "12,6 %in Bezug"): a placeholder only beside a firm one */
        firm |= !((i == 0 || !is_alpha((unsigned char)text[i - 1])) && i + k < len && is_alpha((unsigned char)text[i + k]));
        i += k - 1;
    }
    if (!n || !firm) return 0;
    p->source = malloc(len + 1);
    p->items = malloc((size_t)n * sizeof *p->items);
    /* a number per placeholder that the sentence does not hold */
    if (!p->source || !p->items || choose_numbers(text, len, found, n)) {
        dmt_placeholders_clear(p);
        return -1;
    }
    memcpy(p->source, text, len);
    p->source[len] = 0;
    p->source_len = len;
    memcpy(p->items, found, (size_t)n * sizeof *found);
    p->n = n;
    return n;
}

char *dmt_placeholders_strip(const dmt_placeholders *p, size_t *out_len) {
    size_t len = p->source_len, cap = len + 1;
    for (int k = 0; k < p->n; k++) cap += strlen(p->items[k].number);
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = 0, from = 0;
    for (int k = 0; k < p->n; k++) {
        memcpy(out + o, p->source + from, p->items[k].at - from);
        o += p->items[k].at - from;
        size_t m = strlen(p->items[k].number);
        memcpy(out + o, p->items[k].number, m);
        o += m;
        from = p->items[k].at + p->items[k].len;
    }
    memcpy(out + o, p->source + from, len - from);
    o += len - from;
    out[o] = 0;
    *out_len = o;
    return out;
}

/* Which of p's numbers the digits tr[at..at+m) are, or -1. */
static int number_of(const dmt_placeholders *p, const char *tr, size_t at, size_t m) {
    for (int k = 0; k < p->n; k++)
        if (strlen(p->items[k].number) == m && !memcmp(p->items[k].number, tr + at, m)) return k;
    return -1;
}

/* tr with p's numbers made placeholders, into out (NULL: measuring only); its
 * length. used[k]: placeholder k was written. */
static size_t replace_numbers(const dmt_placeholders *p, const char *tr, size_t tr_len, char *out, char *used) {
    size_t o = 0;
    for (size_t i = 0; i < tr_len;) {
        if (!is_digit((unsigned char)tr[i]) || (i > 0 && is_digit((unsigned char)tr[i - 1]))) {
            if (out) out[o] = tr[i];
            o++, i++;
            continue;
        }
        size_t j = i;
        while (j < tr_len && is_digit((unsigned char)tr[j])) j++;
        int k = number_of(p, tr, i, j - i);
        const char *put = k >= 0 ? p->source + p->items[k].at : tr + i;
        size_t m = k >= 0 ? p->items[k].len : j - i;
        if (out) memcpy(out + o, put, m);
        if (k >= 0) used[k] = 1;
        o += m;
        i = j;
    }
    return o;
}

char *dmt_placeholders_restore(const dmt_placeholders *p, const char *tr, size_t tr_len, size_t *out_len) {
    char used[MAX_PLACEHOLDERS] = {0};
    size_t cap = replace_numbers(p, tr, tr_len, NULL, used) + 1;
    for (int k = 0; k < p->n; k++) cap += used[k] ? 0 : p->items[k].len + 1;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = replace_numbers(p, tr, tr_len, out, used);
    /* those the model dropped: at the end, before its closing punctuation */
    size_t end = o;
    while (end > 0 && out[end - 1] && strchr(".!?:;)\"'", out[end - 1])) end--;
    char tail[16];
    size_t tail_len = o - end;
    if (tail_len > sizeof tail) end = o, tail_len = 0;
    memcpy(tail, out + end, tail_len);
    o = end;
    for (int k = 0; k < p->n; k++) {
        if (used[k]) continue;
        if (o > 0 && out[o - 1] != ' ') out[o++] = ' ';
        memcpy(out + o, p->source + p->items[k].at, p->items[k].len);
        o += p->items[k].len;
    }
    memcpy(out + o, tail, tail_len);
    o += tail_len;
    out[o] = 0;
    *out_len = o;
    return out;
}
