#!/usr/bin/env python3
"""The real-GPU check's workload (tools/gpu-check.sh): a PyTorch job with the NCCL backend, world
size 1 on one GPU, that runs ITERS rounds of all_reduce, broadcast and all_gather_into_tensor on
COUNT float32 elements, checks every result, and prints one JSON line with what it issued (the
ground truth the analysis is held to) and how long the loop took (loop_s, for the slowdown).

  python3 gpu_check_job.py ITERS COUNT"""
import json
import os
import sys
import time


def main():
    iters, count = int(sys.argv[1]), int(sys.argv[2])
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    x = torch.ones(count, dtype=torch.float32, device=dev)
    out = torch.empty(count, dtype=torch.float32, device=dev)
    bad = 0
    # warm-up on 1 KiB tensors (another size class than the job's): NCCL's communicator is made
    # at the first collective, and the timed loop should not include that
    w, wout = torch.ones(256, device=dev), torch.empty(256, device=dev)
    dist.all_reduce(w)
    dist.broadcast(w, src=0)
    dist.all_gather_into_tensor(wout, w)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(iters):
        x.fill_(float(i + 1))
        dist.all_reduce(x)  # world size 1: unchanged
        dist.broadcast(x, src=0)
        dist.all_gather_into_tensor(out, x)
        torch.cuda.synchronize()
        bad += int(not torch.all(out == float(i + 1)).item())
    loop_s = time.perf_counter() - t0
    dist.destroy_process_group()
    print(json.dumps({"iters": iters, "bytes": count * 4, "bad": bad, "loop_s": round(loop_s, 6),
                      "torch": torch.__version__, "cuda": torch.version.cuda,
                      "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                      "gpu": torch.cuda.get_device_name(0)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
