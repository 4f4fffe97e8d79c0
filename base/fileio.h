/* fileio.h — opening the files of a model directory safely.
 *
 * A model directory is read by a server that must never block or run out of memory
 * because of what it finds there: a FIFO, a directory or a device named
 * config.json or model.safetensors is refused without waiting for a writer (the file
 * is opened with O_NONBLOCK, then fstat'ed), and small files are read only up to a
 * limit.
 */
#ifndef DEEPMT_BASE_FILEIO_H
#define DEEPMT_BASE_FILEIO_H

#include <stddef.h>

/* Opens path read-only; a file descriptor, or -1 with "PATH: cannot open: REASON" or
 * "PATH: not a regular file (a KIND)" in err and errno set (open's, or EINVAL for a
 * file that is not regular). *size gets the file's size. */
int dmt_file_open_regular(const char *path, size_t *size, char *err, size_t errlen);

/* The whole regular file at path (at most max_bytes, else refused) as a malloc'd,
 * NUL-terminated buffer; *len gets its length. NULL with a message in err and errno
 * set (as above; EFBIG when too large, ENOMEM). */
char *dmt_file_read_small(const char *path, size_t max_bytes, size_t *len, char *err, size_t errlen);

#endif
