/* The NCCL report, part: cross-rank matching.  Every rank numbers a communicator's collectives
 * the same way (the tracer's sequence numbers), so call #k of a communicator must be the same
 * collective on every rank: op, element type, count, reduction and root.  A rank whose call #k
 * differs from what the others called is a `collective_mismatch` (docs/FINDINGS.md) -- the usual
 * cause of a watchdog timeout that no slow rank explains: a data-dependent branch, an uneven last
 * batch, a rank-conditional call.  NCCL hangs there (or, for some count mismatches, corrupts
 * data silently); either way it is the first thing to fix.  One finding per communicator: the
 * first call number where the ranks disagree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

struct sig {
    uint64_t comm_id, seq, count;
    int op, root, rank; /* root: -1 where the op has none; rank: in the communicator */
    unsigned dtype, redop;
    const struct icx_proc *p;
    size_t k; /* the call's index in p->ncalls */
};

static int sig_cmp(const void *a, const void *b)
{
    const struct sig *x = a, *y = b;
    if (x->comm_id != y->comm_id)
        return x->comm_id < y->comm_id ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return icx_cmp_int(x->rank, y->rank);
}

static int same(const struct sig *a, const struct sig *b)
{
    return a->op == b->op && a->count == b->count && a->dtype == b->dtype && a->redop == b->redop &&
           a->root == b->root;
}

static const char *dtype_name(unsigned t)
{
    static const char *const n[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                    "uint64", "float16", "float32", "float64", "bfloat16"};
    return t < sizeof(n) / sizeof(n[0]) ? n[t] : "type?";
}

static const char *redop_name(unsigned r)
{
    static const char *const n[] = {"sum", "prod", "max", "min", "avg"};
    return r < sizeof(n) / sizeof(n[0]) ? n[r] : "op?";
}

static void describe(char *buf, size_t n, const struct sig *s)
{
    int reduces = s->op == 0 || s->op == 2 || s->op == 4; /* AllReduce, Reduce, ReduceScatter */
    size_t o = (size_t)snprintf(buf, n, "%s(%llu x %s", icx_nccl_op_names[s->op],
                                (unsigned long long)s->count, dtype_name(s->dtype));
    if (reduces && o < n)
        o += (size_t)snprintf(buf + o, n - o, ", %s", redop_name(s->redop));
    if (s->root >= 0 && o < n)
        o += (size_t)snprintf(buf + o, n - o, ", root %d", s->root);
    if (o < n)
        snprintf(buf + o, n - o, ")");
}

/* The call most of v[i..j) made: its index; *count how many made it. */
static size_t majority(const struct sig *v, size_t i, size_t j, size_t *count)
{
    size_t best = i, best_n = 0;
    for (size_t a = i; a < j; a++) {
        size_t m = 0;
        for (size_t b = i; b < j; b++)
            m += same(&v[a], &v[b]);
        if (m > best_n) {
            best_n = m;
            best = a;
        }
    }
    *count = best_n;
    return best;
}

/* "; rank R's call came from: f <- g; rank Q's (the others'): h <- i", as far as the traces hold
 * the calls' stacks (the tracer takes one per new call shape and thread). */
static void append_stacks(char *ev, size_t len, const struct sig *odd, const struct sig *usual)
{
    size_t used = strlen(ev);
    char st[600];
    const struct sig *side[2] = {odd, usual};
    for (int k = 0; k < 2 && side[k] && used < len; k++) {
        const struct sig *x = side[k];
        if (!icx_stack_text(x->p, icx_nccl_call_stack(x->p, x->k), 6, st, sizeof(st)))
            continue;
        int w = snprintf(ev + used, len - used, "; rank %d's call%s came from: %s", x->rank,
                         k ? " (the others')" : "", st);
        used += w > 0 ? (size_t)w : 0;
    }
}

/* The end of the group that starts at i (same communicator and call number). */
static size_t group_end(const struct sig *v, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && v[j].comm_id == v[i].comm_id && v[j].seq == v[i].seq)
        j++;
    return j;
}

void icx_nccl_mismatches(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F)
{
    size_t n = 0, cap = 0;
    struct sig *v = NULL;
    for (size_t q = 0; q < t->nprocs; q++) {
        const struct icx_proc *p = t->procs[q];
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *c = &p->ncalls[k];
            int op = icx_nccl_op_of(c->api);
            if (op >= 8 || (c->pending && icx_nccl_entry_returned(p, k)) ||
                (!c->pending && c->result != 0))
                continue; /* not a collective; the entry of a call whose return is here */
            const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
            if (!cm || icx_grow((void **)&v, &cap, n, sizeof(*v)) != 0)
                continue;
            int rooted = op == 1 || op == 2 || op == 6 || op == 7;
            v[n++] = (struct sig){cm->comm_id,
                                  c->seq,
                                  c->count,
                                  op,
                                  rooted ? c->peer : -1,
                                  cm->rank,
                                  c->dtype,
                                  op == 0 || op == 2 || op == 4 ? c->redop : 0,
                                  p,
                                  k};
        }
    }
    if (n)
        qsort(v, n, sizeof(*v), sig_cmp);
    uint64_t reported = 0;
    int any = 0;
    for (size_t i = 0; i < n;) {
        size_t j = group_end(v, n, i);
        if (any && v[i].comm_id == reported) {
            i = j;
            continue;
        }
        size_t best_n, best = majority(v, i, j, &best_n);
        /* the others' next call, to recognise a rank that skipped one */
        size_t next = SIZE_MAX, next_n = 0;
        if (j < n && v[j].comm_id == v[i].comm_id && v[j].seq == v[i].seq + 1)
            next = majority(v, j, group_end(v, n, j), &next_n);
        if (best_n == j - i) {
            i = j;
            continue;
        }
        int tie = 2 * best_n <= j - i;
        char want[160], got[160], who[700] = "", ev[2600];
        describe(want, sizeof(want), &v[best]);
        size_t o = 0;
        const struct icx_proc *first = NULL;
        const struct sig *first_odd = NULL;
        int odd = 0;
        for (size_t a = i; a < j; a++) {
            if (same(&v[a], &v[best]))
                continue;
            describe(got, sizeof(got), &v[a]);
            int skipped = next != SIZE_MAX && same(&v[a], &v[next]);
            if (o + 260 < sizeof(who))
                o += (size_t)snprintf(
                    who + o, sizeof(who) - o, "%srank %d (global %d, %s) called %s%s",
                    odd ? "; " : "", v[a].rank, v[a].p->rank, v[a].p->host ? v[a].p->host : "?",
                    got, skipped ? " (the others' next call: it skipped this one)" : "");
            first = first ? first : v[a].p;
            first_odd = first_odd ? first_odd : &v[a];
            odd++;
        }
        if (tie)
            snprintf(ev, sizeof(ev),
                     "call #%llu on communicator %016llx: the ranks disagree and no call has a "
                     "majority: %zu of the %zu ranks that reached it called %s; %s; NCCL cannot "
                     "complete a collective its ranks disagree on (it hangs there, or for some "
                     "counts corrupts data)",
                     (unsigned long long)v[i].seq, (unsigned long long)v[i].comm_id, best_n, j - i,
                     want, who);
        else
            snprintf(ev, sizeof(ev),
                     "call #%llu on communicator %016llx: %s where the other %zu of the %zu ranks "
                     "that reached it called %s; NCCL cannot complete a collective its ranks "
                     "disagree on (it hangs there, or for some counts corrupts data)",
                     (unsigned long long)v[i].seq, (unsigned long long)v[i].comm_id, who, best_n,
                     j - i, want);
        append_stacks(ev, sizeof(ev), first_odd, &v[best]);
        icx_finding_add(
            F, "collective_mismatch", first, ev,
            "make every rank issue the same collectives in the same order with the same "
            "counts, types, reductions and roots: look for a data-dependent branch, an "
            "uneven last batch or a rank-conditional call before this one");
        struct mism *mm = realloc(N->mism, (N->nmism + 1) * sizeof(*mm));
        if (mm) {
            N->mism = mm;
            mm[N->nmism++] = (struct mism){v[i].comm_id, v[i].seq, 0};
        }
        reported = v[i].comm_id;
        any = 1;
        i = j;
    }
    free(v);
}
