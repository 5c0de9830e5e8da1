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
    meta = {"feature_dim": int(md["augloader.feature_dim"]), "classes": int(md["augloader.classes"])}
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
    """One batch's expected tensors; base is the batch-global id of rb's
    first node (a later twin's rows in a twin batch), so ids start at 0."""
    nodes = np.asarray(rb.column("num_nodes")).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(nodes)]).astype(np.int64)
    n = int(ptr[-1])
    src, dst = (_flat(rb, c).astype(np.int64) - base for c in ("edge_src", "edge_dst"))
    want = {"graph_id": np.asarray(rb.column("graph_id")).astype(np.int64), "ptr": ptr,
            "batch": np.repeat(np.arange(len(nodes), dtype=np.int64), nodes),
            "padded": np.asarray(rb.column("padded").to_pylist(), dtype=bool),
            "edge_index": np.stack([src, dst])}
    if "x_code" in rb.schema.names:
        node = _flat(rb, "x_node").astype(np.int64) - base
        code = _flat(rb, "x_code").astype(np.int64)
        weight = _flat(rb, "x_weight").astype(np.float32)
        x = np.zeros((n, meta["feature_dim"]), dtype=np.float32)
        np.add.at(x, (node, code), weight)
        want.update(x=x, x_node=node, x_code=code, x_weight=weight)
    y = np.asarray(rb.column("y")).astype(np.int64)
    q = np.asarray(rb.column("y_q")).astype(np.float32)
    mix = np.asarray(rb.column("y_mix")).astype(np.int64)
    soft = np.zeros((len(y), meta["classes"]), dtype=np.float32)
    rows = np.arange(len(y))
    soft[rows, y] += q
    soft[rows, mix] += 1 - q
    want.update(y=y, y_soft=soft, soft=bool((q < 1).any()), num_classes=meta["classes"])
    return want


def _np(v):
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    return np.asarray(v)


def check(got, want: dict, where: str, layout: str = "pyg") -> None:
    """Asserts that got (a to_tensors dict or a PyG Batch) holds exactly
    want's values; where names the batch in the failure."""
    get = (lambda k: got[k]) if isinstance(got, dict) else (lambda k: getattr(got, k))
    fields = ["edge_index", "batch", "ptr", "graph_id", "padded"]
    fields += ["x"] if layout == "pyg" else ["x_node", "x_code", "x_weight"]
    for k in fields:
        a, b = _np(get(k)), want[k]
        assert a.shape == b.shape and np.array_equal(a, b), f"{where}: {k} differs from the daemon's bytes"
    if isinstance(got, dict):
        assert np.array_equal(_np(got["y"]), want["y"]), f"{where}: y differs from the daemon's bytes"
        assert np.array_equal(_np(got["y_soft"]), want["y_soft"]), f"{where}: y_soft differs from the daemon's bytes"
    else:  # a PyG Batch: y is the distributions when any label is mixed
        y = want["y_soft"] if want["soft"] else want["y"]
        assert np.array_equal(_np(got.y), y), f"{where}: y differs from the daemon's bytes"
        assert got.num_classes == want["num_classes"], f"{where}: num_classes differs"


def graph_digests(t) -> list:
    """(graph id, padded, digest of its content) for each graph of a batch
    (a to_tensors dict, or one of reference()'s): its edges with node ids
    from 0, its one-hot rows and its label distribution, so a graph's
    digest does not depend on the batch it came in."""
    import hashlib

    ptr, ei, x, ys = (_np(t[k]) for k in ("ptr", "edge_index", "x", "y_soft"))
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
