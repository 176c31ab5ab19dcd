/* NCCL's own view of the machine: the topology and graph XML it dumps while creating a
 * communicator, and the transport lines of its debug file, queued for the trace. */
#ifndef ICX_NCCL_DUMP_H
#define ICX_NCCL_DUMP_H

#include <stdint.h>

struct icx_frame;

/* Before NCCL creates a communicator (and reads its environment): point NCCL_TOPO_DUMP_FILE and
 * NCCL_GRAPH_DUMP_FILE at private files unless the user set them.  Once per process. */
void icx_nccl_dumps_prepare(void);
/* After communicator comm_id was created: queue what NCCL wrote, and the debug file's new lines. */
void icx_nccl_dumps_collect(uint64_t comm_id);
/* Writer: the queued texts as NCCL_DUMP records. */
void icx_nccl_dumps_put(struct icx_frame *f);
/* At exit: remove private dump files NCCL wrote that were never read. */
void icx_nccl_dumps_fini(void);

void icx_nccl_dumps_fork_prepare(void);
void icx_nccl_dumps_fork_parent(void);
void icx_nccl_dumps_fork_child(void);

#endif
