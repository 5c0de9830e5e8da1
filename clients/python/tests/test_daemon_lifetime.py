"""A daemon started by augloader.Daemon dies with its trainer however the
trainer dies, and leaves nothing in the temporary folder; stopping one with
a stream its client abandoned takes well under a second. (A trainer killed
by SIGTERM or SIGKILL left its daemon serving, reparented to PID 1, and
/tmp/augloader-daemon-*/ behind; Daemon.__exit__ waited 5.4 s on the drain
of an abandoned stream.)"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import augloader

TRAINER = """
import json, sys, time, augloader
d = augloader.Daemon(sys.argv[1], policy="none", binary=sys.argv[2]).start()
it = iter(d.client().epoch(0))
next(it)  # a stream left open, as a trainer killed mid-epoch leaves it
print(json.dumps({"pid": d.proc.pid, "tmp": d._tmp.name}), flush=True)
time.sleep(120)
"""


def gone(pid):
    """The process has exited (a zombie waiting for its reaper counts)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_daemon_dies_with_its_trainer(bins, synth_shards, sig):
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, str(synth_shards), str(bins / "augloader")],
                               stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(trainer.stdout.readline())
        assert not gone(info["pid"]) and os.path.isdir(info["tmp"])
        trainer.send_signal(sig)
        trainer.wait(10)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and (not gone(info["pid"]) or os.path.exists(info["tmp"])):
            time.sleep(0.02)
        assert gone(info["pid"]), f"the daemon outlived its trainer by 2 s ({sig!r})"
        assert not os.path.exists(info["tmp"]), f"{info['tmp']} left behind"
    finally:
        trainer.kill()
        trainer.wait()


def test_stop_with_an_abandoned_stream_is_quick(bins, synth_shards):
    d = augloader.Daemon(synth_shards, policy="none", binary=str(bins / "augloader"), batch_size=4).start()
    it = iter(d.client().epoch(0))
    next(it)  # the rest never read
    t0 = time.monotonic()
    d.stop()
    took = time.monotonic() - t0
    assert took < 1.0, f"stopping took {took:.2f} s"
    assert "stopped" in d.log


def test_errors_name_what_to_do(tmp_path, synth_shards, bins):
    # A socket that does not exist: the path, and what should be there.
    missing = tmp_path / "nope.sock"
    with pytest.raises(augloader.ConnectionLost, match=f"cannot connect to {missing}: no such socket"):
        list(augloader.connect(f"unix://{missing}").epoch(0))
    # A view asked of a daemon that serves none: what it serves instead.
    with augloader.Daemon(synth_shards, policy="none", binary=str(bins / "augloader")) as d:
        with pytest.raises(augloader.ServerError, match="serves no named views, only its one served set"):
            list(d.client().epoch(0, view="train"))


def test_a_daemon_never_started_says_so(bins, synth_shards):
    """Issue #57: augloader.Daemon(...) without `with` or .start() gave a
    URL, and the first stream failed with "is `augloader serve` running?".
    Its URL now says it was never started, and how to start it."""
    d = augloader.Daemon(synth_shards, binary=str(bins / "augloader"))
    for what in ("url", "shm_url"):
        with pytest.raises(augloader.DaemonError, match=r"never started.*with augloader\.Daemon\(\.\.\.\) as d"):
            getattr(d, what)
    with d:
        assert d.url.startswith("unix://")
