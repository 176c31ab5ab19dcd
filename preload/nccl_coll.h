/* NCCL collectives, point-to-point calls and groups (nccl_coll.c), and what the communicator
 * hooks (nccl.c) share with them: the re-entry guard and the call record. */
#ifndef ICX_NCCL_COLL_H
#define ICX_NCCL_COLL_H

#include <nccl.h>

#include "runtime.h"

/* NCCL's own re-entry guard (hook.h): an NCCL call made inside another goes straight through. */
extern ICX_TLS int icx_nccl_guard;

/* An NCCL_CALL record of a call that is neither a collective nor point-to-point (registration, a
 * query): no sequence number, written on return. */
void icx_nccl_rec_other(enum icx_api api, uint64_t t0, ncclComm_t cm, size_t count, int dt,
                        ncclResult_t rc);

/* A fork child has no group open. */
void icx_nccl_groups_fork_child(void);

#endif
