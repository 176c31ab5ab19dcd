/* Decoding of a process's own records: strings, identity, clock pairs, loss counters, notes, end,
 * threads, stacks and symbols (trace_format.h sections 4, 6, 7, 9). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static char *dupstr(const char *s)
{
    return strdup(s ? s : "");
}

static void set_string(struct icx_proc *p, uint32_t id, const char *s, size_t maxlen)
{
    if (id == 0 || id > 10000000)
        return;
    if (id >= p->nstrings) {
        size_t n = id + 1 > p->nstrings * 2 ? id + 1 : p->nstrings * 2;
        char **ns = realloc(p->strings, n * sizeof(*ns));
        if (!ns)
            return;
        memset(ns + p->nstrings, 0, (n - p->nstrings) * sizeof(*ns));
        p->strings = ns;
        p->nstrings = n;
    }
    free(p->strings[id]);
    p->strings[id] = strndup(s, maxlen);
}

void icx_decode_proc(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx)
{
    const uint8_t *body = (const uint8_t *)r;
    (void)ctx;
    switch (r->type) {
    case ICX_REC_STRING: set_string(p, r->aux, (const char *)(body + 8), size - 8); break;
    case ICX_REC_PROCESS:
        if (size >= sizeof(struct icx_rec_process)) {
            const struct icx_rec_process *x = (const void *)r;
            p->pid = x->pid;
            p->ppid = x->ppid;
            p->rank = x->rank;
            p->local_rank = x->local_rank;
            p->world_size = x->world_size;
            p->local_world_size = x->local_world_size;
            free(p->host);
            free(p->job_id);
            free(p->cmdline);
            free(p->exe);
            p->host = dupstr(icx_proc_string(p, x->host));
            p->job_id = dupstr(icx_proc_string(p, x->job_id));
            p->cmdline = dupstr(icx_proc_string(p, x->cmdline));
            p->exe = dupstr(icx_proc_string(p, x->exe));
        }
        break;
    case ICX_REC_CLOCK:
        if (size >= sizeof(struct icx_rec_clock) &&
            !icx_grow((void **)&p->clocks, &p->cap_clocks, p->nclocks, sizeof(*p->clocks))) {
            const struct icx_rec_clock *c = (const void *)r;
            p->clocks[p->nclocks++] = (struct icx_clockpt){c->ticks, c->mono_ns, c->real_ns};
        }
        break;
    case ICX_REC_LOST:
        if (size >= sizeof(struct icx_rec_lost)) {
            const struct icx_rec_lost *l = (const void *)r;
            p->events_recorded = l->events_recorded;
            memcpy(p->lost, l->count, sizeof(p->lost));
        }
        break;
    case ICX_REC_THREAD:
        if (size >= sizeof(struct icx_rec_thread)) {
            struct icx_rd_thread *th = icx_thread_get(p, r->aux);
            if (th)
                snprintf(th->name, sizeof(th->name), "%s",
                         icx_proc_string(p, ((const struct icx_rec_thread *)r)->name));
        }
        break;
    case ICX_REC_NOTE:
        if (size >= sizeof(struct icx_rec_note)) {
            const struct icx_rec_note *x = (const void *)r;
            char **nn = realloc(p->notes, (p->nnotes + 1) * sizeof(*nn));
            int *ns = nn ? realloc(p->note_severity, (p->nnotes + 1) * sizeof(*ns)) : NULL;
            if (nn)
                p->notes = nn;
            if (ns) {
                p->note_severity = ns;
                p->notes[p->nnotes] = dupstr(icx_proc_string(p, x->text));
                p->note_severity[p->nnotes++] = (int)r->aux;
            }
        }
        break;
    case ICX_REC_END:
        if (size >= sizeof(struct icx_rec_end)) {
            p->ended = 1;
            p->exit_status = ((const struct icx_rec_end *)r)->exit_status;
        }
        break;
    case ICX_REC_STACK:
        if (size >= sizeof(struct icx_rec_stack)) {
            const struct icx_rec_stack *x = (const void *)r;
            uint32_t depth = x->depth;
            if (depth > (size - sizeof(*x)) / 8 ||
                icx_grow((void **)&p->stacks, &p->cap_stacks, p->nstacks, sizeof(*p->stacks)))
                break;
            uint64_t *pc = malloc(depth ? depth * sizeof(*pc) : 1);
            if (!pc)
                break;
            memcpy(pc, x + 1, depth * sizeof(*pc));
            p->stacks[p->nstacks++] = (struct icx_stack_def){r->aux, depth, pc};
        }
        break;
    case ICX_REC_SYMBOL:
        if (size >= sizeof(struct icx_rec_symbol) &&
            !icx_grow((void **)&p->symbols, &p->cap_symbols, p->nsymbols, sizeof(*p->symbols))) {
            const struct icx_rec_symbol *x = (const void *)r;
            p->symbols[p->nsymbols++] =
                (struct icx_symbol){x->addr, dupstr(icx_proc_string(p, x->text))};
        }
        break;
    default: break;
    }
}

static int symbol_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct icx_symbol *)a)->addr, y = ((const struct icx_symbol *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Least-squares fit ticks -> monotonic ns through the stream's CLOCK pairs; the time the process
 * covered, as far as its clock pairs say (the families extend it with their events). */
void icx_decode_proc_finish(struct icx_proc *p)
{
    if (!(p->features & ICX_FEAT_TSC) || p->nclocks < 2) {
        p->slope = 1.0;
        p->intercept = 0.0;
        /* TSC with a single pair (a stream cut before its first flush, so with no events):
         * anchor at that pair; the rate is unknown and nothing needs it. */
        if ((p->features & ICX_FEAT_TSC) && p->nclocks == 1)
            p->intercept = (double)p->clocks[0].mono_ns - (double)p->clocks[0].ticks;
    } else {
        double n = (double)p->nclocks, mx = 0, my = 0;
        double x0 = (double)p->clocks[0].ticks, y0 = (double)p->clocks[0].mono_ns;
        for (size_t i = 0; i < p->nclocks; i++) {
            mx += (double)p->clocks[i].ticks - x0;
            my += (double)p->clocks[i].mono_ns - y0;
        }
        mx /= n;
        my /= n;
        double sxx = 0, sxy = 0;
        for (size_t i = 0; i < p->nclocks; i++) {
            double dx = (double)p->clocks[i].ticks - x0 - mx;
            double dy = (double)p->clocks[i].mono_ns - y0 - my;
            sxx += dx * dx;
            sxy += dx * dy;
        }
        p->slope = sxx > 0 ? sxy / sxx : 1.0;
        p->intercept = y0 + my - p->slope * (x0 + mx);
    }
    double lo = 1e300, hi = -1e300;
    for (size_t i = 0; i < p->nclocks; i++) {
        double s = (double)p->clocks[i].mono_ns / 1e9;
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    p->t_first = lo <= hi ? lo : 0;
    p->t_last = lo <= hi ? hi : 0;
    if (p->nsymbols > 1)
        qsort(p->symbols, p->nsymbols, sizeof(struct icx_symbol), symbol_cmp);
}
