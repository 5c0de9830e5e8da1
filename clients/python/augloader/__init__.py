"""Client for the augloader daemon.

Connect to ``augloader serve`` over its Unix socket or Arrow Flight and
iterate one epoch of one rank as PyG-ready numpy batches, built from the
Arrow buffers without any per-graph Python loop::

    import augloader
    client = augloader.connect("unix:///tmp/aug.sock")   # or "grpc://127.0.0.1:8815"
    for batch in client.epoch(3, rank=0, world=1):
        batch.edge_src, batch.edge_dst  # int32 [2|E|] views of the Arrow buffers
        batch.edge_index   # int64 [2, 2|E|], batch-global, both directions (built on first use)
        batch.ptr          # int64 [B+1]
        batch.batch        # int64 [N], graph of each node
        batch.dense_x()    # float32 [N, dim] one-hot (mixes for merged nodes)
        batch.soft_y()     # float32 [B, C]

The int32 views cost nothing; ``edge_index`` and ``dense_x()`` are the
host-memory layout of a PyG ``Batch`` and cost a widening copy and a dense
matrix per batch. ``augloader.torch.to_tensors`` moves the views to the
training device and widens them there.

Errors from the server raise :class:`ServerError` (with ``code``: one of
bad_request, out_of_range, unavailable, internal, unauthenticated); a
stream that ends early raises :class:`ConnectionLost`. The wire protocol is
docs/protocol.md of the augloader repository.
"""
from __future__ import annotations

import hashlib
import json
import socket
import struct
from dataclasses import dataclass, field
from typing import Iterator, Optional
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

__all__ = ["connect", "Client", "Batch", "ServerError", "ConnectionLost", "Stream"]
__version__ = "0.1.0"

_HEADER = struct.Struct("<4sBBHI")
_VERSION = 1
_MAX_BODY = 64 << 10


class ServerError(Exception):
    """The server refused or cut the request."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ConnectionLost(Exception):
    """The connection closed before the stream was complete."""


@dataclass
class Batch:
    """One training batch. Arrays are views of Arrow buffers where possible."""

    graph_id: np.ndarray     # int64 [B]
    num_nodes: np.ndarray    # int32 [B]
    ptr: np.ndarray          # int64 [B+1]
    batch: np.ndarray        # int64 [N]
    edge_src: np.ndarray     # int32 [2|E|] batch-global source of each directed edge (Arrow view)
    edge_dst: np.ndarray     # int32 [2|E|] its target (Arrow view)
    x_node: Optional[np.ndarray]    # int32 [K] categorical features: node of each (code, weight)
    x_code: Optional[np.ndarray]    # int32 [K]
    x_weight: Optional[np.ndarray]  # float32 [K]
    x: Optional[np.ndarray]         # float32 [N, dim] dense features
    y: np.ndarray            # int32 [B]
    y_mix: np.ndarray        # int32 [B]
    y_q: np.ndarray          # float32 [B]: soft label q·onehot(y) + (1-q)·onehot(y_mix)
    padded: np.ndarray       # bool [B]
    feature_dim: int
    num_classes: int
    record: pa.RecordBatch   # the Arrow batch itself

    _edge_index: Optional[np.ndarray] = field(default=None, repr=False)
    _policy: Optional[list] = field(default=None, repr=False)

    @property
    def num_graphs(self) -> int:
        return len(self.graph_id)

    @property
    def policy(self) -> list:
        """The policy applied to each graph, str [B] (built on first use:
        Python strings cost more than the rest of a batch's decoding)."""
        if self._policy is None:
            self._policy = self.record.column("policy").to_pylist()
        return self._policy

    @property
    def edge_index(self) -> np.ndarray:
        """int64 [2, 2|E|] (PyG's edge_index), built once from the int32 views."""
        if self._edge_index is None:
            ei = np.empty((2, len(self.edge_src)), dtype=np.int64)
            ei[0] = self.edge_src
            ei[1] = self.edge_dst
            self._edge_index = ei
        return self._edge_index

    def dense_x(self) -> np.ndarray:
        """Node features as a dense float32 matrix [N, dim]."""
        if self.x is not None:
            return self.x
        n = int(self.ptr[-1])
        out = np.zeros((n, self.feature_dim), dtype=np.float32)
        # (node, code) pairs are unique (a node's codes are merged by the
        # server), so plain fancy assignment is exact, and far faster than
        # np.add.at.
        out[self.x_node, self.x_code] = self.x_weight
        return out

    def soft_y(self) -> np.ndarray:
        """Label distributions [B, C] (one-hot for hard labels)."""
        b = self.num_graphs
        out = np.zeros((b, self.num_classes), dtype=np.float32)
        rows = np.arange(b)
        out[rows, self.y] = self.y_q
        out[rows, self.y_mix] += 1.0 - self.y_q  # rows are unique: += is exact, also when y == y_mix
        return out

    @classmethod
    def from_record_batch(cls, rb: pa.RecordBatch) -> "Batch":
        md = {k.decode(): v.decode() for k, v in (rb.schema.metadata or {}).items()}
        col = rb.column

        def values(name, dtype):
            return col(name).values.to_numpy(zero_copy_only=True).astype(dtype, copy=False)

        num_nodes = col("num_nodes").to_numpy(zero_copy_only=True)
        ptr = np.zeros(len(num_nodes) + 1, dtype=np.int64)
        np.cumsum(num_nodes, out=ptr[1:])
        names = rb.schema.names
        dense = "x" in names
        return cls(
            graph_id=col("graph_id").to_numpy(zero_copy_only=True),
            num_nodes=num_nodes,
            ptr=ptr,
            batch=np.repeat(np.arange(len(num_nodes), dtype=np.int64), num_nodes),
            edge_src=values("edge_src", np.int32),
            edge_dst=values("edge_dst", np.int32),
            x_node=None if dense else values("x_node", np.int32),
            x_code=None if dense else values("x_code", np.int32),
            x_weight=None if dense else values("x_weight", np.float32),
            x=values("x", np.float32).reshape(int(ptr[-1]), -1) if dense else None,
            y=col("y").to_numpy(zero_copy_only=True),
            y_mix=col("y_mix").to_numpy(zero_copy_only=True),
            y_q=col("y_q").to_numpy(zero_copy_only=True),
            padded=col("padded").to_numpy(zero_copy_only=False),
            feature_dim=int(md.get("augloader.feature_dim", 0)),
            num_classes=int(md.get("augloader.classes", 0)),
            record=rb,
        )


_CONTINUATION = 0xFFFFFFFF
_MAX_METADATA = 16 << 20  # an Arrow message header; ours are a few KiB
_MAX_BODY_BYTES = 1 << 34


def _read_exact(f, mv: memoryview) -> None:
    got = 0
    while got < len(mv):
        k = f.readinto(mv[got:])
        if not k:
            raise ConnectionLost("connection closed inside an Arrow message")
        got += k


def _body_length(meta: bytes) -> int:
    """bodyLength of an Arrow IPC Message flatbuffer (field 3 of the root
    table: version, header_type, header, bodyLength, custom_metadata)."""
    try:
        root = int.from_bytes(meta[0:4], "little")
        vtable = root - int.from_bytes(meta[root:root + 4], "little", signed=True)
        vt_size = int.from_bytes(meta[vtable:vtable + 2], "little")
        slot = 4 + 2 * 3
        if slot + 2 > vt_size:
            return 0
        off = int.from_bytes(meta[vtable + slot:vtable + slot + 2], "little")
        if off == 0:
            return 0
        if root + off + 8 > len(meta):
            raise IndexError
        return int.from_bytes(meta[root + off:root + off + 8], "little", signed=True)
    except (IndexError, ValueError):
        raise ConnectionLost("protocol error: malformed Arrow message header") from None


class _SocketReader:
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


class _ArrowReader:
    """Reads one Arrow IPC stream (docs/protocol.md) message by message.
    Each message lands, with one copy from the socket, in a buffer from
    pyarrow's memory pool (which recycles memory: no fresh pages per
    batch), and the record batch's arrays are views of it. Counts, and
    with digest=True hashes, every byte of the stream."""

    def __init__(self, f, digest: bool):
        self._f = f
        self._h = hashlib.sha256() if digest else None
        self.nbytes = 0

    def _take(self, mv) -> None:
        if self._h is not None:
            self._h.update(mv)
        self.nbytes += len(mv)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        schema = None
        prefix = bytearray(8)
        while True:
            _read_exact(self._f, memoryview(prefix))
            cont, mlen = struct.unpack("<Ii", prefix)
            if cont != _CONTINUATION or not 0 <= mlen <= _MAX_METADATA or mlen % 8:
                raise ConnectionLost(f"protocol error: Arrow message prefix {bytes(prefix).hex()}")
            if mlen == 0:
                self._take(prefix)
                return  # end-of-stream marker
            meta = bytearray(mlen)
            _read_exact(self._f, memoryview(meta))
            body = _body_length(meta)
            if not 0 <= body <= _MAX_BODY_BYTES or body % 8:
                raise ConnectionLost(f"protocol error: Arrow message body of {body} bytes")
            buf = pa.allocate_buffer(8 + mlen + body)
            mv = memoryview(buf).cast("B")
            mv[:8] = prefix
            mv[8:8 + mlen] = meta
            _read_exact(self._f, mv[8 + mlen:])
            self._take(mv)
            try:
                msg = ipc.read_message(buf)
                if msg.type == "schema" and schema is None:
                    schema = ipc.read_schema(msg)
                elif msg.type == "record batch" and schema is not None:
                    yield ipc.read_record_batch(msg, schema)
                else:
                    raise ConnectionLost(f"protocol error: unexpected Arrow {msg.type} message")
            except pa.ArrowInvalid as e:
                raise ConnectionLost(f"arrow stream broke: {e}") from e

    def hexdigest(self) -> Optional[str]:
        return self._h.hexdigest() if self._h is not None else None


def _read_frame(f, magic: bytes):
    hdr = f.read(_HEADER.size)
    if len(hdr) != _HEADER.size:
        raise ConnectionLost(f"connection closed before a {magic.decode()} frame")
    m, version, status, reserved, n = _HEADER.unpack(hdr)
    if m != magic or version != _VERSION or reserved != 0 or n > _MAX_BODY:
        raise ConnectionLost(f"protocol error: frame {m!r} v{version} length {n}")
    body = f.read(n)
    if len(body) != n:
        raise ConnectionLost("connection closed inside a frame")
    return status, json.loads(body)


class Stream:
    """One epoch of one rank: iterate it for :class:`Batch` objects; after
    the loop, ``info``, ``trailer``, ``nbytes`` and ``sha256`` (socket only,
    with ``digest=True``) describe what was read."""

    def __init__(self, batches, info: dict):
        self._batches = batches
        self.info = info
        self.trailer: Optional[dict] = None
        self.nbytes = 0
        self.sha256: Optional[str] = None

    def __iter__(self) -> Iterator[Batch]:
        return self._batches(self)


class Client:
    """A connection factory for one server (each epoch opens its own)."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: Optional[float] = None):
        u = urlparse(url)
        self.url, self.token, self.timeout = url, token, timeout
        if u.scheme == "unix":
            self._transport, self._path = "unix", u.path
        elif u.scheme in ("grpc", "grpc+tcp", "grpc+unix"):
            self._transport = "flight"
        else:
            raise ValueError(f"augloader: unsupported url {url!r} (want unix:///path, grpc://host:port or grpc+unix:///path)")

    def epoch(self, epoch: int, rank: int = 0, world: int = 1, batch_size: int = 0,
              start_batch: int = 0, digest: bool = False) -> Stream:
        req = {"epoch": int(epoch), "rank": int(rank), "world": int(world)}
        if batch_size:
            req["batch_size"] = int(batch_size)
        if start_batch:
            req["start_batch"] = int(start_batch)
        if self._transport == "unix":
            return self._unix(req, digest)
        return self._flight(req)

    def _unix(self, req: dict, digest: bool) -> Stream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
            body = json.dumps(req).encode()
            sock.sendall(_HEADER.pack(b"AUGQ", _VERSION, 0, 0, len(body)) + body)
            f = _SocketReader(sock)
            status, info = _read_frame(f, b"AUGR")
        except OSError as e:
            sock.close()
            raise ConnectionLost(str(e)) from e
        if status != 0:
            sock.close()
            raise ServerError(info.get("code", "internal"), info.get("error", ""))

        def batches(stream: Stream):
            reader = _ArrowReader(f, digest)
            try:
                try:
                    for rb in reader:
                        yield Batch.from_record_batch(rb)
                except OSError as e:
                    raise ConnectionLost(f"arrow stream broke: {e}") from e
                stream.nbytes, stream.sha256 = reader.nbytes, reader.hexdigest()
                status, trailer = _read_frame(f, b"AUGT")
                stream.trailer = trailer
                if status != 0:
                    raise ServerError(trailer.get("code", "internal"), trailer.get("error", ""))
                if trailer.get("batches") != info.get("batches"):
                    raise ConnectionLost(f"got {trailer.get('batches')} batches, promised {info.get('batches')}")
            finally:
                sock.close()

        return Stream(batches, info)

    def _flight(self, req: dict) -> Stream:
        import pyarrow.flight as fl

        u = urlparse(self.url)
        loc = f"grpc+unix://{u.path}" if u.scheme == "grpc+unix" else f"grpc+tcp://{u.netloc}"
        client = fl.FlightClient(loc)
        headers = [(b"authorization", f"Bearer {self.token}".encode())] if self.token else []
        opts = fl.FlightCallOptions(headers=headers, timeout=self.timeout)
        try:
            reader = client.do_get(fl.Ticket(json.dumps(req).encode()), opts)
        except (fl.FlightError, pa.ArrowException) as e:
            client.close()
            raise _flight_error(e) from e

        def batches(stream: Stream):
            n = 0
            try:
                for chunk in reader:
                    n += 1
                    yield Batch.from_record_batch(chunk.data)
            except (fl.FlightError, pa.ArrowException) as e:
                raise _flight_error(e) from e
            finally:
                client.close()
            stream.trailer = {"batches": n}

        return Stream(batches, {"batches": None})


def _flight_error(e) -> Exception:
    import pyarrow.flight as fl

    # pyarrow maps gRPC codes to exception types only in part (OUT_OF_RANGE
    # and INVALID_ARGUMENT arrive as ArrowInvalid): classify by type, then
    # by the status named in the message.
    msg = str(e)
    low = msg.lower()
    if isinstance(e, fl.FlightUnauthenticatedError) or "unauthenticated" in low:
        return ServerError("unauthenticated", msg)
    if isinstance(e, fl.FlightUnavailableError):
        return ServerError("unavailable", msg)
    if "out-of-range" in low or "out of range" in low:
        return ServerError("out_of_range", msg)
    if "invalid-argument" in low or "invalid argument" in low:
        return ServerError("bad_request", msg)
    return ServerError("internal", msg)


def connect(url: str, token: Optional[str] = None, timeout: Optional[float] = None) -> Client:
    """Return a client for ``unix:///path.sock``, ``grpc://host:port`` or
    ``grpc+unix:///path`` (Flight). ``token`` is Flight's bearer token."""
    return Client(url, token=token, timeout=timeout)
