/* test_options.c — the option parser every command uses (base/options.h): values
 * of each type and their ranges, flags, choices and sizes, the environment and a
 * flag's precedence over it, short names, positional arguments and "--", "did you
 * mean", hidden old names, and how --threads and --workers split the cores.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "tests/c/check.h"

typedef struct {
    char model[64];
    int threads, workers, batching, flag, n;
    long big;
    size_t bytes;
    float x;
} target;

#define F(f) offsetof(target, f)
static const dmt_option opts[] = {
    DMT_OPTION_MODEL(F(model), sizeof ((target *)0)->model),
    DMT_OPTION_THREADS(F(threads)),
    DMT_OPTION_WORKERS(F(workers)),
    DMT_OPTION_BATCHING(F(batching)),
    DMT_OPTION_MAX_BATCH_SENTENCES(F(n)),
    {"flag", 'f', DMT_OPT_FLAG, F(flag), 0, 0, 0, "", "a flag", DMT_OPT_NO_ENV, NULL},
    {"big", 0, DMT_OPT_LONG, F(big), 0, 0, 1e12, "N", "a long", 0, NULL},
    {"bytes", 0, DMT_OPT_SIZE, F(bytes), 0, 1024, 1 << 30, "BYTES", "a size", 0, NULL},
    {"x", 0, DMT_OPT_FLOAT, F(x), 0, -1, 1, "X", "a number", 0, NULL},
};
#undef F
#define N (int)(sizeof opts / sizeof *opts)

static char err[256];
static const char *pos[2];
static int n_pos, given[N];

/* Parses the words of line (space-separated) as argv after "cmd". */
static int parse(target *t, const char *line) {
    static char buf[512];
    char *argv[32] = {"deepmt-test"};
    int argc = 1;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w && argc < 31; w = strtok(NULL, " ")) argv[argc++] = w;
    memset(t, 0, sizeof *t);
    memset(given, 0, sizeof given);
    err[0] = 0;
    return dmt_options_parse("test", opts, N, t, argc, argv, given, pos, 2, &n_pos, err, sizeof err);
}

int main(void) {
    target t;
    unsetenv("DEEPMT_THREADS");
    unsetenv("DEEPMT_MODEL");
    CHECK(parse(&t, "--threads 3 --workers=2 -m dir --batching whole --max-batch-sentences 8") == 0 &&
              t.threads == 3 && t.workers == 2 && !strcmp(t.model, "dir") && t.batching == 0 && t.n == 8,
          "values by --name V, --name=V and -x V", "%s", err);
    CHECK(parse(&t, "-mdir2 --batching continuous") == 0 && !strcmp(t.model, "dir2") && t.batching == 1,
          "-xVALUE; a choice gives its index", "%s", err);
    CHECK(parse(&t, "--threads 1025") < 0 && strstr(err, "--threads: expected an integer from 0 to 1024, got '1025'"),
          "out of range: refused, naming the option and its range", "%s", err);
    CHECK(parse(&t, "--threads 2x") < 0 && parse(&t, "--threads") < 0 && strstr(err, "--threads needs a value"),
          "not a number, or no value: refused", "%s", err);
    CHECK(parse(&t, "--batching fast") < 0 && strstr(err, "expected whole or continuous, got 'fast'"),
          "a choice not among them: the choices listed", "%s", err);
    CHECK(parse(&t, "--bytes 2k --big 1000000000000 --x -0.5") == 0 && t.bytes == 2048 && t.big == 1000000000000L &&
              t.x == -0.5f,
          "sizes with suffixes, longs, floats", "%s", err);
    CHECK(parse(&t, "--bytes 10") < 0 && parse(&t, "--x 2") < 0 && parse(&t, "--x nan") < 0,
          "a size or a float out of range (or not finite): refused");
    CHECK(parse(&t, "--flag -f") == 0 && t.flag == 1 && parse(&t, "--flag=1") < 0 && strstr(err, "takes no value"),
          "a flag takes no value", "%s", err);
    CHECK(parse(&t, "--thraeds 2") < 0 && strstr(err, "did you mean --threads?"), "a mistyped name: did you mean",
          "%s", err);
    CHECK(parse(&t, "--batch-size 4") == 0 && t.n == 4, "a hidden old name still works");
    CHECK(parse(&t, "--batch-sise 4") < 0 && strstr(err, "did you mean --max-batch-sentences?") == NULL,
          "a hidden name is never suggested", "%s", err);
    CHECK(parse(&t, "a b") == 0 && n_pos == 2 && !strcmp(pos[0], "a") && !strcmp(pos[1], "b") &&
              parse(&t, "a b c") < 0 && strstr(err, "unexpected argument 'c'"),
          "positional arguments, at most as many as allowed", "%s", err);
    CHECK(parse(&t, "-- --threads") == 0 && n_pos == 1 && !strcmp(pos[0], "--threads") && t.threads == 0,
          "after --, everything is positional");
    CHECK(parse(&t, "--help") == 1 && parse(&t, "-h") == 1, "--help and -h: 1");
    CHECK(parse(&t, "--zzzzzz") < 0 && strstr(err, "see deepmt test --help"), "an option like none: a pointer to --help",
          "%s", err);

    setenv("DEEPMT_THREADS", "5", 1);
    setenv("DEEPMT_MODEL", "envdir", 1);
    CHECK(parse(&t, "") == 0 && t.threads == 5 && !strcmp(t.model, "envdir") && given[1] && given[0],
          "the environment sets an option (and counts as given)", "%s", err);
    CHECK(parse(&t, "--threads 2") == 0 && t.threads == 2, "a flag wins over its variable");
    setenv("DEEPMT_THREADS", "lots", 1);
    CHECK(parse(&t, "") < 0 && strstr(err, "DEEPMT_THREADS: expected an integer"), "a bad variable is named",
          "%s", err);
    unsetenv("DEEPMT_THREADS");
    unsetenv("DEEPMT_MODEL");
    setenv("DEEPMT_FLAG", "1", 1);
    CHECK(parse(&t, "") == 0 && t.flag == 0, "an option marked NO_ENV ignores its variable");
    unsetenv("DEEPMT_FLAG");

    char env[64];
    dmt_option_env_name("max-batch-sentences", env, sizeof env);
    CHECK(!strcmp(env, "DEEPMT_MAX_BATCH_SENTENCES"), "the variable of a name", "%s", env);

    int w, b;
    dmt_options_threads(8, 0, &w, &b);
    CHECK(w == 4 && b == 2, "--threads 8: 4 workers x 2 BLAS threads", "%d x %d", w, b);
    dmt_options_threads(3, 0, &w, &b);
    CHECK(w == 3 && b == 1, "--threads 3: 3 workers x 1", "%d x %d", w, b);
    dmt_options_threads(1, 3, &w, &b);
    CHECK(w == 3 && b == 1, "more workers than threads: one BLAS thread each, at least", "%d x %d", w, b);
    dmt_options_threads(6, 1, &w, &b);
    CHECK(w == 1 && b == 6, "--workers 1 --threads 6: one worker with 6", "%d x %d", w, b);
    dmt_options_threads(0, 0, &w, &b);
    CHECK(w >= 1 && w <= 4 && b >= 1, "defaults: the cores", "%d x %d", w, b);
    return check_done();
}
