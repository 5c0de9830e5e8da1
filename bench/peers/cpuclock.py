"""CPU seconds a data loader costs the trainer's machine: this process and
every process below it that is its loader's (DataLoader workers, live or
reaped), for the structures benchmarks (bench/python_structures.py and
bench/peers/fairchem_structures.py).

getrusage(RUSAGE_SELF) alone flatters a peer whose fastest configuration
has worker processes: their CPU is the trainer machine's too. Live
descendants are read from /proc (utime + stime); reaped ones from
getrusage(RUSAGE_CHILDREN), which counts a child once it has been waited
for. A difference of two readings is exact whether a worker was reaped
between them or not: a child live at the first reading and reaped before
the second is in the first's live sum and the second's children's sum, so
only its CPU between the readings remains.

exclude names processes that are not the loader's (the augloader daemon a
benchmark starts, whose CPU it reports on its own line); their descendants
are left out too. Only stdlib: fairchem's venv imports it as well.
"""
import os
import resource

_TICK = os.sysconf("SC_CLK_TCK")
_SCHEDSTAT = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat")


def _stat(pid):
    """(ppid, cpu seconds) of a live process, or None when it has gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _descendants_cpu(root, exclude):
    """CPU seconds of root's live descendants, not of those under exclude."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                children.setdefault(st[0], []).append((int(name), st[1]))
    total, todo = 0.0, [root]
    while todo:
        for pid, cpu in children.get(todo.pop(), ()):
            if pid in exclude:
                continue
            total += cpu
            todo.append(pid)
    return total


def process_cpu_s(pid):
    """One live process's CPU seconds (the daemon a benchmark started): the
    sum of its threads' run time in nanoseconds (/proc/PID/task/*/schedstat)
    where the kernel keeps it, else utime + stime, which /proc counts in
    clock ticks (10 ms: a tenth of a 0.1 s epoch). A thread gone between
    the listing and its read is skipped (a Go daemon's threads live as
    long as it does)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise ProcessLookupError(f"cpuclock: no process {pid}") from None
    if _SCHEDSTAT:
        total = 0
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
        return total / 1e9
    st = _stat(pid)
    if st is None:
        raise ProcessLookupError(f"cpuclock: no process {pid}")
    return st[1]


def self_cpu_s():
    """This process alone (the trainer's own CPU)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def loader_cpu_s(exclude=()):
    """This process, its live descendants but those under exclude, and its
    reaped children: subtract two readings for the CPU between them."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_cpu_s() + c.ru_utime + c.ru_stime + _descendants_cpu(os.getpid(), set(exclude))
