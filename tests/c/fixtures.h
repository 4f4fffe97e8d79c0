/* fixtures.h — where the committed test fixtures live (tests/fixtures, or $DEEPMT_FIXTURES). */
#ifndef DEEPMT_TESTS_FIXTURES_H
#define DEEPMT_TESTS_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>

static inline const char *fixtures_dir(void) {
    const char *d = getenv("DEEPMT_FIXTURES");
    return d && *d ? d : "tests/fixtures";
}

/* path = <fixtures>/<rel> */
static inline const char *fixture_path(char *buf, size_t cap, const char *rel) {
    snprintf(buf, cap, "%s/%s", fixtures_dir(), rel);
    return buf;
}

#endif
