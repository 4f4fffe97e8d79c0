/* fault.h — failure injection for tests (SQLite-style): after dmt_fault_after(n),
 * the next n allocations on this thread that ask dmt_fault_hit() succeed and every
 * later one fails, until dmt_fault_after(-1) (the default) turns it off. The model
 * loader (model/safetensors.c, model/model.c), the shortlist, the continuous
 * decoder's sources (model/forward.c) and base/fileio.c ask it (not the
 * tokenizer, not jansson: a test can route jansson's allocations through
 * dmt_fault_hit() with json_set_alloc_funcs). */
#ifndef DEEPMT_BASE_FAULT_H
#define DEEPMT_BASE_FAULT_H

void dmt_fault_after(long n);
/* Counts one allocation; 1 when it must fail. */
int dmt_fault_hit(void);

#endif
