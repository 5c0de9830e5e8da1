#!/usr/bin/env python3
"""LitData (Lightning's streaming loader, 0.2.76) beside augloader on the
real COLLAB (#68), in .venv-peers (make .venv-peers/.stamp: torch 2.9.1,
PyG 2.8.1, litdata). Run by bench/litdata.sh, which make bench runs.

Speed, one run:
  litdata/optimize/<compression>   litdata.optimize of the same torch_geometric
                                   Data the PyG peer holds (one-hot degree x, both
                                   edge directions, y) from memory into chunks
                                   (chunk_bytes 64MB; compression none or zstd; 2
                                   optimize workers), beside shardconv convert of the
                                   TU text (which also parses it)
  litdata/<compression>/workers=<w>[/persistent]
                                   StreamingDataset(shuffle=True, transform=dropout_edge
                                   p=0.2) in a StreamingDataLoader(batch_size=32): PyG
                                   Batches; every configuration of workers 0, 1, 2,
                                   persistent or not; the fastest is the peer
  litdata/fastest/window=<n>       the fastest configuration again with
                                   item_shuffle_window n (LitData's in-chunk shuffle
                                   block; its default is 256)
  augloader/shm/nodesam/pyg-batch  AugloaderDataset(unix+shm://, pyg=True) over a
                                   daemon serving NodeSam, alternating epoch by epoch
                                   with LitData's fastest

Checks, each printing what it compared (CHECK lines):
  resume      an augmented epoch stopped after k batches and resumed from the
              loader's state_dict in a fresh loader (the trainer restarted with
              the same seed) against the same epoch uninterrupted: the graph
              order and the augmented edges, for LitData and for augloader
  flipped     one byte flipped inside a stored chunk / shard: what reading it
              gives (LitData, uncompressed and zstd chunks) and what shardconv
              verify and augloader serve say (ours)
  torchrun    two ranks under a real torchrun (python -m torch.distributed.run),
              the dataset made before init_process_group as a script does at
              import: which graphs each rank reads (overlap or disjoint)

Prints RESULT and CHECK lines (bench/report renders them).
Usage: .venv-peers/bin/python bench/peers/litdata_collab.py --bin bin --shards COLLAB.shards --workdir D
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")  # it would ask PyPI for a newer version

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: python_client's loaders
sys.path.insert(0, str(HERE))
from cpuclock import loader_cpu_s  # noqa: E402

DATA = None  # the graphs, as the PyG peer holds them


def result(**kv):
    print("RESULT " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def check(name, ok, what):
    """A CHECK line saying what was compared, and the same as a RESULT line
    for bench/report (each value URL-quoted: error texts have spaces)."""
    print(f"CHECK {name}: {'holds' if ok else 'does not hold'}: {json.dumps(what)}", flush=True)
    fields = " ".join(f"{k}={urllib.parse.quote(str(v), safe='')}" for k, v in what.items())
    print(f"RESULT kind=check name={name} holds={'yes' if ok else 'no'} {fields}", flush=True)


def item(pair):
    """optimize's fn: (i, graph i, storage) as a Data with its id (gid)
    beside it; storage "codes" keeps each node's degree code (int64 [N])
    in x instead of the one-hot rows, for the transform to expand."""
    i, d, storage = pair
    d = d.clone()
    d.gid = i
    if storage == "codes":
        d.x = d.x.argmax(dim=1)
    return d


class DropEdge:
    """StreamingDataset's transform: torch_geometric.utils.dropout_edge(p=0.2)
    on each graph, as the PyG peer's dataset does; with dim, first the
    one-hot x of the stored degree codes (what PyG's OneHotDegree gives)."""

    def __init__(self, dim=0):
        self.dim = dim

    def __call__(self, d):
        import torch
        from torch_geometric.utils import dropout_edge
        if self.dim:
            d.x = torch.nn.functional.one_hot(d.x, self.dim).float()
        d.edge_index, _ = dropout_edge(d.edge_index, p=0.2)
        return d


def optimize(out, compression, storage):
    import litdata
    t = time.perf_counter()
    # spawn: optimize's forked workers hang here once torch's threads
    # have started in this process (the graphs reach them pickled).
    litdata.optimize(fn=item, inputs=[(i, d, storage) for i, d in enumerate(DATA)], output_dir=str(out), chunk_bytes="64MB",
                     compression=compression, num_workers=2, start_method="spawn", verbose=False)
    secs = time.perf_counter() - t
    size = sum(f.stat().st_size for f in out.iterdir())
    return secs, size


def loader(folder, workers, persistent, shuffle=True, window=None, batch=32):
    """A StreamingDataLoader over an optimized folder (litdata-<storage>-
    <compression>), the transform its storage needs."""
    from litdata import StreamingDataLoader, StreamingDataset
    kw = {} if window is None else {"item_shuffle_window": window}
    dim = DATA[0].x.shape[1] if "-codes-" in folder.name else 0
    ds = StreamingDataset(str(folder), shuffle=shuffle, transform=DropEdge(dim), seed=0, **kw)
    return StreamingDataLoader(ds, batch_size=batch, num_workers=workers, persistent_workers=persistent)


def epoch(dl):
    graphs = 0
    t, c = time.perf_counter(), loader_cpu_s()
    for b in dl:
        graphs += b.num_graphs
    return time.perf_counter() - t, loader_cpu_s() - c, graphs


def timed(dl, epochs, persistent):
    if persistent:
        epoch(dl)  # start the persistent workers
    runs = [epoch(dl) for _ in range(epochs)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]


def bench_litdata(work, epochs, quick=False):
    """optimize at each storage and compression, every loader
    configuration; returns (the fastest's folder, workers, persistent,
    wall, name[, window])."""
    best = None
    configs = ((0, False), (1, False), (1, True), (2, False), (2, True))
    for storage, comp in (("dense", None), ("dense", "zstd"), ("codes", None), ("codes", "zstd")):
        name = f"{storage}-{comp or 'none'}"
        out = work / f"litdata-{name}"
        secs, size = optimize(out, comp, storage)
        result(kind="litdata-optimize", storage=storage, compression=comp or "none", graphs=len(DATA),
               seconds=f"{secs:.3f}", bytes=size)
        for workers, persistent in configs[:1] if quick else configs:
            wall, cpu, graphs = timed(loader(out, workers, persistent), epochs, persistent)
            assert graphs == len(DATA), (graphs, len(DATA))
            cfg = f"litdata/{name}/workers={workers}" + ("/persistent" if persistent else "")
            result(kind="litdata", name=cfg, wall_s=f"{wall:.3f}", loader_cpu_s=f"{cpu:.3f}", graphs=graphs)
            if best is None or wall < best[3]:
                best = (out, workers, persistent, wall, cfg)
    for window in () if quick else (0, 64, 1024):
        out, workers, persistent = best[:3]
        wall, cpu, graphs = timed(loader(out, workers, persistent, window=window), epochs, persistent)
        cfg = best[4] + f"/window={window}"
        result(kind="litdata", name=cfg, wall_s=f"{wall:.3f}", loader_cpu_s=f"{cpu:.3f}", graphs=graphs)
        if wall < best[3]:
            best = (out, workers, persistent, wall, cfg, window)
    result(kind="litdata-fastest", name=best[4])
    return best


def paired(best, url, pid, rounds):
    """LitData's fastest and AugloaderDataset(pyg=True) over shared memory,
    epoch by epoch in turn."""
    import python_client
    window = best[5] if len(best) > 5 else None
    dl = loader(best[0], best[1], best[2], window=window)
    if best[2]:
        epoch(dl)
    python_client.client_epoch(url, 0, "pyg-batch", pid)
    ours, theirs = [], []
    for e in range(rounds):
        o = python_client.client_epoch(url, e + 1, "pyg-batch", pid)
        ours.append((o[0], o[4]["trainer_cpu_s"], o[4].get("daemon_cpu_s", 0.0)))
        theirs.append(epoch(dl))
    m = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
    result(kind="paired", name="augloader/shm/nodesam/pyg-batch", wall_s=f"{m(ours, 0):.3f}",
           trainer_cpu_s=f"{m(ours, 1):.3f}", daemon_cpu_s=f"{m(ours, 2):.3f}", epochs=rounds)
    result(kind="paired", name=best[4], wall_s=f"{m(theirs, 0):.3f}", loader_cpu_s=f"{m(theirs, 1):.3f}", epochs=rounds)


def resumed(make, ids, k):
    """(whole, got): an epoch's batches as (graph ids, edge_index), once
    uninterrupted and once stopped after k batches and finished by a new
    loader from the first's state_dict; make() gives a loader as the
    trainer makes it at its start (so a restarted trainer's)."""
    def rows(it, limit=None):
        out = []
        for b in it:
            out.append((ids(b), b.edge_index.clone()))
            if len(out) == limit:
                break
        return out
    whole = rows(make())
    stopped = make()
    first = rows(stopped, k)
    again = make()
    again.load_state_dict(stopped.state_dict())
    return whole, first + rows(again)


def check_resume(folder, url, k=20):
    """Stop after k batches, resume from the loader's state in a new one
    (the trainer restarted: for LitData, torch seeded again as at its
    start), finish the epoch; compare with the epoch uninterrupted."""
    import torch
    from augloader.torch import AugloaderDataset

    def litdata():
        torch.manual_seed(0)  # the transform's draws: a restarted trainer seeds as it did at its start
        return loader(folder, 0, False)

    def ours():
        ds = AugloaderDataset(url, pyg=True)
        ds.set_epoch(3)
        return ds

    for name, make, ids in (("resume-litdata", litdata, lambda b: b.gid.tolist()),
                            ("resume-augloader", ours, lambda b: b.graph_id.tolist())):
        whole, got = resumed(make, ids, k)
        order = [g for gl, _ in got for g in gl] == [g for gl, _ in whole for g in gl]
        same = sum(1 for (ga, ea), (gb, eb) in zip(got[k:], whole[k:]) if ga == gb and torch.equal(ea, eb))
        check(name, order and same == len(whole) - k and len(got) == len(whole),
              {"batches": len(whole), "resumed_after": k, "graph_order_equal": order,
               "augmented_batches_equal_after_resume": same, "of": len(whole) - k})


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x10]))


def check_flipped(folders, bins, shards, work):
    """One byte flipped in the middle of the first chunk / shard."""
    for folder in folders:
        flipped_litdata(folder, work)
    ours = work / "shards-flipped"
    shutil.copytree(shards, ours)
    shard = sorted(p for p in ours.iterdir() if p.suffix == ".arrow")[0]
    flip(shard, shard.stat().st_size // 2)
    v = subprocess.run([str(bins / "shardconv"), "verify", str(ours)], capture_output=True, text=True)
    # The daemon a trainer would start on the folder: it checks every
    # shard as it loads it.
    d = subprocess.run([str(bins / "augloader"), "serve", "--shards", str(ours), "--socket", str(work / "flipped.sock")],
                       capture_output=True, text=True, timeout=120)
    check("flipped-augloader", v.returncode != 0 and d.returncode != 0,
          {"file": shard.name, "offset": shard.stat().st_size // 2,
           "shardconv_verify_exit": v.returncode, "verify_says": first_line(v.stderr + v.stdout),
           "augloader_serve_exit": d.returncode, "serve_says": first_line(d.stderr)})


def first_line(text):
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else ""


def flipped_litdata(folder, work):
    from litdata import StreamingDataset
    bad = work / f"{folder.name}-flipped"
    shutil.copytree(folder, bad)
    chunk = sorted(p for p in bad.iterdir() if p.suffix == ".bin")[0]
    flip(chunk, chunk.stat().st_size // 2)
    clean = StreamingDataset(str(folder))
    ds = StreamingDataset(str(bad))
    differ, error = 0, ""
    try:
        for i in range(len(ds)):
            a, b = clean[i], ds[i]
            if not all(torch_equal(a[k], b[k]) for k in a.keys()):
                differ += 1
    except Exception as e:  # what a reader says, if anything
        error = f"{type(e).__name__}: {e}"[:200]
    check(f"flipped-{folder.name}", bool(error), {"file": chunk.name, "offset": chunk.stat().st_size // 2,
                                                  "graphs_read": len(ds), "graphs_that_differ": differ,
                                                  "error": error or None})


def torch_equal(a, b):
    import torch
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    return a == b


RANK_SCRIPT = r"""
import json, os, sys
os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")
kind, src, out = sys.argv[1:4]
if kind == "litdata":
    from litdata import StreamingDataset
    ds = StreamingDataset(src)  # made before init_process_group, as at import
    gids = [int(d.gid) for d in ds]
else:
    from augloader.torch import AugloaderDataset
    ds = AugloaderDataset(src, pyg=True)  # made before init_process_group
    gids = [g for b in ds for g in b.graph_id.tolist()]
import torch.distributed as dist
dist.init_process_group("gloo")
json.dump({"rank": dist.get_rank(), "gids": gids}, open(f"{out}.{dist.get_rank()}", "w"))
dist.destroy_process_group()
"""


def check_torchrun(folder, url, work):
    """Two ranks under a real torchrun agent; each writes the graphs it read."""
    script = work / "rank.py"
    script.write_text(RANK_SCRIPT)
    for kind, src in (("litdata", str(folder)), ("augloader", url)):
        out = work / f"ranks-{kind}"
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                            str(script), kind, src, str(out)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            check(f"torchrun-{kind}", False, {"torchrun_exit": r.returncode, "stderr": r.stderr[-300:]})
            continue
        ranks = [set(json.load(open(f"{out}.{i}"))["gids"]) for i in range(2)]
        both = len(ranks[0] & ranks[1])
        check(f"torchrun-{kind}", both == 0, {"graphs_rank0": len(ranks[0]), "graphs_rank1": len(ranks[1]),
                                              "read_by_both": both, "graphs_in_set": len(DATA)})


def main():
    global DATA
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--shards", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--paired", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one loader configuration a folder (a smoke run)")
    args = ap.parse_args()
    import litdata
    import torch_geometric
    import python_client
    bins = pathlib.Path(args.bin).resolve()
    DATA = python_client.load_pyg(args.shards)
    result(kind="about", graphs=len(DATA), litdata=litdata.__version__, torch_geometric=torch_geometric.__version__,
           torch=__import__("torch").__version__, cores=os.cpu_count(),
           shard_bytes=sum(f.stat().st_size for f in pathlib.Path(args.shards).iterdir()))
    work = pathlib.Path(tempfile.mkdtemp(dir=args.workdir, prefix="litdata-"))
    try:
        best = bench_litdata(work, args.epochs, args.quick)
        d = python_client.Daemon(str(bins), args.shards, "nodesam", str(work))
        try:
            shm = d.unix.replace("unix://", "unix+shm://")
            paired(best, shm, d.pid, args.paired)
            check_resume(best[0], shm)
            check_torchrun(best[0], d.unix, work)
        finally:
            d.stop()
        check_flipped([work / "litdata-dense-none", work / "litdata-dense-zstd"], bins, pathlib.Path(args.shards), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
