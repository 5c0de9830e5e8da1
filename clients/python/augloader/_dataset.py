"""The PyTorch dataset: :class:`AugloaderDataset` (one rank's epoch per
iteration, DataLoader workers, its state and checks: docs/checkpoint.md;
the epoch it shares with its workers is ``_shared``), and the state helpers
(``save_atomic``, ``dataset_state``, ``merge_states``). Public through
``augloader.torch``."""
from __future__ import annotations

import json
import os
import warnings
from typing import Optional

import torch
from torch.utils.data import IterableDataset, get_worker_info

from . import ServerError, _state, _wire, connect
from ._ahead import _Ahead
from ._proc import start_time
from ._shared import _SharedEpoch
from ._pyg import PyGBatch, pyg_batch
from ._tensors import LAYOUTS, to_tensors, twin_tensors
from .structures import StructureBatch, to_fairchem, to_mace

def save_atomic(obj, path) -> None:
    """torch.save(obj) to path so that a crash never leaves a partial
    file there: written beside it, flushed to disk, then renamed over it."""
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


COMMITS = ("yield", "manual")

def _rank_world() -> tuple:
    """(rank, world) of this process: torch.distributed's once it is
    initialised; before that, torchrun's environment (RANK, WORLD_SIZE: a
    worker that builds its dataset before init_process_group); else one
    process, (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    r, w = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if r is None and w is None:
        return 0, 1
    try:
        rank, world = int(r), int(w)
    except (TypeError, ValueError):
        rank = world = -1
    if not 0 <= rank < world:
        raise ValueError(f"augloader: RANK={r!r} WORLD_SIZE={w!r} in the environment: want both, 0 <= RANK < WORLD_SIZE "
                         f"(torchrun sets them), or pass rank= and world=")
    return rank, world


def _torchrun_job(request: tuple) -> str:
    """The group of ranks this process trains with, as torchrun names it:
    its run id, its restart (a restarted group is another one, its ranks
    at other epochs) and its agent, the ranks' parent (the run id is
    "none" for every job of a static rendezvous); then which dataset of
    this request (url, view, fold, world, rank) the process built, in
    order: a probe dataset built to read one batch (the model's
    dimensions) has epochs of its own, as it has a counter of its own,
    and the ranks build theirs alike. "" outside torchrun."""
    run = os.environ.get("TORCHELASTIC_RUN_ID")
    if run is None:
        return ""
    n = _built.get(request, 0)
    _built[request] = n + 1
    agent = os.getppid()
    return f"{run}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{agent}:{start_time(agent) or 0}/{n}"[:_wire.MAX_JOB]


_built: dict = {}  # (url, view, fold, world, rank) -> datasets built in this process


def _worker(info) -> Optional[tuple]:
    """(id, num_workers) of a DataLoader worker's get_worker_info(), or None."""
    return (info.id, info.num_workers) if info is not None else None


class AugloaderDataset(IterableDataset):
    """One epoch of one rank per iteration. Each new iteration reads the
    next epoch (0, 1, 2, …; DataLoader workers, persistent or not, move on
    together); ``set_epoch(e)`` pins the epoch the next iteration reads,
    as with DistributedSampler, and a loaded state pins its own (the next
    iteration is its epoch's rest, empty for a state from its end). An
    iteration stopped early counts: the next one is the next epoch.

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
                 twins: int = 0, twin_weights=None, z_table=None):
        super().__init__()
        if layout not in LAYOUTS + ("mace", "fairchem", "structures"):
            raise ValueError(f"augloader: layout {layout!r}: want one of {', '.join(LAYOUTS)} (graphs), "
                             f"mace, fairchem or structures (structures)")
        if commit not in COMMITS:
            raise ValueError(f"augloader: commit {commit!r}: want one of {', '.join(COMMITS)}")
        if prefetch < 0:
            raise ValueError("augloader: prefetch must be at least 0")
        self.layout, self.commit_mode, self.prefetch = layout, commit, int(prefetch)
        self.url, self.token, self.batch_size, self.device = url, token, batch_size, device
        self.view, self.fold, self.batches_per_epoch, self.drop_last = view, fold, batches_per_epoch, drop_last
        self.digest = digest
        # Structures (batch schema 3): "mace" (to_mace over z_table, which it
        # needs), "fairchem" (to_fairchem), or the StructureBatch itself.
        self.z_table = None if z_table is None else [int(z) for z in z_table]
        twin_weights = _wire.twin_weights(twin_weights)
        _wire.check_twins(twins, twin_weights)
        self.twins = twins
        if rank is None or world is None:
            rank, world = _rank_world()
        self.rank, self.world = rank, world
        # The daemon refuses this rank asking for an older epoch than
        # another rank of its job did (a peek on one rank moves its
        # epochs on alone): named here, in the rank's own process.
        self.job = _torchrun_job((url, view, fold, world, rank)) if world > 1 else ""
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
        self._shape_info: Optional[dict] = None  # sizes, asked once (_shape)
        self._lens: dict = {}  # epoch -> this rank's batches in it

    @property
    def epoch(self) -> int:
        return self._shared.epoch

    @epoch.setter
    def epoch(self, e: int) -> None:
        self._shared.pin(e)

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
        self._shared.pin(epoch)

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

    # ---------------------------------------------------------- sizes

    def _shape(self) -> dict:
        """What the daemon says of the dataset's shape (its first batch's
        widths, the served set's size), asked once with a one-batch
        request and kept."""
        if self._shape_info is None:
            stream = connect(self.url, token=self.token).epoch(self.epoch, count=1, **self._probe_kw())
            try:
                b = next(iter(stream), None)
            finally:
                stream.close()
            if b is None:
                raise ValueError(f"augloader: rank {self.rank} of {self.world} has no batch in epoch {self.epoch} at "
                                 f"{self.url}: no sizes to read")
            served = (stream.info.get("config") or {}).get("served")
            self._shape_info = {"num_graphs": served, "num_classes": b.num_classes if b.task == "class" else b.num_targets,
                                "num_targets": b.num_targets, "num_outputs": b.num_outputs, "task": b.task,
                                "num_node_features": b.num_node_features, "num_edge_features": b.num_edge_features,
                                "feature_dim": b.feature_dim}
            self._lens[self.epoch] = stream.info.get("total_batches")
        return self._shape_info

    def __len__(self) -> int:
        """Batches in this rank's current epoch (what a DataLoader with
        batch_size=None, and a progress bar, count), asked of the daemon
        once per epoch: under a node or edge budget the count changes
        with the epoch's order."""
        e = self.epoch
        if e not in self._lens:
            stream = connect(self.url, token=self.token).epoch(e, count=1, **self._probe_kw())
            stream.close()
            self._lens[e] = stream.info.get("total_batches")
        return int(self._lens[e])

    @property
    def num_graphs(self) -> int:
        """Graphs in the served set (the view's, the fold's), all ranks."""
        return self._shape()["num_graphs"]

    @property
    def num_classes(self) -> int:
        """PyG's num_classes: the classes of a class task, the targets T of
        a binary or regression one (what a model's head outputs)."""
        return self._shape()["num_classes"]

    @property
    def num_targets(self) -> int:
        """T of a binary or regression task, 0 for a class task."""
        return self._shape()["num_targets"]

    @property
    def task(self) -> str:
        """"class", "binary" or "regression"."""
        return self._shape()["task"]

    @property
    def num_node_features(self) -> int:
        """x's width in the "pyg" layout: the one-hot feature_dim, the float
        block's width, or the categorical columns' count (PyG's name)."""
        return self._shape()["num_node_features"]

    num_features = num_node_features  # PyG's other name for it

    @property
    def num_edge_features(self) -> int:
        """edge_attr's width: categorical columns, or floats; 0 without."""
        return self._shape()["num_edge_features"]

    @property
    def feature_dim(self) -> int:
        """The one-hot width (CodeEmbedding's num_codes under the "codes"
        layout)."""
        return self._shape()["feature_dim"]

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
        stream = connect(self.url, token=self.token).epoch(self.epoch, count=1, **self._probe_kw())
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
        info = get_worker_info()
        if info is None and self._shared.live_workers():
            raise RuntimeError("augloader: persistent DataLoader workers of this dataset are running, each with its own "
                               "copy of it: a state loaded here would not reach them, and they would start the epoch "
                               "over. Load it before the DataLoader's first iteration (a new DataLoader over this "
                               "dataset), or load the loader's state (torchdata's StatefulDataLoader.load_state_dict), "
                               "which reaches its workers")
        p = _state.parse(state)
        request = self._request()
        if p.request["twins"] == self.twins and self.twins:
            # The epoch's twin weights are the state's (as its epoch is):
            # JOAO's distribution when it was saved.
            request["twin_weights"] = p.request["twin_weights"]
        _state.check_request(p, request)
        start = _state.begin(p, self.world, self.rank)
        _state.plan(start, _worker(info))  # refuses a worker's state in another worker, now
        # Nothing refused: commit every change at once.
        if p.request["twins"] == self.twins and self.twins:
            self._shared.twin_weights = json.loads(p.request["twin_weights"]) if p.request["twin_weights"] else []
        self._loaded, self._progress, self._pending = start, None, []
        self._expect = self.config = p.config
        if info is None:
            # The next iteration continues the state's epoch (every rank
            # its own rest of it, empty for a rank that had finished).
            self._shared.pin(p.epoch)

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
                    twin_weights=self._shared.twin_weights or None, job=self.job)

    def _probe_kw(self) -> dict:
        """_kw for a one-batch probe (len, shapes, the identity): no job, so
        a probe of an epoch the rank's iteration has not moved past yet is
        not taken for a rank out of step."""
        return dict(self._kw(), job="")

    def _epoch(self, client, epoch: int, **kw):
        """client.epoch with this dataset's request; a daemon older than
        the job field (it refuses unknown fields) is asked again without
        it, and not sent it again."""
        try:
            return client.epoch(epoch, **kw, **self._kw())
        except ServerError as e:
            if not self.job or e.code != "bad_request" or '"job"' not in str(e):
                raise
            self.job = ""
            return client.epoch(epoch, **kw, **self._kw())

    def _open(self, epoch: int, pl: "_state.Plan", start: Optional["_state.Progress"]):
        """The stream of this iteration, checked: a loaded identity against
        the daemon's, a loaded total against the daemon's count. Asked even
        when the state says the epoch is done (an empty tail), so that a
        state from an epoch's end is checked as one from its middle."""
        client = connect(self.url, token=self.token)
        expect = self._expect
        try:
            stream = self._epoch(client, epoch, start_batch=pl.start, stride=pl.stride, resume=pl.phases or None,
                                 digest=self.digest)
        except ServerError as e:
            if start is None or e.code != "out_of_range":
                raise
            # Past the rank's last batch: a worker whose next batch is past
            # it has none left; anything else is another daemon's state.
            probe = self._epoch(client, epoch, start_batch=0, count=1, resume=pl.phases or None)
            probe.close()
            if expect is not None:
                _state.check_config(expect, probe.info.get("config"))
            total = probe.info.get("total_batches")
            if isinstance(total, int) and pl.base[0] <= total < pl.start:
                stream = self._epoch(client, epoch, start_batch=total, resume=pl.phases or None, digest=self.digest)
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

    def _structures(self, b: StructureBatch, index: int):
        """A structure batch as the layout asks: MACE's fields (layout
        "mace", over z_table), fairchem's ("fairchem"), or the
        StructureBatch (any other layout); batch_index and padded added."""
        if self.layout == "mace":
            if self.z_table is None:
                raise ValueError("augloader: layout 'mace' takes the model's z_table (AugloaderDataset(..., z_table=[1, 6, 8]))")
            out = to_mace(b, self.z_table)
        elif self.layout == "fairchem":
            out = to_fairchem(b)
        else:
            return b
        out = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in out.items()}
        out["batch_index"], out["padded"], out["graph_id"] = index, b.padded, b.graph_id
        return out

    def __iter__(self):
        # One DataLoader worker reads every num_workers-th batch of the rank.
        info = get_worker_info()
        worker = _worker(info)
        if info is not None:
            self._shared.mark_worker(info.id)
        epoch = self._shared.begin_iteration(info)
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
                # batch_index and num_classes as fields, last (where their
                # setattr put them, at twice the cost).
                out = pyg_batch(x=t["x"], edge_index=t["edge_index"], batch=t["batch"], ptr=t["ptr"],
                                 y=t["y_soft"] if t["soft"] else t["y"], padded=t["padded"], graph_id=t["graph_id"],
                                 **extra, batch_index=index, num_classes=t["num_classes"])
                out._num_graphs = t["num_graphs"]
                return out
            return t

        def made():
            for i, b in enumerate(stream):
                index = start + i * stride
                if isinstance(b, StructureBatch):
                    yield self._structures(b, index), index, b.num_graphs
                    continue
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
