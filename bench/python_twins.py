#!/usr/bin/env python3
"""Two views of every graph (issue 38): an epoch of GraphCL twins into PyG
Batches, augloader against GraphCL's augmentations written clean-room in a
PyG Dataset.get run by PyG's DataLoader, each at its fastest setting. Same
view pair (node dropping 10% / a subgraph of 20% of the nodes), same batch
size, the same graphs (OneHotDegree features, as PyG users build COLLAB).

  augloader/<t>/<layout>/bs=<b>      AugloaderDataset(twins=2, pyg=True, layout=<layout>) over
                                     transport t (socket, shm): a pair of PyG Batches per
                                     batch of b graphs
  pyg/<layout>/bs=<b>/workers=<w>[/persistent]
                                     DataLoader(GraphCLPair(data), batch_size=b, shuffle=True,
                                     num_workers=w): Dataset.get returns (view1, view2), each
                                     made per graph (bench/peers/graphcl.py); PyG's Collater
                                     makes the two Batches. kind=fastest names the fastest
                                     configuration of each layout.

layout pyg: x is the dense one-hot degree [N, dim] float32 in both (to_tensors
builds it from the codes); codes: augloader's Batch holds the int32 codes
(x_code, x_node, x_weight: what CodeEmbedding takes), PyG's Data.x the int64
degree code [N] (what an Embedding takes).

Per epoch (median over epochs): wall time and CPU time (user + system):
ours this (the trainer) process's (the daemon is another process), PyG's
its process's and its DataLoader workers' (bench/peers/cpuclock.py).
After the sweep, kind=fastest rows come from epochs alternated one by one
(ours over the socket, ours over shared memory, PyG's fastest
configuration of the layout, and again), so both sides see the same
machine.

Usage: python bench/python_twins.py --bin bin --shards COLLAB.shards --epochs 3 [--prefix NAME/]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import augloader  # noqa: E402
from cpuclock import loader_cpu_s, self_cpu_s  # noqa: E402
from python_client import PEER_CONFIGS, load_pyg  # noqa: E402
from python_tensors import as_codes  # noqa: E402

PAIR = "dropnode:ratio=0.1 / subgraph:ratio=0.2"


def timed(it, cpu=self_cpu_s):
    """(wall s, CPU s, graphs) of one pass over it; cpu: the clock
    (this process's, or with its DataLoader workers' for PyG)."""
    t, c, graphs = time.perf_counter(), cpu(), 0
    for a, b in it:
        assert a.num_graphs == b.num_graphs
        graphs += a.num_graphs
    return time.perf_counter() - t, cpu() - c, graphs


def medians(runs):
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]


def our_dataset(url, layout, batch_size):
    from augloader.torch import AugloaderDataset
    return AugloaderDataset(url, pyg=True, twins=2, batch_size=batch_size, layout=layout)


def our_epoch(ds, e):
    ds.set_epoch(e)
    return timed(ds)


def ours(url, layout, batch_size, epochs):
    ds = our_dataset(url, layout, batch_size)
    runs = [our_epoch(ds, e) for e in range(epochs + 1)]  # the first warms the daemon's caches
    return medians(runs[1:])


def peer_loader(data, batch_size, workers, persistent):
    import torch
    from torch_geometric.loader import DataLoader

    import graphcl
    torch.set_num_threads(1)
    return DataLoader(graphcl.GraphCLPair(data, seed=0), batch_size=batch_size, shuffle=True, num_workers=workers,
                      persistent_workers=persistent)


def peer(data, batch_size, workers, persistent, epochs):
    loader = peer_loader(data, batch_size, workers, persistent)
    runs = [timed(loader, loader_cpu_s) for _ in range(epochs + (1 if persistent else 0))]
    return medians(runs[1:] if persistent else runs)


def paired(urls, data, layout, best, epochs):
    """Ours over each transport and PyG's fastest configuration of the
    layout (best: its sweep row), epoch by epoch in turn; the first round
    warms both and is not counted. Returns {transport: medians} and
    PyG's medians."""
    dss = {t: our_dataset(url, layout, best["bs"]) for t, url in urls}
    loader = peer_loader(data, best["bs"], best["workers"], best["persistent"])
    ours_runs, peer_runs = {t: [] for t in dss}, []
    for e in range(epochs + 1):
        for t, ds in dss.items():
            r = our_epoch(ds, 100 + e)
            if e:
                ours_runs[t].append(r)
        r = timed(loader, loader_cpu_s)
        if e:
            peer_runs.append(r)
    return {t: medians(rs) for t, rs in ours_runs.items()}, medians(peer_runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-sizes", default="32,128")
    ap.add_argument("--layouts", default="pyg,codes")
    ap.add_argument("--prefix", default="", help="prefix of the measurement names (e.g. REDDIT-BINARY/)")
    args = ap.parse_args()
    dense = load_pyg(args.shards)
    rows = []

    def record(kind, name, bs, wall, cpu, graphs, **extra):
        more = " ".join(f"{k}={v}" for k, v in extra.items())
        print(f"{args.prefix + name:44s} wall {wall:.3f} s  CPU {cpu:.3f} s  ({graphs} graphs)", flush=True)
        print(f"RESULT kind={kind} name={args.prefix}{name} bs={bs} wall_s={wall:.4f} cpu_s={cpu:.4f} graphs={graphs} {more}",
              flush=True)
        rows.append({"kind": kind, "name": name, "bs": bs, "wall_s": wall, "cpu_s": cpu, **extra})

    with augloader.Daemon(args.shards, binary=os.path.join(args.bin, "augloader"), policy="none", twins=[PAIR],
                          seed=0) as d:
        urls = (("socket", d.url), ("shm", d.shm_url))
        for t, url in urls:
            for layout in args.layouts.split(","):
                for bs in (int(b) for b in args.batch_sizes.split(",")):
                    record("ours", f"augloader/{t}/{layout}/bs={bs}", bs, *ours(url, layout, bs, args.epochs),
                           layout=layout, transport=t)
        for layout in args.layouts.split(","):
            data = dense if layout == "pyg" else as_codes(dense)
            for bs in (int(b) for b in args.batch_sizes.split(",")):
                for workers, persistent in PEER_CONFIGS:
                    name = f"pyg/{layout}/bs={bs}/workers={workers}" + ("/persistent" if persistent else "")
                    record("peer", name, bs, *peer(data, bs, workers, persistent, args.epochs), layout=layout,
                           workers=workers, persistent=persistent)
            best = min((r for r in rows if r["kind"] == "peer" and r["layout"] == layout), key=lambda r: r["wall_s"])
            ours_m, (pw, pc, _) = paired(urls, data, layout, best, args.epochs)
            for t, (ow, oc, _) in ours_m.items():
                same = f"augloader/{t}/{layout}/bs={best['bs']}"
                print(f"RESULT kind=fastest name={args.prefix}{best['name']} layout={layout} transport={t} bs={best['bs']} "
                      f"wall_s={pw:.4f} cpu_s={pc:.4f} ours={args.prefix}{same} ours_wall_s={ow:.4f} ours_cpu_s={oc:.4f} "
                      f"paired={args.epochs}", flush=True)
                print(f"{args.prefix}{layout} over {t}: two views a graph, PyG at its fastest ({best['name']}), "
                      f"{args.epochs} alternating epochs: {pw / ow:.1f}x the wall time, {pc / oc:.2f}x the CPU "
                      f"(PyG's ÷ ours) at batch size {best['bs']}", flush=True)


if __name__ == "__main__":
    main()
