/* Trace reader: zstd frames -> records -> the decoder of each record's family (decode.h); see
 * reader.h for the contract. */
#include "reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "decode.h"

#define ZSTD_MAGIC 0xFD2FB528u
#define ZSTD_SKIP_LO 0x184D2A50u
#define ZSTD_SKIP_HI 0x184D2A5Fu
#define MAX_FRAME_CONTENT (256u << 20) /* refuse frames claiming more (decompression bombs) */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Which decoder reads a record type, and whether it is an EVENT (inside a block, delta-timed). */
struct decoder_of {
    uint16_t type;
    uint8_t event;
    icx_decode_fn fn;
};

static const struct decoder_of decoders[] = {
    {ICX_REC_STRING, 0, icx_decode_proc},
    {ICX_REC_PROCESS, 0, icx_decode_proc},
    {ICX_REC_CLOCK, 0, icx_decode_proc},
    {ICX_REC_LOST, 0, icx_decode_proc},
    {ICX_REC_NOTE, 0, icx_decode_proc},
    {ICX_REC_END, 0, icx_decode_proc},
    {ICX_REC_THREAD, 0, icx_decode_proc},
    {ICX_REC_STACK, 0, icx_decode_proc},
    {ICX_REC_SYMBOL, 0, icx_decode_proc},
    {ICX_REC_DEVICE, 0, icx_decode_cuda},
    {ICX_REC_LINK, 0, icx_decode_cuda},
    {ICX_REC_GPU_SPAN, 0, icx_decode_cuda},
    {ICX_REC_STACK_REF, 0, icx_decode_cuda},
    {ICX_REC_CUDA_COPY, 1, icx_decode_cuda},
    {ICX_REC_CUDA_ALLOC, 1, icx_decode_cuda},
    {ICX_REC_CUDA_FREE, 1, icx_decode_cuda},
    {ICX_REC_CUDA_HOST_COPY, 1, icx_decode_cuda},
    {ICX_REC_HOST_ALLOC, 1, icx_decode_cuda},
    {ICX_REC_HOST_FREE, 1, icx_decode_cuda},
    {ICX_REC_NUMA_NODE, 0, icx_decode_topo},
    {ICX_REC_CPU_SAMPLES, 0, icx_decode_topo},
    {ICX_REC_THREAD_AFFINITY, 0, icx_decode_topo},
    {ICX_REC_HOST_NUMA, 0, icx_decode_topo},
    {ICX_REC_NVLINK_COUNTERS, 0, icx_decode_topo},
    {ICX_REC_NIC, 0, icx_decode_topo},
    {ICX_REC_PCI_PATH, 0, icx_decode_topo},
    {ICX_REC_IB_COUNTERS, 0, icx_decode_topo},
    {ICX_REC_VERBS_DEVICE, 0, icx_decode_verbs},
    {ICX_REC_VERBS_PORT, 0, icx_decode_verbs},
    {ICX_REC_VERBS_AGG, 0, icx_decode_verbs},
    {ICX_REC_VERBS_QP, 1, icx_decode_verbs},
    {ICX_REC_VERBS_MR, 1, icx_decode_verbs},
    {ICX_REC_VERBS_CQ, 1, icx_decode_verbs},
    {ICX_REC_VERBS_WR, 1, icx_decode_verbs},
    {ICX_REC_VERBS_WC, 1, icx_decode_verbs},
    {ICX_REC_NCCL_COMM, 1, icx_decode_nccl},
    {ICX_REC_NCCL_CALL, 1, icx_decode_nccl},
    {ICX_REC_NCCL_DUMP, 0, icx_decode_nccl},
    {ICX_REC_NCCL_PCOMM, 0, icx_decode_nccl},
    {ICX_REC_NCCL_PPROXY, 0, icx_decode_nccl},
    {ICX_REC_NCCL_PCOLL, 1, icx_decode_nccl},
    {ICX_REC_NCCL_PKCH, 1, icx_decode_nccl},
    {ICX_REC_HANG_DUMP, 0, icx_decode_hang},
    {ICX_REC_THREAD_STATE, 0, icx_decode_hang},
    {ICX_REC_PY_STACKS, 0, icx_decode_hang},
};

static const struct decoder_of *decoder_for(unsigned type)
{
    for (size_t i = 0; i < sizeof(decoders) / sizeof(decoders[0]); i++)
        if (decoders[i].type == type)
            return &decoders[i];
    return NULL;
}

/* Decoding state of one process stream within one read. */
struct decoder {
    struct icx_trace *t;
    struct icx_input *in;
    struct icx_proc *cur;
    int64_t prev_ts;
    int in_block;
    struct icx_decode_ctx ctx;
    uint64_t orphan_records;
};

/* FILE_HEADER: a new process stream starts.  -1 for a header this reader must refuse. */
static int stream_header(struct decoder *d, const struct icx_rec *r, char *err, size_t errlen)
{
    size_t size = r->size;
    if (size < sizeof(struct icx_file_header)) {
        snprintf(err, errlen, "file header too short (%zu bytes)", size);
        return -1;
    }
    const struct icx_file_header *h = (const void *)r;
    if (h->magic == ICX_MAGIC_SWAPPED) {
        snprintf(err, errlen, "trace written on a big-endian machine: not supported by format 1");
        return -1;
    }
    if (h->magic != ICX_MAGIC) {
        snprintf(err, errlen, "bad magic 0x%08x: not an icxtrace trace", h->magic);
        return -1;
    }
    if (h->oldest_major > ICX_VERSION_MAJOR ||
        (h->oldest_major == ICX_VERSION_MAJOR && h->oldest_minor > ICX_VERSION_MINOR)) {
        snprintf(err, errlen,
                 "trace format %u.%u needs a reader of version %u.%u or newer (this is %u.%u)",
                 h->version_major, h->version_minor, h->oldest_major, h->oldest_minor,
                 ICX_VERSION_MAJOR, ICX_VERSION_MINOR);
        return -1;
    }
    struct icx_proc *p = icx_proc_new(d->t, d->in->path);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->stream_id = h->stream_id;
    p->features = h->features;
    p->version_major = h->version_major;
    p->version_minor = h->version_minor;
    d->in->processes++;
    d->cur = p;
    d->in_block = 0;
    d->ctx.last_copy = d->ctx.last_ncall = 0;
    return 0;
}

/* One record.  Returns 0, or -1 when the stream must be considered corrupt from here. */
static int decode_record(struct decoder *d, const struct icx_rec *r, char *err, size_t errlen)
{
    size_t size = r->size;
    if (r->type == ICX_REC_FILE_HEADER)
        return stream_header(d, r, err, errlen);
    struct icx_proc *p = d->cur;
    if (!p) {
        d->orphan_records++;
        return 0;
    }
    if (r->type == ICX_REC_BLOCK) {
        if (size >= sizeof(struct icx_rec_block)) {
            d->ctx.tid = r->aux;
            d->prev_ts = (int64_t)((const struct icx_rec_block *)r)->base_ticks;
            d->in_block = 1;
        }
        return 0;
    }
    const struct decoder_of *dec = decoder_for(r->type);
    if (!dec)
        return 0; /* unknown or not needed: skipped by size */
    if (dec->event) {
        if (!d->in_block) {
            snprintf(err, errlen, "%s record outside a block", icx_record_name(r->type));
            return -1;
        }
        const struct icx_rec_event *e = (const void *)r;
        if (size < sizeof(*e))
            return -1;
        d->prev_ts = (int64_t)((uint64_t)d->prev_ts + (uint64_t)e->ts); /* wraps, never UB */
        d->ctx.ts = d->prev_ts;
        d->ctx.last_copy = d->ctx.last_ncall = 0;
    }
    dec->fn(p, r, size, &d->ctx);
    return 0;
}

static int decode_frame(struct decoder *d, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    size_t off = 0;
    d->in_block = 0; /* blocks never span frames, nor does an event's STACK_REF */
    d->ctx.last_copy = d->ctx.last_ncall = 0;
    while (off < len) {
        if (len - off < sizeof(struct icx_rec)) {
            snprintf(err, errlen, "record header cut at frame offset %zu", off);
            return -1;
        }
        const struct icx_rec *r = (const struct icx_rec *)(buf + off);
        if (r->size < sizeof(*r) || (r->size & 7) || r->size > len - off) {
            snprintf(err, errlen, "bad record size %u at frame offset %zu", r->size, off);
            return -1;
        }
        if (decode_record(d, r, err, errlen) != 0)
            return -1;
        off += r->size;
    }
    return 0;
}

int icx_read_buffer(struct icx_trace *t, const char *name, const uint8_t *buf, size_t len,
                    char *err, size_t errlen)
{
    if (icx_grow((void **)&t->inputs, &t->cap_inputs, t->ninputs, sizeof(*t->inputs))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct icx_input *in = &t->inputs[t->ninputs++];
    memset(in, 0, sizeof(*in));
    in->path = strdup(name ? name : "");
    in->size = len;
    size_t first_proc = t->nprocs;
    if (len < 4 || (rd32(buf) != ZSTD_MAGIC && (rd32(buf) & 0xFFFFFFF0u) != ZSTD_SKIP_LO)) {
        snprintf(err, errlen, "offset 0: not an icxtrace trace (no zstd frame)");
        return -1;
    }
    struct decoder d = {.t = t, .in = in};
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    uint8_t *out = NULL;
    size_t outcap = 0, off = 0;
    int fatal = 0;
    char ferr[256];
    while (off < len && !fatal) {
        uint32_t magic = len - off >= 4 ? rd32(buf + off) : 0;
        if (magic >= ZSTD_SKIP_LO && magic <= ZSTD_SKIP_HI && len - off >= 8) {
            uint64_t sz = 8 + (uint64_t)rd32(buf + off + 4);
            if (sz > len - off) {
                in->bytes_skipped += len - off;
                break;
            }
            off += sz;
            continue;
        }
        size_t fsz =
            magic == ZSTD_MAGIC ? ZSTD_findFrameCompressedSize(buf + off, len - off) : (size_t)-1;
        unsigned long long csize =
            ZSTD_isError(fsz) ? ZSTD_CONTENTSIZE_ERROR : ZSTD_getFrameContentSize(buf + off, fsz);
        if (ZSTD_isError(fsz) || csize == ZSTD_CONTENTSIZE_ERROR ||
            csize == ZSTD_CONTENTSIZE_UNKNOWN || csize > MAX_FRAME_CONTENT) {
            /* Truncated or damaged: resynchronize on the next frame magic. */
            size_t next = off + 1;
            while (next + 4 <= len && rd32(buf + next) != ZSTD_MAGIC)
                next++;
            if (next + 4 > len)
                next = len;
            in->frames_bad++;
            in->bytes_skipped += next - off;
            if (!ZSTD_isError(fsz) && csize != ZSTD_CONTENTSIZE_ERROR &&
                csize != ZSTD_CONTENTSIZE_UNKNOWN)
                fprintf(stderr,
                        "icx-analyze: %s: offset %zu: a frame declaring %llu bytes, over the "
                        "%u MiB a trace frame can hold: refused (a decompression bomb?), %zu "
                        "bytes skipped\n",
                        name, off, csize, MAX_FRAME_CONTENT >> 20, next - off);
            else if (csize == ZSTD_CONTENTSIZE_UNKNOWN)
                fprintf(stderr,
                        "icx-analyze: %s: offset %zu: a frame that does not declare its size (not "
                        "written by icxtrace): refused, %zu bytes skipped\n",
                        name, off, next - off);
            else
                fprintf(stderr,
                        "icx-analyze: %s: offset %zu: damaged or truncated frame, %zu bytes "
                        "skipped\n",
                        name, off, next - off);
            off = next;
            continue;
        }
        if (csize > outcap) {
            uint8_t *n = realloc(out, csize ? csize : 1);
            if (!n) {
                snprintf(err, errlen, "offset %zu: out of memory", off);
                fatal = 1;
                break;
            }
            out = n;
            outcap = csize;
        }
        size_t got = ZSTD_decompressDCtx(dctx, out, outcap, buf + off, fsz);
        if (ZSTD_isError(got) || got != csize) {
            in->frames_bad++;
            in->bytes_skipped += fsz;
            fprintf(stderr,
                    "icx-analyze: %s: offset %zu: frame fails to decompress (%s); skipped\n", name,
                    off, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size mismatch");
            off += fsz;
            continue;
        }
        in->frames++;
        if (in->frames == 1 && !d.cur &&
            (got < sizeof(struct icx_rec) ||
             ((const struct icx_rec *)out)->type != ICX_REC_FILE_HEADER)) {
            snprintf(err, errlen,
                     "offset %zu: zstd data without an icxtrace header: not an icxtrace "
                     "trace",
                     off);
            fatal = 1;
            break;
        }
        if (decode_frame(&d, out, got, ferr, sizeof(ferr)) != 0) {
            if (in->frames == 1 && !d.cur) {
                snprintf(err, errlen, "offset %zu: %s", off, ferr);
                fatal = 1;
                break;
            }
            in->frames_bad++;
            fprintf(stderr, "icx-analyze: %s: offset %zu: %s; rest of frame skipped\n", name, off,
                    ferr);
        }
        off += fsz;
    }
    ZSTD_freeDCtx(dctx);
    free(out);
    if (!fatal && t->nprocs == first_proc) {
        snprintf(err, errlen, "offset 0: zstd data without an icxtrace header: not a trace");
        fatal = 1;
    }
    if (d.orphan_records)
        fprintf(stderr, "icx-analyze: %s: %llu records before any header were skipped\n", name,
                (unsigned long long)d.orphan_records);
    for (size_t i = first_proc; i < t->nprocs; i++) {
        icx_decode_proc_finish(t->procs[i]);
        icx_decode_cuda_finish(t->procs[i]);
        icx_decode_verbs_finish(t->procs[i]);
        icx_decode_nccl_finish(t->procs[i]);
    }
    return fatal ? -1 : 0;
}

/* A regular file, or a pipe (`<(zstdcat ...)`, a FIFO): anything else (a directory named like a
 * trace, a device that never ends) is refused by name.  A FIFO is opened without waiting for a
 * writer, so one nobody writes reads as empty instead of hanging. */
int icx_read_file(struct icx_trace *t, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        snprintf(err, errlen, "%s",
                 S_ISDIR(st.st_mode) ? "a directory, not a trace file"
                                     : "not a regular file or a pipe");
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, 0); /* blocking reads from here: a pipe's writer may be slow */
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    int bad = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 20;
            uint8_t *n = realloc(buf, ncap);
            if (!n) {
                free(buf);
                close(fd);
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            buf = n;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            bad = errno;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (bad || (len == 0 && S_ISFIFO(st.st_mode))) {
        free(buf);
        if (bad)
            snprintf(err, errlen, "read error: %s", strerror(bad));
        else
            snprintf(err, errlen, "a pipe with nothing written to it");
        return -1;
    }
    int rc = icx_read_buffer(t, path, buf, len, err, errlen);
    free(buf);
    return rc;
}

/* NAME.icx.zst, or NAME.icx.zst.PID: the tracer never overwrites a trace and gives a second process
 * of the same name this one. */
static int is_trace_name(const char *n)
{
    const char *last = NULL;
    for (const char *q = n; (q = strstr(q, ".icx.zst")); q++)
        last = q;
    if (!last || last == n)
        return 0;
    last += 8;
    if (!*last)
        return 1;
    if (*last++ != '.' || !*last)
        return 0;
    for (; *last; last++)
        if (*last < '0' || *last > '9')
            return 0;
    return 1;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int icx_trace_names(const char *path, char ***out, size_t *count)
{
    *count = 0;
    *out = NULL;
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!is_trace_name(e->d_name))
            continue;
        if (icx_grow((void **)&names, &cap, n, sizeof(*names)))
            break;
        size_t plen = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(plen);
        if (names[n])
            snprintf(names[n++], plen, "%s/%s", path, e->d_name);
    }
    closedir(dir);
    if (n > 1)
        qsort(names, n, sizeof(*names), name_cmp);
    *count = n;
    *out = names;
    return 0;
}

int icx_read_path(struct icx_trace *t, const char *path)
{
    struct stat st;
    char err[512];
    if (stat(path, &st) != 0) {
        fprintf(stderr, "icx-analyze: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (icx_read_file(t, path, err, sizeof(err)) != 0) {
            fprintf(stderr, "icx-analyze: %s: %s\n", path, err);
            return 1;
        }
        return 0;
    }
    size_t n;
    char **names;
    if (icx_trace_names(path, &names, &n) != 0) {
        fprintf(stderr, "icx-analyze: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int failed = 0;
    if (n == 0) {
        fprintf(stderr, "icx-analyze: %s: no *.icx.zst traces in this directory\n", path);
        failed = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (icx_read_file(t, names[i], err, sizeof(err)) != 0) {
            fprintf(stderr, "icx-analyze: %s: %s\n", names[i], err);
            failed++;
        }
        free(names[i]);
    }
    free(names);
    return failed;
}
