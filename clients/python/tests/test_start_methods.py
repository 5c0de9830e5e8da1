"""DataLoader workers under every start method (issue #65): fork, spawn
and forkserver (Python 3.14's default on Linux), each as the DataLoader's
multiprocessing_context under this process's default (fork). On fa5e656
spawn and forkserver workers crashed at their first batch (a fork
context's lock carried into them), and a state loaded under forkserver's
persistent workers was taken silently (its workers are the fork server's
children, which the check did not count): 5 of 12 batches trained twice."""
import hashlib

import pytest

from conftest import need_torch

torch = need_torch()
import augloader  # noqa: E402
from augloader.torch import AugloaderDataset  # noqa: E402

METHODS = ["fork", "spawn", "forkserver"]


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    with augloader.Daemon(make_synth_shards(60, 8), binary=str(bins / "augloader"), policy="nodesam", seed=0,
                          batch_size=5) as d:
        yield d


def loader(ds, method, persistent):
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent,
                                       multiprocessing_context=method)


def ids(batches):
    return sorted(g for b in batches for g in b["graph_id"].tolist())


@pytest.mark.parametrize("method", METHODS)
def test_epochs_under_start_method(served, method):
    """Two epochs through persistent workers: every graph once each, the
    digests of a worker-less read of the same epochs (epochs moved on in
    the workers together)."""
    plain = AugloaderDataset(served.url, pyg=False, digest=True)
    want = [sorted(b["digest"] for b in plain) for _ in range(2)]
    ds = AugloaderDataset(served.url, pyg=False, digest=True)
    dl = loader(ds, method, persistent=True)
    for e in range(2):
        got = list(dl)
        assert ids(got) == list(range(60)), f"{method}, epoch {e}: not every graph once"
        assert sorted(b["digest"] for b in got) == want[e], f"{method}, epoch {e}: other batches than a plain read's"


@pytest.mark.parametrize("method", METHODS)
def test_state_refused_under_persistent_workers(served, method):
    """A state loaded while persistent workers run is refused under every
    start method; with workers that are not persistent it is taken, and
    the next epoch delivers what the state left."""
    src = AugloaderDataset(served.url, pyg=False)
    it = iter(src)
    for _ in range(3):
        next(it)
    state = src.state_dict()
    rest = ids(it)
    ds = AugloaderDataset(served.url, pyg=False)
    dl = loader(ds, method, persistent=True)
    assert ids(dl) == list(range(60))
    with pytest.raises(RuntimeError, match="persistent DataLoader workers"):
        ds.load_state_dict(state)
    del dl
    ds = AugloaderDataset(served.url, pyg=False)
    dl = loader(ds, method, persistent=False)
    assert ids(dl) == list(range(60))
    ds.load_state_dict(state)
    assert ids(dl) == rest


def tensors_digest(b) -> tuple:
    """(graph ids, sha256 of the batch's PyG fields' bytes) of a PyG Batch or
    of the dict the dataset gives without PyG."""
    get = b.__getitem__ if isinstance(b, dict) else lambda k: getattr(b, k)
    h = hashlib.sha256()
    for k in ("edge_index", "x", "y", "batch", "ptr", "graph_id"):
        h.update(get(k).contiguous().numpy().tobytes())
    return tuple(get("graph_id").tolist()), h.hexdigest()


@pytest.mark.parametrize("method", METHODS)
def test_shared_memory_tensors_under_start_method(served, method):
    """Over shared memory (each worker maps a ring of its own, and the
    tensors it sends are views of that ring until torch moves them to the
    trainer) in PyG's layout (x dense, made in the worker): two epochs
    through persistent workers equal a worker-less read of the same epochs,
    tensor by tensor. The rings hold 256 KiB, so the daemon writes each
    worker's several times over in an epoch (about 1.2 MB): a message
    released while a tensor over it is still on its way fails this."""
    url = served.shm_url + "?ring=262144"
    plain = AugloaderDataset(url, pyg=True)
    want = [sorted(tensors_digest(b) for b in plain) for _ in range(2)]
    dl = loader(AugloaderDataset(url, pyg=True), method, persistent=True)
    for e in range(2):
        got = sorted(tensors_digest(b) for b in dl)
        assert got, f"{method}, epoch {e}: no batches"
        assert got == want[e], f"{method}, epoch {e}: other tensors than a worker-less read's over shared memory"
