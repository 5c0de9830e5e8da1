"""The trainer's-edge oracle: what a training step must receive, decoded
from the daemon's bytes independently of the client.

``reference(sock, **request)`` opens its own Unix-socket conversation
(docs/protocol.md: a 12-byte frame header and a JSON body each way),
reads the Arrow IPC stream with pyarrow's own stream reader and decodes
every record batch with NumPy alone into the tensors' expected values.
``check(got, want, where)`` compares what a path delivered (a
``to_tensors`` dict or a PyG ``Batch``) with them, exactly. Nothing here
imports ``augloader``: a bug in the client cannot hide in its own decode.
"""
from __future__ import annotations

import json
import socket
import struct

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

_HEADER = struct.Struct("<4sBBHI")


def _read(f, n: int) -> bytes:
    b = f.read(n)
    assert len(b) == n, "connection closed early"
    return b


def _frame(f, magic: bytes) -> dict:
    m, version, status, reserved, n = _HEADER.unpack(_read(f, _HEADER.size))
    body = json.loads(_read(f, n))
    assert (m, version, status, reserved) == (magic, 1, 0, 0), body
    return body


def reference(sock: str, **request) -> list:
    """The expected values of every batch of one request, in order: a dict
    a batch, or for a twin stream a list of one dict a twin."""
    body = json.dumps({"rank": 0, "world": 1, **request}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(sock))
        s.sendall(_HEADER.pack(b"AUGQ", 1, 0, 0, len(body)) + body)
        f = s.makefile("rb")
        _frame(f, b"AUGR")
        reader = ipc.open_stream(f)
        md = {k.decode(): v.decode() for k, v in reader.schema.metadata.items()}
        batches = list(reader)
        trailer = _frame(f, b"AUGT")
        assert trailer["batches"] == len(batches), trailer
    twins = int(md.get("augloader.twins", "1"))
    vocab = lambda k: [int(v) for v in md.get(k, "").split(",") if v]  # noqa: E731
    meta = {"feature_dim": int(md["augloader.feature_dim"]), "classes": int(md["augloader.classes"]),
            "node_vocab": vocab("augloader.node_vocab"), "edge_vocab": vocab("augloader.edge_vocab"),
            "targets": int(md.get("augloader.targets", "0"))}
    out = []
    for rb in batches:
        n = rb.num_rows // twins
        nodes = np.asarray(rb.column("num_nodes")).astype(np.int64)
        per = [_decode(rb.slice(t * n, n), meta, int(nodes[:t * n].sum())) for t in range(twins)]
        out.append(per if twins > 1 else per[0])
    return out


def _flat(rb: pa.RecordBatch, name: str) -> np.ndarray:
    """The values of a list column for rb's rows (of a slice: its rows' only)."""
    col = rb.column(name)
    off = np.asarray(col.offsets)
    return np.asarray(col.values)[off[0]:off[-1]]


def _decode(rb: pa.RecordBatch, meta: dict, base: int) -> dict:
    """One batch's expected fields, every one a to_tensors dict carries
    (docs/protocol.md's columns; README, "What a batch holds"), as NumPy
    arrays of the dtypes the trainer is promised, plus x_onehot for
    one-hot features (the "pyg" layout's dense x, where the "codes" layout
    has x None and the compact triple; ``expected`` picks). base is the
    batch-global id of rb's first node (a later twin's rows in a twin
    batch), so ids start at 0."""
    names = rb.schema.names
    nodes = np.asarray(rb.column("num_nodes")).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(nodes)]).astype(np.int64)
    n, b = int(ptr[-1]), len(nodes)
    src, dst = (_flat(rb, c).astype(np.int64) - base for c in ("edge_src", "edge_dst"))
    e = len(src)
    want = {"graph_id": np.asarray(rb.column("graph_id")).astype(np.int64), "ptr": ptr,
            "batch": np.repeat(np.arange(b, dtype=np.int64), nodes),
            "padded": np.asarray(rb.column("padded").to_pylist(), dtype=bool),
            "edge_index": np.stack([src, dst]), "num_graphs": b, "num_nodes": n,
            "num_classes": meta["classes"], "twins": 1}
    # Nodes: categorical columns (int64 codes) with any float block beside
    # them as x_dense; else the float block; else one-hot codes (dense x,
    # or the compact triple); else no features.
    if "x_cat" in names:
        want["x"] = _flat(rb, "x_cat").astype(np.int64).reshape(n, len(meta["node_vocab"]))
        if "x" in names:
            want["x_dense"] = _flat(rb, "x").astype(np.float32).reshape(n, -1)
    elif "x" in names:
        want["x"] = _flat(rb, "x").astype(np.float32).reshape(n, -1)
    elif "x_code" in names:
        node = _flat(rb, "x_node").astype(np.int32) - np.int32(base)
        code = _flat(rb, "x_code").astype(np.int32)
        weight = _flat(rb, "x_weight").astype(np.float32)
        x = np.zeros((n, meta["feature_dim"]), dtype=np.float32)
        np.add.at(x, (node, code), weight)
        want.update(x_onehot=x, x_node=node, x_code=code, x_weight=weight, feature_dim=meta["feature_dim"])
    else:
        want["x"] = np.zeros((n, 0), dtype=np.float32)
    # Edges: categorical columns as edge_attr (a float block beside them as
    # edge_x), or the float block as edge_attr.
    if "edge_cat" in names:
        want["edge_attr"] = _flat(rb, "edge_cat").astype(np.int64).reshape(e, len(meta["edge_vocab"]))
        if "edge_x" in names:
            want["edge_x"] = _flat(rb, "edge_x").astype(np.float32).reshape(e, -1)
    elif "edge_x" in names:
        want["edge_attr"] = _flat(rb, "edge_x").astype(np.float32).reshape(e, -1)
    # Labels: a class task's class and distribution (SubMix's mix), or
    # float targets [B, T] (NaN where missing), which y_soft repeats.
    if "targets" in names:
        t = _flat(rb, "targets").astype(np.float32).reshape(b, meta["targets"])
        want.update(y=t, y_soft=t, soft=False)
        return want
    y = np.asarray(rb.column("y")).astype(np.int64)
    q = np.asarray(rb.column("y_q")).astype(np.float32)
    mix = np.asarray(rb.column("y_mix")).astype(np.int64)
    soft = np.zeros((b, meta["classes"]), dtype=np.float32)
    rows = np.arange(b)
    soft[rows, y] += q
    soft[rows, mix] += 1 - q
    want.update(y=y, y_soft=soft, soft=bool((q < 1).any()))
    return want


def _np(v):
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def _same(a, b) -> bool:
    """Exact equality of a delivered value and an expected one: arrays by
    dtype, shape and every element (NaN equal to NaN where missing
    targets are), scalars by value and kind."""
    if isinstance(b, np.ndarray):
        a = _np(a)
        nan = b.dtype.kind == "f"
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan)
    return type(a) is type(b) and a == b


# What the dataset adds to a batch beside the decode: its index in the
# rank's epoch, and the stream's digest of it when asked.
_DATASET = {"batch_index", "digest"}


def expected(want: dict, layout: str = "pyg") -> dict:
    """want as a to_tensors dict of layout holds it: every key, its value."""
    out = {k: v for k, v in want.items() if k != "x_onehot"}
    if "x_onehot" in want:
        if layout == "codes":
            out["x"] = None
        else:
            out["x"] = want["x_onehot"]
            for k in ("x_node", "x_code", "x_weight", "feature_dim"):
                del out[k]
    return out


def check(got, want: dict, where: str, layout: str = "pyg") -> None:
    """Asserts that got (a to_tensors dict or a PyG Batch) holds exactly
    want's fields, every one of them and nothing else the oracle does not
    know; where names the batch in the failure."""
    exp = expected(want, layout)
    if isinstance(got, dict):
        keys = set(got) - _DATASET
        assert keys == set(exp), f"{where}: fields {sorted(keys)}, the oracle knows {sorted(exp)}"
        for k, v in exp.items():
            ok = got[k] is None if v is None else _same(got[k], v)
            assert ok, f"{where}: {k} differs from the daemon's bytes"
        return
    # A PyG Batch: its store holds the tensors (y is the distributions
    # when a label is mixed) and num_classes; num_graphs is a property.
    keys = set(got.keys() if callable(got.keys) else got.keys) - _DATASET
    pyg = {k: v for k, v in exp.items() if isinstance(v, np.ndarray) and k != "y_soft"}
    pyg["y"] = exp["y_soft"] if exp["soft"] else exp["y"]
    pyg["num_classes"] = exp["num_classes"]  # an attribute PyG keeps in the store
    assert keys == set(pyg), f"{where}: PyG Batch fields {sorted(keys)}, the oracle knows {sorted(pyg)}"
    for k, v in pyg.items():
        assert _same(getattr(got, k), v), f"{where}: {k} differs from the daemon's bytes"
    assert got.num_graphs == exp["num_graphs"], f"{where}: num_graphs differs"


def graph_digests(t) -> list:
    """(graph id, padded, digest of its content) for each graph of a batch
    (a to_tensors dict, or one of reference()'s): its edges with node ids
    from 0, its one-hot rows and its label distribution, so a graph's
    digest does not depend on the batch it came in."""
    import hashlib

    ptr, ei, ys = (_np(t[k]) for k in ("ptr", "edge_index", "y_soft"))
    x = _np(t["x_onehot"] if "x_onehot" in t else t["x"])
    gid, padded = _np(t["graph_id"]), _np(t["padded"])
    owner = np.repeat(np.arange(len(gid)), np.diff(ptr))[ei[0]] if ei.shape[1] else np.zeros(0, dtype=np.int64)
    out = []
    for i in range(len(gid)):
        a, b = int(ptr[i]), int(ptr[i + 1])
        h = hashlib.sha256()
        for part in (np.ascontiguousarray(ei[:, owner == i] - a, dtype=np.int64), np.ascontiguousarray(x[a:b]),
                     np.ascontiguousarray(ys[i], dtype=np.float32)):
            h.update(part.tobytes())
        out.append((int(gid[i]), bool(padded[i]), h.hexdigest()))
    return out
