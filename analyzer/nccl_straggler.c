/* The NCCL report, part: stragglers.  All-reduce equalizes durations, so arrivals are compared,
 * not durations.  Per instance the skew is last arrival - first.  A rank is named when the
 * instances it arrived last at hold at least half of a communicator's total skew (it is why the
 * others waited), it was last at 3 or more of them and at a quarter of all (a straggler is
 * persistent; a loaded host makes any rank late now and then), and their median skew is at least
 * 5 ms, 4 times the median skew of the instances where someone else was last, and a quarter of the
 * communicator's median instance time (a wait that small next to the collective itself is not
 * worth a finding). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl_model.h"

void icx_nccl_stragglers(struct icx_nccl *N, const struct call *v, size_t n, struct icx_findings *F)
{
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        for (int r = 0; r < c->nranks && c->total_skew > 0; r++) {
            struct rankstat *x = &c->ranks[r];
            if (x->nskews < 3 || 4 * x->nskews < c->instances)
                continue;
            double mine = 0;
            for (size_t k = 0; k < x->nskews; k++)
                mine += x->skews[k];
            qsort(x->skews, x->nskews, sizeof(double), icx_nccl_dcmp);
            double med = icx_nccl_pct(x->skews, x->nskews, 0.5);
            double *others = malloc(sizeof(double) * (c->nskews + 1));
            size_t no = 0;
            for (size_t k = 0; others && k < c->nskews; k++)
                if (c->lasts[k] != r)
                    others[no++] = c->skews[k];
            double usual = 0;
            if (others && no) {
                qsort(others, no, sizeof(double), icx_nccl_dcmp);
                usual = icx_nccl_pct(others, no, 0.5);
            }
            free(others);
            /* the communicator's median instance time, over all its ops */
            double *all = malloc(sizeof(double) * (c->nskews + 1)), typical = 0;
            size_t na = 0;
            for (int o = 0; all && o < 8; o++)
                for (size_t k = 0; k < c->op[o].ndur && na < c->nskews + 1; k++)
                    all[na++] = c->op[o].dur[k];
            if (all && na) {
                qsort(all, na, sizeof(double), icx_nccl_dcmp);
                typical = icx_nccl_pct(all, na, 0.5);
            }
            free(all);
            if (mine < 0.5 * c->total_skew || med < 5e-3 || med < 4 * usual || med < 0.25 * typical)
                continue;
            char ev[600];
            const struct icx_proc *who = NULL;
            for (size_t k = 0; k < n && !who; k++)
                if (v[k].comm_id == c->id && v[k].rank == r)
                    who = v[k].p;
            char name[64];
            if (who && who->rank >= 0 && who->rank != r)
                snprintf(name, sizeof(name), "rank %d (global rank %d)", r, who->rank);
            else
                snprintf(name, sizeof(name), "rank %d", r);
            snprintf(ev, sizeof(ev),
                     "%s arrived last at %llu of %llu collectives of "
                     "communicator %016llx (%d ranks), %.0f%% of all their arrival skew; median "
                     "lateness %.1f ms; the others waited %.3f s in total for it",
                     name, (unsigned long long)x->last, (unsigned long long)c->instances,
                     (unsigned long long)c->id, c->nranks, 100 * mine / c->total_skew, med * 1e3,
                     x->imposed);
            struct icx_proc none = {0};
            none.pid = -1;
            none.rank = r;
            icx_finding_add(F, "straggler", who ? who : &none, ev,
                            "look at what this rank does before its collectives (data loading, "
                            "host work, a slower GPU or CPU placement); the others idle meanwhile");
        }
    }
}
