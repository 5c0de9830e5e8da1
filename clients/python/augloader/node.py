"""One daemon per node for a job run by torchrun: :func:`node_daemon`.

    url = augloader.node_daemon("collab.shards", policy="nodesam", seed=0)
    ds = AugloaderDataset(url)          # rank and world from torchrun

Every local rank calls it with the same arguments. The first to arrive
starts ``augloader serve`` on a socket in a node-local folder keyed by
the job (``TORCHELASTIC_RUN_ID``); the others, and the workers of a
group torchrun restarts, attach to it. The daemon is tied to the torchrun
agent, the workers' parent (``serve --exit-with-pid``), not to the worker
that started it: a restart of the group finds it serving (never two: a
lock decides; never zero: a daemon found dead is started again), and it
stops when the agent ends, so no job leaves one behind. A call with other
arguments than the running daemon's is refused, naming the folder.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import re
import stat
import subprocess
import tempfile
import time
from typing import Optional, Sequence

from .daemon import DaemonError, find_binary


def _serving(d: pathlib.Path, sock: pathlib.Path) -> bool:
    """Whether the daemon the folder's pid file names runs, serving sock:
    its process is alive (not a zombie) and its command line names the
    socket (a process id reused by another process is not it), and the
    socket is there. Asked without connecting, so the daemon's log holds
    no probe."""
    try:
        pid = int((d / "pid").read_text())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return False
    return state not in (b"Z", b"X") and os.fsencode(str(sock)) in argv and sock.is_socket()


def _folder(run_id: str, base: Optional[str]) -> pathlib.Path:
    """The job's node-local folder, made private to this user; refused
    when it is not a folder this user owns (a link, another's)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", run_id):
        raise DaemonError(f"augloader.node_daemon: job id {run_id!r}: want letters, digits, _ . - (TORCHELASTIC_RUN_ID)")
    # The job id hashed: a socket's path holds at most 107 bytes, and
    # torchrun's ids are UUIDs.
    d = pathlib.Path(base or tempfile.gettempdir()) / f"augloader-node-{os.getuid()}-{hashlib.sha256(run_id.encode()).hexdigest()[:12]}"
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise DaemonError(f"augloader.node_daemon: {d} is not a folder of this user's: remove it, or give folder=")
    return d


def node_daemon(shards, *, policy: Optional[str] = None, seed: int = 0, workers: Optional[int] = None,
                batch_size: Optional[int] = None, args: Sequence[str] = (), run_id: Optional[str] = None,
                folder: Optional[str] = None, owner_pid: Optional[int] = None, binary: Optional[str] = None,
                ready_timeout: float = 120.0) -> str:
    """The URL (unix://) of this node's daemon for the job, started by the
    first caller: see the module. run_id: the job (default
    ``TORCHELASTIC_RUN_ID``, else one per owner); folder: where the job's
    folders go (default the system's temporary folder); owner_pid: the
    process the daemon ends with (default the torchrun agent, this
    process's parent, under torchrun; else this process)."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
    owner = owner_pid or (os.getppid() if under_torchrun else os.getpid())
    run_id = run_id or os.environ.get("TORCHELASTIC_RUN_ID") or f"pid{owner}"
    d = _folder(run_id, folder)
    sock = d / "aug.sock"
    if len(os.fsencode(str(sock))) > 107:
        raise DaemonError(f"augloader.node_daemon: {sock}: over the 107 bytes a Unix socket's path may take; give a "
                          f"shorter folder=")
    cmd = [binary or find_binary(), "serve", "--socket", str(sock), "--shards", str(shards), "--seed", str(seed)]
    for flag, v in (("--policy", policy), ("--workers", workers), ("--batch-size", batch_size)):
        if v is not None:
            cmd += [flag, str(v)]
    cmd += [str(a) for a in args]
    config = hashlib.sha256(json.dumps(cmd[1:]).encode()).hexdigest()
    with open(d / "lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = (d / "config").read_text() if (d / "config").exists() else None
        if have is not None and have != config:
            raise DaemonError(f"augloader.node_daemon: this node's daemon in {d} was started with other arguments "
                              f"than this call's: every local rank must ask for the same daemon")
        if _serving(d, sock):
            return "unix://" + str(sock)
        _start(cmd + ["--exit-with-pid", str(owner)], d, ready_timeout)
        (d / "config").write_text(config)
    return "unix://" + str(sock)


def _start(cmd: list, d: pathlib.Path, ready_timeout: float) -> None:
    """Starts the daemon in a session of its own (torchrun's stop of the
    worker group does not reach it) and waits for its readiness line."""
    ready = d / "ready.json"
    ready.unlink(missing_ok=True)
    with open(ready, "w") as out, open(d / "serve.log", "a") as log:
        proc = subprocess.Popen(cmd, stdout=out, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    (d / "pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + ready_timeout
    while True:
        line = ready.read_text().splitlines()[:1]
        if line:
            try:
                if json.loads(line[0]).get("ready") is True:
                    return
            except ValueError:
                pass
            raise DaemonError(f"augloader serve printed {line[0]!r} instead of its readiness line", (d / "serve.log").read_text())
        if proc.poll() is not None:
            raise DaemonError(f"augloader serve exited with status {proc.returncode} before it was ready",
                              (d / "serve.log").read_text())
        if time.monotonic() > deadline:
            proc.kill()
            raise DaemonError(f"augloader serve did not get ready within {ready_timeout:.0f} s", (d / "serve.log").read_text())
        time.sleep(0.05)
