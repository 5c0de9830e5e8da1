#!/usr/bin/env python3
"""Python-side throughput on the real COLLAB, all in one run:

  augloader/socket   the augloader client over the Unix socket: an epoch decoded to
                     PyG-ready arrays (edge_index, batch, ptr, dense one-hot x, soft y)
  augloader/flight   the same over Arrow Flight
  pyg/collate        PyG's DataLoader collating the same graphs in-process (Batch.from_data_list),
                     no augmentation, no workers
  pyg/dropout_edge   PyG's DataLoader with 2 worker processes applying dropout_edge per graph

Usage (make bench runs it): python bench/python_client.py --bin bin --shards COLLAB.shards --epochs 3
Prints one JSON line per measurement and a markdown table.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

import augloader


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(bin_dir, shards, policy, workdir):
    sock = os.path.join(workdir, f"{policy.split(':')[0]}.sock")
    port = free_port()
    p = subprocess.Popen([os.path.join(bin_dir, "augloader"), "serve", "--shards", shards, "--socket", sock,
                          "--flight", f"grpc://127.0.0.1:{port}", "--policy", policy, "--batch-size", "32"],
                         stderr=subprocess.DEVNULL)
    for _ in range(400):
        if os.path.exists(sock):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return p, f"unix://{sock}", f"grpc://127.0.0.1:{port}"
        time.sleep(0.05)
    raise RuntimeError("daemon did not start")


def client_epoch(url, epoch):
    graphs = batches = nbytes = 0
    t = time.perf_counter()
    stream = augloader.connect(url).epoch(epoch)
    for b in stream:
        x = b.dense_x()
        _ = (b.edge_index, b.batch, b.ptr, b.soft_y(), x)
        graphs += b.num_graphs
        batches += 1
        nbytes += b.record.nbytes
    return time.perf_counter() - t, graphs, batches, nbytes


def load_pyg(shards):
    import torch
    from torch_geometric.data import Data
    man = json.load(open(os.path.join(shards, "manifest.json")))
    dim = man["features"]["dim"]
    data = []
    for info in man["shards"]:
        table = ipc.open_file(os.path.join(shards, info["file"])).read_all()
        for row in table.to_batches():
            e_off = row.column("edges").offsets.to_numpy()
            e_val = row.column("edges").values.to_numpy()
            c_off = row.column("x_code").offsets.to_numpy()
            c_val = row.column("x_code").values.to_numpy()
            ys = row.column("label").to_numpy()
            for r in range(row.num_rows):
                e = e_val[e_off[r]:e_off[r + 1]].reshape(-1, 2).T.astype(np.int64)
                ei = torch.from_numpy(np.concatenate([e, e[::-1]], axis=1))
                codes = torch.from_numpy(c_val[c_off[r]:c_off[r + 1]].astype(np.int64))
                x = torch.nn.functional.one_hot(codes, dim).float()  # OneHotDegree, as PyG users build COLLAB
                data.append(Data(x=x, edge_index=ei, y=torch.tensor([int(ys[r])])))
    return data


class DropEdge:
    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        from torch_geometric.utils import dropout_edge
        d = self.data[i].clone()
        d.edge_index, _ = dropout_edge(d.edge_index, p=0.2)
        return d


def pyg_epoch(data, workers, transform):
    from torch_geometric.loader import DataLoader
    ds = DropEdge(data) if transform else data
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers)
    graphs = 0
    t = time.perf_counter()
    for b in loader:
        graphs += b.num_graphs
    return time.perf_counter() - t, graphs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp")
    args = ap.parse_args()
    rows = []

    def record(name, secs, graphs, batches=None, nbytes=None):
        row = {"name": name, "s_per_epoch": secs, "graphs_per_s": graphs / secs}
        if batches:
            row["batches_per_s"] = batches / secs
        if nbytes:
            row["MB_per_s"] = nbytes / 1e6 / secs
        rows.append(row)
        print(json.dumps(row), flush=True)

    for policy in ("none", "nodesam"):
        proc, unix, grpc = serve(args.bin, args.shards, policy, args.workdir)
        try:
            for transport, url in (("socket", unix), ("flight", grpc)):
                best = None
                for e in range(args.epochs):
                    r = client_epoch(url, e)
                    best = r if best is None or r[0] < best[0] else best
                record(f"augloader/{transport}/{policy}", *best)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
    try:
        data = load_pyg(args.shards)
    except ImportError as e:
        print(f"PyG peers skipped: {e}", file=sys.stderr)
        data = None
    if data is not None:
        for name, workers, transform in (("pyg/collate/workers=0", 0, False), ("pyg/dropout_edge/workers=2", 2, True)):
            best = min((pyg_epoch(data, workers, transform) for _ in range(args.epochs)), key=lambda r: r[0])
            record(name, *best)
    print("\n| measurement | s/epoch | graphs/s | batches/s | MB/s |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['s_per_epoch']:.3f} | {r['graphs_per_s']:,.0f} | "
              f"{r.get('batches_per_s', float('nan')):,.0f} | {r.get('MB_per_s', float('nan')):,.0f} |")


if __name__ == "__main__":
    main()
