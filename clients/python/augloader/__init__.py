"""Client for the augloader daemon.

Connect to ``augloader serve`` over its Unix socket or Arrow Flight and
iterate one epoch of one rank as PyG-ready numpy batches, built from the
Arrow buffers without any per-graph Python loop::

    import augloader
    client = augloader.connect("unix:///tmp/aug.sock")   # or "unix+shm:///tmp/aug.sock", "grpc://127.0.0.1:8815"
    for batch in client.epoch(3, rank=0, world=1):
        batch.edge_src, batch.edge_dst  # int32 [2|E|] views of the Arrow buffers
        batch.edge_index   # int64 [2, 2|E|], batch-global, both directions (built on first use)
        batch.ptr          # int64 [B+1]
        batch.batch        # int64 [N], graph of each node
        batch.dense_x()    # float32 [N, dim] one-hot (mixes for merged nodes)
        batch.soft_y()     # float32 [B, C]
        batch.soft_labels  # whether a label is mixed (SubMix): else soft_y() is one-hot of y

``unix+shm://`` (same host, Linux) reads the same stream through a memfd
ring this process maps (``?ring=BYTES``, 32 MiB by default): the daemon
writes each batch into it once and the arrays are views of the ring, with
no socket copy; a batch's place in the ring is given back when its last
array is freed, so keeping batches is safe (the daemon then sends them
through the socket instead).

The int32 views cost nothing; ``edge_index`` and ``dense_x()`` are the
host-memory layout of a PyG ``Batch`` and cost a widening copy and a dense
matrix per batch. ``augloader.torch.to_tensors`` moves the views to the
training device and widens them there.

Errors from the server raise :class:`ServerError` (with ``code``: one of
bad_request, out_of_range, unavailable, internal, unauthenticated); a
stream that ends early raises :class:`ConnectionLost`. The wire protocol is
docs/protocol.md of the augloader repository; its constants are in
``augloader._wire``. Modules: ``batch`` (Batch), ``_wire`` (frames,
limits, the Arrow message reader), ``_socket`` and ``_flight`` (the two
transports).
"""
from __future__ import annotations

from typing import Iterator, Optional
from urllib.parse import parse_qs, urlparse


def _check_pyarrow_numpy() -> None:
    """One line that says what to install, where pyarrow would fail to
    import: pyarrow 22 and later need NumPy 2, and Debian's python3-torch
    (a venv made with --system-site-packages over it) brings NumPy 1.x."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        pa, np = version("pyarrow"), version("numpy")
    except PackageNotFoundError:
        return
    major = lambda v: int(v.split(".")[0]) if v.split(".")[0].isdigit() else 0  # noqa: E731
    if major(pa) >= 22 and major(np) < 2:
        raise ImportError(f"augloader: pyarrow {pa} needs NumPy 2 and NumPy {np} is installed (Debian's python3-torch "
                          f"brings NumPy 1.x): pip install 'pyarrow<22', or install augloader with the numpy1 extra "
                          f"(pip install 'augloader-….whl[numpy1]')")


_check_pyarrow_numpy()

from . import _flight, _socket  # noqa: E402
from ._state import StateError  # noqa: E402
from ._wire import ConnectionLost, RequestError, ServerError, request  # noqa: E402
from .batch import Batch  # noqa: E402
from . import structures  # noqa: E402
from .structures import StructureBatch  # noqa: E402

__all__ = ["connect", "Client", "Batch", "StructureBatch", "structures", "ServerError", "ConnectionLost", "RequestError", "StateError", "Stream", "Daemon", "DaemonError", "node_daemon",
           "write_shards", "ConvertError"]


def _version() -> str:
    """The package's version: written into _version.py by a build
    (setup.py); in a checkout, read from internal/version/VERSION, the one
    place it is set (the Go binaries embed the same file)."""
    try:
        from ._version import __version__ as v  # type: ignore
        return v
    except ImportError:
        import pathlib
        try:
            return (pathlib.Path(__file__).resolve().parents[3] / "internal" / "version" / "VERSION").read_text().strip()
        except OSError:
            return "0+unknown"


__version__ = _version()

# The shared-memory transport's ring when a unix+shm:// URL names none
# (?ring=BYTES): room for a few dozen COLLAB batches of 32 graphs.
SHM_RING_DEFAULT = 32 << 20


class Stream:
    """One epoch of one rank: iterate it for :class:`Batch` objects; after
    the loop, ``info``, ``trailer``, ``nbytes``, ``sha256`` and
    ``batch_digests`` (socket only, with ``digest=True``) describe what was
    read."""

    def __init__(self, batches, info: dict):
        self._batches = batches
        self.info = info
        self.trailer: Optional[dict] = None
        self.nbytes = 0
        self.sha256: Optional[str] = None
        self.batch_digests: list = []

    def __iter__(self) -> Iterator[Batch]:
        return self._batches(self)

    def close(self) -> None:
        """Closes the connection of a stream not (or not wholly) iterated."""
        if self._close is not None:
            self._close()


class Client:
    """A connection factory for one server (each epoch opens its own)."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: Optional[float] = None, tls_root_certs=None):
        u = urlparse(url)
        self.url, self.token, self.timeout, self.tls_root_certs = url, token, timeout, tls_root_certs
        self._shm_ring = 0
        if not u.scheme and url:
            # A bare path is the daemon's socket, as `augloader fetch
            # --addr /run/aug.sock` takes it.
            self._transport, self._path = "unix", url
        elif u.scheme in ("unix", "unix+shm"):
            self._transport, self._path = "unix", u.path
            if u.scheme == "unix+shm":
                ring = parse_qs(u.query).get("ring", [str(SHM_RING_DEFAULT)])[-1]
                if not ring.isdigit():
                    raise ValueError(f"augloader: ring={ring!r} in {url!r} is not a byte count")
                self._shm_ring = int(ring)
        elif u.scheme in ("grpc", "grpc+tcp", "grpc+unix", "grpc+tls"):
            self._transport = "flight"
        else:
            raise ValueError(f"augloader: unsupported url {url!r} (want a socket path, unix:///path, unix+shm:///path, grpc://host:port, grpc+tls://host:port or grpc+unix:///path)")

    def epoch(self, epoch: int, rank: int = 0, world: int = 1, batch_size: int = 0,
              start_batch: int = 0, digest: bool = False, *, stride: int = 1, count: int = 0,
              batches_per_epoch: int = 0, drop_last: bool = False, view: str = "", fold: int = 0,
              server_digest: bool = False, resume=None, twins: int = 0, twin_weights=None, job: str = "") -> Stream:
        """One epoch of one rank: batches start_batch, start_batch+stride, …
        (at most count; 0: all) of view's fold. batches_per_epoch makes an
        epoch that many batches drawn from consecutive passes; drop_last
        drops each pass's short batch. digest=True computes the stream's
        and each batch's SHA-256 (socket); over Flight, which hides the
        bytes, it asks the server for its digest of the stream
        (``stream.sha256`` then holds the server's). resume: the epoch's
        earlier phases at other world sizes, ``[{"world": W, "graphs":
        [G0, …]}]`` (docs/protocol.md, "Resume"); ``rank`` and ``world``
        then split what they left. twins=k: k aligned, differently
        augmented copies of every graph in each batch (``Batch.twin(t)``),
        from one of the daemon's --twins sets, drawn per graph by
        twin_weights (one a set; default equal; docs/contrastive.md).
        job names the group of ranks this one trains with: the daemon
        refuses a rank of a job that asks for an older epoch than another
        of its ranks already did (docs/protocol.md, "Epochs of one job";
        the torch dataset names torchrun's job)."""
        req = request(epoch, rank, world, batch_size, start_batch, stride=stride, count=count,
                      batches_per_epoch=batches_per_epoch, drop_last=drop_last, view=view, fold=fold, resume=resume,
                      twins=twins, twin_weights=twin_weights, job=job)
        if self._transport == "unix":
            if server_digest:
                req["digest"] = True
            return _socket.open_stream(self._path, req, self.timeout, digest, Stream, self._shm_ring)
        if digest or server_digest:
            req["digest"] = True
        return _flight.open_stream(self.url, req, self.token, self.timeout, Stream, self.tls_root_certs)


def connect(url, token: Optional[str] = None, timeout: Optional[float] = None, *,
            batch_timeout: float = 30.0, tls_root_certs=None):
    """Return a client for ``/path.sock`` or ``unix:///path.sock``, ``unix+shm:///path.sock``
    (shared memory, ``?ring=BYTES``), ``grpc://host:port``,
    ``grpc+tls://host:port`` or ``grpc+unix:///path`` (Flight); or, given a
    list of such URLs, a client reading every epoch from all of those
    daemons at once, in order, failing over (``augloader._multi``).
    ``token`` is Flight's bearer token; ``tls_root_certs`` the PEM bytes to
    trust for grpc+tls."""
    if isinstance(url, (list, tuple)):
        if len(url) == 1:
            url = url[0]
        else:
            from ._multi import connect_many
            return connect_many(list(url), token=token, timeout=timeout, batch_timeout=batch_timeout,
                                tls_root_certs=tls_root_certs)
    return Client(url, token=token, timeout=timeout, tls_root_certs=tls_root_certs)


from .daemon import Daemon, DaemonError  # noqa: E402  (daemon imports connect)
from .node import node_daemon  # noqa: E402
from .convert import ConvertError, write_shards  # noqa: E402
