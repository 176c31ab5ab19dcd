#!/usr/bin/env python3
"""The job-level half of `make bench-peers` (bench/peers.sh runs it after the per-call table):

1. Sustained rate: bench/bench_rate at rising call rates, 1 and 2 threads, under icxtrace's
   default mode; per rate the calls made, the rate achieved, the longest a thread was behind its
   schedule, the events in the trace and the losses by cause.
2. Job slowdown: the simulated 16-rank training job (tools/icx-sim + tests/nccl/ddp_loop, and
   tests/nccl/train.py) and the simulated peer-copy workload (tests/e2e/many_copies), each run with
   and without the tracer, alternating, ROUNDS times; the median of the per-pair ratios of wall
   time and of CPU time (user + system of all the job's processes: on this 2-CPU machine 16 ranks
   share two CPUs, and the CPU time is the steadier measure of what the tracer costs).
3. Trace bytes per rank-minute and per event, default and full-event mode (ICX_VERBS_EVENTS=1
   ICX_GPU_TIMING=all): the DDP-like loop, the copy-heavy job, and 1 million RDMA work requests
   per second (bench_rate, 2 threads x 500,000/s).

Everything is simulated (the null or simulated libraries of bench/ and tests/sim): the figures are
the tracer's own cost, not a GPU's or a NIC's.  Prints Markdown tables."""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(os.environ.get("JOB_ROUNDS", "5"))
LIB = os.path.join(BUILD, "lib", "libicxtrace.so")
ANALYZE = os.path.join(BUILD, "bin", "icx-analyze")
FULL = {"ICX_VERBS_EVENTS": "1", "ICX_GPU_TIMING": "all"}


def analyze(paths):
    p = subprocess.run([ANALYZE, "--json"] + paths, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench-peers: icx-analyze failed: %s" % p.stderr[-500:])
    return json.loads(p.stdout)


def env_with(**kv):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("ICX_"):
            del e[k]
    e.update({k: str(v) for k, v in kv.items()})
    return e


def lost_of(doc):
    lost = {}
    for p in doc["processes"]:
        for k, n in p["lost"].items():
            if n:
                lost[k] = lost.get(k, 0) + n
    return lost


def sustained():
    print("\n### Sustained rate (bench/bench_rate, 1 s per rate, icxtrace default, default 1 MiB ring)\n")
    print("| call | threads | asked per thread | achieved per thread | max behind, us | calls | in the trace | lost |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    best = {}
    for call in ("copy", "post_send"):
        for threads in (1, 2):
            for rate in (1e5, 5e5, 1e6, 2e6, 4e6, 6e6, 8e6, 10e6, 15e6):
                with tempfile.TemporaryDirectory() as tmp:
                    out = os.path.join(tmp, "t.icx.zst")
                    p = subprocess.run([os.path.join(BUILD, "bench", "bench_rate"), call, str(rate), "1",
                                        str(threads)], env=env_with(LD_PRELOAD=LIB, ICX_OUTPUT=out, ICX_QUIET=1),
                                       capture_output=True, text=True, timeout=120)
                    if p.returncode != 0:
                        sys.exit("bench-peers: bench_rate: %s" % p.stderr)
                    calls, achieved, behind = p.stdout.split()
                    doc = analyze([out])
                    got = doc["processes"][0]["peer_copies"] if call == "copy" else \
                        sum(n["work_requests"] for n in doc["verbs"]["nics"])
                    lost = lost_of(doc)
                    if not lost and got == int(calls):
                        best[(call, threads)] = max(best.get((call, threads), 0), float(achieved))
                    print("| %s | %d | %.1f M/s | %.2f M/s | %s | %s | %d | %s |" % (
                        call, threads, rate / 1e6, float(achieved) / 1e6, behind, calls, got,
                        ", ".join("%s %d" % kv for kv in sorted(lost.items())) or "none"))
    print()
    for (call, threads), r in sorted(best.items()):
        print("- %s, %d thread(s): nothing lost up to %.2f M calls/s per thread (highest rate tried "
              "without a loss)" % (call, threads, r / 1e6))


def timed(cmd, env, cwd=None, cpu=None):
    """Wall seconds of cmd; its processes' CPU seconds (user + system) appended to cpu."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=cwd)
    dt = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("bench-peers: %s exited %d: %s" % (cmd[:3], p.returncode, p.stderr[-800:]))
    if cpu is not None:
        cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return dt


def sim_job(tmp, traced, program, steps, count, extra=None):
    """(command, env) of a 2 x 8-rank simulated job (tools/icx-sim)."""
    oob = os.path.join(tmp, "oob")
    os.makedirs(oob, exist_ok=True)
    cmd = [os.path.join(BUILD, "bin", "icx-sim"), "--out", tmp, "--topology",
           os.path.join(ROOT, "tests", "sim", "topologies", "dgx-h100.topo")]
    if not traced:
        cmd.append("--no-trace")
    cmd += ["--"] + program + [oob, str(steps), str(count)]
    return cmd, env_with(ICX_QUIET=1, **(extra or {}))


def copies_job(tmp, traced, n, extra=None):
    env = env_with(LD_LIBRARY_PATH=os.path.join(BUILD, "sim", "lib"),
                   ICXSIM_TOPOLOGY=os.path.join(ROOT, "tests", "sim", "topologies", "dgx-h100.topo"),
                   ICX_QUIET=1, ICX_OUTPUT=os.path.join(tmp, "trace.icx.zst"), **(extra or {}))
    if traced:
        env["LD_PRELOAD"] = LIB
    return [os.path.join(BUILD, "tests", "many_copies"), str(n)], env


JOBS = {
    "ddp_loop, 16 ranks, 5 steps": lambda tmp, tr, extra=None: sim_job(
        tmp, tr, [os.path.join(BUILD, "tests", "nccl", "ddp_loop")], 5, 65536, extra),
    "ddp_loop, 16 ranks, 50 steps": lambda tmp, tr, extra=None: sim_job(
        tmp, tr, [os.path.join(BUILD, "tests", "nccl", "ddp_loop")], 50, 65536, extra),
    "train.py, 16 ranks, 10 steps": lambda tmp, tr, extra=None: sim_job(
        tmp, tr, ["python3", os.path.join(ROOT, "tests", "nccl", "train.py")], 10, 65536, extra),
    "many_copies, 200,000 peer copies": lambda tmp, tr, extra=None: copies_job(tmp, tr, 200000, extra),
}


def slowdown():
    print("\n### Job wall time with and without the tracer (simulated; %d alternating pairs)\n" % ROUNDS)
    print("| job | wall untraced, s | wall traced, s | wall ratio, median of pairs | spread | CPU untraced, s | CPU traced, s | CPU ratio, median | spread |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, make in JOBS.items():
        wall = {False: [], True: []}
        cpu = {False: [], True: []}
        for r in range(ROUNDS):
            for tr in ((False, True) if r % 2 == 0 else (True, False)):
                with tempfile.TemporaryDirectory() as tmp:
                    cmd, env = make(tmp, tr)
                    wall[tr].append(timed(cmd, env, cwd=tmp, cpu=cpu[tr]))
        wr = [t / u for t, u in zip(wall[True], wall[False])]
        cr = [t / u for t, u in zip(cpu[True], cpu[False])]
        med = statistics.median
        print("| %s | %.3f | %.3f | %.4f | %.3f-%.3f | %.3f | %.3f | %.4f | %.3f-%.3f |" % (
            name, med(wall[False]), med(wall[True]), med(wr), min(wr), max(wr),
            med(cpu[False]), med(cpu[True]), med(cr), min(cr), max(cr)))


def raw_bytes(paths):
    """Bytes the traces hold once decompressed (zstd -dc)."""
    n = 0
    for f in paths:
        p = subprocess.run(["zstd", "-dcq", f], capture_output=True)
        n += len(p.stdout)
    return n


def trace_size():
    print("\n### Trace size (simulated jobs; bytes on disk, compressed)\n")
    print("| job | mode | ranks | seconds | events | bytes | bytes per event | MB per rank-minute | compression |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    cases = [("ddp_loop, 16 ranks, 50 steps", JOBS["ddp_loop, 16 ranks, 50 steps"]),
             ("many_copies, 200,000 peer copies", JOBS["many_copies, 200,000 peer copies"])]
    for name, make in cases:
        for mode, extra in (("default", {}), ("full-event", FULL)):
            with tempfile.TemporaryDirectory() as tmp:
                cmd, env = make(tmp, True, extra)
                timed(cmd, env, cwd=tmp)
                paths = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs if ".icx.zst" in f]
                doc = analyze(paths)
                ranks = len(doc["processes"])
                secs = max(p["duration_s"] for p in doc["processes"])
                events = sum(p["events_recorded"] for p in doc["processes"])
                nbytes = sum(os.path.getsize(f) for f in paths)
                print("| %s | %s | %d | %.2f | %d | %d | %.2f | %.3f | %.1fx |" % (
                    name, mode, ranks, secs, events, nbytes, nbytes / max(events, 1),
                    nbytes / ranks / (secs / 60) / 1e6, raw_bytes(paths) / max(nbytes, 1)))
    # 1 M work requests per second in aggregate: 2 threads x 500,000/s for 10 s, one process
    for mode, extra in (("default (aggregates)", {}), ("full-event", FULL)):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.icx.zst")
            p = subprocess.run([os.path.join(BUILD, "bench", "bench_rate"), "post_send", "500000", "10", "2"],
                               env=env_with(LD_PRELOAD=LIB, ICX_OUTPUT=out, ICX_QUIET=1, **extra),
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                sys.exit("bench-peers: bench_rate: %s" % p.stderr)
            doc = analyze([out])
            secs = doc["processes"][0]["duration_s"]
            wrs = sum(n["work_requests"] for n in doc["verbs"]["nics"])
            nbytes = os.path.getsize(out)
            lost = lost_of(doc)
            print("| 1 M RDMA work requests/s (2 x 500,000/s)%s | %s | 1 | %.2f | %d WRs | %d | %.2f per WR | %.3f | %.1fx |" % (
                ", lost: " + ", ".join("%s %d" % kv for kv in sorted(lost.items())) if lost else "",
                mode, secs, wrs, nbytes, nbytes / max(wrs, 1), nbytes / (secs / 60) / 1e6,
                raw_bytes([out]) / max(nbytes, 1)))


if __name__ == "__main__":
    parts = sys.argv[2:] or ["sustained", "slowdown", "size"]
    if "sustained" in parts:
        sustained()
    if "slowdown" in parts:
        slowdown()
    if "size" in parts:
        trace_size()
