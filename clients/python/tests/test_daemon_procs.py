"""augloader.Daemon starts the daemon beside its trainer, and by default
leaves the trainer's loop a core (``--procs``, the cores the daemon's Go
code runs on once it serves): every core it may use but one. An explicit
``procs``, a ``--procs`` among the args, or a GOMAXPROCS the user set wins.
The daemon says on /metrics what it runs with; the bytes do not change."""
import os
import urllib.request

import pytest

import augloader
from augloader.daemon import default_procs


def served_procs(d) -> int:
    with urllib.request.urlopen(d.ready["metrics"], timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("augloader_server_procs "):
                return int(line.split()[1])
    raise AssertionError("no augloader_server_procs on /metrics")


def procs_flags(cmd) -> list:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--procs"] + [a for a in cmd if a.startswith("--procs=")]


def test_default_procs_counts_this_process_cores():
    cores = len(os.sched_getaffinity(0))
    assert default_procs() == max(1, cores - 1)
    assert default_procs(trainers=cores + 3) == 1  # never below one core


@pytest.mark.parametrize("how, env, kw, want_flags, want", [
    ("default", None, {}, [str(default_procs())], default_procs()),
    ("explicit", None, {"procs": 2}, ["2"], 2),
    ("in args", None, {"args": ["--procs", "3"]}, ["3"], 3),
    ("GOMAXPROCS", "3", {}, [], 3),
])
def test_daemon_procs(bins, synth_shards, monkeypatch, how, env, kw, want_flags, want):
    monkeypatch.delenv("GOMAXPROCS", raising=False)
    if env is not None:
        monkeypatch.setenv("GOMAXPROCS", env)
    args = ["--metrics", "127.0.0.1:0"] + kw.pop("args", [])
    with augloader.Daemon(synth_shards, policy="nodesam", binary=str(bins / "augloader"), batch_size=8,
                          args=args, **kw) as d:
        assert procs_flags(d.cmd) == want_flags, (how, d.cmd)
        assert served_procs(d) == want, how


def test_procs_change_no_byte(bins, synth_shards):
    digests = []
    for procs in (1, 2):
        with augloader.Daemon(synth_shards, policy="nodesam", binary=str(bins / "augloader"), batch_size=8,
                              procs=procs) as d:
            for url in (d.url, d.shm_url):
                s = augloader.connect(url).epoch(1, digest=True)
                for _ in s:
                    pass
                digests.append(s.sha256)
    assert len(set(digests)) == 1 and digests[0], digests
