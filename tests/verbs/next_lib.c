/* Two copies of this library (libnext_a.so, libnext_b.so) define the same probe; the first one
 * asks for the next definition with dlsym(RTLD_NEXT), which must be the second one's whether or
 * not libicxtrace (which interposes dlsym) is preloaded. */
#include <dlfcn.h>

char next_probe(void);
char next_from_a(void);

char next_probe(void)
{
    return NEXT_NAME;
}

char next_from_a(void)
{
    char (*p)(void) = (char (*)(void))dlsym(RTLD_NEXT, "next_probe");
    return p ? p() : '?';
}
