"""The deploy recipes of docs/deploy.md that cannot run here whole: the
Slurm batch script on several nodes (test_slurm.py runs it on a real
one-node Slurm; here stand-ins for srun and scontrol, and it must hand
each node's torchrun the allocation's nodes, job and rendezvous host) and the Kubernetes manifests (no cluster: validated
against Kubernetes 1.33's schemas, and their probes and sidecar checked)."""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SBATCH = ROOT / "deploy" / "slurm" / "train_gin.sbatch"
MANIFEST = ROOT / "deploy" / "k8s" / "train_gin.yaml"


def stand_ins(tmp_path):
    """srun (records its options, runs the command once, as on one node),
    scontrol (the allocation's hosts) and torchrun (records its argv)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "srun").write_text('#!/bin/bash\nopts=()\nwhile [[ $1 == -* ]]; do opts+=("$1"); shift; done\n'
                               'printf "%s\\n" "${opts[@]}" > "$OUT/srun"\nexec "$@"\n')
    (bin_ / "scontrol").write_text('#!/bin/bash\n[ "$1 $2" = "show hostnames" ] || exit 3\n'
                                   'case $3 in "gpu[07-08]") printf "gpu07\\ngpu08\\n" ;;\n'
                                   '"gpu[0001-5000]") for i in $(seq -w 1 5000); do echo "gpu$i"; done ;; *) exit 3 ;; esac\n')
    (bin_ / "torchrun").write_text('#!/usr/bin/env python3\nimport json, os, sys\n'
                                   'json.dump(sys.argv[1:], open(os.environ["OUT"] + "/torchrun", "w"))\n'
                                   'open(os.environ["OUT"] + "/share", "w").write(os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", ""))\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_}:{os.environ['PATH']}", OUT=str(tmp_path), SLURM_JOB_NODELIST="gpu[07-08]",
                SLURM_JOB_NUM_NODES="2", SLURM_JOB_ID="4242", SLURM_GPUS_ON_NODE="4")


def test_sbatch_hands_torchrun_the_allocation(tmp_path):
    env = stand_ins(tmp_path)
    p = subprocess.run(["bash", str(SBATCH), "/shared/collab.shards", "/shared/ck", "--epochs", "3"], env=env,
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "srun").read_text().split() == ["--kill-on-bad-exit=0"], "a lost node must not end the others' step"
    argv = json.loads((tmp_path / "torchrun").read_text())
    flags = dict(zip(argv[:argv.index("examples/train_gin.py")][::2], argv[1:argv.index("examples/train_gin.py")][::2]))
    assert flags == {"--nnodes": "1:2", "--nproc-per-node": "4", "--max-restarts": "3", "--rdzv-backend": "c10d",
                     "--rdzv-endpoint": "gpu07:29400", "--rdzv-id": "slurm-4242"}, flags
    assert argv[argv.index("examples/train_gin.py"):] == [
        "examples/train_gin.py", "train", "--shards", "/shared/collab.shards", "--checkpoint", "/shared/ck", "--resume",
        "--epochs", "3"]
    assert (ROOT / argv[argv.index("examples/train_gin.py")]).exists()
    assert (tmp_path / "share").read_text() == "1", "a restarted group would read the last one's addresses"


def test_sbatch_large_allocation(tmp_path):
    """5,000 hosts: the script reads scontrol's whole answer (a `head -n 1`
    closed the pipe early, and the SIGPIPE failed the script under
    pipefail, exit 141: seen once in CI with 2 hosts)."""
    env = dict(stand_ins(tmp_path), SLURM_JOB_NODELIST="gpu[0001-5000]", SLURM_JOB_NUM_NODES="5000")
    for _ in range(3):
        p = subprocess.run(["bash", str(SBATCH), "/s", "/ck"], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert p.returncode == 0, (p.returncode, p.stderr)
        argv = json.loads((tmp_path / "torchrun").read_text())
        assert argv[argv.index("--rdzv-endpoint") + 1] == "gpu0001:29400" and argv[argv.index("--nnodes") + 1] == "1:5000"


def test_sbatch_without_arguments_says_how(tmp_path):
    p = subprocess.run(["bash", str(SBATCH)], env=stand_ins(tmp_path), capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode != 0 and "usage: sbatch deploy/slurm/train_gin.sbatch SHARDS CHECKPOINT" in p.stderr
    assert not (tmp_path / "torchrun").exists()


def manifests():
    yaml = pytest.importorskip("yaml")
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def test_kubernetes_manifests_validate():
    kv = pytest.importorskip("kubernetes_validate") if not os.environ.get("CI") else __import__("kubernetes_validate")
    docs = manifests()
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    for d in docs:
        kv.validate(d, "1.33.0", strict=True)  # raises on a field the schema lacks or a wrong type
    with pytest.raises(kv.ValidationError):  # the check can fail: a misspelt field
        bad = json.loads(json.dumps(docs[1]))
        bad["spec"]["template"]["spec"]["initContainers"][0]["restartPolicyy"] = "Always"
        kv.validate(bad, "1.33.0", strict=True)


def test_kubernetes_sidecar_and_probes():
    job = manifests()[1]
    pod = job["spec"]["template"]["spec"]
    side, = pod["initContainers"]
    assert side["restartPolicy"] == "Always", "a native sidecar: started before the trainer, stopped after it"
    port = side["ports"][0]["name"]
    assert side["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
    assert side["livenessProbe"]["httpGet"] == {"path": "/livez", "port": port}
    args = side["args"]
    assert args[0] == "serve" and args[args.index("--metrics") + 1].endswith(":9090")
    sock = args[args.index("--socket") + 1]
    trainer, = pod["containers"]
    assert f"unix://{sock}" in trainer["command"], "the trainer reads the sidecar's socket"
    shared = {m["name"] for m in side["volumeMounts"]} & {m["name"] for m in trainer["volumeMounts"]}
    assert shared == {"socket"}
    assert job["spec"]["completions"] == int(trainer["command"][trainer["command"].index("--nnodes") + 1])
    assert {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"} in trainer["env"]


def test_kubernetes_sidecar_args_run(bins, make_synth_shards, tmp_path):
    """The sidecar's own arguments, run: its volumes' paths replaced by this
    test's (the shards a synthetic set), the metrics port by a free one;
    the kubelet's probes answer on a non-loopback bind, /readyz 200 once
    the readiness line is out, and SIGTERM stops it."""
    import signal
    import socket
    import urllib.request
    side = manifests()[1]["spec"]["template"]["spec"]["initContainers"][0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shards = make_synth_shards(40, 3)
    args = [a.replace("/data/collab.shards", str(shards)).replace("/run/augloader", str(tmp_path))
            .replace("0.0.0.0:9090", f"0.0.0.0:{port}") for a in side["args"]]
    p = subprocess.Popen([str(bins / "augloader"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(p.stdout.readline())
        assert ready["ready"] is True, ready
        probe = side["readinessProbe"]["httpGet"]["path"], side["livenessProbe"]["httpGet"]["path"]
        for path in probe:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                assert r.status == 200, (path, r.status)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0, p.stderr.read()[-2000:]
