/* Unit tests of the trace reader on traces built in memory: decoding (delta timestamps, blocks,
 * strings, concatenated streams, unknown records) and every kind of bad input (not a trace,
 * byte-swapped, too new, truncated, corrupt frames, bad record sizes, random mutations). */
#include "builder.h"

/* A valid stream: header frame, two data frames of 3 copies each. */
static struct buf make_stream(uint32_t magic, uint16_t oldest)
{
    struct buf file = {0}, f = {0};
    header(&f, magic, oldest);
    compress_into(&file, &f);
    for (int k = 0; k < 2; k++) {
        f.n = 0;
        block(&f, 7, 1000 + (uint64_t)k * 1000);
        copy_rec(&f, 0, 100, 0, 1);
        copy_rec(&f, 10, 200, 0, 1);
        copy_rec(&f, 10, 300, 1, 0);
        compress_into(&file, &f);
    }
    free(f.p);
    return file;
}

static int load(struct icx_trace *t, const struct buf *b, char *err)
{
    return tb_load(t, b, err);
}

static void test_valid(void)
{
    struct buf b = make_stream(ICX_MAGIC, 1);
    struct icx_trace t;
    char err[256] = "";
    CHECK(load(&t, &b, err) == 0, "%s", err);
    CHECK(t.nprocs == 1, "%zu procs", t.nprocs);
    struct icx_proc *p = t.procs[0];
    CHECK(p->pid == 42 && p->rank == 3 && !strcmp(p->host, "nodeA"), "identity");
    CHECK(p->ncopies == 6, "%zu copies", p->ncopies);
    /* Deltas: block base 1000, then +0, +10, +10 -> 1000, 1010, 1020 ticks = ns (no TSC). */
    CHECK(p->copies[2].ts == 1020 && p->copies[3].ts == 2000, "ts %lld %lld",
          (long long)p->copies[2].ts, (long long)p->copies[3].ts);
    CHECK(p->copies[2].src == 1 && p->copies[2].bytes == 300, "fields");
    CHECK(t.inputs[0].frames == 3 && t.inputs[0].frames_bad == 0, "frames");
    CHECK(!p->ended, "no END record, so not complete");
    icx_trace_free(&t);
    free(b.p);
    passes++;
}

static void test_concatenated(void)
{
    struct buf a = make_stream(ICX_MAGIC, 1), b = make_stream(ICX_MAGIC, 1);
    put(&a, b.p, b.n);
    struct icx_trace t;
    char err[256] = "";
    CHECK(load(&t, &a, err) == 0, "%s", err);
    CHECK(t.nprocs == 2 && t.procs[1]->ncopies == 6, "%zu procs", t.nprocs);
    icx_trace_free(&t);
    free(a.p);
    free(b.p);
    passes++;
}

static void test_swapped_and_newer(void)
{
    struct buf b = make_stream(ICX_MAGIC_SWAPPED, 1);
    struct icx_trace t;
    char err[256] = "";
    CHECK(load(&t, &b, err) == -1 && strstr(err, "big-endian"), "err=%s", err);
    icx_trace_free(&t);
    free(b.p);
    b = make_stream(ICX_MAGIC, 2);
    CHECK(load(&t, &b, err) == -1 && strstr(err, "needs a reader"), "err=%s", err);
    icx_trace_free(&t);
    free(b.p);
    passes++;
}

static void test_not_a_trace(void)
{
    struct icx_trace t;
    char err[256] = "";
    struct buf b = {0};
    put(&b, "hello, world\n", 13);
    CHECK(load(&t, &b, err) == -1 && strstr(err, "not an icxtrace"), "err=%s", err);
    icx_trace_free(&t);
    struct buf z = {0};
    compress_into(&z, &b);
    CHECK(load(&t, &z, err) == -1 && strstr(err, "not"), "err=%s", err);
    icx_trace_free(&t);
    struct buf empty = {0};
    CHECK(load(&t, &empty, err) == -1, "empty input accepted");
    icx_trace_free(&t);
    free(b.p);
    free(z.p);
    passes++;
}

static void test_truncated(void)
{
    struct buf b = make_stream(ICX_MAGIC, 1);
    struct icx_trace t;
    char err[256] = "";
    b.n -= 7; /* cut the last frame */
    CHECK(load(&t, &b, err) == 0, "%s", err);
    CHECK(t.nprocs == 1 && t.procs[0]->ncopies == 3, "%zu copies kept",
          t.nprocs ? t.procs[0]->ncopies : 0);
    CHECK(t.inputs[0].frames_bad == 1 && t.inputs[0].bytes_skipped > 0, "damage counted");
    icx_trace_free(&t);
    free(b.p);
    passes++;
}

static void test_corrupt_middle(void)
{
    struct buf b = make_stream(ICX_MAGIC, 1);
    /* Find the second data frame (third frame) start and corrupt a byte inside the second. */
    size_t f1 = ZSTD_findFrameCompressedSize(b.p, b.n);
    size_t f2 = ZSTD_findFrameCompressedSize(b.p + f1, b.n - f1);
    b.p[f1 + f2 / 2] ^= 0x5a;
    struct icx_trace t;
    char err[256] = "";
    CHECK(load(&t, &b, err) == 0, "%s", err);
    CHECK(t.nprocs == 1 && t.procs[0]->ncopies == 3, "intact frames read: %zu copies",
          t.nprocs ? t.procs[0]->ncopies : 0);
    CHECK(t.inputs[0].frames_bad >= 1, "damage counted");
    icx_trace_free(&t);
    free(b.p);
    passes++;
}

static void test_bad_record_and_unknown(void)
{
    struct buf file = {0}, f = {0};
    header(&f, ICX_MAGIC, 1);
    compress_into(&file, &f);
    f.n = 0;
    block(&f, 1, 0);
    copy_rec(&f, 5, 64, 2, 3);
    uint8_t junk[24] = {0};
    rec(&f, 999, 0, junk, sizeof(junk)); /* unknown type: skipped by size */
    copy_rec(&f, 5, 64, 2, 3);
    struct icx_rec bad = {ICX_REC_CUDA_COPY, 4000, 0}; /* size beyond the frame */
    put(&f, &bad, sizeof(bad));
    compress_into(&file, &f);
    struct icx_trace t;
    char err[256] = "";
    CHECK(load(&t, &file, err) == 0, "%s", err);
    CHECK(t.procs[0]->ncopies == 2 && t.procs[0]->copies[1].ts == 10, "copies %zu",
          t.procs[0]->ncopies);
    CHECK(t.inputs[0].frames_bad == 1, "bad record counted");
    icx_trace_free(&t);
    free(file.p);
    free(f.p);
    passes++;
}

/* Random byte flips, truncations and splices of a valid trace: the reader must never crash (run
 * under ASan/UBSan by `make sanitize`) and never claim more copies than were written. */
static void test_mutations(void)
{
    struct buf b = make_stream(ICX_MAGIC, 1);
    uint8_t *m = malloc(b.n);
    srand(12345);
    for (int i = 0; i < 3000; i++) {
        memcpy(m, b.p, b.n);
        size_t n = b.n;
        int kind = rand() % 3;
        if (kind == 0)
            for (int k = 0; k < 1 + rand() % 4; k++)
                m[(size_t)rand() % n] ^= (uint8_t)(1 + rand() % 255);
        else if (kind == 1)
            n = (size_t)rand() % n;
        else {
            size_t a = (size_t)rand() % n, len = (size_t)rand() % (n - a);
            memmove(m + a, m + a + len, n - a - len);
            n -= len;
        }
        struct icx_trace t;
        char err[256];
        memset(&t, 0, sizeof(t));
        icx_read_buffer(&t, "mut", m, n, err, sizeof(err));
        size_t copies = 0;
        for (size_t k = 0; k < t.nprocs; k++)
            copies += t.procs[k]->ncopies;
        CHECK(copies <= 6, "mutation %d produced %zu copies", i, copies);
        icx_trace_free(&t);
    }
    free(m);
    free(b.p);
    passes++;
}

int main(void)
{
    test_valid();
    test_concatenated();
    test_swapped_and_newer();
    test_not_a_trace();
    test_truncated();
    test_corrupt_middle();
    test_bad_record_and_unknown();
    test_mutations();
    printf("reader: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
