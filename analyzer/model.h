/* The analyzer's model of a trace: per process, the tables the decoders fill (decode_*.c) and the
 * reports read (report_*.c), with the small API both use.  It knows neither the file format's
 * framing (reader.c) nor any report. */
#ifndef ICX_MODEL_H
#define ICX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "icx/trace_format.h"

#define ICX_RD_MAX_DEV 64

/* -1, 0, 1 as a < b, a == b, a > b: for comparators (a - b overflows on values from a file). */
static inline int icx_cmp_int(long long a, long long b)
{
    return (a > b) - (a < b);
}

struct icx_copy {
    uint32_t api, tid;
    uint32_t stack_id; /* 0: no stack recorded */
    uint32_t flags;    /* ICX_EVF_* */
    int32_t src, dst, result;
    uint32_t copy_id;
    uint64_t bytes, stream;
    int64_t ts, dur;           /* ticks while reading; ns (monotonic) after finish */
    double t_enter, t_exit;    /* host monotonic seconds */
    double gpu_start, gpu_end; /* host monotonic seconds; 0 when not GPU-timed */
};

struct icx_span {
    uint32_t copy_id, flags; /* ICX_SPAN_*: nonzero for work unfinished when the trace ended */
    uint64_t start_ns, end_ns;
};

struct icx_stack_def {
    uint32_t id, depth;
    uint64_t *pc; /* innermost first */
};

struct icx_symbol {
    uint64_t addr;
    char *text;
};

struct icx_clockpt {
    uint64_t ticks, mono_ns, real_ns;
};

struct icx_rd_device {
    int present;
    char name[128], bus[32];
    int numa;
    char local_cpus[256]; /* "" unknown (format 1.0 traces) */
};

#define ICX_RD_MAX_NODES 64
/* A NUMA node from a trace, made safe to index with: out of range is unknown (-1). */
/* a - b of two counts from a trace, saturated to long long (a crafted trace may hold anything) */
static inline long long icx_sub_sat(uint64_t a, uint64_t b)
{
    uint64_t m = a > b ? a - b : b - a;
    long long d = m > (uint64_t)0x7fffffffffffffffull ? 0x7fffffffffffffffll : (long long)m;
    return a > b ? d : -d;
}
static inline int icx_node_or_unknown(long long node)
{
    return node >= 0 && node < ICX_RD_MAX_NODES ? (int)node : -1;
}

/* A thread of the process: name, where it was allowed and where it was seen running. */
struct icx_rd_thread {
    uint32_t tid;
    char name[32];
    char affinity[256];
    uint64_t affinity_nodes;
    uint64_t samples, node_samples[ICX_RD_MAX_NODES], unknown_samples;
    uint64_t cuda_events; /* events it recorded: it drives the GPU */
};

struct icx_host_buffer {
    uint64_t ptr, bytes;
    int node; /* -1 unknown */
    uint32_t pages_sampled;
};

#define ICX_RD_MAX_NICS 64
struct icx_rd_nic {
    int present;
    char name[64], bus[32];
    int numa;
    unsigned link_layer, active;
    uint32_t rate_mbps;
    unsigned path[ICX_RD_MAX_DEV]; /* enum icx_pci_path to each CUDA device, 0 unknown */
};

struct icx_counter_sample {
    double t;      /* monotonic s: when the counters' reads began */
    double t_read; /* when they ended (before format 1.4: t) */
    int nic; /* 0: a GPU's NVLink counters (bus = PCI address); 1: an IB port (bus = NIC name) */
    uint64_t xmit_wait, discards; /* IB only */
    uint32_t rate_mbps;           /* IB only: port rate */
    char bus[32];
    uint64_t tx, rx; /* bytes, cumulative */
    uint32_t links;
};

struct icx_host_copy {
    uint64_t host_ptr, bytes;
    int32_t device, result;
    int d2h;
};

struct icx_rd_link {
    int32_t src, dst;
    uint32_t kind, nlinks, flags;
    uint64_t capacity_bps;
};

/* RDMA verbs (format 1.2) */
#define ICX_RD_MAX_VCTX 64
struct icx_rd_vport {
    uint8_t port, state, link_layer;
    uint16_t lid;
    uint32_t rate_mbps;
};
struct icx_rd_vctx {
    int present;
    char name[64];
    uint64_t guid;
    unsigned nports;
    struct icx_rd_vport ports[4];
};
/* A queue pair as the control-plane events left it. */
struct icx_rd_vqp {
    uint16_t ctx;
    uint32_t qp_num, dest_qp_num;
    int qp_type, state;
    uint8_t port;
    uint16_t dlid, slid;
    uint8_t local_gid[16], remote_gid[16];
    int connected; /* a modify gave it a remote (DEST_QPN) */
};
/* Data-plane traffic: an aggregate, or one work request / completion (event mode). */
struct icx_rd_vtraffic {
    uint16_t ctx;
    uint32_t qp_num;
    uint8_t kind, opcode, size_class, is_event;
    uint64_t count, bytes, signaled;
    int64_t ts;    /* events: ticks while reading */
    double t0, t1; /* monotonic seconds */
};
struct icx_rd_vwc_err {
    uint16_t ctx;
    uint32_t qp_num;
    uint8_t status;
    uint32_t vendor_err;
    uint64_t count;
};

/* NCCL (format 1.2) */
/* The largest communicator the analyzer takes (131,072 ranks): a creation record claiming more
 * is corrupt and skipped, so no count from a file sizes an allocation unchecked. */
#define ICX_RD_MAX_NRANKS (1 << 17)
struct icx_rd_ncomm {
    unsigned api;
    uint64_t comm, comm_id, parent_id;
    int rank, nranks, device, result;
    int64_t ts;
    double t; /* monotonic s */
};
struct icx_rd_ncall {
    unsigned api;
    uint32_t tid, group;
    uint32_t stack_id; /* the call's stack (the entry record's STACK_REF); 0 none */
    uint64_t comm, count, bytes, stream, seq;
    int peer, result;
    int pending; /* the entry record: the call may never have returned */
    uint8_t dtype, redop;
    int64_t ts, dur;           /* ticks while reading */
    double t_enter, t_exit;    /* monotonic s */
    uint32_t gpu_id;           /* its span's id (a call in a group: its ncclGroupEnd's); 0: none */
    int gpu;                   /* enum icx_gpu_state */
    double gpu_start, gpu_end; /* monotonic s, as far as known */
};

enum icx_gpu_state {
    ICX_GPU_UNTIMED, /* no events were recorded for it */
    ICX_GPU_DONE,    /* gpu_start..gpu_end */
    ICX_GPU_RUNNING, /* started, not finished when the trace ended (gpu_start known) */
    ICX_GPU_QUEUED,  /* not even started when the trace ended */
    ICX_GPU_UNKNOWN, /* timed, but no span in the trace (it ended without a final flush) */
};

/* NCCL's profiler events (format 1.6) */
struct icx_rd_pcomm {
    uint32_t ctx;
    uint64_t nccl_comm_id;
    int rank, nranks, nnodes, version, chained;
    uint32_t mask;
    uint64_t comm, comm_id; /* the API communicator it was joined to (handle, id); 0: none */
};
struct icx_rd_pcoll {
    uint32_t ctx;
    int root;
    uint64_t seq, count, bytes; /* bytes: the joined API call's (0: not joined) */
    uint8_t nchannels, nwarps;
    char func[16], algo[16], proto[16];
    int64_t ts, dur; /* ticks while reading */
    double t;        /* monotonic s */
};
struct icx_rd_pproxy { /* the last (cumulative) record of its key */
    uint32_t ctx;
    int peer;
    uint8_t channel, is_send;
    uint64_t ops, steps, bytes, gpu_wait_ns, peer_wait_ns, net_ns;
};
struct icx_rd_pkch {
    uint32_t ctx;
    uint8_t channel;
    uint64_t seq, gpu_start, gpu_stop;
};

struct icx_rd_dump {
    int kind;         /* 1 topology XML, 2 graph XML, 3 NCCL_DEBUG transport lines (all chunks) */
    uint64_t comm_id; /* the communicator whose creation wrote it (0: unknown, format 1.2) */
    char *text;
};

/* A hang dump episode (format 1.5): why and when, the pending call, the Python stacks' text. */
struct icx_rd_hdump {
    uint32_t episode, reason, nthreads, api, python;
    uint64_t mono_ns, age_ns, threshold_ns, comm, seq;
    char *py; /* faulthandler's text of every Python thread, NULL none */
};

/* One thread of a dump: kernel state and native stack. */
struct icx_rd_tstate {
    uint32_t episode, tid, stack, status; /* stack id (0 none), enum icx_tstack */
    int32_t syscall;
    char state;
    uint32_t name, wchan; /* string ids */
    uint64_t pthread, arg0;
};

struct icx_proc {
    char *path; /* file it came from */
    uint64_t stream_id, features;
    unsigned version_major, version_minor;
    int32_t pid, ppid, rank, local_rank, world_size, local_world_size;
    char *host, *job_id, *cmdline, *exe;
    char **strings; /* by id */
    size_t nstrings;
    struct icx_clockpt *clocks;
    size_t nclocks, cap_clocks;
    struct icx_copy *copies;
    size_t ncopies, cap_copies;
    struct icx_span *spans;
    size_t nspans, cap_spans;
    uint64_t nallocs, nfrees;
    uint64_t alloc_bytes[ICX_RD_MAX_DEV]; /* device memory allocated per CUDA device */
    struct icx_rd_device dev[ICX_RD_MAX_DEV];
    char *node_cpus[ICX_RD_MAX_NODES]; /* host NUMA nodes' CPU lists (NULL: no such node) */
    struct icx_rd_thread *threads;
    size_t nthreads, cap_threads;
    uint64_t cpu_sample_rounds;
    struct icx_host_buffer *hbufs;
    size_t nhbufs, cap_hbufs;
    struct icx_host_copy *hcopies;
    size_t nhcopies, cap_hcopies;
    struct icx_counter_sample *csamples;
    size_t ncsamples, cap_csamples;
    struct icx_rd_nic nics[ICX_RD_MAX_NICS];
    struct icx_rd_link *links;
    size_t nlinks, cap_links;
    char **notes;
    int *note_severity;
    size_t nnotes;
    uint64_t events_recorded, lost[ICX_LOST_SLOTS];
    int ended, exit_status;
    struct icx_stack_def *stacks;
    size_t nstacks, cap_stacks;
    struct icx_symbol *symbols; /* sorted by address once read */
    size_t nsymbols, cap_symbols;
    struct icx_rd_vctx vctx[ICX_RD_MAX_VCTX];
    struct icx_rd_vqp *vqps;
    size_t nvqps, cap_vqps;
    struct icx_rd_vtraffic *vtraffic;
    size_t nvtraffic, cap_vtraffic;
    struct icx_rd_vwc_err *vwc_errs;
    size_t nvwc_errs, cap_vwc_errs;
    uint64_t vmrs, vmr_bytes, vmr_gpu;         /* memory regions registered (GPU memory: numa -1) */
    uint64_t vmr_node_bytes[ICX_RD_MAX_NODES]; /* registered host memory by NUMA node */
    struct icx_rd_ncomm *ncomms;
    size_t nncomms, cap_ncomms;
    struct icx_rd_ncall *ncalls;
    size_t nncalls, cap_ncalls;
    struct icx_rd_dump *dumps; /* what NCCL wrote about itself, in trace order */
    size_t ndumps, cap_dumps;
    struct icx_rd_pcomm *pcomms; /* what NCCL told the tracer as its profiler plugin */
    size_t npcomms, cap_pcomms;
    struct icx_rd_pcoll *pcolls;
    size_t npcolls, cap_pcolls;
    struct icx_rd_pkch *pkchs;
    size_t npkchs, cap_pkchs;
    struct icx_rd_pproxy *pproxies;
    size_t npproxies, cap_pproxies;
    struct icx_rd_hdump *hdumps; /* hang dumps, in trace order */
    size_t nhdumps, cap_hdumps;
    struct icx_rd_tstate *tstates;
    size_t ntstates, cap_tstates;
    double t_first, t_last; /* monotonic seconds covered by the trace */
    /* tick -> ns mapping, from the CLOCK records */
    double slope, intercept;
};

struct icx_input {
    char *path;
    uint64_t size, frames, frames_bad, bytes_skipped;
    unsigned processes;
};

struct icx_trace {
    struct icx_proc **procs;
    size_t nprocs, cap_procs;
    struct icx_input *inputs;
    size_t ninputs, cap_inputs;
};

/* The thread record of tid in p, created when missing (NULL only when out of memory). */
struct icx_rd_thread *icx_thread_get(struct icx_proc *p, uint32_t tid);

/* A stack of process p by id, or NULL. */
const struct icx_stack_def *icx_stack_find(const struct icx_proc *p, uint32_t id);
/* Stack `id` of p as "f+0x1 (mod) <- g+0x2 (mod)", its innermost `frames` frames (unsymbolized
 * addresses in hex): 1, or 0 and "" when p has no such stack. */
int icx_stack_text(const struct icx_proc *p, uint32_t id, unsigned frames, char *buf, size_t len);
/* "function+0xoff (module)" for a return address, or NULL when the trace has no symbol for it. */
const char *icx_symbol_find(const struct icx_proc *p, uint64_t addr);

/* The first span with this id (spans sorted by id once read), or NULL; more may follow. */
const struct icx_span *icx_span_find(const struct icx_proc *p, uint32_t id);
/* The last dump of `kind` process p has for communicator comm_id (or one of unknown
 * communicator); NULL when none. */
const char *icx_nccl_dump_for(const struct icx_proc *p, int kind, uint64_t comm_id);
/* String id -> text of process p ("" for unknown ids). */
const char *icx_proc_string(const struct icx_proc *p, uint32_t id);
/* Ticks of process p's clock -> monotonic seconds (after its CLOCK records are fitted). */
double icx_proc_seconds(const struct icx_proc *p, int64_t ticks);
/* A new process of trace t, read from file `path`; NULL when out of memory. */
struct icx_proc *icx_proc_new(struct icx_trace *t, const char *path);
/* Grow *arr (element size sz) to hold n+1 elements: 0, or -1 out of memory. */
int icx_grow(void **arr, size_t *cap, size_t n, size_t sz);

const char *icx_record_name(unsigned type);
const char *icx_api_name(unsigned api);
const char *icx_lost_name(unsigned cause);
/* A process's stream is whole: it has its final frame and the writer lost no frame on the way
 * (a full disk, a file-size limit). */
static inline int icx_proc_complete(const struct icx_proc *p)
{
    return p->ended && !p->lost[ICX_LOST_write_error];
}
const char *icx_link_kind_name(unsigned kind);
const char *icx_pci_path_name(unsigned path);
const char *icx_verbs_opcode_name(unsigned kind, unsigned opcode);
const char *icx_wc_status_name(unsigned status);
void icx_trace_free(struct icx_trace *t);

#endif
