"""GraphCL's augmentations (You et al., NeurIPS'20, section 3.1), written
clean-room the way a PyG user would from the paper's text: per graph, in a
Dataset's get, with torch_geometric.utils and NumPy. The peer of augloader's
twins in bench/python_twins.py. Written from the paper, not from its
authors' code (which builds a dense N×N adjacency per graph) or augloader's.

- node dropping: ⌊ratio·N⌋ nodes drawn uniformly without replacement are
  removed with their edges (the rest's induced subgraph, relabelled);
- subgraph: from a uniform random node, a connected set grown by drawing
  each new node uniformly from the frontier, until ⌊ratio·N⌋ nodes (or the
  component ends); its induced subgraph.
"""
from __future__ import annotations

import numpy as np
import torch


def _induced(data, keep):
    from torch_geometric.data import Data
    from torch_geometric.utils import subgraph

    keep = torch.as_tensor(np.sort(keep), dtype=torch.long)
    ei, _ = subgraph(keep, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    return Data(x=data.x[keep], edge_index=ei, y=data.y, num_nodes=len(keep))


def drop_nodes(data, ratio, rng):
    n = data.num_nodes
    drop = min(max(n - 1, 0), int(ratio * n))
    return _induced(data, rng.permutation(n)[drop:])


def subgraph(data, ratio, rng):
    n = data.num_nodes
    k = max(1, int(ratio * n))
    ei = data.edge_index.numpy()
    order = np.argsort(ei[0], kind="stable")
    nbr, off = ei[1][order], np.searchsorted(ei[0][order], np.arange(n + 1))
    seed = int(rng.integers(n))
    kept, frontier = {seed}, []
    seen = {seed}

    def grow(v):
        for w in nbr[off[v]:off[v + 1]].tolist():
            if w not in seen:
                seen.add(w)
                frontier.append(w)

    grow(seed)
    while len(kept) < k and frontier:
        i = int(rng.integers(len(frontier)))
        frontier[i], frontier[-1] = frontier[-1], frontier[i]
        v = frontier.pop()
        kept.add(v)
        grow(v)
    return _induced(data, np.fromiter(kept, dtype=np.int64))


class GraphCLPair:
    """A PyG-style dataset whose get returns the two views of a graph:
    node dropping (10%) and a subgraph (20% of the nodes)."""

    def __init__(self, data, seed=0, drop=0.1, keep=0.2):
        self.data, self.seed, self.drop, self.keep = data, seed, drop, keep
        self.rng = None

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        if self.rng is None:  # one generator a worker process
            info = torch.utils.data.get_worker_info()
            self.rng = np.random.default_rng([self.seed, info.id + 1 if info else 0])
        d = self.data[i]
        return drop_nodes(d, self.drop, self.rng), subgraph(d, self.keep, self.rng)
