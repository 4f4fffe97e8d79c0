/* files.h — POST /translate_file and GET /download_file/... (files.c).
 *
 * An upload (multipart/form-data: file, source, target, api_key) is read into a
 * document (documents.h) whose texts become an ordinary translate request, so
 * it shares the queue, the batches and the limits of /translate. The key is
 * checked before the document is parsed, and parsing runs on a thread of its own
 * (one document at a time, at most FILES_MAX_PARSE_QUEUE waiting), so a costly
 * document never holds an HTTP thread. The finished file is kept for
 * FILES_KEEP_SECONDS as the file ID.NAME (ID: 128 random bits) and answered as
 * {"translatedFileUrl": ".../download_file/ID/NAME"}.
 *
 * Where: a private temporary folder (removed at exit; one left by a server killed
 * outright is removed by the next server to start with the same $TMPDIR: each
 * server holds a flock() on its folder's lock file while it lives), or with --files-dir a folder
 * that replicas share (a volume): then any replica answers a download, whichever
 * made the file, by finding ID.NAME there; results outlive the replica that made
 * them, and every replica sweeps the folder of expired ones. Quotas (per client,
 * per store) count what this process stored.
 */
#ifndef DEEPMT_SERVER_API_FILES_H
#define DEEPMT_SERVER_API_FILES_H

#include <stddef.h>

#include <jansson.h>
#include <microhttpd.h>

#include "server/config.h"

typedef struct dmt_files dmt_files;
typedef struct dmt_file_job dmt_file_job;

/* dir NULL or "": a fresh private folder under $TMPDIR (or /tmp); else that folder,
 * shared with other replicas (created when missing). NULL with a message. */
dmt_files *dmt_files_new(const char *dir, size_t max_in_flight, char *err, size_t errlen);
/* A private folder: removes every stored file and the folder. A shared one: leaves
 * the results for the other replicas to hand out until they expire. */
void dmt_files_free(dmt_files *fs);
const char *dmt_files_dir(const dmt_files *fs);
int dmt_files_shared(const dmt_files *fs);
/* How many private folders of servers that died without removing theirs (killed
 * outright) dmt_files_new removed from $TMPDIR, and the bytes of results they held. */
int dmt_files_stale_removed(const dmt_files *fs, unsigned long long *bytes);

/* Reads a multipart upload (body of len bytes, conn for its headers): its fields
 * and the file's bytes, checked for size, name and type but not parsed (cheap, on
 * an HTTP thread). 0 with *job, or an HTTP status with a message. */
int dmt_files_receive(dmt_files *fs, struct MHD_Connection *conn, const char *body, size_t len, dmt_file_job **job,
                      char *err, size_t errlen);
/* The upload's api_key field, NULL when it had none: checked before any parsing. */
const char *dmt_file_job_api_key(const dmt_file_job *job);
/* Room to store one more result for this upload's client (dmt_api_client_id)? Must be called before dmt_files_finish. 0, or 429 with a message: results are never dropped before their
 * lifetime, so a full store (or a client at its quota) is refused up front. */
int dmt_files_admit(dmt_files *fs, struct MHD_Connection *conn, dmt_file_job *job, const dmt_server_config *cfg,
                    char *err, size_t errlen);
/* Queues the document's parsing on the files' parser thread (one document at a
 * time, never on an HTTP thread); parsed(arg) is called from that thread when it
 * is done, after which dmt_file_job_request gives the outcome. 0, or 429 (queue
 * full) / 503 (stopping) with a message, and parsed is never called. */
int dmt_files_parse_async(dmt_files *fs, dmt_file_job *job, void (*parsed)(void *arg), void *arg, char *err,
                          size_t errlen);
/* After parsing: 0 with *request (a JSON translate request for the document's
 * texts, to give to dmt_api_translate_parse), or the HTTP status of a refusal
 * (malformed, over a limit) with a message. */
int dmt_file_job_request(dmt_file_job *job, json_t **request, char *err, size_t errlen);
/* Parses what is still queued, then stops the parser thread (before the HTTP
 * daemon stops: every parsed callback has run when this returns). */
void dmt_files_stop_parsing(dmt_files *fs);
/* result: the translate answer for that request (stolen) and its status. Stores
 * the translated file; returns the answer to send and sets *status. */
json_t *dmt_files_finish(dmt_files *fs, struct MHD_Connection *conn, dmt_file_job *job, json_t *result,
                         int result_status, int *status);
void dmt_file_job_free(dmt_file_job *job);

/* GET /download_file/REST: 0 with the file (malloc'd), its name and content
 * type, or 404 with a message. */
int dmt_files_get(dmt_files *fs, const char *rest, char **data, size_t *len, char *name, size_t name_len,
                  const char **type, char *err, size_t errlen);

#endif
