/* The hang watchdog and on-demand dumps.  Every flush the writer compares the age of the oldest
 * traced work still pending (an NCCL call that has not returned, GPU work whose end event has not
 * fired) and the time since the last NCCL call with the threshold (ICX_HANG_S); past it, or on
 * SIGUSR2, or when the ICX_DUMP file is touched, it records once per episode what every thread of
 * the process is doing: its kernel state from /proc (state, syscall, wchan), its native stack
 * (each thread is signalled and unwinds itself with libunwind into memory allocated beforehand;
 * the writer symbolizes) and, in a CPython process, the Python stacks of all threads through
 * faulthandler's own dumper.  The frame is written at once, so a SIGKILL that follows loses none
 * of it.  Nothing here runs unless a dump is due: the hot paths are untouched (the writer learns
 * of NCCL calls from the records it drains anyway). */
#define UNW_LOCAL_ONLY /* this process only: the _UL entry points, no remote unwinding */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dlreal.h"
#include "frame.h"
#include "gpu.h"
#include "module.h"
#include "signals.h"
#include "stack.h"
#include "writer.h"

#define ICX_DUMP_DEPTH 64     /* frames per thread */
#define ICX_DUMP_THREADS 1024 /* threads per dump; more are listed without a stack */
#define ICX_INFLIGHT 64       /* NCCL calls entered and not yet returned, tracked at once */
#define ICX_RECENT 256        /* recent calls' GPU span ids, to name the pending one */
#define ICX_PY_MAX (1u << 20) /* bytes of Python stacks kept per dump */
#define ICX_MIN_CALLS 4       /* calls before "no NCCL call for too long" can fire */
#define ICX_AUTO_FLOOR_NS 60000000000ull

/* ---- the signal a thread answers with its own stack ---- */
enum { SLOT_IDLE, SLOT_ASKED, SLOT_WRITING, SLOT_DONE };
struct icx_tslot {
    _Atomic int tid, state;
    int depth;
    uint64_t pthread;
    uint64_t pc[ICX_DUMP_DEPTH];
};
static struct icx_tslot *_Atomic icx_slots; /* allocated at the first dump, never freed */
static _Atomic int icx_nslots;
static int icx_dump_sig; /* 0: none chosen yet */

/* Not instrumented by TSan: installed through the C library's own sigaction (signals.c), behind
 * TSan's back, it runs at once on delivery -- possibly inside a TSan interceptor, whose runtime
 * is not reentrant -- instead of at the safe point where TSan runs the handlers it installed.
 * Its hand-over to the writer is the slot's atomic state (ASKED -> WRITING -> DONE). */
__attribute__((no_sanitize("thread"))) static void icx_dump_handler(int signo, siginfo_t *si,
                                                                    void *uctx)
{
    (void)signo;
    (void)si;
    int saved = errno;
    struct icx_tslot *s = atomic_load(&icx_slots);
    int n = atomic_load(&icx_nslots), me = (int)syscall(SYS_gettid);
    for (int i = 0; s && i < n; i++) {
        int asked = SLOT_ASKED;
        if (atomic_load(&s[i].tid) != me ||
            !atomic_compare_exchange_strong(&s[i].state, &asked, SLOT_WRITING))
            continue;
        unw_cursor_t c;
        int d = 0;
        if (unw_init_local2(&c, (unw_context_t *)uctx, UNW_INIT_SIGNAL_FRAME) == 0) {
            do {
                unw_word_t ip = 0;
                if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || !ip)
                    break;
                s[i].pc[d++] = (uint64_t)ip;
            } while (d < ICX_DUMP_DEPTH && unw_step(&c) > 0);
        }
        s[i].depth = d;
        s[i].pthread = (uint64_t)pthread_self();
        atomic_store(&s[i].state, SLOT_DONE);
        break;
    }
    errno = saved;
}

/* A real-time signal the job leaves at its default (or ours already): never one the job uses, and
 * the job keeps seeing SIG_DFL there (signals.c). */
static int icx_dump_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = icx_dump_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (icx_dump_sig && icx_sig_claim(icx_dump_sig, &sa))
        return icx_dump_sig; /* stays installed: a late answer must not kill the job */
    for (int sig = SIGRTMAX - 2; sig > SIGRTMIN + 2; sig--)
        if (icx_sig_claim(sig, &sa))
            return icx_dump_sig = sig;
    return icx_dump_sig = 0;
}

/* ---- what the writer learns from the records it drains ---- */
struct icx_inflight {
    int64_t ts; /* entry ticks: with api, the key of the entry/return pair */
    uint32_t api;
    uint64_t comm, seq, since_ns; /* since_ns: when the writer first saw it */
};
struct icx_recent {
    uint32_t gpu_id, api;
    uint64_t comm, seq;
};
static struct icx_inflight icx_inflight[ICX_INFLIGHT];
static int icx_ninflight;
static struct icx_recent icx_recent[ICX_RECENT];
static unsigned icx_nrecent;
static uint64_t icx_calls, icx_last_call_ns; /* NCCL call entries seen, and when the last was */
static int64_t icx_last_entry_ts;
static uint64_t icx_gap_hist[64]; /* log2 histogram of gaps between call entries, in ns */
static uint64_t icx_gaps;

static uint64_t icx_ticks_to_ns(uint64_t t)
{
    uint64_t per_us = atomic_load_explicit(&icx_ticks_per_us, memory_order_relaxed);
    return per_us ? t * 1000 / per_us : t;
}

static void icx_hang_drained(struct icx_frame *f, const struct icx_rec *r)
{
    (void)f;
    if (r->type != ICX_REC_NCCL_CALL)
        return;
    const struct icx_rec_nccl_call *c = (const struct icx_rec_nccl_call *)r;
    uint32_t api = r->aux & 0xffff;
    int pending = (r->aux >> ICX_EVF_SHIFT) & ICX_EVF_PENDING;
    uint64_t now = icx_writer_drain_ns();
    if (pending) {
        if (icx_calls++ && c->e.ts > icx_last_entry_ts) {
            uint64_t gap = icx_ticks_to_ns((uint64_t)(c->e.ts - icx_last_entry_ts));
            icx_gap_hist[gap ? 63 - __builtin_clzll(gap) : 0]++;
            icx_gaps++;
        }
        icx_last_entry_ts = c->e.ts;
        icx_last_call_ns = now;
        if (icx_ninflight < ICX_INFLIGHT)
            icx_inflight[icx_ninflight++] =
                (struct icx_inflight){c->e.ts, api, c->comm, c->seq, now};
        return;
    }
    icx_last_call_ns = now;
    for (int i = 0; i < icx_ninflight; i++)
        if (icx_inflight[i].ts == c->e.ts && icx_inflight[i].api == api) {
            icx_inflight[i] = icx_inflight[--icx_ninflight];
            break;
        }
    if (c->gpu_id)
        icx_recent[icx_nrecent++ % ICX_RECENT] =
            (struct icx_recent){c->gpu_id, api, c->comm, c->seq};
}

/* The threshold: ICX_HANG_S, or max(60 s, 20 x the p99 gap between this process's NCCL calls). */
static uint64_t icx_threshold_ns(void)
{
    if (icx_cfg.hang_s > 0)
        return (uint64_t)icx_cfg.hang_s * 1000000000ull;
    uint64_t p99 = 0, seen = 0;
    for (int b = 0; b < 64 && icx_gaps; b++) {
        seen += icx_gap_hist[b];
        if (seen * 100 >= icx_gaps * 99) {
            p99 = b < 63 ? 2ull << b : UINT64_MAX / 40; /* the bucket's upper bound */
            break;
        }
    }
    return 20 * p99 > ICX_AUTO_FLOOR_NS ? 20 * p99 : ICX_AUTO_FLOOR_NS;
}

/* ---- triggers ---- */
static _Atomic int icx_sigusr2;
static struct timespec icx_request_mtime;
static uint64_t icx_episode_key; /* the since_ns of the condition last dumped for */
static uint32_t icx_episodes;
static uint64_t icx_last_dump_ns;

static void icx_usr2_handler(int signo)
{
    (void)signo;
    atomic_store(&icx_sigusr2, 1);
    icx_writer_wake();
}

static int icx_request_changed(void)
{
    struct stat st;
    if (!icx_cfg.dump_path[0] || stat(icx_cfg.dump_path, &st) != 0)
        return 0;
    if (st.st_mtim.tv_sec == icx_request_mtime.tv_sec &&
        st.st_mtim.tv_nsec == icx_request_mtime.tv_nsec)
        return 0;
    icx_request_mtime = st.st_mtim;
    return 1;
}

/* The watchdog fired here: ask every process that watches the same ICX_DUMP file to dump too. */
static void icx_request_touch(void)
{
    if (!icx_cfg.dump_path[0])
        return;
    int fd = open(icx_cfg.dump_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    struct stat st;
    if (futimens(fd, NULL) == 0 && fstat(fd, &st) == 0)
        icx_request_mtime = st.st_mtim;
    close(fd);
}

static void icx_hang_init(void)
{
    struct stat st;
    if (icx_cfg.dump_path[0] && stat(icx_cfg.dump_path, &st) == 0)
        icx_request_mtime = st.st_mtim; /* an old request is not a new one */
    /* SIGUSR2 asks for a dump, unless the job has its own use for it. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = icx_usr2_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    icx_sig_claim(SIGUSR2, &sa);
}

/* ---- the dump ---- */
static int icx_read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n > 0 ? 0 : -1;
}

struct icx_tinfo {
    int tid, syscall, blocked;
    char state, name[32], wchan[64];
    uint64_t arg0;
};

static void icx_thread_info(struct icx_tinfo *t, int sig)
{
    char path[64], buf[1024];
    t->state = '?';
    t->syscall = -2;
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", t->tid);
    const char *rp = icx_read_small(path, buf, sizeof(buf)) == 0 ? strrchr(buf, ')') : NULL;
    if (rp && rp[1] == ' ')
        t->state = rp[2];
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", t->tid);
    if (icx_read_small(path, t->name, sizeof(t->name)) == 0)
        t->name[strcspn(t->name, "\n")] = 0;
    snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", t->tid);
    if (icx_read_small(path, t->wchan, sizeof(t->wchan)) != 0 || strcmp(t->wchan, "0") == 0)
        t->wchan[0] = 0;
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", t->tid);
    if (icx_read_small(path, buf, sizeof(buf)) == 0) {
        if (strncmp(buf, "running", 7) == 0) {
            t->syscall = -1;
        } else {
            char *end;
            long nr = strtol(buf, &end, 10);
            if (end != buf) {
                t->syscall = (int)nr;
                t->arg0 = strtoull(end, NULL, 16);
            }
        }
    }
    snprintf(path, sizeof(path), "/proc/self/task/%d/status", t->tid);
    const char *blk = icx_read_small(path, buf, sizeof(buf)) == 0 ? strstr(buf, "SigBlk:") : NULL;
    if (blk && sig > 0) {
        unsigned long long mask = strtoull(blk + 7, NULL, 16);
        t->blocked = (int)((mask >> (sig - 1)) & 1);
    }
}

/* The process's threads, from /proc/self/task (at most max). */
static int icx_list_threads(struct icx_tinfo *out, int max)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < max)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            out[n++] = (struct icx_tinfo){.tid = atoi(e->d_name)};
    if (d)
        closedir(d);
    return n;
}

/* Signal each thread (not the writer, not those blocking the signal) and wait for the answers,
 * at most half a second in all. */
static void icx_collect_stacks(struct icx_tinfo *ti, int n, int sig, int writer)
{
    struct icx_tslot *s = atomic_load(&icx_slots);
    for (int i = 0; i < n; i++) {
        atomic_store(&s[i].state, SLOT_IDLE);
        atomic_store(&s[i].tid, ti[i].tid);
        s[i].depth = 0;
    }
    atomic_store(&icx_nslots, n);
    pid_t pid = getpid();
    for (int i = 0; i < n; i++) {
        if (ti[i].tid == writer || ti[i].blocked || !sig)
            continue;
        atomic_store(&s[i].state, SLOT_ASKED);
        if (syscall(SYS_tgkill, pid, ti[i].tid, sig) != 0)
            atomic_store(&s[i].state, SLOT_IDLE); /* gone since the listing */
    }
    for (int waited = 0; waited < 500; waited++) {
        int busy = 0;
        for (int i = 0; i < n; i++)
            busy |=
                atomic_load(&s[i].state) == SLOT_ASKED || atomic_load(&s[i].state) == SLOT_WRITING;
        if (!busy)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* Late answers find no slot asked of them; one still writing keeps its slot array. */
    for (int i = 0; i < n; i++) {
        int asked = SLOT_ASKED;
        atomic_compare_exchange_strong(&s[i].state, &asked, SLOT_IDLE);
        if (atomic_load(&s[i].state) == SLOT_WRITING) {
            atomic_store(&icx_slots, (struct icx_tslot *)NULL); /* a new array next time */
            break;
        }
    }
}

typedef const char *(*icx_py_dump_t)(int fd, void *interp, void *tstate);

/* CPython's own dumper (the one faulthandler.dump_traceback_later runs from its watchdog thread,
 * without the GIL) into a memory file, then into the trace.  0: not CPython; 1: written; 2: a
 * CPython without it. */
static int icx_python_stacks(struct icx_frame *f, uint32_t episode)
{
    int (*initialized)(void) = (int (*)(void))icx_real_dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (!initialized || !initialized())
        return 0;
    icx_py_dump_t dump = (icx_py_dump_t)icx_real_dlsym(RTLD_DEFAULT, "_Py_DumpTracebackThreads");
    int fd = dump ? memfd_create("icx-python-stacks", MFD_CLOEXEC) : -1;
    if (fd < 0)
        return 2;
    dump(fd, NULL, NULL);
    off_t len = lseek(fd, 0, SEEK_END);
    len = len > (off_t)ICX_PY_MAX ? (off_t)ICX_PY_MAX : len;
    char *text = len > 0 ? malloc((size_t)len + 1) : NULL;
    ssize_t got = text ? pread(fd, text, (size_t)len, 0) : -1;
    close(fd);
    if (got <= 0) {
        free(text);
        return 2;
    }
    text[got] = 0;
    size_t nparts = ((size_t)got + ICX_PART_BYTES - 1) / ICX_PART_BYTES;
    for (size_t i = 0; i < nparts; i++) {
        uint32_t id = icx_intern_part(f, text, (size_t)got, i);
        struct icx_rec_py_stacks *r = icx_frame_put(f, ICX_REC_PY_STACKS, episode, sizeof(*r));
        if (r) {
            r->text = id;
            r->part = (uint32_t)i;
            r->nparts = (uint32_t)nparts;
        }
    }
    free(text);
    return 1;
}

static void icx_dump(struct icx_frame *f, int reason, uint64_t age, uint64_t threshold,
                     const struct icx_recent *call)
{
    static struct icx_tinfo ti[ICX_DUMP_THREADS];
    uint32_t episode = ++icx_episodes;
    uint64_t t = icx_mono_ns();
    int sig = icx_dump_signal();
    if (sig && !atomic_load(&icx_slots)) {
        struct icx_tslot *s = calloc(ICX_DUMP_THREADS, sizeof(*s));
        atomic_store(&icx_slots, s);
        if (!s)
            sig = 0;
    }
    int n = icx_list_threads(ti, ICX_DUMP_THREADS), writer = icx_gettid();
    for (int i = 0; i < n; i++)
        icx_thread_info(&ti[i], sig); /* before the signal disturbs them */
    if (sig)
        icx_collect_stacks(ti, n, sig, writer);
    struct icx_tslot *s = sig ? atomic_load(&icx_slots) : NULL;
    struct icx_rec_hang_dump *h = icx_frame_put(f, ICX_REC_HANG_DUMP, (uint32_t)reason, sizeof(*h));
    if (h) {
        h->episode = episode;
        h->nthreads = (uint32_t)n;
        h->mono_ns = t;
        h->age_ns = age;
        h->threshold_ns = threshold;
        if (call) {
            h->comm = call->comm;
            h->seq = call->seq;
            h->api = call->api;
        }
    }
    for (int i = 0; i < n; i++) {
        int done = s && atomic_load(&s[i].state) == SLOT_DONE && s[i].depth > 0;
        uint32_t stack = done ? icx_stack_define(f, s[i].pc, (uint32_t)s[i].depth) : 0;
        uint32_t name = icx_intern(f, ti[i].name), wchan = icx_intern(f, ti[i].wchan);
        struct icx_rec_thread_state *r =
            icx_frame_put(f, ICX_REC_THREAD_STATE, (uint32_t)ti[i].tid, sizeof(*r));
        if (!r)
            continue;
        r->episode = episode;
        r->name = name;
        r->wchan = wchan;
        r->stack = stack;
        r->syscall = ti[i].syscall;
        r->state = (uint8_t)ti[i].state;
        r->stack_status = ti[i].tid == writer ? ICX_TSTACK_WRITER
                          : stack             ? ICX_TSTACK_OK
                          : ti[i].blocked     ? ICX_TSTACK_BLOCKED
                          : s && !done && atomic_load(&s[i].state) != SLOT_DONE
                              ? ICX_TSTACK_NO_ANSWER
                              : ICX_TSTACK_NONE;
        r->pthread = done ? s[i].pthread : 0;
        r->arg0 = ti[i].arg0;
    }
    icx_stack_symbolize_new(f); /* these stacks and the traced calls' before them, now */
    int py = icx_python_stacks(f, episode);
    if (h)
        h->python = (uint32_t)py;
    icx_last_dump_ns = icx_mono_ns();
    icx_debug("hang dump %u (reason %d): %d threads in %.1f ms\n", episode, reason, n,
              (double)(icx_last_dump_ns - t) / 1e6);
}

/* Each periodic flush: is a dump due? */
static void icx_hang_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    if (kind != ICX_TICK_PERIODIC || icx_cfg.hang_s == 0)
        return;
    uint64_t now = icx_mono_ns(), threshold = icx_threshold_ns();
    /* the oldest pending work: a call not returned, or GPU work not finished */
    uint64_t oldest = 0;
    struct icx_recent call = {0}, *which = NULL;
    for (int i = 0; i < icx_ninflight; i++)
        if (!oldest || icx_inflight[i].since_ns < oldest) {
            oldest = icx_inflight[i].since_ns;
            call = (struct icx_recent){0, icx_inflight[i].api, icx_inflight[i].comm,
                                       icx_inflight[i].seq};
            which = &call;
        }
    uint32_t gid = 0;
    uint64_t gsince = icx_gpu_oldest_pending(&gid);
    if (gsince && (!oldest || gsince < oldest)) {
        oldest = gsince;
        which = NULL;
        for (unsigned i = 0; i < ICX_RECENT && i < icx_nrecent; i++)
            if (icx_recent[i].gpu_id == gid)
                which = &icx_recent[i];
    }
    int reason = 0;
    uint64_t key = 0, age = 0;
    if (oldest && now - oldest > threshold) {
        reason = ICX_DUMP_PENDING;
        key = oldest;
        age = now - oldest;
    } else if (!oldest && icx_calls >= ICX_MIN_CALLS && now - icx_last_call_ns > threshold) {
        reason = ICX_DUMP_IDLE;
        key = icx_last_call_ns;
        age = now - icx_last_call_ns;
        which = NULL;
    }
    if (reason && key != icx_episode_key) { /* once per episode */
        icx_episode_key = key;
        icx_dump(f, reason, age, threshold, which);
        icx_request_touch();
        return;
    }
    int usr2 = atomic_exchange(&icx_sigusr2, 0);
    /* a request right after our own dump (another rank's watchdog answering ours) is the same */
    if (icx_request_changed() && now - icx_last_dump_ns > 2000000000ull)
        icx_dump(f, ICX_DUMP_REQUEST, 0, threshold, NULL);
    else if (usr2)
        icx_dump(f, ICX_DUMP_SIGNAL, 0, threshold, NULL);
}

static void icx_hang_fork_child(void)
{
    icx_ninflight = 0;
    icx_nrecent = 0;
    icx_calls = 0;
    icx_episode_key = 0;
}

const struct icx_module icx_mod_hang = {
    .name = "hang",
    .init = icx_hang_init,
    .drained = icx_hang_drained,
    .tick = icx_hang_tick,
    .fork_child = icx_hang_fork_child,
};
