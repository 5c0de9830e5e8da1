"""One training batch as numpy views of the Arrow record batch the daemon
sent: PyG's ``Batch`` fields (edge_index, batch, ptr, x, edge_attr, y)
without a per-graph Python loop.

Two kinds of data arrive (docs/protocol.md, "Batch schema"): TU sets with a
one-hot node feature (x_node, x_code, x_weight; ``dense_x()``) or a float
block (x), a class per graph (y, y_mix, y_q); and molecule/OGB sets with
categorical node and edge columns (x_cat, edge_cat: codes, what OGB's
AtomEncoder and BondEncoder take), float blocks (x, edge_x) and, for
multi-task binary or regression sets, T float targets per graph (y, NaN
where missing). TU sets with edge labels (MUTAG, PTC_MR) carry them as one
categorical edge column."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pyarrow as pa

__all__ = ["Batch"]


@dataclass
class Batch:
    """One training batch. Arrays are views of Arrow buffers where possible."""

    graph_id: np.ndarray     # int64 [B]
    num_nodes: np.ndarray    # int32 [B]
    ptr: np.ndarray          # int64 [B+1]
    batch: np.ndarray        # int64 [N]
    edge_src: np.ndarray     # int32 [2|E|] batch-global source of each directed edge (Arrow view)
    edge_dst: np.ndarray     # int32 [2|E|] its target (Arrow view)
    x_node: Optional[np.ndarray]    # int32 [K] categorical features: node of each (code, weight)
    x_code: Optional[np.ndarray]    # int32 [K]
    x_weight: Optional[np.ndarray]  # float32 [K]
    x_float: Optional[np.ndarray]   # float32 [N, dim] the float node block, as received (PyG's x is the ``x`` property)
    y: np.ndarray            # int32 [B] (class task) or float32 [B, T] targets, NaN where missing
    y_mix: Optional[np.ndarray]  # int32 [B] (class task)
    y_q: Optional[np.ndarray]    # float32 [B]: soft label q·onehot(y) + (1-q)·onehot(y_mix)
    padded: np.ndarray       # bool [B]
    feature_dim: int
    num_classes: int
    record: pa.RecordBatch   # the Arrow batch itself
    # Batch schema 2 (molecules, OGB; TU edge labels): codes at their
    # stored width (uint8, uint16 or int32 views), floats as float32 views.
    x_cat: Optional[np.ndarray] = None     # [N, F] categorical node columns
    edge_cat: Optional[np.ndarray] = None  # [2|E|, K] categorical edge columns, row i: edge (edge_src[i], edge_dst[i])
    edge_x: Optional[np.ndarray] = None    # float32 [2|E|, D] float edge features
    task: str = "class"                    # class, binary or regression
    node_vocab: tuple = ()                 # vocabulary size of each x_cat column (the size: attrmask's reserved code)
    edge_vocab: tuple = ()                 # of each edge_cat column (the edge fill's reserved code is the size)
    edge_fill: tuple = ()                  # the fill code of each edge_cat column
    # A twin stream's batch holds each of its graphs once per twin,
    # twin-major (docs/protocol.md, "Twins"): rows t·n … t·n+n−1 are twin
    # t's, graph i of every twin the same graph. The whole batch is itself
    # a valid batch of twins·n graphs (one encoder pass over every twin);
    # twin(t) is one twin's own batch.
    twins: int = 1

    # The record batch message's SHA-256 (hex), when the stream was read
    # with digest=True over the socket.
    digest: Optional[str] = field(default=None, repr=False)
    _x: Optional[np.ndarray] = field(default=None, repr=False)
    _edge_index: Optional[np.ndarray] = field(default=None, repr=False)
    _policy: Optional[list] = field(default=None, repr=False)
    # Whether any graph's label is mixed (a q below 1), found by the
    # label check; None: not known yet (soft_labels finds it).
    _soft: Optional[bool] = field(default=None, repr=False)

    @property
    def num_graphs(self) -> int:
        """Rows: graphs × twins in a twin batch (graphs_per_twin: each once)."""
        return len(self.graph_id)

    @property
    def graphs_per_twin(self) -> int:
        """The batch's distinct graphs: num_graphs // twins."""
        return len(self.graph_id) // self.twins

    def twin(self, t: int) -> "Batch":
        """Twin t's batch: its n graphs (graph i the same graph as graph i
        of every other twin), node ids from 0, numpy slices of this batch's
        arrays (node and edge ids shifted, a copy; the rest views)."""
        if not 0 <= t < self.twins:
            raise IndexError(f"augloader: twin {t} of a batch of {self.twins}")
        if self.twins == 1:
            return self
        n = self.graphs_per_twin
        r0, r1 = t * n, (t + 1) * n
        n0, n1 = int(self.ptr[r0]), int(self.ptr[r1])
        rb = self.record
        eo = rb.column("edge_src").offsets.to_numpy(zero_copy_only=False)
        e0, e1 = int(eo[r0]), int(eo[r1])  # offsets index .values, the whole child array
        x_node = x_code = x_weight = None
        if self.x_code is not None:
            ko = rb.column("x_code").offsets.to_numpy(zero_copy_only=False)
            k0, k1 = int(ko[r0]), int(ko[r1])
            x_node, x_code, x_weight = self.x_node[k0:k1] - n0, self.x_code[k0:k1], self.x_weight[k0:k1]
        rows = slice(r0, r1)
        return Batch(
            graph_id=self.graph_id[rows], num_nodes=self.num_nodes[rows], ptr=self.ptr[r0:r1 + 1] - n0,
            batch=self.batch[n0:n1] - r0, edge_src=self.edge_src[e0:e1] - n0, edge_dst=self.edge_dst[e0:e1] - n0,
            x_node=x_node, x_code=x_code, x_weight=x_weight,
            x_float=None if self.x_float is None else self.x_float[n0:n1],
            y=self.y[rows], y_mix=None if self.y_mix is None else self.y_mix[rows],
            y_q=None if self.y_q is None else self.y_q[rows], padded=self.padded[rows],
            feature_dim=self.feature_dim, num_classes=self.num_classes, record=rb.slice(r0, n),
            x_cat=None if self.x_cat is None else self.x_cat[n0:n1],
            edge_cat=None if self.edge_cat is None else self.edge_cat[e0:e1],
            edge_x=None if self.edge_x is None else self.edge_x[e0:e1],
            task=self.task, node_vocab=self.node_vocab, edge_vocab=self.edge_vocab, edge_fill=self.edge_fill)

    def split_twins(self) -> list:
        """[twin(0), …, twin(twins-1)]; [self] for a plain batch."""
        return [self.twin(t) for t in range(self.twins)]

    @property
    def policy(self) -> list:
        """The policy applied to each graph, str [B] (built on first use:
        Python strings cost more than the rest of a batch's decoding)."""
        if self._policy is None:
            self._policy = self.record.column("policy").to_pylist()
        return self._policy

    @property
    def edge_index(self) -> np.ndarray:
        """int64 [2, 2|E|] (PyG's edge_index), built once from the int32 views."""
        if self._edge_index is None:
            ei = np.empty((2, len(self.edge_src)), dtype=np.int64)
            ei[0] = self.edge_src
            ei[1] = self.edge_dst
            self._edge_index = ei
        return self._edge_index

    @property
    def edge_attr(self) -> Optional[np.ndarray]:
        """PyG's edge_attr [2|E|, K]: the categorical edge columns as int64
        (BondEncoder's input) when the edges have any, else the float
        edge features; None without edge features."""
        if self.edge_cat is not None:
            return self.edge_cat.astype(np.int64)
        return self.edge_x

    @property
    def x(self) -> np.ndarray:
        """PyG's x, for every kind of set (built once, on first use): the
        categorical node columns as int64 [N, F] (a molecule's atoms,
        AtomEncoder's input) when the nodes have any, else the float block
        [N, D], else the one-hot features [N, feature_dim] (dense_x())."""
        if self._x is None:
            self._x = self.x_cat.astype(np.int64) if self.x_cat is not None else self.dense_x()
        return self._x

    def node_x(self) -> np.ndarray:
        """The ``x`` property (what earlier releases called it)."""
        return self.x

    @property
    def num_node_features(self) -> int:
        """x's width, without building x (PyG's name): the categorical
        columns (each embedded by its vocabulary, node_vocab), the float
        block's width, or the one-hot feature_dim."""
        if self.x_cat is not None:
            return self.x_cat.shape[1]
        if self.x_float is not None:
            return self.x_float.shape[1]
        return self.feature_dim

    @property
    def num_edge_features(self) -> int:
        """edge_attr's width: categorical edge columns (edge_vocab), else
        float edge features, else 0 (PyG's name)."""
        if self.edge_cat is not None:
            return self.edge_cat.shape[1]
        return 0 if self.edge_x is None else self.edge_x.shape[1]

    @property
    def num_targets(self) -> int:
        """T, the targets of a binary or regression task (0 for a class task)."""
        return 0 if self.task == "class" else self.y.shape[1]

    @property
    def num_outputs(self) -> int:
        """What a model's head outputs, for every kind of set: num_classes
        for a class task, num_targets for binary or regression targets."""
        return self.num_classes if self.task == "class" else self.num_targets

    def dense_x(self) -> np.ndarray:
        """Node features as a dense float32 matrix [N, dim]: the float
        block, or the one-hot features (their mixes for merged nodes)."""
        if self.x_float is not None:
            return self.x_float
        n = int(self.ptr[-1])
        if self.x_code is None:  # no node features
            return np.zeros((n, 0), dtype=np.float32)
        self.check_codes()
        out = np.zeros((n, self.feature_dim), dtype=np.float32)
        # (node, code) pairs are unique (a node's codes are merged by the
        # server), so plain fancy assignment is exact, and far faster than
        # np.add.at.
        out[self.x_node, self.x_code] = self.x_weight
        return out

    def check_codes(self) -> None:
        """Raises ValueError unless every (node, code) pair of the one-hot
        features lies inside the [N, feature_dim] matrix they stand for."""
        n = int(self.ptr[-1])
        # As uint32 a negative value is 2**31 or more: one max a column.
        if len(self.x_code) and (_umax(self.x_code) >= self.feature_dim or _umax(self.x_node) >= n):
            raise ValueError("augloader: feature codes or nodes out of range")

    @property
    def soft_labels(self) -> bool:
        """Whether any graph's label is mixed (SubMix: a q below 1), so
        that soft_y is not simply one-hot of y; False for targets."""
        if self._soft is None:
            self._soft = self.task == "class" and bool(len(self.y_q)) and bool(_MIN(self.y_q) < 1)
        return self._soft

    def soft_y(self) -> np.ndarray:
        """Label distributions [B, C] (one-hot for hard labels); for float
        targets, the targets themselves [B, T]."""
        if self.task != "class":
            return self.y
        b = self.num_graphs
        out = np.zeros((b, self.num_classes), dtype=np.float32)
        rows = np.arange(b)
        out[rows, self.y] = self.y_q
        out[rows, self.y_mix] += 1.0 - self.y_q  # rows are unique: += is exact, also when y == y_mix
        return out

    @classmethod
    def from_record_batch(cls, rb: pa.RecordBatch, info: Optional[dict] = None) -> "Batch":
        """The Batch over rb, a record batch of a checked stream; info: its
        schema's ``_wire.schema_info`` (parsed once per stream by the
        reader; the schema's column names are kept in it, under
        "_columns"), else parsed from rb's schema."""
        if info is None:
            from ._wire import schema_info_of
            info = schema_info_of(rb.schema)
        col = rb.column
        # The column names, once per stream (every batch of a stream has
        # its schema).
        names = info.get("_columns")
        if names is None:
            names = info["_columns"] = frozenset(rb.schema.names)
        num_nodes = col("num_nodes").to_numpy(zero_copy_only=True)
        b = len(num_nodes)
        twins = info.get("twins", 1)
        if b % twins:
            raise ValueError(f"augloader: {b} rows in a batch of {twins} twins")
        # (ufunc reductions: ndarray.min() goes through a Python wrapper
        # that costs as much again on arrays this small.)
        if b and _MIN(num_nodes) < 0:
            raise ValueError("augloader: node counts out of range")
        y, y_mix, y_q, soft = _labels(rb, info, b)
        ptr = np.zeros(b + 1, dtype=np.int64)
        np.add.accumulate(num_nodes, dtype=np.int64, out=ptr[1:])
        n = int(ptr[-1])
        x_float, x_node, x_code, x_weight, x_cat = _node_features(rb, names, info, n)
        edge_src = _values(rb, "edge_src", np.int32)
        edge_cat, edge_x = _edge_features(rb, info, len(edge_src))
        return cls(
            graph_id=col("graph_id").to_numpy(zero_copy_only=True),
            num_nodes=num_nodes,
            ptr=ptr,
            batch=np.repeat(np.arange(b, dtype=np.int64), num_nodes),
            edge_src=edge_src,
            edge_dst=_values(rb, "edge_dst", np.int32),
            x_node=x_node,
            x_code=x_code,
            x_weight=x_weight,
            x_float=x_float,
            y=y,
            y_mix=y_mix,
            y_q=y_q,
            padded=col("padded").to_numpy(zero_copy_only=False),
            feature_dim=info["feature_dim"],
            num_classes=info["classes"],
            record=rb,
            x_cat=x_cat,
            edge_cat=edge_cat,
            edge_x=edge_x,
            task=info["task"],
            node_vocab=tuple(info["node_vocab"]),
            edge_vocab=tuple(info["edge_vocab"]),
            edge_fill=tuple(info["edge_fill"]),
            twins=twins,
            _soft=soft,
        )


def _values(rb: pa.RecordBatch, name: str, dtype=None) -> np.ndarray:
    """A list column's values, a view of the Arrow buffer (cast to dtype
    when it is another)."""
    v = rb.column(name).values.to_numpy(zero_copy_only=True)
    return v if dtype is None else v.astype(dtype, copy=False)


def _node_features(rb: pa.RecordBatch, names, info: dict, n: int) -> tuple:
    """(x_float, x_node, x_code, x_weight, x_cat) of a batch of n nodes,
    checked against n: every node has a feature row or at least one code,
    so the node count is bounded by what was received, and a damaged count
    cannot make the arrays built from it gigabytes."""
    feature_dim = info["feature_dim"]
    x_float = x_node = x_code = x_weight = x_cat = None
    if "x" in names:
        x_float = _values(rb, "x", np.float32)
        if len(x_float) != n * feature_dim:
            raise ValueError("augloader: node count does not match the features")
        x_float = x_float.reshape(n, -1)
    if "x_code" in names:
        x_code = _values(rb, "x_code", np.int32)
        if len(x_code) < n:
            raise ValueError("augloader: node count does not match the features")
        x_node, x_weight = _values(rb, "x_node", np.int32), _values(rb, "x_weight", np.float32)
    if info["node_vocab"]:
        # A column's size is its reserved code (attrmask's mask).
        x_cat = _categorical(_values(rb, "x_cat"), n, info["node_vocab"], "node")
    if x_float is None and x_code is None and x_cat is None and n > (1 << 26):
        raise ValueError(f"augloader: {n} nodes without features")
    return x_float, x_node, x_code, x_weight, x_cat


def _edge_features(rb: pa.RecordBatch, info: dict, ne: int) -> tuple:
    """(edge_cat, edge_x) of a batch of ne directed edges, checked."""
    edge_cat = edge_x = None
    if info["edge_vocab"]:
        # The fill's reserved code is the vocabulary size.
        edge_cat = _categorical(_values(rb, "edge_cat"), ne, info["edge_vocab"], "edge")
    if info["edge_dense"]:
        d = info["edge_dense"]
        edge_x = _values(rb, "edge_x", np.float32)
        if len(edge_x) != ne * d:
            raise ValueError(f"augloader: {len(edge_x)} edge values for {ne} edges × {d}")
        edge_x = edge_x.reshape(ne, d)
    return edge_cat, edge_x


def _labels(rb: pa.RecordBatch, info: dict, b: int) -> tuple:
    """(y, y_mix, y_q, soft) of a classification batch's b graphs, checked,
    soft whether any q is below 1 (a mixed label); a regression batch's
    targets [b, T] as y (y_mix, y_q None, soft False)."""
    col = rb.column
    if info["targets"]:
        t = info["targets"]
        targets = _values(rb, "targets")
        if len(targets) != b * t:
            raise ValueError(f"augloader: {len(targets)} targets for {b} graphs × {t}")
        return targets.reshape(b, t), None, None, False
    y = col("y").to_numpy(zero_copy_only=True)
    y_mix = col("y_mix").to_numpy(zero_copy_only=True)
    y_q = col("y_q").to_numpy(zero_copy_only=True)
    if not b:
        return y, y_mix, y_q, False
    # Per-graph checks (a few values per graph, not per edge): a damaged
    # batch fails here rather than in the trainer.
    # (A NaN q fails both comparisons: its min or max is NaN.)
    q_min = _MIN(y_q)
    if max(_umax(y), _umax(y_mix)) >= info["classes"] or not (q_min >= 0 and _MAX(y_q) <= 1):
        raise ValueError("augloader: labels out of range")
    return y, y_mix, y_q, bool(q_min < 1)


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def _umax(a: np.ndarray) -> int:
    """The largest value of an int32 array read as uint32: at least 2**31
    when any value is negative, so one comparison checks both ends."""
    return int(_MAX(a.view(np.uint32)))


def _categorical(codes: np.ndarray, rows: int, vocab, what: str) -> np.ndarray:
    """codes [rows, len(vocab)] of a node or edge categorical block, each
    column's codes at most its vocabulary's size (its reserved code)."""
    f = len(vocab)
    if len(codes) != rows * f:
        raise ValueError(f"augloader: {len(codes)} {what} codes for {rows} {what}s × {f} columns")
    codes = codes.reshape(rows, f)
    if rows and np.any(codes.max(axis=0) > np.asarray(vocab)):
        raise ValueError(f"augloader: {what} codes out of their vocabularies")
    return codes
