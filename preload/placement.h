/* Where the job's threads and pinned memory are: NUMA nodes, each thread's CPU every flush, its
 * affinity when it changes, the node of a pinned buffer's pages. */
#ifndef ICX_PLACEMENT_H
#define ICX_PLACEMENT_H

#include <stdint.h>

#include "icx/trace_format.h"

/* Where the pages of a host buffer live, from up to 64 pages spread over it, into the HOST_NUMA
 * record r (any thread; one move_pages syscall).  0, or -1. */
int icx_placement_host_buffer(struct icx_rec_host_numa *r, uint64_t ptr, uint64_t bytes);

#endif
