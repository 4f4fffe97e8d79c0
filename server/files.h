/* files.h — POST /translate_file and GET /download_file/... (files.c).
 *
 * An upload (multipart/form-data: file, source, target, api_key) is read into a
 * document (documents.h) whose texts become an ordinary translate request, so
 * it shares the queue, the batches and the limits of /translate. The finished
 * file is kept in a private temporary folder for FILES_KEEP_SECONDS and
 * answered as {"translatedFileUrl": ".../download_file/ID/NAME"}.
 */
#ifndef DEEPMT_SERVER_FILES_H
#define DEEPMT_SERVER_FILES_H

#include <stddef.h>

#include <jansson.h>
#include <microhttpd.h>

typedef struct dmt_files dmt_files;
typedef struct dmt_file_job dmt_file_job;

/* A fresh private folder under $TMPDIR (or /tmp). NULL with a message. */
dmt_files *dmt_files_new(char *err, size_t errlen);
/* Removes every stored file and the folder. */
void dmt_files_free(dmt_files *fs);

/* Reads a multipart upload (body of len bytes, conn for its headers). 0 with
 * *job and *request (a JSON translate request for the document's texts, to give
 * to dmt_api_translate_parse), or an HTTP status with a message. */
int dmt_files_begin(dmt_files *fs, struct MHD_Connection *conn, const char *body, size_t len, dmt_file_job **job,
                    json_t **request, char *err, size_t errlen);
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
