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

/* For the code a sanitizer's own start-up runs: its interceptors look functions up with dlsym
 * before its runtime (TSan's thread state, ASan's shadow) exists, so that path must not be
 * instrumented. */
#define ICX_NOSAN __attribute__((no_sanitize("address", "undefined", "thread")))

#endif
