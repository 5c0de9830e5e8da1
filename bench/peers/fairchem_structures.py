"""fairchem's own loader, the CPU-graph peer of bench/python_structures.py
(#67), run in fairchem's venv (.venv-fairchem: fairchem-core 2.24 wants
torch 2.13, numpy 2 and e3nn 0.5, none of which .venv-torch2's MACE
takes).

  write  XYZ DB      the extxyz file as an ASE database in fairchem's
                     format (.aselmdb, ase-db-backends), energy and forces
                     from the file's calculator results, as fairchem's
                     OC20/OMat sets ship
  read   DB          fairchem's AseDBDataset over it, its CPU graph
                     (a2g_args r_edges: AtomicData.from_ase, pymatgen's
                     neighbour list, --radius, --max-neigh), a torch
                     DataLoader with fairchem's atomicdata_list_to_batch
                     collate, shuffled, at DataLoader workers 0, 1 and 2
                     (persistent); one RESULT line a worker count (median
                     of --epochs) and one for the fastest, in
                     python_structures.py's kind=mace fields so that
                     bench/report renders them in one table.

The trainer's CPU is this process's getrusage (workers are not the
trainer's). Every batch's edges are counted so that a lazy graph cannot pass
for a built one.
"""

import argparse
import statistics
import sys
import time

from cpuclock import loader_cpu_s, self_cpu_s  # beside this file


def result(**kv):
    print("RESULT " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def write(xyz, db):
    import ase.db
    import ase.io
    n = 0
    with ase.db.connect(db, type="aselmdb") as con:
        for a in ase.io.iread(xyz, index=":"):
            con.write(a)
            n += 1
    print(f"fairchem: {n} structures written to {db}", file=sys.stderr)


def read(db, batch, epochs, radius, max_neigh, label):
    import torch
    from fairchem.core.datasets import AseDBDataset
    from fairchem.core.datasets.atomic_data import atomicdata_list_to_batch
    torch.set_num_threads(1)
    ds = AseDBDataset(config={"src": db, "a2g_args": {"r_energy": True, "r_forces": True, "r_edges": True,
                                                      "radius": radius, "max_neigh": max_neigh}})
    n = len(ds)
    best = None
    for workers in (0, 1, 2):
        loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                             persistent_workers=workers > 0, collate_fn=atomicdata_list_to_batch)
        walls, cpus, own, edges = [], [], [], 0
        for _ in range(epochs):
            t, c, s = time.perf_counter(), loader_cpu_s(), self_cpu_s()
            got = 0
            for b in loader:
                got += int(b.natoms.numel())
                edges += int(b.edge_index.shape[1])
            walls.append(time.perf_counter() - t)
            cpus.append(loader_cpu_s() - c)
            own.append(self_cpu_s() - s)
            assert got == n, (got, n)
        assert edges > 0
        w, c, s = statistics.median(walls), statistics.median(cpus), statistics.median(own)
        result(kind="fairchem", loader=label, workers=workers, structures=n, wall_s=f"{w:.3f}", loader_cpu_s=f"{c:.3f}",
               trainer_cpu_s=f"{s:.3f}",
               structures_s=f"{n / w:.0f}", note=f"edges/structure={edges / (n * epochs):.1f}")
        if best is None or w < best[0]:
            best = (w, c, workers, s)
        del loader
    result(kind="fairchem-best", loader=label, workers=best[2], structures=n, wall_s=f"{best[0]:.3f}",
           loader_cpu_s=f"{best[1]:.3f}", trainer_cpu_s=f"{best[3]:.3f}", structures_s=f"{n / best[0]:.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("xyz")
    w.add_argument("db")
    r = sub.add_parser("read")
    r.add_argument("db")
    r.add_argument("--batch", type=int, default=16)
    r.add_argument("--epochs", type=int, default=3)
    r.add_argument("--radius", type=float, default=6.0)
    r.add_argument("--max-neigh", type=int, default=30)
    r.add_argument("--label", default="fairchem-cpu-graph")
    a = ap.parse_args()
    if a.cmd == "write":
        write(a.xyz, a.db)
    else:
        read(a.db, a.batch, a.epochs, a.radius, a.max_neigh, a.label)


if __name__ == "__main__":
    main()
