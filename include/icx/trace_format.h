/* icxtrace trace format, version 1.0.  This comment is the normative specification; docs/FORMAT.md
 * explains it with examples.  Shared by the tracer (writer) and the analyzer (reader).
 *
 * 1. Container.  A trace file is a sequence of zstd frames (RFC 8878).  Every frame decompresses to
 *    a whole number of records; no record spans two frames.  A file may hold several process
 * streams one after another (`cat a.icx.zst b.icx.zst` is a valid two-process trace).  A process
 * stream starts with a frame whose first record is FILE_HEADER and ends, when the process finished
 *    normally, with a frame holding END.  A stream without END was cut short (killed process):
 * every complete frame before the cut is valid data.  Readers skip zstd skippable frames.
 *
 * 2. Records.  All integers little-endian, fixed width; every record starts with struct icx_rec:
 *      type (u16, from events.def), size (u16, bytes including this header, a multiple of 8,
 *      >= 8), aux (u32, meaning per type).
 *    A reader skips records whose type it does not know, using size.  Records may grow at the end
 * in later minor versions: a reader uses the fields it knows and ignores the rest, and treats a
 *    record shorter than the size it knows as corrupt.  Strings are UTF-8, NUL-terminated and
 *    NUL-padded to a multiple of 8.
 *
 * 3. FILE_HEADER.  magic 0x31584349 ("ICX1" as bytes): a reader that sees 0x49435831 is reading a
 *    byte-swapped (big-endian) writer's file and rejects it in v1.  version major.minor; the oldest
 *    reader version able to read it (oldest_major.oldest_minor); header_size; feature bits
 *    (ICX_FEAT_*); a random 64-bit stream id.  A reader refuses streams whose oldest_major is above
 *    its own major.
 *
 * 4. Time.  Event timestamps are in "ticks" of the stream's clock.  With ICX_FEAT_TSC ticks are the
 *    CPU's invariant TSC; otherwise they are CLOCK_MONOTONIC nanoseconds.  CLOCK records pair a
 *    tick value with CLOCK_MONOTONIC and CLOCK_REALTIME nanoseconds taken at the same moment; each
 *    stream has at least one at its start and one per flush.  Readers map ticks to monotonic ns by
 *    the least-squares line through the stream's CLOCK pairs (or 1:1 without ICX_FEAT_TSC), and to
 *    wall time by (realtime - monotonic) of the first CLOCK record, which is how traces from
 * different hosts are aligned.  GPU_SPAN times are CLOCK_MONOTONIC ns of the host that wrote them.
 *
 * 5. Blocks and delta encoding.  A BLOCK record (aux = thread id, base = ticks) precedes a run of
 *    EVENT-category records of that thread; the run ends at the next BLOCK or at the end of the
 *    frame.  META records may appear inside a run and do not change it.  In EVENT records `ts` is
 * stored as a signed delta from the previous EVENT's ts in the same block (the first: from the
 * block base), and `dur` is exit - enter ticks.
 *
 * 6. Identity.  PROCESS gives pid, ppid, rank, local rank, world size, local world size (-1 when
 *    unknown) and string ids of host name, job id, command line (arguments separated by spaces) and
 *    executable.  STRING records (aux = id, ids start at 1) intern strings; an id is defined before
 *    it is used.  THREAD names a thread id.  DEVICE describes a CUDA device the process touched;
 *    LINK a device-to-device link found in the hardware (kind, capacity).
 *
 * 7. Loss.  LOST carries counters by cause (lost.def), cumulative since the start of the stream;
 * the last LOST record of a stream is authoritative.  NOTE (aux = severity) carries a string id
 * with a human-readable fact the tracer could not express otherwise (e.g. a statically linked
 * cudart).
 *
 * 8. Placement (1.1).  NUMA_NODE (aux = node) names a host NUMA node's CPU list (string id).
 *    CPU_SAMPLES (aux = n) holds, for one moment (mono_ns), the CPU and NUMA node each thread of
 * the process last ran on: n entries {tid u32, cpu u16, node i16}.  THREAD_AFFINITY (aux = tid)
 * gives a thread's allowed CPU list and NUMA node mask, when first seen and whenever it changes.
 *    HOST_NUMA describes where the pages of a pinned host buffer (HOST_ALLOC) live, from a sample
 * of its pages.  CUDA_HOST_COPY is a host<->device copy with its host pointer, so its bytes can be
 *    attributed to the NUMA node of the buffer.  NVLINK_COUNTERS (aux = NVML device index) is a
 * sample of a GPU's NVLink data counters (NVML, summed over its active links) in bytes, with the
 * GPU's PCI bus id: traffic no API hook sees (kernels' NVLink loads and stores) shows up there.
 *    Counter samples (NVLINK_COUNTERS, IB_COUNTERS) carry, from 1.4, two times: mono_ns before the
 * counters were read and read_end_ns after.  A reader that sets samples of several processes
 *    against each other takes, as a baseline, the sample that ended reading first and, as the
 * last, the one that started reading last: no traffic between the two is missed even when a
 *    sampling thread was preempted between its clock and its reads.
 *
 * 9. Stacks.  STACK (aux = stack id) lists return addresses, innermost first.  A STACK_REF (aux =
 *    stack id) directly after an EVENT record gives that event's call stack.  SYMBOL maps an
 * address to a string id "function+0xoff (module)", written at the end of the stream.
 *
 * 10. RDMA verbs (1.2).  VERBS_DEVICE (aux = context slot, unique within the stream) names a
 *    device context the process opened; VERBS_PORT (aux = context slot) one of its ports as the
 * provider reported it when the device was opened.  VERBS_QP, VERBS_MR and VERBS_CQ are
 *    control-plane events.  Data plane, by default aggregated: VERBS_AGG counts the work requests
 * of one (context, QP, kind, opcode, size class) posted or completed between t0_ns and t1_ns
 * (CLOCK_MONOTONIC of the writing host; the writer reads cumulative per-thread counters each
 *    flush).  With ICX_VERBS_EVENTS=1 every work request is a VERBS_WR event and every completion a
 * VERBS_WC event instead.  Failed completions are always VERBS_WC events.  Size class 0 holds
 *    0-byte requests, class c >= 1 those of 2^(c-2) < bytes <= 2^(c-1).  Opcodes are libibverbs'
 * enum ibv_wr_opcode (posts) and enum ibv_wc_opcode (completions); ICX_VOP_RECV marks a posted
 * receive.
 *
 * 11. NCCL (1.2).  NCCL_COMM (api = the init / split / destroy call) ties a communicator handle of
 *    the process to comm_id, the same on every rank (a hash of the unique id; for split and shrink
 * derived from the parent's id, the color and the parent's split count), with rank, nranks and
 *    CUDA device.  NCCL_CALL is one collective, point-to-point call or ncclGroupEnd: counts as
 * passed, bytes of this rank's buffer as nccl-tests count them (all-gather: the send part,
 *    reduce-scatter: the receive part), seq (collectives: per communicator; send and recv: per
 * communicator, peer and direction -- equal on every rank for the same operation), the group it
 *    was issued in (0: none) and NCCL's result.  Host enter/exit, and (1.3) gpu_id: the GPU_SPAN
 * of pooled events recorded on the call's stream around it (around the outermost ncclGroupEnd
 *    for calls in a group: one span per stream the group used, all with the group's id; a span
 * whose work had not finished when the trace ended is written then with ICX_SPAN_NO_END /
 *    NO_START).  NCCL_DUMP (aux = 1 topology, 2 graphs, 3 NCCL_DEBUG transport lines) carries, in
 * string parts of at most 60000 bytes, the XML NCCL wrote to NCCL_TOPO_DUMP_FILE /
 *    NCCL_GRAPH_DUMP_FILE while creating communicator comm_id (1.3), or the "via P2P/..." /
 * "via NET/..." lines of NCCL_DEBUG_FILE (comm_id 0; chunks that add up to one text).  Each
 * call is written twice: on entry with ICX_EVF_PENDING (so a call that never returns, a hang, is
 *    in the trace) and on return with its result and duration.
 *
 * 12. Hang dumps (1.5).  HANG_DUMP (aux = reason: ICX_DUMP_*) opens one dump episode of the
 *    process: why and when (mono_ns), how long the oldest traced work had been pending or the
 * process had made no NCCL call (age_ns) against the threshold, and that call (api, comm handle,
 *    seq; 0 when none).  One THREAD_STATE (aux = tid) per thread of the process follows: its name,
 * state letter, syscall number (-1 running, -2 unknown) with its first argument, wchan, its
 *    pthread_t (Python's thread id), and the stack id of its native stack taken by a signal
 * (stack_status ICX_TSTACK_*); the stacks' STACK and SYMBOL records are in the same frame.
 *    PY_STACKS (aux = episode) carries CPython's faulthandler text of every Python thread, in
 * string parts of at most 60000 bytes.
 *
 * 13. NCCL's own view (1.6): what NCCL tells its profiler plugin (the tracer is one: docs/NCCL.md).
 *    NCCL_PCOMM (aux = context id, from 1 per stream) is one communicator as NCCL gave it to the
 * plugin's init: NCCL's commId (the same on every rank), rank, nranks, nodes, the interface
 *    version NCCL used (4, 5, 6), whether a plugin of the user's is chained behind the tracer's,
 * and the activation mask returned.  NCCL_PCOLL (api ncclProfiler; ts = its start, dur = to its
 *    stop, which means "enqueued") is one collective NCCL launched on context ctx: NCCL's
 * seqNumber (per communicator, from 0: the API's NCCL_CALL seq minus one when the tracer saw every
 *    call), count, root, channels, warps, and the function, algorithm and protocol NCCL chose, as
 * NCCL names them (NUL-padded).  NCCL_PKCH (ts = when it stopped) is one kernel channel of such a
 *    collective (its seq): start and stop of the GPU's globaltimer, ns of the GPU's own clock
 * (durations only; stop 0: NCCL gave none).  NCCL_PPROXY (aux = context id) is what NCCL's proxy
 *    moved over the network on one (channel, peer, direction) since the start, cumulative (the
 * last record of a key is its total): proxy operations, steps, bytes (the steps' transSize), and
 *    the time the steps spent waiting for the GPU, for the peer, and on the wire.
 *
 * Version history: 1.0; 1.1 adds records 15-22 and 35-37, the DEVICE field local_cpus, and the
 *    event flag ICX_EVF_D2H (readers of 1.0 skip all of them by size); 1.2 adds 23-26 and 38-44;
 *    1.3 adds NCCL_CALL gpu_id (record 88 bytes; 80 in 1.2), NCCL_DUMP comm_id (32; 24 in 1.2)
 *    and GPU_SPAN flags; 1.4 adds read_end_ns to NVLINK_COUNTERS (48 bytes; 40 before) and
 *    IB_COUNTERS (56; 48 before); 1.5 adds 27-29 (hang dumps); 1.6 adds 30, 31, 45, 46 (NCCL's
 *    profiler events). */
#ifndef ICX_TRACE_FORMAT_H
#define ICX_TRACE_FORMAT_H

#include <stdint.h>

#define ICX_MAGIC 0x31584349u /* "ICX1" */
#define ICX_MAGIC_SWAPPED 0x49435831u
#define ICX_VERSION_MAJOR 1
#define ICX_VERSION_MINOR 6
#define ICX_OLDEST_MAJOR 1
#define ICX_OLDEST_MINOR 0

/* Feature bits of FILE_HEADER.features. */
#define ICX_FEAT_TSC (1ull << 0) /* event ticks are TSC, mapped through CLOCK records */
#define ICX_FEAT_DELTA                                                                             \
    (1ull << 1) /* EVENT ts are delta-encoded within BLOCKs (always set in 1.x) */
#define ICX_FEAT_STACKS (1ull << 2) /* the stream may contain STACK / STACK_REF / SYMBOL */

enum icx_record_type {
#define ICX_RECORD(id, name, cat, str) ICX_REC_##name = id,
#include "events.def"
#undef ICX_RECORD
};

enum icx_record_category { ICX_CAT_META, ICX_CAT_EVENT, ICX_CAT_GPU };

enum icx_api {
#define ICX_API(id, name) ICX_API_##name = id,
#include "apis.def"
#undef ICX_API
};

enum icx_lost_cause {
#define ICX_LOST(idx, name, desc) ICX_LOST_##name = idx,
#include "lost.def"
#undef ICX_LOST
    ICX_LOST_NCAUSES
};

#define ICX_LOST_SLOTS 16 /* LOST records always carry this many counters */
_Static_assert(ICX_LOST_NCAUSES <= ICX_LOST_SLOTS, "lost.def outgrew the LOST record");

struct icx_rec {
    uint16_t type;
    uint16_t size;
    uint32_t aux;
};
_Static_assert(sizeof(struct icx_rec) == 8, "icx_rec");

struct icx_file_header {
    struct icx_rec h;
    uint32_t magic;
    uint16_t version_major, version_minor;
    uint16_t oldest_major, oldest_minor;
    uint32_t header_size; /* sizeof this record as written */
    uint64_t features;
    uint64_t stream_id;
};
_Static_assert(sizeof(struct icx_file_header) == 40, "icx_file_header");

struct icx_rec_string { /* aux = string id; NUL-terminated text follows, padded to 8 */
    struct icx_rec h;
};

struct icx_rec_process {
    struct icx_rec h;
    int32_t pid, ppid;
    int32_t rank, local_rank;
    int32_t world_size, local_world_size;
    uint32_t host, job_id; /* string ids */
    uint32_t cmdline, exe; /* string ids */
};
_Static_assert(sizeof(struct icx_rec_process) == 48, "icx_rec_process");

struct icx_rec_clock {
    struct icx_rec h;
    uint64_t ticks;
    uint64_t mono_ns;
    uint64_t real_ns;
};
_Static_assert(sizeof(struct icx_rec_clock) == 32, "icx_rec_clock");

struct icx_rec_thread { /* aux = tid */
    struct icx_rec h;
    uint32_t name; /* string id */
    uint32_t flags;
};
_Static_assert(sizeof(struct icx_rec_thread) == 16, "icx_rec_thread");

struct icx_rec_block { /* aux = tid */
    struct icx_rec h;
    uint64_t base_ticks;
};
_Static_assert(sizeof(struct icx_rec_block) == 16, "icx_rec_block");

struct icx_rec_lost {
    struct icx_rec h;
    uint64_t events_recorded;
    uint64_t count[ICX_LOST_SLOTS];
};
_Static_assert(sizeof(struct icx_rec_lost) == 144, "icx_rec_lost");

/* Link kinds in DEVICE/LINK records. */
enum icx_link_kind { ICX_LINK_UNKNOWN = 0, ICX_LINK_NVLINK = 1, ICX_LINK_PCIE = 2 };

struct icx_rec_device { /* aux = CUDA device ordinal in this process */
    struct icx_rec h;
    uint32_t name, pci_bus_id; /* string ids */
    int32_t numa_node;         /* -1 unknown */
    uint32_t flags;
    uint32_t local_cpus; /* 1.1: string id of the CPU list local to the device (0 unknown) */
    uint32_t pad;
};
_Static_assert(sizeof(struct icx_rec_device) == 32, "icx_rec_device");
#define ICX_REC_DEVICE_V10_SIZE 24

struct icx_rec_link { /* aux = enum icx_link_kind */
    struct icx_rec h;
    int32_t src_dev, dst_dev;
    uint32_t nlinks;       /* NVLink lanes between them (direct or through NVSwitch), 0 for PCIe */
    uint32_t flags;        /* ICX_LINKF_* */
    uint64_t capacity_bps; /* bytes per second per direction, 0 unknown */
};
_Static_assert(sizeof(struct icx_rec_link) == 32, "icx_rec_link");
#define ICX_LINKF_NVSWITCH 1u

struct icx_rec_stack { /* aux = stack id; `depth` return addresses follow */
    struct icx_rec h;
    uint32_t depth, pad;
};
_Static_assert(sizeof(struct icx_rec_stack) == 16, "icx_rec_stack");

struct icx_rec_symbol {
    struct icx_rec h;
    uint64_t addr;
    uint32_t text; /* string id */
    uint32_t pad;
};
_Static_assert(sizeof(struct icx_rec_symbol) == 24, "icx_rec_symbol");

struct icx_rec_note { /* aux = severity: 0 info, 1 warning */
    struct icx_rec h;
    uint32_t text; /* string id */
    uint32_t pad;
};
_Static_assert(sizeof(struct icx_rec_note) == 16, "icx_rec_note");

/* END.exit_status: the image was replaced by exec() (since 1.5; the new image writes its own
 * trace, and a failed exec lets this one go on after the END). */
#define ICX_EXIT_EXEC (-2)

struct icx_rec_end {
    struct icx_rec h;
    int32_t exit_status; /* -1 unknown; signal number as 128+N when killed by a handled signal;
                            ICX_EXIT_EXEC */
    uint32_t pad;
};
_Static_assert(sizeof(struct icx_rec_end) == 16, "icx_rec_end");

/* Common prefix of every EVENT-category record. */
struct icx_rec_event {
    struct icx_rec h; /* aux = enum icx_api in the low 16 bits, ICX_EVF_* flags in the high 16 */
    int64_t ts;       /* ticks (delta-encoded on disk, see 5.) */
    uint64_t dur;     /* ticks */
};
_Static_assert(sizeof(struct icx_rec_event) == 24, "icx_rec_event");

#define ICX_EVF_SHIFT 16
#define ICX_EVF_CAPTURED (1u << 0) /* issued into a stream capturing a CUDA graph: not run now */
#define ICX_EVF_D2H (1u << 1)      /* CUDA_HOST_COPY: device to host (else host to device) */
#define ICX_EVF_PENDING (1u << 2)  /* NCCL_CALL written on entry: the call had not returned yet */

/* A copy between two different devices. */
struct icx_rec_cuda_copy {
    struct icx_rec_event e;
    uint64_t bytes;
    uint64_t stream; /* cudaStream_t value as issued (0 = legacy default stream) */
    int32_t src_dev, dst_dev;
    int32_t result;   /* cudaError_t returned to the caller */
    uint32_t copy_id; /* nonzero: a GPU_SPAN with this id carries its device-side timing */
};
_Static_assert(sizeof(struct icx_rec_cuda_copy) == 56, "icx_rec_cuda_copy");

struct icx_rec_cuda_alloc { /* CUDA_ALLOC and CUDA_FREE */
    struct icx_rec_event e;
    uint64_t ptr;
    uint64_t bytes; /* 0 for CUDA_FREE */
    int32_t device;
    int32_t result;
};
_Static_assert(sizeof(struct icx_rec_cuda_alloc) == 48, "icx_rec_cuda_alloc");

/* A copy between host memory and one device (1.1). */
struct icx_rec_cuda_host_copy {
    struct icx_rec_event e;
    uint64_t bytes;
    uint64_t stream;
    uint64_t host_ptr;
    int32_t device;
    int32_t result;
};
_Static_assert(sizeof(struct icx_rec_cuda_host_copy) == 56, "icx_rec_cuda_host_copy");

struct icx_rec_numa_node { /* aux = node */
    struct icx_rec h;
    uint32_t cpus; /* string id: CPU list */
    uint32_t pad;
};
_Static_assert(sizeof(struct icx_rec_numa_node) == 16, "icx_rec_numa_node");

struct icx_cpu_sample {
    uint32_t tid;
    uint16_t cpu;
    int16_t node; /* -1 unknown */
};
struct icx_rec_cpu_samples { /* aux = number of icx_cpu_sample entries that follow */
    struct icx_rec h;
    uint64_t mono_ns;
};
_Static_assert(sizeof(struct icx_cpu_sample) == 8 && sizeof(struct icx_rec_cpu_samples) == 16,
               "icx_rec_cpu_samples");

struct icx_rec_thread_affinity { /* aux = tid */
    struct icx_rec h;
    uint32_t cpus; /* string id: allowed CPU list */
    uint32_t pad;
    uint64_t node_mask;
};
_Static_assert(sizeof(struct icx_rec_thread_affinity) == 24, "icx_rec_thread_affinity");

struct icx_rec_host_numa {
    struct icx_rec h;
    uint64_t ptr, bytes;
    uint32_t pages_sampled;
    int32_t node; /* node holding most sampled pages, -1 unknown */
    uint64_t node_mask;
};
_Static_assert(sizeof(struct icx_rec_host_numa) == 40, "icx_rec_host_numa");

struct icx_rec_nvlink_counters { /* aux = NVML device index */
    struct icx_rec h;
    uint64_t mono_ns;            /* CLOCK_MONOTONIC ns before the counters were read */
    uint32_t pci_bus_id;         /* string id */
    uint32_t links;              /* active links summed */
    uint64_t tx_bytes, rx_bytes; /* cumulative since the driver loaded, KiB resolution */
    uint64_t read_end_ns;        /* 1.4: when the reads ended (mono_ns: when they began) */
};
_Static_assert(sizeof(struct icx_rec_nvlink_counters) == 48, "icx_rec_nvlink_counters");
#define ICX_NVLINK_COUNTERS_SIZE_1_3 40

enum icx_link_layer { ICX_LL_UNKNOWN = 0, ICX_LL_INFINIBAND = 1, ICX_LL_ETHERNET = 2 };

struct icx_rec_nic { /* aux = NIC index in this trace */
    struct icx_rec h;
    uint32_t name, pci_bus_id; /* string ids */
    int32_t numa_node;
    uint16_t port, link_layer; /* enum icx_link_layer */
    uint32_t rate_mbps;        /* per direction */
    uint32_t active;
};
_Static_assert(sizeof(struct icx_rec_nic) == 32, "icx_rec_nic");

/* PCIe path classes, nvidia-smi topo -m's vocabulary. */
enum icx_pci_path {
    ICX_PATH_UNKNOWN = 0,
    ICX_PATH_PIX = 1,  /* behind one PCIe switch */
    ICX_PATH_PXB = 2,  /* several PCIe bridges, not through the host bridge */
    ICX_PATH_PHB = 3,  /* through the PCIe host bridge (same root complex) */
    ICX_PATH_NODE = 4, /* across host bridges within one NUMA node */
    ICX_PATH_SYS = 5   /* across NUMA nodes (SMP interconnect) */
};

struct icx_rec_pci_path { /* aux = enum icx_pci_path */
    struct icx_rec h;
    int32_t device; /* CUDA ordinal */
    int32_t nic;    /* NIC index */
};
_Static_assert(sizeof(struct icx_rec_pci_path) == 16, "icx_rec_pci_path");

struct icx_rec_ib_counters { /* aux = NIC index */
    struct icx_rec h;
    uint64_t mono_ns;            /* CLOCK_MONOTONIC ns before the counters were read */
    uint64_t tx_bytes, rx_bytes; /* cumulative */
    uint64_t xmit_wait, xmit_discards;
    uint64_t read_end_ns; /* 1.4: when the reads ended (mono_ns: when they began) */
};
_Static_assert(sizeof(struct icx_rec_ib_counters) == 56, "icx_rec_ib_counters");
#define ICX_IB_COUNTERS_SIZE_1_3 48

struct icx_rec_gpu_span { /* aux = device that executed the work */
    struct icx_rec h;
    uint32_t copy_id;
    uint32_t flags;            /* ICX_SPAN_* (1.3; 0 before): a span the work never completed */
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC ns of the writing host */
};
_Static_assert(sizeof(struct icx_rec_gpu_span) == 32, "icx_rec_gpu_span");
/* Written when the trace ends (exit, fatal signal) for work still queued or running: */
#define ICX_SPAN_NO_END (1u << 0)   /* the end event was not reached: end_ns is 0 */
#define ICX_SPAN_NO_START (1u << 1) /* not even the start: start_ns is 0 too (queued) */

/* ---- RDMA verbs (1.2) ---- */
struct icx_rec_verbs_device { /* aux = context slot */
    struct icx_rec h;
    uint32_t name;      /* string id: device name (mlx5_0, rxe0) */
    uint32_t nports;    /* physical ports */
    uint64_t node_guid; /* host byte order */
};
_Static_assert(sizeof(struct icx_rec_verbs_device) == 24, "icx_rec_verbs_device");

struct icx_rec_verbs_port { /* aux = context slot */
    struct icx_rec h;
    uint8_t port, state, link_layer, active_width; /* enum ibv_port_state, enum icx_link_layer */
    uint8_t active_speed, pad8;                    /* IB encodings (ibv_port_attr) */
    uint16_t lid;
    uint32_t rate_mbps; /* speed x width, per direction; 0 unknown */
    uint32_t pad;
};
_Static_assert(sizeof(struct icx_rec_verbs_port) == 24, "icx_rec_verbs_port");

/* Kinds of verbs data-plane traffic in VERBS_AGG / VERBS_WR. */
enum icx_verbs_kind {
    ICX_VK_SEND = 1,      /* posted to a send queue (ibv_post_send, ibv_wr_*) */
    ICX_VK_RECV = 2,      /* receive buffer posted (ibv_post_recv) */
    ICX_VK_SRQ_RECV = 3,  /* receive buffer posted to a shared receive queue */
    ICX_VK_COMPLETION = 4 /* successful completion polled (ibv_poll_cq) */
};
#define ICX_VOP_RECV 0xff /* opcode of posted receives */
/* Bits of VERBS_QP.attr_mask (libibverbs' enum ibv_qp_attr_mask) the analyzer reads. */
#define IBV_QP_AV_BIT (1u << 7)
#define IBV_QP_DEST_QPN_BIT (1u << 20)

struct icx_rec_verbs_agg { /* aux = context slot */
    struct icx_rec h;
    uint64_t t0_ns, t1_ns;
    uint32_t qp_num; /* 0 for shared receive queues */
    uint8_t kind, opcode, size_class, pad;
    uint64_t count, bytes;
    uint64_t signaled; /* sends that asked for a completion */
};
_Static_assert(sizeof(struct icx_rec_verbs_agg) == 56, "icx_rec_verbs_agg");

struct icx_rec_verbs_qp { /* EVENT, api = create / create_ex / modify / destroy */
    struct icx_rec_event e;
    uint32_t qp_num;
    uint16_t ctx;           /* context slot, 0xffff unknown */
    uint8_t qp_type, state; /* enum ibv_qp_type; state after the call (0xff: unchanged) */
    uint32_t attr_mask;     /* ibv_modify_qp's mask */
    uint32_t dest_qp_num;   /* with IBV_QP_DEST_QPN */
    uint16_t dlid, slid;    /* remote LID (IBV_QP_AV), local LID of the port */
    uint8_t port, path_mtu, sgid_index, is_global;
    int32_t result; /* 0, or errno / -1 */
    uint32_t pad;
    uint8_t local_gid[16], remote_gid[16];
};
_Static_assert(sizeof(struct icx_rec_verbs_qp) == 88, "icx_rec_verbs_qp");

struct icx_rec_verbs_mr { /* EVENT, api = reg_mr / reg_mr_iova2 / reg_dmabuf_mr / dereg_mr */
    struct icx_rec_event e;
    uint64_t addr, length, iova;
    uint32_t lkey, rkey;
    uint32_t access;
    uint16_t ctx;
    int16_t numa_node; /* host node holding most sampled pages, -1 unknown or device memory */
    int32_t dmabuf_fd; /* -1 none */
    int32_t result;
};
_Static_assert(sizeof(struct icx_rec_verbs_mr) == 72, "icx_rec_verbs_mr");

struct icx_rec_verbs_wr { /* EVENT, api = post_send / post_recv / post_srq_recv / wr_complete */
    struct icx_rec_event e;
    uint64_t wr_id, bytes;
    uint32_t qp_num;
    uint16_t ctx;
    uint8_t kind, opcode;
    uint32_t num_sge, send_flags;
};
_Static_assert(sizeof(struct icx_rec_verbs_wr) == 56, "icx_rec_verbs_wr");

struct icx_rec_verbs_wc { /* EVENT, api = poll_cq; ts = the poll's start */
    struct icx_rec_event e;
    uint64_t wr_id;
    uint32_t qp_num, byte_len;
    uint16_t ctx;
    uint8_t opcode, status; /* enum ibv_wc_opcode, enum ibv_wc_status */
    uint32_t vendor_err;
};
_Static_assert(sizeof(struct icx_rec_verbs_wc) == 48, "icx_rec_verbs_wc");

struct icx_rec_verbs_cq { /* EVENT, api = create_cq / create_cq_ex */
    struct icx_rec_event e;
    uint16_t ctx, pad;
    int32_t cqe;
    int32_t result;
    uint32_t pad2;
};
_Static_assert(sizeof(struct icx_rec_verbs_cq) == 40, "icx_rec_verbs_cq");

/* ---- NCCL (1.2) ---- */
struct icx_rec_nccl_dump { /* aux = 1 topology XML, 2 graph XML, 3 debug lines (1.3) */
    struct icx_rec h;
    uint32_t text; /* string id of this part */
    uint32_t part, nparts;
    uint32_t total_bytes;
    uint64_t comm_id; /* 1.3: the communicator whose creation wrote it (0: unknown) */
};
_Static_assert(sizeof(struct icx_rec_nccl_dump) == 32, "icx_rec_nccl_dump");
#define ICX_NCCL_DUMP_SIZE_1_2 24

/* Why a hang dump was taken (HANG_DUMP aux). */
enum icx_dump_reason {
    ICX_DUMP_PENDING = 1, /* traced work pending longer than the threshold */
    ICX_DUMP_IDLE = 2,    /* no NCCL call for longer than the threshold, after calls were made */
    ICX_DUMP_SIGNAL = 3,  /* SIGUSR2 */
    ICX_DUMP_REQUEST = 4, /* the ICX_DUMP file was touched (by a user or another rank's watchdog) */
};

struct icx_rec_hang_dump { /* aux = reason (enum icx_dump_reason) */
    struct icx_rec h;
    uint32_t episode, nthreads;
    uint64_t mono_ns;      /* when the dump began */
    uint64_t age_ns;       /* how long the oldest work was pending, or since the last NCCL call */
    uint64_t threshold_ns; /* the watchdog's threshold then */
    uint64_t comm;         /* the pending call's communicator handle (0: none) */
    uint64_t seq;          /* its sequence number */
    uint32_t api;          /* its enum icx_api (0: none) */
    uint32_t python;       /* 1: PY_STACKS follow; 0: not a CPython process; 2: CPython without
                              _Py_DumpTracebackThreads */
};
_Static_assert(sizeof(struct icx_rec_hang_dump) == 64, "icx_rec_hang_dump");

/* How a thread's native stack was taken (THREAD_STATE stack_status). */
enum icx_tstack {
    ICX_TSTACK_OK = 0,
    ICX_TSTACK_BLOCKED = 1,   /* the thread blocks the dump signal */
    ICX_TSTACK_NO_ANSWER = 2, /* signalled, did not answer in time */
    ICX_TSTACK_WRITER = 3,    /* the tracer's own writer thread: not taken */
    ICX_TSTACK_NONE = 4,      /* no signal free for the dump, or unwinding failed */
};

struct icx_rec_thread_state { /* aux = tid */
    struct icx_rec h;
    uint32_t episode;
    uint32_t name;        /* string id: /proc comm */
    uint32_t wchan;       /* string id ("" when none) */
    uint32_t stack;       /* stack id, 0: none */
    int32_t syscall;      /* -1 running in user space, -2 unknown */
    uint8_t state;        /* /proc state letter: R S D T Z ... */
    uint8_t stack_status; /* enum icx_tstack */
    uint16_t pad;
    uint64_t pthread; /* the thread's pthread_t (CPython's thread id), 0 unknown */
    uint64_t arg0;    /* the syscall's first argument (a futex's address) */
};
_Static_assert(sizeof(struct icx_rec_thread_state) == 48, "icx_rec_thread_state");

struct icx_rec_py_stacks { /* aux = episode */
    struct icx_rec h;
    uint32_t text; /* string id of this part */
    uint32_t part, nparts, pad;
};
_Static_assert(sizeof(struct icx_rec_py_stacks) == 24, "icx_rec_py_stacks");

struct icx_rec_nccl_comm { /* EVENT, api = init / split / shrink / finalize / destroy / abort */
    struct icx_rec_event e;
    uint64_t comm;      /* handle value in this process */
    uint64_t comm_id;   /* the same on every rank */
    uint64_t parent_id; /* split / shrink: the parent's comm_id */
    int32_t rank, nranks, device, result;
    int32_t color, key;
};
_Static_assert(sizeof(struct icx_rec_nccl_comm) == 72, "icx_rec_nccl_comm");

struct icx_rec_nccl_call { /* EVENT, api = the call */
    struct icx_rec_event e;
    uint64_t comm;   /* the communicator handle in this process (NCCL_COMM.comm) */
    uint64_t count;  /* elements, as passed */
    uint64_t bytes;  /* of this rank's buffer, as nccl-tests count them (section 11) */
    uint64_t stream; /* cudaStream_t value */
    uint64_t seq;    /* per communicator; send/recv: per communicator, peer and direction */
    int32_t peer;    /* root of rooted collectives, peer of send/recv, -1 */
    uint8_t dtype;   /* ncclDataType_t */
    uint8_t redop;   /* ncclRedOp_t */
    uint8_t pad[2];
    uint32_t group; /* 0 outside a group */
    int32_t result; /* ncclResult_t (ICX_EVF_PENDING: not returned yet) */
    /* 1.3 (absent from 1.2's 80-byte records): nonzero, a GPU_SPAN with this id times the call
     * on its stream -- for a call in a group, that group's ncclGroupEnd carries the id */
    uint32_t gpu_id;
    uint32_t pad2;
};
_Static_assert(sizeof(struct icx_rec_nccl_call) == 88, "icx_rec_nccl_call");
#define ICX_NCCL_CALL_SIZE_1_2 80

struct icx_rec_nccl_pcomm { /* META, aux = context id */
    struct icx_rec h;
    uint64_t nccl_comm_id; /* commId / commHash, as NCCL gave it: the same on every rank */
    int32_t rank, nranks, nnodes;
    uint8_t version; /* the plugin interface version NCCL used */
    uint8_t chained; /* 1: the user's plugin (NCCL_PROFILER_PLUGIN) is chained behind */
    uint16_t pad;
    uint32_t mask; /* activation mask returned to NCCL (ours and the chained plugin's) */
    uint32_t pad2;
};
_Static_assert(sizeof(struct icx_rec_nccl_pcomm) == 40, "icx_rec_nccl_pcomm");

struct icx_rec_nccl_pproxy { /* META, aux = context id */
    struct icx_rec h;
    int32_t peer;    /* the remote rank in the communicator */
    uint8_t channel; /* NCCL's channel */
    uint8_t is_send; /* 1 sent, 0 received */
    uint8_t pad[2];
    uint64_t ops, steps, bytes;
    uint64_t gpu_wait_ns; /* the steps waiting for the GPU (send: data; receive: flush, consumer) */
    uint64_t peer_wait_ns; /* waiting for the peer (send: its buffer; receive: its data) */
    uint64_t net_ns;       /* sends on the wire, until their completion */
};
_Static_assert(sizeof(struct icx_rec_nccl_pproxy) == 64, "icx_rec_nccl_pproxy");

struct icx_rec_nccl_pcoll { /* EVENT, api = ncclProfiler */
    struct icx_rec_event e;
    uint32_t ctx; /* NCCL_PCOMM's aux */
    int32_t root;
    uint64_t seq; /* NCCL's seqNumber */
    uint64_t count;
    uint8_t nchannels, nwarps, pad[6];
    char func[16], algo[16], proto[16]; /* NUL-padded, truncated at 15 */
};
_Static_assert(sizeof(struct icx_rec_nccl_pcoll) == 104, "icx_rec_nccl_pcoll");

struct icx_rec_nccl_pkch { /* EVENT, api = ncclProfiler */
    struct icx_rec_event e;
    uint32_t ctx;
    uint8_t channel, pad[3];
    uint64_t seq;                 /* the collective's */
    uint64_t gpu_start, gpu_stop; /* GPU globaltimer ns; gpu_stop 0: none */
};
_Static_assert(sizeof(struct icx_rec_nccl_pkch) == 56, "icx_rec_nccl_pkch");

#endif
