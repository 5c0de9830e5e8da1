"""The Unix-socket transport: one request frame, the response frame, the
Arrow IPC stream, the trailer (docs/protocol.md)."""
from __future__ import annotations

import socket

from . import _wire
from ._wire import ConnectionLost, ServerError
from .batch import Batch


class SocketReader:
    """Buffered reads from a stream socket, except that a read at least as
    large as the buffer goes straight into the caller's memory
    (``recv_into`` with MSG_WAITALL): an Arrow body, megabytes per batch,
    is copied once, by the kernel, where ``socket.makefile`` would copy
    part of it a second time through its buffer."""

    def __init__(self, sock: socket.socket, bufsize: int = 64 << 10):
        self._sock = sock
        self._buf = memoryview(bytearray(bufsize))
        self._lo = self._hi = 0
        self._waitall = getattr(socket, "MSG_WAITALL", 0)

    def readinto(self, mv) -> int:
        """Reads up to len(mv) bytes into mv; 0 only at end of stream."""
        n = len(mv)
        if self._lo < self._hi:
            k = min(n, self._hi - self._lo)
            mv[:k] = self._buf[self._lo:self._lo + k]
            self._lo += k
            return k
        if n >= len(self._buf):
            return self._sock.recv_into(mv, n, self._waitall)
        got = self._sock.recv_into(self._buf, len(self._buf))
        k = min(n, got)
        mv[:k] = self._buf[:k]
        self._lo, self._hi = k, got
        return k

    def read(self, n: int) -> bytes:
        """Reads n bytes, fewer only at end of stream."""
        out = bytearray(n)
        mv = memoryview(out)
        got = 0
        while got < n:
            k = self.readinto(mv[got:])
            if not k:
                break
            got += k
        return bytes(out[:got])


def read_conversation(f, stream, digest: bool):
    """Yields the Batches of one response read from f (a SocketReader or
    any object with read and readinto) and checks the trailer; the
    response frame has been read into stream.info."""
    reader = _wire.ArrowReader(f, digest)
    stream.batch_digests = reader.batch_digests  # filled as batches arrive
    try:
        for rb in reader:
            yield Batch.from_record_batch(rb)
    except OSError as e:
        raise ConnectionLost(f"arrow stream broke: {e}") from e
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise ConnectionLost(f"protocol error: a batch does not decode: {e}") from e
    stream.nbytes, stream.sha256, stream.batch_digests = reader.nbytes, reader.hexdigest(), reader.batch_digests
    status, trailer = _wire.read_frame(f, _wire.MAGIC_TRAILER)
    stream.trailer = trailer
    if status != _wire.STATUS_OK:
        raise ServerError(trailer.get("code", "internal"), trailer.get("error", ""))
    if trailer.get("batches") != stream.info.get("batches"):
        raise ConnectionLost(f"got {trailer.get('batches')} batches, promised {stream.info.get('batches')}")


def open_stream(path: str, req: dict, timeout, digest: bool, make_stream):
    """Sends req to the daemon at path and returns make_stream(batches,
    info) once the response frame is read."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(_wire.encode_request(req))
        f = SocketReader(sock)
        status, info = _wire.read_frame(f, _wire.MAGIC_RESPONSE)
    except OSError as e:
        sock.close()
        raise ConnectionLost(str(e)) from e
    except Exception:
        sock.close()
        raise
    if status != _wire.STATUS_OK:
        sock.close()
        raise ServerError(info.get("code", "internal"), info.get("error", ""))

    def batches(stream):
        try:
            yield from read_conversation(f, stream, digest)
        finally:
            sock.close()

    return make_stream(batches, info)
