"""MosaicML Streaming, the peer of bench/mosaic.sh (issue 47).

Two steps, both run by bench/mosaic.sh:

  write  NPZ_FOLDER OUT [--compression zstd]
         the OGB npz folder that `shardconv synth --like ogbg-ppa` writes
         (raw/data.npz, raw/graph-label.npz), one MDS sample per graph, as
         a Streaming user would pack a PyG set: num_nodes, edge_index
         (int32, 2 x E), edge_attr (float32, E x 7), y.
  read   s3://BUCKET/PREFIX
         StreamingDataset from that remote through S3_ENDPOINT_URL (the
         bench's counting proxy before the same loopback server the
         daemon reads), shuffled, a fresh local cache under --cache-limit,
         a DataLoader with --workers. Epoch 0 warms, epoch 1 is timed, as
         bench/s3.sh times the daemon. Prints one RESULT line: the time
         from building the dataset to its first batch, epoch 1's seconds
         and graphs/s, and the GETs and body bytes the proxy forwarded
         during epoch 1 (--stats, its /_latencyproxy/stats URL).
         --shuffle-block-size is Streaming's knob for locality (py1e
         shuffles within blocks of that many samples); its default, a
         block larger than the set, draws every sample from any shard.
         --max-seconds reads epoch 0 only, cut after that long, and
         reports it (partial=1): a run that refetches shards without end
         (mosaicml/streaming#339) still gives its rate.

Every sample is touched (its arrays summed into a checksum) so that a lazy
decode cannot pass for a read.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

import numpy as np


def write(args):
    from streaming import MDSWriter

    data = np.load(os.path.join(args.npz, "raw", "data.npz"))
    labels = np.load(os.path.join(args.npz, "raw", "graph-label.npz"))["graph_label"]
    nodes = data["num_nodes_list"]
    edges = data["num_edges_list"]
    edge_index = data["edge_index"]
    edge_feat = data["edge_feat"]
    columns = {"num_nodes": "int", "edge_index": "ndarray:int32", "edge_attr": "ndarray:float32", "y": "int"}
    compression = None if args.compression == "none" else args.compression
    lo = 0
    with MDSWriter(out=args.out, columns=columns, compression=compression) as out:
        for i in range(len(nodes)):
            hi = lo + int(edges[i])
            out.write({
                "num_nodes": int(nodes[i]),
                "edge_index": np.ascontiguousarray(edge_index[:, lo:hi], dtype=np.int32),
                "edge_attr": np.ascontiguousarray(edge_feat[lo:hi]),
                "y": int(labels[i, 0]),
            })
            lo = hi
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    # Streaming refuses a cache_limit under four times its largest shard
    # (raw and compressed together): bench/s3.sh raises its limit to that.
    with open(os.path.join(args.out, "index.json")) as f:
        shards = json.load(f)["shards"]
    # What a shard takes in the local cache: its raw file, and its zip
    # when compressed (Streaming keeps both).
    local = [s["raw_data"]["bytes"] + ((s.get("zip_data") or {}).get("bytes") or 0) for s in shards]
    print(json.dumps({"graphs": int(len(nodes)), "bytes": size, "shards": len(shards), "local_bytes": sum(local),
                      "min_cache_limit": 4 * max(local), "compression": args.compression}))


def stats(url):
    with urllib.request.urlopen(url) as r:
        return json.load(r)


def read(args):
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    local = tempfile.mkdtemp(prefix="augloader-mosaic-")
    try:
        t0 = time.perf_counter()
        ds = StreamingDataset(remote=args.remote, local=local, shuffle=True, shuffle_seed=3,
                              batch_size=args.batch_size, cache_limit=args.cache_limit,
                              predownload=args.predownload, shuffle_block_size=args.shuffle_block_size)
        loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers,
                                             collate_fn=lambda b: b, persistent_workers=args.workers > 0)
        check = 0

        def touch(batch):
            nonlocal check
            for s in batch:
                check += int(s["edge_index"].sum()) + int(s["num_nodes"])

        def result(graphs, seconds, before, extra):
            after = stats(args.stats)
            print(f"RESULT kind=mosaic name={args.name} graphs={graphs} epoch_s={seconds:.3f} "
                  f"graphs_per_s={graphs / max(seconds, 1e-9):.0f} first_batch_s={first:.3f} "
                  f"gets={after['requests'] - before['requests']} bytes={after['bytes'] - before['bytes']} "
                  f"workers={args.workers} cache_limit={args.cache_limit} predownload={args.predownload} "
                  f"shuffle_block_size={args.shuffle_block_size or 'default'} {extra} check={check}", flush=True)

        graphs0 = 0
        first = None
        s_start = stats(args.stats)
        for batch in loader:
            if first is None:
                first = time.perf_counter() - t0
                t_first = time.perf_counter()
            touch(batch)
            graphs0 += len(batch)
            if args.max_seconds and time.perf_counter() - t_first > args.max_seconds:
                break
        if args.max_seconds:
            result(graphs0, time.perf_counter() - t_first, s_start, "partial=1")
            shutil.rmtree(local, ignore_errors=True)
            clean_stale_shared_memory()
            os._exit(0)  # the workers are mid-epoch: no orderly shutdown to wait for
        s0 = stats(args.stats)
        t1 = time.perf_counter()
        graphs1 = 0
        for batch in loader:
            touch(batch)
            graphs1 += len(batch)
        result(graphs1, time.perf_counter() - t1, s0, f"epoch0_graphs={graphs0}")
    finally:
        shutil.rmtree(local, ignore_errors=True)
        clean_stale_shared_memory()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="pack the npz folder as MDS shards")
    w.add_argument("npz")
    w.add_argument("out")
    w.add_argument("--compression", default="none", help="none or an MDS codec (zstd, ...)")
    r = sub.add_parser("read", help="time two epochs from the remote")
    r.add_argument("remote")
    r.add_argument("--name", default="mosaic")
    r.add_argument("--stats", required=True, help="the counting proxy's /_latencyproxy/stats URL")
    r.add_argument("--cache-limit", default="1gb", help="StreamingDataset cache_limit (below the set's size)")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--predownload", type=int, default=None)
    r.add_argument("--shuffle-block-size", type=int, default=None, help="py1e's block (default: Streaming's)")
    r.add_argument("--max-seconds", type=float, default=0, help="read epoch 0 only, cut after this long")
    args = p.parse_args()
    if args.cmd == "write":
        write(args)
    else:
        read(args)


if __name__ == "__main__":
    sys.exit(main())
