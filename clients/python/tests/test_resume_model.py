"""Resume against a reference model, on random schedules (issue #44).

The model is what a resumed epoch owes: every graph of the epoch once, in
the bytes of the uninterrupted one-rank epoch, and a state that counts
exactly the graphs the trainer received. Each schedule is drawn from a
seeded generator: a chain of world sizes (1 to 4 ranks), at each a random
stop per rank (0, any batch, the last), with the checkpoint taken at a
random moment (before any batch, right after a load, with batches made
ahead in the prefetch queue, at the epoch's end), through each rank's
``state_dict()`` gathered as under torch.distributed (``_gather``, its
all_gather_object played by one thread a rank) or saved apart and
combined with ``merge_states``; a last world reads the rest; a state from
the epoch's end then resumes to nothing, and the next epoch is whole.
Batches hold several graphs under a node budget, so ranks stop at
different graph counts; a graph's content is compared by its own digest
(oracle.graph_digests), whatever batch it came in.

``make test`` runs AUGLOADER_RESUME_SCHEDULES (default 150) schedules;
docs/checkpoint.md has the long run's command and result."""
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import need_torch
from oracle import graph_digests, reference

torch = need_torch()
import augloader  # noqa: E402
from augloader import _state  # noqa: E402
from augloader.torch import AugloaderDataset, merge_states  # noqa: E402

SCHEDULES = int(os.environ.get("AUGLOADER_RESUME_SCHEDULES", "150"))
SEED = int(os.environ.get("AUGLOADER_RESUME_SEED", "44"))
GRAPHS = 30


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    d = augloader.Daemon(make_synth_shards(GRAPHS, 5), binary=str(bins / "augloader"), policy="nodesam:0.5,submix:p=0.4:0.5",
                         seed=7, batch_size=3, workers=2, args=["--node-budget", "260"])
    d.start()
    yield d
    d.stop()


class FakeDist:
    """torch.distributed's all_gather_object among threads, one a rank:
    the dataset's own _gather runs as under a process group."""

    def __init__(self, world):
        self.world = world
        self.slots = [None] * world
        self.barrier = threading.Barrier(world)
        self.rank = threading.local()

    def all_gather_object(self, out, obj):
        self.slots[self.rank.value] = obj
        self.barrier.wait()
        out[:] = list(self.slots)
        self.barrier.wait()


def gathered_states(monkeypatch, dss):
    """Every rank's state_dict() under a (fake) process group: one dict,
    the same on every rank."""
    world = len(dss)
    fake = FakeDist(world)
    dist = torch.distributed
    with monkeypatch.context() as m:
        m.setattr(dist, "is_available", lambda: True)
        m.setattr(dist, "is_initialized", lambda: True)
        m.setattr(dist, "get_world_size", lambda *a: world)
        m.setattr(dist, "all_gather_object", fake.all_gather_object)

        def one(r):
            fake.rank.value = r
            return dss[r].state_dict()

        with ThreadPoolExecutor(world) as ex:
            states = list(ex.map(one, range(world)))
    assert all(s == states[0] for s in states), "ranks saved different gathered states"
    return states[0]


def counted(state) -> int:
    """Graphs (padded included) a state says the trainer received in its
    epoch: every earlier phase's and every rank's in the current one."""
    p = _state.parse(state)
    return sum(sum(ph["graphs"]) for ph in p.phases) + sum(g for _, g in p.ranks.values())


def take(ds, k, got):
    """Up to k batches of ds's epoch (all when k is None) into got, as
    (graph id, padded, digest) per graph."""
    it = iter(ds)
    n = 0
    try:
        while k is None or n < k:
            try:
                t = next(it)
            except StopIteration:
                break
            got += graph_digests(t)
            n += 1
    finally:
        it.close()


def run(served, monkeypatch, rng, one, epoch_ids):
    """One schedule; returns a description for a failure's message."""
    log = []
    got = []
    state = None  # a dict (gathered or merged), or a list of per-rank states of one world
    saved_world = None
    for seg in range(rng.randint(1, 4)):
        world = rng.randint(1, 4)
        prefetch = rng.choice([0, 0, 2])
        dss = [AugloaderDataset(served.url, pyg=False, rank=r, world=world, prefetch=prefetch) for r in range(world)]
        if isinstance(state, list) and world != saved_world:
            state = merge_states(state)
        for r, ds in enumerate(dss):
            if state is not None:
                ds.load_state_dict(state[r] if isinstance(state, list) else state)
        moment = rng.choice(["after_load", "batches", "batches", "end"])
        stops = []
        if moment != "after_load":
            for ds in dss:
                k = None if moment == "end" else rng.choice([0, 1, rng.randint(0, 8), None])
                stops.append(k)
                take(ds, k, got)
        how = rng.choice(["gathered", "apart"]) if world > 1 else "apart"
        log.append(f"world {world} prefetch {prefetch} {moment} stops {stops} saved {how}")
        if how == "gathered":
            state = gathered_states(monkeypatch, dss)
        else:
            state = [ds.state_dict() for ds in dss]
        saved_world = world
        total = counted(state if isinstance(state, dict) else merge_states(state))
        assert total == len(got), f"the state counts {total} graphs received, the trainer had {len(got)}: {log}"
    world = rng.randint(1, 4)
    if isinstance(state, list) and world != saved_world:
        state = merge_states(state)
    dss = [AugloaderDataset(served.url, pyg=False, rank=r, world=world) for r in range(world)]
    for r, ds in enumerate(dss):
        ds.load_state_dict(state[r] if isinstance(state, list) else state)
        take(ds, None, got)
    log.append(f"then world {world} to the end")
    real = [(g, d) for g, padded, d in got if not padded]
    ids = sorted(g for g, _ in real)
    assert ids == epoch_ids, f"graphs delivered {len(ids)} times for {len(epoch_ids)} graphs " \
        f"(twice: {sorted({g for g in ids if ids.count(g) > 1})}, never: {sorted(set(epoch_ids) - set(ids))}): {log}"
    bad = [g for g, d in real if d != one[g]]
    assert not bad, f"graphs {bad} differ from the uninterrupted epoch's bytes: {log}"
    # A state from the epoch's end: nothing left; the next epoch whole.
    if rng.random() < 0.15:
        end = [ds.state_dict() for ds in dss]
        end = merge_states(end) if world > 1 else end[0]
        again = AugloaderDataset(served.url, pyg=False, rank=0, world=1)
        again.load_state_dict(end)
        rest = []
        take(again, None, rest)
        assert rest == [], f"a state from the epoch's end resumed to {len(rest)} more graphs: {log}"
        again.set_epoch(1)
        take(again, None, rest)
        assert sorted(g for g, p, _ in rest if not p) == list(range(GRAPHS)), f"the next epoch is not whole: {log}"
    return log


def test_model(served, monkeypatch):
    one = {g: d for t in reference(served.socket, epoch=0) for g, _, d in graph_digests(t)}
    epoch_ids = sorted(one)
    assert epoch_ids == list(range(GRAPHS))
    t0 = time.monotonic()
    for i in range(SCHEDULES):
        rng = random.Random(SEED * 1_000_003 + i)
        try:
            run(served, monkeypatch, rng, one, epoch_ids)
        except AssertionError as e:
            raise AssertionError(f"schedule {i} (AUGLOADER_RESUME_SEED={SEED}): {e}") from None
    wall = time.monotonic() - t0
    print(f"{SCHEDULES} schedules in {wall:.1f} s")
    # bench/results/resume-model.txt keeps the long run's line (docs/checkpoint.md).
    print(f"RESULT kind=resume-model schedules={SCHEDULES} seed={SEED} wall_s={wall:.1f}")
