"""PyTorch integration: an IterableDataset over an augloader epoch.

    from augloader.torch import AugloaderDataset
    ds = AugloaderDataset("unix:///tmp/aug.sock", device="cuda")
    for epoch in range(350):
        ds.set_epoch(epoch)            # like DistributedSampler.set_epoch
        for batch in ds:               # torch_geometric.data.Batch when PyG is installed,
            ...                        # else a dict of tensors (x, edge_index, batch, ptr, y, ...)

Rank and world size come from torch.distributed when it is initialised
(else 0 and 1), so each process reads its own slice of one global epoch.
The dense one-hot ``x`` is built from the sparse codes on the target device.
Use it with ``DataLoader(ds, batch_size=None)``; the daemon already batches.

Under ``DataLoader(ds, batch_size=None, num_workers=N)`` worker w reads the
rank's batches w, w+N, w+2N, … (the request's stride): every batch arrives
exactly once, and in order, since the DataLoader takes one item from each
worker in turn. Workers are made anew each epoch by default; with
``persistent_workers=True`` a worker keeps the epoch it was started with,
so keep them non-persistent (or make a dataset per epoch).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import Batch, connect

try:  # optional
    from torch_geometric.data import Batch as PyGBatch  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    PyGBatch = None


def _long(a: np.ndarray, dev: torch.device) -> torch.Tensor:
    """int64 tensor on dev; off the CPU the int32 data crosses the bus and is
    widened on the device."""
    if dev.type == "cpu":
        return torch.from_numpy(a.astype(np.int64))
    return torch.from_numpy(a.copy()).to(dev).long()  # copy: Arrow memory is read-only


def _codes(a: np.ndarray, dev: torch.device) -> torch.Tensor:
    """int64 tensor of categorical codes (uint8/uint16/int32 [rows, cols]),
    as _long: the narrow codes cross the bus, widened on the device."""
    if a.dtype == np.uint16:  # torch has no uint16 arithmetic on every version
        a = a.astype(np.int32)
    return _long(a, dev)


def to_tensors(b: Batch, device="cpu") -> dict:
    """Tensors of one batch: x (the int64 categorical node columns, AtomEncoder's
    input, when the set has them; else the float block or the dense one-hot
    built on device), the int64 edge_index built on device from the int32
    views, edge_attr (int64 categorical edge columns or float edge
    features, when the set has them; x_dense and edge_x keep a float block
    beside codes), and y (int64 class, or float32 [B, T] targets with NaN)."""
    dev = torch.device(device)
    n = int(b.ptr[-1])
    out = {}
    if b.x_cat is not None:
        x = _codes(b.x_cat, dev)
        if b.x is not None:
            out["x_dense"] = torch.from_numpy(np.ascontiguousarray(b.x)).to(dev)
    elif b.x is not None:
        x = torch.from_numpy(np.ascontiguousarray(b.x)).to(dev)
    elif b.x_code is None:
        x = torch.zeros((n, 0), dtype=torch.float32, device=dev)
    else:
        x = torch.zeros((n, b.feature_dim), dtype=torch.float32, device=dev)
        idx = (_long(b.x_node, dev), _long(b.x_code, dev))
        x.index_put_(idx, torch.from_numpy(b.x_weight.copy()).to(dev))  # (node, code) pairs are unique
    if dev.type == "cpu":
        edge_index = torch.from_numpy(b.edge_index)
    else:
        # Half the bytes cross the bus: one int32 [2, E] host copy (the
        # Arrow views are read-only), widened on the device.
        edge_index = torch.from_numpy(np.stack((b.edge_src, b.edge_dst))).to(dev).long()
    if b.edge_cat is not None:
        out["edge_attr"] = _codes(b.edge_cat, dev)
        if b.edge_x is not None:
            out["edge_x"] = torch.from_numpy(b.edge_x.copy()).to(dev)
    elif b.edge_x is not None:
        out["edge_attr"] = torch.from_numpy(b.edge_x.copy()).to(dev)
    if b.task == "class":
        y = torch.from_numpy(b.y.astype(np.int64)).to(dev)
        y_soft = torch.from_numpy(b.soft_y()).to(dev)
        soft = bool((b.y_q < 1).any())
    else:
        y = y_soft = torch.from_numpy(b.y.copy()).to(dev)
        soft = False
    return {
        **out,
        "x": x,
        "edge_index": edge_index,
        "batch": torch.from_numpy(b.batch).to(dev),
        "ptr": torch.from_numpy(b.ptr).to(dev),
        "y": y,
        "y_soft": y_soft,
        "soft": soft,
        "graph_id": torch.from_numpy(b.graph_id.copy()),
        "num_graphs": b.num_graphs,
        "padded": torch.from_numpy(b.padded.copy()),
    }


class AugloaderDataset(IterableDataset):
    """One epoch of one rank per iteration; call set_epoch between epochs."""

    def __init__(self, url: str, *, token: Optional[str] = None, batch_size: int = 0,
                 rank: Optional[int] = None, world: Optional[int] = None, device="cpu", pyg: Optional[bool] = None,
                 view: str = "", fold: int = 0, batches_per_epoch: int = 0, drop_last: bool = False,
                 digest: bool = False):
        super().__init__()
        self.url, self.token, self.batch_size, self.device = url, token, batch_size, device
        self.view, self.fold, self.batches_per_epoch, self.drop_last = view, fold, batches_per_epoch, drop_last
        self.digest = digest
        if rank is None or world is None:
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
            else:
                rank, world = 0, 1
        self.rank, self.world = rank, world
        self.epoch = 0
        self.pyg = (PyGBatch is not None) if pyg is None else pyg
        self.last_stream = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        # One DataLoader worker reads every num_workers-th batch of the rank.
        info = get_worker_info()
        start, stride = (info.id, info.num_workers) if info is not None else (0, 1)
        client = connect(self.url, token=self.token)
        stream = client.epoch(self.epoch, rank=self.rank, world=self.world, batch_size=self.batch_size,
                              start_batch=start, stride=stride, view=self.view, fold=self.fold,
                              batches_per_epoch=self.batches_per_epoch, drop_last=self.drop_last, digest=self.digest)
        self.last_stream = stream
        for i, b in enumerate(stream):
            t = to_tensors(b, self.device)
            t["batch_index"] = start + i * stride  # the batch's index in the rank's epoch
            if self.digest:
                t["digest"] = stream.batch_digests[i]
            if self.pyg and PyGBatch is not None:
                extra = {k: t[k] for k in ("edge_attr", "x_dense", "edge_x") if k in t}
                out = PyGBatch(x=t["x"], edge_index=t["edge_index"], batch=t["batch"], ptr=t["ptr"],
                               y=t["y_soft"] if t["soft"] else t["y"], **extra)
                out._num_graphs = t["num_graphs"]
                out.batch_index = t["batch_index"]
                yield out
            else:
                yield t
