/* Unit tests of the trace reader on traces built in memory: decoding (delta timestamps, blocks,
 * strings, concatenated streams, unknown records) and every kind of bad input (not a trace,
 * byte-swapped, too new, truncated, corrupt frames, bad record sizes, random mutations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "reader.h"

static int failures, passes;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: %s: ", __func__, __LINE__, #cond);                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- building traces ---- */
struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void rec(struct buf *frame, uint16_t type, uint32_t aux, const void *body, size_t bodylen)
{
    size_t size = (8 + bodylen + 7) & ~(size_t)7;
    struct icx_rec h = {type, (uint16_t)size, aux};
    put(frame, &h, sizeof(h));
    put(frame, body, bodylen);
    static const uint8_t zero[8];
    put(frame, zero, size - 8 - bodylen);
}

static void header(struct buf *f, uint32_t magic, uint16_t oldest_major)
{
    struct icx_file_header h;
    memset(&h, 0, sizeof(h));
    h.magic = magic;
    h.version_major = 1;
    h.oldest_major = oldest_major;
    h.header_size = sizeof(h);
    h.features = ICX_FEAT_DELTA;
    rec(f, ICX_REC_FILE_HEADER, 0, (const uint8_t *)&h + 8, sizeof(h) - 8);
    const char host[] = "nodeA";
    rec(f, ICX_REC_STRING, 1, host, sizeof(host));
    struct icx_rec_process p;
    memset(&p, 0, sizeof(p));
    p.pid = 42;
    p.rank = 3;
    p.host = 1;
    rec(f, ICX_REC_PROCESS, 0, (const uint8_t *)&p + 8, sizeof(p) - 8);
}

static void copy_rec(struct buf *f, int64_t ts_delta, uint64_t bytes, int src, int dst)
{
    struct icx_rec_cuda_copy c;
    memset(&c, 0, sizeof(c));
    c.e.ts = ts_delta;
    c.e.dur = 5;
    c.bytes = bytes;
    c.src_dev = src;
    c.dst_dev = dst;
    rec(f, ICX_REC_CUDA_COPY, ICX_API_cudaMemcpyPeerAsync, (const uint8_t *)&c + 8, sizeof(c) - 8);
}

static void block(struct buf *f, uint32_t tid, uint64_t base)
{
    rec(f, ICX_REC_BLOCK, tid, &base, sizeof(base));
}

static void compress_into(struct buf *file, const struct buf *frame)
{
    size_t cap = ZSTD_compressBound(frame->n);
    uint8_t *z = malloc(cap);
    /* As the tracer writes them: level 1 with content checksums. */
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    size_t n = ZSTD_compress2(c, z, cap, frame->p, frame->n);
    ZSTD_freeCCtx(c);
    put(file, z, n);
    free(z);
}

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
    memset(t, 0, sizeof(*t));
    return icx_read_buffer(t, "mem", b->p, b->n, err, 256);
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
