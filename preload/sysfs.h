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

/* A file the writer samples again and again (a NIC counter, a thread's /proc stat): kept open and
 * re-read from offset 0 -- one pread and one fstat per sample instead of a path walk, an open and
 * a close (most of the writer's time in a 16-rank job was there).  The fstat catches a job that
 * closed the descriptor and got its number back for a file of its own: that descriptor is left
 * alone (never read again, never closed) and the path is opened anew.  Writer thread only. */
struct icx_kept {
    int fd; /* -1: not open */
    unsigned long long dev, ino;
};
#define ICX_KEPT_INIT                                                                              \
    {                                                                                              \
        -1, 0, 0                                                                                   \
    }
/* Up to len - 1 bytes of the file at path (absolute), NUL-terminated: the count, or -1.  A failed
 * read closes it (a thread that exited); the next call opens the path again.  follow: stat the
 * path too, and reopen when it names another file now (replaced by a rename: what a tool that
 * rewrites a counter file does, and what the simulated cluster's fake sysfs does); still no
 * open, read and close per sample. */
long icx_kept_read(struct icx_kept *k, const char *path, int follow, char *buf, size_t len);
/* Close it if it is still ours (else only drop it): a fork child's reset. */
void icx_kept_close(struct icx_kept *k);

#endif
