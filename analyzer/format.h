/* Text formatting shared by the reports. */
#ifndef ICX_FORMAT_H
#define ICX_FORMAT_H

#include <stddef.h>

/* "384.0 MiB" */
void icx_fmt_bytes(char *buf, size_t len, double bytes);
/* The n ranks of v (sorted in place, duplicates shown once) as "0-10,12-15"; "" for none. */
void icx_fmt_ranks(char *buf, size_t len, int *v, size_t n);

#endif
