"""PyTorch integration: an IterableDataset over an augloader epoch.

    from augloader.torch import AugloaderDataset
    ds = AugloaderDataset("unix:///tmp/aug.sock", device="cuda")
    for epoch in range(350):
        ds.set_epoch(epoch)            # like DistributedSampler.set_epoch
        for batch in ds:               # torch_geometric.data.Batch when PyG is installed,
            ...                        # else a dict of tensors (x, edge_index, batch, ptr, y, ...)

Rank and world size come from torch.distributed when it is initialised,
else from torchrun's environment (RANK, WORLD_SIZE), else 0 and 1, so
each process reads its own slice of one global epoch with no rank
arithmetic.
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

The module's parts: ``_tensors`` (to_tensors, the one-hot buffers,
CodeEmbedding), ``_ahead`` (Prefetcher and the background queue) and
``_dataset`` (AugloaderDataset and its state); every public name is here.
"""
from __future__ import annotations

from ._ahead import Prefetcher
from ._dataset import (COMMITS, AugloaderDataset, PyGBatch, dataset_state, merge_states,
                       save_atomic)
from ._tensors import _ONE_HOT, LAYOUTS, CodeEmbedding, to_tensors, twin_tensors

__all__ = ["AugloaderDataset", "CodeEmbedding", "Prefetcher", "to_tensors", "twin_tensors", "save_atomic",
           "dataset_state", "merge_states", "LAYOUTS", "COMMITS", "PyGBatch", "_ONE_HOT"]
