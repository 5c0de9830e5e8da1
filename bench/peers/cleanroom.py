"""A clean-room NodeSam and SubMix, written the way a PyG user would from
the paper (Park et al., WWW'22, Algorithms 1-6), one graph at a time in
plain NumPy: the peer make bench puts inside a PyG DataLoader to show what
augloader replaces. Written from the paper's text, not from its authors'
code or from augloader's.

A graph is (n, edges, x, y): n nodes, edges an int64 array [m, 2] of
undirected edges (u < v, each once), x float32 [n, d] node features, y the
class. Both functions draw from a numpy Generator.
"""
from __future__ import annotations

from collections import deque

import numpy as np


def _adjacency(n, edges):
    adj = [set() for _ in range(n)]
    for u, v in edges.tolist():
        adj[u].add(v)
        adj[v].add(u)
    return adj


def _edges_of(adj):
    return np.array(sorted((u, v) for u in range(len(adj)) for v in adj[u] if u < v), dtype=np.int64).reshape(-1, 2)


def nodesam(n, edges, x, rng):
    """NodeSam: split a random node (Alg. 2), adjust (Alg. 3), merge a
    random edge (Alg. 4). Returns (n, edges, x); n is unchanged."""
    if n == 0:
        return n, edges, x
    adj = _adjacency(n, edges)
    m = len(edges)
    # Split: v_i becomes v_j (id i) and v_k (id n), joined by an edge; each
    # neighbour of v_i goes to one of them by a fair coin.
    i = int(rng.integers(n))
    nbrs = sorted(adj[i])
    k = n
    adj.append(set())
    x = np.vstack([x, x[i:i + 1]])
    for u in nbrs:
        if rng.random() < 0.5:
            adj[i].discard(u)
            adj[u].discard(i)
            adj[k].add(u)
            adj[u].add(k)
    adj[i].add(k)
    adj[k].add(i)
    # Adjust: t_i triangles through v_i, T_i its neighbours in one; each
    # u in T_i joins, with probability min(1, h_i/|T_i|), the copy it is
    # not connected to.
    orig = _adjacency(n, edges)
    d = len(nbrs)
    T = [u for u in nbrs if orig[u] & orig[i]]
    t = sum(len(orig[u] & orig[i]) for u in nbrs) / 2
    if d > 0 and t > 0:
        c = m - 3 * t / d - 2
        h = (np.sqrt(c * c + 4 * t * n - 6 * t) - c) / 2
        prob = min(1.0, h / len(T))
        for u in T:
            if rng.random() < prob:
                w = k if i in adj[u] else i
                adj[u].add(w)
                adj[w].add(u)
    # Merge: a uniform random edge (v_o, v_p) becomes one node with the
    # mean feature and the union of the neighbourhoods.
    all_edges = [(u, v) for u in range(n + 1) for v in adj[u] if u < v]
    o, p = all_edges[int(rng.integers(len(all_edges)))]
    x[o] = (x[o] + x[p]) / 2
    for u in adj[p]:
        if u != o:
            adj[o].add(u)
            adj[u].add(o)
        adj[u].discard(p)
    adj[o].discard(p)
    adj[o].discard(o)
    # Node p leaves; the last node takes its id.
    last = n
    if p != last:
        for u in adj[last]:
            adj[u].discard(last)
            adj[u].add(p)
        adj[p] = adj[last]
        x[p] = x[last]
    adj.pop()
    x = x[:n]
    return n, _edges_of(adj), x


def _component(adj, r):
    seen, order, q = {r}, [r], deque([r])
    while q:
        u = q.popleft()
        for w in sorted(adj[u]):
            if w not in seen:
                seen.add(w)
                order.append(w)
                q.append(w)
    return order


def _ppr(adj, r, alpha=0.15, tol=1e-10, iters=500):
    """Personalized PageRank from r with D^-1/2 A D^-1/2, by power
    iteration on the dense matrix: x = α e_r + (1−α) T x."""
    n = len(adj)
    a = np.zeros((n, n))
    for u, nb in enumerate(adj):
        if nb:
            a[u, list(nb)] = 1
    deg = a.sum(axis=1)
    dinv = np.zeros(n)
    dinv[deg > 0] = 1 / np.sqrt(deg[deg > 0])
    t = dinv[:, None] * a * dinv[None, :]
    e = np.zeros(n)
    e[r] = 1
    xs = e.copy()
    for _ in range(iters):
        nxt = alpha * e + (1 - alpha) * (t @ xs)
        if np.abs(nxt - xs).sum() < tol:
            return nxt
        xs = nxt
    return xs


def _connected(adj, nodes):
    s = set(nodes)
    seen, q = {nodes[0]}, deque([nodes[0]])
    while q:
        u = q.popleft()
        for w in adj[u]:
            if w in s and w not in seen:
                seen.add(w)
                q.append(w)
    return len(seen) == len(s)


def _subgraph(adj, r, k):
    comp = _component(adj, r)
    if k == 1:
        return [r]
    score = _ppr(adj, r)
    ranked = [r] + sorted((u for u in comp if u != r), key=lambda u: (-score[u], u))
    s = ranked[:k]
    return s if _connected(adj, s) else comp[:k]


def submix(g, partner, classes, rng, p=0.4):
    """SubMix (Alg. 5-6): replace a PageRank-chosen subgraph of g by one
    of partner's. Returns (n, edges, x, y_soft, info) with info["e1"],
    info["e2"] (edges kept from g, edges brought from the partner), S, S'."""
    n, edges, x, y = g
    n2, edges2, x2, y2 = partner
    soft = np.zeros(classes, dtype=np.float32)
    soft[y] = 1
    if n == 0 or n2 == 0:
        return n, edges, x, soft, {"e1": len(edges), "e2": 0, "S": [], "S2": []}
    adj, adj2 = _adjacency(n, edges), _adjacency(n2, edges2)
    r, r2 = int(rng.integers(n)), int(rng.integers(n2))
    c1, c2 = len(_component(adj, r)), len(_component(adj2, r2))
    k = max(1, min(min(c1, c2), int(np.ceil(rng.random() * p * min(c1, c2)))))
    S, S2 = _subgraph(adj, r, k), _subgraph(adj2, r2, k)
    inS = set(S)
    e1 = [(u, v) for u, v in edges.tolist() if not (u in inS and v in inS)]
    pos2 = {v: i for i, v in enumerate(S2)}
    e2 = [tuple(sorted((S[pos2[u]], S[pos2[v]]))) for u, v in edges2.tolist() if u in pos2 and v in pos2]
    total = len(e1) + len(e2)
    if total == 0:  # no edge left: g unchanged, hard label
        return n, edges, x, soft, {"e1": len(edges), "e2": 0, "S": S, "S2": S2}
    out_edges = np.array(sorted(set(e1) | set(e2)), dtype=np.int64).reshape(-1, 2)
    out_x = x.copy()
    out_x[S] = x2[S2]
    q = len(e1) / total
    soft = np.zeros(classes, dtype=np.float32)
    soft[y] += q
    soft[y2] += 1 - q
    return n, out_edges, out_x, soft, {"e1": len(e1), "e2": len(e2), "S": S, "S2": S2}
