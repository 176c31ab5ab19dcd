/* Who this process is: host, pid, rank and world size from the launcher's variables (torchrun,
 * Open MPI, PMIx, PMI, Slurm), job id, command line -- the PROCESS record at the start of each
 * stream -- and the trace file's name from the ICX_OUTPUT pattern. */
#ifndef ICX_IDENTITY_H
#define ICX_IDENTITY_H

#include <stddef.h>

/* Expand %h %p %r %j %% of an ICX_OUTPUT pattern.  0 or -ENAMETOOLONG. */
int icx_expand_output(const char *pattern, char *out, size_t outlen);
/* Set icx_cfg.output from ICX_OUTPUT; in a fork child (child=1) make it unique to the child.
 * 0, or -ENAMETOOLONG after a warning. */
int icx_output_resolve(int child);

#endif
