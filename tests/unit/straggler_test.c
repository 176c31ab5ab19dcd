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

int main(void)
{
    test_binomial_tail();
    test_persistent_straggler();
    test_late_together();
    test_noise_names_no_one();
    printf("straggler: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
