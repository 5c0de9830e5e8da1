"""One rank of test_resume_torch2's elastic test (not a test itself): reads
its share of an epoch through AugloaderDataset under torch.distributed
(gloo), optionally after loading the loader's state with
torch.distributed.checkpoint, stops after --steps batches (+ --skew × rank:
ranks need not stop together) and saves the state the same way, and writes
every batch it received as a JSON line: graph ids, padded flags, digest."""
import argparse
import json
import os

import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from augloader.torch import AugloaderDataset

ap = argparse.ArgumentParser()
ap.add_argument("--url", required=True)
ap.add_argument("--init", required=True, help="file:// rendezvous path")
ap.add_argument("--load", help="checkpoint folder to resume from")
ap.add_argument("--save", help="checkpoint folder to write after --steps")
ap.add_argument("--steps", type=int, default=0, help="batches to read (0: to the epoch's end)")
ap.add_argument("--skew", type=int, default=0, help="rank r reads steps + skew·r batches")
ap.add_argument("--stops", help="comma-separated batches each rank reads (instead of --steps, --skew)")
ap.add_argument("--resave", help="checkpoint folder to write right after --load, before any batch")
ap.add_argument("--out", required=True)
a = ap.parse_args()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"file://{a.init}", rank=rank, world_size=world)
ds = AugloaderDataset(a.url, pyg=False, digest=True, batch_size=1)
if a.load:
    state = {"loader": ds}
    dcp.load(state, checkpoint_id=a.load)
if a.resave:  # a checkpoint callback that fires at once after the resume
    dcp.save({"loader": ds}, checkpoint_id=a.resave)
steps = a.steps + a.skew * rank if a.steps else 0
if a.stops:
    steps = int(a.stops.split(",")[rank])
got = []
for t in (ds if not (a.stops and steps == 0) else ()):  # a stop at 0: not a batch taken
    got.append({"ids": t["graph_id"].tolist(), "padded": t["padded"].tolist(), "digest": t["digest"]})
    if (steps or a.stops) and len(got) >= steps:
        break
if a.save:
    dcp.save({"loader": ds}, checkpoint_id=a.save)
with open(a.out, "w") as f:
    f.write("\n".join(json.dumps(g) for g in got))
dist.destroy_process_group()
