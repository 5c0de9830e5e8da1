"""The augloader protocol (docs/protocol.md), the Python side: frame layout,
limits, error codes, batch columns and the Arrow IPC message reader.

Every constant here equals package wire's in Go; ``tests/test_wire.py``
checks them against ``testdata/golden/protocol.json``, which a Go test
writes from package wire, and parses the golden socket conversation
``testdata/golden/stream-tiny.bin`` that a Go test pins.
"""
from __future__ import annotations

import hashlib
import json
import struct
from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.ipc as ipc

# Frames: magic [4]byte | version u8 | status u8 | reserved u16 | length u32 LE | JSON body.
VERSION = 1
HEADER = struct.Struct("<4sBBHI")
HEADER_SIZE = HEADER.size
MAX_BODY = 64 << 10
MAGIC_REQUEST = b"AUGQ"
MAGIC_RESPONSE = b"AUGR"
MAGIC_TRAILER = b"AUGT"
STATUS_OK = 0
STATUS_ERROR = 1

# Arrow IPC messages (each: FF FF FF FF | int32 metadata length | flatbuffer | body).
MAX_ARROW_METADATA = 64 << 20
MAX_ARROW_BODY = 1 << 30
SCHEMA_VERSION = 2  # the newest graph batch schema this client reads (1 and 2)
STRUCTURE_SCHEMA_VERSION = 3  # batch schema 3: 3D atomistic structures
CONTINUATION = 0xFFFFFFFF

CODES = ("bad_request", "out_of_range", "unavailable", "internal")

COLUMNS = ("graph_id", "num_nodes", "edge_src", "edge_dst", "x_node", "x_code", "x_weight", "x",
           "y", "y_mix", "y_q", "policy", "padded", "x_cat", "edge_cat", "edge_x", "targets")
METADATA_KEYS_V1 = ("augloader.protocol_version", "augloader.dataset", "augloader.feature_kind",
                    "augloader.feature_dim", "augloader.classes", "augloader.epoch", "augloader.rank",
                    "augloader.world")
# Batch schema 2 (molecules and OGB): in every stream that says version 2.
METADATA_KEYS_V2 = ("augloader.task", "augloader.targets", "augloader.node_vocab", "augloader.node_dense",
                    "augloader.edge_vocab", "augloader.edge_dense", "augloader.edge_fill",
                    "augloader.edge_fill_value")
# Batch schema 3 (structures): in every stream whose feature kind is structures.
STRUCTURE_COLUMNS = ("graph_id", "num_nodes", "numbers", "positions", "cell", "pbc", "edge_src", "edge_dst",
                     "unit_shifts", "shifts")
METADATA_KEYS_V3 = ("augloader.cutoff", "augloader.neighbours", "augloader.properties", "augloader.augment")
# Only in a twin stream: the copies of each graph a record batch holds.
METADATA_TWINS = "augloader.twins"
METADATA_KEYS = METADATA_KEYS_V1 + METADATA_KEYS_V2 + (METADATA_TWINS,)
TASKS = ("class", "binary", "regression")

REQUEST_FIELDS = ("epoch", "rank", "world", "batch_size", "start_batch", "stride", "count",
                  "batches_per_epoch", "drop_last", "view", "fold", "job", "digest", "shm", "resume", "twins",
                  "twin_weights")
# An elastic resume's earlier phases (request field resume): the ranks of
# all phases together, and the phases.
MAX_RESUME_RANKS = 4096
MAX_RESUME_PHASES = 64
# Twins (request fields twins, twin_weights): copies of each graph a
# request may ask, twin sets a daemon may declare (one weight each).
MAX_TWINS = 4
MAX_TWIN_SETS = 64

# The shared-memory transport: descriptors (kind u32 | length u32 | offset
# u64) in place of the stream's messages; records (u64) back: a release
# (a ring message's sequence number) or SHM_READ | ring messages read.
SHM_DESCRIPTOR = struct.Struct("<IIQ")
SHM_RING = 1
SHM_INLINE = 2
SHM_RECORD = struct.Struct("<Q")
SHM_READ = 1 << 63
MIN_SHM_RING = 64 << 10
MAX_SHM_RING = 1 << 30
MAX_VIEW_NAME = 64
MAX_JOB = 256  # bytes of a request's job name (wire.MaxJob)

_I32, _I64, _F32 = pa.int32(), pa.int64(), pa.float32()


def code_type(vocabs) -> pa.DataType:
    """The Arrow type of categorical codes: the narrowest holding every
    vocabulary size (the edge fill's reserved code is one)."""
    m = max(vocabs, default=0)
    return pa.uint8() if m < 1 << 8 else pa.uint16() if m < 1 << 16 else _I32


def _expected_fields(info: dict):
    lst = lambda t: pa.list_(pa.field("item", t, nullable=False))  # noqa: E731
    if info["kind"] == "structures":
        f64, u8 = pa.float64(), pa.uint8()
        fields = [("graph_id", _I64), ("num_nodes", _I32), ("numbers", lst(u8)), ("positions", lst(f64)),
                  ("cell", lst(f64)), ("pbc", u8), ("edge_src", lst(_I64)), ("edge_dst", lst(_I64)),
                  ("unit_shifts", lst(f64)), ("shifts", lst(f64))]
        fields += [("prop." + name, lst(f64)) for name, _, _ in info["properties"]]
        if info["noise"]:
            fields.append(("noise", lst(f64)))
        return fields + [("padded", pa.bool_())]
    fields = [("graph_id", _I64), ("num_nodes", _I32), ("edge_src", lst(_I32)), ("edge_dst", lst(_I32))]
    if info["node_vocab"]:
        fields.append(("x_cat", lst(code_type(info["node_vocab"]))))
    if info["dense"]:
        fields.append(("x", lst(_F32)))
    elif not info["node_vocab"] and (info["version"] == 1 or info["feature_dim"] > 0):
        fields += [("x_node", lst(_I32)), ("x_code", lst(_I32)), ("x_weight", lst(_F32))]
    if info["edge_vocab"]:
        fields.append(("edge_cat", lst(code_type(info["edge_vocab"]))))
    if info["edge_dense"]:
        fields.append(("edge_x", lst(_F32)))
    if info["targets"]:
        fields.append(("targets", lst(_F32)))
    else:
        fields += [("y", _I32), ("y_mix", _I32), ("y_q", _F32)]
    return fields + [("policy", pa.string()), ("padded", pa.bool_())]


def _count(md: dict, k: str) -> int:
    v = md[k]
    if not (v.isascii() and v.isdigit()) or len(v) > 20:
        raise ConnectionLost(f"protocol error: schema metadata {k}={v!r} is not a count")
    return int(v)


def _counts(md: dict, k: str) -> list:
    v = md[k]
    if v == "":
        return []
    parts = v.split(",")
    if len(parts) > 1 << 16 or not all(p.isascii() and p.isdigit() and 0 < len(p) <= 10 for p in parts):
        raise ConnectionLost(f"protocol error: schema metadata {k}={v[:80]!r} is not a list of counts")
    return [int(p) for p in parts]


def schema_info(md: dict) -> dict:
    """What a checked stream's metadata says, parsed: version, feature kind
    and dim, dense, classes, and batch schema 2's task, targets, node and
    edge vocabularies and widths, the edge fill."""
    kind = md["augloader.feature_kind"]
    if kind == "structures":
        return structure_info(md)
    if kind not in ("labels", "degree", "attributes", "columns"):
        raise ConnectionLost(f"protocol error: feature kind {kind!r}")
    for k in ("augloader.epoch", "augloader.rank", "augloader.world"):
        _count(md, k)
    info = {"version": _count(md, "augloader.protocol_version"), "kind": kind,
            "feature_dim": _count(md, "augloader.feature_dim"), "classes": _count(md, "augloader.classes"),
            "task": "class", "targets": 0, "node_vocab": [], "node_dense": 0, "edge_vocab": [], "edge_dense": 0,
            "edge_fill": [], "edge_fill_value": 0.0}
    if info["version"] not in (1, SCHEMA_VERSION):
        raise ConnectionLost(f"protocol error: batch schema version {info['version']}, this client reads 1 and {SCHEMA_VERSION}")
    if info["version"] == 2:
        missing = [k for k in METADATA_KEYS_V2 if k not in md]
        if missing:
            raise ConnectionLost(f"protocol error: schema metadata lacks {missing}")
        info["task"] = md["augloader.task"]
        if info["task"] not in TASKS:
            raise ConnectionLost(f"protocol error: task {info['task']!r}")
        for k in ("targets", "node_dense", "edge_dense"):
            info[k] = _count(md, "augloader." + k)
        for k in ("node_vocab", "edge_vocab", "edge_fill"):
            info[k] = _counts(md, "augloader." + k)
        try:
            info["edge_fill_value"] = float(md["augloader.edge_fill_value"])
        except ValueError:
            raise ConnectionLost("protocol error: edge_fill_value is not a number") from None
        if (info["task"] == "class") != (info["targets"] == 0) or len(info["edge_fill"]) != len(info["edge_vocab"]):
            raise ConnectionLost(f"protocol error: task {info['task']} with {info['targets']} targets, "
                                 f"edge fill {info['edge_fill']} for vocabularies {info['edge_vocab']}")
    info["dense"] = kind == "attributes" or info["node_dense"] > 0
    info["twins"] = 1
    if METADATA_TWINS in md:
        info["twins"] = _count(md, METADATA_TWINS)
        if not 2 <= info["twins"] <= MAX_TWINS:
            raise ConnectionLost(f"protocol error: schema metadata {METADATA_TWINS}={info['twins']}: want 2 to {MAX_TWINS}")
    return info


def structure_info(md: dict) -> dict:
    """What a structure stream's metadata says (batch schema 3): the
    served cutoff and convention, the property columns (name, per, size),
    the augmentation and whether the noise column is there."""
    missing = [k for k in METADATA_KEYS_V3 if k not in md]
    if missing:
        raise ConnectionLost(f"protocol error: schema metadata lacks {missing}")
    for k in ("augloader.epoch", "augloader.rank", "augloader.world"):
        _count(md, k)
    if _count(md, "augloader.protocol_version") != STRUCTURE_SCHEMA_VERSION:
        raise ConnectionLost(f"protocol error: structures in batch schema {md['augloader.protocol_version']}, want 3")
    try:
        cutoff = float(md["augloader.cutoff"])
    except ValueError:
        raise ConnectionLost("protocol error: cutoff is not a number") from None
    props = []
    for part in filter(None, md["augloader.properties"].split(",")):
        name, per, size = part.rsplit(":", 2) if part.count(":") >= 2 else (part, "", "")
        if per not in ("structure", "atom") or not (size.isascii() and size.isdigit()) or not 0 < int(size) <= 1 << 16:
            raise ConnectionLost(f"protocol error: property {part[:80]!r}")
        props.append((name, per, int(size)))
    augment = md["augloader.augment"]
    if md["augloader.neighbours"] not in ("ase", "fairchem") or not cutoff > 0:
        raise ConnectionLost(f"protocol error: neighbours {md['augloader.neighbours']!r} at {cutoff} Å")
    return {"version": STRUCTURE_SCHEMA_VERSION, "kind": "structures", "cutoff": cutoff,
            "neighbours": md["augloader.neighbours"], "properties": props, "augment": augment,
            "noise": "noise=" in augment, "twins": 1, "task": "structures", "feature_dim": 0, "classes": 0}


def schema_info_of(schema: pa.Schema) -> dict:
    """schema_info of a schema's metadata (a checked stream's)."""
    return schema_info({k.decode(): v.decode() for k, v in (schema.metadata or {}).items()})


def check_schema(schema: pa.Schema) -> dict:
    """Checks a stream's schema against the protocol (columns, types,
    metadata) and returns its metadata as str -> str; ConnectionLost names
    what is wrong, so a damaged stream never reaches the trainer."""
    try:
        md = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    except UnicodeDecodeError:
        raise ConnectionLost("protocol error: schema metadata is not UTF-8") from None
    required = METADATA_KEYS_V1
    if md.get("augloader.feature_kind") == "structures":
        required = [k for k in METADATA_KEYS_V1 if k not in ("augloader.feature_dim", "augloader.classes")]
    missing = [k for k in required if k not in md]
    if missing:
        raise ConnectionLost(f"protocol error: schema metadata lacks {missing}")
    info = schema_info(md)
    got = [(f.name, f.type) for f in schema]
    want = _expected_fields(info)
    if [n for n, _ in got] != [n for n, _ in want] or any(not a.equals(b) for (_, a), (_, b) in zip(got, want)):
        raise ConnectionLost(f"protocol error: batch columns {got}, want {want}")
    return md


class ServerError(Exception):
    """The server refused or cut the request."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ConnectionLost(Exception):
    """The connection closed, or broke the protocol, before the stream was
    complete."""


class RequestError(ValueError):
    """A request (or a dataset setting that becomes one) the protocol
    refuses, found before it is sent: the message names the field."""


# Go's int is 64 bits: a count past it would come back as the daemon's
# "cannot unmarshal"; the epoch is a uint64.
MAX_COUNT = (1 << 63) - 1
MAX_EPOCH = (1 << 64) - 1


def encode_request(req: dict) -> bytes:
    """A request frame for req (request_body's checks)."""
    body = request_body(req)
    return HEADER.pack(MAGIC_REQUEST, VERSION, STATUS_OK, 0, len(body)) + body


def request_body(req: dict) -> bytes:
    """The JSON body of a request (the socket's frame, Flight's ticket),
    checked as the server's DecodeRequest checks it: known fields only,
    non-negative ints, epoch, rank and world named, testdata/requests/checks.json's
    cases. RequestError names the field."""
    unknown = set(req) - set(REQUEST_FIELDS)
    if unknown:
        raise RequestError(f"augloader: unknown request fields {sorted(unknown)}")
    for k, v in req.items():
        if k in ("drop_last", "digest", "shm"):
            if not isinstance(v, bool):
                raise RequestError(f"augloader: request field {k}={v!r} is not a bool")
        elif k == "view":
            if not isinstance(v, str) or len(v.encode()) > MAX_VIEW_NAME:
                raise RequestError(f"augloader: request field view={v!r} is not a name of at most {MAX_VIEW_NAME} bytes")
        elif k == "job":
            if not isinstance(v, str) or len(v.encode()) > MAX_JOB:
                raise RequestError(f"augloader: request field job={v!r} is not a name of at most {MAX_JOB} bytes")
        elif k == "resume":
            check_resume(v)
        elif k == "twin_weights":
            check_twins(req.get("twins", 0), v)
        elif not is_count(v, MAX_EPOCH if k == "epoch" else MAX_COUNT):
            raise RequestError(f"augloader: request field {k}={v!r} is not an integer in 0..{MAX_EPOCH if k == 'epoch' else MAX_COUNT}")
        elif k == "twins":
            check_twins(v, None)
    # As the server's DecodeRequest: the three fields every request names,
    # and a world of at least one rank (testdata/requests/checks.json).
    if not {"epoch", "rank", "world"} <= set(req):
        raise RequestError("augloader: a request needs epoch, rank and world")
    if req["world"] < 1:
        raise RequestError(f"augloader: world {req['world']}: a world has at least one rank")
    return json.dumps(req, separators=(",", ":")).encode()


def request(epoch: int, rank: int = 0, world: int = 1, batch_size: int = 0, start_batch: int = 0, *,
            stride: int = 1, count: int = 0, batches_per_epoch: int = 0, drop_last: bool = False,
            view: str = "", fold: int = 0, resume=None, twins: int = 0, twin_weights=None, job: str = "") -> dict:
    """A request body with only the fields that differ from their defaults."""
    req = {"epoch": int(epoch), "rank": int(rank), "world": int(world)}
    for k, v, default in (("batch_size", batch_size, 0), ("start_batch", start_batch, 0), ("stride", stride, 1),
                          ("count", count, 0), ("batches_per_epoch", batches_per_epoch, 0), ("fold", fold, 0)):
        if int(v) != default:
            req[k] = int(v)
    if drop_last:
        req["drop_last"] = True
    if view:
        req["view"] = str(view)
    if job:
        req["job"] = str(job)
    if resume:
        # Integers as ints (NumPy's too); anything else is left for the
        # request's check, which names it.
        req["resume"] = [{k: ([_index(g) for g in v] if k == "graphs" and isinstance(v, (list, tuple)) else _index(v))
                          for k, v in p.items()} if isinstance(p, dict) else p for p in resume]
    if twins:
        req["twins"] = int(twins)
    if twin_weights is not None and len(twin_weights):
        req["twin_weights"] = [float(w) for w in twin_weights]
    return req


def _index(v):
    """v as an int when it is an integer of any kind (a NumPy int), else v."""
    import operator

    try:
        return operator.index(v)
    except TypeError:
        return v


def is_count(v, limit: int = MAX_COUNT) -> bool:
    """v is an int in 0..limit (bool is not): what the daemon's Go int (or
    the epoch's uint64) holds."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= limit


def check_epoch(epoch) -> int:
    """epoch as an int in 0..MAX_EPOCH, or RequestError (an epoch past it
    would wrap to another epoch in shared memory or on the wire)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        try:
            if float(epoch) != int(epoch):
                raise ValueError
            epoch = int(epoch)
        except (TypeError, ValueError, OverflowError):
            raise RequestError(f"augloader: epoch {epoch!r} is not an integer") from None
    if not 0 <= epoch <= MAX_EPOCH:
        raise RequestError(f"augloader: epoch {epoch} is not in 0..2**64-1")
    return epoch


def check_resume(phases) -> None:
    """Checks a request's resume phases as the server's DecodeRequest does:
    a list of {"world": W ≥ 1, "graphs": [W non-negative ints]}, within
    MAX_RESUME_PHASES and MAX_RESUME_RANKS."""
    if not isinstance(phases, list) or len(phases) > MAX_RESUME_PHASES:
        raise RequestError(f"augloader: request field resume is not a list of at most {MAX_RESUME_PHASES} phases")
    ranks = 0
    for i, ph in enumerate(phases):
        w = ph.get("world") if isinstance(ph, dict) else None
        g = ph.get("graphs") if isinstance(ph, dict) else None
        if (not isinstance(ph, dict) or set(ph) != {"world", "graphs"} or not is_count(w) or w < 1
                or not isinstance(g, list) or len(g) != w or not all(is_count(x) for x in g)):
            raise RequestError(f"augloader: resume phase {i} {str(ph)[:200]} is not {{'world': W >= 1, 'graphs': [W counts >= 0]}}")
        ranks += w
        if ranks > MAX_RESUME_RANKS:
            raise RequestError(f"augloader: resume phases of more than {MAX_RESUME_RANKS} ranks together")


def twin_weights(weights) -> Optional[list]:
    """weights as a list of floats (None: none given), or RequestError for
    what is no finite number (10**400 overflows a float)."""
    if weights is None:
        return None
    try:
        return [float(w) if not isinstance(w, bool) else None for w in weights]
    except (TypeError, ValueError, OverflowError) as e:
        raise RequestError(f"augloader: twin_weights={str(weights)[:200]}: not a list of numbers ({e})") from None


def check_twins(twins, weights) -> None:
    """Checks a request's twins and twin weights as the server's
    DecodeRequest does: twins 0 or 2..MAX_TWINS; weights only with twins,
    at most MAX_TWIN_SETS finite non-negative numbers, one positive, their
    sum finite (an empty list is none given, as the daemon reads it)."""
    import math

    if not is_count(twins) or twins == 1 or twins > MAX_TWINS:
        raise RequestError(f"augloader: twins={twins!r}: ask for 2 to {MAX_TWINS} copies of each graph (0: one)")
    if weights is None or (isinstance(weights, list) and not weights):
        return
    if not twins:
        raise RequestError("augloader: twin_weights without twins")
    if (not isinstance(weights, list) or len(weights) > MAX_TWIN_SETS
            or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and _finite(w) and w >= 0 for w in weights)
            or not any(w > 0 for w in weights)
            or not math.isfinite(sum(float(w) for w in weights))):
        raise RequestError(f"augloader: twin_weights={str(weights)[:200]}: want at most {MAX_TWIN_SETS} finite non-negative "
                           f"numbers, one a declared twin set, at least one positive, their sum finite")


def _finite(w) -> bool:
    """Whether w is a finite float64 (an int past it overflows)."""
    import math

    try:
        return math.isfinite(float(w))
    except OverflowError:
        return False


def read_exact(f, mv: memoryview) -> None:
    """Fills mv from f (anything with readinto); ConnectionLost at EOF."""
    got = 0
    while got < len(mv):
        k = f.readinto(mv[got:])
        if not k:
            raise ConnectionLost("connection closed inside an Arrow message")
        got += k


def read_frame(f, magic: bytes):
    """Reads one frame from f (anything with read) and returns (status,
    decoded JSON body)."""
    hdr = f.read(HEADER_SIZE)
    if len(hdr) != HEADER_SIZE:
        raise ConnectionLost(f"connection closed before a {magic.decode()} frame")
    m, version, status, reserved, n = HEADER.unpack(hdr)
    if m != magic or version != VERSION or status > STATUS_ERROR or reserved != 0 or n > MAX_BODY:
        raise ConnectionLost(f"protocol error: frame {m!r} v{version} status {status} length {n}")
    body = f.read(n)
    if len(body) != n:
        raise ConnectionLost("connection closed inside a frame")
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise ConnectionLost(f"protocol error: frame body is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ConnectionLost("protocol error: frame body is not a JSON object")
    return status, doc


def body_length(meta) -> int:
    """bodyLength of an Arrow IPC Message flatbuffer (field 3 of the root
    table: version, header_type, header, bodyLength, custom_metadata)."""
    try:
        root = int.from_bytes(meta[0:4], "little")
        vtable = root - int.from_bytes(meta[root:root + 4], "little", signed=True)
        if vtable < 0 or root + 4 > len(meta):
            raise IndexError
        vt_size = int.from_bytes(meta[vtable:vtable + 2], "little")
        slot = 4 + 2 * 3
        if vtable + 2 > len(meta) or slot + 2 > vt_size:
            return 0
        if vtable + slot + 2 > len(meta):
            raise IndexError
        off = int.from_bytes(meta[vtable + slot:vtable + slot + 2], "little")
        if off == 0:
            return 0
        if root + off + 8 > len(meta):
            raise IndexError
        return int.from_bytes(meta[root + off:root + off + 8], "little", signed=True)
    except (IndexError, ValueError):
        raise ConnectionLost("protocol error: malformed Arrow message header") from None


def socket_messages(f) -> Iterator[pa.Buffer]:
    """The messages of an Arrow IPC stream read from f (anything with
    readinto), each whole (prefix, metadata, body) in one buffer from
    pyarrow's memory pool (which recycles memory: no fresh pages per
    batch), with one copy from the transport; the last is the 8-byte
    end-of-stream marker."""
    prefix = bytearray(8)
    while True:
        read_exact(f, memoryview(prefix))
        cont, mlen = struct.unpack("<Ii", prefix)
        if cont != CONTINUATION or not 0 <= mlen <= MAX_ARROW_METADATA or mlen % 8:
            raise ConnectionLost(f"protocol error: Arrow message prefix {bytes(prefix).hex()}")
        if mlen == 0:
            yield pa.py_buffer(bytes(prefix))
            return
        meta = bytearray(mlen)
        read_exact(f, memoryview(meta))
        body = body_length(meta)
        if not 0 <= body <= MAX_ARROW_BODY or body % 8:
            raise ConnectionLost(f"protocol error: Arrow message body of {body} bytes")
        buf = pa.allocate_buffer(8 + mlen + body)
        mv = memoryview(buf).cast("B")
        mv[:8] = prefix
        mv[8:8 + mlen] = meta
        read_exact(f, mv[8 + mlen:])
        yield buf


class ArrowReader:
    """Reads one Arrow IPC stream message by message from ``messages``
    (whole messages, as ``socket_messages`` or the shared-memory transport
    yields them); the record batch's arrays are views of each message's
    buffer. Counts, and with digest=True hashes, every byte of the stream;
    ``batch_digests`` holds each record batch message's SHA-256 (the Go
    client's per-batch digest)."""

    def __init__(self, messages, digest: bool):
        self._messages = messages
        self._h = hashlib.sha256() if digest else None
        self.batch_digests: list = []
        self.metadata: dict = {}
        self.info: dict = {}  # schema_info of the metadata, once the schema is read
        self.nbytes = 0

    def _take(self, mv, batch: bool) -> None:
        if self._h is not None:
            self._h.update(mv)
            if batch:
                self.batch_digests.append(hashlib.sha256(mv).hexdigest())
        self.nbytes += len(mv)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        schema = None
        for buf in self._messages:
            mv = memoryview(buf).cast("B")
            if len(mv) < 8:
                raise ConnectionLost(f"protocol error: Arrow message of {len(mv)} bytes")
            cont, mlen = struct.unpack_from("<Ii", mv)
            if cont != CONTINUATION or not 0 <= mlen <= MAX_ARROW_METADATA or mlen % 8 or 8 + mlen > len(mv):
                raise ConnectionLost(f"protocol error: Arrow message prefix {bytes(mv[:8]).hex()}")
            if mlen == 0:
                if len(mv) != 8:
                    raise ConnectionLost(f"protocol error: end-of-stream marker of {len(mv)} bytes")
                self._take(mv, False)
                return
            body = body_length(mv[8:8 + mlen])
            if not 0 <= body <= MAX_ARROW_BODY or body % 8 or 8 + mlen + body != len(mv):
                raise ConnectionLost(f"protocol error: Arrow message body of {body} bytes in {len(mv)}")
            try:
                msg = ipc.read_message(buf)
                if msg.type == "schema" and schema is None:
                    self._take(mv, False)
                    schema = ipc.read_schema(msg)
                    self.metadata = check_schema(schema)
                    self.info = schema_info(self.metadata)
                elif msg.type == "record batch" and schema is not None:
                    self._take(mv, True)
                    rb = ipc.read_record_batch(msg, schema)
                    # Buffer sizes against lengths (O(columns)): a damaged
                    # message must not give numpy a view past its buffer.
                    rb.validate()
                    yield rb
                else:
                    raise ConnectionLost(f"protocol error: unexpected Arrow {msg.type} message")
            except (pa.ArrowException, ValueError, TypeError, OSError) as e:
                raise ConnectionLost(f"arrow stream broke: {e}") from e
        raise ConnectionLost("the stream ended without its end-of-stream marker")

    def hexdigest(self) -> Optional[str]:
        return self._h.hexdigest() if self._h is not None else None
