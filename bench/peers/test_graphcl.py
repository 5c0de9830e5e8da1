"""The clean-room GraphCL peer (graphcl.py) makes the views the paper
defines, as augloader's ops do (aug/graphcl_test.go): node dropping keeps
N − ⌊0.1·N⌋ nodes and their induced edges; the subgraph view is connected,
keeps ⌊0.2·N⌋ nodes (or a whole component), and is induced. Skipped
without torch and PyG."""
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
sys.path.insert(0, str(pathlib.Path(__file__).parent))
import graphcl  # noqa: E402
from test_cleanroom import components, random_graph  # noqa: E402


def as_data(n, edges, x):
    from torch_geometric.data import Data
    e = torch.from_numpy(np.concatenate([edges.T, edges.T[::-1]], axis=1).astype(np.int64))
    # x's first column names the input node, so the test can trace it.
    return Data(x=torch.from_numpy(np.c_[np.arange(n, dtype=np.float32), x]), edge_index=e, num_nodes=n)


def undirected(d):
    ei = d.edge_index.numpy()
    keep = ei[0] < ei[1]
    return ei[:, keep].T


def test_views():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(2, 40))
        n, edges, x, _ = random_graph(rng, n, float(rng.uniform(0.05, 0.4)))
        d = as_data(n, edges, x)
        inputs = {tuple(e) for e in edges.tolist()}
        drop = graphcl.drop_nodes(d, 0.1, rng)
        sub = graphcl.subgraph(d, 0.2, rng)
        assert drop.num_nodes == n - min(n - 1, int(0.1 * n))
        assert sub.num_nodes <= max(1, int(0.2 * n))
        for v in (drop, sub):
            ids = v.x[:, 0].long().tolist()
            assert ids == sorted(ids)
            kept = set(ids)
            want = {(u, w) for u, w in inputs if u in kept and w in kept}
            got = {(ids[a], ids[b]) for a, b in undirected(v).tolist()}
            assert got == want, "not the kept nodes' induced subgraph"
        assert sub.num_nodes == 0 or components(sub.num_nodes, undirected(sub)) == 1
