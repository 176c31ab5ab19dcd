/* Function symbols from an ELF file's static symbol table (.symtab), for what dladdr cannot name:
 * static functions and executables that export nothing.  Used when a trace is finished (stack
 * symbolization) and once at start (detecting a statically linked CUDA runtime); never on a hot
 * path.  Every size read from the file is checked before use. */
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfsym.h"

static int icx_func_cmp(const void *a, const void *b)
{
    const struct icx_elf_func *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int icx_elf_load(const char *path, struct icx_elf_syms *out)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = -1;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    Elf64_Sym *syms = NULL;
    if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum == 0 || eh.e_shnum > 4096)
        goto out;
    out->absolute = eh.e_type == ET_EXEC;
    sh = calloc(eh.e_shnum, sizeof(*sh));
    ssize_t shbytes = (ssize_t)(eh.e_shnum * sizeof(*sh));
    if (!sh || pread(fd, sh, (size_t)shbytes, (off_t)eh.e_shoff) != shbytes)
        goto out;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh.e_shnum)
            continue;
        const Elf64_Shdr *st = &sh[sh[i].sh_link];
        if (sh[i].sh_size > (256u << 20) || st->sh_size > (256u << 20))
            goto out;
        syms = malloc(sh[i].sh_size ? sh[i].sh_size : 1);
        out->strtab = malloc(st->sh_size + 1);
        if (!syms || !out->strtab ||
            pread(fd, syms, sh[i].sh_size, (off_t)sh[i].sh_offset) != (ssize_t)sh[i].sh_size ||
            pread(fd, out->strtab, st->sh_size, (off_t)st->sh_offset) != (ssize_t)st->sh_size)
            goto out;
        out->strtab[st->sh_size] = 0;
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        out->f = calloc(n ? n : 1, sizeof(*out->f));
        if (!out->f)
            goto out;
        for (size_t k = 0; k < n; k++) {
            if (syms[k].st_name >= st->sh_size || syms[k].st_shndx == SHN_UNDEF ||
                ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC)
                continue;
            out->f[out->n++] = (struct icx_elf_func){syms[k].st_value, syms[k].st_size,
                                                     out->strtab + syms[k].st_name};
        }
        qsort(out->f, out->n, sizeof(*out->f), icx_func_cmp);
        rc = 0;
        break;
    }
out:
    free(syms);
    free(sh);
    close(fd);
    if (rc != 0)
        icx_elf_free(out);
    return rc;
}

const struct icx_elf_func *icx_elf_lookup(const struct icx_elf_syms *s, uint64_t vaddr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->f[mid].start <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct icx_elf_func *f = &s->f[lo - 1];
    return vaddr < f->start + (f->size ? f->size : 1) ? f : NULL;
}

const struct icx_elf_func *icx_elf_find(const struct icx_elf_syms *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->f[i].name, name) == 0)
            return &s->f[i];
    return NULL;
}

void icx_elf_free(struct icx_elf_syms *s)
{
    free(s->f);
    free(s->strtab);
    memset(s, 0, sizeof(*s));
}
