/* Detect a CUDA runtime linked statically into the executable (nvcc's default, -cudart static):
 * its calls never go through the dynamic symbol table, so no preload can see them.  We say so in
 * the trace and once on stderr instead of leaving an empty report unexplained. */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icx.h"

static int icx_has_dynamic_cudart_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    return info->dlpi_name && strstr(info->dlpi_name, "libcudart.so") != NULL;
}

/* Does /proc/self/exe define a function named `cudaMemcpy` in its static symbol table? 1 yes,
 * 0 no, -1 cannot tell (stripped or unreadable). */
static int icx_exe_defines_cudart(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int found = -1;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    char *names = NULL;
    Elf64_Sym *syms = NULL;
    if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum == 0 || eh.e_shnum > 4096)
        goto out;
    sh = calloc(eh.e_shnum, sizeof(*sh));
    if (!sh || pread(fd, sh, eh.e_shnum * sizeof(*sh), (off_t)eh.e_shoff) !=
                   (ssize_t)(eh.e_shnum * sizeof(*sh)))
        goto out;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh.e_shnum)
            continue;
        const Elf64_Shdr *st = &sh[sh[i].sh_link];
        if (sh[i].sh_size > (256u << 20) || st->sh_size > (256u << 20))
            goto out;
        syms = malloc(sh[i].sh_size);
        names = malloc(st->sh_size + 1);
        if (!syms || !names ||
            pread(fd, syms, sh[i].sh_size, (off_t)sh[i].sh_offset) != (ssize_t)sh[i].sh_size ||
            pread(fd, names, st->sh_size, (off_t)st->sh_offset) != (ssize_t)st->sh_size)
            goto out;
        names[st->sh_size] = 0;
        found = 0;
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < n; k++) {
            if (syms[k].st_name >= st->sh_size || syms[k].st_shndx == SHN_UNDEF ||
                ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC)
                continue;
            if (strcmp(names + syms[k].st_name, "cudaMemcpy") == 0) {
                found = 1;
                break;
            }
        }
        break;
    }
out:
    free(syms);
    free(names);
    free(sh);
    close(fd);
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
        if (!icx_cfg.quiet)
            icx_log("%s\n", msg);
    }
}
