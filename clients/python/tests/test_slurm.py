"""deploy/slurm/train_gin.sbatch under a real Slurm: Debian's slurmctld and
slurmd (slurm-wlm 22.05), started for this module on loopback as a
one-node cluster (auth/none: nothing leaves the machine). sbatch runs the
script as docs/deploy.md writes it; its srun starts the node's torchrun
agent, whose two workers share the node's one daemon and train the GIN
example, and every graph of every epoch is trained once, each as a
one-rank run reads it. What one host cannot show (several nodes, a
5,000-host allocation) test_recipes.py runs with stand-ins."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import need_torch

torch = need_torch()
from elastic_job import ROOT, check_exactly_once, free_port, one_rank_digests, torchrun_tool  # noqa: E402

pytestmark = pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                                reason="torch 1.13's torchrun fails on Python 3.11; make test runs this in .venv-torch2")

GRAPHS, BATCH, EPOCHS, SEED = 120, 4, 2, 3
SLURM = ("slurmctld", "slurmd", "sbatch", "sinfo", "scancel")
MISSING = ("Slurm is not installed (apt-get install slurmctld slurmd slurm-client; .ci/run installs them): "
           "the sbatch script runs here only with stand-ins (test_recipes.py)")

# MinJobAge=0 keeps every job record for the cluster's life (no purging)
# and so keeps sbatch --wait polling every 2 s: its poll (_job_wait) sleeps
# 2, 8, then 32 s while the sleep is under MinJobAge/2 (default 300), and
# the test's job, done in about 10 s, came back at 42 s.
CONF = """ClusterName=augtest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/none
CredType=cred/none
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm():
    """A one-node Slurm on loopback for the module: the environment that
    points its commands at it, and its folder."""
    if not all(shutil.which(c) for c in SLURM):
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    if os.geteuid() != 0:
        pytest.skip("slurmd starts each job as its user, which needs root; run as root to run Slurm here")
    d = tempfile.mkdtemp(prefix="sl-")
    for sub in ("state", "spool"):
        os.mkdir(os.path.join(d, sub))
    cpus = os.cpu_count() or 1
    with open(os.path.join(d, "slurm.conf"), "w") as f:
        f.write(CONF.format(d=d, ctld=free_port(), slurmd=free_port(), cpus=cpus))
    env = dict(os.environ, SLURM_CONF=os.path.join(d, "slurm.conf"))
    daemons = [subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
               for cmd in (["slurmctld", "-D", "-i"], ["slurmd", "-D", "-N", "localhost"])]
    try:
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline and state != "idle":
            p = subprocess.run(["sinfo", "-h", "-n", "localhost", "-o", "%T"], env=env, capture_output=True, text=True)
            state = p.stdout.strip()
            time.sleep(0.3)
        if state != "idle":
            logs = "".join(open(os.path.join(d, f)).read()[-1500:] for f in ("slurmctld.log", "slurmd.log")
                           if os.path.exists(os.path.join(d, f)))
            pytest.fail(f"the one-node Slurm did not come up within 60 s (node state {state!r}):\n{logs}")
        yield env, cpus
    finally:
        subprocess.run(["scancel", "--full", "--user", "root"], env=env, capture_output=True)
        for p in daemons:
            os.killpg(p.pid, signal.SIGTERM)
        for p in daemons:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def shards(make_synth_shards):
    return make_synth_shards(GRAPHS, 7)


def test_sbatch_trains_on_a_real_slurm(slurm, tmp_path, bins, shards):
    """sbatch --wait of the script on a one-node allocation: the job ends 0,
    the node's torchrun ran 2 workers on the allocation's node as the
    rendezvous host, and the batch log holds every graph of every epoch
    once, as a one-rank run reads it."""
    env, cpus = slurm
    work = tmp_path / "work"  # laid out as the checkout: sbatch's --chdir
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    tools = torchrun_tool(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    node_tmp = tempfile.mkdtemp(prefix="el-")  # short: the node daemon's socket path
    env = dict(env, PATH=f"{tools}:{env['PATH']}", AUGLOADER_BIN=str(bins), TMPDIR=node_tmp, OMP_NUM_THREADS="1",
               PYTHONUNBUFFERED="1", PROCS_PER_NODE="2", RDZV_PORT=str(free_port()), GLOO_SOCKET_IFNAME="lo")
    train = ["--policy", "nodesam", "--daemon-seed", str(SEED), "--batch-size", str(BATCH), "--epochs", str(EPOCHS),
             "--device", "cpu", "--hidden", "16", "--layers", "3", "--checkpoint-every", "3",
             "--batch-log", str(out / "log")]
    # The script asks for 16 CPUs a task; this node has cpus.
    cmd = ["sbatch", "--wait", "--nodes", "1", "--cpus-per-task", str(cpus), "--chdir", str(work),
           "--output", str(out / "job.out"), str(ROOT / "deploy" / "slurm" / "train_gin.sbatch"),
           str(shards), str(out / "ck"), *train]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(node_tmp, ignore_errors=True)
    log = (out / "job.out").read_text() if (out / "job.out").exists() else ""
    assert p.returncode == 0, f"sbatch --wait: {p.returncode}\n{p.stdout}{p.stderr}\n{log[-4000:]}"
    assert "epoch   1" in log and (out / "ck" / "latest").exists(), log[-3000:]
    reference = one_rank_digests(bins, shards, SEED, BATCH, EPOCHS)
    assert len(reference) == GRAPHS * EPOCHS
    rows = check_exactly_once(out, reference)
    assert {r["world"] for r in rows} == {2}, {r["world"] for r in rows}
