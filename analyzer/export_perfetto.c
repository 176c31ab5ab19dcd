/* The job as a timeline for ui.perfetto.dev and Perfetto's trace_processor: Trace Event Format
 * JSON (docs/TIMELINE.md).  One process per rank, a track per host thread, per GPU stream and per
 * RDMA queue pair; slices for peer copies, NCCL calls (host call and GPU span apart) and verbs
 * bursts; counter tracks for NVLink and IB port counters; a flow joining one collective instance
 * (communicator, sequence number) across its ranks in arrival order.  Times are on the NCCL
 * report's aligned timeline (wall clock, corrected per process by the collectives' completions).
 *
 * Every event is gathered first, then selected (ranks, window), cut at the size cap (the earliest
 * events of every rank are kept, so the cut is a time), joined by flows, spread over lanes so
 * that slices on one track nest, sorted per track and written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "nccl_model.h"

enum ev_kind {
    EV_COPY,     /* a peer copy's host call */
    EV_COPY_GPU, /* its GPU span */
    EV_NCCL,     /* an NCCL call's host call */
    EV_NCCL_GPU, /* its GPU span */
    EV_VERBS,    /* an RDMA aggregate or work request */
    EV_COUNTER,  /* a counter sample's rates since the previous sample */
};

enum track_kind { TR_THREAD, TR_STREAM, TR_QP, TR_COUNTERS };

struct track {
    int proc;
    int kind;
    uint64_t key; /* tid, stream handle, ctx << 32 | qp */
    int local;    /* its number among its process's tracks */
    int lanes;
};

struct ev {
    double ts, dur; /* s on the timeline */
    int proc, kind, track, lane;
    size_t idx, prev; /* the record in its process; EV_COUNTER: the previous sample */
    uint64_t comm_id, seq;
    double late; /* s after the instance's first arrival (EV_NCCL collectives), else NAN */
    int flow;    /* 1 out, 2 in, 3 both */
    uint64_t flow_id;
};

struct tl {
    const struct icx_analysis *A;
    const struct icx_timeline_opts *o;
    struct ev *ev;
    size_t nev, cap;
    struct track *tr;
    size_t ntr, captr;
    double *off; /* per process: s added to its monotonic times */
    int *order;  /* processes by rank */
    double t0;   /* the timeline's zero: the job's first kept event */
    uint64_t flows;
    int oom;
};

static int track_of(struct tl *T, int proc, int kind, uint64_t key)
{
    for (size_t i = T->ntr; i-- > 0;)
        if (T->tr[i].proc == proc && T->tr[i].kind == kind && T->tr[i].key == key)
            return (int)i;
    if (icx_grow((void **)&T->tr, &T->captr, T->ntr, sizeof(*T->tr)) != 0) {
        T->oom = 1;
        return -1;
    }
    int local = 0;
    for (size_t i = 0; i < T->ntr; i++)
        local += T->tr[i].proc == proc;
    T->tr[T->ntr] =
        (struct track){.proc = proc, .kind = kind, .key = key, .local = local, .lanes = 1};
    return (int)T->ntr++;
}

static struct ev *ev_add(struct tl *T, int proc, int kind, int track, size_t idx, double t0,
                         double t1)
{
    if (track < 0 || !isfinite(t0) || !isfinite(t1))
        return NULL;
    if (icx_grow((void **)&T->ev, &T->cap, T->nev, sizeof(*T->ev)) != 0) {
        T->oom = 1;
        return NULL;
    }
    struct ev *e = &T->ev[T->nev++];
    *e = (struct ev){.proc = proc,
                     .kind = kind,
                     .track = track,
                     .idx = idx,
                     .ts = t0 + T->off[proc],
                     .dur = t1 > t0 ? t1 - t0 : 0,
                     .late = NAN};
    return e;
}

static void gather(struct tl *T, int q)
{
    const struct icx_proc *p = T->A->t->procs[q];
    double t_end = p->t_last;
    for (size_t k = 0; k < p->ncopies; k++) {
        const struct icx_copy *c = &p->copies[k];
        ev_add(T, q, EV_COPY, track_of(T, q, TR_THREAD, c->tid), k, c->t_enter, c->t_exit);
        if (c->gpu_start > 0 && c->gpu_end >= c->gpu_start)
            ev_add(T, q, EV_COPY_GPU, track_of(T, q, TR_STREAM, c->stream), k, c->gpu_start,
                   c->gpu_end);
    }
    for (size_t k = 0; k < p->nncalls; k++) {
        const struct icx_rd_ncall *c = &p->ncalls[k];
        if (c->pending && icx_nccl_entry_returned(p, k))
            continue; /* its return record is the slice */
        struct ev *e = ev_add(T, q, EV_NCCL, track_of(T, q, TR_THREAD, c->tid), k, c->t_enter,
                              c->pending ? t_end : c->t_exit);
        if (e && icx_nccl_op_of(c->api) < 8 && !c->pending && c->result == 0) {
            const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, c->comm, c->t_enter);
            if (cm) {
                e->comm_id = cm->comm_id;
                e->seq = c->seq + 1; /* 0: not a collective instance */
            }
        }
        int started = c->gpu == ICX_GPU_DONE || c->gpu == ICX_GPU_RUNNING;
        if (started && c->gpu_start > 0)
            ev_add(T, q, EV_NCCL_GPU, track_of(T, q, TR_STREAM, c->stream), k, c->gpu_start,
                   c->gpu == ICX_GPU_DONE ? c->gpu_end : t_end);
    }
    for (size_t k = 0; k < p->nvtraffic; k++) {
        const struct icx_rd_vtraffic *v = &p->vtraffic[k];
        uint64_t key = (uint64_t)v->ctx << 32 | v->qp_num;
        ev_add(T, q, EV_VERBS, track_of(T, q, TR_QP, key), k, v->t0, v->is_event ? v->t0 : v->t1);
    }
    /* Counters: a rate between consecutive samples of the same counter set. */
    for (size_t k = 0; k < p->ncsamples; k++) {
        const struct icx_counter_sample *s = &p->csamples[k];
        for (size_t b = k; b-- > 0;) {
            const struct icx_counter_sample *r = &p->csamples[b];
            if (r->nic != s->nic || strcmp(r->bus, s->bus))
                continue;
            if (s->t > r->t && s->tx >= r->tx && s->rx >= r->rx) {
                struct ev *e =
                    ev_add(T, q, EV_COUNTER, track_of(T, q, TR_COUNTERS, 0), k, s->t, s->t);
                if (e)
                    e->prev = b;
            }
            break;
        }
    }
}

static int rank_cmp_procs(const struct icx_trace *t, int a, int b)
{
    const struct icx_proc *x = t->procs[a], *y = t->procs[b];
    if (x->rank != y->rank)
        return x->rank < 0 ? 1 : y->rank < 0 ? -1 : x->rank < y->rank ? -1 : 1;
    int h = strcmp(x->host ? x->host : "", y->host ? y->host : "");
    return h ? h : x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* "0-3,7": is rank r in it?  NULL: every rank. */
static int rank_selected(const char *list, int r)
{
    if (!list)
        return 1;
    for (const char *s = list; *s;) {
        char *e;
        long a = strtol(s, &e, 10), b = a;
        if (e == s)
            return 0;
        if (*e == '-') {
            const char *s2 = e + 1;
            b = strtol(s2, &e, 10);
            if (e == s2)
                return 0;
        }
        if (r >= a && r <= b)
            return 1;
        s = *e == ',' ? e + 1 : e;
        if (*e && *e != ',')
            return 0;
    }
    return 0;
}

int icx_timeline_ranks_valid(const char *list)
{
    for (const char *s = list; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == ','))
            return 0;
    return *list != 0;
}

static int by_time(const void *a, const void *b)
{
    const struct ev *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int by_instance(const void *a, const void *b)
{
    const struct ev *x = *(struct ev *const *)a, *y = *(struct ev *const *)b;
    if (x->comm_id != y->comm_id)
        return x->comm_id < y->comm_id ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Per track, by start; a longer slice first so that the one it holds follows it. */
static int by_track(const void *a, const void *b, void *ctx)
{
    const struct ev *x = a, *y = b;
    const struct tl *T = ctx;
    int px = T->order[T->tr[x->track].proc], py = T->order[T->tr[y->track].proc];
    if (px != py)
        return px < py ? -1 : 1;
    if (x->track != y->track)
        return x->track < y->track ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->dur > y->dur ? -1 : x->dur < y->dur;
}

/* Flows: the ranks' calls of one instance chained in arrival order; lateness after the first. */
static void flows(struct tl *T)
{
    size_t n = 0;
    struct ev **v = malloc(sizeof(*v) * (T->nev ? T->nev : 1));
    if (!v) {
        T->oom = 1;
        return;
    }
    for (size_t i = 0; i < T->nev; i++)
        if (T->ev[i].kind == EV_NCCL && T->ev[i].seq)
            v[n++] = &T->ev[i];
    qsort(v, n, sizeof(*v), by_instance);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && v[j]->comm_id == v[i]->comm_id && v[j]->seq == v[i]->seq)
            j++;
        uint64_t id = ++T->flows;
        for (size_t k = i; k < j; k++) {
            v[k]->late = v[k]->ts - v[i]->ts;
            if (j - i > 1) {
                v[k]->flow = (k > i ? 2 : 0) | (k + 1 < j ? 1 : 0);
                v[k]->flow_id = id;
            }
        }
        i = j;
    }
    free(v);
}

/* Lanes: a slice that overlaps the open one on its track without fitting inside it moves to
 * the first lane where it nests, so that every track's slices nest (Perfetto requires it). */
static void lanes(struct tl *T)
{
    enum { MAXL = 16, DEPTH = 32 };
    double stack[MAXL][DEPTH];
    unsigned depth[MAXL];
    int cur = -1;
    for (size_t i = 0; i < T->nev; i++) {
        struct ev *e = &T->ev[i];
        if (e->kind == EV_COUNTER)
            continue; /* counters have no slices */
        if (e->track != cur) {
            cur = e->track;
            memset(depth, 0, sizeof(depth));
        }
        double end = e->ts + e->dur;
        int l = 0;
        for (; l < MAXL; l++) {
            double *st = stack[l];
            unsigned d = depth[l];
            while (d > 0 && st[d - 1] <= e->ts)
                d--;
            depth[l] = d;
            if (d == 0 || (d < DEPTH && end <= st[d - 1]))
                break;
        }
        if (l == MAXL)
            l = MAXL - 1; /* more than 16 overlapping: the last lane takes the rest */
        e->lane = l;
        if (depth[l] < DEPTH)
            stack[l][depth[l]++] = end;
        if (l + 1 > T->tr[e->track].lanes)
            T->tr[e->track].lanes = l + 1;
    }
}

static long long tid_of(const struct tl *T, int track, int lane)
{
    const struct track *r = &T->tr[track];
    return (long long)(T->order[r->proc] + 1) * 100000 + r->local % 6000 * 16 + lane;
}

static void us(struct icx_json *j, const char *key, double s)
{
    icx_json_fix(j, key, s * 1e6, 3);
}

static void head(struct icx_json *j, const struct tl *T, const struct ev *e, const char *ph,
                 const char *name, const char *cat)
{
    icx_json_obj(j, NULL);
    icx_json_str(j, "ph", ph);
    icx_json_str(j, "cat", cat);
    icx_json_str(j, "name", name);
    icx_json_int(j, "pid", T->order[e->proc] + 1);
    if (e->kind != EV_COUNTER)
        icx_json_int(j, "tid", tid_of(T, e->track, e->lane));
    /* ns steps, the end rounded as itself: a reader's ts + dur is the rounded end, so slices
     * that touch still touch */
    double t0 = round((e->ts - T->t0) * 1e9), t1 = round((e->ts + e->dur - T->t0) * 1e9);
    icx_json_fix(j, "ts", t0 / 1e3, 3);
    if (*ph == 'X')
        icx_json_fix(j, "dur", (t1 - t0) / 1e3, 3);
}

static void flow_keys(struct icx_json *j, const struct ev *e)
{
    if (!e->flow)
        return;
    char id[24];
    snprintf(id, sizeof(id), "0x%llx", (unsigned long long)e->flow_id);
    icx_json_str(j, "bind_id", id);
    if (e->flow & 2)
        icx_json_bool(j, "flow_in", 1);
    if (e->flow & 1)
        icx_json_bool(j, "flow_out", 1);
}

static void write_ev(struct icx_json *j, const struct tl *T, const struct ev *e)
{
    const struct icx_proc *p = T->A->t->procs[e->proc];
    char name[96], hex[24];
    switch (e->kind) {
    case EV_COPY:
    case EV_COPY_GPU: {
        const struct icx_copy *c = &p->copies[e->idx];
        if (e->kind == EV_COPY)
            snprintf(name, sizeof(name), "%s", icx_api_name(c->api));
        else
            snprintf(name, sizeof(name), "copy GPU %d -> %d", c->src, c->dst);
        head(j, T, e, "X", name, "copy");
        icx_json_obj(j, "args");
        icx_json_int(j, "src", c->src);
        icx_json_int(j, "dst", c->dst);
        icx_json_int(j, "bytes", (long long)c->bytes);
        if (e->kind == EV_COPY_GPU && e->dur > 0)
            icx_json_num(j, "GB/s", round((double)c->bytes / e->dur / 1e6) / 1e3);
        if (c->result)
            icx_json_int(j, "result", c->result);
        icx_json_end(j);
        break;
    }
    case EV_NCCL:
    case EV_NCCL_GPU: {
        const struct icx_rd_ncall *c = &p->ncalls[e->idx];
        int op = icx_nccl_op_of(c->api);
        const char *opn = op < 10 ? icx_nccl_op_names[op] : icx_api_name(c->api);
        snprintf(name, sizeof(name), "%s%s", opn, e->kind == EV_NCCL_GPU ? " (GPU)" : "");
        head(j, T, e, "X", name, "nccl");
        if (e->kind == EV_NCCL)
            flow_keys(j, e);
        icx_json_obj(j, "args");
        if (e->comm_id) {
            snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)e->comm_id);
            icx_json_str(j, "comm_id", hex);
            icx_json_int(j, "seq", (long long)c->seq);
        }
        if (op < 10)
            icx_json_int(j, "bytes", (long long)c->bytes);
        if (op >= 8 && op < 10)
            icx_json_int(j, "peer", c->peer);
        if (isfinite(e->late))
            us(j, "late_us", e->late);
        if (c->pending)
            icx_json_bool(j, "never_returned", 1);
        if (e->kind == EV_NCCL_GPU && c->gpu == ICX_GPU_RUNNING)
            icx_json_bool(j, "unfinished", 1);
        if (c->result)
            icx_json_int(j, "result", c->result);
        icx_json_end(j);
        break;
    }
    case EV_VERBS: {
        const struct icx_rd_vtraffic *v = &p->vtraffic[e->idx];
        const char *op = icx_verbs_opcode_name(v->kind, v->opcode);
        if (v->is_event)
            snprintf(name, sizeof(name), "%s", op);
        else
            snprintf(name, sizeof(name), "%s x%llu", op, (unsigned long long)v->count);
        head(j, T, e, "X", name, "rdma");
        icx_json_obj(j, "args");
        icx_json_int(j, "requests", (long long)v->count);
        icx_json_int(j, "bytes", (long long)v->bytes);
        icx_json_int(j, "qp", v->qp_num);
        icx_json_end(j);
        break;
    }
    case EV_COUNTER: {
        const struct icx_counter_sample *s = &p->csamples[e->idx], *r = &p->csamples[e->prev];
        double dt = s->t - r->t;
        snprintf(name, sizeof(name), "%s %s GB/s", s->nic ? "IB" : "NVLink", s->bus);
        head(j, T, e, "C", name, "counter");
        icx_json_obj(j, "args");
        icx_json_num(j, "tx", round((double)(s->tx - r->tx) / dt / 1e6) / 1e3);
        icx_json_num(j, "rx", round((double)(s->rx - r->rx) / dt / 1e6) / 1e3);
        icx_json_end(j);
        break;
    }
    }
    icx_json_end(j);
}

/* A metadata event: a process's or thread's (tid >= 0) name, or else its sort index. */
static void meta(struct icx_json *j, const char *what, long long pid, long long tid,
                 const char *name, long long sort)
{
    icx_json_obj(j, NULL);
    icx_json_str(j, "ph", "M");
    icx_json_str(j, "name", what);
    icx_json_int(j, "pid", pid);
    if (tid >= 0)
        icx_json_int(j, "tid", tid);
    icx_json_obj(j, "args");
    if (name)
        icx_json_str(j, "name", name);
    else
        icx_json_int(j, "sort_index", sort);
    icx_json_end(j);
    icx_json_end(j);
}

static void track_name(const struct tl *T, const struct track *r, int lane, char *buf, size_t n)
{
    const struct icx_proc *p = T->A->t->procs[r->proc];
    char more[16] = "";
    if (lane)
        snprintf(more, sizeof(more), " (%d)", lane + 1);
    if (r->kind == TR_THREAD) {
        const char *tn = "";
        for (size_t k = 0; k < p->nthreads; k++)
            if (p->threads[k].tid == r->key)
                tn = p->threads[k].name;
        snprintf(buf, n, "%s%sthread %llu%s", tn, *tn ? " " : "", (unsigned long long)r->key, more);
    } else if (r->kind == TR_STREAM) {
        snprintf(buf, n, "GPU stream 0x%llx%s", (unsigned long long)r->key, more);
    } else {
        unsigned ctx = (unsigned)(r->key >> 32);
        const char *nic = ctx < ICX_RD_MAX_VCTX && p->vctx[ctx].present ? p->vctx[ctx].name : "?";
        snprintf(buf, n, "RDMA %s QP %u%s", nic, (unsigned)(r->key & 0xffffffffu), more);
    }
}

/* Byte counter behind a FILE: what the cap measures. */
static ssize_t count_write(void *c, const char *buf, size_t n)
{
    (void)buf;
    *(uint64_t *)c += n;
    return (ssize_t)n;
}

/* The time at which the kept events pass the cap, or INFINITY. */
static double cut_time(struct tl *T, uint64_t cap)
{
    uint64_t bytes = 0;
    cookie_io_functions_t io = {.write = count_write};
    FILE *f = fopencookie(&bytes, "w", io);
    if (!f)
        return INFINITY;
    struct icx_json j;
    icx_json_begin(&j, f);
    icx_json_arr(&j, NULL);
    double cut = INFINITY;
    for (size_t i = 0; i < T->nev; i++) {
        write_ev(&j, T, &T->ev[i]);
        fflush(f);
        if (bytes > cap) {
            cut = T->ev[i].ts;
            break;
        }
    }
    fclose(f);
    return cut;
}

int icx_export_perfetto(FILE *out, const struct icx_analysis *A, const struct icx_timeline_opts *o,
                        struct icx_timeline_stats *st)
{
    const struct icx_trace *t = A->t;
    struct tl T = {.A = A, .o = o};
    memset(st, 0, sizeof(*st));
    T.off = calloc(t->nprocs + 1, sizeof(*T.off));
    T.order = calloc(t->nprocs + 1, sizeof(*T.order));
    int *byrank = calloc(t->nprocs + 1, sizeof(*byrank));
    if (!T.off || !T.order || !byrank)
        goto oom;
    /* Offsets against the first process's wall clock: times stay near the hosts' uptime, where
     * a double resolves nanoseconds (wall-clock seconds since 1970 resolve only 240 ns). */
    double base = t->nprocs ? icx_nccl_wall_offset(t->procs[0]) : 0;
    for (size_t q = 0; q < t->nprocs; q++) {
        T.off[q] = icx_nccl_wall_offset(t->procs[q]) - base;
        if (A->nccl && q < A->nccl->nclk)
            T.off[q] -= A->nccl->clk[q].offset;
        byrank[q] = (int)q;
    }
    for (size_t a = 1; a < t->nprocs; a++) /* insertion: few processes */
        for (size_t b = a; b > 0 && rank_cmp_procs(t, byrank[b - 1], byrank[b]) > 0; b--) {
            int x = byrank[b];
            byrank[b] = byrank[b - 1];
            byrank[b - 1] = x;
        }
    for (size_t k = 0; k < t->nprocs; k++)
        T.order[byrank[k]] = (int)k;
    for (size_t q = 0; q < t->nprocs && !T.oom; q++)
        if (rank_selected(o->ranks, t->procs[q]->rank))
            gather(&T, (int)q);
    if (T.oom)
        goto oom;
    st->events_total = T.nev;
    if (T.nev) /* qsort(NULL, 0) is undefined */
        qsort(T.ev, T.nev, sizeof(*T.ev), by_time);
    double start = T.nev ? T.ev[0].ts : 0;
    T.t0 = start;
    /* The window, in s from the job's first event. */
    size_t kept = 0;
    for (size_t i = 0; i < T.nev; i++) {
        double rel = T.ev[i].ts - start;
        if (rel + T.ev[i].dur < o->t_from || (o->t_to > 0 && rel > o->t_to))
            continue;
        T.ev[kept++] = T.ev[i];
    }
    T.nev = kept;
    flows(&T); /* lateness is known before the cap needs the events' size */
    st->cut_s = INFINITY;
    if (o->max_bytes) {
        double cut = cut_time(&T, o->max_bytes);
        if (isfinite(cut)) {
            kept = 0;
            for (size_t i = 0; i < T.nev; i++)
                if (T.ev[i].ts < cut)
                    T.ev[kept++] = T.ev[i];
            T.nev = kept;
            st->cut_s = cut - start;
            for (size_t i = 0; i < T.nev; i++)
                T.ev[i].flow = 0;
            flows(&T); /* again: instances cut in two must not leave a flow open */
        }
    }
    if (T.oom)
        goto oom;
    st->events_written = T.nev;
    if (T.nev)
        qsort_r(T.ev, T.nev, sizeof(*T.ev), by_track, &T);
    lanes(&T);

    struct icx_json j;
    icx_json_begin(&j, out);
    icx_json_obj(&j, NULL);
    icx_json_str(&j, "displayTimeUnit", "ns");
    icx_json_arr(&j, "traceEvents");
    char name[400];
    for (size_t k = 0; k < t->nprocs; k++) {
        const struct icx_proc *p = t->procs[byrank[k]];
        if (!rank_selected(o->ranks, p->rank))
            continue;
        if (p->rank >= 0)
            snprintf(name, sizeof(name), "%s:rank %d", p->host ? p->host : "?", p->rank);
        else
            snprintf(name, sizeof(name), "%s:pid %d", p->host ? p->host : "?", p->pid);
        meta(&j, "process_name", (long long)k + 1, -1, name, 0);
        meta(&j, "process_sort_index", (long long)k + 1, -1, NULL, (long long)k);
    }
    for (size_t r = 0; r < T.ntr; r++)
        for (int l = 0; l < T.tr[r].lanes && T.tr[r].kind != TR_COUNTERS; l++) {
            track_name(&T, &T.tr[r], l, name, sizeof(name));
            long long tid = tid_of(&T, (int)r, l);
            meta(&j, "thread_name", T.order[T.tr[r].proc] + 1, tid, name, 0);
            meta(&j, "thread_sort_index", T.order[T.tr[r].proc] + 1, tid, NULL, tid);
        }
    for (size_t i = 0; i < T.nev; i++)
        write_ev(&j, &T, &T.ev[i]);
    icx_json_end(&j);
    icx_json_obj(&j, "otherData");
    icx_json_str(&j, "tool", "icx-analyze --perfetto");
    icx_json_str(&j, "clock",
                 "wall clock, each process corrected by the NCCL collectives' "
                 "completions (icx-analyze's clock alignment)");
    icx_json_fix(&j, "start_unix_s", start + base, 6);
    icx_json_int(&j, "events_gathered", (long long)st->events_total);
    icx_json_int(&j, "events_written", (long long)st->events_written);
    if (isfinite(st->cut_s))
        icx_json_fix(&j, "cut_at_s", st->cut_s, 6);
    icx_json_end(&j);
    icx_json_end(&j);
    fputc('\n', out);
    free(T.ev);
    free(T.tr);
    free(T.off);
    free(T.order);
    free(byrank);
    return 0;
oom:
    free(T.ev);
    free(T.tr);
    free(T.off);
    free(T.order);
    free(byrank);
    fprintf(stderr, "icx-analyze: out of memory writing the timeline\n");
    return -1;
}
