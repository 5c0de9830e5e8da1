"""Tensors made ahead on a background thread: :class:`Prefetcher` over a
stream, and ``_Ahead``, the queue it and ``AugloaderDataset(prefetch=N)``
share. Public through ``augloader.torch``."""
from __future__ import annotations

import torch

from . import Batch
from ._multi import put_unless_stopped
from ._tensors import _tensor_items, to_tensors, twin_tensors


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
