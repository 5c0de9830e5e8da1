#!/usr/bin/env python3
"""Where the headline's time goes (#68): the trainer's side of a NodeSam
COLLAB epoch through AugloaderDataset(pyg=True) over shared memory, under
cProfile (5 epochs after a first), each function's own time an epoch and
its share of the profiled total; bench/profile.sh adds the daemon's side
(pprof of the loader and encoder on one core).

Prints RESULT lines (bench/profile.sh saves them as
bench/results/profile.txt; bench/report renders them under the goals).
Usage: .venv-peers/bin/python bench/python_profile.py --bin bin --shards COLLAB.shards --workdir D
"""
import argparse
import cProfile
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_client  # noqa: E402


def short(func):
    """'augloader/batch.py:123(edge_index)' for a pstats key."""
    path, line, name = func
    if path == "~":
        return name.strip("<>").replace(" ", "_")
    parts = path.split(os.sep)
    for root in ("augloader", "torch_geometric", "torch", "numpy", "pyarrow"):
        if root in parts:
            path = "/".join(parts[len(parts) - 1 - parts[::-1].index(root):])
            break
    else:
        path = parts[-1]
    return f"{path}:{line}({name})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--workdir", default="/tmp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    d = python_client.Daemon(args.bin, args.shards, "nodesam", args.workdir)
    try:
        url = d.shm
        python_client.client_epoch(url, 0, "pyg-batch", d.pid)
        prof = cProfile.Profile()
        prof.enable()
        for e in range(args.epochs):
            python_client.client_epoch(url, e + 1, "pyg-batch", d.pid)
        prof.disable()
    finally:
        d.stop()
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())  # every function's own time
    rows = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)
    print(f"RESULT kind=trainer-total epochs={args.epochs} s_per_epoch={total / args.epochs:.4f}", flush=True)
    for func, (_, calls, tottime, _, _) in rows[:args.top]:
        print(f"RESULT kind=trainer-profile func={short(func)} calls_per_epoch={calls // args.epochs} "
              f"s_per_epoch={tottime / args.epochs:.4f} share={tottime / total:.3f}", flush=True)


if __name__ == "__main__":
    main()
