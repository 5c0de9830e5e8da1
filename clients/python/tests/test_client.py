"""The Python client against a real `augloader serve` over both transports:
counts, dtypes and shapes of every field; edge_index symmetric and within
ptr ranges; bytes equal to what the Go client reads for the same request."""
import json
import subprocess

import numpy as np
import pytest

import augloader
from conftest import need_torch

POLICY = "nodesam:0.4,submix:p=0.4:0.4,none:0.2"


def check_batch(b, num_classes):
    B, N = b.num_graphs, int(b.ptr[-1])
    assert b.graph_id.dtype == np.int64 and b.graph_id.shape == (B,)
    assert b.num_nodes.dtype == np.int32 and b.ptr.dtype == np.int64 and b.ptr.shape == (B + 1,)
    assert b.batch.dtype == np.int64 and b.batch.shape == (N,)
    assert np.array_equal(np.bincount(b.batch, minlength=B), b.num_nodes)
    assert b.edge_src.dtype == np.int32 and b.edge_dst.dtype == np.int32 and b.edge_src.shape == b.edge_dst.shape
    assert b.edge_index.dtype == np.int64 and b.edge_index.shape == (2, len(b.edge_src))
    assert np.array_equal(b.edge_index[0], b.edge_src) and np.array_equal(b.edge_index[1], b.edge_dst)
    src, dst = b.edge_index
    # Within the graph's ptr range, no self-loops.
    g = b.batch[src]
    assert np.array_equal(g, b.batch[dst])
    assert np.all(src != dst)
    # Symmetric: the set of (src, dst) equals the set of (dst, src).
    fwd = np.sort(src.astype(np.int64) * N + dst)
    rev = np.sort(dst.astype(np.int64) * N + src)
    assert np.array_equal(fwd, rev)
    assert len(np.unique(fwd)) == len(fwd)
    # Coalesced: sorted by (src, dst) within each graph, graphs in order.
    assert np.all(np.diff(src.astype(np.int64) * N + dst) > 0)
    assert b.x_node.dtype == np.int32 and b.x_code.dtype == np.int32 and b.x_weight.dtype == np.float32
    assert b.x_node.shape == b.x_code.shape == b.x_weight.shape
    x = b.dense_x()
    assert x.shape == (N, b.feature_dim) and x.dtype == np.float32
    np.testing.assert_allclose(x.sum(1), 1, rtol=1e-6)
    y = b.soft_y()
    assert y.shape == (B, num_classes)
    np.testing.assert_allclose(y.sum(1), 1, rtol=1e-6)
    assert b.y.dtype == np.int32 and b.y_q.dtype == np.float32 and b.padded.dtype == bool
    assert len(b.policy) == B


def test_socket_and_flight(bins, synth_shards, daemon):
    d = daemon("--shards", synth_shards, "--policy", POLICY, "--seed", "4", "--batch-size", "16")
    for world in (1, 3):
        seen = []
        for rank in range(world):
            s = augloader.connect(d.unix).epoch(2, rank=rank, world=world, digest=True)
            f = augloader.connect(d.grpc).epoch(2, rank=rank, world=world)
            sb, fb = list(s), list(f)
            assert len(sb) == len(fb) == s.info["batches"] == s.trailer["batches"]
            for a, b in zip(sb, fb):
                check_batch(a, 3)
                assert a.record.equals(b.record), "Flight and socket batches differ"
                seen.extend(a.graph_id[~a.padded].tolist())
            # The same bytes the Go client reads for the same request.
            out = subprocess.run([bins / "augloader", "fetch", "--socket", d.sock, "--epoch", "2", "--rank", str(rank),
                                  "--world", str(world), "--json"], check=True, capture_output=True, text=True)
            go = json.loads(out.stdout)
            assert (go["sha256"], go["bytes"], go["graphs"]) == (s.sha256, s.nbytes, s.info["graphs"]), (world, rank)
        assert sorted(seen) == list(range(80)), f"world {world}: ranks do not partition the epoch"


def test_mutag_policies(mutag_shards, daemon):
    d = daemon("--shards", mutag_shards, "--policy", "submix:p=0.4", "--seed", "1")
    batches = list(augloader.connect(d.unix).epoch(0))
    assert sum(b.num_graphs for b in batches) == 188
    soft = 0
    for b in batches:
        check_batch(b, 2)
        assert set(b.policy) == {"submix"}
        soft += int((b.y_q < 1).sum())
    assert soft > 100


def test_bare_socket_path(synth_shards, daemon):
    """connect('/run/aug.sock') reads the socket, as the CLI's --addr does
    (it was refused as an unsupported URL; issue #45)."""
    d = daemon("--shards", synth_shards, "--policy", "none", "--batch-size", "16")
    a = [b.graph_id.tolist() for b in augloader.connect(str(d.sock)).epoch(0)]
    assert a and a == [b.graph_id.tolist() for b in augloader.connect(d.unix).epoch(0)]


def test_errors(synth_shards, daemon, tmp_path):
    d = daemon("--shards", synth_shards, "--policy", "none")
    for url in (d.unix, d.grpc):
        with pytest.raises(augloader.ServerError) as e:
            list(augloader.connect(url).epoch(0, rank=4, world=2))
        assert e.value.code == "out_of_range"
    with pytest.raises(augloader.ConnectionLost):
        augloader.connect(f"unix://{tmp_path}/nothing.sock").epoch(0)
    with pytest.raises(ValueError):
        augloader.connect("http://example")


def test_torch_dataset(synth_shards, daemon):
    torch = need_torch()
    from augloader.torch import AugloaderDataset

    d = daemon("--shards", synth_shards, "--policy", "nodesam", "--batch-size", "32")
    ds = AugloaderDataset(d.unix, pyg=False)
    first = [t["x"].clone() for t in ds]
    ds.set_epoch(1)
    second = [t["x"] for t in ds]
    assert len(first) == len(second) == 3
    t = next(iter(AugloaderDataset(d.unix, pyg=False)))
    assert t["x"].dtype == torch.float32 and t["edge_index"].dtype == torch.int64
    assert t["x"].shape[0] == int(t["ptr"][-1]) and t["y_soft"].shape == (t["num_graphs"], 3)
    assert not all(torch.equal(a, b) for a, b in zip(first, second)), "set_epoch did not change the epoch"


def test_to_tensors_off_cpu(synth_shards, daemon):
    """The accelerator path of to_tensors (int32 views cross the bus, widened
    and one-hot encoded on the device), run on torch's shape-only "meta"
    device: dtypes and shapes equal the CPU path's."""
    torch = need_torch()
    from augloader.torch import to_tensors

    d = daemon("--shards", synth_shards, "--policy", "nodesam", "--batch-size", "32")
    b = next(iter(augloader.connect(d.unix).epoch(0)))
    cpu, meta = to_tensors(b, "cpu"), to_tensors(b, "meta")
    for k in ("x", "edge_index", "batch", "ptr", "y", "y_soft"):
        assert meta[k].device.type == "meta", k
        assert (meta[k].dtype, tuple(meta[k].shape)) == (cpu[k].dtype, tuple(cpu[k].shape)), k
    assert cpu["edge_index"].dtype == torch.int64
    assert torch.equal(cpu["edge_index"][0], torch.from_numpy(b.edge_src.astype(np.int64)))


def test_socket_reader_chunks():
    """_SocketReader: small reads through its buffer, large ones straight
    into the caller's memory, the bytes in order whatever the chunking,
    a short read only at the end of the stream."""
    import socket
    import threading

    from augloader._socket import SocketReader as _SocketReader

    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    a, b = socket.socketpair()

    def send():
        pos = 0
        for size in rng.integers(1, 300_000, 1000):
            if pos >= len(data):
                break
            a.sendall(data[pos:pos + int(size)])
            pos += int(size)
        a.sendall(data[pos:])
        a.close()

    t = threading.Thread(target=send)
    t.start()
    r = _SocketReader(b, bufsize=4096)
    got = bytearray()
    got += r.read(7)
    big = bytearray(2 << 20)
    mv = memoryview(big)
    n = 0
    while n < len(big):
        k = r.readinto(mv[n:])
        assert k > 0
        n += k
    got += big
    got += r.read(100)
    got += r.read(len(data))  # more than is left: short, at the end
    t.join()
    b.close()
    assert bytes(got) == data
