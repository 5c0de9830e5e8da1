"""A batch's tensors: ``to_tensors`` (the "pyg" and "codes" layouts, on
any device), ``twin_tensors``, :class:`CodeEmbedding`, and the reused
one-hot buffers of the CPU's dense x. Public through ``augloader.torch``."""
from __future__ import annotations

import sys
import warnings

import numpy as np
import torch
from torch.utils.data import get_worker_info

from . import Batch

# The batch's arrays are views of memory this process owns (the socket
# reader's buffers, or a shared-memory ring message leased to the batch
# until every view of it is gone), exposed read-only by pyarrow. Tensors
# are made over them without a copy, and torch warns that such an array
# "is not writable": writing into one changes only this batch.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

LAYOUTS = ("pyg", "codes")


def _view(a: np.ndarray) -> torch.Tensor:
    """A CPU tensor over a (contiguous) batch array: no copy; it keeps the
    batch's memory alive."""
    return torch.from_numpy(a)


def _long(a: np.ndarray, dev: torch.device, non_blocking: bool = False) -> torch.Tensor:
    """int64 tensor on dev; off the CPU the narrow data crosses the bus and
    is widened on the device."""
    if dev.type == "cpu":
        return torch.from_numpy(a.astype(np.int64))
    return _to(_view(a), dev, non_blocking).long()


def _to(t: torch.Tensor, dev: torch.device, non_blocking: bool) -> torch.Tensor:
    """t on dev; with non_blocking, through pinned memory so the copy
    overlaps (the prefetcher's side stream)."""
    if dev.type == "cpu":
        return t
    if non_blocking and dev.type == "cuda":
        return t.pin_memory().to(dev, non_blocking=True)
    return t.to(dev)


def _codes(a: np.ndarray, dev: torch.device, non_blocking: bool = False) -> torch.Tensor:
    """int64 tensor of categorical codes (uint8/uint16/int32 [rows, cols]),
    as _long: the narrow codes cross the bus, widened on the device."""
    if a.dtype == np.uint16:  # torch has no uint16 arithmetic on every version
        a = a.astype(np.int32)
    return _long(a, dev, non_blocking)


def _storage(t: torch.Tensor):
    """t's storage (untyped_storage from torch 2.0, storage before)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


class _OneHotBuffers:
    """The dense one-hot x of the pyg layout on the CPU, built in reused
    buffers at O(nonzeros) a batch.

    A fresh array of zeros per batch (COLLAB: 4.6 MB for about 2,400
    nonzeros) was most of what that layout cost the trainer: while the
    loop holds one batch and the next is built, the allocator hands the
    memory back to the kernel and faults it in again, zeroed, and the
    trainer paid twice the CPU of the codes layout. A buffer here is
    handed out as a view of its first rows and taken again only once torch
    says nothing refers to its memory (the storage's use count: no tensor,
    view or autograd saved tensor over it); then only the positions its
    last batch set are cleared. The version counter, which every view of
    the buffer shares, says whether anything wrote into it in place; such
    a buffer is cleared whole. Writes that bypass torch
    (``x.numpy()[...] = v``, or through ``x.data``) are not seen: do not
    write into a batch's x that way and then drop it.

    Where torch cannot say a storage's use count (before 2.x), the buffers
    are NumPy arrays handed out through ``torch.from_numpy``, whose storage
    holds a reference to the array while any tensor, view or autograd saved
    tensor uses it: a buffer is idle when only this class refers to it
    (``sys.getrefcount``). Without the version counter there, an idle
    buffer's last rows are cleared whole (a memset, still a third of the
    cost of fresh zeros, which the kernel faults in page by page).

    Safe by construction: reuse happens only in the process that consumes
    the tensor. In a DataLoader worker every batch gets a fresh array (the
    trainer reads it from shared memory after the worker has let go), and
    a buffer whose storage was moved to shared memory (sent to another
    process) leaves the pool."""

    _KEEP = 8  # the loop's batch, the prefetched ones, autograd's

    def __init__(self):
        import threading

        self._use_count = getattr(torch._C, "_storage_Use_Count", None)
        self._idle_count = None  # a buffer's use count when idle (_idle)
        self._lock = threading.Lock()
        # [flat float32 base (a tensor, or with no use count the NumPy
        # array), (dim, version, rows, flat positions set) of the last
        # batch written into it or None while all zeros, the array's
        # reference count when idle (NumPy mode), its elements]
        self._bufs: list = []

    @property
    def enabled(self) -> bool:
        return self._use_count is not None

    def _idle(self, e) -> bool:
        if not self.enabled:
            return sys.getrefcount(e[0]) == e[2]
        # What a buffer nothing else uses counts, measured on this torch:
        # the constant 2 this was written for (the base's reference and the
        # storage object made for the call) is 1 on torch 2.9, where it
        # handed out a buffer that a live view still used.
        if self._idle_count is None:
            t = torch.from_numpy(np.zeros(1, dtype=np.float32))
            self._idle_count = self._use_count(t.untyped_storage()._cdata)
        return self._use_count(e[0].untyped_storage()._cdata) == self._idle_count

    def _take(self, nelem: int, dim: int):
        """An idle buffer of at least nelem elements last written with
        rows of dim (or never), or a new one; claimed by the view returned
        beside it until the caller drops that view."""
        with self._lock:
            i = 0
            while i < len(self._bufs):
                e = self._bufs[i]
                if e[3] >= nelem and (e[1] is None or e[1][0] == dim) and self._idle(e):
                    # A buffer whose storage went to shared memory (a tensor
                    # over it was sent to another process, which may read it
                    # after this process let go) is never written again:
                    # dropped here.
                    if self.enabled and _storage(e[0]).is_shared():
                        del self._bufs[i]
                        continue
                    return e, e[0][:0]
                i += 1
            if len(self._bufs) >= self._KEEP:
                self._bufs.pop(0)  # the oldest goes; whoever holds it keeps it
            size = max(nelem + nelem // 4, 1 << 16)
            e = [np.zeros(size, dtype=np.float32), None, 0, size]
            if self.enabled:
                e[0] = torch.from_numpy(e[0])
            else:
                e[2] = sys.getrefcount(e[0])  # what "idle" counts: this entry's own reference
            self._bufs.append(e)
            return e, e[0][:0]

    def dense_x(self, b: Batch) -> torch.Tensor:
        n, dim = int(b.ptr[-1]), b.feature_dim
        node, code, w = b.x_node, b.x_code, b.x_weight
        # Reuse is safe only where the tensor is consumed. A DataLoader
        # worker's batches go to the trainer through shared memory, and
        # the worker cannot see when the trainer has read them (its own
        # references are gone as soon as the batch is sent): a fresh array
        # there, always.
        if n == 0 or dim == 0 or get_worker_info() is not None:
            return torch.from_numpy(b.dense_x())
        b.check_codes()
        e, claim = self._take(n * dim, dim)
        flat = e[0].numpy() if self.enabled else e[0]
        # Positions in the flat buffer, node·dim + code: one index array
        # for the write here and, kept, for the clearing when the buffer
        # is next taken (1-D indexing, a third of the 2-D's cost).
        at = node.astype(np.int64)
        at *= dim
        at += code
        if e[1] is not None:
            _, version, rows, last = e[1]
            # Written in place (or, without torch's version counter, maybe
            # so): clear all it handed out; else only what the batch set.
            if version is None or e[0]._version != version:
                flat[:rows * dim] = 0
            else:
                flat[last] = 0
        # (node, code) pairs are unique (a node's codes are merged by the
        # server): plain fancy assignment is exact.
        flat[at] = w
        if self.enabled:
            e[1] = (dim, e[0]._version, n, at)
            # A view of the base's first rows (one call: a third of slice
            # and view's cost), sharing its storage and version counter.
            x = e[0].as_strided((n, dim), (dim, 1))
        else:
            e[1] = (dim, None, n, None)
            x = torch.from_numpy(flat[:n * dim].reshape(n, dim))
        del claim
        return x


_ONE_HOT = _OneHotBuffers()
_CPU = torch.device("cpu")


def to_tensors(b: Batch, device="cpu", *, layout: str = "pyg", non_blocking: bool = False) -> dict:
    """Tensors of one batch, on ``device``.

    layout ``"pyg"`` (PyG's Batch fields): x is the int64 categorical node
    columns (AtomEncoder's input) when the set has them, else the float
    block, else the dense one-hot [N, feature_dim] (built on the device from
    the codes); edge_index int64 [2, 2|E|]; edge_attr the int64 categorical
    edge columns or the float edge features (x_dense and edge_x keep a
    float block beside codes); y the int64 class, or float32 [B, T] targets
    with NaN; y_soft the label distributions (SubMix's mixed labels).

    layout ``"codes"`` (compact): for one-hot node features, no dense x:
    x_code, x_node (int32) and x_weight (float32), node x_node's feature
    being the sum of x_weight·onehot(x_code); :class:`CodeEmbedding` turns
    them into one-hot × W, which is what a first Linear layer over the
    dense x computes, with an [N, hidden] result instead of an [N,
    feature_dim] input. x is then None. Other keys as for "pyg".

    On the CPU the int32 and float32 arrays are the batch's own memory (no
    copy: the tensors keep the batch alive); int64 widening allocates, and
    the dense one-hot x is written into a reused buffer (torch 2.x; taken
    again only once nothing refers to it, cleared at O(nonzeros)).
    Off the CPU the narrow arrays cross the bus and are widened there.
    non_blocking: host-to-device copies through pinned memory, not waited
    for (use on a side stream, as :class:`Prefetcher` does)."""
    if layout not in LAYOUTS:
        raise ValueError(f"augloader: layout {layout!r}: want one of {', '.join(LAYOUTS)}")
    dev = _CPU if device == "cpu" else torch.device(device)
    nb = non_blocking
    n = int(b.ptr[-1])
    out = {}
    x = _node_tensors(b, dev, nb, layout, out)
    edge_index = _edge_tensors(b, dev, nb, out)
    y, y_soft, soft = _label_tensors(b, dev, nb)
    return {
        **out,
        "x": x,
        "edge_index": edge_index,
        "batch": _to(torch.from_numpy(b.batch), dev, nb),
        "ptr": _to(torch.from_numpy(b.ptr), dev, nb),
        "y": y,
        "y_soft": y_soft,
        "soft": soft,
        "graph_id": _view(b.graph_id),
        "num_graphs": b.num_graphs,
        "num_nodes": n,
        "num_classes": b.num_classes,
        "padded": torch.from_numpy(b.padded),
        "twins": b.twins,
    }


def _node_tensors(b: Batch, dev: torch.device, nb: bool, layout: str, out: dict):
    """The batch's x (None under the codes layout of one-hot features);
    x_dense, or x_node, x_code, x_weight and feature_dim, go into out."""
    n = int(b.ptr[-1])
    if b.x_cat is not None:
        if b.x_float is not None:
            out["x_dense"] = _to(_view(np.ascontiguousarray(b.x_float)), dev, nb)
        return _codes(b.x_cat, dev, nb)
    if b.x_float is not None:
        return _to(_view(np.ascontiguousarray(b.x_float)), dev, nb)
    if b.x_code is None:
        return torch.zeros((n, 0), dtype=torch.float32, device=dev)
    if layout == "pyg" and dev.type == "cpu":
        return _ONE_HOT.dense_x(b)  # reused buffers, O(nonzeros) a batch
    node, code, weight = (_to(_view(a), dev, nb) for a in (b.x_node, b.x_code, b.x_weight))
    if layout == "codes":
        out.update(x_node=node, x_code=code, x_weight=weight, feature_dim=b.feature_dim)
        return None
    x = torch.zeros((n, b.feature_dim), dtype=torch.float32, device=dev)
    return x.index_put_((node.long(), code.long()), weight)  # (node, code) pairs are unique


def _edge_tensors(b: Batch, dev: torch.device, nb: bool, out: dict) -> torch.Tensor:
    """The batch's edge_index; edge_attr (with edge_x beside codes) go into
    out."""
    if dev.type == "cpu":
        edge_index = torch.from_numpy(b.edge_index)
    else:
        edge_index = torch.stack((_to(_view(b.edge_src), dev, nb), _to(_view(b.edge_dst), dev, nb))).long()
    if b.edge_cat is not None:
        out["edge_attr"] = _codes(b.edge_cat, dev, nb)
        if b.edge_x is not None:
            out["edge_x"] = _to(_view(b.edge_x), dev, nb)
    elif b.edge_x is not None:
        out["edge_attr"] = _to(_view(b.edge_x), dev, nb)
    return edge_index


def _label_tensors(b: Batch, dev: torch.device, nb: bool) -> tuple:
    """(y, y_soft, soft): classes and their distributions, or the targets
    twice for regression."""
    if b.task != "class":
        y = _to(_view(b.y), dev, nb)
        return y, y, False
    y = _long(b.y, dev, nb)
    # Hard labels (every q is 1) need no distribution: one-hot of y, built
    # where y is (on the CPU, rows of an identity matrix kept per class
    # count: one gather, a third of zeros and scatter_).
    if b.soft_labels:
        return y, _to(torch.from_numpy(b.soft_y()), dev, nb), True
    if dev.type == "cpu":
        return y, torch.from_numpy(_identity(b.num_classes)[b.y]), False
    return y, torch.zeros((len(b.y), b.num_classes), dtype=torch.float32, device=dev).scatter_(1, y.unsqueeze(1), 1.0), False


_IDENTITY: dict = {}


def _identity(classes: int) -> np.ndarray:
    """float32 [classes, classes] identity, made once per class count (its
    rows gathered are fresh arrays: the batch's y_soft is its own)."""
    eye = _IDENTITY.get(classes)
    if eye is None:
        eye = _IDENTITY[classes] = np.eye(classes, dtype=np.float32)
    return eye


def twin_tensors(b: Batch, device="cpu", *, layout: str = "pyg", non_blocking: bool = False) -> tuple:
    """One ``to_tensors`` dict per twin of a twin batch (docs/contrastive.md):
    graph i of every dict is the same graph, each twin its own augmented
    copy, node ids from 0. A plain batch gives a 1-tuple. (``to_tensors``
    of the whole batch is every twin at once, twins·n graphs, twin-major:
    one encoder pass, then split the pooled rows in k.)"""
    return tuple(to_tensors(tb, device, layout=layout, non_blocking=non_blocking) for tb in b.split_twins())


def _tensor_items(item):
    """The tensors of a to_tensors dict, or of a tuple of them."""
    for d in (item if isinstance(item, tuple) else (item,)):
        for v in d.values():
            if isinstance(v, torch.Tensor):
                yield v


class CodeEmbedding(torch.nn.Module):
    """one-hot(codes) × W without the one-hot: the first layer over a
    batch's compact layout (to_tensors(..., layout="codes")). Node v's
    row is Σ x_weight·W[x_code] over its (code, weight) pairs, exactly
    what ``Linear(feature_dim, dim, bias=False)`` gives on the dense x
    (W here is that layer's weight transposed)."""

    def __init__(self, num_codes: int, dim: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(num_codes, dim))
        torch.nn.init.kaiming_uniform_(self.weight.T, a=5 ** 0.5)  # Linear's own initialisation

    def forward(self, t: dict) -> torch.Tensor:
        code, node, w = t["x_code"], t["x_node"], t["x_weight"]
        rows = torch.nn.functional.embedding(code, self.weight) * w.unsqueeze(1)
        n = t["num_nodes"]
        if code.shape[0] == n:
            # One pair a node (every TU one-hot set unaugmented, and most
            # nodes under NodeSam): the pairs are in node order.
            return rows
        return torch.zeros((n, self.weight.shape[1]), dtype=rows.dtype, device=rows.device).index_add_(0, node, rows)
