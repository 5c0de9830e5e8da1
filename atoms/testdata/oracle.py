"""Writes atoms/testdata/oracle.json.gz: the structure test set
(clients/python/tests/structures.py) at three cutoffs, each with its
neighbour list as ASE, matscipy and vesin give it (the three must agree
exactly as sets of (i, j, S), or this script stops), and fairchem's
convention (d <= cutoff, d >= 1e-8) computed from ASE's list at a cutoff a
hair larger. atoms.TestOracle compares the Go builder with it; the live
oracle test (clients/python/tests/test_structures.py) asks the packages
themselves on every make test.

    .venv-torch2/bin/python atoms/testdata/oracle.py
"""
import gzip
import json
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "clients" / "python" / "tests"))
import structures  # noqa: E402


def ase_list(a, cutoff):
    from ase.neighborlist import neighbor_list
    i, j, S = neighbor_list("ijS", a, cutoff, self_interaction=False)
    return sorted(zip(i.tolist(), j.tolist(), map(tuple, S.tolist())))


def matscipy_list(a, cutoff):
    from matscipy.neighbours import neighbour_list
    i, j, S = neighbour_list("ijS", a, cutoff)
    return sorted(zip(i.tolist(), j.tolist(), map(tuple, S.tolist())))


def vesin_list(a, cutoff):
    from vesin import NeighborList
    nl = NeighborList(cutoff=cutoff, full_list=True)
    i, j, S = nl.compute(points=a.positions, box=a.cell[:], periodic=a.pbc, quantities="ijS")
    return sorted(zip(i.tolist(), j.tolist(), map(tuple, S.tolist())))


def main():
    cases = []
    for a in structures.everything():
        for cutoff in (2.5, 4.0, 6.0):
            want = ase_list(a, cutoff)
            for name, other in (("matscipy", matscipy_list), ("vesin", vesin_list)):
                if name == "matscipy" and np.abs(np.linalg.det(a.cell[:])) < 1e-9:
                    continue  # matscipy inverts the cell, even along open axes
                got = other(a, cutoff)
                if got != want:
                    sys.exit(f"{a.info['name']} at {cutoff}: {name} gives {len(got)} pairs, ase {len(want)}")
            cases.append({"name": a.info["name"], "positions": a.positions.ravel().tolist(),
                          "cell": a.cell[:].ravel().tolist(), "pbc": [bool(p) for p in a.pbc], "cutoff": cutoff,
                          "ase": [[i, j, *S] for i, j, S in want]})
    out = HERE / "oracle.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump(cases, f, separators=(",", ":"))
    print(f"{len(cases)} cases, {sum(len(c['ase']) for c in cases)} pairs -> {out}")


if __name__ == "__main__":
    main()
