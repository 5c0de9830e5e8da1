#!/usr/bin/env python3
"""GraphCL (You et al., NeurIPS'20) unsupervised graph representation
learning on twins served by augloader (docs/contrastive.md).

    python examples/train_graphcl.py --dataset MUTAG --seeds 0,1,2 --json mutag.json

converts ../shared/datasets/tu/MUTAG (or takes --shards), starts one
daemon per seed (augloader.Daemon) declaring the twin sets of --aug, and
for each seed trains, then scores:

- The protocol of GraphCL's unsupervised_TU code: a GIN encoder of 3
  layers with 32 hidden units (Linear-ReLU-Linear MLPs, ReLU then batch
  norm after each), sum pooling of every layer concatenated (96 numbers a
  graph), a 2-layer projection head, the NT-Xent loss at temperature 0.2
  between the two twins of every graph, Adam at lr 0.01, batches of 128,
  20 epochs.
- Each epoch is one request for twins=2: the daemon permutes the set (seed,
  epoch) and sends every graph twice, each twin from its own draw.
- Embeddings of the unaugmented graphs (a plain request to the same
  daemon, policy none) are scored by an RBF SVM in stratified 10-fold
  cross-validation, C chosen from 10^-3 … 10^3 by an inner 5-fold grid
  search on each training part, as GraphCL's evaluate_embedding does.

--aug names the twin sets: random4 (GraphCL's reported setting: the graph
beside one of node dropping 10%, edge dropping 10%, subgraph 20%,
attribute masking 10%, uniformly), random2, random3, nodesam and submix
(the WWW'22 paper's augmentations as GraphCL views), or pairs (both twins
augmented). --twins gives sets by hand. Prints one "epoch E loss L" line
an epoch and one "seed S accuracy A" line a seed.

Needs torch and, to score (--eval svm, the default), scikit-learn; both are
checked before anything runs.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from _needs import need

need("train_graphcl.py", "torch", "numpy", "augloader")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F

import augloader
from augloader.torch import AugloaderDataset

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets" / "tu"

# GraphCL's unsupervised_TU ratios: 10% of nodes dropped, of edges dropped,
# of nodes masked; a subgraph of 20% of the nodes.
DROPNODE, DROPEDGE, SUBGRAPH, ATTRMASK = "dropnode:ratio=0.1", "dropedge:ratio=0.1", "subgraph:ratio=0.2", "attrmask:ratio=0.1"
AUGS = {
    "random2": [f"none / {a}" for a in (DROPNODE, SUBGRAPH)],
    "random3": [f"none / {a}" for a in (DROPNODE, DROPEDGE, SUBGRAPH)],
    "random4": [f"none / {a}" for a in (DROPNODE, DROPEDGE, SUBGRAPH, ATTRMASK)],
    "pairs": [f"{a} / {b}" for a in (DROPNODE, SUBGRAPH) for b in (DROPNODE, DROPEDGE, SUBGRAPH, ATTRMASK)],
    "nodesam": ["none / nodesam"],
    "submix": ["none / submix:p=0.4"],
}


class GINConv(nn.Module):
    """x' = MLP(x + Σ neighbours) (GIN-0, sum aggregation)."""

    def __init__(self, dim_in, dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim_in, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, x, edge_index):
        src, dst = edge_index
        return self.mlp(x + torch.zeros_like(x).index_add_(0, dst, x[src]))


class Encoder(nn.Module):
    """GraphCL's: layers of GIN, ReLU, batch norm; every layer sum-pooled
    and concatenated."""

    def __init__(self, dim_in, hidden, layers):
        super().__init__()
        self.convs = nn.ModuleList(GINConv(dim_in if i == 0 else hidden, hidden) for i in range(layers))
        self.bns = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers))

    def forward(self, t):
        x, edge_index, batch, n = t["x"], t["edge_index"], t["batch"], t["num_graphs"]
        pooled = []
        for conv, bn in zip(self.convs, self.bns):
            x = bn(F.relu(conv(x, edge_index)))
            pooled.append(torch.zeros((n, x.shape[1]), dtype=x.dtype).index_add_(0, batch, x))
        return torch.cat(pooled, 1)


class GraphCL(nn.Module):
    def __init__(self, dim_in, hidden, layers):
        super().__init__()
        self.encoder = Encoder(dim_in, hidden, layers)
        d = hidden * layers
        self.proj = nn.Sequential(nn.Linear(d, d), nn.ReLU(inplace=True), nn.Linear(d, d))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, t):
        return self.proj(self.encoder(t))


def nt_xent(z1, z2, temperature=0.2):
    """GraphCL's loss: graph i's two twins are the positive pair, the other
    graphs' second twins the negatives (cosine similarity / T)."""
    sim = (F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).t() / temperature).exp()
    pos = sim.diagonal()
    return -torch.log(pos / (sim.sum(1) - pos)).mean()


CONSTANT = False  # --features constant: every node's feature is 1 (GraphCL's code for social sets)


def features(t):
    """The node features as float (one-hot labels or degree for TU sets),
    or a constant 1 a node with --features constant."""
    x = t["x"]
    if CONSTANT:
        t["x"] = torch.ones((x.shape[0], 1))
    else:
        t["x"] = x.float() if x.dtype != torch.float32 else x
    return t


def embed(model, url, batch_size):
    """Encoder embeddings of every served graph, unaugmented (policy none),
    with their labels, in graph id order."""
    model.eval()
    ids, out, ys = [], [], []
    with torch.no_grad():
        for b in augloader.connect(url).epoch(0, batch_size=batch_size):
            from augloader.torch import to_tensors
            t = features(to_tensors(b))
            out.append(model.encoder(t).numpy())
            ids.append(b.graph_id)
            ys.append(b.y)
    order = np.argsort(np.concatenate(ids), kind="stable")
    return np.concatenate(out)[order], np.concatenate(ys)[order]


def svm_accuracy(x, y, seed):
    """Mean accuracy of an RBF SVM over stratified 10-fold CV, C from an
    inner 5-fold grid search (GraphCL's evaluate_embedding, test side)."""
    from sklearn.metrics import accuracy_score
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    accs = []
    for train, test in StratifiedKFold(n_splits=10, shuffle=True, random_state=seed).split(x, y):
        clf = GridSearchCV(SVC(), {"C": [0.001, 0.01, 0.1, 1, 10, 100, 1000]}, cv=5, scoring="accuracy")
        clf.fit(x[train], y[train])
        accs.append(accuracy_score(y[test], clf.predict(x[test])))
    return float(np.mean(accs))


def run_seed(shards, twins, seed, args, log=print):
    torch.manual_seed(seed)
    np.random.seed(seed)
    with augloader.Daemon(shards, policy="none", seed=seed, workers=args.daemon_workers,
                          batch_size=args.batch_size, twins=twins) as d:
        ds = AugloaderDataset(d.url, pyg=False, twins=2, batch_size=args.batch_size)
        model = opt = None
        losses = []
        t0 = time.perf_counter()
        for epoch in range(args.epochs):
            ds.set_epoch(epoch)
            total, graphs = 0.0, 0
            model and model.train()
            for a, b in ds:
                a, b = features(a), features(b)
                if model is None:
                    model = GraphCL(a["x"].shape[1], args.hidden, args.layers)
                    model.train()
                    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
                loss = nt_xent(model(a), model(b))
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * a["num_graphs"]
                graphs += a["num_graphs"]
            losses.append(total / graphs)
            log(f"epoch {epoch} loss {losses[-1]:.4f}")
        train_s = time.perf_counter() - t0
        acc = None
        if args.eval == "svm":
            x, y = embed(model, d.url, args.batch_size)
            acc = svm_accuracy(x, y, seed)
        log(f"seed {seed} accuracy {acc if acc is None else round(acc, 4)} (training {train_s:.1f} s)")
        return {"seed": seed, "losses": losses, "accuracy": acc, "train_s": train_s}


def convert(name, out):
    """Shards of ../shared/datasets/tu/NAME (shardconv convert)."""
    src = SHARED / name
    if not src.exists():
        sys.exit(f"train_graphcl: {src} is missing: give --shards, or put ../shared/datasets beside the repository")
    shardconv = augloader.daemon.find_binary("shardconv")
    subprocess.run([shardconv, "convert", "-q", "-i", str(src), "-o", str(out)], check=True)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="a TU set in ../shared/datasets/tu (MUTAG, PROTEINS, NCI1, IMDB-BINARY, …)")
    src.add_argument("--shards", help="a shard folder (shardconv convert)")
    p.add_argument("--aug", default="random4", choices=sorted(AUGS), help="the twin sets (default: GraphCL's random4)")
    p.add_argument("--twins", action="append", help="a twin set 'A / B' (repeatable), instead of --aug")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds: torch's and the daemon's")
    p.add_argument("--epochs", type=int, default=20, help="training epochs (GraphCL's 20)")
    p.add_argument("--batch-size", type=int, default=128, help="graphs per batch (GraphCL's 128)")
    p.add_argument("--hidden", type=int, default=32, help="hidden units per layer (GraphCL's 32)")
    p.add_argument("--layers", type=int, default=3, help="GIN layers (GraphCL's go.sh: 3)")
    p.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate")
    p.add_argument("--eval", choices=("svm", "none"), default="svm",
                   help="score the embeddings (svm: needs scikit-learn, pip install scikit-learn) or only train")
    p.add_argument("--features", choices=("shards", "constant"), default="shards",
                   help="node features: the shards' (one-hot labels or degree), or a constant 1 (GraphCL's code for IMDB, COLLAB, REDDIT)")
    p.add_argument("--daemon-workers", type=int, default=1, help="the daemon's augmentation workers")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    if args.eval == "svm":
        # Checked before any training: the scores need scikit-learn's SVM,
        # which the package does not depend on.
        try:
            import sklearn  # noqa: F401
        except ImportError:
            p.error("--eval svm needs scikit-learn (pip install scikit-learn), or give --eval none to only train")
    torch.set_num_threads(args.threads)
    global CONSTANT
    CONSTANT = args.features == "constant"
    twins = args.twins or AUGS[args.aug]
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory(prefix="graphcl-") as tmp:
        shards = args.shards or convert(args.dataset, pathlib.Path(tmp) / "shards")
        runs = [run_seed(shards, twins, s, args) for s in seeds]
    accs = [r["accuracy"] for r in runs if r["accuracy"] is not None]
    summary = {"dataset": args.dataset or os.path.basename(os.path.normpath(args.shards)), "aug": None if args.twins else args.aug,
               "twins": twins, "epochs": args.epochs, "batch_size": args.batch_size, "hidden": args.hidden,
               "layers": args.layers, "lr": args.lr, "features": args.features, "runs": runs}
    if accs:
        summary["mean"], summary["std"] = float(np.mean(accs)), float(np.std(accs))
        print(f"{summary['dataset']} {summary['aug'] or 'custom'}: {100 * summary['mean']:.2f} ± {100 * summary['std']:.2f} "
              f"over {len(accs)} seeds")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
