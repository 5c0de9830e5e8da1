#!/usr/bin/env python3
"""The trainer's cost per batch (issue 28): a NodeSam COLLAB epoch turned
into torch tensors on the CPU device through augloader.torch.to_tensors,
against PyG's DataLoader applying dropout_edge in the same layout, each at
its fastest configuration. Per epoch: wall time and this (the trainer)
process's CPU time (getrusage, user + system; DataLoader worker processes
are not the trainer's).

  augloader/<t>/<layout>   t: socket (Unix socket) or shm (unix+shm://)
  pyg/<layout>/workers=<w>[/persistent], pyg/<layout>/fastest

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
import resource
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import augloader  # noqa: E402
from python_client import PEER_CONFIGS, Daemon, DropEdge, load_pyg  # noqa: E402


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn):
    t, c = time.perf_counter(), cpu_s()
    graphs = fn()
    return time.perf_counter() - t, cpu_s() - c, graphs


def ours(url, epoch, layout):
    from augloader.torch import to_tensors

    def run():
        g = 0
        for b in augloader.connect(url).epoch(epoch):
            t = to_tensors(b, "cpu", layout=layout)
            g += t["num_graphs"]
        return g
    return timed(run)


def pyg(loader):
    def run():
        g = 0
        for b in loader:
            _ = (b.x, b.edge_index, b.batch, b.ptr, b.y)
            g += b.num_graphs
        return g
    return timed(run)


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
        for t, url in (("socket", d.unix), ("shm", d.unix.replace("unix://", "unix+shm://"))):
            for layout in ("pyg", "codes"):
                ours(url, 99, layout)  # warm: the daemon's indexes, the client's imports
                record(f"augloader/{t}/{layout}", [ours(url, e, layout) for e in range(args.epochs)],
                       transport=t, layout=layout)
    finally:
        d.stop()
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
        rows.append({"name": f"pyg/{layout}/fastest", "config": best["name"], "wall_s": best["wall_s"],
                     "cpu_s": best["cpu_s"], "layout": layout})
        print(f"pyg/{layout}/fastest = {best['name']}")
        print(f"RESULT kind=fastest layout={layout} name={best['name']} wall_s={best['wall_s']:.4f} cpu_s={best['cpu_s']:.4f}",
              flush=True)
    by = {r["name"]: r for r in rows}
    print("\n| layout | transport | augloader wall s | PyG wall s (fastest) | wall ratio | augloader trainer CPU s | PyG trainer CPU s | CPU ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for layout in ("pyg", "codes"):
        p = by[f"pyg/{layout}/fastest"]
        for t in ("socket", "shm"):
            a = by[f"augloader/{t}/{layout}"]
            print(f"| {layout} | {t} | {a['wall_s']:.3f} | {p['wall_s']:.3f} ({p['config'].split('/', 2)[2]}) | "
                  f"{p['wall_s'] / a['wall_s']:.1f}× | {a['cpu_s']:.3f} | {p['cpu_s']:.3f} | 1/{p['cpu_s'] / max(a['cpu_s'], 1e-9):.0f} |")
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
