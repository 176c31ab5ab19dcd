/* Detect a CUDA runtime linked statically into the executable (nvcc's default, -cudart static):
 * its calls never go through the dynamic symbol table, so no preload can see them.  We say so in
 * the trace and once on stderr instead of leaving an empty report unexplained. */
#include <link.h>
#include <string.h>

#include "elfsym.h"
#include "frame.h"
#include "runtime.h"
#include "static_detect.h"
#include "writer.h"

static int icx_has_dynamic_cudart_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    return info->dlpi_name && strstr(info->dlpi_name, "libcudart.so") != NULL;
}

/* Does /proc/self/exe define the function cudaMemcpy itself? 1 yes, 0 no, -1 cannot tell
 * (stripped or unreadable). */
static int icx_exe_defines_cudart(void)
{
    struct icx_elf_syms syms;
    if (icx_elf_load("/proc/self/exe", &syms) != 0)
        return -1;
    int found = icx_elf_find(&syms, "cudaMemcpy") != NULL;
    icx_elf_free(&syms);
    return found;
}

void icx_cuda_detect_static(void)
{
    if (dl_iterate_phdr(icx_has_dynamic_cudart_cb, NULL))
        return; /* a dynamic libcudart is loaded: our hooks see its calls */
    if (icx_exe_defines_cudart() == 1) {
        const char *msg = "the executable links the CUDA runtime statically (cudart_static): its "
                          "CUDA calls cannot be intercepted and no peer copies will be recorded; "
                          "rebuild with `nvcc -cudart shared` to trace it";
        icx_note(1, msg);
        icx_touch();               /* a CUDA program: its trace says why it is empty */
        icx_writer_want_devices(); /* its NVLink counters are all we will see */
        if (!icx_cfg.quiet)
            icx_log("%s\n", msg);
    }
}
