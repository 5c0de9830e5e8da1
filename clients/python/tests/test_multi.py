"""Several daemons, one epoch: augloader.connect([...]) reads from all at
once, in order, byte for byte what one daemon sends; a daemon killed or
stopped mid-epoch is failed over; a daemon with another seed is refused;
the Flight path checks its trailer."""
import logging
import signal
import subprocess

import pytest

import augloader
from augloader._multi import ConfigMismatch


@pytest.fixture(scope="module")
def big_shards(make_synth_shards):
    return make_synth_shards(600, 9)


def start(bins, shards, seed=1, flight=False):
    return augloader.Daemon(shards, policy="submix:p=0.4,nodesam", seed=seed, batch_size=16, workers=1,
                            flight=flight, binary=str(bins / "augloader")).start()


def test_many_daemons_same_bytes(bins, big_shards):
    ds = [start(bins, big_shards, flight=True) for _ in range(3)]
    try:
        one = augloader.connect(ds[0].url).epoch(1, digest=True)
        want = [b.graph_id.tolist() for b in one]
        for urls in ([d.url for d in ds], [d.flight_url for d in ds]):
            s = augloader.connect(urls).epoch(1, digest=True)
            got = list(s)
            assert [b.graph_id.tolist() for b in got] == want
            if urls[0].startswith("unix"):
                assert s.batch_digests == one.batch_digests
            else:
                assert all(a.record.equals(b.record) for a, b in zip(got, augloader.connect(ds[0].url).epoch(1)))
        # Striding across daemons composes with a request's own stride.
        part = list(augloader.connect([d.url for d in ds[:2]]).epoch(1, start_batch=1, stride=3))
        assert [b.graph_id.tolist() for b in part] == want[1::3]
    finally:
        for d in ds:
            d.stop()


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_failover(bins, big_shards, how, caplog):
    ds = [start(bins, big_shards) for _ in range(3)]
    try:
        one = augloader.connect(ds[0].url).epoch(2, digest=True)
        ref = [b.graph_id.tolist() for b in one]
        s = augloader.connect([d.url for d in ds], batch_timeout=3.0).epoch(2, digest=True)
        got = []
        with caplog.at_level(logging.WARNING, logger="augloader"):
            for i, b in enumerate(s):
                got.append(b.graph_id.tolist())
                if i == 0:
                    ds[1].proc.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        assert got == ref
        assert s.batch_digests == one.batch_digests
        assert any(ds[1].socket in r.getMessage() for r in caplog.records), caplog.text
    finally:
        if how == "stop":
            ds[1].proc.send_signal(signal.SIGKILL)
        for d in ds:
            d.stop(check=False)


def test_other_configuration_refused(bins, big_shards):
    a, b = start(bins, big_shards, seed=1), start(bins, big_shards, seed=2)
    try:
        with pytest.raises(ConfigMismatch) as e:
            list(augloader.connect([a.url, b.url]).epoch(0))
        assert ("seed 1 vs 2" in str(e.value) or "seed 2 vs 1" in str(e.value)) and "refusing to mix" in str(e.value)
    finally:
        a.stop()
        b.stop()


def test_flight_trailer_and_digest(bins, big_shards):
    d = start(bins, big_shards, flight=True)
    try:
        s = augloader.connect(d.flight_url).epoch(0, digest=True)
        n = sum(1 for _ in s)
        sock = augloader.connect(d.url).epoch(0, digest=True)
        list(sock)
        assert s.trailer["batches"] == n and s.info["config"]["id"] == sock.info["config"]["id"]
        assert s.sha256 == sock.sha256  # the server's digest of what it sent = what the socket client hashed
    finally:
        d.stop()


def test_flight_tls(bins, big_shards, tmp_path):
    """Flight over TLS from Python: the same batches as the socket; a
    client that does not trust the certificate is refused."""
    import shutil

    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=augloader test",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    d = augloader.Daemon(big_shards, policy="nodesam", binary=str(bins / "augloader"),
                         args=["--flight", "grpc+tls://127.0.0.1:0", "--tls-cert", cert, "--tls-key", key]).start()
    try:
        url = d.ready["flight"]
        assert url.startswith("grpc+tls://127.0.0.1:")
        got = list(augloader.connect(url, tls_root_certs=cert.read_bytes()).epoch(0))
        want = list(augloader.connect(d.url).epoch(0))
        assert len(got) == len(want) and all(a.record.equals(b.record) for a, b in zip(got, want))
        with pytest.raises(augloader.ServerError):
            list(augloader.connect(url, timeout=5).epoch(0))
    finally:
        d.stop()
