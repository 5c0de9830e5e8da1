"""The trainer's path onto a GPU: to_tensors off the CPU (the narrow arrays
cross the bus and are widened and one-hot encoded there), Prefetcher's
side-stream copies, twin_tensors and AugloaderDataset(device="cuda") give
the same tensors as the CPU path, which test_edge holds to the daemon's
bytes. Every batch is kept until the epoch ends and compared again then:
a copy still in flight, or a buffer its stream handed back too early,
shows as a later batch's data in an earlier one.

Needs a CUDA device; skipped where there is none (CI has none: run it on a
GPU machine, as docs/bench.md's GPU section says)."""
import pytest

import augloader
from conftest import need_torch

LAYOUTS = ("pyg", "codes")


@pytest.fixture(scope="module")
def cuda():
    torch = need_torch()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the GPU path is checked on a GPU machine")
    return torch


@pytest.fixture(scope="module")
def served(cuda, bins, make_synth_shards):
    d = augloader.Daemon(make_synth_shards(400, 11), binary=str(bins / "augloader"), policy="nodesam", workers=3, seed=7,
                         batch_size=16, flight=True, twins=["dropnode:ratio=0.2 / subgraph:ratio=0.2"])
    d.start()
    yield d
    d.stop()


def host(t):
    """A dict of tensors as CPU tensors (other values as they are)."""
    import torch
    return {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}


def same(got, want, where):
    import torch
    assert set(got) == set(want), f"{where}: keys {sorted(got)} vs {sorted(want)}"
    for k, w in want.items():
        g = got[k]
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), f"{where}: {k} is {type(g)}"
            assert g.dtype == w.dtype and g.shape == w.shape, f"{where}: {k} {g.dtype}{tuple(g.shape)} vs {w.dtype}{tuple(w.shape)}"
            assert torch.equal(g.cpu(), w) or (w.is_floating_point() and torch.allclose(g.cpu(), w, equal_nan=True)), \
                f"{where}: {k} differs from the CPU path"
        elif k != "device":
            assert g == w, f"{where}: {k} {g!r} vs {w!r}"


def reference(url, epoch, layout, **kw):
    from augloader.torch import to_tensors, twin_tensors
    out = []
    for b in augloader.connect(url).epoch(epoch, **kw):
        if b.twins > 1:
            out.append(tuple(host(t) for t in twin_tensors(b, "cpu", layout=layout)))
        else:
            out.append(host(to_tensors(b, "cpu", layout=layout)))
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("non_blocking", [False, True])
def test_to_tensors_on_cuda_is_the_cpu_path(served, layout, non_blocking):
    import torch

    from augloader.torch import to_tensors
    want = reference(served.url, 3, layout)
    kept = []
    for i, b in enumerate(augloader.connect(served.url).epoch(3)):
        t = to_tensors(b, "cuda", layout=layout, non_blocking=non_blocking)
        assert t["edge_index"].device.type == "cuda" and t["edge_index"].dtype == torch.int64
        kept.append(t)
    torch.cuda.synchronize()
    assert len(kept) == len(want)
    for i, (t, w) in enumerate(zip(kept, want)):
        same(t, w, f"batch {i}")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("transport", ["unix", "shm", "flight"])
def test_prefetcher_on_cuda_is_the_cpu_path(served, layout, transport):
    import torch

    from augloader.torch import Prefetcher
    url = {"unix": served.url, "shm": served.shm_url, "flight": served.flight_url}[transport]
    want = reference(served.url, 4, layout)
    kept, x = [], None
    for i, t in enumerate(Prefetcher(augloader.connect(url).epoch(4), "cuda", layout=layout, depth=3)):
        same(t, want[i], f"batch {i} on arrival")
        # Work on the default stream between batches, as a training step
        # does, so a copy not ordered before it would show.
        x = (t["edge_index"].float().sum() if x is None else x + t["edge_index"].float().sum())
        kept.append(t)
    torch.cuda.synchronize()
    assert len(kept) == len(want)
    for i, t in enumerate(kept):
        same(t, want[i], f"batch {i} at the epoch's end")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_twins_on_cuda_are_the_cpu_path(served, layout):
    import torch

    from augloader.torch import Prefetcher
    want = reference(served.url, 5, layout, twins=2)
    kept = list(Prefetcher(augloader.connect(served.url).epoch(5, twins=2), "cuda", layout=layout))
    torch.cuda.synchronize()
    assert len(kept) == len(want)
    for i, (pair, w) in enumerate(zip(kept, want)):
        assert len(pair) == 2
        for j in range(2):
            same(pair[j], w[j], f"batch {i} twin {j}")


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_on_cuda_is_the_cpu_path(served, workers):
    import torch

    from augloader.torch import AugloaderDataset
    want = reference(served.url, 6, "pyg")
    ds = AugloaderDataset(served.url, device="cuda", pyg=False)
    ds.set_epoch(6)
    if workers:
        # Workers make CPU tensors; the trainer moves them (CUDA cannot be
        # initialised in a forked worker).
        ds = AugloaderDataset(served.url, pyg=False)
        ds.set_epoch(6)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, pin_memory=bool(workers))
    got = [{k: (v.to("cuda", non_blocking=True) if isinstance(v, torch.Tensor) else v) for k, v in t.items()} for t in dl]
    torch.cuda.synchronize()
    # Workers interleave; batch_index says where each batch stands.
    got.sort(key=lambda t: int(t["batch_index"]))
    assert [int(t.pop("batch_index")) for t in got] == list(range(len(want)))
    assert len(got) == len(want)
    for i, (t, w) in enumerate(zip(got, want)):
        same(t, w, f"batch {i}")
