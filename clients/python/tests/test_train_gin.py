"""End to end: examples/train_gin.py trains the paper's GIN on MUTAG through
one daemon (augloader.Daemon, a view per policy and a test view): a single
run learns (the loss falls, the training accuracy beats the majority class),
and a 2-fold, 3-policy cross-validation reads exactly each fold's split."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import augloader
from conftest import ROOT, TORCH_MISSING

try:
    import torch  # noqa: F401
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(TORCH_MISSING, allow_module_level=True)

EXAMPLE = ROOT / "examples" / "train_gin.py"


@pytest.mark.parametrize("policy,layout", [("nodesam", "pyg"), ("submix:p=0.4", "pyg"), ("nodesam", "codes")])
def test_train_gin_mutag(bins, mutag_shards, tmp_path, policy, layout):
    folds = tmp_path / "folds"
    subprocess.run([bins / "augloader", "split", "--shards", mutag_shards, "--folds", "10", "--seed", "0", "--out", folds],
                   check=True, capture_output=True)
    with augloader.Daemon(mutag_shards, folds=folds, views=[f"train={{fold}}:training:{policy}", "test={fold}:test"],
                          binary=str(bins / "augloader"), batch_size=32) as d:
        out = tmp_path / "history.json"
        proc = subprocess.run([sys.executable, EXAMPLE, "train", "--url", d.url, "--view", "train", "--test-view", "test",
                               "--fold", "0", "--epochs", "12", "--json", out, "--seed", "0", "--layout", layout],
                              capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    h = json.loads(out.read_text())
    print(proc.stdout)
    first, last = h[0]["loss"], min(r["loss"] for r in h[-4:])
    assert last < first * 0.9, f"loss did not decrease: {first:.4f} -> {last:.4f}"
    majority = 125 / 188  # MUTAG: 125 of 188 graphs in the larger class
    best = max(r["train_acc"] for r in h[-4:])
    assert best > majority, f"training accuracy {best:.3f} does not beat the majority class {majority:.3f}"
    assert all(r["data_wait_s"] >= 0 and 0 <= r["test_acc"] <= 1 for r in h)


def test_cv_mutag(bins, mutag_shards, tmp_path):
    """The paper's experiment in small: 2 folds, 3 policies, 2 epochs, one
    daemon. Each fold's training views and test view serve exactly its split
    file's graphs, and the report has both metrics and the paired
    differences."""
    out = tmp_path / "cv.json"
    env = {"AUGLOADER_BIN": str(bins), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, EXAMPLE, "cv", "--shards", mutag_shards, "--folds", "2", "--epochs", "2",
                           "--batches-per-epoch", "5", "--jobs", "2", "--policies", "none,nodesam,submix:p=0.4",
                           "--json", out], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    r = json.loads(out.read_text())
    assert len(r["fold_sets"]) == 2
    for f, sets in enumerate(r["fold_sets"]):
        split = json.loads(open(r["split_files"][f]).read())
        for view in ("none", "nodesam", "submix"):
            assert sets[view] == sorted(split["training"]), (f, view)
        assert sets["test"] == sorted(split["test"]), f
        assert not set(split["training"]) & set(split["test"])
    s = r["summary"]
    assert set(s) == {"none", "nodesam", "submix:p=0.4"}
    for p, v in s.items():
        assert 0 <= v["best_mean_epoch"][0] <= 1 and 0 <= v["last10"][0] <= 1
        assert len(v["per_fold_last10"]) == 2 and "paired_diff_last10" in v
    assert len(r["runs"]) == 6 and all(len(run["test_acc"]) == 2 for run in r["runs"])


def test_cv_stops_cleanly(bins, mutag_shards, tmp_path):
    """SIGTERM during a cross-validation: progress lines came before it (one
    per epoch), and after it no daemon, no training process and no
    temporary folder is left (they all were: the script died at once)."""
    import os
    import signal
    import time

    out = tmp_path / "cv.json"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # torch >= 2 keeps a compile cache under TMPDIR on purpose (inductor's):
    # not the script's temporaries, so it goes elsewhere.
    env = {"AUGLOADER_BIN": str(bins), "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch-cache")}
    proc = subprocess.Popen([sys.executable, EXAMPLE, "cv", "--shards", mutag_shards, "--folds", "2", "--epochs", "500",
                             "--batches-per-epoch", "2", "--jobs", "2", "--policies", "none,nodesam", "--json", out],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    deadline = time.time() + 300
    while time.time() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if "] epoch " in line:
            break
        assert line or proc.poll() is None, "".join(seen) + proc.stderr.read()
    assert any("] epoch 1/500" in line for line in seen), "".join(seen)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("train_gin.py cv ignored SIGTERM for 60 s")
    err = proc.stderr.read()
    assert rc == 130, err
    assert "stopped" in err, err

    def processes_mentioning(text):
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if text.encode() in f.read():
                            found.append(pid)
                except OSError:
                    pass
        return found

    time.sleep(0.5)
    assert not processes_mentioning(str(tmp_path / "cv" / "folds")), "the daemon outlived the script"
    assert not processes_mentioning(str(out)), "a training process outlived the script"
    assert not list(tmp.iterdir()), f"left behind: {list(tmp.iterdir())}"


def test_paper_page_states_the_gains_right():
    """docs/paper.md said the paper's gains were "0.03 to 1.5 points"; its
    MUTAG SubMix row equals the baseline. The page's sentence comes from
    the table (examples/paper.py) and the committed page says the same."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("paper", ROOT / "examples" / "paper.py")
    paper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(paper)
    text = paper.gains_text()
    assert text.startswith("the paper's gains over the baseline are 0.00 to 1.54 points"), text
    assert "MUTAG SubMix" in text
    page = (ROOT / "docs" / "paper.md").read_text()
    assert text in page.replace("\n", " "), "docs/paper.md and examples/paper.py disagree: rerun make paper"


def test_codes_layout_is_the_same_model(bins, mutag_shards):
    """GIN over the compact layout (a CodeEmbedding in place of the first
    layer's and the input read-out's weights) computes what GIN over the
    dense one-hot x computes, given the same weights."""
    import importlib.util
    import sys

    from augloader.torch import to_tensors
    if str(EXAMPLE.parent) not in sys.path:  # the example imports its neighbour _needs
        sys.path.insert(0, str(EXAMPLE.parent))
    spec = importlib.util.spec_from_file_location("train_gin", EXAMPLE)
    gin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gin)
    with augloader.Daemon(mutag_shards, policy="nodesam", binary=str(bins / "augloader"), batch_size=32) as d:
        batches = list(d.client().epoch(0))
    dim, classes, hidden = batches[0].feature_dim, batches[0].num_classes, 16
    torch.manual_seed(0)
    dense = gin.GIN(dim, classes, hidden, codes=False).double()
    codes = gin.GIN(dim, classes, hidden, codes=True).double()
    sd = {k: v for k, v in dense.state_dict().items()
          if not k.startswith(("convs.0.mlp.0.", "heads.0."))}
    codes.load_state_dict({**sd, "convs.0.mlp.0.bias": dense.convs[0].mlp[0].bias.detach(),
                           "heads.0.bias": dense.heads[0].bias.detach(),
                           "embed.weight": torch.cat([dense.convs[0].mlp[0].weight.T, dense.heads[0].weight.T], 1).detach()})
    for m in (dense, codes):
        m.eval()
    with torch.no_grad():
        for b in batches:
            td, tc = to_tensors(b, "cpu"), to_tensors(b, "cpu", layout="codes")
            td["x"] = td["x"].double()
            tc["x_weight"] = tc["x_weight"].double()
            a, c = dense(td), codes(tc)
            assert torch.allclose(a, c, atol=1e-9), float((a - c).abs().max())


@pytest.mark.parametrize("policy", ["nodesam", "submix:p=0.4"])
def test_sigkill_resume_same_weights(bins, mutag_shards, tmp_path, policy):
    """A training run killed with SIGKILL mid-epoch and resumed from its
    last checkpoint (every 5 steps; an epoch is 6 batches) ends with model
    weights bitwise equal to an uninterrupted run's (CPU, deterministic
    algorithms), and so does its history."""
    import torch

    from conftest import kill_at_line

    folds = tmp_path / "folds"
    subprocess.run([bins / "augloader", "split", "--shards", mutag_shards, "--folds", "10", "--seed", "0", "--out", folds],
                   check=True, capture_output=True)
    with augloader.Daemon(mutag_shards, folds=folds, views=[f"train={{fold}}:training:{policy}", "test={fold}:test"],
                          binary=str(bins / "augloader"), batch_size=32) as d:
        def cmd(name, *extra):
            return [sys.executable, EXAMPLE, "train", "--url", d.url, "--view", "train", "--test-view", "test", "--fold", "0",
                    "--epochs", "12", "--seed", "0", "--deterministic", "--json", tmp_path / f"{name}.json",
                    "--save-model", tmp_path / f"{name}.pt", *extra]

        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        proc = subprocess.run(cmd("whole"), capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        ck = tmp_path / "ck.pt"
        run = cmd("resumed", "--checkpoint", ck, "--checkpoint-every", "5", "--resume")
        kill_at_line(run, env, "checkpoint step 10")
        state = torch.load(ck)
        assert 0 < state["loader"]["batches"] < 6 and state["steps"] >= 10, "the checkpoint is not mid-epoch"
        proc = subprocess.run(run, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "resumed from" in proc.stdout
    whole, resumed = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "resumed.pt")
    assert whole.keys() == resumed.keys()
    for k in whole:
        assert torch.equal(whole[k], resumed[k]), f"{k} differs after the resume"
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("data_wait_s", "step_s")} for r in h]  # noqa: E731
    assert strip(json.loads((tmp_path / "whole.json").read_text())) == strip(json.loads((tmp_path / "resumed.json").read_text()))


def test_user_errors_are_messages(tmp_path):
    """What the user can fix is one line, not a traceback: no daemon at the
    URL, a flag out of range, --resume without a checkpoint; the --seed
    help of train mode does not promise to seed a daemon it did not start."""
    run = [sys.executable, EXAMPLE, "train"]
    for args, code, want in [
        (["--url", f"unix://{tmp_path}/none.sock", "--epochs", "1"], 1, "train_gin: cannot connect to"),
        (["--url", "unix:///x.sock", "--epochs", "0"], 2, "--epochs: 0: want an integer ≥ 1"),
        (["--url", "unix:///x.sock", "--resume"], 2, "--resume needs --checkpoint"),
    ]:
        p = subprocess.run(run + args, capture_output=True, text=True, timeout=120)
        assert p.returncode == code and want in p.stderr and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
    h = subprocess.run(run + ["--help"], capture_output=True, text=True, timeout=120).stdout
    seed = " ".join(h.split("--seed SEED", 2)[-1].split())
    assert "the daemon's own" in seed and "and the daemon's" not in seed, seed


def test_train_ctrl_c_says_what_stopped(bins, make_synth_shards):
    """Ctrl-C in train mode: exit 130 and a message that says why and what
    is left (it printed "stopped ()" and claimed to stop a daemon it never
    started)."""
    import signal

    with augloader.Daemon(make_synth_shards(80, 3), binary=str(bins / "augloader"), policy="nodesam", batch_size=16) as d:
        proc = subprocess.Popen([sys.executable, EXAMPLE, "train", "--url", d.url, "--epochs", "100000", "--device", "cpu"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        first_epoch_line(proc)
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("train_gin.py train ignored Ctrl-C for 60 s")
        err = proc.stderr.read()
        assert rc == 130, err
        assert "train_gin: stopped (interrupted); the daemon is yours and still runs" in err and "()" not in err, err
        assert "Traceback" not in err, err
        # The daemon it did not start is still serving.
        assert sum(1 for _ in augloader.connect(d.url).epoch(0)) > 0


def first_epoch_line(proc, timeout: float = 300) -> None:
    """Reads the example's output until its first epoch line (training
    runs); fails with its stderr if it ended first."""
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if line.startswith("epoch") or not line:
            break
    assert line.startswith("epoch"), proc.stderr.read()


def test_ctrl_c_in_a_finalizer_is_not_lost():
    """Issue #55: a Ctrl-C that train_gin.py sometimes ignored (an idle CI
    run: 'ignored Ctrl-C for 60 s'). The window: the client frees a
    batch's buffers in __del__ at every step, and a KeyboardInterrupt
    raised while a finalizer runs is printed and dropped by Python. The
    example's handler records the signal, and its loops check at every
    step: a stop asked for in that window still stops."""
    import runpy
    import signal

    sys.path.insert(0, str(EXAMPLE.parent))  # its _needs helper
    try:
        mod = runpy.run_path(str(EXAMPLE))  # its functions, main() not run
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    old = signal.signal(signal.SIGINT, mod["_stop"])
    try:
        class Lease:
            def __del__(self):
                signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the finalizer

        Lease()  # freed at once: its KeyboardInterrupt is swallowed ("Exception ignored in")
        with pytest.raises(KeyboardInterrupt) as e:
            mod["check_stop"]()  # the next step's check
        assert str(e.value) == ""  # Ctrl-C: "stopped (interrupted)"
    finally:
        signal.signal(signal.SIGINT, old)
        mod["_STOP_ASKED"].clear()


@pytest.mark.parametrize("script,blocked", [("train_gin.py", "torch"), ("train_graphcl.py", "torch"),
                                            ("train_gine.py", "torch"), ("train_gin.py", "augloader")])
def test_examples_say_what_they_need(script, blocked):
    """An example whose package is missing says which and how to install
    it, in one line, before anything runs (train_graphcl.py died on
    `import sklearn` after three epochs)."""
    path = ROOT / "examples" / script
    code = (f"import sys, runpy; sys.modules[{blocked!r}] = None; sys.path.insert(0, {str(path.parent)!r}); "
            f"sys.argv = [{str(path)!r}, '--help']; runpy.run_path({str(path)!r}, run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and f"{script} needs {blocked} (" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_train_ctrl_c_with_shards_says_the_daemon_stopped(bins, make_synth_shards):
    """Issue #65: with --shards (the run's own daemon, node_daemon outside
    torchrun) Ctrl-C said 'the daemon is yours and still runs' after the
    example had stopped it. The message says what is true, and the daemon
    is gone."""
    import signal
    import tempfile
    import time

    tmp = tempfile.mkdtemp(prefix="aug-gin-")  # the node folder's socket path stays short
    try:
        proc = subprocess.Popen([sys.executable, EXAMPLE, "train", "--shards", str(make_synth_shards(80, 3)), "--epochs",
                                 "100000", "--device", "cpu", "--batch-size", "16"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": tmp,
                                     "AUGLOADER_BIN": str(bins)})
        first_epoch_line(proc)
        pid = int(next(pathlib.Path(tmp).glob("augloader-node-*/pid")).read_text())
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(60)
        err = proc.stderr.read()
        assert rc == 130 and "train_gin: stopped (interrupted); the daemon it started is stopped" in err, err
        assert "still runs" not in err and "Traceback" not in err, err
        deadline = time.time() + 30
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pid}"), "the daemon the example started outlived it"
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


def test_ctrl_c_inside_torch_is_the_interrupt(capsys):
    """Issue #65: a Ctrl-C during a checkpoint's write ended with torch's
    'RuntimeError: [enforce fail at inline_container.cc:664]' traceback and
    exit 1 (3 of 7 tries): torch turns the KeyboardInterrupt raised inside
    its writer into that error. A RuntimeError once a stop was asked for is
    the stop: exit 130 and the interrupt's message; without a stop it
    stays the error it is."""
    import runpy
    import signal

    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        mod = runpy.run_path(str(EXAMPLE))
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    g = mod["main"].__globals__
    old_train, old_sig = g["cmd_train"], signal.getsignal(signal.SIGINT)

    def save_interrupted(args):
        g["_STOP_ASKED"].append(signal.SIGINT)  # the handler ran inside torch.save's writer
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 4352 vs 4240")

    def fails(args):
        raise RuntimeError("a real failure")

    try:
        g["cmd_train"] = save_interrupted
        with pytest.raises(SystemExit) as e:
            g["main"](["train", "--url", "unix:///nonexistent/aug.sock", "--device", "cpu", "--checkpoint", "ck.pt"])
        assert e.value.code == 130
        err = capsys.readouterr().err
        assert "train_gin: stopped (interrupted); the daemon is yours and still runs; --resume continues from ck.pt" in err
        g["_STOP_ASKED"].clear()
        g["cmd_train"] = fails
        with pytest.raises(RuntimeError, match="a real failure"):
            g["main"](["train", "--url", "unix:///nonexistent/aug.sock", "--device", "cpu"])
    finally:
        g["cmd_train"] = old_train
        g["_STOP_ASKED"].clear()
        signal.signal(signal.SIGINT, old_sig)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
