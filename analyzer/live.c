/* The live view: what a running job's traces say now.  Each frame re-reads every trace (the tracer
 * flushes a frame every ICX_FLUSH_MS, so a file is a readable prefix at any moment), then per
 * communicator takes the last collective each rank entered and finished, names the ranks that are
 * behind the first rank by more than the lateness bound, and per NIC and NVLink GPU takes the rate
 * between its newest counter samples.  Times are wall clock: the traces' own CLOCK records map each
 * process's monotonic clock to it, so a login node reading them needs only a synchronised clock. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hang_dump.h"
#include "json.h"
#include "format.h"
#include "live.h"
#include "nccl_model.h"
#include "reader.h"

/* One collective call a rank entered, as far as the trace has it. */
struct obs {
    uint64_t comm, seq;
    int rank, nranks, op, returned, done;
    double enter; /* wall s */
    const struct icx_proc *p;
};

struct lrank {
    int rank;
    const struct icx_proc *p;
    uint64_t reached, done; /* the last call number entered, the last finished (0: none) */
    int op, in_call;        /* the reached call's op; 1 while it has not returned */
    double late;            /* s behind the first rank (0: not behind) */
};

struct lcomm {
    uint64_t id, lead; /* the highest call number a rank reached */
    uint64_t oldest;   /* the oldest call some rank has not finished (0: none) */
    int oldest_op, oldest_in, nranks, nlate;
    double oldest_since; /* wall s the first rank entered it */
    struct lrank *r;     /* by rank */
    size_t nr;
};

struct lrate {
    const char *host;
    char bus[32];
    int nic;
    double age, dt, tx_bps, rx_bps, cap_bps; /* age: s since the newest sample */
};

struct icx_live {
    const struct icx_trace *t;
    double now, late, age_min, age_max;
    size_t nended, nhosts;
    struct lcomm *c;
    size_t nc;
    struct lrate *rates;
    size_t nrates;
};

static const char *host_of(const struct icx_proc *p)
{
    return p && p->host ? p->host : "?";
}

static int obs_cmp(const void *a, const void *b)
{
    const struct obs *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    if (x->rank != y->rank)
        return icx_cmp_int(x->rank, y->rank);
    return x->enter < y->enter ? -1 : x->enter > y->enter;
}

/* Every collective call record of every process (entry and return records alike). */
static struct obs *collect(const struct icx_trace *t, size_t *count)
{
    struct obs *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        double off = icx_nccl_wall_offset(p);
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *c = &p->ncalls[k];
            int op = icx_nccl_op_of(c->api);
            if (op >= 8 || !c->seq || (!c->pending && c->result != 0))
                continue;
            const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
            if (!cm || icx_grow((void **)&v, &cap, n, sizeof(*v)))
                continue;
            int done = !c->pending && (c->gpu == ICX_GPU_DONE || c->gpu == ICX_GPU_UNTIMED);
            v[n++] = (struct obs){.comm = cm->comm_id,
                                  .seq = c->seq,
                                  .rank = cm->rank,
                                  .nranks = cm->nranks,
                                  .op = op,
                                  .returned = !c->pending,
                                  .done = done,
                                  .enter = c->t_enter + off,
                                  .p = p};
        }
    }
    if (n)
        qsort(v, n, sizeof(*v), obs_cmp);
    *count = n;
    return v;
}

static struct lcomm *comm_get(struct icx_live *L, uint64_t id, int nranks)
{
    for (size_t i = 0; i < L->nc; i++)
        if (L->c[i].id == id)
            return &L->c[i];
    size_t cap = L->nc;
    if (nranks <= 0 || nranks > ICX_RD_MAX_NRANKS ||
        icx_grow((void **)&L->c, &cap, L->nc, sizeof(*L->c)))
        return NULL;
    struct lcomm *c = &L->c[L->nc];
    *c = (struct lcomm){.id = id, .nranks = nranks};
    c->r = calloc((size_t)nranks, sizeof(*c->r));
    if (!c->r)
        return NULL;
    c->nr = (size_t)nranks;
    for (int r = 0; r < nranks; r++)
        c->r[r].rank = -1; /* untraced until a call says otherwise */
    L->nc++;
    return c;
}

/* The first entry of call `seq` of communicator `comm` among the sorted records: wall s, or NAN. */
static double first_entry(const struct obs *v, size_t n, uint64_t comm, uint64_t seq, int *op)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].comm < comm || (v[mid].comm == comm && v[mid].seq < seq))
            lo = mid + 1;
        else
            hi = mid;
    }
    double first = NAN;
    for (size_t i = lo; i < n && v[i].comm == comm && v[i].seq == seq; i++)
        if (!(v[i].enter >= first)) {
            first = v[i].enter;
            *op = v[i].op;
        }
    return first;
}

static void fold_ranks(struct icx_live *L, const struct obs *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct lcomm *c = comm_get(L, v[i].comm, v[i].nranks);
        if (!c || v[i].rank < 0 || (size_t)v[i].rank >= c->nr)
            continue;
        struct lrank *r = &c->r[v[i].rank];
        r->rank = v[i].rank;
        r->p = v[i].p;
        if (v[i].seq > r->reached) {
            r->reached = v[i].seq;
            r->op = v[i].op;
            r->in_call = !v[i].returned;
        } else if (v[i].seq == r->reached && v[i].returned)
            r->in_call = 0;
        if (v[i].done && v[i].seq > r->done)
            r->done = v[i].seq;
    }
}

/* Per communicator: the lead, who is behind it and by how much, the oldest unfinished call. */
static void judge(struct icx_live *L, const struct obs *v, size_t n)
{
    for (size_t i = 0; i < L->nc; i++) {
        struct lcomm *c = &L->c[i];
        uint64_t oldest = UINT64_MAX;
        for (size_t r = 0; r < c->nr; r++)
            if (c->r[r].rank >= 0) {
                c->lead = c->r[r].reached > c->lead ? c->r[r].reached : c->lead;
                oldest = c->r[r].done + 1 < oldest ? c->r[r].done + 1 : oldest;
            }
        for (size_t r = 0; r < c->nr; r++) {
            struct lrank *x = &c->r[r];
            int op;
            if (x->rank < 0 || x->reached >= c->lead)
                continue;
            double first = first_entry(v, n, c->id, x->reached + 1, &op);
            x->late = isfinite(first) && L->now > first ? L->now - first : 0;
            c->nlate += x->late >= L->late;
        }
        if (oldest != UINT64_MAX && oldest <= c->lead) {
            c->oldest = oldest;
            c->oldest_since = first_entry(v, n, c->id, oldest, &c->oldest_op);
            for (size_t r = 0; r < c->nr; r++)
                c->oldest_in += c->r[r].rank >= 0 && c->r[r].reached >= oldest;
        }
    }
}

static int sample_cmp(const void *a, const void *b)
{
    const struct icx_counter_sample *x = *(const struct icx_counter_sample *const *)a,
                                    *y = *(const struct icx_counter_sample *const *)b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The rate of one counter (every sample of it on its host, sorted by time) over the newest
 * samples spanning `window` s; none (NaN) before the trace holds that much. */
static void rate_of(struct lrate *r, const struct icx_counter_sample *const *s, size_t n,
                    double wall_now, double off, double window)
{
    const struct icx_counter_sample *y = s[n - 1], *x = s[n - 2];
    for (size_t k = n - 1; k-- > 0;) {
        x = s[k];
        if (y->t - x->t >= window)
            break;
    }
    r->age = wall_now - (y->t_read + off);
    r->dt = y->t - x->t;
    int ok = r->dt >= 0.9 * window; /* shorter: counters that step in bursts would mislead */
    r->tx_bps = ok && y->tx >= x->tx ? (double)(y->tx - x->tx) / r->dt : NAN;
    r->rx_bps = ok && y->rx >= x->rx ? (double)(y->rx - x->rx) / r->dt : NAN;
    r->cap_bps = y->nic && y->rate_mbps ? y->rate_mbps * 1e6 : NAN;
    snprintf(r->bus, sizeof(r->bus), "%s", y->bus);
    r->nic = y->nic;
}

/* Per (host, counter): the samples of every process of that host, one rate. */
static void rates(struct icx_live *L, double window)
{
    const struct icx_trace *t = L->t;
    size_t cap = 0;
    for (size_t i = 0; i < t->nprocs; i++)
        for (size_t k = 0; k < t->procs[i]->ncsamples; k++) {
            const struct icx_proc *p = t->procs[i];
            const struct icx_counter_sample *x = &p->csamples[k];
            int seen = 0; /* a counter already rated (by this or an earlier process) */
            for (size_t r = 0; r < L->nrates && !seen; r++)
                seen = L->rates[r].nic == x->nic && !strcmp(L->rates[r].bus, x->bus) &&
                       !strcmp(L->rates[r].host, p->host ? p->host : "");
            if (seen)
                continue;
            const struct icx_counter_sample **s = NULL;
            size_t n = 0, scap = 0;
            for (size_t j = i; j < t->nprocs; j++) {
                const struct icx_proc *q = t->procs[j];
                if (strcmp(q->host ? q->host : "", p->host ? p->host : ""))
                    continue;
                for (size_t m = 0; m < q->ncsamples; m++)
                    if (q->csamples[m].nic == x->nic && !strcmp(q->csamples[m].bus, x->bus) &&
                        !icx_grow((void **)&s, &scap, n, sizeof(*s)))
                        s[n++] = &q->csamples[m];
            }
            if (n >= 2 && !icx_grow((void **)&L->rates, &cap, L->nrates, sizeof(*L->rates))) {
                qsort(s, n, sizeof(*s), sample_cmp);
                struct lrate *r = &L->rates[L->nrates++];
                r->host = p->host ? p->host : "";
                rate_of(r, s, n, L->now, icx_nccl_wall_offset(p), window);
            }
            free(s);
        }
}

struct icx_live *icx_live_compute(const struct icx_trace *t, double now, double late_s)
{
    struct icx_live *L = calloc(1, sizeof(*L));
    if (!L)
        return NULL;
    *L = (struct icx_live){.t = t, .now = now, .late = late_s, .age_min = INFINITY};
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        double age = now - (p->t_last + icx_nccl_wall_offset(p));
        L->age_min = fmin(L->age_min, age);
        L->age_max = fmax(L->age_max, age);
        L->nended += p->ended != 0;
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(host_of(t->procs[j]), host_of(p)) != 0;
        L->nhosts += first;
    }
    size_t n = 0;
    struct obs *v = collect(t, &n);
    fold_ranks(L, v, n);
    judge(L, v, n);
    free(v);
    rates(L, 2.0);
    return L;
}

void icx_live_free(struct icx_live *L)
{
    if (!L)
        return;
    for (size_t i = 0; i < L->nc; i++)
        free(L->c[i].r);
    free(L->c);
    free(L->rates);
    free(L);
}

/* The rank of the job (the launcher's RANK), or the communicator's where the process has none. */
static int job_rank(const struct lrank *r)
{
    return r->p->rank >= 0 ? r->p->rank : r->rank;
}

/* The job ranks (the communicator's where a process has none) of c's ranks for which keep()
 * holds, as "0-10,12-15". */
static void rank_list(char *buf, size_t len, const struct lcomm *c,
                      int (*keep)(const struct lcomm *, const struct lrank *))
{
    int *v = malloc(c->nr * sizeof(*v));
    size_t n = 0;
    for (size_t r = 0; v && r < c->nr; r++)
        if (c->r[r].rank >= 0 && keep(c, &c->r[r]))
            v[n++] = job_rank(&c->r[r]);
    icx_fmt_ranks(buf, len, v, n);
    free(v);
}

static int at_lead(const struct lcomm *c, const struct lrank *r)
{
    return r->reached == c->lead;
}

static int late_now(const struct lcomm *c, const struct lrank *r)
{
    (void)c;
    return r->late > 0;
}

static int lrank_late_cmp(const void *a, const void *b)
{
    const struct lrank *x = *(const struct lrank *const *)a, *y = *(const struct lrank *const *)b;
    return x->late > y->late ? -1 : x->late < y->late;
}

/* The late ranks of c, latest first (a malloc'ed array of *n; NULL when none). */
static const struct lrank **late_ranks(const struct icx_live *L, const struct lcomm *c, size_t *n)
{
    const struct lrank **v = malloc(c->nr * sizeof(*v));
    *n = 0;
    for (size_t r = 0; v && r < c->nr; r++)
        if (c->r[r].rank >= 0 && c->r[r].late >= L->late && c->r[r].late > 0)
            v[(*n)++] = &c->r[r];
    if (*n > 1)
        qsort(v, *n, sizeof(*v), lrank_late_cmp);
    return v;
}

static int traced_of(const struct lcomm *c)
{
    int k = 0;
    for (size_t r = 0; r < c->nr; r++)
        k += c->r[r].rank >= 0;
    return k;
}

static void print_comm(FILE *out, const struct icx_live *L, const struct lcomm *c)
{
    char lead[256], behind[256];
    rank_list(lead, sizeof(lead), c, at_lead);
    rank_list(behind, sizeof(behind), c, late_now);
    fprintf(out, "  %016llx %5d/%-5d #%-6llu ranks %s", (unsigned long long)c->id, traced_of(c),
            c->nranks, (unsigned long long)c->lead, lead);
    if (behind[0])
        fprintf(out, "; behind: %s", behind);
    fputc('\n', out);
    if (c->oldest && isfinite(c->oldest_since) && L->now - c->oldest_since >= L->late)
        fprintf(out, "  %16s %s #%llu unfinished for %.1f s: %d of %d traced ranks entered it\n",
                "", icx_nccl_op_names[c->oldest_op], (unsigned long long)c->oldest,
                L->now - c->oldest_since, c->oldest_in, traced_of(c));
    size_t n;
    const struct lrank **v = late_ranks(L, c, &n);
    for (size_t k = 0; k < n && k < 8; k++)
        fprintf(out,
                "  %16s LATE rank %d (%s pid %d): %.1f s behind, last at %s #%llu%s; trace %.1f s "
                "old\n",
                "", job_rank(v[k]), host_of(v[k]->p), v[k]->p->pid, v[k]->late,
                icx_nccl_op_names[v[k]->op], (unsigned long long)v[k]->reached,
                v[k]->in_call ? " (still inside it)" : "",
                L->now - (v[k]->p->t_last + icx_nccl_wall_offset(v[k]->p)));
    if (n > 8)
        fprintf(out, "  %16s and %zu more late ranks\n", "", n - 8);
    free(v);
}

static void fmt_rate(char *buf, size_t len, double Bps)
{
    if (!isfinite(Bps)) {
        snprintf(buf, len, "-");
        return;
    }
    char b[32];
    icx_fmt_bytes(b, sizeof(b), Bps);
    snprintf(buf, len, "%s/s", b);
}

static double rate_max(const struct lrate *r)
{
    double tx = isfinite(r->tx_bps) ? r->tx_bps : 0, rx = isfinite(r->rx_bps) ? r->rx_bps : 0;
    return tx > rx ? tx : rx;
}

static int rate_cmp(const void *a, const void *b)
{
    double x = rate_max(*(const struct lrate *const *)a);
    double y = rate_max(*(const struct lrate *const *)b);
    return x > y ? -1 : x < y;
}

/* The busiest counters first, at most MAX_RATES of them; the rest counted in one line. */
#define MAX_RATES 16
static void print_rates(FILE *out, const struct icx_live *L)
{
    const struct lrate **v = L->nrates ? malloc(L->nrates * sizeof(*v)) : NULL;
    if (!v)
        return;
    for (size_t i = 0; i < L->nrates; i++)
        v[i] = &L->rates[i];
    qsort(v, L->nrates, sizeof(*v), rate_cmp);
    if (rate_max(v[0]) == 0 && isfinite(v[0]->tx_bps)) {
        fprintf(out, "\nRates now: all %zu NIC and NVLink counters idle over the last 2 s\n",
                L->nrates);
        free(v);
        return;
    }
    fprintf(out, "\nRates now (over the newest counter samples, about 2 s), busiest first\n");
    fprintf(out, "  %-12s %-14s %14s %14s %8s %6s\n", "host", "NIC / GPU", "tx", "rx", "of port",
            "age s");
    size_t shown = L->nrates < MAX_RATES ? L->nrates : MAX_RATES, idle = 0;
    for (size_t i = shown; i < L->nrates; i++)
        idle += rate_max(v[i]) == 0;
    for (size_t i = 0; i < shown; i++) {
        const struct lrate *r = v[i];
        char tx[40], rx[40], cap[32] = "-";
        fmt_rate(tx, sizeof(tx), r->tx_bps);
        fmt_rate(rx, sizeof(rx), r->rx_bps);
        if (isfinite(r->cap_bps))
            snprintf(cap, sizeof(cap), "%.0f %%", 100 * rate_max(r) * 8 / r->cap_bps);
        fprintf(out, "  %-12s %-14s %14s %14s %8s %6.1f\n", r->host, r->bus, tx, rx, cap, r->age);
    }
    if (L->nrates > shown)
        fprintf(out, "  and %zu more counters (%zu of them idle)\n", L->nrates - shown, idle);
    free(v);
}

static int is_late(const struct icx_live *L, const struct icx_proc *p)
{
    for (size_t i = 0; i < L->nc; i++)
        for (size_t r = 0; r < L->c[i].nr; r++)
            if (L->c[i].r[r].p == p && L->c[i].r[r].late > 0 && L->c[i].r[r].late >= L->late)
                return 1;
    return 0;
}

/* The hang dumps of the late ranks, one line each (at most 8); the others counted. */
static void print_dumps(FILE *out, const struct icx_live *L)
{
    size_t others = 0, shown = 0;
    for (size_t i = 0; i < L->t->nprocs; i++) {
        const struct icx_proc *p = L->t->procs[i];
        char where[1400];
        if (!icx_hang_where(p, where, sizeof(where)))
            continue;
        if (!is_late(L, p) || shown >= 8) {
            others++;
            continue;
        }
        if (!shown++)
            fprintf(out, "\nHang dumps of the late ranks\n");
        fprintf(out, "  rank %d (%s pid %d) %s\n", p->rank, host_of(p), p->pid, where);
    }
    if (others)
        fprintf(out, "%s  %zu %sprocess%s took hang dumps (icx-analyze DIR shows them all)\n",
                shown ? "" : "\n", others, shown ? "other " : "", others == 1 ? "" : "es");
}

void icx_live_print(FILE *out, const struct icx_live *L)
{
    time_t now = (time_t)L->now;
    struct tm tm;
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    fprintf(out, "icx-analyze follow  %s  %zu processes on %zu hosts, %zu ended", when,
            L->t->nprocs, L->nhosts, L->nended);
    if (L->t->nprocs)
        fprintf(out, "; newest event %.1f to %.1f s ago", L->age_min, L->age_max);
    fputc('\n', out);
    if (L->nc)
        fprintf(out,
                "\nCommunicators: the last collective the ranks reached; LATE: %.0f s or more "
                "behind the first rank\n  %-16s %11s %-7s\n",
                L->late, "communicator", "traced/all", "reached");
    for (size_t i = 0; i < L->nc; i++)
        print_comm(out, L, &L->c[i]);
    print_rates(out, L);
    print_dumps(out, L);
    if (L->t->nprocs && L->nended == L->t->nprocs)
        fprintf(out,
                "\nEvery traced process has ended: `icx-analyze DIR` gives the full report.\n");
}

static void comm_json(struct icx_json *j, const struct icx_live *L, const struct lcomm *c)
{
    icx_json_obj(j, NULL);
    char id[24];
    snprintf(id, sizeof(id), "%016llx", (unsigned long long)c->id);
    icx_json_str(j, "comm_id", id);
    icx_json_int(j, "nranks", c->nranks);
    icx_json_int(j, "traced", traced_of(c));
    icx_json_int(j, "lead_seq", (long long)c->lead);
    if (c->oldest) {
        icx_json_obj(j, "oldest_unfinished");
        icx_json_int(j, "seq", (long long)c->oldest);
        icx_json_str(j, "op", icx_nccl_op_names[c->oldest_op]);
        icx_json_int(j, "entered", c->oldest_in);
        icx_json_fix(j, "for_s", L->now - c->oldest_since, 3);
        icx_json_end(j);
    } else
        icx_json_null(j, "oldest_unfinished");
    icx_json_arr(j, "ranks");
    for (size_t r = 0; r < c->nr; r++) {
        const struct lrank *x = &c->r[r];
        if (x->rank < 0)
            continue;
        icx_json_obj(j, NULL);
        icx_json_int(j, "rank", job_rank(x));
        icx_json_int(j, "comm_rank", x->rank);
        icx_json_str(j, "host", host_of(x->p));
        icx_json_int(j, "pid", x->p->pid);
        icx_json_int(j, "reached", (long long)x->reached);
        icx_json_str(j, "op", icx_nccl_op_names[x->op]);
        icx_json_bool(j, "in_call", x->in_call);
        icx_json_int(j, "done", (long long)x->done);
        icx_json_fix(j, "behind_s", x->late, 3);
        icx_json_bool(j, "late", x->late > 0 && x->late >= L->late);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_end(j);
}

void icx_live_json(FILE *out, const struct icx_live *L)
{
    struct icx_json j;
    icx_json_begin(&j, out);
    icx_json_obj(&j, NULL);
    icx_json_str(&j, "tool", "icx-analyze");
    icx_json_str(&j, "command", "follow");
    icx_json_fix(&j, "now", L->now, 3);
    icx_json_fix(&j, "late_s", L->late, 3);
    icx_json_int(&j, "processes", (long long)L->t->nprocs);
    icx_json_int(&j, "ended", (long long)L->nended);
    icx_json_fix(&j, "newest_event_age_max_s", L->t->nprocs ? L->age_max : NAN, 3);
    icx_json_arr(&j, "communicators");
    for (size_t i = 0; i < L->nc; i++)
        comm_json(&j, L, &L->c[i]);
    icx_json_end(&j);
    icx_json_arr(&j, "rates");
    for (size_t i = 0; i < L->nrates; i++) {
        const struct lrate *r = &L->rates[i];
        icx_json_obj(&j, NULL);
        icx_json_str(&j, "host", r->host);
        icx_json_str(&j, r->nic ? "nic" : "gpu_bus", r->bus);
        icx_json_num(&j, "tx_Bps", r->tx_bps);
        icx_json_num(&j, "rx_Bps", r->rx_bps);
        icx_json_num(&j, "port_bps", r->cap_bps);
        icx_json_fix(&j, "over_s", r->dt, 3);
        icx_json_fix(&j, "age_s", r->age, 3);
        icx_json_end(&j);
    }
    icx_json_end(&j);
    icx_json_arr(&j, "hang_dumps");
    for (size_t i = 0; i < L->t->nprocs; i++) {
        const struct icx_proc *p = L->t->procs[i];
        char where[1400];
        if (!icx_hang_where(p, where, sizeof(where)))
            continue;
        icx_json_obj(&j, NULL);
        icx_json_int(&j, "rank", p->rank);
        icx_json_int(&j, "pid", p->pid);
        icx_json_str(&j, "where", where);
        icx_json_end(&j);
    }
    icx_json_end(&j);
    icx_json_end(&j);
}

struct follow_opts {
    double interval, late;
    long count; /* frames; 0: until every process ended */
    int json;
    char **paths;
    int npaths;
};

static int follow_usage(void)
{
    fprintf(stderr, "usage: icx-analyze follow [--interval S] [--late S] [--count N] [--once] "
                    "[--json] DIR|TRACE...\n"
                    "  --interval S  seconds between frames (default 5)\n"
                    "  --late S      a rank this far behind its communicator's first rank is "
                    "late (default 10)\n"
                    "  --count N     stop after N frames (--once: 1); default: until every traced "
                    "process ended\n"
                    "  --json        one JSON document per frame, one per line (docs/LIVE.md)\n");
    return 2;
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "icx-analyze follow: %s %s: want a number from %g to %g\n", opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int follow_parse(int argc, char **argv, struct follow_opts *o)
{
    *o = (struct follow_opts){.interval = 5, .late = 10};
    double d;
    o->paths = argv;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--interval") && has) {
            if (parse_num(a, argv[++i], 0.1, 3600, &o->interval))
                return -1;
        } else if (!strcmp(a, "--late") && has) {
            if (parse_num(a, argv[++i], 0, 86400, &o->late))
                return -1;
        } else if (!strcmp(a, "--count") && has) {
            if (parse_num(a, argv[++i], 1, 1e9, &d))
                return -1;
            o->count = (long)d;
        } else if (!strcmp(a, "--once"))
            o->count = 1;
        else if (!strcmp(a, "--json"))
            o->json = 1;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "icx-analyze follow: unknown option %s\n", a);
            return -1;
        } else
            o->paths[o->npaths++] = argv[i];
    }
    if (!o->npaths) {
        fprintf(stderr, "icx-analyze follow: no trace directory given\n");
        return -1;
    }
    return 0;
}

/* Read every path into t, quietly: a file just created (no intact frame yet) is counted, not an
 * error.  The number of files read. */
static size_t read_now(struct icx_trace *t, const struct follow_opts *o, size_t *unreadable,
                       size_t *missing, int say)
{
    size_t nread = 0;
    char err[512];
    for (int i = 0; i < o->npaths; i++) {
        char **names = NULL;
        size_t n = 0;
        if (icx_trace_names(o->paths[i], &names, &n) != 0) {
            if (errno == ENOTDIR) { /* a file */
                int ok = icx_read_file(t, o->paths[i], err, sizeof(err)) == 0;
                nread += ok;
                *unreadable += !ok;
                if (!ok && say)
                    fprintf(stderr, "icx-analyze follow: %s: %s (trying again each frame)\n",
                            o->paths[i], err);
            } else {
                ++*missing;
                if (say)
                    fprintf(stderr, "icx-analyze follow: %s: %s (waiting for it)\n", o->paths[i],
                            strerror(errno));
            }
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            if (icx_read_file(t, names[k], err, sizeof(err)) == 0)
                nread++;
            else
                ++*unreadable;
            free(names[k]);
        }
        free(names);
    }
    return nread;
}

int icx_follow_main(int argc, char **argv)
{
    struct follow_opts o;
    if (follow_parse(argc, argv, &o) != 0)
        return follow_usage();
    int tty = !o.json && isatty(STDOUT_FILENO);
    for (long frame = 0;; frame++) {
        struct icx_trace t;
        memset(&t, 0, sizeof(t));
        size_t unreadable = 0, missing = 0;
        size_t nread = read_now(&t, &o, &unreadable, &missing, frame == 0);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct icx_live *L = icx_live_compute(&t, (double)ts.tv_sec + ts.tv_nsec / 1e9, o.late);
        if (!L) {
            fprintf(stderr, "icx-analyze follow: out of memory\n");
            icx_trace_free(&t);
            return 1;
        }
        if (o.json)
            icx_live_json(stdout, L);
        else {
            if (tty)
                fputs("\033[H\033[J", stdout);
            else if (frame)
                fputc('\n', stdout);
            icx_live_print(stdout, L);
            if (unreadable)
                printf("(%zu trace files not readable yet: being created, or not traces)\n",
                       unreadable);
            if (missing)
                printf("(%zu of the paths given are not there yet)\n", missing);
        }
        fflush(stdout);
        int all_ended = t.nprocs && L->nended == t.nprocs;
        icx_live_free(L);
        icx_trace_free(&t);
        if ((o.count && frame + 1 >= o.count) || (!o.count && all_ended))
            return nread ? 0 : 1;
        struct timespec nap = {(time_t)o.interval,
                               (long)((o.interval - (double)(time_t)o.interval) * 1e9)};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
            ;
    }
}
