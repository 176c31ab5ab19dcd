/* The C library's real dlsym and dlvsym, found without calling dlsym (dl.c interposes both). */
#ifndef ICX_DLREAL_H
#define ICX_DLREAL_H

void *icx_dlsym_real(void *handle, const char *name);
void *icx_dlvsym_real(void *handle, const char *name, const char *version);

/* The pointers dl.c's entry points jump through: never NULL (a stub answers NULL until found). */
extern void *(*icx_real_dlsym)(void *, const char *);
extern void *(*icx_real_dlvsym)(void *, const char *, const char *);
/* Find them now if not yet done (no library calls, no sanitizer instrumentation). */
void icx_dl_init(void);

#endif
