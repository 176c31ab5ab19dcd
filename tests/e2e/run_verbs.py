#!/usr/bin/env python3
"""Verbs tests.  On this machine: dlsym/dlvsym interposition (RTLD_NEXT keeps its caller, versions
are respected).  In the QEMU guest with rdma_rxe (tests/rxe/vm.sh): perftest's ib_write_bw,
ib_send_bw and ib_read_bw with several QPs, and our verbs_loop (post API, ibv_wr_* API, dlopen +
dlvsym, per-request events) under the tracer; the analyzer's per-QP work requests and bytes must
equal what the programs did, and the QPs of the two perftest processes must be matched.

Usage: run_verbs.py BUILD_DIR [TEST_NAME...]   Prints PASS/FAIL/SKIP lines and 'N passed, N failed'.
"""
import os
import subprocess
import sys
import tempfile

import run_e2e as base
from run_e2e import BUILD, ROOT, Skip, check

VERBS = os.path.join(BUILD, "tests", "verbs")
ITERS, SIZE, QPS = 200, 4096, 2


def test_dlsym_rtld_next_keeps_caller():
    """dlsym(RTLD_NEXT) called from a library finds the definition after *that* library, with
    libicxtrace (which interposes dlsym) preloaded; a plain-call wrapper would return 'a'."""
    with tempfile.TemporaryDirectory() as tmp:
        env = base.env_for(tmp)
        p = subprocess.run([os.path.join(VERBS, "dl_next")], env=env, capture_output=True,
                           text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.strip() == "b", "dl_next printed %r (rc %d): %s"
          % (p.stdout, p.returncode, p.stderr))


def test_dlvsym_versions():
    """NCCL-style dlvsym(handle, name, "IBVERBS_1.1") hands out our wrappers; IBVERBS_1.0 (another
    ABI), names we do not wrap and missing names get exactly what libibverbs gives."""
    with tempfile.TemporaryDirectory() as tmp:
        truth = os.path.join(tmp, "truth")
        env = base.env_for(tmp, LD_LIBRARY_PATH=None)  # the system libibverbs, not the simulated one
        p = subprocess.run([os.path.join(VERBS, "verbs_loop_dl"), "no_such_dev", "1", "post", "5",
                            "64", truth], env=env, capture_output=True, text=True, timeout=60)
        check("no device" in p.stderr, "unexpected: %s" % p.stderr)
        got = dict((" ".join(l.split()[1:3]), l.split()[3]) for l in open(truth) if l.startswith("lookup"))
    want = {"ibv_open_device IBVERBS_1.1": "wrapper", "ibv_create_qp IBVERBS_1.1": "wrapper",
            "ibv_modify_qp IBVERBS_1.1": "wrapper", "ibv_reg_mr IBVERBS_1.1": "wrapper",
            "ibv_qp_to_qp_ex IBVERBS_1.6": "wrapper", "ibv_get_device_list IBVERBS_1.1": "real",
            "ibv_alloc_pd IBVERBS_1.1": "real", "ibv_open_device IBVERBS_1.0": "real",
            "ibv_open_device default": "wrapper", "no_such_symbol default": "missing"}
    for k, v in want.items():
        check(got.get(k) == v, "lookup %s: got %s, want %s" % (k, got.get(k), v))


# ---- the simulated cluster: 16 ranks on 2 nodes, one rail NIC each ----

SIM_ITERS, SIM_SIZE = 100, 8192


def sim_job(tmp, *faults, bad_rank=None, ranks=16, **env_extra):
    """Run rail_verbs over 2 simulated 8-GPU/8-NIC nodes (ranks / 2 GPUs of each used); the
    analysis and the expected bytes per (host, NIC) from the ranks' own truth files."""
    if os.geteuid() != 0:
        raise Skip("simulated nodes need their own hostnames (unshare --uts as root)")
    oob = os.path.join(tmp, "oob")
    os.makedirs(oob)
    sim = os.path.join(BUILD, "bin", "icx-sim")
    env = base.env_for(tmp)  # sanitizer runtime and options when sanitizing; icx-sim adds the rest
    env["LD_PRELOAD"] = env["LD_PRELOAD"].replace(base.LIB, "").strip(":")
    for k in ("LD_LIBRARY_PATH", "ICX_OUTPUT", "ICXSIM_TOPOLOGY"):
        env.pop(k, None)
    env.update({k: str(v) for k, v in env_extra.items()})
    p = subprocess.run([sim, "--out", tmp, "--gpus-per-node", str(ranks // 2)] + list(faults) +
                       ["--", os.path.join(VERBS, "rail_verbs"), oob, str(SIM_ITERS), str(SIM_SIZE)] +
                       ([str(bad_rank)] if bad_rank is not None else []),
                       env=env, capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "icx-sim failed (%d): %s" % (p.returncode, p.stderr[-3000:]))
    truth = {}
    for f in os.listdir(oob):
        if f.startswith("truth-"):
            w = open(os.path.join(oob, f)).read().split()
            truth[int(w[1])] = {"node": int(w[3]), "nic": w[5], "peer": int(w[7]), "out": int(w[9]),
                                "errors": int(w[11])}
    check(len(truth) == ranks, "%d ranks wrote their truth" % len(truth))
    want = {}
    for r, t in truth.items():
        host = "simnode%d" % t["node"]
        want.setdefault((host, t["nic"]), [0, 0])[0] += t["out"]
        peer = truth[t["peer"]]
        want.setdefault(("simnode%d" % peer["node"], peer["nic"]), [0, 0])[1] += t["out"]
    doc, _ = base.analyze([os.path.join(tmp, "traces")])
    return doc, want, truth


def check_sim_bytes(doc, want, truth, failed_writes=None):
    got = {(n["host"], n["nic"]): [n["tx_bytes"], n["rx_bytes"]] for n in doc["verbs"]["nics"]
           if n["tx_bytes"] or n["rx_bytes"]}
    # The simulated NICs advance their port counters by the payload they really moved: traced
    # (posted) bytes equal them, but for a posted WRITE that failed, which moved nothing.
    failed = failed_writes or {}
    for n in doc["verbs"]["nics"]:
        key = (n["host"], n["nic"])
        check(n["counter_tx_bytes"] is not None, "no port counters for %s" % (key,))
        f_tx, f_rx = failed.get(key, (0, 0))
        check(n["counter_tx_bytes"] == n["tx_bytes"] - f_tx and n["counter_rx_bytes"] == n["rx_bytes"] - f_rx,
              "%s counters tx %d rx %d, traced tx %d rx %d" % (key, n["counter_tx_bytes"],
                                                                 n["counter_rx_bytes"], n["tx_bytes"], n["rx_bytes"]))
    check(got == want, "per-NIC bytes %s, truth %s" % (sorted(got.items()), sorted(want.items())))
    out = [sum(t["out"] for t in truth.values() if t["node"] == n) for n in (0, 1)]
    matrix = {(m["src"], m["dst"]): m["bytes"] for m in doc["verbs"]["node_matrix"]}
    want_matrix = {("simnode0", "simnode1"): out[0], ("simnode1", "simnode0"): out[1]}
    check(matrix == want_matrix, "node matrix %s, want %s" % (matrix, want_matrix))
    for q in doc["verbs"]["qps"]:
        check(q["peer"] and q["peer"]["host"] != q["host"], "QP %s unmatched" % q)


def nic_findings(doc):
    return sorted((f["kind"], f["host"], f["evidence"].split()[0]) for f in doc["findings"]
                  if f["kind"].startswith("nic_"))


def test_sim_rails_clean():
    """16 ranks, 2 simulated nodes, one rail each, over the simulated libibverbs: per-NIC tx/rx and
    node x node bytes equal the ranks' ground truth, every QP matched across nodes, no findings."""
    with tempfile.TemporaryDirectory() as tmp:
        doc, want, truth = sim_job(tmp)
        check_sim_bytes(doc, want, truth)
        check(len(want) == 16, "NICs in use: %s" % sorted(want))
        # per rank: the NIC it opened with its NUMA node, and its registered buffer's node
        for pl in doc["placement"]:
            lr = pl["rank"] % 8
            check(pl["rdma_nics"] == [{"nic": "mlx5_%d" % lr, "numa_node": 0 if lr < 4 else 1}],
                  "rank %d rdma_nics %s" % (pl["rank"], pl["rdma_nics"]))
            check(sum(pl["rdma_buffer_bytes_by_node"].values()) == 2 * SIM_SIZE,
                  "rank %d registered %s" % (pl["rank"], pl["rdma_buffer_bytes_by_node"]))
        check(doc["findings"] == [], "findings on a clean run: %s" % doc["findings"])
        for n in doc["verbs"]["nics"]:  # over time: the bins hold exactly the posted bytes
            posted = n["tx_bytes"] if n["tx_bytes"] else 0
            check(abs(sum(n["posted_bytes_per_bin"]) - posted) < 1 + 1e-9 * posted,
                  "%s/%s bins sum %s, posted %d" % (n["host"], n["nic"], sum(n["posted_bytes_per_bin"]), posted))
            check(n["peak_bytes_per_s"] > 0, "no peak rate: %s" % n)


def test_sim_rails_part_of_node():
    """2 of each node's 8 GPUs used: the job's rails are the NICs that carried traffic and the
    closest NICs of GPUs whose traffic left elsewhere, so the six idle NICs are no finding on a
    clean run; rank 1 told to use mlx5_0 leaves its own rail idle and doubles rank 0's, and both
    are named."""
    with tempfile.TemporaryDirectory() as tmp:
        doc, want, truth = sim_job(tmp, ranks=4)
        check_sim_bytes(doc, want, truth)
        check(doc["findings"] == [], "findings on a clean run: %s" % doc["findings"])
        rails = sorted((n["host"], n["nic"]) for n in doc["verbs"]["nics"] if n["rail"])
        check(rails == [("simnode%d" % h, "mlx5_%d" % k) for h in (0, 1) for k in (0, 1)],
              "rails %s" % rails)
    with tempfile.TemporaryDirectory() as tmp:
        doc, want, truth = sim_job(tmp, "--hca", "1:mlx5_0", ranks=4)
        expect = [("nic_imbalance", "simnode0", "mlx5_0"), ("nic_imbalance", "simnode0", "mlx5_1")]
        check(nic_findings(doc) == expect, "findings %s, want %s" % (nic_findings(doc), expect))
        shares = [f["evidence"].split(" carried ")[1].split(" of ")[0] for f in doc["findings"]
                  if f["kind"] == "nic_imbalance"]
        check(shares == ["200%", "0%"], "shares %s" % shares)


def test_sim_rails_faults():
    """Rank 3 told to use mlx5_4 (its own rail mlx5_3 idle, mlx5_4 doubled, and rank 3's traffic
    leaving GPU 3 through a NIC on the other socket), mlx5_6 of node 1 trained down to 1x, and rank
    12 posting one WRITE to unregistered memory: exactly those three NICs, rank 3's rail
    misalignment and rank 12's failed completion named; bytes still equal the truth."""
    with tempfile.TemporaryDirectory() as tmp:
        doc, want, truth = sim_job(tmp, "--hca", "3:mlx5_4", "--slow-nic", "1:mlx5_6", bad_rank=12)
        bad, peer = truth[12], truth[truth[12]["peer"]]
        check_sim_bytes(doc, want, truth, {("simnode1", bad["nic"]): (SIM_SIZE, 0),
                                           ("simnode%d" % peer["node"], peer["nic"]): (0, SIM_SIZE)})
        expect = [("nic_degraded", "simnode1", "mlx5_6"), ("nic_imbalance", "simnode0", "mlx5_3"),
                  ("nic_imbalance", "simnode0", "mlx5_4")]
        check(nic_findings(doc) == expect, "findings %s, want %s" % (nic_findings(doc), expect))
        errs = [f for f in doc["findings"] if f["kind"] == "rdma_completion_error"]
        check(len(errs) == 1 and errs[0]["ranks"] == [12] and "REM_ACCESS_ERR" in errs[0]["evidence"],
              "completion error findings %s" % errs)
        gn = {(e["host"], e["gpu"]): e for e in doc["verbs"]["gpu_nic"]}
        check(gn[("simnode0", 3)]["nic"] == "mlx5_4" and gn[("simnode0", 3)]["path"] == "SYS" and
              gn[("simnode0", 2)]["path"] == "PIX" and len(gn) == 16,
              "GPU <-> NIC %s" % sorted((k, v["nic"], v["path"]) for k, v in gn.items()))
        rail = [f for f in doc["findings"] if f["kind"] == "rail_misalignment"]
        check(len(rail) == 1 and rail[0]["ranks"] == [3] and "GPU 3" in rail[0]["evidence"] and
              "mlx5_4, SYS" in rail[0]["evidence"] and "mlx5_3 is PIX" in rail[0]["evidence"],
              "rail findings %s" % rail)
        nic = [n for n in doc["verbs"]["nics"] if n["host"] == "simnode1" and n["nic"] == truth[12]["nic"]]
        check(nic and nic[0]["completion_errors"] == 1, "NIC rows %s" % nic)


def test_sim_placement_all_kinds():
    """One 2 x 8 job with one misplaced rank of each kind: rank 2 bound to the other socket's CPUs,
    rank 13 staging through pinned memory on the remote node (this machine has one real NUMA
    node, so pinned pages land on node 0: remote for GPU 5), rank 3 on a NIC not on its GPU's
    switch.  Each is named with the right nodes and fix; nothing else is (rank 3's move also idles
    mlx5_3 and doubles mlx5_4, which the rail check names)."""
    if not {0, 1} <= os.sched_getaffinity(0):
        raise Skip("needs CPUs 0 and 1")
    if open("/sys/devices/system/node/online").read().strip() != "0":
        raise Skip("this machine has several real NUMA nodes; pinned pages may land on either")
    with tempfile.TemporaryDirectory() as tmp:
        doc, want, truth = sim_job(tmp, "--misplace-cpu", "2", "--remote-memory", "13", "--hca",
                                   "3:mlx5_4", RAIL_STAGE_MS=400)
        check_sim_bytes(doc, want, truth)
        got = sorted((f["kind"], tuple(f["ranks"]) or f["evidence"].split()[0]) for f in doc["findings"])
        expect = sorted([("numa_misaffinity", (2,)), ("numa_misaffinity", (13,)),
                         ("rail_misalignment", (3,)), ("nic_imbalance", "mlx5_3"),
                         ("nic_imbalance", "mlx5_4")])
        check(got == expect, "findings %s, want %s" % (got, expect))
        fixes = {f["ranks"][0]: f for f in doc["findings"] if f["kind"] == "numa_misaffinity"}
        check("--cpunodebind=0 --membind=0" in fixes[2]["fix"] and "node 1" in fixes[2]["evidence"],
              "rank 2: %s" % fixes[2])
        check("--cpunodebind=1 --membind=1" in fixes[13]["fix"] and "on node 0" in fixes[13]["evidence"],
              "rank 13: %s" % fixes[13])


# ---- the real verbs stack (one VM boot for all of them) ----

_vm = {}


def vm_results():
    """Boot the guest once and run tests/rxe/verbs_guest.sh; cache its output directory."""
    if "dir" in _vm:
        return _vm["dir"]
    if os.environ.get("ICX_TEST_SANITIZE"):
        raise Skip("the verbs VM runs in the normal test pass only")
    out = tempfile.mkdtemp(prefix="icx-rxe-")
    p = subprocess.run([os.path.join(ROOT, "tests", "rxe", "vm.sh"), out,
                        os.path.join(ROOT, "tests", "rxe", "verbs_guest.sh"), BUILD, str(ITERS),
                        str(SIZE), str(QPS)], capture_output=True, text=True, timeout=900)
    if p.returncode == 125:
        raise Skip("qemu cannot run here: " + p.stderr.strip())
    check(p.returncode == 0, "vm.sh failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    steps = dict(l.split()[1:3] for l in open(os.path.join(out, "steps.txt")) if l.startswith("STEP"))
    check(steps.get("setup") == "0", "rxe setup failed: %s; %s" % (steps, open(os.path.join(out, "console.log")).read()[-2000:]))
    _vm["dir"] = out
    _vm["steps"] = steps
    return out


def ops_of(doc):
    """{(pid, qp): {(kind, opcode): (count, bytes)}} and the qp rows."""
    res = {}
    for q in doc["verbs"]["qps"]:
        res[(q["pid"], q["qp_num"])] = {(o["kind"], o["opcode"]): (o["count"], o["bytes"])
                                        for o in q["ops"]}
    return res


def perftest(name, opcode, srq=False, control_qp=False):
    """The traces of one perftest pair: every client QP that posted `opcode` did ITERS requests of
    SIZE bytes and is matched to a QP of the server process; with srq, receives went to a shared
    receive queue and every server QP still completed ITERS of them.  control_qp: rdma_cm's
    perftest also exchanges small SENDs over one more QP pair, so totals are not checked."""
    out = vm_results()
    check(_vm["steps"].get("perftest-" + name) == "0/0", "perftest %s failed: %s" % (name, _vm["steps"]))
    files = sorted(os.path.join(out, f) for f in os.listdir(out)
                   if f.startswith(name + "-client.icx.zst") or f.startswith(name + "-server.icx.zst"))
    doc, _ = base.analyze(files)
    client = {p["pid"] for p in doc["processes"] if p["cmdline"].endswith("192.0.2.1")}
    server = {p["pid"] for p in doc["processes"]} - client
    check(len(client) == 1, "client processes %s" % client)
    rows = [q for q in doc["verbs"]["qps"] if q["pid"] in client and
            any(o["kind"] == 1 and o["opcode"] == opcode for o in q["ops"])]
    check(len(rows) == QPS, "client QPs posting opcode %d: %d, want %d" % (opcode, len(rows), QPS))
    for q in rows:
        ops = {(o["kind"], o["opcode"]): o for o in q["ops"]}
        posted = ops.get((1, opcode))
        check(posted["count"] == ITERS and posted["bytes"] == ITERS * SIZE,
              "client QP %d %s: %s, want %d WRs / %d B" % (q["qp_num"], name, posted, ITERS, ITERS * SIZE))
        check(q["peer"] and q["peer"]["pid"] in server, "client QP %d not matched to the server: %s"
              % (q["qp_num"], q["peer"]))
    peers = {q["peer"]["qp_num"] for q in rows}
    srows = [q for q in doc["verbs"]["qps"] if q["pid"] in server and q["qp_num"] in peers]
    check(len(srows) == QPS, "server QPs %s vs peers of the client's %s" % ([q["qp_num"] for q in srows], peers))
    if opcode == 2:  # the server received every message
        for q in srows:
            ops = {(o["kind"], o["opcode"]): o for o in q["ops"]}
            wc = ops.get((4, 128))
            check(wc and wc["count"] == ITERS and wc["bytes"] == ITERS * SIZE,
                  "server QP %d receive completions %s" % (q["qp_num"], wc))
    if srq:
        posted = sum(o["count"] for q in doc["verbs"]["qps"] if q["pid"] in server
                     for o in q["ops"] if o["kind"] == 3)
        check(posted >= QPS * ITERS, "SRQ receives posted %d, at least %d consumed" % (posted, QPS * ITERS))
    if control_qp:
        return
    total = QPS * ITERS * SIZE
    matrix = {(m["src"], m["dst"]): m["bytes"] for m in doc["verbs"]["node_matrix"]}
    check(matrix == {("rxe-guest", "rxe-guest"): total}, "node matrix %s, want %d" % (matrix, total))
    nic = doc["verbs"]["nics"]
    check(len(nic) == 1 and nic[0]["nic"] == "rxe0" and nic[0]["link_layer"] == "RoCE"
          and nic[0]["tx_bytes"] == total and nic[0]["rx_bytes"] == total,
          "NIC rows %s" % nic)


def test_rxe_perftest_write():
    """ib_write_bw -q 2 on rdma_rxe: RDMA WRITE WRs and bytes per QP exact, QPs matched."""
    perftest("write", 0)


def test_rxe_perftest_send():
    """ib_send_bw -q 2: SEND WRs per QP exact; the server's receive completions exact."""
    perftest("send", 2)


def test_rxe_perftest_read():
    """ib_read_bw -q 2: RDMA READ WRs per QP exact; bytes counted as coming in."""
    perftest("read", 4)


def loop(name):
    out = vm_results()
    check(_vm["steps"].get(name) == "0", "%s failed: %s" % (name, open(os.path.join(out, name + ".txt")).read()))
    doc, _ = base.analyze([os.path.join(out, name + ".icx.zst")])
    got = ops_of(doc)
    pid = doc["processes"][0]["pid"]
    n = 0
    for l in open(os.path.join(out, name + ".truth")):
        f = l.split()
        if f[0] != "qp":
            continue
        qp, kind, op, count, nbytes = (int(x) for x in f[1:6])
        have = got.get((pid, qp), {}).get((kind, op))
        check(have == (count, nbytes), "%s: QP %d kind %d op %d: traced %s, truth %d WRs / %d B"
              % (name, qp, kind, op, have, count, nbytes))
        n += 1
    check(n == 5, "%s: truth has %d lines" % (name, n))
    return doc


def test_rxe_perftest_send_srq():
    """ib_send_bw --use-srq -q 2: receives posted to a shared receive queue (ibv_post_srq_recv);
    SENDs per QP and the server's receive completions per QP exact."""
    perftest("send-srq", 2, srq=True)


def test_rxe_perftest_rdma_cm():
    """ib_write_bw -R: QPs created and connected by librdmacm (its calls reach our verbs wrappers);
    RDMA WRITEs per data QP exact and matched."""
    perftest("write-cm", 0, control_qp=True)


def test_rxe_post_api():
    """verbs_loop, ibv_post_send/recv (with inline SENDs): every QP/opcode count and byte exact."""
    loop("loop-post")


def test_rxe_wr_api():
    """verbs_loop through ibv_wr_* (extended QP): exact, and an aborted batch is not counted."""
    loop("loop-wr")


def test_rxe_dlopen_dlvsym():
    """verbs_loop_dl: libibverbs dlopen()ed and resolved with dlvsym as NCCL does: exact."""
    loop("loop-dl")
    lines = open(os.path.join(vm_results(), "loop-dl.truth")).read()
    check("lookup ibv_open_device IBVERBS_1.1 wrapper" in lines and
          "lookup ibv_open_device IBVERBS_1.0 real" in lines, lines)


def test_rxe_event_mode():
    """ICX_VERBS_EVENTS=1: one record per work request and completion, same totals."""
    doc = loop("loop-events")
    n = doc["processes"][0]["events_recorded"]
    check(n >= 5 * ITERS, "events recorded: %s, want >= %d" % (n, 5 * ITERS))


if __name__ == "__main__":
    sys.exit(base.main(globals(), "verbs"))
