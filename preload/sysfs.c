/* sysfs under ICX_SYSFS_ROOT (sysfs.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sysfs.h"

const char *icx_sysfs_root(void)
{
    const char *r = secure_getenv("ICX_SYSFS_ROOT");
    return r ? r : "";
}

int icx_sysfs_read_path(const char *rel, char *out, size_t outlen)
{
    char path[512];
    snprintf(path, sizeof(path), "%s%s", icx_sysfs_root(), rel);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char *ok = fgets(out, (int)outlen, f);
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = 0;
    return 0;
}

/* Ours still: the descriptor is the file it was opened on. */
static int icx_kept_same(const struct icx_kept *k)
{
    struct stat st;
    return fstat(k->fd, &st) == 0 && (unsigned long long)st.st_dev == k->dev &&
           (unsigned long long)st.st_ino == k->ino;
}

long icx_kept_read(struct icx_kept *k, const char *path, int follow, char *buf, size_t len)
{
    int saved = errno;
    long n = -1;
    struct stat now;
    if (k->fd >= 0 && !icx_kept_same(k))
        k->fd = -1; /* the job's descriptor now: not ours to read or close */
    if (k->fd >= 0 && follow &&
        (stat(path, &now) != 0 || (unsigned long long)now.st_dev != k->dev ||
         (unsigned long long)now.st_ino != k->ino))
        icx_kept_close(k);
    if (k->fd < 0) {
        struct stat st;
        k->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (k->fd >= 0 && fstat(k->fd, &st) != 0) {
            close(k->fd);
            k->fd = -1;
        }
        if (k->fd < 0)
            goto out;
        k->dev = (unsigned long long)st.st_dev;
        k->ino = (unsigned long long)st.st_ino;
    }
    n = len ? (long)pread(k->fd, buf, len - 1, 0) : -1;
    if (n < 0) {
        icx_kept_close(k);
        goto out;
    }
    buf[n] = 0;
out:
    errno = saved;
    return n;
}

void icx_kept_close(struct icx_kept *k)
{
    if (k->fd >= 0 && icx_kept_same(k))
        close(k->fd);
    k->fd = -1;
}
