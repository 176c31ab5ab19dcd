/* sysfs under ICX_SYSFS_ROOT (sysfs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
