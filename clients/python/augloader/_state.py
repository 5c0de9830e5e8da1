"""The loader's position in an epoch, as a checkpoint holds it.

A state is a small plain dict (docs/checkpoint.md): which epoch, which
rank of how many, which request shaped the batches (view, fold, batch
size, batches per epoch, drop_last), the daemon's identity, and how many
batches and graphs each rank has received. Its top-level keys never change
with the world size (the per-rank part, the earlier phases and the
identity are JSON strings), so ``torch.distributed.checkpoint`` loads a
state saved at 2 ranks into a template made at 3.

:func:`plan` turns a loaded state into the request that continues it:
``start_batch`` at the same world size (the stream is then the tail of the
uninterrupted one, byte for byte), or ``resume`` phases at another (every
graph not yet delivered, spread over the new ranks). Nothing here needs
torch.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field, replace
from typing import Optional

from . import _wire
from ._multi import config_diff

FORMAT = "augloader-state/1"

# key -> the type its value must have. Request fields first.
_REQUEST_KEYS = {"view": str, "fold": int, "batch_size": int, "batches_per_epoch": int, "drop_last": bool,
                 "twins": int, "twin_weights": str}
# Keys a state saved before twins existed lacks, and their values there.
_LATER_KEYS = {"twins": 0, "twin_weights": ""}
_KEYS = {"format": str, "epoch": int, "world": int, "rank": int, "batches": int, "graphs": int,
         **_REQUEST_KEYS, "config": str, "detail": str}


class StateError(ValueError):
    """A state that cannot be loaded here: damaged, hand-edited, or from
    another dataset, configuration or request; the message names the
    field."""


@dataclass
class Progress:
    """Where one iteration of a rank (or of a DataLoader worker of it) is."""
    epoch: int
    world: int
    rank: int
    request: dict                       # the _REQUEST_KEYS values
    phases: list = field(default_factory=list)   # earlier phases of the epoch at other world sizes
    ranks: dict = field(default_factory=dict)    # rank -> [batches, graphs] received in this phase
    total: Optional[int] = None          # the rank's batches in this phase, once a response said
    worker: Optional[list] = None        # [w, K, batches, graphs]: a DataLoader worker's own, beyond ranks[rank]
    config: Optional[dict] = None        # the daemon's identity

    def own(self) -> list:
        """[batches, graphs] this rank received (its worker's share only,
        in a worker's state)."""
        b, g = self.ranks.get(self.rank, [0, 0])
        if self.worker is not None:
            return [b + self.worker[2], g + self.worker[3]]
        return [b, g]

    def to_dict(self) -> dict:
        b, g = self.own()
        detail = {"ranks": {str(r): v for r, v in sorted(self.ranks.items())}, "resume": self.phases,
                  "total": self.total, "worker": self.worker}
        return {"format": FORMAT, "epoch": self.epoch, "world": self.world, "rank": self.rank,
                "batches": b, "graphs": g, **self.request,
                "config": json.dumps(self.config, sort_keys=True) if self.config else "",
                "detail": json.dumps(detail, sort_keys=True, separators=(",", ":"))}


def _nonneg(v, what: str) -> int:
    if not _wire.is_count(v):
        raise StateError(f"augloader: state field {what} = {v!r} is not a non-negative integer")
    return v


def parse(state) -> Progress:
    """Checks a state dict (every key known and of its type, counts within
    their epoch) and returns its progress; StateError names what is wrong."""
    if not isinstance(state, dict):
        raise StateError(f"augloader: a loader state is a dict, not {type(state).__name__}")
    state = {**_LATER_KEYS, **state}
    unknown = sorted(set(state) - set(_KEYS))
    missing = sorted(set(_KEYS) - set(state))
    if unknown or missing:
        raise StateError(f"augloader: not an augloader state ({FORMAT}): "
                         + "; ".join(x for x in (unknown and f"unknown fields {unknown}", missing and f"missing {missing}") if x))
    if state["format"] != FORMAT:
        raise StateError(f"augloader: state format {state['format']!r}, this client reads {FORMAT!r}")
    for k, t in _KEYS.items():
        v = state[k]
        if t is int:
            _nonneg(v, k)
        elif not isinstance(v, t) or (t is not bool and isinstance(v, bool)):
            raise StateError(f"augloader: state field {k} = {v!r} is not a {t.__name__}")
    try:
        weights = json.loads(state["twin_weights"]) if state["twin_weights"] else None
        _wire.check_twins(state["twins"], weights)
    except ValueError as e:
        raise StateError(f"augloader: state fields twins {state['twins']!r}, twin_weights {state['twin_weights'][:80]!r}: {e}") from None
    world, rank = state["world"], state["rank"]
    if world < 1 or rank >= world:
        raise StateError(f"augloader: state field rank {rank} of world {world}")
    try:
        detail = json.loads(state["detail"])
        config = json.loads(state["config"]) if state["config"] else None
    except ValueError as e:
        raise StateError(f"augloader: state field detail or config is not JSON: {e}") from None
    if not isinstance(detail, dict) or set(detail) != {"ranks", "resume", "total", "worker"}:
        raise StateError("augloader: state field detail does not hold ranks, resume, total and worker")
    if config is not None and not isinstance(config, dict):
        raise StateError("augloader: state field config is not an identity")
    ranks = {}
    if not isinstance(detail["ranks"], dict):
        raise StateError("augloader: state field detail.ranks is not a map of rank to [batches, graphs]")
    for r, v in detail["ranks"].items():
        if not r.isdigit() or len(r) > 18 or int(r) >= world or not isinstance(v, list) or len(v) != 2:
            raise StateError(f"augloader: state field detail.ranks[{r!r}] = {v!r}: want rank < {world} -> [batches, graphs]")
        ranks[int(r)] = [_nonneg(v[0], f"detail.ranks[{r}] batches"), _nonneg(v[1], f"detail.ranks[{r}] graphs")]
    try:
        _wire.check_resume(detail["resume"])
    except ValueError as e:
        raise StateError(f"augloader: state field detail.resume: {e}") from None
    total = detail["total"]
    if total is not None:
        _nonneg(total, "detail.total")
    worker = detail["worker"]
    if worker is not None:
        if not isinstance(worker, list) or len(worker) != 4:
            raise StateError(f"augloader: state field detail.worker = {worker!r}: want [worker, workers, batches, graphs]")
        for i, what in enumerate(("worker", "workers", "batches", "graphs")):
            _nonneg(worker[i], f"detail.worker {what}")
        if worker[0] >= worker[1]:
            raise StateError(f"augloader: state field detail.worker: worker {worker[0]} of {worker[1]}")
    p = Progress(epoch=state["epoch"], world=world, rank=rank, request={k: state[k] for k in _REQUEST_KEYS},
                 phases=detail["resume"], ranks=ranks, total=total, worker=worker, config=config)
    if [state["batches"], state["graphs"]] != p.own():
        raise StateError(f"augloader: state fields batches {state['batches']} and graphs {state['graphs']} disagree with "
                         f"detail ({p.own()}): an edited state")
    if total is not None and p.own()[0] > total:
        raise StateError(f"augloader: state position batch {p.own()[0]} is past the epoch's {total} batches (rank {rank})")
    if p.request["batches_per_epoch"] and p.phases:
        raise StateError("augloader: state has resume phases with batches_per_epoch")
    return p


def check_request(p: Progress, request: dict) -> None:
    """Refuses a state made by another request (view, fold, batch size,
    batches per epoch, drop_last), naming each field that differs."""
    diff = [f"{k} {p.request[k]!r} vs {request[k]!r}" for k in _REQUEST_KEYS if p.request[k] != request[k]]
    if diff:
        raise StateError("augloader: the state was saved by a dataset with another request: " + ", ".join(diff)
                         + " (state vs this dataset)")


def check_config(p: Progress, config: Optional[dict]) -> None:
    """Refuses to resume on a daemon serving another configuration than
    the one the state was saved against, naming each setting that differs
    (wire compression aside: it changes no decoded batch)."""
    if not p.config or not config:
        return
    a = {k: v for k, v in p.config.items() if k not in ("id", "wire_compression")}
    b = {k: v for k, v in config.items() if k not in ("id", "wire_compression")}
    if a == b:
        return
    diff = [d for d in config_diff(p.config, config) if not d.startswith(("wire compression", "id "))]
    raise StateError("augloader: the state was saved against another configuration: "
                     + (", ".join(diff) or "identity " + json.dumps(a, sort_keys=True)) + " (state vs this daemon)")


@dataclass
class Plan:
    """The request that continues a loaded state in this iteration."""
    phases: list            # resume phases to send
    start: int              # start_batch
    stride: int
    base: list              # [batches, graphs] of the rank before this iteration (in the new phase)
    done: list              # [batches, graphs] this worker already received (a worker's state)
    empty: bool = False     # nothing left: no request needed
    new_phase: bool = False  # a phase the state's world size ended (its total no longer applies)


def plan(p: Optional[Progress], world: int, rank: int, worker: Optional[tuple]) -> Plan:
    """The request of rank of world (in DataLoader worker (w, K), or None)
    that continues p (None: the epoch from its start)."""
    w, K = worker if worker is not None else (0, 1)
    if p is None:
        return Plan([], w, K, [0, 0], [0, 0])
    if p.world == world:
        if p.worker is not None:
            pw, pK, m, g = p.worker
            if worker is None or (pw, pK) != (w, K):
                where = f"worker {w} of {K}" if worker is not None else "the main process"
                raise StateError(f"augloader: this state is DataLoader worker {pw} of {pK}'s (StatefulDataLoader): load it "
                                 f"through a StatefulDataLoader with {pK} workers, not into {where}")
            base = p.ranks.get(rank, [0, 0])
            start = base[0] + w + m * K
            return Plan(p.phases, start, K, base, [m, g], empty=p.total is not None and p.rank == rank and start >= p.total)
        if rank not in p.ranks:
            raise StateError(f"augloader: the state holds ranks {sorted(p.ranks)} of {p.world}, not rank {rank}: "
                             "save every rank's (state_dict on every rank, or torch.distributed.checkpoint)")
        base = p.ranks[rank]
        # The total is the saving rank's (ranks' totals differ under a node budget).
        total = p.total if p.rank == rank else None
        return Plan(p.phases, base[0] + w, K, base, [0, 0], empty=total is not None and base[0] + w >= total)
    # Another world size: a new phase over what every old rank left.
    if p.worker is not None:
        raise StateError(f"augloader: a DataLoader worker's state (worker {p.worker[0]} of {p.worker[1]}) resumes at its own "
                         f"world size ({p.world}) only; for another, save the dataset's own state")
    if p.request["batches_per_epoch"]:
        raise StateError(f"augloader: an epoch of batches_per_epoch={p.request['batches_per_epoch']} resumes at its own "
                         f"world size ({p.world}) only, not at {world}")
    if len(p.ranks) < p.world:
        # The first few absent (a forged world of 10**12 must not be walked).
        missing = list(itertools.islice((r for r in range(p.world) if r not in p.ranks), 8))
        more = "" if len(missing) == p.world - len(p.ranks) else f" and {p.world - len(p.ranks) - len(missing)} more"
        raise StateError(f"augloader: resuming at world {world} needs every rank of the state's world {p.world}; it lacks "
                         f"ranks {missing}{more} (take it with state_dict() on every rank under torch.distributed, "
                         "or through torch.distributed.checkpoint)")
    phases = p.phases + [{"world": p.world, "graphs": [p.ranks[r][1] for r in range(p.world)]}]
    try:
        _wire.check_resume(phases)  # the protocol's bounds on phases and ranks
    except ValueError as e:
        raise StateError(f"augloader: cannot resume at world {world} once more in this epoch: {e}") from None
    return Plan(phases, w, K, [0, 0], [0, 0], new_phase=True)


def _agree(ps: list, keys: tuple, who) -> None:
    """Refuses progresses that differ from the first in one of keys,
    naming the two (who(p) names one) and the field."""
    first = ps[0]
    for p in ps[1:]:
        for k in keys:
            if getattr(p, k) != getattr(first, k):
                raise StateError(f"augloader: {who(first)} and {who(p)} differ in {k}: "
                                 f"{getattr(first, k)!r} vs {getattr(p, k)!r}")


def merge(states) -> dict:
    """One state holding the ranks of several (each rank's own, saved
    apart, as a per-rank torch.save does), for a resume at another world
    size. They must be of one epoch, world, request, phase and
    configuration, and no rank twice."""
    ps = [parse(s) for s in states]
    if not ps:
        raise StateError("augloader: no states to merge")
    first = ps[0]
    _agree(ps, ("epoch", "world", "request", "phases"), lambda p: f"the state of rank {p.rank}")
    ranks = {}
    for p in ps:
        if p.worker is not None:
            raise StateError(f"augloader: rank {p.rank}'s state is a DataLoader worker's: merge the datasets' own states")
        check_config(first, p.config)
        for r, v in p.ranks.items():
            if r in ranks and ranks[r] != v:
                raise StateError(f"augloader: two states give rank {r} different positions: {ranks[r]} and {v}")
            ranks[r] = v
    return replace(first, ranks=ranks, total=None if len(ranks) > 1 else first.total).to_dict()


def from_loader(loader_state) -> dict:
    """The dataset's own state (the rank's position) from a torchdata
    StatefulDataLoader's state: with K workers, the sum of the workers'
    positions (they read batches w, w+K, … in turn, so what the trainer
    received is a prefix of the rank's batches). Loaded into a dataset, it
    continues under any number of workers, or at another world size after
    merging the ranks'."""
    if not isinstance(loader_state, dict):
        raise StateError("augloader: not a StatefulDataLoader state")
    if "_snapshot" not in loader_state:
        st = loader_state.get("dataset_state")
        if st is None:
            raise StateError("augloader: the loader's state holds no dataset state (is its dataset an AugloaderDataset?)")
        parse(st)
        return st
    if loader_state.get("_steps_since_snapshot", 0):
        raise StateError("augloader: the loader's worker states are older than its position (snapshot_every_n_steps > 1): "
                         "take the state with snapshot_every_n_steps=1")
    try:
        ws = [w["dataset_state"] for w in loader_state["_snapshot"]["_worker_snapshots"].values()]
    except (KeyError, TypeError, AttributeError):
        raise StateError("augloader: a StatefulDataLoader state without its workers' dataset states") from None
    ps = sorted((parse(w) for w in ws), key=lambda p: p.worker[0] if p.worker else -1)
    if not ps or any(p.worker is None for p in ps) or [p.worker[:2] for p in ps] != [[w, len(ps)] for w in range(len(ps))]:
        raise StateError("augloader: the workers' states are not those of workers 0..K-1 of one loader")
    first = ps[0]
    _agree(ps, ("epoch", "world", "rank", "request", "phases"), lambda p: f"worker {p.worker[0]}")
    for p in ps:
        if p.ranks.get(p.rank) != first.ranks.get(first.rank):
            raise StateError(f"augloader: workers 0 and {p.worker[0]} started at different positions")
    counts = [p.worker[2] for p in ps]
    if any(counts[i] < counts[i + 1] for i in range(len(counts) - 1)) or counts[0] - counts[-1] > 1:
        raise StateError(f"augloader: the workers received {counts} batches: not one in turn (in_order=False?), "
                         "so what the trainer received is not a prefix of the epoch")
    base = first.ranks.get(first.rank, [0, 0])
    own = [base[0] + sum(counts), base[1] + sum(p.worker[3] for p in ps)]
    return replace(first, ranks={first.rank: own}, worker=None).to_dict()
