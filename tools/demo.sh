#!/bin/sh
# make demo: on the simulated cluster.  Part 1: a simulated DGX-H100-like node (8 GPUs, NVLink
# through NVSwitch) runs a ring of peer copies under LD_PRELOAD=libicxtrace.so; icx-analyze then
# prints the per-link report, and the demo checks it against the ground truth the workload wrote.
set -eu
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/icx-demo.XXXXXX")
echo "== icxtrace demo on a SIMULATED node (tests/sim: 8 x H100-like GPUs, NVSwitch, PCIe Gen5) =="
echo "\$ LD_PRELOAD=$BUILD/lib/libicxtrace.so ICX_OUTPUT=$out/ demo_ring"
python3 tests/sim/mksysfs.py tests/sim/topologies/dgx-h100.topo "$out/sysfs"
LD_LIBRARY_PATH=$BUILD/sim/lib ICXSIM_TOPOLOGY=tests/sim/topologies/dgx-h100.topo \
    ICX_SYSFS_ROOT="$out/sysfs" ICX_GPU_TIMING=all ICX_OUTPUT="$out/" \
    "$BUILD/bin/icx-run" "$BUILD/tests/demo_ring" "$out/truth.txt"
echo
echo "\$ icx-analyze $out"
"$BUILD/bin/icx-analyze" "$out"
"$BUILD/bin/icx-analyze" --json "$out" >"$out/report.json"
python3 - "$out/report.json" "$out/truth.txt" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
got = {(l["src"], l["dst"]): (l["bytes"], l["ops"]) for l in doc["links"]}
truth = {}
for line in open(sys.argv[2]):
    s, d, b, n = map(int, line.split())
    truth[(s, d)] = (b, n)
ok = got == truth
print("\nground truth check: %d links, bytes and op counts %s" %
      (len(truth), "match exactly" if ok else "DIFFER: %s vs %s" % (got, truth)))
sys.exit(0 if ok else 1)
PY
echo "trace and report kept in $out"

# Part 2, the main job: a DDP-like training loop over NCCL, 16 ranks on 2 simulated nodes
# (tools/icx-sim; the simulated NCCL sends between nodes through the simulated libibverbs), with
# rank 5 made 60 ms slow before every step.  The analysis must name rank 5 and nobody else.
echo
echo "== the main job: 16 ranks over 2 SIMULATED nodes, NCCL (simulated) + RDMA (simulated) =="
echo "\$ icx-sim --nodes 2 --gpus-per-node 8 --slow-rank 5:60 -- ddp_loop DIR 6 65536"
job="$out/job"
mkdir -p "$job/oob"
"$BUILD/bin/icx-sim" --out "$job" --nodes 2 --gpus-per-node 8 --slow-rank 5:60 -- \
    "$BUILD/tests/nccl/ddp_loop" "$job/oob" 6 65536 >"$job/stdout"
echo "  $(grep -c 'results correct' "$job/stdout") of 16 ranks: every collective's result correct"
echo
echo "\$ icx-analyze $job/traces   (NCCL part)"
"$BUILD/bin/icx-analyze" "$job/traces" | sed -n '/^NCCL per communicator/,$p'
"$BUILD/bin/icx-analyze" --json --perfetto "$job/timeline.json" --html "$job/report.html" \
    "$job/traces" >"$job/report.json" 2>/dev/null
python3 tests/e2e/timeline_check.py "$job/timeline.json" >/dev/null
python3 - "$job/report.json" "$job/truth.json" <<'PY'
import json, sys
doc, truth = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = truth["slow_rank"]["rank"]
named = sorted({r for f in doc["findings"] if f["kind"] == "straggler" for r in f["ranks"]})
others = [f["kind"] for f in doc["findings"] if f["kind"] != "straggler"]
ok = named == [want] and not others
print("\nground truth check: injected slow rank %d, named %s%s -> %s" % (
    want, named, ", other findings %s" % others if others else "", "match" if ok else "DIFFER"))
sys.exit(0 if ok else 1)
PY
echo "job traces and report kept in $job"
echo
echo "HTML report (one file, opens offline; docs/HTML.md): $job/report.html"
echo "timeline, to drop into https://ui.perfetto.dev (the file stays in the browser): $job/timeline.json"
