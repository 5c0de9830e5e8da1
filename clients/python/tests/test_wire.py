"""The Python client's protocol code against Go's: every constant equals
the one package wire writes to testdata/golden/protocol.json; the golden
socket conversation a Go test pins (testdata/golden/stream-tiny.bin) parses
to the expected batches; and a seeded byte mutator over that conversation
never gets anything out of the parsers but a clean ConnectionLost or
ServerError (or a complete, valid stream)."""
import hashlib
import io
import json
import random

import numpy as np
import pytest

import augloader
from augloader import _wire
from augloader._socket import read_conversation

from conftest import ROOT

GOLDEN = ROOT / "testdata" / "golden"


def test_constants_equal_go():
    doc = json.loads((GOLDEN / "protocol.json").read_text())
    f = doc["frame"]
    assert (f["version"], f["header_size"], f["max_body"]) == (_wire.VERSION, _wire.HEADER_SIZE, _wire.MAX_BODY)
    assert f["magic"] == {"request": _wire.MAGIC_REQUEST.decode(), "response": _wire.MAGIC_RESPONSE.decode(),
                          "trailer": _wire.MAGIC_TRAILER.decode()}
    assert f["status"] == {"ok": _wire.STATUS_OK, "error": _wire.STATUS_ERROR}
    a = doc["arrow"]
    assert (a["max_metadata"], a["max_body"], a["schema_version"]) == (
        _wire.MAX_ARROW_METADATA, _wire.MAX_ARROW_BODY, _wire.SCHEMA_VERSION)
    assert tuple(doc["codes"]) == _wire.CODES
    assert tuple(doc["columns"]) == _wire.COLUMNS
    assert tuple(doc["metadata_keys"]) == _wire.METADATA_KEYS
    assert tuple(doc["request_fields"]) == _wire.REQUEST_FIELDS
    assert doc["resume"] == {"max_ranks": _wire.MAX_RESUME_RANKS, "max_phases": _wire.MAX_RESUME_PHASES}
    m = doc["shm"]
    assert (m["descriptor_size"], m["ring"], m["inline"], m["record_size"], m["read"], m["min_ring"], m["max_ring"]) == (
        _wire.SHM_DESCRIPTOR.size, _wire.SHM_RING, _wire.SHM_INLINE, _wire.SHM_RECORD.size, _wire.SHM_READ,
        _wire.MIN_SHM_RING, _wire.MAX_SHM_RING)


class _Stream:
    def __init__(self, info):
        self.info = info


def parse(data: bytes):
    """Parses a whole socket conversation (as the client reads a socket)."""
    f = io.BufferedReader(io.BytesIO(data))
    status, info = _wire.read_frame(f, _wire.MAGIC_RESPONSE)
    if status != _wire.STATUS_OK:
        raise augloader.ServerError(info.get("code", "internal"), info.get("error", ""))
    st = _Stream(info)
    batches = list(read_conversation(f, st, True))
    return st, batches


def test_golden_stream():
    data = (GOLDEN / "stream-tiny.bin").read_bytes()
    st, batches = parse(data)
    assert st.info["dataset"] == "TINY" and st.info["batches"] == 2 and st.info["graphs"] == 3
    assert st.trailer == {"batches": 2, "graphs": 3}
    assert [b.num_graphs for b in batches] == [2, 1]
    assert sorted(int(g) for b in batches for g in b.graph_id) == [0, 1, 2]
    # The stream digest covers the Arrow IPC bytes between the two frames.
    n = _wire.HEADER_SIZE + int.from_bytes(data[8:12], "little")
    ipc_bytes = data[n:n + st.nbytes]
    assert st.sha256 == hashlib.sha256(ipc_bytes).hexdigest()
    assert len(st.batch_digests) == 2
    for b in batches:
        src, dst = b.edge_index
        assert np.array_equal(b.batch[src], b.batch[dst])
        np.testing.assert_allclose(b.dense_x().sum(1), 1, rtol=1e-6)
        np.testing.assert_allclose(b.soft_y().sum(1), 1, rtol=1e-6)


def _with_column(rb, name, values):
    """rb with column name's values replaced (same type; a list column's
    offsets kept)."""
    import pyarrow as pa
    i = rb.schema.get_field_index(name)
    col = rb.column(i)
    if pa.types.is_list(col.type):
        col = pa.ListArray.from_arrays(col.offsets, pa.array(values, type=col.type.value_type), type=col.type)
    else:
        col = pa.array(values, type=col.type)
    return rb.set_column(i, rb.schema.field(i), col)


@pytest.mark.parametrize("column, value", [
    ("y", -1), ("y", 1 << 20), ("y_mix", -1), ("y_mix", 1 << 20),
    ("y_q", -0.5), ("y_q", 1.5), ("y_q", float("nan")),
])
def test_label_ranges_refused(column, value):
    """A label out of [0, classes), the other class too, or a q outside
    [0, 1] (NaN included) is refused by name when the batch is decoded:
    each end of each range (one uint32 max a column checks both ends)."""
    from augloader import Batch
    _, batches = parse((GOLDEN / "stream-tiny.bin").read_bytes())
    rb = batches[0].record
    vals = rb.column(column).to_pylist()
    vals[-1] = value
    with pytest.raises(ValueError, match="labels out of range"):
        Batch.from_record_batch(_with_column(rb, column, vals))


@pytest.mark.parametrize("column, value", [("x_code", -1), ("x_code", 1 << 20), ("x_node", -1), ("x_node", 1 << 20)])
def test_code_ranges_refused(column, value):
    """A one-hot code outside [0, feature_dim) or a node outside [0, N)
    is refused before the dense x is written."""
    from augloader import Batch
    _, batches = parse((GOLDEN / "stream-tiny.bin").read_bytes())
    rb = batches[0].record
    vals = rb.column(column).values.to_pylist()
    vals[-1] = value
    b = Batch.from_record_batch(_with_column(rb, column, vals))
    with pytest.raises(ValueError, match="feature codes or nodes out of range"):
        b.check_codes()


def test_request_encoding():
    frame = _wire.encode_request({"epoch": 3, "rank": 1, "world": 2})
    m, v, s, r, n = _wire.HEADER.unpack(frame[:_wire.HEADER_SIZE])
    assert (m, v, s, r) == (b"AUGQ", 1, 0, 0) and json.loads(frame[12:12 + n]) == {"epoch": 3, "rank": 1, "world": 2}
    for bad in ({"file": 1}, {"epoch": -1}, {"epoch": "3"}):
        with pytest.raises(ValueError):
            _wire.encode_request(bad)


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(b)) if b else 0
        if op == 0 and b:                       # flip a byte
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:                           # truncate
            del b[i:]
        elif op == 2:                           # insert junk
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 3 and len(b) >= i + 4:       # a length field gone wild
            b[i:i + 4] = rng.choice([b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\x08\x00\x00\x00"])
        elif op == 4 and b:                     # delete a run
            del b[i:i + rng.randint(1, 64)]
        elif op == 5 and len(b) > 8:            # duplicate a run
            j = rng.randrange(len(b) - 8)
            b[i:i] = b[j:j + rng.randint(1, 64)]
    return bytes(b)


def test_parsers_fuzz(monkeypatch):
    """5,000 seeded mutations of the golden conversation: every one parses
    to a valid stream or raises ConnectionLost / ServerError, never anything
    else (IndexError, struct.error, a pyarrow exception, a hang)."""
    # Small limits keep a forged length from allocating a gigabyte per try;
    # the checks themselves are the same.
    monkeypatch.setattr(_wire, "MAX_ARROW_BODY", 1 << 20)
    monkeypatch.setattr(_wire, "MAX_ARROW_METADATA", 1 << 16)
    data = (GOLDEN / "stream-tiny.bin").read_bytes()
    rng = random.Random(20261123)
    outcomes = {"ok": 0, "lost": 0, "server": 0}
    for _ in range(5000):
        m = mutate(rng, data)
        try:
            st, batches = parse(m)
            for b in batches:
                _ = (b.edge_index, b.ptr, b.soft_y())
                try:
                    b.dense_x()
                except ValueError:  # codes out of range: refused, not an IndexError
                    pass
            outcomes["ok"] += 1
        except augloader.ConnectionLost:
            outcomes["lost"] += 1
        except augloader.ServerError:
            outcomes["server"] += 1
    assert outcomes["lost"] > 4000, outcomes


def test_shared_request_cases():
    """testdata/requests/checks.json: the request checks the server
    (wire.TestSharedRequestCases) and this client agree on, case by case."""
    import json
    import pathlib

    from augloader import _wire

    path = pathlib.Path(__file__).resolve().parents[3] / "testdata" / "requests" / "checks.json"
    cases = json.loads(path.read_text())["cases"]
    assert len(cases) >= 20
    wrong = []
    for c in cases:
        try:
            _wire.request_body(c["request"])
            valid = True
        except _wire.RequestError:
            valid = False
        if valid != c["valid"]:
            wrong.append(f"{c['name']}: request_body says valid={valid}, the table {c['valid']}")
    assert not wrong, "\n".join(wrong)
