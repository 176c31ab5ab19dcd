/* The NCCL errors report: calls NCCL refused or failed (their result), and communicators the job
 * aborted (ncclCommAbort) -- with, per aborting rank, the collective of that communicator it
 * left unfinished.  What a job that died of its watchdog's abort, or of an error it did not
 * check, leaves to tell (docs/NCCL.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "format.h"
#include "html_svg.h"
#include "nccl_model.h"

struct nerr {
    unsigned api;
    int result;
    uint64_t calls;
    int *ranks;
    size_t n;
    double first; /* s into the job */
};

struct nabort {
    uint64_t comm_id;
    int nranks, failed; /* the communicator's size; aborts that returned an error */
    int *ranks;         /* job ranks that aborted it */
    size_t n;
    double first, last; /* s into the job */
    int unfinished;     /* of them, ranks with a collective of it not finished at their abort */
    int op;             /* the earliest such collective (by sequence number) */
    uint64_t seq;
    double waited; /* s it had been running or waiting when that rank aborted */
};

struct icx_nccl_errors {
    struct nerr *err;
    size_t nerr;
    struct nabort *ab;
    size_t nab;
};

static const char *result_name(int r)
{
    static const char *const names[] = {
        "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
    return r >= 0 && r < 8 ? names[r] : "unknown result";
}

static double job_t0(const struct icx_trace *t)
{
    double t0 = icx_nccl_job_t0(t);
    return isfinite(t0) ? t0 : 0;
}

static int add_rank(int **v, size_t *n, int rank)
{
    int *nv = realloc(*v, (*n + 1) * sizeof(int));
    if (!nv)
        return -1;
    *v = nv;
    nv[(*n)++] = rank;
    return 0;
}

/* Failed calls, by (API, result).  ncclInProgress is how a non-blocking call succeeds. */
static int failed_calls(struct icx_nccl_errors *E, const struct icx_trace *t, double t0)
{
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *x = &p->ncalls[k];
            if (x->pending || x->result == 0 || x->result == 7)
                continue;
            size_t e = 0;
            while (e < E->nerr && (E->err[e].api != x->api || E->err[e].result != x->result))
                e++;
            if (e == E->nerr) {
                struct nerr *v = realloc(E->err, (E->nerr + 1) * sizeof(*v));
                if (!v)
                    return -1;
                E->err = v;
                v[E->nerr++] = (struct nerr){x->api, x->result, 0, NULL, 0, INFINITY};
            }
            struct nerr *r = &E->err[e];
            r->calls++;
            r->first = fmin(r->first, x->t_enter + icx_nccl_wall_offset(p) - t0);
            if ((!r->n || r->ranks[r->n - 1] != p->rank) && add_rank(&r->ranks, &r->n, p->rank))
                return -1;
        }
    }
    return 0;
}

/* The earliest collective of handle h that p had not seen finish at time `at` (monotonic s):
 * its index, or -1.  A call whose GPU work was not timed is not known either way. */
static long unfinished_at(const struct icx_proc *p, uint64_t h, double at)
{
    long best = -1;
    for (size_t k = 0; k < p->nncalls; k++) {
        const struct icx_rd_ncall *x = &p->ncalls[k];
        if (x->comm != h || x->t_enter > at || icx_nccl_op_of(x->api) >= 8)
            continue;
        int open = x->pending
                       ? !icx_nccl_entry_returned(p, k)
                       : (x->gpu == ICX_GPU_DONE ? x->gpu_end > at : x->gpu != ICX_GPU_UNTIMED);
        if (open && (best < 0 || x->seq < p->ncalls[best].seq))
            best = (long)k;
    }
    return best;
}

static int aborts(struct icx_nccl_errors *E, const struct icx_trace *t, double t0)
{
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        double off = icx_nccl_wall_offset(p);
        for (size_t k = 0; k < p->nncomms; k++) {
            const struct icx_rd_ncomm *a = &p->ncomms[k];
            if (a->api != ICX_API_ncclCommAbort)
                continue;
            size_t e = 0;
            while (e < E->nab && E->ab[e].comm_id != a->comm_id)
                e++;
            if (e == E->nab) {
                struct nabort *v = realloc(E->ab, (E->nab + 1) * sizeof(*v));
                if (!v)
                    return -1;
                E->ab = v;
                v[E->nab++] = (struct nabort){
                    .comm_id = a->comm_id, .first = INFINITY, .last = -INFINITY, .op = -1};
            }
            struct nabort *b = &E->ab[e];
            b->nranks = a->nranks > b->nranks ? a->nranks : b->nranks;
            b->failed += a->result != 0;
            b->first = fmin(b->first, a->t + off - t0);
            b->last = fmax(b->last, a->t + off - t0);
            if (add_rank(&b->ranks, &b->n, p->rank))
                return -1;
            long u = unfinished_at(p, a->comm, a->t);
            if (u < 0)
                continue;
            const struct icx_rd_ncall *x = &p->ncalls[u];
            b->unfinished++;
            double since =
                x->gpu == ICX_GPU_RUNNING || x->gpu == ICX_GPU_DONE ? x->gpu_start : x->t_enter;
            if (b->op < 0 || x->seq < b->seq) {
                b->op = icx_nccl_op_of(x->api);
                b->seq = x->seq;
                b->waited = a->t - since;
            }
        }
    }
    return 0;
}

static int errors_compute(struct icx_analysis *A)
{
    struct icx_nccl_errors *E = calloc(1, sizeof(*E));
    double t0 = job_t0(A->t);
    A->nccl_errors = E;
    if (!E || failed_calls(E, A->t, t0) || aborts(E, A->t, t0)) {
        fprintf(stderr, "icx-analyze: out of memory computing the NCCL errors report\n");
        return -1;
    }
    return 0;
}

/* How many ranks aborted communicator id, and from when (s into the job): for the hang finding. */
int icx_nccl_aborts_of(const struct icx_trace *t, uint64_t id, double *first)
{
    int n = 0;
    *first = INFINITY;
    double t0 = job_t0(t);
    for (size_t i = 0; i < t->nprocs; i++)
        for (size_t k = 0; k < t->procs[i]->nncomms; k++) {
            const struct icx_rd_ncomm *a = &t->procs[i]->ncomms[k];
            if (a->api == ICX_API_ncclCommAbort && a->comm_id == id) {
                n++;
                *first = fmin(*first, a->t + icx_nccl_wall_offset(t->procs[i]) - t0);
            }
        }
    return n;
}

static void errors_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_nccl_errors *E = A->nccl_errors;
    char ranks[512];
    if (E && E->nerr) {
        fprintf(out, "\nNCCL calls that failed (their result)\n");
        fprintf(out, "  %-24s %-24s %8s %9s  %s\n", "call", "result", "calls", "first s", "ranks");
        for (size_t i = 0; i < E->nerr; i++) {
            const struct nerr *r = &E->err[i];
            icx_fmt_ranks(ranks, sizeof(ranks), r->ranks, r->n);
            fprintf(out, "  %-24s %-24s %8llu %9.3f  %s\n", icx_api_name(r->api),
                    result_name(r->result), (unsigned long long)r->calls, r->first, ranks);
        }
    }
    if (E && E->nab) {
        fprintf(out, "\nNCCL communicators aborted (ncclCommAbort)\n");
        for (size_t i = 0; i < E->nab; i++) {
            const struct nabort *b = &E->ab[i];
            icx_fmt_ranks(ranks, sizeof(ranks), b->ranks, b->n);
            fprintf(out, "  %016llx: aborted by %zu of %d ranks (%s) at %.3f-%.3f s",
                    (unsigned long long)b->comm_id, b->n, b->nranks, ranks, b->first, b->last);
            if (b->failed)
                fprintf(out, ", %d of the aborts failed", b->failed);
            if (b->unfinished)
                fprintf(out,
                        "; %d left work unfinished, the earliest %s #%llu, %.3f s after it "
                        "started\n",
                        b->unfinished, icx_nccl_op_names[b->op], (unsigned long long)b->seq,
                        b->waited);
            else
                fprintf(out, "; none with work of it known to be unfinished\n");
        }
    }
}

static void errors_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_nccl_errors *E = A->nccl_errors;
    char ranks[512];
    icx_json_obj(j, "nccl_errors");
    icx_json_arr(j, "failed_calls");
    for (size_t i = 0; E && i < E->nerr; i++) {
        const struct nerr *r = &E->err[i];
        icx_fmt_ranks(ranks, sizeof(ranks), r->ranks, r->n);
        icx_json_obj(j, NULL);
        icx_json_str(j, "call", icx_api_name(r->api));
        icx_json_int(j, "result", r->result);
        icx_json_str(j, "result_name", result_name(r->result));
        icx_json_int(j, "calls", (long long)r->calls);
        icx_json_num(j, "first_s", r->first);
        icx_json_str(j, "ranks", ranks);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_arr(j, "aborts");
    for (size_t i = 0; E && i < E->nab; i++) {
        const struct nabort *b = &E->ab[i];
        char id[17];
        snprintf(id, sizeof(id), "%016llx", (unsigned long long)b->comm_id);
        icx_fmt_ranks(ranks, sizeof(ranks), b->ranks, b->n);
        icx_json_obj(j, NULL);
        icx_json_str(j, "comm_id", id);
        icx_json_int(j, "nranks", b->nranks);
        icx_json_int(j, "aborted_by", (long long)b->n);
        icx_json_str(j, "ranks", ranks);
        icx_json_int(j, "failed", b->failed);
        icx_json_num(j, "first_s", b->first);
        icx_json_num(j, "last_s", b->last);
        icx_json_int(j, "unfinished", b->unfinished);
        icx_json_str(j, "unfinished_op", b->op >= 0 ? icx_nccl_op_names[b->op] : NULL);
        icx_json_int(j, "unfinished_seq", b->op >= 0 ? (long long)b->seq : -1);
        icx_json_num(j, "unfinished_for_s", b->op >= 0 ? b->waited : NAN);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_end(j);
}

/* The same two tables in the HTML report; a job with neither gets no section. */
static void errors_html(FILE *out, const struct icx_analysis *A)
{
    const struct icx_nccl_errors *E = A->nccl_errors;
    char ranks[512];
    if (!E || (!E->nerr && !E->nab))
        return;
    fputs("<h2 id=\"nccl_errors\">NCCL errors and aborts</h2>\n", out);
    if (E->nerr) {
        fputs("<h3>Calls that failed (their result)</h3>\n<table class=\"sort\"><thead><tr>"
              "<th>call</th><th>result</th><th>calls</th><th>first, s into the job</th>"
              "<th>ranks</th></tr></thead><tbody>\n",
              out);
        for (size_t i = 0; i < E->nerr; i++) {
            const struct nerr *r = &E->err[i];
            icx_fmt_ranks(ranks, sizeof(ranks), r->ranks, r->n);
            fputs("<tr><td>", out);
            icx_html_esc(out, icx_api_name(r->api));
            fprintf(out,
                    "</td><td>%s (%d)</td><td class=\"n\">%llu</td><td class=\"n\">%.3f"
                    "</td><td>",
                    result_name(r->result), r->result, (unsigned long long)r->calls, r->first);
            icx_html_esc(out, ranks);
            fputs("</td></tr>\n", out);
        }
        fputs("</tbody></table>\n", out);
    }
    if (E->nab) {
        fputs("<h3>Communicators aborted (ncclCommAbort)</h3>\n<table class=\"sort\"><thead>"
              "<tr><th>communicator</th><th>ranks</th><th>aborted by</th><th>from, s</th>"
              "<th>to, s</th><th>aborts that failed</th><th>ranks with work unfinished</th>"
              "<th>earliest unfinished</th><th>unfinished for, s</th></tr></thead><tbody>\n",
              out);
        for (size_t i = 0; i < E->nab; i++) {
            const struct nabort *b = &E->ab[i];
            icx_fmt_ranks(ranks, sizeof(ranks), b->ranks, b->n);
            fprintf(out, "<tr><td>%016llx</td><td class=\"n\">%d</td><td>%zu: ",
                    (unsigned long long)b->comm_id, b->nranks, b->n);
            icx_html_esc(out, ranks);
            fprintf(out,
                    "</td><td class=\"n\">%.3f</td><td class=\"n\">%.3f</td><td class=\"n\">%d"
                    "</td><td class=\"n\">%d</td>",
                    b->first, b->last, b->failed, b->unfinished);
            if (b->op >= 0)
                fprintf(out, "<td>%s #%llu</td><td class=\"n\">%.3f</td></tr>\n",
                        icx_nccl_op_names[b->op], (unsigned long long)b->seq, b->waited);
            else
                fputs("<td>-</td><td class=\"n\">-</td></tr>\n", out);
        }
        fputs("</tbody></table>\n", out);
    }
}

static void errors_free(struct icx_analysis *A)
{
    struct icx_nccl_errors *E = A->nccl_errors;
    A->nccl_errors = NULL;
    for (size_t i = 0; E && i < E->nerr; i++)
        free(E->err[i].ranks);
    for (size_t i = 0; E && i < E->nab; i++)
        free(E->ab[i].ranks);
    if (E) {
        free(E->err);
        free(E->ab);
    }
    free(E);
}

const struct icx_report icx_report_nccl_errors = {
    .name = "nccl_errors",
    .compute = errors_compute,
    .print = errors_print,
    .json = errors_json,
    .free = errors_free,
    .html = errors_html,
};
