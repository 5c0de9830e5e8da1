"""The Unix-socket transport: one request frame, the response frame, the
Arrow IPC stream, the trailer (docs/protocol.md); and over the same socket
the shared-memory transport, where the stream's messages come through a
memfd ring this process maps (``unix+shm://`` URLs)."""
from __future__ import annotations

import collections
import fcntl
import mmap
import os
import socket
import threading
from typing import Optional

import pyarrow as pa

from . import _wire
from ._wire import ConnectionLost, ServerError
from .batch import Batch
from .structures import StructureBatch


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


class ShmRing:
    """The shared-memory transport's ring: a memfd of ``size`` bytes,
    sealed against shrinking and growing, mapped here; the daemon writes
    the stream's messages into it (docs/protocol.md, "Shared memory").

    A ring serves one stream at a time and is kept for the next stream of
    this process (``acquire_ring``) once its stream ended with the trailer
    (the daemon writes nothing after it) and no batch refers to it any
    more: mapping and populating a fresh 32 MiB ring cost the trainer
    about as much CPU as decoding an epoch of COLLAB's batches."""

    def __init__(self, size: int):
        self.fd = -1
        if not _wire.MIN_SHM_RING <= size <= _wire.MAX_SHM_RING:
            raise ValueError(f"augloader: shm ring of {size} bytes (want {_wire.MIN_SHM_RING} to {_wire.MAX_SHM_RING})")
        if not hasattr(os, "memfd_create"):
            raise OSError("augloader: the shared-memory transport needs memfd_create (Linux)")
        fd = os.memfd_create("augloader-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            # Populated at once: one call instead of a page fault per page
            # as the daemon's messages first land in it. Writable, as the
            # socket's buffers are: a tensor made over a batch's array and
            # changed in place must not fault (the message is the batch's
            # until it is released, so nothing else sees the change).
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                                 mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd  # sent with each request (the daemon gets its own copy)
        self.size = size
        self._buf = pa.py_buffer(self._mm)
        self.address = self._buf.address
        self.released: collections.deque = collections.deque()
        # Leases alive, and whether the ring's stream is still going: a
        # ring is reusable when both are over and the stream was complete.
        self._lock = threading.RLock()  # a lease's __del__ may run in any thread, inside this class's code too
        self._live = 0
        # None while a stream uses the ring; then whether it ended complete.
        self._complete: Optional[bool] = None
        # A forked process (a DataLoader worker) inherits the mapping, the
        # same memory as its parent's: a ring serves streams of the process
        # that made it only, or two daemon sessions would write into it.
        self._pid = os.getpid()

    def start(self) -> None:
        """Marks the ring in use by a new stream (sequence numbers from 0)."""
        with self._lock:
            self.released.clear()
            self._complete = None

    def lease(self, seq: int) -> "_Lease":
        with self._lock:
            self._live += 1
        return _Lease(self, seq)

    def _freed(self, seq: int) -> None:
        if self._pid != os.getpid():
            return  # inherited by a fork: its lock may have been held then
        with self._lock:
            self.released.append(seq)
            self._live -= 1
            idle = not self._live and self._complete is True
        if idle:
            _give_back(self)

    def finish(self, complete: bool) -> None:
        """The ring's stream is over; complete: it ended with the trailer,
        so the daemon will not write into the ring again, and the ring may
        serve another stream once its batches are gone. An abandoned or
        broken stream's ring is never reused (its daemon session may still
        be writing a message into it)."""
        if self._pid != os.getpid():
            return
        with self._lock:
            self._complete = complete
            idle = complete and not self._live
        if idle:
            _give_back(self)

    def close_fd(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close_fd()


# Idle rings by size, most recently used last; a few are kept.
_IDLE_RINGS: dict = {}
_IDLE_LOCK = threading.RLock()
_MAX_IDLE_RINGS = 4


def _give_back(ring: ShmRing) -> None:
    with _IDLE_LOCK:
        idle = _IDLE_RINGS.setdefault(ring.size, [])
        if ring not in idle and sum(len(v) for v in _IDLE_RINGS.values()) < _MAX_IDLE_RINGS:
            idle.append(ring)


def _forget_idle_rings() -> None:
    """In a forked child: its parent's idle rings are not its own (their
    leases and streams, which would give them back, return early there)."""
    global _IDLE_LOCK
    _IDLE_LOCK = threading.RLock()  # another thread may have held it at the fork
    _IDLE_RINGS.clear()


os.register_at_fork(after_in_child=_forget_idle_rings)


def acquire_ring(size: int) -> ShmRing:
    """An idle ring of size bytes from an earlier stream of this process,
    else a new one; marked in use."""
    with _IDLE_LOCK:
        idle = _IDLE_RINGS.get(size)
        ring = idle.pop() if idle else None
    if ring is None:
        ring = ShmRing(size)
    ring.start()
    return ring


class _Lease:
    """Owns one ring message for pyarrow (the base of its foreign buffer):
    when the last array over the message is gone, the message's sequence
    number is queued for release, and the ring stays mapped until then."""

    __slots__ = ("_ring", "_seq")

    def __init__(self, ring: ShmRing, seq: int):
        self._ring, self._seq = ring, seq

    def __del__(self):
        self._ring._freed(self._seq)


def shm_messages(f, sock: socket.socket, ring: ShmRing):
    """The stream's messages over shared memory: a descriptor per message
    from f; a ring message is a view of the ring (no copy), an inline one
    is read from f. Before each descriptor is read, the daemon learns how
    many ring messages were read and which are no longer referenced
    anywhere (released: it may write over them)."""
    seq = 0
    while True:
        # How many ring messages were read (the daemon waits for releases
        # while some are unread, and goes inline once all are kept), and
        # the ones freed since the last descriptor.
        out = bytearray(_wire.SHM_RECORD.pack(_wire.SHM_READ | seq))
        while ring.released:
            out += _wire.SHM_RECORD.pack(ring.released.popleft())
        try:
            sock.sendall(out)
        except OSError:
            pass  # the daemon is gone: the descriptor read says so
        d = f.read(_wire.SHM_DESCRIPTOR.size)
        if len(d) != _wire.SHM_DESCRIPTOR.size:
            raise ConnectionLost("connection closed before an shm descriptor")
        kind, length, offset = _wire.SHM_DESCRIPTOR.unpack(d)
        if length < 8:
            raise ConnectionLost(f"protocol error: shm message of {length} bytes")
        if kind == _wire.SHM_RING:
            if offset + length > ring.size:
                raise ConnectionLost(f"protocol error: shm message [{offset}, +{length}) outside the ring of {ring.size} bytes")
            yield pa.foreign_buffer(ring.address + offset, length, base=ring.lease(seq))
            seq += 1
        elif kind == _wire.SHM_INLINE and offset == 0:
            if length > 8 + _wire.MAX_ARROW_METADATA + _wire.MAX_ARROW_BODY:
                raise ConnectionLost(f"protocol error: inline shm message of {length} bytes")
            buf = pa.allocate_buffer(length)
            _wire.read_exact(f, memoryview(buf).cast("B"))
            yield buf
        else:
            raise ConnectionLost(f"protocol error: shm descriptor kind {kind} at {offset}")


def read_conversation(f, stream, digest: bool, messages=None):
    """Yields the Batches of one response read from f (a SocketReader or
    any object with read and readinto) and checks the trailer; the
    response frame has been read into stream.info. messages: the stream's
    messages when they do not come inline from f (shared memory)."""
    reader = _wire.ArrowReader(_wire.socket_messages(f) if messages is None else messages, digest)
    stream.batch_digests = reader.batch_digests  # filled as batches arrive
    try:
        for rb in reader:
            if reader.info.get("kind") == "structures":
                yield StructureBatch.from_record_batch(rb, reader.info)
            else:
                yield Batch.from_record_batch(rb, reader.info)
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


def send_request(sock: socket.socket, req: dict, ring: Optional[ShmRing] = None) -> None:
    """Sends req's frame on sock; with a ring, asks for shared memory and
    passes the ring's memfd with the frame's bytes (SCM_RIGHTS: the daemon
    receives its own descriptor; the ring keeps this one for its next
    stream).

    Nothing is sent once the frame is out: the daemon may answer and
    close at once (a refusal, or a short stream that fits in the ring and
    the socket buffer), and a send after that fails with EPIPE. CPython's
    ``sendall`` makes one ``send`` even for an empty buffer, so the
    remainder is sent only when there is one. A broken pipe while the frame
    is going out is left to the response read: the daemon wrote its answer
    (a refusal's error frame) before it closed."""
    try:
        if ring is None:
            sock.sendall(_wire.encode_request(req))
            return
        frame = _wire.encode_request(dict(req, shm=True))
        sent = socket.send_fds(sock, [frame], [ring.fd])
        if sent < len(frame):
            sock.sendall(frame[sent:])
    except (BrokenPipeError, ConnectionResetError):
        pass  # the response read says why (or that the connection is gone)


def open_stream(path: str, req: dict, timeout, digest: bool, make_stream, shm_ring: int = 0):
    """Sends req to the daemon at path and returns make_stream(batches,
    info) once the response frame is read. shm_ring > 0: over shared
    memory, through a ring of that many bytes."""
    ring = acquire_ring(shm_ring) if shm_ring else None

    def fail():
        sock.close()
        if ring is not None:
            ring.finish(False)

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except FileNotFoundError:
        fail()
        raise ConnectionLost(f"cannot connect to {path}: no such socket (is `augloader serve --socket {path}` running?)") from None
    except ConnectionRefusedError:
        fail()
        raise ConnectionLost(f"cannot connect to {path}: nothing listens there (the daemon stopped, or a stale socket file)") from None
    except OSError as e:
        fail()
        raise ConnectionLost(f"cannot connect to {path}: {e}") from e
    try:
        send_request(sock, req, ring)
        f = SocketReader(sock)
        status, info = _wire.read_frame(f, _wire.MAGIC_RESPONSE)
    except OSError as e:
        fail()
        raise ConnectionLost(str(e)) from e
    except BaseException:
        fail()
        raise
    if status != _wire.STATUS_OK:
        fail()
        raise ServerError(info.get("code", "internal"), info.get("error", ""))

    closed = []

    def batches(stream):
        complete = False
        try:
            messages = shm_messages(f, sock, ring) if ring is not None else None
            yield from read_conversation(f, stream, digest, messages)
            complete = True
        finally:
            if not closed:
                closed.append(True)
                sock.close()
                if ring is not None:
                    ring.finish(complete)

    def close():
        if not closed:
            closed.append(True)
            fail()

    stream = make_stream(batches, info)
    stream._close = close
    return stream
