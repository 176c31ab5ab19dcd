/* The writer: a background thread (signals blocked, named icx-writer) that every ICX_FLUSH_MS
 * drains the per-thread rings, delta-encodes timestamps, compresses one zstd frame and appends it
 * to the trace file.  Whole frames as we go, so a killed process leaves a readable prefix.  zstd
 * (libzstd) because the container must be a standard, checkable stream and level 1 is fast enough
 * to keep up (about 250 MB/s per core here). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>

#include "frame.h"
#include "identity.h"
#include "module.h"
#include "tbuf.h"
#include "writer.h"

#define ICX_FRAME_MAX (4u << 20) /* raw bytes per frame before it is cut */

static pthread_mutex_t icx_wlock = PTHREAD_MUTEX_INITIALIZER; /* writer state below */
static int icx_fd = -1;
static struct stat icx_fd_st; /* what icx_fd was opened on: the job may close it and reuse it */
static int icx_fd_foreign;    /* icx_fd is the job's now: never written, read or closed */
static ZSTD_CCtx *icx_cctx;
static struct icx_frame icx_cur;
static uint8_t *icx_zbuf;
static size_t icx_zcap;
static pthread_t icx_thread;
static int icx_thread_started;
/* Wake-ups for the writer: bits in one word and a futex, no file descriptor -- a job that closes
 * every descriptor it did not open (closerange) and reuses the numbers would otherwise have had
 * our wake bytes written into its files, and the writer reading its data.  Async-signal-safe
 * (an atomic OR and a syscall). */
enum { ICX_WAKE_PRESSURE = 1, ICX_WAKE_FRAME = 2 };
static _Atomic uint32_t icx_wake_bits;
static _Atomic int icx_stop;
static _Atomic int icx_writer_tid;
static _Atomic unsigned icx_flush_gen; /* bumped after every frame written */
static _Atomic unsigned icx_begun_gen; /* bumped as each frame begins, once woken */
/* A final frame asked for by another thread (fatal signal, exec, _exit): END's status, once
 * icx_pending_set is 1. */
static _Atomic int icx_pending_set;
static _Atomic int icx_pending_status;
static _Atomic int icx_ended;      /* END written: nothing more, unless a failed exec resumes */
static _Atomic int icx_stream_pid; /* the process whose stream this is (not a vfork child) */
static int icx_warned_write;
static uint64_t icx_events_written; /* EVENT records drained from the rings (writer lock held) */
static const struct icx_module *const *icx_mods; /* the module table, from icx_writer_start */
static size_t icx_nmods;

/* The file's state, writer lock held.  A frame that cannot be written whole is cut off again, so
 * the file only ever holds whole frames; the stream is then broken: later frames are dropped and
 * counted, and at the end one small tail (loss counters, END) is tried, so that a trace that
 * could be finished says what it lacks.  A file removed under us (its directory deleted) is
 * given up. */
static uint64_t icx_file_good; /* bytes of whole frames in the file */
static size_t icx_head_len;    /* the stream header at the start of icx_cur, until it is written */
static int icx_broken, icx_tail_tried, icx_gone;
static int icx_end_status;

/* write() that a file-size limit cannot kill: SIGXFSZ (default action: die with a core) is
 * blocked around it and, when this write raised it (EFBIG), taken back -- unless one was pending
 * already, which is the job's.  0 or the errno. */
static int icx_write_all(const uint8_t *p, size_t n)
{
    sigset_t xfsz, old, pend;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    int had = sigpending(&pend) == 0 && sigismember(&pend, SIGXFSZ);
    int err = 0;
    while (n > 0) {
        ssize_t w = write(icx_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : ENOSPC;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (err == EFBIG && !had) {
        struct timespec zero = {0, 0};
        sigtimedwait(&xfsz, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

/* Compress n raw bytes as one frame and append it; 0, or -1 (the caller counts the loss). */
static int icx_frame_write(const uint8_t *raw, size_t n)
{
    size_t bound = ZSTD_compressBound(n);
    if (bound > icx_zcap) {
        uint8_t *b = realloc(icx_zbuf, bound);
        if (!b)
            return -1;
        icx_zbuf = b;
        icx_zcap = bound;
    }
    size_t z = ZSTD_compress2(icx_cctx, icx_zbuf, icx_zcap, raw, n);
    if (ZSTD_isError(z))
        return -1;
    int err = icx_write_all(icx_zbuf, z);
    if (err == 0) {
        icx_file_good += z;
        return 0;
    }
    /* Whole frames only: cut the partial one off (shrinking is allowed past any size limit). */
    if (ftruncate(icx_fd, (off_t)icx_file_good) == 0)
        lseek(icx_fd, (off_t)icx_file_good, SEEK_SET);
    icx_broken = 1;
    if (!icx_warned_write++)
        icx_log("cannot write trace %s: %s; the job goes on, later frames are dropped\n",
                icx_cfg.output, strerror(err));
    return -1;
}

/* The trace file removed while we write it (st_nlink 0): say so once and stop tracing. */
/* Still the file we opened: the job may have closed our descriptor (closerange) and got the number
 * back for a file of its own. */
static int icx_fd_ours(void)
{
    struct stat st;
    return icx_fd >= 0 && fstat(icx_fd, &st) == 0 && st.st_dev == icx_fd_st.st_dev &&
           st.st_ino == icx_fd_st.st_ino;
}

static void icx_check_gone(void)
{
    struct stat st;
    if (icx_gone)
        return;
    if (!icx_fd_ours()) {
        icx_gone = 1;
        icx_fd_foreign = 1;
        icx_log("the job closed the trace file's descriptor (%s); nothing more is traced\n",
                icx_cfg.output);
        atomic_store(&icx_active, 0);
        return;
    }
    if (fstat(icx_fd, &st) != 0 || st.st_nlink > 0)
        return;
    icx_gone = 1;
    icx_log("trace file %s was removed while the job ran (its directory deleted?); nothing more "
            "is traced\n",
            icx_cfg.output);
    atomic_store(&icx_active, 0); /* the hooks pass straight through from now on */
}

static void icx_put_lost(struct icx_frame *f);
static void icx_put_end(int status);

/* Compress the current frame and append it to the file.  Writer lock held. */
static int icx_open_file(void);

static void icx_frame_emit(void)
{
    if (icx_cur.len == 0 || icx_open_file() != 0)
        return;
    icx_check_gone();
    const uint8_t *p = icx_cur.buf;
    size_t n = icx_cur.len;
    if (!icx_gone && !icx_broken && icx_head_len && icx_head_len <= n) {
        /* the stream header, a frame of its own: the file starts readable */
        if (icx_frame_write(p, icx_head_len) == 0) {
            p += icx_head_len;
            n -= icx_head_len;
        }
        icx_head_len = 0;
    }
    if (!icx_gone && !icx_broken && n && icx_frame_write(p, n) == 0)
        n = 0;
    atomic_fetch_add(&icx_lost[ICX_LOST_write_error], n); /* what was not written */
    icx_cur.len = 0;
    /* A broken stream's tail, once: no events (they may name strings and threads of the frames
     * lost), the loss counters and END, so that the trace says what it lacks. */
    if (icx_broken && !icx_gone && icx_ended && icx_file_good && !icx_tail_tried++) {
        icx_put_lost(&icx_cur);
        icx_put_end(icx_end_status);
        icx_frame_write(icx_cur.buf, icx_cur.len);
        icx_cur.len = 0;
    }
}

static struct icx_rec_clock icx_first_clock;

static void icx_put_clock(struct icx_frame *f)
{
    struct icx_rec_clock *c = icx_frame_put(f, ICX_REC_CLOCK, 0, sizeof(*c));
    if (c) {
        struct icx_rec_clock now;
        icx_clock_sample(&now);
        /* Measure the tick rate from the first pair: it paces GPU-timing samples. */
        if (!icx_first_clock.mono_ns)
            icx_first_clock = now;
        else if (icx_clock_tsc && now.mono_ns - icx_first_clock.mono_ns > 50000000ull)
            atomic_store_explicit(&icx_ticks_per_us,
                                  (now.ticks - icx_first_clock.ticks) * 1000ull /
                                      (now.mono_ns - icx_first_clock.mono_ns),
                                  memory_order_relaxed);
        c->ticks = now.ticks;
        c->mono_ns = now.mono_ns;
        c->real_ns = now.real_ns;
    }
}

static void icx_put_lost(struct icx_frame *f)
{
    struct icx_rec_lost *l = icx_frame_put(f, ICX_REC_LOST, 0, sizeof(*l));
    if (!l)
        return;
    l->events_recorded = icx_events_written;
    for (int i = 0; i < ICX_LOST_SLOTS; i++)
        l->count[i] = atomic_load(&icx_lost[i]);
}

/* ---- draining the rings ---- */

static const uint8_t icx_category[256] = {
#define ICX_RECORD(id, name, cat, str) [id] = ICX_CAT_##cat,
#include "icx/events.def"
#undef ICX_RECORD
};

struct icx_drain {
    struct icx_frame *f;
    int64_t prev_ts;
    int in_block;
};

static void icx_block_begin(struct icx_drain *d, struct icx_tbuf *b, int64_t base)
{
    struct icx_rec_block *blk = icx_frame_put(d->f, ICX_REC_BLOCK, b->tid, sizeof(*blk));
    if (blk)
        blk->base_ticks = (uint64_t)base;
    d->prev_ts = base;
    d->in_block = 1;
}

static void icx_announce_thread(struct icx_frame *f, struct icx_tbuf *b)
{
    char path[64], name[64] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%u/comm", b->tid);
    FILE *fp = fopen(path, "re");
    if (fp) {
        if (fgets(name, sizeof(name), fp))
            name[strcspn(name, "\n")] = 0;
        fclose(fp);
    }
    uint32_t id = icx_intern(f, name);
    struct icx_rec_thread *t = icx_frame_put(f, ICX_REC_THREAD, b->tid, sizeof(*t));
    if (t)
        t->name = id;
    b->announced = 1;
}

/* A ring-internal record: to the module that wrote it. */
static void icx_ring_record(struct icx_frame *f, const struct icx_rec *r)
{
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->ring_type == r->type && icx_mods[m]->ring_record) {
            icx_mods[m]->ring_record(f, r);
            return;
        }
}

/* An EVENT record: into a block of its thread, delta-encoded; then shown to the modules. */
static void icx_drain_event(struct icx_drain *d, struct icx_tbuf *b, const struct icx_rec *r)
{
    const struct icx_rec_event *ev = (const struct icx_rec_event *)r;
    if (!d->in_block)
        icx_block_begin(d, b, ev->ts);
    struct icx_rec_event *out = icx_frame_put(d->f, r->type, r->aux, r->size);
    if (out) {
        memcpy(out, r, r->size);
        out->ts = ev->ts - d->prev_ts;
        d->prev_ts = ev->ts;
    }
    icx_events_written++;
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->drained)
            icx_mods[m]->drained(d->f, r);
}

/* CLOCK_MONOTONIC when the ring being drained was taken up: what the modules' drained hooks use
 * for "now" (one clock read per ring per drain, not one per record: 20-25 ns each here). */
static uint64_t icx_drain_clock;
uint64_t icx_writer_drain_ns(void)
{
    return icx_drain_clock;
}

static void icx_drain_one(struct icx_tbuf *b, void *ctx)
{
    struct icx_drain *d = ctx;
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->drain_thread)
            icx_mods[m]->drain_thread(d->f, b);
    uint64_t tail = atomic_load_explicit(&b->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&b->head, memory_order_acquire);
    if (tail == head)
        return;
    icx_drain_clock = icx_mono_ns();
    if (!b->announced)
        icx_announce_thread(d->f, b);
    d->in_block = 0;
    while (tail < head) {
        /* Contiguous even across the ring's end: see icx_reserve. */
        const struct icx_rec *r = (const struct icx_rec *)(b->data + (tail & (b->cap - 1)));
        uint32_t size = r->size;
        if (size < sizeof(*r) || (size & 7)) /* cannot happen unless memory was corrupted */
            break;
        if (r->type >= ICX_RING_TYPE_MIN) {
            icx_ring_record(d->f, r);
        } else if (icx_category[r->type & 0xff] == ICX_CAT_EVENT && r->type < 256) {
            icx_drain_event(d, b, r);
        } else {
            void *out = icx_frame_put(d->f, r->type, r->aux, size);
            if (out)
                memcpy(out, r, size);
        }
        tail += size;
        if (d->f->len > ICX_FRAME_MAX) {
            /* Cut the frame here; the next event reopens a block in the new frame. */
            atomic_store_explicit(&b->tail, tail, memory_order_release);
            icx_frame_emit();
            d->in_block = 0;
        }
    }
    atomic_store_explicit(&b->tail, tail, memory_order_release);
}

/* One flush: rings, then each module's records, notes, clock, loss counters -> one frame.
 * Writer lock held. */
/* Every ring into the current frame (cut at ICX_FRAME_MAX).  Writer lock held. */
static void icx_drain_rings(void)
{
    struct icx_drain d = {.f = &icx_cur};
    icx_tbuf_drain_all(icx_drain_one, &d);
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->drain_end)
            icx_mods[m]->drain_end(&icx_cur);
}

static void icx_tick(enum icx_tick_kind kind)
{
    icx_drain_rings();
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->tick)
            icx_mods[m]->tick(&icx_cur, kind);
    icx_notes_put(&icx_cur);
    icx_put_clock(&icx_cur);
    icx_put_lost(&icx_cur);
}

static void icx_put_end(int status)
{
    struct icx_rec_end *e = icx_frame_put(&icx_cur, ICX_REC_END, 0, sizeof(*e));
    if (e)
        e->exit_status = status;
    icx_end_status = status;
    icx_ended = 1;
}

/* The device baselines (modules' devices_begin): asked for by the first traced device call or a
 * statically linked runtime, taken once by the writer.  Writer lock held. */
static _Atomic int icx_devices_req, icx_devices_begun;
static void icx_devices_begin(void)
{
    if (atomic_load(&icx_devices_begun))
        return;
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->devices_begin)
            icx_mods[m]->devices_begin(&icx_cur);
    atomic_store(&icx_devices_begun, 1);
    int fresh = ICX_ON_FRESH;
    atomic_compare_exchange_strong(&icx_active, &fresh, ICX_ON);
}

void icx_writer_want_devices(void)
{
    atomic_store(&icx_devices_req, 1);
}

/* Has the process used anything we trace?  Until it has, the modules' probes ask again. */
static int icx_used_traced_api(void)
{
    if (atomic_load_explicit(&icx_touched, memory_order_relaxed))
        return 1;
    for (size_t m = 0; m < icx_nmods; m++)
        if (icx_mods[m]->probe)
            icx_mods[m]->probe();
    return atomic_load_explicit(&icx_touched, memory_order_relaxed);
}

static void *icx_writer_main(void *arg)
{
    (void)arg;
    icx_self.guard = 1; /* CUDA calls made here are ours, never traced */
    atomic_store(&icx_writer_tid, icx_gettid());
    uint64_t next = icx_mono_ns() + icx_cfg.flush_ms * 1000000ull; /* the next periodic frame */
    while (!atomic_load(&icx_stop)) {
        uint32_t bits = atomic_exchange(&icx_wake_bits, 0);
        uint64_t now = icx_mono_ns();
        if (!bits && now < next) {
            struct timespec ts = {(time_t)((next - now) / 1000000000ull),
                                  (long)((next - now) % 1000000000ull)};
            syscall(SYS_futex, &icx_wake_bits, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
            bits = atomic_exchange(&icx_wake_bits, 0);
        }
        int pressure_only = bits == ICX_WAKE_PRESSURE;
        if (pressure_only && icx_mono_ns() < next && !atomic_load(&icx_stop)) {
            /* A ring is half full before the frame is due: empty every ring into the frame
             * (cut at ICX_FRAME_MAX as always), so a fast thread's events wait in our memory,
             * not in its ring; the frame still closes on time. */
            pthread_mutex_lock(&icx_wlock);
            if (!icx_ended && atomic_load_explicit(&icx_touched, memory_order_relaxed))
                icx_drain_rings();
            pthread_mutex_unlock(&icx_wlock);
            continue;
        }
        next = icx_mono_ns() + icx_cfg.flush_ms * 1000000ull;
        atomic_fetch_add(&icx_begun_gen, 1);
        if (atomic_load(&icx_stop))
            break;
        if (atomic_load(&icx_devices_req) && !atomic_load(&icx_devices_begun)) {
            pthread_mutex_lock(&icx_wlock);
            icx_devices_begin();
            pthread_mutex_unlock(&icx_wlock);
        }
        if (!icx_used_traced_api()) {
            atomic_store(&icx_pending_set, 0); /* nothing to say yet, nor at the end */
            atomic_fetch_add(&icx_flush_gen, 1);
            continue;
        }
        pthread_mutex_lock(&icx_wlock);
        if (!icx_ended) {
            int end = atomic_exchange(&icx_pending_set, 0);
            icx_tick(end ? ICX_TICK_FATAL : ICX_TICK_PERIODIC);
            if (end) /* the process is about to die, exec or _exit */
                icx_put_end(atomic_load(&icx_pending_status));
            icx_frame_emit();
        }
        pthread_mutex_unlock(&icx_wlock);
        atomic_fetch_add(&icx_flush_gen, 1);
    }
    return NULL;
}

static int icx_mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return 0;
}

/* Open the trace file, at the first flush rather than at start: a wrapper that exec()s the real
 * program within ICX_FLUSH_MS (taskset, numactl, env) then leaves no empty trace behind.  Never
 * clobber an existing trace: several processes given one file name (a wrapper script and the
 * program it runs, ranks without %p in ICX_OUTPUT) would truncate each other's frames.  The first
 * process gets the name; any other, or a rerun, gets name.<pid> (name.<pid>NN when that is taken
 * too).  Permissions ICX_MODE, default 0600.  Writer lock held. */
static int icx_open_file(void)
{
    static int failed;
    if (icx_fd >= 0 || failed)
        return icx_fd >= 0 ? 0 : -1;
    icx_mkdirs(icx_cfg.output);
    /* O_EXCL: never an existing file, nor a symlink planted at the name (O_CREAT|O_EXCL does not
     * follow one); O_NOFOLLOW says so again.  Taken: name.<pid>, then name.<pid>01..99. */
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    mode_t mode = (mode_t)(icx_cfg.file_mode ? icx_cfg.file_mode : 0600);
    icx_fd = open(icx_cfg.output, flags, mode);
    size_t l = strlen(icx_cfg.output);
    for (int k = 0; icx_fd < 0 && errno == EEXIST && k < 100; k++) {
        int n = k ? snprintf(icx_cfg.output + l, sizeof(icx_cfg.output) - l, ".%d%02d",
                             (int)getpid(), k)
                  : snprintf(icx_cfg.output + l, sizeof(icx_cfg.output) - l, ".%d", (int)getpid());
        if (n <= 0 || (size_t)n >= sizeof(icx_cfg.output) - l) {
            icx_cfg.output[l] = 0;
            errno = ENAMETOOLONG;
            break;
        }
        icx_fd = open(icx_cfg.output, flags, mode);
    }
    if (icx_fd >= 0 && fstat(icx_fd, &icx_fd_st) != 0)
        memset(&icx_fd_st, 0, sizeof(icx_fd_st)); /* cannot happen; then it never matches */
    if (icx_fd < 0) {
        failed = 1;
        icx_log("cannot open trace output %s: %s; running untraced\n", icx_cfg.output,
                strerror(errno));
        atomic_store(&icx_active, 0); /* the hooks pass straight through from now on */
        icx_cur.len = 0;
        return -1;
    }
    return 0;
}

/* Start a process stream: its header frame (FILE_HEADER, identity, counter baseline, first clock
 * pair) is built now, at start, and written with the first flush.  Writer lock held. */
static int icx_open_stream(void)
{
    if (!icx_cctx)
        icx_cctx = ZSTD_createCCtx();
    if (!icx_cctx)
        return -ENOMEM;
    ZSTD_CCtx_setParameter(icx_cctx, ZSTD_c_compressionLevel, icx_cfg.level);
    ZSTD_CCtx_setParameter(icx_cctx, ZSTD_c_checksumFlag, 1);
    icx_cur.len = 0;
    struct icx_file_header *h = icx_frame_put(&icx_cur, ICX_REC_FILE_HEADER, 0, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->magic = ICX_MAGIC;
    h->version_major = ICX_VERSION_MAJOR;
    h->version_minor = ICX_VERSION_MINOR;
    h->oldest_major = ICX_OLDEST_MAJOR;
    h->oldest_minor = ICX_OLDEST_MINOR;
    h->header_size = sizeof(*h);
    h->features = ICX_FEAT_DELTA | (icx_clock_tsc ? ICX_FEAT_TSC : 0) |
                  (icx_cfg.stack_control ? ICX_FEAT_STACKS : 0);
    uint64_t id;
    if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
        id = icx_ticks() ^ ((uint64_t)getpid() << 32);
    h->stream_id = id;
    for (size_t m = 0; m < icx_nmods; m++) /* identity; counter baselines before any traffic */
        if (icx_mods[m]->stream_begin)
            icx_mods[m]->stream_begin(&icx_cur);
    icx_put_clock(&icx_cur);
    icx_head_len = icx_cur.len;
    icx_file_good = 0;
    icx_broken = icx_tail_tried = icx_gone = icx_warned_write = 0;
    atomic_store(&icx_ended, 0);
    atomic_store(&icx_stream_pid, (int)getpid());
    return 0;
}

/* Wake the writer: async-signal-safe, errno kept. */
static void icx_wake_writer(uint32_t bit)
{
    int saved = errno;
    atomic_fetch_or(&icx_wake_bits, bit);
    syscall(SYS_futex, &icx_wake_bits, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

static int icx_spawn_writer(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&icx_stop, 0);
    int rc = pthread_create(&icx_thread, NULL, icx_writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_setname_np(icx_thread, "icx-writer");
    icx_thread_started = 1;
    return 0;
}

int icx_writer_start(const struct icx_module *const *mods, size_t nmods)
{
    icx_tbuf_set_pressure(icx_writer_wake_pressure);
    icx_mods = mods;
    icx_nmods = nmods;
    pthread_mutex_lock(&icx_wlock);
    int rc = icx_open_stream();
    pthread_mutex_unlock(&icx_wlock);
    if (rc == 0)
        rc = icx_spawn_writer();
    if (rc != 0)
        icx_log("cannot start the writer (%s); running untraced\n", strerror(-rc));
    return rc;
}

/* Remove the trace file we created, if the name is still ours (not replaced meanwhile). */
static void icx_unlink_own(void)
{
    struct stat a, b;
    if (fstat(icx_fd, &a) == 0 && lstat(icx_cfg.output, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        unlink(icx_cfg.output);
}

void icx_writer_stop(int exit_status)
{
    if (icx_thread_started) {
        atomic_store(&icx_stop, 1);
        icx_wake_writer(ICX_WAKE_FRAME);
        pthread_join(icx_thread, NULL);
        icx_thread_started = 0;
    }
    pthread_mutex_lock(&icx_wlock);
    int saved_guard = icx_self.guard;
    icx_self.guard = 1;
    if (!icx_ended && icx_used_traced_api()) {
        if (atomic_load(&icx_devices_req))
            icx_devices_begin(); /* asked for after the writer's last round */
        icx_tick(ICX_TICK_EXIT);
        icx_put_end(exit_status);
        icx_frame_emit(); /* opens the file now for a process that lived less than a flush */
        uint64_t lost = 0;
        for (int i = 0; i < ICX_LOST_SLOTS; i++)
            lost += atomic_load(&icx_lost[i]);
        if (icx_fd >= 0 && icx_broken && !icx_file_good)
            icx_unlink_own(); /* not even the header: no empty file left behind */
        else if (!icx_cfg.quiet && icx_fd >= 0 && !icx_gone)
            icx_log("trace written to %s (%llu events%s)\n", icx_cfg.output,
                    (unsigned long long)icx_events_written,
                    icx_broken ? ", incomplete: writes failed"
                    : lost     ? ", some lost: see icx-analyze"
                               : "");
    }
    if (icx_fd_ours())
        close(icx_fd);
    icx_fd = -1;
    icx_fd_foreign = 0;
    icx_self.guard = saved_guard;
    pthread_mutex_unlock(&icx_wlock);
}

void icx_writer_wake(void)
{
    icx_wake_writer(ICX_WAKE_FRAME);
}

void icx_writer_wake_pressure(void)
{
    icx_wake_writer(ICX_WAKE_PRESSURE);
}

/* Ask the writer for a frame now (END with status when end) and wait for it, bounded (1 s):
 * async-signal-safe, no lock taken.  0 when there is no writer to ask: this thread is the writer,
 * tracing is off, or this is a vfork child (it shares our memory but is not this process). */
static int icx_writer_request(int end, int status)
{
    if (!icx_thread_started || !atomic_load(&icx_active))
        return 0;
    if (atomic_load(&icx_writer_tid) == icx_gettid() ||
        atomic_load(&icx_stream_pid) != (int)getpid())
        return 0;
    if (end) {
        atomic_store(&icx_pending_status, status);
        atomic_store(&icx_pending_set, 1);
    }
    /* Done when a frame begun after this point is written: it saw the request (a frame begun
     * before may not have), and the wake bit, set after, is still unseen when it begins, so
     * one begins at once.  Waiting for the next periodic frame instead cost up to ICX_FLUSH_MS. */
    unsigned began = atomic_load(&icx_begun_gen);
    icx_wake_writer(ICX_WAKE_FRAME);
    for (int i = 0; i < 10000 && (int)(atomic_load(&icx_flush_gen) - began) < 1; i++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return 1;
}

void icx_writer_first_device_call(void)
{
    if (!icx_thread_started || atomic_load(&icx_stream_pid) != (int)getpid())
        return; /* no writer to ask (a vfork child shares our memory) */
    atomic_store(&icx_devices_req, 1);
    icx_writer_wake();
    for (int i = 0; i < 40000 && !atomic_load(&icx_devices_begun); i++) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    int fresh = ICX_ON_FRESH;
    if (!atomic_load(&icx_devices_begun) &&
        atomic_compare_exchange_strong(&icx_active, &fresh, ICX_ON))
        icx_note(1, "the first traced device call waited 2 s for the writer to take the hardware "
                    "counter baselines and went on without them: NVLink and NIC counters may miss "
                    "its traffic");
}

void icx_writer_flush_from_signal(int signo, int will_die)
{
    icx_writer_request(will_die, 128 + signo);
}

int icx_writer_end_now(int status)
{
    return icx_writer_request(1, status);
}

void icx_writer_resume(void)
{
    atomic_store(&icx_ended, 0);
}

static void icx_writer_fork_prepare(void)
{
    pthread_mutex_lock(&icx_wlock);
}

static void icx_writer_fork_parent(void)
{
    pthread_mutex_unlock(&icx_wlock);
}

/* The last of the child handlers (first in the table): every other module is reset by now. */
static void icx_writer_fork_child(void)
{
    pthread_mutex_init(&icx_wlock, NULL);
    icx_thread_started = 0;
    atomic_store(&icx_begun_gen, atomic_load(&icx_flush_gen)); /* a frame the fork cut short */
    atomic_store(&icx_wake_bits, 0);
    if (icx_fd_ours())
        close(icx_fd); /* the parent's stream stays the parent's */
    icx_fd = -1;
    icx_fd_foreign = 0;
    icx_cur.len = 0;
    icx_events_written = 0;
    atomic_store(&icx_touched, 0); /* the child's own use decides its trace */
    if (!icx_cfg.follow_fork || !atomic_load(&icx_active)) {
        atomic_store(&icx_active, 0);
        return;
    }
    /* A child of its own: a new file named for the child's pid. */
    if (icx_output_resolve(1) != 0 || icx_open_stream() != 0 || icx_spawn_writer() != 0)
        atomic_store(&icx_active, 0);
}

const struct icx_module icx_mod_writer = {
    .name = "writer",
    .fork_prepare = icx_writer_fork_prepare,
    .fork_parent = icx_writer_fork_parent,
    .fork_child = icx_writer_fork_child,
};
