"""augloader.node_daemon under real torchrun agents, around the jobs and
restarts a node sees (issue #65). Each failed on fa5e656: plain torchrun
gives every job TORCHELASTIC_RUN_ID=none, so a finished job's arguments
refused the next job on the node, and two live jobs shared the first
one's daemon, which ended with that job; a rank stopped while the daemon
it started still loaded its shards left the next rank to start a second
daemon, which failed to listen, and the group burned its restarts."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import SlowProxy, free_port, need_torch
from elastic_job import alive

torch = need_torch()

TORCHRUN_WORKS = int(torch.__version__.split(".")[0]) >= 2
pytestmark = pytest.mark.skipif(not TORCHRUN_WORKS, reason="torch 1.13's torchrun fails on Python 3.11; make test "
                                                           "runs this in .venv-torch2")

JOB = r'''
import json, os, sys, pathlib, time
import augloader
from augloader.torch import AugloaderDataset
shards, binary, out, base, seed, gate = sys.argv[1:7]
attempt, rank = int(os.environ["TORCHELASTIC_RESTART_COUNT"]), int(os.environ["RANK"])
if gate == "stop-while-loading" and attempt == 0 and rank == 1:
    time.sleep(1.5)
    sys.exit(3)  # a failed worker while rank 0 waits for the daemon: torchrun stops the group, starts it again
url = augloader.node_daemon(shards, policy="nodesam", seed=int(seed), batch_size=4, binary=binary, folder=base,
                            ready_timeout=240)
folder = pathlib.Path(url[len("unix://"):]).parent
ds = AugloaderDataset(url, pyg=False, digest=True)
epochs = [[int(g) for t in ds for g in t["graph_id"][~t["padded"]]]]
if gate not in ("-", "stop-while-loading"):
    while not os.path.exists(gate):
        time.sleep(0.05)
    epochs.append([int(g) for t in ds for g in t["graph_id"][~t["padded"]]])
with open(f"{out}/{attempt}-{rank}.json", "w") as f:
    json.dump({"run_id": os.environ["TORCHELASTIC_RUN_ID"], "pid": int((folder / "pid").read_text()), "url": url,
               "epochs": epochs}, f)
'''


@pytest.fixture()
def job(bins, tmp_path):
    """Returns start(name, shards, seed, gate="-", env=None, restarts=0):
    a plain torchrun (static rendezvous, one node, 2 workers) of JOB,
    started and not waited for, its outputs in tmp_path/name. The node
    folders go in one short folder (a socket's path), removed at the end."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    base = pathlib.Path(tempfile.mkdtemp(prefix="aug-node-"))
    procs = []

    def start(name, shards, seed, gate="-", env=None, restarts=0):
        out = tmp_path / name
        out.mkdir()
        (out / "tmp").mkdir()
        env = dict(env or os.environ, TMPDIR=str(out / "tmp"))
        p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
                              "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "--max-restarts",
                              str(restarts), str(script), str(shards), str(bins / "augloader"), str(out), str(base),
                              str(seed), gate], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        p.out = out
        procs.append(p)
        return p

    start.base = base
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for pid in base.glob("*/pid"):
        try:
            os.kill(int(pid.read_text()), 9)
        except (OSError, ValueError):
            pass
    shutil.rmtree(base, ignore_errors=True)


def finished(p, timeout=300):
    out, _ = p.communicate(timeout=timeout)
    assert p.returncode == 0, out[-4000:]
    return {f.stem: json.loads(f.read_text()) for f in p.out.glob("*.json")}


def wait_gone(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), f"daemon {pid} outlived its torchrun agent"


def test_jobs_in_a_row_with_other_arguments(job, make_synth_shards):
    """Two plain torchrun jobs one after the other on a node, both
    TORCHELASTIC_RUN_ID=none, with other seeds: the second gets a daemon
    of its own arguments (on fa5e656: DaemonError, 'started with other
    arguments', though no daemon ran), and the first job's folder is gone."""
    shards = make_synth_shards(40, 4)
    first = finished(job("first", shards, 1))
    assert {g["run_id"] for g in first.values()} == {"none"}
    wait_gone(first["0-0"]["pid"])
    second = finished(job("second", shards, 2))
    assert {g["run_id"] for g in second.values()} == {"none"}
    for got in (first, second):
        assert len({g["pid"] for g in got.values()}) == 1, "a job's ranks used more than one daemon"
        assert sorted(got["0-0"]["epochs"][0] + got["0-1"]["epochs"][0]) == list(range(40))
    assert first["0-0"]["pid"] != second["0-0"]["pid"]
    wait_gone(second["0-0"]["pid"])
    folders = list(job.base.glob("augloader-node-*"))
    assert len(folders) <= 1, f"the first job's node folder was left: {folders}"


def test_two_live_jobs_never_share_a_daemon(job, make_synth_shards, tmp_path):
    """Two plain torchrun jobs at once on a node with the same arguments:
    the second job reads an epoch after the first job ended and its daemon
    with it (on fa5e656 they shared the first job's daemon: the second
    failed with ConnectionLost)."""
    shards = make_synth_shards(40, 4)
    gate = tmp_path / "gate"
    late = job("late", shards, 1, gate=str(gate))
    deadline = time.monotonic() + 120
    while not list(job.base.glob("*/ready.json")) or not any(p.read_text() for p in job.base.glob("*/ready.json")):
        assert late.poll() is None and time.monotonic() < deadline, "the late job's daemon did not start"
        time.sleep(0.1)
    early = finished(job("early", shards, 1))
    wait_gone(early["0-0"]["pid"])
    gate.touch()
    got = finished(late)
    assert got["0-0"]["pid"] != early["0-0"]["pid"], "two jobs shared one daemon"
    for e in range(2):
        assert sorted(got["0-0"]["epochs"][e] + got["0-1"]["epochs"][e]) == list(range(40)), f"epoch {e}"


def test_group_restart_while_the_daemon_loads(job, bins, make_synth_shards, s3_store, tmp_path):
    """The set is in a real S3-compatible server behind a proxy that holds
    every request 1.5 s, so the daemon loads for many seconds; rank 1 of
    the first attempt fails while rank 0 waits for it, torchrun stops the
    group and starts it again (--max-restarts 1). The restarted group waits
    for that daemon: one daemon in all, one restart, every graph once."""
    tu = tmp_path / "tu"
    subprocess.run([bins / "shardconv", "synth", "--like", "COLLAB", "--graphs", "40", "--seed", "4", "--out", tu],
                   check=True, capture_output=True)
    s3_store.bucket("nodejobs")
    subprocess.run([bins / "shardconv", "convert", "-q", "-i", tu, "-o", "s3://nodejobs/collab40", "--shard-size", "64KiB"],
                   check=True, env=s3_store.env())
    proxy = SlowProxy(s3_store.endpoint, 1.5)
    try:
        p = job("restart", "s3://nodejobs/collab40", 1, gate="stop-while-loading", env=s3_store.env(proxy.endpoint),
                restarts=1)
        got = finished(p)
    finally:
        proxy.stop()
    assert set(got) == {"1-0", "1-1"}, f"attempts that trained: {sorted(got)}"
    assert len({g["pid"] for g in got.values()}) == 1
    assert sorted(got["1-0"]["epochs"][0] + got["1-1"]["epochs"][0]) == list(range(40))
    logs = list(job.base.glob("*/serve.log"))
    assert len(logs) == 1
    text = logs[0].read_text()
    assert "another server is listening" not in text, text[-3000:]
    wait_gone(got["1-0"]["pid"])
