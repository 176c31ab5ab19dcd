#!/bin/sh
# make bench-peers: icxtrace next to the tracers a user would otherwise pick, on the same calls,
# in one run.  bench/bench_peers makes each call (cudaMemcpyPeerAsync, ibv_post_send through the
# context's ops, ncclAllReduce) against the null libraries of bench/ under: no tracer; icxtrace in
# its default and in full-event mode; an LTTng-UST 2.13 tracepoint preload (bench/peers/lttng_peer.c)
# with a per-UID session recording to disk; uftrace recording library calls; ltrace (few calls: it
# stops the process twice per call).  Variants interleaved round by round, all pinned to one CPU
# (BENCH_CPU).  Then the sustained-rate sweep (bench/bench_rate).  Prints the tables of
# docs/PERFORMANCE.md; fails if a tracer recorded more events than calls were made.
set -eu
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
BATCHES=${BATCHES:-150}
PER=${PER:-2000}
CPU=${BENCH_CPU:-1}
PKGS="lttng-tools liblttng-ust-dev babeltrace uftrace ltrace"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "bench-peers: installing$missing"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null
    else
        echo "bench-peers: missing Debian packages:$missing (apt-get install$missing)" >&2
        exit 1
    fi
fi
make --no-print-directory -s BUILD="$BUILD" "$BUILD/bench/peers/liblttng_peer.so"
ABS=$(cd "$BUILD" && pwd)
LIB="$ABS/lib/libicxtrace.so"
P="$ABS/bench/bench_peers"
PG="$ABS/bench/peers/pg" # the null libibverbs built with -pg, for uftrace (see below)
tmp=$(mktemp -d)
# our own session daemon (no kernel tracing), stopped at the end
ours=""
if ! pgrep -x lttng-sessiond >/dev/null; then
    lttng-sessiond --daemonize --no-kernel --pidfile "$tmp/sessiond.pid"
    ours=1
fi
stop_lttng() {
    for s in $(lttng list 2>/dev/null | sed -n 's/^ *[0-9][0-9]*) \(bp-[^ ]*\) .*/\1/p'); do
        lttng destroy "$s" >/dev/null 2>&1 || true
    done
    if [ -n "$ours" ] && [ -f "$tmp/sessiond.pid" ]; then kill "$(cat "$tmp/sessiond.pid")" 2>/dev/null || true; fi
}
trap 'stop_lttng; rm -rf "$tmp"' EXIT
pin() { taskset -c "$CPU" "$@"; }
fn_of() { case $1 in copy) echo cudaMemcpyPeerAsync ;; post_send) echo null_post_send ;; *) echo ncclAllReduce ;; esac; }
for r in $(seq "$ROUNDS"); do
    for m in copy post_send allreduce; do
        o="$tmp/$m"
        mkdir -p "$o"
        pin "$P" $m "$BATCHES" "$PER" >>"$o/none"
        for v in def off full; do
            rm -f "$o/icx-$v.icx.zst"*
            case $v in
            full) set -- ICX_VERBS_EVENTS=1 ICX_GPU_TIMING=all ;;
            off) set -- ICX_GPU_TIMING=off ;;
            *) set -- ;;
            esac
            env "$@" ICX_QUIET=1 ICX_OUTPUT="$o/icx-$v.icx.zst" LD_PRELOAD="$LIB" \
                taskset -c "$CPU" "$P" $m "$BATCHES" "$PER" >>"$o/icx-$v"
            "$ABS/bin/icx-analyze" --json "$o/icx-$v.icx.zst" >"$o/icx-$v.$r.json"
        done
        # LTTng-UST: a fresh per-UID session per run, recording to disk, the default channel
        lttng create "bp-$m-$r" --output="$o/lt-$r" >/dev/null
        lttng enable-event -u "icxpeer:$m" >/dev/null
        lttng start >/dev/null
        LD_PRELOAD="$ABS/bench/peers/liblttng_peer.so" taskset -c "$CPU" "$P" $m "$BATCHES" "$PER" >>"$o/lttng"
        lttng stop >/dev/null
        lttng destroy >/dev/null
        babeltrace "$o/lt-$r" 2>"$o/lt-$r.err" | grep -c "icxpeer:$m:" >>"$o/lttng.events" || true
        rm -rf "$o/lt-$r"
        # uftrace: its library-call recording (PLT hooks; --force: the program has no mcount).
        # The inline ibv_post_send makes no library call, so there the null provider is the one
        # built with -pg, whose post_send uftrace then records as a function.
        rm -rf "$o/uf"
        if [ $m = post_send ]; then set -- env LD_LIBRARY_PATH="$PG"; else set --; fi
        "$@" taskset -c "$CPU" uftrace record --force -d "$o/uf" "$P" $m "$BATCHES" "$PER" >>"$o/uftrace"
        uftrace report -d "$o/uf" 2>/dev/null | awk -v f="$(fn_of $m)" '$NF == f {print $(NF-1)}' >>"$o/uftrace.events"
        # ltrace: 2 x 2 bursts of 100 calls after the warm-up
        if [ $m = post_send ]; then set -- -L -x null_post_send@libibverbs.so.1; else set -- -L -x "$(fn_of $m)"; fi
        taskset -c "$CPU" ltrace -o "$o/lt.txt" "$@" "$P" $m 2 100 >>"$o/ltrace"
        grep -c "$(fn_of $m)" "$o/lt.txt" >>"$o/ltrace.events" || true
    done
done
python3 - "$tmp" "$ROUNDS" <<'PY'
import glob, json, os, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
titles = {"copy": "cudaMemcpyPeerAsync (64 B, null libcudart)",
          "post_send": "ibv_post_send (one 4 KiB RDMA WRITE, null provider, through the context's ops)",
          "allreduce": "ncclAllReduce (1,024 floats, null libnccl + null libcudart)"}
def runs(m, v):
    return [[float(x) for x in l.split()] for l in open(os.path.join(d, m, v))]
def icx_events(doc, m):
    if m == "copy":
        return doc["processes"][0]["peer_copies"]
    if m == "post_send":
        return sum(n["work_requests"] for n in doc["verbs"]["nics"])
    return sum(o["calls"] for c in doc["collectives"] for o in c["ops"] if o["op"] == "AllReduce")
bad = []
for m in ("copy", "post_send", "allreduce"):
    base = runs(m, "none")
    b_med = statistics.median(r[0] for r in base)
    b_p99 = statistics.median(r[1] for r in base)
    b_mean = statistics.median(r[2] for r in base)
    rows = []
    for v, label in (("icx-def", "icxtrace, default"), ("icx-off", "icxtrace, ICX_GPU_TIMING=off"),
                     ("icx-full", "icxtrace, full-event mode"),
                     ("lttng", "LTTng-UST 2.13 tracepoint, per-UID session to disk"),
                     ("uftrace", "uftrace 0.13 record (library calls)"), ("ltrace", "ltrace 0.7.3")):
        rs = runs(m, v)
        calls = sum(int(r[3]) for r in rs)
        lost = ""
        per_call = 1.0  # records per call: the peers write one event per call
        if v.startswith("icx"):
            docs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(d, m, v + ".*.json")))]
            got = sum(icx_events(x, m) for x in docs)
            recs = sum(x["processes"][0]["events_recorded"] for x in docs)
            per_call = recs / max(got, 1) if m != "post_send" or v == "icx-full" else 0.0
            causes = {}
            for x in docs:
                for k, n in x["processes"][0]["lost"].items():
                    if n:
                        causes[k] = causes.get(k, 0) + n
            lost = ", ".join("%s %d" % kv for kv in sorted(causes.items()))
        else:
            got = sum(int(l) for l in open(os.path.join(d, m, v + ".events")) if l.strip())
            if v == "lttng":
                disc = 0
                for f in glob.glob(os.path.join(d, m, "lt-*.err")):
                    disc += sum(int(x) for x in re.findall(r"discarded (\d+) events", open(f).read()))
                lost = "discarded %d" % disc if disc else ""
        if got > calls:
            bad.append("%s %s: %d events for %d calls" % (m, v, got, calls))
        if got < calls and not lost:
            lost = "not recorded %d" % (calls - got)
        rows.append((label, statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs),
                     statistics.median(r[2] for r in rs), min(r[2] for r in rs), max(r[2] for r in rs),
                     got, calls, lost or "none", per_call))
    icx_added = rows[0][3] - b_mean
    print("\n%s: ns per call, median of %d rounds" % (titles[m], rounds))
    print("| variant | added, mean | spread over rounds | per call: median | p99 | calls recorded / made | lost | records per call | x icxtrace |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    print("| no tracer | (%.1f) | | %.0f | %.0f | | | | |" % (b_mean, b_med, b_p99))
    for label, med, p99, mean, lo, hi, got, calls, lost, per_call in rows:
        added = mean - b_mean
        print("| %s | %.1f | %.1f-%.1f | %.0f | %.0f | %d / %d | %s | %s | %s |" % (
            label, added, lo - b_mean, hi - b_mean, med, p99, got, calls, lost,
            "%.2f" % per_call if per_call else "aggregated",
            "%.1f" % (added / icx_added) if icx_added > 0 else "-"))
if bad:
    sys.exit("bench-peers: " + "; ".join(bad))
PY
# The job-level figures: sustained rate, job slowdown, trace bytes (bench/peers_job.py).
python3 bench/peers_job.py "$BUILD"
# Start-up of processes that use no traced API (the same as make bench's).
LIB="$ABS/lib/libicxtrace.so"
. bench/startup.sh
