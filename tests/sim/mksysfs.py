#!/usr/bin/env python3
"""Write a fake sysfs tree for a simulated node, from its topology file, under ROOT (for the tracer's
ICX_SYSFS_ROOT).  What it presents: NUMA nodes and their CPUs, and per GPU the PCI device's NUMA
node, local CPUs and PCIe link speed/width.

CPUs: `numa N cpus LIST` lines in the topology file, or else this machine's online CPUs dealt out
round-robin to the topology's NUMA nodes (on a 2-CPU test machine: node 0 = CPU 0, node 1 = CPU 1),
so that tests can place threads on either "socket" with taskset.

usage: mksysfs.py TOPOLOGY ROOT
"""
import os
import sys


def parse(path):
    topo = {"numa_nodes": 1, "pcie": ("32.0", "16"), "gpus": {}, "cpus": {}}
    for line in open(path):
        p = line.split("#")[0].split()
        if not p:
            continue
        if p[0] == "numa_nodes":
            topo["numa_nodes"] = int(p[1])
        elif p[0] == "pcie":
            topo["pcie"] = ("%.1f" % float(p[1]), p[2])
        elif p[0] == "gpu" and len(p) >= 6:
            topo["gpus"][int(p[1])] = (p[3].lower(), int(p[5]))
        elif p[0] == "numa" and len(p) >= 4 and p[2] == "cpus":
            topo["cpus"][int(p[1])] = p[3]
    return topo


def online_cpus():
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return list(range(os.cpu_count() or 1))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def main(topo_path, root):
    t = parse(topo_path)
    n = t["numa_nodes"]
    cpus = dict(t["cpus"])
    if not cpus:
        dealt = {i: [] for i in range(n)}
        for k, c in enumerate(online_cpus()):
            dealt[k % n].append(c)
        cpus = {i: ",".join(map(str, v)) for i, v in dealt.items()}
    node_dir = os.path.join(root, "sys", "devices", "system", "node")
    write(os.path.join(node_dir, "online"), "0-%d" % (n - 1) if n > 1 else "0")
    for i in range(n):
        write(os.path.join(node_dir, "node%d" % i, "cpulist"), cpus.get(i, ""))
    gts, width = t["pcie"]
    for _, (bus, numa) in sorted(t["gpus"].items()):
        d = os.path.join(root, "sys", "bus", "pci", "devices", bus)
        write(os.path.join(d, "numa_node"), str(numa))
        write(os.path.join(d, "local_cpulist"), cpus.get(numa, ""))
        write(os.path.join(d, "current_link_speed"), "%s GT/s PCIe" % gts)
        write(os.path.join(d, "current_link_width"), width)
        write(os.path.join(d, "vendor"), "0x10de")
        write(os.path.join(d, "class"), "0x030200")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
