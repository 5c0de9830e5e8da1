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
import re
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


# The daemon's identity (wire.Config): the fields every identity has, and
# their JSON types; the others (wire_compression, edge_fill, shuffle,
# twins, twin_weights) are strings present only when set.
_IDENTITY = {"id": str, "dataset": str, "shards_sha256": str, "served": int, "served_sha256": str, "seed": int,
             "schedule": str, "batch_size": int, "node_budget": int, "edge_budget": int, "remainder": str}
_IDENTITY_OPTIONAL = ("wire_compression", "edge_fill", "shuffle", "twins", "twin_weights")
# A rank key as the state writes it: ASCII decimal without leading zeros
# ('00', '٠' and '²' are not rank 0, 0 and 2).
_RANK_KEY = re.compile(r"(?:0|[1-9][0-9]{0,17})\Z", re.ASCII)


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


def _nonneg(v, what: str, limit: int = _wire.MAX_COUNT) -> int:
    if not _wire.is_count(v, limit):
        raise StateError(f"augloader: state field {what} = {str(v)[:80]} is not an integer in 0..{limit}")
    return v


def check_identity(config, where: str = "state field config") -> dict:
    """config as a daemon identity (every field of wire.Config with its
    type, a 16-hex-digit id), or StateError: a state without one cannot be
    checked against the daemon it resumes on, so it is refused."""
    if not isinstance(config, dict) or not config:
        raise StateError(f"augloader: {where} holds no identity of the daemon the state was saved against "
                         f"({json.dumps(config)[:80]}): a state must carry one to be checked before it resumes")
    for k, t in _IDENTITY.items():
        v = config.get(k)
        if not isinstance(v, t) or isinstance(v, bool) or (t is int and not _wire.is_count(v, _wire.MAX_EPOCH)):
            raise StateError(f"augloader: {where}: identity field {k} = {str(v)[:80]} is not a {t.__name__}")
    if not re.fullmatch(r"[0-9a-f]{16}", config["id"]):
        raise StateError(f"augloader: {where}: identity id {config['id'][:80]!r} is not 16 hex digits")
    for k in _IDENTITY_OPTIONAL:
        if k in config and not isinstance(config[k], str):
            raise StateError(f"augloader: {where}: identity field {k} = {str(config[k])[:80]} is not a str")
    return config


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
            _nonneg(v, k, _wire.MAX_EPOCH if k == "epoch" else _wire.MAX_COUNT)
        elif not isinstance(v, t) or (t is not bool and isinstance(v, bool)):
            raise StateError(f"augloader: state field {k} = {v!r} is not a {t.__name__}")
    try:
        weights = json.loads(state["twin_weights"]) if state["twin_weights"] else None
        if state["twin_weights"] and not isinstance(weights, list):
            raise ValueError("not a JSON list")
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
    check_identity(config)
    ranks = {}
    if not isinstance(detail["ranks"], dict):
        raise StateError("augloader: state field detail.ranks is not a map of rank to [batches, graphs]")
    for r, v in detail["ranks"].items():
        if not _RANK_KEY.match(r) or int(r) >= world or not isinstance(v, list) or len(v) != 2:
            raise StateError(f"augloader: state field detail.ranks[{r[:40]!r}] = {str(v)[:80]}: want a rank < {world} "
                             "in decimal digits -> [batches, graphs]")
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


def check_config(expected: dict, config: Optional[dict]) -> None:
    """Refuses to resume on a daemon serving another configuration than
    expected, the identity a state was saved against, naming each setting
    that differs (wire compression aside: it changes no decoded batch); a
    daemon that sends no identity cannot be checked, and is refused."""
    if not isinstance(config, dict) or not config:
        raise StateError("augloader: the daemon sent no identity of its configuration: a loaded state cannot be checked "
                         "against it")
    a = {k: v for k, v in expected.items() if k not in ("id", "wire_compression")}
    b = {k: v for k, v in config.items() if k not in ("id", "wire_compression")}
    if a == b:
        return
    diff = [d for d in config_diff(expected, config) if not d.startswith(("wire compression", "id "))]
    raise StateError("augloader: the state was saved against another configuration: "
                     + (", ".join(diff) or "identity " + json.dumps(a, sort_keys=True)) + " (state vs this daemon)")


def begin(p: Progress, world: int, rank: int) -> Progress:
    """Where rank of world stands once p is loaded, before any batch: the
    one computation of a resumed position. A state saved right after the
    load (before the first batch) is this; the iteration that follows
    starts from it (``plan``). At p's world size, the rank's own count in
    p's phase (a DataLoader worker's state keeps its worker's); at
    another, a new phase over what every rank of p left, at 0. Refuses
    what cannot resume here, naming why."""
    if p.world == world:
        if p.worker is not None and p.rank != rank:
            raise StateError(f"augloader: this state is rank {p.rank}'s DataLoader worker {p.worker[0]}'s, not rank {rank}'s")
        if rank not in p.ranks:
            raise StateError(f"augloader: the state holds ranks {sorted(p.ranks)[:8]} of {p.world}, not rank {rank}: "
                             "save every rank's (state_dict on every rank, or torch.distributed.checkpoint)")
        # The total is the saving rank's (ranks' totals differ under a node budget).
        return Progress(p.epoch, world, rank, dict(p.request), phases=list(p.phases), ranks={rank: list(p.ranks[rank])},
                        total=p.total if p.rank == rank else None,
                        worker=list(p.worker) if p.worker is not None else None, config=p.config)
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
    return Progress(p.epoch, world, rank, dict(p.request), phases=phases, ranks={rank: [0, 0]}, config=p.config)


@dataclass
class Plan:
    """The request that continues a position in this iteration."""
    phases: list            # resume phases to send
    start: int              # start_batch
    stride: int
    base: list              # [batches, graphs] of the rank before this iteration (in the phase)
    done: list              # [batches, graphs] this worker already received (a worker's state)


def plan(start: Optional[Progress], worker: Optional[tuple]) -> Plan:
    """The request of one iteration (in DataLoader worker (w, K), or None)
    from start, a rank's position as ``begin`` gives it (None: the epoch
    from its first batch). Worker w of K reads every K-th batch of the
    rank's from its own next one."""
    w, K = worker if worker is not None else (0, 1)
    if start is None:
        return Plan([], w, K, [0, 0], [0, 0])
    base = start.ranks[start.rank]
    if start.worker is not None:
        pw, pK, m, g = start.worker
        if worker is None or (pw, pK) != (w, K):
            where = f"worker {w} of {K}" if worker is not None else "the main process"
            raise StateError(f"augloader: this state is DataLoader worker {pw} of {pK}'s (StatefulDataLoader): load it "
                             f"through a StatefulDataLoader with {pK} workers, not into {where}")
        return Plan(start.phases, base[0] + w + m * K, K, base, [m, g])
    return Plan(start.phases, base[0] + w, K, base, [0, 0])


def gathered(p: Progress, entries: list) -> Progress:
    """p holding every rank's position, from each rank's entry (rank,
    epoch, phases, [batches, graphs], total) as ``entry`` gives it: what
    ``state_dict`` under torch.distributed saves, the same on every rank
    (torch.distributed.checkpoint keeps one rank's copy of each key): rank
    0's position at the top, a total only when every rank has the same."""
    if len({(e, json.dumps(ph)) for _, e, ph, _, _ in entries}) > 1:
        raise RuntimeError("augloader: the ranks are at different epochs or resume phases: "
                           + ", ".join(f"rank {r} epoch {e} phase {len(ph)}" for r, e, ph, _, _ in entries))
    if sorted(r for r, *_ in entries) != list(range(len(entries))):
        raise RuntimeError(f"augloader: the gathered ranks are {sorted(r for r, *_ in entries)[:8]}, not 0..{len(entries) - 1}")
    totals = {t for *_, t in entries}
    return replace(p, rank=0, ranks={r: list(own) for r, _, _, own, _ in entries},
                   total=totals.pop() if len(totals) == 1 else None)


def entry(p: Progress) -> tuple:
    """This rank's contribution to ``gathered``."""
    return (p.rank, p.epoch, p.phases, p.own(), p.total)


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
        check_config(first.config, p.config)
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
