/* options.h — the command-line vocabulary every `deepmt` command draws from
 * (options.c): one table of options per command, each option a name, a type, a
 * range, a default (in its help) and an environment variable (--some-name is
 * DEEPMT_SOME_NAME; a flag wins over its variable), parsed and listed in --help
 * the same way everywhere, with "did you mean" for a mistyped name. The options
 * several commands share are defined once, below (DMT_OPTION_MODEL ...), so that
 * the same word means the same thing in every command.
 */
#ifndef DEEPMT_BASE_OPTIONS_H
#define DEEPMT_BASE_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    DMT_OPT_STR,    /* char[size] */
    DMT_OPT_INT,    /* int in lo..hi */
    DMT_OPT_LONG,   /* long in lo..hi */
    DMT_OPT_SIZE,   /* size_t in lo..hi bytes, k/M/G suffixes */
    DMT_OPT_FLOAT,  /* float in lo..hi */
    DMT_OPT_CHOICE, /* int: the index of the value among arg's "a|b|c" */
    DMT_OPT_FLAG,   /* int set to 1, takes no value (from the environment: 1/0, true/false) */
    DMT_OPT_CUSTOM, /* set(target, value, from_env, ...) does it */
} dmt_opt_kind;

enum {
    DMT_OPT_NO_ENV = 1, /* not read from the environment */
    DMT_OPT_HIDDEN = 2, /* accepted, not listed (an old spelling) */
};

typedef struct {
    const char *name;   /* --name, without the dashes */
    char short_name;    /* -x, or 0 */
    dmt_opt_kind kind;
    size_t offset;      /* of the field in the command's struct */
    size_t size;        /* DMT_OPT_STR: the buffer's size */
    double lo, hi;      /* range of numbers */
    const char *arg;    /* the value's name in --help; DMT_OPT_CHOICE: "a|b|c" */
    const char *help;   /* ends with the default in brackets: "[32]" */
    int flags;
    int (*set)(void *target, const char *value, int from_env, char *err, size_t errlen); /* DMT_OPT_CUSTOM */
} dmt_option;

/* Parses the environment, then argv[1..] into target (fields at the options'
 * offsets; defaults set by the caller beforehand). given, when not NULL, gets
 * given[i] = 1 for each option set by a flag or a variable. Arguments that are not
 * options go to positional (at most max_positional; more is an error), their count
 * in *n_positional. "--" ends the options. 0; 1 for -h/--help (nothing printed);
 * -1 with a message in err (cmd names the command in it: "unknown option '--prot';
 * did you mean --port?"). */
int dmt_options_parse(const char *cmd, const dmt_option *opts, int n, void *target, int argc, char **argv, int *given,
                      const char **positional, int max_positional, int *n_positional, char *err, size_t errlen);

/* The options as --help lists them: "  --name ARG   help" and "env DEEPMT_NAME". */
void dmt_options_usage(FILE *f, const dmt_option *opts, int n);

/* The environment variable of an option name: "max-batch-sentences" ->
 * "DEEPMT_MAX_BATCH_SENTENCES". */
void dmt_option_env_name(const char *name, char *out, size_t cap);

/* Worker threads and BLAS threads from the shared --threads (CPU threads in all,
 * 0: the cores) and --workers (0: min(threads, 4)): each worker gets threads /
 * workers BLAS threads, at least 1. */
void dmt_options_threads(int threads, int workers, int *workers_out, int *blas_threads_out);

/* ---- the shared vocabulary ---- */

#define DMT_DEFAULT_MODEL "models/default"

#define DMT_MODEL_HELP "model directory (config.json, model.safetensors, sentencepiece.model) [" DMT_DEFAULT_MODEL "]"
#define DMT_OPTION_MODEL(off, sz) {"model", 'm', DMT_OPT_STR, (off), (sz), 0, 0, "DIR", DMT_MODEL_HELP, 0, NULL}
#define DMT_OPTION_THREADS(off)                                                                                    \
    {"threads", 0, DMT_OPT_INT, (off), 0, 0, 1024, "N", "CPU threads in all (0: the number of cores) [0]", 0, NULL}
#define DMT_OPTION_WORKERS(off)                                                                                    \
    {"workers", 0, DMT_OPT_INT, (off), 0, 0, 64, "W",                                                              \
     "decoding threads, each with its own batch and buffers, each with threads/W BLAS threads (0: min(threads, "  \
     "4)) [0]",                                                                                                    \
     0, NULL}
#define DMT_OPTION_BATCHING(off)                                                                                   \
    {"batching", 0, DMT_OPT_CHOICE, (off), 0, 0, 0, "whole|continuous",                                            \
     "continuous: sentences join and leave a worker's running batch between decoder steps; whole: a batch runs "  \
     "to its end before the next one starts [continuous]",                                                         \
     0, NULL}
#define DMT_OPTION_PRECISION(off)                                                                                  \
    {"precision", 0, DMT_OPT_CHOICE, (off), 0, 0, 0, "f32|bf16|int8|auto",                                         \
     "matrix-product arithmetic: bf16 (needs AVX-512 BF16) and int8 are faster, translations differ slightly; "   \
     "auto: the fastest one the model's config.json vouches for by a measured BLEU change, else f32 [auto]",      \
     0, NULL}
#define DMT_OPTION_NO_SHORTLIST(off)                                                                               \
    {"no-shortlist", 0, DMT_OPT_FLAG, (off), 0, 0, 0, "",                                                          \
     "score the whole vocabulary at every step, even where the model directory has a shortlist.bin (which "      \
     "scores only the pieces a sentence's words can need: faster, translations differ slightly) [off]",          \
     0, NULL}
#define DMT_OPTION_MAX_BATCH_SENTENCES(off)                                                                        \
    {"max-batch-sentences", 0, DMT_OPT_INT, (off), 0, 1, 4096, "N",                                                \
     "sentences in one batch; 1 turns batching off; given, it overrides a model's config.json batching "          \
     "[32, or the model's batching.max_sentences where lower]",                                                   \
     0, NULL},                                                                                                     \
    {"batch-size", 0, DMT_OPT_INT, (off), 0, 1, 4096, "N", "the same as --max-batch-sentences",                    \
     DMT_OPT_HIDDEN | DMT_OPT_NO_ENV, NULL}

#endif
