/* The hang dumps report: per process that dumped (its watchdog fired, SIGUSR2, an ICX_DUMP
 * request), every thread's kernel state and native stack and the Python stacks; and the one-line
 * summary the hang finding quotes for the rank that never reached the collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "hang_dump.h"
#include "json.h"

static const char *const reason_names[] = {"?", "pending", "idle", "signal", "request"};

static const char *reason_name(uint32_t r)
{
    return r < sizeof(reason_names) / sizeof(reason_names[0]) ? reason_names[r] : "?";
}

/* Frame k of a thread's native stack, as text (buf when unsymbolized); NULL past its end. */
static const char *frame(const struct icx_proc *p, const struct icx_rd_tstate *ts, uint32_t k,
                         char *buf, size_t len)
{
    const struct icx_stack_def *st = ts->stack ? icx_stack_find(p, ts->stack) : NULL;
    if (!st || k >= st->depth)
        return NULL;
    const char *sym = icx_symbol_find(p, st->pc[k]);
    if (sym)
        return sym;
    snprintf(buf, len, "0x%llx", (unsigned long long)st->pc[k]);
    return buf;
}

/* What the stack says the thread waits for. */
static const char *waiting_for(const struct icx_proc *p, const struct icx_rd_tstate *ts)
{
    static const char *const waits[][2] = {
        {"pthread_mutex_lock", "waiting for a lock"},
        {"PyThread_acquire_lock", "waiting for a Python lock"},
        {"__lll_lock_wait", "waiting for a lock"},
        {"pthread_rwlock", "waiting for a read-write lock"},
        {"pthread_cond_", "waiting on a condition variable"},
        {"sem_", "waiting on a semaphore"},
        {"nanosleep", "sleeping"},
        {"pause", "paused (waiting for a signal)"},
        {"cudaStreamSynchronize", "waiting for its GPU stream"},
        {"cudaDeviceSynchronize", "waiting for its GPU"},
        {"cudaEventSynchronize", "waiting for a GPU event"},
    };
    char buf[32];
    for (uint32_t k = 0; k < 6; k++) {
        const char *f = frame(p, ts, k, buf, sizeof(buf));
        if (!f)
            break;
        for (size_t w = 0; w < sizeof(waits) / sizeof(waits[0]); w++)
            if (strncmp(f, waits[w][0], strlen(waits[w][0])) == 0)
                return waits[w][1];
    }
    return NULL;
}

static const struct icx_rd_tstate *main_thread(const struct icx_proc *p, uint32_t episode)
{
    for (size_t i = 0; i < p->ntstates; i++)
        if (p->tstates[i].episode == episode && (int32_t)p->tstates[i].tid == p->pid)
            return &p->tstates[i];
    return NULL;
}

/* Python frames of the thread with id pthread (else the last thread listed: the main thread is
 * listed last), innermost first, into out as "func (file:line)" joined by " <- "; the standard
 * library's innermost frames are skipped (a wait inside threading.py says little). */
static void python_frames(const char *py, uint64_t pthread, char *out, size_t len)
{
    out[0] = 0;
    const char *block = NULL, *s = py;
    while (s && (s = strstr(s, "hread 0x")) != NULL) {
        unsigned long long id = strtoull(s + 8, NULL, 16);
        if (!block || id == pthread || !pthread)
            block = s;
        if (pthread && id == pthread)
            break;
        s += 8;
    }
    if (!block)
        return;
    const char *end = strstr(block + 8, "hread 0x");
    int n = 0, used = 0;
    for (const char *l = strstr(block, "File \""); l && (!end || l < end) && n < 4;
         l = strstr(l + 6, "File \"")) {
        const char *q = strchr(l + 6, '"');
        if (!q)
            break;
        char file[256];
        snprintf(file, sizeof(file), "%.*s", (int)(q - l - 6), l + 6);
        int line = 0;
        char func[128] = "?";
        if (sscanf(q + 1, ", line %d in %127s", &line, func) < 1)
            continue;
        int stdlib = strstr(file, "/lib/python3") != NULL && !n;
        if (stdlib)
            continue;
        const char *base = strrchr(file, '/');
        used += snprintf(out + used, len - (size_t)used, "%s%s (%s:%d)", n ? " <- " : "", func,
                         base ? base + 1 : file, line);
        n++;
        if ((size_t)used >= len)
            break;
    }
}

int icx_hang_where(const struct icx_proc *p, char *buf, size_t len)
{
    buf[0] = 0;
    if (!p->nhdumps)
        return 0;
    const struct icx_rd_hdump *d = &p->hdumps[p->nhdumps - 1];
    const struct icx_rd_tstate *m = main_thread(p, d->episode);
    int used = snprintf(buf, len, "at its hang dump (%s, %.1f s after its last progress)",
                        reason_name(d->reason), (double)d->age_ns / 1e9);
    if (m) {
        const char *w = waiting_for(p, m), *wchan = icx_proc_string(p, m->wchan);
        used += snprintf(buf + used, len - (size_t)used,
                         " its main thread (tid %u) was %s (state %c, syscall %d%s%s): ", m->tid,
                         w ? w : "running or in an unknown wait", m->state, m->syscall,
                         wchan && *wchan ? ", wchan " : "", wchan && *wchan ? wchan : "");
        char fb[32];
        for (uint32_t k = 0; k < 5 && (size_t)used < len; k++) {
            const char *f = frame(p, m, k, fb, sizeof(fb));
            if (!f)
                break;
            used += snprintf(buf + used, len - (size_t)used, "%s%s", k ? " <- " : "", f);
        }
    }
    if (d->py && (size_t)used < len) {
        char py[600];
        python_frames(d->py, m ? m->pthread : 0, py, sizeof(py));
        if (py[0])
            used += snprintf(buf + used, len - (size_t)used, "; Python: %s", py);
    }
    return 1;
}

static void print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_trace *t = A->t;
    int any = 0;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        if (!p->nhdumps)
            continue;
        if (!any++)
            fprintf(out,
                    "\nHang dumps (the tracer's watchdog, SIGUSR2 or ICX_DUMP; docs/NCCL.md)\n");
        const struct icx_rd_hdump *d = &p->hdumps[p->nhdumps - 1];
        fprintf(out,
                "rank %d (%s pid %d): %zu dump%s, the last: %s, %.1f s (threshold %.1f s), "
                "%u threads\n",
                p->rank, p->host ? p->host : "?", p->pid, p->nhdumps, p->nhdumps > 1 ? "s" : "",
                reason_name(d->reason), (double)d->age_ns / 1e9, (double)d->threshold_ns / 1e9,
                d->nthreads);
        for (size_t k = 0; k < p->ntstates; k++) {
            const struct icx_rd_tstate *ts = &p->tstates[k];
            if (ts->episode != d->episode)
                continue;
            const char *name = icx_proc_string(p, ts->name), *w = waiting_for(p, ts);
            char fb[32];
            const char *f0 = frame(p, ts, 0, fb, sizeof(fb));
            fprintf(out, "  tid %-7u %-16s %c syscall %-4d %-26s %s\n", ts->tid, name ? name : "",
                    ts->state, ts->syscall, w ? w : "", f0 ? f0 : "(no stack)");
        }
        char py[600];
        if (d->py) {
            python_frames(d->py, 0, py, sizeof(py));
            fprintf(out, "  Python main thread: %s\n", py[0] ? py : "(no frames)");
        }
    }
}

static void json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_trace *t = A->t;
    icx_json_arr(j, "hang_dumps");
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t e = 0; e < p->nhdumps; e++) {
            const struct icx_rd_hdump *d = &p->hdumps[e];
            icx_json_obj(j, NULL);
            icx_json_int(j, "rank", p->rank);
            icx_json_str(j, "host", p->host ? p->host : "");
            icx_json_int(j, "pid", p->pid);
            icx_json_int(j, "episode", d->episode);
            icx_json_str(j, "reason", reason_name(d->reason));
            icx_json_fix(j, "age_s", (double)d->age_ns / 1e9, 3);
            icx_json_fix(j, "threshold_s", (double)d->threshold_ns / 1e9, 3);
            icx_json_int(j, "pending_seq", (long long)d->seq);
            icx_json_arr(j, "threads");
            for (size_t k = 0; k < p->ntstates; k++) {
                const struct icx_rd_tstate *ts = &p->tstates[k];
                if (ts->episode != d->episode)
                    continue;
                icx_json_obj(j, NULL);
                icx_json_int(j, "tid", ts->tid);
                icx_json_str(j, "name", icx_proc_string(p, ts->name));
                char st[2] = {ts->state, 0};
                icx_json_str(j, "state", st);
                icx_json_int(j, "syscall", ts->syscall);
                icx_json_str(j, "wchan", icx_proc_string(p, ts->wchan));
                const char *w = waiting_for(p, ts);
                if (w)
                    icx_json_str(j, "waiting_for", w);
                else
                    icx_json_null(j, "waiting_for");
                icx_json_int(j, "stack_status", ts->status);
                icx_json_arr(j, "stack");
                char fb[32];
                for (uint32_t f = 0; frame(p, ts, f, fb, sizeof(fb)); f++)
                    icx_json_str(j, NULL, frame(p, ts, f, fb, sizeof(fb)));
                icx_json_end(j);
                icx_json_end(j);
            }
            icx_json_end(j);
            if (d->py)
                icx_json_str(j, "python", d->py);
            else
                icx_json_null(j, "python");
            char where[1400];
            icx_hang_where(p, where, sizeof(where));
            icx_json_str(j, "where", where);
            icx_json_end(j);
        }
    }
    icx_json_end(j);
}

const struct icx_report icx_report_hang = {
    .name = "hang_dumps",
    .print = print,
    .json = json,
};
