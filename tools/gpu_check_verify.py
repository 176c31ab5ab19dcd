#!/usr/bin/env python3
"""Holds an `icx-analyze --json` document to what the GPU check's job issued: a one-rank
communicator with exactly ITERS calls of each expected op and their bytes, every call timed on the
GPU (the job's calls: those in its tensors' size class), GPU times plausible (above 0, below MAX_MS), no hang or straggler findings.  Prints what it
saw; exit status 0 when it all holds.

  gpu_check_verify.py ANALYSIS.json ITERS BYTES [OP...]   (OPs default: AllReduce Broadcast AllGather)
  MAX_MS (environment, default 1000): the largest plausible median GPU time of one call"""
import json
import os
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


def main():
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
