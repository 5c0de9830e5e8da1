"""The README's Python snippet runs as written: on the dataset its shell
lines make (shardconv synth, shardconv convert), with the daemon binaries
this checkout built, in the test venv (Debian's torch)."""
import os
import re
import subprocess
import sys

from conftest import ROOT, need_torch


def readme_blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_python_snippet_runs_as_written(bins, tmp_path):
    need_torch()
    snippet = next(b for b in readme_blocks("python") if b.startswith("import torch, augloader"))
    shell = next(b for b in readme_blocks("sh") if "shardconv convert -i collab-tu -o collab.shards" in b)
    for line in shell.splitlines():
        cmd = line.split("#")[0].split()
        if cmd and cmd[0].endswith("shardconv"):
            subprocess.run([str(bins / "shardconv"), *cmd[1:]], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "collab.shards" / "manifest.json").exists()
    env = dict(os.environ, AUGLOADER_BIN=str(bins))
    p = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
