#!/usr/bin/env python3
"""The trainer's side on a GPU (issue 28's rows, measured on a lent device
machine): a NodeSam COLLAB epoch from the daemon into CUDA tensors, and a
GIN-0 training loop on the GPU fed by augloader's Prefetcher or by PyG's
DataLoader, at batch sizes 32 and 128. The daemon runs on the same
machine as augloader.Daemon starts it (its runtime on every core but the
trainer's: --procs).

  tensors  augloader/<t>/<layout>/bs=<b>: an epoch through to_tensors(b,
           "cuda"), t socket or shm; pyg/<layout>/bs=<b>/<config>: PyG's
           DataLoader applying dropout_edge per graph, each batch moved
           with .to("cuda") (pinned where workers pin), every
           configuration of workers and persistence, the fastest taken.
           Wall s (the last batch's copies synchronised) and the trainer
           process's CPU s (getrusage), median of --epochs.
  loop     GIN-0 (5 layers, hidden 64, Adam; examples/train_gin.py's
           model), each step reading its loss back (float(loss), as a
           loop that logs does): resident (every batch already on the GPU:
           the floor), fed by Prefetcher (over shared memory), and, in
           PyG's layout, fed by PyG's fastest DataLoader. Wall s of an
           epoch, and the time the loop waited for a batch.

Every figure is a RESULT line; bench/report reads the saved output
(bench/results/gpu.txt) into docs/bench.md.

Usage: python bench/python_gpu.py --bin bin --shards COLLAB.shards [--epochs 5] [--batch-sizes 32,128]
"""
import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import augloader  # noqa: E402
from python_client import Daemon, DropEdge, load_pyg  # noqa: E402
from python_tensors import as_codes, model_for, timed  # noqa: E402

import torch  # noqa: E402

# workers, persistent; workers > 0 pin their batches (what a GPU loader does)
PEER_CONFIGS = [(0, False), (2, True), (4, True), (8, True)]


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def ours(url, epoch, layout, dev):
    from augloader.torch import to_tensors

    def run():
        g = 0
        for b in augloader.connect(url).epoch(epoch):
            t = to_tensors(b, dev, layout=layout)
            g += t["num_graphs"]
        sync()
        return g
    return timed(run)


def peer_loader(data, bs, workers, persistent):
    from torch_geometric.loader import DataLoader
    return DataLoader(DropEdge(data), batch_size=bs, shuffle=True, num_workers=workers,
                      persistent_workers=persistent, pin_memory=workers > 0 and torch.cuda.is_available())


def peer(loader, dev):
    def run():
        g = 0
        for b in loader:
            b = b.to(dev, non_blocking=True)
            g += b.num_graphs
        sync()
        return g
    return timed(run)


def loop(url, layout, epochs, dev):
    """Per-epoch medians over epochs (after a first that warms): resident
    wall s, fed wall s, fed wait s, batches."""
    from augloader.torch import Prefetcher, to_tensors
    first = to_tensors(next(iter(augloader.connect(url).epoch(0, count=1))), dev, layout=layout)
    step = model_for(first, first["x"] is None, first["y_soft"].shape[1], read_loss=True)
    resident, fed, waits, n = [], [], [], 0
    for e in range(epochs + 1):
        ts = [to_tensors(b, dev, layout=layout) for b in augloader.connect(url).epoch(100 + e)]
        sync()
        n = len(ts)
        t0 = time.perf_counter()
        for t in ts:
            step(t)
        sync()
        r = time.perf_counter() - t0
        del ts
        t0 = time.perf_counter()
        pf = Prefetcher(augloader.connect(url).epoch(100 + e), dev, layout=layout)
        for t in pf:
            step(t)
        sync()
        f = time.perf_counter() - t0
        if e:
            resident.append(r)
            fed.append(f)
            waits.append(pf.wait_s)
    return statistics.median(resident), statistics.median(fed), statistics.median(waits), n


def peer_loop(loader, epochs, dev):
    """The same model in PyG's layout fed by a PyG DataLoader: per-epoch
    median wall s and the time the loop waited for its next batch."""
    it = iter(loader)
    b = next(it).to(dev)
    classes = int(max(int(d.y) for d in loader.dataset.data)) + 1
    del it

    def tensors(b):
        return {"x": b.x, "edge_index": b.edge_index, "batch": b.batch, "num_graphs": b.num_graphs,
                "y_soft": torch.nn.functional.one_hot(b.y, classes).float()}
    step = model_for(tensors(b), False, classes, read_loss=True)
    walls, waits = [], []
    for e in range(epochs + 1):
        wait = 0.0
        t0 = time.perf_counter()
        it = iter(loader)
        while True:
            w0 = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            wait += time.perf_counter() - w0
            step(tensors(b.to(dev, non_blocking=True)))
        sync()
        if e:
            walls.append(time.perf_counter() - t0)
            waits.append(wait)
    return statistics.median(walls), statistics.median(waits)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--epochs", type=int, default=5, help="measured epochs of each tensors row (after a warm one)")
    ap.add_argument("--loop-epochs", type=int, default=3, help="measured epochs of each loop row (after a warm one)")
    ap.add_argument("--batch-sizes", default="32,128")
    ap.add_argument("--workdir", default="/tmp")
    ap.add_argument("--device", default="cuda", help="cpu only to try the script where no GPU is")
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("python_gpu.py: no CUDA device (this benchmark runs on a GPU machine; --device cpu to try it)")
    name = torch.cuda.get_device_properties(0).name if dev == "cuda" else platform.processor() or "cpu"
    print(f"RESULT kind=device name={name.replace(' ', '_')} torch={torch.__version__.split('+')[0]} "
          f"cuda={torch.version.cuda} cores={os.cpu_count()} python={platform.python_version()}", flush=True)
    torch.ones(1, device=dev)  # the CUDA context, before any clock
    dense = load_pyg(args.shards)
    codes = as_codes(dense)
    for bs in [int(s) for s in args.batch_sizes.split(",")]:
        d = Daemon(args.bin, args.shards, "nodesam", args.workdir, batch_size=bs)
        try:
            for t, url in (("socket", d.unix), ("shm", d.shm)):
                for layout in ("pyg", "codes"):
                    ours(url, 99, layout, dev)
                    runs = [ours(url, e, layout, dev) for e in range(args.epochs)]
                    print(f"RESULT kind=tensors bs={bs} name=augloader/{t}/{layout} "
                          f"wall_s={statistics.median(r[0] for r in runs):.4f} cpu_s={statistics.median(r[1] for r in runs):.4f} "
                          f"graphs={runs[0][2]} epochs={len(runs)}", flush=True)
            shm = d.shm
            for layout in ("pyg", "codes"):
                r, f, wait, n = loop(shm, layout, args.loop_epochs, dev)
                print(f"RESULT kind=loop bs={bs} feed=augloader layout={layout} resident_s={r:.4f} fed_s={f:.4f} "
                      f"wait_s={wait:.4f} batches={n} epochs={args.loop_epochs}", flush=True)
        finally:
            d.stop()
        best = {}
        for layout, data in (("pyg", dense), ("codes", codes)):
            for workers, persistent in PEER_CONFIGS:
                name = f"pyg/{layout}/workers={workers}" + ("/persistent" if persistent else "")
                loader = peer_loader(data, bs, workers, persistent)
                peer(loader, dev)  # warm: workers, pinned memory
                runs = [peer(loader, dev) for _ in range(args.epochs)]
                wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
                print(f"RESULT kind=tensors bs={bs} name={name} wall_s={wall:.4f} cpu_s={cpu:.4f} "
                      f"graphs={runs[0][2]} epochs={len(runs)}", flush=True)
                if layout not in best or wall < best[layout][0]:
                    best[layout] = (wall, cpu, name, workers, persistent)
                del loader
            wall, cpu, name, _, _ = best[layout]
            print(f"RESULT kind=fastest bs={bs} layout={layout} name={name} wall_s={wall:.4f} cpu_s={cpu:.4f}", flush=True)
        _, _, name, workers, persistent = best["pyg"]
        wall, wait = peer_loop(peer_loader(dense, bs, workers, persistent), args.loop_epochs, dev)
        print(f"RESULT kind=loop bs={bs} feed={name} layout=pyg fed_s={wall:.4f} wait_s={wait:.4f} "
              f"epochs={args.loop_epochs}", flush=True)


if __name__ == "__main__":
    main()
