/* The NCCL report, part: stragglers.  All-reduce equalizes durations, so arrivals are compared,
 * not durations.  The rule (docs/NCCL.md, "Stragglers"):
 *
 *  - An instance counts against its last rank only when that rank was clearly last: its lead over
 *    the runner-up is at least half the instance's skew (last arrival - first).  Two ranks late
 *    together (both held up elsewhere) leave the instance charged to neither.
 *  - Persistence against chance: with n ranks and no straggler, each instance's last rank is one
 *    of n, so a rank is clearly last at k of N instances with probability at most
 *    P(X >= k), X ~ Binomial(N, 1/n).  A rank is named only when that tail is below
 *    ICX_STRAGGLER_ALPHA / n (Bonferroni over the communicator's ranks), and k >= 3.
 *  - Effect size: the instances it was clearly last at hold at least half of the communicator's
 *    total skew (it is why the others waited), and their median lead is at least 5 ms, 4 times
 *    the median lead of the instances where someone else was last, and a quarter of the
 *    communicator's median instance time (a wait that small next to the collective itself is not
 *    worth a finding).
 *
 * Every finding carries its evidence: clear-last count, the chance rate, the tail probability. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl_model.h"

#define ICX_STRAGGLER_ALPHA 1e-3

/* P(X >= k) for X ~ Binomial(n, p), summed in log space (n up to millions of instances). */
double icx_binomial_tail(uint64_t n, uint64_t k, double p)
{
    if (k == 0)
        return 1;
    if (k > n || p <= 0)
        return 0;
    if (p >= 1)
        return 1;
    double sum = 0, lp = log(p), lq = log1p(-p);
    for (uint64_t i = k; i <= n; i++) {
        double term = lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) +
                      (double)i * lp + (double)(n - i) * lq;
        double t = exp(term);
        sum += t;
        if (i > k && t < sum * 1e-17) /* the terms only shrink past the mode */
            break;
    }
    return fmin(1, sum);
}

/* The median of v[k] over the instances whose last rank is not not_rank (0 when none). */
static double median_of(const double *v, const int *lasts, size_t n, int not_rank)
{
    double *w = malloc(sizeof(double) * (n + 1));
    size_t m = 0;
    for (size_t k = 0; w && k < n; k++)
        if (lasts[k] != not_rank)
            w[m++] = v[k];
    double med = 0;
    if (w && m) {
        qsort(w, m, sizeof(double), icx_nccl_dcmp);
        med = icx_nccl_pct(w, m, 0.5);
    }
    free(w);
    return med;
}

/* The communicator's median instance time, over its collectives (ops 0-7). */
static double typical_instance(const struct comm *c)
{
    size_t na = 0;
    for (int o = 0; o < 8; o++)
        na += c->op[o].ndur;
    double *all = malloc(sizeof(double) * (na + 1)), typical = 0;
    size_t m = 0;
    for (int o = 0; all && o < 8; o++)
        for (size_t k = 0; k < c->op[o].ndur; k++)
            all[m++] = c->op[o].dur[k];
    if (all && m) {
        qsort(all, m, sizeof(double), icx_nccl_dcmp);
        typical = icx_nccl_pct(all, m, 0.5);
    }
    free(all);
    return typical;
}

static void name_straggler(const struct comm *c, int r, const struct call *v, size_t n,
                           double share, double lead, double tail, struct icx_findings *F)
{
    const struct rankstat *x = &c->ranks[r];
    const struct icx_proc *who = NULL;
    for (size_t k = 0; k < n && !who; k++)
        if (v[k].comm_id == c->id && v[k].rank == r)
            who = v[k].p;
    char name[64], ev[700];
    if (who && who->rank >= 0 && who->rank != r)
        snprintf(name, sizeof(name), "rank %d (global rank %d)", r, who->rank);
    else
        snprintf(name, sizeof(name), "rank %d", r);
    snprintf(ev, sizeof(ev),
             "%s arrived last at %llu of %llu collectives of communicator %016llx (%d ranks), "
             "clearly last (ahead of the runner-up by at least half the skew) at %zu; by chance "
             "a rank is last at 1 in %d, P(%zu or more) = %.1e; %.0f%% of all their arrival skew; "
             "median lead over the runner-up %.1f ms; the others waited %.3f s in total for it",
             name, (unsigned long long)x->last, (unsigned long long)c->instances,
             (unsigned long long)c->id, c->nranks, x->nleads, c->nranks, x->nleads, tail,
             100 * share, lead * 1e3, x->imposed);
    struct icx_proc none = {0};
    none.pid = -1;
    none.rank = r;
    icx_finding_add(F, "straggler", who ? who : &none, ev,
                    "look at what this rank does before its collectives (data loading, host work, "
                    "a slower GPU or CPU placement); the others idle meanwhile");
}

void icx_nccl_stragglers(struct icx_nccl *N, const struct call *v, size_t n, struct icx_findings *F)
{
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        if (c->total_skew <= 0 || c->nranks < 2)
            continue;
        double typical = -1;
        for (int r = 0; r < c->nranks; r++) {
            struct rankstat *x = &c->ranks[r];
            if (x->nleads < 3)
                continue;
            double tail = icx_binomial_tail(c->instances, x->nleads, 1.0 / c->nranks);
            if (tail >= ICX_STRAGGLER_ALPHA / c->nranks)
                continue;
            /* the skew of the instances it was clearly last at: lead >= skew / 2 there */
            double mine = 0;
            for (size_t k = 0; k < c->nskews; k++)
                if (c->lasts[k] == r && c->leads[k] > 0 && c->leads[k] >= 0.5 * c->skews[k])
                    mine += c->skews[k];
            qsort(x->leads, x->nleads, sizeof(double), icx_nccl_dcmp);
            double med = icx_nccl_pct(x->leads, x->nleads, 0.5);
            double usual = median_of(c->leads, c->lasts, c->nskews, r);
            if (typical < 0)
                typical = typical_instance(c);
            if (mine < 0.5 * c->total_skew || med < 5e-3 || med < 4 * usual || med < 0.25 * typical)
                continue;
            name_straggler(c, r, v, n, mine / c->total_skew, med, tail, F);
        }
    }
}
