"""Checkpoint and resume with AugloaderDataset's own state (docs/checkpoint.md),
against real daemons: a state taken after k batches and loaded into a new
dataset yields exactly the uninterrupted run's remaining batches (graph ids
and per-batch digests), mid-epoch, at the epoch's last batch (the next
epoch is the next one), after resuming twice, and into a DataLoader with
another number of workers; per-rank states merged resume at other world
sizes with every graph of the epoch once, in its uninterrupted bytes; and
what must be refused is, naming the field. The torch 2.x integrations
(StatefulDataLoader, Lightning, torch.distributed.checkpoint) are in
test_resume_torch2.py."""
import copy
import json

import numpy as np
import pytest

from conftest import need_torch

torch = need_torch()
from augloader import _state  # noqa: E402
from augloader.torch import AugloaderDataset, merge_states  # noqa: E402

ARGS = ["--policy", "nodesam:0.5,submix:p=0.4:0.5", "--batch-size", "8", "--seed", "4", "--workers", "2"]


def key(t):
    """A batch as the test compares it: its graph ids and its digest."""
    return (tuple(t["graph_id"].tolist()), t["digest"])


def dataset(url, **kw):
    return AugloaderDataset(url, pyg=False, digest=True, **kw)


def take(ds, k):
    """The first k batches of ds's epoch, and its state after them."""
    it, out = iter(ds), []
    for _ in range(k):
        out.append(key(next(it)))
    return out, ds.state_dict()


@pytest.fixture(scope="module")
def served(bins, make_synth_shards, tmp_path_factory):
    import augloader

    d = augloader.Daemon(make_synth_shards(80, 6), binary=str(bins / "augloader"), args=ARGS[:2] + ARGS[6:],
                         seed=4, batch_size=8)
    d.start()
    yield d
    d.stop()


def test_resume_same_world(served):
    """10 batches an epoch: resumed at k = 3 (mid-epoch), twice (3 then 4
    more), at k = 10 (the last batch: nothing more this epoch, and the next
    epoch is epoch 2 from its start), and through a DataLoader with 2
    workers after a state taken without one."""
    full = [key(t) for t in dataset(served.url)]
    assert len(full) == 10
    ds = dataset(served.url)
    head, st = take(ds, 3)
    assert head == full[:3] and st["batches"] == 3 and st["graphs"] == 24 and st["epoch"] == 0
    json.dumps(st)  # plain
    ds2 = dataset(served.url)
    ds2.load_state_dict(st)
    mid, st2 = take(ds2, 4)
    assert mid == full[3:7] and st2["batches"] == 7
    ds3 = dataset(served.url)
    ds3.load_state_dict(copy.deepcopy(st2))
    assert ds3.state_dict() == st2, "a state loaded and saved again before any batch changed"
    assert [key(t) for t in ds3] == full[7:]
    # At the last batch.
    ds4 = dataset(served.url)
    _, last = take(ds4, 10)
    ds5 = dataset(served.url)
    ds5.load_state_dict(last)
    assert ds5.epoch == 0 and [key(t) for t in ds5] == []
    ds5.set_epoch(1)
    ref = dataset(served.url)
    ref.set_epoch(1)
    assert [key(t) for t in ds5] == [key(t) for t in ref]
    # A DataLoader with 2 workers continues a state taken without one.
    ds6 = dataset(served.url)
    ds6.load_state_dict(st)
    dl = torch.utils.data.DataLoader(ds6, batch_size=None, num_workers=2)
    assert [key(t) for t in dl] == full[3:]
    with pytest.raises(RuntimeError, match="DataLoader workers"):
        ds6.state_dict()


def test_elastic_from_rank_states(served):
    """Two ranks take 3 and 2 batches (batches of one graph: a batch's
    digest is its graph's bytes), their states saved apart are merged and
    resumed at 3 ranks, then at 1: every graph of the epoch once, each in
    the bytes of the uninterrupted one-rank epoch."""
    one = {key(t)[0][0]: key(t)[1] for t in dataset(served.url, batch_size=1)}
    assert len(one) == 80
    got = []
    states = []
    for r, k in ((0, 3), (1, 2)):
        ds = dataset(served.url, batch_size=1, rank=r, world=2)
        head, st = take(ds, k)
        got += head
        states.append(st)
    with pytest.raises(_state.StateError, match=r"lacks ranks \[1\]"):
        dataset(served.url, batch_size=1, rank=0, world=3).load_state_dict(states[0])
    merged = merge_states(states)
    states = []
    for r in range(3):
        ds = dataset(served.url, batch_size=1, rank=r, world=3)
        ds.load_state_dict(merged)
        head, st = take(ds, 4 - r)
        got += head
        states.append(st)
    merged = merge_states(states)
    ds = dataset(served.url, batch_size=1)
    ds.load_state_dict(merged)
    got += [key(t) for t in ds]
    ids = [g[0] for g, _ in got]
    assert sorted(ids) == sorted(one), "across the phases the epoch's graphs are not each delivered once"
    assert all(d == one[g[0]] for g, d in got), "a graph's bytes differ from the uninterrupted epoch's"


def test_refused(served, bins, make_synth_shards):
    """A damaged or edited state, another request, another dataset: each
    refused, naming the field."""
    import augloader

    ds = dataset(served.url)
    _, st = take(ds, 2)
    bad = [
        ({**st, "batches": "2"}, "batches"),
        ({**st, "extra": 1}, "unknown fields"),
        ({k: v for k, v in st.items() if k != "epoch"}, "missing"),
        ({**st, "format": "augloader-state/9"}, "format"),
        ({**st, "detail": "{"}, "not JSON"),
        ({**st, "batches": 3}, "disagree"),
        ({**st, "rank": 1}, "rank 1 of world 1"),
    ]
    d = json.loads(st["detail"])
    d["ranks"]["0"] = [40, 320]
    d["total"] = 10
    bad.append(({**st, "detail": json.dumps(d), "batches": 40, "graphs": 320}, "past the epoch"))
    for state, want in bad:
        with pytest.raises(_state.StateError, match=want):
            dataset(served.url).load_state_dict(state)
    with pytest.raises(_state.StateError, match="batch_size 0 vs 4"):
        dataset(served.url, batch_size=4).load_state_dict(st)
    other = augloader.Daemon(make_synth_shards(80, 7), binary=str(bins / "augloader"), args=ARGS[:2] + ARGS[6:],
                             seed=5, batch_size=8)
    with other:
        ds = dataset(other.url)
        ds.load_state_dict(st)
        with pytest.raises(_state.StateError, match=r"seed 4 vs 5.*\(state vs this daemon\)"):
            next(iter(ds))


def test_prefetch_not_counted(served):
    """prefetch=3: batches made ahead on a thread are not in the state;
    the state after k batches resumes at batch k."""
    import time

    full = [key(t) for t in dataset(served.url)]
    ds = dataset(served.url, prefetch=3)
    it = iter(ds)
    head = [key(next(it)) for _ in range(2)]
    time.sleep(0.2)  # the thread fills its queue
    st = ds.state_dict()
    assert head == full[:2] and st["batches"] == 2
    ds2 = dataset(served.url, prefetch=3)
    ds2.load_state_dict(st)
    assert [key(t) for t in ds2] == full[2:]


def test_manual_commit(served):
    """commit="manual": a batch fetched ahead is not in the state until
    committed (Lightning fetches one ahead)."""
    full = [key(t) for t in dataset(served.url)]
    ds = dataset(served.url, commit="manual")
    it = iter(ds)
    a, b = next(it), next(it)
    assert ds.state_dict()["batches"] == 0
    ds.commit(a)
    st = ds.state_dict()
    assert st["batches"] == 1
    ds2 = dataset(served.url)
    ds2.load_state_dict(st)
    assert [key(t) for t in ds2] == full[1:]
    assert key(b) == full[1]
    with pytest.raises(ValueError, match="commit of batch"):
        ds.commit(a)
    assert np.array_equal(b["graph_id"].numpy(), np.array(full[1][0]))
