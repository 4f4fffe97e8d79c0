/* files.c — /translate_file and /download_file (files.h). */
#include "server/api/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <libxml/parser.h>

#include "server/api/api.h"
#include "text/documents.h"

#define FILES_KEEP_SECONDS 1800   /* a result can be fetched for 30 minutes, never less */
#define FILES_MAX_STORED 1000     /* results kept at once: when full, uploads get 429 */
#define FILES_MAX_BYTES (512u << 20)
#define FILES_MAX_PER_CLIENT 100  /* results of one client (API key when keys are on, else address) */
#define FIELD_MAX 256             /* source, target */
#define KEY_MAX 1025              /* api_key: keys may be 1,024 bytes (config.c) */
#define FILES_MAX_PARSE_QUEUE 64  /* uploads waiting for the parser thread; 429 beyond */
#define FILES_PATH_MAX 448        /* the folder (255), "/", the id (32), ".", the name (127) */
#define FILES_SWEEP_SECONDS 60    /* a shared folder is swept of expired results this often */
#define PRIVATE_PREFIX "deepmt-files-"
#define PRIVATE_LOCK ".owner.lock" /* held (flock) by the server whose private folder it is */

/* what a stored file's name may hold (anything else becomes '_') */
#define FILE_NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"

typedef struct {
    char id[33];
    char name[128];
    char owner[72];            /* who uploaded it (owner_of) */
    size_t size;
    time_t expires;
} stored;

struct dmt_files {
    char dir[256];
    int shared;                /* --files-dir: other replicas read (and sweep) the folder too */
    int lock_fd;               /* private: PRIVATE_LOCK, flock()ed while this process lives */
    int stale_dirs;            /* private folders of dead servers removed at start */
    unsigned long long stale_bytes;
    time_t swept;              /* shared: when the folder was last swept of expired results */
    pthread_mutex_t mu;
    stored *items;             /* oldest first */
    int n;
    size_t bytes;
    /* the parser thread: documents are parsed here, never on an HTTP thread */
    pthread_t parser;
    int parser_started;
    pthread_mutex_t qmu;
    pthread_cond_t qcond;      /* a job queued, or stop */
    dmt_file_job *head, *tail; /* waiting to be parsed, oldest first */
    int queued, stop;
    size_t in_flight;          /* bytes of the uploads of every job alive (under qmu) */
    size_t max_in_flight;      /* --max-file-memory: 429 beyond it */
};

struct dmt_file_job {
    dmt_files *fs;             /* counts len in fs->in_flight while the job lives */
    dmt_doc *doc;
    char *data;                /* the upload; the document borrows it */
    size_t len;
    char name[128];            /* the upload's file name, made safe */
    char source[FIELD_MAX], target[FIELD_MAX], api_key[KEY_MAX];
    int has_api_key;
    char owner[72];            /* whose quota the result counts against (dmt_files_admit) */
    /* parsing (the parser thread) */
    dmt_file_job *next;
    void (*parsed)(void *arg);
    void *parsed_arg;
    int status;                /* 0, or the HTTP status of a refusal (message in err) */
    char err[512];
};

static void parse_job(dmt_file_job *job);

/* The parser thread: parses queued documents one at a time (their memory is then
 * bounded by one document's), then calls back so that the HTTP side resumes. */
static void *parser_main(void *arg) {
    dmt_files *fs = arg;
    pthread_mutex_lock(&fs->qmu);
    for (;;) {
        while (!fs->head && !fs->stop) pthread_cond_wait(&fs->qcond, &fs->qmu);
        if (!fs->head) break; /* stop, and nothing left */
        dmt_file_job *job = fs->head;
        fs->head = job->next;
        if (!fs->head) fs->tail = NULL;
        fs->queued--;
        pthread_mutex_unlock(&fs->qmu);
        parse_job(job);
        job->parsed(job->parsed_arg); /* job may be freed from here on */
        pthread_mutex_lock(&fs->qmu);
    }
    pthread_mutex_unlock(&fs->qmu);
    return NULL;
}

/* Removes every file in dir (not below it), counting their bytes into *bytes, then
 * dir itself. */
static int remove_folder(const char *dir, unsigned long long *bytes) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[600];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (bytes && lstat(path, &st) == 0 && S_ISREG(st.st_mode)) *bytes += (unsigned long long)st.st_size;
        unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

/* A server killed outright (SIGKILL, the OOM killer, a power cut) cannot remove its
 * private folder; under a restart policy such folders pile up, each holding up to
 * FILES_MAX_BYTES of results. At start, every sibling folder whose owner's lock is
 * free (flock() locks die with their process) is removed. Folders without the lock
 * file, of other users, or whose lock is held are left alone. */
static void sweep_dead_servers(dmt_files *fs, const char *tmp) {
    DIR *d = opendir(tmp);
    if (!d) return;
    const char *own = fs->dir + strlen(tmp) + 1;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, PRIVATE_PREFIX, strlen(PRIVATE_PREFIX)) || !strcmp(e->d_name, own) ||
            strlen(e->d_name) != strlen(own))
            continue;
        char dir[FILES_PATH_MAX], lock[FILES_PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s/%s", tmp, e->d_name);
        struct stat st;
        if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
        snprintf(lock, sizeof lock, "%s/" PRIVATE_LOCK, dir);
        int fd = open(lock, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && remove_folder(dir, &fs->stale_bytes) == 0) fs->stale_dirs++;
        close(fd);
    }
    closedir(d);
}

/* The folder: a private one under $TMPDIR, or dir (created when missing, kept). */
static int make_dir(dmt_files *fs, const char *dir, char *err, size_t errlen) {
    if (dir && *dir) {
        if (strlen(dir) + 80 > sizeof fs->dir) {
            snprintf(err, errlen, "--files-dir is longer than %zu bytes", sizeof fs->dir - 80);
            return -1;
        }
        snprintf(fs->dir, sizeof fs->dir, "%s", dir);
        fs->shared = 1;
        if (mkdir(fs->dir, 0700) && errno != EEXIST) {
            snprintf(err, errlen, "cannot create --files-dir %s: %s", dir, strerror(errno));
            return -1;
        }
        if (access(fs->dir, W_OK | X_OK)) {
            snprintf(err, errlen, "cannot write to --files-dir %s: %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    if (strlen(tmp) + 80 > sizeof fs->dir) {
        snprintf(err, errlen, "TMPDIR is longer than %zu bytes", sizeof fs->dir - 80);
        return -1;
    }
    snprintf(fs->dir, sizeof fs->dir, "%s/" PRIVATE_PREFIX "XXXXXX", tmp);
    if (!mkdtemp(fs->dir)) {
        snprintf(err, errlen, "cannot create a folder for translated files in %s: %s", tmp, strerror(errno));
        return -1;
    }
    /* the lock is taken before its name appears, so a sweeping neighbour never finds
     * the folder of a live server unlocked */
    char path[FILES_PATH_MAX], held[FILES_PATH_MAX];
    snprintf(path, sizeof path, "%s/.owner.new", fs->dir);
    snprintf(held, sizeof held, "%s/" PRIVATE_LOCK, fs->dir);
    fs->lock_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fs->lock_fd < 0 || flock(fs->lock_fd, LOCK_EX | LOCK_NB) || rename(path, held)) {
        snprintf(err, errlen, "cannot lock the folder for translated files %s: %s", fs->dir, strerror(errno));
        if (fs->lock_fd >= 0) close(fs->lock_fd);
        fs->lock_fd = -1;
        unlink(path);
        rmdir(fs->dir);
        return -1;
    }
    sweep_dead_servers(fs, tmp);
    return 0;
}

dmt_files *dmt_files_new(const char *dir, size_t max_in_flight, char *err, size_t errlen) {
    xmlInitParser(); /* once, before HTTP threads use libxml2 */
    dmt_files *fs = calloc(1, sizeof *fs);
    if (fs) fs->items = calloc(FILES_MAX_STORED, sizeof *fs->items);
    if (fs) fs->lock_fd = -1;
    if (!fs || !fs->items) {
        if (fs) free(fs);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (make_dir(fs, dir, err, errlen)) {
        free(fs->items);
        free(fs);
        return NULL;
    }
    fs->max_in_flight = max_in_flight;
    pthread_mutex_init(&fs->mu, NULL);
    pthread_mutex_init(&fs->qmu, NULL);
    pthread_cond_init(&fs->qcond, NULL);
    if (pthread_create(&fs->parser, NULL, parser_main, fs)) {
        snprintf(err, errlen, "cannot start the document parser thread");
        dmt_files_free(fs);
        return NULL;
    }
    fs->parser_started = 1;
    return fs;
}

const char *dmt_files_dir(const dmt_files *fs) { return fs->dir; }
int dmt_files_shared(const dmt_files *fs) { return fs->shared; }
int dmt_files_stale_removed(const dmt_files *fs, unsigned long long *bytes) {
    if (bytes) *bytes = fs->stale_bytes;
    return fs->stale_dirs;
}

void dmt_files_stop_parsing(dmt_files *fs) {
    if (!fs || !fs->parser_started) return;
    pthread_mutex_lock(&fs->qmu);
    fs->stop = 1;
    pthread_cond_broadcast(&fs->qcond);
    pthread_mutex_unlock(&fs->qmu);
    pthread_join(fs->parser, NULL); /* it finishes what is queued first */
    fs->parser_started = 0;
}

int dmt_files_parse_async(dmt_files *fs, dmt_file_job *job, void (*parsed)(void *arg), void *arg, char *err,
                          size_t errlen) {
    job->parsed = parsed;
    job->parsed_arg = arg;
    job->next = NULL;
    pthread_mutex_lock(&fs->qmu);
    int rc = 0;
    if (fs->stop || !fs->parser_started) {
        snprintf(err, errlen, "the server is shutting down");
        rc = 503;
    } else if (fs->queued >= FILES_MAX_PARSE_QUEUE) {
        snprintf(err, errlen, "too many requests: %d documents are waiting to be read; try again shortly",
                 fs->queued);
        rc = 429;
    } else {
        if (fs->tail) fs->tail->next = job;
        else fs->head = job;
        fs->tail = job;
        fs->queued++;
        pthread_cond_signal(&fs->qcond);
    }
    pthread_mutex_unlock(&fs->qmu);
    return rc;
}

/* A result is the file "ID.NAME" in the folder: any process that shares the
 * folder finds it by its id alone, and its age (mtime) says when it expires. It is
 * written as ".part-ID" and renamed, so that no reader sees half a file. */
static void path_of(const dmt_files *fs, const char *id, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s.%s", fs->dir, id, name);
}

static int is_id(const char *s) { return strspn(s, "0123456789abcdef") == 32; }

/* Drops item i (file and entry). Caller holds mu. */
static void drop(dmt_files *fs, int i) {
    char path[FILES_PATH_MAX];
    path_of(fs, fs->items[i].id, fs->items[i].name, path, sizeof path);
    unlink(path);
    fs->bytes -= fs->items[i].size;
    memmove(fs->items + i, fs->items + i + 1, (size_t)(fs->n - i - 1) * sizeof *fs->items);
    fs->n--;
}

/* A shared folder: removes the results (and parts) of every process that are past
 * their lifetime, those of a replica that stopped or crashed included. */
static void sweep(dmt_files *fs, time_t now) {
    DIR *d = opendir(fs->dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_id(e->d_name) && strncmp(e->d_name, ".part-", 6)) continue;
        char path[600];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", fs->dir, e->d_name);
        if (!lstat(path, &st) && S_ISREG(st.st_mode) && st.st_mtime + FILES_KEEP_SECONDS <= now) unlink(path);
    }
    closedir(d);
}

/* Caller holds mu. */
static void expire(dmt_files *fs, time_t now) {
    while (fs->n && fs->items[0].expires <= now) drop(fs, 0);
    if (fs->shared && now - fs->swept >= FILES_SWEEP_SECONDS) {
        fs->swept = now;
        sweep(fs, now);
    }
}

void dmt_files_free(dmt_files *fs) {
    if (!fs) return;
    dmt_files_stop_parsing(fs);
    pthread_mutex_destroy(&fs->qmu);
    pthread_cond_destroy(&fs->qcond);
    if (fs->shared) { /* the results stay for their lifetime: other replicas hand them out */
        pthread_mutex_destroy(&fs->mu);
        free(fs->items);
        free(fs);
        return;
    }
    pthread_mutex_lock(&fs->mu);
    while (fs->n) drop(fs, 0);
    pthread_mutex_unlock(&fs->mu);
    /* anything else left (a write cut short) goes too, the lock last */
    remove_folder(fs->dir, NULL);
    if (fs->lock_fd >= 0) close(fs->lock_fd);
    pthread_mutex_destroy(&fs->mu);
    free(fs->items);
    free(fs);
}

/* ---- the upload ---- */

typedef struct {
    dmt_file_job *job;
    size_t cap;
    int has_file;
    int too_long;
    int nul;
    int oom;
} upload;

/* Appends a piece of a text field to dst (cap bytes with its NUL): too long or
 * holding a NUL byte (a key "k1\0junk" must not pass as "k1") are refused. */
static void field_append(upload *u, char *dst, size_t cap, const char *data, uint64_t off, size_t size) {
    if (off + size >= cap) {
        u->too_long = 1;
        return;
    }
    if (size && memchr(data, 0, size)) u->nul = 1;
    memcpy(dst + off, data, size);
    dst[off + size] = 0;
}

static enum MHD_Result upload_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                    const char *content_type, const char *encoding, const char *data, uint64_t off,
                                    size_t size) {
    upload *u = cls;
    if (!key) return MHD_YES;
    if (!strcmp(key, "file")) {
        if (off == 0) {
            u->has_file = 1;
            u->job->len = 0;
            /* only the base name, only harmless characters */
            const char *base = filename ? filename : "file";
            const char *slash = strrchr(base, '/');
            if (slash) base = slash + 1;
            slash = strrchr(base, '\\');
            if (slash) base = slash + 1;
            size_t o = 0;
            for (const char *c = base; *c && o + 1 < sizeof u->job->name; c++)
                u->job->name[o++] = strchr(FILE_NAME_CHARS, *c) ? *c : '_';
            u->job->name[o] = 0;
        }
        if (u->job->len + size > u->cap) { /* cannot happen: the upload is inside the body */
            u->oom = 1;
            return MHD_NO;
        }
        if (size) memcpy(u->job->data + u->job->len, data, size);
        u->job->len += size;
    } else if (!strcmp(key, "source")) {
        field_append(u, u->job->source, sizeof u->job->source, data, off, size);
    } else if (!strcmp(key, "target")) {
        field_append(u, u->job->target, sizeof u->job->target, data, off, size);
    } else if (!strcmp(key, "api_key") || !strcmp(key, "apiKey")) {
        u->job->has_api_key = 1;
        field_append(u, u->job->api_key, sizeof u->job->api_key, data, off, size);
    }
    return MHD_YES;
}

int dmt_files_receive(dmt_files *fs, struct MHD_Connection *conn, const char *body, size_t len, dmt_file_job **jobp,
                      char *err, size_t errlen) {
    *jobp = NULL;
    const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!type || strncasecmp(type, "multipart/form-data", 19)) {
        snprintf(err, errlen, "translate_file expects a multipart/form-data body with a file field");
        return 400;
    }
    dmt_file_job *job = calloc(1, sizeof *job);
    upload u = {.job = job, .cap = len};
    if (!job || !(job->data = malloc(len + 1))) {
        free(job);
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    struct MHD_PostProcessor *pp = MHD_create_post_processor(conn, 64 * 1024, upload_field, &u);
    enum MHD_Result ok = pp ? MHD_post_process(pp, body ? body : "", len) : MHD_NO;
    if (pp) MHD_destroy_post_processor(pp);
    int status = 400;
    if (ok != MHD_YES || u.oom) {
        snprintf(err, errlen, "malformed multipart body");
        goto fail;
    }
    if (u.too_long) {
        snprintf(err, errlen, "source and target must be shorter than %d bytes, api_key than %d", FIELD_MAX, KEY_MAX);
        goto fail;
    }
    if (u.nul) {
        snprintf(err, errlen, "source, target and api_key may not contain NUL bytes");
        goto fail;
    }
    if (!u.has_file) {
        snprintf(err, errlen, "Invalid request: missing file parameter");
        goto fail;
    }
    if (dmt_doc_kind_of(job->name) < 0) {
        snprintf(err, errlen, "file type not supported: '%.64s'; supported: .txt, .html, .htm, .srt, .docx, .odt",
                 job->name);
        goto fail;
    }
    if (job->len == 0) {
        snprintf(err, errlen, "the file is empty");
        goto fail;
    }
    /* the memory of documents in flight is bounded: a job keeps its upload and its
     * texts until it is answered */
    pthread_mutex_lock(&fs->qmu);
    int full = fs->in_flight + job->len > fs->max_in_flight;
    if (!full) {
        fs->in_flight += job->len;
        job->fs = fs;
    }
    pthread_mutex_unlock(&fs->qmu);
    if (full) {
        snprintf(err, errlen, "too many requests: %zu KiB of documents are being translated (--max-file-memory); "
                 "try again shortly", fs->max_in_flight >> 10);
        status = 429;
        goto fail;
    }
    *jobp = job;
    return 0;
fail:
    dmt_file_job_free(job);
    return status;
}

const char *dmt_file_job_api_key(const dmt_file_job *job) { return job->has_api_key ? job->api_key : NULL; }

/* On the parser thread: the document, its texts checked. */
static void parse_job(dmt_file_job *job) {
    job->doc = dmt_doc_open((dmt_doc_kind)dmt_doc_kind_of(job->name), job->data, job->len, job->err,
                            sizeof job->err);
    if (!job->doc) {
        const char *e = job->err;
        job->status = strstr(e, "out of memory") ? 500 : strncmp(e, "refused", 7) && !strstr(e, "limit") ? 400 : 413;
    }
}

int dmt_file_job_request(dmt_file_job *job, json_t **request, char *err, size_t errlen) {
    *request = NULL;
    if (job->status) {
        snprintf(err, errlen, "%s", job->err);
        return job->status;
    }
    json_t *q = json_array(), *req = json_object();
    for (int i = 0; i < dmt_doc_count(job->doc); i++) {
        size_t l;
        const char *t = dmt_doc_text(job->doc, i, &l);
        json_array_append_new(q, json_stringn(t, l));
    }
    json_object_set_new(req, "q", q);
    if (job->source[0]) json_object_set_new(req, "source", json_string(job->source));
    if (job->target[0]) json_object_set_new(req, "target", json_string(job->target));
    if (job->has_api_key) json_object_set_new(req, "api_key", json_string(job->api_key));
    if (dmt_doc_is_html(job->doc)) json_object_set_new(req, "format", json_string("html"));
    else json_object_set_new(req, "alignments", json_true()); /* a paragraph's runs keep their words (documents.h) */
    if (json_array_size(q) != (size_t)dmt_doc_count(job->doc)) { /* a text jansson refused: not UTF-8 */
        json_decref(req);
        snprintf(err, errlen, "the file's text is not valid UTF-8");
        return 400;
    }
    *request = req;
    return 0;
}

void dmt_file_job_free(dmt_file_job *job) {
    if (!job) return;
    if (job->fs) {
        pthread_mutex_lock(&job->fs->qmu);
        job->fs->in_flight -= job->len;
        pthread_mutex_unlock(&job->fs->qmu);
    }
    dmt_doc_free(job->doc);
    free(job->data);
    free(job);
}

/* ---- who may store how much ---- */

/* The uploader (dmt_api_client_id): its API key when keys are on, else its address. */
static void owner_of(struct MHD_Connection *conn, const dmt_file_job *job, const dmt_server_config *cfg, char *out,
                     size_t cap) {
    char addr[64] = "-";
    const union MHD_ConnectionInfo *ci = conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof addr);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof addr);
    }
    dmt_api_client_id(cfg, job->has_api_key ? job->api_key : NULL, addr, out, cap);
}

/* Room for one more result of owner? 0, or 429 with a message. Caller holds mu. A
 * result is never dropped before its lifetime: a full store refuses new work. */
static int room_for(dmt_files *fs, const char *owner, size_t size, char *err, size_t errlen) {
    expire(fs, time(NULL));
    int mine = 0;
    for (int i = 0; i < fs->n; i++) mine += !strcmp(fs->items[i].owner, owner);
    long wait = fs->n ? (long)(fs->items[0].expires - time(NULL)) : 1;
    if (mine >= FILES_MAX_PER_CLIENT) {
        snprintf(err, errlen, "too many translated files waiting to be downloaded: %d from you (limit %d); "
                 "they expire %d minutes after translation", mine, FILES_MAX_PER_CLIENT, FILES_KEEP_SECONDS / 60);
        return 429;
    }
    if (fs->n >= FILES_MAX_STORED || fs->bytes + size > FILES_MAX_BYTES) {
        snprintf(err, errlen, "the server holds as many translated files as it can; try again in %ld s", wait > 0 ? wait : 1);
        return 429;
    }
    return 0;
}

int dmt_files_admit(dmt_files *fs, struct MHD_Connection *conn, dmt_file_job *job, const dmt_server_config *cfg,
                    char *err, size_t errlen) {
    owner_of(conn, job, cfg, job->owner, sizeof job->owner);
    pthread_mutex_lock(&fs->mu);
    int st = room_for(fs, job->owner, 0, err, errlen);
    pthread_mutex_unlock(&fs->mu);
    return st;
}

/* ---- the result ---- */

static void random_id(char id[33]) {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r > 0) got += (size_t)r;
        else if (errno != EINTR) break;
    }
    if (got < sizeof b) { /* no entropy source: still unique, less secret */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        for (size_t i = got; i < sizeof b; i++) b[i] = (unsigned char)(ts.tv_nsec >> (i % 4 * 8) ^ (long)i * 131);
    }
    for (int i = 0; i < 16; i++) snprintf(id + 2 * i, 3, "%02x", b[i]);
}

json_t *dmt_files_finish(dmt_files *fs, struct MHD_Connection *conn, dmt_file_job *job, json_t *result,
                         int result_status, int *status) {
    if (result_status != 200) { /* the translate error as it is */
        *status = result_status;
        return result;
    }
    json_t *texts = json_object_get(result, "translatedText");
    size_t n = json_array_size(texts);
    const char **tr = calloc(n + 1, sizeof *tr);
    size_t *tl = calloc(n + 1, sizeof *tl);
    char err[512] = "", part[FILES_PATH_MAX], path[FILES_PATH_MAX], id[33];
    json_t *answer = NULL;
    *status = 500;
    if (!tr || !tl || n != (size_t)dmt_doc_count(job->doc)) {
        snprintf(err, sizeof err, !tr || !tl ? "out of memory" : "internal error: %zu translations for %d texts", n,
                 dmt_doc_count(job->doc));
        goto out;
    }
    json_t *aligned = json_object_get(result, "alignments");
    int **pairs = json_array_size(aligned) == n ? calloc(n + 1, sizeof *pairs) : NULL;
    int *n_pairs = pairs ? calloc(n + 1, sizeof *n_pairs) : NULL;
    for (size_t i = 0; i < n; i++) {
        tr[i] = json_string_value(json_array_get(texts, i));
        tl[i] = json_string_length(json_array_get(texts, i));
        json_t *list = json_array_get(aligned, i);
        size_t np = json_array_size(list);
        if (!n_pairs || !np || !(pairs[i] = malloc(np * 2 * sizeof **pairs))) continue;
        for (size_t q = 0; q < np; q++) {
            pairs[i][2 * q] = (int)json_integer_value(json_array_get(json_array_get(list, q), 0));
            pairs[i][2 * q + 1] = (int)json_integer_value(json_array_get(json_array_get(list, q), 1));
        }
        n_pairs[i] = (int)np;
    }
    random_id(id);
    snprintf(part, sizeof part, "%s/.part-%s", fs->dir, id);
    path_of(fs, id, job->name, path, sizeof path);
    int wrote = dmt_doc_write_aligned(job->doc, tr, tl, n_pairs ? (const int *const *)pairs : NULL, n_pairs, part, err,
                                      sizeof err);
    for (size_t i = 0; pairs && i < n; i++) free(pairs[i]);
    free(pairs);
    free(n_pairs);
    if (wrote) {
        unlink(part);
        goto out;
    }
    struct stat st;
    size_t size = stat(part, &st) == 0 ? (size_t)st.st_size : 0;
    const char *owner = job->owner;
    pthread_mutex_lock(&fs->mu);
    int full = room_for(fs, owner, size, err, sizeof err); /* others may have filled it meanwhile */
    if (full || rename(part, path)) {
        pthread_mutex_unlock(&fs->mu);
        if (!full) snprintf(err, sizeof err, "cannot store the translated file: %s", strerror(errno));
        unlink(part);
        *status = full ? full : 500;
        goto out;
    }
    stored *s = &fs->items[fs->n++];
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->name, sizeof s->name, "%s", job->name);
    snprintf(s->owner, sizeof s->owner, "%s", owner);
    s->size = size;
    s->expires = time(NULL) + FILES_KEEP_SECONDS;
    fs->bytes += size;
    pthread_mutex_unlock(&fs->mu);
    /* an absolute URL, as LibreTranslate gives: the host the client asked */
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    const char *proto = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-Proto");
    char url[768];
    snprintf(url, sizeof url, "%s://%.200s/download_file/%s/%s", proto && !strcmp(proto, "https") ? "https" : "http",
             host && *host && !strpbrk(host, "/ \"<>\\") ? host : "localhost", id, job->name);
    answer = json_pack("{s:s}", "translatedFileUrl", url);
    *status = 200;
out:
    free(tr);
    free(tl);
    json_decref(result);
    return answer ? answer : json_pack("{s:s}", "error", err[0] ? err : "out of memory");
}

static const char *type_of(const char *name) {
    static const struct { const char *ext, *type; } types[] = {
        {".txt", "text/plain; charset=utf-8"}, {".html", "text/html; charset=utf-8"},
        {".htm", "text/html; charset=utf-8"}, {".srt", "application/x-subrip; charset=utf-8"},
        {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
        {".odt", "application/vnd.oasis.opendocument.text"},
    };
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof *types; i++)
        if (!strcasecmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}

/* Is the file "ID.NAME" in the folder a result that has not expired? */
static int fresh_result(const char *path) {
    struct stat st;
    return !lstat(path, &st) && S_ISREG(st.st_mode) && st.st_mtime + FILES_KEEP_SECONDS > time(NULL);
}

/* A shared folder: the result ID of any process, its name in name. The URL's name
 * (want, as translatedFileUrl gives it) is looked up directly; without one the
 * folder is scanned for the id. 0, or -1 when there is none or it has expired. */
static int find_on_disk(dmt_files *fs, const char *id, const char *want, char *name, size_t name_len) {
    char path[FILES_PATH_MAX];
    if (want && *want) {
        size_t l = strlen(want);
        if (l >= sizeof ((stored *)0)->name || strspn(want, FILE_NAME_CHARS) != l) return -1;
        path_of(fs, id, want, path, sizeof path);
        if (!fresh_result(path)) return -1;
        snprintf(name, name_len, "%s", want);
        return 0;
    }
    DIR *d = opendir(fs->dir);
    if (!d) return -1;
    int rc = -1;
    for (struct dirent *e; rc && (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, id, 32) || n[32] != '.' || !n[33] || strspn(n + 33, FILE_NAME_CHARS) != strlen(n + 33))
            continue;
        char found[600];
        snprintf(found, sizeof found, "%s/%s", fs->dir, n);
        if (!fresh_result(found)) continue;
        snprintf(name, name_len, "%s", n + 33);
        rc = 0;
    }
    closedir(d);
    return rc;
}

int dmt_files_get(dmt_files *fs, const char *rest, char **data, size_t *len, char *name, size_t name_len,
                  const char **type, char *err, size_t errlen) {
    *data = NULL;
    char id[33] = "";
    size_t idl = strspn(rest, "0123456789abcdef");
    if (idl == 32 && (rest[32] == '/' || rest[32] == 0)) memcpy(id, rest, 32);
    pthread_mutex_lock(&fs->mu);
    expire(fs, time(NULL));
    int found = -1;
    for (int i = 0; id[0] && i < fs->n; i++)
        if (!strcmp(fs->items[i].id, id)) found = i;
    if (found >= 0) snprintf(name, name_len, "%s", fs->items[found].name);
    pthread_mutex_unlock(&fs->mu);
    /* another replica's result */
    if (found < 0 && id[0] && fs->shared && !find_on_disk(fs, id, rest[32] ? rest + 33 : NULL, name, name_len))
        found = 0;
    if (found < 0) {
        snprintf(err, errlen, "no such file (results are kept for %d minutes)", FILES_KEEP_SECONDS / 60);
        return 404;
    }
    char path[FILES_PATH_MAX];
    path_of(fs, id, name, path, sizeof path);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) || !(*data = malloc((size_t)st.st_size + 1)) ||
        fread(*data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        if (f) fclose(f);
        free(*data);
        *data = NULL;
        snprintf(err, errlen, "no such file (it has just expired)");
        return 404;
    }
    fclose(f);
    *len = (size_t)st.st_size;
    *type = type_of(name);
    return 0;
}
