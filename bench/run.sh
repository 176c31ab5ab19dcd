#!/bin/sh
# Added host cost of one hooked cudaMemcpyPeerAsync, measured in one run: the same benchmark binary
# against a null libcudart (every call returns at once), without the preload and with it in each
# GPU-timing mode, rounds interleaved so machine noise hits all variants alike.  Prints a table.
set -eu
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-7}
B="$BUILD/bench/bench_copy"
# All variants on the same CPU, so they share its frequency and caches.
V="$BUILD/bench/bench_post_send"
N="$BUILD/bench/bench_nccl"
if command -v taskset >/dev/null 2>&1; then
    B="taskset -c ${BENCH_CPU:-1} $B"
    V="taskset -c ${BENCH_CPU:-1} $V"
    N="taskset -c ${BENCH_CPU:-1} $N"
fi
LIB="$(cd "$BUILD/lib" && pwd)/libicxtrace.so"
# Default ring; the writer drains every millisecond, so between bursts the ring empties.  The run
# fails if anything was dropped: the drop path is cheaper and would flatter the numbers.
export ICX_FLUSH_MS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
    $B >>"$tmp/none"
    LD_PRELOAD="$(cd "$BUILD/bench" && pwd)/libfloor.so" $B >>"$tmp/floor"
    rm -f "$tmp"/t-*.icx.zst* # each round's trace replaces the last (the tracer never overwrites)
    for mode in off sample all; do
        ICX_GPU_TIMING=$mode ICX_QUIET=1 ICX_OUTPUT="$tmp/t-$mode.icx.zst" LD_PRELOAD="$LIB" $B \
            >>"$tmp/$mode"
    done
    ICX_STACKS=64 ICX_QUIET=1 ICX_OUTPUT="$tmp/t-stk.icx.zst" LD_PRELOAD="$LIB" $B >>"$tmp/stacks"
    # ibv_post_send against the null libibverbs: aggregate (default) and event mode
    $V >>"$tmp/v-none"
    ICX_QUIET=1 ICX_OUTPUT="$tmp/t-vagg.icx.zst" LD_PRELOAD="$LIB" $V >>"$tmp/v-agg"
    ICX_VERBS_EVENTS=1 ICX_QUIET=1 ICX_OUTPUT="$tmp/t-vev.icx.zst" LD_PRELOAD="$LIB" $V >>"$tmp/v-ev"
    # ncclAllReduce against the null libnccl: GPU timing off, and default (every call GPU-timed)
    $N >>"$tmp/n-none"
    ICX_GPU_TIMING=off ICX_QUIET=1 ICX_OUTPUT="$tmp/t-noff.icx.zst" LD_PRELOAD="$LIB" $N >>"$tmp/n-off"
    ICX_QUIET=1 ICX_OUTPUT="$tmp/t-ndef.icx.zst" LD_PRELOAD="$LIB" $N >>"$tmp/n-def"
    # the same without the per-shape call stacks (ICX_STACKS=0): what the shape check costs
    ICX_STACKS=0 ICX_QUIET=1 ICX_OUTPUT="$tmp/t-nnostk.icx.zst" LD_PRELOAD="$LIB" $N >>"$tmp/n-nostk"
done
python3 - "$tmp" "$BUILD/bin/icx-analyze" <<'PY'
import json, statistics, subprocess, sys, os
d = sys.argv[1]
for t in ("off", "sample", "all", "stk", "vagg", "vev", "noff", "ndef", "nnostk"):
    doc = json.loads(subprocess.run([sys.argv[2], "summarize", "--json", os.path.join(d, "t-%s.icx.zst" % t)],
                                    capture_output=True, text=True, check=True).stdout)
    lost = doc["processes"][0]["lost"]
    if lost["buffer_full"] or lost["no_buffer"]:
        sys.exit("bench: events were dropped in variant %s (%s): the numbers would be wrong" % (t, lost))
def med(name):
    return statistics.median(float(l.split()[0]) for l in open(os.path.join(d, name)))
def table(title, base_name, variants, first=False):
    """One benchmark's table: ns per call of each variant and what it adds to `base_name`."""
    base = med(base_name)
    if not first:
        print()
    print(title)
    print("%-34s %8s %8s" % ("variant", "ns/call", "added"))
    print("%-34s %8.1f %8s" % ("no preload", base, "-"))
    for name, label in variants:
        v = med(name)
        print("%-34s %8.1f %8.1f" % (label, v, v - base))
table("cudaMemcpyPeerAsync, null libcudart, ns per call (median over rounds of the median batch)",
      "none", (("floor", "floor: 2x rdtsc + 32 B TLS record"),
               ("off", "icxtrace, ICX_GPU_TIMING=off"),
               ("sample", "icxtrace, default (sample <=1/ms)"),
               ("all", "icxtrace, ICX_GPU_TIMING=all"),
               ("stacks", "icxtrace, default + ICX_STACKS=64")), first=True)
table("ibv_post_send (one 4 KiB RDMA WRITE), null libibverbs, ns per call", "v-none",
      (("v-agg", "icxtrace, aggregates (default)"), ("v-ev", "icxtrace, ICX_VERBS_EVENTS=1")))
table("ncclAllReduce, null libnccl + null libcudart (event records free here), ns per call", "n-none",
      (("n-off", "icxtrace, ICX_GPU_TIMING=off"), ("n-def", "icxtrace, default (GPU-timed)"),
       ("n-nostk", "icxtrace, default + ICX_STACKS=0")))
PY
. bench/startup.sh
# A traced process's end: the final frame, written by the destructor (return from main) or, for
# _exit, by the writer thread while _exit waits for it.
mkdir -p "$tmp/traced"
echo "start-up + exit of a traced process (10 copies, null libcudart), us, $SROUNDS runs each, interleaved"
printf "%-24s %9s %9s %9s\n" "variant" "median" "p90" "added"
for end in return _exit; do
    echo "$BUILD/bench/exit_copies $end"
    ICX_QUIET=1 ICX_OUTPUT="$tmp/traced/%p.icx.zst" $S "$LIB" "$SROUNDS" -- "$BUILD/bench/exit_copies" $end
done
if [ "$(ls "$tmp/traced" | wc -l)" -ne $((2 * (SROUNDS + 3))) ]; then
    echo "bench: the traced processes left $(ls "$tmp/traced" | wc -l) traces, not $((2 * (SROUNDS + 3)))" >&2
    exit 1
fi
