/* The NCCL report, part: hangs and post-mortems -- which collective the ranks still inside one wait
 * in, and which ranks never reached it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hang_dump.h"
#include "nccl_model.h"

/* When p aborted handle h (ncclCommAbort) at or after t, monotonic s; INFINITY: it did not. */
static double aborted_at(const struct icx_proc *p, uint64_t h, double t)
{
    double at = INFINITY;
    for (size_t k = 0; k < p->nncomms; k++)
        if (p->ncomms[k].api == ICX_API_ncclCommAbort && p->ncomms[k].comm == h &&
            p->ncomms[k].t >= t)
            at = fmin(at, p->ncomms[k].t);
    return at;
}

/* The NCCL calls process p was inside when its trace ended: per thread, a pending (entry) record
 * with no return record after it on that thread; and calls whose GPU work was still running --
 * or, on a communicator p aborted, was running when it aborted it (what the abort cut short
 * finishes, and work queued behind runs, only because of the abort).  Returns how many, filling
 * out[] (indices). */
static size_t in_flight(const struct icx_proc *p, size_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nncalls; i++) {
        const struct icx_rd_ncall *c = &p->ncalls[i];
        if (!c->pending)
            continue;
        if (!icx_nccl_entry_returned(p, i) && n < max)
            out[n++] = i;
    }
    /* Returned (NCCL only enqueued it) but its GPU work never finished: running when the trace
     * ended.  Queued work (not started) is behind something else and is not where a rank waits.
     * Without a final flush a span may just not have been written yet: only calls older than a
     * second before the trace's end count then. */
    for (size_t i = 0; i < p->nncalls; i++) {
        const struct icx_rd_ncall *c = &p->ncalls[i];
        if (c->pending || c->api == ICX_API_ncclGroupEnd)
            continue;
        double ta = aborted_at(p, c->comm, c->t_enter);
        int open = isfinite(ta)
                       ? (c->gpu == ICX_GPU_DONE || c->gpu == ICX_GPU_RUNNING) &&
                             c->gpu_start <= ta && (c->gpu == ICX_GPU_RUNNING || c->gpu_end > ta)
                       : c->gpu == ICX_GPU_RUNNING || (c->gpu == ICX_GPU_UNKNOWN && !p->ended &&
                                                       c->t_enter < p->t_last - 1.0);
        if (open && n < max)
            out[n++] = i;
    }
    return n;
}

static const char *end_of(const struct icx_proc *p, char *buf, size_t len)
{
    if (!p->ended)
        snprintf(buf, len, "its trace stops there (the process was killed without a flush)");
    else if (p->exit_status > 128)
        snprintf(buf, len, "it was ended by signal %d", p->exit_status - 128);
    else if (p->exit_status == ICX_EXIT_EXEC)
        snprintf(buf, len, "it replaced itself by exec()");
    else
        snprintf(buf, len, "it exited with status %d", p->exit_status);
    return buf;
}

void icx_nccl_hangs(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F)
{
    double t0 = icx_nccl_job_t0(t);
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        struct stuck *s = &c->stuck;
        /* who is inside which collective of this communicator */
        for (size_t i = 0; i < t->nprocs; i++) {
            const struct icx_proc *p = t->procs[i];
            size_t fl[64], nf = in_flight(p, fl, 64);
            for (size_t k = 0; k < nf; k++) {
                const struct icx_rd_ncall *x = &p->ncalls[fl[k]];
                const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, x->comm, x->t_enter);
                int op = icx_nccl_op_of(x->api);
                if (!cm || cm->comm_id != c->id || op >= 8)
                    continue;
                if (!s->nwaiting || x->seq < s->seq) { /* the earliest collective anyone waits in */
                    free(s->waiting);
                    s->waiting = NULL;
                    s->nwaiting = s->ongpu = s->unknown = s->behind = 0;
                    s->seq = x->seq;
                    s->op = op;
                    s->since = INFINITY;
                }
                if (x->seq != s->seq)
                    continue;
                int *w = realloc(s->waiting, (size_t)(s->nwaiting + 1) * sizeof(int));
                if (!w)
                    continue;
                s->waiting = w;
                s->waiting[s->nwaiting++] = cm->rank;
                int ongpu = x->gpu == ICX_GPU_RUNNING || (!x->pending && x->gpu == ICX_GPU_DONE);
                s->ongpu += ongpu;
                s->unknown += !x->pending && x->gpu == ICX_GPU_UNKNOWN;
                /* behind another of this process's stuck calls, issued earlier on the same stream
                 * on another communicator: it cannot have started */
                int behind = 0;
                for (size_t q = 0; !x->pending && q < nf && !behind; q++) {
                    const struct icx_rd_ncall *y = &p->ncalls[fl[q]];
                    const struct icx_rd_ncomm *cy = icx_nccl_comm_of(p, y->comm, y->t_enter);
                    behind = y != x && y->stream == x->stream && y->t_enter < x->t_enter && cy &&
                             cy->comm_id != c->id;
                }
                s->behind += behind;
                double since = ongpu ? x->gpu_start : x->t_enter;
                s->since = fmin(s->since, since + icx_nccl_wall_offset(p) - t0);
            }
        }
        if (!s->nwaiting || s->behind == s->nwaiting)
            continue; /* nobody, or every waiter is queued behind a stuck call elsewhere */
        /* who never got there: traced ranks whose last collective on it is before seq */
        char who[4000] = "", ev[4400], end[128];
        int len = 0, members = 0; /* traced ranks of the communicator */
        for (size_t i = 0; i < t->nprocs; i++) {
            const struct icx_proc *p = t->procs[i];
            int rank = -1;
            uint64_t last_seq = 0;
            int last_op = 11;
            const struct icx_rd_ncall *last = NULL;
            for (size_t k = 0; k < p->nncalls; k++) {
                const struct icx_rd_ncall *x = &p->ncalls[k];
                const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, x->comm, x->t_enter);
                if (!cm || cm->comm_id != c->id)
                    continue;
                rank = cm->rank;
                if (icx_nccl_op_of(x->api) < 8 && x->seq > last_seq) {
                    last_seq = x->seq;
                    last_op = icx_nccl_op_of(x->api);
                }
                last = x;
            }
            members += rank >= 0;
            if (rank < 0 || last_seq >= s->seq)
                continue;
            int *m = realloc(s->missing, (size_t)(s->nmissing + 1) * sizeof(int));
            if (!m)
                continue;
            s->missing = m;
            s->missing[s->nmissing++] = rank;
            const struct icx_rd_ncall *any = p->nncalls ? &p->ncalls[p->nncalls - 1] : last;
            char where[1400];
            int dumped = icx_hang_where(p, where, sizeof(where));
            if (len < (int)sizeof(who) - 200)
                len +=
                    snprintf(who + len, sizeof(who) - (size_t)len,
                             "%srank %d (%s pid %d) reached %s #%llu last; its last NCCL call "
                             "was %s at %.3f s; %s%s%s",
                             s->nmissing > 1 ? "; " : "", rank, p->host ? p->host : "?", p->pid,
                             icx_nccl_op_names[last_op], (unsigned long long)last_seq,
                             any ? icx_nccl_op_names[icx_nccl_op_of(any->api)] : "none",
                             any ? any->t_enter + icx_nccl_wall_offset(p) - t0 : 0.0,
                             end_of(p, end, sizeof(end)), dumped ? "; " : "", dumped ? where : "");
        }
        int disagree = 0, order = 0;
        for (size_t k = 0; k < N->nmism; k++)
            if (N->mism[k].comm_id == c->id && N->mism[k].seq == s->seq) {
                disagree = 1;
                order |= N->mism[k].order;
            }
        snprintf(
            ev, sizeof(ev),
            "%d of %d ranks wait in %s #%llu of communicator %016llx since "
            "%.3f s into the job (%d inside its GPU work, %d in the host call, %d with GPU work "
            "not known to have finished); %s",
            s->nwaiting, c->nranks, icx_nccl_op_names[s->op], (unsigned long long)s->seq,
            (unsigned long long)c->id, s->since, s->ongpu, s->nwaiting - s->ongpu - s->unknown,
            s->unknown,
            s->nmissing ? who
            : order     ? "every traced rank entered it, but not all in the same order as another "
                          "communicator's call (see the collective_mismatch finding)"
            : disagree  ? "every traced rank entered it, but they disagree on the call (see the "
                          "collective_mismatch finding)"
                        : "every traced rank entered it (an untraced rank or the "
                          "network is missing)");
        double ab_first;
        int nab = icx_nccl_aborts_of(t, c->id, &ab_first);
        size_t evl = strlen(ev);
        if (nab && evl < sizeof(ev) - 160)
            snprintf(ev + evl, sizeof(ev) - evl,
                     "; the job then aborted the communicator: ncclCommAbort by %d of %d ranks, "
                     "the first at %.3f s, %.3f s into the wait",
                     nab, c->nranks, ab_first, ab_first - s->since);
        /* every traced rank issued it, but some have it queued behind a stuck call on another
         * communicator: that call's hang, not one of its own */
        if (!s->nmissing && !disagree && (s->behind > 0 || s->nwaiting < members))
            continue;
        /* one finding per missing rank (its host and pid), or one for the communicator */
        for (int m = 0; m < s->nmissing || (m == 0 && !s->nmissing); m++) {
            const struct icx_proc *p = NULL;
            for (size_t i = 0; s->nmissing && i < t->nprocs && !p; i++)
                for (size_t k = 0; k < t->procs[i]->nncomms && !p; k++)
                    if (t->procs[i]->ncomms[k].comm_id == c->id &&
                        t->procs[i]->ncomms[k].rank == s->missing[m])
                        p = t->procs[i];
            struct icx_proc none = {0};
            none.pid = -1;
            none.rank = s->nmissing ? s->missing[m] : -1;
            icx_finding_add(F, "hang", p ? p : &none, ev,
                            "find what the named rank is doing instead (py-spy or gdb on it: a "
                            "dead-locked data loader, an exception swallowed on that rank, a "
                            "collective issued in a different order); the others cannot proceed");
        }
    }
}
