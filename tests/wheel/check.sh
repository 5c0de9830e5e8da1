#!/usr/bin/env bash
# The wheels in dist/ as a user gets them (make wheel-test; .ci/run):
#  1. every wheel's augloader and shardconv are static ELF executables of
#     the wheel's architecture (file(1));
#  2. the wheel of this machine, installed alone (with its declared
#     dependencies) into a fresh venv, run with no Go on PATH and no
#     checkout on sys.path: the converter makes shards, a Daemon serves an
#     epoch read from Python, and the three version strings agree;
#  3. `pip install clients/python` from the checkout builds the same with Go
#     on PATH, and without Go fails saying what to do.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
PYBASE=${PYBASE:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/augloader-wheel-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "wheel-test: $*" >&2; exit 1; }
version=$(tr -d '[:space:]' <internal/version/VERSION)

# 1. Static binaries of the right architecture.
declare -A elf=([x86_64]="x86-64" [aarch64]="ARM aarch64")
for arch in x86_64 aarch64; do
  whl=$(ls dist/augloader-"$version"-py3-none-*_"$arch".whl 2>/dev/null | head -1)
  [ -n "$whl" ] || fail "no $arch wheel of version $version in dist/ (make wheel)"
  mkdir -p "$tmp/unz-$arch"
  "$PYBASE" -m zipfile -e "$whl" "$tmp/unz-$arch"
  for tool in augloader shardconv; do
    f="$tmp/unz-$arch/augloader-$version.data/scripts/$tool"
    [ -f "$f" ] || fail "$whl holds no $tool in its scripts"
    desc=$(file -b "$f")
    case "$desc" in
      *"ELF 64-bit LSB executable, ${elf[$arch]}"*"statically linked"*) echo "wheel-test: $(basename "$whl") $tool: $desc" ;;
      *) fail "$whl: $tool is not a static ${elf[$arch]} ELF executable: $desc" ;;
    esac
  done
done

# 2. The host's wheel alone, as the README installs it, without constraint
# files: into a plain venv (the newest pyarrow and NumPy 2), and into a
# --system-site-packages venv over Debian's python3-torch and NumPy 1.x
# with the numpy1 extra; each converts and serves an epoch, without Go or
# the checkout. Over Debian's torch without the extra, pip picks a pyarrow
# that needs NumPy 2: `import augloader` says in one line what to install.
host=$(uname -m)
whl=$(ls dist/augloader-"$version"-py3-none-*_"$host".whl | head -1)
# Only the venv's scripts on PATH: no go, no checkout bin/.
run_in() { local v=$1; shift; env -i HOME="$HOME" TMPDIR="${TMPDIR:-/tmp}" PATH="$v/bin" LANG=C.UTF-8 "$@"; }
serve_epoch() {
  local v=$1 what=$2
  if run_in "$v" sh -c 'command -v go' >/dev/null 2>&1; then fail "go is still on the test's PATH"; fi
  rm -rf "$tmp/work" && mkdir "$tmp/work" && cd "$tmp/work"
  run_in "$v" shardconv synth --like COLLAB --graphs 120 --seed 3 --out tu
  run_in "$v" shardconv convert -q -i tu -o tu.shards
  run_in "$v" python -I - "$version" "$v/bin" "$root" "$what" <<'PY'
import os, subprocess, sys
version, scripts, root, what = sys.argv[1:]
import augloader, numpy, pyarrow
from augloader.daemon import find_binary
assert not augloader.__file__.startswith(root), f"augloader imported from the checkout: {augloader.__file__}"
assert augloader.__version__ == version, (augloader.__version__, version)
for name in ("augloader", "shardconv"):
    exe = find_binary(name)
    assert exe == os.path.join(scripts, name), f"find_binary({name!r}) = {exe}, want the wheel's"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert version in out, f"{name} --version says {out!r}, want {version}"
out = subprocess.run([sys.executable, "-m", "augloader", "--version"], capture_output=True, text=True, check=True).stdout
assert version in out, out
out = subprocess.run([sys.executable, "-m", "augloader", "shardconv", "--version"], capture_output=True, text=True, check=True).stdout
assert version in out, out
graphs = 0
with augloader.Daemon("tu.shards", policy="nodesam", seed=5, workers=2) as d:
    for b in d.client().epoch(0):
        graphs += b.num_graphs
        assert b.edge_index.shape[0] == 2
assert graphs == 120, graphs
if what == "debian":
    import torch
    from augloader.torch import to_tensors
    with augloader.Daemon("tu.shards", policy="none") as d:
        t = to_tensors(next(iter(d.client().epoch(0))), "cpu")
    assert t["edge_index"].dtype == torch.int64
    what += f" torch {torch.__version__}"
print(f"wheel-test: the wheel alone ({what}: pyarrow {pyarrow.__version__}, numpy {numpy.__version__}): "
      f"{augloader.__file__}, version {version}, a NodeSam epoch of {graphs} graphs read")
PY
  cd "$root"
}
pip_q=(install -q --disable-pip-version-check)
"$PYBASE" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" "${pip_q[@]}" "$whl"
serve_epoch "$tmp/venv" plain
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch, numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) >= 2)' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$tmp/deb"
  "$tmp/deb/bin/pip" "${pip_q[@]}" "$whl[numpy1]"
  serve_epoch "$tmp/deb" debian
  /usr/bin/python3 -m venv --system-site-packages "$tmp/deb-noextra"
  "$tmp/deb-noextra/bin/pip" "${pip_q[@]}" "$whl"
  if out=$(run_in "$tmp/deb-noextra" python -I -c 'import augloader' 2>&1); then
    echo "wheel-test: over Debian's torch without the extra, pip chose a pyarrow that runs on NumPy 1.x (fine)"
  else
    echo "$out" | tail -1 | grep -q "pip install 'pyarrow<22'" || fail "import augloader over NumPy 1.x without the extra did not say what to install: $out"
    echo "wheel-test: over Debian's torch without the numpy1 extra: $(echo "$out" | tail -1)"
  fi
elif [ "${CI:-}" = true ]; then
  fail "Debian's python3-torch (NumPy 1.x) is missing: .ci/run installs it"
else
  echo "wheel-test: no Debian python3-torch with NumPy 1.x here: the venv over it is not tried"
fi

# 3. pip install clients/python: with Go it builds the binaries in; without
# Go it stops and says what to do.
"$PYBASE" -m venv "$tmp/dev"
rm -rf clients/python/build
"$tmp/dev/bin/pip" install -q --disable-pip-version-check -c tests/requirements.txt ./clients/python
rm -rf clients/python/build
"$tmp/dev/bin/augloader" --version | grep -q "$version" || fail "pip install clients/python: augloader --version"
"$tmp/dev/bin/python" -c "import augloader, sys; sys.exit(augloader.__version__ != '$version')" || fail "pip install clients/python: __version__"
nogo="$tmp/nogo-bin"
mkdir "$nogo"
ln -s "$(command -v git)" "$nogo/git"
if out=$(env -i HOME="$HOME" TMPDIR="${TMPDIR:-/tmp}" PATH="$tmp/dev/bin:$nogo" "$tmp/dev/bin/pip" install --disable-pip-version-check --force-reinstall --no-deps ./clients/python 2>&1); then
  fail "pip install clients/python without Go succeeded"
fi
rm -rf clients/python/build
echo "$out" | grep -q "needs Go" || fail "pip install clients/python without Go did not say what to do: $out"
echo "wheel-test: pip install clients/python: built with Go; without Go: $(echo "$out" | grep -o 'augloader: building this package needs Go.*on PATH')"
echo "wheel-test: ok"
