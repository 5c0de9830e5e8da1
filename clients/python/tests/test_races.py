"""Races a loaded machine exposed, each pinned by a test that forces the
losing order instead of waiting for it (docs/reliability.md, "Tests that
hold under load").

- The daemon may answer and close before the client is done sending: a
  refusal, or a short shared-memory stream that fits in the ring and the
  socket buffer. The client used to make one more (empty) send after the
  frame was out, and a DataLoader worker got BrokenPipeError instead of its
  batches or the refusal.
- A daemon that fails at start closes its standard output before it is
  reaped; Daemon.start read the end of file, asked poll(), heard "running",
  killed it and reported a timeout instead of its exit status and log.
"""
import os
import socket
import stat
import sys
import threading

import pytest

import augloader
from augloader import _socket, _wire

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd is Linux's")


def error_frame(code="unavailable", message="too many streams"):
    import json

    body = json.dumps({"code": code, "error": message}).encode()
    return _wire.HEADER.pack(_wire.MAGIC_RESPONSE, _wire.VERSION, _wire.STATUS_ERROR, 0, len(body)) + body


@linux
def test_no_send_after_the_frame_with_a_ring(monkeypatch):
    """The daemon reads the request, answers and closes while the client is
    still inside send_request: the client must not send again (it did:
    sendall of the empty remainder) and must read the answer."""
    client, server = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    closed = threading.Event()

    def daemon():
        msg, fds, _, _ = socket.recv_fds(server, 4096, 4)
        for fd in fds:
            os.close(fd)
        assert msg[:4] == _wire.MAGIC_REQUEST
        server.sendall(error_frame())
        server.close()
        closed.set()

    t = threading.Thread(target=daemon)
    t.start()
    real = socket.send_fds

    def send_then_lose_the_race(sock, buffers, fds, *a):
        n = real(sock, buffers, fds, *a)
        assert closed.wait(10), "the fake daemon did not answer"
        return n

    monkeypatch.setattr(socket, "send_fds", send_then_lose_the_race)
    ring = _socket.ShmRing(_wire.MIN_SHM_RING)
    _socket.send_request(client, {"epoch": 0, "rank": 0, "world": 1}, ring)  # raised BrokenPipeError
    t.join()
    status, body = _wire.read_frame(_socket.SocketReader(client), _wire.MAGIC_RESPONSE)
    assert status == _wire.STATUS_ERROR and body["code"] == "unavailable"
    fd = ring.fd
    os.fstat(fd)  # the ring keeps its descriptor for its next stream
    del ring
    with pytest.raises(OSError):
        os.fstat(fd)  # and closes it with the ring
    client.close()


def test_refusal_read_after_a_broken_pipe(tmp_path):
    """A daemon that answers and closes before the request arrives (an
    eviction, a shutdown): the client gets the refusal's error frame, not
    ConnectionLost("Broken pipe")."""
    path = str(tmp_path / "d.sock")
    ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ln.bind(path)
    ln.listen(1)
    answered = threading.Event()

    def daemon():
        c, _ = ln.accept()
        c.sendall(error_frame("unavailable", "server shutting down"))
        c.close()
        answered.set()

    t = threading.Thread(target=daemon)
    t.start()
    real = _socket.send_request

    def late_send(sock, req, ring=None):
        assert answered.wait(10)
        return real(sock, req, ring)

    _socket.send_request, saved = late_send, _socket.send_request
    try:
        with pytest.raises(augloader.ServerError) as e:
            list(augloader.connect("unix://" + path).epoch(0))
    finally:
        _socket.send_request = saved
        t.join()
        ln.close()
    assert e.value.code == "unavailable" and "shutting down" in e.value.message


def test_start_waits_for_the_exit_status(tmp_path):
    """A daemon that closes stdout, then exits 1 half a second later: the
    error says it exited with status 1 and carries its log (it said "did
    not get ready within 120 s" and killed it)."""
    fake = tmp_path / "augloader"
    fake.write_text("#!/bin/sh\nexec 1>&-\nsleep 0.5\necho 'augloader: shard: open x/manifest.json: no such file' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(augloader.DaemonError) as e:
        augloader.Daemon(tmp_path / "x", binary=str(fake), ready_timeout=30).start()
    assert "exited with status 1" in str(e.value), str(e.value)
    assert "manifest.json" in e.value.log
