/* Function symbols of an ELF file's .symtab (preload/elfsym.c). */
#ifndef ICX_ELFSYM_H
#define ICX_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct icx_elf_func {
    uint64_t start, size; /* st_value, st_size */
    const char *name;     /* into strtab */
};

struct icx_elf_syms {
    struct icx_elf_func *f; /* defined functions, sorted by start */
    size_t n;
    char *strtab;
    int absolute; /* ET_EXEC: symbol values are addresses; otherwise offsets from the load base */
};

/* 0, or -1 when the file is unreadable, not ELF64, or has no .symtab (stripped). */
int icx_elf_load(const char *path, struct icx_elf_syms *out);
const struct icx_elf_func *icx_elf_lookup(const struct icx_elf_syms *s, uint64_t vaddr);
const struct icx_elf_func *icx_elf_find(const struct icx_elf_syms *s, const char *name);
void icx_elf_free(struct icx_elf_syms *s);

#endif
