/* Text formatting shared by the reports. */
#ifndef ICX_FORMAT_H
#define ICX_FORMAT_H

#include <stddef.h>

/* "384.0 MiB" */
void icx_fmt_bytes(char *buf, size_t len, double bytes);

#endif
