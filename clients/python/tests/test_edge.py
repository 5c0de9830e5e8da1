"""The trainer's edge: every tensor a training step receives equals an
independent decode of the daemon's bytes for that batch (oracle.py:
pyarrow's stream reader and NumPy, no augloader code), on every path a
batch takes into a step: direct iteration, prefetch=2, Prefetcher, a
DataLoader with 0, 2 and 3 workers (persistent or not, two epochs), the
pooled client of two daemons, twins, layouts pyg and codes, dicts and
PyG Batches, every field (dtype, shape, elements; a field the oracle does
not know fails) on every kind of set (one-hot codes, molecules with
categorical x and edge_attr and NaN targets and their twins, float edge
features without node features, float node attributes with edge labels);
under torch 2.x also torchdata's StatefulDataLoader and the
Lightning datamodule. The consumer acts as a training step does: it
checks each batch on arrival, keeps every third for a while (checked
again at the end) and drops the rest at once, so a buffer handed out again
while another process still reads it (issue #44, item 1) shows as a
difference. Runs under .venv (torch 1.13) and .venv-torch2 (make test)."""
import importlib.util
import json
import os

import pytest

from conftest import need_torch
from oracle import check, reference

torch = need_torch()
import augloader  # noqa: E402
from augloader.torch import AugloaderDataset, PyGBatch, Prefetcher  # noqa: E402

EPOCHS = 2
TWINS = ["dropnode:ratio=0.2 / subgraph:ratio=0.3", "dropedge:ratio=0.2 / attrmask:ratio=0.3"]
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# The torch 2.x tools (Lightning, torchdata's StatefulDataLoader): their
# tests run where the venv holds them, and must under make test-torch2
# (test_venv.py checks that the two agree).
TORCH2_TOOLS = TORCH2 and all(importlib.util.find_spec(m) is not None for m in ("lightning", "torchdata"))
if os.environ.get("AUGLOADER_TORCH2") == "1" and not TORCH2_TOOLS:
    raise ImportError("make test-torch2's venv lacks torch 2.x, Lightning or torchdata")
NO_TOOLS = "needs torch 2.x, Lightning and torchdata (make test runs this in .venv-torch2)"


@pytest.fixture(scope="module")
def served(bins, make_synth_shards):
    """Two daemons of one configuration (the pooled client reads both):
    NodeSam and SubMix (mixed labels), degree one-hot features (the dense x
    built from codes), 19 batches an epoch with a padded last one."""
    shards = make_synth_shards(150, 9)
    ds = [augloader.Daemon(shards, binary=str(bins / "augloader"), policy="nodesam:0.5,submix:p=0.4:0.5", seed=3,
                           batch_size=8, workers=2, twins=TWINS) for _ in range(2)]
    for d in ds:
        d.start()
    yield ds
    for d in ds:
        d.stop()


_refs: dict = {}


def ref(d, epoch, **req):
    """The oracle's batches of one request (cached per test session)."""
    k = (d.socket, epoch, json.dumps(req, sort_keys=True))
    if k not in _refs:
        _refs[k] = reference(d.socket, epoch=epoch, **req)
    return _refs[k]


def consume(batches, want, layout="pyg", keep_every=3):
    """Checks every batch on arrival against want[batch_index] (in order
    when a path gives no index), keeps every keep_every-th and drops the
    rest at once, then checks the kept ones again; every batch once."""
    kept, seen = [], []
    for i, b in enumerate(batches):
        items = b if isinstance(b, (tuple, list)) else (b,)  # DataLoader makes a twin tuple a list
        first = items[0]
        idx = first.get("batch_index", i) if isinstance(first, dict) else getattr(first, "batch_index", i)
        w = want[idx]
        ws = w if isinstance(w, list) else [w]
        assert len(items) == len(ws), f"batch {idx}: {len(items)} twins, want {len(ws)}"
        for t, (g, x) in enumerate(zip(items, ws)):
            check(g, x, f"batch {idx} twin {t} on arrival", layout)
        seen.append(idx)
        if i % keep_every == 0:
            kept.append((idx, items, ws))
        del b, items, first
    for idx, items, ws in kept:
        for t, (g, x) in enumerate(zip(items, ws)):
            check(g, x, f"batch {idx} twin {t}, kept", layout)
    assert seen == list(range(len(want))), f"batches {seen}, want 0..{len(want) - 1} once each, in order"


def pyg_choices():
    return [False, True] if PyGBatch is not None else [False]


@pytest.mark.parametrize("layout", ["pyg", "codes"])
@pytest.mark.parametrize("pyg", pyg_choices())
@pytest.mark.parametrize("prefetch", [0, 2])
def test_direct(served, layout, pyg, prefetch):
    ds = AugloaderDataset(served[0].url, layout=layout, pyg=pyg, prefetch=prefetch)
    for e in range(EPOCHS):
        ds.set_epoch(e)
        consume(ds, ref(served[0], e), layout)


@pytest.mark.parametrize("layout", ["pyg", "codes"])
def test_prefetcher(served, layout):
    client = augloader.connect(served[0].url)
    consume(Prefetcher(client.epoch(1), layout=layout, depth=3), ref(served[0], 1), layout)


@pytest.mark.parametrize("workers,persistent", [(0, False), (2, False), (2, True), (3, True)])
@pytest.mark.parametrize("pyg", pyg_choices())
def test_dataloader(served, workers, persistent, pyg):
    ds = AugloaderDataset(served[0].url, pyg=pyg)
    kw = dict(num_workers=workers, persistent_workers=persistent) if workers else {}
    dl = torch.utils.data.DataLoader(ds, batch_size=None, **kw)
    for e in range(EPOCHS):
        ds.set_epoch(e)
        consume(dl, ref(served[0], e))


def test_pooled(served):
    """Two daemons of one configuration read as one (docs/deploy.md), in a
    DataLoader with 2 workers too."""
    urls = [d.url for d in served]
    ds = AugloaderDataset(urls, pyg=False)
    consume(ds, ref(served[0], 0))
    ds.set_epoch(1)
    consume(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2), ref(served[0], 1))
    tw = AugloaderDataset(urls, pyg=False, twins=2)
    consume(tw, ref(served[0], 0, twins=2))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("layout", ["pyg", "codes"])
def test_twins(served, workers, layout):
    ds = AugloaderDataset(served[0].url, pyg=False, layout=layout, twins=2, twin_weights=[1, 3])
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers) if workers else ds
    for e in range(EPOCHS):
        ds.set_epoch(e)
        consume(dl, ref(served[0], e, twins=2, twin_weights=[1.0, 3.0]), layout)


@pytest.mark.parametrize("path", ["direct", "prefetch", "workers", "persistent"])
def test_epochs_move_on_without_set_epoch(served, path):
    """A new iteration with no set_epoch since the last is the next epoch,
    exactly its batches, on every path (3520536 served epoch 0 again,
    byte for byte); one stopped early counts; set_epoch pins one."""
    ds = AugloaderDataset(served[0].url, pyg=False, prefetch=2 if path == "prefetch" else 0)
    it = ds
    if path in ("workers", "persistent"):
        it = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=path == "persistent")
    for e in range(3):
        consume(it, ref(served[0], e))
    for t in it:  # epoch 3, stopped after one batch
        break
    del t
    consume(it, ref(served[0], 4))
    ds.set_epoch(1)
    consume(it, ref(served[0], 1))
    consume(it, ref(served[0], 2))


def test_a_loaded_state_pins_its_epoch(served):
    """A loaded state pins its epoch: a plain loop without set_epoch reads
    its rest (empty for a state from the epoch's end), then the next
    epochs whole; one saved mid-epoch resumes that epoch's rest."""
    ds = AugloaderDataset(served[0].url, pyg=False)
    consume(ds, ref(served[0], 0))
    st = ds.state_dict()
    again = AugloaderDataset(served[0].url, pyg=False)
    again.load_state_dict(st)
    assert list(again) == []
    consume(again, ref(served[0], 1))
    it = iter(again)  # epoch 2, two batches in
    next(it), next(it)
    mid = again.state_dict()
    it.close()
    third = AugloaderDataset(served[0].url, pyg=False)
    third.load_state_dict(mid)
    want = ref(served[0], 2)
    got = list(third)
    assert [t["batch_index"] for t in got] == list(range(2, len(want)))
    for t in got:
        check(t, want[t["batch_index"]], f"epoch 2 batch {t['batch_index']} after a resume")
    consume(third, ref(served[0], 3))


def fit_checked(served, tmp_path, epochs, **fit) -> dict:
    """A real Lightning fit of epochs whose training_step checks every
    batch against the oracle; returns the batch indices trained, by epoch."""
    import lightning.pytorch as pl

    got = {}

    class Step(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, i):
            e = self.current_epoch
            got.setdefault(e, []).append(batch["batch_index"])
            check(batch, ref(served[0], e)[batch["batch_index"]], f"epoch {e} batch {batch['batch_index']} in training_step")
            return self.w.sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path)
    trainer.fit(Step(), **fit)
    return got


@pytest.mark.skipif(not TORCH2_TOOLS, reason=NO_TOOLS)
def test_lightning_plain_dataloader_moves_on(served, tmp_path):
    """Lightning over a plain DataLoader of the dataset (no datamodule,
    so no sampler whose set_epoch Lightning calls): each epoch its own
    batches (3520536 trained epoch 0 three times)."""
    dl = torch.utils.data.DataLoader(AugloaderDataset(served[0].url, pyg=False), batch_size=None, num_workers=2,
                                     persistent_workers=True)
    got = fit_checked(served, tmp_path, 3, train_dataloaders=dl)
    assert got == {e: list(range(len(ref(served[0], e)))) for e in range(3)}


@pytest.mark.skipif(not TORCH2_TOOLS, reason=NO_TOOLS)
@pytest.mark.parametrize("workers", [0, 2, 3])
def test_stateful_dataloader(served, workers):
    from torchdata.stateful_dataloader import StatefulDataLoader

    ds = AugloaderDataset(served[0].url, pyg=False)
    kw = dict(num_workers=workers, persistent_workers=True) if workers else {}
    dl = StatefulDataLoader(ds, batch_size=None, **kw)
    for e in range(EPOCHS):
        ds.set_epoch(e)
        consume(dl, ref(served[0], e))


@pytest.mark.skipif(not TORCH2_TOOLS, reason=NO_TOOLS)
def test_lightning(served, tmp_path):
    """What Lightning's training_step receives, two epochs."""
    from augloader.lightning import AugloaderDataModule

    got = fit_checked(served, tmp_path, EPOCHS, datamodule=AugloaderDataModule(served[0].url, pyg=False))
    assert got == {e: list(range(len(ref(served[0], e)))) for e in range(EPOCHS)}


def write_tu_attributes(root, graphs: int, seed: int) -> None:
    """A TU folder with float node attributes, edge labels and 3 classes
    (PROTEINS_full's and MUTAG's parts at once), written here: the kind of
    set whose x is the float block beside categorical edge_attr."""
    import numpy as np
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    a, ind, el, attrs, labels = [], [], [], [], []
    base = 1
    for g in range(graphs):
        n = int(rng.integers(4, 10))
        pairs = {(i, (i + 1) % n) for i in range(n)} | {tuple(sorted(rng.choice(n, 2, replace=False))) for _ in range(n // 2)}
        for u, v in sorted({tuple(sorted(p)) for p in pairs}):
            lab = int(rng.integers(0, 4))
            a += [f"{base + u}, {base + v}", f"{base + v}, {base + u}"]
            el += [str(lab), str(lab)]
        ind += [str(g + 1)] * n
        attrs += [", ".join(f"{v:.4f}" for v in rng.normal(size=3)) for _ in range(n)]
        labels.append(str(int(rng.integers(1, 4))))
        base += n
    for name, lines in (("A", a), ("graph_indicator", ind), ("edge_labels", el), ("node_attributes", attrs),
                        ("graph_labels", labels)):
        (root / f"ATTR_{name}.txt").write_text("\n".join(lines) + "\n")


# Every kind of set a trainer receives, beside served's COLLAB (one-hot
# degree codes, class labels): OGB molecules (int64 categorical x and
# edge_attr, binary targets with NaN, SubMix's mixed targets, twins), an
# ogbg-ppa-shaped set (no node features, float edge_attr, classes) and a TU
# set with float node attributes and edge labels.
KINDS = {
    "molecules": ("ogbg-molpcba", 70, ["--twins", "dropnode:ratio=0.2 / attrmask:ratio=0.3"]),
    "ppa": ("ogbg-ppa", 24, []),
    "attributes": (None, 60, []),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def kind(request, bins, tmp_path_factory):
    import subprocess
    name = request.param
    like, graphs, extra = KINDS[name]
    d = tmp_path_factory.mktemp(f"kind-{name}")
    if like is None:
        write_tu_attributes(d / "in", graphs, 5)
    else:
        subprocess.run([bins / "shardconv", "synth", "--like", like, "--graphs", str(graphs), "--seed", "5", "--out", d / "in"],
                       check=True, capture_output=True)
    subprocess.run([bins / "shardconv", "convert", "-q", "-i", d / "in", "-o", d / "shards"], check=True)
    dm = augloader.Daemon(d / "shards", binary=str(bins / "augloader"), policy="nodesam:0.5,submix:p=0.4:0.5", seed=3,
                          batch_size=8, workers=2, args=extra)
    dm.start()
    yield name, dm
    dm.stop()


@pytest.mark.parametrize("layout", ["pyg", "codes"])
@pytest.mark.parametrize("pyg", pyg_choices())
@pytest.mark.parametrize("workers", [0, 2])
def test_every_kind(kind, layout, pyg, workers):
    """Every field of every layout, dict and PyG Batch, directly and through
    DataLoader workers, on each kind of set: the oracle knows every key a
    batch carries, and each value's dtype, shape and elements (NaN where a
    target is missing)."""
    name, d = kind
    ds = AugloaderDataset(d.url, layout=layout, pyg=pyg)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers) if workers else ds
    for e in range(EPOCHS):
        ds.set_epoch(e)
        consume(dl, ref(d, e), layout)
    if name == "molecules":  # twins of molecules
        tw = AugloaderDataset(d.url, layout=layout, pyg=pyg, twins=2)
        consume(torch.utils.data.DataLoader(tw, batch_size=None, num_workers=workers) if workers else tw,
                ref(d, 0, twins=2), layout)


def test_sizes_before_a_batch(kind):
    """A dataset knows its sizes before the loop (3520536 had none: a user
    read a first batch to size the model), as PyG's Dataset names them:
    each equal to what the batches then hold."""
    name, d = kind
    ds = AugloaderDataset(d.url, pyg=False)
    want = ref(d, 0)
    first = want[0]
    x = first.get("x_onehot", first.get("x"))
    edge = first.get("edge_attr")
    assert ds.num_graphs == KINDS[name][1]
    assert len(ds) == len(want) and len(torch.utils.data.DataLoader(ds, batch_size=None)) == len(want)
    assert ds.num_node_features == ds.num_features == x.shape[1]
    assert ds.num_edge_features == (0 if edge is None else edge.shape[1])
    if first["y"].ndim == 2:  # binary or regression targets
        assert ds.task in ("binary", "regression") and ds.num_classes == ds.num_targets == first["y"].shape[1]
    else:
        assert ds.task == "class" and ds.num_classes == first["num_classes"] and ds.num_targets == 0
    if "x_onehot" in first:
        assert ds.feature_dim == first["feature_dim"]
    ds.set_epoch(1)
    assert len(ds) == len(ref(d, 1))


def test_oracle_sees_a_wrong_x(served):
    """The oracle fails when x is not the daemon's (so a pass means
    something): one entry changed."""
    ds = AugloaderDataset(served[0].url, pyg=False)
    t = next(iter(ds))
    t["x"] = t["x"].clone()
    t["x"][0, 0] += 1
    with pytest.raises(AssertionError, match="x differs"):
        check(t, ref(served[0], 0)[0], "batch 0")


def test_oracle_sees_a_wrong_dtype_and_an_unknown_field(served):
    """The oracle fails on a field of another dtype (int32 edge_index,
    which equals the int64 one element by element) and on a field it does
    not know (a client that adds one must teach the oracle)."""
    ds = AugloaderDataset(served[0].url, pyg=False)
    want = ref(served[0], 0)[0]
    t = next(iter(ds))
    t["edge_index"] = t["edge_index"].int()
    with pytest.raises(AssertionError, match="edge_index differs"):
        check(t, want, "batch 0")
    t = next(iter(ds))
    t["new_field"] = 1
    with pytest.raises(AssertionError, match="fields"):
        check(t, want, "batch 0")


if os.environ.get("AUGLOADER_EDGE_SOAK"):  # a longer run: many epochs through 2 workers
    def test_soak(served):
        ds = AugloaderDataset(served[0].url, pyg=False)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
        for e in range(int(os.environ["AUGLOADER_EDGE_SOAK"])):
            ds.set_epoch(e)
            consume(dl, ref(served[0], e))
