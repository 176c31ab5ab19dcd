#!/usr/bin/env python3
"""Straggler accuracy on the SIMULATED cluster: clean jobs with host jitter and jobs with one or two
injected slow ranks, over several shapes (2 x 8, 2 x 2, 1 x 4 PCIe, nodes of 8 and 4 GPUs) at the
topologies' real link rates.  A clean job passes when no finding of any kind is made; an injected job
when exactly the injected ranks are named as stragglers and nothing else is found.

  straggler_accuracy.py BUILD_DIR [--clean N] [--injected N] [--steps S] [--seed K]

Prints one line per job and the false-positive rate and recall; exit status 1 if either misses,
or if any job has a finding of another kind (none was injected).
The full run (docs/PERFORMANCE.md) is --clean 50 --injected 50; make test runs a few jobs.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPO = os.path.join(ROOT, "tests", "sim", "topologies")
SHAPES = [  # (name, icx-sim arguments, world size)
    ("2x8 dgx", ["--nodes", "2", "--gpus-per-node", "8"], 16),
    ("2x2 dgx", ["--nodes", "2", "--gpus-per-node", "2"], 4),
    ("1x4 pcie", ["--nodes", "1", "--gpus-per-node", "4", "--topology",
                  os.path.join(TOPO, "pcie-4gpu.topo")], 4),
    ("8+4 mixed", ["--nodes", "2", "--node-gpus", "8,4"], 12),
]


def run_job(build, shape, slow, jitter, steps, seed):
    name, args, world = shape
    with tempfile.TemporaryDirectory() as tmp:
        oob = os.path.join(tmp, "oob")
        os.makedirs(oob)
        cmd = [os.path.join(build, "bin", "icx-sim"), "--out", tmp, "--jitter", str(jitter),
               "--seed", str(seed)] + args
        for r, ms in slow:
            cmd += ["--slow-rank", "%d:%d" % (r, ms)]
        cmd += ["--", os.path.join(build, "tests", "nccl", "ddp_loop"), oob, str(steps), "65536"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0 or p.stdout.count("results correct") != world:
            return None, "job failed: %s %s" % (p.stdout[-300:], p.stderr[-300:])
        a = subprocess.run([os.path.join(build, "bin", "icx-analyze"), "--json",
                            os.path.join(tmp, "traces")], capture_output=True, text=True)
        if a.returncode != 0:
            return None, "analysis failed: %s" % a.stderr[-300:]
        doc = json.loads(a.stdout)
        named = sorted({r for f in doc["findings"] if f["kind"] == "straggler" for r in f["ranks"]})
        other = sorted({f["kind"] for f in doc["findings"] if f["kind"] != "straggler"})
        return (named, other), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--clean", type=int, default=50)
    ap.add_argument("--injected", type=int, default=50)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    if os.geteuid() != 0:
        print("SKIP straggler accuracy: simulated nodes need their own hostnames (root)")
        return 0
    fp = tp = fn = errors = others = 0
    jobs = [("clean", i) for i in range(a.clean)] + [("injected", i) for i in range(a.injected)]
    for kind, i in jobs:
        shape = SHAPES[i % len(SHAPES)]
        jitter = rnd.choice([0, 2, 5])
        slow = []
        if kind == "injected":
            ranks = rnd.sample(range(shape[2]), 2 if rnd.random() < 0.5 else 1)
            slow = [(r, rnd.randint(10, 100)) for r in ranks]
        got, err = run_job(a.build, shape, slow, jitter, a.steps, a.seed * 1000 + i)
        want = sorted(r for r, _ in slow)
        if err:
            errors += 1
            verdict = "ERROR " + err
        else:
            named, other = got
            ok = named == want
            if kind == "clean":
                fp += not ok
            else:
                tp += ok
                fn += not ok
            others += bool(other)
            verdict = ("ok" if ok else "MISS: named %s" % named) + \
                (", other findings %s" % other if other else "")
        print("%-8s %-9s jitter %d ms slow %-22s -> %s" % (kind, shape[0], jitter, slow or "-", verdict),
              flush=True)
    print("clean jobs: %d, with a straggler named: %d (false-positive rate %.1f %%)" %
          (a.clean, fp, 100.0 * fp / max(1, a.clean)))
    print("injected jobs: %d, exactly the injected ranks named: %d (recall %.1f %%)" %
          (a.injected, tp, 100.0 * tp / max(1, a.injected)))
    print("jobs with findings of other kinds: %d" % others)
    print("jobs that did not run: %d" % errors)
    return 0 if fp == 0 and fn == 0 and errors == 0 and others == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
