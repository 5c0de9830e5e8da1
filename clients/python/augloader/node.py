"""One daemon per node for a job run by torchrun: :func:`node_daemon`.

    url = augloader.node_daemon("collab.shards", policy="nodesam", seed=0)
    ds = AugloaderDataset(url)          # rank and world from torchrun

Every local rank calls it with the same arguments. The first to arrive
starts ``augloader serve`` on a socket in a node-local folder keyed by
the job and by the process the daemon is tied to: under torchrun the
agent, the workers' parent (``serve --exit-with-pid``), known by its id
and start time, so two jobs on one node never share a daemon, also
under plain torchrun, whose every job is ``TORCHELASTIC_RUN_ID=none``.
The others, and the workers of a group torchrun restarts, attach to it:
one daemon, never two (a lock decides, and a daemon still loading its
shards is waited for, not started again); never zero (a daemon found
dead is started again). It stops when the agent ends, so no job leaves
one behind; the folders of ended jobs are removed by the next call. A
call with other arguments than the running daemon's is refused, naming
both; a dead daemon's arguments bind nothing.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import tempfile
import time
from typing import Optional, Sequence

from ._proc import start_time
from .daemon import DaemonError, _given, find_binary


def _serve_processes() -> dict:
    """The running ``augloader serve`` processes by their socket (the path
    as bytes: their pids), whoever started them and whatever a pid file
    says: one started by a rank killed before it wrote its pid file is
    found too. One pass over /proc."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[1:2] != [b"serve"] or b"--socket" not in argv[2:-1]:
            continue
        if start_time(int(entry.name)) is not None:
            found.setdefault(argv[argv.index(b"--socket", 2) + 1], []).append(int(entry.name))
    return found


def _daemons(sock: pathlib.Path, procs: dict) -> list:
    """The running daemons of sock, from _serve_processes."""
    return sorted(procs.get(os.fsencode(str(sock)), []))


def _base(base: Optional[str]) -> pathlib.Path:
    return pathlib.Path(base or tempfile.gettempdir())


def _folder(key: str, base: Optional[str]) -> pathlib.Path:
    """The job's node-local folder, made private to this user; refused
    when it is not a folder this user owns (a link, another's)."""
    # Hashed: a socket's path holds at most 107 bytes, and torchrun's ids
    # are UUIDs.
    d = _base(base) / f"augloader-node-{os.getuid()}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    if not _owned(d):
        raise DaemonError(f"augloader.node_daemon: {d} is not a folder of this user's: remove it, or give folder=")
    return d


def _owned(d: pathlib.Path) -> bool:
    """Whether d is a folder (not a link) of this user's."""
    st = os.lstat(d)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def _sweep(base: Optional[str], keep: pathlib.Path) -> None:
    """Removes this user's node folders whose owner ended and whose daemon
    is gone: what the jobs before this one left. A folder whose lock is
    held, or that says nothing of its owner, is left alone."""
    procs = None
    for d in _base(base).glob(f"augloader-node-{os.getuid()}-*"):
        if d == keep:
            continue
        try:
            if not _owned(d):
                continue
            pid, start = (int(v) for v in (d / "owner").read_text().split())
            if start_time(pid) == start:
                continue
            procs = _serve_processes() if procs is None else procs
            if _daemons(d / "aug.sock", procs):
                continue
            with open(d / "lock", "a+") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(d)
        except (OSError, ValueError):
            continue


def node_procs() -> int:
    """The ``--procs`` node_daemon gives the node's daemon by default: the
    node's cores less one for each local rank's loop (torchrun's
    ``LOCAL_WORLD_SIZE``; 1 outside it), at least 1. Counted from
    ``os.cpu_count()``, which every rank of the node sees alike, not from
    the rank's CPU affinity (which a launcher binding ranks to cores makes
    differ): every rank must ask for the same daemon."""
    try:
        ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        ranks = 1
    return max(1, (os.cpu_count() or 1) - max(ranks, 1))


def node_daemon(shards, *, policy: Optional[str] = None, seed: int = 0, workers: Optional[int] = None,
                batch_size: Optional[int] = None, procs: Optional[int] = None, args: Sequence[str] = (),
                run_id: Optional[str] = None, folder: Optional[str] = None, owner_pid: Optional[int] = None,
                binary: Optional[str] = None, ready_timeout: float = 120.0) -> str:
    """The URL (unix://) of this node's daemon for the job, started by the
    first caller: see the module. procs: the cores its Go code runs on
    once loaded (``--procs``; default :func:`node_procs`, the cores the
    local ranks' loops leave, unless ``args`` has a ``--procs`` or
    ``GOMAXPROCS`` is set; 0: every core). run_id: the job (default
    ``TORCHELASTIC_RUN_ID``); folder: where the job's folders go (default
    the system's temporary folder); owner_pid: the process the daemon
    ends with (default the torchrun agent, this process's parent, under
    torchrun; else this process). ready_timeout: how long a call waits
    for the daemon's shards to load, its own start or another rank's."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
    owner = owner_pid or (os.getppid() if under_torchrun else os.getpid())
    owner_start = start_time(owner)
    if owner_start is None:
        raise DaemonError(f"augloader.node_daemon: owner process {owner} does not run")
    run_id = run_id or os.environ.get("TORCHELASTIC_RUN_ID") or "job"
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", run_id):
        raise DaemonError(f"augloader.node_daemon: job id {run_id!r}: want letters, digits, _ . - (TORCHELASTIC_RUN_ID)")
    d = _folder(f"{run_id}\0{owner}\0{owner_start}", folder)
    sock = d / "aug.sock"
    if len(os.fsencode(str(sock))) > 107:
        raise DaemonError(f"augloader.node_daemon: {sock}: over the 107 bytes a Unix socket's path may take; give a "
                          f"shorter folder=")
    cmd = [binary or find_binary(), "serve", "--socket", str(sock), "--shards", str(shards), "--seed", str(seed)]
    if procs is None and not _given(args, "--procs") and "GOMAXPROCS" not in os.environ:
        procs = node_procs()
    for flag, v in (("--policy", policy), ("--workers", workers), ("--batch-size", batch_size), ("--procs", procs)):
        if v is not None:
            cmd += [flag, str(v)]
    cmd += [str(a) for a in args]
    cmd += ["--exit-with-pid", str(owner)]
    with open(d / "lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (d / "owner").write_text(f"{owner} {owner_start}\n")
        running = _daemons(sock, _serve_processes())
        if running:
            # A live daemon: its arguments bind this call. It may still be
            # loading its shards (the rank that started it was stopped
            # while it waited): wait for it, never start a second one.
            try:
                have = json.loads((d / "config").read_text())
            except (OSError, ValueError):
                have = None
            if have is not None and have != cmd[1:]:
                raise DaemonError(f"augloader.node_daemon: this node's daemon in {d} (pid {running[0]}) was started "
                                  f"with other arguments than this call's: it runs `{_shown(have)}`, this call asks "
                                  f"for `{_shown(cmd[1:])}`: every local rank must ask for the same daemon")
            _wait_ready(d, running[0], ready_timeout)
        else:
            # The arguments go first: a rank that arrives while this
            # daemon loads compares with them.
            tmp = d / "config.tmp"
            tmp.write_text(json.dumps(cmd[1:]))
            os.replace(tmp, d / "config")
            _start(cmd, d, ready_timeout)
    _sweep(folder, d)
    return "unix://" + str(sock)


def _shown(args: list) -> str:
    """A daemon's arguments as a message shows them: the socket and the
    owner, the same for every caller, left out."""
    out, skip = [], 0
    for a in args:
        if skip:
            skip -= 1
        elif a in ("--socket", "--exit-with-pid"):
            skip = 1
        else:
            out.append(a)
    return "augloader " + " ".join(out)


def _start(cmd: list, d: pathlib.Path, ready_timeout: float) -> None:
    """Starts the daemon in a session of its own (torchrun's stop of the
    worker group does not reach it) and waits for its readiness line."""
    ready = d / "ready.json"
    ready.unlink(missing_ok=True)
    with open(ready, "w") as out, open(d / "serve.log", "a") as log:
        proc = subprocess.Popen(cmd, stdout=out, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    (d / "pid").write_text(f"{proc.pid}\n")
    try:
        _wait_ready(d, proc.pid, ready_timeout, proc)
    except DaemonError:
        if proc.poll() is None:
            proc.kill()
        raise


def _wait_ready(d: pathlib.Path, pid: int, ready_timeout: float, proc: Optional[subprocess.Popen] = None) -> None:
    """Waits for daemon pid's readiness line in the folder's ready.json
    (its standard output, whoever started it)."""
    ready, start = d / "ready.json", start_time(pid)
    deadline = time.monotonic() + ready_timeout
    while True:
        try:
            line = ready.read_text().splitlines()[:1]
        except OSError:
            line = []
        if line:
            try:
                if json.loads(line[0]).get("ready") is True:
                    return
            except ValueError:
                pass
            raise DaemonError(f"augloader serve printed {line[0]!r} instead of its readiness line", _log(d))
        gone = proc.poll() is not None if proc is not None else start_time(pid) != start
        if gone:
            status = f" with status {proc.returncode}" if proc is not None else ""
            raise DaemonError(f"augloader serve (pid {pid}) exited{status} before it was ready", _log(d))
        if time.monotonic() > deadline:
            raise DaemonError(f"augloader serve (pid {pid}) did not get ready within {ready_timeout:.0f} s", _log(d))
        time.sleep(0.05)


def _log(d: pathlib.Path) -> str:
    try:
        return (d / "serve.log").read_text()
    except OSError:
        return ""
