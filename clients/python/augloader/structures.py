"""3D atomistic structures as interatomic-potential trainers take them
(batch schema 3, docs/protocol.md): one batch of structures as numpy views
of the Arrow record batch the daemon sent, and the tensors MACE and
fairchem models read, without a per-structure Python loop.

The daemon stores each structure's neighbour list once (shardconv convert
--cutoff), rotates and noises structures per epoch (augloader serve
--rotate, --noise) and sends batch-global int64 edges with their integer
cell shifts (unit_shifts) and shifts (unit_shifts · cell, in the cell
served); a batch here is a few views and, for MACE, a one-hot over the
model's z-table.

    for b in augloader.connect(url).epoch(0):        # StructureBatch
        data = augloader.structures.to_mace(b, z_table=[1, 6, 8, 29])
        out = model(data, training=True, compute_force=True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import pyarrow as pa

from .batch import _values

__all__ = ["StructureBatch", "to_mace", "mace_batch", "to_fairchem", "fairchem_batch"]


@dataclass
class StructureBatch:
    """One batch of structures; arrays are views of the Arrow buffers where
    the layout allows (positions, shifts, edges, properties without a
    missing row)."""

    graph_id: np.ndarray      # int64 [B]: each structure's index in the shard folder
    num_atoms: np.ndarray     # int32 [B]
    ptr: np.ndarray           # int64 [B+1]
    batch: np.ndarray         # int64 [N]: each atom's structure
    numbers: np.ndarray       # uint8 [N]: atomic numbers
    positions: np.ndarray     # float64 [N, 3] (Å; rotated and noised as served)
    cell: np.ndarray          # float64 [B, 3, 3]: the cells' rows (rotated as served)
    pbc: np.ndarray           # bool [B, 3]
    edge_src: np.ndarray      # int64 [E]: batch-global i of each edge (i, j, S)
    edge_dst: np.ndarray      # int64 [E]: its j; D = positions[j] - positions[i] + shifts
    unit_shifts: np.ndarray   # float64 [E, 3]: S
    shifts: np.ndarray        # float64 [E, 3]: S · cell
    padded: np.ndarray        # bool [B]: repeats that even out the ranks
    # Properties as the shards hold them (energy [B, 1], forces [N, 3],
    # stress [B, 9] row-major 3×3, ...): NaN where a structure lacks one;
    # present[name] says which structures have it.
    props: dict = field(default_factory=dict)
    present: dict = field(default_factory=dict)
    noise: Optional[np.ndarray] = None  # float64 [N, 3]: the position noise added (a denoising target)
    cutoff: float = 0.0                 # the served neighbour list's cutoff, Å
    neighbours: str = "ase"
    augment: str = "none"
    record: Optional[pa.RecordBatch] = field(default=None, repr=False)

    @property
    def num_graphs(self) -> int:
        return len(self.graph_id)

    @property
    def num_edges(self) -> int:
        return len(self.edge_src)

    @property
    def edge_index(self) -> np.ndarray:
        """int64 [2, E]: (i, j) rows, MACE's sender and receiver (a copy)."""
        return np.stack([self.edge_src, self.edge_dst])

    @classmethod
    def from_record_batch(cls, rb: pa.RecordBatch, info: dict) -> "StructureBatch":
        """The batch over rb, a record batch of a checked structure stream
        (info: its schema's _wire.structure_info)."""
        col = rb.column

        def offsets(name):
            return col(name).offsets.to_numpy(zero_copy_only=False)

        num_atoms = col("num_nodes").to_numpy(zero_copy_only=True)
        b = len(num_atoms)
        if b and num_atoms.min() < 1:
            raise ValueError("augloader: a structure without atoms")
        ptr = np.zeros(b + 1, dtype=np.int64)
        np.cumsum(num_atoms, out=ptr[1:])
        n = int(ptr[-1])
        numbers = _values(rb, "numbers")
        positions = _values(rb, "positions")
        cell = _values(rb, "cell")
        if len(numbers) != n or len(positions) != 3 * n or len(cell) != 9 * b:
            raise ValueError(f"augloader: {len(numbers)} atomic numbers, {len(positions)} positions, "
                             f"{len(cell)} cell values for {b} structures of {n} atoms")
        src, dst = _values(rb, "edge_src"), _values(rb, "edge_dst")
        unit, shifts = _values(rb, "unit_shifts"), _values(rb, "shifts")
        e = len(src)
        if len(dst) != e or len(unit) != 3 * e or len(shifts) != 3 * e:
            raise ValueError("augloader: edge columns of different lengths")
        if e and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError("augloader: an edge's atom is outside the batch")
        pbc_bits = col("pbc").to_numpy(zero_copy_only=True)
        pbc = (pbc_bits[:, None] >> np.arange(3, dtype=np.uint8)) & 1 == 1
        props, present = {}, {}
        for name, per, size in info["properties"]:
            props[name], present[name] = _property(_values(rb, "prop." + name), offsets("prop." + name),
                                                   per, size, num_atoms, n)
        noise = None
        if info["noise"]:
            noise = _values(rb, "noise").reshape(n, 3)
        return cls(graph_id=col("graph_id").to_numpy(zero_copy_only=True), num_atoms=num_atoms, ptr=ptr,
                   batch=np.repeat(np.arange(b, dtype=np.int64), num_atoms), numbers=numbers,
                   positions=positions.reshape(n, 3), cell=cell.reshape(b, 3, 3), pbc=pbc, edge_src=src,
                   edge_dst=dst, unit_shifts=unit.reshape(e, 3), shifts=shifts.reshape(e, 3),
                   padded=col("padded").to_numpy(zero_copy_only=False), props=props, present=present,
                   noise=noise, cutoff=info["cutoff"], neighbours=info["neighbours"], augment=info["augment"],
                   record=rb)


def _property(v: np.ndarray, off: np.ndarray, per: str, size: int, num_atoms: np.ndarray, n: int):
    """A property's values as [B, size] (per structure) or [N, size] (per
    atom), NaN where a structure lacks it, and which structures have it."""
    b = len(num_atoms)
    present = np.diff(off) > 0
    rows = b if per == "structure" else n
    if present.all():
        if len(v) != rows * size:
            raise ValueError(f"augloader: {len(v)} values of a property of {rows} rows × {size}")
        return v.reshape(rows, size), present
    out = np.full((rows, size), np.nan)
    mask = present if per == "structure" else np.repeat(present, num_atoms)
    if len(v) != int(mask.sum()) * size:
        raise ValueError(f"augloader: {len(v)} values of a property of {int(mask.sum())} rows × {size}")
    out[mask] = v.reshape(-1, size)
    return out, present


def _torch():
    import torch
    return torch


def _z_index(numbers: np.ndarray, z_table: Sequence[int]) -> np.ndarray:
    """Each atom's index in z_table (ValueError naming an element it lacks)."""
    lut = np.full(256, -1, dtype=np.int64)
    lut[np.asarray(z_table, dtype=np.int64)] = np.arange(len(z_table))
    idx = lut[numbers]
    if len(idx) and idx.min() < 0:
        missing = sorted(set(int(z) for z in numbers[idx < 0]))
        raise ValueError(f"augloader: atomic numbers {missing} are not in the z-table {list(z_table)}")
    return idx


def _prop_or(b: StructureBatch, name: str, shape: tuple, fill: float):
    """Property name reshaped to shape, fill in the rows of structures that
    lack it, and its weight per structure (1 where present, 0 where not:
    MACE's convention for a missing label)."""
    if name not in b.props:
        return np.full(shape, fill), np.zeros(b.num_graphs)
    v, present = b.props[name], b.present[name]
    if not present.all():
        rows = ~present if v.shape[0] == b.num_graphs else np.repeat(~present, b.num_atoms)
        v = v.copy()
        v[rows] = fill
    return v.reshape(shape), present.astype(np.float64)


def mace_cell(b: StructureBatch) -> np.ndarray:
    """[B, 3, 3]: the cell as MACE's get_neighborhood leaves it in its
    AtomicData: each non-periodic axis's row replaced by (max |position| +
    1) · 5 · cutoff along that axis (mace/data/neighborhood.py)."""
    maxpos = np.zeros(b.num_graphs)
    if b.num_graphs:
        a = np.abs(b.positions).max(axis=1)
        maxpos = np.maximum.reduceat(a, b.ptr[:-1]) + 1
    out = b.cell.copy()
    eye = np.eye(3)
    for k in range(3):
        open_ = ~b.pbc[:, k]
        out[open_, k, :] = (maxpos[open_] * 5 * b.cutoff)[:, None] * eye[k]
    return out


def to_mace(b: StructureBatch, z_table: Sequence[int], dtype=None, head: int = 0) -> dict:
    """MACE's batch fields (mace.data.AtomicData collated) as torch tensors:
    positions, edge_index (sender i, receiver j), shifts, unit_shifts, cell
    ([3B, 3], MACE's extended cell), node_attrs (one-hot over z_table),
    batch, ptr, head, weight and each label's weight (0 where the
    structure lacks the label), energy, forces, stress and virials
    ([B, 3, 3]), dipole, charges, total_charge, total_spin, pbc, rcell,
    volume and the rest of AtomicData's fields at MACE's defaults; float64
    unless dtype says otherwise. A model takes the dict as it takes
    batch.to_dict()."""
    torch = _torch()
    dtype = dtype or torch.float64
    f = lambda a: torch.as_tensor(np.ascontiguousarray(a)).to(dtype)  # noqa: E731
    B, N = b.num_graphs, len(b.numbers)
    idx = torch.from_numpy(_z_index(b.numbers, z_table))
    node_attrs = torch.zeros(N, len(z_table), dtype=dtype)
    node_attrs[torch.arange(N), idx] = 1
    cell = mace_cell(b)
    cell_t = torch.from_numpy(cell).to(dtype)
    volume = torch.linalg.det(cell_t)
    rcell = torch.zeros_like(cell_t)
    nz = volume.abs() > 0
    if nz.any():
        rcell[nz] = 2 * torch.pi * torch.linalg.inv(cell_t[nz].mT)
    energy, ew = _prop_or(b, "energy", (B,), 0.0)
    forces, fw = _prop_or(b, "forces", (N, 3), 0.0)
    stress, sw = _prop_or(b, "stress", (B, 3, 3), 0.0)
    virials, vw = _prop_or(b, "virials", (B, 3, 3), 0.0)
    dipole, dw = _prop_or(b, "dipole", (B, 3), 0.0)
    charges, cw = _prop_or(b, "charges", (N,), 0.0)
    total_charge, _ = _prop_or(b, "total_charge", (B,), 0.0)
    total_spin, _ = _prop_or(b, "total_spin", (B,), 1.0)
    ones = torch.ones(B, dtype=dtype)
    out = {
        "positions": f(b.positions),
        "edge_index": torch.from_numpy(b.edge_index),
        "shifts": f(b.shifts),
        "unit_shifts": f(b.unit_shifts),
        "cell": cell_t.reshape(3 * B, 3),
        "node_attrs": node_attrs,
        "batch": torch.from_numpy(b.batch),
        "ptr": torch.from_numpy(b.ptr),
        "num_graphs": B,
        "weight": ones,
        "head": torch.full((B,), head, dtype=torch.long),
        "energy_weight": f(ew), "forces_weight": f(fw), "stress_weight": f(sw), "virials_weight": f(vw),
        "dipole_weight": f(np.repeat(dw[:, None], 3, axis=1)), "charges_weight": f(cw),
        "polarizability_weight": torch.ones(B, 3, 3, dtype=dtype),
        "forces": f(forces), "energy": f(energy), "stress": f(stress), "virials": f(virials),
        "dipole": f(dipole), "charges": f(charges),
        "elec_temp": torch.zeros(B, dtype=dtype), "total_charge": f(total_charge),
        "polarizability": torch.zeros(B, 3, 3, dtype=dtype), "total_spin": f(total_spin),
        "pbc": torch.from_numpy(b.pbc.copy()),
        "density_coefficients": torch.zeros(N, 1, dtype=dtype),
        "rcell": rcell.reshape(3 * B, 3), "volume": volume,
        "fermi_level": torch.zeros(B, dtype=dtype), "external_field": torch.zeros(B, 3, dtype=dtype),
    }
    return out


def mace_batch(b: StructureBatch, z_table: Sequence[int], dtype=None, head: int = 0):
    """to_mace's fields as MACE's own batch object
    (mace.tools.torch_geometric.Batch), where mace-torch is installed."""
    from mace.tools.torch_geometric.batch import Batch as MaceBatch
    d = to_mace(b, z_table, dtype, head)
    num_graphs = d.pop("num_graphs")
    out = MaceBatch(**d)
    out.__num_graphs__ = num_graphs
    return out


def to_fairchem(b: StructureBatch, dtype=None) -> dict:
    """fairchem's AtomicData fields (fairchem.core.datasets.atomic_data) as
    torch tensors: pos, atomic_numbers, cell [B, 3, 3], pbc, natoms,
    edge_index ([0] the neighbour j, [1] the centre i, fairchem's
    order), cell_offsets (S), nedges, charge, spin, fixed, tags, energy,
    forces, stress, batch; float32 unless dtype says otherwise."""
    torch = _torch()
    dtype = dtype or torch.float32
    f = lambda a: torch.as_tensor(np.ascontiguousarray(a)).to(dtype)  # noqa: E731
    B, N = b.num_graphs, len(b.numbers)
    nedges = np.bincount(np.searchsorted(b.ptr, b.edge_src, side="right") - 1, minlength=B) if b.num_edges else np.zeros(B, dtype=np.int64)

    def ints(name, shape):
        v, _ = _prop_or(b, name, shape, 0.0)
        return torch.from_numpy(np.asarray(v, dtype=np.int64))

    out = {
        "pos": f(b.positions), "atomic_numbers": torch.from_numpy(b.numbers.astype(np.int64)),
        "cell": f(b.cell), "pbc": torch.from_numpy(b.pbc.copy()), "natoms": torch.from_numpy(b.num_atoms.astype(np.int64)),
        "edge_index": torch.from_numpy(np.stack([b.edge_dst, b.edge_src])), "cell_offsets": f(b.unit_shifts),
        "nedges": torch.from_numpy(nedges.astype(np.int64)),
        "charge": ints("charge", (B,)), "spin": ints("spin", (B,)),
        "fixed": ints("fixed", (N,)), "tags": ints("tags", (N,)),
        "batch": torch.from_numpy(b.batch),
    }
    for name, shape in (("energy", (B,)), ("forces", (N, 3)), ("stress", (B, 3, 3))):
        if name in b.props:
            out[name] = f(b.props[name].reshape(shape))
    return out


def fairchem_batch(b: StructureBatch, dtype=None):
    """to_fairchem's fields as fairchem's own batched AtomicData, where
    fairchem-core is installed."""
    from fairchem.core.datasets.atomic_data import AtomicData
    d = to_fairchem(b, dtype)
    n = b.num_graphs
    data = AtomicData(pos=d["pos"], atomic_numbers=d["atomic_numbers"], cell=d["cell"], pbc=d["pbc"],
                      natoms=d["natoms"], edge_index=d["edge_index"], cell_offsets=d["cell_offsets"],
                      nedges=d["nedges"], charge=d["charge"], spin=d["spin"], fixed=d["fixed"], tags=d["tags"],
                      energy=d.get("energy"), forces=d.get("forces"), stress=d.get("stress"), batch=d["batch"],
                      sid=[str(int(i)) for i in b.graph_id])
    data.assign_batch_stats(*_fairchem_slices(d, n))
    return data


def _fairchem_slices(d: dict, n: int):
    """The slices, cumsums, cat dims and natoms fairchem's batch records
    (AtomicData.assign_batch_stats), for its get_example."""
    torch = _torch()
    natoms, nedges = d["natoms"], d["nedges"]
    node_sl = torch.cat([torch.zeros(1, dtype=torch.long), natoms.cumsum(0)])
    edge_sl = torch.cat([torch.zeros(1, dtype=torch.long), nedges.cumsum(0)])
    graph_sl = torch.arange(n + 1)
    slices, cumsum, cat_dims = {}, {}, {}
    for k, v in d.items():
        if not torch.is_tensor(v):
            continue
        if k in ("pos", "atomic_numbers", "fixed", "tags", "forces", "batch"):
            slices[k] = node_sl
        elif k in ("edge_index",):
            slices[k] = edge_sl
            cumsum[k] = node_sl[:-1]
            cat_dims[k] = -1
        elif k in ("cell_offsets",):
            slices[k] = edge_sl
        else:
            slices[k] = graph_sl
    return slices, cumsum, cat_dims, natoms.tolist()
