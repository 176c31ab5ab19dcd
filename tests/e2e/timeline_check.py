#!/usr/bin/env python3
"""Checks a timeline written by `icx-analyze --perfetto` against what Perfetto's JSON importer
needs (docs/TIMELINE.md): every event well formed, every track's slices in time order and
properly nested, every flow bound from a start through its steps to an end, later in time, every
counter value a finite number, every process and thread named.

  timeline_check.py FILE     prints the problems found (at most 20) and exits 1 if there are any

As a module: problems(doc) -> list of strings; chains(doc) -> the flows, each a list of slices.
"""
import json
import math
import sys


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def problems(doc):
    out = []
    ev = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(ev, list):
        return ["no traceEvents list"]
    pnames, tnames, tracks, used_p, used_t = set(), set(), {}, set(), set()
    for i, e in enumerate(ev):
        ph = e.get("ph")
        if ph not in ("X", "M", "C") or not isinstance(e.get("pid"), int):
            out.append("event %d: phase %r or pid %r" % (i, ph, e.get("pid")))
            continue
        if ph == "M":
            if e.get("name") == "process_name":
                pnames.add(e["pid"])
            elif e.get("name") == "thread_name":
                tnames.add((e["pid"], e.get("tid")))
            continue
        if not _num(e.get("ts")) or e["ts"] < 0 or not isinstance(e.get("name"), str):
            out.append("event %d: ts %r name %r" % (i, e.get("ts"), e.get("name")))
            continue
        used_p.add(e["pid"])
        if ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(_num(v) for v in args.values()):
                out.append("counter %d (%s): values %r" % (i, e["name"], args))
            continue
        if not isinstance(e.get("tid"), int) or not _num(e.get("dur")) or e["dur"] < 0:
            out.append("slice %d: tid %r dur %r" % (i, e.get("tid"), e.get("dur")))
            continue
        used_t.add((e["pid"], e["tid"]))
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    out += ["process %d has no name" % p for p in sorted(used_p - pnames)]
    out += ["thread %s has no name" % (t,) for t in sorted(used_t - tnames)]
    eps = 1e-3  # us: the file's resolution
    for key, sl in tracks.items():
        stack = []
        for a, b in zip(sl, sl[1:]):
            if b["ts"] < a["ts"]:
                out.append("track %s: slice at %.3f after one at %.3f" % (key, b["ts"], a["ts"]))
                break
        for s in sl:
            end = s["ts"] + s["dur"]
            while stack and stack[-1] <= s["ts"] + eps:
                stack.pop()
            if stack and end > stack[-1] + eps:
                out.append("track %s: slice %s at %.3f (ends %.3f) overlaps its parent ending %.3f"
                           % (key, s["name"], s["ts"], end, stack[-1]))
                break
            stack.append(end)
    for fid, chain in _flows(ev).items():
        dirs = [(bool(s.get("flow_in")), bool(s.get("flow_out"))) for s in chain]
        if len(chain) < 2 or dirs[0] != (False, True) or dirs[-1] != (True, False) or \
                any(d != (True, True) for d in dirs[1:-1]):
            out.append("flow %s does not resolve: %s" % (fid, dirs))
        elif any(b["ts"] < a["ts"] for a, b in zip(chain, chain[1:])):
            out.append("flow %s runs back in time" % fid)
    return out


def _flows(ev):
    f = {}
    for e in ev:
        if e.get("ph") == "X" and "bind_id" in e:
            f.setdefault(e["bind_id"], []).append(e)
    for chain in f.values():
        chain.sort(key=lambda s: s["ts"])
    return f


def chains(doc):
    """The flows: per bind_id its slices in time order."""
    return list(_flows(doc["traceEvents"]).values())


def process_names(doc):
    return {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name"}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    p = problems(doc)
    for line in p[:20]:
        print(line)
    print("%s: %d events, %d problems" % (sys.argv[1], len(doc.get("traceEvents", [])), len(p)))
    sys.exit(1 if p else 0)


if __name__ == "__main__":
    main()
