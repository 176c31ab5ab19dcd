/* NCCL communicators as the tracer names them: every rank must see the same communicator id and
 * the same sequence numbers for the same operation.  The id is a hash of the unique id (split and
 * shrink: of the parent's id, how many splits the parent has had, and the color or the excluded
 * ranks); collectives are numbered per communicator, send and recv per (communicator, peer,
 * direction). */
#ifndef ICX_NCCL_COMM_H
#define ICX_NCCL_COMM_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#define ICX_FNV_BASIS 0xcbf29ce484222325ull
uint64_t icx_fnv(const void *p, size_t n, uint64_t h);

/* Remember handle h as communicator id (rank of nranks); initializing: created non-blocking
 * (ncclInProgress), not yet seen ready. */
void icx_ncomm_add(ncclComm_t h, uint64_t id, int rank, int nranks, int initializing);
void icx_ncomm_forget(ncclComm_t h);
/* The id of handle h (0 when unknown), with its rank and size when asked (-1 unknown). */
uint64_t icx_ncomm_id(ncclComm_t h, int *rank, int *nranks);
/* The sequence number of a call about to be issued on h: a collective (p2p_dir < 0), a send
 * (0) or a receive (1) with peer.  0 when h is unknown. */
uint64_t icx_ncomm_next_seq(ncclComm_t h, int peer, int p2p_dir);
/* h is split or shrunk again: how many times it has been now (0 when unknown), and its id. */
uint64_t icx_ncomm_split(ncclComm_t h, uint64_t *id);
/* A non-blocking communicator reported ready: its id the first time, else 0. */
uint64_t icx_ncomm_ready(ncclComm_t h);

void icx_ncomm_fork_prepare(void);
void icx_ncomm_fork_parent(void);
void icx_ncomm_fork_child(void);

#endif
