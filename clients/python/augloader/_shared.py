"""What a dataset shares with its DataLoader workers: the epoch, the twin
weights, which workers iterated and which consumers began the epoch's
iteration (:class:`_SharedEpoch`), in memory the workers map. Private to
``augloader._dataset``."""
from __future__ import annotations

import os

from . import _wire
from ._proc import start_time


_MAX_WORKERS = 256  # worker ids past it share slots: a live one is still found


class _SharedEpoch:
    """The dataset's epoch, whether DataLoader workers iterated it, and
    which consumers iterated it, in memory shared with the workers:
    ``set_epoch`` in the main process reaches persistent workers, which
    keep their copy of the dataset, and an iteration that no ``set_epoch``
    preceded moves every consumer on to the next epoch together. Shared
    with a worker process as it starts (fork, or pickled while spawning
    it); any other copy (deepcopy, torch.save) gets its own."""

    # _it's layout: [consumed, iteration key, seen by slot 0 (the main
    # process), seen by worker 0, worker 1, ...].
    _CONSUMED, _KEY, _SEEN = 0, 1, 2

    def __init__(self, values=(0, 0), weights=()):
        import multiprocessing

        # The epoch is a uint64 (as on the wire), checked before it is
        # stored: ctypes would wrap 2**64 to 0 silently.
        self._a = multiprocessing.RawArray("Q", 2)
        self._a[:] = list(values)
        # The twin weights (JOAO's, set per epoch): a count, then the weights.
        self._w = multiprocessing.RawArray("d", 1 + _wire.MAX_TWIN_SETS)
        self.twin_weights = list(weights)
        # The DataLoader workers that iterated, by worker id: process id,
        # then start time.
        self._pids = multiprocessing.RawArray("q", 2 * _MAX_WORKERS)
        self._it = multiprocessing.RawArray("Q", self._SEEN + 1 + _MAX_WORKERS)
        # A spawn context's lock: one of the default (fork) context cannot
        # be carried into a worker of a spawn or forkserver DataLoader
        # (multiprocessing_context=; Python 3.14's default is forkserver):
        # the worker crashed at its first batch. A spawn lock works in
        # forked workers too.
        self._lock = multiprocessing.get_context("spawn").Lock()

    def __getstate__(self):
        from multiprocessing import context

        if context.get_spawning_popen() is not None:
            return {"shared": self._a, "shared_weights": self._w, "shared_pids": self._pids, "shared_it": self._it,
                    "lock": self._lock}
        return {"values": list(self._a), "weights": self.twin_weights}

    def __setstate__(self, st):
        if "shared" in st:
            self._a, self._w, self._pids = st["shared"], st["shared_weights"], st["shared_pids"]
            self._it, self._lock = st["shared_it"], st["lock"]
        else:
            self.__init__(st["values"], st.get("weights", ()))

    def pin(self, epoch: int) -> None:
        """The next iteration reads epoch (set_epoch, a loaded state)."""
        with self._lock:
            self.epoch = epoch
            self._it[:] = [0] * len(self._it)

    def begin_iteration(self, worker) -> int:
        """The epoch an iteration that starts now reads, in worker (the
        DataLoader's get_worker_info()) or the main process (None): the
        pinned epoch, or the next one when this iteration is a new one of
        an epoch already iterated. An iteration is known by its key (a
        DataLoader iterator's base seed, the same for all its workers; 0
        in the main process) and, where the key stays (persistent workers,
        which keep theirs), by its consumer having iterated already."""
        if worker is None:
            slot, key = 0, 0
        else:
            slot, key = 1 + worker.id % _MAX_WORKERS, (worker.seed - worker.id) % (1 << 64)
        with self._lock:
            it = self._it
            if it[self._CONSUMED] and (it[self._KEY] != key or it[self._SEEN + slot]):
                self.epoch = self.epoch + 1
                it[self._SEEN:] = [0] * (len(it) - self._SEEN)
            it[self._CONSUMED], it[self._KEY], it[self._SEEN + slot] = 1, key, 1
            return self.epoch

    def mark_worker(self, worker_id: int) -> None:
        """A DataLoader worker (this process) iterates the dataset."""
        self._a[1] = 1
        slot, pid = 2 * (worker_id % _MAX_WORKERS), os.getpid()
        self._pids[slot], self._pids[slot + 1] = pid, start_time(pid) or 0

    def live_workers(self) -> list:
        """The workers that iterated and still run (persistent ones, which
        keep their copy of the dataset), known by process id and start
        time, whoever their parent (forkserver's workers are the fork
        server's children)."""
        me = os.getpid()
        return [pid for pid, start in zip(self._pids[0::2], self._pids[1::2])
                if pid > 0 and pid != me and start and start_time(pid) == start]

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
