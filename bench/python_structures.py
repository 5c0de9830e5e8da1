#!/usr/bin/env python3
"""3D atomistic structures (#67), side by side in one run on the same
OC20-shaped set (shardconv synth --like oc20: fcc(111)/(100) metal slabs of
64-80 atoms with an adsorbate, periodic):

  nl/<tool>             neighbour lists at 6 Å on one core: augloader's Go
                        builder (go test -bench BenchmarkOC20 ./atoms,
                        -cpu 1, the same structures), vesin, matscipy, ASE
  read/<tool>           reading the extxyz file: shardconv convert (parse,
                        the neighbour lists on every core, zstd shards)
                        against ase.io.read alone and ase.io.read + vesin
  mace/<loader>         structures/s into MACE's batch fields (batch 16,
                        float64, every field MACE's AtomicData collates):
                        augloader (AugloaderDataset(layout="mace") over the
                        daemon's socket, plain and --rotate), MACE's own
                        loader converting on the fly (AtomicData.from_config
                        in __getitem__: matscipy's neighbour list each
                        sample, each epoch) and over a list converted once in
                        memory, each peer at its fastest of DataLoader
                        workers 0, 1, 2 (persistent); the loader's CPU on
                        the trainer's machine (this process and its
                        DataLoader workers: bench/peers/cpuclock.py), the
                        trainer process's own, and the daemon's
  fairchem/<loader>     the same into fairchem's AtomicData fields (float32):
                        fairchem's AseDBDataset over an .aselmdb with its CPU
                        graph (AtomicData.from_ase: pymatgen's neighbour
                        list at 6 Å, --max-neigh 30), in its own venv
                        (bench/peers/fairchem_structures.py under
                        .venv-fairchem: torch 2.13), against
                        AugloaderDataset(layout="fairchem") over shards
                        converted with --neighbours fairchem --max-neighbors
                        30, each at its fastest of workers 0, 1, 2

Prints one RESULT line per row (bench/results/structures.txt keeps a run;
bench/report renders it in docs/bench.md). Needs .venv-torch2 (mace-torch,
ase, matscipy, vesin), and .venv-fairchem for fairchem's rows (make
.venv-fairchem/.stamp; without it they say so).

Usage: .venv-torch2/bin/python bench/python_structures.py --bin bin [--structures 4000] [--epochs 3]
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4 under torch >= 2.6
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))
import augloader  # noqa: E402
sys.path.insert(0, str(ROOT / "bench" / "peers"))
from cpuclock import loader_cpu_s, process_cpu_s, self_cpu_s  # noqa: E402

CUTOFF = 6.0


def result(**kv):
    print("RESULT " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def bench_nl(bins, xyz, reps):
    """Neighbour lists on one core, the same structures for every tool."""
    from ase.io import read
    from ase.neighborlist import neighbor_list
    from matscipy.neighbours import neighbour_list
    from vesin import NeighborList
    atoms = read(str(xyz), ":64")
    edges = sum(len(neighbor_list("i", a, CUTOFF)) for a in atoms)
    nat = sum(len(a) for a in atoms)
    out = subprocess.run(["go", "test", "-run", "XXX", "-bench", "BenchmarkOC20$", "-benchtime", "2s", "-count", "3",
                          "-cpu", "1", "./atoms"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    ours = [float(m) for m in re.findall(r"([0-9.]+) Medges/s", out)]
    result(kind="nl", tool="augloader", medges_s=f"{statistics.median(ours):.2f}", structures=64, atoms=nat,
           degree=f"{edges / nat:.1f}")
    nl = NeighborList(cutoff=CUTOFF, full_list=True)
    for tool, fn, r in (("vesin", lambda a: nl.compute(points=a.positions, box=a.cell[:], periodic=True, quantities="ijS"), reps),
                        ("matscipy", lambda a: neighbour_list("ijS", a, CUTOFF), max(1, reps // 2)),
                        ("ase", lambda a: neighbor_list("ijS", a, CUTOFF), 1)):
        rates = []
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(r):
                for a in atoms:
                    fn(a)
            rates.append(edges * r / (time.perf_counter() - t) / 1e6)
        result(kind="nl", tool=tool, medges_s=f"{statistics.median(rates):.2f}", structures=64, atoms=nat,
               degree=f"{edges / nat:.1f}")


def bench_read(bins, folder, n):
    """shardconv convert (parse, neighbour lists, zstd shards) against
    ase.io.read, and ase.io.read followed by vesin's neighbour lists."""
    from ase.io import read
    from vesin import NeighborList
    xyz = sorted(folder.glob("*.xyz"))
    with tempfile.TemporaryDirectory() as d:
        walls = []
        for _ in range(3):
            out = pathlib.Path(d) / "s.shards"
            t = time.perf_counter()
            subprocess.run([str(bins / "shardconv"), "convert", "-q", "-i", str(folder), "-o", str(out), "--force",
                            "--cutoff", str(CUTOFF)], check=True)
            walls.append(time.perf_counter() - t)
        w = statistics.median(walls)
        result(kind="read", tool="shardconv-convert", structures=n, wall_s=f"{w:.3f}", structures_s=f"{n / w:.0f}")
    t = time.perf_counter()
    atoms = [a for f in xyz for a in read(str(f), ":")]
    w_read = time.perf_counter() - t
    result(kind="read", tool="ase.io.read", structures=n, wall_s=f"{w_read:.3f}", structures_s=f"{n / w_read:.0f}")
    nl = NeighborList(cutoff=CUTOFF, full_list=True)
    t = time.perf_counter()
    for a in atoms:
        nl.compute(points=a.positions, box=a.cell[:], periodic=a.pbc, quantities="ijS")
    w_nl = time.perf_counter() - t
    result(kind="read", tool="ase.io.read+vesin", structures=n, wall_s=f"{w_read + w_nl:.3f}",
           structures_s=f"{n / (w_read + w_nl):.0f}")
    return atoms


class OnTheFly:
    """MACE's loader converting on the fly: AtomicData.from_config (its
    matscipy neighbour list) for every sample of every epoch, as its LMDB
    and HDF5 datasets do."""

    def __init__(self, configs, table):
        self.configs, self.table = configs, table

    def __len__(self):
        return len(self.configs)

    def __getitem__(self, i):
        from mace import data
        return data.AtomicData.from_config(self.configs[i], z_table=self.table, cutoff=CUTOFF)


def run(loader_fn, name, n, epochs, kind="mace", note="", exclude=()):
    """loader_fn(workers)'s epochs at DataLoader workers 0, 1 and 2: a
    RESULT row each (median of the epochs) and one for the fastest, with
    the loader's CPU (this process and its workers, not the processes in
    exclude) and this process's own. Returns (wall, loader CPU, workers)."""
    best = None
    for workers in (0, 1, 2):
        loader = loader_fn(workers)
        walls, cpus, own = [], [], []
        for e in range(epochs):
            t, c, s = time.perf_counter(), loader_cpu_s(exclude), self_cpu_s()
            got = 0
            for b in loader:
                got += int(b.num_graphs)
            walls.append(time.perf_counter() - t)
            cpus.append(loader_cpu_s(exclude) - c)
            own.append(self_cpu_s() - s)
            assert got == n, (name, got, n)
        w, c, s = statistics.median(walls), statistics.median(cpus), statistics.median(own)
        result(kind=kind, loader=name, workers=workers, structures=n, wall_s=f"{w:.3f}", loader_cpu_s=f"{c:.3f}",
               trainer_cpu_s=f"{s:.3f}", structures_s=f"{n / w:.0f}", note=note or "-")
        if best is None or w < best[0]:
            best = (w, c, workers, s)
        del loader
    result(kind=f"{kind}-best", loader=name, workers=best[2], structures=n, wall_s=f"{best[0]:.3f}",
           loader_cpu_s=f"{best[1]:.3f}", trainer_cpu_s=f"{best[3]:.3f}", structures_s=f"{n / best[0]:.0f}")
    return best[:3]


def run_ours(bins, shards, batch, extra, scheme, label, n, epochs, kind, **dataset_kw):
    """AugloaderDataset(**dataset_kw) over a daemon serving shards, through
    run(); the daemon's CPU an epoch beside it."""
    import torch
    from augloader.torch import AugloaderDataset
    with tempfile.TemporaryDirectory() as d:
        sock = pathlib.Path(d) / "s.sock"
        p = subprocess.Popen([str(bins / "augloader"), "serve", "--socket", str(sock), "--shards", str(shards),
                              "--batch-size", str(batch), *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert json.loads(p.stdout.readline())["ready"]
        url = f"{scheme}://{sock}"
        try:
            c0 = process_cpu_s(p.pid)

            def ours(workers):
                ds = AugloaderDataset(url, **dataset_kw)
                if workers == 0:
                    return _Epochs(ds)
                return _Epochs(ds, torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers,
                                                               persistent_workers=True))
            best = run(ours, label, n, epochs, kind, exclude={p.pid})
            daemon = (process_cpu_s(p.pid) - c0) / (3 * epochs)
            result(kind=f"{kind}-daemon", loader=label, daemon_cpu_s=f"{daemon:.3f}")
            return best + (daemon,)
        finally:
            p.terminate()
            p.wait()


def bench_mace(bins, shards, atoms, epochs, batch):
    import torch
    from mace import data, tools
    from mace.tools import torch_geometric
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    zs = sorted({int(z) for a in atoms for z in a.numbers})
    table = tools.AtomicNumberTable(zs)
    for a in atoms:
        a.info["REF_energy"] = a.calc.results["energy"]
        a.arrays["REF_forces"] = a.calc.results["forces"]
    ks = data.KeySpecification(info_keys={"energy": "REF_energy"}, arrays_keys={"forces": "REF_forces"})
    configs = [data.config_from_atoms(a, key_specification=ks) for a in atoms]
    n = len(configs)

    def dl(ds, workers):
        return torch_geometric.dataloader.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                                     persistent_workers=workers > 0)

    otf = run(lambda w: dl(OnTheFly(configs, table), w), "mace-on-the-fly", n, epochs)
    inmem = [data.AtomicData.from_config(c, z_table=table, cutoff=CUTOFF) for c in configs]
    mem = run(lambda w: dl(inmem, w), "mace-in-memory", n, epochs)
    for extra, scheme, label in (((), "unix+shm", "augloader"), ((), "unix", "augloader-socket"),
                                 (("--rotate",), "unix+shm", "augloader-rotate")):
        best = run_ours(bins, shards, batch, extra, scheme, label, n, epochs, "mace", layout="mace", z_table=zs)
        if label == "augloader":
            for vs, peer in (("on-the-fly", otf), ("in-memory", mem)):
                result(kind="mace-ratio", vs=vs, wall_x=f"{peer[0] / best[0]:.1f}", trainer_cpu_frac=f"{best[1] / peer[1]:.3f}",
                       with_daemon_cpu_frac=f"{(best[1] + best[3]) / peer[1]:.3f}")


def bench_fairchem(bins, folder, shards, n, epochs, batch, python, max_neigh):
    """fairchem's AseDBDataset with its CPU graph (bench/peers/
    fairchem_structures.py in fairchem's own venv) against
    AugloaderDataset(layout="fairchem") over shards in fairchem's
    neighbour convention (--neighbours fairchem --max-neighbors)."""
    import torch
    torch.set_num_threads(1)
    best = run_ours(bins, shards, batch, (), "unix+shm", "augloader-fairchem", n, epochs, "fairchem", layout="fairchem")
    if not python:
        result(kind="fairchem-missing", note="no fairchem venv: make .venv-fairchem/.stamp")
        return
    peer = ROOT / "bench" / "peers" / "fairchem_structures.py"
    with tempfile.TemporaryDirectory() as d:
        db = pathlib.Path(d) / "oc20.aselmdb"
        subprocess.run([python, str(peer), "write", str(sorted(folder.glob("*.xyz"))[0]), str(db)], check=True)
        out = subprocess.run([python, str(peer), "read", str(db), "--batch", str(batch), "--epochs", str(epochs),
                              "--radius", str(CUTOFF), "--max-neigh", str(max_neigh)], check=True,
                             capture_output=True, text=True).stdout
    theirs = None
    for line in out.splitlines():
        if line.startswith("RESULT "):
            print(line, flush=True)
            kv = dict(f.split("=", 1) for f in line.split()[1:])
            if kv["kind"] == "fairchem-best":
                theirs = (float(kv["wall_s"]), float(kv["loader_cpu_s"]))
    result(kind="fairchem-ratio", vs="cpu-graph", wall_x=f"{theirs[0] / best[0]:.1f}", trainer_cpu_frac=f"{best[1] / theirs[1]:.3f}",
           with_daemon_cpu_frac=f"{(best[1] + best[3]) / theirs[1]:.3f}")


class _Epochs:
    """An AugloaderDataset (or a DataLoader over it) whose epoch moves on at
    each iteration, its batches as objects with num_graphs."""

    def __init__(self, ds, loader=None):
        self.ds, self.loader, self.epoch = ds, loader, 0

    def __iter__(self):
        self.ds.set_epoch(self.epoch)
        self.epoch += 1
        for d in (self.loader if self.loader is not None else self.ds):
            yield _Counted(d)


class _Counted:
    def __init__(self, d):
        self.num_graphs = int(d["num_graphs"]) if "num_graphs" in d else len(d["natoms"])  # to_fairchem's has natoms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin")
    ap.add_argument("--structures", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--nl-reps", type=int, default=20)
    ap.add_argument("--max-neigh", type=int, default=30, help="fairchem's CPU graph: neighbours kept an atom")
    ap.add_argument("--fairchem-python", default="", help="fairchem's venv's python (default .venv-fairchem's, when built)")
    a = ap.parse_args()
    bins = pathlib.Path(a.bin).resolve()
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        subprocess.run([str(bins / "shardconv"), "synth", "--like", "oc20", "--seed", "1", "--graphs", str(a.structures),
                        "-o", str(d / "oc20")], check=True, stderr=subprocess.DEVNULL)
        result(kind="about", structures=a.structures, batch=a.batch, epochs=a.epochs, cutoff=CUTOFF, cores=os.cpu_count())
        bench_nl(bins, d / "oc20" / "oc20-00000.xyz", a.nl_reps)
        atoms = bench_read(bins, d / "oc20", a.structures)
        subprocess.run([str(bins / "shardconv"), "convert", "-q", "-i", str(d / "oc20"), "-o", str(d / "oc20.shards"),
                        "--cutoff", str(CUTOFF)], check=True)
        bench_mace(bins, d / "oc20.shards", atoms, a.epochs, a.batch)
        subprocess.run([str(bins / "shardconv"), "convert", "-q", "-i", str(d / "oc20"), "-o", str(d / "oc20.fairchem"),
                        "--cutoff", str(CUTOFF), "--neighbours", "fairchem", "--max-neighbors", str(a.max_neigh)], check=True)
        py = a.fairchem_python or (str(ROOT / ".venv-fairchem" / "bin" / "python")
                                   if (ROOT / ".venv-fairchem" / ".stamp").exists() else "")
        bench_fairchem(bins, d / "oc20", d / "oc20.fairchem", a.structures, a.epochs, a.batch, py, a.max_neigh)


if __name__ == "__main__":
    main()
