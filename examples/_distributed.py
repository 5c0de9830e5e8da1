"""train_gin.py under torchrun (docs/deploy.md, "Under torchrun"): each
rank's share of every epoch from the node's one daemon
(augloader.node_daemon), the model in DistributedDataParallel, and
checkpoints that a job of any world size resumes.

A checkpoint is a folder written by every rank with
torch.distributed.checkpoint (the model and Adam's state saved once, the
loader's position, the epoch's summed metrics, the schedule and history),
and CHECKPOINT/latest names the newest complete one: rank 0 writes it,
atomically, once every rank has saved, so a folder that a lost node left
half-written is never read. A job that loses a node, or gains one, restarts
its workers (torchrun --max-restarts) at the new world size; they resume
from `latest` and go on where it says, each graph of each epoch trained
once over the steps the checkpoints chain together.

--batch-log DIR writes, per process, the graphs each step trained as JSON
lines: {"gen", "t", "rank", "world", "from", "epoch", "step", "graphs":
[[id, sha256 of its tensors, padded], ...]}. "gen" names the worker group
(rank 0's start time, shared by its ranks), "t" when the step ended,
"from" the step it resumed at. Of the
lines of one step, those of the latest group count (a later group resumed
from a checkpoint at or after that step, else it would have trained it
again): clients/python/tests/test_elastic.py checks that these are every
graph of every epoch once, each graph's tensors those a one-rank run gets.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

SUMS = ("loss", "correct", "total", "kept")


def under_torchrun() -> bool:
    """Whether torchrun (or another launcher setting its variables) started
    this process."""
    return "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ


def start(device: torch.device) -> torch.device:
    """Joins the job's process group (gloo on the CPU, NCCL on GPUs, each
    local rank on its own GPU) and returns the device to train on."""
    try:
        import torch.distributed.checkpoint.state_dict  # noqa: F401 (torch 2.2 and later)
    except ImportError:
        raise SystemExit(f"train_gin: under torchrun it saves with torch.distributed.checkpoint's state_dict API, "
                         f"which torch {torch.__version__} lacks: use torch 2.2 or later") from None
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if (dist.get_rank() == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
            and int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0):
        # torchrun (2.4 and later) shares its rendezvous store with the
        # workers and keeps it across restarts without a fresh prefix: a
        # restarted group can read the last group's addresses and fail to
        # connect (pytorch/pytorch#135712; seen with gloo on torch 2.9).
        print("train_gin: torchrun shares its rendezvous store with the workers: a restarted group may fail to "
              "connect; start torchrun with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (pytorch/pytorch#135712)", flush=True)
    return device


class Checkpoints:
    """CHECKPOINT/step-NNNNNNNNN folders of torch.distributed.checkpoint and
    CHECKPOINT/latest naming the newest complete one; the two newest are
    kept."""

    def __init__(self, folder):
        self.dir = pathlib.Path(folder)

    def latest(self):
        try:
            name = (self.dir / "latest").read_text().strip()
        except FileNotFoundError:
            return None
        return self.dir / name

    def save(self, state: dict, steps: int) -> None:
        import torch.distributed.checkpoint as dcp
        path = self.dir / f"step-{steps:09d}"
        dcp.save(state, checkpoint_id=str(path))
        dist.barrier()  # every rank's part written before `latest` names it
        if dist.get_rank() == 0:
            tmp = self.dir / f".latest.{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(path.name + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.dir / "latest")
            for old in sorted(self.dir.glob("step-*"))[:-2]:
                shutil.rmtree(old, ignore_errors=True)

    def load(self, state: dict) -> None:
        import torch.distributed.checkpoint as dcp
        dcp.load(state, checkpoint_id=str(self.latest()))


def graph_digests(t: dict) -> list:
    """[graph id, sha256 of its tensors, padded] for each graph of a batch
    of to_tensors: its nodes' rows, its edges (numbered from its first
    node) and their rows, its own rows of the graph-level fields; the same
    graph in another batch (another rank's, another world size's) gives the
    same digest."""
    ptr, ei = t["ptr"].cpu(), t["edge_index"].cpu()
    n, e, g = int(ptr[-1]), ei.shape[1], t["num_graphs"]
    edge_graph = torch.bucketize(ei[0], ptr[1:], right=True)
    out = []
    for i in range(g):
        h, lo, hi = hashlib.sha256(), int(ptr[i]), int(ptr[i + 1])
        mask = edge_graph == i
        h.update((ei[:, mask] - lo).numpy().tobytes())
        for k in sorted(t):
            v = t[k]
            if k in ("edge_index", "ptr", "batch", "graph_id", "padded") or not isinstance(v, torch.Tensor) or v.dim() == 0:
                continue
            v = v.cpu()
            rows = v[lo:hi] if v.shape[0] == n else v[mask] if v.shape[0] == e else v[i] if v.shape[0] == g else None
            if rows is not None:
                h.update(k.encode() + rows.contiguous().numpy().tobytes())
        out.append([int(t["graph_id"][i]), h.hexdigest()[:16], bool(t["padded"][i])])
    return out


def fit(train, test, args, device, model, loss_fn, evaluate, log=None):
    """fit() of train_gin.py across the job's ranks: model wrapped in
    DistributedDataParallel, the metrics summed over ranks, checkpoints in
    args.checkpoint (a folder) every args.checkpoint_every steps."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    rank = dist.get_rank()
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, round(args.epochs * 50 / 350)), gamma=0.5)
    ck = Checkpoints(args.checkpoint) if args.checkpoint else None
    p = {"epoch": 0, "steps": 0, "history": [], "sched": sched.state_dict()}
    sums = torch.zeros(len(SUMS), dtype=torch.float64)

    def state():
        msd, osd = get_state_dict(ddp, opt)
        # The progress as one JSON string: torch.distributed.checkpoint
        # drops an empty list from a nested dict (the history before the
        # first epoch ends), and then refuses to load what it did not save.
        return {"model": msd, "optim": osd, "loader": train, "sums": sums, "progress": json.dumps(p)}

    if ck and args.resume and ck.latest() is not None:
        s = state()
        ck.load(s)
        set_state_dict(ddp, opt, model_state_dict=s["model"], optim_state_dict=s["optim"])
        p = json.loads(s["progress"])
        sched.load_state_dict(p["sched"])
        if rank == 0:
            print(f"resumed from {ck.latest()}: epoch {p['epoch']}, step {p['steps']}, world {dist.get_world_size()}", flush=True)
    resumed = p["steps"]
    gen = [time.time()]
    dist.broadcast_object_list(gen, src=0)
    blog = None
    if args.batch_log:
        os.makedirs(args.batch_log, exist_ok=True)
        blog = open(os.path.join(args.batch_log, f"{os.uname().nodename}-{os.getpid()}.jsonl"), "a", buffering=1)
    local = sums.clone() if rank == 0 else torch.zeros_like(sums)  # the saved sums counted once
    for epoch in range(p["epoch"], args.epochs):
        ddp.train()
        train.set_epoch(epoch)
        for t in train:
            logits = ddp(t)
            loss = loss_fn(logits, t["y_soft"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            keep = ~t["padded"]
            correct = int((logits.argmax(1) == t["y"])[keep].sum())
            local += torch.tensor([float(loss.detach()) * t["num_graphs"], correct, t["num_graphs"], int(keep.sum())],
                                  dtype=torch.float64)
            p["steps"] += 1
            if blog:
                blog.write(json.dumps({"gen": gen[0], "t": time.time(), "rank": rank, "world": dist.get_world_size(), "from": resumed,
                                       "epoch": epoch, "step": p["steps"], "graphs": graph_digests(t)}) + "\n")
            if ck and p["steps"] % args.checkpoint_every == 0:
                dist.all_reduce(local)
                sums.copy_(local)
                p.update(epoch=epoch, sched=sched.state_dict())
                ck.save(state(), p["steps"])
                if rank != 0:
                    local.zero_()
        dist.all_reduce(local)
        sched.step()
        row = {"epoch": epoch, "loss": float(local[0] / local[2]), "train_acc": float(local[1] / max(local[3], 1)),
               "graphs": int(local[3]), "world": dist.get_world_size()}
        local.zero_()
        sums.zero_()
        if test is not None and rank == 0:
            row["test_acc"] = evaluate(model, test, device)
        p["history"].append(row)
        p.update(epoch=epoch + 1, sched=sched.state_dict())
        if log and rank == 0:
            log(row)
    if ck and p["steps"] % args.checkpoint_every:  # the end, where no periodic save fell
        ck.save(state(), p["steps"])
    if blog:
        blog.close()
    return p["history"], model
