#!/bin/bash
# The real-GPU check (issue: NCCL traced end to end): a PyTorch job with the NCCL backend (world
# size 1; all_reduce, broadcast, all_gather) runs under libicxtrace.so on a machine with a GPU, and
# icx-analyze must see exactly those calls, each timed on the GPU with a plausible time.
#
#   tools/gpu-check.sh --pack      (here, where the project builds) build, and copy the shared
#                                  libraries the tracer needs next to it: build/gpu-pack/
#   tools/gpu-check.sh [OUTDIR]    (on the GPU machine, with build/ carried over) run and check;
#                                  traces, the analysis and a log go to OUTDIR ($OUT, else
#                                  ./gpu-check-out).  Exit status 0: the check held.
#
# Environment: ITERS (default 20), COUNT (float32 elements per tensor, default 1048576), MAX_MS.
# Nothing is downloaded; PyTorch, a GPU driver and NCCL must be on the machine.
set -u
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
export LD_LIBRARY_PATH=$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$ANALYZE" --help >/dev/null 2>&1 || fail "icx-analyze does not run here: $("$ANALYZE" --help 2>&1 | head -2)"
command -v nvidia-smi >/dev/null && nvidia-smi -L
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    fail "PyTorch with a usable CUDA device is not available here"
TL=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
echo "torch libraries: $(ls "$TL" | grep -E 'libtorch_cuda|cudart|nccl' | tr '\n' ' ')"
ldd "$TL/libtorch_cuda.so" 2>/dev/null | grep -E 'nccl|cudart' | sed 's/^/  links: /'

echo "== untraced run"
python3 "$ROOT/tools/gpu_check_job.py" "$ITERS" "$COUNT" || fail "the job fails without the tracer"
echo "== traced run"
T0=$(date +%s.%N)
ICX_OUTPUT="$OUTDIR/traces/%h-%p.icx.zst" LD_PRELOAD=$LIB \
    python3 "$ROOT/tools/gpu_check_job.py" "$ITERS" "$COUNT" | tee "$OUTDIR/job.json" ||
    fail "the job fails under the tracer"
echo "traced run took $(echo "$(date +%s.%N) - $T0" | bc 2>/dev/null || echo '?') s"
"$ANALYZE" summarize "$OUTDIR/traces"
"$ANALYZE" --json -o "$OUTDIR/analysis.json" "$OUTDIR/traces" || fail "icx-analyze failed"
"$ANALYZE" "$OUTDIR/traces" > "$OUTDIR/report.txt" || true
sed -n '/NCCL per communicator/,/^$/p' "$OUTDIR/report.txt"
python3 "$ROOT/tools/gpu_check_verify.py" "$OUTDIR/analysis.json" "$ITERS" "$((COUNT * 4))"
