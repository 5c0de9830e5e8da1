"""Torchrun agents as "nodes" on one machine, for test_elastic.py and
bench/python_torchrun.py (not a test itself): each agent runs
examples/train_gin.py with its own $TMPDIR (so its own node daemon and
torchrun logs), and can be lost whole (agent, workers, daemon)."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """The processes whose parent is pid."""
    out = []
    for p in pathlib.Path("/proc").iterdir():
        try:
            if p.name.isdigit() and int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p.name))
        except (OSError, ValueError, IndexError):
            pass
    return out


def alive(pid):
    """Whether pid runs: a zombie whose other threads are still exiting
    (and still hold its sockets: a killed Go daemon's main thread shows Z
    first) counts as running."""
    p = pathlib.Path("/proc") / str(pid)
    try:
        if p.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            return True
        return len(list(p.joinpath("task").iterdir())) > 1
    except OSError:
        return False


class Node:
    """One torchrun agent, a "node" of its own: its $TMPDIR holds its daemon's
    folder and torchrun's logs."""

    def __init__(self, base, name, bins, out, port, nnodes, host, train_args, extra=()):
        """train_args: examples/train_gin.py train's flags; the agent adds
        --checkpoint OUT/ck --resume --batch-log OUT/log."""
        self.tmp = base / name
        self.tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(self.tmp), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
                   AUGLOADER_BIN=str(bins), GLOO_SOCKET_IFNAME="lo",
                   TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")  # docs/deploy.md: a restarted group connects
        conf = f"is_host={int(host)},last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=3"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", nnodes, "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "elastic-test",
               "--rdzv-conf", conf, "--max-restarts", "3", "--monitor-interval", "0.5", *extra,
               str(ROOT / "examples" / "train_gin.py"), "train", *train_args,
               "--checkpoint", str(out / "ck"), "--resume", "--batch-log", str(out / "log")]
        self.log = open(self.tmp / "agent.log", "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     stdin=subprocess.DEVNULL)

    def daemons(self):
        """Pids of the augloader serve processes on this node's socket."""
        sock = [str(s) for s in self.tmp.glob("augloader-node-*/aug.sock")]
        out = []
        for p in pathlib.Path("/proc").iterdir():
            try:
                argv = (p / "cmdline").read_bytes().decode().split("\0")
            except (OSError, UnicodeDecodeError):
                continue
            if "serve" in argv and any(s in argv for s in sock) and alive(int(p.name)):
                out.append(int(p.name))
        return out

    def daemons_gone(self, timeout=15):
        """Whether this node's daemons have ended within timeout (a daemon
        tied to the agent notices its end and drains first)."""
        deadline = time.monotonic() + timeout
        while self.daemons() and time.monotonic() < deadline:
            time.sleep(0.1)
        return not self.daemons()

    def lose(self):
        """SIGKILL to the agent, its workers (in sessions of their own, so
        the agent's death alone leaves them training) and its daemon."""
        victims = [self.proc.pid, *children(self.proc.pid), *self.daemons()]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        return victims

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.lose()
            return None

    def output(self):
        self.log.flush()
        return (self.tmp / "agent.log").read_text()[-4000:]


def lines(out):
    """Every batch-log line under OUT/log (a line still being written, the
    last of its file, is left for the next read)."""
    rows = []
    for f in sorted((out / "log").glob("*.jsonl")):
        text = f.read_text()
        complete = text[:text.rfind("\n") + 1]
        rows += [json.loads(line) for line in complete.splitlines() if line]
    return rows


def wait_for_step(out, step, timeout=180, world=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r["step"] >= step and (world is None or r["world"] == world) for r in lines(out)):
            return
        time.sleep(0.1)
    raise AssertionError(f"no step {step} within {timeout} s")


def torchrun_tool(folder):
    """A folder holding `torchrun` for this venv's torch (a script running
    `python -m torch.distributed.run`), to put first on a PATH."""
    tools = pathlib.Path(folder) / "tools"
    tools.mkdir()
    (tools / "torchrun").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torch.distributed.run "$@"\n')
    (tools / "torchrun").chmod(0o755)
    return tools


def one_rank_digests(bins, shards, seed, batch, epochs):
    """(epoch, graph) → digest of its tensors, read by one rank from a
    daemon of the configuration the jobs use."""
    import augloader
    from augloader.torch import AugloaderDataset
    if str(ROOT / "examples") not in sys.path:
        sys.path.insert(0, str(ROOT / "examples"))
    from _distributed import graph_digests
    d = augloader.Daemon(shards, binary=str(pathlib.Path(bins) / "augloader"), policy="nodesam", seed=seed,
                         batch_size=batch)
    d.start()
    try:
        ds, ref = AugloaderDataset(d.url, pyg=False, rank=0, world=1), {}
        for e in range(epochs):
            ds.set_epoch(e)
            for t in ds:
                ref.update(((e, g), h) for g, h, padded in graph_digests(t) if not padded)
    finally:
        d.stop()
    return ref


def check_exactly_once(out, reference):
    """Of each step, the lines of the latest worker group that trained it;
    their graphs: every (epoch, graph) once, each as the one-rank run's."""
    rows = lines(out)
    latest = {}
    for r in rows:
        latest[r["step"]] = max(latest.get(r["step"], 0), r["gen"])
    seen = {}
    for r in rows:
        if r["gen"] != latest[r["step"]]:
            continue
        for g, h, padded in r["graphs"]:
            if not padded:
                seen.setdefault((r["epoch"], g), []).append(h)
    twice = sorted(k for k, v in seen.items() if len(v) > 1)
    missing = sorted(set(reference) - set(seen))
    assert not twice and not missing, f"trained twice: {twice[:8]} ({len(twice)}); never: {missing[:8]} ({len(missing)})"
    wrong = sorted(k for k, v in seen.items() if v[0] != reference[k])
    assert not wrong, f"graphs whose tensors differ from a one-rank run's: {wrong[:8]} ({len(wrong)})"
    return rows
