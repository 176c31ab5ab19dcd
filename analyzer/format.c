/* Text formatting shared by the reports (format.h). */
#include <stdio.h>
#include <stdlib.h>

#include "format.h"

void icx_fmt_bytes(char *buf, size_t len, double b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void icx_fmt_ranks(char *buf, size_t len, int *v, size_t n)
{
    size_t used = 0;
    if (len)
        buf[0] = 0;
    if (n > 1)
        qsort(v, n, sizeof(*v), int_cmp);
    for (size_t i = 0; i < n && used < len;) {
        size_t e = i;
        while (e + 1 < n && (v[e + 1] == v[e] + 1 || v[e + 1] == v[e]))
            e++;
        int w = v[e] != v[i]
                    ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", v[i], v[e])
                    : snprintf(buf + used, len - used, "%s%d", used ? "," : "", v[i]);
        used += w > 0 ? (size_t)w : 0;
        i = e + 1;
    }
}
