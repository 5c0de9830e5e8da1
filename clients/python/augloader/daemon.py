"""Run ``augloader serve`` for the life of a ``with`` block.

    from augloader import Daemon
    with Daemon("shards/mutag", folds="folds/", views=["train={fold}:training:nodesam",
                                                       "test={fold}:test"]) as d:
        for b in d.client().epoch(0, view="train", fold=3):
            ...

The daemon is ready when it says so (a JSON line on its standard output,
once every endpoint listens), not when a file appears; its errors (a bad
flag, a missing shard folder, a crash) are raised as :class:`DaemonError`
with its log. On exit it gets SIGTERM, and a non-zero exit status raises.

The daemon dies with this process however it ends (SIGKILL, the OOM
killer, ``docker stop``): it holds a pipe to the daemon's standard input,
and the daemon stops when it closes and removes its temporary folder
(``--exit-when-stdin-closes``, ``--remove-on-exit``). Streams still open
when it stops get half a second to finish (``--drain 500ms``; pass
``args=["--drain", "5s"]`` for more).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import sysconfig
import subprocess
import tempfile
import threading
import weakref
from typing import Optional, Sequence

from . import Client, connect

__all__ = ["Daemon", "DaemonError", "find_binary"]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


class DaemonError(RuntimeError):
    """The daemon did not start, or stopped badly; ``log`` holds its stderr."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message + ("\n--- augloader serve log ---\n" + log[-4000:] if log else ""))
        self.log = log


def find_binary(name: str = "augloader") -> str:
    """The augloader (or shardconv) executable: $AUGLOADER_BIN/NAME, else the
    one a wheel installed beside this package (the environment's scripts
    path), else NAME on PATH, else the checkout's bin/NAME (make build)."""
    d = os.environ.get("AUGLOADER_BIN")
    if d:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
        raise DaemonError(f"AUGLOADER_BIN={d}: no executable {name} there")
    for scripts in _scripts_dirs():
        p = os.path.join(scripts, name)
        if os.access(p, os.X_OK) and os.path.isfile(p):
            return p
    p = shutil.which(name)
    if p:
        return p
    repo = pathlib.Path(__file__).resolve().parents[3] / "bin" / name
    if os.access(repo, os.X_OK):
        return str(repo)
    raise DaemonError(f"no {name} executable: install the augloader wheel (make wheel; pip install dist/augloader-*.whl), "
                      "set AUGLOADER_BIN, put it on PATH, or run make build in the checkout")


def _scripts_dirs() -> list:
    """Where pip puts a wheel's executables for this interpreter: the
    environment's scripts path, and the user scheme's (pip install --user)."""
    out = []
    for scheme in (None, f"{os.name}_user"):
        try:
            p = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if p and p not in out:
            out.append(p)
    return out


def _given(args: Sequence[str], flag: str) -> bool:
    """Whether args set flag (``--flag V`` or ``--flag=V``)."""
    return any(a == flag or a.startswith(flag + "=") for a in args)


def default_procs(trainers: int = 1) -> int:
    """The ``--procs`` of a daemon started beside ``trainers`` trainer
    processes: the cores this process may run on (its CPU affinity, as the
    daemon's runtime counts them) less one for each trainer's loop, at
    least 1. A daemon whose runtime may use every core spins idle threads
    where the trainer would run (docs/bench.md, the ``procs=every-core``
    row beside the headline)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - trainers)


class Daemon:
    """An ``augloader serve`` process serving ``shards`` (or replaying the
    epochs ``augloader materialize`` wrote to ``materialized``).

    views: view specs (``NAME=all[:POLICY]``, ``NAME={fold}:training|test[:POLICY]``,
    ``NAME=SPLITFILE:training|valid|test[:POLICY]``); folds: the folder of
    ``fold-*.json`` split files ``{fold}`` views use; policy: the schedule
    of views that give none; flight: also serve Arrow Flight on a free
    loopback port (or on this ``grpc://HOST:PORT``); procs: the cores the
    daemon's code runs on at once once loaded (``--procs``; default
    :func:`default_procs`, every core this process may use but one, which
    its trainer's loop keeps (docs/deploy.md, "One daemon per node"); 0
    leaves it to the daemon's runtime: every core, or ``$GOMAXPROCS``);
    args: any other
    ``serve`` flags, as a list, e.g. ``args=["--cache-limit", "2GiB",
    "--shuffle", "window:64MiB", "--memory-budget", "512MiB"]`` (``augloader
    serve --help`` lists them); twins: twin sets (``"A / B"`` each), the
    aligned, differently augmented copies a request with ``twins=k`` gets
    (docs/contrastive.md).
    """

    def __init__(self, shards=None, *, materialized=None, views: Sequence[str] = (), folds=None,
                 policy: Optional[str] = None, seed: int = 0, workers: Optional[int] = None,
                 batch_size: Optional[int] = None, flight=False, socket=None, binary: Optional[str] = None,
                 args: Sequence[str] = (), ready_timeout: float = 120.0, stop_timeout: float = 30.0,
                 twins: Sequence[str] = (), procs: Optional[int] = None):
        if (shards is None) == (materialized is None):
            raise ValueError("augloader.Daemon: give shards (a shard folder) or materialized (a folder of materialized epochs)")
        self._tmp = tempfile.TemporaryDirectory(prefix="augloader-daemon-")
        # The mark that lets the daemon remove this folder when it exits
        # (--remove-on-exit removes a launcher's folder, never a user's).
        (pathlib.Path(self._tmp.name) / ".augloader-launcher").write_text(f"made by augloader.Daemon in process {os.getpid()}\n")
        self.socket = str(socket or pathlib.Path(self._tmp.name) / "aug.sock")
        cmd = [binary or find_binary(), "serve", "--socket", self.socket]
        if materialized is not None:
            cmd += ["--materialized", str(materialized)]
        else:
            cmd += ["--shards", str(shards), "--seed", str(seed)]
        if folds is not None:
            cmd += ["--folds", str(folds)]
        for v in views:
            cmd += ["--view", v]
        for t in twins:  # twin sets, "A / B" each (docs/contrastive.md)
            cmd += ["--twins", t]
        if policy is not None:
            cmd += ["--policy", policy]
        if workers is not None:
            cmd += ["--workers", str(workers)]
        if batch_size is not None:
            cmd += ["--batch-size", str(batch_size)]
        if flight:
            cmd += ["--flight", flight if isinstance(flight, str) else "grpc://127.0.0.1:0"]
        args = [str(a) for a in args]
        # An explicit --procs in args, or a GOMAXPROCS the user set, wins.
        if procs is None and "GOMAXPROCS" not in os.environ and not _given(args, "--procs"):
            procs = default_procs()
        if procs is not None:
            cmd += ["--procs", str(procs)]
        # Whoever launched the daemon owns it: it ends when this process
        # does (the stdin pipe), and takes its folder with it.
        cmd += ["--exit-when-stdin-closes", "--remove-on-exit", self._tmp.name]
        if not _given(args, "--drain"):
            cmd += ["--drain", "500ms"]
        self.cmd = cmd + args
        self.ready_timeout, self.stop_timeout = ready_timeout, stop_timeout
        self.ready: dict = {}
        self.proc: Optional[subprocess.Popen] = None
        self._log = open(pathlib.Path(self._tmp.name) / "serve.log", "w+")
        self._final_log: Optional[str] = None

    @property
    def url(self) -> str:
        """The Unix socket's URL, for :func:`augloader.connect`."""
        self._started()
        return "unix://" + self.socket

    @property
    def shm_url(self) -> str:
        """The same socket with the shared-memory transport (unix+shm://)."""
        self._started()
        return "unix+shm://" + self.socket

    def _started(self) -> None:
        # A URL of a daemon never started led to "is `augloader serve`
        # running?" at the first stream, far from the cause.
        if self.proc is None:
            raise DaemonError("augloader: this Daemon was never started: use it as `with augloader.Daemon(...) as d:`, "
                              "or call d.start() first (and d.stop() when done)")

    @property
    def flight_url(self) -> Optional[str]:
        """The Flight endpoint's URL (grpc://127.0.0.1:PORT), if serving one."""
        return self.ready.get("flight")

    @property
    def log_path(self) -> str:
        """The file the daemon's log is written to while it runs (removed
        with its temporary folder when the daemon is stopped)."""
        return self._log.name

    @property
    def log(self) -> str:
        """The daemon's log so far (all of it once stopped)."""
        if self._final_log is not None:
            return self._final_log
        self._log.flush()
        # By descriptor and offset (pread): the daemon removes the folder
        # when it exits, and shares this file's offset.
        fd, out, off = self._log.fileno(), [], 0
        while True:
            b = os.pread(fd, 1 << 20, off)
            if not b:
                return b"".join(out).decode(errors="replace")
            out.append(b)
            off += len(b)

    def client(self, **kw) -> Client:
        return connect(self.url, **kw)

    def start(self) -> "Daemon":
        # stdin: a pipe this process holds open for its life (never
        # written); the daemon stops when it closes.
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.PIPE, text=True)
        # A Daemon dropped without stop (a failed test, a forgotten
        # handle) still takes its process with it, at collection or exit.
        weakref.finalize(self, _kill, self.proc)
        line: list = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.ready_timeout)
        if not line:  # no line and no end of file within ready_timeout
            self.proc.kill()
            self.proc.wait()
            raise DaemonError(f"augloader serve did not get ready within {self.ready_timeout:.0f} s", self.log)
        if not line[0]:
            # End of file on stdout: the daemon is exiting. The process may
            # not be reaped yet (poll() can still say "running" for a
            # moment on a busy machine), so wait for its status.
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise DaemonError("augloader serve closed its standard output without a readiness line "
                                  f"and did not exit within {self.stop_timeout:.0f} s", self.log) from None
            raise DaemonError(f"augloader serve exited with status {self.proc.returncode} before it was ready", self.log)
        try:
            self.ready = json.loads(line[0])
        except ValueError:
            self.stop(check=False)
            raise DaemonError(f"augloader serve printed {line[0]!r} instead of its readiness line", self.log) from None
        if self.ready.get("ready") is not True:
            self.stop(check=False)
            raise DaemonError(f"unexpected readiness line {line[0]!r}", self.log)
        return self

    def stop(self, check: bool = True) -> int:
        """SIGTERM, then wait; returns the exit status (raises on a non-zero
        one when check)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if check:
                    raise DaemonError(f"augloader serve ignored SIGTERM for {self.stop_timeout:.0f} s", self.log)
        rc = self.proc.returncode
        for pipe in (self.proc.stdout, self.proc.stdin):
            if pipe:
                pipe.close()
        if check and rc != 0:
            raise DaemonError(f"augloader serve exited with status {rc}", self.log)
        return rc

    def __enter__(self) -> "Daemon":
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        try:
            self.stop(check=exc_type is None)
        finally:
            self._final_log = self.log
            self._log.close()
            try:
                self._tmp.cleanup()
            except FileNotFoundError:
                pass  # the daemon removed it (--remove-on-exit)
