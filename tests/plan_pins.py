"""Pins of what a `pip install --dry-run --report PLAN` would install,
less the packages torch declares but does not load to import and run on
the CPU (the torch 2.x lock, tests/requirements-torch2.txt, leaves them
out too): triton and the NVIDIA libraries the lock does not hold. The
Makefile installs the result with --no-deps into a .venv that takes
.venv-torch2's torch (see VENV_TORCH there)."""
import json
import re
import sys

plan, lock = sys.argv[1], sys.argv[2]
held = {line.split("==")[0].lower() for line in open(lock) if "==" in line}
for item in json.load(open(plan))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if re.match(r"(triton|nvidia-)", name.lower().replace("_", "-")) and name.lower() not in held:
        continue
    print(f"{name}=={version}")
