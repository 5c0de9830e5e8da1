"""The structure test set, written by ASE from its own data, offline:
ase.collections molecules, ase.build crystals of every lattice ASE builds,
random triclinic cells, mixed boundary conditions, slabs with adsorbates,
cells shorter than the cutoff, with labels from ASE's EMT calculator where
its elements allow (H C N O Al Ni Cu Pd Ag Pt Au). Seeded: the same list
every run. Used by the neighbour-list oracle test, the conversion tests
(extxyz and ASE database against ase.io.read) and MACE's oracle test; with
the helpers both structure test files use (conversion, the converted set
as a fixture, a daemon, a structure's digest)."""
import json
import subprocess

import numpy as np
import pytest

EMT_ELEMENTS = {"H", "C", "N", "O", "Al", "Ni", "Cu", "Pd", "Ag", "Pt", "Au"}


def _emt(atoms, stress=True):
    """Labels from EMT (energy, forces; stress where the cell is periodic
    on every axis), frozen into a SinglePointCalculator as ase.io.write
    stores them."""
    from ase.calculators.emt import EMT
    from ase.calculators.singlepoint import SinglePointCalculator
    if not set(atoms.get_chemical_symbols()) <= EMT_ELEMENTS:
        return atoms
    atoms.calc = EMT()
    res = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces()}
    if stress and all(atoms.pbc):
        res["stress"] = atoms.get_stress()
    atoms.calc = SinglePointCalculator(atoms, **res)
    return atoms


def molecules(limit=None):
    """ase.collections g2 and s22 molecules (no cell, no pbc)."""
    from ase.collections import g2, s22
    out = []
    for coll in (g2, s22):
        for name in coll.names[:limit]:
            a = coll[name]
            a.info["name"] = name
            out.append(_emt(a))
    return out


def crystals():
    """Every lattice ase.build.bulk builds, primitive and cubic cells."""
    from ase.build import bulk
    specs = [
        ("Cu", "fcc", {"a": 3.6}), ("Al", "fcc", {"a": 4.05, "cubic": True}), ("Ni", "bcc", {"a": 2.8}),
        ("Au", "sc", {"a": 2.7}), ("Pt", "hcp", {"a": 2.77, "c": 4.5}), ("C", "diamond", {"a": 3.57}),
        ("NaCl", "rocksalt", {"a": 5.64}), ("CsCl", "cesiumchloride", {"a": 4.12}), ("CaF2", "fluorite", {"a": 5.46}),
        ("ZnS", "zincblende", {"a": 5.41}), ("ZnO", "wurtzite", {"a": 3.25, "c": 5.2}),
        ("Ag", "bct", {"a": 3.0, "c": 4.1}), ("Bi", "rhombohedral", {"a": 4.75, "alpha": 57.2}),
        ("Ni", "orthorhombic", {"a": 2.6, "b": 3.1, "c": 3.5}),
    ]
    out = []
    for sym, kind, kw in specs:
        a = bulk(sym, kind, **kw)
        a.info["name"] = f"{sym}-{kind}"
        out.append(_emt(a))
    # The 14 Bravais lattices (ase.lattice), one atom per cell.
    from ase import Atoms
    from ase import lattice as L
    lats = [L.CUB(2.7), L.FCC(3.6), L.BCC(2.9), L.TET(2.8, 3.5), L.BCT(2.8, 3.9), L.ORC(2.6, 3.0, 3.4),
            L.ORCF(2.6, 3.0, 3.4), L.ORCI(2.6, 3.0, 3.4), L.ORCC(2.6, 3.0, 3.4), L.HEX(2.7, 4.4),
            L.RHL(2.9, 70.0), L.MCL(2.6, 3.0, 3.4, 75.0), L.MCLC(2.6, 3.0, 3.4, 75.0),
            L.TRI(2.6, 3.0, 3.4, 75.0, 80.0, 85.0)]
    for lat, sym in zip(lats, ["Au", "Cu", "Ni", "Pd", "Ag", "Pt", "Al", "Cu", "Ni", "Au", "Pd", "Ag", "Pt", "Al"]):
        a = Atoms(sym, cell=lat.tocell(), pbc=True)
        a.info["name"] = f"{sym}-{lat.name}"
        out.append(_emt(a))
    big = bulk("Cu", "fcc", a=3.6, cubic=True).repeat((2, 2, 2))
    big.rattle(0.05, seed=3)
    big.info["name"] = "Cu-fcc-222-rattled"
    out.append(_emt(big))
    return out


def triclinic(n=6, seed=7):
    """Random triclinic cells (skewed, some left-handed) of random atoms,
    positions partly outside the cell."""
    from ase import Atoms
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        cell = rng.normal(size=(3, 3)) * 1.5 + np.diag(rng.uniform(3.0, 7.0, 3))
        if k % 3 == 2:
            cell[2] *= -1  # left-handed
        m = int(rng.integers(2, 12))
        frac = rng.uniform(-0.3, 1.3, size=(m, 3))
        a = Atoms(rng.choice(["Cu", "Ni", "Al", "Au"], m), scaled_positions=None, positions=frac @ cell,
                  cell=cell, pbc=True)
        a.info["name"] = f"triclinic-{k}"
        out.append(_emt(a))
    return out


def mixed_pbc(seed=11):
    """Cells periodic on one or two axes, the others not (a zero vector
    along a non-periodic axis included)."""
    from ase import Atoms
    rng = np.random.default_rng(seed)
    out = []
    for k, pbc in enumerate([(True, False, False), (False, True, False), (True, True, False),
                             (False, True, True), (True, False, True)]):
        cell = np.diag(rng.uniform(3.0, 6.0, 3)) + rng.normal(size=(3, 3)) * 0.4
        for ax in range(3):
            if not pbc[ax] and k % 2 == 0:
                cell[ax] = 0.0
        m = int(rng.integers(3, 10))
        pos = rng.uniform(0, 5, size=(m, 3))
        a = Atoms(rng.choice(["Pd", "Ag"], m), positions=pos, cell=cell, pbc=pbc)
        a.info["name"] = f"mixed-{''.join('T' if p else 'F' for p in pbc)}"
        out.append(_emt(a))
    return out


def slabs():
    """Slabs with adsorbates (OC20's shape), atoms of the bottom layers
    fixed, tags as fairchem uses them (0 subsurface, 1 surface, 2
    adsorbate)."""
    from ase.build import add_adsorbate, fcc100, fcc111, fcc211, molecule
    from ase.constraints import FixAtoms
    out = []
    for k, (build, metal, ads) in enumerate([(fcc111, "Cu", "CO"), (fcc100, "Pt", "O"), (fcc211, "Ni", "H2O"),
                                             (fcc111, "Au", "NH3")]):
        slab = build(metal, size=(3, 3, 3), vacuum=6.0) if build is not fcc211 else build(metal, size=(6, 3, 3), vacuum=6.0)
        slab.set_tags(np.where(slab.get_tags() == 1, 1, 0))
        n = len(slab)
        mol = molecule(ads)
        add_adsorbate(slab, mol, 1.8, "ontop" if build is not fcc211 else (0.0, 0.0))
        tags = slab.get_tags()
        tags[n:] = 2
        slab.set_tags(tags)
        z = slab.positions[:n, 2]
        slab.set_constraint(FixAtoms(mask=[i < n and z[i] < z.min() + 0.5 for i in range(len(slab))]))
        slab.info["name"] = f"slab-{metal}-{ads}"
        slab.pbc = (True, True, True) if k % 2 == 0 else (True, True, False)
        out.append(_emt(slab))
    return out


def tiny_cells():
    """Cells shorter than the cutoff: an atom sees many images of itself."""
    from ase import Atoms
    out = []
    for k, (cell, pbc) in enumerate([(np.diag([1.2, 1.3, 1.4]), (True, True, True)),
                                     ([[1.0, 0, 0], [0.6, 1.1, 0], [0.2, 0.3, 1.5]], (True, True, True)),
                                     (np.diag([0.9, 5.0, 5.0]), (True, False, False)),
                                     (np.diag([1.1, 1.1, 0.0]), (True, True, False))]):
        a = Atoms("Cu", positions=[[0.1, 0.2, 0.3]], cell=cell, pbc=pbc)
        a.info["name"] = f"tiny-{k}"
        out.append(a)
    two = Atoms("CuNi", positions=[[0, 0, 0], [0.5, 0.6, 0.7]], cell=np.diag([1.5, 1.6, 1.7]), pbc=True)
    two.info["name"] = "tiny-two"
    out.append(two)
    return out


def coincident():
    """Two atoms at the same place (kept by ASE's convention, dropped by
    fairchem's)."""
    from ase import Atoms
    a = Atoms("CuCu", positions=[[1, 1, 1], [1, 1, 1]], cell=np.diag([4.0, 4.0, 4.0]), pbc=True)
    a.info["name"] = "coincident"
    return [a]


def everything():
    """The whole set, in a fixed order."""
    return molecules() + crystals() + triclinic() + mixed_pbc() + slabs() + tiny_cells() + coincident()


# --- Helpers of test_structures.py and test_structures_mace.py -----------

CUTOFF = 4.0


def shards_of(folder):
    """Every structure of a format 4 shard folder, read with pyarrow: a dict
    per structure, in id order, and the manifest."""
    import pyarrow.ipc as ipc
    man = json.loads((folder / "manifest.json").read_text())
    out = []
    for s in man["shards"]:
        with ipc.open_file(str(folder / s["file"])) as f:
            t = f.read_all()
        cols = {n: t.column(n).to_pylist() for n in t.column_names}
        for r in range(t.num_rows):
            out.append({n: cols[n][r] for n in cols})
    out.sort(key=lambda s: s["graph_id"])
    return out, man


def convert(bins, src, out, *args):
    p = subprocess.run([str(bins / "shardconv"), "convert", "-q", "-i", str(src), "-o", str(out), "--cutoff", str(CUTOFF), *args],
                       capture_output=True, text=True)
    return p


@pytest.fixture(scope="module", params=["xyz", "db"])
def converted(bins, tmp_path_factory, request):
    """The test set as ase.io.write writes it, in extxyz or an ASE database
    (SQLite), converted; and as ase.io.read reads it back."""
    d = tmp_path_factory.mktemp("structures")
    path = d / f"set.{request.param}"
    from ase.io import read, write
    write(str(path), everything())
    out = d / "set.shards"
    p = convert(bins, path, out)
    assert p.returncode == 0, p.stderr
    return out, read(str(path), ":")


def serve(bins, shards, sock, *args):
    p = subprocess.Popen([str(bins / "augloader"), "serve", "--socket", str(sock), "--shards", str(shards),
                          "--batch-size", "16", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert json.loads(p.stdout.readline())["ready"]
    return p


def structure_digests(b):
    """(structure id, padded, digest) of each structure of a StructureBatch:
    its numbers, positions, cell, pbc, edges (ids from 0), shifts and
    properties."""
    import hashlib
    out = []
    for k, gid in enumerate(b.graph_id):
        a0, a1 = int(b.ptr[k]), int(b.ptr[k + 1])
        sel = (b.edge_src >= a0) & (b.edge_src < a1)
        h = hashlib.sha256()
        for arr in (b.numbers[a0:a1], b.positions[a0:a1], b.cell[k], b.pbc[k], b.edge_src[sel] - a0,
                    b.edge_dst[sel] - a0, b.unit_shifts[sel], b.shifts[sel]):
            h.update(np.ascontiguousarray(arr).tobytes())
        for name in sorted(b.props):
            v = b.props[name]
            h.update(np.ascontiguousarray(v[k] if len(v) == b.num_graphs else v[a0:a1]).tobytes())
        out.append((int(gid), bool(b.padded[k]), h.hexdigest()))
    return out
