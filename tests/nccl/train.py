#!/usr/bin/env python3
"""A DDP-like training loop in Python that drives the (simulated) CUDA runtime and NCCL through
ctypes, as a framework's C++ core would: parameters broadcast from rank 0 once, then per step a
data-loader thread hands over a batch, the main thread "computes", and a reducer thread all-reduces
the gradients (NCCL is called from a thread that is not the main one), then an all-gather of the
loss.  Every result is checked.  Run one process per rank (tools/icx-sim), e.g.

  LD_PRELOAD=libicxtrace.so python3 train.py DIR STEPS COUNT

Writes DIR/truth-RANK: "world <op> <calls> <bytes>" per op; exit status 0 when all was right.
Faults (as tests/nccl/ddp_loop, set by tools/icx-sim --slow-rank / --hang-rank): DDP_SLOW_RANK with
DDP_SLOW_US computes longer before each step; DDP_HANG_RANK with DDP_HANG_STEP stops before it: it
sleeps, or with DDP_HANG_HOW=python waits in wait_for_checkpoint_shard() for an event nobody sets."""
import ctypes
import os
import queue
import sys
import threading
import time


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(rc, what):
    if rc != 0:
        sys.exit("train.py: %s returned %d" % (what, rc))


def wait_for_checkpoint_shard(step):
    """The injected Python hang: a shard that never arrives."""
    arrived = threading.Event()
    arrived.wait()
    return step


def main():
    out, steps, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    cuda = ctypes.CDLL("libcudart.so.13")
    nccl = ctypes.CDLL("libnccl.so.2")
    ndev = ctypes.c_int(0)
    check(cuda.cudaGetDeviceCount(ctypes.byref(ndev)), "cudaGetDeviceCount")
    check(cuda.cudaSetDevice(local % max(ndev.value, 1)), "cudaSetDevice")
    uid = UniqueId()
    path = os.path.join(out, "nccl-id")
    if rank == 0:
        check(nccl.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(uid))
        os.rename(path + ".tmp", path)
    else:
        for _ in range(60000):
            if os.path.exists(path):
                break
            time.sleep(0.001)
        with open(path, "rb") as f:
            ctypes.memmove(ctypes.byref(uid), f.read(128), 128)
    comm = ctypes.c_void_p()
    check(nccl.ncclCommInitRank(ctypes.byref(comm), world, uid, rank), "ncclCommInitRank")
    stream = ctypes.c_void_p()
    check(cuda.cudaStreamCreate(ctypes.byref(stream)), "cudaStreamCreate")

    FloatN = ctypes.c_float * count

    def dev(n):
        p = ctypes.c_void_p()
        check(cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4 * n)), "cudaMalloc")
        return p

    def put(d, values):
        check(cuda.cudaMemcpy(d, values, ctypes.c_size_t(ctypes.sizeof(values)), 1), "cudaMemcpy H2D")

    def get(d, n):
        h = (ctypes.c_float * n)()
        check(cuda.cudaMemcpy(h, d, ctypes.c_size_t(4 * n), 2), "cudaMemcpy D2H")
        return h

    FLOAT, SUM = 7, 0
    params, grads = dev(count), dev(count)
    loss_in, loss_all = dev(1), dev(world)
    put(params, FloatN(*([42.0 if rank == 0 else -1.0] * count)))
    check(nccl.ncclBroadcast(params, params, ctypes.c_size_t(count), FLOAT, 0, comm, stream),
          "ncclBroadcast")
    check(cuda.cudaStreamSynchronize(stream), "sync")
    bad = any(x != 42.0 for x in get(params, count))

    batches = queue.Queue(maxsize=2)

    def loader():
        for s in range(steps):
            batches.put(float(s))

    done = queue.Queue()

    def reducer(jobs):
        while True:
            s = jobs.get()
            if s is None:
                return
            rc = nccl.ncclAllReduce(grads, grads, ctypes.c_size_t(count), FLOAT, SUM, comm, stream)
            rc = rc or cuda.cudaStreamSynchronize(stream)
            done.put(rc)

    jobs = queue.Queue()
    threads = [threading.Thread(target=loader), threading.Thread(target=reducer, args=(jobs,))]
    for t in threads:
        t.start()
    slow = int(os.environ.get("DDP_SLOW_RANK", -1)) == rank
    hang_at = int(os.environ.get("DDP_HANG_STEP", -1)) if int(os.environ.get("DDP_HANG_RANK", -1)) == rank else -1
    for s in range(steps):
        batch = batches.get()
        while s == hang_at:  # an injected hang: this rank never reaches the step's collectives
            if os.environ.get("DDP_HANG_HOW") == "python":
                wait_for_checkpoint_shard(s)
            time.sleep(3600)
        time.sleep(0.002 + (int(os.environ.get("DDP_SLOW_US", 0)) / 1e6 if slow else 0))  # compute
        put(grads, FloatN(*([rank + 1 + batch] * count)))
        jobs.put(s)
        check(done.get(), "ncclAllReduce")
        want = world * (world + 1) / 2 + world * s
        bad |= any(x != want for x in get(grads, count))
        put(loss_in, (ctypes.c_float * 1)(float(rank)))
        check(nccl.ncclAllGather(loss_in, loss_all, ctypes.c_size_t(1), FLOAT, comm, stream),
              "ncclAllGather")
        check(cuda.cudaStreamSynchronize(stream), "sync")
        bad |= list(get(loss_all, world)) != [float(r) for r in range(world)]
    jobs.put(None)
    for t in threads:
        t.join()
    check(nccl.ncclCommDestroy(comm), "ncclCommDestroy")
    with open(os.path.join(out, "truth-%d" % rank), "w") as f:
        f.write("world Broadcast 1 %d\n" % (4 * count))
        f.write("world AllReduce %d %d\n" % (steps, steps * 4 * count))
        f.write("world AllGather %d %d\n" % (steps, steps * 4))
    print("train.py rank %d: %d steps, results %s" % (rank, steps, "WRONG" if bad else "correct"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
