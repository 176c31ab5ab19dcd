/* dlsym / dlvsym interposition (dl.c). */
#ifndef ICX_DL_H
#define ICX_DL_H

#include <stddef.h>

struct icx_module;

/* The modules whose dl_wrap answers lookups of their prefix (core.c, at start). */
void icx_dl_use_modules(const struct icx_module *const *mods, size_t nmods);

#endif
