#!/usr/bin/env python3
"""Write a fake sysfs tree for a simulated node, from its topology file, under ROOT (for the tracer's
ICX_SYSFS_ROOT).  What it presents: NUMA nodes and their CPUs; per GPU and NIC the PCI device (NUMA
node, local CPUs, PCIe link speed/width) placed in a PCIe hierarchy like a real one
(/sys/devices/pciDDDD:BB/<root port>/<switch upstream>/<switch downstream>/<device>, with
/sys/bus/pci/devices/<bdf> links into it); per NIC /sys/class/infiniband/<name> with its port.

PCIe layout: one host bridge per NUMA node; each `switch S` (a GPU's or NIC's `switch` field, by
default the GPU's index) hangs under a root port of its NUMA node's host bridge.

CPUs: `numa N cpus LIST` lines in the topology file, or else this machine's online CPUs dealt out
round-robin to the topology's NUMA nodes (on a 2-CPU test machine: node 0 = CPU 0, node 1 = CPU 1),
so that tests can place threads on either "socket" with taskset.

usage: mksysfs.py TOPOLOGY ROOT
"""
import os
import sys


def parse(path):
    topo = {"numa_nodes": 1, "pcie": ("32.0", "16"), "gpus": {}, "cpus": {}, "nics": {}}
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
        elif p[0] == "nic" and len(p) >= 2:
            kv = dict(zip(p[2::2], p[3::2]))
            topo["nics"][int(p[1])] = kv
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

    def pci_device(bus, numa, switch, vendor, cls):
        """Create the device inside its switch and link /sys/bus/pci/devices/<bus> to it."""
        hb = "pci0000:%02x" % (numa * 0x40)
        rp = "0000:%02x:%02x.0" % (numa * 0x40, switch + 1)
        up = "0000:%02x:00.0" % (0x80 + switch * 4)
        down = "0000:%02x:%02x.0" % (0x81 + switch * 4, int(bus.split(":")[1], 16) % 16)
        rel = os.path.join("devices", hb, rp, up, down, bus)
        d = os.path.join(root, "sys", rel)
        for name, val in (("numa_node", numa), ("local_cpulist", cpus.get(numa, "")),
                          ("current_link_speed", "%s GT/s PCIe" % gts),
                          ("current_link_width", width), ("vendor", vendor), ("class", cls)):
            write(os.path.join(d, name), str(val))
        link_dir = os.path.join(root, "sys", "bus", "pci", "devices")
        os.makedirs(link_dir, exist_ok=True)
        os.symlink(os.path.join("..", "..", "..", rel), os.path.join(link_dir, bus))
        return d

    for g, (bus, numa) in sorted(t["gpus"].items()):
        pci_device(bus, numa, g, "0x10de", "0x030200")
    for i, kv in sorted(t["nics"].items()):
        bus, numa = kv["bus"].lower(), int(kv.get("numa", 0))
        d = pci_device(bus, numa, int(kv.get("switch", i)), "0x15b3", "0x020700")
        ib = os.path.join(root, "sys", "class", "infiniband", kv["name"])
        os.makedirs(os.path.join(ib, "ports", "1"), exist_ok=True)
        os.symlink(os.path.relpath(d, ib), os.path.join(ib, "device"))
        write(os.path.join(ib, "node_guid"), "b83f:d203:00%02x:%04x" % (numa, i))
        rate = float(kv.get("rate", 400))
        write(os.path.join(ib, "ports", "1", "rate"), "%g Gb/sec (4X)" % rate)
        write(os.path.join(ib, "ports", "1", "link_layer"), kv.get("link_layer", "InfiniBand"))
        write(os.path.join(ib, "ports", "1", "state"), "4: ACTIVE")
        for counter in ("port_xmit_data", "port_rcv_data", "port_xmit_wait", "port_xmit_discards"):
            write(os.path.join(ib, "ports", "1", "counters", counter), "0")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
