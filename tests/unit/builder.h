/* Building traces in memory for the unit tests: records, frames, streams, the way the tracer
 * writes them (include/icx/trace_format.h), and loading them through the reader.  Header-only:
 * each test program includes it once. */
#ifndef ICX_TEST_BUILDER_H
#define ICX_TEST_BUILDER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "reader.h"

static int failures, passes;
/* A failed check ends the test function: the next check would read what this one found wrong. */
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

static inline void put(struct buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void rec(struct buf *frame, uint16_t type, uint32_t aux, const void *body,
                       size_t bodylen)
{
    size_t size = (8 + bodylen + 7) & ~(size_t)7;
    struct icx_rec h = {type, (uint16_t)size, aux};
    put(frame, &h, sizeof(h));
    put(frame, body, bodylen);
    static const uint8_t zero[8];
    put(frame, zero, size - 8 - bodylen);
}

/* A stream's first records: FILE_HEADER (format 1.minor), and a PROCESS pid / rank on host. */
static inline void tb_stream(struct buf *f, uint32_t magic, uint16_t oldest_major, uint16_t minor,
                             const char *host, int32_t pid, int32_t rank)
{
    struct icx_file_header h;
    memset(&h, 0, sizeof(h));
    h.magic = magic;
    h.version_major = 1;
    h.version_minor = minor;
    h.oldest_major = oldest_major;
    h.header_size = sizeof(h);
    h.features = ICX_FEAT_DELTA;
    rec(f, ICX_REC_FILE_HEADER, 0, (const uint8_t *)&h + 8, sizeof(h) - 8);
    rec(f, ICX_REC_STRING, 1, host, strlen(host) + 1);
    struct icx_rec_process p;
    memset(&p, 0, sizeof(p));
    p.pid = pid;
    p.rank = rank;
    p.host = 1;
    rec(f, ICX_REC_PROCESS, 0, (const uint8_t *)&p + 8, sizeof(p) - 8);
}

static inline void header(struct buf *f, uint32_t magic, uint16_t oldest_major)
{
    tb_stream(f, magic, oldest_major, 0, "nodeA", 42, 3);
}

/* A record of type with the body of a struct icx_rec_* (its 8-byte head left out). */
#define TB_REC(f, type, aux, s) rec((f), (type), (aux), (const uint8_t *)&(s) + 8, sizeof(s) - 8)

static inline void copy_rec(struct buf *f, int64_t ts_delta, uint64_t bytes, int src, int dst)
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

static inline void block(struct buf *f, uint32_t tid, uint64_t base)
{
    rec(f, ICX_REC_BLOCK, tid, &base, sizeof(base));
}

static inline void compress_into(struct buf *file, const struct buf *frame)
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

/* One stream per call: its frames appended to file. */
static inline void tb_frame(struct buf *file, struct buf *frame)
{
    compress_into(file, frame);
    frame->n = 0;
}

static inline int tb_load(struct icx_trace *t, const struct buf *b, char *err)
{
    memset(t, 0, sizeof(*t));
    return icx_read_buffer(t, "mem", b->p, b->n, err, 256);
}

#endif
