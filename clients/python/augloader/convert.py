"""Convert graphs already loaded in Python into augloader shards.

    import augloader
    from torch_geometric.datasets import ZINC
    augloader.write_shards(ZINC("data/ZINC", subset=True), "zinc.shards")

``write_shards`` takes any PyG dataset or iterable of ``Data`` (or of
dicts with the same keys) and writes them through the Go converter, so
there is one canonicaliser and one place that validates: the graphs go
into a Parquet table in the columns the Hugging Face graphs-datasets use
(``edge_index`` as two lists, ``num_nodes``, ``node_feat``, ``edge_attr``,
``y``; docs/format.md, "Inputs"), written a row group at a time, and
``shardconv convert`` reads it. Integer ``x`` and ``edge_attr`` become
categorical columns (OGB's atom and bond codes), float ones float blocks;
``y`` is read as PyG and OGB write it: a 1-D integer ``y`` of one value a
graph (PyG's TU datasets: ``y = tensor([c])``) is a class, 0 and 1
included; a 2-D ``[1, T]`` ``y`` is T tasks (OGB's ``ogbg-mol*``), binary
targets when every value is 0, 1 or NaN, else regression; a float ``y``
regression (or binary targets of 0, 1 and NaN); NaN is missing.
``task=`` ("class", "binary", "regression") says it instead. Edges are made undirected (each edge and its reverse, as PyG's
``to_undirected``), but an edge listed both ways must carry the same
features both ways: the converter refuses it otherwise rather than sum or
pick. Other attributes (``pos``, graph-level features) are not carried.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import tempfile
from typing import Any, Iterable, Optional

import numpy as np

__all__ = ["write_shards", "ConvertError"]

ROW_GROUP = 4096


class ConvertError(RuntimeError):
    """shardconv refused the graphs; the message is its error (which names
    the graph, as a Parquet row, and the column)."""


def _get(g: Any, key: str):
    v = g.get(key) if isinstance(g, dict) else getattr(g, key, None)
    if v is None:
        return None
    if hasattr(v, "detach"):  # a torch tensor
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def _rows(a: Optional[np.ndarray], what: str, index: int):
    if a is None:
        return None
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"graph {index}: {what} has shape {a.shape}, want [rows, fields]")
    if a.dtype.kind in "iub":
        return a.astype(np.int64, copy=False)
    return a.astype(np.float32, copy=False)


def _graph_row(g: Any, index: int) -> dict:
    ei = _get(g, "edge_index")
    if ei is None:
        ei = np.zeros((2, 0), dtype=np.int64)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"graph {index}: edge_index has shape {ei.shape}, want [2, E]")
    x = _rows(_get(g, "x"), "x", index)
    ea = _rows(_get(g, "edge_attr"), "edge_attr", index)
    n = _get(g, "num_nodes")
    if n is None:
        if x is None:
            raise ValueError(f"graph {index}: neither num_nodes nor x says how many nodes it has")
        n = x.shape[0]
    if ea is not None and ea.shape[0] != ei.shape[1]:
        raise ValueError(f"graph {index}: edge_attr has {ea.shape[0]} rows for {ei.shape[1]} edges")
    y = _get(g, "y")
    if y is None:
        raise ValueError(f"graph {index}: no y (the converter needs a label or targets a graph)")
    return {"edge_index": ei.astype(np.int64, copy=False), "num_nodes": int(n), "node_feat": x,
            "edge_attr": ea, "y": y.reshape(-1), "y_ndim": y.ndim}


def _table(rows: list, kinds: dict):
    import pyarrow as pa

    def offsets(lens):
        return pa.array(np.concatenate([[0], np.cumsum(lens, dtype=np.int64)]).astype(np.int32))

    def matrix(key):
        # rows of a graph, fields of a row: each row's own width, so a
        # ragged graph reaches the converter as it is (and is refused there).
        if kinds[key] is None:
            return None
        t = pa.int64() if kinds[key] == "i" else pa.float32()
        vals = [r[key] for r in rows]
        widths = np.concatenate([np.full(v.shape[0], v.shape[1], dtype=np.int64) for v in vals])
        flat = np.concatenate([v.reshape(-1) for v in vals])
        inner = pa.ListArray.from_arrays(offsets(widths), pa.array(flat, type=t))
        return pa.ListArray.from_arrays(offsets([v.shape[0] for v in vals]), inner)

    ei = [r["edge_index"] for r in rows]
    flat = np.concatenate([a.reshape(-1) for a in ei])
    sides = pa.ListArray.from_arrays(offsets(np.repeat([a.shape[1] for a in ei], 2)), pa.array(flat, type=pa.int64()))
    edge_index = pa.ListArray.from_arrays(offsets(np.full(len(rows), 2)), sides)
    ys = [r["y"] for r in rows]
    yt = pa.int64() if kinds["y"] == "i" else pa.float64()
    yflat = np.concatenate(ys).astype(np.int64 if kinds["y"] == "i" else np.float64)
    y = pa.ListArray.from_arrays(offsets([len(v) for v in ys]), pa.array(yflat, type=yt))
    cols = {"edge_index": edge_index, "num_nodes": pa.array([r["num_nodes"] for r in rows], type=pa.int64()), "y": y}
    for key in ("node_feat", "edge_attr"):
        m = matrix(key)
        if m is not None:
            cols[key] = m
    return pa.table(cols)


TASKS = ("auto", "class", "binary", "regression")


def write_shards(dataset: Iterable[Any], out, *, shardconv: Optional[str] = None, name: Optional[str] = None,
                 quiet: bool = True, workdir: Optional[str] = None, task: str = "auto", cutoff: float = 6.0,
                 neighbours: str = "ase", max_neighbors: int = 0, convert_args=()) -> pathlib.Path:
    """Write the graphs of ``dataset`` (a PyG dataset, or any iterable of
    ``Data`` or dicts with ``edge_index``, ``num_nodes`` or ``x``,
    optionally ``edge_attr``, and ``y``) as a shard folder at ``out``,
    through ``shardconv convert``; returns ``out``. Every graph must have
    the same kinds of columns as the first (integer or float ``x``,
    ``edge_attr`` and ``y``, the same widths). The Parquet table goes to a
    temporary folder (``workdir``, default the system's) and is removed
    after. ``task``: how ``y`` is read ("auto": the module's rule; "class",
    "binary" or "regression" to say it; a ``y`` that cannot be that task
    is refused). Raises :class:`ConvertError` with the converter's
    message.

    An iterable of ``ase.Atoms`` (anything ASE or fairchem reads:
    ``ase.io.iread``, an ``ase.db`` selection, fairchem's aselmdb) is
    written as 3D structures (shard format 4): each structure in extended
    XYZ as ``ase.io.write`` writes it (its calculator's results, info,
    arrays and FixAtoms), then converted with its neighbour list at
    ``cutoff`` Å in the ``neighbours`` convention ("ase" or "fairchem",
    with ``max_neighbors``); ``convert_args`` adds shardconv flags
    (``["--energy-key", "REF_energy"]``)."""
    import itertools

    if task not in TASKS:
        raise ValueError(f"augloader: task {task!r}: want one of {', '.join(TASKS)}")

    from .daemon import find_binary

    out = pathlib.Path(out)
    name = name or out.name.split(".")[0] or "graphs"
    exe = shardconv or find_binary("shardconv")
    it = iter(dataset)
    first = next(it, None)
    if first is not None and type(first).__name__ == "Atoms" and hasattr(first, "get_positions"):
        return _write_structures(itertools.chain([first], it), out, exe, name, quiet, workdir, cutoff, neighbours,
                                 max_neighbors, convert_args)
    return _write_graphs(itertools.chain([] if first is None else [first], it), out, exe, name, quiet, workdir, task)


def _write_graphs(dataset, out, exe, name, quiet, workdir, task):
    """Graphs to a Parquet table of ROW_GROUP rows a group, converted by
    shardconv."""
    import pyarrow.parquet as pq

    kinds: Optional[dict] = None
    one_d = True  # every y a 1-D (or scalar) integer label of one value: PyG's class
    with tempfile.TemporaryDirectory(prefix="augloader-write-", dir=workdir) as tmp:
        path = pathlib.Path(tmp) / f"{name}.parquet"
        writer = None
        rows: list = []
        count = 0
        decoded = 0  # what the table's values take decoded (Arrow bytes)

        def flush():
            nonlocal writer, rows, decoded
            if not rows:
                return
            t = _table(rows, kinds)
            decoded += t.nbytes
            if writer is None:
                writer = pq.ParquetWriter(str(path), t.schema, compression="zstd")
            elif not t.schema.equals(writer.schema):
                raise ValueError(f"graphs {count - len(rows)}..{count - 1} have columns {t.schema} "
                                 f"where the first graphs have {writer.schema}")
            writer.write_table(t, row_group_size=ROW_GROUP)
            rows = []

        try:
            for i, g in enumerate(dataset):
                r = _graph_row(g, i)
                kinds = _same_kinds(r, i, kinds)
                one_d = one_d and r.pop("y_ndim") <= 1 and r["y"].shape == (1,)
                rows.append(r)
                count += 1
                if len(rows) == ROW_GROUP:
                    flush()
            if count == 0:
                raise ValueError("no graphs to write")
            flush()
        finally:
            if writer is not None:
                writer.close()
        # The converter's bound on what an input may decode to guards
        # against files from elsewhere (a few KB of run-length-encoded
        # values can decode to gigabytes). This table was written here,
        # from values the caller already held in memory: the bound is its
        # own decoded size (twice, for the converter's Arrow types), so a
        # table of mostly-missing targets, which compresses far past the
        # default 100 times, is never taken for a bomb.
        ratio = min(max(100, -(-2 * decoded // max(path.stat().st_size, 1))), 1_000_000)
        if task == "auto" and one_d and kinds["y"] == "i":
            task = "class"  # PyG's convention: OGB's rule would make 0/1 labels binary targets
        cmd = [exe, "convert", *(["-q"] if quiet else []), "-i", str(path), "-o", str(out), "--name", name,
               "--max-expansion", str(ratio), "--task", task]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        if p.returncode != 0:
            raise ConvertError(_in_terms_of_the_dataset(p.stderr.strip(), path) or f"shardconv exited with status {p.returncode}")
    return out


def _write_structures(atoms, out, exe, name, quiet, workdir, cutoff, neighbours, max_neighbors, convert_args):
    """ase.Atoms to extended XYZ files (ase.io.write, 100,000 structures a
    file), converted by shardconv into format 4."""
    from ase.io import write

    with tempfile.TemporaryDirectory(prefix="augloader-write-", dir=workdir) as tmp:
        folder = pathlib.Path(tmp) / name
        folder.mkdir()
        count, f = 0, None
        try:
            for a in atoms:
                if count % 100_000 == 0:
                    if f is not None:
                        f.close()
                    f = open(folder / f"{name}-{count // 100_000:05d}.xyz", "w")
                write(f, a, format="extxyz")
                count += 1
        finally:
            if f is not None:
                f.close()
        if count == 0:
            raise ValueError("no structures to write")
        cmd = [exe, "convert", *(["-q"] if quiet else []), "-i", str(folder), "-o", str(out), "--name", name,
               "--cutoff", str(cutoff), "--neighbours", neighbours, *([f"--max-neighbors={max_neighbors}"] if max_neighbors else []),
               *[str(a) for a in convert_args]]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        if p.returncode != 0:
            raise ConvertError(p.stderr.strip() or f"shardconv exited with status {p.returncode}")
    return out


def _same_kinds(r: dict, i: int, kinds: Optional[dict]) -> dict:
    """The kinds (integer, float or absent) of graph i's x, edge_attr and
    y, which must be the first graph's (kinds; None for the first)."""
    k = {key: (None if r[key] is None else ("i" if r[key].dtype.kind in "iub" else "f"))
         for key in ("node_feat", "edge_attr", "y")}
    if kinds is not None and k != kinds:
        raise ValueError(f"graph {i}: columns {k}, the first graph's are {kinds} "
                         "(every graph needs the same kinds of x, edge_attr and y)")
    return k


def _in_terms_of_the_dataset(msg: str, table: pathlib.Path) -> str:
    """The converter's message about the temporary table, said of the
    graphs given: row N of the table is graph N-1 of the dataset."""
    import re

    for name in (str(table), table.name):  # a bare file is named by its base name
        msg = re.sub(r"(?<![\w/.-])" + re.escape(name) + r":(\d+):", lambda m: f"graph {int(m.group(1)) - 1} (dataset index):", msg)
        msg = msg.replace(name, "the graphs given")
    return msg
