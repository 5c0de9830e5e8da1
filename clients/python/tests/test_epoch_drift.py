"""Ranks of one job whose epochs drift apart (issue #65): the epoch moves
on by itself per process, so one extra iteration on one rank (a peek,
next(iter(ds))) put that rank an epoch ahead for good, and the ranks read
different epochs' partitions with no error. Under torchrun the dataset
names its job (run id, restart, agent) and the daemon refuses a rank that
asks for an older epoch than another rank of the job already did."""
import pytest

from conftest import need_torch

torch = need_torch()
import augloader  # noqa: E402
from augloader.torch import AugloaderDataset  # noqa: E402


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    with augloader.Daemon(make_synth_shards(40, 9), binary=str(bins / "augloader"), policy="nodesam", seed=0,
                          batch_size=5) as d:
        yield d


@pytest.fixture()
def torchrun_env(monkeypatch, request):
    # What torchrun gives each rank, a run id of each test's own (the
    # daemon is the module's); both ranks here share this process's
    # parent, as a node's ranks share their agent.
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", request.node.name)
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")


def ranks(url):
    return [AugloaderDataset(url, rank=r, world=2, pyg=False) for r in range(2)]


def ids(batches):
    return sorted(g for b in batches for g in b["graph_id"].tolist())


def test_peek_on_one_rank_refused(served, torchrun_env):
    r0, r1 = ranks(served.url)
    assert r0.job and r0.job == r1.job
    next(iter(r0))  # a peek on rank 0 only: its next iteration is epoch 1
    list(r0)
    with pytest.raises(augloader.ServerError) as e:
        list(r1)  # epoch 0, after rank 0 asked for epoch 1
    assert e.value.code == "out_of_range" and "set_epoch" in str(e.value) and "rank 1 of 2 asks for epoch 0" in str(e.value)


def test_ranks_in_step_served(served, torchrun_env):
    """Ranks that iterate alike (one after the other, either first) and a
    peek made good with set_epoch on every rank: every graph once per
    epoch, both ranks together."""
    r0, r1 = ranks(served.url)
    for e in range(3):
        first, second = (r0, r1) if e % 2 == 0 else (r1, r0)
        assert ids(list(first) + list(second)) == list(range(40)), f"epoch {e}"
    next(iter(r0))
    for e in range(3, 5):
        for r in (r0, r1):
            r.set_epoch(e)
        assert ids(list(r0) + list(r1)) == list(range(40)), f"epoch {e} after set_epoch"


def test_probe_dataset_has_epochs_of_its_own(served, torchrun_env):
    """A dataset built to read one batch (the GIN example's model
    dimensions) after the training ones moved on: its epoch 0 is its own
    job's, not refused against the training epochs."""
    r0, r1 = ranks(served.url)
    for _ in range(3):
        list(r0), list(r1)
    probes = ranks(served.url)
    assert probes[0].job != r0.job and probes[0].job == probes[1].job
    for p in probes:
        assert next(iter(p))["graph_id"].numel() > 0


def test_outside_torchrun_not_checked(served, monkeypatch):
    """Without torchrun's environment no job is named: the daemon cannot
    tell the ranks of one job from another's, and checks nothing."""
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    r0, r1 = ranks(served.url)
    assert r0.job == ""
    next(iter(r0))
    list(r0)
    assert len(ids(list(r1))) == 20


def test_daemon_without_job_field(served, torchrun_env, monkeypatch):
    """A daemon older than the job field refuses it as an unknown field
    (bad_request): the dataset asks again without it, and then never
    sends it, the epoch read whole."""
    real, asked = augloader.Client.epoch, []

    def older(self, epoch, **kw):
        asked.append(kw.get("job", ""))
        if kw.get("job"):
            raise augloader.ServerError("bad_request", 'wire: protocol error: request body: json: unknown field "job"')
        return real(self, epoch, **kw)

    monkeypatch.setattr(augloader.Client, "epoch", older)
    r0, _ = ranks(served.url)
    job = r0.job
    assert job
    assert len(ids(list(r0))) == 20 and len(ids(list(r0))) == 20
    sent = [i for i, j in enumerate(asked) if j]
    assert [asked[i] for i in sent] == [job] and asked[sent[0] + 1:] and not any(asked[sent[0] + 1:]), asked
    assert r0.job == ""
