/* Native call stacks (ICX_STACKS): captured with libunwind's unw_backtrace in the calling thread
 * (libunwind because it unwinds through frames without frame pointers, which glibc's backtrace
 * handles less reliably from a preload and which -O2 jobs rarely keep), deduplicated by the writer
 * into a stack table, and symbolized with dladdr once, when the trace is finished. */
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "frame.h"
#include "module.h"
#include "stack.h"
#include "tbuf.h"

#define ICX_STACK_DEPTH 32

void icx_stack_capture(void)
{
    void *ips[ICX_STACK_DEPTH];
    int saved = errno;
    int n = unw_backtrace(ips, ICX_STACK_DEPTH);
    errno = saved;
    if (n <= 0) {
        icx_count_lost(ICX_LOST_stack_error);
        return;
    }
    struct icx_slot slot;
    struct icx_rec *r = icx_reserve((uint32_t)(sizeof(*r) + (size_t)n * sizeof(uint64_t)), &slot);
    if (!r)
        return;
    r->type = ICX_RING_STACK_RAW;
    r->size = (uint16_t)(sizeof(*r) + (size_t)n * sizeof(uint64_t));
    r->aux = (uint32_t)n;
    uint64_t *out = (uint64_t *)(r + 1);
    for (int i = 0; i < n; i++)
        out[i] = (uint64_t)(uintptr_t)ips[i];
    icx_commit(&slot);
}

/* ---- writer side: the stack table ---- */
struct icx_stack {
    uint64_t hash;
    uint32_t id, depth;
    uint64_t *pc;
};
static struct icx_stack *icx_stacks;
static size_t icx_stacks_cap, icx_stacks_n;
static uintptr_t icx_self_lo, icx_self_hi;

static int icx_is_self(uint64_t pc)
{
    if (!icx_self_lo) {
        Dl_info di;
        if (dladdr((void *)icx_stack_capture, &di)) {
            icx_self_lo = (uintptr_t)di.dli_fbase;
            icx_self_hi = (uintptr_t)icx_stack_capture + (16u << 20); /* generous: our .text */
        }
    }
    Dl_info di;
    return pc >= icx_self_lo && pc < icx_self_hi && dladdr((void *)(uintptr_t)pc, &di) &&
           (uintptr_t)di.dli_fbase == icx_self_lo;
}

static int icx_stacks_grow(void)
{
    size_t ncap = icx_stacks_cap ? icx_stacks_cap * 2 : 256;
    struct icx_stack *n = calloc(ncap, sizeof(*n));
    if (!n)
        return -1;
    for (size_t i = 0; i < icx_stacks_cap; i++) {
        if (!icx_stacks[i].pc)
            continue;
        size_t j = icx_stacks[i].hash & (ncap - 1);
        while (n[j].pc)
            j = (j + 1) & (ncap - 1);
        n[j] = icx_stacks[i];
    }
    free(icx_stacks);
    icx_stacks = n;
    icx_stacks_cap = ncap;
    return 0;
}

uint32_t icx_stack_define(struct icx_frame *f, const uint64_t *pc, uint32_t depth)
{
    uint64_t h = 1469598103934665603ull ^ depth;
    for (uint32_t i = 0; i < depth; i++)
        h = (h ^ pc[i]) * 1099511628211ull;
    if (icx_stacks_n * 2 >= icx_stacks_cap && icx_stacks_grow() != 0)
        return 0;
    size_t j = h & (icx_stacks_cap - 1);
    while (icx_stacks[j].pc) {
        struct icx_stack *s = &icx_stacks[j];
        if (s->hash == h && s->depth == depth && memcmp(s->pc, pc, depth * sizeof(*pc)) == 0)
            return s->id;
        j = (j + 1) & (icx_stacks_cap - 1);
    }
    uint64_t *copy = malloc(depth * sizeof(*pc));
    if (!copy)
        return 0;
    memcpy(copy, pc, depth * sizeof(*pc));
    icx_stacks[j] = (struct icx_stack){h, (uint32_t)icx_stacks_n + 1, depth, copy};
    icx_stacks_n++;
    struct icx_rec_stack *st =
        icx_frame_put(f, ICX_REC_STACK, icx_stacks[j].id, sizeof(*st) + depth * sizeof(uint64_t));
    if (st) {
        st->depth = depth;
        memcpy(st + 1, pc, depth * sizeof(*pc));
    }
    return icx_stacks[j].id;
}

static void icx_stack_intern(struct icx_frame *f, const struct icx_rec *raw)
{
    const uint64_t *pc = (const uint64_t *)(raw + 1);
    uint32_t depth = raw->aux;
    while (depth > 0 && icx_is_self(pc[0])) { /* drop our own frames */
        pc++;
        depth--;
    }
    uint32_t id = depth ? icx_stack_define(f, pc, depth) : 0;
    if (id)
        icx_frame_put(f, ICX_REC_STACK_REF, id, sizeof(struct icx_rec));
}

static int icx_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Load base of the main program (the first object dl_iterate_phdr reports). */
static int icx_main_base_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = (uintptr_t)info->dlpi_addr;
    return 1;
}

static uintptr_t icx_main_base(void)
{
    uintptr_t base = 0;
    dl_iterate_phdr(icx_main_base_cb, &base);
    return base;
}

/* Symbol tables of the modules stacks pass through, loaded on first use at the end of the trace. */
struct icx_object_syms {
    uintptr_t base;
    int loaded;
    struct icx_elf_syms syms;
};

/* The .symtab function holding pc in the module dladdr found, and pc's offset into it. */
static const struct icx_elf_func *icx_static_symbol(struct icx_object_syms *mods, size_t *nmods,
                                                    const Dl_info *di, uint64_t pc,
                                                    uint64_t *offset)
{
    size_t i;
    for (i = 0; i < *nmods; i++)
        if (mods[i].base == (uintptr_t)di->dli_fbase)
            break;
    if (i == *nmods) {
        if (*nmods == 64)
            return NULL;
        /* The main program is named "" by the loader: read it through /proc/self/exe. */
        const char *path = di->dli_fname && di->dli_fname[0] ? di->dli_fname : "/proc/self/exe";
        mods[i].base = (uintptr_t)di->dli_fbase;
        mods[i].loaded = icx_elf_load(path, &mods[i].syms) == 0;
        if (!mods[i].loaded && strcmp(path, "/proc/self/exe") != 0)
            mods[i].loaded = icx_elf_load("/proc/self/exe", &mods[i].syms) == 0 &&
                             (uintptr_t)di->dli_fbase == icx_main_base();
        (*nmods)++;
    }
    if (!mods[i].loaded)
        return NULL;
    uint64_t vaddr = mods[i].syms.absolute ? pc : pc - mods[i].base;
    const struct icx_elf_func *fn = icx_elf_lookup(&mods[i].syms, vaddr);
    if (fn)
        *offset = vaddr - fn->start;
    return fn;
}

void icx_stack_symbolize_pcs(struct icx_frame *f, uint64_t *all, size_t n)
{
    struct icx_object_syms *mods = calloc(64, sizeof(*mods));
    size_t nmods = 0;
    if (!mods)
        return;
    qsort(all, n, sizeof(*all), icx_u64_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i && all[i] == all[i - 1])
            continue;
        Dl_info di;
        char text[512];
        /* Return addresses point after the call: look up pc-1 so the call's own function is
         * named.  dladdr knows exported symbols; .symtab names the rest (static functions,
         * executables built without -rdynamic). */
        uint64_t pc = all[i] - 1;
        if (dladdr((void *)(uintptr_t)pc, &di) && di.dli_fname) {
            const char *mod = strrchr(di.dli_fname, '/');
            mod = mod ? mod + 1 : di.dli_fname;
            uint64_t off = 0;
            const struct icx_elf_func *fn =
                di.dli_sname ? NULL : icx_static_symbol(mods, &nmods, &di, pc, &off);
            if (di.dli_sname)
                snprintf(text, sizeof(text), "%s+0x%llx (%s)", di.dli_sname,
                         (unsigned long long)(all[i] - (uintptr_t)di.dli_saddr), mod);
            else if (fn)
                snprintf(text, sizeof(text), "%s+0x%llx (%s)", fn->name,
                         (unsigned long long)(off + 1), mod);
            else
                snprintf(text, sizeof(text), "0x%llx (%s+0x%llx)", (unsigned long long)all[i], mod,
                         (unsigned long long)(all[i] - (uintptr_t)di.dli_fbase));
        } else {
            snprintf(text, sizeof(text), "0x%llx", (unsigned long long)all[i]);
        }
        uint32_t id = icx_intern(f, text);
        struct icx_rec_symbol *s = icx_frame_put(f, ICX_REC_SYMBOL, 0, sizeof(*s));
        if (s) {
            s->addr = all[i];
            s->text = id;
        }
    }
    for (size_t m = 0; m < nmods; m++)
        icx_elf_free(&mods[m].syms);
    free(mods);
}

static uint32_t icx_stacks_symbolized; /* stacks 1..this have their SYMBOL records */

void icx_stack_symbolize_new(struct icx_frame *f)
{
    size_t total = 0;
    for (size_t i = 0; i < icx_stacks_cap; i++)
        if (icx_stacks[i].pc && icx_stacks[i].id > icx_stacks_symbolized)
            total += icx_stacks[i].depth;
    uint64_t *all = total ? malloc(total * sizeof(*all)) : NULL;
    if (!all)
        return;
    size_t n = 0;
    for (size_t i = 0; i < icx_stacks_cap; i++)
        for (uint32_t k = 0; icx_stacks[i].pc && icx_stacks[i].id > icx_stacks_symbolized &&
                             k < icx_stacks[i].depth;
             k++)
            all[n++] = icx_stacks[i].pc[k];
    icx_stack_symbolize_pcs(f, all, n);
    free(all);
    icx_stacks_symbolized = (uint32_t)icx_stacks_n;
}

/* Symbols are looked up when the trace is finished (not before a fatal signal: too slow), and
 * at a hang dump (icx_stack_symbolize_new: a SIGKILL may follow). */
static void icx_stack_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    if (kind == ICX_TICK_EXIT)
        icx_stack_symbolize_new(f);
}

/* A traced child starts a stream of its own: its stacks must be defined in it again. */
static void icx_stack_fork_child(void)
{
    for (size_t i = 0; i < icx_stacks_cap; i++)
        free(icx_stacks[i].pc);
    free(icx_stacks);
    icx_stacks = NULL;
    icx_stacks_cap = icx_stacks_n = 0;
    icx_stacks_symbolized = 0;
}

const struct icx_module icx_mod_stack = {
    .name = "stack",
    .fork_child = icx_stack_fork_child,
    .ring_type = ICX_RING_STACK_RAW,
    .ring_record = icx_stack_intern,
    .tick = icx_stack_tick,
};
