/* busguard.c — SIGBUS turned into an error while a thread reads a mapping (busguard.h). */
#include "base/busguard.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

static _Thread_local sigjmp_buf *guard;
static struct sigaction previous;
static pthread_once_t installed = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *ctx) {
    sigjmp_buf *env = guard;
    if (env) {
        guard = NULL;
        siglongjmp(*env, 1);
    }
    /* not ours: what SIGBUS did before (returning re-runs the faulting access) */
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, info, ctx);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

void dmt_bus_guard_set(sigjmp_buf *env) {
    if (env) pthread_once(&installed, install);
    guard = env;
}
