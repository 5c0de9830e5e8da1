"""Build of the augloader Python package, with the daemon inside.

A wheel built here holds the client and static ``augloader`` and
``shardconv`` executables (CGO_ENABLED=0, -trimpath), which pip installs on
the environment's scripts path, where ``augloader.find_binary`` looks first
(after $AUGLOADER_BIN). The wheel is tagged for the platform its binaries
are for, not ``any``.

Environment:
  AUGLOADER_GOARCH    amd64 or arm64 (default: the Go toolchain's own); the
                      binaries are cross-compiled, no C toolchain is needed
  AUGLOADER_NO_BINARY 1: the client alone, tagged py3-none-any (make's
                      editable development install: the tests use bin/)

The version is read from internal/version/VERSION, the one place it is
set: the Go binaries embed the same file.
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.build_scripts import build_scripts
except ImportError:  # setuptools < 68 (an editable install's, --no-build-isolation)
    from distutils.command.build_scripts import build_scripts

try:  # setuptools >= 70.1 carries bdist_wheel; older ones take it from wheel
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # neither: only the editable client install works
        bdist_wheel = None

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VERSION_FILE = ROOT / "internal" / "version" / "VERSION"
NO_BINARY = os.environ.get("AUGLOADER_NO_BINARY", "") not in ("", "0")
TOOLS = ("augloader", "shardconv")

# Wheel platform tags of each GOARCH. The binaries are static, so they need
# no particular libc: the manylinux tags say glibc 2.17 or newer, the
# musllinux one any musl distribution.
PLATFORMS = {
    "amd64": "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
    "arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
}


def read_version() -> str:
    try:
        return VERSION_FILE.read_text().strip()
    except OSError:
        sys.exit(f"augloader: {VERSION_FILE} not found: build the package from an augloader checkout "
                 "(clients/python inside it), or install a wheel (make wheel)")


def go_arch() -> str:
    arch = os.environ.get("AUGLOADER_GOARCH")
    if arch:
        if arch not in PLATFORMS:
            sys.exit(f"augloader: AUGLOADER_GOARCH={arch}: want one of {', '.join(PLATFORMS)}")
        return arch
    go = shutil.which("go")
    if go:
        return subprocess.run([go, "env", "GOARCH"], capture_output=True, text=True, check=True).stdout.strip()
    return ""


def build_binaries(out: pathlib.Path) -> list:
    """go build the daemon and the converter into out; exits with what to do
    when Go is missing."""
    go = shutil.which("go")
    if go is None:
        sys.exit("augloader: building this package needs Go (go.mod says which; a go 1.21 or newer fetches it, https://go.dev/dl/) on PATH, "
                 "to compile the augloader and shardconv executables it installs. Either install Go, "
                 "install a prebuilt wheel (`make wheel` in a checkout writes dist/augloader-*.whl), or set "
                 "AUGLOADER_NO_BINARY=1 to install the client alone and point AUGLOADER_BIN at the binaries.")
    arch = go_arch()
    if arch not in PLATFORMS:
        sys.exit(f"augloader: Go builds for {arch!r} here; the package is built for {', '.join(PLATFORMS)} "
                 "(set AUGLOADER_GOARCH)")
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CGO_ENABLED="0", GOOS="linux", GOARCH=arch)
    cmd = [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(out) + "/"] + [f"./cmd/{t}" for t in TOOLS]
    print(f"augloader: {' '.join(cmd)} (GOARCH={arch}, CGO_ENABLED=0)", file=sys.stderr)
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    return [str(out / t) for t in TOOLS]


class BuildPy(build_py):
    """Writes augloader/_version.py into the build (an in-tree import reads
    VERSION itself)."""

    def run(self):
        super().run()
        target = pathlib.Path(self.build_lib) / "augloader" / "_version.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f'__version__ = "{read_version()}"\n')


class BuildScripts(build_scripts):
    """Compiles the executables and puts them where install_scripts takes
    scripts from (build_scripts itself would parse them as Python)."""

    def run(self):
        self.mkpath(self.build_dir)
        for f in build_binaries(pathlib.Path(self.build_dir).resolve().parent / f"go-linux-{go_arch()}"):
            dst = os.path.join(self.build_dir, os.path.basename(f))
            self.copy_file(f, dst)
            os.chmod(dst, 0o755)


cmdclass = {"build_py": BuildPy}
if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = NO_BINARY

        def get_tag(self):
            if NO_BINARY:
                return "py3", "none", "any"
            return "py3", "none", PLATFORMS.get(go_arch(), "unknown")

    cmdclass["bdist_wheel"] = BdistWheel
scripts = []
if not NO_BINARY:
    cmdclass["build_scripts"] = BuildScripts
    # Placeholders: BuildScripts replaces them with the compiled files.
    scripts = list(TOOLS)

setup(version=read_version(), cmdclass=cmdclass, scripts=scripts)
