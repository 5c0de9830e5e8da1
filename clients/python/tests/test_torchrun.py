"""Under torchrun, a dataset needs no rank arithmetic: built before
init_process_group it takes RANK and WORLD_SIZE from torchrun's
environment, after it torch.distributed's; the ranks' batches are one
epoch, every graph once. A real `torchrun --standalone` of 3 workers
(issue #56); and the environment's refusals, named."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import need_torch
from elastic_job import alive

torch = need_torch()
import augloader  # noqa: E402
from augloader.torch import AugloaderDataset  # noqa: E402

WORKER = r'''
import json, os, sys
import torch.distributed as dist
from augloader.torch import AugloaderDataset
url, out = sys.argv[1], sys.argv[2]
before = AugloaderDataset(url, pyg=False)          # before init_process_group: torchrun's environment
dist.init_process_group("gloo")
after = AugloaderDataset(url, pyg=False)           # after: torch.distributed's
ids = [int(g) for t in before for g in t["graph_id"][~t["padded"]]]
with open(f"{out}/{before.rank}.json", "w") as f:
    json.dump({"env": [before.rank, before.world], "dist": [after.rank, after.world], "ids": ids}, f)
dist.barrier()
dist.destroy_process_group()
'''


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    d = augloader.Daemon(make_synth_shards(50, 4), binary=str(bins / "augloader"), policy="nodesam", seed=2, batch_size=4)
    d.start()
    yield d
    d.stop()


# Debian's torch 1.13 (.venv on a machine with python3-torch) has a
# torchrun that fails on Python 3.11 before it starts a worker (its
# redirects map: "'NoneType' object has no attribute 'get'"); make test
# runs this file in .venv-torch2 too.
TORCHRUN_WORKS = int(torch.__version__.split(".")[0]) >= 2


def torchrun_env(tmp_path):
    """torchrun's environment for a test: its log folders
    (torchelastic_*) in the test's own temporary folder, not /tmp."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return dict(os.environ, TMPDIR=str(tmp))


@pytest.mark.skipif(not TORCHRUN_WORKS, reason="torch 1.13's torchrun fails on Python 3.11; make test runs this in .venv-torch2")
def test_torchrun_ranks_read_one_epoch(served, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                        str(script), served.url, str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env=torchrun_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    got = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(3)]
    assert [g["env"] for g in got] == [[r, 3] for r in range(3)] == [g["dist"] for g in got]
    ids = sorted(i for g in got for i in g["ids"])
    assert ids == list(range(50)), f"{len(ids)} graphs delivered for 50: the ranks' epochs are not one"


@pytest.mark.parametrize("env,message", [
    ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK='3' WORLD_SIZE='2'"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x'"),
    ({"RANK": "0"}, "WORLD_SIZE=None"),
])
def test_bad_torchrun_environment_named(served, monkeypatch, env, message):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        AugloaderDataset(served.url)


def test_environment_rank_equals_explicit(served, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = AugloaderDataset(served.url, pyg=False, digest=True)
    assert (ds.rank, ds.world) == (1, 2)
    explicit = AugloaderDataset(served.url, pyg=False, digest=True, rank=1, world=2)
    assert [t["digest"] for t in ds] == [t["digest"] for t in explicit]


NODE_WORKER = r'''
import json, os, sys, pathlib, time
import augloader
from augloader.torch import AugloaderDataset
shards, binary, out, base = sys.argv[1:5]
url = augloader.node_daemon(shards, policy="nodesam", seed=2, batch_size=4, binary=binary, folder=base)
attempt, rank = int(os.environ["TORCHELASTIC_RESTART_COUNT"]), int(os.environ["RANK"])
folder = pathlib.Path(url[len("unix://"):]).parent
ds = AugloaderDataset(url, pyg=False)  # rank and world from torchrun's environment
ids = [int(g) for t in ds for g in t["graph_id"][~t["padded"]]]
pid = int((folder / "pid").read_text())
cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
with open(f"{out}/{attempt}-{rank}.json", "w") as f:
    json.dump({"pid": pid, "url": url, "ids": ids, "cmdline": cmdline,
               "local_world_size": int(os.environ["LOCAL_WORLD_SIZE"])}, f)
if attempt == 0 and rank == 1:
    while not os.path.exists(f"{out}/0-0.json"):
        time.sleep(0.05)
    sys.exit(3)  # a failed worker: torchrun stops the group and starts it again
'''


@pytest.mark.skipif(not TORCHRUN_WORKS, reason="torch 1.13's torchrun fails on Python 3.11; make test runs this in .venv-torch2")
def test_node_daemon_under_torchrun(bins, make_synth_shards, tmp_path):
    """A real torchrun of 2 workers, --max-restarts 1: the first attempt's
    rank 1 fails after its epoch; torchrun restarts the group. Both
    attempts' ranks use one daemon (the first worker to arrive started it;
    the restarted group found it serving), each attempt's ranks read the
    epoch once, and once the agent ends the daemon is gone and its socket
    with it. The daemon runs on the cores the 2 ranks' loops leave
    (``--procs``, at least 1)."""
    import time
    script = tmp_path / "worker.py"
    script.write_text(NODE_WORKER)
    import tempfile
    out, base = tmp_path / "out", pathlib.Path(tempfile.mkdtemp(prefix="aug-node-"))  # short: a socket's path
    out.mkdir()
    shards = make_synth_shards(50, 4)
    try:
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                            "--max-restarts", "1", str(script), str(shards), str(bins / "augloader"), str(out), str(base)],
                           capture_output=True, text=True, timeout=300, env=torchrun_env(tmp_path))
        assert p.returncode == 0, p.stderr[-3000:]
        got = {(a, r): json.loads((out / f"{a}-{r}.json").read_text()) for a in range(2) for r in range(2)}
        pids = {g["pid"] for g in got.values()}
        assert len(pids) == 1 and len({g["url"] for g in got.values()}) == 1, f"daemons: {pids}"
        for a in range(2):
            assert sorted(got[(a, 0)]["ids"] + got[(a, 1)]["ids"]) == list(range(50)), f"attempt {a}: not every graph once"
        cmd = got[(0, 0)]["cmdline"]
        assert got[(0, 0)]["local_world_size"] == 2
        assert cmd[cmd.index("--procs") + 1] == str(max(1, os.cpu_count() - 2)), f"the node's daemon runs {cmd}"
        pid = pids.pop()
        # The daemon notices the agent's end and drains first: under load
        # that took seconds (the socket was still there as torchrun returned).
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid), "the node's daemon outlived the torchrun agent"
        assert not list(base.glob("*/aug.sock")), "the daemon's socket was left behind"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_node_daemon_refuses_other_arguments(bins, make_synth_shards, short_tmp, monkeypatch):
    """Outside torchrun: the daemon is tied to this process; a second call
    with the same arguments attaches, also from a process bound to one
    core (the default --procs counts the node's cores, which every rank
    sees alike, not the caller's affinity); one with other arguments, or
    another procs, is refused; a daemon found dead (SIGKILL, its socket
    left) is started again."""
    monkeypatch.delenv("GOMAXPROCS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    shards = make_synth_shards(50, 4)
    url = augloader.node_daemon(shards, seed=1, binary=str(bins / "augloader"), folder=str(short_tmp), run_id="job1")
    try:
        assert augloader.node_daemon(shards, seed=1, binary=str(bins / "augloader"), folder=str(short_tmp), run_id="job1") == url
        assert sum(1 for _ in augloader.connect(url).epoch(0)) > 0
        first = int(next(short_tmp.glob("augloader-node-*/pid")).read_text())
        cmd = pathlib.Path(f"/proc/{first}/cmdline").read_bytes().decode().split("\0")
        assert cmd[cmd.index("--procs") + 1] == str(max(1, os.cpu_count() - 1)), f"the node's daemon runs {cmd}"
        affinity = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(affinity)})
        try:
            assert augloader.node_daemon(shards, seed=1, binary=str(bins / "augloader"), folder=str(short_tmp), run_id="job1") == url
        finally:
            os.sched_setaffinity(0, affinity)
        with pytest.raises(augloader.DaemonError, match="other arguments"):
            augloader.node_daemon(shards, seed=1, procs=7, binary=str(bins / "augloader"), folder=str(short_tmp), run_id="job1")
        with pytest.raises(augloader.DaemonError, match="other arguments"):
            augloader.node_daemon(shards, seed=2, binary=str(bins / "augloader"), folder=str(short_tmp), run_id="job1")
        import signal
        import time
        pid_file = next(short_tmp.glob("augloader-node-*/pid"))
        first = int(pid_file.read_text())
        os.kill(first, signal.SIGKILL)
        while alive(first):  # until it ends or is a zombie
            time.sleep(0.05)
        assert augloader.node_daemon(shards, seed=1, binary=str(bins / "augloader"), folder=str(short_tmp), run_id="job1") == url
        assert int(pid_file.read_text()) != first and sum(1 for _ in augloader.connect(url).epoch(0)) > 0
    finally:
        import signal
        for pid in short_tmp.glob("augloader-node-*/pid"):
            os.kill(int(pid.read_text()), signal.SIGTERM)


PEEK_WORKER = r'''
import json, sys
import torch.distributed as dist
import augloader
from augloader.torch import AugloaderDataset
url, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
ds = AugloaderDataset(url, pyg=False)
if ds.rank == 0:
    next(iter(ds))  # a peek on rank 0 only: its epochs run one ahead
    list(ds)        # epoch 1
dist.barrier()      # rank 0 asked for epoch 1 before rank 1 asks
error = ""
if ds.rank == 1:
    try:
        list(ds)    # epoch 0
    except augloader.ServerError as e:
        error = str(e)
with open(f"{out}/{ds.rank}.json", "w") as f:
    json.dump({"job": ds.job, "error": error}, f)
dist.barrier()
dist.destroy_process_group()
'''


@pytest.mark.skipif(not TORCHRUN_WORKS, reason="torch 1.13's torchrun fails on Python 3.11; make test runs this in .venv-torch2")
def test_torchrun_ranks_out_of_step_refused(served, tmp_path):
    """A real torchrun of 2 workers whose rank 0 peeks at the dataset
    (issue #65): rank 1's epoch 0, after rank 0's epoch 1, is refused
    naming both and set_epoch, not served another epoch's partition."""
    script = tmp_path / "peek.py"
    script.write_text(PEEK_WORKER)
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(script), served.url, str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env=torchrun_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    got = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    assert got[0]["job"] and got[0]["job"] == got[1]["job"], "the ranks of one torchrun job name different jobs"
    assert "rank 1 of 2 asks for epoch 0" in got[1]["error"] and "set_epoch" in got[1]["error"], got[1]["error"]
