/* registry.c — model lists, model sets and reloads (registry.h). */
#include "server/sched/registry.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/fileio.h"
#include "server/clock.h"

/* ------------------------------------------------------------ model lists -- */

static int valid_name(const char *s) {
    if (!*s || strlen(s) >= DMT_MODEL_NAME_MAX) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* A directory's last component, without trailing slashes: the default model name. */
static void base_name(const char *dir, char *out, size_t cap) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(out, cap, "%.*s", (int)(len - start), dir + start);
}

static int add_spec(dmt_model_spec *specs, int n, const char *name, const char *dir, int precision, int no_shortlist,
                    char *err, size_t errlen) {
    if (n >= DMT_MAX_MODELS) {
        snprintf(err, errlen, "more than %d models", DMT_MAX_MODELS);
        return -1;
    }
    if (!valid_name(name)) {
        snprintf(err, errlen, "model name '%.64s' (of %.200s): use letters, digits, '.', '_' and '-' (at most %d)",
                 name, dir, DMT_MODEL_NAME_MAX - 1);
        return -1;
    }
    if (strlen(dir) >= sizeof specs[0].dir) {
        snprintf(err, errlen, "model directory name too long: %.100s...", dir);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(specs[i].name, name)) {
            snprintf(err, errlen, "two models named '%s' (%.200s and %.200s): name them with NAME=DIR or models.json",
                     name, specs[i].dir, dir);
            return -1;
        }
    dmt_model_spec *s = &specs[n];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->precision = precision;
    s->no_shortlist = no_shortlist;
    return 0;
}

static int parse_precision(const char *s, int *out) {
    if (!strcmp(s, "f32")) *out = DMT_PRECISION_F32;
    else if (!strcmp(s, "bf16")) *out = DMT_PRECISION_BF16;
    else if (!strcmp(s, "int8")) *out = DMT_PRECISION_INT8;
    else if (!strcmp(s, "auto")) *out = DMT_PRECISION_AUTO;
    else return -1;
    return 0;
}

/* FOLDER/models.json: {"models": [{"name", "dir", "precision", "shortlist"}, ...]} in preference
 * order; dir defaults to the name and is relative to the folder. */
static int read_models_json(const char *folder, const char *path, const dmt_model_source *src, dmt_model_spec *specs, int n,
                            char *err, size_t errlen) {
    char ferr[512];
    size_t len;
    char *text = dmt_file_read_small(path, 1 << 20, &len, ferr, sizeof ferr);
    if (!text) {
        snprintf(err, errlen, "%s", ferr);
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    free(text);
    json_t *list = root ? json_object_get(root, "models") : NULL;
    if (!json_is_array(list)) {
        snprintf(err, errlen, "%s: %s", path, root ? "expected {\"models\": [...]}" : je.text);
        json_decref(root);
        return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *dir = json_string_value(json_object_get(e, "dir"));
        const char *prec = json_string_value(json_object_get(e, "precision"));
        json_t *shortlist = json_object_get(e, "shortlist");
        int p = src->precision;
        if (!json_is_object(e) || (!name && !dir)) {
            snprintf(err, errlen, "%s: models[%zu] needs a \"name\" or a \"dir\"", path, i);
            goto fail;
        }
        if (prec && parse_precision(prec, &p)) {
            snprintf(err, errlen, "%s: models[%zu]: precision must be f32, bf16, int8 or auto", path, i);
            goto fail;
        }
        if (shortlist && !json_is_boolean(shortlist)) {
            snprintf(err, errlen, "%s: models[%zu]: shortlist must be true or false", path, i);
            goto fail;
        }
        char full[1100], nm[DMT_MODEL_NAME_MAX + 1];
        if (!dir) dir = name;
        if (dir[0] == '/') snprintf(full, sizeof full, "%s", dir);
        else snprintf(full, sizeof full, "%s/%s", folder, dir);
        if (!name) base_name(dir, nm, sizeof nm), name = nm;
        int no_shortlist = shortlist ? json_is_false(shortlist) : src->no_shortlist;
        if (add_spec(specs, n, name, full, p, no_shortlist, err, errlen)) goto fail;
        n++;
    }
    json_decref(root);
    return n;
fail:
    json_decref(root);
    return -1;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const dmt_model_spec *)a)->name, ((const dmt_model_spec *)b)->name);
}

/* Every subfolder of folder with a config.json, by name. */
static int scan_folder(const char *folder, const dmt_model_source *src, dmt_model_spec *specs, int n, char *err,
                       size_t errlen) {
    DIR *d = opendir(folder);
    if (!d) {
        snprintf(err, errlen, "--models %s: %s", folder, strerror(errno));
        return -1;
    }
    int first = n;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char dir[1100], cfg[1200];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/%s", folder, de->d_name);
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        if (stat(cfg, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (add_spec(specs, n, de->d_name, dir, src->precision, src->no_shortlist, err, errlen)) {
            closedir(d);
            return -1;
        }
        n++;
    }
    closedir(d);
    qsort(specs + first, (size_t)(n - first), sizeof *specs, by_name);
    return n;
}

int dmt_model_list_read(const dmt_model_source *src, dmt_model_spec *specs, char *err, size_t errlen) {
    int n = 0;
    for (int i = 0; i < src->n_dirs; i++) {
        const char *arg = src->dirs[i], *eq = strchr(arg, '=');
        char name[DMT_MODEL_NAME_MAX + 1];
        const char *dir = arg;
        if (eq && eq > arg && (size_t)(eq - arg) < sizeof name) { /* NAME=DIR */
            snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
            dir = eq + 1;
        } else {
            base_name(arg, name, sizeof name);
        }
        if (add_spec(specs, n, name, dir, src->precision, src->no_shortlist, err, errlen)) return -1;
        n++;
    }
    if (src->folder && *src->folder) {
        char path[1100];
        struct stat st;
        snprintf(path, sizeof path, "%s/models.json", src->folder);
        n = stat(path, &st) == 0 ? read_models_json(src->folder, path, src, specs, n, err, errlen)
                                 : scan_folder(src->folder, src, specs, n, err, errlen);
        if (n < 0) return -1;
        if (n == 0) {
            snprintf(err, errlen, "--models %s: no model directories in it (folders with a config.json)",
                     src->folder);
            return -1;
        }
    }
    if (n == 0) snprintf(err, errlen, "no model given");
    return n > 0 ? n : -1;
}

/* ----------------------------------------------------------------- models -- */

void dmt_served_ref(dmt_served *m) { atomic_fetch_add(&m->refs, 1); }

void dmt_served_unref(dmt_served *m) {
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    dmt_model_free(m->model);
    free(m);
}

int dmt_served_has(const dmt_served *m, const char *code) {
    for (int i = 0; i < m->cfg.n_languages; i++)
        if (!strcmp(m->cfg.languages[i].code, code)) return 1;
    return 0;
}

/* The files a model is made of, as they are on disk now: a reload reloads a model
 * whose files changed (a new export over the old one). 0 when one cannot be read. */
static unsigned long long files_identity(const char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors", "sentencepiece.model", "shortlist.bin"};
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[1100];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &st) != 0) {
            if (!strcmp(files[i], "shortlist.bin") && errno == ENOENT) continue; /* optional */
            return 0;
        }
        unsigned long long v[5] = {(unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                                   (unsigned long long)st.st_size, (unsigned long long)st.st_mtim.tv_sec,
                                   (unsigned long long)st.st_mtim.tv_nsec};
        for (int k = 0; k < 5; k++) h = (h ^ v[k]) * 1099511628211ull;
    }
    return h;
}

/* The card's title: README.md's first line, without its '#'. */
static void card_summary(const char *dir, char *out, size_t cap) {
    char path[1100], err[256];
    size_t len;
    out[0] = 0;
    snprintf(path, sizeof path, "%s/README.md", dir);
    char *text = dmt_file_read_small(path, 1 << 20, &len, err, sizeof err);
    if (!text) return;
    const char *s = text;
    while (*s == '#' || *s == ' ') s++;
    size_t n = strcspn(s, "\r\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
    free(text);
}

static dmt_served *load_one(const dmt_model_spec *spec, char *err, size_t errlen) {
    dmt_served *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    double t0 = dmt_now();
    m->spec = *spec;
    m->identity = files_identity(spec->dir);
    m->model = dmt_model_load(spec->dir,
                              (dmt_load_options){.precision = (dmt_precision)spec->precision,
                                                 .no_shortlist = spec->no_shortlist},
                              err, errlen);
    if (m->model && !m->model->tokenizer) {
        snprintf(err, errlen, "%s: the model has no tokenizer (sentencepiece.model)", spec->dir);
        dmt_model_free(m->model);
        m->model = NULL;
    }
    if (m->model && m->model->cfg.n_languages == 0) {
        snprintf(err, errlen, "%s/config.json lists no languages", spec->dir);
        dmt_model_free(m->model);
        m->model = NULL;
    }
    if (!m->model) {
        free(m);
        return NULL;
    }
    m->cfg = m->model->cfg;
    card_summary(spec->dir, m->summary, sizeof m->summary);
    m->load_seconds = dmt_now() - t0;
    atomic_store(&m->refs, 1);
    return m;
}

/* ------------------------------------------------------------------- sets -- */

void dmt_model_set_release(dmt_model_set *set) {
    if (!set || atomic_fetch_sub(&set->refs, 1) != 1) return;
    for (int i = 0; i < set->n; i++) dmt_served_unref(set->models[i]);
    free(set);
}

dmt_served *dmt_model_set_find(const dmt_model_set *set, const char *name) {
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->models[i]->spec.name, name)) return set->models[i];
    return NULL;
}

int dmt_model_set_route(const dmt_model_set *set, const char *source, const char *target, const char *prefer,
                        dmt_served **direct, dmt_served **first, dmt_served **second) {
    *direct = *first = *second = NULL;
    for (int i = 0; i < set->n && !*direct; i++) {
        dmt_served *m = set->models[i];
        if ((!prefer || !strcmp(prefer, m->spec.name)) && dmt_served_has(m, source) && dmt_served_has(m, target))
            *direct = m;
    }
    if (*direct) return 0;
    if (prefer || !strcmp(source, DMT_PIVOT_LANGUAGE) || !strcmp(target, DMT_PIVOT_LANGUAGE)) return -1;
    dmt_served *a = NULL, *b = NULL;
    for (int i = 0; i < set->n; i++) {
        dmt_served *m = set->models[i];
        if (!a && dmt_served_has(m, source) && dmt_served_has(m, DMT_PIVOT_LANGUAGE)) a = m;
        if (!b && dmt_served_has(m, DMT_PIVOT_LANGUAGE) && dmt_served_has(m, target)) b = m;
    }
    if (!a || !b) return -1;
    *first = a;
    *second = b;
    return 0;
}

/* The union of the models' languages, first appearance first. */
static void union_languages(dmt_model_set *set) {
    dmt_config *u = &set->languages;
    for (int i = 0; i < set->n; i++) {
        const dmt_config *c = &set->models[i]->cfg;
        for (int l = 0; l < c->n_languages; l++) {
            int seen = 0;
            for (int k = 0; k < u->n_languages && !seen; k++) seen = !strcmp(u->languages[k].code, c->languages[l].code);
            if (!seen && u->n_languages < DMT_MAX_LANGUAGES) u->languages[u->n_languages++] = c->languages[l];
        }
    }
}

/* --------------------------------------------------------------- registry -- */

struct dmt_registry {
    pthread_mutex_t mu;        /* guards current */
    pthread_mutex_t reload_mu; /* one reload at a time */
    dmt_model_set *current;
    unsigned long generation;
};

dmt_registry *dmt_registry_new(void) {
    dmt_registry *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->reload_mu, NULL);
    return r;
}

void dmt_registry_free(dmt_registry *r) {
    if (!r) return;
    dmt_model_set_release(r->current);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->reload_mu);
    free(r);
}

dmt_model_set *dmt_registry_acquire(dmt_registry *r) {
    pthread_mutex_lock(&r->mu);
    dmt_model_set *s = r->current;
    if (s) atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&r->mu);
    return s;
}

static dmt_served *find_same(const dmt_model_set *old, const dmt_model_spec *spec, unsigned long long identity) {
    for (int i = 0; old && i < old->n; i++) {
        const dmt_served *m = old->models[i];
        if (!strcmp(m->spec.name, spec->name) && !strcmp(m->spec.dir, spec->dir) &&
            m->spec.precision == spec->precision && m->spec.no_shortlist == spec->no_shortlist &&
            m->identity == identity && identity != 0)
            return old->models[i];
    }
    return NULL;
}

int dmt_registry_reload(dmt_registry *r, const dmt_model_source *src, char *err, size_t errlen) {
    dmt_model_spec specs[DMT_MAX_MODELS];
    pthread_mutex_lock(&r->reload_mu);
    int n = dmt_model_list_read(src, specs, err, errlen);
    if (n < 0) {
        pthread_mutex_unlock(&r->reload_mu);
        return -1;
    }
    dmt_model_set *old = dmt_registry_acquire(r), *set = calloc(1, sizeof *set);
    if (!set) {
        dmt_model_set_release(old);
        pthread_mutex_unlock(&r->reload_mu);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        dmt_served *m = find_same(old, &specs[i], files_identity(specs[i].dir));
        char lerr[512] = "";
        if (m) {
            dmt_served_ref(m);
        } else if (!(m = load_one(&specs[i], lerr, sizeof lerr))) {
            dmt_load_failure *f = &set->failures[set->n_failures++];
            memcpy(f->name, specs[i].name, sizeof f->name); /* the same sizes, NUL-terminated */
            memcpy(f->dir, specs[i].dir, sizeof f->dir);
            snprintf(f->error, sizeof f->error, "%s", lerr[0] ? lerr : "cannot load");
            m = old ? dmt_model_set_find(old, specs[i].name) : NULL; /* the previous version serves on */
            if (m) dmt_served_ref(m);
        } else {
            m->loaded_at = dmt_now();
        }
        if (m) set->models[set->n++] = m;
    }
    if (set->n == 0) {
        snprintf(err, errlen, "%s", set->n_failures ? set->failures[0].error : "no model");
        dmt_model_set_release(old);
        atomic_store(&set->refs, 1);
        dmt_model_set_release(set);
        pthread_mutex_unlock(&r->reload_mu);
        return -1;
    }
    union_languages(set);
    atomic_store(&set->refs, 1); /* the registry's */
    pthread_mutex_lock(&r->mu);
    set->generation = ++r->generation;
    dmt_model_set *prev = r->current;
    r->current = set;
    pthread_mutex_unlock(&r->mu);
    /* what the new set no longer holds is retired: workers drop their states for it */
    for (int i = 0; old && i < old->n; i++) {
        int kept = 0;
        for (int k = 0; k < set->n && !kept; k++) kept = set->models[k] == old->models[i];
        if (!kept) atomic_store(&old->models[i]->retired, 1);
    }
    dmt_model_set_release(prev);
    dmt_model_set_release(old);
    pthread_mutex_unlock(&r->reload_mu);
    return 0;
}
