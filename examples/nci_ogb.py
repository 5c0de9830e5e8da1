"""Real molecules as an OGB graph-property folder, without a download: the
NCI compounds the rdkit wheel ships (rdkit/Data/NCI/first_5K.smi, with
their TPSA in first_5k.tpsa.csv) through ogb.utils.smiles2graph (OGB's 9
atom and 3 bond features), written in the csv.gz layout every OGB
download has. Used by examples/gine_table.py and the tests
(clients/python/tests/test_ogb.py).
"""
from __future__ import annotations

import csv
import gzip
import pathlib
import sys

import numpy as np


def molecules(limit):
    """(graph dict of smiles2graph, TPSA) of the first NCI molecules that parse."""
    sys.modules.setdefault("outdated", None)  # import ogb would ask the network for a newer version
    from _needs import need
    need("nci_ogb.py", "rdkit", "ogb")
    from rdkit import RDConfig, RDLogger
    from ogb.utils import smiles2graph
    RDLogger.DisableLog("rdApp.*")
    nci = pathlib.Path(RDConfig.RDDataDir) / "NCI"
    tpsa = {}
    with open(nci / "first_5k.tpsa.csv") as f:
        for row in csv.reader(f):
            if row and not row[0].startswith("#") and len(row) >= 2:
                try:
                    tpsa[row[0]] = float(row[1])
                except ValueError:
                    pass
    out = []
    for line in open(nci / "first_5K.smi"):
        parts = line.split()
        if len(parts) < 2 or parts[0] not in tpsa:
            continue
        try:
            g = smiles2graph(parts[0])
        except Exception:
            continue
        if g["num_nodes"] == 0:
            continue
        out.append((g, tpsa[parts[0]]))
        if len(out) == limit:
            break
    return out


def gz_rows(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(",".join(r) + "\n")


def write_ogb_csv(root, mols, second_target=True):
    """The csv.gz layout: one row per bond (OGB adds the inverse); targets
    TPSA and, with second_target, atoms/10 missing on every third molecule;
    a split "scaffold" of 80/10/10 by a seeded permutation."""
    root = pathlib.Path(root)
    raw = root / "raw"
    edges, efeat, nfeat, labels = [], [], [], []
    for i, (g, tpsa) in enumerate(mols):
        ei = g["edge_index"]
        for k in range(ei.shape[1]):
            u, v = int(ei[0, k]), int(ei[1, k])
            if u < v:  # smiles2graph lists each bond both ways
                edges.append((str(u), str(v)))
                efeat.append([str(int(c)) for c in g["edge_feat"][k]])
        nfeat += [[str(int(c)) for c in row] for row in g["node_feat"]]
        row = [repr(tpsa)]
        if second_target:
            row.append("" if i % 3 == 0 else str(float(g["num_nodes"]) / 10))
        labels.append(row)
    gz_rows(raw / "edge.csv.gz", edges)
    gz_rows(raw / "edge-feat.csv.gz", efeat)
    gz_rows(raw / "node-feat.csv.gz", nfeat)
    gz_rows(raw / "num-node-list.csv.gz", [[str(g["num_nodes"])] for g, _ in mols])
    gz_rows(raw / "num-edge-list.csv.gz", [[str(g["edge_index"].shape[1] // 2)] for g, _ in mols])
    gz_rows(raw / "graph-label.csv.gz", labels)
    n = len(mols)
    ids = np.random.default_rng(0).permutation(n)
    for name, part in (("train", ids[: n * 8 // 10]), ("valid", ids[n * 8 // 10: n * 9 // 10]), ("test", ids[n * 9 // 10:])):
        gz_rows(root / "split" / "scaffold" / f"{name}.csv.gz", [[str(int(i))] for i in part])
    (root / "RELEASE_v1.txt").write_text("NCI molecules from the rdkit wheel\n")
