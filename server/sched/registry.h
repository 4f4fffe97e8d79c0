/* registry.h — the models a server serves, and their replacement while it runs
 * (registry.c).
 *
 * A model list names models (a name, a directory, per-model options): the --model
 * flags, or every model directory inside a --models folder (a models.json there
 * may name, order and configure them). The registry loads the list into a model
 * set; a reload (SIGHUP, POST /admin/reload) reads the list again, loads what is
 * new or changed in the background, and installs a new set in one pointer swap.
 *
 * Lifetimes are reference counts, never locks held across work:
 *   - a request acquires the current set (dmt_registry_acquire) and keeps it until
 *     its answer is written: whatever it routes to stays loaded that long;
 *   - a set holds one reference on each of its models;
 *   - a worker that keeps a decoder state for a model holds one on that model,
 *     and drops it (freeing the state) once the model is retired and idle.
 * A model leaves memory when the last of these goes: after a reload replaced or
 * removed it, requests in flight finish on the model they started on.
 */
#ifndef DEEPMT_SERVER_SCHED_REGISTRY_H
#define DEEPMT_SERVER_SCHED_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>

#include "model/config.h"
#include "model/model.h"

#define DMT_MODEL_NAME_MAX 64
#define DMT_MAX_MODELS 32

/* One entry of a model list. */
typedef struct {
    char name[DMT_MODEL_NAME_MAX]; /* [A-Za-z0-9._-], unique in the list */
    char dir[1024];
    int precision;                 /* a dmt_precision */
    int no_shortlist;              /* 1: ignore the directory's shortlist.bin */
} dmt_model_spec;

/* Where the list comes from: dirs given one by one (--model, "NAME=DIR" or DIR),
 * and/or a folder scanned at every reload (--models). */
typedef struct {
    const char *const *dirs;
    int n_dirs;
    const char *folder;            /* NULL: none */
    int precision;                 /* the default for every model (--precision) */
    int no_shortlist;              /* the default for every model (--no-shortlist) */
} dmt_model_source;

/* Reads the list from src into specs (at most DMT_MAX_MODELS); the count, or -1 with
 * a message (an unreadable folder or models.json, a bad name, a duplicate). */
int dmt_model_list_read(const dmt_model_source *src, dmt_model_spec *specs, char *err, size_t errlen);

/* A model being served. Read-only once installed, but for the counters. */
typedef struct dmt_served {
    dmt_model_spec spec;
    dmt_config cfg;                /* its config.json */
    dmt_model *model;              /* loaded weights and tokenizer */
    atomic_int refs;
    atomic_int retired;            /* no longer in the current set: workers drop their states */
    double load_seconds;
    double loaded_at;              /* dmt_now() at install */
    char summary[256];             /* the first line of its README.md (the card), or "" */
    unsigned long long identity;   /* of its three files (device, inode, size, mtime): a change reloads it */
    /* per-model metrics (metrics.c renders them) */
    atomic_long requests, sentences, src_tokens, out_tokens;
    atomic_long latency_us;        /* summed over requests */
    atomic_long pivot_requests;    /* requests that reached it as a leg of a pivot */
} dmt_served;

void dmt_served_ref(dmt_served *m);
void dmt_served_unref(dmt_served *m); /* the last one frees the model */

/* A failure of the latest reload, kept for /models. */
typedef struct {
    char name[DMT_MODEL_NAME_MAX];
    char dir[1024];
    char error[512];
} dmt_load_failure;

/* The models served at one time, in preference order (the list's order). */
typedef struct dmt_model_set {
    atomic_int refs;
    int n;
    dmt_served *models[DMT_MAX_MODELS];
    dmt_config languages;          /* the union of their languages (code, name), in order: detection, /languages */
    int n_failures;
    dmt_load_failure failures[DMT_MAX_MODELS];
    unsigned long generation;      /* 1 for the first set, +1 a reload */
} dmt_model_set;

void dmt_model_set_release(dmt_model_set *set); /* NULL: nothing */
/* The model named name, or NULL. */
dmt_served *dmt_model_set_find(const dmt_model_set *set, const char *name);
/* Whether model m translates from (source) and into (target) these codes. */
int dmt_served_has(const dmt_served *m, const char *code);

/* How source -> target is served: by model *direct, or through English by *first
 * (source -> en) then *second (en -> target). prefer (a model name, or NULL) must
 * then be the direct model. The models are the first in the set's order that can.
 * 0 with the models set (the others NULL), -1 when nothing serves the pair. */
#define DMT_PIVOT_LANGUAGE "en"
int dmt_model_set_route(const dmt_model_set *set, const char *source, const char *target, const char *prefer,
                        dmt_served **direct, dmt_served **first, dmt_served **second);

typedef struct dmt_registry dmt_registry;

dmt_registry *dmt_registry_new(void);
/* Frees the registry and its current set's reference (models still used by
 * someone stay until they let go). */
void dmt_registry_free(dmt_registry *r);

/* Reads the list and loads every model in it that is not loaded already with the
 * same files and options (blocking; call it on a background thread), then installs
 * the new set. A model that fails to load keeps its previous version in the set, if
 * there was one, and is listed in the set's failures. Returns 0 when a set was
 * installed (possibly with failures), -1 with a message when the list could not be
 * read or nothing at all could be loaded the first time (the current set, if any,
 * stays). At most one reload runs at a time: a second caller waits for the first. */
int dmt_registry_reload(dmt_registry *r, const dmt_model_source *src, char *err, size_t errlen);

/* The current set with a reference taken (release it), or NULL before the first
 * successful load. */
dmt_model_set *dmt_registry_acquire(dmt_registry *r);

#endif
