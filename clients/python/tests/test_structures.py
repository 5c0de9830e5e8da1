"""3D atomistic structures (#67) against the packages users have: a test
set written by ASE from its own data (tests/structures.py: molecules, every
Bravais lattice, triclinic and mixed-pbc cells, slabs with adsorbates, cells
shorter than the cutoff; EMT labels) converts from extxyz with every field
equal to what ase.io.read gives and each neighbour list equal to ase's,
matscipy's and vesin's; hostile inputs are refused naming file, line and
field; noisy positions get their own lists; fairchem's fields; write_shards
of ase.Atoms. MACE's model on our batches and budget batches across ranks
are test_structures_mace.py's.

Needs ase, matscipy, vesin and mace-torch (.venv-torch2, make test)."""
import os
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import structures  # noqa: E402

if os.environ.get("AUGLOADER_TORCH2") == "1":
    import ase, matscipy, vesin, mace  # noqa: E401,F401  make test-torch2's venv holds them: missing is a failure
ase = pytest.importorskip("ase", reason="ase is not installed: make test runs this in .venv-torch2")
from ase.io import write  # noqa: E402

import augloader  # noqa: E402
from augloader.structures import to_fairchem  # noqa: E402
from structures import CUTOFF, convert, converted, serve, shards_of  # noqa: E402,F401  converted: a fixture


def test_conversion_equals_ase_read(converted):
    """Every field of every structure equals what ase.io.read gives:
    numbers, positions, cell, pbc, the calculator's energy, forces and
    stress (3×3 from ASE's Voigt), tags, FixAtoms as fixed, and the other
    arrays ASE keeps (initial_magmoms)."""
    folder, atoms = converted
    got, man = shards_of(folder)
    assert len(got) == len(atoms) > 100
    props = {p["name"]: p for p in man["structures"]["properties"]}
    assert {"energy", "forces", "stress", "tags", "fixed"} <= set(props)
    assert man["structures"]["units"] == {"length": "Å", "energy": "eV"}
    for g, a in zip(got, atoms):
        n = len(a)
        assert g["num_nodes"] == n
        assert g["numbers"] == a.numbers.tolist()
        assert np.array_equal(np.array(g["positions"]).reshape(n, 3), a.positions)
        assert np.array_equal(np.array(g["cell"]).reshape(3, 3), a.cell[:])
        assert [bool(g["pbc"] >> k & 1) for k in range(3)] == a.pbc.tolist()
        res = a.calc.results if a.calc is not None else {}
        for name in ("energy", "forces"):
            v = g["prop." + name]
            if name in res:
                assert np.array_equal(np.array(v), np.ravel(res[name])), (a.info.get("name"), name)
            else:
                assert v == []
        if "stress" in res:
            from ase.stress import full_3x3_to_voigt_6_stress
            assert np.array_equal(full_3x3_to_voigt_6_stress(np.array(g["prop.stress"]).reshape(3, 3)), res["stress"])
        else:
            assert g["prop.stress"] == []
        if "tags" in a.arrays:
            assert g["prop.tags"] == a.get_tags().tolist()
        from ase.constraints import FixAtoms
        fixed = np.zeros(n)
        for c in a.constraints:
            if isinstance(c, FixAtoms):
                fixed[c.index] = 1
        if g["prop.fixed"]:
            assert np.array_equal(np.array(g["prop.fixed"]), fixed)
        else:
            assert not fixed.any()
        if "initial_magmoms" in a.arrays:
            assert np.array_equal(np.array(g["prop.initial_magmoms"]), a.arrays["initial_magmoms"])


def _oracle_sets(a, cutoff):
    from ase.neighborlist import neighbor_list
    from matscipy.neighbours import neighbour_list
    from vesin import NeighborList

    def as_set(i, j, S):
        return set(zip(i.tolist(), j.tolist(), map(tuple, np.asarray(S).tolist())))

    out = {"ase": as_set(*neighbor_list("ijS", a, cutoff, self_interaction=False))}
    nl = NeighborList(cutoff=cutoff, full_list=True)
    out["vesin"] = as_set(*nl.compute(points=a.positions, box=a.cell[:], periodic=a.pbc, quantities="ijS"))
    if abs(np.linalg.det(a.cell[:])) > 1e-9:  # matscipy inverts the cell, open axes too
        out["matscipy"] = as_set(*neighbour_list("ijS", a, cutoff))
    return out


def test_neighbour_lists_equal_oracles(converted):
    """Each stored neighbour list equals ase's, matscipy's and vesin's
    exactly, as a set of (i, j, S): periodic and mixed boundaries, any
    triclinic cell, cells shorter than the cutoff, coincident atoms."""
    folder, atoms = converted
    got, man = shards_of(folder)
    assert man["structures"]["cutoff"] == CUTOFF and man["structures"]["neighbours"] == "ase"
    pairs = 0
    for g, a in zip(got, atoms):
        e, s = g["edges"], g["shifts"]
        ours = {(e[2 * k], e[2 * k + 1], tuple(s[3 * k:3 * k + 3])) for k in range(len(e) // 2)}
        assert len(ours) == len(e) // 2
        for name, want in _oracle_sets(a, CUTOFF).items():
            assert ours == want, (a.info.get("name"), name, len(ours), len(want))
        pairs += len(ours)
    assert pairs > 10000


@pytest.mark.parametrize("case,text,want", [
    ("nan-position", '2\nLattice="4 0 0 0 4 0 0 0 4"\nCu 0 0 0\nCu nan 1 1\n', "bad.xyz:4: field 2: atom 1 of structure 0: pos: NaN"),
    ("singular-cell", '1\nLattice="0 0 0 0 0 0 0 0 0" pbc="T T T"\nCu 0 0 0\n', "bad.xyz:1: structure 0: atoms: invalid structure: the cell is periodic on every axis but singular"),
    ("unknown-element", '1\n\nQq 0 0 0\n', "bad.xyz:3: field 1: atom 0 of structure 0: unknown element \"Qq\""),
    ("forces-length", '1\nProperties=species:S:1:pos:R:3:forces:R:2\nH 0 0 0 1 1\n', "bad.xyz:2: structure 0: forces is 2 value(s) per atom, want 3"),
    ("zero-atoms", '1\n\nH 0 0 0\n0\n\n', "bad.xyz:4: field 1: structure 1 has 0 atoms"),
])
def test_hostile_inputs_refused(bins, tmp_path, case, text, want):
    """ASE and MACE make 3,582 edges for an all-zero cell marked periodic,
    and ASE, matscipy, MACE and fairchem pass a NaN position silently:
    ours refuses both, and every other fault, naming file, line and field,
    with nothing written."""
    src = tmp_path / "bad.xyz"
    src.write_text(text)
    out = tmp_path / "out.shards"
    p = convert(bins, src, out)
    assert p.returncode != 0 and want in p.stderr, p.stderr
    assert not out.exists() and not any(x.name.startswith(".out.shards") for x in tmp_path.iterdir())


def test_hostile_database_refused(bins, tmp_path):
    """A row of an ASE database whose forces are not its atoms' (edited
    behind ASE's back) is refused naming the file, the row and the column."""
    import sqlite3
    from ase.build import bulk
    from ase.calculators.singlepoint import SinglePointCalculator
    src = tmp_path / "bad.db"
    a = bulk("Cu", "fcc", a=3.6).repeat((2, 1, 1))
    a.calc = SinglePointCalculator(a, energy=1.0, forces=np.zeros((2, 3)))
    write(str(src), [a, a])
    con = sqlite3.connect(src)
    con.execute("UPDATE systems SET forces = ? WHERE id = 2", (np.zeros(4).tobytes(),))
    con.commit()
    con.close()
    out = tmp_path / "out.shards"
    p = convert(bins, src, out)
    assert p.returncode != 0 and "bad.db:2: field 20: forces: 32 bytes" in p.stderr, p.stderr
    assert not out.exists()


def test_noise_lists_exact_for_noisy_positions(bins, converted, tmp_path):
    """Under --noise the positions move by the served noise and each
    structure's neighbour list is the oracles' for the noisy positions."""
    folder, atoms = converted
    p = serve(bins, folder, tmp_path / "s.sock", "--noise", "0.05")
    try:
        n = 0
        for b in augloader.connect(f"unix://{tmp_path}/s.sock").epoch(3):
            assert b.noise is not None and b.augment == "noise=0.05"
            for k, gid in enumerate(b.graph_id):
                a = atoms[int(gid)].copy()
                b0, b1 = int(b.ptr[k]), int(b.ptr[k + 1])
                assert np.allclose(b.positions[b0:b1] - b.noise[b0:b1], a.positions, atol=1e-12)
                a.positions = b.positions[b0:b1]
                sel = (b.edge_src >= b0) & (b.edge_src < b1)
                ours = {(int(i) - b0, int(j) - b0, tuple(int(x) for x in s)) for i, j, s in
                        zip(b.edge_src[sel], b.edge_dst[sel], b.unit_shifts[sel])}
                assert ours == _oracle_sets(a, CUTOFF)["vesin"], a.info.get("name")
                n += 1
        assert n == len(atoms)
    finally:
        p.terminate()
        p.wait()


def test_fairchem_fields(converted, bins, tmp_path):
    """fairchem's layout: edge_index[0] the neighbour j, [1] the centre i,
    D = pos[j] − pos[i] + cell_offsets · cell under the cutoff, nedges
    per structure, tags and fixed as ints."""
    torch = pytest.importorskip("torch")
    folder, atoms = converted
    p = serve(bins, folder, tmp_path / "s.sock")
    try:
        for b in augloader.connect(f"unix://{tmp_path}/s.sock").epoch(0):
            d = to_fairchem(b)
            ei, off = d["edge_index"].numpy(), d["cell_offsets"].double().numpy()
            cell = np.repeat(b.cell, d["nedges"].numpy(), axis=0)
            D = b.positions[ei[0]] - b.positions[ei[1]] + np.einsum("ek,ekc->ec", off, cell)
            assert np.all(np.linalg.norm(D, axis=1) < CUTOFF)
            assert int(d["nedges"].sum()) == b.num_edges and d["tags"].dtype == torch.long
    finally:
        p.terminate()
        p.wait()


def test_write_shards_of_atoms(bins, tmp_path):
    """augloader.write_shards of any iterable of ase.Atoms (here an ASE
    database's rows, as ase.db.connect(...).select gives them) writes the
    same shards as shardconv convert of the same structures in extxyz."""
    from ase.db import connect
    atoms = structures.crystals()[:8] + structures.slabs()
    with connect(str(tmp_path / "x.db")) as db:
        for a in atoms:
            db.write(a)
    out = augloader.write_shards((row.toatoms() for row in connect(str(tmp_path / "x.db")).select()),
                                 tmp_path / "w.shards", shardconv=str(bins / "shardconv"), cutoff=CUTOFF)
    write(str(tmp_path / "x.xyz"), atoms)
    p = convert(bins, tmp_path / "x.xyz", tmp_path / "x.shards")
    assert p.returncode == 0, p.stderr
    got, _ = shards_of(out)
    want, _ = shards_of(tmp_path / "x.shards")
    assert len(got) == len(want) == len(atoms)
    for g, w in zip(got, want):
        for k in ("numbers", "positions", "cell", "pbc", "edges", "shifts", "prop.energy", "prop.forces"):
            assert g[k] == w[k], k
