/* busguard.h — reading a file mapping that may shrink under the reader.
 *
 * A file truncated while mapped raises SIGBUS on the next read of a page past its
 * new end, which kills the process. The model loader reads its weights from a
 * mapping of model.safetensors; an operator replacing the file in place (or a
 * crafted race) must get an error, not a dead server. Between
 * dmt_bus_guard_set(&env) and dmt_bus_guard_set(NULL), a SIGBUS on the calling
 * thread siglongjmps to env (where sigsetjmp(env, 1) then returns 1); on any other
 * thread, or outside the guard, SIGBUS does what it did before. Per thread, not
 * nested. Locals changed after sigsetjmp are indeterminate after the jump: keep
 * what the recovery path frees on the heap or in volatile variables.
 */
#ifndef DEEPMT_BASE_BUSGUARD_H
#define DEEPMT_BASE_BUSGUARD_H

#include <setjmp.h>

void dmt_bus_guard_set(sigjmp_buf *env);

#endif
