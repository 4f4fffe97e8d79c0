/* options.c — one option parser for every command (options.h). */
#include "base/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/suggest.h"

void dmt_option_env_name(const char *name, char *out, size_t cap) {
    size_t k = (size_t)snprintf(out, cap, "DEEPMT_");
    for (const char *p = name; *p && k + 1 < cap; p++) out[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    if (k < cap) out[k] = 0;
}

static int parse_size(const char *v, double lo, double hi, size_t *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno) return -1;
    if (*end == 'k' || *end == 'K') x *= 1024, end++;
    else if (*end == 'm' || *end == 'M') x *= 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G') x *= 1024.0 * 1024 * 1024, end++;
    if (*end == 'i' || *end == 'B') end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
    if (*end || !(x >= lo && x <= hi)) return -1;
    *out = (size_t)x;
    return 0;
}

/* Sets one option from a string; src names it in messages ("--port", "DEEPMT_PORT"). */
static int set_option(void *target, const dmt_option *o, const char *v, const char *src, int from_env, char *err,
                      size_t errlen) {
    char *base = target;
    switch (o->kind) {
    case DMT_OPT_STR:
        if (strlen(v) >= o->size) {
            snprintf(err, errlen, "%s: value too long (at most %zu bytes)", src, o->size - 1);
            return -1;
        }
        snprintf(base + o->offset, o->size, "%s", v);
        return 0;
    case DMT_OPT_INT:
    case DMT_OPT_LONG: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno || x < (long long)o->lo || x > (long long)o->hi) {
            snprintf(err, errlen, "%s: expected an integer from %.0f to %.0f, got '%s'", src, o->lo, o->hi, v);
            return -1;
        }
        if (o->kind == DMT_OPT_INT) *(int *)(base + o->offset) = (int)x;
        else *(long *)(base + o->offset) = (long)x;
        return 0;
    }
    case DMT_OPT_SIZE:
        if (parse_size(v, o->lo, o->hi, (size_t *)(base + o->offset))) {
            snprintf(err, errlen, "%s: expected a size from %.0f to %.0f bytes (k, M, G suffixes), got '%s'", src,
                     o->lo, o->hi, v);
            return -1;
        }
        return 0;
    case DMT_OPT_FLOAT: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x) || x < o->lo || x > o->hi) {
            snprintf(err, errlen, "%s: expected a number from %g to %g, got '%s'", src, o->lo, o->hi, v);
            return -1;
        }
        *(float *)(base + o->offset) = (float)x;
        return 0;
    }
    case DMT_OPT_CHOICE: {
        size_t len = strlen(v);
        int index = 0;
        for (const char *p = o->arg; *p; index++) {
            const char *end = strchr(p, '|');
            size_t n = end ? (size_t)(end - p) : strlen(p);
            if (n == len && !strncmp(p, v, n)) {
                *(int *)(base + o->offset) = index;
                return 0;
            }
            p += n + (end != NULL);
        }
        char choices[128] = ""; /* "text|json" -> "text or json" */
        for (const char *p = o->arg; *p && strlen(choices) + 4 < sizeof choices; p++)
            strncat(choices, *p == '|' ? " or " : (char[]){*p, 0}, sizeof choices - strlen(choices) - 1);
        snprintf(err, errlen, "%s: expected %s, got '%s'", src, choices, v);
        return -1;
    }
    case DMT_OPT_FLAG:
        if (!from_env || !strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes")) {
            *(int *)(base + o->offset) = 1;
            return 0;
        }
        if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no")) {
            *(int *)(base + o->offset) = 0;
            return 0;
        }
        snprintf(err, errlen, "%s: expected 1 or 0 (true or false), got '%s'", src, v);
        return -1;
    case DMT_OPT_CUSTOM:
        return o->set(target, v, from_env, err, errlen);
    }
    return -1;
}

/* The closest option name to the mistyped word (NULL: none close). */
static const char *closest(const dmt_option *opts, int n, const char *word) {
    const char *names[n + 2];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!(opts[i].flags & DMT_OPT_HIDDEN)) names[k++] = opts[i].name;
    names[k++] = "help";
    names[k] = NULL;
    return dmt_suggest(word, names);
}

int dmt_options_parse(const char *cmd, const dmt_option *opts, int n, void *target, int argc, char **argv, int *given,
                      const char **positional, int max_positional, int *n_positional, char *err, size_t errlen) {
    if (n_positional) *n_positional = 0;
    for (int i = 0; i < n; i++) {
        if (opts[i].flags & DMT_OPT_NO_ENV) continue;
        char env[80];
        dmt_option_env_name(opts[i].name, env, sizeof env);
        const char *v = getenv(env);
        if (!v || !*v) continue;
        if (set_option(target, &opts[i], v, env, 1, err, errlen)) return -1;
        if (given) given[i] = 1;
    }
    int options_end = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (options_end || arg[0] != '-' || !arg[1]) { /* a positional argument ("-" alone is one too) */
            if (!positional || !n_positional || *n_positional >= max_positional) {
                snprintf(err, errlen, "unexpected argument '%s' (see deepmt %s --help)", arg, cmd);
                return -1;
            }
            positional[(*n_positional)++] = arg;
            continue;
        }
        if (!strcmp(arg, "--")) {
            options_end = 1;
            continue;
        }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) return 1;
        int o = -1;
        const char *v = NULL;
        char shown[80];
        if (arg[1] != '-') { /* -x VALUE, -xVALUE */
            for (int i = 0; i < n && o < 0; i++)
                if (opts[i].short_name && opts[i].short_name == arg[1]) o = i;
            if (o < 0) {
                snprintf(err, errlen, "unknown option '%s' (see deepmt %s --help)", arg, cmd);
                return -1;
            }
            snprintf(shown, sizeof shown, "-%c", arg[1]);
            if (arg[2]) v = arg[2] == '=' ? arg + 3 : arg + 2;
        } else { /* --name VALUE, --name=VALUE */
            const char *name = arg + 2, *eq = strchr(name, '=');
            size_t nl = eq ? (size_t)(eq - name) : strlen(name);
            for (int i = 0; i < n && o < 0; i++)
                if (strlen(opts[i].name) == nl && !strncmp(opts[i].name, name, nl)) o = i;
            if (o < 0) {
                char word[64];
                snprintf(word, sizeof word, "%.*s", (int)(nl < 63 ? nl : 63), name);
                const char *close = closest(opts, n, word);
                if (close) snprintf(err, errlen, "unknown option '%s'; did you mean --%s?", arg, close);
                else snprintf(err, errlen, "unknown option '%s' (see deepmt %s --help)", arg, cmd);
                return -1;
            }
            snprintf(shown, sizeof shown, "--%s", opts[o].name);
            if (eq) v = eq + 1;
        }
        if (opts[o].kind == DMT_OPT_FLAG) {
            if (v) {
                snprintf(err, errlen, "%s takes no value", shown);
                return -1;
            }
            v = "1";
        } else if (!v) {
            if (a + 1 >= argc) {
                snprintf(err, errlen, "%s needs a value", shown);
                return -1;
            }
            v = argv[++a];
        }
        if (set_option(target, &opts[o], v, shown, 0, err, errlen)) return -1;
        if (given) given[o] = 1;
    }
    return 0;
}

void dmt_options_usage(FILE *f, const dmt_option *opts, int n) {
    for (int i = 0; i < n; i++) {
        const dmt_option *o = &opts[i];
        if (o->flags & DMT_OPT_HIDDEN) continue;
        char left[80], env[80];
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name, o->kind == DMT_OPT_FLAG ? "" : " ",
                     o->kind == DMT_OPT_FLAG ? "" : o->arg);
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->name, o->kind == DMT_OPT_FLAG ? "" : " ",
                     o->kind == DMT_OPT_FLAG ? "" : o->arg);
        fprintf(f, "  %-30s %s\n", left, o->help);
        if (!(o->flags & DMT_OPT_NO_ENV)) {
            dmt_option_env_name(o->name, env, sizeof env);
            fprintf(f, "  %-30s   env %s\n", "", env);
        }
    }
}

void dmt_options_threads(int threads, int workers, int *workers_out, int *blas_threads_out) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (threads <= 0) threads = (int)(cores < 1024 ? cores : 1024);
    if (workers <= 0) workers = threads < 4 ? threads : 4;
    *workers_out = workers;
    *blas_threads_out = threads / workers > 1 ? threads / workers : 1;
}
