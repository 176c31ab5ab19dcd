#!/bin/sh
# make demo: the main job on the simulated cluster.  A simulated DGX-H100-like node (8 GPUs, NVLink
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
