"""3D atomistic structures (#67) through the models users train: MACE's
own model (mace-torch, randomly initialised, float64) gives the same
energies and forces on our batches as on MACE's own loader's, and under a
rotation the energies stay and the forces turn; budget batches balanced
across ranks, resumed at any world size (the resume model and a real
torchrun of examples/train_mace.py killed mid-epoch).

Needs ase, matscipy, vesin and mace-torch (.venv-torch2, make test)."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import structures  # noqa: E402

if os.environ.get("AUGLOADER_TORCH2") == "1":
    import ase, matscipy, vesin, mace  # noqa: E401,F401  make test-torch2's venv holds them: missing is a failure
ase = pytest.importorskip("ase", reason="ase is not installed: make test runs this in .venv-torch2")
from ase.io import read, write  # noqa: E402

import augloader  # noqa: E402
from augloader.structures import to_mace  # noqa: E402
from structures import CUTOFF, convert, converted, serve, structure_digests  # noqa: E402,F401  converted: a fixture


# --- MACE's own model as the oracle of our batches -------------------------

@pytest.fixture(scope="module")
def mace_setup(bins, tmp_path_factory):
    """The labelled part of the test set with MACE-style keys (REF_energy,
    REF_forces, REF_stress), converted with --energy-key and the like; a
    small MACE, randomly initialised with a fixed seed, float64."""
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # e3nn 0.4.4's constants under torch >= 2.6
    torch = pytest.importorskip("torch")
    pytest.importorskip("mace", reason="mace-torch is not installed: make test runs this in .venv-torch2")
    from e3nn import o3
    from mace import modules
    torch.set_default_dtype(torch.float64)
    d = tmp_path_factory.mktemp("mace")
    atoms = [a for a in structures.everything() if a.calc is not None]
    for a in atoms:
        r = a.calc.results
        a.info["REF_energy"] = r["energy"]
        a.arrays["REF_forces"] = r["forces"]
        if "stress" in r:
            a.info["REF_stress"] = r["stress"]
        a.calc = None
    path = d / "set.xyz"
    write(str(path), atoms)
    out = d / "set.shards"
    p = convert(bins, path, out, "--energy-key", "REF_energy", "--forces-key", "REF_forces", "--stress-key", "REF_stress")
    assert p.returncode == 0, p.stderr
    zs = sorted({int(z) for a in atoms for z in a.numbers})
    torch.manual_seed(0)
    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    model = modules.MACE(r_max=CUTOFF, num_bessel=8, num_polynomial_cutoff=5, max_ell=2, interaction_cls=block,
                         interaction_cls_first=block, num_interactions=2, num_elements=len(zs),
                         hidden_irreps=o3.Irreps("8x0e+8x1o"), MLP_irreps=o3.Irreps("8x0e"),
                         atomic_energies=np.zeros(len(zs)), avg_num_neighbors=8.0, atomic_numbers=zs, correlation=2,
                         gate=torch.nn.functional.silu)
    return path, out, zs, model


def mace_reference(path, zs):
    """MACE's own loader: ase.io.read, config_from_atoms with the REF_ keys,
    AtomicData.from_config (matscipy's neighbour list) and its DataLoader."""
    from mace import data, tools
    from mace.tools import torch_geometric
    ks = data.KeySpecification(info_keys={"energy": "REF_energy", "stress": "REF_stress"},
                               arrays_keys={"forces": "REF_forces"})
    configs = [data.config_from_atoms(a, key_specification=ks) for a in read(str(path), ":")]
    table = tools.AtomicNumberTable(zs)
    ds = [data.AtomicData.from_config(c, z_table=table, cutoff=CUTOFF) for c in configs]
    return next(iter(torch_geometric.dataloader.DataLoader(ds, batch_size=len(ds), shuffle=False)))


def per_structure(model, d, graph_ids, ptr):
    """The model's energy and forces on batch dict d, by structure id."""
    out = model(d, training=False, compute_force=True)
    E, F = {}, {}
    for k, gid in enumerate(graph_ids):
        E[int(gid)] = float(out["energy"][k].detach())
        F[int(gid)] = out["forces"][int(ptr[k]):int(ptr[k + 1])].detach().numpy()
    return E, F


def test_mace_same_energies_and_forces(bins, mace_setup, tmp_path):
    """MACE's model gives the same energies and forces (float64, within
    1e-10) on our batches as on batches from MACE's own loader for the same
    structures; our batch carries every field MACE's does, equal where MACE
    computes it from the structure."""
    path, shards, zs, model = mace_setup
    ref = mace_reference(path, zs)
    E0, F0 = per_structure(model, ref.to_dict(), range(ref.num_graphs), ref.ptr)
    p = serve(bins, shards, tmp_path / "s.sock")
    try:
        E, F = {}, {}
        for b in augloader.connect(f"unix://{tmp_path}/s.sock").epoch(0):
            d = to_mace(b, zs)
            assert set(ref.to_dict()) <= set(d) | {"num_graphs"}
            e, f = per_structure(model, d, b.graph_id, b.ptr)
            E.update(e)
            F.update(f)
    finally:
        p.terminate()
        p.wait()
    assert sorted(E) == list(range(ref.num_graphs))
    for i in range(ref.num_graphs):
        assert abs(E[i] - E0[i]) < 1e-10, (i, E[i], E0[i])
        assert np.abs(F[i] - F0[i]).max(initial=0) < 1e-10, i
    # The fields MACE derives from a structure, structure by structure.
    refd = ref.to_dict()
    p = serve(bins, shards, tmp_path / "t.sock")
    try:
        b = next(iter(augloader.connect(f"unix://{tmp_path}/t.sock").epoch(0)))
    finally:
        p.terminate()
        p.wait()
    d = {k: v.detach() if hasattr(v, "detach") else v for k, v in to_mace(b, zs).items()}
    refd = {k: v.detach() if hasattr(v, "detach") else v for k, v in refd.items()}
    for k, gid in enumerate(b.graph_id):
        gid = int(gid)
        a0, a1 = int(ref.ptr[gid]), int(ref.ptr[gid + 1])
        b0, b1 = int(b.ptr[k]), int(b.ptr[k + 1])
        for key in ("positions", "node_attrs", "forces", "charges"):
            assert np.array_equal(d[key][b0:b1].numpy(), refd[key][a0:a1].numpy()), key
        for key in ("energy", "weight", "energy_weight", "forces_weight", "stress_weight", "total_spin", "volume"):
            assert float(d[key][k]) == float(refd[key][gid]), key
        for key in ("cell", "rcell"):
            assert np.array_equal(d[key][3 * k:3 * k + 3].numpy(), refd[key][3 * gid:3 * gid + 3].numpy()), key
        assert np.array_equal(d["stress"][k].numpy(), refd["stress"][gid].numpy())
        # The edges as a set, their shifts with them.
        mine = {(int(i) - b0, int(j) - b0, tuple(s)) for i, j, s in
                zip(d["edge_index"][0], d["edge_index"][1], d["shifts"].numpy().round(12).tolist())
                if b0 <= int(i) < b1}
        theirs = {(int(i) - a0, int(j) - a0, tuple(s)) for i, j, s in
                  zip(refd["edge_index"][0], refd["edge_index"][1], refd["shifts"].numpy().round(12).tolist())
                  if a0 <= int(i) < a1}
        assert mine == theirs


def rotation_between(p, q):
    """R with q = p Rᵀ (least squares; exact for a rotated structure)."""
    R, *_ = np.linalg.lstsq(p, q, rcond=None)
    return R.T


def test_mace_rotation_invariant_and_equivariant(bins, mace_setup, tmp_path):
    """Under --rotate each epoch's structures turn by their own uniform
    rotation: MACE's energies stay (1e-10), its forces turn with the
    structure, and so do the served force and stress labels; the edges and
    shifts' integer part stay; a second epoch turns them otherwise."""
    path, shards, zs, model = mace_setup
    ref = mace_reference(path, zs)
    E0, F0 = per_structure(model, ref.to_dict(), range(ref.num_graphs), ref.ptr)
    refd = {k: v.detach() if hasattr(v, "detach") else v for k, v in ref.to_dict().items()}
    p = serve(bins, shards, tmp_path / "s.sock", "--rotate")
    try:
        c = augloader.connect(f"unix://{tmp_path}/s.sock")
        seen = 0
        first = {}
        for epoch in (0, 1):
            for b in c.epoch(epoch):
                d = to_mace(b, zs)
                E, F = per_structure(model, d, b.graph_id, b.ptr)
                for k, gid in enumerate(b.graph_id):
                    gid = int(gid)
                    b0, b1 = int(b.ptr[k]), int(b.ptr[k + 1])
                    a0, a1 = int(ref.ptr[gid]), int(ref.ptr[gid + 1])
                    assert abs(E[gid] - E0[gid]) < 1e-10, gid
                    pos0, pos = refd["positions"][a0:a1].numpy(), b.positions[b0:b1]
                    if b1 - b0 >= 3 and np.linalg.matrix_rank(pos0 - pos0.mean(0)) == 3:
                        R = rotation_between(pos0, pos)
                        assert np.allclose(R @ R.T, np.eye(3), atol=1e-9) and np.linalg.det(R) > 0
                        assert np.allclose(F[gid], F0[gid] @ R.T, atol=1e-10)
                        assert np.allclose(b.props["forces"][b0:b1], refd["forces"][a0:a1].numpy() @ R.T, atol=1e-10)
                        if b.present["stress"][k]:
                            s0 = refd["stress"][gid].numpy()
                            assert np.allclose(b.props["stress"][k].reshape(3, 3), R @ s0 @ R.T, atol=1e-10)
                        if epoch == 0:
                            first[gid] = R
                        else:
                            assert not np.allclose(first[gid], R), "the same rotation in two epochs"
                        seen += 1
        assert seen > 100
    finally:
        p.terminate()
        p.wait()


# --- Budget batches balanced across ranks, resumed at any world ----------

@pytest.fixture(scope="module")
def balanced_daemon(bins, converted, tmp_path_factory):
    folder, atoms = converted
    d = tmp_path_factory.mktemp("bal")
    p = serve(bins, folder, d / "s.sock", "--max-atoms", "60", "--rotate", "--seed", "5")
    yield f"unix://{d}/s.sock", len(atoms)
    p.terminate()
    p.wait()


def test_balanced_budget_batches(balanced_daemon):
    """--max-atoms: every rank of a world gets as many batches, each under
    the budget (a structure larger alone is alone), a step's batches within
    its largest structure's atoms of each other; the spread measured."""
    url, n = balanced_daemon
    for world in (1, 2, 3, 5):
        per_rank = [list(augloader.connect(url).epoch(0, rank=r, world=world)) for r in range(world)]
        assert len({len(bs) for bs in per_rank}) == 1, [len(bs) for bs in per_rank]
        seen = []
        worst = 0.0
        for s in range(len(per_rank[0])):
            atoms = [int(bs[s].num_atoms.sum()) for bs in per_rank]
            largest = max(int(bs[s].num_atoms.max()) for bs in per_rank)
            for bs in per_rank:
                b = bs[s]
                assert b.num_graphs == 1 or int(b.num_atoms.sum()) <= 60
                seen += [int(g) for g, p in zip(b.graph_id, b.padded) if not p]
            if s < len(per_rank[0]) - 1:
                assert max(atoms) - min(atoms) <= largest, (world, s, atoms)
                worst = max(worst, (max(atoms) - min(atoms)) / 60)
        assert sorted(seen) == list(range(n))
        print(f"RESULT kind=balanced world={world} steps={len(per_rank[0])} worst_spread={worst:.3f}")


def test_balanced_resume_model(balanced_daemon, monkeypatch):
    """The resume model on balanced budget batches of structures: chains of
    world sizes (1 to 4), each rank stopped at its own batch, the state
    gathered as under torch.distributed or saved apart and merged; every
    structure of the epoch is received exactly once, in the bytes of the
    uninterrupted one-rank epoch (rotations keyed by structure, not by
    rank or batch)."""
    import random
    torch = pytest.importorskip("torch")
    from augloader.torch import AugloaderDataset, merge_states
    from test_resume_model import counted, gathered_states
    url, n = balanced_daemon
    one = {g: d for b in augloader.connect(url).epoch(0) for g, _, d in structure_digests(b)}
    assert sorted(one) == list(range(n))

    def take(ds, k, got):
        it = iter(ds)
        try:
            while k is None or k > 0:
                try:
                    b = next(it)
                except StopIteration:
                    break
                got += structure_digests(b)
                k = None if k is None else k - 1
        finally:
            it.close()

    for trial in range(25):
        rng = random.Random(700 + trial)
        got, state, log = [], None, []
        for _ in range(rng.randint(1, 3)):
            world = rng.randint(1, 4)
            dss = [AugloaderDataset(url, rank=r, world=world, layout="structures") for r in range(world)]
            for ds in dss:
                if state is not None:
                    ds.load_state_dict(state)
            stops = [rng.choice([0, 1, rng.randint(0, 12), None]) for _ in dss]
            for ds, k in zip(dss, stops):
                take(ds, k, got)
            state = gathered_states(monkeypatch, dss) if world > 1 and rng.random() < 0.5 else \
                merge_states([ds.state_dict() for ds in dss]) if world > 1 else dss[0].state_dict()
            log.append(f"world {world} stops {stops}")
            assert counted(state) == len(got), log
        world = rng.randint(1, 4)
        for r in range(world):
            ds = AugloaderDataset(url, rank=r, world=world, layout="structures")
            ds.load_state_dict(state)
            take(ds, None, got)
        real = [(g, d) for g, padded, d in got if not padded]
        ids = sorted(g for g, _ in real)
        assert ids == list(range(n)), (trial, log, world)
        assert all(d == one[g] for g, d in real), (trial, log)


def test_torchrun_mace_killed_and_resumed(bins, tmp_path):
    """A real torchrun of examples/train_mace.py (MACE under
    DistributedDataParallel on balanced, rotated batches of structures):
    one of its 2 workers SIGKILLed mid-epoch, torchrun restarts the group,
    which resumes from the last checkpoint; then the job is resumed at
    world 1 for one more epoch. Every structure of every epoch is trained
    exactly once over the steps the checkpoints chain together, each in the
    bytes a one-rank read gets."""
    import signal
    torch = pytest.importorskip("torch")
    if int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("torchrun of torch 1.13 fails on Python 3.11; make test runs this in .venv-torch2")
    pytest.importorskip("mace")
    from elastic_job import check_exactly_once, children, torchrun_tool, wait_for_step
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "examples"))
    from train_mace import structure_digests
    src = tmp_path / "oc20"
    subprocess.run([str(bins / "shardconv"), "synth", "--like", "oc20", "--graphs", "36", "--seed", "2", "-o", str(src)],
                   check=True, capture_output=True)
    shards = tmp_path / "oc20.shards"
    assert convert(bins, src, shards).returncode == 0
    man = json.loads((shards / "manifest.json").read_text())
    daemon_args = ["--max-atoms", "320", "--rotate"]
    # The reference: every epoch read by one rank.
    ref = {}
    with augloader.Daemon(shards, binary=str(bins / "augloader"), args=daemon_args) as d:
        ds = augloader.torch.AugloaderDataset(d.url, layout="mace", z_table=man["structures"]["elements"], rank=0, world=1)
        for e in range(3):
            ds.set_epoch(e)
            for b in ds:
                ref.update(((e, g), h) for g, h, padded in structure_digests(b) if not padded)
    assert len(ref) == 3 * 36
    out = tmp_path / "run"
    env = dict(os.environ, PATH=f"{torchrun_tool(tmp_path)}:{bins}:{os.environ['PATH']}", TMPDIR=str(tmp_path),
               TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1", PYTHONPATH=str(pathlib.Path(augloader.__file__).parents[1]))
    train = [str(pathlib.Path(__file__).resolve().parents[3] / "examples" / "train_mace.py"), "--shards", str(shards),
             "--max-atoms", "320", "--rotate", "--hidden", "4", "--checkpoint", str(out / "ck"), "--checkpoint-every", "2",
             "--resume", "--batch-log", str(out / "log")]
    # The agent's output to a file: a pipe read only at the end fills
    # (64 KiB of warnings) and stops the job where it writes.
    agent_log = tmp_path / "agent.log"
    with open(agent_log, "w") as f:
        job = subprocess.Popen(["torchrun", "--standalone", "--nproc-per-node", "2", "--max-restarts", "1", *train,
                                "--epochs", "2"], env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
    try:
        try:
            wait_for_step(out, 5, timeout=240)
        except AssertionError:
            raise AssertionError(f"no step 5 within 240 s:\n{agent_log.read_text()[-12000:]}") from None
        workers = [p for p in children(job.pid) if "train_mace.py" in pathlib.Path(f"/proc/{p}/cmdline").read_text()]
        assert workers, "no worker to kill"
        os.kill(workers[-1], signal.SIGKILL)
        job.wait(timeout=400)
    finally:
        if job.poll() is None:
            job.kill()
    log = agent_log.read_text()
    assert job.returncode == 0, log[-3000:]
    assert "resumed from" in log, log[-3000:]
    again = subprocess.run(["torchrun", "--standalone", "--nproc-per-node", "1", *train, "--epochs", "3"], env=env,
                           capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    rows = check_exactly_once(out, ref)
    assert {r["world"] for r in rows} == {1, 2}
