"""augloader.torch's trainer side: the two layouts of to_tensors, the code
embedding that stands in for one-hot × W, and the prefetcher."""
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
