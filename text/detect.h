/* detect.h — which of a model's languages a text is in (detect.c over CLD2). */
#ifndef DEEPMT_TEXT_DETECT_H
#define DEEPMT_TEXT_DETECT_H

#include <stddef.h>

#include "model/config.h"

typedef struct {
    const char *code;          /* a model language code (points into the config) */
    double confidence;         /* 0..100, calibrated: docs/server.md */
} dmt_detect_guess;

/* The model languages text may be in, best first (up to max; the best is always
 * there when the model has languages). Returns how many were filled. */
int dmt_detect(const dmt_config *mcfg, const char *text, size_t len, dmt_detect_guess *out, int max);
/* Just the best guess; NULL only for a model without languages. */
const char *dmt_detect_language(const dmt_config *mcfg, const char *text, size_t len, double *confidence);

#endif
