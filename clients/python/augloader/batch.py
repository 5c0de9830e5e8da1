"""One training batch as numpy views of the Arrow record batch the daemon
sent: PyG's ``Batch`` fields (edge_index, batch, ptr, x, y) without a
per-graph Python loop."""
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
    x: Optional[np.ndarray]         # float32 [N, dim] dense features
    y: np.ndarray            # int32 [B]
    y_mix: np.ndarray        # int32 [B]
    y_q: np.ndarray          # float32 [B]: soft label q·onehot(y) + (1-q)·onehot(y_mix)
    padded: np.ndarray       # bool [B]
    feature_dim: int
    num_classes: int
    record: pa.RecordBatch   # the Arrow batch itself

    # The record batch message's SHA-256 (hex), when the stream was read
    # with digest=True over the socket.
    digest: Optional[str] = field(default=None, repr=False)
    _edge_index: Optional[np.ndarray] = field(default=None, repr=False)
    _policy: Optional[list] = field(default=None, repr=False)

    @property
    def num_graphs(self) -> int:
        return len(self.graph_id)

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

    def dense_x(self) -> np.ndarray:
        """Node features as a dense float32 matrix [N, dim]."""
        if self.x is not None:
            return self.x
        n = int(self.ptr[-1])
        if len(self.x_code) and (self.x_code.max() >= self.feature_dim or self.x_code.min() < 0
                                 or self.x_node.max() >= n or self.x_node.min() < 0):
            raise ValueError("augloader: feature codes or nodes out of range")
        out = np.zeros((n, self.feature_dim), dtype=np.float32)
        # (node, code) pairs are unique (a node's codes are merged by the
        # server), so plain fancy assignment is exact, and far faster than
        # np.add.at.
        out[self.x_node, self.x_code] = self.x_weight
        return out

    def soft_y(self) -> np.ndarray:
        """Label distributions [B, C] (one-hot for hard labels)."""
        b = self.num_graphs
        out = np.zeros((b, self.num_classes), dtype=np.float32)
        rows = np.arange(b)
        out[rows, self.y] = self.y_q
        out[rows, self.y_mix] += 1.0 - self.y_q  # rows are unique: += is exact, also when y == y_mix
        return out

    @classmethod
    def from_record_batch(cls, rb: pa.RecordBatch) -> "Batch":
        md = {k.decode(): v.decode() for k, v in (rb.schema.metadata or {}).items()}
        col = rb.column

        def values(name, dtype):
            return col(name).values.to_numpy(zero_copy_only=True).astype(dtype, copy=False)

        num_nodes = col("num_nodes").to_numpy(zero_copy_only=True)
        num_classes = int(md.get("augloader.classes", 0))
        y, y_mix, y_q = (col(c).to_numpy(zero_copy_only=True) for c in ("y", "y_mix", "y_q"))
        # Per-graph checks (a few values per graph, not per edge): a
        # damaged batch fails here rather than in the trainer.
        if len(num_nodes) and (num_nodes.min() < 0 or min(y.min(), y_mix.min()) < 0
                               or max(y.max(), y_mix.max()) >= num_classes
                               or not (np.all(y_q >= 0) and np.all(y_q <= 1))):
            raise ValueError("augloader: node counts or labels out of range")
        ptr = np.zeros(len(num_nodes) + 1, dtype=np.int64)
        np.cumsum(num_nodes, out=ptr[1:])
        names = rb.schema.names
        dense = "x" in names
        # Every node has a feature row (dense) or at least one code: the
        # node count is bounded by what was received, so a damaged count
        # cannot make the arrays below gigabytes.
        feature_dim = int(md.get("augloader.feature_dim", 0))
        nfeat = len(col("x").values) if dense else len(col("x_code").values)
        if (dense and nfeat != int(ptr[-1]) * feature_dim) or (not dense and nfeat < int(ptr[-1])):
            raise ValueError("augloader: node count does not match the features")
        return cls(
            graph_id=col("graph_id").to_numpy(zero_copy_only=True),
            num_nodes=num_nodes,
            ptr=ptr,
            batch=np.repeat(np.arange(len(num_nodes), dtype=np.int64), num_nodes),
            edge_src=values("edge_src", np.int32),
            edge_dst=values("edge_dst", np.int32),
            x_node=None if dense else values("x_node", np.int32),
            x_code=None if dense else values("x_code", np.int32),
            x_weight=None if dense else values("x_weight", np.float32),
            x=values("x", np.float32).reshape(int(ptr[-1]), -1) if dense else None,
            y=y,
            y_mix=y_mix,
            y_q=y_q,
            padded=col("padded").to_numpy(zero_copy_only=False),
            feature_dim=feature_dim,
            num_classes=num_classes,
            record=rb,
        )
