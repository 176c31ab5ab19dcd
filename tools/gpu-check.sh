#!/bin/bash
# The real-GPU check: a PyTorch job with the NCCL backend (world size 1; all_reduce, broadcast,
# all_gather) runs under libicxtrace.so on a machine with a GPU, and icx-analyze must see exactly
# those calls, each timed on the GPU with a plausible time; the job's loop time traced and not.
# Then a C workload built with nvcc -cudart shared (tools/gpu_check_copies.c) makes a known set of
# peer and host copies: every one must be seen, and the host cost of a small async peer copy is
# measured with and without the tracer; and a binary with nvcc's default static runtime must be
# detected and named.
#
#   tools/gpu-check.sh --pack      (here, where the project builds) build, and copy the shared
#                                  libraries the tracer needs next to it: build/gpu-pack/
#   tools/gpu-check.sh [OUTDIR]    (on the GPU machine, with build/ carried over) run and check;
#                                  traces, the analysis and a log go to OUTDIR ($OUT, else
#                                  ./gpu-check-out).  Exit status 0: the check held.
#
# Environment: ITERS (default 20), COUNT (float32 elements per tensor, default 1048576), MAX_MS,
# JOB_TIMEOUT (s, per PyTorch run, default 150); NCOPY, CBYTES, CALLS (tools/gpu_check_copies.c);
# PARTS (default "nccl copies static"): the parts to run.
# Nothing is downloaded; PyTorch, a GPU driver and NCCL must be on the machine.
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LIB=$ROOT/build/lib/libicxtrace.so
ANALYZE=$ROOT/build/bin/icx-analyze
PACK=$ROOT/build/gpu-pack

if [ "${1:-}" = "--pack" ]; then
    make -s all >/dev/null || { echo "gpu-check: build failed" >&2; exit 1; }
    rm -rf "$PACK" && mkdir -p "$PACK/lib"
    # the non-libc libraries the tracer and the analyzer load (the GPU machine may lack them)
    for f in "$LIB" "$ANALYZE"; do
        ldd "$f" | awk '/=> \// { print $3 }' | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
            while read -r so; do cp -L "$so" "$PACK/lib/"; done
    done
    ls "$PACK/lib"
    echo "gpu-check: packed; carry build/ to the GPU machine and run tools/gpu-check.sh there"
    exit 0
fi

OUTDIR=${1:-${OUT:-$ROOT/gpu-check-out}}
ITERS=${ITERS:-20}
COUNT=${COUNT:-1048576}
mkdir -p "$OUTDIR/traces"
LOG=$OUTDIR/gpu-check.log
exec > >(tee "$LOG") 2>&1

fail() { echo "gpu-check: $*"; echo "gpu check: FAIL"; exit 1; }

[ -f "$LIB" ] && [ -x "$ANALYZE" ] || fail "no build (run tools/gpu-check.sh --pack where the project builds, carry build/)"
# Only the packed libraries this machine lacks go on the search path: the job's own (Python's
# liblzma, say) must stay the machine's.
mkdir -p "$PACK/missing" && rm -f "$PACK/missing/"*
for so in "$PACK"/lib/*; do
    ldconfig -p | grep -q "^[[:space:]]*$(basename "$so") " || ln -s "$so" "$PACK/missing/"
done
echo "packed libraries used: $(ls "$PACK/missing" | tr '\n' ' ')"
export LD_LIBRARY_PATH=$PACK/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$ANALYZE" --help >/dev/null 2>&1 || fail "icx-analyze does not run here: $("$ANALYZE" --help 2>&1 | head -2)"
RC=0
PARTS=${PARTS:-nccl copies static}
TO=${JOB_TIMEOUT:-150}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDALIB=$(cd "$(dirname "$NVCC")/.." && pwd)/lib64
W=$OUTDIR/work
mkdir -p "$W"
command -v nvidia-smi >/dev/null && { nvidia-smi -L; nvidia-smi topo -m | sed 's/^/  topo: /'; }

# 1. PyTorch's NCCL backend, untraced then traced; the calls held to what the job issued.
part_nccl() {
    python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || {
        echo "FAIL: PyTorch with a usable CUDA device is not available here"; return 1; }
    local tl rc=0 t0
    tl=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
    echo "torch libraries: $(ls "$tl" | grep -E 'libtorch_cuda|cudart|nccl' | tr '\n' ' ')"
    ldd "$tl/libtorch_cuda.so" 2>/dev/null | grep -E 'nccl|cudart' | sed 's/^/  links: /'
    echo "== untraced run"
    timeout "$TO" python3 "$ROOT/tools/gpu_check_job.py" "$ITERS" "$COUNT" | tee "$OUTDIR/job-untraced.json" || {
        echo "FAIL: the job fails without the tracer"; return 1; }
    echo "== traced run"
    t0=$(date +%s.%N)
    timeout "$TO" env ICX_OUTPUT="$OUTDIR/traces/%h-%p.icx.zst" LD_PRELOAD="$LIB" \
        python3 "$ROOT/tools/gpu_check_job.py" "$ITERS" "$COUNT" | tee "$OUTDIR/job.json" || {
        echo "FAIL: the job fails under the tracer"; return 1; }
    echo "traced run took $(python3 -c "import time; print('%.1f' % (time.time() - $t0))") s"
    "$ANALYZE" summarize "$OUTDIR/traces"
    "$ANALYZE" --json -o "$OUTDIR/analysis.json" "$OUTDIR/traces" || rc=1
    "$ANALYZE" "$OUTDIR/traces" > "$OUTDIR/report.txt" || rc=1
    sed -n '/NCCL per communicator/,/^$/p' "$OUTDIR/report.txt"
    python3 "$ROOT/tools/gpu_check_verify.py" "$OUTDIR/analysis.json" "$ITERS" "$((COUNT * 4))" || rc=1
    python3 - "$OUTDIR/job-untraced.json" "$OUTDIR/job.json" <<'PY'
import json, sys
a, b = (json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:3])
print("NCCL job loop: untraced %.4f s, traced %.4f s (x%.3f; one run each, after warm-up)" % (
    a["loop_s"], b["loop_s"], b["loop_s"] / a["loop_s"]))
PY
    return $rc
}

# 2. Peer and host copies through a dynamically linked CUDA runtime (nvcc -cudart shared), every
# one held to the workload's ground truth; and the host cost of a small async peer copy with and
# without the tracer, rounds interleaved so machine noise hits both alike.
run_copies() { # MODE OUTFILE [TRACEDIR]: one run, traced unless MODE is none
    if [ "$1" = none ]; then
        LD_LIBRARY_PATH=$CUDALIB:$LD_LIBRARY_PATH timeout 60 "$W/copies" "$NCOPY" "$CBYTES" "$CALLS"
    else
        rm -rf "$3" && mkdir -p "$3"
        LD_LIBRARY_PATH=$CUDALIB:$LD_LIBRARY_PATH timeout 60 env ICX_GPU_TIMING="$1" \
            ICX_OUTPUT="$3/c.icx.zst" LD_PRELOAD="$LIB" "$W/copies" "$NCOPY" "$CBYTES" "$CALLS"
    fi >> "$2"
}
part_copies() {
    local rc=0 r
    NCOPY=${NCOPY:-16} CBYTES=${CBYTES:-8388608} CALLS=${CALLS:-31000}
    echo "== copies (cudart shared)"
    timeout 120 "$NVCC" -cudart shared -o "$W/copies" "$ROOT/tools/gpu_check_copies.c" || {
        echo "FAIL: nvcc -cudart shared failed"; return 1; }
    for r in 1 2 3 4 5; do
        run_copies none "$W/copies-none.json" || { echo "FAIL: untraced copies failed"; rc=1; }
        run_copies sample "$W/copies-traced.json" "$OUTDIR/copies/sample" || {
            echo "FAIL: traced copies failed"; rc=1; }
    done
    run_copies all "$W/copies-all.json" "$OUTDIR/copies/all" || { echo "FAIL: traced copies failed"; rc=1; }
    cat "$W/copies-none.json" "$W/copies-traced.json" "$W/copies-all.json"
    "$ANALYZE" "$OUTDIR/copies/all" | head -30
    "$ANALYZE" --json -o "$W/copies-analysis.json" "$OUTDIR/copies/all" || return 1
    python3 "$ROOT/tools/gpu_check_verify.py" --copies "$W/copies-analysis.json" "$W/copies-all.json" \
        "$W/copies-none.json" "$W/copies-traced.json" || rc=1
    return $rc
}

# 3. nvcc's default links the CUDA runtime statically: the tracer must say it cannot see it.
part_static() {
    echo "== static cudart (nvcc default)"
    mkdir -p "$OUTDIR/static"
    timeout 120 "$NVCC" -o "$W/static_cudart" "$ROOT/tests/static/static_cudart.c" || {
        echo "FAIL: nvcc failed"; return 1; }
    timeout 60 env ICX_OUTPUT="$OUTDIR/static/s.icx.zst" LD_PRELOAD="$LIB" "$W/static_cudart" 2> "$W/static.err"
    cat "$W/static.err"
    grep -q statically "$W/static.err" && "$ANALYZE" summarize "$OUTDIR/static" | grep statically || {
        echo "FAIL: static cudart not reported"; return 1; }
    echo "static cudart: detected and named (stderr and trace)"
}

for part in $PARTS; do
    "part_$part" || { RC=1; echo "gpu check part $part: FAIL"; }
done
# at most 8 files come back from $OUT: traces and the work files go into one archive
(cd "$OUTDIR" && tar czf gpu-check-files.tgz $(ls -d traces copies static work 2>/dev/null) &&
    rm -rf traces copies static work)
echo "gpu check ($PARTS):" "$([ "$RC" = 0 ] && echo PASS || echo FAIL)"
exit "$RC"
