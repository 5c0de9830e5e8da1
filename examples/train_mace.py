#!/usr/bin/env python3
"""Train MACE (an interatomic potential: energies and forces) on structures
an augloader daemon serves, alone or under torchrun.

  shardconv synth --like oc20 --graphs 2000 -o oc20 && shardconv convert -i oc20 -o oc20.shards
  python examples/train_mace.py --shards oc20.shards --epochs 5
  torchrun --nproc-per-node 2 examples/train_mace.py --shards oc20.shards --checkpoint ck --resume

Each structure's neighbour list was built once, at conversion; the daemon
(the node's own, augloader.node_daemon, with --shards) rotates structures
per epoch (--rotate), cuts balanced batches of at most --max-atoms atoms
(every rank as many, each step's within one structure of each other), and
AugloaderDataset(layout="mace") hands over MACE's batch fields. Under
torchrun the model is in DistributedDataParallel, checkpoints are
torch.distributed.checkpoint folders (examples/_distributed.py) that any
world size resumes, the loader's position in them: a restarted job trains
each structure of each epoch once.

Needs mace-torch (pip install mace-torch) and torch 2.x.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4's constants under torch >= 2.6

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "clients" / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import augloader  # noqa: E402
from augloader.torch import AugloaderDataset  # noqa: E402


def model_for(z_table, cutoff, seed, hidden):
    """A small MACE (two interactions, ℓ ≤ 2), float64, seeded."""
    try:
        from e3nn import o3
        from mace import modules
    except ImportError:
        raise SystemExit("train_mace: needs mace-torch (pip install mace-torch)") from None
    torch.manual_seed(seed)
    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    return modules.MACE(r_max=cutoff, num_bessel=8, num_polynomial_cutoff=5, max_ell=2, interaction_cls=block,
                        interaction_cls_first=block, num_interactions=2, num_elements=len(z_table),
                        hidden_irreps=o3.Irreps(f"{hidden}x0e+{hidden}x1o"), MLP_irreps=o3.Irreps(f"{hidden}x0e"),
                        atomic_energies=np.zeros(len(z_table)), avg_num_neighbors=40.0, atomic_numbers=list(z_table),
                        correlation=2, gate=torch.nn.functional.silu)


def structure_digests(d: dict) -> list:
    """[structure id, sha256 of its fields, padded] for each structure of a
    to_mace batch: its atoms' rows (positions, node_attrs, forces), its
    edges (numbered from its first atom) with their shifts, its energy:
    the same structure in another batch gives the same digest."""
    ptr, ei = d["ptr"], d["edge_index"]
    out = []
    for i, gid in enumerate(d["graph_id"].tolist() if hasattr(d["graph_id"], "tolist") else d["graph_id"]):
        lo, hi = int(ptr[i]), int(ptr[i + 1])
        m = (ei[0] >= lo) & (ei[0] < hi)
        h = hashlib.sha256()
        for t in (d["positions"][lo:hi], d["node_attrs"][lo:hi], d["forces"][lo:hi], ei[:, m] - lo, d["shifts"][m],
                  d["energy"][i:i + 1]):
            h.update(t.detach().contiguous().numpy().tobytes())
        out.append([int(gid), h.hexdigest()[:16], bool(d["padded"][i])])
    return out


def loss_of(model, d, forces_weight):
    out = model(d, training=True, compute_force=True)
    n = d["ptr"][1:] - d["ptr"][:-1]
    keep = torch.as_tensor(~np.asarray(d["padded"]))
    e = ((out["energy"] - d["energy"]) / n) ** 2
    f = ((out["forces"] - d["forces"]) ** 2).sum(1)
    fkeep = keep[d["batch"]]
    return (e * d["energy_weight"])[keep].mean() + forces_weight * f[fkeep].mean()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", help="augloader URL serving structures")
    src.add_argument("--shards", help="a structure shard folder: train on the node's own daemon")
    ap.add_argument("--max-atoms", type=int, default=1200, help="with --shards: atoms a batch (balanced across ranks)")
    ap.add_argument("--rotate", action="store_true", help="with --shards: a random rotation a structure and epoch")
    ap.add_argument("--daemon-seed", type=int, default=0, help="with --shards: the daemon's --seed")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=8, help="channels of MACE's hidden irreps")
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--forces-weight", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0, help="the model's initial weights")
    ap.add_argument("--checkpoint", help="under torchrun: a folder of torch.distributed.checkpoint saves")
    ap.add_argument("--checkpoint-every", type=int, default=4, help="steps between checkpoints")
    ap.add_argument("--resume", action="store_true", help="resume from --checkpoint's latest save")
    ap.add_argument("--batch-log", help="a folder for the structures each step trained (JSON lines)")
    args = ap.parse_args(argv)
    torch.set_default_dtype(torch.float64)
    from _distributed import Checkpoints, start, under_torchrun
    distributed = under_torchrun()
    if distributed:
        start(torch.device("cpu"))
    import torch.distributed as dist
    rank = dist.get_rank() if distributed else 0
    if args.shards:
        daemon_args = ["--max-atoms", str(args.max_atoms)] + (["--rotate"] if args.rotate else [])
        if distributed:
            args.url = augloader.node_daemon(args.shards, seed=args.daemon_seed, args=daemon_args)
        else:
            daemon = augloader.Daemon(args.shards, seed=args.daemon_seed, args=daemon_args)
            daemon.start()  # stopped with this process (and when the handle goes)
            args.url = daemon.url
    man = json.loads((pathlib.Path(args.shards) / "manifest.json").read_text()) if args.shards else None
    z_table = man["structures"]["elements"] if man else list(range(1, 119))
    cutoff = man["structures"]["cutoff"] if man else 6.0
    train = AugloaderDataset(args.url, layout="mace", z_table=z_table)
    model = model_for(z_table, cutoff, args.seed, args.hidden)
    net = model
    if distributed:
        from torch.nn.parallel import DistributedDataParallel
        net = DistributedDataParallel(model)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    p = {"epoch": 0, "steps": 0}
    ck = Checkpoints(args.checkpoint) if args.checkpoint and distributed else None

    def state():
        from torch.distributed.checkpoint.state_dict import get_state_dict
        msd, osd = get_state_dict(net, opt)
        return {"model": msd, "optim": osd, "loader": train, "progress": json.dumps(p)}

    if ck and args.resume and ck.latest() is not None:
        from torch.distributed.checkpoint.state_dict import set_state_dict
        s = state()
        ck.load(s)
        set_state_dict(net, opt, model_state_dict=s["model"], optim_state_dict=s["optim"])
        p = json.loads(s["progress"])
        if rank == 0:
            print(f"resumed from {ck.latest()}: epoch {p['epoch']}, step {p['steps']}", flush=True)
    resumed = p["steps"]
    gen = [time.time()]  # the worker group: rank 0's start, shared by its ranks
    if distributed:
        dist.broadcast_object_list(gen, src=0)
    blog = None
    if args.batch_log:
        os.makedirs(args.batch_log, exist_ok=True)
        blog = open(os.path.join(args.batch_log, f"{os.uname().nodename}-{os.getpid()}.jsonl"), "a", buffering=1)
    world = dist.get_world_size() if distributed else 1
    for epoch in range(p["epoch"], args.epochs):
        train.set_epoch(epoch)
        t0, total, n = time.time(), 0.0, 0
        for batch in train:
            loss = loss_of(net, batch, args.forces_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + float(loss.detach()), n + 1
            p["steps"] += 1
            if blog:
                blog.write(json.dumps({"gen": gen[0], "rank": rank, "world": world, "from": resumed, "epoch": epoch, "step": p["steps"],
                                       "t": time.time(), "graphs": structure_digests(batch)}) + "\n")
            if ck and p["steps"] % args.checkpoint_every == 0:
                p["epoch"] = epoch
                ck.save(state(), p["steps"])
        p["epoch"] = epoch + 1
        if rank == 0:
            print(json.dumps({"epoch": epoch, "loss": total / max(n, 1), "steps": n, "world": world,
                              "seconds": round(time.time() - t0, 2)}), flush=True)
    if ck and p["steps"] % args.checkpoint_every:
        ck.save(state(), p["steps"])
    if blog:
        blog.close()
    if distributed:
        # DistributedDataParallel's reducer holds the process group: it goes
        # first, while the group is registered, so that destroying the group
        # drops the last reference. Dropped after (at main's return), the
        # reducer's destructor, GIL held, joins gloo's worker threads, one of
        # which waits for the GIL to free a tensor of the last barrier's
        # work: the rank hung at exit (pytorch/pytorch#56297; seen once in
        # this job's test, a rank stuck in ~ProcessGroupGloo after its last
        # epoch).
        del net, opt
        gc.collect()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
