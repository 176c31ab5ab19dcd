/* The NCCL report, part: clock alignment across hosts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"

/* Cross-host clock alignment.  The ranks of a collective finish it within microseconds of each
 * other (all-reduce, all-gather, reduce-scatter, all-to-all: nobody finishes before the last one
 * arrives and the data has gone round), so each process's offset is the median, over the
 * instances it took part in, of its finish time minus the instance's median finish time -- one
 * offset per host, the median over all its processes' instances, since they share its clock; its
 * times are then corrected by that offset, and what remains is the residual.  The finish is the
 * GPU end where every rank's call was GPU-timed (NCCL returns once the work is enqueued), else the
 * host return (only meaningful where the calls block). */
struct member {
    size_t inst, q;
    double exit;
};

void icx_nccl_align_clocks(const struct icx_trace *t, struct icx_nccl *N, struct call *v, size_t n)
{
    size_t np = t->nprocs ? t->nprocs : 1;
    N->clk = calloc(np, sizeof(*N->clk));
    struct member *m = malloc(sizeof(*m) * (n ? n : 1));
    size_t nm = 0, ninst = 0;
    if (!N->clk || !m) {
        free(m);
        return;
    }
    N->nclk = t->nprocs;
    /* One offset per host: its processes share the host's clocks, so their exits' own scatter
     * (a slow wake-up, a loaded host) must not shift one process against another -- that would
     * order a rank's arrival before the event it waited for. */
    size_t *host = malloc(sizeof(*host) * np);
    if (!host) {
        free(m);
        N->nclk = 0;
        return;
    }
    for (size_t q = 0; q < t->nprocs; q++) {
        N->clk[q].p = t->procs[q];
        const char *h = t->procs[q]->host ? t->procs[q]->host : "";
        host[q] = q;
        for (size_t r = 0; r < q; r++)
            if (!strcmp(t->procs[r]->host ? t->procs[r]->host : "", h)) {
                host[q] = r;
                break;
            }
    }
    for (size_t i = 0; i < n;) {
        size_t j = icx_nccl_instance_end(v, n, i);
        int symmetric = v[i].op == 0 || v[i].op == 3 || v[i].op == 4 || v[i].op == 5;
        int timing = icx_nccl_instance_timing(v, i, j);
        if (symmetric && timing && j - i == (size_t)v[i].nranks && j - i > 1) {
            for (size_t k = i; k < j; k++)
                for (size_t q = 0; q < t->nprocs; q++)
                    if (t->procs[q] == v[k].p)
                        m[nm++] = (struct member){ninst, q, timing == 2 ? v[k].gpu_end : v[k].exit};
            ninst++;
        }
        i = j;
    }
    /* Alternate: instance times from corrected returns, offsets from those times.  Instances of a
     * communicator inside one host agree with any shift of that host, so they must not pull the
     * estimate towards zero: the alternation settles where every instance is consistent. */
    double *T = calloc(ninst ? ninst : 1, sizeof(double)), *buf = malloc(sizeof(double) * (nm + 1));
    for (int it = 0; T && buf && it < 8; it++) {
        for (size_t a = 0, b; a < nm; a = b) {
            size_t k = 0;
            for (b = a; b < nm && m[b].inst == m[a].inst; b++)
                buf[k++] = m[b].exit - N->clk[m[b].q].offset;
            qsort(buf, k, sizeof(double), icx_nccl_dcmp);
            T[m[a].inst] = icx_nccl_pct(buf, k, 0.5);
        }
        for (size_t q = 0; q < t->nprocs; q++) {
            if (host[q] != q)
                continue; /* set with its host's first process */
            size_t k = 0;
            for (size_t x = 0; x < nm; x++)
                if (host[m[x].q] == q)
                    buf[k++] = m[x].exit - T[m[x].inst];
            if (!k)
                continue;
            qsort(buf, k, sizeof(double), icx_nccl_dcmp);
            double off = icx_nccl_pct(buf, k, 0.5);
            for (size_t r = q; r < t->nprocs; r++)
                if (host[r] == q) {
                    N->clk[r].offset = off;
                    N->clk[r].samples = 0;
                    for (size_t x = 0; x < nm; x++)
                        N->clk[r].samples += m[x].q == r;
                }
        }
    }
    for (size_t q = 0; T && buf && q < t->nprocs; q++) {
        size_t k = 0;
        for (size_t x = 0; x < nm; x++)
            if (m[x].q == q)
                buf[k++] = fabs(m[x].exit - N->clk[q].offset - T[m[x].inst]);
        qsort(buf, k, sizeof(double), icx_nccl_dcmp);
        N->clk[q].residual = k ? icx_nccl_pct(buf, k, 0.5) : NAN;
    }
    for (size_t k = 0; k < n; k++)
        for (size_t q = 0; q < N->nclk; q++)
            if (N->clk[q].p == v[k].p) {
                v[k].enter -= N->clk[q].offset;
                v[k].exit -= N->clk[q].offset;
                v[k].gpu_start -= N->clk[q].offset;
                v[k].gpu_end -= N->clk[q].offset;
            }
    free(T);
    free(buf);
    free(m);
    free(host);
}
