"""A node lost, a node gained, a worker killed: real torchrun agents (two
"nodes" on loopback, each its own $TMPDIR and so its own node daemon)
training examples/train_gin.py with torch.distributed.checkpoint saves, as
docs/deploy.md writes the command (issue #56). After each, over the steps
the checkpoints chain together (examples/_distributed.py's batch log),
every graph of every epoch was trained exactly once, and each graph's
tensors are those a one-rank run reads for it."""
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import need_torch

torch = need_torch()
from elastic_job import ROOT, Node, check_exactly_once, children, free_port, lines, one_rank_digests, torchrun_tool, wait_for_step  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))
# Debian's torch 1.13 has a torchrun that fails on Python 3.11 (see
# test_torchrun.py); make test runs this file in .venv-torch2 too.
pytestmark = pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                                reason="torch 1.13's torchrun fails on Python 3.11; make test runs this in .venv-torch2")

GRAPHS, BATCH, EPOCHS, EVERY, SEED = 240, 4, 6, 3, 2


@pytest.fixture(scope="module")
def shards(make_synth_shards):
    return make_synth_shards(GRAPHS, 5)


@pytest.fixture(scope="module")
def reference(bins, shards):
    """(epoch, graph) → digest, read by one rank from a daemon of the same
    configuration."""
    ref = one_rank_digests(bins, shards, SEED, BATCH, EPOCHS)
    assert len(ref) == GRAPHS * EPOCHS
    return ref


@pytest.fixture
def job(tmp_path, bins, shards):
    base = pathlib.Path(tempfile.mkdtemp(prefix="el-"))  # short: the daemons' socket paths
    out = tmp_path / "out"
    out.mkdir()
    nodes = []
    port = free_port()

    train = ["--shards", str(shards), "--policy", "nodesam", "--daemon-seed", str(SEED), "--batch-size", str(BATCH),
             "--epochs", str(EPOCHS), "--device", "cpu", "--hidden", "16", "--layers", "3", "--checkpoint-every", str(EVERY)]

    def start(name, nnodes, host, extra=()):
        n = Node(base, name, bins, out, port, nnodes, host, train, extra)
        nodes.append(n)
        return n
    start.out = out
    yield start
    for n in nodes:
        if n.proc.poll() is None:
            n.lose()
        for pid in n.daemons():
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(base, ignore_errors=True)


def test_node_lost_mid_epoch(job, reference):
    """Two nodes of 2 workers (--nnodes 1:2): once the job has trained 20
    steps at world 4 (an epoch is 15), one node is lost (agent, workers,
    daemon: SIGKILL). The other's workers fail on the lost peers, torchrun
    restarts them, the rendezvous closes with one node, and they resume
    from the latest checkpoint at world 2 and finish."""
    a = job("a", "1:2", True)
    time.sleep(1)  # a's agent hosts the rendezvous store
    b = job("b", "1:2", False)
    wait_for_step(job.out, 20, world=4)
    b.lose()
    rc = a.wait(300)
    assert rc == 0, f"the surviving node's agent: {rc}\n{a.output()}"
    rows = check_exactly_once(job.out, reference)
    worlds = [r["world"] for r in sorted(rows, key=lambda r: (r["gen"], r["step"]))]
    assert 4 in worlds and worlds[-1] == 2, f"worlds seen: {sorted(set(worlds))}, last {worlds[-1]}"
    assert a.daemons_gone(), "the surviving node's daemon outlived its agent"


def test_node_joins_mid_run(job, reference):
    """One node trains at world 2; a second joins after 20 steps: the first
    agent restarts its workers, the rendezvous admits both, and the job goes
    on at world 4 from the latest checkpoint."""
    a = job("a", "1:2", True)
    wait_for_step(job.out, 20, world=2)
    b = job("b", "1:2", False)
    rc_a, rc_b = a.wait(300), b.wait(120)
    assert rc_a == 0 and rc_b == 0, f"agents: {rc_a}, {rc_b}\n{a.output()}\n{b.output()}"
    rows = check_exactly_once(job.out, reference)
    worlds = {r["world"] for r in rows}
    assert worlds == {2, 4}, f"worlds seen: {worlds}"


def test_worker_killed_single_node(job, reference):
    """One node (--nnodes 1): a worker SIGKILLed mid-epoch; torchrun restarts
    the group at the same world, which resumes from the latest checkpoint on
    the node's one daemon (never two)."""
    a = job("a", "1", True)
    wait_for_step(job.out, 20)
    first = a.daemons()
    os.kill(children(a.proc.pid)[0], signal.SIGKILL)
    restarted = time.monotonic() + 120
    while time.monotonic() < restarted and len({r["gen"] for r in lines(job.out)}) < 2:
        time.sleep(0.1)
    assert a.daemons() == first and len(first) == 1, f"daemons before the restart {first}, after {a.daemons()}"
    rc = a.wait(300)
    assert rc == 0, f"agent: {rc}\n{a.output()}"
    rows = check_exactly_once(job.out, reference)
    assert len({r["gen"] for r in rows}) >= 2, "no restart happened"
    assert a.daemons_gone(), "the node's daemon outlived its agent"


def test_deploy_guide_torchrun_block(tmp_path, bins, shards):
    """docs/deploy.md's "test-torchrun" blocks, as written, in a folder laid
    out as the checkout (examples/, collab.shards a synthetic set), torchrun
    this venv's."""
    import re
    text = (ROOT / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```sh test-torchrun\n(.*?)```", text, re.S)
    assert blocks, "docs/deploy.md has no test-torchrun block"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "collab.shards").symlink_to(shards)
    tools = torchrun_tool(tmp_path)
    node_tmp = tempfile.mkdtemp(prefix="el-")  # short: the daemon's socket path
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", AUGLOADER_BIN=str(bins), TMPDIR=node_tmp,
               OMP_NUM_THREADS="1")
    try:
        p = subprocess.run(["bash", "-euxo", "pipefail", "-c", "\n".join(blocks)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(node_tmp, ignore_errors=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "epoch   1" in p.stdout and (tmp_path / "ck" / "latest").exists(), p.stdout[-2000:]
