#!/usr/bin/env python3
"""Train a GINE (GIN with edge features, Hu et al., ICLR'20 — OGB's own
molecule baseline) on batches streamed by augloader from a molecule set.

    shardconv convert -i ogbg_molesol -o mol.shards
    python examples/train_gine.py --shards mol.shards --split mol.shards/split-scaffold.json \\
        --policy nodesam --epochs 50 --json result.json

One daemon (augloader.Daemon) serves a training view with --policy and the
valid and test sets unaugmented. Atoms and bonds are embedded per
categorical column (a table per column of its vocabulary size + 1: the
edge fill's reserved code, which a NodeSam split's new edge carries), as
OGB's AtomEncoder and BondEncoder do; the layers are plain PyTorch. The loss
skips missing targets (NaN): BCE with logits for binary tasks, L1 for
regression. The metric is OGB's Evaluator (ROC-AUC for one binary target,
AP for several, MAE for regression through PCQM4Mv2Evaluator, whose metric
is MAE), on the valid and test sets, at the epoch of the best valid score.

Needs torch, and ogb for its Evaluator: pip install ogb (in a venv over
Debian's python3-torch, whose NumPy is 1.x: pip install ogb "numpy<2"
"pandas<3", since ogb's newest pandas would pull NumPy 2, which that torch
cannot load).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time

from _needs import need

need("train_gine.py", "torch", "numpy", "augloader")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn

import augloader
from augloader.torch import AugloaderDataset, save_atomic, to_tensors


class ColumnEmbedding(nn.Module):
    """Sum of one embedding per categorical column (vocab + 1 rows: the
    fill's reserved code), plus a linear map of a float block."""

    def __init__(self, vocabs, dense, dim):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(v + 1, dim) for v in vocabs)
        self.dense = nn.Linear(dense, dim) if dense else None

    def forward(self, codes, floats=None):
        out = 0
        for c, t in enumerate(self.tables):
            out = out + t(codes[:, c])
        if self.dense is not None and floats is not None:
            out = out + self.dense(floats)
        return out


class GINEConv(nn.Module):
    def __init__(self, dim, edge_vocabs, edge_dense):
        super().__init__()
        self.bond = ColumnEmbedding(edge_vocabs, edge_dense, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.BatchNorm1d(2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.eps = nn.Parameter(torch.zeros(1))

    def forward(self, h, src, dst, ecodes, efloats):
        msg = torch.relu(h[src] + self.bond(ecodes, efloats))
        agg = torch.zeros_like(h).index_add_(0, dst, msg)
        return self.mlp((1 + self.eps) * h + agg)


class GINE(nn.Module):
    def __init__(self, node_vocabs, node_dense, edge_vocabs, edge_dense, targets, dim=64, layers=3, dropout=0.3):
        super().__init__()
        self.atom = ColumnEmbedding(node_vocabs, node_dense, dim)
        self.convs = nn.ModuleList(GINEConv(dim, edge_vocabs, edge_dense) for _ in range(layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(dim) for _ in range(layers))
        self.dropout = dropout
        self.head = nn.Linear(dim, targets)

    def forward(self, t):
        x = t["x"]
        codes = x if x.dtype == torch.long else torch.zeros((x.shape[0], 0), dtype=torch.long)
        floats = t.get("x_dense", x if x.dtype != torch.long else None)
        h = self.atom(codes, floats)
        ea = t.get("edge_attr")
        ecodes = ea if ea is not None and ea.dtype == torch.long else torch.zeros((t["edge_index"].shape[1], 0), dtype=torch.long)
        efloats = t.get("edge_x", ea if ea is not None and ea.dtype != torch.long else None)
        src, dst = t["edge_index"]
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            h = norm(conv(h, src, dst, ecodes, efloats))
            if i < len(self.convs) - 1:
                h = torch.relu(h)
            h = nn.functional.dropout(h, self.dropout, self.training)
        pooled = torch.zeros((t["num_graphs"], h.shape[1]), dtype=h.dtype).index_add_(0, t["batch"], h)
        pooled = pooled / torch.bincount(t["batch"], minlength=t["num_graphs"]).clamp(min=1).unsqueeze(1)
        return self.head(pooled)


def masked_loss(pred, y, task):
    mask = ~torch.isnan(y)
    if not mask.any():
        return pred.sum() * 0
    if task == "binary":
        return nn.functional.binary_cross_entropy_with_logits(pred[mask], y[mask])
    return nn.functional.l1_loss(pred[mask], y[mask])


def evaluator(task, targets):
    """OGB's Evaluator for the task: (name of the metric, fn(y_true, y_pred) -> float, higher is better)."""
    sys.modules.setdefault("outdated", None)  # import ogb would ask the network for a newer version
    try:
        from ogb.graphproppred import Evaluator
    except ImportError as e:
        sys.exit(f"train_gine.py needs ogb for its Evaluator ({e}): pip install ogb "
                 '(over Debian\'s python3-torch: pip install ogb "numpy<2" "pandas<3")')
    if task == "binary" and targets == 1:
        ev = Evaluator("ogbg-molhiv")
        return "rocauc", lambda yt, yp: ev.eval({"y_true": yt, "y_pred": yp})["rocauc"], True
    if task == "binary":
        ev = Evaluator("ogbg-molpcba")  # AP; molpcba's 128 tasks: the evaluator checks only the shape's rank
        return "ap", lambda yt, yp: ev.eval({"y_true": yt, "y_pred": yp})["ap"], True
    from ogb.lsc import PCQM4Mv2Evaluator
    ev = PCQM4Mv2Evaluator()
    mask = lambda yt: ~np.isnan(yt)  # noqa: E731
    return "mae", lambda yt, yp: float(ev.eval({"y_true": torch.from_numpy(yt[mask(yt)]),
                                              "y_pred": torch.from_numpy(yp[mask(yt)])})["mae"]), False


def target_scale(client, view, targets):
    """Per-target mean and std of the training set's known values (one
    unaugmented pass): regression targets are learned standardised."""
    ys = np.concatenate([b.y.reshape(len(b.y), -1) for b in client.epoch(0, view=view)])
    mean = np.array([np.nanmean(ys[:, k]) if np.any(~np.isnan(ys[:, k])) else 0.0 for k in range(targets)])
    std = np.array([np.nanstd(ys[:, k]) if np.any(~np.isnan(ys[:, k])) else 1.0 for k in range(targets)])
    return torch.tensor(mean, dtype=torch.float32), torch.tensor(np.where(std > 0, std, 1.0), dtype=torch.float32)


def predict(model, client, view, epoch, mean, std):
    model.eval()
    ys, ps = [], []
    with torch.no_grad():
        for b in client.epoch(epoch, view=view):
            t = to_tensors(b)
            ps.append((model(t) * std + mean).numpy())
            ys.append(t["y"].numpy())
    return np.concatenate(ys), np.concatenate(ps)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", required=True, help="a format 3 shard folder (shardconv convert of an OGB folder)")
    ap.add_argument("--split", required=True, help="its split file (split-NAME.json: training, valid, test)")
    ap.add_argument("--policy", default="none", help="the training view's schedule (default none; nodesam, submix:p=0.4, ...)")
    ap.add_argument("--epochs", type=int, default=50, help="training epochs (default 50)")
    ap.add_argument("--batch-size", type=int, default=64, help="graphs per batch (default 64)")
    ap.add_argument("--dim", type=int, default=64, help="hidden width (default 64)")
    ap.add_argument("--layers", type=int, default=3, help="GINE layers (default 3)")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (default 0.001)")
    ap.add_argument("--seed", type=int, default=0, help="model and daemon seed (default 0)")
    ap.add_argument("--json", help="write the per-epoch history and the result here")
    ap.add_argument("--checkpoint", help="checkpoint file (model, optimizer, RNG, history and the loader's position in "
                                         "the epoch), written atomically every --checkpoint-every steps")
    ap.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints (default 100)")
    ap.add_argument("--resume", action="store_true", help="continue from --checkpoint when it exists")
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    views = [f"train={args.split}:training:{args.policy}", f"valid={args.split}:valid", f"test={args.split}:test",
             f"train_plain={args.split}:training:none"]  # the training set unaugmented, for the target scale
    history = []
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with augloader.Daemon(args.shards, views=views, seed=args.seed, batch_size=args.batch_size) as d:
        client = d.client()
        first = next(iter(client.epoch(0, view="valid")))
        task, targets = first.task, (first.y.shape[1] if first.y.ndim == 2 else 1)
        if task == "class":
            sys.exit("train_gine.py: this example trains binary and regression targets; the set has classes")
        model = GINE(first.node_vocab, first.x_float.shape[1] if first.x_float is not None else 0,
                     first.edge_vocab, first.edge_x.shape[1] if first.edge_x is not None else 0,
                     targets, dim=args.dim, layers=args.layers)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        metric, score, higher = evaluator(task, targets)
        mean, std = torch.zeros(targets), torch.ones(targets)
        if task == "regression":
            mean, std = target_scale(client, "train_plain", targets)
        best, start, steps, losses = None, 0, 0, None
        train = AugloaderDataset(d.url, view="train", pyg=False)
        if args.resume and args.checkpoint and os.path.exists(args.checkpoint):
            ck = torch.load(args.checkpoint)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            torch.set_rng_state(ck["rng"])
            train.load_state_dict(ck["loader"])
            history, best, start, steps, losses = ck["history"], ck["best"], ck["epoch"], ck["steps"], ck["losses"]
            print(f"resumed from {args.checkpoint}: epoch {start}, batch {ck['loader']['batches']}", flush=True)
        for epoch in range(start, args.epochs):
            if stop:
                break
            t0 = time.time()
            model.train()
            train.set_epoch(epoch)
            losses = [] if losses is None else losses
            for t in train:
                opt.zero_grad()
                loss = masked_loss(model(t), (t["y"] - mean) / std, task)
                loss.backward()
                opt.step()
                losses.append(loss.item())
                steps += 1
                if args.checkpoint and steps % args.checkpoint_every == 0:
                    save_atomic({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": torch.get_rng_state(),
                                 "loader": train.state_dict(), "history": history, "best": best, "epoch": epoch,
                                 "steps": steps, "losses": losses}, args.checkpoint)
                    print(f"checkpoint step {steps}", flush=True)
            row = {"epoch": epoch, "loss": float(np.mean(losses)), "seconds": time.time() - t0}
            losses = None
            for view in ("valid", "test"):
                yt, yp = predict(model, client, view, epoch, mean, std)
                row[view] = score(yt, yp)
            history.append(row)
            print(f"epoch {epoch:3d}  loss {row['loss']:.4f}  valid {metric} {row['valid']:.4f}  test {metric} {row['test']:.4f}",
                  flush=True)
            if best is None or (row["valid"] > best["valid"] if higher else row["valid"] < best["valid"]):
                best = row
    result = {"policy": args.policy, "metric": metric, "task": task, "targets": targets, "seed": args.seed,
              "best_epoch": best["epoch"] if best else None, "valid": best["valid"] if best else math.nan,
              "test": best["test"] if best else math.nan, "history": history}
    print(f"best valid {metric} {result['valid']:.4f} at epoch {result['best_epoch']}: test {metric} {result['test']:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
