#!/usr/bin/env python3
"""Train the paper's GIN on batches streamed by augloader.

Start two daemons on the same shards, one serving a fold's training split
with the augmentation policy, one serving its test split without any:

    augloader split --shards mutag.shards --folds 10 --seed 0 --out folds
    augloader serve --shards mutag.shards --split folds/fold-00.json --split-set training \\
        --policy nodesam --socket /tmp/train.sock &
    augloader serve --shards mutag.shards --split folds/fold-00.json --split-set test \\
        --policy none --socket /tmp/test.sock &
    python examples/train_gin.py --train unix:///tmp/train.sock --test unix:///tmp/test.sock

Model (Xu et al., ICLR'19, as the WWW'22 paper uses it): 5 layers (input
plus 4 GIN convolutions with 2-layer MLPs and batch norm), sum pooling read
out from every layer, Adam with lr 0.01 halved every 50 epochs. The loss is
the soft cross-entropy, which equals the usual one for hard labels and
handles SubMix's soft labels. The GIN layer is written in plain PyTorch
(sum aggregation with index_add_), so only torch is needed.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from augloader.torch import AugloaderDataset


class GINConv(nn.Module):
    def __init__(self, dim_in, dim_out, eps=0.0):
        super().__init__()
        self.eps = nn.Parameter(torch.tensor([eps]))
        self.mlp = nn.Sequential(nn.Linear(dim_in, dim_out), nn.BatchNorm1d(dim_out), nn.ReLU(),
                                 nn.Linear(dim_out, dim_out))

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])   # sum over neighbours
        return self.mlp((1 + self.eps) * x + agg)


class GIN(nn.Module):
    def __init__(self, dim_in, classes, hidden=64, layers=5, dropout=0.0):
        super().__init__()
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(layers - 1):
            self.convs.append(GINConv(dim_in if i == 0 else hidden, hidden))
            self.norms.append(nn.BatchNorm1d(hidden))
        self.heads = nn.ModuleList([nn.Linear(dim_in, classes)] + [nn.Linear(hidden, classes) for _ in range(layers - 1)])
        self.dropout = dropout

    def forward(self, x, edge_index, batch, num_graphs):
        def pool(h):
            return torch.zeros(num_graphs, h.shape[1], device=h.device).index_add_(0, batch, h)

        out = F.dropout(self.heads[0](pool(x)), self.dropout, self.training)
        h = x
        for conv, norm, head in zip(self.convs, self.norms, self.heads[1:]):
            h = F.relu(norm(conv(h, edge_index)))
            out = out + F.dropout(head(pool(h)), self.dropout, self.training)
        return out


def soft_cross_entropy(logits, y_soft):
    return -(y_soft * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def evaluate(model, ds, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for t in ds:
            logits = model(t["x"], t["edge_index"], t["batch"], t["num_graphs"])
            keep = ~t["padded"].to(device)
            correct += int((logits.argmax(1) == t["y"])[keep].sum())
            total += int(keep.sum())
    return correct / max(total, 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True, help="augloader URL serving the training split (augmented)")
    ap.add_argument("--test", help="augloader URL serving the test split (policy none)")
    ap.add_argument("--epochs", type=int, default=350)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0, help="torch seed (the daemon has its own)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", help="write per-epoch metrics to this file")
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    train = AugloaderDataset(args.train, device=device, pyg=False)
    test = AugloaderDataset(args.test, device=device, pyg=False) if args.test else None
    first = next(iter(train))
    dim, classes = first["x"].shape[1], first["y_soft"].shape[1]
    model = GIN(dim, classes, args.hidden, args.layers, args.dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
    history = []
    for epoch in range(args.epochs):
        model.train()
        train.set_epoch(epoch)
        loss_sum = correct = total = 0
        wait = step = 0.0
        t0 = time.perf_counter()
        for t in train:
            t1 = time.perf_counter()
            wait += t1 - t0
            logits = model(t["x"], t["edge_index"], t["batch"], t["num_graphs"])
            loss = soft_cross_entropy(logits, t["y_soft"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            n = t["num_graphs"]
            loss_sum += float(loss) * n
            correct += int((logits.argmax(1) == t["y"]).sum())
            total += n
            t0 = time.perf_counter()
            step += t0 - t1
        sched.step()
        row = {"epoch": epoch, "loss": loss_sum / total, "train_acc": correct / total,
               "data_wait_s": wait, "step_s": step}
        if test is not None:
            row["test_acc"] = evaluate(model, test, device)
        history.append(row)
        print(f"epoch {epoch:3d}  loss {row['loss']:.4f}  train acc {row['train_acc']:.3f}"
              + (f"  test acc {row['test_acc']:.3f}" if "test_acc" in row else "")
              + f"  waited for data {wait * 1e3:.1f} ms of {(wait + step) * 1e3:.1f} ms", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(history, f)
    return history


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
