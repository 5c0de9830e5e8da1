"""What names a process on Linux: its id and its start time. Private to
the client (``augloader.node``, ``augloader._shared``)."""
from __future__ import annotations

from typing import Optional


def start_time(pid: int) -> Optional[int]:
    """Process pid's start time (clock ticks after boot, the 22nd field of
    /proc/PID/stat), or None when it does not run (no such process, or a
    zombie). With its id, it names a process whoever its parent is, and
    an id the kernel gave again to another process is not it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # the command name may hold ')'
    except (OSError, IndexError):
        return None
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])
