/* Unit tests of the straggler rule (analyzer/nccl_straggler.c) on NCCL jobs built in memory: one
 * communicator of 4 ranks, one process each, all-reduces whose arrivals the test sets.  A
 * persistent late rank is named; two ranks late together leave no one named alone; arrivals
 * that only jitter name no one; the chance-rate test itself. */
#include <math.h>

#include "analysis.h"
#include "builder.h"
#include "nccl_model.h"

#define NR 4
#define MS 1000000ll /* ns */

static uint64_t rng = 88172645463325252ull;
static double uniform(void) /* xorshift64: the same jobs every run */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void event_at(struct buf *f, int64_t t_ns)
{
    block(f, 1, (uint64_t)t_ns); /* each event its own block: ts is the block base */
}

/* A job of `inst` all-reduces; arrive(i, r) is rank r's arrival (ns) at instance i. */
static struct buf make_job(int inst, int64_t (*arrive)(int i, int r))
{
    struct buf file = {0}, f = {0};
    for (int r = 0; r < NR; r++) {
        tb_stream(&f, ICX_MAGIC, 1, ICX_VERSION_MINOR, "nodeA", 100 + r, r);
        struct icx_rec_nccl_comm c;
        memset(&c, 0, sizeof(c));
        c.comm = 0xc0;
        c.comm_id = 0xabc;
        c.rank = r;
        c.nranks = NR;
        c.device = r;
        event_at(&f, 1 * MS);
        TB_REC(&f, ICX_REC_NCCL_COMM, ICX_API_ncclCommInitRank, c);
        for (int i = 0; i < inst; i++) {
            int64_t all_in = 0;
            for (int q = 0; q < NR; q++)
                all_in = arrive(i, q) > all_in ? arrive(i, q) : all_in;
            struct icx_rec_nccl_call x;
            memset(&x, 0, sizeof(x));
            x.e.dur = (uint64_t)(all_in - arrive(i, r) + 2 * MS); /* done 2 ms after the last */
            x.comm = 0xc0;
            x.count = 1 << 20;
            x.bytes = 4 << 20;
            x.seq = (uint64_t)i;
            x.peer = -1;
            event_at(&f, arrive(i, r));
            TB_REC(&f, ICX_REC_NCCL_CALL, ICX_API_ncclAllReduce, x);
        }
        tb_frame(&file, &f);
    }
    free(f.p);
    return file;
}

/* The ranks named as stragglers, as a bit mask; -1 when the job did not load. */
static int named(const struct buf *job)
{
    struct icx_trace t;
    char err[256] = "";
    if (tb_load(&t, job, err) != 0 || t.nprocs != NR) {
        printf("load: %s\n", err);
        return -1;
    }
    struct icx_analysis A = {.t = &t};
    int mask = 0;
    if (icx_analysis_compute(&A, icx_reports, icx_nreports) == 0)
        for (size_t k = 0; k < A.findings.n; k++)
            if (!strcmp(A.findings.v[k].kind, "straggler"))
                mask |= 1 << A.findings.v[k].rank;
    icx_analysis_free(&A, icx_reports, icx_nreports);
    icx_trace_free(&t);
    return mask;
}

static int64_t base(int i)
{
    return 100 * MS + (int64_t)i * 200 * MS;
}
static int64_t jitter(void) /* host noise: 0-1 ms */
{
    return (int64_t)(uniform() * MS);
}

static int64_t rank2_slow(int i, int r)
{
    return base(i) + jitter() + (r == 2 ? 50 * MS : 0);
}
/* Ranks 1 and 2 held up together (say, by another communicator); rank 2 a hair later. */
static int64_t pair_slow(int i, int r)
{
    return base(i) + jitter() + (r == 1 ? 50 * MS : r == 2 ? 51 * MS : 0);
}
/* No straggler: each instance some rank is up to 30 ms late, a different one at random. */
static int late_one;
static int64_t noisy(int i, int r)
{
    if (r == 0)
        late_one = (int)(uniform() * NR);
    return base(i) + jitter() + (r == late_one ? (int64_t)(uniform() * 30 * MS) : 0);
}

static void test_persistent_straggler(void)
{
    struct buf b = make_job(20, rank2_slow);
    int m = named(&b);
    CHECK(m == 1 << 2, "named mask %#x, want rank 2 only", m);
    free(b.p);
    passes++;
}

static void test_late_together(void)
{
    struct buf b = make_job(20, pair_slow);
    int m = named(&b);
    CHECK(m == 0 || m == 0x6, "named mask %#x: one of two ranks late together named alone", m);
    free(b.p);
    passes++;
}

static void test_noise_names_no_one(void)
{
    for (int job = 0; job < 20; job++) {
        struct buf b = make_job(40, noisy);
        int m = named(&b);
        CHECK(m == 0, "job %d: named mask %#x in arrivals that only jitter", job, m);
        free(b.p);
    }
    passes++;
}

static void test_binomial_tail(void)
{
    CHECK(icx_binomial_tail(10, 0, 0.25) == 1, "k = 0");
    CHECK(fabs(icx_binomial_tail(1, 1, 0.25) - 0.25) < 1e-12, "one trial");
    CHECK(fabs(icx_binomial_tail(6, 6, 0.125) - pow(0.125, 6)) < 1e-15, "all six");
    /* P(X >= 3), n = 4, p = 0.5: (4 + 1) / 16 */
    CHECK(fabs(icx_binomial_tail(4, 3, 0.5) - 5.0 / 16) < 1e-12, "%g",
          icx_binomial_tail(4, 3, 0.5));
    double big = icx_binomial_tail(1000000, 250500, 0.25);
    CHECK(big > 0.1 && big < 0.2, "a million trials: %g", big);
    CHECK(icx_binomial_tail(5, 6, 0.5) == 0, "k > n");
    passes++;
}

/* A general job: per rank, communicators and calls (host enter, how long the call took). */
struct xcomm {
    uint64_t handle, id;
    int rank, nranks;
};
struct xcall {
    int64_t t, dur;
    uint64_t handle, seq;
    uint32_t group;
    unsigned api;
};
static struct buf make_xjob(int nprocs, const struct xcomm comms[][2], const int *ncomms,
                            struct xcall *const *calls, const int *ncalls)
{
    struct buf file = {0}, f = {0};
    for (int r = 0; r < nprocs; r++) {
        tb_stream(&f, ICX_MAGIC, 1, ICX_VERSION_MINOR, "nodeA", 100 + r, r);
        for (int k = 0; k < ncomms[r]; k++) {
            struct icx_rec_nccl_comm c;
            memset(&c, 0, sizeof(c));
            c.comm = comms[r][k].handle;
            c.comm_id = comms[r][k].id;
            c.rank = comms[r][k].rank;
            c.nranks = comms[r][k].nranks;
            c.device = r;
            event_at(&f, 1 * MS);
            TB_REC(&f, ICX_REC_NCCL_COMM, ICX_API_ncclCommInitRank, c);
        }
        for (int k = 0; k < ncalls[r]; k++) {
            const struct xcall *e = &calls[r][k];
            struct icx_rec_nccl_call x;
            memset(&x, 0, sizeof(x));
            x.e.dur = (uint64_t)e->dur;
            x.comm = e->handle;
            x.count = 1 << 20;
            x.bytes = 4 << 20;
            x.seq = e->seq;
            x.group = e->group;
            x.peer = -1;
            event_at(&f, e->t);
            TB_REC(&f, ICX_REC_NCCL_CALL, e->api, x);
        }
        tb_frame(&file, &f);
    }
    free(f.p);
    return file;
}

/* Findings of one kind as a rank mask, with the first one's evidence. */
static int named_x(const struct buf *job, int nprocs, char *evidence, size_t len)
{
    struct icx_trace t;
    char err[256] = "";
    if (tb_load(&t, job, err) != 0 || (int)t.nprocs != nprocs) {
        printf("load: %s\n", err);
        return -1;
    }
    struct icx_analysis A = {.t = &t};
    int mask = 0;
    if (evidence)
        evidence[0] = 0;
    if (icx_analysis_compute(&A, icx_reports, icx_nreports) == 0)
        for (size_t k = 0; k < A.findings.n; k++)
            if (!strcmp(A.findings.v[k].kind, "straggler")) {
                mask |= 1 << A.findings.v[k].rank;
                if (evidence && !evidence[0])
                    snprintf(evidence, len, "%s", A.findings.v[k].evidence);
                double cf = A.findings.v[k].confidence;
                if (!(cf > 0.999 && cf <= 1)) { /* a named straggler states its confidence */
                    printf("confidence %g\n", cf);
                    mask |= 1 << 30;
                }
            }
    icx_analysis_free(&A, icx_reports, icx_nreports);
    icx_trace_free(&t);
    return mask;
}

#define XN 4
#define XSTEPS 20
static struct xcall xbuf[XN][3 * XSTEPS];
static int xn[XN];
static void xadd(int r, int64_t t, int64_t done, uint64_t handle, uint64_t seq, uint32_t group,
                 unsigned api)
{
    xbuf[r][xn[r]++] = (struct xcall){t, done - t, handle, seq, group, api};
}

/* Every rank in one world communicator (handle 0xc0), no calls yet. */
static void xsetup(struct xcomm comms[XN][2], int *nc, struct xcall **calls)
{
    for (int r = 0; r < XN; r++) {
        comms[r][0] = (struct xcomm){0xc0, 0xabc, r, XN};
        nc[r] = 1;
        xn[r] = 0;
        calls[r] = xbuf[r];
    }
}

/* Ranks 1 and 2 share a second communicator (a pipeline pair) and all-reduce there, waiting for
 * the result, before every world all-reduce.  Rank 2 is 50 ms slow: rank 1 waits for it in the
 * pair, so both reach the world collective late together, rank 1 a hair later.  Only rank 2 is
 * named: rank 1's lateness is explained by its wait in the pair communicator. */
static void test_wait_elsewhere_explained(void)
{
    struct xcomm comms[XN][2];
    int nc[XN];
    struct xcall *calls[XN];
    xsetup(comms, nc, calls);
    for (int r = 1; r <= 2; r++)
        comms[r][nc[r]++] = (struct xcomm){0xd0, 0xdef, r - 1, 2};
    for (int i = 0; i < XSTEPS; i++) {
        int64_t b = base(i), pair_in = b + 50 * MS + jitter(), pair_done = pair_in + 2 * MS;
        int64_t world[XN];
        for (int r = 0; r < XN; r++)
            world[r] = b + jitter();
        world[2] = pair_done + 100000 + jitter() / 10; /* straight from the pair's result */
        world[1] = world[2] + 200000;                  /* a hair later still */
        int64_t all_in = 0;
        for (int r = 0; r < XN; r++)
            all_in = world[r] > all_in ? world[r] : all_in;
        xadd(1, b + jitter(), pair_done, 0xd0, (uint64_t)i, 0, ICX_API_ncclAllReduce);
        xadd(2, pair_in, pair_done, 0xd0, (uint64_t)i, 0, ICX_API_ncclAllReduce);
        for (int r = 0; r < XN; r++)
            xadd(r, world[r], all_in + 2 * MS, 0xc0, (uint64_t)i, 0, ICX_API_ncclAllReduce);
    }
    struct buf b = make_xjob(XN, comms, nc, calls, xn);
    char ev[1400];
    int m = named_x(&b, XN, ev, sizeof(ev));
    CHECK(m == 1 << 2, "named mask %#x, want rank 2 only", m);
    CHECK(strstr(ev, "rank(s) 1 (20) came straight from waiting"), "evidence: %s", ev);
    free(b.p);
    passes++;
}

/* Two stragglers: rank 3 60 ms late, rank 1 20 ms late.  Rank 3 stands alone first; with it set
 * aside rank 1 does. */
static int64_t two_apart(int i, int r)
{
    return base(i) + jitter() + (r == 3 ? 60 * MS : r == 1 ? 20 * MS : 0);
}
static void test_two_stragglers_apart(void)
{
    struct buf b = make_job(XSTEPS, two_apart);
    int m = named(&b);
    CHECK(m == (1 << 3 | 1 << 1), "named mask %#x, want ranks 1 and 3", m);
    free(b.p);
    passes++;
}

/* Ranks 0 and 3 both about 40 ms late (within 3 ms of each other): a late set of two, both
 * named; never one alone. */
static int64_t two_together(int i, int r)
{
    return base(i) + jitter() + (r == 0 || r == 3 ? 40 * MS + 3 * jitter() : 0);
}
static void test_two_late_together_both_slow(void)
{
    struct buf b = make_job(XSTEPS, two_together);
    int m = named(&b);
    CHECK(m == (1 << 0 | 1 << 3), "named mask %#x, want ranks 0 and 3", m);
    free(b.p);
    passes++;
}

/* A Gather and a Scatter in one group per step, rank 2 late to the group: one late arrival per
 * group, not two.  Over 3 steps, 3 of 3 in a 4-rank communicator is within chance (1/64 > the
 * threshold): no one is named; counted per call (6 of 6) it would have been.  Over 12 steps it is
 * named, with 12 (not 24) units as its evidence. */
static void grouped_job(int steps, int *mask, char *ev, size_t len)
{
    struct xcomm comms[XN][2];
    int nc[XN];
    struct xcall *calls[XN];
    xsetup(comms, nc, calls);
    for (int i = 0; i < steps; i++) {
        int64_t t[XN], all_in = 0;
        for (int r = 0; r < XN; r++) {
            t[r] = base(i) + jitter() + (r == 2 ? 50 * MS : 0);
            all_in = t[r] > all_in ? t[r] : all_in;
        }
        for (int r = 0; r < XN; r++) {
            xadd(r, t[r], all_in + 2 * MS, 0xc0, (uint64_t)(2 * i), (uint32_t)(i + 1),
                 ICX_API_ncclGather);
            xadd(r, t[r] + 10000, all_in + 2 * MS, 0xc0, (uint64_t)(2 * i + 1), (uint32_t)(i + 1),
                 ICX_API_ncclScatter);
        }
    }
    struct buf b = make_xjob(XN, comms, nc, calls, xn);
    *mask = named_x(&b, XN, ev, len);
    free(b.p);
}

static void test_group_counts_once(void)
{
    int m;
    char ev[1400];
    grouped_job(3, &m, ev, sizeof(ev));
    CHECK(m == 0, "3 grouped steps: named mask %#x (%s)", m, ev);
    grouped_job(12, &m, ev, sizeof(ev));
    CHECK(m == 1 << 2 && strstr(ev, " at 12 of 12 collectives"), "12 grouped steps: %#x %s", m, ev);
    passes++;
}

int main(void)
{
    test_binomial_tail();
    test_persistent_straggler();
    test_late_together();
    test_noise_names_no_one();
    test_wait_elsewhere_explained();
    test_two_stragglers_apart();
    test_two_late_together_both_slow();
    test_group_counts_once();
    printf("straggler: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
