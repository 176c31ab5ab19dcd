/* sysfs, read under ICX_SYSFS_ROOT when it is set (like hwloc's HWLOC_FSROOT), so tests can
 * present any machine. */
#ifndef ICX_SYSFS_H
#define ICX_SYSFS_H

#include <stddef.h>

/* The root ("" for /). */
const char *icx_sysfs_root(void);
/* The first line of a file, path relative to the root ("/sys/..."), without its newline.  0 or
 * -1. */
int icx_sysfs_read_path(const char *rel, char *out, size_t outlen);

#endif
