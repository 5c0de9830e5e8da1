"""One daemon, started by augloader.Daemon, serves every fold and policy of
a cross-validation (views); DataLoader workers split a rank's batches so
each arrives exactly once; a test view applies no augmentation unless told."""
import json
import subprocess

import numpy as np
import pytest

import augloader
from conftest import need_torch


@pytest.fixture(scope="module")
def folds(bins, mutag_shards, tmp_path_factory):
    d = tmp_path_factory.mktemp("folds")
    subprocess.run([bins / "augloader", "split", "--shards", mutag_shards, "--folds", "3", "--seed", "0", "--out", d],
                   check=True, capture_output=True)
    return d


def test_daemon_views(bins, mutag_shards, folds):
    views = ["train={fold}:training:nodesam", "mix={fold}:training:submix:p=0.4", "test={fold}:test"]
    with augloader.Daemon(mutag_shards, folds=folds, views=views, binary=str(bins / "augloader"), flight=True) as d:
        assert d.flight_url.startswith("grpc://127.0.0.1:")
        for f in range(3):
            split = json.loads((folds / f"fold-{f:02d}.json").read_text())
            for view, want_ids, policies in (("train", split["training"], {"nodesam"}),
                                             ("mix", split["training"], {"submix"}),
                                             ("test", split["test"], {"none"})):
                stream = d.client().epoch(2, view=view, fold=f)
                batches = list(stream)
                ids = sorted(int(g) for b in batches for g in b.graph_id[~b.padded])
                assert ids == sorted(want_ids), (view, f)
                assert {p for b in batches for p in b.policy} == policies, (view, f)
                cfg = stream.info["config"]
                assert cfg["served"] == len(want_ids) and len(cfg["id"]) == 16
        with pytest.raises(augloader.ServerError) as e:
            list(d.client().epoch(0, view="nope"))
        assert e.value.code == "out_of_range"
    assert "test is a test set: policy none" in d.log


def test_daemon_errors(bins, tmp_path):
    with pytest.raises(augloader.DaemonError) as e:
        augloader.Daemon(tmp_path / "missing", binary=str(bins / "augloader")).start()
    # A missing folder says so and what writes one.
    assert "no such folder" in str(e.value) and "shardconv convert" in str(e.value) and "exited with status 1" in str(e.value)
    with pytest.raises(augloader.DaemonError) as e:
        augloader.Daemon(tmp_path, binary=str(bins / "augloader"), args=["--batch-size", "0"]).start()
    assert "--batch-size 0: want 1..65536" in e.value.log


def test_dropped_daemon_is_killed(bins, mutag_shards):
    import gc

    d = augloader.Daemon(mutag_shards, binary=str(bins / "augloader")).start()
    proc = d.proc
    del d
    gc.collect()
    assert proc.wait(10) is not None  # gone, not left serving


def test_test_set_defaults_to_none(bins, mutag_shards, folds):
    # --split FILE --split-set test without a policy: the trap the audit hit
    # (a NodeSam-augmented test set) is gone.
    with augloader.Daemon(mutag_shards, binary=str(bins / "augloader"),
                          args=["--split", folds / "fold-00.json", "--split-set", "test"]) as d:
        pol = {p for b in d.client().epoch(0) for p in b.policy}
        assert pol == {"none"}
    refused = augloader.Daemon(mutag_shards, binary=str(bins / "augloader"), policy="nodesam",
                               args=["--split", folds / "fold-00.json", "--split-set", "test"])
    try:
        with pytest.raises(augloader.DaemonError) as e:
            refused.start()
    finally:
        refused.stop(check=False)
    assert "--augment-test" in str(e.value)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_dataloader_workers_each_batch_once(bins, synth_shards):
    torch = need_torch()
    from torch.utils.data import DataLoader

    from augloader.torch import AugloaderDataset

    with augloader.Daemon(synth_shards, binary=str(bins / "augloader"), batch_size=8, policy="nodesam") as d:
        want = augloader.connect(d.url).epoch(3, rank=1, world=2, digest=True)
        want_batches = [(b.graph_id.tolist()) for b in want]
        assert len(want_batches) == 5 and len(want.batch_digests) == 5
        # A ring left idle here before the workers fork: a worker must not
        # take it (its parent's memory, which another worker would take too).
        from augloader import _socket

        assert len(list(augloader.connect(d.shm_url).epoch(2))) > 0
        assert any(_socket._IDLE_RINGS.values()), "no idle ring: the fork case goes untested"
        # Over the socket and over shared memory (each worker its own ring).
        for workers, url in ((0, d.url), (2, d.url), (3, d.url), (2, d.shm_url)):
            ds = AugloaderDataset(url, rank=1, world=2, pyg=False, digest=True)
            ds.set_epoch(3)
            got = list(DataLoader(ds, batch_size=None, num_workers=workers))
            assert [t["batch_index"] for t in got] == list(range(5)), (workers, url)
            assert [t["graph_id"].tolist() for t in got] == want_batches, (workers, url)
            assert [t["digest"] for t in got] == want.batch_digests, (workers, url)
