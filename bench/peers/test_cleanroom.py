"""The clean-room peer's per-graph outputs have the properties the paper
promises, as augloader's do (aug/property_test.go): NodeSam keeps the node
count and connectivity and leaves the edge count unchanged on average;
SubMix keeps the node count, builds Ē from E1 and the mapped E2, carries
the partner's features into S, and labels q = |E1| / |Ē|."""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import cleanroom  # noqa: E402


def random_graph(rng, n, p):
    e = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p]
    x = np.eye(4, dtype=np.float32)[rng.integers(4, size=n)]
    return n, np.array(e, dtype=np.int64).reshape(-1, 2), x, int(rng.integers(2))


def components(n, edges):
    adj = cleanroom._adjacency(n, edges)
    seen, c = set(), 0
    for r in range(n):
        if r not in seen:
            c += 1
            seen.update(cleanroom._component(adj, r))
    return c


def test_nodesam_properties():
    rng = np.random.default_rng(3)
    deltas = []
    for _ in range(300):
        n, e, x, _ = random_graph(rng, int(rng.integers(2, 30)), rng.random() * 0.5)
        n2, e2, x2 = cleanroom.nodesam(n, e, x, rng)
        assert n2 == n and x2.shape == x.shape
        assert components(n2, e2) == components(n, e)
        assert np.all(e2[:, 0] < e2[:, 1]) and len({tuple(r) for r in e2}) == len(e2)
        np.testing.assert_allclose(x2.sum(1), 1, rtol=1e-6)
        deltas.append(len(e2) - len(e))
    assert abs(np.mean(deltas)) < 3 * np.std(deltas) / np.sqrt(len(deltas)) + 0.5


def test_submix_properties():
    rng = np.random.default_rng(4)
    for _ in range(200):
        g = random_graph(rng, int(rng.integers(1, 25)), rng.random() * 0.6)
        h = random_graph(rng, int(rng.integers(1, 25)), rng.random() * 0.6)
        n, e, x, soft, info = cleanroom.submix(g, h, 2, rng)
        assert n == g[0]
        np.testing.assert_allclose(soft.sum(), 1, rtol=1e-6)
        if info["e1"] + info["e2"] == 0:
            continue
        q = info["e1"] / (info["e1"] + info["e2"])
        assert abs(soft[g[3]] - (q if g[3] != h[3] else 1)) < 1e-6
        assert len(info["S"]) == len(info["S2"])
        np.testing.assert_array_equal(x[info["S"]], h[2][info["S2"]])
        kept = {tuple(r) for r in g[1] if not (r[0] in info["S"] and r[1] in info["S"])}
        assert kept <= {tuple(r) for r in e}
