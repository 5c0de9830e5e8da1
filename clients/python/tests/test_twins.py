"""Twins (docs/contrastive.md): k aligned, differently augmented copies of
every graph, against a real daemon. Each twin's graphs are the same graphs
in the same order; twin 0 of the set "dropnode:ratio=0.2 / subgraph" is
byte for byte what the daemon's plain stream (policy dropnode:ratio=0.2)
sends; the socket, shared memory and Flight deliver the same arrays; the
dataset yields one PyG batch per twin and resumes mid-epoch with the same
pairs; JOAO's weights change the set drawn and nothing else."""
import numpy as np
import pytest

from conftest import need_torch

torch = need_torch()
import augloader  # noqa: E402
from augloader import ServerError  # noqa: E402
from augloader.torch import AugloaderDataset, Prefetcher, to_tensors, twin_tensors  # noqa: E402

SETS = ["dropnode:ratio=0.2 / subgraph:ratio=0.2", "attrmask:ratio=0.3 / dropedge:ratio=0.2"]


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    args = ["--policy", "dropnode:ratio=0.2", "--workers", "2"]
    for s in SETS:
        args += ["--twins", s]
    d = augloader.Daemon(make_synth_shards(80, 6), binary=str(bins / "augloader"), args=args, seed=4, batch_size=8)
    d.start()
    yield d
    d.stop()


def arrays(b):
    """A batch's arrays as the test compares them."""
    return (b.graph_id.tolist(), b.num_nodes.tolist(), b.edge_src.tolist(), b.edge_dst.tolist(),
            b.dense_x().tolist(), b.policy)


def test_aligned_and_twin_zero_is_the_plain_stream(served):
    c = augloader.connect(served.url)
    plain = list(c.epoch(3))
    pairs = list(c.epoch(3, twins=2, twin_weights=[1, 0]))
    assert len(pairs) == len(plain) == 10
    assert pairs[0].twins == 2 and pairs[0].num_graphs == 16 and pairs[0].graphs_per_twin == 8
    for whole, alone in zip(pairs, plain):
        t0, t1 = whole.split_twins()
        assert t0.graph_id.tolist() == t1.graph_id.tolist() == alone.graph_id.tolist()
        assert arrays(t0) == arrays(alone)  # twin 0: the plain stream's graphs, byte for byte
        assert set(t1.policy) == {"subgraph"} and set(t0.policy) == {"dropnode"}
        assert int(t1.ptr[-1]) < int(t0.ptr[-1])  # subgraph keeps a fifth of the nodes
        # The whole batch is itself a batch of both twins (one encoder pass).
        t = to_tensors(whole)
        assert t["num_graphs"] == 16 and t["twins"] == 2 and int(t["batch"].max()) == 15
        assert t["edge_index"].max() < t["num_nodes"]


def test_flight_equals_socket(bins, make_synth_shards, daemon):
    args = ["--shards", str(make_synth_shards(80, 6)), "--seed", "4", "--batch-size", "8", "--workers", "1"]
    for s in SETS:
        args += ["--twins", s]
    d = daemon(*args)
    ref = [arrays(t) for b in augloader.connect(d.unix).epoch(5, rank=1, world=2, twins=2) for t in b.split_twins()]
    for url in (d.grpc, d.unix.replace("unix://", "unix+shm://")):
        stream = augloader.connect(url).epoch(5, rank=1, world=2, twins=2)
        got = [arrays(t) for b in stream for t in b.split_twins()]
        assert got == ref, url
    assert stream.info["twins"] == 2 and stream.info["graphs"] == 40


def test_dataset_pairs_and_resume(served):
    pytest.importorskip("torch_geometric")  # the pairs are PyG Batches
    ds = AugloaderDataset(served.url, pyg=True, twins=2)
    ds.set_epoch(2)
    full = []
    for a, b in ds:
        assert a.num_graphs == b.num_graphs == 8
        assert a.x.shape[1] == b.x.shape[1]
        full.append((a.edge_index.tolist(), b.edge_index.tolist(), a.batch_index))
    ds.set_epoch(2)  # epoch 2 again (a new iteration is the next epoch)
    it = iter(ds)
    for _ in range(3):
        next(it)
    state = ds.state_dict()
    assert state["twins"] == 2 and state["graphs"] == 24
    again = AugloaderDataset(served.url, pyg=True, twins=2)
    again.load_state_dict(state)
    rest = [(a.edge_index.tolist(), b.edge_index.tolist(), a.batch_index) for a, b in again]
    assert rest == full[3:]
    # A state of twins does not load into a plain dataset, and says why.
    with pytest.raises(ValueError, match="twins 2 vs 0"):
        AugloaderDataset(served.url).load_state_dict(state)


def test_joao_weights(served):
    c = augloader.connect(served.url)

    def pairs(w):
        s = c.epoch(1, twins=2, twin_weights=w)
        out = {}
        for b in s:
            t0, t1 = b.split_twins()
            for i, gid in enumerate(t0.graph_id.tolist()):
                out[gid] = (t0.policy[i], arrays(t0.twin(0))[2], t1.policy[i])
        return out, s.info["config"]

    only0, c0 = pairs([1, 0])
    only1, c1 = pairs([0, 1])
    mixed, cm = pairs([1, 3])
    assert {p[0] for p in only0.values()} == {"dropnode"} and {p[0] for p in only1.values()} == {"attrmask"}
    n1 = sum(p[0] == "attrmask" for p in mixed.values())
    assert 40 <= n1 <= 78, n1  # 60 of 80 expected
    assert cm["twin_weights"] == "0.25,0.75" and len({c0["id"], c1["id"], cm["id"]}) == 3
    # The dataset sends the weights it is given, epoch by epoch.
    ds = AugloaderDataset(served.url, pyg=False, twins=2)
    ds.set_twin_weights([0, 1])
    a, _ = next(iter(ds))
    assert ds.config["twin_weights"] == "0,1"
    with pytest.raises(ValueError):
        ds.set_twin_weights([0, 0])


def test_prefetcher_and_refusals(served):
    c = augloader.connect(served.url)
    items = list(Prefetcher(c.epoch(0, twins=2), depth=2))
    assert len(items) == 10 and all(isinstance(i, tuple) and len(i) == 2 for i in items)
    direct = [twin_tensors(b) for b in c.epoch(0, twins=2)]
    for (a, b), (da, db) in zip(items, direct):
        assert torch.equal(a["edge_index"], da["edge_index"]) and torch.equal(b["x"], db["x"])
    with pytest.raises(ValueError, match="twins"):
        c.epoch(0, twins=1)
    with pytest.raises(ServerError, match="sets are of 2"):
        list(c.epoch(0, twins=3))
    with pytest.raises(ServerError, match="3 twin weights"):
        list(c.epoch(0, twins=2, twin_weights=[1, 1, 1]))
    with pytest.raises(ValueError):
        c.epoch(0, twins=2, twin_weights=[1, float("nan")])
    assert np.all(next(iter(c.epoch(0, twins=2))).twin(1).ptr >= 0)
