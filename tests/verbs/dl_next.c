/* Prints what dlsym(RTLD_NEXT, "next_probe") called from libnext_a.so finds: "b" is right. */
#include <stdio.h>

char next_from_a(void);

int main(void)
{
    printf("%c\n", next_from_a());
    return 0;
}
