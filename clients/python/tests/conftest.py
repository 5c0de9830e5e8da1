"""Fixtures: build the Go binaries, make shards, run `augloader serve` on a
Unix socket and an Arrow Flight port, stop it with SIGTERM at the end."""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "datasets"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """tmp_path under a short root of the run's own (/tmp/pt-XXXXXXXX): a
    Unix socket's path takes 107 bytes at most, and pytest's own root
    (/tmp/pytest-of-USER/pytest-N) under an xdist worker's folder
    (popen-gwN; make test runs two) left a node daemon's socket, a folder
    deeper, 110. Removed at the end of a run that passed."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        import tempfile

        config.option.basetemp = tempfile.mkdtemp(prefix="pt-")
        config._augloader_basetemp = config.option.basetemp


def pytest_sessionfinish(session, exitstatus):
    base = getattr(session.config, "_augloader_basetemp", None)
    if base and exitstatus == 0:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def bins(tmp_path_factory):
    d = os.environ.get("AUGLOADER_BIN")
    if d:
        return pathlib.Path(d)
    out = tmp_path_factory.mktemp("bin")
    subprocess.run(["go", "build", "-o", str(out) + "/", "./cmd/..."], cwd=ROOT, check=True)
    return out


# What to run when a test needs torch and the venv has none: make test's
# .venv holds one always (Debian's python3-torch when the system's Python
# has it, else .venv-torch2's; the Makefile's VENV_TORCH).
TORCH_MISSING = ("torch is not installed in this Python: run the tests with `make test` (its .venv takes Debian's "
                 "python3-torch, or .venv-torch2's torch 2.x when the system has none)")


def need_torch():
    """Imports torch, or skips the test saying how to install it (and fails
    under CI=true, where .ci/run has installed it)."""
    try:
        import torch
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(TORCH_MISSING)
        pytest.skip(TORCH_MISSING)
    return torch


def shared_or_skip(*parts):
    p = SHARED.joinpath(*parts)
    if not p.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{p} is missing (CI=true requires ../shared/datasets)")
        pytest.skip(f"{p} absent: put ../shared/datasets beside the repository to run this")
    return p


@pytest.fixture(scope="session")
def make_synth_shards(bins, tmp_path_factory):
    """Returns a function that synthesizes a COLLAB-shaped dataset of the
    given size and seed, converts it, and returns the shard folder."""
    def make(graphs, seed):
        d = tmp_path_factory.mktemp(f"synth{graphs}")
        subprocess.run([bins / "shardconv", "synth", "--like", "COLLAB", "--graphs", str(graphs), "--seed", str(seed),
                        "--out", d / "tu"], check=True, capture_output=True)
        subprocess.run([bins / "shardconv", "convert", "-q", "-i", d / "tu", "-o", d / "shards"], check=True)
        return d / "shards"
    return make


@pytest.fixture(scope="session")
def synth_shards(make_synth_shards):
    return make_synth_shards(80, 2)


@pytest.fixture(scope="session")
def mutag_shards(bins, tmp_path_factory):
    src = shared_or_skip("tu", "MUTAG")
    d = tmp_path_factory.mktemp("mutag")
    subprocess.run([bins / "shardconv", "convert", "-q", "-i", src, "-o", d / "shards"], check=True)
    return d / "shards"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A test's daemon, started by augloader.Daemon (the one launcher the
    client, the tests and the bench share): `serve` with these flags
    (--shards or --materialized among them), its socket in tmp, Flight on
    a free loopback port, serve's own --drain. stop() wants exit status 0
    and the socket gone."""

    def __init__(self, bins, tmp, *args):
        import augloader

        args, kw = [str(a) for a in args], {}
        for flag in ("--shards", "--materialized"):
            if flag in args:
                i = args.index(flag)
                kw[flag[2:]] = args[i + 1]
                del args[i:i + 2]
        if not any(a == "--drain" or a.startswith("--drain=") for a in args):
            args += ["--drain", "5s"]  # serve's default, not the launcher's
        self.sock = tmp / "aug.sock"
        self.d = augloader.Daemon(**kw, binary=str(bins / "augloader"), socket=self.sock, flight=True, args=args).start()
        self.unix = f"unix://{self.sock}"
        self.grpc = self.d.flight_url
        self.port = int(self.grpc.rsplit(":", 1)[1])

    @property
    def log_text(self) -> str:
        return self.d.log

    def stop(self):
        self.d.__exit__(None, None, None)  # SIGTERM; DaemonError unless it exits 0
        assert not self.sock.exists(), "socket left behind"


@pytest.fixture()
def short_tmp():
    """A folder of a short path for Unix sockets (107 bytes at most):
    pytest's tmp_path under xdist's workers (make test runs two) leaves a
    node folder's socket too little room."""
    import tempfile

    d = pathlib.Path(tempfile.mkdtemp(prefix="aug-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture()
def daemon(bins, tmp_path):
    started = []

    def start(*args):
        d = Daemon(bins, tmp_path / f"d{len(started)}", *args) if (tmp_path / f"d{len(started)}").mkdir() is None else None
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


def kill_at_line(cmd, env, prefix: str, timeout: float = 60) -> None:
    """Runs cmd and SIGKILLs it as soon as it prints a line starting with
    prefix (a checkpoint written); fails if it ended before that."""
    import signal

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in p.stdout:
        if line.startswith(prefix):
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=timeout)
    assert p.returncode == -signal.SIGKILL, f"the run ended (status {p.returncode}) before it printed {prefix!r}"


class S3Store:
    """A real S3-compatible server (s3proxy, `make s3proxy`; java), on a
    loopback port, objects in tmp. env(endpoint) is the AWS environment a
    process needs to reach it (or a proxy before it)."""

    def __init__(self, tmp: pathlib.Path):
        jar = pathlib.Path(os.environ.get("AUGLOADER_S3PROXY_JAR") or ROOT / ".cache" / "s3proxy-2.7.0.jar")
        if not jar.exists() or shutil.which("java") is None:
            msg = f"the S3 test server is not installed ({jar}, java): `make s3proxy` fetches it"
            if os.environ.get("CI") == "true":
                pytest.fail(msg)
            pytest.skip(msg)
        self.data, port = tmp / "data", free_port()
        self.data.mkdir()
        conf = tmp / "s3proxy.conf"
        conf.write_text(f"s3proxy.endpoint=http://127.0.0.1:{port}\ns3proxy.authorization=aws-v2-or-v4\n"
                        f"s3proxy.identity=augloader\ns3proxy.credential=augloader-secret\n"
                        f"jclouds.provider=filesystem\njclouds.filesystem.basedir={self.data}\n")
        self.log = open(tmp / "s3proxy.log", "w")
        self.proc = subprocess.Popen(["java", "-Xmx256m", "-jar", str(jar), "--properties", str(conf)],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"s3proxy did not listen: {(tmp / 's3proxy.log').read_text()[-2000:]}")
                time.sleep(0.1)

    def env(self, endpoint: str = None) -> dict:
        return dict(os.environ, AWS_ENDPOINT_URL=endpoint or self.endpoint, AWS_ACCESS_KEY_ID="augloader",
                    AWS_SECRET_ACCESS_KEY="augloader-secret", AWS_REGION="us-east-1", AWS_PROFILE="",
                    AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
                    AWS_EC2_METADATA_DISABLED="true")

    def bucket(self, name: str) -> None:
        (self.data / name).mkdir(exist_ok=True)  # the filesystem provider's bucket is a folder

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory):
    s = S3Store(tmp_path_factory.mktemp("s3"))
    yield s
    s.stop()


class SlowProxy:
    """A TCP proxy on a loopback port that holds every chunk a client
    sends for delay seconds before it forwards it: each request to the
    server behind it (an S3 GET) costs at least delay. stop() closes it."""

    def __init__(self, target: str, delay: float):
        import threading

        host, port = target.rsplit("//", 1)[-1].rsplit(":", 1)
        self.target, self.delay = (host, int(port)), delay
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading

        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            threading.Thread(target=self._pipe, args=(c, s, self.delay), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c, 0), daemon=True).start()

    @staticmethod
    def _pipe(src, dst, delay):
        try:
            while True:
                b = src.recv(1 << 16)
                if not b:
                    break
                if delay:
                    time.sleep(delay)
                dst.sendall(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self):
        self.closed = True
        self.sock.close()
