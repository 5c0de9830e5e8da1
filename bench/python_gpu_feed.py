#!/usr/bin/env python3
"""How to feed a small model on a GPU (bench/results/gpu-feed.txt): one
GIN-0 loop (5 layers, hidden 64, PyG's layout, examples/train_gin.py's
model) on the daemon's NodeSam COLLAB epochs over shared memory, fed

  resident                      every batch's tensors on the GPU first (the floor)
  inline                        to_tensors(b, "cuda") in the loop, as batches arrive
  prefetch-depthD               Prefetcher(stream, "cuda", depth=D): a thread makes them
  received-then-tensors-inline  the epoch received first, to_tensors in the loop

at batch sizes 32 and 128; wall s of an epoch, median of 3 after a first.
Each step reads its loss back (loss.item(), as a loop that logs does)
unless --no-sync. The step of so small a model is bound by Python's
kernel launches, so a feeding thread competes with it for the
interpreter: this measures what that costs.

Usage: python bench/python_gpu_feed.py --bin BIN --shards COLLAB.shards [--no-sync]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import augloader  # noqa: E402
import torch  # noqa: E402
from python_client import Daemon  # noqa: E402
from python_gpu import sync  # noqa: E402
from python_tensors import model_for  # noqa: E402

from augloader.torch import Prefetcher, to_tensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--workdir", default="/tmp")
    ap.add_argument("--no-sync", action="store_true", help="steps do not read their loss back")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("python_gpu_feed.py: no CUDA device (this benchmark runs on a GPU machine)")
    for bs in (32, 128):
        d = Daemon(args.bin, args.shards, "nodesam", args.workdir, batch_size=bs)
        url = d.shm
        first = to_tensors(next(iter(augloader.connect(url).epoch(0, count=1))), "cuda")
        step = model_for(first, False, first["y_soft"].shape[1], read_loss=not args.no_sync)
        res = {}

        def clock(name, fn):
            t0 = time.perf_counter()
            fn()
            sync()
            res.setdefault(name, []).append(time.perf_counter() - t0)

        for e in range(4):
            ts = [to_tensors(b, "cuda") for b in augloader.connect(url).epoch(100 + e)]
            sync()
            clock("resident", lambda: [step(t) for t in ts])
            del ts
            clock("inline", lambda: [step(to_tensors(b, "cuda")) for b in augloader.connect(url).epoch(100 + e)])
            for depth in (1, 2, 4, 8):
                clock(f"prefetch-depth{depth}",
                      lambda: [step(t) for t in Prefetcher(augloader.connect(url).epoch(100 + e), "cuda", depth=depth)])
            got = list(augloader.connect(url).epoch(100 + e))
            clock("received-then-tensors-inline", lambda: [step(to_tensors(b, "cuda")) for b in got])
            del got
        d.stop()
        for k, v in res.items():
            print(f"RESULT kind=feed bs={bs} name={k} wall_s={statistics.median(v[1:]):.4f}", flush=True)


if __name__ == "__main__":
    main()
