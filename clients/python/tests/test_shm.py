"""The shared-memory transport (unix+shm://) against a real `augloader
serve`: the same stream, byte for byte, as the socket; batches that are
views of the ring stay intact however long the trainer keeps them; ring
space comes back as batches are freed; and the daemon refuses what a
request may not pass."""
import array
import gc
import json
import os
import re
import socket
import sys

import numpy as np
import pyarrow as pa
import pytest

import augloader
from augloader import _socket, _wire
from conftest import free_port

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd is Linux's")

POLICY = "nodesam:0.4,submix:p=0.4:0.4,none:0.2"


def serve(daemon, shards):
    return daemon("--shards", shards, "--policy", POLICY, "--seed", "4", "--batch-size", "8")


def shm_url(d, ring=None):
    return f"unix+shm://{d.sock}" + (f"?ring={ring}" if ring else "")


def test_same_stream_as_socket(synth_shards, daemon):
    d = serve(daemon, synth_shards)
    for world, rank in ((1, 0), (3, 2)):
        s = augloader.connect(d.unix).epoch(2, rank=rank, world=world, digest=True)
        sb = list(s)
        m = augloader.connect(shm_url(d)).epoch(2, rank=rank, world=world, digest=True)
        mb = list(m)
        assert m.sha256 == s.sha256 and m.nbytes == s.nbytes and m.batch_digests == s.batch_digests
        assert m.trailer == s.trailer and m.info == s.info
        assert len(mb) == len(sb) > 0
        for a, b in zip(sb, mb):
            assert a.record.equals(b.record)
            assert np.array_equal(a.edge_index, b.edge_index)


def test_ring_views_are_zero_copy(synth_shards, daemon):
    d = serve(daemon, synth_shards)
    ring = {}
    real = _socket.ShmRing

    class Spy(real):
        def __init__(self, size):
            super().__init__(size)
            ring["r"] = self

    _socket.ShmRing = Spy
    _socket._IDLE_RINGS.clear()  # a new ring, not one an earlier test left idle
    try:
        b = next(iter(augloader.connect(shm_url(d)).epoch(1)))
    finally:
        _socket.ShmRing = real
    r = ring["r"]
    addr = b.edge_src.__array_interface__["data"][0]
    assert r.address <= addr < r.address + r.size, "edge_src is not a view of the ring"


def test_kept_batches_stay_intact(synth_shards, daemon):
    """A trainer that keeps every batch (list(stream)) through the smallest
    ring: the daemon must not write over a batch still referenced, so it
    sends what does not fit through the socket; every batch equals the
    socket's."""
    d = serve(daemon, synth_shards)
    want = list(augloader.connect(d.unix).epoch(3, digest=True))
    got = list(augloader.connect(shm_url(d, _wire.MIN_SHM_RING)).epoch(3, digest=True))
    assert len(got) == len(want)
    for a, b in zip(want, got):
        assert a.digest == b.digest
        assert a.record.equals(b.record)
    assert last_inline(d) > 0, "every kept batch came through the ring"


def last_inline(d):
    """shm_inline_messages of the daemon's last logged shared-memory stream."""
    found = re.findall(r"shm_inline_messages=(\d+)", d.log_text)
    assert found, "no shared-memory stream in the daemon's log"
    return int(found[-1])


def test_released_space_is_reused(synth_shards, daemon):
    """Batches dropped as the loop goes on: their ring space is released
    and reused, so a ring of a few batches carries the whole epoch without
    sending any through the socket."""
    d = serve(daemon, synth_shards)
    sizes = [b.record.nbytes for b in augloader.connect(d.unix).epoch(5)]
    ring = max(_wire.MIN_SHM_RING, (max(sizes) * 4 + 4095) // 4096 * 4096)
    s = augloader.connect(shm_url(d, ring)).epoch(5, digest=True)
    n = 0
    for b in s:
        n += 1
        del b
        gc.collect()
    assert n == len(sizes)
    want = augloader.connect(d.unix).epoch(5, digest=True)
    list(want)
    assert s.sha256 == want.sha256
    assert last_inline(d) == 0


def ring_of(b) -> int:
    """The address of the ring batch b's arrays are views of (its lease)."""
    for r in rings_seen:
        if r.address <= b.edge_src.__array_interface__["data"][0] < r.address + r.size:
            return r.address
    raise AssertionError("the batch is not a view of any ring")


rings_seen: list = []


@pytest.fixture
def watch_rings(monkeypatch):
    """Records every ring acquire_ring hands out, starting with none idle."""
    real = _socket.acquire_ring
    _socket._IDLE_RINGS.clear()
    rings_seen.clear()

    def watched(size):
        r = real(size)
        rings_seen.append(r)
        return r

    monkeypatch.setattr(_socket, "acquire_ring", watched)
    yield rings_seen
    _socket._IDLE_RINGS.clear()


def ring_maps(metrics_port: int) -> int:
    """The daemon's augloader_server_shm_ring_maps_total (its /metrics)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("augloader_server_shm_ring_maps_total "):
                return int(float(line.split()[1]))
    raise AssertionError("no augloader_server_shm_ring_maps_total in /metrics")


def test_ring_reused_after_a_complete_stream(synth_shards, daemon, watch_rings):
    """A stream read to its trailer, its batches dropped: the next stream
    of the process gets the same ring (no new memfd, no populating), and
    its bytes are still the socket's. The daemon maps that ring once and
    keeps the mapping for its next streams (its /metrics count it)."""
    port = free_port()
    d = daemon("--shards", synth_shards, "--policy", POLICY, "--seed", "4", "--batch-size", "8",
               "--metrics", f"127.0.0.1:{port}")
    url = shm_url(d)
    for e in (1, 2, 3):
        s = augloader.connect(url).epoch(e, digest=True)
        list(s)  # read to the trailer; the batches go at once
        gc.collect()
        want = augloader.connect(d.unix).epoch(e, digest=True)
        list(want)
        assert s.sha256 == want.sha256, f"epoch {e}"
    assert len({r.address for r in watch_rings}) == 1, "a ring was made for each stream"
    assert ring_maps(port) == 1, "the daemon mapped the one ring again for a later stream"


def test_ring_of_kept_or_abandoned_streams_not_reused(synth_shards, daemon, watch_rings):
    """A ring is not handed to another stream while a batch over it lives
    (the trainer kept it), nor after a stream left before its trailer (its
    daemon session may still be writing into it): the kept batches stay
    the bytes they were."""
    d = serve(daemon, synth_shards)
    url = shm_url(d)
    kept = list(augloader.connect(url).epoch(1, digest=True))
    s = augloader.connect(url).epoch(2)
    first = next(iter(s))
    assert ring_of(first) != ring_of(kept[0])
    rings = len(watch_rings)
    del first, s  # abandoned after one batch
    gc.collect()
    list(augloader.connect(url).epoch(3))
    assert len(watch_rings) == rings + 1 and len({r.address for r in watch_rings}) == len(watch_rings)
    want = list(augloader.connect(d.unix).epoch(1, digest=True))
    assert [b.digest for b in kept] == [b.digest for b in want]
    assert all(a.record.equals(b.record) for a, b in zip(kept, want))
    # Once the kept batches go, their (complete) stream's ring is reused.
    kept_ring = ring_of(kept[0])
    del kept
    gc.collect()
    b = next(iter(augloader.connect(url).epoch(4)))
    assert ring_of(b) == kept_ring


def request_with_fds(path, req, fds):
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(path))
    frame = _wire.encode_request(req)
    if fds:
        s.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        s.sendall(frame)
    status, body = _wire.read_frame(_socket.SocketReader(s), _wire.MAGIC_RESPONSE)
    s.close()
    return status, body


def test_refusals(synth_shards, daemon, tmp_path):
    d = serve(daemon, synth_shards)
    small = os.memfd_create("r")
    os.ftruncate(small, 4096)
    good = os.memfd_create("r")
    os.ftruncate(good, 1 << 20)
    r, w = os.pipe()
    try:
        for req, fds, why in (({"epoch": 1, "rank": 0, "world": 1, "shm": True}, [], "exactly one file descriptor"),
                              ({"epoch": 1, "rank": 0, "world": 1}, [good], "without shm"),
                              ({"epoch": 1, "rank": 0, "world": 1, "shm": True}, [small], "4096 bytes"),
                              ({"epoch": 1, "rank": 0, "world": 1, "shm": True}, [w], "not a regular file")):
            status, body = request_with_fds(d.sock, req, fds)
            assert status == _wire.STATUS_ERROR and body["code"] == "bad_request" and why in body["error"], body
    finally:
        for fd in (small, good, r, w):
            os.close(fd)
    # Still serving.
    assert len(list(augloader.connect(shm_url(d)).epoch(1))) > 0
    with pytest.raises(ValueError):
        augloader.connect(shm_url(d, 100)).epoch(1)
    # Flight has no shared memory.
    import pyarrow.flight as fl
    c = fl.FlightClient(d.grpc.replace("grpc://", "grpc+tcp://"))
    with pytest.raises(pa.ArrowInvalid, match="shm is for the Unix socket only"):
        c.do_get(fl.Ticket(json.dumps({"epoch": 1, "rank": 0, "world": 1, "shm": True}).encode())).read_all()
    c.close()
