/* Workload: loads tests/plugin/copy_plugin.so with dlopen(RTLD_LOCAL) (not linked to libcudart
 * itself) and lets it do 7 peer copies 2->5; the tracer must still find the real libcudart. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 1;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*copies)(int) = (int (*)(int))dlsym(h, "plugin_copies");
    return copies && copies(7) == 0 ? 0 : 2;
}
