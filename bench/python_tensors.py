#!/usr/bin/env python3
"""The trainer's cost per batch (issue 28): a NodeSam COLLAB epoch turned
into torch tensors on the CPU device through augloader.torch.to_tensors,
against PyG's DataLoader applying dropout_edge in the same layout, each at
its fastest configuration. Per epoch: wall time and CPU time (user +
system): for augloader's rows this (the trainer) process's, for PyG's this
process's and its DataLoader workers' (bench/peers/cpuclock.py), what
loading costs the trainer's machine besides the daemon.

  augloader/<t>/<layout>   t: socket (Unix socket) or shm (unix+shm://)
  pyg/<layout>/workers=<w>[/persistent]   every configuration (the sweep)
  paired/augloader/<t>/<layout>, paired/pyg/<layout>/fastest
                           the comparison: ours over each transport and the
                           sweep's fastest PyG configuration, epoch by epoch
                           in turn (kind=fastest carries PyG's figures)

layout pyg: PyG's Batch fields with the dense one-hot x [N, dim] (float32)
and int64 edge_index; codes: the node's degree code instead of the dense x
(to_tensors(layout="codes"): int32 x_code/x_node/x_weight, what
CodeEmbedding takes; PyG's Data.x holds the int64 code [N]).

Usage: python bench/python_tensors.py --bin bin --shards COLLAB.shards --epochs 5 [--json OUT]
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import augloader  # noqa: E402
from python_client import PEER_CONFIGS, Daemon, DropEdge, load_pyg  # noqa: E402
from cpuclock import loader_cpu_s, self_cpu_s  # noqa: E402  (bench/peers, on the path python_client set)


def timed(fn):
    t, c = time.perf_counter(), self_cpu_s()
    graphs = fn()
    return time.perf_counter() - t, self_cpu_s() - c, graphs


def ours(url, epoch, layout):
    from augloader.torch import to_tensors

    def run():
        g = 0
        for b in augloader.connect(url).epoch(epoch):
            t = to_tensors(b, "cpu", layout=layout)
            g += t["num_graphs"]
        return g
    return timed(run)


def through_loader(url, epochs, layout, workers):
    """The same epochs through AugloaderDataset in a torch DataLoader
    (batch_size=None: the daemon batches), workers 0 or W persistent ones
    (each reads every W-th batch and makes its tensors; the trainer
    receives them through shared memory): per epoch, wall and the trainer
    process's CPU. The first epoch warms the workers and is not counted."""
    import torch

    from augloader.torch import AugloaderDataset

    ds = AugloaderDataset(url, pyg=False, layout=layout)
    kw = dict(num_workers=workers, persistent_workers=True) if workers else {}
    dl = torch.utils.data.DataLoader(ds, batch_size=None, **kw)

    def run(e):
        def one():
            ds.set_epoch(e)
            return sum(t["num_graphs"] for t in dl)
        return timed(one)
    run(99)
    return [run(e) for e in range(epochs)]


def buffer_mode():
    """How the dense one-hot x's buffers are reused on this torch: by its
    storage use count (torch 2.x) or, where torch has none, NumPy arrays
    idle by reference count."""
    import torch

    from augloader.torch import _ONE_HOT

    return torch.__version__.split("+")[0], "use-count" if _ONE_HOT.enabled else "numpy-refcount"


def clients(bin_dir, d, epochs):
    """The Go client (augloader fetch, its own seconds) against the Python
    client reading the same daemon's epochs, without and with digests
    (SHA-256 of the stream and of each batch), median of epochs."""
    import subprocess

    def go(e, *flags):
        out = subprocess.run([os.path.join(bin_dir, "augloader"), "fetch", "--socket", d.unix.removeprefix("unix://"),
                              "--epoch", str(e), "--json", *flags], check=True, capture_output=True, text=True).stdout
        return json.loads(out)["seconds"]

    def py(e, url, digest):
        t = time.perf_counter()
        s = augloader.connect(url).epoch(e, digest=digest)
        for _ in s:
            pass
        return time.perf_counter() - t

    shm = d.shm
    rows = {
        "go/socket/no-digest": lambda e: go(e, "--no-digest"),
        "python/socket/no-digest": lambda e: py(e, d.unix, False),
        "go/shm/no-digest": lambda e: go(e, "--no-digest", "--shm-ring", str(32 << 20)),
        "python/shm/no-digest": lambda e: py(e, shm, False),
        "go/socket/digest": lambda e: go(e),
        "python/socket/digest": lambda e: py(e, d.unix, True),
    }
    out = {}
    for e in range(epochs + 1):  # alternating, the first not counted
        for name, fn in rows.items():
            w = fn(e)
            if e:
                out.setdefault(name, []).append(w)
    return {k: statistics.median(v) for k, v in out.items()}


def model_for(t, codes, classes, read_loss=False):
    """A GIN-0 training step (5 layers, hidden 64, Adam; examples/train_gin.py's
    model) for batches like t, on t's device, seeded: the loop the CPU and
    GPU benchmarks time. read_loss: each step reads its loss back (a sync
    on a GPU, as a loop that logs does)."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from train_gin import GIN, soft_cross_entropy  # noqa: E402
    dim = t["feature_dim"] if codes else t["x"].shape[1]
    torch.manual_seed(0)
    model = GIN(dim, classes, 64, 5, codes=codes).to(t["edge_index"].device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()

    def step(t):
        loss = soft_cross_entropy(model(t), t["y_soft"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item() if read_loss else None
    return step


def loop(url, layout, batches, epochs, threads):
    """A CPU training loop (GIN-0, 5 layers, hidden 64, Adam) over the
    first `batches` batches of each epoch: resident (every batch's tensors
    made before the clock starts: the floor) and through a Prefetcher (the
    daemon's batches turned into tensors on a thread beside the loop).
    Returns per-epoch medians: wall s of each, the Prefetcher's wait."""
    import torch

    from augloader.torch import Prefetcher, to_tensors

    torch.set_num_threads(threads)
    first = to_tensors(next(iter(augloader.connect(url).epoch(0, count=1))), "cpu", layout=layout)
    step = model_for(first, first["x"] is None, first["y_soft"].shape[1])

    resident, fed, waits = [], [], []
    for e in range(epochs + 1):
        ts = [to_tensors(b, "cpu", layout=layout) for b in augloader.connect(url).epoch(100 + e, count=batches)]
        t0 = time.perf_counter()
        for t in ts:
            step(t)
        r = time.perf_counter() - t0
        del ts
        t0 = time.perf_counter()
        pf = Prefetcher(augloader.connect(url).epoch(100 + e, count=batches), "cpu", layout=layout)
        for t in pf:
            step(t)
        f = time.perf_counter() - t0
        if e:  # the first warms both
            resident.append(r)
            fed.append(f)
            waits.append(pf.wait_s)
    return statistics.median(resident), statistics.median(fed), statistics.median(waits)


def pyg(loader):
    """One epoch of a PyG DataLoader; its CPU counts its worker processes
    too (bench/peers/cpuclock.py: the trainer's machine pays for them)."""
    g = 0
    t, c = time.perf_counter(), loader_cpu_s()
    for b in loader:
        _ = (b.x, b.edge_index, b.batch, b.ptr, b.y)
        g += b.num_graphs
    return time.perf_counter() - t, loader_cpu_s() - c, g


def as_codes(data):
    """The same graphs with x = the int64 degree code [N] (what an
    Embedding takes) in place of the one-hot rows."""
    out = []
    for d in data:
        c = copy.copy(d)
        c.x = d.x.argmax(dim=1)
        out.append(c)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--workdir", default="/tmp")
    ap.add_argument("--loop-batches", type=int, default=10, help="batches of each epoch the training loop takes")
    ap.add_argument("--json")
    args = ap.parse_args()
    from torch_geometric.loader import DataLoader

    rows = []

    def record(name, runs, **extra):
        walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
        row = {"name": name, "wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
               "walls": walls, "cpus": cpus, "graphs": runs[0][2], **extra}
        rows.append(row)
        print(f"{name:40s} wall {row['wall_s']:.3f} s  trainer CPU {row['cpu_s']:.3f} s  ({row['graphs']} graphs)", flush=True)
        print(f"RESULT kind=tensors name={name} wall_s={row['wall_s']:.4f} cpu_s={row['cpu_s']:.4f} "
              f"graphs={row['graphs']} epochs={len(runs)}", flush=True)
        return row

    d = Daemon(args.bin, args.shards, "nodesam", args.workdir)
    try:
        for t, url in (("socket", d.unix), ("shm", d.shm)):
            for layout in ("pyg", "codes"):
                ours(url, 99, layout)  # warm: the daemon's indexes, the client's imports
                record(f"augloader/{t}/{layout}", [ours(url, e, layout) for e in range(args.epochs)],
                       transport=t, layout=layout)
                for workers in (0, 2):
                    record(f"augloader/{t}/{layout}/loader-workers={workers}", through_loader(url, args.epochs, layout, workers),
                           transport=t, layout=layout, workers=workers)
        version, mode = buffer_mode()
        print(f"RESULT kind=buffers torch={version} mode={mode}", flush=True)
        for name, wall in clients(args.bin, d, args.epochs).items():
            print(f"{name:40s} read {wall:.3f} s", flush=True)
            print(f"RESULT kind=client name={name} wall_s={wall:.4f} epochs={args.epochs}", flush=True)
        shm = d.shm
        for layout in ("pyg", "codes"):
            r, f, wait = loop(shm, layout, args.loop_batches, 3, os.cpu_count() or 1)
            print(f"loop/{layout}: resident {r:.3f} s, prefetched {f:.3f} s, wait {wait:.3f} s "
                  f"({args.loop_batches} batches)", flush=True)
            print(f"RESULT kind=loop layout={layout} resident_s={r:.4f} fed_s={f:.4f} wait_s={wait:.4f} "
                  f"batches={args.loop_batches} epochs=3", flush=True)
        dense = load_pyg(args.shards)
        for layout, data in (("pyg", dense), ("codes", as_codes(dense))):
            best = None
            for workers, persistent in PEER_CONFIGS:
                name = f"pyg/{layout}/workers={workers}" + ("/persistent" if persistent else "")
                loader = DataLoader(DropEdge(data), batch_size=32, shuffle=True, num_workers=workers,
                                    persistent_workers=persistent)
                if persistent:
                    pyg(loader)
                row = record(name, [pyg(loader) for _ in range(args.epochs)], layout=layout, workers=workers,
                             persistent=persistent)
                if best is None or row["wall_s"] < best["wall_s"]:
                    best = row
            print(f"pyg/{layout}/fastest = {best['name']}")
            # The comparison itself: ours over each transport and PyG's
            # fastest configuration, epoch by epoch in turn (the first
            # round warms both, not counted), so both see the same machine.
            loader = DataLoader(DropEdge(data), batch_size=32, shuffle=True, num_workers=best["workers"],
                                persistent_workers=best["persistent"])
            runs = {"socket": [], "shm": [], "pyg": []}
            for e in range(args.epochs + 1):
                for t, url in (("socket", d.unix), ("shm", shm)):
                    r = ours(url, 200 + e, layout)
                    if e:
                        runs[t].append(r)
                r = pyg(loader)
                if e:
                    runs["pyg"].append(r)
            for t in ("socket", "shm"):
                record(f"paired/augloader/{t}/{layout}", runs[t], transport=t, layout=layout, paired=True)
            p = record(f"paired/pyg/{layout}/fastest", runs["pyg"], layout=layout, config=best["name"], paired=True)
            rows.append({"name": f"pyg/{layout}/fastest", "config": best["name"], "wall_s": p["wall_s"],
                         "cpu_s": p["cpu_s"], "layout": layout})
            print(f"RESULT kind=fastest layout={layout} name={best['name']} wall_s={p['wall_s']:.4f} cpu_s={p['cpu_s']:.4f} "
                  f"paired={args.epochs}", flush=True)
    finally:
        d.stop()
    by = {r["name"]: r for r in rows}
    print("\n| layout | transport | augloader wall s | PyG wall s (fastest) | wall ratio | augloader trainer CPU s | PyG CPU s (with workers) | CPU ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for layout in ("pyg", "codes"):
        p = by[f"pyg/{layout}/fastest"]
        for t in ("socket", "shm"):
            a = by[f"paired/augloader/{t}/{layout}"]
            print(f"| {layout} | {t} | {a['wall_s']:.3f} | {p['wall_s']:.3f} ({p['config'].split('/', 2)[2]}) | "
                  f"{p['wall_s'] / a['wall_s']:.1f}× | {a['cpu_s']:.3f} | {p['cpu_s']:.3f} | 1/{p['cpu_s'] / max(a['cpu_s'], 1e-9):.0f} |")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
