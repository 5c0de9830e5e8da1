"""Several daemons serve one epoch together (docs/deploy.md).

``augloader.connect(["grpc://a:8815", "grpc://b:8815"])`` gives a client
whose epochs come from every daemon at once: the request's batches j go to
lane j mod D, lane d starting at daemon d (a request with stride D), and the
batches are yielded in order, as one daemon would send them. Every daemon
must serve the same configuration (the identity in its response), checked on
first contact. A daemon that fails — its stream cut, an error, or no batch
within ``batch_timeout`` seconds — has the rest of its lane asked of the
next daemon still alive, from the first batch not yet yielded; the epoch
still arrives whole and in order, and the ``augloader`` logger names the
daemon that failed.
"""
from __future__ import annotations

import logging
import queue
import threading
from typing import List, Optional

from ._wire import ConnectionLost, ServerError

log = logging.getLogger("augloader")


# The identity's fields as package wire's Config.Diff names them (the Go
# client and materialize word a mismatch the same way).
_CONFIG_FIELDS = (("dataset", "dataset"), ("shards_sha256", "shards"), ("served", "served graphs"),
                  ("served_sha256", "served set"), ("seed", "seed"), ("schedule", "schedule"),
                  ("batch_size", "batch size"), ("node_budget", "node budget"), ("edge_budget", "edge budget"),
                  ("remainder", "remainder"), ("wire_compression", "wire compression"), ("edge_fill", "edge fill"),
                  ("shuffle", "shuffle"), ("twins", "twins"), ("twin_weights", "twin weights"))


def config_diff(a: dict, b: dict) -> list:
    """The settings in which identity b differs from a ("seed 11 vs 12"),
    as ``wire.Config.Diff`` names them; empty for one configuration."""
    def show(key, v):
        if key == "wire_compression":
            return v or "none"
        if key == "shuffle":
            return v or "global"
        if key == "edge_fill":
            return v or "default"
        if key in ("twins", "twin_weights"):
            return v or "none"
        if key.endswith("sha256") and isinstance(v, str) and len(v) > 12:
            return v[:12] + "…"
        return v
    out = [f"{name} {show(k, a.get(k))} vs {show(k, b.get(k))}" for k, name in _CONFIG_FIELDS
           if show(k, a.get(k)) != show(k, b.get(k))]
    if not out and a.get("id") != b.get("id"):
        out.append(f"id {a.get('id')} vs {b.get('id')}")
    return out


class ConfigMismatch(ServerError):
    """A daemon serves another configuration than the others."""

    def __init__(self, message: str):
        super().__init__("config_mismatch", message)


def put_unless_stopped(q: queue.Queue, item, stop: threading.Event) -> bool:
    """Puts item on the bounded q for a consumer thread, waiting for room
    but giving up once stop is set (the consumer left); whether it was put."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


class _Lane:
    def __init__(self, client, daemon: int, req: dict, timeout):
        self.daemon = daemon
        self.q: queue.Queue = queue.Queue(maxsize=2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(client, req), daemon=True)
        self.thread.start()

    def _put(self, item) -> bool:
        return put_unless_stopped(self.q, item, self.stop)

    def _run(self, client, req):
        it = None
        try:
            stream = client.epoch(**req)
            if not self._put(("info", stream.info)):
                return
            it = iter(stream)
            for i, b in enumerate(it):
                if stream.batch_digests and len(stream.batch_digests) > i:
                    b.digest = stream.batch_digests[i]
                if not self._put(("batch", b)):
                    return
            self._put(("done", stream))
        except Exception as e:  # noqa: BLE001 - handed to the consumer
            self._put(("error", e))
        finally:
            if it is not None and hasattr(it, "close"):
                it.close()


class MultiClient:
    """A client of several daemons serving one configuration."""

    def __init__(self, clients: list, urls: List[str], batch_timeout: float = 30.0):
        self.clients, self.urls, self.batch_timeout = clients, urls, batch_timeout

    def epoch(self, epoch: int, rank: int = 0, world: int = 1, batch_size: int = 0, start_batch: int = 0,
              digest: bool = False, *, stride: int = 1, count: int = 0, batches_per_epoch: int = 0,
              drop_last: bool = False, view: str = "", fold: int = 0, resume=None, server_digest: bool = False,
              twins: int = 0, twin_weights=None, job: str = ""):
        """Client.epoch's request, its batches read from every daemon
        at once (the same arguments, the same batches in the same order)."""
        base = dict(epoch=epoch, rank=rank, world=world, batch_size=batch_size, digest=digest,
                    batches_per_epoch=batches_per_epoch, drop_last=drop_last, view=view, fold=fold, resume=resume,
                    server_digest=server_digest, twins=twins, twin_weights=twin_weights, job=job)
        return _Epoch(self, base, start_batch, max(int(stride), 1), count, digest).stream()


class _Epoch:
    """One MultiClient.epoch: lane d reads batches d, d+D, … of the request
    (from daemon d, or the next alive once it fails); the stream yields
    them in order."""

    def __init__(self, mc: MultiClient, base: dict, start_batch: int, stride: int, count: int, digest: bool):
        self.mc, self.base, self.start_batch, self.stride, self.digest = mc, base, start_batch, stride, digest
        D = self.D = len(mc.clients)
        self.dead = [False] * D
        # left[d]: lane d's batches not yet yielded.
        self.left = [max(0, (count - d + D - 1) // D) if count else 0 for d in range(D)]
        self.lanes = [self.lane(d, d, self.left[d]) for d in range(D)]
        self.first: dict = {}  # the first identity seen, and its url

    def lane(self, daemon: int, j: int, n: int) -> _Lane:
        """A lane asking daemon for the lane's batches from request batch j on."""
        return _Lane(self.mc.clients[daemon], daemon,
                     dict(self.base, start_batch=self.start_batch + j * self.stride, stride=self.D * self.stride, count=n),
                     None)

    def check(self, info: dict, daemon: int) -> None:
        """Refuses a daemon whose configuration differs from the first's."""
        urls, first = self.mc.urls, self.first
        cfg = info.get("config") or {}
        if not cfg.get("id"):
            raise ConfigMismatch(f"{urls[daemon]} sent no configuration identity: refusing to mix it with others")
        if not first:
            first.update(cfg, url=urls[daemon])
        elif config_diff(first, cfg):
            raise ConfigMismatch(
                f"{first['url']} serves configuration {first['id']}, {urls[daemon]} serves {cfg['id']} "
                f"({first['url']} vs {urls[daemon]}): {', '.join(config_diff(first, cfg))}; refusing to mix them")

    def failover(self, d: int, j: int, why) -> None:
        """Lane d's daemon failed at request batch j: the next alive one
        serves the rest of the lane."""
        old = self.lanes[d]
        old.stop.set()
        self.dead[old.daemon] = True
        for k in range(1, self.D + 1):
            e = (old.daemon + k) % self.D
            if not self.dead[e]:
                log.warning("augloader: daemon %s failed at batch %d (%s); its batches now come from %s",
                            self.mc.urls[old.daemon], j, why, self.mc.urls[e])
                self.lanes[d] = self.lane(e, j, self.left[d])
                return
        raise ConnectionLost(f"every daemon failed; the last, {self.mc.urls[old.daemon]}, at batch {j}: {why}")

    def get(self, d: int):
        try:
            return self.lanes[d].q.get(timeout=self.mc.batch_timeout)
        except queue.Empty:
            return ("error", TimeoutError(f"no batch within {self.mc.batch_timeout:g} s"))

    def contact(self) -> tuple:
        """First contact: every lane's response, checked; (the first
        response, the request's batches)."""
        info0: dict = {}
        total = 0
        d = 0
        while d < self.D:
            kind, v = self.get(d)
            if kind == "info":
                self.check(v, self.lanes[d].daemon)
                self.left[d] = v.get("batches") or 0
                total += self.left[d]
                info0 = info0 or dict(v)
                d += 1
            elif kind == "error" and isinstance(v, (ConfigMismatch, ServerError)) and not isinstance(v, ConnectionLost) \
                    and getattr(v, "code", "") not in ("unavailable", "internal"):
                raise v
            else:
                self.failover(d, d, v if kind == "error" else "the stream ended before its response")
        return info0, total

    def batches(self, stream, total: int):
        try:
            j = 0
            while j < total:
                d = j % self.D
                kind, v = self.get(d)
                if kind == "info":  # a replacement lane's response
                    self.check(v, self.lanes[d].daemon)
                    continue
                if kind == "batch":
                    if self.digest:
                        stream.batch_digests.append(getattr(v, "digest", None))
                    self.left[d] -= 1
                    j += 1
                    yield v
                    continue
                why = v if kind == "error" else f"the stream ended with {self.left[d]} of its batches unsent"
                if isinstance(v, ConfigMismatch):
                    raise v
                self.failover(d, j, why)
            stream.trailer = {"batches": total}
        finally:
            self.close()

    def close(self) -> None:
        for ln in self.lanes:
            ln.stop.set()

    def stream(self):
        from . import Stream

        info0, total = self.contact()
        info0["batches"] = total
        stream = Stream(lambda st: self.batches(st, total), info0)
        stream._close = self.close
        return stream


def connect_many(urls: List[str], token: Optional[str] = None, timeout: Optional[float] = None,
                 batch_timeout: float = 30.0, tls_root_certs=None) -> MultiClient:
    from . import Client

    return MultiClient([Client(u, token=token, timeout=timeout, tls_root_certs=tls_root_certs) for u in urls],
                       list(urls), batch_timeout)
