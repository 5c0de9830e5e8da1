"""Under torchrun, a dataset needs no rank arithmetic: built before
init_process_group it takes RANK and WORLD_SIZE from torchrun's
environment, after it torch.distributed's; the ranks' batches are one
epoch, every graph once. A real `torchrun --standalone` of 3 workers
(issue #56); and the environment's refusals, named."""
import json
import subprocess
import sys

import pytest

from conftest import need_torch

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


@pytest.mark.skipif(not TORCHRUN_WORKS, reason="torch 1.13's torchrun fails on Python 3.11; make test runs this in .venv-torch2")
def test_torchrun_ranks_read_one_epoch(served, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                        str(script), served.url, str(tmp_path)], capture_output=True, text=True, timeout=300)
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
