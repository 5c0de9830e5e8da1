"""The package around the client: one version everywhere, `python -m
augloader`, and where find_binary looks (the wheel itself is tested by
tests/wheel/check.sh, make wheel-test)."""
import os
import pathlib
import stat
import subprocess
import sys

import pytest

import augloader
from augloader.daemon import DaemonError, find_binary

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_one_version(bins):
    want = (ROOT / "internal" / "version" / "VERSION").read_text().strip()
    assert augloader.__version__ == want
    for tool in ("augloader", "shardconv"):
        out = subprocess.run([str(bins / tool), "--version"], capture_output=True, text=True, check=True).stdout
        assert out.split()[-1] == want, f"{tool} --version: {out!r}"


def test_python_m_runs_the_cli(bins, tmp_path):
    env = dict(os.environ, AUGLOADER_BIN=str(bins))
    for args, tool in ((["--version"], "augloader"), (["shardconv", "--version"], "shardconv")):
        p = subprocess.run([sys.executable, "-m", "augloader", *args], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        assert augloader.__version__ in p.stdout
    # The daemon's own errors and exit status come through unchanged.
    p = subprocess.run([sys.executable, "-m", "augloader", "serve", "--shards", "/nonexistent", "--socket", str(tmp_path / "s")],
                       capture_output=True, text=True, env=env)
    assert p.returncode != 0 and "nonexistent" in p.stderr


def test_find_binary_order(tmp_path, monkeypatch):
    def exe(d, name):
        d.mkdir(parents=True, exist_ok=True)
        p = d / name
        p.write_text("#!/bin/sh\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
        return str(p)

    env_bin, scripts, on_path = tmp_path / "env", tmp_path / "scripts", tmp_path / "path"
    monkeypatch.setattr("augloader.daemon._scripts_dirs", lambda: [str(scripts)])
    monkeypatch.setenv("PATH", str(on_path))
    want_path = exe(on_path, "augloader")
    monkeypatch.delenv("AUGLOADER_BIN", raising=False)
    assert find_binary() == want_path
    want_scripts = exe(scripts, "augloader")
    assert find_binary() == want_scripts  # the wheel's, before PATH
    monkeypatch.setenv("AUGLOADER_BIN", str(env_bin))
    with pytest.raises(DaemonError, match="AUGLOADER_BIN"):
        find_binary()  # named but missing: said, not skipped over
    assert find_binary.__module__ == "augloader.daemon"
    assert exe(env_bin, "augloader") == find_binary()
