#!/bin/sh
# Writes the golden traces of one format version with the tracer of that version:
#
#   tests/golden/make.sh TREE OUTDIR
#
# TREE is a built checkout of the commit whose tracer writes that version (git worktree add; make);
# OUTDIR the folder to fill (tests/golden/vX.Y).  The workloads are the ones TREE has: peer copies
# always; host<->device copies from a pinned buffer on a simulated two-socket node (placement,
# format 1.1); a 4-rank NCCL job over 2 simulated nodes with RDMA between them (verbs and NCCL,
# 1.2) -- its rank traces concatenated into one file, as a trace may be; that job hung by one rank
# with the hang watchdog on (hang dumps, 1.5).  The expected analyses are
# written by tests/golden/expect.py with the analyzer of this tree; traces are never rewritten.
set -eu
TREE=$(cd "$1" && pwd)
OUT=$2
B=$TREE/build
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$B/sim/lib ICXSIM_TOPOLOGY=$TREE/tests/sim/topologies/dgx-h100.topo
preload() { env ICX_QUIET=1 LD_PRELOAD="$B/lib/libicxtrace.so" "$@"; }

# every version: the peer-copy workload, as v1.0's golden trace was made
preload ICX_STACKS=1 ICX_GPU_TIMING=all RANK=3 WORLD_SIZE=8 SLURM_JOB_ID=777 \
    ICX_OUTPUT="$OUT/peer_copies.icx.zst" "$B/tests/peer_copies" "$OUT/peer_copies.truth"

if [ -x "$B/tests/host_copies" ]; then
    python3 "$TREE/tests/sim/mksysfs.py" "$ICXSIM_TOPOLOGY" "$tmp/fs"
    preload ICX_SYSFS_ROOT="$tmp/fs" ICX_FLUSH_MS=20 ICX_OUTPUT="$OUT/host_copies.icx.zst" \
        taskset -c 0 "$B/tests/host_copies" 5 200
fi

if [ -x "$B/tests/nccl/ddp_loop" ] && [ -x "$B/bin/icx-sim" ]; then
    mkdir -p "$tmp/job/oob"
    env -u LD_LIBRARY_PATH -u ICXSIM_TOPOLOGY ICX_QUIET=1 "$B/bin/icx-sim" --out "$tmp/job" \
        --nodes 2 --gpus-per-node 2 -- "$B/tests/nccl/ddp_loop" "$tmp/job/oob" 3 4096 >/dev/null
    cat "$tmp"/job/traces/*.icx.zst >"$OUT/nccl_job.icx.zst"
fi
# 1.5: hang dumps -- the same job with rank 1 blocked on a lock before step 2, the watchdog at
# 2 s, ended by SIGTERM after 5 s (its traces then complete)
if [ -f "$TREE/preload/hang.c" ] && [ -x "$B/tests/nccl/ddp_loop" ]; then
    mkdir -p "$tmp/hang/oob"
    env -u LD_LIBRARY_PATH -u ICXSIM_TOPOLOGY ICX_QUIET=1 ICX_HANG_S=2 "$B/bin/icx-sim" \
        --out "$tmp/hang" --nodes 2 --gpus-per-node 2 --hang-rank 1:2:lock --kill-after 5 \
        -- "$B/tests/nccl/ddp_loop" "$tmp/hang/oob" 5 4096 >/dev/null || [ $? -eq 124 ]
    cat "$tmp"/hang/traces/*.icx.zst >"$OUT/hang_job.icx.zst"
fi
ls -l "$OUT"
