"""PyTorch integration: an IterableDataset over an augloader epoch.

    from augloader.torch import AugloaderDataset
    ds = AugloaderDataset("unix:///tmp/aug.sock", device="cuda")
    for epoch in range(350):
        ds.set_epoch(epoch)            # like DistributedSampler.set_epoch
        for batch in ds:               # torch_geometric.data.Batch when PyG is installed,
            ...                        # else a dict of tensors (x, edge_index, batch, ptr, y, ...)

Rank and world size come from torch.distributed when it is initialised
(else 0 and 1), so each process reads its own slice of one global epoch.
The dense one-hot ``x`` is built from the sparse codes on the target device;
``layout="codes"`` skips it: x_code, x_node and x_weight instead, for
:class:`CodeEmbedding` (one-hot × W without the one-hot). Use it with ``DataLoader(ds, batch_size=None)``; the daemon already batches.

Under ``DataLoader(ds, batch_size=None, num_workers=N)`` worker w reads the
rank's batches w, w+N, w+2N, … (the request's stride): every batch arrives
exactly once, and in order, since the DataLoader takes one item from each
worker in turn. ``set_epoch`` reaches persistent workers too (the epoch
lives in memory shared with them).

``state_dict()`` / ``load_state_dict()`` checkpoint the position in the
epoch, exactly at the same world size and elastically at another
(docs/checkpoint.md); ``augloader.lightning`` has a LightningDataModule.

Without a DataLoader, :class:`Prefetcher` makes the next batches' tensors
on a background thread (on CUDA, pinned copies on a side stream), so the
training loop does not wait for them.
"""
from __future__ import annotations

import json
import sys
import warnings
from typing import Optional

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import Batch, ServerError, _state, _wire, connect
from ._multi import put_unless_stopped

try:  # optional
    from torch_geometric.data import Batch as PyGBatch  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    PyGBatch = None

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
        # array), (dim, version, rows, nodes, codes) of the last batch
        # written into it or None while all zeros, the array's reference
        # count when idle (NumPy mode)]
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
            # A buffer whose storage went to shared memory (a tensor over it
            # was sent to another process, which may read it after this
            # process let go) is never written again: dropped here.
            if self.enabled:
                self._bufs = [e for e in self._bufs if not _storage(e[0]).is_shared()]
            for e in self._bufs:
                if len(e[0]) >= nelem and (e[1] is None or e[1][0] == dim) and self._idle(e):
                    return e, e[0][:0]
            if len(self._bufs) >= self._KEEP:
                self._bufs.pop(0)  # the oldest goes; whoever holds it keeps it
            e = [np.zeros(max(nelem + nelem // 4, 1 << 16), dtype=np.float32), None, 0]
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
        if e[1] is not None:
            _, version, rows, nodes, codes = e[1]
            # Written in place (or, without torch's version counter, maybe
            # so): clear all it handed out; else only what the batch set.
            if version is None or e[0]._version != version:
                flat[:rows * dim] = 0
            else:
                flat[:rows * dim].reshape(rows, dim)[nodes, codes] = 0
        # (node, code) pairs are unique (a node's codes are merged by the
        # server): plain fancy assignment is exact.
        flat[:n * dim].reshape(n, dim)[node, code] = w
        if self.enabled:
            e[1] = (dim, e[0]._version, n, node.copy(), code.copy())
            x = e[0][:n * dim].view(n, dim)
        else:
            e[1] = (dim, None, n, None, None)
            x = torch.from_numpy(flat[:n * dim].reshape(n, dim))
        del claim
        return x


_ONE_HOT = _OneHotBuffers()


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
    dev = torch.device(device)
    nb = non_blocking
    n = int(b.ptr[-1])
    out = {}
    if b.x_cat is not None:
        x = _codes(b.x_cat, dev, nb)
        if b.x_float is not None:
            out["x_dense"] = _to(_view(np.ascontiguousarray(b.x_float)), dev, nb)
    elif b.x_float is not None:
        x = _to(_view(np.ascontiguousarray(b.x_float)), dev, nb)
    elif b.x_code is None:
        x = torch.zeros((n, 0), dtype=torch.float32, device=dev)
    else:
        node, code, weight = (_to(_view(a), dev, nb) for a in (b.x_node, b.x_code, b.x_weight))
        if layout == "codes":
            x = None
            out.update(x_node=node, x_code=code, x_weight=weight, feature_dim=b.feature_dim)
        elif dev.type == "cpu":
            x = _ONE_HOT.dense_x(b)  # reused buffers, O(nonzeros) a batch
        else:
            x = torch.zeros((n, b.feature_dim), dtype=torch.float32, device=dev)
            x.index_put_((node.long(), code.long()), weight)  # (node, code) pairs are unique
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
    if b.task == "class":
        y = _long(b.y, dev, nb)
        # Hard labels (every q is 1) need no distribution: one-hot of y,
        # built where y is.
        soft = bool(len(b.y_q)) and bool(b.y_q.min() < 1)
        if soft:
            y_soft = _to(torch.from_numpy(b.soft_y()), dev, nb)
        else:
            y_soft = torch.zeros((len(b.y), b.num_classes), dtype=torch.float32, device=dev).scatter_(1, y.unsqueeze(1), 1.0)
    else:
        y = y_soft = _to(_view(b.y), dev, nb)
        soft = False
    ptr = torch.from_numpy(b.ptr)
    return {
        **out,
        "x": x,
        "edge_index": edge_index,
        "batch": _to(torch.from_numpy(b.batch), dev, nb),
        "ptr": _to(ptr, dev, nb),
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


class Prefetcher:
    """Iterates ``to_tensors(b, device, ...)`` of a stream's batches (of a
    twin stream: ``twin_tensors``, a tuple of one dict per twin), made
    ``depth`` batches ahead on a background thread, so the training loop
    finds each batch ready: receiving, decoding and (on CUDA) the pinned
    host-to-device copies, issued on a side stream, overlap the step. The
    order is the stream's. An error in the stream is raised where the
    loop would have met it.

        for t in Prefetcher(client.epoch(e), "cuda", layout="codes"):
            loss = step(t)
    """

    def __init__(self, batches, device="cpu", *, layout: str = "pyg", depth: int = 2):
        if depth < 1:
            raise ValueError("augloader: Prefetcher depth must be at least 1")
        self.device, self.layout = torch.device(device), layout
        self.wait_s = 0.0  # time the consumer spent waiting for a batch
        cuda = self.device.type == "cuda"
        self._stream = torch.cuda.Stream(self.device) if cuda else None
        self._ahead = _Ahead(self._made(iter(batches)), depth, "augloader-prefetch")

    def _made(self, it):
        """(tensors, CUDA event or None) of each batch, on the thread."""
        for b in it:
            if self._stream is not None:
                with torch.cuda.stream(self._stream):
                    t = self._tensors(b, non_blocking=True)
                    ev = torch.cuda.Event()
                    ev.record(self._stream)
                yield t, ev
            else:
                yield self._tensors(b), None

    def _tensors(self, b: Batch, non_blocking: bool = False):
        if b.twins > 1:
            return twin_tensors(b, self.device, layout=self.layout, non_blocking=non_blocking)
        return to_tensors(b, self.device, layout=self.layout, non_blocking=non_blocking)

    def __iter__(self):
        import time
        it = iter(self._ahead)
        while True:
            t0 = time.perf_counter()
            try:
                item, ev = next(it)
            except StopIteration:
                return
            finally:
                self.wait_s += time.perf_counter() - t0
            if ev is not None:
                torch.cuda.current_stream(self.device).wait_event(ev)
                for v in _tensor_items(item):
                    if v.device.type == "cuda":
                        v.record_stream(torch.cuda.current_stream(self.device))
            yield item

    def close(self):
        self._ahead.close()

    def __del__(self):
        if hasattr(self, "_ahead"):
            self._ahead._stop.set()  # no waiting inside a collection


class _Ahead:
    """items made up to depth ahead on a background thread, started now;
    iterating gives them in order, and an error the thread met is raised
    where the consumer meets it. Leaving the iteration (or close()) stops
    the thread and waits for it to finish the item in hand: a thread left
    inside torch or pyarrow when the interpreter exits aborts it.
    Prefetcher's and AugloaderDataset(prefetch=N)'s."""

    _END = object()
    _JOIN_S = 5.0  # a stream stalled mid-batch does not hold the consumer longer

    def __init__(self, items, depth: int, name: str):
        import queue
        import threading

        self._q: "queue.Queue" = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(items,), daemon=True, name=name)
        self._thread.start()

    def _run(self, items):
        try:
            for it in items:
                if not put_unless_stopped(self._q, (it, None), self._stop):
                    return
            put_unless_stopped(self._q, (self._END, None), self._stop)
        except BaseException as e:  # handed to the consumer
            put_unless_stopped(self._q, (self._END, e), self._stop)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # a stream's connection goes now, not at its collection

    def __iter__(self):
        try:
            while True:
                it, err = self._q.get()
                if err is not None:
                    raise err
                if it is self._END:
                    return
                yield it
        finally:
            self.close()

    def close(self):
        import threading

        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(self._JOIN_S)


def save_atomic(obj, path) -> None:
    """torch.save(obj) to path so that a crash never leaves a partial
    file there: written beside it, flushed to disk, then renamed over it."""
    import os

    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    d = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(d)
    finally:
        os.close(d)


def dataset_state(loader_state) -> dict:
    """The dataset's own state from a torchdata StatefulDataLoader's (0
    or K workers): loaded into an AugloaderDataset, it continues under any
    number of workers (torchdata itself reloads a loader with K workers
    only), or, merged with the other ranks', at another world size."""
    return _state.from_loader(loader_state)


def merge_states(states) -> dict:
    """One state from the per-rank states of one step (each rank's own
    ``state_dict()``, saved apart): what a resume at another world size
    needs. See docs/checkpoint.md."""
    return _state.merge(states)


class _SharedEpoch:
    """The dataset's epoch, and whether DataLoader workers iterated it, in
    memory shared with the workers: ``set_epoch`` in the main process
    reaches persistent workers, which keep their copy of the dataset.
    Shared with a worker process as it starts (fork, or pickled while
    spawning it); any other copy (deepcopy, torch.save) gets its own."""

    def __init__(self, values=(0, 0), weights=()):
        import multiprocessing

        # The epoch is a uint64 (as on the wire), checked before it is
        # stored: ctypes would wrap 2**64 to 0 silently.
        self._a = multiprocessing.RawArray("Q", 2)
        self._a[:] = list(values)
        # The twin weights (JOAO's, set per epoch): a count, then the weights.
        self._w = multiprocessing.RawArray("d", 1 + _wire.MAX_TWIN_SETS)
        self.twin_weights = list(weights)

    def __getstate__(self):
        from multiprocessing import context

        if context.get_spawning_popen() is not None:
            return {"shared": self._a, "shared_weights": self._w}
        return {"values": list(self._a), "weights": self.twin_weights}

    def __setstate__(self, st):
        if "shared" in st:
            self._a, self._w = st["shared"], st["shared_weights"]
        else:
            self.__init__(st["values"], st.get("weights", ()))

    @property
    def twin_weights(self) -> list:
        return list(self._w[1:1 + int(self._w[0])])

    @twin_weights.setter
    def twin_weights(self, w) -> None:
        w = [float(x) for x in w]
        self._w[0] = 0  # a reader mid-write sees none rather than half
        self._w[1:1 + len(w)] = w
        self._w[0] = len(w)

    @property
    def epoch(self) -> int:
        return int(self._a[0])

    @epoch.setter
    def epoch(self, e: int) -> None:
        self._a[0] = _wire.check_epoch(e)

    @property
    def workers(self) -> bool:
        return bool(self._a[1])

    def mark_workers(self) -> None:
        self._a[1] = 1


COMMITS = ("yield", "manual")


def _worker(info) -> Optional[tuple]:
    """(id, num_workers) of a DataLoader worker's get_worker_info(), or None."""
    return (info.id, info.num_workers) if info is not None else None


class AugloaderDataset(IterableDataset):
    """One epoch of one rank per iteration; call set_epoch between epochs.

    ``state_dict()`` / ``load_state_dict()`` save and restore the position
    in the epoch (docs/checkpoint.md): a small plain dict that counts only
    the batches the trainer received (``commit="yield"``: a batch counts
    once the iteration handed it out; ``commit="manual"``: once
    :meth:`commit` is called with it, for a consumer that fetches ahead, as
    Lightning does). Loaded at the same world size, the next iteration
    continues where the state was taken, byte for byte; at another world
    size (a state taken on every rank: ``state_dict`` gathers the ranks'
    positions under ``torch.distributed``, a collective like FSDP's), the
    graphs no rank received are spread over the new ranks, each with the
    bytes it would have had. It works inside torchdata's
    ``StatefulDataLoader`` (0 workers, or K workers loaded again with K) and
    as a ``Stateful`` of ``torch.distributed.checkpoint``.

    ``prefetch=N`` makes the next N batches' tensors on a background thread
    while the loop works (as :class:`Prefetcher` does for a stream); they
    count in the state only once handed out."""

    def __init__(self, url: str, *, token: Optional[str] = None, batch_size: int = 0,
                 rank: Optional[int] = None, world: Optional[int] = None, device="cpu", pyg: Optional[bool] = None,
                 view: str = "", fold: int = 0, batches_per_epoch: int = 0, drop_last: bool = False,
                 digest: bool = False, layout: str = "pyg", commit: str = "yield", prefetch: int = 0,
                 twins: int = 0, twin_weights=None):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"augloader: layout {layout!r}: want one of {', '.join(LAYOUTS)}")
        if commit not in COMMITS:
            raise ValueError(f"augloader: commit {commit!r}: want one of {', '.join(COMMITS)}")
        if prefetch < 0:
            raise ValueError("augloader: prefetch must be at least 0")
        self.layout, self.commit_mode, self.prefetch = layout, commit, int(prefetch)
        self.url, self.token, self.batch_size, self.device = url, token, batch_size, device
        self.view, self.fold, self.batches_per_epoch, self.drop_last = view, fold, batches_per_epoch, drop_last
        self.digest = digest
        twin_weights = _wire.twin_weights(twin_weights)
        _wire.check_twins(twins, twin_weights)
        self.twins = twins
        if rank is None or world is None:
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
            else:
                rank, world = 0, 1
        self.rank, self.world = rank, world
        self._shared = _SharedEpoch(weights=twin_weights or ())
        self.pyg = (PyGBatch is not None) if pyg is None else pyg
        self.last_stream = None
        self.config: Optional[dict] = None  # the daemon's identity, from the last stream
        # A loaded state: the rank's position it gives (_state.begin), for
        # the next iteration of its epoch, and its identity, checked
        # against the next stream whatever its epoch.
        self._loaded: Optional[_state.Progress] = None
        self._expect: Optional[dict] = None
        self._progress: Optional[_state.Progress] = None  # the current (or last) iteration's, as committed
        self._pending: list = []  # commit="manual": (batch_index, graphs) handed out, not yet committed

    @property
    def epoch(self) -> int:
        return self._shared.epoch

    @epoch.setter
    def epoch(self, e: int) -> None:
        self._shared.epoch = e

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration reads (every DataLoader worker,
        persistent ones included). A loaded state of another epoch is
        dropped, with a warning."""
        epoch = _wire.check_epoch(epoch)
        if self._loaded is not None and self._loaded.epoch != epoch:
            # A state at its epoch's end moving to the next epoch drops nothing.
            if not (self.loaded_epoch_done and epoch == self._loaded.epoch + 1):
                warnings.warn(f"augloader: set_epoch({epoch}) after loading a state of epoch {self._loaded.epoch}: the saved "
                              f"position is dropped and epoch {epoch} starts at its first batch", stacklevel=2)
            self._loaded = None
        if self._progress is not None and self._progress.epoch != epoch:
            self._progress = None
        self.epoch = epoch

    @property
    def loaded_epoch_done(self) -> bool:
        """Whether a loaded state, not yet iterated, is at its epoch's end
        (every batch of the rank's epoch received): the next epoch is the
        one to read."""
        p = self._loaded
        return p is not None and p.worker is None and p.total is not None and p.own()[0] >= p.total

    @property
    def twin_weights(self) -> list:
        """The twin sets' weights the next iteration asks for ([]: equal)."""
        return self._shared.twin_weights

    def set_twin_weights(self, weights) -> None:
        """JOAO's per-epoch choice: the relative probabilities of the
        daemon's twin sets (one a set, in the order declared; None or []:
        equal) for the next iteration, persistent DataLoader workers
        included. Part of the request a state records."""
        w = _wire.twin_weights(weights) or []
        _wire.check_twins(self.twins, w)
        self._shared.twin_weights = w

    def _request(self) -> dict:
        w = self._shared.twin_weights
        return {"view": self.view, "fold": self.fold, "batch_size": self.batch_size,
                "batches_per_epoch": self.batches_per_epoch, "drop_last": self.drop_last,
                "twins": self.twins, "twin_weights": json.dumps(w) if w else ""}

    # ---------------------------------------------------------- state

    def state_dict(self) -> dict:
        """The position in the epoch, counting the batches received (see the
        class). Under torch.distributed with several ranks, a collective:
        call it on every rank (torch.distributed.checkpoint does). Right
        after ``load_state_dict`` it is the loaded position as this rank
        continues it (the same computation the next iteration starts
        from)."""
        info = get_worker_info()
        if info is None and self._shared.workers:
            raise RuntimeError("augloader: this dataset is iterated by DataLoader workers, which fetch ahead: its own state "
                               "cannot say which batches the trainer received. Take the loader's state "
                               "(torchdata's StatefulDataLoader.state_dict()), or iterate the dataset without a "
                               "DataLoader (the daemon batches)")
        if self._progress is not None and self._progress.epoch == self.epoch:
            p = self._progress
        else:
            p = self._start(_worker(info))[1]
        if p.config is None:
            # Before any stream: the daemon's identity, so that the state
            # can be checked wherever it is loaded.
            p.config = self.config = self._identity()
        if info is None:
            p = self._gather(p)
        return p.to_dict()

    def _start(self, worker: Optional[tuple]):
        """(plan, progress) of an iteration that starts now, in worker
        (w, K) or None: from the loaded position when it is this epoch's,
        else the epoch's first batch."""
        start = self._loaded if self._loaded is not None and self._loaded.epoch == self.epoch else None
        pl = _state.plan(start, worker)
        prog = _state.Progress(self.epoch, self.world, self.rank, self._request(), phases=list(pl.phases),
                               ranks={self.rank: list(pl.base)}, total=start.total if start is not None else None,
                               worker=[worker[0], worker[1], *pl.done] if worker is not None else None,
                               config=(start.config if start is not None else None) or self.config)
        return pl, prog

    def _identity(self) -> dict:
        """The daemon's identity, asked for with a one-batch request."""
        stream = connect(self.url, token=self.token).epoch(self.epoch, count=1, **self._kw())
        try:
            return _state.check_identity(stream.info.get("config"), f"the daemon at {self.url}")
        finally:
            stream.close()

    def _gather(self, p: "_state.Progress") -> "_state.Progress":
        """p with every rank's position, under torch.distributed."""
        dist = torch.distributed
        if self.world == 1 or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() != self.world:
            return p
        entries = [None] * self.world
        dist.all_gather_object(entries, _state.entry(p))
        return _state.gathered(p, entries)

    def load_state_dict(self, state: dict) -> None:
        """Continue where state was taken, at the next iteration of its
        epoch (the epoch is set to it). All or nothing: a damaged or edited
        state, one without the daemon's identity, or one saved by another
        request (view, fold, batch size, …) is refused here, naming the
        field, and the dataset is left as it was; one saved against
        another configuration is refused before the next stream's first
        batch (whatever its epoch), naming the settings that differ."""
        p = _state.parse(state)
        request = self._request()
        if p.request["twins"] == self.twins and self.twins:
            # The epoch's twin weights are the state's (as its epoch is):
            # JOAO's distribution when it was saved.
            request["twin_weights"] = p.request["twin_weights"]
        _state.check_request(p, request)
        info = get_worker_info()
        start = _state.begin(p, self.world, self.rank)
        _state.plan(start, _worker(info))  # refuses a worker's state in another worker, now
        # Nothing refused: commit every change at once.
        if p.request["twins"] == self.twins and self.twins:
            self._shared.twin_weights = json.loads(p.request["twin_weights"]) if p.request["twin_weights"] else []
        self._loaded, self._progress, self._pending = start, None, []
        self._expect = self.config = p.config
        if info is None:
            self.epoch = p.epoch

    def commit(self, batch) -> None:
        """commit="manual": the trainer received batch (and every batch
        handed out before it); the state counts it from now on."""
        if self.commit_mode != "manual":
            raise RuntimeError("augloader: commit() is for a dataset made with commit='manual'")
        if isinstance(batch, tuple) and batch:  # a twin batch: its twins share the index
            batch = batch[0]
        index = batch["batch_index"] if isinstance(batch, dict) else getattr(batch, "batch_index", None)
        for i, (idx, _) in enumerate(self._pending):
            if idx == index:
                for _, graphs in self._pending[:i + 1]:
                    self._advance(self._progress, graphs)
                del self._pending[:i + 1]
                return
        raise ValueError(f"augloader: commit of batch {index}, not one handed out and uncommitted")

    def _advance(self, p: "_state.Progress", graphs: int) -> None:
        """One more batch of graphs received: the worker's own count in a
        DataLoader worker, else the rank's."""
        if p.worker is not None:
            p.worker[2] += 1
            p.worker[3] += graphs
        else:
            p.ranks[self.rank][0] += 1
            p.ranks[self.rank][1] += graphs

    # ---------------------------------------------------------- iteration

    def _kw(self) -> dict:
        return dict(rank=self.rank, world=self.world, batch_size=self.batch_size, view=self.view, fold=self.fold,
                    batches_per_epoch=self.batches_per_epoch, drop_last=self.drop_last, twins=self.twins,
                    twin_weights=self._shared.twin_weights or None)

    def _open(self, epoch: int, pl: "_state.Plan", start: Optional["_state.Progress"]):
        """The stream of this iteration, checked: a loaded identity against
        the daemon's, a loaded total against the daemon's count. Asked even
        when the state says the epoch is done (an empty tail), so that a
        state from an epoch's end is checked as one from its middle."""
        client = connect(self.url, token=self.token)
        expect = self._expect
        try:
            stream = client.epoch(epoch, start_batch=pl.start, stride=pl.stride, resume=pl.phases or None,
                                  digest=self.digest, **self._kw())
        except ServerError as e:
            if start is None or e.code != "out_of_range":
                raise
            # Past the rank's last batch: a worker whose next batch is past
            # it has none left; anything else is another daemon's state.
            probe = client.epoch(epoch, start_batch=0, count=1, resume=pl.phases or None, **self._kw())
            probe.close()
            if expect is not None:
                _state.check_config(expect, probe.info.get("config"))
            total = probe.info.get("total_batches")
            if isinstance(total, int) and pl.base[0] <= total < pl.start:
                stream = client.epoch(epoch, start_batch=total, resume=pl.phases or None, digest=self.digest, **self._kw())
            else:
                raise _state.StateError(f"augloader: the daemon cannot resume epoch {epoch} where the state says "
                                        f"(start batch {pl.start}, resume {pl.phases}): {e}") from e
        try:
            if expect is not None:
                _state.check_config(expect, stream.info.get("config"))
                self._expect = None
            total = stream.info.get("total_batches")
            if start is not None and start.total is not None and total != start.total:
                raise _state.StateError(f"augloader: the state says rank {self.rank}'s epoch {epoch} has {start.total} "
                                        f"batches, the daemon serves {total}: an edited state, or another daemon's")
        except BaseException:
            stream.close()
            raise
        return stream

    def __iter__(self):
        # One DataLoader worker reads every num_workers-th batch of the rank.
        info = get_worker_info()
        worker = _worker(info)
        if info is not None:
            self._shared.mark_workers()
        epoch = self.epoch
        if self._loaded is not None and self._loaded.epoch != epoch:
            warnings.warn(f"augloader: epoch {epoch} iterated after loading a state of epoch {self._loaded.epoch}: the saved "
                          f"position is dropped")
            self._loaded = None
        pl, prog = self._start(worker)
        start, self._loaded = self._loaded, None
        self._progress, self._pending = prog, []
        stream = self._open(epoch, pl, start)
        self.config = prog.config = stream.info.get("config")
        prog.total = stream.info.get("total_batches")
        self.last_stream = stream
        start, stride = pl.start, pl.stride

        def one(t, index, i):
            t["batch_index"] = index  # the batch's index in the rank's epoch (phase)
            if self.digest:
                t["digest"] = stream.batch_digests[i]
            if self.pyg and PyGBatch is not None:
                extra = {k: t[k] for k in ("edge_attr", "x_dense", "edge_x", "x_code", "x_node", "x_weight") if k in t}
                # y as the dict's "y" or "y_soft": int64 [B] classes with
                # hard labels, float32 [B, C] distributions under SubMix's
                # mixed labels (README, "What a batch holds"). padded marks
                # the repeats that fill the last rank's batches: mask them
                # out of loss and accuracy.
                out = PyGBatch(x=t["x"], edge_index=t["edge_index"], batch=t["batch"], ptr=t["ptr"],
                               y=t["y_soft"] if t["soft"] else t["y"], padded=t["padded"], graph_id=t["graph_id"],
                               **extra)
                out._num_graphs = t["num_graphs"]
                out.batch_index = index
                out.num_classes = t["num_classes"]
                return out
            return t

        def made():
            for i, b in enumerate(stream):
                index = start + i * stride
                if self.twins:
                    # A tuple of the batch's twins, graph i of each the same graph.
                    out = tuple(one(t, index, i) for t in twin_tensors(b, self.device, layout=self.layout))
                else:
                    out = one(to_tensors(b, self.device, layout=self.layout), index, i)
                yield out, index, b.graphs_per_twin

        ahead = _Ahead(made(), self.prefetch, "augloader-dataset-ahead") if self.prefetch else None
        try:
            for out, index, graphs in (ahead if ahead is not None else made()):
                # Counted as received when handed out (or when committed):
                # never while it waits in the prefetch queue.
                if self.commit_mode == "yield":
                    self._advance(prog, graphs)
                else:
                    self._pending.append((index, graphs))
                yield out
        finally:
            if ahead is not None:
                ahead.close()

