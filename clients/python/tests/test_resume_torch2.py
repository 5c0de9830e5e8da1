"""Checkpoint and resume inside the torch 2.x tools (docs/checkpoint.md),
against real daemons: torchdata's StatefulDataLoader with 0 and 2
persistent workers (mid-epoch, at the epoch's last batch, resumed twice),
and its state continued under another number of workers;
an elastic resume under torch.distributed (gloo) with the state in
torch.distributed.checkpoint, 2 ranks then 3 (and then 1); Lightning's
Trainer stopped mid-epoch and resumed from a checkpoint. These need torch
2.x, torchdata and Lightning: `make test` runs them in .venv-torch2
(AUGLOADER_TORCH2=1); elsewhere they skip."""
import json
import os
import subprocess
import sys

import pytest

try:
    import lightning.pytorch as pl
    import torch
    from torchdata.stateful_dataloader import StatefulDataLoader
except ImportError as e:
    if os.environ.get("AUGLOADER_TORCH2") == "1":
        raise
    pytest.skip(f"needs torch 2.x, torchdata and lightning ({e}): `make test-torch2` runs these in .venv-torch2",
                allow_module_level=True)

import augloader  # noqa: E402
from augloader.lightning import AugloaderDataModule  # noqa: E402
from augloader.torch import AugloaderDataset, dataset_state  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def key(t):
    return (tuple(t["graph_id"].tolist()), t["digest"])


def dataset(url, **kw):
    return AugloaderDataset(url, pyg=False, digest=True, **kw)


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    d = augloader.Daemon(make_synth_shards(80, 6), binary=str(bins / "augloader"), policy="nodesam:0.5,submix:p=0.4:0.5",
                         seed=4, batch_size=8, workers=2)
    d.start()
    yield d
    d.stop()


def loader(url, workers):
    ds = dataset(url)
    kw = dict(num_workers=workers, persistent_workers=True) if workers else {}
    return ds, StatefulDataLoader(ds, batch_size=None, **kw)


def take(dl, k):
    it, out = iter(dl), []
    for _ in range(k):
        out.append(key(next(it)))
    return out, dl.state_dict()


def rest(ds, dl, epoch, epochs=2):
    """The batches of the epochs from epoch on, as a resumed loop reads them."""
    out = []
    for e in range(epoch, epochs):
        ds.set_epoch(e)
        out.append([key(t) for t in dl])
    return out


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader(served, workers):
    """10 batches an epoch, 2 epochs. A state after k = 3 batches, after the
    epoch's last batch (k = 10), and after resuming twice (3, then 4 more):
    a new loader loaded with it yields exactly the uninterrupted run's
    remaining batches, and the next epoch is epoch 1, whole."""
    ds, dl = loader(served.url, workers)
    full = rest(ds, dl, 0)
    assert [len(e) for e in full] == [10, 10] and full[0] != full[1]
    for k in (3, 10):
        ds, dl = loader(served.url, workers)
        ds.set_epoch(0)
        head, st = take(dl, k)
        assert head == full[0][:k]
        ds2, dl2 = loader(served.url, workers)
        dl2.load_state_dict(st)
        assert rest(ds2, dl2, 0) == [full[0][k:], full[1]], f"resumed after {k} batches"
    # Twice.
    ds, dl = loader(served.url, workers)
    ds.set_epoch(0)
    _, st = take(dl, 3)
    ds2, dl2 = loader(served.url, workers)
    dl2.load_state_dict(st)
    ds2.set_epoch(0)
    mid, st2 = take(dl2, 4)
    assert mid == full[0][3:7]
    ds3, dl3 = loader(served.url, workers)
    dl3.load_state_dict(st2)
    assert rest(ds3, dl3, 0) == [full[0][7:], full[1]]


@pytest.mark.parametrize("workers,resumed", [(2, 3), (2, 0), (0, 2)])
def test_other_worker_count(served, workers, resumed):
    """A StatefulDataLoader's state with K workers, turned into the
    dataset's own (dataset_state), continues in a loader with another
    number of workers: the uninterrupted run's remaining batches."""
    ds, dl = loader(served.url, workers)
    full = rest(ds, dl, 0, 1)[0]
    ds, dl = loader(served.url, workers)
    head, st = take(dl, 5)
    assert head == full[:5]
    ds2, dl2 = loader(served.url, resumed)
    ds2.load_state_dict(dataset_state(st))
    assert [key(t) for t in dl2] == full[5:]


@pytest.mark.parametrize("workers,taken", [(2, 1), (3, 1), (3, 2), (3, 0)])
def test_dataset_state_before_every_worker_delivered(served, workers, taken):
    """Issue #44, item 9: a StatefulDataLoader state taken before every
    worker has delivered a batch of the epoch (taken < workers) turns into
    the dataset's own state, which continues in a loader without workers
    (b497eeb refused it: the idle workers' states had no worker position)."""
    ds, dl = loader(served.url, workers)
    full = rest(ds, dl, 0, 1)[0]
    ds, dl = loader(served.url, workers)
    head, st = take(dl, taken)
    assert head == full[:taken]
    ds2, dl2 = loader(served.url, 0)
    ds2.load_state_dict(dataset_state(st))
    assert [key(t) for t in dl2] == full[taken:]


def run_ranks(url, world, tmp, tag, **flags):
    """world processes of dist_resume.py; each rank's received batches."""
    init = tmp / f"init-{tag}"
    procs = []
    for r in range(world):
        args = [sys.executable, os.path.join(HERE, "dist_resume.py"), "--url", url, "--init", str(init),
                "--out", str(tmp / f"{tag}-{r}.jsonl")]
        for k, v in flags.items():
            args += [f"--{k}", str(v)]
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out = []
    for r, p in enumerate(procs):
        log, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"{tag} rank {r}:\n{log}"
        text = (tmp / f"{tag}-{r}.jsonl").read_text()
        out += [json.loads(line) for line in text.splitlines() if line]
    return out


@pytest.mark.parametrize("resumed_world", [3, 1])
def test_elastic_distributed_checkpoint(served, tmp_path, resumed_world):
    """2 ranks (gloo) read 5 and 6 batches of one graph, the loader's state
    saved with torch.distributed.checkpoint; resumed_world ranks load it and
    read the rest. Across both phases every graph of the epoch is delivered
    exactly once (padded repeats aside), each in the bytes of the
    uninterrupted one-rank epoch."""
    one = {}
    for t in dataset(served.url, batch_size=1):
        one[t["graph_id"].item()] = t["digest"]
    assert len(one) == 80
    ckpt = tmp_path / "ckpt"
    first = run_ranks(served.url, 2, tmp_path, "a", steps=5, skew=1, save=ckpt)
    assert len(first) == 11
    second = run_ranks(served.url, resumed_world, tmp_path, "b", load=ckpt)
    got = [(b["ids"][0], b["digest"]) for b in first + second if not b["padded"][0]]
    assert sorted(g for g, _ in got) == sorted(one), "the epoch's graphs are not each delivered once"
    assert all(d == one[g] for g, d in got), "a graph's bytes differ from the uninterrupted epoch's"


@pytest.mark.parametrize("stops,then", [("3,5", 2), ("5,3", 3), ("0,4", 1)])
def test_state_saved_right_after_a_load(served, tmp_path, stops, then):
    """Issue #44, item 2: 2 ranks stop at uneven batches and save; the next
    run loads that state at world `then` and saves again at once, before
    any batch (a checkpoint callback that fires right after a resume), and
    stops there; a third run loads that state and reads to the end. Every
    graph once, in the uninterrupted bytes (b497eeb recorded every rank at
    rank 0's position: 32 graphs twice, or never)."""
    one = {t["graph_id"].item(): t["digest"] for t in dataset(served.url, batch_size=1)}
    a, b = tmp_path / "a", tmp_path / "b"
    first = run_ranks(served.url, 2, tmp_path, "a", stops=stops, save=a)
    mid = run_ranks(served.url, then, tmp_path, "b", load=a, resave=b, stops=",".join(["0"] * then))
    assert mid == []
    last = run_ranks(served.url, then, tmp_path, "c", load=b)
    got = [(x["ids"][0], x["digest"]) for x in first + last if not x["padded"][0]]
    ids = sorted(g for g, _ in got)
    assert ids == sorted(one), f"{len(ids)} deliveries of {len(one)} graphs: twice {sorted({g for g in ids if ids.count(g) > 1})}"
    assert all(d == one[g] for g, d in got)


class _Stop(Exception):
    pass


class Recorder(pl.LightningModule):
    """Records every training batch's graph ids (and stops at a step)."""

    def __init__(self, path, stop_at=None):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.path, self.stop_at = path, stop_at

    def training_step(self, batch, i):
        with open(self.path, "a") as f:
            f.write(json.dumps([self.current_epoch, batch["graph_id"].tolist()]) + "\n")
        return (self.w * batch["num_graphs"]).sum()

    def on_train_batch_end(self, outputs, batch, i):
        if self.stop_at is not None and self.global_step >= self.stop_at:
            raise _Stop()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainer(tmp, max_epochs=2, **kw):
    return pl.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, **kw)


def test_lightning_resume(served, tmp_path):
    """Trainer.fit checkpoints every 3 steps and stops (an exception) after
    step 5; a new Trainer resumed with ckpt_path=step 3's checkpoint
    trains on batch 4 of epoch 0 on, not on the epoch's start (nor on
    batch 5: Lightning fetches one ahead), to the end of epoch 1."""
    def read(p):
        return [tuple(json.loads(line)[1]) for line in open(p)]

    ref = tmp_path / "ref.jsonl"
    trainer(tmp_path, enable_checkpointing=False).fit(Recorder(ref), datamodule=AugloaderDataModule(served.url, pyg=False))
    full = read(ref)
    assert len(full) == 20
    ck = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ck", filename="{step}", every_n_train_steps=3, save_top_k=-1)
    stopped = tmp_path / "stopped.jsonl"
    with pytest.raises(_Stop):
        trainer(tmp_path, callbacks=[ck]).fit(Recorder(stopped, stop_at=5), datamodule=AugloaderDataModule(served.url, pyg=False))
    assert read(stopped) == full[:5]
    resumed = tmp_path / "resumed.jsonl"
    trainer(tmp_path, enable_checkpointing=False).fit(Recorder(resumed), datamodule=AugloaderDataModule(served.url, pyg=False),
                                                      ckpt_path=tmp_path / "ck" / "step=3.ckpt")
    assert read(resumed) == full[3:]


@pytest.mark.parametrize("where", ["last_step", "epoch_end"])
def test_lightning_resume_at_an_epoch_boundary(served, tmp_path, where):
    """Issue #44, item 9: a fit resumed from the checkpoint of epoch 0's
    last step (every_n_train_steps), or from the one saved at its end
    (every_n_epochs), trains epoch 1 whole, its own batches (b497eeb
    trained 0 batches and exited 0: Lightning makes the resumed epoch's
    iterator before it calls set_epoch; the datamodule sets the epoch)."""
    def read(p):
        return [tuple(json.loads(line)[1]) for line in open(p)]

    ref = tmp_path / "ref.jsonl"
    trainer(tmp_path, enable_checkpointing=False).fit(Recorder(ref), datamodule=AugloaderDataModule(served.url, pyg=False))
    full = read(ref)
    every = dict(every_n_train_steps=10) if where == "last_step" else dict(every_n_epochs=1, save_on_train_epoch_end=True)
    ck = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ck", filename="{epoch}-{step}", save_top_k=-1, **every)
    trainer(tmp_path, callbacks=[ck]).fit(Recorder(tmp_path / "first.jsonl"), datamodule=AugloaderDataModule(served.url, pyg=False))
    resumed = tmp_path / "resumed.jsonl"
    trainer(tmp_path, enable_checkpointing=False).fit(Recorder(resumed), datamodule=AugloaderDataModule(served.url, pyg=False),
                                                      ckpt_path=tmp_path / "ck" / "epoch=0-step=10.ckpt")
    assert read(resumed) == full[10:]


LIGHTNING_SCHEDULES = int(os.environ.get("AUGLOADER_LIGHTNING_SCHEDULES", "4"))


def lightning_schedules(seed: int = 55) -> list:
    """Kill points (global steps after which a fit stops, its checkpoint of
    that step saved) of 3 epochs of 10 steps: the case of issue #55 (killed
    at epoch 0's last step, resumed, killed two steps later, resumed), then
    random chains drawn around the epochs' ends."""
    import random
    rng = random.Random(seed)
    out = [[10, 12], [10, 20, 21]]
    near = [1, 9, 10, 11, 19, 20, 21, 29]
    for _ in range(LIGHTNING_SCHEDULES):
        out.append(sorted(rng.sample(near + [rng.randint(1, 29)], rng.randint(1, 3))))
    return out


@pytest.mark.parametrize("kills", lightning_schedules(), ids=lambda k: "kills-" + "-".join(map(str, k)))
def test_lightning_resume_model(served, tmp_path, kills):
    """The resume model's Lightning row: a fit of 3 epochs checkpointing
    every step is stopped after each kill point's step and resumed from
    that step's checkpoint, a new Trainer and datamodule each time; what
    the steps trained, over every run, is the uninterrupted fit's batches,
    each once, each in its epoch. 3520536 trained 12 batches for 10 after
    a kill at an epoch's last step and another two steps later (Lightning
    restarted the epoch it had finished, the datamodule the one after)."""
    def read(p):
        return [tuple([e, *ids]) for e, ids in (json.loads(line) for line in open(p))] if p.exists() else []

    ref = tmp_path / "ref.jsonl"
    trainer(tmp_path, enable_checkpointing=False, max_epochs=3).fit(Recorder(ref), datamodule=AugloaderDataModule(served.url, pyg=False))
    full = read(ref)
    assert len(full) == 30
    got, ckpt = [], None
    for i, kill in enumerate(kills + [None]):
        ck = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / f"ck{i}", filename="{step}", every_n_train_steps=1, save_top_k=-1)
        log = tmp_path / f"run{i}.jsonl"
        try:
            trainer(tmp_path, callbacks=[ck], max_epochs=3).fit(Recorder(log, stop_at=kill),
                                                               datamodule=AugloaderDataModule(served.url, pyg=False),
                                                               ckpt_path=ckpt)
        except _Stop:
            pass
        got += read(log)
        ckpt = tmp_path / f"ck{i}" / f"step={kill}.ckpt"
    twice = sorted({b for b in got if got.count(b) > 1})
    assert got == full, f"kills at steps {kills}: {len(got)} batches trained for {len(full)}; twice: {twice[:4]}"
