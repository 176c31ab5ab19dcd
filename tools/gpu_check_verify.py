#!/usr/bin/env python3
"""Holds an `icx-analyze --json` document to what the GPU check's job issued: a one-rank
communicator with exactly ITERS calls of each expected op and their bytes, every call timed on the
GPU (the job's calls: those in its tensors' size class), GPU times plausible (above 0, below MAX_MS), no hang or straggler findings.  Prints what it
saw; exit status 0 when it all holds.

  gpu_check_verify.py ANALYSIS.json ITERS BYTES [OP...]   (OPs default: AllReduce Broadcast AllGather)
  MAX_MS (environment, default 1000): the largest plausible median GPU time of one call

With --copies, holds the analysis of one gpu_check_copies run traced with ICX_GPU_TIMING=all to the
JSON line that run printed: every peer copy seen with its bytes and timed on the GPU at a plausible
rate, every host copy seen, the pinned buffer found; and prints the host cost of a small async peer
copy from the untraced and traced rounds (medians over rounds; not held to a number).

  gpu_check_verify.py --copies ANALYSIS.json TRUTH.json UNTRACED.jsonl TRACED.jsonl"""
import json
import os
import statistics
import sys


def verify(doc, iters, nbytes, ops, max_ms):
    errors = []
    comms = [c for c in doc.get("collectives", []) if c["nranks"] == 1]
    if len(comms) != 1:
        return ["want one 1-rank communicator, got %s" % [(c["comm_id"], c["nranks"]) for c in
                                                           doc.get("collectives", [])]]
    got = {o["op"]: o for o in comms[0]["ops"]}
    for op in ops:
        o = got.get(op)
        if not o:
            errors.append("%s: not seen (ops seen: %s)" % (op, sorted(got)))
            continue
        print("%-10s calls %d bytes %d gpu-timed %d  GPU p50 %.4f ms p99 %.4f ms  host call p50 %.4f ms"
              % (op, o["calls"], o["bytes"], o["gpu_timed_calls"], (o["gpu_time_p50_s"] or 0) * 1e3,
                 (o["gpu_time_p99_s"] or 0) * 1e3, (o["host_call_p50_s"] or 0) * 1e3))
        # PyTorch may add small calls of its own (a barrier's all-reduce): the job's are the
        # calls in the size class of its tensors
        cls = 1
        while cls < nbytes:
            cls *= 2
        mine = sum(h["calls"] for h in o["size_histogram"] if h["max_bytes"] == cls)
        print("           size histogram %s" % [(h["max_bytes"], h["calls"]) for h in o["size_histogram"]])
        if mine != iters or o["bytes"] < iters * nbytes:
            errors.append("%s: %d calls of <= %d bytes (%d bytes in all), want %d of %d" % (
                op, mine, cls, o["bytes"], iters, nbytes))
        if o["gpu_timed_calls"] != o["calls"]:
            errors.append("%s: %d of %d calls GPU-timed" % (op, o["gpu_timed_calls"], o["calls"]))
        p50 = o["gpu_time_p50_s"]
        if p50 is None or not (0 < p50 < max_ms / 1e3):
            errors.append("%s: GPU p50 %s s not in (0, %g ms)" % (op, p50, max_ms))
    bad = [f for f in doc.get("findings", []) if f["kind"] in ("hang", "straggler")]
    if bad:
        errors.append("findings %s" % bad)
    return errors


def verify_copies(doc, truth, none, traced):
    errors = []
    procs = doc.get("processes", [])
    if len(procs) != 1:
        return ["want one process, got %d" % len(procs)]
    p = procs[0]
    print("devices %s; notes %s" % (p["devices"], [n["text"] for n in p["notes"]]))
    want_ops = truth["peer_sync"] + truth["peer_async"] + truth["small_async"]
    want_bytes = (truth["peer_sync"] + truth["peer_async"]) * truth["bytes"] + truth["small_async"] * 64
    ops = sum(l["ops"] for l in doc["links"])
    nbytes = sum(l["bytes"] for l in doc["links"])
    timed = sum(l["gpu_timed_ops"] for l in doc["links"])
    for l in doc["links"]:
        print("link GPU%d->GPU%d %s ops %d bytes %d gpu-timed %d achieved %.1f GB/s busy %.1f GB/s" % (
            l["src"], l["dst"], l["kind"], l["ops"], l["bytes"], l["gpu_timed_ops"],
            (l["achieved_bytes_per_s"] or 0) / 1e9, (l["busy_bytes_per_s"] or 0) / 1e9))
    if truth["bad"]:
        errors.append("the workload saw %d bad copies" % truth["bad"])
    if p["peer_copies"] != want_ops or ops != want_ops or nbytes != want_bytes:
        errors.append("peer copies: traced %d, links %d ops %d bytes; issued %d, %d bytes" % (
            p["peer_copies"], ops, nbytes, want_ops, want_bytes))
    if timed != ops:
        errors.append("%d of %d peer copies GPU-timed (ICX_GPU_TIMING=all)" % (timed, ops))
    rates = [l["achieved_bytes_per_s"] for l in doc["links"] if l["achieved_bytes_per_s"]]
    if not rates or not all(1e10 < r < 1e13 for r in rates):
        errors.append("achieved rates %s B/s not in (10 GB/s, 10 TB/s)" % rates)
    pl = doc.get("placement", [{}])[0]
    host = sum(pl.get("host_copy_bytes_" + k, 0) for k in ("local", "remote", "unknown"))
    want_host = truth["h2d_pinned_bytes"] + truth["d2h_pinned_bytes"] + truth["d2h_pageable_bytes"]
    print("host copies: %d bytes (local %d, remote %d, unknown %d); pinned buffers %s; GPU NUMA node %s" % (
        host, pl.get("host_copy_bytes_local", 0), pl.get("host_copy_bytes_remote", 0),
        pl.get("host_copy_bytes_unknown", 0), pl.get("pinned_buffers"), pl.get("gpu_numa_node")))
    if host != want_host:
        errors.append("host copy bytes %d, issued %d" % (host, want_host))
    if not any(b["bytes"] == truth["bytes"] for b in pl.get("pinned_buffers", [])):
        errors.append("pinned buffer of %d bytes not found" % truth["bytes"])
    if none and traced:
        a = statistics.median(r["async_call_ns_p50"] for r in none)
        b = statistics.median(r["async_call_ns_p50"] for r in traced)
        print("small cudaMemcpyPeerAsync, host ns per call (median of %d rounds): untraced %.1f, "
              "traced (ICX_GPU_TIMING=sample) %.1f, added %.1f" % (len(none), a, b, b - a))
    return errors


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--copies":
        with open(sys.argv[2]) as f:
            doc = json.load(f)
        errors = verify_copies(doc, jsonl(sys.argv[3])[-1], jsonl(sys.argv[4]), jsonl(sys.argv[5]))
        for e in errors:
            print("FAIL:", e)
        print("copy check:", "FAIL" if errors else "PASS")
        return 1 if errors else 0
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    ops = sys.argv[4:] or ["AllReduce", "Broadcast", "AllGather"]
    errors = verify(doc, int(sys.argv[2]), int(sys.argv[3]), ops,
                    float(os.environ.get("MAX_MS", "1000")))
    for e in errors:
        print("FAIL:", e)
    print("gpu check:", "FAIL" if errors else "PASS")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
