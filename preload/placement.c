/* Where the job's threads and pinned memory really are, sampled by the writer thread (nothing on
 * the hot path): the host's NUMA nodes and their CPUs (sysfs under ICX_SYSFS_ROOT), every thread's
 * last CPU each flush (/proc/self/task/N/stat, so threads that never call a hooked function, such
 * as NCCL's proxy threads, are seen too), each thread's CPU affinity when it changes, and the NUMA
 * node of a sample of each pinned host buffer's pages (move_pages). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "frame.h"
#include "module.h"
#include "placement.h"
#include "runtime.h"
#include "sysfs.h"

#define ICX_MAX_CPUS 4096
#define ICX_MAX_NODES 64
#define ICX_MAX_SAMPLED_THREADS 8000

static int16_t icx_cpu_node[ICX_MAX_CPUS]; /* -1 unknown */
static int icx_nodes_loaded;

/* Parse a kernel CPU list ("0-3,8,10-11") into a callback per CPU. */
static void icx_cpulist_each(const char *s, void (*fn)(int cpu, void *ctx), void *ctx)
{
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s)
            return;
        if (*end == '-') {
            s = end + 1;
            b = strtol(s, &end, 10);
            if (end == s)
                return;
        }
        for (long c = a; c <= b && c < ICX_MAX_CPUS; c++)
            if (c >= 0)
                fn((int)c, ctx);
        s = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
}

static void icx_set_node(int cpu, void *ctx)
{
    icx_cpu_node[cpu] = (int16_t)(intptr_t)ctx;
}

/* NUMA nodes and their CPUs, once: NUMA_NODE records and the CPU -> node table. */
static void icx_load_nodes(struct icx_frame *f)
{
    icx_nodes_loaded = 1;
    for (int c = 0; c < ICX_MAX_CPUS; c++)
        icx_cpu_node[c] = -1;
    for (int n = 0; n < ICX_MAX_NODES; n++) {
        char rel[96], cpus[4096];
        snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%d/cpulist", n);
        if (icx_sysfs_read_path(rel, cpus, sizeof(cpus)) != 0)
            continue;
        icx_cpulist_each(cpus, icx_set_node, (void *)(intptr_t)n);
        uint32_t id = icx_intern(f, cpus);
        struct icx_rec_numa_node *r = icx_frame_put(f, ICX_REC_NUMA_NODE, (uint32_t)n, sizeof(*r));
        if (r)
            r->cpus = id;
    }
}

static int icx_node_of_cpu(int cpu)
{
    return cpu >= 0 && cpu < ICX_MAX_CPUS ? icx_cpu_node[cpu] : -1;
}

/* Threads' stat files, kept open (sysfs.h's icx_kept), direct-mapped by thread id: a job's
 * threads keep their ids, so each flush costs a pread per thread, not an open and a close.  A
 * collision or a thread's exit costs an open. */
#define ICX_STAT_KEPT 128
static struct icx_stat_kept {
    int tid;
    struct icx_kept k;
} icx_stat_kept[ICX_STAT_KEPT];

static void icx_stat_kept_reset(void)
{
    for (int i = 0; i < ICX_STAT_KEPT; i++) {
        if (icx_stat_kept[i].tid)
            icx_kept_close(&icx_stat_kept[i].k);
        icx_stat_kept[i].tid = 0;
        icx_stat_kept[i].k = (struct icx_kept)ICX_KEPT_INIT;
    }
}

/* The CPU a thread last ran on: field 39 of /proc/self/task/TID/stat. */
static int icx_thread_cpu(int tid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    struct icx_stat_kept *e = &icx_stat_kept[(unsigned)tid % ICX_STAT_KEPT];
    if (e->tid != tid) {
        if (e->tid)
            icx_kept_close(&e->k);
        else
            e->k = (struct icx_kept)ICX_KEPT_INIT;
        e->tid = tid;
    }
    long n = icx_kept_read(&e->k, path, 0, buf, sizeof(buf)); /* no stdio: no allocation */
    if (n <= 0)
        return -1;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p)
        return -1;
    int field = 2;
    for (p++; *p && field < 39; p++)
        if (*p == ' ')
            field++;
    return field == 39 ? atoi(p) : -1;
}

/* ---- affinity, reported when it changes ---- */
struct icx_aff {
    int tid;
    uint32_t cpus_id;
};
static struct icx_aff *icx_affs;
static size_t icx_naffs, icx_cap_affs;

struct icx_mask_ctx {
    uint64_t nodes;
};

static void icx_aff_node(int cpu, void *ctx)
{
    int n = icx_node_of_cpu(cpu);
    if (n >= 0 && n < 64)
        ((struct icx_mask_ctx *)ctx)->nodes |= 1ull << n;
}

static void icx_affinity(struct icx_frame *f, int tid)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(tid, sizeof(set), &set) != 0)
        return;
    char list[4096];
    size_t o = 0;
    list[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && o + 16 < sizeof(list); c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
            e++;
        o += (size_t)snprintf(list + o, sizeof(list) - o, o ? ",%d" : "%d", c);
        if (e > c)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "-%d", e);
        c = e;
    }
    uint32_t id = icx_intern(f, list);
    size_t i;
    for (i = 0; i < icx_naffs; i++)
        if (icx_affs[i].tid == tid)
            break;
    if (i < icx_naffs && icx_affs[i].cpus_id == id)
        return;
    if (i == icx_naffs) {
        if (icx_naffs == icx_cap_affs) {
            size_t ncap = icx_cap_affs ? icx_cap_affs * 2 : 64;
            struct icx_aff *n = realloc(icx_affs, ncap * sizeof(*n));
            if (!n)
                return;
            icx_affs = n;
            icx_cap_affs = ncap;
        }
        icx_affs[icx_naffs++].tid = tid;
    }
    icx_affs[i].cpus_id = id;
    struct icx_mask_ctx m = {0};
    icx_cpulist_each(list, icx_aff_node, &m);
    struct icx_rec_thread_affinity *r =
        icx_frame_put(f, ICX_REC_THREAD_AFFINITY, (uint32_t)tid, sizeof(*r));
    if (r) {
        r->cpus = id;
        r->node_mask = m.nodes;
    }
}

/* The process's task directory stays open: rewinddir reads it afresh (a new getdents from the
 * start).  Opened through /proc/self, so a fork child opens its own.  Like icx_kept, checked
 * before each use to be still ours: a job that closed it and reused the number would have its
 * file rewound (test_job_closing_every_descriptor caught that); one that is not is dropped, its
 * few bytes of memory left, never closed. */
static DIR *icx_task_dir;
static struct stat icx_task_dir_st;

static int icx_task_dir_ours(void)
{
    struct stat st;
    return icx_task_dir && fstat(dirfd(icx_task_dir), &st) == 0 &&
           st.st_dev == icx_task_dir_st.st_dev && st.st_ino == icx_task_dir_st.st_ino;
}

static DIR *icx_task_dir_get(void)
{
    if (icx_task_dir_ours()) {
        rewinddir(icx_task_dir);
        return icx_task_dir;
    }
    icx_task_dir = opendir("/proc/self/task");
    if (icx_task_dir && fstat(dirfd(icx_task_dir), &icx_task_dir_st) != 0) {
        closedir(icx_task_dir);
        icx_task_dir = NULL;
    }
    return icx_task_dir;
}

static void icx_task_dir_close(void)
{
    if (icx_task_dir_ours())
        closedir(icx_task_dir);
    icx_task_dir = NULL;
}

/* Writer, every flush: one CPU_SAMPLES record for all threads but the writer itself. */
static void icx_placement_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    (void)kind;
    if (!icx_nodes_loaded)
        icx_load_nodes(f);
    DIR *d = icx_task_dir_get();
    if (!d)
        return;
    static struct icx_cpu_sample samples[ICX_MAX_SAMPLED_THREADS];
    uint32_t n = 0;
    int self = icx_gettid();
    struct dirent *e;
    while ((e = readdir(d)) && n < ICX_MAX_SAMPLED_THREADS) {
        int tid = atoi(e->d_name);
        if (tid <= 0 || tid == self)
            continue;
        int cpu = icx_thread_cpu(tid);
        if (cpu < 0)
            continue; /* exited meanwhile */
        samples[n++] =
            (struct icx_cpu_sample){(uint32_t)tid, (uint16_t)cpu, (int16_t)icx_node_of_cpu(cpu)};
        icx_affinity(f, tid);
    }
    struct icx_rec_cpu_samples *r = icx_frame_put(
        f, ICX_REC_CPU_SAMPLES, n, sizeof(*r) + (size_t)n * sizeof(struct icx_cpu_sample));
    if (r) {
        r->mono_ns = icx_mono_ns();
        memcpy(r + 1, samples, (size_t)n * sizeof(struct icx_cpu_sample));
    }
}

/* Where the pages of a pinned host buffer live, from up to 64 pages spread over it, into the
 * HOST_NUMA record r.  move_pages with no target nodes only reports each page's node.  0, or -1. */
int icx_placement_host_buffer(struct icx_rec_host_numa *r, uint64_t ptr, uint64_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!ptr || !bytes || page <= 0)
        return -1;
    uint64_t first = ptr & ~(uint64_t)(page - 1), npages = (ptr + bytes - first + page - 1) / page;
    void *pages[64];
    int status[64];
    unsigned n = npages < 64 ? (unsigned)npages : 64;
    for (unsigned i = 0; i < n; i++)
        pages[i] = (void *)(uintptr_t)(first + (npages * i / n) * (uint64_t)page);
    int saved = errno;
    long rc = syscall(SYS_move_pages, 0, (unsigned long)n, pages, NULL, status, 0);
    errno = saved;
    int count[ICX_MAX_NODES] = {0};
    uint64_t mask = 0;
    unsigned known = 0;
    for (unsigned i = 0; rc == 0 && i < n; i++)
        if (status[i] >= 0 && status[i] < ICX_MAX_NODES) {
            count[status[i]]++;
            mask |= 1ull << status[i];
            known++;
        }
    int best = -1;
    for (int i = 0; i < ICX_MAX_NODES; i++)
        if (count[i] && (best < 0 || count[i] > count[best]))
            best = i;
    memset(r, 0, sizeof(*r));
    r->h.type = ICX_REC_HOST_NUMA;
    r->h.size = sizeof(*r);
    r->ptr = ptr;
    r->bytes = bytes;
    r->pages_sampled = known;
    r->node = best;
    r->node_mask = mask;
    return 0;
}

/* A traced child's stream names the nodes and affinities again. */
static void icx_placement_fork_child(void)
{
    icx_nodes_loaded = 0;
    icx_naffs = 0;
    icx_stat_kept_reset(); /* the parent's threads' files */
    icx_task_dir_close();
}

const struct icx_module icx_mod_placement = {
    .name = "placement",
    .tick = icx_placement_tick,
    .fork_child = icx_placement_fork_child,
};
