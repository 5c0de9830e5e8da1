"""End to end: two daemons on MUTAG (training split augmented, test split
not), examples/train_gin.py trains a GIN on CPU; the loss must decrease and
the training accuracy beat the majority class."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

torch = pytest.importorskip("torch", reason="the GIN example needs torch (CI installs Debian's python3-torch)")


@pytest.mark.parametrize("policy", ["nodesam", "submix:p=0.4"])
def test_train_gin_mutag(bins, mutag_shards, daemon, tmp_path, policy):
    folds = tmp_path / "folds"
    subprocess.run([bins / "augloader", "split", "--shards", mutag_shards, "--folds", "10", "--seed", "0", "--out", folds],
                   check=True, capture_output=True)
    fold = folds / "fold-00.json"
    train = daemon("--shards", mutag_shards, "--split", fold, "--split-set", "training", "--policy", policy,
                   "--seed", "0", "--batch-size", "32")
    test = daemon("--shards", mutag_shards, "--split", fold, "--split-set", "test", "--policy", "none")
    out = tmp_path / "history.json"
    proc = subprocess.run([sys.executable, ROOT / "examples" / "train_gin.py", "--train", train.unix, "--test", test.unix,
                           "--epochs", "12", "--json", out, "--seed", "0"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    h = json.loads(out.read_text())
    print(proc.stdout)
    labels = json.loads(fold.read_text())["training"]
    first, last = h[0]["loss"], min(r["loss"] for r in h[-4:])
    assert last < first * 0.9, f"loss did not decrease: {first:.4f} -> {last:.4f}"
    majority = 125 / 188  # MUTAG: 125 of 188 graphs in the larger class
    best = max(r["train_acc"] for r in h[-4:])
    assert best > majority, f"training accuracy {best:.3f} does not beat the majority class {majority:.3f}"
    assert all(r["data_wait_s"] >= 0 for r in h) and len(labels) == 169
