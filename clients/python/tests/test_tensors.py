"""augloader.torch's trainer side: the two layouts of to_tensors, the code
embedding that stands in for one-hot × W, and the prefetcher."""
import dataclasses

import numpy as np
import pytest

import augloader
from conftest import need_torch


@pytest.fixture()
def batches(synth_shards, daemon):
    need_torch()
    d = daemon("--shards", synth_shards, "--policy", "nodesam", "--batch-size", "16", "--seed", "4")
    return list(augloader.connect(d.unix).epoch(2)), d


def test_layouts_agree(batches):
    """codes + CodeEmbedding equals the dense one-hot x times the same
    weights, for every batch of a NodeSam epoch (merged nodes carry two
    codes), and the other tensors are the same in both layouts."""
    import torch
    from augloader.torch import CodeEmbedding, to_tensors

    bs, _ = batches
    emb = CodeEmbedding(bs[0].feature_dim, 8).double()
    several = 0
    for b in bs:
        dense, codes = to_tensors(b, "cpu"), to_tensors(b, "cpu", layout="codes")
        assert codes["x"] is None and codes["feature_dim"] == b.feature_dim
        assert codes["x_code"].dtype == torch.int32 and codes["x_weight"].dtype == torch.float32
        for k in ("edge_index", "batch", "ptr", "y", "y_soft", "graph_id", "padded"):
            assert torch.equal(dense[k], codes[k]), k
        assert torch.equal(dense["x"], torch.from_numpy(b.dense_x()))
        want = dense["x"].double() @ emb.weight
        got = emb({**codes, "x_weight": codes["x_weight"].double()})
        assert torch.allclose(got, want, atol=1e-12), float((got - want).abs().max())
        several += int(codes["x_code"].shape[0] != codes["num_nodes"])
    assert several, "no batch had a node with two codes: the index_add_ path went untested"


def test_hard_labels_one_hot_and_own(batches):
    """Hard labels (NodeSam: every q is 1): soft is False and y_soft is
    one-hot of y, each batch its own array (rows of the identity kept per
    class count are gathered, not handed out): writing into one batch's
    y_soft changes no other. The label check's answer (soft_labels) is
    the one a Batch built by hand finds."""
    import torch
    from augloader.torch import to_tensors

    bs, _ = batches
    for b in bs:
        t = to_tensors(b, "cpu")
        assert not t["soft"] and not b.soft_labels
        assert dataclasses.replace(b, _soft=None).soft_labels is False
        want = torch.nn.functional.one_hot(t["y"], b.num_classes).float()
        assert torch.equal(t["y_soft"], want)
        t["y_soft"].mul_(5.0).add_(1.0)
        assert torch.equal(to_tensors(b, "cpu")["y_soft"], want)
    mixed = bs[0]
    q = mixed.y_q.copy()
    q[0] = 0.25
    b = dataclasses.replace(mixed, y_q=q, _soft=None)
    t = to_tensors(b, "cpu")
    assert b.soft_labels and t["soft"]
    assert torch.equal(t["y_soft"], torch.from_numpy(b.soft_y()))


def test_views_share_the_batch_memory(batches):
    """On the CPU the int32/float32 tensors are the batch's own buffers,
    not copies, and they keep the batch alive."""
    from augloader.torch import to_tensors

    bs, _ = batches
    b = bs[0]
    t = to_tensors(b, "cpu", layout="codes")
    assert t["x_code"].data_ptr() == b.x_code.ctypes.data
    assert t["x_weight"].data_ptr() == b.x_weight.ctypes.data
    assert t["graph_id"].data_ptr() == b.graph_id.ctypes.data


def test_layout_checked(batches):
    from augloader.torch import AugloaderDataset, to_tensors

    bs, d = batches
    with pytest.raises(ValueError, match="layout"):
        to_tensors(bs[0], "cpu", layout="dense")
    with pytest.raises(ValueError, match="layout"):
        AugloaderDataset(d.unix, layout="onehot")


def test_prefetcher_same_batches_in_order(batches):
    """Prefetcher yields to_tensors of every batch, in the stream's order,
    and raises the stream's error where the loop meets it."""
    import torch
    from augloader.torch import Prefetcher, to_tensors

    bs, d = batches
    got = list(Prefetcher(augloader.connect(d.unix).epoch(2), "cpu", layout="codes", depth=3))
    assert len(got) == len(bs)
    for t, b in zip(got, bs):
        want = to_tensors(b, "cpu", layout="codes")
        for k in ("x_code", "x_node", "x_weight", "edge_index", "graph_id"):
            assert torch.equal(t[k], want[k]), k

    def broken():
        yield bs[0]
        raise augloader.ConnectionLost("cut")

    p = Prefetcher(broken(), "cpu")
    it = iter(p)
    assert next(it)["num_graphs"] == bs[0].num_graphs
    with pytest.raises(augloader.ConnectionLost, match="cut"):
        next(it)
    assert p.wait_s >= 0


@pytest.fixture()
def one_hot(monkeypatch):
    """augloader.torch's one-hot buffers, emptied, and put back after."""
    from augloader import torch as at

    monkeypatch.setattr(at._ONE_HOT, "_bufs", [])
    return at._ONE_HOT


def test_one_hot_buffers_cleared_exactly(batches, one_hot, monkeypatch):
    """The pyg layout's x in a reused buffer: each batch's x equals a fresh
    dense_x(), whatever the buffer held: the last batch's positions (cleared
    one by one) or a batch's x changed in place (cleared whole). A fake
    says every buffer is idle, so this runs on any torch (the real
    idleness test, torch's storage use count, is pinned below)."""
    import torch
    from augloader.torch import to_tensors

    monkeypatch.setattr(one_hot, "_use_count", lambda cdata: 2)
    monkeypatch.setattr(one_hot, "_idle", lambda base: True)
    bs, _ = batches
    ptrs = set()
    for i, b in enumerate(bs * 2):
        x = to_tensors(b, "cpu")["x"]
        assert torch.equal(x, torch.from_numpy(b.dense_x())), f"batch {i}"
        ptrs.add(x.data_ptr())
        if i % 3 == 1:
            x.mul_(3.0).add_(1.0)  # in place: the next batch must not see it
        elif i % 3 == 2:
            x[:, 0] = 7.0  # a column no code set
        del x
    # A new buffer only for a batch larger than every buffer so far.
    assert len(ptrs) == len(one_hot._bufs) <= 3 < 2 * len(bs), "the buffers were not reused"


@pytest.mark.parametrize("mode", ["use_count", "numpy"])
def test_one_hot_buffers_never_reused_while_referenced(batches, one_hot, monkeypatch, mode):
    """A batch's x, a view of it kept after x is gone, and a tensor autograd
    saved for the backward pass each keep their buffer from the next
    batches, which get other buffers; an x changed in place is cleared
    before its buffer serves again; once everything is dropped, a buffer
    is taken again. use_count: torch 2.x's storage use count; numpy: torch
    before 2.x, NumPy buffers idle by reference count."""
    import torch
    from augloader.torch import to_tensors

    if mode == "numpy":
        monkeypatch.setattr(one_hot, "_use_count", None)
    elif not one_hot.enabled:
        pytest.skip(f"torch {torch.__version__} cannot say a storage's use count (torch._C._storage_Use_Count); "
                    "the numpy mode serves it")
    bs, _ = batches
    kept = [to_tensors(b, "cpu")["x"] for b in bs[:2]]
    view = to_tensors(bs[2], "cpu")["x"][:, :3]  # only a view survives
    lin = torch.nn.Linear(bs[3].feature_dim, 4, bias=False)
    saved = lin(to_tensors(bs[3], "cpu")["x"]).sum()  # autograd holds x for the weight's gradient
    want = [torch.from_numpy(b.dense_x()) for b in bs[:4]]
    for i, b in enumerate((bs * 4)[4:]):
        x = to_tensors(b, "cpu")["x"]
        assert torch.equal(x, torch.from_numpy(b.dense_x())), f"batch {i}"
        if i % 2:
            x.mul_(3.0).add_(1.0)  # in place: the next batch must not see it
        del x
    assert all(torch.equal(k, w) for k, w in zip(kept, want[:2]))
    assert torch.equal(view, want[2][:, :3])
    saved.backward()
    assert torch.allclose(lin.weight.grad, want[3].sum(0).expand(4, -1))
    # 4 held, and the dropped batches shared one or two (a larger batch).
    assert 5 <= len(one_hot._bufs) <= 6, "the dropped batches did not share their buffers"
    ptrs = {k.data_ptr() for k in kept} | {view.data_ptr()}
    del kept, view, saved
    x = to_tensors(bs[0], "cpu")["x"]
    assert torch.equal(x, want[0])
    bufs = {e[0].ctypes.data if mode == "numpy" else e[0].data_ptr() for e in one_hot._bufs}
    assert x.data_ptr() in ptrs | bufs


def test_one_hot_buffer_moved_to_shared_memory_leaves_the_pool(batches, one_hot):
    """A batch's x whose storage went to shared memory (what torch does to
    a tensor sent to another process, which may read it after this one let
    go) never serves again, idle or not: the next batches get other
    buffers, the sent x keeps its values, and the shared buffer leaves the
    pool once a search finds it idle."""
    import torch
    from augloader.torch import to_tensors

    if not one_hot.enabled:
        pytest.skip(f"torch {torch.__version__} cannot say a storage's use count: every buffer there is a NumPy array")
    bs, _ = batches
    sent = to_tensors(bs[0], "cpu")["x"]
    sent.share_memory_()
    want = sent.clone()
    shared = sent.untyped_storage().data_ptr()
    for b in bs[1:] * 2:
        x = to_tensors(b, "cpu")["x"]
        assert torch.equal(x, torch.from_numpy(b.dense_x()))
        assert x.untyped_storage().data_ptr() != shared
        del x
    assert torch.equal(sent, want)
    del sent
    # Idle now, and large enough for the batch it served: the search finds
    # it, and drops it.
    x = to_tensors(bs[0], "cpu")["x"]
    assert x.untyped_storage().data_ptr() != shared
    assert all(not e[0].untyped_storage().is_shared() for e in one_hot._bufs), "the shared buffer stayed in the pool"
