"""Replayed epochs are the live daemon's, for every request field: a pool
of two replay daemons read through the multi-address client, through
pyarrow.flight following GetFlightInfo's endpoints across --peers, and
through `augloader fetch --addr A --addr B`, gives one live daemon's
batches byte for byte (docs/reliability.md). Replay used to ignore stride,
count, batches_per_epoch, drop_last, view and fold: a pool of two sent
every batch twice, with exit status 0."""
import json
import subprocess

import pyarrow.flight as fl
import pytest

import augloader
from conftest import free_port

VIEWS = ["train={fold}:training:nodesam:0.5,submix:p=0.4:0.5", "test={fold}:test"]
ARGS = ["--batch-size", "8", "--seed", "3", "--workers", "2"]


@pytest.fixture(scope="module")
def pool(bins, make_synth_shards, tmp_path_factory):
    shards = make_synth_shards(80, 5)
    tmp = tmp_path_factory.mktemp("replay")
    aug = str(bins / "augloader")
    subprocess.run([aug, "split", "--shards", shards, "--folds", "3", "--out", tmp / "folds"], check=True, capture_output=True)
    views = [a for v in VIEWS for a in ("--view", v)]
    subprocess.run([aug, "materialize", "--shards", shards, "--folds", tmp / "folds", *views, *ARGS,
                    "--epochs", "0:4", "--world", "2", "--out", tmp / "epochs"], check=True, capture_output=True)
    out = subprocess.run([aug, "verify", tmp / "epochs"], check=True, capture_output=True, text=True).stdout
    assert "24 complete epochs" in out, out  # 4 epochs of 3 folds of 2 views
    ports = [free_port(), free_port()]
    peers = ",".join(f"grpc://127.0.0.1:{p}" for p in ports)
    live = augloader.Daemon(shards, folds=tmp / "folds", views=VIEWS, binary=aug, flight=True, args=ARGS[:2] + ARGS[4:],
                            seed=3, batch_size=8)
    replays = [augloader.Daemon(materialized=tmp / "epochs", binary=aug, flight=f"grpc://127.0.0.1:{p}", args=["--peers", peers])
               for p in ports]
    for d in [live] + replays:
        d.start()
    yield live, replays
    for d in [live] + replays:
        d.stop()


REQUESTS = [
    dict(epoch=1, rank=0, world=2, view="train", fold=0),
    dict(epoch=3, rank=1, world=2, view="train", fold=2, start_batch=1),
    dict(epoch=2, rank=1, world=2, view="train", fold=1, stride=2),
    dict(epoch=2, rank=0, world=2, view="train", fold=1, count=2),
    dict(epoch=2, rank=0, world=2, view="train", fold=1, drop_last=True),
    dict(epoch=1, rank=1, world=2, view="train", fold=0, batches_per_epoch=5),
    dict(epoch=1, rank=0, world=2, view="train", fold=2, batches_per_epoch=3, drop_last=True, start_batch=1),
    dict(epoch=0, rank=1, world=2, view="test", fold=1),
]


def ident(req):
    return ",".join(f"{k}={v}" for k, v in req.items())


@pytest.mark.parametrize("req", REQUESTS, ids=ident)
def test_pool_of_two_is_one_live_daemon(pool, req):
    live, replays = pool
    want = augloader.connect(live.url).epoch(**req, digest=True)
    want_batches = list(want)
    assert want_batches, "the request has no batch: it shows nothing"
    got = augloader.connect([d.url for d in replays]).epoch(**req, digest=True)
    got_batches = list(got)
    assert got.batch_digests == want.batch_digests
    assert [b.graph_id.tolist() for b in got_batches] == [b.graph_id.tolist() for b in want_batches]
    # One replay daemon alone: the whole stream, byte for byte, response included.
    one = augloader.connect(replays[0].url).epoch(**req, digest=True)
    list(one)
    assert one.sha256 == want.sha256 and one.info == want.info


@pytest.mark.parametrize("req", REQUESTS[:3] + REQUESTS[5:6], ids=ident)
def test_flight_endpoints_across_peers(pool, req):
    """A plain Flight client: GetFlightInfo from one replay daemon splits the
    rank's batches across both (--peers); following the endpoints gives the
    live daemon's batches, and each endpoint's stream digest equals the
    live daemon's for the same ticket."""
    live, replays = pool
    body = json.dumps(augloader.request(**req) | {"digest": True}).encode()
    info = fl.FlightClient(replays[0].flight_url.replace("grpc://", "grpc+tcp://")).get_flight_info(
        fl.FlightDescriptor.for_command(body))
    assert len(info.endpoints) == 2, "the request was not split across the peers"
    live_client = fl.FlightClient(live.flight_url.replace("grpc://", "grpc+tcp://"))
    got, want = [], []
    for ep in info.endpoints:
        assert ep.locations, "an endpoint without a location"
        c = fl.FlightClient(ep.locations[0])
        for client, out in ((c, got), (live_client, want)):
            digest = None
            for chunk in client.do_get(ep.ticket):
                if chunk.data is None:
                    digest = json.loads(bytes(chunk.app_metadata))["sha256"]
                else:
                    out.append(chunk.data)
            assert digest, "no trailer with the stream's digest"
            out.append(digest)
    assert len(got) == len(want) > 2
    for a, b in zip(got, want):
        assert a == b if isinstance(a, str) else a.equals(b)
    whole = [b.record for b in augloader.connect(live.url).epoch(**req)]
    assert len(whole) == len([x for x in got if not isinstance(x, str)])


def test_fetch_cli_pool(bins, pool):
    live, replays = pool

    def fetch(*addrs, extra=()):
        args = [a for d in addrs for a in ("--addr", d.socket)]
        out = subprocess.run([bins / "augloader", "fetch", *args, "--epoch", "2", "--rank", "1", "--world", "2",
                              "--view", "train", "--fold", "1", *extra, "--json"], check=True, capture_output=True, text=True)
        return json.loads(out.stdout)

    for extra in ((), ("--stride", "2"), ("--batches-per-epoch", "4", "--drop-last")):
        want, got = fetch(live, extra=extra), fetch(*replays, extra=extra)
        assert got["batches_sha256"] == want["batches_sha256"] and got["graphs"] == want["graphs"] > 0, extra
