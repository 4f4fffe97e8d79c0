/* fileio.c — see fileio.h. */
#include "base/fault.h"
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static const char *kind_name(mode_t mode) {
    return S_ISDIR(mode) ? "directory" : S_ISFIFO(mode) ? "FIFO" : S_ISCHR(mode) ? "character device"
         : S_ISBLK(mode) ? "block device" : S_ISSOCK(mode) ? "socket" : "special file";
}

int dmt_file_open_regular(const char *path, size_t *size, char *err, size_t errlen) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb)) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file (a %s)", path, kind_name(sb.st_mode));
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *size = (size_t)sb.st_size;
    return fd;
}

char *dmt_file_read_small(const char *path, size_t max_bytes, size_t *len, char *err, size_t errlen) {
    size_t size;
    int fd = dmt_file_open_regular(path, &size, err, errlen);
    if (fd < 0) return NULL;
    if (size > max_bytes) {
        snprintf(err, errlen, "%s: %zu bytes is over the limit of %zu", path, size, max_bytes);
        close(fd);
        errno = EFBIG;
        return NULL;
    }
    char *buf = dmt_fault_hit() ? NULL : malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    /* the file may change size while it is read: take what is there, up to size */
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            snprintf(err, errlen, "%s: read error: %s", path, strerror(e));
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *len = got;
    return buf;
}
