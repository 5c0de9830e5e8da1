"""End to end: examples/train_graphcl.py pre-trains GraphCL's encoder on
MUTAG's twins from a real daemon for a few epochs: the NT-Xent loss falls,
the SVM on the embeddings beats the majority class, and a second run with
the same seed trains on the same twins to the same losses."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TORCH_MISSING

try:
    import torch  # noqa: F401
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(TORCH_MISSING, allow_module_level=True)

EXAMPLE = ROOT / "examples" / "train_graphcl.py"


def run(bins, shards, tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "AUGLOADER_BIN": str(bins)}
    proc = subprocess.run([sys.executable, EXAMPLE, "--shards", shards, "--json", out, *args],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(out.read_text())


def test_graphcl_mutag(bins, mutag_shards, tmp_path):
    r = run(bins, mutag_shards, tmp_path, "a", "--seeds", "0", "--epochs", "8")
    losses = r["runs"][0]["losses"]
    first, last = losses[0], sum(losses[-3:]) / 3
    assert last < first * 0.95, f"NT-Xent loss did not fall: {losses}"
    majority = 125 / 188  # MUTAG: 125 of 188 graphs in the larger class
    assert r["runs"][0]["accuracy"] > majority, r["runs"][0]
    again = run(bins, mutag_shards, tmp_path, "b", "--seeds", "0", "--epochs", "3", "--eval", "none")
    assert again["runs"][0]["losses"] == losses[:3], "the same seed trained on other twins"


@pytest.mark.parametrize("aug", ["nodesam", "pairs"])
def test_graphcl_other_twins(bins, mutag_shards, tmp_path, aug):
    """NodeSam beside the graph, and GraphCL's both-augmented pairs (8 sets
    with equal weights), train too."""
    r = run(bins, mutag_shards, tmp_path, aug, "--seeds", "1", "--epochs", "2", "--eval", "none", "--aug", aug)
    assert len(r["runs"][0]["losses"]) == 2 and all(x > 0 for x in r["runs"][0]["losses"])


def _table_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("graphcl_table", ROOT / "examples" / "graphcl_table.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _saved(m, dataset, aug, features, accs):
    import statistics
    return {"dataset": dataset, "aug": aug, "features": features, **m.SETTINGS,
            "runs": [{"seed": s, "accuracy": a} for s, a in enumerate(accs)],
            "mean": statistics.fmean(accs), "std": statistics.pstdev(accs)}


def test_graphcl_table_is_the_page_table(tmp_path):
    """graphcl_table.py prints the table docs/contrastive.md shows (its
    header and its rows' form, the constant-features row included), and
    reuses a saved run only when it was made with the settings asked for
    (it reused any JSON in --out, whatever it was made with)."""
    m = _table_module()
    results = [_saved(m, "MUTAG", a, "shards", [0.888, 0.8839, 0.8833]) for a in ("random4", "nodesam", "submix")]
    results.append(_saved(m, "MUTAG", "random4", "constant", [0.8, 0.81, 0.82]))
    text = m.table(results, ["MUTAG"], ["random4", "nodesam", "submix"], ["MUTAG"])
    header, _, row, constant = text.splitlines()
    page = (ROOT / "docs" / "contrastive.md").read_text()
    assert header in page, header
    assert row.startswith("| MUTAG | 86.80 ± 1.34 | 88.51 ± 0.21 | 88.80, 88.39, 88.33 | within (+1.71) |"), row
    assert constant.startswith("| MUTAG, constant features (`--features constant`, as GraphCL's code) | 86.80 ± 1.34 | 81.00 ± 0.82 |"), constant
    # Reuse: only an exact match, and then marked.
    path = m.result_path(tmp_path, "MUTAG", "random4", "shards")
    saved = _saved(m, "MUTAG", "random4", "shards", [0.9, 0.9, 0.9])
    path.write_text(json.dumps(saved))
    r, why = m.reusable(path, "MUTAG", "random4", [0, 1, 2], "shards")
    assert r is not None and why == ""
    for change, want in [({"epochs": 5}, "epochs 5"), ({"features": "constant"}, "features"), ({"runs": saved["runs"][:2]}, "other seeds")]:
        path.write_text(json.dumps({**saved, **change}))
        r, why = m.reusable(path, "MUTAG", "random4", [0, 1, 2], "shards")
        assert r is None and want in why, (change, why)
    assert "(saved run)" in m.cell({**saved, "reused": True})
