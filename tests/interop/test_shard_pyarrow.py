"""Shard files open in an independent Arrow implementation (pyarrow) and show
the schema documented in docs/format.md.

The test builds shardconv, converts the tiny fixture and a synthetic
COLLAB-shaped dataset (zstd and lz4), and reads every shard with pyarrow.
"""
import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def shardconv(tmp_path_factory):
    exe = os.environ.get("SHARDCONV")
    if exe:
        return exe
    out = tmp_path_factory.mktemp("bin") / "shardconv"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/shardconv"], cwd=ROOT, check=True)
    return str(out)


def convert(shardconv, tmp_path, src, *extra):
    out = tmp_path / "shards"
    subprocess.run([shardconv, "convert", "-q", "-i", str(src), "-o", str(out), *extra], check=True)
    return out


def col(name, typ):
    return pa.field(name, typ, nullable=False)


def list_of(typ):
    return pa.list_(pa.field("item", typ, nullable=False))


def expected_schema(manifest):
    """docs/format.md, "Schema": every column and list item is non-null."""
    kind = manifest["features"]["kind"]
    fields = [
        col("graph_id", pa.int64()),
        col("label", pa.int32()),
        col("num_nodes", pa.int32()),
        col("edges", list_of(pa.int32())),
    ]
    if kind in ("labels", "degree"):
        fields.append(col("x_code", list_of(pa.int32())))
    else:
        fields.append(col("x", list_of(pa.float32())))
    if manifest["has_edge_labels"]:
        fields.append(col("edge_label", list_of(pa.int32())))
    return pa.schema(fields)


def go_compact_json(doc):
    """Compact JSON as Go's encoding/json writes it (keys in document order,
    <, >, & and U+2028/9 escaped, other non-ASCII as is)."""
    s = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return s.encode()


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), bytewise from a table: slow but independent of
    the Go code."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def check_page_map(info, data):
    """docs/format.md, "Page map": the schema message and each page lie
    where the map says, with its CRC-32C, and each page read alone behind
    the schema message is a stream of one record batch of the batch's
    graphs."""
    pm = info["page_map"]
    sc = pm["schema"]
    assert sc["offset"] == 8
    schema_msg = data[sc["offset"]:sc["offset"] + sc["length"]]
    assert f"{crc32c(schema_msg):08x}" == sc["crc32c"]
    assert len(pm["pages"]) == len(info["batches"])
    end = sc["offset"] + sc["length"]
    for page, graphs in zip(pm["pages"], info["batches"]):
        assert page["offset"] >= end and page["offset"] + page["length"] <= len(data)
        body = data[page["offset"]:page["offset"] + page["length"]]
        assert f"{crc32c(body):08x}" == page["crc32c"]
        stream = ipc.open_stream(pa.BufferReader(schema_msg + body + b"\xff\xff\xff\xff\x00\x00\x00\x00"))
        batches = list(stream)
        assert len(batches) == 1 and batches[0].num_rows == graphs
        end = page["offset"] + page["length"]


def check_folder(out):
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "augloader-shards"
    assert manifest["format_version"] == 2
    # The seal (docs/format.md): SHA-256 of the compact manifest without
    # its checksum field.
    unsealed = {k: v for k, v in manifest.items() if k != "checksum"}
    want_seal = "sha256:" + hashlib.sha256(go_compact_json(unsealed)).hexdigest()
    assert manifest["checksum"] == want_seal
    want = expected_schema(manifest)
    graphs = nodes = edges = 0
    for info in manifest["shards"]:
        data = (out / info["file"]).read_bytes()
        assert len(data) == info["bytes"]
        assert f"{crc32c(data):08x}" == info["crc32c"]
        check_page_map(info, data)
        with pa.memory_map(str(out / info["file"])) as src:
            reader = ipc.open_file(src)
            assert reader.schema.equals(want), f"{reader.schema} != {want}"
            md = {k.decode(): v.decode() for k, v in reader.schema.metadata.items()}
            assert md["augloader.format_version"] == str(manifest["format_version"])
            assert md["augloader.feature_kind"] == manifest["features"]["kind"]
            assert md["augloader.feature_dim"] == str(manifest["features"]["dim"])
            assert reader.num_record_batches == len(info["batches"])
            for i in range(reader.num_record_batches):
                b = reader.get_batch(i)
                assert b.num_rows == info["batches"][i]
                n = b.column("num_nodes").to_numpy()
                ids = b.column("graph_id").to_numpy()
                assert np.array_equal(ids, np.arange(graphs, graphs + b.num_rows))
                # Zero-copy flattening: no per-graph loop needed.
                e = b.column("edges")
                flat = e.values.to_numpy()
                lens = np.diff(e.offsets.to_numpy())
                assert np.all(lens % 2 == 0)
                u, v = flat[0::2], flat[1::2]
                owner = np.repeat(np.arange(b.num_rows), lens // 2)
                assert np.all(u < v) and np.all(u >= 0) and np.all(v < n[owner])
                if "x_code" in b.schema.names:
                    codes = b.column("x_code")
                    assert np.array_equal(np.diff(codes.offsets.to_numpy()), n)
                    c = codes.values.to_numpy()
                    assert c.min() >= 0 and c.max() < manifest["features"]["dim"]
                graphs += b.num_rows
                nodes += int(n.sum())
                edges += int(lens.sum()) // 2
    assert (graphs, nodes, edges) == (
        manifest["stats"]["graphs"], manifest["stats"]["nodes"], manifest["stats"]["edges"])
    return manifest


def test_tiny(shardconv, tmp_path):
    out = convert(shardconv, tmp_path, ROOT / "testdata" / "tu" / "TINY")
    m = check_folder(out)
    assert m["stats"]["edges"] == 6
    table = ipc.open_file(str(out / "shard-00000.arrow")).read_all()
    assert table.column("edges").to_pylist()[0] == [0, 1, 0, 2, 1, 2]
    assert table.column("label").to_pylist() == [1, 0, 1]


@pytest.mark.parametrize("compression", ["zstd", "lz4", "none"])
def test_synthetic_collab(shardconv, tmp_path, compression):
    tu = tmp_path / "tu"
    subprocess.run([shardconv, "synth", "--like", "COLLAB", "--graphs", "200", "--seed", "3", "--out", str(tu)],
                   check=True, capture_output=True)
    out = convert(shardconv, tmp_path, tu, "--compression", compression, "--shard-size", "200000")
    m = check_folder(out)
    assert len(m["shards"]) > 1, "expected several shards at a 200 kB target"
    assert m["features"]["kind"] == "degree"


def test_attributes(shardconv, tmp_path):
    out = convert(shardconv, tmp_path, ROOT / "testdata" / "tu" / "TINY", "--features", "attributes")
    check_folder(out)
    table = ipc.open_file(str(out / "shard-00000.arrow")).read_all()
    assert table.schema.field("x").type == list_of(pa.float32())
    assert table.column("x").to_pylist()[1] == [1.0, 1.5, 2.0, 1.5, 3.0, 1.5]


def test_golden_format3():
    """The golden format 3 fixture (testdata/golden/tinymol.shards, from
    testdata/ogb/TINYMOL) read by pyarrow alone: the manifest's seal and
    CRC-32C, the schema of docs/format.md "Version 3" with codes as narrow
    as the manifest's widths, and every value as the csv.gz files say it
    (canonical edges, each with its first listing's features; NaN targets)."""
    import math
    out = ROOT / "testdata" / "golden" / "tinymol.shards"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format_version"] == 3 and manifest["features"] == {"kind": "columns", "dim": 0}
    unsealed = {k: v for k, v in manifest.items() if k != "checksum"}
    assert manifest["checksum"] == "sha256:" + hashlib.sha256(go_compact_json(unsealed)).hexdigest()
    assert manifest["node_features"]["width"] == 1 and manifest["edge_features"]["width"] == 2
    assert [c["vocab"] for c in manifest["edge_features"]["categorical"]] == [301, 2]
    assert manifest["task"] == {"kind": "regression", "targets": 2, "missing": 2}
    info = manifest["shards"][0]
    data = (out / info["file"]).read_bytes()
    assert len(data) == info["bytes"] and f"{crc32c(data):08x}" == info["crc32c"]
    check_page_map(info, data)
    reader = ipc.open_file(pa.BufferReader(data))
    want = pa.schema([col("graph_id", pa.int64()), col("targets", list_of(pa.float32())),
                      col("num_nodes", pa.int32()), col("edges", list_of(pa.int32())),
                      col("x_cat", list_of(pa.uint8())), col("edge_cat", list_of(pa.uint16()))])
    assert reader.schema.equals(want), f"{reader.schema} != {want}"
    md = {k.decode(): v.decode() for k, v in reader.schema.metadata.items()}
    assert md["augloader.format_version"] == "3" and md["augloader.feature_kind"] == "columns"
    t = reader.read_all().to_pydict()
    assert t["graph_id"] == [0, 1, 2] and t["num_nodes"] == [3, 2, 3]
    assert t["edges"] == [[0, 1, 0, 2, 1, 2], [0, 1], [0, 1, 1, 2]]
    assert t["x_cat"] == [[5, 1, 6, 0, 7, 1], [8, 0, 9, 1], [5, 0, 6, 1, 7, 0]]
    # (0, 2) is listed as "2,0" with 300,0; graph 1 lists (0, 1) both ways.
    assert t["edge_cat"] == [[1, 0, 300, 0, 2, 1], [0, 1], [3, 0, 3, 1]]
    nan = [[None if math.isnan(v) else v for v in row] for row in t["targets"]]
    assert nan == [[0.5, 1.0], [None, 0.0], [2.25, None]]
    split = json.loads((out / "split-s.json").read_text())
    assert split == {"training": [0, 2], "valid": [1], "test": []}
