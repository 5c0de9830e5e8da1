#!/usr/bin/env python3
"""What torchrun's group costs (issue #56): real torchrun agents on this
machine, each a "node" of 2 workers with its own $TMPDIR (its own node
daemon), training examples/train_gin.py on a synthetic COLLAB-shaped set
with checkpoints (clients/python/tests/elastic_job.py starts them, as
test_elastic.py does).

  start    from starting the agents to the first batch trained on every
           rank: 1 node × 2 workers (--standalone-like, one agent) and
           2 nodes × 2 (two agents, c10d rendezvous): the workers' Python
           and torch imports, the rendezvous, the process group, the first
           rank's start of the node's daemon and the others' attach.
  restart  2 × 2 (--nnodes 1:2) training; a node lost (agent, workers and
           daemon SIGKILLed) mid-epoch: from the kill to the first batch
           trained on every rank of the restarted group at world 2 (the
           survivors' failure on a collective, torchrun's restart, the
           rendezvous closing with one node, the resume from the latest
           checkpoint).

Median of --runs; a RESULT line per case. Needs a torch with a working
torchrun (make test-torch2's .venv-torch2).

Usage: .venv-torch2/bin/python bench/python_torchrun.py --bin bin [--runs 3]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))
from elastic_job import Node, free_port, lines, wait_for_step  # noqa: E402


def first_on_every_rank(rows, gen=None):
    """The time by which every rank of the group (the first one seen, or
    gen) had trained a batch."""
    gen = gen if gen is not None else min(r["gen"] for r in rows)
    first = {}
    for r in rows:
        if r["gen"] == gen:
            first[r["rank"]] = min(first.get(r["rank"], r["t"]), r["t"])
    return max(first.values()), len(first)


def start_case(base, bins, train, nodes):
    out = base / "out"
    out.mkdir()
    port, t0 = free_port(), time.time()
    agents = [Node(base, f"n{i}", bins, out, port, str(nodes), i == 0, train) for i in range(nodes)]
    try:
        wait_for_step(out, 1, timeout=300)
        deadline = time.monotonic() + 120
        while True:
            t, ranks = first_on_every_rank(lines(out))
            if ranks == 2 * nodes or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return t - t0, ranks
    finally:
        for a in agents:
            a.lose()


def restart_case(base, bins, train):
    out = base / "out"
    out.mkdir()
    port = free_port()
    a = Node(base, "a", bins, out, port, "1:2", True, train)
    time.sleep(1)  # a hosts the rendezvous store
    b = Node(base, "b", bins, out, port, "1:2", False, train)
    try:
        wait_for_step(out, 8, timeout=300, world=4)
        killed_gen = max(r["gen"] for r in lines(out))
        t_kill = time.time()
        b.lose()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            rows = [r for r in lines(out) if r["gen"] > killed_gen]
            if rows:
                t, ranks = first_on_every_rank(rows)
                if ranks == 2:
                    return t - t_kill, ranks
            time.sleep(0.05)
        raise SystemExit(f"no batch at world 2 within 300 s of the kill:\n{a.output()}")
    finally:
        a.lose()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="bin", help="folder of augloader and shardconv")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--graphs", type=int, default=2000)
    args = ap.parse_args()
    bins = pathlib.Path(args.bin).resolve()
    work = pathlib.Path(tempfile.mkdtemp(prefix="tr-"))  # short: the daemons' socket paths
    try:
        subprocess.run([bins / "shardconv", "synth", "--like", "COLLAB", "--graphs", str(args.graphs), "--seed", "5",
                        "--out", work / "tu"], check=True, capture_output=True)
        subprocess.run([bins / "shardconv", "convert", "-q", "-i", work / "tu", "-o", work / "shards"], check=True)
        train = ["--shards", str(work / "shards"), "--batch-size", "16", "--epochs", "50", "--device", "cpu",
                 "--checkpoint-every", "4"]
        import torch
        print(f"RESULT kind=machine cores={os.cpu_count()} torch={torch.__version__.split('+')[0]} "
              f"python={sys.version.split()[0]} graphs={args.graphs}", flush=True)
        cases = [("start", 1, lambda b: start_case(b, bins, train, 1)), ("start", 2, lambda b: start_case(b, bins, train, 2)),
                 ("restart", 2, lambda b: restart_case(b, bins, train))]
        for name, nodes, run in cases:
            got = []
            for i in range(args.runs):
                base = work / f"{name}-{nodes}-{i}"
                base.mkdir()
                got.append(run(base))
                shutil.rmtree(base, ignore_errors=True)
            print(f"RESULT kind=torchrun case={name} nodes={nodes} procs=2 "
                  f"first_batch_s={statistics.median(g[0] for g in got):.3f} "
                  f"min_s={min(g[0] for g in got):.3f} max_s={max(g[0] for g in got):.3f} ranks={got[0][1]} runs={len(got)}",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
