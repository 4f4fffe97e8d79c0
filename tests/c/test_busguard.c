/* test_busguard.c — base/busguard.c: a read past the end of a mapping whose file
 * shrank is an error under the guard, and still kills an unguarded reader (in a
 * child process) as it did before. */
#include "base/busguard.h"
#include "tests/c/check.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (64 * 1024)

/* A mapping of a SIZE-byte temporary file that has then been truncated to 0. */
static __attribute__((noinline)) volatile unsigned char *shrunk_mapping(void) {
    char path[] = "/tmp/deepmt-busguard-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    unlink(path);
    void *map = MAP_FAILED;
    if (ftruncate(fd, SIZE) == 0) map = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED && ftruncate(fd, 0) != 0) map = MAP_FAILED;
    close(fd);
    return map == MAP_FAILED ? NULL : map;
}

int main(void) {
    volatile unsigned char *p = shrunk_mapping();
    if (!CHECK(p != NULL, "a mapped file, then truncated")) return check_done();
    sigjmp_buf env;
    volatile int caught = 0, value = -1;
    if (sigsetjmp(env, 1)) {
        caught = 1;
    } else {
        dmt_bus_guard_set(&env);
        value = p[SIZE / 2]; /* past the new end: SIGBUS */
    }
    dmt_bus_guard_set(NULL);
    CHECK(caught && value == -1, "under the guard, the faulting read returns to sigsetjmp");

    caught = 0;
    if (sigsetjmp(env, 1)) caught = 1;
    else {
        dmt_bus_guard_set(&env);
        value = p[100];
    }
    dmt_bus_guard_set(NULL);
    CHECK(caught, "the guard works again after a first jump");

    pid_t pid = fork();
    if (pid == 0) {
        value = p[SIZE / 2]; /* unguarded */
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    /* killed by SIGBUS; under AddressSanitizer its own SIGBUS report exits 1 instead */
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) || (WIFEXITED(status) && WEXITSTATUS(status) != 0),
          "without the guard SIGBUS still ends the process as before", "status 0x%x", status);
    munmap((void *)p, SIZE);
    return check_done();
}
