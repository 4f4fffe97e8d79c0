/* fault.c — failure injection (fault.h): per thread, off (-1) unless a test sets it. */
#include "base/fault.h"

static _Thread_local long fault_countdown = -1;

void dmt_fault_after(long n) { fault_countdown = n; }

int dmt_fault_hit(void) {
    if (fault_countdown < 0) return 0;
    if (fault_countdown == 0) return 1;
    fault_countdown--;
    return 0;
}
