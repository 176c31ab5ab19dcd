/* libicxtrace.so as NCCL's profiler plugin (nccl_prof.c). */
#ifndef ICX_NCCL_PROF_H
#define ICX_NCCL_PROF_H

/* The constructor: unless the user named a plugin (or ICX_NCCL_PROFILER=0), NCCL is told to look
 * for one in the global scope, where the tracer's tables are. */
void icx_nprof_setup(void);
/* dlsym of ncclProfiler_vN in a library NCCL opened (dl.c, through nccl.c's dl_wrap): the
 * tracer's table of that version with the user's chained behind it, or NULL to pass. */
void *icx_nprof_dl_wrap(const char *name, void *handle);

struct icx_frame;
/* Writer, each flush: the proxy aggregates that moved (NCCL_PPROXY). */
void icx_nprof_tick(struct icx_frame *f);
void icx_nprof_fork_prepare(void);
void icx_nprof_fork_parent(void);
void icx_nprof_fork_child(void);

#endif
