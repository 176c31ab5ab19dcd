/* Hang dumps (report_hang.c): what a process's threads were doing when its watchdog fired. */
#ifndef ICX_HANG_DUMP_H
#define ICX_HANG_DUMP_H

#include <stddef.h>

#include "model.h"

/* One line on process p's main thread at its last dump: kernel state, what it waits for (a lock,
 * a condition variable, a sleep), the native frames and, in a Python process, the Python frames
 * (the innermost outside the standard library first).  0 and "" when p has no dump. */
int icx_hang_where(const struct icx_proc *p, char *buf, size_t len);

#endif
