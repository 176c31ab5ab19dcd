/* The NCCL report, part: stragglers.  All-reduce equalizes durations, so arrivals are compared,
 * not durations.  The rule (docs/NCCL.md, "Stragglers"), per communicator:
 *
 *  - Units: each collective instance is one unit; the instances of one group (ncclGroupStart/End
 *    around, say, a Gather and a Scatter) are one unit, a rank's arrival its first call in it.
 *  - Excused arrivals: a rank that reaches a unit straight from a wait in another communicator --
 *    its previous call there had to wait for a later rank, and it arrived here promptly after that
 *    unit could complete -- is late here because of that wait.  It is left out of this unit's
 *    comparison (the cause, if it is in this communicator too, then stands out), and counted as
 *    explained.
 *  - The late set: of the unit's arrivals sorted latest first, the top s (1 <= s <= max(2, n/4),
 *    below n) after the widest gap; it is clear when that gap is at least half the unit's skew
 *    (last arrival - first).  A rank alone far behind is a late set of one; two late together are
 *    a late set of two, never the marginally later one alone.
 *  - Chance: with no straggler the arrivals are exchangeable, so a rank is in a unit's late set of
 *    s (of m compared) with probability s/m.  Over its N units the count is at most as spread as
 *    Binomial(N, mean s/m) (Hoeffding), so a rank in k late sets is named only when that tail is
 *    below ICX_STRAGGLER_ALPHA / n (Bonferroni over the ranks) and k >= 3.
 *  - Effect size: its late units hold at least half of the communicator's total skew, and their
 *    median gap is at least 5 ms and 4 times the median gap of the other units.
 *  - Then the named ranks are set aside and the rule runs again on the rest (a 20 ms straggler
 *    behind a 60 ms one is still found), until no new rank is named.
 *
 * Every finding carries its evidence and a confidence (1 - the Bonferroni-adjusted tail); every
 * communicator gets a verdict (named, quiet, noisy: arrivals skewed but no rank persistently late,
 * too few units). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

#define ICX_STRAGGLER_ALPHA 1e-3
#define ICX_STRAGGLER_MIN_GAP 5e-3 /* s */

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

/* One unit: calls v[i..j) of one communicator, one instance or a group's adjacent instances. */
struct unit {
    size_t i, j, comm;
    double first, last, ready;    /* earliest, latest arrival; when it could complete */
    const struct icx_proc *lastp; /* who arrived last */
    int tested;                   /* a complete collective unit (send/recv pairs only explain) */
};

/* Per call of v: its unit, and the process's previous call (SIZE_MAX: none). */
struct callref {
    size_t unit, prev;
    const struct icx_proc *cause; /* its lateness explained by a wait for this process */
    double budget;                /* s of lateness that wait explains */
};

struct ord {
    const struct icx_proc *p;
    double t;
    size_t k;
};
static int ord_cmp(const void *a, const void *b)
{
    const struct ord *x = a, *y = b;
    if (x->p != y->p)
        return (uintptr_t)x->p < (uintptr_t)y->p ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* Instances v[a..b) and v[b..c) are one group's: the same ranks, each from the same process in
 * the same group. */
static int same_group(const struct call *v, size_t a, size_t b, size_t c)
{
    if (c - b != b - a)
        return 0;
    for (size_t x = 0; x < b - a; x++)
        if (!v[a + x].group || v[a + x].group != v[b + x].group || v[a + x].p != v[b + x].p ||
            v[a + x].rank != v[b + x].rank)
            return 0;
    return 1;
}

static struct unit *make_units(struct icx_nccl *N, const struct call *v, size_t n,
                               struct callref *ref, size_t *nunits)
{
    struct unit *u = malloc(sizeof(*u) * (n + 1));
    size_t m = 0;
    for (size_t i = 0; u && i < n;) {
        size_t j = icx_nccl_instance_end(v, n, i);
        struct comm *c = icx_nccl_comm_get(N, v[i].comm_id, v[i].nranks);
        int coll = v[i].op < 8, full = j - i == (coll ? (size_t)v[i].nranks : 2);
        size_t end = j;
        while (coll && full && end < n && v[end].op < 8 && v[end].comm_id == v[i].comm_id) {
            size_t e2 = icx_nccl_instance_end(v, n, end);
            if (!same_group(v, i, end, e2))
                break;
            end = e2;
        }
        struct unit *x = &u[m];
        *x = (struct unit){i,
                           end,
                           c ? (size_t)(c - N->v) : SIZE_MAX,
                           INFINITY,
                           -INFINITY,
                           -INFINITY,
                           NULL,
                           coll && full && c};
        for (size_t k = i; k < end; k++) {
            ref[k].unit = m;
            x->first = fmin(x->first, v[k].enter);
            if (v[k].enter > x->last) {
                x->last = v[k].enter;
                x->lastp = v[k].p;
            }
            x->ready = fmax(x->ready, v[k].gpu == ICX_GPU_DONE ? v[k].gpu_end : v[k].exit);
        }
        x->ready = fmax(x->ready, x->last);
        if (full)
            m++;
        else
            for (size_t k = i; k < end; k++)
                ref[k].unit = SIZE_MAX;
        i = end;
    }
    *nunits = m;
    return u;
}

/* Why the call v[k] arrived late at its unit, if a wait explains it: sets ref[k].cause to the
 * process it waited for (and ref[k].budget to the lateness that wait explains).  Only a late
 * arrival is explained: 1 ms or more, and at least half the unit's skew.
 *  - Directly: its previous call was on another communicator and had to wait there for a later
 *    rank; that wait covers at least half its lateness here, and it came here promptly (within
 *    max(2 ms, a quarter of the wait)) after that unit could complete.
 *  - Carried: its previous call had such an explanation and it is no later here than the wait
 *    explained (beyond the same slack): host calls that only enqueue carry a delay from one
 *    collective to the next, and the delay is still the wait's.  Send/recv calls pass an
 *    explanation on without testing it (a pair has no "rest" to be late against). */
static void explain(const struct call *v, struct callref *ref, const struct unit *U, size_t k)
{
    size_t pk = ref[k].prev;
    ref[k].cause = NULL;
    if (pk == SIZE_MAX || ref[pk].unit == SIZE_MAX || ref[k].unit == SIZE_MAX)
        return;
    const struct unit *me = &U[ref[k].unit], *there = &U[ref[pk].unit];
    if (ref[pk].cause && !me->tested) {
        ref[k].cause = ref[pk].cause;
        ref[k].budget = ref[pk].budget;
        return;
    }
    double late = v[k].enter - me->first;
    if (late < 1e-3 || late < 0.5 * (me->last - me->first))
        return;
    if (ref[pk].cause && late <= ref[pk].budget + fmax(2e-3, 0.25 * ref[pk].budget)) {
        ref[k].cause = ref[pk].cause;
        ref[k].budget = ref[pk].budget;
        return;
    }
    if (v[pk].comm_id == v[k].comm_id || there->lastp == v[k].p)
        return;
    double wait = there->last - v[pk].enter;
    if (wait <= 0 || v[k].enter < there->last || wait < 0.5 * late)
        return;
    if (v[k].enter - there->ready > fmax(2e-3, 0.25 * wait))
        return;
    ref[k].cause = there->lastp;
    ref[k].budget = late;
}

/* Each call's previous call by the same process, in another unit, and what explains its
 * lateness (in each process's order, so that a carried explanation is known). */
static void link_previous(const struct call *v, size_t n, struct callref *ref, const struct unit *U)
{
    struct ord *o = malloc(sizeof(*o) * (n + 1));
    for (size_t k = 0; k < n; k++) {
        ref[k].prev = SIZE_MAX;
        ref[k].cause = NULL;
    }
    if (!o)
        return;
    for (size_t k = 0; k < n; k++)
        o[k] = (struct ord){v[k].p, v[k].enter, k};
    if (n)
        qsort(o, n, sizeof(*o), ord_cmp);
    for (size_t a = 1; a < n; a++) {
        size_t b = a; /* back over this call's own unit (a group's other calls) */
        while (b > 0 && o[b - 1].p == o[a].p && ref[o[b - 1].k].unit == ref[o[a].k].unit)
            b--;
        if (b > 0 && o[b - 1].p == o[a].p) {
            ref[o[a].k].prev = o[b - 1].k;
            explain(v, ref, U, o[a].k);
        }
    }
    free(o);
}

/* One rank's arrival at a unit of the communicator under test. */
struct arr {
    double t;
    int rank;
};
static int arr_cmp(const void *a, const void *b) /* latest first */
{
    const struct arr *x = a, *y = b;
    return x->t > y->t ? -1 : x->t < y->t;
}

struct rankacc {
    uint64_t units, k; /* units compared in, late sets it was in */
    double psum, mine; /* sum of s/m over its units; skew of its late units */
    double *gaps;      /* the gap of its late units */
    size_t ngaps;
    uint64_t excused; /* its arrivals explained by waits elsewhere */
    const struct icx_proc *cause, *p;
    size_t seen; /* the unit (index + 1) its arrival was last taken from */
};

/* A unit's widest gap, its last rank and its clear late set (tops[off..off+s)). */
struct ugap {
    double gap;
    int last, s;
    size_t off;
};

/* The communicator's units this pass (ranks set aside left out): the late set of each, and per
 * rank what the rule needs.  Returns the total skew; *gaps_all gets every unit's widest gap. */
static double pass(const struct call *v, const struct callref *ref, const struct unit *U,
                   const size_t *mine, size_t nmine, int nranks, const char *aside,
                   struct rankacc *acc, struct ugap **gaps_all, size_t *ngaps_all, int **tops,
                   size_t *ntops, struct arrivals *A, struct arr *a)
{
    double total = 0, *skews = malloc(sizeof(double) * (nmine + 1));
    size_t nsk = 0;
    int smax_cap = nranks / 4 > 2 ? nranks / 4 : 2;
    for (size_t ui = 0; ui < nmine; ui++) {
        const struct unit *x = &U[mine[ui]];
        int m = 0;
        for (size_t k = x->i; k < x->j; k++) {
            int r = v[k].rank;
            if (r < 0 || r >= nranks || aside[r])
                continue;
            if (acc[r].seen == ui + 1) /* a group's later call: its first is the arrival */
                continue;
            acc[r].seen = ui + 1;
            acc[r].p = v[k].p;
            const struct icx_proc *cause = ref[k].cause;
            if (cause) {
                acc[r].excused++;
                acc[r].cause = cause;
                A->excused++;
                continue;
            }
            a[m++] = (struct arr){v[k].enter, r};
        }
        if (m < 2)
            continue;
        A->units++;
        qsort(a, (size_t)m, sizeof(*a), arr_cmp);
        double skew = a[0].t - a[m - 1].t, gap = 0;
        int smax = smax_cap < m - 1 ? smax_cap : m - 1, s = 0;
        for (int q = 1; q <= smax; q++)
            if (a[q - 1].t - a[q].t > gap) {
                gap = a[q - 1].t - a[q].t;
                s = q;
            }
        int clear = s > 0 && gap > 0 && gap >= 0.5 * skew;
        total += skew;
        if (skews)
            skews[nsk++] = skew;
        A->clear += clear;
        for (int q = 0; q < m; q++) {
            struct rankacc *r = &acc[a[q].rank];
            r->units++;
            if (clear)
                r->psum += (double)s / m;
            if (clear && q < s) {
                r->k++;
                r->mine += skew;
                icx_nccl_push(&r->gaps, &r->ngaps, gap);
            }
        }
        /* for "the usual gap": every unit's gap, its last rank and its late set */
        struct ugap *ng = realloc(*gaps_all, (*ngaps_all + 1) * sizeof(**gaps_all));
        int *nt = realloc(*tops, (*ntops + (size_t)m) * sizeof(int));
        if (nt)
            *tops = nt;
        if (ng && nt) {
            *gaps_all = ng;
            ng[(*ngaps_all)++] = (struct ugap){gap, a[0].rank, clear ? s : 0, *ntops};
            for (int q = 0; clear && q < s; q++)
                nt[(*ntops)++] = a[q].rank;
        }
    }
    if (skews && nsk) {
        qsort(skews, nsk, sizeof(double), icx_nccl_dcmp);
        A->median_skew = icx_nccl_pct(skews, nsk, 0.5);
    }
    free(skews);
    return total;
}

static void name_straggler(const struct comm *c, int r, const struct rankacc *x, double share,
                           double gap, double usual, double tail, const char *also,
                           struct icx_findings *F)
{
    const struct icx_proc *who = x->p;
    char name[64], ev[1000], conf[32];
    if (who && who->rank >= 0 && who->rank != r)
        snprintf(name, sizeof(name), "rank %d (global rank %d)", r, who->rank);
    else
        snprintf(name, sizeof(name), "rank %d", r);
    double p = fmin(1, tail * c->nranks);
    snprintf(conf, sizeof(conf), p < 1e-9 ? ">99.9999999%%" : "%.7g%%", 100 * (1 - p));
    snprintf(ev, sizeof(ev),
             "%s was among the clearly late (behind the rest by at least half the skew) at %llu "
             "of %llu collectives of communicator %016llx (%d ranks)%s; by chance %.2g of them "
             "were expected, P(%llu or more) = %.1e, confidence %s; %.0f%% of all their arrival "
             "skew; median gap behind the rest %.1f ms (other collectives: %.1f ms); the others "
             "waited %.3f s in total at the collectives it arrived last at",
             name, (unsigned long long)x->k, (unsigned long long)x->units,
             (unsigned long long)c->id, c->nranks, also, x->psum, (unsigned long long)x->k, tail,
             conf, 100 * share, gap * 1e3, usual * 1e3, c->ranks[r].imposed);
    struct icx_proc none = {0};
    none.pid = -1;
    none.rank = r;
    icx_finding_add(F, "straggler", who ? who : &none, ev,
                    "look at what this rank does before its collectives (data loading, host work, "
                    "a slower GPU or CPU placement); the others idle meanwhile");
    F->v[F->n - 1].confidence = 1 - p;
}

/* The median gap of the units where rank r was neither last nor in the late set (0 with fewer
 * than 3 such units: too few to say what is usual). */
static double usual_gap(const struct ugap *g, size_t n, const int *tops, int r)
{
    double *w = malloc(sizeof(double) * (n + 1)), med = 0;
    size_t m = 0;
    for (size_t k = 0; w && k < n; k++) {
        int own = g[k].last == r;
        for (int q = 0; q < g[k].s && !own; q++)
            own = tops[g[k].off + (size_t)q] == r;
        if (!own)
            w[m++] = g[k].gap;
    }
    if (w && m >= 3) {
        qsort(w, m, sizeof(double), icx_nccl_dcmp);
        med = icx_nccl_pct(w, m, 0.5);
    }
    free(w);
    return med;
}

/* ", the late arrivals of ranks 4 (6) and 7 (2) here came straight from waiting for it in another
 * communicator and were not counted against them" */
static void explained_text(char *out, size_t len, const struct rankacc *acc, int n,
                           const struct icx_proc *cause)
{
    size_t o = 0;
    out[0] = 0;
    for (int q = 0; q < n && o + 40 < len; q++)
        if (acc[q].excused && acc[q].cause == cause)
            o += (size_t)snprintf(out + o, len - o, "%s%d (%llu)", o ? ", " : "", q,
                                  (unsigned long long)acc[q].excused);
    if (o && o + 120 < len) {
        char ranks[300];
        snprintf(ranks, sizeof(ranks), "%s", out);
        snprintf(out, len,
                 "; late arrivals of rank(s) %s came straight from waiting for it in another "
                 "communicator and were not counted against them",
                 ranks);
    }
}

static void test_comm(struct icx_nccl *N, size_t ci, const struct call *v,
                      const struct callref *ref, const struct unit *U, const size_t *mine,
                      size_t nmine, struct icx_findings *F)
{
    struct comm *c = &N->v[ci];
    int n = c->nranks;
    char *aside = calloc((size_t)n + 1, 1);
    struct rankacc *acc = calloc((size_t)n + 1, sizeof(*acc));
    struct arr *a = malloc(sizeof(*a) * ((size_t)n + 1));
    char set_aside[200] = "";
    for (int round = 0; aside && acc && a && round < n; round++) {
        struct arrivals A = {0};
        struct ugap *gaps = NULL;
        int *tops = NULL;
        size_t ngaps = 0, ntops = 0;
        for (int r = 0; r < n; r++) {
            free(acc[r].gaps);
            memset(&acc[r], 0, sizeof(acc[r]));
        }
        double total =
            pass(v, ref, U, mine, nmine, n, aside, acc, &gaps, &ngaps, &tops, &ntops, &A, a);
        if (round == 0)
            c->arrivals = A;
        int named = 0;
        if (round == 0)
            c->arrivals.cand = -1;
        for (int r = 0; total > 0 && r < n; r++) {
            struct rankacc *x = &acc[r];
            if (round == 0 && x->k >= 3 && x->units &&
                (c->arrivals.cand < 0 || x->k > c->arrivals.cand_k)) {
                c->arrivals.cand = r;
                c->arrivals.cand_k = x->k;
                c->arrivals.cand_units = x->units;
                c->arrivals.cand_tail =
                    icx_binomial_tail(x->units, x->k, x->psum / (double)x->units);
            }
            /* Hoeffding's bound on the count holds from its mean + 1 on */
            if (aside[r] || x->k < 3 || !x->units || (double)x->k < x->psum + 1)
                continue;
            double tail = icx_binomial_tail(x->units, x->k, x->psum / (double)x->units);
            if (tail >= ICX_STRAGGLER_ALPHA / n)
                continue;
            qsort(x->gaps, x->ngaps, sizeof(double), icx_nccl_dcmp);
            double gap = icx_nccl_pct(x->gaps, x->ngaps, 0.5),
                   usual = usual_gap(gaps, ngaps, tops, r);
            if (x->mine < 0.5 * total || gap < ICX_STRAGGLER_MIN_GAP || gap < 4 * usual)
                continue;
            char also[600];
            size_t o = (size_t)snprintf(also, sizeof(also), "%s", set_aside);
            explained_text(also + o, sizeof(also) - o, acc, n, x->p);
            name_straggler(c, r, x, x->mine / total, gap, usual, tail, also, F);
            aside[r] = 1;
            named++;
        }
        free(gaps);
        free(tops);
        if (!named)
            break;
        c->arrivals.named += named;
        size_t o = (size_t)snprintf(set_aside, sizeof(set_aside), " (with rank");
        for (int r = 0; r < n && o + 16 < sizeof(set_aside); r++)
            if (aside[r])
                o += (size_t)snprintf(set_aside + o, sizeof(set_aside) - o, " %d", r);
        snprintf(set_aside + o, sizeof(set_aside) - o, " set aside)");
    }
    struct arrivals *A = &c->arrivals;
    A->verdict = A->units < 3                              ? "too few"
                 : A->named                                ? "named"
                 : A->cand >= 0 && A->cand_tail < 0.05     ? "inconclusive"
                 : A->median_skew >= ICX_STRAGGLER_MIN_GAP ? "noisy"
                                                           : "quiet";
    for (int r = 0; acc && r < n; r++)
        free(acc[r].gaps);
    free(aside);
    free(acc);
    free(a);
}

void icx_nccl_stragglers(struct icx_nccl *N, const struct call *v, size_t n, struct icx_findings *F)
{
    struct callref *ref = malloc(sizeof(*ref) * (n + 1));
    size_t nu = 0;
    struct unit *U = ref ? make_units(N, v, n, ref, &nu) : NULL;
    size_t *mine = malloc(sizeof(size_t) * (nu + 1));
    if (!U || !mine)
        goto out;
    link_previous(v, n, ref, U);
    for (size_t ci = 0; ci < N->n; ci++) {
        size_t m = 0;
        for (size_t u = 0; u < nu; u++)
            if (U[u].comm == ci && U[u].tested)
                mine[m++] = u;
        N->v[ci].arrivals.verdict = "too few";
        if (N->v[ci].nranks >= 2 && m)
            test_comm(N, ci, v, ref, U, mine, m, F);
    }
out:
    free(mine);
    free(U);
    free(ref);
}
