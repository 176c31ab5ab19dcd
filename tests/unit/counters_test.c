/* Unit tests of the counters report (report_counters.c) on traces built in memory: which of
 * several processes' samples of one host's counters bound the window, and the decoding of
 * counter samples written before format 1.4 (one time per sample). */
#include <math.h>

#include "analysis.h"
#include "builder.h"
#include "report_counters.h"

#define S 1000000000ull /* ns per s */
#define MSG 16384ull

/* One process of host nodeA that sampled mlx5_0: samples {began, ended, tx} in ns and bytes;
 * ended 0 writes the 48-byte record of format 1.3 (no read_end_ns). */
struct sample {
    uint64_t began, ended, tx;
};
static void ib_process(struct buf *file, int32_t pid, const struct sample *s, int n)
{
    struct buf f = {0};
    tb_stream(&f, ICX_MAGIC, 1, ICX_VERSION_MINOR, "nodeA", pid, pid);
    rec(&f, ICX_REC_STRING, 2, "mlx5_0", 7);
    struct icx_rec_nic nic;
    memset(&nic, 0, sizeof(nic));
    nic.name = 2;
    nic.port = 1;
    nic.rate_mbps = 100000;
    nic.active = 1;
    TB_REC(&f, ICX_REC_NIC, 0, nic);
    for (int i = 0; i < n; i++) {
        struct icx_rec_ib_counters c;
        memset(&c, 0, sizeof(c));
        c.mono_ns = s[i].began;
        c.read_end_ns = s[i].ended;
        c.tx_bytes = s[i].tx;
        c.rx_bytes = s[i].tx / 2;
        rec(&f, ICX_REC_IB_COUNTERS, 0, (const uint8_t *)&c + 8,
            (s[i].ended ? sizeof(c) : ICX_IB_COUNTERS_SIZE_1_3) - 8);
    }
    tb_frame(file, &f);
    free(f.p);
}

static const struct icx_counter_row *ib_row(const struct icx_analysis *A)
{
    for (size_t i = 0; A->counters && i < A->counters->n; i++)
        if (A->counters->rows[i].nic && !strcmp(A->counters->rows[i].bus, "mlx5_0") &&
            !strcmp(A->counters->rows[i].host, "nodeA"))
            return &A->counters->rows[i];
    return NULL;
}

/* Rank X moves T bytes between its first and last sample.  Process A took the earliest clock
 * but was preempted before reading: its reads saw X's first message.  Process C read last but
 * had taken its clock before X's last message.  The window must be X's own: exactly T. */
static void test_preempted_samplers(void)
{
    const uint64_t T = 200 * MSG;
    struct sample x[] = {{2 * S, 2 * S + 1000, 0}, {10 * S, 10 * S + 1000, T}};
    struct sample a[] = {{1 * S, 5 * S, MSG}, {9 * S, 9 * S + 1000, T - MSG}};
    struct sample c[] = {{8 * S, 12 * S, T - MSG}};
    struct buf file = {0};
    ib_process(&file, 1, x, 2);
    ib_process(&file, 2, a, 2);
    ib_process(&file, 3, c, 1);
    struct icx_trace t;
    char err[256] = "";
    CHECK(tb_load(&t, &file, err) == 0 && t.nprocs == 3, "%s", err);
    CHECK(t.procs[1]->csamples[0].t == 1.0 && t.procs[1]->csamples[0].t_read == 5.0,
          "decoded times %g %g", t.procs[1]->csamples[0].t, t.procs[1]->csamples[0].t_read);
    struct icx_analysis A = {.t = &t};
    CHECK(icx_analysis_compute(&A, icx_reports, icx_nreports) == 0, "compute");
    const struct icx_counter_row *r = ib_row(&A);
    CHECK(r, "no row for nodeA/mlx5_0");
    CHECK(r->tx1 - r->tx0 == T, "tx %llu, want %llu", (unsigned long long)(r->tx1 - r->tx0),
          (unsigned long long)T);
    CHECK(r->rx1 - r->rx0 == T / 2, "rx %llu", (unsigned long long)(r->rx1 - r->rx0));
    CHECK(r->t0 == 2.0 && fabs(r->t1 - 10.000001) < 1e-9, "window %g..%g", r->t0, r->t1);
    icx_analysis_free(&A, icx_reports, icx_nreports);
    icx_trace_free(&t);
    free(file.p);
    passes++;
}

/* Format 1.3 records (no read_end_ns) read as samples that ended when they began: the earliest
 * and latest clock bound the window, as before 1.4; and one sample alone is no window. */
static void test_samples_before_1_4(void)
{
    struct sample x[] = {{3 * S, 0, 100}, {4 * S, 0, 900}}, y[] = {{1 * S, 0, 50}},
                  one[] = {{1 * S, 1 * S + 10, 70}};
    struct buf file = {0};
    ib_process(&file, 1, x, 2);
    ib_process(&file, 2, y, 1);
    struct icx_trace t;
    char err[256] = "";
    CHECK(tb_load(&t, &file, err) == 0 && t.nprocs == 2, "%s", err);
    CHECK(t.procs[0]->ncsamples == 2 && t.procs[0]->csamples[1].t_read == 4.0, "1.3 sample");
    struct icx_analysis A = {.t = &t};
    CHECK(icx_analysis_compute(&A, icx_reports, icx_nreports) == 0, "compute");
    const struct icx_counter_row *r = ib_row(&A);
    CHECK(r && r->tx1 - r->tx0 == 850 && r->t0 == 1.0 && r->t1 == 4.0, "row %p", (void *)r);
    icx_analysis_free(&A, icx_reports, icx_nreports);
    icx_trace_free(&t);
    file.n = 0;
    ib_process(&file, 1, one, 1);
    CHECK(tb_load(&t, &file, err) == 0, "%s", err);
    memset(&A, 0, sizeof(A));
    A.t = &t;
    CHECK(icx_analysis_compute(&A, icx_reports, icx_nreports) == 0, "compute");
    r = ib_row(&A);
    CHECK(r && r->t1 == r->t0 && r->tx1 == r->tx0, "one sample made a window");
    icx_analysis_free(&A, icx_reports, icx_nreports);
    icx_trace_free(&t);
    free(file.p);
    passes++;
}

int main(void)
{
    test_preempted_samplers();
    test_samples_before_1_4();
    printf("counters: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
