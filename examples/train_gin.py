#!/usr/bin/env python3
"""Train the paper's GIN on batches streamed by augloader.

Two modes:

  train  one run against daemons you started (a training view, a test view):

    augloader serve --shards mutag.shards --folds folds --socket /tmp/aug.sock \\
        --view 'train={fold}:training:nodesam' --view 'test={fold}:test' &
    python examples/train_gin.py train --url unix:///tmp/aug.sock --view train --test-view test --fold 0

         with --checkpoint ck.pt (every --checkpoint-every steps) and --resume,
         a run killed at any point continues from its last checkpoint to the
         same weights, bit for bit, as one that never stopped
         (docs/checkpoint.md)

         or on the node's own daemon, under torchrun too (no rank argument:
         rank and world come from torchrun; the model in
         DistributedDataParallel; --checkpoint a folder that a job of any
         world size resumes, so a node lost or gained costs the steps since
         the last save; docs/deploy.md, "Under torchrun"):

    torchrun --standalone --nproc-per-node 2 examples/train_gin.py train \\
        --shards mutag.shards --checkpoint ck --resume

  cv     the paper's experiment: stratified k-fold cross-validation of GIN
         for several policies, on ONE daemon this script starts
         (augloader.Daemon) with a view per policy and a test view:

    python examples/train_gin.py cv --shards mutag.shards --policies none,nodesam,submix:p=0.4 \\
        --folds 10 --epochs 350 --json mutag.json

Model (Xu et al., ICLR'19, as the WWW'22 paper uses it): GIN-0 (ε fixed at
0; --train-eps learns it, GIN-ε), 5 layers (the input plus 4 GIN
convolutions with 2-layer MLPs and batch norm), sum pooling read out from
every layer, dropout on the read-outs, Adam with lr 0.01 halved every 50
epochs (scaled with --epochs). An epoch is --batches-per-epoch batches (the
GIN code's 50 iterations), drawn by the daemon from consecutive passes over
the training set. The loss is the soft cross-entropy, which equals the
usual one for hard labels and handles SubMix's soft labels. The GIN layer
is plain PyTorch (sum aggregation with index_add_), so only torch is needed.

cv reports, per policy, mean ± std over folds of the test accuracy
(1) at the epoch whose mean over folds is best — the GIN paper's metric,
optimistic since that epoch is chosen on the test folds — and (2) averaged
over the last 10 epochs; and per fold the paired difference from `none`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

if sys.argv[1:2] == ["cv"]:
    # cv runs several one-thread training processes at once: OpenBLAS's own
    # thread pool (set at load) would fight them for the cores.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from _needs import need  # noqa: E402

need("train_gin.py", "torch", "numpy", "augloader")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import augloader  # noqa: E402
from augloader.torch import AugloaderDataset  # noqa: E402

import _distributed  # noqa: E402


class GINConv(nn.Module):
    def __init__(self, dim_in, dim_out, train_eps=False):
        super().__init__()
        if train_eps:
            self.eps = nn.Parameter(torch.zeros(1))
        else:
            self.register_buffer("eps", torch.zeros(1))  # GIN-0
        self.mlp = nn.Sequential(nn.Linear(dim_in, dim_out), nn.BatchNorm1d(dim_out), nn.ReLU(),
                                 nn.Linear(dim_out, dim_out))

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])   # sum over neighbours
        return self.mlp((1 + self.eps) * x + agg)


class Bias(nn.Module):
    """A learned bias alone: what is left of a Linear layer once its
    weights were applied by the code embedding (--layout codes)."""

    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return x + self.bias


class GIN(nn.Module):
    """GIN on a batch's tensors (augloader.torch.to_tensors). With codes
    (the compact layout: feature codes, no dense one-hot x), the first
    GIN layer's first Linear and the input read-out's weights are one
    CodeEmbedding applied before aggregating: both layers are linear, so
    W·((1+ε)x + Σx_j) + b = (1+ε)·Wx + Σ Wx_j + b, the same model on
    [N, hidden + classes] instead of [N, feature_dim]."""

    def __init__(self, dim_in, classes, hidden=64, layers=5, dropout=0.0, train_eps=False, codes=False):
        super().__init__()
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        for i in range(layers - 1):
            self.convs.append(GINConv(dim_in if i == 0 else hidden, hidden, train_eps))
            self.norms.append(nn.BatchNorm1d(hidden))
        self.heads = nn.ModuleList([nn.Linear(dim_in, classes)] + [nn.Linear(hidden, classes) for _ in range(layers - 1)])
        self.dropout = dropout
        self.embed = None
        if codes:
            from augloader.torch import CodeEmbedding
            self.hidden = hidden
            self.embed = CodeEmbedding(dim_in, hidden + classes)
            self.convs[0].mlp[0] = Bias(hidden)
            self.heads[0] = Bias(classes)

    def forward(self, t):
        edge_index, batch, num_graphs = t["edge_index"], t["batch"], t["num_graphs"]

        def pool(h):
            return torch.zeros(num_graphs, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, batch, h)

        if self.embed is not None:
            e = self.embed(t)
            x, x_head = e[:, :self.hidden], e[:, self.hidden:]
        else:
            x = x_head = t["x"]
        out = F.dropout(self.heads[0](pool(x_head)), self.dropout, self.training)
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
            check_stop()
            logits = model(t)
            keep = ~t["padded"].to(device)
            correct += int((logits.argmax(1) == t["y"])[keep].sum())
            total += int(keep.sum())
    return correct / max(total, 1)


def first_batch(ds):
    """One batch of ds's request (its dimensions), read apart: ds's own
    position (a loaded checkpoint) is left as it is."""
    probe = AugloaderDataset(ds.url, token=ds.token, batch_size=ds.batch_size, rank=ds.rank, world=ds.world,
                             device=ds.device, pyg=False, view=ds.view, fold=ds.fold, layout=ds.layout)
    return next(iter(probe))


def build_model(train, hidden, layers, dropout, train_eps, device):
    """The GIN for train's batches (their feature width and classes)."""
    first = first_batch(train)
    codes = first["x"] is None  # the compact layout (--layout codes)
    dim, classes = (first["feature_dim"] if codes else first["x"].shape[1]), first["y_soft"].shape[1]
    return GIN(dim, classes, hidden, layers, dropout, train_eps, codes=codes).to(device)


def fit(train, test, epochs, hidden, layers, dropout, lr, train_eps, seed, device, log=None,
        checkpoint=None, every=0, resume=False):
    """Trains a GIN on the train dataset for epochs and returns per-epoch
    metrics (test accuracy when test is given). With checkpoint, every
    `every` steps the model, the optimizer, the schedule, the RNG, the
    epoch's running sums and the loader's position are saved there
    (atomically); resume continues from that file when it exists, to the
    same weights, bit for bit, as a run that never stopped."""
    torch.manual_seed(seed)
    model = build_model(train, hidden, layers, dropout, train_eps, device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    # The paper halves the rate every 50 of 350 epochs: 7 halvings, kept
    # when fewer epochs are run.
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, round(epochs * 50 / 350)), gamma=0.5)
    history, start, steps, sums = [], 0, 0, None
    if resume and checkpoint and os.path.exists(checkpoint):
        ck = torch.load(checkpoint)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        torch.set_rng_state(ck["rng"])
        train.load_state_dict(ck["loader"])
        history, start, steps, sums = ck["history"], ck["epoch"], ck["steps"], ck["sums"]
        print(f"resumed from {checkpoint}: epoch {start}, batch {ck['loader']['batches']}, step {steps}", flush=True)

    def save(epoch):
        from augloader.torch import save_atomic
        save_atomic({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "rng": torch.get_rng_state(), "loader": train.state_dict(), "history": history,
                     "epoch": epoch, "steps": steps, "sums": sums}, checkpoint)
        print(f"checkpoint step {steps}", flush=True)

    for epoch in range(start, epochs):
        model.train()
        train.set_epoch(epoch)
        if sums is None:
            sums = {"loss": 0.0, "correct": 0, "total": 0, "kept": 0, "wait": 0.0, "step": 0.0}
        t0 = time.perf_counter()
        for t in train:
            check_stop()
            t1 = time.perf_counter()
            sums["wait"] += t1 - t0
            logits = model(t)
            loss = soft_cross_entropy(logits, t["y_soft"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            n = t["num_graphs"]
            sums["loss"] += float(loss.detach()) * n
            # The loss trains on the padded repeats (as DistributedSampler's
            # padding does); the accuracy counts each graph once.
            keep = ~t["padded"]
            sums["correct"] += int((logits.argmax(1) == t["y"])[keep].sum())
            sums["total"] += n
            sums["kept"] = sums.get("kept", 0) + int(keep.sum())  # a checkpoint before the field lacks it
            steps += 1
            if checkpoint and every and steps % every == 0:
                save(epoch)
            t0 = time.perf_counter()
            sums["step"] += t0 - t1
        sched.step()
        row = {"epoch": epoch, "loss": sums["loss"] / sums["total"], "train_acc": sums["correct"] / max(sums["kept"], 1),
               "data_wait_s": sums["wait"], "step_s": sums["step"]}
        sums = None
        if test is not None:
            row["test_acc"] = evaluate(model, test, device)
        history.append(row)
        if log:
            log(row)
    return history, model


# ---------------------------------------------------------------- train


def cmd_train(args):
    device = torch.device(args.device)
    if _distributed.under_torchrun():
        device = _distributed.start(device)
    if args.shards:  # the node's one daemon (one per torchrun job and node, or this process's)
        args.url = augloader.node_daemon(args.shards, policy=args.policy, seed=args.daemon_seed, batch_size=args.batch_size)
    kw = dict(device=device, pyg=False, fold=args.fold, layout=args.layout)
    train = AugloaderDataset(args.url, view=args.view, batches_per_epoch=args.batches_per_epoch,
                             drop_last=args.batches_per_epoch > 0, **kw)
    test_url = args.test_url or (args.url if args.test_view else None)
    test = None
    if test_url:  # read whole by whoever evaluates (rank 0 under torchrun)
        test = AugloaderDataset(test_url, view=args.test_view, rank=0, world=1, **kw)

    def log(row):
        # Under torchrun a row sums every rank's graphs; alone, it says how
        # long the loop waited for data.
        tail = (f"  ({row['graphs']} graphs, world {row['world']})" if "world" in row else
                f"  waited for data {row['data_wait_s'] * 1e3:.1f} ms of {(row['data_wait_s'] + row['step_s']) * 1e3:.1f} ms")
        print(f"epoch {row['epoch']:3d}  loss {row['loss']:.4f}  train acc {row['train_acc']:.3f}"
              + (f"  test acc {row['test_acc']:.3f}" if "test_acc" in row else "") + tail, flush=True)

    if _distributed.under_torchrun():
        torch.manual_seed(args.seed)
        model = build_model(train, args.hidden, args.layers, args.dropout, args.train_eps, device)
        history, model = _distributed.fit(train, test, args, device, model, soft_cross_entropy, evaluate, log=log)
        import torch.distributed as dist
        if dist.get_rank() == 0 and args.json:
            pathlib.Path(args.json).write_text(json.dumps(history))
        dist.destroy_process_group()
        return history

    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    history, model = fit(train, test, args.epochs, args.hidden, args.layers, args.dropout, args.lr, args.train_eps,
                         args.seed, device, log, checkpoint=args.checkpoint, every=args.checkpoint_every,
                         resume=args.resume)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(history))
    if args.save_model:
        torch.save(model.state_dict(), args.save_model)
    return history


# ---------------------------------------------------------------- cv


def fold_file(i: int, k: int) -> str:
    """Fold i of k's split file, as `augloader split` names it."""
    return f"fold-{i:0{max(2, len(str(k - 1)))}d}.json"


def view_name(policy: str) -> str:
    return policy.split(":")[0].replace(".", "_")


def _worker_init():
    # The parent takes SIGINT (Ctrl-C reaches the whole process group) and
    # SIGTERM and stops the workers itself, once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _job(spec):
    """One (policy, fold) training run, in its own process with one thread;
    it prints a progress line per epoch."""
    torch.set_num_threads(1)
    train = AugloaderDataset(spec["url"], view=spec["view"], fold=spec["fold"], pyg=False, layout=spec["layout"],
                             batches_per_epoch=spec["batches_per_epoch"], drop_last=True, batch_size=spec["batch_size"])
    test = AugloaderDataset(spec["url"], view="test", fold=spec["fold"], pyg=False, layout=spec["layout"])
    t = time.perf_counter()
    tag = f"{spec['policy']} fold {spec['fold']}"

    def progress(row):
        e = row["epoch"] + 1
        per = (time.perf_counter() - t) / e
        print(f"[{tag}] epoch {e}/{spec['epochs']}  loss {row['loss']:.4f}  test acc {row['test_acc']:.3f}"
              f"  ({per:.1f} s/epoch, {per * (spec['epochs'] - e) / 60:.1f} min left)", flush=True)

    h, _ = fit(train, test, spec["epochs"], spec["hidden"], spec["layers"], spec["dropout"], spec["lr"],
               spec["train_eps"], spec["seed"], torch.device("cpu"), progress if spec["progress"] else None)
    return {"policy": spec["policy"], "fold": spec["fold"], "test_acc": [r["test_acc"] for r in h],
            "loss": [r["loss"] for r in h], "seconds": time.perf_counter() - t,
            "data_wait_s": sum(r["data_wait_s"] for r in h)}


def mean_std(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / max(len(xs) - 1, 1))


def summarize(runs, policies, folds, epochs):
    """The two metrics per policy, and the paired differences from none."""
    acc = {p: [None] * folds for p in policies}
    for r in runs:
        acc[r["policy"]][r["fold"]] = r["test_acc"]
    last = min(10, epochs)
    out = {}
    for p in policies:
        curves = acc[p]
        mean_curve = [sum(c[e] for c in curves) / folds for e in range(epochs)]
        best = max(range(epochs), key=lambda e: mean_curve[e])
        at_best = [c[best] for c in curves]
        last10 = [sum(c[-last:]) / last for c in curves]
        out[p] = {"best_epoch": best, "best_mean_epoch": mean_std(at_best), "last10": mean_std(last10),
                  "per_fold_last10": last10, "per_fold_at_best": at_best, "mean_curve": mean_curve}
    if "none" in out:
        for p in policies:
            d = [a - b for a, b in zip(out[p]["per_fold_last10"], out["none"]["per_fold_last10"])]
            m, s = mean_std(d)
            out[p]["paired_diff_last10"] = {"mean": m, "std": s, "se": s / math.sqrt(folds),
                                            "better_folds": sum(x > 0 for x in d), "worse_folds": sum(x < 0 for x in d)}
    return out


def fold_sets(url, policies, folds):
    """Each fold's graph ids as the daemon serves them: one full pass of
    every policy's training view and of the test view."""
    out = []
    for f in range(folds):
        sets = {}
        for view in [view_name(p) for p in policies] + ["test"]:
            ids = set()
            for b in augloader.connect(url).epoch(0, view=view, fold=f):
                ids.update(int(g) for g in b.graph_id[~b.padded])
            sets[view] = sorted(ids)
        out.append(sets)
    return out


def cmd_cv(args):
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    out_dir = pathlib.Path(args.out or pathlib.Path(args.json or "cv.json").with_suffix(""))
    folds_dir = out_dir / "folds"
    binary = augloader.daemon.find_binary()
    subprocess.run([binary, "split", "--shards", args.shards, "--folds", str(args.folds), "--seed", str(args.split_seed),
                    "--out", folds_dir, "--force"], check=True, capture_output=True)  # the folder is this script's
    views = [f"{view_name(p)}={{fold}}:training:{p}" for p in policies] + ["test={fold}:test"]
    t0 = time.perf_counter()
    with augloader.Daemon(args.shards, folds=folds_dir, views=views, seed=args.seed, workers=args.daemon_workers,
                          binary=binary) as d:
        sets = fold_sets(d.url, policies, args.folds)
        specs = [{"url": d.url, "policy": p, "view": view_name(p), "fold": f, "epochs": args.epochs,
                  "batches_per_epoch": args.batches_per_epoch, "batch_size": args.batch_size, "hidden": args.hidden,
                  "layers": args.layers, "dropout": args.dropout, "lr": args.lr, "train_eps": args.train_eps,
                  "seed": args.seed * 1000 + f, "progress": not args.quiet, "layout": args.layout}
                 for f in range(args.folds) for p in policies]
        print(f"cv: {len(specs)} runs ({len(policies)} policies × {args.folds} folds, {args.epochs} epochs each), "
              f"{args.jobs} at once; the daemon's log: {d.log_path}", flush=True)
        runs = []
        ex = ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("fork"), initializer=_worker_init)
        try:
            for r in ex.map(_job, specs):
                runs.append(r)
                print(f"{r['policy']:>16} fold {r['fold']}: last-10 test acc "
                      f"{sum(r['test_acc'][-10:]) / len(r['test_acc'][-10:]):.3f} ({r['seconds']:.0f} s)", flush=True)
        except BaseException:
            # Stopped (SIGINT, SIGTERM) or failed: no training process
            # outlives this one; the daemon is stopped by the with block.
            for proc in list(getattr(ex, "_processes", {}).values()):
                proc.terminate()
            ex.shutdown(wait=True, cancel_futures=True)
            raise
        ex.shutdown()
    report = {"shards": str(args.shards), "policies": policies, "folds": args.folds, "epochs": args.epochs,
              "batches_per_epoch": args.batches_per_epoch, "batch_size": args.batch_size, "dropout": args.dropout,
              "hidden": args.hidden, "train_eps": args.train_eps, "seed": args.seed, "split_seed": args.split_seed,
              "seconds": time.perf_counter() - t0, "fold_sets": sets,
              "split_files": [str(folds_dir / fold_file(f, args.folds)) for f in range(args.folds)],
              "summary": summarize(runs, policies, args.folds, args.epochs), "runs": runs}
    for p, s in report["summary"].items():
        b, l = s["best_mean_epoch"], s["last10"]
        line = f"{p:>16}: best-mean-epoch {100 * b[0]:.2f} ± {100 * b[1]:.2f} (epoch {s['best_epoch']}, optimistic)  last-10 {100 * l[0]:.2f} ± {100 * l[1]:.2f}"
        if "paired_diff_last10" in s and p != "none":
            d = s["paired_diff_last10"]
            line += f"  vs none {100 * d['mean']:+.2f} ± {100 * d['se']:.2f} (SE; {d['better_folds']} folds better, {d['worse_folds']} worse)"
        print(line, flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1))
    return report


# The signal that asked to stop, once one has. The handler raises at once
# (a blocking read ends), but an exception raised while Python runs a
# finalizer (a batch buffer's __del__, every step) is printed and dropped:
# a Ctrl-C landing there was lost and training went on. The loops check
# this flag at every step, so a stop asked for is never lost.
_STOP_ASKED: list = []


def _stop(signum, frame):
    _STOP_ASKED.append(signum)
    raise _interrupt(signum)


def _interrupt(signum) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"signal {signum}")


def check_stop() -> None:
    """Raises KeyboardInterrupt if SIGINT or SIGTERM came (even one whose
    own exception a finalizer swallowed)."""
    if _STOP_ASKED:
        raise _interrupt(_STOP_ASKED[0])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["train"] + argv  # the original command line had no mode
    # SIGTERM stops as Ctrl-C does: the daemon, the training processes and
    # the temporary folders are cleaned up on the way out.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    class Fmt(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=Fmt,
                                 epilog=__doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="mode", required=True, metavar="{train,cv}",
                            help="train: one run against running daemons; cv: a cross-validation on one daemon (-h after either for its flags)")

    def count(lo):
        def parse(v):
            try:
                n = int(v)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{v!r} is not an integer") from None
            if n < lo:
                raise argparse.ArgumentTypeError(f"{n}: want an integer ≥ {lo}")
            return n
        return parse

    def model_flags(p, batches_per_epoch, seed_help):
        p.add_argument("--epochs", type=count(1), default=350, help="training epochs (the paper's 350)")
        p.add_argument("--batches-per-epoch", type=count(0), default=batches_per_epoch,
                       help="batches per epoch (the GIN code's 50; 0: one pass over the training set)")
        p.add_argument("--hidden", type=count(1), default=64, help="hidden units per GIN layer")
        p.add_argument("--layers", type=count(2), default=5, help="layers, the input's read-out included")
        p.add_argument("--dropout", type=float, default=0.0, help="read-out dropout (the paper searches 0 and 0.5)")
        p.add_argument("--lr", type=float, default=0.01, help="Adam's learning rate, halved every 50 of 350 epochs")
        p.add_argument("--train-eps", action="store_true", help="learn ε (GIN-ε) instead of GIN-0's fixed 0")
        p.add_argument("--seed", type=count(0), default=0, help=seed_help)
        p.add_argument("--json", help="write the results to this file")
        p.add_argument("--layout", choices=("pyg", "codes"), default="pyg",
                       help="pyg: the dense one-hot x; codes: the feature codes through a CodeEmbedding "
                            "(the same model, no [N, feature_dim] input built per batch)")

    t = sub.add_parser("train", help="one run against running daemons", formatter_class=Fmt,
                       description="Train GIN once on batches from a running daemon's training view, testing on its test view.")
    src = t.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", "--train", dest="url", help="augloader URL serving the training view")
    src.add_argument("--shards", help="shard folder: train on the node's own daemon (augloader.node_daemon: one per "
                                      "torchrun job and node, started by the first rank; else this run's own)")
    t.add_argument("--policy", default="nodesam", help="with --shards: the daemon's augmentation policy")
    t.add_argument("--daemon-seed", type=int, default=0, help="with --shards: the daemon's --seed (its augmentations)")
    t.add_argument("--batch-size", type=int, default=32, help="with --shards: graphs per batch (each rank's)")
    t.add_argument("--batch-log", help="under torchrun: a folder for the graphs each step trained (JSON lines, "
                                       "examples/_distributed.py), to audit that every graph was trained once")
    t.add_argument("--view", default="", help="the training view (empty: the daemon's default)")
    t.add_argument("--test-url", "--test", dest="test_url", help="URL serving the test view (default: --url with --test-view)")
    t.add_argument("--test-view", default="", help="the test view")
    t.add_argument("--fold", type=count(0), default=0, help="the fold of per-fold views")
    t.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="torch device")
    t.add_argument("--checkpoint", help="checkpoint file: the model, optimizer, schedule, RNG and the loader's position "
                                        "in the epoch, written atomically every --checkpoint-every steps (under torchrun "
                                        "a folder of torch.distributed.checkpoint saves that any world size resumes)")
    t.add_argument("--checkpoint-every", type=count(1), default=50, help="steps between checkpoints")
    t.add_argument("--resume", action="store_true",
                   help="continue from --checkpoint when it exists (at the batch after the one it was taken at)")
    t.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    t.add_argument("--save-model", help="write the final model's state_dict here")
    model_flags(t, 0, "torch's seed (the model's initial weights and dropout); the augmentations are the daemon's "
                      "own: its --seed, set where it was started")

    c = sub.add_parser("cv", help="k-fold cross-validation of several policies on one daemon", formatter_class=Fmt,
                       description="Stratified k-fold cross-validation of GIN for several policies through one daemon this "
                                   "script starts (a training view per policy, a test view); a progress line per epoch "
                                   "of every run. At the defaults (10 folds, 3 policies, 350 epochs) it takes hours on two "
                                   "cores: try --epochs 50 first.")
    c.add_argument("--shards", required=True, help="shard folder (shardconv convert)")
    c.add_argument("--policies", default="none,nodesam,submix:p=0.4", help="comma-separated policies (none is the reference)")
    c.add_argument("--folds", type=count(2), default=10, help="folds of the stratified split (augloader split)")
    c.add_argument("--split-seed", type=int, default=0, help="the split's seed")
    c.add_argument("--batch-size", type=count(1), default=32, help="graphs per batch (the paper searches 32 and 128)")
    c.add_argument("--jobs", type=count(1), default=max(1, (os.cpu_count() or 2)), help="training processes at once")
    c.add_argument("--daemon-workers", type=count(1), default=1, help="the daemon's augmentation workers")
    c.add_argument("--out", help="folder for the split files (default: beside --json, or ./cv)")
    c.add_argument("--quiet", action="store_true", help="no progress line per epoch, only one per finished run")
    model_flags(c, 50, "torch's seed, and the --seed of the daemon this script starts (its augmentations)")

    args = ap.parse_args(argv)
    if args.mode == "train":
        if args.resume and not args.checkpoint:
            t.error("--resume needs --checkpoint (the file to continue from)")
        if args.batch_log and not _distributed.under_torchrun():
            t.error("--batch-log is written under torchrun (examples/_distributed.py)")
        if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
            t.error(f"--device {args.device}: this torch sees no CUDA device (use --device cpu)")
    try:
        try:
            if args.mode == "train":
                return cmd_train(args)
            return cmd_cv(args)
        except RuntimeError:
            # A Ctrl-C inside torch's checkpoint writer comes out as "[enforce fail
            # at inline_container.cc]": the stop asked for (the old checkpoint stands).
            if _STOP_ASKED:
                raise _interrupt(_STOP_ASKED[0]) from None
            raise
    except KeyboardInterrupt as e:
        why = str(e) or "interrupted"
        if args.mode == "train":
            left = ("the daemon is yours and still runs" if args.shards is None else
                    "the node's daemon stops with the torchrun agent" if _distributed.under_torchrun() else
                    "the daemon it started is stopped")
            print(f"train_gin: stopped ({why}); {left}"
                  + (f"; --resume continues from {args.checkpoint}" if args.checkpoint else ""), file=sys.stderr)
        else:
            print(f"train_gin: stopped ({why}): the daemon and the training processes are stopped", file=sys.stderr)
        sys.exit(130)
    except USER_ERRORS as e:
        # What the user can fix (a daemon not running, a view it does not
        # serve, a checkpoint of another configuration, a missing folder):
        # the message, not a traceback.
        print(f"train_gin: {e}", file=sys.stderr)
        sys.exit(1)


# Errors that say what to fix; anything else is a bug and keeps its traceback.
USER_ERRORS = (augloader.ServerError, augloader.ConnectionLost, augloader.RequestError, augloader.StateError, augloader.DaemonError,
               augloader.ConvertError, FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
