/* fuzz_shortlist.c — libFuzzer target for a model directory's shortlist.bin.
 *
 * An input is the file's bytes. They are written to a private temporary file and
 * loaded with the real loader (dmt_shortlist_load) against a fixed small model
 * configuration: 60 pieces, </s> = 2, four languages with tokens 4-7. A load must
 * either fail with a message or give a shortlist whose answers keep its promises,
 * checked here for a few sources and every target (a table's language, a language
 * without a table, none):
 *   - no bit at or past the vocabulary size is set in a sentence's bitmap;
 *   - a sentence with a table allows </s> and its own source pieces;
 *   - a sentence without one leaves the bitmap untouched;
 *   - a batch's dmt_vocab takes sentences joining and leaving.
 * Findings: memory errors, undefined behaviour, leaks, hangs, a failed load without
 * a message, and a broken promise (abort()). tests/fuzz/make_seeds.sh writes the
 * seeds (valid files with u16 and u32 entries, 0-2 tables).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/shortlist.h"

#define VOCAB 60 /* not a multiple of 64: the last bitmap word has bits past the end */
#define EOS 2

static char dir[256], path[300];
static dmt_config cfg;

static void cleanup(void) {
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    struct stat sb;
    const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/deepmt-fuzz-shortlist-XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("fuzz_shortlist: mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s", dir, DMT_SHORTLIST_FILE);
    atexit(cleanup);
    cfg.vocab_size = VOCAB;
    cfg.pad_id = 1, cfg.bos_id = 0, cfg.eos_id = EOS, cfg.unk_id = 3, cfg.decoder_start_id = EOS;
    static const char *codes[] = {"en", "de", "fr", "cs"};
    cfg.n_languages = 4;
    for (int i = 0; i < 4; i++) {
        snprintf(cfg.languages[i].code, sizeof cfg.languages[i].code, "%s", codes[i]);
        snprintf(cfg.languages[i].token, sizeof cfg.languages[i].token, "__%s__", codes[i]);
        cfg.languages[i].id = 4 + i;
    }
    return 0;
}

static void write_all(const uint8_t *p, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) { perror(path); abort(); }
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { perror(path); abort(); }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

static int bit(const uint64_t *allow, int piece) { return (int)(allow[piece / 64] >> (piece % 64) & 1); }

static void broken(const char *promise, int target) {
    fprintf(stderr, "fuzz_shortlist: %s (target %d)\n", promise, target);
    abort();
}

static void check(const dmt_shortlist *sl) {
    static const int32_t src[] = {0, 5, 9, 17, 33, 59, 59, EOS};
    static const int targets[] = {-1, 4, 5, 6, 7, 9, 59};
    int words = dmt_shortlist_words(sl);
    if (words != (VOCAB + 63) / 64) broken("bitmap words do not fit the vocabulary", -1);
    uint64_t allow[(VOCAB + 63) / 64];
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        for (int len = 0; len <= (int)(sizeof src / sizeof *src); len++) {
            memset(allow, 0xA5, sizeof allow); /* a table overwrites it all; no table leaves it */
            if (!dmt_shortlist_sentence(sl, targets[t], src, len, allow)) {
                for (int w = 0; w < words; w++)
                    if (allow[w] != 0xA5A5A5A5A5A5A5A5ull) broken("a sentence without a table changed its bitmap", targets[t]);
                continue;
            }
            if (allow[words - 1] >> (VOCAB % 64)) broken("a bit past the vocabulary is set", targets[t]);
            if (!bit(allow, EOS)) broken("</s> not allowed", targets[t]);
            for (int i = 0; i < len; i++)
                if (!bit(allow, src[i])) broken("a source piece not allowed", targets[t]);
        }
    }
    char desc[200];
    if (!dmt_shortlist_describe(sl, desc, sizeof desc) || !memchr(desc, 0, sizeof desc))
        broken("no description", -1);
    dmt_vocab *v = dmt_vocab_new(sl, 3);
    if (!v) return; /* out of memory is not a finding */
    dmt_vocab_join(v, 0, 5, src, 8);
    dmt_vocab_join(v, 1, 9, src + 2, 3);
    dmt_vocab_join(v, 2, -1, src, 0);
    dmt_vocab_leave(v, 1);
    dmt_vocab_leave(v, 1);
    dmt_vocab_leave(v, 7);
    dmt_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_all(data, size);
    char err[1024] = "";
    dmt_shortlist *sl = dmt_shortlist_load(path, &cfg, err, sizeof err);
    if (!sl && !err[0]) {
        fprintf(stderr, "fuzz_shortlist: a load failed without a message\n");
        abort();
    }
    if (sl) check(sl);
    dmt_shortlist_free(sl);
    return 0;
}
