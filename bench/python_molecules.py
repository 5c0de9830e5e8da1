#!/usr/bin/env python3
"""A NodeSam epoch of a molecule set with edge features to Python, in PyG's
layout, against PyG's DataLoader over OGB's own PygGraphPropPredDataset of
the same folder doing dropout_edge with edge_attr masked to match:

  augloader/nodesam/pyg-layout/bs=B   the daemon (NodeSam, every core) over the Unix
                                      socket; per batch the int64 edge_index [2, 2E],
                                      edge_attr [2E, 3] and x [N, 9] codes, batch, y
                                      [B, T]: what an OGB model's AtomEncoder and
                                      BondEncoder take
  pyg/dropout_edge/workers=W[/persistent]/bs=B
                                      DataLoader(PygGraphPropPredDataset, shuffled,
                                      num_workers=W) whose dataset applies
                                      torch_geometric.utils.dropout_edge (p=0.2) to
                                      each graph and keeps edge_attr[mask]; every
                                      configuration measured, the fastest the peer

Both read the same synthetic ogbg-molpcba-shaped folder (shardconv synth):
ours converted to shards, PyG processing it into its own file first (not
timed). Prints one RESULT line per measurement (best and median seconds an
epoch, graphs/s), then the ratio.

Usage (bench/molecules.sh runs it):
  python bench/python_molecules.py --bin bin --ogb FOLDER --shards SHARDS --epochs 3
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # PyG 2.5.3's processed file under torch >= 2.6
sys.modules.setdefault("outdated", None)  # import ogb would ask the network for a newer version

import augloader  # noqa: E402


def ours(bins, shards, epochs, batch_size, workers):
    import numpy as np
    times, graphs = [], 0
    with augloader.Daemon(shards, policy="nodesam", workers=workers, binary=os.path.join(bins, "augloader")) as d:
        c = d.client()
        for e in range(epochs + 1):  # epoch 0 warms the daemon's caches and the page cache
            t0 = time.perf_counter()
            n = 0
            for b in c.epoch(e, batch_size=batch_size):
                ei = b.edge_index
                ea = b.edge_attr
                x = b.node_x()
                bv = b.batch
                y = b.y
                assert ei.dtype == np.int64 and ea.shape[0] == ei.shape[1] and x.shape[0] == bv.shape[0] and y.shape[0] == b.num_graphs
                n += b.num_graphs
            if e > 0:
                times.append(time.perf_counter() - t0)
                graphs = n
    return times, graphs


class DropEdgeAttr:
    """dropout_edge on each graph, edge_attr masked with the same mask."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        from torch_geometric.utils import dropout_edge
        d = self.ds[i]
        d.edge_index, mask = dropout_edge(d.edge_index, p=0.2)
        d.edge_attr = d.edge_attr[mask]
        return d


def peer(ds, epochs, workers, persistent, batch_size):
    from torch_geometric.loader import DataLoader
    loader = DataLoader(DropEdgeAttr(ds), batch_size=batch_size, shuffle=True, num_workers=workers,
                        persistent_workers=persistent)
    times, graphs = [], 0
    for e in range(epochs + 1):
        t0 = time.perf_counter()
        n = 0
        for b in loader:
            n += b.num_graphs
        if e > 0 or workers == 0:
            times.append(time.perf_counter() - t0)
            graphs = n
    return times[-epochs:], graphs


def result(name, times, graphs):
    best, med = min(times), statistics.median(times)
    print(f"RESULT kind=python name={name} epochs={len(times)} best_s={best:.4f} median_s={med:.4f} "
          f"graphs={graphs} graphs_per_s={graphs / med:.0f}", flush=True)
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--ogb", required=True, help="the OGB folder (csv.gz layout)")
    ap.add_argument("--shards", required=True, help="its shards (shardconv convert)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=128)
    a = ap.parse_args()
    import torch
    from ogb.graphproppred import PygGraphPropPredDataset
    torch.set_num_threads(1)
    meta = {"eval metric": "ap", "task type": "binary classification", "num classes": 2, "split": "scaffold",
            "binary": "False", "add_inverse_edge": "True", "has_node_attr": "True", "has_edge_attr": "True",
            "additional node files": "None", "additional edge files": "None", "is hetero": "False",
            "version": 1, "download_name": "synthetic", "url": "", "dir_path": a.ogb, "num tasks": a.tasks}
    t0 = time.perf_counter()
    ds = PygGraphPropPredDataset("synthetic", root=a.ogb, meta_dict=meta)
    print(f"# PyG processed the folder in {time.perf_counter() - t0:.1f} s ({len(ds)} graphs)", flush=True)
    cores = os.cpu_count()
    meds = {}
    for bs in (32, 128):
        t, g = ours(a.bin, a.shards, a.epochs, bs, cores)
        meds[f"ours/{bs}"] = result(f"augloader/nodesam/pyg-layout/bs={bs}", t, g)
    for bs in (32, 128):
        for w, p in ((0, False), (1, True), (2, False), (2, True)):
            name = f"pyg/dropout_edge/workers={w}{'/persistent' if p else ''}/bs={bs}"
            t, g = peer(ds, a.epochs, w, p, bs)
            meds[name] = result(name, t, g)
    fastest = min((k for k in meds if k.startswith("pyg/")), key=meds.get)
    best_ours = min((k for k in meds if k.startswith("ours/")), key=meds.get)
    print(f"RESULT kind=ratio peer={fastest} ours={best_ours} ratio={meds[fastest] / meds[best_ours]:.2f}", flush=True)


if __name__ == "__main__":
    main()
